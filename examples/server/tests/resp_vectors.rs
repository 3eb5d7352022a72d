//! Malformed and edge-case client input answered like Valkey 9.1 byte for byte (ports from
//! the one allocator, `common::ports`; issue 16 item 9): every case of
//! `tests/vectors/resp-cases.json` (captured from redis-server 7.0.15 and valkey-server 9.1.2
//! by `tests/vectors/capture_resp.py`) is replayed on a fresh connection to our server started
//! with the case group's flags; the reply bytes and whether the connection closes must be
//! Valkey 9.1's (where Redis 7.0 differs, src/resp.rs says which rule we follow).
//!
//! Nothing waits for a quiet time: a case that ends with a close reads until the close; for
//! one that does not, a second connection reads the server's byte counters (INFO stats
//! `total_net_input_bytes` / `total_net_output_bytes`, less its own traffic) until the server
//! has read every byte the case sent and written the expected reply, then checks that it
//! wrote nothing more and that the case's connection is still open (CLIENT LIST).
#![allow(clippy::disallowed_methods)]

mod common;

use common::resp_cases::{latin1, parts};
use common::{encode, ports, test_dir, wait_ok, Client, Procs, HANG};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;

/// A second connection that tells what the server read from and wrote to the other
/// connections since [`Meter::rebase`]: the server-wide byte counters less its own requests
/// and replies.
struct Meter {
    c: Client,
    /// The counters at the last rebase (input with that INFO request, output without its
    /// reply).
    base: (u64, u64),
    /// Bytes of this connection's requests since the rebase, the rebase's own excluded.
    own_in: u64,
    /// Bytes of this connection's replies since the rebase, the rebase's own included.
    own_out: u64,
}

impl Meter {
    fn new(port: u16, password: Option<&str>) -> Meter {
        let mut c = Client::connect(port);
        if let Some(p) = password {
            assert_eq!(c.cmd_s(&["AUTH", p]), "+OK\r\n");
        }
        let mut m = Meter {
            c,
            base: (0, 0),
            own_in: 0,
            own_out: 0,
        };
        m.rebase();
        m
    }

    /// `INFO stats` as (total_net_input_bytes, total_net_output_bytes, reply length).
    fn counters(&mut self) -> (u64, u64, u64) {
        let req = encode(&[b"INFO", b"stats"]);
        self.c.send_raw(&req);
        let reply = self.c.read_reply();
        let text = String::from_utf8_lossy(&reply);
        let field = |name: &str| -> u64 {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{name}:")))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| panic!("no {name} in INFO stats: {text}"))
        };
        self.own_in += req.len() as u64;
        (
            field("total_net_input_bytes"),
            field("total_net_output_bytes"),
            reply.len() as u64,
        )
    }

    /// Counts from now on.
    fn rebase(&mut self) {
        let (i, o, len) = self.counters();
        self.base = (i, o);
        self.own_in = 0;
        self.own_out = len;
    }

    /// (bytes read from, bytes written to) the other connections since the rebase.
    fn others(&mut self) -> (u64, u64) {
        let (i, o, len) = self.counters();
        let got = (
            i - self.base.0 - self.own_in,
            o - self.base.1 - self.own_out,
        );
        self.own_out += len;
        got
    }

    /// The CLIENT LIST line of the connection whose address is `addr`, if the server lists it.
    fn client_line(&mut self, addr: &str) -> Option<String> {
        let req = encode(&[b"CLIENT", b"LIST"]);
        self.c.send_raw(&req);
        let reply = self.c.read_reply();
        self.own_in += req.len() as u64;
        self.own_out += reply.len() as u64;
        let want = format!("addr={addr} ");
        String::from_utf8_lossy(&reply)
            .lines()
            .find(|l| l.contains(&want))
            .map(str::to_string)
    }
}

/// Whether the server closed `s` (a read would see the end of the stream), without taking
/// any byte from it.
fn closed(s: &TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut one = [0u8; 1];
    let r = match s.peek(&mut one) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) if e.kind() == ErrorKind::WouldBlock => false,
        Err(e) if e.kind() == ErrorKind::ConnectionReset => true,
        Err(e) => panic!("peek: {e}"),
    };
    s.set_nonblocking(false).unwrap();
    r
}

/// Reads until `want` bytes came or the peer closed; returns what came and whether it closed.
fn read_some(s: &mut TcpStream, want: usize) -> (Vec<u8>, bool) {
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    while got.len() < want {
        match s.read(&mut buf[..(want - got.len()).min(64 * 1024)]) {
            Ok(0) => return (got, true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return (got, true),
            Err(e) => panic!("reading {want} bytes of a reply (a hang after {HANG:?}?): {e}"),
        }
    }
    (got, false)
}

/// Reads until the peer closes; `Err` with what came when it does not close (a hang).
fn read_to_close(s: &mut TcpStream) -> Result<Vec<u8>, Vec<u8>> {
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Ok(got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return Ok(got),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(got)
            }
            Err(e) => panic!("read: {e}"),
        }
    }
}

/// Waits until the server has read `sent` bytes from the case's connection (or closed it);
/// returns whether it closed it. `sent` counts every case connection since the rebase, so
/// only one is open at a time.
fn wait_read(meter: &mut Meter, s: &TcpStream, sent: u64) -> bool {
    wait_ok("the server to read what the case sent", || {
        let (read, _) = meter.others();
        if closed(s) {
            return Ok(true);
        }
        if read == sent {
            return Ok(false);
        }
        assert!(read < sent, "the server read {read} bytes of {sent} sent");
        Err(format!("read {read} of {sent} bytes"))
    })
}

fn run_group(group: &str, port: u16, flags: &[&str]) {
    let doc = common::vector("resp-cases.json");
    let mut procs = Procs::default();
    procs.start(&test_dir(&format!("resp-{group}")), port, flags);
    let password = flags
        .iter()
        .position(|f| *f == "--requirepass")
        .map(|i| flags[i + 1]);
    let mut meter = Meter::new(port, password);
    let mut ran = 0;
    let mut failures = Vec::new();
    for case in doc["cases"].as_array().unwrap() {
        if case["group"].as_str() != Some(group) {
            continue;
        }
        let name = case["name"].as_str().unwrap();
        let want = &case["expect"]["valkey-9.1"];
        let reply = latin1(want["reply"].as_str().unwrap());
        let closed_want = want["closed"].as_bool().unwrap();
        meter.rebase();
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(HANG)).unwrap();
        s.set_write_timeout(Some(HANG)).unwrap();
        let addr = s.local_addr().unwrap().to_string();
        // A server that closes early makes later writes fail: that is fine.
        let first = parts(&case["send"]);
        let _ = s.write_all(&first);
        let mut sent = first.len() as u64;
        let mut was_closed = false;
        if !case["then"].is_null() {
            // The rest goes once the server has read (and answered what it could of) the
            // first part, as a separate read.
            was_closed = wait_read(&mut meter, &s, sent);
            if !was_closed {
                let then = parts(&case["then"]);
                let _ = s.write_all(&then);
                sent += then.len() as u64;
            }
        }
        let got = if closed_want || was_closed {
            // Everything up to the close; a connection that stays open fails after HANG.
            match read_to_close(&mut s) {
                Ok(g) => {
                    was_closed = true;
                    g
                }
                Err(g) => g,
            }
        } else {
            let (mut g, c) = read_some(&mut s, reply.len());
            was_closed = c;
            if !c {
                // The server read all of it and wrote the expected reply: anything more it
                // had to say about these bytes it has written by then.
                let reply_len = reply.len() as u64;
                let (read, written) = wait_ok("the server to read all and answer", || {
                    let (read, written) = meter.others();
                    if closed(&s) || (read == sent && written >= reply_len) {
                        Ok((read, written))
                    } else {
                        Err(format!(
                            "read {read} of {sent} bytes, wrote {written} of {reply_len}"
                        ))
                    }
                });
                if written > reply_len || closed(&s) {
                    // What came beyond the reply is here already (the server counted it as
                    // written): take it for the failure message, and the close if any.
                    s.set_nonblocking(true).unwrap();
                    let mut more = vec![0u8; 64 * 1024];
                    loop {
                        match s.read(&mut more) {
                            Ok(0) => {
                                was_closed = true;
                                break;
                            }
                            Ok(n) => g.extend_from_slice(&more[..n]),
                            Err(e) if e.kind() == ErrorKind::ConnectionReset => {
                                was_closed = true;
                                break;
                            }
                            Err(_) => break,
                        }
                    }
                    s.set_nonblocking(false).unwrap();
                }
                if read == sent && written == reply_len {
                    // Open, and not about to close: the server lists it without flag `c`.
                    match meter.client_line(&addr) {
                        None => was_closed = true,
                        Some(l) => {
                            let flags = l
                                .split(' ')
                                .find_map(|f| f.strip_prefix("flags="))
                                .unwrap_or_default();
                            was_closed = flags.contains('c');
                        }
                    }
                }
            }
            g
        };
        if got != reply || was_closed != closed_want {
            failures.push(format!(
                "{name}: got {:?} (closed {was_closed}), want {:?} (closed {closed_want})",
                String::from_utf8_lossy(&got[..got.len().min(200)]),
                String::from_utf8_lossy(&reply[..reply.len().min(200)]),
            ));
        }
        ran += 1;
    }
    assert!(ran > 0, "no case in group {group}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn default_limits_match_valkey() {
    run_group("default", ports::port(), &[]);
}

#[test]
fn small_bulk_and_query_buffer_limits_match_valkey() {
    run_group(
        "small-limits",
        ports::port(),
        &[
            "--proto-max-bulk-len",
            "1mb",
            "--client-query-buffer-limit",
            "1mb",
        ],
    );
}

#[test]
fn unauthenticated_limits_match_valkey() {
    run_group("auth", ports::port(), &["--requirepass", "secret"]);
}

#[test]
fn query_buffer_limit_closes_like_valkey() {
    run_group(
        "qbuf",
        ports::port(),
        &["--client-query-buffer-limit", "1mb"],
    );
}

//! Client admission (ports from `common::ports`; issue 16 item 9): `maxclients` is
//! enforced with Valkey's text and close, the bus connections count in cluster mode
//! (`tests/vectors/maxclients.json`, captured from redis-server 7.0 and valkey-server 9.1 by
//! `tests/vectors/capture_maxclients.py`), and at the open files limit a new client gets the
//! same answer instead of hanging, with the `accept failed` log line rate-limited.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{bulk_text, ports, test_dir, wait_for, wait_until, Client, Logged, Procs, HANG};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;

/// Outcome of one new client: served (PING answered) or refused with this reply and close.
enum Admission {
    Served(TcpStream),
    Refused { reply: Vec<u8>, closed: bool },
}

fn admit(port: u16) -> Admission {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(HANG)).unwrap();
    s.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    let mut closed = false;
    while !got.ends_with(b"\r\n") {
        match s.read(&mut buf) {
            Ok(0) => {
                closed = true;
                break;
            }
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {
                closed = true;
                break;
            }
            Err(e) => panic!("no answer within {HANG:?} (the client hangs): {e}"),
        }
    }
    if got == b"+PONG\r\n" {
        return Admission::Served(s);
    }
    if !closed {
        closed = match s.read(&mut buf) {
            Ok(0) => true,
            Err(e) => e.kind() == ErrorKind::ConnectionReset,
            Ok(_) => false,
        };
    }
    Admission::Refused { reply: got, closed }
}

/// A served client that the server counts as its only one, with `bus` cluster connections
/// counted (INFO clients): the closes of earlier clients have all been seen.
fn sole_client(port: u16, bus: u64) -> Client {
    wait_for(
        &format!("{port}: one client connected and {bus} cluster connections counted"),
        || {
            let mut c = Client::connect(port);
            // A refused client reads the refusal here, which matches neither line.
            let info = bulk_text(&c.cmd(&["INFO", "clients"]));
            (info.contains("\r\nconnected_clients:1\r\n")
                && info.contains(&format!("\r\ncluster_connections:{bus}\r\n")))
            .then_some(c)
        },
    )
}

/// Opens clients until one is refused, the first being [`sole_client`]'s: (served, refused
/// reply, closed).
fn count_served(port: u16, bus: u64) -> (usize, String, bool) {
    let first = sole_client(port, bus);
    let mut held = Vec::new();
    loop {
        match admit(port) {
            Admission::Served(s) => held.push(s),
            Admission::Refused { reply, closed } => {
                let n = 1 + held.len();
                drop((first, held));
                return (n, String::from_utf8_lossy(&reply).into_owned(), closed);
            }
        }
        assert!(held.len() < 100, "maxclients is not enforced");
    }
}

#[test]
fn maxclients_is_enforced_with_valkeys_text_and_bus_connections_count() {
    let doc: serde_json::Value = common::vector("maxclients.json");
    let want = &doc["expect"]["valkey-9.1"];
    assert_eq!(want, &doc["expect"]["redis-7.0"], "both servers agree");
    let max = doc["maxclients"].as_u64().unwrap().to_string();
    let peer_links = want["peer_links"].as_u64().unwrap();
    let mut procs = Procs::default();
    let dir = test_dir("maxclients");
    let [limited, other] = ports::ports(2)[..] else {
        unreachable!()
    };
    procs.start(&dir, limited, &["--maxclients", &max]);
    procs.start(&dir, other, &[]);
    let (served, reply, closed) = count_served(limited, 0);
    assert_eq!(served as u64, want["alone"]["served"].as_u64().unwrap());
    assert_eq!(reply, want["alone"]["reply"].as_str().unwrap());
    assert_eq!(closed, want["alone"]["closed"].as_bool().unwrap());
    assert_eq!(
        Client::connect(other).cmd_s(&["CLUSTER", "MEET", "127.0.0.1", &limited.to_string()]),
        "+OK\r\n"
    );
    wait_until("the nodes know each other", || {
        [limited, other].iter().all(|&p| {
            let nodes = bulk_text(&Client::connect(p).cmd(&["CLUSTER", "NODES"]));
            nodes.lines().count() == 2 && !nodes.contains("handshake")
        })
    });
    let (served, reply, closed) = count_served(limited, peer_links);
    assert_eq!(
        served as u64,
        want["with_one_peer"]["served"].as_u64().unwrap()
    );
    assert_eq!(reply, want["with_one_peer"]["reply"].as_str().unwrap());
    assert_eq!(closed, want["with_one_peer"]["closed"].as_bool().unwrap());
    let info = bulk_text(&Client::connect(other).cmd(&["INFO", "clients"]));
    assert!(
        info.contains(&format!("cluster_connections:{peer_links}\r\n")),
        "{info}"
    );
}

/// Connections waiting in the accept queue of the listener on `port` (`rx_queue` of its
/// LISTEN sockets in `/proc/net/tcp{,6}`); None while no socket listens there.
fn accept_backlog(port: u16) -> Option<u64> {
    let mut found = None;
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let local = f.get(1).and_then(|a| a.rsplit(':').next());
            if f.get(3) != Some(&"0A")
                || local.and_then(|h| u16::from_str_radix(h, 16).ok()) != Some(port)
            {
                continue;
            }
            // tx_queue:rx_queue; for a listener rx_queue is the accept backlog.
            let rx = f[4]
                .split(':')
                .nth(1)
                .and_then(|h| u64::from_str_radix(h, 16).ok())
                .unwrap_or_else(|| panic!("{table}: {line}"));
            *found.get_or_insert(0) += rx;
        }
    }
    found
}

#[test]
fn clients_at_the_open_files_limit_are_answered_and_the_log_is_rate_limited() {
    let dir = test_dir("fdlimit");
    let log = dir.join("stderr.log");
    let port = ports::port();
    let bus_port = port + ferrocluster_testkit::BUS_OFFSET;
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("-c")
        .arg("ulimit -n 64 && exec \"$0\" \"$@\"")
        .arg(common::BIN)
        .args(["--port", &port.to_string(), "--dir"])
        .arg(&dir);
    let mut server = Logged::spawn(
        &mut cmd,
        &log,
        &format!("ferrocluster-server on {port} (ulimit -n 64)"),
    );
    server.wait_listening(port);
    // Valkey's adjustOpenFilesLimit: 64 descriptors leave room for 64 - 32 clients.
    let info = bulk_text(&Client::connect(port).cmd(&["INFO", "clients"]));
    assert!(info.contains("maxclients:32\r\n"), "{info}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("maxclients has been reduced to 32 to compensate for low ulimit"),
        "{text}"
    );
    // Connections to the bus port take descriptors without counting as clients, so the
    // process runs out of descriptors before it reaches maxclients.
    let bus: Vec<TcpStream> = (0..30)
        .map(|_| TcpStream::connect(("127.0.0.1", bus_port)).expect("bus connect"))
        .collect();
    wait_until("the bus listener has accepted the 30 connections", || {
        accept_backlog(bus_port) == Some(0)
    });
    let mut held = Vec::new();
    let mut refused = 0;
    let mut note = |a: Admission, held: &mut Vec<TcpStream>| match a {
        Admission::Served(s) => {
            held.push(s);
            true
        }
        Admission::Refused { reply, closed } => {
            assert_eq!(
                String::from_utf8_lossy(&reply),
                "-ERR max number of clients + cluster connections reached\r\n"
            );
            assert!(closed);
            refused += 1;
            false
        }
    };
    for _ in 0..60 {
        note(admit(port), &mut held);
    }
    assert!(
        held.len() < 32,
        "served {}: the limit was not reached",
        held.len()
    );
    // Descriptors come back when clients leave: the next one is served (its accept reports
    // the failures the rate limit held back).
    drop(held);
    drop(bus);
    let mut after = Vec::new();
    wait_until("a client is served again", || note(admit(port), &mut after));
    assert!(refused >= 20, "refused {refused}");
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("accept failed"))
        .collect();
    assert!(!lines.is_empty(), "{text}");
    assert!(lines[0].contains("Too many open files"), "{lines:?}");
    // Rate-limited: a line a second at most (by the server's own stamps), each saying how
    // many failures it stands for, and none lost: every refused client was a failed accept.
    let mut logged = 0;
    let mut last: Option<u64> = None;
    for l in &lines {
        if let Some(rest) = l.split("accept failed: ").nth(1) {
            let t = stamp_ms(l);
            if let Some(prev) = last {
                let gap = (t + 86_400_000 - prev) % 86_400_000;
                assert!(
                    gap >= 990,
                    "not rate-limited: {gap} ms apart:\n{}",
                    lines.join("\n")
                );
            }
            last = Some(t);
            logged += 1 + rest
                .split("(and ")
                .nth(1)
                .map_or(0, |n| leading_number(n, l));
        } else if let Some(rest) = l.split("accept failed ").nth(1) {
            assert!(rest.contains("more times before the last success"), "{l}");
            logged += leading_number(rest, l);
        } else {
            panic!("unexpected line: {l}");
        }
    }
    assert!(
        logged >= refused,
        "{refused} refused, {logged} failed accepts logged:\n{}",
        lines.join("\n")
    );
}

/// The time of day (ms) of a log line `pid:M 07 Dec 2026 15:32:41.560 # ...`.
fn stamp_ms(line: &str) -> u64 {
    let clock = line
        .split_whitespace()
        .nth(4)
        .unwrap_or_else(|| panic!("no time in {line:?}"));
    let (hms, ms) = clock.split_once('.').unwrap_or_else(|| panic!("{line:?}"));
    let f: Vec<u64> = hms.split(':').map(|n| n.parse().unwrap()).collect();
    ((f[0] * 60 + f[1]) * 60 + f[2]) * 1000 + ms.parse::<u64>().unwrap()
}

/// The number `text` starts with (`line` names the log line in a failure).
fn leading_number(text: &str, line: &str) -> u64 {
    let digits: String = text.chars().take_while(char::is_ascii_digit).collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("no count in {line:?}"))
}

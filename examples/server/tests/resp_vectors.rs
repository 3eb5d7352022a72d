//! Malformed and edge-case client input answered like Valkey 9.1 byte for byte (ports
//! 23610-23613, bus ports +10000; issue 16 item 9): every case of
//! `tests/vectors/resp-cases.json` (captured from redis-server 7.0.15 and valkey-server 9.1.2
//! by `tests/vectors/capture_resp.py`) is replayed on a fresh connection to our server started
//! with the case group's flags; the reply bytes and whether the connection closes must be
//! Valkey 9.1's (where Redis 7.0 differs, src/resp.rs says which rule we follow).
#![allow(clippy::disallowed_methods)]

mod common;

use common::resp_cases::{latin1, parts};
use common::{test_dir, Procs};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Reads until `want` bytes arrived and then `quiet` passed without more (or the peer
/// closed); returns what came and whether the connection was closed.
fn read_reply(s: &mut TcpStream, want: usize, quiet: Duration) -> (Vec<u8>, bool) {
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let wait = if got.len() >= want {
            quiet
        } else {
            deadline.saturating_duration_since(Instant::now())
        };
        if wait.is_zero() {
            return (got, false);
        }
        s.set_read_timeout(Some(wait)).unwrap();
        match s.read(&mut buf) {
            Ok(0) => return (got, true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if got.len() >= want {
                    return (got, false);
                }
            }
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return (got, true),
            Err(e) => panic!("read: {e}"),
        }
    }
}

fn run_group(group: &str, port: u16, flags: &[&str]) {
    let doc = common::vector("resp-cases.json");
    let mut procs = Procs::default();
    procs.start(&test_dir(&format!("resp-{group}")), port, flags);
    let mut ran = 0;
    let mut failures = Vec::new();
    for case in doc["cases"].as_array().unwrap() {
        if case["group"].as_str() != Some(group) {
            continue;
        }
        let name = case["name"].as_str().unwrap();
        let want = &case["expect"]["valkey-9.1"];
        let reply = latin1(want["reply"].as_str().unwrap());
        let closed = want["closed"].as_bool().unwrap();
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        // A server that closes early makes later writes fail: that is fine.
        let _ = s.write_all(&parts(&case["send"]));
        let mut got = Vec::new();
        let mut was_closed = false;
        if !case["then"].is_null() {
            let (g, c) = read_reply(&mut s, 0, Duration::from_millis(300));
            got = g;
            was_closed = c;
            if !c {
                let _ = s.write_all(&parts(&case["then"]));
            }
        }
        if !was_closed {
            // Wait for the rest of the expected reply; then for a close when one is
            // expected, or a short quiet time to see nothing more comes.
            let quiet = Duration::from_millis(if closed { 2000 } else { 150 });
            let (g, c) = read_reply(&mut s, reply.len().saturating_sub(got.len()), quiet);
            got.extend(g);
            was_closed = c;
        }
        if got != reply || was_closed != closed {
            failures.push(format!(
                "{name}: got {:?} (closed {was_closed}), want {:?} (closed {closed})",
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
    run_group("default", 23610, &[]);
}

#[test]
fn small_bulk_and_query_buffer_limits_match_valkey() {
    run_group(
        "small-limits",
        23611,
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
    run_group("auth", 23612, &["--requirepass", "secret"]);
}

#[test]
fn query_buffer_limit_closes_like_valkey() {
    run_group("qbuf", 23613, &["--client-query-buffer-limit", "1mb"]);
}

//! Client admission (ports 23620-23622, bus ports +10000; issue 16 item 9): `maxclients` is
//! enforced with Valkey's text and close, the bus connections count in cluster mode
//! (`tests/vectors/maxclients.json`, captured from redis-server 7.0 and valkey-server 9.1 by
//! `tests/vectors/capture_maxclients.py`), and at the open files limit a new client gets the
//! same answer instead of hanging, with the `accept failed` log line rate-limited.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{bulk_text, test_dir, wait_until, Client, Procs};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Outcome of one new client: served (PING answered) or refused with this reply and close.
enum Admission {
    Served(TcpStream),
    Refused { reply: Vec<u8>, closed: bool },
}

fn admit(port: u16) -> Admission {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
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
            Err(e) => panic!("no answer within 5 s (the client hangs): {e}"),
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

/// Opens clients until one is refused: (served, refused reply, closed).
fn count_served(port: u16) -> (usize, String, bool) {
    let mut held = Vec::new();
    loop {
        match admit(port) {
            Admission::Served(s) => held.push(s),
            Admission::Refused { reply, closed } => {
                let n = held.len();
                drop(held);
                // Let the server see the closes before the next count.
                std::thread::sleep(Duration::from_millis(300));
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
    let mut procs = Procs::default();
    let dir = test_dir("maxclients");
    procs.start(&dir, 23620, &["--maxclients", &max]);
    procs.start(&dir, 23621, &[]);
    let (served, reply, closed) = count_served(23620);
    assert_eq!(served as u64, want["alone"]["served"].as_u64().unwrap());
    assert_eq!(reply, want["alone"]["reply"].as_str().unwrap());
    assert_eq!(closed, want["alone"]["closed"].as_bool().unwrap());
    assert_eq!(
        Client::connect(23621).cmd_s(&["CLUSTER", "MEET", "127.0.0.1", "23620"]),
        "+OK\r\n"
    );
    wait_until("the nodes know each other", || {
        [23620, 23621].iter().all(|&p| {
            let nodes = bulk_text(&Client::connect(p).cmd(&["CLUSTER", "NODES"]));
            nodes.lines().count() == 2 && !nodes.contains("handshake")
        })
    });
    std::thread::sleep(Duration::from_millis(300));
    let (served, reply, closed) = count_served(23620);
    assert_eq!(
        served as u64,
        want["with_one_peer"]["served"].as_u64().unwrap()
    );
    assert_eq!(reply, want["with_one_peer"]["reply"].as_str().unwrap());
    assert_eq!(closed, want["with_one_peer"]["closed"].as_bool().unwrap());
    let info = bulk_text(&Client::connect(23621).cmd(&["INFO", "clients"]));
    assert!(info.contains("cluster_connections:2\r\n"), "{info}");
}

#[test]
fn clients_at_the_open_files_limit_are_answered_and_the_log_is_rate_limited() {
    use std::process::{Command, Stdio};
    let dir = test_dir("fdlimit");
    let log = dir.join("stderr.log");
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 64 && exec \"$0\" \"$@\"")
        .arg(common::BIN)
        .args(["--port", "23622", "--dir"])
        .arg(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
        .spawn()
        .expect("spawn");
    struct Kill<'a>(&'a mut std::process::Child);
    impl Drop for Kill<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _kill = Kill(&mut child);
    common::wait_for_port(23622);
    // Valkey's adjustOpenFilesLimit: 64 descriptors leave room for 64 - 32 clients.
    let info = bulk_text(&Client::connect(23622).cmd(&["INFO", "clients"]));
    assert!(info.contains("maxclients:32\r\n"), "{info}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("maxclients has been reduced to 32 to compensate for low ulimit"),
        "{text}"
    );
    // Connections to the bus port take descriptors without counting as clients, so the
    // process runs out of descriptors before it reaches maxclients.
    let bus: Vec<TcpStream> = (0..30)
        .map(|_| TcpStream::connect(("127.0.0.1", 33622)).expect("bus connect"))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut held = Vec::new();
    let mut refused = 0;
    for _ in 0..60 {
        match admit(23622) {
            Admission::Served(s) => held.push(s),
            Admission::Refused { reply, closed } => {
                assert_eq!(
                    String::from_utf8_lossy(&reply),
                    "-ERR max number of clients + cluster connections reached\r\n"
                );
                assert!(closed);
                refused += 1;
            }
        }
    }
    assert!(
        held.len() < 32,
        "served {}: the limit was not reached",
        held.len()
    );
    assert!(refused >= 20, "refused {refused}");
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("accept failed"))
        .collect();
    assert!(!lines.is_empty(), "{text}");
    assert!(lines[0].contains("Too many open files"), "{lines:?}");
    assert!(lines.len() <= 5, "not rate-limited: {} lines", lines.len());
    // Descriptors come back when clients leave: the next one is served.
    drop(held);
    drop(bus);
    wait_until("a client is served again", || {
        matches!(admit(23622), Admission::Served(_))
    });
}

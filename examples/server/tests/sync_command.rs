//! `SYNC`, the pre-PSYNC replication handshake that tools and Valkey's own test harness use
//! to watch a primary's stream (`attach_to_replication_stream`): the RDB as `$<len>\r\n` and
//! its bytes (no `+FULLRESYNC`, no CRLF after it), then the write stream. The same steps on
//! valkey-server 9.1 and on ours: the RDB is an RDB, and the first commands after it are
//! `SELECT 0` and the write another client made. Ports from `common::ports`.

mod common;

use common::{encode, frame_len, ports, start_real_server, test_dir, Client, Procs};
use std::io::Read;

/// Reads one `\n`-terminated line (after any lone `\n` keepalives) from `c`.
fn line(c: &mut Client) -> String {
    let mut out = Vec::new();
    let mut b = [0u8; 1];
    loop {
        c.stream.read_exact(&mut b).expect("read");
        if b[0] == b'\n' {
            if out.is_empty() {
                continue; // a keepalive newline before the payload
            }
            break;
        }
        out.push(b[0]);
    }
    String::from_utf8_lossy(&out)
        .trim_end_matches('\r')
        .to_string()
}

/// The next command of the stream that is not a PING, as its arguments.
fn next_command(c: &mut Client, pending: &mut Vec<u8>) -> Vec<String> {
    loop {
        if let Some(n) = frame_len(pending, 0) {
            let frame: Vec<u8> = pending.drain(..n).collect();
            let text = String::from_utf8_lossy(&frame).to_string();
            let args: Vec<String> = text
                .split("\r\n")
                .skip(1)
                .filter(|p| !p.starts_with('$') && !p.is_empty())
                .map(str::to_string)
                .collect();
            if args.first().is_some_and(|a| a.eq_ignore_ascii_case("ping")) {
                continue;
            }
            return args;
        }
        let mut buf = [0u8; 4096];
        let n = c.stream.read(&mut buf).expect("read the stream");
        assert!(n > 0, "the stream closed");
        pending.extend_from_slice(&buf[..n]);
    }
}

/// SYNC on `port`, then a write from another client: (the RDB's first 5 bytes, the first two
/// commands of the stream).
fn sync_then_write(port: u16) -> (String, Vec<Vec<String>>) {
    let mut s = Client::connect(port);
    s.send_raw(&encode(&[b"SYNC"]));
    let head = line(&mut s);
    let len: usize = head
        .strip_prefix('$')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{port}: SYNC answered {head:?}"));
    let mut rdb = vec![0u8; len];
    s.stream.read_exact(&mut rdb).expect("the RDB");
    let magic = String::from_utf8_lossy(&rdb[..5]).to_string();
    assert_eq!(Client::connect(port).cmd_s(&["SET", "k", "v"]), "+OK\r\n");
    let mut pending = Vec::new();
    let cmds = vec![
        next_command(&mut s, &mut pending),
        next_command(&mut s, &mut pending),
    ];
    (magic, cmds)
}

#[test]
fn sync_sends_the_rdb_then_the_stream_as_valkey_does() {
    let dir = test_dir("sync-command");
    let [ours, valkey] = ports::ports(2)[..] else {
        unreachable!()
    };
    let mut procs = Procs::default();
    procs.start(&dir, ours, &["--cluster-enabled", "no"]);
    let _valkey = start_real_server("valkey-server", valkey, &dir.join("valkey"), &[]);
    let (magic, want) = sync_then_write(valkey);
    assert_eq!(magic, "VALKE", "valkey-server 9.1's RDB (`VALKEY080`)");
    let (magic, got) = sync_then_write(ours);
    // Ours writes RDB 11 (`REDIS0011`), which valkey-server 9.1 and redis-server 7.0 load.
    assert_eq!(magic, "REDIS");
    assert_eq!(got, want);
    assert_eq!(want[1], ["SET", "k", "v"]);
}

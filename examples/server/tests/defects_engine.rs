//! Issue 16, the engine-side defects seen on real server processes (ports from the one
//! allocator, `common::ports`; bus ports +10000 kept free too): a manual failover under writes (item 1), CLUSTER SHARDS after a failover
//! (item 3), nodes.conf from a newer node (item 5), two nodes with one node ID (item 6), a
//! replica with a stale view of its primary's configEpoch (item 11). Expected values come
//! from redis-server 7.0.15 / valkey-server 9.1.2 doing the same (the notes).
#![allow(clippy::disallowed_methods)]

mod common;

use common::{
    bulk_text, detect_failures_fast, manual_failover_timeout_hang, ports, require_redis_tools,
    six_node_cluster, test_dir, wait_until, Client, Procs,
};
use ferrocluster_slot::{key_hash_slot, Slot};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

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
    wait_until("the replica promoted by CLUSTER FAILOVER", || {
        role(replica) == "master"
    });
    wait_until("every node sees the new owner", || {
        ports.iter().all(|&p| owner_of(p, slot) == Some(replica))
    });
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
    let ports = six_node_cluster(&mut procs, &dir, ports::block(6));
    manual_failover_timeout_hang(&ports);
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
    // A SET the primary read before its pause is acknowledged; one it read only after the
    // pause is answered with a redirect to the promoted replica once the failover is done (as
    // redis-server 7.0 answers the clients it paused): not acknowledged, so not owed.
    let moved = format!("-MOVED 0 127.0.0.1:{replica}\r\n");
    let mut acked = Vec::new();
    for k in &keys {
        let r = String::from_utf8_lossy(&c.read_reply()).into_owned();
        if r == "+OK\r\n" {
            acked.push(k.clone());
        } else {
            assert_eq!(r, moved, "SET {k} during the manual failover");
        }
    }
    wait_until("the replica promoted by CLUSTER FAILOVER", || {
        role(replica) == "master"
    });
    all_present(replica, &acked, "v1");
    // A second manual failover back, right after another burst (not pipelined).
    let mut n = Client::connect(replica);
    for k in &keys {
        assert_eq!(n.cmd_s(&["SET", k, "v2"]), "+OK\r\n");
    }
    wait_until("the old primary follows", || {
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
    let ports = six_node_cluster(&mut procs, &dir, ports::block(6));
    manual_failover_timeout_hang(&ports);
    let (primary, replica) = shard_of(ports[0], 0);
    let keys = keys_of_slot(0, 100_000);
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicUsize::new(0));
    // Three writers on their own connections, each writing its own keys until it gets a
    // reply other than +OK (MOVED once the shard switched) or is told to stop.
    let writers: Vec<_> = (0..3)
        .map(|w| {
            let (stop, written) = (Arc::clone(&stop), Arc::clone(&written));
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
                    written.fetch_add(1, Ordering::Relaxed);
                }
                acked
            })
        })
        .collect();
    // The failover starts while the writers are under way: once each has had writes
    // acknowledged, whatever the machine's speed.
    wait_until("the writers under way", || {
        written.load(Ordering::Relaxed) >= 300
    });
    let mut f = Client::connect(replica);
    assert_eq!(f.cmd_s(&["CLUSTER", "FAILOVER"]), "+OK\r\n");
    // The deadline only bounds a hang: the promotion may take as long as the machine needs.
    wait_until("the replica promoted by CLUSTER FAILOVER", || {
        role(replica) == "master"
    });
    stop.store(true, Ordering::Relaxed);
    let acked: Vec<String> = writers
        .into_iter()
        .flat_map(|w| w.join().expect("writer"))
        .collect();
    assert!(!acked.is_empty(), "the writers got no write acknowledged");
    all_present(replica, &acked, "w");
    wait_until("every node sees the new owner", || {
        ports.iter().all(|&p| owner_of(p, 0) == Some(replica))
    });
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
    let ports = six_node_cluster(&mut procs, &dir, ports::block(6));
    let (primary, replica) = shard_of(ports[0], 0);
    let old = myid(primary);
    detect_failures_fast(&ports);
    procs.kill(primary);
    let alive: Vec<u16> = ports.iter().copied().filter(|&p| p != primary).collect();
    wait_until("the replica takes over", || {
        alive.iter().all(|&p| owner_of(p, 0) == Some(replica))
    });
    wait_until("the old primary is FAIL everywhere", || {
        alive.iter().all(|&p| {
            nodes(p)
                .iter()
                .any(|l| l[0] == old && l[2].contains("fail") && !l[2].contains("fail?"))
        })
    });
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

// ----- item 4: stale keys on a primary that does not own their slot -----

fn count_in_slot(port: u16, slot: u16) -> i64 {
    let r = Client::connect(port).cmd_s(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]);
    r.trim_start_matches(':')
        .trim_end()
        .parse()
        .unwrap_or_else(|_| panic!("COUNTKEYSINSLOT on {port}: {r:?}"))
}

/// The kind of issue 16 item 4 on real processes: a primary dies holding the keys of a slot,
/// another node takes the slot over (IMPORTING + SETSLOT NODE, a configEpoch bump), and the
/// dead primary's replica — whose data still has those keys, its primary never deleted them
/// — is promoted. It must delete the keys of the slot it does not own (Valkey deletes keys of
/// slots it lost, and of slots assigned elsewhere at startup).
#[test]
fn a_promoted_replica_deletes_the_keys_of_a_slot_its_dead_primary_lost() {
    require_redis_tools();
    let mut procs = Procs::default();
    let dir = test_dir("stale-keys");
    let ports = six_node_cluster(&mut procs, &dir, ports::block(6));
    let (primary, replica) = shard_of(ports[0], 0);
    let (target, _) = shard_of(ports[0], 16383);
    let mut c = Client::connect(primary);
    for k in keys_of_slot(0, 50) {
        assert_eq!(c.cmd_s(&["SET", &k, "v"]), "+OK\r\n");
    }
    for k in keys_of_slot(1, 20) {
        assert_eq!(c.cmd_s(&["SET", &k, "v"]), "+OK\r\n");
    }
    wait_until("the replica has the keys", || {
        count_in_slot(replica, 0) == 50 && count_in_slot(replica, 1) == 20
    });
    let (pid, tid) = (myid(primary), myid(target));
    // The replica must not win its election before it heard the target's claim on slot 0
    // (with a higher configEpoch it would claim slot 0 too, and the target's claim would
    // never hold everywhere): it may fail over only once its view shows the target owning
    // slot 0. Its data age may not stop it either, however long the machine takes until then.
    let mut rc = Client::connect(replica);
    for (name, value) in [
        ("cluster-replica-no-failover", "yes"),
        ("cluster-replica-validity-factor", "0"),
    ] {
        assert_eq!(rc.cmd_s(&["CONFIG", "SET", name, value]), "+OK\r\n");
    }
    detect_failures_fast(&ports);
    procs.kill(primary);
    let mut t = Client::connect(target);
    assert_eq!(
        t.cmd_s(&["CLUSTER", "SETSLOT", "0", "IMPORTING", &pid]),
        "+OK\r\n"
    );
    assert_eq!(
        t.cmd_s(&["CLUSTER", "SETSLOT", "0", "NODE", &tid]),
        "+OK\r\n"
    );
    wait_until("the replica to see the target owning slot 0", || {
        owner_of(replica, 0) == Some(target)
    });
    assert_eq!(
        rc.cmd_s(&["CONFIG", "SET", "cluster-replica-no-failover", "no"]),
        "+OK\r\n"
    );
    let alive: Vec<u16> = ports.iter().copied().filter(|&p| p != primary).collect();
    wait_until(
        "the replica promoted, slot 0 the target's everywhere",
        || {
            role(replica) == "master"
                && alive
                    .iter()
                    .all(|&p| owner_of(p, 0) == Some(target) && owner_of(p, 1) == Some(replica))
        },
    );
    wait_until("the promoted replica drops the keys of slot 0", || {
        count_in_slot(replica, 0) == 0
    });
    // Its own slot keeps its keys.
    assert_eq!(count_in_slot(replica, 1), 20);
}

// ----- item 5: nodes.conf written by a newer node -----

/// Starts a node once so it writes its nodes.conf, stops it, and returns (dir, file text).
fn fresh_conf(
    procs: &mut Procs,
    base: &std::path::Path,
    port: u16,
) -> (std::path::PathBuf, String) {
    let dir = procs.start(base, port, &["--cluster-node-timeout", "2000"]);
    let id = myid(port);
    procs.kill(port);
    let conf = std::fs::read_to_string(dir.join("nodes.conf")).expect("nodes.conf written");
    assert!(conf.contains(&id), "{conf}");
    (dir, conf)
}

/// The myself line of a nodes.conf with `f` applied to its address field.
fn edit_myself_address(conf: &str, f: impl Fn(&str) -> String) -> String {
    conf.lines()
        .map(|l| {
            let mut w: Vec<String> = l.split(' ').map(str::to_string).collect();
            if w.len() > 2 && w[2].contains("myself") {
                w[1] = f(&w[1]);
            }
            w.join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

#[test]
fn nodes_conf_with_an_unknown_aux_field_loads_and_the_field_is_dropped() {
    let base = test_dir("conf-future");
    let mut procs = Procs::default();
    let port = ports::port();
    let (dir, conf) = fresh_conf(&mut procs, &base, port);
    let id = conf.lines().find(|l| l.contains("myself")).unwrap()[..40].to_string();
    let newer = edit_myself_address(&conf, |a| format!("{a},future-field=xyz"));
    assert!(newer.contains(",future-field=xyz "), "{newer}");
    std::fs::write(dir.join("nodes.conf"), &newer).unwrap();
    procs.start(&base, port, &["--cluster-node-timeout", "2000"]);
    assert_eq!(Client::connect(port).cmd_s(&["PING"]), "+PONG\r\n");
    assert_eq!(myid(port), id, "the saved identity was loaded");
    let log = std::fs::read_to_string(dir.join("stderr.log")).unwrap();
    let warned: Vec<&str> = log.lines().filter(|l| l.contains("future-field")).collect();
    assert_eq!(warned.len(), 1, "logged once:\n{log}");
    assert!(
        warned[0].contains("line 1") && warned[0].contains("unknown aux field"),
        "{}",
        warned[0]
    );
    // The field is kept out of the model: the file the node saves at start drops it.
    wait_until("nodes.conf rewritten", || {
        let now = std::fs::read_to_string(dir.join("nodes.conf")).unwrap_or_default();
        now.contains(&id) && !now.contains("future-field")
    });
}

#[test]
fn nodes_conf_with_a_malformed_known_aux_field_is_refused_with_line_and_reason() {
    let base = test_dir("conf-badaux");
    let mut procs = Procs::default();
    let port = ports::port();
    let (dir, conf) = fresh_conf(&mut procs, &base, port);
    let bad = edit_myself_address(&conf, |a| {
        a.split(',')
            .map(|f| {
                if f.starts_with("shard-id=") {
                    "shard-id=xyz".to_string()
                } else {
                    f.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join(",")
    });
    assert!(bad.contains("shard-id=xyz"), "{bad}");
    std::fs::write(dir.join("nodes.conf"), &bad).unwrap();
    let (code, stderr) = common::run_to_exit(&dir, port, &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("line 1") && stderr.contains("\"xyz\""),
        "line and reason: {stderr}"
    );
}

// ----- item 6: two nodes with one node ID -----

/// A user copies a node's nodes.conf into a second node's directory: both start with one
/// node ID. A MEET between them is refused and logged on both sides with both addresses;
/// neither shows myself at the other's address.
#[test]
fn a_copied_nodes_conf_gives_two_nodes_one_id_and_they_refuse_each_other() {
    let base = test_dir("conf-copied");
    let mut procs = Procs::default();
    let [a, b] = ports::ports(2)[..] else {
        unreachable!()
    };
    let (_, conf) = fresh_conf(&mut procs, &base, a);
    let twin_dir = base.join(format!("node-{b}"));
    std::fs::create_dir_all(&twin_dir).unwrap();
    std::fs::write(twin_dir.join("nodes.conf"), &conf).unwrap();
    let flags = ["--cluster-node-timeout", "2000"];
    let a_dir = procs.start(&base, a, &flags);
    procs.start(&base, b, &flags);
    let id = myid(a);
    assert_eq!(myid(b), id, "the copy carries the same identity");
    assert_eq!(
        Client::connect(a).cmd_s(&["CLUSTER", "MEET", "127.0.0.1", &b.to_string()]),
        "+OK\r\n"
    );
    let logged = |dir: &std::path::Path| {
        std::fs::read_to_string(dir.join("stderr.log"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("another node uses my node ID"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    wait_until("both sides report the collision", || {
        !logged(&a_dir).is_empty() && !logged(&twin_dir).is_empty()
    });
    let bus = |p: u16| p + ferrocluster_testkit::BUS_OFFSET;
    assert!(
        logged(&twin_dir)[0].contains(&format!("127.0.0.1:{a}@{}", bus(a))),
        "{:?}",
        logged(&twin_dir)
    );
    assert!(
        logged(&a_dir)[0].contains(&format!("{b}@{}", bus(b))),
        "{:?}",
        logged(&a_dir)
    );
    // The MEET left a handshake entry on the node that sent it; once the refusal removed it
    // (a wait for that, not for some time), each node knows only itself, at its own address.
    wait_until("both nodes to know only themselves", || {
        nodes(a).len() == 1 && nodes(b).len() == 1
    });
    for port in [a, b] {
        let lines = nodes(port);
        assert_eq!(lines.len(), 1, "node {port} keeps only myself: {lines:?}");
        assert!(lines[0][2].contains("myself"));
        assert_eq!(
            port_of(&lines[0][1]),
            port,
            "node {port}: myself moved: {lines:?}"
        );
    }
}

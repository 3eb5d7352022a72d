//! Six-node clusters driven by the tools people use: redis-cli (--cluster create/check, -c),
//! redis-py's RedisCluster, redis-benchmark --cluster; replication and WAIT; the demo.
//! Ports from `common::ports` (six consecutive ones per cluster, bus ports +10000). Missing
//! tools make the tests fail with an install hint.

mod common;

use common::{
    bulk_text, ports, require_redis_py, require_redis_tools, run_bounded, six_node_cluster,
    test_dir, wait_until, Client, Logged, Procs, BIN, HANG,
};
use std::path::PathBuf;
use std::time::Duration;

fn script(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(name)
        .display()
        .to_string()
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

#[test]
fn redis_cli_redis_py_and_redis_benchmark_against_six_nodes() {
    require_redis_tools();
    require_redis_py();
    let mut procs = Procs::default();
    let dir = test_dir("realclients");
    let ports = six_node_cluster(&mut procs, &dir, ports::block(6));
    // --cluster create's layout: the first three are the primaries, in order; "foo" (slot
    // 12182) is the third one's.
    let third = ports[2];
    let moved_foo = format!("-MOVED 12182 127.0.0.1:{third}\r\n");

    // redis-cli --cluster check passes.
    let (ok, out) = run_bounded(
        "redis-cli",
        &s(&["--cluster", "check", &format!("127.0.0.1:{}", ports[0])]),
        HANG,
    );
    assert!(ok, "redis-cli --cluster check failed:\n{out}");
    assert!(
        out.contains("[OK] All nodes agree about slots configuration."),
        "{out}"
    );
    assert!(out.contains("[OK] All 16384 slots covered."), "{out}");

    // redis-cli -c follows MOVED across slots.
    for (k, v) in [
        ("foo", "1"),
        ("bar", "2"),
        ("hello", "3"),
        ("{user1}:x", "4"),
    ] {
        let (ok, out) = run_bounded(
            "redis-cli",
            &s(&["-c", "-p", &ports[1].to_string(), "SET", k, v]),
            HANG,
        );
        assert!(ok && out.trim() == "OK", "SET {k}: {out}");
        let (ok, out) = run_bounded(
            "redis-cli",
            &s(&["-c", "-p", &third.to_string(), "GET", k]),
            HANG,
        );
        assert!(ok && out.trim() == v, "GET {k}: {out}");
    }
    // Without -c a non-owner answers MOVED to the owner (slot of foo is 12182, owned by the
    // third primary in --cluster create's layout).
    let mut c = Client::connect(ports[0]);
    assert_eq!(c.cmd_s(&["GET", "foo"]), moved_foo);

    // redis-py RedisCluster: 10,000 keys across the slots, RESP2 then RESP3.
    let (ok, out) = run_bounded(
        "python3",
        &[
            script("redis_py_cluster.py"),
            ports[0].to_string(),
            "10000".into(),
            "2".into(),
        ],
        Duration::from_secs(180),
    );
    assert!(ok, "redis-py (RESP2) failed:\n{out}");
    assert!(out.contains("RESULT written=10000 read_ok=10000"), "{out}");
    let (ok, out) = run_bounded(
        "python3",
        &[
            script("redis_py_cluster.py"),
            ports[3].to_string(),
            "2000".into(),
            "3".into(),
        ],
        Duration::from_secs(120),
    );
    assert!(ok, "redis-py (RESP3) failed:\n{out}");
    assert!(out.contains("RESULT written=2000 read_ok=2000"), "{out}");

    // Replication: each replica holds what its primary holds, and WAIT sees the replica.
    wait_until("replicas hold their primary's keys", || {
        let sizes: Vec<String> = ports
            .iter()
            .map(|&p| Client::connect(p).cmd_s(&["DBSIZE"]))
            .collect();
        let mut primaries = Vec::new();
        let mut replicas = Vec::new();
        for (&p, size) in ports.iter().zip(&sizes) {
            let role = bulk_text(&Client::connect(p).cmd(&["INFO", "replication"]));
            if role.contains("role:master") {
                primaries.push(size.clone());
            } else {
                replicas.push(size.clone());
            }
        }
        primaries.sort();
        replicas.sort();
        primaries.len() == 3 && primaries == replicas
    });
    let mut owner = Client::connect(third);
    assert_eq!(owner.cmd_s(&["SET", "foo", "after-wait"]), "+OK\r\n");
    assert_eq!(owner.cmd_s(&["WAIT", "1", "60000"]), ":1\r\n");
    let replica_port = ports
        .iter()
        .copied()
        .find(|&p| {
            bulk_text(&Client::connect(p).cmd(&["INFO", "replication"]))
                .contains(&format!("master_port:{third}\r\n"))
        })
        .unwrap_or_else(|| panic!("a replica of {third}"));
    let mut r = Client::connect(replica_port);
    assert_eq!(r.cmd_s(&["GET", "foo"]), moved_foo);
    assert_eq!(r.cmd_s(&["READONLY"]), "+OK\r\n");
    assert_eq!(r.cmd_s(&["GET", "foo"]), "$10\r\nafter-wait\r\n");
    assert_eq!(r.cmd_s(&["SET", "foo", "x"]), moved_foo);
    assert!(bulk_text(&r.cmd(&["INFO", "replication"])).contains("master_link_status:up"));
    assert!(r.cmd_s(&["ROLE"]).starts_with("*5\r\n$5\r\nslave\r\n"));

    // PUBLISH reaches subscribers on every node over the bus; SPUBLISH reaches the shard
    // (here: a subscriber on the replica of the channel's slot owner).
    let mut sub = Client::connect(ports[5]);
    assert_eq!(
        sub.cmd_s(&["SUBSCRIBE", "news"]),
        "*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n"
    );
    let mut publisher = Client::connect(ports[0]);
    assert_eq!(publisher.cmd_s(&["PUBLISH", "news", "hello"]), ":0\r\n");
    assert_eq!(
        String::from_utf8_lossy(&sub.read_reply()),
        "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nhello\r\n"
    );
    let slot_owner = third; // "foo" and "{foo}x" hash to 12182
    let mut ssub = Client::connect(replica_port);
    assert_eq!(
        ssub.cmd_s(&["SSUBSCRIBE", "{foo}x"]),
        "*3\r\n$10\r\nssubscribe\r\n$6\r\n{foo}x\r\n:1\r\n"
    );
    assert_eq!(
        Client::connect(slot_owner).cmd_s(&["SPUBLISH", "{foo}x", "s1"]),
        ":0\r\n"
    );
    assert_eq!(
        String::from_utf8_lossy(&ssub.read_reply()),
        "*3\r\n$8\r\nsmessage\r\n$6\r\n{foo}x\r\n$2\r\ns1\r\n"
    );

    // redis-benchmark --cluster runs (a short, bounded run).
    let (ok, out) = run_bounded(
        "redis-benchmark",
        &s(&[
            "--cluster",
            "-p",
            &ports[0].to_string(),
            "-t",
            "set,get",
            "-n",
            "20000",
            "-c",
            "10",
            "-q",
        ]),
        Duration::from_secs(120),
    );
    assert!(ok, "redis-benchmark --cluster failed:\n{out}");
    assert!(out.contains("SET:") && out.contains("GET:"), "{out}");
}

/// redis-py keeps working through `kill -9` of a primary (its replica is elected) and loses
/// no acknowledged write, and the restarted old primary comes back as a replica that answers
/// MOVED to the new address.
///
/// Replication inside a shard is asynchronous: a write the primary acknowledged a moment
/// before a `kill -9` may not have reached its replica. So the writer is paused (between two
/// writes) before the kill, and the primary confirms with `WAIT 1` that its replica holds its
/// whole stream (our WAIT waits for the node's replication offset at the call, whoever wrote):
/// every acknowledged write survives, `lost=0`.
#[test]
fn redis_py_survives_kill_9_of_a_primary() {
    require_redis_tools();
    require_redis_py();
    let mut procs = Procs::default();
    let dir = test_dir("failover");
    let ports = six_node_cluster(&mut procs, &dir, ports::block(6));
    // The owner of slot 12182 ("foo") in --cluster create's layout.
    let victim = ports[2];
    // redis-py writes until told to stop; once it has written, it is paused, the owner of slot
    // 12182 confirms its replica has everything and is killed, and the writer goes on; it is
    // told to stop once a replica took the slot over, and ends with a write acknowledged after
    // its last failed one.
    let ready = dir.join("writer.ready");
    let stop = dir.join("writer.stop");
    let pause = dir.join("writer.pause");
    let paused = dir.join("writer.paused");
    let mut cmd = std::process::Command::new("python3");
    cmd.arg("-u")
        .arg(script("redis_py_failover.py"))
        .arg(ports[0].to_string())
        .arg(&ready)
        .arg(&stop)
        .arg(&pause)
        .arg(&paused);
    let log = dir.join("writer.log");
    let mut writer = Logged::spawn(&mut cmd, &log, "redis_py_failover.py");
    let mut writer_at = |what: &str, file: &std::path::Path| {
        wait_until(what, || {
            if let Some(status) = writer.exited() {
                panic!(
                    "redis_py_failover.py exited ({status}) early:\n{}",
                    common::log_tail(&log, 40)
                );
            }
            file.exists()
        })
    };
    writer_at("redis-py to have written", &ready);
    std::fs::write(&pause, b"").expect("write the pause file");
    writer_at("redis-py to pause", &paused);
    // Every write a primary acknowledged is on its replica: the victim's, so that its kill
    // loses none; the other primaries' too, so that none is lost either if a stall of the
    // loaded machine made one of them fail over while the short node timeout below is set.
    let mut primaries = Vec::new();
    for &p in &ports {
        if bulk_text(&Client::connect(p).cmd(&["INFO", "replication"])).contains("role:master") {
            primaries.push(p);
            assert_eq!(
                Client::connect(p).cmd_s(&["WAIT", "1", &HANG.as_millis().to_string()]),
                ":1\r\n",
                "the replica of {p} acknowledged its stream"
            );
        }
    }
    assert!(
        primaries.len() == 3 && primaries.contains(&victim),
        "primaries {primaries:?}"
    );
    // The nodes may run with a long node timeout (no failover by chance on a loaded machine):
    // the failover of the killed node should come promptly, so 2 s on every node now; the
    // timeout they had is back once the failover is done.
    let timeout_before = node_timeout(ports[0]);
    set_node_timeout(&ports, "2000");
    procs.kill(victim);
    std::fs::remove_file(&pause).expect("remove the pause file");
    // The replica of the killed node is elected: slot 12182 gets a new owner.
    let gone = format!("127.0.0.1:{victim}");
    let mut new_owner = String::new();
    wait_until("a replica takes over slot 12182", || {
        let reply = Client::connect(ports[0]).cmd_s(&["GET", "foo"]);
        match reply.strip_prefix("-MOVED 12182 ").map(str::trim) {
            Some(addr) if addr != gone => {
                new_owner = addr.to_string();
                true
            }
            _ => false,
        }
    });
    let alive: Vec<u16> = ports.iter().copied().filter(|&p| p != victim).collect();
    set_node_timeout(&alive, &timeout_before);
    std::fs::write(&stop, b"").expect("write the stop file");
    let status = writer.wait_exit();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    println!("{text}");
    assert!(status.success(), "redis-py through the failover:\n{text}");
    assert!(text.contains("last_ok_after_failure=True"), "{text}");
    assert!(
        text.contains(" lost=0 "),
        "an acknowledged write was lost:\n{text}"
    );
    // The old primary, restarted, is a replica of the new one and redirects there.
    procs.start(&dir, victim, &["--cluster-node-timeout", &timeout_before]);
    wait_until("the old primary answers MOVED to the new one", || {
        Client::connect(victim).cmd_s(&["GET", "foo"]) == format!("-MOVED 12182 {new_owner}\r\n")
    });
    assert!(Client::connect(victim)
        .cmd_s(&["ROLE"])
        .starts_with("*5\r\n$5\r\nslave\r\n"));
}

/// `cluster-node-timeout` of the node on `port` (ms).
fn node_timeout(port: u16) -> String {
    let reply = Client::connect(port).cmd(&["CONFIG", "GET", "cluster-node-timeout"]);
    let text = String::from_utf8_lossy(&reply).into_owned();
    let value = text
        .strip_prefix("*2\r\n$20\r\ncluster-node-timeout\r\n$")
        .and_then(|rest| rest.split("\r\n").nth(1))
        .unwrap_or_else(|| panic!("CONFIG GET cluster-node-timeout on {port}: {text:?}"));
    assert!(value.parse::<u64>().is_ok(), "{text:?}");
    value.to_string()
}

/// `CONFIG SET cluster-node-timeout ms` on every node of `ports`.
fn set_node_timeout(ports: &[u16], ms: &str) {
    for &p in ports {
        assert_eq!(
            Client::connect(p).cmd_s(&["CONFIG", "SET", "cluster-node-timeout", ms]),
            "+OK\r\n",
            "CONFIG SET cluster-node-timeout {ms} on {p}"
        );
    }
}

#[test]
fn demo_runs_and_checks_what_it_claims() {
    let (ok, out) = run_bounded(
        BIN,
        &s(&["demo", "--base-port", &ports::block(6).to_string()]),
        Duration::from_secs(240),
    );
    assert!(ok, "demo failed:\n{out}");
    assert!(out.contains("keys written:      10000"), "{out}");
    // Before the kill each of the three primaries confirmed with WAIT that its replica holds
    // every write (so the kill loses none of the 10000).
    assert_eq!(
        out.matches(" replica(s) hold every write").count(),
        3,
        "{out}"
    );
    assert!(
        out.contains("read back 10000 / 10000 keys correctly"),
        "{out}"
    );
    assert!(
        out.contains("failover time:") && out.contains(" ms from kill -9 to a new primary"),
        "{out}"
    );
    assert!(out.contains("restarted node:    replica"), "{out}");
    assert!(
        out.contains("10000 before the kill, 10000 after the restart"),
        "{out}"
    );
    assert!(out.contains("All processes stopped."), "{out}");
}

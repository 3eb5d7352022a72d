//! Six-node clusters driven by the tools people use: redis-cli (--cluster create/check, -c),
//! redis-py's RedisCluster, redis-benchmark --cluster; replication and WAIT; the demo.
//! Ports 23400-23699 (bus ports +10000). Missing tools make the tests fail with an install hint.

mod common;

use common::{
    bulk_text, require_redis_py, require_redis_tools, run_bounded, six_node_cluster, test_dir,
    wait_until, Client, Procs, BIN,
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
    let ports = six_node_cluster(&mut procs, &dir, 23400);

    // redis-cli --cluster check passes.
    let (ok, out) = run_bounded(
        "redis-cli",
        &s(&["--cluster", "check", "127.0.0.1:23400"]),
        Duration::from_secs(30),
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
            &s(&["-c", "-p", "23401", "SET", k, v]),
            Duration::from_secs(10),
        );
        assert!(ok && out.trim() == "OK", "SET {k}: {out}");
        let (ok, out) = run_bounded(
            "redis-cli",
            &s(&["-c", "-p", "23402", "GET", k]),
            Duration::from_secs(10),
        );
        assert!(ok && out.trim() == v, "GET {k}: {out}");
    }
    // Without -c a non-owner answers MOVED to the owner (slot of foo is 12182, owned by the
    // third primary in --cluster create's layout).
    let mut c = Client::connect(23400);
    assert_eq!(c.cmd_s(&["GET", "foo"]), "-MOVED 12182 127.0.0.1:23402\r\n");

    // redis-py RedisCluster: 10,000 keys across the slots, RESP2 then RESP3.
    let (ok, out) = run_bounded(
        "python3",
        &[
            script("redis_py_cluster.py"),
            "23400".into(),
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
            "23403".into(),
            "2000".into(),
            "3".into(),
        ],
        Duration::from_secs(120),
    );
    assert!(ok, "redis-py (RESP3) failed:\n{out}");

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
    let mut owner = Client::connect(23402);
    assert_eq!(owner.cmd_s(&["SET", "foo", "after-wait"]), "+OK\r\n");
    assert_eq!(owner.cmd_s(&["WAIT", "1", "5000"]), ":1\r\n");
    let replica_port = ports
        .iter()
        .copied()
        .find(|&p| {
            bulk_text(&Client::connect(p).cmd(&["INFO", "replication"]))
                .contains("master_port:23402")
        })
        .expect("a replica of 23402");
    let mut r = Client::connect(replica_port);
    assert_eq!(r.cmd_s(&["GET", "foo"]), "-MOVED 12182 127.0.0.1:23402\r\n");
    assert_eq!(r.cmd_s(&["READONLY"]), "+OK\r\n");
    assert_eq!(r.cmd_s(&["GET", "foo"]), "$10\r\nafter-wait\r\n");
    assert_eq!(
        r.cmd_s(&["SET", "foo", "x"]),
        "-MOVED 12182 127.0.0.1:23402\r\n"
    );
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
    let slot_owner = 23402; // "foo" and "{foo}x" hash to 12182
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
            "23400",
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

/// redis-py keeps working through `kill -9` of a primary (its replica is elected), and the
/// restarted old primary comes back as a replica that answers MOVED to the new address.
#[test]
fn redis_py_survives_kill_9_of_a_primary() {
    require_redis_tools();
    require_redis_py();
    let mut procs = Procs::default();
    let dir = test_dir("failover");
    let _ports = six_node_cluster(&mut procs, &dir, 23500);
    // redis-py writes for 15 s; 3 s in, the owner of slot 12182 ("foo") is killed.
    let writer = std::process::Command::new("python3")
        .args([script("redis_py_failover.py"), "23500".into(), "15".into()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run redis_py_failover.py");
    let mut writer = KillOnDrop(Some(writer));
    std::thread::sleep(Duration::from_secs(3));
    procs.kill(23502);
    // The replica of 23502 is elected: slot 12182 gets a new owner.
    let mut new_owner = String::new();
    wait_until("a replica takes over slot 12182", || {
        let reply = Client::connect(23500).cmd_s(&["GET", "foo"]);
        match reply.strip_prefix("-MOVED 12182 ") {
            Some(addr) if !addr.starts_with("127.0.0.1:23502") => {
                new_owner = addr.trim().to_string();
                true
            }
            _ => false,
        }
    });
    let out = writer
        .0
        .take()
        .expect("writer")
        .wait_with_output()
        .expect("writer output");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    assert!(
        out.status.success(),
        "redis-py through the failover:\n{text}"
    );
    assert!(text.contains("last_ok_after_failure=True"), "{text}");
    // The old primary, restarted, is a replica of the new one and redirects there.
    procs.start(&dir, 23502, &["--cluster-node-timeout", "2000"]);
    wait_until("the old primary answers MOVED to the new one", || {
        Client::connect(23502).cmd_s(&["GET", "foo"]) == format!("-MOVED 12182 {new_owner}\r\n")
    });
    assert!(Client::connect(23502)
        .cmd_s(&["ROLE"])
        .starts_with("*5\r\n$5\r\nslave\r\n"));
}

/// Kills a helper process if the test fails before waiting for it.
struct KillOnDrop(Option<std::process::Child>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn demo_runs_and_checks_what_it_claims() {
    let (ok, out) = run_bounded(
        BIN,
        &s(&["demo", "--base-port", "23600"]),
        Duration::from_secs(240),
    );
    assert!(ok, "demo failed:\n{out}");
    assert!(out.contains("keys written:      10000"), "{out}");
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

//! WATCH aborts EXEC for every kind of change to a watched key: a key that expires after the
//! WATCH (compared with redis-server 7.0), and a write replicated from the primary to the
//! replica a client watches on. Ports 23890-23893.

mod common;

use common::{test_dir, wait_until, Client, Procs};
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
fn a_key_that_expires_after_watch_aborts_exec_as_on_redis() {
    let dir = test_dir("watch-expiry");
    let mut procs = Procs::default();
    procs.start(&dir, 23890, &["--cluster-enabled", "no"]);
    let d = dir.join("redis");
    std::fs::create_dir_all(&d).unwrap();
    let mut redis = Command::new("redis-server")
        .args(["--port", "23891", "--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(&d)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server is needed (.ci/run installs it)");
    common::wait_for_port(23891);
    let mut replies = Vec::new();
    for port in [23890u16, 23891] {
        let mut c = Client::connect(port);
        c.cmd(&["FLUSHALL"]);
        let mut got = Vec::new();
        // Expires after the WATCH: modified.
        c.cmd(&["SET", "k", "v", "PX", "200"]);
        got.push(c.cmd_s(&["WATCH", "k"]));
        std::thread::sleep(Duration::from_millis(400));
        got.push(c.cmd_s(&["MULTI"]));
        got.push(c.cmd_s(&["SET", "x", "1"]));
        got.push(c.cmd_s(&["EXEC"]));
        // Already gone at WATCH time and never written: not modified.
        got.push(c.cmd_s(&["WATCH", "k"]));
        got.push(c.cmd_s(&["MULTI"]));
        got.push(c.cmd_s(&["SET", "x", "2"]));
        got.push(c.cmd_s(&["EXEC"]));
        got.push(c.cmd_s(&["GET", "x"]));
        replies.push(got);
    }
    let _ = redis.kill();
    let _ = redis.wait();
    assert_eq!(replies[0][3], "*-1\r\n", "ours: {:?}", replies[0]);
    assert_eq!(replies[0], replies[1], "ours vs redis-server 7.0");
}

fn myid(port: u16) -> String {
    let r = Client::connect(port).cmd_s(&["CLUSTER", "MYID"]);
    r.split("\r\n").nth(1).unwrap().to_owned()
}

#[test]
fn a_replicated_write_aborts_exec_on_the_replica() {
    let dir = test_dir("watch-replica");
    let mut procs = Procs::default();
    let (primary, replica) = (23892u16, 23893u16);
    procs.start(&dir, primary, &["--cluster-node-timeout", "2000"]);
    procs.start(&dir, replica, &["--cluster-node-timeout", "2000"]);
    let mut p = Client::connect(primary);
    assert_eq!(
        p.cmd_s(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]),
        "+OK\r\n"
    );
    let mut r = Client::connect(replica);
    r.cmd(&["CLUSTER", "MEET", "127.0.0.1", &primary.to_string()]);
    let id = myid(primary);
    wait_until("the MEET completes", || {
        Client::connect(replica)
            .cmd_s(&["CLUSTER", "NODES"])
            .contains(&id)
    });
    assert_eq!(r.cmd_s(&["CLUSTER", "REPLICATE", &id]), "+OK\r\n");
    wait_until("replica link up", || {
        Client::connect(replica)
            .cmd_s(&["INFO", "replication"])
            .contains("master_link_status:up")
    });
    for port in [primary, replica] {
        wait_until("cluster_state:ok", || {
            Client::connect(port)
                .cmd_s(&["CLUSTER", "INFO"])
                .contains("cluster_state:ok")
        });
    }
    assert_eq!(p.cmd_s(&["HSET", "h", "f", "1"]), ":1\r\n");
    assert_eq!(p.cmd_s(&["WAIT", "1", "5000"]), ":1\r\n");
    let mut c = Client::connect(replica);
    assert_eq!(c.cmd_s(&["READONLY"]), "+OK\r\n");
    assert_eq!(c.cmd_s(&["HGET", "h", "f"]), "$1\r\n1\r\n");
    // Untouched: the transaction runs.
    assert_eq!(c.cmd_s(&["WATCH", "h"]), "+OK\r\n");
    c.cmd(&["MULTI"]);
    c.cmd(&["HGET", "h", "f"]);
    assert_eq!(c.cmd_s(&["EXEC"]), "*1\r\n$1\r\n1\r\n");
    // A write of the primary reaches the replica: the watcher's EXEC aborts.
    assert_eq!(c.cmd_s(&["WATCH", "h"]), "+OK\r\n");
    assert_eq!(p.cmd_s(&["HINCRBY", "h", "f", "1"]), ":2\r\n");
    assert_eq!(p.cmd_s(&["WAIT", "1", "5000"]), ":1\r\n");
    c.cmd(&["MULTI"]);
    c.cmd(&["HGET", "h", "f"]);
    assert_eq!(c.cmd_s(&["EXEC"]), "*-1\r\n");
}

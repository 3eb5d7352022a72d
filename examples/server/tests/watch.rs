//! WATCH aborts EXEC for every kind of change to a watched key: a key that expires after the
//! WATCH (compared with redis-server 7.0), and a write replicated from the primary to the
//! replica a client watches on. Ports from `common::ports`.

mod common;

use common::{ports, start_real_server, test_dir, wait_for, wait_until, Client, Procs};

/// The server's clock (`TIME`) in Unix milliseconds.
fn server_ms(c: &mut Client) -> i64 {
    let reply = c.cmd_s(&["TIME"]);
    let parts: Vec<&str> = reply.split("\r\n").collect();
    // *2 $n secs $n micros
    let secs: i64 = parts[2].parse().expect("TIME seconds");
    let micros: i64 = parts[4].parse().expect("TIME microseconds");
    secs * 1000 + micros / 1000
}

/// An integer reply's value.
fn int(reply: &str) -> i64 {
    reply
        .strip_prefix(':')
        .and_then(|r| r.trim().parse().ok())
        .unwrap_or_else(|| panic!("not an integer reply: {reply:?}"))
}

#[test]
fn a_key_that_expires_after_watch_aborts_exec_as_on_redis() {
    let dir = test_dir("watch-expiry");
    let [ours, redis_port] = ports::ports(2)[..] else {
        unreachable!()
    };
    let mut procs = Procs::default();
    procs.start(&dir, ours, &["--cluster-enabled", "no"]);
    let redis = start_real_server("redis-server", redis_port, &dir.join("redis"), &[]);
    let mut replies = Vec::new();
    for port in [ours, redis_port] {
        let mut c = Client::connect(port);
        c.cmd(&["FLUSHALL"]);
        let mut got = Vec::new();
        // Expires after the WATCH: modified. The WATCH must reach the server before the key
        // expires (checked with the server's clock right after it, pipelined behind it; a
        // machine too slow for that tries again), and EXEC comes once the server's clock is
        // past the expiry, the key untouched in between.
        let (watched, expire_at) = wait_for("a WATCH before the key's expiry", || {
            assert_eq!(c.cmd_s(&["SET", "k", "v", "PX", "200"]), "+OK\r\n");
            let expire_at = int(&c.cmd_s(&["PEXPIRETIME", "k"]));
            let watched = c.cmd_s(&["WATCH", "k"]);
            if server_ms(&mut c) < expire_at {
                return Some((watched, expire_at));
            }
            assert_eq!(c.cmd_s(&["UNWATCH"]), "+OK\r\n");
            None
        });
        got.push(watched);
        wait_until("the server's clock past the key's expiry", || {
            server_ms(&mut c) > expire_at
        });
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
    drop(redis);
    assert_eq!(replies[0][3], "*-1\r\n", "ours: {:?}", replies[0]);
    assert_eq!(replies[0][7], "*1\r\n+OK\r\n", "ours: {:?}", replies[0]);
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
    let [primary, replica] = ports::ports(2)[..] else {
        unreachable!()
    };
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
    assert_eq!(p.cmd_s(&["WAIT", "1", "60000"]), ":1\r\n");
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
    assert_eq!(p.cmd_s(&["WAIT", "1", "60000"]), ":1\r\n");
    c.cmd(&["MULTI"]);
    c.cmd(&["HGET", "h", "f"]);
    assert_eq!(c.cmd_s(&["EXEC"]), "*-1\r\n");
}

//! The blocking list and sorted-set pops, run side by side on redis-server 7.0 and on
//! ferrocluster-server (standalone): wake order, timeouts, MULTI, CLIENT UNBLOCK, a BLMOVE
//! chain, pipelined commands behind a blocked one, and what replicas receive. Every scenario's
//! replies on ours must equal redis-server's. Ports 23992 (redis), 23993 (ours), 23994 (our
//! replica).

mod common;

use common::{require_redis_tools, test_dir, wait_until, Client, Procs};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const REDIS: u16 = 23992;
const OURS: u16 = 23993;
const REPLICA: u16 = 23994;

struct Redis(Child);

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_pair(name: &str) -> (Procs, Redis, std::path::PathBuf) {
    require_redis_tools();
    let dir = test_dir(name);
    let rdir = dir.join("redis");
    std::fs::create_dir_all(&rdir).expect("redis dir");
    let redis = Redis(
        Command::new("redis-server")
            .args([
                "--port",
                &REDIS.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(&rdir)
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server"),
    );
    common::wait_for_port(REDIS, Duration::from_secs(10));
    let mut procs = Procs::default();
    procs.start(&dir, OURS, &["--cluster-enabled", "no"]);
    (procs, redis, dir)
}

fn c(port: u16) -> Client {
    Client::connect(port)
}

fn id_of(cl: &mut Client) -> String {
    let r = cl.cmd(&["CLIENT", "ID"]);
    String::from_utf8_lossy(&r[1..r.len() - 2]).into_owned()
}

/// Waits until `n` clients are blocked (INFO `blocked_clients`).
fn wait_blocked(port: u16, n: usize) {
    let mut admin = c(port);
    wait_until(Duration::from_secs(5), "clients to block", || {
        let info = common::bulk_text(&admin.cmd(&["INFO", "clients"]));
        info.lines()
            .any(|l| l.trim() == format!("blocked_clients:{n}"))
    });
}

/// A scenario on one server: the replies it collected, in order.
fn scenario(port: u16, run: fn(u16) -> Vec<Vec<u8>>) -> Vec<String> {
    c(port).cmd(&["FLUSHALL"]);
    run(port)
        .into_iter()
        .map(|r| String::from_utf8_lossy(&r).into_owned())
        .collect()
}

fn fifo(port: u16) -> Vec<Vec<u8>> {
    let (mut a, mut b, mut p) = (c(port), c(port), c(port));
    a.send_raw(&common::encode(&[b"BLPOP", b"k1", b"k2", b"0"]));
    wait_blocked(port, 1);
    b.send_raw(&common::encode(&[b"BRPOP", b"k2", b"0"]));
    wait_blocked(port, 2);
    // One push of two elements: the longest waiter gets the first, the next the second.
    let pushed = p.cmd(&["RPUSH", "k2", "x", "y"]);
    vec![
        pushed,
        a.read_reply(),
        b.read_reply(),
        p.cmd(&["EXISTS", "k2"]),
    ]
}

fn timeouts(port: u16) -> Vec<Vec<u8>> {
    let mut a = c(port);
    let started = Instant::now();
    let r1 = a.cmd(&["BLPOP", "nokey", "0.2"]);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(200),
        "timed out early: {waited:?}"
    );
    let r2 = a.cmd(&["BLMOVE", "nokey", "d", "LEFT", "LEFT", "0.05"]);
    let r3 = a.cmd(&["BZPOPMIN", "nokey", "0.05"]);
    let r4 = a.cmd(&["BZMPOP", "0.05", "1", "nokey", "MIN"]);
    let r5 = a.cmd(&["BLMPOP", "0.05", "1", "nokey", "LEFT"]);
    a.cmd(&["HELLO", "3"]);
    let r6 = a.cmd(&["BLPOP", "nokey", "0.05"]);
    let r7 = a.cmd(&["BRPOPLPUSH", "nokey", "d", "0.05"]);
    vec![r1, r2, r3, r4, r5, r6, r7]
}

fn multi(port: u16) -> Vec<Vec<u8>> {
    let mut a = c(port);
    a.cmd(&["MULTI"]);
    a.cmd(&["BLPOP", "nokey", "0"]);
    a.cmd(&["RPUSH", "k", "v"]);
    a.cmd(&["BLPOP", "k", "0"]);
    vec![a.cmd(&["EXEC"])]
}

fn unblock(port: u16) -> Vec<Vec<u8>> {
    let (mut a, mut b, mut p) = (c(port), c(port), c(port));
    let (ida, idb) = (id_of(&mut a), id_of(&mut b));
    a.send_raw(&common::encode(&[b"BLPOP", b"k", b"0"]));
    b.send_raw(&common::encode(&[b"BZPOPMAX", b"z", b"0"]));
    wait_blocked(port, 2);
    let u1 = p.cmd(&["CLIENT", "UNBLOCK", &ida]);
    let ra = a.read_reply();
    let u2 = p.cmd(&["CLIENT", "UNBLOCK", &idb, "ERROR"]);
    let rb = b.read_reply();
    let u3 = p.cmd(&["CLIENT", "UNBLOCK", &ida]);
    let u4 = p.cmd(&["CLIENT", "UNBLOCK", &ida, "FOO"]);
    vec![u1, ra, u2, rb, u3, u4]
}

fn chain(port: u16) -> Vec<Vec<u8>> {
    let (mut a, mut b, mut p) = (c(port), c(port), c(port));
    // b waits on "dst", a moves from "src" to "dst" when src gets an element: one push wakes
    // both, through the move.
    b.send_raw(&common::encode(&[b"BLPOP", b"dst", b"0"]));
    wait_blocked(port, 1);
    a.send_raw(&common::encode(&[
        b"BLMOVE", b"src", b"dst", b"RIGHT", b"LEFT", b"0",
    ]));
    wait_blocked(port, 2);
    let pushed = p.cmd(&["LPUSH", "src", "v"]);
    vec![
        pushed,
        a.read_reply(),
        b.read_reply(),
        p.cmd(&["EXISTS", "src", "dst"]),
    ]
}

fn pipelined(port: u16) -> Vec<Vec<u8>> {
    let (mut a, mut p) = (c(port), c(port));
    // Commands after a blocked one wait for it, and run in order once it is answered.
    let mut req = common::encode(&[b"BLPOP", b"k", b"0"]);
    req.extend(common::encode(&[b"LLEN", b"k"]));
    req.extend(common::encode(&[b"PING"]));
    a.send_raw(&req);
    wait_blocked(port, 1);
    let pushed = p.cmd(&["RPUSH", "k", "a", "b"]);
    vec![pushed, a.read_reply(), a.read_reply(), a.read_reply()]
}

fn zsets(port: u16) -> Vec<Vec<u8>> {
    let (mut a, mut b, mut p) = (c(port), c(port), c(port));
    a.send_raw(&common::encode(&[b"BZPOPMIN", b"z", b"0"]));
    wait_blocked(port, 1);
    b.send_raw(&common::encode(&[
        b"BZMPOP", b"0", b"1", b"z", b"MAX", b"COUNT", b"5",
    ]));
    wait_blocked(port, 2);
    // A list push does not wake sorted-set waiters.
    p.cmd(&["SET", "x", "1"]);
    let added = p.cmd(&["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
    vec![added, a.read_reply(), b.read_reply()]
}

fn wrong_type_wait(port: u16) -> Vec<Vec<u8>> {
    let (mut a, mut p) = (c(port), c(port));
    // A BLPOP waiter stays blocked while its key holds a sorted set.
    a.send_raw(&common::encode(&[b"BLPOP", b"k", b"0"]));
    wait_blocked(port, 1);
    p.cmd(&["ZADD", "k", "1", "a"]);
    p.cmd(&["DEL", "k"]);
    p.cmd(&["RPUSH", "k", "v"]);
    vec![a.read_reply()]
}

#[test]
fn blocking_pops_match_redis() {
    let (_procs, _redis, _dir) = start_pair("blocking-pops");
    let all: [(&str, fn(u16) -> Vec<Vec<u8>>); 8] = [
        ("fifo", fifo),
        ("timeouts", timeouts),
        ("multi", multi),
        ("unblock", unblock),
        ("chain", chain),
        ("pipelined", pipelined),
        ("zsets", zsets),
        ("wrong_type_wait", wrong_type_wait),
    ];
    for (name, run) in all {
        let want = scenario(REDIS, run);
        let got = scenario(OURS, run);
        assert_eq!(
            got, want,
            "scenario {name}: ours (left) vs redis-server (right)"
        );
    }
}

#[test]
fn replicas_receive_the_pop_not_the_blocking_command() {
    let (mut procs, _redis, dir) = start_pair("blocking-replication");
    procs.start(&dir, REPLICA, &["--cluster-enabled", "no"]);
    let mut r = c(REPLICA);
    r.cmd(&["REPLICAOF", "127.0.0.1", &OURS.to_string()]);
    wait_until(Duration::from_secs(10), "replica link up", || {
        common::bulk_text(&r.cmd(&["INFO", "replication"])).contains("master_link_status:up")
    });
    let (mut a, mut p) = (c(OURS), c(OURS));
    a.send_raw(&common::encode(&[
        b"BLMOVE", b"src", b"dst", b"LEFT", b"RIGHT", b"0",
    ]));
    wait_blocked(OURS, 1);
    p.cmd(&["RPUSH", "src", "1", "2"]);
    assert_eq!(a.read_reply(), b"$1\r\n1\r\n");
    p.cmd(&["ZADD", "z", "1", "a", "2", "b"]);
    p.cmd(&["BZPOPMAX", "z", "0"]);
    wait_until(Duration::from_secs(5), "replica to apply", || {
        r.cmd(&["LRANGE", "dst", "0", "-1"]) == b"*1\r\n$1\r\n1\r\n"
            && r.cmd(&["LRANGE", "src", "0", "-1"]) == b"*1\r\n$1\r\n2\r\n"
            && r.cmd(&["ZRANGE", "z", "0", "-1"]) == b"*1\r\n$1\r\na\r\n"
    });
}

//! A replica refuses writes from normal clients (ports from the one allocator, `common::ports`;
//! issue 16 item 2): every write-flagged command of our own `COMMAND` reply, sent to a replica with
//! valid arguments, is refused (`-READONLY You can't write against a read only replica.` for
//! a keyless write, `-MOVED` to the primary for a keyed one) and the replica's data stays
//! identical to its primary's; the replies of `tests/vectors/replica-writes.json` (captured
//! from Redis 7.0 and Valkey 9.1 by `tests/vectors/capture_replica.py`) are matched byte for
//! byte, ports aside.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{bulk_text, ports, test_dir, wait_until, Client, Procs, HANG};
use redis_protocol::resp2::decode::decode;
use redis_protocol::resp2::types::OwnedFrame;

const READONLY: &str = "-READONLY You can't write against a read only replica.\r\n";

fn myid(port: u16) -> String {
    bulk_text(&Client::connect(port).cmd(&["CLUSTER", "MYID"]))
}

/// `from` MEETs `to` and waits until it knows it; returns `to`'s ID.
fn meet(from: u16, to: u16) -> String {
    assert_eq!(
        Client::connect(from).cmd_s(&["CLUSTER", "MEET", "127.0.0.1", &to.to_string()]),
        "+OK\r\n"
    );
    let id = myid(to);
    wait_until("the MEET completes", || {
        bulk_text(&Client::connect(from).cmd(&["CLUSTER", "NODES"])).contains(&id)
    });
    id
}

/// `WAIT 1 <ms>` with a timeout that only bounds a hang: the replica acknowledges however
/// slowly the machine runs.
fn wait_one(port: u16) -> String {
    let ms = HANG.as_millis().to_string();
    Client::connect(port).cmd_s(&["WAIT", "1", &ms])
}

/// Primary (all slots, a few keys) on `primary` and its synced replica on `replica`.
fn primary_and_replica(procs: &mut Procs, name: &str, primary: u16, replica: u16) {
    let dir = test_dir(name);
    procs.start(&dir, primary, &["--cluster-node-timeout", "2000"]);
    procs.start(&dir, replica, &["--cluster-node-timeout", "2000"]);
    let mut p = Client::connect(primary);
    assert_eq!(
        p.cmd_s(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]),
        "+OK\r\n"
    );
    let mut r = Client::connect(replica);
    let pid = meet(replica, primary);
    assert_eq!(r.cmd_s(&["CLUSTER", "REPLICATE", &pid]), "+OK\r\n");
    for port in [primary, replica] {
        wait_until("cluster_state:ok", || {
            bulk_text(&Client::connect(port).cmd(&["CLUSTER", "INFO"])).contains("cluster_state:ok")
        });
    }
    for (k, v) in [("k", "v"), ("n", "10"), ("{t}a", "1"), ("{t}b", "2")] {
        assert_eq!(p.cmd_s(&["SET", k, v]), "+OK\r\n");
    }
    assert_eq!(p.cmd_s(&["EXPIRE", "n", "1000"]), ":1\r\n");
    assert_eq!(wait_one(primary), ":1\r\n");
}

/// Every key and value of a node (read with READONLY so a replica answers).
fn contents(port: u16) -> Vec<(String, String)> {
    let mut c = Client::connect(port);
    assert_eq!(c.cmd_s(&["READONLY"]), "+OK\r\n");
    let keys = frame(&c.cmd(&["KEYS", "*"]));
    let mut out: Vec<(String, String)> = array(&keys)
        .iter()
        .map(|k| {
            let k = text(k);
            // Every type, read in a canonical form (collections sorted).
            let t = String::from_utf8_lossy(&c.cmd(&["TYPE", &k])).into_owned();
            let v = match t.trim_end() {
                "+string" => bulk_text(&c.cmd(&["GET", &k])),
                "+hash" | "+set" => {
                    let read = if t.starts_with("+hash") {
                        "HGETALL"
                    } else {
                        "SMEMBERS"
                    };
                    let mut items: Vec<String> = array(&frame(&c.cmd(&[read, &k])))
                        .iter()
                        .map(text)
                        .collect();
                    items.sort();
                    format!("{t}{items:?}")
                }
                // In order: a list's elements, a sorted set's members with their scores.
                "+list" | "+zset" => {
                    let read: &[&str] = if t.starts_with("+list") {
                        &["LRANGE", &k, "0", "-1"]
                    } else {
                        &["ZRANGE", &k, "0", "-1", "WITHSCORES"]
                    };
                    let items: Vec<String> = array(&frame(&c.cmd(read))).iter().map(text).collect();
                    format!("{t}{items:?}")
                }
                other => panic!("{k}: type {other}"),
            };
            (k, v)
        })
        .collect();
    out.sort();
    out
}

fn frame(bytes: &[u8]) -> OwnedFrame {
    let (f, used) = decode(bytes).expect("RESP").expect("complete");
    assert_eq!(used, bytes.len());
    f
}

fn array(f: &OwnedFrame) -> &[OwnedFrame] {
    match f {
        OwnedFrame::Array(a) => a,
        other => panic!("not an array: {other:?}"),
    }
}

fn text(f: &OwnedFrame) -> String {
    match f {
        OwnedFrame::BulkString(b) | OwnedFrame::SimpleString(b) => {
            String::from_utf8_lossy(b).into_owned()
        }
        other => panic!("not a string: {other:?}"),
    }
}

fn int(f: &OwnedFrame) -> i64 {
    match f {
        OwnedFrame::Integer(i) => *i,
        other => panic!("not an integer: {other:?}"),
    }
}

/// Valid arguments for each write command of our table (the first key, when there is one,
/// is at the position COMMAND gives); `nothing` is a port where nothing listens. A write
/// command missing here fails the test: every write the server knows must be checked.
fn valid_args<'a>(name: &str, nothing: &'a str) -> Option<Vec<&'a str>> {
    Some(match name {
        "set" => vec!["k", "new"],
        "setnx" => vec!["fresh", "1"],
        "setex" => vec!["k", "100", "new"],
        "psetex" => vec!["k", "100000", "new"],
        "getdel" => vec!["k"],
        "getset" => vec!["k", "new"],
        "mset" => vec!["{t}a", "x", "{t}b", "y"],
        "msetnx" => vec!["{t}c", "x", "{t}d", "y"],
        "del" => vec!["k"],
        "unlink" => vec!["k"],
        "incr" | "decr" => vec!["n"],
        "incrby" | "decrby" => vec!["n", "5"],
        "append" => vec!["k", "more"],
        "expire" => vec!["k", "10"],
        "pexpire" => vec!["k", "10000"],
        "expireat" => vec!["k", "4000000000"],
        "pexpireat" => vec!["k", "4000000000000"],
        "persist" => vec!["n"],
        "flushdb" | "flushall" => vec![],
        "swapdb" => vec!["0", "0"],
        // The payload is not checked before routing and the read-only refusal.
        "restore" | "restore-asking" => vec!["k", "0", "payload", "REPLACE"],
        // Nothing listens there: the primary answers IOERR, a replica refuses first.
        "migrate" => vec!["127.0.0.1", nothing, "k", "0", "1000"],
        "getex" => vec!["k", "EX", "100"],
        "setrange" => vec!["k", "1", "x"],
        "incrbyfloat" => vec!["f", "1.5"],
        "copy" => vec!["{t}a", "{t}copy"],
        "rename" => vec!["{t}copy", "{t}renamed"],
        "renamenx" => vec!["{t}renamed", "{t}renamed2"],
        "move" => vec!["k", "1"],
        "hset" | "hmset" => vec!["h", "f", "v"],
        "hsetnx" => vec!["h", "g", "w"],
        "hdel" => vec!["h", "g"],
        "hincrby" => vec!["h", "n", "2"],
        "hincrbyfloat" => vec!["h", "x", "1.5"],
        "sadd" => vec!["s", "a", "b", "c"],
        "srem" => vec!["s", "b"],
        "spop" => vec!["s"],
        "smove" => vec!["{t}s1", "{t}s2", "a"],
        "sinterstore" | "sunionstore" | "sdiffstore" => vec!["{t}dst", "{t}s1", "{t}s2"],
        "sort" => vec!["s", "ALPHA"],
        // Lists and sorted sets; the blocking ones time out at once on the primary.
        "lpush" | "rpush" | "lpushx" | "rpushx" => vec!["l", "a"],
        "lpop" | "rpop" => vec!["l"],
        "linsert" => vec!["l", "BEFORE", "a", "b"],
        "lrem" | "lset" => vec!["l", "0", "a"],
        "ltrim" => vec!["l", "0", "1"],
        "lmove" => vec!["{t}l1", "{t}l2", "LEFT", "RIGHT"],
        "rpoplpush" => vec!["{t}l1", "{t}l2"],
        "lmpop" => vec!["1", "l", "LEFT"],
        "blpop" | "brpop" => vec!["l", "0.01"],
        "blmove" => vec!["{t}l1", "{t}l2", "LEFT", "RIGHT", "0.01"],
        "brpoplpush" => vec!["{t}l1", "{t}l2", "0.01"],
        "blmpop" => vec!["0.01", "1", "l", "LEFT"],
        "zadd" | "zincrby" => vec!["z", "1", "a"],
        "zrem" => vec!["z", "a"],
        "zpopmin" | "zpopmax" => vec!["z"],
        "zremrangebylex" => vec!["z", "-", "+"],
        "zremrangebyrank" => vec!["z", "0", "-1"],
        "zremrangebyscore" => vec!["z", "-inf", "+inf"],
        "zdiffstore" | "zinterstore" | "zunionstore" => vec!["{t}zd", "2", "{t}z1", "{t}z2"],
        "zrangestore" => vec!["{t}zd", "{t}z1", "0", "-1"],
        "zmpop" => vec!["1", "z", "MIN"],
        "bzpopmin" | "bzpopmax" => vec!["z", "0.01"],
        "bzmpop" => vec!["0.01", "1", "z", "MIN"],
        _ => return None,
    })
}

/// The position of the first key in `argv` (with the command name at 0): `COMMAND`'s first
/// key, or after the timeout and the key count for the commands whose keys follow a
/// `numkeys` argument (first key 0 in `COMMAND`). 0: no key.
fn first_key_at(name: &str, first_key: i64) -> usize {
    match name {
        "lmpop" | "zmpop" => 2,
        "blmpop" | "bzmpop" => 3,
        _ => first_key.max(0) as usize,
    }
}

#[test]
fn every_write_command_is_refused_on_a_replica_and_the_data_stays_the_primarys() {
    // The third port is held by this process and nothing listens on it (MIGRATE's target).
    let [primary, replica, nothing] = ports::ports(3)[..] else {
        unreachable!()
    };
    let nothing = nothing.to_string();
    let mut procs = Procs::default();
    primary_and_replica(&mut procs, "replica-writes", primary, replica);
    let before = contents(primary);
    assert_eq!(contents(replica), before, "in sync before the writes");
    let table = frame(&Client::connect(replica).cmd(&["COMMAND"]));
    let mut writes = Vec::new();
    for entry in array(&table) {
        let e = array(entry);
        let name = text(&e[0]);
        let flags: Vec<String> = array(&e[2]).iter().map(text).collect();
        if flags.iter().any(|f| f == "write") {
            writes.push((name, int(&e[3])));
        }
    }
    assert!(writes.len() >= 20, "write commands in COMMAND: {writes:?}");
    let moved_to_primary = |slot: u16| format!("-MOVED {slot} 127.0.0.1:{primary}\r\n");
    for (name, first_key) in &writes {
        let rest = valid_args(name, &nothing)
            .unwrap_or_else(|| panic!("no valid arguments in this test for write command {name}"));
        let mut argv = vec![name.as_str()];
        argv.extend(rest.iter().copied());
        let at = first_key_at(name, *first_key);
        let want = if at > 0 {
            let key = argv[at];
            moved_to_primary(ferrocluster_slot::key_hash_slot(key.as_bytes()).get())
        } else {
            READONLY.to_string()
        };
        let mut c = Client::connect(replica);
        assert_eq!(c.cmd_s(&argv), want, "{argv:?} on the replica");
        // READONLY mode serves reads only; a write is still refused.
        assert_eq!(c.cmd_s(&["READONLY"]), "+OK\r\n");
        assert_eq!(
            c.cmd_s(&argv),
            want,
            "{argv:?} on the replica after READONLY"
        );
        // Inside MULTI the refusal flags the transaction.
        assert_eq!(c.cmd_s(&["MULTI"]), "+OK\r\n");
        assert_eq!(c.cmd_s(&argv), want, "{argv:?} queued on the replica");
        assert_eq!(
            c.cmd_s(&["EXEC"]),
            "-EXECABORT Transaction discarded because of previous errors.\r\n"
        );
        // The same request on the primary's own connection works (it is a valid one).
        let on_primary = Client::connect(primary).cmd_s(&argv);
        assert!(
            !on_primary.starts_with("-ERR wrong number") && !on_primary.starts_with("-ERR syntax"),
            "{argv:?} is not a valid request: {on_primary}"
        );
        assert_eq!(wait_one(primary), ":1\r\n");
        assert_eq!(
            contents(replica),
            contents(primary),
            "after {argv:?}: the replica follows its primary only"
        );
        // Put the data back for the next command.
        let mut p = Client::connect(primary);
        p.cmd(&["FLUSHALL"]);
        for (k, v) in &before {
            assert_eq!(p.cmd_s(&["SET", k, v]), "+OK\r\n");
        }
        assert_eq!(wait_one(primary), ":1\r\n");
    }
    assert_eq!(contents(replica), contents(primary));
}

/// `"MOVED <slot> <host>:<port>"` -> the same with the port replaced (the captures ran on
/// other ports).
fn without_ports(reply: &str) -> String {
    match reply.strip_prefix("-MOVED ") {
        Some(rest) => {
            let head = rest.rsplit_once(':').map_or(rest, |(h, _)| h);
            format!("-MOVED {head}:PORT")
        }
        None => reply.to_string(),
    }
}

#[test]
fn replica_write_replies_match_the_captures() {
    let doc = common::vector("replica-writes.json");
    let [primary, replica, fresh] = ports::ports(3)[..] else {
        unreachable!()
    };
    let mut procs = Procs::default();
    primary_and_replica(&mut procs, "replica-vectors", primary, replica);
    for case in doc["cases"].as_array().expect("cases") {
        let name = case["name"].as_str().unwrap();
        // Valkey 9.1 and Redis 7.0 agree on every case here, ports aside.
        let want = &case["expect"]["valkey-9.1"];
        let redis = &case["expect"]["redis-7.0"];
        let mut c = Client::connect(replica);
        for (i, cmd) in case["commands"].as_array().unwrap().iter().enumerate() {
            let argv: Vec<&str> = cmd
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap())
                .collect();
            let got = without_ports(&c.cmd_s(&argv));
            let expect = without_ports(want["replies"][i].as_str().unwrap());
            assert_eq!(
                expect,
                without_ports(redis["replies"][i].as_str().unwrap()),
                "{name}"
            );
            assert_eq!(got, expect, "case {name}, command {argv:?}");
        }
        let sizes: Vec<String> = [primary, replica]
            .iter()
            .map(|&p| Client::connect(p).cmd_s(&["DBSIZE"]))
            .collect();
        assert_eq!(sizes[0], sizes[1], "case {name}: DBSIZE primary vs replica");
    }
    // MULTI + FLUSHALL queued on an empty primary that then becomes a replica; EXEC.
    let dir = test_dir("replica-vectors-exec");
    procs.start(&dir, fresh, &["--cluster-node-timeout", "2000"]);
    let mut admin = Client::connect(fresh);
    let pid = meet(fresh, primary);
    let mut c = Client::connect(fresh);
    let want: Vec<&str> = doc["exec_after_becoming_replica"]["valkey-9.1"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert_eq!(c.cmd_s(&["MULTI"]), want[0]);
    assert_eq!(c.cmd_s(&["FLUSHALL"]), want[1]);
    assert_eq!(admin.cmd_s(&["CLUSTER", "REPLICATE", &pid]), "+OK\r\n");
    assert_eq!(c.cmd_s(&["EXEC"]), want[2]);
    assert_eq!(
        Client::connect(primary).cmd_s(&["DBSIZE"]),
        ":4\r\n",
        "the primary kept its keys"
    );
}

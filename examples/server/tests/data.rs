//! One node: the data commands, RESP2/RESP3, pipelining, bad input, start-up errors.
//! Ports from `common::ports` (bus ports +10000 free too).
#![allow(clippy::disallowed_methods)] // deadlines are checked against the wall clock

mod common;

use common::{bulk_text, ports, test_dir, wait_until, Client, Procs, BIN, HANG};
use std::io::{Read, Write};

/// The wall clock, unix ms (the clock the server stamps deadlines with).
fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// An integer reply's value.
fn int(reply: &str) -> i64 {
    reply
        .strip_prefix(':')
        .and_then(|n| n.trim_end().parse().ok())
        .unwrap_or_else(|| panic!("not an integer reply: {reply:?}"))
}

/// Runs `req` on `c` between two clock reads: (reply, (before, after)) in unix ms.
fn timed(c: &mut Client, req: &[&str]) -> (String, (i64, i64)) {
    let before = unix_ms();
    let reply = c.cmd_s(req);
    (reply, (before, unix_ms()))
}

/// A node owning every slot, cluster state ok.
fn single_node(procs: &mut Procs, name: &str, port: u16, extra: &[&str]) -> Client {
    let dir = test_dir(name);
    procs.start(&dir, port, extra);
    let mut c = Client::connect(port);
    assert_eq!(
        c.cmd_s(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]),
        "+OK\r\n"
    );
    wait_until("cluster_state:ok", || {
        bulk_text(&Client::connect(port).cmd(&["CLUSTER", "INFO"])).contains("cluster_state:ok")
    });
    c
}

#[test]
fn string_commands_reply_like_redis() {
    let mut procs = Procs::default();
    let port = ports::port();
    let mut c = single_node(&mut procs, "strings", port, &[]);
    // (request, exact reply) pairs; texts are redis-server 7.0's.
    let cases: &[(&[&str], &str)] = &[
        (&["PING"], "+PONG\r\n"),
        (&["PING", "hi"], "$2\r\nhi\r\n"),
        (&["ECHO", "x y"], "$3\r\nx y\r\n"),
        (&["SET", "k", "v"], "+OK\r\n"),
        (&["GET", "k"], "$1\r\nv\r\n"),
        (&["SET", "k", "w", "NX"], "$-1\r\n"),
        (&["SET", "k", "w", "XX", "GET"], "$1\r\nv\r\n"),
        (&["SET", "nokey", "w", "XX"], "$-1\r\n"),
        (
            &["SET", "k", "v", "EX", "0"],
            "-ERR invalid expire time in 'set' command\r\n",
        ),
        (
            &["SET", "k", "v", "EX", "10", "PX", "10"],
            "-ERR syntax error\r\n",
        ),
        (
            &["SET", "k", "v", "EX", "abc"],
            "-ERR value is not an integer or out of range\r\n",
        ),
        (&["SET", "k", "v", "BOGUS"], "-ERR syntax error\r\n"),
        (&["GETDEL", "k"], "$1\r\nw\r\n"),
        (&["GET", "k"], "$-1\r\n"),
        (&["INCR", "n"], ":1\r\n"),
        (&["INCRBY", "n", "41"], ":42\r\n"),
        (&["DECR", "n"], ":41\r\n"),
        (&["DECRBY", "n", "1"], ":40\r\n"),
        (&["SET", "s", "abc"], "+OK\r\n"),
        (
            &["INCR", "s"],
            "-ERR value is not an integer or out of range\r\n",
        ),
        (&["SET", "big", "9223372036854775807"], "+OK\r\n"),
        (
            &["INCR", "big"],
            "-ERR increment or decrement would overflow\r\n",
        ),
        (&["APPEND", "s", "def"], ":6\r\n"),
        (&["STRLEN", "s"], ":6\r\n"),
        (&["STRLEN", "missing"], ":0\r\n"),
        (&["EXISTS", "{s}", "{s}missing"], ":0\r\n"),
        (&["EXISTS", "s", "s"], ":2\r\n"),
        (&["TYPE", "s"], "+string\r\n"),
        (&["TYPE", "missing"], "+none\r\n"),
        (&["TTL", "s"], ":-1\r\n"),
        (&["TTL", "missing"], ":-2\r\n"),
    ];
    for (req, want) in cases {
        assert_eq!(c.cmd_s(req), *want, "request {req:?}");
    }
    // EXPIRE s 100: the deadline is 100 s after the server's clock at the EXPIRE, and TTL
    // answers the seconds left to it, rounded (Redis `(ttl + 500) / 1000`), from the server's
    // clock at the TTL; each clock lies between the reads around the command.
    let (reply, at) = timed(&mut c, &["EXPIRE", "s", "100"]);
    assert_eq!(reply, ":1\r\n");
    let deadline = int(&c.cmd_s(&["PEXPIRETIME", "s"]));
    assert!(
        (at.0 + 100_000..=at.1 + 100_000).contains(&deadline),
        "deadline {deadline}, EXPIRE between {at:?}"
    );
    let (reply, at) = timed(&mut c, &["TTL", "s"]);
    let ttl = int(&reply);
    let (least, most) = (
        (deadline - at.1 + 500) / 1000,
        (deadline - at.0 + 500) / 1000,
    );
    assert!(
        (least..=most).contains(&ttl),
        "TTL {ttl}, {least}..={most} by the clock"
    );
    let cases: &[(&[&str], &str)] = &[
        (&["EXPIRE", "s", "50", "GT"], ":0\r\n"),
        (&["PERSIST", "s"], ":1\r\n"),
        (&["PERSIST", "s"], ":0\r\n"),
        (&["EXPIRE", "missing", "10"], ":0\r\n"),
        (&["DEL", "s"], ":1\r\n"),
        (&["MSET", "{t}a", "1", "{t}b", "2"], "+OK\r\n"),
        (
            &["MGET", "{t}a", "{t}b", "{t}c"],
            "*3\r\n$1\r\n1\r\n$1\r\n2\r\n$-1\r\n",
        ),
        (&["MSETNX", "{t}a", "9", "{t}z", "9"], ":0\r\n"),
        (&["SELECT", "0"], "+OK\r\n"),
        (
            &["GET"],
            "-ERR wrong number of arguments for 'get' command\r\n",
        ),
        (
            &["NOSUCH", "a", "b"],
            "-ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b' \r\n",
        ),
    ];
    for (req, want) in cases {
        assert_eq!(c.cmd_s(req), *want, "request {req:?}");
    }
    // PTTL is in ms: the deadline (100 s after the SET, by the server's clock) less the
    // server's clock at the PTTL.
    let (reply, at) = timed(&mut c, &["SET", "p", "1", "PX", "100000"]);
    assert_eq!(reply, "+OK\r\n");
    let deadline = int(&c.cmd_s(&["PEXPIRETIME", "p"]));
    assert!(
        (at.0 + 100_000..=at.1 + 100_000).contains(&deadline),
        "deadline {deadline}, SET between {at:?}"
    );
    let (reply, at) = timed(&mut c, &["PTTL", "p"]);
    let ms = int(&reply);
    assert!(
        (deadline - at.1..=deadline - at.0).contains(&ms),
        "PTTL {ms}, deadline {deadline}, PTTL between {at:?}"
    );
    assert_eq!(c.cmd_s(&["DBSIZE"]), ":5\r\n");
    assert!(c.cmd_s(&["KEYS", "{t}*"]).starts_with("*2\r\n"));
    let scan = c.cmd_s(&["SCAN", "0", "COUNT", "1000"]);
    assert!(scan.starts_with("*2\r\n$1\r\n0\r\n*5\r\n"), "{scan}");
    assert_eq!(c.cmd_s(&["FLUSHALL"]), "+OK\r\n");
    assert_eq!(c.cmd_s(&["DBSIZE"]), ":0\r\n");
    assert_eq!(c.cmd_s(&["RANDOMKEY"]), "$-1\r\n");
    assert_eq!(c.cmd_s(&["QUIT"]), "+OK\r\n");
}

/// Error replies captured from Valkey 8.0 (`valkey-8.0/text/index.json`) for requests whose
/// answer does not depend on the other nodes: we replay their steps on one node that owns
/// every slot and compare the last reply byte for byte.
#[test]
fn error_texts_match_captures() {
    let mut procs = Procs::default();
    let port = ports::port();
    let _c = single_node(&mut procs, "vectors", port, &[]);
    let index = ferrocluster_testvectors::read_json("valkey-8.0/text/index.json");
    let cases = [
        "countkeysinslot-invalid",
        "getkeysinslot-invalid",
        "getkeysinslot-negative-count",
        "crossslot-mset",
        "crossslot-mget",
        "crossslot-del",
        // select-1 is left out: the command crate answers SELECT 1 as Valkey 9 does
        // (`DB index is out of range`), the captures are Valkey 8 (`SELECT is not allowed`).
        "select-0",
        "swapdb",
        "addslots-busy",
        "addslots-out-of-range",
        "addslotsrange-busy",
        "meet-port-out-of-range",
        "meet-port-not-number",
        "meet-cport-out-of-range",
        "meet-bad-address",
        "meet-port-zero",
        "forget-unknown",
        "reset-bad-arg",
        "replicate-unknown",
        "cluster-unknown-subcommand",
        "cluster-keyslot-arity",
        "cluster-countfailure-unknown",
        "cluster-replicas-unknown",
    ];
    let replies = index["replies"].as_array().expect("replies");
    for name in cases {
        let file = format!("errors/{name}.resp");
        let case = replies
            .iter()
            .find(|r| r["file"] == file.as_str())
            .unwrap_or_else(|| panic!("case {name} missing from the vectors"));
        let mut c = Client::connect(port);
        let steps = case["steps"].as_array().expect("steps");
        let mut last = Vec::new();
        for step in steps {
            let args: Vec<String> = step["args"]
                .as_array()
                .expect("args")
                .iter()
                .map(|a| a.as_str().expect("str").to_string())
                .collect();
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            last = c.cmd(&refs);
        }
        let want = steps.last().expect("a step")["reply"]
            .as_str()
            .expect("reply")
            .replace("\\r\\n", "\r\n");
        assert_eq!(String::from_utf8_lossy(&last), want, "case {name}");
    }
}

#[test]
fn keyslot_matches_captures() {
    let mut procs = Procs::default();
    let mut c = single_node(&mut procs, "keyslot", ports::port(), &[]);
    let v = ferrocluster_testvectors::read_json("redis-7.0/text/keyslot.json");
    let entries = v
        .as_array()
        .cloned()
        .or_else(|| v["keys"].as_array().cloned())
        .expect("keyslot entries");
    assert!(!entries.is_empty());
    for e in entries {
        let key_hex = e.get("key_hex").and_then(|k| k.as_str());
        let key: Vec<u8> = match key_hex {
            Some(h) => ferrocluster_testvectors::hex(h),
            // `k*1024`: the letter repeated key_len times (the capture's shorthand).
            None => {
                let text = e["key"].as_str().expect("key");
                let len = e["key_len"].as_u64().expect("key_len") as usize;
                let (unit, _) = text.split_once('*').expect("X*N shorthand");
                unit.repeat(len / unit.len()).into_bytes()
            }
        };
        let want = e["reply"]
            .as_str()
            .expect("reply")
            .replace("\\r\\n", "\r\n");
        c.send_raw(&common::encode(&[b"CLUSTER", b"KEYSLOT", &key]));
        assert_eq!(
            String::from_utf8_lossy(&c.read_reply()),
            want,
            "key {key:?}"
        );
    }
}

#[test]
fn pipelining_resp3_and_multi() {
    let mut procs = Procs::default();
    let port = ports::port();
    let mut c = single_node(&mut procs, "pipeline", port, &[]);
    let mut batch = Vec::new();
    for i in 0..500 {
        let k = format!("p:{i}");
        batch.extend_from_slice(&common::encode(&[b"SET", k.as_bytes(), b"x"]));
        batch.extend_from_slice(&common::encode(&[b"GET", k.as_bytes()]));
    }
    c.send_raw(&batch);
    for _ in 0..500 {
        assert_eq!(c.read_reply(), b"+OK\r\n");
        assert_eq!(c.read_reply(), b"$1\r\nx\r\n");
    }
    let hello = c.cmd_s(&["HELLO", "3"]);
    assert!(hello.starts_with("%7\r\n$6\r\nserver\r\n"), "{hello}");
    assert!(hello.contains("$4\r\nmode\r\n$7\r\ncluster\r\n"), "{hello}");
    assert_eq!(c.cmd_s(&["GET", "missing"]), "_\r\n");
    // CLIENT INFO names the connection's protocol (redis-server 7.0: `resp=3` after HELLO 3).
    let info = c.cmd_s(&["CLIENT", "INFO"]);
    assert!(info.contains(" resp=3 "), "{info}");
    assert!(Client::connect(port)
        .cmd_s(&["CLIENT", "INFO"])
        .contains(" resp=2 "));
    assert_eq!(
        c.cmd_s(&["HELLO", "4"]),
        "-NOPROTO unsupported protocol version\r\n"
    );
    assert_eq!(
        c.cmd_s(&["CLIENT", "SETINFO", "LIB-NAME", "redis-py"]),
        "+OK\r\n"
    );
    assert_eq!(c.cmd_s(&["CLIENT", "SETNAME", "me"]), "+OK\r\n");
    assert_eq!(c.cmd_s(&["CLIENT", "GETNAME"]), "$2\r\nme\r\n");
    assert!(c.cmd_s(&["CLIENT", "ID"]).starts_with(':'));
    // MULTI/EXEC through the command crate's client state.
    assert_eq!(c.cmd_s(&["MULTI"]), "+OK\r\n");
    assert_eq!(c.cmd_s(&["SET", "{m}1", "a"]), "+QUEUED\r\n");
    assert_eq!(c.cmd_s(&["INCR", "{m}2"]), "+QUEUED\r\n");
    assert_eq!(c.cmd_s(&["EXEC"]), "*2\r\n+OK\r\n:1\r\n");
    assert_eq!(c.cmd_s(&["MULTI"]), "+OK\r\n");
    assert_eq!(
        c.cmd_s(&["NOSUCH"]),
        "-ERR unknown command 'NOSUCH', with args beginning with: \r\n"
    );
    assert_eq!(
        c.cmd_s(&["EXEC"]),
        "-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    assert_eq!(c.cmd_s(&["EXEC"]), "-ERR EXEC without MULTI\r\n");
    assert_eq!(c.cmd_s(&["DISCARD"]), "-ERR DISCARD without MULTI\r\n");
    // COMMAND gives the key positions cluster clients use.
    let info = c.cmd_s(&["COMMAND", "INFO", "mset"]);
    assert!(info.contains("$4\r\nmset\r\n:-3\r\n"), "{info}");
    assert!(info.contains(":1\r\n:-1\r\n:2\r\n"), "{info}");
    assert!(c.cmd_s(&["COMMAND", "COUNT"]).starts_with(':'));
    let full = c.cmd(&["COMMAND"]);
    assert!(full.len() > 1000);
    let text = bulk_text(&c.cmd(&["INFO"]));
    for section in [
        "# Server",
        "# Clients",
        "# Memory",
        "# Replication",
        "# Keyspace",
        "# Cluster",
        "cluster_enabled:1",
    ] {
        assert!(text.contains(section), "INFO lacks {section}");
    }
}

#[test]
fn expiry_is_lazy_and_active() {
    let mut procs = Procs::default();
    let port = ports::port();
    let mut c = single_node(&mut procs, "expiry", port, &[]);
    for i in 0..50 {
        c.cmd(&["SET", &format!("e:{i}"), "v", "PX", "50"]);
    }
    c.cmd(&["SET", "lazy", "v", "PX", "50"]);
    assert_eq!(c.cmd_s(&["SET", "keep", "v"]), "+OK\r\n");
    // Lazy: an expired key reads as missing at once.
    wait_until("lazy expiry of `lazy`", || {
        Client::connect(port).cmd_s(&["GET", "lazy"]) == "$-1\r\n"
    });
    // Active: the timer reclaims expired keys nobody reads (DBSIZE counts stored keys).
    wait_until("active expiry reclaims the keys", || {
        Client::connect(port).cmd_s(&["DBSIZE"]) == ":1\r\n"
    });
    let info = bulk_text(&c.cmd(&["INFO", "stats"]));
    assert!(info.contains("expired_keys:"), "{info}");
}

#[test]
fn pubsub_and_sharded_pubsub() {
    let mut procs = Procs::default();
    let port = ports::port();
    let mut sub = single_node(&mut procs, "pubsub", port, &[]);
    assert_eq!(
        sub.cmd_s(&["SUBSCRIBE", "news"]),
        "*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n"
    );
    assert_eq!(
        sub.cmd_s(&["GET", "x"]),
        "-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"
    );
    let mut publ = Client::connect(port);
    // PUBSUB sees the subscription (redis-server 7.0's replies).
    assert_eq!(publ.cmd_s(&["PUBSUB", "CHANNELS"]), "*1\r\n$4\r\nnews\r\n");
    assert_eq!(publ.cmd_s(&["PUBSUB", "CHANNELS", "x*"]), "*0\r\n");
    assert_eq!(
        publ.cmd_s(&["PUBSUB", "NUMSUB", "news", "other"]),
        "*4\r\n$4\r\nnews\r\n:1\r\n$5\r\nother\r\n:0\r\n"
    );
    assert_eq!(publ.cmd_s(&["PUBSUB", "SHARDCHANNELS"]), "*0\r\n");
    // A pattern subscriber of another connection gets it too, as `pmessage`, and counts.
    let mut psub = Client::connect(port);
    assert_eq!(
        psub.cmd_s(&["PSUBSCRIBE", "n*"]),
        "*3\r\n$10\r\npsubscribe\r\n$2\r\nn*\r\n:1\r\n"
    );
    assert_eq!(publ.cmd_s(&["PUBSUB", "NUMPAT"]), ":1\r\n");
    assert_eq!(publ.cmd_s(&["PUBLISH", "news", "hello"]), ":2\r\n");
    assert_eq!(
        String::from_utf8_lossy(&psub.read_reply()),
        "*4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$5\r\nhello\r\n"
    );
    assert_eq!(publ.cmd_s(&["PUBLISH", "other", "x"]), ":0\r\n");
    assert_eq!(
        psub.cmd_s(&["PUNSUBSCRIBE"]),
        "*3\r\n$12\r\npunsubscribe\r\n$2\r\nn*\r\n:0\r\n"
    );
    assert_eq!(publ.cmd_s(&["PUBSUB", "NUMPAT"]), ":0\r\n");
    assert_eq!(
        String::from_utf8_lossy(&sub.read_reply()),
        "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nhello\r\n"
    );
    assert_eq!(
        sub.cmd_s(&["UNSUBSCRIBE"]),
        "*3\r\n$11\r\nunsubscribe\r\n$4\r\nnews\r\n:0\r\n"
    );
    let mut ssub = Client::connect(port);
    assert_eq!(
        ssub.cmd_s(&["SSUBSCRIBE", "shard-news"]),
        "*3\r\n$10\r\nssubscribe\r\n$10\r\nshard-news\r\n:1\r\n"
    );
    assert_eq!(publ.cmd_s(&["SPUBLISH", "shard-news", "x"]), ":1\r\n");
    assert_eq!(
        publ.cmd_s(&["PUBSUB", "SHARDNUMSUB", "shard-news"]),
        "*2\r\n$10\r\nshard-news\r\n:1\r\n"
    );
    assert_eq!(
        publ.cmd_s(&["PUBSUB", "SHARDCHANNELS", "shard-*"]),
        "*1\r\n$10\r\nshard-news\r\n"
    );
    assert_eq!(
        String::from_utf8_lossy(&ssub.read_reply()),
        "*3\r\n$8\r\nsmessage\r\n$10\r\nshard-news\r\n$1\r\nx\r\n"
    );
    assert_eq!(
        publ.cmd_s(&["SSUBSCRIBE", "shard-news", "other-channel-x"]),
        "-CROSSSLOT Keys in request don't hash to the same slot\r\n"
    );
}

#[test]
fn bad_input_closes_only_that_connection() {
    let mut procs = Procs::default();
    let port = ports::port();
    let _c = single_node(
        &mut procs,
        "badinput",
        port,
        &["--proto-max-bulk-len", "1kb"],
    );
    let cases: &[(&[u8], &str)] = &[
        (
            b"*1\r\n$abc\r\n",
            "-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*x\r\n",
            "-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"*2\r\n$3\r\nGET\r\n:1\r\n",
            "-ERR Protocol error: expected '$', got ':'\r\n",
        ),
        // Oversized: refused from the header, before the data arrives.
        (
            b"*2\r\n$3\r\nGET\r\n$2000\r\n",
            "-ERR Protocol error: invalid bulk length\r\n",
        ),
    ];
    for (bytes, want) in cases {
        let mut c = Client::connect(port);
        c.send_raw(bytes);
        assert_eq!(String::from_utf8_lossy(&c.read_to_close()), *want);
    }
    // A client that disconnects mid-command loses nothing that was acknowledged.
    let mut c = Client::connect(port);
    assert_eq!(c.cmd_s(&["SET", "acked", "1"]), "+OK\r\n");
    c.send_raw(b"*3\r\n$3\r\nSET\r\n$4\r\nhalf\r\n$1");
    drop(c);
    let mut c = Client::connect(port);
    assert_eq!(c.cmd_s(&["GET", "acked"]), "$1\r\n1\r\n");
    assert_eq!(c.cmd_s(&["EXISTS", "half"]), ":0\r\n");
}

#[test]
fn auth_with_requirepass() {
    let mut procs = Procs::default();
    let dir = test_dir("auth");
    let port = ports::port();
    procs.start(&dir, port, &["--requirepass", "secret"]);
    let mut c = Client::connect(port);
    assert_eq!(
        c.cmd_s(&["GET", "x"]),
        "-NOAUTH Authentication required.\r\n"
    );
    assert_eq!(
        c.cmd_s(&["AUTH", "wrong"]),
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    assert_eq!(c.cmd_s(&["AUTH", "secret"]), "+OK\r\n");
    assert_eq!(c.cmd_s(&["PING"]), "+PONG\r\n");
    let mut c = Client::connect(port);
    assert!(c
        .cmd_s(&["HELLO", "3", "AUTH", "default", "secret"])
        .starts_with('%'));
}

#[test]
fn standalone_mode_has_sixteen_databases() {
    let mut procs = Procs::default();
    let dir = test_dir("standalone");
    let port = ports::port();
    procs.start(&dir, port, &["--cluster-enabled", "no"]);
    let mut c = Client::connect(port);
    assert_eq!(c.cmd_s(&["SET", "a", "1"]), "+OK\r\n");
    assert_eq!(c.cmd_s(&["SET", "b", "2"]), "+OK\r\n");
    assert_eq!(c.cmd_s(&["SELECT", "5"]), "+OK\r\n");
    assert_eq!(c.cmd_s(&["GET", "a"]), "$-1\r\n");
    assert_eq!(
        c.cmd_s(&["SELECT", "16"]),
        "-ERR DB index is out of range\r\n"
    );
    assert_eq!(c.cmd_s(&["SWAPDB", "0", "5"]), "+OK\r\n");
    assert_eq!(c.cmd_s(&["GET", "a"]), "$1\r\n1\r\n");
    assert_eq!(
        c.cmd_s(&["CLUSTER", "INFO"]),
        "-ERR This instance has cluster support disabled\r\n"
    );
    assert_eq!(
        c.cmd_s(&["DEBUG", "POPULATE", "100", "key", "8"]),
        "+OK\r\n"
    );
    assert_eq!(c.cmd_s(&["DBSIZE"]), ":102\r\n");
    assert_eq!(c.cmd_s(&["GET", "key:7"]), "$8\r\nvalue:7\0\r\n");
}

#[test]
fn bad_flags_exit_non_zero_with_a_reason() {
    for (args, needle) in [
        (vec!["--port", "99999"], "port"),
        (vec!["--no-such-option", "1"], "Bad directive"),
        (vec!["--cluster-enabled", "maybe"], "yes"),
        (vec!["/nonexistent/ferrocluster.conf"], "can't open"),
    ] {
        let out = std::process::Command::new(BIN)
            .args(&args)
            .output()
            .expect("run");
        assert!(!out.status.success(), "{args:?} should fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn corrupt_nodes_conf_stops_the_start() {
    let dir = test_dir("corrupt");
    std::fs::write(
        dir.join("nodes.conf"),
        "this is not a nodes.conf line\nvars currentEpoch x\n",
    )
    .expect("write");
    let out = std::process::Command::new(BIN)
        .args(["--port", &ports::port().to_string(), "--dir"])
        .arg(&dir)
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nodes.conf") && err.contains("line"), "{err}");
}

#[test]
fn restart_keeps_identity_and_nodes_conf_is_written_atomically() {
    let mut procs = Procs::default();
    let dir = test_dir("restart");
    let port = ports::port();
    let node_dir = procs.start(&dir, port, &[]);
    let mut c = Client::connect(port);
    let id = bulk_text(&c.cmd(&["CLUSTER", "MYID"]));
    assert_eq!(id.len(), 40);
    c.cmd(&["CLUSTER", "ADDSLOTSRANGE", "0", "99"]);
    wait_until("nodes.conf has the slots", || {
        std::fs::read_to_string(node_dir.join("nodes.conf")).is_ok_and(|t| t.contains(" 0-99"))
    });
    let leftovers: Vec<_> = std::fs::read_dir(&node_dir)
        .expect("dir")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left behind");
    procs.kill(port);
    procs.start(&dir, port, &[]);
    let mut c = Client::connect(port);
    assert_eq!(bulk_text(&c.cmd(&["CLUSTER", "MYID"])), id);
    assert!(
        bulk_text(&c.cmd(&["CLUSTER", "NODES"])).contains("myself,master - 0 0 0 connected 0-99")
    );
}

#[test]
fn garbage_on_the_bus_closes_that_link_and_the_node_goes_on() {
    let mut procs = Procs::default();
    let port = ports::port();
    let mut c = single_node(&mut procs, "busgarbage", port, &[]);
    let bus_port = port + ferrocluster_testkit::BUS_OFFSET;
    let mut bus = std::net::TcpStream::connect(("127.0.0.1", bus_port)).expect("bus port");
    bus.set_read_timeout(Some(HANG)).expect("timeout");
    let garbage: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 251) as u8).collect();
    let _ = bus.write_all(&garbage);
    let mut buf = [0u8; 16];
    let n = bus.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0, "the node should close a link that sends garbage");
    assert_eq!(c.cmd_s(&["PING"]), "+PONG\r\n");
    assert!(bulk_text(&c.cmd(&["CLUSTER", "INFO"])).contains("cluster_state:ok"));
}

#[test]
fn wait_without_replicas_times_out_and_the_pipeline_goes_on() {
    let mut procs = Procs::default();
    let mut c = single_node(&mut procs, "wait", ports::port(), &[]);
    let mut batch = common::encode(&[b"SET", b"w", b"1"]);
    batch.extend_from_slice(&common::encode(&[b"WAIT", b"1", b"200"]));
    batch.extend_from_slice(&common::encode(&[b"GET", b"w"]));
    c.send_raw(&batch);
    assert_eq!(c.read_reply(), b"+OK\r\n");
    assert_eq!(c.read_reply(), b":0\r\n");
    assert_eq!(c.read_reply(), b"$1\r\n1\r\n");
    assert_eq!(c.cmd_s(&["WAIT", "0", "0"]), ":0\r\n");
}

#[test]
fn replica_gets_a_full_copy_then_the_write_stream() {
    let mut procs = Procs::default();
    let [primary_port, replica_port] = ports::ports(2)[..] else {
        unreachable!()
    };
    let mut primary = single_node(&mut procs, "fullsync", primary_port, &[]);
    assert_eq!(
        primary.cmd_s(&["DEBUG", "POPULATE", "1000", "k", "16"]),
        "+OK\r\n"
    );
    let (reply, at) = timed(&mut primary, &["SET", "ttl", "v", "EX", "1000"]);
    assert_eq!(reply, "+OK\r\n");
    let deadline = int(&primary.cmd_s(&["PEXPIRETIME", "ttl"]));
    assert!(
        (at.0 + 1_000_000..=at.1 + 1_000_000).contains(&deadline),
        "deadline {deadline}, SET between {at:?}"
    );
    let dir = test_dir("fullsync-replica");
    procs.start(&dir, replica_port, &[]);
    assert_eq!(
        primary.cmd_s(&["CLUSTER", "MEET", "127.0.0.1", &replica_port.to_string()]),
        "+OK\r\n"
    );
    let primary_id = bulk_text(&primary.cmd(&["CLUSTER", "MYID"]));
    let mut replica = Client::connect(replica_port);
    wait_until("the replica knows the primary", || {
        bulk_text(&Client::connect(replica_port).cmd(&["CLUSTER", "NODES"])).contains(&primary_id)
    });
    assert_eq!(
        replica.cmd_s(&["CLUSTER", "REPLICATE", &primary_id]),
        "+OK\r\n"
    );
    wait_until("full copy on the replica", || {
        Client::connect(replica_port).cmd_s(&["DBSIZE"]) == ":1001\r\n"
    });
    wait_until("the replica sees the slots served", || {
        bulk_text(&Client::connect(replica_port).cmd(&["CLUSTER", "INFO"]))
            .contains("cluster_state:ok")
    });
    assert_eq!(replica.cmd_s(&["READONLY"]), "+OK\r\n");
    assert_eq!(
        replica.cmd_s(&["GET", "k:999"]),
        "$16\r\nvalue:999\0\0\0\0\0\0\0\r\n"
    );
    // The full copy keeps the deadline itself, to the millisecond.
    assert_eq!(
        int(&replica.cmd_s(&["PEXPIRETIME", "ttl"])),
        deadline,
        "the deadline on the replica"
    );
    assert_eq!(primary.cmd_s(&["INCRBY", "counter", "5"]), ":5\r\n");
    assert_eq!(primary.cmd_s(&["DEL", "k:1"]), ":1\r\n");
    let wait = HANG.as_millis().to_string();
    assert_eq!(primary.cmd_s(&["WAIT", "1", &wait]), ":1\r\n");
    assert_eq!(replica.cmd_s(&["GET", "counter"]), "$1\r\n5\r\n");
    assert_eq!(replica.cmd_s(&["EXISTS", "k:1"]), ":0\r\n");
    let offset = |t: &str| {
        t.lines()
            .find_map(|l| l.strip_prefix("master_repl_offset:"))
            .map(str::to_string)
    };
    // The primary writes into the stream on its own (a PING every 10 s, GETACK), so the two
    // offsets are equal only once the replica has applied what was sent: both INFOs are read
    // in the same poll until they show the same offset.
    let (p, r) = common::wait_ok("the replica's offset to reach the primary's", || {
        let p = bulk_text(&primary.cmd(&["INFO", "replication"]));
        let r = bulk_text(&replica.cmd(&["INFO", "replication"]));
        match (offset(&p), offset(&r)) {
            (Some(a), Some(b)) if a == b => Ok((p, r)),
            (a, b) => Err(format!("offsets {a:?} and {b:?}:\n{p}\n{r}")),
        }
    });
    assert!(p.contains("connected_slaves:1"), "{p}");
    assert!(
        r.contains("role:slave") && r.contains(&format!("master_port:{primary_port}\r\n")),
        "{r}"
    );
}

//! Hashes and sets move between servers in their RDB encodings: DUMP on ours restores on
//! redis-server 7.0 and valkey-server 9.1 and theirs on ours (small and big encodings), and
//! replication (full sync and the stream) carries every type, with the effects the
//! propagation rule chooses (SPOP as SREM, INCRBYFLOAT as SET, relative expiries as
//! PEXPIREAT, ...), so a replica ends equal to its primary. Ports from the one allocator
//! (`common::ports`).

mod common;

use common::{ports, start_real_server, test_dir, wait_until, Client, Procs, HANG};

/// A bulk reply's payload.
fn bulk(r: &[u8]) -> Vec<u8> {
    let s = r.iter().position(|&b| b == b'\n').unwrap() + 1;
    r[s..r.len() - 2].to_vec()
}

fn cmd(c: &mut Client, argv: &[&[u8]]) -> Vec<u8> {
    c.send_raw(&common::encode(argv));
    c.read_reply()
}

/// The value of `key` in a canonical form (collections sorted).
fn contents(c: &mut Client, key: &str) -> String {
    let t = c.cmd_s(&["TYPE", key]);
    let read = match t.as_str() {
        "+hash\r\n" => "HGETALL",
        "+set\r\n" => "SMEMBERS",
        "+string\r\n" => return c.cmd_s(&["GET", key]),
        other => return other.to_owned(),
    };
    let r = c.cmd_s(&[read, key]);
    let mut items: Vec<&str> = r.split("\r\n").skip(1).collect();
    items.sort_unstable();
    format!("{t}{items:?}")
}

/// Builds the values compared, with the commands their owner would see.
fn build(c: &mut Client) -> Vec<&'static str> {
    let mut big_hash: Vec<String> = vec!["HSET".into(), "{t}hbig".into()];
    for i in 0..1000 {
        big_hash.push(format!("field:{i}"));
        big_hash.push(format!("value:{i}"));
    }
    let mut big_ints: Vec<String> = vec!["SADD".into(), "{t}sints".into()];
    big_ints.extend((0..600).map(|i| (i * 7 - 1000).to_string()));
    let mut big_strs: Vec<String> = vec!["SADD".into(), "{t}sbig".into()];
    big_strs.extend((0..700).map(|i| format!("member:{i}")));
    let run = |c: &mut Client, v: &[String]| {
        let a: Vec<&str> = v.iter().map(String::as_str).collect();
        let r = c.cmd_s(&a);
        assert!(!r.starts_with('-'), "{a:?}: {r}");
    };
    run(c, &big_hash);
    run(c, &big_ints);
    run(c, &big_strs);
    for argv in [
        &["HSET", "{t}hsmall", "a", "1", "b", "2", "c", "3"][..],
        &["HSET", "{t}hlong", "f", &"x".repeat(100)],
        &["SADD", "{t}sint", "1", "2", "-5", "9223372036854775807"],
        &["SADD", "{t}sstr", "a", "b", "c"],
        &["SADD", "{t}smixed", "1", "two", "3"],
    ] {
        let r = c.cmd_s(argv);
        assert!(!r.starts_with('-'), "{argv:?}: {r}");
    }
    vec![
        "{t}hbig",
        "{t}sints",
        "{t}sbig",
        "{t}hsmall",
        "{t}hlong",
        "{t}sint",
        "{t}sstr",
        "{t}smixed",
    ]
}

#[test]
fn dump_and_restore_move_hashes_and_sets_both_ways() {
    let dir = test_dir("types-interop");
    let [port, redis, valkey] = ports::ports(3)[..] else {
        unreachable!()
    };
    let mut procs = Procs::default();
    procs.start(&dir, port, &["--cluster-enabled", "no"]);
    let _real = [
        start_real_server("redis-server", redis, &dir.join("redis-server"), &[]),
        start_real_server("valkey-server", valkey, &dir.join("valkey-server"), &[]),
    ];
    let mut ours = Client::connect(port);
    let keys = build(&mut ours);
    for peer in [redis, valkey] {
        let mut them = Client::connect(peer);
        them.cmd(&["FLUSHALL"]);
        // Ours -> theirs.
        for k in &keys {
            let payload = bulk(&ours.cmd(&["DUMP", k]));
            let r = cmd(&mut them, &[b"RESTORE", k.as_bytes(), b"0", &payload]);
            assert_eq!(
                r,
                b"+OK\r\n",
                "{k} ours -> {peer}: {}",
                String::from_utf8_lossy(&r)
            );
            assert_eq!(
                contents(&mut them, k),
                contents(&mut ours, k),
                "{k} on {peer}"
            );
        }
        // Theirs (built by their own commands) -> ours.
        them.cmd(&["FLUSHALL"]);
        let keys = build(&mut them);
        for k in &keys {
            let payload = bulk(&them.cmd(&["DUMP", k]));
            let mine = format!("{k}:from-{peer}");
            let r = cmd(&mut ours, &[b"RESTORE", mine.as_bytes(), b"0", &payload]);
            assert_eq!(
                r,
                b"+OK\r\n",
                "{k} {peer} -> ours: {}",
                String::from_utf8_lossy(&r)
            );
            assert_eq!(
                contents(&mut ours, &mine),
                contents(&mut them, k),
                "{k} from {peer}"
            );
            // Restored in the encoding our rules give its contents (Valkey: sets of few
            // strings are listpacks, where Redis 7.0 has hashtables).
            let want = match *k {
                "{t}hbig" | "{t}hlong" | "{t}sints" | "{t}sbig" => "hashtable",
                "{t}hsmall" | "{t}sstr" | "{t}smixed" => "listpack",
                _ => "intset",
            };
            assert_eq!(
                ours.cmd_s(&["OBJECT", "ENCODING", &mine]),
                format!("${}\r\n{want}\r\n", want.len()),
                "{mine}"
            );
        }
    }
}

fn myid(port: u16) -> String {
    let r = Client::connect(port).cmd_s(&["CLUSTER", "MYID"]);
    r.split("\r\n").nth(1).unwrap().to_owned()
}

/// `replica` follows `primary` (cluster mode, the primary owning every slot).
fn replicate(primary: u16, replica: u16) {
    let mut r = Client::connect(replica);
    assert_eq!(
        r.cmd_s(&["CLUSTER", "MEET", "127.0.0.1", &primary.to_string()]),
        "+OK\r\n"
    );
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
    // The replica serves READONLY reads once its own view has every slot served (it learns
    // the primary's slots by gossip, on its own schedule).
    wait_until("cluster_state:ok on the replica", || {
        Client::connect(replica)
            .cmd_s(&["CLUSTER", "INFO"])
            .contains("cluster_state:ok")
    });
}

/// Every key of `port`: name, canonical value, absolute deadline.
fn snapshot(port: u16) -> Vec<(String, String, String)> {
    let mut c = Client::connect(port);
    c.cmd(&["READONLY"]);
    let keys = c.cmd_s(&["KEYS", "*"]);
    let mut out: Vec<(String, String, String)> = keys
        .split("\r\n")
        .skip(1)
        .filter(|l| !l.starts_with('$') && !l.is_empty())
        .map(|k| {
            let v = contents(&mut c, k);
            let t = c.cmd_s(&["PEXPIRETIME", k]);
            (k.to_owned(), v, t)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn replicas_end_equal_to_their_primary_for_every_effect() {
    let dir = test_dir("types-replication");
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
    wait_until("cluster_state:ok", || {
        Client::connect(primary)
            .cmd_s(&["CLUSTER", "INFO"])
            .contains("cluster_state:ok")
    });
    // Before the replica attaches: carried by the full sync.
    build(&mut p);
    assert_eq!(
        p.cmd_s(&["SET", "{t}withttl", "v", "EX", "1000"]),
        "+OK\r\n"
    );
    assert_eq!(p.cmd_s(&["HSET", "{t}httl", "f", "v"]), ":1\r\n");
    assert_eq!(p.cmd_s(&["EXPIRE", "{t}httl", "2000"]), ":1\r\n");
    replicate(primary, replica);
    // After: carried by the stream, as the propagation rule rewrites them.
    let writes: &[&[&str]] = &[
        &["SPOP", "{t}sbig"],
        &["SPOP", "{t}sbig", "5"],
        &["SPOP", "{t}sint", "100"],
        &["SRANDMEMBER", "{t}sbig", "3"],
        &["INCRBYFLOAT", "{t}f", "1.1"],
        &["INCRBYFLOAT", "{t}f", "0.2"],
        &["HINCRBYFLOAT", "{t}hsmall", "a", "0.5"],
        &["HINCRBY", "{t}hsmall", "b", "7"],
        &["SET", "{t}ex", "v", "EX", "500"],
        &["SET", "{t}px", "v", "PX", "500000", "GET"],
        &["SETEX", "{t}sx", "300", "v"],
        &["EXPIRE", "{t}hbig", "700"],
        &["PEXPIRE", "{t}sbig", "800000", "NX"],
        &["EXPIRE", "{t}sstr", "-1"],
        &["GETEX", "{t}withttl", "PERSIST"],
        &["GETEX", "{t}ex", "EX", "900"],
        &["SETRANGE", "{t}rng", "3", "abc"],
        &["APPEND", "{t}rng", "def"],
        &["SMOVE", "{t}sstr", "{t}smixed", "a"],
        &["SINTERSTORE", "{t}inter", "{t}sints", "{t}sint"],
        &["SUNIONSTORE", "{t}uni", "{t}sstr", "{t}smixed"],
        &["SDIFFSTORE", "{t}diff", "{t}sbig", "{t}smixed"],
        &["HDEL", "{t}hbig", "field:1", "field:2"],
        &["RENAME", "{t}hlong", "{t}hlong2"],
        &["COPY", "{t}hsmall", "{t}hcopy"],
        &["DEL", "{t}nosuch", "{t}uni"],
        &["GETDEL", "{t}withttl"],
    ];
    for w in writes {
        let reply = p.cmd_s(w);
        assert!(!reply.starts_with('-'), "{w:?}: {reply}");
    }
    // WAIT's timeout only bounds a hang: the stream reaches the replica however slowly.
    let hang_ms = HANG.as_millis().to_string();
    assert_eq!(p.cmd_s(&["WAIT", "1", &hang_ms]), ":1\r\n");
    let (a, b) = (snapshot(primary), snapshot(replica));
    assert!(a.len() > 10, "{a:?}");
    assert_eq!(a, b, "the replica differs from its primary");
}

//! Legacy slot migration of every value type between our nodes and real ones (issue 18):
//! `redis-cli --cluster reshard` (`CLUSTER SETSLOT` + `MIGRATE` of DUMP payloads, on
//! `ferrocluster_dataplane::legacy`) moves slots holding strings (raw and integer), hashes,
//! lists, sets (intset and listpack) and sorted sets, small and large encodings, with and
//! without TTLs, from a `valkey-server` 9.1 node to ours, from ours to a `redis-server` 7.0
//! node, from that node back to ours, and from ours to the valkey node. After every move the
//! target holds every key with the same value and a TTL still pending, and the source none.
//!
//! Ports 24520-24522 (bus ports +1000). A missing server fails the test.
#![allow(clippy::disallowed_methods)]

mod mixed;

use mixed::{cmd, reshard, Client, Kind, Mixed, Reply, Role};

/// How many slots each reshard moves (the source's lowest).
const SLOTS: u16 = 4;

/// One key: its name, the commands that make it, and whether it has a TTL.
struct Key {
    name: String,
    make: Vec<Vec<String>>,
    ttl: bool,
}

fn words(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

/// Keys of every type in slots `lo..lo + SLOTS` (the ones reshard moves first).
fn keys_in(m: &Mixed, lo: u16) -> Vec<Key> {
    let ask = m.live_ports()[0];
    let mut c = Client::connect(ask).unwrap();
    let mut slot_key = |prefix: &str| -> String {
        (0..100_000u32)
            .map(|n| format!("{prefix}:{n}"))
            .find(|k| {
                matches!(c.cmd(&["CLUSTER", "KEYSLOT", k]),
                    Reply::Int(s) if (i64::from(lo)..i64::from(lo + SLOTS)).contains(&s))
            })
            .expect("a key in the first slots")
    };
    let mut keys = Vec::new();
    let mut add = |prefix: &str, ttl: bool, make: &dyn Fn(&str) -> Vec<Vec<String>>| {
        let name = slot_key(prefix);
        let mut cmds = make(&name);
        if ttl {
            cmds.push(words(&["PEXPIRE", &name, "900000"]));
        }
        keys.push(Key {
            name,
            make: cmds,
            ttl,
        });
    };
    add("str", true, &|k| vec![words(&["SET", k, "a string value"])]);
    add("int", false, &|k| vec![words(&["SET", k, "12345"])]);
    add("bigstr", false, &|k| {
        vec![words(&["SET", k, &"x".repeat(20_000)])]
    });
    add("hash", true, &|k| {
        vec![words(&["HSET", k, "f1", "v1", "f2", "2"])]
    });
    add("bighash", false, &|k| {
        let mut c = words(&["HSET", k]);
        for i in 0..300 {
            c.push(format!("field{i}"));
            c.push(format!("value{i}"));
        }
        vec![c]
    });
    add("list", true, &|k| {
        vec![words(&["RPUSH", k, "a", "b", "c", "1"])]
    });
    add("biglist", false, &|k| {
        let mut c = words(&["RPUSH", k]);
        c.extend((0..2000).map(|i| format!("element-{i}")));
        vec![c]
    });
    add("intset", false, &|k| {
        vec![words(&["SADD", k, "1", "2", "300"])]
    });
    add("set", true, &|k| vec![words(&["SADD", k, "x", "y", "z"])]);
    add("bigset", false, &|k| {
        let mut c = words(&["SADD", k]);
        c.extend((0..600).map(|i| format!("member-{i}")));
        vec![c]
    });
    add("zset", true, &|k| {
        vec![words(&["ZADD", k, "1", "a", "2.5", "b"])]
    });
    add("bigzset", false, &|k| {
        let mut c = words(&["ZADD", k]);
        for i in 0..300 {
            c.push(format!("{i}.25"));
            c.push(format!("m{i}"));
        }
        vec![c]
    });
    keys
}

/// A key's content as ordinary commands read it, in an order-free form.
fn content(c: &mut Client, key: &str) -> String {
    let ty = c.cmd(&["TYPE", key]).text();
    let mut items: Vec<String> = match ty.as_str() {
        "string" => vec![c.cmd(&["GET", key]).text()],
        "hash" => c
            .cmd(&["HGETALL", key])
            .items()
            .iter()
            .map(Reply::text)
            .collect::<Vec<_>>()
            .chunks(2)
            .map(|p| p.join("="))
            .collect(),
        "list" => c
            .cmd(&["LRANGE", key, "0", "-1"])
            .items()
            .iter()
            .map(Reply::text)
            .collect(),
        "set" => c
            .cmd(&["SMEMBERS", key])
            .items()
            .iter()
            .map(Reply::text)
            .collect(),
        "zset" => c
            .cmd(&["ZRANGE", key, "0", "-1", "WITHSCORES"])
            .items()
            .iter()
            .map(Reply::text)
            .collect(),
        other => panic!("{key}: type {other}"),
    };
    if matches!(ty.as_str(), "hash" | "set") {
        items.sort();
    }
    format!("{ty}:{}", items.join(","))
}

/// Every key is on `port` as it was made, a TTL still pending where one was set.
fn check_on(port: u16, keys: &[Key], want: &[String]) {
    let mut c = Client::connect(port).unwrap();
    for (k, w) in keys.iter().zip(want) {
        assert_eq!(&content(&mut c, &k.name), w, "{} on {port}", k.name);
        let Reply::Int(pttl) = c.cmd(&["PTTL", &k.name]) else {
            panic!("PTTL")
        };
        if k.ttl {
            assert!(
                pttl > 0 && pttl <= 900_000,
                "{} on {port}: PTTL {pttl}",
                k.name
            );
        } else {
            assert_eq!(pttl, -1, "{} on {port}", k.name);
        }
    }
}

fn dbsize(port: u16) -> i64 {
    match cmd(port, &["DBSIZE"]) {
        Reply::Int(n) => n,
        other => panic!("DBSIZE on {port}: {other:?}"),
    }
}

#[test]
fn redis_cli_reshard_moves_every_type_with_ttls_between_ours_valkey_9_and_redis_7() {
    let m = Mixed::form(
        "migrate-interop",
        24520,
        &[
            (Kind::Valkey, Role::Primary),
            (Kind::Ours, Role::Primary),
            (Kind::Real, Role::Primary),
        ],
    );
    let (valkey, ours, redis) = (m.m(0).clone(), m.m(1).clone(), m.m(2).clone());
    let (lo, _) = valkey.slots.expect("valkey owns the first slots");
    let keys = keys_in(&m, lo);
    let mut v = Client::connect(valkey.port).unwrap();
    for k in &keys {
        for c in &k.make {
            let args: Vec<&str> = c.iter().map(String::as_str).collect();
            let r = v.cmd(&args);
            assert!(!matches!(r, Reply::Error(_)), "{args:?}: {r:?}");
        }
    }
    let want: Vec<String> = keys.iter().map(|k| content(&mut v, &k.name)).collect();
    let n = keys.len() as i64;
    assert_eq!(dbsize(valkey.port), n);

    // valkey -> ours -> redis -> ours -> valkey: each reshard moves the source's lowest
    // slots, which are the ones holding the keys.
    for (from, to) in [
        (&valkey, &ours),
        (&ours, &redis),
        (&redis, &ours),
        (&ours, &valkey),
    ] {
        reshard(from.port, &from.id, &to.id, usize::from(SLOTS));
        check_on(to.port, &keys, &want);
        assert_eq!(dbsize(to.port), n, "{:?} -> {:?}", from.kind, to.kind);
        assert_eq!(dbsize(from.port), 0, "{:?} -> {:?}", from.kind, to.kind);
    }
    m.assert_cluster_check(ours.port);
}

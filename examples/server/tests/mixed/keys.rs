//! Keys of every value type the data plane moves (strings raw and integer, hashes, lists,
//! sets as intset and listpack, sorted sets; small and large encodings; with and without
//! TTLs), and how a test reads them back, for the slot migration interop tests.

use super::{cmd, Client, Mixed, Reply};

/// How many slots each move takes (the source's lowest).
pub const SLOTS: u16 = 4;

/// One key: its name, the commands that make it, and whether it has a TTL.
pub struct Key {
    pub name: String,
    pub make: Vec<Vec<String>>,
    pub ttl: bool,
}

pub fn words(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

/// Keys of every type in slots `lo..lo + SLOTS` (the ones reshard moves first).
pub fn keys_in(m: &Mixed, lo: u16) -> Vec<Key> {
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

/// Makes `keys` on `c` (every command must succeed) and returns their contents as
/// [`content`] reads them, in order: what a migration must carry.
pub fn make_keys(c: &mut Client, keys: &[Key]) -> Vec<String> {
    for k in keys {
        for m in &k.make {
            let args: Vec<&str> = m.iter().map(String::as_str).collect();
            let r = c.cmd(&args);
            assert!(!matches!(r, Reply::Error(_)), "{args:?}: {r:?}");
        }
    }
    keys.iter().map(|k| content(c, &k.name)).collect()
}

/// A key's content as ordinary commands read it, in an order-free form.
pub fn content(c: &mut Client, key: &str) -> String {
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
pub fn check_on(port: u16, keys: &[Key], want: &[String]) {
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

pub fn dbsize(port: u16) -> i64 {
    match cmd(port, &["DBSIZE"]) {
        Reply::Int(n) => n,
        other => panic!("DBSIZE on {port}: {other:?}"),
    }
}

//! The built-in table against real servers' `COMMAND INFO` and `COMMAND DOCS` replies
//! (`tests/vectors/commands-*.json`, made by `tests/vectors/capture_commands.py`):
//!
//! * Valkey 9.1, the table's source: every command and subcommand, both replies, byte for
//!   byte in RESP2 and RESP3.
//! * Redis 7.0: `COMMAND INFO` of every command Redis 7.0 has, field by field in RESP2, equal
//!   except the fields listed in [`REDIS_DIFFERENCES`], where Valkey 9.1 changed the value and
//!   we follow Valkey. (In RESP3 Redis 7.0 also sends an empty subcommand list as a set, `~0`,
//!   where Valkey sends an array, `*0`.)

use ferrocluster_command::{builtin, ReplyWriter, BUILTIN};
use serde_json::Value as Json;

struct Resp {
    buf: Vec<u8>,
    resp3: bool,
}

impl ReplyWriter for Resp {
    fn array(&mut self, n: usize) {
        self.buf.extend_from_slice(format!("*{n}\r\n").as_bytes());
    }
    fn set(&mut self, n: usize) {
        let t = if self.resp3 { '~' } else { '*' };
        self.buf.extend_from_slice(format!("{t}{n}\r\n").as_bytes());
    }
    fn map(&mut self, n: usize) {
        if self.resp3 {
            self.buf.extend_from_slice(format!("%{n}\r\n").as_bytes());
        } else {
            self.buf
                .extend_from_slice(format!("*{}\r\n", 2 * n).as_bytes());
        }
    }
    fn bulk(&mut self, b: &[u8]) {
        self.buf
            .extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
        self.buf.extend_from_slice(b);
        self.buf.extend_from_slice(b"\r\n");
    }
    fn simple(&mut self, s: &str) {
        self.buf.extend_from_slice(format!("+{s}\r\n").as_bytes());
    }
    fn int(&mut self, n: i64) {
        self.buf.extend_from_slice(format!(":{n}\r\n").as_bytes());
    }
}

fn capture(name: &str) -> Vec<Json> {
    let path = format!("{}/tests/vectors/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let j: Json = serde_json::from_str(&text).unwrap();
    j["commands"].as_array().unwrap().clone()
}

/// The capture stores reply bytes as latin-1 text.
fn bytes(j: &Json) -> Vec<u8> {
    j.as_str()
        .unwrap()
        .chars()
        .map(|c| c as u32 as u8)
        .collect()
}

fn info(name: &str, resp3: bool) -> Vec<u8> {
    let spec = builtin(name.as_bytes()).unwrap_or_else(|| panic!("{name} not built in"));
    let mut w = Resp {
        buf: Vec::new(),
        resp3,
    };
    w.array(1);
    spec.write_info(&mut w, spec.subcommands.iter());
    w.buf
}

fn docs(name: &str, resp3: bool) -> Vec<u8> {
    let spec = builtin(name.as_bytes()).unwrap();
    let mut w = Resp {
        buf: Vec::new(),
        resp3,
    };
    w.map(1);
    w.bulk(name.as_bytes());
    spec.write_docs(&mut w, spec.subcommands.iter());
    w.buf
}

#[test]
fn every_builtin_matches_valkey_9_1_byte_for_byte() {
    let cap = capture("commands-valkey-9.1.json");
    let mut names = Vec::new();
    for e in &cap {
        let name = e["name"].as_str().unwrap();
        names.push(name.to_owned());
        for (resp3, i, d) in [(false, "info2", "docs2"), (true, "info3", "docs3")] {
            assert_eq!(
                String::from_utf8_lossy(&info(name, resp3)),
                String::from_utf8_lossy(&bytes(&e[i])),
                "COMMAND INFO {name} ({i})"
            );
            assert_eq!(
                String::from_utf8_lossy(&docs(name, resp3)),
                String::from_utf8_lossy(&bytes(&e[d])),
                "COMMAND DOCS {name} ({d})"
            );
        }
    }
    let mut ours: Vec<String> = BUILTIN
        .iter()
        .flat_map(|s| std::iter::once(s).chain(s.subcommands))
        .map(|s| s.name.to_owned())
        .collect();
    ours.sort();
    names.sort();
    assert_eq!(ours, names);
}

/// A parsed RESP2 reply.
#[derive(Debug, Clone, PartialEq)]
enum R {
    Bulk(Vec<u8>),
    Simple(String),
    Int(i64),
    Array(Vec<R>),
    Null,
}

fn parse(b: &[u8], pos: &mut usize) -> R {
    let end = b[*pos..].windows(2).position(|w| w == b"\r\n").unwrap() + *pos;
    let line = std::str::from_utf8(&b[*pos + 1..end]).unwrap().to_owned();
    let t = b[*pos];
    *pos = end + 2;
    match t {
        b'+' => R::Simple(line),
        b':' => R::Int(line.parse().unwrap()),
        b'$' => {
            let n: i64 = line.parse().unwrap();
            if n < 0 {
                return R::Null;
            }
            let v = b[*pos..*pos + n as usize].to_vec();
            *pos += n as usize + 2;
            R::Bulk(v)
        }
        b'*' => {
            let n: i64 = line.parse().unwrap();
            if n < 0 {
                return R::Null;
            }
            R::Array((0..n).map(|_| parse(b, pos)).collect())
        }
        other => panic!("unexpected RESP2 type {}", other as char),
    }
}

fn fields(reply: &[u8]) -> Vec<R> {
    let R::Array(outer) = parse(reply, &mut 0) else {
        panic!()
    };
    let R::Array(f) = outer[0].clone() else {
        panic!()
    };
    f
}

const FIELDS: [&str; 10] = [
    "name",
    "arity",
    "flags",
    "first",
    "last",
    "step",
    "acl",
    "tips",
    "key_specs",
    "subcommands",
];

/// Where Valkey 9.1's `COMMAND INFO` differs from Redis 7.0's (command, field); the table
/// follows Valkey 9.1 there. What changed:
/// * blocking commands lost `noscript` (Valkey allows them in scripts, served non-blocking);
///   WAIT became `blocking` / `@blocking` instead of `noscript`;
/// * MULTI and WATCH gained `no_multi`; CLIENT's connection subcommands, SELECT gained
///   `allow_busy`; CLUSTER's read subcommands and MEMORY MALLOC-STATS / PURGE gained
///   `loading`; SCRIPT EXISTS / FLUSH gained `stale`; EXEC's `skip_slowlog` is
///   `skip_commandlog`;
/// * arities: `CLUSTER REPLICATE` takes `NO ONE`, ZRANK / ZREVRANK take `WITHSCORE`
///   (Redis 7.2), COMMAND GETKEYS / GETKEYSANDFLAGS accept a bare command, SCRIPT DEBUG;
/// * tips: request/response policies added for ACL, CLIENT SETNAME, CONFIG RESETSTAT /
///   REWRITE, RANDOMKEY, SCAN, LATENCY RESET (`agg_sum`); MSETNX lost its policies;
/// * key specs: GEORADIUS(BYMEMBER)'s STORE key and SINTERSTORE's destination are `OW`.
const REDIS_DIFFERENCES: &[(&str, &str)] = &[
    ("acl|deluser", "tips"),
    ("acl|save", "tips"),
    ("acl|setuser", "tips"),
    ("blmove", "flags"),
    ("blpop", "flags"),
    ("brpop", "flags"),
    ("brpoplpush", "flags"),
    ("bzpopmax", "flags"),
    ("bzpopmin", "flags"),
    ("client|caching", "flags"),
    ("client|getname", "flags"),
    ("client|getredir", "flags"),
    ("client|id", "flags"),
    ("client|no-evict", "flags"),
    ("client|reply", "flags"),
    ("client|setname", "flags"),
    ("client|setname", "tips"),
    ("cluster|info", "flags"),
    ("cluster|myid", "flags"),
    ("cluster|nodes", "flags"),
    ("cluster|replicate", "arity"),
    ("cluster|shards", "flags"),
    ("cluster|slots", "flags"),
    ("command|getkeys", "arity"),
    ("command|getkeysandflags", "arity"),
    ("config|resetstat", "tips"),
    ("config|rewrite", "tips"),
    ("exec", "flags"),
    ("georadius", "key_specs"),
    ("georadiusbymember", "key_specs"),
    ("latency|reset", "tips"),
    ("memory|malloc-stats", "flags"),
    ("memory|purge", "flags"),
    ("msetnx", "tips"),
    ("multi", "flags"),
    ("randomkey", "tips"),
    ("scan", "tips"),
    ("script|debug", "arity"),
    ("script|exists", "flags"),
    ("script|flush", "flags"),
    ("select", "flags"),
    ("sinterstore", "key_specs"),
    ("wait", "flags"),
    ("wait", "acl"),
    ("watch", "flags"),
    ("zrank", "arity"),
    ("zrevrank", "arity"),
];

#[test]
fn redis_7_0_differs_only_where_valkey_9_1_changed_it() {
    let redis = capture("commands-redis-7.0.json");
    let valkey: std::collections::HashMap<String, Json> = capture("commands-valkey-9.1.json")
        .into_iter()
        .map(|e| (e["name"].as_str().unwrap().to_owned(), e))
        .collect();
    let mut seen = Vec::new();
    for e in &redis {
        let name = e["name"].as_str().unwrap();
        let ours = fields(&info(name, false));
        let theirs = fields(&bytes(&e["info2"]));
        let vk = fields(&bytes(&valkey[name]["info2"]));
        // Subcommands are compared as their own entries.
        for i in 0..9 {
            if ours[i] == theirs[i] {
                continue;
            }
            let key = (name, FIELDS[i]);
            assert!(
                REDIS_DIFFERENCES.contains(&key),
                "{name} {}: ours {:?}, Redis 7.0 {:?}",
                FIELDS[i],
                ours[i],
                theirs[i]
            );
            assert_eq!(ours[i], vk[i], "{name} {}: not Valkey's value", FIELDS[i]);
            seen.push(key);
        }
    }
    // Every listed difference is real.
    for d in REDIS_DIFFERENCES {
        assert!(seen.contains(d), "{d:?} does not differ");
    }
}

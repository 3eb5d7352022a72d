//! Shared helpers of the vector tests: the manifest written by
//! `scripts/capture-rdb-vectors.sh` and conversions from its JSON values.
#![allow(dead_code)]

use ferrocluster_rdb::RdbObject;
use serde_json::Value;
use std::path::PathBuf;

pub fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors")
}

pub fn manifest() -> Value {
    let text =
        std::fs::read_to_string(dir().join("vectors.json")).expect("tests/vectors/vectors.json");
    serde_json::from_str(&text).expect("manifest parses")
}

pub fn read(rel: &str) -> Vec<u8> {
    std::fs::read(dir().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// A manifest string as bytes (the script writes one Latin-1 char per byte).
pub fn bytes(v: &Value) -> Vec<u8> {
    v.as_str()
        .expect("string")
        .chars()
        .map(|c| u8::try_from(u32::from(c)).expect("Latin-1"))
        .collect()
}

pub fn score(v: &Value) -> f64 {
    match v {
        Value::String(s) if s == "inf" => f64::INFINITY,
        Value::String(s) if s == "-inf" => f64::NEG_INFINITY,
        v => v.as_f64().expect("score"),
    }
}

/// A value in a canonical form for comparison: sets sorted, zsets sorted by (score, member),
/// hashes sorted by field.
#[derive(Debug, PartialEq)]
pub enum Canon {
    String(Vec<u8>),
    List(Vec<Vec<u8>>),
    Set(Vec<Vec<u8>>),
    ZSet(Vec<(Vec<u8>, f64)>),
    Hash(Vec<(Vec<u8>, Vec<u8>, Option<i64>)>),
}

pub fn expected(kind: &str, v: &Value) -> Canon {
    match kind {
        "string" => Canon::String(bytes(v)),
        "list" => Canon::List(v.as_array().unwrap().iter().map(bytes).collect()),
        "set" => {
            let mut s: Vec<Vec<u8>> = v.as_array().unwrap().iter().map(bytes).collect();
            s.sort();
            Canon::Set(s)
        }
        "zset" => {
            let mut z: Vec<(Vec<u8>, f64)> = v
                .as_array()
                .unwrap()
                .iter()
                .map(|e| (bytes(&e[0]), score(&e[1])))
                .collect();
            z.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
            Canon::ZSet(z)
        }
        "hash" => {
            let mut h: Vec<_> = v
                .as_object()
                .unwrap()
                .iter()
                .map(|(f, x)| (bytes(&Value::String(f.clone())), bytes(x), None))
                .collect();
            h.sort();
            Canon::Hash(h)
        }
        "hash_ttl" => {
            let mut h: Vec<_> = v
                .as_object()
                .unwrap()
                .iter()
                .map(|(f, x)| {
                    (
                        bytes(&Value::String(f.clone())),
                        bytes(&x[0]),
                        x[1].as_i64(),
                    )
                })
                .collect();
            h.sort();
            Canon::Hash(h)
        }
        k => panic!("kind {k}"),
    }
}

pub fn canon(o: &RdbObject) -> Canon {
    match o {
        RdbObject::String(s) => Canon::String(s.clone()),
        RdbObject::List(v) => Canon::List(v.clone()),
        RdbObject::Set(v) => {
            let mut s = v.clone();
            s.sort();
            Canon::Set(s)
        }
        RdbObject::SortedSet(v) => {
            // Servers store -0 as 0 (ZADD z -0 m; DUMP shows an integer 0 entry).
            let mut z: Vec<(Vec<u8>, f64)> = v.iter().map(|(m, s)| (m.clone(), s + 0.0)).collect();
            z.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
            Canon::ZSet(z)
        }
        RdbObject::Hash(v) => {
            let mut h: Vec<_> = v
                .iter()
                .map(|(f, x)| (f.clone(), x.clone(), None))
                .collect();
            h.sort();
            Canon::Hash(h)
        }
        RdbObject::HashWithExpiry(v) => {
            let mut h = v.clone();
            h.sort();
            Canon::Hash(h)
        }
    }
}

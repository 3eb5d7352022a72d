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

/// The expected value of a manifest entry, normalized ([`RdbObject::normalized`]).
pub fn expected(kind: &str, v: &Value) -> RdbObject {
    let o = match kind {
        "string" => RdbObject::String(bytes(v)),
        "list" => RdbObject::List(v.as_array().unwrap().iter().map(bytes).collect()),
        "set" => RdbObject::Set(v.as_array().unwrap().iter().map(bytes).collect()),
        "zset" => RdbObject::SortedSet(
            v.as_array()
                .unwrap()
                .iter()
                .map(|e| (bytes(&e[0]), score(&e[1])))
                .collect(),
        ),
        "hash" => RdbObject::Hash(
            v.as_object()
                .unwrap()
                .iter()
                .map(|(f, x)| (bytes(&Value::String(f.clone())), bytes(x)))
                .collect(),
        ),
        "hash_ttl" => RdbObject::HashWithExpiry(
            v.as_object()
                .unwrap()
                .iter()
                .map(|(f, x)| {
                    (
                        bytes(&Value::String(f.clone())),
                        bytes(&x[0]),
                        x[1].as_i64(),
                    )
                })
                .collect(),
        ),
        k => panic!("kind {k}"),
    };
    o.normalized()
}

/// `o` normalized, for comparisons.
pub fn canon(o: &RdbObject) -> RdbObject {
    o.normalized()
}

/// Feeds `bytes` to a decoder in chunks whose sizes `cut(i)` gives (clamped to 1..=rest) and
/// collects the items; the first error ends the run.
pub fn stream_items(
    bytes: &[u8],
    mut cut: impl FnMut(usize) -> usize,
) -> Result<Vec<ferrocluster_rdb::Item>, ferrocluster_rdb::DecodeError> {
    let mut d = ferrocluster_rdb::RdbDecoder::new();
    let mut items = Vec::new();
    let (mut at, mut i) = (0, 0);
    while at < bytes.len() {
        let n = cut(i).clamp(1, bytes.len() - at);
        d.feed(&bytes[at..at + n]);
        at += n;
        i += 1;
        while let Some(item) = d.poll()? {
            items.push(item);
        }
    }
    d.finish()?;
    Ok(items)
}

/// Writes the entry `k` = `v` (a string, no meta) to `w`.
pub fn write_k_v(w: &mut ferrocluster_rdb::RdbWriter) {
    w.entry(
        b"k",
        &RdbObject::String(b"v".to_vec()),
        ferrocluster_rdb::EntryMeta::default(),
    )
    .unwrap();
}

//! Heap bytes per key of `KvStore` with 1,000,000 keys `key:0`..`key:999999` and 8-byte values,
//! beside a plain `hashbrown::HashMap<Bytes, V>` holding the same data (issue target: at most
//! 48 bytes/key; Redis 7.0.15 uses 104 bytes/key in cluster mode).
//!
//! A counting global allocator wraps `System` and tracks live bytes two ways: as requested
//! (`Layout::size`) and rounded up to jemalloc-style size classes (what an allocator really
//! hands out for small sizes: 8, 16, 32, 48, ... 128, then four classes per doubling). Every
//! figure includes the value type's own heap. Run: `cargo bench -p ferrocluster-benches --bench
//! kvstore_memory`.
#![allow(clippy::disallowed_methods)]

use bytes::Bytes;
use ferrocluster_kvstore::{KvStore, KvValue};
use std::fmt::Write;
use std::hint::black_box;

#[path = "common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::live;

const N: usize = 1_000_000;

/// Live heap bytes that `build` leaves behind (its result is kept alive while measuring).
fn measure<T>(label: &str, build: impl FnOnce() -> T) {
    let before = live();
    let kept = build();
    let after = live();
    let (req, cls) = (after.0 - before.0, after.1 - before.1);
    println!(
        "{label:<58} {:>7.2} B/key requested, {:>7.2} B/key size-classed  ({} B total)",
        req as f64 / N as f64,
        cls as f64 / N as f64,
        req
    );
    black_box(&kept);
    drop(kept);
}

/// Calls `f` with `key:0` .. `key:999999`, reusing one buffer (no allocation left behind).
fn for_each_key(mut f: impl FnMut(&[u8])) {
    let mut buf = String::with_capacity(16);
    for i in 0..N {
        buf.clear();
        // Writing to a String cannot fail.
        let _ = write!(buf, "key:{i}");
        f(buf.as_bytes());
    }
}

fn load_store<V: KvValue>(value: impl Fn() -> V) -> KvStore<V> {
    // 16 databases as a standalone-sized store would have; the keys go to db 0.
    let mut s = KvStore::new(16).expect("16 databases are in range");
    for_each_key(|k| {
        s.insert(0, k, value(), 0).expect("db 0 exists");
    });
    s
}

fn load_peer<V>(value: impl Fn() -> V) -> hashbrown::HashMap<Bytes, V> {
    let mut m = hashbrown::HashMap::new();
    for_each_key(|k| {
        m.insert(Bytes::copy_from_slice(k), value());
    });
    m
}

fn main() {
    let empty_before = live();
    let empty: KvStore<Box<[u8]>> = KvStore::new(16).expect("16 databases are in range");
    let empty_after = live();
    println!(
        "empty KvStore with 16 databases: {} B requested",
        empty_after.0 - empty_before.0
    );
    drop(empty);
    println!("1,000,000 keys key:0..key:999999, 8-byte values (value heap included):");
    measure("KvStore<Box<[u8]>>  (16 B inline + 8 B heap value)", || {
        load_store(|| vec![7u8; 8].into_boxed_slice())
    });
    measure("hashbrown::HashMap<Bytes, Box<[u8]>>  (peer)", || {
        load_peer(|| vec![7u8; 8].into_boxed_slice())
    });
    measure("KvStore<Vec<u8>>  (24 B inline + 8 B heap value)", || {
        load_store(|| vec![7u8; 8])
    });
    measure("hashbrown::HashMap<Bytes, Vec<u8>>  (peer)", || {
        load_peer(|| vec![7u8; 8])
    });
    measure("KvStore<Bytes>  (32 B inline + 8 B heap value)", || {
        load_store(|| Bytes::copy_from_slice(&[7u8; 8]))
    });
    measure("hashbrown::HashMap<Bytes, Bytes>  (peer)", || {
        load_peer(|| Bytes::copy_from_slice(&[7u8; 8]))
    });
}

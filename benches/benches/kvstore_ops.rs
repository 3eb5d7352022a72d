//! `KvStore` get / insert / remove at 1,000,000 keys, side by side with a plain
//! `hashbrown::HashMap<Bytes, V>` (the limit; issue target: at least 0.8x of its speed).
//!
//! Both hold `key:0`..`key:999999` with 8-byte `Box<[u8]>` values and are accessed in the same
//! scattered order (stride 611953 mod 10^6, a permutation). Each operation is measured three
//! ways:
//! * `.../kvstore-slotted`: the `*_in_slot` methods with a [`SlotKey`] made beforehand, as a
//!   cluster node's keyspace is called: routing computes the command's slot first and the store
//!   reuses it (Valkey's kvstore takes the slot index, cached on the client by `getKeySlot`);
//! * `.../kvstore`: the key-only methods, which compute the slot (CRC16) on every call;
//! * `.../hashbrown`: the plain map, which needs no slot; `get/hashbrown+slot` adds the slot
//!   computation a cluster node using a plain map would still pay for routing.
//! * `get`: a hit;
//! * `insert`: overwrite of an existing key with a fresh 8-byte value (returns the old one);
//!   the peer replaces the value in place (`get_mut`), as the store does, rather than
//!   `insert(key.clone(), ..)`, which would add a reference-count round trip on the shared
//!   lookup key that neither a server nor the store pays;
//! * `remove_insert`: remove a key, then insert it again (keeps the size at 1M).
//!
//! The lookup keys are `Bytes` separate from the stored ones: the peer owns copies of its keys
//! (as a server must, so that a stored key does not pin a request buffer), and re-inserting
//! after a remove stores a fresh copy; the store copies keys into its own entries anyway.
#![allow(clippy::disallowed_methods)]

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion};
use ferrocluster_kvstore::KvStore;
use ferrocluster_slot::SlotKey;
use std::hint::black_box;

const N: usize = 1_000_000;
const STRIDE: usize = 611_953;

fn value() -> Box<[u8]> {
    vec![7u8; 8].into_boxed_slice()
}

fn bench(c: &mut Criterion) {
    // Lookup keys as shared `Bytes` (cloned once, so a clone is a reference-count increment).
    let keys: Vec<Bytes> = (0..N).map(|i| Bytes::from(format!("key:{i}"))).collect();
    let keys: Vec<Bytes> = keys.iter().map(Bytes::clone).collect();
    let slotted: Vec<SlotKey<'_>> = keys.iter().map(|k| SlotKey::new(k)).collect();
    let mut store: KvStore<Box<[u8]>> = KvStore::new(1).expect("1 database is in range");
    let mut peer: hashbrown::HashMap<Bytes, Box<[u8]>> = hashbrown::HashMap::new();
    for k in &keys {
        store.insert(0, k, value(), 0).expect("db 0 exists");
        peer.insert(Bytes::copy_from_slice(k), value());
    }

    let mut g = c.benchmark_group("kvstore_1m");
    let mut i = 0usize;
    let mut next = move || {
        i = (i + STRIDE) % N;
        i
    };

    g.bench_function("get/kvstore-slotted", |b| {
        b.iter(|| {
            black_box(
                store
                    .get_in_slot(0, slotted[next()], 0)
                    .expect("db 0 exists"),
            )
        })
    });
    g.bench_function("get/kvstore", |b| {
        b.iter(|| black_box(store.get(0, &keys[next()], 0).expect("db 0 exists")))
    });
    g.bench_function("get/hashbrown", |b| {
        b.iter(|| black_box(peer.get(&keys[next()][..])))
    });
    g.bench_function("get/hashbrown+slot", |b| {
        b.iter(|| {
            let k = &keys[next()];
            black_box(SlotKey::new(k).slot());
            black_box(peer.get(&k[..]))
        })
    });

    g.bench_function("insert/kvstore-slotted", |b| {
        b.iter(|| {
            black_box(
                store
                    .insert_in_slot(0, slotted[next()], value(), None, 0)
                    .expect("db 0 exists"),
            )
        })
    });
    g.bench_function("insert/kvstore", |b| {
        b.iter(|| {
            black_box(
                store
                    .insert(0, &keys[next()], value(), 0)
                    .expect("db 0 exists"),
            )
        })
    });
    g.bench_function("insert/hashbrown", |b| {
        b.iter(|| {
            // What the store does: replace the value in place, copy the key only when new.
            let k = &keys[next()];
            black_box(match peer.get_mut(&k[..]) {
                Some(v) => Some(std::mem::replace(v, value())),
                None => peer.insert(Bytes::copy_from_slice(k), value()),
            })
        })
    });

    g.bench_function("remove_insert/kvstore-slotted", |b| {
        b.iter(|| {
            let k = slotted[next()];
            let v = store.remove_in_slot(0, k, 0).expect("db 0 exists");
            black_box(&v);
            store
                .insert_in_slot(0, k, v.unwrap_or_else(value), None, 0)
                .expect("db 0 exists")
        })
    });
    g.bench_function("remove_insert/kvstore", |b| {
        b.iter(|| {
            let k = &keys[next()];
            let v = store.remove(0, k, 0).expect("db 0 exists");
            black_box(&v);
            store
                .insert(0, k, v.unwrap_or_else(value), 0)
                .expect("db 0 exists")
        })
    });
    g.bench_function("remove_insert/hashbrown", |b| {
        b.iter(|| {
            let k = &keys[next()];
            let v = peer.remove(&k[..]);
            black_box(&v);
            peer.insert(Bytes::copy_from_slice(k), v.unwrap_or_else(value))
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

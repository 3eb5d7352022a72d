//! `key_hash_slot` side by side with the `crc16` crate (the function redis-rs uses) plus the
//! same hash-tag scan: issue 2's speed comparison. Targets: no slower at 8 bytes, at least 3x
//! faster at 64 bytes, at least 4 GB/s at 64 KiB. `key_hash_slot` hashes keys under 256 bytes
//! with slicing-by-16 tables and longer ones by carry-less-multiply folding (`crc-fast`), and
//! scans for the hash tag with `memchr` from 16 bytes on; 256 is in the list to show the switch.
#![allow(clippy::disallowed_methods)]

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ferrocluster_slot::{hash_tag, key_hash_slot};
use std::hint::black_box;

fn peer_slot(key: &[u8]) -> u16 {
    crc16::State::<crc16::XMODEM>::calculate(hash_tag(key)) & 0x3FFF
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("key_hash_slot");
    for len in [8usize, 16, 32, 64, 256, 1024, 65536] {
        // Tag-free keys of printable bytes: the whole key is hashed on both sides.
        let key: Vec<u8> = (0..len).map(|i| b'a' + (i % 23) as u8).collect();
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_with_input(BenchmarkId::new("ferrocluster", len), &key, |b, k| {
            b.iter(|| key_hash_slot(black_box(k)))
        });
        g.bench_with_input(BenchmarkId::new("crc16-crate", len), &key, |b, k| {
            b.iter(|| peer_slot(black_box(k)))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! RDB encode and decode of a 1M-key data set (the full-sync and RDB-load path,
//! `ferrocluster-rdb`), and the pieces they spend their time in.
//!
//! The data set is what `DEBUG POPULATE 1000000` makes on redis-server and valkey-server:
//! keys `key:0`..`key:999999` with string values `value:0`..`value:999999`, no expiry, in one
//! database, so `benches/rdb-load-compare.sh` can time the servers loading the same data:
//!
//! * `rdb/encode_1m`: `RdbWriter` writes the file (RDB 10, LZF on, CRC-64 on), taken in 64 KiB
//!   chunks (what a host writes to a file or a replica socket);
//! * `rdb/decode_1m`: `RdbDecoder` is fed the file in 64 KiB chunks and yields every entry;
//! * `rdb/decode_1m_ref`: the same with `poll_ref` (keys and string values borrowed from the
//!   decoder's buffer: no allocation per entry);
//! * `rdb/load_1m`: decode with `poll_ref` and insert into a `KvStore` (our keyspace: keys of up
//!   to 16 bytes inline; values of up to 15 bytes inline, as `ferrocluster-server`'s `Value`
//!   keeps them), the work a server's RDB load does;
//! * `rdb/load_1m_owned`: `poll` (owned items) into a `hashbrown::HashMap<Vec<u8>, _>`;
//! * `rdb/decode_file` and `rdb/decode_file_only`: as `load_1m` and `decode_1m_ref` for the
//!   file named by `RDB_BENCH_FILE` (a dump.rdb saved by redis-server or valkey-server, used by
//!   `benches/rdb-load-compare.sh`); absent when the variable is unset;
//! * `crc64/*`: the CRC-64/REDIS implementations over 64 KiB and 16 bytes (`crc-fast`, which
//!   the crate uses, and the `crc` crate's table with the same parameters);
//! * `lzf/*`: compressing a 100-byte value that compresses, and one that does not.
#![allow(clippy::disallowed_methods)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ferrocluster_kvstore::KvStore;
use ferrocluster_rdb::{
    lzf, EntryMeta, Item, ItemRef, ObjectWriter, RdbDecoder, RdbObject, RdbValue, RdbWriter,
    UnsupportedKind, ValueRef, WriterConfig,
};
use std::hint::black_box;

const N: usize = 1_000_000;
const CHUNK: usize = 64 * 1024;

/// A string value, as a host stores it.
struct Str(Vec<u8>);

impl RdbValue for Str {
    fn write_rdb(&self, w: ObjectWriter<'_>) -> Result<(), ferrocluster_rdb::EncodeError> {
        w.string(&self.0)
    }
    fn from_rdb(obj: RdbObject) -> Result<Str, UnsupportedKind> {
        match obj {
            RdbObject::String(s) => Ok(Str(s)),
            o => Err(UnsupportedKind { kind: o.kind() }),
        }
    }
}

fn data() -> Vec<(Vec<u8>, Str)> {
    (0..N)
        .map(|i| {
            (
                format!("key:{i}").into_bytes(),
                Str(format!("value:{i}").into_bytes()),
            )
        })
        .collect()
}

fn encode(data: &[(Vec<u8>, Str)], sink: &mut Vec<u8>) -> u64 {
    let mut w = RdbWriter::new(WriterConfig::default());
    w.aux_int(b"redis-bits", 64).unwrap();
    w.select_db(0).unwrap();
    w.resize_db(data.len() as u64, 0).unwrap();
    let mut total = 0u64;
    for (k, v) in data {
        w.entry(k, v, EntryMeta::default()).unwrap();
        if w.buffered() >= CHUNK {
            sink.clear();
            w.take_into(sink);
            total += sink.len() as u64;
        }
    }
    w.finish().unwrap();
    sink.clear();
    w.take_into(sink);
    total + sink.len() as u64
}

fn decode(
    file: &[u8],
    mut resize: impl FnMut(u64),
    mut f: impl FnMut(Vec<u8>, RdbObject),
) -> usize {
    let mut d = RdbDecoder::new();
    let mut n = 0;
    for chunk in file.chunks(CHUNK) {
        d.feed(chunk);
        while let Some(item) = d.poll().unwrap() {
            match item {
                Item::Entry(e) => {
                    n += 1;
                    f(e.key, e.object);
                }
                Item::ResizeDb { keys, .. } => resize(keys),
                _ => {}
            }
        }
    }
    d.finish().unwrap();
    n
}

/// Decodes with borrowed keys and values, touching each entry.
fn decode_ref(file: &[u8]) -> usize {
    let mut d = RdbDecoder::new();
    let mut n = 0usize;
    for chunk in file.chunks(CHUNK) {
        d.feed(chunk);
        while let Some(item) = d.poll_ref().unwrap() {
            if let ItemRef::Entry(e) = item {
                n += e.key.len();
                black_box(&e.value);
            }
        }
    }
    d.finish().unwrap();
    n
}

/// A string value kept inline up to 15 bytes (as the server's `Value` does up to 14).
enum Small {
    Inline(u8, [u8; 15]),
    Heap(Box<[u8]>),
}

impl Small {
    fn new(b: &[u8]) -> Small {
        if b.len() <= 15 {
            let mut a = [0u8; 15];
            a[..b.len()].copy_from_slice(b);
            Small::Inline(b.len() as u8, a)
        } else {
            Small::Heap(b.into())
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Small::Inline(n, a) => &a[..usize::from(*n)],
            Small::Heap(b) => b,
        }
    }
}

impl ferrocluster_kvstore::KvValue for Small {
    fn heap_size(&self) -> usize {
        match self {
            Small::Inline(..) => 0,
            Small::Heap(b) => b.len(),
        }
    }
    fn type_name(&self) -> &'static str {
        "string"
    }
}

/// Decode into our keyspace with borrowed keys and values.
fn load(file: &[u8]) -> KvStore<Small> {
    let mut kv = KvStore::new(16).unwrap();
    let mut d = RdbDecoder::new();
    for chunk in file.chunks(CHUNK) {
        d.feed(chunk);
        while let Some(item) = d.poll_ref().unwrap() {
            if let ItemRef::Entry(e) = item {
                if let ValueRef::String(v) = e.value {
                    let at = e.expire_ms.map(|t| t.max(0) as u64);
                    kv.insert_with_expiry(e.db as usize, &e.key, Small::new(&v), at, 0)
                        .unwrap();
                }
            }
        }
    }
    d.finish().unwrap();
    kv
}

/// Decode owned items into a map, sized from `RESIZEDB` as the servers size their tables
/// (`dbExpand`).
fn load_owned(file: &[u8]) -> hashbrown::HashMap<Vec<u8>, Str> {
    let map = std::cell::RefCell::new(hashbrown::HashMap::new());
    decode(
        file,
        |keys| map.borrow_mut().reserve(keys as usize),
        |k, o| {
            if let Ok(v) = Str::from_rdb(o) {
                map.borrow_mut().insert(k, v);
            }
        },
    );
    map.into_inner()
}

fn bench(c: &mut Criterion) {
    let data = data();
    let mut file = Vec::new();
    {
        let mut w = RdbWriter::new(WriterConfig::default());
        w.select_db(0).unwrap();
        w.resize_db(data.len() as u64, 0).unwrap();
        for (k, v) in &data {
            w.entry(k, v, EntryMeta::default()).unwrap();
        }
        w.finish().unwrap();
        w.take_into(&mut file);
    }
    // What is measured is right: every key loads with its value.
    let kv = load(&file);
    assert_eq!(kv.dbsize(0).unwrap(), N as u64);
    assert_eq!(
        kv.get(0, b"key:777", 0).unwrap().map(Small::bytes),
        Some(&b"value:777"[..])
    );
    drop(kv);
    let mut g = c.benchmark_group("rdb");
    g.sample_size(10);
    g.throughput(Throughput::Elements(N as u64));
    let mut sink = Vec::with_capacity(2 * CHUNK);
    g.bench_function("encode_1m", |b| {
        b.iter(|| black_box(encode(&data, &mut sink)))
    });
    g.bench_function("decode_1m", |b| {
        b.iter(|| black_box(decode(&file, |_| {}, |k, o| drop(black_box((k, o))))))
    });
    // The map is dropped outside the timing, as a server's load does not free a keyspace.
    g.bench_function("decode_1m_ref", |b| b.iter(|| black_box(decode_ref(&file))));
    g.bench_function("load_1m", |b| b.iter_with_large_drop(|| load(&file)));
    g.bench_function("load_1m_owned", |b| {
        b.iter_with_large_drop(|| load_owned(&file))
    });
    if let Ok(path) = std::env::var("RDB_BENCH_FILE") {
        let theirs = std::fs::read(&path).expect("RDB_BENCH_FILE");
        let keys = load_owned(&theirs).len();
        eprintln!("RDB_BENCH_FILE {path}: {} bytes, {keys} keys", theirs.len());
        g.throughput(Throughput::Elements(keys as u64));
        g.bench_function("decode_file", |b| b.iter_with_large_drop(|| load(&theirs)));
        g.bench_function("decode_file_only", |b| {
            b.iter(|| black_box(decode_ref(&theirs)))
        });
    }
    g.finish();

    let mut g = c.benchmark_group("crc64");
    let big: Vec<u8> = (0..CHUNK).map(|i| (i * 31 + i / 7) as u8).collect();
    const TABLE16: crc::Crc<u64, crc::Table<16>> =
        crc::Crc::<u64, crc::Table<16>>::new(&crc::CRC_64_REDIS);
    const TABLE1: crc::Crc<u64, crc::Table<1>> =
        crc::Crc::<u64, crc::Table<1>>::new(&crc::CRC_64_REDIS);
    assert_eq!(ferrocluster_rdb::crc64::crc64(&big), TABLE16.checksum(&big));
    for (name, bytes) in [("64KiB", &big[..]), ("16B", &big[..16])] {
        g.throughput(Throughput::Bytes(bytes.len() as u64));
        g.bench_function(format!("crc-fast/{name}"), |b| {
            b.iter(|| black_box(ferrocluster_rdb::crc64::crc64(black_box(bytes))))
        });
        g.bench_function(format!("crc-table16/{name}"), |b| {
            b.iter(|| black_box(TABLE16.checksum(black_box(bytes))))
        });
        g.bench_function(format!("crc-table1/{name}"), |b| {
            b.iter(|| black_box(TABLE1.checksum(black_box(bytes))))
        });
    }
    g.finish();

    let mut g = c.benchmark_group("lzf");
    let text =
        b"the quick brown fox jumps over the lazy dog, the quick brown fox jumps over!!".repeat(2);
    let text = &text[..100];
    let noise: Vec<u8> = (0..100u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let mut z = lzf::Compressor::new();
    for (name, bytes) in [
        ("compressible_100B", text),
        ("incompressible_100B", &noise[..]),
    ] {
        g.throughput(Throughput::Bytes(100));
        g.bench_function(name, |b| {
            b.iter(|| black_box(z.compress(black_box(bytes), 96).map(|o| o.len())))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

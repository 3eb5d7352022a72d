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
use std::alloc::{GlobalAlloc, Layout, System};
use std::fmt::Write;
use std::hint::black_box;
use std::sync::atomic::{AtomicIsize, Ordering};

static LIVE: AtomicIsize = AtomicIsize::new(0);
static LIVE_CLASSED: AtomicIsize = AtomicIsize::new(0);

/// jemalloc-style size class of a request of `n` bytes.
fn size_class(n: usize) -> usize {
    if n <= 8 {
        8
    } else if n <= 128 {
        n.div_ceil(16) * 16
    } else {
        let base = 1usize << (usize::BITS - 1 - (n - 1).leading_zeros());
        let step = base / 4;
        n.div_ceil(step) * step
    }
}

fn add(n: usize) {
    LIVE.fetch_add(n as isize, Ordering::Relaxed);
    LIVE_CLASSED.fetch_add(size_class(n) as isize, Ordering::Relaxed);
}

fn sub(n: usize) {
    LIVE.fetch_sub(n as isize, Ordering::Relaxed);
    LIVE_CLASSED.fetch_sub(size_class(n) as isize, Ordering::Relaxed);
}

struct Counting;

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so
// `System`'s guarantees carry over; the only addition is bookkeeping in atomics, which
// neither allocates nor touches the returned memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as our caller's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            add(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as our caller's.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            add(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with this layout (we only hand out System memory).
        unsafe { System.dealloc(ptr, layout) };
        sub(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from `System` with `layout`; the caller upholds `new_size` rules.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            sub(layout.size());
            add(new_size);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const N: usize = 1_000_000;

fn live() -> (isize, isize) {
    (
        LIVE.load(Ordering::Relaxed),
        LIVE_CLASSED.load(Ordering::Relaxed),
    )
}

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

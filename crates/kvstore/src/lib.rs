//! The keyspace a cluster node keeps: per database, one hash table per hash slot.
//!
//! [`KvStore<V>`] follows Valkey's cluster-mode kvstore (facts sheet
//! `slot-migration-and-kvstore.md` part D): `databases` (`cluster-databases`) databases, each an
//! array of 16384 slot tables allocated on the first insert into the slot and freed when it
//! empties, so an empty store with 16 databases holds a few kilobytes. On top of the tables:
//!
//! * O(1) counts per slot and per database (DBSIZE, COUNTKEYSINSLOT), GETKEYSINSLOT,
//!   drop-slot across databases, FLUSHDB/FLUSHALL, SWAPDB, RANDOMKEY from a caller's RNG;
//! * SCAN with Valkey's cursor `(table cursor << 14) | slot`, `MATCH` (Redis glob semantics,
//!   [`glob_match`]; single-slot patterns visit one slot), `COUNT` and `TYPE`, guaranteeing
//!   that every key present for the whole scan is returned, also while tables grow or shrink;
//! * expiry: absolute deadlines in ms, reads that take `now`, an active expiry step
//!   ([`KvStore::expire_cycle`]);
//! * slots hidden while importing ([`KvStore::hide_slot`], facts sheet A.12/D.3);
//! * per-slot statistics for CLUSTER SLOT-STATS ([`KvStore::slot_stats`]).
//!
//! # Layout and memory
//!
//! A database holds one 16-byte pointer per slot. A slot table is one allocation: a 64-byte
//! header (the dense entry vector of 16-byte inline keys + values, deadlines, counters) with the
//! table's open-addressing index right behind it — positions packed with hash tags, 2 bytes
//! per bucket up to 255 entries (bigger tables move to a separate index of 4- or 8-byte words).
//! Deadlines live in a vector allocated only for slots that have keys with a deadline. A key's
//! table hash and comparison form come from one read of the key (keys of up to 16 bytes).
//!
//! # The slot comes with the key
//!
//! A cluster node computes each command's slot to route it; [`KvStore::get_in_slot`],
//! [`KvStore::get_mut_in_slot`], [`KvStore::insert_in_slot`] and [`KvStore::remove_in_slot`]
//! take that work as a [`ferrocluster_slot::SlotKey`] instead of hashing the key again
//! (Valkey's kvstore is called with the slot index the same way, cached on the client by
//! `getKeySlot`). The key-only methods make the `SlotKey` themselves.
//!
//! See `benches/kvstore_memory.rs` for the measured heap bytes per key (about 45 at 1M keys)
//! and `benches/kvstore_ops.rs` for speed beside a plain hash map at 1M keys, back-to-back
//! calls in scattered order (three runs, 2-core VM): with the slot given, lookups 0.86-0.90x
//! of the map, overwrites 0.97-1.06x, remove + insert 1.28-1.40x; key-only, lookups
//! 0.46-0.48x of the map and 0.96-1.00x of the map plus the CRC16 a cluster node pays for
//! routing anyway, overwrites 0.83-0.87x, remove + insert 1.09-1.18x. Why
//! the CRC16 weighs so much: at this size each lookup waits on about four cache misses, and
//! the instructions that depend on missing data (the CRC's 16 table lookups depend on the key
//! bytes) hold the CPU's scheduler, so fewer lookups overlap (our reading of instruction counts
//! against times; this VM exposes no performance counters); the same reason the index walk
//! for small tables is inlined into the lookup (`index::find_map`).
//!
//! # Key presence for the `node` crate
//!
//! The `node` crate defines a small read-only key-presence trait (ASK/TRYAGAIN decisions,
//! DESIGN.md) and the host implements it over this store in a few lines with
//! [`KvStore::exists`], [`KvStore::count_keys_in_slot`] and
//! [`KvStore::count_keys_in_slot_all_dbs`]. This crate never depends on `node`.
//!
//! # Example
//!
//! ```
//! use ferrocluster_kvstore::{KvStore, ScanOptions};
//! use ferrocluster_slot::key_hash_slot;
//!
//! let mut kv: KvStore<Vec<u8>> = KvStore::new(16)?;
//! let now = 1_000; // ms, from the host's clock
//! kv.insert(0, b"{user1}:name", b"ann".to_vec(), now)?;
//! kv.insert_with_expiry(0, b"{user1}:session", b"x".to_vec(), Some(now + 500), now)?;
//! assert_eq!(kv.dbsize(0)?, 2);
//! assert_eq!(kv.count_keys_in_slot(0, key_hash_slot(b"user1"))?, 2);
//! assert!(kv.exists(0, b"{user1}:session", now + 500)?);
//! assert!(!kv.exists(0, b"{user1}:session", now + 501)?);
//!
//! let mut cursor = 0;
//! let mut seen = Vec::new();
//! loop {
//!     let page = kv.scan(0, cursor, &ScanOptions::default(), now)?;
//!     seen.extend(page.keys);
//!     cursor = page.cursor;
//!     if cursor == 0 { break; }
//! }
//! assert_eq!(seen.len(), 2);
//! # Ok::<(), ferrocluster_kvstore::KvError>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod access;
mod bits;
mod error;
mod glob;
mod index;
mod key;
mod keyhash;
mod scan;
mod stats;
mod store;
mod table;
mod value;

pub use access::Sampled;
pub use error::KvError;
pub use glob::glob_match;
pub use key::INLINE_KEY_LEN;
pub use scan::{ScanOptions, ScanPage};
pub use stats::SlotStats;
pub use store::{DetachedSlot, KeyExpiry, KvStore, PoppedKeys, ValueMut, MAX_DATABASES};
pub use value::KvValue;

//! The value types beyond strings, in the encodings that keep memory low, and the pieces they
//! share.
//!
//! * [`packed::Packed`]: a run of byte strings in one heap block (a varint length before each
//!   entry): the compact form of hashes, sets, sorted sets and list nodes (Redis's listpack
//!   role).
//! * [`table::Table`]: the big form of hashes and sets: records packed into one arena, an
//!   open-addressing index of 4-byte offsets beside 1-byte hash tags, HSCAN/SSCAN cursors
//!   over home buckets that survive resizes.
//! * [`intset::IntSet`]: sorted integers, the compact form of all-integer sets.
//! * [`listpack`]: listpack entries (bidirectional, integers packed, raw doubles) in a byte
//!   buffer: the list's nodes and the small sorted set. Lists need what the varint
//!   [`packed::Packed`] has not: a node walked from its end (RPOP, negative indexes, LREM with
//!   a negative count) needs the listpack's back lengths.
//! * [`list::List`]: the quicklist. [`zset::ZSet`]: the sorted set, packed when small, an
//!   order-statistic B+tree over a member table when big.
//! * [`hash::Hash`], [`set::Set`]: the families.
//! * [`Limits`]: the conversion thresholds (`hash-max-listpack-entries`, ...), kept in the
//!   server [`State`](crate::server::State) and set by the config file and CONFIG SET.
//!
//! # How a family plugs in
//! A new family (the list and sorted set follow this) touches, in order:
//! 1. **Type**: `types/<family>.rs` with its compact and big forms (reuse [`packed::Packed`]
//!    for listpack-like nodes and [`table::Table`] for a hashed index); its `heap_size` MUST
//!    be O(1) (the keyspace re-measures a value after every change through a guard), its
//!    iteration order deterministic. Thresholds come from [`limits()`] (the config
//!    directives are already accepted: `list-max-listpack-size`, `zset-max-listpack-*`).
//! 2. **Value**: a variant `Value::<Family>(Box<..>)` in [`crate::value`] (the box keeps the
//!    value 16 bytes) and its arms in `Value::kind`, `Value::encoding` (OBJECT ENCODING),
//!    `KvValue::heap_size` / `type_name` (MEMORY USAGE, TYPE, SCAN TYPE) and the
//!    `RdbValue` impl: `write_rdb` describes the value to the writer with the family's
//!    method (`w.list(..)`, `w.sorted_set(..)`, no intermediate copy), `from_rdb` builds it
//!    from the decoded `RdbObject`. Then `impl crate::cmd::Family for <Type>` (five lines,
//!    as for `Hash`), and the arms of [`sort_elements`] / [`list_value`] (SORT).
//! 3. **Table**: add `("lpush", Cmd::Lpush)` rows to `crate::table::SERVED` and the `Cmd`
//!    variants: arity, flags, key specs, ACL categories and docs are the command crate's
//!    built-in Valkey 9.1 rows, so routing (CROSSSLOT included), MULTI and `COMMAND` know
//!    them with nothing more.
//! 4. **Dispatch**: `cmd/<family>.rs` with one function per command taking
//!    `&mut crate::cmd::Ctx` (state, db, now, args, reply, propagation) and a `run` that
//!    matches the `Cmd`s; add the `Cmd`s to `crate::commands::dispatch`. Look values up with
//!    `crate::cmd::read::<T>` / `write::<T>` / `create::<T>` (a key of another type gives
//!    `WrongType`: reply `crate::cmd::WRONGTYPE`), and call `drop_if_empty::<T>` after
//!    removing elements (an empty collection is deleted).
//! 5. **Propagation**: after changing `key`, call `ctx.modified(key)` (one per change, as
//!    Redis's `server.dirty`): the command then propagates its own argv. When that argv is
//!    not deterministic or not the effect, push the effect with `ctx.effect(&[..])` (`BLPOP`
//!    → `LPOP key`, `ZPOPMIN key count` is deterministic): then only the effects go out.
//!    `crate::commands::run` hands them to the replication / slot-migration hook.
//! 6. **WATCH**: `ctx.modified(key)` also flags the key's watchers (`crate::cmd::txn`);
//!    nothing else is needed.
//! 7. **Tests**: the differential harness (`tests/differential.rs`) runs command sequences on
//!    redis-server 7.0 and on us and compares the replies byte for byte in RESP2 and RESP3;
//!    add the family's cases to its case file.

pub mod hash;
pub mod intset;
pub mod list;
pub mod listpack;
pub mod packed;
pub mod set;
pub mod table;
pub mod zset;

/// The encoding conversion thresholds (redis.conf names, Redis 7.0 / Valkey defaults). A
/// collection converts to its big form when it grows past them and never back (as Redis).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `hash-max-listpack-entries` (alias `hash-max-ziplist-entries`), default 512.
    pub hash_max_listpack_entries: usize,
    /// `hash-max-listpack-value` (alias `hash-max-ziplist-value`), bytes, default 64.
    pub hash_max_listpack_value: usize,
    /// `set-max-intset-entries`, default 512.
    pub set_max_intset_entries: usize,
    /// `set-max-listpack-entries` (Valkey; Redis 7.2), default 128.
    pub set_max_listpack_entries: usize,
    /// `set-max-listpack-value` (Valkey; Redis 7.2), bytes, default 64.
    pub set_max_listpack_value: usize,
    /// `zset-max-listpack-entries` (alias `zset-max-ziplist-entries`), default 128.
    pub zset_max_listpack_entries: usize,
    /// `zset-max-listpack-value` (alias `zset-max-ziplist-value`), bytes, default 64.
    pub zset_max_listpack_value: usize,
    /// `list-max-listpack-size` (alias `list-max-ziplist-size`): positive = entries per
    /// node, -1..-5 = 4/8/16/32/64 KiB per node; default -2.
    pub list_max_listpack_size: i64,
    /// `list-compress-depth`, default 0 (accepted; nodes are not compressed).
    pub list_compress_depth: i64,
}

impl Default for Limits {
    fn default() -> Limits {
        DEFAULT_LIMITS
    }
}

/// The defaults (Redis 7.0 / Valkey 9).
pub const DEFAULT_LIMITS: Limits = Limits {
    hash_max_listpack_entries: 512,
    hash_max_listpack_value: 64,
    set_max_intset_entries: 512,
    set_max_listpack_entries: 128,
    set_max_listpack_value: 64,
    zset_max_listpack_entries: 128,
    zset_max_listpack_value: 64,
    list_max_listpack_size: -2,
    list_compress_depth: 0,
};

static LIMITS: parking_lot::RwLock<Limits> = parking_lot::RwLock::new(DEFAULT_LIMITS);

/// The thresholds in force (the config file's, changed by CONFIG SET). Process-wide: RDB and
/// DUMP loading (`RdbValue::from_rdb`) has no other way to reach them.
pub fn limits() -> Limits {
    *LIMITS.read()
}

/// Sets the thresholds in force (start-up and CONFIG SET).
pub fn set_limits(l: Limits) {
    *LIMITS.write() = l;
}

/// The elements `SORT` reads from a value that keeps an order of its own (a list head
/// first, a sorted set by score); `None` for a type SORT refuses (`WRONGTYPE`). Sets are
/// read by SORT itself. The list and sorted-set families add their arms here.
pub fn sort_elements(v: &crate::server::Value) -> Option<Vec<Vec<u8>>> {
    match v {
        crate::server::Value::Set(s) => Some(s.iter().map(|m| m.to_vec()).collect()),
        crate::server::Value::List(l) => Some(l.iter().map(|e| e.to_vec()).collect()),
        crate::server::Value::SortedSet(z) => {
            Some(z.iter(false).map(|(m, _)| m.to_vec()).collect())
        }
        _ => None,
    }
}

/// A list value holding `items` head first (`SORT ... STORE`).
pub fn list_value(items: Vec<Vec<u8>>) -> Option<crate::server::Value> {
    let fill = list::Fill::new(limits().list_max_listpack_size);
    Some(crate::server::Value::List(Box::new(
        list::List::from_items(items, fill),
    )))
}

//! One hash slot's table: a dense entry vector plus an index of positions into it.
//!
//! Layout (why): entries live in a `Vec` in insertion order; removal is `swap_remove` (the last
//! entry moves into the hole). The index ([`crate::index`]) holds only positions packed with a
//! hash tag — 2 bytes per bucket while the table has at most 255 entries, 4 up to 65535, 8
//! beyond — so the per-bucket cost is small however large the value type is, a lookup reads
//! one index line and then the entry, and the entry vector grows by 1/16 instead of doubling.
//! Because entries only ever move *down* (from the last position into a hole), a cursor that
//! walks positions from the top down sees every entry that stays present: this is what gives
//! SCAN its guarantee, independent of the index's internal order.
//!
//! Invariants: every live index word holds a position `< entries.len()`, each position appears
//! exactly once, `tombstones` counts the tombstone words, and `deadlines` (when present) has the
//! same length as `entries`.

use crate::index::{self, Word};
use crate::key::CompactKey;
use crate::KvValue;
use std::hash::BuildHasher;

/// Internal marker for "no deadline" in the deadline vector (callers' `u64::MAX` deadlines are
/// clamped to `u64::MAX - 1`, which no clock reaches).
pub(crate) const NO_DEADLINE: u64 = u64::MAX;

/// A stored key and its value.
pub(crate) struct Entry<V> {
    pub(crate) key: CompactKey,
    pub(crate) value: V,
}

impl<V: KvValue> Entry<V> {
    /// Bytes attributed to this entry in the per-slot memory figure.
    pub(crate) fn memory(&self) -> u64 {
        entry_memory::<V>(&self.key, &self.value)
    }
}

/// Entry size plus the heap bytes of key and value.
pub(crate) fn entry_memory<V: KvValue>(key: &CompactKey, value: &V) -> u64 {
    (std::mem::size_of::<Entry<V>>() + key.heap_size() + value.heap_size()) as u64
}

/// The index words, in the narrowest width whose position field fits the table.
enum Index {
    U16(Box<[u16]>),
    U32(Box<[u32]>),
    U64(Box<[u64]>),
}

/// Runs `$body` with `$t` bound to whichever word slice is in use.
macro_rules! with_index {
    ($index:expr, $t:ident => $body:expr) => {
        match $index {
            Index::U16($t) => $body,
            Index::U32($t) => $body,
            Index::U64($t) => $body,
        }
    };
}

/// One slot's keys (see the module docs).
pub(crate) struct SlotTable<V> {
    index: Index,
    pub(crate) entries: Vec<Entry<V>>,
    /// Deadlines (ms) parallel to `entries`; allocated only while `volatile > 0`. Boxed so the
    /// field costs 8 bytes, not 24, in the 16384-table array of every database.
    #[allow(clippy::box_collection)]
    deadlines: Option<Box<Vec<u64>>>,
    /// Tombstone words in the index.
    tombstones: usize,
    /// Entries with a deadline.
    volatile: usize,
    /// Sum of [`Entry::memory`] over the entries (bytes).
    pub(crate) memory: u64,
}

impl<V: KvValue> SlotTable<V> {
    pub(crate) fn new() -> SlotTable<V> {
        SlotTable {
            index: Index::U16(Box::new([])),
            entries: Vec::new(),
            deadlines: None,
            tombstones: 0,
            volatile: 0,
            memory: 0,
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether any entry has a deadline.
    pub(crate) fn has_deadlines(&self) -> bool {
        self.volatile > 0
    }

    /// Position of `key` (whose hash is `hash`).
    #[inline]
    pub(crate) fn find(&self, hash: u64, key: &[u8]) -> Option<usize> {
        let entries = &self.entries;
        let eq = |p: usize| entries.get(p).is_some_and(|e| e.key.as_bytes() == key);
        with_index!(&self.index, w => index::find(w, hash, eq).map(|(_, p)| p))
    }

    /// The deadline of the entry at `pos`, if it has one.
    #[inline]
    pub(crate) fn deadline(&self, pos: usize) -> Option<u64> {
        let d = self.deadlines.as_ref()?;
        let at = *d.get(pos)?;
        (at != NO_DEADLINE).then_some(at)
    }

    /// Whether the entry at `pos` is expired at `now`: Redis `keyIsExpired` is `now > when`,
    /// so a key is still alive at its deadline millisecond.
    #[inline]
    pub(crate) fn is_expired(&self, pos: usize, now: u64) -> bool {
        self.deadline(pos).is_some_and(|at| now > at)
    }

    /// Sets or clears the deadline of the entry at `pos`. Returns whether it had one.
    pub(crate) fn set_deadline(&mut self, pos: usize, deadline: Option<u64>) -> bool {
        let had = self.deadline(pos).is_some();
        match deadline {
            Some(at) => {
                let (len, cap) = (self.entries.len(), self.entries.capacity());
                let d = self.deadlines.get_or_insert_with(|| {
                    let mut v = Vec::with_capacity(cap);
                    v.resize(len, NO_DEADLINE);
                    Box::new(v)
                });
                if let Some(cell) = d.get_mut(pos) {
                    *cell = at.min(NO_DEADLINE - 1);
                    if !had {
                        self.volatile += 1;
                    }
                }
            }
            None => {
                if had {
                    if let Some(cell) = self.deadlines.as_mut().and_then(|d| d.get_mut(pos)) {
                        *cell = NO_DEADLINE;
                    }
                    self.volatile -= 1;
                    if self.volatile == 0 {
                        self.deadlines = None;
                    }
                }
            }
        }
        had
    }

    /// Appends a new entry (the key must not be present) and returns its position.
    pub(crate) fn push<S: BuildHasher>(
        &mut self,
        hash: u64,
        key: CompactKey,
        value: V,
        hasher: &S,
    ) -> usize {
        let pos = self.entries.len();
        if pos == self.entries.capacity() {
            // Grow by 1/16 (at least 4): little spare capacity, still amortised O(1).
            self.entries.reserve_exact((pos / 16).max(4));
        }
        self.entries.push(Entry { key, value });
        if let Some(d) = self.deadlines.as_mut() {
            if d.len() == d.capacity() {
                d.reserve_exact(self.entries.capacity() - d.len());
            }
            d.push(NO_DEADLINE);
        }
        self.index_insert(hash, pos, hasher);
        pos
    }

    /// Adds position `pos` (the entry just pushed) to the index, rebuilding it first when it
    /// is full (counting tombstones) or its words cannot hold the position.
    fn index_insert<S: BuildHasher>(&mut self, hash: u64, pos: usize, hasher: &S) {
        let len = self.entries.len();
        let filled = len + self.tombstones;
        let fits = with_index!(&self.index, w => fits_words(w, filled, len));
        if !fits {
            // The rebuild indexes every entry, the new one included.
            self.rebuild(hasher);
            return;
        }
        let reused = with_index!(&mut self.index, w => index::insert(w, hash, pos));
        if reused {
            self.tombstones -= 1;
        }
    }

    /// Rebuilds the index for the current entries at a load of about 5/8, without tombstones,
    /// in the narrowest word width that fits.
    fn rebuild<S: BuildHasher>(&mut self, hasher: &S) {
        let n = self.entries.len();
        let entries = &self.entries;
        let hash_at = |p: usize| hasher.hash_one(entries[p].key.as_bytes());
        let mut cap = index::cap_for(n);
        // Stay in 2-byte (4-byte) words while the table fits 256 (65536) buckets.
        for limit in [256, 65_536] {
            if cap > limit && n <= index::max_filled(limit) {
                cap = limit;
            }
        }
        self.index = if n <= u16::MAX_ENTRIES && cap <= 256 {
            Index::U16(index::build(cap, n, hash_at))
        } else if n <= u32::MAX_ENTRIES && cap <= 65_536 {
            Index::U32(index::build(cap, n, hash_at))
        } else {
            Index::U64(index::build(cap, n, hash_at))
        };
        self.tombstones = 0;
    }

    /// Removes the entry at `pos` (whose key hashes to `hash`); the last entry moves into its
    /// place. Returns the removed entry and its deadline.
    pub(crate) fn remove_at<S: BuildHasher>(
        &mut self,
        pos: usize,
        hash: u64,
        hasher: &S,
    ) -> (Entry<V>, Option<u64>) {
        let last = self.entries.len() - 1;
        let delta = with_index!(&mut self.index, w => {
            match index::find(w, hash, |p| p == pos) {
                Some((bucket, _)) => index::remove(w, bucket),
                None => {
                    debug_assert!(false, "index lost position {pos}");
                    0
                }
            }
        });
        self.tombstones = self.tombstones.saturating_add_signed(delta);
        let deadline = self.deadline(pos);
        if deadline.is_some() {
            self.set_deadline(pos, None);
        }
        let entry = self.entries.swap_remove(pos);
        if let Some(d) = self.deadlines.as_mut() {
            d.swap_remove(pos);
        }
        if pos != last {
            let moved = hasher.hash_one(self.entries[pos].key.as_bytes());
            let found = with_index!(&mut self.index, w => index::repoint(w, moved, last, pos));
            debug_assert!(found, "index lost position {last}");
        }
        self.shrink_if_sparse(hasher);
        (entry, deadline)
    }

    /// Gives memory back after many removals: the entry vector when its capacity is more than
    /// 4x the length, the index when under 1/4 of its room is used.
    fn shrink_if_sparse<S: BuildHasher>(&mut self, hasher: &S) {
        let len = self.entries.len();
        if self.entries.capacity() >= 64 && len < self.entries.capacity() / 4 {
            self.entries.shrink_to(len + len / 16);
            if let Some(d) = self.deadlines.as_mut() {
                d.shrink_to(self.entries.capacity());
            }
        }
        let cap = with_index!(&self.index, w => w.len());
        if cap > 16 && len < index::max_filled(cap) / 4 {
            self.rebuild(hasher);
        }
    }
}

/// Whether the word slice `w` takes `filled` words and positions below `len`.
#[inline]
fn fits_words<W: Word>(w: &[W], filled: usize, len: usize) -> bool {
    index::fits::<W>(w.len(), filled, len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hashbrown::DefaultHashBuilder;

    fn key(i: usize) -> Vec<u8> {
        format!("k{i}").into_bytes()
    }

    #[test]
    fn widens_and_keeps_every_key_findable() {
        let s = DefaultHashBuilder::default();
        let mut t = SlotTable::<Vec<u8>>::new();
        for i in 0..70_000 {
            let k = key(i);
            let h = s.hash_one(&k[..]);
            assert_eq!(t.find(h, &k), None);
            t.push(h, CompactKey::new(&k), vec![], &s);
        }
        assert!(matches!(t.index, Index::U64(_)));
        for i in (0..70_000).step_by(7) {
            let k = key(i);
            assert!(t.find(s.hash_one(&k[..]), &k).is_some(), "{i}");
        }
        // Remove most keys: positions stay consistent and the table shrinks.
        for i in 0..69_000 {
            let k = key(i);
            let h = s.hash_one(&k[..]);
            let pos = t.find(h, &k).unwrap();
            let (e, _) = t.remove_at(pos, h, &s);
            assert_eq!(e.key.as_bytes(), &k[..]);
        }
        assert_eq!(t.len(), 1000);
        assert!(t.entries.capacity() < 4000);
        for i in 69_000..70_000 {
            let k = key(i);
            assert!(t.find(s.hash_one(&k[..]), &k).is_some(), "{i}");
        }
    }

    #[test]
    fn deadlines_follow_swap_remove() {
        let s = DefaultHashBuilder::default();
        let mut t = SlotTable::<Vec<u8>>::new();
        for i in 0..4 {
            let k = key(i);
            t.push(s.hash_one(&k[..]), CompactKey::new(&k), vec![], &s);
        }
        t.set_deadline(3, Some(500));
        assert!(t.has_deadlines());
        let k0 = key(0);
        let (_, d) = t.remove_at(0, s.hash_one(&k0[..]), &s);
        assert_eq!(d, None);
        // Key 3 moved into position 0 with its deadline.
        assert_eq!(t.entries[0].key.as_bytes(), b"k3");
        assert_eq!(t.deadline(0), Some(500));
        assert!(!t.is_expired(0, 500) && t.is_expired(0, 501));
        assert!(t.set_deadline(0, None));
        assert!(!t.has_deadlines());
        assert_eq!(t.deadline(0), None);
    }
}

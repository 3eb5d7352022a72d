//! One hash slot's table: a dense entry vector plus a hashbrown index of positions into it.
//!
//! Layout (why): entries live in a `Vec` in insertion order; removal is `swap_remove` (the last
//! entry moves into the hole). The hashbrown `HashTable` holds only positions — `u8` while the
//! table has at most 256 entries, `u16` up to 65536, `usize` beyond — so the per-bucket cost
//! is 2 to 9 bytes however large the value type is, and the entry vector grows by 1/16 instead of
//! doubling. Because entries only ever move *down* (from the last position into a hole), a
//! cursor that walks positions from the top down sees every entry that stays present: this is
//! what gives SCAN its guarantee without depending on hashbrown's internal order.
//!
//! Invariants: every index value is a position `< entries.len()`, each position appears exactly
//! once, and `deadlines` (when present) has the same length as `entries`.

use crate::key::CompactKey;
use crate::KvValue;
use hashbrown::HashTable;
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

/// A position stored in the index.
trait Ix: Copy {
    fn new(i: usize) -> Self;
    fn get(self) -> usize;
}

impl Ix for u8 {
    #[inline]
    fn new(i: usize) -> Self {
        // Callers keep `i < 256` while the index is `U8` (see `widen_if_needed`).
        i as u8
    }
    #[inline]
    fn get(self) -> usize {
        usize::from(self)
    }
}

impl Ix for u16 {
    #[inline]
    fn new(i: usize) -> Self {
        // Callers keep `i < 65536` while the index is `U16` (see `widen_if_needed`).
        i as u16
    }
    #[inline]
    fn get(self) -> usize {
        usize::from(self)
    }
}

impl Ix for usize {
    #[inline]
    fn new(i: usize) -> Self {
        i
    }
    #[inline]
    fn get(self) -> usize {
        self
    }
}

/// Positions keyed by the key's hash, in the narrowest integer that fits the table.
enum Index {
    U8(HashTable<u8>),
    U16(HashTable<u16>),
    Wide(HashTable<usize>),
}

/// Runs `$body` with `$t` bound to whichever index table is in use.
macro_rules! with_index {
    ($index:expr, $t:ident => $body:expr) => {
        match $index {
            Index::U8($t) => $body,
            Index::U16($t) => $body,
            Index::Wide($t) => $body,
        }
    };
}

/// One slot's keys (see the module docs).
pub(crate) struct SlotTable<V> {
    index: Index,
    pub(crate) entries: Vec<Entry<V>>,
    /// Deadlines (ms) parallel to `entries`; allocated only while `volatile > 0`.
    deadlines: Option<Box<Vec<u64>>>,
    /// Entries with a deadline.
    volatile: usize,
    /// Sum of [`Entry::memory`] over the entries (bytes).
    pub(crate) memory: u64,
}

impl<V: KvValue> SlotTable<V> {
    pub(crate) fn new() -> SlotTable<V> {
        SlotTable {
            index: Index::U8(HashTable::new()),
            entries: Vec::new(),
            deadlines: None,
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
        with_index!(&self.index, t => t
            .find(hash, |&i| entries[i.get()].key.as_bytes() == key)
            .map(|&i| i.get()))
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
        self.widen_if_needed(pos, hasher);
        self.entries.push(Entry { key, value });
        if let Some(d) = self.deadlines.as_mut() {
            if d.len() == d.capacity() {
                d.reserve_exact(self.entries.capacity() - d.len());
            }
            d.push(NO_DEADLINE);
        }
        let entries = &self.entries;
        with_index!(&mut self.index, t => {
            t.insert_unique(hash, Ix::new(pos), |&i| {
                hasher.hash_one(entries[i.get()].key.as_bytes())
            });
        });
        pos
    }

    /// Moves to a wider index before position `pos` would not fit the current one.
    fn widen_if_needed<S: BuildHasher>(&mut self, pos: usize, hasher: &S) {
        let widen = match self.index {
            Index::U8(_) => pos > usize::from(u8::MAX),
            Index::U16(_) => pos > usize::from(u16::MAX),
            Index::Wide(_) => false,
        };
        if !widen {
            return;
        }
        let hash_at = |i: usize| hasher.hash_one(self.entries[i].key.as_bytes());
        let n = self.entries.len();
        self.index = if pos <= usize::from(u16::MAX) {
            let mut t = HashTable::<u16>::with_capacity(n + 1);
            for i in 0..n {
                t.insert_unique(hash_at(i), Ix::new(i), |&j| hash_at(j.get()));
            }
            Index::U16(t)
        } else {
            let mut t = HashTable::<usize>::with_capacity(n + 1);
            for i in 0..n {
                t.insert_unique(hash_at(i), i, |&j| hash_at(j));
            }
            Index::Wide(t)
        };
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
        with_index!(&mut self.index, t => {
            if let Ok(e) = t.find_entry(hash, |&i| i.get() == pos) {
                e.remove();
            } else {
                debug_assert!(false, "index lost position {pos}");
            }
        });
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
            with_index!(&mut self.index, t => {
                if let Some(i) = t.find_mut(moved, |&i| i.get() == last) {
                    *i = Ix::new(pos);
                } else {
                    debug_assert!(false, "index lost position {last}");
                }
            });
        }
        self.shrink_if_sparse(hasher);
        (entry, deadline)
    }

    /// Gives memory back after many removals (capacity more than 4x the length).
    fn shrink_if_sparse<S: BuildHasher>(&mut self, hasher: &S) {
        let len = self.entries.len();
        if self.entries.capacity() < 64 || len >= self.entries.capacity() / 4 {
            return;
        }
        self.entries.shrink_to(len + len / 16);
        if let Some(d) = self.deadlines.as_mut() {
            d.shrink_to(self.entries.capacity());
        }
        let entries = &self.entries;
        with_index!(&mut self.index, t => {
            t.shrink_to(len, |&i| hasher.hash_one(entries[i.get()].key.as_bytes()));
        });
    }
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
        assert!(matches!(t.index, Index::Wide(_)));
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

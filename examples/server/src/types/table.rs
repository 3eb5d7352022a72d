//! [`Table`]: the big form of hashes and sets, built for memory per element.
//!
//! Layout (why: Redis's hashtable spends a 24-byte `dictEntry`, an 8-byte bucket pointer and a
//! separately allocated sds string (3+ bytes of header, a NUL and the allocator's rounding)
//! per field and per value, about 64 bytes for a small field/value pair; here a pair costs its
//! bytes, two length bytes and about 10 bytes of index):
//! * `arena`: the records back to back, each `varint(len) key [varint(len) value]`;
//! * `slots`: open addressing with linear probing over 4-byte arena offsets (+1; 0 = empty),
//!   at most 3/4 full, grown by doubling and shrunk below 1/8;
//! * `tags`: one byte per slot (`0x80 | 7 hash bits`), so a probe reads the arena only for a
//!   likely match.
//!
//! A record that changes size is appended anew and the old bytes count as garbage; the arena
//! is compacted (rewritten in slot order) when garbage passes half of it. Deletion shifts the
//! following run back (no tombstones), so every element stays in the run that starts at its
//! home bucket; that is what makes the SCAN cursor ([`Table::scan`], Redis `dictScan`'s
//! reverse-binary increment over home buckets) return every element present for the whole
//! scan at least once, across resizes.
//!
//! The index holds 32-bit offsets: one collection's records are limited to 4 GiB
//! ([`TooBig`]).

use super::packed::{get_varint, put_varint, varint_len};
use std::hash::BuildHasher;
use std::sync::OnceLock;

/// The records would pass 4 GiB (the index holds 32-bit offsets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooBig;

/// `ERR` text for [`TooBig`].
pub const TOO_BIG: &str = "ERR the collection would exceed 4 GiB";

fn hasher() -> &'static hashbrown::DefaultHashBuilder {
    static H: OnceLock<hashbrown::DefaultHashBuilder> = OnceLock::new();
    H.get_or_init(hashbrown::DefaultHashBuilder::default)
}

/// The hash of an element (one seed per process).
#[inline]
pub fn hash_bytes(b: &[u8]) -> u64 {
    hasher().hash_one(b)
}

#[inline]
fn tag_of(h: u64) -> u8 {
    0x80 | (h >> 57) as u8
}

/// The big form (see the module docs). `pairs`: records carry a value (hashes) or not (sets).
#[derive(Clone)]
pub struct Table {
    arena: Vec<u8>,
    slots: Box<[u32]>,
    tags: Box<[u8]>,
    len: usize,
    garbage: usize,
    pairs: bool,
}

const MIN_SLOTS: usize = 8;

impl Table {
    /// An empty table for `capacity` elements; `pairs` as in the type docs.
    pub fn with_capacity(pairs: bool, capacity: usize) -> Table {
        let n = (capacity * 4 / 3 + 1).next_power_of_two().max(MIN_SLOTS);
        Table {
            arena: Vec::new(),
            slots: vec![0; n].into_boxed_slice(),
            tags: vec![0; n].into_boxed_slice(),
            len: 0,
            garbage: 0,
            pairs,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Heap bytes held (arena capacity, index and tags).
    pub fn heap_size(&self) -> usize {
        self.arena.capacity() + self.slots.len() * 5
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// (key, value, record length) of the record at arena offset `off`.
    #[inline]
    fn record(&self, off: usize) -> (&[u8], &[u8], usize) {
        let a = &self.arena;
        let (kl, u) = get_varint(a, off);
        let ks = off + u;
        let key = &a[ks..ks + kl];
        if !self.pairs {
            return (key, key, u + kl);
        }
        let (vl, u2) = get_varint(a, ks + kl);
        let vs = ks + kl + u2;
        (key, &a[vs..vs + vl], vs + vl - off)
    }

    #[inline]
    fn key_at_slot(&self, slot: usize) -> &[u8] {
        self.record(self.slots[slot] as usize - 1).0
    }

    /// The slot holding `key`.
    #[inline]
    fn find(&self, key: &[u8], h: u64) -> Option<usize> {
        let mask = self.mask();
        let tag = tag_of(h);
        let mut i = (h as usize) & mask;
        loop {
            let t = self.tags[i];
            if t == 0 {
                return None;
            }
            if t == tag && self.key_at_slot(i) == key {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// Whether `key` is present.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.find(key, hash_bytes(key)).is_some()
    }

    /// The value of `key` (the key itself for a set).
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        let slot = self.find(key, hash_bytes(key))?;
        Some(self.record(self.slots[slot] as usize - 1).1)
    }

    fn append_record(&mut self, key: &[u8], value: &[u8]) -> Result<u32, TooBig> {
        let mut size = varint_len(key.len()) + key.len();
        if self.pairs {
            size += varint_len(value.len()) + value.len();
        }
        let off = self.arena.len();
        if off + size >= u32::MAX as usize {
            return Err(TooBig);
        }
        put_varint(&mut self.arena, key.len());
        self.arena.extend_from_slice(key);
        if self.pairs {
            put_varint(&mut self.arena, value.len());
            self.arena.extend_from_slice(value);
        }
        Ok(off as u32 + 1)
    }

    /// Sets `key` (to `value` for a hash; `value` is ignored for a set). Returns whether the
    /// key is new.
    ///
    /// # Errors
    /// [`TooBig`]; nothing changed.
    pub fn insert(&mut self, key: &[u8], value: &[u8]) -> Result<bool, TooBig> {
        let h = hash_bytes(key);
        if let Some(slot) = self.find(key, h) {
            if !self.pairs {
                return Ok(false);
            }
            let off = self.slots[slot] as usize - 1;
            let (old_len, rec) = {
                let (_, old, rec) = self.record(off);
                (old.len(), rec)
            };
            if old_len == value.len() {
                let start = off + rec - value.len();
                self.arena[start..off + rec].copy_from_slice(value);
            } else {
                let new = self.append_record(key, value)?;
                self.slots[slot] = new;
                self.garbage += rec;
                self.maybe_compact();
            }
            return Ok(false);
        }
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.resize(self.slots.len() * 2);
        }
        let off = self.append_record(key, value)?;
        let mask = self.mask();
        let mut i = (h as usize) & mask;
        while self.tags[i] != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = off;
        self.tags[i] = tag_of(h);
        self.len += 1;
        Ok(true)
    }

    /// Removes `key`; returns whether it was there.
    pub fn remove(&mut self, key: &[u8]) -> bool {
        let Some(slot) = self.find(key, hash_bytes(key)) else {
            return false;
        };
        self.remove_slot(slot);
        true
    }

    /// Removes the element in `slot`, shifting the rest of its run back.
    fn remove_slot(&mut self, slot: usize) {
        let (_, _, rec) = self.record(self.slots[slot] as usize - 1);
        self.garbage += rec;
        let mask = self.mask();
        let mut hole = slot;
        let mut i = (slot + 1) & mask;
        while self.tags[i] != 0 {
            let home = (hash_bytes(self.key_at_slot(i)) as usize) & mask;
            // Move i into the hole when its home is not in (hole, i] (cyclically).
            let between = if hole <= i {
                hole < home && home <= i
            } else {
                hole < home || home <= i
            };
            if !between {
                self.slots[hole] = self.slots[i];
                self.tags[hole] = self.tags[i];
                hole = i;
            }
            i = (i + 1) & mask;
        }
        self.slots[hole] = 0;
        self.tags[hole] = 0;
        self.len -= 1;
        if self.slots.len() > MIN_SLOTS && self.len * 8 < self.slots.len() {
            let n = (self.len * 4 / 3 + 1).next_power_of_two().max(MIN_SLOTS);
            self.resize(n);
        }
        self.maybe_compact();
    }

    fn resize(&mut self, n: usize) {
        let mut slots = vec![0u32; n].into_boxed_slice();
        let mut tags = vec![0u8; n].into_boxed_slice();
        let mask = n - 1;
        for (i, &off) in self.slots.iter().enumerate() {
            if off == 0 {
                continue;
            }
            let h = hash_bytes(self.key_at_slot(i));
            let mut j = (h as usize) & mask;
            while tags[j] != 0 {
                j = (j + 1) & mask;
            }
            slots[j] = off;
            tags[j] = tag_of(h);
        }
        self.slots = slots;
        self.tags = tags;
    }

    fn maybe_compact(&mut self) {
        if self.garbage < 4096 || self.garbage * 2 < self.arena.len() {
            return;
        }
        let mut arena = Vec::with_capacity(self.arena.len() - self.garbage);
        for i in 0..self.slots.len() {
            let off = self.slots[i];
            if off == 0 {
                continue;
            }
            let off = off as usize - 1;
            let (_, _, rec) = self.record(off);
            // The compacted arena is smaller than the old one: offsets still fit.
            self.slots[i] = arena.len() as u32 + 1;
            arena.extend_from_slice(&self.arena[off..off + rec]);
        }
        self.arena = arena;
        self.garbage = 0;
    }

    /// Every (key, value) in slot order (value = key for a set).
    pub fn iter(&self) -> Iter<'_> {
        Iter { t: self, i: 0 }
    }

    /// The element in occupied slot `slot` (for random picks).
    fn at(&self, slot: usize) -> Option<(&[u8], &[u8])> {
        let off = *self.slots.get(slot)?;
        (off != 0).then(|| {
            let (k, v, _) = self.record(off as usize - 1);
            (k, v)
        })
    }

    /// A random element: `rng(n)` returns a uniform draw in `0..n`.
    pub fn random(&self, rng: &mut impl FnMut(usize) -> usize) -> Option<(&[u8], &[u8])> {
        if self.len == 0 {
            return None;
        }
        // At least 1/8 of the slots are full (shrinking keeps it so): a few draws suffice.
        loop {
            let s = rng(self.slots.len());
            if self.tags[s] != 0 {
                return self.at(s);
            }
        }
    }

    /// Removes and returns a random key (SPOP): its bytes are copied out first.
    pub fn pop_random(&mut self, rng: &mut impl FnMut(usize) -> usize) -> Option<Vec<u8>> {
        if self.len == 0 {
            return None;
        }
        loop {
            let s = rng(self.slots.len());
            if self.tags[s] != 0 {
                let key = self.key_at_slot(s).to_vec();
                self.remove_slot(s);
                return Some(key);
            }
        }
    }

    /// One SCAN step from `cursor`: calls `emit` for the elements of home buckets from the
    /// cursor on until at least `count` were emitted or `10 * count` buckets were visited;
    /// returns the next cursor (0 when done).
    pub fn scan(&self, cursor: u64, count: usize, mut emit: impl FnMut(&[u8], &[u8])) -> u64 {
        let mask = self.mask() as u64;
        let mut v = cursor;
        let (mut emitted, mut visited) = (0usize, 0usize);
        let max_visits = count.saturating_mul(10).max(1);
        loop {
            let bucket = (v & mask) as usize;
            let mut i = bucket;
            while self.tags[i] != 0 {
                let key = self.key_at_slot(i);
                if (hash_bytes(key) as usize) & (mask as usize) == bucket {
                    let (k, val, _) = self.record(self.slots[i] as usize - 1);
                    emit(k, val);
                    emitted += 1;
                }
                i = (i + 1) & (mask as usize);
            }
            visited += 1;
            // Redis dictScan: increment the reversed cursor over the bits of the mask.
            v |= !mask;
            v = v.reverse_bits().wrapping_add(1).reverse_bits();
            if v == 0 || emitted >= count || visited >= max_visits {
                return v;
            }
        }
    }
}

/// Iterator over a [`Table`]'s (key, value) in slot order.
#[derive(Clone)]
pub struct Iter<'a> {
    t: &'a Table,
    i: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], &'a [u8]);
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        while self.i < self.t.slots.len() {
            let off = self.t.slots[self.i];
            self.i += 1;
            if off != 0 {
                let (k, v, _) = self.t.record(off as usize - 1);
                return Some((k, v));
            }
        }
        None
    }
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("len", &self.len)
            .field("slots", &self.slots.len())
            .finish()
    }
}

impl PartialEq for Table {
    fn eq(&self, other: &Table) -> bool {
        self.pairs == other.pairs
            && self.len == other.len
            && self.iter().all(|(k, v)| other.get(k) == Some(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, BTreeSet};

    proptest! {
        #[test]
        fn behaves_like_a_map(ops in proptest::collection::vec((0u8..3, 0u16..300, 0usize..40), 0..2000)) {
            let mut t = Table::with_capacity(true, 0);
            let mut m: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
            for (op, k, vl) in ops {
                let key = format!("k{k}").into_bytes();
                match op {
                    0 | 1 => {
                        let v = vec![b'v'; vl];
                        prop_assert_eq!(t.insert(&key, &v).unwrap(), !m.contains_key(&key));
                        m.insert(key, v);
                    }
                    _ => prop_assert_eq!(t.remove(&key), m.remove(&key).is_some()),
                }
                prop_assert_eq!(t.len(), m.len());
            }
            for (k, v) in &m {
                prop_assert_eq!(t.get(k), Some(&v[..]));
            }
            let all: BTreeMap<Vec<u8>, Vec<u8>> = t.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
            prop_assert_eq!(all, m);
        }

        #[test]
        fn scan_returns_every_element_present_throughout(n in 1usize..3000, grow in 0usize..3000, count in 1usize..50) {
            let mut t = Table::with_capacity(false, 0);
            for i in 0..n {
                t.insert(format!("m{i}").as_bytes(), b"").unwrap();
            }
            let mut seen = BTreeSet::new();
            let mut cursor = 0;
            let mut steps = 0;
            loop {
                cursor = t.scan(cursor, count, |k, _| { seen.insert(k.to_vec()); });
                // Grow and shrink the table between steps: elements present throughout must
                // still be seen.
                if steps == 2 {
                    for i in 0..grow {
                        t.insert(format!("x{i}").as_bytes(), b"").unwrap();
                    }
                }
                if steps == 5 {
                    for i in 0..grow {
                        t.remove(format!("x{i}").as_bytes());
                    }
                }
                steps += 1;
                if cursor == 0 { break; }
            }
            for i in 0..n {
                prop_assert!(seen.contains(format!("m{i}").as_bytes()), "m{} missed", i);
            }
        }
    }

    #[test]
    fn compaction_and_shrinking_keep_values() {
        let mut t = Table::with_capacity(true, 0);
        for i in 0..10_000 {
            t.insert(format!("f{i}").as_bytes(), format!("v{i}").as_bytes())
                .unwrap();
        }
        for i in 0..10_000 {
            // Longer values: every record moves to the end.
            t.insert(format!("f{i}").as_bytes(), format!("value-{i}").as_bytes())
                .unwrap();
        }
        for i in 0..9_990 {
            assert!(t.remove(format!("f{i}").as_bytes()));
        }
        assert_eq!(t.len(), 10);
        assert!(t.slots.len() <= 64, "{}", t.slots.len());
        for i in 9_990..10_000 {
            assert_eq!(
                t.get(format!("f{i}").as_bytes()),
                Some(format!("value-{i}").as_bytes())
            );
        }
        assert!(t.arena.len() < 1000, "{}", t.arena.len());
    }
}

//! One hash slot's table: a dense entry vector plus an index of positions into it, the index
//! words stored in the same allocation as the table's header.
//!
//! Layout (why): entries live in a `Vec` in insertion order; removal is `swap_remove` (the last
//! entry moves into the hole). The index ([`crate::index`]) holds only positions packed with a
//! hash tag — 2 bytes per bucket while the table has at most 255 entries, 4 up to 65535, 8
//! beyond — so the per-bucket cost is small however large the value type is, and the entry
//! vector grows by 1/16 instead of doubling. A database keeps one 16-byte pointer per slot
//! (256 KiB, which stays in cache); the pointer leads to one allocation holding the header
//! (entry vector, deadlines, counters) and, for tables of up to 255 entries, the 2-byte index
//! words right behind it, in a few size classes (`[u16]` as the struct's last, unsized
//! field). A lookup thus reads the header and an index line (independent loads, issued
//! together) and then the entry; bigger tables keep their index in a separate box.
//!
//! Because entries only ever move *down* (from the last position into a hole), a cursor that
//! walks positions from the top down sees every entry that stays present: this is what gives
//! SCAN its guarantee, independent of the index's internal order.
//!
//! Invariants: every live index word holds a position `< entries.len()`, each position appears
//! exactly once, `tombstones` counts the tombstone words, `deadlines` (when present) has the
//! same length as `entries`, and a stored table is never empty (the database drops it).

use crate::index::{self, Word};
use crate::key::CompactKey;
use crate::keyhash::{KeyHasher, Probe};
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

/// An index that outgrew the inline words (more than 255 entries).
enum Wide {
    U32(Box<[u32]>),
    U64(Box<[u64]>),
}

/// Runs `$body` with `$t` bound to the table's index words (inline or wide).
macro_rules! with_index {
    ($table:expr, $t:ident => $body:expr) => {
        match $table.wide.as_deref() {
            None => {
                let $t = &$table.words;
                $body
            }
            Some(Wide::U32($t)) => $body,
            Some(Wide::U64($t)) => $body,
        }
    };
}

/// Like `with_index!`, mutable.
macro_rules! with_index_mut {
    ($table:expr, $t:ident => $body:expr) => {
        match $table.wide.as_deref_mut() {
            None => {
                let $t = &mut $table.words;
                $body
            }
            Some(Wide::U32($t)) => $body,
            Some(Wide::U64($t)) => $body,
        }
    };
}

/// One slot's keys (see the module docs); `W` is `[u16; N]` when built, `[u16]` when used.
pub(crate) struct Table<V, W: ?Sized> {
    pub(crate) entries: Vec<Entry<V>>,
    /// Deadlines (ms) parallel to `entries`; allocated only while `volatile > 0`. Boxed so the
    /// field costs 8 bytes, not 24, in the header.
    #[allow(clippy::box_collection)]
    deadlines: Option<Box<Vec<u64>>>,
    /// Access words parallel to `entries` (the host's LRU clock or LFU counter of each key,
    /// Redis's 24-bit `robj.lru`); allocated only while the store tracks access
    /// ([`crate::KvStore::set_access_tracking`]). Boxed like `deadlines`.
    #[allow(clippy::box_collection)]
    access: Option<Box<Vec<u32>>>,
    /// Sum of [`Entry::memory`] over the entries (bytes).
    pub(crate) memory: u64,
    /// Tombstone words in the index (32 bits: with `volatile`, the header stays 64 bytes).
    tombstones: u32,
    /// Entries with a deadline.
    volatile: u32,
    /// The index when it is not inline (then `words` is empty).
    wide: Option<Box<Wide>>,
    /// The inline index words.
    words: W,
}

/// A slot table as the database stores it (behind a `Box`).
pub(crate) type SlotTable<V> = Table<V, [u16]>;

/// Inline word counts: with the 64-byte header, each class fills an allocator size class
/// (64-byte steps up to 512 bytes).
const CLASSES: [usize; 10] = [4, 8, 16, 32, 64, 96, 128, 160, 224, 288];

/// A boxed table with `n` inline words (one of [`CLASSES`], or 0) holding the given parts.
#[allow(clippy::box_collection)]
fn boxed<V>(
    n: usize,
    entries: Vec<Entry<V>>,
    deadlines: Option<Box<Vec<u64>>>,
    access: Option<Box<Vec<u32>>>,
    memory: u64,
    volatile: u32,
    wide: Option<Box<Wide>>,
) -> Box<SlotTable<V>> {
    macro_rules! make {
        ($($n:literal),*) => {
            match n {
                $($n => Box::new(Table {
                    entries, deadlines, access, memory, tombstones: 0, volatile, wide, words: [0u16; $n],
                }) as Box<SlotTable<V>>,)*
                _ => Box::new(Table {
                    entries, deadlines, access, memory, tombstones: 0, volatile, wide, words: [0u16; 0],
                }),
            }
        };
    }
    make!(4, 8, 16, 32, 64, 96, 128, 160, 224, 288)
}

impl<V: KvValue> SlotTable<V> {
    /// An empty table (no index words yet).
    pub(crate) fn new() -> Box<SlotTable<V>> {
        boxed(0, Vec::new(), None, None, 0, 0, None)
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The access word of the entry at `pos`, while access is tracked.
    #[inline]
    pub(crate) fn access(&self, pos: usize) -> Option<u32> {
        self.access.as_ref()?.get(pos).copied()
    }

    /// The access word of the entry at `pos`, mutable, while access is tracked.
    #[inline]
    pub(crate) fn access_mut(&mut self, pos: usize) -> Option<&mut u32> {
        self.access.as_mut()?.get_mut(pos)
    }

    /// Starts tracking access with every entry at `init`, or stops (`None`).
    pub(crate) fn set_access_all(&mut self, init: Option<u32>) {
        self.access = init.map(|w| {
            let mut v = Vec::with_capacity(self.entries.capacity());
            v.resize(self.entries.len(), w);
            Box::new(v)
        });
    }

    /// Whether any entry has a deadline.
    pub(crate) fn has_deadlines(&self) -> bool {
        self.volatile > 0
    }

    /// Position of the key `probe` was made for.
    #[inline(always)]
    pub(crate) fn find(&self, probe: &Probe<'_>) -> Option<usize> {
        self.find_entry(probe).map(|(p, _)| p)
    }

    /// Position and entry of the key `probe` was made for.
    ///
    /// Tables of up to 255 entries (2-byte index words in the header's allocation) walk their
    /// index inlined into the caller; bigger ones out of line ([`Self::find_wide`]). Why: at
    /// 1M keys every instruction around a lookup's cache misses shows in the lookup rate
    /// (measured: the out-of-line call cost about 90 instructions per lookup, the inlined
    /// walk about 40).
    #[inline(always)]
    pub(crate) fn find_entry(&self, probe: &Probe<'_>) -> Option<(usize, &Entry<V>)> {
        if self.wide.is_some() {
            return self.find_wide(probe);
        }
        index::find_map(&self.words, probe.hash, |p| self.entry_if_key(p, probe)).map(|(_, r)| r)
    }

    /// [`Self::find_entry`] over a wide index.
    #[inline(never)]
    fn find_wide(&self, probe: &Probe<'_>) -> Option<(usize, &Entry<V>)> {
        let hit = |p: usize| self.entry_if_key(p, probe);
        with_index!(self, w => index::find_map(w, probe.hash, hit).map(|(_, r)| r))
    }

    /// The entry at `pos` with its position, if it holds the key `probe` was made for.
    #[inline(always)]
    fn entry_if_key(&self, pos: usize, probe: &Probe<'_>) -> Option<(usize, &Entry<V>)> {
        self.entries
            .get(pos)
            .filter(|e| e.key.matches(probe))
            .map(|e| (pos, e))
    }

    /// The deadline of the entry at `pos`, if it has one.
    #[inline]
    pub(crate) fn deadline(&self, pos: usize) -> Option<u64> {
        let d = self.deadlines.as_ref()?;
        let at = *d.get(pos)?;
        (at != NO_DEADLINE).then_some(at)
    }

    /// How many entries have a deadline and the sum of those deadlines (ms): one pass over
    /// the deadline vector.
    pub(crate) fn deadline_totals(&self) -> (u64, u128) {
        let Some(d) = self.deadlines.as_ref() else {
            return (0, 0);
        };
        d.iter()
            .filter(|&&at| at != NO_DEADLINE)
            .fold((0, 0), |(n, s), &at| (n + 1, s + u128::from(at)))
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

    /// Appends a new entry (the key must not be present) to `this` and returns its position;
    /// `access` is its access word while access is tracked.
    pub(crate) fn push<S: BuildHasher>(
        this: &mut Box<SlotTable<V>>,
        hash: u64,
        key: CompactKey,
        value: V,
        access: Option<u32>,
        hasher: &KeyHasher<S>,
    ) -> usize {
        let t = &mut **this;
        let pos = t.entries.len();
        if pos == t.entries.capacity() {
            // Grow by 1/16 (at least 4): little spare capacity, still amortised O(1).
            t.entries.reserve_exact((pos / 16).max(4));
        }
        t.entries.push(Entry { key, value });
        if let Some(d) = t.deadlines.as_mut() {
            if d.len() == d.capacity() {
                d.reserve_exact(t.entries.capacity() - d.len());
            }
            d.push(NO_DEADLINE);
        }
        if let Some(w) = access {
            let cap = t.entries.capacity();
            let a = t.access.get_or_insert_with(|| Box::new(vec![w; pos]));
            if a.len() == a.capacity() {
                a.reserve_exact(cap - a.len());
            }
            a.push(w);
        }
        let len = t.entries.len();
        let filled = len + t.tombstones as usize;
        if !with_index!(t, w => fits_words(w, filled, len)) {
            // The rebuild indexes every entry, the new one included.
            Self::rebuild(this, hasher);
            return pos;
        }
        if with_index_mut!(t, w => index::insert(w, hash, pos)) {
            t.tombstones -= 1;
        }
        pos
    }

    /// Rebuilds the index of `this` for its current entries at a load of about 5/8 (without
    /// tombstones): inline words in the smallest class that fits while there are at most 255
    /// entries, else a separate index of 4- or 8-byte words.
    fn rebuild<S: BuildHasher>(this: &mut Box<SlotTable<V>>, hasher: &KeyHasher<S>) {
        let n = this.entries.len();
        let want = index::cap_for(n);
        let class = CLASSES
            .iter()
            .copied()
            .find(|&c| c >= want && n <= index::max_filled(c))
            .filter(|_| n <= u16::MAX_ENTRIES);
        let t = &mut **this;
        let entries = std::mem::take(&mut t.entries);
        let deadlines = t.deadlines.take();
        let access = t.access.take();
        let hash_at = |p: usize| hasher.hash(entries[p].key.as_bytes());
        let (words, wide) = match class {
            Some(c) => (c, None),
            None if n <= u32::MAX_ENTRIES => {
                (0, Some(Box::new(Wide::U32(index::build(want, n, hash_at)))))
            }
            None => (0, Some(Box::new(Wide::U64(index::build(want, n, hash_at))))),
        };
        let mut fresh = boxed(
            words, entries, deadlines, access, t.memory, t.volatile, wide,
        );
        if fresh.wide.is_none() {
            let Table { entries, words, .. } = &mut *fresh;
            for (p, e) in entries.iter().enumerate() {
                index::insert(words, hasher.hash(e.key.as_bytes()), p);
            }
        }
        *this = fresh;
    }

    /// Removes the entry at `pos` of `this` (whose key hashes to `hash`); the last entry moves
    /// into its place. Returns the removed entry and its deadline.
    pub(crate) fn remove_at<S: BuildHasher>(
        this: &mut Box<SlotTable<V>>,
        pos: usize,
        hash: u64,
        hasher: &KeyHasher<S>,
    ) -> (Entry<V>, Option<u64>) {
        let t = &mut **this;
        let last = t.entries.len() - 1;
        let delta = with_index_mut!(t, w => {
            match index::find(w, hash, |p| p == pos) {
                Some((bucket, _)) => index::remove(w, bucket),
                None => {
                    debug_assert!(false, "index lost position {pos}");
                    0
                }
            }
        });
        t.tombstones = (t.tombstones as usize).saturating_add_signed(delta) as u32;
        let deadline = t.deadline(pos);
        if deadline.is_some() {
            t.set_deadline(pos, None);
        }
        let entry = t.entries.swap_remove(pos);
        if let Some(d) = t.deadlines.as_mut() {
            d.swap_remove(pos);
        }
        if let Some(a) = t.access.as_mut() {
            a.swap_remove(pos);
        }
        if pos != last {
            let moved = hasher.hash(t.entries[pos].key.as_bytes());
            let found = with_index_mut!(t, w => index::repoint(w, moved, last, pos));
            debug_assert!(found, "index lost position {last}");
        }
        // Give memory back after many removals: the entry vector when its capacity is more
        // than 4x the length, the index when under 1/4 of its room is used.
        let len = t.entries.len();
        if t.entries.capacity() >= 64 && len < t.entries.capacity() / 4 {
            t.entries.shrink_to(len + len / 16);
            let cap = t.entries.capacity();
            if let Some(d) = t.deadlines.as_mut() {
                d.shrink_to(cap);
            }
            if let Some(a) = t.access.as_mut() {
                a.shrink_to(cap);
            }
        }
        let cap = with_index!(t, w => w.len());
        if cap > 16 && len < index::max_filled(cap) / 4 {
            Self::rebuild(this, hasher);
        }
        (entry, deadline)
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
    use ferrocluster_slot::SlotKey;
    use hashbrown::DefaultHashBuilder;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn every_class_gets_its_word_count() {
        for c in CLASSES.into_iter().chain([0]) {
            let t = boxed::<Vec<u8>>(c, Vec::new(), None, None, 0, 0, None);
            assert_eq!(t.words.len(), c);
        }
        // The header is 64 bytes, so each class fills a 64-byte allocator step.
        assert_eq!(std::mem::size_of::<Table<Vec<u8>, [u16; 0]>>(), 64);
    }

    /// Checks every index invariant of `t` against the set of keys it should hold.
    fn check(t: &SlotTable<Vec<u8>>, s: &KeyHasher<DefaultHashBuilder>, model: &BTreeSet<u16>) {
        assert_eq!(t.len(), model.len());
        let mut seen = vec![false; t.len()];
        let mut tombstones = 0;
        with_index!(t, w => {
            for &word in w.iter() {
                match index::position(word) {
                    Some(p) => assert!(!std::mem::replace(&mut seen[p], true), "{p} twice"),
                    None => tombstones += usize::from(word.raw() == 1),
                }
            }
        });
        assert!(seen.iter().all(|&x| x), "a position is missing");
        assert_eq!(tombstones, t.tombstones as usize);
        for &i in model {
            let k = key(usize::from(i));
            let pos = t
                .find(&s.probe(SlotKey::new(&k)))
                .expect("present key found");
            assert_eq!(t.entries[pos].key.as_bytes(), &k[..]);
        }
    }

    proptest! {
        #[test]
        fn index_matches_a_set_under_churn(ops in proptest::collection::vec((any::<bool>(), 0..400u16), 1..900)) {
            let s = KeyHasher::new(DefaultHashBuilder::default());
            let mut t = SlotTable::<Vec<u8>>::new();
            let mut model = BTreeSet::new();
            for (insert, i) in ops {
                let k = key(usize::from(i));
                let found = t.find(&s.probe(SlotKey::new(&k)));
                prop_assert_eq!(found.is_some(), model.contains(&i));
                match (insert, found) {
                    (true, None) => {
                        SlotTable::push(&mut t, s.hash(&k), CompactKey::new(&k), vec![], None, &s);
                        model.insert(i);
                    }
                    (false, Some(pos)) if t.len() > 1 => {
                        SlotTable::remove_at(&mut t, pos, s.hash(&k), &s);
                        model.remove(&i);
                    }
                    _ => {}
                }
            }
            check(&t, &s, &model);
        }
    }

    fn key(i: usize) -> Vec<u8> {
        format!("k{i}").into_bytes()
    }

    #[test]
    fn widens_and_keeps_every_key_findable() {
        let s = KeyHasher::new(DefaultHashBuilder::default());
        let mut t = SlotTable::<Vec<u8>>::new();
        for i in 0..70_000 {
            let k = key(i);
            let h = s.hash(&k[..]);
            assert_eq!(t.find(&s.probe(SlotKey::new(&k))), None);
            SlotTable::push(&mut t, h, CompactKey::new(&k), vec![], None, &s);
        }
        assert!(matches!(t.wide.as_deref(), Some(Wide::U64(_))));
        for i in (0..70_000).step_by(7) {
            let k = key(i);
            assert!(t.find(&s.probe(SlotKey::new(&k))).is_some(), "{i}");
        }
        // Remove most keys: positions stay consistent and the table shrinks.
        for i in 0..69_000 {
            let k = key(i);
            let h = s.hash(&k[..]);
            let pos = t.find(&s.probe(SlotKey::new(&k))).unwrap();
            let (e, _) = SlotTable::remove_at(&mut t, pos, h, &s);
            assert_eq!(e.key.as_bytes(), &k[..]);
        }
        assert_eq!(t.len(), 1000);
        assert!(t.entries.capacity() < 4000);
        // Small again: back to inline words.
        for i in 69_000..69_900 {
            let k = key(i);
            let pos = t.find(&s.probe(SlotKey::new(&k))).unwrap();
            SlotTable::remove_at(&mut t, pos, s.hash(&k[..]), &s);
        }
        assert!(t.wide.is_none() && !t.words.is_empty());
        for i in 69_900..70_000 {
            let k = key(i);
            assert!(t.find(&s.probe(SlotKey::new(&k))).is_some(), "{i}");
        }
    }

    #[test]
    fn deadlines_follow_swap_remove() {
        let s = KeyHasher::new(DefaultHashBuilder::default());
        let mut t = SlotTable::<Vec<u8>>::new();
        for i in 0..4 {
            let k = key(i);
            SlotTable::push(
                &mut t,
                s.hash(&k[..]),
                CompactKey::new(&k),
                vec![],
                None,
                &s,
            );
        }
        t.set_deadline(3, Some(500));
        assert!(t.has_deadlines());
        let k0 = key(0);
        let (_, d) = SlotTable::remove_at(&mut t, 0, s.hash(&k0[..]), &s);
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

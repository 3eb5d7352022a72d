//! A slot table's hash index: open addressing with linear probing over packed words, each
//! holding a hash tag and an entry position side by side.
//!
//! Why its own table (and not a hashbrown `HashTable` of positions): a hashbrown lookup reads
//! the control bytes, then the position stored in a separate array in front of them, then the
//! entry — two dependent cache misses before the entry. Here tag and position share one word,
//! so a lookup reads one cache line of the index (usually) and then the entry.
//!
//! Word layout (`W` = `u16`, `u32` or `u64`): `((position + 1) << TAG_BITS) | tag`, where the tag
//! is the top `TAG_BITS` bits of the key's hash. `0` is an empty bucket, `1` (position field 0,
//! tag 1) a tombstone left by a removal. The home bucket is `(low 32 hash bits × capacity) >> 32`
//! (any capacity, no power of two needed), so the tag and the home come from disjoint hash bits
//! and a tag match filters out all but 1/2^TAG_BITS of the other keys on the probe path.
//!
//! Invariants: at least one bucket is empty (live + tombstones <= [`max_filled`]`(capacity)`, which
//! is below the capacity), so every probe ends; each stored position appears in exactly one word.

/// A packed index word.
pub(crate) trait Word: Copy + Eq {
    /// Bits of the hash kept as the tag.
    const TAG_BITS: u32;
    /// The most entries whose positions fit the position field.
    const MAX_ENTRIES: usize;
    /// The all-zero word (empty bucket).
    const EMPTY: Self;
    /// A removed entry's bucket that a probe must walk past.
    const TOMBSTONE: Self;
    /// The word as a `u64`.
    fn raw(self) -> u64;
    /// A word from a `u64` that fits its width.
    fn from_raw(v: u64) -> Self;
}

macro_rules! word {
    ($t:ty, $tag_bits:expr) => {
        impl Word for $t {
            const TAG_BITS: u32 = $tag_bits;
            const MAX_ENTRIES: usize = (1usize << (<$t>::BITS - $tag_bits)) - 1;
            const EMPTY: Self = 0;
            const TOMBSTONE: Self = 1;
            #[inline]
            fn raw(self) -> u64 {
                u64::from(self)
            }
            #[inline]
            fn from_raw(v: u64) -> Self {
                // Callers pack positions below MAX_ENTRIES and tags of TAG_BITS bits, so `v`
                // fits the width.
                v as $t
            }
        }
    };
}

word!(u16, 8);
word!(u32, 16);
word!(u64, 16);

/// The most live + tombstone words a table of `cap` buckets may hold: 7/8 of it (always at
/// least one bucket empty; 0 for the empty table).
#[inline]
pub(crate) fn max_filled(cap: usize) -> usize {
    if cap < 8 {
        cap.saturating_sub(1)
    } else {
        cap - cap / 8
    }
}

/// The capacity for `n` live entries right after a rebuild: a load of 5/8, so the table
/// takes about 40% more inserts before the next rebuild (load factor stays in 5/8..7/8).
pub(crate) fn cap_for(n: usize) -> usize {
    (n + n * 3 / 5 + 1).max(4)
}

#[inline]
fn tag<W: Word>(hash: u64) -> u64 {
    hash >> (64 - W::TAG_BITS)
}

#[inline]
fn home(hash: u64, cap: usize) -> usize {
    // (x * cap) >> 32 < cap for x < 2^32.
    ((u128::from(hash as u32) * cap as u128) >> 32) as usize
}

#[inline]
fn pack<W: Word>(hash: u64, pos: usize) -> W {
    W::from_raw(((pos as u64 + 1) << W::TAG_BITS) | tag::<W>(hash))
}

/// The position a live word holds.
#[inline]
fn pos_of<W: Word>(w: W) -> usize {
    // Live words hold position + 1 >= 1; the value came from a usize.
    (w.raw() >> W::TAG_BITS) as usize - 1
}

/// The position a word holds; `None` for an empty bucket or a tombstone.
#[cfg(test)]
pub(crate) fn position<W: Word>(w: W) -> Option<usize> {
    (w.raw() >> W::TAG_BITS != 0).then(|| pos_of(w))
}

/// Walks the probe path of `hash` and returns `(bucket, position)` of the first live word whose
/// tag matches and whose position satisfies `eq`; `None` at the first empty bucket.
#[inline]
pub(crate) fn find<W: Word>(
    words: &[W],
    hash: u64,
    mut eq: impl FnMut(usize) -> bool,
) -> Option<(usize, usize)> {
    find_map(words, hash, |p| eq(p).then_some(p))
}

/// [`find`] returning what `hit` makes of the first matching position: `(bucket, value)` of
/// the first live word on the probe path whose tag matches and for whose position `hit` gives
/// `Some`. Inlined into its caller (a table lookup passes a `hit` that reads the entry), since
/// at 1M keys every instruction around a lookup's cache misses shows in the lookup rate.
#[inline(always)]
pub(crate) fn find_map<W: Word, R>(
    words: &[W],
    hash: u64,
    mut hit: impl FnMut(usize) -> Option<R>,
) -> Option<(usize, R)> {
    let cap = words.len();
    if cap == 0 {
        return None;
    }
    let t = tag::<W>(hash);
    let mask = (1u64 << W::TAG_BITS) - 1;
    let mut i = home(hash, cap);
    loop {
        let w = words.get(i)?.raw();
        if w == 0 {
            return None;
        }
        // `w > mask`: a live word (tombstones and empties have position field 0).
        if w & mask == t && w > mask {
            if let Some(r) = hit(pos_of(W::from_raw(w))) {
                return Some((i, r));
            }
        }
        i += 1;
        if i == cap {
            i = 0;
        }
    }
}

/// Stores `pos` for `hash` in the first empty or tombstone bucket of its probe path (the key
/// must not be present; the caller keeps room, see [`max_filled`]). Returns whether a tombstone
/// was reused.
#[inline]
pub(crate) fn insert<W: Word>(words: &mut [W], hash: u64, pos: usize) -> bool {
    let cap = words.len();
    let mut i = home(hash, cap);
    loop {
        let w = words[i];
        if w == W::EMPTY || w == W::TOMBSTONE {
            words[i] = pack(hash, pos);
            return w == W::TOMBSTONE;
        }
        i += 1;
        if i == cap {
            i = 0;
        }
    }
}

/// Rewrites the word of `hash` that holds position `from` to hold `to` (the entry moved).
/// Returns whether the word was found.
#[inline]
pub(crate) fn repoint<W: Word>(words: &mut [W], hash: u64, from: usize, to: usize) -> bool {
    match find(words, hash, |p| p == from) {
        Some((b, _)) => {
            words[b] = pack(hash, to);
            true
        }
        None => false,
    }
}

/// Empties `bucket`: a tombstone if a probe path may run through it, else an empty bucket (and
/// the tombstones right before it become empty too). Returns the change in the tombstone count.
pub(crate) fn remove<W: Word>(words: &mut [W], bucket: usize) -> isize {
    let cap = words.len();
    let next = if bucket + 1 == cap { 0 } else { bucket + 1 };
    if words[next] != W::EMPTY {
        words[bucket] = W::TOMBSTONE;
        return 1;
    }
    // No probe path continues past `bucket`, so it and the tombstones just before it (which
    // only led here) can all end probes.
    words[bucket] = W::EMPTY;
    let mut freed = 0;
    let mut j = bucket;
    loop {
        j = if j == 0 { cap - 1 } else { j - 1 };
        if words[j] != W::TOMBSTONE {
            return -freed;
        }
        words[j] = W::EMPTY;
        freed += 1;
    }
}

/// A table of `cap` buckets holding positions `0..n`, `hash_at(p)` giving each one's hash.
pub(crate) fn build<W: Word>(cap: usize, n: usize, hash_at: impl Fn(usize) -> u64) -> Box<[W]> {
    let mut words = vec![W::EMPTY; cap].into_boxed_slice();
    for p in 0..n {
        insert(&mut words, hash_at(p), p);
    }
    words
}

/// Whether a table of `cap` buckets of `W` takes `filled` words (and positions below `len`).
#[inline]
pub(crate) fn fits<W: Word>(cap: usize, filled: usize, len: usize) -> bool {
    filled <= max_filled(cap) && len <= W::MAX_ENTRIES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_widths() {
        assert_eq!(<u16 as Word>::MAX_ENTRIES, 255);
        assert_eq!(<u32 as Word>::MAX_ENTRIES, 65_535);
        assert_eq!(<u64 as Word>::MAX_ENTRIES, (1 << 48) - 1);
        for cap in 4..2000 {
            assert!(max_filled(cap) < cap, "{cap}");
            assert!(max_filled(cap_for(cap)) >= cap, "{cap}");
        }
    }

    #[test]
    fn tombstones_are_walked_past_and_cleared_at_the_end_of_a_run() {
        // Every hash has home bucket 0 (low 32 bits zero); tags differ.
        let h = |i: u64| i << 56;
        let mut w = build::<u16>(8, 3, |p| h(p as u64 + 1));
        assert_eq!(find(&w, h(3), |p| p == 2), Some((2, 2)));
        // Removing the middle leaves a tombstone; the last is still found.
        assert_eq!(remove(&mut w, 1), 1);
        assert_eq!(find(&w, h(3), |p| p == 2), Some((2, 2)));
        assert_eq!(find(&w, h(2), |_| true), None);
        // Removing the end of the run clears it and the tombstone before it.
        assert_eq!(remove(&mut w, 2), -1);
        assert_eq!(w[1], 0);
        assert!(!insert(&mut w, h(4), 5));
        assert_eq!(find(&w, h(4), |p| p == 5), Some((1, 5)));
        assert!(repoint(&mut w, h(4), 5, 1));
        assert_eq!(find(&w, h(4), |_| true), Some((1, 1)));
    }
}

//! A 16384-bit slot bitmap with "next set bit at or after" search, for jumping over empty or
//! hidden slots in SCAN, random sampling and active expiry (the job Valkey's Fenwick tree does
//! for "next non-empty table").

use ferrocluster_slot::SLOT_COUNT;

const WORDS: usize = SLOT_COUNT / 64;

/// One bit per slot (`slot / 64` is the word, `slot % 64` the bit).
#[derive(Clone)]
pub(crate) struct SlotBits(Box<[u64; WORDS]>);

impl SlotBits {
    pub(crate) fn new() -> SlotBits {
        SlotBits(Box::new([0; WORDS]))
    }

    #[inline]
    pub(crate) fn get(&self, slot: usize) -> bool {
        self.0[slot / 64] & (1 << (slot % 64)) != 0
    }

    #[inline]
    pub(crate) fn set(&mut self, slot: usize, on: bool) {
        let w = &mut self.0[slot / 64];
        if on {
            *w |= 1 << (slot % 64);
        } else {
            *w &= !(1 << (slot % 64));
        }
    }

    /// The first slot `>= start` whose bit is set here and clear in `exclude`.
    pub(crate) fn next_from(&self, start: usize, exclude: &SlotBits) -> Option<usize> {
        if start >= SLOT_COUNT {
            return None;
        }
        let mut w = start / 64;
        let mut word = (self.0[w] & !exclude.0[w]) & (!0u64 << (start % 64));
        loop {
            if word != 0 {
                return Some(w * 64 + word.trailing_zeros() as usize);
            }
            w += 1;
            if w == WORDS {
                return None;
            }
            word = self.0[w] & !exclude.0[w];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_from_skips_excluded_and_unset() {
        let mut b = SlotBits::new();
        let mut ex = SlotBits::new();
        for s in [0, 63, 64, 200, 16383] {
            b.set(s, true);
        }
        ex.set(64, true);
        assert_eq!(b.next_from(0, &ex), Some(0));
        assert_eq!(b.next_from(1, &ex), Some(63));
        assert_eq!(b.next_from(64, &ex), Some(200));
        assert_eq!(b.next_from(201, &ex), Some(16383));
        assert_eq!(b.next_from(16384, &ex), None);
        b.set(16383, false);
        assert_eq!(b.next_from(201, &ex), None);
        assert!(b.get(200) && !b.get(201));
    }
}

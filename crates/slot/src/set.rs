//! `SlotSet`: 16384 bits laid out exactly like the bus `myslots` field.

use crate::{Slot, SlotRange, SLOT_COUNT};
use std::fmt;

const BYTES: usize = SLOT_COUNT / 8;

/// A set of hash slots: 16384 bits, 2048 bytes.
///
/// The byte layout is the cluster bus `myslots` field and the UPDATE message bitmap
/// (facts sheet §3): slot `j` is bit `j & 7` (counted from the least significant bit) of
/// byte `j / 8`. [`SlotSet::as_bytes`] and [`SlotSet::from_bytes`] convert without copying
/// bits around.
///
/// ```
/// use ferrocluster_slot::{Slot, SlotSet};
/// let mut s = SlotSet::new();
/// s.insert(Slot::new(9).unwrap());
/// assert_eq!(s.as_bytes()[1], 0b0000_0010);
/// assert_eq!(s.len(), 1);
/// ```
///
/// The set keeps its size beside the bits, so [`SlotSet::len`] and [`SlotSet::is_empty`] are
/// O(1): nodes ask them per gossip entry and per ping, and counting walks 2 KiB.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct SlotSet {
    bits: [u8; BYTES],
    /// `bits` counted (0..=16384); a function of `bits`, so the derived Eq/Hash stay right.
    len: u16,
}

impl Default for SlotSet {
    fn default() -> Self {
        SlotSet::new()
    }
}

impl SlotSet {
    /// The empty set.
    pub const fn new() -> SlotSet {
        SlotSet {
            bits: [0; BYTES],
            len: 0,
        }
    }

    /// The set of all 16384 slots.
    pub const fn full() -> SlotSet {
        SlotSet {
            bits: [0xff; BYTES],
            len: SLOT_COUNT as u16,
        }
    }

    /// Builds a set from the 2048 bytes of a bus `myslots` field.
    pub const fn from_bytes(bytes: &[u8; BYTES]) -> SlotSet {
        let mut len = 0u16;
        let mut i = 0;
        while i < BYTES {
            len += bytes[i].count_ones() as u16;
            i += 1;
        }
        SlotSet { bits: *bytes, len }
    }

    /// The 2048 bytes, in bus `myslots` layout.
    pub const fn as_bytes(&self) -> &[u8; BYTES] {
        &self.bits
    }

    /// Adds a slot; returns `true` if it was not there.
    pub fn insert(&mut self, slot: Slot) -> bool {
        let (byte, mask) = locate(slot);
        let was = self.bits[byte] & mask != 0;
        self.bits[byte] |= mask;
        self.len += u16::from(!was);
        !was
    }

    /// Removes a slot; returns `true` if it was there.
    pub fn remove(&mut self, slot: Slot) -> bool {
        let (byte, mask) = locate(slot);
        let was = self.bits[byte] & mask != 0;
        self.bits[byte] &= !mask;
        self.len -= u16::from(was);
        was
    }

    /// Whether the slot is in the set.
    pub fn contains(&self, slot: Slot) -> bool {
        let (byte, mask) = locate(slot);
        self.bits[byte] & mask != 0
    }

    /// Adds every slot of `range`.
    pub fn insert_range(&mut self, range: SlotRange) {
        for s in range.iter() {
            self.insert(s);
        }
    }

    /// Number of slots in the set (0..=16384).
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// Whether no slot is in the set.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Removes every slot.
    pub fn clear(&mut self) {
        self.bits = [0; BYTES];
        self.len = 0;
    }

    /// The slots in ascending order.
    pub fn iter(&self) -> SlotSetIter<'_> {
        SlotSetIter { set: self, next: 0 }
    }

    /// The slots as maximal ranges of consecutive slots, ascending (`0-5460`, `10923`, ...).
    pub fn ranges(&self) -> SlotRanges<'_> {
        SlotRanges {
            iter: self.iter(),
            pending: None,
        }
    }

    /// Slots in `self` or `other`.
    pub fn union(&self, other: &SlotSet) -> SlotSet {
        self.zip_with(other, |a, b| a | b)
    }

    /// Slots in both `self` and `other`.
    pub fn intersection(&self, other: &SlotSet) -> SlotSet {
        self.zip_with(other, |a, b| a & b)
    }

    /// Slots in `self` but not in `other`.
    pub fn difference(&self, other: &SlotSet) -> SlotSet {
        self.zip_with(other, |a, b| a & !b)
    }

    /// Whether the two sets share at least one slot.
    pub fn intersects(&self, other: &SlotSet) -> bool {
        self.bits
            .iter()
            .zip(other.bits.iter())
            .any(|(a, b)| a & b != 0)
    }

    /// Whether every slot of `self` is in `other`.
    pub fn is_subset(&self, other: &SlotSet) -> bool {
        self.bits
            .iter()
            .zip(other.bits.iter())
            .all(|(a, b)| a & !b == 0)
    }

    fn zip_with(&self, other: &SlotSet, f: impl Fn(u8, u8) -> u8) -> SlotSet {
        let mut out = SlotSet::new();
        for (i, o) in out.bits.iter_mut().enumerate() {
            *o = f(self.bits[i], other.bits[i]);
            out.len += o.count_ones() as u16;
        }
        out
    }
}

impl FromIterator<Slot> for SlotSet {
    fn from_iter<I: IntoIterator<Item = Slot>>(iter: I) -> SlotSet {
        let mut s = SlotSet::new();
        s.extend(iter);
        s
    }
}

impl Extend<Slot> for SlotSet {
    fn extend<I: IntoIterator<Item = Slot>>(&mut self, iter: I) {
        for slot in iter {
            self.insert(slot);
        }
    }
}

impl<'a> IntoIterator for &'a SlotSet {
    type Item = Slot;
    type IntoIter = SlotSetIter<'a>;
    fn into_iter(self) -> SlotSetIter<'a> {
        self.iter()
    }
}

impl fmt::Debug for SlotSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SlotSet[{}]", crate::format_slot_ranges(self.ranges()))
    }
}

fn locate(slot: Slot) -> (usize, u8) {
    let j = slot.index();
    (j >> 3, 1u8 << (j & 7))
}

/// Iterator over the slots of a [`SlotSet`], ascending. Skips empty 64-slot words.
#[derive(Debug, Clone)]
pub struct SlotSetIter<'a> {
    set: &'a SlotSet,
    next: usize,
}

impl Iterator for SlotSetIter<'_> {
    type Item = Slot;
    fn next(&mut self) -> Option<Slot> {
        while self.next < SLOT_COUNT {
            let word_idx = self.next / 64;
            let start = word_idx * 8;
            // A slice of exactly 8 bytes: the conversion cannot fail.
            let word = u64::from_le_bytes(self.set.bits[start..start + 8].try_into().expect("8"));
            let masked = word & (!0u64 << (self.next % 64));
            if masked == 0 {
                self.next = (word_idx + 1) * 64;
                continue;
            }
            let j = word_idx * 64 + masked.trailing_zeros() as usize;
            self.next = j + 1;
            return Some(Slot::from_masked(j as u16));
        }
        None
    }
}

/// Iterator over the maximal runs of consecutive slots of a [`SlotSet`].
#[derive(Debug, Clone)]
pub struct SlotRanges<'a> {
    iter: SlotSetIter<'a>,
    pending: Option<Slot>,
}

impl Iterator for SlotRanges<'_> {
    type Item = SlotRange;
    fn next(&mut self) -> Option<SlotRange> {
        let start = self.pending.take().or_else(|| self.iter.next())?;
        let mut end = start;
        for s in self.iter.by_ref() {
            if s.get() == end.get() + 1 {
                end = s;
            } else {
                self.pending = Some(s);
                break;
            }
        }
        Some(SlotRange::new_unchecked(start, end))
    }
}

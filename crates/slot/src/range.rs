//! Slot ranges and their text forms (`0-5460`, `10923`, space separated), as CLUSTER NODES and
//! nodes.conf write them (facts sheet §18.1, §19.1).

use crate::{Slot, SlotError};
use std::fmt;

/// An inclusive range of slots, `start <= end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SlotRange {
    start: Slot,
    end: Slot,
}

impl SlotRange {
    /// The range `start..=end`.
    ///
    /// # Errors
    /// [`SlotError::InvertedRange`] when `start > end`.
    pub fn new(start: Slot, end: Slot) -> Result<SlotRange, SlotError> {
        if start > end {
            return Err(SlotError::InvertedRange {
                start: start.get(),
                end: end.get(),
            });
        }
        Ok(SlotRange { start, end })
    }

    pub(crate) fn new_unchecked(start: Slot, end: Slot) -> SlotRange {
        debug_assert!(start <= end);
        SlotRange { start, end }
    }

    /// A range of one slot.
    pub fn single(slot: Slot) -> SlotRange {
        SlotRange {
            start: slot,
            end: slot,
        }
    }

    /// First slot.
    pub fn start(&self) -> Slot {
        self.start
    }

    /// Last slot (inclusive).
    pub fn end(&self) -> Slot {
        self.end
    }

    /// Number of slots, at least 1.
    pub fn len(&self) -> usize {
        self.end.index() - self.start.index() + 1
    }

    /// Always `false`: a range holds at least one slot. Present for API symmetry.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Whether `slot` lies in the range.
    pub fn contains(&self, slot: Slot) -> bool {
        self.start <= slot && slot <= self.end
    }

    /// The slots, ascending.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = Slot> {
        (self.start.get()..=self.end.get()).map(Slot::from_masked)
    }

    /// Parses `"N"` or `"N-M"` (both inclusive, `N <= M`).
    ///
    /// # Errors
    /// [`SlotError`] naming the bad number or the inverted range.
    pub fn parse(text: &str) -> Result<SlotRange, SlotError> {
        match text.split_once('-') {
            None => Ok(SlotRange::single(Slot::parse(text)?)),
            Some((a, b)) => SlotRange::new(Slot::parse(a)?, Slot::parse(b)?),
        }
    }
}

/// `"N"` for a single slot, `"N-M"` otherwise, as CLUSTER NODES prints it.
impl fmt::Display for SlotRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.start == self.end {
            write!(f, "{}", self.start)
        } else {
            write!(f, "{}-{}", self.start, self.end)
        }
    }
}

/// Parses a space-separated list of ranges (`"0-5460 10923"`). Empty text gives no ranges.
///
/// # Errors
/// The first malformed entry's [`SlotError`].
pub fn parse_slot_ranges(text: &str) -> Result<Vec<SlotRange>, SlotError> {
    text.split_ascii_whitespace()
        .map(SlotRange::parse)
        .collect()
}

/// Formats ranges space-separated, the inverse of [`parse_slot_ranges`].
///
/// ```
/// use ferrocluster_slot::{format_slot_ranges, parse_slot_ranges};
/// let r = parse_slot_ranges("0-5460 10923").unwrap();
/// assert_eq!(format_slot_ranges(r), "0-5460 10923");
/// ```
pub fn format_slot_ranges(ranges: impl IntoIterator<Item = SlotRange>) -> String {
    let mut out = String::new();
    for (i, r) in ranges.into_iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(&r.to_string());
    }
    out
}

//! Hash slots of Valkey Cluster.
//!
//! The key space is split into [`SLOT_COUNT`] (16384) hash slots. A key's slot is
//! CRC16/XMODEM of the key (or of its hash tag) masked to 14 bits: see [`key_hash_slot`]
//! (cluster spec "Key distribution model"; facts sheet `cluster-bus.md` §20.1).
//!
//! * [`Slot`]: a validated slot number, `0..16384`.
//! * [`SlotSet`]: a 16384-bit set whose bytes are exactly the bus `myslots` field
//!   (slot `j` is bit `j & 7` of byte `j / 8`).
//! * [`SlotRange`] and [`parse_slot_ranges`] / [`format_slot_ranges`]: the `0-5460 10923`
//!   text forms of CLUSTER NODES and nodes.conf.
//! * [`pattern_slot`]: the one slot a glob pattern is confined to, if any (KEYS/SCAN).
//! * [`SlotKey`]: a key with its slot computed once, carried from routing to the keyspace.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod crc;
mod hash;
mod range;
mod set;
mod slot_key;

pub use hash::{hash_tag, key_hash_slot, packed_short_key_slot, pattern_slot};
pub use range::{format_slot_ranges, parse_slot_ranges, SlotRange};
pub use set::{SlotRanges, SlotSet, SlotSetIter};
pub use slot_key::SlotKey;

use std::fmt;

/// Number of hash slots in a cluster: 16384 (`CLUSTER_SLOTS`, 14 bits).
pub const SLOT_COUNT: usize = 16384;

/// Errors for slot numbers and slot text that are out of range or malformed.
///
/// Every error leaves nothing changed: the functions that return it are pure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SlotError {
    /// A slot number not below 16384.
    #[error("slot {0} is out of range (0..16384)")]
    OutOfRange(u32),
    /// Text that is not a slot number (`"abc"`, `"-1"`, `""`).
    #[error("invalid slot number {0:?}")]
    NotANumber(String),
    /// A range whose start is after its end (`"10-5"`).
    #[error("invalid slot range {start}-{end}: start is after end")]
    InvertedRange {
        /// First slot as written.
        start: u16,
        /// Last slot as written.
        end: u16,
    },
}

/// A hash slot number, guaranteed to be below [`SLOT_COUNT`].
///
/// ```
/// use ferrocluster_slot::Slot;
/// let s = Slot::new(12182).unwrap();
/// assert_eq!(u16::from(s), 12182);
/// assert_eq!(s.to_string(), "12182");
/// assert!(Slot::new(16384).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Slot(u16);

impl Slot {
    /// The lowest slot, 0.
    pub const MIN: Slot = Slot(0);
    /// The highest slot, 16383.
    pub const MAX: Slot = Slot((SLOT_COUNT - 1) as u16);

    /// Validates a slot number.
    ///
    /// # Errors
    /// [`SlotError::OutOfRange`] when `n >= 16384`.
    pub const fn new(n: u16) -> Result<Slot, SlotError> {
        if (n as usize) < SLOT_COUNT {
            Ok(Slot(n))
        } else {
            Err(SlotError::OutOfRange(n as u32))
        }
    }

    /// Builds a slot from the low 14 bits of `n` (what `crc & 0x3FFF` does); never fails.
    pub const fn from_masked(n: u16) -> Slot {
        Slot(n & (SLOT_COUNT as u16 - 1))
    }

    /// The slot number as an index (`0..16384`), for tables indexed by slot.
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// The slot number.
    pub const fn get(self) -> u16 {
        self.0
    }

    /// Iterates over every slot, 0 to 16383 in order.
    pub fn all() -> impl DoubleEndedIterator<Item = Slot> + ExactSizeIterator {
        (0..SLOT_COUNT as u16).map(Slot)
    }

    /// Parses a decimal slot number as CLUSTER commands and nodes.conf write it.
    ///
    /// # Errors
    /// [`SlotError::NotANumber`] for anything but ASCII digits, [`SlotError::OutOfRange`]
    /// for numbers `>= 16384`.
    pub fn parse(text: &str) -> Result<Slot, SlotError> {
        if text.is_empty() || text.len() > 10 || !text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(SlotError::NotANumber(text.to_owned()));
        }
        // Unwrap-free: at most 10 digits fits in u64.
        let n: u64 = text
            .bytes()
            .fold(0u64, |acc, b| acc * 10 + u64::from(b - b'0'));
        if n >= SLOT_COUNT as u64 {
            return Err(SlotError::OutOfRange(u32::try_from(n).unwrap_or(u32::MAX)));
        }
        Ok(Slot(n as u16))
    }
}

impl From<Slot> for u16 {
    fn from(s: Slot) -> u16 {
        s.0
    }
}

impl From<Slot> for usize {
    fn from(s: Slot) -> usize {
        s.0 as usize
    }
}

impl TryFrom<u16> for Slot {
    type Error = SlotError;
    fn try_from(n: u16) -> Result<Slot, SlotError> {
        Slot::new(n)
    }
}

impl TryFrom<i64> for Slot {
    type Error = SlotError;
    fn try_from(n: i64) -> Result<Slot, SlotError> {
        match u16::try_from(n) {
            Ok(v) => Slot::new(v),
            Err(_) => Err(SlotError::OutOfRange(u32::try_from(n).unwrap_or(u32::MAX))),
        }
    }
}

impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

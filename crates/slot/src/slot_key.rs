//! [`SlotKey`]: a key together with its hash slot, computed once.
//!
//! Why: a cluster node computes a command's slot when it routes the command, and its keyspace
//! needs the same slot to pick the slot's table. Valkey computes it once per command and its
//! kvstore reuses it (`getKeySlot` returns the routed client's cached slot, and the kvstore
//! API takes the table index `didx`). A `SlotKey` carries the slot from routing to the store so
//! that it cannot disagree with the key: the only way to make one is [`SlotKey::new`].
//!
//! Keys of at most 16 bytes without `{` (the common case: `user:1000`, `key:999999`) take a
//! path without data-dependent branches: the key is read as one 128-bit big-endian number
//! (two overlapping 8-byte reads), checked for `{` with a word-wide byte test, and hashed
//! with [`crate::packed_short_key_slot`] (16 independent table lookups). Measured at 1M keys
//! in scattered order (the key bytes arrive late, from a cache miss): a slot function with
//! loops on the key length mispredicts as soon as lengths vary, and each mispredict throws
//! away the lookups queued behind it; this path costs about half. Longer keys and keys with
//! `{` take [`key_hash_slot`].

use crate::{key_hash_slot, packed_short_key_slot, Slot};

/// `0x01` in every byte of a `u128`.
const ONES: u128 = u128::MAX / 255;

/// A key and its hash slot ([`key_hash_slot`] of the key), made together by
/// [`SlotKey::new`].
///
/// ```
/// use ferrocluster_slot::{key_hash_slot, SlotKey};
/// let k = SlotKey::new(b"{user1000}.followers");
/// assert_eq!(k.slot(), key_hash_slot(b"user1000"));
/// assert_eq!(u16::from(k.slot()), 3443);
/// assert_eq!(k.key(), b"{user1000}.followers");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotKey<'k> {
    key: &'k [u8],
    slot: Slot,
}

impl<'k> SlotKey<'k> {
    /// The key with its slot: CRC16/XMODEM of the key or of its hash tag, `& 0x3FFF` (cluster
    /// spec "Keys hash tags"), equal to [`key_hash_slot`]`(key)` for every input.
    #[inline]
    pub fn new(key: &'k [u8]) -> SlotKey<'k> {
        let slot = match short_key_number(key) {
            Some(v) if !has_byte(v, b'{') => packed_short_key_slot(v),
            _ => key_hash_slot(key),
        };
        SlotKey { key, slot }
    }

    /// The key bytes.
    #[inline]
    pub fn key(&self) -> &'k [u8] {
        self.key
    }

    /// The key's hash slot.
    #[inline]
    pub fn slot(&self) -> Slot {
        self.slot
    }
}

/// Whether any byte of `v` equals `byte` (exact: the zero-byte test on `v ^ byte…`).
#[inline]
fn has_byte(v: u128, byte: u8) -> bool {
    let x = v ^ (ONES * u128::from(byte));
    x.wrapping_sub(ONES) & !x & (ONES << 7) != 0
}

/// The key as a big-endian number with zero bytes in front; `None` above 16 bytes.
#[inline]
fn short_key_number(key: &[u8]) -> Option<u128> {
    let len = key.len();
    if let (Some(first), Some(last)) = (key.first_chunk::<8>(), key.last_chunk::<8>()) {
        if len > 16 {
            return None;
        }
        // Two overlapping 8-byte reads; the shared bytes land on the same bit positions.
        let hi = u128::from(u64::from_be_bytes(*first)) << (8 * (len - 8));
        return Some(hi | u128::from(u64::from_be_bytes(*last)));
    }
    let mut b = [0u8; 8];
    b[8 - len..].copy_from_slice(key);
    Some(u128::from(u64::from_be_bytes(b)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn slot(key: &[u8]) -> u16 {
        u16::from(SlotKey::new(key).slot())
    }

    #[test]
    fn known_slots() {
        // CRC16/XMODEM check value of "123456789" is 0x31C3 (the CRC catalogue).
        assert_eq!(slot(b"123456789"), 0x31C3 & 0x3FFF);
        // CLUSTER KEYSLOT foo = 12182 (Redis docs and the captured vectors).
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"{user1000}.followers"), 3443);
        assert_eq!(slot(b""), 0);
    }

    #[test]
    fn matches_key_hash_slot_at_every_length() {
        for len in 0..=40usize {
            for seed in 0..50u32 {
                let key: Vec<u8> = (0..len)
                    .map(|i| (seed.wrapping_mul(2_654_435_761) >> (i % 24)) as u8 ^ i as u8)
                    .collect();
                assert_eq!(SlotKey::new(&key).slot(), key_hash_slot(&key), "{key:?}");
            }
        }
    }

    #[test]
    fn has_byte_is_exact() {
        for pos in 0..16 {
            let v = 0x7Bu128 << (8 * pos);
            assert!(has_byte(v, b'{'));
            assert!(!has_byte(v ^ (1 << (8 * pos)), b'{'));
        }
        assert!(!has_byte(0, b'{'));
    }

    proptest! {
        #[test]
        fn equals_key_hash_slot(key in proptest::collection::vec(
            prop_oneof![any::<u8>(), Just(b'{'), Just(b'}'), Just(0u8)], 0..24)) {
            prop_assert_eq!(SlotKey::new(&key).slot(), key_hash_slot(&key));
        }
    }
}

//! The hash slot of a key on the store's hot path: the same result as
//! [`ferrocluster_slot::key_hash_slot`] (CRC16/XMODEM of the hash tag, `& 0x3FFF`, facts sheet
//! D.1), computed without data-dependent branches for keys of at most 16 bytes.
//!
//! Why: a general slot function first searches the key for `{` and then loops over its
//! bytes, and loops whose trip count is the key length mispredict as soon as key lengths vary.
//! When the key's bytes arrive late (a cache miss, as in a server reading requests), the
//! mispredict flushes the lookups queued behind it; measured at 1M keys, it cost more than the
//! whole lookup of a plain hash map. Here a key of up to 16 bytes is read as one 128-bit
//! big-endian number (zero bytes in front), checked for `{` with a word-wide byte test, and
//! handed to [`ferrocluster_slot::packed_short_key_slot`] (16 independent table lookups, no
//! loop on the length). Keys longer than 16 bytes or containing `{` take `key_hash_slot`.

use ferrocluster_slot::{key_hash_slot, packed_short_key_slot};

/// `0x01` in every byte of a `u128`.
const ONES: u128 = u128::MAX / 255;

/// Whether any byte of `v` equals `byte` (exact: the classic zero-byte test on `v ^ byte…`).
#[inline]
pub(crate) fn has_byte(v: u128, byte: u8) -> bool {
    let x = v ^ (ONES * u128::from(byte));
    x.wrapping_sub(ONES) & !x & (ONES << 7) != 0
}

/// The key as a big-endian number (zero-padded in front), `None` above 16 bytes.
#[inline]
pub(crate) fn as_number(key: &[u8]) -> Option<u128> {
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

/// The slot index (0..16384) of `key`, equal to `key_hash_slot(key).index()` (the store gets
/// it through [`crate::keyhash::KeyHasher::probe`]).
#[cfg(test)]
pub(crate) fn slot_index(key: &[u8]) -> usize {
    match as_number(key) {
        Some(v) => slot_of_number(v, key),
        None => key_hash_slot(key).index(),
    }
}

/// The slot index of `key`, given `v = as_number(key)`.
#[inline]
pub(crate) fn slot_of_number(v: u128, key: &[u8]) -> usize {
    if has_byte(v, b'{') {
        return key_hash_slot(key).index();
    }
    packed_short_key_slot(v).index()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn crc16_xmodem_check_value_and_known_slots() {
        // CRC16/XMODEM check value of "123456789" is 0x31C3 (the CRC catalogue), so its slot
        // is 0x31C3 & 0x3FFF.
        assert_eq!(slot_index(b"123456789"), 0x31C3 & 0x3FFF);
        // CLUSTER KEYSLOT foo = 12182 (Redis docs; also in the slot crate's captured vectors).
        assert_eq!(slot_index(b"foo"), 12182);
        assert_eq!(slot_index(b"{user1000}.followers"), 3443);
        assert_eq!(slot_index(b""), 0);
    }

    #[test]
    fn matches_key_hash_slot_at_every_length() {
        for len in 0..=40usize {
            for seed in 0..50u32 {
                let key: Vec<u8> = (0..len)
                    .map(|i| (seed.wrapping_mul(2_654_435_761) >> (i % 24)) as u8 ^ i as u8)
                    .collect();
                assert_eq!(slot_index(&key), key_hash_slot(&key).index(), "{key:?}");
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
            prop_assert_eq!(slot_index(&key), key_hash_slot(&key).index());
        }
    }
}

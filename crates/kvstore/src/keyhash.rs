//! Hashing a key for the slot tables, and the one-time work of a lookup ([`Probe`]).
//!
//! Keys of at most 16 bytes (the common case) are read once as two little-endian words (two
//! overlapping 8-byte reads, the second shifted so that it holds bytes 8.. of the key) and
//! everything a lookup needs comes from those words without another pass over the bytes: the
//! table hash (one folded multiply of the two words with two seeds drawn from the store's
//! `BuildHasher` — the construction foldhash uses for short inputs) and, for keys that fit
//! inline, the form the stored key is compared with (the same two words). Longer keys use the
//! `BuildHasher` itself. The slot comes with the key ([`SlotKey`]), computed by the caller
//! (routing) or by the store's key-only methods. Why: at 1M keys a lookup waits on cache
//! misses, and the fewer instructions it issues around them the more lookups the CPU overlaps
//! (measured: per-byte loops over the key cost more than the whole lookup of a plain hash
//! map, and every instruction of the probe shows in the lookup rate).

use crate::key::INLINE_KEY_LEN;
use ferrocluster_slot::SlotKey;
use std::hash::BuildHasher;

/// The table hasher: the caller's `BuildHasher` plus two seeds drawn from it.
pub(crate) struct KeyHasher<S> {
    build: S,
    seeds: [u64; 2],
}

/// A key prepared for lookups: its slot, table hash and (if it fits inline) comparison words.
pub(crate) struct Probe<'k> {
    pub(crate) key: &'k [u8],
    pub(crate) slot: usize,
    pub(crate) hash: u64,
    /// For keys of at most [`INLINE_KEY_LEN`] bytes: [`short_words`] of the key.
    pub(crate) inline: Option<(u64, u64)>,
}

/// The 128-bit product of `a` and `b`, its halves XORed.
#[inline]
fn folded_multiply(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// A key of at most 16 bytes as two little-endian words: bytes 0..8 and bytes 8..16, each
/// zero-padded at the end (so byte `i` of the key is byte `i % 8` of word `i / 8`); `None`
/// above 16 bytes.
#[inline]
pub(crate) fn short_words(key: &[u8]) -> Option<(u64, u64)> {
    let len = key.len();
    if let (Some(first), Some(last)) = (key.first_chunk::<8>(), key.last_chunk::<8>()) {
        if len > 16 {
            return None;
        }
        // `last` holds bytes len-8..len; shifting out its first 16-len bytes leaves 8..len.
        let tail = u64::from_le_bytes(*last)
            .checked_shr(8 * (16 - len as u32))
            .unwrap_or(0);
        return Some((u64::from_le_bytes(*first), tail));
    }
    let mut b = [0u8; 8];
    b[..len].copy_from_slice(key);
    Some((u64::from_le_bytes(b), 0))
}

impl<S: BuildHasher> KeyHasher<S> {
    pub(crate) fn new(build: S) -> KeyHasher<S> {
        // Two fixed inputs (digits of pi); the hasher's own keying makes the seeds random
        // (or reproducible, for a seeded `BuildHasher`).
        let seeds = [
            build.hash_one(0x243F_6A88_85A3_08D3_u64),
            build.hash_one(0x1319_8A2E_0370_7344_u64),
        ];
        KeyHasher { build, seeds }
    }

    /// The table hash of a key of `len <= 16` bytes given as [`short_words`].
    #[inline]
    fn short_hash(&self, (head, tail): (u64, u64), len: usize) -> u64 {
        // `len` tells apart keys that differ only in trailing zero bytes (same words).
        folded_multiply(
            head ^ self.seeds[0],
            tail ^ self.seeds[1] ^ (len as u64).rotate_right(8),
        )
    }

    /// The table hash of `key`.
    #[inline]
    pub(crate) fn hash(&self, key: &[u8]) -> u64 {
        match short_words(key) {
            Some(w) => self.short_hash(w, key.len()),
            None => self.build.hash_one(key),
        }
    }

    /// Slot, hash and comparison form of `key`.
    #[inline]
    pub(crate) fn probe<'k>(&self, key: SlotKey<'k>) -> Probe<'k> {
        let slot = key.slot().index();
        let key = key.key();
        let len = key.len();
        match short_words(key) {
            Some(words) => Probe {
                key,
                slot,
                hash: self.short_hash(words, len),
                inline: (len <= INLINE_KEY_LEN).then_some(words),
            },
            None => Probe {
                key,
                slot,
                hash: self.build.hash_one(key),
                inline: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrocluster_slot::key_hash_slot;
    use hashbrown::DefaultHashBuilder;

    #[test]
    fn probe_agrees_with_hash_and_slot() {
        let h = KeyHasher::new(DefaultHashBuilder::default());
        for key in [
            &b""[..],
            b"a",
            b"\0a",
            b"a\0",
            b"key:1",
            b"{tag}x",
            b"exactly-8",
            b"exactly-14-byt",
            b"fifteen-bytes!!",
            b"sixteen-bytes!!!",
            b"a key longer than sixteen bytes",
        ] {
            let p = h.probe(SlotKey::new(key));
            assert_eq!(p.hash, h.hash(key));
            assert_eq!(p.slot, key_hash_slot(key).index());
            match p.inline {
                Some((head, tail)) => {
                    assert!(key.len() <= INLINE_KEY_LEN);
                    let mut bytes = head.to_le_bytes().to_vec();
                    bytes.extend_from_slice(&tail.to_le_bytes());
                    assert_eq!(&bytes[..key.len()], key);
                    assert!(bytes[key.len()..].iter().all(|&x| x == 0));
                }
                None => assert!(key.len() > INLINE_KEY_LEN),
            }
        }
        // Trailing zero bytes change the hash.
        assert_ne!(h.hash(b"a"), h.hash(b"a\0"));
    }

    #[test]
    fn short_words_at_every_length() {
        for len in 0..=17usize {
            let key: Vec<u8> = (1..=len as u8).collect();
            match short_words(&key) {
                Some((head, tail)) => {
                    let mut bytes = head.to_le_bytes().to_vec();
                    bytes.extend_from_slice(&tail.to_le_bytes());
                    assert_eq!(&bytes[..len], &key[..], "len {len}");
                    assert!(bytes[len..].iter().all(|&b| b == 0), "len {len}");
                }
                None => assert!(len > 16),
            }
        }
    }
}

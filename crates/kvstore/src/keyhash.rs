//! Hashing a key for the slot tables, and the one-time work of a lookup ([`Probe`]).
//!
//! Keys of at most 16 bytes (the common case) are read once as a 128-bit number
//! ([`crate::slot_of`]) and everything a lookup needs comes from that number without another
//! pass over the bytes: the slot (CRC16), the table hash (one folded multiply of the two
//! 64-bit halves with two seeds drawn from the store's `BuildHasher` — the construction
//! foldhash uses for short inputs), and, for keys that fit inline, the zero-padded bytes the
//! stored key is compared with as one fixed-size array. Longer keys use `key_hash_slot` and
//! the `BuildHasher` itself. Why: at 1M keys a lookup waits on cache misses, and the fewer
//! instructions it issues around them the more lookups the CPU overlaps (measured: per-byte
//! loops over the key cost more than the whole lookup of a plain hash map).

use crate::key::INLINE_KEY_LEN;
use crate::slot_of::{as_number, slot_of_number};
use ferrocluster_slot::key_hash_slot;
use std::hash::BuildHasher;

/// The table hasher: the caller's `BuildHasher` plus two seeds drawn from it.
pub(crate) struct KeyHasher<S> {
    build: S,
    seeds: [u64; 2],
}

/// A key prepared for lookups: its slot, table hash and (if it fits inline) padded bytes.
pub(crate) struct Probe<'k> {
    pub(crate) key: &'k [u8],
    pub(crate) slot: usize,
    pub(crate) hash: u64,
    /// The key followed by zero bytes, when it is at most [`INLINE_KEY_LEN`] bytes long.
    pub(crate) inline: Option<[u8; INLINE_KEY_LEN]>,
}

/// The 128-bit product of `a` and `b`, its halves XORed.
#[inline]
fn folded_multiply(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
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

    /// The table hash of a key of `len <= 16` bytes read as `v`.
    #[inline]
    fn short_hash(&self, v: u128, len: usize) -> u64 {
        // `len` tells apart keys that differ only in leading zero bytes (same `v`).
        folded_multiply(
            (v as u64) ^ self.seeds[0],
            ((v >> 64) as u64) ^ self.seeds[1] ^ (len as u64).rotate_right(8),
        )
    }

    /// The table hash of `key`.
    #[inline]
    pub(crate) fn hash(&self, key: &[u8]) -> u64 {
        match as_number(key) {
            Some(v) => self.short_hash(v, key.len()),
            None => self.build.hash_one(key),
        }
    }

    /// Slot, hash and comparison form of `key`.
    #[inline]
    pub(crate) fn probe<'k>(&self, key: &'k [u8]) -> Probe<'k> {
        let len = key.len();
        match as_number(key) {
            Some(v) => {
                let inline = if len <= INLINE_KEY_LEN {
                    // Left-align the key: its bytes first, then zeros (`len` 0 shifts out all).
                    let bytes = v
                        .checked_shl(8 * (16 - len as u32))
                        .unwrap_or(0)
                        .to_be_bytes();
                    bytes.first_chunk::<INLINE_KEY_LEN>().copied()
                } else {
                    None
                };
                Probe {
                    key,
                    slot: slot_of_number(v, key),
                    hash: self.short_hash(v, len),
                    inline,
                }
            }
            None => Probe {
                key,
                slot: key_hash_slot(key).index(),
                hash: self.build.hash_one(key),
                inline: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hashbrown::DefaultHashBuilder;

    #[test]
    fn probe_agrees_with_hash_and_slot() {
        let h = KeyHasher::new(DefaultHashBuilder::default());
        for key in [
            &b""[..],
            b"a",
            b"\0a",
            b"key:1",
            b"{tag}x",
            b"exactly-14-byt",
            b"fifteen-bytes!!",
            b"sixteen-bytes!!!",
            b"a key longer than sixteen bytes",
        ] {
            let p = h.probe(key);
            assert_eq!(p.hash, h.hash(key));
            assert_eq!(p.slot, key_hash_slot(key).index());
            match p.inline {
                Some(b) => {
                    assert!(key.len() <= INLINE_KEY_LEN);
                    assert_eq!(&b[..key.len()], key);
                    assert!(b[key.len()..].iter().all(|&x| x == 0));
                }
                None => assert!(key.len() > INLINE_KEY_LEN),
            }
        }
        // Leading zero bytes change the hash.
        assert_ne!(h.hash(b"a"), h.hash(b"\0a"));
    }
}

//! Key → slot hashing and the hash-tag and glob-pattern rules (facts sheet §20.1).

use crate::Slot;
use crc::{Crc, Table, CRC_16_XMODEM};

/// CRC16/XMODEM (poly 0x1021, init 0, no reflection, no final XOR; check value of
/// `"123456789"` is 0x31C3) with a slicing-by-16 table: 16 table lookups per 16 input bytes.
/// The tables (16 × 256 × 2 bytes = 8 KiB) are computed at compile time.
static XMODEM: Crc<u16, Table<16>> = Crc::<u16, Table<16>>::new(&CRC_16_XMODEM);

/// The bytes of `key` that decide its slot: the hash tag when there is one, else the key.
///
/// The rule is the cluster spec's (facts sheet §20.1): find the first `{`; if a `}` follows it
/// later and the bytes between are non-empty, only those bytes are hashed. Otherwise (no `{`,
/// no `}` after it, or `{}`) the whole key is hashed. Only the first `{` is considered.
///
/// ```
/// use ferrocluster_slot::hash_tag;
/// assert_eq!(hash_tag(b"{user1000}.following"), b"user1000");
/// assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
/// assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
/// assert_eq!(hash_tag(b"foo{bar}{zap}"), b"bar");
/// ```
pub fn hash_tag(key: &[u8]) -> &[u8] {
    let Some(open) = memchr(b'{', key) else {
        return key;
    };
    let rest = &key[open + 1..];
    match memchr(b'}', rest) {
        Some(close) if close > 0 => &rest[..close],
        _ => key,
    }
}

/// The hash slot of a key: CRC16/XMODEM of [`hash_tag`]`(key)`, `& 0x3FFF`.
///
/// Matches `CLUSTER KEYSLOT` on Redis 7.0 and Valkey 8.0 for every captured key
/// (`shared/vectors/*/text/keyslot.json`). The empty key hashes to slot 0.
///
/// ```
/// use ferrocluster_slot::key_hash_slot;
/// assert_eq!(u16::from(key_hash_slot(b"foo")), 12182);
/// assert_eq!(u16::from(key_hash_slot(b"{user1000}.followers")), 3443);
/// ```
pub fn key_hash_slot(key: &[u8]) -> Slot {
    Slot::from_masked(XMODEM.checksum(hash_tag(key)))
}

/// The single slot every key matching the glob `pattern` must hash to, or `None` when keys of
/// several slots can match (Valkey `patternHashSlot`; facts sheet §20.1 and kvstore D.4).
///
/// The pattern is scanned left to right:
/// * `*`, `?`, `[` or `\` met before a hash tag is complete → `None`;
/// * the first `{` opens a tag; a `}` right after it (empty tag) turns tag handling off for the
///   rest of the pattern;
/// * a `}` closing a non-empty tag → the slot of the tag's content (what follows is irrelevant);
/// * the end reached with no wildcard → the slot of the whole pattern (it names one key).
///
/// ```
/// use ferrocluster_slot::{key_hash_slot, pattern_slot};
/// assert_eq!(pattern_slot(b"{abc}*"), Some(key_hash_slot(b"abc")));
/// assert_eq!(pattern_slot(b"*{abc}"), None);
/// assert_eq!(pattern_slot(b"{a*c}"), None);
/// assert_eq!(pattern_slot(b"{a\\*bc}"), None);
/// assert_eq!(pattern_slot(b"plain"), Some(key_hash_slot(b"plain")));
/// ```
pub fn pattern_slot(pattern: &[u8]) -> Option<Slot> {
    let mut tag_start: Option<usize> = None;
    let mut tags_enabled = true;
    for (i, &b) in pattern.iter().enumerate() {
        match b {
            b'*' | b'?' | b'[' | b'\\' => return None,
            b'{' if tags_enabled && tag_start.is_none() => tag_start = Some(i + 1),
            b'}' if tags_enabled => {
                if let Some(start) = tag_start {
                    if i == start {
                        // `{}`: the tag is empty, so the whole key will be hashed.
                        tags_enabled = false;
                        tag_start = None;
                    } else {
                        return Some(Slot::from_masked(XMODEM.checksum(&pattern[start..i])));
                    }
                }
            }
            _ => {}
        }
    }
    Some(key_hash_slot(pattern))
}

/// Position of the first `needle` in `hay`. A plain loop: keys are short and the compiler
/// vectorises this well enough that a dependency is not worth it.
#[inline]
fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&b| b == needle)
}

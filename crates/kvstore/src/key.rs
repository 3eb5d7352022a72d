//! The stored form of a key: up to [`INLINE_KEY_LEN`] bytes inline, longer keys on the heap.

use crate::keyhash::Probe;

/// Keys up to this many bytes are stored inline in the table entry (no heap allocation).
pub const INLINE_KEY_LEN: usize = 14;

/// A key as the store keeps it: 16 bytes inline. Short keys (the common case: `user:1000`,
/// `key:999999`) need no allocation; longer ones sit behind one thin pointer, so the entry stays
/// 16 bytes either way.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum CompactKey {
    /// `len` bytes of `bytes` are the key.
    Inline {
        len: u8,
        bytes: [u8; INLINE_KEY_LEN],
    },
    /// A key longer than [`INLINE_KEY_LEN`] bytes.
    Heap(Box<Box<[u8]>>),
}

impl CompactKey {
    /// Copies `key` into its stored form.
    pub(crate) fn new(key: &[u8]) -> CompactKey {
        if key.len() <= INLINE_KEY_LEN {
            let mut bytes = [0u8; INLINE_KEY_LEN];
            bytes[..key.len()].copy_from_slice(key);
            // The length fits in u8: it is at most INLINE_KEY_LEN (14).
            CompactKey::Inline {
                len: key.len() as u8,
                bytes,
            }
        } else {
            CompactKey::Heap(Box::new(key.into()))
        }
    }

    /// The key bytes.
    #[inline]
    pub(crate) fn as_bytes(&self) -> &[u8] {
        match self {
            CompactKey::Inline { len, bytes } => &bytes[..usize::from(*len)],
            CompactKey::Heap(b) => b,
        }
    }

    /// Whether this is the key `probe` was made for. Inline keys compare as two words (the
    /// stored bytes are zero-padded, like the probe's [`crate::keyhash::short_words`]).
    #[inline]
    pub(crate) fn matches(&self, probe: &Probe<'_>) -> bool {
        match (self, &probe.inline) {
            (CompactKey::Inline { len, bytes }, Some(want)) => {
                usize::from(*len) == probe.key.len() && inline_words(bytes) == *want
            }
            (CompactKey::Inline { .. }, None) => false,
            (CompactKey::Heap(b), _) => b[..] == *probe.key,
        }
    }

    /// Heap bytes this key owns (0 when inline): the boxed slice header plus the bytes.
    pub(crate) fn heap_size(&self) -> usize {
        match self {
            CompactKey::Inline { .. } => 0,
            CompactKey::Heap(b) => std::mem::size_of::<Box<[u8]>>() + b.len(),
        }
    }
}

/// Inline key bytes as the two little-endian words of [`crate::keyhash::short_words`].
#[inline]
fn inline_words(bytes: &[u8; INLINE_KEY_LEN]) -> (u64, u64) {
    let mut head = [0u8; 8];
    head.copy_from_slice(&bytes[..8]);
    let mut tail = [0u8; 8];
    tail[..INLINE_KEY_LEN - 8].copy_from_slice(&bytes[8..]);
    (u64::from_le_bytes(head), u64::from_le_bytes(tail))
}

impl std::fmt::Debug for CompactKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", bytes::Bytes::copy_from_slice(self.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stays_sixteen_bytes() {
        assert_eq!(std::mem::size_of::<CompactKey>(), 16);
    }

    #[test]
    fn round_trips_at_the_inline_boundary() {
        for len in [0, 1, 13, 14, 15, 16, 100] {
            let key: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let k = CompactKey::new(&key);
            assert_eq!(k.as_bytes(), &key[..]);
            let inline = matches!(k, CompactKey::Inline { .. });
            assert_eq!(inline, len <= INLINE_KEY_LEN, "len {len}");
            assert_eq!(k.heap_size(), if inline { 0 } else { 16 + len });
        }
    }
}

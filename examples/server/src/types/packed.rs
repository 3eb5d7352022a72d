//! [`Packed`]: byte strings back to back in one heap block, each after its length as a
//! LEB128 varint (1 byte below 128 bytes, 2 below 16 KiB). The compact form of the
//! collections (Redis's listpack role): one allocation for the whole value, a few bytes of
//! overhead per element, linear scans (the collections keep it below their `*-max-listpack-*`
//! thresholds, so a scan stays within a few cache lines).
//!
//! Positions are byte offsets of an entry's length prefix, as [`Packed::iter_at`] returns
//! them; an offset is valid until the next change.

/// Byte strings in one block (see the module docs).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Packed {
    buf: Vec<u8>,
    len: u32,
}

/// Writes `n` as LEB128 into `out`.
pub fn put_varint(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Bytes of `n` as LEB128.
pub fn varint_len(mut n: usize) -> usize {
    let mut l = 1;
    while n >= 0x80 {
        n >>= 7;
        l += 1;
    }
    l
}

/// Reads a LEB128 varint at `pos`: (value, bytes used). The buffers are written by this
/// module only, so a varint is always complete; a cut one reads as what is there.
#[inline]
pub fn get_varint(buf: &[u8], pos: usize) -> (usize, usize) {
    let (mut n, mut shift, mut i) = (0usize, 0u32, pos);
    while let Some(&b) = buf.get(i) {
        n |= usize::from(b & 0x7f) << shift;
        i += 1;
        if b & 0x80 == 0 || shift >= 63 {
            break;
        }
        shift += 7;
    }
    (n, i - pos)
}

impl Packed {
    /// No entries.
    pub fn new() -> Packed {
        Packed::default()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Heap bytes held.
    pub fn heap_size(&self) -> usize {
        self.buf.capacity()
    }

    /// Appends an entry.
    pub fn push(&mut self, s: &[u8]) {
        self.buf.reserve_exact(varint_len(s.len()) + s.len());
        put_varint(&mut self.buf, s.len());
        self.buf.extend_from_slice(s);
        self.len += 1;
    }

    /// The entry at `pos` and the position of the next one.
    #[inline]
    pub fn get(&self, pos: usize) -> (&[u8], usize) {
        let (n, used) = get_varint(&self.buf, pos);
        let start = (pos + used).min(self.buf.len());
        let end = (start + n).min(self.buf.len());
        (&self.buf[start..end], end)
    }

    /// Removes `count` entries starting at `pos`.
    pub fn remove(&mut self, pos: usize, count: usize) {
        let mut end = pos;
        let mut removed = 0;
        while removed < count && end < self.buf.len() {
            end = self.get(end).1;
            removed += 1;
        }
        self.buf.drain(pos..end);
        self.len -= removed as u32;
        self.shrink();
    }

    /// Replaces the entry at `pos` with `s`.
    pub fn replace(&mut self, pos: usize, s: &[u8]) {
        let (old, end) = self.get(pos);
        if old.len() == s.len() {
            let start = end - s.len();
            self.buf[start..end].copy_from_slice(s);
            return;
        }
        let mut e = Vec::with_capacity(varint_len(s.len()) + s.len());
        put_varint(&mut e, s.len());
        e.extend_from_slice(s);
        self.buf.splice(pos..end, e);
        self.shrink();
    }

    fn shrink(&mut self) {
        if self.buf.capacity() > self.buf.len() + self.buf.len() / 4 + 16 {
            self.buf.shrink_to_fit();
        }
    }

    /// The entries in order.
    pub fn iter(&self) -> Iter<'_> {
        self.iter_at(0)
    }

    /// The entries from position `pos`, each with its position.
    pub fn iter_at(&self, pos: usize) -> Iter<'_> {
        Iter {
            packed: self,
            pos,
            left: usize::MAX,
        }
    }

    /// Position of the first entry equal to `s`, stepping `stride` entries at a time (2 for
    /// field/value pairs: only fields are compared).
    pub fn find(&self, s: &[u8], stride: usize) -> Option<usize> {
        let mut pos = 0;
        while pos < self.buf.len() {
            let (e, mut next) = self.get(pos);
            if e == s {
                return Some(pos);
            }
            for _ in 1..stride {
                next = self.get(next).1;
            }
            pos = next;
        }
        None
    }

    /// Position of entry number `index` (0-based), stepping from the start.
    pub fn position_of(&self, index: usize) -> Option<usize> {
        let mut pos = 0;
        for _ in 0..index {
            if pos >= self.buf.len() {
                return None;
            }
            pos = self.get(pos).1;
        }
        (pos < self.buf.len()).then_some(pos)
    }
}

impl std::fmt::Debug for Packed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.iter().map(|(_, e)| String::from_utf8_lossy(e)))
            .finish()
    }
}

/// Iterator over (position, entry).
#[derive(Clone)]
pub struct Iter<'a> {
    packed: &'a Packed,
    pos: usize,
    left: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (usize, &'a [u8]);
    #[inline]
    fn next(&mut self) -> Option<(usize, &'a [u8])> {
        if self.pos >= self.packed.buf.len() || self.left == 0 {
            return None;
        }
        let at = self.pos;
        let (e, next) = self.packed.get(at);
        self.pos = next;
        self.left = self.left.saturating_sub(1);
        Some((at, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn varints_round_trip() {
        for n in [0, 1, 127, 128, 16383, 16384, usize::MAX >> 1] {
            let mut b = Vec::new();
            put_varint(&mut b, n);
            assert_eq!(b.len(), varint_len(n));
            assert_eq!(get_varint(&b, 0), (n, b.len()));
        }
    }

    #[test]
    fn edits_keep_the_entries() {
        let mut p = Packed::new();
        p.push(b"a");
        p.push(&[7u8; 200]);
        p.push(b"c");
        assert_eq!(p.len(), 3);
        p.push(b"b");
        let pos = p.find(b"c", 1).unwrap();
        p.remove(pos, 1);
        p.push(b"c");
        let v: Vec<&[u8]> = p.iter().map(|(_, e)| e).collect();
        assert_eq!(v, vec![&b"a"[..], &[7u8; 200][..], b"b", b"c"]);
        let pos = p.position_of(1).unwrap();
        p.replace(pos, b"x");
        p.remove(0, 1);
        let v: Vec<&[u8]> = p.iter().map(|(_, e)| e).collect();
        assert_eq!(v, vec![&b"x"[..], b"b", b"c"]);
        assert_eq!(p.find(b"b", 2), None, "stride 2 compares entries 0, 2, ...");
        assert_eq!(p.find(b"c", 2), p.position_of(2));
        assert_eq!(p.position_of(3), None);
    }

    proptest! {
        #[test]
        fn behaves_like_a_vec(ops in proptest::collection::vec((0u8..4, 0usize..8, proptest::collection::vec(any::<u8>(), 0..300)), 0..40)) {
            let mut p = Packed::new();
            let mut model: Vec<Vec<u8>> = Vec::new();
            for (op, i, s) in ops {
                match op {
                    0 => { p.push(&s); model.push(s); }
                    2 if !model.is_empty() => {
                        let i = i % model.len();
                        let pos = p.position_of(i).unwrap();
                        p.remove(pos, 1); model.remove(i);
                    }
                    3 if !model.is_empty() => {
                        let i = i % model.len();
                        let pos = p.position_of(i).unwrap();
                        p.replace(pos, &s); model[i] = s;
                    }
                    _ => {}
                }
                let got: Vec<Vec<u8>> = p.iter().map(|(_, e)| e.to_vec()).collect();
                prop_assert_eq!(&got, &model);
                prop_assert_eq!(p.len(), model.len());
            }
        }
    }
}

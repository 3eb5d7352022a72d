//! The replication backlog: a bounded ring holding the newest bytes of the replication stream
//! (Valkey `repl-backlog-size`; `createReplicationBacklog`, `addReplyReplicationBacklog`).

use std::collections::VecDeque;

/// The last at most `capacity` bytes of the replication stream, addressed by replication
/// offset. Offsets follow Valkey: the primary's offset `O` counts every byte produced; the byte
/// numbered `n` (1-based) is the `n`-th byte; a PSYNC asks for the first byte it lacks,
/// `replica offset + 1`.
#[derive(Debug, Clone)]
pub struct Backlog {
    buf: VecDeque<u8>,
    capacity: usize,
    /// The stream offset of the last byte held (the primary's offset).
    end: u64,
}

impl Backlog {
    /// An empty backlog of `capacity` bytes whose stream is at `offset` (the next byte is
    /// `offset + 1`).
    pub fn new(capacity: usize, offset: u64) -> Backlog {
        Backlog {
            buf: VecDeque::new(),
            capacity,
            end: offset,
        }
    }

    /// Appends stream bytes, dropping the oldest beyond the capacity.
    pub fn append(&mut self, bytes: &[u8]) {
        self.end += bytes.len() as u64;
        if bytes.len() >= self.capacity {
            self.buf.clear();
            self.buf.extend(&bytes[bytes.len() - self.capacity..]);
            return;
        }
        let over = (self.buf.len() + bytes.len()).saturating_sub(self.capacity);
        self.buf.drain(..over);
        self.buf.extend(bytes);
    }

    /// Empties the backlog, keeping the offset.
    pub fn clear(&mut self) {
        self.buf.clear();
    }

    /// Empties the backlog and moves its stream to `offset`.
    pub fn reset(&mut self, offset: u64) {
        self.buf.clear();
        self.end = offset;
    }

    /// Changes the capacity (Valkey `resizeReplicationBacklog`), dropping the oldest bytes.
    pub fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity;
        let over = self.buf.len().saturating_sub(capacity);
        self.buf.drain(..over);
    }

    /// `repl_backlog_histlen`: bytes held.
    pub fn histlen(&self) -> u64 {
        self.buf.len() as u64
    }

    /// `repl_backlog_first_byte_offset`: the number of the oldest byte held (`end + 1` when
    /// empty).
    pub fn first_byte_offset(&self) -> u64 {
        self.end + 1 - self.histlen()
    }

    /// The stream offset of the newest byte.
    pub fn end_offset(&self) -> u64 {
        self.end
    }

    /// The capacity, bytes.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The bytes from byte number `from` (a PSYNC offset) to the end, or `None` when `from` is
    /// outside `[first_byte_offset, end + 1]` (Valkey `primaryTryPartialResynchronization`).
    pub fn since(&self, from: u64) -> Option<Vec<u8>> {
        if from < self.first_byte_offset() || from > self.end + 1 {
            return None;
        }
        let skip = (from - self.first_byte_offset()) as usize;
        Some(self.buf.iter().skip(skip).copied().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_keeps_the_newest_bytes() {
        let mut b = Backlog::new(4, 0);
        assert_eq!(b.first_byte_offset(), 1);
        assert_eq!(b.since(1), Some(vec![]));
        assert_eq!(b.since(2), None);
        b.append(b"abc");
        assert_eq!(b.since(1), Some(b"abc".to_vec()));
        b.append(b"def");
        assert_eq!(b.end_offset(), 6);
        assert_eq!(b.histlen(), 4);
        assert_eq!(b.first_byte_offset(), 3);
        assert_eq!(b.since(2), None);
        assert_eq!(b.since(3), Some(b"cdef".to_vec()));
        assert_eq!(b.since(7), Some(vec![]));
        assert_eq!(b.since(8), None);
        b.append(b"0123456");
        assert_eq!(b.since(10), Some(b"3456".to_vec()));
    }

    proptest::proptest! {
        #[test]
        fn matches_a_model(start in 0u64..1000, cap in 1usize..64, chunks in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..40), 0..20)) {
            let mut b = Backlog::new(cap, start);
            let mut all = Vec::new();
            for c in &chunks { b.append(c); all.extend_from_slice(c); }
            let end = start + all.len() as u64;
            proptest::prop_assert_eq!(b.end_offset(), end);
            let held = all.len().min(cap);
            for from in start..=end + 2 {
                let want = if from + (held as u64) > end && from <= end + 1 && from > start {
                    Some(all[(from - start - 1) as usize..].to_vec())
                } else { None };
                proptest::prop_assert_eq!(b.since(from), want);
            }
        }
    }
}

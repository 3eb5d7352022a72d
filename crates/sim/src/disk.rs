//! The simulated disk of one host: nodes.conf writes, fsync acknowledgements, and what a
//! crash leaves behind.
//!
//! The engine emits a Persist output (sequence number + whole file). The host writes it,
//! fsyncs, and acknowledges with `handle_persisted(seq)` (DESIGN.md, "Durability"). Between
//! the write and the acknowledgement a crash may keep or lose the write: the file is replaced
//! atomically, so after a crash it holds the last acknowledged contents or any one of the
//! unacknowledged newer writes. Only acknowledged writes survive for sure.

/// One host's nodes.conf on the simulated disk.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Disk {
    durable: Option<Vec<u8>>,
    durable_seq: Option<u64>,
    pending: Vec<(u64, Vec<u8>)>,
    writes: u64,
}

impl Disk {
    /// An empty disk (no nodes.conf yet).
    pub fn new() -> Disk {
        Disk::default()
    }

    /// A write arrived (not yet durable).
    pub fn write(&mut self, seq: u64, contents: Vec<u8>) {
        self.writes += 1;
        self.pending.push((seq, contents));
    }

    /// The fsync of every write up to `seq` completed: the newest of them becomes durable.
    /// Returns `false` if no pending write has a sequence number ≤ `seq`.
    pub fn ack(&mut self, seq: u64) -> bool {
        let Some(last) = self.pending.iter().rposition(|(s, _)| *s <= seq) else {
            return false;
        };
        let mut acked: Vec<_> = self.pending.drain(..=last).collect();
        if let Some((s, contents)) = acked.pop() {
            self.durable = Some(contents);
            self.durable_seq = Some(s);
        }
        true
    }

    /// The host crashed. `keep` unacknowledged writes (counted from the oldest) made it to the
    /// platter before the crash; `keep` is clamped to the number pending. Returns how many
    /// were kept. The file is then the newest kept write, or the durable one if none was kept.
    pub fn crash(&mut self, keep: usize) -> usize {
        let keep = keep.min(self.pending.len());
        if keep > 0 {
            let (s, contents) = self.pending.swap_remove(keep - 1);
            self.durable = Some(contents);
            self.durable_seq = Some(s);
        }
        self.pending.clear();
        keep
    }

    /// The file a restarted engine reads (`None` before the first durable write).
    pub fn contents(&self) -> Option<&[u8]> {
        self.durable.as_deref()
    }

    /// Sequence number of the write the file holds, if any (valid within one incarnation).
    pub fn durable_seq(&self) -> Option<u64> {
        self.durable_seq
    }

    /// Number of writes not yet acknowledged.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Writes received over the disk's life.
    pub fn writes(&self) -> u64 {
        self.writes
    }

    /// Erases the disk (a host replaced with an empty one).
    pub fn wipe(&mut self) {
        *self = Disk {
            writes: self.writes,
            ..Disk::default()
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_acknowledged_writes_survive_a_crash_that_keeps_nothing() {
        let mut d = Disk::new();
        d.write(1, b"one".to_vec());
        assert!(d.ack(1));
        d.write(2, b"two".to_vec());
        d.write(3, b"three".to_vec());
        assert_eq!(d.crash(0), 0);
        assert_eq!(d.contents(), Some(&b"one"[..]));
    }

    #[test]
    fn a_crash_may_keep_unacknowledged_writes_in_order() {
        let mut d = Disk::new();
        d.write(1, b"one".to_vec());
        d.write(2, b"two".to_vec());
        d.write(3, b"three".to_vec());
        assert_eq!(d.crash(2), 2);
        assert_eq!(d.contents(), Some(&b"two"[..]));
        assert_eq!(d.pending_len(), 0);
    }

    #[test]
    fn ack_is_cumulative() {
        let mut d = Disk::new();
        d.write(1, b"one".to_vec());
        d.write(2, b"two".to_vec());
        d.write(5, b"five".to_vec());
        assert!(d.ack(2));
        assert_eq!(d.contents(), Some(&b"two"[..]));
        assert_eq!(d.pending_len(), 1);
        assert!(!d.ack(1));
        assert!(d.ack(9));
        assert_eq!(d.contents(), Some(&b"five"[..]));
        assert_eq!(d.crash(3), 0);
        assert_eq!(d.contents(), Some(&b"five"[..]));
    }
}

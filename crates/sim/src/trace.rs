//! The trace hash: one 64-bit digest of every event the simulator delivered, in order.
//!
//! Two runs from the same seed must produce the same trace hash (the determinism test checks
//! it); a different hash from the same seed means something outside the seed leaked into the
//! run (a clock read, `HashMap` iteration order, global randomness).

/// FNV-1a (64-bit) over a sequence of fields. FNV is used because its output is fixed by its
/// definition, unlike `std`'s `DefaultHasher`, whose algorithm may change between releases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceHash {
    state: u64,
    events: u64,
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

impl Default for TraceHash {
    fn default() -> Self {
        TraceHash::new()
    }
}

impl TraceHash {
    /// An empty trace.
    pub const fn new() -> TraceHash {
        TraceHash {
            state: FNV_OFFSET,
            events: 0,
        }
    }

    /// Mixes raw bytes.
    pub fn bytes(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.state ^= u64::from(b);
            self.state = self.state.wrapping_mul(FNV_PRIME);
        }
    }

    /// Mixes a number (8 bytes, little-endian).
    pub fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }

    /// Starts a new event: mixes its time and a kind tag and counts it.
    pub fn event(&mut self, at_ms: u64, kind: u8) {
        self.events += 1;
        self.u64(at_ms);
        self.bytes(&[kind]);
    }

    /// The digest so far.
    pub const fn digest(&self) -> u64 {
        self.state
    }

    /// Number of events mixed in.
    pub const fn events(&self) -> u64 {
        self.events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_reference_values() {
        // Published FNV-1a 64 test vectors: "" and "a".
        let t = TraceHash::new();
        assert_eq!(t.digest(), 0xcbf2_9ce4_8422_2325);
        let mut t = TraceHash::new();
        t.bytes(b"a");
        assert_eq!(t.digest(), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn order_matters() {
        let mut a = TraceHash::new();
        a.event(1, 1);
        a.event(2, 2);
        let mut b = TraceHash::new();
        b.event(2, 2);
        b.event(1, 1);
        assert_ne!(a.digest(), b.digest());
        assert_eq!(a.events(), 2);
    }
}

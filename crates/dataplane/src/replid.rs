//! Replication IDs (Valkey `changeReplicationId`: 40 random hex characters).

use rand_core::RngCore;
use std::fmt;

/// A replication ID: 40 characters (Valkey `CONFIG_RUN_ID_SIZE`), compared without regard to
/// ASCII case as Valkey does (`strcasecmp`). Ours are lowercase hex from the seeded RNG.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReplId([u8; 40]);

impl ReplId {
    /// The cleared ID Valkey shows as `master_replid2` when there is no second history
    /// (`clearReplicationId2`): forty `0`.
    pub const ZERO: ReplId = ReplId([b'0'; 40]);

    /// Parses 40 printable, non-space ASCII characters; `None` otherwise.
    pub fn parse(b: &[u8]) -> Option<ReplId> {
        let arr: [u8; 40] = b.try_into().ok()?;
        arr.iter()
            .all(|c| c.is_ascii_graphic())
            .then_some(ReplId(arr))
    }

    /// A fresh random ID (lowercase hex).
    pub fn random(rng: &mut impl RngCore) -> ReplId {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut raw = [0u8; 20];
        rng.fill_bytes(&mut raw);
        let mut id = [0u8; 40];
        for (i, b) in raw.iter().enumerate() {
            id[2 * i] = HEX[usize::from(b >> 4)];
            id[2 * i + 1] = HEX[usize::from(b & 15)];
        }
        ReplId(id)
    }

    /// The 40 bytes.
    pub fn as_bytes(&self) -> &[u8; 40] {
        &self.0
    }

    /// The text (always ASCII).
    pub fn as_str(&self) -> &str {
        // Constructed from ASCII only (parse checks, random writes hex).
        std::str::from_utf8(&self.0).unwrap_or("")
    }

    /// Valkey's comparison: equal ignoring ASCII case.
    pub fn matches(&self, other: &[u8]) -> bool {
        self.0.eq_ignore_ascii_case(other)
    }
}

impl fmt::Display for ReplId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for ReplId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ReplId({})", self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::SeedableRng;

    #[test]
    fn random_is_hex_and_seeded() {
        let mut a = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut b = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let x = ReplId::random(&mut a);
        assert_eq!(x, ReplId::random(&mut b));
        assert!(x.as_str().bytes().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(ReplId::parse(x.as_bytes()), Some(x));
        assert!(x.matches(x.as_str().to_ascii_uppercase().as_bytes()));
        assert_eq!(ReplId::parse(b"short"), None);
        assert_eq!(ReplId::parse(&[b' '; 40]), None);
    }
}

//! Node IDs and shard IDs: 40 characters from `a-z0-9` (facts sheet §1.1).

use rand_core::RngCore;
use std::fmt;

/// Length of a node ID or shard ID in characters (and bytes): 40 (`CLUSTER_NAMELEN`).
pub const ID_LEN: usize = 40;

/// Why a piece of text or a wire field is not a valid node ID / shard ID (§1.1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdError {
    /// Not exactly 40 bytes long.
    #[error("an ID must be 40 characters, got {0}")]
    Length(usize),
    /// A byte outside `a-z0-9` at the given position (0-based).
    #[error("invalid character {byte:#04x} at position {pos} in an ID (allowed: a-z 0-9)")]
    Character {
        /// Position of the first offending byte.
        pos: usize,
        /// The offending byte.
        byte: u8,
    },
}

fn check(bytes: &[u8]) -> Result<[u8; ID_LEN], IdError> {
    let arr: [u8; ID_LEN] = bytes.try_into().map_err(|_| IdError::Length(bytes.len()))?;
    if let Some(pos) = arr
        .iter()
        .position(|b| !(b.is_ascii_lowercase() || b.is_ascii_digit()))
    {
        return Err(IdError::Character {
            pos,
            byte: arr[pos],
        });
    }
    Ok(arr)
}

fn random_hex<R: RngCore + ?Sized>(rng: &mut R) -> [u8; ID_LEN] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut raw = [0u8; ID_LEN / 2];
    rng.fill_bytes(&mut raw);
    let mut out = [0u8; ID_LEN];
    for (i, b) in raw.iter().enumerate() {
        out[2 * i] = HEX[usize::from(b >> 4)];
        out[2 * i + 1] = HEX[usize::from(b & 0x0f)];
    }
    out
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name([u8; ID_LEN]);

        impl $name {
            /// Validates 40 bytes from `a-z0-9` (a bus `sender`/`name` field, a nodes.conf
            /// field, a command argument). Comparison is case-sensitive, as in the node table.
            ///
            /// # Errors
            /// [`IdError::Length`] unless exactly 40 bytes; [`IdError::Character`] for any byte
            /// outside `a-z0-9` (uppercase included: V8 rejects it, §1.1).
            pub fn from_bytes(bytes: &[u8]) -> Result<Self, IdError> {
                check(bytes).map($name)
            }

            /// Same as [`Self::from_bytes`] for text.
            ///
            /// # Errors
            /// As [`Self::from_bytes`].
            pub fn parse(text: &str) -> Result<Self, IdError> {
                Self::from_bytes(text.as_bytes())
            }

            /// A fresh random ID: 20 bytes from `rng` written as 40 lowercase hex digits, as
            /// Valkey's `getRandomHexChars` does for new nodes, handshake nodes and shards.
            pub fn random<R: RngCore + ?Sized>(rng: &mut R) -> Self {
                $name(random_hex(rng))
            }

            /// The 40 ASCII bytes (the bus wire form).
            pub const fn as_bytes(&self) -> &[u8; ID_LEN] {
                &self.0
            }

            /// The ID as text.
            pub fn as_str(&self) -> &str {
                // Unwrap-free: construction guarantees ASCII; the fallback is unreachable.
                std::str::from_utf8(&self.0).unwrap_or("")
            }

            /// Case-insensitive comparison with arbitrary text, as the FORGET blacklist
            /// compares IDs (§1.1, §16). `false` for text of another length.
            pub fn eq_ignore_ascii_case(&self, text: &[u8]) -> bool {
                self.0.eq_ignore_ascii_case(text)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({})"), self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = IdError;
            fn from_str(s: &str) -> Result<Self, IdError> {
                Self::parse(s)
            }
        }
    };
}

id_type!(
    /// A node's 40-character name (`a-z0-9`; generated ones are lowercase hex), facts sheet
    /// §1.1. `Copy`, ordered bytewise; the node table compares it case-sensitively.
    ///
    /// ```
    /// use ferrocluster_topology::NodeId;
    /// let id = NodeId::parse("e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca").unwrap();
    /// assert_eq!(id.to_string(), "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca");
    /// assert!(NodeId::parse("E7D1EECCE10FD6BB5EB35B9F99A514335D9BA9CA").is_err());
    /// assert!(id.eq_ignore_ascii_case(b"E7D1EECCE10FD6BB5EB35B9F99A514335D9BA9CA"));
    /// ```
    NodeId
);

id_type!(
    /// A shard's 40-character ID (V72+; same alphabet as [`NodeId`]). Primaries and their
    /// replicas share one (§1.1: a replica adopts its primary's shard ID).
    ShardId
);

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::rand_core::SeedableRng;

    #[test]
    fn random_ids_are_lowercase_hex_and_valid() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let a = NodeId::random(&mut rng);
        let b = NodeId::random(&mut rng);
        assert_ne!(a, b);
        assert!(a
            .as_str()
            .bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_eq!(NodeId::parse(a.as_str()), Ok(a));
        let s = ShardId::random(&mut rng);
        assert_eq!(s.as_str().len(), ID_LEN);
    }

    #[test]
    fn letters_beyond_f_are_accepted_uppercase_is_not() {
        // §1.1: V8 accepts a-z, not only hex.
        assert!(NodeId::parse("zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz").is_ok());
        assert_eq!(
            NodeId::parse("Azzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"),
            Err(IdError::Character { pos: 0, byte: b'A' })
        );
        assert_eq!(NodeId::parse("abc"), Err(IdError::Length(3)));
        assert!(NodeId::from_bytes(&[0u8; 40]).is_err());
    }
}

//! CRC-64/REDIS (Jones polynomial `0xad93d23594c935a9`, reflected, init 0, no final xor):
//! the checksum of RDB files and DUMP payloads (Valkey `src/crc64.c`, `crc64(0, p, len)`).
//!
//! The `crc-fast` crate computes it with carry-less multiplication (PCLMULQDQ / PMULL) and
//! falls back to tables elsewhere; `benches/benches/rdb_codec.rs` compares it with the
//! `crc` crate's table-driven `CRC_64_REDIS` (same parameters).

use crc_fast::{CrcAlgorithm, Digest};

/// A running CRC-64/REDIS over bytes given in any number of pieces.
#[derive(Clone)]
pub struct Crc64 {
    digest: Digest,
}

impl Crc64 {
    /// A checksum over no bytes yet.
    pub fn new() -> Crc64 {
        Crc64 {
            digest: Digest::new(CrcAlgorithm::Crc64Redis),
        }
    }

    /// Adds `bytes` to the checksum.
    #[inline]
    pub fn update(&mut self, bytes: &[u8]) {
        if !bytes.is_empty() {
            self.digest.update(bytes);
        }
    }

    /// The checksum of every byte added so far.
    pub fn value(&self) -> u64 {
        self.digest.finalize()
    }
}

impl Default for Crc64 {
    fn default() -> Crc64 {
        Crc64::new()
    }
}

impl std::fmt::Debug for Crc64 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Crc64({:#018x})", self.value())
    }
}

/// CRC-64/REDIS of `bytes` in one call.
pub fn crc64(bytes: &[u8]) -> u64 {
    let mut c = Crc64::new();
    c.update(bytes);
    c.value()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_value_of_the_catalogue_and_of_valkeys_crc64_test() {
        // Valkey src/crc64.c crc64Test: crc64(0, "123456789", 9) == 0xe9c6d914c4b8d9ca.
        assert_eq!(crc64(b"123456789"), 0xe9c6d914c4b8d9ca);
        let li = b"Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor \
incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation \
ullamco laboris nisi ut aliquip ex ea commodo consequat. Duis aute irure dolor in reprehenderit \
in voluptate velit esse cillum dolore eu fugiat nulla pariatur. Excepteur sint occaecat cupidatat \
non proident, sunt in culpa qui officia deserunt mollit anim id est laborum.\0";
        // Valkey crc64Test: the same text with its terminating NUL (`sizeof(li)`) gives
        // 0xc7794709e69683b3.
        assert_eq!(crc64(li), 0xc7794709e69683b3);
    }

    #[test]
    fn pieces_give_the_same_checksum() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        let whole = crc64(&data);
        for split in [0, 1, 7, 64, 1000, 4999, 5000] {
            let mut c = Crc64::new();
            c.update(&data[..split]);
            c.update(&data[split..]);
            assert_eq!(c.value(), whole, "split {split}");
        }
    }
}

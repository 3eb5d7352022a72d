//! CRC-64/REDIS (Jones polynomial `0xad93d23594c935a9`, reflected, init 0, no final xor):
//! the checksum of RDB files and DUMP payloads (Valkey `src/crc64.c`, `crc64(0, p, len)`).
//!
//! Two implementations of the same parameters, picked by length (`benches/benches/rdb_codec.rs`
//! `crc64/*`, one run: `crc-fast` 48 GiB/s over 64 KiB but 43 ns for 16 bytes; the `crc`
//! crate's slice-by-16 table 1.2 GiB/s and 7.7 ns): the `crc-fast` crate's carry-less
//! multiplication (PCLMULQDQ / PMULL, tables elsewhere) for files and streams, which are
//! checksummed in big pieces ([`Crc64`]), and the table for short one-shot inputs (DUMP
//! payloads of small values, [`crc64`]).

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

/// Below this many bytes the table is faster than the carry-less multiplication's set-up.
const TABLE_BELOW: usize = 512;

const TABLE: crc::Crc<u64, crc::Table<16>> =
    crc::Crc::<u64, crc::Table<16>>::new(&crc::CRC_64_REDIS);

/// CRC-64/REDIS of `bytes` in one call.
pub fn crc64(bytes: &[u8]) -> u64 {
    if bytes.len() < TABLE_BELOW {
        return TABLE.checksum(bytes);
    }
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
    fn both_implementations_agree_at_every_length() {
        let data: Vec<u8> = (0..2000u32).map(|i| (i * 131 + i / 3) as u8).collect();
        for n in (0..2000).step_by(7) {
            let mut c = Crc64::new();
            c.update(&data[..n]);
            assert_eq!(TABLE.checksum(&data[..n]), c.value(), "{n} bytes");
            assert_eq!(crc64(&data[..n]), c.value());
        }
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

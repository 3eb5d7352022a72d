//! CRC16/XMODEM, the checksum behind every hash slot, with two engines chosen by length.
//!
//! CRC16/XMODEM: poly 0x1021, init 0, no reflection, no final XOR; the check value of
//! `"123456789"` is 0x31C3 (facts sheet §20.1).
//!
//! * Inputs shorter than [`FOLD_MIN_LEN`] bytes (nearly every real key): slicing-by-16 tables
//!   from the `crc` crate, 16 table lookups per 16 input bytes, no set-up cost. The tables
//!   (16 × 256 × 2 bytes = 8 KiB) are computed at compile time.
//! * From [`FOLD_MIN_LEN`] bytes on: the `crc-fast` crate, which folds 128-bit (or 512-bit)
//!   blocks by carry-less multiplication (PCLMULQDQ / VPCLMULQDQ on x86_64, PMULL on aarch64),
//!   picked by runtime CPU feature detection, with its own table code on other CPUs. Using it
//!   keeps this crate free of `unsafe`.
//!
//! Why the split (criterion, x86_64 with AVX-512 on a shared 2-core machine, so ratios matter
//! more than absolute figures): `crc-fast` costs about 25 ns whatever the length below
//! 128 bytes (the table needs 11 ns for 64 bytes), draws level around 128-192 bytes, and is
//! ahead from 256 bytes on (39 vs 62 ns at 256, 44 vs 117 ns at 512, 1.6 µs vs 15 µs at
//! 64 KiB, i.e. about 39 GiB/s against 4 GiB/s).

use crc::{Crc, Table, CRC_16_XMODEM};
use crc_fast::CrcAlgorithm;

/// Length in bytes from which [`crc16_xmodem`] uses carry-less-multiply folding instead of
/// the slicing-by-16 tables (see the module docs for the measurement behind it).
pub(crate) const FOLD_MIN_LEN: usize = 256;

/// Slicing-by-16 CRC16/XMODEM tables, built at compile time.
static XMODEM: Crc<u16, Table<16>> = Crc::<u16, Table<16>>::new(&CRC_16_XMODEM);

/// CRC16/XMODEM of `bytes`: tables below [`FOLD_MIN_LEN`] bytes, folding from there on.
/// Both engines compute the same function; the choice only changes speed.
#[inline]
pub(crate) fn crc16_xmodem(bytes: &[u8]) -> u16 {
    if bytes.len() < FOLD_MIN_LEN {
        by_table(bytes)
    } else {
        by_folding(bytes)
    }
}

/// CRC16/XMODEM with slicing-by-16 tables (the short-input engine).
#[inline]
pub(crate) fn by_table(bytes: &[u8]) -> u16 {
    XMODEM.checksum(bytes)
}

/// CRC16/XMODEM by `crc-fast`'s carry-less-multiply folding (the long-input engine; on a CPU
/// without PCLMULQDQ/PMULL `crc-fast` falls back to tables of its own).
pub(crate) fn by_folding(bytes: &[u8]) -> u16 {
    // `crc-fast` returns every width as u64; a CRC-16 has its high 48 bits zero, so the cast
    // keeps the whole value.
    crc_fast::checksum(CrcAlgorithm::Crc16Xmodem, bytes) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes that are not a simple pattern (an LCG), so every lane of a folding engine sees
    /// different data.
    fn noise(len: usize) -> Vec<u8> {
        let mut x: u32 = 0x2545_F491;
        (0..len)
            .map(|_| {
                x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (x >> 24) as u8
            })
            .collect()
    }

    #[test]
    fn check_value() {
        // CRC-16/XMODEM catalogue check value.
        assert_eq!(by_table(b"123456789"), 0x31C3);
        assert_eq!(by_folding(b"123456789"), 0x31C3);
        assert_eq!(by_table(b""), 0);
        assert_eq!(by_folding(b""), 0);
    }

    #[test]
    fn folding_and_table_agree_at_every_length_and_offset() {
        // Every length up to 1100 (all block/tail splits of 16-, 64-, 128- and 256-byte
        // folding), then a stride up to 5000; each at several unaligned starts.
        let buf = noise(5000 + 64);
        let lengths = (0..=1100).chain((1101..=5000).step_by(37));
        for len in lengths {
            for offset in [0usize, 1, 3, 7, 8, 15, 16, 31, 33, 63] {
                let input = &buf[offset..offset + len];
                assert_eq!(
                    by_folding(input),
                    by_table(input),
                    "len {len}, offset {offset}"
                );
            }
        }
    }

    #[test]
    fn dispatch_is_exact_around_threshold() {
        let buf = noise(FOLD_MIN_LEN + 1);
        for len in [FOLD_MIN_LEN - 1, FOLD_MIN_LEN, FOLD_MIN_LEN + 1] {
            assert_eq!(
                crc16_xmodem(&buf[..len]),
                by_table(&buf[..len]),
                "len {len}"
            );
        }
    }
}

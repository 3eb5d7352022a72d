//! CRC16/XMODEM, the checksum behind every hash slot, with two engines chosen by length.
//!
//! CRC16/XMODEM: poly 0x1021, init 0, no reflection, no final XOR; the check value of
//! `"123456789"` is 0x31C3 (facts sheet §20.1).
//!
//! * Inputs shorter than [`FOLD_MIN_LEN`] bytes (nearly every real key): our own slicing
//!   tables ([`TABLES`], 16 × 256 × 2 bytes = 8 KiB, computed at compile time). 16-byte
//!   chunks take 16 independent lookups each, and the last 0..=15 bytes one more slice of
//!   independent lookups, so a key shorter than 16 bytes never pays a byte-by-byte dependency
//!   chain. No set-up cost per call.
//! * From [`FOLD_MIN_LEN`] bytes on: the `crc-fast` crate, which folds 128-bit (or 512-bit)
//!   blocks by carry-less multiplication (PCLMULQDQ / VPCLMULQDQ on x86_64, PMULL on aarch64),
//!   picked by runtime CPU feature detection, with its own table code on other CPUs. Using it
//!   keeps this crate free of `unsafe`.
//!
//! Measurements behind the split (criterion, x86_64 with AVX-512 on a shared, loaded 2-core
//! machine, so ratios matter more than absolute figures):
//! * `crc-fast` costs about 25 ns whatever the length below 128 bytes, where tables need
//!   11 ns for 64 bytes; the two draw level around 128-192 bytes, and `crc-fast` is ahead
//!   from 256 bytes on (39 vs 62 ns at 256, 44 vs 117 ns at 512, 1.6 µs vs 15 µs at 64 KiB,
//!   i.e. about 39 GiB/s against 4 GiB/s). Its cost also depends on the length's remainder
//!   modulo its block size: at 255 bytes it took 131 ns against 101 ns for slicing-by-16
//!   tables; from 256 bytes on it was at worst about level (84 vs 72 ns at 320) and ahead at
//!   every other length measured up to 1023 (e.g. 66 vs 134 ns at 700, 95 vs 180 ns at 1023).
//! * The `crc` crate's `Table<16>` (used before) handles a remainder under 16 bytes one
//!   dependent lookup per byte and re-reads its algorithm parameters on every call; with it,
//!   8-byte keys took 19-28 ns against 13-17 ns for the bytewise `crc16` crate. With the
//!   tables here they take 8-21 ns against 9-30 ns in the same runs (`benches/slot_hash.rs`).

use crc_fast::CrcAlgorithm;

/// Length in bytes from which [`crc16_xmodem`] uses carry-less-multiply folding instead of
/// the slicing tables (see the module docs for the measurement behind it).
pub(crate) const FOLD_MIN_LEN: usize = 256;

/// The CRC16/XMODEM generator polynomial without its x^16 term.
const POLY: u16 = 0x1021;

/// Slicing tables: `TABLES[k][b]` is the CRC register after byte `b` followed by `k` zero
/// bytes, starting from a zero register. `TABLES[0]` is the classic byte-at-a-time table.
/// 16 × 256 × 2 bytes = 8 KiB, computed at compile time.
static TABLES: [[u16; 256]; 16] = build_tables();

const fn build_tables() -> [[u16; 256]; 16] {
    let mut t = [[0u16; 256]; 16];
    let mut b = 0;
    while b < 256 {
        let mut crc = (b as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ POLY
            } else {
                crc << 1
            };
            bit += 1;
        }
        t[0][b] = crc;
        b += 1;
    }
    let mut k = 1;
    while k < 16 {
        let mut b = 0;
        while b < 256 {
            let prev = t[k - 1][b];
            t[k][b] = (prev << 8) ^ t[0][(prev >> 8) as usize];
            b += 1;
        }
        k += 1;
    }
    t
}

/// CRC16/XMODEM of a key of at most 16 bytes packed big-endian into `v` (zero bytes in front).
/// Leading zero bytes leave a CRC16/XMODEM register that starts at 0 unchanged, so the result
/// equals the CRC of the key itself. Byte `k` of `v`'s little-endian form is followed by `k`
/// key bytes, so it goes through table `k`: 16 independent lookups, no loop on the length.
#[inline]
pub(crate) fn by_packed(v: u128) -> u16 {
    let bytes = v.to_le_bytes();
    let mut crc = 0u16;
    for (table, &b) in TABLES.iter().zip(bytes.iter()) {
        crc ^= table[usize::from(b)];
    }
    crc
}

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

/// CRC16/XMODEM with slicing tables (the short-input engine): 16-byte chunks, then the last
/// 0..=15 bytes in one more slice. Every lookup of a slice is independent of the others, so
/// a short key costs about one load latency instead of one per byte.
#[inline]
pub(crate) fn by_table(bytes: &[u8]) -> u16 {
    let mut chunks = bytes.chunks_exact(16);
    let mut crc = 0u16;
    for chunk in &mut chunks {
        crc = slice(crc, chunk);
    }
    slice(crc, chunks.remainder())
}

/// Advances the register `crc` over `bytes` (at most 16 of them) with one lookup per byte.
///
/// For `n >= 2` bytes the 16-bit register is absorbed by the first two bytes, and byte `i`
/// is followed by `n - 1 - i` more, so the new register is the XOR of
/// `TABLES[n - 1 - i][byte i]` (the first two bytes XORed with the register's high and low
/// halves). One byte shifts the register by 8 bits instead.
#[inline(always)]
fn slice(crc: u16, bytes: &[u8]) -> u16 {
    let n = bytes.len();
    let [hi, lo] = crc.to_be_bytes();
    match bytes {
        [] => crc,
        [b] => (crc << 8) ^ TABLES[0][usize::from(hi ^ b)],
        [b0, b1, rest @ ..] => {
            // `& 15` keeps every index provably in range (n <= 16 by contract).
            let mut acc = TABLES[(n - 1) & 15][usize::from(hi ^ b0)]
                ^ TABLES[(n - 2) & 15][usize::from(lo ^ b1)];
            for (i, &b) in rest.iter().enumerate() {
                acc ^= TABLES[(n - 3 - i) & 15][usize::from(b)];
            }
            acc
        }
    }
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

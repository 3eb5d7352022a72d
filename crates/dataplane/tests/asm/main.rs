//! The ASM data plane (`AsmPlane`): replays of real Valkey 9.1.2 migrations through both sides
//! (`vectors`), our export against our import driven by the real control plane with writes
//! during the snapshot (`pair`), and the failure paths (`failures`).

mod db;
mod harness;
mod pair;
mod vectors;

use ferrocluster_dataplane::resp::{CommandReader, Item, ReaderLimits};

/// The commands of a byte stream, each with its raw length.
pub fn commands(bytes: &[u8]) -> Vec<(Vec<Vec<u8>>, usize)> {
    let mut r = CommandReader::new(ReaderLimits::default());
    r.push(bytes);
    let mut out = Vec::new();
    while let Some(item) = r.next_item().expect("a valid stream") {
        if let Item::Command(c) = item {
            out.push((c.argv, c.raw.len()));
        }
    }
    out
}

/// Splits `bytes` into chunks of seeded random sizes in `1..=max`.
pub fn chunks(bytes: &[u8], seed: u64, max: usize) -> Vec<&[u8]> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let n = 1 + (x as usize) % max;
        let end = (at + n).min(bytes.len());
        out.push(&bytes[at..end]);
        at = end;
    }
    out
}

//! Read sizes for the stream targets, from one seed byte: a small xorshift, mostly 1 to 64
//! bytes with one in four reads of 1 to 4096 bytes.

/// Deterministic read sizes from `seed`.
pub fn sizes(seed: u8) -> impl FnMut() -> usize {
    let mut x = u32::from(seed).wrapping_mul(0x9E37_79B9) | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let r = x as usize;
        if r % 4 == 0 {
            1 + r % 4096
        } else {
            1 + r % 64
        }
    }
}

//! Intset: the sorted integer array of small integer sets (`SET_INTSET`; Valkey
//! `src/intset.c`).
//!
//! ```text
//! <encoding u32 LE: 2, 4 or 8> <length u32 LE> <length integers of that width, LE, ascending>
//! ```

use crate::error::DecodeErrorKind;

/// The members of an intset, validated like `intsetValidateIntegrity` (deep): a known
/// width, a size that matches the count, at least one member, strictly ascending.
///
/// # Errors
/// [`DecodeErrorKind::BadIntset`] naming the check that failed.
pub fn members(is: &[u8]) -> Result<Vec<i64>, DecodeErrorKind> {
    let bad = |m| Err(DecodeErrorKind::BadIntset(m));
    if is.len() < 8 {
        return bad("shorter than its header");
    }
    let width = u32::from_le_bytes([is[0], is[1], is[2], is[3]]) as usize;
    if !matches!(width, 2 | 4 | 8) {
        return bad("unknown integer width");
    }
    let count = u32::from_le_bytes([is[4], is[5], is[6], is[7]]) as usize;
    if count.checked_mul(width).and_then(|n| n.checked_add(8)) != Some(is.len()) {
        return bad("size does not match the count");
    }
    if count == 0 {
        return bad("empty");
    }
    let mut out = Vec::with_capacity(count);
    for c in is[8..].chunks_exact(width) {
        let v = match width {
            2 => i64::from(i16::from_le_bytes([c[0], c[1]])),
            4 => i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            _ => {
                let mut a = [0u8; 8];
                a.copy_from_slice(c);
                i64::from_le_bytes(a)
            }
        };
        if out.last().is_some_and(|&p| p >= v) {
            return bad("members not strictly ascending");
        }
        out.push(v);
    }
    Ok(out)
}

/// The intset of `sorted` (strictly ascending) members, in the narrowest width that holds
/// them all (`intsetAdd` upgrades the same way).
pub fn encode(sorted: &[i64]) -> Vec<u8> {
    let (lo, hi) = (
        sorted.first().copied().unwrap_or(0),
        sorted.last().copied().unwrap_or(0),
    );
    let width: usize = if i16::try_from(lo).is_ok() && i16::try_from(hi).is_ok() {
        2
    } else if i32::try_from(lo).is_ok() && i32::try_from(hi).is_ok() {
        4
    } else {
        8
    };
    let mut out = Vec::with_capacity(8 + sorted.len() * width);
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(&(sorted.len() as u32).to_le_bytes());
    for &v in sorted {
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn valkeys_small_intset() {
        // DUMP of SADD si 1 2 3 on valkey-server 9.1.2 (after type 0x0b and length 14).
        let is = [2, 0, 0, 0, 3, 0, 0, 0, 1, 0, 2, 0, 3, 0];
        assert_eq!(members(&is).unwrap(), vec![1, 2, 3]);
        assert_eq!(encode(&[1, 2, 3]), is);
        assert!(members(&[2, 0, 0, 0, 2, 0, 0, 0, 2, 0, 1, 0]).is_err()); // descending
        assert!(members(&[2, 0, 0, 0, 0, 0, 0, 0]).is_err()); // empty
        assert!(members(&[3, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0]).is_err()); // width 3
    }

    proptest! {
        #[test]
        fn encode_then_decode_is_identity(mut v in proptest::collection::vec(any::<i64>(), 1..50), narrow: bool) {
            if narrow { v.iter_mut().for_each(|x| *x %= 30000); }
            v.sort_unstable();
            v.dedup();
            prop_assert_eq!(members(&encode(&v)).unwrap(), v);
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..60)) {
            let _ = members(&data);
        }
    }
}

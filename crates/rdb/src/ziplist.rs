//! Ziplist: the packed encoding of RDB 2..9 (`LIST_ZIPLIST`, `ZSET_ZIPLIST`, `HASH_ZIPLIST`,
//! quicklist v1 nodes; Valkey `src/ziplist.c`). Read for old files and payloads; our writers
//! never emit it ([`encode`] exists for tests and tools).
//!
//! ```text
//! <zlbytes u32 LE> <zltail u32 LE> <zllen u16 LE, 65535 = unknown> <entry>* 0xFF
//! entry = <prevlen: 1 byte < 254, or 0xFE + u32 LE> <encoding> <data>
//! 00pppppp | 01pppppp q | 0x80 <u32 BE>   string of that length
//! 0xC0 i16 | 0xD0 i32 | 0xE0 i64 | 0xF0 i24 | 0xFE i8 (LE) | 0xF1..=0xFD  immediate 0..=12
//! ```

use crate::error::DecodeErrorKind;
use crate::listpack::LpValue;
use crate::read::parse_canonical_int;

const HEADER: usize = 10;

/// The entries of a ziplist, validated like `ziplistValidateIntegrity` (deep): sizes, the
/// tail offset, every `prevlen`, the terminator and a known count.
///
/// # Errors
/// [`DecodeErrorKind::BadZiplist`] naming the check that failed.
pub fn entries(zl: &[u8]) -> Result<Vec<LpValue<'_>>, DecodeErrorKind> {
    let bad = |m| Err(DecodeErrorKind::BadZiplist(m));
    if zl.len() < HEADER + 1 {
        return bad("shorter than its header");
    }
    let zlbytes = u32::from_le_bytes([zl[0], zl[1], zl[2], zl[3]]) as usize;
    if zlbytes != zl.len() {
        return bad("header byte count differs from the blob length");
    }
    let tail = u32::from_le_bytes([zl[4], zl[5], zl[6], zl[7]]) as usize;
    let declared = u16::from_le_bytes([zl[8], zl[9]]);
    if zl[zl.len() - 1] != 0xff {
        return bad("no terminator");
    }
    let end = zl.len() - 1;
    let mut p = HEADER;
    let mut prev_len = 0usize;
    let mut last = HEADER;
    let mut out = Vec::new();
    while p < end {
        let start = p;
        let (prevlen, n) = if zl[p] < 254 {
            (usize::from(zl[p]), 1)
        } else {
            if zl[p] != 254 || p + 5 > end {
                return bad("bad prevlen");
            }
            (
                u32::from_le_bytes([zl[p + 1], zl[p + 2], zl[p + 3], zl[p + 4]]) as usize,
                5,
            )
        };
        if prevlen != prev_len {
            return bad("prevlen does not match the previous entry");
        }
        p += n;
        if p >= end {
            return bad("entry runs past the end");
        }
        let e = zl[p];
        let get = |from: usize, len: usize| -> Option<&[u8]> {
            let to = from.checked_add(len)?;
            (to <= end).then(|| &zl[from..to])
        };
        let (value, used) = match e >> 6 {
            0 => {
                let len = usize::from(e & 0x3f);
                match get(p + 1, len) {
                    Some(s) => (LpValue::Str(s), 1 + len),
                    None => return bad("string runs past the end"),
                }
            }
            1 => {
                let Some(x) = get(p + 1, 1) else {
                    return bad("entry runs past the end");
                };
                let len = (usize::from(e & 0x3f) << 8) | usize::from(x[0]);
                match get(p + 2, len) {
                    Some(s) => (LpValue::Str(s), 2 + len),
                    None => return bad("string runs past the end"),
                }
            }
            2 => {
                if e != 0x80 {
                    return bad("bad string encoding");
                }
                let Some(x) = get(p + 1, 4) else {
                    return bad("entry runs past the end");
                };
                let len = u32::from_be_bytes([x[0], x[1], x[2], x[3]]) as usize;
                match get(p + 5, len) {
                    Some(s) => (LpValue::Str(s), 5 + len),
                    None => return bad("string runs past the end"),
                }
            }
            _ => {
                let int_len = match e {
                    0xc0 => 2,
                    0xd0 => 4,
                    0xe0 => 8,
                    0xf0 => 3,
                    0xfe => 1,
                    0xf1..=0xfd => 0,
                    _ => return bad("bad integer encoding"),
                };
                let Some(x) = get(p + 1, int_len) else {
                    return bad("entry runs past the end");
                };
                let v = match e {
                    0xc0 => i64::from(i16::from_le_bytes([x[0], x[1]])),
                    0xd0 => i64::from(i32::from_le_bytes([x[0], x[1], x[2], x[3]])),
                    0xe0 => {
                        let mut a = [0u8; 8];
                        a.copy_from_slice(x);
                        i64::from_le_bytes(a)
                    }
                    0xf0 => i64::from(i32::from_le_bytes([0, x[0], x[1], x[2]]) >> 8),
                    0xfe => i64::from(x[0] as i8),
                    _ => i64::from(e & 0x0f) - 1,
                };
                (LpValue::Int(v), 1 + int_len)
            }
        };
        p += used;
        prev_len = p - start;
        last = start;
        out.push(value);
    }
    if p != end {
        return bad("entries do not end at the terminator");
    }
    if tail != last {
        return bad("tail offset does not point at the last entry");
    }
    if declared != u16::MAX && usize::from(declared) != out.len() {
        return bad("header element count differs from the entries");
    }
    Ok(out)
}

/// A ziplist of `items`, as `ziplistPush` builds one (strings shorter than 32 bytes that
/// are canonical integers as integers). For tests and tools.
pub fn encode<T: AsRef<[u8]>>(items: impl IntoIterator<Item = T>) -> Vec<u8> {
    let mut zl = vec![0u8; HEADER];
    let mut prev = 0usize;
    let mut last = HEADER;
    let mut count = 0usize;
    for item in items {
        let s = item.as_ref();
        let start = zl.len();
        last = start;
        if prev < 254 {
            zl.push(prev as u8);
        } else {
            zl.push(254);
            zl.extend_from_slice(&(prev as u32).to_le_bytes());
        }
        match (s.len() < 32).then(|| parse_canonical_int(s)).flatten() {
            Some(v) if (0..=12).contains(&v) => zl.push(0xf1 + v as u8),
            Some(v) if i8::try_from(v).is_ok() => zl.extend_from_slice(&[0xfe, v as u8]),
            Some(v) if i16::try_from(v).is_ok() => {
                zl.push(0xc0);
                zl.extend_from_slice(&(v as i16).to_le_bytes());
            }
            Some(v) if (-8388608..=8388607).contains(&v) => {
                zl.push(0xf0);
                zl.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
            }
            Some(v) if i32::try_from(v).is_ok() => {
                zl.push(0xd0);
                zl.extend_from_slice(&(v as i32).to_le_bytes());
            }
            Some(v) => {
                zl.push(0xe0);
                zl.extend_from_slice(&v.to_le_bytes());
            }
            None => {
                let n = s.len();
                if n < 64 {
                    zl.push(n as u8);
                } else if n < 16384 {
                    zl.extend_from_slice(&[0x40 | (n >> 8) as u8, n as u8]);
                } else {
                    zl.push(0x80);
                    zl.extend_from_slice(&(n as u32).to_be_bytes());
                }
                zl.extend_from_slice(s);
            }
        }
        prev = zl.len() - start;
        count += 1;
    }
    zl.push(0xff);
    let total = zl.len() as u32;
    zl[..4].copy_from_slice(&total.to_le_bytes());
    zl[4..8].copy_from_slice(&(last as u32).to_le_bytes());
    zl[8..10].copy_from_slice(&(count.min(65535) as u16).to_le_bytes());
    zl
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn item() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            any::<i64>().prop_map(|v| v.to_string().into_bytes()),
            (-20i64..20).prop_map(|v| v.to_string().into_bytes()),
            proptest::collection::vec(any::<u8>(), 0..80),
            proptest::collection::vec(any::<u8>(), 250..300),
            proptest::collection::vec(any::<u8>(), 16380..16400),
        ]
    }

    proptest! {
        #[test]
        fn encode_then_decode_is_identity(items in proptest::collection::vec(item(), 0..12)) {
            let zl = encode(&items);
            let back: Vec<Vec<u8>> = entries(&zl).unwrap().into_iter().map(LpValue::to_vec).collect();
            prop_assert_eq!(back, items);
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = entries(&data);
        }
    }

    #[test]
    fn truncations_and_flips_are_refused() {
        let good = encode([&b"hello"[..], b"7", b"-300", b"100000"]);
        for i in 0..good.len() {
            assert!(entries(&good[..i]).is_err(), "truncated to {i}");
        }
        let mut bad = good.clone();
        bad[10] = 9; // first prevlen must be 0
        assert!(entries(&bad).is_err());
        let mut bad = good;
        bad[4] ^= 1; // tail offset
        assert!(entries(&bad).is_err());
    }
}

//! Listpack: the packed encoding of small hashes, sets, sorted sets and list nodes
//! (Valkey `src/listpack.c`).
//!
//! ```text
//! <total bytes u32 LE> <element count u16 LE, 65535 = unknown> <entry>* 0xFF
//! entry = <encoding + data> <backlen: its length, 1..=5 bytes, read backwards>
//! 0xxxxxxx            7-bit unsigned int     10xxxxxx <data>    string, len < 64
//! 110xxxxx yyyyyyyy   13-bit signed int      1110xxxx yyyyyyyy <data>  string, len < 4096
//! 0xF0 <len u32 LE> <data>  string           0xF1/F2/F3/F4  16/24/32/64-bit signed int, LE
//! ```
//!
//! A string that is the canonical decimal form of an `i64` is stored as an integer
//! (`lpStringToInt64`), as the servers do.

use crate::error::DecodeErrorKind;
use crate::read::{parse_canonical_int, push_int_text};

/// One listpack element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LpValue<'a> {
    /// An integer entry.
    Int(i64),
    /// A string entry.
    Str(&'a [u8]),
}

impl LpValue<'_> {
    /// The element as the bytes a client sees (integers in decimal).
    pub fn to_vec(self) -> Vec<u8> {
        match self {
            LpValue::Str(s) => s.to_vec(),
            LpValue::Int(v) => {
                let mut out = Vec::with_capacity(20);
                push_int_text(&mut out, v);
                out
            }
        }
    }

    /// Appends the element's bytes to `out`.
    pub fn push_to(self, out: &mut Vec<u8>) {
        match self {
            LpValue::Str(s) => out.extend_from_slice(s),
            LpValue::Int(v) => push_int_text(out, v),
        }
    }
}

const HEADER: usize = 6;
const EOF: u8 = 0xff;
const COUNT_UNKNOWN: u16 = u16::MAX;

/// The entries of a listpack, validated as Valkey's deep `lpValidateIntegrity` does: the
/// header's byte count matches the blob, every entry and its back length stay inside it, each
/// back length matches its entry, the terminator ends it and a known element count is right.
///
/// # Errors
/// [`DecodeErrorKind::BadListpack`] naming the check that failed.
pub fn entries(lp: &[u8]) -> Result<Vec<LpValue<'_>>, DecodeErrorKind> {
    let mut out = Vec::new();
    for_each(lp, |v| {
        out.push(v);
        Ok(())
    })?;
    Ok(out)
}

/// Calls `f` for every entry of `lp`, in order, after validating it (see [`entries`]); stops
/// at the first error `f` returns.
///
/// # Errors
/// [`DecodeErrorKind::BadListpack`], or `f`'s error.
pub fn for_each<'a>(
    lp: &'a [u8],
    mut f: impl FnMut(LpValue<'a>) -> Result<(), DecodeErrorKind>,
) -> Result<usize, DecodeErrorKind> {
    let bad = |m| Err(DecodeErrorKind::BadListpack(m));
    if lp.len() < HEADER + 1 {
        return bad("shorter than its header");
    }
    let total = u32::from_le_bytes([lp[0], lp[1], lp[2], lp[3]]) as usize;
    if total != lp.len() {
        return bad("header byte count differs from the blob length");
    }
    let declared = u16::from_le_bytes([lp[4], lp[5]]);
    if lp[lp.len() - 1] != EOF {
        return bad("no terminator");
    }
    let end = lp.len() - 1;
    let mut p = HEADER;
    let mut count = 0usize;
    while p < end {
        let (value, len) = match entry_at(lp, p, end) {
            Some(e) => e,
            None => return bad("entry runs past the end"),
        };
        let backlen_len = backlen_size(len);
        let next = p + len + backlen_len;
        if next > end {
            return bad("back length runs past the end");
        }
        if decode_backlen(&lp[p + len..next]) != Some(len as u64) {
            return bad("back length does not match the entry");
        }
        f(value)?;
        count += 1;
        p = next;
    }
    if declared != COUNT_UNKNOWN && usize::from(declared) != count {
        return bad("header element count differs from the entries");
    }
    Ok(count)
}

/// The entry at `p` and the length of its encoding and data, if it ends before `end`.
#[inline]
fn entry_at(lp: &[u8], p: usize, end: usize) -> Option<(LpValue<'_>, usize)> {
    let b = lp[p];
    let get = |from: usize, n: usize| -> Option<&[u8]> {
        let to = from.checked_add(n)?;
        (to <= end).then(|| &lp[from..to])
    };
    if b & 0x80 == 0 {
        return Some((LpValue::Int(i64::from(b)), 1));
    }
    if b & 0xc0 == 0x80 {
        let n = usize::from(b & 0x3f);
        return Some((LpValue::Str(get(p + 1, n)?), 1 + n));
    }
    if b & 0xe0 == 0xc0 {
        let x = get(p + 1, 1)?;
        let u = (u16::from(b & 0x1f) << 8) | u16::from(x[0]);
        let v = if u >= 1 << 12 {
            i64::from(u) - (1 << 13)
        } else {
            i64::from(u)
        };
        return Some((LpValue::Int(v), 2));
    }
    if b & 0xf0 == 0xe0 {
        let x = get(p + 1, 1)?;
        let n = (usize::from(b & 0x0f) << 8) | usize::from(x[0]);
        return Some((LpValue::Str(get(p + 2, n)?), 2 + n));
    }
    match b {
        0xf0 => {
            let x = get(p + 1, 4)?;
            let n = u32::from_le_bytes([x[0], x[1], x[2], x[3]]) as usize;
            Some((LpValue::Str(get(p + 5, n)?), 5 + n))
        }
        0xf1 => {
            let x = get(p + 1, 2)?;
            Some((LpValue::Int(i64::from(i16::from_le_bytes([x[0], x[1]]))), 3))
        }
        0xf2 => {
            let x = get(p + 1, 3)?;
            let u = i32::from_le_bytes([0, x[0], x[1], x[2]]) >> 8;
            Some((LpValue::Int(i64::from(u)), 4))
        }
        0xf3 => {
            let x = get(p + 1, 4)?;
            Some((
                LpValue::Int(i64::from(i32::from_le_bytes([x[0], x[1], x[2], x[3]]))),
                5,
            ))
        }
        0xf4 => {
            let x = get(p + 1, 8)?;
            let mut a = [0u8; 8];
            a.copy_from_slice(x);
            Some((LpValue::Int(i64::from_le_bytes(a)), 9))
        }
        _ => None,
    }
}

/// `lpEncodeBacklenBytes`.
#[inline]
fn backlen_size(l: usize) -> usize {
    if l <= 127 {
        1
    } else if l < 16383 {
        2
    } else if l < 2097151 {
        3
    } else if l < 268435455 {
        4
    } else {
        5
    }
}

/// `lpDecodeBacklen` over the back-length bytes of one entry (read from the last).
#[inline]
fn decode_backlen(b: &[u8]) -> Option<u64> {
    let mut val = 0u64;
    let mut shift = 0;
    for &byte in b.iter().rev() {
        val |= u64::from(byte & 127) << shift;
        if byte & 128 == 0 {
            return Some(val);
        }
        shift += 7;
        if shift > 28 {
            return None;
        }
    }
    None
}

/// Builds a listpack entry by entry (`lpAppend`, `lpAppendInteger`).
#[derive(Debug, Clone)]
pub struct ListpackWriter {
    buf: Vec<u8>,
    count: usize,
}

impl Default for ListpackWriter {
    fn default() -> ListpackWriter {
        ListpackWriter::new()
    }
}

impl ListpackWriter {
    /// An empty listpack.
    pub fn new() -> ListpackWriter {
        ListpackWriter::with_capacity(64)
    }

    /// An empty listpack with room for `bytes`.
    pub fn with_capacity(bytes: usize) -> ListpackWriter {
        let mut buf = Vec::with_capacity(bytes.max(HEADER + 1));
        buf.extend_from_slice(&[0; HEADER]);
        ListpackWriter { buf, count: 0 }
    }

    /// Entries so far.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether no entry was added.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The listpack's size in bytes once finished.
    pub fn bytes(&self) -> usize {
        self.buf.len() + 1
    }

    /// Appends a string (as an integer entry when it is a canonical integer).
    #[inline]
    pub fn push(&mut self, s: &[u8]) {
        push_entry(&mut self.buf, s);
        self.count += 1;
    }

    /// Appends an integer entry (`lpEncodeIntegerGetType`).
    #[inline]
    pub fn push_int(&mut self, v: i64) {
        push_int_entry(&mut self.buf, v);
        self.count += 1;
    }

    /// The finished listpack (header filled in, terminator added).
    pub fn finish(mut self) -> Vec<u8> {
        self.buf.push(EOF);
        let total = self.buf.len() as u32;
        self.buf[..4].copy_from_slice(&total.to_le_bytes());
        let count = if self.count < usize::from(COUNT_UNKNOWN) {
            self.count as u16
        } else {
            COUNT_UNKNOWN
        };
        self.buf[4..6].copy_from_slice(&count.to_le_bytes());
        self.buf
    }
}

/// Appends one entry for string `s` to `buf` (as an integer entry when `s` is a canonical
/// decimal integer, `lpStringToInt64`): encoding, data and backlen, no header. Hosts that keep
/// listpack entries in their own buffers (a list node, a small hash) use this and
/// [`push_int_entry`] so their bytes are the servers' entries.
#[inline]
pub fn push_entry(buf: &mut Vec<u8>, s: &[u8]) {
    if s.len() <= 20 {
        if let Some(v) = parse_canonical_int(s) {
            return push_int_entry(buf, v);
        }
    }
    let start = buf.len();
    let n = s.len();
    if n < 64 {
        buf.push(0x80 | n as u8);
    } else if n < 4096 {
        buf.extend_from_slice(&[0xe0 | (n >> 8) as u8, n as u8]);
    } else {
        buf.push(0xf0);
        buf.extend_from_slice(&(n as u32).to_le_bytes());
    }
    buf.extend_from_slice(s);
    push_backlen(buf, start);
}

/// Appends one integer entry for `v` to `buf` (`lpEncodeIntegerGetType`: the smallest of the
/// 7/13/16/24/32/64-bit forms), with its backlen.
#[inline]
pub fn push_int_entry(buf: &mut Vec<u8>, v: i64) {
    let start = buf.len();
    if (0..=127).contains(&v) {
        buf.push(v as u8);
    } else if (-4096..=4095).contains(&v) {
        let u = if v < 0 { (1 << 13) + v } else { v } as u16;
        buf.extend_from_slice(&[0xc0 | (u >> 8) as u8, u as u8]);
    } else if (-32768..=32767).contains(&v) {
        buf.push(0xf1);
        buf.extend_from_slice(&(v as i16).to_le_bytes());
    } else if (-8388608..=8388607).contains(&v) {
        buf.push(0xf2);
        buf.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
    } else if (-2147483648..=2147483647).contains(&v) {
        buf.push(0xf3);
        buf.extend_from_slice(&(v as i32).to_le_bytes());
    } else {
        buf.push(0xf4);
        buf.extend_from_slice(&v.to_le_bytes());
    }
    push_backlen(buf, start);
}

/// Appends the backlen of the entry that starts at `start` (`lpEncodeBacklen`).
#[inline]
pub fn push_backlen(buf: &mut Vec<u8>, start: usize) {
    let l = buf.len() - start;
    if l <= 127 {
        buf.push(l as u8);
    } else if l < 16383 {
        buf.extend_from_slice(&[(l >> 7) as u8, (l & 127) as u8 | 128]);
    } else if l < 2097151 {
        buf.extend_from_slice(&[
            (l >> 14) as u8,
            ((l >> 7) & 127) as u8 | 128,
            (l & 127) as u8 | 128,
        ]);
    } else if l < 268435455 {
        buf.extend_from_slice(&[
            (l >> 21) as u8,
            ((l >> 14) & 127) as u8 | 128,
            ((l >> 7) & 127) as u8 | 128,
            (l & 127) as u8 | 128,
        ]);
    } else {
        buf.extend_from_slice(&[
            (l >> 28) as u8,
            ((l >> 21) & 127) as u8 | 128,
            ((l >> 14) & 127) as u8 | 128,
            ((l >> 7) & 127) as u8 | 128,
            (l & 127) as u8 | 128,
        ]);
    }
}

/// A listpack of `items` (test and tool helper).
pub fn encode<T: AsRef<[u8]>>(items: impl IntoIterator<Item = T>) -> Vec<u8> {
    let mut w = ListpackWriter::new();
    for i in items {
        w.push(i.as_ref());
    }
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn valkeys_hash_listpack() {
        // DUMP of HSET h f v on valkey-server 9.1.2 (after the type byte and length 13).
        let lp = [0x0d, 0, 0, 0, 2, 0, 0x81, b'f', 2, 0x81, b'v', 2, 0xff];
        assert_eq!(
            entries(&lp).unwrap(),
            vec![LpValue::Str(b"f"), LpValue::Str(b"v")]
        );
        assert_eq!(encode([b"f", b"v"]), lp);
    }

    #[test]
    fn corrupt_listpacks_are_refused() {
        let good = encode([&b"abc"[..], b"12", b"-5000", b"x".repeat(300).as_slice()]);
        assert!(entries(&good).is_ok());
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad.truncate(i);
            assert!(entries(&bad).is_err(), "truncated to {i}");
        }
        let mut bad = good.clone();
        bad[4] = 7;
        assert!(entries(&bad).is_err());
        let mut bad = good.clone();
        bad[6] ^= 0x40;
        assert!(entries(&bad).is_err());
    }

    fn item() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            any::<i64>().prop_map(|v| v.to_string().into_bytes()),
            (-70000i64..70000).prop_map(|v| v.to_string().into_bytes()),
            proptest::collection::vec(any::<u8>(), 0..80),
            proptest::collection::vec(any::<u8>(), 4000..4200),
            Just(b"007".to_vec()),
            Just(b"-0".to_vec()),
        ]
    }

    proptest! {
        #[test]
        fn encode_then_decode_is_identity(items in proptest::collection::vec(item(), 0..40)) {
            let lp = encode(&items);
            let back: Vec<Vec<u8>> = entries(&lp).unwrap().into_iter().map(LpValue::to_vec).collect();
            prop_assert_eq!(back, items);
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..100)) {
            let _ = entries(&data);
        }
    }

    #[test]
    fn count_saturates_at_65535() {
        let lp = encode((0..70000).map(|i| format!("m{i}")));
        assert_eq!(u16::from_le_bytes([lp[4], lp[5]]), 65535);
        assert_eq!(entries(&lp).unwrap().len(), 70000);
    }
}

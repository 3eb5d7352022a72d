//! Listpack entries in a byte buffer, the form of list nodes and small sorted sets: a sequence of elements in
//! one byte buffer, each element in the entry format of Valkey's listpack (`listpack.c`,
//! "Listpack specification"), without the listpack's 6-byte header and end byte (the holder
//! keeps the byte length in its `Vec` and the element count itself).
//!
//! An entry is `<encoding+data> <backlen>`:
//!
//! | first byte | element |
//! |---|---|
//! | `0xxxxxxx` | integer 0..=127 |
//! | `10llllll` | string of `l` < 64 bytes |
//! | `110xxxxx yyyyyyyy` | 13-bit signed integer (big end first) |
//! | `1110llll llllllll` | string of `l` < 4096 bytes (big end first) |
//! | `11110000` + 4 bytes LE | string of any length |
//! | `11110001/0010/0011/0100` + 2/3/4/8 bytes LE | 16/24/32/64-bit signed integer |
//! | `11110101` + 8 bytes LE | an IEEE-754 double (our addition for sorted-set scores: listpack writes their text, which must be parsed again at every comparison) |
//!
//! `backlen` is the size of `<encoding+data>` in 7-bit groups, read from the entry's last
//! byte towards its first (a set high bit: another group precedes), so the buffer can be
//! walked both ways. A string that is a canonical decimal integer (`string2ll`) is stored as an
//! integer and reads back as the same text, as listpacks do.
//!
//! Every buffer here is written by this module only, so a malformed entry is a bug (the
//! decoder never sees outside bytes: RDB and DUMP payloads are decoded by `ferrocluster-rdb`
//! into element lists first).

use ferrocluster_command::parse_i64;
use ferrocluster_rdb::listpack;
use std::cmp::Ordering;

const INT13: u8 = 0xC0;
const STR12: u8 = 0xE0;
const STR32: u8 = 0xF0;
const INT16: u8 = 0xF1;
const INT24: u8 = 0xF2;
const INT32: u8 = 0xF3;
const INT64: u8 = 0xF4;
const DOUBLE: u8 = 0xF5;

/// One decoded element, borrowed from the buffer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Elem<'a> {
    /// A string stored as its bytes.
    Str(&'a [u8]),
    /// A string that is a canonical decimal integer, stored as the integer.
    Int(i64),
    /// A double (sorted-set scores).
    Double(f64),
}

/// Decimal text of an integer without allocating: the bytes are in `buf[start..]`.
pub struct IntText {
    buf: [u8; 20],
    start: usize,
}

impl IntText {
    /// The text of `v`.
    pub fn new(v: i64) -> IntText {
        let mut buf = [0u8; 20];
        let mut i = buf.len();
        let mut u = v.unsigned_abs();
        loop {
            i -= 1;
            buf[i] = b'0' + (u % 10) as u8;
            u /= 10;
            if u == 0 {
                break;
            }
        }
        if v < 0 {
            i -= 1;
            buf[i] = b'-';
        }
        IntText { buf, start: i }
    }

    /// The digits.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[self.start..]
    }
}

/// An element's bytes as a value ([`Elem::bytes`]): what the RDB writer takes.
pub enum ElemBytes<'a> {
    /// Stored bytes.
    Str(&'a [u8]),
    /// An integer's text.
    Int(IntText),
}

impl AsRef<[u8]> for ElemBytes<'_> {
    fn as_ref(&self) -> &[u8] {
        match self {
            ElemBytes::Str(s) => s,
            ElemBytes::Int(t) => t.as_bytes(),
        }
    }
}

impl<'a> Elem<'a> {
    /// The element's bytes as a client sees them, without allocating (a double reads as its
    /// integer part: doubles are scores, never elements).
    pub fn bytes(&self) -> ElemBytes<'a> {
        match *self {
            Elem::Str(s) => ElemBytes::Str(s),
            Elem::Int(v) => ElemBytes::Int(IntText::new(v)),
            Elem::Double(d) => ElemBytes::Int(IntText::new(d as i64)),
        }
    }
}

impl Elem<'_> {
    /// Calls `f` with the element's bytes as a client sees them (an integer as its decimal
    /// text). Doubles are not client-visible elements: `f` gets their shortest text.
    pub fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        match *self {
            Elem::Str(s) => f(s),
            Elem::Int(v) => f(IntText::new(v).as_bytes()),
            Elem::Double(d) => f(format!("{d}").as_bytes()),
        }
    }

    /// The bytes, copied.
    pub fn to_vec(self) -> Vec<u8> {
        self.with_bytes(|b| b.to_vec())
    }

    /// Whether the element is the string `b`.
    pub fn eq_bytes(&self, b: &[u8]) -> bool {
        match *self {
            Elem::Str(s) => s == b,
            Elem::Int(v) => parse_i64(b) == Some(v),
            Elem::Double(_) => false,
        }
    }

    /// Byte-wise comparison of the element's text with `b` (`memcmp` order, as
    /// `ZRANGEBYLEX` and sorted-set ties compare members).
    pub fn cmp_bytes(&self, b: &[u8]) -> Ordering {
        self.with_bytes(|s| s.cmp(b))
    }

    /// The double stored by [`push_double`] (an integer entry reads as its value).
    pub fn as_f64(&self) -> f64 {
        match *self {
            Elem::Double(d) => d,
            Elem::Int(v) => v as f64,
            // Only scores are read as doubles and they are never written as strings.
            Elem::Str(_) => f64::NAN,
        }
    }
}

/// How a string will be encoded: as an integer when it is canonical decimal text.
fn int_of(s: &[u8]) -> Option<i64> {
    if s.len() <= 20 {
        parse_i64(s)
    } else {
        None
    }
}

fn int_head_len(v: i64) -> usize {
    if (0..=127).contains(&v) {
        1
    } else if (-4096..=4095).contains(&v) {
        2
    } else if (-32768..=32767).contains(&v) {
        3
    } else if (-8_388_608..=8_388_607).contains(&v) {
        4
    } else if i32::try_from(v).is_ok() {
        5
    } else {
        9
    }
}

fn str_head_len(len: usize) -> usize {
    if len < 64 {
        1
    } else if len < 4096 {
        2
    } else {
        5
    }
}

fn backlen_len(l: usize) -> usize {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

/// Bytes the entry for string `s` takes (encoding, data and backlen).
pub fn entry_size(s: &[u8]) -> usize {
    let l = match int_of(s) {
        Some(v) => int_head_len(v),
        None => str_head_len(s.len()) + s.len(),
    };
    l + backlen_len(l)
}

/// Appends the entry for string `s` (an integer entry when `s` is canonical decimal text).
#[inline]
pub fn push(out: &mut Vec<u8>, s: &[u8]) {
    listpack::push_entry(out, s);
}

/// Appends a double entry (an integer entry when `d` is integral in ±2^53, which is shorter).
pub fn push_double(out: &mut Vec<u8>, d: f64) {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if d.fract() == 0.0 && d.abs() <= EXACT {
        return listpack::push_int_entry(out, d as i64);
    }
    let start = out.len();
    out.push(DOUBLE);
    out.extend_from_slice(&d.to_le_bytes());
    listpack::push_backlen(out, start);
}

/// Bytes a double entry takes.
#[cfg(test)]
pub fn double_size(d: f64) -> usize {
    let mut v = Vec::with_capacity(10);
    push_double(&mut v, d);
    v.len()
}

/// The entry for `s` as its own buffer (to splice into another).
pub fn encode(s: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(entry_size(s));
    push(&mut v, s);
    v
}

fn le(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(b)
}

/// Decodes the entry at `off`: the element and the offset of the next entry.
///
/// # Panics
/// When `off` is not the start of an entry of a buffer this module wrote (a bug).
#[inline]
pub fn decode(buf: &[u8], off: usize) -> (Elem<'_>, usize) {
    let b = buf[off];
    let (elem, l) = if b < 0x80 {
        (Elem::Int(i64::from(b)), 1)
    } else if b < INT13 {
        let n = usize::from(b & 0x3F);
        (Elem::Str(&buf[off + 1..off + 1 + n]), 1 + n)
    } else if b < STR12 {
        let u = (u16::from(b & 0x1F) << 8) | u16::from(buf[off + 1]);
        // Sign-extend 13 bits.
        let v = i64::from(((u << 3) as i16) >> 3);
        (Elem::Int(v), 2)
    } else if b < STR32 {
        let n = (usize::from(b & 0x0F) << 8) | usize::from(buf[off + 1]);
        (Elem::Str(&buf[off + 2..off + 2 + n]), 2 + n)
    } else {
        match b {
            STR32 => {
                let n = le(&buf[off + 1..off + 5]) as usize;
                (Elem::Str(&buf[off + 5..off + 5 + n]), 5 + n)
            }
            INT16 => (Elem::Int(i64::from(le(&buf[off + 1..off + 3]) as i16)), 3),
            INT24 => {
                let u = le(&buf[off + 1..off + 4]) as u32;
                (Elem::Int(i64::from(((u << 8) as i32) >> 8)), 4)
            }
            INT32 => (Elem::Int(i64::from(le(&buf[off + 1..off + 5]) as i32)), 5),
            INT64 => (Elem::Int(le(&buf[off + 1..off + 9]) as i64), 9),
            DOUBLE => (Elem::Double(f64::from_bits(le(&buf[off + 1..off + 9]))), 9),
            _ => panic!("packed entry with encoding byte {b:#x} at {off}"),
        }
    };
    (elem, off + l + backlen_len(l))
}

/// The offset just past the entry at `off`.
#[inline]
pub fn next(buf: &[u8], off: usize) -> usize {
    let b = buf[off];
    let l = if b < 0x80 {
        1
    } else if b < INT13 {
        1 + usize::from(b & 0x3F)
    } else if b < STR12 {
        2
    } else if b < STR32 {
        2 + ((usize::from(b & 0x0F) << 8) | usize::from(buf[off + 1]))
    } else {
        match b {
            STR32 => 5 + le(&buf[off + 1..off + 5]) as usize,
            INT16 => 3,
            INT24 => 4,
            INT32 => 5,
            _ => 9,
        }
    };
    off + l + backlen_len(l)
}

/// The offset of the entry that ends at `end` (`end` is an entry boundary above 0).
#[inline]
pub fn prev(buf: &[u8], end: usize) -> usize {
    let mut p = end - 1;
    let mut l = 0usize;
    let mut shift = 0;
    loop {
        let g = buf[p];
        l |= usize::from(g & 0x7F) << shift;
        if g & 0x80 == 0 {
            break;
        }
        shift += 7;
        p -= 1;
    }
    end - backlen_len(l) - l
}

/// Iterator over the elements of a buffer (both ways).
#[derive(Clone)]
pub struct Iter<'a> {
    buf: &'a [u8],
    off: usize,
    end: usize,
}

impl<'a> Iter<'a> {
    /// The elements of the whole buffer.
    pub fn new(buf: &'a [u8]) -> Iter<'a> {
        Iter {
            buf,
            off: 0,
            end: buf.len(),
        }
    }
}

impl<'a> Iterator for Iter<'a> {
    type Item = Elem<'a>;
    #[inline]
    fn next(&mut self) -> Option<Elem<'a>> {
        if self.off >= self.end {
            return None;
        }
        let (e, n) = decode(self.buf, self.off);
        self.off = n;
        Some(e)
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.off >= self.end {
            return None;
        }
        let p = prev(self.buf, self.end);
        self.end = p;
        Some(decode(self.buf, p).0)
    }
}

/// The offset of element `i` (counting from the front), scanning from whichever end of the
/// `count` elements is closer; `buf.len()` for `i == count`.
pub fn offset_of(buf: &[u8], count: usize, i: usize) -> usize {
    if i >= count {
        return buf.len();
    }
    if i <= count / 2 {
        let mut off = 0;
        for _ in 0..i {
            off = next(buf, off);
        }
        off
    } else {
        let mut off = buf.len();
        for _ in i..count {
            off = prev(buf, off);
        }
        off
    }
}

/// Inserts the entry for `s` at byte offset `off` (an entry boundary).
pub fn insert(buf: &mut Vec<u8>, off: usize, s: &[u8]) {
    if off == buf.len() {
        return push(buf, s);
    }
    let e = encode(s);
    buf.splice(off..off, e);
}

/// Replaces the entry at `off` with the entry for `s`.
pub fn replace(buf: &mut Vec<u8>, off: usize, s: &[u8]) {
    let end = next(buf, off);
    let e = encode(s);
    buf.splice(off..end, e);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn elems(buf: &[u8]) -> Vec<Vec<u8>> {
        Iter::new(buf).map(|e| e.to_vec()).collect()
    }

    #[test]
    fn entries_have_listpack_sizes() {
        // Sizes from the listpack specification: encoding + data + backlen.
        assert_eq!(entry_size(b"7"), 2);
        assert_eq!(entry_size(b"127"), 2);
        assert_eq!(entry_size(b"128"), 3);
        assert_eq!(entry_size(b"-4096"), 3);
        assert_eq!(entry_size(b"4096"), 4);
        assert_eq!(entry_size(b"8388607"), 5);
        assert_eq!(entry_size(b"2147483647"), 6);
        assert_eq!(entry_size(b"9223372036854775807"), 10);
        assert_eq!(entry_size(b"abc"), 5);
        assert_eq!(entry_size(b"007"), 5, "not canonical: a string");
        assert_eq!(entry_size(&[b'x'; 63]), 65);
        assert_eq!(entry_size(&[b'x'; 64]), 67);
        assert_eq!(entry_size(&[b'x'; 125]), 128);
        assert_eq!(
            entry_size(&[b'x'; 126]),
            130,
            "l = 128 needs a 2-byte backlen"
        );
        assert_eq!(entry_size(&[b'x'; 4096]), 4096 + 5 + 2);
    }

    #[test]
    fn buffer_matches_the_rdb_listpack_reader() {
        // Our entries with the listpack header and end byte are a listpack the RDB crate reads.
        let items: Vec<Vec<u8>> = vec![
            b"a".to_vec(),
            b"-1".to_vec(),
            b"300".to_vec(),
            b"-70000".to_vec(),
            b"5000000000".to_vec(),
            vec![b'z'; 200],
            vec![b'q'; 5000],
        ];
        let mut body = Vec::new();
        for it in &items {
            push(&mut body, it);
        }
        assert_eq!(body, {
            let lp = ferrocluster_rdb::listpack::encode(&items);
            lp[6..lp.len() - 1].to_vec()
        });
    }

    #[test]
    fn doubles_round_trip_and_integral_ones_are_integers() {
        let mut b = Vec::new();
        for d in [0.5, -3.0, 1e300, -0.0, f64::INFINITY, 2.5e-308] {
            push_double(&mut b, d);
        }
        let got: Vec<f64> = Iter::new(&b).map(|e| e.as_f64()).collect();
        assert_eq!(got[..4], [0.5, -3.0, 1e300, -0.0]);
        // -0 is integral: stored as the integer 0, as a listpack stores it (`double2ll`).
        assert!(got[3].is_sign_positive());
        assert_eq!(got[4], f64::INFINITY);
        assert_eq!(got[5], 2.5e-308);
        assert_eq!(double_size(3.0), 2);
        assert_eq!(double_size(-3.0), 3);
        assert_eq!(double_size(0.5), 10);
    }

    proptest! {
        #[test]
        fn round_trips_both_ways(items in proptest::collection::vec(
            prop_oneof![
                proptest::collection::vec(any::<u8>(), 0..300),
                any::<i64>().prop_map(|v| v.to_string().into_bytes()),
                (0i64..200).prop_map(|v| v.to_string().into_bytes()),
            ], 0..40)) {
            let mut b = Vec::new();
            for it in &items {
                let before = b.len();
                push(&mut b, it);
                prop_assert_eq!(b.len() - before, entry_size(it));
            }
            prop_assert_eq!(&elems(&b), &items);
            let back: Vec<Vec<u8>> = Iter::new(&b).rev().map(|e| e.to_vec()).collect();
            let mut want = items.clone();
            want.reverse();
            prop_assert_eq!(back, want);
            for i in 0..=items.len() {
                let off = offset_of(&b, items.len(), i);
                let rest: Vec<Vec<u8>> = Iter { buf: &b, off, end: b.len() }.map(|e| e.to_vec()).collect();
                prop_assert_eq!(&rest[..], &items[i..]);
            }
            for (i, it) in items.iter().enumerate() {
                let off = offset_of(&b, items.len(), i);
                prop_assert!(decode(&b, off).0.eq_bytes(it));
            }
        }

        #[test]
        fn insert_and_replace_keep_the_sequence(
            items in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..80), 1..20),
            at in any::<prop::sample::Index>(),
            new in proptest::collection::vec(any::<u8>(), 0..100),
        ) {
            let mut b = Vec::new();
            for it in &items { push(&mut b, it); }
            let i = at.index(items.len());
            let mut m = items.clone();
            let off = offset_of(&b, items.len(), i);
            let mut ins = b.clone();
            insert(&mut ins, off, &new);
            m.insert(i, new.clone());
            prop_assert_eq!(elems(&ins), m.clone());
            m.remove(i);
            m[i] = new.clone();
            replace(&mut b, off, &new);
            prop_assert_eq!(elems(&b), m);
        }
    }
}

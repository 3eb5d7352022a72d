//! Reading the primitives: lengths, strings (raw, integer, LZF), doubles, times
//! (Valkey `rdbLoadLenByRef`, `rdbGenericLoadStringObject`, `rdbLoadDoubleValue`,
//! `rdbLoadBinaryDoubleValue`, `rdbLoadMillisecondTime`).
//!
//! An [`Input`] reads from a buffer that may not hold the whole element yet: running out is
//! [`Fail::Incomplete`] with the buffer length needed, so a streaming caller waits for exactly
//! that many bytes before it tries again.

use crate::error::DecodeErrorKind;
use crate::lzf;
use std::borrow::Cow;

/// The largest single string accepted (4 GiB - 1): a longer declared length is refused as
/// corrupt instead of being waited for.
pub const MAX_STRING_LEN: u64 = u32::MAX as u64;

/// Why a read stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fail {
    /// The buffer must hold at least this many bytes (from its start) to go on.
    Incomplete(usize),
    /// The bytes at `at` (buffer offset) are wrong.
    Invalid { at: usize, kind: DecodeErrorKind },
}

pub(crate) type PResult<T> = Result<T, Fail>;

/// A length prefix: a plain length, or the special string encoding that follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Len {
    Plain(u64),
    Encoded(u8),
}

/// String encodings after an `11` length prefix (`RDB_ENC_*`).
pub(crate) const ENC_INT8: u8 = 0;
pub(crate) const ENC_INT16: u8 = 1;
pub(crate) const ENC_INT32: u8 = 2;
pub(crate) const ENC_LZF: u8 = 3;

/// A cursor over buffered bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Input<'a> {
    pub buf: &'a [u8],
    pub pos: usize,
}

impl<'a> Input<'a> {
    pub fn new(buf: &'a [u8]) -> Input<'a> {
        Input { buf, pos: 0 }
    }

    pub fn invalid<T>(&self, at: usize, kind: DecodeErrorKind) -> PResult<T> {
        Err(Fail::Invalid { at, kind })
    }

    #[inline]
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    #[inline]
    pub fn u8(&mut self) -> PResult<u8> {
        match self.buf.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                Ok(b)
            }
            None => Err(Fail::Incomplete(self.pos + 1)),
        }
    }

    #[inline]
    pub fn take(&mut self, n: usize) -> PResult<&'a [u8]> {
        let end = self.pos.checked_add(n).ok_or(Fail::Invalid {
            at: self.pos,
            kind: DecodeErrorKind::TooLarge(n as u64),
        })?;
        if end > self.buf.len() {
            return Err(Fail::Incomplete(end));
        }
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    #[inline]
    pub fn array<const N: usize>(&mut self) -> PResult<[u8; N]> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// `rdbLoadLenByRef`.
    #[inline]
    pub fn len(&mut self) -> PResult<Len> {
        let at = self.pos;
        let b = self.u8()?;
        match b >> 6 {
            0 => Ok(Len::Plain(u64::from(b & 0x3f))),
            1 => {
                let b2 = self.u8()?;
                Ok(Len::Plain((u64::from(b & 0x3f) << 8) | u64::from(b2)))
            }
            3 => Ok(Len::Encoded(b & 0x3f)),
            _ => match b {
                0x80 => Ok(Len::Plain(u64::from(u32::from_be_bytes(self.array()?)))),
                0x81 => Ok(Len::Plain(u64::from_be_bytes(self.array()?))),
                _ => self.invalid(at, DecodeErrorKind::BadLength(b)),
            },
        }
    }

    /// A length that must not carry a string encoding.
    #[inline]
    pub fn plain_len(&mut self) -> PResult<u64> {
        let at = self.pos;
        match self.len()? {
            Len::Plain(n) => Ok(n),
            Len::Encoded(_) => self.invalid(at, DecodeErrorKind::EncodedLength),
        }
    }

    /// A count of elements, refused when even one byte per element could not fit in memory.
    pub fn count(&mut self) -> PResult<u64> {
        let at = self.pos;
        let n = self.plain_len()?;
        if n > isize::MAX as u64 {
            return self.invalid(at, DecodeErrorKind::TooLarge(n));
        }
        Ok(n)
    }

    /// `rdbGenericLoadStringObject`: borrowed when stored raw, owned when it was an integer
    /// or LZF-compressed.
    pub fn string_cow(&mut self) -> PResult<Cow<'a, [u8]>> {
        let at = self.pos;
        match self.len()? {
            Len::Plain(n) => {
                if n > MAX_STRING_LEN {
                    return self.invalid(at, DecodeErrorKind::TooLarge(n));
                }
                Ok(Cow::Borrowed(self.take(n as usize)?))
            }
            Len::Encoded(ENC_INT8) => {
                let v = self.u8()? as i8;
                Ok(Cow::Owned(int_text(i64::from(v))))
            }
            Len::Encoded(ENC_INT16) => {
                let v = i16::from_le_bytes(self.array()?);
                Ok(Cow::Owned(int_text(i64::from(v))))
            }
            Len::Encoded(ENC_INT32) => {
                let v = i32::from_le_bytes(self.array()?);
                Ok(Cow::Owned(int_text(i64::from(v))))
            }
            Len::Encoded(ENC_LZF) => {
                let clen = self.plain_len()?;
                let len = self.plain_len()?;
                if clen > MAX_STRING_LEN || len > MAX_STRING_LEN {
                    return self.invalid(at, DecodeErrorKind::TooLarge(clen.max(len)));
                }
                let c = self.take(clen as usize)?;
                match lzf::decompress(c, len) {
                    Ok(v) => Ok(Cow::Owned(v)),
                    Err(e) => self.invalid(at, DecodeErrorKind::Lzf(e)),
                }
            }
            Len::Encoded(e) => self.invalid(at, DecodeErrorKind::BadStringEncoding(e)),
        }
    }

    #[inline]
    pub fn string(&mut self) -> PResult<Vec<u8>> {
        self.string_cow().map(Cow::into_owned)
    }

    /// `rdbLoadDoubleValue`: a length byte (253 NaN, 254 +inf, 255 -inf) and ASCII text.
    pub fn double_text(&mut self) -> PResult<f64> {
        let at = self.pos;
        let n = self.u8()?;
        match n {
            255 => Ok(f64::NEG_INFINITY),
            254 => Ok(f64::INFINITY),
            253 => Ok(f64::NAN),
            n => {
                let s = self.take(usize::from(n))?;
                match parse_double(s) {
                    Some(v) => Ok(v),
                    None => self.invalid(at, DecodeErrorKind::BadDouble),
                }
            }
        }
    }

    /// `rdbLoadBinaryDoubleValue`: IEEE 754 binary64, little endian.
    #[inline]
    pub fn double_bin(&mut self) -> PResult<f64> {
        Ok(f64::from_le_bytes(self.array()?))
    }

    /// `rdbLoadMillisecondTime` (RDB 9+: little endian).
    #[inline]
    pub fn i64_le(&mut self) -> PResult<i64> {
        Ok(i64::from_le_bytes(self.array()?))
    }
}

/// Decimal text of an integer, as `ll2string` writes it.
pub(crate) fn int_text(v: i64) -> Vec<u8> {
    let (buf, start) = itoa_buf(v);
    buf[start..].to_vec()
}

/// Writes `v` in decimal at the end of a 21-byte buffer; returns the buffer and the start.
#[inline]
pub(crate) fn itoa_buf(v: i64) -> ([u8; 21], usize) {
    let mut buf = [0u8; 21];
    let mut i = 21;
    let neg = v < 0;
    let mut u = v.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    if neg {
        i -= 1;
        buf[i] = b'-';
    }
    (buf, i)
}

/// Appends the decimal text of `v`.
#[inline]
pub(crate) fn push_int_text(out: &mut Vec<u8>, v: i64) {
    let (buf, start) = itoa_buf(v);
    out.extend_from_slice(&buf[start..]);
}

/// `string2ll`: the integer a string is the canonical decimal form of (no sign other than a
/// leading `-`, no leading zeros, no spaces, at most 20 bytes, in `i64` range); the one copy
/// in the workspace is `ferrocluster_command::parse_i64`.
pub(crate) use ferrocluster_command::parse_i64 as parse_canonical_int;

/// Parses a double as `strtod` reads the text the servers write (`%.17g`, fpconv, `inf`,
/// `-inf`, `nan`).
pub(crate) fn parse_double(s: &[u8]) -> Option<f64> {
    let t = std::str::from_utf8(s).ok()?;
    match t {
        "inf" | "+inf" | "infinity" => Some(f64::INFINITY),
        "-inf" | "-infinity" => Some(f64::NEG_INFINITY),
        _ => t.parse::<f64>().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_text_is_ll2string() {
        assert_eq!(int_text(i64::MIN), b"-9223372036854775808");
        assert_eq!(int_text(0), b"0");
        assert_eq!(int_text(-42), b"-42");
    }

    #[test]
    fn lengths_of_every_form() {
        let mut i = Input::new(&[
            0x3f, 0x40, 0x01, 0x80, 0, 0, 1, 0, 0x81, 0, 0, 0, 0, 0, 0, 0, 9,
        ]);
        assert_eq!(i.len(), Ok(Len::Plain(63)));
        assert_eq!(i.len(), Ok(Len::Plain(1)));
        assert_eq!(i.len(), Ok(Len::Plain(256)));
        assert_eq!(i.len(), Ok(Len::Plain(9)));
        assert_eq!(i.len(), Err(Fail::Incomplete(18)));
        let mut i = Input::new(&[0x82]);
        assert!(matches!(
            i.len(),
            Err(Fail::Invalid {
                at: 0,
                kind: DecodeErrorKind::BadLength(0x82)
            })
        ));
    }
}

//! Writing the primitives (Valkey `rdbSaveLen`, `rdbSaveRawString`, `rdbEncodeInteger`,
//! `rdbSaveLzfStringObject`, `rdbSaveBinaryDoubleValue`, `rdbSaveMillisecondTime`).

use crate::lzf::Compressor;
use crate::read::{parse_canonical_int, ENC_INT16, ENC_INT32, ENC_INT8, ENC_LZF};

/// `rdbSaveLen`: 6-bit, 14-bit, 32-bit or 64-bit big-endian form, the smallest that fits.
#[inline]
pub fn write_len(out: &mut Vec<u8>, len: u64) {
    if len < 1 << 6 {
        out.push(len as u8);
    } else if len < 1 << 14 {
        out.extend_from_slice(&[((len >> 8) as u8) | 0x40, len as u8]);
    } else if len <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&len.to_be_bytes());
    }
}

/// `rdbEncodeInteger`: the 8/16/32-bit form of `v`, if it fits one.
#[inline]
pub(crate) fn write_int_encoded(out: &mut Vec<u8>, v: i64) -> bool {
    if (-(1 << 7)..(1 << 7)).contains(&v) {
        out.extend_from_slice(&[0xc0 | ENC_INT8, v as u8]);
    } else if (-(1 << 15)..(1 << 15)).contains(&v) {
        out.push(0xc0 | ENC_INT16);
        out.extend_from_slice(&(v as i16).to_le_bytes());
    } else if (-(1i64 << 31)..(1i64 << 31)).contains(&v) {
        out.push(0xc0 | ENC_INT32);
        out.extend_from_slice(&(v as i32).to_le_bytes());
    } else {
        return false;
    }
    true
}

/// How strings are written.
pub struct StringWriter {
    /// `rdbcompression`: try LZF on strings longer than 20 bytes.
    pub compress: bool,
    lzf: Compressor,
}

impl std::fmt::Debug for StringWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StringWriter")
            .field("compress", &self.compress)
            .finish_non_exhaustive()
    }
}

impl StringWriter {
    /// A string writer; `compress` as the servers' `rdbcompression` (default yes).
    pub fn new(compress: bool) -> StringWriter {
        StringWriter {
            compress,
            lzf: Compressor::new(),
        }
    }

    /// `rdbSaveRawString`: strings of up to 11 bytes that are canonical integers in the
    /// 32-bit range as integers; strings over 20 bytes LZF-compressed when that saves at
    /// least 4 bytes (and compression is on); else a length and the bytes.
    #[inline]
    pub fn write(&mut self, out: &mut Vec<u8>, s: &[u8]) {
        if s.len() <= 11 {
            if let Some(v) = parse_canonical_int(s) {
                if write_int_encoded(out, v) {
                    return;
                }
            }
        }
        if self.compress && s.len() > 20 && self.write_lzf(out, s) {
            return;
        }
        write_len(out, s.len() as u64);
        out.extend_from_slice(s);
    }

    /// Writes `s` LZF-compressed if it compresses into `len - 4` bytes.
    fn write_lzf(&mut self, out: &mut Vec<u8>, s: &[u8]) -> bool {
        match self.lzf.compress(s, s.len() - 4) {
            Some(c) => {
                out.push(0xc0 | ENC_LZF);
                write_len(out, c.len() as u64);
                write_len(out, s.len() as u64);
                out.extend_from_slice(c);
                true
            }
            None => false,
        }
    }

    /// `rdbSaveLongLongAsStringObject`: an integer string value (8/16/32-bit form, else its
    /// decimal text).
    pub fn write_int(&mut self, out: &mut Vec<u8>, v: i64) {
        if !write_int_encoded(out, v) {
            let (buf, start) = crate::read::itoa_buf(v);
            write_len(out, (buf.len() - start) as u64);
            out.extend_from_slice(&buf[start..]);
        }
    }
}

/// `rdbSaveBinaryDoubleValue`.
#[inline]
pub fn write_double_bin(out: &mut Vec<u8>, v: f64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// `rdbSaveMillisecondTime`.
#[inline]
pub fn write_i64_le(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// `rdbSaveDoubleValue` (the old text form, RDB type 3 `ZSET`): a length byte and the text,
/// 253/254/255 for NaN/+inf/-inf. Written only for tests and tools: our writers use
/// `ZSET_2`.
pub fn write_double_text(out: &mut Vec<u8>, v: f64) {
    if v.is_nan() {
        out.push(253);
    } else if v.is_infinite() {
        out.push(if v < 0.0 { 255 } else { 254 });
    } else {
        let t = crate::double::format_double(v);
        out.push(t.len() as u8);
        out.extend_from_slice(t.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::{Input, Len};
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn lengths_round_trip(n in any::<u64>()) {
            let mut out = Vec::new();
            write_len(&mut out, n);
            let mut i = Input::new(&out);
            prop_assert_eq!(i.len(), Ok(Len::Plain(n)));
            prop_assert_eq!(i.pos, out.len());
        }

        #[test]
        fn strings_round_trip(s in proptest::collection::vec(prop_oneof![Just(b'x'), Just(b'1'), any::<u8>()], 0..300), compress: bool) {
            let mut w = StringWriter::new(compress);
            let mut out = Vec::new();
            w.write(&mut out, &s);
            let mut i = Input::new(&out);
            prop_assert_eq!(i.string().unwrap(), s);
            prop_assert_eq!(i.pos, out.len());
        }

        #[test]
        fn integers_round_trip(v in any::<i64>()) {
            let mut w = StringWriter::new(true);
            let mut out = Vec::new();
            w.write_int(&mut out, v);
            let mut i = Input::new(&out);
            prop_assert_eq!(i.string().unwrap(), v.to_string().into_bytes());
        }
    }

    #[test]
    fn integer_strings_use_the_servers_forms() {
        let mut w = StringWriter::new(true);
        let mut out = Vec::new();
        w.write(&mut out, b"12345");
        // Valkey DUMP of SET i 12345: c1 39 30.
        assert_eq!(out, [0xc1, 0x39, 0x30]);
        out.clear();
        w.write(&mut out, b"-1");
        assert_eq!(out, [0xc0, 0xff]);
        out.clear();
        w.write(&mut out, b"2147483648");
        assert_eq!(&out[..1], &[10]);
        out.clear();
        w.write(&mut out, b"007");
        assert_eq!(out, [3, b'0', b'0', b'7']);
    }
}

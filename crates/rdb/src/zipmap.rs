//! Zipmap: the small-hash encoding of Redis 2.4 and older (`HASH_ZIPMAP`; Valkey
//! `src/zipmap.c`). Read only for old files; [`encode`] exists for tests and tools.
//!
//! ```text
//! <count: 1 byte, 254 = unknown> (<len>field <len><free>value<free bytes>)* 0xFF
//! len = 1 byte < 254, or 254 + u32 LE
//! ```

use crate::error::DecodeErrorKind;

/// A field and its value, borrowed from the zipmap.
pub type Pair<'a> = (&'a [u8], &'a [u8]);

/// The field/value pairs of a zipmap, validated like `zipmapValidateIntegrity` (deep).
///
/// # Errors
/// [`DecodeErrorKind::BadZipmap`] naming the check that failed.
pub fn pairs(zm: &[u8]) -> Result<Vec<Pair<'_>>, DecodeErrorKind> {
    let bad = |m| Err(DecodeErrorKind::BadZipmap(m));
    if zm.len() < 2 {
        return bad("shorter than its header");
    }
    let declared = zm[0];
    let end = zm.len() - 1;
    if zm[end] != 0xff {
        return bad("no terminator");
    }
    let mut p = 1;
    let mut out = Vec::new();
    let len_at = |p: &mut usize| -> Option<usize> {
        let b = *zm.get(*p)?;
        if b < 254 {
            *p += 1;
            Some(usize::from(b))
        } else if b == 254 {
            let x = zm.get(*p + 1..*p + 5)?;
            *p += 5;
            Some(u32::from_le_bytes([x[0], x[1], x[2], x[3]]) as usize)
        } else {
            None
        }
    };
    while p < end {
        let Some(flen) = len_at(&mut p) else {
            return bad("bad field length");
        };
        let Some(field) = p.checked_add(flen).filter(|&e| e <= end).map(|e| &zm[p..e]) else {
            return bad("field runs past the end");
        };
        p += flen;
        if p >= end {
            return bad("value missing");
        }
        let Some(vlen) = len_at(&mut p) else {
            return bad("bad value length");
        };
        let Some(&free) = zm.get(p).filter(|_| p < end) else {
            return bad("free byte missing");
        };
        p += 1;
        let Some(value) = p.checked_add(vlen).filter(|&e| e <= end).map(|e| &zm[p..e]) else {
            return bad("value runs past the end");
        };
        p += vlen;
        p += usize::from(free);
        if p > end {
            return bad("free space runs past the end");
        }
        out.push((field, value));
    }
    if declared < 254 && usize::from(declared) != out.len() {
        return bad("header count differs from the entries");
    }
    Ok(out)
}

/// A zipmap of `pairs` with no free space. For tests and tools.
pub fn encode<F: AsRef<[u8]>, V: AsRef<[u8]>>(pairs: &[(F, V)]) -> Vec<u8> {
    let mut out = vec![pairs.len().min(254) as u8];
    let put_len = |out: &mut Vec<u8>, n: usize| {
        if n < 254 {
            out.push(n as u8);
        } else {
            out.push(254);
            out.extend_from_slice(&(n as u32).to_le_bytes());
        }
    };
    for (f, v) in pairs {
        put_len(&mut out, f.as_ref().len());
        out.extend_from_slice(f.as_ref());
        put_len(&mut out, v.as_ref().len());
        out.push(0);
        out.extend_from_slice(v.as_ref());
    }
    out.push(0xff);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_zipmap_c_example() {
        // zipmap.c: "foo" => "bar", "hello" => "world".
        let zm = b"\x02\x03foo\x03\x00bar\x05hello\x05\x00world\xff";
        assert_eq!(
            pairs(zm).unwrap(),
            vec![(&b"foo"[..], &b"bar"[..]), (&b"hello"[..], &b"world"[..])]
        );
        // With two free bytes after "bar".
        let zm = b"\x01\x03foo\x03\x02barxx\xff";
        assert_eq!(pairs(zm).unwrap(), vec![(&b"foo"[..], &b"bar"[..])]);
        for i in 0..zm.len() {
            assert!(pairs(&zm[..i]).is_err());
        }
    }

    proptest! {
        #[test]
        fn encode_then_decode_is_identity(p in proptest::collection::vec(
            (proptest::collection::vec(any::<u8>(), 0..300), proptest::collection::vec(any::<u8>(), 0..300)), 0..8)) {
            let zm = encode(&p);
            let back: Vec<(Vec<u8>, Vec<u8>)> = pairs(&zm).unwrap().into_iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
            prop_assert_eq!(back, p);
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..60)) {
            let _ = pairs(&data);
        }
    }
}

//! DUMP / RESTORE payloads: `<type byte> <object> <RDB version u16 LE> <CRC-64 u64 LE>`,
//! the checksum over every byte before it (Valkey `createDumpPayload`,
//! `verifyDumpPayload`, `restoreCommand`).
//!
//! RESTORE answers `ERR DUMP payload version or checksum are wrong` for
//! [`DumpError::TooShort`], [`DumpError::Version`] and [`DumpError::Checksum`], and
//! `ERR Bad data format` for [`DumpError::Object`] ([`DumpError::is_bad_data`]).

use crate::crc64::crc64;
use crate::decode;
use crate::encode::{Encoder, EncoderConfig};
use crate::error::{DecodeError, DecodeErrorKind, EncodeError};
use crate::object::{RdbObject, RdbValue, UnsupportedKind};
use crate::read::{Fail, Input};
use crate::types::{version_accepted, RdbType};

/// A payload refused by [`decode`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DumpError {
    /// Shorter than the 10-byte footer.
    #[error("payload of {0} bytes is shorter than its footer")]
    TooShort(usize),
    /// A version Valkey 9.1 refuses (`rdbIsVersionAccepted(ver, false, false)`: 0, 12..=79,
    /// above 80).
    #[error("unsupported payload RDB version {0}")]
    Version(u16),
    /// The CRC-64 does not match.
    #[error("payload checksum mismatch: computed {computed:#018x}, stored {stored:#018x}")]
    Checksum {
        /// Over the payload.
        computed: u64,
        /// In the footer.
        stored: u64,
    },
    /// The footer is right and the object is not (offset from the payload start).
    #[error("bad payload object: {0}")]
    Object(DecodeError),
    /// The object is fine and the host does not store its kind.
    #[error(transparent)]
    Unsupported(#[from] UnsupportedKind),
}

impl DumpError {
    /// Whether RESTORE answers `Bad data format` (the footer was right) rather than
    /// `DUMP payload version or checksum are wrong`.
    pub fn is_bad_data(&self) -> bool {
        matches!(self, DumpError::Object(_) | DumpError::Unsupported(_))
    }
}

/// A decoded payload.
#[derive(Debug, Clone, PartialEq)]
pub struct Dumped {
    /// The value.
    pub object: RdbObject,
    /// The type byte it was stored with.
    pub rdb_type: RdbType,
    /// The RDB version in the footer.
    pub version: u16,
}

/// Checks the footer as `verifyDumpPayload` does (length, version, then checksum) and
/// returns the version.
///
/// # Errors
/// [`DumpError::TooShort`], [`DumpError::Version`], [`DumpError::Checksum`].
pub fn verify(payload: &[u8]) -> Result<u16, DumpError> {
    if payload.len() < 10 {
        return Err(DumpError::TooShort(payload.len()));
    }
    let footer = &payload[payload.len() - 10..];
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    if !version_accepted(u32::from(version), None) {
        return Err(DumpError::Version(version));
    }
    let mut c = [0u8; 8];
    c.copy_from_slice(&footer[2..]);
    let stored = u64::from_le_bytes(c);
    let computed = crc64(&payload[..payload.len() - 8]);
    if computed != stored {
        return Err(DumpError::Checksum { computed, stored });
    }
    Ok(version)
}

/// Verifies and decodes a payload.
///
/// # Errors
/// [`DumpError`]; never panics.
pub fn decode(payload: &[u8]) -> Result<Dumped, DumpError> {
    let version = verify(payload)?;
    let body = &payload[..payload.len() - 10];
    let err = |at: usize, kind| DumpError::Object(DecodeError::new(at as u64, kind));
    let Some(&t) = body.first() else {
        return Err(err(0, DecodeErrorKind::Truncated));
    };
    let rdb_type = RdbType::from_code(t);
    let mut inp = Input::new(body);
    inp.pos = 1;
    let object = decode::object(rdb_type, &mut inp).map_err(|f| match f {
        Fail::Incomplete(_) => err(body.len(), DecodeErrorKind::Truncated),
        Fail::Invalid { at, kind } => err(at, kind),
    })?;
    if inp.pos != body.len() {
        return Err(err(
            inp.pos,
            DecodeErrorKind::TrailingBytes(body.len() - inp.pos),
        ));
    }
    Ok(Dumped {
        object,
        rdb_type,
        version,
    })
}

/// Verifies and decodes a payload into a host value.
///
/// # Errors
/// As [`decode`], and [`DumpError::Unsupported`] when the host refuses the kind.
pub fn decode_value<V: RdbValue>(payload: &[u8]) -> Result<V, DumpError> {
    Ok(V::from_rdb(decode(payload)?.object)?)
}

/// Appends the payload of `value` to `out` with `enc`'s version and encodings.
///
/// # Errors
/// [`EncodeError`] from the value; `out` is then left as it was.
pub fn encode_into<V: RdbValue>(
    enc: &mut Encoder,
    value: &V,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let start = out.len();
    let r = value.write_rdb(enc.object(out));
    if let Err(e) = r {
        out.truncate(start);
        return Err(e);
    }
    if out.len() == start {
        return Err(EncodeError::Misuse("the value wrote no object"));
    }
    out.extend_from_slice(&enc.config().version.number().to_le_bytes());
    let c = crc64(&out[start..]);
    out.extend_from_slice(&c.to_le_bytes());
    Ok(())
}

/// The payload of `value` in the compatible version (RDB 10) with LZF on: what RESTORE on
/// redis-server 7.0 and valkey-server 9.1 both accept.
///
/// # Errors
/// [`EncodeError`] from the value.
pub fn encode<V: RdbValue>(value: &V) -> Result<Vec<u8>, EncodeError> {
    let mut enc = Encoder::new(EncoderConfig::default());
    let mut out = Vec::new();
    encode_into(&mut enc, value, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valkey_and_redis_payloads_of_a_small_hash() {
        // DUMP h after HSET h f v: valkey-server 9.1.2 and redis-server 7.0.15.
        let valkey =
            b"\x10\r\r\x00\x00\x00\x02\x00\x81f\x02\x81v\x02\xffP\x00\xef\xdb\xf4\xd5\xbd\x06oi";
        let redis = b"\x10\r\r\x00\x00\x00\x02\x00\x81f\x02\x81v\x02\xff\n\x00 \xf1=D#T\x08\x9d";
        for (p, v) in [(&valkey[..], 80), (&redis[..], 10)] {
            let d = decode(p).unwrap();
            assert_eq!(d.version, v);
            assert_eq!(d.rdb_type, RdbType::HashListpack);
            assert_eq!(
                d.object,
                RdbObject::Hash(vec![(b"f".to_vec(), b"v".to_vec())])
            );
        }
        assert_eq!(
            encode(&decode(redis).unwrap().object).unwrap(),
            redis.to_vec()
        );
    }

    #[test]
    fn footer_errors_follow_verify_dump_payload() {
        let good = encode(&RdbObject::String(b"hello".to_vec())).unwrap();
        assert_eq!(decode(&good[..9]), Err(DumpError::TooShort(9)));
        let mut v = good.clone();
        let n = v.len();
        v[n - 10] = 12;
        assert_eq!(decode(&v), Err(DumpError::Version(12)));
        let mut v = good.clone();
        v[1] ^= 1;
        assert!(matches!(decode(&v), Err(DumpError::Checksum { .. })));
        assert!(!decode(&v).unwrap_err().is_bad_data());
    }
}

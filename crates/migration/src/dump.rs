//! Our DUMP / RESTORE payload format (sheet C.7 describes Valkey's: RDB value, 2-byte RDB
//! version, CRC64). ferrocluster is not RDB-compatible, so it defines its own small,
//! versioned, checksummed envelope around the host's value bytes:
//!
//! ```text
//! 0      magic 0xFC
//! 1      flags: bit 0 = a TTL follows; other bits must be 0
//! 2..10  TTL in ms, u64 little endian (only when flag bit 0 is set)
//! ...    value bytes (opaque to this crate)
//! -10    format version, u16 little endian (currently 1)
//! -8     CRC-64/REDIS of every preceding byte, u64 little endian
//! ```
//!
//! [`decode`] never panics: any corruption is a typed [`DumpError`] (RESTORE answers
//! `DUMP payload version or checksum are wrong`).

/// First byte of every payload.
pub const DUMP_MAGIC: u8 = 0xFC;
/// The format version [`encode`] writes and [`decode`] accepts.
pub const DUMP_VERSION: u16 = 1;
const FLAG_TTL: u8 = 1;
const TRAILER: usize = 10;

const CRC64: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_REDIS);

/// Why a payload was rejected. RESTORE maps every variant to `DUMP payload version or
/// checksum are wrong`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DumpError {
    /// Shorter than the smallest payload (12 bytes).
    #[error("payload too short ({0} bytes)")]
    TooShort(usize),
    /// The checksum does not match.
    #[error("payload checksum mismatch")]
    Checksum,
    /// A version this build does not read.
    #[error("unsupported payload version {0}")]
    Version(u16),
    /// The first byte is not [`DUMP_MAGIC`].
    #[error("bad payload magic {0:#04x}")]
    Magic(u8),
    /// Unknown flag bits, or a TTL flag without room for the TTL.
    #[error("bad payload flags {0:#04x}")]
    Flags(u8),
}

/// A decoded payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dumped {
    /// The value bytes as given to [`encode`].
    pub value: Vec<u8>,
    /// The TTL in ms, if one was encoded.
    pub ttl_ms: Option<u64>,
}

/// Encodes `value` with an optional TTL (ms) into a payload.
pub fn encode(value: &[u8], ttl_ms: Option<u64>) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len() + 20);
    out.push(DUMP_MAGIC);
    match ttl_ms {
        Some(t) => {
            out.push(FLAG_TTL);
            out.extend_from_slice(&t.to_le_bytes());
        }
        None => out.push(0),
    }
    out.extend_from_slice(value);
    out.extend_from_slice(&DUMP_VERSION.to_le_bytes());
    let crc = CRC64.checksum(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Decodes and verifies a payload (checksum first, then version, magic and flags).
///
/// # Errors
/// [`DumpError`] for any corruption; never panics.
pub fn decode(payload: &[u8]) -> Result<Dumped, DumpError> {
    if payload.len() < 2 + TRAILER {
        return Err(DumpError::TooShort(payload.len()));
    }
    let (body, crc_bytes) = payload.split_at(payload.len() - 8);
    let mut crc = [0u8; 8];
    crc.copy_from_slice(crc_bytes);
    if CRC64.checksum(body) != u64::from_le_bytes(crc) {
        return Err(DumpError::Checksum);
    }
    let (body, ver) = body.split_at(body.len() - 2);
    let version = u16::from_le_bytes([ver[0], ver[1]]);
    if version != DUMP_VERSION {
        return Err(DumpError::Version(version));
    }
    if body[0] != DUMP_MAGIC {
        return Err(DumpError::Magic(body[0]));
    }
    let flags = body[1];
    let rest = &body[2..];
    match flags {
        0 => Ok(Dumped {
            value: rest.to_vec(),
            ttl_ms: None,
        }),
        FLAG_TTL if rest.len() >= 8 => {
            let (t, value) = rest.split_at(8);
            let mut ttl = [0u8; 8];
            ttl.copy_from_slice(t);
            Ok(Dumped {
                value: value.to_vec(),
                ttl_ms: Some(u64::from_le_bytes(ttl)),
            })
        }
        f => Err(DumpError::Flags(f)),
    }
}

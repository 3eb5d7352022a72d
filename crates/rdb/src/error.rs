//! Decode and encode errors.

use crate::lzf::LzfError;
use crate::types::RdbType;

/// Why RDB or DUMP bytes were refused: the reason and the byte offset where it was found
/// (from the start of the file or payload). Nothing the decoder returned before the error is
/// affected; a decoder that returned an error returns it again on every later call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("RDB decode error at byte {offset}: {kind}")]
pub struct DecodeError {
    /// Offset of the first byte of the element that failed.
    pub offset: u64,
    /// What was wrong.
    pub kind: DecodeErrorKind,
}

/// What was wrong with RDB bytes. `#[non_exhaustive]`: new formats add reasons.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeErrorKind {
    /// The input ended inside an element (a complete input was expected: a DUMP payload, a
    /// string blob, or a file after [`crate::RdbDecoder::finish`]).
    #[error("input ends inside an element")]
    Truncated,
    /// The file does not start with `REDIS0` or `VALKEY` and three digits.
    #[error("not an RDB file (signature {0:?})")]
    BadSignature(String),
    /// An RDB version this crate (like Valkey 9.1 with `rdb-version-check strict`) does not
    /// read: 0, 12..=79 (foreign, non-OSS Redis), above 80, or a version that does not match
    /// its magic (`REDIS` carries 1..=11, `VALKEY` 80 and above; `rdbIsVersionAccepted`).
    #[error("unsupported RDB version {0}")]
    UnsupportedVersion(u32),
    /// A length prefix with an unknown two-bit/six-bit form (`rdbLoadLenByRef`).
    #[error("bad length encoding byte {0:#04x}")]
    BadLength(u8),
    /// A length where a plain length was required carries a string encoding flag.
    #[error("encoded value where a length was expected")]
    EncodedLength,
    /// A string with an unknown special encoding (`rdbGenericLoadStringObject`).
    #[error("unknown string encoding {0}")]
    BadStringEncoding(u8),
    /// An LZF-compressed string that does not decompress to its declared length.
    #[error("bad LZF string: {0}")]
    Lzf(LzfError),
    /// A length larger than this platform can address or than the input could hold.
    #[error("length {0} too large")]
    TooLarge(u64),
    /// An object type this crate does not decode: streams, modules, Valkey 9.2's path hash,
    /// or a type byte no server defines. Named for the log.
    #[error("unsupported object type {} ({})", .0.code(), .0.name())]
    UnsupportedType(RdbType),
    /// A type or opcode byte between 22 and 243 in a file with the `REDIS` magic: Redis 7.4+
    /// and other foreign formats give these bytes other meanings, so Valkey refuses them.
    #[error("foreign type or opcode {0} in an RDB with the REDIS signature")]
    ForeignType(u8),
    /// An opcode this crate does not handle (module aux data, pre-release functions, the
    /// forkless-save inline command).
    #[error("unsupported opcode {code} ({name})")]
    UnsupportedOpcode {
        /// The opcode byte.
        code: u8,
        /// Its name in Valkey's `rdb.h`.
        name: &'static str,
    },
    /// A listpack that fails Valkey's `lpValidateIntegrity` checks.
    #[error("bad listpack: {0}")]
    BadListpack(&'static str),
    /// A ziplist that fails `ziplistValidateIntegrity`.
    #[error("bad ziplist: {0}")]
    BadZiplist(&'static str),
    /// An intset that fails `intsetValidateIntegrity`.
    #[error("bad intset: {0}")]
    BadIntset(&'static str),
    /// A zipmap that fails `zipmapValidateIntegrity`.
    #[error("bad zipmap: {0}")]
    BadZipmap(&'static str),
    /// A quicklist node container other than 1 (plain) or 2 (packed).
    #[error("bad quicklist node container {0}")]
    BadContainer(u64),
    /// A quicklist node that is empty.
    #[error("empty quicklist node")]
    EmptyNode,
    /// A double in the old string form that does not parse (`rdbLoadDoubleValue`).
    #[error("bad double")]
    BadDouble,
    /// A sorted-set score that is NaN (`Zset with NAN score detected`).
    #[error("NaN score in a sorted set")]
    NanScore,
    /// A collection with no elements (`RDB_LOAD_ERR_EMPTY_KEY`; servers skip such keys in a
    /// file and refuse them in RESTORE).
    #[error("empty collection")]
    EmptyCollection,
    /// A set, hash or sorted set with a repeated member or field.
    #[error("duplicate member or field")]
    Duplicate,
    /// A hash field expiry below -1 (`RDB_TYPE_HASH_2`).
    #[error("bad hash field expiry {0}")]
    BadFieldExpiry(i64),
    /// The CRC-64 at the end does not match the bytes.
    #[error("checksum mismatch: computed {computed:#018x}, stored {stored:#018x}")]
    Checksum {
        /// The checksum of the bytes read.
        computed: u64,
        /// The checksum the input carries.
        stored: u64,
    },
    /// Bytes after the object in a DUMP payload.
    #[error("{0} bytes after the object")]
    TrailingBytes(usize),
    /// A `slot-info` aux field or slot-import record that does not parse.
    #[error("bad slot record: {0}")]
    BadSlotRecord(&'static str),
}

impl DecodeError {
    pub(crate) fn new(offset: u64, kind: DecodeErrorKind) -> DecodeError {
        DecodeError { offset, kind }
    }
}

/// Why a value could not be written in the requested format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// A sorted-set score is NaN (no server accepts one).
    #[error("NaN score in a sorted set")]
    NanScore,
    /// A hash with per-field expiry needs `RDB_TYPE_HASH_2`, which only RDB 80 (Valkey 9)
    /// has; the writer's version is older.
    #[error("hash field expiry needs RDB version 80 (Valkey 9), writing {0}")]
    FieldExpiryNeedsValkey9(u16),
    /// A collection with no elements: no server loads one (`RDB_LOAD_ERR_EMPTY_KEY`).
    #[error("empty collection")]
    EmptyCollection,
    /// The writer was used after `finish`, or an object writer wrote nothing.
    #[error("writer misuse: {0}")]
    Misuse(&'static str),
    /// A slot-import record is only defined for RDB 80 (Valkey 9).
    #[error("slot-import records need RDB version 80 (Valkey 9), writing {0}")]
    SlotImportNeedsValkey9(u16),
    /// A host value could not describe itself (the host's message).
    #[error("host value: {0}")]
    Host(String),
}

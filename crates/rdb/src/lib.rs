//! The RDB file format and DUMP payloads, read and written byte-compatibly with Redis 7.0
//! (RDB 10), Valkey 8 (RDB 11) and Valkey 9 (RDB 80), Sans-IO: bytes in, items out; values
//! in, bytes out. The full-sync, persistence, DUMP/RESTORE and migration paths of a node all
//! use it.
//!
//! Sources: Valkey `src/rdb.c`, `src/rdb.h`, `src/listpack.c`, `src/ziplist.c`,
//! `src/intset.c`, `src/zipmap.c`, `src/lzf_c.c`, `src/lzf_d.c`, `src/crc64.c`,
//! `src/cluster.c` (`verifyDumpPayload`), checked against captures of redis-server 7.0.15
//! and valkey-server 9.1.2 in `tests/vectors/`.
//!
//! # Pieces
//! * Primitives: lengths, strings (raw, 8/16/32-bit integer, [`lzf`]), doubles (binary and
//!   text), [`crc64`].
//! * Encodings: [`listpack`], [`ziplist`], [`intset`], [`zipmap`]; quicklists v1 and v2.
//! * Objects: [`RdbObject`], the owned model decoders return; [`RdbValue`], the trait a
//!   host implements for its values; [`ObjectWriter`], which picks the encoding real servers
//!   would (see [`encode`] for the table).
//! * [`dump`]: DUMP payloads (`object + RDB version + CRC-64`), checked as `verifyDumpPayload`.
//! * [`RdbDecoder`]: the streaming file decoder; [`RdbWriter`]: the chunked file writer.
//!
//! # Which version we write, and why
//! Writers stamp [`RdbVersion::COMPATIBLE`] (RDB 10, `REDIS0010`) unless told otherwise:
//! redis-server 7.0 refuses any DUMP payload or file above 10, and valkey-server 9.1 accepts
//! 1..=11 and 80 (`rdbIsVersionAccepted`, `rdb-version-check strict`). RDB 10 allows every
//! encoding up to `LIST_QUICKLIST_2`, `HASH_LISTPACK` and `ZSET_LISTPACK`; it lacks
//! `SET_LISTPACK` (RDB 11), so small non-integer sets are written as plain `SET`s, which both
//! servers convert to their in-memory listpack on load. RDB 80 (`VALKEY080`, Valkey 9 only)
//! is there for hash field expiry (`HASH_2`) and slot-import records.
//!
//! # Reading
//! Decoders accept every version Valkey 9.1 accepts and every type it reads except streams
//! and modules, which are typed errors naming the type ([`DecodeErrorKind::UnsupportedType`]).
//! Checks follow the servers' integrity validation (deep), duplicates are refused where the
//! servers always refuse them (plain sets, hashes and sorted sets, ziplist pairs, zipmaps;
//! listpacks are only checked by servers under `sanitize-dump-payload yes`, and not here).

//! # A host's loop, both ways
//!
//! ```
//! use ferrocluster_rdb::{
//!     EncodeError, EntryMeta, ItemRef, ObjectWriter, RdbDecoder, RdbObject, RdbValue,
//!     RdbWriter, UnsupportedKind, WriterConfig,
//! };
//!
//! /// The host's value type (here: strings only).
//! #[derive(Debug, PartialEq)]
//! struct Text(Vec<u8>);
//!
//! impl RdbValue for Text {
//!     fn write_rdb(&self, w: ObjectWriter<'_>) -> Result<(), EncodeError> {
//!         w.string(&self.0)
//!     }
//!     fn from_rdb(obj: RdbObject) -> Result<Text, UnsupportedKind> {
//!         match obj {
//!             RdbObject::String(s) => Ok(Text(s)),
//!             o => Err(UnsupportedKind { kind: o.kind() }),
//!         }
//!     }
//! }
//!
//! // Writing (a SAVE, a full sync): records in order, bytes taken in chunks.
//! let mut w = RdbWriter::new(WriterConfig::default());
//! w.aux_int(b"redis-bits", 64).unwrap();
//! w.select_db(0).unwrap();
//! w.resize_db(1, 1).unwrap();
//! let meta = EntryMeta { expire_ms: Some(4_102_444_800_000), ..EntryMeta::default() };
//! w.entry(b"greeting", &Text(b"hello".to_vec()), meta).unwrap();
//! w.finish().unwrap();
//! let file = w.take(); // or take_into() whenever buffered() is large enough
//!
//! // Reading (a load, a replica's sync): bytes in as they arrive, items out in order.
//! let mut d = RdbDecoder::new();
//! let mut loaded = Vec::new();
//! for chunk in file.chunks(7) {
//!     d.feed(chunk);
//!     while let Some(item) = d.poll_ref().unwrap() {
//!         if let ItemRef::Entry(e) = item {
//!             let value: Text = e.value.into_value().unwrap();
//!             loaded.push((e.db, e.key.into_owned(), value, e.expire_ms));
//!         }
//!     }
//! }
//! d.finish().unwrap(); // the checksum was read and matched
//! assert_eq!(
//!     loaded,
//!     vec![(0, b"greeting".to_vec(), Text(b"hello".to_vec()), Some(4_102_444_800_000))]
//! );
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod crc64;
mod decode;
pub mod double;
pub mod dump;
pub mod encode;
mod error;
mod file;
pub mod intset;
pub mod listpack;
pub mod lzf;
mod object;
mod read;
mod stream;
mod types;
pub mod write;
pub mod ziplist;
pub mod zipmap;

pub use encode::{Encoder, EncoderConfig, EncodingLimits, ObjectWriter};
pub use error::{DecodeError, DecodeErrorKind, EncodeError};
pub use file::{EntryMeta, RdbWriter, WriterConfig};
pub use object::{ObjectKind, RdbObject, RdbValue, UnsupportedKind};
pub use read::MAX_STRING_LEN;
pub use stream::{Entry, EntryRef, Item, ItemRef, RdbDecoder, SlotInfo, ValueRef};
pub use types::{opcode, version_accepted, Magic, RdbType, RdbVersion};

/// Decodes a complete in-memory file into its items (tests and small files; a host
/// reading a socket or a big file uses [`RdbDecoder`]).
///
/// # Errors
/// The first [`DecodeError`], or [`DecodeErrorKind::Truncated`] when the bytes end early.
pub fn decode_file(bytes: &[u8]) -> Result<Vec<Item>, DecodeError> {
    let mut d = RdbDecoder::new();
    d.feed(bytes);
    let mut items = Vec::new();
    while let Some(item) = d.poll()? {
        items.push(item);
    }
    d.finish()?;
    Ok(items)
}

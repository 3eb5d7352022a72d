//! The streaming file decoder: bytes in, in chunks of any size; items out, in order
//! (Valkey `rdbLoadRioWithLoadingCtx`).
//!
//! The decoder keeps only the bytes of the element it is in the middle of: a collection is
//! read element by element, a string once all its bytes are there, so a 1M-key file (or a
//! full sync over a socket) is never held whole and no byte is parsed twice except those of
//! an element cut by a chunk boundary, which is retried once the bytes it needs are in.
//!
//! Host loop:
//! 1. [`RdbDecoder::feed`] the bytes read;
//! 2. call [`RdbDecoder::poll`] until it returns `Ok(None)` (needs more bytes) and act on each
//!    [`Item`] in order;
//! 3. when the input ends, call [`RdbDecoder::finish`]: `Ok` only after the checksum.
//!    Bytes after the checksum (a diskless sync's EOF mark) are in
//!    [`RdbDecoder::trailing`].

use crate::crc64::Crc64;
use crate::decode::ObjectReader;
use crate::error::{DecodeError, DecodeErrorKind};
use crate::object::{RdbObject, RdbValue, UnsupportedKind};
use crate::read::{Fail, Input, PResult};
use crate::types::{opcode, version_accepted, Magic, RdbType};
use std::borrow::Cow;

/// One record of a file.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Item {
    /// The signature: magic and version.
    Header {
        /// `REDIS` or `VALKEY`.
        magic: Magic,
        /// The RDB version (10, 11, 80, ...).
        version: u32,
    },
    /// An aux field (`redis-ver`, `valkey-ver`, `redis-bits`, `ctime`, `used-mem`,
    /// `repl-stream-db`, `repl-id`, `repl-offset`, `aof-base`, `slot-info` (see
    /// [`SlotInfo::parse`]), `lua`, or any other: readers skip those they do not know).
    Aux {
        /// Field name.
        key: Vec<u8>,
        /// Field value.
        value: Vec<u8>,
    },
    /// A function library's code (`FUNCTION2`), e.g. `#!lua name=mylib ...`.
    Function(Vec<u8>),
    /// The database of the entries that follow.
    SelectDb(u64),
    /// Size hints of the current database.
    ResizeDb {
        /// Keys.
        keys: u64,
        /// Keys with an expiry.
        expires: u64,
    },
    /// Slot size hints in the opcode form (`SLOT_INFO`, Redis 7.4+ files; Valkey writes
    /// the `slot-info` aux field instead).
    SlotInfo(SlotInfo),
    /// An atomic slot migration import in progress when the file was written (`SLOT_IMPORT`,
    /// Valkey 9.0): the job name (40 bytes) and its inclusive slot ranges.
    SlotImport {
        /// The job name.
        name: Vec<u8>,
        /// Inclusive `(start, end)` slot ranges.
        ranges: Vec<(u16, u16)>,
    },
    /// A key and its value.
    Entry(Entry),
    /// The end: `checksum` is `None` when the file was written with checksums off (0).
    /// The checksum was verified when present.
    End {
        /// The stored CRC-64.
        checksum: Option<u64>,
    },
}

/// Slot size hints (`slot-info` aux field `"slot,keys,expires[,volatile-items]"`, or the
/// `SLOT_INFO` opcode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotInfo {
    /// The hash slot.
    pub slot: u16,
    /// Keys in the slot.
    pub keys: u64,
    /// Keys with an expiry in the slot.
    pub expires: u64,
    /// Keys with expiring fields (Valkey 9's fourth number; `None` when absent).
    pub volatile_items: Option<u64>,
}

impl SlotInfo {
    /// Parses a `slot-info` aux value as Valkey does (`sscanf("%i,%lu,%lu,%lu") >= 3`).
    ///
    /// # Errors
    /// [`DecodeErrorKind::BadSlotRecord`] for fewer than three numbers or a slot >= 16384.
    pub fn parse(value: &[u8]) -> Result<SlotInfo, DecodeErrorKind> {
        let bad = DecodeErrorKind::BadSlotRecord("slot-info needs slot,keys,expires");
        let t = std::str::from_utf8(value).map_err(|_| bad.clone())?;
        let mut it = t.split(',').map(|p| p.trim().parse::<u64>());
        let (Some(Ok(slot)), Some(Ok(keys)), Some(Ok(expires))) = (it.next(), it.next(), it.next())
        else {
            return Err(bad);
        };
        if slot >= 16384 {
            return Err(DecodeErrorKind::BadSlotRecord("slot out of range"));
        }
        Ok(SlotInfo {
            slot: slot as u16,
            keys,
            expires,
            volatile_items: it.next().and_then(Result::ok),
        })
    }
}

/// A key, its value and what the opcodes before it said.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The database (last `SELECTDB`, 0 before any).
    pub db: u64,
    /// The key.
    pub key: Vec<u8>,
    /// The value.
    pub object: RdbObject,
    /// The type byte it was stored with.
    pub rdb_type: RdbType,
    /// Absolute expiry, Unix ms (the seconds form multiplied by 1000).
    pub expire_ms: Option<i64>,
    /// LRU idle time, seconds (`IDLE`).
    pub lru_idle_s: Option<u64>,
    /// LFU counter (`FREQ`).
    pub lfu_freq: Option<u8>,
}

#[derive(Debug)]
enum State {
    Header,
    Records,
    Value { key: Vec<u8>, reader: ObjectReader },
    Checksum,
    Done,
}

/// The streaming decoder (see the module docs for the host loop).
#[derive(Debug)]
pub struct RdbDecoder {
    buf: Vec<u8>,
    core: Core,
}

/// Everything but the buffer, so an item can borrow the buffer while the state changes.
#[derive(Debug)]
struct Core {
    /// Bytes of `buf` consumed.
    pos: usize,
    /// File offset of `buf[0]`.
    base: u64,
    crc: Crc64,
    /// Bytes of `buf` already in `crc`.
    crc_upto: usize,
    state: State,
    magic: Option<Magic>,
    version: u32,
    db: u64,
    expire_ms: Option<i64>,
    lru_idle_s: Option<u64>,
    lfu_freq: Option<u8>,
    /// File offset the buffer must reach before parsing is worth retrying.
    need: u64,
    error: Option<DecodeError>,
    empty_keys_skipped: u64,
}

/// A key's value as [`RdbDecoder::poll_ref`] gives it: strings borrowed from the decoder's
/// buffer when they were stored raw, other values owned.
#[derive(Debug, Clone, PartialEq)]
pub enum ValueRef<'a> {
    /// A string value.
    String(Cow<'a, [u8]>),
    /// Any other value.
    Object(RdbObject),
}

impl ValueRef<'_> {
    /// The owned object.
    pub fn into_object(self) -> RdbObject {
        match self {
            ValueRef::String(s) => RdbObject::String(s.into_owned()),
            ValueRef::Object(o) => o,
        }
    }

    /// The value as a host value: strings through [`RdbValue::from_rdb_string`] (no copy
    /// for hosts that override it), others through [`RdbValue::from_rdb`].
    ///
    /// # Errors
    /// The host's [`UnsupportedKind`].
    pub fn into_value<V: RdbValue>(self) -> Result<V, UnsupportedKind> {
        match self {
            ValueRef::String(s) => V::from_rdb_string(&s),
            ValueRef::Object(o) => V::from_rdb(o),
        }
    }
}

/// An [`Entry`] whose key and string value may borrow the decoder's buffer (valid until the
/// next call on the decoder).
#[derive(Debug, Clone, PartialEq)]
pub struct EntryRef<'a> {
    /// The database (last `SELECTDB`, 0 before any).
    pub db: u64,
    /// The key.
    pub key: Cow<'a, [u8]>,
    /// The value.
    pub value: ValueRef<'a>,
    /// The type byte it was stored with.
    pub rdb_type: RdbType,
    /// Absolute expiry, Unix ms.
    pub expire_ms: Option<i64>,
    /// LRU idle time, seconds.
    pub lru_idle_s: Option<u64>,
    /// LFU counter.
    pub lfu_freq: Option<u8>,
}

impl EntryRef<'_> {
    /// The owned entry.
    pub fn into_owned(self) -> Entry {
        Entry {
            db: self.db,
            key: self.key.into_owned(),
            object: self.value.into_object(),
            rdb_type: self.rdb_type,
            expire_ms: self.expire_ms,
            lru_idle_s: self.lru_idle_s,
            lfu_freq: self.lfu_freq,
        }
    }
}

/// What [`RdbDecoder::poll_ref`] yields: an entry that may borrow, or any other item.
#[derive(Debug, Clone, PartialEq)]
pub enum ItemRef<'a> {
    /// A key and its value.
    Entry(EntryRef<'a>),
    /// Any other record (never [`Item::Entry`]).
    Item(Item),
}

impl ItemRef<'_> {
    /// The owned item.
    pub fn into_owned(self) -> Item {
        match self {
            ItemRef::Entry(e) => Item::Entry(e.into_owned()),
            ItemRef::Item(i) => i,
        }
    }
}

impl Default for RdbDecoder {
    fn default() -> RdbDecoder {
        RdbDecoder::new()
    }
}

/// Compaction happens once this many consumed bytes sit at the buffer's front.
const COMPACT_AT: usize = 64 * 1024;

impl RdbDecoder {
    /// A decoder expecting the signature.
    pub fn new() -> RdbDecoder {
        RdbDecoder {
            buf: Vec::new(),
            core: Core::new(),
        }
    }

    /// Adds input bytes.
    pub fn feed(&mut self, bytes: &[u8]) {
        let c = &mut self.core;
        // The checksum takes the consumed bytes here, in pieces as big as the host's reads
        // (per item it would pay the carry-less multiplication's set-up each time).
        if !matches!(c.state, State::Done) {
            c.crc_with(&self.buf);
        }
        if c.pos >= COMPACT_AT && c.pos * 2 >= self.buf.len() {
            self.buf.drain(..c.pos);
            c.base += c.pos as u64;
            c.crc_upto = c.crc_upto.saturating_sub(c.pos);
            c.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// File offset of the next byte to decode.
    pub fn offset(&self) -> u64 {
        self.core.base + self.core.pos as u64
    }

    /// The RDB version, once the signature was read (0 before).
    pub fn version(&self) -> u32 {
        self.core.version
    }

    /// Keys skipped because their collection was empty (servers skip them too).
    pub fn empty_keys_skipped(&self) -> u64 {
        self.core.empty_keys_skipped
    }

    /// Whether the checksum was read.
    pub fn is_done(&self) -> bool {
        matches!(self.core.state, State::Done)
    }

    /// Bytes fed after the end of the file (only meaningful once [`is_done`](Self::is_done)).
    pub fn trailing(&self) -> &[u8] {
        if self.is_done() {
            &self.buf[self.core.pos..]
        } else {
            &[]
        }
    }

    /// The input ended.
    ///
    /// # Errors
    /// [`DecodeErrorKind::Truncated`] unless the checksum was read; the decoding error, if
    /// one happened.
    pub fn finish(&self) -> Result<(), DecodeError> {
        if let Some(e) = &self.core.error {
            return Err(e.clone());
        }
        if self.is_done() {
            Ok(())
        } else {
            Err(DecodeError::new(
                self.core.base + self.buf.len() as u64,
                DecodeErrorKind::Truncated,
            ))
        }
    }

    /// The next item, `Ok(None)` when more input is needed (or after [`Item::End`]).
    ///
    /// # Errors
    /// [`DecodeError`] with the file offset; every later call returns it again.
    pub fn poll(&mut self) -> Result<Option<Item>, DecodeError> {
        Ok(self.poll_ref()?.map(ItemRef::into_owned))
    }

    /// As [`poll`](Self::poll), with keys and raw string values borrowed from the decoder's
    /// buffer: a host that copies them into its own keyspace saves an allocation per key and
    /// per string value.
    ///
    /// # Errors
    /// As [`poll`](Self::poll).
    pub fn poll_ref(&mut self) -> Result<Option<ItemRef<'_>>, DecodeError> {
        let c = &mut self.core;
        if let Some(e) = &c.error {
            return Err(e.clone());
        }
        if c.base + (self.buf.len() as u64) < c.need {
            return Ok(None);
        }
        match c.run(&self.buf) {
            Ok(item) => Ok(item),
            Err(Fail::Incomplete(n)) => {
                c.need = c.base + n as u64;
                Ok(None)
            }
            Err(Fail::Invalid { at, kind }) => {
                let e = DecodeError::new(c.base + at as u64, kind);
                c.error = Some(e.clone());
                Err(e)
            }
        }
    }
}

impl Core {
    fn new() -> Core {
        Core {
            pos: 0,
            base: 0,
            crc: Crc64::new(),
            crc_upto: 0,
            state: State::Header,
            magic: None,
            version: 0,
            db: 0,
            expire_ms: None,
            lru_idle_s: None,
            lfu_freq: None,
            need: 0,
            error: None,
            empty_keys_skipped: 0,
        }
    }

    /// Adds the consumed bytes of `buf` (the decoder's buffer) not yet in the checksum.
    fn crc_with(&mut self, buf: &[u8]) {
        if self.pos > self.crc_upto {
            self.crc.update(&buf[self.crc_upto..self.pos]);
            self.crc_upto = self.pos;
        }
    }

    fn run<'b>(&mut self, buf: &'b [u8]) -> PResult<Option<ItemRef<'b>>> {
        loop {
            let mut inp = Input { buf, pos: self.pos };
            match &mut self.state {
                State::Header => {
                    let sig = inp.take(9)?;
                    let (magic, digits) = if &sig[..6] == b"REDIS0" {
                        (Magic::Redis, &sig[5..])
                    } else if &sig[..6] == b"VALKEY" {
                        (Magic::Valkey, &sig[6..])
                    } else {
                        return inp.invalid(
                            0,
                            DecodeErrorKind::BadSignature(String::from_utf8_lossy(sig).into()),
                        );
                    };
                    let version: u32 = std::str::from_utf8(digits)
                        .ok()
                        .and_then(|d| d.parse().ok())
                        .unwrap_or(0);
                    if !version_accepted(version, Some(magic)) {
                        return inp.invalid(0, DecodeErrorKind::UnsupportedVersion(version));
                    }
                    self.magic = Some(magic);
                    self.version = version;
                    self.pos = inp.pos;
                    self.state = State::Records;
                    return Ok(Some(ItemRef::Item(Item::Header { magic, version })));
                }
                State::Records => {
                    let at = inp.pos;
                    let t = inp.u8()?;
                    if self.magic == Some(Magic::Redis) && (22..=243).contains(&t) {
                        return inp.invalid(at, DecodeErrorKind::ForeignType(t));
                    }
                    let item = match t {
                        opcode::EXPIRETIME => {
                            let s = i32::from_le_bytes(inp.array()?);
                            self.expire_ms = Some(i64::from(s) * 1000);
                            None
                        }
                        opcode::EXPIRETIME_MS => {
                            self.expire_ms = Some(inp.i64_le()?);
                            None
                        }
                        opcode::FREQ => {
                            self.lfu_freq = Some(inp.u8()?);
                            None
                        }
                        opcode::IDLE => {
                            self.lru_idle_s = Some(inp.plain_len()?);
                            None
                        }
                        opcode::EOF => {
                            self.pos = inp.pos;
                            self.crc_with(buf);
                            if self.version >= 5 {
                                self.state = State::Checksum;
                                continue;
                            }
                            self.state = State::Done;
                            return Ok(Some(ItemRef::Item(Item::End { checksum: None })));
                        }
                        opcode::SELECTDB => {
                            let db = inp.plain_len()?;
                            self.db = db;
                            Some(Item::SelectDb(db))
                        }
                        opcode::RESIZEDB => {
                            let keys = inp.plain_len()?;
                            let expires = inp.plain_len()?;
                            Some(Item::ResizeDb { keys, expires })
                        }
                        opcode::SLOT_INFO => {
                            let slot = inp.plain_len()?;
                            let keys = inp.plain_len()?;
                            let expires = inp.plain_len()?;
                            if slot >= 16384 {
                                return inp.invalid(
                                    at,
                                    DecodeErrorKind::BadSlotRecord("slot out of range"),
                                );
                            }
                            Some(Item::SlotInfo(SlotInfo {
                                slot: slot as u16,
                                keys,
                                expires,
                                volatile_items: None,
                            }))
                        }
                        opcode::SLOT_IMPORT => {
                            let name = inp.string()?;
                            let n = inp.count()?;
                            let mut ranges = Vec::with_capacity(n.min(16384) as usize);
                            for _ in 0..n {
                                let s = inp.plain_len()?;
                                let e = inp.plain_len()?;
                                if s > e || e >= 16384 {
                                    return inp.invalid(
                                        at,
                                        DecodeErrorKind::BadSlotRecord("bad slot range"),
                                    );
                                }
                                ranges.push((s as u16, e as u16));
                            }
                            Some(Item::SlotImport { name, ranges })
                        }
                        opcode::FUNCTION2 => Some(Item::Function(inp.string()?)),
                        opcode::AUX => {
                            let key = inp.string()?;
                            let value = inp.string()?;
                            Some(Item::Aux { key, value })
                        }
                        opcode::MODULE_AUX => {
                            return inp.invalid(
                                at,
                                DecodeErrorKind::UnsupportedOpcode {
                                    code: t,
                                    name: "module-aux",
                                },
                            )
                        }
                        opcode::FUNCTION_PRE_GA => {
                            return inp.invalid(
                                at,
                                DecodeErrorKind::UnsupportedOpcode {
                                    code: t,
                                    name: "function-pre-ga",
                                },
                            )
                        }
                        opcode::UPDATE => {
                            return inp.invalid(
                                at,
                                DecodeErrorKind::UnsupportedOpcode {
                                    code: t,
                                    name: "update",
                                },
                            )
                        }
                        0 => {
                            // A string entry whose bytes are all here: key and value borrowed
                            // (the common case of a big file), else the general path.
                            let mut t2 = inp;
                            if let (Ok(key), Ok(value)) = (t2.string_cow(), t2.string_cow()) {
                                self.pos = t2.pos;
                                return Ok(Some(ItemRef::Entry(EntryRef {
                                    db: self.db,
                                    key,
                                    value: ValueRef::String(value),
                                    rdb_type: RdbType::String,
                                    expire_ms: self.expire_ms.take(),
                                    lru_idle_s: self.lru_idle_s.take(),
                                    lfu_freq: self.lfu_freq.take(),
                                })));
                            }
                            let reader = ObjectReader::new(RdbType::String)
                                .map_err(|kind| Fail::Invalid { at, kind })?;
                            let key = inp.string()?;
                            self.pos = inp.pos;
                            self.state = State::Value { key, reader };
                            continue;
                        }
                        t => {
                            let rt = RdbType::from_code(t);
                            let reader =
                                ObjectReader::new(rt).map_err(|kind| Fail::Invalid { at, kind })?;
                            let key = inp.string()?;
                            self.pos = inp.pos;
                            self.state = State::Value { key, reader };
                            continue;
                        }
                    };
                    self.pos = inp.pos;
                    if let Some(item) = item {
                        return Ok(Some(ItemRef::Item(item)));
                    }
                }
                State::Value { reader, .. } => {
                    let r = reader.step(&mut inp);
                    self.pos = inp.pos;
                    let rdb_type = reader.rdb_type();
                    let obj = r?;
                    let State::Value { key, .. } =
                        std::mem::replace(&mut self.state, State::Records)
                    else {
                        unreachable!("state checked by the match above")
                    };
                    let expire_ms = self.expire_ms.take();
                    let lru_idle_s = self.lru_idle_s.take();
                    let lfu_freq = self.lfu_freq.take();
                    match obj {
                        Some(object) => {
                            return Ok(Some(ItemRef::Entry(EntryRef {
                                db: self.db,
                                key: Cow::Owned(key),
                                value: match object {
                                    RdbObject::String(s) => ValueRef::String(Cow::Owned(s)),
                                    o => ValueRef::Object(o),
                                },
                                rdb_type,
                                expire_ms,
                                lru_idle_s,
                                lfu_freq,
                            })))
                        }
                        // An empty collection: skipped, as rdbLoadRioWithLoadingCtx does.
                        None => self.empty_keys_skipped += 1,
                    }
                }
                State::Checksum => {
                    let stored = u64::from_le_bytes(inp.array()?);
                    self.crc_with(buf);
                    let computed = self.crc.value();
                    self.pos = inp.pos;
                    self.state = State::Done;
                    if stored != 0 && stored != computed {
                        return inp
                            .invalid(inp.pos - 8, DecodeErrorKind::Checksum { computed, stored });
                    }
                    return Ok(Some(ItemRef::Item(Item::End {
                        checksum: (stored != 0).then_some(stored),
                    })));
                }
                State::Done => return Ok(None),
            }
        }
    }
}

//! The chunked file writer: records in, bytes out in pieces the host writes to a file or a
//! socket as it goes (Valkey `rdbSaveRio`, `rdbSaveDb`, `rdbSaveKeyValuePair`).
//!
//! A file is: the signature, aux fields, function libraries, (Valkey 9) slot imports, then
//! per non-empty database `SELECTDB`, `RESIZEDB`, (cluster mode) a `slot-info` aux field
//! before each slot's first key, the keys; `EOF` and the CRC-64 of everything before it.
//! Valkey writes the aux fields `valkey-ver` (Redis: `redis-ver`), `redis-bits`, `ctime`,
//! `used-mem`, for replication `repl-stream-db`, `repl-id`, `repl-offset`, then
//! `aof-base`; the writer leaves their values to the host (a field it cannot fill
//! truthfully it leaves out: readers skip missing and unknown aux fields).
//!
//! Host loop: call the record methods in file order; whenever
//! [`RdbWriter::buffered`] is large enough (say 64 KiB), [`RdbWriter::take`] the bytes and
//! write them; after [`RdbWriter::finish`], take the rest.

use crate::crc64::Crc64;
use crate::encode::{Encoder, EncoderConfig};
use crate::error::EncodeError;
use crate::object::{RdbObject, RdbValue};
use crate::read::push_int_text;
use crate::types::{opcode, RdbVersion};
use crate::write::{write_i64_le, write_len};

/// What the opcodes before a key say about it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EntryMeta {
    /// Absolute expiry, Unix ms (`EXPIRETIME_MS`).
    pub expire_ms: Option<i64>,
    /// LRU idle time, seconds (`IDLE`; servers write it under an LRU maxmemory policy).
    pub lru_idle_s: Option<u64>,
    /// LFU counter (`FREQ`; under an LFU policy).
    pub lfu_freq: Option<u8>,
}

/// Writer settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterConfig {
    /// Version and encodings.
    pub encoder: EncoderConfig,
    /// `rdbchecksum`: write the CRC-64 (else 0, which readers take as "not computed").
    pub checksum: bool,
}

impl Default for WriterConfig {
    fn default() -> WriterConfig {
        WriterConfig {
            encoder: EncoderConfig::default(),
            checksum: true,
        }
    }
}

/// Builds an RDB file or stream (see the module docs).
#[derive(Debug)]
pub struct RdbWriter {
    enc: Encoder,
    buf: Vec<u8>,
    crc: Crc64,
    crc_upto: usize,
    checksum: bool,
    finished: bool,
    taken: u64,
}

impl RdbWriter {
    /// A writer; the signature of `config`'s version is the first buffered bytes.
    pub fn new(config: WriterConfig) -> RdbWriter {
        let mut buf = Vec::with_capacity(64 * 1024);
        buf.extend_from_slice(&config.encoder.version.signature());
        RdbWriter {
            enc: Encoder::new(config.encoder),
            buf,
            crc: Crc64::new(),
            crc_upto: 0,
            checksum: config.checksum,
            finished: false,
            taken: 0,
        }
    }

    /// The version written.
    pub fn version(&self) -> RdbVersion {
        self.enc.config().version
    }

    fn check(&self) -> Result<(), EncodeError> {
        if self.finished {
            Err(EncodeError::Misuse("record after finish"))
        } else {
            Ok(())
        }
    }

    /// An aux field.
    ///
    /// # Errors
    /// [`EncodeError::Misuse`] after [`finish`](Self::finish).
    pub fn aux(&mut self, key: &[u8], value: &[u8]) -> Result<(), EncodeError> {
        self.check()?;
        self.buf.push(opcode::AUX);
        self.enc.write_string(&mut self.buf, key);
        self.enc.write_string(&mut self.buf, value);
        Ok(())
    }

    /// An aux field with an integer value (`rdbSaveAuxFieldStrInt`).
    ///
    /// # Errors
    /// As [`aux`](Self::aux).
    pub fn aux_int(&mut self, key: &[u8], value: i64) -> Result<(), EncodeError> {
        let mut v = Vec::with_capacity(20);
        push_int_text(&mut v, value);
        self.aux(key, &v)
    }

    /// A function library (`FUNCTION2` and its code).
    ///
    /// # Errors
    /// As [`aux`](Self::aux).
    pub fn function(&mut self, code: &[u8]) -> Result<(), EncodeError> {
        self.check()?;
        self.buf.push(opcode::FUNCTION2);
        self.enc.write_string(&mut self.buf, code);
        Ok(())
    }

    /// An atomic-slot-migration import in progress (`SLOT_IMPORT`, RDB 80 only): job name
    /// and inclusive slot ranges.
    ///
    /// # Errors
    /// [`EncodeError::SlotImportNeedsValkey9`] below RDB 80.
    pub fn slot_import(&mut self, name: &[u8], ranges: &[(u16, u16)]) -> Result<(), EncodeError> {
        self.check()?;
        let v = self.version();
        if v < RdbVersion::V80 {
            return Err(EncodeError::SlotImportNeedsValkey9(v.number()));
        }
        self.buf.push(opcode::SLOT_IMPORT);
        self.enc.write_string(&mut self.buf, name);
        write_len(&mut self.buf, ranges.len() as u64);
        for &(s, e) in ranges {
            write_len(&mut self.buf, u64::from(s));
            write_len(&mut self.buf, u64::from(e));
        }
        Ok(())
    }

    /// `SELECTDB`.
    ///
    /// # Errors
    /// As [`aux`](Self::aux).
    pub fn select_db(&mut self, db: u64) -> Result<(), EncodeError> {
        self.check()?;
        self.buf.push(opcode::SELECTDB);
        write_len(&mut self.buf, db);
        Ok(())
    }

    /// `RESIZEDB` with the database's key and expire counts.
    ///
    /// # Errors
    /// As [`aux`](Self::aux).
    pub fn resize_db(&mut self, keys: u64, expires: u64) -> Result<(), EncodeError> {
        self.check()?;
        self.buf.push(opcode::RESIZEDB);
        write_len(&mut self.buf, keys);
        write_len(&mut self.buf, expires);
        Ok(())
    }

    /// The `slot-info` aux field Valkey 8+ writes before a slot's first key in cluster mode:
    /// `"slot,keys,expires,volatile-items"` (readers older than 9.0 use the first three).
    ///
    /// # Errors
    /// As [`aux`](Self::aux).
    pub fn slot_info(
        &mut self,
        slot: u16,
        keys: u64,
        expires: u64,
        volatile_items: u64,
    ) -> Result<(), EncodeError> {
        let v = format!("{slot},{keys},{expires},{volatile_items}");
        self.aux(b"slot-info", v.as_bytes())
    }

    /// A key with its value and meta opcodes.
    ///
    /// # Errors
    /// The value's [`EncodeError`]; nothing of the entry is then buffered.
    pub fn entry<V: RdbValue>(
        &mut self,
        key: &[u8],
        value: &V,
        meta: EntryMeta,
    ) -> Result<(), EncodeError> {
        self.check()?;
        let start = self.buf.len();
        if let Some(t) = meta.expire_ms {
            self.buf.push(opcode::EXPIRETIME_MS);
            write_i64_le(&mut self.buf, t);
        }
        if let Some(idle) = meta.lru_idle_s {
            self.buf.push(opcode::IDLE);
            write_len(&mut self.buf, idle);
        }
        if let Some(f) = meta.lfu_freq {
            self.buf.extend_from_slice(&[opcode::FREQ, f]);
        }
        let body = self.buf.len();
        let r = value.write_rdb(self.enc.entry(&mut self.buf, key));
        if r.is_ok() && self.buf.len() == body {
            self.buf.truncate(start);
            return Err(EncodeError::Misuse("the value wrote no object"));
        }
        if r.is_err() {
            self.buf.truncate(start);
        }
        r
    }

    /// A decoded object as an entry.
    ///
    /// # Errors
    /// As [`entry`](Self::entry).
    pub fn entry_object(
        &mut self,
        key: &[u8],
        obj: &RdbObject,
        meta: EntryMeta,
    ) -> Result<(), EncodeError> {
        self.entry(key, obj, meta)
    }

    /// Writes `EOF` and the checksum. The file is complete once the rest is taken.
    ///
    /// # Errors
    /// [`EncodeError::Misuse`] when called twice.
    pub fn finish(&mut self) -> Result<(), EncodeError> {
        self.check()?;
        self.buf.push(opcode::EOF);
        self.crc.update(&self.buf[self.crc_upto..]);
        self.crc_upto = self.buf.len();
        let c = if self.checksum { self.crc.value() } else { 0 };
        self.buf.extend_from_slice(&c.to_le_bytes());
        self.crc_upto = self.buf.len();
        self.finished = true;
        Ok(())
    }

    /// Bytes buffered, not yet taken.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Bytes taken so far.
    pub fn bytes_taken(&self) -> u64 {
        self.taken
    }

    /// Whether [`finish`](Self::finish) was called.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Moves the buffered bytes to the end of `out`.
    pub fn take_into(&mut self, out: &mut Vec<u8>) {
        if self.crc_upto < self.buf.len() {
            self.crc.update(&self.buf[self.crc_upto..]);
        }
        self.taken += self.buf.len() as u64;
        out.extend_from_slice(&self.buf);
        self.buf.clear();
        self.crc_upto = 0;
    }

    /// The buffered bytes (the writer keeps an empty buffer of the same capacity).
    pub fn take(&mut self) -> Vec<u8> {
        if self.crc_upto < self.buf.len() {
            self.crc.update(&self.buf[self.crc_upto..]);
        }
        self.taken += self.buf.len() as u64;
        let cap = self.buf.capacity();
        self.crc_upto = 0;
        std::mem::replace(&mut self.buf, Vec::with_capacity(cap))
    }
}

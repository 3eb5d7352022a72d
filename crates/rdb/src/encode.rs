//! Encoding one object the way the servers would store it: [`Encoder`] (version, LZF,
//! thresholds) and the [`ObjectWriter`] a host's [`RdbValue`](crate::RdbValue) describes
//! itself to.
//!
//! Encodings chosen (Valkey `rdbSaveObjectType`/`rdbSaveObject` with the default
//! thresholds of [`EncodingLimits`]):
//!
//! | value | condition | type written |
//! |---|---|---|
//! | string | always | `STRING` (integer form for canonical integers in 32 bits, LZF over 20 bytes) |
//! | list | always | `LIST_QUICKLIST_2`: listpack nodes of at most 8 KiB (`list-max-listpack-size -2`), elements over 8 KiB in `PLAIN` nodes |
//! | set | all canonical integers, at most 512 | `SET_INTSET` |
//! | set | otherwise at most 128 members of at most 64 bytes, RDB 11+ | `SET_LISTPACK` |
//! | set | otherwise | `SET` |
//! | sorted set | at most 128 members of at most 64 bytes | `ZSET_LISTPACK` (score order) |
//! | sorted set | otherwise | `ZSET_2` (binary doubles) |
//! | hash | at most 512 fields, fields and values of at most 64 bytes | `HASH_LISTPACK` |
//! | hash | otherwise | `HASH` |
//! | hash with field expiry | RDB 80 only | `HASH_2` |

use crate::decode::{CONTAINER_PACKED, CONTAINER_PLAIN};
use crate::double::format_double;
use crate::error::EncodeError;
use crate::intset;
use crate::listpack::ListpackWriter;
use crate::object::RdbObject;
use crate::read::parse_canonical_int;
use crate::types::{RdbType, RdbVersion};
use crate::write::{write_double_bin, write_i64_le, write_len, StringWriter};

/// The encoding thresholds (Valkey's config names and defaults; Redis 7.0 has the same
/// defaults, and no set listpack).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodingLimits {
    /// `hash-max-listpack-entries` (512).
    pub hash_max_listpack_entries: usize,
    /// `hash-max-listpack-value` (64 bytes).
    pub hash_max_listpack_value: usize,
    /// `set-max-intset-entries` (512).
    pub set_max_intset_entries: usize,
    /// `set-max-listpack-entries` (128).
    pub set_max_listpack_entries: usize,
    /// `set-max-listpack-value` (64 bytes).
    pub set_max_listpack_value: usize,
    /// `zset-max-listpack-entries` (128).
    pub zset_max_listpack_entries: usize,
    /// `zset-max-listpack-value` (64 bytes).
    pub zset_max_listpack_value: usize,
    /// Largest list node listpack, bytes (`list-max-listpack-size -2`: 8192). An element
    /// longer than this gets a `PLAIN` node of its own, as Valkey 8+ (and Redis 7.2+) store it
    /// (`isLargeElement`); Redis 7.0 packs elements below 1 GiB, and reads plain nodes too.
    pub list_max_listpack_bytes: usize,
}

impl Default for EncodingLimits {
    fn default() -> EncodingLimits {
        EncodingLimits {
            hash_max_listpack_entries: 512,
            hash_max_listpack_value: 64,
            set_max_intset_entries: 512,
            set_max_listpack_entries: 128,
            set_max_listpack_value: 64,
            zset_max_listpack_entries: 128,
            zset_max_listpack_value: 64,
            list_max_listpack_bytes: 8192,
        }
    }
}

/// What an [`Encoder`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncoderConfig {
    /// The RDB version stamped, which bounds the types used (default
    /// [`RdbVersion::COMPATIBLE`]).
    pub version: RdbVersion,
    /// `rdbcompression`: LZF for strings over 20 bytes (default on, as the servers).
    pub compress: bool,
    /// Encoding thresholds.
    pub limits: EncodingLimits,
}

impl Default for EncoderConfig {
    fn default() -> EncoderConfig {
        EncoderConfig {
            version: RdbVersion::COMPATIBLE,
            compress: true,
            limits: EncodingLimits::default(),
        }
    }
}

/// Writes objects; keeps the LZF table and scratch buffers between objects.
#[derive(Debug)]
pub struct Encoder {
    config: EncoderConfig,
    strings: StringWriter,
}

impl Default for Encoder {
    fn default() -> Encoder {
        Encoder::new(EncoderConfig::default())
    }
}

impl Encoder {
    /// An encoder with `config`.
    pub fn new(config: EncoderConfig) -> Encoder {
        Encoder {
            config,
            strings: StringWriter::new(config.compress),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &EncoderConfig {
        &self.config
    }

    /// An object writer that appends `[type] value` to `out` (DUMP payload bodies).
    pub fn object<'a>(&'a mut self, out: &'a mut Vec<u8>) -> ObjectWriter<'a> {
        ObjectWriter {
            enc: self,
            out,
            key: None,
        }
    }

    /// An object writer that appends `[type] key value` to `out` (file entries).
    pub fn entry<'a>(&'a mut self, out: &'a mut Vec<u8>, key: &'a [u8]) -> ObjectWriter<'a> {
        ObjectWriter {
            enc: self,
            out,
            key: Some(key),
        }
    }

    /// Writes a string with the string rules (integer form, LZF).
    pub fn write_string(&mut self, out: &mut Vec<u8>, s: &[u8]) {
        self.strings.write(out, s);
    }
}

/// Receives one value from a host (see [`RdbValue`](crate::RdbValue)): call exactly one
/// method. Collections are passed as iterators that can be cloned (a `Vec`'s, a `HashMap`'s
/// or a `BTreeMap`'s `iter()` can), because the encoding is chosen from a first pass over
/// the elements (count, sizes, integers) and written in a second one.
#[derive(Debug)]
pub struct ObjectWriter<'a> {
    enc: &'a mut Encoder,
    out: &'a mut Vec<u8>,
    key: Option<&'a [u8]>,
}

fn ord_score(a: &(&[u8], f64), b: &(&[u8], f64)) -> std::cmp::Ordering {
    a.1.total_cmp(&b.1).then_with(|| a.0.cmp(b.0))
}

/// Bytes of the listpack entry (encoding, data, back length) for `s` (`lpAppend`).
fn lp_entry_size(s: &[u8]) -> usize {
    let l = match (s.len() <= 20).then(|| parse_canonical_int(s)).flatten() {
        Some(v) if (0..=127).contains(&v) => 1,
        Some(v) if (-4096..=4095).contains(&v) => 2,
        Some(v) if (-32768..=32767).contains(&v) => 3,
        Some(v) if (-8388608..=8388607).contains(&v) => 4,
        Some(v) if i32::try_from(v).is_ok() => 5,
        Some(_) => 9,
        None if s.len() < 64 => 1 + s.len(),
        None if s.len() < 4096 => 2 + s.len(),
        None => 5 + s.len(),
    };
    l + if l <= 127 {
        1
    } else if l < 16383 {
        2
    } else if l < 2097151 {
        3
    } else if l < 268435455 {
        4
    } else {
        5
    }
}

impl<'a> ObjectWriter<'a> {
    fn head(&mut self, t: RdbType) {
        debug_assert!(self.enc.config.version.allows(t));
        self.out.push(t.code());
        if let Some(k) = self.key {
            self.enc.strings.write(self.out, k);
        }
    }

    /// A string value.
    pub fn string(mut self, s: &[u8]) -> Result<(), EncodeError> {
        self.head(RdbType::String);
        self.enc.strings.write(self.out, s);
        Ok(())
    }

    /// A string value that holds an integer (`rdbSaveLongLongAsStringObject`).
    pub fn int(mut self, v: i64) -> Result<(), EncodeError> {
        self.head(RdbType::String);
        self.enc.strings.write_int(self.out, v);
        Ok(())
    }

    /// A list, head first: `LIST_QUICKLIST_2` with the servers' node boundaries for RPUSHed
    /// elements (a node takes elements while its listpack plus the element plus 8 stays
    /// within 8 KiB; `_quicklistNodeAllowInsert`).
    ///
    /// # Errors
    /// [`EncodeError::EmptyCollection`] for no elements.
    pub fn list<I, T>(mut self, items: I) -> Result<(), EncodeError>
    where
        I: IntoIterator<Item = T>,
        I::IntoIter: Clone,
        T: AsRef<[u8]>,
    {
        let items = items.into_iter();
        let limits = self.enc.config.limits;
        // Pass 1: count the nodes.
        let mut nodes = 0u64;
        let mut node_bytes: Option<usize> = None; // None: no open packed node
        for it in items.clone() {
            let s = it.as_ref();
            if s.len() > limits.list_max_listpack_bytes {
                nodes += 1;
                node_bytes = None;
                continue;
            }
            match node_bytes {
                Some(b) if b + s.len() + 8 <= limits.list_max_listpack_bytes => {
                    node_bytes = Some(b + lp_entry_size(s));
                }
                _ => {
                    nodes += 1;
                    node_bytes = Some(7 + lp_entry_size(s));
                }
            }
        }
        if nodes == 0 {
            return Err(EncodeError::EmptyCollection);
        }
        self.head(RdbType::ListQuicklist2);
        write_len(self.out, nodes);
        // Pass 2: write them.
        let mut lp: Option<ListpackWriter> = None;
        for it in items {
            let s = it.as_ref();
            if s.len() > limits.list_max_listpack_bytes {
                if let Some(done) = lp.take() {
                    self.packed_node(done);
                }
                write_len(self.out, CONTAINER_PLAIN);
                self.enc.strings.write(self.out, s);
                continue;
            }
            match &mut lp {
                Some(w) if w.bytes() + s.len() + 8 <= limits.list_max_listpack_bytes => w.push(s),
                _ => {
                    if let Some(done) = lp.take() {
                        self.packed_node(done);
                    }
                    let mut w = ListpackWriter::with_capacity(256);
                    w.push(s);
                    lp = Some(w);
                }
            }
        }
        if let Some(done) = lp.take() {
            self.packed_node(done);
        }
        Ok(())
    }

    fn packed_node(&mut self, w: ListpackWriter) {
        write_len(self.out, CONTAINER_PACKED);
        let lp = w.finish();
        self.enc.strings.write(self.out, &lp);
    }

    /// A set's members (distinct): intset, listpack (RDB 11+) or plain, see the module table.
    ///
    /// # Errors
    /// [`EncodeError::EmptyCollection`] for no members.
    pub fn set<I, T>(mut self, members: I) -> Result<(), EncodeError>
    where
        I: IntoIterator<Item = T>,
        I::IntoIter: Clone,
        T: AsRef<[u8]>,
    {
        let members = members.into_iter();
        let limits = self.enc.config.limits;
        let (mut count, mut all_int, mut max_len) = (0usize, true, 0usize);
        for m in members.clone() {
            let m = m.as_ref();
            count += 1;
            max_len = max_len.max(m.len());
            all_int = all_int && parse_canonical_int(m).is_some();
        }
        if count == 0 {
            return Err(EncodeError::EmptyCollection);
        }
        if all_int && count <= limits.set_max_intset_entries {
            let mut v: Vec<i64> = members
                .filter_map(|m| parse_canonical_int(m.as_ref()))
                .collect();
            v.sort_unstable();
            v.dedup();
            self.head(RdbType::SetIntset);
            let blob = intset::encode(&v);
            self.enc.strings.write(self.out, &blob);
        } else if self.enc.config.version.allows(RdbType::SetListpack)
            && count <= limits.set_max_listpack_entries
            && max_len <= limits.set_max_listpack_value
        {
            let mut w = ListpackWriter::new();
            for m in members {
                w.push(m.as_ref());
            }
            self.head(RdbType::SetListpack);
            let blob = w.finish();
            self.enc.strings.write(self.out, &blob);
        } else {
            self.head(RdbType::Set);
            write_len(self.out, count as u64);
            for m in members {
                self.enc.strings.write(self.out, m.as_ref());
            }
        }
        Ok(())
    }

    /// A sorted set's members and scores: a listpack in score order when small, else
    /// `ZSET_2` in the iterator's order (servers write highest first, which makes their
    /// load fastest: hosts SHOULD iterate from the highest score).
    ///
    /// # Errors
    /// [`EncodeError::NanScore`] for a NaN score; [`EncodeError::EmptyCollection`].
    pub fn sorted_set<I, T>(mut self, entries: I) -> Result<(), EncodeError>
    where
        I: IntoIterator<Item = (T, f64)>,
        I::IntoIter: Clone,
        T: AsRef<[u8]>,
    {
        let entries = entries.into_iter();
        let limits = self.enc.config.limits;
        let (mut count, mut max_len) = (0usize, 0usize);
        for (m, s) in entries.clone() {
            if s.is_nan() {
                return Err(EncodeError::NanScore);
            }
            count += 1;
            max_len = max_len.max(m.as_ref().len());
        }
        if count == 0 {
            return Err(EncodeError::EmptyCollection);
        }
        if count <= limits.zset_max_listpack_entries && max_len <= limits.zset_max_listpack_value {
            let owned: Vec<(T, f64)> = entries.collect();
            let mut sorted: Vec<(&[u8], f64)> =
                owned.iter().map(|(m, s)| (m.as_ref(), *s)).collect();
            sorted.sort_by(ord_score);
            let mut w = ListpackWriter::new();
            for (m, s) in sorted {
                w.push(m);
                w.push(format_double(s).as_bytes());
            }
            self.head(RdbType::ZSetListpack);
            let blob = w.finish();
            self.enc.strings.write(self.out, &blob);
        } else {
            self.head(RdbType::ZSet2);
            write_len(self.out, count as u64);
            for (m, s) in entries {
                self.enc.strings.write(self.out, m.as_ref());
                write_double_bin(self.out, s);
            }
        }
        Ok(())
    }

    /// A hash's fields and values (distinct fields): a listpack in the iterator's order when
    /// small, else `HASH`.
    ///
    /// # Errors
    /// [`EncodeError::EmptyCollection`].
    pub fn hash<I, F, V>(mut self, fields: I) -> Result<(), EncodeError>
    where
        I: IntoIterator<Item = (F, V)>,
        I::IntoIter: Clone,
        F: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let fields = fields.into_iter();
        let limits = self.enc.config.limits;
        let (mut count, mut max_len) = (0usize, 0usize);
        for (f, v) in fields.clone() {
            count += 1;
            max_len = max_len.max(f.as_ref().len()).max(v.as_ref().len());
        }
        if count == 0 {
            return Err(EncodeError::EmptyCollection);
        }
        if count <= limits.hash_max_listpack_entries && max_len <= limits.hash_max_listpack_value {
            let mut w = ListpackWriter::new();
            for (f, v) in fields {
                w.push(f.as_ref());
                w.push(v.as_ref());
            }
            self.head(RdbType::HashListpack);
            let blob = w.finish();
            self.enc.strings.write(self.out, &blob);
        } else {
            self.head(RdbType::Hash);
            write_len(self.out, count as u64);
            for (f, v) in fields {
                self.enc.strings.write(self.out, f.as_ref());
                self.enc.strings.write(self.out, v.as_ref());
            }
        }
        Ok(())
    }

    /// A hash whose fields may carry an absolute expiry (Unix ms). Without any expiry it is
    /// [`hash`](Self::hash); with one it is `HASH_2` (Valkey 9, RDB 80).
    ///
    /// # Errors
    /// [`EncodeError::FieldExpiryNeedsValkey9`] when some field expires and the version is
    /// below 80; [`EncodeError::EmptyCollection`].
    pub fn hash_with_expiry<I, F, V>(mut self, fields: I) -> Result<(), EncodeError>
    where
        I: IntoIterator<Item = (F, V, Option<i64>)>,
        I::IntoIter: Clone,
        F: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let fields = fields.into_iter();
        let (mut count, mut any) = (0usize, false);
        for (_, _, e) in fields.clone() {
            count += 1;
            any |= e.is_some();
        }
        if !any {
            return self.hash(fields.map(|(f, v, _)| (f, v)));
        }
        let version = self.enc.config.version;
        if !version.allows(RdbType::Hash2) {
            return Err(EncodeError::FieldExpiryNeedsValkey9(version.number()));
        }
        self.head(RdbType::Hash2);
        write_len(self.out, count as u64);
        for (f, v, e) in fields {
            self.enc.strings.write(self.out, f.as_ref());
            self.enc.strings.write(self.out, v.as_ref());
            write_i64_le(self.out, e.unwrap_or(-1));
        }
        Ok(())
    }

    /// Any decoded object, re-encoded with the rules above.
    ///
    /// # Errors
    /// As the method for its kind.
    pub fn object(self, obj: &RdbObject) -> Result<(), EncodeError> {
        match obj {
            RdbObject::String(s) => self.string(s),
            RdbObject::List(v) => self.list(v.iter()),
            RdbObject::Set(v) => self.set(v.iter()),
            RdbObject::SortedSet(v) => self.sorted_set(v.iter().map(|(m, s)| (m, *s))),
            RdbObject::Hash(v) => self.hash(v.iter().map(|(f, x)| (f, x))),
            RdbObject::HashWithExpiry(v) => {
                self.hash_with_expiry(v.iter().map(|(f, x, e)| (f, x, *e)))
            }
        }
    }
}

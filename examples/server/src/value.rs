//! The server's stored value: the type enum. Strings keep their inline form; the collections
//! sit behind one box each, so a value (and with it a table entry: 16-byte key + 16-byte
//! value) stays 32 bytes whatever it holds.
//!
//! Strings (issue 7, memory per key): a `Box<[u8]>` value is 16 bytes in the entry plus its
//! own heap chunk, and glibc's smallest chunk is 32 bytes, so an 8-byte value cost 48 bytes.
//! Most values of a cache are short (counters, flags, ids; `redis-benchmark` writes 3 bytes,
//! `DEBUG POPULATE ... 8` 8 bytes): up to [`INLINE_VALUE_LEN`] bytes are kept inside the
//! 16-byte value itself, like the kvstore's `CompactKey` keeps short keys. Longer values sit
//! behind one thin pointer (`Box<Box<[u8]>>`).
//!
//! `OBJECT ENCODING` of a string follows Redis 7.0 (`tryObjectEncoding`): `int` for a
//! canonical 64-bit integer of at most 20 bytes, `embstr` up to 44 bytes, else `raw`; a string
//! changed in place (APPEND, SETRANGE) is `raw` ([`Value::Raw`]) as Redis's are.
//!
//! How another type plugs in: `crate::types` (module docs).

use crate::types::hash::Hash;
use crate::types::list::List;
use crate::types::set::Set;
use crate::types::zset::ZSet;
use ferrocluster_kvstore::KvValue;
use ferrocluster_rdb::{
    EncodeError, ObjectKind, ObjectWriter, RdbObject, RdbValue, UnsupportedKind,
};

/// Values up to this many bytes are stored inline (no heap allocation).
pub const INLINE_VALUE_LEN: usize = 14;

/// Redis `OBJ_ENCODING_EMBSTR_SIZE_LIMIT`: longer strings are `raw`.
const EMBSTR_LIMIT: usize = 44;

/// A stored value: 16 bytes (see the module docs).
#[derive(Clone, PartialEq)]
pub enum Value {
    /// A string of `len` bytes of `bytes` (the rest is zero).
    Inline {
        /// Length, at most [`INLINE_VALUE_LEN`].
        len: u8,
        /// The bytes, zero-padded.
        bytes: [u8; INLINE_VALUE_LEN],
    },
    /// A string longer than [`INLINE_VALUE_LEN`] bytes (a thin pointer keeps the enum at 16
    /// bytes).
    Heap(Box<Box<[u8]>>),
    /// A string changed in place (APPEND, SETRANGE): `OBJECT ENCODING` `raw` at any length.
    /// A `Vec` (with spare capacity, so repeated APPENDs are amortised) behind a box to keep
    /// the value 16 bytes.
    #[allow(clippy::box_collection)]
    Raw(Box<Vec<u8>>),
    /// A hash.
    Hash(Box<Hash>),
    /// A set.
    Set(Box<Set>),
    /// A list.
    List(Box<List>),
    /// A sorted set.
    SortedSet(Box<ZSet>),
}

/// The kinds of value (what `TYPE` names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `string`
    String,
    /// `hash`
    Hash,
    /// `set`
    Set,
    /// `list`
    List,
    /// `zset`
    SortedSet,
}

impl Value {
    /// A string value: copies `b` into its stored form.
    #[inline]
    pub fn new(b: &[u8]) -> Value {
        if b.len() <= INLINE_VALUE_LEN {
            let mut bytes = [0u8; INLINE_VALUE_LEN];
            bytes[..b.len()].copy_from_slice(b);
            // The length fits in u8: it is at most INLINE_VALUE_LEN (14).
            Value::Inline {
                len: b.len() as u8,
                bytes,
            }
        } else {
            Value::Heap(Box::new(b.into()))
        }
    }

    /// A string value changed in place (`raw`).
    pub fn raw(v: Vec<u8>) -> Value {
        Value::Raw(Box::new(v))
    }

    /// The bytes of a string value; `None` for another type.
    #[inline]
    pub fn as_string(&self) -> Option<&[u8]> {
        match self {
            Value::Inline { len, bytes } => Some(&bytes[..usize::from(*len)]),
            Value::Heap(b) => Some(b),
            Value::Raw(v) => Some(v),
            _ => None,
        }
    }

    /// The kind of value.
    pub fn kind(&self) -> Kind {
        match self {
            Value::Inline { .. } | Value::Heap(_) | Value::Raw(_) => Kind::String,
            Value::Hash(_) => Kind::Hash,
            Value::Set(_) => Kind::Set,
            Value::List(_) => Kind::List,
            Value::SortedSet(_) => Kind::SortedSet,
        }
    }

    /// `OBJECT ENCODING`.
    pub fn encoding(&self) -> &'static str {
        match self {
            Value::Raw(_) => "raw",
            Value::Inline { .. } | Value::Heap(_) => {
                let s = self.as_string().unwrap_or_default();
                if s.len() <= 20 && crate::cmd::parse_i64(s).is_some() {
                    "int"
                } else if s.len() <= EMBSTR_LIMIT {
                    "embstr"
                } else {
                    "raw"
                }
            }
            Value::Hash(h) => h.encoding(),
            Value::Set(s) => s.encoding(),
            // Redis 7.0 has no small-list encoding (7.2 added `listpack`).
            Value::List(_) => "quicklist",
            Value::SortedSet(z) => z.encoding(),
        }
    }

    /// `OBJECT REFCOUNT`: Redis 7.0 shares the integer objects 0..=9999
    /// (`OBJ_SHARED_INTEGERS`) among every string holding them, and reports
    /// `OBJ_SHARED_REFCOUNT` (`INT_MAX`) for them; every other value has one reference.
    pub fn refcount(&self) -> i64 {
        let shared = matches!(self, Value::Inline { .. })
            && self.encoding() == "int"
            && self
                .as_string()
                .and_then(crate::cmd::parse_i64)
                .is_some_and(|n| (0..10_000).contains(&n));
        if shared {
            i64::from(i32::MAX)
        } else {
            1
        }
    }
}

impl From<&[u8]> for Value {
    fn from(b: &[u8]) -> Value {
        Value::new(b)
    }
}

impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Value {
        if v.len() <= INLINE_VALUE_LEN {
            Value::new(&v)
        } else {
            Value::Heap(Box::new(v.into_boxed_slice()))
        }
    }
}

impl From<Box<[u8]>> for Value {
    fn from(b: Box<[u8]>) -> Value {
        if b.len() <= INLINE_VALUE_LEN {
            Value::new(&b)
        } else {
            Value::Heap(Box::new(b))
        }
    }
}

impl std::fmt::Debug for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Hash(h) => write!(f, "{h:?}"),
            Value::Set(s) => write!(f, "{s:?}"),
            Value::List(l) => f
                .debug_list()
                .entries(l.iter().map(|e| bytes::Bytes::from(e.to_vec())))
                .finish(),
            Value::SortedSet(z) => write!(f, "{z:?}"),
            _ => write!(
                f,
                "{:?}",
                bytes::Bytes::copy_from_slice(self.as_string().unwrap_or_default())
            ),
        }
    }
}

/// Heap bytes: none for an inline string; the box and what the value holds otherwise.
impl KvValue for Value {
    fn heap_size(&self) -> usize {
        match self {
            Value::Inline { .. } => 0,
            Value::Heap(b) => std::mem::size_of::<Box<[u8]>>() + b.len(),
            Value::Raw(v) => std::mem::size_of::<Vec<u8>>() + v.capacity(),
            Value::Hash(h) => std::mem::size_of::<Hash>() + h.heap_size(),
            Value::Set(s) => std::mem::size_of::<Set>() + s.heap_size(),
            Value::List(l) => std::mem::size_of::<List>() + l.heap_size(),
            Value::SortedSet(z) => std::mem::size_of::<ZSet>() + z.heap_size(),
        }
    }
    fn type_name(&self) -> &'static str {
        match self.kind() {
            Kind::String => "string",
            Kind::Hash => "hash",
            Kind::Set => "set",
            Kind::List => "list",
            Kind::SortedSet => "zset",
        }
    }
}

/// Every type moves through RDB files, DUMP payloads, replication and slot migration: the
/// value describes itself to the writer (no intermediate copy), and is built from a decoded
/// object in the encoding the current thresholds give (`crate::types::limits`). A hash
/// whose fields expire (Valkey 9 `HASH_2` with an expiry) is refused: field expiry is not
/// stored here.
impl RdbValue for Value {
    fn write_rdb(&self, w: ObjectWriter<'_>) -> Result<(), EncodeError> {
        match self {
            Value::Hash(h) => w.hash(h.iter()),
            Value::Set(s) => w.set(s.iter()),
            Value::List(l) => w.list(l.iter().map(|e| e.bytes())),
            // Highest first, as the servers write a skiplist (their load is fastest so).
            Value::SortedSet(z) => w.sorted_set(z.iter(true).map(|(m, s)| (m.bytes(), s))),
            _ => w.string(self.as_string().unwrap_or_default()),
        }
    }

    fn from_rdb(obj: RdbObject) -> Result<Value, UnsupportedKind> {
        let limits = crate::types::limits();
        let too_big = |kind| UnsupportedKind { kind };
        match obj {
            RdbObject::String(s) => Ok(Value::from(s)),
            RdbObject::Hash(pairs) => Hash::from_pairs(pairs.iter().map(|(f, v)| (f, v)), &limits)
                .map(|h| Value::Hash(Box::new(h)))
                .map_err(|_| too_big(ObjectKind::Hash)),
            RdbObject::HashWithExpiry(fields) if fields.iter().all(|f| f.2.is_none()) => {
                Hash::from_pairs(fields.iter().map(|(f, v, _)| (f, v)), &limits)
                    .map(|h| Value::Hash(Box::new(h)))
                    .map_err(|_| too_big(ObjectKind::Hash))
            }
            RdbObject::Set(members) => Set::from_members(members.iter(), &limits)
                .map(|s| Value::Set(Box::new(s)))
                .map_err(|_| too_big(ObjectKind::Set)),
            RdbObject::List(items) => {
                let fill = crate::types::list::Fill::new(limits.list_max_listpack_size);
                Ok(Value::List(Box::new(List::from_items(items, fill))))
            }
            RdbObject::SortedSet(entries) => {
                let z = ZSet::from_entries(entries, crate::cmd::zset::limits_of(&limits));
                Ok(Value::SortedSet(Box::new(z)))
            }
            other => Err(UnsupportedKind { kind: other.kind() }),
        }
    }

    fn from_rdb_string(s: &[u8]) -> Result<Value, UnsupportedKind> {
        Ok(Value::new(s))
    }
}

/// The value as the AOF rewrite's commands: a `.base.aof` (`crate::aof`), and the atomic slot
/// migration snapshot and the key states of the slot being read (`crate::migrate`). The same
/// element order as our RDB writer; sorted sets lowest score first (Valkey's listpack order).
impl ferrocluster_dataplane::aof::AofValue for Value {
    fn write_aof(
        &self,
        w: ferrocluster_dataplane::aof::AofWriter<'_>,
    ) -> Result<(), ferrocluster_dataplane::aof::AofError> {
        match self {
            Value::Hash(h) => w.hash(h.iter()),
            Value::Set(s) => w.set(s.iter()),
            Value::List(l) => w.list(l.iter().map(|e| e.bytes())),
            Value::SortedSet(z) => w.sorted_set(z.iter(false).map(|(m, s)| (m.bytes(), s))),
            _ => w.string(self.as_string().unwrap_or_default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn stays_sixteen_bytes() {
        assert_eq!(std::mem::size_of::<Value>(), 16);
    }

    #[test]
    fn short_values_are_inline_and_long_ones_on_the_heap() {
        let v = Value::new(b"value:12");
        assert!(matches!(v, Value::Inline { len: 8, .. }));
        assert_eq!(v.heap_size(), 0);
        assert!(matches!(
            Value::new(&[7; 14]),
            Value::Inline { len: 14, .. }
        ));
        let long = Value::new(&[7; 15]);
        assert!(matches!(long, Value::Heap(_)));
        assert_eq!(long.heap_size(), 16 + 15);
        assert_eq!(Value::new(b"").as_string(), Some(&b""[..]));
        assert_eq!(v.type_name(), "string");
    }

    #[test]
    fn string_encodings_follow_redis() {
        assert_eq!(Value::new(b"123").encoding(), "int");
        assert_eq!(Value::new(b"-9223372036854775808").encoding(), "int");
        assert_eq!(Value::new(b"9223372036854775808").encoding(), "embstr");
        assert_eq!(Value::new(b"0123").encoding(), "embstr");
        assert_eq!(Value::new(&[b'a'; 44]).encoding(), "embstr");
        assert_eq!(Value::new(&[b'a'; 45]).encoding(), "raw");
        assert_eq!(Value::raw(b"1".to_vec()).encoding(), "raw");
        assert_eq!(Value::new(b"9999").refcount(), i64::from(i32::MAX));
        assert_eq!(Value::new(b"10000").refcount(), 1);
        assert_eq!(Value::new(b"-1").refcount(), 1);
    }

    #[test]
    fn rdb_round_trips_every_type() {
        let v = Value::new(b"a value longer than inline");
        let p = ferrocluster_rdb::dump::encode(&v).unwrap();
        assert_eq!(p[0], 0, "RDB_TYPE_STRING");
        assert_eq!(
            ferrocluster_rdb::dump::decode_value::<Value>(&p).unwrap(),
            v
        );
        let hash = RdbObject::Hash(vec![(b"f".to_vec(), b"v".to_vec())]);
        let p = ferrocluster_rdb::dump::encode(&hash).unwrap();
        let h = ferrocluster_rdb::dump::decode_value::<Value>(&p).unwrap();
        assert_eq!(h.type_name(), "hash");
        assert_eq!(ferrocluster_rdb::dump::encode(&h).unwrap(), p);
        let set = RdbObject::Set(vec![b"1".to_vec(), b"2".to_vec()]);
        let p = ferrocluster_rdb::dump::encode(&set).unwrap();
        let s = ferrocluster_rdb::dump::decode_value::<Value>(&p).unwrap();
        assert_eq!(s.encoding(), "intset");
        assert_eq!(ferrocluster_rdb::dump::encode(&s).unwrap(), p);
        let list = RdbObject::List(vec![b"x".to_vec(), b"-12".to_vec(), vec![b'y'; 9000]]);
        let p = ferrocluster_rdb::dump::encode(&list).unwrap();
        let l = ferrocluster_rdb::dump::decode_value::<Value>(&p).unwrap();
        assert_eq!(l.type_name(), "list");
        assert_eq!(l.encoding(), "quicklist");
        assert_eq!(ferrocluster_rdb::dump::encode(&l).unwrap(), p);
        // Scores highest first, as the servers write a skiplist; a small set is a listpack.
        let small = RdbObject::SortedSet(vec![(b"a".to_vec(), 1.5), (b"b".to_vec(), -2.0)]);
        let p = ferrocluster_rdb::dump::encode(&small).unwrap();
        let z = ferrocluster_rdb::dump::decode_value::<Value>(&p).unwrap();
        assert_eq!((z.type_name(), z.encoding()), ("zset", "listpack"));
        assert_eq!(ferrocluster_rdb::dump::encode(&z).unwrap(), p);
        let big: Vec<(Vec<u8>, f64)> = (0..200)
            .rev()
            .map(|i| (format!("m{i}").into_bytes(), f64::from(i) / 3.0))
            .collect();
        let p = ferrocluster_rdb::dump::encode(&RdbObject::SortedSet(big)).unwrap();
        let z = ferrocluster_rdb::dump::decode_value::<Value>(&p).unwrap();
        assert_eq!(z.encoding(), "skiplist");
        assert_eq!(ferrocluster_rdb::dump::encode(&z).unwrap(), p);
    }

    proptest! {
        #[test]
        fn every_constructor_round_trips(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            let a = Value::new(&b);
            prop_assert_eq!(a.as_string(), Some(&b[..]));
            prop_assert_eq!(&Value::from(b.clone()), &a);
            prop_assert_eq!(&Value::from(b.clone().into_boxed_slice()), &a);
            prop_assert_eq!(matches!(a, Value::Inline { .. }), b.len() <= INLINE_VALUE_LEN);
        }
    }
}

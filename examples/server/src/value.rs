//! The server's stored value: a byte string, short ones inline in the table entry.
//!
//! Why (issue 7, memory per key): a `Box<[u8]>` value is 16 bytes in the entry plus its own
//! heap chunk, and glibc's smallest chunk is 32 bytes, so an 8-byte value cost 48 bytes. Most
//! values of a cache are short (counters, flags, ids; `redis-benchmark` writes 3 bytes,
//! `DEBUG POPULATE ... 8` 8 bytes): up to [`INLINE_VALUE_LEN`] bytes are kept inside the
//! 16-byte value itself, like the kvstore's `CompactKey` keeps short keys. Longer values sit
//! behind one thin pointer (`Box<Box<[u8]>>`), so the value, and with it the table entry
//! (16-byte key + 16-byte value), stays 32 bytes whatever the value type holds.

use ferrocluster_kvstore::KvValue;
use ferrocluster_rdb::{EncodeError, ObjectWriter, RdbObject, RdbValue, UnsupportedKind};
use std::ops::Deref;

/// Values up to this many bytes are stored inline (no heap allocation).
pub const INLINE_VALUE_LEN: usize = 14;

/// A string value: 16 bytes, inline up to [`INLINE_VALUE_LEN`] bytes, on the heap beyond.
#[derive(Clone, PartialEq, Eq)]
pub enum Value {
    /// `len` bytes of `bytes` are the value (the rest is zero).
    Inline {
        /// Length, at most [`INLINE_VALUE_LEN`].
        len: u8,
        /// The bytes, zero-padded.
        bytes: [u8; INLINE_VALUE_LEN],
    },
    /// A value longer than [`INLINE_VALUE_LEN`] bytes (a thin pointer keeps the enum at 16
    /// bytes).
    Heap(Box<Box<[u8]>>),
}

impl Value {
    /// Copies `b` into its stored form.
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

    /// The value's bytes.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Value::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Value::Heap(b) => b,
        }
    }
}

impl Deref for Value {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl AsRef<[u8]> for Value {
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
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
        write!(f, "{:?}", bytes::Bytes::copy_from_slice(self.as_bytes()))
    }
}

/// Heap bytes: none inline; the inner boxed slice header (16) and the bytes on the heap.
impl KvValue for Value {
    fn heap_size(&self) -> usize {
        match self {
            Value::Inline { .. } => 0,
            Value::Heap(b) => std::mem::size_of::<Box<[u8]>>() + b.len(),
        }
    }
    fn type_name(&self) -> &'static str {
        "string"
    }
}

/// The server stores strings only: a value is an RDB string, and any other kind (a hash,
/// list, set or sorted set from another server's DUMP or RDB) is refused.
impl RdbValue for Value {
    fn write_rdb(&self, w: ObjectWriter<'_>) -> Result<(), EncodeError> {
        w.string(self.as_bytes())
    }

    fn from_rdb(obj: RdbObject) -> Result<Value, UnsupportedKind> {
        match obj {
            RdbObject::String(s) => Ok(Value::from(s)),
            other => Err(UnsupportedKind { kind: other.kind() }),
        }
    }

    fn from_rdb_string(s: &[u8]) -> Result<Value, UnsupportedKind> {
        Ok(Value::new(s))
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
        assert_eq!(Value::new(b"").as_bytes(), b"");
        assert_eq!(v.type_name(), "string");
    }

    #[test]
    fn rdb_values_are_strings() {
        let v = Value::new(b"a value longer than inline");
        let p = ferrocluster_rdb::dump::encode(&v).unwrap();
        assert_eq!(p[0], 0, "RDB_TYPE_STRING");
        assert_eq!(
            ferrocluster_rdb::dump::decode_value::<Value>(&p).unwrap(),
            v
        );
        let hash = RdbObject::Hash(vec![(b"f".to_vec(), b"v".to_vec())]);
        let p = ferrocluster_rdb::dump::encode(&hash).unwrap();
        assert!(matches!(
            ferrocluster_rdb::dump::decode_value::<Value>(&p),
            Err(ferrocluster_rdb::dump::DumpError::Unsupported(
                UnsupportedKind {
                    kind: ferrocluster_rdb::ObjectKind::Hash
                }
            ))
        ));
    }

    proptest! {
        #[test]
        fn every_constructor_round_trips(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            let a = Value::new(&b);
            prop_assert_eq!(a.as_bytes(), &b[..]);
            prop_assert_eq!(&Value::from(b.clone()), &a);
            prop_assert_eq!(&Value::from(b.clone().into_boxed_slice()), &a);
            prop_assert_eq!(&*a.clone(), &b[..]);
            prop_assert_eq!(matches!(a, Value::Inline { .. }), b.len() <= INLINE_VALUE_LEN);
        }
    }
}

//! The owned object model the decoders return, and the trait a host implements for its
//! values.

use crate::encode::ObjectWriter;
use crate::error::EncodeError;

/// One decoded value, with its elements in the order the encoding stored them.
///
/// Integers stored in integer encodings come back as their decimal text, as a client would
/// read them. Sorted-set scores are never NaN.
#[derive(Debug, Clone, PartialEq)]
pub enum RdbObject {
    /// A string.
    String(Vec<u8>),
    /// A list, head first.
    List(Vec<Vec<u8>>),
    /// A set's members.
    Set(Vec<Vec<u8>>),
    /// A sorted set's members and scores (ascending when it came from a listpack, in the
    /// file's order otherwise: servers write skiplists highest first).
    SortedSet(Vec<(Vec<u8>, f64)>),
    /// A hash's fields and values.
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
    /// A hash with per-field expiry (Valkey 9 `RDB_TYPE_HASH_2`): field, value, absolute
    /// expiry in Unix ms (`None`: the field does not expire).
    HashWithExpiry(Vec<(Vec<u8>, Vec<u8>, Option<i64>)>),
}

/// The kinds of value, as the `TYPE` command names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjectKind {
    /// `string`
    String,
    /// `list`
    List,
    /// `set`
    Set,
    /// `zset`
    SortedSet,
    /// `hash`
    Hash,
}

impl ObjectKind {
    /// The name `TYPE` replies with.
    pub fn name(self) -> &'static str {
        match self {
            ObjectKind::String => "string",
            ObjectKind::List => "list",
            ObjectKind::Set => "set",
            ObjectKind::SortedSet => "zset",
            ObjectKind::Hash => "hash",
        }
    }
}

impl RdbObject {
    /// The object's kind.
    pub fn kind(&self) -> ObjectKind {
        match self {
            RdbObject::String(_) => ObjectKind::String,
            RdbObject::List(_) => ObjectKind::List,
            RdbObject::Set(_) => ObjectKind::Set,
            RdbObject::SortedSet(_) => ObjectKind::SortedSet,
            RdbObject::Hash(_) | RdbObject::HashWithExpiry(_) => ObjectKind::Hash,
        }
    }

    /// Number of elements (bytes for a string).
    pub fn len(&self) -> usize {
        match self {
            RdbObject::String(s) => s.len(),
            RdbObject::List(v) | RdbObject::Set(v) => v.len(),
            RdbObject::SortedSet(v) => v.len(),
            RdbObject::Hash(v) => v.len(),
            RdbObject::HashWithExpiry(v) => v.len(),
        }
    }

    /// Whether [`len`](Self::len) is 0.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The same value with its elements in a canonical order, to compare values whose
    /// encodings keep different orders (a listpack keeps insertion order, a hash table its
    /// own): set members sorted, sorted-set entries by score then member (with -0 as 0,
    /// as servers store it), hash fields sorted; a hash with expiry in which no field expires
    /// becomes a plain hash. Strings and lists are unchanged.
    pub fn normalized(&self) -> RdbObject {
        match self {
            RdbObject::Set(v) => {
                let mut v = v.clone();
                v.sort_unstable();
                RdbObject::Set(v)
            }
            RdbObject::SortedSet(v) => {
                let mut v: Vec<(Vec<u8>, f64)> =
                    v.iter().map(|(m, s)| (m.clone(), s + 0.0)).collect();
                v.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
                RdbObject::SortedSet(v)
            }
            RdbObject::Hash(v) => {
                let mut v = v.clone();
                v.sort_unstable();
                RdbObject::Hash(v)
            }
            RdbObject::HashWithExpiry(v) if v.iter().all(|f| f.2.is_none()) => {
                let mut v: Vec<_> = v.iter().map(|(f, x, _)| (f.clone(), x.clone())).collect();
                v.sort_unstable();
                RdbObject::Hash(v)
            }
            RdbObject::HashWithExpiry(v) => {
                let mut v = v.clone();
                v.sort_unstable();
                RdbObject::HashWithExpiry(v)
            }
            o => o.clone(),
        }
    }
}

/// A host value that is not of a kind the host stores (its `from_rdb` refused it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("this host does not store {} values", .kind.name())]
pub struct UnsupportedKind {
    /// The kind refused.
    pub kind: ObjectKind,
}

/// What a host implements for its stored values to move through RDB files, replication
/// streams, DUMP payloads and migrations.
///
/// [`write_rdb`](Self::write_rdb) describes the value to an [`ObjectWriter`], which picks the
/// encoding real servers would and writes it straight into the output, so a big collection
/// is never copied into an intermediate object. [`from_rdb`](Self::from_rdb) builds a value
/// from a decoded [`RdbObject`].
///
/// ```
/// use ferrocluster_rdb::{ObjectWriter, RdbObject, RdbValue, EncodeError, UnsupportedKind};
///
/// struct Text(Vec<u8>);
///
/// impl RdbValue for Text {
///     fn write_rdb(&self, w: ObjectWriter<'_>) -> Result<(), EncodeError> {
///         w.string(&self.0)
///     }
///     fn from_rdb(obj: RdbObject) -> Result<Text, UnsupportedKind> {
///         match obj {
///             RdbObject::String(s) => Ok(Text(s)),
///             other => Err(UnsupportedKind { kind: other.kind() }),
///         }
///     }
/// }
///
/// let payload = ferrocluster_rdb::dump::encode(&Text(b"hello".to_vec())).unwrap();
/// let back: Text = ferrocluster_rdb::dump::decode_value(&payload).unwrap();
/// assert_eq!(back.0, b"hello");
/// ```
pub trait RdbValue: Sized {
    /// Describes the value to `w` with exactly one of its methods.
    ///
    /// # Errors
    /// Whatever the writer returns ([`EncodeError`]), or a host error.
    fn write_rdb(&self, w: ObjectWriter<'_>) -> Result<(), EncodeError>;

    /// Builds a value from a decoded object.
    ///
    /// # Errors
    /// [`UnsupportedKind`] when the host does not store values of that kind; nothing else
    /// changes.
    fn from_rdb(obj: RdbObject) -> Result<Self, UnsupportedKind>;

    /// Builds a value from a string value borrowed from the decoder's buffer
    /// ([`ValueRef::into_value`](crate::ValueRef::into_value)). The default copies it into an
    /// [`RdbObject::String`] for [`from_rdb`](Self::from_rdb); a host that stores strings its
    /// own way SHOULD override it to save that copy.
    ///
    /// # Errors
    /// As [`from_rdb`](Self::from_rdb).
    fn from_rdb_string(s: &[u8]) -> Result<Self, UnsupportedKind> {
        Self::from_rdb(RdbObject::String(s.to_vec()))
    }
}

impl RdbValue for RdbObject {
    fn write_rdb(&self, w: ObjectWriter<'_>) -> Result<(), EncodeError> {
        w.object(self)
    }
    fn from_rdb(obj: RdbObject) -> Result<RdbObject, UnsupportedKind> {
        Ok(obj)
    }
}

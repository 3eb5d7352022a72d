//! A value as the commands that rebuild it, in the form Valkey's AOF rewrite writes them
//! (`rewriteAppendOnlyFileRio`, `rewriteSlotToAppendOnlyFileRio`, `rewriteListObject`,
//! `rewriteSetObject`, `rewriteSortedSetObject`, `rewriteHashObject`): what a Valkey 9 source
//! writes for each key of an atomic slot migration snapshot, and what an AOF rewrite without
//! RDB preamble holds.
//!
//! | value | commands (captured from valkey-server 9.1.2, `tests/vectors/asm/`) |
//! |---|---|
//! | string | `SET key value` (an integer-encoded string as its decimal text) |
//! | list | `RPUSH key e1 .. e64`, head first, 64 elements per command |
//! | set | `SADD key m1 .. m64` |
//! | sorted set | `ZADD key score1 m1 .. score64 m64`; a score is its shortest round-trip text (`0.3333333333333333`, `1e+300`, `inf`, `-inf`; integral values as integers, `-0` as `0`) |
//! | hash | `HSETEX key PXAT <ms> FIELDS 1 field value` for each field with an expiry (Valkey 9), then `HMSET key f1 v1 .. f64 v64` for the others |
//! | any, with a TTL | then `PEXPIREAT key <ms>` |
//!
//! "64" is `AOF_REWRITE_ITEMS_PER_CMD`: a command takes the next `min(64, remaining)`
//! elements. The element order is the host's iteration order (Valkey's is its hash table's
//! for sets, hashes and big sorted sets, which a host cannot reproduce; a listpack sorted set
//! comes in score order). Streams and module values have no writer here (the data plane's
//! hosts do not store them).
//!
//! A host implements [`AofValue`] for its stored values; [`AofWriter`] does the rest.

use crate::resp::{encode_array_len, encode_bulk, encode_command};

/// `AOF_REWRITE_ITEMS_PER_CMD`: elements per `RPUSH`/`SADD`/`ZADD`/`HMSET`.
pub const ITEMS_PER_CMD: usize = 64;

/// Why a value could not be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AofError {
    /// A collection without elements (servers never store one: the key would not exist).
    #[error("empty collection")]
    EmptyCollection,
    /// A sorted-set score that is NaN (servers never store one).
    #[error("NaN sorted-set score")]
    NanScore,
}

/// What a host implements for its stored values so the data plane can write them as
/// commands ([`AofWriter`]). Call exactly one method of the writer.
///
/// ```
/// use ferrocluster_dataplane::aof::{AofError, AofValue, AofWriter};
///
/// enum Value {
///     Text(Vec<u8>),
///     List(Vec<Vec<u8>>),
/// }
///
/// impl AofValue for Value {
///     fn write_aof(&self, w: AofWriter<'_>) -> Result<(), AofError> {
///         match self {
///             Value::Text(s) => w.string(s),
///             Value::List(items) => w.list(items.iter()),
///         }
///     }
/// }
///
/// let mut out = Vec::new();
/// AofWriter::new(&mut out, b"k").value(&Value::List(vec![b"a".to_vec()]), Some(1_900_000_000_000)).unwrap();
/// assert_eq!(out, b"*3\r\n$5\r\nRPUSH\r\n$1\r\nk\r\n$1\r\na\r\n*3\r\n$9\r\nPEXPIREAT\r\n$1\r\nk\r\n$13\r\n1900000000000\r\n");
/// ```
pub trait AofValue {
    /// Describes the value to `w`.
    ///
    /// # Errors
    /// What the writer returns ([`AofError`]).
    fn write_aof(&self, w: AofWriter<'_>) -> Result<(), AofError>;
}

/// Writes one key's value as commands into a buffer (see the module docs for the forms).
/// Collections are passed as iterators that can be cloned (a `Vec`'s, a `HashMap`'s or a
/// `BTreeMap`'s `iter()` can): a first pass counts, a second one writes.
#[derive(Debug)]
pub struct AofWriter<'a> {
    out: &'a mut Vec<u8>,
    key: &'a [u8],
}

fn int_text(v: i64) -> Vec<u8> {
    v.to_string().into_bytes()
}

impl<'a> AofWriter<'a> {
    /// A writer appending the commands for `key` to `out`.
    pub fn new(out: &'a mut Vec<u8>, key: &'a [u8]) -> AofWriter<'a> {
        AofWriter { out, key }
    }

    /// Writes `value`, then `PEXPIREAT key <expire_at_ms>` when it has an expiry (absolute
    /// Unix ms). On error `out` is left as it was.
    ///
    /// # Errors
    /// [`AofError`] from the value.
    pub fn value<V: AofValue + ?Sized>(
        self,
        value: &V,
        expire_at_ms: Option<i64>,
    ) -> Result<(), AofError> {
        let start = self.out.len();
        let (out, key) = (self.out, self.key);
        let r = value.write_aof(AofWriter { out, key });
        if let Err(e) = r {
            out.truncate(start);
            return Err(e);
        }
        if let Some(at) = expire_at_ms {
            encode_command(out, &[b"PEXPIREAT", key, &int_text(at)]);
        }
        Ok(())
    }

    /// A string: `SET key value`.
    ///
    /// # Errors
    /// None; the signature matches the collection writers.
    pub fn string(self, s: &[u8]) -> Result<(), AofError> {
        encode_command(self.out, &[b"SET", self.key, s]);
        Ok(())
    }

    /// A string holding an integer: `SET key <decimal>`.
    ///
    /// # Errors
    /// None.
    pub fn int(self, v: i64) -> Result<(), AofError> {
        self.string(&int_text(v))
    }

    /// A list, head first: `RPUSH` batches.
    ///
    /// # Errors
    /// [`AofError::EmptyCollection`].
    pub fn list<I, T>(self, items: I) -> Result<(), AofError>
    where
        I: IntoIterator<Item = T>,
        I::IntoIter: Clone,
        T: AsRef<[u8]>,
    {
        self.batches(
            b"RPUSH",
            items,
            |out, it: T| encode_bulk(out, it.as_ref()),
            1,
        )
    }

    /// A set's members: `SADD` batches.
    ///
    /// # Errors
    /// [`AofError::EmptyCollection`].
    pub fn set<I, T>(self, members: I) -> Result<(), AofError>
    where
        I: IntoIterator<Item = T>,
        I::IntoIter: Clone,
        T: AsRef<[u8]>,
    {
        self.batches(
            b"SADD",
            members,
            |out, m: T| encode_bulk(out, m.as_ref()),
            1,
        )
    }

    /// A sorted set's members and scores: `ZADD key score member ..` batches, in the
    /// iterator's order.
    ///
    /// # Errors
    /// [`AofError::NanScore`]; [`AofError::EmptyCollection`].
    pub fn sorted_set<I, T>(self, entries: I) -> Result<(), AofError>
    where
        I: IntoIterator<Item = (T, f64)>,
        I::IntoIter: Clone,
        T: AsRef<[u8]>,
    {
        let entries = entries.into_iter();
        if entries.clone().any(|(_, s)| s.is_nan()) {
            return Err(AofError::NanScore);
        }
        self.batches(
            b"ZADD",
            entries,
            |out, (m, s): (T, f64)| {
                encode_bulk(out, score_text(s).as_bytes());
                encode_bulk(out, m.as_ref());
            },
            2,
        )
    }

    /// A hash's fields and values: `HMSET` batches.
    ///
    /// # Errors
    /// [`AofError::EmptyCollection`].
    pub fn hash<I, F, V>(self, fields: I) -> Result<(), AofError>
    where
        I: IntoIterator<Item = (F, V)>,
        I::IntoIter: Clone,
        F: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        self.batches(
            b"HMSET",
            fields,
            |out, (f, v): (F, V)| {
                encode_bulk(out, f.as_ref());
                encode_bulk(out, v.as_ref());
            },
            2,
        )
    }

    /// A hash whose fields may expire (absolute Unix ms): `HSETEX key PXAT <ms> FIELDS 1 f v`
    /// for each field with an expiry, in the iterator's order (Valkey's is the order of
    /// expiry), then `HMSET` batches of the other fields.
    ///
    /// # Errors
    /// [`AofError::EmptyCollection`].
    pub fn hash_with_expiry<I, F, V>(self, fields: I) -> Result<(), AofError>
    where
        I: IntoIterator<Item = (F, V, Option<i64>)>,
        I::IntoIter: Clone,
        F: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let fields = fields.into_iter();
        if fields.clone().next().is_none() {
            return Err(AofError::EmptyCollection);
        }
        for (f, v, at) in fields.clone() {
            if let Some(at) = at {
                encode_command(
                    self.out,
                    &[
                        b"HSETEX".as_slice(),
                        self.key,
                        b"PXAT",
                        &int_text(at),
                        b"FIELDS",
                        b"1",
                        f.as_ref(),
                        v.as_ref(),
                    ],
                );
            }
        }
        let plain = fields.filter_map(|(f, v, at)| at.is_none().then_some((f, v)));
        if plain.clone().next().is_none() {
            return Ok(());
        }
        self.hash(plain)
    }

    /// `<cmd> key` then the elements, at most [`ITEMS_PER_CMD`] per command; `per` is the
    /// number of arguments one element takes.
    fn batches<I, T>(
        self,
        cmd: &[u8],
        items: I,
        mut write: impl FnMut(&mut Vec<u8>, T),
        per: usize,
    ) -> Result<(), AofError>
    where
        I: IntoIterator<Item = T>,
        I::IntoIter: Clone,
    {
        let items = items.into_iter();
        let mut left = items.clone().count();
        if left == 0 {
            return Err(AofError::EmptyCollection);
        }
        let mut in_cmd = 0;
        for it in items {
            if in_cmd == 0 {
                let n = left.min(ITEMS_PER_CMD);
                encode_array_len(self.out, 2 + n * per);
                encode_bulk(self.out, cmd);
                encode_bulk(self.out, self.key);
            }
            write(self.out, it);
            in_cmd += 1;
            left -= 1;
            if in_cmd == ITEMS_PER_CMD {
                in_cmd = 0;
            }
        }
        Ok(())
    }
}

/// A score's text (`rioWriteBulkDouble`: Valkey's `d2string` form, the rdb crate's
/// [`ferrocluster_rdb::double::format_double`]).
fn score_text(v: f64) -> String {
    ferrocluster_rdb::double::format_double(v)
}

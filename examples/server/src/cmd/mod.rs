//! The data commands, one module per family, and what they share: the command context
//! ([`Ctx`]), typed lookups that answer `WRONGTYPE` ([`read`], [`write()`], [`create`]), the
//! argument parsers with Redis's error texts, and the propagation rule ([`Ctx::effect`],
//! [`Ctx::modified`]).
//!
//! # Propagation (what replicas and the slot-migration stream receive)
//! As Redis 7.0 (`call()` / `alsoPropagate`): a write that changed the data set (it called
//! [`Ctx::modified`]) propagates its own argv; a write whose effect is not deterministic,
//! or not expressible as itself, pushes the effect instead with [`Ctx::effect`] (`SPOP` →
//! `SREM`, `INCRBYFLOAT` → `SET ... KEEPTTL`, relative expiries → `PEXPIREAT`, a past expiry
//! → `DEL`), and then only the effects go out. A write that changed nothing propagates
//! nothing; a read never does. [`crate::commands::run`] hands the result to the server's
//! replication / slot-migration hook (`crate::repl::propagate`).
//!
//! How a family plugs in: `crate::types` (module docs).

pub mod hash;
pub mod keyspace;
pub mod ldouble;
pub mod list;
pub mod set;
pub mod string;
pub mod txn;
pub mod zset;

use crate::client::{Args, ClientCtx};
use crate::resp::Out;
use crate::server::{Shared, State, Value};
use crate::table::Spec;
use crate::types::hash::Hash;
use crate::types::set::Set;
use ferrocluster_kvstore::{KvStore, ValueMut};

/// `WRONGTYPE Operation against a key holding the wrong kind of value`
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
/// `ERR value is not an integer or out of range`
pub const NOT_INT: &str = "ERR value is not an integer or out of range";
/// `ERR value is not a valid float`
pub const NOT_FLOAT: &str = "ERR value is not a valid float";
/// `ERR syntax error`
pub const SYNTAX: &str = "ERR syntax error";

/// Resolves Redis rank ranges (`addListRangeReply`, `ltrimCommand`, `zrangeGenericCommand`,
/// `zremrangeGenericCommand`: negative indexes count from the tail, clamped to the
/// collection): `None` for an empty range, else `start..=end` within `0..len`.
pub fn rank_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let mut start = if start < 0 { len + start } else { start };
    let mut end = if end < 0 { len + end } else { end };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= len {
        return None;
    }
    if end >= len {
        end = len - 1;
    }
    Some((start as usize, end as usize))
}

/// The reply of HSCAN / SSCAN / ZSCAN: `[next cursor, [items]]` (`[0, []]` for a missing key).
pub fn scan_reply(out: &mut Out, next: impl std::fmt::Display, items: &[Vec<u8>]) {
    out.array(2);
    out.bulk(next.to_string().as_bytes());
    out.array(items.len());
    for i in items {
        out.bulk(i);
    }
}

/// The `[COUNT count]` tail of LMPOP / ZMPOP and their blocking forms, read from argument
/// `from` on: 1 when absent. Errors: Redis 7.0's texts (`ERR count should be greater than
/// 0`, or [`SYNTAX`] for anything else, a second COUNT included).
pub fn mpop_count(args: &Args<'_>, from: usize) -> Result<usize, &'static str> {
    let mut count = None;
    let mut j = from;
    while j < args.len() {
        if count.is_none() && args.get(j).eq_ignore_ascii_case(b"count") && j + 1 < args.len() {
            j += 1;
            match parse_i64(args.get(j)) {
                Some(c) if c >= 1 => count = Some(c as usize),
                _ => return Err("ERR count should be greater than 0"),
            }
        } else {
            return Err(SYNTAX);
        }
        j += 1;
    }
    Ok(count.unwrap_or(1))
}
/// `ERR value is out of range, must be positive`
pub const NOT_POSITIVE: &str = "ERR value is out of range, must be positive";

/// Parses a strict decimal i64 as Redis's `string2ll` does (no `+`, no spaces, no leading
/// zeros).
pub fn parse_i64(b: &[u8]) -> Option<i64> {
    ferrocluster_command::parse_i64(b)
}

/// A key holds another type than the command needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WrongType;

/// A collection type stored in a [`Value`] variant.
pub trait Family: Sized {
    /// The collection in `v`, if `v` holds one.
    fn of(v: &Value) -> Option<&Self>;
    /// The collection in `v`, if `v` holds one.
    fn of_mut(v: &mut Value) -> Option<&mut Self>;
    /// The value holding it.
    fn wrap(self) -> Value;
    /// Whether it has no elements (an empty collection is deleted).
    fn is_empty(&self) -> bool;
}

/// Implements [`Family`] for a collection type held by one [`Value`] variant (boxed).
macro_rules! family {
    ($ty:ty, $variant:ident) => {
        impl Family for $ty {
            fn of(v: &Value) -> Option<&$ty> {
                match v {
                    Value::$variant(c) => Some(c),
                    _ => None,
                }
            }
            fn of_mut(v: &mut Value) -> Option<&mut $ty> {
                match v {
                    Value::$variant(c) => Some(c),
                    _ => None,
                }
            }
            fn wrap(self) -> Value {
                Value::$variant(Box::new(self))
            }
            fn is_empty(&self) -> bool {
                <$ty>::is_empty(self)
            }
        }
    };
}

family!(Hash, Hash);
family!(Set, Set);
family!(crate::types::list::List, List);
family!(crate::types::zset::ZSet, SortedSet);

/// The collection of type `T` at `key`: `Ok(None)` when the key is missing, `Err` when it
/// holds another type.
///
/// # Errors
/// [`WrongType`].
pub fn read<'s, T: Family>(
    kv: &'s KvStore<Value>,
    db: usize,
    key: &[u8],
    now: u64,
) -> Result<Option<&'s T>, WrongType> {
    match kv.get(db, key, now).ok().flatten() {
        None => Ok(None),
        Some(v) => T::of(v).map(Some).ok_or(WrongType),
    }
}

/// Mutable access to a collection of type `T` (re-measured for the keyspace's memory figure
/// when dropped).
pub struct Handle<'s, T: Family> {
    value: ValueMut<'s, Value>,
    _t: std::marker::PhantomData<T>,
}

impl<T: Family> std::ops::Deref for Handle<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        match T::of(&self.value) {
            Some(t) => t,
            // The type was checked when the handle was made and cannot change through it.
            None => unreachable!("a handle holds its type"),
        }
    }
}

impl<T: Family> std::ops::DerefMut for Handle<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        match T::of_mut(&mut self.value) {
            Some(t) => t,
            // As in `deref`.
            None => unreachable!("a handle holds its type"),
        }
    }
}

/// The collection of type `T` at `key` for writing (see [`read`]).
///
/// # Errors
/// [`WrongType`].
pub fn write<'s, T: Family>(
    kv: &'s mut KvStore<Value>,
    db: usize,
    key: &[u8],
    now: u64,
) -> Result<Option<Handle<'s, T>>, WrongType> {
    match kv.get_mut(db, key, now).ok().flatten() {
        None => Ok(None),
        Some(v) if T::of(&v).is_some() => Ok(Some(Handle {
            value: v,
            _t: std::marker::PhantomData,
        })),
        Some(_) => Err(WrongType),
    }
}

/// The collection at `key` for writing, created with `make` when missing.
///
/// # Errors
/// [`WrongType`].
pub fn create<'s, T: Family>(
    kv: &'s mut KvStore<Value>,
    db: usize,
    key: &[u8],
    now: u64,
    make: impl FnOnce() -> T,
) -> Result<Handle<'s, T>, WrongType> {
    match kv.get(db, key, now).ok().flatten() {
        Some(v) if T::of(v).is_none() => return Err(WrongType),
        Some(_) => {}
        None => {
            let _ = kv.insert(db, key, make().wrap(), now);
        }
    }
    match write(kv, db, key, now)? {
        Some(h) => Ok(h),
        // Present: found or inserted just above, under the same lock.
        None => unreachable!("the key was just found or inserted"),
    }
}

/// Deletes `key` when it holds an empty collection of type `T` (Redis deletes a collection
/// when its last element goes). Returns whether it was deleted.
pub fn drop_if_empty<T: Family>(kv: &mut KvStore<Value>, db: usize, key: &[u8], now: u64) -> bool {
    let empty = matches!(read::<T>(kv, db, key, now), Ok(Some(t)) if t.is_empty());
    if empty {
        let _ = kv.remove(db, key, now);
    }
    empty
}

/// What a write propagates (see the module docs).
#[derive(Debug, Default)]
pub struct Propagation {
    /// Changes made (Redis `server.dirty`).
    pub dirty: u64,
    /// Effects to send instead of the command itself.
    pub effects: Vec<Vec<Vec<u8>>>,
}

/// Everything a command sees.
pub struct Ctx<'a, 'b> {
    /// Process-wide state.
    pub shared: &'a Shared,
    /// The keyspace and the rest of the locked state.
    pub state: &'a mut State,
    /// The calling connection.
    pub client: &'a mut ClientCtx,
    /// The request.
    pub args: &'a Args<'b>,
    /// The reply.
    pub out: &'a mut Out,
    /// The row being run (a subcommand's for a container).
    pub spec: &'a Spec,
    /// The selected database.
    pub db: usize,
    /// Unix time, ms (read once per batch).
    pub now: u64,
    /// What the command propagates.
    pub prop: Propagation,
}

impl<'b> Ctx<'_, 'b> {
    /// Argument `i` (0 is the name; arity was checked).
    #[inline]
    pub fn arg(&self, i: usize) -> &'b [u8] {
        self.args.get(i)
    }

    /// Number of arguments, the name included.
    #[inline]
    pub fn argc(&self) -> usize {
        self.args.len()
    }

    /// Writes an error.
    pub fn error(&mut self, e: &str) {
        self.out.error(e);
    }

    /// `key` in database `db` was changed: counts one change (the command propagates) and
    /// flags every client WATCHing it (Redis `signalModifiedKey`).
    pub fn modified_in(&mut self, db: usize, key: &[u8]) {
        self.prop.dirty += 1;
        txn::touch(self.state, db, key);
    }

    /// `key` in the selected database was changed (see [`Ctx::modified_in`]).
    pub fn modified(&mut self, key: &[u8]) {
        self.modified_in(self.db, key);
    }

    /// A keyspace notification of `class` named `event` for `key` in the selected database
    /// (Valkey `notifyKeyspaceEvent`; see `crate::notify`). Called where Valkey calls it, in
    /// the same order. Keys the command found expired are announced (`expired`) first, as
    /// Valkey's lookup does before the command's own events.
    #[inline]
    pub fn notify(&mut self, class: u32, event: &str, key: &[u8]) {
        self.notify_in(self.db, class, event, key);
    }

    /// [`Ctx::notify`] for a key of database `db` (MOVE, COPY ... DB).
    #[inline]
    pub fn notify_in(&mut self, db: usize, class: u32, event: &str, key: &[u8]) {
        crate::notify::keyspace_event(self.state, db, class, event, key);
    }

    /// Propagates `argv` as this command's effect (instead of the command itself).
    pub fn effect(&mut self, argv: &[&[u8]]) {
        self.prop
            .effects
            .push(argv.iter().map(|a| a.to_vec()).collect());
    }

    /// Counts a read lookup in INFO `keyspace_hits` / `keyspace_misses`.
    pub fn note_lookup(&mut self, found: bool) {
        if found {
            self.state.keyspace_hits += 1;
        } else {
            self.state.keyspace_misses += 1;
        }
    }
}

/// A uniform draw in `0..n` (`n` > 0) from `rng`.
pub fn rand_below(rng: &mut impl rand_core::RngCore, n: usize) -> usize {
    (rng.next_u64() % n.max(1) as u64) as usize
}

/// Writes an integer reply for a count.
pub fn reply_len(out: &mut Out, n: usize) {
    out.int(i64::try_from(n).unwrap_or(i64::MAX));
}

/// Parses a `COUNT`-like integer argument: `Err` with Redis's text when not an integer.
///
/// # Errors
/// [`NOT_INT`].
pub fn int_arg(b: &[u8]) -> Result<i64, &'static str> {
    parse_i64(b).ok_or(NOT_INT)
}

/// The options of a SCAN-family command from argument `start`: `MATCH pattern`, `COUNT n`
/// and, for SCAN, `TYPE t` (Redis `scanGenericCommand`'s parsing and texts).
pub struct ScanArgs<'a> {
    /// `MATCH` pattern.
    pub pattern: Option<&'a [u8]>,
    /// `COUNT` (default 10).
    pub count: usize,
    /// `TYPE` (SCAN only).
    pub type_name: Option<&'a [u8]>,
    /// `NOVALUES` (HSCAN, Valkey 8) or `NOSCORES` (ZSCAN, Valkey 8): fields or members only.
    pub only_keys: bool,
}

/// What a SCAN-family command walks (which options it takes: Valkey 9.1 `scanGenericCommand`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanOf {
    /// SCAN: the keyspace (`TYPE`).
    Keys,
    /// SSCAN.
    Set,
    /// HSCAN (`NOVALUES`).
    Hash,
    /// ZSCAN (`NOSCORES`).
    Zset,
}

/// Parses a SCAN cursor (Redis `parseScanCursorOrReply`: an unsigned 64-bit integer).
///
/// # Errors
/// `ERR invalid cursor`.
pub fn parse_cursor(b: &[u8]) -> Result<u64, &'static str> {
    std::str::from_utf8(b)
        .ok()
        .filter(|s| !s.starts_with('+') && !s.is_empty())
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or("ERR invalid cursor")
}

/// Parses the options after a cursor (see [`ScanArgs`]).
///
/// # Errors
/// `ERR syntax error`, `ERR value is not an integer or out of range`, Valkey 9.1's texts for
/// `NOVALUES` / `NOSCORES` given to another command than HSCAN / ZSCAN.
pub fn parse_scan_args<'a>(
    args: &Args<'a>,
    start: usize,
    of: ScanOf,
) -> Result<ScanArgs<'a>, &'static str> {
    let mut s = ScanArgs {
        pattern: None,
        count: 10,
        type_name: None,
        only_keys: false,
    };
    let mut i = start;
    while i < args.len() {
        let a = args.get(i);
        let more = args.len() - i - 1;
        if a.eq_ignore_ascii_case(b"count") && more >= 1 {
            let n = int_arg(args.get(i + 1))?;
            if n < 1 {
                return Err(SYNTAX);
            }
            s.count = usize::try_from(n).unwrap_or(usize::MAX);
            i += 2;
        } else if a.eq_ignore_ascii_case(b"match") && more >= 1 {
            s.pattern = Some(args.get(i + 1));
            i += 2;
        } else if of == ScanOf::Keys && a.eq_ignore_ascii_case(b"type") && more >= 1 {
            s.type_name = Some(args.get(i + 1));
            i += 2;
        } else if a.eq_ignore_ascii_case(b"novalues") {
            if of != ScanOf::Hash {
                return Err("ERR NOVALUES option can only be used in HSCAN");
            }
            s.only_keys = true;
            i += 1;
        } else if a.eq_ignore_ascii_case(b"noscores") {
            if of != ScanOf::Zset {
                return Err("ERR NOSCORES option can only be used in ZSCAN");
            }
            s.only_keys = true;
            i += 1;
        } else {
            return Err(SYNTAX);
        }
    }
    Ok(s)
}

/// Whether `m` passes a SCAN `MATCH` pattern.
pub fn matches(pattern: Option<&[u8]>, m: &[u8]) -> bool {
    pattern.is_none_or(|p| p == b"*" || ferrocluster_kvstore::glob_match(p, m))
}

/// Sends one write's effect `args` (the command itself or an effect [`Ctx::effect`] chose)
/// through the replication hook's `emit` (replicas and slot-migration export links, which
/// pick the key's slot from its first key).
pub fn emit_effect(
    state: &mut State,
    db: usize,
    spec: &Spec,
    args: &Args<'_>,
    now: u64,
    emit: fn(&mut State, usize, &[u8], &[&[u8]]),
) {
    let _ = now;
    let parts: Vec<&[u8]> = (0..args.len()).map(|i| args.get(i)).collect();
    let key = spec
        .info
        .key_positions(&parts)
        .next()
        .map_or(&b""[..], |p| parts[p]);
    emit(state, db, key, &parts);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_integers() {
        assert_eq!(parse_i64(b"42"), Some(42));
        assert_eq!(parse_i64(b"-7"), Some(-7));
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"+1"), None);
        assert_eq!(parse_i64(b"01"), None);
        assert_eq!(parse_i64(b" 1"), None);
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        assert_eq!(parse_i64(b""), None);
    }
}

//! The simulated hosts' keyspace: a real [`KvStore`] of [`Val`] (strings and lists), the
//! client's write commands, and how a host executes the commands it gets (its clients', its
//! primary's stream).
//!
//! Every client write creates one key of its own, `{<tag>}w<id>` where `<tag>` hashes to the
//! written slot; the command depends on the write ID, so the stream carries non-idempotent
//! commands too: `SET key <id>` (id % 3 == 0), `RPUSH key <id>` (1), `INCRBY key <id>` (2).
//! Applied once, each leaves a value the oracle can name ([`expected`]); applied twice (a
//! replayed stream) or not at all, the value differs.

use ferrocluster_dataplane::aof::{AofError, AofValue, AofWriter};
use ferrocluster_kvstore::{KvStore, KvValue};
use ferrocluster_rdb::{EncodeError, ObjectWriter, RdbObject, RdbValue, UnsupportedKind};
use ferrocluster_slot::{key_hash_slot, Slot};
use std::collections::BTreeMap;

/// A value of a simulated host: a string or a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Val {
    /// A string.
    Str(Vec<u8>),
    /// A list, head first.
    List(Vec<Vec<u8>>),
}

impl KvValue for Val {
    fn heap_size(&self) -> usize {
        match self {
            Val::Str(s) => s.capacity(),
            Val::List(l) => l.iter().map(Vec::capacity).sum::<usize>() + l.capacity() * 24,
        }
    }
    fn type_name(&self) -> &'static str {
        match self {
            Val::Str(_) => "string",
            Val::List(_) => "list",
        }
    }
}

/// The commands that rebuild a value (a slot migration's snapshot): `SET`, or `RPUSH`.
impl AofValue for Val {
    fn write_aof(&self, w: AofWriter<'_>) -> Result<(), AofError> {
        match self {
            Val::Str(s) => w.string(s),
            Val::List(l) => w.list(l.iter()),
        }
    }
}

impl RdbValue for Val {
    fn write_rdb(&self, w: ObjectWriter<'_>) -> Result<(), EncodeError> {
        match self {
            Val::Str(s) => w.string(s),
            Val::List(l) => w.list(l.iter()),
        }
    }
    fn from_rdb(obj: RdbObject) -> Result<Val, UnsupportedKind> {
        match obj {
            RdbObject::String(s) => Ok(Val::Str(s)),
            RdbObject::List(l) => Ok(Val::List(l)),
            o => Err(UnsupportedKind { kind: o.kind() }),
        }
    }
}

/// A host's keyspace (database 0 only; cluster mode).
pub type Keyspace = KvStore<Val>;

/// A fresh empty keyspace.
pub fn keyspace() -> Keyspace {
    KvStore::new(1).expect("one database is a valid count")
}

/// Hash tags by slot, found once per slot.
#[derive(Debug, Default)]
pub struct Tags(BTreeMap<Slot, String>);

/// The shortest decimal hash tag that hashes to `slot`.
fn find_tag(slot: Slot) -> String {
    (0u64..)
        .map(|n| n.to_string())
        .find(|t| key_hash_slot(t.as_bytes()) == slot)
        .expect("every slot has a decimal tag")
}

impl Tags {
    /// The key of write `id` to `slot` (the slot's tag is kept for the next one).
    pub fn key(&mut self, slot: Slot, id: u64) -> Vec<u8> {
        let tag = self.0.entry(slot).or_insert_with(|| find_tag(slot));
        format!("{{{tag}}}w{id}").into_bytes()
    }

    /// [`Tags::key`] without keeping the tag.
    pub fn key_of(&self, slot: Slot, id: u64) -> Vec<u8> {
        match self.0.get(&slot) {
            Some(tag) => format!("{{{tag}}}w{id}").into_bytes(),
            None => format!("{{{}}}w{id}", find_tag(slot)).into_bytes(),
        }
    }
}

/// The write ID in a key made by [`Tags::key`].
pub fn write_id(key: &[u8]) -> Option<u64> {
    let close = key.iter().position(|&b| b == b'}')?;
    let rest = key.get(close + 1..)?.strip_prefix(b"w")?;
    std::str::from_utf8(rest).ok()?.parse().ok()
}

/// The command of write `id` on `key` (module docs).
pub fn command(key: &[u8], id: u64) -> Vec<Vec<u8>> {
    let name: &[u8] = match id % 3 {
        0 => b"SET",
        1 => b"RPUSH",
        _ => b"INCRBY",
    };
    vec![name.to_vec(), key.to_vec(), id.to_string().into_bytes()]
}

/// The value write `id` leaves on its own key when applied exactly once.
pub fn expected(id: u64) -> Val {
    match id % 3 {
        1 => Val::List(vec![id.to_string().into_bytes()]),
        _ => Val::Str(id.to_string().into_bytes()),
    }
}

/// Why a command could not be executed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecError(pub String);

/// Executes one write command on `kv` in database 0 at `now` (Unix ms): `SET`, `RPUSH`,
/// `INCRBY`, `DEL`, `FLUSHALL` (the ones the simulated hosts' clients and data plane send).
///
/// # Errors
/// An unknown command, a wrong arity, a wrong type or a non-integer; nothing changed.
pub fn execute(kv: &mut Keyspace, argv: &[Vec<u8>], now: u64) -> Result<(), ExecError> {
    let name = argv
        .first()
        .map(|a| a.to_ascii_uppercase())
        .unwrap_or_default();
    let err = |m: &str| {
        ExecError(format!(
            "{m}: {:?}",
            argv.iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
        ))
    };
    let kv_err = |e: ferrocluster_kvstore::KvError| ExecError(e.to_string());
    match (name.as_slice(), argv.len()) {
        (b"SET", 3) => {
            kv.insert(0, &argv[1], Val::Str(argv[2].clone()), now)
                .map_err(kv_err)?;
        }
        (b"RPUSH", n) if n >= 3 => {
            let mut list = match kv.get(0, &argv[1], now).map_err(kv_err)? {
                Some(Val::List(l)) => l.clone(),
                Some(Val::Str(_)) => return Err(err("WRONGTYPE")),
                None => Vec::new(),
            };
            list.extend(argv[2..].iter().cloned());
            kv.insert(0, &argv[1], Val::List(list), now)
                .map_err(kv_err)?;
        }
        (b"INCRBY", 3) => {
            let by: i64 = std::str::from_utf8(&argv[2])
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| err("not an integer"))?;
            let old = match kv.get(0, &argv[1], now).map_err(kv_err)? {
                None => 0,
                Some(Val::Str(s)) => std::str::from_utf8(s)
                    .ok()
                    .and_then(|s| s.parse::<i64>().ok())
                    .ok_or_else(|| err("not an integer"))?,
                Some(Val::List(_)) => return Err(err("WRONGTYPE")),
            };
            let new = old.checked_add(by).ok_or_else(|| err("overflow"))?;
            kv.insert(0, &argv[1], Val::Str(new.to_string().into_bytes()), now)
                .map_err(kv_err)?;
        }
        (b"DEL", n) if n >= 2 => {
            for k in &argv[1..] {
                kv.remove(0, k, now).map_err(kv_err)?;
            }
        }
        (b"FLUSHALL", 1) => {
            kv.flush_all();
        }
        _ => return Err(err("unknown command")),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_leave_their_expected_value_once_and_another_twice() {
        let mut tags = Tags::default();
        let slot = Slot::new(4242).unwrap();
        for id in [3u64, 4, 5] {
            let key = tags.key(slot, id);
            assert_eq!(key_hash_slot(&key), slot);
            assert_eq!(write_id(&key), Some(id));
            let mut kv = keyspace();
            execute(&mut kv, &command(&key, id), 1).unwrap();
            assert_eq!(kv.get(0, &key, 1).unwrap(), Some(&expected(id)));
            execute(&mut kv, &command(&key, id), 1).unwrap();
            let twice = kv.get(0, &key, 1).unwrap().cloned();
            // SET is idempotent; RPUSH and INCRBY are not.
            assert_eq!(twice == Some(expected(id)), id % 3 == 0, "write {id}");
        }
        let mut kv = keyspace();
        assert!(execute(&mut kv, &[b"GETDEL".to_vec(), b"k".to_vec()], 1).is_err());
    }
}

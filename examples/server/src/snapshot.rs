//! The keyspace as an RDB file and back, for a full sync: the primary writes every database
//! with `ferrocluster_rdb::RdbWriter` (RDB 10, which Redis 7.0, Valkey 8 and Valkey 9 all
//! load), the replica decodes what it receives with `ferrocluster_rdb::RdbDecoder` into an
//! keyspace of its own ([`RdbLoader`]). The values go through the server's `RdbValue` (src/value.rs).

use crate::server::Value;
use ferrocluster_kvstore::KvStore;
use ferrocluster_rdb::{EntryMeta, Item, RdbDecoder, RdbValue, RdbWriter, WriterConfig};

/// The aux fields every RDB this server writes starts with (`redis-ver`, `redis-bits`,
/// `ctime`, Redis's `rdbSaveInfoAuxFields`); a caller adds its own after them.
pub fn server_aux(now: u64) -> Vec<(&'static str, String)> {
    vec![
        ("redis-ver", crate::admin::COMPAT_VERSION.to_string()),
        ("redis-bits", "64".to_string()),
        ("ctime", (now / 1000).to_string()),
    ]
}

/// What a snapshot is written from: the keyspace itself (under the state lock while it is
/// written) or a [`KeyspaceCopy`] taken under the lock and written without it.
#[derive(Clone, Copy)]
pub enum Keys<'a> {
    /// The keys of the store live at `now` (ms).
    Live(&'a KvStore<Value>, u64),
    /// A copy.
    Copy(&'a KeyspaceCopy),
}

/// The live keys of a keyspace, copied under the state lock so that a background save or AOF
/// rewrite encodes and writes them without it (redis-server forks for this; the copy is our
/// copy-on-write, paid in full at once: one allocation per key and value, memory for a
/// second data set until the write ends). `crate::persist` measures the difference in
/// benches/persist-latency-compare.sh.
pub struct KeyspaceCopy {
    /// (database, its keys), non-empty databases only.
    dbs: Vec<(usize, Vec<CopiedKey>)>,
}

/// A copied key: the key, its value and its absolute expiry (ms).
type CopiedKey = (bytes::Bytes, Value, Option<i64>);

impl KeyspaceCopy {
    /// Copies every key of `kv` live at `now` (one pass, `KvStore::for_each_live`).
    pub fn of(kv: &KvStore<Value>, now: u64) -> KeyspaceCopy {
        let mut dbs = Vec::new();
        for db in 0..kv.databases() {
            if kv.dbsize(db).unwrap_or(0) == 0 {
                continue;
            }
            let mut keys = Vec::with_capacity(kv.dbsize(db).unwrap_or(0) as usize);
            let _ = kv.for_each_live(db, now, |k, v, deadline| {
                let at = deadline.and_then(|t| i64::try_from(t).ok());
                keys.push((bytes::Bytes::copy_from_slice(k), v.clone(), at));
                Ok::<(), ()>(())
            });
            dbs.push((db, keys));
        }
        KeyspaceCopy { dbs }
    }
}

/// Writes every key of `keys` (all databases, expiry as absolute ms) as one RDB file with
/// the aux fields `aux` (name, value) after the signature. Expired keys are left out.
///
/// # Errors
/// A value the RDB format cannot hold, with its key.
pub fn write_rdb(keys: Keys<'_>, aux: &[(&str, String)]) -> Result<Vec<u8>, String> {
    let mut w = RdbWriter::new(WriterConfig::default());
    let err = |e: ferrocluster_rdb::EncodeError| e.to_string();
    for (k, v) in aux {
        w.aux(k.as_bytes(), v.as_bytes()).map_err(err)?;
    }
    for_each_key(
        keys,
        &mut w,
        |w, db| w.select_db(db as u64).map_err(err),
        |w, k, v, expire_ms| {
            let meta = EntryMeta {
                expire_ms,
                ..EntryMeta::default()
            };
            w.entry(k, v, meta)
                .map_err(|e| format!("key {:?}: {e}", String::from_utf8_lossy(k)))
        },
    )?;
    w.finish().map_err(err)?;
    Ok(w.take())
}

/// `rdb-key-save-delay` (a hidden option, Valkey's `DEBUG_CONFIG`), µs: a save made from a
/// copy of the keyspace (BGSAVE, the AOF rewrite's base: where Valkey's forked child saves)
/// waits this long after each key; 0 or less: no wait. Read again while waiting, so setting
/// it to 0 ends a long wait at once. A save written under the state lock does not wait.
pub static KEY_SAVE_DELAY_US: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// Waits [`KEY_SAVE_DELAY_US`] (in steps of at most 10 ms, each after reading it again).
fn key_save_delay() {
    use std::sync::atomic::Ordering::Relaxed;
    let mut left = KEY_SAVE_DELAY_US.load(Relaxed);
    while left > 0 && KEY_SAVE_DELAY_US.load(Relaxed) > 0 {
        let step = left.min(10_000);
        std::thread::sleep(std::time::Duration::from_micros(step as u64));
        left -= step;
    }
}

/// Visits every key of `keys`, database by database, writing into `sink`: `on_db(sink, db)`
/// before the first key of each non-empty database, then `on_key(sink, key, value, expiry)`
/// with the absolute expiry in ms. The one walk behind the RDB writer here and the AOF
/// rewrite's `.base.aof` (`crate::aof`). Stops at the first error either callback returns.
///
/// # Errors
/// The first error of `on_db` or `on_key`.
pub fn for_each_key<S>(
    keys: Keys<'_>,
    sink: &mut S,
    on_db: impl Fn(&mut S, usize) -> Result<(), String>,
    on_key: impl Fn(&mut S, &[u8], &Value, Option<i64>) -> Result<(), String>,
) -> Result<(), String> {
    match keys {
        Keys::Live(kv, now) => {
            for db in 0..kv.databases() {
                if kv.dbsize(db).unwrap_or(0) == 0 {
                    continue;
                }
                on_db(sink, db)?;
                // One pass over the tables (`KvStore::for_each_live`): no lookup per key.
                let walked = kv.for_each_live(db, now, |k, v, deadline| {
                    on_key(sink, k, v, deadline.and_then(|t| i64::try_from(t).ok()))
                });
                walked.map_err(|e| e.to_string())??;
            }
        }
        Keys::Copy(copy) => {
            for (db, keys) in &copy.dbs {
                on_db(sink, *db)?;
                for (k, v, at) in keys {
                    on_key(sink, k, v, *at)?;
                    key_save_delay();
                }
            }
        }
    }
    Ok(())
}

/// An RDB being loaded piece by piece into a keyspace of its own (a replica's full sync: the
/// old data set stays in use until [`RdbLoader::finish`]). Every entry goes in with its
/// expiry; aux fields, functions and size hints are skipped.
pub struct RdbLoader {
    decoder: RdbDecoder,
    kv: KvStore<Value>,
    keys: u64,
}

impl RdbLoader {
    /// An empty keyspace of `databases` databases to load into.
    ///
    /// # Errors
    /// A database count the keyspace refuses.
    pub fn new(databases: usize) -> Result<RdbLoader, String> {
        Ok(RdbLoader {
            decoder: RdbDecoder::new(),
            kv: KvStore::new(databases).map_err(|e| e.to_string())?,
            keys: 0,
        })
    }

    /// The next bytes of the file: every entry they complete is inserted.
    ///
    /// # Errors
    /// The decoder's error (with the file offset), a value type the server does not hold, or
    /// a database past the keyspace's count.
    pub fn feed(&mut self, bytes: &[u8], now: u64) -> Result<(), String> {
        self.decoder.feed(bytes);
        self.drain(now)
    }

    fn drain(&mut self, now: u64) -> Result<(), String> {
        while let Some(item) = self.decoder.poll().map_err(|e| e.to_string())? {
            let Item::Entry(e) = item else {
                continue;
            };
            let value = Value::from_rdb(e.object)
                .map_err(|u| format!("key {:?}: {u}", String::from_utf8_lossy(&e.key)))?;
            let expire = e.expire_ms.map(|t| t.max(0) as u64);
            self.kv
                .insert_with_expiry(e.db as usize, &e.key, value, expire, now)
                .map_err(|err| format!("key {:?}: {err}", String::from_utf8_lossy(&e.key)))?;
            self.keys += 1;
        }
        Ok(())
    }

    /// The file is complete: the loaded keyspace and its number of keys.
    ///
    /// # Errors
    /// As [`RdbLoader::feed`], or a file cut short (no checksum).
    pub fn finish(mut self, now: u64) -> Result<(KvStore<Value>, u64), String> {
        self.drain(now)?;
        self.decoder.finish().map_err(|e| e.to_string())?;
        Ok((self.kv, self.keys))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyspace_round_trips_through_an_rdb_file_with_expiry_and_databases() {
        let now = 1_000;
        let mut kv: KvStore<Value> = KvStore::new(4).unwrap();
        kv.insert(0, b"a", Value::from_rdb_string(b"1").unwrap(), now)
            .unwrap();
        kv.insert_with_expiry(
            3,
            b"b",
            Value::from_rdb_string(b"two").unwrap(),
            Some(9_000),
            now,
        )
        .unwrap();
        let rdb = write_rdb(Keys::Live(&kv, now), &[("redis-ver", "7.2.4".into())]).unwrap();
        assert!(rdb.starts_with(b"REDIS0010"));
        let mut loader = RdbLoader::new(4).unwrap();
        // In two pieces, as a replica gets it.
        loader.feed(&rdb[..7], now).unwrap();
        loader.feed(&rdb[7..], now).unwrap();
        let (back, keys) = loader.finish(now).unwrap();
        assert_eq!(keys, 2);
        assert!(back.get(0, b"a", now).unwrap().is_some());
        assert_eq!(
            back.expiry(3, b"b", now).unwrap(),
            ferrocluster_kvstore::KeyExpiry::At(9_000)
        );
        // Cut short: refused, naming the reason.
        let mut cut = RdbLoader::new(4).unwrap();
        cut.feed(&rdb[..rdb.len() - 3], now).unwrap();
        assert!(cut.finish(now).is_err());
    }
}

//! The keyspace as an RDB file and back, for a full sync: the primary writes every database
//! with `ferrocluster_rdb::RdbWriter` (RDB 10, which Redis 7.0, Valkey 8 and Valkey 9 all
//! load), the replica decodes what it receives with `ferrocluster_rdb::RdbDecoder` into an
//! emptied keyspace. The values go through the server's `RdbValue` (src/value.rs).

use crate::server::Value;
use ferrocluster_kvstore::{KeyExpiry, KvStore, ScanOptions};
use ferrocluster_rdb::{EntryMeta, Item, RdbDecoder, RdbValue, RdbWriter, WriterConfig};

/// Writes every key of `kv` (all databases, expiry as absolute ms) as one RDB file with the
/// aux fields `aux` (name, value) after the signature. Keys that expired at `now` are left out.
///
/// # Errors
/// A value the RDB format cannot hold, with its key.
pub fn write_rdb(kv: &KvStore<Value>, aux: &[(&str, String)], now: u64) -> Result<Vec<u8>, String> {
    let mut w = RdbWriter::new(WriterConfig::default());
    let err = |e: ferrocluster_rdb::EncodeError| e.to_string();
    for (k, v) in aux {
        w.aux(k.as_bytes(), v.as_bytes()).map_err(err)?;
    }
    for db in 0..kv.databases() {
        let keys = kv.dbsize(db).unwrap_or(0);
        if keys == 0 {
            continue;
        }
        w.select_db(db as u64).map_err(err)?;
        let mut cursor = 0;
        loop {
            let opts = ScanOptions {
                count: 1000,
                ..ScanOptions::default()
            };
            let Ok(page) = kv.scan(db, cursor, &opts, now) else {
                break;
            };
            for k in &page.keys {
                let Some(v) = kv.get(db, k, now).ok().flatten() else {
                    continue;
                };
                let expire_ms = match kv.expiry(db, k, now) {
                    Ok(KeyExpiry::At(t)) => i64::try_from(t).ok(),
                    _ => None,
                };
                let meta = EntryMeta {
                    expire_ms,
                    ..EntryMeta::default()
                };
                w.entry(k, v, meta)
                    .map_err(|e| format!("key {:?}: {e}", String::from_utf8_lossy(k)))?;
            }
            cursor = page.cursor;
            if cursor == 0 {
                break;
            }
        }
    }
    w.finish().map_err(err)?;
    Ok(w.take())
}

/// Loads the RDB file `bytes` into `kv` (emptied by the caller first): every entry with its
/// expiry; aux fields, functions and size hints are skipped. Returns the number of keys.
///
/// # Errors
/// The decoder's error (with the file offset), a value type the server does not hold, a
/// database past `kv`'s count, or a file cut short (no checksum).
pub fn load_rdb(kv: &mut KvStore<Value>, bytes: &[u8], now: u64) -> Result<u64, String> {
    let mut d = RdbDecoder::new();
    d.feed(bytes);
    let mut keys = 0;
    while let Some(item) = d.poll().map_err(|e| e.to_string())? {
        let Item::Entry(e) = item else {
            continue;
        };
        let value = Value::from_rdb(e.object)
            .map_err(|u| format!("key {:?}: {u}", String::from_utf8_lossy(&e.key)))?;
        let expire = e.expire_ms.map(|t| t.max(0) as u64);
        kv.insert_with_expiry(e.db as usize, &e.key, value, expire, now)
            .map_err(|err| format!("key {:?}: {err}", String::from_utf8_lossy(&e.key)))?;
        keys += 1;
    }
    d.finish().map_err(|e| e.to_string())?;
    Ok(keys)
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
        let rdb = write_rdb(&kv, &[("redis-ver", "7.2.4".into())], now).unwrap();
        assert!(rdb.starts_with(b"REDIS0010"));
        let mut back: KvStore<Value> = KvStore::new(4).unwrap();
        assert_eq!(load_rdb(&mut back, &rdb, now).unwrap(), 2);
        assert!(back.get(0, b"a", now).unwrap().is_some());
        assert_eq!(back.expiry(3, b"b", now).unwrap(), KeyExpiry::At(9_000));
        // Cut short: refused, naming the reason.
        let mut cut: KvStore<Value> = KvStore::new(4).unwrap();
        assert!(load_rdb(&mut cut, &rdb[..rdb.len() - 3], now).is_err());
    }
}

//! A small database for the ASM tests: typed values kept in insertion order per slot (so a
//! snapshot read from it has the order the commands built), the write commands a Valkey 9
//! migration stream carries, [`AofValue`] and [`SlotSource`], and the facts form the capture
//! scripts write (`facts.json`: type, value, absolute expiry).

use ferrocluster_dataplane::aof::{AofError, AofValue, AofWriter};
use ferrocluster_dataplane::{KeyVisitor, SlotSource};
use ferrocluster_slot::{key_hash_slot, Slot};
use serde_json::{json, Value as Json};
use std::collections::{BTreeMap, VecDeque};

type Bytes = Vec<u8>;

/// A stored value.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Str(Bytes),
    List(VecDeque<Bytes>),
    /// Members in insertion order.
    Set(Vec<Bytes>),
    /// Fields in insertion order, with their expiry (Unix ms).
    Hash(Vec<(Bytes, Bytes, Option<i64>)>),
    /// Members in insertion order.
    ZSet(Vec<(Bytes, f64)>),
    /// Entries and the `XSETID` metadata.
    Stream {
        entries: Vec<(String, Vec<(Bytes, Bytes)>)>,
        meta: Option<(String, String, String)>,
    },
}

/// A key's value and expiry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub val: Val,
    pub expire: Option<i64>,
}

/// Databases of keys, each kept per slot in insertion order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Db {
    pub spaces: Vec<BTreeMap<u16, Vec<(Bytes, Entry)>>>,
}

fn int(b: &[u8]) -> Result<i64, String> {
    std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| "ERR value is not an integer or out of range".to_owned())
}

fn float(b: &[u8]) -> Result<f64, String> {
    std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|f| !f.is_nan())
        .ok_or_else(|| "ERR value is not a valid float".to_owned())
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

impl Db {
    pub fn new(databases: usize) -> Db {
        Db {
            spaces: vec![BTreeMap::new(); databases],
        }
    }

    fn slot_keys(&mut self, db: u32, key: &[u8]) -> &mut Vec<(Bytes, Entry)> {
        let slot = key_hash_slot(key).get();
        self.spaces[db as usize].entry(slot).or_default()
    }

    pub fn get(&self, db: u32, key: &[u8]) -> Option<&Entry> {
        let slot = key_hash_slot(key).get();
        self.spaces[db as usize]
            .get(&slot)?
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, e)| e)
    }

    fn get_mut(&mut self, db: u32, key: &[u8]) -> Option<&mut Entry> {
        self.slot_keys(db, key)
            .iter_mut()
            .find(|(k, _)| k == key)
            .map(|(_, e)| e)
    }

    fn remove(&mut self, db: u32, key: &[u8]) -> bool {
        let keys = self.slot_keys(db, key);
        let before = keys.len();
        keys.retain(|(k, _)| k != key);
        before != keys.len()
    }

    /// The entry of `key`, created with `make` when missing.
    fn entry(&mut self, db: u32, key: &[u8], make: impl FnOnce() -> Val) -> &mut Entry {
        let keys = self.slot_keys(db, key);
        let i = match keys.iter().position(|(k, _)| k == key) {
            Some(i) => i,
            None => {
                keys.push((
                    key.to_vec(),
                    Entry {
                        val: make(),
                        expire: None,
                    },
                ));
                keys.len() - 1
            }
        };
        &mut keys[i].1
    }

    /// Drops a collection that became empty.
    fn drop_if_empty(&mut self, db: u32, key: &[u8]) {
        let empty = self.get(db, key).is_some_and(|e| match &e.val {
            Val::List(v) => v.is_empty(),
            Val::Set(v) => v.is_empty(),
            Val::Hash(v) => v.is_empty(),
            Val::ZSet(v) => v.is_empty(),
            _ => false,
        });
        if empty {
            self.remove(db, key);
        }
    }

    /// Runs one write command in database `db`.
    pub fn exec(&mut self, db: u32, argv: &[Bytes]) -> Result<(), String> {
        let name = String::from_utf8_lossy(&argv[0]).to_ascii_uppercase();
        let arity = |n: usize| {
            if argv.len() < n {
                Err(format!("ERR wrong number of arguments for '{name}'"))
            } else {
                Ok(())
            }
        };
        let key = argv.get(1).cloned().unwrap_or_default();
        match name.as_str() {
            "SET" => {
                arity(3)?;
                let mut expire = None;
                let mut i = 3;
                while i < argv.len() {
                    match String::from_utf8_lossy(&argv[i])
                        .to_ascii_uppercase()
                        .as_str()
                    {
                        "PXAT" => expire = Some(int(&argv[i + 1])?),
                        other => return Err(format!("ERR unsupported SET option {other}")),
                    }
                    i += 2;
                }
                let e = self.entry(db, &key, || Val::Str(Vec::new()));
                e.val = Val::Str(argv[2].clone());
                e.expire = expire;
            }
            "APPEND" => {
                arity(3)?;
                match &mut self.entry(db, &key, || Val::Str(Vec::new())).val {
                    Val::Str(s) => s.extend_from_slice(&argv[2]),
                    _ => return Err(WRONGTYPE.into()),
                }
            }
            "INCRBY" | "INCR" => {
                let by = if name == "INCR" { 1 } else { int(&argv[2])? };
                let e = self.entry(db, &key, || Val::Str(b"0".to_vec()));
                let Val::Str(s) = &mut e.val else {
                    return Err(WRONGTYPE.into());
                };
                *s = (int(s)? + by).to_string().into_bytes();
            }
            "DEL" | "UNLINK" => {
                for k in &argv[1..] {
                    self.remove(db, k);
                }
            }
            "PEXPIREAT" => {
                arity(3)?;
                let at = int(&argv[2])?;
                if let Some(e) = self.get_mut(db, &key) {
                    e.expire = Some(at);
                }
            }
            "RPUSH" | "LPUSH" => {
                arity(3)?;
                let Val::List(l) = &mut self.entry(db, &key, || Val::List(VecDeque::new())).val
                else {
                    return Err(WRONGTYPE.into());
                };
                for v in &argv[2..] {
                    if name == "RPUSH" {
                        l.push_back(v.clone());
                    } else {
                        l.push_front(v.clone());
                    }
                }
            }
            "SADD" => {
                arity(3)?;
                let Val::Set(s) = &mut self.entry(db, &key, || Val::Set(Vec::new())).val else {
                    return Err(WRONGTYPE.into());
                };
                for m in &argv[2..] {
                    if !s.contains(m) {
                        s.push(m.clone());
                    }
                }
            }
            "SREM" => {
                if let Some(Entry {
                    val: Val::Set(s), ..
                }) = self.get_mut(db, &key)
                {
                    s.retain(|m| !argv[2..].contains(m));
                }
                self.drop_if_empty(db, &key);
            }
            "HSET" | "HMSET" => {
                arity(4)?;
                let Val::Hash(h) = &mut self.entry(db, &key, || Val::Hash(Vec::new())).val else {
                    return Err(WRONGTYPE.into());
                };
                for p in argv[2..].chunks(2) {
                    set_field(h, &p[0], &p[1], None);
                }
            }
            "HSETEX" => {
                // HSETEX key PXAT <ms> FIELDS <n> f v ..
                arity(8)?;
                let at = int(&argv[3])?;
                let n = int(&argv[5])? as usize;
                let Val::Hash(h) = &mut self.entry(db, &key, || Val::Hash(Vec::new())).val else {
                    return Err(WRONGTYPE.into());
                };
                for p in argv[6..6 + 2 * n].chunks(2) {
                    set_field(h, &p[0], &p[1], Some(at));
                }
            }
            "HINCRBY" => {
                let by = int(&argv[3])?;
                let Val::Hash(h) = &mut self.entry(db, &key, || Val::Hash(Vec::new())).val else {
                    return Err(WRONGTYPE.into());
                };
                let cur = h
                    .iter()
                    .find(|(f, _, _)| *f == argv[2])
                    .map(|(_, v, _)| int(v))
                    .transpose()?
                    .unwrap_or(0);
                let exp = h.iter().find(|(f, _, _)| *f == argv[2]).and_then(|x| x.2);
                set_field(h, &argv[2], (cur + by).to_string().as_bytes(), exp);
            }
            "ZADD" => {
                arity(4)?;
                let Val::ZSet(z) = &mut self.entry(db, &key, || Val::ZSet(Vec::new())).val else {
                    return Err(WRONGTYPE.into());
                };
                for p in argv[2..].chunks(2) {
                    let s = float(&p[0])?;
                    match z.iter_mut().find(|(m, _)| *m == p[1]) {
                        Some(e) => e.1 = s,
                        None => z.push((p[1].clone(), s)),
                    }
                }
            }
            "ZINCRBY" => {
                let by = float(&argv[2])?;
                let Val::ZSet(z) = &mut self.entry(db, &key, || Val::ZSet(Vec::new())).val else {
                    return Err(WRONGTYPE.into());
                };
                match z.iter_mut().find(|(m, _)| *m == argv[3]) {
                    Some(e) => e.1 += by,
                    None => z.push((argv[3].clone(), by)),
                }
            }
            "XADD" => {
                arity(5)?;
                let Val::Stream { entries, .. } = &mut self
                    .entry(db, &key, || Val::Stream {
                        entries: Vec::new(),
                        meta: None,
                    })
                    .val
                else {
                    return Err(WRONGTYPE.into());
                };
                let fields = argv[3..]
                    .chunks(2)
                    .map(|p| (p[0].clone(), p[1].clone()))
                    .collect();
                entries.push((String::from_utf8_lossy(&argv[2]).into_owned(), fields));
            }
            "XSETID" => {
                if let Some(Entry {
                    val: Val::Stream { meta, .. },
                    ..
                }) = self.get_mut(db, &key)
                {
                    let s = |i: usize| String::from_utf8_lossy(&argv[i]).into_owned();
                    *meta = Some((s(2), s(4), s(6)));
                }
            }
            other => return Err(format!("ERR unknown command '{other}'")),
        }
        Ok(())
    }

    /// Stores `key` (replacing it).
    #[allow(dead_code)] // the interop tests' (tests/asm_interop)
    pub fn insert(&mut self, db: u32, key: &[u8], entry: Entry) {
        self.remove(db, key);
        self.slot_keys(db, key).push((key.to_vec(), entry));
    }

    /// The keys of database `db` in the facts form of the capture scripts.
    pub fn facts(&self, db: u32) -> BTreeMap<String, Json> {
        let mut out = BTreeMap::new();
        for keys in self.spaces[db as usize].values() {
            for (k, e) in keys {
                out.insert(hex(k), entry_facts(e));
            }
        }
        out
    }
}

impl Val {
    /// A value decoded from a DUMP payload.
    #[allow(dead_code)] // the interop tests' (tests/asm_interop)
    pub fn from_object(o: ferrocluster_rdb::RdbObject) -> Val {
        use ferrocluster_rdb::RdbObject as O;
        match o {
            O::String(s) => Val::Str(s),
            O::List(l) => Val::List(l.into()),
            O::Set(m) => Val::Set(m),
            O::SortedSet(z) => Val::ZSet(z),
            O::Hash(h) => Val::Hash(h.into_iter().map(|(f, v)| (f, v, None)).collect()),
            O::HashWithExpiry(h) => Val::Hash(h),
        }
    }
}

fn set_field(h: &mut Vec<(Bytes, Bytes, Option<i64>)>, f: &[u8], v: &[u8], exp: Option<i64>) {
    match h.iter_mut().find(|(x, _, _)| x == f) {
        Some(e) => {
            e.1 = v.to_vec();
            e.2 = exp;
        }
        None => h.push((f.to_vec(), v.to_vec(), exp)),
    }
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A score as one canonical text, for comparing with the facts' Python `repr`.
pub fn canon_score(f: f64) -> String {
    format!("{f:?}")
}

fn entry_facts(e: &Entry) -> Json {
    let (t, v) = match &e.val {
        Val::Str(s) => ("string", json!(hex(s))),
        Val::List(l) => ("list", json!(l.iter().map(|x| hex(x)).collect::<Vec<_>>())),
        Val::Set(s) => {
            let mut v: Vec<String> = s.iter().map(|x| hex(x)).collect();
            v.sort();
            ("set", json!(v))
        }
        Val::ZSet(z) => {
            let mut v: Vec<(String, String)> =
                z.iter().map(|(m, s)| (hex(m), canon_score(*s))).collect();
            v.sort();
            ("zset", json!(v))
        }
        Val::Hash(h) => {
            let mut fields: Vec<(String, String)> =
                h.iter().map(|(f, v, _)| (hex(f), hex(v))).collect();
            fields.sort();
            let mut exp: Vec<(String, i64)> = h
                .iter()
                .filter_map(|(f, _, e)| e.map(|e| (hex(f), e)))
                .collect();
            exp.sort();
            if exp.is_empty() {
                ("hash", json!(fields))
            } else {
                ("hash", json!({"fields": fields, "field_expire_at_ms": exp}))
            }
        }
        Val::Stream { entries, .. } => {
            let v: Vec<Json> = entries
                .iter()
                .map(|(id, f)| {
                    let mut f: Vec<(String, String)> =
                        f.iter().map(|(a, b)| (hex(a), hex(b))).collect();
                    f.sort();
                    json!([id, f])
                })
                .collect();
            ("stream", json!(v))
        }
    };
    json!({"type": t, "value": v, "expire_at_ms": e.expire.unwrap_or(-1)})
}

/// The facts of a capture with sorted-set scores in [`canon_score`] form.
#[allow(dead_code)] // the replay tests' (tests/asm/vectors.rs)
pub fn canon_facts(keys: &serde_json::Map<String, Json>) -> BTreeMap<String, Json> {
    keys.iter()
        .map(|(k, v)| {
            let mut v = v.clone();
            if v["type"] == "zset" {
                let mut z: Vec<(String, String)> = v["value"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| {
                        let s: f64 = p[1].as_str().unwrap().parse().unwrap();
                        (p[0].as_str().unwrap().to_owned(), canon_score(s))
                    })
                    .collect();
                z.sort();
                v["value"] = json!(z);
            }
            (k.clone(), v)
        })
        .collect()
}

impl AofValue for Val {
    fn write_aof(&self, w: AofWriter<'_>) -> Result<(), AofError> {
        match self {
            Val::Str(s) => w.string(s),
            Val::List(l) => w.list(l.iter()),
            Val::Set(s) => w.set(s.iter()),
            Val::ZSet(z) => w.sorted_set(z.iter().map(|(m, s)| (m, *s))),
            Val::Hash(h) if h.iter().any(|f| f.2.is_some()) => {
                w.hash_with_expiry(h.iter().map(|(f, v, e)| (f, v, *e)))
            }
            Val::Hash(h) => w.hash(h.iter().map(|(f, v, _)| (f, v))),
            Val::Stream { .. } => unreachable!("the slot source skips streams"),
        }
    }
}

/// Reads a [`Db`] as the snapshot does; streams are skipped (the data plane writes none).
impl SlotSource for Db {
    type Value = Val;

    fn page(
        &self,
        db: u32,
        slot: Slot,
        cursor: u64,
        max: usize,
        f: &mut KeyVisitor<'_, Val>,
    ) -> u64 {
        let Some(keys) = self
            .spaces
            .get(db as usize)
            .and_then(|s| s.get(&slot.get()))
        else {
            return 0;
        };
        let start = cursor as usize;
        let end = (start + max).min(keys.len());
        for (k, e) in &keys[start.min(end)..end] {
            if !matches!(e.val, Val::Stream { .. }) {
                f(k, &e.val, e.expire);
            }
        }
        if end >= keys.len() {
            0
        } else {
            end as u64
        }
    }
}

/// A [`Db`] read the way the server's keyspace walks a slot (`KvStore::slot_page`): from the
/// last key of the slot down, the cursor the position reached; a key removed below the
/// cursor shifts the ones above it down, so one already visited can be visited again. The
/// walk [`ferrocluster_dataplane::SnapshotMode::SlotPaged`] must cope with.
#[allow(dead_code)] // asm_interop shares this file and reads no slot this way
pub struct Backward<'a>(pub &'a Db);

impl SlotSource for Backward<'_> {
    type Value = Val;

    fn page(
        &self,
        db: u32,
        slot: Slot,
        cursor: u64,
        max: usize,
        f: &mut KeyVisitor<'_, Val>,
    ) -> u64 {
        let Some(keys) = self
            .0
            .spaces
            .get(db as usize)
            .and_then(|s| s.get(&slot.get()))
        else {
            return 0;
        };
        let len = keys.len();
        let mut pos = if cursor == 0 || cursor as usize > len {
            len
        } else {
            cursor as usize
        };
        let mut seen = 0;
        while pos > 0 && seen < max.max(1) {
            pos -= 1;
            seen += 1;
            let (k, e) = &keys[pos];
            if !matches!(e.val, Val::Stream { .. }) {
                f(k, &e.val, e.expire);
            }
        }
        pos as u64
    }
}

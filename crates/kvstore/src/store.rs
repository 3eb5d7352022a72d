//! [`KvStore`]: databases × 16384 lazily allocated slot tables, counts, expiry, hiding.

use crate::bits::SlotBits;
use crate::key::CompactKey;
use crate::keyhash::KeyHasher;
use crate::stats::{HostCounters, SlotStats};
use crate::table::{entry_memory, Entry, SlotTable};
use crate::{KvError, KvValue};
use bytes::Bytes;
use ferrocluster_slot::{Slot, SlotKey, SLOT_COUNT};
use hashbrown::DefaultHashBuilder;
use rand_core::RngCore;
use std::hash::BuildHasher;
use std::ops::{Deref, DerefMut};

/// The largest accepted number of databases (our bound; Valkey's `databases` config allows
/// more, but no deployment needs more than a few thousand).
pub const MAX_DATABASES: usize = 65_536;

/// Slots per group in the random-key walk (128 groups of 128 slots).
const GROUP_SHIFT: usize = 7;
const GROUPS: usize = SLOT_COUNT >> GROUP_SHIFT;
/// Random draws before RANDOMKEY falls back to a walk for a live key.
const RANDOM_TRIES: usize = 100;

/// One database: a slot table per slot (allocated on first insert, freed when empty) plus
/// the counters that make the queries O(1).
pub(crate) struct Db<V> {
    /// One pointer per slot (16 bytes, 256 KiB per database, dense enough to stay cached);
    /// `None` for a slot without keys.
    pub(crate) slots: Box<[Option<Box<SlotTable<V>>>]>,
    /// Slots with at least one key.
    pub(crate) nonempty: SlotBits,
    /// Slots with at least one key that has a deadline.
    pub(crate) volatile: SlotBits,
    /// Keys, hidden slots included.
    pub(crate) keys: u64,
    /// Keys in slots that are not hidden (DBSIZE).
    pub(crate) visible: u64,
    /// Visible keys per group of 128 slots (random key selection).
    pub(crate) group_visible: Box<[u64; GROUPS]>,
    /// Keys with a deadline, hidden slots included.
    pub(crate) expires: u64,
    /// Sum of those keys' deadlines (ms).
    pub(crate) deadline_sum: u128,
    /// Sum of the slot tables' memory figures (bytes).
    pub(crate) memory: u64,
}

impl<V: KvValue> Db<V> {
    fn new() -> Db<V> {
        Db {
            slots: (0..SLOT_COUNT).map(|_| None).collect(),
            nonempty: SlotBits::new(),
            volatile: SlotBits::new(),
            keys: 0,
            visible: 0,
            group_visible: Box::new([0; GROUPS]),
            expires: 0,
            deadline_sum: 0,
            memory: 0,
        }
    }

    /// A key's deadline went from `old` to `new` (as the table stores them).
    fn track_deadline(&mut self, old: Option<u64>, new: Option<u64>) {
        if let Some(d) = old {
            self.expires -= 1;
            self.deadline_sum -= u128::from(d);
        }
        if let Some(d) = new {
            self.expires += 1;
            self.deadline_sum += u128::from(d);
        }
    }

    /// Table of `slot`, if it has keys.
    #[inline]
    pub(crate) fn table(&self, slot: usize) -> Option<&SlotTable<V>> {
        self.slots.get(slot)?.as_deref()
    }

    fn add_visible(&mut self, slot: usize, n: u64) {
        self.visible += n;
        self.group_visible[slot >> GROUP_SHIFT] += n;
    }

    fn sub_visible(&mut self, slot: usize, n: u64) {
        self.visible -= n;
        self.group_visible[slot >> GROUP_SHIFT] -= n;
    }

    /// Removes the entry at `pos` of `slot` and keeps every counter right.
    fn remove_entry<S: BuildHasher>(
        &mut self,
        slot: usize,
        pos: usize,
        hash: u64,
        hidden: bool,
        hasher: &KeyHasher<S>,
    ) -> Option<(Entry<V>, Option<u64>)> {
        let table = self.slots.get_mut(slot)?.as_mut()?;
        let (entry, deadline) = SlotTable::remove_at(table, pos, hash, hasher);
        table.memory = table.memory.saturating_sub(entry.memory());
        self.memory = self.memory.saturating_sub(entry.memory());
        let volatile = table.has_deadlines();
        self.track_deadline(deadline, None);
        let now_empty = self.slots[slot].as_ref().is_none_or(|t| t.len() == 0);
        self.keys -= 1;
        if !hidden {
            self.sub_visible(slot, 1);
        }
        if now_empty {
            // Give the empty table's memory back (Valkey frees empty tables, D.1).
            self.slots[slot] = None;
            self.nonempty.set(slot, false);
        }
        self.volatile.set(slot, volatile);
        Some((entry, deadline))
    }
}

/// A key found by a lookup: its slot table, position and entry.
type Located<'a, V> = (&'a SlotTable<V>, usize, &'a Entry<V>);

/// What a key's expiry looks like (PTTL / PEXPIRETIME shapes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyExpiry {
    /// No such key (or it is expired): PTTL -2.
    Missing,
    /// The key has no deadline: PTTL -1.
    Persistent,
    /// The key expires after this absolute time (ms); it is still alive at exactly that ms.
    At(u64),
}

/// Where the active expiry cycle resumes.
#[derive(Debug, Clone, Copy, Default)]
struct ExpireCursor {
    db: usize,
    slot: usize,
    /// Positions below `top` of the slot remain; 0 = the slot is not started.
    top: usize,
}

/// The keyspace of a cluster node: `databases` databases, each split into 16384 per-slot hash
/// tables (facts sheet D.1), with O(1) counts per slot and per database.
///
/// * `V` is the value type ([`KvValue`]); keys are byte strings (taken as `&[u8]`, returned as
///   [`Bytes`]).
/// * `S` keys the hash of the per-slot tables: keys longer than 16 bytes are hashed with `S`,
///   shorter ones with a folded multiply keyed by two words drawn from `S` when the store is
///   made (foldhash's construction for short inputs). Its randomness never reaches an output: every
///   iteration order (SCAN, KEYS, GETKEYSINSLOT, RANDOMKEY) follows the tables' entry order,
///   which depends only on the sequence of operations.
/// * Time: every read takes `now` (ms) and treats keys past their deadline as absent; a
///   mutating call that finds its key expired deletes it first (Redis `expireIfNeeded`).
///   Counts (DBSIZE, COUNTKEYSINSLOT) include expired keys not yet reclaimed, as in Redis;
///   [`KvStore::expire_cycle`] reclaims them.
/// * Hidden slots (importing, facts sheet A.12/D.3): see [`KvStore::hide_slot`].
pub struct KvStore<V, S = DefaultHashBuilder> {
    pub(crate) dbs: Vec<Option<Box<Db<V>>>>,
    pub(crate) hidden: SlotBits,
    /// Host-fed SLOT-STATS counters; empty until first fed.
    host: Vec<HostCounters>,
    pub(crate) hasher: KeyHasher<S>,
    expire_cursor: ExpireCursor,
    /// The access word new keys get while access is tracked (`None`: not tracked).
    pub(crate) access_init: Option<u32>,
    /// Keys deleted because they had expired, while the host asks for them
    /// ([`KvStore::log_expired`]).
    expired_log: Option<Vec<(usize, Bytes)>>,
    /// Keys created, while the host asks for them ([`KvStore::log_new`]).
    new_log: Option<Vec<(usize, Bytes)>>,
    /// A read met a key past its deadline ([`KvStore::take_read_expired`]).
    read_expired: std::sync::atomic::AtomicBool,
}

impl<V: KvValue> KvStore<V> {
    /// An empty store with `databases` databases (`cluster-databases`; Valkey's default is 1,
    /// facts sheet D.5). Nothing per database or per slot is allocated until a key arrives.
    ///
    /// # Errors
    /// [`KvError::DatabaseCount`] when `databases` is 0 or above [`MAX_DATABASES`].
    pub fn new(databases: usize) -> Result<KvStore<V>, KvError> {
        KvStore::with_hasher(databases, DefaultHashBuilder::default())
    }
}

impl<V: KvValue, S: BuildHasher> KvStore<V, S> {
    /// Like [`KvStore::new`] with an explicit hasher for the slot tables (for example a seeded
    /// one, to make memory layout reproducible).
    ///
    /// # Errors
    /// [`KvError::DatabaseCount`] when `databases` is 0 or above [`MAX_DATABASES`].
    pub fn with_hasher(databases: usize, hasher: S) -> Result<KvStore<V, S>, KvError> {
        if databases == 0 || databases > MAX_DATABASES {
            return Err(KvError::DatabaseCount(databases));
        }
        Ok(KvStore {
            dbs: (0..databases).map(|_| None).collect(),
            hidden: SlotBits::new(),
            host: Vec::new(),
            hasher: KeyHasher::new(hasher),
            expire_cursor: ExpireCursor::default(),
            access_init: None,
            expired_log: None,
            new_log: None,
            read_expired: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// The number of databases.
    pub fn databases(&self) -> usize {
        self.dbs.len()
    }

    pub(crate) fn check_db(&self, db: usize) -> Result<(), KvError> {
        if db < self.dbs.len() {
            Ok(())
        } else {
            Err(KvError::DbOutOfRange {
                db,
                databases: self.dbs.len(),
            })
        }
    }

    /// The database, `None` if it never held a key.
    pub(crate) fn db(&self, db: usize) -> Result<Option<&Db<V>>, KvError> {
        self.check_db(db)?;
        Ok(self.dbs[db].as_deref())
    }

    pub(crate) fn is_hidden_index(&self, slot: usize) -> bool {
        self.hidden.get(slot)
    }

    pub(crate) fn hidden_bits(&self) -> &SlotBits {
        &self.hidden
    }

    /// Slot table and position of `key` in `db`, expired or not.
    #[inline(always)]
    pub(crate) fn locate(
        &self,
        db: usize,
        key: SlotKey<'_>,
    ) -> Result<Option<Located<'_, V>>, KvError> {
        let Some(d) = self.db(db)? else {
            return Ok(None);
        };
        let probe = self.hasher.probe(key);
        let Some(table) = d.table(probe.slot) else {
            return Ok(None);
        };
        Ok(table.find_entry(&probe).map(|(pos, e)| (table, pos, e)))
    }

    /// The value of `key` in `db` at time `now` (ms), `None` if absent or expired.
    /// Keys of hidden slots are found (the node routes such requests away, A.12).
    ///
    /// # Errors
    /// [`KvError::DbOutOfRange`].
    #[inline]
    pub fn get(&self, db: usize, key: &[u8], now: u64) -> Result<Option<&V>, KvError> {
        self.get_in_slot(db, SlotKey::new(key), now)
    }

    /// [`KvStore::get`] for a key whose slot the caller already computed (routing does):
    /// the store skips the CRC16, as Valkey's kvstore does with the slot cached on the client.
    ///
    /// # Errors
    /// [`KvError::DbOutOfRange`].
    #[inline(always)]
    pub fn get_in_slot(
        &self,
        db: usize,
        key: SlotKey<'_>,
        now: u64,
    ) -> Result<Option<&V>, KvError> {
        Ok(match self.locate(db, key)? {
            Some((t, pos, e)) => {
                if t.is_expired(pos, now) {
                    self.read_expired
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                    None
                } else {
                    Some(&e.value)
                }
            }
            None => None,
        })
    }

    /// Whether a read ([`KvStore::get`] and what is built on it) met a key past its deadline
    /// since the last call (it read as absent: reads cannot delete). A primary then deletes
    /// the keys its command named (`KvStore::expire_if_needed`), as Valkey's lookup does
    /// (`expireIfNeeded`: the key goes, counted and propagated as expired), at the cost of a
    /// second lookup only in that case.
    pub fn take_read_expired(&mut self) -> bool {
        std::mem::take(self.read_expired.get_mut())
    }

    /// Whether `key` exists in `db` at `now` (EXISTS). One of the methods behind the `node`
    /// crate's key-presence trait.
    ///
    /// # Errors
    /// [`KvError::DbOutOfRange`].
    pub fn exists(&self, db: usize, key: &[u8], now: u64) -> Result<bool, KvError> {
        Ok(self.get(db, key, now)?.is_some())
    }

    /// Looks a key up for writing: the db (created on demand), slot, position and hash; deletes
    /// the key first when it is expired at `now`.
    pub(crate) fn locate_mut(
        &mut self,
        db: usize,
        key: SlotKey<'_>,
        now: u64,
    ) -> Result<Option<(usize, usize, u64)>, KvError> {
        self.check_db(db)?;
        let probe = self.hasher.probe(key);
        let (slot, hash) = (probe.slot, probe.hash);
        let hidden = self.hidden.get(slot);
        let Some(d) = self.dbs[db].as_deref_mut() else {
            return Ok(None);
        };
        let Some(table) = d.table(slot) else {
            return Ok(None);
        };
        let Some(pos) = table.find(&probe) else {
            return Ok(None);
        };
        if table.is_expired(pos, now) {
            let gone = d.remove_entry(slot, pos, hash, hidden, &self.hasher);
            if let (Some(log), Some((e, _))) = (self.expired_log.as_mut(), gone) {
                log.push((db, Bytes::copy_from_slice(e.key.as_bytes())));
            }
            return Ok(None);
        }
        Ok(Some((slot, pos, hash)))
    }

    /// Deletes `key` if it is expired at `now` (Valkey `expireIfNeeded` on a primary), logging
    /// it for [`KvStore::take_expired`] when [`KvStore::log_expired`] is on. Lets a host that
    /// announces expiries (keyspace notifications) delete what a read finds expired, as a
    /// read through `&self` ([`KvStore::get`]) cannot.
    ///
    /// # Errors
    /// [`KvError::DbOutOfRange`].
    pub fn expire_if_needed(&mut self, db: usize, key: &[u8], now: u64) -> Result<(), KvError> {
        self.locate_mut(db, SlotKey::new(key), now).map(|_| ())
    }

    /// Mutable access to the value of a live `key`. The returned guard re-measures the value's
    /// [`KvValue::heap_size`] when dropped, keeping the slot's memory figure right. An expired
    /// key is deleted and `None` returned.
    ///
    /// # Errors
    /// [`KvError::DbOutOfRange`].
    pub fn get_mut(
        &mut self,
        db: usize,
        key: &[u8],
        now: u64,
    ) -> Result<Option<ValueMut<'_, V>>, KvError> {
        self.get_mut_in_slot(db, SlotKey::new(key), now)
    }

    /// [`KvStore::get_mut`] for a key whose slot the caller already computed.
    ///
    /// # Errors
    /// [`KvError::DbOutOfRange`].
    pub fn get_mut_in_slot(
        &mut self,
        db: usize,
        key: SlotKey<'_>,
        now: u64,
    ) -> Result<Option<ValueMut<'_, V>>, KvError> {
        let Some((slot, pos, _)) = self.locate_mut(db, key, now)? else {
            return Ok(None);
        };
        let Some(Db {
            slots,
            memory: db_memory,
            ..
        }) = self.dbs[db].as_deref_mut()
        else {
            return Ok(None);
        };
        let Some(table) = slots.get_mut(slot).and_then(|t| t.as_deref_mut()) else {
            return Ok(None);
        };
        let SlotTable {
            entries, memory, ..
        } = table;
        let value = &mut entries[pos].value;
        let before = value.heap_size();
        Ok(Some(ValueMut {
            value,
            memory,
            db_memory,
            before,
        }))
    }

    /// Sets `key` to `value` in `db` without a deadline (SET: an existing deadline is cleared).
    /// Returns the previous live value.
    ///
    /// # Errors
    /// [`KvError::DbOutOfRange`].
    #[inline]
    pub fn insert(
        &mut self,
        db: usize,
        key: &[u8],
        value: V,
        now: u64,
    ) -> Result<Option<V>, KvError> {
        self.insert_in_slot(db, SlotKey::new(key), value, None, now)
    }

    /// Sets `key` to `value` with an absolute deadline `expire_at` (ms; `None` = persistent;
    /// `u64::MAX` is stored as `u64::MAX - 1`). Returns the previous live value (`None` if the
    /// key was absent or expired at `now`).
    ///
    /// # Errors
    /// [`KvError::DbOutOfRange`].
    pub fn insert_with_expiry(
        &mut self,
        db: usize,
        key: &[u8],
        value: V,
        expire_at: Option<u64>,
        now: u64,
    ) -> Result<Option<V>, KvError> {
        self.insert_in_slot(db, SlotKey::new(key), value, expire_at, now)
    }

    /// [`KvStore::insert_with_expiry`] for a key whose slot the caller already computed.
    ///
    /// # Errors
    /// [`KvError::DbOutOfRange`].
    pub fn insert_in_slot(
        &mut self,
        db: usize,
        key: SlotKey<'_>,
        value: V,
        expire_at: Option<u64>,
        now: u64,
    ) -> Result<Option<V>, KvError> {
        self.check_db(db)?;
        let probe = self.hasher.probe(key);
        let (slot, hash) = (probe.slot, probe.hash);
        let hidden = self.hidden.get(slot);
        let access = self.access_init;
        let d = self.dbs[db].get_or_insert_with(|| Box::new(Db::new()));
        let table = d.slots[slot].get_or_insert_with(SlotTable::new);
        if let Some(pos) = table.find(&probe) {
            let expired = table.is_expired(pos, now);
            let new_heap = value.heap_size() as u64;
            let old = std::mem::replace(&mut table.entries[pos].value, value);
            let old_heap = old.heap_size() as u64;
            table.memory = table.memory.saturating_sub(old_heap) + new_heap;
            d.memory = d.memory.saturating_sub(old_heap) + new_heap;
            if expired {
                // A key that had expired is new to the caller: its access starts afresh,
                // and the expired one is logged as deleted.
                if let (Some(w), Some(cell)) = (access, table.access_mut(pos)) {
                    *cell = w;
                }
                if let Some(log) = self.expired_log.as_mut() {
                    log.push((db, Bytes::copy_from_slice(key.key())));
                }
                if let Some(log) = self.new_log.as_mut().filter(|_| !hidden) {
                    log.push((db, Bytes::copy_from_slice(key.key())));
                }
            }
            let before = table.deadline(pos);
            table.set_deadline(pos, expire_at);
            let after = table.deadline(pos);
            let volatile = table.has_deadlines();
            d.volatile.set(slot, volatile);
            d.track_deadline(before, after);
            return Ok(if expired { None } else { Some(old) });
        }
        if let Some(log) = self.new_log.as_mut().filter(|_| !hidden) {
            log.push((db, Bytes::copy_from_slice(key.key())));
        }
        let key = CompactKey::new(key.key());
        let bytes = entry_memory(&key, &value);
        table.memory += bytes;
        d.memory += bytes;
        let pos = SlotTable::push(table, hash, key, value, access, &self.hasher);
        if expire_at.is_some() {
            table.set_deadline(pos, expire_at);
            let after = table.deadline(pos);
            d.volatile.set(slot, true);
            d.track_deadline(None, after);
        }
        d.nonempty.set(slot, true);
        d.keys += 1;
        if !hidden {
            d.add_visible(slot, 1);
        }
        Ok(None)
    }

    /// Deletes `key` from `db`. Returns its value if it was live at `now` (an expired key is
    /// deleted too, returning `None`).
    ///
    /// # Errors
    /// [`KvError::DbOutOfRange`].
    pub fn remove(&mut self, db: usize, key: &[u8], now: u64) -> Result<Option<V>, KvError> {
        self.remove_in_slot(db, SlotKey::new(key), now)
    }

    /// [`KvStore::remove`] for a key whose slot the caller already computed.
    ///
    /// # Errors
    /// [`KvError::DbOutOfRange`].
    pub fn remove_in_slot(
        &mut self,
        db: usize,
        key: SlotKey<'_>,
        now: u64,
    ) -> Result<Option<V>, KvError> {
        let Some((slot, pos, hash)) = self.locate_mut(db, key, now)? else {
            return Ok(None);
        };
        let hidden = self.hidden.get(slot);
        let Some(d) = self.dbs[db].as_deref_mut() else {
            return Ok(None);
        };
        Ok(d.remove_entry(slot, pos, hash, hidden, &self.hasher)
            .map(|(e, _)| e.value))
    }

    /// Sets the absolute deadline (ms) of a live key (PEXPIREAT). A deadline in the past makes
    /// the key absent from then on (it is reclaimed later). Returns whether the key exists.
    ///
    /// # Errors
    /// [`KvError::DbOutOfRange`].
    pub fn set_expire_at(
        &mut self,
        db: usize,
        key: &[u8],
        expire_at: u64,
        now: u64,
    ) -> Result<bool, KvError> {
        self.set_deadline(db, key, Some(expire_at), now)
            .map(|r| r.is_some())
    }

    /// Removes the deadline of a live key (PERSIST). Returns whether it had one.
    ///
    /// # Errors
    /// [`KvError::DbOutOfRange`].
    pub fn persist(&mut self, db: usize, key: &[u8], now: u64) -> Result<bool, KvError> {
        Ok(self.set_deadline(db, key, None, now)?.unwrap_or(false))
    }

    /// Sets or clears a deadline; `None` if the key is absent, else whether it had one.
    fn set_deadline(
        &mut self,
        db: usize,
        key: &[u8],
        deadline: Option<u64>,
        now: u64,
    ) -> Result<Option<bool>, KvError> {
        let Some((slot, pos, _)) = self.locate_mut(db, SlotKey::new(key), now)? else {
            return Ok(None);
        };
        let Some(d) = self.dbs[db].as_deref_mut() else {
            return Ok(None);
        };
        let Some(table) = d.slots.get_mut(slot).and_then(|t| t.as_deref_mut()) else {
            return Ok(None);
        };
        let before = table.deadline(pos);
        let had = table.set_deadline(pos, deadline);
        let after = table.deadline(pos);
        let volatile = table.has_deadlines();
        d.volatile.set(slot, volatile);
        d.track_deadline(before, after);
        Ok(Some(had))
    }

    /// The expiry of `key` at `now` (PTTL is `At(t) - now`, PEXPIRETIME is `t`).
    ///
    /// # Errors
    /// [`KvError::DbOutOfRange`].
    pub fn expiry(&self, db: usize, key: &[u8], now: u64) -> Result<KeyExpiry, KvError> {
        Ok(match self.locate(db, SlotKey::new(key))? {
            None => KeyExpiry::Missing,
            Some((t, pos, _)) if t.is_expired(pos, now) => KeyExpiry::Missing,
            Some((t, pos, _)) => t.deadline(pos).map_or(KeyExpiry::Persistent, KeyExpiry::At),
        })
    }

    /// Active expiry step: walks the slots that hold keys with deadlines, round-robin over
    /// databases and slots, resuming where the previous call stopped, examining at most
    /// `budget` keys (every key of such a slot counts, with or without deadline) and deleting
    /// those expired at `now`. Stops early after one full pass. Hidden (importing) slots are
    /// skipped: Valkey never actively expires importing keys (facts sheet A.12). Returns how
    /// many keys were deleted.
    pub fn expire_cycle(&mut self, now: u64, budget: usize) -> u64 {
        let n = self.dbs.len();
        let ExpireCursor {
            mut db,
            mut slot,
            mut top,
        } = self.expire_cursor;
        if db >= n {
            (db, slot, top) = (0, 0, 0);
        }
        let (mut examined, mut expired, mut db_moves) = (0usize, 0u64, 0usize);
        while examined < budget && db_moves <= n {
            let next = self.dbs[db]
                .as_deref()
                .and_then(|d| d.volatile.next_from(slot, &self.hidden));
            let Some(s) = next else {
                (db, slot, top) = ((db + 1) % n, 0, 0);
                db_moves += 1;
                continue;
            };
            if s != slot {
                (slot, top) = (s, 0);
            }
            let hasher = &self.hasher;
            let Some(d) = self.dbs[db].as_deref_mut() else {
                break;
            };
            let mut pos = match d.table(slot) {
                Some(t) if top == 0 || top > t.len() => t.len(),
                Some(_) => top,
                None => 0,
            };
            while pos > 0 && examined < budget {
                pos -= 1;
                examined += 1;
                let Some(t) = d.table(slot) else { break };
                if t.is_expired(pos, now) {
                    let hash = hasher.hash(t.entries[pos].key.as_bytes());
                    // The last entry (already examined) moves into `pos`.
                    let gone = d.remove_entry(slot, pos, hash, false, hasher);
                    if let (Some(log), Some((e, _))) = (self.expired_log.as_mut(), gone) {
                        log.push((db, Bytes::copy_from_slice(e.key.as_bytes())));
                    }
                    expired += 1;
                }
            }
            if pos > 0 {
                top = pos;
                break;
            }
            (slot, top) = (slot + 1, 0);
            if slot >= SLOT_COUNT {
                (db, slot) = ((db + 1) % n, 0);
                db_moves += 1;
            }
        }
        self.expire_cursor = ExpireCursor { db, slot, top };
        expired
    }

    /// Starts (or stops) recording the keys this store deletes because they expired, by
    /// [`KvStore::expire_cycle`] or by a mutating call that met one (Redis
    /// `deleteExpiredKeyAndPropagate`): a primary MUST send a `DEL` for each to its replicas
    /// and AOF before the effect of the command that met it, so that replicas, which do not
    /// expire keys themselves, stay in step. Take them with [`KvStore::take_expired`].
    pub fn log_expired(&mut self, on: bool) {
        self.expired_log = on.then(Vec::new);
    }

    /// The keys deleted as expired since the last call, as (database, key), in deletion
    /// order; empty while not recording.
    pub fn take_expired(&mut self) -> Vec<(usize, Bytes)> {
        self.expired_log
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Starts (or stops) recording the keys this store creates (a key that was absent, or
    /// expired, gets a value; not in a hidden slot): what Valkey's `dbAdd` announces as the
    /// `new` keyspace event. Take them with [`KvStore::take_new`].
    pub fn log_new(&mut self, on: bool) {
        self.new_log = on.then(Vec::new);
    }

    /// The keys created since the last call, as (database, key), in creation order; empty
    /// while not recording.
    pub fn take_new(&mut self) -> Vec<(usize, Bytes)> {
        self.new_log
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Whether any created key waits in the log of [`KvStore::log_new`].
    pub fn has_new(&self) -> bool {
        self.new_log.as_ref().is_some_and(|l| !l.is_empty())
    }

    /// Whether any expired key waits in the log of [`KvStore::log_expired`].
    pub fn has_expired(&self) -> bool {
        self.expired_log.as_ref().is_some_and(|l| !l.is_empty())
    }

    /// DBSIZE: keys in `db` outside hidden slots (expired keys not yet reclaimed included). O(1).
    ///
    /// # Errors
    /// [`KvError::DbOutOfRange`].
    pub fn dbsize(&self, db: usize) -> Result<u64, KvError> {
        Ok(self.db(db)?.map_or(0, |d| d.visible))
    }

    /// INFO keyspace's `expires=` and `avg_ttl=` of `db` at `now` (ms): how many keys outside
    /// hidden slots have a deadline (those DBSIZE counts), and the mean of `deadline - now`
    /// over them in ms, floored at 0 (a key past its deadline that expiry has not reclaimed
    /// yet counts with its negative remainder; 0 when no key has a deadline).
    ///
    /// Exact, where Redis 7.0 and Valkey 9.1 give a running estimate from the keys their
    /// active expiry cycle samples (`activeExpireCycle`'s `avg_ttl`): both report 0 or a
    /// sampled figure until the cycle has seen keys. O(1), plus one pass over the deadlines
    /// of hidden slots (importing ones: few).
    ///
    /// # Errors
    /// [`KvError::DbOutOfRange`].
    pub fn expires(&self, db: usize, now: u64) -> Result<(u64, u64), KvError> {
        let Some(d) = self.db(db)? else {
            return Ok((0, 0));
        };
        let (mut n, mut sum) = (d.expires, d.deadline_sum);
        let none = SlotBits::new();
        let mut next = self.hidden.next_from(0, &none);
        while let Some(s) = next {
            if let Some(t) = d.table(s) {
                let (hn, hs) = t.deadline_totals();
                n -= hn;
                sum -= hs;
            }
            next = self.hidden.next_from(s + 1, &none);
        }
        if n == 0 {
            return Ok((0, 0));
        }
        let base = u128::from(now) * u128::from(n);
        let avg = sum.saturating_sub(base) / u128::from(n);
        Ok((n, u64::try_from(avg).unwrap_or(u64::MAX)))
    }

    /// Keys in `db` including those of hidden slots (what an RDB save would write). O(1).
    ///
    /// # Errors
    /// [`KvError::DbOutOfRange`].
    pub fn len_including_hidden(&self, db: usize) -> Result<u64, KvError> {
        Ok(self.db(db)?.map_or(0, |d| d.keys))
    }

    /// CLUSTER COUNTKEYSINSLOT for `db` (facts sheet C.4): keys in the slot's table, including
    /// a hidden (importing) slot's keys as Valkey 9.0/9.1 does (A.12). O(1). One of the methods
    /// behind the `node` crate's key-presence trait.
    ///
    /// # Errors
    /// [`KvError::DbOutOfRange`].
    pub fn count_keys_in_slot(&self, db: usize, slot: Slot) -> Result<u64, KvError> {
        Ok(self
            .db(db)?
            .and_then(|d| d.table(slot.index()))
            .map_or(0, |t| t.len() as u64))
    }

    /// Keys in `slot` summed over all databases (SLOT-STATS `key-count`, the "slot still has
    /// keys" checks of SETSLOT/FLUSHSLOTS/RESET, facts sheet D.5). O(databases).
    pub fn count_keys_in_slot_all_dbs(&self, slot: Slot) -> u64 {
        self.dbs
            .iter()
            .flatten()
            .filter_map(|d| d.table(slot.index()))
            .map(|t| t.len() as u64)
            .sum()
    }

    /// CLUSTER GETKEYSINSLOT: up to `count` keys of `slot` in `db`, in storage order, hidden
    /// slots and not-yet-reclaimed expired keys included (Valkey returns the table's content).
    ///
    /// # Errors
    /// [`KvError::DbOutOfRange`].
    pub fn keys_in_slot(&self, db: usize, slot: Slot, count: usize) -> Result<Vec<Bytes>, KvError> {
        let Some(t) = self.db(db)?.and_then(|d| d.table(slot.index())) else {
            return Ok(Vec::new());
        };
        Ok(t.entries
            .iter()
            .take(count)
            .map(|e| Bytes::copy_from_slice(e.key.as_bytes()))
            .collect())
    }

    /// Deletes every key of `slot` in every database (the cleanup after a slot moved away, or a
    /// failed import). Returns how many keys went. Frees the keys here; see
    /// [`KvStore::take_slot`] to free them elsewhere.
    pub fn drop_slot(&mut self, slot: Slot) -> u64 {
        self.take_slot(slot).len()
    }

    /// Removes every key of `slot` in every database, like [`KvStore::drop_slot`], but hands
    /// the removed keys back instead of freeing them: the store is updated in O(databases)
    /// whatever the slot holds, and the caller frees the memory by dropping the result, where
    /// it likes (Valkey's lazyfree: a host drops a large slot on a background thread so a
    /// slot that moved away does not stall its clients). The expiry counters of
    /// [`KvStore::expires`] cost one pass over the slot's deadlines (8 bytes a key with one).
    pub fn take_slot(&mut self, slot: Slot) -> DetachedSlot<V> {
        let s = slot.index();
        let hidden = self.hidden.get(s);
        let mut out = DetachedSlot {
            tables: Vec::new(),
            keys: 0,
        };
        for (db, d) in self.dbs.iter_mut().enumerate() {
            let Some(d) = d else {
                continue;
            };
            if let Some(t) = d.slots[s].take() {
                let (expires, sum) = t.deadline_totals();
                d.expires -= expires;
                d.deadline_sum -= sum;
                d.memory = d.memory.saturating_sub(t.memory);
                let n = t.len() as u64;
                out.keys += n;
                d.keys -= n;
                if !hidden {
                    d.sub_visible(s, n);
                }
                d.nonempty.set(s, false);
                d.volatile.set(s, false);
                out.tables.push((db, t));
            }
        }
        out
    }

    /// FLUSHDB: deletes every key of `db` (hidden slots included). Returns how many went.
    ///
    /// # Errors
    /// [`KvError::DbOutOfRange`].
    pub fn flush_db(&mut self, db: usize) -> Result<u64, KvError> {
        self.check_db(db)?;
        Ok(self.dbs[db].take().map_or(0, |d| d.keys))
    }

    /// FLUSHALL: deletes every key of every database. Returns how many went.
    pub fn flush_all(&mut self) -> u64 {
        self.dbs
            .iter_mut()
            .map(|d| d.take().map_or(0, |d| d.keys))
            .sum()
    }

    /// SWAPDB: exchanges the contents of two databases. (The node rejects SWAPDB in cluster
    /// mode with `SWAPDB is not allowed in cluster mode`, facts sheet D.5; the store offers it
    /// for hosts that run standalone.)
    ///
    /// # Errors
    /// [`KvError::DbOutOfRange`] for either index; nothing changes then.
    pub fn swap_db(&mut self, a: usize, b: usize) -> Result<(), KvError> {
        self.check_db(a)?;
        self.check_db(b)?;
        self.dbs.swap(a, b);
        Ok(())
    }

    /// RANDOMKEY: a key of `db` live at `now`, outside hidden slots, drawn uniformly among the
    /// visible keys with `rng`; expired keys are redrawn (up to 100 draws, then the first live
    /// key in slot order is taken). `None` iff no visible live key exists.
    ///
    /// # Errors
    /// [`KvError::DbOutOfRange`].
    pub fn random_key<R: RngCore + ?Sized>(
        &self,
        db: usize,
        now: u64,
        rng: &mut R,
    ) -> Result<Option<Bytes>, KvError> {
        let Some(d) = self.db(db)? else {
            return Ok(None);
        };
        if d.visible == 0 {
            return Ok(None);
        }
        for _ in 0..RANDOM_TRIES {
            // Uniform in 0..visible by widening multiply.
            let r = ((u128::from(rng.next_u64()) * u128::from(d.visible)) >> 64) as u64;
            if let Some((t, pos)) = self.nth_visible(d, r) {
                if !t.is_expired(pos, now) {
                    return Ok(Some(Bytes::copy_from_slice(t.entries[pos].key.as_bytes())));
                }
            }
        }
        let mut slot = 0;
        while let Some(s) = d.nonempty.next_from(slot, &self.hidden) {
            if let Some(t) = d.table(s) {
                if let Some(pos) = (0..t.len()).find(|&p| !t.is_expired(p, now)) {
                    return Ok(Some(Bytes::copy_from_slice(t.entries[pos].key.as_bytes())));
                }
            }
            slot = s + 1;
        }
        Ok(None)
    }

    /// The `r`-th visible key (0-based) in slot order, then storage order.
    pub(crate) fn nth_visible<'a>(
        &self,
        d: &'a Db<V>,
        mut r: u64,
    ) -> Option<(&'a SlotTable<V>, usize)> {
        let g = d.group_visible.iter().position(|&n| {
            if r < n {
                true
            } else {
                r -= n;
                false
            }
        })?;
        for s in (g << GROUP_SHIFT)..((g + 1) << GROUP_SHIFT) {
            if self.hidden.get(s) {
                continue;
            }
            let Some(t) = d.table(s) else { continue };
            let n = t.len() as u64;
            if r < n {
                return Some((t, r as usize));
            }
            r -= n;
        }
        None
    }

    /// Hides `slot` in every database (it is importing, facts sheet A.12/D.3): its keys stay
    /// stored and reachable by key, and still count in COUNTKEYSINSLOT/GETKEYSINSLOT and
    /// SLOT-STATS, but DBSIZE, SCAN, KEYS and RANDOMKEY skip them and active expiry leaves them
    /// alone. Idempotent; returns whether the slot was visible before.
    pub fn hide_slot(&mut self, slot: Slot) -> bool {
        let s = slot.index();
        if self.hidden.get(s) {
            return false;
        }
        self.hidden.set(s, true);
        for d in self.dbs.iter_mut().flatten() {
            let n = d.table(s).map_or(0, |t| t.len() as u64);
            d.sub_visible(s, n);
        }
        true
    }

    /// Makes a hidden slot visible again (import finished); its keys join the counts at once.
    /// Idempotent; returns whether the slot was hidden before.
    pub fn reveal_slot(&mut self, slot: Slot) -> bool {
        let s = slot.index();
        if !self.hidden.get(s) {
            return false;
        }
        self.hidden.set(s, false);
        for d in self.dbs.iter_mut().flatten() {
            let n = d.table(s).map_or(0, |t| t.len() as u64);
            d.add_visible(s, n);
        }
        true
    }

    /// Whether `slot` is hidden.
    pub fn is_hidden(&self, slot: Slot) -> bool {
        self.hidden.get(slot.index())
    }

    /// CLUSTER SLOT-STATS figures of `slot` (facts sheet D.6).
    pub fn slot_stats(&self, slot: Slot) -> SlotStats {
        let s = slot.index();
        let (mut key_count, mut memory_bytes) = (0, 0);
        for t in self.dbs.iter().flatten().filter_map(|d| d.table(s)) {
            key_count += t.len() as u64;
            memory_bytes += t.memory;
        }
        let h = self.host.get(s).copied().unwrap_or_default();
        SlotStats {
            key_count,
            memory_bytes,
            cpu_usec: h.cpu_usec,
            network_bytes_in: h.network_bytes_in,
            network_bytes_out: h.network_bytes_out,
        }
    }

    fn host_mut(&mut self, slot: Slot) -> &mut HostCounters {
        if self.host.is_empty() {
            self.host = vec![HostCounters::default(); SLOT_COUNT];
        }
        &mut self.host[slot.index()]
    }

    /// Adds command CPU time (µs) to `slot`'s `cpu-usec` (saturating).
    pub fn record_cpu_usec(&mut self, slot: Slot, usec: u64) {
        let h = self.host_mut(slot);
        h.cpu_usec = h.cpu_usec.saturating_add(usec);
    }

    /// Adds request bytes to `slot`'s `network-bytes-in` (saturating).
    pub fn record_network_bytes_in(&mut self, slot: Slot, bytes: u64) {
        let h = self.host_mut(slot);
        h.network_bytes_in = h.network_bytes_in.saturating_add(bytes);
    }

    /// Adds reply/replication bytes to `slot`'s `network-bytes-out` (saturating).
    pub fn record_network_bytes_out(&mut self, slot: Slot, bytes: u64) {
        let h = self.host_mut(slot);
        h.network_bytes_out = h.network_bytes_out.saturating_add(bytes);
    }

    /// Zeroes the host-fed counters of `slot` (Valkey resets a slot's stats when the slot is
    /// (re)assigned, facts sheet D.6). Key count and memory are live figures and stay.
    pub fn reset_slot_stats(&mut self, slot: Slot) {
        if let Some(h) = self.host.get_mut(slot.index()) {
            *h = HostCounters::default();
        }
    }

    /// Zeroes the host-fed counters of every slot (CONFIG RESETSTAT).
    pub fn reset_all_slot_stats(&mut self) {
        self.host = Vec::new();
    }
}

/// Mutable access to a stored value (from [`KvStore::get_mut`]); when dropped it re-measures
/// the value's heap size into the slot's memory figure.
pub struct ValueMut<'a, V: KvValue> {
    value: &'a mut V,
    memory: &'a mut u64,
    db_memory: &'a mut u64,
    before: usize,
}

impl<V: KvValue> Deref for ValueMut<'_, V> {
    type Target = V;
    fn deref(&self) -> &V {
        self.value
    }
}

impl<V: KvValue> DerefMut for ValueMut<'_, V> {
    fn deref_mut(&mut self) -> &mut V {
        self.value
    }
}

impl<V: KvValue> Drop for ValueMut<'_, V> {
    fn drop(&mut self) {
        let after = self.value.heap_size() as u64;
        for m in [&mut *self.memory, &mut *self.db_memory] {
            *m = m.saturating_sub(self.before as u64).saturating_add(after);
        }
    }
}

/// The keys of one slot taken out of a [`KvStore`] by [`KvStore::take_slot`]: an owned
/// value whose drop frees them (`Send` when `V` is), so a host can free a big slot off its
/// serving thread, or hand them out a batch at a time ([`DetachedSlot::pop_keys`]) to
/// propagate their deletion (Valkey's lazyfree of a slot that moved away).
pub struct DetachedSlot<V> {
    /// The slot's table of each database that held keys: (database, table).
    tables: Vec<(usize, Box<SlotTable<V>>)>,
    /// Keys still held.
    keys: u64,
}

impl<V> DetachedSlot<V> {
    /// How many keys it still holds (all databases): what [`KvStore::take_slot`] took, less
    /// what [`DetachedSlot::pop_keys`] handed out.
    pub fn len(&self) -> u64 {
        self.keys
    }

    /// Whether it holds no key (the slot was empty, or every key was popped).
    pub fn is_empty(&self) -> bool {
        self.keys == 0
    }

    /// Takes up to `n` keys out (`n` 0 takes none), with their values, in no particular
    /// order: the result names each key and its database, and frees their memory when it is
    /// dropped, so a host can propagate a batch of deletions under its lock and free the
    /// batch after releasing it. O(`n`); a table that empties goes with the batch.
    pub fn pop_keys(&mut self, n: usize) -> PoppedKeys<V> {
        let mut out = PoppedKeys {
            batches: Vec::new(),
            tables: Vec::new(),
            len: 0,
        };
        while out.len < n {
            let Some((db, t)) = self.tables.last_mut() else {
                break;
            };
            let take = (n - out.len).min(t.entries.len());
            let at = t.entries.len() - take;
            let entries = t.entries.split_off(at);
            out.len += take;
            let db = *db;
            if t.entries.is_empty() {
                if let Some((_, t)) = self.tables.pop() {
                    out.tables.push(t);
                }
            }
            out.batches.push((db, entries));
        }
        self.keys -= out.len as u64;
        out
    }
}

/// Keys handed out by [`DetachedSlot::pop_keys`]: each key with its database; dropping it
/// frees the keys, their values and any table they emptied.
pub struct PoppedKeys<V> {
    /// (database, entries) runs.
    batches: Vec<(usize, Vec<Entry<V>>)>,
    /// Tables left empty by the pop (freed with the batch).
    #[allow(clippy::vec_box)]
    tables: Vec<Box<SlotTable<V>>>,
    len: usize,
}

impl<V> PoppedKeys<V> {
    /// How many keys were popped.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no key was popped.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Each popped key as (database, key bytes).
    pub fn keys(&self) -> impl Iterator<Item = (usize, &[u8])> + '_ {
        self.batches
            .iter()
            .flat_map(|(db, es)| es.iter().map(move |e| (*db, e.key.as_bytes())))
    }
}

impl<V> std::fmt::Debug for PoppedKeys<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoppedKeys")
            .field("len", &self.len)
            .finish()
    }
}

impl<V> std::fmt::Debug for DetachedSlot<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DetachedSlot")
            .field("keys", &self.keys)
            .finish()
    }
}

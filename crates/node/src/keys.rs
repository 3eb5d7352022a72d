//! What the CLUSTER command executor needs to know about the host's keyspace: key counts and
//! key names per hash slot, database sizes, and optional per-slot usage statistics.
//!
//! The node never stores data; the host implements [`SlotKeys`] over its store (a few lines
//! over `ferrocluster-kvstore`). [`EmptyKeyspace`] is a keyspace without keys.

use ferrocluster_slot::Slot;

/// Per-slot usage counters for CLUSTER SLOT-STATS (slot-migration sheet D.6), kept by the host
/// when `cluster-slot-stats-enabled` is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct SlotUsage {
    /// `cpu-usec`: microseconds spent in commands bound to the slot.
    pub cpu_usec: u64,
    /// `network-bytes-in`: request bytes of commands bound to the slot.
    pub network_bytes_in: u64,
    /// `network-bytes-out`: reply bytes (plus replication bytes × replicas on a primary).
    pub network_bytes_out: u64,
}

/// Read-only access to the host's keyspace, per database (0-based) and hash slot.
///
/// Used by COUNTKEYSINSLOT / GETKEYSINSLOT (the client's database, slot-migration sheet C.4),
/// SETSLOT NODE (keys of the slot in every database), FLUSHSLOTS and REPLICATE (database 0,
/// §15 / §19.6), RESET (the client's database, §19.6) and SLOT-STATS (D.6).
///
/// ```
/// use ferrocluster_node::SlotKeys;
/// use ferrocluster_slot::{key_hash_slot, Slot};
/// struct Store(Vec<Vec<u8>>); // the keys of database 0
/// impl SlotKeys for Store {
///     fn count_keys_in_slot(&self, db: usize, slot: Slot) -> u64 {
///         if db != 0 { return 0; }
///         self.0.iter().filter(|k| key_hash_slot(k) == slot).count() as u64
///     }
///     fn keys_in_slot(&self, db: usize, slot: Slot, count: usize) -> Vec<Vec<u8>> {
///         if db != 0 { return Vec::new(); }
///         self.0.iter().filter(|k| key_hash_slot(k) == slot).take(count).cloned().collect()
///     }
///     fn db_size(&self, db: usize) -> u64 {
///         if db == 0 { self.0.len() as u64 } else { 0 }
///     }
/// }
/// let s = Store(vec![b"{u}:a".to_vec()]);
/// assert_eq!(s.count_keys_in_slot(0, key_hash_slot(b"u")), 1);
/// ```
pub trait SlotKeys {
    /// Number of keys stored in `slot` of database `db`.
    fn count_keys_in_slot(&self, db: usize, slot: Slot) -> u64;
    /// Up to `count` key names stored in `slot` of database `db`, in the store's iteration
    /// order (Valkey returns them in table order).
    fn keys_in_slot(&self, db: usize, slot: Slot, count: usize) -> Vec<Vec<u8>>;
    /// Number of keys in database `db`.
    fn db_size(&self, db: usize) -> u64;

    /// `cluster-slot-stats-enabled` (default no): whether SLOT-STATS accepts and reports
    /// `cpu-usec`, `network-bytes-in` and `network-bytes-out` (D.6).
    fn slot_stats_enabled(&self) -> bool {
        false
    }
    /// Usage counters of `slot` (read only when [`SlotKeys::slot_stats_enabled`]); `None`
    /// (the default) reports zeros.
    fn slot_usage(&self, _slot: Slot) -> Option<SlotUsage> {
        None
    }
}

/// A keyspace with no keys at all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EmptyKeyspace;

impl SlotKeys for EmptyKeyspace {
    fn count_keys_in_slot(&self, _db: usize, _slot: Slot) -> u64 {
        0
    }
    fn keys_in_slot(&self, _db: usize, _slot: Slot, _count: usize) -> Vec<Vec<u8>> {
        Vec::new()
    }
    fn db_size(&self, _db: usize) -> u64 {
        0
    }
}

/// Keys of `slot` in databases `0..databases` (Valkey 9 `countKeysInSlot` over every
/// database; [`crate::Capabilities::databases`] gives the count).
pub(crate) fn keys_in_slot_all_dbs(keys: &dyn SlotKeys, databases: usize, slot: Slot) -> u64 {
    (0..databases.max(1))
        .map(|db| keys.count_keys_in_slot(db, slot))
        .fold(0u64, u64::saturating_add)
}

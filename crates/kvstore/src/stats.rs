//! Per-slot figures behind `CLUSTER SLOT-STATS` (facts sheet D.6).

/// One slot's statistics, summed over all databases.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SlotStats {
    /// Keys stored in the slot (all databases, including expired keys not yet reclaimed and keys
    /// of a hidden/importing slot). SLOT-STATS `key-count`.
    pub key_count: u64,
    /// Bytes attributed to the slot's keys: per key the entry size, the heap bytes of a key
    /// longer than [`crate::INLINE_KEY_LEN`] and [`crate::KvValue::heap_size`] of the value.
    /// Table overhead (index buckets, spare capacity) is not attributed. `memory-bytes` (Redis
    /// 8.4 / Valkey PR #3966 design, facts sheet D.2).
    pub memory_bytes: u64,
    /// Command CPU time the host attributed to the slot (µs). SLOT-STATS `cpu-usec`.
    pub cpu_usec: u64,
    /// Request bytes the host attributed to the slot. SLOT-STATS `network-bytes-in`.
    pub network_bytes_in: u64,
    /// Reply (and replication) bytes the host attributed. SLOT-STATS `network-bytes-out`.
    pub network_bytes_out: u64,
}

/// The counters the host feeds, per slot.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct HostCounters {
    pub(crate) cpu_usec: u64,
    pub(crate) network_bytes_in: u64,
    pub(crate) network_bytes_out: u64,
}

//! The CLUSTER FORGET ban list (§16): forgotten IDs are not re-created from gossip until their
//! TTL expires.

use ferrocluster_topology::{Millis, NodeId};
use std::collections::BTreeMap;

/// Banned node IDs with their expiry time (Unix ms). Expired entries are purged lazily before
/// each add and lookup (§16). Node IDs are lowercase by construction, so the case-insensitive
/// lookup Valkey performs is the plain comparison here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Blacklist {
    entries: BTreeMap<NodeId, Millis>,
}

impl Blacklist {
    /// Bans `id` until `now + ttl_secs` s (a later add replaces the expiry).
    pub fn add(&mut self, id: NodeId, ttl_secs: u64, now: Millis) {
        self.purge(now);
        self.entries
            .insert(id, now.saturating_add_ms(ttl_secs.saturating_mul(1000)));
    }

    /// Whether `id` is banned at `now`.
    pub fn contains(&mut self, id: &NodeId, now: Millis) -> bool {
        self.purge(now);
        self.entries.contains_key(id)
    }

    /// Drops expired entries (expiry ≤ now).
    pub fn purge(&mut self, now: Millis) {
        self.entries.retain(|_, exp| *exp > now);
    }

    /// Live entries with the whole seconds they have left (rounded up, at least 1), ascending
    /// by ID: what the FORGOTTEN_NODE extensions carry (§6.3, §16).
    pub fn live(&self, now: Millis) -> Vec<(NodeId, u64)> {
        self.entries
            .iter()
            .filter(|(_, exp)| **exp > now)
            .map(|(id, exp)| (*id, exp.since(now).div_ceil(1000)))
            .collect()
    }

    /// Forgets every entry (CLUSTER RESET).
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Number of entries (expired ones included until purged).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

//! [`Epoch`]: the state this layer keeps beside the shared topology, and the cron entry.

use crate::{Election, EpochConfig, EpochEffect, ManualFailover, ReplicationState};
use ferrocluster_slot::Slot;
use ferrocluster_topology::{Millis, NodeId, Topology};
use rand_core::RngCore;
use std::collections::BTreeMap;

/// The epoch layer's own state: the "owner not claiming" marks (§11.4), the replica's
/// [`Election`] and the [`ManualFailover`] state. Everything else (epochs, lastVoteEpoch,
/// roles, slots, marks, vote times, orphan times) lives in the shared [`Topology`].
///
/// None of this is persisted (Valkey keeps it in memory too): after a restart elections and
/// manual failovers start from scratch, and lastVoteEpoch comes back from nodes.conf.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Epoch {
    /// Slot -> the owner that sent a claim without it (valid only while that node still owns
    /// the slot in the topology, so slot changes made elsewhere cannot leave a stale mark).
    pub(crate) not_claiming: BTreeMap<Slot, NodeId>,
    pub(crate) election: Election,
    pub(crate) manual: ManualFailover,
}

impl Epoch {
    /// No marks, no election, no manual failover.
    pub fn new() -> Epoch {
        Epoch::default()
    }

    /// The replica's election state.
    pub fn election(&self) -> &Election {
        &self.election
    }

    /// The manual failover state.
    pub fn manual_failover(&self) -> &ManualFailover {
        &self.manual
    }

    /// Forgets the "owner not claiming" mark of a slot. The node SHOULD call it when it
    /// assigns a slot by command (ADDSLOTS, DELSLOTS, SETSLOT NODE), as Valkey's
    /// `clusterDelSlot` does; a mark whose owner no longer owns the slot is ignored anyway.
    pub fn clear_not_claiming(&mut self, slot: Slot) {
        self.not_claiming.remove(&slot);
    }

    /// Forgets every mark, election and manual failover (CLUSTER RESET). A primary serving a
    /// manual failover unpauses writes.
    pub fn reset(&mut self, out: &mut Vec<EpochEffect>) {
        self.manual.reset(out);
        *self = Epoch::default();
    }

    /// The cron part of this layer (§7.2 step 5), every 100 ms, in Valkey's order:
    /// 1. a manual failover whose end has passed is reset (a primary unpauses writes);
    /// 2. if myself is a replica: the manual failover step (election allowed once my
    ///    processed offset equals the paused primary's), the election step
    ///    ([`Epoch::handle_failover`]), and replica migration
    ///    ([`Epoch::handle_replica_migration`], which needs `cluster_ok`, the cluster state
    ///    as last evaluated).
    #[allow(clippy::too_many_arguments)]
    pub fn handle_cron<R: RngCore + ?Sized>(
        &mut self,
        topo: &mut Topology,
        cfg: &EpochConfig,
        repl: &ReplicationState,
        cluster_ok: bool,
        now: Millis,
        rng: &mut R,
        out: &mut Vec<EpochEffect>,
    ) {
        self.check_manual_failover_timeout(now, out);
        if topo.myself().is_replica() {
            self.manual_failover_step(repl.offset, out);
            self.handle_failover(topo, cfg, repl, now, rng, out);
            self.handle_replica_migration(topo, cfg, cluster_ok, now, out);
        }
    }

    /// The next instant at which this layer has something to do by itself, if any: the start
    /// of a scheduled election that has not asked for votes, or the end of a manual failover.
    /// The cron (every 100 ms) covers it; a node MAY use it to wake up earlier.
    pub fn poll_timeout(&self) -> Option<Millis> {
        let start = self.election.auth_time().filter(|_| !self.election.sent());
        let mf_end = self.manual.end.map(|e| e.saturating_add_ms(1));
        match (start, mf_end) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

impl Epoch {
    /// The replica's election state, mutable (for [`Election::handle_auth_ack`]).
    pub fn election_mut(&mut self) -> &mut Election {
        &mut self.election
    }
}

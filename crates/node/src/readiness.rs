//! Failover readiness, the quorum check and health (`ferrocluster-health`) over the node's
//! view: the topology (whose `repl_offset`, `pong_received`, `link` and NOFAILOVER the bus
//! path keeps current), the cluster state (§10), myself's replication as the host reported it
//! and the owner-not-claiming marks of the epoch layer (§11.4).

use crate::ClusterNode;
use ferrocluster_epoch::{ReplLink, ReplicationState};
use ferrocluster_health::{
    shard_readiness, Health, HealthInputs, QuorumCheck, Readiness, ReplicationFacts, ShardReadiness,
};
use ferrocluster_slot::{Slot, SlotSet};
use ferrocluster_topology::Millis;

/// The health crate's view of myself's replication: the same facts, its own type.
fn facts(r: &ReplicationState) -> ReplicationFacts {
    let link = match r.link {
        ReplLink::Up { last_interaction } => ferrocluster_health::ReplLink::Up { last_interaction },
        ReplLink::DownSince(t) => ferrocluster_health::ReplLink::Down { since: Some(t) },
        ReplLink::Down => ferrocluster_health::ReplLink::Down { since: None },
    };
    ReplicationFacts {
        link,
        offset: r.offset,
    }
}

impl ClusterNode {
    /// Owned slots whose owner's latest claim left them out (§11.4, the epoch layer's marks).
    pub(crate) fn owner_not_claiming(&self) -> SlotSet {
        Slot::all()
            .filter(|s| {
                self.topo.slot_owner(*s).is_some() && self.epoch.is_slot_unclaimed(&self.topo, *s)
            })
            .collect()
    }

    /// Runs `f` over the [`HealthInputs`] of this node at `now`: the topology, the health
    /// options from [`crate::ClusterConfig`], the cluster state (§10), myself's
    /// replication facts once the host reported them
    /// ([`ClusterNode::handle_replication`]; before that myself is judged like any other
    /// replica, from its recorded offset) and the owner-not-claiming bitmap.
    pub(crate) fn with_health_inputs<T>(
        &self,
        now: Millis,
        f: impl FnOnce(&HealthInputs<'_>) -> T,
    ) -> T {
        let facts = self.repl.reported.then(|| facts(&self.repl.state));
        let not_claiming = self.owner_not_claiming();
        let mut inputs = HealthInputs::new(&self.topo, now, self.cfg.health, self.state.is_ok())
            .with_owner_not_claiming(&not_claiming);
        if let Some(f) = &facts {
            inputs = inputs.with_replication(f);
        }
        f(&inputs)
    }

    /// Readiness, quorum check and health at once (`INFO readiness`:
    /// [`Readiness::info_section`]; one line: [`Readiness::summary`]).
    pub fn readiness(&self, now: Millis) -> Readiness {
        self.with_health_inputs(now, Readiness::evaluate)
    }

    /// The `FERROCLUSTER CKQUORUM` check ([`QuorumCheck::reply`] is the reply).
    pub fn quorum_check(&self, now: Millis) -> QuorumCheck {
        self.with_health_inputs(now, QuorumCheck::evaluate)
    }

    /// Alert-grade health: unserved, PFAIL, FAIL and disagreeing slots, PFAIL/FAIL nodes.
    pub fn health(&self, now: Millis) -> Health {
        self.with_health_inputs(now, Health::evaluate)
    }

    /// Per shard: whether a failover of it would succeed now, and why not.
    pub fn shard_readiness(&self, now: Millis) -> Vec<ShardReadiness> {
        self.with_health_inputs(now, shard_readiness)
    }
}

//! Per-shard failover readiness: "would a failover of this shard succeed now?"

use crate::replica::{self, Ineligibility, ReplicaEligibility};
use crate::{quorum, HealthInputs};
use ferrocluster_topology::{Node, NodeId, ShardId, Topology};
use std::fmt;

/// Why a shard's failover would not succeed now; the first that applies, in variant order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NotReady {
    /// The primary owns no slots: it is not a voting primary, and Valkey's replicas do not
    /// fail over a slot-less primary (R70/V72 `clusterHandleReplicaFailover` preconditions).
    /// Such shards need no failover and are left out of the quorum check and
    /// `failover_ready`. Code `no_slots`.
    NoSlots,
    /// The primary has no replica. Code `no_replicas`.
    NoReplicas,
    /// No replica is eligible; names the first replica (table order) and its reason. Code
    /// `no_eligible_replica`.
    NoEligibleReplica {
        /// The first replica in table order.
        replica: NodeId,
        /// Why it is not eligible.
        why: Ineligibility,
    },
    /// Fewer voting primaries other than this shard's primary are reachable from here than
    /// the quorum: if the primary failed now, neither a FAIL nor the election could gather a
    /// majority (§9.3, §12.2). Code `no_quorum`.
    NoQuorum {
        /// Reachable voting primaries other than this shard's primary (myself included when
        /// a voting primary).
        reachable: usize,
        /// `size / 2 + 1`.
        quorum: usize,
    },
}

impl NotReady {
    /// The stable machine code (INFO `reason=` / `failover_blocker` values).
    pub fn code(&self) -> &'static str {
        match self {
            NotReady::NoSlots => "no_slots",
            NotReady::NoReplicas => "no_replicas",
            NotReady::NoEligibleReplica { .. } => "no_eligible_replica",
            NotReady::NoQuorum { .. } => "no_quorum",
        }
    }
}

/// Human text, e.g. `replica 0123… has not synced yet`.
impl fmt::Display for NotReady {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotReady::NoSlots => f.write_str("owns no slots"),
            NotReady::NoReplicas => f.write_str("has no replica"),
            NotReady::NoEligibleReplica { replica, why } => write!(f, "replica {replica} {why}"),
            NotReady::NoQuorum { reachable, quorum } => write!(
                f,
                "only {reachable} other voting primaries reachable, quorum {quorum}"
            ),
        }
    }
}

/// The verdict for one shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ShardVerdict {
    /// A failover would succeed now; `candidate` is the replica expected to win: the eligible
    /// one with the largest offset, ties to the smaller node ID (V8 rank, §12.2.1).
    Ready {
        /// The expected winner.
        candidate: NodeId,
    },
    /// It would not, and why.
    NotReady(NotReady),
}

impl ShardVerdict {
    /// Whether the verdict is [`ShardVerdict::Ready`].
    pub fn is_ready(&self) -> bool {
        matches!(self, ShardVerdict::Ready { .. })
    }

    /// The reason when not ready.
    pub fn not_ready(&self) -> Option<&NotReady> {
        match self {
            ShardVerdict::Ready { .. } => None,
            ShardVerdict::NotReady(r) => Some(r),
        }
    }
}

/// Failover readiness of one shard (a primary and the replicas whose `primary` names it), from
/// this node's view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardReadiness {
    /// The primary's shard ID.
    pub shard_id: ShardId,
    /// The primary.
    pub primary: NodeId,
    /// Slots the primary owns in our table.
    pub slot_count: usize,
    /// Each replica, in table order.
    pub replicas: Vec<ReplicaEligibility>,
    /// The verdict.
    pub verdict: ShardVerdict,
}

impl ShardReadiness {
    /// Whether the primary owns slots (shards without slots need no failover).
    pub fn owns_slots(&self) -> bool {
        self.slot_count > 0
    }
}

/// Voting primaries reachable from here (§10 step 3: neither PFAIL nor FAIL; myself always),
/// except `excluded`.
pub(crate) fn reachable_voters(topo: &Topology, excluded: Option<&NodeId>) -> usize {
    topo.nodes()
        .filter(|n| n.is_voting_primary() && Some(n.id()) != excluded)
        .filter(|n| n.is_myself() || !(n.is_pfail() || n.is_fail()))
        .count()
}

/// Readiness of every shard: one per node flagged PRIMARY (handshake nodes excluded), in table
/// order. Replicas whose primary is unknown belong to no shard here.
pub fn shard_readiness(inputs: &HealthInputs<'_>) -> Vec<ShardReadiness> {
    let topo = inputs.topology;
    let q = quorum(topo.cluster_size());
    topo.nodes()
        .filter(|n| n.is_primary() && !n.in_handshake())
        .map(|p| one(inputs, p, q))
        .collect()
}

/// Readiness of the shard whose primary is `primary`; `None` if no such primary is known.
pub fn shard_readiness_of(inputs: &HealthInputs<'_>, primary: &NodeId) -> Option<ShardReadiness> {
    let topo = inputs.topology;
    let p = topo
        .node(primary)
        .filter(|n| n.is_primary() && !n.in_handshake())?;
    Some(one(inputs, p, quorum(topo.cluster_size())))
}

fn one(inputs: &HealthInputs<'_>, p: &Node, q: usize) -> ShardReadiness {
    let topo = inputs.topology;
    let replicas: Vec<ReplicaEligibility> = topo
        .replicas_of(p.id())
        .filter(|r| !r.in_handshake())
        .map(|r| replica::evaluate(inputs, p, r))
        .collect();
    let verdict = verdict(topo, p, &replicas, q);
    ShardReadiness {
        shard_id: p.shard_id,
        primary: *p.id(),
        slot_count: p.slot_count(),
        replicas,
        verdict,
    }
}

fn verdict(topo: &Topology, p: &Node, replicas: &[ReplicaEligibility], q: usize) -> ShardVerdict {
    if p.slots().is_empty() {
        return ShardVerdict::NotReady(NotReady::NoSlots);
    }
    let Some(first) = replicas.first() else {
        return ShardVerdict::NotReady(NotReady::NoReplicas);
    };
    let best = replicas
        .iter()
        .filter(|r| r.is_eligible())
        .min_by(|a, b| b.repl_offset.cmp(&a.repl_offset).then(a.node.cmp(&b.node)));
    let Some(best) = best else {
        return ShardVerdict::NotReady(NotReady::NoEligibleReplica {
            replica: first.node,
            // `first` is not eligible, since no replica is.
            why: first.ineligible.unwrap_or(Ineligibility::Unreachable),
        });
    };
    let reachable = reachable_voters(topo, Some(p.id()));
    if reachable < q {
        return ShardVerdict::NotReady(NotReady::NoQuorum {
            reachable,
            quorum: q,
        });
    }
    ShardVerdict::Ready {
        candidate: best.node,
    }
}

//! The cluster-wide quorum check, in the spirit of Sentinel's `SENTINEL CKQUORUM`.

use crate::shard::{reachable_voters, shard_readiness, NotReady, ShardReadiness};
use crate::{quorum, HealthInputs};
use ferrocluster_topology::{NodeId, Reply, ShardId, Topology};
use std::fmt::Write as _;

/// The overall answer of the quorum check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuorumVerdict {
    /// A majority of voting primaries is reachable and every slot-owning shard could fail over
    /// now. Reply `+OK …`.
    Ok,
    /// A majority is reachable (a FAIL can be agreed) but at least one slot-owning shard could
    /// not fail over now. Reply `-NOTREADY …`.
    NotReady,
    /// Fewer than `size/2 + 1` voting primaries are reachable from here (or none exist): no
    /// FAIL can be agreed and no failover authorized; every slot-owning shard is named.
    /// Reply `-NOQUORUM …`.
    NoQuorum,
}

impl QuorumVerdict {
    /// `OK` / `NOTREADY` / `NOQUORUM`: the reply's first word (the error code when not OK).
    pub fn code(self) -> &'static str {
        match self {
            QuorumVerdict::Ok => "OK",
            QuorumVerdict::NotReady => "NOTREADY",
            QuorumVerdict::NoQuorum => "NOQUORUM",
        }
    }

    /// `ok` / `notready` / `noquorum`: the INFO `quorum_verdict` value.
    pub fn info_value(self) -> &'static str {
        match self {
            QuorumVerdict::Ok => "ok",
            QuorumVerdict::NotReady => "notready",
            QuorumVerdict::NoQuorum => "noquorum",
        }
    }
}

/// A slot-owning shard that could not fail over now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ShardUnable {
    /// Its shard ID.
    pub shard_id: ShardId,
    /// Its primary.
    pub primary: NodeId,
    /// Why.
    pub reason: NotReady,
}

/// The quorum check: one value answering "could this cluster detect a failure and fail over
/// right now, as far as this node sees?".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumCheck {
    /// Voting primaries (PRIMARY with ≥ 1 slot): `cluster_size`.
    pub voting_primaries: usize,
    /// Voting primaries reachable from here: neither PFAIL nor FAIL, myself always (§10 step 3).
    pub reachable: usize,
    /// `voting_primaries / 2 + 1`.
    pub quorum: usize,
    /// `reachable >= quorum`: the reachable voting primaries could agree a FAIL about any
    /// unreachable node (§9.3) — equivalently, this node is not in the minority (§10 step 4).
    pub fail_agreeable: bool,
    /// Every slot-owning shard whose verdict is not ready, in table order.
    pub shards_unable: Vec<ShardUnable>,
    /// The answer.
    pub verdict: QuorumVerdict,
    /// One human-readable line (no CR/LF) explaining the verdict.
    pub reason: String,
}

impl QuorumCheck {
    /// Evaluates the check (computes [`shard_readiness`] itself).
    pub fn evaluate(inputs: &HealthInputs<'_>) -> QuorumCheck {
        QuorumCheck::from_shards(inputs.topology, &shard_readiness(inputs))
    }

    /// Builds the check from readiness already computed for this topology.
    pub fn from_shards(topo: &Topology, shards: &[ShardReadiness]) -> QuorumCheck {
        let voting_primaries = topo.cluster_size();
        let q = quorum(voting_primaries);
        let reachable = reachable_voters(topo, None);
        let fail_agreeable = reachable >= q;
        let shards_unable: Vec<ShardUnable> = shards
            .iter()
            .filter(|s| s.owns_slots())
            .filter_map(|s| {
                s.verdict.not_ready().map(|r| ShardUnable {
                    shard_id: s.shard_id,
                    primary: s.primary,
                    reason: *r,
                })
            })
            .collect();
        let verdict = if !fail_agreeable {
            QuorumVerdict::NoQuorum
        } else if !shards_unable.is_empty() {
            QuorumVerdict::NotReady
        } else {
            QuorumVerdict::Ok
        };
        let mut reason =
            format!("{reachable} usable voting primaries of {voting_primaries}, quorum {q}: ");
        match verdict {
            QuorumVerdict::Ok => {
                reason.push_str("a FAIL can be agreed and every shard can fail over");
            }
            QuorumVerdict::NotReady => {
                let _ = write!(
                    reason,
                    "a FAIL can be agreed, but {} shard(s) cannot fail over",
                    shards_unable.len()
                );
            }
            QuorumVerdict::NoQuorum if voting_primaries == 0 => {
                reason.push_str("no voting primaries (no slots assigned)");
            }
            QuorumVerdict::NoQuorum => {
                reason.push_str(
                    "not enough voting primaries reachable to agree a FAIL or authorize a failover",
                );
            }
        }
        for (i, s) in shards_unable.iter().enumerate() {
            reason.push_str(if i == 0 { ": " } else { "; " });
            let _ = write!(
                reason,
                "shard {} (primary {}) {}",
                s.shard_id, s.primary, s.reason
            );
        }
        QuorumCheck {
            voting_primaries,
            reachable,
            quorum: q,
            fail_agreeable,
            shards_unable,
            verdict,
            reason,
        }
    }

    /// The command reply, shaped like `SENTINEL CKQUORUM`'s: `+OK <reason>` when
    /// [`QuorumVerdict::Ok`], else the error `-NOTREADY <reason>` / `-NOQUORUM <reason>`.
    pub fn reply(&self) -> Reply {
        let text = format!("{} {}", self.verdict.code(), self.reason);
        match self.verdict {
            QuorumVerdict::Ok => Reply::Simple(text),
            _ => Reply::Error(text),
        }
    }
}

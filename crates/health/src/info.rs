//! All three queries bundled ([`Readiness`]), the `INFO readiness` renderer and the one-line
//! summary the demo prints.

use crate::{shard_readiness, Health, HealthInputs, NotReady, QuorumCheck, ShardReadiness};
use std::fmt::{Display, Write as _};

/// The INFO section name (`INFO readiness`); the section header line is `# Readiness`.
pub const INFO_SECTION: &str = "readiness";

/// The fixed fields of `INFO readiness`, in output order (meanings in the crate docs). After
/// them come one `shard<i>` line per shard and one `shard<i>_replica<j>` line per replica.
pub const INFO_FIELDS: [&str; 18] = [
    "cluster_state",
    "cluster_health",
    "failover_ready",
    "failover_shards",
    "failover_ready_shards",
    "failover_blocker",
    "quorum_verdict",
    "quorum_voting_primaries",
    "quorum_reachable_primaries",
    "quorum_needed",
    "quorum_fail_agreeable",
    "quorum_shards_unable",
    "slots_unserved",
    "slots_pfail",
    "slots_fail",
    "slots_disagreeing",
    "nodes_pfail",
    "nodes_fail",
];

/// Readiness per shard, the quorum check and health, evaluated together from one set of
/// inputs (one topology snapshot, one `now`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    /// Every shard, in table order of the primaries (the `<i>` of INFO `shard<i>` lines).
    pub shards: Vec<ShardReadiness>,
    /// The quorum check.
    pub quorum: QuorumCheck,
    /// Health.
    pub health: Health,
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn or_minus_one(v: Option<u64>) -> String {
    v.map_or_else(|| "-1".to_owned(), |v| v.to_string())
}

impl Readiness {
    /// Evaluates everything.
    pub fn evaluate(inputs: &HealthInputs<'_>) -> Readiness {
        let shards = shard_readiness(inputs);
        let quorum = QuorumCheck::from_shards(inputs.topology, &shards);
        Readiness {
            shards,
            quorum,
            health: Health::evaluate(inputs),
        }
    }

    /// Whether every slot-owning shard could fail over now (at least one must exist); the same
    /// as the quorum verdict being OK.
    pub fn failover_ready(&self) -> bool {
        self.quorum.verdict == crate::QuorumVerdict::Ok
    }

    /// The first slot-owning shard that is not ready, with its index in [`Readiness::shards`].
    pub fn first_blocker(&self) -> Option<(usize, &ShardReadiness, &NotReady)> {
        self.shards
            .iter()
            .enumerate()
            .filter(|(_, s)| s.owns_slots())
            .find_map(|(i, s)| s.verdict.not_ready().map(|r| (i, s, r)))
    }

    /// One line for people, e.g. `cluster ok, failover-ready: no (replica <id> of primary <id>
    /// has not synced yet)`, `... (shard of primary <id> has no replica)` or `cluster ok,
    /// failover-ready: yes`. A shard is named by its primary's node ID, as CLUSTER NODES shows
    /// it (not by its index in [`Readiness::shards`], which no reader sees).
    pub fn summary(&self) -> String {
        let state = if self.health.state_ok { "ok" } else { "fail" };
        let mut out = format!(
            "cluster {state}, failover-ready: {}",
            yes_no(self.failover_ready())
        );
        if let Some((_, shard, r)) = self.first_blocker() {
            let p = &shard.primary;
            match r {
                NotReady::NoEligibleReplica { replica, why } => {
                    let _ = write!(out, " (replica {replica} of primary {p} {why})");
                }
                NotReady::NoQuorum { .. } => {
                    let _ = write!(out, " (shard of primary {p}: {r})");
                }
                other => {
                    let _ = write!(out, " (shard of primary {p} {other})");
                }
            }
        } else if !self.failover_ready() {
            let _ = write!(out, " ({})", self.quorum.reason);
        }
        out
    }

    /// The `INFO readiness` fields: `name:value` lines ending `\r\n`, the fixed
    /// [`INFO_FIELDS`] first, then the per-shard and per-replica lines. Values never contain
    /// CR, LF or `:`.
    pub fn info_fields(&self) -> String {
        let mut out = String::new();
        let mut line = |k: &str, v: &dyn Display| {
            let _ = write!(out, "{k}:{v}\r\n");
        };
        let h = &self.health;
        let q = &self.quorum;
        let slot_shards = self.shards.iter().filter(|s| s.owns_slots()).count();
        let ready_shards = self
            .shards
            .iter()
            .filter(|s| s.owns_slots() && s.verdict.is_ready())
            .count();
        let blocker = match self.first_blocker() {
            Some((_, _, r)) => r.code(),
            None if self.failover_ready() => "none",
            None => "no_quorum",
        };
        line("cluster_state", &if h.state_ok { "ok" } else { "fail" });
        line("cluster_health", &h.grade());
        line("failover_ready", &yes_no(self.failover_ready()));
        line("failover_shards", &slot_shards);
        line("failover_ready_shards", &ready_shards);
        line("failover_blocker", &blocker);
        line("quorum_verdict", &q.verdict.info_value());
        line("quorum_voting_primaries", &q.voting_primaries);
        line("quorum_reachable_primaries", &q.reachable);
        line("quorum_needed", &q.quorum);
        line("quorum_fail_agreeable", &yes_no(q.fail_agreeable));
        line("quorum_shards_unable", &q.shards_unable.len());
        line("slots_unserved", &h.unserved_slots.len());
        line("slots_pfail", &h.pfail_slots.len());
        line("slots_fail", &h.fail_slots.len());
        line("slots_disagreeing", &h.disagreeing_slots().len());
        line("nodes_pfail", &h.pfail_nodes.len());
        line("nodes_fail", &h.fail_nodes.len());
        for (i, s) in self.shards.iter().enumerate() {
            let (reason, candidate) = match &s.verdict {
                crate::ShardVerdict::Ready { candidate } => ("none", candidate.to_string()),
                crate::ShardVerdict::NotReady(r) => (r.code(), "none".to_owned()),
            };
            line(
                &format!("shard{i}"),
                &format_args!(
                    "id={},primary={},slots={},replicas={},eligible={},ready={},reason={reason},candidate={candidate}",
                    s.shard_id,
                    s.primary,
                    s.slot_count,
                    s.replicas.len(),
                    s.replicas.iter().filter(|r| r.is_eligible()).count(),
                    yes_no(s.verdict.is_ready()),
                ),
            );
            for (j, r) in s.replicas.iter().enumerate() {
                line(
                    &format!("shard{i}_replica{j}"),
                    &format_args!(
                        "id={},eligible={},reason={},evidence={},link={},offset={},lag={},data_age_ms={},pong_age_ms={}",
                        r.node,
                        yes_no(r.is_eligible()),
                        r.ineligible.as_ref().map_or("none", |w| w.code()),
                        r.evidence.as_str(),
                        if r.link_up { "up" } else { "down" },
                        r.repl_offset,
                        or_minus_one(r.offset_lag),
                        or_minus_one(r.data_age_ms),
                        or_minus_one(r.pong_age_ms),
                    ),
                );
            }
        }
        out
    }

    /// The whole section: `# Readiness\r\n` followed by [`Readiness::info_fields`].
    pub fn info_section(&self) -> String {
        let mut s = String::from("# Readiness\r\n");
        s.push_str(&self.info_fields());
        s
    }
}

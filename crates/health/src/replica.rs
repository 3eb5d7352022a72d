//! Per-replica failover eligibility (facts sheet §12.1–§12.2), from what this node knows.

use crate::{HealthConfig, HealthInputs, ReplicationFacts};
use ferrocluster_topology::{LinkState, Node, NodeId};
use std::fmt;

/// Where a replica's verdict comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Evidence {
    /// Myself, with the host's [`ReplicationFacts`]: the real Valkey data-age rule (§12.2).
    Local,
    /// Proxies from the topology: gossip for another node (its PFAIL/FAIL/NOFAILOVER flags, the
    /// offset from its PING headers, our bus link to it, its last PONG), or myself's recorded
    /// offset when the host gave no facts. A node cannot know another replica's data age.
    Proxy,
}

impl Evidence {
    /// `local` / `proxy` (the INFO `evidence=` value).
    pub fn as_str(self) -> &'static str {
        match self {
            Evidence::Local => "local",
            Evidence::Proxy => "proxy",
        }
    }
}

/// Why a replica could not win an automatic failover now; the first failing rule, checked in
/// the order of the variants (rules per evidence kind in the crate docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Ineligibility {
    /// Flagged PFAIL or FAIL here (proxy only; myself is never flagged). Code `unreachable`.
    Unreachable,
    /// Flagged NOFAILOVER (`cluster-replica-no-failover yes`; automatic failover refused,
    /// §12.1). Code `nofailover`.
    NoFailoverFlag,
    /// No completed sync: locally, the link is down and no sync completed since start
    /// (Valkey's `repl_down_since == 0`, data age "since forever"); by proxy, offset 0 (what
    /// CLUSTER SHARDS calls health `loading`). Only with a non-zero validity factor. Code
    /// `not_synced`.
    NotSynced,
    /// Local only: the data age exceeds the validity limit (§12.2). Code `data_too_old`.
    DataTooOld {
        /// [`ReplicationFacts::data_age_ms`], ms.
        age_ms: u64,
        /// [`HealthConfig::validity_limit_ms`], ms.
        limit_ms: u64,
    },
    /// Proxy only: this node has no outbound bus link to the replica, so it cannot vouch for
    /// it. Code `no_bus_link`.
    NoBusLink,
    /// Proxy only: no PONG from the replica within NODE_TIMEOUT (a healthy node answers at
    /// least every NODE_TIMEOUT/2, §7.2). Code `no_recent_pong`.
    NoRecentPong {
        /// ms since the last PONG; `None` if none ever arrived.
        age_ms: Option<u64>,
        /// NODE_TIMEOUT, ms.
        limit_ms: u64,
    },
}

impl Ineligibility {
    /// The stable machine code (INFO `reason=` values, documented in the crate docs).
    pub fn code(&self) -> &'static str {
        match self {
            Ineligibility::Unreachable => "unreachable",
            Ineligibility::NoFailoverFlag => "nofailover",
            Ineligibility::NotSynced => "not_synced",
            Ineligibility::DataTooOld { .. } => "data_too_old",
            Ineligibility::NoBusLink => "no_bus_link",
            Ineligibility::NoRecentPong { .. } => "no_recent_pong",
        }
    }
}

/// Human text completing "replica X ...": e.g. `has not synced yet`.
impl fmt::Display for Ineligibility {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ineligibility::Unreachable => f.write_str("is flagged PFAIL or FAIL"),
            Ineligibility::NoFailoverFlag => f.write_str("has the nofailover flag"),
            Ineligibility::NotSynced => f.write_str("has not synced yet"),
            Ineligibility::DataTooOld { age_ms, limit_ms } => write!(
                f,
                "has data {age_ms} ms old, over the {limit_ms} ms validity limit"
            ),
            Ineligibility::NoBusLink => f.write_str("has no bus link from this node"),
            Ineligibility::NoRecentPong {
                age_ms: Some(a),
                limit_ms,
            } => write!(
                f,
                "has not answered a ping for {a} ms (limit {limit_ms} ms)"
            ),
            Ineligibility::NoRecentPong { age_ms: None, .. } => {
                f.write_str("has never answered a ping")
            }
        }
    }
}

/// One replica's failover eligibility as this node sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaEligibility {
    /// The replica.
    pub node: NodeId,
    /// Where the verdict comes from.
    pub evidence: Evidence,
    /// [`Evidence::Local`]: the replication link is up. [`Evidence::Proxy`]: this node has an
    /// outbound bus link to the replica (always true for myself).
    pub link_up: bool,
    /// [`Evidence::Local`] only: the data age (ms) per §12.2; `None` when unbounded (no sync
    /// completed) or not known (proxy).
    pub data_age_ms: Option<u64>,
    /// [`Evidence::Proxy`] for another node: ms since its last PONG (`None`: never, or
    /// myself).
    pub pong_age_ms: Option<u64>,
    /// Flag NOFAILOVER.
    pub no_failover: bool,
    /// Replication offset: the host's for [`Evidence::Local`], else the last advertised one
    /// (header `offset`, §12.2.1).
    pub repl_offset: u64,
    /// The primary's last known offset minus this one (saturating), in bytes; `None` when the
    /// primary's offset is unknown (0). Informational: Valkey ranks replicas by offset
    /// (§12.2.1) but never refuses a failover for lag.
    pub offset_lag: Option<u64>,
    /// `None` when eligible; else the first rule that fails.
    pub ineligible: Option<Ineligibility>,
}

impl ReplicaEligibility {
    /// Whether this replica could win an automatic failover now (as far as this node knows).
    pub fn is_eligible(&self) -> bool {
        self.ineligible.is_none()
    }
}

/// Evaluates one replica of `primary`.
pub(crate) fn evaluate(inputs: &HealthInputs<'_>, primary: &Node, r: &Node) -> ReplicaEligibility {
    let cfg = &inputs.config;
    let no_failover = r
        .flags
        .contains(ferrocluster_topology::NodeFlags::NOFAILOVER);
    let facts = if r.is_myself() {
        inputs.my_replication
    } else {
        None
    };
    let lag =
        |offset: u64| (primary.repl_offset > 0).then(|| primary.repl_offset.saturating_sub(offset));
    match facts {
        Some(f) => local(cfg, inputs, r, f, no_failover, lag(f.offset)),
        None => {
            let mut e = ReplicaEligibility {
                node: *r.id(),
                evidence: Evidence::Proxy,
                link_up: r.is_myself() || r.link == LinkState::Connected,
                data_age_ms: None,
                pong_age_ms: if r.is_myself() {
                    None
                } else {
                    r.pong_received.map(|t| inputs.now.since(t))
                },
                no_failover,
                repl_offset: r.repl_offset,
                offset_lag: lag(r.repl_offset),
                ineligible: None,
            };
            e.ineligible = proxy_rule(cfg, r, &e);
            e
        }
    }
}

fn local(
    cfg: &HealthConfig,
    inputs: &HealthInputs<'_>,
    r: &Node,
    f: &ReplicationFacts,
    no_failover: bool,
    offset_lag: Option<u64>,
) -> ReplicaEligibility {
    let data_age_ms = f.data_age_ms(inputs.now, cfg.node_timeout_ms);
    let ineligible = if no_failover {
        Some(Ineligibility::NoFailoverFlag)
    } else {
        match (cfg.validity_limit_ms(), data_age_ms) {
            (None, _) => None,
            (Some(_), None) => Some(Ineligibility::NotSynced),
            (Some(limit_ms), Some(age_ms)) if age_ms > limit_ms => {
                Some(Ineligibility::DataTooOld { age_ms, limit_ms })
            }
            (Some(_), Some(_)) => None,
        }
    };
    ReplicaEligibility {
        node: *r.id(),
        evidence: Evidence::Local,
        link_up: f.link_up(),
        data_age_ms,
        pong_age_ms: None,
        no_failover,
        repl_offset: f.offset,
        offset_lag,
        ineligible,
    }
}

fn proxy_rule(cfg: &HealthConfig, r: &Node, e: &ReplicaEligibility) -> Option<Ineligibility> {
    if r.is_pfail() || r.is_fail() {
        return Some(Ineligibility::Unreachable);
    }
    if e.no_failover {
        return Some(Ineligibility::NoFailoverFlag);
    }
    if cfg.validity_limit_ms().is_some() && e.repl_offset == 0 {
        return Some(Ineligibility::NotSynced);
    }
    if r.is_myself() {
        return None;
    }
    if !e.link_up {
        return Some(Ineligibility::NoBusLink);
    }
    match e.pong_age_ms {
        Some(a) if a <= cfg.node_timeout_ms => None,
        age_ms => Some(Ineligibility::NoRecentPong {
            age_ms,
            limit_ms: cfg.node_timeout_ms,
        }),
    }
}

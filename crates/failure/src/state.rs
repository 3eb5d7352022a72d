//! The cluster state ok/fail (facts sheet §10, V8 `clusterUpdateState`).

use ferrocluster_slot::SLOT_COUNT;
use ferrocluster_topology::{Millis, Topology};

/// `CLUSTER_WRITABLE_DELAY`: a primary keeps the FAIL state this long (ms) after the first
/// state evaluation (§1, §10 step 1).
pub const CLUSTER_WRITABLE_DELAY_MS: u64 = 2000;

/// Clamp of the minority rejoin delay (`CLUSTER_MIN_REJOIN_DELAY` / `MAX`, ms; §1).
const MIN_REJOIN_DELAY_MS: u64 = 500;
const MAX_REJOIN_DELAY_MS: u64 = 5000;

/// Cluster health as CLUSTER INFO `cluster_state` and the header `state` byte report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClusterHealth {
    /// `ok` (state byte 0).
    Ok,
    /// `fail` (state byte 1).
    Fail,
}

impl ClusterHealth {
    /// `ok` / `fail`.
    pub fn as_str(self) -> &'static str {
        match self {
            ClusterHealth::Ok => "ok",
            ClusterHealth::Fail => "fail",
        }
    }
    /// The header `state` byte (§5.3): 0 ok, 1 fail.
    pub fn wire(self) -> u8 {
        match self {
            ClusterHealth::Ok => 0,
            ClusterHealth::Fail => 1,
        }
    }
}

/// Settings the state evaluation needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateConfig {
    /// `cluster-require-full-coverage` (default yes).
    pub require_full_coverage: bool,
    /// `cluster-node-timeout` in ms; the rejoin delay is it clamped to [500, 5000] ms.
    pub node_timeout_ms: u64,
}

/// The cluster state and the times its evaluation remembers (§10). Starts as FAIL, as Valkey
/// does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterState {
    health: ClusterHealth,
    first_eval: Option<Millis>,
    last_minority: Option<Millis>,
}

impl Default for ClusterState {
    fn default() -> Self {
        ClusterState::new()
    }
}

impl ClusterState {
    /// FAIL, never evaluated.
    pub fn new() -> ClusterState {
        ClusterState {
            health: ClusterHealth::Fail,
            first_eval: None,
            last_minority: None,
        }
    }

    /// The current state.
    pub fn health(&self) -> ClusterHealth {
        self.health
    }

    /// Whether the state is `ok`.
    pub fn is_ok(&self) -> bool {
        self.health == ClusterHealth::Ok
    }

    /// Whether the cron must re-evaluate even if nothing changed (§10: "evaluated from the
    /// cron when something changed or the state is FAIL"): the state is FAIL (or was never
    /// evaluated), so a writable or rejoin delay may expire and the minority time must be kept
    /// current.
    pub fn needs_cron_update(&self) -> bool {
        self.health == ClusterHealth::Fail || self.first_eval.is_none()
    }

    /// What the state would be from the topology alone (§10 steps 2–4), without the delays:
    /// FAIL if full coverage is required and some slot has no owner or a FAIL owner (PFAIL
    /// does not count), or if fewer than `size/2 + 1` voting primaries are reachable (neither
    /// FAIL nor PFAIL; myself always reachable). With no slots assigned anywhere the size is 0,
    /// the quorum 1 and nobody reachable: FAIL.
    ///
    /// Cost: one pass over the node table (a slot count per node), not over the 16384 slots:
    /// every slot has at most one owner and the owners' slot sets mirror the owner table
    /// (a [`Topology`] invariant), so "every slot has a non-FAIL owner" is "the non-FAIL
    /// nodes own 16384 slots together".
    pub fn evaluate(topo: &Topology, cfg: &StateConfig) -> ClusterHealth {
        if Self::evaluate_parts(topo, cfg).0 {
            ClusterHealth::Ok
        } else {
            ClusterHealth::Fail
        }
    }

    /// (state ok, in minority) in one pass over the nodes.
    fn evaluate_parts(topo: &Topology, cfg: &StateConfig) -> (bool, bool) {
        let mut served = 0usize;
        let mut size = 0usize;
        let mut reachable = 0usize;
        for n in topo.nodes() {
            let count = if cfg.require_full_coverage || n.is_primary() {
                n.slot_count()
            } else {
                0
            };
            if !n.is_fail() {
                served += count;
            }
            if n.is_primary() && count > 0 {
                size += 1;
                if n.is_myself() || !(n.is_fail() || n.is_pfail()) {
                    reachable += 1;
                }
            }
        }
        let minority = reachable < crate::quorum(size);
        let covered = !cfg.require_full_coverage || served == SLOT_COUNT;
        (covered && !minority, minority)
    }

    /// Re-evaluates the state (§10) at `now`; returns the new health when it changed.
    ///
    /// When to call it (§10, Valkey's `CLUSTER_TODO_UPDATE_STATE`): after anything the state
    /// depends on changed (slot owners, PFAIL/FAIL flags, roles, nodes added or removed), and
    /// from every cron run while the state is FAIL ([`ClusterState::needs_cron_update`]) so
    /// the delays below expire on time. While the state is OK and nothing changed, the result
    /// cannot change, so skipping the call is equivalent.
    ///
    /// Step 1: the first call's time is remembered; a primary in FAIL keeps FAIL until
    /// [`CLUSTER_WRITABLE_DELAY_MS`] have passed since then. Step 4 records `now` as the last
    /// minority time whenever the quorum is not reachable. Step 5: a primary does not go back to
    /// OK until the rejoin delay (NODE_TIMEOUT clamped to [500, 5000] ms) has passed since it
    /// was last in the minority.
    pub fn update(
        &mut self,
        topo: &Topology,
        now: Millis,
        cfg: &StateConfig,
    ) -> Option<ClusterHealth> {
        let first = *self.first_eval.get_or_insert(now);
        let i_am_primary = topo.myself().is_primary();
        if i_am_primary
            && self.health == ClusterHealth::Fail
            && now.since(first) < CLUSTER_WRITABLE_DELAY_MS
        {
            return None;
        }
        let (ok, minority) = Self::evaluate_parts(topo, cfg);
        if minority {
            self.last_minority = Some(now);
        }
        let new = if ok {
            ClusterHealth::Ok
        } else {
            ClusterHealth::Fail
        };
        if new == self.health {
            return None;
        }
        if new == ClusterHealth::Ok && i_am_primary {
            let delay = cfg
                .node_timeout_ms
                .clamp(MIN_REJOIN_DELAY_MS, MAX_REJOIN_DELAY_MS);
            if let Some(t) = self.last_minority {
                if now.since(t) < delay {
                    return None;
                }
            }
        }
        self.health = new;
        Some(new)
    }
}

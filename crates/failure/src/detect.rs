//! PFAIL, failure reports, FAIL marking and clearing (facts sheet §9).

use ferrocluster_topology::{Millis, NodeFlags, NodeId, Topology};

/// The failure detector's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailureConfig {
    /// `cluster-node-timeout` in ms (default 15000): silence before PFAIL (§9.1).
    pub node_timeout_ms: u64,
}

impl FailureConfig {
    /// How long a failure report stays valid: `CLUSTER_FAIL_REPORT_VALIDITY_MULT` (2) ×
    /// NODE_TIMEOUT (§1, §9.2).
    pub fn report_validity_ms(&self) -> u64 {
        self.node_timeout_ms.saturating_mul(2)
    }

    /// How long a voting primary stays FAIL before a PONG may clear it:
    /// `CLUSTER_FAIL_UNDO_TIME_MULT` (2) × NODE_TIMEOUT (§1, §9.4).
    pub fn fail_undo_ms(&self) -> u64 {
        self.node_timeout_ms.saturating_mul(2)
    }
}

/// What a failure-detection step did; the caller acts on each (the `node` crate broadcasts FAIL,
/// saves the config, re-evaluates the cluster state, reports events).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailureEffect {
    /// The node was marked PFAIL (local timeout, §9.1).
    MarkedPfail(NodeId),
    /// The node was marked FAIL. `broadcast` is true when this node reached the quorum itself
    /// and must broadcast a FAIL message to every node except myself/handshake nodes that has
    /// an outbound link (§9.3); false when a FAIL message told us (§8 step 7).
    MarkedFail {
        /// The failed node.
        node: NodeId,
        /// Whether a FAIL message must be broadcast.
        broadcast: bool,
    },
    /// PFAIL was cleared by a PONG on the outbound link (§9.1).
    PfailCleared(NodeId),
    /// FAIL was cleared locally by a PONG (§9.4); no message is broadcast.
    FailCleared(NodeId),
}

/// The failure-report quorum for a cluster of `size` voting primaries: `size / 2 + 1`
/// (facts sheet §0).
pub fn quorum(size: usize) -> usize {
    size / 2 + 1
}

/// The cron's PFAIL step (§7.2 step 3, §9.1): every node except myself, NOADDR and HANDSHAKE
/// nodes with a pending ping, not already PFAIL or FAIL, whose
/// `min(now − ping_sent, now − data_received) > NODE_TIMEOUT` becomes PFAIL. A node that never
/// sent data counts as silent since forever (Valkey's `data_received` starts at 0).
///
/// Immediate promotion (V8): when the cluster size is 1 and myself is a voting primary the FAIL
/// check runs at once, since the quorum (1) is myself alone.
pub fn check_pfail(
    topo: &mut Topology,
    now: Millis,
    cfg: &FailureConfig,
    out: &mut Vec<FailureEffect>,
) {
    let mut marked = Vec::new();
    for n in topo.nodes_mut() {
        if n.flags
            .intersects(NodeFlags::MYSELF | NodeFlags::NOADDR | NodeFlags::HANDSHAKE)
            || n.flags.intersects(NodeFlags::PFAIL | NodeFlags::FAIL)
        {
            continue;
        }
        let Some(ping_sent) = n.ping_sent else {
            continue;
        };
        let since_ping = now.since(ping_sent);
        let since_data = n.data_received.map_or(u64::MAX, |d| now.since(d));
        if since_ping.min(since_data) > cfg.node_timeout_ms {
            n.flags.insert(NodeFlags::PFAIL);
            marked.push(*n.id());
        }
    }
    if marked.is_empty() {
        return;
    }
    // Counted only when something was marked: `cluster_size` walks every node's slot set,
    // and this runs on every cron.
    let promote = topo.cluster_size() == 1 && topo.myself().is_voting_primary();
    for id in marked {
        out.push(FailureEffect::MarkedPfail(id));
        if promote {
            mark_fail_if_quorum(topo, &id, now, cfg, out);
        }
    }
}

/// One gossip entry's failure information (§7.4 first bullet, §9.2): if `sender` is a voting
/// primary, an entry flagged PFAIL or FAIL adds or refreshes its failure report about `about`
/// and runs [`mark_fail_if_quorum`]; a healthy entry removes its report. Entries from other
/// senders, about myself or about unknown nodes change nothing.
pub fn handle_gossip_flags(
    topo: &mut Topology,
    sender: &NodeId,
    about: &NodeId,
    entry_flags: NodeFlags,
    now: Millis,
    cfg: &FailureConfig,
    out: &mut Vec<FailureEffect>,
) {
    if about == topo.myself_id() || sender == about {
        return;
    }
    let voting = topo.node(sender).is_some_and(|s| s.is_voting_primary());
    if !voting || !topo.contains(about) {
        return;
    }
    if entry_flags.intersects(NodeFlags::PFAIL | NodeFlags::FAIL) {
        // Both nodes are known (checked above), so this cannot fail.
        if topo.add_failure_report(about, sender, now).is_ok() {
            mark_fail_if_quorum(topo, about, now, cfg, out);
        }
    } else {
        // `about` is known (checked above).
        let _ = topo.remove_failure_report(about, sender);
    }
}

/// The PFAIL → FAIL check (§9.3): if `id` is PFAIL and not FAIL, and its valid failure reports
/// (expired ones are discarded here) plus one if myself is a voting primary reach
/// [`quorum`]`(cluster_size)`, the node becomes FAIL (PFAIL cleared, `fail_time = now`) and a
/// [`FailureEffect::MarkedFail`] with `broadcast: true` is pushed. Returns whether it did.
pub fn mark_fail_if_quorum(
    topo: &mut Topology,
    id: &NodeId,
    now: Millis,
    cfg: &FailureConfig,
    out: &mut Vec<FailureEffect>,
) -> bool {
    let needed = quorum(topo.cluster_size());
    let me_votes = usize::from(topo.myself().is_voting_primary());
    let Some(n) = topo.node_mut(id) else {
        return false;
    };
    if !n.is_pfail() || n.is_fail() || n.is_myself() {
        return false;
    }
    let reports = n.count_valid_failure_reports(now, cfg.report_validity_ms());
    if reports + me_votes < needed {
        return false;
    }
    n.flags.remove(NodeFlags::PFAIL);
    n.flags.insert(NodeFlags::FAIL);
    n.fail_time = Some(now);
    out.push(FailureEffect::MarkedFail {
        node: *id,
        broadcast: true,
    });
    true
}

/// A FAIL message about `about` from a known sender (§8 step 7): if `about` is known and is
/// neither FAIL nor myself, it becomes FAIL (`fail_time = now`, PFAIL cleared). FAIL messages are
/// accepted from any known node without further checks. Returns whether anything changed.
pub fn handle_fail_message(
    topo: &mut Topology,
    about: &NodeId,
    now: Millis,
    out: &mut Vec<FailureEffect>,
) -> bool {
    let Some(n) = topo.node_mut(about) else {
        return false;
    };
    if n.is_fail() || n.is_myself() {
        return false;
    }
    n.flags.remove(NodeFlags::PFAIL);
    n.flags.insert(NodeFlags::FAIL);
    n.fail_time = Some(now);
    out.push(FailureEffect::MarkedFail {
        node: *about,
        broadcast: false,
    });
    true
}

/// A PONG from `id` arrived on our outbound link (§7.2, §9.1, §9.4): PFAIL is cleared; FAIL is
/// cleared at once for a replica or a primary without slots, and for a voting primary only when
/// `now − fail_time > 2 × NODE_TIMEOUT`. Clearing is local (nothing is broadcast). The caller
/// updates `pong_received`/`ping_sent` (gossip bookkeeping).
pub fn handle_pong(
    topo: &mut Topology,
    id: &NodeId,
    now: Millis,
    cfg: &FailureConfig,
    out: &mut Vec<FailureEffect>,
) {
    let Some(n) = topo.node_mut(id) else { return };
    if n.is_pfail() {
        n.flags.remove(NodeFlags::PFAIL);
        out.push(FailureEffect::PfailCleared(*id));
    } else if n.is_fail() {
        let may_clear = if n.is_replica() || !n.is_voting_primary() {
            true
        } else {
            n.fail_time
                .is_none_or(|t| now.since(t) > cfg.fail_undo_ms())
        };
        if may_clear {
            n.flags.remove(NodeFlags::FAIL);
            out.push(FailureEffect::FailCleared(*id));
        }
    }
}

//! Replica migration (§14, V8 cron bookkeeping and `clusterHandleReplicaMigration`).

use crate::config::REPLICA_MIGRATION_DELAY_MS;
use crate::{Epoch, EpochConfig, EpochEffect, EpochEvent};
use ferrocluster_topology::{Millis, Node, NodeFlags, NodeId, Topology};

/// Replicas of `primary` not flagged FAIL (`clusterCountNonFailingReplicas`).
fn ok_replicas(topo: &Topology, primary: &NodeId) -> usize {
    topo.replicas_of(primary).filter(|r| !r.is_fail()).count()
}

/// Whether a node is an orphaned primary: PRIMARY, not FAIL, flagged MIGRATE_TO, no replica
/// that is not FAIL (§14).
fn is_orphaned(topo: &Topology, n: &Node) -> bool {
    if n.is_replica() || n.is_fail() || !n.flags.contains(NodeFlags::MIGRATE_TO) {
        return false;
    }
    let has_ok_replica = n.is_primary() && ok_replicas(topo, n.id()) > 0;
    !has_ok_replica
}

impl Epoch {
    /// §14, run by the cron when myself is a replica. Over primaries that are not FAIL
    /// (excluding myself, NOADDR and HANDSHAKE nodes): an orphaned primary has no non-FAIL
    /// replica, at least one slot and MIGRATE_TO; `max` is the largest non-FAIL replica count
    /// and `mine` my primary's. Migration is considered when there is an orphaned primary,
    /// `max ≥ 2`, `mine == max` and `cluster-allow-replica-migration` is on. Then:
    /// 1. the cluster state must be ok (`cluster_ok`);
    /// 2. my primary's replicas that are neither FAIL nor PFAIL must number more than
    ///    `cluster-migration-barrier`;
    /// 3. the candidate is the smallest node ID among the replicas of every primary with `max`
    ///    non-FAIL replicas (myself included);
    /// 4. the target is the first orphaned primary with slots in table order; every orphaned
    ///    node's `orphaned_time` is set when first seen orphaned and cleared otherwise;
    /// 5. if myself is the candidate and the target has been orphaned for more than 5000 ms,
    ///    myself becomes its replica (full sync; marks cleared): [`EpochEffect::BecomeReplica`],
    ///    persist, state update, PONG to all.
    ///
    /// Returns the new primary if myself migrated.
    pub fn handle_replica_migration(
        &mut self,
        topo: &mut Topology,
        cfg: &EpochConfig,
        cluster_ok: bool,
        now: Millis,
        out: &mut Vec<EpochEffect>,
    ) -> Option<NodeId> {
        let me = topo.myself();
        if !me.is_replica() {
            return None;
        }
        let my_primary = me.primary?;
        let mut orphaned = 0usize;
        let mut max = 0usize;
        let mut mine = 0usize;
        for n in topo.nodes() {
            if n.flags
                .intersects(NodeFlags::MYSELF | NodeFlags::NOADDR | NodeFlags::HANDSHAKE)
                || !n.is_primary()
                || n.is_fail()
            {
                continue;
            }
            let ok = ok_replicas(topo, n.id());
            if ok == 0 && n.slot_count() > 0 && n.flags.contains(NodeFlags::MIGRATE_TO) {
                orphaned += 1;
            }
            max = max.max(ok);
            if *n.id() == my_primary {
                mine = ok;
            }
        }
        if orphaned == 0 || max < 2 || mine != max || !cfg.allow_replica_migration {
            return None;
        }
        // Step 1.
        if !cluster_ok {
            return None;
        }
        // Step 2.
        let healthy = topo
            .replicas_of(&my_primary)
            .filter(|r| !r.is_fail() && !r.is_pfail())
            .count();
        if healthy <= cfg.migration_barrier as usize {
            return None;
        }
        // Steps 3 and 4.
        let my_id = *topo.myself_id();
        let mut candidate = my_id;
        let mut target = None;
        let mut orphan_marks = Vec::new();
        for n in topo.nodes() {
            let orphan = is_orphaned(topo, n);
            if orphan && target.is_none() && n.slot_count() > 0 {
                target = Some(*n.id());
            }
            orphan_marks.push((*n.id(), orphan));
            let ok = if n.is_primary() {
                ok_replicas(topo, n.id())
            } else {
                0
            };
            if ok == max {
                for r in topo.replicas_of(n.id()) {
                    if r.id().as_bytes() < candidate.as_bytes() {
                        candidate = *r.id();
                    }
                }
            }
        }
        for (id, orphan) in orphan_marks {
            if let Some(n) = topo.node_mut(&id) {
                n.orphaned_time = if orphan {
                    Some(n.orphaned_time.unwrap_or(now))
                } else {
                    None
                };
            }
        }
        // Step 5.
        let target = target?;
        let since = topo.node(&target).and_then(|n| n.orphaned_time)?;
        if candidate != my_id || now.since(since) <= REPLICA_MIGRATION_DELAY_MS {
            return None;
        }
        if self.set_my_primary(topo, &target, true, true, out) {
            out.push(EpochEffect::Event(EpochEvent::ReplicaMigration(target)));
            out.push(EpochEffect::Persist);
            out.push(EpochEffect::UpdateState);
            out.push(EpochEffect::Send {
                to: crate::Target::AllNodes,
                message: crate::EpochMessage::Pong,
                after_persist: true,
            });
            return Some(target);
        }
        None
    }
}

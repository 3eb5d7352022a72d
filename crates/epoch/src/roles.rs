//! Role changes shared by several rules: making a node a primary (`clusterSetNodeAsPrimary`),
//! myself following a new primary (`clusterSetPrimary`) and a replica taking over its
//! primary's slots (`clusterFailoverReplaceYourPrimary`, §12.5), with the MIGRATE_TO flag
//! bookkeeping of §14.

use crate::{Epoch, EpochEffect, EpochMessage, Target};
use ferrocluster_topology::{NodeFlags, NodeId, Topology};

/// Clears MIGRATE_TO on `primary` when it has no replica left (`clusterNodeRemoveReplica`).
pub(crate) fn forget_replica(topo: &mut Topology, primary: &NodeId) {
    if topo.replicas_of(primary).next().is_none() {
        if let Some(p) = topo.node_mut(primary) {
            p.flags.remove(NodeFlags::MIGRATE_TO);
        }
    }
}

/// Attaches `replica` to `primary` (`clusterNodeAddReplica`): its `primary` is set, it is
/// flagged REPLICA, the old primary's MIGRATE_TO is cleared if it has no replica left, and the
/// new primary gets MIGRATE_TO (it "used to have replicas", §14). Returns false if either node
/// is unknown or they are the same node.
pub(crate) fn attach_replica(topo: &mut Topology, replica: &NodeId, primary: &NodeId) -> bool {
    let old = topo.node(replica).and_then(|n| n.primary);
    if topo.set_primary(replica, *primary).is_err() {
        return false;
    }
    if let Some(old) = old.filter(|o| o != primary) {
        forget_replica(topo, &old);
    }
    if let Some(p) = topo.node_mut(primary) {
        p.flags.insert(NodeFlags::MIGRATE_TO);
    }
    true
}

/// `clusterSetNodeAsPrimary`: a node flagged PRIMARY is left alone; otherwise it leaves its
/// primary's replica list (that primary loses MIGRATE_TO if it has no replica left), gets
/// MIGRATE_TO unless it is myself (a promoted replica is a valid migration target, §14), and
/// becomes PRIMARY without a primary. Returns whether anything changed.
pub(crate) fn set_node_as_primary(topo: &mut Topology, id: &NodeId) -> bool {
    let Some(n) = topo.node(id) else {
        return false;
    };
    if n.is_primary() {
        return false;
    }
    let old = n.primary;
    let is_me = n.is_myself();
    // Known (checked above).
    let _ = topo.set_as_primary(id);
    if let Some(old) = old {
        if !is_me {
            if let Some(n) = topo.node_mut(id) {
                n.flags.insert(NodeFlags::MIGRATE_TO);
            }
        }
        forget_replica(topo, &old);
    }
    true
}

/// Whether two nodes are in the same shard (`areInSameShard`: equal shard IDs).
pub(crate) fn same_shard(topo: &Topology, a: &NodeId, b: &NodeId) -> bool {
    match (topo.node(a), topo.node(b)) {
        (Some(a), Some(b)) => a.shard_id == b.shard_id,
        _ => false,
    }
}

impl Epoch {
    /// `clusterSetPrimary(n, close_slots, full_sync)`: myself becomes a replica of `primary`.
    /// A primary myself drops PRIMARY and MIGRATE_TO; `close_slots` clears every importing and
    /// migrating mark; myself (and any replica under it) takes the primary's shard ID; the
    /// manual failover state is reset
    /// (unpausing writes if myself was serving one) and any scheduled election is forgotten.
    /// Effects: [`EpochEffect::BecomeReplica`] (plus [`EpochEffect::UnpauseWrites`] if a pause
    /// ends). The caller pushes the save and state effects of its rule. Returns false (and does
    /// nothing) if `primary` is unknown or myself.
    pub(crate) fn set_my_primary(
        &mut self,
        topo: &mut Topology,
        primary: &NodeId,
        close_slots: bool,
        full_sync: bool,
        out: &mut Vec<EpochEffect>,
    ) -> bool {
        let me = *topo.myself_id();
        let Some(p) = topo.node(primary).filter(|_| *primary != me) else {
            return false;
        };
        let (shard, ip, port, tls_port) = (p.shard_id, p.ip, p.port, p.tls_port);
        topo.myself_mut().flags.remove(NodeFlags::MIGRATE_TO);
        if close_slots {
            let imp: Vec<_> = topo.importing().map(|(s, _)| s).collect();
            let mig: Vec<_> = topo.migrating().map(|(s, _)| s).collect();
            for s in imp {
                let _ = topo.set_importing(s, None);
            }
            for s in mig {
                let _ = topo.set_migrating(s, None);
            }
        }
        attach_replica(topo, &me, primary);
        topo.set_shard_id(&me, shard);
        out.push(EpochEffect::BecomeReplica {
            primary: *primary,
            ip,
            port,
            tls_port,
            full_sync,
        });
        self.manual.reset(out);
        self.election.forget();
        true
    }

    /// §12.5 (`clusterFailoverReplaceYourPrimary`): myself (a replica with a known primary)
    /// becomes a primary, claims every slot its old primary owns, then: update state, save
    /// with fsync, broadcast a PONG to all nodes once saved, reset the manual failover. The
    /// caller has already given myself its new configEpoch. Returns false (nothing done) if
    /// myself is a primary or has no known primary.
    pub(crate) fn replace_my_primary(
        &mut self,
        topo: &mut Topology,
        out: &mut Vec<EpochEffect>,
    ) -> bool {
        let me = *topo.myself_id();
        let myself = topo.myself();
        let Some(old) = myself.primary.filter(|_| !myself.is_primary()) else {
            return false;
        };
        set_node_as_primary(topo, &me);
        out.push(EpochEffect::BecomePrimary);
        let slots: Vec<_> = topo
            .node(&old)
            .map(|n| n.slots().iter().collect())
            .unwrap_or_default();
        for s in slots {
            // Myself is always known.
            let _ = topo.set_slot_owner(s, Some(me));
            self.not_claiming.remove(&s);
        }
        out.push(EpochEffect::UpdateState);
        out.push(EpochEffect::Persist);
        out.push(EpochEffect::Send {
            to: Target::AllNodes,
            message: EpochMessage::Pong,
            after_persist: true,
        });
        self.manual.reset(out);
        true
    }
}

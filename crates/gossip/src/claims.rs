//! Configuration carried by PING/PONG/MEET headers, applied with the basic rules until the
//! `epoch` crate takes over: the role switch (§11.1, without the shard-failover detail), slot
//! claims where an unclaimed slot or a higher configEpoch wins (§11.2, without dirty slots,
//! importing/migrating re-pointing, owner-not-claiming marks or replica re-parenting), and the
//! configEpoch collision rule (§11.5).

use ferrocluster_slot::SlotSet;
use ferrocluster_topology::{ConfigEpoch, NodeFlags, NodeId, Topology};

/// §11.1 basics: a sender claiming primary (`replicaof` zero) becomes a primary; a sender
/// claiming to replicate `replicaof` loses its slots if we saw it as a primary, becomes a
/// replica, and — when the primary is known — is attached to it and takes its shard ID.
/// Returns whether anything changed (the caller saves and re-evaluates the state).
pub fn apply_role(topo: &mut Topology, sender: &NodeId, replicaof: Option<NodeId>) -> bool {
    let Some(n) = topo.node(sender) else {
        return false;
    };
    if n.is_myself() {
        return false;
    }
    match replicaof {
        None => {
            if n.is_primary() && n.primary.is_none() && !n.is_replica() {
                return false;
            }
            // Known (checked above).
            let _ = topo.set_as_primary(sender);
            true
        }
        Some(p) => {
            let mut changed = false;
            if n.is_primary() {
                let slots: Vec<_> = n.slots().iter().collect();
                for s in slots {
                    let _ = topo.set_slot_owner(s, None);
                }
                if let Some(n) = topo.node_mut(sender) {
                    n.flags.remove(NodeFlags::PRIMARY | NodeFlags::MIGRATE_TO);
                    n.flags.insert(NodeFlags::REPLICA);
                }
                changed = true;
            }
            let shard = topo.node(&p).map(|pn| pn.shard_id);
            if let Some(shard) = shard {
                if topo.node(sender).and_then(|n| n.primary) != Some(p) && p != *sender {
                    let _ = topo.set_primary(sender, p);
                    changed = true;
                }
                if let Some(n) = topo.node_mut(sender) {
                    if n.shard_id != shard {
                        n.shard_id = shard;
                        changed = true;
                    }
                }
            } else if let Some(n) = topo.node_mut(sender) {
                if !n.is_replica() {
                    n.flags.insert(NodeFlags::REPLICA);
                    changed = true;
                }
            }
            changed
        }
    }
}

/// §11.2 basics: for each slot in `claimed`, rebind it to `sender` when it has no owner or its
/// owner's configEpoch is lower than `claim_epoch`. Ignored when `sender` is myself or not a
/// primary. Returns whether any slot moved.
pub fn apply_slot_claims(
    topo: &mut Topology,
    sender: &NodeId,
    claim_epoch: ConfigEpoch,
    claimed: &SlotSet,
) -> bool {
    if sender == topo.myself_id() || !topo.node(sender).is_some_and(|n| n.is_primary()) {
        return false;
    }
    let mut moved = false;
    for slot in claimed.iter() {
        let take = match topo.slot_owner(slot) {
            Some(o) if o == sender => false,
            None => true,
            Some(o) => topo.node(o).is_some_and(|on| on.config_epoch < claim_epoch),
        };
        if take {
            // `sender` is known (checked above).
            let _ = topo.set_slot_owner(slot, Some(*sender));
            moved = true;
        }
    }
    moved
}

/// §11.5: when myself and `sender` are both primaries with the same configEpoch and the
/// sender's ID is greater than mine (byte order), myself takes `currentEpoch + 1` as both its
/// currentEpoch and configEpoch (the smaller ID moves). Returns whether it bumped; the caller
/// saves with fsync.
pub fn handle_config_epoch_collision(topo: &mut Topology, sender: &NodeId) -> bool {
    let me = topo.myself();
    let Some(s) = topo.node(sender) else {
        return false;
    };
    if s.is_myself()
        || !s.is_primary()
        || !me.is_primary()
        || s.config_epoch != me.config_epoch
        || s.id().as_bytes() <= me.id().as_bytes()
    {
        return false;
    }
    topo.current_epoch = topo.current_epoch.next();
    let e = topo.current_epoch.as_config();
    topo.myself_mut().config_epoch = e;
    true
}

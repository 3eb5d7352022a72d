//! Pure state checks of CLUSTER subcommands over a [`ClusterView`], in Valkey 8's order. The
//! node calls them before it changes anything; each returns the exact error the real server
//! sends (captured in `vectors/*/text/errors/`).

use crate::cluster::{NodeArg, SetSlot, SetSlotAction, SlotArgs};
use crate::error::ClusterError;
use crate::route::ClusterView;
use ferrocluster_slot::{Slot, SlotSet};
use ferrocluster_topology::{Node, NodeId};

/// ADDSLOTS / DELSLOTS / *RANGE (Valkey `checkSlotAssignmentsOrReply`): for each slot in
/// argument order, `Slot <n> is already busy` (add, assigned) or `Slot <n> is already
/// unassigned` (delete, unassigned), then `Slot <n> specified multiple times`; after all
/// listed ranges, the parse error of a later malformed pair ([`SlotArgs::error`]). Returns the
/// set of slots to add or delete.
///
/// # Errors
/// As listed.
pub fn check_slot_assignments(
    args: &SlotArgs,
    delete: bool,
    view: &(impl ClusterView + ?Sized),
) -> Result<SlotSet, ClusterError> {
    let mut seen = SlotSet::new();
    for &(start, end) in &args.ranges {
        for n in start.get()..=end.get() {
            let s = Slot::from_masked(n);
            let assigned = view.slot_owner(s).is_some();
            if delete && !assigned {
                return Err(ClusterError::SlotUnassigned(s));
            }
            if !delete && assigned {
                return Err(ClusterError::SlotBusy(s));
            }
            if !seen.insert(s) {
                return Err(ClusterError::SlotRepeated(s));
            }
        }
    }
    match &args.error {
        Some(e) => Err(e.clone()),
        None => Ok(seen),
    }
}

fn lookup<'v>(view: &'v (impl ClusterView + ?Sized), arg: &NodeArg) -> Option<&'v Node> {
    arg.id().and_then(|id| view.node(id))
}

/// CLUSTER SETSLOT (Valkey `clusterParseSetSlotCommand`): `Please use SETSLOT only with
/// masters.` (myself a replica, not `from_primary`), the parse error, the action's checks
/// ([`SetSlotAction`]), then the TIMEOUT error. `keys_in_slot` counts keys of a slot in all
/// databases. Returns the target node's ID (`None` for STABLE).
///
/// # Errors
/// As listed.
pub fn check_setslot(
    parsed: &Result<SetSlot, ClusterError>,
    view: &(impl ClusterView + ?Sized),
    from_primary: bool,
    keys_in_slot: impl Fn(Slot) -> u64,
) -> Result<Option<NodeId>, ClusterError> {
    let me = view.myself();
    if !from_primary && me.is_replica() {
        return Err(ClusterError::SetSlotOnReplica);
    }
    let cmd = parsed.as_ref().map_err(Clone::clone)?;
    let slot = cmd.slot;
    let owner_is_me = view.slot_owner(slot) == Some(me.id());
    let target = match &cmd.action {
        SetSlotAction::Migrating(arg) | SetSlotAction::Importing(arg) => {
            if matches!(cmd.action, SetSlotAction::Migrating(_)) {
                if me.is_primary() && !owner_is_me {
                    return Err(ClusterError::NotOwner(slot));
                }
            } else if owner_is_me {
                return Err(ClusterError::AlreadyOwner(slot));
            }
            let n = lookup(view, arg).ok_or_else(|| arg.dont_know())?;
            if n.is_replica() {
                return Err(ClusterError::TargetNotPrimary);
            }
            Some(*n.id())
        }
        SetSlotAction::Stable => None,
        SetSlotAction::Node(arg) => {
            let n = lookup(view, arg).ok_or_else(|| arg.unknown())?;
            if n.is_replica() {
                return Err(ClusterError::TargetNotPrimary);
            }
            if owner_is_me && n.id() != me.id() && keys_in_slot(slot) != 0 {
                return Err(ClusterError::SlotHasKeys(slot));
            }
            Some(*n.id())
        }
    };
    cmd.timeout.as_ref().map_err(Clone::clone)?;
    Ok(target)
}

/// CLUSTER FORGET: `Ok(None)` when the node is unknown but `banned` (in the FORGET ban list:
/// Valkey replies `+OK`; Redis 7.0 would say `Unknown node`), else `Unknown node <id>`,
/// `I tried hard but I can't forget myself...`, `Can't forget my master!`. Returns the node
/// to forget.
///
/// # Errors
/// As listed.
pub fn check_forget(
    arg: &NodeArg,
    view: &(impl ClusterView + ?Sized),
    banned: bool,
) -> Result<Option<NodeId>, ClusterError> {
    let Some(n) = lookup(view, arg) else {
        return if banned { Ok(None) } else { Err(arg.unknown()) };
    };
    let me = view.myself();
    if n.id() == me.id() {
        return Err(ClusterError::ForgetMyself);
    }
    if me.is_replica() && me.primary.as_ref() == Some(n.id()) {
        return Err(ClusterError::ForgetMyPrimary);
    }
    Ok(Some(*n.id()))
}

/// CLUSTER REPLICATE: `Unknown node <id>`, `Can't replicate myself`, `I can only replicate a
/// master, not a replica.`, `To set a master the node must be empty and without assigned
/// slots.` (myself a primary with slots or with keys in DB 0: `has_keys`). Returns the new
/// primary.
///
/// # Errors
/// As listed.
pub fn check_replicate(
    arg: &NodeArg,
    view: &(impl ClusterView + ?Sized),
    has_keys: bool,
) -> Result<NodeId, ClusterError> {
    let n = lookup(view, arg).ok_or_else(|| arg.unknown())?;
    let me = view.myself();
    if n.id() == me.id() {
        return Err(ClusterError::ReplicateMyself);
    }
    if n.is_replica() {
        return Err(ClusterError::ReplicateReplica);
    }
    if me.is_primary() && (me.slot_count() != 0 || has_keys) {
        return Err(ClusterError::ReplicateNotEmpty);
    }
    Ok(*n.id())
}

/// CLUSTER REPLICAS / SLAVES: `Unknown node <id>`, `The specified node is not a master`.
/// Returns the primary whose replicas to list.
///
/// # Errors
/// As listed.
pub fn check_replicas(
    arg: &NodeArg,
    view: &(impl ClusterView + ?Sized),
) -> Result<NodeId, ClusterError> {
    let n = lookup(view, arg).ok_or_else(|| arg.unknown())?;
    if n.is_replica() {
        return Err(ClusterError::NotAPrimary);
    }
    Ok(*n.id())
}

/// CLUSTER COUNT-FAILURE-REPORTS: `Unknown node <id>`. Returns the node.
///
/// # Errors
/// As listed.
pub fn check_known_node(
    arg: &NodeArg,
    view: &(impl ClusterView + ?Sized),
) -> Result<NodeId, ClusterError> {
    lookup(view, arg)
        .map(|n| *n.id())
        .ok_or_else(|| arg.unknown())
}

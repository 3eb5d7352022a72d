//! Legacy migration: the state effects of `CLUSTER SETSLOT` (sheet C.2; Valkey 8
//! `clusterCommandSetSlot`) and the mutual exclusion with atomic slot migration (sheet A.17).
//!
//! The argument parsing and the state checks with their error texts (`I'm not the owner of
//! hash slot <n>`, `Unknown node <id>`, ...) live in `ferrocluster-command`
//! (`parse_cluster`, `check::check_setslot`); this module adds the ASM exclusion check and
//! applies an already validated SETSLOT to the [`Topology`].

use crate::error::MigrationError;
use crate::manager::Migrations;
use ferrocluster_slot::Slot;
use ferrocluster_topology::{NodeId, Topology, TopologyError};

/// A validated SETSLOT action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LegacyAction {
    /// `IMPORTING <node-id>`: mark the slot importing from the node.
    Importing(NodeId),
    /// `MIGRATING <node-id>`: mark the slot migrating to the node.
    Migrating(NodeId),
    /// `STABLE`: clear both marks.
    Stable,
    /// `NODE <node-id>`: assign the slot to the node.
    Node(NodeId),
}

/// What the node must do after [`apply_setslot`] changed the topology (beyond saving
/// nodes.conf and updating the cluster state, which every SETSLOT needs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SetSlotEffect {
    /// Bump the configEpoch without agreement (sheet C.5) and broadcast PONG to every node:
    /// a primary finished importing the slot (`NODE <myself>` on an importing slot).
    pub bump_epoch_and_broadcast: bool,
    /// My shard lost its last slot and `cluster-allow-replica-migration` is on: become a
    /// replica of this node (full sync).
    pub become_replica_of: Option<NodeId>,
    /// My shard lost its last slot but replica migration is off: log "now an empty primary".
    pub now_empty_primary: bool,
}

/// `SETSLOT MIGRATING|IMPORTING` is refused while an atomic slot migration job is unfinished
/// on this node, whatever its slots (sheet A.17, Valkey test "Manual and atomic slot
/// migration are mutually exclusive"). `STABLE` and `NODE` are not affected.
///
/// # Errors
/// `Slot import in progress` (an import job), else `Slot export in progress`.
pub fn check_setslot_allowed(
    migrations: &Migrations,
    action: &LegacyAction,
) -> Result<(), MigrationError> {
    if matches!(
        action,
        LegacyAction::Importing(_) | LegacyAction::Migrating(_)
    ) {
        if migrations.is_any_importing() {
            return Err(MigrationError::SlotImportInProgress);
        }
        if migrations.is_any_exporting() {
            return Err(MigrationError::SlotExportInProgress);
        }
    }
    Ok(())
}

/// Applies a validated `CLUSTER SETSLOT <slot> <action>` to the model (sheet C.2 "Effects"):
///
/// * MIGRATING / IMPORTING set the mark; STABLE clears both marks.
/// * NODE: clears the migrating mark if `keys_in_slot` (all databases) is 0; reassigns the
///   slot; if the slot was my shard's and my shard now has no slot, either become a replica
///   of the new owner (`allow_replica_migration`) or report an empty primary; if the slot
///   went to myself or my primary and was importing, clears the importing mark and — on a
///   primary — asks for the epoch bump and PONG broadcast.
///
/// # Errors
/// [`TopologyError::UnknownNode`] if the node is not in the model (nothing changed).
pub fn apply_setslot(
    topo: &mut Topology,
    slot: Slot,
    action: LegacyAction,
    keys_in_slot: u64,
    allow_replica_migration: bool,
) -> Result<SetSlotEffect, TopologyError> {
    let mut effect = SetSlotEffect::default();
    match action {
        LegacyAction::Migrating(n) => {
            topo.set_migrating(slot, Some(n))?;
        }
        LegacyAction::Importing(n) => {
            topo.set_importing(slot, Some(n))?;
        }
        LegacyAction::Stable => {
            topo.set_importing(slot, None)?;
            topo.set_migrating(slot, None)?;
        }
        LegacyAction::Node(n) => {
            if !topo.contains(&n) {
                return Err(TopologyError::UnknownNode(n));
            }
            if keys_in_slot == 0 && topo.migrating_to(slot).is_some() {
                topo.set_migrating(slot, None)?;
            }
            let me = *topo.myself_id();
            let my_primary = topo.myself().primary.filter(|_| topo.myself().is_replica());
            let shard_primary = my_primary.unwrap_or(me);
            let was_mine = topo.slot_owner(slot) == Some(&shard_primary);
            topo.set_slot_owner(slot, Some(n))?;
            let shard_empty = topo
                .node(&shard_primary)
                .is_some_and(|p| p.slot_count() == 0);
            if was_mine && n != shard_primary && shard_empty {
                if allow_replica_migration {
                    effect.become_replica_of = Some(n);
                } else {
                    effect.now_empty_primary = true;
                }
            }
            if (n == me || Some(n) == my_primary) && topo.importing_from(slot).is_some() {
                topo.set_importing(slot, None)?;
                if topo.myself().is_primary() {
                    effect.bump_epoch_and_broadcast = true;
                }
            }
        }
    }
    Ok(effect)
}

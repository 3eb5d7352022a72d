//! Errors of [`crate::ClusterNode`] operations. Whenever one is returned nothing changed.

use crate::ConfigError;
use ferrocluster_gossip::CommandError;
use ferrocluster_slot::Slot;
use ferrocluster_topology::{ConfError, NodeId};

/// Why a node could not be built or a command was refused (host misuse or bad input); the
/// node is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NodeError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The saved nodes.conf could not be loaded (§18.3).
    #[error(transparent)]
    NodesConf(#[from] ConfError),
    /// A MEET / FORGET argument was refused.
    #[error(transparent)]
    Command(#[from] CommandError),
    /// `Slot <n> is already busy` (ADDSLOTS, §15).
    #[error("Slot {0} is already busy")]
    SlotBusy(Slot),
    /// `Unknown node <id>`.
    #[error("Unknown node {0}")]
    UnknownNode(NodeId),
    /// `Can't replicate myself`.
    #[error("Can't replicate myself")]
    ReplicateMyself,
    /// `I can only replicate a master, not a replica.`
    #[error("I can only replicate a master, not a replica.")]
    ReplicateReplica,
    /// `To set a master the node must be empty and without assigned slots.`
    #[error("To set a master the node must be empty and without assigned slots.")]
    ReplicateWithSlots,
}

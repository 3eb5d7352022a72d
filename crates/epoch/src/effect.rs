//! What an epoch-engine operation asks the caller (the `node` crate) to do, in order.

use ferrocluster_slot::SlotSet;
use ferrocluster_topology::{ConfigEpoch, CurrentEpoch, Millis, NodeId};
use std::net::IpAddr;

/// Where a message goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// On our outbound link to this node; dropped when there is none (Valkey sends nothing
    /// when `node->link` is NULL).
    Node(NodeId),
    /// On the link the message being handled arrived on (the PING a primary sends right after
    /// MFSTART, §13.2).
    ReplyLink,
    /// To every known node except myself and nodes in handshake that has an outbound link
    /// (`clusterBroadcastMessage` / `clusterBroadcastPong(CLUSTER_BROADCAST_ALL)`).
    AllNodes,
    /// To every node with an outbound link that is a replica of myself or of my primary
    /// (`CLUSTER_BROADCAST_LOCAL_REPLICAS`, §12.2: a replica scheduling an election tells its
    /// siblings its offset).
    LocalReplicas,
}

/// A bus message the node must build and send. Header fields (currentEpoch, configEpoch,
/// offset, myslots, flags, and the PAUSED mflag while
/// [`crate::Epoch::paused_for_manual_failover`] holds) come from the model at build time;
/// the node builds the message when it handles the effect, right after the operation returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EpochMessage {
    /// PING with a gossip section (type 0).
    Ping,
    /// PONG with a gossip section (type 1).
    Pong,
    /// FAILOVER_AUTH_REQUEST (type 5, header only); `force_ack` sets mflags FORCEACK (0x02)
    /// for a manual failover (§5.2, §13.1).
    AuthRequest {
        /// Set FORCEACK.
        force_ack: bool,
    },
    /// FAILOVER_AUTH_ACK (type 6, header only).
    AuthAck,
    /// MFSTART (type 8, header only).
    MfStart,
    /// UPDATE (type 7): the configEpoch, node ID and slot bitmap of `node` (§4.4), slots the
    /// owner stopped claiming already masked out (§11.4).
    Update {
        /// The node described.
        node: NodeId,
        /// Its configEpoch.
        config_epoch: ConfigEpoch,
        /// Its slots (boxed: 2048 bytes).
        slots: Box<SlotSet>,
    },
}

/// Why a replica cannot fail over right now (Valkey `CLUSTER_CANT_FAILOVER_*`); reported once
/// per change as [`EpochEvent::CantFailover`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CantFailover {
    /// Disconnected from the primary for longer than the validity factor allows (§12.2).
    DataAge,
    /// Waiting for the election delay.
    WaitingDelay,
    /// The election expired (older than the auth timeout); waiting for the retry window.
    Expired,
    /// Waiting for votes; the majority is not reached yet.
    WaitingVotes,
}

/// Why a vote was refused (§12.3). A refusal is silent on the wire: only this event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VoteDenied {
    /// Rule 2: the request's currentEpoch is lower than mine.
    StaleRequestEpoch,
    /// Rule 3: I already voted in this epoch.
    AlreadyVoted,
    /// Rule 4: the requester is a primary.
    RequesterIsPrimary,
    /// Rule 4: I do not know the requester's primary.
    PrimaryUnknown,
    /// Rule 4: the requester's primary is not FAIL and FORCEACK is not set.
    PrimaryNotFailed,
    /// Rule 6: a claimed slot is owned by a node with a greater configEpoch.
    StaleSlotClaim,
}

/// The three forms of `CLUSTER FAILOVER` (§13.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum FailoverMode {
    /// No option: coordinated with the primary (MFSTART, PAUSED offset, FORCEACK election).
    #[default]
    Default,
    /// `FORCE`: election with FORCEACK without waiting for the primary.
    Force,
    /// `TAKEOVER`: configEpoch bump without agreement, immediate take-over, no vote.
    Takeover,
}

/// A notable state change, for logs, metrics and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EpochEvent {
    /// Myself took a new configEpoch without an election: a collision (§11.5), BUMPEPOCH,
    /// TAKEOVER or an import finished by a claim (§11.6).
    ConfigEpochBumped(ConfigEpoch),
    /// A role message was ignored as stale (§11.1: the sender's configEpoch is newer than the
    /// one it reports).
    StaleRoleMessage(NodeId),
    /// Myself lost its last slot to a node of another shard and stays an empty primary.
    EmptyPrimary {
        /// The node that took the slots.
        lost_to: NodeId,
    },
    /// A vote was granted (the ACK leaves after the persist).
    VoteGranted {
        /// The replica voted for.
        to: NodeId,
        /// The epoch of the vote (my currentEpoch = lastVoteEpoch).
        epoch: CurrentEpoch,
    },
    /// A vote was refused (nothing is sent).
    VoteDenied {
        /// The requester.
        to: NodeId,
        /// The rule that refused it.
        reason: VoteDenied,
    },
    /// An election was scheduled at `at` with these ranks (§12.2).
    ElectionScheduled {
        /// When the auth request may be sent.
        at: Millis,
        /// My rank among my primary's replicas.
        rank: u32,
        /// My primary's rank among the failed primaries ([`crate::failed_primary_rank`]).
        shard_rank: u32,
    },
    /// A rank changed before votes were asked; the start moved to `at`.
    ElectionRankChanged {
        /// The new start.
        at: Millis,
        /// The new rank among my primary's replicas.
        rank: u32,
        /// The new rank of my primary among the failed primaries.
        shard_rank: u32,
    },
    /// Another primary claimed a configEpoch at least the epoch my election asked votes for
    /// (it won that epoch, or a later one): my election cannot win and was reset, so a new
    /// one, with a fresh epoch, is scheduled on the next failover step (Valkey 8.1,
    /// `clusterProcessPacket`, PR #1009).
    ElectionLost {
        /// The epoch my election asked for.
        epoch: CurrentEpoch,
        /// The primary that claimed it.
        winner: NodeId,
        /// The configEpoch it claimed.
        claimed: ConfigEpoch,
    },
    /// Votes were requested for this epoch.
    ElectionStarted(CurrentEpoch),
    /// The election was won; myself is the primary now.
    ElectionWon(CurrentEpoch),
    /// The reason the replica cannot fail over changed.
    CantFailover(CantFailover),
    /// A manual failover was requested on this replica.
    ManualFailoverStarted(FailoverMode),
    /// A replica asked this primary for a manual failover (MFSTART accepted).
    ManualFailoverRequested(NodeId),
    /// The paused primary's offset was reached: the manual-failover election may start.
    ManualFailoverCanStart,
    /// The manual failover timed out and was reset.
    ManualFailoverTimedOut,
    /// Myself migrates to an orphaned primary (§14).
    ReplicaMigration(NodeId),
}

/// One instruction from the epoch engine, in the order to act.
///
/// Durability: [`EpochEffect::Persist`] means "save nodes.conf with fsync now"; a
/// [`EpochEffect::Send`] with `after_persist: true` MUST NOT leave before the most recent
/// `Persist` emitted before it has been acknowledged by the host (the node's persist-gated
/// output queue). This is how a FAILOVER_AUTH_ACK leaves only after lastVoteEpoch is on disk
/// and a FAILOVER_AUTH_REQUEST only after the bumped currentEpoch is (§22 item 7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EpochEffect {
    /// The configuration changed: save nodes.conf (no fsync needed; may be coalesced).
    Save,
    /// The configuration changed and must be durable now: save with fsync. Later sends with
    /// `after_persist` wait for it.
    Persist,
    /// Something the cluster state depends on changed: re-evaluate it (§10).
    UpdateState,
    /// Build and send a message.
    Send {
        /// Where.
        to: Target,
        /// What.
        message: EpochMessage,
        /// Hold it until the preceding [`EpochEffect::Persist`] is acknowledged.
        after_persist: bool,
    },
    /// Myself is now a replica of `primary`: the host (re)starts replication from it
    /// (`replicationSetPrimary`). `full_sync` means the replication histories differ (another
    /// shard): the host must not try a partial resync.
    BecomeReplica {
        /// The new primary.
        primary: NodeId,
        /// Its IP (`None` when unknown: the host waits for an address).
        ip: Option<IpAddr>,
        /// Its plaintext client port (0 = none).
        port: u16,
        /// Its TLS client port (0 = none); the host picks by its `tls-replication` setting.
        tls_port: u16,
        /// A full sync is required.
        full_sync: bool,
    },
    /// Myself is now a primary: the host stops replicating (`replicationUnsetPrimary`) and
    /// accepts writes for the slots myself owns.
    BecomePrimary,
    /// Pause client writes until `until` (a primary serving a manual failover, §13.2).
    PauseWrites {
        /// End of the pause (now + 2 × manual failover timeout).
        until: Millis,
    },
    /// End a pause started by [`EpochEffect::PauseWrites`].
    UnpauseWrites,
    /// Myself lost these slots to another node and stays their non-owner: delete every key
    /// in them (Valkey's dirty slots, §11.2; a slot without keys needs nothing). Deletions are
    /// propagated to replicas as usual.
    DeleteSlotKeys(Box<SlotSet>),
    /// Something happened.
    Event(EpochEvent),
}

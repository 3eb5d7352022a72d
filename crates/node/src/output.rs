//! What the node asks its host to do ([`Output`], exhaustive: every arm is a duty or a
//! notice), what it tells the host for logs and metrics ([`Notice`], `#[non_exhaustive]`),
//! and the ordered queue that holds outputs until the persist they wait for is acknowledged.

use crate::MigrationRequest;
use ferrocluster_bus::DecodeError;
use ferrocluster_epoch::EpochEvent;
use ferrocluster_gossip::{LinkId, NodeAddress};
use ferrocluster_migration::{JobKind, JobName, JobState};
use ferrocluster_slot::SlotSet;
use ferrocluster_topology::{ConfWarning, ConfigEpoch, Millis, NodeId, Reply};
use std::collections::VecDeque;
use std::net::IpAddr;

/// Something the host reports about a bus link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkEvent {
    /// The outbound connection asked for by [`Output::Connect`] is up.
    Connected(LinkId),
    /// The outbound connection asked for by [`Output::Connect`] could not be made.
    ConnectFailed(LinkId),
    /// The link (either direction) was closed by the peer or by an error.
    Closed(LinkId),
}

/// The host's name for a request whose reply may have to wait ([`Output::Reply`]): it
/// supplies it in [`crate::CommandRequest::id`] and gets it back with the reply. The node never
/// interprets it; replies to requests with the same ID come out in the order the requests
/// were made, so a host MAY use its connection's ID (a pipelined connection then gets its
/// replies in order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct RequestId(pub u64);

/// One instruction for the host, from [`crate::ClusterNode::poll_output`]. The host MUST act
/// on them in the order polled. The enum is exhaustive on purpose: every variant but
/// [`Output::Notice`] is a duty, and a host that matches it without a `_` arm is told by the
/// compiler about every new one.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Open a TCP connection to `ip:port` (a bus port) for `link`; report the result with
    /// [`LinkEvent::Connected`] or [`LinkEvent::ConnectFailed`].
    Connect {
        /// The link ID the node chose.
        link: LinkId,
        /// Destination IP.
        ip: IpAddr,
        /// Destination bus port.
        port: u16,
    },
    /// Write `bytes` (whole bus frames) on `link`, after everything written on it before.
    Transmit {
        /// The link.
        link: LinkId,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// Close `link`; the node has already forgotten it (no [`LinkEvent::Closed`] needed, and
    /// any event the host still reports for it is ignored). The host MAY write what it
    /// already holds for the link first or drop it (Valkey's `freeClusterLink` drops its
    /// send buffer): the node relies on neither.
    Close {
        /// The link.
        link: LinkId,
    },
    /// Write `contents` as nodes.conf atomically and durably (temporary file, fsync, rename,
    /// fsync of the directory), then call [`crate::ClusterNode::handle_persisted`] with `seq`.
    /// Sequence numbers increase by one; acknowledgements are cumulative.
    ///
    /// What must not be seen before this configuration is durable waits for the
    /// acknowledgement (order is kept): a FAILOVER_AUTH_ACK after lastVoteEpoch is saved, a
    /// FAILOVER_AUTH_REQUEST after the bumped currentEpoch, the PONG announcing a take-over
    /// after the new slots and configEpoch, every transmit of a step that changed
    /// configEpoch (Valkey saves in `clusterBeforeSleep` before anything is written), and
    /// the [`Output::Reply`] of a command that changed the configuration. A host that never
    /// acknowledges stalls the node; it never breaks safety. A host whose write fails MUST
    /// NOT acknowledge it (Valkey's `clusterSaveConfigOrDie` exits).
    Persist {
        /// Sequence number (cumulative acknowledgement).
        seq: u64,
        /// The whole file (Valkey `clusterGenNodesDescription` with the `vars` line).
        contents: Vec<u8>,
        /// Whether the write MUST be fsynced (file and directory) before the acknowledgement.
        ///
        /// `true` for every change the epoch rules cannot repair after a power loss: one that
        /// moves currentEpoch, lastVoteEpoch or myself's configEpoch, changes myself's role or
        /// primary, or comes from the bus (a vote, an election, an UPDATE, a FAIL, a
        /// discovery). `false` for a CLUSTER command that changed none of those (SETSLOT
        /// IMPORTING/MIGRATING/STABLE/NODE without an epoch bump, ADDSLOTS, DELSLOTS, MEET,
        /// FORGET, ...): Valkey saves these without fsync (`clusterDoBeforeSleep(
        /// CLUSTER_TODO_SAVE_CONFIG)` without `CLUSTER_TODO_FSYNC_CONFIG` in
        /// `clusterCommandSetSlot`, `clusterCommandSpecial`), because a slot change lost to a
        /// power loss is repaired by the configEpoch rules (the node whose higher configEpoch
        /// claims the slot wins; UPDATE tells the stale one). The write and rename MUST still
        /// be done before the acknowledgement (a process crash after the reply keeps the
        /// change); a host MAY fsync anyway. Several `Persist`s of one turn MAY be written as
        /// one (the newest contents, fsynced if any of them asks) and acknowledged with the
        /// newest `seq`.
        fsync: bool,
    },
    /// The reply to the request `to` that [`crate::ClusterNode::cluster_command`] answered
    /// with [`crate::CommandOutcome::Deferred`]: the configuration change it made is durable
    /// now (its `Persist` was acknowledged). Send it to the client (encode with
    /// `Reply::encode_resp2` / `encode_resp3`).
    Reply {
        /// The request.
        to: RequestId,
        /// The reply.
        reply: Reply,
    },
    /// (Re)start replicating from `primary` at `ip:port` (Valkey `replicationSetPrimary`):
    /// myself became its replica (CLUSTER REPLICATE, SETSLOT NODE taking my last slot, a
    /// claim or UPDATE that took my shard's last slot, the sub-replica fix, replica
    /// migration; [`Notice::BecameReplica`] comes just before), or myself is a replica whose
    /// host was not told yet or was told another address (the cron: a node loaded from
    /// nodes.conf as a replica, a primary whose address became known or changed; Valkey
    /// `clusterCron` "replica with replication off"; no notice then). `full_sync` means the
    /// replication histories differ (the new primary is in another shard): the host must not
    /// try a partial resync.
    ReplicateFrom {
        /// The new primary.
        primary: NodeId,
        /// Its IP; `None` while unknown (the host waits for a later `ReplicateFrom` or
        /// retries with [`crate::ClusterNode::topology`]).
        ip: Option<IpAddr>,
        /// Its plaintext client port (0 = none).
        port: u16,
        /// Its TLS client port (0 = none); the host picks by its `tls-replication` setting.
        tls_port: u16,
        /// A full sync is required.
        full_sync: bool,
    },
    /// Myself (a replica) became a primary: CLUSTER RESET, a won election, CLUSTER FAILOVER
    /// TAKEOVER (Valkey `replicationUnsetPrimary`). The host stops replicating, keeps its
    /// data and accepts writes for the slots myself owns. On a take-over it comes before the
    /// PONG broadcast, which waits for the new configuration's persist.
    BecamePrimary,
    /// Pause client writes until `until` (Unix ms): myself is a primary serving a manual
    /// failover (2 × `cluster-manual-failover-timeout`, Valkey `clusterHandleManualFailover`)
    /// or an atomic slot migration export paused writes (Valkey 9.0/9.1 pause every write,
    /// expiry and eviction of the node). Paused writes are held, not rejected. A later
    /// `PauseWrites` replaces the earlier one (the end is the latest of both purposes). Once
    /// the pause holds the host MUST call [`crate::ClusterNode::handle_writes_paused`] with
    /// its replication offset, which is final while paused: a manual failover's primary
    /// announces that offset to its replica only then.
    PauseWrites {
        /// End of the pause.
        until: Millis,
    },
    /// End a pause started by [`Output::PauseWrites`] (the manual failover ended, timed out,
    /// or myself was reset or reconfigured; no slot migration holds a pause).
    UnpauseWrites,
    /// Myself lost these slots to another node and no longer owns them: delete every key in
    /// them in every database (Valkey's dirty slots, `clusterUpdateSlotsConfigWith`). A slot
    /// without keys needs nothing.
    DeleteSlotKeys(Box<SlotSet>),
    /// CLUSTER RESET ran. When `was_replica`, the host MUST empty its data set, as Valkey does
    /// (a primary with keys was refused before).
    ClusterReset {
        /// HARD (new node ID, epochs zeroed) rather than SOFT.
        hard: bool,
        /// Myself was a replica before.
        was_replica: bool,
    },
    /// A PUBLISH (`sharded = false`) or PUBLISHSHARD (`sharded = true`) message arrived from
    /// a known node, with a full or a light header: the host delivers it to its local (shard)
    /// channel subscribers (a host that drops it loses the message). It is never propagated
    /// further.
    PubSubMessage {
        /// The node that published it.
        from: NodeId,
        /// The channel.
        channel: Vec<u8>,
        /// The message.
        message: Vec<u8>,
        /// PUBLISHSHARD (SPUBLISH) rather than PUBLISH.
        sharded: bool,
    },
    /// A MODULE message arrived from a known node: the host hands it to the module receivers
    /// registered for (`module_id`, `module_type`) (a host without modules drops it).
    ModuleMessage {
        /// The sender.
        from: NodeId,
        /// The module ID (as the codec reads it, see `ferrocluster_bus::ModuleMsg`).
        module_id: u64,
        /// The module-defined message type.
        module_type: u8,
        /// The payload.
        payload: Vec<u8>,
    },
    /// An atomic slot migration (Valkey 9) asks the host's data plane to act — connect,
    /// write SYNCSLOTS messages, snapshot, stream, hide/reveal/drop slot keys, propagate; see
    /// [`MigrationRequest`]. Only a host that declared
    /// [`crate::Capabilities::slot_migration`] gets these. Results come back through
    /// [`crate::ClusterNode::handle_migration`] and, for SYNCSLOTS messages read from a
    /// migration connection, [`crate::ClusterNode::cluster_command_argv`] with
    /// [`crate::CommandRequest::conn`] set.
    Migration(Box<MigrationRequest>),
    /// Something happened: for logs, metrics and tests; nothing to do.
    Notice(Notice),
}

/// A notable state change, for logs, metrics and tests ([`Output::Notice`]). The host needs
/// to do nothing about any of them; new ones may be added, so a `_` arm is expected.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Notice {
    /// A MEET handshake completed: the node is known by its real ID.
    HandshakeCompleted(NodeId),
    /// A node was learned from a gossip section.
    NodeDiscovered(NodeId),
    /// A node was deleted (handshake timeout, FORGET, forgotten-node extension, duplicate).
    NodeDeleted(NodeId),
    /// A node was marked PFAIL (no PONG within `cluster-node-timeout`).
    NodePfail(NodeId),
    /// A node was marked FAIL (a quorum of failure reports, or a FAIL message).
    NodeFail(NodeId),
    /// PFAIL was cleared by a PONG.
    NodePfailCleared(NodeId),
    /// FAIL was cleared (Valkey `clearNodeFailureIfNeeded`).
    NodeFailCleared(NodeId),
    /// The cluster state changed (Valkey `clusterUpdateState`): `true` = ok.
    ClusterStateChanged(bool),
    /// Myself took a new configEpoch without an election: a collision
    /// (`clusterHandleConfigEpochCollision`), BUMPEPOCH, TAKEOVER, a finished import.
    ConfigEpochBumped(ConfigEpoch),
    /// One bad frame was dropped; the link stays open and nothing else changed.
    FrameDropped {
        /// The link it came on.
        link: LinkId,
        /// Why.
        error: DecodeError,
    },
    /// Framing was lost on the link: it was closed ([`Output::Close`] precedes this notice).
    FramingLost {
        /// The link.
        link: LinkId,
        /// Why.
        error: DecodeError,
    },
    /// Myself became a replica of `primary`; [`Output::ReplicateFrom`], which carries the
    /// address, follows at once (the host acts on that one).
    BecameReplica {
        /// The new primary.
        primary: NodeId,
    },
    /// A notable step of the epoch layer (elections, votes, manual failover, replica
    /// migration; `ferrocluster_epoch::EpochEvent`). A configEpoch bump is reported as
    /// [`Notice::ConfigEpochBumped`] instead.
    Epoch(EpochEvent),
    /// CLUSTER FAILOVER was accepted on this replica and started (see
    /// [`crate::ClusterNode::epoch`] and the [`Notice::Epoch`] notices that follow).
    ManualFailoverRequested(ferrocluster_command::FailoverMode),
    /// Myself's IP was learned from the local address of a link a MEET (or a first PING)
    /// arrived on (Valkey `clusterProcessPacket`, "own IP discovery").
    MyIpChanged(IpAddr),
    /// A message on `link` claimed myself's node ID `id`: another node has the same ID (built
    /// from the same seed, or started from a copy of this node's nodes.conf). The message was
    /// refused and nothing of it applied (myself's address is never taken from a peer); a
    /// MEET handshake over this link was dropped. Reported once per link; the host SHOULD log
    /// it with both addresses — one of the two nodes needs a new identity (CLUSTER RESET
    /// HARD, or its own nodes.conf).
    NodeIdCollision {
        /// The shared node ID (myself's).
        id: NodeId,
        /// The link the message came on.
        link: LinkId,
        /// Myself's address.
        mine: NodeAddress,
        /// The address the other node announced (or its link's peer IP).
        peer: NodeAddress,
    },
    /// The saved nodes.conf given to [`crate::ClusterNode::new`] loaded with something
    /// skipped (an aux field a newer node wrote): the host SHOULD log it. It comes once, at
    /// construction; the node's first `Persist` already leaves the field out.
    NodesConfWarning(ConfWarning),
    /// The data set loaded at start held keys in slots no node owned, and myself took them
    /// ([`crate::ClusterNode::handle_keys_loaded`]; Valkey logs "I have keys for unassigned
    /// slot %d. Taking responsibility for it."). The host SHOULD log it.
    UnassignedSlotsClaimed(Box<SlotSet>),
    /// An atomic slot migration job changed state (`CLUSTER GETSLOTMIGRATIONS` shows it).
    MigrationStateChanged {
        /// The job.
        job: JobName,
        /// Import or export.
        kind: JobKind,
        /// Old state.
        from: JobState,
        /// New state.
        to: JobState,
    },
}

/// What an output waits for, and what it carries that the invariants check when it leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tag {
    /// Nothing to check.
    None,
    /// A FAILOVER_AUTH_ACK: myself voted in this epoch (lastVoteEpoch).
    Vote(u64),
    /// A FAILOVER_AUTH_REQUEST sent with this currentEpoch.
    AuthRequest(u64),
}

/// The ordered output queue. An entry may wait for a persist acknowledgement: the queue is
/// strictly FIFO, so a held entry also holds everything behind it (order is never broken).
/// Replies are held beside it (a client reply never holds bus traffic back) and leave, in the
/// order they were made, once their persist is acknowledged.
#[derive(Debug, Clone, Default)]
pub(crate) struct OutputQueue {
    items: VecDeque<(Option<u64>, Output, Tag)>,
    replies: VecDeque<(u64, Output)>,
    persisted: u64,
}

impl OutputQueue {
    pub(crate) fn push(&mut self, out: Output, tag: Tag) {
        self.items.push_back((None, out, tag));
    }

    /// Queues `out` to be released only after `handle_persisted(seq)` (or a later seq).
    pub(crate) fn push_after_persist(&mut self, seq: u64, out: Output, tag: Tag) {
        self.items.push_back((Some(seq), out, tag));
    }

    /// Holds the reply `out` until `handle_persisted(seq)` (or a later seq).
    pub(crate) fn push_reply(&mut self, seq: u64, out: Output) {
        self.replies.push_back((seq, out));
    }

    pub(crate) fn acknowledge(&mut self, seq: u64) {
        self.persisted = self.persisted.max(seq);
    }

    pub(crate) fn persisted(&self) -> u64 {
        self.persisted
    }

    pub(crate) fn pop(&mut self) -> Option<(Output, Tag)> {
        if self
            .replies
            .front()
            .is_some_and(|(seq, _)| *seq <= self.persisted)
        {
            return self.replies.pop_front().map(|(_, o)| (o, Tag::None));
        }
        match self.items.front() {
            Some((Some(seq), _, _)) if *seq > self.persisted => None,
            Some(_) => self.items.pop_front().map(|(_, o, t)| (o, t)),
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tx(n: u64) -> Output {
        Output::Transmit {
            link: LinkId(n),
            bytes: vec![n as u8],
        }
    }

    fn pop(q: &mut OutputQueue) -> Option<Output> {
        q.pop().map(|(o, _)| o)
    }

    #[test]
    fn held_transmit_waits_for_its_persist_and_keeps_order() {
        let mut q = OutputQueue::default();
        q.push(
            Output::Persist {
                seq: 1,
                contents: b"x".to_vec(),
                fsync: true,
            },
            Tag::None,
        );
        q.push_after_persist(1, tx(1), Tag::None);
        q.push(tx(2), Tag::None);
        assert!(matches!(pop(&mut q), Some(Output::Persist { seq: 1, .. })));
        assert_eq!(pop(&mut q), None, "held until handle_persisted(1)");
        assert_eq!(pop(&mut q), None);
        q.acknowledge(1);
        assert_eq!(pop(&mut q), Some(tx(1)));
        assert_eq!(pop(&mut q), Some(tx(2)));
        assert_eq!(pop(&mut q), None);
    }

    #[test]
    fn acknowledgements_are_cumulative() {
        let mut q = OutputQueue::default();
        q.push_after_persist(2, tx(1), Tag::None);
        q.acknowledge(3);
        q.acknowledge(1); // an older ack does not go back
        assert_eq!(q.persisted(), 3);
        assert_eq!(pop(&mut q), Some(tx(1)));
    }

    #[test]
    fn a_held_reply_holds_no_bus_output_back_and_leaves_after_its_persist() {
        let mut q = OutputQueue::default();
        let reply = |n| Output::Reply {
            to: RequestId(n),
            reply: Reply::ok(),
        };
        q.push(
            Output::Persist {
                seq: 1,
                contents: b"x".to_vec(),
                fsync: true,
            },
            Tag::None,
        );
        q.push_reply(1, reply(7));
        q.push(tx(2), Tag::None);
        q.push_reply(2, reply(8));
        assert!(matches!(pop(&mut q), Some(Output::Persist { seq: 1, .. })));
        assert_eq!(pop(&mut q), Some(tx(2)), "the reply does not block the bus");
        assert_eq!(pop(&mut q), None, "the reply waits for handle_persisted(1)");
        q.acknowledge(1);
        assert_eq!(pop(&mut q), Some(reply(7)));
        assert_eq!(pop(&mut q), None, "the second reply waits for seq 2");
        q.acknowledge(2);
        assert_eq!(pop(&mut q), Some(reply(8)));
    }
}

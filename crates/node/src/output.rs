//! What the node asks its host to do, and the ordered queue that holds it.

use ferrocluster_bus::DecodeError;
use ferrocluster_epoch::EpochEvent;
use ferrocluster_gossip::LinkId;
use ferrocluster_slot::SlotSet;
use ferrocluster_topology::{ConfigEpoch, Millis, NodeId};
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

/// One instruction for the host, from [`crate::ClusterNode::poll_output`]. The host MUST act
/// on them in the order polled.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// Write `bytes` (whole bus frames) on `link`.
    Transmit {
        /// The link.
        link: LinkId,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// Close `link`; the node has already forgotten it (no [`LinkEvent::Closed`] needed).
    Close {
        /// The link.
        link: LinkId,
    },
    /// Write `contents` as nodes.conf atomically (and fsync), then call
    /// [`crate::ClusterNode::handle_persisted`] with `seq`. Sequence numbers increase by one.
    ///
    /// Messages that must not leave before this configuration is durable wait for it (the
    /// queue stops at the first of them until the acknowledgement; order is kept): a
    /// FAILOVER_AUTH_ACK after lastVoteEpoch is saved, a FAILOVER_AUTH_REQUEST after the
    /// bumped currentEpoch, the PONG announcing a take-over after the new slots and configEpoch
    /// (§12, §22), and every transmit of a step that changed configEpoch.
    Persist {
        /// Sequence number (cumulative acknowledgement).
        seq: u64,
        /// The whole file (§18.1).
        contents: Vec<u8>,
    },
    /// Something happened (logs, metrics, tests).
    Event(Event),
}

/// A notable state change.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A MEET handshake completed: the node is known by its real ID.
    HandshakeCompleted(NodeId),
    /// A node was learned from a gossip section.
    NodeDiscovered(NodeId),
    /// A node was deleted (handshake timeout, FORGET, forgotten-node extension, duplicate).
    NodeDeleted(NodeId),
    /// A node was marked PFAIL (§9.1).
    NodePfail(NodeId),
    /// A node was marked FAIL (§9.3 quorum or a FAIL message).
    NodeFail(NodeId),
    /// PFAIL was cleared by a PONG.
    NodePfailCleared(NodeId),
    /// FAIL was cleared by a PONG (§9.4).
    NodeFailCleared(NodeId),
    /// The cluster state changed (§10): `true` = ok.
    ClusterStateChanged(bool),
    /// Myself took a new configEpoch without an election: a collision (§11.5), BUMPEPOCH,
    /// TAKEOVER, a finished import (§11.6).
    ConfigEpochBumped(ConfigEpoch),
    /// One bad frame was dropped; the link stays open and nothing else changed.
    FrameDropped {
        /// The link it came on.
        link: LinkId,
        /// Why.
        error: DecodeError,
    },
    /// A PUBLISH (`sharded = false`) or PUBLISHSHARD (`sharded = true`) message arrived from
    /// a known node, with a full or a light header (§8 step 8, §17): the host delivers it to
    /// its local (shard) channel subscribers. It is never propagated further.
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
    /// A MODULE message arrived from a known node (§4.5, §8 step 13): the host hands it to
    /// the module receivers registered for (`module_id`, `module_type`).
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
    /// Myself became a replica of `primary` (REPLICATE, SETSLOT NODE taking my last slot, a
    /// claim or UPDATE that took my shard's last slot, the sub-replica fix, replica
    /// migration). Always immediately followed by [`Event::ReplicateFrom`], which carries the
    /// address: a host acts on that one.
    BecameReplica {
        /// The new primary.
        primary: NodeId,
    },
    /// Myself (a replica) became a primary: CLUSTER RESET, a won election, CLUSTER FAILOVER
    /// TAKEOVER (§12.5, Valkey `replicationUnsetPrimary`). The host stops replicating and
    /// accepts writes for the slots myself owns. On a take-over it comes before the PONG
    /// broadcast, which waits for the new configuration's persist.
    BecamePrimary,
    /// (Re)start replication from `primary` at `ip:port` (Valkey `replicationSetPrimary`):
    /// follows every [`Event::BecameReplica`]. `full_sync` means the replication histories
    /// differ (the new primary is in another shard): the host must not try a partial resync.
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
    /// Pause client writes until `until` (Unix ms): myself is a primary serving a manual
    /// failover (§13.2, 2 × `cluster-manual-failover-timeout`) or an atomic slot migration
    /// export paused writes (slot-migration sheet A.9; Valkey 9.0/9.1 pause every write,
    /// expiry and eviction of the node). Paused writes are held, not rejected. A later
    /// `PauseWrites` replaces the earlier one (the end is the latest of both purposes). Once
    /// the pause holds the host MUST call [`crate::ClusterNode::handle_writes_paused`] with
    /// its replication offset, which is final while paused: a manual failover's primary
    /// announces that offset to its replica only then (§13.2).
    PauseWrites {
        /// End of the pause.
        until: Millis,
    },
    /// End a pause started by [`Event::PauseWrites`] (the manual failover ended, timed out,
    /// or myself was reset or reconfigured; no slot migration holds a pause).
    UnpauseWrites,
    /// Myself lost these slots to another node and no longer owns them: delete every key in
    /// them (Valkey's dirty slots, §11.2). A slot without keys needs nothing.
    DeleteSlotKeys(Box<SlotSet>),
    /// A notable step of the epoch layer (elections, votes, manual failover, replica
    /// migration; `ferrocluster_epoch::EpochEvent`), for logs, metrics and tests. A configEpoch
    /// bump is reported as [`Event::ConfigEpochBumped`] instead.
    Epoch(EpochEvent),
    /// CLUSTER RESET ran (§19.6). When `was_replica`, Valkey also empties the data set; the
    /// host does that (a primary with keys is refused before).
    ClusterReset {
        /// HARD (new node ID, epochs zeroed) rather than SOFT.
        hard: bool,
        /// Myself was a replica before.
        was_replica: bool,
    },
    /// CLUSTER FAILOVER was accepted on this replica (§13.1) and started; see
    /// [`crate::ClusterNode::manual_failover_request`] and the [`Event::Epoch`] events that
    /// follow.
    ManualFailoverRequested(ferrocluster_command::FailoverMode),
    /// Myself's IP was learned from the local address of a link a MEET (or a first PING)
    /// arrived on (§7.3).
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
        mine: ferrocluster_gossip::NodeAddress,
        /// The address the other node announced (or its link's peer IP).
        peer: ferrocluster_gossip::NodeAddress,
    },
    /// The saved nodes.conf given to [`crate::ClusterNode::new`] loaded with something
    /// skipped (an aux field a newer node wrote): the host SHOULD log it. It is emitted once,
    /// at construction; the node's first `Persist` already leaves the field out.
    NodesConfWarning(ferrocluster_topology::ConfWarning),
    /// Framing was lost on the link: it was closed ([`Output::Close`] precedes this event).
    FramingLost {
        /// The link.
        link: LinkId,
        /// Why.
        error: DecodeError,
    },
    /// An atomic slot migration (Valkey 9) asks the host to act on its data plane — connect,
    /// write SYNCSLOTS messages, snapshot, stream, hide/reveal/drop slot keys, propagate —
    /// or reports a job's state change; see [`crate::MigrationRequest`]. Results come back
    /// through [`crate::ClusterNode::handle_migration`] and
    /// [`crate::ClusterNode::migration_command`].
    Migration(Box<crate::MigrationRequest>),
}

/// The outputs of one step before [`crate::ClusterNode`] releases them: each may be gated
/// on the step's persist (a transmit that must not leave before the configuration it depends
/// on is durable).
#[derive(Debug, Clone, Default)]
pub(crate) struct Staged {
    items: Vec<(bool, Output)>,
}

impl Staged {
    /// Stages an output that may leave at once.
    pub(crate) fn push(&mut self, out: Output) {
        self.items.push((false, out));
    }

    /// Stages an output that waits for this step's persist.
    pub(crate) fn push_gated(&mut self, out: Output) {
        self.items.push((true, out));
    }

    pub(crate) fn drain(&mut self) -> impl Iterator<Item = (bool, Output)> + '_ {
        self.items.drain(..)
    }
}

/// The ordered output queue. An entry may wait for a persist acknowledgement: the queue is
/// strictly FIFO, so a held entry also holds everything behind it (order is never broken).
#[derive(Debug, Clone, Default)]
pub(crate) struct OutputQueue {
    items: VecDeque<(Option<u64>, Output)>,
    persisted: u64,
}

impl OutputQueue {
    pub(crate) fn push(&mut self, out: Output) {
        self.items.push_back((None, out));
    }

    /// Queues `out` to be released only after `handle_persisted(seq)` (or a later seq).
    pub(crate) fn push_after_persist(&mut self, seq: u64, out: Output) {
        self.items.push_back((Some(seq), out));
    }

    pub(crate) fn acknowledge(&mut self, seq: u64) {
        self.persisted = self.persisted.max(seq);
    }

    pub(crate) fn persisted(&self) -> u64 {
        self.persisted
    }

    pub(crate) fn pop(&mut self) -> Option<Output> {
        match self.items.front() {
            Some((Some(seq), _)) if *seq > self.persisted => None,
            Some(_) => self.items.pop_front().map(|(_, o)| o),
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

    #[test]
    fn held_transmit_waits_for_its_persist_and_keeps_order() {
        let mut q = OutputQueue::default();
        q.push(Output::Persist {
            seq: 1,
            contents: b"x".to_vec(),
        });
        q.push_after_persist(1, tx(1));
        q.push(tx(2));
        assert!(matches!(q.pop(), Some(Output::Persist { seq: 1, .. })));
        assert_eq!(q.pop(), None, "held until handle_persisted(1)");
        assert_eq!(q.pop(), None);
        q.acknowledge(1);
        assert_eq!(q.pop(), Some(tx(1)));
        assert_eq!(q.pop(), Some(tx(2)));
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn acknowledgements_are_cumulative() {
        let mut q = OutputQueue::default();
        q.push_after_persist(2, tx(1));
        q.acknowledge(3);
        q.acknowledge(1); // an older ack does not go back
        assert_eq!(q.persisted(), 3);
        assert_eq!(q.pop(), Some(tx(1)));
    }
}

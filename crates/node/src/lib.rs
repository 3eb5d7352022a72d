//! `ClusterNode`: a Sans-IO Valkey Cluster node engine, composing the gossip layer
//! (`ferrocluster-gossip`), the failure detector (`ferrocluster-failure`), the epoch layer
//! (`ferrocluster-epoch`: configuration propagation, UPDATE, elections, votes, manual
//! failover, replica migration), failover readiness (`ferrocluster-health`), slot migration
//! (`ferrocluster-migration`: Valkey 9 atomic slot migration, legacy SETSLOT) and the shared
//! model (`ferrocluster-topology`), speaking the cluster bus (`ferrocluster-bus`).
//!
//! The node never touches a socket, a clock, a thread or global randomness: the host feeds it
//! bytes, link events and the time, and carries out what it asks, in order.
//!
//! # The host loop
//!
//! 1. Build the node: [`ClusterNode::new`] with a [`ClusterConfig`], the current Unix time in ms,
//!    a seed, and the bytes of the previously saved nodes.conf if there is one.
//! 2. Drain [`ClusterNode::poll_output`] until `None`, acting on each [`Output`] in order:
//!    * `Connect { link, ip, port }`: open a TCP connection; report [`LinkEvent::Connected`] or
//!      [`LinkEvent::ConnectFailed`] for that link later;
//!    * `Transmit { link, bytes }`: write the bytes on the link;
//!    * `Close { link }`: close the link (the node has already forgotten it);
//!    * `Persist { seq, contents }`: write nodes.conf atomically and fsync, then call
//!      [`ClusterNode::handle_persisted`]`(seq)`; transmits that depend on it are released only
//!      then (a host that never acknowledges stalls the node, it never breaks safety);
//!    * `Event(..)`: log or count it — except the ones that ask the host to act on its data
//!      set: [`Event::ReplicateFrom`] (start replicating, after [`Event::BecameReplica`]),
//!      [`Event::BecamePrimary`] (stop replicating), [`Event::PauseWrites`] (hold client
//!      writes, then report the final offset with [`ClusterNode::handle_writes_paused`]) /
//!      [`Event::UnpauseWrites`] (manual failover or a slot migration export),
//!      [`Event::DeleteSlotKeys`] (slots lost), [`Event::ClusterReset`], and
//!      [`Event::Migration`] (an atomic slot migration's data plane: connect to the target's
//!      client port, write SYNCSLOTS messages, snapshot, stream, hide/reveal/drop slot keys,
//!      propagate; see [`MigrationRequest`]).
//! 3. Wait for the first of: bytes on a link, a new inbound connection, a connect result, a
//!    close, or the instant [`ClusterNode::poll_timeout`].
//! 4. Feed what happened, with the current time:
//!    [`ClusterNode::handle_accept`] (returns the new link's ID; a host that knows the
//!    connection's local address SHOULD use [`ClusterNode::handle_accept_local`], which lets
//!    the node learn its own IP as Valkey does, §7.3),
//!    [`ClusterNode::handle_link_bytes`], [`ClusterNode::handle_link`],
//!    [`ClusterNode::handle_timeout`], and myself's replication offset and link whenever they
//!    change: [`ClusterNode::handle_replication`]. Slot migration data-plane facts (connected,
//!    AUTH / ESTABLISH replies, snapshot done, backlog, link closed, OOM, FLUSH, full sync,
//!    loading) go to [`ClusterNode::handle_migration`]; SYNCSLOTS messages read from a
//!    migration connection to [`ClusterNode::migration_command`] (or
//!    [`ClusterNode::cluster_command_argv`] with [`CommandRequest::conn`] set). Commands are inputs too: CLUSTER subcommands through
//!    [`ClusterNode::cluster_command`] / [`ClusterNode::cluster_command_argv`] (replies with
//!    Valkey's exact texts; the host's keyspace is read through [`SlotKeys`]), keyed client
//!    commands through [`ClusterNode::route`] / [`ClusterNode::dispatch_client_command`],
//!    PUBLISH / SPUBLISH fan-out through [`ClusterNode::publish`] / [`ClusterNode::spublish`]
//!    (received ones come back as [`Event::PubSubMessage`]), and the older typed shortcuts
//!    ([`ClusterNode::meet`], [`ClusterNode::add_slots`], …).
//! 5. Go to 2.
//!
//! ```
//! use ferrocluster_node::{ClusterConfig, ClusterNode, LinkEvent, Millis, Output};
//! use std::net::{IpAddr, Ipv4Addr};
//!
//! let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
//! let mut now = Millis(1_700_000_000_000);
//! let mk = |port| ClusterConfig { port, ..ClusterConfig::default() };
//! let mut a = ClusterNode::new(mk(7000), now, 1, None).unwrap();
//! let mut b = ClusterNode::new(mk(7001), now, 2, None).unwrap();
//! a.meet(lo, 7001, None, now).unwrap();
//! // (1) a's links to b, (2) b's inbound links from a; both by the IDs each node chose.
//! let mut a_to_b = Vec::new();
//! let mut b_from_a = Vec::new();
//! for _ in 0..50 {
//!     now = Millis(now.0 + 100);
//!     for n in [&mut a, &mut b] {
//!         n.handle_timeout(now);
//!     }
//!     // Step 2 for a: act on its outputs.
//!     while let Some(out) = a.poll_output() {
//!         match out {
//!             Output::Connect { link, .. } => {
//!                 let inbound = b.handle_accept(lo, now); // "the TCP connect succeeded"
//!                 a_to_b.push((link, inbound));
//!                 b_from_a.push((inbound, link));
//!                 a.handle_link(LinkEvent::Connected(link), now);
//!             }
//!             Output::Transmit { link, bytes } => {
//!                 if let Some((_, peer)) = a_to_b.iter().find(|(l, _)| *l == link) {
//!                     b.handle_link_bytes(*peer, &bytes, now);
//!                 }
//!             }
//!             Output::Persist { seq, .. } => a.handle_persisted(seq),
//!             _ => {}
//!         }
//!     }
//!     // The same for b (its replies on inbound links go back to a's outbound link).
//!     while let Some(out) = b.poll_output() {
//!         match out {
//!             Output::Transmit { link, bytes } => {
//!                 if let Some((_, peer)) = b_from_a.iter().find(|(l, _)| *l == link) {
//!                     a.handle_link_bytes(*peer, &bytes, now);
//!                 }
//!             }
//!             Output::Persist { seq, .. } => b.handle_persisted(seq),
//!             _ => {} // b's own connects to a are left unanswered in this short example
//!         }
//!     }
//! }
//! // a learned b's real ID through the MEET handshake (b's PONG carried it); b knows a only as
//! // a handshake node until its own outbound link to a gets a PONG.
//! assert!(a.topology().node(b.myself_id()).is_some());
//! assert_eq!(b.topology().len(), 2);
//! ```
//!
//! Failover readiness, the quorum check and health are `&self` queries:
//! [`ClusterNode::readiness`], [`ClusterNode::quorum_check`], [`ClusterNode::health`],
//! [`ClusterNode::shard_readiness`].
//!
//! Facts: `shared/spec/cluster-bus.md` (§ numbers in the docs refer to it); the contract is
//! the "Sans-IO contract of ClusterNode" in `shared/DESIGN.md`.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod config;
mod error;
mod exec;
mod failover;
mod keys;
mod migrate;
mod node;
mod output;
mod pubsub;
mod readiness;
mod routing;
mod stats;

pub use config::{
    ClusterConfig, ConfigError, PreferredEndpoint, BUS_PORT_OFFSET, MAX_PORT_WITH_DEFAULT_BUS_PORT,
};
pub use error::NodeError;
pub use exec::{error_reply, CommandOutcome, CommandRequest, ManualFailoverRequest};
pub use ferrocluster_command as command;
pub use ferrocluster_command::{
    lookup, ClientState, ClusterCommand, CommandSpec, Dispatch, ErrorReply, FailoverMode,
    KeyPresence, NoKeys, QueuedCommand, Route, RouteError,
};
pub use ferrocluster_gossip::{CommandError, LinkId, NodeAddress};
pub use ferrocluster_topology::Reply;
pub use ferrocluster_topology::{Millis, NodeId, Topology};
pub use keys::{EmptyKeyspace, SlotKeys, SlotUsage};
pub use migrate::{MigrationInput, MigrationRequest, MSG_SYNCSLOTS_NO_CONN};
pub use node::ClusterNode;
pub use output::{Event, LinkEvent, Output};
pub use stats::MessageStats;

pub use ferrocluster_epoch as epoch;
pub use ferrocluster_epoch::{EpochEvent, ReplLink, ReplicationState};
pub use ferrocluster_health as health;
pub use ferrocluster_health::{Health, QuorumCheck, QuorumVerdict, Readiness, ShardReadiness};
pub use ferrocluster_migration as migration;
pub use ferrocluster_migration::{
    AuthReply, ConnId, FinishState, Job, JobKind, JobName, JobState, Migrations, Origin,
    SnapshotResult, SyncSlots,
};

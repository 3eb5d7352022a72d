//! `ClusterNode`: a Sans-IO Valkey Cluster node engine, composing the gossip layer
//! (`ferrocluster-gossip`), the failure detector (`ferrocluster-failure`), the epoch layer
//! (`ferrocluster-epoch`: configuration propagation, UPDATE, elections, votes, manual
//! failover, replica migration), failover readiness (`ferrocluster-health`), slot migration
//! (`ferrocluster-migration`: Valkey 9 atomic slot migration, legacy SETSLOT) and the shared
//! model (`ferrocluster-topology`), speaking the cluster bus (`ferrocluster-bus`).
//!
//! The node never touches a socket, a clock, a thread or global randomness: the host feeds it
//! bytes, link events and the time, and carries out what it asks, in order. Everything an
//! embedder names is reachable from this crate (the types of the crates below are
//! re-exported, and whole crates as modules: [`slot`], [`topology`], [`bus`], [`gossip`],
//! [`command`], [`epoch`], [`health`], [`migration`]), so a host depends on this one crate.
//!
//! # The host loop
//!
//! `ferrocluster-host` (`crates/host`) implements this loop once, with the bus sockets and
//! nodes.conf; `examples/minimal-host/src/main.rs` is a complete cluster node on it in under
//! 300 lines (a `HashMap` keyspace, RESP through a crate), the example host to read first.
//! The steps, for a host that drives the node itself:
//!
//! 1. Build the node: [`ClusterNode::new`] with a [`ClusterConfig`] (every `cluster-*`
//!    option, Valkey's defaults), the [`Capabilities`] of the host (replication, the slot
//!    migration data plane, databases), the current Unix time in ms, a seed of its own
//!    (from the OS RNG: it also makes the node ID, see [`ClusterNode::new`]) and the bytes
//!    of the previously saved nodes.conf if there is one. The host SHOULD hold an exclusive
//!    lock on that file for its lifetime (Valkey `clusterLockConfig`).
//! 2. Drain [`ClusterNode::poll_output`] until `None`, acting on each [`Output`] in order.
//!    The enum is exhaustive: match it without a `_` arm and the compiler names every duty.
//!    * `Connect { link, ip, port }`: open a TCP connection; report [`LinkEvent::Connected`]
//!      or [`LinkEvent::ConnectFailed`] for that link later;
//!    * `Transmit { link, bytes }`: write the bytes on the link, in order;
//!    * `Close { link }`: close the link (the node has already forgotten it);
//!    * `Persist { seq, contents, fsync }`: write nodes.conf atomically (and fsync when
//!      `fsync` says so), then call [`ClusterNode::handle_persisted`]`(seq)`. Whatever depends on it — a vote, a bumped
//!      epoch, a take-over PONG, the reply of a CLUSTER command that changed the config —
//!      waits inside the node until then, so acting in order is all a host has to do;
//!    * `Reply { to, reply }`: send the reply of the deferred request `to` (below);
//!    * `ReplicateFrom { .. }` / `BecamePrimary`: start replicating from the new primary /
//!      stop replicating (a host with [`Capabilities::replication`]). These outputs are the
//!      whole contract: a host starts not replicating and never reads the topology to decide
//!      whom to follow; a node loaded from nodes.conf as a replica gets its `ReplicateFrom`
//!      from its cron once its primary's address is known (Valkey `clusterCron`), and again
//!      when that address changes. A host that keeps its replication history across restarts
//!      SHOULD keep it as its own while its node starts as a replica (the data plane's
//!      `Role::ReplicaAwaitingPrimary`, Valkey `loadDataFromDisk`), so that first
//!      `ReplicateFrom` resyncs partially;
//!    * `PauseWrites { until }` / `UnpauseWrites`: hold client writes, then report the final
//!      offset with [`ClusterNode::handle_writes_paused`] / release them;
//!    * `DeleteSlotKeys(slots)`: delete every key of these slots; `ClusterReset { .. }`:
//!      empty the data set of a reset replica;
//!    * `PubSubMessage { .. }` / `ModuleMessage { .. }`: deliver to local subscribers / module
//!      receivers (dropping them loses messages);
//!    * `Migration(request)`: an atomic slot migration's data plane (a host with
//!      [`Capabilities::slot_migration`]; see [`MigrationRequest`]);
//!    * `Notice(n)`: log or count it ([`Notice`] is `#[non_exhaustive]`: a `_` arm there
//!      only drops log lines, never a duty).
//! 3. Wait for the first of: bytes on a link, a new inbound connection, a connect result, a
//!    close, a client request, or the instant [`ClusterNode::poll_timeout`].
//! 4. Feed what happened, with the current time read once per loop turn:
//!    [`ClusterNode::handle_accept_local`] (or [`ClusterNode::handle_accept`] without the
//!    local address), [`ClusterNode::handle_link_bytes`], [`ClusterNode::handle_link`],
//!    [`ClusterNode::handle_replication`] whenever myself's offset or link changed,
//!    [`ClusterNode::handle_migration`] for slot migration data-plane facts, and
//!    [`ClusterNode::handle_timeout`] whenever `poll_timeout` has passed — also when input
//!    is always ready (a busy loop that never checks the deadline starves the cron: no PINGs,
//!    no failure detection). Client requests are inputs too:
//!    * keyed commands: [`ClusterNode::dispatch_client_command`] (arity, MULTI, ASKING,
//!      READONLY, SELECT, then MOVED / ASK / TRYAGAIN / CROSSSLOT / CLUSTERDOWN, reading key
//!      presence through [`KeyPresence`]) or [`ClusterNode::route`] for one command;
//!    * `CLUSTER ...`: [`ClusterNode::cluster_command_argv`] with a [`CommandRequest`] whose
//!      [`CommandRequest::id`] the host picks. It returns [`CommandOutcome::Reply`] (write it
//!      now), [`CommandOutcome::Deferred`] (the command changed the saved config: the reply
//!      comes as `Output::Reply { to: id, .. }` after its persist), `ReplicateFirst`
//!      (replicate a SETSLOT to the replicas first) or `NoReply`. A host that writes whatever
//!      it is given the moment it is given it is correct;
//!    * PUBLISH / SPUBLISH: [`ClusterNode::publish`] / [`ClusterNode::spublish`].
//! 5. Go to 2.
//!
//! Time: `now` is Unix ms ([`Millis`]). A clock that steps back is clamped to the latest
//! time seen (timers wait until it passes that again); a step forward runs what fell due,
//! once. Links: the node names every link; events for a link it no longer knows (a close
//! racing its own `Close`, a connect result after a reset) are ignored, and a `Close` needs no
//! `Closed` back. The host MAY flush or drop the unsent bytes of a link it is told to close.
//!
//! ```
//! use ferrocluster_node::{
//!     Capabilities, ClientState, ClusterConfig, ClusterNode, CommandOutcome, CommandRequest,
//!     Dispatch, EmptyKeyspace, ErrorReply, LinkEvent, LinkId, Millis, NoKeys, Output, Reply,
//!     RequestId,
//! };
//! use std::collections::BTreeMap;
//! use std::net::{IpAddr, Ipv4Addr};
//!
//! /// One host: its node, its nodes.conf "on disk", the replies it sent to clients.
//! struct Host {
//!     node: ClusterNode,
//!     disk: Vec<u8>,
//!     replies: Vec<(RequestId, Reply)>,
//! }
//!
//! /// Bus traffic between the two in-memory hosts: (host, link) -> (peer host, peer link).
//! #[derive(Default)]
//! struct Net {
//!     pairs: BTreeMap<(usize, LinkId), (usize, LinkId)>,
//!     inflight: Vec<(usize, LinkId, Vec<u8>)>,
//! }
//!
//! /// Step 2 of the loop for host `me`.
//! fn act(hosts: &mut [Host], me: usize, net: &mut Net, now: Millis) {
//!     let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
//!     while let Some(out) = hosts[me].node.poll_output() {
//!         match out {
//!             Output::Connect { link, .. } => {
//!                 // "The TCP connect succeeded": the peer accepts, we are connected.
//!                 let peer = 1 - me;
//!                 let inbound = hosts[peer].node.handle_accept(lo, now);
//!                 net.pairs.insert((me, link), (peer, inbound));
//!                 net.pairs.insert((peer, inbound), (me, link));
//!                 hosts[me].node.handle_link(LinkEvent::Connected(link), now);
//!             }
//!             Output::Transmit { link, bytes } => net.inflight.push((me, link, bytes)),
//!             Output::Close { link } => {
//!                 net.pairs.remove(&(me, link));
//!             }
//!             Output::Persist { seq, contents, .. } => {
//!                 hosts[me].disk = contents; // write, fsync, rename, fsync the directory
//!                 hosts[me].node.handle_persisted(seq);
//!             }
//!             Output::Reply { to, reply } => hosts[me].replies.push((to, reply)),
//!             // This host has no replication, data plane or subscribers.
//!             Output::ReplicateFrom { .. } | Output::BecamePrimary => {}
//!             Output::PauseWrites { .. } | Output::UnpauseWrites => {}
//!             Output::DeleteSlotKeys(_) | Output::ClusterReset { .. } => {}
//!             Output::PubSubMessage { .. } | Output::ModuleMessage { .. } => {}
//!             Output::Migration(_) => {}
//!             Output::Notice(_) => {} // log it
//!         }
//!     }
//! }
//!
//! let mut now = Millis(1_700_000_000_000);
//! let mk = |port, seed| {
//!     let config = ClusterConfig { port, ..ClusterConfig::default() };
//!     let node = ClusterNode::new(config, Capabilities::default(), now, seed, None).unwrap();
//!     Host { node, disk: Vec::new(), replies: Vec::new() }
//! };
//! let mut hosts = [mk(7000, 1), mk(7001, 2)];
//! let mut net = Net::default();
//!
//! // A client of host 0: CLUSTER ADDSLOTSRANGE 0 16383. The change is saved, so the reply
//! // waits for its persist: nothing to write yet.
//! let req = CommandRequest { id: RequestId(1), ..CommandRequest::default() };
//! let argv = ["CLUSTER", "ADDSLOTSRANGE", "0", "16383"];
//! let out = hosts[0].node.cluster_command_argv(&argv, &req, &EmptyKeyspace, now);
//! assert_eq!(out, CommandOutcome::Deferred);
//! // CLUSTER MEET changes no saved config: its reply may be written at once.
//! let meet = ["CLUSTER", "MEET", "127.0.0.1", "7001"];
//! let out = hosts[0].node.cluster_command_argv(&meet, &req, &EmptyKeyspace, now);
//! assert_eq!(out, CommandOutcome::Reply(Reply::ok()));
//!
//! for _ in 0..40 {
//!     now = Millis(now.0 + 100);
//!     for h in 0..2 {
//!         hosts[h].node.handle_timeout(now);
//!         act(&mut hosts, h, &mut net, now);
//!     }
//!     for (from, link, bytes) in std::mem::take(&mut net.inflight) {
//!         if let Some(&(to, peer_link)) = net.pairs.get(&(from, link)) {
//!             hosts[to].node.handle_link_bytes(peer_link, &bytes, now);
//!             act(&mut hosts, to, &mut net, now);
//!         }
//!     }
//! }
//! // The OK came out after the persist that made the slots durable.
//! assert_eq!(hosts[0].replies, vec![(RequestId(1), Reply::ok())]);
//! assert!(String::from_utf8_lossy(&hosts[0].disk).contains("0-16383"));
//!
//! // Routing on host 1: every slot is host 0's, so a GET is redirected there.
//! let mut client = ClientState::new(false, false);
//! match hosts[1].node.dispatch_client_command(&mut client, &["GET", "key"], &NoKeys) {
//!     Dispatch::Reject(e) => {
//!         let text = String::from_utf8(e.to_resp()).unwrap();
//!         assert!(text.starts_with("-MOVED 12539 127.0.0.1:7000"), "{text}");
//!     }
//!     _ => panic!("host 1 serves no slot"),
//! }
//! // ... and served on host 0.
//! let d = hosts[0].node.dispatch_client_command(&mut client, &["GET", "key"], &NoKeys);
//! assert!(matches!(d, Dispatch::Execute { .. }));
//! ```
//!
//! `examples/minimal-host` in the repository is a complete host over sockets and a file.
//!
//! Failover readiness, the quorum check and health are `&self` queries:
//! [`ClusterNode::readiness`], [`ClusterNode::quorum_check`], [`ClusterNode::health`],
//! [`ClusterNode::shard_readiness`]. [`ClusterNode::invariants`] checks the engine's own
//! invariants (the simulator calls it after every step).
//!
//! References name the Valkey source functions (`src/cluster_legacy.c` unless said
//! otherwise) and the Valkey cluster specification (`topics/cluster-spec.md`) sections
//! whose behaviour each item follows.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod checks;
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
mod step;

pub use checks::InvariantViolation;
pub use config::{
    Capabilities, ClusterConfig, ConfigError, PreferredEndpoint, BUS_PORT_OFFSET,
    MAX_PORT_WITH_DEFAULT_BUS_PORT,
};
pub use error::NodeError;
pub use exec::{error_reply, CommandOutcome, CommandRequest};
pub use keys::{EmptyKeyspace, SlotKeys, SlotUsage};
pub use migrate::MSG_SYNCSLOTS_NO_CONN;
pub use node::ClusterNode;
pub use output::{LinkEvent, Notice, Output, RequestId};
pub use stats::MessageStats;

/// Reply to `CLUSTER REPLICATE` on a node whose host declared no replication
/// ([`Capabilities::replication`]).
pub const MSG_NO_REPLICATION: &str = "ERR This node's host does not support replication";
/// Reply to `CLUSTER MIGRATESLOTS` and `CLUSTER SYNCSLOTS` on a node whose host declared no
/// slot migration data plane ([`Capabilities::slot_migration`]).
pub const MSG_NO_SLOT_MIGRATION: &str =
    "ERR This node's host does not support atomic slot migration";

pub use ferrocluster_bus as bus;
pub use ferrocluster_bus::DecodeError;
pub use ferrocluster_command as command;
pub use ferrocluster_command::{
    lookup, ClientState, ClusterCommand, CommandSpec, CommandTable, Dispatch, ErrorReply,
    FailoverMode, KeyPresence, NoKeys, QueuedCommand, Route, RouteError,
};
pub use ferrocluster_epoch as epoch;
pub use ferrocluster_epoch::{Epoch, EpochEvent, ReplLink, ReplicationState};
pub use ferrocluster_gossip as gossip;
pub use ferrocluster_gossip::{LinkId, NodeAddress};
pub use ferrocluster_health as health;
pub use ferrocluster_health::{Health, QuorumCheck, QuorumVerdict, Readiness, ShardReadiness};
pub use ferrocluster_migration as migration;
pub use ferrocluster_migration::{
    AuthReply, ConnId, FinishState, Job, JobKind, JobName, JobState, MigrationInput,
    MigrationRequest, Migrations, Origin, SnapshotResult, SyncSlots,
};
pub use ferrocluster_slot as slot;
pub use ferrocluster_slot::{key_hash_slot, Slot, SlotRange, SlotSet};
pub use ferrocluster_topology as topology;
pub use ferrocluster_topology::{
    AnnounceError, ConfError, ConfWarning, ConfigEpoch, CurrentEpoch, Millis, Node, NodeFlags,
    NodeId, Reply, ShardId, Topology,
};

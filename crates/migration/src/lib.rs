//! Slot migration for a Valkey Cluster node (facts sheet `slot-migration-and-kvstore.md`,
//! parts A and C; Valkey `src/cluster_migrateslots.c` @ 008734ee).
//!
//! * [`Migrations`]: the Sans-IO atomic slot migration (ASM) engine of Valkey 9: the
//!   `CLUSTER MIGRATESLOTS` / `GETSLOTMIGRATIONS` / `CANCELSLOTMIGRATIONS` / `SYNCSLOTS`
//!   subcommands ([`Migrations::handle_cluster_command`]), export and import job state
//!   machines with Valkey's states ([`JobState`]), timeouts, write pause, rollback on
//!   failure, and the bounded job log.
//! * [`legacy`]: the effects of `CLUSTER SETSLOT` on the [`ferrocluster_topology::Topology`]
//!   and the SETSLOT/ASM mutual exclusion.
//!
//! DUMP/RESTORE payloads (the data of legacy migration) are the RDB format of the
//! `ferrocluster-rdb` crate; the ASM snapshot is Valkey 9's AOF-rewrite commands
//! (`ferrocluster-dataplane`'s `aof` and `asm`).
//!
//! # Host loop
//!
//! The node owns one [`Migrations`] next to its [`ferrocluster_topology::Topology`] and:
//!
//! 1. dispatches `CLUSTER <sub>` to [`Migrations::handle_cluster_command`] when
//!    [`is_migration_subcommand`] holds, with the [`Origin`] of the request (a connection,
//!    the replication stream from its primary, or the AOF loader), and sends back the
//!    returned reply (if any);
//! 2. reports data-plane events, each a [`MigrationInput`] for [`Migrations::handle_input`]
//!    (the data plane, `ferrocluster-dataplane`, produces most of them from the bytes):
//!    [`Migrations::handle_connected`] /
//!    [`Migrations::handle_connect_failed`], [`Migrations::handle_auth_reply`],
//!    [`Migrations::handle_establish_reply`], [`Migrations::handle_snapshot_done`],
//!    [`Migrations::handle_link_backlog`], [`Migrations::handle_link_closed`],
//!    [`Migrations::handle_output_buffer_limit`], [`Migrations::handle_import_data`],
//!    [`Migrations::handle_import_oom`], [`Migrations::handle_import_apply_error`],
//!    [`Migrations::handle_child_process`], [`Migrations::handle_flush`];
//! 3. after every topology change (slot owners, roles) calls
//!    [`Migrations::handle_topology_changed`]; on promotion
//!    [`Migrations::handle_promoted`]; on a replica's full sync
//!    [`Migrations::handle_full_sync`]; around loading [`Migrations::handle_before_load`],
//!    [`Migrations::handle_loaded_slot_import`], [`Migrations::handle_after_load`];
//! 4. calls [`Migrations::handle_timeout`] at [`Migrations::poll_timeout`] (it returns
//!    `now` when deferred work — a takeover or a cleanup, Valkey's before-sleep — waits);
//! 5. drains [`Migrations::poll_output`] in order after every input and acts on each
//!    [`MigrationOutput`]: pause, take ownership and state changes itself, and each
//!    [`MigrationRequest`] (open/close connections, write SYNCSLOTS messages, snapshot,
//!    stream, hide/reveal/drop slots, propagate to replicas) through the host's data plane
//!    (a node hands these on to its host as they are).
//!
//! ```
//! use ferrocluster_migration::{
//!     ConnId, MigrationConfig, MigrationOutput, MigrationRequest, Migrations, Origin,
//! };
//! use ferrocluster_topology::{Millis, Node, NodeFlags, NodeId, ShardId, Topology};
//! use ferrocluster_slot::Slot;
//! use rand_core::SeedableRng;
//!
//! let id = |c: char| NodeId::parse(&c.to_string().repeat(40)).unwrap();
//! let shard = ShardId::parse(&"s".repeat(40)).unwrap();
//! let mut me = Node::new(id('a'), shard, Millis(0));
//! me.flags = NodeFlags::PRIMARY;
//! let mut topo = Topology::new(me);
//! let mut b = Node::new(id('b'), shard, Millis(0));
//! b.flags = NodeFlags::PRIMARY;
//! b.ip = Some([127, 0, 0, 1].into()); // the export connects to its client port
//! b.port = 7001;
//! topo.add_node(b).unwrap();
//! topo.set_slot_owner(Slot::new(7).unwrap(), Some(id('a'))).unwrap();
//!
//! let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
//! let mut m = Migrations::new(MigrationConfig::default(), Millis(1_000));
//! let argv = ["CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", "7", "7", "NODE", &"b".repeat(40)];
//! let reply = m.handle_cluster_command(&topo, Origin::Conn(ConnId(1)), &argv, &mut rng, Millis(1_000));
//! assert_eq!(reply, Some(ferrocluster_topology::Reply::ok()));
//! assert!(matches!(
//!     m.poll_output(),
//!     Some(MigrationOutput::Request(MigrationRequest::Connect { port: 7001, .. }))
//! ));
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod args;
mod commands;
mod config;
mod error;
mod events;
mod export;
mod input;
mod job;
pub mod legacy;
mod manager;
mod message;
mod output;
mod types;

pub use commands::{is_migration_subcommand, SUBCOMMANDS};
pub use config::{MigrationConfig, FAILOVER_GRANT_PAUSE_MS};
pub use error::MigrationError;
pub use export::{AuthReply, SnapshotResult};
pub use input::MigrationInput;
pub use job::Job;
pub use manager::{
    Migrations, MSG_FLUSHED, MSG_LOST_SOURCE, MSG_LOST_TARGET, MSG_TIMED_OUT, MSG_UNEXPECTED,
};
pub use message::{FinishState, SyncSlots};
pub use output::{MigrationOutput, MigrationRequest};
pub use types::{ConnId, JobKind, JobName, JobState, Origin, JOB_NAME_LEN};

//! The data a Valkey Cluster node moves, Sans-IO: bytes and time in, outputs polled in order
//! like `ClusterNode`:
//!
//! * [`Replication`]: the replication protocol of Valkey 9 / Redis 7.0, both sides (below);
//! * [`AsmPlane`] ([`asm`]): the data connections of atomic slot migration (Valkey 9
//!   `CLUSTER MIGRATESLOTS`), both sides: the slot snapshot in Valkey's AOF-rewrite form
//!   ([`aof`]), the held and streamed writes, the SYNCSLOTS messages, the import stream into
//!   commands to apply, and the rule a host follows for a correct snapshot under writes;
//! * [`legacy`]: the MIGRATE client and the RESTORE / RESTORE-ASKING checks of legacy slot
//!   migration (`redis-cli --cluster reshard`), with DUMP payloads from `ferrocluster-rdb`.
//!
//! The control plane of slot migration (job states, timeouts, which message when) is
//! `ferrocluster-migration`, inside the cluster node; this crate moves the bytes it asks for.
//! The RDB format itself is `ferrocluster-rdb`.
//!
//! # Replication
//!
//! Facts: Valkey `src/replication.c`
//! (`syncCommand`, `primaryTryPartialResynchronization`, `replconfCommand`,
//! `replicationFeedReplicas`, `syncWithPrimary`, `replicaTryPartialResynchronization`,
//! `readSyncBulkPayload`, `replicationCron`, `waitCommand`, `shiftReplicationId`) and the
//! real servers' bytes captured in `tests/vectors/` (by `tests/vectors/capture.py`).
//!
//! One [`Replication`] per node holds the replication history (replid, replid2 with
//! `second_repl_offset`, the offset, the backlog) and both sides:
//! * the primary side serves replicas: REPLCONF, `PSYNC <replid> <offset>` answered with
//!   `+CONTINUE [<replid>]` from the backlog or a full sync (`+FULLRESYNC <replid> <offset>`,
//!   then the RDB the host produces, framed `$<len>` from disk or `$EOF:<mark>` diskless,
//!   then the stream kept since the snapshot's offset), the write stream (SELECT added when
//!   the database changes), `ping` every `repl-ping-replica-period`, ACKs and WAIT,
//!   `repl-timeout`, output-buffer limits;
//! * the replica side follows a primary: the handshake (PING, AUTH, REPLCONF listening-port /
//!   ip-address / capa eof capa psync2 / version, PSYNC with the cached replid and offset or
//!   `? -1`), the RDB in both framings handed to the host as it arrives, the command stream
//!   parsed into argv (SELECT, PING, REPLCONF GETACK and MULTI/EXEC handled here), `REPLCONF
//!   ACK <offset>` every second and on GETACK, `repl-timeout`, reconnects with a partial resync.
//!
//! A replica serves its own replicas too: it proxies its primary's stream byte for byte (same
//! replid and offsets, as Valkey), which is what lets a promoted replica's siblings resync
//! partially after a failover ([`Replication::become_primary`] shifts the replid and keeps the
//! backlog; [`Replication::replicate_from`] keeps the history for a partial resync).
//!
//! The RDB format itself is not here: the host produces snapshots and decodes received RDBs
//! (with the `rdb` crate's writer and streaming decoder).
//!
//! ## The host loop
//!
//! 1. Build it: [`Replication::new`] with a [`ReplicationConfig`], a seed, the [`Role`], and
//!    the [`Restored`] replication fields of the RDB it loaded, if any.
//! 2. Drain [`Replication::poll_output`] until `None`, acting on each [`Output`] in order:
//!    * `ToReplica` / `CloseReplica`: write on / close a replica's client connection;
//!    * `StartSnapshot`: produce an RDB of the data set as of now, with the given aux
//!      fields; report it back (`handle_snapshot_ready` for a file, `handle_snapshot_chunk`,
//!      `handle_snapshot_end`, or `handle_snapshot_failed`);
//!    * `Connect` / `ToPrimary` / `CloseUpstream`: the connection to our primary;
//!    * `RdbBegin` / `RdbChunk` / `RdbEnd` / `RdbAbort`: the RDB of a full sync, to load (keep
//!      the old data set until `RdbEnd`);
//!    * `Apply` / `ApplyTransaction`: commands from the primary to execute (no replies);
//!    * `WaitDone`: the reply of a blocked WAIT;
//!    * `Event`: log or count.
//! 3. Feed what happened, with the current time:
//!    * a client's `REPLCONF` / `PSYNC` / `SYNC` → [`Replication::handle_command`]; `WAIT` →
//!      [`Replication::handle_wait`]; a closed client → [`Replication::handle_conn_closed`];
//!    * every write the node executes as a primary → [`Replication::feed`] (its return is the
//!      client's offset for WAIT);
//!    * the primary link: [`Replication::handle_upstream_connected`],
//!      [`Replication::handle_upstream_connect_failed`], [`Replication::handle_upstream_bytes`],
//!      [`Replication::handle_upstream_closed`], [`Replication::handle_load_failed`];
//!    * timers: [`Replication::handle_timeout`] at [`Replication::poll_timeout`];
//!    * role changes (from the cluster node): [`Replication::replicate_from`],
//!      [`Replication::become_primary`]; write pauses: [`Replication::handle_pause`];
//!    * after every input, hand [`Replication::replication_state`] to the cluster node
//!      (`ClusterNode::handle_replication`).
//! 4. Go to 2. Queries: [`Replication::info`] (`INFO replication`), [`Replication::role_reply`]
//!    (`ROLE`), [`Replication::save_info`] (aux fields for an RDB saved for persistence).
//!
//! ```
//! use ferrocluster_dataplane::{ConnId, Millis, Output, Replication, ReplicationConfig, Role};
//!
//! let now = Millis(1_000);
//! let cfg = ReplicationConfig { diskless_sync: false, ..ReplicationConfig::default() };
//! let mut p = Replication::new(cfg, 1, Role::Primary, None, now).unwrap();
//! let replica = ConnId(7);
//! p.handle_command(replica, None, &["REPLCONF", "capa", "eof", "capa", "psync2"], now).unwrap();
//! p.handle_command(replica, None, &["PSYNC", "?", "-1"], now).unwrap();
//! let (mut snapshot, mut sent) = (None, Vec::new());
//! while let Some(o) = p.poll_output() {
//!     match o {
//!         Output::StartSnapshot { id, .. } => snapshot = Some(id),
//!         Output::ToReplica { bytes, .. } => sent.extend_from_slice(&bytes),
//!         _ => {}
//!     }
//! }
//! let id = snapshot.expect("a disk snapshot starts at once");
//! p.feed(0, &["SET", "k", "v"], now).unwrap(); // kept for the replica until its RDB is sent
//! let rdb = b"REDIS0010...";
//! p.handle_snapshot_ready(id, rdb.len() as u64, now).unwrap();
//! p.handle_snapshot_chunk(id, rdb, now).unwrap();
//! p.handle_snapshot_end(id, now).unwrap();
//! while let Some(o) = p.poll_output() {
//!     if let Output::ToReplica { bytes, .. } = o {
//!         sent.extend_from_slice(&bytes);
//!     }
//! }
//! let text = String::from_utf8_lossy(&sent);
//! assert!(text.starts_with(&format!("+FULLRESYNC {} 0\r\n$12\r\nREDIS0010...", p.replid())));
//! assert!(text.ends_with("*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"));
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod aof;
pub mod asm;
mod backlog;
mod clock;
mod config;
mod error;
mod info;
pub mod legacy;
mod output;
mod primary;
mod replica;
mod replication;
mod replid;
pub mod resp;

pub use asm::{
    AsmConfig, AsmError, AsmEvent, AsmOutput, AsmPlane, KeyVisitor, SlotSource, SnapshotMode,
    SnapshotProgress,
};
pub use backlog::Backlog;
pub use config::{OutputBufferLimit, ReplicationConfig};
pub use error::{CommandError, HostError, StreamError, StreamErrorKind};
pub use ferrocluster_epoch::{ReplLink, ReplicationState};
pub use ferrocluster_migration::ConnId;
pub use ferrocluster_topology::{Millis, Reply};
pub use info::{ReplicaInfo, ReplicationInfo, UpstreamInfo};
pub use output::{
    CloseReason, Event, LinkDownReason, Output, SaveInfo, SnapshotId, SnapshotTarget,
    StreamCommand, UpstreamId,
};
pub use primary::{parse_version, CommandOutcome, SETSLOT_REPLICA_MIN_VERSION};
pub use replication::{Replication, Restored, Role};
pub use replid::ReplId;

//! What the engine asks for, drained in order with [`crate::Migrations::poll_output`]: work of
//! the cluster node that owns the engine ([`MigrationOutput`]: the take-over, the write pause,
//! job state changes) and work of the host's data plane ([`MigrationRequest`], which the node
//! hands on to its host unchanged).

use crate::message::SyncSlots;
use crate::types::{ConnId, JobKind, JobName, JobState};
use ferrocluster_slot::{SlotRange, SlotSet};
use ferrocluster_topology::{Millis, NodeId};
use std::net::IpAddr;

/// One output of the engine. The order of outputs is the order to act in. "All databases"
/// applies wherever slots are named (sheet A.15).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MigrationOutput {
    /// Work for the host's data plane (see [`MigrationRequest`]).
    Request(MigrationRequest),
    /// Source: hold (do not reject) client writes, expiry and eviction until `until` or
    /// [`MigrationOutput::UnpauseWrites`]. Valkey 9.0/9.1 pause every write of the node;
    /// `slots` names the slots whose migrations hold the pause, for a host that pauses per
    /// slot. A later `PauseWrites` replaces the earlier one.
    PauseWrites {
        /// End of the pause.
        until: Millis,
        /// The slots of the jobs holding the pause.
        slots: SlotSet,
    },
    /// Source: lift the write pause; held writes then run (and get `-MOVED` if their slot
    /// moved).
    UnpauseWrites,
    /// Target: take the slots. Bump the configEpoch without agreement (if it is 0 or not the
    /// unique maximum: currentEpoch += 1, configEpoch = currentEpoch), assign every slot to
    /// myself, save and fsync nodes.conf, and broadcast PONG to every node (sheet A.14).
    /// Followed by [`MigrationRequest::RevealSlots`].
    TakeOwnership {
        /// The import job.
        job: JobName,
        /// Its slots.
        slots: SlotSet,
    },
    /// A job changed state (for logs and metrics; nothing to do).
    StateChanged {
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

impl From<MigrationRequest> for MigrationOutput {
    fn from(r: MigrationRequest) -> MigrationOutput {
        MigrationOutput::Request(r)
    }
}

/// Data-plane work of an atomic slot migration, for the host that moves the bytes
/// (`ferrocluster-dataplane`'s ASM links do it in Valkey 9's wire format). Exhaustive: every
/// variant is a duty. Results come back as [`crate::MigrationInput`]s; SYNCSLOTS messages the
/// peer writes back are commands of that connection (`Origin::Conn`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MigrationRequest {
    /// Source: open a data connection to the target primary's client port (`tls_port` when
    /// `tls-replication yes`) as a replication-type connection for `job`; report it with
    /// [`crate::MigrationInput::Connected`] or [`crate::MigrationInput::ConnectFailed`].
    Connect {
        /// The export job.
        job: JobName,
        /// The target primary.
        target: NodeId,
        /// Its IP as myself knows it.
        ip: IpAddr,
        /// Its plaintext client port (0 = none).
        port: u16,
        /// Its TLS client port (0 = none).
        tls_port: u16,
    },
    /// Source: write `AUTH <primaryuser> <primaryauth>` on `conn` and report the reply with
    /// [`crate::MigrationInput::AuthReply`].
    SendAuth {
        /// The export job.
        job: JobName,
        /// Its connection.
        conn: ConnId,
    },
    /// Write this SYNCSLOTS message on `conn` (RESP, see [`SyncSlots::to_resp`]). For an
    /// ESTABLISH, read one CRLF-terminated reply line and report it with
    /// [`crate::MigrationInput::EstablishReply`]. On the target these are written although
    /// the link's replies are off.
    Send {
        /// The data connection.
        conn: ConnId,
        /// The message.
        message: SyncSlots,
    },
    /// Target: `conn` is now the import link of `job`: switch its replies off, apply what it
    /// sends like a primary link (commands for `slots` are executed, not redirected) and
    /// propagate the applied writes to replicas and AOF; report OOM / error replies /
    /// activity with [`crate::MigrationInput::ImportOom`],
    /// [`crate::MigrationInput::ImportApplyError`], [`crate::MigrationInput::ImportData`].
    AcceptImportLink {
        /// The import job.
        job: JobName,
        /// The connection that sent ESTABLISH.
        conn: ConnId,
        /// The job's slots.
        slots: SlotSet,
    },
    /// Source: write a snapshot of `ranges` (every database, each range, each slot; as
    /// AOF-rewrite style write commands) on `conn`, followed by `CLUSTER SYNCSLOTS
    /// SNAPSHOT-EOF`. From now on every write to these slots is queued for `conn` (with a
    /// `SELECT` on database change; keyless commands and MULTI/EXEC dropped) but NOT flushed
    /// until [`MigrationRequest::BeginStreaming`]. Report the end with
    /// [`crate::MigrationInput::SnapshotDone`] (or
    /// [`crate::MigrationInput::SnapshotStartFailed`]).
    StartSnapshot {
        /// The export job.
        job: JobName,
        /// Its connection.
        conn: ConnId,
        /// The ranges to serialize.
        ranges: Vec<SlotRange>,
    },
    /// Source: stop the running snapshot of `job` (the job ended); no `SnapshotDone` is
    /// expected for it any more.
    AbortSnapshot {
        /// The export job.
        job: JobName,
    },
    /// Source: the whole snapshot has been relayed; flush the writes queued for `conn` after
    /// it and keep streaming writes to the job's slots.
    BeginStreaming {
        /// The export job.
        job: JobName,
        /// Its connection.
        conn: ConnId,
    },
    /// Source: report how many bytes are still queued towards the target on `conn` with
    /// [`crate::MigrationInput::LinkBacklog`].
    QueryBacklog {
        /// The export job.
        job: JobName,
        /// Its connection.
        conn: ConnId,
    },
    /// Target (primary and replicas): mark these slots importing in every database's
    /// keyspace: their keys are staged and hidden from DBSIZE/KEYS/SCAN/RANDOMKEY, never
    /// evicted or expired (sheet A.12).
    HideSlots {
        /// The slots.
        slots: SlotSet,
    },
    /// Target: clear the importing mark of these slots (keys become visible, or were dropped).
    RevealSlots {
        /// The slots.
        slots: SlotSet,
    },
    /// Target primary: delete every key in these slots in every database, propagating the
    /// deletions to replicas and AOF (before any FINISH that follows).
    DropSlotKeys {
        /// The slots.
        slots: SlotSet,
    },
    /// Propagate this SYNCSLOTS ESTABLISH / FINISH to this node's replicas and AOF, in order
    /// with the data writes (replicas feed it back with `Origin::Primary`).
    Propagate {
        /// The message.
        message: SyncSlots,
    },
    /// Close this data connection (the job ended or was reset); no
    /// [`crate::MigrationInput::LinkClosed`] is needed for it.
    Close {
        /// The connection.
        conn: ConnId,
    },
}

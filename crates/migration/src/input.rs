//! [`MigrationInput`]: the data-plane facts of a slot migration as one type, so the data plane
//! that learns them (`ferrocluster-dataplane`'s ASM links) and the host that owns the sockets
//! hand them to the engine the same way ([`Migrations::handle_input`]).

use crate::export::{AuthReply, SnapshotResult};
use crate::manager::Migrations;
use crate::types::{ConnId, JobName};
use ferrocluster_slot::SlotRange;
use ferrocluster_topology::{Millis, Topology};

/// A data-plane fact of a slot migration (sheet A.7–A.17). Each maps to one
/// `Migrations::handle_*` input; facts about unknown jobs or connections are ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MigrationInput {
    /// Source: the connection asked for by [`crate::MigrationOutput::Connect`] is up and is
    /// `conn` from now on.
    Connected {
        /// The export job.
        job: JobName,
        /// The host's handle of the new data connection.
        conn: ConnId,
    },
    /// Source: that connection could not be made; the job fails with `Unable to connect to
    /// target node: <error>` (e.g. `Connection refused`).
    ConnectFailed {
        /// The export job.
        job: JobName,
        /// The connect error text.
        error: String,
    },
    /// Source: the reply to the AUTH written for [`crate::MigrationOutput::SendAuth`].
    AuthReply {
        /// The export job.
        job: JobName,
        /// What came back.
        reply: AuthReply,
    },
    /// Source: the one CRLF-terminated reply line to `SYNCSLOTS ESTABLISH`, as read
    /// (`+OK\r\n`, or an error line that fails the job).
    EstablishReply {
        /// The export job.
        job: JobName,
        /// The line including `\r\n`.
        line: Vec<u8>,
    },
    /// Source: the ESTABLISH reply did not fit one I/O buffer (16 KiB in Valkey).
    EstablishReplyTooLarge {
        /// The export job.
        job: JobName,
    },
    /// Source: the snapshot asked for by [`crate::MigrationOutput::StartSnapshot`] could not
    /// be started (fork failed): `Failed to start snapshot`.
    SnapshotStartFailed {
        /// The export job.
        job: JobName,
    },
    /// Source: the snapshot producer ended (after writing `SYNCSLOTS SNAPSHOT-EOF` when it
    /// succeeded).
    SnapshotDone {
        /// The export job.
        job: JobName,
        /// How it ended.
        result: SnapshotResult,
    },
    /// Source: bytes still queued towards the target on the job's connection (after
    /// [`crate::MigrationOutput::QueryBacklog`], or whenever the host likes).
    LinkBacklog {
        /// The export job.
        job: JobName,
        /// Queued bytes.
        bytes: u64,
    },
    /// Source: the job's connection passed `client-output-buffer-limit replica`; the engine
    /// asks to close it and the job fails.
    OutputBufferLimit {
        /// The export job.
        job: JobName,
    },
    /// Either side: a data connection closed (peer, I/O error, client kill, protocol error).
    LinkClosed {
        /// The connection.
        conn: ConnId,
    },
    /// Target: a command (data or SYNCSLOTS) arrived on an import connection (refreshes the
    /// `repl-timeout` inactivity timer).
    ImportData {
        /// The import connection.
        conn: ConnId,
    },
    /// Target: applying a command from the import connection hit OOM.
    ImportOom {
        /// The import connection.
        conn: ConnId,
    },
    /// Target: applying a command from the import connection produced an error reply.
    ImportApplyError {
        /// The import connection.
        conn: ConnId,
    },
    /// Another child process (BGSAVE, AOF rewrite) started (`true`) or ended (`false`);
    /// snapshots wait while one runs.
    ChildProcess {
        /// Whether one runs now.
        active: bool,
    },
    /// FLUSHDB / FLUSHALL ran: every in-progress job fails with `Data was flushed`.
    Flush,
    /// This replica did a full resynchronization with its primary.
    FullSync,
    /// An RDB is about to be loaded.
    BeforeLoad,
    /// The loader met a slot-import section (RDB opcode 243): a tracking job is recreated.
    LoadedSlotImport {
        /// The job name.
        name: JobName,
        /// Its slot ranges as loaded.
        ranges: Vec<SlotRange>,
    },
    /// Loading (RDB or AOF) finished.
    AfterLoad,
}

impl Migrations {
    /// Hands one data-plane fact to the matching `handle_*` input.
    pub fn handle_input(&mut self, topo: &Topology, input: MigrationInput, now: Millis) {
        match input {
            MigrationInput::Connected { job, conn } => self.handle_connected(topo, &job, conn, now),
            MigrationInput::ConnectFailed { job, error } => {
                self.handle_connect_failed(topo, &job, &error, now)
            }
            MigrationInput::AuthReply { job, reply } => {
                self.handle_auth_reply(topo, &job, reply, now)
            }
            MigrationInput::EstablishReply { job, line } => {
                self.handle_establish_reply(topo, &job, &line, now)
            }
            MigrationInput::EstablishReplyTooLarge { job } => {
                self.handle_establish_reply_too_large(topo, &job, now)
            }
            MigrationInput::SnapshotStartFailed { job } => {
                self.handle_snapshot_start_failed(topo, &job, now)
            }
            MigrationInput::SnapshotDone { job, result } => {
                self.handle_snapshot_done(topo, &job, result, now)
            }
            MigrationInput::LinkBacklog { job, bytes } => {
                self.handle_link_backlog(topo, &job, bytes, now)
            }
            MigrationInput::OutputBufferLimit { job } => {
                self.handle_output_buffer_limit(topo, &job, now)
            }
            MigrationInput::LinkClosed { conn } => self.handle_link_closed(topo, conn, now),
            MigrationInput::ImportData { conn } => self.handle_import_data(conn, now),
            MigrationInput::ImportOom { conn } => self.handle_import_oom(topo, conn, now),
            MigrationInput::ImportApplyError { conn } => {
                self.handle_import_apply_error(topo, conn, now)
            }
            MigrationInput::ChildProcess { active } => self.handle_child_process(topo, active, now),
            MigrationInput::Flush => self.handle_flush(topo, now),
            MigrationInput::FullSync => self.handle_full_sync(topo, now),
            MigrationInput::BeforeLoad => self.handle_before_load(topo, now),
            MigrationInput::LoadedSlotImport { name, ranges } => {
                self.handle_loaded_slot_import(name, ranges, now)
            }
            MigrationInput::AfterLoad => self.handle_after_load(topo, now),
        }
    }
}

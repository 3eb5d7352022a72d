//! Atomic slot migration (ASM, Valkey 9) wired into the node: the node owns one
//! [`Migrations`] engine (`ferrocluster-migration`), dispatches the four ASM CLUSTER
//! subcommands to it, forwards the host's data-plane facts ([`MigrationInput`]), tells it
//! about topology changes and promotions, drives its timers, carries out the take-over
//! itself (slot-migration sheet A.14) and turns the rest of its outputs into
//! [`Event::Migration`] requests for the host.

use crate::exec::{CommandOutcome, CommandRequest};
use crate::{ClusterNode, Event, Output};
use ferrocluster_migration::{
    AuthReply, ConnId, JobKind, JobName, JobState, MigrationOutput, Migrations, Origin,
    SnapshotResult, SyncSlots,
};
use ferrocluster_slot::{SlotRange, SlotSet};
use ferrocluster_topology::{Millis, NodeId, Reply};
use std::net::IpAddr;

/// How often the node re-runs the engine's outputs after a take-over changed the topology
/// within one step (a take-over can finish other jobs, which cannot take over again: two
/// rounds suffice; the bound only guards against a bug looping).
const MAX_MIGRATION_ROUNDS: usize = 8;

/// Reply to a SYNCSLOTS that came neither from a connection the host identified
/// ([`CommandRequest::conn`]) nor from the primary / AOF: the node cannot bind it to a
/// migration link.
pub const MSG_SYNCSLOTS_NO_CONN: &str =
    "ERR CLUSTER SYNCSLOTS is not supported on a connection the host did not identify";

/// A data-plane fact the host reports with [`ClusterNode::handle_migration`] (slot-migration
/// sheet A.7–A.17). Each maps to one `ferrocluster_migration::Migrations::handle_*` input;
/// facts about unknown jobs or connections are ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MigrationInput {
    /// Source: the connection asked for by [`MigrationRequest::Connect`] is up and is
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
    /// Source: the reply to the AUTH written for [`MigrationRequest::SendAuth`].
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
    /// Source: the snapshot asked for by [`MigrationRequest::StartSnapshot`] could not be
    /// started (fork failed): `Failed to start snapshot`.
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
    /// [`MigrationRequest::QueryBacklog`], or whenever the host likes).
    LinkBacklog {
        /// The export job.
        job: JobName,
        /// Queued bytes.
        bytes: u64,
    },
    /// Source: the job's connection passed `client-output-buffer-limit replica`; the node
    /// asks to close it and the job fails.
    OutputBufferLimit {
        /// The export job.
        job: JobName,
    },
    /// Either side: a data connection closed (peer, I/O error, client kill).
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

/// What the slot migration engine asks the host to do, delivered in order as
/// [`Event::Migration`] (slot-migration sheet A.7–A.16). "All databases" applies wherever
/// slots are named. The write pause of an export is not here: it is merged with the manual
/// failover pause into [`Event::PauseWrites`] / [`Event::UnpauseWrites`]; the take-over is
/// done by the node itself.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MigrationRequest {
    /// Source: open the job's data connection to the target's **client** port (`tls_port`
    /// when `tls-replication yes`; not the bus port) as a replication-type connection, then
    /// report [`MigrationInput::Connected`] or [`MigrationInput::ConnectFailed`].
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
    /// Source: write `AUTH <primaryuser> <primaryauth>` on `conn`, report the reply with
    /// [`MigrationInput::AuthReply`].
    SendAuth {
        /// The export job.
        job: JobName,
        /// Its connection.
        conn: ConnId,
    },
    /// Write this `CLUSTER SYNCSLOTS` message on `conn` ([`SyncSlots::to_resp`] gives the
    /// bytes). After an ESTABLISH read one reply line and report it with
    /// [`MigrationInput::EstablishReply`]. On the target these are written although the
    /// connection's replies are off. Messages the peer writes back arrive as commands: feed
    /// them to [`ClusterNode::migration_command`] with `Origin::Conn(conn)`.
    Send {
        /// The data connection.
        conn: ConnId,
        /// The message.
        message: SyncSlots,
    },
    /// Target: `conn` is now the import link of `job`: switch its replies off, apply what it
    /// sends like a primary link (commands for `slots` are executed, not redirected),
    /// propagate the applied writes to replicas and AOF, and report
    /// [`MigrationInput::ImportData`] / `ImportOom` / `ImportApplyError`.
    AcceptImportLink {
        /// The import job.
        job: JobName,
        /// The connection that sent ESTABLISH.
        conn: ConnId,
        /// The job's slots.
        slots: SlotSet,
    },
    /// Source: write a snapshot of `ranges` (every database, each range, each slot, as
    /// AOF-rewrite style write commands) on `conn`, then `CLUSTER SYNCSLOTS SNAPSHOT-EOF`.
    /// From now on queue every write to these slots for `conn` (with `SELECT` on database
    /// change; keyless commands and MULTI/EXEC dropped) but do not flush it before
    /// [`MigrationRequest::BeginStreaming`]. Report the end with
    /// [`MigrationInput::SnapshotDone`] or [`MigrationInput::SnapshotStartFailed`].
    StartSnapshot {
        /// The export job.
        job: JobName,
        /// Its connection.
        conn: ConnId,
        /// The ranges to serialize.
        ranges: Vec<SlotRange>,
    },
    /// Source: stop the running snapshot of `job`; no `SnapshotDone` is expected for it.
    AbortSnapshot {
        /// The export job.
        job: JobName,
    },
    /// Source: the snapshot has been relayed; flush the writes queued for `conn` after it
    /// and keep streaming writes to the job's slots.
    BeginStreaming {
        /// The export job.
        job: JobName,
        /// Its connection.
        conn: ConnId,
    },
    /// Source: report the bytes still queued towards the target on `conn` with
    /// [`MigrationInput::LinkBacklog`].
    QueryBacklog {
        /// The export job.
        job: JobName,
        /// Its connection.
        conn: ConnId,
    },
    /// Target (primary and replicas): mark these slots importing in every database: their
    /// keys are staged, hidden from DBSIZE/KEYS/SCAN/RANDOMKEY, never evicted or expired.
    HideSlots {
        /// The slots.
        slots: SlotSet,
    },
    /// Target: clear the importing mark of these slots (their keys become visible, or were
    /// dropped).
    RevealSlots {
        /// The slots.
        slots: SlotSet,
    },
    /// Target primary: delete every key (staged ones included) in these slots in every
    /// database, propagating the deletions to replicas and AOF before what follows.
    DropSlotKeys {
        /// The slots.
        slots: SlotSet,
    },
    /// Propagate this `SYNCSLOTS ESTABLISH` / `FINISH` to myself's replicas and AOF, in order
    /// with the data writes (replicas feed it back with `Origin::Primary`).
    Propagate {
        /// The message.
        message: SyncSlots,
    },
    /// Close this data connection (the job ended or was reset); no
    /// [`MigrationInput::LinkClosed`] is needed for it.
    Close {
        /// The connection.
        conn: ConnId,
    },
    /// A job changed state (logs and metrics; nothing to do).
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

impl ClusterNode {
    /// The slot migration engine (read only): its jobs (newest first), which slots import or
    /// export, the staged (hidden) slots.
    pub fn migrations(&self) -> &Migrations {
        &self.migrations
    }

    /// Reports a data-plane fact of a slot migration (see [`MigrationInput`]). Effects come
    /// out of [`ClusterNode::poll_output`] as usual.
    pub fn handle_migration(&mut self, input: MigrationInput, now: Millis) {
        let now = self.clamp(now);
        let (m, t) = (&mut self.migrations, &self.topo);
        match input {
            MigrationInput::Connected { job, conn } => m.handle_connected(t, &job, conn, now),
            MigrationInput::ConnectFailed { job, error } => {
                m.handle_connect_failed(t, &job, &error, now)
            }
            MigrationInput::AuthReply { job, reply } => m.handle_auth_reply(t, &job, reply, now),
            MigrationInput::EstablishReply { job, line } => {
                m.handle_establish_reply(t, &job, &line, now)
            }
            MigrationInput::EstablishReplyTooLarge { job } => {
                m.handle_establish_reply_too_large(t, &job, now)
            }
            MigrationInput::SnapshotStartFailed { job } => {
                m.handle_snapshot_start_failed(t, &job, now)
            }
            MigrationInput::SnapshotDone { job, result } => {
                m.handle_snapshot_done(t, &job, result, now)
            }
            MigrationInput::LinkBacklog { job, bytes } => {
                m.handle_link_backlog(t, &job, bytes, now)
            }
            MigrationInput::OutputBufferLimit { job } => m.handle_output_buffer_limit(t, &job, now),
            MigrationInput::LinkClosed { conn } => m.handle_link_closed(t, conn, now),
            MigrationInput::ImportData { conn } => m.handle_import_data(conn, now),
            MigrationInput::ImportOom { conn } => m.handle_import_oom(t, conn, now),
            MigrationInput::ImportApplyError { conn } => m.handle_import_apply_error(t, conn, now),
            MigrationInput::ChildProcess { active } => m.handle_child_process(t, active, now),
            MigrationInput::Flush => m.handle_flush(t, now),
            MigrationInput::FullSync => m.handle_full_sync(t, now),
            MigrationInput::BeforeLoad => m.handle_before_load(t, now),
            MigrationInput::LoadedSlotImport { name, ranges } => {
                m.handle_loaded_slot_import(name, ranges, now)
            }
            MigrationInput::AfterLoad => m.handle_after_load(t, now),
        }
        self.finish(now);
    }

    /// Runs one ASM subcommand — `CLUSTER MIGRATESLOTS`, `GETSLOTMIGRATIONS`,
    /// `CANCELSLOTMIGRATIONS` or `SYNCSLOTS` (`argv[0]` is `CLUSTER`) — from `origin`: a
    /// client or data connection, myself's primary over replication, or the AOF loader.
    /// Returns the reply to send, or `None` where Valkey sends none (SYNCSLOTS messages on a
    /// migration link). Replies and errors have Valkey 9's texts (slot-migration sheet
    /// A.2–A.5). [`ClusterNode::cluster_command_argv`] routes these subcommands here too.
    pub fn migration_command<A: AsRef<[u8]>>(
        &mut self,
        origin: Origin,
        argv: &[A],
        now: Millis,
    ) -> Option<Reply> {
        let now = self.clamp(now);
        let reply =
            self.migrations
                .handle_cluster_command(&self.topo, origin, argv, &mut self.rng, now);
        self.finish(now);
        reply
    }

    /// The ASM subcommands through the CLUSTER executor: the origin comes from `req`
    /// (`from_aof`, then `from_primary`, then `conn`).
    pub(crate) fn exec_migration_command<A: AsRef<[u8]>>(
        &mut self,
        argv: &[A],
        req: &CommandRequest,
        now: Millis,
    ) -> CommandOutcome {
        let syncslots = argv
            .get(1)
            .is_some_and(|s| s.as_ref().eq_ignore_ascii_case(b"syncslots"));
        let origin = if req.from_aof {
            Origin::Aof
        } else if req.from_primary {
            Origin::Primary
        } else if let Some(c) = req.conn {
            Origin::Conn(c)
        } else if syncslots {
            return CommandOutcome::Reply(Reply::Error(MSG_SYNCSLOTS_NO_CONN.to_owned()));
        } else {
            // MIGRATESLOTS / GETSLOTMIGRATIONS / CANCELSLOTMIGRATIONS do not look at the
            // connection.
            Origin::Conn(ConnId(u64::MAX))
        };
        match self.migration_command(origin, argv, now) {
            Some(r) => CommandOutcome::Reply(r),
            None => CommandOutcome::NoReply,
        }
    }

    /// Whether any migration job is unfinished (only then can a topology change matter).
    pub(crate) fn migrations_active(&self) -> bool {
        self.migrations.is_any_importing() || self.migrations.is_any_exporting()
    }

    /// Runs at the start of every step end ([`ClusterNode::finish`]): tells the engine about
    /// a promotion and about topology changes, runs its due timers and deferred work
    /// (Valkey's before-sleep), and turns its outputs into node outputs.
    pub(crate) fn pump_migrations(&mut self, now: Millis) {
        if std::mem::take(&mut self.promoted) {
            self.migrations.handle_promoted(&self.topo, now);
        }
        if (self.save_pending || self.state_dirty) && self.migrations_active() {
            self.migrations.handle_topology_changed(&self.topo, now);
        }
        for _ in 0..MAX_MIGRATION_ROUNDS {
            if self.migrations.poll_timeout().is_some_and(|t| t <= now) {
                self.migrations.handle_timeout(&self.topo, now);
            }
            let mut took_over = false;
            while let Some(o) = self.migrations.poll_output() {
                took_over |= self.apply_migration_output(o, now);
            }
            if !took_over {
                break;
            }
            self.migrations.handle_topology_changed(&self.topo, now);
        }
    }

    /// Acts on one engine output; returns whether it was a take-over (the topology changed).
    fn apply_migration_output(&mut self, o: MigrationOutput, now: Millis) -> bool {
        let req = match o {
            MigrationOutput::TakeOwnership { slots, .. } => {
                self.take_ownership(&slots, now);
                return true;
            }
            MigrationOutput::PauseWrites { until, .. } => {
                self.asm_pause = Some(until);
                self.announce_pause();
                return false;
            }
            MigrationOutput::UnpauseWrites => {
                self.asm_pause = None;
                self.announce_pause();
                return false;
            }
            MigrationOutput::Connect { job, target } => {
                let addr = self.topo.node(&target).and_then(|n| {
                    let ip = n.ip?;
                    Some((ip, n.port, n.tls_port))
                });
                let Some((ip, port, tls_port)) = addr else {
                    // Valkey: the job fails when the target vanished (sheet A.7).
                    self.migrations.handle_connect_failed(
                        &self.topo,
                        &job,
                        "target node not found",
                        now,
                    );
                    return false;
                };
                MigrationRequest::Connect {
                    job,
                    target,
                    ip,
                    port,
                    tls_port,
                }
            }
            MigrationOutput::SendAuth { job, conn } => MigrationRequest::SendAuth { job, conn },
            MigrationOutput::Send { conn, message } => MigrationRequest::Send { conn, message },
            MigrationOutput::AcceptImportLink { job, conn, slots } => {
                MigrationRequest::AcceptImportLink { job, conn, slots }
            }
            MigrationOutput::StartSnapshot { job, conn, ranges } => {
                MigrationRequest::StartSnapshot { job, conn, ranges }
            }
            MigrationOutput::AbortSnapshot { job } => MigrationRequest::AbortSnapshot { job },
            MigrationOutput::BeginStreaming { job, conn } => {
                MigrationRequest::BeginStreaming { job, conn }
            }
            MigrationOutput::QueryBacklog { job, conn } => {
                MigrationRequest::QueryBacklog { job, conn }
            }
            MigrationOutput::HideSlots { slots } => MigrationRequest::HideSlots { slots },
            MigrationOutput::RevealSlots { slots } => MigrationRequest::RevealSlots { slots },
            MigrationOutput::DropSlotKeys { slots } => {
                self.slot_keys_deleted(&slots);
                MigrationRequest::DropSlotKeys { slots }
            }
            MigrationOutput::Propagate { message } => MigrationRequest::Propagate { message },
            MigrationOutput::Close { conn } => MigrationRequest::Close { conn },
            MigrationOutput::StateChanged {
                job,
                kind,
                from,
                to,
            } => MigrationRequest::StateChanged {
                job,
                kind,
                from,
                to,
            },
        };
        self.staged
            .push(Output::Event(Event::Migration(Box::new(req))));
        false
    }

    /// The import's take-over (sheet A.14, C.5): bump the configEpoch without agreement,
    /// assign every slot to myself, save (the PONG broadcast waits for the persist), and
    /// broadcast PONG to every node.
    fn take_ownership(&mut self, slots: &SlotSet, now: Millis) {
        let mut eout = Vec::new();
        ferrocluster_epoch::bump_config_epoch_without_consensus(&mut self.topo, &mut eout);
        self.apply_epoch_effects(eout, None, now);
        self.assign_slots_to_myself(slots);
        // Nobody hears of the new owner before it is durable.
        self.gate_transmits = true;
        self.broadcast_pong(now);
    }

    /// Tells the host the write pause that the manual failover and the slot migrations add
    /// up to (Valkey pauses per purpose; the effective end is the latest).
    pub(crate) fn announce_pause(&mut self) {
        let until = match (self.mf_pause, self.asm_pause) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let e = match until {
            Some(until) => Event::PauseWrites { until },
            None => Event::UnpauseWrites,
        };
        self.staged.push(Output::Event(e));
    }
}

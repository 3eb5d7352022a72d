//! The data connections of atomic slot migration (Valkey 9 `CLUSTER MIGRATESLOTS`), both
//! sides, Sans-IO: [`AsmPlane`].
//!
//! The control plane (job states, timeouts, which `CLUSTER SYNCSLOTS` message to send when) is
//! `ferrocluster-migration`'s `Migrations`, inside the cluster node; it asks the host for data
//! work (`MigrationRequest`s) and takes the facts back (`MigrationInput`). This module is what
//! the host does with those requests, in the bytes of Valkey 9.1 (Valkey
//! `src/cluster_migrateslots.c`, `rewriteSlotToAppendOnlyFileRio`, and the captures of a real
//! migration in `tests/vectors/asm/`).
//!
//! # The connection
//!
//! The source connects to the target's client port and writes, in order:
//!
//! 1. `AUTH [<primaryuser>] <primaryauth>` when `primaryauth` is set; the target answers one
//!    line (`+OK`);
//! 2. `CLUSTER SYNCSLOTS ESTABLISH SOURCE <id> NAME <job> SLOTSRANGE <s> <e> ..`; the target
//!    answers one line (`+OK`, or an error that fails the job) and turns its replies off;
//! 3. `CLUSTER SYNCSLOTS ACK` (the target's job leaves `waiting-for-ack`);
//! 4. the snapshot: for each slot of the ranges (in the order given) and each database with
//!    keys in it, `SELECT <db>` and every key as the commands that rebuild it ([`crate::aof`]:
//!    `SET`, `RPUSH`, `SADD`, `ZADD`, `HMSET`, `HSETEX`, `PEXPIREAT`), then
//!    `CLUSTER SYNCSLOTS SNAPSHOT-EOF`;
//! 5. the writes to those slots made since the snapshot began, as the node propagates them
//!    (`SELECT` when the database changes; keyless commands, `MULTI` and `EXEC` left out),
//!    first those held while the snapshot was produced, then the rest as they happen;
//!    `CLUSTER SYNCSLOTS ACK` every second;
//! 6. `CLUSTER SYNCSLOTS PAUSED` once writes are paused: everything before it is the data
//!    the target must have; then `CLUSTER SYNCSLOTS FAILOVER-GRANTED`.
//!
//! The target writes `CLUSTER SYNCSLOTS ACK` every second, `REQUEST-PAUSE` after the snapshot
//! and `REQUEST-FAILOVER` after `PAUSED`. Empty slots get no `SELECT` (captured).
//!
//! # Where we differ from Valkey 9.1.2, on purpose
//! * Order: slot by slot, each slot's databases together (Valkey: database by database, each
//!   database's slots). With one database (the cluster default) the order is the same. It
//!   lets a host produce the snapshot slot by slot under its own lock ([`SnapshotMode`]).
//! * [`SnapshotMode::SlotPaged`] adds commands Valkey's (forked, point-in-time) snapshot
//!   never has: the key states of the slot being read (`DEL key`, then the key's commands)
//!   among the held writes, and a `DEL key` before a list met again by the walk.
//! * Valkey 9.1.2's source tracks the database of the stream apart from the snapshot's: when
//!   the snapshot ends in another database than the first held write's, Valkey sends that
//!   write without `SELECT` and the target applies it in the wrong database (captured:
//!   `tests/vectors/asm/multidb`, the target ends with writes of db 0 applied to db 2). We
//!   write the `SELECT`.
//! * The target's commands on an export link other than `CLUSTER SYNCSLOTS` are refused (the
//!   link is closed); Valkey would run them as commands of that connection.
//!
//! # What the host MUST do for a correct snapshot while writes continue
//!
//! The target applies the snapshot and then every write streamed after it. Writes are
//! commands, not states: `INCR`, `LPUSH`, `SADD`, `APPEND`, `HINCRBY` applied twice give a
//! different result, so a write must reach the target exactly once — either inside the
//! snapshot or in the stream, never both, never neither. Every write to a key of the job's
//! slots that the host applies MUST be fed with [`AsmPlane::feed`] (with its slot), in the
//! order applied, and:
//!
//! * [`SnapshotMode::PointInTime`]: the snapshot content MUST be the keyspace as of the
//!   [`AsmPlane::start_snapshot`] call (a fork, a copy-on-write clone, an MVCC read view):
//!   writes applied before it are in the snapshot and MUST have been fed before it; writes
//!   applied after it MUST NOT be in the snapshot and MUST be fed after it. The crate holds
//!   every write fed after `start_snapshot` and streams it after the snapshot.
//! * [`SnapshotMode::SlotAtomic`]: the content of one slot MUST be the slot as of the
//!   [`AsmPlane::snapshot_step`] call that reads it (the crate reads a whole slot, every
//!   database, in one step: the host holds its write lock across the call, or pauses writes
//!   to that slot), and every write MUST be fed before the next `snapshot_step` starts
//!   (apply and feed under the same lock). The crate drops writes to slots not read yet
//!   (the snapshot will contain them) and holds writes to slots already read.
//! * [`SnapshotMode::SlotPaged`]: for a host that reads a slot in pages under its lock and
//!   applies writes between them (no point-in-time view, no lock held for a whole slot).
//!   Each key's content MUST be the key as of the [`AsmPlane::snapshot_step`] call that
//!   reads it, and every write MUST be fed before the next step starts; the walk of a slot
//!   MUST visit every key present throughout it at least once (a key met again is written
//!   again). While [`AsmPlane::wants_key_state`] is true for a write's slot (the snapshot
//!   read part of that slot), the host MUST also feed, after the write, the whole state of
//!   every key it changed with [`AsmPlane::feed_key_state`] (the state now, or gone). The
//!   crate drops the commands of slots not read yet and of the slot being read, holds the
//!   key states of the slot being read (`DEL key` and the commands that rebuild it: applied
//!   after the fuzzy content, they leave each key as it is at the end of the slot's read)
//!   and holds the commands of slots already read. Writes are commands again once their
//!   slot is read, so the key states cost only for the one slot being read.
//!
//! A key that expires or is evicted on the source is a write too (the `DEL` / `UNLINK` the
//! node propagates) and MUST be fed the same way. The target MUST NOT expire or evict keys of
//! importing slots (`HideSlots`): their deletions come in the stream.
//!
//! Either way the crate's part holds: a write is streamed iff the snapshot content cannot
//! contain it, and the stream keeps the order writes were fed. A write to a key of the slots
//! fed with `slot: None` is a host error the crate cannot see; `MULTI`/`EXEC` and keyless
//! commands are fed with `None` and dropped, as Valkey drops them (the hand-off makes the
//! whole migration atomic, so a transaction's writes need no wrapper).
//!
//! # The host loop
//!
//! One [`AsmPlane`] per node, beside the `ClusterNode` and the `Replication`:
//!
//! 1. Node requests (`Event::Migration(MigrationRequest)`), in order:
//!    * `Connect { job, ip, port, .. }`: open TCP; then [`AsmPlane::handle_connected`] or
//!      [`AsmPlane::handle_connect_failed`];
//!    * `SendAuth { conn, .. }`: [`AsmPlane::send_auth`] with `primaryuser`/`primaryauth`;
//!    * `Send { conn, message }`: [`AsmPlane::send_message`] (both sides: the order of the
//!      source's messages among its data matters);
//!    * `StartSnapshot { job, conn, ranges }`: [`AsmPlane::start_snapshot`], then
//!      [`AsmPlane::snapshot_step`] while [`AsmPlane::wants_snapshot_step`];
//!    * `AbortSnapshot { job }`: [`AsmPlane::abort_snapshot`];
//!    * `BeginStreaming { conn, .. }`: [`AsmPlane::begin_streaming`];
//!    * `QueryBacklog { job, conn }`: [`AsmPlane::query_backlog`];
//!    * `AcceptImportLink { job, conn, slots }`: [`AsmPlane::accept_import`] with the bytes the
//!      host already read from `conn` after the ESTABLISH command; from now on `conn`'s bytes
//!      go to [`AsmPlane::handle_bytes`] and its replies are off;
//!    * `Close { conn }`: close it and call [`AsmPlane::close`];
//!    * `HideSlots`, `RevealSlots`, `DropSlotKeys`, `Propagate`: keyspace work of the host.
//! 2. Connection events: bytes read from a data connection → [`AsmPlane::handle_bytes`]; the
//!    peer closed it → [`AsmPlane::handle_closed`]; bytes the socket has not taken yet →
//!    [`AsmPlane::handle_unsent`]; every write the node applies (as a primary) →
//!    [`AsmPlane::feed`]; an applied import command that failed →
//!    [`AsmPlane::handle_apply_failed`]; timers → [`AsmPlane::handle_timeout`] at
//!    [`AsmPlane::poll_timeout`].
//! 3. Drain [`AsmPlane::poll_output`] in order: [`AsmOutput::Send`] (write), [`AsmOutput::Close`]
//!    (close the socket), [`AsmOutput::Migration`] (`ClusterNode::handle_migration`),
//!    [`AsmOutput::SyncSlots`] (`ClusterNode::migration_command` with `Origin::Conn(conn)`;
//!    no reply is written), [`AsmOutput::Apply`] (target: run the command in that database
//!    without routing, without a reply, with the slots importing; propagate it to replicas and
//!    AOF; report a failure with `handle_apply_failed`), [`AsmOutput::Event`].

mod export;
mod import;

use crate::config::OutputBufferLimit;
use crate::error::StreamError;
use crate::resp::ReaderLimits;
use ferrocluster_migration::{ConnId, JobName, MigrationInput};
use ferrocluster_topology::Millis;
use std::collections::{BTreeMap, VecDeque};

pub use export::{KeyVisitor, SlotSource, SnapshotMode, SnapshotProgress};

/// Settings of the ASM data plane. Defaults are Valkey 9's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AsmConfig {
    /// `client-output-buffer-limit replica` (Valkey applies it to export links): a link whose
    /// held and unsent bytes pass it is dropped and its job fails.
    pub output_buffer_limit: OutputBufferLimit,
    /// `databases` / `cluster-databases` (Valkey 9 default 1 in cluster mode): a snapshot
    /// reads databases `0..databases`; a `SELECT` at or above it on an import link fails the
    /// import.
    pub databases: u32,
    /// Keys asked of [`SlotSource::page`] per call (default 512).
    pub page_keys: usize,
    /// A snapshot step stops after producing this many bytes (default 64 KiB), between pages
    /// ([`SnapshotMode::PointInTime`], [`SnapshotMode::SlotPaged`]) or between slots
    /// ([`SnapshotMode::SlotAtomic`]: a step always reads at least one whole slot).
    pub step_bytes: usize,
    /// [`AsmPlane::wants_snapshot_step`] is false while the link holds at least this many
    /// unsent bytes (default 64 MiB): the snapshot waits for the socket.
    pub max_unsent_bytes: u64,
    /// Reply lines on an export link before the ESTABLISH reply are at most this long
    /// (Valkey `PROTO_IOBUF_LEN`, 16 KiB): a longer ESTABLISH reply fails the job.
    pub max_reply_line: usize,
    /// Limits of the command reader on import links (and of the target's messages).
    pub reader_limits: ReaderLimits,
    /// An import link's activity is reported ([`MigrationInput::ImportData`]) at most this
    /// often, ms (default 100; the node's timeout is `repl-timeout`, seconds).
    pub activity_report_ms: u64,
}

impl Default for AsmConfig {
    fn default() -> AsmConfig {
        AsmConfig {
            output_buffer_limit: OutputBufferLimit::default(),
            databases: 1,
            page_keys: 512,
            step_bytes: 64 * 1024,
            max_unsent_bytes: 64 * 1024 * 1024,
            max_reply_line: 16 * 1024,
            reader_limits: ReaderLimits::default(),
            activity_report_ms: 100,
        }
    }
}

/// What the ASM data plane asks the host to do, polled in order with [`AsmPlane::poll_output`].
#[derive(Debug, Clone, PartialEq)]
pub enum AsmOutput {
    /// Write these bytes on the data connection.
    Send {
        /// The connection.
        conn: ConnId,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// Close the data connection (a protocol error); the data plane has forgotten it and the
    /// node hears of it in the [`AsmOutput::Migration`] that follows. Closing a connection
    /// the host already closed is harmless.
    Close {
        /// The connection.
        conn: ConnId,
    },
    /// A fact for the node: `ClusterNode::handle_migration` (or `Migrations::handle_input`).
    Migration(MigrationInput),
    /// A `CLUSTER SYNCSLOTS` message the peer sent on `conn`: run it through the node as a
    /// command from that connection (`ClusterNode::migration_command(Origin::Conn(conn),
    /// argv)`); its reply, if any, is not written (Valkey's migration links run with replies
    /// off).
    SyncSlots {
        /// The data connection.
        conn: ConnId,
        /// `CLUSTER`, `SYNCSLOTS`, the subcommand and its arguments.
        argv: Vec<Vec<u8>>,
    },
    /// Target: run this command of the import stream in database `db`, without routing (the
    /// slots are importing) and without a reply, and propagate it to this node's replicas
    /// and AOF. On OOM or an error reply call [`AsmPlane::handle_apply_failed`].
    Apply {
        /// The import connection.
        conn: ConnId,
        /// The database (the stream's last `SELECT`, 0 before any).
        db: u32,
        /// The command and its arguments.
        argv: Vec<Vec<u8>>,
    },
    /// A notice.
    Event(AsmEvent),
}

/// A notable change of the ASM data plane, for logs and metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AsmEvent {
    /// The peer's bytes on a data connection are not the protocol; the link was closed.
    Protocol {
        /// The connection.
        conn: ConnId,
        /// What was wrong and where.
        error: StreamError,
    },
    /// The target sent a command other than `CLUSTER SYNCSLOTS` on an export link; the link
    /// was closed.
    UnexpectedCommand {
        /// The connection.
        conn: ConnId,
        /// The command name.
        name: Vec<u8>,
    },
    /// A snapshot ended: `keys` keys in `bytes` bytes (with `SNAPSHOT-EOF`).
    SnapshotWritten {
        /// The export job.
        job: JobName,
        /// Keys written.
        keys: u64,
        /// Bytes written.
        bytes: u64,
    },
    /// A snapshot failed: a value could not be written.
    SnapshotFailed {
        /// The export job.
        job: JobName,
        /// Why.
        reason: String,
    },
    /// An export link passed the output buffer limit with `bytes` held and unsent.
    OutputBufferLimit {
        /// The connection.
        conn: ConnId,
        /// Held plus unsent bytes.
        bytes: u64,
    },
    /// An import stream `SELECT`ed a database at or above the configured count.
    BadSelect {
        /// The import connection.
        conn: ConnId,
        /// The argument.
        db: Vec<u8>,
    },
}

/// A host call the current state does not allow. Nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AsmError {
    /// No data connection with this handle (never opened, or closed).
    #[error("no migration data connection {0:?}")]
    UnknownConn(ConnId),
    /// The connection is an import link, the call is for export links (or the reverse).
    #[error("migration data connection {0:?} is not an {1} link")]
    WrongSide(ConnId, &'static str),
    /// A handle already in use.
    #[error("migration data connection {0:?} is already open")]
    ConnInUse(ConnId),
    /// A snapshot input without a snapshot in progress on the connection, or a second
    /// `start_snapshot`.
    #[error("migration data connection {0:?}: {1}")]
    SnapshotOrder(ConnId, &'static str),
    /// A database number at or above [`AsmConfig::databases`].
    #[error("database {0} out of range")]
    BadDatabase(u32),
}

#[derive(Debug)]
enum Link {
    Export(Box<export::ExportLink>),
    Import(Box<import::ImportLink>),
}

/// The ASM data connections of one node, both sides: see the module docs for the bytes and
/// the host loop.
#[derive(Debug)]
pub struct AsmPlane {
    cfg: AsmConfig,
    links: BTreeMap<ConnId, Link>,
    out: VecDeque<AsmOutput>,
    now: Millis,
}

impl AsmPlane {
    /// An empty data plane.
    pub fn new(cfg: AsmConfig, now: Millis) -> AsmPlane {
        AsmPlane {
            cfg,
            links: BTreeMap::new(),
            out: VecDeque::new(),
            now,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &AsmConfig {
        &self.cfg
    }

    /// Clamps time that goes backwards.
    pub(super) fn clock(&mut self, now: Millis) -> Millis {
        crate::clock::advance(&mut self.now, now)
    }

    /// The next output, `None` when drained. Drain after every input.
    pub fn poll_output(&mut self) -> Option<AsmOutput> {
        self.out.pop_front()
    }

    fn send(&mut self, conn: ConnId, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        if let Some(AsmOutput::Send { conn: c, bytes: b }) = self.out.back_mut() {
            if *c == conn {
                b.extend_from_slice(bytes);
                return;
            }
        }
        self.out.push_back(AsmOutput::Send {
            conn,
            bytes: bytes.to_vec(),
        });
    }

    fn fact(&mut self, input: MigrationInput) {
        self.out.push_back(AsmOutput::Migration(input));
    }

    fn event(&mut self, e: AsmEvent) {
        self.out.push_back(AsmOutput::Event(e));
    }

    /// The node asked to close `conn` (`MigrationRequest::Close`): the data plane forgets it
    /// (a running snapshot on it stops). Harmless for an unknown connection.
    pub fn close(&mut self, conn: ConnId, now: Millis) {
        self.clock(now);
        if self.links.remove(&conn).is_some() {
            self.drop_pending(conn);
        }
    }

    /// The peer closed `conn`, or it failed: the data plane forgets it and the node hears
    /// [`MigrationInput::LinkClosed`]. Harmless for an unknown connection.
    pub fn handle_closed(&mut self, conn: ConnId, now: Millis) {
        self.clock(now);
        if self.links.remove(&conn).is_some() {
            self.fact(MigrationInput::LinkClosed { conn });
        }
    }

    /// Closes a link the peer broke the protocol on. What the peer sent before the bad bytes
    /// stands (Valkey runs the commands it read before the protocol error): the outputs
    /// already queued for the link stay.
    fn protocol_close(&mut self, conn: ConnId, e: AsmEvent) {
        self.links.remove(&conn);
        self.event(e);
        self.out.push_back(AsmOutput::Close { conn });
        self.fact(MigrationInput::LinkClosed { conn });
    }

    /// Bytes read from data connection `conn`, either side. Protocol errors close the link
    /// ([`AsmOutput::Close`], then [`MigrationInput::LinkClosed`]). Bytes of an unknown
    /// connection (one closed a moment ago) are ignored.
    pub fn handle_bytes(&mut self, conn: ConnId, bytes: &[u8], now: Millis) {
        let now = self.clock(now);
        match self.links.get(&conn) {
            Some(Link::Export(_)) => self.export_bytes(conn, bytes),
            Some(Link::Import(_)) => self.import_bytes(conn, bytes, now),
            None => {}
        }
    }

    /// Timers: the soft output-buffer limit of export links. An early or repeated call is
    /// harmless.
    pub fn handle_timeout(&mut self, now: Millis) {
        let now = self.clock(now);
        let conns: Vec<ConnId> = self.links.keys().copied().collect();
        for conn in conns {
            self.check_limit(conn, now);
        }
    }

    /// When [`AsmPlane::handle_timeout`] must next be called: when an export link over the
    /// soft output-buffer limit would pass its time; `None` when no link is over it.
    pub fn poll_timeout(&self) -> Option<Millis> {
        let l = self.cfg.output_buffer_limit;
        self.links
            .values()
            .filter_map(|link| match link {
                Link::Export(e) => l.soft_deadline(e.soft_since),
                Link::Import(_) => None,
            })
            .min()
    }

    /// Open data connections (both sides).
    pub fn links(&self) -> usize {
        self.links.len()
    }
}

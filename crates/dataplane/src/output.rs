//! What the replication engine asks its host to do ([`Output`], must act) and what it tells
//! ([`Event`], may log), and the ordered queue that holds them.

use crate::replid::ReplId;
use crate::ConnId;
use ferrocluster_topology::Reply;
use std::collections::VecDeque;
use std::fmt;

/// The replica side's connection to its primary. Chosen by the engine, never reused; events
/// for an ID that is no longer current are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UpstreamId(pub u64);

impl fmt::Display for UpstreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "upstream#{}", self.0)
    }
}

/// One full-sync snapshot (a BGSAVE for replication), numbered from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SnapshotId(pub u64);

/// Where the host writes a snapshot's RDB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotTarget {
    /// To a file first: when it is complete the host calls
    /// [`crate::Replication::handle_snapshot_ready`] with its length, then streams it with
    /// [`crate::Replication::handle_snapshot_chunk`]; the replicas get `$<len>\r\n` + bytes.
    Disk,
    /// Straight to the replicas (diskless): the host streams the RDB as it produces it; the
    /// replicas get `$EOF:<mark>\r\n` + bytes + `<mark>`.
    Sockets,
}

/// The replication facts a snapshot's RDB carries as aux fields (`repl-stream-db`, `repl-id`,
/// `repl-offset`; Valkey `rdbPopulateSaveInfo`). The same values go into an RDB saved for
/// persistence so a restart can resume (see [`crate::Restored`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SaveInfo {
    /// `repl-id`.
    pub replid: ReplId,
    /// `repl-offset`.
    pub offset: u64,
    /// `repl-stream-db`: the database the stream is in (0 when none was selected yet).
    pub stream_db: u32,
}

/// Why the engine closes a replica's connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseReason {
    /// No REPLCONF ACK for longer than `repl-timeout` ("Disconnecting timedout replica").
    Timeout,
    /// `client-output-buffer-limit replica` reached.
    OutputBufferLimit,
    /// The snapshot for its full sync failed.
    SnapshotFailed,
    /// Our replid changed (promotion, new history from our own primary): replicas must
    /// reconnect to learn it (Valkey `disconnectReplicas`).
    HistoryChanged,
}

/// Why the replica side dropped its link to the primary.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LinkDownReason {
    /// The host reported the connection closed.
    Closed,
    /// The connection could not be made.
    ConnectFailed,
    /// Nothing from the primary for longer than `repl-timeout` (handshake, transfer or
    /// stream).
    Timeout,
    /// The primary sent bytes that are not the protocol.
    Protocol(crate::error::StreamErrorKind),
    /// `-NOMASTERLINK` / `-LOADING`: the primary cannot serve a sync now; retried later.
    TryLater(String),
    /// The host could not load the RDB ([`crate::Replication::handle_load_failed`]).
    LoadFailed,
    /// Replication was reconfigured (new primary, promotion).
    Reconfigured,
}

/// One command of the primary's stream, for the host to apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamCommand {
    /// The database it applies to (the stream's last `SELECT`, 0 before any).
    pub db: u32,
    /// Command name and arguments as received.
    pub argv: Vec<Vec<u8>>,
}

/// One instruction for the host, from [`crate::Replication::poll_output`]. The host MUST act
/// on them in the order polled: a replica's RDB bytes come before the commands that follow
/// them, and a transmit before a close of the same connection.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Write `bytes` on the replica connection `conn` (a client connection that sent PSYNC or
    /// SYNC). After PSYNC/SYNC the engine is the only writer of that connection.
    ToReplica {
        /// The connection.
        conn: ConnId,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// Close the replica connection `conn`; the engine has forgotten it.
    CloseReplica {
        /// The connection.
        conn: ConnId,
        /// Why.
        reason: CloseReason,
    },
    /// Produce an RDB snapshot of the whole data set for a full sync, with `info` in its aux
    /// fields, taken atomically at stream offset `info.offset` (no write fed after this output
    /// may be in it; every write fed before must be). Then feed it back with
    /// [`crate::Replication::handle_snapshot_ready`] (disk only),
    /// [`crate::Replication::handle_snapshot_chunk`], [`crate::Replication::handle_snapshot_end`],
    /// or [`crate::Replication::handle_snapshot_failed`].
    StartSnapshot {
        /// The snapshot.
        id: SnapshotId,
        /// File or sockets.
        target: SnapshotTarget,
        /// Aux fields for the RDB.
        info: SaveInfo,
    },
    /// Open a TCP connection to the primary `host:port` for `link`; report
    /// [`crate::Replication::handle_upstream_connected`] or
    /// [`crate::Replication::handle_upstream_connect_failed`].
    Connect {
        /// The link.
        link: UpstreamId,
        /// The primary's host.
        host: String,
        /// The primary's port.
        port: u16,
    },
    /// Write `bytes` on the link to the primary.
    ToPrimary {
        /// The link.
        link: UpstreamId,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// Close the link to the primary; the engine has forgotten it.
    CloseUpstream {
        /// The link.
        link: UpstreamId,
    },
    /// A full sync from the primary starts: the RDB follows in [`Output::RdbChunk`]s.
    /// `size` is the payload length for the `$<len>` framing, `None` for `$EOF:`. The host
    /// SHOULD start a streaming RDB decoder; its old data set stays until [`Output::RdbEnd`].
    RdbBegin {
        /// The primary's replid for the new history (`None` after a `SYNC` fallback to a
        /// primary that does not speak PSYNC).
        replid: Option<ReplId>,
        /// The stream offset the RDB is taken at.
        offset: u64,
        /// Payload length, bytes, when known.
        size: Option<u64>,
    },
    /// RDB bytes, in order.
    RdbChunk(Vec<u8>),
    /// The transfer broke off before the end (link lost, timeout, bad framing): the host MUST
    /// drop what it decoded of this RDB and keep its previous data set. A host that cannot
    /// (it already replaced it) MUST call [`crate::Replication::handle_load_failed`].
    RdbAbort,
    /// The RDB is complete: the host MUST replace its data set with what it decoded before
    /// acting on later outputs (commands of the stream follow), or call
    /// [`crate::Replication::handle_load_failed`] if it could not.
    RdbEnd,
    /// Apply one command of the primary's stream.
    Apply(StreamCommand),
    /// Apply a `MULTI` ... `EXEC` block atomically (the wrappers are not included).
    ApplyTransaction(Vec<StreamCommand>),
    /// The reply to a blocked WAIT: an integer (replicas that acknowledged) or an error.
    WaitDone {
        /// The client that ran WAIT.
        client: ConnId,
        /// The reply.
        reply: Reply,
    },
    /// A notice.
    Event(Event),
}

/// A notable change, for logs, metrics and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A replica asked for a sync and will get a full one (`+FULLRESYNC` when its snapshot
    /// starts).
    FullSyncNeeded {
        /// The replica.
        conn: ConnId,
    },
    /// A replica's PSYNC was accepted: `+CONTINUE` and `bytes` of backlog sent.
    PartialResyncAccepted {
        /// The replica.
        conn: ConnId,
        /// Backlog bytes sent.
        bytes: u64,
    },
    /// A replica finished its full sync and gets the stream.
    ReplicaOnline {
        /// The replica.
        conn: ConnId,
    },
    /// Replica side: the link to the primary is up (`master_link_status:up`).
    LinkUp {
        /// Whether it came up by a partial resync.
        partial: bool,
    },
    /// Replica side: the link to the primary went down.
    LinkDown(LinkDownReason),
    /// Our replid changed: `replid` is new, `replid2` valid up to `second_offset`.
    ReplIdShifted {
        /// The new replid.
        replid: ReplId,
        /// The previous one.
        replid2: ReplId,
        /// `second_repl_offset`.
        second_offset: u64,
    },
    /// A `SELECT` from the primary named a database at or above the configured count; it was
    /// ignored (the stream stays in the previous database).
    BadSelect(Vec<u8>),
}

/// The ordered output queue.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    q: VecDeque<Output>,
    /// Bytes handed to the host per replica connection so far (every `ToReplica`), for
    /// telling the stream's share of what the host has not sent yet from the full copy's.
    to_replica: std::collections::BTreeMap<ConnId, u64>,
}

impl Outbox {
    /// Bytes handed to the host for replica `conn` since it connected.
    pub(crate) fn replica_bytes(&self, conn: ConnId) -> u64 {
        self.to_replica.get(&conn).copied().unwrap_or(0)
    }

    /// Replica `conn` is gone: its byte count goes.
    pub(crate) fn forget_replica(&mut self, conn: ConnId) {
        self.to_replica.remove(&conn);
    }

    pub(crate) fn push(&mut self, o: Output) {
        self.q.push_back(o);
    }

    /// Appends bytes for a replica, joining them to a transmit at the queue's end for the same
    /// connection (fewer, larger writes; order is kept).
    pub(crate) fn send_replica(&mut self, conn: ConnId, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        *self.to_replica.entry(conn).or_default() += bytes.len() as u64;
        if let Some(Output::ToReplica { conn: c, bytes: b }) = self.q.back_mut() {
            if *c == conn {
                b.extend_from_slice(bytes);
                return;
            }
        }
        self.q.push_back(Output::ToReplica {
            conn,
            bytes: bytes.to_vec(),
        });
    }

    pub(crate) fn send_primary(&mut self, link: UpstreamId, bytes: &[u8]) {
        if let Some(Output::ToPrimary { link: l, bytes: b }) = self.q.back_mut() {
            if *l == link {
                b.extend_from_slice(bytes);
                return;
            }
        }
        self.q.push_back(Output::ToPrimary {
            link,
            bytes: bytes.to_vec(),
        });
    }

    pub(crate) fn rdb_chunk(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        if let Some(Output::RdbChunk(b)) = self.q.back_mut() {
            b.extend_from_slice(bytes);
            return;
        }
        self.q.push_back(Output::RdbChunk(bytes.to_vec()));
    }

    pub(crate) fn event(&mut self, e: Event) {
        self.q.push_back(Output::Event(e));
    }

    pub(crate) fn pop(&mut self) -> Option<Output> {
        self.q.pop_front()
    }
}

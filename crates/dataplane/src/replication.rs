//! [`Replication`]: the state shared by both sides (the replication history: replid pair,
//! offset, backlog), construction, role changes, the timer, and the queries.

use crate::backlog::Backlog;
use crate::config::ReplicationConfig;
use crate::error::HostError;
use crate::output::{CloseReason, Event, LinkDownReason, Outbox, Output, SaveInfo, UpstreamId};
use crate::primary::{PrimarySide, ReplicaState};
use crate::replica::{LinkState, Upstream};
use crate::replid::ReplId;
use crate::ConnId;
use ferrocluster_epoch::{ReplLink, ReplicationState};
use ferrocluster_topology::{Millis, Reply};
use rand_chacha::ChaCha8Rng;
use rand_core::SeedableRng;

/// The cron period, ms (Valkey `replicationCron` runs once a second).
pub(crate) const CRON_MS: u64 = 1000;

/// Replication state saved with the data (the RDB aux fields `repl-id`, `repl-offset`,
/// `repl-stream-db` of the last save) and given back at construction, so a restart can resume
/// with a partial resync (Valkey `loadDataFromDisk`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Restored {
    /// `repl-id`.
    pub replid: ReplId,
    /// `repl-offset`.
    pub offset: u64,
    /// `repl-stream-db`.
    pub stream_db: u32,
}

/// The role at construction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// A primary.
    Primary,
    /// A replica of `host:port`.
    Replica {
        /// The primary's host.
        host: String,
        /// The primary's port.
        port: u16,
    },
    /// A replica whose primary the host does not know yet: a cluster node loaded from its
    /// nodes.conf as a replica, before its node says whom to follow. Valkey
    /// `loadDataFromDisk` in cluster mode, where `iAmPrimary()` is the cluster node's role:
    /// the saved history stays its own replid and offset (not a replid2 under a fresh replid,
    /// as for a primary), so the first [`Replication::replicate_from`] asks `PSYNC <saved
    /// replid> <offset + 1>` and resyncs partially. It connects nowhere until then.
    ReplicaAwaitingPrimary,
}

/// The replication protocol engine of one node, both sides: the primary side serves replicas
/// (a replica serves its own replicas too, proxying its primary's stream as Valkey does), the
/// replica side follows one primary. Sans-IO: bytes and time in, [`Output`]s out.
///
/// See the crate docs for the host loop.
#[derive(Debug)]
pub struct Replication {
    pub(crate) cfg: ReplicationConfig,
    pub(crate) rng: ChaCha8Rng,
    pub(crate) out: Outbox,
    /// `server.replid`.
    pub(crate) replid: ReplId,
    /// `server.replid2`.
    pub(crate) replid2: ReplId,
    /// `server.second_replid_offset` (`None`: -1).
    pub(crate) second_offset: Option<u64>,
    /// `server.primary_repl_offset`: bytes of stream produced (a primary) or processed (a
    /// replica).
    pub(crate) offset: u64,
    pub(crate) backlog: Backlog,
    /// False after `repl-backlog-ttl` freed the backlog (Valkey: `server.repl_backlog == NULL`).
    pub(crate) backlog_active: bool,
    pub(crate) primary: PrimarySide,
    pub(crate) upstream: Option<Upstream>,
    /// [`Role::ReplicaAwaitingPrimary`] with a saved history: the `repl-stream-db` and
    /// offset it was saved with, for the first [`Replication::replicate_from`] (the database
    /// holds while the offset has not moved).
    pub(crate) awaiting_stream_db: Option<(u32, u64)>,
    pub(crate) next_link: u64,
    pub(crate) now: Millis,
    pub(crate) next_cron: Millis,
}

impl Replication {
    /// The options in force.
    pub fn config(&self) -> &ReplicationConfig {
        &self.cfg
    }

    /// `CONFIG SET repl-backlog-size` at run time (Valkey 9.1 `updateReplBacklogSize`,
    /// `resizeReplicationBacklog`): the backlog keeps at most `bytes` of the newest stream (a
    /// smaller size drops the oldest history at once; a larger one grows as the stream does).
    /// `bytes` 0 is taken as 1.
    pub fn set_backlog_size(&mut self, bytes: u64) {
        let bytes = bytes.max(1);
        self.cfg.backlog_size = bytes;
        self.backlog
            .set_capacity(usize::try_from(bytes).unwrap_or(usize::MAX));
    }

    /// `CONFIG SET primaryauth` / `primaryuser` at run time (both mutable in Valkey 9.1): the
    /// credentials of the next handshake with the primary (a link already up keeps its
    /// session, as Valkey's).
    pub fn set_primary_auth(&mut self, user: Option<String>, auth: Option<Vec<u8>>) {
        self.cfg.primary_user = user;
        self.cfg.primary_auth = auth;
    }

    /// `CONFIG SET repl-ping-replica-period` / `repl-timeout` at run time (both mutable in
    /// Valkey 9.1): the next ping is due at most `ping_period_ms` from `now`, and every link's
    /// silence is measured against `timeout_ms` from its next check on.
    ///
    /// # Errors
    /// [`HostError::Config`] for a zero period or timeout (nothing changes).
    pub fn set_timing(
        &mut self,
        ping_period_ms: u64,
        timeout_ms: u64,
        now: Millis,
    ) -> Result<(), HostError> {
        let next = ReplicationConfig {
            ping_period_ms,
            timeout_ms,
            ..self.cfg.clone()
        };
        next.validate()?;
        self.cfg = next;
        let due = now.saturating_add_ms(ping_period_ms);
        if self.primary.next_ping > due {
            self.primary.next_ping = due;
        }
        Ok(())
    }

    /// A node in `role`, with the replication state saved with its data if any. `seed` drives
    /// a ChaCha8 generator for replids and EOF marks. A replica emits its first
    /// [`Output::Connect`] right away.
    ///
    /// With `restored`: a primary keeps the saved history as its replid2 (valid up to
    /// `offset + 1`) under a fresh replid, so its old replicas resync partially with
    /// `+CONTINUE <new replid>`; a replica keeps it as its cached primary and asks
    /// `PSYNC <replid> <offset + 1>` (Valkey `loadDataFromDisk`).
    ///
    /// # Errors
    /// [`HostError::Config`] from [`ReplicationConfig::validate`].
    pub fn new(
        cfg: ReplicationConfig,
        seed: u64,
        role: Role,
        restored: Option<Restored>,
        now: Millis,
    ) -> Result<Replication, HostError> {
        cfg.validate()?;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let fresh = ReplId::random(&mut rng);
        let backlog_size = cfg.backlog_size as usize;
        let mut r = Replication {
            primary: PrimarySide::new(now, cfg.ping_period_ms),
            cfg,
            rng,
            out: Outbox::default(),
            replid: fresh,
            replid2: ReplId::ZERO,
            second_offset: None,
            offset: 0,
            backlog: Backlog::new(backlog_size, 0),
            backlog_active: true,
            upstream: None,
            awaiting_stream_db: None,
            next_link: 1,
            now,
            next_cron: now.saturating_add_ms(CRON_MS),
        };
        match (role, restored) {
            (Role::Primary, Some(s)) => {
                r.replid2 = s.replid;
                r.second_offset = Some(s.offset + 1);
                r.offset = s.offset;
                r.backlog.reset(s.offset);
                r.primary.sel_db = None;
            }
            (Role::Primary | Role::ReplicaAwaitingPrimary, None) => {}
            (Role::ReplicaAwaitingPrimary, Some(s)) => {
                r.replid = s.replid;
                r.offset = s.offset;
                r.backlog.reset(s.offset);
                r.awaiting_stream_db = Some((s.stream_db, s.offset));
            }
            (Role::Replica { host, port }, restored) => {
                let mut up = Upstream::new(host, port, now);
                if let Some(s) = restored {
                    r.replid = s.replid;
                    r.offset = s.offset;
                    r.backlog.reset(s.offset);
                    up.cached = true;
                    up.stream_db = s.stream_db;
                }
                r.upstream = Some(up);
                r.connect_upstream();
            }
        }
        Ok(r)
    }

    /// Clamps time that goes backwards and returns the time to use.
    pub(crate) fn clock(&mut self, now: Millis) -> Millis {
        crate::clock::advance(&mut self.now, now)
    }

    /// Starts (or restarts) replicating from `host:port` (`REPLICAOF host port`, or the cluster
    /// node's "replicate from"). Valkey `replicationSetPrimary`:
    /// * from a primary: our own history becomes the cached primary, so the new primary
    ///   accepts `PSYNC <our replid> <offset + 1>` when it has our history (it was our
    ///   replica and got promoted); blocked WAITs are answered with `-UNBLOCKED`;
    /// * from a replica: the current link's state is cached (partial resync with the new
    ///   primary when it shares the history, e.g. a sibling promoted by a failover);
    /// * `full_sync_required` (joining another shard, no shared history) drops that cache.
    ///
    /// Our own replicas stay connected; they are dropped when our history changes.
    pub fn replicate_from(
        &mut self,
        host: impl Into<String>,
        port: u16,
        full_sync_required: bool,
        now: Millis,
    ) {
        let now = self.clock(now);
        let (host, port) = (host.into(), port);
        if let Some(up) = self.upstream.take() {
            // Drop the current link, keeping its state as the cached primary unless told not.
            let mut up = up;
            self.drop_link(&mut up, LinkDownReason::Reconfigured, now);
            let mut next = Upstream::new(host, port, now);
            next.cached = up.cached && !full_sync_required;
            next.stream_db = up.stream_db;
            next.down_since = up.down_since.or(Some(now));
            next.ever_up = up.ever_up;
            self.upstream = Some(next);
        } else {
            let mut next = Upstream::new(host, port, now);
            // replicationCachePrimaryUsingMyself: PSYNC with our own replid and offset. The
            // database is unknown (the new primary starts its stream with SELECT), unless the
            // history is the one saved by a replica restarted awaiting its primary.
            next.cached = !full_sync_required;
            next.stream_db = match self.awaiting_stream_db.take() {
                Some((db, at)) if at == self.offset => db,
                _ => 0,
            };
            self.upstream = Some(next);
            self.primary.abort_waits(&mut self.out);
        }
        self.connect_upstream();
    }

    /// Stops replicating and becomes a primary (`REPLICAOF NO ONE`, a cluster promotion).
    /// Valkey `replicationUnsetPrimary`: the data and the backlog are kept; the replid shifts
    /// (the old one becomes replid2, valid up to `offset + 1`, under a fresh replid) so the
    /// other replicas of the old primary resync partially with `+CONTINUE <new replid>`; our
    /// own replicas are disconnected so they learn the new replid; the next write starts with
    /// `SELECT`. A transaction half received from the old primary is discarded. No-op on a
    /// primary.
    pub fn become_primary(&mut self, now: Millis) {
        let now = self.clock(now);
        let Some(mut up) = self.upstream.take() else {
            return;
        };
        self.drop_link(&mut up, LinkDownReason::Reconfigured, now);
        self.shift_replid();
        self.disconnect_replicas(CloseReason::HistoryChanged);
        self.primary.sel_db = None;
        self.primary.no_replicas_since = now;
        self.backlog_active = true;
    }

    /// Valkey `shiftReplicationId`.
    pub(crate) fn shift_replid(&mut self) {
        self.replid2 = self.replid;
        self.second_offset = Some(self.offset + 1);
        self.replid = ReplId::random(&mut self.rng);
        self.out.event(Event::ReplIdShifted {
            replid: self.replid,
            replid2: self.replid2,
            second_offset: self.offset + 1,
        });
    }

    /// Valkey `disconnectReplicas`.
    pub(crate) fn disconnect_replicas(&mut self, reason: CloseReason) {
        let conns: Vec<ConnId> = self.primary.replicas.keys().copied().collect();
        for conn in conns {
            self.close_replica(conn, reason);
        }
    }

    /// Appends bytes to the replication history: offset, backlog, and every replica (online
    /// ones get them now, ones waiting for their snapshot keep them for later).
    pub(crate) fn write_stream(&mut self, bytes: &[u8]) {
        self.offset += bytes.len() as u64;
        if self.backlog_active {
            self.backlog.append(bytes);
        } else {
            self.backlog.reset(self.offset);
        }
        let mut over = Vec::new();
        let limit = self.cfg.output_buffer_limit;
        let now = self.now;
        for (conn, r) in self.primary.replicas.iter_mut() {
            match &mut r.state {
                ReplicaState::Online => self.out.send_replica(*conn, bytes),
                ReplicaState::WaitSnapshotEnd { pending }
                | ReplicaState::WaitFirstAck { pending } => {
                    pending.extend_from_slice(bytes);
                    if r.over_limit(limit, self.out.replica_bytes(*conn), now) {
                        over.push(*conn);
                    }
                }
                ReplicaState::WaitSnapshotStart => {}
            }
        }
        for conn in over {
            self.close_replica(conn, CloseReason::OutputBufferLimit);
        }
    }

    /// Processes timers. Call at [`Replication::poll_timeout`]; an early or repeated call is
    /// harmless.
    pub fn handle_timeout(&mut self, now: Millis) {
        let now = self.clock(now);
        self.primary_deadlines(now);
        if now >= self.next_cron {
            self.next_cron = now.saturating_add_ms(CRON_MS);
            self.replica_cron(now);
            self.primary_cron(now);
        }
    }

    /// The next instant [`Replication::handle_timeout`] must be called: the 1 s cron (timeouts,
    /// ACKs, pings, keep-alives, reconnects, diskless-sync delay) or an earlier WAIT deadline.
    pub fn poll_timeout(&self) -> Option<Millis> {
        let mut t = self.next_cron;
        if let Some(w) = self.primary.earliest_wait_deadline() {
            t = t.min(w);
        }
        Some(t)
    }

    /// The next output, `None` when the queue is empty. Drain after every input.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.flush_getack();
        self.out.pop()
    }

    pub(crate) fn new_link(&mut self) -> UpstreamId {
        let id = UpstreamId(self.next_link);
        self.next_link += 1;
        id
    }

    // ---- queries ----

    /// The current replid (`master_replid`).
    pub fn replid(&self) -> ReplId {
        self.replid
    }

    /// `master_replid2` ([`ReplId::ZERO`] when cleared).
    pub fn replid2(&self) -> ReplId {
        self.replid2
    }

    /// `second_repl_offset` (`None` shows as -1).
    pub fn second_offset(&self) -> Option<u64> {
        self.second_offset
    }

    /// `master_repl_offset`: a primary's produced offset, a replica's processed one, bytes.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The backlog.
    pub fn backlog(&self) -> &Backlog {
        &self.backlog
    }

    /// Whether this node follows a primary.
    pub fn is_replica(&self) -> bool {
        self.upstream.is_some()
    }

    /// The facts the cluster node needs (`ClusterNode::handle_replication`): the offset
    /// (Valkey `replicationGetReplicaOffset` on a replica, `primary_repl_offset` on a primary)
    /// and the link to the primary (`Up` with the last interaction, `DownSince` after it went
    /// down, `Down` when it never came up or on a primary).
    pub fn replication_state(&self) -> ReplicationState {
        let link = match &self.upstream {
            None => ReplLink::Down,
            Some(up) => match (&up.state, up.down_since) {
                (LinkState::Connected { .. }, _) => ReplLink::Up {
                    last_interaction: up.last_interaction,
                },
                (_, Some(t)) if up.ever_up => ReplLink::DownSince(t),
                _ => ReplLink::Down,
            },
        };
        ReplicationState {
            offset: self.offset,
            link,
        }
    }

    /// The replication aux fields to write into an RDB saved now (Valkey
    /// `rdbPopulateSaveInfo`): on a primary the history and the stream's database; on a
    /// replica the history it follows, when it has one (connected, or cached for a partial
    /// resync). `None` when there is nothing a restart could resume.
    pub fn save_info(&self) -> Option<SaveInfo> {
        match &self.upstream {
            None => self.backlog_active.then_some(SaveInfo {
                replid: self.replid,
                offset: self.offset,
                stream_db: self.primary.sel_db.unwrap_or(0),
            }),
            Some(up) => {
                let has = matches!(up.state, LinkState::Connected { .. }) || up.cached;
                has.then_some(SaveInfo {
                    replid: self.replid,
                    offset: self.offset,
                    stream_db: up.stream_db,
                })
            }
        }
    }

    /// The `ROLE` reply (Valkey `roleCommand`): `["master", offset, [[ip, port, acked], ..]]`
    /// with the online replicas, or `["slave", host, port, state, offset]` where state is
    /// `connect` / `connecting` / `handshake` / `sync` / `connected` and offset is -1 while
    /// not connected.
    pub fn role_reply(&self) -> Reply {
        match &self.upstream {
            None => {
                let list = self
                    .primary
                    .replicas
                    .values()
                    .filter(|r| matches!(r.state, ReplicaState::Online))
                    .map(|r| {
                        Reply::Array(vec![
                            Reply::bulk(r.hello.ip.as_deref().unwrap_or("")),
                            Reply::bulk(r.hello.listening_port.unwrap_or(0).to_string()),
                            Reply::bulk(r.ack_offset.to_string()),
                        ])
                    })
                    .collect();
                Reply::Array(vec![
                    Reply::bulk("master"),
                    Reply::uint(self.offset),
                    Reply::Array(list),
                ])
            }
            Some(up) => {
                let connected = matches!(up.state, LinkState::Connected { .. });
                Reply::Array(vec![
                    Reply::bulk("slave"),
                    Reply::bulk(&up.host),
                    Reply::Integer(i64::from(up.port)),
                    Reply::bulk(up.state.role_name()),
                    if connected {
                        Reply::uint(self.offset)
                    } else {
                        Reply::Integer(-1)
                    },
                ])
            }
        }
    }
}

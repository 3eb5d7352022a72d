//! The primary side: replicas' REPLCONF / PSYNC / SYNC, full syncs through snapshots, partial
//! resyncs from the backlog, the write stream, ACKs, WAIT, pings, keep-alives, timeouts and
//! output-buffer limits (Valkey `replication.c`: `syncCommand`,
//! `primaryTryPartialResynchronization`, `replconfCommand`, `replicationFeedReplicas`,
//! `waitCommand`, `replicationCron`).

use crate::config::OutputBufferLimit;
use crate::error::{CommandError, HostError};
use crate::output::{CloseReason, Event, Output, SaveInfo, SnapshotId, SnapshotTarget};
use crate::replica::LinkState;
use crate::replication::Replication;
use crate::replid::ReplId;
use crate::resp::{encode_command, parse_i64};
use crate::ConnId;
use ferrocluster_topology::{Millis, Reply};
use std::collections::BTreeMap;
use std::net::IpAddr;

/// What a replica told us with REPLCONF before PSYNC.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ReplicaHello {
    /// `REPLCONF listening-port`.
    pub(crate) listening_port: Option<u16>,
    /// `REPLCONF ip-address`, else the connection's peer address.
    pub(crate) ip: Option<String>,
    /// `capa eof`: understands the `$EOF:` framing.
    pub(crate) capa_eof: bool,
    /// `capa psync2`: understands `+CONTINUE <replid>`.
    pub(crate) capa_psync2: bool,
    /// `REPLCONF version` as `(major, minor, patch)`.
    pub(crate) version: Option<(u8, u8, u8)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReplicaState {
    /// Needs a full sync; waits for a snapshot to start (`WAIT_BGSAVE_START`).
    WaitSnapshotStart,
    /// `+FULLRESYNC` sent; the snapshot is produced or sent; the stream since the snapshot's
    /// offset is kept here (`WAIT_BGSAVE_END` / `SEND_BULK`).
    WaitSnapshotEnd { pending: Vec<u8> },
    /// Diskless RDB sent; the stream starts at the replica's first ACK
    /// (`repl_start_cmd_stream_on_ack`).
    WaitFirstAck { pending: Vec<u8> },
    /// Gets the stream (`ONLINE`).
    Online,
}

#[derive(Debug, Clone)]
pub(crate) struct ReplicaConn {
    pub(crate) hello: ReplicaHello,
    pub(crate) state: ReplicaState,
    pub(crate) ack_offset: u64,
    pub(crate) ack_time: Millis,
    /// `REPLCONF ACK <o> FACK <aof>`.
    pub(crate) fack: Option<u64>,
    /// Came with `SYNC`: gets no `+FULLRESYNC`, sends no ACKs.
    pub(crate) pre_psync: bool,
    /// When it started waiting (for the diskless delay).
    pub(crate) since: Millis,
    /// Bytes the host reports still unsent on the connection.
    pub(crate) host_pending: u64,
    /// How many bytes had been handed to the host for this connection when the full copy
    /// ended (`+CONTINUE`: when the partial resync began); `None` while the copy is still on
    /// its way. What the host holds beyond that mark is the stream.
    pub(crate) copy_end: Option<u64>,
    pub(crate) soft_since: Option<Millis>,
}

impl ReplicaConn {
    /// Stream bytes held for this replica (Valkey `getClientOutputBufferMemoryUsage` of a
    /// replica: the replication buffer it still references, never the RDB transfer): what the
    /// engine keeps while the copy is made and sent, plus the part of the host's unsent bytes
    /// past the copy. `handed` is `Outbox::replica_bytes` of the connection.
    fn held(&self, handed: u64) -> u64 {
        let own = match &self.state {
            ReplicaState::WaitSnapshotEnd { pending } | ReplicaState::WaitFirstAck { pending } => {
                pending.len() as u64
            }
            _ => 0,
        };
        let host = self
            .copy_end
            .map_or(0, |end| self.host_pending.min(handed.saturating_sub(end)));
        own + host
    }

    /// Valkey `checkClientOutputBufferLimits` ([`OutputBufferLimit::reached`]); `handed` as
    /// in [`ReplicaConn::held`].
    pub(crate) fn over_limit(&mut self, l: OutputBufferLimit, handed: u64, now: Millis) -> bool {
        let held = self.held(handed);
        l.reached(held, &mut self.soft_since, now)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Stage {
    /// The host is producing the RDB (disk: the file is being written).
    Producing,
    /// Disk: `$<len>` sent, `sent` of `len` bytes forwarded.
    Sending { len: u64, sent: u64 },
}

#[derive(Debug, Clone)]
struct Snapshot {
    id: SnapshotId,
    target: SnapshotTarget,
    offset: u64,
    mark: [u8; 40],
    stage: Stage,
    replicas: Vec<ConnId>,
}

#[derive(Debug, Clone)]
struct Waiter {
    client: ConnId,
    offset: u64,
    numreplicas: i64,
    deadline: Option<Millis>,
}

/// The primary side's state inside [`Replication`].
#[derive(Debug)]
pub(crate) struct PrimarySide {
    pub(crate) replicas: BTreeMap<ConnId, ReplicaConn>,
    hellos: BTreeMap<ConnId, ReplicaHello>,
    snapshot: Option<Snapshot>,
    next_snapshot: u64,
    waits: Vec<Waiter>,
    getack_pending: bool,
    paused: bool,
    pub(crate) next_ping: Millis,
    /// `server.replicas_eldb`: the database the stream is in (`None`: SELECT before the next
    /// write).
    pub(crate) sel_db: Option<u32>,
    pub(crate) no_replicas_since: Millis,
}

impl PrimarySide {
    pub(crate) fn new(now: Millis, ping_ms: u64) -> PrimarySide {
        PrimarySide {
            replicas: BTreeMap::new(),
            hellos: BTreeMap::new(),
            snapshot: None,
            next_snapshot: 1,
            waits: Vec::new(),
            getack_pending: false,
            paused: false,
            next_ping: now.saturating_add_ms(ping_ms),
            sel_db: None,
            no_replicas_since: now,
        }
    }

    pub(crate) fn earliest_wait_deadline(&self) -> Option<Millis> {
        self.waits.iter().filter_map(|w| w.deadline).min()
    }

    /// Answers every blocked WAIT with Valkey's error for a role change
    /// (`disconnectAllBlockedClients`).
    pub(crate) fn abort_waits(&mut self, out: &mut crate::output::Outbox) {
        for w in self.waits.drain(..) {
            out.push(Output::WaitDone {
                client: w.client,
                reply: Reply::Error(
                    "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)"
                        .to_owned(),
                ),
            });
        }
    }

    fn acked(&self, offset: u64) -> usize {
        self.replicas
            .values()
            .filter(|r| r.state == ReplicaState::Online && r.ack_offset >= offset)
            .count()
    }
}

/// What [`Replication::handle_command`] did with a command.
#[derive(Debug, Clone, PartialEq)]
pub enum CommandOutcome {
    /// Send this reply to the client (REPLCONF options: `+OK`).
    Reply(Reply),
    /// No reply (REPLCONF ACK, REPLCONF GETACK on a primary, PSYNC / SYNC whose answer comes
    /// as [`Output::ToReplica`]).
    NoReply,
}

/// Replicas whose `REPLCONF version` is above this apply a replicated `CLUSTER SETSLOT`
/// (Valkey `clusterCommandSetSlot`: `replica_version > 0x702ff`, 7.2.255); older ones (and
/// Redis 7.0, which sends no version) are not waited for.
pub const SETSLOT_REPLICA_MIN_VERSION: (u8, u8, u8) = (7, 2, 255);

fn lower(b: &[u8]) -> Vec<u8> {
    b.to_ascii_lowercase()
}

/// The version a replica sends in `REPLCONF version <v>` as `(major, minor, patch)`, each
/// 0..=255 (Valkey `version2num`); `None` when `v` is not `major.minor.patch` in decimal.
/// A Valkey 8+ primary waits for the acknowledgement of a replicated `CLUSTER SETSLOT` only
/// from replicas above `7.2.255` ([`SETSLOT_REPLICA_MIN_VERSION`]).
pub fn parse_version(v: &[u8]) -> Option<(u8, u8, u8)> {
    let s = std::str::from_utf8(v).ok()?;
    let mut it = s.split('.');
    let mut part = || -> Option<u8> {
        let p = it.next()?;
        if p.is_empty() || !p.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        p.parse().ok()
    };
    let v = (part()?, part()?, part()?);
    it.next().is_none().then_some(v)
}

impl Replication {
    /// A replication command from client connection `conn`: `REPLCONF ...`, `PSYNC <replid>
    /// <offset>` or `SYNC` (`argv[0]` case-insensitive). `peer` is the connection's remote
    /// address (shown for replicas that send no `REPLCONF ip-address`).
    ///
    /// * `REPLCONF listening-port / ip-address / capa / version / rdb-only / rdb-channel`:
    ///   remembered for the connection, reply `+OK`; unknown capas are ignored;
    ///   `REPLCONF ACK <offset> [FACK <aofoffset>]` from a replica: recorded, no reply (it puts
    ///   a diskless-synced replica online); `REPLCONF GETACK`: no reply on a primary.
    /// * `PSYNC`: `+CONTINUE [<replid>]` plus the backlog from the asked offset when our replid
    ///   (or replid2, up to `second_repl_offset`) matches and the backlog covers it; otherwise a
    ///   full sync: `+FULLRESYNC <replid> <offset>` when its snapshot starts
    ///   ([`Output::StartSnapshot`]). `SYNC` is a full sync without `+FULLRESYNC`.
    ///
    /// After PSYNC / SYNC the connection is a replica: the host MUST write to it only what
    /// [`Output::ToReplica`] says, keep passing its commands (REPLCONF ACK) here, and call
    /// [`Replication::handle_conn_closed`] when it closes.
    ///
    /// # Errors
    /// [`CommandError`] with Valkey's text; nothing changed (REPLCONF options before a failing
    /// one stay set, as in Valkey).
    pub fn handle_command<A: AsRef<[u8]>>(
        &mut self,
        conn: ConnId,
        peer: Option<IpAddr>,
        argv: &[A],
        now: Millis,
    ) -> Result<CommandOutcome, CommandError> {
        let now = self.clock(now);
        let name = argv.first().map(|a| lower(a.as_ref())).unwrap_or_default();
        match name.as_slice() {
            b"replconf" => self.replconf(conn, peer, argv, now),
            b"psync" => {
                if argv.len() < 3 {
                    return Err(CommandError::WrongArity("psync"));
                }
                self.sync(conn, peer, Some((argv[1].as_ref(), argv[2].as_ref())), now)
            }
            b"sync" => {
                if argv.len() != 1 {
                    return Err(CommandError::WrongArity("sync"));
                }
                self.sync(conn, peer, None, now)
            }
            _ => Err(CommandError::UnknownCommand(
                String::from_utf8_lossy(&name).into_owned(),
            )),
        }
    }

    fn replconf<A: AsRef<[u8]>>(
        &mut self,
        conn: ConnId,
        peer: Option<IpAddr>,
        argv: &[A],
        now: Millis,
    ) -> Result<CommandOutcome, CommandError> {
        if argv.len().is_multiple_of(2) {
            return Err(CommandError::Syntax);
        }
        let is_replica = self.primary.replicas.contains_key(&conn);
        let mut j = 1;
        while j < argv.len() {
            let opt = lower(argv[j].as_ref());
            let val = argv[j + 1].as_ref();
            match opt.as_slice() {
                b"ack" => {
                    let Some(r) = self.primary.replicas.get_mut(&conn) else {
                        return Ok(CommandOutcome::NoReply);
                    };
                    let Some(off) = parse_i64(val) else {
                        return Ok(CommandOutcome::NoReply);
                    };
                    if off > 0 && off as u64 > r.ack_offset {
                        r.ack_offset = off as u64;
                    }
                    if argv.len() > j + 3 && argv[j + 2].as_ref().eq_ignore_ascii_case(b"fack") {
                        if let Some(f) = parse_i64(argv[j + 3].as_ref()) {
                            if f >= 0 && Some(f as u64) > r.fack {
                                r.fack = Some(f as u64);
                            }
                        }
                    }
                    r.ack_time = now;
                    if let ReplicaState::WaitFirstAck { pending } = &mut r.state {
                        let pending = std::mem::take(pending);
                        r.state = ReplicaState::Online;
                        self.out.send_replica(conn, &pending);
                        self.out.event(Event::ReplicaOnline { conn });
                    }
                    self.process_waits();
                    return Ok(CommandOutcome::NoReply);
                }
                b"getack" => return Ok(CommandOutcome::NoReply),
                _ => {}
            }
            let hello = if is_replica {
                &mut self
                    .primary
                    .replicas
                    .get_mut(&conn)
                    .expect("checked above")
                    .hello
            } else {
                self.primary.hellos.entry(conn).or_default()
            };
            if hello.ip.is_none() {
                hello.ip = peer.map(|p| p.to_string());
            }
            match opt.as_slice() {
                b"listening-port" => {
                    let p = parse_i64(val).ok_or(CommandError::NotAnInteger)?;
                    hello.listening_port = u16::try_from(p).ok();
                }
                b"ip-address" => {
                    // NET_HOST_STR_LEN is 256 with the terminating NUL.
                    if val.len() >= 256 {
                        return Err(CommandError::IpTooLong(val.len()));
                    }
                    hello.ip = Some(String::from_utf8_lossy(val).into_owned());
                }
                b"capa" => match lower(val).as_slice() {
                    b"eof" => hello.capa_eof = true,
                    b"psync2" => hello.capa_psync2 = true,
                    // dual-channel and compression capas: not offered by this primary, ignored
                    // as Valkey ignores capas it does not understand.
                    _ => {}
                },
                b"version" => {
                    hello.version = Some(parse_version(val).ok_or_else(|| {
                        CommandError::BadVersion(String::from_utf8_lossy(val).into_owned())
                    })?);
                }
                b"rdb-only" | b"rdb-channel" => {
                    // Valkey validates 0|1; we serve neither the RDB-only nor the dual-channel
                    // sync, so a replica that asks falls back to the plain protocol.
                    match parse_i64(val) {
                        Some(0 | 1) => {}
                        _ => return Err(CommandError::NotAnInteger),
                    }
                }
                _ => {
                    return Err(CommandError::UnknownOption(
                        String::from_utf8_lossy(argv[j].as_ref()).into_owned(),
                    ))
                }
            }
            j += 2;
        }
        Ok(CommandOutcome::Reply(Reply::ok()))
    }

    fn sync(
        &mut self,
        conn: ConnId,
        peer: Option<IpAddr>,
        psync: Option<(&[u8], &[u8])>,
        now: Millis,
    ) -> Result<CommandOutcome, CommandError> {
        if self.primary.replicas.contains_key(&conn) {
            // Valkey: SYNC/PSYNC from a connection that already is a replica is ignored.
            return Ok(CommandOutcome::NoReply);
        }
        if let Some(up) = &self.upstream {
            if !matches!(up.state, LinkState::Connected { .. }) {
                return Err(CommandError::NoPrimaryLink);
            }
        }
        let psync_offset = match psync {
            Some((_, off)) => Some(parse_i64(off).ok_or(CommandError::NotAnInteger)?),
            None => None,
        };
        let mut hello = self.primary.hellos.remove(&conn).unwrap_or_default();
        if hello.ip.is_none() {
            hello.ip = peer.map(|p| p.to_string());
        }
        let mut r = ReplicaConn {
            hello,
            state: ReplicaState::WaitSnapshotStart,
            ack_offset: 0,
            ack_time: now,
            fack: None,
            pre_psync: psync.is_none(),
            since: now,
            host_pending: 0,
            copy_end: None,
            soft_since: None,
        };
        if let (Some((id, _)), Some(off)) = (psync, psync_offset) {
            if let Some(from) = self.partial_from(id, off) {
                let backlog = self.backlog.since(from).unwrap_or_default();
                r.state = ReplicaState::Online;
                let line = if r.hello.capa_psync2 {
                    format!("+CONTINUE {}\r\n", self.replid)
                } else {
                    "+CONTINUE\r\n".to_owned()
                };
                r.copy_end = Some(self.out.replica_bytes(conn));
                self.primary.replicas.insert(conn, r);
                self.out.send_replica(conn, line.as_bytes());
                self.out.send_replica(conn, &backlog);
                self.out.event(Event::PartialResyncAccepted {
                    conn,
                    bytes: backlog.len() as u64,
                });
                return Ok(CommandOutcome::NoReply);
            }
        }
        // Full resynchronization.
        if !self.backlog_active {
            // The backlog was freed by repl-backlog-ttl: a new history starts (Valkey creates the
            // backlog with a new replid and no replid2).
            self.replid = ReplId::random(&mut self.rng);
            self.replid2 = ReplId::ZERO;
            self.second_offset = None;
            self.backlog.reset(self.offset);
            self.backlog_active = true;
        }
        self.out.event(Event::FullSyncNeeded { conn });
        // CASE 1 of syncCommand: a disk snapshot still being produced, with a replica already
        // collecting the stream since its offset: attach to it.
        let attach = self.primary.snapshot.as_ref().and_then(|s| {
            (s.target == SnapshotTarget::Disk && s.stage == Stage::Producing)
                .then(|| s.replicas.first().copied())
                .flatten()
                .map(|first| (s.offset, first))
        });
        if let Some((offset, first)) = attach {
            let pending = match &self.primary.replicas[&first].state {
                ReplicaState::WaitSnapshotEnd { pending } => pending.clone(),
                _ => Vec::new(),
            };
            r.state = ReplicaState::WaitSnapshotEnd { pending };
            let pre = r.pre_psync;
            self.primary.replicas.insert(conn, r);
            if !pre {
                let line = format!("+FULLRESYNC {} {}\r\n", self.replid, offset);
                self.out.send_replica(conn, line.as_bytes());
            }
            if let Some(s) = self.primary.snapshot.as_mut() {
                s.replicas.push(conn);
            }
            self.primary.sel_db = None;
            return Ok(CommandOutcome::NoReply);
        }
        self.primary.replicas.insert(conn, r);
        self.maybe_start_snapshot(now);
        Ok(CommandOutcome::NoReply)
    }

    /// The first byte to send for `PSYNC <id> <off>`, when a partial resync is possible.
    fn partial_from(&self, id: &[u8], off: i64) -> Option<u64> {
        let by_id1 = self.replid.matches(id);
        let by_id2 = self.replid2.matches(id)
            && self.replid2 != ReplId::ZERO
            && self
                .second_offset
                .is_some_and(|s| off >= 0 && off as u64 <= s);
        if !(by_id1 || by_id2) || off < 0 || !self.backlog_active {
            return None;
        }
        let from = off as u64;
        self.backlog.since(from).map(|_| from)
    }

    /// Starts a snapshot when replicas wait for one and none is in progress (Valkey
    /// `shouldStartChildReplication`): at once for a disk snapshot, after
    /// `repl-diskless-sync-delay` (or `repl-diskless-sync-max-replicas` waiting) for a diskless
    /// one.
    fn maybe_start_snapshot(&mut self, now: Millis) {
        if self.primary.snapshot.is_some() {
            return;
        }
        let waiting: Vec<ConnId> = self
            .primary
            .replicas
            .iter()
            .filter(|(_, r)| r.state == ReplicaState::WaitSnapshotStart)
            .map(|(c, _)| *c)
            .collect();
        if waiting.is_empty() {
            return;
        }
        let all_eof = waiting
            .iter()
            .all(|c| self.primary.replicas[c].hello.capa_eof);
        let sockets = self.cfg.diskless_sync && all_eof;
        if sockets {
            let max_idle = waiting
                .iter()
                .map(|c| now.since(self.primary.replicas[c].since))
                .max()
                .unwrap_or(0);
            let enough = self.cfg.diskless_sync_max_replicas > 0
                && waiting.len() >= self.cfg.diskless_sync_max_replicas;
            if !(enough || max_idle >= self.cfg.diskless_sync_delay_ms) {
                return;
            }
        }
        let id = SnapshotId(self.primary.next_snapshot);
        self.primary.next_snapshot += 1;
        // The EOF mark: 40 random hex characters, like a replid (Valkey getRandomHexChars).
        let mark = *ReplId::random(&mut self.rng).as_bytes();
        let target = if sockets {
            SnapshotTarget::Sockets
        } else {
            SnapshotTarget::Disk
        };
        let info = SaveInfo {
            replid: self.replid,
            offset: self.offset,
            stream_db: self.primary.sel_db.unwrap_or(0),
        };
        self.out.push(Output::StartSnapshot { id, target, info });
        for c in &waiting {
            let r = self.primary.replicas.get_mut(c).expect("listed above");
            r.state = ReplicaState::WaitSnapshotEnd {
                pending: Vec::new(),
            };
            if !r.pre_psync {
                let line = format!("+FULLRESYNC {} {}\r\n", self.replid, self.offset);
                self.out.send_replica(*c, line.as_bytes());
            }
            if sockets {
                let mut pre = b"$EOF:".to_vec();
                pre.extend_from_slice(&mark);
                pre.extend_from_slice(b"\r\n");
                self.out.send_replica(*c, &pre);
            }
        }
        // replicationSetupReplicaForFullResync: the stream after the snapshot starts with
        // SELECT.
        self.primary.sel_db = None;
        self.primary.snapshot = Some(Snapshot {
            id,
            target,
            offset: self.offset,
            mark,
            stage: Stage::Producing,
            replicas: waiting,
        });
    }

    fn snapshot_mut(&mut self, id: SnapshotId) -> Result<&mut Snapshot, HostError> {
        match self.primary.snapshot.as_mut() {
            Some(s) if s.id == id => Ok(s),
            _ => Err(HostError::UnknownSnapshot(id.0)),
        }
    }

    /// A disk snapshot's file is complete and `len` bytes long: its replicas get `$<len>\r\n`
    /// and then the bytes of [`Replication::handle_snapshot_chunk`]. Replicas arriving from now
    /// on wait for the next snapshot.
    ///
    /// # Errors
    /// [`HostError`] for an unknown snapshot, a diskless one, or a second call; nothing
    /// changed.
    pub fn handle_snapshot_ready(
        &mut self,
        id: SnapshotId,
        len: u64,
        now: Millis,
    ) -> Result<(), HostError> {
        self.clock(now);
        let s = self.snapshot_mut(id)?;
        if s.target != SnapshotTarget::Disk || s.stage != Stage::Producing {
            return Err(HostError::SnapshotOrder {
                id: id.0,
                what: "length given for a diskless snapshot or twice",
            });
        }
        s.stage = Stage::Sending { len, sent: 0 };
        let pre = format!("${len}\r\n");
        for c in s.replicas.clone() {
            self.out.send_replica(c, pre.as_bytes());
        }
        Ok(())
    }

    /// The next bytes of a snapshot's RDB (disk: of the file, after
    /// [`Replication::handle_snapshot_ready`]; diskless: as they are produced). They go to every
    /// replica of the snapshot.
    ///
    /// # Errors
    /// [`HostError`] for an unknown snapshot, a disk chunk before its length or past it;
    /// nothing changed.
    pub fn handle_snapshot_chunk(
        &mut self,
        id: SnapshotId,
        bytes: &[u8],
        now: Millis,
    ) -> Result<(), HostError> {
        self.clock(now);
        let s = self.snapshot_mut(id)?;
        if s.target == SnapshotTarget::Disk {
            match &mut s.stage {
                Stage::Sending { len, sent } if *sent + bytes.len() as u64 <= *len => {
                    *sent += bytes.len() as u64;
                }
                Stage::Sending { .. } => {
                    return Err(HostError::SnapshotOrder {
                        id: id.0,
                        what: "more bytes than the announced length",
                    })
                }
                Stage::Producing => {
                    return Err(HostError::SnapshotOrder {
                        id: id.0,
                        what: "chunk before the length",
                    })
                }
            }
        }
        for c in s.replicas.clone() {
            self.out.send_replica(c, bytes);
        }
        Ok(())
    }

    /// The snapshot's RDB is complete. Disk: its replicas go online and get the stream kept
    /// since the snapshot's offset. Diskless: they get the EOF mark and go online at their
    /// first `REPLCONF ACK`. A snapshot for replicas that wait starts next.
    ///
    /// # Errors
    /// [`HostError`] for an unknown snapshot or a disk one whose bytes fall short of its
    /// length; nothing changed.
    pub fn handle_snapshot_end(&mut self, id: SnapshotId, now: Millis) -> Result<(), HostError> {
        let now = self.clock(now);
        let s = self.snapshot_mut(id)?;
        if s.target == SnapshotTarget::Disk
            && !matches!(s.stage, Stage::Sending { len, sent } if len == sent)
        {
            return Err(HostError::SnapshotOrder {
                id: id.0,
                what: "end before all announced bytes",
            });
        }
        let s = self.primary.snapshot.take().expect("checked above");
        for c in s.replicas {
            let Some(r) = self.primary.replicas.get_mut(&c) else {
                continue;
            };
            let ReplicaState::WaitSnapshotEnd { pending } = &mut r.state else {
                continue;
            };
            let pending = std::mem::take(pending);
            match s.target {
                SnapshotTarget::Disk => {
                    r.state = ReplicaState::Online;
                    r.ack_time = now;
                    r.copy_end = Some(self.out.replica_bytes(c));
                    self.out.send_replica(c, &pending);
                    self.out.event(Event::ReplicaOnline { conn: c });
                }
                SnapshotTarget::Sockets => {
                    r.state = ReplicaState::WaitFirstAck { pending };
                    r.ack_time = now;
                    self.out.send_replica(c, &s.mark);
                    r.copy_end = Some(self.out.replica_bytes(c));
                }
            }
        }
        self.maybe_start_snapshot(now);
        Ok(())
    }

    /// The snapshot could not be produced: its replicas are disconnected (Valkey
    /// `updateReplicasWaitingBgsave` on a BGSAVE error) and retry.
    ///
    /// # Errors
    /// [`HostError::UnknownSnapshot`]; nothing changed.
    pub fn handle_snapshot_failed(&mut self, id: SnapshotId, now: Millis) -> Result<(), HostError> {
        let now = self.clock(now);
        self.snapshot_mut(id)?;
        let s = self.primary.snapshot.take().expect("checked above");
        for c in s.replicas {
            if self.primary.replicas.contains_key(&c) {
                self.close_replica(c, CloseReason::SnapshotFailed);
            }
        }
        self.maybe_start_snapshot(now);
        Ok(())
    }

    /// Propagates one write: `argv` executed in database `db`. Emits `SELECT db` first when the
    /// stream is in another database (Valkey `replicationFeedReplicas`), appends to the
    /// backlog, counts the offset and sends it to the replicas. Returns the offset after the
    /// write (the client's write offset for WAIT). A `MULTI` ... `EXEC` block is fed as its
    /// commands, wrappers included.
    ///
    /// # Errors
    /// [`HostError::NotPrimary`] on a replica; [`HostError::BadDatabase`]. Nothing changed.
    pub fn feed<A: AsRef<[u8]>>(
        &mut self,
        db: u32,
        argv: &[A],
        now: Millis,
    ) -> Result<u64, HostError> {
        self.feed_in(Some(db), argv, now)
    }

    /// Propagates a command that touches no database: the `MULTI` and `EXEC` around an
    /// execution unit's writes (Valkey `propagatePendingCommands`, which feeds them with
    /// `dbid -1`): no `SELECT` goes before it, so the first write inside the block carries
    /// its own. Returns the offset after it.
    ///
    /// # Errors
    /// [`HostError::NotPrimary`] on a replica. Nothing changed.
    pub fn feed_without_db<A: AsRef<[u8]>>(
        &mut self,
        argv: &[A],
        now: Millis,
    ) -> Result<u64, HostError> {
        self.feed_in(None, argv, now)
    }

    /// [`Replication::feed`] (`db` given) or [`Replication::feed_without_db`].
    fn feed_in<A: AsRef<[u8]>>(
        &mut self,
        db: Option<u32>,
        argv: &[A],
        now: Millis,
    ) -> Result<u64, HostError> {
        self.clock(now);
        if self.upstream.is_some() {
            return Err(HostError::NotPrimary);
        }
        let mut bytes = Vec::new();
        if let Some(db) = db {
            if db >= self.cfg.databases {
                return Err(HostError::BadDatabase(db));
            }
            if self.primary.sel_db != Some(db) {
                encode_command(
                    &mut bytes,
                    &[b"SELECT".as_slice(), db.to_string().as_bytes()],
                );
                self.primary.sel_db = Some(db);
            }
        }
        encode_command(&mut bytes, argv);
        self.write_stream(&bytes);
        Ok(self.offset)
    }

    /// A command that touches no database (`ping`, `REPLCONF GETACK *`): no SELECT.
    fn feed_no_db(&mut self, argv: &[&[u8]]) {
        let mut bytes = Vec::new();
        encode_command(&mut bytes, argv);
        self.write_stream(&bytes);
    }

    /// A client connection closed: forget it as a replica (its snapshot goes on for the
    /// others), its REPLCONF state, and its blocked WAIT. Harmless for any connection.
    pub fn handle_conn_closed(&mut self, conn: ConnId, now: Millis) {
        let now = self.clock(now);
        self.primary.hellos.remove(&conn);
        self.primary.waits.retain(|w| w.client != conn);
        self.out.forget_replica(conn);
        if self.primary.replicas.remove(&conn).is_some() {
            self.after_replica_removed(conn, now);
        }
    }

    fn after_replica_removed(&mut self, conn: ConnId, now: Millis) {
        if let Some(s) = self.primary.snapshot.as_mut() {
            s.replicas.retain(|c| *c != conn);
        }
        if self.primary.replicas.is_empty() {
            self.primary.no_replicas_since = now;
        }
        self.process_waits();
    }

    pub(crate) fn close_replica(&mut self, conn: ConnId, reason: CloseReason) {
        if self.primary.replicas.remove(&conn).is_some() {
            self.out.forget_replica(conn);
            self.out.push(Output::CloseReplica { conn, reason });
            let now = self.now;
            self.after_replica_removed(conn, now);
        }
    }

    /// `client-output-buffer-limit replica` from now on (CONFIG SET; Valkey
    /// `checkClientOutputBufferLimits` reads the limits in force at each check): a replica
    /// already over it is closed at the next cron ([`Replication::handle_timeout`]) or report
    /// ([`Replication::handle_replica_pending`]).
    pub fn set_output_buffer_limit(&mut self, limit: OutputBufferLimit) {
        self.cfg.output_buffer_limit = limit;
    }

    /// The host's count of bytes handed to it for replica `conn` (its `ToReplica` bytes) but
    /// not yet sent on the socket, for `client-output-buffer-limit replica`. Only the part
    /// past the full copy counts, as Valkey counts a replica's replication buffer and not its
    /// RDB transfer: a slow replica still reading a large copy is not cut. A host SHOULD report
    /// it when it changes notably (the server: every 10 ms while it changed); a replica over
    /// the limit is closed (`CloseReplica` with [`CloseReason::OutputBufferLimit`]).
    pub fn handle_replica_pending(&mut self, conn: ConnId, bytes: u64, now: Millis) {
        let now = self.clock(now);
        let limit = self.cfg.output_buffer_limit;
        let over = match self.primary.replicas.get_mut(&conn) {
            Some(r) => {
                r.host_pending = bytes;
                r.over_limit(limit, self.out.replica_bytes(conn), now)
            }
            None => false,
        };
        if over {
            self.close_replica(conn, CloseReason::OutputBufferLimit);
        }
    }

    /// A bare newline from replica `conn` (a loading replica's keep-alive, Valkey
    /// `replicationSendNewlineToPrimary`): refreshes its ACK time.
    pub fn handle_replica_newline(&mut self, conn: ConnId, now: Millis) {
        let now = self.clock(now);
        if let Some(r) = self.primary.replicas.get_mut(&conn) {
            r.ack_time = now;
        }
    }

    /// Whether writes are paused for a failover (Valkey `PAUSE_ACTION_REPLICA`): while paused
    /// no `ping` and no `REPLCONF GETACK` enter the stream, so the offsets a manual failover
    /// compares stay put.
    pub fn handle_pause(&mut self, paused: bool, now: Millis) {
        self.clock(now);
        self.primary.paused = paused;
    }

    /// `WAIT numreplicas timeout` from `client`, whose last write ended at `client_offset` (the
    /// value [`Replication::feed`] returned; 0 if it wrote nothing). Returns the reply when it
    /// can be given now (enough replicas acknowledged); `None` when the client blocks: the
    /// reply comes later as [`Output::WaitDone`] (on enough ACKs or at the timeout, in ms,
    /// 0 = none), and `REPLCONF GETACK *` is sent to the replicas. A host that cannot block
    /// the client (inside MULTI or a script) uses [`Replication::acked_replicas`] instead.
    ///
    /// # Errors
    /// [`CommandError`] with Valkey's text (arity, a replica, a bad count or timeout); nothing
    /// changed.
    pub fn handle_wait<A: AsRef<[u8]>>(
        &mut self,
        client: ConnId,
        argv: &[A],
        client_offset: u64,
        now: Millis,
    ) -> Result<Option<Reply>, CommandError> {
        let now = self.clock(now);
        if argv.len() != 3 {
            return Err(CommandError::WrongArity("wait"));
        }
        if self.upstream.is_some() {
            return Err(CommandError::WaitOnReplica);
        }
        let numreplicas = parse_i64(argv[1].as_ref()).ok_or(CommandError::NotAnInteger)?;
        let timeout = parse_i64(argv[2].as_ref()).ok_or(CommandError::TimeoutNotInteger)?;
        if timeout < 0 {
            return Err(CommandError::TimeoutNegative);
        }
        let acked = self.primary.acked(client_offset);
        if acked as i64 >= numreplicas {
            return Ok(Some(Reply::uint(acked as u64)));
        }
        self.primary.waits.push(Waiter {
            client,
            offset: client_offset,
            numreplicas,
            deadline: (timeout > 0).then(|| now.saturating_add_ms(timeout as u64)),
        });
        self.primary.getack_pending = true;
        Ok(None)
    }

    /// Asks the replicas for an acknowledgement now: `REPLCONF GETACK *` enters the stream
    /// at the next [`Replication::poll_output`] (once, however often it is asked before;
    /// not while writes are paused, not on a replica). Valkey
    /// `replicationRequestAckFromReplicas`, which a primary calls after replicating a
    /// `CLUSTER SETSLOT` it waits on, so the replicas' ACKs come at once rather than at their
    /// next 1 s cron.
    pub fn request_acks(&mut self) {
        self.primary.getack_pending = true;
    }

    /// Online replicas whose acknowledged offset is at least `offset` (Valkey
    /// `replicationCountAcksByOffset`).
    pub fn acked_replicas(&self, offset: u64) -> usize {
        self.primary.acked(offset)
    }

    fn process_waits(&mut self) {
        let mut i = 0;
        while i < self.primary.waits.len() {
            let w = &self.primary.waits[i];
            let n = self.primary.acked(w.offset);
            if n as i64 >= w.numreplicas {
                let w = self.primary.waits.remove(i);
                self.out.push(Output::WaitDone {
                    client: w.client,
                    reply: Reply::uint(n as u64),
                });
            } else {
                i += 1;
            }
        }
    }

    pub(crate) fn flush_getack(&mut self) {
        if self.primary.getack_pending && !self.primary.paused && self.upstream.is_none() {
            self.primary.getack_pending = false;
            if !self.primary.replicas.is_empty() {
                self.feed_no_db(&[b"REPLCONF", b"GETACK", b"*"]);
            }
        }
    }

    /// WAIT deadlines (checked on every timer call, ms precision).
    pub(crate) fn primary_deadlines(&mut self, now: Millis) {
        let mut i = 0;
        while i < self.primary.waits.len() {
            if self.primary.waits[i].deadline.is_some_and(|d| now >= d) {
                let w = self.primary.waits.remove(i);
                let n = self.primary.acked(w.offset);
                self.out.push(Output::WaitDone {
                    client: w.client,
                    reply: Reply::uint(n as u64),
                });
            } else {
                i += 1;
            }
        }
    }

    /// The once-a-second part of Valkey `replicationCron` for the primary side.
    pub(crate) fn primary_cron(&mut self, now: Millis) {
        let top = self.upstream.is_none();
        // Ping replicas (a top-level primary only: a replica proxies its primary's pings).
        if now >= self.primary.next_ping {
            self.primary.next_ping = now.saturating_add_ms(self.cfg.ping_period_ms);
            if top && !self.primary.replicas.is_empty() && !self.primary.paused {
                self.feed_no_db(&[b"ping"]);
            }
        }
        // Keep-alive newlines to replicas waiting for their RDB to start.
        let disk_producing = self
            .primary
            .snapshot
            .as_ref()
            .is_some_and(|s| s.target == SnapshotTarget::Disk && s.stage == Stage::Producing);
        let presync: Vec<ConnId> = self
            .primary
            .replicas
            .iter()
            .filter(|(_, r)| match r.state {
                ReplicaState::WaitSnapshotStart => true,
                ReplicaState::WaitSnapshotEnd { .. } => disk_producing,
                _ => false,
            })
            .map(|(c, _)| *c)
            .collect();
        for c in presync {
            self.out.send_replica(c, b"\n");
        }
        // Timed-out replicas and soft output-buffer limits.
        let limit = self.cfg.output_buffer_limit;
        let timeout = self.cfg.timeout_ms;
        let mut drop = Vec::new();
        for (c, r) in self.primary.replicas.iter_mut() {
            let streaming = matches!(
                r.state,
                ReplicaState::Online | ReplicaState::WaitFirstAck { .. }
            );
            if streaming && !r.pre_psync && now.since(r.ack_time) > timeout {
                drop.push((*c, CloseReason::Timeout));
            } else if r.over_limit(limit, self.out.replica_bytes(*c), now) {
                drop.push((*c, CloseReason::OutputBufferLimit));
            }
        }
        for (c, why) in drop {
            self.close_replica(c, why);
        }
        // repl-backlog-ttl on a primary without replicas.
        if top
            && self.primary.replicas.is_empty()
            && self.cfg.backlog_ttl_ms > 0
            && self.backlog_active
            && now.since(self.primary.no_replicas_since) > self.cfg.backlog_ttl_ms
        {
            self.replid = ReplId::random(&mut self.rng);
            self.replid2 = ReplId::ZERO;
            self.second_offset = None;
            self.backlog.reset(self.offset);
            self.backlog_active = false;
        }
        self.maybe_start_snapshot(now);
    }

    /// The replicas as INFO shows them, in connection order.
    pub fn replicas(&self) -> Vec<crate::info::ReplicaInfo> {
        self.primary
            .replicas
            .iter()
            .map(|(c, r)| crate::info::ReplicaInfo {
                conn: *c,
                ip: r.hello.ip.clone(),
                port: r.hello.listening_port,
                state: match (&r.state, &self.primary.snapshot) {
                    (ReplicaState::WaitSnapshotStart, _) => "wait_bgsave",
                    (ReplicaState::WaitSnapshotEnd { .. }, Some(s))
                        if matches!(s.stage, Stage::Sending { .. }) =>
                    {
                        "send_bulk"
                    }
                    (ReplicaState::WaitSnapshotEnd { .. }, _) => "wait_bgsave",
                    (ReplicaState::WaitFirstAck { .. } | ReplicaState::Online, _) => "online",
                },
                offset: r.ack_offset,
                last_ack: r.ack_time,
                version: r.hello.version,
            })
            .collect()
    }
}

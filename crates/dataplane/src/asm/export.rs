//! The source side: the handshake replies, the snapshot, the held and streamed writes, the
//! target's `SYNCSLOTS` messages, the output-buffer limit (Valkey `slotExportJob*`,
//! `childSnapshotForSyncSlot`, `clusterFeedSlotExportJobs`).

use super::{AsmError, AsmEvent, AsmOutput, AsmPlane, Link};
use crate::aof::{AofValue, AofWriter};
use crate::resp::{encode_command, CommandReader, LineReader};
use ferrocluster_migration::{
    AuthReply, ConnId, JobName, MigrationInput, SnapshotResult, SyncSlots,
};
use ferrocluster_slot::{Slot, SlotRange, SlotSet};
use ferrocluster_topology::Millis;
use std::collections::VecDeque;

/// How the host's snapshot content relates to the writes it feeds; see the module docs of
/// [`crate::asm`] for the rule each mode puts on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotMode {
    /// The content is the keyspace as of [`AsmPlane::start_snapshot`] (a fork, a clone, a
    /// read view): every write fed after it is streamed. Steps may stop between pages.
    PointInTime,
    /// Each slot's content is the slot as of the step that reads it (the host keeps writes
    /// out during the step): writes to slots not read yet are dropped, writes to slots read
    /// are streamed. A step reads whole slots.
    SlotAtomic,
    /// Slot by slot like [`SnapshotMode::SlotAtomic`], but a slot is read in pages and a
    /// step may stop between them (the host holds its lock per step, not per slot), so a
    /// slot's content is fuzzy: each key as of the step that read it. Writes to slots not
    /// read yet are dropped, writes to slots wholly read are streamed as fed; for the slot
    /// being read ([`AsmPlane::wants_key_state`]) the fed commands are dropped and the host
    /// feeds the whole state of every key a write changed instead
    /// ([`AsmPlane::feed_key_state`]), which the target applies idempotently (`DEL key` and
    /// the commands that rebuild it). The [`SlotSource`] walk may visit a key more than once
    /// in this mode (see there).
    SlotPaged,
}

/// What [`AsmPlane::snapshot_step`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotProgress {
    /// More to read: call again (when [`AsmPlane::wants_snapshot_step`]).
    More,
    /// The snapshot is written, `SYNCSLOTS SNAPSHOT-EOF` included; the node hears
    /// `SnapshotDone`.
    Done,
    /// A value could not be written ([`AsmEvent::SnapshotFailed`]); the node hears
    /// `SnapshotDone` with `Failed` and ends the job.
    Failed,
}

/// What [`SlotSource::page`] calls per key: `(key, value, expire_at_ms)`.
pub type KeyVisitor<'a, V> = dyn FnMut(&[u8], &V, Option<i64>) + 'a;

/// The host's keyspace as the snapshot reads it: the keys of one slot of one database, page
/// by page. The server implements it over its `KvStore` (`slot_page`), the simulator over its
/// model.
pub trait SlotSource {
    /// The stored values.
    type Value: AofValue + ?Sized;

    /// Calls `f(key, value, expire_at_ms)` for at most `max` keys of `slot` in database `db`,
    /// starting at `cursor` (0: the slot's start), and returns the cursor of the next page
    /// (0: the slot is done in this database). Every key present throughout a walk over the
    /// pages MUST be visited exactly once ([`SnapshotMode::SlotPaged`]: at least once; a key
    /// seen again in a later step is written again, a list with a `DEL` first);
    /// `expire_at_ms` is the absolute expiry (Unix ms). Keys already expired MAY be skipped.
    fn page(
        &self,
        db: u32,
        slot: Slot,
        cursor: u64,
        max: usize,
        f: &mut KeyVisitor<'_, Self::Value>,
    ) -> u64;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Auth,
    Establish,
}

#[derive(Debug)]
struct Snap {
    mode: SnapshotMode,
    /// Every slot of the ranges, in the order the snapshot reads them.
    order: Vec<Slot>,
    /// Index in `order` of the slot being read.
    next: usize,
    /// The database being read in that slot.
    db: u32,
    /// The page cursor in that database (0: start).
    cursor: u64,
    /// Whether the `SELECT` of that (slot, db) section was written.
    selected: bool,
    /// Slots wholly read.
    read: SlotSet,
    keys: u64,
    bytes: u64,
}

impl Snap {
    /// The slot a [`SnapshotMode::SlotPaged`] snapshot has begun and not finished reading.
    fn in_progress(&self) -> Option<Slot> {
        (self.mode == SnapshotMode::SlotPaged
            && self.next < self.order.len()
            && (self.db > 0 || self.cursor != 0))
            .then(|| self.order[self.next])
    }
}

#[derive(Debug)]
enum Phase {
    /// Before the snapshot: writes are not forwarded (the snapshot will contain them).
    Handshake,
    /// From `start_snapshot` until the stream begins: writes are held (or dropped for slots
    /// a slot-atomic snapshot has not read yet). `snap` is `None` once it is written.
    Snapshot {
        snap: Option<Box<Snap>>,
        begin_requested: bool,
    },
    /// Writes are sent as fed.
    Streaming,
}

/// One export data connection.
#[derive(Debug)]
pub(super) struct ExportLink {
    pub(super) job: JobName,
    expect: VecDeque<Expect>,
    lines: LineReader,
    /// The target's messages, once the ESTABLISH reply was read.
    reader: Option<CommandReader>,
    slots: SlotSet,
    phase: Phase,
    /// The database the target is in after what was sent so far (a new connection: 0).
    target_db: u32,
    held: Vec<u8>,
    /// The database of the first held write, and of the last.
    held_first_db: Option<u32>,
    held_db: u32,
    /// Bytes the host reports not yet taken by the socket.
    unsent: u64,
    pub(super) soft_since: Option<Millis>,
}

impl ExportLink {
    fn new(job: JobName) -> ExportLink {
        ExportLink {
            job,
            expect: VecDeque::new(),
            lines: LineReader::default(),
            reader: None,
            slots: SlotSet::new(),
            phase: Phase::Handshake,
            target_db: 0,
            held: Vec::new(),
            held_first_db: None,
            held_db: 0,
            unsent: 0,
            soft_since: None,
        }
    }

    /// Bytes held or not yet sent: what `client-output-buffer-limit` and the backlog count.
    fn backlog(&self) -> u64 {
        self.held.len() as u64 + self.unsent
    }

    fn hold(&mut self, db: u32, argv: &[&[u8]]) {
        self.select_held(db);
        encode_command(&mut self.held, argv);
    }

    /// Holds already encoded commands of database `db`.
    fn hold_raw(&mut self, db: u32, bytes: &[u8]) {
        self.select_held(db);
        self.held.extend_from_slice(bytes);
    }

    /// Puts the `SELECT` the next held write of `db` needs.
    fn select_held(&mut self, db: u32) {
        match self.held_first_db {
            None => {
                self.held_first_db = Some(db);
                self.held_db = db;
            }
            Some(_) if self.held_db != db => {
                encode_select(&mut self.held, db);
                self.held_db = db;
            }
            Some(_) => {}
        }
    }

    /// The slot this link's slot-paged snapshot is reading, if any.
    fn reading(&self) -> Option<Slot> {
        match &self.phase {
            Phase::Snapshot { snap: Some(s), .. } => s.in_progress(),
            _ => None,
        }
    }

    /// The held writes as they go on the wire, with the `SELECT` the target needs first.
    fn take_held(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        if let Some(first) = self.held_first_db.take() {
            if first != self.target_db {
                encode_select(&mut out, first);
            }
            out.append(&mut self.held);
            self.target_db = self.held_db;
        }
        out
    }
}

fn encode_select(out: &mut Vec<u8>, db: u32) {
    encode_command(out, &[b"SELECT".as_slice(), db.to_string().as_bytes()]);
}

/// Reads the snapshot from where `snap` stands into `buf`: slot by slot in `snap.order`, each
/// slot's databases `0..databases`, `SELECT` before the first key of each (slot, database)
/// with keys (`target_db` follows it). Stops after about `step_bytes` (between pages for a
/// point-in-time snapshot, between slots for a slot-atomic one) or at the end. Returns why a
/// value could not be written, if one could not.
fn read_snapshot<S: SlotSource + ?Sized>(
    snap: &mut Snap,
    source: &S,
    buf: &mut Vec<u8>,
    target_db: &mut u32,
    databases: u32,
    page_keys: usize,
    step_bytes: usize,
) -> Option<String> {
    let mut failure = None;
    // A slot-paged slot begun in an earlier step: writes ran since, so the walk may meet a
    // key again; a list written again gets a `DEL` first (RPUSH is not idempotent).
    let resumed = snap.in_progress();
    while snap.next < snap.order.len() {
        let slot = snap.order[snap.next];
        let (db, cursor) = (snap.db, snap.cursor);
        let mut keys = 0u64;
        let selected = &mut snap.selected;
        let replace_lists = resumed == Some(slot);
        let next = source.page(db, slot, cursor, page_keys, &mut |key, value, at| {
            if failure.is_some() {
                return;
            }
            if !*selected {
                encode_select(buf, db);
                *selected = true;
                *target_db = db;
            }
            let start = buf.len();
            match AofWriter::new(buf, key).value(value, at) {
                Ok(()) => {
                    keys += 1;
                    if replace_lists && starts_with_command(&buf[start..], b"RPUSH") {
                        let mut del = Vec::new();
                        encode_command(&mut del, &[b"DEL".as_slice(), key]);
                        buf.splice(start..start, del);
                    }
                }
                Err(e) => {
                    failure = Some(format!("key {:?}: {e}", String::from_utf8_lossy(key)));
                }
            }
        });
        if failure.is_some() {
            return failure;
        }
        snap.keys += keys;
        if next != 0 {
            snap.cursor = next;
        } else {
            // This database of the slot is done: the next one, or the next slot.
            snap.cursor = 0;
            snap.selected = false;
            snap.db += 1;
            if snap.db >= databases {
                snap.db = 0;
                snap.read.insert(slot);
                snap.next += 1;
            }
        }
        let slot_boundary = snap.cursor == 0 && snap.db == 0;
        if buf.len() >= step_bytes && (snap.mode != SnapshotMode::SlotAtomic || slot_boundary) {
            break;
        }
    }
    None
}

/// Whether the RESP command at the start of `bytes` is `name` (upper case, as encoded).
fn starts_with_command(bytes: &[u8], name: &[u8]) -> bool {
    let Some(eol) = bytes.iter().position(|&b| b == b'\n') else {
        return false;
    };
    let rest = &bytes[eol + 1..];
    let head = format!("${}\r\n", name.len());
    rest.starts_with(head.as_bytes()) && rest[head.len()..].starts_with(name)
}

pub(super) fn is_syncslots(argv: &[Vec<u8>]) -> bool {
    argv.len() >= 3
        && argv[0].eq_ignore_ascii_case(b"cluster")
        && argv[1].eq_ignore_ascii_case(b"syncslots")
}

impl AsmPlane {
    fn export_mut(&mut self, conn: ConnId) -> Result<&mut ExportLink, AsmError> {
        match self.links.get_mut(&conn) {
            Some(Link::Export(e)) => Ok(e),
            Some(Link::Import(_)) => Err(AsmError::WrongSide(conn, "export")),
            None => Err(AsmError::UnknownConn(conn)),
        }
    }

    /// The export link `conn`, or `None` when it is gone (the data plane closed it a moment
    /// ago and the node hears of it next: a node request for it is harmless).
    fn live_export(&mut self, conn: ConnId) -> Result<Option<&mut ExportLink>, AsmError> {
        match self.export_mut(conn) {
            Ok(l) => Ok(Some(l)),
            Err(AsmError::UnknownConn(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Source: the connection the node asked for (`MigrationRequest::Connect`) is up as
    /// `conn`; the node hears [`MigrationInput::Connected`].
    ///
    /// # Errors
    /// [`AsmError::ConnInUse`]; nothing changed.
    pub fn handle_connected(
        &mut self,
        job: JobName,
        conn: ConnId,
        now: Millis,
    ) -> Result<(), AsmError> {
        self.clock(now);
        if self.links.contains_key(&conn) {
            return Err(AsmError::ConnInUse(conn));
        }
        self.links
            .insert(conn, Link::Export(Box::new(ExportLink::new(job))));
        self.fact(MigrationInput::Connected { job, conn });
        Ok(())
    }

    /// Source: the connection could not be made (`error`: the connect error text, e.g.
    /// `Connection refused`); the node hears [`MigrationInput::ConnectFailed`].
    pub fn handle_connect_failed(&mut self, job: JobName, error: &str, now: Millis) {
        self.clock(now);
        self.fact(MigrationInput::ConnectFailed {
            job,
            error: error.to_owned(),
        });
    }

    /// Source: writes `AUTH [user] <password>` (Valkey `replicationSendAuth` with
    /// `primaryuser` / `primaryauth`); the reply line comes back as
    /// [`MigrationInput::AuthReply`]. Harmless for an unknown connection (one the data plane
    /// closed a moment ago: the node hears of it next).
    ///
    /// # Errors
    /// [`AsmError::WrongSide`] for an import link; nothing changed.
    pub fn send_auth(
        &mut self,
        conn: ConnId,
        user: Option<&[u8]>,
        password: &[u8],
        now: Millis,
    ) -> Result<(), AsmError> {
        self.clock(now);
        let Some(link) = self.live_export(conn)? else {
            return Ok(());
        };
        link.expect.push_back(Expect::Auth);
        let mut b = Vec::new();
        match user {
            Some(u) => encode_command(&mut b, &[b"AUTH", u, password]),
            None => encode_command(&mut b, &[b"AUTH".as_slice(), password]),
        }
        self.send(conn, &b);
        Ok(())
    }

    /// Either side: writes the node's `CLUSTER SYNCSLOTS` message (`MigrationRequest::Send`)
    /// in order with the data. On the source an `ESTABLISH`'s reply line comes back as
    /// [`MigrationInput::EstablishReply`]. Harmless for an unknown connection (one the data
    /// plane closed a moment ago: the node hears of it next).
    pub fn send_message(&mut self, conn: ConnId, message: &SyncSlots, now: Millis) {
        self.clock(now);
        match self.links.get_mut(&conn) {
            Some(Link::Export(e)) => {
                if matches!(message, SyncSlots::Establish { .. }) {
                    e.expect.push_back(Expect::Establish);
                }
            }
            Some(Link::Import(_)) => {}
            None => return,
        }
        let mut b = Vec::new();
        message.encode(&mut b);
        self.send(conn, &b);
    }

    /// Source: the snapshot of `ranges` starts now (`MigrationRequest::StartSnapshot`): from
    /// now on the writes fed for these slots are held (see [`SnapshotMode`]); the content
    /// follows with [`AsmPlane::snapshot_step`]. Harmless for an unknown connection (one the
    /// data plane closed a moment ago: the node hears of it next).
    ///
    /// # Errors
    /// [`AsmError::WrongSide`]; [`AsmError::SnapshotOrder`] when a snapshot was already
    /// started on the link. Nothing changed.
    pub fn start_snapshot(
        &mut self,
        conn: ConnId,
        ranges: &[SlotRange],
        mode: SnapshotMode,
        now: Millis,
    ) -> Result<(), AsmError> {
        self.clock(now);
        let Some(link) = self.live_export(conn)? else {
            return Ok(());
        };
        if !matches!(link.phase, Phase::Handshake) {
            return Err(AsmError::SnapshotOrder(
                conn,
                "a snapshot was already started",
            ));
        }
        let mut slots = SlotSet::new();
        let mut order = Vec::new();
        for r in ranges {
            for s in r.iter() {
                if !slots.contains(s) {
                    slots.insert(s);
                    order.push(s);
                }
            }
        }
        link.slots = slots;
        link.phase = Phase::Snapshot {
            snap: Some(Box::new(Snap {
                mode,
                order,
                next: 0,
                db: 0,
                cursor: 0,
                selected: false,
                read: SlotSet::new(),
                keys: 0,
                bytes: 0,
            })),
            begin_requested: false,
        };
        Ok(())
    }

    /// Source: whether the snapshot on `conn` wants the next [`AsmPlane::snapshot_step`]: it
    /// runs and the link holds fewer than [`super::AsmConfig::max_unsent_bytes`] unsent
    /// bytes (as reported with [`AsmPlane::handle_unsent`]).
    pub fn wants_snapshot_step(&self, conn: ConnId) -> bool {
        match self.links.get(&conn) {
            Some(Link::Export(e)) => {
                matches!(e.phase, Phase::Snapshot { snap: Some(_), .. })
                    && e.unsent < self.cfg.max_unsent_bytes
            }
            _ => false,
        }
    }

    /// Source: reads the next part of the snapshot from `source` and queues its bytes: whole
    /// slots ([`SnapshotMode::SlotAtomic`]) or pages ([`SnapshotMode::PointInTime`],
    /// [`SnapshotMode::SlotPaged`]), at least one, until about
    /// [`super::AsmConfig::step_bytes`]. After the last slot it writes
    /// `CLUSTER SYNCSLOTS SNAPSHOT-EOF` and the node hears `SnapshotDone`.
    ///
    /// # Errors
    /// [`AsmError::UnknownConn`], [`AsmError::WrongSide`]; [`AsmError::SnapshotOrder`] without
    /// a running snapshot. Nothing changed.
    pub fn snapshot_step<S: SlotSource + ?Sized>(
        &mut self,
        conn: ConnId,
        source: &S,
        now: Millis,
    ) -> Result<SnapshotProgress, AsmError> {
        self.clock(now);
        let (databases, page_keys, step_bytes) = (
            self.cfg.databases,
            self.cfg.page_keys.max(1),
            self.cfg.step_bytes,
        );
        let link = self.export_mut(conn)?;
        let job = link.job;
        let Phase::Snapshot {
            snap: Some(snap),
            begin_requested,
        } = &mut link.phase
        else {
            return Err(AsmError::SnapshotOrder(conn, "no snapshot is running"));
        };
        let begin_requested = *begin_requested;
        let mut buf = Vec::new();
        let failure = read_snapshot(
            snap,
            source,
            &mut buf,
            &mut link.target_db,
            databases,
            page_keys,
            step_bytes,
        );
        if let Some(reason) = failure {
            link.phase = Phase::Snapshot {
                snap: None,
                begin_requested: false,
            };
            self.event(AsmEvent::SnapshotFailed { job, reason });
            self.fact(MigrationInput::SnapshotDone {
                job,
                result: SnapshotResult::Failed,
            });
            return Ok(SnapshotProgress::Failed);
        }
        if snap.next < snap.order.len() {
            snap.bytes += buf.len() as u64;
            self.send(conn, &buf);
            return Ok(SnapshotProgress::More);
        }
        SyncSlots::SnapshotEof.encode(&mut buf);
        let (keys, bytes) = (snap.keys, snap.bytes + buf.len() as u64);
        link.phase = Phase::Snapshot {
            snap: None,
            begin_requested,
        };
        self.send(conn, &buf);
        self.event(AsmEvent::SnapshotWritten { job, keys, bytes });
        self.fact(MigrationInput::SnapshotDone {
            job,
            result: SnapshotResult::Done { cow_bytes: 0 },
        });
        if begin_requested {
            self.flush_held(conn);
        }
        Ok(SnapshotProgress::Done)
    }

    /// Source: the node stopped the job's snapshot (`MigrationRequest::AbortSnapshot`); no
    /// `SnapshotDone` follows. Harmless when none runs.
    pub fn abort_snapshot(&mut self, job: &JobName, now: Millis) {
        self.clock(now);
        for link in self.links.values_mut() {
            if let Link::Export(e) = link {
                if e.job == *job {
                    if let Phase::Snapshot { snap, .. } = &mut e.phase {
                        *snap = None;
                    }
                }
            }
        }
    }

    /// Source: the snapshot has been relayed (`MigrationRequest::BeginStreaming`): the held
    /// writes go out (after the snapshot, when it is still being written), and later writes
    /// as they are fed. Harmless for an unknown connection.
    ///
    /// # Errors
    /// [`AsmError::WrongSide`]; [`AsmError::SnapshotOrder`] before
    /// [`AsmPlane::start_snapshot`]. Nothing changed.
    pub fn begin_streaming(&mut self, conn: ConnId, now: Millis) -> Result<(), AsmError> {
        self.clock(now);
        let Some(link) = self.live_export(conn)? else {
            return Ok(());
        };
        match &mut link.phase {
            Phase::Handshake => Err(AsmError::SnapshotOrder(conn, "streaming before a snapshot")),
            Phase::Snapshot {
                snap: Some(_),
                begin_requested,
            } => {
                *begin_requested = true;
                Ok(())
            }
            Phase::Snapshot { snap: None, .. } => {
                self.flush_held(conn);
                Ok(())
            }
            Phase::Streaming => Ok(()),
        }
    }

    fn flush_held(&mut self, conn: ConnId) {
        let Ok(link) = self.export_mut(conn) else {
            return;
        };
        link.phase = Phase::Streaming;
        let bytes = link.take_held();
        self.send(conn, &bytes);
    }

    /// Every write the node applies as a primary: `argv` in database `db`, `slot` the slot of
    /// its keys (`None` for keyless commands, `MULTI`, `EXEC`: not forwarded). It goes to
    /// each export link whose job holds the slot: held during the snapshot, sent while
    /// streaming, with `SELECT` when the database changes (Valkey
    /// `clusterFeedSlotExportJobs`). A link that passes the output buffer limit is dropped
    /// (the node hears [`MigrationInput::OutputBufferLimit`]).
    ///
    /// # Errors
    /// [`AsmError::BadDatabase`]; nothing changed.
    pub fn feed<A: AsRef<[u8]>>(
        &mut self,
        db: u32,
        slot: Option<Slot>,
        argv: &[A],
        now: Millis,
    ) -> Result<(), AsmError> {
        let now = self.clock(now);
        if db >= self.cfg.databases {
            return Err(AsmError::BadDatabase(db));
        }
        let Some(slot) = slot else {
            return Ok(());
        };
        let argv: Vec<&[u8]> = argv.iter().map(AsRef::as_ref).collect();
        let conns: Vec<ConnId> = self
            .links
            .iter()
            .filter(|(_, l)| matches!(l, Link::Export(e) if e.slots.contains(slot)))
            .map(|(c, _)| *c)
            .collect();
        for conn in conns {
            let Ok(link) = self.export_mut(conn) else {
                continue;
            };
            match &link.phase {
                Phase::Handshake => continue,
                Phase::Snapshot { snap: Some(s), .. }
                    if s.mode != SnapshotMode::PointInTime && !s.read.contains(slot) =>
                {
                    // The snapshot reads this slot later: the write will be in it. (A
                    // slot-paged slot being read gets the key states instead.)
                    continue;
                }
                Phase::Snapshot { .. } => {
                    link.hold(db, &argv);
                    self.check_limit(conn, now);
                }
                Phase::Streaming => {
                    let mut b = Vec::new();
                    if link.target_db != db {
                        encode_select(&mut b, db);
                        link.target_db = db;
                    }
                    encode_command(&mut b, &argv);
                    self.send(conn, &b);
                }
            }
        }
        Ok(())
    }

    /// Source: whether a [`SnapshotMode::SlotPaged`] snapshot is part way through `slot`
    /// (it read a page of it and not the last): then the host MUST feed, after every write
    /// to `slot`, the state of each key the write changed with [`AsmPlane::feed_key_state`]
    /// (besides the command, with [`AsmPlane::feed`], for the other links).
    pub fn wants_key_state(&self, slot: Slot) -> bool {
        self.links
            .values()
            .any(|l| matches!(l, Link::Export(e) if e.reading() == Some(slot)))
    }

    /// Source: the whole state of `key` (database `db`, in `slot`) right after a write
    /// changed it: `Some((value, expire_at_ms))`, or `None` when the key is gone. Each export
    /// link whose [`SnapshotMode::SlotPaged`] snapshot is part way through `slot` holds it
    /// as `DEL key` and the commands that rebuild the value ([`crate::aof`]), streamed after
    /// the snapshot; other links ignore it. A value that cannot be written fails those links'
    /// snapshots ([`AsmEvent::SnapshotFailed`], `SnapshotDone` with `Failed`).
    ///
    /// # Errors
    /// [`AsmError::BadDatabase`]; nothing changed.
    pub fn feed_key_state<V: crate::aof::AofValue + ?Sized>(
        &mut self,
        db: u32,
        slot: Slot,
        key: &[u8],
        value: Option<(&V, Option<i64>)>,
        now: Millis,
    ) -> Result<(), AsmError> {
        let now = self.clock(now);
        if db >= self.cfg.databases {
            return Err(AsmError::BadDatabase(db));
        }
        let conns: Vec<ConnId> = self
            .links
            .iter()
            .filter(|(_, l)| matches!(l, Link::Export(e) if e.reading() == Some(slot)))
            .map(|(c, _)| *c)
            .collect();
        if conns.is_empty() {
            return Ok(());
        }
        let mut bytes = Vec::new();
        encode_command(&mut bytes, &[b"DEL".as_slice(), key]);
        let failure = match value {
            Some((v, at)) => AofWriter::new(&mut bytes, key).value(v, at).err(),
            None => None,
        };
        for conn in conns {
            let Ok(link) = self.export_mut(conn) else {
                continue;
            };
            if let Some(e) = &failure {
                let job = link.job;
                link.phase = Phase::Snapshot {
                    snap: None,
                    begin_requested: false,
                };
                let reason = format!("key {:?}: {e}", String::from_utf8_lossy(key));
                self.event(AsmEvent::SnapshotFailed { job, reason });
                self.fact(MigrationInput::SnapshotDone {
                    job,
                    result: SnapshotResult::Failed,
                });
                continue;
            }
            link.hold_raw(db, &bytes);
            self.check_limit(conn, now);
        }
        Ok(())
    }

    /// Source: the node asks for the link's backlog (`MigrationRequest::QueryBacklog`): it
    /// hears [`MigrationInput::LinkBacklog`] with the held and unsent bytes. Harmless for an
    /// unknown connection.
    pub fn query_backlog(&mut self, job: JobName, conn: ConnId, now: Millis) {
        self.clock(now);
        if let Ok(link) = self.export_mut(conn) {
            let bytes = link.backlog();
            self.fact(MigrationInput::LinkBacklog { job, bytes });
        }
    }

    /// Source: bytes written to `conn` that its socket has not taken yet (the host's send
    /// buffer), for the output buffer limit and the backlog. A host SHOULD report it when it
    /// changes notably (and 0 once drained).
    pub fn handle_unsent(&mut self, conn: ConnId, bytes: u64, now: Millis) {
        let now = self.clock(now);
        if let Ok(link) = self.export_mut(conn) {
            link.unsent = bytes;
            self.check_limit(conn, now);
        }
    }

    /// Drops an export link over the output buffer limit.
    pub(super) fn check_limit(&mut self, conn: ConnId, now: Millis) {
        let limit = self.cfg.output_buffer_limit;
        let Ok(link) = self.export_mut(conn) else {
            return;
        };
        let bytes = link.backlog();
        if !limit.reached(bytes, &mut link.soft_since, now) {
            return;
        }
        let job = link.job;
        self.links.remove(&conn);
        self.event(AsmEvent::OutputBufferLimit { conn, bytes });
        self.fact(MigrationInput::OutputBufferLimit { job });
    }

    /// Bytes from the target on an export link: reply lines first (AUTH, ESTABLISH), then
    /// the target's `SYNCSLOTS` messages.
    pub(super) fn export_bytes(&mut self, conn: ConnId, bytes: &[u8]) {
        let max_line = self.cfg.max_reply_line;
        let limits = self.cfg.reader_limits;
        let Ok(link) = self.export_mut(conn) else {
            return;
        };
        if link.reader.is_none() {
            link.lines.push(bytes);
            loop {
                let Ok(link) = self.export_mut(conn) else {
                    return;
                };
                let job = link.job;
                let Some(&expect) = link.expect.front() else {
                    if link.lines.is_empty() {
                        return;
                    }
                    let error = crate::error::StreamError {
                        kind: crate::error::StreamErrorKind::NotACommand(
                            link.lines.first_byte().unwrap_or(0),
                        ),
                        offset: 0,
                    };
                    self.protocol_close(conn, AsmEvent::Protocol { conn, error });
                    return;
                };
                let line = match link.lines.next_line(max_line) {
                    Ok(Some(line)) => line,
                    Ok(None) => return,
                    Err(kind) => {
                        if expect == Expect::Establish {
                            self.links.remove(&conn);
                            self.fact(MigrationInput::EstablishReplyTooLarge { job });
                        } else {
                            let error = crate::error::StreamError { kind, offset: 0 };
                            self.protocol_close(conn, AsmEvent::Protocol { conn, error });
                        }
                        return;
                    }
                };
                link.expect.pop_front();
                match expect {
                    Expect::Auth => {
                        let reply = if line.first() == Some(&b'-') {
                            AuthReply::Rejected(String::from_utf8_lossy(&line).into_owned())
                        } else {
                            AuthReply::Ok
                        };
                        self.fact(MigrationInput::AuthReply { job, reply });
                    }
                    Expect::Establish => {
                        let mut reader = CommandReader::new(limits);
                        reader.push(&link.lines.take());
                        link.reader = Some(reader);
                        let mut line = line;
                        line.extend_from_slice(b"\r\n");
                        self.fact(MigrationInput::EstablishReply { job, line });
                        break;
                    }
                }
            }
        } else if let Some(r) = link.reader.as_mut() {
            r.push(bytes);
        }
        self.export_messages(conn);
    }

    /// The target's `CLUSTER SYNCSLOTS` messages, for the node.
    fn export_messages(&mut self, conn: ConnId) {
        loop {
            let Ok(link) = self.export_mut(conn) else {
                return;
            };
            let job = link.job;
            let Some(reader) = link.reader.as_mut() else {
                return;
            };
            let argv = match reader.next_command() {
                Ok(Some(argv)) => argv,
                Ok(None) => return,
                Err(error) => {
                    self.protocol_close(conn, AsmEvent::Protocol { conn, error });
                    return;
                }
            };
            if !is_syncslots(&argv) {
                let name = argv.first().cloned().unwrap_or_default();
                self.protocol_close(conn, AsmEvent::UnexpectedCommand { conn, name });
                return;
            }
            if argv[2].eq_ignore_ascii_case(b"request-pause") {
                // The pause decision compares the backlog with
                // `slot-migration-max-failover-repl-bytes`: give the node today's.
                let bytes = link.backlog();
                self.fact(MigrationInput::LinkBacklog { job, bytes });
            }
            self.out.push_back(AsmOutput::SyncSlots { conn, argv });
        }
    }
}

//! The atomic slot migration (ASM) data plane: what the host does for the node's
//! [`MigrationRequest`]s (facts sheet A.8 wire sequence, A.9 pause, A.12 hiding).
//!
//! Source side: each export job gets one data connection to the target's client port, run by
//! two threads (`asm-out-N` writes a channel of byte chunks, `asm-in-N` reads the target's
//! reply lines and SYNCSLOTS messages and feeds them to the node). The snapshot is produced
//! by a third thread slot by slot, taking the state lock once per page of
//! [`SNAPSHOT_PAGE_KEYS`] keys (`KvStore::slot_page`, whose walk visits every key
//! present throughout): every key of the
//! job's ranges in every database as `RESTORE key <abs-ms> <payload> REPLACE ABSTTL`, then
//! `CLUSTER SYNCSLOTS SNAPSHOT-EOF`. From `StartSnapshot` on, the write effects of those
//! slots (the same `SET`/`DEL` effect stream replication uses, [`forward`]) are queued, and
//! sent once `BeginStreaming` came. Because effects carry a key's whole state, replaying the
//! ones made while the snapshot ran over that (fuzzy) snapshot converges to the source's data.
//!
//! Target side: SYNCSLOTS arrive on ordinary client connections; cluster.rs hands them to
//! the node with the connection's [`ConnId`] (its client id). Once the node made the
//! connection an import link ([`is_import_link`]), commands on it run without routing and
//! without replies ([`run_import_command`]), and are propagated to our replicas.

use crate::client::{Args, ClientCtx, Delivery};
use crate::resp::{parse_request, Limits, Out, Parsed};
use crate::server::{unix_ms, Shared, State};
use crossbeam_channel::{Receiver, Sender};
use ferrocluster_node::{
    AuthReply, ConnId, JobKind, JobName, MigrationInput, MigrationRequest, Millis, SnapshotResult,
    SyncSlots,
};
use ferrocluster_rdb::{dump, Encoder};
use ferrocluster_slot::{Slot, SlotRange, SlotSet};
use std::collections::{HashMap, VecDeque};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The snapshot takes the state lock for at most this many keys at a time (about 0.2 ms of
/// work for 100-byte values), so client writes during a snapshot wait at most that long.
const SNAPSHOT_PAGE_KEYS: usize = 512;
/// The snapshot producer pauses while this many bytes wait to be written to the target.
const SNAPSHOT_BACKLOG_MAX: u64 = 64 * 1024 * 1024;
/// `client-output-buffer-limit replica` hard limit (256 MiB): an export link further behind
/// is closed and its job fails (sheet A.8).
const OUTPUT_LIMIT: u64 = 256 * 1024 * 1024;
/// How often an import link's activity is reported to the node at most, ms.
const IMPORT_DATA_EVERY_MS: u64 = 100;

/// A reply line the source waits for on its export link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Auth,
    Establish,
}

enum LinkMsg {
    Bytes(Vec<u8>),
    Close,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Connect / AUTH / ESTABLISH / waiting for the first ACK.
    Handshake,
    /// The snapshot runs: effects of the job's slots are queued, not sent.
    Snapshot,
    /// Effects are sent as they happen.
    Streaming,
}

/// One export data connection (source side).
struct ExportLink {
    job: JobName,
    tx: Sender<LinkMsg>,
    /// Bytes handed to the writer thread and not yet written to the socket.
    backlog: Arc<AtomicU64>,
    expect: Arc<parking_lot::Mutex<VecDeque<Expect>>>,
    /// Set when the snapshot must stop.
    abort: Arc<AtomicBool>,
    /// Set once the link is closed (by us or the peer): report `LinkClosed` only once.
    closed: Arc<AtomicBool>,
    slots: SlotSet,
    phase: Phase,
    /// Effects queued during the snapshot.
    queued: Vec<u8>,
    /// Effects to send at the end of the current batch (streaming).
    pending: Vec<u8>,
    /// The database the effect stream last SELECTed (`usize::MAX`: none yet).
    db: usize,
}

impl ExportLink {
    fn send(&self, bytes: Vec<u8>) {
        if bytes.is_empty() {
            return;
        }
        self.backlog
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        let _ = self.tx.send(LinkMsg::Bytes(bytes));
    }
}

/// Migration bookkeeping of the host, inside [`State`].
#[derive(Default)]
pub struct MigrState {
    exports: HashMap<u64, ExportLink>,
    /// Client connections that sent SYNCSLOTS (target side): conn -> (I/O thread, slot).
    client_conns: HashMap<u64, (usize, usize)>,
    /// Last time an import link's activity was reported (conn -> unix ms).
    import_seen: HashMap<u64, u64>,
    /// Whether any export link queues or streams effects (fast check on every write).
    forwarding: bool,
    /// MIGRATE's cached connections.
    pub migrate_cache: crate::legacy::MigrateCache,
}

impl MigrState {
    /// Whether write effects must be offered to [`forward`].
    pub fn forwarding(&self) -> bool {
        self.forwarding
    }

    fn refresh(&mut self) {
        self.forwarding = self.exports.values().any(|l| l.phase != Phase::Handshake);
    }
}

fn append(buf: &mut Vec<u8>, parts: &[&[u8]]) {
    let mut o = Out {
        buf: std::mem::take(buf),
        proto: 2,
    };
    o.array(parts.len());
    for p in parts {
        o.bulk(p);
    }
    *buf = o.buf;
}

/// Offers one write effect (`SET key value [PXAT t]` or `DEL key` in `db`) to the export
/// links whose job holds the key's slot (sheet A.8 "incremental stream").
pub fn forward(state: &mut State, db: usize, key: &[u8], parts: &[&[u8]]) {
    let slot = ferrocluster_slot::key_hash_slot(key);
    for link in state.migr.exports.values_mut() {
        if link.phase == Phase::Handshake || !link.slots.contains(slot) {
            continue;
        }
        let buf = if link.phase == Phase::Snapshot {
            &mut link.queued
        } else {
            &mut link.pending
        };
        if link.db != db {
            link.db = db;
            append(buf, &[b"SELECT", db.to_string().as_bytes()]);
        }
        append(buf, parts);
    }
}

/// Sends the effects gathered during a batch (called with the replication flush).
pub fn flush(state: &mut State) {
    if !state.migr.forwarding {
        return;
    }
    for link in state.migr.exports.values_mut() {
        if !link.pending.is_empty() {
            let b = std::mem::take(&mut link.pending);
            link.send(b);
        }
    }
}

pub fn job_text(job: &JobName) -> String {
    String::from_utf8_lossy(&job.as_bytes()[..]).into_owned()
}

fn wake(state: &State) {
    if let Some(side) = state.cluster.as_ref() {
        side.wake();
    }
}

fn report(state: &mut State, input: MigrationInput) {
    if let Some(side) = state.cluster.as_mut() {
        side.node.handle_migration(input, Millis(unix_ms()));
        side.wake();
    }
}

/// Whether `client` is the import link of an in-progress job (target side).
pub fn is_import_link(state: &State, client: &ClientCtx) -> bool {
    client.migration_conn
        && state.cluster.as_ref().is_some_and(|side| {
            side.node
                .migrations()
                .job_for_conn(ConnId(client.id))
                .is_some_and(|j| j.kind() == JobKind::Import)
        })
}

/// Remembers where a client connection that sends SYNCSLOTS lives (target side), so the
/// node's messages for it can be written there.
pub fn note_client_conn(state: &mut State, client: &mut ClientCtx) {
    client.migration_conn = true;
    state
        .migr
        .client_conns
        .insert(client.id, (client.io_thread, client.token));
}

/// A client connection closed; if it carried SYNCSLOTS, the node hears `LinkClosed`.
pub fn client_closed(shared: &Shared, client_id: u64) {
    let mut st = shared.state.lock();
    if st.migr.client_conns.remove(&client_id).is_some() {
        st.migr.import_seen.remove(&client_id);
        report(
            &mut st,
            MigrationInput::LinkClosed {
                conn: ConnId(client_id),
            },
        );
    }
}

/// Runs one command read from an import link: SYNCSLOTS go to the node, everything else is
/// executed without routing; replies are dropped (the link's replies are off), an error
/// reply fails the job (`ImportApplyError`).
pub fn run_import_command(
    shared: &Shared,
    state: &mut State,
    client: &mut ClientCtx,
    args: &Args<'_>,
    now: u64,
) {
    let conn = ConnId(client.id);
    let last = state.migr.import_seen.get(&client.id).copied().unwrap_or(0);
    if now.saturating_sub(last) >= IMPORT_DATA_EVERY_MS {
        state.migr.import_seen.insert(client.id, now);
        report(state, MigrationInput::ImportData { conn });
    }
    let mut sink = Out {
        buf: Vec::new(),
        proto: 2,
    };
    match crate::table::lookup(args.get(0)) {
        Some(spec) if spec.arity_ok(args.len()) => {
            crate::commands::run(shared, state, client, spec, args, &mut sink, now);
        }
        _ => sink.error("ERR unknown command"),
    }
    if sink.buf.first() == Some(&b'-') {
        tracing::warn!(
            reply = %String::from_utf8_lossy(&sink.buf).trim_end(),
            command = %String::from_utf8_lossy(args.get(0)),
            "slot import: a command failed"
        );
        report(state, MigrationInput::ImportApplyError { conn });
    }
}

/// FLUSHDB / FLUSHALL ran: every in-progress job fails with `Data was flushed`.
pub fn on_flush(state: &mut State) {
    let active = state.cluster.as_ref().is_some_and(|s| {
        s.node.migrations().is_any_importing() || s.node.migrations().is_any_exporting()
    });
    if active {
        report(state, MigrationInput::Flush);
    }
}

/// Carries out one [`MigrationRequest`] (on the bus thread, without the state lock held).
pub fn act(shared: &Arc<Shared>, req: MigrationRequest) {
    match req {
        MigrationRequest::Connect { job, ip, port, .. } => {
            let shared = Arc::clone(shared);
            let spawned = std::thread::Builder::new()
                .name("asm-connect".into())
                .spawn(move || connect(shared, job, SocketAddr::new(ip, port)));
            if spawned.is_err() {
                tracing::error!("slot migration: can't start a thread");
            }
        }
        MigrationRequest::SendAuth { job, conn } => {
            let mut st = shared.state.lock();
            let pass = shared.config.requirepass.clone().unwrap_or_default();
            match st.migr.exports.get(&conn.0) {
                Some(link) => {
                    link.expect.lock().push_back(Expect::Auth);
                    let mut b = Vec::new();
                    append(&mut b, &[b"AUTH", pass.as_bytes()]);
                    link.send(b);
                }
                None => report(
                    &mut st,
                    MigrationInput::AuthReply {
                        job,
                        reply: AuthReply::WriteFailed("connection closed".into()),
                    },
                ),
            }
        }
        MigrationRequest::Send { conn, message } => {
            let st = shared.state.lock();
            if let Some(link) = st.migr.exports.get(&conn.0) {
                if matches!(message, SyncSlots::Establish { .. }) {
                    link.expect.lock().push_back(Expect::Establish);
                }
                link.send(message.to_resp());
            } else if let Some(&(io, token)) = st.migr.client_conns.get(&conn.0) {
                shared.deliver(io, token, conn.0, Delivery::Raw(message.to_resp().into()));
            }
        }
        MigrationRequest::AcceptImportLink { job, conn, slots } => {
            tracing::info!(job = %job_text(&job), conn = conn.0, slots = slots.len(), "slot import: link accepted");
        }
        MigrationRequest::StartSnapshot { job, conn, ranges } => {
            let mut st = shared.state.lock();
            let Some(link) = st.migr.exports.get_mut(&conn.0) else {
                report(&mut st, MigrationInput::SnapshotStartFailed { job });
                return;
            };
            let mut slots = SlotSet::new();
            for r in &ranges {
                slots.insert_range(*r);
            }
            link.slots = slots;
            link.phase = Phase::Snapshot;
            link.db = usize::MAX;
            link.abort.store(false, Ordering::SeqCst);
            let (tx, backlog, abort) = (
                link.tx.clone(),
                Arc::clone(&link.backlog),
                Arc::clone(&link.abort),
            );
            st.migr.refresh();
            drop(st);
            let shared2 = Arc::clone(shared);
            let spawned = std::thread::Builder::new()
                .name("asm-snapshot".into())
                .spawn(move || snapshot(shared2, job, ranges, tx, backlog, abort));
            if spawned.is_err() {
                let mut st = shared.state.lock();
                report(&mut st, MigrationInput::SnapshotStartFailed { job });
            }
        }
        MigrationRequest::AbortSnapshot { job } => {
            let st = shared.state.lock();
            for link in st.migr.exports.values() {
                if link.job == job {
                    link.abort.store(true, Ordering::SeqCst);
                }
            }
        }
        MigrationRequest::BeginStreaming { conn, .. } => {
            let mut st = shared.state.lock();
            if let Some(link) = st.migr.exports.get_mut(&conn.0) {
                link.phase = Phase::Streaming;
                let q = std::mem::take(&mut link.queued);
                link.send(q);
            }
            st.migr.refresh();
        }
        MigrationRequest::QueryBacklog { job, conn } => {
            let mut st = shared.state.lock();
            let bytes = st.migr.exports.get(&conn.0).map(|l| {
                l.backlog.load(Ordering::Relaxed) + (l.queued.len() + l.pending.len()) as u64
            });
            match bytes {
                Some(b) if b > OUTPUT_LIMIT => {
                    report(&mut st, MigrationInput::OutputBufferLimit { job })
                }
                Some(bytes) => report(&mut st, MigrationInput::LinkBacklog { job, bytes }),
                None => {}
            }
        }
        MigrationRequest::HideSlots { slots } => {
            let mut st = shared.state.lock();
            for s in slots.iter() {
                st.kv.hide_slot(s);
            }
        }
        MigrationRequest::RevealSlots { slots } => {
            let mut st = shared.state.lock();
            for s in slots.iter() {
                st.kv.reveal_slot(s);
            }
        }
        MigrationRequest::DropSlotKeys { slots } => {
            let mut st = shared.state.lock();
            let n = crate::repl::delete_slot_keys(&mut st, &slots);
            crate::repl::flush(shared, &mut st);
            tracing::info!(
                slots = slots.len(),
                keys = n,
                "slot import: staged keys dropped"
            );
        }
        MigrationRequest::Propagate { message } => {
            let mut st = shared.state.lock();
            let argv = message.argv();
            let parts: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
            crate::repl::propagate_command(&mut st, &parts);
            crate::repl::flush(shared, &mut st);
        }
        MigrationRequest::Close { conn } => {
            let mut st = shared.state.lock();
            if let Some(link) = st.migr.exports.remove(&conn.0) {
                link.closed.store(true, Ordering::SeqCst);
                link.abort.store(true, Ordering::SeqCst);
                let _ = link.tx.send(LinkMsg::Close);
                st.migr.refresh();
            } else if let Some((io, token)) = st.migr.client_conns.remove(&conn.0) {
                st.migr.import_seen.remove(&conn.0);
                shared.deliver(io, token, conn.0, Delivery::Close);
            }
        }
    }
}

/// Source: opens the export connection, registers it and starts its reader and writer.
fn connect(shared: Arc<Shared>, job: JobName, addr: SocketAddr) {
    let stream = match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
        Ok(s) => s,
        Err(e) => {
            let mut st = shared.state.lock();
            let error = match e.kind() {
                std::io::ErrorKind::ConnectionRefused => "Connection refused".to_string(),
                _ => e.to_string(),
            };
            report(&mut st, MigrationInput::ConnectFailed { job, error });
            return;
        }
    };
    let _ = stream.set_nodelay(true);
    let (reader, writer) = match stream.try_clone() {
        Ok(r) => (r, stream),
        Err(e) => {
            let mut st = shared.state.lock();
            report(
                &mut st,
                MigrationInput::ConnectFailed {
                    job,
                    error: e.to_string(),
                },
            );
            return;
        }
    };
    let conn = shared.next_client_id();
    let (tx, rx) = crossbeam_channel::unbounded();
    let link = ExportLink {
        job,
        tx,
        backlog: Arc::new(AtomicU64::new(0)),
        expect: Arc::new(parking_lot::Mutex::new(VecDeque::new())),
        abort: Arc::new(AtomicBool::new(false)),
        closed: Arc::new(AtomicBool::new(false)),
        slots: SlotSet::new(),
        phase: Phase::Handshake,
        queued: Vec::new(),
        pending: Vec::new(),
        db: usize::MAX,
    };
    let (backlog, expect, closed) = (
        Arc::clone(&link.backlog),
        Arc::clone(&link.expect),
        Arc::clone(&link.closed),
    );
    {
        let mut st = shared.state.lock();
        st.migr.exports.insert(conn, link);
        report(
            &mut st,
            MigrationInput::Connected {
                job,
                conn: ConnId(conn),
            },
        );
    }
    let _ = std::thread::Builder::new()
        .name(format!("asm-out-{conn}"))
        .spawn(move || write_loop(writer, rx, backlog));
    let shared2 = Arc::clone(&shared);
    let _ = std::thread::Builder::new()
        .name(format!("asm-in-{conn}"))
        .spawn(move || read_loop(shared2, reader, conn, job, expect, closed));
}

fn write_loop(mut stream: TcpStream, rx: Receiver<LinkMsg>, backlog: Arc<AtomicU64>) {
    let mut failed = false;
    while let Ok(msg) = rx.recv() {
        match msg {
            LinkMsg::Bytes(b) => {
                if !failed && stream.write_all(&b).is_err() {
                    // The reader sees the shutdown and reports the closed link.
                    failed = true;
                    let _ = stream.shutdown(std::net::Shutdown::Both);
                }
                backlog.fetch_sub(b.len() as u64, Ordering::Relaxed);
            }
            LinkMsg::Close => break,
        }
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

fn read_loop(
    shared: Arc<Shared>,
    mut stream: TcpStream,
    conn: u64,
    job: JobName,
    expect: Arc<parking_lot::Mutex<VecDeque<Expect>>>,
    closed: Arc<AtomicBool>,
) {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 16 * 1024];
    let mut ranges = Vec::new();
    let mut words = Vec::new();
    let limits = Limits {
        max_bulk_len: 512 * 1024 * 1024,
        unauthenticated: false,
    };
    'outer: loop {
        let n = match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        let mut pos = 0;
        while pos < buf.len() {
            let rest = &buf[pos..];
            if rest[0] == b'+' || rest[0] == b'-' {
                let Some(end) = rest.windows(2).position(|w| w == b"\r\n") else {
                    break;
                };
                let line = rest[..end + 2].to_vec();
                pos += end + 2;
                let what = expect.lock().pop_front();
                let mut st = shared.state.lock();
                match what {
                    Some(Expect::Auth) => {
                        let reply = if line[0] == b'+' {
                            AuthReply::Ok
                        } else {
                            AuthReply::Rejected(String::from_utf8_lossy(&line[1..end]).into_owned())
                        };
                        report(&mut st, MigrationInput::AuthReply { job, reply });
                    }
                    Some(Expect::Establish) => {
                        report(&mut st, MigrationInput::EstablishReply { job, line })
                    }
                    None => {}
                }
                continue;
            }
            match parse_request(rest, &mut ranges, &mut words, limits) {
                Parsed::Command { consumed, inline } => {
                    if !ranges.is_empty() {
                        let from = if inline { &words[..] } else { rest };
                        let argv: Vec<&[u8]> = ranges.iter().map(|r| &from[r.clone()]).collect();
                        let mut st = shared.state.lock();
                        if let Some(side) = st.cluster.as_mut() {
                            // A message the target wrote back on the export link.
                            let req = ferrocluster_node::CommandRequest {
                                conn: Some(ConnId(conn)),
                                ..Default::default()
                            };
                            let _ = side.node.cluster_command_argv(
                                &argv,
                                &req,
                                &ferrocluster_node::EmptyKeyspace,
                                Millis(unix_ms()),
                            );
                            side.wake();
                        }
                    }
                    pos += consumed;
                }
                Parsed::Incomplete { .. } => break,
                Parsed::Error(e) => {
                    tracing::warn!("slot migration link: bad bytes from the target: {e:?}");
                    break 'outer;
                }
            }
        }
        buf.drain(..pos);
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
    if !closed.swap(true, Ordering::SeqCst) {
        let mut st = shared.state.lock();
        if let Some(link) = st.migr.exports.remove(&conn) {
            link.abort.store(true, Ordering::SeqCst);
            let _ = link.tx.send(LinkMsg::Close);
        }
        st.migr.refresh();
        report(&mut st, MigrationInput::LinkClosed { conn: ConnId(conn) });
    }
}

/// Serializes one page (at most [`SNAPSHOT_PAGE_KEYS`]) of the keys of one slot of `db` as
/// RESTORE commands into `buf`, from `cursor` (0 at the start of the slot); returns the keys
/// written and the cursor of the next page (0: the slot is done). Payloads are RDB DUMP
/// payloads (`enc`, reused across pages); the expiry travels as the ABSTTL argument.
fn snapshot_page(
    state: &State,
    db: usize,
    slot: Slot,
    cursor: u64,
    now: u64,
    buf: &mut Vec<u8>,
    enc: &mut Encoder,
) -> (usize, u64) {
    let mut written = 0;
    let mut payload = Vec::new();
    let next = state
        .kv
        .slot_page(db, slot, cursor, SNAPSHOT_PAGE_KEYS, now, |k, v, at| {
            payload.clear();
            if dump::encode_into(enc, v, &mut payload).is_err() {
                // A string always encodes; nothing else is stored.
                return;
            }
            match at {
                Some(t) => {
                    let t = t.to_string();
                    append(
                        buf,
                        &[b"RESTORE", k, t.as_bytes(), &payload, b"REPLACE", b"ABSTTL"],
                    )
                }
                None => append(buf, &[b"RESTORE", k, b"0", &payload, b"REPLACE"]),
            }
            written += 1;
        })
        .unwrap_or(0);
    (written, next)
}

/// Lowers the calling thread's scheduling priority (Linux `SCHED_BATCH`, nice 9): the
/// snapshot producer then gives way to the threads that serve clients when the CPU is short,
/// yet is never starved (`SCHED_IDLE` was measured to stall a migration for seconds on a busy
/// machine). Valkey produces the snapshot in a forked child that competes with the serving
/// thread at equal priority; on a small machine that competition is what client writes wait
/// for during a migration. Failure (another OS, no permission) is ignored.
fn lower_priority() {
    use thread_priority::{
        set_thread_priority_and_policy, thread_native_id, NormalThreadSchedulePolicy,
        ThreadPriority, ThreadPriorityValue, ThreadSchedulePolicy,
    };
    // Crossplatform 23 of 0..=99 maps to nice 9 on Linux.
    let Ok(value) = ThreadPriorityValue::try_from(23u8) else {
        return;
    };
    let batch = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Batch);
    let priority = ThreadPriority::Crossplatform(value);
    if let Err(e) = set_thread_priority_and_policy(thread_native_id(), priority, batch) {
        tracing::debug!("snapshot thread keeps its priority: {e:?}");
    }
}

/// Source: the snapshot producer (sheet A.8 step 5): database 0..N-1, each range, each slot.
fn snapshot(
    shared: Arc<Shared>,
    job: JobName,
    ranges: Vec<SlotRange>,
    tx: Sender<LinkMsg>,
    backlog: Arc<AtomicU64>,
    abort: Arc<AtomicBool>,
) {
    let send = |b: Vec<u8>| {
        backlog.fetch_add(b.len() as u64, Ordering::Relaxed);
        tx.send(LinkMsg::Bytes(b)).is_ok()
    };
    lower_priority();
    let databases = shared.state.lock().kv.databases();
    let mut keys = 0usize;
    let mut enc = Encoder::default();
    for db in 0..databases {
        let mut selected = false;
        for r in &ranges {
            for slot in r.iter() {
                while backlog.load(Ordering::Relaxed) > SNAPSHOT_BACKLOG_MAX {
                    if abort.load(Ordering::SeqCst) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                if abort.load(Ordering::SeqCst) {
                    return;
                }
                let mut cursor = 0;
                loop {
                    let mut buf = Vec::new();
                    if !selected {
                        append(&mut buf, &[b"SELECT", db.to_string().as_bytes()]);
                    }
                    // One page per lock hold: client writes wait at most one page.
                    let (n, next) = {
                        let st = shared.state.lock();
                        let r = snapshot_page(&st, db, slot, cursor, unix_ms(), &mut buf, &mut enc);
                        // Hand the lock to a waiting client thread rather than take it again
                        // at once (parking_lot's unlock is unfair by default).
                        parking_lot::MutexGuard::unlock_fair(st);
                        r
                    };
                    if n > 0 {
                        selected = true;
                        keys += n;
                        if !send(buf) {
                            return;
                        }
                    }
                    if next == 0 {
                        break;
                    }
                    if abort.load(Ordering::SeqCst) {
                        return;
                    }
                    cursor = next;
                }
            }
        }
    }
    if abort.load(Ordering::SeqCst) || !send(SyncSlots::SnapshotEof.to_resp()) {
        return;
    }
    tracing::info!(keys, "slot migration: snapshot written");
    let mut st = shared.state.lock();
    report(
        &mut st,
        MigrationInput::SnapshotDone {
            job,
            result: SnapshotResult::Done { cow_bytes: 0 },
        },
    );
    wake(&st);
}

//! The host of the atomic slot migration (ASM) data plane, `ferrocluster_dataplane::AsmPlane`
//! (the one copy of the bytes: SYNCSLOTS messages, the snapshot as Valkey 9.1's AOF-rewrite
//! commands, the held and streamed writes, the import stream parsed into commands). This
//! module does what the plane and the node's [`MigrationRequest`]s ask (facts sheet A.8 wire
//! sequence, A.9 pause, A.12 hiding), following the host loop of the plane's module docs; the
//! plane lives in [`State`], under the state lock, like the replication engine.
//!
//! Source side: each export job gets one data connection to the target's client port, with
//! two threads (`asm-out-N` writes the plane's bytes from a channel, `asm-in-N` hands what the
//! target writes back to the plane). The snapshot is [`SnapshotMode::SlotPaged`]: a third
//! thread (`asm-snapshot`) calls `AsmPlane::snapshot_step` with the state lock held for one
//! step (a page of `AsmConfig::page_keys` keys of one slot, `KvStore::slot_page`), so client
//! writes wait at most one page. Every write effect of the job's slots is fed to the plane
//! ([`forward`]); while the plane is part way through a slot it also gets, after the write,
//! the whole state of each key the write touched (`AsmPlane::feed_key_state`): that is what
//! makes the paged (fuzzy) snapshot plus the stream exact, since the effects themselves are
//! commands (`INCR`, `RPUSH`) and not idempotent.
//!
//! Target side: SYNCSLOTS arrive on ordinary client connections; cluster.rs hands them to
//! the node with the connection's [`ConnId`] (its client id). When the node accepts an
//! ESTABLISH, the connection becomes the plane's import link at once ([`after_syncslots`]):
//! from the next byte on, what the connection reads goes to `AsmPlane::handle_bytes`
//! ([`import_bytes`], one read of at most 64 KiB per lock hold, the same batch as a client's),
//! and the commands it yields are run without routing and without replies, and propagated
//! to our replicas.

use crate::client::{Args, ClientCtx, Delivery};
use crate::resp::Out;
use crate::server::{unix_ms, Shared, State, Value};
use crossbeam_channel::{Receiver, Sender};
use ferrocluster_dataplane::{
    AsmConfig, AsmEvent, AsmOutput, AsmPlane, KeyVisitor, SlotSource, SnapshotMode,
    SnapshotProgress,
};
use ferrocluster_kvstore::{KeyExpiry, KvStore};
use ferrocluster_node::{ConnId, JobKind, JobName, MigrationInput, MigrationRequest, Millis};
use ferrocluster_slot::Slot;
use std::collections::HashMap;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

enum LinkMsg {
    Bytes(Vec<u8>),
    Close,
}

/// The socket side of one export data connection (source side).
struct ExportIo {
    job: JobName,
    tx: Sender<LinkMsg>,
    /// Bytes handed to the writer thread and not yet written to the socket.
    backlog: Arc<AtomicU64>,
    /// The node asked for the backlog and it was not 0: the writer reports it once it is.
    want_drained: Arc<AtomicBool>,
}

impl ExportIo {
    fn send(&self, bytes: Vec<u8>) {
        if bytes.is_empty() {
            return;
        }
        self.backlog
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        let _ = self.tx.send(LinkMsg::Bytes(bytes));
    }

    fn close(&self) {
        let _ = self.tx.send(LinkMsg::Close);
    }
}

/// Migration bookkeeping of the host, inside [`State`].
pub struct MigrState {
    /// The ASM data plane, both sides.
    plane: AsmPlane,
    /// Export data connections: conn -> their writer.
    exports: HashMap<u64, ExportIo>,
    /// Client connections that sent SYNCSLOTS (target side): conn -> (I/O thread, slot).
    client_conns: HashMap<u64, (usize, usize)>,
    /// Client connections the plane took over as import links, until they close: once the
    /// plane drops a failed import (`handle_apply_failed`) the rest of its stream is
    /// discarded, never read as client commands.
    taken: std::collections::HashSet<u64>,
    /// The session import commands run in (created at the first one).
    applier: Option<ClientCtx>,
    /// MIGRATE's cached connections.
    pub migrate_cache: crate::legacy::MigrateCache,
}

impl MigrState {
    /// No migration; the snapshot reads `databases` databases (`cluster-databases`).
    pub fn new(databases: usize) -> MigrState {
        let cfg = AsmConfig {
            databases: u32::try_from(databases.max(1)).unwrap_or(u32::MAX),
            ..AsmConfig::default()
        };
        MigrState {
            plane: AsmPlane::new(cfg, Millis(unix_ms())),
            exports: HashMap::new(),
            client_conns: HashMap::new(),
            taken: std::collections::HashSet::new(),
            applier: None,
            migrate_cache: crate::legacy::MigrateCache::default(),
        }
    }

    /// Whether write effects must be offered to [`forward`] (an export link is open).
    pub fn forwarding(&self) -> bool {
        !self.exports.is_empty()
    }
}

/// Our keyspace as the snapshot reads it: `KvStore::slot_page`, whose walk visits every key
/// present throughout at least once (what [`SnapshotMode::SlotPaged`] asks).
struct KvSource<'a> {
    kv: &'a KvStore<Value>,
    now: u64,
}

impl SlotSource for KvSource<'_> {
    type Value = Value;

    fn page(
        &self,
        db: u32,
        slot: Slot,
        cursor: u64,
        max: usize,
        f: &mut KeyVisitor<'_, Value>,
    ) -> u64 {
        self.kv
            .slot_page(db as usize, slot, cursor, max, self.now, |k, v, at| {
                f(k, v, at.map(|t| i64::try_from(t).unwrap_or(i64::MAX)))
            })
            .unwrap_or(0)
    }
}

/// Offers one write effect (`argv` in `db`, `key` its first key) to the plane: the command
/// for the export links of its slot, and, while a snapshot is part way through that slot,
/// the state of every key of the effect after the write (sheet A.8 "incremental stream").
pub fn forward(state: &mut State, db: usize, key: &[u8], parts: &[&[u8]]) {
    let slot = ferrocluster_slot::key_hash_slot(key);
    let now = unix_ms();
    let State { kv, migr, .. } = state;
    if let Err(e) = migr.plane.feed(db as u32, Some(slot), parts, Millis(now)) {
        tracing::warn!("slot migration: write not forwarded: {e}");
        return;
    }
    if !migr.plane.wants_key_state(slot) {
        return;
    }
    let keys: Vec<&[u8]> = match crate::table::lookup(parts[0]) {
        Some(spec) => spec.info.key_positions(parts).map(|p| parts[p]).collect(),
        None => vec![key],
    };
    for k in keys {
        if ferrocluster_slot::key_hash_slot(k) != slot {
            continue;
        }
        let value = kv.get(db, k, now).ok().flatten();
        let at = match kv.expiry(db, k, now) {
            Ok(KeyExpiry::At(t)) => Some(i64::try_from(t).unwrap_or(i64::MAX)),
            _ => None,
        };
        let r = migr
            .plane
            .feed_key_state(db as u32, slot, k, value.map(|v| (v, at)), Millis(now));
        if let Err(e) = r {
            tracing::warn!("slot migration: key state not forwarded: {e}");
        }
    }
}

/// Acts on the plane's outputs (called with the replication flush, after every batch).
pub fn flush(shared: &Shared, state: &mut State) {
    if state.migr.exports.is_empty() && state.migr.client_conns.is_empty() {
        return;
    }
    let now = Millis(unix_ms());
    let conns: Vec<(u64, u64)> = state
        .migr
        .exports
        .iter()
        .map(|(c, io)| (*c, io.backlog.load(Ordering::Relaxed)))
        .collect();
    for (conn, unsent) in conns {
        state.migr.plane.handle_unsent(ConnId(conn), unsent, now);
    }
    if state.migr.plane.poll_timeout().is_some_and(|t| t <= now) {
        state.migr.plane.handle_timeout(now);
    }
    drain(shared, state);
}

fn drain(shared: &Shared, state: &mut State) {
    while let Some(o) = state.migr.plane.poll_output() {
        act_output(shared, state, o);
    }
}

fn act_output(shared: &Shared, state: &mut State, o: AsmOutput) {
    match o {
        AsmOutput::Send { conn, bytes } => {
            if let Some(io) = state.migr.exports.get(&conn.0) {
                io.send(bytes);
            } else if let Some(&(io, token)) = state.migr.client_conns.get(&conn.0) {
                shared.deliver(io, token, conn.0, Delivery::Raw(bytes.into()));
            }
        }
        AsmOutput::Close { conn } => close_conn(shared, state, conn),
        AsmOutput::Migration(input) => report(state, input),
        AsmOutput::SyncSlots { conn, argv } => {
            if let Some(side) = state.cluster.as_mut() {
                // A message of the peer on the data connection; replies are off.
                let req = ferrocluster_node::CommandRequest {
                    conn: Some(conn),
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
        AsmOutput::Apply { conn, db, argv } => apply(shared, state, conn, db, &argv),
        AsmOutput::Event(e) => match e {
            AsmEvent::SnapshotWritten { job, keys, bytes } => {
                tracing::info!(job = %job_text(&job), keys, bytes, "slot migration: snapshot written")
            }
            other => tracing::warn!("slot migration data plane: {other:?}"),
        },
    }
}

/// Closes a data connection on our side (the plane forgot it already).
fn close_conn(shared: &Shared, state: &mut State, conn: ConnId) {
    if let Some(io) = state.migr.exports.remove(&conn.0) {
        io.close();
    } else if let Some((io, token)) = state.migr.client_conns.remove(&conn.0) {
        shared.deliver(io, token, conn.0, Delivery::Close);
    }
}

/// Target: runs one command of the import stream in `db`, without routing and without a
/// reply; an error reply fails the job (`AsmPlane::handle_apply_failed`).
fn apply(shared: &Shared, state: &mut State, conn: ConnId, db: u32, argv: &[Vec<u8>]) {
    let now = unix_ms();
    let mut ctx = state
        .migr
        .applier
        .take()
        .unwrap_or_else(|| ClientCtx::internal(shared));
    ctx.db = db as usize;
    let mut flat = Vec::new();
    let mut ranges = Vec::with_capacity(argv.len());
    for a in argv {
        let start = flat.len();
        flat.extend_from_slice(a);
        ranges.push(start..flat.len());
    }
    let args = Args::new(&flat, &ranges);
    let mut sink = Out::new();
    match crate::table::lookup(args.get(0)) {
        // Under `maxmemory` a write that may grow memory is refused once eviction cannot
        // make room (crate::evict): the import fails with the node's `Ran out of memory
        // (OOM) during slot import` (sheet A.16).
        Some(spec)
            if spec.has(ferrocluster_command::CommandFlags::DENYOOM)
                && crate::evict::Eviction::perform(state, now).is_err() =>
        {
            sink.error(crate::evict::OOM_ERR);
        }
        Some(spec) if spec.arity_ok(args.len()) => {
            crate::commands::run(shared, state, &mut ctx, spec, &args, &mut sink, now);
        }
        _ => sink.error("ERR unknown command"),
    }
    state.migr.applier = Some(ctx);
    if sink.buf.first() == Some(&b'-') {
        tracing::warn!(
            reply = %String::from_utf8_lossy(&sink.buf).trim_end(),
            command = %String::from_utf8_lossy(args.get(0)),
            "slot import: a command failed"
        );
        let oom = sink.buf.starts_with(b"-OOM");
        state.migr.plane.handle_apply_failed(conn, oom, Millis(now));
    }
}

/// A job name as text, for logs.
pub fn job_text(job: &JobName) -> String {
    String::from_utf8_lossy(&job.as_bytes()[..]).into_owned()
}

fn report(state: &mut State, input: MigrationInput) {
    if let Some(side) = state.cluster.as_mut() {
        side.node.handle_migration(input, Millis(unix_ms()));
        side.wake();
    }
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

/// After a SYNCSLOTS command on a client connection: if the node made it the import link of
/// a job (an accepted ESTABLISH), the plane takes the connection over now, before the next
/// byte it read is parsed as a command (`MigrationRequest::AcceptImportLink`, which the bus
/// thread sees later, then finds it done).
pub fn after_syncslots(state: &mut State, client: &ClientCtx) {
    let conn = ConnId(client.id);
    let Some(side) = state.cluster.as_ref() else {
        return;
    };
    let Some(job) = side.node.migrations().job_for_conn(conn) else {
        return;
    };
    if job.kind() != JobKind::Import || state.migr.plane.import_of(conn).is_some() {
        return;
    }
    let (name, slots) = (*job.name(), job.slots().clone());
    match state
        .migr
        .plane
        .accept_import(name, conn, slots, &[], Millis(unix_ms()))
    {
        Ok(()) => {
            state.migr.taken.insert(conn.0);
        }
        Err(e) => tracing::warn!("slot import: link not accepted: {e}"),
    }
}

/// Target: `bytes` read from client connection `client` go to the plane when it is an import
/// link (`true`: they are taken, and what they held is applied); `false` otherwise.
pub fn import_bytes(shared: &Shared, state: &mut State, client: &ClientCtx, bytes: &[u8]) -> bool {
    let conn = ConnId(client.id);
    if state.migr.plane.import_of(conn).is_none() {
        // A failed import's connection: its bytes are dropped until the node closes it.
        return state.migr.taken.contains(&conn.0);
    }
    state
        .migr
        .plane
        .handle_bytes(conn, bytes, Millis(unix_ms()));
    drain(shared, state);
    true
}

/// A client connection closed; if it carried SYNCSLOTS, the plane forgets it (the node hears
/// `LinkClosed` for an import link).
pub fn client_closed(shared: &Shared, client_id: u64) {
    let mut st = shared.state.lock();
    st.migr.taken.remove(&client_id);
    if st.migr.client_conns.remove(&client_id).is_some() {
        st.migr
            .plane
            .handle_closed(ConnId(client_id), Millis(unix_ms()));
        drain(shared, &mut st);
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
    let now = Millis(unix_ms());
    if let MigrationRequest::Connect {
        job,
        ip,
        port,
        tls_port,
        ..
    } = req
    {
        // Valkey `getNodeDefaultReplicationPort`: the TLS port with `tls-replication yes`.
        let tls = shared.tls_replication.load(Ordering::Relaxed);
        let port = if tls && tls_port != 0 { tls_port } else { port };
        let shared = Arc::clone(shared);
        let spawned = std::thread::Builder::new()
            .name("asm-connect".into())
            .spawn(move || connect(shared, job, SocketAddr::new(ip, port)));
        if spawned.is_err() {
            tracing::error!("slot migration: can't start a thread");
        }
        return;
    }
    let mut st = shared.state.lock();
    let plane = &mut st.migr.plane;
    match req {
        MigrationRequest::Connect { .. } => {}
        MigrationRequest::SendAuth { conn, .. } => {
            // The replication link's credentials (`primaryuser` / `primaryauth`, else
            // requirepass), as a replica authenticates to its primary.
            let repl = st.repl.engine.config();
            let pass = repl.primary_auth.clone().unwrap_or_default();
            let user = repl.primary_user.clone();
            let plane = &mut st.migr.plane;
            if let Err(e) = plane.send_auth(conn, user.as_deref().map(str::as_bytes), &pass, now) {
                tracing::warn!("slot migration: AUTH not sent: {e}");
            }
        }
        MigrationRequest::Send { conn, message } => plane.send_message(conn, &message, now),
        MigrationRequest::AcceptImportLink { job, conn, slots } => {
            // Taken over already when the ESTABLISH ran (`after_syncslots`), unless the
            // connection is gone.
            if plane.import_of(conn).is_none()
                && st.migr.client_conns.contains_key(&conn.0)
                && !st.migr.taken.contains(&conn.0)
                && st
                    .migr
                    .plane
                    .accept_import(job, conn, slots.clone(), &[], now)
                    .is_ok()
            {
                st.migr.taken.insert(conn.0);
            }
            tracing::info!(job = %job_text(&job), conn = conn.0, slots = slots.len(), "slot import: link accepted");
        }
        MigrationRequest::StartSnapshot { job, conn, ranges } => {
            match plane.start_snapshot(conn, &ranges, SnapshotMode::SlotPaged, now) {
                Ok(()) if st.migr.exports.contains_key(&conn.0) => {
                    let shared2 = Arc::clone(shared);
                    let spawned = std::thread::Builder::new()
                        .name("asm-snapshot".into())
                        .spawn(move || snapshot(shared2, conn));
                    if spawned.is_err() {
                        st.migr.plane.abort_snapshot(&job, now);
                        report(&mut st, MigrationInput::SnapshotStartFailed { job });
                    }
                }
                Ok(()) => report(&mut st, MigrationInput::SnapshotStartFailed { job }),
                Err(e) => {
                    tracing::warn!("slot migration: snapshot not started: {e}");
                    report(&mut st, MigrationInput::SnapshotStartFailed { job });
                }
            }
        }
        MigrationRequest::AbortSnapshot { job } => plane.abort_snapshot(&job, now),
        MigrationRequest::BeginStreaming { conn, .. } => {
            if let Err(e) = plane.begin_streaming(conn, now) {
                tracing::warn!("slot migration: streaming not begun: {e}");
            }
        }
        MigrationRequest::QueryBacklog { job, conn } => {
            if let Some(io) = st.migr.exports.get(&conn.0) {
                let unsent = io.backlog.load(Ordering::Relaxed);
                // A job waiting to pause asks once a second and pauses at 0 bytes
                // (`slot-migration-max-failover-repl-bytes` 0): the writer thread tells the
                // node the moment the socket took everything.
                io.want_drained.store(unsent > 0, Ordering::Relaxed);
                st.migr.plane.handle_unsent(conn, unsent, now);
            }
            st.migr.plane.query_backlog(job, conn, now);
        }
        MigrationRequest::HideSlots { slots } => {
            for s in slots.iter() {
                st.kv.hide_slot(s);
            }
        }
        MigrationRequest::RevealSlots { slots } => {
            for s in slots.iter() {
                st.kv.reveal_slot(s);
            }
        }
        MigrationRequest::DropSlotKeys { slots } => {
            let n = crate::lazyfree::delete_slot_keys(shared, &mut st, &slots);
            tracing::info!(
                slots = slots.len(),
                keys = n,
                "slot import: staged keys dropped"
            );
        }
        MigrationRequest::Propagate { message } => {
            let argv = message.argv();
            let parts: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
            crate::repl::propagate_command(&mut st, &parts);
        }
        MigrationRequest::Close { conn } => {
            st.migr.plane.close(conn, now);
            close_conn(shared, &mut st, conn);
        }
    }
    crate::repl::flush(shared, &mut st);
}

/// Source: opens the export connection, registers it and starts its reader and writer.
fn connect(shared: Arc<Shared>, job: JobName, addr: SocketAddr) {
    // Plain or TLS as replication links are (Valkey `connTypeOfReplication`).
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .and_then(|s| crate::repl::wrap_link(&shared, s));
    let (reader, writer) = match stream {
        Ok(pair) => pair,
        Err(e) => {
            let error = match e.kind() {
                std::io::ErrorKind::ConnectionRefused => "Connection refused".to_string(),
                _ => e.to_string(),
            };
            let mut st = shared.state.lock();
            st.migr
                .plane
                .handle_connect_failed(job, &error, Millis(unix_ms()));
            crate::repl::flush(&shared, &mut st);
            return;
        }
    };
    let conn = shared.next_client_id();
    let (tx, rx) = crossbeam_channel::unbounded();
    let backlog = Arc::new(AtomicU64::new(0));
    let want_drained = Arc::new(AtomicBool::new(false));
    {
        let mut st = shared.state.lock();
        let r = st
            .migr
            .plane
            .handle_connected(job, ConnId(conn), Millis(unix_ms()));
        if let Err(e) = r {
            tracing::warn!("slot migration: {e}");
            return;
        }
        let io = ExportIo {
            job,
            tx,
            backlog: Arc::clone(&backlog),
            want_drained: Arc::clone(&want_drained),
        };
        st.migr.exports.insert(conn, io);
        crate::repl::flush(&shared, &mut st);
    }
    let drained = {
        let shared = Arc::clone(&shared);
        move || {
            let mut st = shared.state.lock();
            let now = Millis(unix_ms());
            let Some(io) = st.migr.exports.get(&conn) else {
                return;
            };
            let (job, unsent) = (io.job, io.backlog.load(Ordering::Relaxed));
            if unsent > 0 {
                // Writes came while the lock was taken: wait for the next drain.
                io.want_drained.store(true, Ordering::Relaxed);
                return;
            }
            st.migr.plane.handle_unsent(ConnId(conn), unsent, now);
            st.migr.plane.query_backlog(job, ConnId(conn), now);
            crate::repl::flush(&shared, &mut st);
        }
    };
    let _ = std::thread::Builder::new()
        .name(format!("asm-out-{conn}"))
        .spawn(move || write_loop(writer, rx, backlog, want_drained, drained));
    let shared2 = Arc::clone(&shared);
    let _ = std::thread::Builder::new()
        .name(format!("asm-in-{conn}"))
        .spawn(move || read_loop(shared2, reader, conn));
}

/// Writes the link's bytes; `drained` reports the backlog to the node when it reaches 0
/// and `want_drained` says the node waits for that.
fn write_loop(
    mut stream: crate::repl::LinkWriter,
    rx: Receiver<LinkMsg>,
    backlog: Arc<AtomicU64>,
    want_drained: Arc<AtomicBool>,
    drained: impl Fn(),
) {
    let mut failed = false;
    while let Ok(msg) = rx.recv() {
        match msg {
            LinkMsg::Bytes(b) => {
                if !failed && stream.write_all(&b).is_err() {
                    // The reader sees the shutdown and reports the closed link.
                    failed = true;
                    stream.shutdown();
                }
                let left = backlog.fetch_sub(b.len() as u64, Ordering::Relaxed) - b.len() as u64;
                if left == 0 && !failed && want_drained.swap(false, Ordering::Relaxed) {
                    drained();
                }
            }
            LinkMsg::Close => break,
        }
    }
    stream.shutdown();
}

/// Source: what the target writes back (reply lines, SYNCSLOTS messages) goes to the plane;
/// the end of the connection is `handle_closed` unless we closed it.
fn read_loop(shared: Arc<Shared>, mut stream: crate::repl::LinkReader, conn: u64) {
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        let n = stream.read(&mut chunk);
        let mut st = shared.state.lock();
        let now = Millis(unix_ms());
        let Some(io) = st.migr.exports.get(&conn) else {
            // We closed it.
            return;
        };
        if n == 0 {
            io.close();
            st.migr.exports.remove(&conn);
            st.migr.plane.handle_closed(ConnId(conn), now);
            // Drained here: `flush` skips the plane once no data connection is left, and
            // the node must still hear this one closed (the export fails with
            // `Connection lost to target...`).
            drain(&shared, &mut st);
            crate::repl::flush(&shared, &mut st);
            return;
        }
        st.migr.plane.handle_bytes(ConnId(conn), &chunk[..n], now);
        crate::repl::flush(&shared, &mut st);
    }
}

/// Lowers the calling thread's scheduling priority (Linux `SCHED_BATCH`, nice 9): the
/// snapshot producer (and `crate::lazyfree`'s `slot-dels` feeder) then gives way to the threads that serve clients when the CPU is short,
/// yet is never starved (`SCHED_IDLE` was measured to stall a migration for seconds on a busy
/// machine). Valkey produces the snapshot in a forked child that competes with the serving
/// thread at equal priority; on a small machine that competition is what client writes wait
/// for during a migration. Failure (another OS, no permission) is ignored.
pub fn lower_priority() {
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

/// Source: the snapshot producer (sheet A.8 step 5): one `snapshot_step` (one page) per
/// lock hold, while the link's unsent bytes stay under `AsmConfig::max_unsent_bytes`, until
/// the plane wrote `SNAPSHOT-EOF` (or the job ended).
fn snapshot(shared: Arc<Shared>, conn: ConnId) {
    lower_priority();
    loop {
        let mut st = shared.state.lock();
        let now = Millis(unix_ms());
        let Some(io) = st.migr.exports.get(&conn.0) else {
            return;
        };
        let unsent = io.backlog.load(Ordering::Relaxed);
        st.migr.plane.handle_unsent(conn, unsent, now);
        if !st.migr.plane.wants_snapshot_step(conn) {
            let waiting = unsent >= st.migr.plane.config().max_unsent_bytes
                && st.migr.exports.contains_key(&conn.0);
            crate::repl::flush(&shared, &mut st);
            drop(st);
            if !waiting {
                // The snapshot was aborted, or the link is gone.
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        let State { kv, migr, .. } = &mut *st;
        let source = KvSource { kv, now: unix_ms() };
        let r = migr.plane.snapshot_step(conn, &source, now);
        crate::repl::flush(&shared, &mut st);
        // Hand the lock to a waiting client thread rather than take it again at once
        // (parking_lot's unlock is unfair by default).
        parking_lot::MutexGuard::unlock_fair(st);
        if !matches!(r, Ok(SnapshotProgress::More)) {
            if let Err(e) = r {
                tracing::warn!("slot migration: snapshot stopped: {e}");
            }
            return;
        }
    }
}

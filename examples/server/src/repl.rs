//! Replication inside a shard, both roles, on `ferrocluster_dataplane::Replication` (the one
//! copy of the protocol: handshake, `+FULLRESYNC` / `+CONTINUE` from the backlog, the replid
//! pair shifted on promotion, `REPLCONF ACK/GETACK`, WAIT, pings, `repl-timeout`). This module
//! is the host of that engine: it keeps it inside [`State`] (under the state lock, so a write
//! and its place in the stream are one step) and acts on its outputs ([`flush`]):
//!
//! * **primary side**: a replica is a client connection that sent `REPLCONF` / `PSYNC`
//!   ([`replconf`], [`psync`]); the engine's bytes for it go to its I/O thread as
//!   `Delivery::Raw`. Every write the node executes is fed as its *effect*
//!   ([`propagate`]: `SET key value PXAT t`, `DEL key`, ...), so relative expiry times and
//!   INCR results are the same on both sides.
//! * **full sync snapshot**: the RDB of the whole keyspace (`crate::snapshot::write_rdb`, with
//!   the `repl-id` / `repl-offset` / `repl-stream-db` aux fields) is made under the state lock
//!   the moment the engine asks for it, so it is exactly the keyspace at the snapshot's offset.
//!   It is sent with the `$<len>` framing at once (`repl-diskless-sync no`, our default: the
//!   snapshot is an in-memory buffer of known length, no fork and no file, so there is nothing
//!   to wait for); `repl-diskless-sync yes` sends it with the `$EOF:` framing after
//!   `repl-diskless-sync-delay`, as Valkey.
//! * **replica side**: our link to the primary is an outbound connection with one reader
//!   thread ([`start_links`]); its bytes go to the engine under the lock and what comes out is
//!   acted on in order: the RDB is decoded chunk by chunk into a staging keyspace
//!   (`ferrocluster_rdb::RdbDecoder`), swapped in at its end (Valkey `repl-diskless-load
//!   swapdb`: the old data set is kept until the new one is complete, and dropped data from a
//!   broken transfer never shows); while it loads, clients get `-LOADING` except for the
//!   commands flagged `loading` (Valkey's rule for a replica that loads a new history). The
//!   stream's commands are applied without routing or replies (`run_replicated`); the engine
//!   proxies the stream to our own replicas.
//! * **role changes** come from the cluster node ([`set_primary`]): `BecamePrimary` shifts
//!   the replid (the old one becomes replid2) so the other replicas of the old primary resync
//!   partially with us; `ReplicateFrom` keeps our history cached so a sibling promoted by a
//!   failover accepts a partial resync.
//!
//! The replid and offset are not saved across a restart: a restarted node starts a new
//! history and its replicas resync fully.
//!
//! The AOF (`crate::aof`) is fed at the same point as the stream ([`ReplState`]'s feed), with
//! the same effects, on both roles.

use crate::client::{Args, ClientCtx, Delivery};
use crate::resp::Out;
use crate::server::{unix_ms, Shared, State};
use crate::table::{Cmd, Spec};
use ferrocluster_dataplane::{
    CloseReason, CommandOutcome, ConnId, Event, Millis, Output, Replication, ReplicationConfig,
    Role, SaveInfo, SnapshotId, SnapshotTarget, UpstreamId,
};
use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

/// The version our replica announces in `REPLCONF version`: Valkey 8.0, the first whose
/// replicas apply a replicated `CLUSTER SETSLOT` (the replica behaviour we follow; a primary
/// waits only for replicas above 7.2.255).
pub const REPLICA_VERSION: &str = "8.0.0";

/// `-LOADING`, Valkey 9's text (`shared.loadingerr`).
pub const LOADING_ERR: &str = "LOADING Valkey is loading the dataset in memory";

/// Where this node replicates from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrimaryAddr {
    /// Host (IP) of the primary's data port.
    pub host: String,
    /// Data port.
    pub port: u16,
}

/// Full and partial sync counters of the primary side (INFO stats `sync_full`,
/// `sync_partial_ok`, `sync_partial_err`, Valkey's meanings: every full sync served; every
/// `+CONTINUE`; every PSYNC that asked for a partial resync and got a full one).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SyncStats {
    /// `sync_full`.
    pub full: u64,
    /// `sync_partial_ok`.
    pub partial_ok: u64,
    /// `sync_partial_err`.
    pub partial_err: u64,
}

/// Where a client connection the engine knows lives, and its peer (for log lines).
#[derive(Debug, Clone, Copy)]
struct EngineConn {
    /// Its I/O thread.
    io: usize,
    /// Its slot in that thread.
    token: usize,
    /// The peer's address.
    addr: Option<std::net::SocketAddr>,
}

impl EngineConn {
    fn of(client: &ClientCtx) -> EngineConn {
        EngineConn {
            io: client.io_thread,
            token: client.token,
            addr: client.addr,
        }
    }
}

/// Replication, inside [`State`]: the engine and what its host keeps beside it.
pub struct ReplState {
    /// The protocol engine (both roles).
    pub engine: Replication,
    /// Client connections the engine knows (replicas, WAIT clients) by client id.
    conns: HashMap<u64, EngineConn>,
    /// Clients blocked in WAIT.
    waiting: HashSet<u64>,
    /// Replicas whose PSYNC asked for a partial resync (for `sync_partial_err`).
    asked_partial: HashSet<ConnId>,
    /// Write halves of the links to our primary.
    links: HashMap<UpstreamId, LinkWriter>,
    /// Links to open ([`start_links`]).
    connects: Vec<(UpstreamId, String, u16)>,
    /// The RDB being loaded.
    loader: Option<crate::snapshot::RdbLoader>,
    /// A load failed: outputs of that transfer are dropped until the next `RdbBegin`.
    discard: bool,
    /// The session the stream's commands run in, and the database it is in.
    applier: Option<(ClientCtx, u32)>,
    /// Where we replicate from (`None`: a primary).
    primary: Option<PrimaryAddr>,
    /// INFO stats counters.
    pub stats: SyncStats,
    /// The AOF fed from the same point as the stream (`crate::aof`; set at start).
    pub aof: Option<Arc<crate::aof::Aof>>,
    /// The AOF is being loaded at start: its commands enter no stream (Redis propagates
    /// nothing while loading).
    pub loading_aof: bool,
    /// `primaryuser` and `primaryauth` as configured (CONFIG GET shows them; the engine has
    /// what they resolve to, `Config::primary_credentials`).
    pub primary_options: (Option<String>, Option<String>),
    /// `min-replicas-to-write` and `min-replicas-max-lag` (seconds): see
    /// [`ReplState::enough_good_replicas`].
    pub min_replicas: (u64, u64),
    /// The writes of the execution unit running now (an EXEC, a transaction applied from the
    /// primary), held until it ends ([`ReplState::end_unit`]); `None` outside a unit.
    unit: Option<Vec<HeldWrite>>,
}

/// A write held by an execution unit: to the AOF and the stream, or (`aof == false`) to the
/// stream only.
struct HeldWrite {
    db: usize,
    argv: Vec<Vec<u8>>,
    aof: bool,
}

impl ReplState {
    /// A primary with no replicas.
    ///
    /// # Errors
    /// A configuration the engine refuses.
    pub fn new(cfg: ReplicationConfig, seed: u64) -> Result<ReplState, String> {
        let engine = Replication::new(cfg, seed, Role::Primary, None, Millis(unix_ms()))
            .map_err(|e| e.to_string())?;
        Ok(ReplState {
            engine,
            conns: HashMap::new(),
            waiting: HashSet::new(),
            asked_partial: HashSet::new(),
            links: HashMap::new(),
            connects: Vec::new(),
            loader: None,
            discard: false,
            applier: None,
            primary: None,
            stats: SyncStats::default(),
            aof: None,
            loading_aof: false,
            primary_options: (None, None),
            min_replicas: (0, 10),
            unit: None,
        })
    }

    /// The replicas that count for `min-replicas-to-write` (Valkey `refreshGoodReplicasCount`):
    /// online, and acknowledged within `min-replicas-max-lag` seconds (whole seconds, as
    /// Valkey's `unixtime` difference).
    pub fn good_replicas(&self, now: u64) -> usize {
        let max_lag = self.min_replicas.1;
        self.engine
            .replicas()
            .iter()
            .filter(|r| {
                r.state == "online" && now / 1000 - (r.last_ack.0 / 1000).min(now / 1000) <= max_lag
            })
            .count()
    }

    /// Whether a write may run (Valkey `checkGoodReplicasStatus`): a replica always, a primary
    /// with `min-replicas-to-write` or `min-replicas-max-lag` 0, or one with at least
    /// `min-replicas-to-write` good replicas ([`ReplState::good_replicas`]). Else the write is
    /// refused with [`NOREPLICAS_ERR`].
    pub fn enough_good_replicas(&self, now: u64) -> bool {
        let (to_write, max_lag) = self.min_replicas;
        to_write == 0
            || max_lag == 0
            || self.is_replica()
            || self.good_replicas(now) as u64 >= to_write
    }

    /// Whether this node replicates from a primary.
    pub fn is_replica(&self) -> bool {
        self.engine.is_replica()
    }

    /// Whether an RDB from the primary is being loaded (clients get `-LOADING`).
    pub fn loading(&self) -> bool {
        self.loader.is_some()
    }

    /// The replication offset (bytes of stream produced or processed).
    pub fn offset(&self) -> u64 {
        self.engine.offset()
    }

    /// The facts the cluster node needs (`ClusterNode::handle_replication`).
    pub fn facts(&self) -> ferrocluster_node::ReplicationState {
        self.engine.replication_state()
    }

    /// Clients blocked in WAIT.
    pub fn waiting_clients(&self) -> usize {
        self.waiting.len()
    }

    /// Online replicas that apply a replicated `CLUSTER SETSLOT` and their acknowledged
    /// offsets (Valkey `clusterCommandSetSlot`: replicas above 7.2.255).
    pub fn setslot_replicas(&self) -> Vec<u64> {
        self.engine
            .replicas()
            .into_iter()
            .filter(|r| r.state == "online")
            .filter(|r| {
                r.version
                    .is_some_and(|v| v > ferrocluster_dataplane::SETSLOT_REPLICA_MIN_VERSION)
            })
            .map(|r| r.offset)
            .collect()
    }

    /// The `# Replication` INFO section (the engine's figures, Valkey 9's fields).
    pub fn info_section(&self, now: u64) -> String {
        let mut s = String::from("# Replication\r\n");
        let body = self.engine.info(Millis(now)).render();
        // Valkey `genValkeyInfoString`: `min_slaves_good_slaves` right after
        // `connected_slaves` while `min-replicas-to-write` and `min-replicas-max-lag` are
        // both set.
        let after_connected = body
            .find("connected_slaves:")
            .and_then(|at| body[at..].find("\r\n").map(|n| at + n + 2));
        match after_connected {
            Some(at) if self.min_replicas.0 != 0 && self.min_replicas.1 != 0 => {
                s.push_str(&body[..at]);
                s.push_str(&format!(
                    "min_slaves_good_slaves:{}\r\n",
                    self.good_replicas(now)
                ));
                s.push_str(&body[at..]);
            }
            _ => s.push_str(&body),
        }
        s
    }

    /// Whether writes are appended to the AOF.
    pub fn aof_on(&self) -> bool {
        self.aof.as_ref().is_some_and(|a| a.is_on())
    }

    /// Appends a command to the AOF (both roles: a replica's is what it applies) and to the
    /// stream as a primary (no-op on a replica: the engine proxies its primary's stream).
    fn feed(&mut self, db: usize, parts: &[&[u8]], now: u64) {
        if self.hold(db, parts, true) {
            return;
        }
        if let Some(a) = &self.aof {
            a.append(db as u32, parts);
        }
        self.feed_stream_now(db, parts, now);
    }

    /// Appends to the stream only (commands for replicas only: `CLUSTER SETSLOT`, `SYNCSLOTS`).
    fn feed_stream(&mut self, db: usize, parts: &[&[u8]], now: u64) {
        if !self.hold(db, parts, false) {
            self.feed_stream_now(db, parts, now);
        }
    }

    fn feed_stream_now(&mut self, db: usize, parts: &[&[u8]], now: u64) {
        if self.engine.is_replica() || self.loading_aof {
            return;
        }
        if let Err(e) = self.engine.feed(db as u32, parts, Millis(now)) {
            tracing::warn!("replication: write not propagated: {e}");
        }
    }

    /// Inside an execution unit, keeps the write for [`ReplState::end_unit`].
    fn hold(&mut self, db: usize, parts: &[&[u8]], aof: bool) -> bool {
        let Some(unit) = self.unit.as_mut() else {
            return false;
        };
        let argv = parts.iter().map(|p| p.to_vec()).collect();
        unit.push(HeldWrite { db, argv, aof });
        true
    }

    /// Starts an execution unit (Valkey's: an EXEC, a transaction from the primary): its
    /// writes are held until [`ReplState::end_unit`]. `false` when one is already open (an
    /// EXEC inside an applied transaction): the outer unit holds them and ends them.
    pub fn begin_unit(&mut self) -> bool {
        if self.unit.is_some() {
            return false;
        }
        self.unit = Some(Vec::new());
        true
    }

    /// Ends the execution unit: its writes go to the AOF and the stream, inside `MULTI` ...
    /// `EXEC` when there are more than one (Valkey `propagatePendingCommands`: a replica, or
    /// the AOF loader, applies them at once or not at all). The `MULTI` carries no `SELECT`;
    /// the first write inside carries its own.
    pub fn end_unit(&mut self, now: u64) {
        let Some(held) = self.unit.take() else {
            return;
        };
        let wrap = held.len() > 1;
        if wrap {
            self.feed_without_db(b"MULTI", now);
        }
        for w in &held {
            let parts: Vec<&[u8]> = w.argv.iter().map(Vec::as_slice).collect();
            if w.aof {
                self.feed(w.db, &parts, now);
            } else {
                self.feed_stream(w.db, &parts, now);
            }
        }
        if wrap {
            self.feed_without_db(b"EXEC", now);
        }
    }

    fn feed_without_db(&mut self, word: &[u8], now: u64) {
        if let Some(a) = &self.aof {
            a.append_without_db(&[word]);
        }
        if self.engine.is_replica() || self.loading_aof {
            return;
        }
        if let Err(e) = self.engine.feed_without_db(&[word], Millis(now)) {
            tracing::warn!(
                "replication: {} not propagated: {e}",
                String::from_utf8_lossy(word)
            );
        }
    }
}

/// Valkey's `shared.noreplicaserr` (without `-` and CRLF): a write refused by
/// `min-replicas-to-write`.
pub const NOREPLICAS_ERR: &str = "NOREPLICAS Not enough good replicas to write.";

/// Appends the effect of a write command to the replication stream (primary only) and offers
/// it to the slot migration export links of its slot (`crate::migrate::forward`).
pub fn propagate(state: &mut State, db: usize, spec: &Spec, args: &Args<'_>, now: u64) {
    propagate_expired(state);
    let to_repl = !state.repl.is_replica();
    let to_asm = state.migr.forwarding();
    let to_aof = state.repl.aof_on();
    if !to_repl && !to_asm && !to_aof {
        return;
    }
    match spec.cmd {
        Cmd::Flushdb | Cmd::Flushall | Cmd::Swapdb | Cmd::Debug => {
            // Pending DELs of detached slots: FLUSHALL deletes those keys itself; the others
            // must find them gone (`crate::lazyfree`, "Order").
            if spec.cmd == Cmd::Flushall {
                crate::lazyfree::forget_pending(state);
            } else {
                crate::lazyfree::before_keyspace_command(state);
            }
            if to_repl || to_aof {
                let parts: Vec<&[u8]> = (0..args.len()).map(|i| args.get(i)).collect();
                state.repl.feed(db, &parts, now);
            }
        }
        // MIGRATE sends the DELs of the keys it moved itself (`propagate_dels`).
        Cmd::Migrate => {}
        // The effect argv the command layer chose (`crate::cmd`'s propagation rule).
        _ => crate::cmd::emit_effect(state, db, spec, args, now, emit),
    }
}

/// `DEL key` for every key the store deleted because it expired (`KvStore::take_expired`),
/// before any other effect goes out (Redis `deleteExpiredKeyAndPropagate`): replicas do not
/// expire keys themselves (a valkey-server replica keeps an expired key and would apply a
/// later INCR to its old value). A replica drops the log: its primary sends the DELs.
pub fn propagate_expired(state: &mut State) {
    if !state.kv.has_expired() {
        return;
    }
    let expired = state.kv.take_expired();
    // INFO `expired_keys`: every key the store deleted as expired (the active cycle, a write
    // or a read that met it).
    state.expired_keys += expired.len() as u64;
    if state.repl.is_replica() {
        return;
    }
    // Valkey `deleteExpiredKeyAndPropagate` signals the key as modified by no client: every
    // tracking client of the key is told, NOLOOP or not.
    let current = state.tracking.current.take();
    for (db, key) in &expired {
        state.tracking.invalidate(key);
        // Valkey `deleteExpiredKeyAndPropagate`: the DEL, then the `expired` event.
        state
            .notify
            .event(crate::notify::EXPIRED, "expired", key, *db);
        emit(state, *db, key, &[b"DEL", key]);
    }
    state.tracking.current = current;
}

/// One key's effect to the replicas and the export links, after the DELs of keys that expired
/// ([`propagate_expired`]) and the pending `DEL`s of its slot (`crate::lazyfree::before_write`).
fn emit(state: &mut State, db: usize, key: &[u8], parts: &[&[u8]]) {
    propagate_expired(state);
    crate::lazyfree::before_write(state, ferrocluster_slot::key_hash_slot(key));
    state.repl.feed(db, parts, unix_ms());
    if state.migr.forwarding() {
        crate::migrate::forward(state, db, key, parts);
    }
}

/// `DEL key` for each of `keys` (MIGRATE moved them away).
pub fn propagate_dels(state: &mut State, db: usize, keys: &[&[u8]]) {
    for k in keys {
        emit(state, db, k, &[b"DEL", k]);
    }
}

/// Appends a command as is (a slot migration's `CLUSTER SYNCSLOTS ESTABLISH/FINISH`, a
/// `CLUSTER SETSLOT`, which replicas apply as coming from their primary). It touches no
/// database; the engine may put a `SELECT` before it, which changes nothing.
pub fn propagate_command(state: &mut State, parts: &[&[u8]]) {
    propagate_expired(state);
    state.repl.feed_stream(0, parts, unix_ms());
}

/// `DEL key` in `db` to the AOF and, as a primary, the stream (not to the export links): a
/// key of a slot another node owns now (`crate::lazyfree::delete_slot_keys`).
pub fn feed_del(state: &mut State, db: usize, key: &[u8], now: u64) {
    // The DELs go to the AOF on both roles (it must mirror the keyspace).
    if !state.repl.is_replica() || state.repl.aof_on() {
        state.repl.feed(db, &[b"DEL", key], now);
    }
}

fn write_reply(reply: &ferrocluster_dataplane::Reply, out: &mut Out) {
    crate::cluster::write_reply(reply, out);
}

/// Acts on every output of the engine, in order (the host loop of
/// `ferrocluster_dataplane::Replication`). Called after every input to the engine, under the
/// state lock; links to open wait for [`start_links`].
pub fn flush(shared: &Shared, state: &mut State) {
    crate::migrate::flush(shared, state);
    let now = unix_ms();
    while let Some(o) = state.repl.engine.poll_output() {
        act(shared, state, o, now);
    }
}

fn act(shared: &Shared, state: &mut State, o: Output, now: u64) {
    let r = &mut state.repl;
    match o {
        Output::ToReplica { conn, bytes } => {
            if let Some(c) = r.conns.get(&conn.0) {
                shared.deliver(c.io, c.token, conn.0, Delivery::Raw(bytes.into()));
            }
        }
        Output::CloseReplica { conn, reason } => {
            let addr = r
                .conns
                .get(&conn.0)
                .and_then(|c| c.addr)
                .map(|a| a.to_string())
                .unwrap_or_default();
            // Valkey's lines (`closeClientOnOutputBufferLimitReached`, `replicationCron`,
            // `updateReplicasWaitingBgsave`); Valkey logs nothing per replica in
            // `disconnectReplicas`.
            match reason {
                CloseReason::OutputBufferLimit => tracing::warn!(
                    "Client id={} addr={addr} scheduled to be closed ASAP for overcoming of output buffer limits.",
                    conn.0
                ),
                CloseReason::Timeout => {
                    tracing::warn!("Disconnecting timedout replica (streaming sync): {addr}")
                }
                CloseReason::SnapshotFailed => {
                    tracing::warn!("SYNC failed. BGSAVE child returned an error")
                }
                _ => tracing::info!(client = conn.0, %addr, ?reason, "replica disconnected"),
            }
            if let Some(c) = r.conns.remove(&conn.0) {
                shared.deliver(c.io, c.token, conn.0, Delivery::Close);
            }
        }
        Output::StartSnapshot { id, target, info } => snapshot(state, id, target, info, now),
        Output::Connect { link, host, port } => r.connects.push((link, host, port)),
        Output::ToPrimary { link, bytes } => {
            if let Some(s) = r.links.get_mut(&link) {
                if let Err(e) = s.write_all(&bytes) {
                    tracing::debug!("replication link: write failed: {e}");
                    s.shutdown();
                }
            }
        }
        Output::CloseUpstream { link } => {
            if let Some(s) = r.links.remove(&link) {
                s.shutdown();
            }
        }
        Output::RdbBegin { offset, size, .. } => {
            tracing::info!(
                offset,
                ?size,
                "replication: full sync from the primary, loading"
            );
            r.discard = false;
            match crate::snapshot::RdbLoader::new(state.kv.databases()) {
                Ok(l) => state.repl.loader = Some(l),
                Err(e) => load_failed(state, &e, now),
            }
        }
        Output::RdbChunk(bytes) => {
            let res = match r.loader.as_mut() {
                Some(l) => l.feed(&bytes, now),
                None => Ok(()),
            };
            if let Err(e) = res {
                load_failed(state, &e, now);
            }
        }
        Output::RdbEnd => {
            let Some(l) = r.loader.take() else {
                return;
            };
            let (kv, keys) = match l.finish(now) {
                Ok(done) => done,
                Err(e) => return load_failed(state, &e, now),
            };
            let old = state.install_kv(kv, now);
            // The old data set is freed on a background thread (Valkey's lazyfree of the
            // replaced databases), and DELs still pending for it are moot.
            crate::lazyfree::forget_pending(state);
            let objects = (0..old.databases())
                .map(|db| old.len_including_hidden(db).unwrap_or(0))
                .sum();
            state.slot_dels.free_later(old, objects);
            if let Some(side) = state.cluster.as_mut() {
                side.node.handle_migration(
                    ferrocluster_node::MigrationInput::FullSync,
                    ferrocluster_node::Millis(now),
                );
                side.wake();
            }
            tracing::info!(
                keys,
                "replication: full copy (RDB) from the primary loaded, streaming"
            );
            crate::aof::after_full_sync(shared, state);
        }
        Output::RdbAbort => {
            r.loader = None;
        }
        Output::Apply(_) | Output::ApplyTransaction(_) if r.discard => {}
        Output::Apply(c) => apply(shared, state, c.db, &c.argv),
        Output::ApplyTransaction(cmds) => {
            // One unit to the AOF, as the primary sent it.
            let unit = state.repl.begin_unit();
            for c in cmds {
                apply(shared, state, c.db, &c.argv);
            }
            if unit {
                state.repl.end_unit(now);
            }
        }
        Output::WaitDone { client, reply } => {
            r.waiting.remove(&client.0);
            if let Some(c) = r.conns.get(&client.0) {
                let mut o = Out::new();
                write_reply(&reply, &mut o);
                shared.deliver(c.io, c.token, client.0, Delivery::Unblock(o.buf.into()));
            }
        }
        Output::Event(e) => event(r, e),
        // `Output` is not exhaustive to the engine's future; nothing else is asked of us.
        #[allow(unreachable_patterns)]
        _ => {}
    }
}

fn event(r: &mut ReplState, e: Event) {
    match e {
        Event::FullSyncNeeded { conn } => {
            r.stats.full += 1;
            if r.asked_partial.remove(&conn) {
                r.stats.partial_err += 1;
            }
            tracing::info!(client = conn.0, "replica: full sync");
        }
        Event::PartialResyncAccepted { conn, bytes } => {
            r.stats.partial_ok += 1;
            r.asked_partial.remove(&conn);
            tracing::info!(client = conn.0, bytes, "replica: partial resync accepted");
        }
        Event::ReplicaOnline { conn } => tracing::info!(client = conn.0, "replica online"),
        Event::LinkUp { partial } => {
            tracing::info!(partial, "replication: link to the primary up")
        }
        Event::LinkDown(why) => tracing::info!(?why, "replication: link to the primary down"),
        other => tracing::debug!(?other, "replication"),
    }
}

fn load_failed(state: &mut State, why: &str, now: u64) {
    tracing::warn!("replication: the primary's RDB does not load: {why}");
    state.repl.loader = None;
    state.repl.discard = true;
    state.repl.engine.handle_load_failed(Millis(now));
}

/// Runs one command of the primary's stream in database `db`, without routing or reply.
fn apply(shared: &Shared, state: &mut State, db: u32, argv: &[Vec<u8>]) {
    let (mut ctx, mut at) = match state.repl.applier.take() {
        Some(a) => a,
        None => {
            let mut ctx = ClientCtx::internal(shared);
            if shared.config.cluster_enabled {
                // CLUSTER SYNCSLOTS in the stream come from our primary (Origin::Primary).
                ctx.cluster = Some(ferrocluster_command::ClientState::primary_link());
            }
            (ctx, u32::MAX)
        }
    };
    let mut sink = Out::new();
    if at != db {
        let d = db.to_string();
        run_argv(
            shared,
            state,
            &mut ctx,
            &[b"SELECT", d.as_bytes()],
            &mut sink,
        );
        at = db;
    }
    let parts: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
    run_argv(shared, state, &mut ctx, &parts, &mut sink);
    state.repl.applier = Some((ctx, at));
}

/// Runs one command given as its parts without routing or reply (the stream's applier, the
/// AOF loader).
pub fn run_argv(
    shared: &Shared,
    state: &mut State,
    ctx: &mut ClientCtx,
    parts: &[&[u8]],
    sink: &mut Out,
) {
    let mut flat = Vec::new();
    let mut ranges = Vec::with_capacity(parts.len());
    for p in parts {
        let start = flat.len();
        flat.extend_from_slice(p);
        ranges.push(start..flat.len());
    }
    crate::commands::run_replicated(shared, state, ctx, &Args::new(&flat, &ranges), sink);
}

/// The RDB of the keyspace as of now (the engine asked under this same lock hold, so it is
/// the keyspace at `info.offset`), handed to the engine in one piece.
fn snapshot(state: &mut State, id: SnapshotId, target: SnapshotTarget, info: SaveInfo, now: u64) {
    let mut aux = crate::snapshot::server_aux(now);
    aux.extend([
        ("repl-stream-db", info.stream_db.to_string()),
        ("repl-id", info.replid.to_string()),
        ("repl-offset", info.offset.to_string()),
    ]);
    let e = &mut state.repl.engine;
    let t = Millis(now);
    let res = match crate::snapshot::write_rdb(crate::snapshot::Keys::Live(&state.kv, now), &aux) {
        Ok(rdb) => {
            let ready = match target {
                SnapshotTarget::Disk => e.handle_snapshot_ready(id, rdb.len() as u64, t),
                _ => Ok(()),
            };
            ready
                .and_then(|()| e.handle_snapshot_chunk(id, &rdb, t))
                .and_then(|()| e.handle_snapshot_end(id, t))
                .map_err(|e| e.to_string())
        }
        Err(why) => Err(why),
    };
    if let Err(why) = res {
        tracing::warn!("full sync: the snapshot failed: {why}");
        let _ = e.handle_snapshot_failed(id, t);
    }
}

/// `ROLE`
pub fn role_reply(state: &State, out: &mut Out) {
    write_reply(&state.repl.engine.role_reply(), out);
}

/// `REPLCONF ...` from a client connection (a replica's options and ACKs).
pub fn replconf(
    shared: &Shared,
    state: &mut State,
    client: &mut ClientCtx,
    args: &Args<'_>,
    out: &mut Out,
) {
    let now = unix_ms();
    let argv = args.to_owned_vec();
    let peer = client.addr.map(|a| a.ip());
    let ack = argv.get(1).is_some_and(|a| a.eq_ignore_ascii_case(b"ack"));
    match state
        .repl
        .engine
        .handle_command(ConnId(client.id), peer, &argv, Millis(now))
    {
        Ok(CommandOutcome::Reply(r)) => write_reply(&r, out),
        Ok(CommandOutcome::NoReply) => {}
        Err(e) => write_reply(&e.to_reply(), out),
    }
    if ack {
        crate::cluster::check_setslot_waits(shared, state, now);
    }
    flush(shared, state);
}

/// `PSYNC replid offset`: a partial resync from the backlog or a full sync (the engine
/// decides); the answer comes as the engine's bytes for this connection.
pub fn psync(
    shared: &Shared,
    state: &mut State,
    client: &mut ClientCtx,
    args: &Args<'_>,
    out: &mut Out,
    now: u64,
) {
    let argv = args.to_owned_vec();
    let conn = ConnId(client.id);
    let peer = client.addr.map(|a| a.ip());
    let r = &mut state.repl;
    r.conns.insert(client.id, EngineConn::of(client));
    if argv.get(1).is_some_and(|id| id.as_slice() != b"?") {
        r.asked_partial.insert(conn);
    }
    match r.engine.handle_command(conn, peer, &argv, Millis(now)) {
        Ok(CommandOutcome::Reply(reply)) => write_reply(&reply, out),
        Ok(CommandOutcome::NoReply) => client.is_replica_link = true,
        Err(e) => {
            r.asked_partial.remove(&conn);
            write_reply(&e.to_reply(), out);
        }
    }
    // The snapshot, if one starts, is taken now, under this lock hold.
    flush(shared, state);
}

/// `WAIT numreplicas timeout`
pub fn wait(
    shared: &Shared,
    state: &mut State,
    client: &mut ClientCtx,
    args: &Args<'_>,
    out: &mut Out,
    now: u64,
) {
    let argv = args.to_owned_vec();
    let r = &mut state.repl;
    let target = r.engine.offset();
    match r
        .engine
        .handle_wait(ConnId(client.id), &argv, target, Millis(now))
    {
        Ok(Some(reply)) => write_reply(&reply, out),
        Ok(None) if client.multi.is_some() || client.in_exec || client.io_thread == usize::MAX => {
            // Cannot block here: the count now (the engine forgets the wait at the close).
            r.engine.handle_conn_closed(ConnId(client.id), Millis(now));
            out.int(r.engine.acked_replicas(target) as i64);
        }
        Ok(None) => {
            client.blocked = true;
            r.conns.insert(client.id, EngineConn::of(client));
            r.waiting.insert(client.id);
        }
        Err(e) => write_reply(&e.to_reply(), out),
    }
    flush(shared, state);
}

/// The engine's timers (WAIT deadlines, the 1 s cron: pings, ACKs, timeouts, reconnects), and
/// the replica links' unsent bytes the I/O threads noted since the last tick
/// (`client-output-buffer-limit replica`, [`Replication::handle_replica_pending`]).
pub fn tick(shared: &Arc<Shared>, state: &mut State, now: u64) {
    let unsent = std::mem::take(&mut *shared.replica_unsent.lock());
    for (id, bytes) in unsent {
        if state.repl.conns.contains_key(&id) {
            state
                .repl
                .engine
                .handle_replica_pending(ConnId(id), bytes, Millis(now));
        }
    }
    let due = state.repl.engine.poll_timeout().is_some_and(|t| t.0 <= now);
    if due {
        state.repl.engine.handle_timeout(Millis(now));
    }
    flush(shared, state);
    start_links(shared, state);
}

/// A connection closed: the engine forgets it as a replica and drops its WAIT.
pub fn replica_link_closed(state: &mut State, client_id: u64) {
    let r = &mut state.repl;
    r.conns.remove(&client_id);
    r.waiting.remove(&client_id);
    r.asked_partial.remove(&ConnId(client_id));
    r.engine
        .handle_conn_closed(ConnId(client_id), Millis(unix_ms()));
}

/// Client writes paused (a manual failover): no ping and no GETACK enter the stream, so the
/// offsets compared stay put.
pub fn set_paused(state: &mut State, paused: bool) {
    state.repl.engine.handle_pause(paused, Millis(unix_ms()));
}

/// Makes this node a replica of `primary` (or a primary with `None`). `full_sync`: the node
/// said the new primary shares no history with us (another shard). Called when the cluster
/// node reports a role change.
pub fn set_primary(
    shared: &Arc<Shared>,
    state: &mut State,
    primary: Option<PrimaryAddr>,
    full_sync: bool,
) {
    if state.repl.primary == primary {
        return;
    }
    let now = Millis(unix_ms());
    match &primary {
        Some(p) => {
            tracing::info!(host = %p.host, port = p.port, "role change: now a replica, syncing from the primary");
            crate::blocking::unblock_all_for_role_change(shared, state);
            state
                .repl
                .engine
                .replicate_from(p.host.clone(), p.port, full_sync, now);
        }
        None => {
            tracing::info!("role change: now a primary");
            state.repl.engine.become_primary(now);
            state.repl.loader = None;
        }
    }
    state.repl.primary = primary;
    state.repl.applier = None;
    flush(shared, state);
    start_links(shared, state);
}

/// Opens the links to our primary the engine asked for: one thread each, which connects,
/// then feeds what it reads to the engine.
pub fn start_links(shared: &Arc<Shared>, state: &mut State) {
    for (link, host, port) in std::mem::take(&mut state.repl.connects) {
        let shared = Arc::clone(shared);
        let spawned = std::thread::Builder::new()
            .name("replica-link".into())
            .spawn(move || link_main(&shared, link, &host, port));
        if spawned.is_err() {
            state
                .repl
                .engine
                .handle_upstream_connect_failed(link, Millis(unix_ms()));
        }
    }
}

/// The write half of an outgoing data link (a replica's link to its primary, a slot
/// migration's export link): plain TCP, or the TLS session with `tls-replication yes`
/// (Valkey `connTypeOfReplication`, which both use).
pub enum LinkWriter {
    /// Plain TCP: a clone of the socket the reader reads.
    Plain(TcpStream),
    /// TLS: the session the reader shares.
    Tls(Arc<ferrocluster_host::tls::BlockingTls>),
}

impl LinkWriter {
    /// Writes all of `bytes` (blocking, within the socket's write timeout).
    ///
    /// # Errors
    /// The socket's (or the TLS session's) error.
    pub fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            LinkWriter::Plain(s) => s.write_all(bytes),
            LinkWriter::Tls(t) => t.write_all(bytes),
        }
    }

    /// Shuts the link down both ways (its reader sees the end).
    pub fn shutdown(&self) {
        match self {
            LinkWriter::Plain(s) => {
                let _ = s.shutdown(Shutdown::Both);
            }
            LinkWriter::Tls(t) => t.shutdown(),
        }
    }
}

/// The read half: plain, or the socket a TLS session decrypts.
pub enum LinkReader {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS: the session, the socket it reads records from, and plaintext decrypted but not
    /// yet handed out.
    Tls(Arc<ferrocluster_host::tls::BlockingTls>, TcpStream, Vec<u8>),
}

impl LinkReader {
    /// Up to `buf.len()` bytes of the stream; 0 at its end or on an error.
    pub fn read(&mut self, buf: &mut [u8]) -> usize {
        self.read_io(buf).unwrap_or_else(|e| {
            tracing::debug!("data link: {e}");
            0
        })
    }

    /// Up to `buf.len()` bytes of the stream, `Ok(0)` at its end; the socket's errors
    /// (`WouldBlock` / `TimedOut` past its read timeout) as they are.
    ///
    /// # Errors
    /// The socket's or the TLS session's.
    pub fn read_io(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            LinkReader::Plain(s) => s.read(buf),
            LinkReader::Tls(t, sock, pending) => {
                if pending.is_empty() && t.read(sock, pending)? == 0 {
                    return Ok(0);
                }
                let n = pending.len().min(buf.len());
                buf[..n].copy_from_slice(&pending[..n]);
                pending.drain(..n);
                Ok(n)
            }
        }
    }

    /// The read timeout of the socket it reads (`None`: wait for ever).
    ///
    /// # Errors
    /// The socket's.
    pub fn set_read_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        match self {
            LinkReader::Plain(s) | LinkReader::Tls(_, s, _) => s.set_read_timeout(t),
        }
    }
}

/// Opens a link to the primary: TCP, then with `tls-replication yes` the TLS handshake
/// (the primary's certificate checked against our CA; ours presented).
fn open_link(shared: &Shared, host: &str, port: u16) -> std::io::Result<(LinkReader, LinkWriter)> {
    let s = connect(host, port)?;
    s.set_write_timeout(Some(Duration::from_secs(5)))?;
    wrap_link(shared, s)
}

/// Makes a connected socket a data link: with `tls-replication yes` (and the TLS files
/// loaded) the TLS handshake runs first (at most 5 s per read of it), the peer's certificate
/// checked against our CA and ours presented; else plain TCP.
///
/// # Errors
/// The socket's errors or the handshake's (`InvalidData`).
pub fn wrap_link(shared: &Shared, s: TcpStream) -> std::io::Result<(LinkReader, LinkWriter)> {
    let tls = shared
        .tls_replication
        .load(std::sync::atomic::Ordering::Relaxed);
    wrap_link_with(shared, s, tls)
}

/// [`wrap_link`] with TLS when `tls` (and the TLS files loaded): MIGRATE's links follow
/// `tls-cluster` (Valkey `connTypeOfCluster`), replication's `tls-replication`.
///
/// # Errors
/// As [`wrap_link`].
pub fn wrap_link_with(
    shared: &Shared,
    s: TcpStream,
    tls: bool,
) -> std::io::Result<(LinkReader, LinkWriter)> {
    s.set_nodelay(true)?;
    match (&shared.tls, tls) {
        (Some(t), true) => {
            s.set_read_timeout(Some(Duration::from_secs(5)))?;
            let ip = s.peer_addr()?.ip();
            let (session, reader) =
                ferrocluster_host::tls::BlockingTls::connect(&t.current(), s, ip)?;
            // Handshake done: the stream may be idle for long (the engine pings).
            reader.set_read_timeout(None)?;
            let session = Arc::new(session);
            Ok((
                LinkReader::Tls(Arc::clone(&session), reader, Vec::new()),
                LinkWriter::Tls(session),
            ))
        }
        _ => {
            let w = s.try_clone()?;
            Ok((LinkReader::Plain(s), LinkWriter::Plain(w)))
        }
    }
}

fn connect(host: &str, port: u16) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::other("no address");
    // A (host, port) pair: an IPv6 host (`::1`) cannot be written as `host:port` text.
    for addr in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

fn link_main(shared: &Arc<Shared>, link: UpstreamId, host: &str, port: u16) {
    let stream = open_link(shared, host, port);
    let mut reader = {
        let mut st = shared.state.lock();
        let now = Millis(unix_ms());
        match stream {
            Ok((r, w)) => {
                st.repl.links.insert(link, w);
                st.repl.engine.handle_upstream_connected(link, now);
                flush(shared, &mut st);
                start_links(shared, &mut st);
                r
            }
            Err(e) => {
                tracing::debug!("replication link to {host}:{port}: {e}");
                st.repl.engine.handle_upstream_connect_failed(link, now);
                flush(shared, &mut st);
                start_links(shared, &mut st);
                return;
            }
        }
    };
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = reader.read(&mut buf);
        let mut st = shared.state.lock();
        if !st.repl.links.contains_key(&link) {
            // The engine closed it.
            return;
        }
        let now = Millis(unix_ms());
        if n == 0 {
            st.repl.links.remove(&link);
            st.repl.engine.handle_upstream_closed(link, now);
        } else if let Err(e) = st.repl.engine.handle_upstream_bytes(link, &buf[..n], now) {
            tracing::warn!("replication stream from {host}:{port} is broken: {e}");
        }
        flush(shared, &mut st);
        start_links(shared, &mut st);
        if n == 0 {
            return;
        }
    }
}

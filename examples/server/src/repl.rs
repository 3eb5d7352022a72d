//! Replication inside a shard: primary -> replica, full copy then a write stream.
//!
//! The wire is Redis's (a Redis 7.0 or Valkey 9.1 replica of ours gets the data), with full
//! syncs only (no backlog, no partial resync yet):
//! 1. the replica connects to the primary's data port and sends (AUTH,)
//!    `REPLCONF listening-port <port>`, `REPLCONF version <v>` and `PSYNC ? -1`;
//! 2. the primary answers `+FULLRESYNC <replid> <offset>` and then `$<len>\r\n` and an RDB
//!    file of the whole keyspace (src/snapshot.rs), made under the state lock so nothing
//!    written after it is missed or doubled;
//! 3. from then on every write is sent as its *effect* (`SET key value [PXAT t]` or `DEL key`,
//!    `FLUSHDB`/`FLUSHALL`/`SWAPDB` as is), so relative expiry times and INCR results are the
//!    same on both sides; the replication offset counts the stream's bytes;
//! 4. the replica acknowledges with `REPLCONF ACK <offset>` after each applied chunk and every
//!    second; WAIT counts replicas whose acknowledged offset reached the primary's offset;
//! 5. like Redis and Valkey (`replicationCron`, `repl-ping-replica-period` 10 s), a primary
//!    with replicas appends `PING` to the stream every [`REPL_PING_PERIOD_MS`] ([`ping_replicas`],
//!    from the timer thread). It counts in the offset like any write, so an idle replica's
//!    offset still moves (its ACKs and the offset it reports to the cluster show it synced).

use crate::client::{Args, ClientCtx, Delivery};
use crate::commands::parse_i64;
use crate::resp::{parse_request, Limits, Out, Parsed};
use crate::server::{unix_ms, Shared, State};
use crate::table::{Cmd, Spec};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Period of the primary's replication `PING`, ms (Redis/Valkey `repl-ping-replica-period`
/// default, 10 s).
pub const REPL_PING_PERIOD_MS: u64 = 10_000;

/// The version our replica announces in `REPLCONF version`: Valkey 8.0, the first whose
/// replicas apply a replicated `CLUSTER SETSLOT` (the replica behaviour we follow; a primary
/// waits only for replicas above 7.2.255).
pub const REPLICA_VERSION: &str = "8.0.0";

/// One connected replica, as the primary sees it.
#[derive(Debug, Clone)]
pub struct ReplicaLink {
    /// Client id of its connection.
    pub client_id: u64,
    /// I/O thread of the connection.
    pub io_thread: usize,
    /// Connection slot.
    pub token: usize,
    /// Its IP.
    pub ip: String,
    /// Its data port (REPLCONF listening-port).
    pub port: u16,
    /// Last acknowledged offset.
    pub ack_offset: u64,
    /// When it last acknowledged (unix ms).
    pub last_ack_ms: u64,
    /// Its `REPLCONF version` (`None`: sent none, as Redis 7.0).
    pub version: Option<(u8, u8, u8)>,
}

impl ReplicaLink {
    /// Whether it applies a replicated `CLUSTER SETSLOT`, so a primary waits for its ACK
    /// (Valkey `clusterCommandSetSlot`: online replicas above 7.2.255).
    pub fn applies_setslot(&self) -> bool {
        self.version
            .is_some_and(|v| v > ferrocluster_dataplane::SETSLOT_REPLICA_MIN_VERSION)
    }
}

/// A client blocked in WAIT.
#[derive(Debug, Clone)]
struct Waiter {
    client_id: u64,
    io_thread: usize,
    token: usize,
    target: u64,
    replicas: usize,
    deadline_ms: Option<u64>,
}

/// Where this node replicates from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrimaryAddr {
    /// Host (IP) of the primary's data port.
    pub host: String,
    /// Data port.
    pub port: u16,
}

/// Replication bookkeeping, inside [`State`].
#[derive(Debug)]
pub struct ReplState {
    /// Replication id (40 hex).
    pub replid: String,
    /// Primary: bytes of stream produced. Replica: bytes of stream applied.
    pub offset: u64,
    /// `Some` while this node is a replica.
    pub primary: Option<PrimaryAddr>,
    /// Replica: the link to the primary is up (full sync done).
    pub link_up: bool,
    /// Replica: last time data came from the primary (unix ms).
    pub last_io_ms: u64,
    /// Replica: since when the link is down after having been up (`None`: up, or never
    /// synced since this node became a replica).
    pub down_since: Option<u64>,
    /// Primary: connected replicas.
    pub replicas: Vec<ReplicaLink>,
    waiters: Vec<Waiter>,
    pending: Vec<u8>,
    stream_db: usize,
    /// Primary: when the last replication PING was appended (unix ms).
    last_ping_ms: u64,
    /// Bumped on every role change; replica threads stop when it moves on.
    pub generation: Arc<AtomicU64>,
}

impl ReplState {
    /// A primary with no replicas.
    pub fn new(replid: String) -> ReplState {
        ReplState {
            replid,
            offset: 0,
            primary: None,
            link_up: false,
            last_io_ms: 0,
            down_since: None,
            replicas: Vec::new(),
            waiters: Vec::new(),
            pending: Vec::new(),
            stream_db: 0,
            last_ping_ms: 0,
            generation: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Whether this node replicates from a primary.
    pub fn is_replica(&self) -> bool {
        self.primary.is_some()
    }

    /// The facts the cluster node needs for elections and its headers' `offset`: a primary's
    /// produced offset, a replica's processed offset and the state of its link
    /// (`ClusterNode::handle_replication`).
    pub fn facts(&self) -> ferrocluster_node::ReplicationState {
        use ferrocluster_node::ReplLink;
        use ferrocluster_topology::Millis;
        let link = if self.primary.is_none() {
            ReplLink::Down
        } else if self.link_up {
            ReplLink::Up {
                last_interaction: Millis(self.last_io_ms),
            }
        } else {
            match self.down_since {
                Some(t) => ReplLink::DownSince(Millis(t)),
                None => ReplLink::Down,
            }
        };
        ferrocluster_node::ReplicationState {
            offset: self.offset,
            link,
        }
    }

    /// Clients blocked in WAIT.
    pub fn waiting_clients(&self) -> usize {
        self.waiters.len()
    }

    /// The `# Replication` INFO section.
    pub fn info_section(&self, now: u64) -> String {
        let mut s = String::from("# Replication\r\n");
        match &self.primary {
            Some(p) => {
                s.push_str(&format!(
                    "role:slave\r\nmaster_host:{}\r\nmaster_port:{}\r\nmaster_link_status:{}\r\nmaster_last_io_seconds_ago:{}\r\nmaster_sync_in_progress:{}\r\nslave_read_repl_offset:{}\r\nslave_repl_offset:{}\r\nslave_priority:100\r\nslave_read_only:1\r\nreplica_announced:1\r\n",
                    p.host,
                    p.port,
                    if self.link_up { "up" } else { "down" },
                    if self.link_up { (now.saturating_sub(self.last_io_ms) / 1000) as i64 } else { -1 },
                    u8::from(!self.link_up),
                    self.offset,
                    self.offset,
                ));
            }
            None => s.push_str("role:master\r\n"),
        }
        s.push_str(&format!("connected_slaves:{}\r\n", self.replicas.len()));
        for (i, r) in self.replicas.iter().enumerate() {
            s.push_str(&format!(
                "slave{i}:ip={},port={},state=online,offset={},lag={}\r\n",
                r.ip,
                r.port,
                r.ack_offset,
                now.saturating_sub(r.last_ack_ms) / 1000
            ));
        }
        s.push_str(&format!(
            "master_failover_state:no-failover\r\nmaster_replid:{}\r\nmaster_replid2:0000000000000000000000000000000000000000\r\nmaster_repl_offset:{}\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:0\r\n",
            self.replid, self.offset
        ));
        s
    }

    fn append_command(&mut self, parts: &[&[u8]]) {
        let start = self.pending.len();
        let mut o = Out {
            buf: std::mem::take(&mut self.pending),
            proto: 2,
        };
        o.array(parts.len());
        for p in parts {
            o.bulk(p);
        }
        self.pending = o.buf;
        self.offset += (self.pending.len() - start) as u64;
    }

    /// Appends `PING` to the stream when this node is a primary with replicas and
    /// [`REPL_PING_PERIOD_MS`] passed since the last one; whether it did.
    fn ping_if_due(&mut self, now: u64) -> bool {
        if self.is_replica() || self.replicas.is_empty() {
            return false;
        }
        if now.saturating_sub(self.last_ping_ms) < REPL_PING_PERIOD_MS {
            return false;
        }
        self.last_ping_ms = now;
        self.append_command(&[b"PING"]);
        true
    }

    fn select(&mut self, db: usize) {
        if db != self.stream_db {
            self.stream_db = db;
            let d = db.to_string();
            self.append_command(&[b"SELECT", d.as_bytes()]);
        }
    }
}

/// Appends the effect of a write command to the replication stream (primary only) and offers
/// it to the slot migration export links of its slot (`crate::migrate::forward`).
pub fn propagate(state: &mut State, db: usize, spec: &Spec, args: &Args<'_>, now: u64) {
    let to_repl = !state.repl.replicas.is_empty() && !state.repl.is_replica();
    let to_asm = state.migr.forwarding();
    if !to_repl && !to_asm {
        return;
    }
    match spec.cmd {
        Cmd::Flushdb | Cmd::Flushall | Cmd::Swapdb | Cmd::Debug => {
            if to_repl {
                state.repl.select(db);
                let parts: Vec<&[u8]> = (0..args.len()).map(|i| args.get(i)).collect();
                state.repl.append_command(&parts);
            }
        }
        // MIGRATE sends the DELs of the keys it moved itself (`propagate_dels`).
        Cmd::Migrate => {}
        // The effect argv the command layer chose (`crate::cmd`'s propagation rule).
        _ => crate::cmd::emit_effect(state, db, spec, args, now, emit),
    }
}

/// One key's effect to the replicas and the export links.
fn emit(state: &mut State, db: usize, key: &[u8], parts: &[&[u8]]) {
    if !state.repl.replicas.is_empty() && !state.repl.is_replica() {
        state.repl.select(db);
        state.repl.append_command(parts);
    }
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

/// Appends a command as is (a slot migration's `CLUSTER SYNCSLOTS ESTABLISH/FINISH`, which
/// replicas apply as coming from their primary).
pub fn propagate_command(state: &mut State, parts: &[&[u8]]) {
    if !state.repl.replicas.is_empty() && !state.repl.is_replica() {
        state.repl.append_command(parts);
    }
}

/// Deletes every key of `slots` (all databases), sending the DELs to the replicas: myself
/// lost these slots to another node (`Event::DeleteSlotKeys`, Valkey's dirty slots).
pub fn delete_slot_keys(state: &mut State, slots: &ferrocluster_slot::SlotSet) -> u64 {
    let mut deleted = 0;
    let mut detached = Vec::new();
    for slot in slots.iter() {
        if state.kv.count_keys_in_slot_all_dbs(slot) == 0 {
            continue;
        }
        if !state.repl.replicas.is_empty() && !state.repl.is_replica() {
            for db in 0..state.kv.databases() {
                let n = state.kv.count_keys_in_slot(db, slot).unwrap_or(0) as usize;
                if n == 0 {
                    continue;
                }
                let keys = state.kv.keys_in_slot(db, slot, n).unwrap_or_default();
                state.repl.select(db);
                for k in keys {
                    state.repl.append_command(&[b"DEL", &k]);
                }
            }
        }
        let taken = state.kv.take_slot(slot);
        deleted += taken.len();
        if taken.len() > LAZYFREE_THRESHOLD {
            detached.push(taken);
        }
    }
    if !detached.is_empty() {
        // Valkey's lazyfree: the memory of a big slot is freed on a background thread, so the
        // clients (and the write pause of a slot migration) do not wait for it.
        std::thread::spawn(move || drop(detached));
    }
    deleted
}

/// Slots holding more keys than this are freed on a background thread (Valkey's
/// `LAZYFREE_THRESHOLD`, 64 allocations).
const LAZYFREE_THRESHOLD: u64 = 64;

/// Sends what was appended to the stream since the last flush to every replica.
pub fn flush(shared: &Shared, state: &mut State) {
    crate::migrate::flush(state);
    if state.repl.pending.is_empty() {
        return;
    }
    let bytes: Arc<[u8]> = std::mem::take(&mut state.repl.pending).into();
    for r in &state.repl.replicas {
        shared.deliver(
            r.io_thread,
            r.token,
            r.client_id,
            Delivery::Raw(Arc::clone(&bytes)),
        );
    }
}

/// `ROLE`
pub fn role_reply(state: &State, out: &mut Out) {
    match &state.repl.primary {
        None => {
            out.array(3);
            out.bulk(b"master");
            out.int(state.repl.offset as i64);
            out.array(state.repl.replicas.len());
            for r in &state.repl.replicas {
                out.array(3);
                out.bulk(r.ip.as_bytes());
                out.bulk(r.port.to_string().as_bytes());
                out.bulk(r.ack_offset.to_string().as_bytes());
            }
        }
        Some(p) => {
            out.array(5);
            out.bulk(b"slave");
            out.bulk(p.host.as_bytes());
            out.int(i64::from(p.port));
            out.bulk(if state.repl.link_up {
                b"connected"
            } else {
                b"connect"
            });
            out.int(state.repl.offset as i64);
        }
    }
}

/// `REPLCONF listening-port N | ACK offset | capa ...`
pub fn replconf(
    shared: &Shared,
    state: &mut State,
    client: &mut ClientCtx,
    args: &Args<'_>,
    out: &mut Out,
) {
    let mut i = 1;
    while i + 1 < args.len() {
        let (k, v) = (args.get(i), args.get(i + 1));
        if k.eq_ignore_ascii_case(b"ack") {
            let off = parse_i64(v).unwrap_or(0).max(0) as u64;
            let now = unix_ms();
            if let Some(r) = state
                .repl
                .replicas
                .iter_mut()
                .find(|r| r.client_id == client.id)
            {
                r.ack_offset = r.ack_offset.max(off);
                r.last_ack_ms = now;
            }
            check_waiters(shared, state, now);
            crate::cluster::check_setslot_waits(shared, state, now);
            // ACKs get no reply.
            return;
        } else if k.eq_ignore_ascii_case(b"listening-port") {
            client.listening_port = parse_i64(v).and_then(|p| u16::try_from(p).ok());
        } else if k.eq_ignore_ascii_case(b"version") {
            client.replica_version = ferrocluster_dataplane::parse_version(v);
        }
        i += 2;
    }
    out.ok();
}

/// `PSYNC replid offset`: always a full resync (no backlog).
pub fn psync(
    _shared: &Shared,
    state: &mut State,
    client: &mut ClientCtx,
    _args: &Args<'_>,
    out: &mut Out,
    now: u64,
) {
    if state.repl.is_replica() {
        out.error("NOMASTERLINK Can't SYNC while not connected with my master");
        return;
    }
    client.is_replica_link = true;
    out.simple(&format!(
        "FULLRESYNC {} {}",
        state.repl.replid, state.repl.offset
    ));
    // The keyspace as of now, under the state lock (nothing written after it is missed or
    // doubled): an RDB file every peer kind loads (src/snapshot.rs).
    let aux = [
        ("redis-ver", crate::admin::COMPAT_VERSION.to_string()),
        ("redis-bits", "64".to_string()),
        ("ctime", (now / 1000).to_string()),
    ];
    match crate::snapshot::write_rdb(&state.kv, &aux, now) {
        // `$<len>\r\n<rdb>`, no CRLF after it (Valkey `sendBulkToReplica`): the stream's
        // offsets start right after the file's last byte.
        Ok(rdb) => {
            out.buf
                .extend_from_slice(format!("${}\r\n", rdb.len()).as_bytes());
            out.buf.extend_from_slice(&rdb);
        }
        Err(e) => {
            tracing::warn!("full sync: the snapshot failed: {e}");
            out.error(&format!("ERR full sync snapshot failed: {e}"));
            return;
        }
    }
    // The stream continues in db 0 terms: force a SELECT before the next write.
    state.repl.stream_db = usize::MAX;
    let ip = client.addr.map(|a| a.ip().to_string()).unwrap_or_default();
    state.repl.replicas.retain(|r| r.client_id != client.id);
    state.repl.replicas.push(ReplicaLink {
        client_id: client.id,
        io_thread: client.io_thread,
        token: client.token,
        ip,
        port: client.listening_port.unwrap_or(0),
        ack_offset: 0,
        last_ack_ms: now,
        version: client.replica_version,
    });
    tracing::info!(replica = %client.addr.map(|a| a.to_string()).unwrap_or_default(), "replica attached: full copy sent");
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
    if state.repl.is_replica() {
        out.error("ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.");
        return;
    }
    let (Some(n), Some(timeout)) = (parse_i64(args.get(1)), parse_i64(args.get(2))) else {
        out.error(crate::commands::NOT_INT);
        return;
    };
    if timeout < 0 {
        out.error("ERR timeout is negative");
        return;
    }
    flush(shared, state);
    let target = state.repl.offset;
    let acked = state
        .repl
        .replicas
        .iter()
        .filter(|r| r.ack_offset >= target)
        .count();
    if n <= 0 || acked >= n as usize || client.multi.is_some() {
        out.int(acked as i64);
        return;
    }
    client.blocked = true;
    state.repl.waiters.push(Waiter {
        client_id: client.id,
        io_thread: client.io_thread,
        token: client.token,
        target,
        replicas: n as usize,
        deadline_ms: if timeout == 0 {
            None
        } else {
            Some(now + timeout as u64)
        },
    });
}

/// The primary's periodic replication PING ([`REPL_PING_PERIOD_MS`]), sent at once.
/// Not while client writes are paused for a manual failover: like Redis, the offset then
/// stays put so the replica can match it exactly.
pub fn ping_replicas(shared: &Shared, state: &mut State, now: u64) {
    if state.writes_paused(now) {
        return;
    }
    if state.repl.ping_if_due(now) {
        flush(shared, state);
    }
}

/// Answers WAITs that are satisfied or timed out.
pub fn check_waiters(shared: &Shared, state: &mut State, now: u64) {
    if state.repl.waiters.is_empty() {
        return;
    }
    let replicas = &state.repl.replicas;
    state.repl.waiters.retain(|w| {
        let acked = replicas.iter().filter(|r| r.ack_offset >= w.target).count();
        if acked >= w.replicas || w.deadline_ms.is_some_and(|d| now >= d) {
            shared.deliver(
                w.io_thread,
                w.token,
                w.client_id,
                Delivery::WaitDone(acked as i64),
            );
            false
        } else {
            true
        }
    });
}

/// A connection closed: forget it as a replica and drop its pending WAIT, if any.
pub fn replica_link_closed(state: &mut State, client_id: u64) {
    state.repl.replicas.retain(|r| r.client_id != client_id);
    state.repl.waiters.retain(|w| w.client_id != client_id);
}

/// Makes this node a replica of `primary` (or a primary with `None`). Starts the replica
/// thread when needed. Called when the cluster node reports a role change.
pub fn set_primary(shared: &Arc<Shared>, state: &mut State, primary: Option<PrimaryAddr>) {
    if state.repl.primary == primary {
        return;
    }
    let gen = state.repl.generation.fetch_add(1, Ordering::SeqCst) + 1;
    state.repl.link_up = false;
    state.repl.down_since = None;
    match &primary {
        Some(p) => {
            tracing::info!(host = %p.host, port = p.port, "role change: now a replica, syncing from the primary");
            state.repl.replicas.clear();
            crate::blocking::unblock_all_for_role_change(shared, state);
            let shared = Arc::clone(shared);
            let p = p.clone();
            let _ = std::thread::Builder::new()
                .name("replica".into())
                .spawn(move || replica_main(shared, p, gen));
        }
        None => {
            tracing::info!("role change: now a primary");
            // Keep the data and the offset; a new replication id starts a new history.
            let mut rng =
                <rand_chacha::ChaCha8Rng as rand_core::SeedableRng>::seed_from_u64(unix_ms());
            state.repl.replid = crate::server::random_hex(&mut rng);
            state.repl.stream_db = usize::MAX;
        }
    }
    state.repl.primary = primary;
}

fn replica_main(shared: Arc<Shared>, primary: PrimaryAddr, gen: u64) {
    let generation = Arc::clone(&shared.state.lock().repl.generation);
    while generation.load(Ordering::SeqCst) == gen {
        if let Err(e) = replica_session(&shared, &primary, gen, &generation) {
            tracing::debug!(error = %e, "replication link to {}:{} down", primary.host, primary.port);
        }
        {
            let mut st = shared.state.lock();
            if generation.load(Ordering::SeqCst) == gen && st.repl.link_up {
                st.repl.link_up = false;
                st.repl.down_since = Some(unix_ms());
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn replica_session(
    shared: &Arc<Shared>,
    primary: &PrimaryAddr,
    gen: u64,
    generation: &AtomicU64,
) -> std::io::Result<()> {
    // A (host, port) pair: an IPv6 host (`::1`) cannot be written as `host:port` text.
    let stream = TcpStream::connect((primary.host.as_str(), primary.port))?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_millis(500)))?;
    let mut w = stream.try_clone()?;
    let mut r = BufReader::with_capacity(256 * 1024, stream);
    let mut line = String::new();
    let send = |w: &mut TcpStream, parts: &[&[u8]]| -> std::io::Result<()> {
        let mut o = Out::new();
        o.array(parts.len());
        for p in parts {
            o.bulk(p);
        }
        w.write_all(&o.buf)
    };
    if let Some(p) = &shared.config.requirepass {
        send(&mut w, &[b"AUTH", p.as_bytes()])?;
        read_line(&mut r, &mut line)?;
    }
    let port = shared.config.port.to_string();
    send(&mut w, &[b"REPLCONF", b"listening-port", port.as_bytes()])?;
    read_line(&mut r, &mut line)?;
    // We apply a replicated CLUSTER SETSLOT (from our primary, `CommandRequest::from_primary`)
    // as a Valkey 8 replica does, so a Valkey 8+ primary, and ours, wait for our ACK of it.
    send(
        &mut w,
        &[b"REPLCONF", b"version", REPLICA_VERSION.as_bytes()],
    )?;
    read_line(&mut r, &mut line)?;
    send(&mut w, &[b"PSYNC", b"?", b"-1"])?;
    read_line(&mut r, &mut line)?;
    let mut words = line.trim_end().split(' ');
    if words.next() != Some("+FULLRESYNC") {
        return Err(std::io::Error::other(format!(
            "unexpected PSYNC reply {line:?}"
        )));
    }
    let replid = words.next().unwrap_or_default().to_string();
    let start_offset: u64 = words.next().and_then(|o| o.parse().ok()).unwrap_or(0);
    // A primary preparing its snapshot sends bare newlines to keep the link alive.
    read_line(&mut r, &mut line)?;
    while line.trim_end().is_empty() {
        read_line(&mut r, &mut line)?;
    }
    let len: usize = line
        .trim_end()
        .strip_prefix('$')
        .and_then(|l| l.parse().ok())
        .ok_or_else(|| std::io::Error::other("bad full-sync header"))?;
    let mut payload = vec![0u8; len];
    read_exact_patient(&mut r, &mut payload)?;
    let mut ctx = ClientCtx::internal(shared);
    if shared.config.cluster_enabled {
        // CLUSTER SYNCSLOTS in the stream come from our primary (Origin::Primary).
        ctx.cluster = Some(ferrocluster_command::ClientState::primary_link());
    }
    let mut sink = Out::new();
    let limits = Limits {
        max_bulk_len: usize::MAX / 2,
        unauthenticated: false,
    };
    let keys;
    {
        let mut st = shared.state.lock();
        if generation.load(Ordering::SeqCst) != gen {
            return Ok(());
        }
        st.kv.flush_all();
        keys = match crate::snapshot::load_rdb(&mut st.kv, &payload, unix_ms()) {
            Ok(n) => n,
            Err(e) => {
                st.kv.flush_all();
                return Err(std::io::Error::other(format!(
                    "the primary's RDB does not load: {e}"
                )));
            }
        };
        st.repl.replid = replid;
        st.repl.offset = start_offset;
        st.repl.link_up = true;
        st.repl.down_since = None;
        st.repl.last_io_ms = unix_ms();
        if let Some(side) = st.cluster.as_mut() {
            side.node.handle_migration(
                ferrocluster_node::MigrationInput::FullSync,
                ferrocluster_node::Millis(unix_ms()),
            );
            side.wake();
        }
    }
    tracing::info!(
        keys,
        bytes = len,
        "replication: full copy (RDB) from the primary loaded, streaming"
    );
    let mut buf: Vec<u8> = Vec::with_capacity(256 * 1024);
    let mut last_ack = 0u64;
    let mut chunk = vec![0u8; 256 * 1024];
    loop {
        if generation.load(Ordering::SeqCst) != gen {
            return Ok(());
        }
        let n = match r.read(&mut chunk) {
            Ok(0) => return Err(std::io::Error::other("primary closed the link")),
            Ok(n) => n,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                0
            }
            Err(e) => return Err(e),
        };
        buf.extend_from_slice(&chunk[..n]);
        let offset = {
            let mut st = shared.state.lock();
            if generation.load(Ordering::SeqCst) != gen {
                return Ok(());
            }
            let used = apply(shared, &mut st, &mut ctx, &buf, limits, &mut sink);
            buf.drain(..used);
            st.repl.offset += used as u64;
            if n > 0 {
                st.repl.last_io_ms = unix_ms();
            }
            st.repl.offset
        };
        let now = unix_ms();
        if n > 0 || now.saturating_sub(last_ack) >= 1000 {
            let o = offset.to_string();
            send(&mut w, &[b"REPLCONF", b"ACK", o.as_bytes()])?;
            last_ack = now;
        }
    }
}

fn read_line(r: &mut BufReader<TcpStream>, line: &mut String) -> std::io::Result<()> {
    line.clear();
    let deadline = unix_ms() + 10_000;
    loop {
        match r.read_line(line) {
            Ok(0) => return Err(std::io::Error::other("primary closed the link")),
            Ok(_) if line.ends_with('\n') => {
                if line.starts_with('-') {
                    return Err(std::io::Error::other(line.trim_end().to_string()));
                }
                return Ok(());
            }
            Ok(_) => {}
            Err(e)
                if (e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut)
                    && unix_ms() < deadline => {}
            Err(e) => return Err(e),
        }
    }
}

fn read_exact_patient(r: &mut BufReader<TcpStream>, buf: &mut [u8]) -> std::io::Result<()> {
    let mut got = 0;
    let deadline = unix_ms() + 120_000;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => return Err(std::io::Error::other("primary closed the link")),
            Ok(n) => got += n,
            Err(e)
                if (e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut)
                    && unix_ms() < deadline => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Applies every complete command in `buf`; returns the bytes used.
fn apply(
    shared: &Shared,
    st: &mut State,
    ctx: &mut ClientCtx,
    buf: &[u8],
    limits: Limits,
    sink: &mut Out,
) -> usize {
    let mut pos = 0;
    let mut ranges = Vec::new();
    let mut words = Vec::new();
    loop {
        match parse_request(&buf[pos..], &mut ranges, &mut words, limits) {
            Parsed::Command { consumed, inline } => {
                if !ranges.is_empty() {
                    let from = if inline { &words[..] } else { &buf[pos..] };
                    let args = Args::new(from, &ranges);
                    crate::commands::run_replicated(shared, st, ctx, &args, sink);
                }
                pos += consumed;
            }
            Parsed::Incomplete { .. } => return pos,
            Parsed::Error(e) => {
                tracing::warn!("replication stream is broken: {e:?}");
                return buf.len();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica() -> ReplicaLink {
        ReplicaLink {
            client_id: 1,
            io_thread: 0,
            token: 0,
            ip: "127.0.0.1".into(),
            port: 7001,
            ack_offset: 0,
            last_ack_ms: 0,
            version: None,
        }
    }

    #[test]
    fn primary_pings_replicas_every_period_and_the_offset_moves() {
        let mut r = ReplState::new("0".repeat(40));
        assert!(!r.ping_if_due(50_000), "no replicas: no PING");
        r.replicas.push(replica());
        assert!(r.ping_if_due(50_000));
        // `*1\r\n$4\r\nPING\r\n` is 14 bytes; it counts in the offset like a write.
        assert_eq!(r.offset, 14);
        assert_eq!(r.pending, b"*1\r\n$4\r\nPING\r\n");
        assert!(!r.ping_if_due(50_000 + REPL_PING_PERIOD_MS - 1));
        assert!(r.ping_if_due(50_000 + REPL_PING_PERIOD_MS));
        assert_eq!(r.offset, 28);
    }

    #[test]
    fn replica_never_pings() {
        let mut r = ReplState::new("0".repeat(40));
        r.replicas.push(replica());
        r.primary = Some(PrimaryAddr {
            host: "127.0.0.1".into(),
            port: 7000,
        });
        assert!(!r.ping_if_due(50_000));
        assert_eq!(r.offset, 0);
    }
}

//! The data plane of the simulated hosts: a real keyspace, the shipped replication and slot
//! migration engines, write pauses and a writing client, beside the cluster bus the [`ClusterSim`] carries.
//!
//! A [`World`] owns a [`ClusterSim`] and plays the part of each host that the node leaves to
//! it (DESIGN.md, the Sans-IO contract), with the code a real host ships:
//!
//! * **Data**: every host keeps a [`ferrocluster_kvstore::KvStore`] of small values (strings
//!   and lists, module `keys`); client writes are real commands on it.
//! * **Connections** (module `tcp`): the data plane's connections between hosts (replication
//!   links, slot migration data connections) follow one set of rules: latency, order,
//!   partitions that hold bytes, refused and timed-out connects, closes and crashes.
//! * **Replication** (module `repl`): every host runs a
//!   [`ferrocluster_dataplane::Replication`] in the role its node gives it
//!   (`replicate_from` / `become_primary` on the node's `ReplicateFrom` / `BecamePrimary`
//!   outputs, and on nothing else, as a real host), over
//!   simulated TCP connections to the other hosts' client ports; full syncs carry RDB bytes
//!   written by `ferrocluster_rdb` from the keyspace at the snapshot's instant and loaded with
//!   its streaming decoder, partial resyncs come from the engine's backlog, the stream is
//!   executed on the replica's keyspace. After each input the host hands the engine's
//!   `replication_state()` to its node (`ClusterNode::handle_replication`) when it changed; a
//!   primary's client writes reach its node on the data-plane cron and on role events, as on
//!   a host whose bus loop reads its replication facts on its own turn while other threads
//!   take writes, so the node's view of a primary's offset lags its data by up to
//!   [`DataConfig::cron_ms`].
//! * **Write pauses**: `Event::PauseWrites` holds the host's client writes from the end of
//!   the step that emitted it (and tells the engine, so no ping enters the stream); the host
//!   then reports its offset, final while paused, with `ClusterNode::handle_writes_paused`.
//! * **Writes**: the client sits beside a vantage host (same side of every partition). It
//!   asks the vantage host's slot table for the owner, follows one MOVED, and the host
//!   acknowledges the write if the client can reach it, its own node says it is a primary
//!   owning the slot, its cluster state is ok and its writes are not paused. The
//!   acknowledged-write oracle ([`World::has_write`]) checks the value each write left in a
//!   host's keyspace.
//! * **Start**: a host running when the [`World`] is made starts its engine then; a host
//!   whose first start the simulator delays (a staggered preset world,
//!   [`crate::Sim::new_staggered`]) starts it when the simulator starts the host
//!   ([`crate::Sim::take_started`]), not replicating until its node says whom to follow
//!   (the node's cron does for a replica loaded from nodes.conf).
//! * **Crashes**: a host's data survives a crash (an fsynced append-only file, with the
//!   replication ID and offset it was at); a restarted host's engine resumes from them and
//!   resyncs (partially when its primary's backlog allows).
//!
//! * **Atomic slot migration** (module `asm`, Valkey 9 `CLUSTER MIGRATESLOTS`): every host
//!   runs the shipped [`ferrocluster_dataplane::AsmPlane`] and carries out its node's
//!   `Event::Migration` requests with it: data connections to the target's client port with
//!   latency, partitions and crashes carrying the plane's bytes (AUTH, SYNCSLOTS messages,
//!   the snapshot's commands read page by page from the keyspace, held and streamed writes),
//!   the target's plane parsing them into commands its keyspace executes,
//!   hide/reveal/drop, migration commands propagated to replicas through the replication
//!   stream and kept in the AOF, and the host-reported failures a test injects (target OOM
//!   [`World::set_import_oom`], output buffer limit [`World::set_output_buffer_limit`], AUTH
//!   refusal [`World::set_auth_rejected`], FLUSHALL [`World::flush_all`], link reset
//!   [`World::break_migration_links`]). [`World::slot_keys`] and [`World::count_keys_in`]
//!   read the keyspaces; [`World::watch_single_writer`] adds the "one writer per migrating
//!   slot" check.
//!
//! All randomness (latencies, replication IDs) comes from an RNG seeded from the
//! simulator's, so a run stays a function of its seed.

mod asm;
mod keys;
mod repl;
mod tcp;

pub use asm::{AsmConfig, AsmStats, WRONGPASS};
pub use keys::Val;
pub use tcp::CONNECT_TIMEOUT_MS;

use crate::cluster::{ClusterSim, ClusterSimExt};
use crate::sim::Violation;
use ferrocluster_node::{
    ClusterNode, CommandOutcome, CommandRequest, EmptyKeyspace, NodeId, Output, ReplLink,
    ReplicationState, Reply, RequestId,
};
use ferrocluster_slot::Slot;
use ferrocluster_topology::Millis;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};

use keys::{Keyspace, Tags};
use repl::{ReplConn, ReplEv, ReplHost};

/// Data-plane timing (simulated ms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataConfig {
    /// How long a full sync's RDB takes to save (the BGSAVE), ms.
    pub sync_ms: u64,
    /// Period of the data-plane cron: the replication engines' timers, each node's role
    /// applied to its engine, and every host's replication state reported to its node, ms.
    /// Held bytes of a partitioned connection are retried at this period too.
    pub cron_ms: u64,
}

impl Default for DataConfig {
    /// RDB saved in 50 ms, cron every 100 ms.
    fn default() -> DataConfig {
        DataConfig {
            sync_ms: 50,
            cron_ms: 100,
        }
    }
}

/// A write the client got acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckedWrite {
    /// Unique write ID: the write's key is `{<tag of slot>}w<id>`, its command and value follow
    /// from the ID (`SET`, `RPUSH` or `INCRBY` of the ID).
    pub id: u64,
    /// The slot written.
    pub slot: Slot,
    /// The host that acknowledged it.
    pub host: usize,
    /// When.
    pub at: Millis,
    /// The host's replication offset just after the write (bytes).
    pub offset: u64,
}

/// Why a write was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum WriteRefusal {
    /// No running host claims the slot (or the redirect led nowhere).
    NoOwner,
    /// The owner's cluster state is fail (CLUSTERDOWN).
    ClusterDown,
    /// The owner's writes are paused for a manual failover.
    Paused,
    /// The owner is on the other side of a partition from the client (which sits beside
    /// the vantage host).
    Unreachable,
}

struct HostData {
    /// The keyspace (survives crashes).
    kv: Keyspace,
    /// The replication engine and its host state.
    repl: ReplHost,
    /// The migration commands (SYNCSLOTS) in the host's AOF since its last rewrite, replayed
    /// at restart.
    aof_syncslots: Vec<Vec<Vec<u8>>>,
    /// Bumped at every crash: events of an earlier incarnation are ignored.
    session: u64,
    paused_until: Option<Millis>,
    reported: Option<ReplicationState>,
    blocked: bool,
}

impl HostData {
    fn new() -> HostData {
        HostData {
            kv: keys::keyspace(),
            repl: ReplHost::default(),
            aof_syncslots: Vec::new(),
            session: 0,
            paused_until: None,
            reported: None,
            blocked: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DataEv {
    Cron,
    Write,
    /// An event of the replication connections and snapshots (module `repl`).
    Repl(ReplEv),
    /// An event of the slot migration data plane (module `asm`).
    Asm(asm::AsmEv),
}

#[derive(Debug, Clone)]
struct Writer {
    slots: Vec<Slot>,
    next: usize,
    interval_ms: u64,
}

/// The answer to a CLUSTER command ([`World::cluster_command`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// The reply, at once (a query, an error, a change that is not saved).
    Now(Reply),
    /// The command changed the saved config: its reply ([`World::reply`]) comes once the
    /// persist is durable.
    Later(RequestId),
}

/// A [`ClusterSim`] plus the hosts' data plane (see the module docs).
pub struct World {
    sim: ClusterSim,
    data: Vec<HostData>,
    ids: Vec<Option<NodeId>>,
    rng: ChaCha8Rng,
    queue: BTreeMap<(Millis, u64), DataEv>,
    next_ev: u64,
    cfg: DataConfig,
    acked: Vec<AckedWrite>,
    refused: BTreeMap<WriteRefusal, u64>,
    writer: Option<Writer>,
    next_write_id: u64,
    vantage: usize,
    events: Vec<(Millis, usize, Output)>,
    /// Deferred CLUSTER replies as they arrived (request → host, reply).
    replies: BTreeMap<RequestId, (usize, Reply)>,
    next_request: u64,
    reports: u64,
    slot_deletions: u64,
    asm: asm::AsmWorld,
    repl_conns: BTreeMap<u64, ReplConn>,
    next_repl_conn: u64,
    tags: Tags,
}

impl World {
    /// Wraps `sim` (turning its event recording on) with the default [`DataConfig`]. Every
    /// host starts with an empty keyspace, its replication engine in its node's role, and
    /// reports its state at once.
    ///
    /// # Errors
    /// A [`Violation`] raised while reporting.
    pub fn new(sim: ClusterSim) -> Result<World, Violation> {
        World::with_config(sim, DataConfig::default())
    }

    /// [`World::new`] with the given data-plane timing.
    ///
    /// # Errors
    /// A [`Violation`] raised while reporting.
    pub fn with_config(mut sim: ClusterSim, cfg: DataConfig) -> Result<World, Violation> {
        sim.set_record_events(true);
        let seed = sim.random();
        let n = sim.hosts();
        let mut w = World {
            data: (0..n).map(|_| HostData::new()).collect(),
            ids: (0..n).map(|h| sim.id(h)).collect(),
            sim,
            rng: ChaCha8Rng::seed_from_u64(seed),
            queue: BTreeMap::new(),
            next_ev: 0,
            cfg,
            acked: Vec::new(),
            refused: BTreeMap::new(),
            writer: None,
            next_write_id: 1,
            vantage: 0,
            events: Vec::new(),
            replies: BTreeMap::new(),
            next_request: 0,
            reports: 0,
            slot_deletions: 0,
            asm: asm::AsmWorld::new(n),
            repl_conns: BTreeMap::new(),
            next_repl_conn: 1,
            tags: Tags::default(),
        };
        let first = w.sim.now().saturating_add_ms(w.cfg.cron_ms);
        w.schedule(first, DataEv::Cron);
        for h in 0..n {
            if w.sim.is_up(h) {
                w.repl_start(h, true)?;
            }
            w.report(h)?;
        }
        Ok(w)
    }

    // ----- access -----

    /// The simulator (read only; run it through the [`World`] so data keeps flowing).
    pub fn sim(&self) -> &ClusterSim {
        &self.sim
    }
    /// The simulator, mutable: for commands and faults that do not advance time. Advancing
    /// time through it directly stops the data plane for that period.
    pub fn sim_mut(&mut self) -> &mut ClusterSim {
        &mut self.sim
    }
    /// The node of a running host.
    pub fn node(&self, host: usize) -> Option<&ClusterNode> {
        self.sim.node(host)
    }
    /// The virtual clock.
    pub fn now(&self) -> Millis {
        self.sim.now()
    }
    /// The host a host's replication engine currently follows (`None` for a primary).
    pub fn follows(&self, host: usize) -> Option<usize> {
        self.data[host].repl.follows
    }
    /// The replication link state of a host's engine (`Down` on a primary and while down).
    pub fn link(&self, host: usize) -> ReplLink {
        self.repl(host)
            .map_or(ReplLink::Down, |r| r.replication_state().link)
    }
    /// Whether a host is a replica whose data link is up (a sync completed and the link held).
    pub fn synced(&self, host: usize) -> bool {
        self.follows(host).is_some() && matches!(self.link(host), ReplLink::Up { .. })
    }
    /// How many full syncs a host loaded as a replica, and how many times its link came up
    /// with a partial resync.
    pub fn sync_counts(&self, host: usize) -> (u64, u64) {
        let r = &self.data[host].repl;
        (r.full_loads, r.partial_resyncs)
    }
    /// How many syncs a host's primary refused or aborted (`-NOMASTERLINK` from a replica
    /// whose own link is down, `-LOADING`, a refused PING or AUTH); the engine retried them.
    pub fn refused_syncs(&self, host: usize) -> u64 {
        self.data[host].repl.refused_syncs
    }
    /// The engine's replication ID pair of a running host: (replid, replid2).
    pub fn replids(&self, host: usize) -> Option<(String, String)> {
        self.repl(host).map(|r| {
            (
                r.replid().as_str().to_owned(),
                r.replid2().as_str().to_owned(),
            )
        })
    }
    /// The value of a key in a host's keyspace (database 0).
    pub fn value(&self, host: usize, key: &[u8]) -> Option<&Val> {
        self.data[host]
            .kv
            .get(0, key, self.sim.now().0)
            .ok()
            .flatten()
    }
    /// The node ID a host had when last seen running.
    pub fn last_id(&self, host: usize) -> Option<NodeId> {
        self.ids[host]
    }
    /// Whether a host's writes are paused at `now`.
    pub fn paused(&self, host: usize) -> bool {
        self.data[host]
            .paused_until
            .is_some_and(|t| self.sim.now() < t)
    }
    /// Whether a host's keyspace holds acknowledged write `id` with the value it left
    /// (applied exactly once). `false` for an ID no host acknowledged.
    pub fn has_write(&self, host: usize, id: u64) -> bool {
        // IDs are handed out in increasing order as writes are acknowledged.
        let Ok(i) = self.acked.binary_search_by_key(&id, |a| a.id) else {
            return false;
        };
        let a = &self.acked[i];
        let key = self.tags_key(a.slot, id);
        self.value(host, &key) == Some(&keys::expected(id))
    }

    /// The key of write `id` to `slot` (read only: the tags are found when writing).
    fn tags_key(&self, slot: Slot, id: u64) -> Vec<u8> {
        self.tags.key_of(slot, id)
    }
    /// Every acknowledged write, in order.
    pub fn acked(&self) -> &[AckedWrite] {
        &self.acked
    }
    /// Refused writes by reason.
    pub fn refused(&self) -> &BTreeMap<WriteRefusal, u64> {
        &self.refused
    }
    /// Every node event seen so far: (time, host, event).
    pub fn events(&self) -> &[(Millis, usize, Output)] {
        &self.events
    }
    /// How many `DeleteSlotKeys` events the nodes emitted (dirty slots, §11.2).
    pub fn slot_deletions(&self) -> u64 {
        self.slot_deletions
    }
    /// How many times a host's state was reported to its node.
    pub fn reports(&self) -> u64 {
        self.reports
    }
    /// The host whose slot table the client reads first (default 0; the first running host
    /// is used while it is down).
    pub fn set_vantage(&mut self, host: usize) {
        self.vantage = host;
    }

    /// Runs `CLUSTER <args>` (`args` without the word CLUSTER) on a running host (no keys)
    /// as a client with its own request ID, and returns the answer: the reply at once, or —
    /// when the command changed the saved config — the request whose reply
    /// ([`World::reply`]) arrives once the persist is durable, while the run goes on. `None`
    /// if the host is down. A `ReplicateFirst` outcome (SETSLOT on a primary with replicas)
    /// is returned as an error reply naming it.
    ///
    /// # Errors
    /// The first broken invariant.
    pub fn cluster_command(
        &mut self,
        host: usize,
        args: &[&str],
    ) -> Result<Option<Answer>, Violation> {
        let mut argv = vec!["CLUSTER"];
        argv.extend_from_slice(args);
        self.next_request += 1;
        let id = RequestId(self.next_request);
        let req = CommandRequest {
            id,
            ..CommandRequest::default()
        };
        let r = self.sim.with_engine(host, |n, now| {
            match n.cluster_command_argv(&argv, &req, &EmptyKeyspace, now) {
                CommandOutcome::Reply(r) => Answer::Now(r),
                CommandOutcome::Deferred => Answer::Later(id),
                other => Answer::Now(Reply::Error(format!("SIM unexpected outcome {other:?}"))),
            }
        })?;
        self.after_sim()?;
        Ok(r)
    }

    /// The deferred reply to `id` ([`Answer::Later`]), once it arrived.
    pub fn reply(&self, id: RequestId) -> Option<&Reply> {
        self.replies.get(&id).map(|(_, r)| r)
    }

    // ----- faults and control -----

    /// Blocks (or unblocks) the replication link of `host` alone (a firewall that rejects its
    /// replication connections: open ones are reset, new ones refused): it can never sync
    /// while blocked, whatever the bus does.
    pub fn block_data(&mut self, host: usize, blocked: bool) {
        self.data[host].blocked = blocked;
        if blocked {
            self.repl_reset_links_of(host);
        }
    }

    /// Crashes a host (see [`crate::Sim::crash`]); its data survives. Returns `false` if it
    /// was already down.
    pub fn crash(&mut self, host: usize) -> bool {
        if !self.sim.crash(host) {
            return false;
        }
        let d = &mut self.data[host];
        d.session += 1;
        d.paused_until = None;
        d.reported = None;
        self.repl_crashed(host);
        self.asm_crashed(host);
        true
    }

    /// Restarts a crashed host and reports its data state to the new node.
    ///
    /// # Errors
    /// The first broken invariant.
    pub fn restart(&mut self, host: usize) -> Result<bool, Violation> {
        if !self.sim.restart(host)? {
            return Ok(false);
        }
        self.ids[host] = self.sim.id(host);
        self.repl_start(host, false)?;
        self.after_sim()?;
        self.report(host)?;
        self.asm_restarted(host)?;
        Ok(true)
    }

    /// Starts (or replaces) a background writer: one write every `interval_ms` to the next of
    /// `slots` in turn. An empty list stops it.
    pub fn start_writer(&mut self, slots: Vec<Slot>, interval_ms: u64) {
        if slots.is_empty() {
            self.writer = None;
            return;
        }
        let first = self.writer.is_none();
        self.writer = Some(Writer {
            slots,
            next: 0,
            interval_ms: interval_ms.max(1),
        });
        if first {
            let at = self.sim.now().saturating_add_ms(interval_ms.max(1));
            self.schedule(at, DataEv::Write);
        }
    }

    /// Stops the background writer.
    pub fn stop_writer(&mut self) {
        self.writer = None;
    }

    /// One client write to `slot` now; `Ok` with the acknowledgement or the reason it was
    /// refused.
    ///
    /// # Errors
    /// A broken invariant while reporting the new offset.
    pub fn write(&mut self, slot: Slot) -> Result<Result<AckedWrite, WriteRefusal>, Violation> {
        let vantage = if self.sim.is_up(self.vantage) {
            Some(self.vantage)
        } else {
            (0..self.sim.hosts()).find(|&h| self.sim.is_up(h))
        };
        let Some(vantage) = vantage else {
            return Ok(self.refuse(WriteRefusal::NoOwner));
        };
        let mut target = self.owner_in_view(vantage, slot);
        // One MOVED: the target's own table may name someone else.
        if let Some(t) = target {
            if !self.claims(t, slot) {
                target = self.owner_in_view(t, slot);
            }
        }
        let Some(t) = target.filter(|&t| self.claims(t, slot)) else {
            return Ok(self.refuse(WriteRefusal::NoOwner));
        };
        let p = self.sim.partitions();
        if t != vantage && !(p.delivers(vantage, t) && p.delivers(t, vantage)) {
            return Ok(self.refuse(WriteRefusal::Unreachable));
        }
        if !self.sim.node(t).is_some_and(ClusterNode::cluster_state_ok) {
            return Ok(self.refuse(WriteRefusal::ClusterDown));
        }
        if self.paused(t) {
            return Ok(self.refuse(WriteRefusal::Paused));
        }
        let id = self.next_write_id;
        self.next_write_id += 1;
        let key = self.tags.key(slot, id);
        let argv = keys::command(&key, id);
        let now = self.sim.now();
        keys::execute(&mut self.data[t].kv, &argv, now.0)
            .map_err(|e| self.dp_violation(t, format!("client write: {}", e.0)))?;
        let offset = self.repl_feed(t, &argv)?;
        let ack = AckedWrite {
            id,
            slot,
            host: t,
            at: now,
            offset,
        };
        self.acked.push(ack);
        self.asm_feed(t, &argv)?;
        // The offset reaches the node on the host's next turn (module docs, "Replication").
        Ok(Ok(ack))
    }

    fn refuse(&mut self, why: WriteRefusal) -> Result<AckedWrite, WriteRefusal> {
        *self.refused.entry(why).or_default() += 1;
        Err(why)
    }

    fn host_of(&self, id: &NodeId) -> Option<usize> {
        self.ids.iter().position(|i| i.as_ref() == Some(id))
    }

    fn owner_in_view(&self, viewer: usize, slot: Slot) -> Option<usize> {
        let owner = self.sim.node(viewer)?.topology().slot_owner(slot)?;
        self.host_of(owner)
    }

    /// Whether host `h` runs, is a primary and owns `slot` in its own table.
    fn claims(&self, h: usize, slot: Slot) -> bool {
        self.sim.node(h).is_some_and(|n| {
            let t = n.topology();
            t.myself().is_primary() && t.slot_owner(slot) == Some(t.myself_id())
        })
    }

    // ----- running -----

    /// Runs every event (bus and data) due at or before `until`.
    ///
    /// # Errors
    /// The first broken invariant.
    pub fn run_until(&mut self, until: Millis) -> Result<(), Violation> {
        while let Some(at) = self.next_time() {
            if at > until {
                break;
            }
            self.step()?;
        }
        self.sim.run_until(until)
    }

    /// Runs for `ms`.
    ///
    /// # Errors
    /// The first broken invariant.
    pub fn run_for(&mut self, ms: u64) -> Result<(), Violation> {
        let until = self.sim.now().saturating_add_ms(ms);
        self.run_until(until)
    }

    /// Runs until `cond` holds (checked after every step) or `max_ms` passed; returns whether
    /// it held.
    ///
    /// # Errors
    /// The first broken invariant.
    pub fn run_until_cond(
        &mut self,
        max_ms: u64,
        mut cond: impl FnMut(&World) -> bool,
    ) -> Result<bool, Violation> {
        let deadline = self.sim.now().saturating_add_ms(max_ms);
        if cond(self) {
            return Ok(true);
        }
        while let Some(at) = self.next_time() {
            if at > deadline {
                break;
            }
            self.step()?;
            if cond(self) {
                return Ok(true);
            }
        }
        self.sim.run_until(deadline)?;
        Ok(cond(self))
    }

    fn next_time(&self) -> Option<Millis> {
        let a = self.sim.next_event_time();
        let b = self.queue.first_key_value().map(|(&(t, _), _)| t);
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn step(&mut self) -> Result<(), Violation> {
        let bus = self.sim.next_event_time();
        let data = self.queue.first_key_value().map(|(&(t, _), _)| t);
        match (bus, data) {
            (Some(b), d) if d.is_none_or(|d| b <= d) => {
                self.sim.step()?;
                self.after_sim()
            }
            (_, Some(_)) => {
                let Some(((at, _), ev)) = self.queue.pop_first() else {
                    return Ok(());
                };
                self.sim.run_until(at)?;
                self.on_data(ev)
            }
            _ => Ok(()),
        }
    }

    /// Acts on the node events of the last step: pauses, and re-pointing on role events.
    fn after_sim(&mut self) -> Result<(), Violation> {
        // A host's delayed first start (a staggered world) ran in the simulator alone: its
        // engine starts now, in the role its node's nodes.conf gives it, before its node's
        // start-up events below are acted on.
        for h in self.sim.take_started() {
            self.ids[h] = self.sim.id(h);
            self.repl_start(h, false)?;
            self.report(h)?;
        }
        let evs = self.sim.take_recorded_events();
        if evs.is_empty() {
            return self.asm_check();
        }
        let asm_work = asm::work_of(&evs);
        // Role outputs in the order each node gave them: the host acts on those alone (a
        // real host does not read its node's topology to decide whom to replicate from).
        let mut follow: Vec<(usize, Option<(NodeId, bool)>)> = Vec::new();
        let mut paused = BTreeSet::new();
        for (_, h, ev) in &evs {
            match ev {
                Output::PauseWrites { until } => {
                    self.data[*h].paused_until = Some(*until);
                    paused.insert(*h);
                }
                Output::UnpauseWrites => {
                    self.data[*h].paused_until = None;
                    self.repl_pause(*h, false);
                }
                Output::DeleteSlotKeys(_) => self.slot_deletions += 1,
                // The sim's hosts all have an IP; one the node does not know yet is named
                // again by the node once it is known.
                Output::ReplicateFrom {
                    primary,
                    ip: Some(_),
                    full_sync,
                    ..
                } => follow.push((*h, Some((*primary, *full_sync)))),
                Output::BecamePrimary => follow.push((*h, None)),
                Output::Reply { to, reply } => {
                    self.replies.insert(*to, (*h, reply.clone()));
                }
                _ => {}
            }
        }
        self.events.extend(evs);
        for (h, want) in follow {
            self.repl_follow(h, want)?;
            self.report(h)?;
        }
        for h in paused {
            self.repl_pause(h, true);
            // The pause holds: the offset is final (`ClusterNode::handle_writes_paused`).
            self.report(h)?;
            let offset = self.offset(h);
            self.sim
                .report_to_engine(h, |n, now| n.handle_writes_paused(offset, now))?;
        }
        self.asm_work(asm_work)?;
        self.asm_check()
    }

    fn on_data(&mut self, ev: DataEv) -> Result<(), Violation> {
        let now = self.sim.now();
        match ev {
            DataEv::Cron => {
                let next = now.saturating_add_ms(self.cfg.cron_ms);
                self.schedule(next, DataEv::Cron);
                self.repl_timers()?;
                self.asm_timers()?;
                for h in 0..self.sim.hosts() {
                    if self.sim.is_up(h) {
                        self.ids[h] = self.sim.id(h);
                        self.report(h)?;
                    }
                }
            }
            DataEv::Repl(ev) => self.repl_event(ev)?,
            DataEv::Asm(ev) => self.asm_event(ev)?,
            DataEv::Write => {
                let Some(w) = self.writer.as_mut() else {
                    return Ok(());
                };
                let slot = w.slots[w.next % w.slots.len()];
                w.next += 1;
                let next = now.saturating_add_ms(w.interval_ms);
                self.schedule(next, DataEv::Write);
                let _ = self.write(slot)?;
            }
        }
        Ok(())
    }

    /// Reports a host's replication state (the engine's `replication_state()`) to its node if
    /// it changed since the last report.
    fn report(&mut self, h: usize) -> Result<(), Violation> {
        if self.sim.node(h).is_none() {
            return Ok(());
        }
        let Some(state) = self.repl(h).map(|r| r.replication_state()) else {
            return Ok(());
        };
        let d = &self.data[h];
        if d.reported == Some(state) {
            return Ok(());
        }
        self.data[h].reported = Some(state);
        self.reports += 1;
        self.sim
            .report_to_engine(h, |n, now| n.handle_replication(state, now))?;
        Ok(())
    }

    fn latency(&mut self) -> u64 {
        let (lo, hi) = (self.sim.net().min_latency_ms, self.sim.net().max_latency_ms);
        if hi <= lo {
            return lo;
        }
        lo + self.rng.next_u64() % (hi - lo + 1)
    }

    fn schedule(&mut self, at: Millis, ev: DataEv) {
        let at = at.max(self.sim.now());
        self.next_ev += 1;
        self.queue.insert((at, self.next_ev), ev);
    }
}

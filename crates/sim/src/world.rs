//! The data plane of the simulated hosts: replication, write pauses and a writing client,
//! beside the cluster bus the [`ClusterSim`] carries.
//!
//! A [`World`] owns a [`ClusterSim`] and plays the part of each host that the node leaves to
//! it (DESIGN.md, the Sans-IO contract): it replicates data from primaries to replicas,
//! reports every change of a host's replication state with `ClusterNode::handle_replication`,
//! pauses writes when a node asks (`Event::PauseWrites`), re-points replication when a node
//! changes role, and runs a client that writes to slots and records every acknowledged write.
//!
//! # Model
//!
//! * **Data**: every host holds a log of write IDs; its replication offset is the log's
//!   length. A primary appends to its log when it accepts a client write.
//! * **Replication link**: a replica follows the host its node names as primary. The link is
//!   up while both hosts run and the network delivers both ways between them (and the test
//!   did not [`World::block_data`] it). When it is not up and becomes possible, a sync starts
//!   and completes after two latencies plus [`DataConfig::sync_ms`]: the replica's log becomes
//!   a copy of the primary's (a full or a partial resync give the same log). While the link is
//!   up every write reaches the replica one latency later (in order), and the primary's
//!   heartbeat refreshes the replica's last interaction every [`DataConfig::heartbeat_ms`].
//!   The link is checked every [`DataConfig::cron_ms`] and right after any role event.
//! * **Reported state** (`ReplicationState`): offset = log length; link `Up{last_interaction}`
//!   while synced and connected, `DownSince(t)` after it dropped (or after the host was
//!   re-pointed to another primary), `Down` while this incarnation never completed a sync
//!   (Valkey: data age unbounded). Primaries report their own offset with link `Down`.
//!   A replica reports as data arrives; a primary does not report each client write: its
//!   offset reaches its node on the data-plane cron and on role events, as on a host whose
//!   bus loop reads its replication facts on its own turn while other threads take writes
//!   (the reference server reads them once per bus-loop turn, after feeding that turn's bus
//!   input), so the node's view of a primary's offset lags its data by up to
//!   [`DataConfig::cron_ms`].
//! * **Write pauses**: `Event::PauseWrites` holds the host's client writes from the end of
//!   the step that emitted it; the host then reports its offset, final while paused, with
//!   `ClusterNode::handle_writes_paused` (a manual failover's primary announces it only
//!   then).
//! * **Writes**: the client sits beside a vantage host (same side of every partition). It
//!   asks the vantage host's slot table for the owner, follows one MOVED, and the host
//!   acknowledges the write if the client can reach it, its own node says it is a primary
//!   owning the slot, its cluster state is ok and its writes are not paused.
//! * **Crashes**: a host's data survives a crash (an fsynced append-only file); a restarted
//!   host reports its offset with link `Down` and syncs again.
//!
//! * **Atomic slot migration** (module `asm`, Valkey 9 `CLUSTER MIGRATESLOTS`): the host side
//!   of every `Event::Migration` request: data connections to the target's client port with
//!   latency, partitions and crashes, the snapshot of the slots' keys, forwarded writes,
//!   hide/reveal/drop, SYNCSLOTS propagation to replicas and the AOF, and the host-reported
//!   failures a test injects (target OOM [`World::set_import_oom`], output buffer limit
//!   [`World::set_output_buffer_limit`], AUTH refusal [`World::set_auth_rejected`], FLUSHALL
//!   [`World::flush_all`], link reset [`World::break_migration_links`]). Keys are a fold over
//!   each host's log ([`World::slot_keys`], [`World::count_keys_in`]);
//!   [`World::watch_single_writer`] adds the "one writer per migrating slot" check.
//!
//! All randomness (latencies) comes from an RNG seeded from the simulator's, so a run stays a
//! function of its seed.

mod asm;

pub use asm::{AsmConfig, AsmStats, CONNECT_TIMEOUT_MS, WRONGPASS};

use crate::cluster::{ClusterSim, ClusterSimExt};
use crate::sim::Violation;
use ferrocluster_node::{
    ClusterNode, CommandOutcome, CommandRequest, EmptyKeyspace, NodeId, Notice, Output, ReplLink,
    ReplicationState, Reply, RequestId,
};
use ferrocluster_slot::Slot;
use ferrocluster_topology::Millis;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};

/// Data-plane timing (simulated ms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataConfig {
    /// How long a sync takes once the replica reached its primary (on top of two latencies).
    pub sync_ms: u64,
    /// Period of the data-plane cron that checks every replication link.
    pub cron_ms: u64,
    /// How often a connected primary's heartbeat refreshes a replica's last interaction.
    pub heartbeat_ms: u64,
}

impl Default for DataConfig {
    /// Sync in 50 ms, cron every 100 ms, heartbeat every 1000 ms.
    fn default() -> DataConfig {
        DataConfig {
            sync_ms: 50,
            cron_ms: 100,
            heartbeat_ms: 1_000,
        }
    }
}

/// A write the client got acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckedWrite {
    /// Unique write ID (the value appended to logs).
    pub id: u64,
    /// The slot written.
    pub slot: Slot,
    /// The host that acknowledged it.
    pub host: usize,
    /// When.
    pub at: Millis,
    /// The host's offset just after the write.
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

#[derive(Debug, Clone, Default)]
struct HostData {
    log: Vec<u64>,
    follows: Option<usize>,
    link: ReplLink,
    session: u64,
    syncing: bool,
    last_deliver: Millis,
    paused_until: Option<Millis>,
    reported: Option<ReplicationState>,
    blocked: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DataEv {
    Cron,
    Deliver {
        replica: usize,
        session: u64,
        upto: usize,
    },
    SyncDone {
        replica: usize,
        session: u64,
    },
    Write,
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
    asm: asm::AsmPlane,
}

impl World {
    /// Wraps `sim` (turning its event recording on) with the default [`DataConfig`]. Every
    /// host starts with an empty log and reports its state at once.
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
            data: vec![HostData::default(); n],
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
            asm: asm::AsmPlane::new(n),
        };
        let first = w.sim.now().saturating_add_ms(w.cfg.cron_ms);
        w.schedule(first, DataEv::Cron);
        for h in 0..n {
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
    /// A host's replication offset (its log length).
    pub fn offset(&self, host: usize) -> u64 {
        self.data[host].log.len() as u64
    }
    /// The host a host's data currently follows (`None` for a primary).
    pub fn follows(&self, host: usize) -> Option<usize> {
        self.data[host].follows
    }
    /// The replication link state the host last reported.
    pub fn link(&self, host: usize) -> ReplLink {
        self.data[host].link
    }
    /// Whether a host is a replica whose data link is up (a sync completed and the link held).
    pub fn synced(&self, host: usize) -> bool {
        self.data[host].follows.is_some() && matches!(self.data[host].link, ReplLink::Up { .. })
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
    /// Whether a host's log holds write `id`.
    pub fn has_write(&self, host: usize, id: u64) -> bool {
        self.data[host].log.contains(&id)
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

    /// Blocks (or unblocks) the replication link of `host` alone (a firewalled replication
    /// port): it can never sync while blocked, whatever the bus does.
    pub fn block_data(&mut self, host: usize, blocked: bool) {
        self.data[host].blocked = blocked;
    }

    /// Crashes a host (see [`crate::Sim::crash`]); its data survives. Returns `false` if it
    /// was already down.
    pub fn crash(&mut self, host: usize) -> bool {
        if !self.sim.crash(host) {
            return false;
        }
        let d = &mut self.data[host];
        d.session += 1;
        d.syncing = false;
        d.link = ReplLink::Down;
        d.paused_until = None;
        d.reported = None;
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
        self.data[host].follows = None;
        self.after_sim()?;
        self.check_link(host)?;
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
        self.data[t].log.push(id);
        let ack = AckedWrite {
            id,
            slot,
            host: t,
            at: self.sim.now(),
            offset: self.offset(t),
        };
        self.acked.push(ack);
        self.asm_forward(t, slot, id)?;
        self.stream(t);
        // The offset reaches the node on the host's next turn (module docs, "Reported state").
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
        let evs = self.sim.take_recorded_events();
        if evs.is_empty() {
            return self.asm_check();
        }
        let asm_work = asm::work_of(&evs);
        let mut role_changed = BTreeSet::new();
        let mut paused = BTreeSet::new();
        for (_, h, ev) in &evs {
            match ev {
                Output::PauseWrites { until } => {
                    self.data[*h].paused_until = Some(*until);
                    paused.insert(*h);
                }
                Output::UnpauseWrites => self.data[*h].paused_until = None,
                Output::DeleteSlotKeys(_) => self.slot_deletions += 1,
                Output::Notice(Notice::BecameReplica { .. })
                | Output::ReplicateFrom { .. }
                | Output::BecamePrimary
                | Output::ClusterReset { .. } => {
                    role_changed.insert(*h);
                }
                Output::Reply { to, reply } => {
                    self.replies.insert(*to, (*h, reply.clone()));
                }
                _ => {}
            }
        }
        self.events.extend(evs);
        for h in role_changed {
            self.check_link(h)?;
            self.report(h)?;
        }
        for h in paused {
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
                for h in 0..self.sim.hosts() {
                    if self.sim.is_up(h) {
                        self.ids[h] = self.sim.id(h);
                        self.check_link(h)?;
                        self.report(h)?;
                    }
                }
            }
            DataEv::Deliver {
                replica,
                session,
                upto,
            } => {
                let d = &self.data[replica];
                if d.session != session || d.syncing || !matches!(d.link, ReplLink::Up { .. }) {
                    return Ok(());
                }
                let Some(p) = d.follows else { return Ok(()) };
                let have = d.log.len();
                let plog = &self.data[p].log;
                let upto = upto.min(plog.len());
                let prefix = have <= plog.len() && (have == 0 || d.log[have - 1] == plog[have - 1]);
                if !prefix {
                    // The primary's history changed under us (it re-synced): copy it.
                    let copy = plog[..upto].to_vec();
                    self.data[replica].log = copy;
                } else if upto > have {
                    let add = plog[have..upto].to_vec();
                    self.data[replica].log.extend(add);
                }
                self.asm_replicated(replica, prefix.then_some(have))?;
                self.data[replica].link = ReplLink::Up {
                    last_interaction: now,
                };
                self.stream(replica); // sub-replicas (chained replication)
                self.report(replica)?;
            }
            DataEv::SyncDone { replica, session } => {
                let d = &self.data[replica];
                if d.session != session || !d.syncing {
                    return Ok(());
                }
                let Some(p) = d.follows else { return Ok(()) };
                if !self.reachable(p, replica) {
                    self.data[replica].syncing = false;
                    return Ok(());
                }
                let log = self.data[p].log.clone();
                let old = &self.data[replica].log;
                let kept = log.starts_with(old).then_some(old.len());
                let d = &mut self.data[replica];
                d.log = log;
                d.syncing = false;
                d.link = ReplLink::Up {
                    last_interaction: now,
                };
                d.last_deliver = now;
                self.report(replica)?;
                self.asm_replicated(replica, kept)?;
            }
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

    /// Whether the data link `primary → replica` can carry data now.
    fn reachable(&self, primary: usize, replica: usize) -> bool {
        let p = self.sim.partitions();
        self.sim.is_up(primary)
            && self.sim.is_up(replica)
            && !self.data[replica].blocked
            && p.delivers(primary, replica)
            && p.delivers(replica, primary)
    }

    /// Re-points a host's replication to the primary its node names, and brings its link up
    /// or down as the network allows.
    fn check_link(&mut self, h: usize) -> Result<(), Violation> {
        let now = self.sim.now();
        let Some(node) = self.sim.node(h) else {
            return Ok(());
        };
        let me = node.topology().myself();
        let want = if me.is_replica() {
            me.primary.and_then(|p| self.host_of(&p))
        } else {
            None
        };
        let d = &mut self.data[h];
        if want != d.follows {
            d.follows = want;
            d.session += 1;
            d.syncing = false;
            if let ReplLink::Up { .. } = d.link {
                d.link = ReplLink::DownSince(now);
            }
        }
        let Some(p) = want else {
            return Ok(());
        };
        if !self.reachable(p, h) {
            let d = &mut self.data[h];
            if let ReplLink::Up { .. } = d.link {
                d.link = ReplLink::DownSince(now);
            }
            if d.syncing {
                d.syncing = false;
                d.session += 1;
            }
            return Ok(());
        }
        match self.data[h].link {
            ReplLink::Up { last_interaction }
                if now.since(last_interaction) >= self.cfg.heartbeat_ms =>
            {
                self.data[h].link = ReplLink::Up {
                    last_interaction: now,
                };
            }
            ReplLink::Up { .. } => {}
            _ if !self.data[h].syncing => {
                let lat = 2 * self.latency() + self.cfg.sync_ms;
                let d = &mut self.data[h];
                d.session += 1;
                d.syncing = true;
                let session = d.session;
                self.schedule(
                    now.saturating_add_ms(lat),
                    DataEv::SyncDone {
                        replica: h,
                        session,
                    },
                );
            }
            _ => {}
        }
        Ok(())
    }

    /// Queues the delivery of `primary`'s log, as it is now, to every connected replica.
    fn stream(&mut self, primary: usize) {
        let now = self.sim.now();
        let upto = self.data[primary].log.len();
        for r in 0..self.data.len() {
            let d = &self.data[r];
            if d.follows != Some(primary) || d.syncing || !matches!(d.link, ReplLink::Up { .. }) {
                continue;
            }
            let lat = self.latency();
            let d = &mut self.data[r];
            let at = now.saturating_add_ms(lat).max(d.last_deliver);
            d.last_deliver = at;
            let session = d.session;
            self.schedule(
                at,
                DataEv::Deliver {
                    replica: r,
                    session,
                    upto,
                },
            );
        }
    }

    /// Reports a host's replication state to its node if it changed since the last report.
    fn report(&mut self, h: usize) -> Result<(), Violation> {
        let Some(node) = self.sim.node(h) else {
            return Ok(());
        };
        let replica = node.topology().myself().is_replica();
        let d = &self.data[h];
        let state = ReplicationState {
            offset: d.log.len() as u64,
            link: if replica { d.link } else { ReplLink::Down },
        };
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

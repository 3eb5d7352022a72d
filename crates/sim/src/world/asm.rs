//! The atomic slot migration (ASM) data plane of the simulated hosts: what a host does for
//! each `MigrationRequest` of its node (slot-migration sheet A.7–A.17), modelled on the
//! reference server (`examples/server/src/migrate.rs`).
//!
//! # Model
//!
//! * **Keyspace**: a host's real keyspace (module `keys`); a migrated key is a write ID whose
//!   key and value the target recreates. What the data plane writes on a primary (an
//!   *imported* key from an import link; a *drop* of slots: `DropSlotKeys`, the dirty-slot
//!   deletion of a node that lost slots, FLUSHALL; a *SYNCSLOTS* entry: `Propagate`
//!   ESTABLISH / FINISH) is executed there and fed to its replication stream as commands
//!   (`SET`/`RPUSH`, `DEL`/`FLUSHALL`, `CLUSTER SYNCSLOTS ...`); SYNCSLOTS entries are kept in
//!   its AOF too. Replicas apply the stream and feed the SYNCSLOTS entries to their node as
//!   coming from their primary (`Origin::Primary`). A replica that loaded a full sync's RDB
//!   tells its node: `FullSync`, `BeforeLoad`, one `LoadedSlotImport` per import its primary
//!   has in progress (the RDB's slot-import sections), `AfterLoad`. A restarted host replays
//!   the SYNCSLOTS entries of its AOF with `Origin::Aof`, then `AfterLoad`.
//! * **Data connections**: `Connect` reaches the host at the target's client address after
//!   two latencies (SYN, SYN-ACK); a crashed host refuses; a partition makes the connect
//!   retry every second and fail after [`CONNECT_TIMEOUT_MS`] (`Connection timed out`).
//!   Messages (AUTH, reply lines, SYNCSLOTS commands, snapshot and streamed keys, FIN) take a
//!   latency each and never overtake each other; a blocked direction holds them (TCP
//!   retransmission) until the partition heals or an end closes. A crash closes the host's
//!   ends at once; the peer hears the close one latency later. [`World::break_migration_links`]
//!   resets every data connection between two hosts (both ends hear the close).
//! * **Snapshot** (`StartSnapshot`): the keys of the job's slots at that instant (a fork) are
//!   written on the link; [`AsmConfig::snapshot_ms`] later `SYNCSLOTS SNAPSHOT-EOF` follows
//!   and the node hears `SnapshotDone`. Client writes to the job's slots acknowledged from
//!   `StartSnapshot` on are queued for the link and flushed at `BeginStreaming`, then
//!   streamed as they happen.
//! * **Target**: SYNCSLOTS commands go to the node (`migration_command`, `Origin::Conn`);
//!   ESTABLISH's reply goes back as a line. Keys arriving on an import link are written to
//!   the target's keyspace and stream (so its replicas get them) unless the test made the
//!   target run out of memory ([`World::set_import_oom`]: the node hears `ImportOom`).
//!   `HideSlots` / `RevealSlots` keep a per-host hidden slot set. `DropSlotKeys` and
//!   `Propagate` write a drop / SYNCSLOTS entry on a primary.
//! * **Backlog**: the bytes of the writes queued during the snapshot plus the bytes a blocked
//!   direction holds. `QueryBacklog` reports them; above the host's output buffer limit
//!   ([`World::set_output_buffer_limit`]) the node hears `OutputBufferLimit` instead (checked
//!   also on every queued write).
//! * **AUTH**: with `primaryauth_set` the source writes AUTH first; a target made to refuse
//!   it ([`World::set_auth_rejected`]) answers `-WRONGPASS ...`.

use super::{DataEv, World};
use crate::cluster::ClusterSimExt;
use crate::sim::{host_ip, Violation, CLIENT_PORT};
use ferrocluster_node::{
    AuthReply, ClusterNode, CommandOutcome, CommandRequest, ConnId, EmptyKeyspace, JobKind,
    JobName, MigrationInput, MigrationRequest, Origin, Output, Reply, SnapshotResult, SyncSlots,
};
use ferrocluster_slot::{Slot, SlotSet};
use ferrocluster_topology::Millis;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// A connect across a partition fails after this long (the reference server's connect
/// timeout), ms.
pub const CONNECT_TIMEOUT_MS: u64 = 5_000;
/// How often a connect across a partition retries (SYN retransmission), ms.
pub(super) const SYN_RETRY_MS: u64 = 1_000;
/// An import link's activity is reported to the node at most this often (reference server),
/// ms.
const IMPORT_DATA_EVERY_MS: u64 = 100;
/// The error line of a refused AUTH (Valkey's text).
pub const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// ASM data-plane settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AsmConfig {
    /// How long a snapshot takes from `StartSnapshot` to `SNAPSHOT-EOF`, ms.
    pub snapshot_ms: u64,
    /// Bytes one key takes on the link (snapshot record or streamed write), for backlogs.
    pub key_bytes: u64,
}

impl Default for AsmConfig {
    /// Snapshots take 100 ms; a key is 64 bytes on the wire.
    fn default() -> AsmConfig {
        AsmConfig {
            snapshot_ms: 100,
            key_bytes: 64,
        }
    }
}

/// Counters of the ASM data plane.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AsmStats {
    /// Data connections opened (connects that succeeded).
    pub connections: u64,
    /// Snapshots started.
    pub snapshots: u64,
    /// Keys written in snapshots.
    pub snapshot_keys: u64,
    /// Client writes queued or streamed to an export link.
    pub forwarded: u64,
    /// Keys a target applied from an import link.
    pub imported: u64,
    /// Drop entries appended (`DropSlotKeys`, dirty-slot deletions, FLUSHALL).
    pub drops: u64,
    /// SYNCSLOTS entries appended by primaries (`Propagate`).
    pub propagated: u64,
    /// `ImportOom` reports.
    pub ooms: u64,
    /// `OutputBufferLimit` reports.
    pub output_limits: u64,
}

#[derive(Debug, Clone)]
pub(super) enum Op {
    Imported { write: u64, slot: Slot },
    Drop { slots: Box<SlotSet> },
    Sync { argv: Vec<Vec<u8>> },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AsmEv {
    Connect { conn: u64 },
    Flush { conn: u64, dir: usize },
    SnapshotDone { conn: u64, gen: u64 },
}

#[derive(Debug, Clone)]
enum Msg {
    Auth,
    Line(Vec<u8>),
    Command(Vec<Vec<u8>>),
    Data { write: u64, slot: Slot },
    Fin,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Auth,
    Establish,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Handshake,
    Snapshot,
    Streaming,
}

#[derive(Debug)]
struct Conn {
    /// Source host (end 0) and target host (end 1); `usize::MAX` for an address no host has.
    ends: [usize; 2],
    job: JobName,
    started: Millis,
    connected: bool,
    open: [bool; 2],
    /// `dirs[d]`: messages sent by end `d`, with their ready time.
    dirs: [VecDeque<(Millis, Msg)>; 2],
    last_ready: [Millis; 2],
    phase: Phase,
    slots: SlotSet,
    queued: Vec<Msg>,
    expect: VecDeque<Expect>,
    snapshot_gen: u64,
    limit_hit: bool,
    last_import_data: Option<Millis>,
}

/// The ASM state of the world.
#[derive(Debug, Default)]
pub(super) struct AsmPlane {
    cfg: AsmConfig,
    conns: BTreeMap<u64, Conn>,
    next_conn: u64,
    hidden: Vec<SlotSet>,
    oom: BTreeSet<usize>,
    auth_rejected: BTreeSet<usize>,
    output_limit: BTreeMap<usize, u64>,
    watched: SlotSet,
    stats: AsmStats,
}

impl AsmPlane {
    pub(super) fn new(hosts: usize) -> AsmPlane {
        AsmPlane {
            hidden: vec![SlotSet::new(); hosts],
            next_conn: 1,
            ..AsmPlane::default()
        }
    }
}

/// What after_sim hands to the ASM plane.
pub(super) enum Work {
    Request(MigrationRequest),
    DeleteSlotKeys(SlotSet),
}

/// Picks the ASM work out of a step's node events.
pub(super) fn work_of(evs: &[(Millis, usize, Output)]) -> Vec<(usize, Work)> {
    evs.iter()
        .filter_map(|(_, h, e)| match e {
            Output::Migration(r) => Some((*h, Work::Request((**r).clone()))),
            Output::DeleteSlotKeys(s) => Some((*h, Work::DeleteSlotKeys((**s).clone()))),
            _ => None,
        })
        .collect()
}

fn msg_bytes(m: &Msg, key_bytes: u64) -> u64 {
    match m {
        Msg::Auth => 32,
        Msg::Line(l) => l.len() as u64,
        Msg::Command(argv) => argv.iter().map(|a| a.len() as u64 + 8).sum::<u64>() + 4,
        Msg::Data { .. } => key_bytes,
        Msg::Fin => 0,
    }
}

fn reply_line(r: &Reply) -> Vec<u8> {
    match r {
        Reply::Simple(s) => format!("+{s}\r\n").into_bytes(),
        Reply::Error(e) => format!("-{e}\r\n").into_bytes(),
        other => format!("-ERR unexpected reply {other:?}\r\n").into_bytes(),
    }
}

impl World {
    // ----- public surface -----

    /// Sets the ASM data-plane timing.
    pub fn set_asm_config(&mut self, cfg: AsmConfig) {
        self.asm.cfg = cfg;
    }

    /// ASM data-plane counters.
    pub fn asm_stats(&self) -> &AsmStats {
        &self.asm.stats
    }

    /// Makes `host` run out of memory (`true`) while applying keys from an import link: each
    /// key it would apply is reported as `ImportOom` instead (sheet A.10 `Ran out of memory
    /// (OOM) during slot import`).
    pub fn set_import_oom(&mut self, host: usize, oom: bool) {
        if oom {
            self.asm.oom.insert(host);
        } else {
            self.asm.oom.remove(&host);
        }
    }

    /// Sets `host`'s `client-output-buffer-limit replica` for export links in bytes (`None`:
    /// no limit). A link whose backlog passes it is reported with `OutputBufferLimit`.
    pub fn set_output_buffer_limit(&mut self, host: usize, bytes: Option<u64>) {
        match bytes {
            Some(b) => self.asm.output_limit.insert(host, b),
            None => self.asm.output_limit.remove(&host),
        };
    }

    /// Makes `host` refuse (`true`) the AUTH of migration sources with [`WRONGPASS`].
    pub fn set_auth_rejected(&mut self, host: usize, rejected: bool) {
        if rejected {
            self.asm.auth_rejected.insert(host);
        } else {
            self.asm.auth_rejected.remove(&host);
        }
    }

    /// Resets every open migration data connection between `a` and `b` (either direction):
    /// both ends hear the close one latency later. Returns how many were reset.
    pub fn break_migration_links(&mut self, a: usize, b: usize) -> usize {
        let ids: Vec<u64> = self
            .asm
            .conns
            .iter()
            .filter(|(_, c)| c.connected && (c.ends == [a, b] || c.ends == [b, a]))
            .map(|(&id, _)| id)
            .collect();
        for &id in &ids {
            for side in 0..2 {
                let open = self.asm.conns.get(&id).is_some_and(|c| c.open[side]);
                if open {
                    // The reset reaches each end as a FIN from the other.
                    self.asm_push(id, 1 - side, Msg::Fin);
                }
            }
            if let Some(c) = self.asm.conns.get_mut(&id) {
                c.dirs[0].retain(|(_, m)| matches!(m, Msg::Fin));
                c.dirs[1].retain(|(_, m)| matches!(m, Msg::Fin));
                c.queued.clear();
                c.snapshot_gen += 1;
            }
        }
        ids.len()
    }

    /// Open migration data connections (at least one end open).
    pub fn migration_links(&self) -> usize {
        self.asm
            .conns
            .values()
            .filter(|c| c.open[0] || c.open[1])
            .count()
    }

    /// The slots `host` hides as importing (HideSlots minus RevealSlots since its start).
    pub fn hidden_slots(&self, host: usize) -> &SlotSet {
        &self.asm.hidden[host]
    }

    /// The keys (write IDs) `host` holds in `slot`, hidden ones included.
    pub fn slot_keys(&self, host: usize, slot: Slot) -> BTreeSet<u64> {
        let mut only = SlotSet::new();
        only.insert(slot);
        self.keyspace(host, Some(&only))
            .remove(&slot)
            .unwrap_or_default()
    }

    /// How many keys `host` holds in `slots`, hidden ones included.
    pub fn count_keys_in(&self, host: usize, slots: &SlotSet) -> usize {
        self.keyspace(host, Some(slots))
            .values()
            .map(BTreeSet::len)
            .sum()
    }

    /// Issue 16 item 4, for a settled cluster: no running primary holds keys of a slot that
    /// another node owns in its own view, unless it imports the slot (hidden by an atomic
    /// slot migration, or a legacy IMPORTING mark).
    ///
    /// # Errors
    /// The first host and slot that break it, with the key count and the owner.
    pub fn check_no_stale_keys(&self) -> Result<(), String> {
        for h in 0..self.sim.hosts() {
            let Some(n) = self.sim.node(h) else { continue };
            let t = n.topology();
            if !t.myself().is_primary() {
                continue;
            }
            for (slot, keys) in self.keyspace(h, None) {
                let foreign = t.slot_owner(slot).is_some_and(|o| o != t.myself_id());
                let importing =
                    self.asm.hidden[h].contains(slot) || t.importing_from(slot).is_some();
                if foreign && !importing && !keys.is_empty() {
                    return Err(format!(
                        "primary host {h} holds {} keys of slot {slot}, owned by {}",
                        keys.len(),
                        t.slot_owner(slot).map_or("?", |o| o.as_str())
                    ));
                }
            }
        }
        Ok(())
    }

    /// FLUSHALL on `host`: every key goes (a drop entry that replicates) and the node hears
    /// `Flush` (sheet A.17: every in-progress job fails with `Data was flushed`).
    ///
    /// # Errors
    /// The first broken invariant.
    pub fn flush_all(&mut self, host: usize) -> Result<(), Violation> {
        if !self.sim.is_up(host) {
            return Ok(());
        }
        let mut all = SlotSet::new();
        for s in Slot::all() {
            all.insert(s);
        }
        self.append_op(
            host,
            Op::Drop {
                slots: Box::new(all),
            },
        )?;
        self.asm_report(host, MigrationInput::Flush)
    }

    /// Checks after every step, from now on, that no two running hosts accept writes to one
    /// of `slots` at the same time: for each slot at most one host whose own node says it is
    /// a primary owning the slot, with cluster state ok and writes not paused (the atomic
    /// hand-over of sheet A.8: the source stays paused until it learns of the new owner).
    /// A second one stops the run with the invariant `asm single writer`.
    pub fn watch_single_writer(&mut self, slots: &SlotSet) {
        self.asm.watched = self.asm.watched.union(slots);
    }

    // ----- hooks called by the rest of the world -----

    /// The invariant of [`World::watch_single_writer`].
    pub(super) fn asm_check(&self) -> Result<(), Violation> {
        if self.asm.watched.is_empty() {
            return Ok(());
        }
        for slot in self.asm.watched.iter() {
            let writers: Vec<usize> = (0..self.sim.hosts())
                .filter(|&h| {
                    self.claims(h, slot)
                        && !self.paused(h)
                        && self.sim.node(h).is_some_and(ClusterNode::cluster_state_ok)
                })
                .collect();
            if writers.len() > 1 {
                return Err(Violation {
                    seed: self.sim.seed(),
                    at: self.sim.now(),
                    elapsed_ms: self.sim.elapsed_ms(),
                    event_no: self.sim.events(),
                    host: writers[0],
                    invariant: "asm single writer".into(),
                    message: format!("slot {slot}: hosts {writers:?} all accept writes"),
                });
            }
        }
        Ok(())
    }

    /// Acts on the ASM work of a step.
    pub(super) fn asm_work(&mut self, work: Vec<(usize, Work)>) -> Result<(), Violation> {
        for (h, w) in work {
            match w {
                Work::Request(r) => self.asm_request(h, r)?,
                Work::DeleteSlotKeys(slots) => {
                    if self.count_keys_in(h, &slots) > 0 {
                        self.append_op(
                            h,
                            Op::Drop {
                                slots: Box::new(slots),
                            },
                        )?;
                    }
                }
            }
        }
        Ok(())
    }

    /// A client write acknowledged by `host`: queue or stream it on the export links whose
    /// job holds its slot.
    pub(super) fn asm_forward(
        &mut self,
        host: usize,
        slot: Slot,
        id: u64,
    ) -> Result<(), Violation> {
        let ids: Vec<u64> = self
            .asm
            .conns
            .iter()
            .filter(|(_, c)| {
                c.ends[0] == host
                    && c.open[0]
                    && c.phase != Phase::Handshake
                    && c.slots.contains(slot)
            })
            .map(|(&id, _)| id)
            .collect();
        for conn in ids {
            self.asm.stats.forwarded += 1;
            let msg = Msg::Data { write: id, slot };
            let snapshot = self
                .asm
                .conns
                .get(&conn)
                .is_some_and(|c| c.phase == Phase::Snapshot);
            if snapshot {
                if let Some(c) = self.asm.conns.get_mut(&conn) {
                    c.queued.push(msg);
                }
            } else {
                self.asm_push(conn, 0, msg);
            }
            self.check_limit(conn)?;
        }
        Ok(())
    }

    /// `host` crashed: its ends close at once, the peers hear it one latency later; its
    /// hidden-slot marks (process memory) are gone.
    pub(super) fn asm_crashed(&mut self, host: usize) {
        let ids: Vec<(u64, usize)> = self
            .asm
            .conns
            .iter()
            .filter_map(|(&id, c)| c.ends.iter().position(|&e| e == host).map(|s| (id, s)))
            .collect();
        for (id, side) in ids {
            let Some(c) = self.asm.conns.get_mut(&id) else {
                continue;
            };
            let was_open = c.open[side];
            c.open[side] = false;
            c.snapshot_gen += 1;
            c.dirs[1 - side].clear();
            if was_open && c.connected && c.open[1 - side] {
                self.asm_push(id, side, Msg::Fin);
            } else if !c.connected {
                self.asm.conns.remove(&id);
            }
        }
        self.asm.hidden[host].clear();
    }

    /// `host` restarted: the SYNCSLOTS entries of its AOF are replayed (`Origin::Aof`), then
    /// loading ends (`AfterLoad`: a primary fails pending imports with `Process restarted`
    /// and cleans up, sheet A.16).
    pub(super) fn asm_restarted(&mut self, host: usize) -> Result<(), Violation> {
        let argvs = self.data[host].aof_syncslots.clone();
        if argvs.is_empty() {
            return Ok(());
        }
        for argv in argvs {
            self.asm_command(host, Origin::Aof, argv)?;
        }
        self.asm_report(host, MigrationInput::AfterLoad)
    }

    /// Replica `replica` loaded a full sync's RDB: its node hears the load, with the imports
    /// its primary has in progress (the RDB's slot-import sections).
    pub(super) fn asm_loaded(&mut self, replica: usize) -> Result<(), Violation> {
        let pending: Vec<(JobName, Vec<ferrocluster_slot::SlotRange>)> = self.data[replica]
            .repl
            .follows
            .and_then(|p| self.sim.node(p))
            .map(|n| {
                n.migrations()
                    .jobs()
                    .filter(|j| j.kind() == JobKind::Import && j.state().is_in_progress())
                    .map(|j| (*j.name(), j.ranges().to_vec()))
                    .collect()
            })
            .unwrap_or_default();
        let mine = self
            .sim
            .node(replica)
            .is_some_and(|n| n.migrations().jobs().len() > 0);
        if pending.is_empty() && !mine {
            return Ok(()); // no migration anywhere near: nothing to tell the node
        }
        self.asm_report(replica, MigrationInput::FullSync)?;
        self.asm_report(replica, MigrationInput::BeforeLoad)?;
        for (name, ranges) in pending {
            self.asm_report(replica, MigrationInput::LoadedSlotImport { name, ranges })?;
        }
        self.asm_report(replica, MigrationInput::AfterLoad)
    }

    pub(super) fn asm_event(&mut self, ev: AsmEv) -> Result<(), Violation> {
        match ev {
            AsmEv::Connect { conn } => self.on_connect(conn),
            AsmEv::Flush { conn, dir } => self.on_flush(conn, dir),
            AsmEv::SnapshotDone { conn, gen } => self.on_snapshot_done(conn, gen),
        }
    }

    // ----- keyspace -----

    /// The keys of `host` by slot (restricted to `only` if given), as the write IDs they hold.
    fn keyspace(&self, host: usize, only: Option<&SlotSet>) -> BTreeMap<Slot, BTreeSet<u64>> {
        let kv = &self.data[host].kv;
        let mut ks: BTreeMap<Slot, BTreeSet<u64>> = BTreeMap::new();
        let mut visit = |slot: Slot| {
            if kv.count_keys_in_slot(0, slot).unwrap_or(0) == 0 {
                return;
            }
            let ids = kv
                .keys_in_slot(0, slot, usize::MAX)
                .unwrap_or_default()
                .iter()
                .filter_map(|k| super::keys::write_id(k))
                .collect();
            ks.insert(slot, ids);
        };
        match only {
            Some(o) => o.iter().for_each(&mut visit),
            None => Slot::all().for_each(&mut visit),
        }
        ks
    }

    /// Executes a data-plane write on a primary's keyspace and propagates it through its
    /// replication stream (SYNCSLOTS entries go to its AOF too). Ignored on a replica (it
    /// gets its primary's stream) and on a crashed host.
    fn append_op(&mut self, host: usize, op: Op) -> Result<(), Violation> {
        let primary = self
            .sim
            .node(host)
            .is_some_and(|n| n.topology().myself().is_primary());
        if !primary || self.repl(host).is_none() {
            return Ok(());
        }
        let now = self.sim.now().0;
        let cmds: Vec<Vec<Vec<u8>>> = match op {
            Op::Imported { write, slot } => {
                self.asm.stats.imported += 1;
                let key = self.tags.key(slot, write);
                super::keys::restore_commands(&key, &super::keys::expected(write))
            }
            Op::Drop { slots } => {
                self.asm.stats.drops += 1;
                if slots.len() == ferrocluster_slot::SLOT_COUNT {
                    vec![vec![b"FLUSHALL".to_vec()]]
                } else {
                    let kv = &self.data[host].kv;
                    slots
                        .iter()
                        .flat_map(|s| kv.keys_in_slot(0, s, usize::MAX).unwrap_or_default())
                        .map(|k| vec![b"DEL".to_vec(), k.to_vec()])
                        .collect()
                }
            }
            Op::Sync { argv } => {
                self.asm.stats.propagated += 1;
                self.data[host].aof_syncslots.push(argv.clone());
                self.repl_feed(host, &argv)?;
                return self.report(host);
            }
        };
        for argv in cmds {
            super::keys::execute(&mut self.data[host].kv, &argv, now)
                .map_err(|e| self.dp_violation(host, format!("data-plane write: {}", e.0)))?;
            self.repl_feed(host, &argv)?;
        }
        self.report(host)
    }

    // ----- node calls -----

    fn asm_report(&mut self, host: usize, input: MigrationInput) -> Result<(), Violation> {
        self.sim
            .report_to_engine(host, |n, now| n.handle_migration(input, now))?;
        self.after_sim()
    }

    pub(super) fn asm_command(
        &mut self,
        host: usize,
        origin: Origin,
        argv: Vec<Vec<u8>>,
    ) -> Result<Option<Reply>, Violation> {
        let req = CommandRequest {
            from_aof: origin == Origin::Aof,
            from_primary: origin == Origin::Primary,
            conn: match origin {
                Origin::Conn(c) => Some(c),
                _ => None,
            },
            ..CommandRequest::default()
        };
        let r = self.sim.report_to_engine(host, |n, now| {
            n.cluster_command_argv(&argv, &req, &EmptyKeyspace, now)
        })?;
        self.after_sim()?;
        Ok(match r {
            Some(CommandOutcome::Reply(r)) => Some(r),
            // SYNCSLOTS messages change no saved config: nothing is deferred.
            _ => None,
        })
    }

    // ----- requests -----

    fn asm_request(&mut self, h: usize, req: MigrationRequest) -> Result<(), Violation> {
        let now = self.sim.now();
        match req {
            MigrationRequest::Connect { job, ip, port, .. } => {
                let dst = (0..self.sim.hosts())
                    .find(|&i| port == CLIENT_PORT && host_ip(i) == ip)
                    .unwrap_or(usize::MAX);
                let id = self.asm.next_conn;
                self.asm.next_conn += 1;
                self.asm.conns.insert(
                    id,
                    Conn {
                        ends: [h, dst],
                        job,
                        started: now,
                        connected: false,
                        open: [true, true],
                        dirs: [VecDeque::new(), VecDeque::new()],
                        last_ready: [now, now],
                        phase: Phase::Handshake,
                        slots: SlotSet::new(),
                        queued: Vec::new(),
                        expect: VecDeque::new(),
                        snapshot_gen: 0,
                        limit_hit: false,
                        last_import_data: None,
                    },
                );
                let lat = 2 * self.latency();
                self.schedule(
                    now.saturating_add_ms(lat),
                    DataEv::Asm(AsmEv::Connect { conn: id }),
                );
            }
            MigrationRequest::SendAuth { job, conn } => {
                let ok = self.asm.conns.get_mut(&conn.0).is_some_and(|c| {
                    if c.open[0] {
                        c.expect.push_back(Expect::Auth);
                    }
                    c.open[0]
                });
                if ok {
                    self.asm_push(conn.0, 0, Msg::Auth);
                } else {
                    let reply = AuthReply::WriteFailed("connection closed".into());
                    self.asm_report(h, MigrationInput::AuthReply { job, reply })?;
                }
            }
            MigrationRequest::Send { conn, message } => {
                let Some(side) = self.side_of(conn.0, h) else {
                    return Ok(());
                };
                if side == 0 && matches!(message, SyncSlots::Establish { .. }) {
                    if let Some(c) = self.asm.conns.get_mut(&conn.0) {
                        c.expect.push_back(Expect::Establish);
                    }
                }
                self.asm_push(conn.0, side, Msg::Command(message.argv()));
            }
            MigrationRequest::StartSnapshot { job, conn, ranges } => {
                if self.side_of(conn.0, h) != Some(0) {
                    return self.asm_report(h, MigrationInput::SnapshotStartFailed { job });
                }
                let mut slots = SlotSet::new();
                for r in &ranges {
                    slots.insert_range(*r);
                }
                let keys = self.keyspace(h, Some(&slots));
                let gen = match self.asm.conns.get_mut(&conn.0) {
                    Some(c) => {
                        c.slots = slots;
                        c.phase = Phase::Snapshot;
                        c.queued.clear();
                        c.snapshot_gen += 1;
                        c.snapshot_gen
                    }
                    None => return Ok(()),
                };
                self.asm.stats.snapshots += 1;
                // The fork's point-in-time copy, in slot order.
                for (slot, ids) in keys {
                    for write in ids {
                        self.asm.stats.snapshot_keys += 1;
                        self.asm_push(conn.0, 0, Msg::Data { write, slot });
                    }
                }
                let at = now.saturating_add_ms(self.asm.cfg.snapshot_ms);
                self.schedule(at, DataEv::Asm(AsmEv::SnapshotDone { conn: conn.0, gen }));
            }
            MigrationRequest::AbortSnapshot { job } => {
                for c in self.asm.conns.values_mut() {
                    if c.ends[0] == h && c.job == job {
                        c.snapshot_gen += 1;
                    }
                }
            }
            MigrationRequest::BeginStreaming { conn, .. } => {
                let queued = match self.asm.conns.get_mut(&conn.0) {
                    Some(c) if c.ends[0] == h => {
                        c.phase = Phase::Streaming;
                        std::mem::take(&mut c.queued)
                    }
                    _ => return Ok(()),
                };
                for m in queued {
                    self.asm_push(conn.0, 0, m);
                }
            }
            MigrationRequest::QueryBacklog { job, conn } => {
                if self.side_of(conn.0, h) != Some(0) {
                    return Ok(());
                }
                let bytes = self.backlog(conn.0);
                let input = match self.asm.output_limit.get(&h) {
                    Some(&limit) if bytes > limit => {
                        self.asm.stats.output_limits += 1;
                        MigrationInput::OutputBufferLimit { job }
                    }
                    _ => MigrationInput::LinkBacklog { job, bytes },
                };
                self.asm_report(h, input)?;
            }
            MigrationRequest::HideSlots { slots } => {
                self.asm.hidden[h] = self.asm.hidden[h].union(&slots);
            }
            MigrationRequest::RevealSlots { slots } => {
                self.asm.hidden[h] = self.asm.hidden[h].difference(&slots);
            }
            MigrationRequest::DropSlotKeys { slots } => {
                self.append_op(
                    h,
                    Op::Drop {
                        slots: Box::new(slots),
                    },
                )?;
            }
            MigrationRequest::Propagate { message } => {
                self.append_op(
                    h,
                    Op::Sync {
                        argv: message.argv(),
                    },
                )?;
            }
            MigrationRequest::Close { conn } => {
                let Some(side) = self.side_of(conn.0, h) else {
                    return Ok(());
                };
                let Some(c) = self.asm.conns.get_mut(&conn.0) else {
                    return Ok(());
                };
                c.open[side] = false;
                if side == 0 {
                    c.snapshot_gen += 1;
                    c.queued.clear();
                }
                if !c.connected {
                    self.asm.conns.remove(&conn.0);
                } else if c.open[1 - side] {
                    self.asm_push(conn.0, side, Msg::Fin);
                }
            }
            // AcceptImportLink (the node knows its links), StateChanged (in the events) and
            // anything newer: nothing for the host to do.
            _ => {}
        }
        Ok(())
    }

    /// Which end of `conn` host `h` holds (0 = source, 1 = target), if it is open.
    fn side_of(&self, conn: u64, h: usize) -> Option<usize> {
        let c = self.asm.conns.get(&conn)?;
        (0..2).find(|&s| c.ends[s] == h && c.open[s])
    }

    /// Bytes the source end of `conn` holds back: writes queued during the snapshot and, while
    /// the network does not deliver towards the target, everything sent and not delivered.
    fn backlog(&self, conn: u64) -> u64 {
        let Some(c) = self.asm.conns.get(&conn) else {
            return 0;
        };
        let kb = self.asm.cfg.key_bytes;
        let queued: u64 = c.queued.iter().map(|m| msg_bytes(m, kb)).sum();
        let p = self.sim.partitions();
        let stalled = if c.ends[1] != usize::MAX && !p.delivers(c.ends[0], c.ends[1]) {
            c.dirs[0].iter().map(|(_, m)| msg_bytes(m, kb)).sum()
        } else {
            0
        };
        queued + stalled
    }

    fn check_limit(&mut self, conn: u64) -> Result<(), Violation> {
        let Some(c) = self.asm.conns.get(&conn) else {
            return Ok(());
        };
        let (src, job, hit) = (c.ends[0], c.job, c.limit_hit);
        let Some(&limit) = self.asm.output_limit.get(&src) else {
            return Ok(());
        };
        if hit || self.backlog(conn) <= limit {
            return Ok(());
        }
        if let Some(c) = self.asm.conns.get_mut(&conn) {
            c.limit_hit = true;
        }
        self.asm.stats.output_limits += 1;
        self.asm_report(src, MigrationInput::OutputBufferLimit { job })
    }

    // ----- the wire -----

    /// Sends `msg` from end `side`: ready one latency from now, never before what that end
    /// sent earlier.
    fn asm_push(&mut self, conn: u64, side: usize, msg: Msg) {
        let now = self.sim.now();
        let lat = self.latency();
        let Some(c) = self.asm.conns.get_mut(&conn) else {
            return;
        };
        let ready = now.saturating_add_ms(lat).max(c.last_ready[side]);
        c.last_ready[side] = ready;
        c.dirs[side].push_back((ready, msg));
        self.schedule(ready, DataEv::Asm(AsmEv::Flush { conn, dir: side }));
    }

    fn on_connect(&mut self, conn: u64) -> Result<(), Violation> {
        let now = self.sim.now();
        let Some(c) = self.asm.conns.get(&conn) else {
            return Ok(());
        };
        let ([src, dst], job, started) = (c.ends, c.job, c.started);
        if !c.open[0] || !self.sim.is_up(src) {
            self.asm.conns.remove(&conn);
            return Ok(());
        }
        let p = self.sim.partitions();
        let net_ok = dst != usize::MAX && p.delivers(src, dst) && p.delivers(dst, src);
        let fail = if net_ok && !self.sim.is_up(dst) {
            Some("Connection refused")
        } else if net_ok {
            None
        } else if now.since(started) >= CONNECT_TIMEOUT_MS {
            // A partition or an address nobody has: the SYN is never answered.
            Some("Connection timed out")
        } else {
            let at = now.saturating_add_ms(SYN_RETRY_MS);
            self.schedule(at, DataEv::Asm(AsmEv::Connect { conn }));
            return Ok(());
        };
        if let Some(error) = fail {
            self.asm.conns.remove(&conn);
            return self.asm_report(
                src,
                MigrationInput::ConnectFailed {
                    job,
                    error: error.into(),
                },
            );
        }
        if let Some(c) = self.asm.conns.get_mut(&conn) {
            c.connected = true;
            c.last_ready = [now, now];
        }
        self.asm.stats.connections += 1;
        self.asm_report(
            src,
            MigrationInput::Connected {
                job,
                conn: ConnId(conn),
            },
        )
    }

    fn on_flush(&mut self, conn: u64, dir: usize) -> Result<(), Violation> {
        let now = self.sim.now();
        loop {
            let Some(c) = self.asm.conns.get_mut(&conn) else {
                return Ok(());
            };
            let (from, to) = (c.ends[dir], c.ends[1 - dir]);
            match c.dirs[dir].front() {
                Some((at, _)) if *at <= now => {}
                _ => return Ok(()),
            }
            if !self.sim.partitions().delivers(from, to) {
                // Held by the partition: try again a cron period later.
                let at = now.saturating_add_ms(self.cfg.cron_ms);
                self.schedule(at, DataEv::Asm(AsmEv::Flush { conn, dir }));
                return Ok(());
            }
            let Some(c) = self.asm.conns.get_mut(&conn) else {
                return Ok(());
            };
            let Some((_, msg)) = c.dirs[dir].pop_front() else {
                return Ok(());
            };
            if !c.open[1 - dir] || !self.sim.is_up(to) {
                continue; // the receiver is gone: the bytes vanish
            }
            match msg {
                Msg::Fin => {
                    c.open[1 - dir] = false;
                    if !c.open[dir] {
                        self.asm.conns.remove(&conn);
                    }
                    self.asm_report(to, MigrationInput::LinkClosed { conn: ConnId(conn) })?;
                }
                m if dir == 0 => self.at_target(conn, to, m)?,
                m => self.at_source(conn, to, m)?,
            }
        }
    }

    /// A message from the source reaches the target host `t`.
    fn at_target(&mut self, conn: u64, t: usize, msg: Msg) -> Result<(), Violation> {
        match msg {
            Msg::Auth => {
                let line = if self.asm.auth_rejected.contains(&t) {
                    format!("-{WRONGPASS}\r\n").into_bytes()
                } else {
                    b"+OK\r\n".to_vec()
                };
                self.asm_push(conn, 1, Msg::Line(line));
            }
            Msg::Command(argv) => {
                self.import_activity(conn, t, true)?;
                let establish = argv
                    .get(2)
                    .is_some_and(|a| a.eq_ignore_ascii_case(b"ESTABLISH"));
                let reply = self.asm_command(t, Origin::Conn(ConnId(conn)), argv)?;
                if let Some(r) = reply.filter(|_| establish) {
                    self.asm_push(conn, 1, Msg::Line(reply_line(&r)));
                }
            }
            Msg::Data { write, slot } => {
                if !self.import_activity(conn, t, false)? {
                    return Ok(()); // not an import link (any more): refused
                }
                if self.asm.oom.contains(&t) {
                    self.asm.stats.ooms += 1;
                    return self.asm_report(t, MigrationInput::ImportOom { conn: ConnId(conn) });
                }
                self.append_op(t, Op::Imported { write, slot })?;
            }
            Msg::Line(_) | Msg::Fin => {}
        }
        Ok(())
    }

    /// Whether `conn` is an in-progress import link of `t`'s node; reports its activity
    /// (at most every [`IMPORT_DATA_EVERY_MS`], always when `always`).
    fn import_activity(&mut self, conn: u64, t: usize, always: bool) -> Result<bool, Violation> {
        let now = self.sim.now();
        let import = self.sim.node(t).is_some_and(|n| {
            n.topology().myself().is_primary()
                && n.migrations()
                    .job_for_conn(ConnId(conn))
                    .is_some_and(|j| j.kind() == JobKind::Import && j.state().is_in_progress())
        });
        if !import {
            return Ok(false);
        }
        let due = self.asm.conns.get(&conn).is_some_and(|c| {
            always
                || c.last_import_data
                    .is_none_or(|t0| now.since(t0) >= IMPORT_DATA_EVERY_MS)
        });
        if due {
            if let Some(c) = self.asm.conns.get_mut(&conn) {
                c.last_import_data = Some(now);
            }
            self.asm_report(t, MigrationInput::ImportData { conn: ConnId(conn) })?;
        }
        Ok(true)
    }

    /// A message from the target reaches the source host `s`.
    fn at_source(&mut self, conn: u64, s: usize, msg: Msg) -> Result<(), Violation> {
        let Some(job) = self.asm.conns.get(&conn).map(|c| c.job) else {
            return Ok(());
        };
        match msg {
            Msg::Line(line) => {
                let expect = self
                    .asm
                    .conns
                    .get_mut(&conn)
                    .and_then(|c| c.expect.pop_front());
                match expect {
                    Some(Expect::Auth) => {
                        let reply = if line.first() == Some(&b'+') {
                            AuthReply::Ok
                        } else {
                            let text = String::from_utf8_lossy(&line[1..]);
                            AuthReply::Rejected(text.trim_end().to_owned())
                        };
                        self.asm_report(s, MigrationInput::AuthReply { job, reply })?;
                    }
                    Some(Expect::Establish) => {
                        self.asm_report(s, MigrationInput::EstablishReply { job, line })?;
                    }
                    None => {}
                }
            }
            Msg::Command(argv) => {
                self.asm_command(s, Origin::Conn(ConnId(conn)), argv)?;
            }
            Msg::Auth | Msg::Data { .. } | Msg::Fin => {}
        }
        Ok(())
    }

    fn on_snapshot_done(&mut self, conn: u64, gen: u64) -> Result<(), Violation> {
        let Some(c) = self.asm.conns.get(&conn) else {
            return Ok(());
        };
        if c.snapshot_gen != gen || !c.open[0] || c.phase != Phase::Snapshot {
            return Ok(());
        }
        let (src, job) = (c.ends[0], c.job);
        self.asm_push(conn, 0, Msg::Command(SyncSlots::SnapshotEof.argv()));
        self.asm_report(
            src,
            MigrationInput::SnapshotDone {
                job,
                result: SnapshotResult::Done { cow_bytes: 0 },
            },
        )
    }
}

//! The atomic slot migration (ASM) data plane of the simulated hosts: every host runs the
//! shipped [`ferrocluster_dataplane::AsmPlane`] (both sides) and does for it what a real host
//! does, following the host loop of the plane's module docs as the reference server does
//! (`examples/server/src/migrate.rs`): it carries out its node's `MigrationRequest`s, opens
//! and carries the data connections to the target's client port, hands the plane what they
//! read, writes what the plane sends, produces the snapshot's pages from its keyspace, feeds
//! the plane every write it applies as a primary, and applies the import stream's commands.
//! What goes on a data connection (AUTH, the `CLUSTER SYNCSLOTS` messages, the snapshot as
//! the AOF-rewrite commands of Valkey 9.1, the held and streamed writes) and how the target
//! reads it is the plane's; this module keeps the transport and the keyspace glue.
//!
//! # Transport
//! Module `tcp`'s connections (as the replication links'): `Connect` is answered after two
//! latencies (SYN, SYN-ACK), refused by a crashed host, retried across a partition and timed
//! out (`Connection timed out`); bytes keep their order, a partition holds them, a crash or
//! close reaches the peer one latency later. The bytes a partition holds in the source's
//! direction are told to its plane (`AsmPlane::handle_unsent`: the link's backlog and its
//! output buffer limit count them). [`World::break_migration_links`] resets every data
//! connection between two hosts (both ends hear the close).
//!
//! # Target
//! A data connection is an ordinary client connection of the target until its node accepts
//! `CLUSTER SYNCSLOTS ESTABLISH` on it: the host answers `AUTH` (`+OK`, or the `-WRONGPASS`
//! line of a host made to refuse it, [`World::set_auth_rejected`]) and runs `CLUSTER`
//! commands through its node with the connection's ID, writing the reply. On
//! `AcceptImportLink` the plane takes the connection over with the bytes already read
//! (`AsmPlane::accept_import`); the commands it yields (`AsmOutput::Apply`) are executed on a
//! primary's keyspace and fed to its replication stream, unless the test made the host run
//! out of memory ([`World::set_import_oom`]: `AsmPlane::handle_apply_failed`).
//!
//! # Source and snapshot
//! The snapshot is [`SnapshotMode::SlotPaged`], the reference server's: the plane reads the
//! keyspace one page per step (`KvStore::slot_page`). At `StartSnapshot` the steps that write
//! the slots' keys run at once; the step that ends the snapshot (`SYNCSLOTS SNAPSHOT-EOF`, the
//! node's `SnapshotDone`) runs [`AsmConfig::snapshot_ms`] after the start, so the snapshot
//! takes that long with its last slot part way read (a page that reaches a slot's end still
//! returns a cursor; the next call finds the slot done). Every client and data-plane write a
//! primary applies is fed to its plane (`AsmPlane::feed`), which drops, holds or streams
//! it; while the plane is part way through the write's slot the host also feeds the key's
//! state after the write (`AsmPlane::feed_key_state`), as the server does.
//!
//! # Keyspace glue
//! `HideSlots` / `RevealSlots` keep a per-host hidden slot set. What the data plane writes on
//! a primary besides imports (a *drop* of slots: `DropSlotKeys`, the dirty-slot deletion of
//! a node that lost slots, FLUSHALL; a *SYNCSLOTS* entry: `Propagate` ESTABLISH / FINISH) is
//! executed there and fed to its replication stream as commands (`DEL`/`FLUSHALL`,
//! `CLUSTER SYNCSLOTS ...`); SYNCSLOTS entries are kept in its AOF too. Replicas apply the
//! stream and feed the SYNCSLOTS entries to their node as coming from their primary
//! (`Origin::Primary`). A replica that loaded a full sync's RDB tells its node: `FullSync`,
//! `BeforeLoad`, one `LoadedSlotImport` per import its primary has in progress (the RDB's
//! slot-import sections), `AfterLoad`. A restarted host replays the SYNCSLOTS entries of its
//! AOF with `Origin::Aof`, then `AfterLoad`.

use super::keys::Val;
use super::tcp::{Left, Next, Seg, Syn, Tcp, SYN_RETRY_MS};
use super::{DataEv, World};
use crate::cluster::ClusterSimExt;
use crate::sim::{host_ip, Violation, CLIENT_PORT};
use ferrocluster_dataplane::resp::{CommandReader, ReaderLimits};
use ferrocluster_dataplane::{
    AsmEvent, AsmOutput, AsmPlane, KeyVisitor, OutputBufferLimit, SlotSource, SnapshotMode,
    SnapshotProgress,
};
use ferrocluster_node::{
    ClusterNode, CommandOutcome, CommandRequest, ConnId, EmptyKeyspace, JobKind, JobName,
    MigrationInput, MigrationRequest, Origin, Output, Reply,
};
use ferrocluster_slot::{key_hash_slot, Slot, SlotSet};
use ferrocluster_topology::Millis;
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};

/// The error of a refused AUTH (Valkey's text; the reply line is `-` and this).
pub const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
/// The password a source sends when its node asks for AUTH (`primaryauth`).
const PRIMARYAUTH: &[u8] = b"sim-primaryauth";

/// ASM data-plane settings of the simulated hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AsmConfig {
    /// How long a snapshot takes from `StartSnapshot` to `SNAPSHOT-EOF`, ms: its pages are
    /// written at the start, its end this much later (module docs).
    pub snapshot_ms: u64,
}

impl Default for AsmConfig {
    /// Snapshots take 100 ms.
    fn default() -> AsmConfig {
        AsmConfig { snapshot_ms: 100 }
    }
}

/// Counters of the ASM data plane.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AsmStats {
    /// Data connections opened (connects that succeeded).
    pub connections: u64,
    /// Snapshots started.
    pub snapshots: u64,
    /// Keys written in snapshots (the plane's `SnapshotWritten`).
    pub snapshot_keys: u64,
    /// Commands targets applied from the stream after `SNAPSHOT-EOF`: the writes the source
    /// held or streamed, and the key states (`DEL`, then the value) of a slot part way read.
    pub forwarded: u64,
    /// Commands targets applied from import links (snapshot and stream).
    pub imported: u64,
    /// Drop entries appended (`DropSlotKeys`, dirty-slot deletions, FLUSHALL).
    pub drops: u64,
    /// SYNCSLOTS entries appended by primaries (`Propagate`).
    pub propagated: u64,
    /// Import commands refused for want of memory ([`World::set_import_oom`]).
    pub ooms: u64,
    /// Export links the plane dropped at the output buffer limit.
    pub output_limits: u64,
}

#[derive(Debug, Clone)]
pub(super) enum Op {
    Drop { slots: Box<SlotSet> },
    Sync { argv: Vec<Vec<u8>> },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AsmEv {
    Connect { conn: u64 },
    Flush { conn: u64, dir: usize },
    SnapshotEnd { host: usize, conn: u64 },
}

/// One data connection: end 0 the source, end 1 the target.
#[derive(Debug)]
struct Conn {
    tcp: Tcp,
    job: JobName,
    /// The bytes of the source's direction a partition holds, as last told to its plane.
    stalled: u64,
    /// The target's plane passed `SNAPSHOT-EOF` on it: later commands are streamed writes.
    streaming: bool,
}

/// A host's keyspace as the snapshot reads it: `KvStore::slot_page` (every key present
/// throughout a walk is visited at least once, what [`SnapshotMode::SlotPaged`] asks), whose
/// cursor (0: start or done) is offset by one so that the page reaching a slot's end returns
/// cursor 1 and the next call finds the slot done with nothing read. `visited` counts keys.
struct PagedSource<'a> {
    kv: &'a super::keys::Keyspace,
    now: u64,
    visited: Cell<usize>,
}

impl SlotSource for PagedSource<'_> {
    type Value = Val;

    fn page(
        &self,
        db: u32,
        slot: Slot,
        cursor: u64,
        max: usize,
        f: &mut KeyVisitor<'_, Val>,
    ) -> u64 {
        if cursor == 1 {
            return 0;
        }
        let mut n = 0;
        let inner = cursor.saturating_sub(1);
        let next = self
            .kv
            .slot_page(db as usize, slot, inner, max, self.now, |k, v, at| {
                n += 1;
                f(k, v, at.map(|t| i64::try_from(t).unwrap_or(i64::MAX)));
            })
            .unwrap_or(0);
        self.visited.set(self.visited.get() + n);
        match (next, n) {
            (0, 0) => 0,
            (0, _) => 1,
            (c, _) => c + 1,
        }
    }
}

/// A running snapshot (source side): the keys of its slots when it started, and how many
/// the plane has read.
struct Snap {
    keys: usize,
    visited: usize,
}

/// What one host's ASM data plane holds.
#[derive(Default)]
struct AsmHost {
    /// The plane; `None` while down (made when first needed).
    plane: Option<AsmPlane>,
    /// Data connections that are client connections of this host (target side) until the
    /// plane takes them over: their command readers.
    clients: BTreeMap<u64, CommandReader>,
    /// Connections the plane took over as import links.
    taken: BTreeSet<u64>,
    /// Running snapshots (source side) by connection.
    snaps: BTreeMap<u64, Snap>,
    hidden: SlotSet,
    oom: bool,
    auth_rejected: bool,
    output_limit: Option<u64>,
}

/// The ASM state of the world.
#[derive(Default)]
pub(super) struct AsmWorld {
    cfg: AsmConfig,
    hosts: Vec<AsmHost>,
    conns: BTreeMap<u64, Conn>,
    next_conn: u64,
    watched: SlotSet,
    stats: AsmStats,
}

impl AsmWorld {
    pub(super) fn new(hosts: usize) -> AsmWorld {
        AsmWorld {
            hosts: (0..hosts).map(|_| AsmHost::default()).collect(),
            next_conn: 1,
            ..AsmWorld::default()
        }
    }
}

/// The plane settings of a simulated host: Valkey's defaults, one page (of at most 16 keys)
/// per snapshot step, and the host's output buffer limit (a hard limit) if the test set one.
fn plane_config(output_limit: Option<u64>) -> ferrocluster_dataplane::AsmConfig {
    ferrocluster_dataplane::AsmConfig {
        output_buffer_limit: output_limit.map_or_else(OutputBufferLimit::default, |b| {
            OutputBufferLimit {
                hard_bytes: b,
                soft_bytes: 0,
                soft_ms: 0,
            }
        }),
        page_keys: 16,
        step_bytes: 1,
        ..ferrocluster_dataplane::AsmConfig::default()
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

/// The slot of a keyspace write's key (`None` for FLUSHALL).
fn write_slot(argv: &[Vec<u8>]) -> Option<Slot> {
    let keyed = argv
        .first()
        .is_some_and(|n| !n.eq_ignore_ascii_case(b"FLUSHALL"));
    argv.get(1).filter(|_| keyed).map(|k| key_hash_slot(k))
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

    /// Makes `host` run out of memory (`true`) while applying commands from an import link:
    /// the first one fails the link (`AsmPlane::handle_apply_failed`, the node hears
    /// `ImportOom`: sheet A.10 `Ran out of memory (OOM) during slot import`).
    pub fn set_import_oom(&mut self, host: usize, oom: bool) {
        self.asm.hosts[host].oom = oom;
    }

    /// Sets `host`'s `client-output-buffer-limit replica` for export links, a hard limit in
    /// bytes (`None`: Valkey's default, 256 MiB hard, 64 MiB soft for 60 s): the plane drops a
    /// link whose held and unsent bytes reach it and the node hears `OutputBufferLimit`. It
    /// applies to the host's plane from its next data connection while none is open (else
    /// from its restart).
    pub fn set_output_buffer_limit(&mut self, host: usize, bytes: Option<u64>) {
        let d = &mut self.asm.hosts[host];
        d.output_limit = bytes;
        if d.plane.as_ref().is_some_and(|p| p.links() == 0) {
            // An idle plane holds nothing but its settings: the next one gets the new limit.
            d.plane = None;
        }
    }

    /// Makes `host` refuse (`true`) the AUTH of migration sources with `-`[`WRONGPASS`].
    pub fn set_auth_rejected(&mut self, host: usize, rejected: bool) {
        self.asm.hosts[host].auth_rejected = rejected;
    }

    /// Resets every open migration data connection between `a` and `b` (either direction):
    /// what is in flight is lost and both ends hear the close one latency later. Returns how
    /// many were reset.
    pub fn break_migration_links(&mut self, a: usize, b: usize) -> usize {
        let ids: Vec<u64> = self
            .asm
            .conns
            .iter()
            .filter(|(_, c)| c.tcp.accepted && (c.tcp.ends == [a, b] || c.tcp.ends == [b, a]))
            .map(|(&id, _)| id)
            .collect();
        for &id in &ids {
            let Some(open) = self.asm.conns.get_mut(&id).map(|c| c.tcp.reset()) else {
                continue;
            };
            for (side, is_open) in open.into_iter().enumerate() {
                if is_open {
                    // The reset reaches each end as a FIN from the other.
                    self.asm_push(id, 1 - side, Seg::Fin);
                }
            }
        }
        ids.len()
    }

    /// Open migration data connections (at least one end open).
    pub fn migration_links(&self) -> usize {
        self.asm
            .conns
            .values()
            .filter(|c| !c.tcp.is_closed())
            .count()
    }

    /// The slots `host` hides as importing (HideSlots minus RevealSlots since its start).
    pub fn hidden_slots(&self, host: usize) -> &SlotSet {
        &self.asm.hosts[host].hidden
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
                    self.asm.hosts[h].hidden.contains(slot) || t.importing_from(slot).is_some();
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

    /// A write `host` applied as a primary (a client's, or the data plane's): fed to its
    /// plane, which holds or streams it on the export links whose job holds its slot.
    pub(super) fn asm_feed(&mut self, host: usize, argv: &[Vec<u8>]) -> Result<(), Violation> {
        let now = self.sim.now();
        let Some(plane) = self.asm.hosts[host].plane.as_mut() else {
            return Ok(());
        };
        if plane.links() == 0 {
            return Ok(());
        }
        let slot = write_slot(argv);
        let mut r = plane.feed(0, slot, argv, now);
        if let Some(slot) = slot.filter(|&s| r.is_ok() && plane.wants_key_state(s)) {
            // The snapshot is part way through the slot: the key's whole state after the
            // write (every write of the simulated hosts has one key).
            let key = &argv[1];
            let value = self.data[host].kv.get(0, key, now.0).ok().flatten();
            r = plane.feed_key_state(0, slot, key, value.map(|v| (v, None)), now);
        }
        r.map_err(|e| self.dp_violation(host, format!("slot migration feed: {e}")))?;
        self.asm_drain(host)
    }

    /// `host` crashed: its ends close at once, the peers hear it one latency later; its
    /// plane, snapshots and hidden-slot marks (process memory) are gone.
    pub(super) fn asm_crashed(&mut self, host: usize) {
        let ids: Vec<(u64, usize)> = self
            .asm
            .conns
            .iter()
            .filter_map(|(&id, c)| c.tcp.ends.iter().position(|&e| e == host).map(|s| (id, s)))
            .collect();
        for (id, side) in ids {
            let Some(c) = self.asm.conns.get_mut(&id) else {
                continue;
            };
            match c.tcp.crash(side) {
                Left::Nothing => {
                    self.asm.conns.remove(&id);
                }
                Left::Fin => self.asm_push(id, side, Seg::Fin),
                Left::Pending => {}
            }
        }
        let output_limit = self.asm.hosts[host].output_limit;
        self.asm.hosts[host] = AsmHost {
            oom: self.asm.hosts[host].oom,
            auth_rejected: self.asm.hosts[host].auth_rejected,
            output_limit,
            ..AsmHost::default()
        };
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

    /// The planes' timers (the soft output buffer limit), on the data-plane cron.
    pub(super) fn asm_timers(&mut self) -> Result<(), Violation> {
        let now = self.sim.now();
        for h in 0..self.asm.hosts.len() {
            let Some(plane) = self.asm.hosts[h].plane.as_mut() else {
                continue;
            };
            if plane.poll_timeout().is_some_and(|t| t <= now) {
                plane.handle_timeout(now);
                self.asm_drain(h)?;
            }
        }
        Ok(())
    }

    pub(super) fn asm_event(&mut self, ev: AsmEv) -> Result<(), Violation> {
        match ev {
            AsmEv::Connect { conn } => self.on_connect(conn),
            AsmEv::Flush { conn, dir } => self.on_flush(conn, dir),
            AsmEv::SnapshotEnd { host, conn } => self.snapshot_steps(host, conn, true),
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

    /// Whether `host` runs as a primary with a replication engine (it writes its keyspace
    /// itself; a replica gets its primary's stream).
    fn writes_itself(&self, host: usize) -> bool {
        self.sim
            .node(host)
            .is_some_and(|n| n.topology().myself().is_primary())
            && self.repl(host).is_some()
    }

    /// Executes one write on primary `host`'s keyspace and propagates it: its replication
    /// stream and its plane's export links.
    fn primary_write(&mut self, host: usize, argv: &[Vec<u8>]) -> Result<(), Violation> {
        let now = self.sim.now().0;
        super::keys::execute(&mut self.data[host].kv, argv, now)
            .map_err(|e| self.dp_violation(host, format!("data-plane write: {}", e.0)))?;
        self.repl_feed(host, argv)?;
        self.asm_feed(host, argv)
    }

    /// Executes a data-plane write on a primary's keyspace and propagates it through its
    /// replication stream (SYNCSLOTS entries go to its AOF too). Ignored on a replica (it
    /// gets its primary's stream) and on a crashed host.
    fn append_op(&mut self, host: usize, op: Op) -> Result<(), Violation> {
        if !self.writes_itself(host) {
            return Ok(());
        }
        let cmds: Vec<Vec<Vec<u8>>> = match op {
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
            self.primary_write(host, &argv)?;
        }
        self.report(host)
    }

    // ----- node calls -----

    fn asm_report(&mut self, host: usize, input: MigrationInput) -> Result<(), Violation> {
        self.sim
            .report_to_engine(host, |n, now| n.handle_migration(input, now))?;
        self.after_sim()
    }

    /// Runs a `CLUSTER` command on `host`'s node as from `origin`, without the step's
    /// events; the caller runs `after_sim`.
    fn node_command(
        &mut self,
        host: usize,
        origin: Origin,
        argv: &[Vec<u8>],
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
            n.cluster_command_argv(argv, &req, &EmptyKeyspace, now)
        })?;
        Ok(match r {
            Some(CommandOutcome::Reply(r)) => Some(r),
            // SYNCSLOTS messages change no saved config: nothing is deferred.
            _ => None,
        })
    }

    pub(super) fn asm_command(
        &mut self,
        host: usize,
        origin: Origin,
        argv: Vec<Vec<u8>>,
    ) -> Result<Option<Reply>, Violation> {
        let r = self.node_command(host, origin, &argv)?;
        self.after_sim()?;
        Ok(r)
    }

    // ----- the plane -----

    /// Host `h`'s plane, made when first needed (a running host).
    fn plane(&mut self, h: usize) -> &mut AsmPlane {
        let now = self.sim.now();
        let d = &mut self.asm.hosts[h];
        let limit = d.output_limit;
        d.plane
            .get_or_insert_with(|| AsmPlane::new(plane_config(limit), now))
    }

    /// Acts on every output of host `h`'s plane, in order.
    fn asm_drain(&mut self, h: usize) -> Result<(), Violation> {
        while let Some(o) = self.asm.hosts[h]
            .plane
            .as_mut()
            .and_then(AsmPlane::poll_output)
        {
            self.asm_act(h, o)?;
        }
        Ok(())
    }

    fn asm_act(&mut self, h: usize, o: AsmOutput) -> Result<(), Violation> {
        match o {
            AsmOutput::Send { conn, bytes } => {
                if let Some(side) = self.side_of(conn.0, h) {
                    self.asm_push(conn.0, side, Seg::Bytes(bytes));
                }
            }
            AsmOutput::Close { conn } => self.close_end(h, conn.0),
            AsmOutput::Migration(input) => self.asm_report(h, input)?,
            AsmOutput::SyncSlots { conn, argv } => {
                let eof = argv
                    .get(2)
                    .is_some_and(|a| a.eq_ignore_ascii_case(b"SNAPSHOT-EOF"));
                if eof {
                    if let Some(c) = self.asm.conns.get_mut(&conn.0) {
                        c.streaming = true;
                    }
                }
                self.asm_command(h, Origin::Conn(conn), argv)?;
            }
            AsmOutput::Apply { conn, argv, .. } => self.asm_apply(h, conn, &argv)?,
            AsmOutput::Event(e) => match e {
                AsmEvent::SnapshotWritten { keys, .. } => self.asm.stats.snapshot_keys += keys,
                AsmEvent::OutputBufferLimit { .. } => self.asm.stats.output_limits += 1,
                // Both ends run the shipped plane: bytes one cannot read, or a value it
                // cannot write, are a bug.
                e @ (AsmEvent::Protocol { .. }
                | AsmEvent::UnexpectedCommand { .. }
                | AsmEvent::SnapshotFailed { .. }
                | AsmEvent::BadSelect { .. }) => {
                    return Err(self.dp_violation(h, format!("slot migration: {e:?}")));
                }
                _ => {}
            },
        }
        Ok(())
    }

    /// Target `t` applies one command of import link `conn` (the plane's `Apply`; the
    /// simulated hosts have one database).
    fn asm_apply(&mut self, t: usize, conn: ConnId, argv: &[Vec<u8>]) -> Result<(), Violation> {
        let now = self.sim.now();
        if self.asm.hosts[t].oom {
            self.asm.stats.ooms += 1;
            self.plane(t).handle_apply_failed(conn, true, now);
            return Ok(());
        }
        if !self.writes_itself(t) {
            return Ok(());
        }
        self.asm.stats.imported += 1;
        if self.asm.conns.get(&conn.0).is_some_and(|c| c.streaming) {
            self.asm.stats.forwarded += 1;
        }
        self.primary_write(t, argv)?;
        self.report(t)
    }

    /// Source `h`'s snapshot on `conn`: the plane's steps while it has not read every key
    /// the slots had at the start; with `end`, the rest (`SNAPSHOT-EOF`).
    fn snapshot_steps(&mut self, h: usize, conn: u64, end: bool) -> Result<(), Violation> {
        loop {
            let now = self.sim.now();
            let AsmHost { plane, snaps, .. } = &mut self.asm.hosts[h];
            let (Some(plane), Some(snap)) = (plane.as_mut(), snaps.get_mut(&conn)) else {
                return Ok(());
            };
            if !end && snap.visited >= snap.keys {
                return Ok(());
            }
            if !plane.wants_snapshot_step(ConnId(conn)) {
                if end {
                    snaps.remove(&conn);
                }
                return Ok(());
            }
            let source = PagedSource {
                kv: &self.data[h].kv,
                now: now.0,
                visited: Cell::new(0),
            };
            let r = plane.snapshot_step(ConnId(conn), &source, now);
            snap.visited += source.visited.get();
            let more = matches!(r, Ok(SnapshotProgress::More));
            if !more {
                snaps.remove(&conn);
            }
            if let Err(e) = r {
                return Err(self.dp_violation(h, format!("snapshot step: {e}")));
            }
            self.asm_drain(h)?;
            if !more {
                return Ok(());
            }
        }
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
                        tcp: Tcp::new(h, dst, now),
                        job,
                        stalled: 0,
                        streaming: false,
                    },
                );
                let lat = 2 * self.latency();
                self.schedule(
                    now.saturating_add_ms(lat),
                    DataEv::Asm(AsmEv::Connect { conn: id }),
                );
                return Ok(());
            }
            MigrationRequest::SendAuth { conn, .. } => {
                self.plane(h)
                    .send_auth(conn, None, PRIMARYAUTH, now)
                    .map_err(|e| self.dp_violation(h, format!("AUTH: {e}")))?;
            }
            MigrationRequest::Send { conn, message } => {
                self.plane(h).send_message(conn, &message, now);
            }
            MigrationRequest::AcceptImportLink { job, conn, slots } => {
                // The ESTABLISH was the connection's last client command: the plane takes
                // it over with what its reader holds after it.
                let d = &mut self.asm.hosts[h];
                if let Some(mut reader) = d.clients.remove(&conn.0) {
                    d.taken.insert(conn.0);
                    let rest = reader.take_buffered();
                    self.plane(h)
                        .accept_import(job, conn, slots, &rest, now)
                        .map_err(|e| self.dp_violation(h, format!("import link: {e}")))?;
                }
            }
            MigrationRequest::StartSnapshot { job, conn, ranges } => {
                if self.side_of(conn.0, h) != Some(0) {
                    return self.asm_report(h, MigrationInput::SnapshotStartFailed { job });
                }
                if let Err(e) =
                    self.plane(h)
                        .start_snapshot(conn, &ranges, SnapshotMode::SlotPaged, now)
                {
                    return Err(self.dp_violation(h, format!("snapshot start: {e}")));
                }
                let mut slots = SlotSet::new();
                for r in &ranges {
                    slots.insert_range(*r);
                }
                let keys = self.count_keys_in(h, &slots);
                let snap = Snap { keys, visited: 0 };
                self.asm.hosts[h].snaps.insert(conn.0, snap);
                self.asm.stats.snapshots += 1;
                let at = now.saturating_add_ms(self.asm.cfg.snapshot_ms);
                self.schedule(
                    at,
                    DataEv::Asm(AsmEv::SnapshotEnd {
                        host: h,
                        conn: conn.0,
                    }),
                );
                return self.snapshot_steps(h, conn.0, false);
            }
            MigrationRequest::AbortSnapshot { job } => {
                self.plane(h).abort_snapshot(&job, now);
            }
            MigrationRequest::BeginStreaming { conn, .. } => {
                self.plane(h)
                    .begin_streaming(conn, now)
                    .map_err(|e| self.dp_violation(h, format!("streaming: {e}")))?;
            }
            MigrationRequest::QueryBacklog { job, conn } => {
                self.note_stalled(conn.0);
                self.plane(h).query_backlog(job, conn, now);
            }
            MigrationRequest::HideSlots { slots } => {
                let d = &mut self.asm.hosts[h];
                d.hidden = d.hidden.union(&slots);
            }
            MigrationRequest::RevealSlots { slots } => {
                let d = &mut self.asm.hosts[h];
                d.hidden = d.hidden.difference(&slots);
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
                self.plane(h).close(conn, now);
                self.close_end(h, conn.0);
            }
        }
        self.asm_drain(h)
    }

    /// Which end of `conn` host `h` holds (0 = source, 1 = target), if it is open.
    fn side_of(&self, conn: u64, h: usize) -> Option<usize> {
        self.asm.conns.get(&conn)?.tcp.side_of(h)
    }

    /// Host `h` closes its end of `conn`: the peer hears it one latency later.
    fn close_end(&mut self, h: usize, conn: u64) {
        let Some(side) = self.side_of(conn, h) else {
            return;
        };
        let d = &mut self.asm.hosts[h];
        d.snaps.remove(&conn);
        d.clients.remove(&conn);
        let Some(c) = self.asm.conns.get_mut(&conn) else {
            return;
        };
        match c.tcp.close(side) {
            Left::Nothing => {
                self.asm.conns.remove(&conn);
            }
            Left::Fin => self.asm_push(conn, side, Seg::Fin),
            Left::Pending => {}
        }
    }

    /// Tells the source's plane how many bytes of `conn` a partition holds (TCP's send
    /// buffer: the link's backlog and output buffer limit count them).
    fn note_stalled(&mut self, conn: u64) {
        let now = self.sim.now();
        let Some(c) = self.asm.conns.get(&conn) else {
            return;
        };
        let [src, dst] = c.tcp.ends;
        let p = self.sim.partitions();
        let held = if dst != usize::MAX && !p.delivers(src, dst) {
            c.tcp.undelivered(0)
        } else {
            0
        };
        if held == c.stalled || !c.tcp.open[0] || !self.sim.is_up(src) {
            return;
        }
        if let Some(c) = self.asm.conns.get_mut(&conn) {
            c.stalled = held;
        }
        self.plane(src).handle_unsent(ConnId(conn), held, now);
    }

    // ----- the wire -----

    /// Sends `seg` from end `side` (module `tcp`).
    fn asm_push(&mut self, conn: u64, side: usize, seg: Seg) {
        let now = self.sim.now();
        let lat = self.latency();
        let Some(c) = self.asm.conns.get_mut(&conn) else {
            return;
        };
        let ready = c.tcp.push(side, seg, now, lat);
        self.schedule(ready, DataEv::Asm(AsmEv::Flush { conn, dir: side }));
    }

    fn on_connect(&mut self, conn: u64) -> Result<(), Violation> {
        let now = self.sim.now();
        let Some(c) = self.asm.conns.get(&conn) else {
            return Ok(());
        };
        let ([src, dst], job) = (c.tcp.ends, c.job);
        if !c.tcp.open[0] || !self.sim.is_up(src) {
            self.asm.conns.remove(&conn);
            return Ok(());
        }
        let error = match c
            .tcp
            .syn(now, self.sim.partitions(), self.sim.is_up(dst), false)
        {
            Syn::Accept => None,
            Syn::Refused => Some("Connection refused"),
            Syn::TimedOut => Some("Connection timed out"),
            Syn::Retry => {
                let at = now.saturating_add_ms(SYN_RETRY_MS);
                self.schedule(at, DataEv::Asm(AsmEv::Connect { conn }));
                return Ok(());
            }
        };
        if let Some(error) = error {
            self.asm.conns.remove(&conn);
            self.plane(src).handle_connect_failed(job, error, now);
            return self.asm_drain(src);
        }
        if let Some(c) = self.asm.conns.get_mut(&conn) {
            c.tcp.accept(now);
        }
        self.asm.hosts[dst]
            .clients
            .insert(conn, CommandReader::new(ReaderLimits::default()));
        self.asm.stats.connections += 1;
        self.plane(src)
            .handle_connected(job, ConnId(conn), now)
            .map_err(|e| self.dp_violation(src, format!("connected: {e}")))?;
        self.asm_drain(src)
    }

    fn on_flush(&mut self, conn: u64, dir: usize) -> Result<(), Violation> {
        let now = self.sim.now();
        loop {
            let Some(c) = self.asm.conns.get_mut(&conn) else {
                return Ok(());
            };
            let [from, to] = [c.tcp.ends[dir], c.tcp.ends[1 - dir]];
            let up = self.sim.is_up(to);
            match c.tcp.next(dir, now, self.sim.partitions(), up) {
                n @ (Next::Wait | Next::Held) => {
                    if matches!(n, Next::Held) {
                        // Retransmitted a cron period later.
                        let at = now.saturating_add_ms(self.cfg.cron_ms);
                        self.schedule(at, DataEv::Asm(AsmEv::Flush { conn, dir }));
                    }
                    if dir == 1 {
                        return Ok(());
                    }
                    self.note_stalled(conn);
                    return self.asm_drain(from);
                }
                Next::Lost => {}
                Next::Seg(Seg::Fin) => {
                    if c.tcp.is_closed() {
                        self.asm.conns.remove(&conn);
                    }
                    let d = &mut self.asm.hosts[to];
                    d.clients.remove(&conn);
                    d.snaps.remove(&conn);
                    self.plane(to).handle_closed(ConnId(conn), now);
                    self.asm_drain(to)?;
                }
                Next::Seg(Seg::Bytes(b)) if dir == 0 => self.at_target(to, conn, &b)?,
                Next::Seg(Seg::Bytes(b)) => {
                    self.plane(to).handle_bytes(ConnId(conn), &b, now);
                    self.asm_drain(to)?;
                }
            }
        }
    }

    /// Bytes from the source reach target host `t`: the plane's once it took the connection
    /// over, else client commands (AUTH, CLUSTER SYNCSLOTS ESTABLISH).
    fn at_target(&mut self, t: usize, conn: u64, bytes: &[u8]) -> Result<(), Violation> {
        let now = self.sim.now();
        if self.asm.hosts[t].taken.contains(&conn) {
            self.plane(t).handle_bytes(ConnId(conn), bytes, now);
            return self.asm_drain(t);
        }
        let Some(reader) = self.asm.hosts[t].clients.get_mut(&conn) else {
            return Ok(());
        };
        reader.push(bytes);
        loop {
            let Some(reader) = self.asm.hosts[t].clients.get_mut(&conn) else {
                // Taken over by the plane (an accepted ESTABLISH) with the rest.
                return Ok(());
            };
            let argv = match reader.next_command() {
                Ok(Some(argv)) => argv,
                Ok(None) => return Ok(()),
                Err(e) => return Err(self.dp_violation(t, format!("migration source sent: {e}"))),
            };
            let name = argv
                .first()
                .map(|a| a.to_ascii_uppercase())
                .unwrap_or_default();
            let reply = match name.as_slice() {
                b"AUTH" if self.asm.hosts[t].auth_rejected => {
                    Reply::Error(WRONGPASS.into()).to_resp2()
                }
                b"AUTH" => Reply::ok().to_resp2(),
                b"CLUSTER" => self
                    .node_command(t, Origin::Conn(ConnId(conn)), &argv)?
                    .map(|r| r.to_resp2())
                    .unwrap_or_default(),
                _ => Reply::Error("ERR unknown command".into()).to_resp2(),
            };
            if !reply.is_empty() && self.side_of(conn, t) == Some(1) {
                self.asm_push(conn, 1, Seg::Bytes(reply));
            }
            // The node's requests (an accepted ESTABLISH's AcceptImportLink) after the reply.
            self.after_sim()?;
        }
    }
}

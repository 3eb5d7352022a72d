//! Two hosts in memory: each with a `Topology`, the real slot migration engine
//! (`ferrocluster_migration::Migrations`), an `AsmPlane` and a [`Db`]; one data connection
//! between them whose bytes are delivered in seeded random chunks. The host loop is the one
//! the crate docs of `asm` describe (what the server and the simulator will do).

use super::db::Db;
use ferrocluster_dataplane::resp::{CommandReader, Item, ReaderLimits};
use ferrocluster_dataplane::{
    AsmConfig, AsmEvent, AsmOutput, AsmPlane, ConnId, Millis, SnapshotMode, SnapshotProgress,
};
use ferrocluster_migration::{
    JobState, MigrationConfig, MigrationInput, MigrationOutput, MigrationRequest, Migrations,
    Origin,
};
use ferrocluster_slot::{key_hash_slot, Slot, SlotSet};
use ferrocluster_topology::{Node, NodeFlags, NodeId, ShardId, Topology};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

pub const SRC: usize = 0;
pub const TGT: usize = 1;
/// The source's handle of its data connection, and the target's.
pub const SRC_CONN: ConnId = ConnId(100);
pub const TGT_CONN: ConnId = ConnId(200);
pub const PASSWORD: &[u8] = b"pw";
pub const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// What can go wrong, on purpose.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// The target refuses the AUTH.
    pub auth_refused: bool,
    /// The target runs out of memory at its n-th apply (0-based).
    pub oom_at_apply: Option<usize>,
    /// The connection breaks once the source sent this many bytes.
    pub cut_after_bytes: Option<usize>,
    /// The target sends these bytes once the import link is accepted.
    pub target_garbage: Option<Vec<u8>>,
    /// The target's socket stops taking bytes (the source's unsent bytes grow).
    pub target_stalls: bool,
}

pub struct Side {
    pub id: NodeId,
    pub topo: Topology,
    pub mig: Migrations,
    pub asm: AsmPlane,
    pub db: Db,
    pub paused: Option<Millis>,
    /// The point-in-time copy of a running snapshot.
    pub frozen: Option<Db>,
    pub dropped: Vec<SlotSet>,
}

pub struct Pair {
    pub s: [Side; 2],
    pub now: Millis,
    /// Bytes in flight: `wire[0]` source to target, `wire[1]` back.
    wire: [Vec<u8>; 2],
    open: bool,
    /// The target's client reader until the import link is accepted.
    client: Option<CommandReader>,
    accepted: bool,
    rng: ChaCha8Rng,
    pub mode: SnapshotMode,
    max_chunk: usize,
    pub faults: Faults,
    sent_by_source: usize,
    applies: usize,
    /// Protocol and other data-plane events, both sides.
    pub events: Vec<(usize, AsmEvent)>,
    pub rng_seed: u64,
}

fn node(id: NodeId, shard: ShardId) -> Node {
    let mut n = Node::new(id, shard, Millis(0));
    n.flags = NodeFlags::PRIMARY;
    // The slot migration engine connects to the target's address.
    n.ip = Some(std::net::IpAddr::from([127, 0, 0, 1]));
    n
}

impl Pair {
    /// Two primaries; the source owns `owned`; `auth`: the source sends AUTH.
    pub fn new(
        seed: u64,
        mode: SnapshotMode,
        cfg: AsmConfig,
        owned: &SlotSet,
        auth: bool,
        max_chunk: usize,
    ) -> Pair {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let ids = [NodeId::random(&mut rng), NodeId::random(&mut rng)];
        let shards = [ShardId::random(&mut rng), ShardId::random(&mut rng)];
        let now = Millis(1_000_000);
        let side = |me: usize| {
            let mut topo = Topology::new(node(ids[me], shards[me]));
            topo.add_node(node(ids[1 - me], shards[1 - me])).unwrap();
            for s in owned.iter() {
                topo.set_slot_owner(s, Some(ids[SRC])).unwrap();
            }
            Side {
                id: ids[me],
                topo,
                mig: Migrations::new(
                    MigrationConfig {
                        auth_to_target: auth,
                        ..MigrationConfig::default()
                    },
                    now,
                ),
                asm: AsmPlane::new(cfg.clone(), now),
                db: Db::new(cfg.databases as usize),
                paused: None,
                frozen: None,
                dropped: Vec::new(),
            }
        };
        Pair {
            s: [side(SRC), side(TGT)],
            now,
            wire: [Vec::new(), Vec::new()],
            open: false,
            client: None,
            accepted: false,
            rng,
            mode,
            max_chunk,
            faults: Faults::default(),
            sent_by_source: 0,
            applies: 0,
            events: Vec::new(),
            rng_seed: seed,
        }
    }

    pub fn rand(&mut self, n: u64) -> u64 {
        self.rng.next_u64() % n.max(1)
    }

    /// `CLUSTER MIGRATESLOTS SLOTSRANGE ... NODE <target>` on the source.
    pub fn migrate(&mut self, ranges: &[(u16, u16)]) {
        let mut argv: Vec<Vec<u8>> = vec![b"CLUSTER".to_vec(), b"MIGRATESLOTS".to_vec()];
        argv.push(b"SLOTSRANGE".to_vec());
        for (s, e) in ranges {
            argv.push(s.to_string().into_bytes());
            argv.push(e.to_string().into_bytes());
        }
        argv.push(b"NODE".to_vec());
        argv.push(self.s[TGT].id.as_bytes().to_vec());
        let now = self.now;
        let side = &mut self.s[SRC];
        let reply = side.mig.handle_cluster_command(
            &side.topo,
            Origin::Conn(ConnId(1)),
            &argv,
            &mut self.rng,
            now,
        );
        assert_eq!(reply, Some(ferrocluster_topology::Reply::ok()));
    }

    /// The job state on a side (the newest job).
    pub fn state(&self, side: usize) -> Option<JobState> {
        self.s[side].mig.jobs().next().map(|j| j.state())
    }

    /// The status message on a side.
    pub fn message(&self, side: usize) -> Option<String> {
        self.s[side]
            .mig
            .jobs()
            .next()
            .and_then(|j| j.message().map(str::to_owned))
    }

    /// Whether the source accepts a client write to `slot` now.
    pub fn writable(&self, slot: Slot) -> bool {
        let src = &self.s[SRC];
        src.topo.slot_owner(slot) == Some(&src.id)
            && src.paused.is_none_or(|until| self.now > until)
    }

    /// A client write on the source: applied and fed to its data plane. `false` when the
    /// source does not take it (paused, or not the owner).
    pub fn write(&mut self, db: u32, argv: &[Vec<u8>]) -> bool {
        let slot = key_hash_slot(&argv[1]);
        if !self.writable(slot) {
            return false;
        }
        let now = self.now;
        let src = &mut self.s[SRC];
        src.db.exec(db, argv).unwrap();
        src.asm.feed(db, Some(slot), argv, now).unwrap();
        if src.asm.wants_key_state(slot) {
            // Slot-paged: the key's whole state after the write, for the slot being read.
            let state = src.db.get(db, &argv[1]).map(|e| (&e.val, e.expire));
            src.asm
                .feed_key_state(db, slot, &argv[1], state, now)
                .unwrap();
        }
        // A keyless write (as MULTI would be) is fed without a slot and dropped.
        src.asm.feed(db, None, &[b"MULTI".to_vec()], now).unwrap();
        true
    }

    fn close_link(&mut self, from: usize) {
        if !self.open {
            return;
        }
        self.open = false;
        self.wire = [Vec::new(), Vec::new()];
        let now = self.now;
        let (mine, theirs) = if from == SRC {
            (SRC_CONN, TGT_CONN)
        } else {
            (TGT_CONN, SRC_CONN)
        };
        self.s[from].asm.close(mine, now);
        let peer = 1 - from;
        if peer == TGT && !self.accepted {
            return;
        }
        self.s[peer].asm.handle_closed(theirs, now);
    }

    /// Acts on the migration engine's outputs of `side`.
    fn drain_mig(&mut self, side: usize) -> bool {
        let mut any = false;
        let now = self.now;
        while let Some(o) = self.s[side].mig.poll_output() {
            any = true;
            let s = &mut self.s[side];
            match o {
                MigrationOutput::Request(MigrationRequest::Connect { job, .. }) => {
                    self.open = true;
                    s.asm.handle_connected(job, SRC_CONN, now).unwrap();
                }
                MigrationOutput::Request(MigrationRequest::SendAuth { conn, .. }) => {
                    s.asm.send_auth(conn, None, PASSWORD, now).unwrap();
                }
                MigrationOutput::Request(MigrationRequest::Send { conn, message }) => {
                    s.asm.send_message(conn, &message, now);
                }
                MigrationOutput::Request(MigrationRequest::StartSnapshot { conn, ranges, job }) => {
                    let r = s.asm.start_snapshot(conn, &ranges, self.mode, now);
                    if r.is_err() {
                        s.mig.handle_input(
                            &s.topo,
                            MigrationInput::SnapshotStartFailed { job },
                            now,
                        );
                    } else if self.mode == SnapshotMode::PointInTime {
                        s.frozen = Some(s.db.clone());
                    }
                }
                MigrationOutput::Request(MigrationRequest::AbortSnapshot { job }) => {
                    s.asm.abort_snapshot(&job, now);
                    s.frozen = None;
                }
                MigrationOutput::Request(MigrationRequest::BeginStreaming { conn, .. }) => {
                    s.asm.begin_streaming(conn, now).unwrap();
                }
                MigrationOutput::Request(MigrationRequest::QueryBacklog { job, conn }) => {
                    s.asm.query_backlog(job, conn, now)
                }
                MigrationOutput::Request(MigrationRequest::AcceptImportLink {
                    job,
                    conn,
                    slots,
                }) => {
                    let already = self
                        .client
                        .as_mut()
                        .map(CommandReader::take_buffered)
                        .unwrap_or_default();
                    self.client = None;
                    self.accepted = true;
                    s.asm
                        .accept_import(job, conn, slots, &already, now)
                        .unwrap();
                    if let Some(g) = self.faults.target_garbage.take() {
                        self.wire[1].extend_from_slice(&g);
                    }
                }
                MigrationOutput::PauseWrites { until, .. } => s.paused = Some(until),
                MigrationOutput::UnpauseWrites => s.paused = None,
                MigrationOutput::TakeOwnership { slots, .. } => {
                    // The take-over and its PONG reach both topologies at once.
                    let tgt = self.s[TGT].id;
                    for side in &mut self.s {
                        for slot in slots.iter() {
                            side.topo.set_slot_owner(slot, Some(tgt)).unwrap();
                        }
                    }
                    for side in &mut self.s {
                        side.mig.handle_topology_changed(&side.topo, now);
                    }
                }
                MigrationOutput::Request(MigrationRequest::HideSlots { .. })
                | MigrationOutput::Request(MigrationRequest::RevealSlots { .. }) => {}
                MigrationOutput::Request(MigrationRequest::DropSlotKeys { slots }) => {
                    for space in &mut s.db.spaces {
                        space.retain(|slot, _| !slots.contains(Slot::new(*slot).unwrap()));
                    }
                    s.dropped.push(slots);
                }
                MigrationOutput::Request(MigrationRequest::Propagate { .. })
                | MigrationOutput::StateChanged { .. } => {}
                MigrationOutput::Request(MigrationRequest::Close { .. }) => self.close_link(side),
            }
        }
        any
    }

    /// Acts on the data plane's outputs of `side`.
    fn drain_asm(&mut self, side: usize) -> bool {
        let mut any = false;
        let now = self.now;
        while let Some(o) = self.s[side].asm.poll_output() {
            any = true;
            match o {
                AsmOutput::Send { bytes, .. } => {
                    if self.open {
                        self.wire[side].extend_from_slice(&bytes);
                    }
                }
                AsmOutput::Close { .. } => self.close_link(side),
                AsmOutput::Migration(input) => {
                    let s = &mut self.s[side];
                    s.mig.handle_input(&s.topo, input, now);
                    self.drain_mig(side);
                }
                AsmOutput::SyncSlots { conn, argv } => {
                    let s = &mut self.s[side];
                    let _ = s.mig.handle_cluster_command(
                        &s.topo,
                        Origin::Conn(conn),
                        &argv,
                        &mut self.rng,
                        now,
                    );
                    self.drain_mig(side);
                }
                AsmOutput::Apply { conn, db, argv } => {
                    assert_eq!(side, TGT);
                    let n = self.applies;
                    self.applies += 1;
                    if self.faults.oom_at_apply == Some(n) {
                        self.s[TGT].asm.handle_apply_failed(conn, true, now);
                        continue;
                    }
                    if let Err(e) = self.s[TGT].db.exec(db, &argv) {
                        panic!("seed {}: apply {argv:?}: {e}", self.rng_seed);
                    }
                }
                AsmOutput::Event(e) => self.events.push((side, e)),
            }
        }
        any
    }

    /// The target's client layer before the import link: AUTH and ESTABLISH run as
    /// commands with replies.
    fn target_client(&mut self, bytes: &[u8]) {
        let client = self
            .client
            .get_or_insert_with(|| CommandReader::new(ReaderLimits::default()));
        client.push(bytes);
        loop {
            let Some(client) = self.client.as_mut() else {
                // Accepted: the rest went to the import link.
                return;
            };
            let argv = match client.next_item() {
                Ok(Some(Item::Command(c))) => c.argv,
                Ok(Some(Item::Empty(_))) => continue,
                Ok(None) => return,
                Err(e) => panic!("target client: {e}"),
            };
            if argv[0].eq_ignore_ascii_case(b"auth") {
                let ok =
                    !self.faults.auth_refused && argv.last().map(Vec::as_slice) == Some(PASSWORD);
                let reply = if ok {
                    "+OK\r\n".to_owned()
                } else {
                    format!("-{WRONGPASS}\r\n")
                };
                self.wire[1].extend_from_slice(reply.as_bytes());
                continue;
            }
            let now = self.now;
            let t = &mut self.s[TGT];
            let reply = t.mig.handle_cluster_command(
                &t.topo,
                Origin::Conn(TGT_CONN),
                &argv,
                &mut self.rng,
                now,
            );
            if let Some(r) = reply {
                self.wire[1].extend_from_slice(&r.to_resp2());
            }
            self.drain_mig(TGT);
        }
    }

    /// Delivers a random chunk of each direction's bytes.
    fn deliver(&mut self) -> bool {
        let mut any = false;
        for dir in 0..2 {
            if !self.open || self.wire[dir].is_empty() {
                continue;
            }
            if dir == 0 && self.faults.target_stalls {
                // The target takes nothing: everything sent stays unsent.
                let unsent = self.wire[0].len() as u64;
                let now = self.now;
                self.s[SRC].asm.handle_unsent(SRC_CONN, unsent, now);
                continue;
            }
            any = true;
            let n = (1 + self.rand(self.max_chunk as u64) as usize).min(self.wire[dir].len());
            let chunk: Vec<u8> = self.wire[dir].drain(..n).collect();
            let now = self.now;
            if dir == 0 {
                self.sent_by_source += n;
                if self
                    .faults
                    .cut_after_bytes
                    .is_some_and(|c| self.sent_by_source >= c)
                {
                    // The connection breaks: both ends learn it from their sockets.
                    self.faults.cut_after_bytes = None;
                    self.open = false;
                    self.wire = [Vec::new(), Vec::new()];
                    self.s[SRC].asm.handle_closed(SRC_CONN, now);
                    if self.accepted {
                        self.s[TGT].asm.handle_closed(TGT_CONN, now);
                    }
                    return true;
                }
                if self.accepted {
                    self.s[TGT].asm.handle_bytes(TGT_CONN, &chunk, now);
                } else {
                    self.target_client(&chunk);
                }
            } else {
                self.s[SRC].asm.handle_bytes(SRC_CONN, &chunk, now);
            }
        }
        any
    }

    /// One round: outputs, delivery, a snapshot step, timers; 1 ms passes.
    pub fn step(&mut self) {
        for side in [SRC, TGT] {
            self.drain_mig(side);
            self.drain_asm(side);
        }
        self.deliver();
        for side in [SRC, TGT] {
            self.drain_asm(side);
        }
        let now = self.now;
        if self.open && !self.faults.target_stalls {
            // What the "socket" has not taken yet: the bytes in flight.
            let unsent = self.wire[SRC].len() as u64;
            self.s[SRC].asm.handle_unsent(SRC_CONN, unsent, now);
        }
        // The host interleaves snapshot steps with client writes.
        let pace = self.rand(2) == 0;
        let src = &mut self.s[SRC];
        if pace && src.asm.wants_snapshot_step(SRC_CONN) {
            let r = match &src.frozen {
                Some(f) => src.asm.snapshot_step(SRC_CONN, f, now),
                None if self.mode == SnapshotMode::SlotPaged => {
                    src.asm
                        .snapshot_step(SRC_CONN, &super::db::Backward(&src.db), now)
                }
                None => src.asm.snapshot_step(SRC_CONN, &src.db, now),
            };
            if matches!(r, Ok(SnapshotProgress::Done) | Ok(SnapshotProgress::Failed)) {
                src.frozen = None;
            }
        }
        self.now = self.now.saturating_add_ms(1);
        let now = self.now;
        for side in &mut self.s {
            if side.mig.poll_timeout().is_some_and(|t| t <= now) {
                side.mig.handle_timeout(&side.topo, now);
            }
            if side.asm.poll_timeout().is_some_and(|t| t <= now) {
                side.asm.handle_timeout(now);
            }
        }
    }

    /// Whether the source's job ended, and the target's if it has one.
    pub fn finished(&self) -> bool {
        self.state(SRC).is_some_and(JobState::is_terminal)
            && self.state(TGT).is_none_or(JobState::is_terminal)
    }

    /// Steps until both jobs ended (at most `max` steps).
    pub fn run(&mut self, max: usize) {
        for _ in 0..max {
            if self.finished() {
                // Let the last outputs land.
                for _ in 0..3 {
                    self.step();
                }
                return;
            }
            self.step();
        }
        panic!(
            "seed {}: not finished: source {:?} target {:?}",
            self.rng_seed,
            self.state(SRC),
            self.state(TGT)
        );
    }
}

//! A two-sided harness: source `s` and target `t` managers (plus `t`'s replica `r`) wired
//! through a scripted host. Connects and snapshots wait for explicit events; every other
//! output is acted on at once by [`Pair::pump`]. The keyspace is modelled as key counts per
//! slot and a hidden-slot set per node.

use super::{cluster, id, rng, T0};
use ferrocluster_migration::{
    ConnId, FinishState, JobKind, JobName, JobState, MigrationConfig, MigrationOutput,
    MigrationRequest, Migrations, Origin, SnapshotResult, SyncSlots,
};
use ferrocluster_slot::{Slot, SlotSet};
use ferrocluster_topology::{ConfigEpoch, Millis, Reply, Topology};
use std::collections::BTreeMap;

pub struct Side {
    pub m: Migrations,
    pub topo: Topology,
    pub keys: BTreeMap<Slot, u64>,
    pub hidden: SlotSet,
    pub log: Vec<MigrationOutput>,
}

impl Side {
    fn new(me: char, cfg: &MigrationConfig) -> Side {
        Side {
            m: Migrations::new(cfg.clone(), T0),
            topo: cluster(me),
            keys: BTreeMap::new(),
            hidden: SlotSet::new(),
            log: Vec::new(),
        }
    }
    pub fn state(&self, kind: JobKind, name: &JobName) -> Option<JobState> {
        self.m.job(kind, name).map(|j| j.state())
    }
}

pub struct Pair {
    pub s: Side,
    pub t: Side,
    pub r: Side,
    pub now: Millis,
    /// Export jobs waiting for the scripted connect.
    pub pending_connect: Vec<JobName>,
    /// Export job whose snapshot runs.
    pub pending_snapshot: Option<(JobName, ConnId)>,
    /// Source-side conn -> target-side conn, and back.
    pub s2t: BTreeMap<ConnId, ConnId>,
    pub t2s: BTreeMap<ConnId, ConnId>,
    pub conn_job: BTreeMap<ConnId, JobName>,
    next_conn: u64,
    pub paused_until: Option<Millis>,
    /// Every (job, state) of FINISH propagated by the target primary.
    pub finishes: Vec<(JobName, FinishState)>,
    /// Jobs for which TakeOwnership was emitted.
    pub taken: Vec<JobName>,
    /// Backlog the scripted host reports on QueryBacklog (None = do not answer).
    pub auto_backlog: Option<u64>,
    /// Names new jobs (one stream for the whole run, so names differ).
    pub rng: rand_chacha::ChaCha8Rng,
}

impl Pair {
    pub fn new(cfg: MigrationConfig) -> Pair {
        let mut p = Pair {
            s: Side::new('s', &cfg),
            t: Side::new('t', &cfg),
            r: Side::new('r', &cfg),
            now: T0,
            pending_connect: Vec::new(),
            pending_snapshot: None,
            s2t: BTreeMap::new(),
            t2s: BTreeMap::new(),
            conn_job: BTreeMap::new(),
            next_conn: 1,
            paused_until: None,
            finishes: Vec::new(),
            taken: Vec::new(),
            auto_backlog: Some(0),
            rng: rng(),
        };
        for s in 0..100u16 {
            p.s.keys.insert(super::slot(s), 10);
        }
        p
    }

    /// `CLUSTER MIGRATESLOTS` on the source.
    pub fn migrate(&mut self, args: &str) -> Reply {
        let argv = super::argv(&format!("CLUSTER MIGRATESLOTS {args}"));
        let r = self.s.m.handle_cluster_command(
            &self.s.topo,
            Origin::Conn(ConnId(0)),
            &argv,
            &mut self.rng,
            self.now,
        );
        self.pump();
        r.unwrap()
    }

    pub fn connect(&mut self, ok: bool) {
        let Some(job) = self.pending_connect.pop() else {
            return;
        };
        if ok {
            let sc = ConnId(1000 + self.next_conn);
            let tc = ConnId(2000 + self.next_conn);
            self.next_conn += 1;
            self.s2t.insert(sc, tc);
            self.t2s.insert(tc, sc);
            self.conn_job.insert(sc, job);
            self.s.m.handle_connected(&self.s.topo, &job, sc, self.now);
        } else {
            self.s
                .m
                .handle_connect_failed(&self.s.topo, &job, "Connection refused", self.now);
        }
        self.pump();
    }

    /// The snapshot producer finishes: on success it has copied the keys and written
    /// SNAPSHOT-EOF on the link.
    pub fn snapshot_done(&mut self, ok: bool) {
        let Some((job, sc)) = self.pending_snapshot.take() else {
            return;
        };
        if ok {
            if let Some(tc) = self.s2t.get(&sc).copied() {
                if let Some(j) = self.s.m.job(JobKind::Export, &job) {
                    for slot in j.slots().iter() {
                        let n = self.s.keys.get(&slot).copied().unwrap_or(0);
                        *self.t.keys.entry(slot).or_default() += n;
                    }
                }
                self.deliver_to_t(tc, SyncSlots::SnapshotEof.argv());
            }
            self.s.m.handle_snapshot_done(
                &self.s.topo,
                &job,
                SnapshotResult::Done { cow_bytes: 4096 },
                self.now,
            );
        } else {
            self.s
                .m
                .handle_snapshot_done(&self.s.topo, &job, SnapshotResult::Failed, self.now);
        }
        self.pump();
    }

    pub fn backlog(&mut self, bytes: u64) {
        let jobs: Vec<JobName> = self.conn_job.values().copied().collect();
        for j in jobs {
            self.s
                .m
                .handle_link_backlog(&self.s.topo, &j, bytes, self.now);
        }
        self.pump();
    }

    /// Drop every open link (as seen by both ends).
    pub fn drop_links(&mut self) {
        let pairs: Vec<(ConnId, ConnId)> = self.s2t.iter().map(|(a, b)| (*a, *b)).collect();
        self.s2t.clear();
        self.t2s.clear();
        for (sc, tc) in pairs {
            self.s.m.handle_link_closed(&self.s.topo, sc, self.now);
            self.t.m.handle_link_closed(&self.t.topo, tc, self.now);
        }
        self.pump();
    }

    /// Gossip: the source (and the replica) learn the target's slot claims.
    pub fn gossip(&mut self) {
        for s in Slot::all().take(200) {
            let owner = self.t.topo.slot_owner(s).copied();
            for side in [&mut self.s, &mut self.r] {
                if side.topo.slot_owner(s).copied() != owner {
                    side.topo.set_slot_owner(s, owner).unwrap();
                    // Dirty-slot deletion of the old owner (sheet C.6), done by the node.
                    if owner != Some(*side.topo.myself_id()) {
                        side.keys.remove(&s);
                    }
                }
            }
        }
        self.s.m.handle_topology_changed(&self.s.topo, self.now);
        self.r.m.handle_topology_changed(&self.r.topo, self.now);
        self.pump();
    }

    /// Advance the clock, running `handle_timeout` on every side whose deadline passed.
    pub fn advance(&mut self, ms: u64) {
        let end = self.now.saturating_add_ms(ms);
        loop {
            let next = [&self.s, &self.t, &self.r]
                .iter()
                .filter_map(|x| x.m.poll_timeout())
                .min();
            match next {
                Some(t) if t <= end => {
                    self.now = self.now.max(t);
                    for side in [&mut self.s, &mut self.t, &mut self.r] {
                        if side.m.poll_timeout().is_some_and(|d| d <= self.now) {
                            side.m.handle_timeout(&side.topo, self.now);
                        }
                    }
                    self.pump();
                }
                _ => break,
            }
        }
        self.now = end;
        for side in [&mut self.s, &mut self.t, &mut self.r] {
            side.m.handle_timeout(&side.topo, self.now);
        }
        self.pump();
    }

    fn deliver_to_t(&mut self, tc: ConnId, argv: Vec<Vec<u8>>) -> Option<Reply> {
        self.t.m.handle_import_data(tc, self.now);
        self.t
            .m
            .handle_cluster_command(&self.t.topo, Origin::Conn(tc), &argv, &mut rng(), self.now)
    }

    /// Act on every queued output until all sides are quiet.
    pub fn pump(&mut self) {
        loop {
            let mut busy = false;
            while let Some(o) = self.s.m.poll_output() {
                busy = true;
                self.s.log.push(o.clone());
                self.on_source(o);
            }
            while let Some(o) = self.t.m.poll_output() {
                busy = true;
                self.t.log.push(o.clone());
                self.on_target(o);
            }
            while let Some(o) = self.r.m.poll_output() {
                busy = true;
                self.r.log.push(o.clone());
                self.on_replica(o);
            }
            if !busy {
                break;
            }
        }
    }

    fn on_source(&mut self, o: MigrationOutput) {
        match o {
            MigrationOutput::Request(MigrationRequest::Connect { job, target, .. }) => {
                assert_eq!(target, id('t'));
                self.pending_connect.push(job);
            }
            MigrationOutput::Request(MigrationRequest::Send { conn, message }) => {
                let Some(tc) = self.s2t.get(&conn).copied() else {
                    return;
                };
                let reply = self.deliver_to_t(tc, message.argv());
                if let SyncSlots::Establish { name, .. } = message {
                    let line = match reply {
                        Some(Reply::Simple(s)) => format!("+{s}\r\n"),
                        Some(Reply::Error(e)) => format!("-{e}\r\n"),
                        other => panic!("unexpected ESTABLISH reply {other:?}"),
                    };
                    self.s
                        .m
                        .handle_establish_reply(&self.s.topo, &name, line.as_bytes(), self.now);
                } else {
                    assert_eq!(reply, None, "SYNCSLOTS {message:?} got a reply");
                }
            }
            MigrationOutput::Request(MigrationRequest::StartSnapshot { job, conn, .. }) => {
                assert!(self.pending_snapshot.is_none(), "two snapshots at once");
                self.pending_snapshot = Some((job, conn));
            }
            MigrationOutput::Request(MigrationRequest::AbortSnapshot { job }) => {
                if self.pending_snapshot.is_some_and(|(j, _)| j == job) {
                    self.pending_snapshot = None;
                }
            }
            MigrationOutput::Request(MigrationRequest::QueryBacklog { job, .. }) => {
                if let Some(b) = self.auto_backlog {
                    self.s
                        .m
                        .handle_link_backlog(&self.s.topo, &job, b, self.now);
                }
            }
            MigrationOutput::PauseWrites { until, .. } => self.paused_until = Some(until),
            MigrationOutput::UnpauseWrites => self.paused_until = None,
            MigrationOutput::Request(MigrationRequest::Close { conn }) => {
                if let Some(tc) = self.s2t.remove(&conn) {
                    self.t2s.remove(&tc);
                    self.t.m.handle_link_closed(&self.t.topo, tc, self.now);
                }
            }
            MigrationOutput::Request(MigrationRequest::BeginStreaming { .. })
            | MigrationOutput::StateChanged { .. } => {}
            other => panic!("source emitted a target-side output: {other:?}"),
        }
    }

    fn on_target(&mut self, o: MigrationOutput) {
        match o {
            MigrationOutput::Request(MigrationRequest::Send { conn, message }) => {
                let Some(sc) = self.t2s.get(&conn).copied() else {
                    return;
                };
                let r = self.s.m.handle_cluster_command(
                    &self.s.topo,
                    Origin::Conn(sc),
                    &message.argv(),
                    &mut rng(),
                    self.now,
                );
                assert_eq!(r, None, "source replied to {message:?}");
            }
            MigrationOutput::Request(MigrationRequest::HideSlots { slots }) => {
                self.t.hidden = self.t.hidden.union(&slots)
            }
            MigrationOutput::Request(MigrationRequest::RevealSlots { slots }) => {
                self.t.hidden = self.t.hidden.difference(&slots)
            }
            MigrationOutput::Request(MigrationRequest::DropSlotKeys { slots }) => {
                for s in slots.iter() {
                    assert_ne!(self.t.topo.slot_owner(s), Some(&id('t')));
                    self.t.keys.remove(&s);
                }
            }
            MigrationOutput::TakeOwnership { job, slots } => {
                self.taken.push(job);
                let topo = &mut self.t.topo;
                let e = topo.current_epoch.next();
                topo.current_epoch = e;
                topo.myself_mut().config_epoch = ConfigEpoch(e.get());
                for s in slots.iter() {
                    topo.set_slot_owner(s, Some(id('t'))).unwrap();
                }
            }
            MigrationOutput::Request(MigrationRequest::Propagate { message }) => {
                if let SyncSlots::Finish { state, name, .. } = &message {
                    self.finishes.push((*name, *state));
                }
                let r = self.r.m.handle_cluster_command(
                    &self.r.topo,
                    Origin::Primary,
                    &message.argv(),
                    &mut rng(),
                    self.now,
                );
                assert_eq!(r, Some(Reply::ok()), "replica refused {message:?}");
            }
            MigrationOutput::Request(MigrationRequest::Close { conn }) => {
                if let Some(sc) = self.t2s.remove(&conn) {
                    self.s2t.remove(&sc);
                    self.s.m.handle_link_closed(&self.s.topo, sc, self.now);
                }
            }
            MigrationOutput::Request(MigrationRequest::AcceptImportLink { .. })
            | MigrationOutput::StateChanged { .. } => {}
            other => panic!("target emitted a source-side output: {other:?}"),
        }
    }

    fn on_replica(&mut self, o: MigrationOutput) {
        match o {
            MigrationOutput::Request(MigrationRequest::HideSlots { slots }) => {
                self.r.hidden = self.r.hidden.union(&slots)
            }
            MigrationOutput::Request(MigrationRequest::RevealSlots { slots }) => {
                self.r.hidden = self.r.hidden.difference(&slots)
            }
            MigrationOutput::Request(MigrationRequest::DropSlotKeys { slots }) => {
                for s in slots.iter() {
                    self.r.keys.remove(&s);
                }
            }
            // A replica re-propagates what it received; only a promoted one originates FINISH.
            MigrationOutput::Request(MigrationRequest::Propagate { message })
                if self.r.topo.myself().is_primary() =>
            {
                if let SyncSlots::Finish { state, name, .. } = &message {
                    self.finishes.push((*name, *state));
                }
            }
            MigrationOutput::Request(MigrationRequest::Propagate { .. })
            | MigrationOutput::StateChanged { .. }
            | MigrationOutput::Request(MigrationRequest::Close { .. }) => {}
            other => panic!("replica emitted {other:?}"),
        }
    }

    /// The newest export job's name.
    pub fn last_job(&self) -> JobName {
        *self.s.m.jobs().next().unwrap().name()
    }
}

//! Atomic slot migration (Valkey 9) through `ClusterNode`, two primaries over the in-memory
//! harness with a scripted host data plane ([`Plane`]): the happy path up to the take-over
//! with a bumped configEpoch and the source's dirty-slot deletion learned by gossip, rollback
//! on link loss, CANCELSLOTMIGRATIONS, GETSLOTMIGRATIONS on both sides, and the SETSLOT/ASM
//! exclusion. Expected values come from `shared/spec/slot-migration-and-kvstore.md` parts A
//! and C (section numbers in the comments).

mod common;

use common::{ip, port, Net};
use ferrocluster_bus::MessageType;
use ferrocluster_node::migration::{MSG_LOST_SOURCE, MSG_LOST_TARGET};
use ferrocluster_node::{
    CommandOutcome, CommandRequest, ConnId, EmptyKeyspace, FinishState, JobKind, JobName, JobState,
    MigrationInput, MigrationRequest, NodeId, Notice, Output, Reply, SnapshotResult, SyncSlots,
    MSG_SYNCSLOTS_NO_CONN,
};
use ferrocluster_slot::{Slot, SlotRange, SlotSet};
use std::collections::BTreeMap;

const NT: u64 = 2000; // cluster-node-timeout (ms)
const SRC: usize = 0;
const DST: usize = 1;

fn slots(a: u16, b: u16) -> SlotSet {
    let mut s = SlotSet::new();
    s.insert_range(SlotRange::new(Slot::new(a).unwrap(), Slot::new(b).unwrap()).unwrap());
    s
}

fn id(net: &Net, i: usize) -> NodeId {
    *net.nodes[i].myself_id()
}

fn owner(net: &Net, viewer: usize, slot: u16) -> Option<NodeId> {
    net.nodes[viewer]
        .topology()
        .slot_owner(Slot::new(slot).unwrap())
        .copied()
}

/// Two primaries (node 0: slots 0–8191, node 1: 8192–16383), fully meshed, each seeing the
/// other's slots, state ok on both.
fn two_primaries() -> Net {
    let mut net = Net::new(2, NT);
    net.add_slots(SRC, 0, 8191);
    net.add_slots(DST, 8192, 16383);
    net.meet(SRC, DST);
    assert!(net.run_until(10_000, |n| n.fully_meshed()
        && owner(n, DST, 0) == Some(id(n, SRC))
        && owner(n, SRC, 8192) == Some(id(n, DST))
        && n.nodes.iter().all(|x| x.cluster_state_ok())));
    net
}

fn cmd(net: &mut Net, i: usize, argv: &[&str], req: &CommandRequest) -> CommandOutcome {
    let now = net.now;
    let out = net.nodes[i].cluster_command_argv(argv, req, &EmptyKeyspace, now);
    net.drain();
    out
}

/// `argv` (`CLUSTER ...`) on node `i`: the reply, at once or after its persist.
fn reply(net: &mut Net, i: usize, argv: &[&str]) -> Reply {
    let (out, id) = net.command(i, &argv[1..]);
    net.reply_of(i, id, &out)
        .unwrap_or_else(|| panic!("{argv:?}: {out:?}"))
}

/// The scripted data plane of both hosts: data connections are wired in memory; snapshots
/// copy the key counts of the migrating slots and write SNAPSHOT-EOF; every other request is
/// acted on at once. Keys are modelled as key counts per slot.
struct Plane {
    seen: usize,
    next_conn: u64,
    wires: BTreeMap<(usize, ConnId), (usize, ConnId)>,
    conn_job: BTreeMap<(usize, ConnId), JobName>,
    /// Finish snapshots by themselves.
    auto_snapshot: bool,
    pending_snapshot: Vec<(usize, JobName, ConnId, Vec<SlotRange>)>,
    keys: Vec<BTreeMap<u16, u64>>,
    hidden: Vec<SlotSet>,
    /// Every migration request acted on, per node.
    log: Vec<(usize, MigrationRequest)>,
    /// Every event that is not a migration request, per node.
    events: Vec<(usize, Output)>,
    /// SYNCSLOTS messages lost on the way.
    dropped: Vec<SyncSlots>,
}

impl Plane {
    fn new(n: usize) -> Plane {
        Plane {
            seen: 0,
            next_conn: 100,
            wires: BTreeMap::new(),
            conn_job: BTreeMap::new(),
            auto_snapshot: true,
            pending_snapshot: Vec::new(),
            keys: vec![BTreeMap::new(); n],
            hidden: vec![SlotSet::new(); n],
            log: Vec::new(),
            events: Vec::new(),
            dropped: Vec::new(),
        }
    }

    /// Acts on every new event until both nodes are quiet.
    fn pump(&mut self, net: &mut Net) {
        loop {
            net.drain();
            if self.seen == net.events.len() {
                return;
            }
            let new: Vec<(usize, Output)> = net.events[self.seen..].to_vec();
            self.seen = net.events.len();
            for (i, e) in new {
                match e {
                    Output::Migration(r) => self.act(net, i, *r),
                    Output::DeleteSlotKeys(s) => {
                        self.keys[i].retain(|slot, _| !s.contains(Slot::new(*slot).unwrap()));
                        self.events.push((i, Output::DeleteSlotKeys(s)));
                    }
                    other => self.events.push((i, other)),
                }
            }
        }
    }

    /// Delivers a SYNCSLOTS message to the peer of `(i, conn)` as a command on its end.
    fn deliver(&mut self, net: &mut Net, i: usize, conn: ConnId, message: &SyncSlots) {
        let Some(&(j, pc)) = self.wires.get(&(i, conn)) else {
            return;
        };
        if self.dropped.contains(message) {
            return;
        }
        let argv: Vec<Vec<u8>> = message.argv();
        let req = CommandRequest {
            conn: Some(pc),
            ..CommandRequest::default()
        };
        let now = net.now;
        let bound = net.nodes[j].migrations().job_for_conn(pc).is_some();
        let out = net.nodes[j].cluster_command_argv(&argv, &req, &EmptyKeyspace, now);
        if let SyncSlots::Establish { .. } = message {
            // The source reads one reply line (§A.7 reading-establish-response).
            let line = match out {
                CommandOutcome::Reply(r) => r.to_resp2(),
                o => panic!("ESTABLISH got {o:?}"),
            };
            let job = self.conn_job[&(i, conn)];
            net.nodes[i].handle_migration(MigrationInput::EstablishReply { job, line }, now);
        } else if bound {
            // §A.5: only ESTABLISH (and FINISH) are answered.
            assert_eq!(out, CommandOutcome::NoReply, "{message:?}");
        } else {
            // Crossed a job that just ended on this end (its Close is on the way): the
            // reply goes nowhere.
            assert!(
                matches!(out, CommandOutcome::Reply(Reply::Error(_))),
                "{out:?}"
            );
        }
    }

    fn finish_snapshot(&mut self, net: &mut Net, i: usize, job: JobName, conn: ConnId) {
        let ranges = self
            .pending_snapshot
            .iter()
            .position(|p| p.1 == job)
            .map(|p| self.pending_snapshot.remove(p).3)
            .unwrap_or_default();
        if let Some(&(j, _)) = self.wires.get(&(i, conn)) {
            for r in ranges {
                for s in r.iter() {
                    if let Some(n) = self.keys[i].get(&s.get()).copied() {
                        self.keys[j].insert(s.get(), n);
                    }
                }
            }
            self.deliver(net, i, conn, &SyncSlots::SnapshotEof);
        }
        let now = net.now;
        let result = SnapshotResult::Done { cow_bytes: 0 };
        net.nodes[i].handle_migration(MigrationInput::SnapshotDone { job, result }, now);
    }

    fn act(&mut self, net: &mut Net, i: usize, r: MigrationRequest) {
        self.log.push((i, r.clone()));
        let now = net.now;
        match r {
            MigrationRequest::Connect {
                job,
                ip: dst_ip,
                port: dst_port,
                ..
            } => {
                // The data port, not the bus port (§A.8 "Connection target port").
                let j = (0..net.nodes.len())
                    .find(|&j| ip(j) == dst_ip && port(j) == dst_port)
                    .expect("connect to a node's client port");
                let (sc, tc) = (ConnId(self.next_conn), ConnId(self.next_conn + 1));
                self.next_conn += 2;
                self.wires.insert((i, sc), (j, tc));
                self.wires.insert((j, tc), (i, sc));
                self.conn_job.insert((i, sc), job);
                net.nodes[i].handle_migration(MigrationInput::Connected { job, conn: sc }, now);
            }
            MigrationRequest::Send { conn, message } => self.deliver(net, i, conn, &message),
            MigrationRequest::StartSnapshot { job, conn, ranges } => {
                self.pending_snapshot.push((i, job, conn, ranges));
                if self.auto_snapshot {
                    self.finish_snapshot(net, i, job, conn);
                }
            }
            MigrationRequest::QueryBacklog { job, .. } => {
                let input = MigrationInput::LinkBacklog { job, bytes: 0 };
                net.nodes[i].handle_migration(input, now);
            }
            MigrationRequest::HideSlots { slots } => self.hidden[i] = self.hidden[i].union(&slots),
            MigrationRequest::RevealSlots { slots } => {
                self.hidden[i] = self.hidden[i].difference(&slots)
            }
            MigrationRequest::DropSlotKeys { slots } => {
                self.keys[i].retain(|s, _| !slots.contains(Slot::new(*s).unwrap()))
            }
            MigrationRequest::Propagate { message } => {
                // The replication stream to myself's replicas (§A.5, §A.11).
                let me = id(net, i);
                for k in 0..net.nodes.len() {
                    let mine = net.nodes[k].topology().myself();
                    if k != i && mine.is_replica() && mine.primary == Some(me) {
                        let argv = message.argv();
                        let req = CommandRequest {
                            from_primary: true,
                            ..CommandRequest::default()
                        };
                        let r = net.nodes[k].cluster_command_argv(&argv, &req, &EmptyKeyspace, now);
                        assert_eq!(r, CommandOutcome::Reply(Reply::ok()), "{message:?}");
                    }
                }
            }
            MigrationRequest::Close { conn } => {
                if let Some((j, pc)) = self.wires.remove(&(i, conn)) {
                    self.wires.remove(&(j, pc));
                    net.nodes[j].handle_migration(MigrationInput::LinkClosed { conn: pc }, now);
                }
            }
            _ => {}
        }
    }

    /// Both ends of every data connection see it close (network failure).
    fn cut_links(&mut self, net: &mut Net) {
        let ends: Vec<(usize, ConnId)> = self.wires.keys().copied().collect();
        self.wires.clear();
        let now = net.now;
        for (i, c) in ends {
            net.nodes[i].handle_migration(MigrationInput::LinkClosed { conn: c }, now);
        }
        self.pump(net);
    }

    fn requests(&self, i: usize) -> impl Iterator<Item = &MigrationRequest> {
        self.log
            .iter()
            .filter(move |(n, _)| *n == i)
            .map(|(_, r)| r)
    }

    /// The outputs of node `i` the plane saw that are not migration requests.
    fn events(&self, i: usize) -> impl Iterator<Item = &Output> {
        self.events
            .iter()
            .filter(move |(n, _)| *n == i)
            .map(|(_, e)| e)
    }
}

fn migrate(net: &mut Net, plane: &mut Plane, a: u16, b: u16) -> Reply {
    let target = id(net, DST).to_string();
    let (a, b) = (a.to_string(), b.to_string());
    let r = reply(
        net,
        SRC,
        &[
            "CLUSTER",
            "MIGRATESLOTS",
            "SLOTSRANGE",
            &a,
            &b,
            "NODE",
            &target,
        ],
    );
    plane.pump(net);
    r
}

fn job_state(net: &Net, i: usize, kind: JobKind) -> (JobState, Option<String>) {
    let j = net.nodes[i]
        .migrations()
        .jobs()
        .find(|j| j.kind() == kind)
        .expect("a job");
    (j.state(), j.message().map(str::to_owned))
}

/// Field `name` of a GETSLOTMIGRATIONS entry.
fn field<'a>(entry: &'a Reply, name: &str) -> &'a Reply {
    let Reply::Map(m) = entry else {
        panic!("not a map: {entry:?}")
    };
    &m.iter()
        .find(|(k, _)| *k == Reply::bulk(name))
        .unwrap_or_else(|| panic!("no {name}"))
        .1
}

fn with_keys(plane: &mut Plane) {
    for s in 0..100u16 {
        plane.keys[SRC].insert(s, 10);
    }
    plane.keys[SRC].insert(200, 5);
}

#[test]
fn happy_path_target_takes_over_and_source_drops_its_keys() {
    let mut net = two_primaries();
    let mut plane = Plane::new(2);
    with_keys(&mut plane);
    // Give the source the highest configEpoch so the target's take-over must bump (§A.14:
    // "if its configEpoch is 0 or not already the strict maximum").
    let bumped = reply(&mut net, SRC, &["CLUSTER", "BUMPEPOCH"]);
    assert!(
        matches!(&bumped, Reply::Simple(s) if s.starts_with("BUMPED") || s.starts_with("STILL")),
        "{bumped:?}"
    );
    assert!(
        net.run_until(2_000, |n| n.nodes[DST].topology().current_epoch
            == n.nodes[SRC].topology().current_epoch)
    );
    let cur_before = net.nodes[DST].topology().current_epoch.get();
    let src_epoch = net.nodes[SRC].topology().myself().config_epoch.get();
    assert!(net.nodes[DST].topology().myself().config_epoch.get() < src_epoch);
    let log_start = net.log.len();

    assert_eq!(migrate(&mut net, &mut plane, 0, 99), Reply::ok());

    // Source requests, in order (§A.7 export table, §A.8): connect to the target's client
    // port, ESTABLISH, first ACK, snapshot, streaming.
    let src: Vec<&MigrationRequest> = plane.requests(SRC).collect();
    assert!(
        matches!(src[0], MigrationRequest::Connect { target, port: p, .. }
        if *target == id(&net, DST) && *p == port(DST))
    );
    assert!(
        matches!(src[1], MigrationRequest::Send { message: SyncSlots::Establish { source, ranges, .. }, .. }
        if *source == Some(id(&net, SRC)) && ranges == &vec![SlotRange::new(Slot::new(0).unwrap(), Slot::new(99).unwrap()).unwrap()])
    );
    assert!(matches!(
        src[2],
        MigrationRequest::Send {
            message: SyncSlots::Ack,
            ..
        }
    ));
    assert!(matches!(src[3], MigrationRequest::StartSnapshot { .. }));
    let sent: Vec<&SyncSlots> = src
        .iter()
        .filter_map(|r| match r {
            MigrationRequest::Send { message, .. } => Some(message),
            _ => None,
        })
        .collect();
    assert!(sent.contains(&&SyncSlots::Paused));
    assert!(sent.contains(&&SyncSlots::FailoverGranted));
    // Target: REQUEST-PAUSE after SNAPSHOT-EOF, REQUEST-FAILOVER after PAUSED (§A.5);
    // heartbeat ACKs (§A.8) aside.
    let dst_sent: Vec<SyncSlots> = plane
        .requests(DST)
        .filter_map(|r| match r {
            MigrationRequest::Send { message, .. } if *message != SyncSlots::Ack => {
                Some(message.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        dst_sent,
        vec![SyncSlots::RequestPause, SyncSlots::RequestFailover]
    );

    // §A.14: configEpoch bumped without agreement to currentEpoch + 1, slots mine.
    let new_epoch = net.nodes[DST].topology().myself().config_epoch.get();
    assert_eq!(new_epoch, cur_before + 1);
    assert!(new_epoch > src_epoch);
    assert!(plane.events(DST).any(
        |e| matches!(e, Output::Notice(Notice::ConfigEpochBumped(c)) if c.get() == new_epoch)
    ));
    for v in [SRC, DST] {
        assert_eq!(owner(&net, v, 0), Some(id(&net, DST)), "viewer {v}");
        assert_eq!(owner(&net, v, 99), Some(id(&net, DST)), "viewer {v}");
        assert_eq!(owner(&net, v, 100), Some(id(&net, SRC)), "viewer {v}");
    }
    // ... saved, and a PONG carrying the new epoch and slot 0 went to the source only after
    // that persist (§A.14 steps 3–4).
    let pong_at = net.log[log_start..]
        .iter()
        .position(|(i, o)| {
            *i == DST
                && matches!(o, Output::Transmit { bytes, .. }
                    if ferrocluster_bus::decode(bytes).is_ok_and(|m| m.message_type() == MessageType::Pong
                        && m.full_header().is_some_and(|h| h.config_epoch == new_epoch
                            && h.myslots.contains(Slot::new(0).unwrap()))))
        })
        .expect("a PONG announcing the take-over");
    let persist_at = net.log[log_start..]
        .iter()
        .position(|(i, o)| {
            *i == DST
                && matches!(o, Output::Persist { contents, .. }
                    if String::from_utf8_lossy(contents).lines().any(|l| l.contains("myself") && l.contains(" 0-99 ")))
        })
        .expect("nodes.conf saved with slots 0-99");
    assert!(persist_at < pong_at);

    // Target: slots hidden while staged, revealed at the end, keys arrived; FINISH success
    // propagated to replicas/AOF (§A.5, §A.12).
    assert!(plane
        .requests(DST)
        .any(|r| matches!(r, MigrationRequest::HideSlots { slots: s } if *s == slots(0, 99))));
    assert!(plane
        .requests(DST)
        .any(|r| matches!(r, MigrationRequest::RevealSlots { slots: s } if *s == slots(0, 99))));
    assert!(plane.hidden[DST].is_empty());
    assert_eq!(plane.keys[DST].len(), 100);
    assert!(plane.requests(DST).any(|r| matches!(
        r,
        MigrationRequest::Propagate {
            message: SyncSlots::Finish {
                state: FinishState::Success,
                ..
            }
        }
    )));

    // Source (§A.1, §C.6): learned the owner through gossip, deleted the keys of exactly the
    // moved slots, job success, writes paused then unpaused.
    let mut deleted = SlotSet::new();
    for e in plane.events(SRC) {
        if let Output::DeleteSlotKeys(s) = e {
            deleted = deleted.union(s);
        }
    }
    assert_eq!(deleted, slots(0, 99));
    assert_eq!(
        plane.keys[SRC].keys().copied().collect::<Vec<_>>(),
        vec![200]
    );
    let pauses: Vec<&Output> = plane
        .events(SRC)
        .filter(|e| matches!(e, Output::PauseWrites { .. } | Output::UnpauseWrites))
        .collect();
    assert!(matches!(pauses.first(), Some(Output::PauseWrites { .. })));
    assert!(matches!(pauses.last(), Some(Output::UnpauseWrites)));
    assert_eq!(
        job_state(&net, SRC, JobKind::Export),
        (JobState::Success, None)
    );
    assert_eq!(
        job_state(&net, DST, JobKind::Import),
        (JobState::Success, None)
    );

    // GETSLOTMIGRATIONS on both sides (§A.3): one entry each, same name.
    let (s, t) = (id(&net, SRC).to_string(), id(&net, DST).to_string());
    let mut names = Vec::new();
    for (i, op) in [(SRC, "EXPORT"), (DST, "IMPORT")] {
        let Reply::Array(entries) = reply(&mut net, i, &["CLUSTER", "GETSLOTMIGRATIONS"]) else {
            panic!("not an array")
        };
        assert_eq!(entries.len(), 1);
        let e = &entries[0];
        assert_eq!(field(e, "operation"), &Reply::bulk(op));
        assert_eq!(field(e, "slot_ranges"), &Reply::bulk("0-99"));
        assert_eq!(field(e, "source_node"), &Reply::bulk(s.as_str()));
        assert_eq!(field(e, "target_node"), &Reply::bulk(t.as_str()));
        assert_eq!(field(e, "state"), &Reply::bulk("success"));
        assert_eq!(field(e, "message"), &Reply::bulk(""));
        let Reply::Map(m) = e else { unreachable!() };
        assert_eq!(m.len(), 12, "9.1 has 12 fields");
        names.push(field(e, "name").clone());
    }
    assert_eq!(names[0], names[1]);
}

#[test]
fn link_loss_rolls_back_the_target_and_leaves_the_source_owner() {
    let mut net = two_primaries();
    let mut plane = Plane::new(2);
    with_keys(&mut plane);
    plane.auto_snapshot = false;
    assert_eq!(migrate(&mut net, &mut plane, 0, 99), Reply::ok());
    assert_eq!(
        job_state(&net, SRC, JobKind::Export).0,
        JobState::Snapshotting
    );
    assert_eq!(
        job_state(&net, DST, JobKind::Import).0,
        JobState::ReceivingSnapshot
    );
    // Part of the snapshot arrived (staged and hidden on the target).
    for s in 0..50u16 {
        plane.keys[DST].insert(s, 10);
    }
    assert_eq!(plane.hidden[DST], slots(0, 99));

    plane.cut_links(&mut net);

    // §A.10, §A.11: the target fails, deletes the staged keys of slots it does not own,
    // then reveals and propagates FINISH failed; the source fails and keeps its slots.
    assert_eq!(
        job_state(&net, DST, JobKind::Import),
        (JobState::Failed, Some(MSG_LOST_SOURCE.to_owned()))
    );
    assert_eq!(
        job_state(&net, SRC, JobKind::Export),
        (JobState::Failed, Some(MSG_LOST_TARGET.to_owned()))
    );
    assert!(plane
        .requests(DST)
        .any(|r| matches!(r, MigrationRequest::DropSlotKeys { slots: s } if *s == slots(0, 99))));
    assert!(plane.keys[DST].is_empty());
    assert!(plane.hidden[DST].is_empty());
    assert!(plane.requests(DST).any(|r| matches!(r,
        MigrationRequest::Propagate { message: SyncSlots::Finish { state: FinishState::Failed, message: Some(m), .. } }
        if m == MSG_LOST_SOURCE)));
    assert!(plane
        .requests(SRC)
        .any(|r| matches!(r, MigrationRequest::AbortSnapshot { .. })));
    net.run_for(1_000);
    plane.pump(&mut net);
    for v in [SRC, DST] {
        assert_eq!(owner(&net, v, 0), Some(id(&net, SRC)));
    }
    assert_eq!(plane.keys[SRC].len(), 101);
    assert!(!plane
        .events(SRC)
        .any(|e| matches!(e, Output::DeleteSlotKeys(_))));
}

#[test]
fn cancel_stops_the_export_and_the_target_cleans_up() {
    let mut net = two_primaries();
    let mut plane = Plane::new(2);
    with_keys(&mut plane);
    plane.auto_snapshot = false;
    assert_eq!(migrate(&mut net, &mut plane, 0, 99), Reply::ok());
    for s in 0..100u16 {
        plane.keys[DST].insert(s, 10);
    }
    assert_eq!(
        reply(&mut net, SRC, &["CLUSTER", "CANCELSLOTMIGRATIONS"]),
        Reply::ok()
    );
    plane.pump(&mut net);
    // §A.4: cancelled with an empty message; the link closes, the target fails with the
    // connection-lost message and deletes the staged keys.
    assert_eq!(
        job_state(&net, SRC, JobKind::Export),
        (JobState::Cancelled, None)
    );
    assert_eq!(
        job_state(&net, DST, JobKind::Import),
        (JobState::Failed, Some(MSG_LOST_SOURCE.to_owned()))
    );
    assert!(plane.keys[DST].is_empty());
    assert!(plane.wires.is_empty());
    assert_eq!(
        reply(&mut net, SRC, &["CLUSTER", "CANCELSLOTMIGRATIONS"]),
        Reply::Error("ERR No migrations ongoing".to_owned())
    );
    // The log keeps the cancelled job (§A.3).
    let Reply::Array(e) = reply(&mut net, SRC, &["CLUSTER", "GETSLOTMIGRATIONS"]) else {
        panic!()
    };
    assert_eq!(field(&e[0], "state"), &Reply::bulk("cancelled"));
    assert_eq!(owner(&net, DST, 0), Some(id(&net, SRC)));
}

#[test]
fn cancel_while_paused_lifts_the_pause() {
    let mut net = two_primaries();
    let mut plane = Plane::new(2);
    with_keys(&mut plane);
    // The target's REQUEST-FAILOVER never arrives: the source stays in failover-paused.
    plane.dropped.push(SyncSlots::RequestFailover);
    assert_eq!(migrate(&mut net, &mut plane, 0, 99), Reply::ok());
    assert_eq!(
        job_state(&net, SRC, JobKind::Export).0,
        JobState::FailoverPaused
    );
    // §A.9: paused until now + 2 × cluster-manual-failover-timeout (5000 ms by default).
    let until = net.nodes[SRC]
        .migrations()
        .jobs()
        .next()
        .unwrap()
        .pause_until();
    assert_eq!(until, Some(net.now.saturating_add_ms(10_000)));
    assert_eq!(
        plane
            .events(SRC)
            .filter(|e| !matches!(e, Output::Notice(_)))
            .last(),
        Some(&Output::PauseWrites {
            until: until.unwrap()
        })
    );
    assert_eq!(
        reply(&mut net, SRC, &["CLUSTER", "CANCELSLOTMIGRATIONS"]),
        Reply::ok()
    );
    plane.pump(&mut net);
    // §A.4: "If the source was paused, cancelling unpauses it."
    assert_eq!(
        job_state(&net, SRC, JobKind::Export),
        (JobState::Cancelled, None)
    );
    assert!(plane
        .events(SRC)
        .any(|e| matches!(e, Output::UnpauseWrites)));
    assert_eq!(
        job_state(&net, DST, JobKind::Import),
        (JobState::Failed, Some(MSG_LOST_SOURCE.to_owned()))
    );
}

#[test]
fn pause_deadline_fails_the_export_through_the_node_timers() {
    let mut net = two_primaries();
    let mut plane = Plane::new(2);
    plane.dropped.push(SyncSlots::RequestFailover);
    assert_eq!(migrate(&mut net, &mut plane, 0, 99), Reply::ok());
    let until = net.nodes[SRC]
        .migrations()
        .jobs()
        .next()
        .unwrap()
        .pause_until()
        .unwrap();
    // The node's deadline never lies after the pause end (poll_timeout includes it).
    assert!(net.nodes[SRC].poll_timeout().unwrap() <= until.saturating_add_ms(1));
    net.run_for(10_200);
    plane.pump(&mut net);
    // §A.7 failover-paused: "pause deadline passes → fail Timed out before streaming
    // completed"; the target, left without its source, fails too and cleans up.
    assert_eq!(
        job_state(&net, SRC, JobKind::Export),
        (
            JobState::Failed,
            Some("Timed out before streaming completed".to_owned())
        )
    );
    assert!(matches!(
        plane
            .events(SRC)
            .filter(|e| matches!(e, Output::PauseWrites { .. } | Output::UnpauseWrites))
            .last(),
        Some(Output::UnpauseWrites)
    ));
    assert_eq!(job_state(&net, DST, JobKind::Import).0, JobState::Failed);
    assert_eq!(owner(&net, DST, 0), Some(id(&net, SRC)));
}

#[test]
fn setslot_and_asm_exclude_each_other() {
    let mut net = two_primaries();
    let mut plane = Plane::new(2);
    plane.auto_snapshot = false;
    assert_eq!(migrate(&mut net, &mut plane, 0, 99), Reply::ok());
    let (s, t) = (id(&net, SRC).to_string(), id(&net, DST).to_string());
    // §A.17.
    assert_eq!(
        reply(
            &mut net,
            SRC,
            &["CLUSTER", "SETSLOT", "200", "MIGRATING", &t]
        ),
        Reply::Error("ERR Slot export in progress".to_owned())
    );
    assert_eq!(
        reply(
            &mut net,
            DST,
            &["CLUSTER", "SETSLOT", "300", "IMPORTING", &s]
        ),
        Reply::Error("ERR Slot import in progress".to_owned())
    );
    // STABLE is not affected.
    assert_eq!(
        reply(&mut net, SRC, &["CLUSTER", "SETSLOT", "200", "STABLE"]),
        Reply::ok()
    );
    plane.cut_links(&mut net);
    // After the jobs ended, legacy marks work again, and then ASM is refused (§A.2 step 4).
    assert_eq!(
        reply(
            &mut net,
            SRC,
            &["CLUSTER", "SETSLOT", "200", "MIGRATING", &t]
        ),
        Reply::ok()
    );
    assert_eq!(
        reply(
            &mut net,
            SRC,
            &[
                "CLUSTER",
                "MIGRATESLOTS",
                "SLOTSRANGE",
                "0",
                "9",
                "NODE",
                &t
            ]
        ),
        Reply::Error("ERR Slots are being manually migrated".to_owned())
    );
}

#[test]
fn syncslots_needs_a_migration_connection() {
    let mut net = two_primaries();
    // No connection handle from the host (§A.5 is about slot-migration clients).
    assert_eq!(
        reply(&mut net, DST, &["CLUSTER", "SYNCSLOTS", "ACK"]),
        Reply::Error(MSG_SYNCSLOTS_NO_CONN.to_owned())
    );
    // A known connection that is no migration link.
    let req = CommandRequest {
        conn: Some(ConnId(7)),
        ..CommandRequest::default()
    };
    assert_eq!(
        cmd(&mut net, DST, &["CLUSTER", "SYNCSLOTS", "ACK"], &req),
        CommandOutcome::Reply(Reply::Error(
            "ERR CLUSTER SYNCSLOTS ACK should only be used by slot migration clients".to_owned()
        ))
    );
    // From the primary, anything but ESTABLISH/FINISH is ignored silently.
    let from_primary = CommandRequest {
        from_primary: true,
        ..CommandRequest::default()
    };
    assert_eq!(
        cmd(
            &mut net,
            DST,
            &["CLUSTER", "SYNCSLOTS", "ACK"],
            &from_primary
        ),
        CommandOutcome::NoReply
    );
    // GETSLOTMIGRATIONS arity (§A.3) and an empty log.
    assert_eq!(
        reply(&mut net, SRC, &["CLUSTER", "GETSLOTMIGRATIONS"]),
        Reply::Array(vec![])
    );
    assert_eq!(
        reply(&mut net, SRC, &["cluster", "getslotmigrations", "x"]),
        Reply::Error(
            "ERR wrong number of arguments for 'cluster|getslotmigrations' command".to_owned()
        )
    );
}

#[test]
fn connect_failure_fails_the_export() {
    let mut net = two_primaries();
    let t = id(&net, DST).to_string();
    assert_eq!(
        reply(
            &mut net,
            SRC,
            &[
                "CLUSTER",
                "MIGRATESLOTS",
                "SLOTSRANGE",
                "0",
                "9",
                "NODE",
                &t
            ]
        ),
        Reply::ok()
    );
    let job = net.nodes[SRC]
        .migrations()
        .jobs()
        .next()
        .map(|j| *j.name())
        .unwrap();
    let now = net.now;
    net.nodes[SRC].handle_migration(
        MigrationInput::ConnectFailed {
            job,
            error: "Connection refused".to_owned(),
        },
        now,
    );
    net.drain();
    // §A.10.
    assert_eq!(
        job_state(&net, SRC, JobKind::Export),
        (
            JobState::Failed,
            Some("Unable to connect to target node: Connection refused".to_owned())
        )
    );
}

#[test]
fn promoted_replica_fails_the_tracked_import_and_cleans_up() {
    let mut net = Net::new(3, NT);
    net.add_slots(SRC, 0, 8191);
    net.add_slots(DST, 8192, 16383);
    net.meet(SRC, DST);
    net.meet(SRC, 2);
    assert!(net.run_until(10_000, |n| n.fully_meshed()));
    let p = id(&net, DST);
    net.replicate(2, &p);
    net.drain();
    assert!(net.run_until(10_000, |n| {
        n.nodes[DST]
            .topology()
            .node(n.nodes[2].myself_id())
            .is_some_and(|r| r.is_replica())
            && n.nodes.iter().all(|x| x.cluster_state_ok())
    }));
    let mut plane = Plane::new(3);
    plane.auto_snapshot = false;
    assert_eq!(migrate(&mut net, &mut plane, 0, 99), Reply::ok());
    // §A.5/§A.7: the replica tracks the import from its primary's ESTABLISH, slots hidden.
    let tracked = net.nodes[2]
        .migrations()
        .jobs()
        .next()
        .expect("tracking job");
    assert_eq!(tracked.state(), JobState::OccurringOnPrimary);
    assert!(tracked.is_tracking_only());
    assert_eq!(plane.hidden[2], slots(0, 99));
    for s in 0..100u16 {
        plane.keys[2].insert(s, 10);
    }
    // The replica takes over its shard (no votes needed, §13.1 TAKEOVER).
    assert_eq!(
        reply(&mut net, 2, &["CLUSTER", "FAILOVER", "TAKEOVER"]),
        Reply::ok()
    );
    plane.pump(&mut net);
    assert!(net.nodes[2].topology().myself().is_primary());
    // §A.11: "If the new primary knew about the import it fails it on promotion (A failover
    // occurred during slot import), cleans up and emits FINISH".
    assert_eq!(
        job_state(&net, 2, JobKind::Import),
        (
            JobState::Failed,
            Some("A failover occurred during slot import".to_owned())
        )
    );
    assert!(plane.requests(2).any(|r| matches!(r,
        MigrationRequest::DropSlotKeys { slots: s } if *s == slots(0, 99))));
    assert!(plane.keys[2].is_empty());
    assert!(plane.hidden[2].is_empty());
    assert!(plane.requests(2).any(|r| matches!(
        r,
        MigrationRequest::Propagate {
            message: SyncSlots::Finish {
                state: FinishState::Failed,
                ..
            }
        }
    )));
}

#[test]
fn aof_replay_tracks_an_import_through_the_executor() {
    let mut net = two_primaries();
    let req = CommandRequest {
        from_aof: true,
        ..CommandRequest::default()
    };
    let name = "a".repeat(40);
    let establish = [
        "CLUSTER",
        "SYNCSLOTS",
        "ESTABLISH",
        "NAME",
        &name,
        "SLOTSRANGE",
        "0",
        "9",
    ];
    assert_eq!(
        cmd(&mut net, DST, &establish, &req),
        CommandOutcome::Reply(Reply::ok())
    );
    // §A.16: an ESTABLISH replayed from the AOF creates a tracking job...
    let (state, _) = job_state(&net, DST, JobKind::Import);
    assert_eq!(state, JobState::OccurringOnPrimary);
    let finish = [
        "CLUSTER",
        "SYNCSLOTS",
        "FINISH",
        "STATE",
        "success",
        "NAME",
        &name,
    ];
    assert_eq!(
        cmd(&mut net, DST, &finish, &req),
        CommandOutcome::Reply(Reply::ok())
    );
    // ... and a later FINISH closes it.
    assert_eq!(
        job_state(&net, DST, JobKind::Import),
        (JobState::Success, None)
    );
    let Reply::Array(e) = reply(&mut net, DST, &["CLUSTER", "GETSLOTMIGRATIONS"]) else {
        panic!()
    };
    // Tracking-only entries omit target_node and source_node (§A.3: 10 fields in 9.1).
    let Reply::Map(m) = &e[0] else { panic!() };
    assert_eq!(m.len(), 10);
    assert_eq!(field(&e[0], "slot_ranges"), &Reply::bulk("0-9"));
}

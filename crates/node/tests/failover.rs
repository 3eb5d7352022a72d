//! The epoch layer wired into ClusterNode, end to end over the in-memory harness: automatic
//! failover (§12), votes gated on their persist (§12.3 rule 7), UPDATE to a stale primary
//! (§11.3, §8 step 12), manual failover default and TAKEOVER (§13), and readiness fed by the
//! host's replication report (health crate). Expected values come from the facts sheet
//! `shared/spec/cluster-bus.md`.

mod common;

use common::{ip, port, Net};
use ferrocluster_bus::{msg_flags, Body, Message, MessageType};
use ferrocluster_node::epoch::FailoverMode as MfMode;
use ferrocluster_node::{
    CommandRequest, EpochEvent, Millis, NodeFlags, NodeId, Notice, Output, ReplLink,
    ReplicationState, RequestId,
};
use ferrocluster_slot::{Slot, SlotRange, SlotSet};

const NT: u64 = 2000; // cluster-node-timeout (ms)

fn slots(a: u16, b: u16) -> SlotSet {
    let mut s = SlotSet::new();
    s.insert_range(SlotRange::new(Slot::new(a).unwrap(), Slot::new(b).unwrap()).unwrap());
    s
}

fn id(net: &Net, i: usize) -> NodeId {
    *net.nodes[i].myself_id()
}

/// Three primaries covering all slots (nodes 0–2) and node 3 a replica of node 0, fully
/// meshed, every node seeing node 3 as node 0's replica, state ok everywhere. Node 0 reports
/// offset 100 and node 3 a synced link at offset 100.
fn cluster_with_replica() -> Net {
    let mut net = Net::new(4, NT);
    net.add_slots(0, 0, 5460);
    net.add_slots(1, 5461, 10922);
    net.add_slots(2, 10923, 16383);
    net.meet(0, 1);
    net.meet(0, 2);
    net.meet(0, 3);
    assert!(net.run_until(10_000, |n| n.fully_meshed()), "no full mesh");
    let p = id(&net, 0);
    net.replicate(3, &p);
    net.drain();
    assert!(net.run_until(10_000, |n| {
        (0..3).all(|i| {
            n.nodes[i]
                .topology()
                .node(n.nodes[3].myself_id())
                .is_some_and(|r| r.is_replica() && r.primary == Some(p))
        }) && n.nodes.iter().all(|x| x.cluster_state_ok())
    }));
    report(&mut net, 0, 100, ReplLink::Down);
    let now = net.now;
    report(
        &mut net,
        3,
        100,
        ReplLink::Up {
            last_interaction: now,
        },
    );
    net
}

fn report(net: &mut Net, i: usize, offset: u64, link: ReplLink) {
    let now = net.now;
    net.nodes[i].handle_replication(ReplicationState { offset, link }, now);
    net.drain();
}

/// Messages of a type sent by node `from`: (log index, receiver, message).
fn sent_by(net: &Net, from: usize, t: MessageType) -> Vec<(usize, Option<usize>, Message)> {
    net.wire
        .iter()
        .filter(|(_, f, _, m)| *f == from && m.message_type() == t)
        .map(|(i, _, to, m)| (*i, *to, m.clone()))
        .collect()
}

/// The nodes.conf text of node `i`'s last Persist before log index `before`.
fn persisted_before(net: &Net, i: usize, before: usize) -> String {
    net.log[..before]
        .iter()
        .rev()
        .find_map(|(n, o)| match o {
            Output::Persist { contents, .. } if *n == i => {
                Some(String::from_utf8(contents.clone()).unwrap())
            }
            _ => None,
        })
        .expect("a persist precedes it")
}

/// The `vars` line value of `name` in a nodes.conf text (§18.1).
fn var(conf: &str, name: &str) -> u64 {
    let line = conf.lines().find(|l| l.starts_with("vars ")).unwrap();
    let words: Vec<&str> = line.split(' ').collect();
    let at = words.iter().position(|w| *w == name).unwrap();
    words[at + 1].parse().unwrap()
}

fn events_of(net: &Net, i: usize) -> Vec<Output> {
    net.events
        .iter()
        .filter(|(n, _)| *n == i)
        .map(|(_, e)| e.clone())
        .collect()
}

fn primary_of(net: &Net, viewer: usize, slot: u16) -> Option<NodeId> {
    net.nodes[viewer]
        .topology()
        .slot_owner(Slot::new(slot).unwrap())
        .copied()
}

/// Kills node 0 and reports node 3's replication link down from now on.
fn fail_primary(net: &mut Net) {
    net.isolate(0);
    let now = net.now;
    report(net, 3, 100, ReplLink::DownSince(now));
}

#[test]
fn automatic_failover_end_to_end() {
    let mut net = cluster_with_replica();
    let old_max = (0..3)
        .map(|i| net.nodes[i].topology().myself().config_epoch)
        .max()
        .unwrap();
    fail_primary(&mut net);
    let r = id(&net, 3);
    assert!(
        net.run_until(20_000, |n| n.nodes[3].topology().myself().is_primary()),
        "the replica never won"
    );
    // §12.2: currentEpoch + 1, persisted, then FAILOVER_AUTH_REQUEST to every node with a
    // link; the persist carrying the new currentEpoch comes before it.
    let reqs = sent_by(&net, 3, MessageType::FailoverAuthRequest);
    assert!(!reqs.is_empty());
    let election = reqs[0].2.full_header().unwrap().current_epoch;
    let conf = persisted_before(&net, 3, reqs[0].0);
    assert_eq!(var(&conf, "currentEpoch"), election);
    assert!(!reqs[0]
        .2
        .full_header()
        .unwrap()
        .has_mflags(msg_flags::FORCEACK));
    // §12.3 rule 7: each voter persisted lastVoteEpoch = the election epoch before its ACK.
    for v in [1, 2] {
        let acks = sent_by(&net, v, MessageType::FailoverAuthAck);
        assert_eq!(acks.len(), 1, "voter {v}");
        assert_eq!(acks[0].1, Some(3));
        let conf = persisted_before(&net, v, acks[0].0);
        assert_eq!(var(&conf, "lastVoteEpoch"), election);
        assert!(events_of(&net, v).contains(&Output::Notice(Notice::Epoch(
            EpochEvent::VoteGranted {
                to: r,
                epoch: ferrocluster_topology::CurrentEpoch(election),
            }
        ))));
    }
    // §12.2 won: configEpoch = the election epoch, larger than every configEpoch before.
    let me = net.nodes[3].topology().myself();
    assert_eq!(me.config_epoch.get(), election);
    assert!(me.config_epoch > old_max);
    assert_eq!(me.slots(), &slots(0, 5460));
    let evs = events_of(&net, 3);
    assert!(evs.contains(&Output::BecamePrimary));
    assert!(
        evs.contains(&Output::Notice(Notice::Epoch(EpochEvent::ElectionWon(
            ferrocluster_topology::CurrentEpoch(election)
        ))))
    );
    // §12.5: a PONG to all after the persist of the new configuration; it carries the slots.
    let won_at = net
        .log
        .iter()
        .position(|(n, o)| *n == 3 && *o == Output::BecamePrimary)
        .unwrap();
    let pongs: Vec<_> = sent_by(&net, 3, MessageType::Pong)
        .into_iter()
        .filter(|(i, _, _)| *i > won_at)
        .collect();
    let to: std::collections::BTreeSet<_> = pongs.iter().filter_map(|p| p.1).collect();
    assert!(to.contains(&1) && to.contains(&2), "{to:?}");
    let h = pongs[0].2.full_header().unwrap().clone();
    assert_eq!(h.config_epoch, election);
    assert_eq!(h.myslots, slots(0, 5460));
    assert!(h.replicaof.is_none_or(|r| r.is_zero()));
    let conf = persisted_before(&net, 3, pongs[0].0);
    assert!(conf.contains(&format!("{r} ")) && conf.contains(" 0-5460"));
    // The others' slot owners changed (§11.2: higher configEpoch wins).
    assert!(net.run_until(5_000, |n| (1..3)
        .all(|v| primary_of(n, v, 0) == Some(r) && primary_of(n, v, 5460) == Some(r))));
}

#[test]
fn vote_waits_for_its_persist() {
    let mut net = cluster_with_replica();
    fail_primary(&mut net);
    let p = id(&net, 0);
    // From now on node 1 writes nodes.conf but the host does not acknowledge it (from before
    // the FAIL: the sole replica asks for votes as soon as it marks its primary FAIL).
    net.hold_persist.insert(1);
    assert!(net.run_until(20_000, |n| n.nodes[3]
        .topology()
        .node(&p)
        .is_some_and(|x| x.is_fail())));
    assert!(net.run_until(5_000, |n| n.nodes[1].topology().last_vote_epoch.get() > 0));
    let voted = net.nodes[1].topology().last_vote_epoch.get();
    // The vote is decided (lastVoteEpoch set, written in the pending persist) but not sent.
    assert!(sent_by(&net, 1, MessageType::FailoverAuthAck).is_empty());
    let conf = String::from_utf8(net.persisted[1].clone().unwrap()).unwrap();
    assert_eq!(var(&conf, "lastVoteEpoch"), voted);
    // One vote (node 2's) is not the quorum of 2 out of 3 (§12.2): still a replica.
    assert!(!net.nodes[3].topology().myself().is_primary());
    net.release_persists(1);
    let acks = sent_by(&net, 1, MessageType::FailoverAuthAck);
    assert_eq!(acks.len(), 1);
    assert_eq!(acks[0].2.full_header().unwrap().current_epoch, voted);
    assert!(net.run_until(2_000, |n| n.nodes[3].topology().myself().is_primary()));
}

#[test]
fn update_makes_the_stale_primary_a_replica_of_the_winner() {
    let mut net = cluster_with_replica();
    fail_primary(&mut net);
    let r = id(&net, 3);
    assert!(net.run_until(20_000, |n| (1..3).all(|v| primary_of(n, v, 0) == Some(r))));
    let winner_epoch = net.nodes[3].topology().myself().config_epoch;
    // Node 0 comes back still claiming 0-5460 with its old configEpoch.
    let before = net.wire.len();
    net.heal(0);
    assert!(net.run_until(20_000, |n| n.nodes[0].topology().myself().is_replica()));
    // Somebody told it with an UPDATE about node 3 (§11.3): its ID, configEpoch and slots.
    let updates: Vec<_> = net.wire[before..]
        .iter()
        .filter(|(_, _, to, m)| *to == Some(0) && m.message_type() == MessageType::Update)
        .collect();
    assert!(!updates.is_empty(), "no UPDATE reached node 0");
    let Body::Update(u) = &updates[0].3.body else {
        unreachable!()
    };
    assert_eq!(u.name.as_bytes(), r.as_bytes());
    assert_eq!(u.config_epoch, winner_epoch.get());
    assert_eq!(u.slots, slots(0, 5460));
    // Node 0 lost its last slot to a node of its own shard: it follows it (§11.2), with a
    // partial sync allowed (same shard).
    let me = net.nodes[0].topology().myself();
    assert_eq!(me.primary, Some(r));
    assert_eq!(me.slot_count(), 0);
    let evs = events_of(&net, 0);
    assert!(evs.contains(&Output::Notice(Notice::BecameReplica { primary: r })));
    assert!(evs.contains(&Output::ReplicateFrom {
        primary: r,
        ip: Some(ip(3)),
        port: port(3),
        tls_port: 0,
        full_sync: false,
    }));
}

/// CLUSTER FAILOVER `args` on node `i`: the reply, at once or after its persist.
fn failover(net: &mut Net, i: usize, args: &[&str]) -> Vec<u8> {
    let mut argv = vec!["FAILOVER"];
    argv.extend_from_slice(args);
    let (out, id) = net.command(i, &argv);
    net.reply_of(i, id, &out).unwrap().to_resp2()
}

#[test]
fn manual_failover_default_mode() {
    let mut net = cluster_with_replica();
    let (p, r) = (id(&net, 0), id(&net, 3));
    let t = net.now;
    let start = net.wire.len();
    assert_eq!(failover(&mut net, 3, &[]), b"+OK\r\n");
    // §13.1: MFSTART to the primary.
    let mf: Vec<_> = net.wire[start..]
        .iter()
        .filter(|(_, f, _, m)| *f == 3 && m.message_type() == MessageType::MfStart)
        .collect();
    assert_eq!(mf.len(), 1);
    assert_eq!(mf[0].2, Some(0));
    // §13.2: the primary pauses writes for 2 × 5000 ms and PINGs back with PAUSED and its
    // final offset.
    let evs = events_of(&net, 0);
    assert!(evs.contains(&Output::PauseWrites {
        until: Millis(t.0 + 10_000)
    }));
    assert!(evs.contains(&Output::Notice(Notice::Epoch(
        EpochEvent::ManualFailoverRequested(r)
    ))));
    let ping = net.wire[start..]
        .iter()
        .find(|(_, f, to, m)| *f == 0 && *to == Some(3) && m.message_type() == MessageType::Ping)
        .expect("the primary PINGs its replica");
    let h = ping.3.full_header().unwrap();
    assert!(h.has_mflags(msg_flags::PAUSED));
    assert_eq!(h.offset, 100);
    assert_eq!(
        net.nodes[3].epoch().manual_failover().primary_offset(),
        Some(100)
    );
    // Offsets equal → the election starts without delay, with FORCEACK; votes are granted
    // although the primary is not FAIL; the replica takes over.
    assert!(net.run_until(3_000, |n| n.nodes[3].topology().myself().is_primary()));
    let reqs = sent_by(&net, 3, MessageType::FailoverAuthRequest);
    assert!(!reqs.is_empty());
    assert!(reqs
        .iter()
        .all(|(_, _, m)| m.full_header().unwrap().has_mflags(msg_flags::FORCEACK)));
    assert!(!net.nodes[1].topology().node(&p).unwrap().is_fail());
    // The old primary hears the new claims, becomes a replica and unpauses writes.
    assert!(net.run_until(3_000, |n| n.nodes[0].topology().myself().primary == Some(r)));
    let evs = events_of(&net, 0);
    assert!(evs.contains(&Output::UnpauseWrites));
    assert!(evs.contains(&Output::Notice(Notice::BecameReplica { primary: r })));
    // Every header the primary sent while serving the manual failover carried PAUSED (§13.2).
    let replica_at = net
        .log
        .iter()
        .position(|(n, o)| *n == 0 && *o == Output::Notice(Notice::BecameReplica { primary: r }))
        .unwrap();
    let paused: Vec<bool> = net.wire[start..]
        .iter()
        .filter(|(i, f, _, m)| *f == 0 && *i < replica_at && !m.is_light())
        .map(|(_, _, _, m)| m.full_header().unwrap().has_mflags(msg_flags::PAUSED))
        .collect();
    assert!(paused.len() >= 2 && paused.iter().all(|p| *p), "{paused:?}");
    // After it became a replica, no more PAUSED.
    assert!(net
        .wire
        .iter()
        .filter(|(i, f, _, m)| *f == 0 && *i > replica_at && !m.is_light())
        .all(|(_, _, _, m)| !m.full_header().unwrap().has_mflags(msg_flags::PAUSED)));
}

/// Issue 16 item 1: the host pauses when it acts on `PauseWrites`, after the MFSTART step;
/// writes it accepted meanwhile move its offset. The primary announces nothing with PAUSED
/// until the host confirms the pause with its final offset, and then announces that one, so
/// the replica waits for the right offset (it keeps the first PAUSED offset it hears).
#[test]
fn manual_failover_announces_the_offset_the_host_confirmed_after_pausing() {
    let mut net = cluster_with_replica();
    net.hold_pause.insert(0);
    let start = net.wire.len();
    assert_eq!(failover(&mut net, 3, &[]), b"+OK\r\n");
    assert!(events_of(&net, 0)
        .iter()
        .any(|e| matches!(e, Output::PauseWrites { .. })));
    // Before the host confirmed, no header of the primary carries PAUSED.
    net.run_for(300);
    assert!(net.wire[start..]
        .iter()
        .filter(|(_, f, _, m)| *f == 0 && !m.is_light())
        .all(|(_, _, _, m)| !m.full_header().unwrap().has_mflags(msg_flags::PAUSED)));
    assert_eq!(
        net.nodes[3].epoch().manual_failover().primary_offset(),
        None
    );
    // 40 bytes of writes were accepted before the pause held; the replica got them too.
    let now = net.now;
    report(
        &mut net,
        3,
        140,
        ReplLink::Up {
            last_interaction: now,
        },
    );
    net.nodes[0].handle_writes_paused(140, now);
    net.drain();
    let ping = net.wire[start..]
        .iter()
        .find(|(_, f, to, m)| {
            *f == 0
                && *to == Some(3)
                && m.message_type() == MessageType::Ping
                && m.full_header().unwrap().has_mflags(msg_flags::PAUSED)
        })
        .expect("the primary PINGs its replica once the pause holds");
    assert_eq!(ping.3.full_header().unwrap().offset, 140);
    assert_eq!(
        net.nodes[3].epoch().manual_failover().primary_offset(),
        Some(140)
    );
    assert!(net.run_until(3_000, |n| n.nodes[3].topology().myself().is_primary()));
}

#[test]
fn manual_failover_takeover_needs_no_votes() {
    let mut net = cluster_with_replica();
    let r = id(&net, 3);
    let old_max = (0..3)
        .map(|i| net.nodes[i].topology().myself().config_epoch)
        .max()
        .unwrap();
    let start = net.log.len();
    assert_eq!(failover(&mut net, 3, &["TAKEOVER"]), b"+OK\r\n");
    // §13.1 TAKEOVER: configEpoch bump without consensus (§11.6) and immediate take-over.
    let me = net.nodes[3].topology().myself();
    assert!(me.is_primary());
    assert!(me.config_epoch > old_max);
    assert_eq!(me.slots(), &slots(0, 5460));
    assert!(sent_by(&net, 3, MessageType::FailoverAuthRequest).is_empty());
    let evs = events_of(&net, 3);
    assert!(
        evs.contains(&Output::Notice(Notice::ManualFailoverRequested(
            ferrocluster_node::FailoverMode::Takeover
        )))
    );
    assert!(evs.contains(&Output::Notice(Notice::Epoch(
        EpochEvent::ManualFailoverStarted(MfMode::Takeover)
    ))));
    assert!(evs.contains(&Output::Notice(Notice::ConfigEpochBumped(me.config_epoch))));
    assert!(evs.contains(&Output::BecamePrimary));
    // The PONG broadcast left only after the persist of the new configuration.
    let pong = net
        .wire
        .iter()
        .find(|(i, f, _, m)| *i >= start && *f == 3 && m.message_type() == MessageType::Pong);
    let (at, _, _, m) = pong.expect("PONG broadcast");
    assert_eq!(m.full_header().unwrap().config_epoch, me.config_epoch.get());
    let conf = persisted_before(&net, 3, *at);
    assert!(conf.contains(&format!("{r} ")) && conf.contains(" 0-5460"));
    assert!(net.run_until(3_000, |n| (0..3).all(|v| primary_of(n, v, 100) == Some(r))));
}

#[test]
fn failover_force_starts_the_election_at_once() {
    let mut net = cluster_with_replica();
    let start = net.wire.len();
    assert_eq!(failover(&mut net, 3, &["FORCE"]), b"+OK\r\n");
    // §13.1 FORCE: mf_can_start at once, election with no delay and FORCEACK.
    let reqs: Vec<_> = net.wire[start..]
        .iter()
        .filter(|(_, f, _, m)| *f == 3 && m.message_type() == MessageType::FailoverAuthRequest)
        .collect();
    assert!(!reqs.is_empty());
    assert!(reqs[0]
        .3
        .full_header()
        .unwrap()
        .has_mflags(msg_flags::FORCEACK));
    assert!(net.run_until(1_000, |n| n.nodes[3].topology().myself().is_primary()));
}

#[test]
fn failover_on_a_primary_is_refused() {
    let mut net = cluster_with_replica();
    assert_eq!(
        failover(&mut net, 0, &[]),
        b"-ERR You should send CLUSTER FAILOVER to a replica\r\n".to_vec()
    );
}

#[test]
fn readiness_follows_the_hosts_replication_report() {
    let mut net = Net::new(4, NT);
    net.add_slots(0, 0, 5460);
    net.add_slots(1, 5461, 10922);
    net.add_slots(2, 10923, 16383);
    for j in 1..4 {
        net.meet(0, j);
    }
    assert!(net.run_until(10_000, |n| n.fully_meshed()));
    let (p, r) = (id(&net, 0), id(&net, 3));
    net.replicate(3, &p);
    net.drain();
    assert!(net.run_until(10_000, |n| n.nodes.iter().all(|x| x.cluster_state_ok())));
    let shard_of = |net: &Net, viewer: usize| {
        net.nodes[viewer]
            .shard_readiness(net.now)
            .into_iter()
            .find(|s| s.primary == p)
            .unwrap()
    };
    // Never synced: not eligible (health crate: offset 0 → not synced), on the replica
    // itself and, from its PING offsets, on its primary.
    for viewer in [3, 0] {
        let s = shard_of(&net, viewer);
        assert!(!s.verdict.is_ready(), "viewer {viewer}");
        assert_eq!(s.replicas[0].node, r);
        assert_eq!(
            s.replicas[0].ineligible.map(|i| i.code()),
            Some("not_synced")
        );
    }
    let q = net.nodes[3].quorum_check(net.now);
    assert_eq!((q.voting_primaries, q.reachable, q.quorum), (3, 3, 2));
    assert!(!net.nodes[3].readiness(net.now).failover_ready());
    // The host reports a completed sync.
    let now = net.now;
    report(
        &mut net,
        3,
        4242,
        ReplLink::Up {
            last_interaction: now,
        },
    );
    let s = shard_of(&net, 3);
    assert_eq!(
        s.verdict,
        ferrocluster_node::health::ShardVerdict::Ready { candidate: r }
    );
    assert_eq!(
        s.replicas[0].evidence,
        ferrocluster_node::health::Evidence::Local
    );
    // The primary learns the offset from the replica's next PING header (§8 step 4).
    assert!(net.run_until(5_000, |n| n.nodes[0]
        .topology()
        .node(&r)
        .is_some_and(|x| x.repl_offset == 4242)));
    assert!(shard_of(&net, 0).verdict.is_ready());
    // The other two shards have no replica: the cluster as a whole is not failover-ready.
    let rd = net.nodes[0].readiness(net.now);
    assert!(!rd.failover_ready());
    assert_eq!(rd.quorum.shards_unable.len(), 2);
    assert!(net.nodes[0].health(net.now).state_ok);
}

/// `argv` (`CLUSTER ...`) on node `i`: the reply, at once or after its persist.
fn cluster(net: &mut Net, i: usize, argv: &[&str]) -> Vec<u8> {
    let (out, id) = net.command(i, &argv[1..]);
    net.reply_of(i, id, &out).unwrap().to_resp2()
}

#[test]
fn equal_config_epochs_are_resolved_by_collisions() {
    // Slots assigned by hand leave every configEpoch at 0; §11.5 makes all but the largest ID
    // move until every primary has its own configEpoch.
    let mut net = cluster_with_replica();
    assert!(net.run_until(10_000, |n| {
        let mut e: Vec<_> = (0..3)
            .map(|i| n.nodes[i].topology().myself().config_epoch)
            .collect();
        e.sort();
        e.dedup();
        e.len() == 3
    }));
    let largest = (0..3)
        .max_by_key(|&i| id(&net, i).as_bytes().to_owned())
        .unwrap();
    assert!(!events_of(&net, largest)
        .iter()
        .any(|e| matches!(e, Output::Notice(Notice::ConfigEpochBumped(_)))));
    // The replica advertises its primary's configEpoch and everyone agrees on it.
    let e0 = net.nodes[0].topology().myself().config_epoch;
    assert!(net.run_until(5_000, |n| (1..4).all(|v| n.nodes[v]
        .topology()
        .node(n.nodes[0].myself_id())
        .is_some_and(|x| x.config_epoch == e0))));
}

#[test]
fn a_slot_taken_with_a_higher_epoch_asks_the_loser_to_delete_its_keys() {
    let mut net = cluster_with_replica();
    let (a, b) = (id(&net, 0), id(&net, 1));
    let a_s = a.to_string();
    let b_s = b.to_string();
    assert_eq!(
        cluster(&mut net, 1, &["CLUSTER", "SETSLOT", "0", "IMPORTING", &a_s]),
        b"+OK\r\n"
    );
    assert_eq!(
        cluster(&mut net, 1, &["CLUSTER", "SETSLOT", "0", "NODE", &b_s]),
        b"+OK\r\n"
    );
    // §11.6: the import finished by SETSLOT NODE bumps node 1's configEpoch; its PONG claims
    // slot 0 with an epoch greater than node 0's, which loses it and drops its keys (§11.2).
    let mut zero = SlotSet::new();
    zero.insert(Slot::new(0).unwrap());
    assert!(net.run_until(2_000, |n| primary_of(n, 0, 0) == Some(b)));
    assert!(events_of(&net, 0).contains(&Output::DeleteSlotKeys(Box::new(zero))));
    assert_eq!(net.nodes[0].topology().myself().slots(), &slots(1, 5460));
    assert!(net.nodes[0].topology().myself().is_primary());
    assert!(net.run_until(2_000, |n| primary_of(n, 2, 0) == Some(b)
        && primary_of(n, 3, 0) == Some(b)));
}

#[test]
fn replica_migrates_to_an_orphaned_primary() {
    // Nodes 0–2 primaries; 3 and 4 replicate 0; 5 replicates 1. When 5 fails, 1 is orphaned
    // (§14): the replica of 0 with the smallest ID moves to 1 after 5000 ms, with a full sync
    // (another shard).
    let mut net = Net::new(6, NT);
    net.add_slots(0, 0, 5460);
    net.add_slots(1, 5461, 10922);
    net.add_slots(2, 10923, 16383);
    for j in 1..6 {
        net.meet(0, j);
    }
    assert!(net.run_until(10_000, |n| n.fully_meshed()));
    let (p0, p1) = (id(&net, 0), id(&net, 1));
    for (r, p) in [(3, p0), (4, p0), (5, p1)] {
        net.replicate(r, &p);
        net.drain();
    }
    assert!(net.run_until(10_000, |n| {
        n.nodes.iter().all(|x| x.cluster_state_ok())
            && (3..6).all(|r| {
                (0..6).all(|v| {
                    n.nodes[v]
                        .topology()
                        .node(n.nodes[r].myself_id())
                        .is_some_and(|x| x.is_replica())
                })
            })
    }));
    let mover = if id(&net, 3).as_bytes() < id(&net, 4).as_bytes() {
        3
    } else {
        4
    };
    let stayer = 7 - mover;
    net.isolate(5);
    let r5 = id(&net, 5);
    assert!(net.run_until(20_000, |n| n.nodes[mover]
        .topology()
        .node(&r5)
        .is_some_and(|x| x.is_fail())));
    let fail_seen = net.now;
    assert!(
        net.run_until(20_000, |n| n.nodes[mover].topology().myself().primary
            == Some(p1)),
        "no migration"
    );
    // Orphaned for more than REPLICA_MIGRATION_DELAY (5000 ms) first (§14 step 5).
    assert!(
        net.now.since(fail_seen) > 5000,
        "{}",
        net.now.since(fail_seen)
    );
    let evs = events_of(&net, mover);
    assert!(evs.contains(&Output::Notice(Notice::Epoch(
        EpochEvent::ReplicaMigration(p1)
    ))));
    assert!(evs.contains(&Output::ReplicateFrom {
        primary: p1,
        ip: Some(ip(1)),
        port: port(1),
        tls_port: 0,
        full_sync: true,
    }));
    assert_eq!(net.nodes[stayer].topology().myself().primary, Some(p0));
    let m = id(&net, mover);
    assert!(net.run_until(5_000, |n| n.nodes[0]
        .topology()
        .node(&m)
        .is_some_and(|x| x.primary == Some(p1))));
}

#[test]
fn auth_request_waits_for_the_bumped_current_epoch_persist() {
    let mut net = cluster_with_replica();
    fail_primary(&mut net);
    let p = id(&net, 0);
    // Held from before the FAIL: the sole replica asks for votes in the step that marks its
    // primary FAIL (Valkey 9.1's best-ranked fast path).
    net.hold_persist.insert(3);
    assert!(net.run_until(20_000, |n| n.nodes[3]
        .topology()
        .node(&p)
        .is_some_and(|x| x.is_fail())));
    assert!(net.run_until(5_000, |n| n.nodes[3].epoch().election().sent()));
    let epoch = net.nodes[3].epoch().election().epoch();
    assert_eq!(net.nodes[3].topology().current_epoch, epoch);
    assert!(sent_by(&net, 3, MessageType::FailoverAuthRequest).is_empty());
    let conf = String::from_utf8(net.persisted[3].clone().unwrap()).unwrap();
    assert_eq!(var(&conf, "currentEpoch"), epoch.get());
    net.release_persists(3);
    let reqs = sent_by(&net, 3, MessageType::FailoverAuthRequest);
    assert!(!reqs.is_empty());
    assert!(reqs
        .iter()
        .all(|(_, _, m)| m.full_header().unwrap().current_epoch == epoch.get()));
    assert!(net.run_until(2_000, |n| n.nodes[3].topology().myself().is_primary()));
}

/// Issue 16 item 14 (BUG-08): after CLUSTER REPLICATE to a new primary, a replica advertises
/// offset 0 — not the offset it had with the old primary — until the host reports the link
/// to the new primary up; then the host's offset again.
#[test]
fn a_repointed_replica_advertises_offset_zero_until_its_first_sync() {
    let mut net = cluster_with_replica();
    let now = net.now;
    report(
        &mut net,
        3,
        268_927,
        ReplLink::Up {
            last_interaction: now,
        },
    );
    net.run_for(NT);
    let seen = |net: &Net| {
        let me = id(net, 3);
        net.nodes[1].topology().node(&me).map(|n| n.repl_offset)
    };
    assert_eq!(seen(&net), Some(268_927));
    let target = id(&net, 1).as_str().to_owned();
    let req = CommandRequest {
        id: RequestId(77),
        ..CommandRequest::default()
    };
    let out = net.nodes[3].cluster_command_argv(
        &["CLUSTER", "REPLICATE", &target],
        &req,
        &common::TestKeys::default(),
        now,
    );
    let start = net.wire.len();
    net.drain();
    assert_eq!(
        net.reply_of(3, req.id, &out).unwrap().to_resp2(),
        b"+OK\r\n"
    );
    assert_eq!(net.nodes[3].topology().myself().repl_offset, 0);
    // The host still reports the old stream's offset while it re-syncs.
    let now = net.now;
    report(&mut net, 3, 268_927, ReplLink::DownSince(now));
    net.run_for(NT);
    assert!(net.wire[start..]
        .iter()
        .filter(|(_, f, _, m)| *f == 3 && !m.is_light())
        .all(|(_, _, _, m)| m.full_header().unwrap().offset == 0));
    assert_eq!(
        seen(&net),
        Some(0),
        "a sibling would rank itself behind the old offset"
    );
    // First sync with the new primary done: its offset is advertised.
    let now = net.now;
    report(
        &mut net,
        3,
        4_096,
        ReplLink::Up {
            last_interaction: now,
        },
    );
    net.run_for(NT);
    assert_eq!(net.nodes[3].topology().myself().repl_offset, 4_096);
    assert_eq!(seen(&net), Some(4_096));
}

#[test]
fn a_sole_replica_asks_for_votes_in_the_step_that_marks_its_primary_fail_and_says_so() {
    // Valkey 9.1: the replica sets MY_PRIMARY_FAIL on itself once its primary is FAIL and
    // advertises it in its headers; being the sole (best-ranked) replica it starts the
    // election with no delay, and the election request carries the flag.
    let mut net = cluster_with_replica();
    fail_primary(&mut net);
    let p = id(&net, 0);
    assert!(net.run_until(20_000, |n| n.nodes[3]
        .topology()
        .node(&p)
        .is_some_and(|x| x.is_fail())));
    let marked = net.now;
    assert!(net.run_until(2_000, |n| n.nodes[3].epoch().election().sent()));
    let reqs = sent_by(&net, 3, MessageType::FailoverAuthRequest);
    let flags = reqs[0].2.full_header().unwrap().flags;
    assert_ne!(flags & NodeFlags::MY_PRIMARY_FAIL.bits(), 0, "{flags:#x}");
    // Scheduled for the moment the primary was marked FAIL (no delay).
    let scheduled: Vec<_> = net
        .events
        .iter()
        .filter_map(|(i, o)| match o {
            Output::Notice(Notice::Epoch(EpochEvent::ElectionScheduled { at, .. })) if *i == 3 => {
                Some(*at)
            }
            _ => None,
        })
        .collect();
    assert_eq!(scheduled.first(), Some(&marked), "{scheduled:?}");
    // The voters mirror the flag from its headers.
    let r = id(&net, 3);
    assert!(net.nodes.iter().take(3).skip(1).all(|n| n
        .topology()
        .node(&r)
        .is_some_and(|x| x.flags.contains(NodeFlags::MY_PRIMARY_FAIL))));
}

/// Issue 37: a node loaded from nodes.conf as a replica tells its host to replicate from its
/// primary (Valkey `clusterCron`: a replica whose replication is off calls
/// `replicationSetPrimary`): one `ReplicateFrom` on its first cron run, with the primary's
/// address from the file and no full sync required, and not again while nothing changes. A
/// node loaded as a primary gets none.
#[test]
fn a_replica_loaded_from_nodes_conf_is_told_to_replicate_on_its_first_cron_run() {
    use ferrocluster_node::ClusterNode;
    let p = "1111111111111111111111111111111111111111";
    let r = "2222222222222222222222222222222222222222";
    let conf = |me_replica: bool| {
        let (pf, rf) = if me_replica {
            ("master", format!("myself,slave {p}"))
        } else {
            ("myself,master", format!("slave {p}"))
        };
        format!(
            "{p} 127.0.0.1:7000@17000 {pf} - 0 0 1 connected 0-16383\n\
             {r} 127.0.0.1:7001@17001 {rf} 0 0 1 connected\n\
             vars currentEpoch 1 lastVoteEpoch 0\n"
        )
    };
    let drain =
        |n: &mut ClusterNode| -> Vec<Output> { std::iter::from_fn(|| n.poll_output()).collect() };
    let replicate_froms = |outs: &[Output]| -> Vec<Output> {
        outs.iter()
            .filter(|o| matches!(o, Output::ReplicateFrom { .. }))
            .cloned()
            .collect()
    };
    let t0 = common::T0;
    let mut replica = ClusterNode::new(
        common::config(1, NT),
        common::CAPS,
        t0,
        1,
        Some(conf(true).as_bytes()),
    )
    .unwrap();
    assert!(replica.topology().myself().is_replica());
    let at_start = drain(&mut replica);
    assert!(replicate_froms(&at_start).is_empty(), "{at_start:?}");
    replica.handle_timeout(t0);
    let first = drain(&mut replica);
    let told = replicate_froms(&first);
    assert_eq!(told.len(), 1, "{first:?}");
    match &told[0] {
        Output::ReplicateFrom {
            primary,
            ip,
            port,
            full_sync,
            ..
        } => {
            assert_eq!(primary.to_string(), p);
            assert_eq!(*ip, Some("127.0.0.1".parse().unwrap()));
            assert_eq!(*port, 7000);
            assert!(!full_sync);
        }
        other => unreachable!("{other:?}"),
    }
    // No BecameReplica notice: the role did not change.
    assert!(
        !first
            .iter()
            .any(|o| matches!(o, Output::Notice(Notice::BecameReplica { .. }))),
        "{first:?}"
    );
    for k in 1..20u64 {
        replica.handle_timeout(Millis(t0.0 + 100 * k));
        let later = drain(&mut replica);
        assert!(replicate_froms(&later).is_empty(), "{later:?}");
    }

    let mut primary = ClusterNode::new(
        common::config(0, NT),
        common::CAPS,
        t0,
        2,
        Some(conf(false).as_bytes()),
    )
    .unwrap();
    for k in 0..20u64 {
        primary.handle_timeout(Millis(t0.0 + 100 * k));
        let outs = drain(&mut primary);
        assert!(replicate_froms(&outs).is_empty(), "{outs:?}");
    }
}

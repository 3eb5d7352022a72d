//! Handler-level tests of ClusterNode through its public API, wired back to back.

mod common;

use common::{ip, port, Net, T0};
use ferrocluster_bus::{decode, msg_flags, node_flags, Body, MessageType, PingExt};
use ferrocluster_node::{
    ClusterConfig, ClusterNode, CommandOutcome, ConfigError, LinkEvent, Millis, Notice, Output,
    Reply,
};
use ferrocluster_topology::NodeFlags;

const NT: u64 = 2000; // cluster-node-timeout used by these tests (ms)

/// Three primaries covering all 16384 slots, fully meshed.
fn three_primaries() -> Net {
    let mut net = Net::new(3, NT);
    net.add_slots(0, 0, 5460);
    net.add_slots(1, 5461, 10922);
    net.add_slots(2, 10923, 16383);
    net.meet(0, 1);
    net.meet(0, 2);
    assert!(net.run_until(10_000, |n| n.fully_meshed()), "no full mesh");
    assert!(net.run_until(10_000, |n| n.nodes.iter().all(|x| x.cluster_state_ok())));
    net
}

#[test]
fn meet_handshake_reveals_real_ids_on_both_sides() {
    let mut net = Net::new(2, NT);
    net.meet(0, 1);
    // Before the cron runs nothing is connected: node 0 holds a HANDSHAKE|MEET node (§7.3).
    let hs = net.nodes[0]
        .topology()
        .nodes()
        .find(|n| !n.is_myself())
        .unwrap()
        .clone();
    assert!(hs.flags.contains(NodeFlags::HANDSHAKE | NodeFlags::MEET));
    assert_ne!(hs.id(), net.nodes[1].myself_id());
    assert!(net.run_until(3_000, |n| n.fully_meshed()));
    for (a, b) in [(0, 1), (1, 0)] {
        let id = *net.nodes[b].myself_id();
        let n = net.nodes[a].topology().node(&id).unwrap();
        assert!(
            !n.flags.intersects(NodeFlags::HANDSHAKE | NodeFlags::MEET),
            "{:?}",
            n.flags
        );
        assert!(n.is_primary());
        assert_eq!(n.ip, Some(ip(b)));
        assert_eq!(n.port, port(b));
        assert_eq!(n.bus_port, port(b) + 10000);
    }
    assert!(net.events.iter().any(|(i, e)| *i == 0
        && *e == Output::Notice(Notice::HandshakeCompleted(*net.nodes[1].myself_id()))));
}

#[test]
fn gossip_introduces_a_third_node() {
    let mut net = Net::new(3, NT);
    net.meet(0, 1);
    net.meet(1, 2);
    // Node 0 never met node 2: it can learn it only from node 1's gossip (§7.4).
    assert!(net.run_until(10_000, |n| n.knows(0, 2) && n.knows(2, 0)));
    let c = *net.nodes[2].myself_id();
    assert!(net
        .events
        .iter()
        .any(|(i, e)| *i == 0 && *e == Output::Notice(Notice::NodeDiscovered(c))));
    assert!(net.run_until(10_000, |n| n.fully_meshed()));
}

#[test]
fn lost_framing_closes_only_that_link() {
    let mut net = Net::new(2, NT);
    net.meet(0, 1);
    assert!(net.run_until(3_000, |n| n.fully_meshed()));
    let before = net.nodes[1].nodes_conf();
    let now = net.now;
    let bad = net.nodes[1].handle_accept(ip(5), now);
    let other = net.nodes[1].handle_accept(ip(6), now);
    // Not "RCmb": framing is lost (§2 step 2), the link is closed.
    net.nodes[1].handle_link_bytes(bad, b"GET / HTTP/1.1\r\n\r\n", now);
    let outs: Vec<Output> = std::iter::from_fn(|| net.nodes[1].poll_output()).collect();
    assert_eq!(outs.first(), Some(&Output::Close { link: bad }));
    assert!(
        matches!(outs.get(1), Some(Output::Notice(Notice::FramingLost { link, .. })) if *link == bad)
    );
    assert_eq!(outs.len(), 2, "{outs:?}");
    // Later bytes on the closed link are ignored; the other link still works.
    net.nodes[1].handle_link_bytes(bad, b"RCmb", now);
    assert_eq!(net.nodes[1].poll_output(), None);
    assert_eq!(net.nodes[1].nodes_conf(), before);
    assert_eq!(net.nodes[1].stats().framing_lost, 1);
    // A well-framed but invalid frame (ver 2) is dropped alone: the link stays (§2).
    let mut frame = net.sent.iter().find(|(i, _, _)| *i == 0).unwrap().2.clone();
    frame[9] = 2;
    net.nodes[1].handle_link_bytes(other, &frame, now);
    let outs: Vec<Output> = std::iter::from_fn(|| net.nodes[1].poll_output()).collect();
    assert!(
        matches!(&outs[..], [Output::Notice(Notice::FrameDropped { link, .. })] if *link == other)
    );
    assert_eq!(net.nodes[1].stats().dropped_frames, 1);
    assert_eq!(net.nodes[1].nodes_conf(), before);
    assert!(net.nodes[1].topology().len() == 2);
}

#[test]
fn pfail_only_after_node_timeout_of_silence() {
    let mut net = Net::new(3, NT);
    net.meet(0, 1);
    net.meet(0, 2);
    assert!(net.run_until(10_000, |n| n.fully_meshed()));
    net.run_for(2_000);
    let c = *net.nodes[2].myself_id();
    net.isolate(2);
    let cut_at = net.now;
    let pfail = |n: &Net| n.nodes[0].topology().node(&c).unwrap().is_pfail();
    assert!(net.run_until(4 * NT, pfail));
    // §9.1: a ping must have waited more than NODE_TIMEOUT, so not before cut + NT.
    let (_, ev_time) = (0, net.now);
    assert!(
        ev_time.since(cut_at) > NT,
        "PFAIL after {} ms",
        ev_time.since(cut_at)
    );
    assert!(net
        .events
        .iter()
        .any(|(i, e)| *i == 0 && *e == Output::Notice(Notice::NodePfail(c))));
    // Slot-less primaries: no failure reports count (no voting primaries), so no FAIL.
    net.run_for(3 * NT);
    assert!(!net.nodes[0].topology().node(&c).unwrap().is_fail());
}

#[test]
fn fail_with_quorum_is_broadcast_then_cleared_after_undo_time() {
    let mut net = three_primaries();
    assert!(net.nodes.iter().all(|n| n.topology().cluster_size() == 3));
    let c = *net.nodes[2].myself_id();
    net.isolate(2);
    // Quorum = 3/2 + 1 = 2 (§9.3): node 0 (itself a voting primary) plus node 1's report.
    assert!(net.run_until(10 * NT, |n| (0..2).all(|i| n.nodes[i]
        .topology()
        .node(&c)
        .unwrap()
        .is_fail())));
    let fail_at = net.now;
    assert!(net
        .events
        .iter()
        .any(|(_, e)| *e == Output::Notice(Notice::NodeFail(c))));
    let fail_sent: u64 = (0..2).map(|i| net.nodes[i].stats().sent[3]).sum();
    assert!(fail_sent >= 1, "a FAIL message was broadcast");
    // Slots of a FAIL owner: full coverage lost, state fail (§10 step 2).
    assert!(net.run_until(NT, |n| !n.nodes[0].cluster_state_ok()));
    assert!(net.nodes[0]
        .cluster_info()
        .starts_with("cluster_state:fail\r\n"));
    // Heal: a voting primary's FAIL is cleared by a PONG only after 2 x NODE_TIMEOUT (§9.4).
    net.heal(2);
    assert!(net.run_until(10 * NT, |n| !n.nodes[0]
        .topology()
        .node(&c)
        .unwrap()
        .is_fail()));
    assert!(
        net.now.since(fail_at) > 2 * NT,
        "cleared after {} ms",
        net.now.since(fail_at)
    );
    assert!(net
        .events
        .iter()
        .any(|(i, e)| *i == 0 && *e == Output::Notice(Notice::NodeFailCleared(c))));
    assert!(net.run_until(10 * NT, |n| n.nodes.iter().all(|x| x.cluster_state_ok())));
}

#[test]
fn fail_message_marks_node_and_replica_fail_clears_at_once() {
    // 3 voting primaries + a replica of node 0.
    let mut net = Net::new(4, NT);
    net.add_slots(0, 0, 5460);
    net.add_slots(1, 5461, 10922);
    net.add_slots(2, 10923, 16383);
    for b in 1..4 {
        net.meet(0, b);
    }
    assert!(net.run_until(10_000, |n| n.fully_meshed()));
    let p = *net.nodes[0].myself_id();
    net.replicate(3, &p);
    net.drain();
    let r = *net.nodes[3].myself_id();
    assert!(net.run_until(5_000, |n| n.nodes[1]
        .topology()
        .node(&r)
        .unwrap()
        .is_replica()));
    net.isolate(3);
    assert!(net.run_until(10 * NT, |n| (0..3).all(|i| n.nodes[i]
        .topology()
        .node(&r)
        .unwrap()
        .is_fail())));
    // A replica's FAIL is cleared by the first PONG (§9.4), no 2 x NODE_TIMEOUT wait.
    net.heal(3);
    let healed = net.now;
    assert!(net.run_until(10 * NT, |n| !n.nodes[0]
        .topology()
        .node(&r)
        .unwrap()
        .is_fail()));
    assert!(net.now.since(healed) <= 2 * NT);
    // Losing a replica does not change coverage or quorum.
    assert!(net.nodes[0].cluster_state_ok());
}

#[test]
fn minority_side_goes_fail() {
    let mut net = three_primaries();
    // Node 2 alone: reachable 1 < quorum 2 (§10 step 4).
    net.isolate(2);
    assert!(net.run_until(10 * NT, |n| !n.nodes[2].cluster_state_ok()));
    let info = net.nodes[2].cluster_info();
    assert!(info.contains("cluster_size:3\r\n"), "{info}");
}

#[test]
fn persisted_nodes_conf_reloads_into_the_same_identity() {
    let mut net = three_primaries();
    net.run_for(1_000);
    let saved = net.persisted[0]
        .clone()
        .expect("node 0 persisted its config");
    let text = String::from_utf8(saved.clone()).unwrap();
    // §18.1: a `vars` line closes the file; myself's line carries `myself,master`.
    assert!(
        text.lines()
            .last()
            .unwrap()
            .starts_with("vars currentEpoch "),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("myself,master") && l.ends_with("0-5460")),
        "{text}"
    );
    let again = ClusterNode::new(
        common::config(0, NT),
        common::CAPS,
        net.now,
        99,
        Some(&saved),
    )
    .unwrap();
    assert_eq!(again.myself_id(), net.nodes[0].myself_id());
    assert_eq!(again.topology().len(), 3);
    for n in net.nodes[0].topology().nodes() {
        let m = again.topology().node(n.id()).unwrap();
        assert_eq!(m.slots(), n.slots());
        assert_eq!(m.shard_id, n.shard_id);
    }
}

#[test]
fn config_validation_errors() {
    assert_eq!(ClusterConfig::default().validate(), Ok(()));
    let c = ClusterConfig {
        port: 55536,
        ..ClusterConfig::default()
    };
    assert_eq!(c.validate(), Err(ConfigError::PortTooHighForBusPort(55536)));
    let c = ClusterConfig {
        port: 55535,
        ..ClusterConfig::default()
    };
    assert_eq!(c.bus_port(), 65535);
    assert!(c.validate().is_ok());
    let c = ClusterConfig {
        port: 60000,
        cluster_port: 16000,
        ..ClusterConfig::default()
    };
    assert!(c.validate().is_ok());
    let c = ClusterConfig {
        node_timeout_ms: 0,
        ..ClusterConfig::default()
    };
    assert_eq!(c.validate(), Err(ConfigError::NodeTimeoutZero));
    let c = ClusterConfig {
        announce_hostname: Some("a b".into()),
        ..ClusterConfig::default()
    };
    assert!(matches!(
        c.validate(),
        Err(ConfigError::AnnounceHostname(_))
    ));
    let c = ClusterConfig {
        announce_human_nodename: Some("x,y".into()),
        ..ClusterConfig::default()
    };
    assert!(matches!(
        c.validate(),
        Err(ConfigError::AnnounceHumanNodename(_))
    ));
    assert!(ClusterNode::new(
        ClusterConfig {
            node_timeout_ms: 0,
            ..ClusterConfig::default()
        },
        common::CAPS,
        T0,
        1,
        None
    )
    .is_err());
    // Valkey defaults (§1 table).
    let d = ClusterConfig::default();
    assert_eq!(
        (d.node_timeout_ms, d.blacklist_ttl_secs, d.migration_barrier),
        (15_000, 60, 1)
    );
    assert!(d.require_full_coverage && !d.allow_reads_when_down && d.allow_replica_migration);
    assert_eq!(d.replica_validity_factor, 10);
}

#[test]
fn emitted_ping_carries_the_spec_fields() {
    let mut net = Net::new(2, NT);
    net.meet(0, 1);
    assert!(net.run_until(5_000, |n| n.fully_meshed()));
    net.run_for(NT);
    let a = *net.nodes[0].myself_id();
    let a_shard = net.nodes[0].topology().myself().shard_id;
    let pings: Vec<_> = net
        .sent
        .iter()
        .filter(|(i, _, _)| *i == 0)
        .filter_map(|(_, _, b)| decode(b).ok())
        .filter(|m| m.message_type() == MessageType::Ping)
        .collect();
    assert!(!pings.is_empty());
    for m in &pings {
        let h = m.full_header().unwrap();
        assert_eq!(h.sender.as_bytes(), a.as_bytes());
        // MYSELF|PRIMARY, plus LIGHT_HDR_SUPPORTED that V8 always advertises (§5.1).
        assert_eq!(
            h.flags,
            node_flags::MYSELF | node_flags::PRIMARY | node_flags::LIGHT_HDR_SUPPORTED
        );
        assert!(
            h.has_mflags(msg_flags::EXT_DATA),
            "EXT_DATA on every PING (§6.3)"
        );
        assert_eq!((h.port, h.cport, h.pport), (7000, 17000, 0));
        assert!(h.replicaof.is_none());
        assert!(h.myip.is_unset());
    }
    // Once node 1 has advertised EXT_DATA, PINGs to it carry SHARDID last (§6.3).
    let last = pings.last().unwrap();
    let g = last.body.gossip().unwrap();
    match g.extensions.last() {
        Some(PingExt::ShardId(s)) => assert_eq!(s.as_bytes(), a_shard.as_bytes()),
        other => panic!("expected SHARDID, got {other:?}"),
    }
    // With 2 nodes, wanted = min(max(3, 2/10), 2 - 2) = 0 gossip entries (§7.1).
    assert!(g.entries.is_empty());
    // The very first MEET went out before node 1 was known to support extensions.
    let meet = net
        .sent
        .iter()
        .filter_map(|(_, _, b)| decode(b).ok())
        .find(|m| m.message_type() == MessageType::Meet)
        .unwrap();
    assert!(meet.body.gossip().unwrap().extensions.is_empty());
    assert!(meet.full_header().unwrap().has_mflags(msg_flags::EXT_DATA));
    assert!(matches!(meet.body, Body::Meet(_)));
}

#[test]
fn forget_bans_and_spreads_through_the_forgotten_node_extension() {
    let mut net = Net::new(3, NT);
    net.meet(0, 1);
    net.meet(0, 2);
    assert!(net.run_until(10_000, |n| n.fully_meshed()));
    let c = *net.nodes[2].myself_id();
    net.ok(0, &["FORGET", c.as_str()]);
    assert!(net.nodes[0].topology().node(&c).is_none());
    // Forgetting again while banned is OK (§16); myself is refused.
    net.ok(0, &["FORGET", c.as_str()]);
    let me = *net.nodes[0].myself_id();
    let (out, _) = net.command(0, &["FORGET", me.as_str()]);
    assert_eq!(
        out,
        CommandOutcome::Reply(Reply::Error(
            "ERR I tried hard but I can't forget myself...".into()
        ))
    );
    // Node 1 gets the FORGOTTEN_NODE extension from node 0 and deletes node 2 as well (§6.4).
    assert!(net.run_until(5_000, |n| n.nodes[1].topology().node(&c).is_none()));
    // During the 60 s ban gossip does not bring it back to node 0.
    net.run_for(10_000);
    assert!(net.nodes[0].topology().node(&c).is_none());
}

#[test]
fn time_going_backwards_is_clamped() {
    let mut n = ClusterNode::new(common::config(0, NT), common::CAPS, T0, 7, None).unwrap();
    n.handle_timeout(Millis(T0.0 + 1_000));
    let t = n.poll_timeout().unwrap();
    n.handle_timeout(Millis(T0.0)); // earlier: harmless
    assert_eq!(n.poll_timeout().unwrap(), t);
    while n.poll_output().is_some() {}
    // An unknown link and a time before construction: ignored, nothing emitted.
    n.handle_link(LinkEvent::Closed(ferrocluster_node::LinkId(999)), Millis(0));
    assert_eq!(n.poll_output(), None);
}

#[test]
fn same_seed_same_outputs() {
    let run = || {
        let mut net = Net::new(3, NT);
        net.meet(0, 1);
        net.meet(1, 2);
        net.run_for(5_000);
        (net.sent.clone(), net.nodes[0].nodes_conf())
    };
    assert_eq!(run(), run());
}

#[test]
fn fresh_node_persists_first_and_state_starts_fail() {
    let mut n = ClusterNode::new(common::config(0, NT), common::CAPS, T0, 3, None).unwrap();
    match n.poll_output() {
        Some(Output::Persist {
            seq: 1, contents, ..
        }) => {
            let text = String::from_utf8(contents).unwrap();
            assert!(text.contains("myself,master"), "{text}");
        }
        other => panic!("{other:?}"),
    }
    // §10: no slots anywhere -> size 0, quorum 1, reachable 0 -> fail.
    assert!(!n.cluster_state_ok());
}

/// Issue 16 item 6: two nodes built with one seed share a node ID. A MEET between them is
/// refused on both sides and reported with both addresses; neither ever shows myself at the
/// other's address, neither keeps a node for the other, and a third node's view is not
/// touched by the pair's handshake.
#[test]
fn two_nodes_with_one_node_id_refuse_each_other_and_report_it() {
    use common::config;
    use ferrocluster_node::NodeAddress;
    let nodes = (0..2)
        .map(|i| ClusterNode::new(config(i, NT), common::CAPS, T0, 4242, None).unwrap())
        .collect::<Vec<_>>();
    assert_eq!(
        nodes[0].myself_id(),
        nodes[1].myself_id(),
        "same seed, same ID"
    );
    let id = *nodes[0].myself_id();
    let mut net = Net::from_nodes(nodes);
    net.meet(0, 1);
    net.run_for(5 * NT);
    for i in 0..2 {
        let t = net.nodes[i].topology();
        let me = t.myself();
        assert_eq!(me.port, port(i), "node {i}: myself's port moved");
        assert_eq!(
            me.bus_port,
            port(i) + 10000,
            "node {i}: myself's bus port moved"
        );
        assert!(
            me.ip.is_none_or(|a| a == ip(i)),
            "node {i}: myself at {:?}",
            me.ip
        );
        assert_eq!(
            t.len(),
            1,
            "node {i} kept a node for its twin: {}",
            net.nodes[i].cluster_nodes()
        );
    }
    let reports: Vec<(usize, NodeAddress, NodeAddress)> = net
        .events
        .iter()
        .filter_map(|(i, e)| match e {
            Output::Notice(Notice::NodeIdCollision {
                id: got,
                mine,
                peer,
                ..
            }) if *got == id => Some((*i, *mine, *peer)),
            _ => None,
        })
        .collect();
    // The MEET's receiver reports the sender's announced address; the sender hears the
    // receiver's PONG on its handshake link.
    let on = |n: usize| reports.iter().find(|(i, _, _)| *i == n).copied();
    let (_, mine, peer) = on(1).expect("the MEET's receiver reports");
    assert_eq!((mine.port, mine.bus_port), (port(1), port(1) + 10000));
    assert_eq!(
        (peer.ip, peer.port, peer.bus_port),
        (Some(ip(0)), port(0), port(0) + 10000)
    );
    let (_, mine, peer) = on(0).expect("the MEET's sender reports");
    assert_eq!((mine.port, mine.bus_port), (port(0), port(0) + 10000));
    assert_eq!((peer.port, peer.bus_port), (port(1), port(1) + 10000));
    assert!(
        reports.len() <= 4,
        "reported {} times (once per link)",
        reports.len()
    );
}

/// Valkey `verifyClusterConfigWithData`: a primary's loaded keys in a slot another node owns
/// are deleted, in a slot no node owns are taken by myself, in its own slots are kept; a
/// replica checks nothing.
#[test]
fn keys_loaded_at_start_are_checked_against_the_slots() {
    let mut net = Net::new(3, NT);
    net.add_slots(0, 0, 5460);
    net.add_slots(1, 5461, 10922);
    net.meet(0, 1);
    net.meet(0, 2);
    assert!(net.run_until(10_000, |n| n.fully_meshed()), "no full mesh");
    let primary = *net.nodes[0].topology().myself_id();
    net.replicate(2, &primary);
    net.drain();
    net.events.clear();
    let slot = |n: u16| ferrocluster_slot::Slot::new(n).unwrap();
    // Mine (5), node 1's (6000), unassigned (12000).
    let loaded: ferrocluster_slot::SlotSet =
        [slot(5), slot(6000), slot(12000)].into_iter().collect();
    net.nodes[0].handle_keys_loaded(&loaded, net.now);
    net.nodes[2].handle_keys_loaded(&loaded, net.now);
    net.drain();
    let deleted: Vec<_> = net
        .events
        .iter()
        .filter_map(|(i, e)| match e {
            Output::DeleteSlotKeys(s) => Some((*i, s.iter().map(|s| s.get()).collect::<Vec<_>>())),
            _ => None,
        })
        .collect();
    assert_eq!(deleted, vec![(0, vec![6000])]);
    let claimed: Vec<_> = net
        .events
        .iter()
        .filter_map(|(i, e)| match e {
            Output::Notice(Notice::UnassignedSlotsClaimed(s)) => {
                Some((*i, s.iter().map(|s| s.get()).collect::<Vec<_>>()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(claimed, vec![(0, vec![12000])]);
    let me = *net.nodes[0].topology().myself_id();
    assert_eq!(net.nodes[0].topology().slot_owner(slot(12000)), Some(&me));
    assert_eq!(net.nodes[0].topology().slot_owner(slot(5)), Some(&me));
}

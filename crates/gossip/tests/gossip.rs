//! Gossip-layer rules with expected values from the facts sheet.

use ferrocluster_bus::{Body, PingExt};
use ferrocluster_gossip::*;
use ferrocluster_topology::{Millis, Node, NodeFlags, NodeId, ShardId, Topology};
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::net::{IpAddr, Ipv4Addr};

fn cfg() -> GossipConfig {
    GossipConfig {
        node_timeout_ms: 15_000,
        blacklist_ttl_secs: 60,
        ping_interval_ms: None,
        announce_ip: None,
        tls_cluster: false,
    }
}

fn lo() -> IpAddr {
    IpAddr::V4(Ipv4Addr::LOCALHOST)
}

#[test]
fn timeouts_follow_node_timeout() {
    let mut c = cfg();
    assert_eq!(c.handshake_timeout_ms(), 15_000);
    assert_eq!(c.ping_interval(), 7_500);
    c.node_timeout_ms = 500;
    assert_eq!(c.handshake_timeout_ms(), 1000, "max(NODE_TIMEOUT, 1000)");
}

#[test]
fn blacklist_ttl_and_expiry() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let id = NodeId::random(&mut rng);
    let mut b = Blacklist::default();
    b.add(id, 60, Millis(1_000_000));
    assert_eq!(
        b.live(Millis(1_000_000)),
        vec![(id, 60)],
        "60 s right after FORGET"
    );
    assert_eq!(b.live(Millis(1_030_000)), vec![(id, 30)]);
    assert!(b.contains(&id, Millis(1_059_999)));
    assert!(!b.contains(&id, Millis(1_060_000)));
    assert!(b.is_empty(), "purged lazily on lookup");
}

#[test]
fn meet_creates_one_handshake_node_per_address() {
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let mut t = Topology::fresh(&mut rng, Millis(0));
    let mut g = Gossip::new();
    let id = g
        .meet(&mut t, lo(), 7001, None, Millis(0), &mut rng)
        .unwrap()
        .unwrap();
    let n = t.node(&id).unwrap();
    assert_eq!(n.flags, NodeFlags::HANDSHAKE | NodeFlags::MEET);
    assert_eq!(n.bus_port, 17001, "cport defaults to port + 10000");
    // Same normalized address while in handshake: nothing is done (§7.3).
    assert_eq!(
        g.meet(&mut t, lo(), 7001, None, Millis(1), &mut rng),
        Ok(None)
    );
    assert_eq!(t.len(), 2);
    assert!(matches!(
        g.meet(&mut t, lo(), 0, None, Millis(1), &mut rng),
        Err(CommandError::InvalidPort { .. })
    ));
    assert!(g
        .meet(&mut t, lo(), 60000, None, Millis(1), &mut rng)
        .is_err());
    assert!(g
        .meet(&mut t, lo(), 60000, Some(1234), Millis(1), &mut rng)
        .is_ok());
}

#[test]
fn handshake_nodes_expire_after_the_handshake_timeout() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut t = Topology::fresh(&mut rng, Millis(0));
    let mut g = Gossip::new();
    let id = g
        .meet(&mut t, lo(), 7001, None, Millis(0), &mut rng)
        .unwrap()
        .unwrap();
    let mut out = Vec::new();
    g.handle_cron(&mut t, &cfg(), Millis(15_000), &mut rng, &mut out);
    assert!(t.contains(&id), "age 15000 is not more than 15000");
    assert!(matches!(out[0], GossipEffect::Connect { port: 17001, .. }));
    out.clear();
    g.handle_cron(&mut t, &cfg(), Millis(15_001), &mut rng, &mut out);
    assert!(!t.contains(&id));
    assert!(out.contains(&GossipEffect::NodeDeleted(id)));
}

#[test]
fn forget_errors_and_extension() {
    let mut rng = ChaCha8Rng::seed_from_u64(6);
    let mut t = Topology::fresh(&mut rng, Millis(0));
    let mut g = Gossip::new();
    let other = NodeId::random(&mut rng);
    let mut n = Node::new(other, ShardId::random(&mut rng), Millis(0));
    n.flags = NodeFlags::PRIMARY | NodeFlags::EXTENSIONS_SUPPORTED;
    n.ip = Some(lo());
    t.add_node(n).unwrap();
    let me = *t.myself_id();
    let mut out = Vec::new();
    assert_eq!(
        g.forget(&mut t, &cfg(), &me, Millis(0), &mut out),
        Err(CommandError::ForgetMyself)
    );
    let stranger = NodeId::random(&mut rng);
    assert_eq!(
        g.forget(&mut t, &cfg(), &stranger, Millis(0), &mut out),
        Err(CommandError::UnknownNode(stranger))
    );
    g.forget(&mut t, &cfg(), &other, Millis(0), &mut out)
        .unwrap();
    assert!(!t.contains(&other));
    // A PING to an extension-capable node (one that sent SHARDID, so it gets the full Valkey 8
    // set) now carries FORGOTTEN_NODE (ttl 60) then SHARDID.
    let third = NodeId::random(&mut rng);
    let mut n = Node::new(third, ShardId::random(&mut rng), Millis(0));
    n.flags = NodeFlags::PRIMARY | NodeFlags::EXTENSIONS_SUPPORTED;
    t.add_node(n).unwrap();
    g.links.set_extension_set(third, ExtensionSet::Full);
    let msg = build_ping(
        &t,
        &g.links,
        &g.blacklist,
        &cfg(),
        0,
        PingKind::Ping,
        Some(&third),
        false,
        0,
        Millis(0),
        &mut rng,
    );
    let Body::Ping(section) = &msg.body else {
        panic!()
    };
    assert_eq!(section.extensions.len(), 2);
    assert!(
        matches!(&section.extensions[0], PingExt::ForgottenNode { name, ttl_secs: 60 } if name.as_bytes() == other.as_bytes())
    );
    assert!(matches!(&section.extensions[1], PingExt::ShardId(_)));
}

/// A fresh myself plus `n` primaries (no links) owning the slots in turn, so every one of
/// them may be gossiped (§7.1); their IDs in table order.
fn with_primaries(rng: &mut ChaCha8Rng, n: usize) -> (Topology, Vec<NodeId>) {
    let mut t = Topology::fresh(rng, Millis(0));
    let mut ids = Vec::new();
    for _ in 0..n {
        let mut node = Node::new(NodeId::random(rng), ShardId::random(rng), Millis(0));
        node.flags = NodeFlags::PRIMARY;
        node.ip = Some(lo());
        ids.push(*node.id());
        t.add_node(node).unwrap();
    }
    for (i, s) in ferrocluster_slot::Slot::all().enumerate() {
        t.set_slot_owner(s, Some(ids[i % n])).unwrap();
    }
    (t, ids)
}

#[test]
fn gossip_section_size_follows_wanted_formula() {
    // 6 nodes known, all with outbound links absent but owning slots -> eligible.
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let (mut t, ids) = with_primaries(&mut rng, 5);
    let g = Gossip::new();
    let msg = build_ping(
        &t,
        &g.links,
        &g.blacklist,
        &cfg(),
        0,
        PingKind::Ping,
        Some(&ids[0]),
        false,
        0,
        Millis(0),
        &mut rng,
    );
    let entries = &msg.body.gossip().unwrap().entries;
    // With 6 nodes: wanted = 3 (the captures show 3 entries in steady state), never the
    // destination or myself.
    assert!(entries.len() <= 3);
    for e in entries {
        assert_ne!(e.name.as_bytes(), ids[0].as_bytes());
        assert_ne!(e.name.as_bytes(), t.myself_id().as_bytes());
    }
    // A PFAIL node is appended beyond `wanted` (the captures: count 4 with one PFAIL node).
    t.node_mut(&ids[4]).unwrap().flags.insert(NodeFlags::PFAIL);
    let msg = build_ping(
        &t,
        &g.links,
        &g.blacklist,
        &cfg(),
        0,
        PingKind::Ping,
        Some(&ids[0]),
        false,
        1,
        Millis(0),
        &mut rng,
    );
    let entries = &msg.body.gossip().unwrap().entries;
    assert_eq!(
        entries
            .iter()
            .filter(|e| e.name.as_bytes() == ids[4].as_bytes())
            .count(),
        1
    );
    assert_eq!(entries.last().unwrap().name.as_bytes(), ids[4].as_bytes());
}

/// §8: a PING from a known sender stops before step 6f (the configuration it carries is the
/// caller's, the epoch layer's): its slot claim and role are not applied here; the gossip
/// section (step 6i) runs only in `handle_message_gossip`.
#[test]
fn ping_stops_before_claims_and_gossip_section_runs_after() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let now = Millis(1_000_000);
    // A (sender) knows B (receiver) and C, D, E (slot owners, so gossip may describe them
    // without a link, §7.1); A owns slots 0..=99.
    let mut a = Topology::fresh(&mut rng, now);
    let a_id = *a.myself_id();
    let mut b = Topology::fresh(&mut rng, now);
    let b_id = *b.myself_id();
    let others: Vec<NodeId> = (0..3).map(|_| NodeId::random(&mut rng)).collect();
    let c_id = others[0];
    for (i, id) in std::iter::once(b_id)
        .chain(others.iter().copied())
        .enumerate()
    {
        let mut n = Node::new(id, ShardId::random(&mut rng), now);
        n.flags = NodeFlags::PRIMARY;
        n.ip = Some(lo());
        n.port = 7001 + i as u16;
        n.bus_port = n.port + 10000;
        a.add_node(n).unwrap();
    }
    let slot = |s: u16| ferrocluster_slot::Slot::new(s).unwrap();
    for s in 0..100 {
        a.set_slot_owner(slot(s), Some(a_id)).unwrap();
    }
    for (i, id) in others.iter().enumerate() {
        a.set_slot_owner(slot(100 + i as u16), Some(*id)).unwrap();
    }
    // B knows A (as a primary without slots) but not C.
    let mut n = Node::new(a_id, ShardId::random(&mut rng), now);
    n.flags = NodeFlags::PRIMARY;
    n.ip = Some(lo());
    b.add_node(n).unwrap();
    let ga = Gossip::new();
    let ping = build_ping(
        &a,
        &ga.links,
        &ga.blacklist,
        &cfg(),
        0,
        PingKind::Ping,
        Some(&b_id),
        false,
        0,
        now,
        &mut rng,
    );
    let mut gb = Gossip::new();
    let link = gb.links.open(LinkDirection::Inbound, None, Some(lo()), now);
    assert_eq!(gb.message_sender(&b, link, &ping), Some(a_id));
    let mut out = Vec::new();
    let r = gb.handle_message(&mut b, &cfg(), link, &ping, now, &mut rng, &mut out);
    assert_eq!(r, Received::Claims(a_id));
    assert_eq!(r.sender(), Some(a_id));
    // Step 5: the PONG reply is out; the claim is not applied, C is not discovered yet.
    assert!(out.iter().any(|e| matches!(
        e,
        GossipEffect::Send { link: l, message } if *l == link && matches!(message.body, Body::Pong(_))
    )));
    assert_eq!(b.node(&a_id).unwrap().slot_count(), 0);
    assert!(!b.contains(&c_id));
    out.clear();
    gb.handle_message_gossip(&mut b, &cfg(), &a_id, &ping, now, &mut out);
    assert!(
        b.contains(&c_id),
        "discovered from the gossip section (§7.4)"
    );
    assert!(out.contains(&GossipEffect::NodeDiscovered(c_id)));
    assert_eq!(b.node(&a_id).unwrap().slot_count(), 0);
}

/// A PING built by `from` (its own shard ID goes in the SHARDID extension) and run through
/// `to`'s gossip and extension processing (§8 step 6i).
fn deliver_ping(from: &Topology, to: &mut Topology, rng: &mut ChaCha8Rng, now: Millis) {
    let from_id = *from.myself_id();
    let mut g = Gossip::new();
    // `to` has shown the full extension set (a Valkey peer).
    g.links
        .set_extension_set(*to.myself_id(), ExtensionSet::Full);
    let ping = build_ping(
        from,
        &g.links,
        &g.blacklist,
        &cfg(),
        0,
        PingKind::Ping,
        Some(to.myself_id()),
        true,
        0,
        now,
        rng,
    );
    let mut gt = Gossip::new();
    let mut out = Vec::new();
    gt.handle_message_gossip(to, &cfg(), &from_id, &ping, now, &mut out);
}

/// `to` learns node `id` (flags `flags`, shard `shard`).
fn know(to: &mut Topology, id: NodeId, flags: NodeFlags, shard: ShardId, now: Millis) {
    let mut n = Node::new(id, shard, now);
    n.flags = flags;
    n.ip = Some(lo());
    to.add_node(n).unwrap();
}

#[test]
fn a_primarys_shard_id_reaches_its_replicas_and_myself() {
    // valkey-io/valkey #774 / #2171, fixed by PR #573: B replicates A and knows A, R (another
    // replica of A) and R2 (a replica of R) only with placeholder shard IDs. A's SHARDID
    // extension moves all of them — and B itself — to A's shard.
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let now = Millis(1_000_000);
    let mut a = Topology::fresh(&mut rng, now);
    let a_id = *a.myself_id();
    let mut b = Topology::fresh(&mut rng, now);
    let b_id = *b.myself_id();
    let (r, r2) = (NodeId::random(&mut rng), NodeId::random(&mut rng));
    let placeholder = ShardId::random(&mut rng);
    know(&mut b, a_id, NodeFlags::PRIMARY, placeholder, now);
    know(&mut b, r, NodeFlags::REPLICA, placeholder, now);
    know(
        &mut b,
        r2,
        NodeFlags::REPLICA,
        ShardId::random(&mut rng),
        now,
    );
    b.set_primary(&r, a_id).unwrap();
    b.set_primary(&r2, r).unwrap();
    b.set_primary(&b_id, a_id).unwrap();
    b.myself_mut().shard_id = placeholder;
    let real = a.myself().shard_id;
    know(&mut a, b_id, NodeFlags::REPLICA, real, now);
    deliver_ping(&a, &mut b, &mut rng, now);
    for id in [a_id, r, r2, b_id] {
        assert_eq!(b.node(&id).unwrap().shard_id, real, "{id}");
    }
}

#[test]
fn a_replicas_shard_id_moves_its_primary_but_never_myself_as_primary() {
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    let now = Millis(1_000_000);
    // X is a primary; R replicates X but announces a shard ID of its own (its fresh one).
    let mut x = Topology::fresh(&mut rng, now);
    let x_id = *x.myself_id();
    let mut r = Topology::fresh(&mut rng, now);
    let r_id = *r.myself_id();
    let r_shard = r.myself().shard_id;
    know(&mut r, x_id, NodeFlags::PRIMARY, x.myself().shard_id, now);
    r.set_primary(&r_id, x_id).unwrap();
    // On X (myself is R's primary): my shard stays, R is put back in it.
    let x_shard = x.myself().shard_id;
    know(
        &mut x,
        r_id,
        NodeFlags::REPLICA,
        ShardId::random(&mut rng),
        now,
    );
    x.set_primary(&r_id, x_id).unwrap();
    deliver_ping(&r, &mut x, &mut rng, now);
    assert_eq!(x.myself().shard_id, x_shard);
    assert_eq!(x.node(&r_id).unwrap().shard_id, x_shard);
    // On a third node O: R's announced shard moves X too (PR #573's best effort for
    // primaries that send no SHARDID), so the two stay in one shard.
    let mut o = Topology::fresh(&mut rng, now);
    know(&mut o, x_id, NodeFlags::PRIMARY, x_shard, now);
    know(&mut o, r_id, NodeFlags::REPLICA, x_shard, now);
    o.set_primary(&r_id, x_id).unwrap();
    deliver_ping(&r, &mut o, &mut rng, now);
    assert_eq!(o.node(&x_id).unwrap().shard_id, r_shard);
    assert_eq!(o.node(&r_id).unwrap().shard_id, r_shard);
    // X's own SHARDID puts both back.
    deliver_ping(&x, &mut o, &mut rng, now);
    assert_eq!(o.node(&x_id).unwrap().shard_id, x_shard);
    assert_eq!(o.node(&r_id).unwrap().shard_id, x_shard);
}

/// §7.4 with Valkey 9.0's narrowing (PR #2512, `clusterProcessGossipSection`): a healthy
/// gossip entry's fresh pong time is adopted only while the node is healthy in the
/// receiver's own view — not PFAIL/FAIL, no ping pending, no failure report.
#[test]
fn a_gossiped_pong_time_is_adopted_only_for_a_node_healthy_in_our_view() {
    let mut rng = ChaCha8Rng::seed_from_u64(23);
    let t0 = Millis(1_000_000);
    let now = Millis(1_010_000);
    // B (the sender) heard from C just now; A (the receiver) last heard from C at t0.
    let mut b = Topology::fresh(&mut rng, now);
    let b_id = *b.myself_id();
    let a_id = NodeId::random(&mut rng);
    let c_id = NodeId::random(&mut rng);
    let c_shard = ShardId::random(&mut rng);
    know(
        &mut b,
        a_id,
        NodeFlags::PRIMARY,
        ShardId::random(&mut rng),
        now,
    );
    know(&mut b, c_id, NodeFlags::PRIMARY, c_shard, now);
    b.node_mut(&c_id).unwrap().pong_received = Some(now);
    // C owns slots, so B's gossip may describe it without a link (§7.1).
    b.set_slot_owner(ferrocluster_slot::Slot::new(0).unwrap(), Some(c_id))
        .unwrap();
    let g = Gossip::new();
    let ping = build_ping(
        &b,
        &g.links,
        &g.blacklist,
        &cfg(),
        0,
        PingKind::Ping,
        Some(&a_id),
        false,
        0,
        now,
        &mut rng,
    );
    let entries = &ping.body.gossip().unwrap().entries;
    assert_eq!(entries.len(), 1, "three nodes: one entry, about C");
    assert_eq!(entries[0].name.as_bytes(), c_id.as_bytes());
    assert_eq!(entries[0].flags & NodeFlags::PFAIL.bits(), 0);

    let receive = |setup: &dyn Fn(&mut Node)| -> Option<Millis> {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut a = Topology::fresh(&mut rng, t0);
        know(
            &mut a,
            b_id,
            NodeFlags::PRIMARY,
            ShardId::random(&mut rng),
            t0,
        );
        know(&mut a, c_id, NodeFlags::PRIMARY, c_shard, t0);
        let c = a.node_mut(&c_id).unwrap();
        c.pong_received = Some(t0);
        setup(c);
        let mut ga = Gossip::new();
        let mut out = Vec::new();
        ga.handle_message_gossip(&mut a, &cfg(), &b_id, &ping, now, &mut out);
        a.node(&c_id).unwrap().pong_received
    };
    // Healthy in our view: B's fresh time is taken (whole seconds, as the entry carries it).
    assert_eq!(receive(&|_| {}), Some(now));
    // PFAIL or FAIL in our view (a FAIL message, a nodes.conf loaded with `fail`), no ping
    // pending: not taken (Valkey 9.0; Valkey 8 would take it).
    assert_eq!(
        receive(&|c| c.flags.insert(NodeFlags::PFAIL)),
        Some(t0),
        "PFAIL"
    );
    assert_eq!(
        receive(&|c| c.flags.insert(NodeFlags::FAIL)),
        Some(t0),
        "FAIL"
    );
    // A ping of ours pending, or a failure report: not taken (every version).
    assert_eq!(
        receive(&|c| c.ping_sent = Some(t0)),
        Some(t0),
        "ping pending"
    );
    assert_eq!(
        receive(&|c| {
            c.failure_reports.insert(b_id, t0);
        }),
        Some(t0),
        "failure report"
    );
}

/// §7.1 (Valkey `clusterSendPing`, "pfail_wanted"): beside the `wanted` random entries, a
/// PING carries every PFAIL node its sender counted at its last cron run — bounded by that
/// count, so a message never holds more than `wanted` + #PFAIL entries — and the property
/// holds at 1000 nodes with 300 of them PFAIL (the random picks skip PFAIL nodes).
#[test]
fn a_ping_carries_every_pfail_node_beside_the_random_entries_at_1000_nodes() {
    let mut rng = ChaCha8Rng::seed_from_u64(1000);
    let (mut t, ids) = with_primaries(&mut rng, 999);
    let pfail: Vec<NodeId> = ids.iter().step_by(3).copied().collect();
    for id in &pfail {
        t.node_mut(id).unwrap().flags.insert(NodeFlags::PFAIL);
    }
    assert_eq!(pfail.len(), 333);
    let mut g = Gossip::new();
    let mut out = Vec::new();
    g.handle_cron(&mut t, &cfg(), Millis(0), &mut rng, &mut out);
    assert_eq!(
        g.pfail_count(),
        pfail.len(),
        "the cron counts the PFAIL nodes"
    );
    let wanted = gossip_wanted(t.len());
    assert_eq!(wanted, 100);
    let dest = ids[1];
    for limit in [g.pfail_count(), 10] {
        let msg = build_ping(
            &t,
            &g.links,
            &g.blacklist,
            &cfg(),
            0,
            PingKind::Ping,
            Some(&dest),
            false,
            limit,
            Millis(0),
            &mut rng,
        );
        let entries = &msg.body.gossip().unwrap().entries;
        let is_pfail = |e: &&ferrocluster_bus::GossipEntry| e.flags & NodeFlags::PFAIL.bits() != 0;
        let random = entries.iter().filter(|e| !is_pfail(e)).count();
        let flagged: Vec<_> = entries.iter().filter(is_pfail).collect();
        assert!(random <= wanted, "{random} random entries");
        assert_eq!(
            flagged.len(),
            limit.min(pfail.len()),
            "bounded by the count"
        );
        if limit == pfail.len() {
            for id in &pfail {
                assert!(
                    flagged.iter().any(|e| e.name.as_bytes() == id.as_bytes()),
                    "{id} missing"
                );
            }
        }
        assert!(entries.len() <= wanted + limit);
    }
}

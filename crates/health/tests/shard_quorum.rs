//! Shard verdicts and the quorum check over hand-built topologies. Expected values follow the
//! facts sheet: quorum = size/2 + 1 (§0), reachable = voting primaries neither PFAIL nor FAIL
//! with myself always counted (§10 step 3), rank by offset then node ID (§12.2.1).

mod common;

use common::*;
use ferrocluster_health::{
    shard_readiness, shard_readiness_of, HealthConfig, HealthInputs, Ineligibility, NotReady,
    QuorumCheck, QuorumVerdict, Readiness, ShardVerdict,
};
use ferrocluster_slot::Slot;
use ferrocluster_topology::{Node, NodeFlags, Reply, Topology};

fn inputs(topo: &Topology) -> HealthInputs<'_> {
    HealthInputs::new(topo, NOW, HealthConfig::default(), true)
}

#[test]
fn healthy_cluster_is_ready_everywhere() {
    let topo = cluster(3, 1, Me::Primary(0));
    let shards = shard_readiness(&inputs(&topo));
    assert_eq!(shards.len(), 3);
    for (i, s) in shards.iter().enumerate() {
        let i = i as u32;
        assert_eq!(s.primary, p(i));
        assert_eq!(s.shard_id, sid(i));
        assert_eq!(s.verdict, ShardVerdict::Ready { candidate: r(i, 0) });
    }
    assert_eq!(shards[0].slot_count, 5461);
    assert_eq!(shards[2].slot_count, 16384 - 2 * 5461);
    let q = QuorumCheck::evaluate(&inputs(&topo));
    assert_eq!(
        (q.voting_primaries, q.reachable, q.quorum, q.fail_agreeable),
        (3, 3, 2, true)
    );
    assert!(q.shards_unable.is_empty());
    assert_eq!(q.verdict, QuorumVerdict::Ok);
    assert_eq!(
        q.reason,
        "3 usable voting primaries of 3, quorum 2: a FAIL can be agreed and every shard can fail over"
    );
    assert_eq!(
        q.reply(),
        Reply::Simple(
            "OK 3 usable voting primaries of 3, quorum 2: a FAIL can be agreed and every shard can fail over"
                .into()
        )
    );
}

#[test]
fn shard_without_slots_is_no_slots_and_does_not_block() {
    let mut topo = cluster(3, 1, Me::Primary(0));
    // An extra empty primary with a replica, and an empty primary alone.
    let mut e = Node::new(id(50), sid(50), NOW);
    e.flags = NodeFlags::PRIMARY;
    topo.add_node(e).unwrap();
    let mut er = Node::new(id(51), sid(50), NOW);
    er.flags = NodeFlags::REPLICA;
    er.primary = Some(id(50));
    topo.add_node(er).unwrap();
    let s = shard_readiness_of(&inputs(&topo), &id(50)).unwrap();
    assert_eq!(s.verdict, ShardVerdict::NotReady(NotReady::NoSlots));
    assert_eq!(s.replicas.len(), 1);
    let q = QuorumCheck::evaluate(&inputs(&topo));
    assert_eq!(q.verdict, QuorumVerdict::Ok);
    assert_eq!(q.voting_primaries, 3);
    assert!(Readiness::evaluate(&inputs(&topo)).failover_ready());
}

#[test]
fn shard_readiness_of_unknown_or_replica_is_none() {
    let topo = cluster(3, 1, Me::Primary(0));
    assert!(shard_readiness_of(&inputs(&topo), &id(999)).is_none());
    assert!(shard_readiness_of(&inputs(&topo), &r(0, 0)).is_none());
}

#[test]
fn no_replicas_then_no_eligible_replica_names_the_first() {
    let topo = cluster(3, 0, Me::Primary(0));
    let q = QuorumCheck::evaluate(&inputs(&topo));
    assert_eq!(q.verdict, QuorumVerdict::NotReady);
    assert_eq!(q.shards_unable.len(), 3);
    assert!(q
        .shards_unable
        .iter()
        .all(|u| u.reason == NotReady::NoReplicas));

    let mut topo = cluster(3, 2, Me::Primary(0));
    flag(&mut topo, &r(1, 0), NodeFlags::NOFAILOVER);
    topo.node_mut(&r(1, 1)).unwrap().repl_offset = 0;
    let s = shard_readiness_of(&inputs(&topo), &p(1)).unwrap();
    assert_eq!(
        s.verdict,
        ShardVerdict::NotReady(NotReady::NoEligibleReplica {
            replica: r(1, 0),
            why: Ineligibility::NoFailoverFlag
        })
    );
    let q = QuorumCheck::evaluate(&inputs(&topo));
    assert_eq!(q.verdict, QuorumVerdict::NotReady);
    assert_eq!(q.shards_unable.len(), 1);
    assert_eq!(q.shards_unable[0].primary, p(1));
    assert_eq!(q.shards_unable[0].shard_id, sid(1));
    assert_eq!(
        q.reason,
        format!(
            "3 usable voting primaries of 3, quorum 2: a FAIL can be agreed, but 1 shard(s) cannot fail over: shard {} (primary {}) replica {} has the nofailover flag",
            sid(1),
            p(1),
            r(1, 0)
        )
    );
    assert_eq!(q.reply(), Reply::Error(format!("NOTREADY {}", q.reason)));
}

#[test]
fn candidate_is_highest_offset_then_smallest_id() {
    let mut topo = cluster(3, 3, Me::Primary(0));
    topo.node_mut(&r(2, 0)).unwrap().repl_offset = 10;
    topo.node_mut(&r(2, 1)).unwrap().repl_offset = 30;
    topo.node_mut(&r(2, 2)).unwrap().repl_offset = 30;
    let s = shard_readiness_of(&inputs(&topo), &p(2)).unwrap();
    assert_eq!(s.verdict, ShardVerdict::Ready { candidate: r(2, 1) });
    // The best one becomes ineligible: the next best wins.
    flag(&mut topo, &r(2, 1), NodeFlags::PFAIL);
    let s = shard_readiness_of(&inputs(&topo), &p(2)).unwrap();
    assert_eq!(s.verdict, ShardVerdict::Ready { candidate: r(2, 2) });
}

#[test]
fn shard_quorum_excludes_its_own_primary() {
    // 3 voting primaries, quorum 2. Primary 2 is PFAIL: the cluster can still agree a FAIL
    // (2 reachable), but if primary 0 or 1 failed too only one voter would remain.
    let mut topo = cluster(3, 1, Me::Primary(0));
    flag(&mut topo, &p(2), NodeFlags::PFAIL);
    let shards = shard_readiness(&inputs(&topo));
    let nq = ShardVerdict::NotReady(NotReady::NoQuorum {
        reachable: 1,
        quorum: 2,
    });
    assert_eq!(shards[0].verdict, nq);
    assert_eq!(shards[1].verdict, nq);
    assert_eq!(
        shards[2].verdict,
        ShardVerdict::Ready { candidate: r(2, 0) }
    );
    let q = QuorumCheck::from_shards(&topo, &shards);
    assert_eq!((q.reachable, q.quorum, q.fail_agreeable), (2, 2, true));
    assert_eq!(q.verdict, QuorumVerdict::NotReady);
    let unable: Vec<_> = q.shards_unable.iter().map(|u| u.primary).collect();
    assert_eq!(unable, [p(0), p(1)]);
}

#[test]
fn four_primaries_one_down_blocks_further_failovers() {
    // size 4, quorum 3; one FAIL leaves 3 reachable: FAIL agreeable, but any other shard
    // would have only 2 other voters.
    let mut topo = cluster(4, 1, Me::Primary(1));
    flag(&mut topo, &p(3), NodeFlags::FAIL);
    let q = QuorumCheck::evaluate(&inputs(&topo));
    assert_eq!((q.voting_primaries, q.reachable, q.quorum), (4, 3, 3));
    assert!(q.fail_agreeable);
    // Table order: myself (primary 1) was created first.
    let unable: Vec<_> = q.shards_unable.iter().map(|u| u.primary).collect();
    assert_eq!(unable, [p(1), p(0), p(2)]);
}

#[test]
fn majority_unreachable_is_noquorum_naming_every_shard() {
    let mut topo = cluster(3, 1, Me::Primary(0));
    flag(&mut topo, &p(1), NodeFlags::PFAIL);
    flag(&mut topo, &p(2), NodeFlags::FAIL);
    let q = QuorumCheck::evaluate(&inputs(&topo));
    assert_eq!((q.reachable, q.quorum, q.fail_agreeable), (1, 2, false));
    assert_eq!(q.verdict, QuorumVerdict::NoQuorum);
    let unable: Vec<_> = q.shards_unable.iter().map(|u| u.primary).collect();
    assert_eq!(unable, [p(0), p(1), p(2)]);
    assert!(q
        .shards_unable
        .iter()
        .all(|u| matches!(u.reason, NotReady::NoQuorum { .. })));
    assert!(q.reason.starts_with(
        "1 usable voting primaries of 3, quorum 2: not enough voting primaries reachable to agree a FAIL or authorize a failover: shard "
    ));
    match q.reply() {
        Reply::Error(t) => assert_eq!(t, format!("NOQUORUM {}", q.reason)),
        other => panic!("expected an error reply, got {other:?}"),
    }
}

#[test]
fn myself_counts_as_reachable_even_if_flagged() {
    // §10: myself is always reachable (the engine never flags myself; this guards the rule).
    let mut topo = cluster(3, 1, Me::Primary(0));
    flag(&mut topo, &p(0), NodeFlags::PFAIL);
    flag(&mut topo, &p(1), NodeFlags::PFAIL);
    let q = QuorumCheck::evaluate(&inputs(&topo));
    assert_eq!(q.reachable, 2);
}

#[test]
fn replica_myself_counts_reachable_primaries_only() {
    // Myself is a replica: it is not a voter.
    let mut topo = cluster(3, 1, Me::Replica(0, 0));
    flag(&mut topo, &p(1), NodeFlags::PFAIL);
    flag(&mut topo, &p(2), NodeFlags::PFAIL);
    let q = QuorumCheck::evaluate(&inputs(&topo));
    assert_eq!((q.voting_primaries, q.reachable), (3, 1));
    assert_eq!(q.verdict, QuorumVerdict::NoQuorum);
}

#[test]
fn no_slots_anywhere_is_noquorum() {
    // §10 note: size 0 -> quorum 1, reachable 0.
    let mut topo = cluster(3, 1, Me::Primary(0));
    for s in Slot::all() {
        topo.set_slot_owner(s, None).unwrap();
    }
    let q = QuorumCheck::evaluate(&inputs(&topo));
    assert_eq!((q.voting_primaries, q.reachable, q.quorum), (0, 0, 1));
    assert_eq!(q.verdict, QuorumVerdict::NoQuorum);
    assert!(q.shards_unable.is_empty());
    assert_eq!(
        q.reason,
        "0 usable voting primaries of 0, quorum 1: no voting primaries (no slots assigned)"
    );
}

#[test]
fn handshake_nodes_are_not_shards_or_replicas() {
    let mut topo = cluster(3, 1, Me::Primary(0));
    let mut h = Node::new(id(77), sid(77), NOW);
    h.flags = NodeFlags::PRIMARY | NodeFlags::HANDSHAKE;
    topo.add_node(h).unwrap();
    let mut hr = Node::new(id(78), sid(0), NOW);
    hr.flags = NodeFlags::REPLICA | NodeFlags::HANDSHAKE;
    hr.primary = Some(p(0));
    topo.add_node(hr).unwrap();
    let shards = shard_readiness(&inputs(&topo));
    assert_eq!(shards.len(), 3);
    assert_eq!(shards[0].replicas.len(), 1);
}

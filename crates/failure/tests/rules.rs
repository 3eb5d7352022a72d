//! Failure-detection and cluster-state rules (facts sheet §9, §10), expected values from the
//! sheet.

use ferrocluster_failure::*;
use ferrocluster_slot::Slot;
use ferrocluster_topology::{Millis, Node, NodeFlags, NodeId, ShardId, Topology};
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

const NT: u64 = 1000;
const CFG: FailureConfig = FailureConfig {
    node_timeout_ms: NT,
};

/// Myself plus `others` primaries; slots split so that the first `voting` nodes (myself is
/// node 0) own slots.
fn cluster(others: usize, voting: usize) -> (Topology, Vec<NodeId>) {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut t = Topology::fresh(&mut rng, Millis(0));
    let mut ids = vec![*t.myself_id()];
    for _ in 0..others {
        let mut n = Node::new(
            NodeId::random(&mut rng),
            ShardId::random(&mut rng),
            Millis(0),
        );
        n.flags = NodeFlags::PRIMARY;
        ids.push(*n.id());
        t.add_node(n).unwrap();
    }
    for (i, s) in Slot::all().enumerate() {
        if voting > 0 {
            t.set_slot_owner(s, Some(ids[i % voting])).unwrap();
        }
    }
    (t, ids)
}

#[test]
fn quorum_is_half_plus_one() {
    assert_eq!(
        [
            quorum(0),
            quorum(1),
            quorum(2),
            quorum(3),
            quorum(4),
            quorum(5)
        ],
        [1, 1, 2, 2, 3, 3]
    );
    assert_eq!(CFG.report_validity_ms(), 2 * NT);
    assert_eq!(CFG.fail_undo_ms(), 2 * NT);
}

#[test]
fn pfail_needs_pending_ping_older_than_node_timeout() {
    let (mut t, ids) = cluster(1, 2);
    let b = ids[1];
    t.node_mut(&b).unwrap().ping_sent = Some(Millis(10_000));
    let mut out = Vec::new();
    check_pfail(&mut t, Millis(10_000 + NT), &CFG, &mut out);
    assert!(out.is_empty(), "exactly NODE_TIMEOUT is not more than it");
    // Recent data keeps it alive: min(now - ping_sent, now - data_received).
    t.node_mut(&b).unwrap().data_received = Some(Millis(10_500));
    check_pfail(&mut t, Millis(10_000 + NT + 1), &CFG, &mut out);
    assert!(out.is_empty());
    check_pfail(&mut t, Millis(10_500 + NT + 1), &CFG, &mut out);
    assert_eq!(out, vec![FailureEffect::MarkedPfail(b)]);
    assert!(t.node(&b).unwrap().is_pfail());
    // Never marked twice.
    check_pfail(&mut t, Millis(20_000), &CFG, &mut out);
    assert_eq!(out.len(), 1);
}

#[test]
fn no_pending_ping_no_pfail() {
    let (mut t, ids) = cluster(1, 2);
    let mut out = Vec::new();
    check_pfail(&mut t, Millis(1_000_000), &CFG, &mut out);
    assert!(out.is_empty());
    assert!(!t.node(&ids[1]).unwrap().is_pfail());
}

#[test]
fn single_voting_primary_promotes_pfail_to_fail_at_once() {
    // Cluster size 1 and myself a voting primary: quorum 1 is myself (§9.1, V8).
    let (mut t, ids) = cluster(1, 1);
    let b = ids[1];
    t.node_mut(&b).unwrap().ping_sent = Some(Millis(0));
    let mut out = Vec::new();
    check_pfail(&mut t, Millis(NT + 1), &CFG, &mut out);
    assert_eq!(
        out,
        vec![
            FailureEffect::MarkedPfail(b),
            FailureEffect::MarkedFail {
                node: b,
                broadcast: true
            }
        ]
    );
}

#[test]
fn reports_from_voting_primaries_reach_quorum() {
    // 5 voting primaries: quorum 3 = myself + 2 reports.
    let (mut t, ids) = cluster(4, 5);
    let target = ids[4];
    t.node_mut(&target).unwrap().flags.insert(NodeFlags::PFAIL);
    let mut out = Vec::new();
    handle_gossip_flags(
        &mut t,
        &ids[1],
        &target,
        NodeFlags::PFAIL,
        Millis(100),
        &CFG,
        &mut out,
    );
    assert!(out.is_empty(), "myself + 1 report = 2 < 3");
    handle_gossip_flags(
        &mut t,
        &ids[2],
        &target,
        NodeFlags::FAIL,
        Millis(200),
        &CFG,
        &mut out,
    );
    assert_eq!(
        out,
        vec![FailureEffect::MarkedFail {
            node: target,
            broadcast: true
        }]
    );
    let n = t.node(&target).unwrap();
    assert!(n.is_fail() && !n.is_pfail());
    assert_eq!(n.fail_time, Some(Millis(200)));
}

#[test]
fn reports_expire_after_twice_node_timeout_and_healthy_gossip_removes_them() {
    let (mut t, ids) = cluster(4, 5);
    let target = ids[4];
    t.node_mut(&target).unwrap().flags.insert(NodeFlags::PFAIL);
    let mut out = Vec::new();
    handle_gossip_flags(
        &mut t,
        &ids[1],
        &target,
        NodeFlags::PFAIL,
        Millis(0),
        &CFG,
        &mut out,
    );
    // The first report is older than 2 x NT when the second arrives: not counted.
    handle_gossip_flags(
        &mut t,
        &ids[2],
        &target,
        NodeFlags::PFAIL,
        Millis(2 * NT + 1),
        &CFG,
        &mut out,
    );
    assert!(out.is_empty());
    assert_eq!(t.node(&target).unwrap().failure_reports.len(), 1);
    // A healthy entry from a voting primary removes its report.
    handle_gossip_flags(
        &mut t,
        &ids[2],
        &target,
        NodeFlags::PRIMARY,
        Millis(2 * NT + 2),
        &CFG,
        &mut out,
    );
    assert!(t.node(&target).unwrap().failure_reports.is_empty());
}

#[test]
fn slotless_primary_reports_do_not_count() {
    // Only myself and node 1 vote (size 2, quorum 2); node 2 owns nothing.
    let (mut t, ids) = cluster(3, 2);
    let target = ids[3];
    t.node_mut(&target).unwrap().flags.insert(NodeFlags::PFAIL);
    let mut out = Vec::new();
    handle_gossip_flags(
        &mut t,
        &ids[2],
        &target,
        NodeFlags::PFAIL,
        Millis(1),
        &CFG,
        &mut out,
    );
    assert!(t.node(&target).unwrap().failure_reports.is_empty());
    assert!(out.is_empty());
    handle_gossip_flags(
        &mut t,
        &ids[1],
        &target,
        NodeFlags::PFAIL,
        Millis(1),
        &CFG,
        &mut out,
    );
    assert_eq!(out.len(), 1);
}

#[test]
fn fail_message_is_taken_from_any_known_node_but_never_about_myself() {
    let (mut t, ids) = cluster(2, 0);
    let mut out = Vec::new();
    assert!(handle_fail_message(&mut t, &ids[1], Millis(5), &mut out));
    assert_eq!(
        out,
        vec![FailureEffect::MarkedFail {
            node: ids[1],
            broadcast: false
        }]
    );
    assert!(
        !handle_fail_message(&mut t, &ids[1], Millis(6), &mut out),
        "already FAIL"
    );
    assert!(
        !handle_fail_message(&mut t, &ids[0], Millis(6), &mut out),
        "myself"
    );
}

#[test]
fn fail_clearing_rules() {
    let (mut t, ids) = cluster(2, 2);
    let (voting, slotless) = (ids[1], ids[2]);
    for id in [voting, slotless] {
        let n = t.node_mut(&id).unwrap();
        n.flags.insert(NodeFlags::FAIL);
        n.fail_time = Some(Millis(1000));
    }
    let mut out = Vec::new();
    // Slot-less primary: cleared at once.
    handle_pong(&mut t, &slotless, Millis(1001), &CFG, &mut out);
    assert_eq!(out, vec![FailureEffect::FailCleared(slotless)]);
    // Voting primary: only after 2 x NODE_TIMEOUT.
    out.clear();
    handle_pong(&mut t, &voting, Millis(1000 + 2 * NT), &CFG, &mut out);
    assert!(out.is_empty());
    handle_pong(&mut t, &voting, Millis(1000 + 2 * NT + 1), &CFG, &mut out);
    assert_eq!(out, vec![FailureEffect::FailCleared(voting)]);
    // PFAIL is cleared by any PONG.
    out.clear();
    t.node_mut(&voting).unwrap().flags.insert(NodeFlags::PFAIL);
    handle_pong(&mut t, &voting, Millis(9999), &CFG, &mut out);
    assert_eq!(out, vec![FailureEffect::PfailCleared(voting)]);
}

#[test]
fn state_needs_coverage_and_majority_with_delays() {
    let scfg = StateConfig {
        require_full_coverage: true,
        node_timeout_ms: NT,
    };
    let (mut t, ids) = cluster(2, 3);
    let mut st = ClusterState::new();
    assert_eq!(st.health(), ClusterHealth::Fail);
    // A primary keeps FAIL for CLUSTER_WRITABLE_DELAY (2000 ms) after the first evaluation.
    assert_eq!(st.update(&t, Millis(0), &scfg), None);
    assert_eq!(st.update(&t, Millis(1999), &scfg), None);
    assert_eq!(st.update(&t, Millis(2000), &scfg), Some(ClusterHealth::Ok));
    // A FAIL owner breaks coverage; PFAIL does not.
    t.node_mut(&ids[1]).unwrap().flags.insert(NodeFlags::PFAIL);
    assert_eq!(ClusterState::evaluate(&t, &scfg), ClusterHealth::Ok);
    t.node_mut(&ids[2]).unwrap().flags.insert(NodeFlags::PFAIL);
    // Two of three unreachable: minority (§10 step 4).
    assert_eq!(
        st.update(&t, Millis(3000), &scfg),
        Some(ClusterHealth::Fail)
    );
    t.node_mut(&ids[1]).unwrap().flags.remove(NodeFlags::PFAIL);
    t.node_mut(&ids[2]).unwrap().flags.remove(NodeFlags::PFAIL);
    // Rejoin delay: NODE_TIMEOUT clamped to [500, 5000] = 1000 ms after the last minority.
    assert_eq!(st.update(&t, Millis(3999), &scfg), None);
    assert_eq!(st.update(&t, Millis(4000), &scfg), Some(ClusterHealth::Ok));
    t.node_mut(&ids[1]).unwrap().flags.insert(NodeFlags::FAIL);
    assert_eq!(
        st.update(&t, Millis(5000), &scfg),
        Some(ClusterHealth::Fail)
    );
    let relaxed = StateConfig {
        require_full_coverage: false,
        ..scfg
    };
    assert_eq!(
        ClusterState::evaluate(&t, &relaxed),
        ClusterHealth::Ok,
        "2 of 3 reachable"
    );
}

#[test]
fn no_slots_anywhere_is_fail() {
    let (t, _) = cluster(2, 0);
    let scfg = StateConfig {
        require_full_coverage: false,
        node_timeout_ms: NT,
    };
    assert_eq!(ClusterState::evaluate(&t, &scfg), ClusterHealth::Fail);
}

/// §10 steps 2–4 read slot by slot, as the facts sheet states them: the reference the fast
/// evaluation (one pass over the nodes) must agree with.
fn evaluate_slot_by_slot(t: &Topology, cfg: &StateConfig) -> ClusterHealth {
    if cfg.require_full_coverage {
        for slot in Slot::all() {
            match t.slot_owner(slot).and_then(|id| t.node(id)) {
                Some(owner) if !owner.is_fail() => {}
                _ => return ClusterHealth::Fail,
            }
        }
    }
    let voting: Vec<_> = t.nodes().filter(|n| n.is_voting_primary()).collect();
    let reachable = voting
        .iter()
        .filter(|n| n.is_myself() || !(n.is_fail() || n.is_pfail()))
        .count();
    if reachable < voting.len() / 2 + 1 {
        return ClusterHealth::Fail;
    }
    ClusterHealth::Ok
}

#[test]
fn one_unowned_slot_breaks_coverage_and_a_fail_replica_owner_too() {
    let scfg = StateConfig {
        require_full_coverage: true,
        node_timeout_ms: NT,
    };
    let (mut t, ids) = cluster(2, 3);
    assert_eq!(ClusterState::evaluate(&t, &scfg), ClusterHealth::Ok);
    let s = Slot::new(16383).unwrap();
    let owner = *t.slot_owner(s).unwrap();
    t.set_slot_owner(s, None).unwrap();
    assert_eq!(ClusterState::evaluate(&t, &scfg), ClusterHealth::Fail);
    t.set_slot_owner(s, Some(owner)).unwrap();
    assert_eq!(ClusterState::evaluate(&t, &scfg), ClusterHealth::Ok);
    // A slot owned by a node flagged REPLICA (not PRIMARY) still counts as served until FAIL.
    let n = t.node_mut(&ids[2]).unwrap();
    n.flags.remove(NodeFlags::PRIMARY);
    n.flags.insert(NodeFlags::REPLICA);
    assert_eq!(evaluate_slot_by_slot(&t, &scfg), ClusterHealth::Ok);
    assert_eq!(ClusterState::evaluate(&t, &scfg), ClusterHealth::Ok);
    t.node_mut(&ids[2]).unwrap().flags.insert(NodeFlags::FAIL);
    assert_eq!(ClusterState::evaluate(&t, &scfg), ClusterHealth::Fail);
}

#[test]
fn cron_update_needed_only_while_fail() {
    let scfg = StateConfig {
        require_full_coverage: true,
        node_timeout_ms: NT,
    };
    let (t, _) = cluster(2, 3);
    let mut st = ClusterState::new();
    assert!(st.needs_cron_update());
    st.update(&t, Millis(0), &scfg);
    assert!(
        st.needs_cron_update(),
        "still FAIL during the writable delay"
    );
    assert_eq!(st.update(&t, Millis(2000), &scfg), Some(ClusterHealth::Ok));
    assert!(!st.needs_cron_update());
}

proptest::proptest! {
    #[test]
    fn fast_evaluation_matches_the_slot_by_slot_rule(
        others in 0usize..5,
        voting in 0usize..6,
        flags in proptest::collection::vec(0u8..6, 6),
        holes in proptest::collection::vec(0u16..16384, 0..3),
        full in proptest::bool::ANY,
    ) {
        let voting = voting.min(others + 1);
        let (mut t, ids) = cluster(others, voting);
        for s in holes {
            t.set_slot_owner(Slot::new(s).unwrap(), None).unwrap();
        }
        for (id, f) in ids.iter().zip(flags) {
            let n = t.node_mut(id).unwrap();
            match f {
                1 if !n.is_myself() => n.flags.insert(NodeFlags::PFAIL),
                2 if !n.is_myself() => n.flags.insert(NodeFlags::FAIL),
                3 => {
                    n.flags.remove(NodeFlags::PRIMARY);
                    n.flags.insert(NodeFlags::REPLICA);
                }
                4 if !n.is_myself() => {
                    n.flags.remove(NodeFlags::PRIMARY);
                    n.flags.insert(NodeFlags::REPLICA | NodeFlags::FAIL);
                }
                _ => {}
            }
        }
        let cfg = StateConfig { require_full_coverage: full, node_timeout_ms: NT };
        proptest::prop_assert_eq!(
            ClusterState::evaluate(&t, &cfg),
            evaluate_slot_by_slot(&t, &cfg)
        );
    }
}

//! Properties over random topologies.

mod common;

use common::*;
use ferrocluster_health::{
    quorum, Evidence, HealthConfig, HealthInputs, Ineligibility, QuorumVerdict, Readiness,
    ReplLink, ReplicationFacts, ShardVerdict, INFO_FIELDS,
};
use ferrocluster_slot::{Slot, SlotSet};
use ferrocluster_topology::{LinkState, NodeFlags, NodeId, Reply, Topology};
use proptest::prelude::*;
use std::collections::BTreeSet;

#[derive(Debug, Clone)]
struct NodeSpec {
    flags: u8, // bit0 PFAIL, bit1 FAIL, bit2 NOFAILOVER
    offset_zero: bool,
    offset: u64,
    link: bool,
    pong_ago: Option<u64>,
}

fn random_node_spec() -> impl Strategy<Value = NodeSpec> {
    (
        0u8..8,
        any::<bool>(),
        1u64..5000,
        prop::bool::weighted(0.8),
        prop::option::weighted(0.9, 0u64..40_000),
    )
        .prop_map(|(flags, offset_zero, offset, link, pong_ago)| NodeSpec {
            flags,
            offset_zero,
            offset,
            link,
            pong_ago,
        })
}

fn healthy_node_spec() -> impl Strategy<Value = NodeSpec> {
    (1u64..5000, 0u64..5_000).prop_map(|(offset, pong)| NodeSpec {
        flags: 0,
        offset_zero: false,
        offset,
        link: true,
        pong_ago: Some(pong),
    })
}

/// Mostly healthy nodes, so every verdict (OK included) occurs.
fn node_spec() -> impl Strategy<Value = NodeSpec> {
    prop_oneof![12 => healthy_node_spec(), 1 => random_node_spec()]
}

#[derive(Debug, Clone)]
struct Spec {
    primaries: Vec<(bool, NodeSpec, Vec<NodeSpec>)>, // (owns slots, primary, replicas)
    me: (usize, Option<usize>),
    unassigned: u16,
    factor: u32,
    state_ok: bool,
    facts: Option<(u8, u64)>,
}

fn spec() -> impl Strategy<Value = Spec> {
    prop::collection::vec(
        (
            prop::bool::weighted(0.85),
            node_spec(),
            prop_oneof![
                6 => prop::collection::vec(node_spec(), 1..3),
                1 => prop::collection::vec(node_spec(), 0..1),
            ],
        ),
        1..7,
    )
    .prop_flat_map(|primaries| {
        let n = primaries.len();
        (
            Just(primaries),
            (0..n, prop::option::of(0usize..3)),
            0u16..50,
            0u32..3,
            any::<bool>(),
            prop::option::of((0u8..3, 0u64..400)),
        )
    })
    .prop_map(
        |(primaries, me, unassigned, factor, state_ok, facts)| Spec {
            primaries,
            me,
            unassigned,
            factor,
            state_ok,
            facts,
        },
    )
}

fn apply(topo: &mut Topology, n: &NodeId, s: &NodeSpec) {
    let me = topo.myself_id() == n;
    let node = topo.node_mut(n).unwrap();
    if !me {
        if s.flags & 1 != 0 {
            node.flags.insert(NodeFlags::PFAIL);
        }
        if s.flags & 2 != 0 {
            node.flags.insert(NodeFlags::FAIL);
        }
        node.link = if s.link {
            LinkState::Connected
        } else {
            LinkState::Disconnected
        };
        node.pong_received = s.pong_ago.map(|a| NOW.saturating_sub_ms(a));
    }
    if s.flags & 4 != 0 {
        node.flags.insert(NodeFlags::NOFAILOVER);
    }
    node.repl_offset = if s.offset_zero { 0 } else { s.offset };
}

fn build(spec: &Spec) -> Topology {
    let np = spec.primaries.len() as u32;
    let max_r = spec.primaries.iter().map(|p| p.2.len()).max().unwrap_or(0) as u32;
    let (mi, mr) = spec.me;
    let me = match mr {
        Some(j) if j < spec.primaries[mi].2.len() => Me::Replica(mi as u32, j as u32),
        _ => Me::Primary(mi as u32),
    };
    let mut topo = cluster(np, max_r, me);
    // Remove replicas beyond each primary's count (never myself: its index is in range).
    for (i, (_, _, reps)) in spec.primaries.iter().enumerate() {
        for j in reps.len() as u32..max_r {
            topo.remove_node(&r(i as u32, j)).unwrap();
        }
    }
    // Slot-less primaries give their slots to the first slot-owning one (or nobody).
    let owner_of = |i: usize| spec.primaries[i].0;
    let heir = (0..spec.primaries.len())
        .find(|&i| owner_of(i))
        .map(|i| p(i as u32));
    for (i, (owns, ps, reps)) in spec.primaries.iter().enumerate() {
        let pid = p(i as u32);
        if !owns {
            let slots: Vec<Slot> = topo.node(&pid).unwrap().slots().iter().collect();
            for s in slots {
                topo.set_slot_owner(s, heir).unwrap();
            }
        }
        apply(&mut topo, &pid, ps);
        for (j, rs) in reps.iter().enumerate() {
            apply(&mut topo, &r(i as u32, j as u32), rs);
        }
    }
    for k in 0..spec.unassigned {
        topo.set_slot_owner(Slot::new(k * 300).unwrap(), None)
            .unwrap();
    }
    topo.check_invariants().unwrap();
    topo
}

fn facts(spec: &Spec) -> Option<ReplicationFacts> {
    spec.facts.map(|(kind, secs)| ReplicationFacts {
        link: match kind {
            0 => ReplLink::Up {
                last_interaction: NOW.saturating_sub_ms(secs * 1000),
            },
            1 => ReplLink::Down {
                since: Some(NOW.saturating_sub_ms(secs * 1000)),
            },
            _ => ReplLink::Down { since: None },
        },
        offset: secs,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn readiness_invariants(spec in spec()) {
        let topo = build(&spec);
        let config = HealthConfig {
            replica_validity_factor: spec.factor,
            ..HealthConfig::default()
        };
        let f = facts(&spec);
        let mut inputs = HealthInputs::new(&topo, NOW, config, spec.state_ok);
        if let Some(f) = f.as_ref() {
            inputs = inputs.with_replication(f);
        }
        let rd = Readiness::evaluate(&inputs);
        let q = &rd.quorum;

        // Quorum arithmetic.
        prop_assert_eq!(q.voting_primaries, topo.cluster_size());
        prop_assert_eq!(q.quorum, quorum(q.voting_primaries));
        prop_assert!(q.reachable <= q.voting_primaries);
        prop_assert_eq!(q.fail_agreeable, q.reachable >= q.quorum);

        // Verdicts.
        let slot_shards: BTreeSet<NodeId> =
            rd.shards.iter().filter(|s| s.owns_slots()).map(|s| s.primary).collect();
        let not_ready: BTreeSet<NodeId> = rd.shards.iter()
            .filter(|s| s.owns_slots() && !s.verdict.is_ready())
            .map(|s| s.primary).collect();
        let unable: BTreeSet<NodeId> = q.shards_unable.iter().map(|u| u.primary).collect();
        prop_assert_eq!(&unable, &not_ready);
        match q.verdict {
            QuorumVerdict::Ok => {
                prop_assert!(q.reachable >= q.quorum);
                prop_assert!(q.shards_unable.is_empty());
                prop_assert!(!slot_shards.is_empty());
            }
            QuorumVerdict::NotReady => {
                prop_assert!(q.fail_agreeable);
                prop_assert!(!q.shards_unable.is_empty());
            }
            QuorumVerdict::NoQuorum => {
                prop_assert!(!q.fail_agreeable);
                prop_assert_eq!(&unable, &slot_shards);
            }
        }
        prop_assert_eq!(rd.failover_ready(), q.verdict == QuorumVerdict::Ok);
        match q.reply() {
            Reply::Simple(t) => {
                prop_assert_eq!(q.verdict, QuorumVerdict::Ok);
                prop_assert!(t.starts_with("OK "));
                prop_assert!(!t.contains('\r') && !t.contains('\n'));
            }
            Reply::Error(t) => {
                prop_assert!(t.starts_with(q.verdict.code()));
                prop_assert!(!t.contains('\r') && !t.contains('\n'));
            }
            other => prop_assert!(false, "unexpected reply {:?}", other),
        }

        // Ready shards: the candidate is the best eligible replica and enough other voters
        // are reachable (recomputed independently here).
        for s in &rd.shards {
            prop_assert_eq!(s.replicas.len(), topo.replicas_of(&s.primary).count());
            if let ShardVerdict::Ready { candidate } = s.verdict {
                let c = s.replicas.iter().find(|r| r.node == candidate).unwrap();
                prop_assert!(c.is_eligible());
                for r in s.replicas.iter().filter(|r| r.is_eligible()) {
                    prop_assert!(
                        r.repl_offset < c.repl_offset
                            || (r.repl_offset == c.repl_offset && r.node >= c.node)
                    );
                }
                let others = topo.nodes()
                    .filter(|n| n.is_voting_primary() && *n.id() != s.primary)
                    .filter(|n| n.is_myself() || !(n.is_pfail() || n.is_fail()))
                    .count();
                prop_assert!(others >= q.quorum);
                prop_assert!(s.owns_slots());
            }
            for r in &s.replicas {
                match (r.evidence, r.ineligible) {
                    (Evidence::Proxy, Some(Ineligibility::DataTooOld { .. })) => {
                        prop_assert!(false, "proxy evidence cannot know the data age")
                    }
                    (Evidence::Local, Some(Ineligibility::Unreachable))
                    | (Evidence::Local, Some(Ineligibility::NoBusLink))
                    | (Evidence::Local, Some(Ineligibility::NoRecentPong { .. })) => {
                        prop_assert!(false, "local evidence uses the data-age rule only")
                    }
                    (_, Some(Ineligibility::NotSynced)) | (_, Some(Ineligibility::DataTooOld { .. })) => {
                        prop_assert!(spec.factor != 0, "factor 0 disables the data-age check");
                    }
                    _ => {}
                }
            }
        }

        // Health partitions the slots.
        let h = &rd.health;
        let assigned = SlotSet::full().difference(&h.unserved_slots);
        prop_assert_eq!(h.unserved_slots.len() + topo.assigned_slot_count(), 16384);
        prop_assert!(!h.pfail_slots.intersects(&h.fail_slots));
        prop_assert!(h.pfail_slots.is_subset(&assigned) && h.fail_slots.is_subset(&assigned));
        prop_assert!(h.disagreeing_slots().is_subset(&assigned));
        prop_assert_eq!(h.state_ok, spec.state_ok);

        // INFO: name:value lines, documented fixed fields first, one line per shard/replica.
        let text = rd.info_fields();
        let lines: Vec<&str> = text.split("\r\n").filter(|l| !l.is_empty()).collect();
        let nrep: usize = rd.shards.iter().map(|s| s.replicas.len()).sum();
        prop_assert_eq!(lines.len(), INFO_FIELDS.len() + rd.shards.len() + nrep);
        for (k, l) in lines.iter().enumerate() {
            let (name, value) = l.split_once(':').unwrap();
            prop_assert!(!value.contains(':') && !value.contains('\n') && !value.contains('\r'));
            if k < INFO_FIELDS.len() {
                prop_assert_eq!(name, INFO_FIELDS[k]);
            } else {
                prop_assert!(name.starts_with("shard"));
            }
        }
    }
}

//! Health (what `cluster_state` hides), configEpoch disagreement, the INFO renderer and the
//! summary line.

mod common;

use common::*;
use ferrocluster_health::{
    Health, HealthConfig, HealthInputs, Readiness, ReplLink, ReplicationFacts, INFO_FIELDS,
};
use ferrocluster_slot::{Slot, SlotSet};
use ferrocluster_topology::{ConfigEpoch, Node, NodeFlags, Topology};

fn slot(n: u16) -> Slot {
    Slot::new(n).unwrap()
}

fn no_coverage() -> HealthConfig {
    HealthConfig {
        require_full_coverage: false,
        ..HealthConfig::default()
    }
}

#[test]
fn unserved_slots_are_reported_when_coverage_is_not_required() {
    let mut topo = cluster(3, 1, Me::Primary(0));
    topo.set_slot_owner(slot(100), None).unwrap();
    topo.set_slot_owner(slot(16383), None).unwrap();
    // The node keeps cluster_state ok with require-full-coverage no (§10 step 2).
    let h = Health::evaluate(&HealthInputs::new(&topo, NOW, no_coverage(), true));
    assert!(h.state_ok);
    assert!(!h.coverage_required);
    assert_eq!(
        h.unserved_slots.iter().collect::<Vec<_>>(),
        [slot(100), slot(16383)]
    );
    assert_eq!(h.grade(), "degraded");
    let rd = Readiness::evaluate(&HealthInputs::new(&topo, NOW, no_coverage(), true));
    assert!(rd.info_fields().contains("\r\nslots_unserved:2\r\n"));
    assert!(rd
        .info_fields()
        .starts_with("cluster_state:ok\r\ncluster_health:degraded\r\n"));
}

#[test]
fn pfail_and_fail_slots_and_nodes() {
    let mut topo = cluster(3, 1, Me::Primary(0));
    flag(&mut topo, &p(1), NodeFlags::PFAIL);
    flag(&mut topo, &p(2), NodeFlags::FAIL);
    flag(&mut topo, &r(0, 0), NodeFlags::FAIL);
    flag(&mut topo, &r(2, 0), NodeFlags::PFAIL);
    // A handshake node flagged PFAIL is not reported.
    let mut hs = Node::new(id(90), sid(90), NOW);
    hs.flags = NodeFlags::HANDSHAKE | NodeFlags::PFAIL;
    topo.add_node(hs).unwrap();
    let h = Health::evaluate(&HealthInputs::new(
        &topo,
        NOW,
        HealthConfig::default(),
        true,
    ));
    assert_eq!(h.pfail_slots, *topo.node(&p(1)).unwrap().slots());
    assert_eq!(h.fail_slots, *topo.node(&p(2)).unwrap().slots());
    assert_eq!(h.pfail_slots.len(), 5461);
    assert_eq!(h.pfail_nodes, [p(1), r(2, 0)]);
    assert_eq!(h.fail_nodes, [r(0, 0), p(2)]);
    assert!(h.unserved_slots.is_empty());
    assert_eq!(h.grade(), "degraded");
    let h = Health::evaluate(&HealthInputs::new(
        &topo,
        NOW,
        HealthConfig::default(),
        false,
    ));
    assert_eq!(h.grade(), "fail");
}

#[test]
fn healthy_cluster_grades_ok() {
    let topo = cluster(3, 1, Me::Primary(0));
    let h = Health::evaluate(&HealthInputs::new(
        &topo,
        NOW,
        HealthConfig::default(),
        true,
    ));
    assert_eq!(h.grade(), "ok");
    assert!(h.disagreeing_slots().is_empty());
}

#[test]
fn slots_owned_by_a_replica_disagree() {
    let mut topo = cluster(3, 1, Me::Primary(0));
    // Our table still binds slot 7 to a node that now announces itself as a replica.
    topo.set_slot_owner(slot(7), Some(r(1, 0))).unwrap();
    let h = Health::evaluate(&HealthInputs::new(
        &topo,
        NOW,
        HealthConfig::default(),
        true,
    ));
    assert_eq!(
        h.disagreements.owner_not_primary.iter().collect::<Vec<_>>(),
        [slot(7)]
    );
    assert!(h.disagreements.epoch_tie.is_empty());
    assert_eq!(h.disagreeing_slots().len(), 1);
}

#[test]
fn config_epoch_ties_between_slot_owning_primaries_disagree() {
    let mut topo = cluster(3, 1, Me::Primary(0));
    topo.node_mut(&p(2)).unwrap().config_epoch = ConfigEpoch(2); // same as primary 1
                                                                 // A replica's epoch (0 here) and a slot-less primary's never count.
    let mut e = Node::new(id(60), sid(60), NOW);
    e.flags = NodeFlags::PRIMARY;
    e.config_epoch = ConfigEpoch(1); // same as primary 0, but owns nothing
    topo.add_node(e).unwrap();
    let h = Health::evaluate(&HealthInputs::new(
        &topo,
        NOW,
        HealthConfig::default(),
        true,
    ));
    let expected = topo
        .node(&p(1))
        .unwrap()
        .slots()
        .union(topo.node(&p(2)).unwrap().slots());
    assert_eq!(h.disagreements.epoch_tie, expected);
    assert_eq!(h.disagreeing_slots().len(), 16384 - 5461);
}

#[test]
fn owner_not_claiming_bitmap_counts_owned_slots_only() {
    let mut topo = cluster(3, 1, Me::Primary(0));
    topo.set_slot_owner(slot(3), None).unwrap();
    let nc: SlotSet = [slot(3), slot(4), slot(9000)].into_iter().collect();
    let inputs =
        HealthInputs::new(&topo, NOW, HealthConfig::default(), true).with_owner_not_claiming(&nc);
    let h = Health::evaluate(&inputs);
    assert_eq!(
        h.disagreements.not_claimed.iter().collect::<Vec<_>>(),
        [slot(4), slot(9000)]
    );
    let rd = Readiness::evaluate(&inputs);
    assert!(rd.info_fields().contains("\r\nslots_disagreeing:2\r\n"));
}

fn small() -> Topology {
    // Myself = primary 0 owning everything, one replica; offsets 1000 / 400.
    let mut topo = cluster(1, 1, Me::Primary(0));
    topo.node_mut(&r(0, 0)).unwrap().repl_offset = 400;
    topo.node_mut(&r(0, 0)).unwrap().pong_received = Some(NOW.saturating_sub_ms(250));
    topo
}

#[test]
fn info_section_exact_text() {
    let topo = small();
    let rd = Readiness::evaluate(&HealthInputs::new(
        &topo,
        NOW,
        HealthConfig::default(),
        true,
    ));
    // One primary: size 1, quorum 1; if it failed no other voter would remain.
    let expected = format!(
        "# Readiness\r\n\
         cluster_state:ok\r\n\
         cluster_health:ok\r\n\
         failover_ready:no\r\n\
         failover_shards:1\r\n\
         failover_ready_shards:0\r\n\
         failover_blocker:no_quorum\r\n\
         quorum_verdict:notready\r\n\
         quorum_voting_primaries:1\r\n\
         quorum_reachable_primaries:1\r\n\
         quorum_needed:1\r\n\
         quorum_fail_agreeable:yes\r\n\
         quorum_shards_unable:1\r\n\
         slots_unserved:0\r\n\
         slots_pfail:0\r\n\
         slots_fail:0\r\n\
         slots_disagreeing:0\r\n\
         nodes_pfail:0\r\n\
         nodes_fail:0\r\n\
         shard0:id={s},primary={p},slots=16384,replicas=1,eligible=1,ready=no,reason=no_quorum,candidate=none\r\n\
         shard0_replica0:id={r},eligible=yes,reason=none,evidence=proxy,link=up,offset=400,lag=600,data_age_ms=-1,pong_age_ms=250\r\n",
        s = sid(0),
        p = p(0),
        r = r(0, 0),
    );
    assert_eq!(rd.info_section(), expected);
}

#[test]
fn info_replica_line_for_local_evidence() {
    let topo = cluster(3, 1, Me::Replica(0, 0));
    let f = ReplicationFacts {
        link: ReplLink::Down { since: None },
        offset: 0,
    };
    let rd = Readiness::evaluate(
        &HealthInputs::new(&topo, NOW, HealthConfig::default(), true).with_replication(&f),
    );
    let line = rd
        .info_fields()
        .lines()
        .find(|l| l.starts_with("shard"))
        .unwrap()
        .to_owned();
    // Myself (the replica) is first in table order, so primary 0 is the first primary seen.
    assert_eq!(
        line,
        format!(
            "shard0:id={},primary={},slots=5461,replicas=1,eligible=0,ready=no,reason=no_eligible_replica,candidate=none",
            sid(0),
            p(0)
        )
    );
    assert!(rd.info_fields().contains(&format!(
        "shard0_replica0:id={},eligible=no,reason=not_synced,evidence=local,link=down,offset=0,lag=1000,data_age_ms=-1,pong_age_ms=-1\r\n",
        r(0, 0)
    )));
}

#[test]
fn info_field_names_are_the_documented_ones_in_order() {
    let mut topo = cluster(3, 2, Me::Primary(1));
    flag(&mut topo, &p(2), NodeFlags::PFAIL);
    let rd = Readiness::evaluate(&HealthInputs::new(
        &topo,
        NOW,
        HealthConfig::default(),
        true,
    ));
    let text = rd.info_fields();
    assert!(text.ends_with("\r\n"));
    let names: Vec<&str> = text
        .split("\r\n")
        .filter(|l| !l.is_empty())
        .map(|l| l.split_once(':').unwrap().0)
        .collect();
    assert_eq!(&names[..INFO_FIELDS.len()], &INFO_FIELDS[..]);
    let rest: Vec<String> = (0..3)
        .flat_map(|i| {
            [
                format!("shard{i}"),
                format!("shard{i}_replica0"),
                format!("shard{i}_replica1"),
            ]
        })
        .collect();
    assert_eq!(&names[INFO_FIELDS.len()..], &rest[..]);
    for l in text.split("\r\n").filter(|l| !l.is_empty()) {
        assert_eq!(l.matches(':').count(), 1, "{l}");
    }
}

#[test]
fn readiness_turns_true_once_every_replica_has_synced() {
    // The scenario: right after creation every node says ok, but a replica with offset
    // 0 has never synced.
    let mut topo = cluster(3, 1, Me::Primary(0));
    for i in 0..3 {
        topo.node_mut(&r(i, 0)).unwrap().repl_offset = 0;
    }
    let eval = |t: &Topology| {
        Readiness::evaluate(&HealthInputs::new(t, NOW, HealthConfig::default(), true))
    };
    let rd = eval(&topo);
    assert!(!rd.failover_ready());
    assert_eq!(
        rd.summary(),
        format!(
            "cluster ok, failover-ready: no (replica {} of primary {} has not synced yet)",
            r(0, 0),
            p(0)
        )
    );
    topo.node_mut(&r(0, 0)).unwrap().repl_offset = 10;
    topo.node_mut(&r(1, 0)).unwrap().repl_offset = 10;
    assert_eq!(
        eval(&topo).summary(),
        format!(
            "cluster ok, failover-ready: no (replica {} of primary {} has not synced yet)",
            r(2, 0),
            p(2)
        )
    );
    topo.node_mut(&r(2, 0)).unwrap().repl_offset = 10;
    let rd = eval(&topo);
    assert!(rd.failover_ready());
    assert_eq!(rd.summary(), "cluster ok, failover-ready: yes");
    assert!(rd.info_fields().contains("\r\nfailover_blocker:none\r\n"));
}

#[test]
fn summary_of_other_blockers() {
    let topo = cluster(3, 0, Me::Primary(0));
    let rd = Readiness::evaluate(&HealthInputs::new(
        &topo,
        NOW,
        HealthConfig::default(),
        false,
    ));
    assert_eq!(
        rd.summary(),
        format!(
            "cluster fail, failover-ready: no (shard of primary {} has no replica)",
            p(0)
        )
    );
    let mut topo = cluster(3, 1, Me::Primary(0));
    for s in Slot::all() {
        topo.set_slot_owner(s, None).unwrap();
    }
    let rd = Readiness::evaluate(&HealthInputs::new(
        &topo,
        NOW,
        HealthConfig::default(),
        false,
    ));
    assert_eq!(
        rd.summary(),
        "cluster fail, failover-ready: no (0 usable voting primaries of 0, quorum 1: no voting primaries (no slots assigned))"
    );
    assert!(rd
        .info_fields()
        .contains("\r\nfailover_blocker:no_quorum\r\n"));
}

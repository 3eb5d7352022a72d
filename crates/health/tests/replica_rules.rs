//! Replica eligibility rules: the data-age rule for myself (§12.2) and the gossip proxies for
//! other replicas. Expected values come from the facts sheet's formulas.

mod common;

use common::*;
use ferrocluster_health::{
    quorum, shard_readiness, Evidence, HealthConfig, HealthInputs, Ineligibility, ReplLink,
    ReplicaEligibility, ReplicationFacts,
};
use ferrocluster_topology::{LinkState, Millis, NodeFlags, NodeId, Topology};

fn cfg() -> HealthConfig {
    HealthConfig::default()
}

fn eligibility(
    topo: &Topology,
    config: HealthConfig,
    facts: Option<&ReplicationFacts>,
    who: &NodeId,
) -> ReplicaEligibility {
    let mut inputs = HealthInputs::new(topo, NOW, config, true);
    if let Some(f) = facts {
        inputs = inputs.with_replication(f);
    }
    shard_readiness(&inputs)
        .into_iter()
        .flat_map(|s| s.replicas)
        .find(|r| r.node == *who)
        .unwrap()
}

#[test]
fn validity_limit_is_node_timeout_times_factor_plus_ping_period() {
    // §12.2: repl-ping-replica-period × 1000 + NODE_TIMEOUT × factor.
    assert_eq!(cfg().validity_limit_ms(), Some(10_000 + 15_000 * 10));
    let c = HealthConfig {
        node_timeout_ms: 5_000,
        replica_validity_factor: 2,
        repl_ping_replica_period_ms: 1_000,
        require_full_coverage: false,
    };
    assert_eq!(c.validity_limit_ms(), Some(11_000));
    let off = HealthConfig {
        replica_validity_factor: 0,
        ..cfg()
    };
    assert_eq!(off.validity_limit_ms(), None);
}

#[test]
fn quorum_is_half_plus_one() {
    // Facts sheet §0: size/2 + 1, integer division.
    for (size, q) in [
        (0, 1),
        (1, 1),
        (2, 2),
        (3, 2),
        (4, 3),
        (5, 3),
        (6, 4),
        (7, 4),
    ] {
        assert_eq!(quorum(size), q, "size {size}");
    }
}

#[test]
fn data_age_uses_whole_seconds_and_subtracts_node_timeout_once_exceeded() {
    let up = |t: u64| ReplicationFacts {
        link: ReplLink::Up {
            last_interaction: Millis(t),
        },
        offset: 1,
    };
    // 1 s (within NODE_TIMEOUT): unchanged.
    assert_eq!(
        up(119_500).data_age_ms(Millis(120_000), 15_000),
        Some(1_000)
    );
    // Same second: 0 even though 998 ms passed (Valkey compares unixtime seconds).
    assert_eq!(up(100_001).data_age_ms(Millis(100_999), 15_000), Some(0));
    // Exactly NODE_TIMEOUT: not exceeded, unchanged.
    assert_eq!(
        up(100_000).data_age_ms(Millis(115_000), 15_000),
        Some(15_000)
    );
    // 100 s > 15 s: minus 15 s.
    assert_eq!(
        up(100_000).data_age_ms(Millis(200_000), 15_000),
        Some(85_000)
    );
    let down = ReplicationFacts {
        link: ReplLink::Down {
            since: Some(Millis(100_000)),
        },
        offset: 1,
    };
    assert_eq!(down.data_age_ms(Millis(130_000), 15_000), Some(15_000));
    let never = ReplicationFacts {
        link: ReplLink::Down { since: None },
        offset: 0,
    };
    assert_eq!(never.data_age_ms(Millis(130_000), 15_000), None);
    // Time going backwards clamps to 0.
    assert_eq!(up(200_000).data_age_ms(Millis(100_000), 15_000), Some(0));
}

#[test]
fn local_never_synced_replica_is_not_eligible_unless_factor_is_zero() {
    let topo = cluster(3, 1, Me::Replica(0, 0));
    let never = ReplicationFacts {
        link: ReplLink::Down { since: None },
        offset: 0,
    };
    let e = eligibility(&topo, cfg(), Some(&never), &r(0, 0));
    assert_eq!(e.evidence, Evidence::Local);
    assert_eq!(e.ineligible, Some(Ineligibility::NotSynced));
    assert!(!e.link_up);
    assert_eq!(e.data_age_ms, None);
    // Factor 0 disables the data-age check: Valkey would then promote it.
    let off = HealthConfig {
        replica_validity_factor: 0,
        ..cfg()
    };
    assert_eq!(
        eligibility(&topo, off, Some(&never), &r(0, 0)).ineligible,
        None
    );
}

#[test]
fn local_data_age_boundary_is_inclusive() {
    let topo = cluster(3, 1, Me::Replica(0, 0));
    // limit 160000; age = (now - since) - 15000, so since = now - 175 s is exactly the limit.
    let at = |secs_ago: u64| ReplicationFacts {
        link: ReplLink::Down {
            since: Some(NOW.saturating_sub_ms(secs_ago * 1000)),
        },
        offset: 500,
    };
    let e = eligibility(&topo, cfg(), Some(&at(175)), &r(0, 0));
    assert_eq!(e.data_age_ms, Some(160_000));
    assert_eq!(e.ineligible, None);
    let e = eligibility(&topo, cfg(), Some(&at(176)), &r(0, 0));
    assert_eq!(
        e.ineligible,
        Some(Ineligibility::DataTooOld {
            age_ms: 161_000,
            limit_ms: 160_000
        })
    );
    assert_eq!(e.repl_offset, 500);
    // Primary offset 1000 from gossip: lag 500.
    assert_eq!(e.offset_lag, Some(500));
}

#[test]
fn local_link_up_recent_interaction_is_eligible() {
    let topo = cluster(3, 1, Me::Replica(1, 0));
    let f = ReplicationFacts {
        link: ReplLink::Up {
            last_interaction: NOW,
        },
        offset: 1000,
    };
    let e = eligibility(&topo, cfg(), Some(&f), &r(1, 0));
    assert!(e.is_eligible());
    assert!(e.link_up);
    assert_eq!(e.data_age_ms, Some(0));
    assert_eq!(e.offset_lag, Some(0));
}

#[test]
fn nofailover_flag_wins_over_good_data() {
    let mut topo = cluster(3, 1, Me::Replica(0, 0));
    flag(&mut topo, &r(0, 0), NodeFlags::NOFAILOVER);
    let f = ReplicationFacts {
        link: ReplLink::Up {
            last_interaction: NOW,
        },
        offset: 1000,
    };
    let e = eligibility(&topo, cfg(), Some(&f), &r(0, 0));
    assert_eq!(e.ineligible, Some(Ineligibility::NoFailoverFlag));
    assert!(e.no_failover);
}

#[test]
fn myself_without_facts_falls_back_to_its_recorded_offset() {
    let mut topo = cluster(3, 1, Me::Replica(0, 0));
    let e = eligibility(&topo, cfg(), None, &r(0, 0));
    assert_eq!(e.evidence, Evidence::Proxy);
    assert!(e.is_eligible());
    assert!(e.link_up);
    topo.myself_mut().repl_offset = 0;
    let e = eligibility(&topo, cfg(), None, &r(0, 0));
    assert_eq!(e.ineligible, Some(Ineligibility::NotSynced));
}

#[test]
fn proxy_rules_in_order() {
    let base = cluster(3, 1, Me::Primary(0));
    let who = r(1, 0);
    let check = |edit: &dyn Fn(&mut Topology), config: HealthConfig| {
        let mut t = base.clone();
        edit(&mut t);
        eligibility(&t, config, None, &who)
    };
    // Healthy.
    let e = check(&|_| {}, cfg());
    assert_eq!(e.evidence, Evidence::Proxy);
    assert_eq!(e.ineligible, None);
    assert_eq!(e.pong_age_ms, Some(0));
    // PFAIL / FAIL first, even with NOFAILOVER and offset 0.
    for f in [NodeFlags::PFAIL, NodeFlags::FAIL] {
        let e = check(
            &|t| {
                flag(t, &who, f | NodeFlags::NOFAILOVER);
                t.node_mut(&who).unwrap().repl_offset = 0;
            },
            cfg(),
        );
        assert_eq!(e.ineligible, Some(Ineligibility::Unreachable));
    }
    // NOFAILOVER before offset 0.
    let e = check(
        &|t| {
            flag(t, &who, NodeFlags::NOFAILOVER);
            t.node_mut(&who).unwrap().repl_offset = 0;
        },
        cfg(),
    );
    assert_eq!(e.ineligible, Some(Ineligibility::NoFailoverFlag));
    // Offset 0 before a missing link.
    let unsynced = |t: &mut Topology| {
        let n = t.node_mut(&who).unwrap();
        n.repl_offset = 0;
        n.link = LinkState::Disconnected;
    };
    assert_eq!(
        check(&unsynced, cfg()).ineligible,
        Some(Ineligibility::NotSynced)
    );
    // Factor 0 ignores the offset; the missing link remains.
    let off = HealthConfig {
        replica_validity_factor: 0,
        ..cfg()
    };
    assert_eq!(
        check(&unsynced, off).ineligible,
        Some(Ineligibility::NoBusLink)
    );
    // Pong age: NODE_TIMEOUT inclusive.
    let pong = |ms_ago: Option<u64>| {
        move |t: &mut Topology| {
            t.node_mut(&who).unwrap().pong_received = ms_ago.map(|a| NOW.saturating_sub_ms(a));
        }
    };
    assert_eq!(check(&pong(Some(15_000)), cfg()).ineligible, None);
    assert_eq!(
        check(&pong(Some(15_001)), cfg()).ineligible,
        Some(Ineligibility::NoRecentPong {
            age_ms: Some(15_001),
            limit_ms: 15_000
        })
    );
    assert_eq!(
        check(&pong(None), cfg()).ineligible,
        Some(Ineligibility::NoRecentPong {
            age_ms: None,
            limit_ms: 15_000
        })
    );
}

#[test]
fn offset_lag_needs_a_known_primary_offset() {
    let mut topo = cluster(3, 1, Me::Primary(0));
    topo.node_mut(&r(2, 0)).unwrap().repl_offset = 400;
    assert_eq!(
        eligibility(&topo, cfg(), None, &r(2, 0)).offset_lag,
        Some(600)
    );
    topo.node_mut(&p(2)).unwrap().repl_offset = 0;
    assert_eq!(eligibility(&topo, cfg(), None, &r(2, 0)).offset_lag, None);
    // A replica ahead of the primary's last advertised offset has lag 0.
    topo.node_mut(&p(2)).unwrap().repl_offset = 300;
    assert_eq!(
        eligibility(&topo, cfg(), None, &r(2, 0)).offset_lag,
        Some(0)
    );
}

#[test]
fn reason_texts_and_codes() {
    assert_eq!(Ineligibility::NotSynced.to_string(), "has not synced yet");
    assert_eq!(Ineligibility::NotSynced.code(), "not_synced");
    assert_eq!(
        Ineligibility::DataTooOld {
            age_ms: 5,
            limit_ms: 4
        }
        .to_string(),
        "has data 5 ms old, over the 4 ms validity limit"
    );
    let codes: Vec<&str> = [
        Ineligibility::Unreachable,
        Ineligibility::NoFailoverFlag,
        Ineligibility::NotSynced,
        Ineligibility::DataTooOld {
            age_ms: 0,
            limit_ms: 0,
        },
        Ineligibility::NoBusLink,
        Ineligibility::NoRecentPong {
            age_ms: None,
            limit_ms: 0,
        },
    ]
    .iter()
    .map(|i| i.code())
    .collect();
    assert_eq!(
        codes,
        [
            "unreachable",
            "nofailover",
            "not_synced",
            "data_too_old",
            "no_bus_link",
            "no_recent_pong"
        ]
    );
}

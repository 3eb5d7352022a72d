//! Readiness, quorum check and health in the simulator (issue 11): the node's `readiness`,
//! `quorum_check` and `health` queries (crate `ferrocluster-health`) over a running cluster
//! whose replication the simulator plays. Expected values: facts sheet §10, §12.2 and the
//! health crate's documented rules (a replica that never completed a sync is not eligible;
//! NOQUORUM when fewer than size/2 + 1 voting primaries are reachable).

use ferrocluster_health::{Ineligibility, NotReady, QuorumVerdict, ShardVerdict};
use ferrocluster_node::{ClusterConfig, Reply};
use ferrocluster_sim::failover::host_of;
use ferrocluster_sim::seed::check_seeds;
use ferrocluster_sim::{
    build_world, cluster_sim, ClusterInvariants, ClusterSimExt, Layout, NetConfig, World,
};
use ferrocluster_slot::Slot;
use std::error::Error;

type Res = Result<(), Box<dyn Error>>;

const NT: u64 = 2_000;
const SEEDS: [u64; 3] = [1, 2, 3];

fn config() -> ClusterConfig {
    ClusterConfig {
        node_timeout_ms: NT,
        ..ClusterConfig::default()
    }
}

fn ensure(cond: bool, what: impl FnOnce() -> String) -> Res {
    if cond {
        Ok(())
    } else {
        Err(what().into())
    }
}

fn ready_everywhere(w: &World, hosts: &[usize]) -> bool {
    let now = w.now();
    hosts
        .iter()
        .all(|&h| w.node(h).is_some_and(|n| n.readiness(now).failover_ready()))
}

#[test]
fn readiness_is_false_until_every_replica_completed_a_sync() {
    check_seeds(
        "readiness_is_false_until_every_replica_completed_a_sync",
        SEEDS,
        |seed| -> Res {
            // Primaries 0, 1, 2 with data; replicas 3, 4, 5 join with their replication
            // links blocked: they never complete a sync.
            let sim = cluster_sim(seed, 6, config(), NetConfig::default())?;
            let mut w = World::new(sim)?;
            for r in 3..6 {
                w.block_data(r, true);
            }
            for h in 1..6 {
                w.sim_mut().meet(h, 0)?;
            }
            let all: Vec<usize> = (0..6).collect();
            ensure(
                w.run_until_cond(20 * NT, |w| w.sim().full_mesh(&all))?,
                || "no mesh".into(),
            )?;
            w.sim_mut().assign_slots_evenly(&[0, 1, 2])?;
            let l = Layout::uniform(3, 1);
            let slots: Vec<Slot> = (0..3).map(|i| l.first_slot(i)).collect();
            w.start_writer(slots, 10);
            ensure(
                w.run_until_cond(10 * NT, |w| {
                    all.iter()
                        .all(|&h| w.node(h).is_some_and(|n| n.cluster_state_ok()))
                })?,
                || "cluster_state never ok".into(),
            )?;
            w.run_for(500)?;
            for (r, p) in [(3usize, 0usize), (4, 1), (5, 2)] {
                w.sim_mut().replicate(r, p)?;
            }
            w.run_for(3 * NT)?;
            let now = w.now();
            for h in 0..6 {
                let rd = w.node(h).unwrap().readiness(now);
                ensure(rd.health.state_ok && !rd.failover_ready(), || {
                    format!("host {h} ready before any sync: {}", rd.summary())
                })?;
                ensure(rd.quorum.verdict == QuorumVerdict::NotReady, || {
                    format!("host {h}: verdict {:?}", rd.quorum.verdict)
                })?;
                // Every slot-owning shard is held back by its unsynced replica.
                ensure(rd.quorum.shards_unable.len() == 3, || {
                    format!("host {h}: {} shards unable", rd.quorum.shards_unable.len())
                })?;
                for s in &rd.quorum.shards_unable {
                    ensure(
                        matches!(
                            s.reason,
                            NotReady::NoEligibleReplica {
                                why: Ineligibility::NotSynced,
                                ..
                            }
                        ),
                        || format!("host {h}: shard reason {:?}", s.reason),
                    )?;
                }
            }
            // The replicas sync; every view turns ready.
            for r in 3..6 {
                w.block_data(r, false);
            }
            let ready = w.run_until_cond(5 * NT, |w| ready_everywhere(w, &all))?;
            ensure(ready, || {
                let now = w.now();
                let sums: Vec<String> = (0..6)
                    .map(|h| w.node(h).unwrap().readiness(now).summary())
                    .collect();
                format!("not ready after the syncs: {sums:?}")
            })?;
            for r in 3..6 {
                ensure(w.synced(r), || format!("replica {r} not synced"))?;
            }
            let now = w.now();
            let q = w.node(0).unwrap().quorum_check(now);
            ensure(q.verdict == QuorumVerdict::Ok, || format!("{q:?}"))?;
            ensure(
                matches!(q.reply(), Reply::Simple(ref s) if s.starts_with("OK")),
                || format!("reply {:?}", q.reply()),
            )?;
            Ok(())
        },
    );
}

#[test]
fn the_quorum_check_turns_noquorum_when_most_voting_primaries_are_unreachable() {
    check_seeds(
        "the_quorum_check_turns_noquorum_when_most_voting_primaries_are_unreachable",
        SEEDS,
        |seed| -> Res {
            let l = Layout::uniform(3, 1);
            let mut w = build_world(
                seed,
                config(),
                NetConfig::default(),
                &l,
                ClusterInvariants::new(),
            )?;
            let slots: Vec<Slot> = (0..3).map(|i| l.first_slot(i)).collect();
            w.start_writer(slots, 10);
            w.run_for(NT)?;
            let now = w.now();
            ensure(
                w.node(2).unwrap().quorum_check(now).verdict == QuorumVerdict::Ok,
                || "not OK before the faults".into(),
            )?;
            // Hosts 2 and 5 (primary 2 and its replica) lose the other four.
            w.sim_mut().split(&[&[2, 5], &[0, 1, 3, 4]]);
            let noq = w.run_until_cond(3 * NT, |w| {
                let now = w.now();
                [2usize, 5].iter().all(|&h| {
                    w.node(h).unwrap().quorum_check(now).verdict == QuorumVerdict::NoQuorum
                })
            })?;
            ensure(noq, || "never NOQUORUM on both minority hosts".into())?;
            let now = w.now();
            for h in [2usize, 5] {
                let q = w.node(h).unwrap().quorum_check(now);
                ensure(q.verdict == QuorumVerdict::NoQuorum, || {
                    format!("host {h}: {:?}", q.verdict)
                })?;
                ensure(
                    q.voting_primaries == 3 && q.reachable == 1 && q.quorum == 2,
                    || format!("host {h}: {q:?}"),
                )?;
                ensure(!q.fail_agreeable, || "FAIL agreeable".into())?;
                // Every slot-owning shard is named: none can fail over from here.
                let mut named: Vec<usize> = q
                    .shards_unable
                    .iter()
                    .filter_map(|s| host_of(w.sim(), &s.primary))
                    .collect();
                named.sort_unstable();
                ensure(named == vec![0, 1, 2], || {
                    format!("host {h}: shards named {named:?}")
                })?;
                ensure(
                    matches!(q.reply(), Reply::Error(ref e) if e.starts_with("NOQUORUM")),
                    || format!("host {h}: reply {:?}", q.reply()),
                )?;
                ensure(!w.node(h).unwrap().cluster_state_ok(), || {
                    format!("host {h}: cluster_state ok in the minority")
                })?;
            }
            // The majority side still has a quorum (2 of 3 voting primaries).
            let q = w.node(0).unwrap().quorum_check(now);
            ensure(
                q.verdict != QuorumVerdict::NoQuorum && q.fail_agreeable,
                || format!("majority side: {q:?}"),
            )?;
            w.sim_mut().heal();
            let back = w.run_until_cond(5 * NT, |w| {
                let now = w.now();
                w.node(2).unwrap().quorum_check(now).verdict != QuorumVerdict::NoQuorum
            })?;
            ensure(back, || "still NOQUORUM after the heal".into())?;
            Ok(())
        },
    );
}

#[test]
fn health_reports_unserved_slots_when_full_coverage_is_not_required() {
    check_seeds(
        "health_reports_unserved_slots_when_full_coverage_is_not_required",
        SEEDS,
        |seed| -> Res {
            for full in [false, true] {
                let cfg = ClusterConfig {
                    require_full_coverage: full,
                    ..config()
                };
                let sim = cluster_sim(seed, 3, cfg, NetConfig::default())?;
                let mut w = World::new(sim)?;
                for h in 1..3 {
                    w.sim_mut().meet(h, 0)?;
                }
                ensure(
                    w.run_until_cond(20 * NT, |w| w.sim().full_mesh(&[0, 1, 2]))?,
                    || "no mesh".into(),
                )?;
                // Slots 0..=9999 only: 6384 slots have no owner.
                w.sim_mut().add_slot_range(0, 0, 4999)?;
                w.sim_mut().add_slot_range(1, 5000, 9999)?;
                w.run_for(5 * NT)?;
                let now = w.now();
                for h in 0..3 {
                    let health = w.node(h).unwrap().health(now);
                    ensure(health.unserved_slots.len() == 6384, || {
                        format!("host {h}: {} unserved", health.unserved_slots.len())
                    })?;
                    ensure(health.coverage_required == full, || "coverage flag".into())?;
                    // §10 step 2: the state ignores unserved slots without full coverage.
                    ensure(health.state_ok != full, || {
                        format!(
                            "host {h}: state ok={} with full coverage {full}",
                            health.state_ok
                        )
                    })?;
                    ensure(
                        health.fail_slots.is_empty() && health.pfail_slots.is_empty(),
                        || "failing slots".into(),
                    )?;
                    let rd = w.node(h).unwrap().readiness(now);
                    // The two slot-owning shards have no replica: not ready.
                    let no_replicas = rd
                        .shards
                        .iter()
                        .filter(|s| s.owns_slots())
                        .all(|s| s.verdict == ShardVerdict::NotReady(NotReady::NoReplicas));
                    ensure(no_replicas, || format!("host {h}: {}", rd.summary()))?;
                }
            }
            Ok(())
        },
    );
}

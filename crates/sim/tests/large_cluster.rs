//! Failure detection and elections in large clusters (issue 23): the three failure modes of
//! Redis Cluster that show only on one link or at 30–60 shards, as seeded simulator
//! scenarios with the spec's bounds as assertions.
//!
//! 1. `gossip_never_keeps_a_node_we_cannot_reach_alive`: A–C partitioned, B–C healthy.
//! 2. `pfail_becomes_fail_at_48_primaries`: 48 primaries × 1 replica, one primary killed.
//! 3. `ten_simultaneous_failovers_at_30_primaries`: 30 primaries × 1 replica, 10 killed
//!    in one tick.
//!
//! CI runs a few seeds of each (debug build); the `*_100_seeds` variants are `#[ignore]`d
//! and print the worst and median figures next to the bound (run them in release):
//!
//! ```text
//! cargo test -p ferrocluster-sim --release --test large_cluster -- --ignored --nocapture
//! ```
//!
//! `FERROCLUSTER_SIM_SEED=<seed>` replays one seed of any of them.

use ferrocluster_node::gossip::CRON_PERIOD_MS;
use ferrocluster_node::{ClusterConfig, ClusterNode};
use ferrocluster_sim::seed::{check_seeds, seeds_or};
use ferrocluster_sim::{
    preset_cluster_sim_staggered, ClusterInvariants, ClusterSim, ClusterSimExt, NetConfig,
};
use ferrocluster_topology::Millis;
use std::cell::RefCell;
use std::error::Error;

type Res<T = ()> = Result<T, Box<dyn Error>>;

fn ensure(cond: bool, what: impl FnOnce() -> String) -> Res {
    if cond {
        Ok(())
    } else {
        Err(what().into())
    }
}

fn config(node_timeout_ms: u64) -> ClusterConfig {
    ClusterConfig {
        node_timeout_ms,
        ..ClusterConfig::default()
    }
}

/// Worst and median of `v` (ms), for the figures.
fn worst_median(mut v: Vec<u64>) -> (u64, u64) {
    v.sort_unstable();
    let worst = v.last().copied().unwrap_or(0);
    let median = v.get(v.len() / 2).copied().unwrap_or(0);
    (worst, median)
}

/// Runs `scenario` for `seeds` (or the replay seed), collecting its figures; panics with the
/// replay hint on the first failure.
fn sweep<T>(
    name: &str,
    seeds: impl IntoIterator<Item = u64>,
    scenario: fn(u64) -> Res<T>,
) -> Vec<T> {
    let seeds = seeds_or(seeds);
    let figures = RefCell::new(Vec::new());
    check_seeds(name, seeds, |seed| -> Res {
        figures.borrow_mut().push(scenario(seed)?);
        Ok(())
    });
    figures.into_inner()
}

// ----- 1. gossip must not keep a node we cannot reach alive -----

/// NODE_TIMEOUT of scenario 1 (ms).
const NT1: u64 = 2_000;

/// What scenario 1 measured.
#[derive(Debug, Clone, Copy)]
struct PartitionFigures {
    /// Ms from A's first unanswered PING to C until A flags C PFAIL (bound: NODE_TIMEOUT,
    /// + one cron tick).
    pfail_after_ping_ms: u64,
    /// Ms from the partition until A flags C PFAIL.
    pfail_after_partition_ms: u64,
}

/// A's view of C during the partition, step by step.
#[derive(Debug, Default)]
struct Watch {
    /// The partition's start.
    since: Millis,
    /// A's first PING to C sent after it.
    first_ping: Option<Millis>,
    /// A's pong time for C when it started waiting for C's PONG (or saw C PFAIL).
    pong_when_waiting: Option<Option<Millis>>,
    /// The first thing that broke the rule.
    broken: Option<String>,
}

impl Watch {
    fn step(&mut self, now: Millis, n: Option<&ferrocluster_topology::Node>) {
        let Some(n) = n else { return };
        let pending = n.ping_sent.filter(|&p| p >= self.since);
        if let Some(p) = pending {
            self.first_ping.get_or_insert(p);
        }
        if pending.is_none() && !n.is_pfail() {
            return;
        }
        match self.pong_when_waiting {
            None => self.pong_when_waiting = Some(n.pong_received),
            Some(p) if p != n.pong_received && self.broken.is_none() => {
                self.broken = Some(format!(
                    "at {now}: A's pong time for C moved from {p:?} to {:?} on gossip while A \
                     waits for C's PONG (ping_sent {:?}, flags {})",
                    n.pong_received,
                    n.ping_sent,
                    n.flags.names()
                ));
            }
            Some(_) => {}
        }
    }
}

/// A (host 0) and C (host 2) are partitioned from each other, both keep their link to B
/// (host 1), which pings C every NODE_TIMEOUT/2 and, in every PING/PONG to A, gossips C
/// with the fresh pong time it has (three nodes: C is the only entry B can send A, §7.1).
///
/// A must flag C PFAIL NODE_TIMEOUT after its first unanswered PING (§9.1; within one cron
/// tick, the PFAIL check runs in the cron), and from the moment it waits for C's PONG, its
/// view of C must not move on B's word: C stays PFAIL and A's pong time for C stays at the
/// last PONG A itself received, for the whole partition (Valkey's
/// `clusterProcessGossipSection`, narrowed in Valkey 9.0 to nodes healthy in our own view).
/// After the heal, C's PFAIL clears only with a PONG from C itself.
fn partition_scenario(seed: u64) -> Res<PartitionFigures> {
    let (a, b, c) = (0usize, 1usize, 2usize);
    let mut sim = preset_cluster_sim_staggered(seed, 3, config(NT1), NetConfig::default(), 0)?;
    sim.add_invariant(Box::new(ClusterInvariants::new()));
    let ok = sim.run_until_cond(20 * NT1, |s| {
        (0..3).all(|h| s.node(h).is_some_and(ClusterNode::cluster_state_ok))
    })?;
    ensure(ok, || "cluster_state never ok".into())?;
    // Steady state, then a partition at a seeded moment of the ping cycle.
    let settle = 2 * NT1 + sim.random_range(0, NT1);
    sim.run_for(settle)?;
    let t_part = sim.now();
    sim.block_two_way(a, c);
    let c_id = sim.id(c).ok_or("host 2 down")?;

    // Until A flags C PFAIL: remember A's pending ping and pong time for C.
    let view = |s: &ClusterSim| s.view(a, c).cloned();
    let mut watch = Watch {
        since: t_part,
        ..Watch::default()
    };
    let flagged = sim.run_until_cond(6 * NT1, |s| {
        watch.step(s.now(), view(s).as_ref());
        view(s).is_some_and(|n| n.is_pfail())
    })?;
    ensure(flagged, || {
        format!("A never flagged C PFAIL: {:?}", view(&sim))
    })?;
    let t_pfail = sim.now();
    let ping = watch
        .first_ping
        .ok_or("A flagged C PFAIL without a PING after the partition")?;
    let after_ping = t_pfail.since(ping);
    ensure(
        after_ping > NT1 && after_ping <= NT1 + CRON_PERIOD_MS,
        || {
            format!(
                "PFAIL {after_ping} ms after A's PING (bound: more than {NT1}, at most {} ms)",
                NT1 + CRON_PERIOD_MS
            )
        },
    )?;

    // The partition holds for 3 × NODE_TIMEOUT: C stays PFAIL in A's view (no FAIL: B does
    // not report it), its pong time frozen, while B keeps hearing from C.
    let mut stale_at_b: Option<String> = None;
    let t_heal = t_pfail.saturating_add_ms(3 * NT1);
    sim.run_until_cond(3 * NT1, |s| {
        watch.step(s.now(), view(s).as_ref());
        if let Some(bc) = s.view(b, c) {
            let fresh = bc
                .pong_received
                .is_some_and(|p| s.now().since(p) <= NT1 / 2 + 3 * CRON_PERIOD_MS);
            if !fresh && stale_at_b.is_none() {
                stale_at_b = Some(format!(
                    "at {}: B's pong time for C {:?}",
                    s.now(),
                    bc.pong_received
                ));
            }
        }
        if view(s).is_some_and(|n| !n.is_pfail()) && watch.broken.is_none() {
            watch.broken = Some(format!(
                "at {}: C lost PFAIL in A's view during the partition",
                s.now()
            ));
        }
        s.now() >= t_heal
    })?;
    if let Some(m) = watch.broken {
        return Err(m.into());
    }
    if let Some(m) = stale_at_b {
        return Err(format!("B stopped hearing from C, the scenario is void: {m}").into());
    }
    let frozen = view(&sim).and_then(|n| n.pong_received);

    // Heal: C's PFAIL clears with C's own PONG, which A's pong time then shows.
    sim.heal();
    let cleared = sim.run_until_cond(2 * NT1, |s| view(s).is_some_and(|n| !n.is_pfail()))?;
    ensure(cleared, || {
        "C still PFAIL in A's view 2 × NODE_TIMEOUT after the heal".into()
    })?;
    let n = view(&sim).ok_or("C unknown to A")?;
    ensure(
        n.pong_received.is_some_and(|p| p >= t_heal) && n.pong_received != frozen,
        || {
            format!(
                "PFAIL cleared without a PONG from C: pong time {:?}",
                n.pong_received
            )
        },
    )?;
    ensure(*n.id() == c_id, || "C changed its ID".into())?;
    Ok(PartitionFigures {
        pfail_after_ping_ms: after_ping,
        pfail_after_partition_ms: t_pfail.since(t_part),
    })
}

#[test]
fn gossip_never_keeps_a_node_we_cannot_reach_alive() {
    sweep(
        "gossip_never_keeps_a_node_we_cannot_reach_alive",
        0..4,
        partition_scenario,
    );
}

#[test]
#[ignore = "100 seeds: run in release by hand (module docs)"]
fn gossip_never_keeps_a_node_we_cannot_reach_alive_100_seeds() {
    let f = sweep(
        "gossip_never_keeps_a_node_we_cannot_reach_alive_100_seeds",
        0..100,
        partition_scenario,
    );
    let (w1, m1) = worst_median(f.iter().map(|x| x.pfail_after_ping_ms).collect());
    let (w2, m2) = worst_median(f.iter().map(|x| x.pfail_after_partition_ms).collect());
    println!(
        "scenario 1, {} seeds, NODE_TIMEOUT {NT1} ms: PFAIL after A's PING worst {w1} ms, \
         median {m1} ms (bound {NT1} + {CRON_PERIOD_MS} ms); PFAIL after the partition worst \
         {w2} ms, median {m2} ms",
        f.len()
    );
}

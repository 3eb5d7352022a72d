//! The seeded random-fault run: a small cluster under partitions, one-way blocks, link
//! resets, crashes, restarts and latency changes, with the cluster invariants checked after
//! every step and convergence checked once the faults stop.

use crate::cluster::{check_converged, cluster_sim, ClusterSim, ClusterSimExt, SimError};
use crate::net::{NetConfig, PartitionedConnect};
use crate::sim::Violation;
use ferrocluster_node::ClusterConfig;

/// The shape of a random-fault run. All durations are simulated ms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultPlan {
    /// Primaries owning slots (hosts `0..primaries`).
    pub primaries: usize,
    /// Replicas, one per primary in turn (the hosts after the primaries).
    pub replicas: usize,
    /// Primaries without slots (the last hosts).
    pub slotless: usize,
    /// `cluster-node-timeout`.
    pub node_timeout_ms: u64,
    /// How long faults are injected.
    pub fault_ms: u64,
    /// Quiet time after the last fault (network healed, every host restarted) before the
    /// convergence check.
    pub settle_ms: u64,
    /// At most this many hosts are down at once.
    pub max_down: usize,
}

impl Default for FaultPlan {
    /// 3 primaries, 1 replica, 1 slot-less primary; node timeout 1 s; 8 s of faults; 8 s
    /// to settle; at most one host down at a time.
    fn default() -> FaultPlan {
        FaultPlan {
            primaries: 3,
            replicas: 1,
            slotless: 1,
            node_timeout_ms: 1_000,
            fault_ms: 8_000,
            settle_ms: 8_000,
            max_down: 1,
        }
    }
}

impl FaultPlan {
    /// Total hosts.
    pub fn hosts(&self) -> usize {
        self.primaries + self.replicas + self.slotless
    }
}

/// What a finished run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunReport {
    /// The seed.
    pub seed: u64,
    /// Trace digest.
    pub trace: u64,
    /// Events processed.
    pub events: u64,
    /// Faults injected, by kind: splits, one-way blocks, isolations, heals, crashes, restarts,
    /// link resets, latency changes.
    pub faults: [u64; 8],
    /// Simulated ms.
    pub elapsed_ms: u64,
}

fn violation(sim: &ClusterSim, what: &str, message: String) -> Violation {
    Violation {
        seed: sim.seed(),
        at: sim.now(),
        elapsed_ms: sim.elapsed_ms(),
        event_no: sim.events(),
        host: 0,
        invariant: what.into(),
        message,
    }
}

fn setup_error(sim: &ClusterSim, e: SimError) -> Violation {
    match e {
        SimError::Violation(v) => v,
        other => violation(sim, "setup", other.to_string()),
    }
}

/// Runs one seeded random-fault run of `plan`.
///
/// 1. Every host MEETs host 0; the primaries get all slots in equal ranges, the replicas
///    replicate; the run waits for the full mesh, `cluster_state:ok` everywhere and every
///    nodes.conf write acknowledged.
/// 2. For `fault_ms`: run a random 50–1500 ms, then inject a random fault (partition into two
///    groups, one-way block, isolation, heal, crash, restart, link reset between two hosts,
///    new latency range), all drawn from the run's RNG.
/// 3. Heal, restart every crashed host, restore the base latency, run `settle_ms`, then
///    [`check_converged`]: everyone knows everyone, nobody PFAIL/FAIL, one slot owner per
///    slot in every view, `cluster_state:ok`.
///
/// # Errors
/// The first broken invariant, or a failed setup or convergence check, as a [`Violation`]
/// carrying the seed.
pub fn random_fault_run(seed: u64, plan: &FaultPlan) -> Result<RunReport, Violation> {
    let config = ClusterConfig {
        node_timeout_ms: plan.node_timeout_ms,
        ..ClusterConfig::default()
    };
    let n = plan.hosts();
    let mut sim = cluster_sim(seed, n, config, NetConfig::default())?;
    let base_latency = sim.random_range(1, 20);
    let base = NetConfig {
        max_latency_ms: base_latency,
        partitioned_connect: PartitionedConnect::Random,
        ..NetConfig::default()
    };
    sim.set_net(base.clone());
    let all: Vec<usize> = (0..n).collect();
    let primaries: Vec<usize> = (0..plan.primaries).collect();
    let replicas: Vec<usize> = (plan.primaries..plan.primaries + plan.replicas).collect();

    // 1. Setup.
    for h in 1..n {
        sim.meet(h, 0).map_err(|e| setup_error(&sim, e))?;
    }
    if !sim
        .run_until_mesh(&all, 20 * plan.node_timeout_ms)
        .map_err(|e| setup_error(&sim, e))?
    {
        return Err(violation(&sim, "setup", "no full mesh".into()));
    }
    sim.assign_slots_evenly(&primaries)
        .map_err(|e| setup_error(&sim, e))?;
    for (i, &r) in replicas.iter().enumerate() {
        let p = primaries[i % primaries.len().max(1)];
        sim.replicate(r, p).map_err(|e| setup_error(&sim, e))?;
    }
    let settled = sim.run_until_cond(20 * plan.node_timeout_ms, |s| {
        (0..n).all(|h| {
            s.node(h).is_some_and(|node| node.cluster_state_ok()) && s.disk(h).pending_len() == 0
        })
    })?;
    if !settled {
        return Err(violation(&sim, "setup", "cluster_state never ok".into()));
    }

    // 2. Faults.
    let mut faults = [0u64; 8];
    let end = sim.now().saturating_add_ms(plan.fault_ms);
    while sim.now() < end {
        let pause = sim.random_range(50, 1_500);
        sim.run_for(pause)?;
        let kind = sim.random_range(0, 9) as usize;
        match kind {
            0 => {
                let mut order = all.clone();
                for i in (1..order.len()).rev() {
                    let j = sim.random_range(0, i as u64) as usize;
                    order.swap(i, j);
                }
                let k = sim.random_range(1, (n as u64 / 2).max(1)) as usize;
                let (a, b) = order.split_at(k);
                sim.split(&[a, b]);
                faults[0] += 1;
            }
            1 => {
                let (a, b) = pair(&mut sim, n);
                sim.block_one_way(a, b);
                faults[1] += 1;
            }
            2 => {
                let h = sim.random_range(0, n as u64 - 1) as usize;
                sim.isolate(h);
                faults[2] += 1;
            }
            3 | 4 => {
                sim.heal();
                faults[3] += 1;
            }
            5 => {
                let down = (0..n).filter(|&h| !sim.is_up(h)).count();
                let h = sim.random_range(0, n as u64 - 1) as usize;
                if down < plan.max_down && sim.crash(h) {
                    faults[4] += 1;
                }
            }
            6 => {
                if let Some(h) = (0..n).find(|&h| !sim.is_up(h)) {
                    sim.restart(h)?;
                    faults[5] += 1;
                }
            }
            7 => {
                let (a, b) = pair(&mut sim, n);
                sim.break_links(a, b);
                faults[6] += 1;
            }
            _ => {
                let hi = sim.random_range(1, 4 * plan.node_timeout_ms / 10);
                sim.set_net(NetConfig {
                    max_latency_ms: hi,
                    ..base.clone()
                });
                faults[7] += 1;
            }
        }
    }

    // 3. Heal and settle.
    sim.heal();
    sim.set_net(base);
    for h in 0..n {
        if !sim.is_up(h) {
            sim.restart(h)?;
        }
    }
    sim.run_for(plan.settle_ms)?;
    check_converged(&sim, &all).map_err(|m| violation(&sim, "convergence after heal", m))?;
    Ok(RunReport {
        seed,
        trace: sim.trace().digest(),
        events: sim.events(),
        faults,
        elapsed_ms: sim.elapsed_ms(),
    })
}

fn pair(sim: &mut ClusterSim, n: usize) -> (usize, usize) {
    let a = sim.random_range(0, n as u64 - 1) as usize;
    let b = (a + 1 + sim.random_range(0, n as u64 - 2) as usize) % n;
    (a, b)
}

//! Failover in the simulator (facts sheet §11–§14): building a cluster with replicas on a
//! [`World`], the vote and epoch checks, the seeded random-fault run with crashes of
//! primaries, and the failover-time measurement the benchmark reports.

use crate::cluster::{
    check_converged, cluster_sim_with, preset_cluster_sim_with_replicas, ClusterInvariants,
    ClusterSim, ClusterSimExt, SimError,
};
use crate::net::{NetConfig, PartitionedConnect};
use crate::sim::{AuthFrame, Invariant, StepInfo, Violation};
use crate::sniff::TYPE_AUTH_ACK;
use crate::world::World;
use ferrocluster_node::{ClusterConfig, ClusterNode, Output};
use ferrocluster_slot::{Slot, SLOT_COUNT};
use ferrocluster_topology::{load_nodes_conf, LoadOptions, NodeId};
use rand_chacha::ChaCha8Rng;
use rand_core::SeedableRng;
use std::collections::BTreeMap;

/// Which host replicates which: `primaries` own all slots in equal contiguous ranges (in
/// order), `replicas` are `(replica host, primary host)` pairs; every other host stays a
/// slot-less primary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Total hosts.
    pub hosts: usize,
    /// Slot-owning primaries, in slot-range order.
    pub primaries: Vec<usize>,
    /// `(replica, primary)` pairs.
    pub replicas: Vec<(usize, usize)>,
}

impl Layout {
    /// `primaries` primaries (hosts `0..primaries`) with `per` replicas each (the hosts after,
    /// primary by primary: host `primaries + i·per + j` replicates primary `i`).
    pub fn uniform(primaries: usize, per: usize) -> Layout {
        let mut replicas = Vec::new();
        for p in 0..primaries {
            for j in 0..per {
                replicas.push((primaries + p * per + j, p));
            }
        }
        Layout {
            hosts: primaries * (per + 1),
            primaries: (0..primaries).collect(),
            replicas,
        }
    }

    /// The first slot of primary number `i`'s range.
    pub fn first_slot(&self, i: usize) -> Slot {
        let n = self.primaries.len().max(1);
        // Below 16384: a valid slot.
        Slot::new((SLOT_COUNT * i / n) as u16).unwrap_or(Slot::MIN)
    }
}

pub(crate) fn setup_violation(sim: &ClusterSim, what: &str, message: String) -> Violation {
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

fn sim_err(sim: &ClusterSim, e: SimError) -> Violation {
    match e {
        SimError::Violation(v) => v,
        other => setup_violation(sim, "setup", other.to_string()),
    }
}

/// Builds a [`World`] of `layout` from `seed`: every host MEETs host 0; after the full mesh
/// the primaries get their slots and the replicas replicate; returns once every node's
/// cluster_state is ok, every replica's data link is up and every nodes.conf write is
/// durable. The cluster invariants and [`OneVotePerEpoch`] are registered.
///
/// # Errors
/// A broken invariant, or a setup step that did not complete within 30 × NODE_TIMEOUT.
pub fn build_world(
    seed: u64,
    config: ClusterConfig,
    net: NetConfig,
    layout: &Layout,
    invariants: ClusterInvariants,
) -> Result<World, Violation> {
    build_world_blocked(seed, config, net, layout, invariants, &[])
}

/// [`build_world`] with the data links of `blocked` hosts blocked from the start
/// ([`World::block_data`]): those replicas never complete a sync, and setup does not wait
/// for them.
///
/// # Errors
/// As [`build_world`].
pub fn build_world_blocked(
    seed: u64,
    config: ClusterConfig,
    net: NetConfig,
    layout: &Layout,
    invariants: ClusterInvariants,
    blocked: &[usize],
) -> Result<World, Violation> {
    let nt = config.node_timeout_ms;
    let mut sim = cluster_sim_with(seed, layout.hosts, config, net, invariants)?;
    sim.add_invariant(Box::new(OneVotePerEpoch::default()));
    let mut w = World::new(sim)?;
    for &b in blocked {
        w.block_data(b, true);
    }
    for h in 1..layout.hosts {
        w.sim_mut().meet(h, 0).map_err(|e| sim_err(w.sim(), e))?;
    }
    let all: Vec<usize> = (0..layout.hosts).collect();
    if !w.run_until_cond(30 * nt, |w| w.sim().full_mesh(&all))? {
        return Err(setup_violation(w.sim(), "setup", "no full mesh".into()));
    }
    w.sim_mut()
        .assign_slots_evenly(&layout.primaries)
        .map_err(|e| sim_err(w.sim(), e))?;
    for &(r, p) in &layout.replicas {
        w.sim_mut()
            .replicate(r, p)
            .map_err(|e| sim_err(w.sim(), e))?;
    }
    let replicas: Vec<usize> = layout
        .replicas
        .iter()
        .map(|&(r, _)| r)
        .filter(|r| !blocked.contains(r))
        .collect();
    wait_settled(&mut w, &replicas, 30 * nt)?;
    Ok(w)
}

/// Runs `w` until every node's cluster_state is ok, every nodes.conf write is durable and
/// every one of `replicas` is synced, at most `max_ms`.
fn wait_settled(w: &mut World, replicas: &[usize], max_ms: u64) -> Result<(), Violation> {
    let all: Vec<usize> = (0..w.sim().hosts()).collect();
    let ok = w.run_until_cond(max_ms, |w| {
        all.iter().all(|&h| {
            w.node(h).is_some_and(ClusterNode::cluster_state_ok)
                && w.sim().disk(h).pending_len() == 0
        }) && replicas.iter().all(|&r| w.synced(r))
    })?;
    if !ok {
        return Err(setup_violation(
            w.sim(),
            "setup",
            "cluster_state never ok with every replica synced".into(),
        ));
    }
    Ok(())
}

/// [`build_world`] for large clusters: the nodes start from a nodes.conf that already lists
/// `layout` ([`preset_cluster_sim_with_replicas`], the hosts spread over the first
/// `stagger_ms` ms) instead of meeting one by one, so no handshake or slot assignment runs.
/// `layout.primaries` MUST be the hosts without a primary, in host order (as
/// [`Layout::uniform`] makes them). Returns once every node's cluster_state is ok, every
/// nodes.conf write is durable and every replica's data link is up. The cluster invariants `invariants` and [`OneVotePerEpoch`]
/// are registered once every host has started (`stagger_ms` + 1 ms into the run).
///
/// # Errors
/// A broken invariant, or a setup that did not complete within 30 × NODE_TIMEOUT.
pub fn build_preset_world(
    seed: u64,
    config: ClusterConfig,
    net: NetConfig,
    layout: &Layout,
    invariants: ClusterInvariants,
    stagger_ms: u64,
) -> Result<World, Violation> {
    let nt = config.node_timeout_ms;
    let sim = preset_cluster_sim_with_replicas(
        seed,
        layout.hosts,
        &layout.replicas,
        config,
        net,
        stagger_ms,
    )?;
    let mut w = World::new(sim)?;
    // The invariants start once every host runs: the identity check learns the hosts' IDs
    // on its first step, and the late starters' IDs are already in the early ones' views.
    w.run_for(stagger_ms + 1)?;
    w.sim_mut().add_invariant(Box::new(invariants));
    w.sim_mut()
        .add_invariant(Box::new(OneVotePerEpoch::default()));
    let replicas: Vec<usize> = layout.replicas.iter().map(|&(r, _)| r).collect();
    wait_settled(&mut w, &replicas, 30 * nt)?;
    Ok(w)
}

/// No voter acknowledges two requests in one epoch (§12.3 rule 3 with §12.3 rule 7's
/// persist-before-ACK): among the FAILOVER_AUTH_ACK frames the hosts transmitted (sniffed
/// from the streams), at most one per (sender, header currentEpoch). Checked after every
/// step on the frames sent since the last check.
#[derive(Debug, Default)]
pub struct OneVotePerEpoch {
    checked: usize,
    acks: BTreeMap<([u8; 40], u64), AuthFrame>,
}

impl OneVotePerEpoch {
    /// Feeds frames; `Err` on the first second ACK of a (sender, epoch).
    ///
    /// # Errors
    /// A description of the double vote.
    pub fn feed(&mut self, frames: &[AuthFrame]) -> Result<(), String> {
        for f in frames.iter().skip(self.checked) {
            self.checked += 1;
            if f.msg_type != TYPE_AUTH_ACK {
                continue;
            }
            if let Some(first) = self.acks.insert((f.sender, f.current_epoch), *f) {
                return Err(format!(
                    "voter {} (host {}) acknowledged twice in epoch {}: to host {} at {} and to \
                     host {} at {}",
                    String::from_utf8_lossy(&f.sender),
                    f.from,
                    f.current_epoch,
                    first.to,
                    first.at,
                    f.to,
                    f.at
                ));
            }
        }
        Ok(())
    }

    /// ACKs seen so far.
    pub fn acks(&self) -> usize {
        self.acks.len()
    }
}

impl Invariant<ClusterNode> for OneVotePerEpoch {
    fn name(&self) -> &str {
        "one vote per epoch"
    }
    fn check(&mut self, sim: &ClusterSim, _step: &StepInfo<Output>) -> Result<(), String> {
        self.feed(sim.auth_frames())
    }
}

/// After convergence: every running host in `hosts` passes [`check_converged`], and they
/// agree on each slot owner's configEpoch; no two slot-owning primaries share a configEpoch
/// (§11.5), in any view.
///
/// # Errors
/// A description of the first disagreement.
pub fn check_epochs_converged(sim: &ClusterSim, hosts: &[usize]) -> Result<(), String> {
    check_converged(sim, hosts)?;
    let up: Vec<usize> = hosts.iter().copied().filter(|&h| sim.is_up(h)).collect();
    let mut reference: Option<(usize, BTreeMap<NodeId, u64>)> = None;
    for &h in &up {
        let Some(n) = sim.node(h) else { continue };
        let t = n.topology();
        let mut owners: BTreeMap<NodeId, u64> = BTreeMap::new();
        for node in t.nodes().filter(|n| n.is_primary() && n.slot_count() > 0) {
            owners.insert(*node.id(), t.reported_config_epoch(node).0);
        }
        let mut by_epoch: BTreeMap<u64, NodeId> = BTreeMap::new();
        for (id, e) in &owners {
            if let Some(other) = by_epoch.insert(*e, *id) {
                return Err(format!(
                    "host {h}: primaries {other} and {id} both own slots with configEpoch {e}"
                ));
            }
        }
        match &reference {
            None => reference = Some((h, owners)),
            Some((r, ref_owners)) if *ref_owners != owners => {
                return Err(format!(
                "host {r} sees slot owners/configEpochs {ref_owners:?}, host {h} sees {owners:?}"
            ))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// The host running `id`, if any.
pub fn host_of(sim: &ClusterSim, id: &NodeId) -> Option<usize> {
    (0..sim.hosts()).find(|&h| sim.id(h).as_ref() == Some(id))
}

/// Whether every running host has cluster_state ok and sees `owner` as the owner of `slot`.
pub fn all_ok_with_owner(sim: &ClusterSim, slot: Slot, owner: usize) -> bool {
    let Some(id) = sim.id(owner) else {
        return false;
    };
    (0..sim.hosts()).filter(|&h| sim.is_up(h)).all(|h| {
        sim.node(h)
            .is_some_and(|n| n.cluster_state_ok() && n.topology().slot_owner(slot) == Some(&id))
    })
}

/// The host that owns `slot` in every running host's view, if they all agree.
pub fn agreed_owner(sim: &ClusterSim, slot: Slot) -> Option<usize> {
    let mut owner = None;
    for h in (0..sim.hosts()).filter(|&h| sim.is_up(h)) {
        let id = *sim.node(h)?.topology().slot_owner(slot)?;
        match owner {
            None => owner = Some(id),
            Some(o) if o != id => return None,
            Some(_) => {}
        }
    }
    owner.and_then(|id| host_of(sim, &id))
}

/// One failover measured by [`measure_failover`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailoverTiming {
    /// The seed.
    pub seed: u64,
    /// Ms from the primary's crash until every running node has cluster_state ok and names
    /// the new primary as the owner of the crashed primary's first slot.
    pub failover_ms: u64,
    /// The host that took over.
    pub new_primary: usize,
}

/// Builds 3 primaries with one replica each (6 hosts) at `node_timeout_ms`, lets it run one
/// NODE_TIMEOUT, crashes primary 0 and measures the time until the cluster is ok again with
/// its replica (host 3) as the new owner everywhere. Invariants are off (a benchmark); the
/// data plane runs (replication, reports).
///
/// # Errors
/// Setup failures, or no failover within 20 × NODE_TIMEOUT.
pub fn measure_failover(seed: u64, node_timeout_ms: u64) -> Result<FailoverTiming, Violation> {
    let config = ClusterConfig {
        node_timeout_ms,
        ..ClusterConfig::default()
    };
    let layout = Layout::uniform(3, 1);
    let mut w = build_world(
        seed,
        config,
        NetConfig::default(),
        &layout,
        ClusterInvariants::new(),
    )?;
    w.sim_mut().set_check_invariants(false);
    w.run_for(node_timeout_ms)?;
    let slot = layout.first_slot(0);
    let t0 = w.now();
    w.crash(0);
    let done = w.run_until_cond(20 * node_timeout_ms, |w| {
        agreed_owner(w.sim(), slot).is_some_and(|o| o != 0)
            && (0..w.sim().hosts())
                .filter(|&h| w.sim().is_up(h))
                .all(|h| w.node(h).is_some_and(ClusterNode::cluster_state_ok))
    })?;
    if !done {
        return Err(setup_violation(
            w.sim(),
            "failover",
            format!("no failover within {} ms", 20 * node_timeout_ms),
        ));
    }
    let new_primary = agreed_owner(w.sim(), slot).unwrap_or(usize::MAX);
    Ok(FailoverTiming {
        seed,
        failover_ms: w.now().since(t0),
        new_primary,
    })
}

/// The shape of a random failover run (all durations simulated ms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailoverPlan {
    /// Slot-owning primaries.
    pub primaries: usize,
    /// Replicas per primary.
    pub replicas_per_primary: usize,
    /// `cluster-node-timeout`.
    pub node_timeout_ms: u64,
    /// How long faults are injected.
    pub fault_ms: u64,
    /// Quiet time after the faults before the convergence check.
    pub settle_ms: u64,
    /// At most this many hosts down at once during the faults.
    pub max_down: usize,
}

impl Default for FailoverPlan {
    /// 3 primaries with one replica each, node timeout 1 s, 10 s of faults, 15 s to settle,
    /// at most two hosts down at once.
    fn default() -> FailoverPlan {
        FailoverPlan {
            primaries: 3,
            replicas_per_primary: 1,
            node_timeout_ms: 1_000,
            fault_ms: 10_000,
            settle_ms: 15_000,
            max_down: 2,
        }
    }
}

/// What a random failover run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailoverReport {
    /// The seed.
    pub seed: u64,
    /// Trace digest.
    pub trace: u64,
    /// Faults injected: splits, one-way blocks, isolations, heals, crashes, restarts, link
    /// resets, latency changes.
    pub faults: [u64; 8],
    /// Elections won (ElectionWon-style role changes observed: replicas that became primary).
    pub promotions: u64,
    /// FAILOVER_AUTH_ACK frames sent.
    pub acks: u64,
    /// A primary was left down for the settle phase (its replica had to take over).
    pub left_down: Option<usize>,
}

/// One seeded random failover run of `plan`, with a writer on every primary's first slot:
///
/// 1. build the cluster ([`build_world`]) and start the writer;
/// 2. for `fault_ms`: run a random 50–1500 ms, then inject a random fault (split into two
///    groups, one-way block, isolation, heal, crash — primaries twice as likely —, restart,
///    link reset, latency change);
/// 3. heal, restore the latency, restart every crashed host except, in half the runs, one
///    crashed primary that has a replica running (it stays down: its replica must take
///    over), run `settle_ms`, then check [`World::check_no_stale_keys`] and
///    [`check_epochs_converged`] (everyone agrees on
///    every slot's owner and its configEpoch, distinct configEpochs, cluster_state ok).
///
/// The cluster invariants and [`OneVotePerEpoch`] run after every step.
///
/// # Errors
/// The first broken invariant or a failed final check, carrying the seed.
pub fn random_failover_run(seed: u64, plan: &FailoverPlan) -> Result<FailoverReport, Violation> {
    let config = ClusterConfig {
        node_timeout_ms: plan.node_timeout_ms,
        ..ClusterConfig::default()
    };
    let layout = Layout::uniform(plan.primaries, plan.replicas_per_primary);
    let n = layout.hosts;
    let mut w = build_world(
        seed,
        config,
        NetConfig::default(),
        &layout,
        ClusterInvariants::new(),
    )?;
    let base_latency = w.sim_mut().random_range(1, 20);
    let base = NetConfig {
        max_latency_ms: base_latency,
        partitioned_connect: PartitionedConnect::Random,
        ..NetConfig::default()
    };
    w.sim_mut().set_net(base.clone());
    let slots: Vec<Slot> = (0..plan.primaries).map(|i| layout.first_slot(i)).collect();
    w.start_writer(slots, 20);

    let mut faults = [0u64; 8];
    let end = w.now().saturating_add_ms(plan.fault_ms);
    while w.now() < end {
        let pause = w.sim_mut().random_range(50, 1_500);
        w.run_for(pause)?;
        let kind = w.sim_mut().random_range(0, 10) as usize;
        let sim = w.sim_mut();
        match kind {
            0 => {
                let mut order: Vec<usize> = (0..n).collect();
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
                let (a, b) = pair(sim, n);
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
            5 | 6 => {
                let down = (0..n).filter(|&h| !sim.is_up(h)).count();
                // Primaries (the first hosts) twice as often: crash one of the current
                // slot owners when kind is 5.
                let h = if kind == 5 {
                    let owners: Vec<usize> = (0..n)
                        .filter(|&h| {
                            sim.node(h).is_some_and(|x| {
                                x.topology().myself().is_primary()
                                    && x.topology().myself().slot_count() > 0
                            })
                        })
                        .collect();
                    if owners.is_empty() {
                        0
                    } else {
                        owners[sim.random_range(0, owners.len() as u64 - 1) as usize]
                    }
                } else {
                    sim.random_range(0, n as u64 - 1) as usize
                };
                if down < plan.max_down && w.crash(h) {
                    faults[4] += 1;
                }
            }
            7 => {
                if let Some(h) = (0..n).find(|&h| !sim.is_up(h)) {
                    w.restart(h)?;
                    faults[5] += 1;
                }
            }
            8 => {
                let (a, b) = pair(sim, n);
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

    // Heal; maybe leave one crashed primary down whose replica is up.
    w.sim_mut().heal();
    w.sim_mut().set_net(base);
    let leave = w.sim_mut().random_range(0, 1) == 1;
    let mut left_down = None;
    for h in 0..n {
        if w.sim().is_up(h) {
            continue;
        }
        if leave && left_down.is_none() && can_stay_down(&w, h) {
            left_down = Some(h);
            continue;
        }
        w.restart(h)?;
    }
    w.run_for(plan.settle_ms)?;
    let all: Vec<usize> = (0..n).collect();
    check_epochs_converged(w.sim(), &all)
        .and_then(|()| w.check_no_stale_keys())
        .map_err(|m| {
            setup_violation(
                w.sim(),
                "convergence after heal",
                format!("{m} (left down: {left_down:?})"),
            )
        })?;
    let promotions = w
        .events()
        .iter()
        .filter(|(_, _, e)| matches!(e, Output::BecamePrimary))
        .count() as u64;
    let acks = w
        .sim()
        .auth_frames()
        .iter()
        .filter(|f| f.msg_type == TYPE_AUTH_ACK)
        .count() as u64;
    Ok(FailoverReport {
        seed,
        trace: w.sim().trace().digest(),
        faults,
        promotions,
        acks,
        left_down,
    })
}

/// Whether the crashed host `h` can stay down without leaving slots unserved for good (the
/// settle phase of [`random_failover_run`]): it owns no slot — in no running view and not
/// in its own last durable config, since a take-over it saved and announced just before the
/// crash may still be on its way to the others — or a running replica that synced in this
/// incarnation follows it. (Issue 16, seed 104: a replica won, persisted, broadcast its PONG
/// and crashed before any view showed it; the only other member of its shard, the demoted
/// old primary, never synced with it, so it can never be elected — in Valkey neither, its
/// data age counts from `repl_down_since` 0.)
pub fn can_stay_down(w: &World, h: usize) -> bool {
    let n = w.sim().hosts();
    let owns_slots = saved_slot_owner(w.sim(), h)
        || w.last_id(h).is_some_and(|id| {
            (0..n).any(|v| {
                w.node(v)
                    .and_then(|x| x.topology().node(&id))
                    .is_some_and(|rec| rec.slot_count() > 0)
            })
        });
    let live_replica = (0..n).any(|r| {
        w.sim().is_up(r)
            && w.follows(r) == Some(h)
            && !matches!(w.link(r), ferrocluster_epoch::ReplLink::Down)
    });
    !owns_slots || live_replica
}

/// Whether host `h`'s last durable nodes.conf makes myself a primary owning slots.
fn saved_slot_owner(sim: &ClusterSim, h: usize) -> bool {
    let Some(text) = sim.disk(h).contents() else {
        return false;
    };
    // Loading draws only IDs for records that lack one; nothing of it is kept.
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    load_nodes_conf(text, sim.now(), &mut rng, LoadOptions::default())
        .is_ok_and(|t| t.myself().is_primary() && t.myself().slot_count() > 0)
}

fn pair(sim: &mut ClusterSim, n: usize) -> (usize, usize) {
    let a = sim.random_range(0, n as u64 - 1) as usize;
    let b = (a + 1 + sim.random_range(0, n as u64 - 2) as usize) % n;
    (a, b)
}

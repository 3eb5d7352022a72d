//! Schedules chosen from outside (issue 21): a small cluster with replicas, a writing client
//! and a list of [`ScheduleStep`]s — crashes and restarts, partitions, link resets, latency,
//! client writes, manual failovers, atomic slot migrations and their cancels, migration
//! faults — run in order with a pause before each. The `sim_schedule` fuzz target builds the
//! steps from its input (coverage-guided schedules), the regression scenarios in
//! `tests/schedules.rs` name the ones that matter; [`run_schedule`] is the one interpreter of
//! both.
//!
//! Checks: the simulator's invariants after every step ([`crate::ClusterInvariants`],
//! [`crate::OneVotePerEpoch`], every node's own `ClusterNode::invariants`); after the
//! schedule, with the network healed, every host restarted and a settle period, the
//! convergence check of the random failover run ([`crate::check_epochs_converged`], no stale
//! keys) and the acknowledged-write oracle ([`check_acked_writes`]).

use crate::failover::{build_world, check_epochs_converged, setup_violation, Layout};
use crate::{
    AsmStats, ClusterInvariants, ClusterSimExt, NetConfig, PartitionedConnect, Violation, World,
};
use ferrocluster_node::{ClusterConfig, Output};
use ferrocluster_slot::{Slot, SlotSet};

/// One step of a schedule. Host numbers are taken modulo the number of hosts, so any value
/// names a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScheduleStep {
    /// Crash a host (kept or lost unacknowledged writes, a seeded choice); ignored while
    /// [`SchedulePlan::max_down`] hosts are down.
    Crash(usize),
    /// Restart a crashed host from its disk.
    Restart(usize),
    /// Split the hosts in two: bit `h` of the mask puts host `h` on the second side.
    Split(u32),
    /// Block the bus from one host to another (one way).
    BlockOneWay(usize, usize),
    /// Cut one host off from every other.
    Isolate(usize),
    /// Remove every partition.
    Heal,
    /// Reset the bus links between two hosts.
    BreakLinks(usize, usize),
    /// Set the largest latency, ms (at least 1).
    Latency(u64),
    /// Block (or unblock) one host's replication link.
    BlockData(usize, bool),
    /// One client write to the first slot of primary `i` (`i` modulo the primaries).
    Write(usize),
    /// `CLUSTER FAILOVER [FORCE|TAKEOVER]` on a host: 0 plain, 1 FORCE, 2 TAKEOVER.
    Failover(usize, u8),
    /// `CLUSTER MIGRATESLOTS SLOTSRANGE s s+count-1 NODE <to>` on host `from`, for the first
    /// `count` slots (1..=4) of primary `range`'s range.
    Migrate {
        /// The host that gets the command (the source if it owns the slots).
        from: usize,
        /// The target host.
        to: usize,
        /// Whose range (modulo the primaries).
        range: usize,
        /// How many slots, 1..=4.
        count: u16,
    },
    /// `CLUSTER CANCELSLOTMIGRATIONS` on a host.
    CancelMigrations(usize),
    /// The host refuses (or accepts again) imports as out of memory.
    ImportOom(usize, bool),
    /// The host's AUTH refuses (or accepts) migration connections.
    AuthRejected(usize, bool),
    /// Reset the slot migration data connections between two hosts.
    BreakMigrationLinks(usize, usize),
}

/// The cluster and the timing of a [`run_schedule`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulePlan {
    /// Slot-owning primaries.
    pub primaries: usize,
    /// Replicas per primary.
    pub replicas_per_primary: usize,
    /// `cluster-node-timeout`, ms.
    pub node_timeout_ms: u64,
    /// At most this many hosts down at once.
    pub max_down: usize,
    /// Quiet time after the schedule, healed and with every host restarted, before the
    /// final checks, ms.
    pub settle_ms: u64,
    /// Interval of the background writer on every primary's first slot, ms (0: none).
    pub writer_interval_ms: u64,
}

impl Default for SchedulePlan {
    /// Three primaries with one replica each (with two, a crashed primary's replica never
    /// wins a majority), node timeout 1 s, at most two hosts down, 12 s to settle, a write
    /// every 50 ms.
    fn default() -> SchedulePlan {
        SchedulePlan {
            primaries: 3,
            replicas_per_primary: 1,
            node_timeout_ms: 1_000,
            max_down: 2,
            settle_ms: 12_000,
            writer_interval_ms: 50,
        }
    }
}

/// What a passing [`run_schedule`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleReport {
    /// Trace digest (same seed and steps, same digest).
    pub trace: u64,
    /// Acknowledged writes.
    pub acked: usize,
    /// Acknowledged writes the oracle could check (see [`check_acked_writes`]).
    pub checked: usize,
    /// Replicas that became primary.
    pub promotions: usize,
    /// The slot migration data plane's counters (connections, snapshots, imported commands).
    pub asm: AsmStats,
}

/// Runs `steps` (each as `(pause ms, step)`: run the simulation for the pause, then apply the
/// step) on the cluster of `plan` built from `seed`, then heals, restarts every host, settles
/// and checks (see the module docs).
///
/// # Errors
/// The first broken invariant or failed final check, as a [`Violation`] with the seed.
pub fn run_schedule(
    seed: u64,
    plan: &SchedulePlan,
    steps: &[(u64, ScheduleStep)],
) -> Result<ScheduleReport, Violation> {
    let config = ClusterConfig {
        node_timeout_ms: plan.node_timeout_ms,
        ..ClusterConfig::default()
    };
    let layout = Layout::uniform(plan.primaries.max(1), plan.replicas_per_primary);
    let n = layout.hosts;
    let mut w = build_world(
        seed,
        config,
        NetConfig::default(),
        &layout,
        ClusterInvariants::new(),
    )?;
    let base = NetConfig {
        partitioned_connect: PartitionedConnect::Random,
        ..NetConfig::default()
    };
    w.sim_mut().set_net(base.clone());
    let first_slots: Vec<Slot> = (0..layout.primaries.len())
        .map(|i| layout.first_slot(i))
        .collect();
    if plan.writer_interval_ms > 0 {
        w.start_writer(first_slots.clone(), plan.writer_interval_ms);
    }
    // Slots a migration named: their keys may move, so the oracle leaves them out.
    let mut migrated = SlotSet::new();
    for (pause, step) in steps {
        w.run_for(*pause)?;
        let h = |x: &usize| x % n;
        match step {
            ScheduleStep::Crash(x) => {
                let down = (0..n).filter(|&i| !w.sim().is_up(i)).count();
                if down < plan.max_down {
                    w.crash(h(x));
                }
            }
            ScheduleStep::Restart(x) => {
                w.restart(h(x))?;
            }
            ScheduleStep::Split(mask) => {
                let (a, b): (Vec<usize>, Vec<usize>) = (0..n).partition(|&i| mask & (1 << i) == 0);
                if !a.is_empty() && !b.is_empty() {
                    w.sim_mut().split(&[&a, &b]);
                }
            }
            ScheduleStep::BlockOneWay(a, b) if h(a) != h(b) => {
                w.sim_mut().block_one_way(h(a), h(b))
            }
            ScheduleStep::Isolate(x) => w.sim_mut().isolate(h(x)),
            ScheduleStep::Heal => w.sim_mut().heal(),
            ScheduleStep::BreakLinks(a, b) if h(a) != h(b) => w.sim_mut().break_links(h(a), h(b)),
            ScheduleStep::Latency(ms) => w.sim_mut().set_net(NetConfig {
                max_latency_ms: (*ms).max(1),
                ..base.clone()
            }),
            ScheduleStep::BlockData(x, on) => w.block_data(h(x), *on),
            ScheduleStep::Write(i) => {
                // Refusals are legal (no owner, paused, cut off): the oracle reads the acks.
                let _refused = w.write(first_slots[i % first_slots.len()])?;
            }
            ScheduleStep::Failover(x, kind) => {
                let mut args = vec!["FAILOVER"];
                match kind % 3 {
                    1 => args.push("FORCE"),
                    2 => args.push("TAKEOVER"),
                    _ => {}
                }
                w.cluster_command(h(x), &args)?;
            }
            ScheduleStep::Migrate {
                from,
                to,
                range,
                count,
            } => {
                let Some(target) = w.sim().id(h(to)) else {
                    continue;
                };
                let start = first_slots[range % first_slots.len()].get();
                let end = start + count.clamp(&1, &4) - 1;
                for s in start..=end {
                    migrated.insert(Slot::new(s).unwrap_or(Slot::MIN));
                }
                let (s, e, t) = (start.to_string(), end.to_string(), target.to_string());
                w.cluster_command(h(from), &["MIGRATESLOTS", "SLOTSRANGE", &s, &e, "NODE", &t])?;
            }
            ScheduleStep::CancelMigrations(x) => {
                w.cluster_command(h(x), &["CANCELSLOTMIGRATIONS"])?;
            }
            ScheduleStep::ImportOom(x, on) => w.set_import_oom(h(x), *on),
            ScheduleStep::AuthRejected(x, on) => w.set_auth_rejected(h(x), *on),
            ScheduleStep::BreakMigrationLinks(a, b) => {
                w.break_migration_links(h(a), h(b));
            }
            ScheduleStep::BlockOneWay(..) | ScheduleStep::BreakLinks(..) => {}
        }
    }

    // Heal, restart everyone, settle.
    w.stop_writer();
    w.sim_mut().heal();
    w.sim_mut().set_net(base);
    for i in 0..n {
        w.block_data(i, false);
        w.set_import_oom(i, false);
        w.set_auth_rejected(i, false);
        if !w.sim().is_up(i) {
            w.restart(i)?;
        }
    }
    w.run_for(plan.settle_ms)?;
    let all: Vec<usize> = (0..n).collect();
    check_epochs_converged(w.sim(), &all)
        .and_then(|()| w.check_no_stale_keys())
        .map_err(|m| setup_violation(w.sim(), "convergence after heal", m))?;
    let checked = check_acked_writes(&w, &migrated)
        .map_err(|m| setup_violation(w.sim(), "acked write", m))?;
    Ok(ScheduleReport {
        trace: w.sim().trace().digest(),
        acked: w.acked().len(),
        checked,
        promotions: w
            .events()
            .iter()
            .filter(|(_, _, e)| matches!(e, Output::BecamePrimary))
            .count(),
        asm: w.asm_stats().clone(),
    })
}

/// The acknowledged-write oracle: a write acknowledged by a primary is still one of its keys,
/// with the value it left (see [`World::has_write`]), as long as that primary still owns the
/// slot and nothing allowed it to drop the key. Valkey Cluster replicates asynchronously, so
/// a failover may lose acknowledged writes (the promoted replica never got them, §12): the
/// oracle checks the writes whose acknowledging host is, at the end, up and a primary owning
/// the slot in its own view, and during the run was never told to replicate (`ReplicateFrom`:
/// a resync replaces its data), to reset (`ClusterReset`), or to delete the slot's keys
/// (`DeleteSlotKeys`), for slots no migration named (`migrated`). Returns how many writes it checked.
///
/// # Errors
/// The first acknowledged write such a host lacks.
pub fn check_acked_writes(w: &World, migrated: &SlotSet) -> Result<usize, String> {
    let n = w.sim().hosts();
    let mut dropped_data = vec![false; n];
    let mut deleted: Vec<SlotSet> = vec![SlotSet::new(); n];
    for (_, host, e) in w.events() {
        match e {
            Output::ReplicateFrom { .. } | Output::ClusterReset { .. } => {
                dropped_data[*host] = true
            }
            Output::DeleteSlotKeys(s) => deleted[*host] = deleted[*host].union(s),
            _ => {}
        }
    }
    let mut checked = 0;
    for a in w.acked() {
        let h = a.host;
        if dropped_data[h] || deleted[h].contains(a.slot) || migrated.contains(a.slot) {
            continue;
        }
        let owns = w.node(h).is_some_and(|x| {
            let t = x.topology();
            t.myself().is_primary() && t.slot_owner(a.slot) == Some(t.myself_id())
        });
        if !owns {
            continue;
        }
        checked += 1;
        if !w.has_write(h, a.id) {
            return Err(format!(
                "host {h} acknowledged write {} to slot {} at {} (offset {}) and still owns the \
                 slot, but lacks the write",
                a.id,
                a.slot.get(),
                a.at.0,
                a.offset
            ));
        }
    }
    Ok(checked)
}

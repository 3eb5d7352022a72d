//! The seeded random-fault run over many seeds (partitions, one-way blocks, crashes with
//! kept-or-lost unacknowledged writes, restarts, link resets, latency changes), invariants
//! checked after every step and convergence after healing. Seed count: FERROCLUSTER_SIM_SEEDS
//! (default 300), from FERROCLUSTER_SIM_FIRST_SEED (default 0); one seed:
//! FERROCLUSTER_SIM_SEED.

use ferrocluster_sim::seed::{check_seeds, seed_count_or, seed_range};
use ferrocluster_sim::{random_fault_run, FaultPlan};

/// Default number of seeds: sized for CI (a debug build on 2 cores).
const DEFAULT_SEEDS: u64 = 300;

#[test]
fn random_faults_break_no_invariant() {
    let plan = FaultPlan::default();
    let count = seed_count_or(DEFAULT_SEEDS);
    let mut runs = 0u64;
    let mut events = 0u64;
    let mut faults = [0u64; 8];
    check_seeds(
        "random_faults_break_no_invariant",
        seed_range(count),
        |seed| {
            let r = random_fault_run(seed, &plan)?;
            runs += 1;
            events += r.events;
            for (a, b) in faults.iter_mut().zip(r.faults) {
                *a += b;
            }
            Ok::<(), ferrocluster_sim::Violation>(())
        },
    );
    println!(
        "{runs} seeds, {events} events; faults: splits {} one-way {} isolations {} heals {} \
         crashes {} restarts {} link resets {} latency changes {}",
        faults[0], faults[1], faults[2], faults[3], faults[4], faults[5], faults[6], faults[7]
    );
    assert!(
        faults[4] > 0 && faults[0] > 0,
        "the fault mix never crashed or split"
    );
}

#[test]
fn a_random_fault_run_is_reproducible_from_its_seed() {
    let plan = FaultPlan {
        fault_ms: 8_000,
        settle_ms: 8_000,
        ..FaultPlan::default()
    };
    let a = random_fault_run(42, &plan).unwrap();
    let b = random_fault_run(42, &plan).unwrap();
    assert_eq!(a, b, "same seed, different run");
    let c = random_fault_run(43, &plan).unwrap();
    assert_ne!(a.trace, c.trace, "different seeds gave the same trace");
}

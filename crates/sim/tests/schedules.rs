//! Named schedules for [`run_schedule`] (issue 21): the interpreter the `sim_schedule` fuzz
//! target drives, with the schedules worth keeping. A schedule the fuzzer finds breaking an
//! invariant lands here under a name, with its seed and steps as the fuzzer printed them.
//! Every run checks the simulator's invariants after each step, then convergence and the
//! acknowledged-write oracle after the heal.

use ferrocluster_sim::ScheduleStep::*;
use ferrocluster_sim::{run_schedule, SchedulePlan, ScheduleStep};

fn run(seed: u64, steps: &[(u64, ScheduleStep)]) -> ferrocluster_sim::ScheduleReport {
    match run_schedule(seed, &SchedulePlan::default(), steps) {
        Ok(r) => r,
        Err(v) => panic!("seed {seed}: {v}"),
    }
}

/// `CLUSTER MIGRATESLOTS` of the first `count` slots of primary `range` on `from` to `to`.
fn migrate(from: usize, to: usize, range: usize, count: u16) -> ScheduleStep {
    Migrate {
        from,
        to,
        range,
        count,
    }
}

#[test]
fn a_quiet_schedule_keeps_every_acknowledged_write_of_the_primaries() {
    let r = run(1, &[(500, Write(0)), (500, Write(1)), (1_000, Heal)]);
    assert!(r.acked > 0, "the writer got no acknowledgement");
    assert_eq!(
        r.checked, r.acked,
        "a quiet run's writes all stay with their primaries"
    );
    assert_eq!(r.promotions, 0);
}

#[test]
fn a_crashed_primary_is_replaced_and_the_oracle_still_holds_for_the_other() {
    let r = run(2, &[(300, Crash(0)), (4_000, Write(1)), (200, Restart(0))]);
    assert!(
        r.promotions >= 1,
        "the replica of the crashed primary never took over"
    );
    assert!(
        r.checked > 0,
        "the surviving primary's writes were not checked"
    );
}

#[test]
fn migration_under_a_manual_failover_of_the_source_converges() {
    let r = run(
        3,
        &[
            (200, migrate(0, 1, 0, 4)),
            (50, Failover(2, 0)),
            (1_500, Write(0)),
            (500, CancelMigrations(0)),
        ],
    );
    assert!(
        r.asm.connections > 0 && r.asm.snapshots > 0,
        "the migration never started: {:?}",
        r.asm
    );
}

#[test]
fn migration_to_a_target_that_crashes_or_refuses_converges() {
    let r = run(
        4,
        &[
            (100, AuthRejected(1, true)),
            (100, migrate(0, 1, 0, 2)),
            (300, AuthRejected(1, false)),
            (100, migrate(0, 1, 0, 2)),
            (30, Crash(1)),
            (800, BreakMigrationLinks(0, 1)),
            (500, Restart(1)),
            (200, ImportOom(1, true)),
            (10, migrate(0, 1, 0, 1)),
        ],
    );
    assert!(r.asm.connections > 0, "no migration connected: {:?}", r.asm);
}

#[test]
fn takeover_in_a_minority_partition_converges_after_the_heal() {
    run(
        5,
        &[
            (100, Split(0b10_0100)),
            (100, Failover(2, 2)),
            (2_500, Write(0)),
            (100, Latency(300)),
            (1_000, Heal),
            (100, Failover(0, 1)),
            (100, BlockData(3, true)),
            (2_000, Crash(1)),
        ],
    );
}

#[test]
fn a_schedule_is_reproducible_from_its_seed_and_steps() {
    let steps = [
        (300, Crash(1)),
        (2_000, Restart(1)),
        (100, Split(0b01_0101)),
    ];
    let a = run(6, &steps);
    let b = run(6, &steps);
    assert_eq!(a, b, "same seed and steps, different run");
    let c = run(7, &steps);
    assert_ne!(a.trace, c.trace, "different seeds gave the same trace");
}

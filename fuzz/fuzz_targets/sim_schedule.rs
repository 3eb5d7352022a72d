//! The fuzzer chooses the fault schedule of a small simulated cluster (issue 21): the seed,
//! then up to 24 steps of `ferrocluster_sim::ScheduleStep` (crash, restart, split, one-way
//! block, isolation, heal, link reset, latency, blocked replication, client writes, manual
//! failovers, atomic slot migrations and their cancels, import OOM, AUTH refusal, migration
//! link resets), each after a pause of 0..=2047 ms, run by `ferrocluster_sim::run_schedule`
//! on three primaries with one replica each. The checks are the simulator's: its invariants
//! after every step, then convergence and the acknowledged-write oracle after the heal. A
//! violation panics with the schedule, to be kept as a named scenario in
//! `crates/sim/tests/schedules.rs`.
#![no_main]

use ferrocluster_sim::{run_schedule, SchedulePlan, ScheduleStep};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

const MAX_STEPS: usize = 24;

fn step(u: &mut Unstructured) -> Result<ScheduleStep> {
    let host =
        |u: &mut Unstructured| -> Result<usize> { Ok(usize::from(u.int_in_range(0..=5u8)?)) };
    Ok(match u.int_in_range(0..=17u8)? {
        0 | 1 => ScheduleStep::Crash(host(u)?),
        2 => ScheduleStep::Restart(host(u)?),
        3 => ScheduleStep::Split(u32::from(u.int_in_range(1..=62u8)?)),
        4 => ScheduleStep::BlockOneWay(host(u)?, host(u)?),
        5 => ScheduleStep::Isolate(host(u)?),
        6 => ScheduleStep::Heal,
        7 => ScheduleStep::BreakLinks(host(u)?, host(u)?),
        8 => ScheduleStep::Latency(u64::from(u.int_in_range(1..=400u16)?)),
        9 => ScheduleStep::BlockData(host(u)?, u.arbitrary()?),
        10 => ScheduleStep::Write(host(u)?),
        11 | 12 => ScheduleStep::Failover(host(u)?, u.int_in_range(0..=2u8)?),
        13 | 14 => ScheduleStep::Migrate {
            from: host(u)?,
            to: host(u)?,
            range: host(u)?,
            count: u.int_in_range(1..=4u16)?,
        },
        15 => ScheduleStep::CancelMigrations(host(u)?),
        16 => match u.int_in_range(0..=1u8)? {
            0 => ScheduleStep::ImportOom(host(u)?, u.arbitrary()?),
            _ => ScheduleStep::AuthRejected(host(u)?, u.arbitrary()?),
        },
        _ => ScheduleStep::BreakMigrationLinks(host(u)?, host(u)?),
    })
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(seed) = u.arbitrary::<u8>() else {
        return;
    };
    let mut steps = Vec::new();
    while steps.len() < MAX_STEPS && !u.is_empty() {
        let Ok(pause) = u.int_in_range(0..=2047u16) else {
            break;
        };
        let Ok(s) = step(&mut u) else { break };
        steps.push((u64::from(pause), s));
    }
    let plan = SchedulePlan::default();
    if let Err(v) = run_schedule(u64::from(seed), &plan, &steps) {
        panic!("{v}\nseed {seed}, plan {plan:?}\nsteps: {steps:?}");
    }
});

//! The soak runner: many random-fault and random-failover seeds across cores, outside the
//! test harness (issue 21). Build it in release:
//!
//! ```text
//! cargo run -p ferrocluster-sim --release --bin soak -- --kind both --seeds 10000 --threads 2
//! ```
//!
//! Every worker thread takes the next seed of a shared counter, runs
//! [`ferrocluster_sim::random_fault_run`] / [`ferrocluster_sim::random_failover_run`] with the
//! default plans (the ones CI's `random_faults` / `random_failover` tests run), and reports.
//! The main thread prints a progress line (seeds done, seeds/s, failures) every `--every`
//! seconds and each failing seed as it is found, with its violation and the command that
//! replays it. The exit status is 1 if any seed failed.
// A host binary, not a Sans-IO crate: it reads the wall clock (seeds/s) and runs threads.
#![allow(clippy::disallowed_methods)]
#![forbid(unsafe_code)]

use clap::{Parser, ValueEnum};
use ferrocluster_sim::seed::replay_hint;
use ferrocluster_sim::{random_failover_run, random_fault_run, FailoverPlan, FaultPlan};
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Which random run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Kind {
    /// `random_fault_run` with `FaultPlan::default()` (test `random_faults`).
    Faults,
    /// `random_failover_run` with `FailoverPlan::default()` (test `random_failover`).
    Failover,
    /// Faults first, then failover, each with `--seeds` seeds.
    Both,
}

/// Runs N seeds of the simulator's random runs in parallel and reports failing seeds.
#[derive(Debug, Parser)]
#[command(name = "soak")]
struct Args {
    /// Which run.
    #[arg(long, value_enum, default_value = "both")]
    kind: Kind,
    /// Seeds per kind.
    #[arg(long, default_value_t = 1000)]
    seeds: u64,
    /// First seed.
    #[arg(long, default_value_t = 0)]
    first: u64,
    /// Worker threads (default: the machine's parallelism).
    #[arg(long)]
    threads: Option<usize>,
    /// Stop after this many seconds per kind (the seeds done so far are reported).
    #[arg(long)]
    max_seconds: Option<u64>,
    /// Seconds between progress lines.
    #[arg(long, default_value_t = 10)]
    every: u64,
    /// Stop at the first failing seed.
    #[arg(long)]
    fail_fast: bool,
}

/// What one seed gave: Ok(events or votes) or the violation text.
type SeedResult = (u64, Result<u64, String>);

fn run_one(kind: Kind, seed: u64) -> Result<u64, String> {
    match kind {
        Kind::Faults => random_fault_run(seed, &FaultPlan::default())
            .map(|r| r.events)
            .map_err(|v| v.to_string()),
        Kind::Failover => random_failover_run(seed, &FailoverPlan::default())
            .map(|r| r.promotions)
            .map_err(|v| v.to_string()),
        Kind::Both => unreachable!("split by main"),
    }
}

/// The command that replays `seed` of `kind` (the test of that kind with the seed fixed).
fn replay(kind: Kind, seed: u64) -> String {
    let test = match kind {
        Kind::Faults => "--test random_faults random_faults_break_no_invariant",
        _ => "--test random_failover random_faults_with_failovers_converge_and_never_double_vote",
    };
    replay_hint(seed, test)
}

/// Runs one kind; returns (seeds done, failing seeds).
fn soak(kind: Kind, args: &Args, threads: usize) -> (u64, Vec<u64>) {
    let next = AtomicU64::new(args.first);
    let end = args.first.saturating_add(args.seeds);
    let stop = AtomicBool::new(false);
    let (tx, rx) = mpsc::channel::<SeedResult>();
    let start = Instant::now();
    let deadline = args.max_seconds.map(|s| start + Duration::from_secs(s));
    let mut done = 0u64;
    let mut total = 0u64;
    let mut failed = Vec::new();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let tx = tx.clone();
            let (next, stop) = (&next, &stop);
            scope.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let seed = next.fetch_add(1, Ordering::Relaxed);
                    if seed >= end {
                        break;
                    }
                    if tx.send((seed, run_one(kind, seed))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let mut last = Instant::now();
        loop {
            match rx.recv_timeout(Duration::from_millis(200)) {
                Ok((seed, r)) => {
                    done += 1;
                    match r {
                        Ok(n) => total += n,
                        Err(e) => {
                            failed.push(seed);
                            println!("\nFAIL {kind:?} seed {seed}: {e}");
                            println!("replay with: {}", replay(kind, seed));
                            if args.fail_fast {
                                stop.store(true, Ordering::Relaxed);
                            }
                        }
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                stop.store(true, Ordering::Relaxed);
            }
            if last.elapsed() >= Duration::from_secs(args.every) {
                last = Instant::now();
                progress(kind, done, args.seeds, start, failed.len());
            }
        }
    });
    progress(kind, done, args.seeds, start, failed.len());
    let what = if kind == Kind::Faults {
        "events"
    } else {
        "promotions"
    };
    println!(
        "\n{kind:?}: {done} seeds ({}..) in {:.1} s on {threads} threads, {:.2} seeds/s, \
         {total} {what}, {} failed {:?}",
        args.first,
        start.elapsed().as_secs_f64(),
        done as f64 / start.elapsed().as_secs_f64().max(1e-9),
        failed.len(),
        failed
    );
    (done, failed)
}

/// One progress line: a bar, seeds done of the total, seeds/s, failures.
fn progress(kind: Kind, done: u64, of: u64, start: Instant, failures: usize) {
    const WIDTH: u64 = 30;
    let filled = (done * WIDTH).checked_div(of).unwrap_or(WIDTH).min(WIDTH);
    let bar: String = (0..WIDTH)
        .map(|i| if i < filled { '#' } else { '.' })
        .collect();
    let secs = start.elapsed().as_secs_f64().max(1e-9);
    print!(
        "\r{kind:?} [{bar}] {done}/{of} seeds, {:.2} seeds/s, {failures} failed, {:.0} s",
        done as f64 / secs,
        secs
    );
    let _ = std::io::stdout().flush();
}

fn main() {
    let args = Args::parse();
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let kinds: &[Kind] = match args.kind {
        Kind::Both => &[Kind::Faults, Kind::Failover],
        k => std::slice::from_ref(match k {
            Kind::Faults => &Kind::Faults,
            _ => &Kind::Failover,
        }),
    };
    let mut any_failed = false;
    for &k in kinds {
        let (_, failed) = soak(k, &args, threads.max(1));
        any_failed |= !failed.is_empty();
    }
    std::process::exit(i32::from(any_failed));
}

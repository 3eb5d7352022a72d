//! Failover time in the simulator (issue 5): 3 primaries with one replica each (6 hosts,
//! `ferrocluster-sim` with simulated replication), primary 0 crashes, and the clock runs until
//! every running node has `cluster_state:ok` and names the replica as the owner of the dead
//! primary's slots. Reported per node timeout over many seeds: p50, p99, min and max, next to
//! the figure the facts sheet implies (`shared/spec/cluster-bus.md` §9, §12.2): PFAIL after
//! NODE_TIMEOUT of silence (the last PING may have been answered up to NODE_TIMEOUT / 2
//! before the crash), FAIL as soon as a majority's reports meet, then the election delay of
//! 500 + random(0..499) ms (rank 0), one vote round trip, and the PONG broadcast — about
//! NODE_TIMEOUT plus one to two seconds.
//!
//! `harness = false`: the figures are simulated milliseconds, not wall time, so criterion's
//! statistics do not apply. Seeds: `SIM_FAILOVER_SEEDS` (default 100); node timeouts in ms:
//! `SIM_FAILOVER_TIMEOUTS` (default `15000,2000`).
#![allow(clippy::disallowed_methods)] // a host: wall-clock time is reported beside the figures

use ferrocluster_sim::measure_failover;
use std::time::Instant;

fn env_list(name: &str, default: &[u64]) -> Vec<u64> {
    std::env::var(name)
        .ok()
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .filter(|v: &Vec<u64>| !v.is_empty())
        .unwrap_or_else(|| default.to_vec())
}

/// The value at quantile `q` (0..=1) of sorted `v`, nearest rank.
fn quantile(v: &[u64], q: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

fn main() {
    // `cargo bench` passes `--bench`; anything else (a criterion filter) is ignored.
    let seeds = env_list("SIM_FAILOVER_SEEDS", &[100])[0];
    let timeouts = env_list("SIM_FAILOVER_TIMEOUTS", &[15_000, 2_000]);
    println!("sim_failover: 3 primaries + 1 replica each, primary 0 crashes; {seeds} seeds");
    for nt in timeouts {
        let started = Instant::now();
        let mut times = Vec::new();
        let mut other_winner = 0;
        let mut failed = 0;
        for seed in 0..seeds {
            match measure_failover(seed, nt) {
                Ok(t) => {
                    times.push(t.failover_ms);
                    if t.new_primary != 3 {
                        other_winner += 1;
                    }
                }
                Err(v) => {
                    failed += 1;
                    eprintln!("seed {seed}: {v}");
                }
            }
        }
        times.sort_unstable();
        let p50 = quantile(&times, 0.50);
        let p99 = quantile(&times, 0.99);
        println!(
            "node timeout {nt:>6} ms: failover p50 {p50:>6} ms (NT + {:>5} ms), p99 {p99:>6} ms \
             (NT + {:>5} ms), min {} ms, max {} ms; spec: NT + 1000..2000 ms = {}..{} ms; \
             {} runs ok, {failed} failed, {other_winner} won by another node; wall {:.1} s",
            p50 as i64 - nt as i64,
            p99 as i64 - nt as i64,
            times.first().copied().unwrap_or(0),
            times.last().copied().unwrap_or(0),
            nt + 1_000,
            nt + 2_000,
            times.len(),
            started.elapsed().as_secs_f64()
        );
    }
}

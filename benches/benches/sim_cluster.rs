//! The simulator at scale (issue 4): 10, 100 and 1000 `ClusterNode`s in `ferrocluster-sim`,
//! started from a nodes.conf that already lists the whole cluster (as after a restart), with
//! every slot assigned. Prints, per run: simulated time, wall time, simulated/wall ratio, and
//! the bus traffic per node per second in steady state (frames and bytes), with the
//! cluster-wide PING rate next to the worked example of the Redis Cluster specification: 100
//! nodes with a 60 s node timeout send about 330 PINGs per second in the whole cluster (each
//! node pings every other node once per NODE_TIMEOUT / 2: 100 × 99 / 30 s ≈ 330). That
//! example ignores that a node adopts newer pong times from gossip entries (facts sheet §7.4),
//! which is why the measured rate is lower.
//!
//! Real Redis 7.0 under the same topology (all primaries, slots split evenly), measured with
//! `benches/redis-ping-rate.sh`, adopts pong times from gossip the same way (valkey
//! `src/cluster_legacy.c`, `clusterProcessGossipSection`: a healthy entry's `pong_received`
//! replaces ours when we have no ping in flight and no failure reports, if newer and at most
//! 500 ms in the future), so its rates are the reference for the PING/s column. Measured
//! with redis-server 7.0.15 on loopback (120 s windows): 100 nodes, 60 s timeout: 117.5
//! PING/s; 100 nodes, 15 s: 527.8; 10 nodes, 60 s: 9.9; 10 nodes, 15 s: 10.7 — the worked
//! example's 330 is the no-gossip worst case.
//!
//! `harness = false`: this prints figures rather than criterion statistics, because one
//! sample of the 1000-node run takes long. Sizes: `SIM_BENCH_SIZES` (default `10,100`; the
//! 1000-node run is a one-shot: `SIM_BENCH_SIZES=1000`, run alone so that the peak RSS
//! column is its own); simulated seconds: `SIM_BENCH_SECS` (default 60) and
//! `SIM_BENCH_SECS_1000` for 1000 nodes (default 60); node timeouts in ms:
//! `SIM_BENCH_TIMEOUTS` (default `15000,60000`); start-up spread in ms:
//! `SIM_BENCH_STAGGER_MS` (default: 1 ms per node, at most 5000).
//!
//! Invariants are not checked (`set_check_invariants(false)`): the cluster invariants look
//! at every node's view after every step, which at 1000 nodes costs more than the run; the
//! tests of `ferrocluster-sim` check them. The peak RSS column is the process's high-water
//! mark (`VmHWM` of /proc/self/status) after the run, so it covers every earlier run too.
#![allow(clippy::disallowed_methods)] // a host: wall-clock time is what it measures

use ferrocluster_sim::node::ClusterConfig;
use ferrocluster_sim::{preset_cluster_sim_staggered, NetConfig};
use std::time::Instant;

/// The PING type code (facts sheet §4).
const PING: usize = 0;

fn env_list(name: &str, default: &[u64]) -> Vec<u64> {
    std::env::var(name)
        .ok()
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .filter(|v: &Vec<u64>| !v.is_empty())
        .unwrap_or_else(|| default.to_vec())
}

/// The process's peak resident set size (`VmHWM` of /proc/self/status, Linux), e.g. "3100 MB";
/// "n/a" where that file does not exist.
fn peak_rss() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or_else(|| "n/a".to_string(), |kb| format!("{} MB", kb / 1024))
}

struct Figures {
    wall_secs: f64,
    events: u64,
    window_secs: f64,
    pings_per_sec: f64,
    frames_per_node_per_sec: f64,
    bytes_per_node_per_sec: f64,
}

fn run(n: usize, timeout_ms: u64, sim_secs: u64) -> Figures {
    let config = ClusterConfig {
        node_timeout_ms: timeout_ms,
        ..ClusterConfig::default()
    };
    let started = Instant::now();
    // Nodes join one after another over the first seconds (1 ms apart, at most 5 s): at
    // start-up every node PINGs every peer as its links come up, and 1000 nodes starting at
    // one instant put ~1M full PINGs (~12.7 KB each, ~11 GB) in flight at once.
    let stagger_ms = env_list("SIM_BENCH_STAGGER_MS", &[(n as u64).min(5_000)])[0];
    let mut sim = match preset_cluster_sim_staggered(7, n, config, NetConfig::default(), stagger_ms)
    {
        Ok(s) => s,
        Err(v) => panic!("cluster did not start: {v}"),
    };
    sim.set_check_invariants(false);
    // Steady state: the first round of PINGs (one ping interval after the load) is past;
    // measure over the rest of the run.
    let total_ms = sim_secs * 1000;
    let warm_ms = (stagger_ms + timeout_ms / 2 + 2_000).min(total_ms / 2);
    if let Err(v) = sim.run_for(warm_ms) {
        panic!("{v}");
    }
    let before = sim.total_traffic();
    if let Err(v) = sim.run_for(total_ms - warm_ms) {
        panic!("{v}");
    }
    let after = sim.total_traffic();
    let wall_secs = started.elapsed().as_secs_f64();
    let window_secs = (total_ms - warm_ms) as f64 / 1000.0;
    let per_node = window_secs * n as f64;
    Figures {
        wall_secs,
        events: sim.events(),
        window_secs,
        pings_per_sec: (after.frames_by_type[PING] - before.frames_by_type[PING]) as f64
            / window_secs,
        frames_per_node_per_sec: (after.frames() - before.frames()) as f64 / per_node,
        bytes_per_node_per_sec: (after.bytes - before.bytes) as f64 / per_node,
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a plain argument selects one size, e.g. `100`.
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let sizes = env_list("SIM_BENCH_SIZES", &[10, 100]);
    let timeouts = env_list("SIM_BENCH_TIMEOUTS", &[15_000, 60_000]);
    let secs = env_list("SIM_BENCH_SECS", &[60])[0];
    let secs_1000 = env_list("SIM_BENCH_SECS_1000", &[60])[0];
    println!(
        "{:>5} {:>7} {:>5} {:>8} {:>8} {:>10} {:>7} {:>10} {:>11} {:>12} {:>12} {:>9}",
        "nodes",
        "timeout",
        "sim s",
        "wall s",
        "sim/wall",
        "events",
        "window",
        "PING/s",
        "expected",
        "frames/nd/s",
        "bytes/nd/s",
        "peak RSS"
    );
    for &n in &sizes {
        if filter.as_deref().is_some_and(|f| f != n.to_string()) {
            continue;
        }
        for &t in &timeouts {
            let sim_secs = if n >= 1000 { secs_1000 } else { secs };
            let f = run(n as usize, t, sim_secs);
            // Each node pings each other node once per NODE_TIMEOUT / 2 (§7.2 step 3) when
            // nothing else refreshes its pong time; gossip does (§7.4 adopts newer pong
            // times from gossip entries), and the once-a-second random ping adds N per second.
            let expected = (n * (n - 1)) as f64 / (t as f64 / 2000.0);
            println!(
                "{:>5} {:>6}s {:>5} {:>8.2} {:>8.2} {:>10} {:>6.1}s {:>10.1} {:>11.1} {:>12.2} {:>12.0} {:>9}",
                n,
                t / 1000,
                sim_secs,
                f.wall_secs,
                sim_secs as f64 / f.wall_secs,
                f.events,
                f.window_secs,
                f.pings_per_sec,
                expected,
                f.frames_per_node_per_sec,
                f.bytes_per_node_per_sec,
                peak_rss()
            );
        }
    }
    println!("worked example (Redis Cluster specification): 100 nodes, 60 s node timeout: about 330 PINGs/s in the whole cluster");
}

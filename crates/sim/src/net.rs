//! The network model's knobs and its partition table.

use std::collections::BTreeSet;

/// What a connect attempt across a partition does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionedConnect {
    /// The SYN is lost: nothing comes back; the engine's own timeouts must act.
    Hang,
    /// The attempt fails after one latency (ICMP unreachable / refused).
    Fail,
    /// Chosen at random per attempt.
    Random,
}

/// Network parameters. Every random choice draws from the simulator's seeded RNG.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetConfig {
    /// One-way latency of every message, drawn uniformly per message from
    /// `min_latency_ms..=max_latency_ms`. The stream order is kept regardless.
    pub min_latency_ms: u64,
    /// See `min_latency_ms`.
    pub max_latency_ms: u64,
    /// Probability in percent (0..=100) that a transmit is split at a random point into
    /// two deliveries (applied repeatedly, at most 3 splits).
    pub split_percent: u8,
    /// Probability in percent that ready chunks of one stream are delivered in one call.
    pub coalesce_percent: u8,
    /// What a connect across a partition does.
    pub partitioned_connect: PartitionedConnect,
    /// How long after a crash the crashed host's peers see their links close (the kernel's
    /// RST or a keepalive), drawn uniformly from `0..=crash_close_max_ms` per link.
    pub crash_close_max_ms: u64,
    /// fsync delay of a nodes.conf write, drawn from `min_fsync_ms..=max_fsync_ms`.
    pub min_fsync_ms: u64,
    /// See `min_fsync_ms`.
    pub max_fsync_ms: u64,
}

impl Default for NetConfig {
    /// 1–5 ms latency, 20 % splits, 30 % coalescing, random partitioned connects, closes
    /// seen within 50 ms of a crash, fsync in 0–10 ms.
    fn default() -> NetConfig {
        NetConfig {
            min_latency_ms: 1,
            max_latency_ms: 5,
            split_percent: 20,
            coalesce_percent: 30,
            partitioned_connect: PartitionedConnect::Random,
            crash_close_max_ms: 50,
            min_fsync_ms: 0,
            max_fsync_ms: 10,
        }
    }
}

/// Directed reachability: `(from, to)` in the set means nothing sent by host `from` reaches
/// host `to` (a one-way partition). Two-way partitions block both directions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Partitions {
    blocked: BTreeSet<(usize, usize)>,
}

impl Partitions {
    /// Whether bytes from `from` reach `to`.
    pub fn delivers(&self, from: usize, to: usize) -> bool {
        !self.blocked.contains(&(from, to))
    }

    /// Blocks `from → to` only.
    pub fn block_one_way(&mut self, from: usize, to: usize) {
        if from != to {
            self.blocked.insert((from, to));
        }
    }

    /// Blocks both directions between `a` and `b`.
    pub fn block_two_way(&mut self, a: usize, b: usize) {
        self.block_one_way(a, b);
        self.block_one_way(b, a);
    }

    /// Splits hosts into groups: every pair in different groups is blocked both ways.
    /// Hosts in no group keep their links to everyone.
    pub fn split(&mut self, groups: &[&[usize]]) {
        for (i, g) in groups.iter().enumerate() {
            for h in groups.iter().skip(i + 1) {
                for &a in g.iter() {
                    for &b in h.iter() {
                        self.block_two_way(a, b);
                    }
                }
            }
        }
    }

    /// Cuts `host` off from all of `0..hosts` both ways.
    pub fn isolate(&mut self, host: usize, hosts: usize) {
        for other in 0..hosts {
            self.block_two_way(host, other);
        }
    }

    /// Removes every block.
    pub fn heal(&mut self) {
        self.blocked.clear();
    }

    /// Removes the blocks between `a` and `b` (both directions).
    pub fn heal_pair(&mut self, a: usize, b: usize) {
        self.blocked.remove(&(a, b));
        self.blocked.remove(&(b, a));
    }

    /// Whether any block is in place.
    pub fn is_empty(&self) -> bool {
        self.blocked.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_blocks_across_groups_only() {
        let mut p = Partitions::default();
        p.split(&[&[0, 1], &[2]]);
        assert!(p.delivers(0, 1));
        assert!(!p.delivers(0, 2) || !p.delivers(2, 0));
        assert!(!p.delivers(2, 1));
        assert!(p.delivers(3, 2));
        p.heal();
        assert!(p.is_empty());
    }

    #[test]
    fn one_way_blocks_one_direction() {
        let mut p = Partitions::default();
        p.block_one_way(0, 1);
        assert!(!p.delivers(0, 1));
        assert!(p.delivers(1, 0));
        p.heal_pair(1, 0);
        assert!(p.delivers(0, 1));
    }
}

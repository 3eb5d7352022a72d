//! Settings of the epoch engine (a subset of the node's `ClusterConfig`).

/// `CLUSTER_OPERATION_TIMEOUT`: floor of the failover auth timeout, ms (§1, §12.2).
pub const CLUSTER_OPERATION_TIMEOUT_MS: u64 = 2000;
/// `CLUSTER_REPLICA_MIGRATION_DELAY`: a primary must stay orphaned this long (ms) before a
/// replica migrates to it (§1, §14 step 5).
pub const REPLICA_MIGRATION_DELAY_MS: u64 = 5000;
/// `CLUSTER_MF_PAUSE_MULT`: a primary serving a manual failover pauses client writes for
/// this many times the manual failover timeout (§1, §13.2).
pub const MF_PAUSE_MULT: u64 = 2;
/// Cap of the election delay unit, ms: the unit is `min(NODE_TIMEOUT / 30, 500)`
/// ([`EpochConfig::election_delay_ms`]); Redis 7.0 and Valkey 8 used a fixed 500 (§12.2).
pub const ELECTION_FIXED_DELAY_MS: u64 = 500;
/// Extra delay, ms, of a replica whose replication offset is still 0 (a new replica that may
/// not know its siblings yet, so it may think itself the best; Valkey 9.0 PR #2449,
/// `clusterHandleReplicaFailover`).
pub const ELECTION_NEW_REPLICA_DELAY_MS: u64 = 500;

/// The options the epoch engine reads. `Default` gives Valkey 8's defaults (facts sheet §1).
///
/// ```
/// use ferrocluster_epoch::EpochConfig;
/// let c = EpochConfig::default();
/// assert_eq!(c.auth_timeout_ms(), 30_000); // 2 × 15000
/// assert_eq!(c.auth_retry_ms(), 60_000);
/// assert_eq!(EpochConfig { node_timeout_ms: 500, ..c }.auth_timeout_ms(), 2000);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochConfig {
    /// `cluster-node-timeout`, ms. Default 15000.
    pub node_timeout_ms: u64,
    /// `cluster-replica-validity-factor`; 0 disables the data-age check (§12.2). Default 10.
    pub replica_validity_factor: u32,
    /// `repl-ping-replica-period`, seconds (part of the data-age limit, §12.2). Default 10.
    pub repl_ping_replica_period_secs: u64,
    /// `cluster-replica-no-failover`: only manual failovers proceed (§12.1). Default no.
    pub replica_no_failover: bool,
    /// `cluster-allow-replica-migration` (§11.2 after-loop rule, §14). Default yes.
    pub allow_replica_migration: bool,
    /// `cluster-migration-barrier` (§14 step 2). Default 1.
    pub migration_barrier: u32,
    /// `cluster-manual-failover-timeout` (Valkey 8.1; the fixed `CLUSTER_MF_TIMEOUT` before),
    /// ms. Default 5000 (§1, §13).
    pub manual_failover_timeout_ms: u64,
}

impl Default for EpochConfig {
    fn default() -> Self {
        EpochConfig {
            node_timeout_ms: 15_000,
            replica_validity_factor: 10,
            repl_ping_replica_period_secs: 10,
            replica_no_failover: false,
            allow_replica_migration: true,
            migration_barrier: 1,
            manual_failover_timeout_ms: 5000,
        }
    }
}

impl EpochConfig {
    /// The failover auth timeout: max(2 × NODE_TIMEOUT, 2000) ms (§12.2). An election older
    /// than this has expired.
    pub fn auth_timeout_ms(&self) -> u64 {
        self.node_timeout_ms
            .saturating_mul(2)
            .max(CLUSTER_OPERATION_TIMEOUT_MS)
    }

    /// The unit of the election delay, ms: `min(NODE_TIMEOUT / 30, 500)`, at least 1 (Valkey
    /// 9.0, PR #2449 "Make cluster failover delay relative to node timeout",
    /// `clusterHandleReplicaFailover`; Redis 7.0 and Valkey 8: a fixed 500). An election
    /// starts `unit + random(0..unit) + rank × 2 × unit + failed-primary rank × unit` ms
    /// after its primary's FAIL: 500 / 1000 / 500 at the default 15000 ms, 166 / 332 / 166
    /// at 5000 ms.
    ///
    /// ```
    /// use ferrocluster_epoch::EpochConfig;
    /// let c = EpochConfig::default();
    /// assert_eq!(c.election_delay_ms(), 500);
    /// assert_eq!(EpochConfig { node_timeout_ms: 7500, ..c }.election_delay_ms(), 250);
    /// assert_eq!(EpochConfig { node_timeout_ms: 3000, ..c }.election_delay_ms(), 100);
    /// assert_eq!(EpochConfig { node_timeout_ms: 20, ..c }.election_delay_ms(), 1);
    /// ```
    pub fn election_delay_ms(&self) -> u64 {
        (self.node_timeout_ms / 30).clamp(1, ELECTION_FIXED_DELAY_MS)
    }

    /// The failover retry time: 2 × the auth timeout, ms (§12.2). A new election is scheduled
    /// only when the previous one is older than this.
    pub fn auth_retry_ms(&self) -> u64 {
        self.auth_timeout_ms().saturating_mul(2)
    }

    /// The largest data age (ms) with which a replica may start an automatic failover:
    /// `repl-ping-replica-period × 1000 + NODE_TIMEOUT × factor`; `None` when the factor is 0
    /// (check disabled, §12.2).
    pub fn max_data_age_ms(&self) -> Option<u64> {
        if self.replica_validity_factor == 0 {
            return None;
        }
        Some(
            self.repl_ping_replica_period_secs
                .saturating_mul(1000)
                .saturating_add(
                    self.node_timeout_ms
                        .saturating_mul(u64::from(self.replica_validity_factor)),
                ),
        )
    }

    /// How long a primary pauses client writes for a manual failover: timeout × 2, ms (§13.2).
    pub fn mf_pause_ms(&self) -> u64 {
        self.manual_failover_timeout_ms
            .saturating_mul(MF_PAUSE_MULT)
    }
}

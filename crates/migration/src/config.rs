//! Configuration of the migration engine (sheet A.9, A.13).

/// Migration settings, with Valkey's names and defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationConfig {
    /// `cluster-slot-migration-log-max-len`: number of jobs kept for GETSLOTMIGRATIONS;
    /// finished jobs beyond it are dropped oldest-first at [`crate::Migrations::handle_timeout`]
    /// (in-progress jobs are never dropped; 0 drops every finished job). Default 1000.
    pub log_max_len: usize,
    /// `slot-migration-max-failover-repl-bytes`: the export link's backlog (bytes still
    /// queued to the target) must be at most this before writes are paused; negative disables
    /// the check. Default 0 (fully drained).
    pub max_failover_repl_bytes: i64,
    /// `cluster-manual-failover-timeout` in ms; the write pause lasts at most 2× this
    /// (`CLUSTER_MF_PAUSE_MULT`). Default 5000.
    pub manual_failover_timeout_ms: u64,
    /// `repl-timeout` in ms: a job without interaction for longer fails with `Timed out after
    /// too long with no interaction`. Default 60000 (60 s).
    pub repl_timeout_ms: u64,
    /// Whether `primaryauth` is set: the source then sends AUTH (`primaryuser`/`primaryauth`,
    /// which the host holds) before ESTABLISH. Default false.
    pub auth_to_target: bool,
    /// Heartbeat `ACK` period in ms (Valkey's `run_with_period(1000)`). Default 1000.
    pub ack_interval_ms: u64,
    /// How often waiting states re-check their condition in ms (the cluster cron period).
    /// Default 100.
    pub cron_interval_ms: u64,
    /// Include the 9.1 `remaining_repl_size` field in GETSLOTMIGRATIONS. Default true.
    pub report_remaining_repl_size: bool,
}

/// `CLUSTER_OPERATION_TIMEOUT`: on `REQUEST-FAILOVER` the pause is extended to at least
/// now + 2000 ms (sheet A.9).
pub const FAILOVER_GRANT_PAUSE_MS: u64 = 2000;

impl Default for MigrationConfig {
    fn default() -> Self {
        MigrationConfig {
            log_max_len: 1000,
            max_failover_repl_bytes: 0,
            manual_failover_timeout_ms: 5000,
            repl_timeout_ms: 60_000,
            auth_to_target: false,
            ack_interval_ms: 1000,
            cron_interval_ms: 100,
            report_remaining_repl_size: true,
        }
    }
}

impl MigrationConfig {
    /// The write pause length: 2 × `cluster-manual-failover-timeout` (10 000 ms by default).
    pub fn pause_ms(&self) -> u64 {
        self.manual_failover_timeout_ms.saturating_mul(2)
    }
}

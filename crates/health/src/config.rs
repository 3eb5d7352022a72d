//! The settings and host-reported facts the queries read: [`HealthConfig`],
//! [`ReplicationFacts`], [`ReplLink`], the quorum rule and the replica data-age rule.

use ferrocluster_topology::Millis;

/// The cluster options the readiness rules depend on, each with Valkey's default (facts sheet
/// §1). The node builds it from its `ClusterConfig`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthConfig {
    /// `cluster-node-timeout` in ms (default 15000). Subtracted once from a replica's data age
    /// and multiplied by the validity factor (§12.2); also the pong-age limit for replicas
    /// judged from gossip ([`crate::Ineligibility::NoRecentPong`]).
    pub node_timeout_ms: u64,
    /// `cluster-replica-validity-factor` (default 10); 0 disables the data-age check (§1, §12.2).
    pub replica_validity_factor: u32,
    /// `repl-ping-replica-period` in ms (default 10000; the Valkey option is in seconds, so the
    /// node passes `seconds × 1000`).
    pub repl_ping_replica_period_ms: u64,
    /// `cluster-require-full-coverage` (default yes). Copied into [`crate::Health`] so an alert
    /// can tell "state ok although slots are unserved" apart (§10 step 2).
    pub require_full_coverage: bool,
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            node_timeout_ms: 15_000,
            replica_validity_factor: 10,
            repl_ping_replica_period_ms: 10_000,
            require_full_coverage: true,
        }
    }
}

impl HealthConfig {
    /// The largest data age (ms) at which a replica may still start an automatic failover:
    /// `repl_ping_replica_period_ms + node_timeout_ms × replica_validity_factor` (§12.2), or
    /// `None` when the factor is 0 (check disabled). Saturates instead of overflowing.
    ///
    /// ```
    /// use ferrocluster_health::HealthConfig;
    /// assert_eq!(HealthConfig::default().validity_limit_ms(), Some(160_000));
    /// let off = HealthConfig { replica_validity_factor: 0, ..HealthConfig::default() };
    /// assert_eq!(off.validity_limit_ms(), None);
    /// ```
    pub fn validity_limit_ms(&self) -> Option<u64> {
        if self.replica_validity_factor == 0 {
            return None;
        }
        Some(
            self.repl_ping_replica_period_ms.saturating_add(
                self.node_timeout_ms
                    .saturating_mul(u64::from(self.replica_validity_factor)),
            ),
        )
    }
}

/// The failure-report / election quorum for `size` voting primaries: `size / 2 + 1`
/// (facts sheet §0; §9.3 for FAIL, §12.2 for votes).
///
/// ```
/// assert_eq!(ferrocluster_health::quorum(0), 1);
/// assert_eq!(ferrocluster_health::quorum(3), 2);
/// assert_eq!(ferrocluster_health::quorum(4), 3);
/// ```
pub const fn quorum(size: usize) -> usize {
    size / 2 + 1
}

/// State of myself's replication link to its primary, as the host reports it. Only myself has
/// this; other replicas are judged from gossip (see the crate docs, "What a node can know").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplLink {
    /// The link is up (Valkey `repl_state == REPL_STATE_CONNECTED`).
    Up {
        /// When the last data or ping arrived from the primary (Valkey
        /// `primary->last_interaction`), Unix ms.
        last_interaction: Millis,
    },
    /// The link is down.
    Down {
        /// When it went down (Valkey `repl_down_since`), Unix ms; `None` if no sync has
        /// completed since the process started (Valkey keeps `repl_down_since = 0` then, which
        /// makes the data age "since forever").
        since: Option<Millis>,
    },
}

/// What the host knows about myself's replication, passed in when myself is a replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicationFacts {
    /// The replication link and its times.
    pub link: ReplLink,
    /// Myself's replication offset (bytes of the primary's stream processed).
    pub offset: u64,
}

impl ReplicationFacts {
    /// Valkey's data age in ms (§12.2, V8 `clusterHandleReplicaFailover`): seconds since the
    /// last interaction (link up) or since the link went down (link down), × 1000, at 1 s
    /// granularity (Valkey compares whole Unix seconds); then, if it exceeds NODE_TIMEOUT,
    /// NODE_TIMEOUT is subtracted (being cut off while the primary was being detected as
    /// failed is the baseline). `None` when no sync ever completed ([`ReplLink::Down`] with
    /// `since: None`): the age is unbounded.
    ///
    /// ```
    /// use ferrocluster_health::{ReplicationFacts, ReplLink};
    /// use ferrocluster_topology::Millis;
    /// let f = ReplicationFacts { link: ReplLink::Down { since: Some(Millis(100_900)) }, offset: 7 };
    /// // 120 s - 100 s = 20 s = 20000 ms > 15000, minus 15000:
    /// assert_eq!(f.data_age_ms(Millis(120_100), 15_000), Some(5_000));
    /// ```
    pub fn data_age_ms(&self, now: Millis, node_timeout_ms: u64) -> Option<u64> {
        let since = match self.link {
            ReplLink::Up { last_interaction } => last_interaction,
            ReplLink::Down { since: Some(t) } => t,
            ReplLink::Down { since: None } => return None,
        };
        let age = (now.as_u64() / 1000)
            .saturating_sub(since.as_u64() / 1000)
            .saturating_mul(1000);
        Some(if age > node_timeout_ms {
            age - node_timeout_ms
        } else {
            age
        })
    }

    /// Whether the replication link is up.
    pub fn link_up(&self) -> bool {
        matches!(self.link, ReplLink::Up { .. })
    }
}

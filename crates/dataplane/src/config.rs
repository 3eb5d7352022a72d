//! [`ReplicationConfig`]: every replication option with Valkey 9's default.

use crate::error::HostError;
use ferrocluster_topology::Millis;

/// `client-output-buffer-limit replica <hard> <soft> <soft-seconds>` (Valkey default
/// `256mb 64mb 60`). A replica is disconnected when the bytes held for it reach `hard_bytes`,
/// or stay at or above `soft_bytes` for longer than `soft_ms`. `0` disables a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputBufferLimit {
    /// Hard limit, bytes.
    pub hard_bytes: u64,
    /// Soft limit, bytes.
    pub soft_bytes: u64,
    /// How long the soft limit may be exceeded, ms.
    pub soft_ms: u64,
}

impl OutputBufferLimit {
    /// Valkey `checkClientOutputBufferLimits` for a connection holding `held` bytes: the hard
    /// limit at once, the soft limit once it has been exceeded for longer than `soft_ms`.
    /// `soft_since` is the connection's memory of when it went over the soft limit (cleared
    /// when it drops below).
    pub(crate) fn reached(&self, held: u64, soft_since: &mut Option<Millis>, now: Millis) -> bool {
        if self.hard_bytes > 0 && held >= self.hard_bytes {
            return true;
        }
        if self.soft_bytes > 0 && held >= self.soft_bytes {
            let since = *soft_since.get_or_insert(now);
            return now.since(since) > self.soft_ms;
        }
        *soft_since = None;
        false
    }

    /// When a connection over the soft limit since `soft_since` is closed, if it stays over.
    pub(crate) fn soft_deadline(&self, soft_since: Option<Millis>) -> Option<Millis> {
        soft_since.map(|t| t.saturating_add_ms(self.soft_ms.saturating_add(1)))
    }
}

impl Default for OutputBufferLimit {
    fn default() -> Self {
        OutputBufferLimit {
            hard_bytes: 256 * 1024 * 1024,
            soft_bytes: 64 * 1024 * 1024,
            soft_ms: 60_000,
        }
    }
}

/// Replication options, both sides. Defaults are Valkey 9's (`src/config.c`); where Redis 7.0
/// differs it is said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicationConfig {
    /// `repl-backlog-size`, bytes (Valkey 8+ default 10 MiB; Redis 7.0: 1 MiB). At least 1.
    pub backlog_size: u64,
    /// `repl-backlog-ttl`, ms (default 3600 s): a primary without replicas for this long
    /// frees its backlog and takes a new replid (Valkey `replicationCron`). `0`: never.
    pub backlog_ttl_ms: u64,
    /// `repl-ping-replica-period`, ms (default 10 s): how often a primary with replicas
    /// appends `ping` to the stream. At least 1.
    pub ping_period_ms: u64,
    /// `repl-timeout`, ms (default 60 s): a replica link with no data for this long is
    /// dropped, on both sides. At least 1.
    pub timeout_ms: u64,
    /// `repl-diskless-sync` (default yes): full syncs stream the RDB to the replica's socket
    /// with the `$EOF:` framing when every waiting replica said `capa eof`; otherwise the
    /// host saves a file and it is sent with the `$<len>` framing.
    pub diskless_sync: bool,
    /// `repl-diskless-sync-delay`, ms (default 5 s): a diskless snapshot waits this long
    /// after the first replica asked, so more replicas can share it.
    pub diskless_sync_delay_ms: u64,
    /// `repl-diskless-sync-max-replicas` (default 0, no limit): start the diskless snapshot
    /// early once this many replicas wait.
    pub diskless_sync_max_replicas: usize,
    /// `client-output-buffer-limit replica`.
    pub output_buffer_limit: OutputBufferLimit,
    /// `databases` (default 16): `SELECT` of a higher number in the stream is ignored as Valkey
    /// ignores a failing command from its primary.
    pub databases: u32,
    /// Replica side: the port sent in `REPLCONF listening-port` (the replica's client port).
    pub listening_port: u16,
    /// Replica side: `replica-announce-ip`, sent as `REPLCONF ip-address` when set.
    pub announce_ip: Option<String>,
    /// Replica side: `masteruser` (needs `primary_auth`).
    pub primary_user: Option<String>,
    /// Replica side: `masterauth`; when set, `AUTH [user] <auth>` is sent first.
    pub primary_auth: Option<Vec<u8>>,
    /// Replica side: the version sent in `REPLCONF version` (Valkey 8+ replicas send theirs,
    /// e.g. `9.1.2`; Redis 7.0 sends none). A Valkey primary counts replicas above 7.2.255
    /// as able to acknowledge a replicated `CLUSTER SETSLOT`, so set it only when the host
    /// applies those. `None`: not sent.
    pub replica_version: Option<String>,
}

impl Default for ReplicationConfig {
    fn default() -> Self {
        ReplicationConfig {
            backlog_size: 10 * 1024 * 1024,
            backlog_ttl_ms: 3_600_000,
            ping_period_ms: 10_000,
            timeout_ms: 60_000,
            diskless_sync: true,
            diskless_sync_delay_ms: 5_000,
            diskless_sync_max_replicas: 0,
            output_buffer_limit: OutputBufferLimit::default(),
            databases: 16,
            listening_port: 6379,
            announce_ip: None,
            primary_user: None,
            primary_auth: None,
            replica_version: None,
        }
    }
}

impl ReplicationConfig {
    /// Checks the ranges Valkey enforces.
    ///
    /// # Errors
    /// [`HostError::Config`] naming the option.
    pub fn validate(&self) -> Result<(), HostError> {
        if self.backlog_size == 0 || usize::try_from(self.backlog_size).is_err() {
            return Err(HostError::Config(
                "repl-backlog-size must be at least 1 byte",
            ));
        }
        if self.ping_period_ms == 0 {
            return Err(HostError::Config(
                "repl-ping-replica-period must be at least 1",
            ));
        }
        if self.timeout_ms == 0 {
            return Err(HostError::Config("repl-timeout must be at least 1"));
        }
        if self.databases == 0 {
            return Err(HostError::Config("databases must be at least 1"));
        }
        if self.primary_user.is_some() && self.primary_auth.is_none() {
            return Err(HostError::Config("masteruser needs masterauth"));
        }
        Ok(())
    }
}

//! `ClusterConfig`: every cluster option this node uses, with Valkey 8's defaults (facts sheet
//! §1 "Configuration defaults").

use ferrocluster_topology::{validate_hostname, validate_nodename, AnnounceError};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The bus port is the client port plus this offset unless `cluster-port` is set (§1).
pub const BUS_PORT_OFFSET: u16 = 10000;
/// Largest client port for which the default bus port (`port + 10000`) fits (§1).
pub const MAX_PORT_WITH_DEFAULT_BUS_PORT: u16 = 55535;

/// `cluster-preferred-endpoint-type` (§1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum PreferredEndpoint {
    /// `ip` (default).
    #[default]
    Ip,
    /// `hostname`.
    Hostname,
    /// `unknown-endpoint`.
    UnknownEndpoint,
}

/// The cluster options of one node. Units are in the names (`_ms`, `_secs`, `_bytes`);
/// `Default` gives Valkey 8's defaults. Check a hand-built value with
/// [`ClusterConfig::validate`] (construction of a node does).
///
/// ```
/// use ferrocluster_node::ClusterConfig;
/// let c = ClusterConfig::default();
/// assert_eq!(c.node_timeout_ms, 15_000);
/// assert_eq!(c.effective_bus_port(), 6379 + 10_000);
/// assert!(c.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// `port`: the client (TCP) port. Default 6379.
    pub port: u16,
    /// `tls-port`: the TLS client port, 0 = none. Default 0 (TLS is not modelled further).
    pub tls_port: u16,
    /// `cluster-port`: the bus port; 0 (default) = `port + 10000`, which requires
    /// `port <= 55535`.
    pub cluster_port: u16,
    /// `cluster-node-timeout`, ms. Default 15000. Drives PFAIL (§9.1), ping interval
    /// (half of it), failure-report validity (twice it), handshake timeout (max with 1000).
    pub node_timeout_ms: u64,
    /// `cluster-announce-ip`: sent in every header's `myip`. Default unset (receivers use the
    /// connection's peer address).
    pub announce_ip: Option<IpAddr>,
    /// `cluster-announce-port`: client port announced instead of `port`; 0 (default) = real.
    pub announce_port: u16,
    /// `cluster-announce-tls-port`: 0 (default) = real.
    pub announce_tls_port: u16,
    /// `cluster-announce-bus-port`: 0 (default) = the real bus port.
    pub announce_bus_port: u16,
    /// `cluster-announce-hostname`: `A-Z a-z 0-9 - .`, below 256 bytes. Default unset.
    pub announce_hostname: Option<String>,
    /// `cluster-announce-human-nodename`: aux-valid text (§18.2). Default unset.
    pub announce_human_nodename: Option<String>,
    /// `cluster-announce-client-ipv4` (V8). Default unset.
    pub announce_client_ipv4: Option<Ipv4Addr>,
    /// `cluster-announce-client-ipv6` (V8). Default unset.
    pub announce_client_ipv6: Option<Ipv6Addr>,
    /// `cluster-require-full-coverage`. Default yes (§10).
    pub require_full_coverage: bool,
    /// `cluster-allow-reads-when-down`. Default no.
    pub allow_reads_when_down: bool,
    /// `cluster-allow-pubsubshard-when-down`. Default yes.
    pub allow_pubsubshard_when_down: bool,
    /// `cluster-allow-replica-migration`. Default yes.
    pub allow_replica_migration: bool,
    /// `cluster-migration-barrier`. Default 1.
    pub migration_barrier: u32,
    /// `cluster-replica-validity-factor`; 0 disables the data-age check. Default 10.
    pub replica_validity_factor: u32,
    /// `cluster-replica-no-failover`: sets NOFAILOVER on myself. Default no.
    pub replica_no_failover: bool,
    /// `cluster-preferred-endpoint-type`. Default `ip`.
    pub preferred_endpoint: PreferredEndpoint,
    /// `cluster-link-sendbuf-limit`, bytes; 0 (default) = unlimited.
    pub link_sendbuf_limit_bytes: u64,
    /// `cluster-blacklist-ttl`, seconds a forgotten node stays banned. Default 60 (§16).
    pub blacklist_ttl_secs: u64,
    /// `cluster-ping-interval` (hidden test knob), ms; 0 (default) = NODE_TIMEOUT / 2.
    pub ping_interval_ms: u64,
    /// `repl-ping-replica-period`, seconds. Default 10.
    pub repl_ping_replica_period_secs: u64,
    /// `cluster-manual-failover-timeout` (Valkey 8.1; `CLUSTER_MF_TIMEOUT` before), ms.
    /// Default 5000. Also bounds the write pause of an atomic slot migration (2 × this,
    /// slot-migration sheet A.9).
    pub manual_failover_timeout_ms: u64,
    /// `cluster-slot-migration-log-max-len` (Valkey 9): finished slot migration jobs kept for
    /// CLUSTER GETSLOTMIGRATIONS; older finished ones are dropped (in-progress jobs never are).
    /// Default 1000 (slot-migration sheet A.13).
    pub slot_migration_log_max_len: usize,
    /// `slot-migration-max-failover-repl-bytes` (Valkey 9), bytes: an export pauses writes
    /// only once at most this many bytes are still queued towards the target; negative
    /// disables the check. Default 0 (fully drained; sheet A.9, A.13).
    pub slot_migration_max_failover_repl_bytes: i64,
    /// `repl-timeout`, ms: a slot migration job without interaction for longer fails with
    /// `Timed out after too long with no interaction`. Default 60 000 (sheet A.8, A.13).
    pub repl_timeout_ms: u64,
    /// Whether `primaryauth` is set: a slot migration source then sends `AUTH <primaryuser>
    /// <primaryauth>` (the host holds the credentials) before `SYNCSLOTS ESTABLISH`.
    /// Default false (sheet A.7).
    pub primaryauth_set: bool,
    /// `tls-cluster`: the bus speaks TLS, and the bus header's and gossip entries' `port` is
    /// then the TLS client port, `pport` the plaintext one (Valkey `clusterBuildMessageHdr`,
    /// `clusterSetGossipEntry`; Redis 7.0 the same). Default false: `port` is the plaintext
    /// port, `pport` the TLS one. Start-up only.
    pub tls_cluster: bool,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            port: 6379,
            tls_port: 0,
            cluster_port: 0,
            node_timeout_ms: 15_000,
            announce_ip: None,
            announce_port: 0,
            announce_tls_port: 0,
            announce_bus_port: 0,
            announce_hostname: None,
            announce_human_nodename: None,
            announce_client_ipv4: None,
            announce_client_ipv6: None,
            require_full_coverage: true,
            allow_reads_when_down: false,
            allow_pubsubshard_when_down: true,
            allow_replica_migration: true,
            migration_barrier: 1,
            replica_validity_factor: 10,
            replica_no_failover: false,
            preferred_endpoint: PreferredEndpoint::Ip,
            link_sendbuf_limit_bytes: 0,
            blacklist_ttl_secs: 60,
            ping_interval_ms: 0,
            repl_ping_replica_period_secs: 10,
            manual_failover_timeout_ms: 5000,
            slot_migration_log_max_len: 1000,
            slot_migration_max_failover_repl_bytes: 0,
            repl_timeout_ms: 60_000,
            primaryauth_set: false,
            tls_cluster: false,
        }
    }
}

/// Why a [`ClusterConfig`] was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `cluster-node-timeout` of 0 ms: every node would be PFAIL at once.
    #[error("cluster-node-timeout must be at least 1 ms")]
    NodeTimeoutZero,
    /// `cluster-port` is 0 and `port + 10000` does not fit in 16 bits (§1: Valkey refuses to
    /// start when the port is above 55535).
    #[error("port {0} is above 55535: set cluster-port, the default bus port would overflow")]
    PortTooHighForBusPort(u16),
    /// `cluster-announce-hostname` is not a valid hostname.
    #[error("invalid cluster-announce-hostname: {0}")]
    AnnounceHostname(AnnounceError),
    /// `cluster-announce-human-nodename` is not aux-valid text.
    #[error("invalid cluster-announce-human-nodename: {0}")]
    AnnounceHumanNodename(AnnounceError),
    /// `cluster-manual-failover-timeout` of 0 ms (its range is 1..INT_MAX).
    #[error("cluster-manual-failover-timeout must be at least 1 ms")]
    ManualFailoverTimeoutZero,
    /// [`Capabilities::databases`] of 0: a host has at least one database.
    #[error("the host must have at least one database")]
    NoDatabases,
}

impl ClusterConfig {
    /// Checks the relationships between options.
    ///
    /// # Errors
    /// The first [`ConfigError`] found.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.node_timeout_ms == 0 {
            return Err(ConfigError::NodeTimeoutZero);
        }
        if self.cluster_port == 0 && self.port > MAX_PORT_WITH_DEFAULT_BUS_PORT {
            return Err(ConfigError::PortTooHighForBusPort(self.port));
        }
        if let Some(h) = &self.announce_hostname {
            validate_hostname(h).map_err(ConfigError::AnnounceHostname)?;
        }
        if let Some(h) = &self.announce_human_nodename {
            validate_nodename(h).map_err(ConfigError::AnnounceHumanNodename)?;
        }
        if self.manual_failover_timeout_ms == 0 {
            return Err(ConfigError::ManualFailoverTimeoutZero);
        }
        Ok(())
    }

    /// The bus port this node listens on: `cluster-port`, or `port + 10000` (saturating;
    /// [`ClusterConfig::validate`] refuses the overflow).
    pub fn bus_port(&self) -> u16 {
        if self.cluster_port != 0 {
            self.cluster_port
        } else {
            self.port.saturating_add(BUS_PORT_OFFSET)
        }
    }

    /// The bus port announced to peers: `cluster-announce-bus-port` or [`Self::bus_port`].
    pub fn effective_bus_port(&self) -> u16 {
        if self.announce_bus_port != 0 {
            self.announce_bus_port
        } else {
            self.bus_port()
        }
    }

    /// The client port announced to peers: `cluster-announce-port` or `port`.
    pub fn effective_port(&self) -> u16 {
        if self.announce_port != 0 {
            self.announce_port
        } else {
            self.port
        }
    }

    /// The TLS port announced to peers: `cluster-announce-tls-port` or `tls-port`.
    pub fn effective_tls_port(&self) -> u16 {
        if self.announce_tls_port != 0 {
            self.announce_tls_port
        } else {
            self.tls_port
        }
    }

    /// The slot migration engine's settings from these options
    /// (`ferrocluster_migration::MigrationConfig`; its other knobs keep their defaults).
    pub fn migration_config(&self) -> ferrocluster_migration::MigrationConfig {
        ferrocluster_migration::MigrationConfig {
            log_max_len: self.slot_migration_log_max_len,
            max_failover_repl_bytes: self.slot_migration_max_failover_repl_bytes,
            manual_failover_timeout_ms: self.manual_failover_timeout_ms,
            repl_timeout_ms: self.repl_timeout_ms,
            auth_to_target: self.primaryauth_set,
            ..ferrocluster_migration::MigrationConfig::default()
        }
    }

    /// The gossip layer's settings from these options.
    pub(crate) fn gossip_config(&self) -> ferrocluster_gossip::GossipConfig {
        ferrocluster_gossip::GossipConfig {
            node_timeout_ms: self.node_timeout_ms,
            blacklist_ttl_secs: self.blacklist_ttl_secs,
            ping_interval_ms: (self.ping_interval_ms != 0).then_some(self.ping_interval_ms),
            announce_ip: self.announce_ip,
            tls_cluster: self.tls_cluster,
        }
    }

    /// The failure detector's settings from these options.
    pub(crate) fn failure_config(&self) -> ferrocluster_failure::FailureConfig {
        ferrocluster_failure::FailureConfig {
            node_timeout_ms: self.node_timeout_ms,
        }
    }

    /// The cluster state's settings from these options.
    pub(crate) fn state_config(&self) -> ferrocluster_failure::StateConfig {
        ferrocluster_failure::StateConfig {
            require_full_coverage: self.require_full_coverage,
            node_timeout_ms: self.node_timeout_ms,
        }
    }

    /// The epoch layer's settings from these options.
    pub(crate) fn epoch_config(&self) -> ferrocluster_epoch::EpochConfig {
        ferrocluster_epoch::EpochConfig {
            node_timeout_ms: self.node_timeout_ms,
            replica_validity_factor: self.replica_validity_factor,
            repl_ping_replica_period_secs: self.repl_ping_replica_period_secs,
            replica_no_failover: self.replica_no_failover,
            allow_replica_migration: self.allow_replica_migration,
            migration_barrier: self.migration_barrier,
            manual_failover_timeout_ms: self.manual_failover_timeout_ms,
        }
    }

    /// The readiness rules' settings from these options.
    pub(crate) fn health_config(&self) -> ferrocluster_health::HealthConfig {
        ferrocluster_health::HealthConfig {
            node_timeout_ms: self.node_timeout_ms,
            replica_validity_factor: self.replica_validity_factor,
            repl_ping_replica_period_ms: self.repl_ping_replica_period_secs.saturating_mul(1000),
            require_full_coverage: self.require_full_coverage,
        }
    }

    /// Ping interval in ms: `cluster-ping-interval`, or NODE_TIMEOUT / 2 when 0.
    pub fn ping_interval(&self) -> u64 {
        if self.ping_interval_ms != 0 {
            self.ping_interval_ms
        } else {
            self.node_timeout_ms / 2
        }
    }
}

/// What the host can do beside the bus, declared once at construction
/// ([`crate::ClusterNode::new`]). The node refuses, with a clear error and no state change,
/// any command the host could not carry out, instead of starting something that never
/// completes.
///
/// `Default` is a host with one database and neither replication nor a slot migration data
/// plane (the smallest host: a map behind a socket).
///
/// ```
/// use ferrocluster_node::Capabilities;
/// let server = Capabilities { replication: true, slot_migration: true, databases: 16 };
/// assert!(server.validate().is_ok());
/// assert_eq!(Capabilities::default().databases, 1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Capabilities {
    /// The host replicates a primary's data set (PSYNC or its own protocol), acts on
    /// [`crate::Output::ReplicateFrom`] / [`crate::Output::BecamePrimary`] and reports its
    /// offset with [`crate::ClusterNode::handle_replication`]. Without it `CLUSTER
    /// REPLICATE` is refused ([`crate::MSG_NO_REPLICATION`]). (Myself can still be made a
    /// replica by the cluster — another node taking myself's last slot — as in Valkey; such a
    /// host then serves no data until CLUSTER RESET.)
    pub replication: bool,
    /// The host runs the atomic slot migration data plane (Valkey 9 `CLUSTER
    /// MIGRATESLOTS`): it acts on [`crate::Output::Migration`] requests (data connections,
    /// snapshot, stream, hidden slots) and reports back with
    /// [`crate::ClusterNode::handle_migration`]. Without it `CLUSTER MIGRATESLOTS` and
    /// `CLUSTER SYNCSLOTS` are refused at once ([`crate::MSG_NO_SLOT_MIGRATION`]) instead of
    /// starting a job that would time out after `repl-timeout`.
    pub slot_migration: bool,
    /// `cluster-databases` (Valkey 9): the number of databases, at least 1. SELECT accepts
    /// `0..databases` ([`crate::ClusterNode::dispatch_client_command`]); SETSLOT and the
    /// slot-emptiness checks count keys in every database.
    pub databases: usize,
}

impl Default for Capabilities {
    fn default() -> Self {
        Capabilities {
            replication: false,
            slot_migration: false,
            databases: 1,
        }
    }
}

impl Capabilities {
    /// Checks the declaration.
    ///
    /// # Errors
    /// [`ConfigError::NoDatabases`] for `databases == 0`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.databases == 0 {
            return Err(ConfigError::NoDatabases);
        }
        Ok(())
    }
}

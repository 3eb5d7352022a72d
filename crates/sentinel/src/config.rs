//! Resolver configuration.

use crate::Addr;

/// Which instances of the service the resolver looks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Want {
    /// The primary: `SENTINEL get-master-addr-by-name`, then `ROLE` must say `master`.
    Primary,
    /// The replicas: `SENTINEL replicas`, then `ROLE` of each must say `slave`
    /// (Sentinel client spec, "Connect to replicas").
    Replicas,
}

/// Configuration of a [`Resolver`](crate::Resolver). Build it with [`Config::new`] and
/// adjust the public fields; [`Config::validate`] (also run by `Resolver::new`) checks it.
///
/// All durations are milliseconds of the host's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The service (master) name Sentinel monitors, e.g. `mymaster`. Must not be empty.
    pub service_name: String,
    /// Primary or replicas.
    pub want: Want,
    /// Sentinels to ask, in order (step 1). Must not be empty; duplicates are removed.
    pub sentinels: Vec<Addr>,
    /// Budget for one Sentinel: connect plus answer (step 1). Default 300 ms ("a few hundred
    /// milliseconds", Sentinel client spec step 1). Must be > 0.
    pub sentinel_timeout_ms: u64,
    /// Budget for the role check of the reported address: connect plus `ROLE` (plus the
    /// `INFO replication` fallback) answer (step 3). Default 300 ms. Must be > 0.
    pub node_timeout_ms: u64,
    /// Wait before starting again at step 1 when the role check failed (step 3: "wait a
    /// short amount of time, a few hundreds of milliseconds"). Default 250 ms.
    pub retry_delay_ms: u64,
    /// Budget for one resolution including its role-check retries; when it runs out the
    /// resolver reports [`ResolveError::NotConfirmed`](crate::ResolveError::NotConfirmed).
    /// Default 10 000 ms. Must be > 0.
    pub resolve_timeout_ms: u64,
    /// When set, start a new resolution this long after each result (resolved or error),
    /// so the resolver keeps following the service. Default `None` (one-shot).
    pub recheck_interval_ms: Option<u64>,
    /// Ask the answering Sentinel `SENTINEL sentinels <name>` and append Sentinels not yet
    /// known at the end of the list (in memory only). Default `false`.
    pub refresh_sentinels: bool,
    /// Keep a subscription to `+switch-master` on one Sentinel; a message for this service
    /// starts a new resolution at step 1 (it never replaces the steps). Default `false`.
    pub follow_switch_master: bool,
    /// Wait before re-subscribing after the subscription connection failed or closed
    /// (the next Sentinel of the list is tried). Default 1000 ms.
    pub resubscribe_delay_ms: u64,
}

/// Why a [`Config`] is unusable. Nothing is constructed when this is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `sentinels` is empty.
    #[error("no Sentinel address given")]
    NoSentinels,
    /// `service_name` is empty or contains whitespace (Sentinel names are single tokens).
    #[error("invalid service name {0:?}")]
    BadServiceName(String),
    /// A timeout that must be positive is zero.
    #[error("{0} must be greater than zero")]
    ZeroTimeout(&'static str),
}

impl Config {
    /// A configuration with the defaults documented on each field.
    pub fn new(service_name: impl Into<String>, want: Want, sentinels: Vec<Addr>) -> Config {
        Config {
            service_name: service_name.into(),
            want,
            sentinels,
            sentinel_timeout_ms: 300,
            node_timeout_ms: 300,
            retry_delay_ms: 250,
            resolve_timeout_ms: 10_000,
            recheck_interval_ms: None,
            refresh_sentinels: false,
            follow_switch_master: false,
            resubscribe_delay_ms: 1000,
        }
    }

    /// Checks the rules stated on the fields.
    ///
    /// ```
    /// use ferrocluster_sentinel::{Addr, Config, ConfigError, Want};
    /// let mut c = Config::new("mymaster", Want::Primary, vec![Addr::new("127.0.0.1", 26379)]);
    /// assert_eq!(c.validate(), Ok(()));
    /// c.sentinel_timeout_ms = 0;
    /// assert_eq!(c.validate(), Err(ConfigError::ZeroTimeout("sentinel_timeout_ms")));
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.sentinels.is_empty() {
            return Err(ConfigError::NoSentinels);
        }
        if self.service_name.is_empty() || self.service_name.chars().any(char::is_whitespace) {
            return Err(ConfigError::BadServiceName(self.service_name.clone()));
        }
        for (name, v) in [
            ("sentinel_timeout_ms", self.sentinel_timeout_ms),
            ("node_timeout_ms", self.node_timeout_ms),
            ("resolve_timeout_ms", self.resolve_timeout_ms),
        ] {
            if v == 0 {
                return Err(ConfigError::ZeroTimeout(name));
            }
        }
        if self.recheck_interval_ms == Some(0) {
            return Err(ConfigError::ZeroTimeout("recheck_interval_ms"));
        }
        Ok(())
    }
}

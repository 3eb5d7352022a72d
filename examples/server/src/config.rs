//! Server configuration: redis-server-style flags (`--port 7000`), a config file in the same
//! `name value` syntax (`ferrocluster-server [configfile] [--name value ...]`; flags are
//! applied after the file), and the same options through `CONFIG GET` / `CONFIG SET`.
//!
//! One table, [`OPTIONS`], says for every option its name (and alias), how a value is read and
//! shown (Valkey's formats: `yes`/`no`, decimal integers, memory values with `k`/`kb`/`m`/`mb`
//! /`g`/`gb` shown back in bytes, enum names in lower case, empty text for an unset string) and
//! whether it can change at run time. Flags, the config file, CONFIG GET and CONFIG SET all go
//! through it; error texts are Valkey 9.1's (`argument must be 'yes' or 'no'`, `argument must
//! be between 0 and 65535 inclusive`, ...), checked against the real valkey-server 9.1.2.
//!
//! Defaults follow Valkey, except `bind 127.0.0.1` and `cluster-enabled yes` (this is a cluster
//! node). The `cluster-*` options are every one valkey-server 9.1.2 has (`CONFIG GET cluster-*`,
//! plus the hidden `cluster-ping-interval`). Their values live in the engine's
//! [`ClusterConfig`] ([`Config::cluster`]), which the node takes at start and, for the options
//! Valkey changes at run time, again on CONFIG SET (`ClusterNode::set_config`). How each one is
//! taken into account:
//!
//! | option | here |
//! |---|---|
//! | `cluster-enabled`, `cluster-config-file`, `cluster-port`, `cluster-databases` | start-up only, as in Valkey |
//! | `cluster-node-timeout`, `cluster-ping-interval` (hidden), `cluster-blacklist-ttl`, `cluster-require-full-coverage`, `cluster-replica-validity-factor` (alias `cluster-slave-validity-factor`), `cluster-migration-barrier`, `cluster-allow-replica-migration`, `cluster-replica-no-failover` (alias `cluster-slave-no-failover`), `cluster-allow-reads-when-down`, `cluster-allow-pubsubshard-when-down`, `cluster-preferred-endpoint-type`, `cluster-manual-failover-timeout`, `cluster-slot-migration-log-max-len` | the engine's, at run time too |
//! | `cluster-announce-ip`, `-port`, `-tls-port`, `-bus-port`, `-hostname`, `-human-nodename`, `-client-ipv4`, `-client-ipv6` | announced by the engine, at run time too (`cluster-announce-ip` must be an IP address: the engine announces an address, where Valkey takes any text) |
//! | `cluster-config-save-behavior` | `sync`: a failed nodes.conf save exits; `best-effort`: it is logged and the node goes on (`ferrocluster_host::NodesConfFile`) |
//! | `cluster-announce-client-port`, `cluster-announce-client-tls-port` | not implemented by the engine: only `0` (not set, no effect) is accepted |
//! | `cluster-link-sendbuf-limit` | enforced by the bus driver (`ferrocluster_host::BusDriver`), at run time too: a link whose unsent bytes pass it is freed and counted |
//! | `cluster-slot-stats-enabled` | no per-slot CPU and network accounting: only `no` (the default) is accepted |
//!
//! TLS (`ferrocluster_host::tls`, rustls; Valkey 9.1's names and defaults):
//!
//! | option | here |
//! |---|---|
//! | `tls-port` | a TLS client port beside `port` (`port 0`: no plain port), start-up only (Valkey also at run time) |
//! | `tls-cert-file`, `tls-key-file`, `tls-client-cert-file`, `tls-client-key-file`, `tls-ca-cert-file`, `tls-ca-cert-dir` | PEM files, loaded at start when any TLS port or link is on; CONFIG SET reloads them for new connections (a set that does not load is refused, the files in force stay) |
//! | `tls-auth-clients` | `yes` (required), `optional`, `no`, at run time too |
//! | `tls-protocols`, `tls-ciphersuites`, `tls-ciphers` | rustls' TLSv1.2 / TLSv1.3 and its suites by OpenSSL name; an unknown name is refused naming it |
//! | `tls-session-caching`, `tls-session-cache-size`, `tls-session-cache-timeout` | rustls' session cache by size (the timeout is kept but sessions expire by size only) |
//! | `tls-cluster` | the bus is mutual TLS, its port `tls-port` + 10000; start-up only |
//! | `tls-replication` | a replica's link to its primary goes to the primary's TLS port over TLS; applies to links made after a change |
//!
//! Atomic slot migration links follow `tls-replication` (Valkey `connTypeOfReplication`, the
//! target's TLS port); MIGRATE links stay plain TCP (not yet TLS).
//!
//! Every directive of Debian's Redis 7.0 `/etc/redis/redis.conf` is known (issue 19;
//! `tests/redis_config.rs` starts ours with that whole file). `protected-mode`, `daemonize`,
//! `disable-thp`, `stop-writes-on-bgsave-error`, `dynamic-hz` and `client-output-buffer-limit`
//! (its three classes) do what they do in Valkey; a directive whose subject this server handles
//! one way only (`rdbchecksum`, `lazyfree-*`, `tcp-backlog`, ...) takes only that value, and
//! one whose subject this server does not have (streams, HyperLogLog, jemalloc, Sentinel's
//! `replica-priority`) is read, checked and shown ([`Inert`]); each entry says why.
//!
//! `cluster-node-timeout 0`, which Valkey takes, is refused (the engine needs a positive
//! timeout); a negative `cluster-blacklist-ttl`, which Valkey wraps around, is refused.

use ferrocluster_node::{ClusterConfig, PreferredEndpoint};
use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;

/// Log level names accepted by `loglevel` (redis-server's four).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    /// `debug`
    Debug,
    /// `verbose` (maps to tracing DEBUG for our crates, INFO elsewhere)
    Verbose,
    /// `notice` (tracing INFO)
    Notice,
    /// `warning` (tracing WARN)
    Warning,
}

impl LogLevel {
    /// The `tracing-subscriber` filter text for this level.
    pub fn filter(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Verbose => "info,ferrocluster=debug",
            LogLevel::Notice => "info",
            LogLevel::Warning => "warn",
        }
    }

    fn name(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Verbose => "verbose",
            LogLevel::Notice => "notice",
            LogLevel::Warning => "warning",
        }
    }
}

pub use ferrocluster_host::listen::{parse_bind, BindAddr};
pub use ferrocluster_host::SaveBehavior;

fn show_bind(list: &[BindAddr]) -> String {
    list.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every option the server understands. Field docs give the config name and default.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `port`: data (RESP) port. Default 6379 (kept equal to `cluster.port`).
    pub port: u16,
    /// `bind`: addresses to listen on, the data port and the bus port alike. Default
    /// `127.0.0.1`.
    pub bind: Vec<BindAddr>,
    /// `cluster-enabled`: run as a cluster node. Default yes.
    pub cluster_enabled: bool,
    /// `cluster-config-file`: nodes.conf name, relative to `dir`. Default `nodes.conf`.
    pub cluster_config_file: String,
    /// `dir`: working directory for nodes.conf. Default `.`.
    pub dir: PathBuf,
    /// The config file the server started with, as an absolute path (`None`: started with
    /// flags only). Not an option: INFO's `config_file` and CONFIG REWRITE's target.
    pub config_file: Option<PathBuf>,
    /// Every `cluster-*` option the engine uses (Valkey's defaults), `cluster-port` and the
    /// client port included; the table in the module docs says which option goes where.
    pub cluster: ClusterConfig,
    /// `cluster-databases` (Valkey 9): number of databases in cluster mode. Default 1.
    pub cluster_databases: u32,
    /// `cluster-config-save-behavior` (Valkey 9.1). Default `sync`.
    pub cluster_config_save_behavior: SaveBehavior,
    /// `requirepass`: the default user's password (`None`: `nopass`).
    pub requirepass: Option<String>,
    /// `user <name> <rules...>` lines, in order (`crate::acl`).
    pub users: Vec<Vec<String>>,
    /// `aclfile`: where ACL SAVE / LOAD keep the users (relative to `dir`).
    pub aclfile: Option<String>,
    /// `acllog-max-len`: ACL LOG entries kept (default 128).
    pub acllog_max_len: usize,
    /// `tracking-table-max-keys`: keys the client-side caching table holds at most (default
    /// 1000000; 0: no limit). Mutable.
    pub tracking_table_max_keys: u64,
    /// `rdb-key-save-delay` (hidden), µs per key of a save from a copy of the keyspace
    /// (`crate::snapshot::KEY_SAVE_DELAY_US`; default 0). Mutable.
    pub rdb_key_save_delay_us: i64,
    /// `notify-keyspace-events`: the keyspace notification classes on, as
    /// `crate::notify`'s flags. Default none (`""`).
    pub notify_keyspace_events: u32,
    /// `loglevel`: debug, verbose, notice, warning. Default notice.
    pub loglevel: LogLevel,
    /// `logfile`: log to this file instead of stderr (empty = stderr).
    pub logfile: Option<PathBuf>,
    /// `io-threads`: number of I/O threads (default: half the cores, at least 1, at most 4).
    ///
    /// Commands run under one state lock, so extra threads only spread the socket system calls;
    /// on 2 cores with a client on the same machine one thread used about 30% (pipelined) to
    /// 40% (one request per round trip) less CPU per request than two, which fought over the
    /// lock and the cores (server CPU time per request under redis-benchmark, as
    /// `benches/server-compare.sh` reports it; `FERROCLUSTER_ARGS="--io-threads N"`).
    pub io_threads: usize,
    /// `io-busy-polls` (ferrocluster's own option): after a loop turn that had events, an I/O
    /// thread polls this many more times without blocking (yielding the core between polls)
    /// before it sleeps in `epoll_wait` again. Default 50; 0 disables. A thread asleep when a
    /// request arrives must be woken, and that wakeup is paid by the sender's system call: on
    /// 2 cores under redis-benchmark (client pinned to one core, servers to the other), the
    /// client, which is the bottleneck there, ran 5-15% more requests per second against a
    /// server that spins (`benches/server-compare.sh`, medians of 3 rounds), at the price of
    /// server CPU time while busy (about 10% more per request without pipelining). An idle
    /// server does not spin.
    pub io_busy_polls: u32,
    /// `proto-max-bulk-len`: largest bulk string a request may carry, bytes. Default 512 MiB.
    pub proto_max_bulk_len: usize,
    /// `client-query-buffer-limit`: largest unparsed request buffer, bytes. Default 1 GiB.
    pub client_query_buffer_limit: usize,
    /// `timeout`: seconds after which an idle client is closed (0, the default: never;
    /// replicas, subscribers and blocked clients are never closed, as Redis's
    /// `clientsCronHandleTimeout`).
    pub timeout_s: u64,
    /// `tcp-keepalive`: SO_KEEPALIVE idle time of client sockets, seconds (0: off). Default 300.
    pub tcp_keepalive_s: u32,
    /// `pidfile`: a file the server writes its pid to at start and removes at shutdown.
    pub pidfile: Option<PathBuf>,
    /// `hz`: active expiry cycles per second. Default 10 (clamped to 1..=500 as Valkey does).
    pub hz: u32,
    /// `maxclients`: most client connections (in cluster mode the bus connections count too,
    /// see `net::ClientGate`). Default 10000, at least 1; reduced at start to what the open
    /// files limit allows (`main::adjust_open_files_limit`).
    pub maxclients: u32,
    /// `slowlog-log-slower-than`: commands that take at least this many µs enter the slow
    /// log; negative: none; 0: every command. Default 10000.
    pub slowlog_log_slower_than: i64,
    /// `slowlog-max-len`: slow log entries kept. Default 128.
    pub slowlog_max_len: u64,
    /// `metrics-port` (ours, not Redis's): the Prometheus endpoint's port (`GET /metrics` on
    /// the `bind` addresses); 0, the default, serves none.
    pub metrics_port: u16,
    /// `latency-monitor-threshold`: events of at least this many ms enter the latency
    /// monitor; 0 (the default) turns it off.
    pub latency_monitor_threshold: u64,
    /// `save`: the RDB save points (Redis 7.0's default `3600 1 300 100 60 10000`; `""`:
    /// none).
    pub save: Vec<crate::persist::SavePoint>,
    /// Loading state, not an option: a `save` line or flag has been read. The first one
    /// replaces the default points, later ones add theirs (`save 900 1` then `save 300 10`
    /// is both; `save ""` clears), as Redis 7.0's `setConfigSaveOption` does while reading
    /// the config.
    pub save_loaded: bool,
    /// `maxmemory`, `maxmemory-policy`, `maxmemory-samples`, `lfu-log-factor`,
    /// `lfu-decay-time` (`crate::evict`).
    pub maxmemory: crate::evict::MaxMemory,
    /// `dbfilename`: the RDB file in `dir`. Default `dump.rdb`.
    pub dbfilename: String,
    /// The AOF directives (`appendonly`, `appendfilename`, `appenddirname`, `appendfsync`,
    /// `aof-use-rdb-preamble`, `aof-load-truncated`, `auto-aof-rewrite-*`; `crate::aof`).
    pub aof: crate::aof::AofOptions,
    /// The collections' encoding thresholds (`hash-max-listpack-entries`, ...; see
    /// `crate::types::Limits`); CONFIG SET changes the ones in force.
    pub limits: crate::types::Limits,
    /// The replication options (`repl-*`, `primaryauth` / `primaryuser`, `min-replicas-*`):
    /// the engine takes them when the server starts ([`Config::replication`]); those marked
    /// mutable change at run time (CONFIG SET).
    pub repl: ReplOptions,
    /// `protected-mode`: while on and the default user is on without a password (`nopass`),
    /// a client whose peer address is not loopback gets `-DENIED ...` and is closed (Valkey
    /// `clientAcceptHandler`; `bind` does not matter, as in Redis 7.0 and Valkey 9.1, checked
    /// against both). Default yes; CONFIG SET changes it.
    pub protected_mode: bool,
    /// The `tls-*` file, protocol, suite and session directives (Valkey 9.1's names and
    /// defaults; `ferrocluster_host::tls`). The files are read at start when any TLS port or
    /// link is on, and again on CONFIG SET of any of them (new connections use the new
    /// files; a set that does not load is refused and the old files stay).
    pub tls: ferrocluster_host::tls::TlsSettings,
    /// `tls-cluster`: the cluster bus speaks TLS only, with mutual authentication against
    /// `tls-ca-cert-file` / `-dir`. Default no. Start-up only here (Valkey changes it at run
    /// time too).
    pub tls_cluster: bool,
    /// `tls-replication`: a replica's link to its primary (and the primary's side of it) use
    /// TLS. Default no. Applies to links made after a change.
    pub tls_replication: bool,
    /// `daemonize`: detach at start (`main::daemonize`) and, without `pidfile`, write the
    /// pid to `/var/run/valkey.pid` (Valkey's `CONFIG_DEFAULT_PID_FILE`). Default no.
    pub daemonize: bool,
    /// `disable-thp`: turn transparent huge pages off for the process at start
    /// (`prctl(PR_SET_THP_DISABLE)`, as Valkey's `linuxMadvFreeForkBugCheck` neighbour
    /// `disableTHP` does). Default yes.
    pub disable_thp: bool,
    /// `stop-writes-on-bgsave-error`: while save points are set and the last background save
    /// failed, writes (and PING) are refused with `-MISCONF` (Valkey
    /// `writeCommandsDeniedByDiskError`). Default yes.
    pub stop_writes_on_bgsave_error: bool,
    /// `dynamic-hz`: the active expiry cycle runs faster with many clients (Valkey
    /// `serverCron`: `hz` doubles while clients / hz > 200, at most 500). Default yes.
    pub dynamic_hz: bool,
    /// `client-output-buffer-limit`: per class (normal, replica, pubsub) hard limit, soft
    /// limit (bytes) and soft seconds; 0 means no limit. See [`OutputLimits`].
    pub output_limits: OutputLimits,
    /// Directives Redis 7.0's redis.conf carries that shape things this server does not
    /// have; read, checked and shown as Redis does ([`Inert`]).
    pub inert: Inert,
}

/// One `client-output-buffer-limit` class (Valkey's `clientBufferLimitsConfig`): a client
/// whose unsent output passes `hard` bytes, or stays above `soft` bytes for `soft_secs`
/// seconds, is closed. 0: that limit is off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassLimit {
    /// Hard limit, bytes.
    pub hard: u64,
    /// Soft limit, bytes.
    pub soft: u64,
    /// Seconds the soft limit may be passed.
    pub soft_secs: u64,
}

impl ClassLimit {
    /// The replication engine's form of this class (hard and soft in bytes, the soft time in
    /// ms), for the `replica` class.
    pub fn engine_limit(&self) -> ferrocluster_dataplane::OutputBufferLimit {
        ferrocluster_dataplane::OutputBufferLimit {
            hard_bytes: self.hard,
            soft_bytes: self.soft,
            soft_ms: self.soft_secs.saturating_mul(1000),
        }
    }
}

/// `client-output-buffer-limit` for the three classes, Valkey's defaults
/// (`normal 0 0 0 replica 256mb 64mb 60 pubsub 32mb 8mb 60`). The pubsub and normal classes are
/// enforced by `crate::net` on each message delivered and after each command a client runs (a
/// subscriber is `pubsub`, any other client `normal`: Valkey `getClientType`); the replica
/// class by the replication engine (`Replication::handle_replica_pending`) on the stream it
/// keeps for a replica while its copy is made and on the stream bytes the I/O thread has not
/// sent (reported every 10 ms), never on the full copy itself, as Valkey counts a replica's
/// replication buffer and not its RDB transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimits {
    /// `normal`
    pub normal: ClassLimit,
    /// `replica` (alias `slave`)
    pub replica: ClassLimit,
    /// `pubsub`
    pub pubsub: ClassLimit,
}

impl Default for OutputLimits {
    fn default() -> Self {
        let mb = 1024 * 1024;
        OutputLimits {
            normal: ClassLimit {
                hard: 0,
                soft: 0,
                soft_secs: 0,
            },
            replica: ClassLimit {
                hard: 256 * mb,
                soft: 64 * mb,
                soft_secs: 60,
            },
            pubsub: ClassLimit {
                hard: 32 * mb,
                soft: 8 * mb,
                soft_secs: 60,
            },
        }
    }
}

fn show_output_limits(l: &OutputLimits) -> String {
    // Valkey 9.1 still shows the replica class as `slave`.
    [
        ("normal", l.normal),
        ("slave", l.replica),
        ("pubsub", l.pubsub),
    ]
    .iter()
    .map(|(n, c)| format!("{n} {} {} {}", c.hard, c.soft, c.soft_secs))
    .collect::<Vec<_>>()
    .join(" ")
}

/// Valkey `setConfigClientOutputBufferLimitOption`: groups of `class hard soft seconds`.
fn parse_output_limits(into: &mut OutputLimits, v: &str) -> Result<(), String> {
    let words: Vec<&str> = v.split(' ').filter(|w| !w.is_empty()).collect();
    if words.is_empty() || !words.len().is_multiple_of(4) {
        return Err("Wrong number of arguments in buffer limit configuration.".into());
    }
    let mut next = *into;
    for g in words.chunks(4) {
        let class = match g[0].to_ascii_lowercase().as_str() {
            "normal" => &mut next.normal,
            "replica" | "slave" => &mut next.replica,
            "pubsub" => &mut next.pubsub,
            _ => {
                return Err("Invalid client class specified in buffer limit configuration.".into())
            }
        };
        let bad = || {
            "Error in hard, soft or soft_seconds setting in buffer limit configuration.".to_string()
        };
        let hard = parse_memory(g[1]).map_err(|_| bad())? as u64;
        let soft = parse_memory(g[2]).map_err(|_| bad())? as u64;
        let soft_secs: u64 = g[3].parse().map_err(|_| bad())?;
        *class = ClassLimit {
            hard,
            soft,
            soft_secs,
        };
    }
    *into = next;
    Ok(())
}

/// Directives of Redis 7.0's redis.conf whose subject this server does not have, so that
/// every value Redis takes is honoured here by doing nothing; each field says why. They are
/// checked with Redis's ranges and shown by CONFIG GET as set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inert {
    /// `replica-priority` (alias `slave-priority`, default 100): read by Sentinel only;
    /// cluster failover ranks replicas by replication offset (Valkey `clusterGetReplicaRank`).
    pub replica_priority: u32,
    /// `oom-score-adj-values` (default `0 200 800`): used only with `oom-score-adj` on,
    /// which only `no` is accepted for.
    pub oom_score_adj_values: [i32; 3],
    /// `hll-sparse-max-bytes` (default 3000): the HyperLogLog sparse encoding limit; no
    /// HyperLogLog commands here.
    pub hll_sparse_max_bytes: u64,
    /// `stream-node-max-bytes` (default 4096): stream radix node size; no streams here.
    pub stream_node_max_bytes: u64,
    /// `stream-node-max-entries` (default 100): likewise.
    pub stream_node_max_entries: u64,
    /// `activerehashing` (default yes): Redis spends cron time finishing an incremental
    /// rehash of the main dictionary; our tables grow in one step and are never left half
    /// rehashed, so there is nothing to finish either way.
    pub activerehashing: bool,
    /// `jemalloc-bg-thread` (default yes): jemalloc's purging thread; this server does not use
    /// jemalloc, and Redis built without jemalloc takes the option and ignores it too
    /// (`set_jemalloc_bg_thread` is empty there).
    pub jemalloc_bg_thread: bool,
    /// `set-proc-title` (default yes): Redis rewrites its argv title "when possible"
    /// (`redisSetProcTitle` is empty where `USE_SETPROCTITLE` is not defined); this server
    /// forbids the unsafe code that rewriting argv takes, so it is the "not possible" case.
    pub set_proc_title: bool,
    /// `proc-title-template` (default `{title} {listen-addr} {server-mode}`): see
    /// `set_proc_title`; checked as Valkey does (`{title}` present, only known variables).
    pub proc_title_template: String,
    /// `repl-diskless-load` as given: `disabled` (default) or `swapdb`, which this server's
    /// replica treats alike (see the option table).
    pub repl_diskless_load: &'static str,
}

impl Default for Inert {
    fn default() -> Self {
        Inert {
            replica_priority: 100,
            oom_score_adj_values: [0, 200, 800],
            hll_sparse_max_bytes: 3000,
            stream_node_max_bytes: 4096,
            stream_node_max_entries: 100,
            activerehashing: true,
            jemalloc_bg_thread: true,
            set_proc_title: true,
            proc_title_template: "{title} {listen-addr} {server-mode}".into(),
            repl_diskless_load: "disabled",
        }
    }
}

/// The replication directives, Valkey 9's names, units and defaults, except
/// `repl-diskless-sync`, which is `no` here: our snapshot is an in-memory RDB of known length
/// made at once (`crate::repl`), sent with the `$<len>` framing, so waiting
/// `repl-diskless-sync-delay` for more replicas to share it gains nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplOptions {
    /// `repl-backlog-size`, bytes (default 10 MiB).
    pub backlog_size: u64,
    /// `repl-backlog-ttl`, seconds (default 3600; 0: never freed).
    pub backlog_ttl_s: u64,
    /// `repl-timeout`, seconds (default 60).
    pub timeout_s: u64,
    /// `repl-ping-replica-period` (alias `repl-ping-slave-period`), seconds (default 10).
    pub ping_period_s: u64,
    /// `repl-diskless-sync` (default no here, see above).
    pub diskless_sync: bool,
    /// `repl-diskless-sync-delay`, seconds (default 5).
    pub diskless_sync_delay_s: u64,
    /// `primaryauth` (alias `masterauth`): the password our replica sends its primary.
    pub primary_auth: Option<String>,
    /// `primaryuser` (alias `masteruser`): the user our replica authenticates as.
    pub primary_user: Option<String>,
    /// `min-replicas-to-write` (alias `min-slaves-to-write`): a primary refuses writes with
    /// `-NOREPLICAS` unless this many replicas are good (0: off, the default). Mutable.
    pub min_replicas_to_write: u64,
    /// `min-replicas-max-lag` (alias `min-slaves-max-lag`), seconds: a good replica is online
    /// and acknowledged within this lag (default 10; 0: the check is off). Mutable.
    pub min_replicas_max_lag_s: u64,
}

impl Default for ReplOptions {
    fn default() -> Self {
        ReplOptions {
            backlog_size: 10 * 1024 * 1024,
            backlog_ttl_s: 3600,
            timeout_s: 60,
            ping_period_s: 10,
            diskless_sync: false,
            diskless_sync_delay_s: 5,
            primary_auth: None,
            primary_user: None,
            min_replicas_to_write: 0,
            min_replicas_max_lag_s: 10,
        }
    }
}

impl Config {
    /// The user and password our replica authenticates to its primary with: `primaryuser` /
    /// `primaryauth`, else `requirepass` as the default user's (the shard's nodes share it);
    /// no user without a password.
    pub fn primary_credentials(&self) -> (Option<String>, Option<Vec<u8>>) {
        let r = &self.repl;
        let auth = r.primary_auth.clone().or_else(|| self.requirepass.clone());
        (
            r.primary_user.clone().filter(|_| auth.is_some()),
            auth.map(String::into_bytes),
        )
    }

    /// The replication engine's configuration for a keyspace of `databases` databases.
    /// Without `primaryauth`, our replica authenticates with `requirepass` (the shard's
    /// nodes share it).
    pub fn replication(&self, databases: u32) -> ferrocluster_dataplane::ReplicationConfig {
        let r = &self.repl;
        let (primary_user, primary_auth) = self.primary_credentials();
        ferrocluster_dataplane::ReplicationConfig {
            backlog_size: r.backlog_size,
            backlog_ttl_ms: r.backlog_ttl_s.saturating_mul(1000),
            ping_period_ms: r.ping_period_s.saturating_mul(1000),
            timeout_ms: r.timeout_s.saturating_mul(1000),
            diskless_sync: r.diskless_sync,
            diskless_sync_delay_ms: r.diskless_sync_delay_s.saturating_mul(1000),
            databases,
            listening_port: self.port,
            primary_user,
            primary_auth,
            replica_version: Some(crate::repl::REPLICA_VERSION.to_owned()),
            output_buffer_limit: self.output_limits.replica.engine_limit(),
            ..ferrocluster_dataplane::ReplicationConfig::default()
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        Config {
            port: 6379,
            bind: vec![BindAddr {
                addr: "127.0.0.1".into(),
                optional: false,
            }],
            cluster_enabled: true,
            cluster_config_file: "nodes.conf".into(),
            dir: PathBuf::from("."),
            config_file: None,
            cluster: ClusterConfig::default(),
            cluster_databases: 1,
            cluster_config_save_behavior: SaveBehavior::Sync,
            requirepass: None,
            users: Vec::new(),
            aclfile: None,
            acllog_max_len: ferrocluster_acl::DEFAULT_LOG_MAX_LEN,
            tracking_table_max_keys: crate::tracking::DEFAULT_MAX_KEYS,
            rdb_key_save_delay_us: 0,
            notify_keyspace_events: 0,
            loglevel: LogLevel::Notice,
            logfile: None,
            io_threads: (cores / 2).clamp(1, 4),
            io_busy_polls: 50,
            proto_max_bulk_len: 512 * 1024 * 1024,
            client_query_buffer_limit: 1024 * 1024 * 1024,
            hz: 10,
            maxclients: 10000,
            slowlog_log_slower_than: 10_000,
            slowlog_max_len: 128,
            metrics_port: 0,
            timeout_s: 0,
            tcp_keepalive_s: 300,
            pidfile: None,
            latency_monitor_threshold: 0,
            save: crate::persist::default_save_points(),
            save_loaded: false,
            maxmemory: crate::evict::MaxMemory::default(),
            dbfilename: "dump.rdb".into(),
            aof: crate::aof::AofOptions::default(),
            limits: crate::types::Limits::default(),
            repl: ReplOptions::default(),
            protected_mode: true,
            tls: ferrocluster_host::tls::TlsSettings::default(),
            tls_cluster: false,
            tls_replication: false,
            daemonize: false,
            disable_thp: true,
            stop_writes_on_bgsave_error: true,
            dynamic_hz: true,
            output_limits: OutputLimits::default(),
            inert: Inert::default(),
        }
    }
}

/// A configuration error: where it happened and why (printed before exiting non-zero).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// Where: `line N of FILE` or `argument --name`.
    pub at: String,
    /// The offending text as written.
    pub text: String,
    /// Why it was refused.
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bad configuration at {}: '{}': {}",
            self.at, self.text, self.reason
        )
    }
}

// ----- values: Valkey's readers and error texts (config.c) -----

fn parse_bool(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err("argument must be 'yes' or 'no'".into()),
    }
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

/// A decimal integer in `min..=max` (Valkey's numeric configs).
fn parse_int(v: &str, min: i128, max: i128) -> Result<i128, String> {
    let n: i128 = v
        .parse()
        .ok()
        .filter(|_| !v.starts_with('+'))
        .ok_or_else(|| "argument couldn't be parsed into an integer".to_string())?;
    if n < min || n > max {
        return Err(format!(
            "argument must be between {min} and {max} inclusive"
        ));
    }
    Ok(n)
}

/// A value of `T` in `min..=max`.
fn int<T: TryFrom<i128>>(v: &str, min: i128, max: i128) -> Result<T, String> {
    let n = parse_int(v, min, max)?;
    // In range by the check above, and every range here fits its field's type.
    T::try_from(n).map_err(|_| format!("argument must be between {min} and {max} inclusive"))
}

/// Valkey's `memtoull`: digits with an optional unit (`b`, `k` = 1000, `kb` = 1024, `m`, `mb`,
/// `g`, `gb`, any case).
pub fn parse_memory(v: &str) -> Result<usize, String> {
    let err = || "argument must be a memory value".to_string();
    let lower = v.to_ascii_lowercase();
    let units: [(&str, u64); 7] = [
        ("gb", 1 << 30),
        ("mb", 1 << 20),
        ("kb", 1 << 10),
        ("g", 1_000_000_000),
        ("m", 1_000_000),
        ("k", 1000),
        ("b", 1),
    ];
    let (digits, mul) = units
        .iter()
        .find_map(|(u, m)| lower.strip_suffix(u).map(|d| (d, *m)))
        .unwrap_or((lower.as_str(), 1));
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(err());
    }
    let n: u64 = digits.parse().map_err(|_| err())?;
    n.checked_mul(mul)
        .and_then(|b| usize::try_from(b).ok())
        .ok_or_else(err)
}

fn port(v: &str) -> Result<u16, String> {
    int(v, 0, 65535)
}

/// A path option's value: empty = not set.
fn path_or_none(v: &str) -> Option<PathBuf> {
    (!v.is_empty()).then(|| PathBuf::from(v))
}

/// A path option as CONFIG GET shows it (empty when not set).
fn opt_path(v: &Option<PathBuf>) -> String {
    v.as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

fn non_empty(v: &str) -> Option<String> {
    if v.is_empty() {
        None
    } else {
        Some(v.to_string())
    }
}

fn opt_text<T: ToString>(v: &Option<T>) -> String {
    v.as_ref().map(ToString::to_string).unwrap_or_default()
}

fn endpoint_name(e: PreferredEndpoint) -> &'static str {
    match e {
        PreferredEndpoint::Ip => "ip",
        PreferredEndpoint::Hostname => "hostname",
        PreferredEndpoint::UnknownEndpoint => "unknown-endpoint",
    }
}

/// An option whose value this server cannot honour: only `default` (which changes nothing) is
/// accepted.
fn only_default(v: &str, default: &str, why: &str) -> Result<(), String> {
    if v.eq_ignore_ascii_case(default) {
        Ok(())
    } else if default.is_empty() {
        Err(format!("{why}; only \"\" is accepted"))
    } else {
        Err(format!("{why}; only {default} is accepted"))
    }
}

fn hostname(v: &str) -> Result<Option<String>, String> {
    use ferrocluster_topology::AnnounceError;
    if v.is_empty() {
        return Ok(None);
    }
    match ferrocluster_topology::validate_hostname(v) {
        Ok(()) => Ok(Some(v.to_string())),
        Err(AnnounceError::TooLong { .. }) => {
            Err("Hostnames must be less than 256 characters".into())
        }
        Err(_) => Err("Hostnames may only contain alphanumeric characters, hyphens or dots".into()),
    }
}

fn nodename(v: &str) -> Result<Option<String>, String> {
    use ferrocluster_topology::AnnounceError;
    if v.is_empty() {
        return Ok(None);
    }
    match ferrocluster_topology::validate_nodename(v) {
        Ok(()) => Ok(Some(v.to_string())),
        Err(AnnounceError::Character { .. }) => {
            Err("Announced human node name contained invalid character".into())
        }
        Err(e) => Err(e.to_string()),
    }
}

// ----- the option table -----

/// One option: how flags, the config file, CONFIG GET and CONFIG SET read and show it.
pub struct Opt {
    /// Lower-case name.
    pub name: &'static str,
    /// Another name for it (`cluster-slave-*`), shown by CONFIG GET too.
    pub alias: Option<&'static str>,
    /// Left out of CONFIG GET patterns, shown only for its exact name (Valkey's
    /// `HIDDEN_CONFIG`).
    pub hidden: bool,
    /// CONFIG SET may change it (else `can't set immutable config`).
    pub mutable: bool,
    /// Takes several words in a flag or file line (joined with spaces), as `bind` does.
    pub multi: bool,
    /// A free-text value (a path, a name, a password): CONFIG REWRITE always writes it in
    /// double quotes, as Redis's `rewriteConfigStringOption` (`sdscatrepr`) does.
    pub quoted: bool,
    /// A byte count: CONFIG REWRITE writes it with Redis's `gb`/`mb`/`kb` units where they
    /// divide it (`rewriteConfigFormatMemory`).
    pub memory: bool,
    /// The value as CONFIG GET shows it.
    pub get: fn(&Config) -> String,
    /// Reads a value into the config.
    pub set: fn(&mut Config, &str) -> Result<(), String>,
}

macro_rules! opt {
    ($name:literal, $alias:expr, mutable: $m:expr, get: $get:expr, set: $set:expr) => {
        Opt {
            name: $name,
            alias: $alias,
            hidden: false,
            mutable: $m,
            multi: false,
            quoted: false,
            memory: false,
            get: $get,
            set: $set,
        }
    };
}

/// `opt` with a free-text value ([`Opt::quoted`]).
const fn quoted(opt: Opt) -> Opt {
    Opt {
        quoted: true,
        ..opt
    }
}

/// `opt` with a byte-count value ([`Opt::memory`]).
const fn memory(opt: Opt) -> Opt {
    Opt {
        memory: true,
        ..opt
    }
}

macro_rules! bool_opt {
    ($name:literal, $alias:expr, mutable: $m:expr, $($f:ident).+) => {
        opt!($name, $alias, mutable: $m, get: |c| yes_no(c.$($f).+), set: |c, v| {
            c.$($f).+ = parse_bool(v)?;
            Ok(())
        })
    };
}

macro_rules! int_opt {
    ($name:literal, $alias:expr, mutable: $m:expr, $min:expr, $max:expr, $($f:ident).+) => {
        opt!($name, $alias, mutable: $m, get: |c| c.$($f).+.to_string(), set: |c, v| {
            c.$($f).+ = int(v, $min, $max)?;
            Ok(())
        })
    };
}

const INT_MAX: i128 = i32::MAX as i128;
const LLONG_MAX: i128 = i64::MAX as i128;

/// Every option, in CONFIG GET order.
pub static OPTIONS: &[Opt] = &[
    opt!("port", None, mutable: false, get: |c| c.port.to_string(), set: |c, v| {
        c.port = port(v)?;
        c.cluster.port = c.port;
        Ok(())
    }),
    Opt {
        multi: true,
        ..opt!("bind", None, mutable: false, get: |c| show_bind(&c.bind), set: |c, v| {
            c.bind = parse_bind(&v.split(' ').filter(|w| !w.is_empty()).collect::<Vec<_>>())?;
            Ok(())
        })
    },
    quoted(
        opt!("dir", None, mutable: false, get: |c| c.dir.display().to_string(), set: |c, v| {
            c.dir = PathBuf::from(v);
            Ok(())
        }),
    ),
    bool_opt!("cluster-enabled", None, mutable: false, cluster_enabled),
    quoted(
        opt!("cluster-config-file", None, mutable: false, get: |c| c.cluster_config_file.clone(), set: |c, v| {
            if v.is_empty() {
                return Err("cluster-config-file can't be empty".into());
            }
            c.cluster_config_file = v.to_string();
            Ok(())
        }),
    ),
    int_opt!("cluster-port", None, mutable: false, 0, 65535, cluster.cluster_port),
    opt!("cluster-databases", None, mutable: false, get: |c| c.cluster_databases.to_string(), set: |c, v| {
        // The keyspace holds at most 16 databases (Valkey allows more).
        c.cluster_databases = int(v, 1, 16)?;
        Ok(())
    }),
    opt!("cluster-node-timeout", None, mutable: true, get: |c| c.cluster.node_timeout_ms.to_string(), set: |c, v| {
        let ms: u64 = int(v, 0, LLONG_MAX)?;
        if ms == 0 {
            // Valkey takes 0; the engine needs a positive timeout.
            return Err("cluster-node-timeout must be at least 1 ms in ferrocluster".into());
        }
        c.cluster.node_timeout_ms = ms;
        Ok(())
    }),
    Opt {
        hidden: true,
        ..int_opt!("cluster-ping-interval", None, mutable: true, 0, LLONG_MAX, cluster.ping_interval_ms)
    },
    // Valkey's DEBUG_CONFIG for tests that need a slow save (`unit/introspection`).
    Opt {
        hidden: true,
        ..int_opt!("rdb-key-save-delay", None, mutable: true, -INT_MAX - 1, INT_MAX, rdb_key_save_delay_us)
    },
    quoted(
        opt!("cluster-announce-ip", None, mutable: true, get: |c| opt_text(&c.cluster.announce_ip), set: |c, v| {
            c.cluster.announce_ip = match v {
                "" => None,
                _ => Some(v.parse::<IpAddr>().map_err(|_| {
                    "cluster-announce-ip must be an IP address (ferrocluster announces an address)"
                        .to_string()
                })?),
            };
            Ok(())
        }),
    ),
    quoted(
        opt!("cluster-announce-client-ipv4", None, mutable: true, get: |c| opt_text(&c.cluster.announce_client_ipv4), set: |c, v| {
            c.cluster.announce_client_ipv4 = match v {
                "" => None,
                _ => Some(v.parse().map_err(|_| "Invalid IPv4 address".to_string())?),
            };
            Ok(())
        }),
    ),
    quoted(
        opt!("cluster-announce-client-ipv6", None, mutable: true, get: |c| opt_text(&c.cluster.announce_client_ipv6), set: |c, v| {
            c.cluster.announce_client_ipv6 = match v {
                "" => None,
                _ => Some(v.parse().map_err(|_| "Invalid IPv6 address".to_string())?),
            };
            Ok(())
        }),
    ),
    quoted(
        opt!("cluster-announce-hostname", None, mutable: true, get: |c| opt_text(&c.cluster.announce_hostname), set: |c, v| {
            c.cluster.announce_hostname = hostname(v)?;
            Ok(())
        }),
    ),
    quoted(
        opt!("cluster-announce-human-nodename", None, mutable: true, get: |c| opt_text(&c.cluster.announce_human_nodename), set: |c, v| {
            c.cluster.announce_human_nodename = nodename(v)?;
            Ok(())
        }),
    ),
    int_opt!("cluster-announce-port", None, mutable: true, 0, 65535, cluster.announce_port),
    int_opt!("cluster-announce-tls-port", None, mutable: true, 0, 65535, cluster.announce_tls_port),
    int_opt!("cluster-announce-bus-port", None, mutable: true, 0, 65535, cluster.announce_bus_port),
    opt!("cluster-announce-client-port", None, mutable: true, get: |_| "0".into(), set: |_, v| {
        port(v)?;
        only_default(v, "0", "cluster-announce-client-port is not implemented by ferrocluster")
    }),
    opt!("cluster-announce-client-tls-port", None, mutable: true, get: |_| "0".into(), set: |_, v| {
        port(v)?;
        only_default(v, "0", "cluster-announce-client-tls-port is not implemented by ferrocluster")
    }),
    bool_opt!("cluster-require-full-coverage", None, mutable: true, cluster.require_full_coverage),
    int_opt!("cluster-replica-validity-factor", Some("cluster-slave-validity-factor"), mutable: true, 0, INT_MAX, cluster.replica_validity_factor),
    int_opt!("cluster-migration-barrier", None, mutable: true, 0, INT_MAX, cluster.migration_barrier),
    bool_opt!("cluster-allow-replica-migration", None, mutable: true, cluster.allow_replica_migration),
    bool_opt!("cluster-replica-no-failover", Some("cluster-slave-no-failover"), mutable: true, cluster.replica_no_failover),
    bool_opt!("cluster-allow-reads-when-down", None, mutable: true, cluster.allow_reads_when_down),
    bool_opt!("cluster-allow-pubsubshard-when-down", None, mutable: true, cluster.allow_pubsubshard_when_down),
    opt!("cluster-preferred-endpoint-type", None, mutable: true, get: |c| endpoint_name(c.cluster.preferred_endpoint).into(), set: |c, v| {
        c.cluster.preferred_endpoint = match v.to_ascii_lowercase().as_str() {
            "ip" => PreferredEndpoint::Ip,
            "hostname" => PreferredEndpoint::Hostname,
            "unknown-endpoint" => PreferredEndpoint::UnknownEndpoint,
            _ => {
                return Err(
                    "argument(s) must be one of the following: ip, hostname, unknown-endpoint"
                        .into(),
                )
            }
        };
        Ok(())
    }),
    opt!("cluster-blacklist-ttl", None, mutable: true, get: |c| c.cluster.blacklist_ttl_secs.to_string(), set: |c, v| {
        c.cluster.blacklist_ttl_secs = int(v, 0, u64::MAX as i128)?;
        Ok(())
    }),
    int_opt!("cluster-manual-failover-timeout", None, mutable: true, 1, INT_MAX, cluster.manual_failover_timeout_ms),
    int_opt!("cluster-slot-migration-log-max-len", None, mutable: true, 0, LLONG_MAX, cluster.slot_migration_log_max_len),
    opt!("cluster-config-save-behavior", None, mutable: true, get: |c| match c.cluster_config_save_behavior {
        SaveBehavior::Sync => "sync".into(),
        SaveBehavior::BestEffort => "best-effort".into(),
    }, set: |c, v| {
        c.cluster_config_save_behavior = match v.to_ascii_lowercase().as_str() {
            "sync" => SaveBehavior::Sync,
            "best-effort" => SaveBehavior::BestEffort,
            _ => return Err("argument(s) must be one of the following: sync, best-effort".into()),
        };
        Ok(())
    }),
    memory(
        opt!("cluster-link-sendbuf-limit", None, mutable: true, get: |c| c.cluster.link_sendbuf_limit_bytes.to_string(), set: |c, v| {
            c.cluster.link_sendbuf_limit_bytes = parse_memory(v)? as u64;
            Ok(())
        }),
    ),
    opt!("cluster-slot-stats-enabled", None, mutable: true, get: |_| "no".into(), set: |_, v| {
        let on = parse_bool(v)?;
        only_default(
            yes_no(on).as_str(),
            "no",
            "ferrocluster keeps no per-slot CPU time and network bytes",
        )
    }),
    quoted(
        opt!("requirepass", None, mutable: true, get: |c| c.requirepass.clone().unwrap_or_default(), set: |c, v| {
            c.requirepass = non_empty(v);
            Ok(())
        }),
    ),
    quoted(
        opt!("aclfile", None, mutable: false, get: |c| c.aclfile.clone().unwrap_or_default(), set: |c, v| {
            c.aclfile = non_empty(v);
            Ok(())
        }),
    ),
    int_opt!("acllog-max-len", None, mutable: true, 0, LLONG_MAX, acllog_max_len),
    int_opt!("tracking-table-max-keys", None, mutable: true, 0, LLONG_MAX, tracking_table_max_keys),
    opt!("loglevel", None, mutable: false, get: |c| c.loglevel.name().into(), set: |c, v| {
        c.loglevel = match v.to_ascii_lowercase().as_str() {
            "debug" => LogLevel::Debug,
            "verbose" => LogLevel::Verbose,
            "notice" => LogLevel::Notice,
            "warning" => LogLevel::Warning,
            _ => {
                return Err(
                    "argument(s) must be one of the following: debug, verbose, notice, warning"
                        .into(),
                )
            }
        };
        Ok(())
    }),
    quoted(
        opt!("logfile", None, mutable: false, get: |c| c.logfile.as_ref().map(|p| p.display().to_string()).unwrap_or_default(), set: |c, v| {
            c.logfile = non_empty(v).map(PathBuf::from);
            Ok(())
        }),
    ),
    opt!("io-threads", None, mutable: false, get: |c| c.io_threads.to_string(), set: |c, v| {
        c.io_threads = int(v, 1, 128)?;
        Ok(())
    }),
    opt!("io-busy-polls", None, mutable: false, get: |c| c.io_busy_polls.to_string(), set: |c, v| {
        c.io_busy_polls = int(v, 0, 100_000)?;
        Ok(())
    }),
    memory(
        opt!("proto-max-bulk-len", None, mutable: false, get: |c| c.proto_max_bulk_len.to_string(), set: |c, v| {
            c.proto_max_bulk_len = parse_memory(v)?.max(1);
            Ok(())
        }),
    ),
    memory(
        opt!("client-query-buffer-limit", None, mutable: false, get: |c| c.client_query_buffer_limit.to_string(), set: |c, v| {
            c.client_query_buffer_limit = parse_memory(v)?.max(1024);
            Ok(())
        }),
    ),
    memory(
        opt!("repl-backlog-size", None, mutable: true, get: |c| c.repl.backlog_size.to_string(), set: |c, v| {
            c.repl.backlog_size = (parse_memory(v)? as u64).max(1);
            Ok(())
        }),
    ),
    int_opt!("repl-backlog-ttl", None, mutable: false, 0, LLONG_MAX, repl.backlog_ttl_s),
    int_opt!("repl-timeout", None, mutable: true, 1, INT_MAX, repl.timeout_s),
    int_opt!("repl-ping-replica-period", Some("repl-ping-slave-period"), mutable: true, 1, INT_MAX, repl.ping_period_s),
    int_opt!("min-replicas-to-write", Some("min-slaves-to-write"), mutable: true, 0, INT_MAX, repl.min_replicas_to_write),
    int_opt!("min-replicas-max-lag", Some("min-slaves-max-lag"), mutable: true, 0, INT_MAX, repl.min_replicas_max_lag_s),
    bool_opt!("repl-diskless-sync", None, mutable: false, repl.diskless_sync),
    int_opt!("repl-diskless-sync-delay", None, mutable: false, 0, INT_MAX, repl.diskless_sync_delay_s),
    quoted(
        opt!("primaryauth", Some("masterauth"), mutable: true, get: |c| c.repl.primary_auth.clone().unwrap_or_default(), set: |c, v| {
            c.repl.primary_auth = non_empty(v);
            Ok(())
        }),
    ),
    quoted(
        opt!("primaryuser", Some("masteruser"), mutable: true, get: |c| c.repl.primary_user.clone().unwrap_or_default(), set: |c, v| {
            c.repl.primary_user = non_empty(v);
            Ok(())
        }),
    ),
    opt!("hz", None, mutable: false, get: |c| c.hz.to_string(), set: |c, v| {
        c.hz = int::<u32>(v, 0, INT_MAX)?.clamp(1, 500);
        Ok(())
    }),
    opt!("slowlog-log-slower-than", None, mutable: true, get: |c| c.slowlog_log_slower_than.to_string(), set: |c, v| {
        c.slowlog_log_slower_than = int(v, -1, i64::MAX as i128)?;
        Ok(())
    }),
    opt!("latency-monitor-threshold", None, mutable: true, get: |c| c.latency_monitor_threshold.to_string(), set: |c, v| {
        c.latency_monitor_threshold = int(v, 0, i64::MAX as i128)?;
        Ok(())
    }),
    opt!("timeout", None, mutable: true, get: |c| c.timeout_s.to_string(), set: |c, v| {
        c.timeout_s = int(v, 0, INT_MAX)?;
        Ok(())
    }),
    opt!("tcp-keepalive", None, mutable: false, get: |c| c.tcp_keepalive_s.to_string(), set: |c, v| {
        c.tcp_keepalive_s = int(v, 0, INT_MAX)?;
        Ok(())
    }),
    quoted(
        opt!("pidfile", None, mutable: false, get: |c| c.pidfile.as_ref().map(|p| p.display().to_string()).unwrap_or_default(), set: |c, v| {
            c.pidfile = (!v.is_empty()).then(|| PathBuf::from(v));
            Ok(())
        }),
    ),
    opt!("metrics-port", None, mutable: false, get: |c| c.metrics_port.to_string(), set: |c, v| {
        c.metrics_port = int(v, 0, 65535)?;
        Ok(())
    }),
    opt!("slowlog-max-len", None, mutable: true, get: |c| c.slowlog_max_len.to_string(), set: |c, v| {
        c.slowlog_max_len = int(v, 0, i64::MAX as i128)?;
        Ok(())
    }),
    opt!("maxclients", None, mutable: true, get: |c| c.maxclients.to_string(), set: |c, v| {
        c.maxclients = int(v, 1, u32::MAX as i128)?;
        Ok(())
    }),
    // Shown for the tools that read them; values that would ask for something this server
    // does not have are refused.
    opt!("databases", None, mutable: false, get: |_| "16".into(), set: |_, v| {
        int::<u32>(v, 1, INT_MAX)?;
        only_default(v, "16", "the standalone keyspace has 16 databases (cluster mode: cluster-databases)")
    }),
    Opt {
        multi: true,
        ..opt!("save", None, mutable: true, get: |c| crate::persist::show_save(&c.save), set: |c, v| {
            c.save = crate::persist::parse_save(v)?;
            Ok(())
        })
    },
    quoted(
        opt!("dbfilename", None, mutable: false, get: |c| c.dbfilename.clone(), set: |c, v| {
            if v.is_empty() || v.contains('/') {
                return Err("dbfilename can't be a path, just a filename".into());
            }
            c.dbfilename = v.to_string();
            Ok(())
        }),
    ),
    bool_opt!("appendonly", None, mutable: true, aof.enabled),
    quoted(
        opt!("appendfilename", None, mutable: false, get: |c| c.aof.filename.clone(), set: |c, v| {
            c.aof.filename = crate::aof::valid_name(v, "appendfilename")?;
            Ok(())
        }),
    ),
    quoted(
        opt!("appenddirname", None, mutable: false, get: |c| c.aof.dirname.clone(), set: |c, v| {
            c.aof.dirname = crate::aof::valid_name(v, "appenddirname")?;
            Ok(())
        }),
    ),
    opt!("appendfsync", None, mutable: true, get: |c| c.aof.fsync.name().into(), set: |c, v| {
        c.aof.fsync = crate::aof::Fsync::parse(v)?;
        Ok(())
    }),
    bool_opt!("aof-use-rdb-preamble", None, mutable: true, aof.use_rdb_preamble),
    bool_opt!("aof-load-truncated", None, mutable: true, aof.load_truncated),
    int_opt!("auto-aof-rewrite-percentage", None, mutable: true, 0, INT_MAX, aof.rewrite_percentage),
    bool_opt!("no-appendfsync-on-rewrite", None, mutable: true, aof.no_fsync_on_rewrite),
    bool_opt!("aof-rewrite-incremental-fsync", None, mutable: true, aof.rewrite_incremental_fsync),
    opt!("aof-timestamp-enabled", None, mutable: true, get: |_| "no".into(), set: |_, v| {
        let on = parse_bool(v)?;
        only_default(yes_no(on).as_str(), "no", "ferrocluster-server writes no AOF timestamp annotations")
    }),
    memory(
        opt!("auto-aof-rewrite-min-size", None, mutable: true, get: |c| c.aof.rewrite_min_size.to_string(), set: |c, v| {
            c.aof.rewrite_min_size = parse_memory(v)? as u64;
            Ok(())
        }),
    ),
    memory(
        opt!("maxmemory", None, mutable: true, get: |c| c.maxmemory.bytes.to_string(), set: |c, v| {
            c.maxmemory.bytes = parse_memory(v)? as u64;
            Ok(())
        }),
    ),
    opt!("maxmemory-policy", None, mutable: true, get: |c| c.maxmemory.policy.name().into(), set: |c, v| {
        c.maxmemory.policy = crate::evict::Policy::parse(v)?;
        Ok(())
    }),
    int_opt!("maxmemory-samples", None, mutable: true, 1, 64, maxmemory.samples),
    int_opt!("lfu-log-factor", None, mutable: true, 0, INT_MAX, maxmemory.lfu_log_factor),
    int_opt!("lfu-decay-time", None, mutable: true, 0, INT_MAX, maxmemory.lfu_decay_time),
    opt!("replica-ignore-maxmemory", Some("slave-ignore-maxmemory"), mutable: false, get: |_| "yes".into(), set: |_, v| {
        let on = parse_bool(v)?;
        only_default(yes_no(on).as_str(), "yes", "replicas here never evict: their primary's DELs keep them in step")
    }),
    // Encoding thresholds (Redis 7.0 names and ranges; the `ziplist` names are aliases).
    int_opt!("hash-max-listpack-entries", Some("hash-max-ziplist-entries"), mutable: true, 0, LLONG_MAX, limits.hash_max_listpack_entries),
    int_opt!("hash-max-listpack-value", Some("hash-max-ziplist-value"), mutable: true, 0, LLONG_MAX, limits.hash_max_listpack_value),
    int_opt!("set-max-intset-entries", None, mutable: true, 0, LLONG_MAX, limits.set_max_intset_entries),
    int_opt!("set-max-listpack-entries", None, mutable: true, 0, LLONG_MAX, limits.set_max_listpack_entries),
    int_opt!("set-max-listpack-value", None, mutable: true, 0, LLONG_MAX, limits.set_max_listpack_value),
    int_opt!("zset-max-listpack-entries", Some("zset-max-ziplist-entries"), mutable: true, 0, LLONG_MAX, limits.zset_max_listpack_entries),
    int_opt!("zset-max-listpack-value", Some("zset-max-ziplist-value"), mutable: true, 0, LLONG_MAX, limits.zset_max_listpack_value),
    int_opt!("list-max-listpack-size", Some("list-max-ziplist-size"), mutable: true, -INT_MAX - 1, INT_MAX, limits.list_max_listpack_size),
    int_opt!("list-compress-depth", None, mutable: true, 0, INT_MAX, limits.list_compress_depth),
    // The directives of Redis 7.0's redis.conf (issue 19). Implemented:
    bool_opt!("protected-mode", None, mutable: true, protected_mode),
    // TLS (Valkey 9.1 `tls-*`; `ferrocluster_host::tls` says how each is taken).
    opt!("tls-port", None, mutable: false, get: |c| c.cluster.tls_port.to_string(), set: |c, v| {
        c.cluster.tls_port = port(v)?;
        Ok(())
    }),
    quoted(
        opt!("tls-cert-file", None, mutable: true, get: |c| opt_path(&c.tls.cert_file), set: |c, v| {
            c.tls.cert_file = path_or_none(v);
            Ok(())
        }),
    ),
    quoted(
        opt!("tls-key-file", None, mutable: true, get: |c| opt_path(&c.tls.key_file), set: |c, v| {
            c.tls.key_file = path_or_none(v);
            Ok(())
        }),
    ),
    quoted(
        opt!("tls-client-cert-file", None, mutable: true, get: |c| opt_path(&c.tls.client_cert_file), set: |c, v| {
            c.tls.client_cert_file = path_or_none(v);
            Ok(())
        }),
    ),
    quoted(
        opt!("tls-client-key-file", None, mutable: true, get: |c| opt_path(&c.tls.client_key_file), set: |c, v| {
            c.tls.client_key_file = path_or_none(v);
            Ok(())
        }),
    ),
    // Passwords of encrypted private keys: the keys are read as plain PEM (rustls), so only
    // "" (no password) is taken. CONFIG GET shows "" as Valkey does for an unset one.
    quoted(
        opt!("tls-key-file-pass", None, mutable: true, get: |_| String::new(), set: |_, v| {
            only_default(v, "", "encrypted private keys are not supported (decrypt the key file)")
        }),
    ),
    quoted(
        opt!("tls-client-key-file-pass", None, mutable: true, get: |_| String::new(), set: |_, v| {
            only_default(v, "", "encrypted private keys are not supported (decrypt the key file)")
        }),
    ),
    quoted(
        opt!("tls-ca-cert-file", None, mutable: true, get: |c| opt_path(&c.tls.ca_cert_file), set: |c, v| {
            c.tls.ca_cert_file = path_or_none(v);
            Ok(())
        }),
    ),
    quoted(
        opt!("tls-ca-cert-dir", None, mutable: true, get: |c| opt_path(&c.tls.ca_cert_dir), set: |c, v| {
            c.tls.ca_cert_dir = path_or_none(v);
            Ok(())
        }),
    ),
    opt!("tls-auth-clients", None, mutable: true, get: |c| c.tls.auth_clients.as_str().into(), set: |c, v| {
        c.tls.auth_clients = ferrocluster_host::tls::AuthClients::parse(v)?;
        Ok(())
    }),
    quoted(
        opt!("tls-protocols", None, mutable: true, get: |c| c.tls.protocols.clone(), set: |c, v| {
            ferrocluster_host::tls::parse_protocols(v)?;
            c.tls.protocols = v.to_string();
            Ok(())
        }),
    ),
    quoted(
        opt!("tls-ciphersuites", None, mutable: true, get: |c| c.tls.ciphersuites.clone(), set: |c, v| {
            let probe = ferrocluster_host::tls::TlsSettings { ciphersuites: v.to_string(), ..Default::default() };
            ferrocluster_host::tls::provider(&probe)?;
            c.tls.ciphersuites = v.to_string();
            Ok(())
        }),
    ),
    quoted(
        opt!("tls-ciphers", None, mutable: true, get: |c| c.tls.ciphers.clone(), set: |c, v| {
            let probe = ferrocluster_host::tls::TlsSettings { ciphers: v.to_string(), ..Default::default() };
            ferrocluster_host::tls::provider(&probe)?;
            c.tls.ciphers = v.to_string();
            Ok(())
        }),
    ),
    bool_opt!("tls-session-caching", None, mutable: true, tls.session_caching),
    int_opt!("tls-session-cache-size", None, mutable: true, 0, INT_MAX, tls.session_cache_size),
    int_opt!("tls-session-cache-timeout", None, mutable: true, 0, INT_MAX, tls.session_cache_timeout),
    bool_opt!("tls-cluster", None, mutable: false, tls_cluster),
    bool_opt!("tls-replication", None, mutable: true, tls_replication),
    bool_opt!("daemonize", None, mutable: false, daemonize),
    // Debian's redis.conf says `supervised no` (issue 37): accepted; the other modes would
    // need a notification to upstart / systemd this server does not send.
    opt!("supervised", None, mutable: false, get: |_| "no".into(), set: |_, v| {
        if !["upstart", "systemd", "auto", "no"].contains(&v.to_ascii_lowercase().as_str()) {
            return Err("argument(s) must be one of the following: upstart, systemd, auto, no".into());
        }
        only_default(v, "no", "ferrocluster-server does not notify a supervisor")
    }),
    bool_opt!("disable-thp", None, mutable: false, disable_thp),
    bool_opt!("stop-writes-on-bgsave-error", None, mutable: true, stop_writes_on_bgsave_error),
    bool_opt!("dynamic-hz", None, mutable: false, dynamic_hz),
    Opt {
        multi: true,
        ..opt!("client-output-buffer-limit", None, mutable: true, get: |c| show_output_limits(&c.output_limits), set: |c, v| {
            parse_output_limits(&mut c.output_limits, v)
        })
    },
    // Satisfied by what this server always does; any other value is refused:
    opt!("tcp-backlog", None, mutable: false, get: |_| ferrocluster_host::listen::BACKLOG.to_string(), set: |_, v| {
        int::<i32>(v, 0, INT_MAX)?;
        // Every listening socket is made with this backlog (`ferrocluster_host::listen`).
        only_default(v, "511", "ferrocluster-server listens with a backlog of 511")
    }),
    opt!("always-show-logo", None, mutable: false, get: |_| "no".into(), set: |_, v| {
        let on = parse_bool(v)?;
        only_default(yes_no(on).as_str(), "no", "ferrocluster-server shows no ASCII logo")
    }),
    opt!("rdbcompression", None, mutable: false, get: |_| "yes".into(), set: |_, v| {
        let on = parse_bool(v)?;
        // The RDB encoder compresses strings over 20 bytes with LZF (`ferrocluster_rdb`).
        only_default(yes_no(on).as_str(), "yes", "ferrocluster-server always compresses RDB strings with LZF")
    }),
    opt!("rdbchecksum", None, mutable: false, get: |_| "yes".into(), set: |_, v| {
        let on = parse_bool(v)?;
        // Every RDB written ends with its CRC64 and every one read is checked.
        only_default(yes_no(on).as_str(), "yes", "ferrocluster-server always writes and checks the RDB CRC64")
    }),
    opt!("rdb-save-incremental-fsync", None, mutable: false, get: |_| "yes".into(), set: |_, v| {
        let on = parse_bool(v)?;
        // `persist::write_atomically` fsyncs every 4 MiB of an RDB as it writes it.
        only_default(yes_no(on).as_str(), "yes", "ferrocluster-server always fsyncs the RDB every 4 MiB")
    }),
    opt!("rdb-del-sync-files", None, mutable: false, get: |_| "no".into(), set: |_, v| {
        let on = parse_bool(v)?;
        // The full copy for a replica is made in memory: no RDB file is written for it.
        only_default(yes_no(on).as_str(), "no", "ferrocluster-server writes no RDB files for replication")
    }),
    opt!("replica-serve-stale-data", Some("slave-serve-stale-data"), mutable: false, get: |_| "yes".into(), set: |_, v| {
        let on = parse_bool(v)?;
        // A replica whose link is down keeps answering from the data set it has.
        only_default(yes_no(on).as_str(), "yes", "a replica here always serves its data while the link is down")
    }),
    opt!("replica-read-only", Some("slave-read-only"), mutable: false, get: |_| "yes".into(), set: |_, v| {
        let on = parse_bool(v)?;
        // Clients' writes to a replica are refused with -READONLY (tests/replica_writes.rs).
        only_default(yes_no(on).as_str(), "yes", "a replica here always refuses clients' writes")
    }),
    opt!("repl-diskless-sync-max-replicas", None, mutable: false, get: |_| "0".into(), set: |_, v| {
        int::<u32>(v, 0, INT_MAX)?;
        // 0: the full copy starts after `repl-diskless-sync-delay` whatever the replica count.
        only_default(v, "0", "the full copy never starts early on a replica count")
    }),
    opt!("repl-diskless-load", None, mutable: false, get: |c| c.inert.repl_diskless_load.into(), set: |c, v| {
        // Our replica decodes the copy into a staging keyspace and swaps it in at its end
        // (`crate::repl`, Valkey's `swapdb`). `disabled` (Redis's default) is taken for the
        // guarantee it gives: the old data set stays until the whole new copy has arrived, and
        // a broken transfer leaves it. Where it differs: clients get -LOADING during the
        // transfer here, where Redis with `disabled` serves the old data until the download
        // ends. `on-empty-db` (drop the data set first) is refused.
        c.inert.repl_diskless_load = match v.to_ascii_lowercase().as_str() {
            "disabled" => "disabled",
            "swapdb" => "swapdb",
            "on-empty-db" => {
                return Err("a replica here keeps its data set until the new copy is complete; only disabled or swapdb is accepted".into())
            }
            _ => return Err("argument(s) must be one of the following: disabled, on-empty-db, swapdb".into()),
        };
        Ok(())
    }),
    opt!("repl-disable-tcp-nodelay", None, mutable: false, get: |_| "no".into(), set: |_, v| {
        let on = parse_bool(v)?;
        // Every client socket, replica links included, has TCP_NODELAY set.
        only_default(yes_no(on).as_str(), "no", "replica links always have TCP_NODELAY")
    }),
    opt!("lazyfree-lazy-eviction", None, mutable: false, get: |_| "no".into(), set: |_, v| lazy_no(v)),
    opt!("lazyfree-lazy-expire", None, mutable: false, get: |_| "no".into(), set: |_, v| lazy_no(v)),
    opt!("lazyfree-lazy-server-del", None, mutable: false, get: |_| "no".into(), set: |_, v| lazy_no(v)),
    opt!("lazyfree-lazy-user-del", None, mutable: false, get: |_| "no".into(), set: |_, v| lazy_no(v)),
    opt!("lazyfree-lazy-user-flush", None, mutable: false, get: |_| "no".into(), set: |_, v| lazy_no(v)),
    opt!("replica-lazy-flush", Some("slave-lazy-flush"), mutable: false, get: |_| "no".into(), set: |_, v| lazy_no(v)),
    opt!("oom-score-adj", None, mutable: false, get: |_| "no".into(), set: |_, v| {
        if !["no", "yes", "relative", "absolute"].contains(&v.to_ascii_lowercase().as_str()) {
            return Err("argument(s) must be one of the following: no, yes, relative, absolute".into());
        }
        only_default(v, "no", "ferrocluster-server does not change its oom_score_adj")
    }),
    quoted(
        opt!("notify-keyspace-events", None, mutable: true, get: |c| crate::notify::flags_text(c.notify_keyspace_events), set: |c, v| {
            // Valkey `setConfigNotifyKeyspaceEventsOption`'s text.
            let flags = crate::notify::parse_flags(v).ok_or_else(|| {
                "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".to_string()
            })?;
            // Valkey's `m` (a read missed its key) is not sent here yet: refused rather than
            // accepted and never sent.
            if flags & crate::notify::KEY_MISS != 0 {
                return Err("ferrocluster-server does not send the m (key miss) class".into());
            }
            c.notify_keyspace_events = flags;
            Ok(())
        }),
    ),
    // Subjects this server does not have (see `Inert`):
    int_opt!("replica-priority", Some("slave-priority"), mutable: false, 0, INT_MAX, inert.replica_priority),
    Opt {
        multi: true,
        ..opt!("oom-score-adj-values", None, mutable: false, get: |c| {
            let [a, b, d] = c.inert.oom_score_adj_values;
            format!("{a} {b} {d}")
        }, set: |c, v| {
            let bad = || "Invalid oom-score-adj-values, elements must be between -2000 and 2000.".to_string();
            let vals: Vec<i32> = v
                .split(' ')
                .filter(|w| !w.is_empty())
                .map(|w| w.parse::<i32>().ok().filter(|n| (-2000..=2000).contains(n)).ok_or_else(bad))
                .collect::<Result<_, _>>()?;
            c.inert.oom_score_adj_values = vals.try_into().map_err(|_| bad())?;
            Ok(())
        })
    },
    int_opt!("hll-sparse-max-bytes", None, mutable: false, 0, LLONG_MAX, inert.hll_sparse_max_bytes),
    int_opt!("stream-node-max-bytes", None, mutable: false, 0, LLONG_MAX, inert.stream_node_max_bytes),
    int_opt!("stream-node-max-entries", None, mutable: false, 0, LLONG_MAX, inert.stream_node_max_entries),
    bool_opt!("activerehashing", None, mutable: false, inert.activerehashing),
    bool_opt!("jemalloc-bg-thread", None, mutable: false, inert.jemalloc_bg_thread),
    bool_opt!("set-proc-title", None, mutable: false, inert.set_proc_title),
    quoted(
        opt!("proc-title-template", None, mutable: false, get: |c| c.inert.proc_title_template.clone(), set: |c, v| {
            if !valid_title_template(v) {
                return Err("template format is invalid or contains unknown variables".into());
            }
            c.inert.proc_title_template = v.to_string();
            Ok(())
        }),
    ),
];

/// Valkey `validateProcTitleTemplate`: braces balanced around known variables, `{title}`
/// among them.
fn valid_title_template(v: &str) -> bool {
    const KNOWN: [&str; 7] = [
        "title",
        "listen-addr",
        "server-mode",
        "port",
        "tls-port",
        "unixsocket",
        "config-file",
    ];
    let mut rest = v;
    let mut title = false;
    while let Some(open) = rest.find(['{', '}']) {
        if rest.as_bytes()[open] == b'}' {
            return false;
        }
        let Some(close) = rest[open..].find('}') else {
            return false;
        };
        let name = &rest[open + 1..open + close];
        if !KNOWN.contains(&name) {
            return false;
        }
        title |= name == "title";
        rest = &rest[open + close + 1..];
    }
    title
}

/// The `lazyfree-*` options: `no` frees in the caller's thread, which is what this server
/// always does (memory is freed when the value is dropped).
fn lazy_no(v: &str) -> Result<(), String> {
    let on = parse_bool(v)?;
    only_default(
        yes_no(on).as_str(),
        "no",
        "ferrocluster-server always frees values in the thread that deletes them",
    )
}

/// The option named `name` (or its alias), ASCII case-insensitively.
pub fn option(name: &str) -> Option<&'static Opt> {
    OPTIONS.iter().find(|o| {
        o.name.eq_ignore_ascii_case(name) || o.alias.is_some_and(|a| a.eq_ignore_ascii_case(name))
    })
}

impl Config {
    /// Applies one `name value...` setting from a flag or a config file line. Names are
    /// case-insensitive, as in redis-server.
    ///
    /// # Errors
    /// A reason text when the name is unknown, the argument count is wrong or a value is bad.
    pub fn set(&mut self, name: &str, args: &[String]) -> Result<(), String> {
        if name.eq_ignore_ascii_case("user") {
            // `user <name> <rules...>`, checked when the users are built (`crate::acl`).
            if args.is_empty() {
                return Err("wrong number of arguments".into());
            }
            self.users.push(args.to_vec());
            return Ok(());
        }
        let Some(opt) = option(name) else {
            return Err("Bad directive or wrong number of arguments".into());
        };
        let value = match (args, opt.multi) {
            ([v], _) => v.clone(),
            ([_, _, ..], true) => args.join(" "),
            _ => return Err("wrong number of arguments".into()),
        };
        if opt.name == "save" {
            let points = crate::persist::parse_save(&value)?;
            if !self.save_loaded || points.is_empty() {
                self.save.clear();
                self.save_loaded = true;
            }
            self.save.extend(points);
            return Ok(());
        }
        (opt.set)(self, &value)
    }

    /// Applies a config file's text (`name value` lines, `#` comments, blank lines, values
    /// optionally in double quotes; `include <path>` applies another file in its place, as
    /// Redis's `loadServerConfigFromString`, at most 16 deep). `file` names the file in
    /// errors; `read_file` reads an included one.
    ///
    /// # Errors
    /// The first bad line, with its number and reason (an included file's own line).
    pub fn apply_file(
        &mut self,
        file: &str,
        text: &str,
        read_file: &dyn Fn(&str) -> std::io::Result<String>,
    ) -> Result<(), ConfigError> {
        self.apply_file_at(file, text, read_file, 0)
    }

    fn apply_file_at(
        &mut self,
        file: &str,
        text: &str,
        read_file: &dyn Fn(&str) -> std::io::Result<String>,
        depth: usize,
    ) -> Result<(), ConfigError> {
        for (i, line) in text.lines().enumerate() {
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let err = |reason: String| ConfigError {
                at: format!("line {} of {}", i + 1, file),
                text: trimmed.to_string(),
                reason,
            };
            let words = split_words(trimmed).map_err(err)?;
            let (name, args) = words
                .split_first()
                .ok_or_else(|| err("empty line".into()))?;
            if name.eq_ignore_ascii_case("include") {
                let [path] = args else {
                    return Err(err("wrong number of arguments".into()));
                };
                if depth >= 16 {
                    return Err(err("includes nested too deep (16)".into()));
                }
                let inner = read_file(path)
                    .map_err(|e| err(format!("can't open the included file: {e}")))?;
                self.apply_file_at(path, &inner, read_file, depth + 1)?;
                continue;
            }
            self.set(name, args).map_err(err)?;
        }
        Ok(())
    }

    /// The bus port: `cluster-port`, or port + 10000 (redis-server's `CLUSTER_PORT_INCR`).
    /// With `tls-cluster yes` the base is `tls-port` (Valkey `defaultClientPort`).
    ///
    /// # Errors
    /// When the base port + 10000 does not fit in 16 bits.
    pub fn bus_port(&self) -> Result<u16, String> {
        let base = if self.tls_cluster {
            self.cluster.tls_port
        } else {
            self.port
        };
        match self.cluster.cluster_port {
            0 => base
                .checked_add(10000)
                .ok_or_else(|| format!("port {base} + 10000 is not a valid bus port")),
            p => Ok(p),
        }
    }

    /// Whether anything uses TLS (a TLS client port, the bus or replication): the files are
    /// then loaded at start.
    pub fn tls_in_use(&self) -> bool {
        self.cluster.tls_port != 0 || self.tls_cluster || self.tls_replication
    }

    /// Full path of the nodes.conf file.
    pub fn nodes_conf_path(&self) -> PathBuf {
        self.dir.join(&self.cluster_config_file)
    }

    /// `CONFIG GET pattern...`: (name, value) of every option (and alias) a glob pattern
    /// matches, case-insensitively, in table order; a hidden option only for its exact name.
    pub fn matching(&self, patterns: &[&[u8]]) -> Vec<(&'static str, String)> {
        let hit = |name: &str, hidden: bool| {
            patterns.iter().any(|p| {
                let p = p.to_ascii_lowercase();
                if hidden {
                    p == name.as_bytes()
                } else {
                    ferrocluster_kvstore::glob_match(&p, name.as_bytes())
                }
            })
        };
        let mut out = Vec::new();
        for o in OPTIONS {
            for name in std::iter::once(o.name).chain(o.alias) {
                if hit(name, o.hidden) {
                    out.push((name, (o.get)(self)));
                }
            }
        }
        out
    }
}

/// Why CONFIG SET refused, as Valkey words it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetError {
    /// `ERR Unknown option or number of arguments for CONFIG SET - '<name>'`
    Unknown(String),
    /// `ERR CONFIG SET failed (possibly related to argument '<name>') - <reason>`
    Failed {
        /// The option as written.
        name: String,
        /// Why.
        reason: String,
    },
}

impl SetError {
    /// The error line (without `-` and CRLF).
    pub fn text(&self) -> String {
        match self {
            SetError::Unknown(n) => {
                format!("ERR Unknown option or number of arguments for CONFIG SET - '{n}'")
            }
            SetError::Failed { name, reason } => {
                format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {reason}")
            }
        }
    }
}

/// `CONFIG SET name value [name value ...]` on `config` (Valkey's `configSetCommand`): every
/// name known and mutable, none twice, every value valid, or nothing changes. Returns the
/// options set, for the caller to apply.
///
/// # Errors
/// The first [`SetError`], `config` unchanged.
pub fn config_set(
    config: &mut Config,
    pairs: &[(&str, &str)],
) -> Result<Vec<&'static Opt>, SetError> {
    let mut opts: Vec<&'static Opt> = Vec::with_capacity(pairs.len());
    for (name, _) in pairs {
        let Some(opt) = option(name) else {
            return Err(SetError::Unknown(name.to_string()));
        };
        let failed = |reason: &str| SetError::Failed {
            name: name.to_string(),
            reason: reason.into(),
        };
        if !opt.mutable {
            return Err(failed("can't set immutable config"));
        }
        if opts.iter().any(|o| std::ptr::eq(*o, opt)) {
            return Err(failed("duplicate parameter"));
        }
        opts.push(opt);
    }
    let mut next = config.clone();
    for ((name, value), opt) in pairs.iter().zip(&opts) {
        (opt.set)(&mut next, value).map_err(|reason| SetError::Failed {
            name: name.to_string(),
            reason,
        })?;
    }
    *config = next;
    Ok(opts)
}

/// Splits a config line into words as Valkey 9's `sdssplitargs` does for config files
/// (`loadServerConfigFromString`): the same rules as inline commands
/// ([`crate::resp::split_inline`]: quotes, `\xHH` and `\n`-style escapes in `"..."`), so a
/// value CONFIG REWRITE wrote in quotes reads back unchanged.
pub(crate) fn split_words(line: &str) -> Result<Vec<String>, String> {
    let mut buf = Vec::new();
    let mut words = Vec::new();
    crate::resp::split_inline(line.as_bytes(), &mut buf, &mut words)
        .map_err(|()| "unbalanced quotes in configuration line".to_string())?;
    Ok(words
        .into_iter()
        .map(|r| String::from_utf8_lossy(&buf[r]).into_owned())
        .collect())
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Invocation {
    /// Run a server with this configuration.
    Server(Box<Config>),
    /// Run the six-node demo (`demo [--base-port N]`).
    Demo {
        /// First data port of the six nodes.
        base_port: u16,
    },
    /// Print the version and exit.
    Version,
    /// Print usage and exit.
    Help,
}

/// Usage text for `--help`.
pub const USAGE: &str = "Usage: ferrocluster-server [/path/to/config.conf] [--name value ...]\n       \
ferrocluster-server demo [--base-port N]\n       ferrocluster-server -v | --version | -h | --help\n\n\
Options use redis-server's names (every cluster-* option of Valkey 9.1), e.g.:\n  \
--port 7000 --bind \"127.0.0.1 -::1\" --cluster-enabled yes --cluster-port 17000\n  \
--cluster-config-file nodes-7000.conf --dir /tmp/n1 --cluster-node-timeout 5000\n  \
--cluster-announce-ip/-hostname/-port/-bus-port V --cluster-databases N\n  \
--cluster-require-full-coverage yes|no --cluster-replica-validity-factor N\n  \
--cluster-migration-barrier N --cluster-allow-replica-migration yes|no --maxclients N\n  \
--requirepass P --loglevel debug|verbose|notice|warning --logfile F --io-threads N --io-busy-polls N\n";

/// Parses `args` (without the program name). `read_file` loads a config file's text.
///
/// # Errors
/// A [`ConfigError`] naming the argument or file line and the reason.
pub fn parse_args(
    args: &[String],
    read_file: impl Fn(&str) -> std::io::Result<String>,
) -> Result<Invocation, ConfigError> {
    let mut rest = args;
    match rest.first().map(String::as_str) {
        Some("-v") | Some("--version") => return Ok(Invocation::Version),
        Some("-h") | Some("--help") => return Ok(Invocation::Help),
        Some("demo") => return parse_demo(&rest[1..]),
        _ => {}
    }
    let mut config = Config::default();
    if let Some(first) = rest.first() {
        if !first.starts_with("--") {
            let text = read_file(first).map_err(|e| ConfigError {
                at: "config file".into(),
                text: first.clone(),
                reason: format!("can't open the config file: {e}"),
            })?;
            config.apply_file(first, &text, &read_file)?;
            // Redis keeps the absolute path (`getAbsolutePath`): CONFIG REWRITE writes there
            // whatever the working directory is by then.
            config.config_file =
                Some(std::path::absolute(first).unwrap_or_else(|_| PathBuf::from(first)));
            rest = &rest[1..];
        }
    }
    let mut i = 0;
    while i < rest.len() {
        let flag = &rest[i];
        let Some(name) = flag.strip_prefix("--").filter(|n| !n.is_empty()) else {
            return Err(ConfigError {
                at: format!("argument {}", i + 1),
                text: flag.clone(),
                reason: "expected an option starting with --".into(),
            });
        };
        let mut j = i + 1;
        while j < rest.len() && !rest[j].starts_with("--") {
            j += 1;
        }
        let values = &rest[i + 1..j];
        config.set(name, values).map_err(|reason| ConfigError {
            at: format!("argument {flag}"),
            text: rest[i..j].join(" "),
            reason,
        })?;
        i = j;
    }
    config.bus_port().map_err(|reason| ConfigError {
        at: "argument --port".into(),
        text: config.port.to_string(),
        reason,
    })?;
    Ok(Invocation::Server(Box::new(config)))
}

fn parse_demo(args: &[String]) -> Result<Invocation, ConfigError> {
    let mut base_port = 7100;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--base-port" => {
                let v = args.get(i + 1).ok_or_else(|| ConfigError {
                    at: "argument --base-port".into(),
                    text: "--base-port".into(),
                    reason: "missing value".into(),
                })?;
                base_port = port(v)
                    .ok()
                    .filter(|p| *p >= 1024 && *p <= 55000)
                    .ok_or_else(|| ConfigError {
                        at: "argument --base-port".into(),
                        text: v.clone(),
                        reason: "must be a port between 1024 and 55000".into(),
                    })?;
                i += 2;
            }
            other => {
                return Err(ConfigError {
                    at: "demo".into(),
                    text: other.into(),
                    reason: "unknown demo option (expected --base-port N)".into(),
                })
            }
        }
    }
    Ok(Invocation::Demo { base_port })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn no_file(_: &str) -> std::io::Result<String> {
        Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no such file",
        ))
    }

    fn server(inv: Invocation) -> Config {
        match inv {
            Invocation::Server(c) => *c,
            other => panic!("expected a server invocation, got {other:?}"),
        }
    }

    #[test]
    fn save_lines_add_up_and_quoted_values_take_escapes() {
        // redis-server 7.0: the first `save` line read replaces the defaults, later lines and
        // flags add to it; `save ""` clears.
        let file =
            |_: &str| Ok("save 900 1\nsave 300 10\nrequirepass \"a\\x41\\\"b c\"\n".to_string());
        let c = server(parse_args(&args("f.conf --save 60 5"), file).unwrap());
        assert_eq!((option("save").unwrap().get)(&c), "900 1 300 10 60 5");
        assert_eq!(c.requirepass.as_deref(), Some("aA\"b c"));
        assert!(c
            .config_file
            .as_ref()
            .is_some_and(|p| p.is_absolute() && p.ends_with("f.conf")));
        let flags = ["f.conf", "--save", ""].map(String::from);
        let c = server(parse_args(&flags, file).unwrap());
        assert_eq!((option("save").unwrap().get)(&c), "");
        let c = server(parse_args(&args("--port 7000"), no_file).unwrap());
        assert_eq!(c.config_file, None);
        assert_eq!((option("save").unwrap().get)(&c), "3600 1 300 100 60 10000");
    }

    #[test]
    fn defaults_follow_redis_conf() {
        let c = server(parse_args(&[], no_file).unwrap());
        assert_eq!(c.port, 6379);
        assert_eq!(show_bind(&c.bind), "127.0.0.1");
        assert!(c.cluster_enabled);
        assert_eq!(c.bus_port().unwrap(), 16379);
        assert_eq!(c.cluster.node_timeout_ms, 15000);
        assert_eq!(c.cluster.replica_validity_factor, 10);
        assert_eq!(c.cluster.migration_barrier, 1);
        assert!(c.cluster.require_full_coverage);
        assert!(c.cluster.allow_replica_migration);
        assert_eq!(c.nodes_conf_path(), PathBuf::from("./nodes.conf"));
    }

    #[test]
    fn flags_override_and_bus_port_offset() {
        let c = server(
            parse_args(
                &args("--port 23001 --cluster-node-timeout 2000 --cluster-enabled no --loglevel warning"),
                no_file,
            )
            .unwrap(),
        );
        assert_eq!(c.port, 23001);
        assert_eq!(c.bus_port().unwrap(), 33001);
        assert_eq!(c.cluster.node_timeout_ms, 2000);
        assert!(!c.cluster_enabled);
        assert_eq!(c.loglevel, LogLevel::Warning);
        let c = server(parse_args(&args("--port 7000 --cluster-port 9999"), no_file).unwrap());
        assert_eq!(c.bus_port().unwrap(), 9999);
        assert_eq!(c.io_busy_polls, 50, "default");
        let c = server(parse_args(&args("--io-busy-polls 0"), no_file).unwrap());
        assert_eq!(c.io_busy_polls, 0);
        let e = parse_args(&args("--io-busy-polls 100001"), no_file).unwrap_err();
        assert_eq!(e.reason, "argument must be between 0 and 100000 inclusive");
    }

    #[test]
    fn config_file_then_flags() {
        let text =
            "# comment\nport 7000\n\ncluster-config-file \"nodes 7000.conf\"\nrequirepass secret\n";
        let read = |name: &str| {
            assert_eq!(name, "my.conf");
            Ok(text.to_string())
        };
        let c = server(parse_args(&args("my.conf --port 7001"), read).unwrap());
        assert_eq!(c.port, 7001);
        assert_eq!(c.cluster_config_file, "nodes 7000.conf");
        assert_eq!(c.requirepass.as_deref(), Some("secret"));
    }

    #[test]
    fn bad_values_are_refused_with_where_and_why() {
        let e = parse_args(&args("--port 99999"), no_file).unwrap_err();
        assert_eq!(e.at, "argument --port");
        assert_eq!(e.reason, "argument must be between 0 and 65535 inclusive");
        let e = parse_args(&args("--cluster-enabled maybe"), no_file).unwrap_err();
        assert!(e.reason.contains("yes"), "{e}");
        let e = parse_args(&args("--no-such-option 1"), no_file).unwrap_err();
        assert!(e.reason.contains("Bad directive"), "{e}");
        let e = parse_args(&args("--port"), no_file).unwrap_err();
        assert!(e.reason.contains("wrong number"), "{e}");
        let e = parse_args(&args("--port 1 2"), no_file).unwrap_err();
        assert!(e.reason.contains("wrong number"), "{e}");
        let e = parse_args(&args("--port 60000"), no_file).unwrap_err();
        assert!(e.reason.contains("bus port"), "{e}");
        let e = parse_args(&args("missing.conf"), no_file).unwrap_err();
        assert!(e.reason.contains("can't open"), "{e}");
        let read = |_: &str| Ok("port 7000\nloglevel loud\n".to_string());
        let e = parse_args(&args("x.conf"), read).unwrap_err();
        assert_eq!(e.at, "line 2 of x.conf");
        assert_eq!(e.text, "loglevel loud");
        let read = |_: &str| Ok("dir \"unterminated\n".to_string());
        assert!(parse_args(&args("x.conf"), read).is_err());
    }

    #[test]
    fn demo_and_version() {
        assert_eq!(
            parse_args(&args("demo"), no_file).unwrap(),
            Invocation::Demo { base_port: 7100 }
        );
        assert_eq!(
            parse_args(&args("demo --base-port 23500"), no_file).unwrap(),
            Invocation::Demo { base_port: 23500 }
        );
        assert!(parse_args(&args("demo --base-port 80"), no_file).is_err());
        assert_eq!(
            parse_args(&args("--version"), no_file).unwrap(),
            Invocation::Version
        );
    }

    #[test]
    fn memory_units_are_valkeys() {
        assert_eq!(parse_memory("1kb").unwrap(), 1024);
        assert_eq!(parse_memory("1k").unwrap(), 1000);
        assert_eq!(parse_memory("2MB").unwrap(), 2 << 20);
        assert_eq!(parse_memory("3m").unwrap(), 3_000_000);
        assert_eq!(parse_memory("1gb").unwrap(), 1 << 30);
        assert_eq!(parse_memory("100").unwrap(), 100);
        assert_eq!(parse_memory("7b").unwrap(), 7);
        for bad in ["lots", "1.5mb", "-1", "", "mb", "+1"] {
            assert_eq!(
                parse_memory(bad),
                Err("argument must be a memory value".to_string()),
                "{bad}"
            );
        }
    }

    #[test]
    fn options_without_effect_here_take_only_their_default() {
        let c =
            server(parse_args(&args("--appendonly yes --appendfsync always"), no_file).unwrap());
        assert!(c.aof.enabled);
        assert_eq!(c.aof.fsync, crate::aof::Fsync::Always);
        // The AOF lines of redis-server 7.0's redis.conf.
        let c = server(
            parse_args(
                &args("--no-appendfsync-on-rewrite no --aof-rewrite-incremental-fsync yes --aof-timestamp-enabled no --aof-load-truncated yes --aof-use-rdb-preamble yes --auto-aof-rewrite-min-size 64mb"),
                no_file,
            )
            .unwrap(),
        );
        assert_eq!(c.aof, crate::aof::AofOptions::default());
        let e = parse_args(&args("--aof-timestamp-enabled yes"), no_file).unwrap_err();
        assert!(e.reason.ends_with("; only no is accepted"), "{e}");
        let e = parse_args(&args("--appendfsync sometimes"), no_file).unwrap_err();
        assert_eq!(
            e.reason,
            "argument(s) must be one of the following: everysec, always, no"
        );
        let e = parse_args(&args("--cluster-slot-stats-enabled yes"), no_file).unwrap_err();
        assert!(e.reason.ends_with("; only no is accepted"), "{e}");
        assert!(parse_args(&args("--cluster-slot-stats-enabled NO"), no_file).is_ok());
        let c = server(parse_args(&args("--cluster-link-sendbuf-limit 1kb"), no_file).unwrap());
        assert_eq!(c.cluster.link_sendbuf_limit_bytes, 1024);
    }

    /// Redis 7.0 redis.conf directives: a value this server cannot honour is refused with the
    /// line and why; bad values get valkey-server 9.1.2's texts (CONFIG SET on the real
    /// server); `client-output-buffer-limit` is shown as Valkey shows it.
    #[test]
    fn redis_conf_directives_refuse_what_is_not_honoured() {
        // `supervised no` is Debian's (issue 37).
        assert!(parse_args(&args("--supervised no"), no_file).is_ok());
        let text = "lazyfree-lazy-eviction no\nprotected-mode yes\nlazyfree-lazy-expire yes\n";
        let e = Config::default()
            .apply_file("r.conf", text, &no_file)
            .unwrap_err();
        assert_eq!(e.at, "line 3 of r.conf");
        assert!(e.reason.ends_with("; only no is accepted"), "{e}");
        for bad in [
            "--tcp-backlog 1024",
            "--always-show-logo yes",
            "--rdbchecksum no",
            "--repl-diskless-load on-empty-db",
            "--oom-score-adj yes",
            "--supervised systemd",
        ] {
            let e = parse_args(&args(bad), no_file).unwrap_err();
            assert!(e.reason.contains("only"), "{bad}: {e}");
        }
        for (bad, why) in [
            (
                "--client-output-buffer-limit normal 1 2",
                "Wrong number of arguments in buffer limit configuration.",
            ),
            (
                "--client-output-buffer-limit bogus 1 2 3",
                "Invalid client class specified in buffer limit configuration.",
            ),
            (
                "--client-output-buffer-limit normal x 2 3",
                "Error in hard, soft or soft_seconds setting in buffer limit configuration.",
            ),
            (
                "--oom-score-adj-values 0 200 3000",
                "Invalid oom-score-adj-values, elements must be between -2000 and 2000.",
            ),
            (
                "--proc-title-template {nope}",
                "template format is invalid or contains unknown variables",
            ),
            (
                "--supervised bogus",
                "argument(s) must be one of the following: upstart, systemd, auto, no",
            ),
        ] {
            assert_eq!(
                parse_args(&args(bad), no_file).unwrap_err().reason,
                why,
                "{bad}"
            );
        }
        let c = server(
            parse_args(&args("--client-output-buffer-limit pubsub 1mb 512kb 5 slave 0 0 0 --proc-title-template x-{title}"), no_file).unwrap(),
        );
        assert_eq!(
            c.output_limits.pubsub,
            ClassLimit {
                hard: 1 << 20,
                soft: 512 << 10,
                soft_secs: 5
            }
        );
        assert_eq!(
            (option("client-output-buffer-limit").unwrap().get)(&c),
            "normal 0 0 0 slave 0 0 0 pubsub 1048576 524288 5"
        );
        // The normal and replica classes are enforced too (`crate::net`, the engine).
        let c = server(
            parse_args(
                &args("--client-output-buffer-limit normal 1mb 0 0 replica 2mb 1mb 5"),
                no_file,
            )
            .unwrap(),
        );
        assert_eq!(
            (option("client-output-buffer-limit").unwrap().get)(&c),
            "normal 1048576 0 0 slave 2097152 1048576 5 pubsub 33554432 8388608 60"
        );
        assert_eq!(
            c.replication(1).output_buffer_limit,
            ferrocluster_dataplane::OutputBufferLimit {
                hard_bytes: 2 << 20,
                soft_bytes: 1 << 20,
                soft_ms: 5_000,
            }
        );
    }

    #[test]
    fn replication_directives_reach_the_engine_config() {
        let c = server(parse_args(&args("--port 7000"), no_file).unwrap());
        let r = c.replication(16);
        // Valkey 9's defaults (repl-diskless-sync excepted, see `ReplOptions`).
        assert_eq!(r.backlog_size, 10 * 1024 * 1024);
        assert_eq!((r.timeout_ms, r.ping_period_ms), (60_000, 10_000));
        assert!(!r.diskless_sync);
        assert_eq!((r.listening_port, r.databases), (7000, 16));
        assert_eq!(r.primary_auth, None);
        let c = server(
            parse_args(
                &args(
                    "--repl-backlog-size 1mb --repl-timeout 5 --repl-ping-slave-period 2 \
                     --repl-diskless-sync yes --repl-diskless-sync-delay 0 --masterauth pw \
                     --masteruser u --requirepass other",
                ),
                no_file,
            )
            .unwrap(),
        );
        let r = c.replication(1);
        assert_eq!(r.backlog_size, 1024 * 1024);
        assert_eq!((r.timeout_ms, r.ping_period_ms), (5_000, 2_000));
        assert!(r.diskless_sync);
        assert_eq!(r.diskless_sync_delay_ms, 0);
        assert_eq!(r.primary_auth.as_deref(), Some(&b"pw"[..]));
        assert_eq!(r.primary_user.as_deref(), Some("u"));
        assert_eq!((option("masterauth").unwrap().get)(&c), "pw");
        assert_eq!((option("primaryauth").unwrap().get)(&c), "pw");
        // Without primaryauth, the shard's requirepass.
        let c = server(parse_args(&args("--requirepass shared"), no_file).unwrap());
        assert_eq!(
            c.replication(1).primary_auth.as_deref(),
            Some(&b"shared"[..])
        );
        let e = parse_args(&args("--repl-timeout 0"), no_file).unwrap_err();
        assert!(e.reason.contains("between 1 and"), "{e}");
    }

    #[test]
    fn bind_lists_follow_redis() {
        let c = server(parse_args(&args("--bind 127.0.0.1 -::1"), no_file).unwrap());
        assert_eq!(
            c.bind,
            vec![
                BindAddr {
                    addr: "127.0.0.1".into(),
                    optional: false
                },
                BindAddr {
                    addr: "::1".into(),
                    optional: true
                }
            ]
        );
        assert_eq!(show_bind(&c.bind), "127.0.0.1 -::1");
        let read = |_: &str| Ok("bind * -::*\n".to_string());
        let c = server(parse_args(&args("x.conf"), read).unwrap());
        assert_eq!(show_bind(&c.bind), "* -::*");
        let at = |b: &BindAddr| b.socket_addr(7000).unwrap().to_string();
        assert_eq!(at(&c.bind[0]), "0.0.0.0:7000");
        assert_eq!(at(&c.bind[1]), "[::]:7000");
        let one = |a: &str| BindAddr {
            addr: a.into(),
            optional: false,
        };
        assert_eq!(at(&one("::1")), "[::1]:7000");
        assert_eq!(at(&one("localhost")), "127.0.0.1:7000");
        // Valkey: `[::1]` is not an address (getaddrinfo fails).
        assert_eq!(
            one("[::1]").socket_addr(7000),
            Err("Name or service not known".to_string())
        );
        let many = (0..17)
            .map(|i| format!("127.0.0.{i}"))
            .collect::<Vec<_>>()
            .join(" ");
        let e = parse_args(&args(&format!("--bind {many}")), no_file).unwrap_err();
        assert_eq!(e.reason, "Too many bind addresses specified.");
    }

    #[test]
    fn config_set_is_all_or_nothing_with_valkeys_texts() {
        let mut c = Config::default();
        let set = |c: &mut Config, pairs: &[(&str, &str)]| {
            config_set(c, pairs).map(|_| ()).map_err(|e| e.text())
        };
        assert_eq!(set(&mut c, &[("cluster-migration-barrier", "3")]), Ok(()));
        assert_eq!(c.cluster.migration_barrier, 3);
        assert_eq!(
            set(&mut c, &[("cluster-migration-barrier", "4"), ("cluster-announce-port", "70000")]),
            Err("ERR CONFIG SET failed (possibly related to argument 'cluster-announce-port') - argument must be between 0 and 65535 inclusive".to_string())
        );
        assert_eq!(c.cluster.migration_barrier, 3, "nothing changed");
        assert_eq!(
            set(&mut c, &[("nosuch", "1")]),
            Err("ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'".to_string())
        );
        assert_eq!(
            set(&mut c, &[("cluster-enabled", "no")]),
            Err("ERR CONFIG SET failed (possibly related to argument 'cluster-enabled') - can't set immutable config".to_string())
        );
        assert_eq!(
            set(&mut c, &[("cluster-node-timeout", "1"), ("CLUSTER-NODE-TIMEOUT", "2")]),
            Err("ERR CONFIG SET failed (possibly related to argument 'CLUSTER-NODE-TIMEOUT') - duplicate parameter".to_string())
        );
        assert_eq!(
            set(&mut c, &[("cluster-slave-validity-factor", "7")]),
            Ok(())
        );
        assert_eq!(c.cluster.replica_validity_factor, 7);
        let shown = c.matching(&[b"cluster-*validity*"]);
        assert_eq!(
            shown,
            vec![
                ("cluster-replica-validity-factor", "7".to_string()),
                ("cluster-slave-validity-factor", "7".to_string())
            ]
        );
        // Hidden: only by its exact name.
        assert!(c
            .matching(&[b"cluster-*"])
            .iter()
            .all(|(n, _)| *n != "cluster-ping-interval"));
        assert_eq!(c.matching(&[b"CLUSTER-PING-INTERVAL"]).len(), 1);
    }
}

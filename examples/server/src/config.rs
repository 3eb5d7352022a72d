//! Server configuration: redis-server-style flags (`--port 7000`) and a config file in the same
//! `name value` syntax (`ferrocluster-server [configfile] [--name value ...]`).
//!
//! Names and defaults follow redis-server / Valkey (`redis.conf`): `bind 127.0.0.1`,
//! `cluster-enabled yes` (our default: this is a cluster node), `cluster-port` = port + 10000,
//! `cluster-node-timeout 15000`, `cluster-replica-validity-factor 10`,
//! `cluster-migration-barrier 1`, `cluster-require-full-coverage yes`,
//! `cluster-allow-replica-migration yes`, `cluster-config-file nodes.conf`, `dir .`.
//! Flags given on the command line override the file (they are applied after it).

use std::fmt;
use std::path::PathBuf;

/// Log level names accepted by `loglevel` (redis-server's four, plus tracing's `trace`/`info`).
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
}

/// Every option the server understands. Field docs give the config name and default.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `port`: data (RESP) port. Default 6379.
    pub port: u16,
    /// `bind`: address to listen on. Default `127.0.0.1`.
    pub bind: String,
    /// `cluster-enabled`: run as a cluster node. Default yes.
    pub cluster_enabled: bool,
    /// `cluster-port`: bus port; `None` means port + 10000.
    pub cluster_port: Option<u16>,
    /// `cluster-config-file`: nodes.conf name, relative to `dir`. Default `nodes.conf`.
    pub cluster_config_file: String,
    /// `dir`: working directory for nodes.conf. Default `.`.
    pub dir: PathBuf,
    /// `cluster-node-timeout` in ms. Default 15000.
    pub cluster_node_timeout_ms: u64,
    /// `cluster-announce-ip`.
    pub cluster_announce_ip: Option<String>,
    /// `cluster-announce-hostname`.
    pub cluster_announce_hostname: Option<String>,
    /// `cluster-announce-port` (0 = not set).
    pub cluster_announce_port: u16,
    /// `cluster-announce-bus-port` (0 = not set).
    pub cluster_announce_bus_port: u16,
    /// `cluster-databases` (Valkey 9): number of databases in cluster mode. Default 1.
    pub cluster_databases: u32,
    /// `cluster-require-full-coverage`. Default yes.
    pub cluster_require_full_coverage: bool,
    /// `cluster-replica-validity-factor`. Default 10.
    pub cluster_replica_validity_factor: u32,
    /// `cluster-migration-barrier`. Default 1.
    pub cluster_migration_barrier: u32,
    /// `cluster-allow-replica-migration`. Default yes.
    pub cluster_allow_replica_migration: bool,
    /// `requirepass`: password for AUTH (`None` = no auth).
    pub requirepass: Option<String>,
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
    /// `hz`: active expiry cycles per second. Default 10.
    pub hz: u32,
    /// `maxclients`: most client connections (in cluster mode the bus connections count too,
    /// see `net::ClientGate`). Default 10000, at least 1; reduced at start to what the open
    /// files limit allows (`main::adjust_open_files_limit`).
    pub maxclients: u32,
}

impl Default for Config {
    fn default() -> Self {
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        Config {
            port: 6379,
            bind: "127.0.0.1".into(),
            cluster_enabled: true,
            cluster_port: None,
            cluster_config_file: "nodes.conf".into(),
            dir: PathBuf::from("."),
            cluster_node_timeout_ms: 15000,
            cluster_announce_ip: None,
            cluster_announce_hostname: None,
            cluster_announce_port: 0,
            cluster_announce_bus_port: 0,
            cluster_databases: 1,
            cluster_require_full_coverage: true,
            cluster_replica_validity_factor: 10,
            cluster_migration_barrier: 1,
            cluster_allow_replica_migration: true,
            requirepass: None,
            loglevel: LogLevel::Notice,
            logfile: None,
            io_threads: (cores / 2).clamp(1, 4),
            io_busy_polls: 50,
            proto_max_bulk_len: 512 * 1024 * 1024,
            client_query_buffer_limit: 1024 * 1024 * 1024,
            hz: 10,
            maxclients: 10000,
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

fn parse_bool(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err("argument must be 'yes' or 'no'".into()),
    }
}

fn parse_num<T: std::str::FromStr>(v: &str) -> Result<T, String> {
    v.parse::<T>()
        .map_err(|_| "argument couldn't be parsed into an integer".to_string())
}

fn parse_port(v: &str) -> Result<u16, String> {
    let n: u32 = parse_num(v)?;
    u16::try_from(n).map_err(|_| "port must be between 0 and 65535".to_string())
}

fn parse_memory(v: &str) -> Result<usize, String> {
    let lower = v.to_ascii_lowercase();
    let (digits, mul) = if let Some(d) = lower.strip_suffix("gb") {
        (d, 1usize << 30)
    } else if let Some(d) = lower.strip_suffix("mb") {
        (d, 1 << 20)
    } else if let Some(d) = lower.strip_suffix("kb") {
        (d, 1 << 10)
    } else if let Some(d) = lower.strip_suffix('b') {
        (d, 1)
    } else {
        (lower.as_str(), 1)
    };
    let n: usize = parse_num(digits)?;
    n.checked_mul(mul)
        .ok_or_else(|| "value is too large".to_string())
}

impl Config {
    /// Applies one `name value...` setting. Names are case-insensitive, as in redis-server.
    ///
    /// # Errors
    /// A reason text when the name is unknown, the argument count is wrong or a value is bad.
    pub fn set(&mut self, name: &str, args: &[String]) -> Result<(), String> {
        let name = name.to_ascii_lowercase();
        let one = || -> Result<&str, String> {
            match args {
                [v] => Ok(v.as_str()),
                _ => Err("wrong number of arguments".into()),
            }
        };
        match name.as_str() {
            "port" => self.port = parse_port(one()?)?,
            "bind" => {
                if args.is_empty() {
                    return Err("wrong number of arguments".into());
                }
                // redis-server accepts several addresses; we listen on the first one.
                self.bind = args[0].clone();
            }
            "cluster-enabled" => self.cluster_enabled = parse_bool(one()?)?,
            "cluster-port" => {
                let p = parse_port(one()?)?;
                self.cluster_port = if p == 0 { None } else { Some(p) };
            }
            "cluster-config-file" => self.cluster_config_file = one()?.to_string(),
            "dir" => self.dir = PathBuf::from(one()?),
            "cluster-node-timeout" => {
                let n: u64 = parse_num(one()?)?;
                if n == 0 {
                    return Err("cluster-node-timeout must be positive".into());
                }
                self.cluster_node_timeout_ms = n;
            }
            "cluster-announce-ip" => self.cluster_announce_ip = non_empty(one()?),
            "cluster-announce-hostname" => self.cluster_announce_hostname = non_empty(one()?),
            "cluster-announce-port" => self.cluster_announce_port = parse_port(one()?)?,
            "cluster-announce-bus-port" => self.cluster_announce_bus_port = parse_port(one()?)?,
            "cluster-databases" => {
                let n: u32 = parse_num(one()?)?;
                if n == 0 || n > 16 {
                    return Err("cluster-databases must be between 1 and 16".into());
                }
                self.cluster_databases = n;
            }
            "cluster-require-full-coverage" => {
                self.cluster_require_full_coverage = parse_bool(one()?)?
            }
            "cluster-replica-validity-factor" | "cluster-slave-validity-factor" => {
                self.cluster_replica_validity_factor = parse_num(one()?)?
            }
            "cluster-migration-barrier" => self.cluster_migration_barrier = parse_num(one()?)?,
            "cluster-allow-replica-migration" => {
                self.cluster_allow_replica_migration = parse_bool(one()?)?
            }
            "requirepass" => self.requirepass = non_empty(one()?),
            "loglevel" => {
                self.loglevel = match one()?.to_ascii_lowercase().as_str() {
                    "debug" => LogLevel::Debug,
                    "verbose" => LogLevel::Verbose,
                    "notice" => LogLevel::Notice,
                    "warning" => LogLevel::Warning,
                    _ => {
                        return Err("argument must be one of debug, verbose, notice, warning".into())
                    }
                }
            }
            "logfile" => self.logfile = non_empty(one()?).map(PathBuf::from),
            "io-threads" => {
                let n: usize = parse_num(one()?)?;
                if n == 0 || n > 128 {
                    return Err("io-threads must be between 1 and 128".into());
                }
                self.io_threads = n;
            }
            "io-busy-polls" => {
                let n: u32 = parse_num(one()?)?;
                if n > 100_000 {
                    return Err("io-busy-polls must be between 0 and 100000".into());
                }
                self.io_busy_polls = n;
            }
            "proto-max-bulk-len" => self.proto_max_bulk_len = parse_memory(one()?)?.max(1),
            "client-query-buffer-limit" => {
                self.client_query_buffer_limit = parse_memory(one()?)?.max(1024)
            }
            "hz" => {
                let n: u32 = parse_num(one()?)?;
                self.hz = n.clamp(1, 500);
            }
            "maxclients" => {
                let n: u32 = parse_num(one()?)?;
                if n == 0 {
                    return Err("argument must be between 1 and 4294967295 inclusive".into());
                }
                self.maxclients = n;
            }
            _ => return Err("Bad directive or wrong number of arguments".into()),
        }
        Ok(())
    }

    /// Applies a config file's text (`name value` lines, `#` comments, blank lines, values
    /// optionally in double quotes). `file` names the file in errors.
    ///
    /// # Errors
    /// The first bad line, with its number and reason.
    pub fn apply_file(&mut self, file: &str, text: &str) -> Result<(), ConfigError> {
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
            self.set(name, args).map_err(err)?;
        }
        Ok(())
    }

    /// The bus port: `cluster-port`, or port + 10000 (redis-server's `CLUSTER_PORT_INCR`).
    ///
    /// # Errors
    /// When port + 10000 does not fit in 16 bits.
    pub fn bus_port(&self) -> Result<u16, String> {
        match self.cluster_port {
            Some(p) => Ok(p),
            None => self
                .port
                .checked_add(10000)
                .ok_or_else(|| format!("port {} + 10000 is not a valid bus port", self.port)),
        }
    }

    /// Full path of the nodes.conf file.
    pub fn nodes_conf_path(&self) -> PathBuf {
        self.dir.join(&self.cluster_config_file)
    }
}

fn non_empty(v: &str) -> Option<String> {
    if v.is_empty() {
        None
    } else {
        Some(v.to_string())
    }
}

/// Splits a config line into words; double-quoted words may hold spaces.
fn split_words(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let Some(&c) = chars.peek() else { break };
        let mut word = String::new();
        if c == '"' || c == '\'' {
            chars.next();
            let mut closed = false;
            for ch in chars.by_ref() {
                if ch == c {
                    closed = true;
                    break;
                }
                word.push(ch);
            }
            if !closed {
                return Err("unbalanced quotes in configuration line".into());
            }
        } else {
            while let Some(&ch) = chars.peek() {
                if ch.is_whitespace() {
                    break;
                }
                word.push(ch);
                chars.next();
            }
        }
        out.push(word);
    }
    Ok(out)
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
Options use redis-server's names, e.g.:\n  --port 7000 --bind 127.0.0.1 --cluster-enabled yes \
--cluster-port 17000\n  --cluster-config-file nodes-7000.conf --dir /tmp/n1 --cluster-node-timeout 5000\n  \
--cluster-announce-ip/-hostname/-port/-bus-port V --cluster-databases N\n  \
--cluster-require-full-coverage yes|no --cluster-replica-validity-factor N\n  \
--cluster-migration-barrier N --cluster-allow-replica-migration yes|no\n  \
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
            config.apply_file(first, &text)?;
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
    let mut base_port = 23100;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--base-port" => {
                let v = args.get(i + 1).ok_or_else(|| ConfigError {
                    at: "argument --base-port".into(),
                    text: "--base-port".into(),
                    reason: "missing value".into(),
                })?;
                base_port = parse_port(v)
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
    fn defaults_follow_redis_conf() {
        let c = server(parse_args(&[], no_file).unwrap());
        assert_eq!(c.port, 6379);
        assert_eq!(c.bind, "127.0.0.1");
        assert!(c.cluster_enabled);
        assert_eq!(c.bus_port().unwrap(), 16379);
        assert_eq!(c.cluster_node_timeout_ms, 15000);
        assert_eq!(c.cluster_replica_validity_factor, 10);
        assert_eq!(c.cluster_migration_barrier, 1);
        assert!(c.cluster_require_full_coverage);
        assert!(c.cluster_allow_replica_migration);
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
        assert_eq!(c.cluster_node_timeout_ms, 2000);
        assert!(!c.cluster_enabled);
        assert_eq!(c.loglevel, LogLevel::Warning);
        let c = server(parse_args(&args("--port 7000 --cluster-port 9999"), no_file).unwrap());
        assert_eq!(c.bus_port().unwrap(), 9999);
        assert_eq!(c.io_busy_polls, 50, "default");
        let c = server(parse_args(&args("--io-busy-polls 0"), no_file).unwrap());
        assert_eq!(c.io_busy_polls, 0);
        let e = parse_args(&args("--io-busy-polls 100001"), no_file).unwrap_err();
        assert!(e.reason.contains("io-busy-polls"), "{e}");
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
        assert!(e.reason.contains("port"), "{e}");
        let e = parse_args(&args("--cluster-enabled maybe"), no_file).unwrap_err();
        assert!(e.reason.contains("yes"), "{e}");
        let e = parse_args(&args("--no-such-option 1"), no_file).unwrap_err();
        assert!(e.reason.contains("Bad directive"), "{e}");
        let e = parse_args(&args("--port"), no_file).unwrap_err();
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
            Invocation::Demo { base_port: 23100 }
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
    fn memory_units() {
        assert_eq!(parse_memory("1kb").unwrap(), 1024);
        assert_eq!(parse_memory("2mb").unwrap(), 2 << 20);
        assert_eq!(parse_memory("100").unwrap(), 100);
        assert!(parse_memory("lots").is_err());
    }
}

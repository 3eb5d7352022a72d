//! `ferrocluster-server`: the reference host for ferrocluster.
//!
//! A thin process that wires the Sans-IO `ClusterNode` (crates/node) and `KvStore`
//! (crates/kvstore) to TCP sockets, threads and files: RESP2/RESP3 on the data port, the
//! cluster bus on the bus port, nodes.conf written atomically, replication inside a shard.
//! All cluster logic stays in the crates; this binary only moves bytes, time and files.
//!
//! `ferrocluster-server [configfile] [--name value ...]` runs one node (redis-server's flag
//! names); `ferrocluster-server demo` runs a six-node cluster demo.
// This is a host: it reads clocks, opens sockets and spawns threads, which the workspace's
// clippy.toml forbids in the Sans-IO engine crates.
#![allow(clippy::disallowed_methods)]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod acl;
mod admin;
mod aof;
mod blocking;
mod client;
mod clients;
mod cluster;
mod cmd;
mod commands;
mod config;
mod demo;
mod evict;
mod fsio;
mod latency;
mod lazyfree;
mod legacy;
mod logline;
mod metrics;
mod migrate;
mod monitor;
mod net;
mod notify;
mod persist;
mod rates;
mod readiness;
mod redact;
mod repl;
mod resp;
mod rewrite;
mod server;
mod slowlog;
mod snapshot;
mod table;
mod tracking;
mod types;
mod value;

use config::{Invocation, USAGE};
use std::process::ExitCode;
use std::sync::Arc;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let inv = match config::parse_args(&args, |p| std::fs::read_to_string(p)) {
        Ok(inv) => inv,
        Err(e) => {
            say(&format!("ferrocluster-server: {e}\n{USAGE}"));
            return ExitCode::from(1);
        }
    };
    match inv {
        Invocation::Version => {
            println!(
                "ferrocluster-server v={} (redis compat {})",
                env!("CARGO_PKG_VERSION"),
                admin::COMPAT_VERSION
            );
            ExitCode::SUCCESS
        }
        Invocation::Help => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Invocation::Demo { base_port } => demo::run(base_port),
        Invocation::Server(config)
            if config.daemonize && std::env::var_os(DAEMON_CHILD).is_none() =>
        {
            daemonize(&args)
        }
        Invocation::Server(config) => match run_server(*config) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                say(&format!("ferrocluster-server: {e}"));
                ExitCode::from(1)
            }
        },
    }
}

/// Set in the environment of the process `daemonize` starts (which then runs the server).
const DAEMON_CHILD: &str = "FERROCLUSTER_DAEMONIZED";

/// `daemonize yes` (Valkey `daemonize`: fork, the parent exits 0, the child `setsid`s and
/// points its standard streams at /dev/null). This crate forbids unsafe code, so `fork` is
/// not at hand: the same program is started again with the same arguments (and
/// [`DAEMON_CHILD`] set), in a process group of its own so the terminal's signals do not
/// reach it, standard streams on /dev/null; this process exits 0 once it started. The server
/// (the new process) writes the pid file, `/var/run/valkey.pid` when none is configured.
fn daemonize(args: &[String]) -> ExitCode {
    use std::os::unix::process::CommandExt as _;
    use std::process::{Command, Stdio};
    let started = std::env::current_exe().and_then(|exe| {
        Command::new(exe)
            .args(args)
            .env(DAEMON_CHILD, "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
    });
    match started {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            say(&format!("ferrocluster-server: can't daemonize: {e}"));
            ExitCode::from(1)
        }
    }
}

/// Valkey `serverCron` with `dynamic-hz yes`: the configured `hz` doubled while there are
/// more than 200 clients per cycle (`MAX_CLIENTS_PER_CLOCK_TICK`), at most 500
/// (`CONFIG_MAX_HZ`).
fn dynamic_hz(configured: u32, clients: u64) -> u32 {
    let mut hz = configured.max(1);
    while clients / u64::from(hz) > 200 {
        hz *= 2;
        if hz > 500 {
            return 500;
        }
    }
    hz
}

/// Writes a line to stderr, ignoring a failed write (`eprintln!` would panic, and the exit code
/// would be 101 instead of 1, on a full disk).
fn say(text: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

fn init_logging(config: &config::Config) -> Result<(), String> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(config.loglevel.filter()));
    // A log line that cannot be written (a full disk) is dropped: tracing's own report of the
    // failure goes through `eprintln!`, which panics when stderr fails too, and would end the
    // thread that logged (or the process, from the main thread).
    // redis-server's line format (src/logline.rs), plain text wherever it goes.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .log_internal_errors(false)
        .event_format(logline::RedisLines);
    match &config.logfile {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("can't open the log file {}: {e}", path.display()))?;
            builder.with_writer(std::sync::Mutex::new(file)).init();
        }
        None => builder.with_writer(std::io::stderr).init(),
    }
    Ok(())
}

fn run_server(mut config: config::Config) -> Result<(), String> {
    init_logging(&config)?;
    if config.disable_thp {
        // Valkey `disable-thp yes`: transparent huge pages off for the whole process (the
        // flag is the process's, inherited by every thread started after it).
        if let Err(e) = rustix::thread::disable_transparent_huge_pages(true) {
            tracing::warn!("Failed to disable transparent huge pages: {e}");
        }
    }
    if config.daemonize && config.pidfile.is_none() {
        config.pidfile = Some("/var/run/valkey.pid".into());
    }
    types::set_limits(config.limits);
    config.maxclients = net::adjust_open_files_limit(config.maxclients)?;
    // Redis refuses to start when it cannot chdir to `dir`; we also need to write there.
    ferrocluster_host::nodesconf::check_dir(&config.dir).map_err(|e| e.to_string())?;
    let cluster = if config.cluster_enabled {
        let seed = server::unix_ms() ^ (u64::from(std::process::id()) << 40);
        Some(cluster::build_node(&config, seed)?)
    } else {
        None
    };
    if let Some(side) = &cluster {
        side.conf
            .set_save_behavior(config.cluster_config_save_behavior);
    }
    let shared = Arc::new(server::Shared::new(config, cluster)?);
    let _ = shared.me.set(Arc::downgrade(&shared));
    if let Some(p) = &shared.config.pidfile {
        // Redis logs a pidfile it cannot write and goes on.
        if let Err(e) = std::fs::write(p, format!("{}\n", std::process::id())) {
            tracing::warn!("Failed to write PID file {}: {e}", p.display());
        }
    }
    // The data set on disk first: no client sees the keyspace before it is loaded.
    // With `appendonly yes` the AOF is loaded, not the RDB (Redis `loadDataFromDisk`).
    if shared.config.aof.enabled {
        aof::load_at_start(&shared, shared.config.aof.load_truncated)?;
        aof::open_at_start(&shared)?;
    } else {
        persist::load_at_start(&shared)?;
    }
    aof::spawn_thread(Arc::clone(&shared))
        .map_err(|e| format!("can't start the AOF thread: {e}"))?;
    let io = net::spawn_io_threads(&shared).map_err(|e| format!("can't start I/O threads: {e}"))?;
    let _ = shared.io.set(io.clone());
    if shared.config.cluster_enabled {
        cluster::spawn_bus_thread(&shared)?;
    }
    spawn_timer(Arc::clone(&shared)).map_err(|e| format!("can't start the timer thread: {e}"))?;
    spawn_signal_thread(Arc::clone(&shared)).map_err(|e| format!("can't handle signals: {e}"))?;
    metrics::spawn(&shared)?;
    // The data port opens last, so a client that can connect finds the bus up and the
    // node running (clients and tools probe readiness by connecting).
    // `port 0`: no plain TCP client port (Valkey); `tls-port`: TLS beside it.
    let mut listeners = Vec::new();
    if shared.config.port != 0 {
        for l in net::listen_all(&shared.config.bind, shared.config.port)? {
            listeners.push((l, false));
        }
    }
    let tls_port = shared.config.cluster.tls_port;
    if tls_port != 0 {
        for l in net::listen_all(&shared.config.bind, tls_port)? {
            listeners.push((l, true));
        }
    }
    tracing::info!(
        port = shared.config.port,
        tls_port,
        io_threads = shared.config.io_threads,
        cluster = shared.config.cluster_enabled,
        "ready to accept connections"
    );
    // One accept thread per address; the last one is this thread.
    let (last, last_tls) = listeners.pop().ok_or("no listening socket")?;
    for (i, (l, tls)) in listeners.into_iter().enumerate() {
        let (shared, io) = (Arc::clone(&shared), io.clone());
        std::thread::Builder::new()
            .name(format!("accept-{i}"))
            .spawn(move || net::accept_loop(shared, l, io, tls))
            .map_err(|e| format!("can't start an accept thread: {e}"))?;
    }
    net::accept_loop(Arc::clone(&shared), last, io, last_tls);
    Ok(())
}

/// SIGTERM and SIGINT end the server with redis-server 7.0's lines (`sigShutdownHandler`,
/// `prepareForShutdown`): the data set is saved first when save points are set, and a save
/// that fails keeps the server running, as Redis does. nodes.conf needs nothing: it is
/// written before every reply that depends on it.
fn spawn_signal_thread(shared: Arc<server::Shared>) -> std::io::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT])?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                let name = if sig == SIGINT { "SIGINT" } else { "SIGTERM" };
                tracing::warn!("Received {name} scheduling shutdown...");
                tracing::warn!("User requested shutdown...");
                let mut st = shared.state.lock();
                if persist::save_for_shutdown(&shared, &mut st, None).is_ok() {
                    persist::exit_now(&shared);
                }
                tracing::warn!("Error trying to save the DB, can't exit.");
            }
        })?;
    Ok(())
}

/// Active expiry (`hz` times a second) and WAIT deadlines (every 10 ms).
fn spawn_timer(shared: Arc<server::Shared>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("timer".into())
        .spawn(move || {
            let mut last_expire = 0;
            let mut last_sample = 0;
            loop {
                std::thread::sleep(std::time::Duration::from_millis(10));
                let now = server::unix_ms();
                let mut st = shared.state.lock();
                repl::tick(&shared, &mut st, now);
                cluster::check_setslot_waits(&shared, &mut st, now);
                blocking::expire(&shared, &mut st, now);
                blocking::check_cluster(&shared, &mut st);
                legacy::tick(&mut st, now);
                if now.saturating_sub(last_sample) >= 100 {
                    last_sample = now;
                    let (_, _, net_in, net_out) = shared.stats.snapshot();
                    let commands = st.commands_processed;
                    st.rates.sample(now, commands, net_in, net_out);
                    persist::cron(&shared, &mut st, now);
                    let s = &mut *st;
                    s.evict.tick(&mut s.kv, now);
                }
                let hz = if shared.config.dynamic_hz {
                    dynamic_hz(shared.config.hz, shared.stats.snapshot().0)
                } else {
                    shared.config.hz.max(1)
                };
                if now.saturating_sub(last_expire) >= 1000 / u64::from(hz) && !st.expiry_paused(now)
                {
                    last_expire = now;
                    // Like Redis's active cycle: repeat while a quarter or more of the examined
                    // keys were expired, at most 25 ms per tick, releasing the lock between steps.
                    let started = std::time::Instant::now();
                    loop {
                        // Counted in `expired_keys` by `propagate_expired`.
                        let n = st.kv.expire_cycle(now, 2000);
                        repl::propagate_expired(&mut st);
                        notify::publish(&shared, &mut st);
                        st.tracking.limit();
                        st.tracking.send(&shared);
                        if n < 500 || started.elapsed() > std::time::Duration::from_millis(25) {
                            let ms = started.elapsed().as_millis() as u64;
                            st.latency.add_if_needed("expire-cycle", ms, now);
                            break;
                        }
                        drop(st);
                        st = shared.state.lock();
                    }
                }
            }
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    /// Valkey `serverCron`'s doubling: 10 hz with up to 2000 clients, 20 with 2001, capped at
    /// 500.
    #[test]
    fn dynamic_hz_doubles_with_clients() {
        assert_eq!(super::dynamic_hz(10, 0), 10);
        assert_eq!(super::dynamic_hz(10, 2000 + 9), 10);
        assert_eq!(super::dynamic_hz(10, 2010), 20);
        assert_eq!(super::dynamic_hz(10, 1_000_000), 500);
    }
}

//! `sentinel-resolve`: resolve a Sentinel-managed service to its primary (or replicas),
//! and with `--watch` keep following it. A std host for `ferrocluster-sentinel`.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
// A host owns the clock and the threads (clippy.toml bans them in Sans-IO crates only).
#![allow(clippy::disallowed_methods)]

mod clock;
mod net;
mod resp;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use crossbeam_channel::RecvTimeoutError;
use ferrocluster_sentinel::{
    Addr, Config, ConnPurpose, Output, ReconnectCause, ResolveError, Resolver, Want,
};

use net::{Event, Key, Net};

const AFTER_HELP: &str = "\
Output:
  Without --watch: the primary's host:port on stdout (with --replicas: one replica per
  line), then exit.
  With --watch: one line per change on stdout, `<RFC 3339 UTC time> <primary|replicas>
  <addr>[,<addr>...] via <sentinel>`; errors and pool closes go to stderr with a time.
  Runs until interrupted.

Exit status (without --watch):
  0  resolved
  2  invalid arguments
  3  no Sentinel could be reached
  4  no Sentinel knows the service
  5  Sentinels answered with errors only
  6  Sentinel named an address but its ROLE never confirmed it in time";

/// Resolve a Sentinel-managed service to its primary (or its replicas), following the
/// Redis Sentinel client spec: ask the Sentinels in order, then confirm with ROLE.
#[derive(Debug, Parser)]
#[command(name = "sentinel-resolve", version, after_help = AFTER_HELP)]
struct Args {
    /// Service name, as in `sentinel monitor <name> ...`.
    service: String,
    /// A Sentinel address HOST:PORT; repeat for several (tried in the order given).
    #[arg(
        short = 's',
        long = "sentinel",
        value_name = "HOST:PORT",
        required = true
    )]
    sentinels: Vec<Addr>,
    /// Resolve the replicas instead of the primary.
    #[arg(long)]
    replicas: bool,
    /// Keep following the service and print each change with a timestamp.
    #[arg(long)]
    watch: bool,
    /// Connect-and-answer budget per Sentinel, in ms.
    #[arg(long, value_name = "MS", default_value_t = 300)]
    sentinel_timeout_ms: u64,
    /// Connect-and-answer budget of the ROLE check, in ms.
    #[arg(long, value_name = "MS", default_value_t = 300)]
    node_timeout_ms: u64,
    /// Wait before asking again when ROLE disagrees with Sentinel, in ms.
    #[arg(long, value_name = "MS", default_value_t = 250)]
    retry_delay_ms: u64,
    /// Give up one resolution after this long, in ms.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    resolve_timeout_ms: u64,
    /// With --watch: re-verify from the first step this often, in ms.
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    recheck_ms: u64,
    /// Learn more Sentinels with `SENTINEL sentinels <name>` (kept in memory).
    #[arg(long)]
    refresh_sentinels: bool,
    /// With --watch: do not subscribe to Sentinel's +switch-master events.
    #[arg(long)]
    no_subscribe: bool,
    /// With --watch: do not hold a connection to the primary (whose loss triggers a
    /// re-verification, as a client's connection pool would).
    #[arg(long)]
    no_data_conn: bool,
}

fn exit_code(e: &ResolveError) -> u8 {
    match e {
        ResolveError::NoSentinelReachable { .. } => 3,
        ResolveError::UnknownService { .. } => 4,
        ResolveError::SentinelErrors { .. } => 5,
        _ => 6,
    }
}

/// The tool's one data connection to the resolved primary (a minimal pool).
struct DataConn {
    key: Key,
    addr: Addr,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let want = if args.replicas {
        Want::Replicas
    } else {
        Want::Primary
    };
    let mut cfg = Config::new(args.service.clone(), want, args.sentinels.clone());
    cfg.sentinel_timeout_ms = args.sentinel_timeout_ms;
    cfg.node_timeout_ms = args.node_timeout_ms;
    cfg.retry_delay_ms = args.retry_delay_ms;
    cfg.resolve_timeout_ms = args.resolve_timeout_ms;
    cfg.refresh_sentinels = args.refresh_sentinels;
    if args.watch {
        cfg.recheck_interval_ms = Some(args.recheck_ms.max(1));
        cfg.follow_switch_master = !args.no_subscribe;
    }
    let start = Instant::now();
    let now_ms = || start.elapsed().as_millis() as u64;
    let mut r = match Resolver::new(cfg, now_ms()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("sentinel-resolve: {e}");
            return ExitCode::from(2);
        }
    };
    let hold_data = args.watch && !args.no_data_conn && want == Want::Primary;
    let mut net = Net::new();
    let mut data: Option<DataConn> = None;
    let mut next_data = 0u64;
    loop {
        while let Some(o) = r.poll_output() {
            match o {
                Output::Connect {
                    conn,
                    addr,
                    purpose,
                } => {
                    let t = match purpose {
                        ConnPurpose::RoleCheck => args.node_timeout_ms,
                        _ => args.sentinel_timeout_ms,
                    };
                    net.connect(Key::Engine(conn), addr, Duration::from_millis(t));
                }
                Output::Send { conn, argv } => {
                    if net.send(Key::Engine(conn), &argv).is_err() {
                        net.close(Key::Engine(conn));
                        let _ = r.handle_closed(conn, now_ms());
                    }
                }
                Output::Close { conn } => net.close(Key::Engine(conn)),
                Output::ClosePool { addr } => {
                    if args.watch {
                        eprintln!("{} close-pool {addr}", clock::timestamp());
                    }
                    if let Some(d) = data.take_if(|d| d.addr == addr) {
                        net.close(d.key);
                    }
                }
                Output::Resolved {
                    resolution,
                    changed,
                } => {
                    let list: Vec<String> =
                        resolution.addrs.iter().map(ToString::to_string).collect();
                    if !args.watch {
                        println!("{}", list.join("\n"));
                        return ExitCode::SUCCESS;
                    }
                    if changed {
                        let what = match want {
                            Want::Primary => "primary",
                            Want::Replicas => "replicas",
                        };
                        println!(
                            "{} {what} {} via {}",
                            clock::timestamp(),
                            list.join(","),
                            resolution.via
                        );
                    }
                    if hold_data && data.is_none() {
                        next_data += 1;
                        let key = Key::Data(next_data);
                        let addr = resolution.addrs[0].clone();
                        net.connect(key, addr.clone(), Duration::from_millis(1000));
                        data = Some(DataConn { key, addr });
                    }
                }
                Output::Error(e) => {
                    if !args.watch {
                        eprintln!("sentinel-resolve: {e}");
                        return ExitCode::from(exit_code(&e));
                    }
                    eprintln!("{} error {e}", clock::timestamp());
                }
            }
        }
        let wait = r
            .poll_timeout()
            .map(|t| Duration::from_millis(t.saturating_sub(now_ms())))
            .unwrap_or(Duration::from_secs(3600));
        match net.events().recv_timeout(wait) {
            Ok(ev) => dispatch(ev, &mut r, &mut net, &mut data, now_ms()),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => unreachable!("Net holds a sender"),
        }
        r.handle_timeout(now_ms());
    }
}

fn dispatch(ev: Event, r: &mut Resolver, net: &mut Net, data: &mut Option<DataConn>, now: u64) {
    match ev {
        Event::Connected(key @ Key::Engine(conn), stream) => {
            net.add(key, stream);
            if r.handle_connected(conn, now).is_err() {
                // Closed by the resolver while connecting: drop it.
                net.close(key);
            }
        }
        Event::ConnectFailed(Key::Engine(conn), _) => {
            let _ = r.handle_connect_failed(conn, now);
        }
        Event::Reply(Key::Engine(conn), v) => {
            let _ = r.handle_reply(conn, v, now);
        }
        Event::Closed(key @ Key::Engine(conn), _) => {
            net.close(key);
            let _ = r.handle_closed(conn, now);
        }
        Event::Connected(key @ Key::Data(_), stream) => {
            if data.as_ref().is_some_and(|d| d.key == key) {
                net.add(key, stream);
            } else {
                let _ = stream.shutdown(std::net::Shutdown::Both);
            }
        }
        Event::ConnectFailed(key @ Key::Data(_), why) | Event::Closed(key @ Key::Data(_), why) => {
            if data.as_ref().is_some_and(|d| d.key == key) {
                *data = None;
                net.close(key);
                eprintln!(
                    "{} data connection lost ({why}): re-verifying",
                    clock::timestamp()
                );
                r.handle_reconnect(ReconnectCause::ClosedByServer, now);
            }
        }
        Event::Reply(Key::Data(_), _) => {}
    }
}

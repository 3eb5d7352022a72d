//! Connection and server commands: HELLO, AUTH, CLIENT, COMMAND, INFO, CONFIG GET.

use crate::client::{Args, ClientCtx};
use crate::commands::{parse_i64, SYNTAX};
use crate::resp::Out;
use crate::server::{Shared, State};
use crate::table;

/// The `redis_version` we report: Valkey 8's compatibility value (so clients enable 7.2
/// features such as CLIENT SETINFO).
pub const COMPAT_VERSION: &str = "7.2.4";

fn eq(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

/// `AUTH [username] password` (Valkey `authCommand`: the default user without a password
/// refuses the one-argument form).
pub fn auth(state: &mut State, client: &mut ClientCtx, args: &Args<'_>, out: &mut Out, now: u64) {
    if args.len() > 3 {
        out.error(SYNTAX);
        return;
    }
    if args.len() == 2 && state.acl.users.get(b"default").is_some_and(|u| u.nopass()) {
        out.error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
        return;
    }
    let (user, pass): (&[u8], &[u8]) = if args.len() == 3 {
        (args.get(1), args.get(2))
    } else {
        (b"default", args.get(1))
    };
    match crate::acl::authenticate(state, client, user, pass, args.get(0), out, now) {
        Ok(()) => out.ok(),
        Err(e) => out.error(e),
    }
}

/// `HELLO [protover [AUTH username password] [SETNAME clientname]]`
pub fn hello(
    shared: &Shared,
    state: &mut State,
    client: &mut ClientCtx,
    args: &Args<'_>,
    out: &mut Out,
    now: u64,
) {
    let mut proto = out.proto;
    if let Some(v) = args.opt(1) {
        match parse_i64(v) {
            None => {
                out.error("ERR Protocol version is not an integer or out of range");
                return;
            }
            Some(2) => proto = 2,
            Some(3) => proto = 3,
            Some(_) => {
                out.error("NOPROTO unsupported protocol version");
                return;
            }
        }
    }
    let mut i = 2;
    let mut setname = None;
    while i < args.len() {
        let a = args.get(i);
        if eq(a, "auth") && i + 2 < args.len() {
            let (user, pass, cmd) = (args.get(i + 1), args.get(i + 2), args.get(0));
            if let Err(e) = crate::acl::authenticate(state, client, user, pass, cmd, out, now) {
                out.error(e);
                return;
            }
            i += 3;
        } else if eq(a, "setname") && i + 1 < args.len() {
            setname = Some(args.get(i + 1).to_vec());
            i += 2;
        } else {
            out.error(&format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(a)
            ));
            return;
        }
    }
    if !client.authed {
        out.error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
        return;
    }
    if let Some(n) = setname {
        client.name = Some(n);
    }
    out.proto = proto;
    out.map(7);
    out.bulk(b"server");
    out.bulk(b"redis");
    out.bulk(b"version");
    out.bulk(COMPAT_VERSION.as_bytes());
    out.bulk(b"proto");
    out.int(i64::from(proto));
    out.bulk(b"id");
    out.int(client.id as i64);
    out.bulk(b"mode");
    out.bulk(if shared.config.cluster_enabled {
        b"cluster"
    } else {
        b"standalone"
    });
    out.bulk(b"role");
    out.bulk(if state.repl.is_replica() {
        b"replica"
    } else {
        b"master"
    });
    out.bulk(b"modules");
    out.array(0);
}

/// CLIENT ID | SETNAME | GETNAME | SETINFO | INFO | LIST | NO-EVICT | NO-TOUCH
pub fn client(
    shared: &Shared,
    users: &ferrocluster_acl::Users,
    client: &mut ClientCtx,
    args: &Args<'_>,
    out: &mut Out,
    now: u64,
) {
    let sub = args.get(1);
    let arity_err = |out: &mut Out, name: &str| {
        out.error(&format!(
            "ERR wrong number of arguments for 'client|{name}' command"
        ))
    };
    if eq(sub, "id") {
        if args.len() != 2 {
            return arity_err(out, "id");
        }
        out.int(client.id as i64);
    } else if eq(sub, "reply") {
        // Valkey `clientCommand` "reply": ON answers OK; OFF and SKIP answer nothing (their
        // own reply is the first one not sent).
        use crate::client::ReplyMode;
        if args.len() != 3 {
            return arity_err(out, "reply");
        }
        let mode = args.get(2);
        if eq(mode, "on") {
            client.reply = ReplyMode::On;
            out.ok();
        } else if eq(mode, "off") {
            client.reply = ReplyMode::Off;
        } else if eq(mode, "skip") {
            if client.reply != ReplyMode::Off {
                client.reply = ReplyMode::SkipNext;
            }
        } else {
            out.error("ERR syntax error");
        }
    } else if eq(sub, "setname") {
        if args.len() != 3 {
            return arity_err(out, "setname");
        }
        let name = args.get(2);
        if name.iter().any(|&b| b <= b' ' || b > b'~') {
            out.error("ERR Client names cannot contain spaces, newlines or special characters.");
            return;
        }
        client.name = if name.is_empty() {
            None
        } else {
            Some(name.to_vec())
        };
        out.ok();
    } else if eq(sub, "getname") {
        if args.len() != 2 {
            return arity_err(out, "getname");
        }
        match &client.name {
            Some(n) => out.bulk(n),
            None => out.null(),
        }
    } else if eq(sub, "setinfo") {
        if args.len() != 4 {
            return arity_err(out, "setinfo");
        }
        let (attr, val) = (args.get(2), args.get(3));
        if val.iter().any(|b| !(b'!'..=b'~').contains(b)) {
            out.error(&format!(
                "ERR {} cannot contain spaces, newlines or special characters.",
                String::from_utf8_lossy(attr).to_ascii_lowercase()
            ));
            return;
        }
        if eq(attr, "lib-name") {
            client.lib_name = Some(val.to_vec());
        } else if eq(attr, "lib-ver") {
            client.lib_ver = Some(val.to_vec());
        } else {
            out.error(&format!(
                "ERR Unrecognized option '{}'",
                String::from_utf8_lossy(attr)
            ));
            return;
        }
        out.ok();
    } else if eq(sub, "info") {
        let mut line = client.info_line(now, out.proto);
        line.push('\n');
        out.verbatim(line.as_bytes());
    } else if eq(sub, "list") {
        crate::clients::list(shared, users, client, args, out);
    } else if eq(sub, "kill") {
        if args.len() < 3 {
            return arity_err(out, "kill");
        }
        crate::clients::kill(shared, users, client, args, out);
    } else if eq(sub, "help") {
        help(
            out,
            "CLIENT",
            &[
                "GETNAME",
                "    Return the name of the current connection.",
                "ID",
                "    Return the ID of the current connection.",
                "INFO",
                "    Return information about the current client connection.",
                "KILL <ip:port>",
                "    Kill connection made from <ip:port>.",
                "KILL <option> <value> [<option> <value> [...]]",
                "    Kill connections. Options are:",
                "    * ADDR (<ip:port>|<unixsocket>:0)",
                "      Kill connections made from the specified address",
                "    * LADDR (<ip:port>|<unixsocket>:0)",
                "      Kill connections made to specified local address",
                "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
                "      Kill connections by type.",
                "    * USER <username>",
                "      Kill connections authenticated by <username>.",
                "    * SKIPME (YES|NO)",
                "      Skip killing current connection (default: yes).",
                "    * ID <client-id>",
                "      Kill connections by client id.",
                "    * MAXAGE <maxage>",
                "      Kill connections older than the specified age.",
                "LIST [options ...]",
                "    Return information about client connections. Options:",
                "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
                "      Return clients of specified type.",
                "    * ID <client-id> [<client-id> ...]",
                "      Return clients of specified IDs.",
                "PAUSE <timeout> [WRITE|ALL]",
                "    Suspend all, or just write, clients for <timeout> milliseconds.",
                "REPLY (ON|OFF|SKIP)",
                "    Control the replies sent to the current connection.",
                "UNPAUSE",
                "    Stop the current client pause, resuming traffic.",
                "NO-EVICT (ON|OFF)",
                "    Accepted; this server does not evict clients.",
                "NO-TOUCH (ON|OFF)",
                "    Accepted; this server keeps no access times.",
                "SETINFO <option> <value>",
                "    Set client meta attr. Options are: LIB-NAME, LIB-VER.",
                "SETNAME <name>",
                "    Assign the name <name> to the current connection.",
                "UNBLOCK <clientid> [TIMEOUT|ERROR]",
                "    Unblock the specified blocked client.",
                "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
                "         [OPTIN] [OPTOUT] [NOLOOP]",
                "    Control server assisted client side caching.",
                "TRACKINGINFO",
                "    Report tracking status for the current connection.",
                "CACHING (YES|NO)",
                "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
                "GETREDIR",
                "    Return the client ID we are redirecting to when tracking is enabled.",
            ],
        );
    } else if eq(sub, "no-evict") || eq(sub, "no-touch") {
        match args.opt(2) {
            Some(v) if eq(v, "on") || eq(v, "off") => out.ok(),
            _ => out.error(SYNTAX),
        }
    } else {
        let _ = shared;
        out.error(&format!(
            "ERR unknown subcommand '{}'. Try CLIENT HELP.",
            String::from_utf8_lossy(sub)
        ));
    }
}

impl ferrocluster_command::ReplyWriter for Out {
    fn array(&mut self, n: usize) {
        Out::array(self, n);
    }
    fn set(&mut self, n: usize) {
        Out::set(self, n);
    }
    fn map(&mut self, n: usize) {
        Out::map(self, n);
    }
    fn bulk(&mut self, b: &[u8]) {
        Out::bulk(self, b);
    }
    fn simple(&mut self, s: &str) {
        Out::simple(self, s);
    }
    fn int(&mut self, n: i64) {
        Out::int(self, n);
    }
}

/// A served command or subcommand by full name (`get`, `config|get`) with the subcommands
/// it lists.
fn served(
    name: &[u8],
) -> Option<(
    &'static ferrocluster_command::CommandSpec,
    Vec<&'static ferrocluster_command::CommandSpec>,
)> {
    let t = table::table();
    match name.iter().position(|&b| b == b'|') {
        None => t.get(name).map(|r| (r.spec, r.subcommands().collect())),
        Some(_) => t.get_full(name).map(|(s, _)| (s, Vec::new())),
    }
}

fn write_info(out: &mut Out, name: &[u8]) {
    match served(name) {
        Some((spec, subs)) => spec.write_info(out, subs.into_iter()),
        // Redis 7.0 and Valkey 9.1: `$-1` (a null bulk) in RESP2.
        None => out.null(),
    }
}

/// `COMMAND [COUNT | INFO [name ...] | DOCS [name ...] | LIST [FILTERBY ...] | GETKEYS |
/// GETKEYSANDFLAGS | HELP]`: every reply from the command table (Valkey `commandCommand`
/// and its subcommands), listing the commands and subcommands this server serves.
pub fn command(args: &Args<'_>, out: &mut Out) {
    let t = table::table();
    let Some(sub) = args.opt(1) else {
        out.array(t.len());
        for r in t.rows() {
            r.spec.write_info(out, r.subcommands());
        }
        return;
    };
    if eq(sub, "count") {
        out.int(t.len() as i64);
    } else if eq(sub, "info") {
        if args.len() == 2 {
            out.array(t.len());
            for r in t.rows() {
                r.spec.write_info(out, r.subcommands());
            }
            return;
        }
        out.array(args.len() - 2);
        for i in 2..args.len() {
            write_info(out, args.get(i));
        }
    } else if eq(sub, "docs") {
        let found: Vec<_> = if args.len() == 2 {
            t.rows()
                .iter()
                .map(|r| (r.spec, r.subcommands().collect::<Vec<_>>()))
                .collect()
        } else {
            (2..args.len())
                .filter_map(|i| served(args.get(i)))
                .collect()
        };
        out.map(found.len());
        for (spec, subs) in found {
            out.bulk(spec.name.as_bytes());
            spec.write_docs(out, subs.into_iter());
        }
    } else if eq(sub, "list") {
        command_list(args, out);
    } else if eq(sub, "help") {
        help(
            out,
            "COMMAND",
            &[
                "(no subcommand)",
                "    Return details about all commands.",
                "COUNT",
                "    Return the total number of commands in this server.",
                "LIST",
                "    Return a list of all commands in this server.",
                "INFO [<command-name> ...]",
                "    Return details about multiple commands.",
                "    If no command names are given, documentation details for all",
                "    commands are returned.",
                "DOCS [<command-name> ...]",
                "    Return documentation details about multiple commands.",
                "    If no command names are given, documentation details for all",
                "    commands are returned.",
                "GETKEYS <full-command>",
                "    Return the keys from a full command.",
                "GETKEYSANDFLAGS <full-command>",
                "    Return the keys and the access flags from a full command.",
            ],
        );
    } else if eq(sub, "getkeys") || eq(sub, "getkeysandflags") {
        getkeys(args, out, eq(sub, "getkeysandflags"));
    } else {
        out.error(&format!(
            "ERR unknown subcommand '{}'. Try COMMAND HELP.",
            String::from_utf8_lossy(sub)
        ));
    }
}

/// `COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]`: every command
/// and subcommand name (no module is loaded here).
fn command_list(args: &Args<'_>, out: &mut Out) {
    let t = table::table();
    let mut names: Vec<&'static ferrocluster_command::CommandSpec> = Vec::new();
    for r in t.rows() {
        names.push(r.spec);
        names.extend(r.subcommands());
    }
    if args.len() > 2 {
        if args.len() != 5 || !eq(args.get(2), "filterby") {
            out.error(SYNTAX);
            return;
        }
        let (kind, v) = (args.get(3), args.get(4));
        if eq(kind, "module") {
            names.clear();
        } else if eq(kind, "aclcat") {
            let cat = format!("@{}", String::from_utf8_lossy(v).to_ascii_lowercase());
            match ferrocluster_command::AclCategories::from_name(&cat) {
                Some(c) => names.retain(|s| s.acl.contains(c)),
                None => names.clear(),
            }
        } else if eq(kind, "pattern") {
            names.retain(|s| ferrocluster_kvstore::glob_match(v, s.name.as_bytes()));
        } else {
            out.error(SYNTAX);
            return;
        }
    }
    out.array(names.len());
    for s in names {
        out.bulk(s.name.as_bytes());
    }
}

/// `COMMAND GETKEYS | GETKEYSANDFLAGS <command> [arg ...]` (Valkey `getKeysSubcommandImpl`).
fn getkeys(args: &Args<'_>, out: &mut Out, with_flags: bool) {
    let argv: Vec<&[u8]> = (2..args.len()).map(|i| args.get(i)).collect();
    let t = table::table();
    let spec = argv.first().and_then(|n| t.get(n)).and_then(|r| {
        if r.is_container() && argv.len() >= 2 {
            r.subcommand(argv[1]).map(|(s, _)| *s)
        } else if r.is_container() {
            None
        } else {
            Some(r.spec)
        }
    });
    let Some(spec) = spec else {
        out.error("ERR Invalid command specified");
        return;
    };
    if !spec.has_keys() {
        out.error("ERR The command has no key arguments");
        return;
    }
    if !spec.arity_ok(argv.len()) {
        out.error("ERR Invalid number of arguments specified for command");
        return;
    }
    let keys = spec.keys_with_flags(&argv);
    if keys.is_empty() {
        if spec
            .flags
            .contains(ferrocluster_command::CommandFlags::NO_MANDATORY_KEYS)
        {
            out.array(0);
        } else {
            out.error("ERR Invalid arguments specified for command");
        }
        return;
    }
    out.array(keys.len());
    for (pos, flags) in keys {
        if with_flags {
            out.array(2);
            out.bulk(argv[pos]);
            let names = flags.names();
            out.set(names.clone().count());
            for n in names {
                out.simple(n);
            }
        } else {
            out.bulk(argv[pos]);
        }
    }
}

/// Resident set size of this process in bytes (from /proc/self/status).
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

fn human(bytes: u64) -> String {
    if bytes >= 1 << 30 {
        format!("{:.2}G", bytes as f64 / (1u64 << 30) as f64)
    } else if bytes >= 1 << 20 {
        format!("{:.2}M", bytes as f64 / (1u64 << 20) as f64)
    } else if bytes >= 1 << 10 {
        format!("{:.2}K", bytes as f64 / 1024.0)
    } else {
        format!("{bytes}B")
    }
}

/// `CLIENT TRACKING | CACHING | GETREDIR | TRACKINGINFO` ([`crate::tracking`]).
pub fn client_tracking(
    shared: &Shared,
    state: &mut State,
    client: &mut ClientCtx,
    args: &Args<'_>,
    out: &mut Out,
) {
    let t = &mut state.tracking;
    let sub = args.get(1);
    if eq(sub, "tracking") {
        if args.len() < 3 {
            out.error("ERR wrong number of arguments for 'client|tracking' command");
            return;
        }
        let before = out.buf.len();
        crate::tracking::tracking_cmd(shared, t, client.id, args, out);
        if out.buf.get(before) == Some(&b'+') {
            client.tracking_redir = t
                .tracks(client.id)
                .then(|| crate::tracking::getredir(t, client.id));
            client.caching = None;
        }
    } else if eq(sub, "caching") {
        if args.len() != 3 {
            out.error("ERR wrong number of arguments for 'client|caching' command");
            return;
        }
        match crate::tracking::caching_cmd(t, client.id, args) {
            Ok(yes) => {
                client.caching = Some(yes);
                out.ok();
            }
            Err(e) => out.error(e),
        }
    } else if eq(sub, "getredir") {
        out.int(crate::tracking::getredir(t, client.id));
    } else {
        crate::tracking::trackinginfo(t, client.id, client.caching, out);
    }
}

/// `CLIENT PAUSE timeout [WRITE|ALL]` and `CLIENT UNPAUSE` ([`crate::clients::pause`]);
/// the end of a pause wakes the I/O threads so the commands it held run at once.
pub fn client_pause(shared: &Shared, state: &mut State, args: &Args<'_>, out: &mut Out, now: u64) {
    if eq(args.get(1), "unpause") {
        if args.len() != 2 {
            out.error("ERR wrong number of arguments for 'client|unpause' command");
            return;
        }
        state.client_pause = None;
        shared.wake_io();
        out.ok();
        return;
    }
    if args.len() < 3 {
        out.error("ERR wrong number of arguments for 'client|pause' command");
        return;
    }
    match crate::clients::pause(state.client_pause, args, now) {
        Ok(p) => {
            state.client_pause = Some(p);
            out.ok();
        }
        Err(e) => out.error(e),
    }
}

/// `INFO [section ...]`
///
/// The default sections (no argument or `default`) are Redis' minus the ones we lack;
/// `readiness` (failover readiness, src/readiness.rs) is optional like Redis'
/// `commandstats`: only `INFO readiness`, `INFO all` and `INFO everything` include it.
pub fn info(shared: &Shared, state: &State, args: &Args<'_>, out: &mut Out, now: u64) {
    let mut wanted: Vec<String> = (1..args.len())
        .map(|i| String::from_utf8_lossy(args.get(i)).to_ascii_lowercase())
        .collect();
    let everything = wanted.iter().any(|w| w == "all" || w == "everything");
    if wanted.is_empty() || everything || wanted.iter().any(|w| w == "default") {
        wanted = [
            "server",
            "clients",
            "memory",
            "persistence",
            "stats",
            "replication",
            "cpu",
            "cluster",
            "keyspace",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if everything {
            wanted.push("commandstats".to_string());
            wanted.push(crate::readiness::section_name().to_string());
        }
    }
    let want = |s: &str| wanted.iter().any(|w| w == s);
    let mut text = String::with_capacity(2048);
    let (connected, total_conns, net_in, net_out) = shared.stats.snapshot();
    let cfg = &shared.config;
    if want("server") {
        let uptime = now.saturating_sub(shared.start_ms) / 1000;
        text.push_str(&format!(
            "# Server\r\nredis_version:{COMPAT_VERSION}\r\nferrocluster_version:{}\r\nredis_mode:{}\r\nos:{} {}\r\narch_bits:64\r\nprocess_id:{}\r\nrun_id:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{uptime}\r\nuptime_in_days:{}\r\nhz:{}\r\nexecutable:{}\r\nconfig_file:{}\r\nio_threads_active:{}\r\n\r\n",
            env!("CARGO_PKG_VERSION"),
            if cfg.cluster_enabled { "cluster" } else { "standalone" },
            std::env::consts::OS,
            std::env::consts::ARCH,
            std::process::id(),
            shared.run_id,
            cfg.port,
            uptime / 86400,
            cfg.hz,
            std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default(),
            // Redis's `config_file:` is empty when started without one.
            cfg.config_file.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
            cfg.io_threads,
        ));
    }
    if want("clients") {
        text.push_str(&format!(
            "# Clients\r\nconnected_clients:{connected}\r\ncluster_connections:{}\r\nmaxclients:{}\r\nblocked_clients:{}\r\ntracking_clients:{}\r\npubsub_clients:{}\r\n\r\n",
            crate::net::cluster_connections(state),
            shared.clients.maxclients(),
            state.repl.waiting_clients() + state.blocked.len() + shared.clients.paused(),
            state.tracking.counts().0,
            shared.pubsub.read().client_count(),
        ));
    }
    if want("memory") {
        let rss = rss_bytes();
        text.push_str(&format!(
            "# Memory\r\nused_memory:{rss}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\nused_memory_rss_human:{}\r\nused_memory_dataset:{}\r\nmaxmemory:{}\r\nmaxmemory_human:{}\r\nmaxmemory_policy:{}\r\nmem_allocator:libc\r\nlazyfree_pending_objects:{}\r\nlazyfreed_objects:{}\r\n\r\n",
            human(rss),
            human(rss),
            // What `maxmemory` is compared with (crate::evict): the data set's bytes.
            state.kv.memory_bytes(),
            state.evict.settings().bytes,
            human(state.evict.settings().bytes),
            state.evict.settings().policy.name(),
            state.slot_dels.counters().pending(),
            state.slot_dels.counters().freed(),
        ));
    }
    if want("persistence") {
        text.push_str(&state.persist.info_section(state.repl.loading(), now));
        text.push_str(&shared.aof.info_lines(now));
        text.push_str("\r\n");
    }
    if want("stats") {
        let pubsub = shared.pubsub.read();
        text.push_str(&format!(
            "# Stats\r\ntotal_connections_received:{total_conns}\r\ntotal_commands_processed:{}\r\n{}total_net_input_bytes:{net_in}\r\ntotal_net_output_bytes:{net_out}\r\nrejected_connections:{}\r\nexpired_keys:{}\r\nevicted_keys:{}\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\npubsub_channels:{}\r\npubsub_patterns:{}\r\nmigrate_cached_sockets:{}\r\nsync_full:{}\r\nsync_partial_ok:{}\r\nsync_partial_err:{}\r\ntracking_total_keys:{}\r\ntracking_total_items:{}\r\ntracking_total_prefixes:{}\r\n{}\r\n",
            state.commands_processed,
            state.rates.info_lines(),
            shared.clients.rejected(),
            state.expired_keys,
            state.evict.evicted_keys,
            state.keyspace_hits,
            state.keyspace_misses,
            pubsub.channel_count(),
            pubsub.pattern_count(),
            crate::legacy::cached_sockets(state),
            state.repl.stats.full,
            state.repl.stats.partial_ok,
            state.repl.stats.partial_err,
            state.tracking.counts().1,
            state.tracking.counts().2,
            state.tracking.counts().3,
            crate::acl::info_lines(state),
        ));
    }
    if want("replication") {
        text.push_str(&state.repl.info_section(now));
        text.push_str("\r\n");
    }
    if want("cpu") {
        text.push_str("# CPU\r\n");
        if let Some((user, sys)) = cpu_seconds() {
            text.push_str(&format!(
                "used_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\n"
            ));
        }
        text.push_str("\r\n");
    }
    if want("commandstats") {
        text.push_str("# Commandstats\r\n");
        state.slowlog.commandstats(&mut text);
        text.push_str("\r\n");
    }
    if want("cluster") {
        text.push_str(&format!(
            "# Cluster\r\ncluster_enabled:{}\r\n\r\n",
            u8::from(cfg.cluster_enabled)
        ));
    }
    if want(crate::readiness::section_name()) {
        text.push_str(&crate::readiness::info_section(state, now));
        text.push_str("\r\n");
    }
    if want("keyspace") {
        text.push_str("# Keyspace\r\n");
        for db in 0..state.kv.databases() {
            let n = state.kv.dbsize(db).unwrap_or(0);
            if n > 0 {
                // Valkey 9.1 also prints `keys_with_volatile_items=` (hashes with field
                // TTLs); the store does not count those, so it is left out. `avg_ttl` is
                // exact here (KvStore::expires), an estimate in Redis and Valkey.
                let (expires, avg_ttl) = state.kv.expires(db, now).unwrap_or((0, 0));
                text.push_str(&format!(
                    "db{db}:keys={n},expires={expires},avg_ttl={avg_ttl}\r\n"
                ));
            }
        }
    }
    while text.ends_with("\r\n\r\n") {
        text.truncate(text.len() - 2);
    }
    out.verbatim(text.as_bytes());
}

/// The process's user and system CPU time, seconds, from `/proc/self/stat` (fields 14 and
/// 15, in clock ticks of 1/100 s: Linux's fixed `USER_HZ` for /proc). `None` off Linux.
fn cpu_seconds() -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let user: f64 = f.get(11)?.parse().ok()?;
    let sys: f64 = f.get(12)?.parse().ok()?;
    Some((user / 100.0, sys / 100.0))
}

/// A `<CMD> HELP` reply as Valkey's `addReplyHelp` writes it: the header line, the given
/// lines, then `HELP` / `    Print this help.`, as status replies.
pub fn help(out: &mut Out, command: &str, lines: &[&str]) {
    out.array(lines.len() + 3);
    out.simple(&format!(
        "{command} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    ));
    for l in lines {
        out.simple(l);
    }
    out.simple("HELP");
    out.simple("    Print this help.");
}

const CONFIG_HELP: &[&str] = &[
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value> [<directive> <value> ...]",
    "    Set the configuration <directive> to <value> (the cluster-* options and maxclients).",
    "RESETSTAT",
    "    Reset statistics reported by the INFO command.",
];

/// The configuration in force: the start-up options, with what can change at run time taken
/// from where it lives (the node's `ClusterConfig`, nodes.conf's save behaviour, the client
/// gate's `maxclients`).
pub fn live_config(shared: &Shared, state: &State) -> crate::config::Config {
    let mut c = shared.config.clone();
    if let Some(side) = &state.cluster {
        c.cluster = side.node.config().clone();
        c.cluster_config_save_behavior = side.conf.save_behavior();
    }
    c.maxclients = shared.clients.maxclients();
    c.limits = crate::types::limits();
    (c.slowlog_log_slower_than, c.slowlog_max_len) = state.slowlog.limits();
    c.latency_monitor_threshold = state.latency.threshold();
    c.maxmemory = state.evict.settings();
    c.save = state.persist.points.clone();
    c.aof = shared.aof.options();
    c.timeout_s = shared
        .idle_timeout_s
        .load(std::sync::atomic::Ordering::Relaxed);
    c.protected_mode = shared
        .protected_mode
        .load(std::sync::atomic::Ordering::Relaxed);
    c.stop_writes_on_bgsave_error = shared
        .stop_writes_on_bgsave_error
        .load(std::sync::atomic::Ordering::Relaxed);
    c.output_limits = *shared.output_limits.read();
    c.requirepass = state.acl.requirepass.clone();
    c.acllog_max_len = state.acl.log.max_len();
    c.tracking_table_max_keys = state.tracking.max_keys();
    c.rdb_key_save_delay_us =
        crate::snapshot::KEY_SAVE_DELAY_US.load(std::sync::atomic::Ordering::Relaxed);
    c.notify_keyspace_events = state.notify.flags();
    let repl = state.repl.engine.config();
    c.repl.ping_period_s = repl.ping_period_ms / 1000;
    c.repl.timeout_s = repl.timeout_ms / 1000;
    c.repl.backlog_size = repl.backlog_size;
    (c.repl.primary_user, c.repl.primary_auth) = state.repl.primary_options.clone();
    (c.repl.min_replicas_to_write, c.repl.min_replicas_max_lag_s) = state.repl.min_replicas;
    c.users = crate::acl::user_lines(state);
    c.tls = shared.tls_settings.read().clone();
    c.tls_replication = shared
        .tls_replication
        .load(std::sync::atomic::Ordering::Relaxed);
    c
}

/// `CONFIG GET pattern... | SET name value... | RESETSTAT | REWRITE | HELP` over the option
/// table of src/config.rs.
pub fn config(
    shared: &Shared,
    state: &mut State,
    client: &mut crate::client::ClientCtx,
    args: &Args<'_>,
    out: &mut Out,
    now: u64,
) {
    let sub = args.get(1);
    if eq(sub, "get") {
        if args.len() < 3 {
            out.error("ERR wrong number of arguments for 'config|get' command");
            return;
        }
        let patterns: Vec<&[u8]> = (2..args.len()).map(|i| args.get(i)).collect();
        let hits = live_config(shared, state).matching(&patterns);
        out.map(hits.len());
        for (n, v) in hits {
            out.bulk(n.as_bytes());
            out.bulk(v.as_bytes());
        }
    } else if eq(sub, "set") {
        if args.len() < 4 || !args.len().is_multiple_of(2) {
            out.error("ERR wrong number of arguments for 'config|set' command");
            return;
        }
        let words: Vec<String> = (2..args.len())
            .map(|i| String::from_utf8_lossy(args.get(i)).into_owned())
            .collect();
        let pairs: Vec<(&str, &str)> = words
            .chunks(2)
            .map(|p| (p[0].as_str(), p[1].as_str()))
            .collect();
        match config_set(shared, state, &pairs, now) {
            Ok(None) => out.ok(),
            // Myself's announced values changed: the +OK waits for nodes.conf.
            Ok(Some(id)) => {
                if let Some(side) = state.cluster.as_mut() {
                    crate::cluster::defer_reply(side, client, out, id, false);
                }
            }
            Err(e) => out.error(&e.text()),
        }
    } else if eq(sub, "resetstat") {
        if args.len() != 2 {
            out.error("ERR wrong number of arguments for 'config|resetstat' command");
            return;
        }
        state.commands_processed = 0;
        state.slowlog.reset_stats();
        state.expired_keys = 0;
        state.evict.evicted_keys = 0;
        state.keyspace_hits = 0;
        state.keyspace_misses = 0;
        state.repl.stats = crate::repl::SyncStats::default();
        shared.stats.reset();
        shared.clients.reset_rejected();
        out.ok();
    } else if eq(sub, "rewrite") {
        if args.len() != 2 {
            out.error("ERR wrong number of arguments for 'config|rewrite' command");
            return;
        }
        // Valkey's `configRewriteCommand`: its texts and log lines.
        let Some(path) = shared.config.config_file.as_deref() else {
            out.error("ERR The server is running without a config file");
            return;
        };
        match crate::rewrite::rewrite_file(path, &live_config(shared, state)) {
            Ok(()) => {
                tracing::info!("CONFIG REWRITE executed with success.");
                out.ok();
            }
            Err(e) => {
                let reason = strerror(&e);
                tracing::warn!("CONFIG-REWRITE failed: {reason}");
                out.error(&format!("ERR Rewriting config file: {reason}"));
            }
        }
    } else if eq(sub, "help") {
        help(out, "CONFIG", CONFIG_HELP);
    } else {
        out.error(&format!(
            "ERR unknown subcommand '{}'. Try CONFIG HELP.",
            String::from_utf8_lossy(sub)
        ));
    }
}

/// An I/O error as C's `strerror` words it (without Rust's ` (os error N)`).
fn strerror(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// CONFIG SET: the values are checked by the option table ([`crate::config::config_set`]),
/// then applied where they take effect: the node (`ClusterNode::set_config`: when myself's
/// saved record changed the reply waits for nodes.conf, and the request it is deferred for
/// is returned), the client gate (`maxclients`, within the open files limit), nodes.conf's
/// save behaviour.
fn config_set(
    shared: &Shared,
    state: &mut State,
    pairs: &[(&str, &str)],
    now: u64,
) -> Result<Option<ferrocluster_node::RequestId>, crate::config::SetError> {
    use crate::config::SetError;
    let before = live_config(shared, state);
    let mut next = before.clone();
    let opts = crate::config::config_set(&mut next, pairs)?;
    let name_of = |pick: &dyn Fn(&crate::config::Opt) -> bool| {
        pairs
            .iter()
            .zip(&opts)
            .find(|(_, o)| pick(o))
            .map(|((n, _), _)| n.to_string())
            .unwrap_or_default()
    };
    let failed = |name: String, reason: String| SetError::Failed { name, reason };
    let cluster_changed = next.cluster != before.cluster
        || next.cluster_config_save_behavior != before.cluster_config_save_behavior;
    if cluster_changed && state.cluster.is_none() {
        return Err(failed(
            name_of(&|o| o.name.starts_with("cluster-")),
            "cluster support is disabled (cluster-enabled no)".into(),
        ));
    }
    if next.maxclients != before.maxclients {
        let got = crate::net::adjust_open_files_limit(next.maxclients).unwrap_or(0);
        if got < next.maxclients {
            return Err(failed(
                "maxclients".into(),
                format!(
                    "The operating system is not able to handle the specified number of clients, try with {got}"
                ),
            ));
        }
    }
    // TLS is checked before anything changes and applied last (Valkey `applyTlsCfg`: the new
    // files must load, else nothing changes).
    let tls_name = || name_of(&|o| o.name.starts_with("tls-"));
    let tls_changed = next.tls != before.tls;
    if tls_changed && shared.tls.is_some() {
        ferrocluster_host::tls::TlsConfigs::load(&next.tls).map_err(|e| failed(tls_name(), e))?;
    }
    if next.tls_replication && !before.tls_replication && shared.tls.is_none() {
        // A replica link would speak plain TCP to the primary's TLS port.
        return Err(failed(
            "tls-replication".into(),
            "TLS is not configured (start with tls-port or tls-cluster and the tls-* files)".into(),
        ));
    }
    let mut deferred = None;
    if let Some(side) = state.cluster.as_mut() {
        if next.cluster != before.cluster {
            let id = side.next_request();
            let outcome = side
                .node
                .set_config(next.cluster.clone(), id, ferrocluster_node::Millis(now))
                .map_err(|e| failed(name_of(&|o| o.name.starts_with("cluster-")), e.to_string()))?;
            // Myself's announced values are in nodes.conf: the reply waits for it.
            if outcome == ferrocluster_node::CommandOutcome::Deferred {
                deferred = Some(id);
            }
            side.wake();
        }
        side.conf
            .set_save_behavior(next.cluster_config_save_behavior);
    }
    if next.requirepass != before.requirepass {
        state.acl.set_requirepass(next.requirepass.as_deref());
        crate::acl::refresh_default(shared, state);
    }
    state.acl.log.set_max_len(next.acllog_max_len);
    state.tracking.set_max_keys(next.tracking_table_max_keys);
    crate::snapshot::KEY_SAVE_DELAY_US.store(
        next.rdb_key_save_delay_us,
        std::sync::atomic::Ordering::Relaxed,
    );
    crate::notify::configure(state, next.notify_keyspace_events);
    if next.primary_credentials() != before.primary_credentials() {
        let (user, auth) = next.primary_credentials();
        state.repl.engine.set_primary_auth(user, auth);
    }
    state.repl.primary_options = (
        next.repl.primary_user.clone(),
        next.repl.primary_auth.clone(),
    );
    state.repl.min_replicas = (
        next.repl.min_replicas_to_write,
        next.repl.min_replicas_max_lag_s,
    );
    if (next.repl.ping_period_s, next.repl.timeout_s)
        != (before.repl.ping_period_s, before.repl.timeout_s)
    {
        let (ping_ms, timeout_ms) = (
            next.repl.ping_period_s.saturating_mul(1000),
            next.repl.timeout_s.saturating_mul(1000),
        );
        state
            .repl
            .engine
            .set_timing(ping_ms, timeout_ms, ferrocluster_dataplane::Millis(now))
            .map_err(|e| failed(name_of(&|o| o.name.starts_with("repl-")), e.to_string()))?;
    }
    if next.repl.backlog_size != before.repl.backlog_size {
        state.repl.engine.set_backlog_size(next.repl.backlog_size);
    }
    if next.output_limits.replica != before.output_limits.replica {
        state
            .repl
            .engine
            .set_output_buffer_limit(next.output_limits.replica.engine_limit());
    }
    shared.clients.set_maxclients(next.maxclients);
    crate::types::set_limits(next.limits);
    state
        .slowlog
        .set_limits(next.slowlog_log_slower_than, next.slowlog_max_len);
    state.latency.set_threshold(next.latency_monitor_threshold);
    state.evict.configure(next.maxmemory, &mut state.kv, now);
    if next.maxmemory.bytes != 0 && next.maxmemory != before.maxmemory {
        // Valkey `updateMaxmemory`: a new limit below the data set evicts at once (its
        // eviction time proc), not at the next write. The evicted keys' notifications and
        // invalidations go out after this command.
        let _ = crate::evict::Eviction::perform(state, now);
        state.tracking.send(shared);
    }
    state.persist.points = next.save.clone();
    if next.aof != before.aof {
        shared.aof.set_options(&next.aof);
        if next.aof.enabled != before.aof.enabled {
            let me = shared
                .arc()
                .ok_or_else(|| failed("appendonly".into(), "not started".into()))?;
            crate::aof::set_enabled(&me, state, next.aof.enabled)
                .map_err(|e| failed("appendonly".into(), e))?;
        }
    }
    shared
        .idle_timeout_s
        .store(next.timeout_s, std::sync::atomic::Ordering::Relaxed);
    shared
        .protected_mode
        .store(next.protected_mode, std::sync::atomic::Ordering::Relaxed);
    *shared.output_limits.write() = next.output_limits;
    shared.stop_writes_on_bgsave_error.store(
        next.stop_writes_on_bgsave_error,
        std::sync::atomic::Ordering::Relaxed,
    );
    if tls_changed {
        if let Some(tls) = &shared.tls {
            // Loaded above; a file changed since then fails here, the rest applied.
            tls.replace(&next.tls).map_err(|e| failed(tls_name(), e))?;
        }
    }
    *shared.tls_settings.write() = next.tls.clone();
    shared
        .tls_replication
        .store(next.tls_replication, std::sync::atomic::Ordering::Relaxed);
    Ok(deferred)
}

//! Command dispatch: the checks every command passes (lookup, arity, AUTH, MULTI, the RESP2
//! subscribe context, cluster routing), the connection and server commands, and the hand-off
//! of each write's effect to replication and slot migration ([`crate::cmd`] has the data
//! commands and the propagation rule).
//!
//! Order of the checks (Valkey / Redis 7.0 `processCommand`): unknown command, unknown
//! subcommand, arity, AUTH, `Command not allowed inside a transaction`, cluster
//! redirection, the RESP2 subscribe context, then MULTI queueing. Error texts are
//! redis-server 7.0's (vectors `*/text/errors.txt`, `index.json`).

use crate::client::{Args, ClientCtx, Flow};
use crate::cmd::Ctx;
use crate::resp::Out;
use crate::server::{unix_ms, Shared, State};
use crate::table::{self, Cmd, Spec};
use ferrocluster_command::{CommandFlags, ErrorReply};

pub use crate::cmd::{parse_i64, NOT_INT, SYNTAX};

fn eq(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

/// Resolves a request in the server's table (command, subcommand, arity) without copying
/// its arguments.
///
/// # Errors
/// The unknown command / subcommand and arity errors.
pub fn resolve(args: &Args<'_>) -> Result<Spec, ferrocluster_command::CommandError> {
    resolve_found(table::lookup(args.get(0)), args)
}

/// [`resolve`] for a request whose top-level row the caller looked up already (`found`).
///
/// # Errors
/// As [`resolve`].
fn resolve_found(
    found: Option<&'static Spec>,
    args: &Args<'_>,
) -> Result<Spec, ferrocluster_command::CommandError> {
    if let Some(top) = found {
        if top.info.subcommands.is_empty() {
            if top.arity_ok(args.len()) {
                return Ok(*top);
            }
            return Err(ferrocluster_command::CommandError::WrongArity {
                fullname: top.info.name,
            });
        }
    }
    let row = found.and_then(|_| table::table().get(args.get(0)));
    if let Some(row) = row {
        let spec = if row.is_container() && args.len() >= 2 {
            row.subcommand(args.get(1)).map(|(_, h)| *h)
        } else {
            Some(row.handler)
        };
        if let Some(spec) = spec {
            if spec.arity_ok(args.len()) {
                return Ok(spec);
            }
            return Err(ferrocluster_command::CommandError::WrongArity {
                fullname: spec.info.name,
            });
        }
    }
    // The error path: the crate renders the exact texts.
    let argv: Vec<&[u8]> = (0..args.len()).map(|i| args.get(i)).collect();
    table::table().resolve(&argv).map(|r| r.handler)
}

/// Whether a RESP2 client in subscribe context may run `cmd` (Redis 7.0: (P|S)SUBSCRIBE,
/// (P|S)UNSUBSCRIBE, PING, QUIT, RESET).
fn allowed_subscribed(cmd: Cmd) -> bool {
    matches!(
        cmd,
        Cmd::Ping
            | Cmd::Subscribe
            | Cmd::Unsubscribe
            | Cmd::Psubscribe
            | Cmd::Punsubscribe
            | Cmd::Ssubscribe
            | Cmd::Sunsubscribe
            | Cmd::Quit
            | Cmd::Reset
    )
}

/// Runs one request from a client connection. `now` is the Unix time in ms the caller read
/// once for its batch of pipelined requests (a clock read per command cost about 3% of a
/// pipelined SET's CPU time).
pub fn execute(
    shared: &Shared,
    state: &mut State,
    client: &mut ClientCtx,
    args: &Args<'_>,
    out: &mut Out,
    now: u64,
) -> Flow {
    let (at, processed) = (out.buf.len(), state.commands_processed);
    // An execution unit opens and ends within one command; one still open here was left by
    // a command that did not finish (a panic): its writes go out now rather than never.
    state.repl.end_unit(now);
    let flow = execute_routed(shared, state, client, args, out, now);
    // An error before the command ran is a rejection (Valkey `rejectCommand`), counted for
    // the command (or subcommand) it named.
    if state.commands_processed == processed && out_error_at(out, at) {
        if let Some(name) = named_command(args) {
            state.slowlog.rejected(name);
        }
    }
    // Keyspace notifications queued outside `run` too: waiters served after a cluster-mode
    // EXEC, evictions of a command refused on OOM.
    crate::notify::publish(shared, state);
    flow
}

/// The row `args` names: the command, or for a container its subcommand (`None` for an
/// unknown command or subcommand, which Valkey counts nowhere).
fn named_command(args: &Args<'_>) -> Option<&'static str> {
    let spec = table::lookup(args.get(0))?;
    if spec.info.subcommands.is_empty() {
        return Some(spec.name);
    }
    if args.len() < 2 {
        return Some(spec.name);
    }
    resolve(args).ok().map(|s| s.name)
}

/// [`execute`] without the publication of keyspace notifications.
fn execute_routed(
    shared: &Shared,
    state: &mut State,
    client: &mut ClientCtx,
    args: &Args<'_>,
    out: &mut Out,
    now: u64,
) -> Flow {
    let found = table::lookup(args.get(0));
    if state.cluster.is_some() && !found.is_some_and(|s| crate::cluster::bypasses_router(s.cmd)) {
        return execute_cluster(shared, state, client, found, args, out, now);
    }
    let spec = match resolve_found(found, args) {
        Ok(s) => s,
        Err(e) => {
            if client.multi.is_some() {
                client.multi_error = true;
            }
            out.buf.extend_from_slice(&e.to_resp());
            return Flow::Continue;
        }
    };
    if !client.authed && !spec.has(CommandFlags::NO_AUTH) {
        out.error("NOAUTH Authentication required.");
        return Flow::Continue;
    }
    if client.multi.is_some() && spec.has(CommandFlags::NO_MULTI) {
        // Valkey 9 (MULTI and WATCH are `no_multi` there): the transaction aborts.
        client.multi_error = true;
        out.error(&format!(
            "ERR Command '{}' not allowed inside a transaction",
            spec.name
        ));
        return Flow::Continue;
    }
    // ACL after `no_multi` and before routing (Valkey `processCommand`).
    if let Some(flow) = crate::acl::check(state, client, spec.info, args, out, now, &mut |c| {
        c.multi_error = true;
    }) {
        return flow;
    }
    if state.repl.loading() && !spec.has(CommandFlags::LOADING) {
        // Valkey `processCommand`: while a replica loads its primary's RDB only the commands
        // flagged `loading` run.
        out.error(crate::repl::LOADING_ERR);
        return Flow::Continue;
    }
    if !out.resp3() && client.subscriptions() > 0 && !allowed_subscribed(spec.cmd) {
        out.error(&format!(
            "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            spec.name
        ));
        return Flow::Continue;
    }
    client.last_cmd = spec.name;
    // Cluster routing happens before queueing, as in processCommand (cluster mode takes
    // `execute_cluster`; this hook routes nothing in standalone mode).
    if let Some(err) = crate::cluster::route_request(state, client, &spec, args, now) {
        if client.multi.is_some() {
            client.multi_error = true;
        }
        out.error(&err);
        return Flow::Continue;
    }
    if queue_refused_on_oom(shared, state, client, Some(&spec), now) {
        client.multi_error = true;
        out.error(crate::evict::OOM_ERR);
        return Flow::Continue;
    }
    if client.multi.is_some() {
        let immediate = matches!(
            spec.cmd,
            Cmd::Exec | Cmd::Discard | Cmd::Multi | Cmd::Watch | Cmd::Quit | Cmd::Reset | Cmd::Wait
        );
        if !immediate {
            // Valkey `processCommand` checks `min-replicas-to-write` before queueing: the
            // write is refused and the transaction fails.
            if spec.is_write() && short_of_replicas(state, client, now) {
                client.multi_error = true;
                out.error(crate::repl::NOREPLICAS_ERR);
                return Flow::Continue;
            }
            let Some(queue) = client.multi.as_mut() else {
                return Flow::Continue;
            };
            queue.push(args.to_owned_vec());
            client.asking = false;
            out.simple("QUEUED");
            return Flow::Continue;
        }
    }
    let flow = run(shared, state, client, &spec, args, out, now);
    if spec.cmd != Cmd::Asking {
        client.asking = false;
    }
    flow
}

/// Cluster mode: the command crate's client state machine and router decide first (with the
/// server's table: `crate::cluster::dispatch`).
fn execute_cluster(
    shared: &Shared,
    state: &mut State,
    client: &mut ClientCtx,
    spec: Option<&'static Spec>,
    args: &Args<'_>,
    out: &mut Out,
    now: u64,
) -> Flow {
    let no_auth_ok = spec.is_some_and(|s| s.has(CommandFlags::NO_AUTH));
    if !client.authed && !no_auth_ok {
        out.error("NOAUTH Authentication required.");
        return Flow::Continue;
    }
    if state.repl.loading() && spec.is_some_and(|s| !s.has(CommandFlags::LOADING)) {
        out.error(crate::repl::LOADING_ERR);
        return Flow::Continue;
    }
    if !out.resp3() && client.subscriptions() > 0 && spec.is_none_or(|s| !allowed_subscribed(s.cmd))
    {
        let name = match resolve(args) {
            Ok(s) => s.name.to_owned(),
            Err(_) => String::from_utf8_lossy(args.get(0)).to_ascii_lowercase(),
        };
        out.error(&format!(
            "ERR Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
        ));
        return Flow::Continue;
    }
    // ACL before routing: Valkey and Redis 7.0 answer -NOPERM before -MOVED. A container's
    // subcommand row is checked; a request that does not resolve gets its error below.
    if let Some(top) = spec {
        let row = if top.info.subcommands.is_empty() {
            Some(top.info)
        } else {
            resolve(args).ok().map(|s| s.info)
        };
        if let Some(row) = row {
            let flag = &mut |c: &mut ClientCtx| {
                if let Some(cs) = c.cluster.as_mut() {
                    cs.flag_transaction();
                }
            };
            if let Some(flow) = crate::acl::check(state, client, row, args, out, now, flag) {
                return flow;
            }
        }
    }
    // MULTI, EXEC and DISCARD run as commands (INFO commandstats, MONITOR, CLIENT LIST's
    // `cmd=`), the transaction kept by the command crate's client state ([`cluster_txn`]). A
    // nested MULTI and a wrong arity stay rejections, answered below.
    if let Some(s) = spec.filter(|s| matches!(s.cmd, Cmd::Multi | Cmd::Exec | Cmd::Discard)) {
        let nested = s.cmd == Cmd::Multi && client.cluster.as_ref().is_some_and(|c| c.in_multi());
        if !nested && args.len() == 1 {
            client.last_cmd = s.name;
            return run(shared, state, client, s, args, out, now);
        }
    }
    if let Some(spec) = spec {
        match route_plain(state, client, spec, args, out) {
            Some(true) => {
                client.last_cmd = spec.name;
                return run(shared, state, client, spec, args, out, now);
            }
            Some(false) => return Flow::Continue,
            None => {}
        }
    }
    let ends_transaction = spec.is_some_and(|s| matches!(s.cmd, Cmd::Exec | Cmd::Discard));
    if queue_refused_on_oom(shared, state, client, spec, now) {
        if let Some(cs) = client.cluster.as_mut() {
            cs.flag_transaction();
        }
        out.error(crate::evict::OOM_ERR);
        return Flow::Continue;
    }
    // A write queued inside MULTI under `min-replicas-to-write` without enough good
    // replicas: refused before queueing (Valkey `processCommand`), the transaction fails.
    let queuing = client.cluster.as_ref().is_some_and(|c| c.in_multi())
        && spec.is_some_and(|s| s.is_write() && !matches!(s.cmd, Cmd::Exec | Cmd::Discard));
    if queuing && short_of_replicas(state, client, now) {
        if let Some(cs) = client.cluster.as_mut() {
            cs.flag_transaction();
        }
        out.error(crate::repl::NOREPLICAS_ERR);
        return Flow::Continue;
    }
    let flow = match crate::cluster::dispatch(state, client, args, out) {
        crate::cluster::ClusterDispatch::Done => Flow::Continue,
        crate::cluster::ClusterDispatch::Run => match resolve(args) {
            Ok(spec) => {
                client.last_cmd = spec.name;
                run(shared, state, client, &spec, args, out, now)
            }
            Err(e) => {
                out.buf.extend_from_slice(&e.to_resp());
                Flow::Continue
            }
        },
        // MULTI, EXEC and DISCARD take the branch above (`cluster_txn`).
        crate::cluster::ClusterDispatch::Exec(_) => {
            out.error("ERR EXEC without MULTI");
            Flow::Continue
        }
    };
    if ends_transaction {
        crate::cmd::txn::unwatch(state, client.id);
    }
    flow
}

/// The cluster fast path for an ordinary command (GET, SET, ...): the command crate's
/// [`ferrocluster_command::route`] with the table row cached by [`table::routed`], skipping
/// `ClientState::handle_command`'s name search. It decides exactly as `handle_command` would:
/// only taken outside MULTI and without a pending ASKING (`handle_command` would then change no
/// client state for a `CommandKind::Plain` command) and with the arity right (else the slow
/// path writes the arity error). `Some(true)`: run it; `Some(false)`: the redirection or
/// CLUSTERDOWN error is written; `None`: not eligible, use [`crate::cluster::dispatch`].
fn route_plain(
    state: &State,
    client: &mut ClientCtx,
    spec: &'static Spec,
    args: &Args<'_>,
    out: &mut Out,
) -> Option<bool> {
    let routed = table::routed(spec)?;
    let cs = client.cluster.as_ref()?;
    let side = state.cluster.as_ref()?;
    if cs.in_multi() || cs.asking() || !routed.arity_ok(args.len()) || args.len() > 8 {
        return None;
    }
    let keys = |db: usize, key: &[u8]| crate::cluster::key_present(&state.kv, db, key);
    const EMPTY: &[u8] = b"";
    let mut argv = [EMPTY; 8];
    for (i, a) in argv.iter_mut().enumerate().take(args.len()) {
        *a = args.get(i);
    }
    // A replica refuses writes after routing (`ClientState::handle_command`): that path
    // answers them.
    if routed.is_write(&argv[..args.len()]) && side.node.topology().myself().is_replica() {
        return None;
    }
    // The node's router, as `crate::cluster::dispatch` uses it.
    let routed = side.node.route(routed, &argv[..args.len()], cs, &keys);
    // What `crate::cluster::dispatch` copies after `handle_command` (unchanged here: ASKING
    // was not set, and a plain command changes neither the database nor READONLY).
    (client.db, client.readonly, client.asking) = (cs.db(), cs.readonly(), false);
    match routed {
        Ok(_) => Some(true),
        Err(e) => {
            use ferrocluster_command::ErrorReply;
            let rejection: ferrocluster_command::Rejection = e.into();
            out.buf.extend_from_slice(&rejection.to_resp());
            Some(false)
        }
    }
}

/// Valkey 9.1's `shared.bgsaveerr` (without `-` and CRLF): writes refused while
/// `stop-writes-on-bgsave-error` is on and the last background save failed.
pub const BGSAVE_ERR: &str = "MISCONF Valkey is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Valkey logs for details about the RDB error.";

/// Redis `processCommand`'s memory check: with `maxmemory` set, keys are evicted first
/// (`crate::evict`); `true` when the command must then be refused with `-OOM`: it may grow
/// memory (`denyoom`: a `denyoom` command, or an EXEC whose queue holds one) and the data set
/// is still over the limit. Replication and slot import links, and the commands inside an
/// EXEC (checked as the EXEC), are not checked.
fn over_maxmemory(
    shared: &Shared,
    state: &mut State,
    client: &ClientCtx,
    denyoom: bool,
    now: u64,
) -> bool {
    if state.evict.settings().bytes == 0
        || client.io_thread == usize::MAX
        || client.is_replica_link
        || client.in_exec
    {
        return false;
    }
    let fits = crate::evict::Eviction::perform(state, now).is_ok();
    // Evicted keys invalidate client-side caches now, refused or not.
    state.tracking.send(shared);
    !fits && denyoom
}

/// Redis `processCommand`: inside MULTI, under `maxmemory`, any command but EXEC, DISCARD,
/// QUIT and RESET is refused with `-OOM` while the data set stays over the limit (queueing
/// may grow memory without bound), and the transaction fails. (In cluster mode this check
/// comes before routing, Redis's after: a queued command for another node's slot gets `-OOM`
/// here where Redis answers `-MOVED`.)
fn queue_refused_on_oom(
    shared: &Shared,
    state: &mut State,
    client: &ClientCtx,
    spec: Option<&Spec>,
    now: u64,
) -> bool {
    let in_multi = client.multi.is_some() || client.cluster.as_ref().is_some_and(|c| c.in_multi());
    let passes =
        spec.is_some_and(|s| matches!(s.cmd, Cmd::Exec | Cmd::Discard | Cmd::Quit | Cmd::Reset));
    in_multi && !passes && over_maxmemory(shared, state, client, true, now)
}

/// Redis `rejectCommand` for an EXEC refused by [`over_maxmemory`] (`execCommandAbort`).
const EXEC_OOM: &str =
    "EXECABORT Transaction discarded because of: OOM command not allowed when used memory > 'maxmemory'.";

/// Runs a command that passed the checks (for a container given by its top-level row, the
/// subcommand's row is looked up here). Also used for EXEC, slot import links and the
/// replication stream. Hands what a write changed to the replication / slot-migration hook
/// (`crate::repl::propagate`), as [`crate::cmd`]'s rule says.
pub fn run(
    shared: &Shared,
    state: &mut State,
    client: &mut ClientCtx,
    spec: &Spec,
    args: &Args<'_>,
    out: &mut Out,
    now: u64,
) -> Flow {
    let flow = run_command(shared, state, client, spec, args, out, now);
    // Keyspace notifications of the command (and of the keys it found expired or evicted).
    crate::notify::publish(shared, state);
    flow
}

/// [`run`] without the keyspace notifications' publication.
fn run_command(
    shared: &Shared,
    state: &mut State,
    client: &mut ClientCtx,
    spec: &Spec,
    args: &Args<'_>,
    out: &mut Out,
    now: u64,
) -> Flow {
    let resolved;
    let spec = if spec.info.subcommands.is_empty() || spec.name.contains('|') {
        spec
    } else {
        match resolve(args) {
            Ok(s) => {
                resolved = s;
                &resolved
            }
            Err(e) => {
                out.buf.extend_from_slice(&e.to_resp());
                return Flow::Continue;
            }
        }
    };
    if over_maxmemory(shared, state, client, spec.has(CommandFlags::DENYOOM), now) {
        out.error(crate::evict::OOM_ERR);
        return Flow::Continue;
    }
    // Redis `processCommand`: while the AOF cannot be written, a primary refuses writes (and
    // PING) from clients with `-MISCONF` (`writeCommandsDeniedByDiskError`).
    if (spec.is_write() || spec.cmd == Cmd::Ping)
        && client.io_thread != usize::MAX
        && !client.is_replica_link
        && !state.repl.is_replica()
    {
        if let Some(e) = shared.aof.write_denied() {
            out.error(&e);
            return Flow::Continue;
        }
        if shared
            .stop_writes_on_bgsave_error
            .load(std::sync::atomic::Ordering::Relaxed)
            && state.persist.bgsave_failing()
        {
            out.error(BGSAVE_ERR);
            return Flow::Continue;
        }
    }
    // Valkey `processCommand`: with `min-replicas-to-write` set, a primary refuses a write,
    // and an EXEC whose queue holds one, without enough good replicas.
    if (spec.is_write() || (spec.cmd == Cmd::Exec && queue_writes(client)))
        && short_of_replicas(state, client, now)
    {
        if spec.cmd == Cmd::Exec {
            // `execCommandAbort`: the transaction ends, its WATCHes too.
            client.multi = None;
            client.multi_error = false;
            if let Some(cs) = client.cluster.as_mut() {
                cs.discard_transaction();
            }
            crate::cmd::txn::unwatch(state, client.id);
            out.error(&format!(
                "EXECABORT Transaction discarded because of: {}",
                crate::repl::NOREPLICAS_ERR
            ));
        } else {
            out.error(crate::repl::NOREPLICAS_ERR);
        }
        return Flow::Continue;
    }
    state.commands_processed += 1;
    let before = out.buf.len();
    let db = client.db;
    let mut ctx = Ctx {
        shared,
        state,
        client,
        args,
        out,
        spec,
        db,
        now,
        prop: crate::cmd::Propagation::default(),
    };
    // Valkey `processCommand`: the tracking table is brought under its limit before the
    // command runs (the keys it reads now stay tracked).
    ctx.state.tracking.limit();
    ctx.state.tracking.current = Some(ctx.client.id);
    crate::notify::expire_keys_of(ctx.state, spec, args, db, now);
    let started = std::time::Instant::now();
    let flow = dispatch(&mut ctx);
    let duration_us = started.elapsed().as_micros() as u64;
    let prop = std::mem::take(&mut ctx.prop);
    let wrote_error = out_error_at(ctx.out, before);
    // The access words (no touch while writes are paused: a touch deletes a key it finds
    // expired, and keys do not expire then).
    if ctx.state.kv.tracks_access()
        && crate::evict::touches_keys(spec.name)
        && !ctx.state.expiry_paused(now)
    {
        let argv: Vec<&[u8]> = (0..args.len()).map(|i| args.get(i)).collect();
        let keys: Vec<&[u8]> = spec.info.key_positions(&argv).map(|p| argv[p]).collect();
        let st = &mut *ctx.state;
        st.evict.touch(&mut st.kv, &mut st.rng, db, &keys, now);
    }
    // A read met an expired key: Valkey's lookup deletes it (`expireIfNeeded`), counted in
    // `expired_keys`, sent to replicas as DEL and announced; the store's reads cannot, so the
    // command's keys are checked again now (only in that case).
    if ctx.state.kv.take_read_expired() {
        crate::notify::delete_expired_keys(ctx.state, spec, args, db, now);
        crate::repl::propagate_expired(ctx.state);
    }
    if !ctx.client.blocked {
        ctx.client.cmds += 1;
    }
    record(shared, &mut ctx, duration_us, wrote_error);
    if spec.is_write() && !wrote_error {
        propagate(state_of(&mut ctx), db, spec, args, prop, now);
    }
    // Clients blocked on keys this command gave elements to (after EXEC as a whole).
    if !ctx.client.in_exec {
        crate::blocking::serve(shared, ctx.state, now);
    }
    flow
}

/// Whether `min-replicas-to-write` refuses a write from `client` now (Valkey
/// `checkGoodReplicasStatus`; the replication link and internal sessions are never refused).
fn short_of_replicas(state: &State, client: &ClientCtx, now: u64) -> bool {
    state.repl.min_replicas.0 != 0
        && client.io_thread != usize::MAX
        && !client.is_replica_link
        && !state.repl.enough_good_replicas(now)
}

/// Whether the client's open transaction queued a command `f` holds for.
pub fn queued_any(client: &ClientCtx, f: impl Fn(&Spec) -> bool) -> bool {
    if let Some(q) = client.cluster.as_ref().and_then(|cs| cs.queued()) {
        return q
            .iter()
            .any(|c| crate::cluster::queued_spec(c).is_some_and(&f));
    }
    client.multi.as_ref().is_some_and(|q| {
        q.iter().any(|argv| {
            argv.first()
                .and_then(|name| table::lookup(name))
                .is_some_and(&f)
        })
    })
}

/// Whether the client's open transaction queued a write command.
fn queue_writes(client: &ClientCtx) -> bool {
    queued_any(client, Spec::is_write)
}

/// Whether `spec` may feed the replication stream without being a write (Valkey's
/// `may_replicate` commands: PUBLISH, SPUBLISH, CLUSTER SETSLOT, and EVAL / EVALSHA / FCALL /
/// PFCOUNT, which this server does not serve yet): a write pause holds them too.
pub fn may_replicate(spec: &Spec) -> bool {
    matches!(
        spec.name,
        "publish" | "spublish" | "cluster|setslot" | "eval" | "evalsha" | "fcall" | "pfcount"
    )
}

/// The statistics, slow log and MONITOR feed of a command that ran (Redis `call()`).
fn record(shared: &Shared, ctx: &mut Ctx<'_, '_>, duration_us: u64, failed: bool) {
    let spec = ctx.spec;
    let event = if spec.has(CommandFlags::FAST) {
        "fast-command"
    } else {
        "command"
    };
    ctx.state
        .latency
        .add_if_needed(event, duration_us / 1000, ctx.now);
    if spec.is_write() && !failed {
        ctx.state.persist.changed();
    }
    // Client-side caching: the keys a tracking client read, then what this command
    // invalidated (Redis `call()`: `trackingRememberKeys`, the pending invalidations).
    if ctx.client.tracking_redir.is_some() {
        if spec.has(CommandFlags::READONLY) && !spec.has(CommandFlags::PUBSUB) && !failed {
            let argv: Vec<&[u8]> = (0..ctx.args.len()).map(|i| ctx.args.get(i)).collect();
            let keys = spec.info.keys_with_flags(&argv);
            let caching = ctx.client.caching;
            ctx.state
                .tracking
                .remember(ctx.client.id, caching, keys.iter().map(|(p, _)| argv[*p]));
        }
        // Redis `resetClient`: CACHING lasts until a command other than CLIENT, and over a
        // whole MULTI / EXEC.
        let in_multi =
            ctx.client.multi.is_some() || ctx.client.cluster.as_ref().is_some_and(|c| c.in_multi());
        if !spec.name.starts_with("client|") && !in_multi && !ctx.client.in_exec {
            ctx.client.caching = None;
        }
    }
    ctx.state.tracking.current = None;
    // Inside EXEC the invalidations wait for the EXEC's own record (Valkey sends them once
    // the execution unit ends: one BCAST message per prefix for the whole transaction).
    if !ctx.client.in_exec {
        ctx.state.tracking.send(shared);
    }
    // Passwords and user names never reach the slow log or MONITOR (`crate::redact`).
    let redacted = crate::redact::redacted(spec.name, ctx.args);
    let redacted_args = redacted.as_ref().map(|(f, r)| Args::new(f, r));
    let shown = redacted_args.as_ref().unwrap_or(ctx.args);
    ctx.state.slowlog.record(crate::slowlog::Ran {
        name: spec.name,
        args: shown,
        duration_us,
        failed,
        loggable: !spec.has(CommandFlags::SKIP_COMMANDLOG) && !ctx.client.blocked,
        client: (ctx.client.addr, ctx.client.name.as_deref().unwrap_or(b"")),
        now_ms: ctx.now,
    });
    if shared.monitors.any()
        && !spec.has(CommandFlags::SKIP_MONITOR)
        && !spec.has(CommandFlags::ADMIN)
    {
        if let Some(addr) = ctx.client.addr {
            crate::monitor::feed(shared, ctx.db, addr, shown);
        }
    }
}

/// Propagates one effect `argv` (a served blocking pop: `LPOP key`, `LMOVE ...`) as a
/// command run in `db` would.
pub fn propagate_argv(state: &mut State, db: usize, argv: &[&[u8]], now: u64) {
    let mut flat = Vec::new();
    let mut ranges = Vec::new();
    for a in argv {
        let start = flat.len();
        flat.extend_from_slice(a);
        ranges.push(start..flat.len());
    }
    let args = Args::new(&flat, &ranges);
    if let Some(spec) = table::lookup(args.get(0)) {
        crate::repl::propagate(state, db, spec, &args, now);
    }
}

fn out_error_at(out: &Out, at: usize) -> bool {
    out.buf.get(at) == Some(&b'-')
}

fn state_of<'a>(ctx: &'a mut Ctx<'_, '_>) -> &'a mut State {
    ctx.state
}

/// What a write sends to replicas and export links: its effects, else itself when it
/// changed something (`crate::cmd`'s rule), through the server's existing hook.
fn propagate(
    state: &mut State,
    db: usize,
    spec: &Spec,
    args: &Args<'_>,
    prop: crate::cmd::Propagation,
    now: u64,
) {
    if !prop.effects.is_empty() {
        let mut flat = Vec::new();
        let mut ranges = Vec::new();
        for argv in &prop.effects {
            flat.clear();
            ranges.clear();
            for a in argv {
                let start = flat.len();
                flat.extend_from_slice(a);
                ranges.push(start..flat.len());
            }
            let eargs = Args::new(&flat, &ranges);
            if let Some(espec) = table::lookup(eargs.get(0)) {
                crate::repl::propagate(state, db, espec, &eargs, now);
            }
        }
    } else if prop.dirty > 0 {
        if spec.cmd == Cmd::Restore || spec.cmd == Cmd::RestoreAsking {
            return restore_effect(state, db, spec, args, now);
        }
        crate::repl::propagate(state, db, spec, args, now);
    }
    if matches!(spec.cmd, Cmd::Flushdb | Cmd::Flushall) && prop.dirty > 0 {
        crate::migrate::on_flush(state);
    }
}

/// RESTORE with a relative TTL propagates as `RESTORE key <now + ttl> payload ... ABSTTL`
/// (Redis 7.0 `restoreCommand`), so replicas and the target agree on the deadline.
fn restore_effect(state: &mut State, db: usize, spec: &Spec, args: &Args<'_>, now: u64) {
    let ttl = parse_i64(args.get(2)).unwrap_or(0);
    let absttl = (4..args.len()).any(|i| eq(args.get(i), "absttl"));
    if ttl == 0 || absttl {
        return crate::repl::propagate(state, db, spec, args, now);
    }
    let at = (now as i64).saturating_add(ttl).to_string();
    let mut argv: Vec<&[u8]> = (0..args.len()).map(|i| args.get(i)).collect();
    argv[2] = at.as_bytes();
    argv.push(b"ABSTTL");
    let mut flat = Vec::new();
    let mut ranges = Vec::new();
    for a in &argv {
        let start = flat.len();
        flat.extend_from_slice(a);
        ranges.push(start..flat.len());
    }
    crate::repl::propagate(state, db, spec, &Args::new(&flat, &ranges), now);
}

/// Marks a write done by a handler outside `crate::cmd` (DUMP/RESTORE/MIGRATE, DEBUG): it
/// changed the data set when it wrote no error.
fn legacy_write(ctx: &mut Ctx<'_, '_>, before: usize) {
    if !out_error_at(ctx.out, before) {
        ctx.prop.dirty += 1;
        for pos in ctx.spec.info.key_positions(&argv_of(ctx.args)) {
            crate::cmd::txn::touch(ctx.state, ctx.db, ctx.args.get(pos));
        }
    }
}

fn argv_of<'a>(args: &Args<'a>) -> Vec<&'a [u8]> {
    (0..args.len()).map(|i| args.get(i)).collect()
}

fn dispatch(ctx: &mut Ctx<'_, '_>) -> Flow {
    let (shared, args, now) = (ctx.shared, ctx.args, ctx.now);
    let cmd = ctx.spec.cmd;
    match cmd {
        Cmd::Ping => {
            if ctx.client.subscriptions() > 0 && !ctx.out.resp3() {
                ctx.out.array(2);
                ctx.out.bulk(b"pong");
                ctx.out.bulk(args.opt(1).unwrap_or(b""));
            } else if args.len() > 2 {
                ctx.error("ERR wrong number of arguments for 'ping' command");
            } else if let Some(m) = args.opt(1) {
                ctx.out.bulk(m);
            } else {
                ctx.out.simple("PONG");
            }
        }
        Cmd::Echo => ctx.out.bulk(args.get(1)),
        Cmd::Quit => {
            ctx.out.ok();
            return Flow::Close;
        }
        Cmd::Reset => reset(ctx),
        Cmd::Hello => crate::admin::hello(shared, ctx.state, ctx.client, args, ctx.out, now),
        Cmd::Auth => crate::admin::auth(ctx.state, ctx.client, args, ctx.out, now),
        Cmd::Acl => return crate::acl::command(shared, ctx.state, ctx.client, args, ctx.out, now),
        Cmd::Client if eq(args.get(1), "unblock") => crate::blocking::client_unblock(ctx),
        Cmd::Client
            if ["tracking", "caching", "getredir", "trackinginfo"]
                .iter()
                .any(|s| eq(args.get(1), s)) =>
        {
            crate::admin::client_tracking(shared, ctx.state, ctx.client, args, ctx.out)
        }
        Cmd::Client if eq(args.get(1), "pause") || eq(args.get(1), "unpause") => {
            crate::admin::client_pause(shared, ctx.state, args, ctx.out, now)
        }
        Cmd::Client => {
            crate::admin::client(shared, &ctx.state.acl.users, ctx.client, args, ctx.out, now)
        }
        Cmd::Command => crate::admin::command(args, ctx.out),
        Cmd::Info => crate::admin::info(shared, ctx.state, args, ctx.out, now),
        Cmd::Config => crate::admin::config(shared, ctx.state, ctx.client, args, ctx.out, now),
        Cmd::Role => crate::repl::role_reply(ctx.state, ctx.out),
        Cmd::Time => {
            let us = now * 1000;
            ctx.out.array(2);
            ctx.out.bulk_int((us / 1_000_000) as i64);
            ctx.out.bulk_int((us % 1_000_000) as i64);
        }
        Cmd::Lastsave => ctx.out.int(ctx.state.persist.last_save_s as i64),
        Cmd::Save => match crate::persist::save(shared, ctx.state, now) {
            Ok(()) => ctx.out.ok(),
            Err(e) => ctx.out.error(&e),
        },
        Cmd::Bgrewriteaof => {
            let started = shared
                .arc()
                .ok_or_else(|| {
                    "ERR Background append only file rewriting failed to start".to_string()
                })
                .and_then(|me| crate::aof::bgrewriteaof(&me, ctx.state));
            match started {
                Ok(text) => ctx.out.simple(text),
                Err(e) => ctx.out.error(&e),
            }
        }
        Cmd::Bgsave => {
            let schedule = args.len() == 2 && eq(args.get(1), "schedule");
            if args.len() > 2 || (args.len() == 2 && !schedule) {
                ctx.out.error("ERR syntax error");
            } else {
                let started = shared
                    .arc()
                    .ok_or_else(|| "ERR Background save failed to start".to_string())
                    .and_then(|me| crate::persist::bgsave(&me, ctx.state, schedule, now));
                match started {
                    Ok(text) => ctx.out.simple(text),
                    Err(e) => ctx.out.error(&e),
                }
            }
        }
        Cmd::Shutdown => {
            if let Err(e) = crate::persist::shutdown(shared, ctx.state, args) {
                ctx.out.error(&e);
            }
        }
        // Cluster mode answers SELECT in `ferrocluster_command::ClientState` (Valkey 9: `DB
        // index is out of range` beyond `cluster-databases`, where Redis 7.0 said `SELECT is
        // not allowed in cluster mode`); this is the standalone mode's.
        Cmd::Select => match parse_i64(args.get(1)) {
            None => ctx.error(NOT_INT),
            Some(n) if n < 0 || n as usize >= ctx.state.kv.databases() => {
                ctx.error("ERR DB index is out of range")
            }
            Some(n) => {
                ctx.client.db = n as usize;
                ctx.out.ok()
            }
        },
        // Cluster mode keeps transactions in the command crate's client state.
        Cmd::Multi | Cmd::Exec | Cmd::Discard if ctx.state.cluster.is_some() => {
            return cluster_txn(ctx)
        }
        Cmd::Multi => {
            if ctx.client.multi.is_some() {
                ctx.error("ERR MULTI calls can not be nested");
            } else {
                ctx.client.multi = Some(Vec::new());
                ctx.client.multi_error = false;
                ctx.out.ok();
            }
        }
        Cmd::Discard => {
            if ctx.client.multi.take().is_some() {
                ctx.client.multi_error = false;
                crate::cmd::txn::unwatch(ctx.state, ctx.client.id);
                ctx.out.ok();
            } else {
                ctx.error("ERR DISCARD without MULTI");
            }
        }
        Cmd::Exec => return exec(ctx),
        Cmd::Watch => crate::cmd::txn::watch(ctx),
        Cmd::Unwatch => crate::cmd::txn::unwatch_cmd(ctx),
        Cmd::Readonly => {
            ctx.client.readonly = true;
            ctx.out.ok();
        }
        Cmd::Readwrite => {
            ctx.client.readonly = false;
            ctx.out.ok();
        }
        Cmd::Asking => {
            ctx.client.asking = true;
            ctx.out.ok();
        }
        Cmd::Wait => crate::repl::wait(shared, ctx.state, ctx.client, args, ctx.out, now),
        Cmd::Replconf => crate::repl::replconf(shared, ctx.state, ctx.client, args, ctx.out),
        // SYNC: a full sync without `+FULLRESYNC` (the engine's; Valkey `syncCommand`).
        Cmd::Psync | Cmd::Sync => {
            crate::repl::psync(shared, ctx.state, ctx.client, args, ctx.out, now)
        }
        Cmd::Publish | Cmd::Spublish => {
            let shard = cmd == Cmd::Spublish;
            let n = shared.publish_local(shard, args.get(1), args.get(2));
            crate::cluster::propagate_publish(ctx.state, shard, args.get(1), args.get(2));
            ctx.out.int(n);
        }
        Cmd::Pubsub => pubsub(shared, ctx.spec.name, args, ctx.out),
        Cmd::Slowlog => ctx.state.slowlog.command(args, ctx.out),
        Cmd::Latency if args.get(1).eq_ignore_ascii_case(b"histogram") => {
            ctx.state.slowlog.latency_histogram(args, ctx.out)
        }
        Cmd::Latency => ctx.state.latency.command(args, ctx.out),
        Cmd::Monitor => {
            if ctx.client.io_thread != usize::MAX {
                ctx.client.monitor = true;
                shared
                    .monitors
                    .add(ctx.client.io_thread, ctx.client.token, ctx.client.id);
            }
            ctx.out.ok();
        }
        Cmd::Subscribe | Cmd::Ssubscribe | Cmd::Psubscribe => {
            subscribe(shared, ctx.client, cmd, args, ctx.out)
        }
        Cmd::Punsubscribe => punsubscribe(shared, ctx.client, args, ctx.out),
        Cmd::Unsubscribe | Cmd::Sunsubscribe => unsubscribe(shared, ctx.client, cmd, args, ctx.out),
        Cmd::Cluster => {
            crate::cluster::cluster_command(shared, ctx.state, ctx.client, args, ctx.out, now)
        }
        Cmd::Debug => {
            let before = ctx.out.buf.len();
            debug(ctx.state, ctx.client, args, ctx.out, now);
            if eq(args.get(1), "populate") {
                legacy_write(ctx, before);
            }
        }
        Cmd::Dump => crate::legacy::dump_cmd(ctx.state, ctx.db, args, ctx.out, now),
        Cmd::Restore | Cmd::RestoreAsking => {
            let before = ctx.out.buf.len();
            crate::legacy::restore_cmd(ctx.state, ctx.db, args, ctx.out, now);
            legacy_write(ctx, before);
        }
        Cmd::Migrate => {
            let before = ctx.out.buf.len();
            crate::legacy::migrate_cmd(shared, ctx.state, ctx.client, args, ctx.out, now);
            legacy_write(ctx, before);
        }
        Cmd::Ferrocluster => crate::readiness::command(ctx.state, args, ctx.out, now),
        Cmd::Get
        | Cmd::Set
        | Cmd::Setnx
        | Cmd::Setex
        | Cmd::Psetex
        | Cmd::Getdel
        | Cmd::Getex
        | Cmd::Getset
        | Cmd::Getrange
        | Cmd::Substr
        | Cmd::Setrange
        | Cmd::Mget
        | Cmd::Mset
        | Cmd::Msetnx
        | Cmd::Incr
        | Cmd::Decr
        | Cmd::Incrby
        | Cmd::Decrby
        | Cmd::Incrbyfloat
        | Cmd::Append
        | Cmd::Strlen
        | Cmd::Lcs => crate::cmd::string::run(ctx),
        Cmd::Hset
        | Cmd::Hmset
        | Cmd::Hsetnx
        | Cmd::Hget
        | Cmd::Hmget
        | Cmd::Hdel
        | Cmd::Hexists
        | Cmd::Hlen
        | Cmd::Hstrlen
        | Cmd::Hincrby
        | Cmd::Hincrbyfloat
        | Cmd::Hkeys
        | Cmd::Hvals
        | Cmd::Hgetall
        | Cmd::Hrandfield
        | Cmd::Hscan => crate::cmd::hash::run(ctx),
        Cmd::Sadd
        | Cmd::Srem
        | Cmd::Scard
        | Cmd::Sismember
        | Cmd::Smismember
        | Cmd::Smembers
        | Cmd::Srandmember
        | Cmd::Spop
        | Cmd::Smove
        | Cmd::Sinter
        | Cmd::Sintercard
        | Cmd::Sinterstore
        | Cmd::Sunion
        | Cmd::Sunionstore
        | Cmd::Sdiff
        | Cmd::Sdiffstore
        | Cmd::Sscan => crate::cmd::set::run(ctx),
        Cmd::Lpush
        | Cmd::Rpush
        | Cmd::Lpushx
        | Cmd::Rpushx
        | Cmd::Linsert
        | Cmd::Llen
        | Cmd::Lindex
        | Cmd::Lset
        | Cmd::Lrange
        | Cmd::Ltrim
        | Cmd::Lrem
        | Cmd::Lpos
        | Cmd::Lpop
        | Cmd::Rpop
        | Cmd::Lmove
        | Cmd::Rpoplpush
        | Cmd::Lmpop
        | Cmd::Blmpop
        | Cmd::Blpop
        | Cmd::Brpop
        | Cmd::Blmove
        | Cmd::Brpoplpush => crate::cmd::list::run(ctx),
        Cmd::Zadd
        | Cmd::Zincrby
        | Cmd::Zrem
        | Cmd::Zcard
        | Cmd::Zscore
        | Cmd::Zmscore
        | Cmd::Zrank
        | Cmd::Zrevrank
        | Cmd::Zcount
        | Cmd::Zlexcount
        | Cmd::Zrange
        | Cmd::Zrangestore
        | Cmd::Zrevrange
        | Cmd::Zrangebyscore
        | Cmd::Zrevrangebyscore
        | Cmd::Zrangebylex
        | Cmd::Zrevrangebylex
        | Cmd::Zremrangebyrank
        | Cmd::Zremrangebyscore
        | Cmd::Zremrangebylex
        | Cmd::Zpopmin
        | Cmd::Zpopmax
        | Cmd::Bzpopmin
        | Cmd::Bzpopmax
        | Cmd::Zmpop
        | Cmd::Bzmpop
        | Cmd::Zrandmember
        | Cmd::Zscan
        | Cmd::Zunion
        | Cmd::Zinter
        | Cmd::Zdiff
        | Cmd::Zunionstore
        | Cmd::Zinterstore
        | Cmd::Zdiffstore
        | Cmd::Zintercard => crate::cmd::zset::run(ctx),
        Cmd::Del
        | Cmd::Unlink
        | Cmd::Exists
        | Cmd::Type
        | Cmd::Keys
        | Cmd::Scan
        | Cmd::Randomkey
        | Cmd::Rename
        | Cmd::Renamenx
        | Cmd::Copy
        | Cmd::Move
        | Cmd::Touch
        | Cmd::Object
        | Cmd::Memory
        | Cmd::Expire
        | Cmd::Pexpire
        | Cmd::Expireat
        | Cmd::Pexpireat
        | Cmd::Expiretime
        | Cmd::Pexpiretime
        | Cmd::Ttl
        | Cmd::Pttl
        | Cmd::Persist
        | Cmd::Sort
        | Cmd::SortRo
        | Cmd::Dbsize
        | Cmd::Flushdb
        | Cmd::Flushall
        | Cmd::Swapdb => crate::cmd::keyspace::run(ctx),
    }
    Flow::Continue
}

/// `RESET`: the connection's state back to a new one's (Redis `resetCommand`): MULTI
/// discarded, WATCHes dropped, database 0, READWRITE, no ASKING, unsubscribed, RESP2.
fn reset(ctx: &mut Ctx<'_, '_>) {
    let c = &mut *ctx.client;
    c.multi = None;
    c.multi_error = false;
    c.db = 0;
    c.readonly = false;
    c.asking = false;
    c.name = None;
    crate::cmd::txn::unwatch(ctx.state, ctx.client.id);
    ctx.client.drop_subscriptions(ctx.shared);
    if std::mem::take(&mut ctx.client.monitor) {
        ctx.shared.monitors.remove(ctx.client.id);
    }
    // Valkey `clearClientConnectionState`: tracking off, replies on.
    ctx.state.tracking.disable(ctx.client.id);
    ctx.client.tracking_redir = None;
    ctx.client.caching = None;
    // OFF and SKIP-next end; a SKIP in force (the reply of this RESET) stays, as Valkey
    // clears `reply_off` and `reply_skip_next` only.
    if ctx.client.reply != crate::client::ReplyMode::Skip {
        ctx.client.reply = crate::client::ReplyMode::On;
    }
    // Valkey `clientSetDefaultAuth`: back to the default user.
    ctx.client.user = b"default".to_vec();
    ctx.client.user_incarnation = ctx.state.acl.incarnation(b"default");
    ctx.client.authed = ctx.state.acl.default_open();
    ctx.out.proto = 2;
    ctx.out.simple("RESET");
}

fn exec(ctx: &mut Ctx<'_, '_>) -> Flow {
    let Some(queue) = ctx.client.multi.take() else {
        ctx.error("ERR EXEC without MULTI");
        return Flow::Continue;
    };
    if std::mem::take(&mut ctx.client.multi_error) {
        crate::cmd::txn::unwatch(ctx.state, ctx.client.id);
        ctx.error("EXECABORT Transaction discarded because of previous errors.");
        return Flow::Continue;
    }
    // `run` evicted before this EXEC; still over the limit, a queue that may grow memory is
    // refused whole.
    let limit = ctx.state.evict.settings().bytes;
    if limit > 0 && !ctx.state.repl.is_replica() && ctx.state.kv.memory_bytes() > limit {
        let denyoom = queue.iter().any(|cmd| {
            let ranges: Vec<std::ops::Range<usize>> = {
                let mut at = 0;
                cmd.iter()
                    .map(|a| {
                        at += a.len();
                        at - a.len()..at
                    })
                    .collect()
            };
            let flat = cmd.concat();
            resolve(&Args::new(&flat, &ranges)).is_ok_and(|s| s.has(CommandFlags::DENYOOM))
        });
        if denyoom {
            crate::cmd::txn::unwatch(ctx.state, ctx.client.id);
            ctx.error(EXEC_OOM);
            return Flow::Continue;
        }
    }
    if crate::cmd::txn::exec_aborts(ctx.state, ctx.client.id, ctx.now) {
        ctx.out.null_array();
        return Flow::Continue;
    }
    ctx.out.array(queue.len());
    let mut ranges = Vec::new();
    let mut flat = Vec::new();
    // Queued blocking commands answer at once; blocked clients are served after EXEC.
    ctx.client.in_exec = true;
    // The writes go to replicas and the AOF as one unit (`MULTI` ... `EXEC`).
    let unit = ctx.state.repl.begin_unit();
    for cmd in &queue {
        flat.clear();
        ranges.clear();
        for a in cmd {
            let start = flat.len();
            flat.extend_from_slice(a);
            ranges.push(start..flat.len());
        }
        let args = Args::new(&flat, &ranges);
        // Lookup and arity were checked when the command was queued.
        match resolve(&args) {
            Ok(spec) => {
                if !crate::acl::exec_denied(
                    ctx.state, ctx.client, spec.info, &args, ctx.out, ctx.now,
                ) {
                    run(
                        ctx.shared, ctx.state, ctx.client, &spec, &args, ctx.out, ctx.now,
                    );
                }
            }
            Err(e) => ctx.out.buf.extend_from_slice(&e.to_resp()),
        }
    }
    ctx.client.in_exec = false;
    if unit {
        ctx.state.repl.end_unit(ctx.now);
    }
    Flow::Continue
}

/// MULTI, EXEC and DISCARD in cluster mode: the command crate's client state keeps the
/// transaction and its queue (`crate::cluster::dispatch`); an EXEC's queue runs here
/// ([`exec_queue`]). EXEC and DISCARD end any WATCH.
fn cluster_txn(ctx: &mut Ctx<'_, '_>) -> Flow {
    let ends = matches!(ctx.spec.cmd, Cmd::Exec | Cmd::Discard);
    match crate::cluster::dispatch(ctx.state, ctx.client, ctx.args, ctx.out) {
        crate::cluster::ClusterDispatch::Done => {}
        crate::cluster::ClusterDispatch::Exec(queue) => exec_queue(ctx, queue),
        // The client state never hands MULTI, EXEC or DISCARD back as a plain command.
        crate::cluster::ClusterDispatch::Run => ctx.error("ERR transaction state lost"),
    }
    if ends {
        crate::cmd::txn::unwatch(ctx.state, ctx.client.id);
    }
    Flow::Continue
}

/// Runs a cluster-mode EXEC's queue (connection commands such as SELECT on the client
/// state, the others through [`run`]), its writes propagated as one unit.
fn exec_queue(ctx: &mut Ctx<'_, '_>, queue: Vec<ferrocluster_command::QueuedCommand>) {
    let (shared, now) = (ctx.shared, ctx.now);
    let (state, client, out) = (&mut *ctx.state, &mut *ctx.client, &mut *ctx.out);
    let denyoom = queue
        .iter()
        .any(|q| crate::cluster::queued_spec(q).is_some_and(|s| s.has(CommandFlags::DENYOOM)));
    if over_maxmemory(shared, state, client, denyoom, now) {
        out.error(EXEC_OOM);
        return;
    }
    if crate::cmd::txn::exec_aborts(state, client.id, now) {
        out.null_array();
        return;
    }
    out.array(queue.len());
    client.in_exec = true;
    let unit = state.repl.begin_unit();
    let databases = state.kv.databases();
    let mut ranges = Vec::new();
    let mut flat = Vec::new();
    for q in &queue {
        let applied = client
            .cluster
            .as_mut()
            .and_then(|cs| cs.apply_connection_command(q, databases));
        if let Some(cs) = client.cluster.as_ref() {
            client.db = cs.db();
        }
        match applied {
            Some(Ok(())) => {
                out.ok();
                continue;
            }
            Some(Err(e)) => {
                out.buf.extend_from_slice(&e.to_resp());
                continue;
            }
            None => {}
        }
        flat.clear();
        ranges.clear();
        for a in q.argv() {
            let start = flat.len();
            flat.extend_from_slice(a);
            ranges.push(start..flat.len());
        }
        let qargs = Args::new(&flat, &ranges);
        // `run` finds a container's subcommand row itself.
        match crate::cluster::queued_spec(q) {
            Some(spec) => {
                let row = if spec.info.subcommands.is_empty() {
                    Some(spec.info)
                } else {
                    resolve(&qargs).ok().map(|s| s.info)
                };
                let denied = row.is_some_and(|row| {
                    crate::acl::exec_denied(state, client, row, &qargs, out, now)
                });
                if !denied {
                    run(shared, state, client, spec, &qargs, out, now);
                }
            }
            None => {
                if let Err(e) = resolve(&qargs) {
                    out.buf.extend_from_slice(&e.to_resp());
                }
            }
        }
    }
    client.in_exec = false;
    if unit {
        state.repl.end_unit(now);
    }
}

/// `PUBSUB CHANNELS | SHARDCHANNELS [pattern]`, `NUMSUB | SHARDNUMSUB [channel ...]`,
/// `NUMPAT`, `HELP` (Valkey 9.1 `pubsubCommand`): this node's own subscriptions, as Valkey
/// answers in cluster mode too. NUMPAT counts distinct patterns.
fn pubsub(shared: &Shared, sub: &str, args: &Args<'_>, out: &mut Out) {
    let ps = shared.pubsub.read();
    match sub {
        "pubsub|help" => crate::admin::help(
            out,
            "PUBSUB",
            &[
                "CHANNELS [<pattern>]",
                "    Return the currently active channels matching a <pattern> (default: '*').",
                "NUMPAT",
                "    Return number of subscriptions to patterns.",
                "NUMSUB [<channel> ...]",
                "    Return the number of subscribers for the specified channels, excluding",
                "    pattern subscriptions(default: no channels).",
                "SHARDCHANNELS [<pattern>]",
                "    Return the currently active shard level channels matching a <pattern> (default: '*').",
                "SHARDNUMSUB [<shardchannel> ...]",
                "    Return the number of subscribers for the specified shard level channel(s)",
            ],
        ),
        "pubsub|channels" | "pubsub|shardchannels" if args.len() > 3 => out.error(&format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try PUBSUB HELP.",
            String::from_utf8_lossy(args.get(1))
        )),
        "pubsub|channels" | "pubsub|shardchannels" => {
            let shard = sub == "pubsub|shardchannels";
            let pattern = args.opt(2);
            let names: Vec<&[u8]> = ps
                .channels(shard)
                .filter(|c| crate::cmd::matches(pattern, c))
                .collect();
            out.array(names.len());
            for n in names {
                out.bulk(n);
            }
        }
        "pubsub|numsub" | "pubsub|shardnumsub" => {
            let shard = sub == "pubsub|shardnumsub";
            // A flat array of (channel, count) pairs in RESP3 too (not a map), as
            // redis-server 7.0 and valkey-server 9.1 reply.
            out.array(2 * (args.len() - 2));
            for i in 2..args.len() {
                out.bulk(args.get(i));
                out.int(ps.subscribers(shard, args.get(i)).len() as i64);
            }
        }
        _ => out.int(ps.pattern_count() as i64),
    }
}

/// SUBSCRIBE, SSUBSCRIBE, PSUBSCRIBE: one confirmation per name, with the connection's count
/// after it (channels + patterns; shard channels apart, Redis 7.0).
fn subscribe(shared: &Shared, client: &mut ClientCtx, cmd: Cmd, args: &Args<'_>, out: &mut Out) {
    let shard = cmd == Cmd::Ssubscribe;
    let pattern = cmd == Cmd::Psubscribe;
    let kind: &[u8] = match cmd {
        Cmd::Ssubscribe => b"ssubscribe",
        Cmd::Psubscribe => b"psubscribe",
        _ => b"subscribe",
    };
    let me = crate::server::Subscriber {
        client_id: client.id,
        io_thread: client.io_thread,
        token: client.token,
    };
    let mut ps = shared.pubsub.write();
    for i in 1..args.len() {
        let ch = args.get(i);
        let set = if shard {
            &mut client.shard_channels
        } else if pattern {
            &mut client.patterns
        } else {
            &mut client.channels
        };
        if set.insert(ch.to_vec()) {
            if pattern {
                ps.psubscribe(ch, me);
            } else {
                ps.subscribe(shard, ch, me);
            }
        }
        out.push(3);
        out.bulk(kind);
        out.bulk(ch);
        out.int(if shard {
            client.shard_channels.len()
        } else {
            client.channel_and_pattern_count()
        } as i64);
    }
}

/// PUNSUBSCRIBE [pattern ...]: the named patterns, or every one; one confirmation each, with
/// the count after it (a null pattern when there was none, Redis 7.0).
fn punsubscribe(shared: &Shared, client: &mut ClientCtx, args: &Args<'_>, out: &mut Out) {
    let names: Vec<Vec<u8>> = if args.len() > 1 {
        (1..args.len()).map(|i| args.get(i).to_vec()).collect()
    } else {
        client.patterns.iter().cloned().collect()
    };
    if names.is_empty() {
        out.push(3);
        out.bulk(b"punsubscribe");
        out.null();
        out.int(client.channel_and_pattern_count() as i64);
        return;
    }
    let mut ps = shared.pubsub.write();
    for p in names {
        if client.patterns.remove(&p) {
            ps.punsubscribe(&p, client.id);
        }
        out.push(3);
        out.bulk(b"punsubscribe");
        out.bulk(&p);
        out.int(client.channel_and_pattern_count() as i64);
    }
}

fn unsubscribe(shared: &Shared, client: &mut ClientCtx, cmd: Cmd, args: &Args<'_>, out: &mut Out) {
    let shard = cmd == Cmd::Sunsubscribe;
    let kind: &[u8] = if shard {
        b"sunsubscribe"
    } else {
        b"unsubscribe"
    };
    // The count after each channel includes the patterns, which UNSUBSCRIBE keeps.
    let patterns = client.patterns.len() as i64;
    let set = if shard {
        &mut client.shard_channels
    } else {
        &mut client.channels
    };
    let names: Vec<Vec<u8>> = if args.len() > 1 {
        (1..args.len()).map(|i| args.get(i).to_vec()).collect()
    } else {
        set.iter().cloned().collect()
    };
    if names.is_empty() {
        out.push(3);
        out.bulk(kind);
        out.null();
        out.int(if shard { 0 } else { patterns });
        return;
    }
    let mut ps = shared.pubsub.write();
    for ch in names {
        if set.remove(&ch) {
            ps.unsubscribe(shard, &ch, client.id);
        }
        out.push(3);
        out.bulk(kind);
        out.bulk(&ch);
        out.int(set.len() as i64 + if shard { 0 } else { patterns });
    }
}

fn debug(state: &mut State, client: &mut ClientCtx, args: &Args<'_>, out: &mut Out, now: u64) {
    let sub = args.get(1);
    if eq(sub, "populate") {
        let Some(count) = args.opt(2).and_then(parse_i64).filter(|n| *n >= 0) else {
            out.error(NOT_INT);
            return;
        };
        let prefix = args.opt(3).unwrap_or(b"key");
        let size = match args.opt(4) {
            Some(s) => match parse_i64(s).filter(|n| *n >= 0) {
                Some(n) => Some(n as usize),
                None => {
                    out.error(NOT_INT);
                    return;
                }
            },
            None => None,
        };
        let mut key = Vec::with_capacity(prefix.len() + 12);
        for i in 0..count {
            key.clear();
            key.extend_from_slice(prefix);
            key.push(b':');
            key.extend_from_slice(i.to_string().as_bytes());
            if matches!(state.kv.exists(client.db, &key, now), Ok(true)) {
                continue;
            }
            let mut val = format!("value:{i}").into_bytes();
            if let Some(size) = size {
                val.resize(size, 0);
            }
            let _ = state.kv.insert(client.db, &key, val.into(), now);
        }
        out.ok();
    } else if eq(sub, "help") {
        crate::admin::help(
            out,
            "DEBUG",
            &[
                "POPULATE <count> [<prefix>] [<size>]",
                "    Create <count> string keys named key:<num>. If <prefix> is specified then",
                "    it is used instead of the 'key' prefix. These are not propagated to",
                "    replicas. Cluster slots are not respected so keys not belonging to the",
                "    current node can be created in cluster mode.",
            ],
        );
    } else {
        out.error(&format!(
            "ERR unknown subcommand '{}'. Try DEBUG HELP.",
            String::from_utf8_lossy(sub)
        ));
    }
}

/// Runs one command of the replication stream (no routing, no reply kept).
pub fn run_replicated(
    shared: &Shared,
    state: &mut State,
    client: &mut ClientCtx,
    args: &Args<'_>,
    sink: &mut Out,
) {
    if let Ok(spec) = resolve(args) {
        run(shared, state, client, &spec, args, sink, unix_ms());
    }
    sink.buf.clear();
}

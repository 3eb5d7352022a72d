//! Command dispatch: the checks every command passes (lookup, arity, AUTH, subscribe context,
//! MULTI queueing, cluster routing) and the data commands over [`KvStore`].
//!
//! Error texts are redis-server 7.0's (vectors `*/text/errors.txt`, `index.json`).

use crate::client::{Args, ClientCtx, Flow};
use crate::resp::Out;
use crate::server::{unix_ms, Shared, State, Value};
use crate::table::{self, flag, Cmd, Spec};
use ferrocluster_kvstore::{KeyExpiry, KvStore, ScanOptions};

/// `ERR value is not an integer or out of range`
pub const NOT_INT: &str = "ERR value is not an integer or out of range";
/// `ERR syntax error`
pub const SYNTAX: &str = "ERR syntax error";

/// Parses a strict decimal i64 as redis-server's `string2ll` does (no `+`, no spaces).
pub fn parse_i64(b: &[u8]) -> Option<i64> {
    if b.is_empty() || b.len() > 20 || b[0] == b'+' {
        return None;
    }
    if b.len() > 1 && (b[0] == b'0' || (b[0] == b'-' && b[1] == b'0')) {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

fn eq(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
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
    let name = args.get(0);
    let found = table::lookup(name);
    if state.cluster.is_some() && !found.is_some_and(|s| crate::cluster::bypasses_router(s.cmd)) {
        return execute_cluster(shared, state, client, found, args, out, now);
    }
    let Some(spec) = found else {
        let mut msg = format!(
            "ERR unknown command '{}', with args beginning with: ",
            String::from_utf8_lossy(&name[..name.len().min(128)])
        );
        for i in 1..args.len().min(16) {
            let a = args.get(i);
            msg.push('\'');
            msg.push_str(&String::from_utf8_lossy(&a[..a.len().min(128)]));
            msg.push_str("' ");
        }
        if client.multi.is_some() {
            client.multi_error = true;
        }
        out.error(&msg);
        return Flow::Continue;
    };
    if !spec.arity_ok(args.len()) {
        if client.multi.is_some() {
            client.multi_error = true;
        }
        out.error(&format!(
            "ERR wrong number of arguments for '{}' command",
            spec.name
        ));
        return Flow::Continue;
    }
    if !client.authed && spec.flags & flag::NO_AUTH == 0 {
        out.error("NOAUTH Authentication required.");
        return Flow::Continue;
    }
    if !out.resp3() && client.subscriptions() > 0 && spec.flags & flag::SUB_OK == 0 {
        out.error(&format!(
            "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            spec.name
        ));
        return Flow::Continue;
    }
    client.last_cmd = spec.name;
    // Cluster routing (MOVED/ASK/TRYAGAIN/CROSSSLOT/CLUSTERDOWN) happens before queueing, as
    // in redis-server's processCommand.
    if let Some(err) = crate::cluster::route_request(state, client, spec, args, now) {
        if client.multi.is_some() {
            client.multi_error = true;
        }
        client.asking = false;
        out.error(&err);
        return Flow::Continue;
    }
    if let Some(queue) = client.multi.as_mut() {
        if spec.flags & flag::NO_MULTI == 0 && spec.cmd != Cmd::Wait {
            queue.push(args.to_owned_vec());
            client.asking = false;
            out.simple("QUEUED");
            return Flow::Continue;
        }
    }
    let flow = run(shared, state, client, spec, args, out, now);
    if spec.cmd != Cmd::Asking {
        client.asking = false;
    }
    flow
}

fn unknown_command(args: &Args<'_>, out: &mut Out) {
    let name = args.get(0);
    let mut msg = format!(
        "ERR unknown command '{}', with args beginning with: ",
        String::from_utf8_lossy(&name[..name.len().min(128)])
    );
    for i in 1..args.len().min(16) {
        let a = args.get(i);
        msg.push('\'');
        msg.push_str(&String::from_utf8_lossy(&a[..a.len().min(128)]));
        msg.push_str("' ");
    }
    out.error(&msg);
}

/// Cluster mode: the command crate's client state machine and router decide first.
fn execute_cluster(
    shared: &Shared,
    state: &mut State,
    client: &mut ClientCtx,
    spec: Option<&'static Spec>,
    args: &Args<'_>,
    out: &mut Out,
    now: u64,
) -> Flow {
    if client.migration_conn && crate::migrate::is_import_link(state, client) {
        // A slot import link: applied like a primary link, replies off (sheet A.8).
        crate::migrate::run_import_command(shared, state, client, args, now);
        return Flow::Continue;
    }
    let no_auth_ok = spec.is_some_and(|s| s.flags & flag::NO_AUTH != 0);
    if !client.authed && !no_auth_ok {
        out.error("NOAUTH Authentication required.");
        return Flow::Continue;
    }
    if !out.resp3()
        && client.subscriptions() > 0
        && spec.is_none_or(|s| s.flags & flag::SUB_OK == 0)
    {
        out.error(&format!(
            "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            String::from_utf8_lossy(args.get(0)).to_ascii_lowercase()
        ));
        return Flow::Continue;
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
    match crate::cluster::dispatch(state, client, args, out) {
        crate::cluster::ClusterDispatch::Done => Flow::Continue,
        crate::cluster::ClusterDispatch::Run => match spec {
            Some(spec) if spec.arity_ok(args.len()) => {
                client.last_cmd = spec.name;
                run(shared, state, client, spec, args, out, now)
            }
            Some(spec) => {
                out.error(&format!(
                    "ERR wrong number of arguments for '{}' command",
                    spec.name
                ));
                Flow::Continue
            }
            None => {
                unknown_command(args, out);
                Flow::Continue
            }
        },
        crate::cluster::ClusterDispatch::Exec(queue) => {
            use ferrocluster_command::ErrorReply;
            out.array(queue.len());
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
                match crate::cluster::queued_spec(q) {
                    Some(spec) if spec.arity_ok(qargs.len()) => {
                        run(shared, state, client, spec, &qargs, out, now);
                    }
                    _ => unknown_command(&qargs, out),
                }
            }
            Flow::Continue
        }
    }
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
    // The same context `crate::cluster::dispatch` uses.
    let ctx = crate::cluster::routing_ctx(side);
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
    let routed = ferrocluster_command::route(routed, &argv[..args.len()], cs, &ctx, &keys);
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

/// Runs a command that passed the checks. Also used for EXEC and the replication stream.
pub fn run(
    shared: &Shared,
    state: &mut State,
    client: &mut ClientCtx,
    spec: &'static Spec,
    args: &Args<'_>,
    out: &mut Out,
    now: u64,
) -> Flow {
    state.commands_processed += 1;
    let before = out.buf.len();
    match spec.cmd {
        Cmd::Ping => {
            if client.subscriptions() > 0 && !out.resp3() {
                out.array(2);
                out.bulk(b"pong");
                out.bulk(args.opt(1).unwrap_or(b""));
            } else if args.len() > 2 {
                out.error("ERR wrong number of arguments for 'ping' command");
            } else if let Some(m) = args.opt(1) {
                out.bulk(m);
            } else {
                out.simple("PONG");
            }
        }
        Cmd::Echo => out.bulk(args.get(1)),
        Cmd::Quit => {
            out.ok();
            return Flow::Close;
        }
        Cmd::Hello => crate::admin::hello(shared, state, client, args, out),
        Cmd::Auth => crate::admin::auth(shared, client, args, out),
        Cmd::Client => crate::admin::client(shared, client, args, out, now),
        Cmd::Command => crate::admin::command(args, out),
        Cmd::Info => crate::admin::info(shared, state, args, out, now),
        Cmd::Config => crate::admin::config(shared, state, client, args, out, now),
        Cmd::Role => crate::repl::role_reply(state, out),
        Cmd::Time => {
            let us = now * 1000;
            out.array(2);
            out.bulk_int((us / 1_000_000) as i64);
            out.bulk_int((us % 1_000_000) as i64);
        }
        Cmd::Lastsave => out.int((shared.start_ms / 1000) as i64),
        // Cluster mode answers SELECT in `ferrocluster_command::ClientState` (Valkey 9: `DB
        // index is out of range` beyond `cluster-databases`, where Redis 7.0 said `SELECT is
        // not allowed in cluster mode`); this is the standalone mode's.
        Cmd::Select => match parse_i64(args.get(1)) {
            None => out.error(NOT_INT),
            Some(n) if n < 0 || n as usize >= state.kv.databases() => {
                out.error("ERR DB index is out of range")
            }
            Some(n) => {
                client.db = n as usize;
                out.ok()
            }
        },
        Cmd::Multi => {
            if client.multi.is_some() {
                out.error("ERR MULTI calls can not be nested");
            } else {
                client.multi = Some(Vec::new());
                client.multi_error = false;
                out.ok();
            }
        }
        Cmd::Discard => {
            if client.multi.take().is_some() {
                client.multi_error = false;
                out.ok();
            } else {
                out.error("ERR DISCARD without MULTI");
            }
        }
        Cmd::Exec => return exec(shared, state, client, out, now),
        Cmd::Readonly => {
            client.readonly = true;
            out.ok();
        }
        Cmd::Readwrite => {
            client.readonly = false;
            out.ok();
        }
        Cmd::Asking => {
            client.asking = true;
            out.ok();
        }
        Cmd::Wait => crate::repl::wait(shared, state, client, args, out, now),
        Cmd::Replconf => crate::repl::replconf(shared, state, client, args, out),
        Cmd::Psync => crate::repl::psync(shared, state, client, args, out, now),
        Cmd::Publish | Cmd::Spublish => {
            let shard = spec.cmd == Cmd::Spublish;
            let n = shared.publish_local(shard, args.get(1), args.get(2));
            crate::cluster::propagate_publish(state, shard, args.get(1), args.get(2));
            out.int(n);
        }
        Cmd::Subscribe | Cmd::Ssubscribe => subscribe(shared, client, spec.cmd, args, out),
        Cmd::Unsubscribe | Cmd::Sunsubscribe => unsubscribe(shared, client, spec.cmd, args, out),
        Cmd::Cluster => crate::cluster::cluster_command(shared, state, client, args, out, now),
        Cmd::Debug => debug(state, client, args, out, now),
        Cmd::Dump => crate::legacy::dump_cmd(state, client.db, args, out, now),
        Cmd::Restore | Cmd::RestoreAsking => {
            crate::legacy::restore_cmd(state, client.db, args, out, now)
        }
        Cmd::Migrate => crate::legacy::migrate_cmd(state, client, args, out, now),
        Cmd::Ferrocluster => crate::readiness::command(state, args, out, now),
        _ => data(shared, state, client, spec, args, out, now),
    }
    let wrote_error = out.buf.get(before) == Some(&b'-');
    if spec.is_write() && !wrote_error {
        crate::repl::propagate(state, client.db, spec, args, now);
        if matches!(spec.cmd, Cmd::Flushdb | Cmd::Flushall) {
            crate::migrate::on_flush(state);
        }
    }
    Flow::Continue
}

fn exec(
    shared: &Shared,
    state: &mut State,
    client: &mut ClientCtx,
    out: &mut Out,
    now: u64,
) -> Flow {
    let Some(queue) = client.multi.take() else {
        out.error("ERR EXEC without MULTI");
        return Flow::Continue;
    };
    if std::mem::take(&mut client.multi_error) {
        out.error("EXECABORT Transaction discarded because of previous errors.");
        return Flow::Continue;
    }
    out.array(queue.len());
    let mut ranges = Vec::new();
    let mut flat = Vec::new();
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
        if let Some(spec) = table::lookup(args.get(0)) {
            run(shared, state, client, spec, &args, out, now);
        }
    }
    Flow::Continue
}

fn subscribe(shared: &Shared, client: &mut ClientCtx, cmd: Cmd, args: &Args<'_>, out: &mut Out) {
    let shard = cmd == Cmd::Ssubscribe;
    let kind: &[u8] = if shard { b"ssubscribe" } else { b"subscribe" };
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
        } else {
            &mut client.channels
        };
        if set.insert(ch.to_vec()) {
            ps.subscribe(shard, ch, me);
        }
        out.push(3);
        out.bulk(kind);
        out.bulk(ch);
        out.int(if shard {
            client.shard_channels.len()
        } else {
            client.channels.len()
        } as i64);
    }
}

fn unsubscribe(shared: &Shared, client: &mut ClientCtx, cmd: Cmd, args: &Args<'_>, out: &mut Out) {
    let shard = cmd == Cmd::Sunsubscribe;
    let kind: &[u8] = if shard {
        b"sunsubscribe"
    } else {
        b"unsubscribe"
    };
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
        out.int(0);
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
        out.int(set.len() as i64);
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

/// Lazy expiry bookkeeping: whether `key` was present but expired (counted as expired).
fn note_lookup(state: &mut State, found: bool) {
    if found {
        state.keyspace_hits += 1;
    } else {
        state.keyspace_misses += 1;
    }
}

#[derive(Clone, Copy)]
enum SetExpiry {
    None,
    Keep,
    At(u64),
}

fn parse_expire_value(
    b: &[u8],
    unit_ms: u64,
    absolute: bool,
    now: u64,
    cmd: &str,
) -> Result<u64, String> {
    let n = parse_i64(b).ok_or_else(|| NOT_INT.to_string())?;
    let invalid = || format!("ERR invalid expire time in '{cmd}' command");
    if n <= 0 {
        return Err(invalid());
    }
    // Redis (t_string.c getExpireMillisecondsOrReply): the value in ms must fit a signed
    // 64-bit integer, for absolute (EXAT/PXAT) as for relative deadlines.
    let ms = (n as u64)
        .checked_mul(unit_ms)
        .filter(|ms| *ms <= i64::MAX as u64)
        .ok_or_else(invalid)?;
    if absolute {
        Ok(ms)
    } else {
        ms.checked_add(now)
            .filter(|t| *t < i64::MAX as u64)
            .ok_or_else(invalid)
    }
}

fn string_value(state: &State, db: usize, key: &[u8], now: u64) -> Option<Value> {
    state.kv.get(db, key, now).ok().flatten().cloned()
}

fn deadline(kv: &KvStore<Value>, db: usize, key: &[u8], now: u64) -> Option<u64> {
    match kv.expiry(db, key, now) {
        Ok(KeyExpiry::At(t)) => Some(t),
        _ => None,
    }
}

#[allow(clippy::too_many_arguments)]
fn data(
    shared: &Shared,
    state: &mut State,
    client: &mut ClientCtx,
    spec: &Spec,
    args: &Args<'_>,
    out: &mut Out,
    now: u64,
) {
    let db = client.db;
    match spec.cmd {
        Cmd::Get => {
            let v = state.kv.get(db, args.get(1), now).ok().flatten();
            match v {
                Some(v) => {
                    out.bulk(v);
                    state.keyspace_hits += 1;
                }
                None => {
                    out.null();
                    state.keyspace_misses += 1;
                }
            }
        }
        Cmd::Set => set(state, db, args, out, now),
        Cmd::Setnx => {
            let exists = matches!(state.kv.exists(db, args.get(1), now), Ok(true));
            if !exists {
                let _ = state.kv.insert(db, args.get(1), args.get(2).into(), now);
            }
            out.int(i64::from(!exists));
        }
        Cmd::Setex | Cmd::Psetex => {
            let (unit, name) = if spec.cmd == Cmd::Setex {
                (1000, "setex")
            } else {
                (1, "psetex")
            };
            match parse_expire_value(args.get(2), unit, false, now, name) {
                Ok(at) => {
                    let _ = state.kv.insert_with_expiry(
                        db,
                        args.get(1),
                        args.get(3).into(),
                        Some(at),
                        now,
                    );
                    out.ok();
                }
                Err(e) => out.error(&e),
            }
        }
        Cmd::Getdel => match state.kv.remove(db, args.get(1), now).ok().flatten() {
            Some(v) => out.bulk(&v),
            None => out.null(),
        },
        Cmd::Getset => {
            match state
                .kv
                .insert(db, args.get(1), args.get(2).into(), now)
                .ok()
                .flatten()
            {
                Some(v) => out.bulk(&v),
                None => out.null(),
            }
        }
        Cmd::Mget => {
            out.array(args.len() - 1);
            for i in 1..args.len() {
                match state.kv.get(db, args.get(i), now).ok().flatten() {
                    Some(v) => out.bulk(v),
                    None => out.null(),
                }
            }
        }
        Cmd::Mset | Cmd::Msetnx => {
            if args.len().is_multiple_of(2) {
                out.error(&format!(
                    "ERR wrong number of arguments for '{}' command",
                    spec.name
                ));
                return;
            }
            if spec.cmd == Cmd::Msetnx {
                let any = (1..args.len())
                    .step_by(2)
                    .any(|i| matches!(state.kv.exists(db, args.get(i), now), Ok(true)));
                if any {
                    out.int(0);
                    return;
                }
            }
            for i in (1..args.len()).step_by(2) {
                let _ = state
                    .kv
                    .insert(db, args.get(i), args.get(i + 1).into(), now);
            }
            if spec.cmd == Cmd::Msetnx {
                out.int(1);
            } else {
                out.ok();
            }
        }
        Cmd::Del | Cmd::Unlink => {
            let mut n = 0;
            for i in 1..args.len() {
                if let Ok(Some(_)) = state.kv.remove(db, args.get(i), now) {
                    n += 1;
                }
            }
            out.int(n);
        }
        Cmd::Exists => {
            let mut n = 0;
            for i in 1..args.len() {
                if matches!(state.kv.exists(db, args.get(i), now), Ok(true)) {
                    n += 1;
                }
            }
            out.int(n);
        }
        Cmd::Incr | Cmd::Decr | Cmd::Incrby | Cmd::Decrby => {
            let by = match spec.cmd {
                Cmd::Incr => 1,
                Cmd::Decr => -1,
                _ => match parse_i64(args.get(2)) {
                    Some(n) if spec.cmd == Cmd::Incrby => n,
                    Some(n) if n != i64::MIN => -n,
                    Some(_) => {
                        out.error("ERR decrement would overflow");
                        return;
                    }
                    None => {
                        out.error(NOT_INT);
                        return;
                    }
                },
            };
            incr(state, db, args.get(1), by, out, now);
        }
        Cmd::Append => {
            let key = args.get(1);
            let add = args.get(2);
            let appended = match state.kv.get_mut(db, key, now).ok().flatten() {
                Some(mut v) => {
                    let mut joined = Vec::with_capacity(v.len() + add.len());
                    joined.extend_from_slice(&v);
                    joined.extend_from_slice(add);
                    *v = joined.into();
                    Some(v.len())
                }
                None => None,
            };
            let len = match appended {
                Some(n) => n,
                None => {
                    let _ = state.kv.insert(db, key, add.into(), now);
                    add.len()
                }
            };
            out.int(len as i64);
        }
        Cmd::Strlen => {
            let n = state
                .kv
                .get(db, args.get(1), now)
                .ok()
                .flatten()
                .map_or(0, |v| v.len());
            out.int(n as i64);
        }
        Cmd::Expire | Cmd::Pexpire | Cmd::Expireat | Cmd::Pexpireat => {
            expire(state, db, spec, args, out, now)
        }
        Cmd::Ttl | Cmd::Pttl => {
            let r = match state.kv.expiry(db, args.get(1), now) {
                Ok(KeyExpiry::At(t)) => {
                    let ms = t.saturating_sub(now) as i64;
                    if spec.cmd == Cmd::Ttl {
                        (ms + 500) / 1000
                    } else {
                        ms
                    }
                }
                Ok(KeyExpiry::Persistent) => -1,
                _ => -2,
            };
            out.int(r);
        }
        Cmd::Persist => {
            let had = state.kv.persist(db, args.get(1), now).unwrap_or(false);
            out.int(i64::from(had));
        }
        Cmd::Type => {
            let found = state.kv.get(db, args.get(1), now).ok().flatten().is_some();
            note_lookup(state, found);
            out.simple(if found { "string" } else { "none" });
        }
        Cmd::Keys => match state.kv.keys(db, args.get(1), now) {
            Ok(keys) => {
                out.array(keys.len());
                for k in keys {
                    out.bulk(&k);
                }
            }
            Err(e) => out.error(&format!("ERR {e}")),
        },
        Cmd::Scan => scan(state, db, args, out, now),
        Cmd::Dbsize => out.int(state.kv.dbsize(db).unwrap_or(0) as i64),
        Cmd::Randomkey => {
            let State { kv, rng, .. } = state;
            match kv.random_key(db, now, rng).ok().flatten() {
                Some(k) => out.bulk(&k),
                None => out.null(),
            }
        }
        Cmd::Flushdb | Cmd::Flushall => {
            if let Some(opt) = args.opt(1) {
                if args.len() > 2 || !(eq(opt, "async") || eq(opt, "sync")) {
                    out.error(SYNTAX);
                    return;
                }
            }
            if spec.cmd == Cmd::Flushdb {
                let _ = state.kv.flush_db(db);
            } else {
                state.kv.flush_all();
            }
            out.ok();
        }
        Cmd::Swapdb => {
            if shared.config.cluster_enabled && state.kv.databases() == 1 {
                out.error("ERR SWAPDB is not allowed in cluster mode");
                return;
            }
            let (Some(a), Some(b)) = (parse_i64(args.get(1)), parse_i64(args.get(2))) else {
                out.error("ERR invalid first DB index");
                return;
            };
            let n = state.kv.databases() as i64;
            if a < 0 || b < 0 || a >= n || b >= n {
                out.error("ERR DB index is out of range");
                return;
            }
            let _ = state.kv.swap_db(a as usize, b as usize);
            out.ok();
        }
        _ => out.error("ERR command not handled"),
    }
}

fn set(state: &mut State, db: usize, args: &Args<'_>, out: &mut Out, now: u64) {
    let (mut nx, mut xx, mut get) = (false, false, false);
    let mut expiry = SetExpiry::None;
    let mut expiry_given = false;
    let mut i = 3;
    while i < args.len() {
        let a = args.get(i);
        let next = args.opt(i + 1);
        if eq(a, "nx") && !xx {
            nx = true;
        } else if eq(a, "xx") && !nx {
            xx = true;
        } else if eq(a, "get") {
            get = true;
        } else if eq(a, "keepttl") && !expiry_given {
            expiry = SetExpiry::Keep;
            expiry_given = true;
        } else if (eq(a, "ex") || eq(a, "px") || eq(a, "exat") || eq(a, "pxat"))
            && !expiry_given
            && next.is_some()
        {
            let unit = if eq(a, "ex") || eq(a, "exat") {
                1000
            } else {
                1
            };
            let absolute = eq(a, "exat") || eq(a, "pxat");
            match parse_expire_value(next.unwrap_or_default(), unit, absolute, now, "set") {
                Ok(at) => expiry = SetExpiry::At(at),
                Err(e) => {
                    out.error(&e);
                    return;
                }
            }
            expiry_given = true;
            i += 1;
        } else {
            out.error(SYNTAX);
            return;
        }
        i += 1;
    }
    let key = args.get(1);
    let old = if get || nx || xx || matches!(expiry, SetExpiry::Keep) {
        string_value(state, db, key, now)
    } else {
        None
    };
    let exists = old.is_some();
    if (nx && exists) || (xx && !exists) {
        if get {
            match old {
                Some(v) => out.bulk(&v),
                None => out.null(),
            }
        } else {
            out.null();
        }
        return;
    }
    let at = match expiry {
        SetExpiry::None => None,
        SetExpiry::Keep => deadline(&state.kv, db, key, now),
        SetExpiry::At(t) => Some(t),
    };
    let _ = state
        .kv
        .insert_with_expiry(db, key, args.get(2).into(), at, now);
    if get {
        match old {
            Some(v) => out.bulk(&v),
            None => out.null(),
        }
    } else {
        out.ok();
    }
}

fn incr(state: &mut State, db: usize, key: &[u8], by: i64, out: &mut Out, now: u64) {
    let result = match state.kv.get_mut(db, key, now).ok().flatten() {
        Some(mut v) => match parse_i64(&v) {
            None => Some(Err(NOT_INT)),
            Some(cur) => match cur.checked_add(by) {
                None => Some(Err("ERR increment or decrement would overflow")),
                Some(new) => {
                    *v = new.to_string().into_bytes().into();
                    Some(Ok(new))
                }
            },
        },
        None => None,
    };
    match result {
        Some(Ok(n)) => out.int(n),
        Some(Err(e)) => out.error(e),
        None => {
            let _ = state
                .kv
                .insert(db, key, by.to_string().into_bytes().into(), now);
            out.int(by);
        }
    }
}

fn expire(state: &mut State, db: usize, spec: &Spec, args: &Args<'_>, out: &mut Out, now: u64) {
    let (unit, absolute) = match spec.cmd {
        Cmd::Expire => (1000u64, false),
        Cmd::Pexpire => (1, false),
        Cmd::Expireat => (1000, true),
        _ => (1, true),
    };
    let Some(n) = parse_i64(args.get(2)) else {
        out.error(NOT_INT);
        return;
    };
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for i in 3..args.len() {
        let a = args.get(i);
        if eq(a, "nx") {
            nx = true;
        } else if eq(a, "xx") {
            xx = true;
        } else if eq(a, "gt") {
            gt = true;
        } else if eq(a, "lt") {
            lt = true;
        } else {
            out.error(&format!(
                "ERR Unsupported option {}",
                String::from_utf8_lossy(a)
            ));
            return;
        }
    }
    if nx && (xx || gt || lt) {
        out.error("ERR NX and XX, GT or LT options at the same time are not compatible");
        return;
    }
    if gt && lt {
        out.error("ERR GT and LT options at the same time are not compatible");
        return;
    }
    let invalid = format!("ERR invalid expire time in '{}' command", spec.name);
    let Some(ms) = n.checked_mul(unit as i64) else {
        out.error(&invalid);
        return;
    };
    let at = if absolute {
        Some(ms)
    } else {
        ms.checked_add(now as i64)
    };
    let Some(at) = at else {
        out.error(&invalid);
        return;
    };
    let key = args.get(1);
    let current = match state.kv.expiry(db, key, now) {
        Ok(KeyExpiry::Missing) | Err(_) => {
            out.int(0);
            return;
        }
        Ok(KeyExpiry::Persistent) => None,
        Ok(KeyExpiry::At(t)) => Some(t as i64),
    };
    let allowed = if nx {
        current.is_none()
    } else {
        let xx_ok = !xx || current.is_some();
        // A key without a deadline has an infinite TTL: GT never passes, LT always does.
        let gt_ok = !gt || current.is_some_and(|c| at > c);
        let lt_ok = !lt || current.is_none_or(|c| at < c);
        xx_ok && gt_ok && lt_ok
    };
    if !allowed {
        out.int(0);
        return;
    }
    if at <= now as i64 {
        let _ = state.kv.remove(db, key, now);
        state.expired_keys += 1;
    } else {
        let _ = state.kv.set_expire_at(db, key, at as u64, now);
    }
    out.int(1);
}

fn scan(state: &mut State, db: usize, args: &Args<'_>, out: &mut Out, now: u64) {
    let Some(cursor) = std::str::from_utf8(args.get(1))
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    else {
        out.error("ERR invalid cursor");
        return;
    };
    let mut opts = ScanOptions::default();
    let mut type_name = None;
    let mut i = 2;
    while i < args.len() {
        let a = args.get(i);
        let Some(v) = args.opt(i + 1) else {
            out.error(SYNTAX);
            return;
        };
        if eq(a, "match") {
            opts.pattern = Some(v);
        } else if eq(a, "count") {
            match parse_i64(v) {
                Some(n) if n >= 1 => opts.count = n as usize,
                Some(_) => {
                    out.error(SYNTAX);
                    return;
                }
                None => {
                    out.error(NOT_INT);
                    return;
                }
            }
        } else if eq(a, "type") {
            type_name = Some(String::from_utf8_lossy(v).into_owned());
        } else {
            out.error(SYNTAX);
            return;
        }
        i += 2;
    }
    opts.type_name = type_name.as_deref();
    match state.kv.scan(db, cursor, &opts, now) {
        Ok(page) => {
            out.array(2);
            out.bulk(page.cursor.to_string().as_bytes());
            out.array(page.keys.len());
            for k in page.keys {
                out.bulk(&k);
            }
        }
        Err(e) => out.error(&format!("ERR {e}")),
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
    if let Some(spec) = table::lookup(args.get(0)) {
        if spec.arity_ok(args.len()) {
            run(shared, state, client, spec, args, sink, unix_ms());
        }
    }
    sink.buf.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_integers() {
        assert_eq!(parse_i64(b"42"), Some(42));
        assert_eq!(parse_i64(b"-7"), Some(-7));
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"+1"), None);
        assert_eq!(parse_i64(b"01"), None);
        assert_eq!(parse_i64(b" 1"), None);
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        assert_eq!(parse_i64(b""), None);
    }

    #[test]
    fn absolute_expire_overflow_is_invalid() {
        // Redis 7: `SET k v EXAT 9999999999999999` -> ERR invalid expire time in 'set' command
        // (9999999999999999 * 1000 exceeds LLONG_MAX).
        let err = "ERR invalid expire time in 'set' command";
        assert_eq!(
            parse_expire_value(b"9999999999999999", 1000, true, 0, "set"),
            Err(err.to_string())
        );
        assert_eq!(
            parse_expire_value(b"9223372036854775807", 1000, true, 0, "set"),
            Err(err.to_string())
        );
        // PXAT up to LLONG_MAX ms is accepted, as in Redis.
        assert_eq!(
            parse_expire_value(b"9223372036854775807", 1, true, 0, "set"),
            Ok(i64::MAX as u64)
        );
        assert_eq!(
            parse_expire_value(b"9999999999999999", 1, true, 0, "set"),
            Ok(9_999_999_999_999_999)
        );
    }
}

//! Clients blocked on keys: `BLPOP`, `BRPOP`, `BLMOVE`, `BRPOPLPUSH`, `BLMPOP`, `BZPOPMIN`,
//! `BZPOPMAX`, `BZMPOP` (Redis 7.0 `blocked.c`, Valkey 9 `blocked.c` for the cluster rules).
//!
//! The registry lives in the locked server state ([`Blocked`]). Its hooks, each one line
//! where it is called:
//! - a blocking command that finds nothing to pop calls [`block`]: the client is marked
//!   `blocked` (its connection reads nothing more until it is answered) and queued on each
//!   of its keys, first come first served;
//! - every write that may give a key elements (a push, a move's destination, a store,
//!   `RESTORE`, a replicated or migrated write: all go through the commands) calls
//!   [`signal`]; after each command (`EXEC` as a whole) [`serve`] pops for the longest waiter
//!   of each signalled key, again and again while the key has elements (a served `BLMOVE`
//!   signals its destination), propagates the pop as the plain command (`BLPOP` → `LPOP`,
//!   `BLMOVE` → `LMOVE`, `BZPOPMIN` → `ZPOPMIN`, as `serveClientBlockedOnList` does) and
//!   hands the reply to the client's I/O thread;
//! - the timer calls [`expire`] (timeouts: seconds with decimals, rounded up to ms) and, in
//!   cluster mode, [`check_cluster`]: a client blocked on a slot this node no longer serves
//!   gets `-MOVED` (or `-CLUSTERDOWN ...`) and is unblocked
//!   ([`ferrocluster_command::blocked_redirect`]: Valkey
//!   `clusterRedirectBlockedClientIfNeeded`);
//! - a node that becomes a replica calls [`unblock_all_for_role_change`] (`-UNBLOCKED force
//!   unblock from blocking operation, instance state changed (master -> replica?)`, then the
//!   connection closes: Valkey `disconnectAllBlockedClients`);
//! - `CLIENT UNBLOCK` calls [`unblock`]; a closing connection calls [`client_closed`].
//!
//! Inside `MULTI`/`EXEC` and for the replication link a blocking command never blocks: it
//! answers as a timeout would (`CLIENT_DENY_BLOCKING`).

use crate::client::Delivery;
use crate::cmd::Ctx;
use crate::resp::Out;
use crate::server::{Shared, State};
use crate::types::list::End;
use std::collections::{HashMap, VecDeque};

/// What a blocked client waits to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockOp {
    /// `BLPOP`/`BRPOP` (`count: None`, reply `[key, element]`) or `BLMPOP` (reply
    /// `[key, [elements]]`).
    ListPop {
        /// The end popped.
        end: End,
        /// `BLMPOP COUNT`.
        count: Option<usize>,
    },
    /// `BLMOVE` / `BRPOPLPUSH`.
    ListMove {
        /// The source end.
        from: End,
        /// The destination end.
        to: End,
        /// The destination key.
        dst: Vec<u8>,
        /// BLMOVE's `wherefrom` / `whereto` as the client wrote them (propagated so), `None`
        /// for `BRPOPLPUSH` (propagated as `RPOPLPUSH`).
        words: Option<[Vec<u8>; 2]>,
    },
    /// `BZPOPMIN`/`BZPOPMAX` (`count: None`, reply `[key, member, score]`) or `BZMPOP`
    /// (reply `[key, [[member, score], ...]]`).
    ZPop {
        /// Highest scores first.
        max: bool,
        /// `BZMPOP COUNT`.
        count: Option<usize>,
    },
}

impl BlockOp {
    fn wants_list(&self) -> bool {
        !matches!(self, BlockOp::ZPop { .. })
    }
}

#[derive(Debug)]
struct Waiter {
    io_thread: usize,
    token: usize,
    proto: u8,
    db: usize,
    keys: Vec<Vec<u8>>,
    op: BlockOp,
    deadline: Option<u64>,
    /// The connection is IPv6 (the endpoint a MOVED names).
    ipv6: bool,
    /// The connection came in on `tls-port` (a MOVED names the TLS port).
    tls: bool,
    /// The command as the client sent it, its table name, and the client's address and
    /// name: the slow log's entry when it is answered ([`log_unblocked`]).
    argv: Vec<Vec<u8>>,
    name: &'static str,
    client: (Option<std::net::SocketAddr>, Vec<u8>),
}

/// The slow log's entry of a blocked command once answered (Valkey `updateStatsOnUnblock`:
/// logged then, with the time it spent running, not waiting), `us` µs.
fn log_unblocked(state: &mut State, w: &Waiter, us: u64, now: u64) {
    let flat: Vec<u8> = w.argv.concat();
    let mut at = 0;
    let ranges: Vec<std::ops::Range<usize>> = w
        .argv
        .iter()
        .map(|a| {
            at += a.len();
            at - a.len()..at
        })
        .collect();
    let args = crate::client::Args::new(&flat, &ranges);
    state.slowlog.log_only(crate::slowlog::Ran {
        name: w.name,
        args: &args,
        duration_us: us,
        failed: false,
        loggable: true,
        client: (w.client.0, &w.client.1),
        now_ms: now,
    });
}

/// The clients blocked on keys, per key in arrival order.
#[derive(Debug, Default)]
pub struct Blocked {
    queues: HashMap<(usize, Vec<u8>), VecDeque<u64>>,
    waiters: HashMap<u64, Waiter>,
    /// Keys signalled since the last [`serve`], in signal order, no duplicates.
    ready: Vec<(usize, Vec<u8>)>,
}

impl Blocked {
    /// Number of clients blocked on keys (INFO `blocked_clients`).
    pub fn len(&self) -> usize {
        self.waiters.len()
    }

    /// Whether no client is blocked on a key.
    pub fn is_empty(&self) -> bool {
        self.waiters.is_empty()
    }

    fn remove(&mut self, id: u64) -> Option<Waiter> {
        let w = self.waiters.remove(&id)?;
        for k in &w.keys {
            let qk = (w.db, k.clone());
            if let Some(q) = self.queues.get_mut(&qk) {
                q.retain(|&c| c != id);
                if q.is_empty() {
                    self.queues.remove(&qk);
                }
            }
        }
        Some(w)
    }
}

/// Whether the calling client may block: not inside `EXEC`, not the replication link or
/// another internal session (`CLIENT_DENY_BLOCKING`).
pub fn may_block(ctx: &Ctx<'_, '_>) -> bool {
    !ctx.client.in_exec && ctx.client.io_thread != usize::MAX && !ctx.client.is_replica_link
}

/// Blocks the calling client on `keys` (see the module docs). Replies nothing now.
pub fn block(ctx: &mut Ctx<'_, '_>, keys: &[&[u8]], op: BlockOp, deadline: Option<u64>) {
    let id = ctx.client.id;
    let mut mine: Vec<Vec<u8>> = Vec::with_capacity(keys.len());
    for k in keys {
        if !mine.iter().any(|m| m == k) {
            mine.push(k.to_vec());
        }
    }
    let b = &mut ctx.state.blocked;
    for k in &mine {
        b.queues
            .entry((ctx.db, k.clone()))
            .or_default()
            .push_back(id);
    }
    b.waiters.insert(
        id,
        Waiter {
            io_thread: ctx.client.io_thread,
            token: ctx.client.token,
            proto: ctx.out.proto,
            db: ctx.db,
            keys: mine,
            op,
            deadline,
            ipv6: ctx.client.addr.is_some_and(|a| a.is_ipv6()),
            tls: ctx.client.cluster.as_ref().is_some_and(|c| c.tls()),
            argv: ctx.args.to_owned_vec(),
            name: ctx.spec.name,
            client: (ctx.client.addr, ctx.client.name.clone().unwrap_or_default()),
        },
    );
    ctx.client.blocked = true;
}

/// `key` of `db` may have got elements: remember it for [`serve`] when a client waits on it.
#[inline]
pub fn signal(state: &mut State, db: usize, key: &[u8]) {
    let b = &mut state.blocked;
    if b.queues.is_empty() {
        return;
    }
    if b.queues.contains_key(&(db, key.to_vec()))
        && !b.ready.iter().any(|(d, k)| *d == db && k == key)
    {
        b.ready.push((db, key.to_vec()));
    }
}

/// Every key clients wait on in database `db` may have got elements (SWAPDB: Valkey
/// `scanDatabaseForReadyKeys`).
pub fn signal_db(state: &mut State, db: usize) {
    let keys: Vec<Vec<u8>> = state
        .blocked
        .queues
        .keys()
        .filter(|(d, _)| *d == db)
        .map(|(_, k)| k.clone())
        .collect();
    for k in keys {
        signal(state, db, &k);
    }
}

/// Serves the clients waiting on the keys signalled since the last call (see the module
/// docs). Called after every command, `EXEC` as a whole.
pub fn serve(shared: &Shared, state: &mut State, now: u64) {
    while !state.blocked.ready.is_empty() {
        let ready = std::mem::take(&mut state.blocked.ready);
        for (db, key) in ready {
            serve_key(shared, state, db, &key, now);
        }
    }
}

fn serve_key(shared: &Shared, state: &mut State, db: usize, key: &[u8], now: u64) {
    loop {
        let Some(queue) = state.blocked.queues.get(&(db, key.to_vec())) else {
            return;
        };
        let kind = match state.kv.get(db, key, now).ok().flatten() {
            None => return,
            Some(v) => ferrocluster_kvstore::KvValue::type_name(v),
        };
        // The longest waiter for this key's type (a BLPOP waiter stays blocked while the key
        // holds a sorted set).
        let Some(id) = queue.iter().copied().find(|id| {
            state
                .blocked
                .waiters
                .get(id)
                .is_some_and(|w| w.op.wants_list() == (kind == "list"))
        }) else {
            return;
        };
        if kind != "list" && kind != "zset" {
            return;
        }
        let Some(w) = state.blocked.remove(id) else {
            return;
        };
        let started = std::time::Instant::now();
        let mut out = Out {
            buf: Vec::new(),
            proto: w.proto,
        };
        let keys: [&[u8]; 1] = [key];
        let effect = match &w.op {
            BlockOp::ListPop { end, count } => {
                crate::cmd::list::pop_first(state, db, &keys, *end, *count, &mut out, now)
            }
            BlockOp::ZPop { max, count } => {
                crate::cmd::zset::pop_first(state, db, &keys, *max, *count, &mut out, now)
            }
            BlockOp::ListMove {
                from,
                to,
                dst,
                words,
            } => crate::cmd::list::move_into(state, db, key, dst, *from, *to, &mut out, now).map(
                |moved| moved.then(|| crate::cmd::list::move_effect(key, dst, words.as_ref())),
            ),
        };
        match effect {
            Ok(Some(argv)) => {
                crate::cmd::txn::touch(state, db, key);
                if let BlockOp::ListMove { dst, .. } = &w.op {
                    crate::cmd::txn::touch(state, db, dst);
                }
                let parts: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
                crate::commands::propagate_argv(state, db, &parts, now);
            }
            Ok(None) => {
                // Nothing to pop after all: wait again, in the same place.
                requeue_front(state, id, w);
                return;
            }
            Err(_) => out.error(crate::cmd::WRONGTYPE),
        }
        log_unblocked(state, &w, started.elapsed().as_micros() as u64, now);
        shared.deliver(w.io_thread, w.token, id, Delivery::Unblock(out.buf.into()));
    }
}

/// Puts a waiter back at the head of its queues (it was taken out to be served but nothing
/// was there).
fn requeue_front(state: &mut State, id: u64, w: Waiter) {
    for k in &w.keys {
        state
            .blocked
            .queues
            .entry((w.db, k.clone()))
            .or_default()
            .push_front(id);
    }
    state.blocked.waiters.insert(id, w);
}

/// The timeout reply of `op`: a null array (`*-1`, the moves too), `_` in RESP3
/// (`replyToBlockedClientTimedOut`; a BLMOVE that cannot block, inside MULTI, answers a null
/// bulk instead).
fn timeout_reply(op: &BlockOp, proto: u8) -> Vec<u8> {
    let mut out = Out {
        buf: Vec::new(),
        proto,
    };
    let _ = op;
    out.null_array();
    out.buf
}

/// Answers the clients whose timeout passed (`handleBlockedClientsTimeout`). Called by the
/// timer.
pub fn expire(shared: &Shared, state: &mut State, now: u64) {
    if state.blocked.is_empty() {
        return;
    }
    let mut due: Vec<u64> = state
        .blocked
        .waiters
        .iter()
        .filter(|(_, w)| w.deadline.is_some_and(|d| now >= d))
        .map(|(&id, _)| id)
        .collect();
    due.sort_unstable();
    for id in due {
        if let Some(w) = state.blocked.remove(id) {
            let reply = timeout_reply(&w.op, w.proto);
            log_unblocked(state, &w, 0, now);
            shared.deliver(w.io_thread, w.token, id, Delivery::Unblock(reply.into()));
        }
    }
}

/// `CLIENT UNBLOCK id [TIMEOUT|ERROR]`: whether `id` was blocked on keys (and is now
/// answered: as a timeout, or with `-UNBLOCKED client unblocked via CLIENT UNBLOCK`).
pub fn unblock(shared: &Shared, state: &mut State, id: u64, error: bool) -> bool {
    let Some(w) = state.blocked.remove(id) else {
        return false;
    };
    let reply = if error {
        b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n".to_vec()
    } else {
        timeout_reply(&w.op, w.proto)
    };
    log_unblocked(state, &w, 0, crate::server::unix_ms());
    shared.deliver(w.io_thread, w.token, id, Delivery::Unblock(reply.into()));
    true
}

/// `CLIENT UNBLOCK <id> [TIMEOUT|ERROR]` (Redis 7.0 `clientCommand`: the reason is checked
/// first, then the id; `:1` when the client was blocked on keys and is answered now).
pub fn client_unblock(ctx: &mut Ctx<'_, '_>) {
    let args = ctx.args;
    let error = match args.opt(3) {
        None => false,
        Some(r) if r.eq_ignore_ascii_case(b"timeout") => false,
        Some(r) if r.eq_ignore_ascii_case(b"error") => true,
        Some(_) => {
            return ctx
                .out
                .error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR");
        }
    };
    let Some(id) = crate::cmd::parse_i64(args.get(2)) else {
        return ctx.out.error(crate::cmd::NOT_INT);
    };
    let done = u64::try_from(id).is_ok_and(|id| unblock(ctx.shared, ctx.state, id, error));
    ctx.out.int(i64::from(done));
}

/// The node became a replica: every client blocked on keys gets `-UNBLOCKED` and its
/// connection closes (Valkey `disconnectAllBlockedClients`).
pub fn unblock_all_for_role_change(shared: &Shared, state: &mut State) {
    let mut ids: Vec<u64> = state.blocked.waiters.keys().copied().collect();
    ids.sort_unstable();
    for id in ids {
        if let Some(w) = state.blocked.remove(id) {
            let text = b"-UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)\r\n";
            shared.deliver(
                w.io_thread,
                w.token,
                id,
                Delivery::Unblock(text.to_vec().into()),
            );
            shared.deliver(w.io_thread, w.token, id, Delivery::Close);
        }
    }
}

/// Cluster mode: unblocks, with the redirect Valkey sends, every client blocked on a slot
/// this node no longer serves (`clusterRedirectBlockedClientIfNeeded`: cluster down →
/// `CLUSTERDOWN The cluster is down`; slot unassigned → `CLUSTERDOWN Hash slot not served`;
/// slot owned by another node and not being imported here → `MOVED slot endpoint:port`).
/// Called by the timer.
pub fn check_cluster(shared: &Shared, state: &mut State) {
    if state.blocked.waiters.is_empty() {
        return;
    }
    let mut ids: Vec<u64> = state.blocked.waiters.keys().copied().collect();
    ids.sort_unstable();
    for id in ids {
        let Some(w) = state.blocked.waiters.get(&id) else {
            continue;
        };
        let Some(key) = w.keys.first() else {
            continue;
        };
        let Some(side) = state.cluster.as_ref() else {
            return;
        };
        let slot = ferrocluster_slot::key_hash_slot(key);
        let cs = ferrocluster_command::ClientState::new(w.tls, w.ipv6);
        let ctx = crate::cluster::routing_ctx(side);
        let Some(err) = ferrocluster_command::blocked_redirect(&ctx, &cs, slot) else {
            continue;
        };
        if let Some(w) = state.blocked.remove(id) {
            use ferrocluster_command::ErrorReply;
            log_unblocked(state, &w, 0, crate::server::unix_ms());
            shared.deliver(
                w.io_thread,
                w.token,
                id,
                Delivery::Unblock(err.to_resp().into()),
            );
        }
    }
}

/// Forgets a closed connection's wait.
pub fn client_closed(state: &mut State, id: u64) {
    state.blocked.remove(id);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_replies_per_protocol() {
        let pop = BlockOp::ListPop {
            end: End::Left,
            count: None,
        };
        let mv = BlockOp::ListMove {
            from: End::Right,
            to: End::Left,
            dst: b"d".to_vec(),
            words: None,
        };
        assert_eq!(timeout_reply(&pop, 2), b"*-1\r\n");
        assert_eq!(timeout_reply(&pop, 3), b"_\r\n");
        assert_eq!(timeout_reply(&mv, 2), b"*-1\r\n");
        assert_eq!(timeout_reply(&mv, 3), b"_\r\n");
    }

    #[test]
    fn removal_keeps_the_other_waiters_in_order() {
        let mut b = Blocked::default();
        for id in [1u64, 2, 3] {
            b.queues
                .entry((0, b"k".to_vec()))
                .or_default()
                .push_back(id);
            b.waiters.insert(
                id,
                Waiter {
                    io_thread: 0,
                    token: 0,
                    proto: 2,
                    db: 0,
                    keys: vec![b"k".to_vec()],
                    op: BlockOp::ZPop {
                        max: false,
                        count: None,
                    },
                    deadline: None,
                    ipv6: false,
                    tls: false,
                    argv: vec![b"bzpopmin".to_vec(), b"k".to_vec(), b"0".to_vec()],
                    name: "bzpopmin",
                    client: (None, Vec::new()),
                },
            );
        }
        assert!(b.remove(2).is_some());
        assert_eq!(
            b.queues[&(0, b"k".to_vec())]
                .iter()
                .copied()
                .collect::<Vec<_>>(),
            vec![1, 3]
        );
        b.remove(1);
        b.remove(3);
        assert!(b.queues.is_empty());
        assert!(b.is_empty());
    }
}

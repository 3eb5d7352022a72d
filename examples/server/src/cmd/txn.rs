//! WATCH / UNWATCH: optimistic locking for MULTI/EXEC (Redis `multi.c`).
//!
//! Rules (Redis 7.0): EXEC answers a null array and runs nothing when a key the client
//! WATCHes was modified after the WATCH by anyone (a write through [`touch`], which every
//! write path calls, the primary's replicated writes included); FLUSHDB / FLUSHALL /
//! SWAPDB modify every watched key they empty or replace; a key that existed at WATCH time
//! and is gone at EXEC (it expired, or its slot was deleted) counts as modified; a key that
//! was already expired at WATCH and is reclaimed later does not. EXEC, DISCARD, UNWATCH,
//! RESET and closing the connection drop the client's watches. In cluster mode the keys of
//! one WATCH must share a slot (CROSSSLOT from routing), and WATCH inside MULTI is refused.

use super::Ctx;
use crate::server::State;
use std::collections::{HashMap, HashSet};

/// The watched keys of every client.
#[derive(Debug, Default)]
pub struct Watches {
    by_key: HashMap<(usize, Vec<u8>), Vec<u64>>,
    by_client: HashMap<u64, Vec<Watched>>,
    dirty: HashSet<u64>,
}

#[derive(Debug)]
struct Watched {
    db: usize,
    key: Vec<u8>,
    existed: bool,
}

/// `key` of `db` was modified: flags its watchers.
#[inline]
pub fn touch(state: &mut State, db: usize, key: &[u8]) {
    state.tracking.invalidate(key);
    let w = &mut state.watches;
    if w.by_key.is_empty() {
        return;
    }
    if let Some(clients) = w.by_key.get(&(db, key.to_vec())) {
        w.dirty.extend(clients.iter().copied());
    }
}

/// Every watched key of `db` (all databases for `None`) that exists now is about to be
/// emptied or replaced (FLUSHDB, FLUSHALL, SWAPDB): flags their watchers.
pub fn touch_db(state: &mut State, db: Option<usize>, now: u64) {
    state.tracking.invalidate_all();
    let State { watches, kv, .. } = state;
    if watches.by_key.is_empty() {
        return;
    }
    for ((d, key), clients) in &watches.by_key {
        if db.is_none_or(|x| x == *d) && matches!(kv.exists(*d, key, now), Ok(true)) {
            watches.dirty.extend(clients.iter().copied());
        }
    }
}

/// SWAPDB `a` `b`: every watched key of either database that exists in either is modified.
pub fn touch_swap(state: &mut State, a: usize, b: usize, now: u64) {
    state.tracking.invalidate_all();
    let State { watches, kv, .. } = state;
    for ((d, key), clients) in &watches.by_key {
        if (*d == a || *d == b)
            && (matches!(kv.exists(a, key, now), Ok(true))
                || matches!(kv.exists(b, key, now), Ok(true)))
        {
            watches.dirty.extend(clients.iter().copied());
        }
    }
}

/// Drops every watch of client `id`.
pub fn unwatch(state: &mut State, id: u64) {
    let w = &mut state.watches;
    w.dirty.remove(&id);
    let Some(list) = w.by_client.remove(&id) else {
        return;
    };
    for k in list {
        let slot = (k.db, k.key);
        if let Some(clients) = w.by_key.get_mut(&slot) {
            clients.retain(|c| *c != id);
            if clients.is_empty() {
                w.by_key.remove(&slot);
            }
        }
    }
}

/// The connection closed.
pub fn client_closed(state: &mut State, id: u64) {
    unwatch(state, id);
}

/// At EXEC: whether the transaction of client `id` must abort (a watched key was
/// modified). Drops the client's watches either way.
pub fn exec_aborts(state: &mut State, id: u64, now: u64) -> bool {
    let w = &state.watches;
    let mut abort = w.dirty.contains(&id);
    if !abort {
        if let Some(list) = w.by_client.get(&id) {
            abort = list
                .iter()
                .any(|k| k.existed && !matches!(state.kv.exists(k.db, &k.key, now), Ok(true)));
        }
    }
    unwatch(state, id);
    abort
}

/// `WATCH key [key ...]` (the MULTI check is done before: "WATCH inside MULTI is not
/// allowed").
pub fn watch(ctx: &mut Ctx<'_, '_>) {
    if ctx.client.multi.is_some() {
        ctx.error("ERR WATCH inside MULTI is not allowed");
        return;
    }
    let id = ctx.client.id;
    for i in 1..ctx.argc() {
        let key = ctx.arg(i).to_vec();
        let existed = matches!(ctx.state.kv.exists(ctx.db, &key, ctx.now), Ok(true));
        let w = &mut ctx.state.watches;
        let list = w.by_client.entry(id).or_default();
        if list.iter().any(|k| k.db == ctx.db && k.key == key) {
            continue;
        }
        list.push(Watched {
            db: ctx.db,
            key: key.clone(),
            existed,
        });
        w.by_key.entry((ctx.db, key)).or_default().push(id);
    }
    ctx.client.watching = true;
    ctx.out.ok();
}

/// `UNWATCH`.
pub fn unwatch_cmd(ctx: &mut Ctx<'_, '_>) {
    unwatch(ctx.state, ctx.client.id);
    ctx.out.ok();
}

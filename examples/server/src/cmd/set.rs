//! The set commands (Redis 7.0 `t_set.c`): replies (sets as RESP3 sets), error texts,
//! encodings, result orders and propagation (`SPOP` → `SREM` in batches of 1024, or `DEL`
//! when it takes the whole set).

use super::{
    create, drop_if_empty, parse_i64, read, reply_len, write, Ctx, WrongType, NOT_INT,
    NOT_POSITIVE, SYNTAX, WRONGTYPE,
};
use crate::notify;
use crate::server::Value;
use crate::table::Cmd;
use crate::types::intset::IntSet;
use crate::types::set::Set;
use crate::types::table::TOO_BIG;

/// Redis `SPOP_MOVE_STRATEGY_MUL`'s batch: SPOP with a count propagates `SREM` in batches
/// of this many members.
const SREM_BATCH: usize = 1024;

/// Runs a set command.
pub fn run(ctx: &mut Ctx<'_, '_>) {
    match ctx.spec.cmd {
        Cmd::Sadd => sadd(ctx),
        Cmd::Srem => srem(ctx),
        Cmd::Scard => scard(ctx),
        Cmd::Sismember => sismember(ctx),
        Cmd::Smismember => smismember(ctx),
        Cmd::Smembers => smembers(ctx),
        Cmd::Srandmember => srandmember(ctx),
        Cmd::Spop => spop(ctx),
        Cmd::Smove => smove(ctx),
        Cmd::Sinter | Cmd::Sinterstore => sinter(ctx),
        Cmd::Sintercard => sintercard(ctx),
        Cmd::Sunion | Cmd::Sunionstore | Cmd::Sdiff | Cmd::Sdiffstore => sunion_diff(ctx),
        Cmd::Sscan => sscan(ctx),
        _ => ctx.out.error("ERR command not handled"),
    }
}

fn sadd(ctx: &mut Ctx<'_, '_>) {
    let (key, db, now) = (ctx.arg(1), ctx.db, ctx.now);
    let args = ctx.args;
    let limits = crate::types::limits();
    let first = args.get(2);
    let mut s = match create(&mut ctx.state.kv, db, key, now, || {
        Set::create(first, args.len() - 2, &limits)
    }) {
        Ok(s) => s,
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
    };
    let mut added = 0u64;
    for i in 2..args.len() {
        match s.insert(args.get(i), &limits) {
            Ok(new) => added += u64::from(new),
            Err(_) => {
                drop(s);
                return ctx.out.error(TOO_BIG);
            }
        }
    }
    drop(s);
    if added > 0 {
        ctx.modified(key);
        ctx.notify(notify::SET, "sadd", key);
        ctx.prop.dirty += added - 1;
    }
    reply_len(ctx.out, added as usize);
}

fn srem(ctx: &mut Ctx<'_, '_>) {
    let (key, db, now) = (ctx.arg(1), ctx.db, ctx.now);
    let args = ctx.args;
    let mut removed = 0u64;
    match write::<Set>(&mut ctx.state.kv, db, key, now) {
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
        Ok(None) => return ctx.out.int(0),
        Ok(Some(mut s)) => {
            for i in 2..args.len() {
                if s.remove(args.get(i)) {
                    removed += 1;
                    if s.is_empty() {
                        break;
                    }
                }
            }
        }
    }
    if removed > 0 {
        let gone = drop_if_empty::<Set>(&mut ctx.state.kv, db, key, now);
        ctx.modified(key);
        ctx.notify(notify::SET, "srem", key);
        if gone {
            ctx.notify(notify::GENERIC, "del", key);
        }
        ctx.prop.dirty += removed - 1;
    }
    reply_len(ctx.out, removed as usize);
}

fn scard(ctx: &mut Ctx<'_, '_>) {
    match read::<Set>(&ctx.state.kv, ctx.db, ctx.arg(1), ctx.now) {
        Err(WrongType) => ctx.out.error(WRONGTYPE),
        Ok(s) => reply_len(ctx.out, s.map_or(0, Set::len)),
    }
}

fn sismember(ctx: &mut Ctx<'_, '_>) {
    match read::<Set>(&ctx.state.kv, ctx.db, ctx.arg(1), ctx.now) {
        Err(WrongType) => ctx.out.error(WRONGTYPE),
        Ok(s) => {
            let found = s.is_some_and(|s| s.contains(ctx.arg(2)));
            ctx.out.int(i64::from(found));
        }
    }
}

fn smismember(ctx: &mut Ctx<'_, '_>) {
    match read::<Set>(&ctx.state.kv, ctx.db, ctx.arg(1), ctx.now) {
        Err(WrongType) => ctx.out.error(WRONGTYPE),
        Ok(s) => {
            ctx.out.array(ctx.argc() - 2);
            for i in 2..ctx.argc() {
                let found = s.is_some_and(|s| s.contains(ctx.arg(i)));
                ctx.out.int(i64::from(found));
            }
        }
    }
}

fn smembers(ctx: &mut Ctx<'_, '_>) {
    match read::<Set>(&ctx.state.kv, ctx.db, ctx.arg(1), ctx.now) {
        Err(WrongType) => ctx.out.error(WRONGTYPE),
        Ok(None) => ctx.out.set(0),
        Ok(Some(s)) => {
            ctx.out.set(s.len());
            for m in s.iter() {
                ctx.out.bulk(m.as_ref());
            }
        }
    }
}

/// `SRANDMEMBER key [count]` (Redis 7.0 `srandmemberWithCountCommand`: a negative count
/// may repeat members; a count at least the size returns the whole set in its order).
fn srandmember(ctx: &mut Ctx<'_, '_>) {
    let count = if ctx.argc() == 3 {
        match parse_i64(ctx.arg(2)) {
            None => return ctx.out.error(NOT_INT),
            Some(i64::MIN) => return ctx.out.error("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"),
            Some(l) => Some(l),
        }
    } else if ctx.argc() > 3 {
        return ctx.out.error(SYNTAX);
    } else {
        None
    };
    let (db, now) = (ctx.db, ctx.now);
    let crate::server::State { kv, rng, .. } = &mut *ctx.state;
    let s = match read::<Set>(kv, db, ctx.args.get(1), now) {
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
        Ok(s) => s,
    };
    let mut draw = |k: usize| super::rand_below(rng, k);
    let Some(l) = count else {
        return match s.and_then(|s| s.random(&mut draw)) {
            Some(m) => ctx.out.bulk(m.as_ref()),
            None => ctx.out.null(),
        };
    };
    let Some(s) = s else {
        return ctx.out.array(0);
    };
    let (uniq, n) = if l >= 0 {
        (true, l as u64)
    } else {
        (false, l.unsigned_abs())
    };
    if n == 0 {
        return ctx.out.array(0);
    }
    if !uniq || n == 1 {
        ctx.out.array(n as usize);
        for _ in 0..n {
            if let Some(m) = s.random(&mut draw) {
                ctx.out.bulk(m.as_ref());
            }
        }
        return;
    }
    let mut all: Vec<Vec<u8>> = s.iter().map(|m| m.to_vec()).collect();
    while all.len() as u64 > n {
        let i = draw(all.len());
        all.swap_remove(i);
    }
    ctx.out.array(all.len());
    for m in &all {
        ctx.out.bulk(m);
    }
}

/// `SPOP key [count]`.
fn spop(ctx: &mut Ctx<'_, '_>) {
    let count = if ctx.argc() == 3 {
        // Redis `getPositiveLongFromObjectOrReply` with its message for both failures.
        match parse_i64(ctx.arg(2)) {
            Some(n) if n >= 0 => Some(n as u64),
            _ => return ctx.out.error(NOT_POSITIVE),
        }
    } else if ctx.argc() > 3 {
        return ctx.out.error(SYNTAX);
    } else {
        None
    };
    let (key, db, now) = (ctx.arg(1), ctx.db, ctx.now);
    let crate::server::State { kv, rng, .. } = &mut *ctx.state;
    let mut draw = |k: usize| super::rand_below(rng, k);
    let mut s = match write::<Set>(kv, db, key, now) {
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
        Ok(None) => {
            return match count {
                None => ctx.out.null(),
                Some(_) => ctx.out.set(0),
            }
        }
        Ok(Some(s)) => s,
    };
    let Some(n) = count else {
        let m = s.pop_random(&mut draw);
        drop(s);
        let Some(m) = m else { return ctx.out.null() };
        let gone = drop_if_empty::<Set>(&mut ctx.state.kv, db, key, now);
        ctx.out.bulk(&m);
        ctx.modified(key);
        ctx.notify(notify::SET, "spop", key);
        if gone {
            ctx.notify(notify::GENERIC, "del", key);
        }
        ctx.effect(&[b"SREM", key, &m]);
        return;
    };
    if n == 0 {
        drop(s);
        return ctx.out.set(0);
    }
    if n >= s.len() as u64 {
        let all: Vec<Vec<u8>> = s.iter().map(|m| m.to_vec()).collect();
        drop(s);
        let _ = ctx.state.kv.remove(db, key, now);
        ctx.out.set(all.len());
        for m in &all {
            ctx.out.bulk(m);
        }
        ctx.modified(key);
        ctx.notify(notify::SET, "spop", key);
        ctx.notify(notify::GENERIC, "del", key);
        ctx.effect(&[b"DEL", key]);
        return;
    }
    let mut popped = Vec::with_capacity(n as usize);
    for _ in 0..n {
        if let Some(m) = s.pop_random(&mut draw) {
            popped.push(m);
        }
    }
    drop(s);
    ctx.out.set(popped.len());
    for m in &popped {
        ctx.out.bulk(m);
    }
    ctx.modified(key);
    ctx.notify(notify::SET, "spop", key);
    for batch in popped.chunks(SREM_BATCH) {
        let mut argv: Vec<&[u8]> = vec![b"SREM", key];
        argv.extend(batch.iter().map(Vec::as_slice));
        ctx.effect(&argv);
    }
}

fn smove(ctx: &mut Ctx<'_, '_>) {
    let (src, dst, m) = (ctx.arg(1), ctx.arg(2), ctx.arg(3));
    let (db, now) = (ctx.db, ctx.now);
    let limits = crate::types::limits();
    let kv = &mut ctx.state.kv;
    let src_set = match read::<Set>(kv, db, src, now) {
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
        Ok(None) => return ctx.out.int(0),
        Ok(Some(s)) => s,
    };
    if read::<Set>(kv, db, dst, now).is_err() {
        return ctx.out.error(WRONGTYPE);
    }
    if src == dst {
        let found = src_set.contains(m);
        return ctx.out.int(i64::from(found));
    }
    let removed = match write::<Set>(kv, db, src, now) {
        Ok(Some(mut s)) => s.remove(m),
        _ => false,
    };
    if !removed {
        return ctx.out.int(0);
    }
    let src_gone = drop_if_empty::<Set>(kv, db, src, now);
    let added = match create(kv, db, dst, now, || Set::create(m, 1, &limits)) {
        Ok(mut d) => d.insert(m, &limits),
        Err(WrongType) => Ok(false),
    };
    ctx.modified(src);
    // Valkey `smoveCommand`: `srem` (and `del`) on the source, `sadd` on the destination.
    ctx.notify(notify::SET, "srem", src);
    if src_gone {
        ctx.notify(notify::GENERIC, "del", src);
    }
    match added {
        Ok(true) => {
            ctx.modified(dst);
            ctx.notify(notify::SET, "sadd", dst);
        }
        Ok(false) => {}
        Err(_) => return ctx.out.error(TOO_BIG),
    }
    ctx.out.int(1);
}

/// The sets of keys `keys`, in key order (`None` for a missing key, an empty set), after
/// checking every key's type (Redis checks them all before computing anything).
fn sets_of<'s>(
    kv: &'s ferrocluster_kvstore::KvStore<Value>,
    args: &crate::client::Args<'_>,
    keys: std::ops::Range<usize>,
    db: usize,
    now: u64,
) -> Result<Vec<Option<&'s Set>>, WrongType> {
    keys.map(|i| read::<Set>(kv, db, args.get(i), now))
        .collect()
}

/// The sets to intersect, smallest first (stable for ties), or `None` when one is missing
/// (the intersection is empty).
fn smallest_first(sets: Vec<Option<&Set>>) -> Option<Vec<&Set>> {
    let mut sets: Vec<&Set> = sets.into_iter().collect::<Option<Vec<_>>>()?;
    sets.sort_by_key(|s| s.len());
    Some(sets)
}

/// Stores `members` as a set at `dst` (built from an empty intset, as Redis's
/// `createIntsetObject` + `setTypeAdd`), or deletes `dst` when there are none. Replies the
/// count.
fn store(ctx: &mut Ctx<'_, '_>, dst: &[u8], members: Vec<Vec<u8>>) {
    let (db, now) = (ctx.db, ctx.now);
    let n = members.len();
    if n == 0 {
        if let Ok(Some(_)) = ctx.state.kv.remove(db, dst, now) {
            ctx.modified(dst);
            ctx.notify(notify::GENERIC, "del", dst);
        } else {
            super::txn::touch(ctx.state, db, dst);
        }
        return ctx.out.int(0);
    }
    let limits = crate::types::limits();
    let mut s = Set::Ints(IntSet::new());
    for m in &members {
        if s.insert(m, &limits).is_err() {
            return ctx.out.error(TOO_BIG);
        }
    }
    let _ = ctx.state.kv.insert(db, dst, Value::Set(Box::new(s)), now);
    ctx.modified(dst);
    ctx.notify(notify::SET, "sinterstore", dst);
    reply_len(ctx.out, n);
}

/// SINTER / SINTERSTORE (Redis 7.0 `sinterGenericCommand`: the smallest set first, its order).
fn sinter(ctx: &mut Ctx<'_, '_>) {
    let storing = ctx.spec.cmd == Cmd::Sinterstore;
    let first = if storing { 2 } else { 1 };
    let (db, now) = (ctx.db, ctx.now);
    let sets = match sets_of(&ctx.state.kv, ctx.args, first..ctx.argc(), db, now) {
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
        Ok(s) => smallest_first(s),
    };
    let result: Vec<Vec<u8>> = match sets {
        None => Vec::new(),
        Some(sets) => sets[0]
            .iter()
            .filter(|m| sets[1..].iter().all(|o| o.contains(m.as_ref())))
            .map(|m| m.to_vec())
            .collect(),
    };
    if storing {
        let dst = ctx.arg(1);
        return store(ctx, dst, result);
    }
    ctx.out.set(result.len());
    for m in &result {
        ctx.out.bulk(m);
    }
}

/// `SINTERCARD numkeys key [key ...] [LIMIT limit]`.
fn sintercard(ctx: &mut Ctx<'_, '_>) {
    let numkeys = match parse_i64(ctx.arg(1)) {
        Some(n) if n >= 1 => n as u64,
        _ => return ctx.out.error("ERR numkeys should be greater than 0"),
    };
    if numkeys > (ctx.argc() - 2) as u64 {
        return ctx
            .out
            .error("ERR Number of keys can't be greater than number of args");
    }
    let nk = numkeys as usize;
    let mut limit = 0u64;
    let mut j = 2 + nk;
    while j < ctx.argc() {
        let more = ctx.argc() - j - 1;
        if ctx.arg(j).eq_ignore_ascii_case(b"limit") && more >= 1 {
            match parse_i64(ctx.arg(j + 1)) {
                Some(n) if n >= 0 => limit = n as u64,
                _ => return ctx.out.error("ERR LIMIT can't be negative"),
            }
            j += 2;
        } else {
            return ctx.out.error(SYNTAX);
        }
    }
    let (db, now) = (ctx.db, ctx.now);
    let sets = match sets_of(&ctx.state.kv, ctx.args, 2..2 + nk, db, now) {
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
        Ok(s) => smallest_first(s),
    };
    let mut n = 0u64;
    if let Some(sets) = sets {
        for m in sets[0].iter() {
            if sets[1..].iter().all(|o| o.contains(m.as_ref())) {
                n += 1;
                if limit > 0 && n >= limit {
                    break;
                }
            }
        }
    }
    reply_len(ctx.out, n as usize);
}

/// SUNION / SDIFF and their STORE forms (Redis 7.0 `sunionDiffGenericCommand`, both DIFF
/// algorithms, the result built from an empty intset and replied in its order).
fn sunion_diff(ctx: &mut Ctx<'_, '_>) {
    let cmd = ctx.spec.cmd;
    let storing = matches!(cmd, Cmd::Sunionstore | Cmd::Sdiffstore);
    let union = matches!(cmd, Cmd::Sunion | Cmd::Sunionstore);
    let first = if storing { 2 } else { 1 };
    let (db, now) = (ctx.db, ctx.now);
    let limits = crate::types::limits();
    let sets = match sets_of(&ctx.state.kv, ctx.args, first..ctx.argc(), db, now) {
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
        Ok(s) => s,
    };
    let same = |a: Option<&Set>, b: Option<&Set>| match (a, b) {
        (Some(a), Some(b)) => std::ptr::eq(a, b),
        _ => false,
    };
    let mut dst = Set::Ints(IntSet::new());
    let mut too_big = false;
    if union {
        for s in sets.iter().flatten() {
            for m in s.iter() {
                too_big |= dst.insert(m.as_ref(), &limits).is_err();
            }
        }
    } else if let Some(first_set) = sets[0] {
        let sameset = sets[1..].iter().any(|s| same(*s, Some(first_set)));
        let mut rest: Vec<Option<&Set>> = sets[1..].to_vec();
        let mut algo_one = true;
        if !sameset {
            let (mut one, mut two) = (0u64, 0u64);
            for s in sets.iter().flatten() {
                one += first_set.len() as u64;
                two += s.len() as u64;
            }
            algo_one = one / 2 <= two;
            if algo_one && rest.len() > 1 {
                rest.sort_by_key(|s| std::cmp::Reverse(s.map_or(0, Set::len)));
            }
        }
        if algo_one {
            for m in first_set.iter() {
                let excluded = rest
                    .iter()
                    .flatten()
                    .any(|o| std::ptr::eq(*o, first_set) || o.contains(m.as_ref()));
                if !excluded {
                    too_big |= dst.insert(m.as_ref(), &limits).is_err();
                }
            }
        } else {
            for m in first_set.iter() {
                too_big |= dst.insert(m.as_ref(), &limits).is_err();
            }
            for s in rest.iter().flatten() {
                if dst.is_empty() {
                    break;
                }
                for m in s.iter() {
                    dst.remove(m.as_ref());
                }
            }
        }
    }
    if too_big {
        return ctx.out.error(TOO_BIG);
    }
    if storing {
        let key = ctx.arg(1);
        if dst.is_empty() {
            if let Ok(Some(_)) = ctx.state.kv.remove(db, key, now) {
                ctx.modified(key);
                ctx.notify(notify::GENERIC, "del", key);
            } else {
                ctx.modified(key);
            }
            return ctx.out.int(0);
        }
        let n = dst.len();
        let _ = ctx.state.kv.insert(db, key, Value::Set(Box::new(dst)), now);
        ctx.modified(key);
        let event = if union { "sunionstore" } else { "sdiffstore" };
        ctx.notify(notify::SET, event, key);
        return reply_len(ctx.out, n);
    }
    ctx.out.set(dst.len());
    for m in dst.iter() {
        ctx.out.bulk(m.as_ref());
    }
}

fn sscan(ctx: &mut Ctx<'_, '_>) {
    let cursor = match super::parse_cursor(ctx.arg(2)) {
        Ok(c) => c,
        Err(e) => return ctx.out.error(e),
    };
    let s = match read::<Set>(&ctx.state.kv, ctx.db, ctx.arg(1), ctx.now) {
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
        Ok(None) => return super::scan_reply(ctx.out, 0, &[]),
        Ok(Some(s)) => s,
    };
    let a = match super::parse_scan_args(ctx.args, 3, super::ScanOf::Set) {
        Ok(a) => a,
        Err(e) => return ctx.out.error(e),
    };
    let mut items: Vec<Vec<u8>> = Vec::new();
    let next = s.scan(cursor, a.count, |m| {
        if super::matches(a.pattern, m) {
            items.push(m.to_vec());
        }
    });
    super::scan_reply(ctx.out, next, &items);
}

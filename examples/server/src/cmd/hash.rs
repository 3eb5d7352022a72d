//! The hash commands (Redis 7.0 `t_hash.c`; HSCAN's NOVALUES from Valkey 8): replies, error
//! texts, encodings and propagation.

use super::{
    create, drop_if_empty, parse_i64, read, reply_len, write, Ctx, WrongType, NOT_INT, SYNTAX,
    WRONGTYPE,
};
use crate::notify;
use crate::table::Cmd;
use crate::types::hash::Hash;
use crate::types::table::TOO_BIG;

/// Runs a hash command.
pub fn run(ctx: &mut Ctx<'_, '_>) {
    match ctx.spec.cmd {
        Cmd::Hset | Cmd::Hmset => hset(ctx),
        Cmd::Hsetnx => hsetnx(ctx),
        Cmd::Hget => hget(ctx),
        Cmd::Hmget => hmget(ctx),
        Cmd::Hdel => hdel(ctx),
        Cmd::Hexists => hexists(ctx),
        Cmd::Hlen => hlen(ctx),
        Cmd::Hstrlen => hstrlen(ctx),
        Cmd::Hincrby => hincrby(ctx),
        Cmd::Hincrbyfloat => hincrbyfloat(ctx),
        Cmd::Hkeys | Cmd::Hvals | Cmd::Hgetall => hgetall(ctx),
        Cmd::Hrandfield => hrandfield(ctx),
        Cmd::Hscan => hscan(ctx),
        _ => ctx.out.error("ERR command not handled"),
    }
}

fn hset(ctx: &mut Ctx<'_, '_>) {
    if ctx.argc() % 2 == 1 {
        let name = ctx.spec.name;
        return ctx.out.error(&format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
    }
    let (key, db, now) = (ctx.arg(1), ctx.db, ctx.now);
    let limits = crate::types::limits();
    let args = ctx.args;
    let mut h = match create(&mut ctx.state.kv, db, key, now, Hash::new) {
        Ok(h) => h,
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
    };
    let pairs = (args.len() - 2) / 2;
    h.prepare((2..args.len()).map(|i| args.get(i).len()), pairs, &limits);
    let mut created = 0;
    for i in (2..args.len()).step_by(2) {
        match h.set(args.get(i), args.get(i + 1), &limits) {
            Ok(new) => created += i64::from(new),
            Err(_) => {
                drop(h);
                return ctx.out.error(TOO_BIG);
            }
        }
    }
    drop(h);
    ctx.modified(key);
    ctx.notify(notify::HASH, "hset", key);
    ctx.prop.dirty += pairs as u64 - 1;
    if ctx.spec.cmd == Cmd::Hset {
        ctx.out.int(created);
    } else {
        ctx.out.ok();
    }
}

fn hsetnx(ctx: &mut Ctx<'_, '_>) {
    let (key, field, value) = (ctx.arg(1), ctx.arg(2), ctx.arg(3));
    let (db, now) = (ctx.db, ctx.now);
    let limits = crate::types::limits();
    let mut h = match create(&mut ctx.state.kv, db, key, now, Hash::new) {
        Ok(h) => h,
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
    };
    if h.get(field).is_some() {
        return ctx.out.int(0);
    }
    h.prepare([field.len(), value.len()].into_iter(), 1, &limits);
    let ok = h.set(field, value, &limits).is_ok();
    drop(h);
    if !ok {
        return ctx.out.error(TOO_BIG);
    }
    ctx.modified(key);
    ctx.notify(notify::HASH, "hset", key);
    ctx.out.int(1);
}

fn hget(ctx: &mut Ctx<'_, '_>) {
    match read::<Hash>(&ctx.state.kv, ctx.db, ctx.arg(1), ctx.now) {
        Err(WrongType) => ctx.out.error(WRONGTYPE),
        Ok(h) => match h.and_then(|h| h.get(ctx.arg(2))) {
            Some(v) => ctx.out.bulk(v),
            None => ctx.out.null(),
        },
    }
}

fn hmget(ctx: &mut Ctx<'_, '_>) {
    match read::<Hash>(&ctx.state.kv, ctx.db, ctx.arg(1), ctx.now) {
        Err(WrongType) => ctx.out.error(WRONGTYPE),
        Ok(h) => {
            ctx.out.array(ctx.argc() - 2);
            for i in 2..ctx.argc() {
                match h.and_then(|h| h.get(ctx.arg(i))) {
                    Some(v) => ctx.out.bulk(v),
                    None => ctx.out.null(),
                }
            }
        }
    }
}

fn hdel(ctx: &mut Ctx<'_, '_>) {
    let (key, db, now) = (ctx.arg(1), ctx.db, ctx.now);
    let args = ctx.args;
    let mut deleted = 0;
    match write::<Hash>(&mut ctx.state.kv, db, key, now) {
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
        Ok(None) => return ctx.out.int(0),
        Ok(Some(mut h)) => {
            for i in 2..args.len() {
                if h.remove(args.get(i)) {
                    deleted += 1;
                    if h.is_empty() {
                        break;
                    }
                }
            }
        }
    }
    if deleted > 0 {
        let gone = drop_if_empty::<Hash>(&mut ctx.state.kv, db, key, now);
        ctx.modified(key);
        ctx.notify(notify::HASH, "hdel", key);
        if gone {
            ctx.notify(notify::GENERIC, "del", key);
        }
        ctx.prop.dirty += deleted as u64 - 1;
    }
    ctx.out.int(deleted);
}

fn hexists(ctx: &mut Ctx<'_, '_>) {
    match read::<Hash>(&ctx.state.kv, ctx.db, ctx.arg(1), ctx.now) {
        Err(WrongType) => ctx.out.error(WRONGTYPE),
        Ok(h) => {
            let found = h.is_some_and(|h| h.get(ctx.arg(2)).is_some());
            ctx.out.int(i64::from(found));
        }
    }
}

fn hlen(ctx: &mut Ctx<'_, '_>) {
    match read::<Hash>(&ctx.state.kv, ctx.db, ctx.arg(1), ctx.now) {
        Err(WrongType) => ctx.out.error(WRONGTYPE),
        Ok(h) => reply_len(ctx.out, h.map_or(0, Hash::len)),
    }
}

fn hstrlen(ctx: &mut Ctx<'_, '_>) {
    match read::<Hash>(&ctx.state.kv, ctx.db, ctx.arg(1), ctx.now) {
        Err(WrongType) => ctx.out.error(WRONGTYPE),
        Ok(h) => reply_len(
            ctx.out,
            h.and_then(|h| h.get(ctx.arg(2))).map_or(0, <[u8]>::len),
        ),
    }
}

fn hincrby(ctx: &mut Ctx<'_, '_>) {
    let Some(by) = parse_i64(ctx.arg(3)) else {
        return ctx.out.error(NOT_INT);
    };
    let (key, field, db, now) = (ctx.arg(1), ctx.arg(2), ctx.db, ctx.now);
    let limits = crate::types::limits();
    let mut h = match create(&mut ctx.state.kv, db, key, now, Hash::new) {
        Ok(h) => h,
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
    };
    let cur = match h.get(field) {
        None => 0,
        Some(v) => match parse_i64(v) {
            Some(n) => n,
            None => {
                drop(h);
                drop_if_empty::<Hash>(&mut ctx.state.kv, db, key, now);
                return ctx.out.error("ERR hash value is not an integer");
            }
        },
    };
    let Some(new) = cur.checked_add(by) else {
        drop(h);
        drop_if_empty::<Hash>(&mut ctx.state.kv, db, key, now);
        return ctx.out.error("ERR increment or decrement would overflow");
    };
    let ok = h.set(field, new.to_string().as_bytes(), &limits).is_ok();
    drop(h);
    if !ok {
        return ctx.out.error(TOO_BIG);
    }
    ctx.modified(key);
    ctx.notify(notify::HASH, "hincrby", key);
    ctx.out.int(new);
}

fn hincrbyfloat(ctx: &mut Ctx<'_, '_>) {
    use super::ldouble::{self, Operand};
    let incr = match ldouble::parse(ctx.arg(3)) {
        None => return ctx.out.error(super::NOT_FLOAT),
        Some(Operand::Inf(_)) => return ctx.out.error("ERR value is NaN or Infinity"),
        Some(v) => v,
    };
    let (key, field, db, now) = (ctx.arg(1), ctx.arg(2), ctx.db, ctx.now);
    let limits = crate::types::limits();
    let mut h = match create(&mut ctx.state.kv, db, key, now, Hash::new) {
        Ok(h) => h,
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
    };
    let cur = match h.get(field) {
        None => Operand::Zero(false),
        Some(v) => match ldouble::parse(v) {
            Some(x) => x,
            None => {
                drop(h);
                drop_if_empty::<Hash>(&mut ctx.state.kv, db, key, now);
                return ctx.out.error("ERR hash value is not a float");
            }
        },
    };
    let Some(sum) = ldouble::add(cur, incr) else {
        drop(h);
        drop_if_empty::<Hash>(&mut ctx.state.kv, db, key, now);
        return ctx.out.error("ERR increment would produce NaN or Infinity");
    };
    let text = ldouble::format(sum);
    let ok = h.set(field, text.as_bytes(), &limits).is_ok();
    drop(h);
    if !ok {
        return ctx.out.error(TOO_BIG);
    }
    ctx.modified(key);
    ctx.notify(notify::HASH, "hincrbyfloat", key);
    ctx.out.bulk(text.as_bytes());
    // Redis: always `HSET key field value` with the result.
    ctx.effect(&[b"HSET", key, field, text.as_bytes()]);
}

fn hgetall(ctx: &mut Ctx<'_, '_>) {
    let cmd = ctx.spec.cmd;
    let (keys, vals) = (cmd != Cmd::Hvals, cmd != Cmd::Hkeys);
    let h = match read::<Hash>(&ctx.state.kv, ctx.db, ctx.arg(1), ctx.now) {
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
        Ok(h) => h,
    };
    let n = h.map_or(0, Hash::len);
    if keys && vals {
        ctx.out.map(n);
    } else {
        ctx.out.array(n);
    }
    if let Some(h) = h {
        for (f, v) in h.iter() {
            if keys {
                ctx.out.bulk(f);
            }
            if vals {
                ctx.out.bulk(v);
            }
        }
    }
}

/// `HRANDFIELD key [count [WITHVALUES]]` (Redis 7.0 `hrandfieldWithCountCommand`: a negative
/// count may repeat fields; a count at least the size returns the whole hash in its order).
fn hrandfield(ctx: &mut Ctx<'_, '_>) {
    let mut count = None;
    let mut withvalues = false;
    if ctx.argc() >= 3 {
        let Some(l) = parse_i64(ctx.arg(2)) else {
            return ctx.out.error(NOT_INT);
        };
        if l == i64::MIN {
            return ctx.out.error("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807");
        }
        if ctx.argc() > 4 || (ctx.argc() == 4 && !ctx.arg(3).eq_ignore_ascii_case(b"withvalues")) {
            return ctx.out.error(SYNTAX);
        }
        if ctx.argc() == 4 {
            withvalues = true;
            if !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&l) {
                return ctx.out.error("ERR value is out of range");
            }
        }
        count = Some(l);
    }
    let (db, now) = (ctx.db, ctx.now);
    let crate::server::State { kv, rng, .. } = &mut *ctx.state;
    let h = match read::<Hash>(kv, db, ctx.args.get(1), now) {
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
        Ok(h) => h,
    };
    let mut draw = |k: usize| super::rand_below(rng, k);
    let Some(l) = count else {
        return match h.and_then(|h| h.random(&mut draw)) {
            Some((f, _)) => ctx.out.bulk(f),
            None => ctx.out.null(),
        };
    };
    let Some(h) = h else {
        return ctx.out.array(0);
    };
    let resp3 = ctx.out.resp3();
    let (uniq, n) = if l >= 0 {
        (true, l as u64)
    } else {
        (false, l.unsigned_abs())
    };
    if n == 0 {
        return ctx.out.array(0);
    }
    let size = h.len() as u64;
    // The (field, value) pairs to reply, in order.
    let picked: Vec<(&[u8], &[u8])> = if !uniq || n == 1 {
        (0..n).filter_map(|_| h.random(&mut draw)).collect()
    } else if n >= size {
        h.iter().collect()
    } else {
        let mut all: Vec<(&[u8], &[u8])> = h.iter().collect();
        while all.len() as u64 > n {
            let i = draw(all.len());
            all.swap_remove(i);
        }
        all
    };
    if withvalues && !resp3 {
        ctx.out.array(picked.len() * 2);
    } else {
        ctx.out.array(picked.len());
    }
    for (f, v) in picked {
        if withvalues && resp3 {
            ctx.out.array(2);
        }
        ctx.out.bulk(f);
        if withvalues {
            ctx.out.bulk(v);
        }
    }
}

fn hscan(ctx: &mut Ctx<'_, '_>) {
    let cursor = match super::parse_cursor(ctx.arg(2)) {
        Ok(c) => c,
        Err(e) => return ctx.out.error(e),
    };
    let h = match read::<Hash>(&ctx.state.kv, ctx.db, ctx.arg(1), ctx.now) {
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
        Ok(None) => return super::scan_reply(ctx.out, 0, &[]),
        Ok(Some(h)) => h,
    };
    let a = match super::parse_scan_args(ctx.args, 3, super::ScanOf::Hash) {
        Ok(a) => a,
        Err(e) => return ctx.out.error(e),
    };
    let mut items: Vec<Vec<u8>> = Vec::new();
    let next = h.scan(cursor, a.count, |f, v| {
        if super::matches(a.pattern, f) {
            items.push(f.to_vec());
            if !a.only_keys {
                items.push(v.to_vec());
            }
        }
    });
    super::scan_reply(ctx.out, next, &items);
}

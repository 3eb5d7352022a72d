//! The list commands (Redis 7.0 `t_list.c`: replies, error texts and the order in which
//! arguments and the key are checked). The blocking forms run here when they can be served
//! at once (or inside MULTI / a script, where they never block) and hand the rest to
//! [`crate::blocking`].

use super::{
    create, drop_if_empty, parse_i64, rank_range, read, write, Ctx, WrongType, NOT_INT, SYNTAX,
    WRONGTYPE,
};
use crate::blocking::{self, BlockOp};
use crate::notify;
use crate::resp::Out;
use crate::server::State;
use crate::table::Cmd;
use crate::types::list::{End, Fill, List};

/// `ERR value is out of range, must be positive`
const NOT_POSITIVE: &str = "ERR value is out of range, must be positive";

/// Runs a list command.
pub fn run(ctx: &mut Ctx<'_, '_>) {
    match ctx.spec.cmd {
        Cmd::Lpush => push(ctx, End::Left, false),
        Cmd::Rpush => push(ctx, End::Right, false),
        Cmd::Lpushx => push(ctx, End::Left, true),
        Cmd::Rpushx => push(ctx, End::Right, true),
        Cmd::Linsert => linsert(ctx),
        Cmd::Llen => llen(ctx),
        Cmd::Lindex => lindex(ctx),
        Cmd::Lset => lset(ctx),
        Cmd::Lrange => lrange(ctx),
        Cmd::Ltrim => ltrim(ctx),
        Cmd::Lrem => lrem(ctx),
        Cmd::Lpos => lpos(ctx),
        Cmd::Lpop => pop(ctx, End::Left),
        Cmd::Rpop => pop(ctx, End::Right),
        Cmd::Lmove => lmove(ctx),
        Cmd::Rpoplpush => rpoplpush(ctx),
        Cmd::Lmpop => lmpop(ctx, false),
        Cmd::Blmpop => lmpop(ctx, true),
        Cmd::Blpop => bpop(ctx, End::Left),
        Cmd::Brpop => bpop(ctx, End::Right),
        Cmd::Blmove => blmove(ctx),
        Cmd::Brpoplpush => brpoplpush(ctx),
        _ => ctx.out.error("ERR command not handled"),
    }
}

/// The configured node fill (`list-max-listpack-size`).
pub fn fill(_state: &State) -> Fill {
    Fill::new(crate::types::limits().list_max_listpack_size)
}

/// An index from the head or, when negative, from the tail; `None` out of range.
fn index(i: i64, len: usize) -> Option<usize> {
    let i = if i < 0 { len as i64 + i } else { i };
    (0..len as i64).contains(&i).then_some(i as usize)
}

fn push(ctx: &mut Ctx<'_, '_>, end: End, xx: bool) {
    let key = ctx.arg(1);
    let fill = fill(ctx.state);
    let n = if xx {
        match write::<List>(&mut ctx.state.kv, ctx.db, key, ctx.now) {
            Err(WrongType) => return ctx.out.error(WRONGTYPE),
            Ok(None) => return ctx.out.int(0),
            Ok(Some(mut l)) => {
                for i in 2..ctx.args.len() {
                    l.push(end, ctx.args.get(i), fill);
                }
                l.len()
            }
        }
    } else {
        match create(&mut ctx.state.kv, ctx.db, key, ctx.now, List::new) {
            Err(WrongType) => return ctx.out.error(WRONGTYPE),
            Ok(mut l) => {
                for i in 2..ctx.args.len() {
                    l.push(end, ctx.args.get(i), fill);
                }
                l.len()
            }
        }
    };
    ctx.out.int(n as i64);
    ctx.modified(key);
    ctx.notify(notify::LIST, push_event(end), key);
    blocking::signal(ctx.state, ctx.db, key);
}

fn linsert(ctx: &mut Ctx<'_, '_>) {
    let after = if ctx.arg(2).eq_ignore_ascii_case(b"after") {
        true
    } else if ctx.arg(2).eq_ignore_ascii_case(b"before") {
        false
    } else {
        return ctx.out.error(SYNTAX);
    };
    let (key, pivot, elem) = (ctx.arg(1), ctx.arg(3), ctx.arg(4));
    let fill = fill(ctx.state);
    let n = match write::<List>(&mut ctx.state.kv, ctx.db, key, ctx.now) {
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
        Ok(None) => return ctx.out.int(0),
        Ok(Some(mut l)) => {
            let Some(at) = l.iter().position(|e| e.eq_bytes(pivot)) else {
                return ctx.out.int(-1);
            };
            l.insert(at + usize::from(after), elem, fill);
            l.len()
        }
    };
    ctx.modified(key);
    ctx.notify(notify::LIST, "linsert", key);
    ctx.out.int(n as i64);
}

fn llen(ctx: &mut Ctx<'_, '_>) {
    match read::<List>(&ctx.state.kv, ctx.db, ctx.arg(1), ctx.now) {
        Err(WrongType) => ctx.out.error(WRONGTYPE),
        Ok(l) => ctx.out.int(l.map_or(0, |l| l.len() as i64)),
    }
}

fn lindex(ctx: &mut Ctx<'_, '_>) {
    let l = match read::<List>(&ctx.state.kv, ctx.db, ctx.arg(1), ctx.now) {
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
        Ok(None) => return ctx.out.null(),
        Ok(Some(l)) => l,
    };
    let Some(i) = parse_i64(ctx.arg(2)) else {
        return ctx.out.error(NOT_INT);
    };
    let out = &mut *ctx.out;
    match index(i, l.len()) {
        Some(i) => {
            l.with(i, |e| e.with_bytes(|b| out.bulk(b)));
        }
        None => out.null(),
    }
}

fn lset(ctx: &mut Ctx<'_, '_>) {
    let key = ctx.arg(1);
    let fill = fill(ctx.state);
    let ok = match write::<List>(&mut ctx.state.kv, ctx.db, key, ctx.now) {
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
        Ok(None) => return ctx.out.error("ERR no such key"),
        Ok(Some(mut l)) => {
            let Some(i) = parse_i64(ctx.args.get(2)) else {
                drop(l);
                return ctx.out.error(NOT_INT);
            };
            match index(i, l.len()) {
                Some(i) => l.set(i, ctx.args.get(3), fill),
                None => false,
            }
        }
    };
    if !ok {
        return ctx.out.error("ERR index out of range");
    }
    ctx.out.ok();
    ctx.modified(key);
    ctx.notify(notify::LIST, "lset", key);
}

/// Writes elements `start..=end` (resolved) of `l` as an array, reversed when `rev`.
fn range_reply(out: &mut Out, l: &List, start: usize, end: usize, rev: bool) {
    out.array(end - start + 1);
    if rev {
        // From the tail: reverse indexes of the same span.
        let len = l.len();
        let mut skip = len - 1 - end;
        let mut left = end - start + 1;
        for e in l.iter_rev() {
            if left == 0 {
                break;
            }
            if skip > 0 {
                skip -= 1;
                continue;
            }
            e.with_bytes(|b| out.bulk(b));
            left -= 1;
        }
    } else {
        l.for_each_range(start, end, |e| e.with_bytes(|b| out.bulk(b)));
    }
}

fn lrange(ctx: &mut Ctx<'_, '_>) {
    let (Some(start), Some(end)) = (parse_i64(ctx.arg(2)), parse_i64(ctx.arg(3))) else {
        return ctx.out.error(NOT_INT);
    };
    match read::<List>(&ctx.state.kv, ctx.db, ctx.arg(1), ctx.now) {
        Err(WrongType) => ctx.out.error(WRONGTYPE),
        Ok(None) => ctx.out.array(0),
        Ok(Some(l)) => match rank_range(start, end, l.len()) {
            None => ctx.out.array(0),
            Some((a, b)) => range_reply(ctx.out, l, a, b, false),
        },
    }
}

fn ltrim(ctx: &mut Ctx<'_, '_>) {
    let (Some(start), Some(end)) = (parse_i64(ctx.arg(2)), parse_i64(ctx.arg(3))) else {
        return ctx.out.error(NOT_INT);
    };
    let key = ctx.arg(1);
    let fill = fill(ctx.state);
    let removed = match write::<List>(&mut ctx.state.kv, ctx.db, key, ctx.now) {
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
        Ok(None) => return ctx.out.ok(),
        Ok(Some(mut l)) => {
            let len = l.len();
            match rank_range(start, end, len) {
                None => {
                    l.trim(1, 0, fill);
                    len
                }
                Some((a, b)) => {
                    l.trim(a, b, fill);
                    len - (b - a + 1)
                }
            }
        }
    };
    let gone = drop_if_empty::<List>(&mut ctx.state.kv, ctx.db, key, ctx.now);
    if removed > 0 {
        ctx.modified(key);
    } else {
        super::txn::touch(ctx.state, ctx.db, key);
    }
    // Valkey `ltrimCommand` announces a trim that removed nothing too.
    ctx.notify(notify::LIST, "ltrim", key);
    if gone {
        ctx.notify(notify::GENERIC, "del", key);
    }
    ctx.out.ok();
}

fn lrem(ctx: &mut Ctx<'_, '_>) {
    let Some(count) = parse_i64(ctx.arg(2)) else {
        return ctx.out.error(NOT_INT);
    };
    let (key, elem) = (ctx.arg(1), ctx.arg(3));
    let fill = fill(ctx.state);
    let removed = match write::<List>(&mut ctx.state.kv, ctx.db, key, ctx.now) {
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
        Ok(None) => return ctx.out.int(0),
        Ok(Some(mut l)) => l.remove_matching(elem, count.unsigned_abs() as usize, count < 0, fill),
    };
    let gone = drop_if_empty::<List>(&mut ctx.state.kv, ctx.db, key, ctx.now);
    if removed > 0 {
        ctx.modified(key);
        ctx.notify(notify::LIST, "lrem", key);
        if gone {
            ctx.notify(notify::GENERIC, "del", key);
        }
    }
    ctx.out.int(removed as i64);
}

/// `getPositiveLongFromObjectOrReply` with an optional message: `ERR <msg>`, or `ERR value
/// is out of range, must be positive`, for a non-integer and for a negative value alike.
pub fn positive(b: &[u8], msg: Option<&str>) -> Result<i64, String> {
    match parse_i64(b) {
        Some(v) if v >= 0 => Ok(v),
        Some(_) => Err(msg.map_or(NOT_POSITIVE.to_string(), |m| format!("ERR {m}"))),
        None => Err(msg.map_or(NOT_POSITIVE.to_string(), |m| format!("ERR {m}"))),
    }
}

fn lpos(ctx: &mut Ctx<'_, '_>) {
    let elem = ctx.arg(2);
    let (mut rank, mut count, mut maxlen) = (1i64, -1i64, 0i64);
    let mut j = 3;
    while j < ctx.args.len() {
        let opt = ctx.arg(j);
        let more = j + 1 < ctx.args.len();
        if opt.eq_ignore_ascii_case(b"rank") && more {
            j += 1;
            let Some(r) = parse_i64(ctx.arg(j)) else {
                return ctx.out.error(NOT_INT);
            };
            // Valkey 9.1 reads RANK within ±LONG_MAX (`getRangeLongFromObjectOrReply`);
            // Redis 7.0 took LONG_MIN as RANK -1.
            if r == i64::MIN {
                return ctx.out.error("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807");
            }
            if r == 0 {
                return ctx.out.error("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list");
            }
            rank = r;
        } else if opt.eq_ignore_ascii_case(b"count") && more {
            j += 1;
            match positive(ctx.arg(j), Some("COUNT can't be negative")) {
                Ok(c) => count = c,
                Err(e) => return ctx.out.error(&e),
            }
        } else if opt.eq_ignore_ascii_case(b"maxlen") && more {
            j += 1;
            match positive(ctx.arg(j), Some("MAXLEN can't be negative")) {
                Ok(m) => maxlen = m,
                Err(e) => return ctx.out.error(&e),
            }
        } else {
            return ctx.out.error(SYNTAX);
        }
        j += 1;
    }
    let from_tail = rank < 0;
    // Within ±i64::MAX: checked above.
    let rank = rank.unsigned_abs();
    let l = match read::<List>(&ctx.state.kv, ctx.db, ctx.arg(1), ctx.now) {
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
        Ok(None) => {
            return if count != -1 {
                ctx.out.array(0)
            } else {
                ctx.out.null()
            };
        }
        Ok(Some(l)) => l,
    };
    let len = l.len();
    let mut found = Vec::new();
    let mut matches = 0u64;
    let limit = if maxlen == 0 {
        usize::MAX
    } else {
        maxlen as usize
    };
    let mut visit = |i: usize, e: crate::types::listpack::Elem<'_>| -> bool {
        if i >= limit {
            return false;
        }
        if e.eq_bytes(elem) {
            matches += 1;
            if matches >= rank {
                let at = if from_tail { len - 1 - i } else { i };
                found.push(at as i64);
                if count == -1 || (count > 0 && found.len() as i64 >= count) {
                    return false;
                }
            }
        }
        true
    };
    if from_tail {
        for (i, e) in l.iter_rev().enumerate() {
            if !visit(i, e) {
                break;
            }
        }
    } else {
        for (i, e) in l.iter().enumerate() {
            if !visit(i, e) {
                break;
            }
        }
    }
    if count != -1 {
        ctx.out.array(found.len());
        for i in found {
            ctx.out.int(i);
        }
    } else {
        match found.first() {
            Some(&i) => ctx.out.int(i),
            None => ctx.out.null(),
        }
    }
}

/// Pops up to `count` elements (one, replied as a bulk, when `count` is `None`) from the list
/// at `key` into `out`, deleting the key when emptied. `Ok(0)` when the key is missing
/// (nothing is written). The elements popped, in pop order, are returned as their number.
///
/// # Errors
/// [`WrongType`] (nothing written).
pub fn pop_into(
    state: &mut State,
    db: usize,
    key: &[u8],
    end: End,
    count: Option<usize>,
    out: &mut Out,
    now: u64,
) -> Result<usize, WrongType> {
    let n = match write::<List>(&mut state.kv, db, key, now)? {
        None => return Ok(0),
        Some(mut l) => match count {
            None => match l.pop(end) {
                Some(v) => {
                    out.bulk(&v);
                    1
                }
                None => 0,
            },
            Some(c) => {
                let n = c.min(l.len());
                out.array(n);
                for _ in 0..n {
                    if let Some(v) = l.pop(end) {
                        out.bulk(&v);
                    }
                }
                n
            }
        },
    };
    let gone = drop_if_empty::<List>(&mut state.kv, db, key, now);
    if n > 0 {
        // Valkey `listElementsRemoved`.
        notify::keyspace_event(state, db, notify::LIST, pop_event(end), key);
        if gone {
            notify::keyspace_event(state, db, notify::GENERIC, "del", key);
        }
    }
    Ok(n)
}

fn pop(ctx: &mut Ctx<'_, '_>, end: End) {
    let count = if ctx.args.len() == 3 {
        match positive(ctx.arg(2), None) {
            Ok(c) => Some(c as usize),
            Err(e) => return ctx.out.error(&e),
        }
    } else if ctx.args.len() > 3 {
        return ctx.out.error(&format!(
            "ERR wrong number of arguments for '{}' command",
            ctx.spec.name
        ));
    } else {
        None
    };
    let key = ctx.arg(1);
    match read::<List>(&ctx.state.kv, ctx.db, key, ctx.now) {
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
        Ok(None) => {
            return if count.is_some() {
                ctx.out.null_array()
            } else {
                ctx.out.null()
            };
        }
        Ok(Some(_)) => {}
    }
    if count == Some(0) {
        return ctx.out.array(0);
    }
    match pop_into(ctx.state, ctx.db, key, end, count, ctx.out, ctx.now) {
        Err(WrongType) => ctx.out.error(WRONGTYPE),
        Ok(_) => ctx.modified(key),
    }
}

/// `LEFT` / `RIGHT` (`getListPositionFromObjectOrReply`).
fn position(b: &[u8]) -> Option<End> {
    if b.eq_ignore_ascii_case(b"right") {
        Some(End::Right)
    } else if b.eq_ignore_ascii_case(b"left") {
        Some(End::Left)
    } else {
        None
    }
}

/// Moves one element from `src`'s `from` end to `dst`'s `to` end (`lmoveGenericCommand`),
/// writing the element (or a null when `src` is missing). Returns whether an element moved.
///
/// # Errors
/// [`WrongType`] for either key (nothing changed, nothing written).
#[allow(clippy::too_many_arguments)]
pub fn move_into(
    state: &mut State,
    db: usize,
    src: &[u8],
    dst: &[u8],
    from: End,
    to: End,
    out: &mut Out,
    now: u64,
) -> Result<bool, WrongType> {
    if read::<List>(&state.kv, db, src, now)?.is_none() {
        out.null();
        return Ok(false);
    }
    read::<List>(&state.kv, db, dst, now)?;
    let fill = fill(state);
    let v = match write::<List>(&mut state.kv, db, src, now)? {
        Some(mut l) => l.pop(from),
        None => None,
    };
    let Some(v) = v else {
        out.null();
        return Ok(false);
    };
    // The same key: the element goes back into the same list, which is never deleted (its
    // TTL stays, as Valkey's `lmoveGenericCommand`).
    let src_gone = src != dst && drop_if_empty::<List>(&mut state.kv, db, src, now);
    let mut d = create(&mut state.kv, db, dst, now, List::new)?;
    d.push(to, &v, fill);
    drop(d);
    out.bulk(&v);
    // Valkey `lmoveHandlePush`, then `listElementsRemoved` for the source.
    notify::keyspace_event(state, db, notify::LIST, push_event(to), dst);
    notify::keyspace_event(state, db, notify::LIST, pop_event(from), src);
    if src_gone {
        notify::keyspace_event(state, db, notify::GENERIC, "del", src);
    }
    blocking::signal(state, db, dst);
    Ok(true)
}

fn lmove(ctx: &mut Ctx<'_, '_>) {
    let (Some(from), Some(to)) = (position(ctx.arg(3)), position(ctx.arg(4))) else {
        return ctx.out.error(SYNTAX);
    };
    do_move(ctx, from, to);
}

fn rpoplpush(ctx: &mut Ctx<'_, '_>) {
    do_move(ctx, End::Right, End::Left);
}

fn do_move(ctx: &mut Ctx<'_, '_>, from: End, to: End) {
    let (src, dst) = (ctx.arg(1), ctx.arg(2));
    match move_into(ctx.state, ctx.db, src, dst, from, to, ctx.out, ctx.now) {
        Err(WrongType) => ctx.out.error(WRONGTYPE),
        Ok(false) => {}
        Ok(true) => {
            ctx.modified(src);
            ctx.modified(dst);
        }
    }
}

/// The keyspace event of a push at `end`: `lpush` / `rpush`.
fn push_event(end: End) -> &'static str {
    match end {
        End::Left => "lpush",
        End::Right => "rpush",
    }
}

/// The keyspace event of a pop at `end`: `lpop` / `rpop`.
fn pop_event(end: End) -> &'static str {
    match end {
        End::Left => "lpop",
        End::Right => "rpop",
    }
}

/// The first key of `keys` holding a non-empty list: pops up to `count` (BLMPOP / LMPOP form
/// `[key, [elements]]`) or one (`None`: BLPOP form `[key, element]`) into `out` and returns
/// the key's index and the effect to propagate. `Ok(None)` when every key is missing.
///
/// # Errors
/// [`WrongType`] at the first key of another type (nothing written).
pub fn pop_first(
    state: &mut State,
    db: usize,
    keys: &[&[u8]],
    end: End,
    count: Option<usize>,
    out: &mut Out,
    now: u64,
) -> Result<Option<Vec<Vec<u8>>>, WrongType> {
    for &key in keys {
        let Some(l) = read::<List>(&state.kv, db, key, now)? else {
            continue;
        };
        let len = l.len();
        if len == 0 {
            continue;
        }
        out.array(2);
        out.bulk(key);
        let cmd: &[u8] = if end == End::Left { b"LPOP" } else { b"RPOP" };
        match count {
            None => {
                pop_into(state, db, key, end, None, out, now)?;
                return Ok(Some(vec![cmd.to_vec(), key.to_vec()]));
            }
            Some(c) => {
                pop_into(state, db, key, end, Some(c), out, now)?;
                let n = c.min(len).to_string().into_bytes();
                return Ok(Some(vec![cmd.to_vec(), key.to_vec(), n]));
            }
        }
    }
    Ok(None)
}

/// The blocking timeout argument (`getTimeoutFromObjectOrReply`, seconds with decimals):
/// `None` for 0 (forever), else the deadline in Unix ms.
///
/// # Errors
/// Redis's texts.
pub fn timeout_arg(b: &[u8], now: u64) -> Result<Option<u64>, &'static str> {
    // Valkey `getTimeoutFromObjectOrReply`: a `long double` (glibc's hexadecimal form too).
    let t = super::ldouble::parse(b)
        .map(super::ldouble::to_f64)
        .ok_or("ERR timeout is not a float or out of range")?;
    let ms = (t * 1000.0).ceil();
    if ms < 0.0 {
        return Err("ERR timeout is negative");
    }
    if !ms.is_finite() || ms >= 9.2e18 {
        return Err("ERR timeout is out of range");
    }
    let ms = ms as u64;
    Ok((ms > 0).then(|| now.saturating_add(ms)))
}

fn bpop(ctx: &mut Ctx<'_, '_>, end: End) {
    let last = ctx.args.len() - 1;
    let deadline = match timeout_arg(ctx.arg(last), ctx.now) {
        Ok(d) => d,
        Err(e) => return ctx.out.error(e),
    };
    let keys: Vec<&[u8]> = (1..last).map(|i| ctx.args.get(i)).collect();
    serve_or_block(ctx, keys, BlockOp::ListPop { end, count: None }, deadline);
}

fn lmpop(ctx: &mut Ctx<'_, '_>, block: bool) {
    let first = if block { 2 } else { 1 };
    let deadline = if block {
        match timeout_arg(ctx.arg(1), ctx.now) {
            Ok(d) => d,
            Err(e) => return ctx.out.error(e),
        }
    } else {
        None
    };
    let numkeys = match parse_i64(ctx.arg(first)) {
        Some(n) if n >= 1 => n as usize,
        _ => return ctx.out.error("ERR numkeys should be greater than 0"),
    };
    let where_idx = first + numkeys + 1;
    if where_idx >= ctx.args.len() {
        return ctx.out.error(SYNTAX);
    }
    let Some(end) = position(ctx.arg(where_idx)) else {
        return ctx.out.error(SYNTAX);
    };
    let count = match super::mpop_count(ctx.args, where_idx + 1) {
        Ok(c) => Some(c),
        Err(e) => return ctx.out.error(e),
    };
    let keys: Vec<&[u8]> = (first + 1..=first + numkeys)
        .map(|i| ctx.args.get(i))
        .collect();
    if block {
        serve_or_block(ctx, keys, BlockOp::ListPop { end, count }, deadline);
    } else {
        match pop_first(ctx.state, ctx.db, &keys, end, count, ctx.out, ctx.now) {
            Err(WrongType) => ctx.out.error(WRONGTYPE),
            Ok(None) => ctx.out.null_array(),
            Ok(Some(effect)) => {
                let key = effect[1].clone();
                ctx.modified(&key);
                let parts: Vec<&[u8]> = effect.iter().map(Vec::as_slice).collect();
                ctx.effect(&parts);
            }
        }
    }
}

/// Serves a blocking pop now if a key has elements, else blocks the client (or, inside
/// MULTI, replies as a timeout).
fn serve_or_block(ctx: &mut Ctx<'_, '_>, keys: Vec<&[u8]>, op: BlockOp, deadline: Option<u64>) {
    let BlockOp::ListPop { end, count } = op else {
        return;
    };
    match pop_first(ctx.state, ctx.db, &keys, end, count, ctx.out, ctx.now) {
        Err(WrongType) => ctx.out.error(WRONGTYPE),
        Ok(Some(effect)) => {
            let key = effect[1].clone();
            ctx.modified(&key);
            let parts: Vec<&[u8]> = effect.iter().map(Vec::as_slice).collect();
            ctx.effect(&parts);
        }
        Ok(None) => {
            if blocking::may_block(ctx) {
                blocking::block(ctx, &keys, op, deadline);
            } else {
                ctx.out.null_array();
            }
        }
    }
}

fn blmove(ctx: &mut Ctx<'_, '_>) {
    let (Some(from), Some(to)) = (position(ctx.arg(3)), position(ctx.arg(4))) else {
        return ctx.out.error(SYNTAX);
    };
    let deadline = match timeout_arg(ctx.arg(5), ctx.now) {
        Ok(d) => d,
        Err(e) => return ctx.out.error(e),
    };
    let words = [ctx.arg(3).to_vec(), ctx.arg(4).to_vec()];
    block_move(ctx, from, to, deadline, Some(words));
}

fn brpoplpush(ctx: &mut Ctx<'_, '_>) {
    let deadline = match timeout_arg(ctx.arg(3), ctx.now) {
        Ok(d) => d,
        Err(e) => return ctx.out.error(e),
    };
    block_move(ctx, End::Right, End::Left, deadline, None);
}

/// BLMOVE (`words`: its `wherefrom` / `whereto` as the client wrote them) or BRPOPLPUSH
/// (`None`).
fn block_move(
    ctx: &mut Ctx<'_, '_>,
    from: End,
    to: End,
    deadline: Option<u64>,
    words: Option<[Vec<u8>; 2]>,
) {
    let (src, dst) = (ctx.arg(1), ctx.arg(2));
    match read::<List>(&ctx.state.kv, ctx.db, src, ctx.now) {
        Err(WrongType) => ctx.out.error(WRONGTYPE),
        Ok(Some(_)) => match move_into(ctx.state, ctx.db, src, dst, from, to, ctx.out, ctx.now) {
            Err(WrongType) => ctx.out.error(WRONGTYPE),
            Ok(false) => {}
            Ok(true) => {
                ctx.modified(src);
                ctx.modified(dst);
                let effect = move_effect(src, dst, words.as_ref());
                let parts: Vec<&[u8]> = effect.iter().map(Vec::as_slice).collect();
                ctx.effect(&parts);
            }
        },
        Ok(None) => {
            if blocking::may_block(ctx) {
                let op = BlockOp::ListMove {
                    from,
                    to,
                    dst: dst.to_vec(),
                    words,
                };
                blocking::block(ctx, &[src], op, deadline);
            } else {
                ctx.out.null();
            }
        }
    }
}

/// What a served BLMOVE / BRPOPLPUSH propagates: `LMOVE src dst <from> <to>` with the
/// client's own words for the ends (Valkey `blmoveCommand` rewrites the argv keeping
/// `argv[3..5]`), or `RPOPLPUSH src dst` for BRPOPLPUSH (`words` `None`).
pub fn move_effect(src: &[u8], dst: &[u8], words: Option<&[Vec<u8>; 2]>) -> Vec<Vec<u8>> {
    match words {
        None => vec![b"RPOPLPUSH".to_vec(), src.to_vec(), dst.to_vec()],
        Some([from, to]) => vec![
            b"LMOVE".to_vec(),
            src.to_vec(),
            dst.to_vec(),
            from.clone(),
            to.clone(),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_resolve_like_add_list_range_reply() {
        assert_eq!(rank_range(0, -1, 5), Some((0, 4)));
        assert_eq!(rank_range(-100, 100, 5), Some((0, 4)));
        assert_eq!(rank_range(3, 1, 5), None);
        assert_eq!(rank_range(5, 10, 5), None);
        assert_eq!(rank_range(-2, -1, 5), Some((3, 4)));
        assert_eq!(rank_range(0, -6, 5), None);
        assert_eq!(index(-1, 3), Some(2));
        assert_eq!(index(3, 3), None);
        assert_eq!(index(-4, 3), None);
    }

    #[test]
    fn timeouts_are_seconds_rounded_up_to_ms() {
        assert_eq!(timeout_arg(b"0", 1000), Ok(None));
        assert_eq!(timeout_arg(b"0.0001", 1000), Ok(Some(1001)));
        assert_eq!(timeout_arg(b"1.5", 1000), Ok(Some(2500)));
        assert_eq!(timeout_arg(b"-1", 1000), Err("ERR timeout is negative"));
        assert_eq!(
            timeout_arg(b"abc", 1000),
            Err("ERR timeout is not a float or out of range")
        );
        // Read as a `long double`, hexadecimal too (valkey-server 9.1.2: `BLPOP k
        // 0x7FFFFFFFFFFFFF` is `ERR timeout is out of range`).
        assert_eq!(timeout_arg(b"0x10", 0), Ok(Some(16_000)));
        assert_eq!(
            timeout_arg(b"0x7FFFFFFFFFFFFF", 0),
            Err("ERR timeout is out of range")
        );
    }
}

//! The sorted-set commands (Redis 7.0 `t_zset.c`: replies, error texts, the order in which
//! arguments and keys are checked). Scores are replied as Redis 7.0's `addReplyDouble` does:
//! `%.17g` (`0.1` is `0.10000000000000001`; Valkey 8+ prints the shortest text instead),
//! a bulk string in RESP2 and a double in RESP3.

use super::{
    create, drop_if_empty, parse_i64, read, write, Ctx, Family, WrongType, NOT_INT, SYNTAX,
    WRONGTYPE,
};
use crate::blocking::{self, BlockOp};
use crate::notify;
use crate::resp::Out;
use crate::server::{State, Value};
use crate::table::Cmd;
use crate::types::listpack::Elem;
use crate::types::zset::{Added, LexBound, ScoreBound, ZLimits, ZSet};
use std::collections::HashMap;

const NOT_FLOAT: &str = "ERR value is not a valid float";
const RANGE_NOT_FLOAT: &str = "ERR min or max is not a float";
const RANGE_NOT_LEX: &str = "ERR min or max not valid string range item";
const NAN_RESULT: &str = "ERR resulting score is not a number (NaN)";

/// Runs a sorted-set command.
pub fn run(ctx: &mut Ctx<'_, '_>) {
    match ctx.spec.cmd {
        Cmd::Zadd => zadd(ctx, false),
        Cmd::Zincrby => zadd(ctx, true),
        Cmd::Zrem => zrem(ctx),
        Cmd::Zcard => zcard(ctx),
        Cmd::Zscore => zscore(ctx),
        Cmd::Zmscore => zmscore(ctx),
        Cmd::Zrank => zrank(ctx, false),
        Cmd::Zrevrank => zrank(ctx, true),
        Cmd::Zcount => zcount(ctx),
        Cmd::Zlexcount => zlexcount(ctx),
        Cmd::Zrange => zrange(ctx, Kind::Auto, Dir::Auto, 1, false),
        Cmd::Zrangestore => zrange(ctx, Kind::Auto, Dir::Auto, 2, true),
        Cmd::Zrevrange => zrange(ctx, Kind::Rank, Dir::Rev, 1, false),
        Cmd::Zrangebyscore => zrange(ctx, Kind::Score, Dir::Fwd, 1, false),
        Cmd::Zrevrangebyscore => zrange(ctx, Kind::Score, Dir::Rev, 1, false),
        Cmd::Zrangebylex => zrange(ctx, Kind::Lex, Dir::Fwd, 1, false),
        Cmd::Zrevrangebylex => zrange(ctx, Kind::Lex, Dir::Rev, 1, false),
        Cmd::Zremrangebyrank => zremrange(ctx, Kind::Rank),
        Cmd::Zremrangebyscore => zremrange(ctx, Kind::Score),
        Cmd::Zremrangebylex => zremrange(ctx, Kind::Lex),
        Cmd::Zpopmin => zpop(ctx, false),
        Cmd::Zpopmax => zpop(ctx, true),
        Cmd::Bzpopmin => bzpop(ctx, false),
        Cmd::Bzpopmax => bzpop(ctx, true),
        Cmd::Zmpop => zmpop(ctx, false),
        Cmd::Bzmpop => zmpop(ctx, true),
        Cmd::Zrandmember => zrandmember(ctx),
        Cmd::Zscan => zscan(ctx),
        Cmd::Zunion => setop(ctx, Op::Union, false),
        Cmd::Zinter => setop(ctx, Op::Inter, false),
        Cmd::Zdiff => setop(ctx, Op::Diff, false),
        Cmd::Zunionstore => setop(ctx, Op::Union, true),
        Cmd::Zinterstore => setop(ctx, Op::Inter, true),
        Cmd::Zdiffstore => setop(ctx, Op::Diff, true),
        Cmd::Zintercard => zintercard(ctx),
        _ => ctx.out.error("ERR command not handled"),
    }
}

/// The configured `zset-max-listpack-*`.
pub fn limits(_state: &State) -> ZLimits {
    limits_of(&crate::types::limits())
}

/// The sorted-set part of the thresholds.
pub fn limits_of(l: &crate::types::Limits) -> ZLimits {
    ZLimits {
        max_entries: l.zset_max_listpack_entries,
        max_value: l.zset_max_listpack_value,
    }
}

/// `%.17g` (C `printf`), Redis 7.0's score text.
pub fn fmt_g17(d: f64) -> String {
    if d.is_nan() {
        return "nan".into();
    }
    if d.is_infinite() {
        return if d > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if d == 0.0 {
        return if d.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let sci = format!("{d:.16e}");
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let x: i32 = exp.parse().unwrap_or(0);
    if !(-4..17).contains(&x) {
        let mant = strip_zeros(mant);
        format!("{mant}e{}{:02}", if x < 0 { '-' } else { '+' }, x.abs())
    } else {
        let fixed = format!("{d:.*}", (16 - x) as usize);
        strip_zeros(&fixed).to_string()
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// `addReplyDouble` (Redis 7.0).
pub fn reply_double(out: &mut Out, d: f64) {
    let t = fmt_g17(d);
    if out.resp3() {
        out.buf.push(b',');
        out.buf.extend_from_slice(t.as_bytes());
        out.buf.extend_from_slice(b"\r\n");
    } else {
        out.bulk(t.as_bytes());
    }
}

/// `strtod` over the whole argument (leading spaces allowed, an empty string reads 0, NaN
/// refused), as score ranges are parsed (`zslParseRange`).
fn strtod(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?;
    let t = s.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    if t.is_empty() {
        return (s.is_empty()).then_some(0.0);
    }
    let v: f64 = t.parse().ok()?;
    (!v.is_nan()).then_some(v)
}

/// A double argument as `getDoubleFromObject` reads it: `strtod` over the whole text, no
/// leading space, NaN refused, and an overflow to infinity or an underflow to zero refused
/// (`ERANGE`); `inf`, `-inf`, `infinity` are values.
pub fn parse_double(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?;
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    let v: f64 = s.parse().ok()?;
    if v.is_nan() {
        return None;
    }
    let word = s.trim_start_matches(['+', '-']).to_ascii_lowercase();
    let named_inf = word == "inf" || word == "infinity";
    if v.is_infinite() && !named_inf {
        return None;
    }
    if v == 0.0 {
        // Underflow: a non-zero digit before the exponent.
        let mantissa = word.split(['e', 'E']).next().unwrap_or("");
        if mantissa.bytes().any(|c| (b'1'..=b'9').contains(&c)) {
            return None;
        }
    }
    Some(v)
}

/// A score argument (`getDoubleFromObject`).
fn score_arg(b: &[u8]) -> Option<f64> {
    parse_double(b)
}

fn score_bound(b: &[u8]) -> Option<ScoreBound> {
    match b.first() {
        Some(b'(') => strtod(&b[1..]).map(|value| ScoreBound {
            value,
            exclusive: true,
        }),
        _ => strtod(b).map(|value| ScoreBound {
            value,
            exclusive: false,
        }),
    }
}

fn lex_bound(b: &[u8]) -> Option<LexBound> {
    match b.first() {
        Some(b'+') if b.len() == 1 => Some(LexBound::Max),
        Some(b'-') if b.len() == 1 => Some(LexBound::Min),
        Some(b'(') => Some(LexBound::At(b[1..].to_vec(), true)),
        Some(b'[') => Some(LexBound::At(b[1..].to_vec(), false)),
        _ => None,
    }
}

fn zadd(ctx: &mut Ctx<'_, '_>, zincrby: bool) {
    let key = ctx.arg(1);
    let (mut nx, mut xx, mut ch, mut incr, mut gt, mut lt) =
        (false, false, false, zincrby, false, false);
    let mut idx = 2;
    if !zincrby {
        while idx < ctx.args.len() {
            let o = ctx.arg(idx);
            let is = |s: &[u8]| o.eq_ignore_ascii_case(s);
            if is(b"nx") {
                nx = true;
            } else if is(b"xx") {
                xx = true;
            } else if is(b"ch") {
                ch = true;
            } else if is(b"incr") {
                incr = true;
            } else if is(b"gt") {
                gt = true;
            } else if is(b"lt") {
                lt = true;
            } else {
                break;
            }
            idx += 1;
        }
    }
    let elements = ctx.args.len() - idx;
    if !elements.is_multiple_of(2) || elements == 0 {
        return ctx.out.error(SYNTAX);
    }
    let elements = elements / 2;
    if nx && xx {
        return ctx
            .out
            .error("ERR XX and NX options at the same time are not compatible");
    }
    if (nx && (gt || lt)) || (gt && lt) {
        return ctx
            .out
            .error("ERR GT, LT, and/or NX options at the same time are not compatible");
    }
    if incr && elements > 1 {
        return ctx
            .out
            .error("ERR INCR option supports a single increment-element pair");
    }
    let mut scores = Vec::with_capacity(elements);
    for j in 0..elements {
        match score_arg(ctx.arg(idx + 2 * j)) {
            Some(s) => scores.push(s),
            None => return ctx.out.error(NOT_FLOAT),
        }
    }
    let lim = limits(ctx.state);
    let first = ctx.arg(idx + 1);
    let exists = match read::<ZSet>(&ctx.state.kv, ctx.db, key, ctx.now) {
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
        Ok(z) => z.is_some(),
    };
    if !exists && xx {
        return if incr { ctx.out.null() } else { ctx.out.int(0) };
    }
    let (mut added, mut updated, mut processed) = (0i64, 0i64, 0i64);
    let mut last = 0.0;
    let mut nan = false;
    {
        let Ok(mut z) = create(&mut ctx.state.kv, ctx.db, key, ctx.now, || {
            ZSet::for_first_member(first, lim)
        }) else {
            return ctx.out.error(WRONGTYPE);
        };
        for (j, &s) in scores.iter().enumerate() {
            let m = ctx.args.get(idx + 1 + 2 * j);
            let cur = z.score(m);
            let new = match (cur, incr) {
                (Some(c), true) => c + s,
                _ => s,
            };
            if new.is_nan() {
                nan = true;
                break;
            }
            match cur {
                Some(c) => {
                    if nx || (gt && new <= c) || (lt && new >= c) {
                        continue;
                    }
                    last = new;
                    processed += 1;
                    if new != c {
                        z.add(m, new, lim);
                        updated += 1;
                    }
                }
                None => {
                    if xx {
                        continue;
                    }
                    if let Added::New = z.add(m, new, lim) {
                        added += 1;
                    }
                    last = new;
                    processed += 1;
                }
            }
        }
    }
    drop_if_empty::<ZSet>(&mut ctx.state.kv, ctx.db, key, ctx.now);
    if added + updated > 0 {
        ctx.modified(key);
        ctx.notify(notify::ZSET, if incr { "zincr" } else { "zadd" }, key);
        blocking::signal(ctx.state, ctx.db, key);
    }
    if nan {
        return ctx.out.error(NAN_RESULT);
    }
    if incr {
        if processed > 0 {
            reply_double(ctx.out, last);
        } else {
            ctx.out.null();
        }
    } else {
        ctx.out.int(if ch { added + updated } else { added });
    }
}

fn zrem(ctx: &mut Ctx<'_, '_>) {
    let key = ctx.arg(1);
    let n = match write::<ZSet>(&mut ctx.state.kv, ctx.db, key, ctx.now) {
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
        Ok(None) => return ctx.out.int(0),
        Ok(Some(mut z)) => {
            let mut n = 0;
            for i in 2..ctx.args.len() {
                if z.remove(ctx.args.get(i)) {
                    n += 1;
                }
                if z.is_empty() {
                    break;
                }
            }
            n
        }
    };
    let gone = drop_if_empty::<ZSet>(&mut ctx.state.kv, ctx.db, key, ctx.now);
    if n > 0 {
        ctx.modified(key);
        ctx.notify(notify::ZSET, "zrem", key);
        if gone {
            ctx.notify(notify::GENERIC, "del", key);
        }
    }
    ctx.out.int(n);
}

fn zcard(ctx: &mut Ctx<'_, '_>) {
    match read::<ZSet>(&ctx.state.kv, ctx.db, ctx.arg(1), ctx.now) {
        Err(WrongType) => ctx.out.error(WRONGTYPE),
        Ok(z) => ctx.out.int(z.map_or(0, |z| z.len() as i64)),
    }
}

fn zscore(ctx: &mut Ctx<'_, '_>) {
    match read::<ZSet>(&ctx.state.kv, ctx.db, ctx.arg(1), ctx.now) {
        Err(WrongType) => ctx.out.error(WRONGTYPE),
        Ok(None) => ctx.out.null(),
        Ok(Some(z)) => match z.score(ctx.arg(2)) {
            Some(s) => reply_double(ctx.out, s),
            None => ctx.out.null(),
        },
    }
}

fn zmscore(ctx: &mut Ctx<'_, '_>) {
    let z = match read::<ZSet>(&ctx.state.kv, ctx.db, ctx.arg(1), ctx.now) {
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
        Ok(z) => z,
    };
    ctx.out.array(ctx.args.len() - 2);
    for i in 2..ctx.args.len() {
        match z.and_then(|z| z.score(ctx.args.get(i))) {
            Some(s) => reply_double(ctx.out, s),
            None => ctx.out.null(),
        }
    }
}

/// `ZRANK` / `ZREVRANK key member [WITHSCORE]` (Valkey 9.1 `zrankGenericCommand`: with
/// `WITHSCORE` the reply is `[rank, score]`, or a null array for a missing member).
fn zrank(ctx: &mut Ctx<'_, '_>, rev: bool) {
    if ctx.args.len() > 4 {
        return ctx.out.error(&format!(
            "ERR wrong number of arguments for '{}' command",
            ctx.spec.name
        ));
    }
    let withscore = ctx.args.len() == 4;
    if withscore && !ctx.arg(3).eq_ignore_ascii_case(b"withscore") {
        return ctx.out.error(SYNTAX);
    }
    let z = match read::<ZSet>(&ctx.state.kv, ctx.db, ctx.arg(1), ctx.now) {
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
        Ok(z) => z,
    };
    let found = z.and_then(|z| {
        let r = z.rank(ctx.arg(2))?;
        let score = z.score(ctx.arg(2))?;
        Some((if rev { z.len() - 1 - r } else { r }, score))
    });
    match found {
        Some((rank, score)) => {
            if withscore {
                ctx.out.array(2);
            }
            ctx.out.int(rank as i64);
            if withscore {
                reply_double(ctx.out, score);
            }
        }
        None if withscore => ctx.out.null_array(),
        None => ctx.out.null(),
    }
}

fn zcount(ctx: &mut Ctx<'_, '_>) {
    let (Some(min), Some(max)) = (score_bound(ctx.arg(2)), score_bound(ctx.arg(3))) else {
        return ctx.out.error(RANGE_NOT_FLOAT);
    };
    match read::<ZSet>(&ctx.state.kv, ctx.db, ctx.arg(1), ctx.now) {
        Err(WrongType) => ctx.out.error(WRONGTYPE),
        Ok(None) => ctx.out.int(0),
        Ok(Some(z)) => {
            let (a, b) = (z.rank_of_score(min), z.rank_past_score(max));
            ctx.out.int(b.saturating_sub(a) as i64);
        }
    }
}

fn zlexcount(ctx: &mut Ctx<'_, '_>) {
    let (Some(min), Some(max)) = (lex_bound(ctx.arg(2)), lex_bound(ctx.arg(3))) else {
        return ctx.out.error(RANGE_NOT_LEX);
    };
    match read::<ZSet>(&ctx.state.kv, ctx.db, ctx.arg(1), ctx.now) {
        Err(WrongType) => ctx.out.error(WRONGTYPE),
        Ok(None) => ctx.out.int(0),
        Ok(Some(z)) => {
            let (a, b) = (z.rank_of_lex(&min), z.rank_past_lex(&max));
            ctx.out.int(b.saturating_sub(a) as i64);
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Auto,
    Rank,
    Score,
    Lex,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dir {
    Auto,
    Fwd,
    Rev,
}

/// The ranks `start..end` a range selects (ascending ranks, or reverse ranks for `rev`), after
/// `LIMIT offset count` (a negative count: no limit; a negative offset: nothing).
fn select(
    z: &ZSet,
    kind: Kind,
    rev: bool,
    lo: &RangeArg,
    hi: &RangeArg,
    offset: i64,
    limit: i64,
) -> (usize, usize) {
    let len = z.len();
    let (a, b) = match (kind, lo, hi) {
        (Kind::Score, RangeArg::Score(min), RangeArg::Score(max)) => {
            (z.rank_of_score(*min), z.rank_past_score(*max))
        }
        (Kind::Lex, RangeArg::Lex(min), RangeArg::Lex(max)) => {
            (z.rank_of_lex(min), z.rank_past_lex(max))
        }
        _ => (0, 0),
    };
    if b <= a {
        return (0, 0);
    }
    // In reverse order the same span is len-b..len-a.
    let (mut s, e) = if rev { (len - b, len - a) } else { (a, b) };
    if offset < 0 {
        return (0, 0);
    }
    s = s.saturating_add(offset as usize).min(e);
    let e = if limit < 0 {
        e
    } else {
        s.saturating_add(limit as usize).min(e)
    };
    (s, e)
}

enum RangeArg {
    Rank(i64),
    Score(ScoreBound),
    Lex(LexBound),
}

/// `ZRANGE` and its older forms, `ZRANGESTORE` (`zrangeGenericCommand`).
fn zrange(ctx: &mut Ctx<'_, '_>, mut kind: Kind, mut dir: Dir, key_idx: usize, store: bool) {
    let (mut withscores, mut offset, mut limit) = (false, 0i64, -1i64);
    let mut j = key_idx + 3;
    while j < ctx.args.len() {
        let a = ctx.arg(j);
        let left = ctx.args.len() - j - 1;
        if !store && a.eq_ignore_ascii_case(b"withscores") {
            withscores = true;
        } else if a.eq_ignore_ascii_case(b"limit") && left >= 2 {
            let (Some(o), Some(l)) = (parse_i64(ctx.arg(j + 1)), parse_i64(ctx.arg(j + 2))) else {
                return ctx.out.error(NOT_INT);
            };
            offset = o;
            limit = l;
            j += 2;
        } else if dir == Dir::Auto && a.eq_ignore_ascii_case(b"rev") {
            dir = Dir::Rev;
        } else if kind == Kind::Auto && a.eq_ignore_ascii_case(b"bylex") {
            kind = Kind::Lex;
        } else if kind == Kind::Auto && a.eq_ignore_ascii_case(b"byscore") {
            kind = Kind::Score;
        } else {
            return ctx.out.error(SYNTAX);
        }
        j += 1;
    }
    if kind == Kind::Auto {
        kind = Kind::Rank;
    }
    let rev = dir == Dir::Rev;
    if limit != -1 && kind == Kind::Rank {
        return ctx.out.error(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        );
    }
    if withscores && kind == Kind::Lex {
        return ctx
            .out
            .error("ERR syntax error, WITHSCORES not supported in combination with BYLEX");
    }
    let (mut min_i, mut max_i) = (key_idx + 1, key_idx + 2);
    if rev && kind != Kind::Rank {
        std::mem::swap(&mut min_i, &mut max_i);
    }
    let (lo, hi) = match kind {
        Kind::Score => match (score_bound(ctx.arg(min_i)), score_bound(ctx.arg(max_i))) {
            (Some(a), Some(b)) => (RangeArg::Score(a), RangeArg::Score(b)),
            _ => return ctx.out.error(RANGE_NOT_FLOAT),
        },
        Kind::Lex => match (lex_bound(ctx.arg(min_i)), lex_bound(ctx.arg(max_i))) {
            (Some(a), Some(b)) => (RangeArg::Lex(a), RangeArg::Lex(b)),
            _ => return ctx.out.error(RANGE_NOT_LEX),
        },
        _ => match (parse_i64(ctx.arg(min_i)), parse_i64(ctx.arg(max_i))) {
            (Some(a), Some(b)) => (RangeArg::Rank(a), RangeArg::Rank(b)),
            _ => return ctx.out.error(NOT_INT),
        },
    };
    let src = ctx.arg(key_idx);
    let z = match read::<ZSet>(&ctx.state.kv, ctx.db, src, ctx.now) {
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
        Ok(z) => z,
    };
    let (s, e) = match (z, &lo, &hi) {
        (None, _, _) => (0, 0),
        (Some(z), RangeArg::Rank(a), RangeArg::Rank(b)) => {
            super::rank_range(*a, *b, z.len()).map_or((0, 0), |(s, e)| (s, e + 1))
        }
        (Some(z), _, _) => select(z, kind, rev, &lo, &hi, offset, limit),
    };
    if store {
        let dst = ctx.arg(1);
        let mut entries: Vec<(Vec<u8>, f64)> = Vec::with_capacity(e - s);
        if let Some(z) = z {
            z.for_each_rank(s, e, rev, |m, sc| {
                entries.push((m.to_vec(), sc));
                true
            });
        }
        return store_result(ctx, dst, entries, "zrangestore");
    }
    let Some(z) = z else {
        return ctx.out.array(0);
    };
    let n = e - s;
    let resp3 = ctx.out.resp3();
    ctx.out.array(if withscores && !resp3 { 2 * n } else { n });
    let out = &mut *ctx.out;
    z.for_each_rank(s, e, rev, |m, sc| {
        if withscores && resp3 {
            out.array(2);
        }
        m.with_bytes(|b| out.bulk(b));
        if withscores {
            reply_double(out, sc);
        }
        true
    });
}

/// Stores `entries` (distinct members) at `dst` replacing what was there, replying the
/// count; an empty result deletes `dst` (`zrangeResultFinalizeStore`, the `*STORE` ops).
/// `event` is the keyspace event of a non-empty result (`zrangestore`, `zunionstore`, ...).
fn store_result(ctx: &mut Ctx<'_, '_>, dst: &[u8], entries: Vec<(Vec<u8>, f64)>, event: &str) {
    let lim = limits(ctx.state);
    let n = entries.len();
    if n == 0 {
        let existed = ctx
            .state
            .kv
            .remove(ctx.db, dst, ctx.now)
            .ok()
            .flatten()
            .is_some();
        if existed {
            ctx.modified(dst);
            ctx.notify(notify::GENERIC, "del", dst);
        }
        return ctx.out.int(0);
    }
    let z = ZSet::from_entries(entries, lim);
    let _ = ctx.state.kv.insert(ctx.db, dst, z.wrap(), ctx.now);
    ctx.modified(dst);
    ctx.notify(notify::ZSET, event, dst);
    blocking::signal(ctx.state, ctx.db, dst);
    ctx.out.int(n as i64);
}

fn zremrange(ctx: &mut Ctx<'_, '_>, kind: Kind) {
    let key = ctx.arg(1);
    let (lo, hi) = match kind {
        Kind::Score => match (score_bound(ctx.arg(2)), score_bound(ctx.arg(3))) {
            (Some(a), Some(b)) => (RangeArg::Score(a), RangeArg::Score(b)),
            _ => return ctx.out.error(RANGE_NOT_FLOAT),
        },
        Kind::Lex => match (lex_bound(ctx.arg(2)), lex_bound(ctx.arg(3))) {
            (Some(a), Some(b)) => (RangeArg::Lex(a), RangeArg::Lex(b)),
            _ => return ctx.out.error(RANGE_NOT_LEX),
        },
        _ => match (parse_i64(ctx.arg(2)), parse_i64(ctx.arg(3))) {
            (Some(a), Some(b)) => (RangeArg::Rank(a), RangeArg::Rank(b)),
            _ => return ctx.out.error(NOT_INT),
        },
    };
    let n = match write::<ZSet>(&mut ctx.state.kv, ctx.db, key, ctx.now) {
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
        Ok(None) => return ctx.out.int(0),
        Ok(Some(mut z)) => {
            let (s, e) = match (&lo, &hi) {
                (RangeArg::Rank(a), RangeArg::Rank(b)) => {
                    super::rank_range(*a, *b, z.len()).map_or((0, 0), |(s, e)| (s, e + 1))
                }
                _ => select(&z, kind, false, &lo, &hi, 0, -1),
            };
            z.remove_ranks(s, e)
        }
    };
    let gone = drop_if_empty::<ZSet>(&mut ctx.state.kv, ctx.db, key, ctx.now);
    if n > 0 {
        ctx.modified(key);
        let event = match kind {
            Kind::Score => "zremrangebyscore",
            Kind::Lex => "zremrangebylex",
            _ => "zremrangebyrank",
        };
        ctx.notify(notify::ZSET, event, key);
        if gone {
            ctx.notify(notify::GENERIC, "del", key);
        }
    }
    ctx.out.int(n as i64);
}

/// Pops from the first existing key of `keys` (`genericZpopCommand` with the key emitted):
/// `count: None` replies `[key, member, score]` (BZPOPMIN), `Some` replies `[key, [[member,
/// score], ...]]` (ZMPOP/BZMPOP). Returns the effect to propagate, `Ok(None)` when no key
/// exists (nothing written).
///
/// # Errors
/// [`WrongType`] at the first existing key of another type (nothing written).
pub fn pop_first(
    state: &mut State,
    db: usize,
    keys: &[&[u8]],
    max: bool,
    count: Option<usize>,
    out: &mut Out,
    now: u64,
) -> Result<Option<Vec<Vec<u8>>>, WrongType> {
    for &key in keys {
        let Some(z) = read::<ZSet>(&state.kv, db, key, now)? else {
            continue;
        };
        let len = z.len();
        if len == 0 {
            continue;
        }
        let n = count.unwrap_or(1).min(len);
        match count {
            None => {
                out.array(3);
                out.bulk(key);
            }
            Some(_) => {
                out.array(2);
                out.bulk(key);
                out.array(n);
            }
        }
        pop_n(state, db, key, max, n, count.is_some(), out, now)?;
        let name: &[u8] = if max { b"ZPOPMAX" } else { b"ZPOPMIN" };
        let mut effect = vec![name.to_vec(), key.to_vec()];
        if count.is_some() {
            effect.push(n.to_string().into_bytes());
        }
        return Ok(Some(effect));
    }
    Ok(None)
}

/// Pops `n` members (lowest, or highest when `max`) writing `member score` each (inside a
/// 2-element array when `nested`), deleting the key when emptied.
#[allow(clippy::too_many_arguments)]
fn pop_n(
    state: &mut State,
    db: usize,
    key: &[u8],
    max: bool,
    n: usize,
    nested: bool,
    out: &mut Out,
    now: u64,
) -> Result<(), WrongType> {
    let mut any = false;
    if let Some(mut z) = write::<ZSet>(&mut state.kv, db, key, now)? {
        let mut popped = Vec::with_capacity(n);
        z.for_each_rank(0, n, max, |m, s| {
            popped.push((m.to_vec(), s));
            true
        });
        for (m, s) in &popped {
            z.remove(m);
            if nested {
                out.array(2);
            }
            out.bulk(m);
            reply_double(out, *s);
        }
        any = !popped.is_empty();
    }
    let gone = drop_if_empty::<ZSet>(&mut state.kv, db, key, now);
    if any {
        // Valkey `genericZpopCommand`: one event for the pops, then `del`.
        let event = if max { "zpopmax" } else { "zpopmin" };
        notify::keyspace_event(state, db, notify::ZSET, event, key);
        if gone {
            notify::keyspace_event(state, db, notify::GENERIC, "del", key);
        }
    }
    Ok(())
}

fn zpop(ctx: &mut Ctx<'_, '_>, max: bool) {
    if ctx.args.len() > 3 {
        return ctx.out.error(SYNTAX);
    }
    let count = if ctx.args.len() == 3 {
        match super::list::positive(ctx.arg(2), None) {
            Ok(c) => Some(c as usize),
            Err(e) => return ctx.out.error(&e),
        }
    } else {
        None
    };
    let key = ctx.arg(1);
    let len = match read::<ZSet>(&ctx.state.kv, ctx.db, key, ctx.now) {
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
        Ok(None) => return ctx.out.array(0),
        Ok(Some(z)) => z.len(),
    };
    if count == Some(0) {
        return ctx.out.array(0);
    }
    let n = count.unwrap_or(1).min(len);
    let nested = ctx.out.resp3() && count.is_some();
    ctx.out.array(if nested { n } else { 2 * n });
    if pop_n(ctx.state, ctx.db, key, max, n, nested, ctx.out, ctx.now).is_ok() {
        ctx.modified(key);
    }
}

fn bzpop(ctx: &mut Ctx<'_, '_>, max: bool) {
    let last = ctx.args.len() - 1;
    let deadline = match super::list::timeout_arg(ctx.arg(last), ctx.now) {
        Ok(d) => d,
        Err(e) => return ctx.out.error(e),
    };
    let keys: Vec<&[u8]> = (1..last).map(|i| ctx.args.get(i)).collect();
    serve_or_block(ctx, keys, max, None, deadline, false);
}

fn zmpop(ctx: &mut Ctx<'_, '_>, block: bool) {
    let first = if block { 2 } else { 1 };
    let deadline = if block {
        match super::list::timeout_arg(ctx.arg(1), ctx.now) {
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
    let w = ctx.arg(where_idx);
    let max = if w.eq_ignore_ascii_case(b"min") {
        false
    } else if w.eq_ignore_ascii_case(b"max") {
        true
    } else {
        return ctx.out.error(SYNTAX);
    };
    let count = match super::mpop_count(ctx.args, where_idx + 1) {
        Ok(c) => Some(c),
        Err(e) => return ctx.out.error(e),
    };
    let keys: Vec<&[u8]> = (first + 1..=first + numkeys)
        .map(|i| ctx.args.get(i))
        .collect();
    serve_or_block(ctx, keys, max, count, deadline, block);
}

fn serve_or_block(
    ctx: &mut Ctx<'_, '_>,
    keys: Vec<&[u8]>,
    max: bool,
    count: Option<usize>,
    deadline: Option<u64>,
    block: bool,
) {
    match pop_first(ctx.state, ctx.db, &keys, max, count, ctx.out, ctx.now) {
        Err(WrongType) => ctx.out.error(WRONGTYPE),
        Ok(Some(effect)) => {
            let key = effect[1].clone();
            ctx.modified(&key);
            let parts: Vec<&[u8]> = effect.iter().map(Vec::as_slice).collect();
            ctx.effect(&parts);
        }
        Ok(None) => {
            let is_block = block || count.is_none();
            if is_block && blocking::may_block(ctx) {
                blocking::block(ctx, &keys, BlockOp::ZPop { max, count }, deadline);
            } else {
                ctx.out.null_array();
            }
        }
    }
}

fn zrandmember(ctx: &mut Ctx<'_, '_>) {
    let key = ctx.arg(1);
    if ctx.args.len() >= 3 {
        let Some(l) = parse_i64(ctx.arg(2)).filter(|&l| l != i64::MIN) else {
            return ctx.out.error(if parse_i64(ctx.arg(2)).is_some() {
                "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
            } else {
                NOT_INT
            });
        };
        if ctx.args.len() > 4
            || (ctx.args.len() == 4 && !ctx.arg(3).eq_ignore_ascii_case(b"withscores"))
        {
            return ctx.out.error(SYNTAX);
        }
        let withscores = ctx.args.len() == 4;
        if withscores && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&l) {
            return ctx.out.error("ERR value is out of range");
        }
        return zrandmember_count(ctx, l, withscores);
    }
    let pick = match read::<ZSet>(&ctx.state.kv, ctx.db, key, ctx.now) {
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
        Ok(None) => return ctx.out.null(),
        Ok(Some(z)) => z.len(),
    };
    let r = super::rand_below(&mut ctx.state.rng, pick);
    if let Ok(Some(z)) = read::<ZSet>(&ctx.state.kv, ctx.db, key, ctx.now) {
        if let Some((m, _)) = z.at_rank(r) {
            ctx.out.bulk(&m);
        }
    }
}

fn zrandmember_count(ctx: &mut Ctx<'_, '_>, l: i64, withscores: bool) {
    let key = ctx.arg(1);
    let size = match read::<ZSet>(&ctx.state.kv, ctx.db, key, ctx.now) {
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
        Ok(None) => return ctx.out.array(0),
        Ok(Some(z)) => z.len(),
    };
    let (count, uniq) = if l >= 0 {
        (l as usize, true)
    } else {
        (l.unsigned_abs() as usize, false)
    };
    if count == 0 {
        return ctx.out.array(0);
    }
    // Ranks to reply, in reply order.
    let ranks: Vec<usize> = if !uniq || count == 1 {
        (0..count)
            .map(|_| super::rand_below(&mut ctx.state.rng, size))
            .collect()
    } else if count >= size {
        (0..size).collect()
    } else {
        // Distinct ranks: a partial Fisher-Yates over 0..size when count is close to size,
        // else draws with rejection.
        if count * 3 > size {
            let mut all: Vec<usize> = (0..size).collect();
            for i in 0..count {
                let j = i + super::rand_below(&mut ctx.state.rng, size - i);
                all.swap(i, j);
            }
            all.truncate(count);
            all
        } else {
            let mut seen = std::collections::HashSet::with_capacity(count);
            let mut v = Vec::with_capacity(count);
            while v.len() < count {
                let r = super::rand_below(&mut ctx.state.rng, size);
                if seen.insert(r) {
                    v.push(r);
                }
            }
            v
        }
    };
    let resp3 = ctx.out.resp3();
    let Ok(Some(z)) = read::<ZSet>(&ctx.state.kv, ctx.db, key, ctx.now) else {
        return;
    };
    let out = &mut *ctx.out;
    out.array(if withscores && !resp3 {
        2 * ranks.len()
    } else {
        ranks.len()
    });
    for r in ranks {
        if let Some((m, s)) = z.at_rank(r) {
            if withscores && resp3 {
                out.array(2);
            }
            out.bulk(&m);
            if withscores {
                reply_double(out, s);
            }
        }
    }
}

fn zscan(ctx: &mut Ctx<'_, '_>) {
    let cursor = match super::parse_cursor(ctx.arg(2)) {
        Ok(c) => c,
        Err(e) => return ctx.out.error(e),
    };
    // The key before the options, as Valkey's `zscanCommand` (a missing key is an empty page
    // whatever the options).
    let z = match read::<ZSet>(&ctx.state.kv, ctx.db, ctx.arg(1), ctx.now) {
        Err(WrongType) => return ctx.out.error(WRONGTYPE),
        Ok(None) => return super::scan_reply(ctx.out, 0, &[]),
        Ok(Some(z)) => z,
    };
    let opts = match super::parse_scan_args(ctx.args, 3, super::ScanOf::Zset) {
        Ok(o) => o,
        Err(e) => return ctx.out.error(e),
    };
    // Member, score, ...: ZSCAN scores are strings in both protocols (`scanGenericCommand`:
    // d2string-free `%.17g` bulk).
    let mut items: Vec<Vec<u8>> = Vec::new();
    let next = z.scan(cursor, opts.count, |m: Elem<'_>, s| {
        let m = m.to_vec();
        if super::matches(opts.pattern, &m) {
            items.push(m);
            if !opts.only_keys {
                items.push(fmt_g17(s).into_bytes());
            }
        }
    });
    super::scan_reply(ctx.out, next, &items);
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

fn aggregate(a: Aggregate, target: &mut f64, v: f64) {
    match a {
        Aggregate::Sum => {
            *target += v;
            if target.is_nan() {
                *target = 0.0;
            }
        }
        Aggregate::Min => {
            if v < *target {
                *target = v;
            }
        }
        Aggregate::Max => {
            if v > *target {
                *target = v;
            }
        }
    }
}

/// One input of a set operation: a sorted set's members and scores, or a set's members with
/// score 1.
/// Members and scores, owned.
type Scored = Vec<(Vec<u8>, f64)>;

fn input_members(
    state: &State,
    db: usize,
    key: &[u8],
    now: u64,
) -> Result<Option<Scored>, WrongType> {
    match state.kv.get(db, key, now).ok().flatten() {
        None => Ok(None),
        Some(Value::SortedSet(z)) => {
            Ok(Some(z.iter(false).map(|(m, s)| (m.to_vec(), s)).collect()))
        }
        Some(Value::Set(s)) => Ok(Some(s.iter().map(|m| (m.to_vec(), 1.0)).collect())),
        Some(_) => Err(WrongType),
    }
}

/// `ZUNION`/`ZINTER`/`ZDIFF` and their `STORE` forms (`zunionInterDiffGenericCommand`).
fn setop(ctx: &mut Ctx<'_, '_>, op: Op, store: bool) {
    let numkeys_idx = if store { 2 } else { 1 };
    let Some(setnum) = parse_i64(ctx.arg(numkeys_idx)) else {
        return ctx.out.error(NOT_INT);
    };
    if setnum < 1 {
        return ctx.out.error(&format!(
            "ERR at least 1 input key is needed for '{}' command",
            ctx.spec.name.to_ascii_lowercase()
        ));
    }
    if setnum as usize > ctx.args.len() - (numkeys_idx + 1) {
        return ctx.out.error(SYNTAX);
    }
    let setnum = setnum as usize;
    let mut inputs = Vec::with_capacity(setnum);
    for i in 0..setnum {
        match input_members(ctx.state, ctx.db, ctx.arg(numkeys_idx + 1 + i), ctx.now) {
            Ok(m) => inputs.push((m.unwrap_or_default(), 1.0f64)),
            Err(WrongType) => return ctx.out.error(WRONGTYPE),
        }
    }
    let mut agg = Aggregate::Sum;
    let mut withscores = false;
    let mut j = numkeys_idx + 1 + setnum;
    while j < ctx.args.len() {
        let remaining = ctx.args.len() - j;
        let a = ctx.arg(j);
        if op != Op::Diff && remaining > setnum && a.eq_ignore_ascii_case(b"weights") {
            j += 1;
            for input in inputs.iter_mut() {
                match score_arg(ctx.arg(j)) {
                    Some(w) => input.1 = w,
                    None => return ctx.out.error("ERR weight value is not a float"),
                }
                j += 1;
            }
        } else if op != Op::Diff && remaining >= 2 && a.eq_ignore_ascii_case(b"aggregate") {
            let v = ctx.arg(j + 1);
            agg = if v.eq_ignore_ascii_case(b"sum") {
                Aggregate::Sum
            } else if v.eq_ignore_ascii_case(b"min") {
                Aggregate::Min
            } else if v.eq_ignore_ascii_case(b"max") {
                Aggregate::Max
            } else {
                return ctx.out.error(SYNTAX);
            };
            j += 2;
        } else if !store && a.eq_ignore_ascii_case(b"withscores") {
            withscores = true;
            j += 1;
        } else {
            return ctx.out.error(SYNTAX);
        }
    }
    let result = compute(op, inputs, agg);
    if store {
        let dst = ctx.arg(1);
        let event = match op {
            Op::Union => "zunionstore",
            Op::Inter => "zinterstore",
            Op::Diff => "zdiffstore",
        };
        return store_result(ctx, dst, result, event);
    }
    let z = ZSet::from_entries(result, limits(ctx.state));
    let resp3 = ctx.out.resp3();
    let n = z.len();
    let out = &mut *ctx.out;
    out.array(if withscores && !resp3 { 2 * n } else { n });
    for (m, s) in z.iter(false) {
        if withscores && resp3 {
            out.array(2);
        }
        m.with_bytes(|b| out.bulk(b));
        if withscores {
            reply_double(out, s);
        }
    }
}

fn weighted(s: f64, w: f64) -> f64 {
    let v = s * w;
    if v.is_nan() {
        0.0
    } else {
        v
    }
}

fn compute(op: Op, mut inputs: Vec<(Scored, f64)>, agg: Aggregate) -> Vec<(Vec<u8>, f64)> {
    match op {
        Op::Union => {
            let mut acc: HashMap<Vec<u8>, f64> = HashMap::new();
            for (members, w) in inputs {
                for (m, s) in members {
                    let v = weighted(s, w);
                    match acc.get_mut(&m) {
                        Some(t) => aggregate(agg, t, v),
                        None => {
                            acc.insert(m, v);
                        }
                    }
                }
            }
            acc.into_iter().collect()
        }
        Op::Inter => {
            // Smallest input first (`zuiCompareByCardinality`).
            inputs.sort_by_key(|(m, _)| m.len());
            let Some(((first, w0), rest)) = inputs.split_first() else {
                return Vec::new();
            };
            let maps: Vec<(HashMap<&[u8], f64>, f64)> = rest
                .iter()
                .map(|(m, w)| (m.iter().map(|(k, s)| (k.as_slice(), *s)).collect(), *w))
                .collect();
            let mut out = Vec::new();
            'member: for (m, s) in first {
                let mut t = weighted(*s, *w0);
                for (map, w) in &maps {
                    match map.get(m.as_slice()) {
                        Some(&s) => aggregate(agg, &mut t, weighted(s, *w)),
                        None => continue 'member,
                    }
                }
                out.push((m.clone(), t));
            }
            out
        }
        Op::Diff => {
            let Some(((first, _), rest)) = inputs.split_first() else {
                return Vec::new();
            };
            let others: Vec<std::collections::HashSet<&[u8]>> = rest
                .iter()
                .map(|(m, _)| m.iter().map(|(k, _)| k.as_slice()).collect())
                .collect();
            first
                .iter()
                .filter(|(m, _)| !others.iter().any(|o| o.contains(m.as_slice())))
                .cloned()
                .collect()
        }
    }
}

fn zintercard(ctx: &mut Ctx<'_, '_>) {
    let Some(setnum) = parse_i64(ctx.arg(1)) else {
        return ctx.out.error(NOT_INT);
    };
    if setnum < 1 {
        return ctx
            .out
            .error("ERR at least 1 input key is needed for 'zintercard' command");
    }
    if setnum as usize > ctx.args.len() - 2 {
        return ctx.out.error(SYNTAX);
    }
    let setnum = setnum as usize;
    let mut inputs = Vec::with_capacity(setnum);
    for i in 0..setnum {
        match input_members(ctx.state, ctx.db, ctx.arg(2 + i), ctx.now) {
            Ok(m) => inputs.push((m.unwrap_or_default(), 1.0f64)),
            Err(WrongType) => return ctx.out.error(WRONGTYPE),
        }
    }
    let mut limit = 0usize;
    let mut j = 2 + setnum;
    while j < ctx.args.len() {
        if ctx.args.len() - j >= 2 && ctx.arg(j).eq_ignore_ascii_case(b"limit") {
            match parse_i64(ctx.arg(j + 1)) {
                Some(l) if l >= 0 => limit = l as usize,
                _ => return ctx.out.error("ERR LIMIT can't be negative"),
            }
            j += 2;
        } else {
            return ctx.out.error(SYNTAX);
        }
    }
    let n = compute(Op::Inter, inputs, Aggregate::Sum).len();
    ctx.out.int(if limit > 0 { n.min(limit) } else { n } as i64);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_print_like_printf_g17() {
        // Texts from glibc printf("%.17g").
        assert_eq!(fmt_g17(0.1), "0.10000000000000001");
        assert_eq!(fmt_g17(1.5), "1.5");
        assert_eq!(fmt_g17(3.0), "3");
        assert_eq!(fmt_g17(-2.25), "-2.25");
        assert_eq!(fmt_g17(1e17), "1e+17");
        assert_eq!(fmt_g17(1e16), "10000000000000000");
        assert_eq!(fmt_g17(0.0001), "0.0001");
        assert_eq!(fmt_g17(0.00001), "1.0000000000000001e-05");
        assert_eq!(fmt_g17(123456789.125), "123456789.125");
        assert_eq!(fmt_g17(f64::INFINITY), "inf");
        assert_eq!(fmt_g17(-0.0), "-0");
        assert_eq!(fmt_g17(1.7976931348623157e308), "1.7976931348623157e+308");
    }

    #[test]
    fn ranges_parse_like_strtod() {
        assert_eq!(
            score_bound(b"(1.5").map(|b| (b.value, b.exclusive)),
            Some((1.5, true))
        );
        assert_eq!(
            score_bound(b"-inf").map(|b| b.value),
            Some(f64::NEG_INFINITY)
        );
        assert_eq!(score_bound(b" 2").map(|b| b.value), Some(2.0));
        assert_eq!(score_bound(b"").map(|b| b.value), Some(0.0));
        assert!(score_bound(b"2 ").is_none());
        assert!(score_bound(b"nan").is_none());
        assert!(score_bound(b"abc").is_none());
        assert_eq!(parse_double(b"1.5"), Some(1.5));
        assert_eq!(parse_double(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_double(b"+Infinity"), Some(f64::INFINITY));
        assert_eq!(parse_double(b"1e400"), None);
        assert_eq!(parse_double(b"1e-400"), None);
        assert_eq!(parse_double(b"0e5"), Some(0.0));
        assert_eq!(parse_double(b" 1"), None);
        assert_eq!(parse_double(b"nan"), None);
        assert_eq!(lex_bound(b"-"), Some(LexBound::Min));
        assert_eq!(lex_bound(b"[a"), Some(LexBound::At(b"a".to_vec(), false)));
        assert!(lex_bound(b"a").is_none());
        assert!(lex_bound(b"+x").is_none());
    }
}

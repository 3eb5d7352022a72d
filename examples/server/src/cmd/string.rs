//! The string commands (Redis 7.0 `t_string.c`): replies, error texts and propagation.

use super::{int_arg, parse_i64, reply_len, Ctx, WrongType, NOT_INT, SYNTAX, WRONGTYPE};
use crate::notify;
use crate::server::Value;
use crate::table::Cmd;
use ferrocluster_kvstore::{KeyExpiry, KvStore};

/// The string at `key`: `Ok(None)` when missing, `Err` for another type.
///
/// # Errors
/// [`WrongType`].
pub fn get_string<'s>(
    kv: &'s KvStore<Value>,
    db: usize,
    key: &[u8],
    now: u64,
) -> Result<Option<&'s [u8]>, WrongType> {
    match kv.get(db, key, now).ok().flatten() {
        None => Ok(None),
        Some(v) => v.as_string().map(Some).ok_or(WrongType),
    }
}

/// The deadline of `key`, if it has one.
pub fn deadline(kv: &KvStore<Value>, db: usize, key: &[u8], now: u64) -> Option<u64> {
    match kv.expiry(db, key, now) {
        Ok(KeyExpiry::At(t)) => Some(t),
        _ => None,
    }
}

/// Checks a relative or absolute expire argument as Redis's `getExpireMillisecondsOrReply`:
/// an integer (else `not an integer`), positive and, in ms, within a signed 64-bit integer
/// after adding `now` for a relative one (else `invalid expire time in '<cmd>' command`).
/// Returns the absolute deadline in ms.
///
/// # Errors
/// The reply text.
pub fn parse_expire_value(
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

/// Runs a string command.
pub fn run(ctx: &mut Ctx<'_, '_>) {
    match ctx.spec.cmd {
        Cmd::Get => get(ctx),
        Cmd::Set => set(ctx),
        Cmd::Setnx => setnx(ctx),
        Cmd::Setex | Cmd::Psetex => setex(ctx),
        Cmd::Getdel => getdel(ctx),
        Cmd::Getex => getex(ctx),
        Cmd::Getset => getset(ctx),
        Cmd::Getrange | Cmd::Substr => getrange(ctx),
        Cmd::Setrange => setrange(ctx),
        Cmd::Mget => mget(ctx),
        Cmd::Mset | Cmd::Msetnx => mset(ctx),
        Cmd::Incr | Cmd::Decr | Cmd::Incrby | Cmd::Decrby => incr(ctx),
        Cmd::Incrbyfloat => incrbyfloat(ctx),
        Cmd::Append => append(ctx),
        Cmd::Strlen => strlen(ctx),
        Cmd::Lcs => lcs(ctx),
        _ => ctx.error("ERR command not handled"),
    }
}

fn get(ctx: &mut Ctx<'_, '_>) {
    let key = ctx.arg(1);
    match get_string(&ctx.state.kv, ctx.db, key, ctx.now) {
        Ok(Some(v)) => {
            ctx.out.bulk(v);
            ctx.state.keyspace_hits += 1;
        }
        Ok(None) => {
            ctx.out.null();
            ctx.state.keyspace_misses += 1;
        }
        Err(WrongType) => ctx.error(WRONGTYPE),
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Unit {
    Sec,
    Ms,
}

/// `SET key value [NX|XX] [GET] [EX s|PX ms|EXAT ts|PXAT ts|KEEPTTL]` (Redis 7.0
/// `parseExtendedStringArgumentsOrReply`, `setGenericCommand`).
fn set(ctx: &mut Ctx<'_, '_>) {
    let (mut nx, mut xx, mut get, mut keepttl) = (false, false, false, false);
    // (argument, unit, absolute)
    let mut expire: Option<(&[u8], Unit, bool)> = None;
    let mut j = 3;
    while j < ctx.argc() {
        let opt = ctx.arg(j);
        let next = ctx.args.opt(j + 1);
        let is = |s: &str| opt.eq_ignore_ascii_case(s.as_bytes());
        let timed = |abs: bool, unit: Unit| {
            expire.is_none_or(|(_, u, a)| (u, a) == (unit, abs)) && !keepttl && next.is_some()
        };
        if is("nx") && !xx {
            nx = true;
        } else if is("xx") && !nx {
            xx = true;
        } else if is("get") {
            get = true;
        } else if is("keepttl") && expire.is_none() {
            keepttl = true;
        } else if is("ex") && timed(false, Unit::Sec) {
            expire = next.map(|n| (n, Unit::Sec, false));
            j += 1;
        } else if is("px") && timed(false, Unit::Ms) {
            expire = next.map(|n| (n, Unit::Ms, false));
            j += 1;
        } else if is("exat") && timed(true, Unit::Sec) {
            expire = next.map(|n| (n, Unit::Sec, true));
            j += 1;
        } else if is("pxat") && timed(true, Unit::Ms) {
            expire = next.map(|n| (n, Unit::Ms, true));
            j += 1;
        } else {
            ctx.error(SYNTAX);
            return;
        }
        j += 1;
    }
    let at = match expire {
        None => None,
        Some((n, unit, abs)) => {
            let ms = if unit == Unit::Sec { 1000 } else { 1 };
            match parse_expire_value(n, ms, abs, ctx.now, "set") {
                Ok(t) => Some((t, unit, abs)),
                Err(e) => {
                    ctx.error(&e);
                    return;
                }
            }
        }
    };
    let key = ctx.arg(1);
    let (db, now) = (ctx.db, ctx.now);
    if get {
        match get_string(&ctx.state.kv, db, key, now) {
            Ok(Some(v)) => ctx.out.bulk(v),
            Ok(None) => ctx.out.null(),
            Err(WrongType) => return ctx.error(WRONGTYPE),
        }
    }
    if nx || xx {
        let found = matches!(ctx.state.kv.exists(db, key, now), Ok(true));
        if (nx && found) || (xx && !found) {
            if !get {
                ctx.out.null();
            }
            return;
        }
    }
    // Valkey `setGenericCommand`: a time already past stores nothing and deletes the key
    // found (announced `expired` by valkey-server 9.1.2, propagated as `DEL`); a replica
    // applies what its primary sent.
    if let Some((t, ..)) = at {
        if t <= now && !ctx.state.repl.is_replica() {
            if matches!(ctx.state.kv.remove(db, key, now), Ok(Some(_))) {
                ctx.state.expired_keys += 1;
                ctx.modified(key);
                ctx.notify(notify::EXPIRED, "expired", key);
                ctx.effect(&[b"DEL", key]);
            }
            if !get {
                ctx.out.ok();
            }
            return;
        }
    }
    let deadline_at = match at {
        Some((t, ..)) => Some(t),
        None if keepttl => deadline(&ctx.state.kv, db, key, now),
        None => None,
    };
    let _ = ctx
        .state
        .kv
        .insert_with_expiry(db, key, ctx.arg(2).into(), deadline_at, now);
    ctx.modified(key);
    ctx.notify(notify::STRING, "set", key);
    if at.is_some() {
        ctx.notify(notify::GENERIC, "expire", key);
    }
    if !get {
        ctx.out.ok();
    }
    // Redis 7.0 propagates an EX/PX/EXAT expiry as `SET key value PXAT ms`.
    if let Some((t, unit, abs)) = at {
        if !(abs && unit == Unit::Ms) {
            let t = t.to_string();
            ctx.effect(&[b"SET", key, ctx.arg(2), b"PXAT", t.as_bytes()]);
        }
    }
}

fn setnx(ctx: &mut Ctx<'_, '_>) {
    let key = ctx.arg(1);
    let exists = matches!(ctx.state.kv.exists(ctx.db, key, ctx.now), Ok(true));
    if !exists {
        let _ = ctx.state.kv.insert(ctx.db, key, ctx.arg(2).into(), ctx.now);
        ctx.modified(key);
        ctx.notify(notify::STRING, "set", key);
    }
    ctx.out.int(i64::from(!exists));
}

fn setex(ctx: &mut Ctx<'_, '_>) {
    let (unit, name) = if ctx.spec.cmd == Cmd::Setex {
        (1000, "setex")
    } else {
        (1, "psetex")
    };
    match parse_expire_value(ctx.arg(2), unit, false, ctx.now, name) {
        Ok(at) => {
            let key = ctx.arg(1);
            let _ =
                ctx.state
                    .kv
                    .insert_with_expiry(ctx.db, key, ctx.arg(3).into(), Some(at), ctx.now);
            ctx.modified(key);
            ctx.notify(notify::STRING, "set", key);
            ctx.notify(notify::GENERIC, "expire", key);
            ctx.out.ok();
            let t = at.to_string();
            ctx.effect(&[b"SET", key, ctx.arg(3), b"PXAT", t.as_bytes()]);
        }
        Err(e) => ctx.error(&e),
    }
}

fn getdel(ctx: &mut Ctx<'_, '_>) {
    let key = ctx.arg(1);
    match get_string(&ctx.state.kv, ctx.db, key, ctx.now) {
        Err(WrongType) => ctx.error(WRONGTYPE),
        Ok(None) => ctx.out.null(),
        Ok(Some(_)) => {
            if let Ok(Some(v)) = ctx.state.kv.remove(ctx.db, key, ctx.now) {
                ctx.out.bulk(v.as_string().unwrap_or_default());
            }
            ctx.modified(key);
            ctx.notify(notify::GENERIC, "del", key);
            ctx.effect(&[b"DEL", key]);
        }
    }
}

/// `GETEX key [EX s | PX ms | EXAT ts | PXAT ts | PERSIST]`.
fn getex(ctx: &mut Ctx<'_, '_>) {
    let mut expire: Option<(&[u8], u64, bool)> = None;
    let mut persist = false;
    let mut j = 2;
    while j < ctx.argc() {
        let opt = ctx.arg(j);
        let next = ctx.args.opt(j + 1);
        let is = |s: &str| opt.eq_ignore_ascii_case(s.as_bytes());
        let free = expire.is_none() && !persist;
        if is("persist") && expire.is_none() {
            persist = true;
        } else if free && next.is_some() && (is("ex") || is("px") || is("exat") || is("pxat")) {
            let unit = if is("ex") || is("exat") { 1000 } else { 1 };
            expire = next.map(|n| (n, unit, is("exat") || is("pxat")));
            j += 1;
        } else {
            ctx.error(SYNTAX);
            return;
        }
        j += 1;
    }
    let key = ctx.arg(1);
    let (db, now) = (ctx.db, ctx.now);
    let value = match get_string(&ctx.state.kv, db, key, now) {
        Err(WrongType) => return ctx.error(WRONGTYPE),
        Ok(None) => return ctx.out.null(),
        Ok(Some(v)) => v.to_vec(),
    };
    let at = match expire {
        None => None,
        Some((n, unit, abs)) => match parse_expire_value(n, unit, abs, now, "getex") {
            Ok(t) => Some((t, abs)),
            Err(e) => return ctx.error(&e),
        },
    };
    ctx.out.bulk(&value);
    if let Some((t, abs)) = at {
        if abs && t <= now {
            let _ = ctx.state.kv.remove(db, key, now);
            ctx.state.expired_keys += 1;
            ctx.modified(key);
            // As EXPIRE with a time already past: `expired` (valkey-server 9.1.2).
            ctx.notify(notify::EXPIRED, "expired", key);
            ctx.effect(&[b"DEL", key]);
        } else {
            let _ = ctx.state.kv.set_expire_at(db, key, t, now);
            ctx.modified(key);
            ctx.notify(notify::GENERIC, "expire", key);
            let t = t.to_string();
            ctx.effect(&[b"PEXPIREAT", key, t.as_bytes()]);
        }
    } else if persist && ctx.state.kv.persist(db, key, now).unwrap_or(false) {
        ctx.modified(key);
        ctx.notify(notify::GENERIC, "persist", key);
        ctx.effect(&[b"PERSIST", key]);
    }
}

fn getset(ctx: &mut Ctx<'_, '_>) {
    let key = ctx.arg(1);
    match get_string(&ctx.state.kv, ctx.db, key, ctx.now) {
        Err(WrongType) => return ctx.error(WRONGTYPE),
        Ok(Some(v)) => ctx.out.bulk(v),
        Ok(None) => ctx.out.null(),
    }
    let _ = ctx.state.kv.insert(ctx.db, key, ctx.arg(2).into(), ctx.now);
    ctx.modified(key);
    ctx.notify(notify::STRING, "set", key);
    ctx.effect(&[b"SET", key, ctx.arg(2)]);
}

fn getrange(ctx: &mut Ctx<'_, '_>) {
    let (Some(mut start), Some(mut end)) = (parse_i64(ctx.arg(2)), parse_i64(ctx.arg(3))) else {
        return ctx.error(NOT_INT);
    };
    let s = match get_string(&ctx.state.kv, ctx.db, ctx.arg(1), ctx.now) {
        Err(WrongType) => return ctx.error(WRONGTYPE),
        Ok(None) => return ctx.out.bulk(b""),
        Ok(Some(s)) => s,
    };
    let len = s.len() as i64;
    if start < 0 && end < 0 && start > end {
        return ctx.out.bulk(b"");
    }
    if start < 0 {
        start += len;
    }
    if end < 0 {
        end += len;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= len {
        end = len - 1;
    }
    if start > end || len == 0 {
        ctx.out.bulk(b"");
    } else {
        ctx.out.bulk(&s[start as usize..=end as usize]);
    }
}

fn check_len(ctx: &mut Ctx<'_, '_>, total: u64) -> bool {
    if total > ctx.shared.config.proto_max_bulk_len as u64
        && !ctx
            .client
            .cluster
            .as_ref()
            .is_some_and(|c| c.is_primary_link())
    {
        ctx.error("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
        return false;
    }
    true
}

fn setrange(ctx: &mut Ctx<'_, '_>) {
    let Some(offset) = parse_i64(ctx.arg(2)) else {
        return ctx.error(NOT_INT);
    };
    if offset < 0 {
        return ctx.error("ERR offset is out of range");
    }
    let (key, value) = (ctx.arg(1), ctx.arg(3));
    let (db, now) = (ctx.db, ctx.now);
    let old = match get_string(&ctx.state.kv, db, key, now) {
        Err(WrongType) => return ctx.error(WRONGTYPE),
        Ok(v) => v.map(<[u8]>::to_vec),
    };
    if value.is_empty() {
        return reply_len(ctx.out, old.map_or(0, |o| o.len()));
    }
    let offset = offset as u64;
    if !check_len(ctx, offset + value.len() as u64) {
        return;
    }
    let offset = offset as usize;
    let mut s = old.unwrap_or_default();
    if s.len() < offset + value.len() {
        s.resize(offset + value.len(), 0);
    }
    s[offset..offset + value.len()].copy_from_slice(value);
    let len = s.len();
    replace_string(ctx, key, Value::raw(s));
    ctx.modified(key);
    ctx.notify(notify::STRING, "setrange", key);
    reply_len(ctx.out, len);
}

/// Replaces the string at `key` keeping its deadline.
fn replace_string(ctx: &mut Ctx<'_, '_>, key: &[u8], v: Value) {
    let (db, now) = (ctx.db, ctx.now);
    if let Some(mut cur) = ctx.state.kv.get_mut(db, key, now).ok().flatten() {
        *cur = v;
        return;
    }
    let _ = ctx.state.kv.insert(db, key, v, now);
}

fn mget(ctx: &mut Ctx<'_, '_>) {
    ctx.out.array(ctx.argc() - 1);
    for i in 1..ctx.argc() {
        match ctx.state.kv.get(ctx.db, ctx.arg(i), ctx.now).ok().flatten() {
            Some(v) => match v.as_string() {
                Some(s) => {
                    ctx.out.bulk(s);
                    ctx.state.keyspace_hits += 1;
                }
                None => {
                    ctx.out.null();
                    ctx.state.keyspace_hits += 1;
                }
            },
            None => {
                ctx.out.null();
                ctx.state.keyspace_misses += 1;
            }
        }
    }
}

fn mset(ctx: &mut Ctx<'_, '_>) {
    if ctx.argc().is_multiple_of(2) {
        let name = ctx.spec.name;
        return ctx.error(&format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
    }
    let nx = ctx.spec.cmd == Cmd::Msetnx;
    if nx {
        let any = (1..ctx.argc())
            .step_by(2)
            .any(|i| matches!(ctx.state.kv.exists(ctx.db, ctx.arg(i), ctx.now), Ok(true)));
        if any {
            return ctx.out.int(0);
        }
    }
    for i in (1..ctx.argc()).step_by(2) {
        let key = ctx.arg(i);
        let _ = ctx
            .state
            .kv
            .insert(ctx.db, key, ctx.arg(i + 1).into(), ctx.now);
        ctx.modified(key);
        ctx.notify(notify::STRING, "set", key);
    }
    if nx {
        ctx.out.int(1);
    } else {
        ctx.out.ok();
    }
}

fn incr(ctx: &mut Ctx<'_, '_>) {
    let by = match ctx.spec.cmd {
        Cmd::Incr => 1,
        Cmd::Decr => -1,
        cmd => match parse_i64(ctx.arg(2)) {
            Some(n) if cmd == Cmd::Incrby => n,
            Some(n) if n != i64::MIN => -n,
            Some(_) => return ctx.error("ERR decrement would overflow"),
            None => return ctx.error(NOT_INT),
        },
    };
    let key = ctx.arg(1);
    let (db, now) = (ctx.db, ctx.now);
    let cur = match get_string(&ctx.state.kv, db, key, now) {
        Err(WrongType) => return ctx.error(WRONGTYPE),
        Ok(None) => 0,
        Ok(Some(s)) => match parse_i64(s) {
            Some(n) => n,
            None => return ctx.error(NOT_INT),
        },
    };
    let Some(new) = cur.checked_add(by) else {
        return ctx.error("ERR increment or decrement would overflow");
    };
    replace_string(ctx, key, Value::new(new.to_string().as_bytes()));
    ctx.modified(key);
    ctx.notify(notify::STRING, "incrby", key);
    ctx.out.int(new);
}

fn incrbyfloat(ctx: &mut Ctx<'_, '_>) {
    let key = ctx.arg(1);
    let (db, now) = (ctx.db, ctx.now);
    let cur = match get_string(&ctx.state.kv, db, key, now) {
        Err(WrongType) => return ctx.error(WRONGTYPE),
        Ok(None) => b"0".to_vec(),
        Ok(Some(s)) => s.to_vec(),
    };
    match super::ldouble::incr(&cur, ctx.arg(2)) {
        Err(e) => ctx.error(e),
        Ok(text) => {
            replace_string(ctx, key, Value::new(text.as_bytes()));
            ctx.modified(key);
            ctx.notify(notify::STRING, "incrbyfloat", key);
            ctx.out.bulk(text.as_bytes());
            // Redis 7.0: `SET key value KEEPTTL` (float formatting can differ between
            // platforms, so the result travels, not the increment).
            ctx.effect(&[b"SET", key, text.as_bytes(), b"KEEPTTL"]);
        }
    }
}

fn append(ctx: &mut Ctx<'_, '_>) {
    let (key, add) = (ctx.arg(1), ctx.arg(2));
    let (db, now) = (ctx.db, ctx.now);
    let old = match get_string(&ctx.state.kv, db, key, now) {
        Err(WrongType) => return ctx.error(WRONGTYPE),
        Ok(v) => v.map(<[u8]>::len),
    };
    let len = match old {
        None => {
            let _ = ctx.state.kv.insert(db, key, add.into(), now);
            add.len()
        }
        Some(n) => {
            if !check_len(ctx, (n + add.len()) as u64) {
                return;
            }
            let Some(mut v) = ctx.state.kv.get_mut(db, key, now).ok().flatten() else {
                return;
            };
            match &mut *v {
                Value::Raw(s) => s.extend_from_slice(add),
                other => {
                    let mut s = Vec::with_capacity(n + add.len());
                    s.extend_from_slice(other.as_string().unwrap_or_default());
                    s.extend_from_slice(add);
                    *other = Value::raw(s);
                }
            }
            n + add.len()
        }
    };
    ctx.modified(key);
    ctx.notify(notify::STRING, "append", key);
    reply_len(ctx.out, len);
}

fn strlen(ctx: &mut Ctx<'_, '_>) {
    match get_string(&ctx.state.kv, ctx.db, ctx.arg(1), ctx.now) {
        Err(WrongType) => ctx.error(WRONGTYPE),
        Ok(v) => reply_len(ctx.out, v.map_or(0, <[u8]>::len)),
    }
}

/// One LCS match: (start, end) in the first string, (start, end) in the second, length.
type LcsRange = ((usize, usize), (usize, usize), usize);

/// `LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]` (Redis 7.0 `lcsCommand`).
fn lcs(ctx: &mut Ctx<'_, '_>) {
    let (db, now) = (ctx.db, ctx.now);
    let a = get_string(&ctx.state.kv, db, ctx.arg(1), now);
    let b = get_string(&ctx.state.kv, db, ctx.arg(2), now);
    let (Ok(a), Ok(b)) = (a, b) else {
        return ctx.error("ERR The specified keys must contain string values");
    };
    let (a, b) = (
        a.unwrap_or_default().to_vec(),
        b.unwrap_or_default().to_vec(),
    );
    let (mut getlen, mut getidx, mut withmatchlen, mut minmatchlen) = (false, false, false, 0i64);
    let mut j = 3;
    while j < ctx.argc() {
        let opt = ctx.arg(j);
        let more = ctx.argc() - 1 - j;
        if opt.eq_ignore_ascii_case(b"idx") {
            getidx = true;
        } else if opt.eq_ignore_ascii_case(b"len") {
            getlen = true;
        } else if opt.eq_ignore_ascii_case(b"withmatchlen") {
            withmatchlen = true;
        } else if opt.eq_ignore_ascii_case(b"minmatchlen") && more > 0 {
            match int_arg(ctx.arg(j + 1)) {
                Ok(n) => minmatchlen = n.max(0),
                Err(e) => return ctx.error(e),
            }
            j += 1;
        } else {
            return ctx.error(SYNTAX);
        }
        j += 1;
    }
    if getidx && getlen {
        return ctx.error("ERR If you want both the length and indexes, please just use IDX.");
    }
    if a.len() >= u32::MAX as usize - 1 || b.len() >= u32::MAX as usize - 1 {
        return ctx.error("ERR String too long for LCS");
    }
    let (alen, blen) = (a.len(), b.len());
    let cells = (alen as u64 + 1) * (blen as u64 + 1);
    if cells.saturating_mul(4) > ctx.shared.config.proto_max_bulk_len as u64 {
        return ctx
            .error("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len");
    }
    let w = blen + 1;
    let mut dp = vec![0u32; (alen + 1) * w];
    for i in 1..=alen {
        for j in 1..=blen {
            dp[i * w + j] = if a[i - 1] == b[j - 1] {
                dp[(i - 1) * w + j - 1] + 1
            } else {
                dp[(i - 1) * w + j].max(dp[i * w + j - 1])
            };
        }
    }
    let total = dp[alen * w + blen] as usize;
    let mut idx = total;
    let mut result = vec![0u8; total];
    let computelcs = getidx || !getlen;
    // Ranges: ((a start, a end), (b start, b end), len), in the order Redis emits them.
    let mut ranges: Vec<LcsRange> = Vec::new();
    let (mut astart, mut aend, mut bstart, mut bend) = (alen, 0, 0, 0);
    let (mut i, mut jj) = (alen, blen);
    while computelcs && i > 0 && jj > 0 {
        let mut emit = false;
        if a[i - 1] == b[jj - 1] {
            result[idx - 1] = a[i - 1];
            if astart == alen {
                (astart, aend, bstart, bend) = (i - 1, i - 1, jj - 1, jj - 1);
            } else if astart == i && bstart == jj {
                astart -= 1;
                bstart -= 1;
            } else {
                emit = true;
            }
            if astart == 0 || bstart == 0 {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            jj -= 1;
        } else {
            if dp[(i - 1) * w + jj] > dp[i * w + jj - 1] {
                i -= 1;
            } else {
                jj -= 1;
            }
            if astart != alen {
                emit = true;
            }
        }
        let match_len = aend.wrapping_sub(astart).wrapping_add(1);
        if emit {
            if minmatchlen == 0 || match_len as i64 >= minmatchlen {
                ranges.push(((astart, aend), (bstart, bend), match_len));
            }
            astart = alen;
        }
    }
    if getidx {
        ctx.out.map(2);
        ctx.out.bulk(b"matches");
        ctx.out.array(ranges.len());
        for ((a0, a1), (b0, b1), l) in ranges {
            ctx.out.array(2 + usize::from(withmatchlen));
            ctx.out.array(2);
            reply_len(ctx.out, a0);
            reply_len(ctx.out, a1);
            ctx.out.array(2);
            reply_len(ctx.out, b0);
            reply_len(ctx.out, b1);
            if withmatchlen {
                reply_len(ctx.out, l);
            }
        }
        ctx.out.bulk(b"len");
        reply_len(ctx.out, total);
    } else if getlen {
        reply_len(ctx.out, idx);
    } else {
        ctx.out.bulk(&result);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}

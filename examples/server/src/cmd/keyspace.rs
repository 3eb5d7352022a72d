//! The generic (keyspace) commands of Redis 7.0's `db.c`, `expire.c`, `object.c`, `sort.c`:
//! DEL, EXISTS, TYPE, KEYS, SCAN, RANDOMKEY, RENAME(NX), COPY, MOVE, TOUCH, the expiry
//! commands, OBJECT, MEMORY USAGE, SORT / SORT_RO, DBSIZE, FLUSHDB / FLUSHALL, SWAPDB.

use super::{int_arg, parse_i64, reply_len, Ctx, NOT_INT, SYNTAX, WRONGTYPE};
use crate::notify;
use crate::server::Value;
use crate::table::Cmd;
use ferrocluster_kvstore::{KeyExpiry, KvValue, ScanOptions};

/// `ERR no such key`
pub const NO_SUCH_KEY: &str = "ERR no such key";
/// `ERR source and destination objects are the same`
pub const SAME_OBJECT: &str = "ERR source and destination objects are the same";

/// Runs a keyspace command.
pub fn run(ctx: &mut Ctx<'_, '_>) {
    match ctx.spec.cmd {
        Cmd::Del | Cmd::Unlink => del(ctx),
        Cmd::Exists => exists(ctx),
        Cmd::Touch => touch(ctx),
        Cmd::Type => type_cmd(ctx),
        Cmd::Keys => keys(ctx),
        Cmd::Scan => scan(ctx),
        Cmd::Randomkey => randomkey(ctx),
        Cmd::Rename | Cmd::Renamenx => rename(ctx),
        Cmd::Copy => copy(ctx),
        Cmd::Move => move_cmd(ctx),
        Cmd::Expire | Cmd::Pexpire | Cmd::Expireat | Cmd::Pexpireat => expire(ctx),
        Cmd::Ttl | Cmd::Pttl | Cmd::Expiretime | Cmd::Pexpiretime => ttl(ctx),
        Cmd::Persist => persist(ctx),
        Cmd::Object => object(ctx),
        Cmd::Memory => memory(ctx),
        Cmd::Sort | Cmd::SortRo => sort(ctx),
        Cmd::Dbsize => reply_len(ctx.out, ctx.state.kv.dbsize(ctx.db).unwrap_or(0) as usize),
        Cmd::Flushdb | Cmd::Flushall => flush(ctx),
        Cmd::Swapdb => swapdb(ctx),
        _ => ctx.error("ERR command not handled"),
    }
}

fn del(ctx: &mut Ctx<'_, '_>) {
    let mut n = 0;
    for i in 1..ctx.argc() {
        let key = ctx.arg(i);
        if let Ok(Some(_)) = ctx.state.kv.remove(ctx.db, key, ctx.now) {
            ctx.modified(key);
            ctx.notify(notify::GENERIC, "del", key);
            n += 1;
        }
    }
    ctx.out.int(n);
}

fn exists(ctx: &mut Ctx<'_, '_>) {
    let mut n = 0;
    for i in 1..ctx.argc() {
        let found = matches!(ctx.state.kv.exists(ctx.db, ctx.arg(i), ctx.now), Ok(true));
        ctx.note_lookup(found);
        n += i64::from(found);
    }
    ctx.out.int(n);
}

fn touch(ctx: &mut Ctx<'_, '_>) {
    let mut n = 0;
    for i in 1..ctx.argc() {
        n += i64::from(matches!(
            ctx.state.kv.exists(ctx.db, ctx.arg(i), ctx.now),
            Ok(true)
        ));
    }
    ctx.out.int(n);
}

fn type_cmd(ctx: &mut Ctx<'_, '_>) {
    let t = ctx
        .state
        .kv
        .get(ctx.db, ctx.arg(1), ctx.now)
        .ok()
        .flatten()
        .map(|v| v.type_name());
    ctx.note_lookup(t.is_some());
    ctx.out.simple(t.unwrap_or("none"));
}

fn keys(ctx: &mut Ctx<'_, '_>) {
    match ctx.state.kv.keys(ctx.db, ctx.arg(1), ctx.now) {
        Ok(keys) => {
            ctx.out.array(keys.len());
            for k in keys {
                ctx.out.bulk(&k);
            }
        }
        Err(e) => ctx.error(&format!("ERR {e}")),
    }
}

fn scan(ctx: &mut Ctx<'_, '_>) {
    let cursor = match super::parse_cursor(ctx.arg(1)) {
        Ok(c) => c,
        Err(e) => return ctx.error(e),
    };
    let a = match super::parse_scan_args(ctx.args, 2, super::ScanOf::Keys) {
        Ok(a) => a,
        Err(e) => return ctx.error(e),
    };
    let type_name = a.type_name.map(|t| String::from_utf8_lossy(t).into_owned());
    let opts = ScanOptions {
        pattern: a.pattern,
        count: a.count,
        type_name: type_name.as_deref(),
    };
    match ctx.state.kv.scan(ctx.db, cursor, &opts, ctx.now) {
        Ok(page) => {
            ctx.out.array(2);
            ctx.out.bulk(page.cursor.to_string().as_bytes());
            ctx.out.array(page.keys.len());
            for k in page.keys {
                ctx.out.bulk(&k);
            }
        }
        Err(e) => ctx.error(&format!("ERR {e}")),
    }
}

fn randomkey(ctx: &mut Ctx<'_, '_>) {
    let crate::server::State { kv, rng, .. } = &mut *ctx.state;
    match kv.random_key(ctx.db, ctx.now, rng).ok().flatten() {
        Some(k) => ctx.out.bulk(&k),
        None => ctx.out.null(),
    }
}

fn rename(ctx: &mut Ctx<'_, '_>) {
    let nx = ctx.spec.cmd == Cmd::Renamenx;
    let (src, dst) = (ctx.arg(1), ctx.arg(2));
    let (db, now) = (ctx.db, ctx.now);
    if !matches!(ctx.state.kv.exists(db, src, now), Ok(true)) {
        return ctx.error(NO_SUCH_KEY);
    }
    if src == dst {
        return if nx { ctx.out.int(0) } else { ctx.out.ok() };
    }
    if nx && matches!(ctx.state.kv.exists(db, dst, now), Ok(true)) {
        return ctx.out.int(0);
    }
    let at = super::string::deadline(&ctx.state.kv, db, src, now);
    let Ok(Some(v)) = ctx.state.kv.remove(db, src, now) else {
        return ctx.error(NO_SUCH_KEY);
    };
    let _ = ctx.state.kv.insert_with_expiry(db, dst, v, at, now);
    ctx.modified(src);
    ctx.modified(dst);
    ctx.notify(notify::GENERIC, "rename_from", src);
    ctx.notify(notify::GENERIC, "rename_to", dst);
    // A list or sorted set arriving under a key clients wait on serves them (Valkey `dbAdd`'s
    // `signalKeyAsReady`).
    crate::blocking::signal(ctx.state, db, dst);
    if nx {
        ctx.out.int(1);
    } else {
        ctx.out.ok();
    }
}

fn copy(ctx: &mut Ctx<'_, '_>) {
    let (src, dst) = (ctx.arg(1), ctx.arg(2));
    let mut replace = false;
    let mut dst_db = ctx.db;
    let mut j = 3;
    while j < ctx.argc() {
        let a = ctx.arg(j);
        let more = ctx.argc() - j - 1;
        if a.eq_ignore_ascii_case(b"replace") {
            replace = true;
        } else if a.eq_ignore_ascii_case(b"db") && more >= 1 {
            let Some(id) = parse_i64(ctx.arg(j + 1)).and_then(|n| i32::try_from(n).ok()) else {
                return ctx.error(NOT_INT);
            };
            match usize::try_from(id) {
                Ok(d) if d < ctx.state.kv.databases() => dst_db = d,
                _ => return ctx.error("ERR DB index is out of range"),
            }
            j += 1;
        } else {
            return ctx.error(SYNTAX);
        }
        j += 1;
    }
    if dst_db == ctx.db && src == dst {
        return ctx.error(SAME_OBJECT);
    }
    let (db, now) = (ctx.db, ctx.now);
    let Some(v) = ctx.state.kv.get(db, src, now).ok().flatten().cloned() else {
        return ctx.out.int(0);
    };
    let at = super::string::deadline(&ctx.state.kv, db, src, now);
    if matches!(ctx.state.kv.exists(dst_db, dst, now), Ok(true)) && !replace {
        return ctx.out.int(0);
    }
    let _ = ctx.state.kv.insert_with_expiry(dst_db, dst, v, at, now);
    ctx.modified_in(dst_db, dst);
    ctx.notify_in(dst_db, notify::GENERIC, "copy_to", dst);
    crate::blocking::signal(ctx.state, dst_db, dst);
    ctx.out.int(1);
}

fn move_cmd(ctx: &mut Ctx<'_, '_>) {
    // Valkey 9: numbered databases in cluster mode too (`cluster-databases`), so MOVE checks
    // the range only (Redis 7.0 refused MOVE in cluster mode).
    let Some(id) = parse_i64(ctx.arg(2)).and_then(|n| i32::try_from(n).ok()) else {
        return ctx.error(NOT_INT);
    };
    let dst_db = match usize::try_from(id) {
        Ok(d) if d < ctx.state.kv.databases() => d,
        _ => return ctx.error("ERR DB index is out of range"),
    };
    if dst_db == ctx.db {
        return ctx.error(SAME_OBJECT);
    }
    let (key, db, now) = (ctx.arg(1), ctx.db, ctx.now);
    if !matches!(ctx.state.kv.exists(db, key, now), Ok(true))
        || matches!(ctx.state.kv.exists(dst_db, key, now), Ok(true))
    {
        return ctx.out.int(0);
    }
    let at = super::string::deadline(&ctx.state.kv, db, key, now);
    if let Ok(Some(v)) = ctx.state.kv.remove(db, key, now) {
        let _ = ctx.state.kv.insert_with_expiry(dst_db, key, v, at, now);
    }
    ctx.modified_in(db, key);
    ctx.modified_in(dst_db, key);
    ctx.notify_in(db, notify::GENERIC, "move_from", key);
    ctx.notify_in(dst_db, notify::GENERIC, "move_to", key);
    crate::blocking::signal(ctx.state, dst_db, key);
    ctx.out.int(1);
}

/// EXPIRE / PEXPIRE / EXPIREAT / PEXPIREAT `key time [NX|XX|GT|LT]` (Redis 7.0
/// `expireGenericCommand`): options first, then the time, then the key; a time already past
/// deletes the key and propagates `DEL`; otherwise the effect is `PEXPIREAT key ms` (the
/// options kept).
fn expire(ctx: &mut Ctx<'_, '_>) {
    let (seconds, relative) = match ctx.spec.cmd {
        Cmd::Expire => (true, true),
        Cmd::Pexpire => (false, true),
        Cmd::Expireat => (true, false),
        _ => (false, false),
    };
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for i in 3..ctx.argc() {
        let a = ctx.arg(i);
        if a.eq_ignore_ascii_case(b"nx") {
            nx = true;
        } else if a.eq_ignore_ascii_case(b"xx") {
            xx = true;
        } else if a.eq_ignore_ascii_case(b"gt") {
            gt = true;
        } else if a.eq_ignore_ascii_case(b"lt") {
            lt = true;
        } else {
            return ctx.error(&format!(
                "ERR Unsupported option {}",
                String::from_utf8_lossy(a)
            ));
        }
    }
    if nx && (xx || gt || lt) {
        return ctx.error("ERR NX and XX, GT or LT options at the same time are not compatible");
    }
    if gt && lt {
        return ctx.error("ERR GT and LT options at the same time are not compatible");
    }
    let Some(mut when) = parse_i64(ctx.arg(2)) else {
        return ctx.error(NOT_INT);
    };
    let invalid = format!("ERR invalid expire time in '{}' command", ctx.spec.name);
    if seconds {
        match when.checked_mul(1000) {
            Some(w) => when = w,
            None => return ctx.error(&invalid),
        }
    }
    let base = if relative { ctx.now as i64 } else { 0 };
    match when.checked_add(base) {
        Some(w) if when <= i64::MAX - base => when = w,
        _ => return ctx.error(&invalid),
    }
    let (key, db, now) = (ctx.arg(1), ctx.db, ctx.now);
    let current = match ctx.state.kv.expiry(db, key, now) {
        Ok(KeyExpiry::Missing) | Err(_) => return ctx.out.int(0),
        Ok(KeyExpiry::Persistent) => None,
        Ok(KeyExpiry::At(t)) => Some(t as i64),
    };
    let refused = (nx && current.is_some())
        || (xx && current.is_none())
        || (gt && current.is_none_or(|c| when <= c))
        || (lt && current.is_some_and(|c| when >= c));
    if refused {
        return ctx.out.int(0);
    }
    if when <= now as i64 && !ctx.state.repl.is_replica() {
        let _ = ctx.state.kv.remove(db, key, now);
        ctx.state.expired_keys += 1;
        ctx.modified(key);
        // valkey-server 9.1.2 announces a time already past as `expired` (read from it).
        ctx.notify(notify::EXPIRED, "expired", key);
        ctx.effect(&[b"DEL", key]);
    } else {
        let _ = ctx
            .state
            .kv
            .set_expire_at(db, key, u64::try_from(when).unwrap_or(0), now);
        ctx.modified(key);
        ctx.notify(notify::GENERIC, "expire", key);
        let w = when.to_string();
        let mut argv: Vec<&[u8]> = vec![b"PEXPIREAT", key, w.as_bytes()];
        argv.extend((3..ctx.argc()).map(|i| ctx.arg(i)));
        ctx.effect(&argv);
    }
    ctx.out.int(1);
}

fn ttl(ctx: &mut Ctx<'_, '_>) {
    let (ms, abs) = match ctx.spec.cmd {
        Cmd::Ttl => (false, false),
        Cmd::Pttl => (true, false),
        Cmd::Expiretime => (false, true),
        _ => (true, true),
    };
    let r = match ctx.state.kv.expiry(ctx.db, ctx.arg(1), ctx.now) {
        Ok(KeyExpiry::At(t)) => {
            let t = if abs { t } else { t.saturating_sub(ctx.now) } as i64;
            if ms {
                t
            } else {
                (t + 500) / 1000
            }
        }
        Ok(KeyExpiry::Persistent) => -1,
        _ => -2,
    };
    ctx.out.int(r);
}

fn persist(ctx: &mut Ctx<'_, '_>) {
    let key = ctx.arg(1);
    let had = ctx.state.kv.persist(ctx.db, key, ctx.now).unwrap_or(false);
    if had {
        ctx.modified(key);
        ctx.notify(notify::GENERIC, "persist", key);
    }
    ctx.out.int(i64::from(had));
}

/// `OBJECT ENCODING | FREQ | REFCOUNT | HELP`, and IDLETIME while an LRU `maxmemory-policy`
/// keeps access clocks (`crate::evict`; none is kept otherwise). A missing key is a null
/// reply.
fn object(ctx: &mut Ctx<'_, '_>) {
    let sub = ctx.spec.name;
    if sub == "object|help" {
        return crate::admin::help(
            ctx.out,
            "OBJECT",
            &[
                "ENCODING <key>",
                "    Return the kind of internal representation used in order to store the value",
                "    associated with a <key>.",
                "FREQ <key>",
                "    Return the access frequency index of the <key>. The returned integer is",
                "    proportional to the logarithm of the recent access frequency of the key.",
                "IDLETIME <key>",
                "    Return the idle time of the <key>, that is the approximated number of",
                "    seconds elapsed since the last access to the key.",
                "REFCOUNT <key>",
                "    Return the number of references of the value associated with the specified",
                "    <key>.",
            ],
        );
    }
    let Some(v) = ctx.state.kv.get(ctx.db, ctx.arg(2), ctx.now).ok().flatten() else {
        return ctx.out.null();
    };
    match sub {
        "object|encoding" => {
            let e = v.encoding();
            ctx.out.bulk(e.as_bytes());
        }
        "object|refcount" => {
            let n = v.refcount();
            ctx.out.int(n);
        }
        // The access words exist while an LRU or LFU `maxmemory-policy` is set (crate::evict).
        "object|freq" if ctx.state.evict.settings().policy.is_lfu() => {
            let word = ctx.state.kv.access_word(ctx.db, ctx.arg(2), ctx.now).ok().flatten();
            let f = word.map_or(0, |w| ctx.state.evict.freq(w, ctx.now));
            ctx.out.int(i64::from(f));
        }
        "object|idletime" if ctx.state.evict.settings().policy.is_lfu() => ctx.error("ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."),
        "object|idletime" if ctx.state.kv.tracks_access() => {
            let word = ctx.state.kv.access_word(ctx.db, ctx.arg(2), ctx.now).ok().flatten();
            let idle = word.map_or(0, |w| ctx.state.evict.idle_secs(w, ctx.now));
            ctx.out.int(idle as i64);
        }
        "object|freq" => ctx.error("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."),
        _ => ctx.error(&format!(
            "ERR unknown subcommand '{}'. Try OBJECT HELP.",
            String::from_utf8_lossy(ctx.arg(1))
        )),
    }
}

/// `MEMORY USAGE key [SAMPLES n]` (bytes this key costs: the table entry, the key's and the
/// value's heap; exact, so SAMPLES is checked and ignored) | `MEMORY HELP`.
fn memory(ctx: &mut Ctx<'_, '_>) {
    if ctx.spec.name == "memory|help" {
        return crate::admin::help(
            ctx.out,
            "MEMORY",
            &[
                "USAGE <key> [SAMPLES <count>]",
                "    Return memory in bytes used by <key> and its value. Nested values are",
                "    sampled up to <count> times (default: 5, 0 means sample all).",
            ],
        );
    }
    let mut j = 3;
    while j < ctx.argc() {
        if ctx.arg(j).eq_ignore_ascii_case(b"samples") && j + 1 < ctx.argc() {
            match int_arg(ctx.arg(j + 1)) {
                Ok(n) if n < 0 => return ctx.error(SYNTAX),
                Ok(_) => {}
                Err(e) => return ctx.error(e),
            }
            j += 2;
        } else {
            return ctx.error(SYNTAX);
        }
    }
    let key = ctx.arg(2);
    match ctx.state.kv.get(ctx.db, key, ctx.now).ok().flatten() {
        None => ctx.out.null(),
        Some(v) => {
            // The entry (16-byte key + 16-byte value), a key longer than the inline 14 bytes
            // on the heap with its box, and the value's heap.
            let key_heap = if key.len() > ferrocluster_kvstore::INLINE_KEY_LEN {
                16 + key.len()
            } else {
                0
            };
            reply_len(ctx.out, 32 + key_heap + v.heap_size());
        }
    }
}

/// Redis `strtod` as SORT reads weights: leading spaces allowed, the whole rest a number,
/// no overflow or underflow to zero, not NaN.
fn sort_weight(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?;
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    if t.is_empty() {
        return None;
    }
    let lower = t.to_ascii_lowercase();
    let body = lower.trim_start_matches(['+', '-']);
    let v: f64 = match body {
        "inf" | "infinity" => {
            if lower.starts_with('-') {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            }
        }
        _ if body.contains("nan") || body.contains("inf") => return None,
        _ => t.parse().ok()?,
    };
    let overflow = v.is_infinite() && !body.starts_with("inf");
    let mantissa = body.split('e').next().unwrap_or_default();
    let underflow = v == 0.0 && mantissa.bytes().any(|c| (b'1'..=b'9').contains(&c));
    (!overflow && !underflow).then_some(v)
}

/// What `SORT ... BY` / `GET` patterns read: `#` the element itself, `*` substituted by the
/// element, `key->field` a hash field (Redis `lookupKeyByPattern`).
fn by_pattern(ctx: &Ctx<'_, '_>, pattern: &[u8], elem: &[u8]) -> Option<Vec<u8>> {
    if pattern == b"#" {
        return Some(elem.to_vec());
    }
    let star = pattern.iter().position(|&b| b == b'*')?;
    let after = &pattern[star + 1..];
    let arrow = after
        .windows(2)
        .position(|w| w == b"->")
        .filter(|&p| p + 2 < after.len());
    let (post, field) = match arrow {
        Some(p) => (&after[..p], Some(&after[p + 2..])),
        None => (after, None),
    };
    let mut key = pattern[..star].to_vec();
    key.extend_from_slice(elem);
    key.extend_from_slice(post);
    let v = ctx.state.kv.get(ctx.db, &key, ctx.now).ok().flatten()?;
    match (field, v) {
        (Some(f), Value::Hash(h)) => h.get(f).map(<[u8]>::to_vec),
        (Some(_), _) => None,
        (None, v) => v.as_string().map(<[u8]>::to_vec),
    }
}

/// `SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA] [STORE
/// destination]` and `SORT_RO` (no STORE), as Valkey 9's `sortCommandGeneric`: in cluster mode
/// a `BY` / `GET` pattern must name keys of the sorted key's slot. Comparisons are bytewise
/// (`strcoll` in the C locale).
fn sort(ctx: &mut Ctx<'_, '_>) {
    let readonly = ctx.spec.cmd == Cmd::SortRo;
    let (mut desc, mut alpha, mut dontsort) = (false, false, false);
    let (mut limit_start, mut limit_count) = (0i64, -1i64);
    let mut sortby: Option<&[u8]> = None;
    let mut store: Option<&[u8]> = None;
    let mut gets: Vec<&[u8]> = Vec::new();
    let cluster = ctx.shared.config.cluster_enabled;
    let key = ctx.arg(1);
    let key_slot = ferrocluster_slot::key_hash_slot(key);
    let same_slot = |p: &[u8]| ferrocluster_slot::pattern_slot(p) == Some(key_slot);
    let mut j = 2;
    while j < ctx.argc() {
        let a = ctx.arg(j);
        let left = ctx.argc() - j - 1;
        let is = |s: &str| a.eq_ignore_ascii_case(s.as_bytes());
        if is("asc") {
            desc = false;
        } else if is("desc") {
            desc = true;
        } else if is("alpha") {
            alpha = true;
        } else if is("limit") && left >= 2 {
            match (parse_i64(ctx.arg(j + 1)), parse_i64(ctx.arg(j + 2))) {
                (Some(s), Some(c)) => (limit_start, limit_count) = (s, c),
                _ => return ctx.error(NOT_INT),
            }
            j += 2;
        } else if !readonly && is("store") && left >= 1 {
            store = Some(ctx.arg(j + 1));
            j += 1;
        } else if is("by") && left >= 1 {
            let p = ctx.arg(j + 1);
            sortby = Some(p);
            if !p.contains(&b'*') {
                dontsort = true;
            } else if cluster && !same_slot(p) {
                return ctx.error("ERR BY option of SORT denied in Cluster mode when keys formed by the pattern may be in different slots.");
            }
            j += 1;
        } else if is("get") && left >= 1 {
            let p = ctx.arg(j + 1);
            if cluster && p != b"#" && !same_slot(p) {
                return ctx.error("ERR GET option of SORT denied in Cluster mode when keys formed by the pattern may be in different slots.");
            }
            gets.push(p);
            j += 1;
        } else {
            return ctx.error(SYNTAX);
        }
        j += 1;
    }
    let (db, now) = (ctx.db, ctx.now);
    let value = ctx.state.kv.get(db, key, now).ok().flatten();
    // The elements in the value's own order (lists head first, sorted sets by score).
    let mut elems: Vec<Vec<u8>> = match value {
        None => Vec::new(),
        Some(Value::Set(s)) => {
            if dontsort && store.is_some() {
                // A set has no order of its own: sort it so replicas store the same list.
                dontsort = false;
                alpha = true;
                sortby = None;
            }
            s.iter().map(|m| m.to_vec()).collect()
        }
        Some(v) => match crate::types::sort_elements(v) {
            Some(e) => e,
            None => return ctx.error(WRONGTYPE),
        },
    };
    let n = elems.len() as i64;
    let mut start = limit_start.max(0).min(n);
    let count = limit_count.max(-1).min(n);
    let mut end = if count < 0 { n - 1 } else { start + count - 1 };
    if start >= n {
        start = n - 1;
        end = n - 2;
    }
    if end >= n {
        end = n - 1;
    }
    let natural = !matches!(value, None | Some(Value::Set(_)));
    if dontsort && natural && desc {
        elems.reverse();
    }
    if !dontsort {
        // (element, numeric weight or alpha weight)
        let mut keyed: Vec<(Vec<u8>, f64, Option<Vec<u8>>)> = Vec::with_capacity(elems.len());
        let mut conversion_error = false;
        for e in elems {
            let by = match sortby {
                Some(p) => by_pattern(ctx, p, &e),
                None => Some(e.clone()),
            };
            let (mut score, mut cmp) = (0.0, None);
            if let Some(b) = by {
                if alpha {
                    if sortby.is_some() {
                        cmp = Some(b);
                    }
                } else {
                    match sort_weight(&b) {
                        Some(s) => score = s,
                        None => conversion_error = true,
                    }
                }
            }
            keyed.push((e, score, cmp));
        }
        if conversion_error {
            return ctx.error("ERR One or more scores can't be converted into double");
        }
        keyed.sort_by(|a, b| {
            let o = if !alpha {
                a.1.partial_cmp(&b.1)
                    .unwrap_or(std::cmp::Ordering::Equal)
                    .then_with(|| a.0.cmp(&b.0))
            } else if sortby.is_some() {
                match (&a.2, &b.2) {
                    (None, None) => std::cmp::Ordering::Equal,
                    (None, _) => std::cmp::Ordering::Less,
                    (_, None) => std::cmp::Ordering::Greater,
                    (Some(x), Some(y)) => x.cmp(y),
                }
            } else {
                a.0.cmp(&b.0)
            };
            if desc {
                o.reverse()
            } else {
                o
            }
        });
        elems = keyed.into_iter().map(|k| k.0).collect();
    }
    let range: &[Vec<u8>] = if end >= start && start >= 0 {
        &elems[start as usize..=end as usize]
    } else {
        &[]
    };
    // GET results: one per pattern per element (null when the pattern finds nothing).
    let rows: Vec<Option<Vec<u8>>> = if gets.is_empty() {
        range.iter().map(|e| Some(e.clone())).collect()
    } else {
        range
            .iter()
            .flat_map(|e| gets.iter().map(move |g| (e, *g)))
            .map(|(e, g)| by_pattern(ctx, g, e))
            .collect()
    };
    let Some(dest) = store else {
        ctx.out.array(rows.len());
        for r in &rows {
            match r {
                Some(b) => ctx.out.bulk(b),
                None => ctx.out.null(),
            }
        }
        return;
    };
    let items: Vec<Vec<u8>> = rows.into_iter().map(Option::unwrap_or_default).collect();
    let len = items.len();
    if len > 0 {
        match crate::types::list_value(items) {
            Some(list) => {
                let _ = ctx.state.kv.insert(db, dest, list, now);
            }
            None => {
                return ctx.error(
                    "ERR SORT STORE needs the list type, which this server does not store yet",
                )
            }
        }
        ctx.prop.dirty += len as u64;
        super::txn::touch(ctx.state, db, dest);
        ctx.notify(notify::LIST, "sortstore", dest);
        crate::blocking::signal(ctx.state, db, dest);
    } else if let Ok(Some(_)) = ctx.state.kv.remove(db, dest, now) {
        ctx.modified(dest);
        ctx.notify(notify::GENERIC, "del", dest);
    }
    reply_len(ctx.out, len);
}

fn flush(ctx: &mut Ctx<'_, '_>) {
    if let Some(opt) = ctx.args.opt(1) {
        if ctx.argc() > 2
            || !(opt.eq_ignore_ascii_case(b"async") || opt.eq_ignore_ascii_case(b"sync"))
        {
            return ctx.error(SYNTAX);
        }
    }
    if ctx.spec.cmd == Cmd::Flushdb {
        super::txn::touch_db(ctx.state, Some(ctx.db), ctx.now);
        let _ = ctx.state.kv.flush_db(ctx.db);
    } else {
        super::txn::touch_db(ctx.state, None, ctx.now);
        ctx.state.kv.flush_all();
    }
    ctx.prop.dirty += 1;
    ctx.out.ok();
}

fn swapdb(ctx: &mut Ctx<'_, '_>) {
    if ctx.shared.config.cluster_enabled && ctx.state.kv.databases() == 1 {
        return ctx.error("ERR SWAPDB is not allowed in cluster mode");
    }
    let Some(a) = parse_i64(ctx.arg(1)) else {
        return ctx.error("ERR invalid first DB index");
    };
    let Some(b) = parse_i64(ctx.arg(2)) else {
        return ctx.error("ERR invalid second DB index");
    };
    let n = ctx.state.kv.databases() as i64;
    if a < 0 || b < 0 || a >= n || b >= n {
        return ctx.error("ERR DB index is out of range");
    }
    super::txn::touch_swap(ctx.state, a as usize, b as usize, ctx.now);
    let _ = ctx.state.kv.swap_db(a as usize, b as usize);
    crate::blocking::signal_db(ctx.state, a as usize);
    crate::blocking::signal_db(ctx.state, b as usize);
    ctx.prop.dirty += 1;
    ctx.out.ok();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_weights_follow_strtod() {
        assert_eq!(sort_weight(b" 1.5"), Some(1.5));
        assert_eq!(sort_weight(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(sort_weight(b"1e999"), None);
        assert_eq!(sort_weight(b"1e-999"), None);
        assert_eq!(sort_weight(b"0"), Some(0.0));
        assert_eq!(sort_weight(b"0e5"), Some(0.0));
        assert_eq!(sort_weight(b"abc"), None);
        assert_eq!(sort_weight(b"nan"), None);
        assert_eq!(sort_weight(b""), None);
    }
}

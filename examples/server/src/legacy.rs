//! Legacy slot migration, the commands `redis-cli --cluster reshard/rebalance` drive:
//! `DUMP`, `RESTORE` / `RESTORE-ASKING` and `MIGRATE` (single key and `KEYS` form, `COPY`,
//! `REPLACE`, `AUTH`, `AUTH2`, timeout), with a cached connection per target like
//! redis-server's (facts sheet C.7). `CLUSTER SETSLOT` goes through the node (cluster.rs).
//!
//! Payloads are RDB DUMP payloads (`ferrocluster_rdb::dump`: the value as an RDB object,
//! RDB version 10, CRC-64), so DUMP/RESTORE/MIGRATE work with redis-server 7.0 and
//! valkey-server 9.1 in both directions (for strings: the only values this server stores).

use crate::client::{Args, ClientCtx};
use crate::commands::{parse_i64, NOT_INT, SYNTAX};
use crate::resp::Out;
use crate::server::{State, Value};
use ferrocluster_kvstore::KeyExpiry;
use ferrocluster_rdb::{dump, Encoder};
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// redis-server's `MIGRATE_SOCKET_CACHE_TTL`: a cached connection idle this long is closed.
const CACHE_IDLE_MS: u64 = 10_000;
/// redis-server's `MIGRATE_SOCKET_CACHE_ITEMS`.
const CACHE_MAX: usize = 64;
/// redis-server writes the MIGRATE payload in chunks of this size.
const WRITE_CHUNK: usize = 64 * 1024;

/// `DUMP payload version or checksum are wrong`
pub const BAD_PAYLOAD: &str = "ERR DUMP payload version or checksum are wrong";
/// `BUSYKEY Target key name already exists.`
pub const BUSYKEY: &str = "BUSYKEY Target key name already exists.";

/// One cached MIGRATE connection (`host:port`).
pub struct CachedConn {
    stream: TcpStream,
    /// The database last SELECTed on it (`None`: unknown).
    db: Option<i64>,
    last_use_ms: u64,
    /// Bytes read past the last reply.
    rbuf: Vec<u8>,
}

/// The MIGRATE connection cache.
#[derive(Default)]
pub struct MigrateCache {
    conns: std::collections::HashMap<(String, u16), CachedConn>,
}

impl MigrateCache {
    /// Number of cached connections.
    pub fn len(&self) -> usize {
        self.conns.len()
    }

    /// Closes connections idle for more than 10 s.
    pub fn expire_idle(&mut self, now: u64) {
        self.conns
            .retain(|_, c| now.saturating_sub(c.last_use_ms) <= CACHE_IDLE_MS);
    }
}

/// `ERR Bad data format`: the footer was right, the object is not one we can store.
pub const BAD_DATA: &str = "ERR Bad data format";

/// `DUMP key`: the RDB payload of the value (no TTL, like redis-server's), or nil.
pub fn dump_cmd(state: &mut State, db: usize, args: &Args<'_>, out: &mut Out, now: u64) {
    match state.kv.get(db, args.get(1), now).ok().flatten() {
        Some(v) => match dump::encode(v) {
            Ok(p) => out.bulk(&p),
            Err(e) => out.error(&format!("ERR {e}")),
        },
        None => out.null(),
    }
}

/// `RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f]` (and
/// `RESTORE-ASKING`, which only differs in routing). IDLETIME and FREQ are checked and
/// ignored (we keep no LRU/LFU data). A TTL of 0 means no expiry. The payload is checked as
/// `verifyDumpPayload` does (`DUMP payload version or checksum are wrong`), then decoded
/// (`Bad data format`, also for values other than strings).
pub fn restore_cmd(state: &mut State, db: usize, args: &Args<'_>, out: &mut Out, now: u64) {
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq) = (None::<i64>, None::<i64>);
    let mut i = 4;
    while i < args.len() {
        let a = args.get(i);
        let more = args.len() - 1 - i;
        if a.eq_ignore_ascii_case(b"replace") {
            replace = true;
        } else if a.eq_ignore_ascii_case(b"absttl") {
            absttl = true;
        } else if a.eq_ignore_ascii_case(b"idletime") && more > 0 && freq.is_none() {
            i += 1;
            match parse_i64(args.get(i)) {
                None => return out.error(NOT_INT),
                Some(n) if n < 0 => return out.error("ERR Invalid IDLETIME value, must be >= 0"),
                Some(n) => idle = Some(n),
            }
        } else if a.eq_ignore_ascii_case(b"freq") && more > 0 && idle.is_none() {
            i += 1;
            match parse_i64(args.get(i)) {
                None => return out.error(NOT_INT),
                Some(n) if !(0..=255).contains(&n) => {
                    return out.error("ERR Invalid FREQ value, must be >= 0 and <= 255")
                }
                Some(n) => freq = Some(n),
            }
        } else {
            return out.error(SYNTAX);
        }
        i += 1;
    }
    let Some(ttl) = parse_i64(args.get(2)) else {
        return out.error(NOT_INT);
    };
    if ttl < 0 {
        return out.error("ERR Invalid TTL value, must be >= 0");
    }
    let key = args.get(1);
    if !replace && matches!(state.kv.exists(db, key, now), Ok(true)) {
        return out.error(BUSYKEY);
    }
    let value: Value = match dump::decode_value(args.get(3)) {
        Ok(v) => v,
        Err(e) if e.is_bad_data() => return out.error(BAD_DATA),
        Err(_) => return out.error(BAD_PAYLOAD),
    };
    let at = (ttl > 0).then(|| {
        if absttl {
            ttl as u64
        } else {
            now.saturating_add(ttl as u64)
        }
    });
    if at.is_some_and(|t| t <= now) {
        // Already expired (redis-server's checkAlreadyExpired): the key is removed instead.
        let _ = state.kv.remove(db, key, now);
        return out.ok();
    }
    let _ = state.kv.insert_with_expiry(db, key, value, at, now);
    out.ok();
}

struct MigrateArgs<'a> {
    host: String,
    port: u16,
    db: i64,
    timeout_ms: u64,
    copy: bool,
    replace: bool,
    auth: Option<(Option<&'a [u8]>, &'a [u8])>,
    keys: Vec<&'a [u8]>,
}

fn parse_migrate<'a>(args: &Args<'a>) -> Result<MigrateArgs<'a>, &'static str> {
    let (mut copy, mut replace, mut auth) = (false, false, None);
    let mut keys = vec![args.get(3)];
    let mut j = 6;
    while j < args.len() {
        let a = args.get(j);
        let more = args.len() - 1 - j;
        if a.eq_ignore_ascii_case(b"copy") {
            copy = true;
        } else if a.eq_ignore_ascii_case(b"replace") {
            replace = true;
        } else if a.eq_ignore_ascii_case(b"auth") {
            if more == 0 {
                return Err(SYNTAX);
            }
            j += 1;
            auth = Some((None, args.get(j)));
        } else if a.eq_ignore_ascii_case(b"auth2") {
            if more < 2 {
                return Err(SYNTAX);
            }
            auth = Some((Some(args.get(j + 1)), args.get(j + 2)));
            j += 2;
        } else if a.eq_ignore_ascii_case(b"keys") {
            if !args.get(3).is_empty() {
                return Err("ERR When using MIGRATE KEYS option, the key argument must be set to the empty string");
            }
            keys = (j + 1..args.len()).map(|i| args.get(i)).collect();
            break;
        } else {
            return Err(SYNTAX);
        }
        j += 1;
    }
    let timeout = parse_i64(args.get(5)).ok_or(NOT_INT)?;
    let db = parse_i64(args.get(4)).ok_or(NOT_INT)?;
    let port = parse_i64(args.get(2))
        .and_then(|p| u16::try_from(p).ok())
        .ok_or("IOERR error or timeout connecting to the client")?;
    Ok(MigrateArgs {
        host: String::from_utf8_lossy(args.get(1)).into_owned(),
        port,
        db,
        timeout_ms: if timeout <= 0 { 1000 } else { timeout as u64 },
        copy,
        replace,
        auth,
        keys,
    })
}

fn push_cmd(buf: &mut Vec<u8>, parts: &[&[u8]]) {
    let mut o = Out {
        buf: std::mem::take(buf),
        proto: 2,
    };
    o.array(parts.len());
    for p in parts {
        o.bulk(p);
    }
    *buf = o.buf;
}

enum IoFail {
    Write(bool),
    Read(bool),
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// Reads one CRLF-terminated reply line (without CRLF).
fn read_line(c: &mut CachedConn) -> Result<Vec<u8>, IoFail> {
    loop {
        if let Some(p) = c.rbuf.windows(2).position(|w| w == b"\r\n") {
            let line = c.rbuf[..p].to_vec();
            c.rbuf.drain(..p + 2);
            return Ok(line);
        }
        let mut chunk = [0u8; 4096];
        match c.stream.read(&mut chunk) {
            Ok(0) => return Err(IoFail::Read(false)),
            Ok(n) => c.rbuf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(IoFail::Read(is_timeout(&e))),
        }
    }
}

fn connect(host: &str, port: u16, timeout: Duration) -> Option<TcpStream> {
    let addr = (host, port).to_socket_addrs().ok()?.next()?;
    let s = TcpStream::connect_timeout(&addr, timeout).ok()?;
    let _ = s.set_nodelay(true);
    Some(s)
}

/// `MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE] [AUTH password |
/// AUTH2 username password] [KEYS key ...]` (facts sheet C.7). Blocks this connection's I/O
/// thread (and the keyspace lock) for at most about `timeout` per step, as redis-server
/// blocks its event loop. Moved keys are deleted here and sent to replicas as DELs.
pub fn migrate_cmd(
    state: &mut State,
    client: &ClientCtx,
    args: &Args<'_>,
    out: &mut Out,
    now: u64,
) {
    let m = match parse_migrate(args) {
        Ok(m) => m,
        Err(e) => return out.error(e),
    };
    let db = client.db;
    let present: Vec<&[u8]> = m
        .keys
        .iter()
        .copied()
        .filter(|k| matches!(state.kv.exists(db, k, now), Ok(true)))
        .collect();
    if present.is_empty() {
        return out.simple("NOKEY");
    }
    let timeout = Duration::from_millis(m.timeout_ms);
    let cache_key = (m.host.clone(), m.port);
    state.migr.migrate_cache.expire_idle(now);
    let mut may_retry = true;
    loop {
        // Connect (or reuse the cached connection).
        let mut conn = match state.migr.migrate_cache.conns.remove(&cache_key) {
            Some(c) => c,
            None => {
                let Some(stream) = connect(&m.host, m.port, timeout) else {
                    return out.error("IOERR error or timeout connecting to the client");
                };
                if state.migr.migrate_cache.len() >= CACHE_MAX {
                    // Like redis-server: drop a random (here: any) entry to make room.
                    if let Some(k) = state.migr.migrate_cache.conns.keys().next().cloned() {
                        state.migr.migrate_cache.conns.remove(&k);
                    }
                }
                CachedConn {
                    stream,
                    db: None,
                    last_use_ms: now,
                    rbuf: Vec::new(),
                }
            }
        };
        let _ = conn.stream.set_read_timeout(Some(timeout));
        let _ = conn.stream.set_write_timeout(Some(timeout));
        conn.last_use_ms = now;
        // Build the request: [AUTH], [SELECT], one RESTORE(-ASKING) per live key.
        let mut buf = Vec::new();
        if let Some((user, pass)) = m.auth {
            match user {
                Some(u) => push_cmd(&mut buf, &[b"AUTH", u, pass]),
                None => push_cmd(&mut buf, &[b"AUTH", pass]),
            }
        }
        let select = conn.db != Some(m.db);
        if select {
            push_cmd(&mut buf, &[b"SELECT", m.db.to_string().as_bytes()]);
        }
        let restore: &[u8] = if state.cluster.is_some() {
            b"RESTORE-ASKING"
        } else {
            b"RESTORE"
        };
        let mut sent: Vec<&[u8]> = Vec::with_capacity(present.len());
        let mut enc = Encoder::default();
        let mut payload = Vec::new();
        for &k in &present {
            let Some(v) = state.kv.get(db, k, now).ok().flatten() else {
                continue;
            };
            let ttl = match state.kv.expiry(db, k, now) {
                Ok(KeyExpiry::At(t)) if t <= now => continue,
                Ok(KeyExpiry::At(t)) => (t - now).max(1),
                _ => 0,
            };
            payload.clear();
            if let Err(e) = dump::encode_into(&mut enc, v, &mut payload) {
                return out.error(&format!("ERR {e}"));
            }
            let ttl = ttl.to_string();
            if m.replace {
                push_cmd(
                    &mut buf,
                    &[restore, k, ttl.as_bytes(), &payload, b"REPLACE"],
                );
            } else {
                push_cmd(&mut buf, &[restore, k, ttl.as_bytes(), &payload]);
            }
            sent.push(k);
        }
        let result = (|| -> Result<(Option<String>, Vec<&[u8]>), IoFail> {
            for chunk in buf.chunks(WRITE_CHUNK) {
                if let Err(e) = conn.stream.write_all(chunk) {
                    return Err(IoFail::Write(is_timeout(&e)));
                }
            }
            let mut target_error = None;
            let mut control = Vec::new();
            if m.auth.is_some() {
                control.push(read_line(&mut conn)?);
            }
            if select {
                control.push(read_line(&mut conn)?);
            }
            for line in control {
                if line.first() == Some(&b'-') && target_error.is_none() {
                    target_error = Some(String::from_utf8_lossy(&line[1..]).into_owned());
                }
            }
            let mut moved = Vec::new();
            for &k in &sent {
                let line = read_line(&mut conn)?;
                if line.first() == Some(&b'-') {
                    if target_error.is_none() {
                        target_error = Some(String::from_utf8_lossy(&line[1..]).into_owned());
                    }
                } else {
                    moved.push(k);
                }
            }
            Ok((target_error, moved))
        })();
        match result {
            Ok((target_error, moved)) => {
                if !m.copy && !moved.is_empty() {
                    for k in &moved {
                        let _ = state.kv.remove(db, k, now);
                    }
                    crate::repl::propagate_dels(state, db, &moved);
                }
                conn.db = if target_error.is_none() {
                    Some(m.db)
                } else {
                    None
                };
                state.migr.migrate_cache.conns.insert(cache_key, conn);
                match target_error {
                    None => out.ok(),
                    Some(e) => out.error(&format!("ERR Target instance replied with error: {e}")),
                }
                return;
            }
            Err(fail) => {
                // The connection is dropped (not cached again); one transparent retry when
                // the failure was not a timeout, like redis-server.
                let (writing, timed_out) = match fail {
                    IoFail::Write(t) => (true, t),
                    IoFail::Read(t) => (false, t),
                };
                if may_retry && !timed_out {
                    may_retry = false;
                    continue;
                }
                return out.error(&format!(
                    "IOERR error or timeout {} to target instance",
                    if writing { "writing" } else { "reading" }
                ));
            }
        }
    }
}

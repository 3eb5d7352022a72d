//! Legacy slot migration, the commands `redis-cli --cluster reshard/rebalance` drive:
//! `DUMP`, `RESTORE` / `RESTORE-ASKING` and `MIGRATE` (single key and `KEYS` form, `COPY`,
//! `REPLACE`, `AUTH`, `AUTH2`, timeout, a cached connection per target). `CLUSTER SETSLOT`
//! goes through the node (cluster.rs).
//!
//! The protocol is `ferrocluster_dataplane::legacy` (one copy: the MIGRATE client with its
//! request, replies, retry, cache and error texts, and the RESTORE checks in Valkey's order);
//! this module is its host. Payloads are RDB DUMP payloads (`ferrocluster_rdb::dump`, RDB
//! version 10), so DUMP/RESTORE/MIGRATE work with redis-server 7.0 and valkey-server 9.1 in
//! both directions for every value type the server has.
//!
//! MIGRATE runs to its end inside the command, as redis-server's blocks its event loop: the
//! command drives the Sans-IO client over blocking sockets (each step bounded by the
//! MIGRATE's timeout) while it holds the keyspace lock, so no other command changes the keys
//! on the way (the crate's host obligation).

use crate::client::{Args, ClientCtx};
use crate::repl::{LinkReader, LinkWriter};
use crate::resp::Out;
use crate::server::{Shared, State, Value};
use ferrocluster_dataplane::legacy::{
    restore, MigrateArgs, MigrateClient, MigrateConfig, MigrateLink, MigrateOutput, Restore,
};
use ferrocluster_dataplane::{ConnId, Millis, Reply};
use ferrocluster_kvstore::KeyExpiry;
use ferrocluster_rdb::dump;
use std::collections::HashMap;
use std::io::ErrorKind;
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// MIGRATE's client and its connections (cached ones included).
#[derive(Default)]
pub struct MigrateCache {
    client: Option<MigrateClient>,
    /// Plain TCP, or TLS with `tls-cluster yes` (Valkey `connTypeOfCluster`).
    links: HashMap<MigrateLink, (LinkReader, LinkWriter)>,
}

/// Closes the MIGRATE connections idle for longer than the engine keeps them (Valkey
/// `migrateCloseTimedoutSockets`, 10 s). Called by the timer; a MIGRATE runs under the state
/// lock, so no operation is in flight here and the engine asks only for closes.
pub fn tick(state: &mut State, now: u64) {
    let cache = &mut state.migr.migrate_cache;
    let Some(mc) = cache.client.as_mut() else {
        return;
    };
    if mc.poll_timeout().is_none_or(|t| t.0 > now) {
        return;
    }
    mc.handle_timeout(Millis(now));
    while let Some(o) = mc.poll_output() {
        if let MigrateOutput::Close { link } = o {
            cache.links.remove(&link);
        }
    }
}

/// INFO `migrate_cached_sockets`: MIGRATE connections kept for the next MIGRATE.
pub fn cached_sockets(state: &State) -> usize {
    state
        .migr
        .migrate_cache
        .client
        .as_ref()
        .map_or(0, MigrateClient::cached)
}

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

fn write_reply(reply: &Reply, out: &mut Out) {
    crate::cluster::write_reply(reply, out);
}

/// `RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f]` (and
/// `RESTORE-ASKING`, which only differs in routing): checked and decoded by
/// `ferrocluster_dataplane::legacy::restore`. IDLETIME and FREQ set the key's access word
/// under an LRU / LFU `maxmemory-policy` (`crate::evict::Eviction::restore_access`). A TTL
/// already past removes the key instead on a primary (Valkey `checkAlreadyExpired`).
pub fn restore_cmd(state: &mut State, db: usize, args: &Args<'_>, out: &mut Out, now: u64) {
    let argv = args.to_owned_vec();
    let exists = |k: &[u8]| matches!(state.kv.exists(db, k, now), Ok(true));
    let drop_expired = !state.repl.is_replica();
    match restore::<Value, _>(&argv, exists, now as i64, drop_expired) {
        Ok(Restore::Store {
            key,
            value,
            expire_at_ms,
            idle_secs,
            freq,
            ..
        }) => {
            let at = expire_at_ms.map(|t| t.max(0) as u64);
            let _ = state.kv.insert_with_expiry(db, &key, value, at, now);
            let st = &mut *state;
            st.evict
                .restore_access(&mut st.kv, db, &key, (idle_secs, freq), now);
            out.ok();
            crate::blocking::signal(state, db, &key);
            crate::notify::keyspace_event(state, db, crate::notify::GENERIC, "restore", &key);
        }
        Ok(Restore::Expired { key, replace }) => {
            if replace && matches!(state.kv.remove(db, &key, now), Ok(Some(_))) {
                crate::notify::keyspace_event(state, db, crate::notify::GENERIC, "del", &key);
            }
            out.ok();
        }
        Err(e) => write_reply(&e.to_reply(), out),
    }
}

/// A MIGRATE link to `host`:`port`: TCP within `timeout`, then with `tls-cluster yes` the TLS
/// handshake (the target's certificate checked against our CA, ours presented).
fn connect(
    shared: &Shared,
    host: &[u8],
    port: &[u8],
    timeout: Duration,
) -> Option<(LinkReader, LinkWriter)> {
    let host = std::str::from_utf8(host).ok()?;
    let port: u16 = std::str::from_utf8(port).ok()?.parse().ok()?;
    let addr = (host, port).to_socket_addrs().ok()?.next()?;
    let s = TcpStream::connect_timeout(&addr, timeout).ok()?;
    s.set_write_timeout(Some(timeout)).ok()?;
    crate::repl::wrap_link_with(shared, s, shared.config.tls_cluster).ok()
}

/// `MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE] [AUTH password |
/// AUTH2 username password] [KEYS key ...]`, on `ferrocluster_dataplane::legacy::MigrateClient`.
/// Blocks this connection's I/O thread (and the keyspace lock) for at most about `timeout`
/// per step, as redis-server blocks its event loop. Moved keys are deleted here and sent to
/// replicas as DELs.
pub fn migrate_cmd(
    shared: &Shared,
    state: &mut State,
    client: &ClientCtx,
    args: &Args<'_>,
    out: &mut Out,
    now: u64,
) {
    let argv = args.to_owned_vec();
    let m = match MigrateArgs::parse(&argv) {
        Ok(m) => m,
        Err(e) => return write_reply(&e.to_reply(), out),
    };
    let db = client.db;
    let timeout = Duration::from_millis(m.timeout_ms.max(1));
    let me = ConnId(client.id);
    let cluster_enabled = state.cluster.is_some();
    let State { kv, migr, .. } = state;
    let cache = &mut migr.migrate_cache;
    let mc = cache.client.get_or_insert_with(|| {
        MigrateClient::new(
            MigrateConfig {
                cluster_enabled,
                ..MigrateConfig::default()
            },
            Millis(now),
        )
    });
    mc.handle_timeout(Millis(now));
    let found: Vec<(&[u8], &Value, Option<i64>)> = m
        .keys
        .iter()
        .filter_map(|k| {
            let v = kv.get(db, k, now).ok().flatten()?;
            let at = match kv.expiry(db, k, now) {
                Ok(KeyExpiry::At(t)) => Some(t as i64),
                _ => None,
            };
            Some((k.as_slice(), v, at))
        })
        .collect();
    let started = mc.start(me, m.clone(), found, Millis(now));
    let (reply, moved) = match started {
        Ok(Some(reply)) => (reply, Vec::new()),
        Err(e) => (e.to_reply(), Vec::new()),
        Ok(None) => drive(shared, mc, &mut cache.links, me, timeout),
    };
    if !moved.is_empty() {
        for k in &moved {
            if matches!(state.kv.remove(db, k, now), Ok(Some(_))) {
                crate::notify::keyspace_event(state, db, crate::notify::GENERIC, "del", k);
            }
        }
        let keys: Vec<&[u8]> = moved.iter().map(Vec::as_slice).collect();
        crate::repl::propagate_dels(state, db, &keys);
    }
    write_reply(&reply, out);
}

/// Runs the MIGRATE of `me` to its end over blocking sockets: its reply and the keys moved.
fn drive(
    shared: &Shared,
    mc: &mut MigrateClient,
    links: &mut HashMap<MigrateLink, (LinkReader, LinkWriter)>,
    me: ConnId,
    timeout: Duration,
) -> (Reply, Vec<Vec<u8>>) {
    let now = || Millis(crate::server::unix_ms());
    // The link the MIGRATE waits on (its last Send).
    let mut waiting: Option<MigrateLink> = None;
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        while let Some(o) = mc.poll_output() {
            match o {
                MigrateOutput::Connect {
                    link, host, port, ..
                } => match connect(shared, &host, &port, timeout) {
                    Some(s) => {
                        links.insert(link, s);
                        mc.handle_connected(link, now());
                    }
                    None => mc.handle_connect_failed(link, now()),
                },
                MigrateOutput::Send { link, bytes } => {
                    let ok = links
                        .get_mut(&link)
                        .is_some_and(|(_, w)| w.write_all(&bytes).is_ok());
                    if ok {
                        waiting = Some(link);
                    } else {
                        mc.handle_write_failed(link, now());
                    }
                }
                MigrateOutput::Close { link } => {
                    links.remove(&link);
                    if waiting == Some(link) {
                        waiting = None;
                    }
                }
                MigrateOutput::Done {
                    client,
                    reply,
                    moved,
                } if client == me => return (reply, moved),
                MigrateOutput::Done { .. } => {}
            }
        }
        let Some(link) = waiting else {
            // Nothing to wait for and no reply: the client lost track (cannot happen).
            return (
                Reply::Error("IOERR error or timeout reading to target instance".into()),
                Vec::new(),
            );
        };
        let Some((s, _)) = links.get_mut(&link) else {
            mc.handle_closed(link, now());
            continue;
        };
        let left = mc
            .poll_timeout()
            .map(|t| Duration::from_millis(t.since(now()).max(1)))
            .unwrap_or(timeout);
        let _ = s.set_read_timeout(Some(left.max(Duration::from_millis(1))));
        match s.read_io(&mut buf) {
            Ok(0) => {
                links.remove(&link);
                mc.handle_closed(link, now());
            }
            Ok(n) => mc.handle_bytes(link, &buf[..n], now()),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                mc.handle_timeout(now());
            }
            Err(_) => {
                links.remove(&link);
                mc.handle_closed(link, now());
            }
        }
    }
}

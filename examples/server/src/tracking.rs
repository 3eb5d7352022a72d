//! Client-side caching: `CLIENT TRACKING` in its default mode, with `REDIRECT`, `NOLOOP`,
//! `OPTIN` / `OPTOUT` and `CLIENT CACHING`, `CLIENT GETREDIR`, `CLIENT TRACKINGINFO` (Redis 7.0
//! src/tracking.c: `enableTracking`, `trackingRememberKeys`, `trackingInvalidateKey`,
//! `sendTrackingMessage`, `trackingInvalidateKeysOnFlush`).
//!
//! The server remembers, per key name (over every database, as Redis), the tracking clients
//! that read it with a read-only command; a write to the key sends each of them one
//! invalidation and forgets them for that key. A FLUSHDB / FLUSHALL / SWAPDB sends every
//! tracking client a null invalidation ("everything"). Where the message goes and how it is
//! encoded follows `sendTrackingMessage`: to the REDIRECT client if set (a missing one marks
//! the redirect broken and tells a RESP3 client `tracking-redir-broken`), as a RESP3 push
//! `invalidate`, or for a RESP2 redirect target in Pub/Sub mode as a `message` on
//! `__redis__:invalidate`; a RESP2 client without redirect gets nothing. Messages are sent
//! through the receiving connection's I/O thread, so a client's own invalidation arrives
//! after its reply.
//!
//! BCAST mode (`trackingRememberKeyToBroadcast`, `trackingBroadcastInvalidationMessages`):
//! a client registers prefixes (none: every key); a modified key matching a prefix is kept
//! for it, and once the command finished each client of the prefix gets one message with the
//! prefix's keys in order (NOLOOP leaves out those it modified itself). Redis sends them once
//! per event-loop turn, so a pipeline's keys may come in fewer messages there than here (a
//! transaction's come in one, as there).
//!
//! Keys removed by expiry (`crate::repl::propagate_expired`) or eviction invalidate too, as
//! modified by no client (NOLOOP does not filter them). Inside EXEC the messages wait for the
//! end of the transaction (`crate::commands`), as Valkey sends them once the execution unit
//! ended.
//!
//! `tracking-table-max-keys` bounds the table of keys (Valkey `trackingLimitUsedSlots`):
//! after each command and on the timer tick, keys over the limit are invalidated (their
//! clients told, as for a write by no client) with Valkey's effort rule (100 keys a call,
//! 100 more each call that ends still over). INFO has `tracking_clients` and
//! `tracking_total_keys / items / prefixes`.

use crate::client::{Args, Delivery};
use crate::resp::Out;
use crate::server::Shared;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// One BCAST prefix: its clients and the keys modified since the last send, with who
/// modified each last (for NOLOOP).
#[derive(Debug, Default)]
struct Bcast {
    clients: BTreeSet<u64>,
    keys: BTreeMap<Vec<u8>, Option<u64>>,
}

/// One tracking client.
#[derive(Debug, Clone)]
struct Tracker {
    redirect: Option<u64>,
    bcast: bool,
    prefixes: Vec<Vec<u8>>,
    noloop: bool,
    optin: bool,
    optout: bool,
    broken: bool,
}

/// The tracking table and the tracking clients (under the state lock).
#[derive(Debug)]
pub struct Tracking {
    clients: HashMap<u64, Tracker>,
    keys: HashMap<Vec<u8>, HashSet<u64>>,
    prefixes: BTreeMap<Vec<u8>, Bcast>,
    /// Invalidations to send once the command finished: (client, keys or `None` for all).
    outbox: Vec<(u64, Option<Vec<Vec<u8>>>)>,
    /// The client running the current command (NOLOOP).
    pub current: Option<u64>,
    /// `tracking-table-max-keys` (0: no limit).
    max_keys: u64,
    /// Calls of [`Tracking::limit`] in a row that ended over the limit (its effort grows).
    over_limit_calls: u32,
    /// (key, client) pairs in the table (Valkey `TrackingTableTotalItems`).
    items: u64,
}

/// Valkey's default `tracking-table-max-keys`.
pub const DEFAULT_MAX_KEYS: u64 = 1_000_000;

impl Default for Tracking {
    fn default() -> Self {
        Tracking {
            clients: HashMap::new(),
            keys: HashMap::new(),
            prefixes: BTreeMap::new(),
            outbox: Vec::new(),
            current: None,
            max_keys: DEFAULT_MAX_KEYS,
            over_limit_calls: 0,
            items: 0,
        }
    }
}

impl Tracking {
    /// `tracking-table-max-keys` in force.
    pub fn max_keys(&self) -> u64 {
        self.max_keys
    }

    /// CONFIG SET `tracking-table-max-keys` (0: no limit); the table is brought under it by
    /// the next [`Tracking::limit`].
    pub fn set_max_keys(&mut self, n: u64) {
        self.max_keys = n;
    }

    /// INFO `tracking_clients`, `tracking_total_keys`, `tracking_total_items`,
    /// `tracking_total_prefixes`.
    pub fn counts(&self) -> (usize, usize, u64, usize) {
        (
            self.clients.len(),
            self.keys.len(),
            self.items,
            self.prefixes.len(),
        )
    }

    /// Invalidates keys of the table while it holds more than `tracking-table-max-keys`
    /// (Valkey `trackingLimitUsedSlots`): at most 100 · (calls in a row over the limit + 1)
    /// keys a call, each as written by no client. The messages go with the next
    /// [`Tracking::send`].
    pub fn limit(&mut self) {
        if self.max_keys == 0 || self.keys.len() as u64 <= self.max_keys {
            self.over_limit_calls = 0;
            return;
        }
        let effort = 100 * (self.over_limit_calls as usize + 1);
        let current = self.current.take();
        let victims: Vec<Vec<u8>> = self
            .keys
            .keys()
            .take(effort.min(self.keys.len() - self.max_keys as usize))
            .cloned()
            .collect();
        for k in victims {
            self.invalidate_tracked(&k);
        }
        self.current = current;
        if self.keys.len() as u64 <= self.max_keys {
            self.over_limit_calls = 0;
        } else {
            self.over_limit_calls += 1;
        }
    }

    /// Whether `id` tracks.
    pub fn tracks(&self, id: u64) -> bool {
        self.clients.contains_key(&id)
    }

    /// Remembers that `id` read `keys` (Redis `trackingRememberKeys`); `caching` is the
    /// client's CLIENT CACHING for this command.
    pub fn remember<'k>(
        &mut self,
        id: u64,
        caching: Option<bool>,
        keys: impl Iterator<Item = &'k [u8]>,
    ) {
        let Some(t) = self.clients.get(&id) else {
            return;
        };
        if t.bcast {
            return;
        }
        if (t.optin && caching != Some(true)) || (t.optout && caching == Some(false)) {
            return;
        }
        for k in keys {
            if self.keys.entry(k.to_vec()).or_default().insert(id) {
                self.items += 1;
            }
        }
    }

    /// `key` was modified (Redis `trackingInvalidateKey`).
    pub fn invalidate(&mut self, key: &[u8]) {
        for (p, b) in self.prefixes.iter_mut() {
            if key.starts_with(p) {
                b.keys.insert(key.to_vec(), self.current);
            }
        }
        if !self.keys.is_empty() {
            self.invalidate_tracked(key);
        }
    }

    /// The clients that read `key` are told (and forgotten for it).
    fn invalidate_tracked(&mut self, key: &[u8]) {
        let Some(ids) = self.keys.remove(key) else {
            return;
        };
        self.items -= ids.len() as u64;
        for id in ids {
            let Some(t) = self.clients.get(&id) else {
                continue;
            };
            if t.bcast || (t.noloop && self.current == Some(id)) {
                continue;
            }
            self.outbox.push((id, Some(vec![key.to_vec()])));
        }
    }

    /// Every key was invalidated (a flush, Redis `trackingInvalidateKeysOnFlush`).
    pub fn invalidate_all(&mut self) {
        self.keys.clear();
        self.items = 0;
        let ids: Vec<u64> = self.clients.keys().copied().collect();
        self.outbox.extend(ids.into_iter().map(|id| (id, None)));
    }

    /// A connection closed: it tracks no more (its table entries go lazily, as Redis).
    pub fn client_closed(&mut self, id: u64) {
        self.disable(id);
    }

    /// Client `id` tracks no more (CLIENT TRACKING OFF, RESET, a close).
    pub fn disable(&mut self, id: u64) {
        if let Some(t) = self.clients.remove(&id) {
            for p in &t.prefixes {
                if let Some(b) = self.prefixes.get_mut(p) {
                    b.clients.remove(&id);
                    if b.clients.is_empty() {
                        self.prefixes.remove(p);
                    }
                }
            }
        }
    }

    /// The BCAST messages of the keys modified since the last send.
    fn broadcast(&mut self) {
        for b in self.prefixes.values_mut() {
            if b.keys.is_empty() {
                continue;
            }
            for &id in &b.clients {
                let noloop = self.clients.get(&id).is_some_and(|t| t.noloop);
                let keys: Vec<Vec<u8>> = b
                    .keys
                    .iter()
                    .filter(|(_, by)| !(noloop && **by == Some(id)))
                    .map(|(k, _)| k.clone())
                    .collect();
                if !keys.is_empty() {
                    self.outbox.push((id, Some(keys)));
                }
            }
            b.keys.clear();
        }
    }

    /// Sends what the last command invalidated.
    pub fn send(&mut self, shared: &Shared) {
        if !self.prefixes.is_empty() {
            self.broadcast();
        }
        if self.outbox.is_empty() {
            return;
        }
        for (id, key) in std::mem::take(&mut self.outbox) {
            let Some(t) = self.clients.get_mut(&id) else {
                continue;
            };
            let (target, redirected) = match t.redirect {
                Some(r) if shared.locate(r).is_some() => (r, true),
                Some(r) => {
                    t.broken = true;
                    deliver(shared, id, Delivery::RedirectBroken(r));
                    continue;
                }
                None => (id, false),
            };
            deliver(
                shared,
                target,
                Delivery::Invalidate {
                    keys: key,
                    redirected,
                },
            );
        }
    }
}

fn deliver(shared: &Shared, client_id: u64, what: Delivery) {
    let Some((thread, token)) = shared.locate(client_id) else {
        return;
    };
    if let Some(h) = shared.io.get().and_then(|io| io.get(thread)) {
        h.send(crate::net::ToIo::Deliver {
            token,
            client_id,
            what,
        });
    }
}

/// Encodes an invalidation for a connection in protocol `proto`, `subscribed` or not
/// (`sendTrackingMessage`); `None` when nothing can be sent to it.
pub fn encode_invalidation(
    out: &mut Out,
    keys: Option<&[Vec<u8>]>,
    redirected: bool,
    subscribed: bool,
) {
    let proto = out.proto;
    if proto >= 3 {
        out.buf.extend_from_slice(b">2\r\n$10\r\ninvalidate\r\n");
    } else if redirected && subscribed {
        out.buf
            .extend_from_slice(b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n");
    } else {
        return;
    }
    match keys {
        Some(keys) => {
            out.array(keys.len());
            for k in keys {
                out.bulk(k);
            }
        }
        None => out.null(),
    }
}

fn eq(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

/// `CLIENT TRACKING ON|OFF [REDIRECT id] [BCAST] [PREFIX p ...] [OPTIN] [OPTOUT] [NOLOOP]`.
pub fn tracking_cmd(shared: &Shared, t: &mut Tracking, id: u64, args: &Args<'_>, out: &mut Out) {
    let on = match args.opt(2) {
        Some(v) if eq(v, "on") => true,
        Some(v) if eq(v, "off") => false,
        _ => {
            out.error("ERR syntax error");
            return;
        }
    };
    let mut tr = Tracker {
        redirect: None,
        bcast: false,
        prefixes: Vec::new(),
        noloop: false,
        optin: false,
        optout: false,
        broken: false,
    };
    let mut i = 3;
    while i < args.len() {
        let a = args.get(i);
        if eq(a, "redirect") && i + 1 < args.len() {
            let Some(r) = std::str::from_utf8(args.get(i + 1))
                .ok()
                .and_then(|s| s.parse::<u64>().ok())
            else {
                out.error("ERR value is not an integer or out of range");
                return;
            };
            if tr.redirect.is_some() {
                out.error("ERR A client can only redirect to a single other client");
                return;
            }
            tr.redirect = Some(r);
            i += 2;
        } else if eq(a, "bcast") {
            tr.bcast = true;
            i += 1;
        } else if eq(a, "prefix") && i + 1 < args.len() {
            tr.prefixes.push(args.get(i + 1).to_vec());
            i += 2;
        } else if eq(a, "optin") {
            tr.optin = true;
            i += 1;
        } else if eq(a, "optout") {
            tr.optout = true;
            i += 1;
        } else if eq(a, "noloop") {
            tr.noloop = true;
            i += 1;
        } else {
            out.error("ERR syntax error");
            return;
        }
    }
    if !on {
        t.disable(id);
        out.ok();
        return;
    }
    if !tr.bcast && !tr.prefixes.is_empty() {
        out.error("ERR PREFIX option requires BCAST mode to be enabled");
        return;
    }
    if tr.bcast && (tr.optin || tr.optout) {
        out.error("ERR OPTIN and OPTOUT are not compatible with BCAST");
        return;
    }
    if let Some(old) = t.clients.get(&id) {
        if old.bcast != tr.bcast {
            out.error("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.");
            return;
        }
    }
    // Redis `checkPrefixCollisionsOrReply`: against the client's prefixes, then the given ones.
    let clash = |a: &[u8], b: &[u8]| a.starts_with(b) || b.starts_with(a);
    let text = |p: &[u8]| String::from_utf8_lossy(p).into_owned();
    for (i, p) in tr.prefixes.iter().enumerate() {
        if let Some(old) = t.clients.get(&id) {
            if let Some(q) = old
                .prefixes
                .iter()
                .find(|q| q.as_slice() != p.as_slice() && clash(p, q))
            {
                out.error(&format!("ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.", text(p), text(q)));
                return;
            }
        }
        if let Some(q) = tr.prefixes[i + 1..].iter().find(|q| clash(p, q)) {
            out.error(&format!("ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.", text(p), text(q)));
            return;
        }
    }
    if tr.bcast
        && tr.prefixes.is_empty()
        && t.clients.get(&id).is_none_or(|o| o.prefixes.is_empty())
    {
        tr.prefixes.push(Vec::new());
    }
    if tr.optin && tr.optout {
        out.error("ERR You can't use both OPTIN and OPTOUT");
        return;
    }
    if let Some(r) = tr.redirect {
        if r == id {
            out.error("ERR A client can't redirect to itself");
            return;
        }
        if shared.locate(r).is_none() {
            out.error("ERR The client ID you want redirect to does not exist");
            return;
        }
    }
    if let Some(old) = t.clients.get(&id) {
        // Valkey `clientCommand`: only a direct switch between OPTIN and OPTOUT is refused.
        if (tr.optin && old.optout) || (tr.optout && old.optin) {
            out.error("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.");
            return;
        }
    }
    if let Some(old) = t.clients.get(&id) {
        for p in &old.prefixes {
            if !tr.prefixes.contains(p) {
                tr.prefixes.push(p.clone());
            }
        }
    }
    for p in &tr.prefixes {
        t.prefixes.entry(p.clone()).or_default().clients.insert(id);
    }
    t.clients.insert(id, tr);
    out.ok();
}

/// `CLIENT CACHING YES|NO`: the client's choice for its next command, or the error line.
///
/// # Errors
/// Redis's texts: not tracking in OPTIN / OPTOUT mode, or the wrong one of YES / NO.
pub fn caching_cmd(t: &Tracking, id: u64, args: &Args<'_>) -> Result<bool, &'static str> {
    // Tracking first, then the argument and its mode (Valkey `clientCommand` "caching").
    let Some(tr) = t.clients.get(&id) else {
        return Err("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled");
    };
    match args.opt(2) {
        Some(v) if eq(v, "yes") && tr.optin => Ok(true),
        Some(v) if eq(v, "yes") => {
            Err("ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.")
        }
        Some(v) if eq(v, "no") && tr.optout => Ok(false),
        Some(v) if eq(v, "no") => {
            Err("ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.")
        }
        _ => Err("ERR syntax error"),
    }
}

/// `CLIENT GETREDIR`: -1 when not tracking, 0 without redirect, else the redirect id.
pub fn getredir(t: &Tracking, id: u64) -> i64 {
    match t.clients.get(&id) {
        None => -1,
        Some(tr) => tr.redirect.map_or(0, |r| r as i64),
    }
}

/// `CLIENT TRACKINGINFO` (Redis 7.0 `clientTrackingInfoCommand`): a map of `flags`,
/// `redirect`, `prefixes`.
pub fn trackinginfo(t: &Tracking, id: u64, caching: Option<bool>, out: &mut Out) {
    let tr = t.clients.get(&id);
    let mut flags: Vec<&str> = Vec::new();
    match tr {
        None => flags.push("off"),
        Some(tr) => {
            flags.push("on");
            if tr.bcast {
                flags.push("bcast");
            }
            if tr.optin {
                flags.push("optin");
                if caching == Some(true) {
                    flags.push("caching-yes");
                }
            }
            if tr.optout {
                flags.push("optout");
                if caching == Some(false) {
                    flags.push("caching-no");
                }
            }
            if tr.noloop {
                flags.push("noloop");
            }
            if tr.broken {
                flags.push("broken_redirect");
            }
        }
    }
    out.map(3);
    out.bulk(b"flags");
    out.set(flags.len());
    for f in flags {
        out.bulk(f.as_bytes());
    }
    out.bulk(b"redirect");
    out.int(getredir(t, id));
    out.bulk(b"prefixes");
    let mut prefixes: Vec<&Vec<u8>> = tr.map(|t| t.prefixes.iter().collect()).unwrap_or_default();
    prefixes.sort();
    out.array(prefixes.len());
    for p in prefixes {
        out.bulk(p);
    }
}

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
//! Left out: BCAST mode and PREFIX (refused with an error naming them), the
//! `tracking-table-max-keys` limit, and invalidation of keys removed by expiry or eviction.

use crate::client::{Args, Delivery};
use crate::resp::Out;
use crate::server::Shared;
use std::collections::{HashMap, HashSet};

/// One tracking client.
#[derive(Debug, Clone, Copy)]
struct Tracker {
    redirect: Option<u64>,
    noloop: bool,
    optin: bool,
    optout: bool,
    broken: bool,
}

/// The tracking table and the tracking clients (under the state lock).
#[derive(Debug, Default)]
pub struct Tracking {
    clients: HashMap<u64, Tracker>,
    keys: HashMap<Vec<u8>, HashSet<u64>>,
    /// Invalidations to send once the command finished: (client, key or `None` for all).
    outbox: Vec<(u64, Option<Vec<u8>>)>,
    /// The client running the current command (NOLOOP).
    pub current: Option<u64>,
}

impl Tracking {
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
        if (t.optin && caching != Some(true)) || (t.optout && caching == Some(false)) {
            return;
        }
        for k in keys {
            self.keys.entry(k.to_vec()).or_default().insert(id);
        }
    }

    /// `key` was modified (Redis `trackingInvalidateKey`).
    pub fn invalidate(&mut self, key: &[u8]) {
        if self.keys.is_empty() {
            return;
        }
        let Some(ids) = self.keys.remove(key) else {
            return;
        };
        for id in ids {
            let Some(t) = self.clients.get(&id) else {
                continue;
            };
            if t.noloop && self.current == Some(id) {
                continue;
            }
            self.outbox.push((id, Some(key.to_vec())));
        }
    }

    /// Every key was invalidated (a flush, Redis `trackingInvalidateKeysOnFlush`).
    pub fn invalidate_all(&mut self) {
        self.keys.clear();
        let ids: Vec<u64> = self.clients.keys().copied().collect();
        self.outbox.extend(ids.into_iter().map(|id| (id, None)));
    }

    /// A connection closed: it tracks no more (its table entries go lazily, as Redis).
    pub fn client_closed(&mut self, id: u64) {
        self.clients.remove(&id);
    }

    /// Sends what the last command invalidated.
    pub fn send(&mut self, shared: &Shared) {
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
            deliver(shared, target, Delivery::Invalidate { key, redirected });
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
pub fn encode_invalidation(out: &mut Out, key: Option<&[u8]>, redirected: bool, subscribed: bool) {
    let proto = out.proto;
    if proto >= 3 {
        out.buf.extend_from_slice(b">2\r\n$10\r\ninvalidate\r\n");
    } else if redirected && subscribed {
        out.buf
            .extend_from_slice(b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n");
    } else {
        return;
    }
    match key {
        Some(k) => {
            out.array(1);
            out.bulk(k);
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
        } else if eq(a, "bcast") || eq(a, "prefix") {
            out.error("ERR CLIENT TRACKING BCAST and PREFIX are not supported by this server");
            return;
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
        t.clients.remove(&id);
        out.ok();
        return;
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
        if (old.optin || old.optout) != (tr.optin || tr.optout) || old.optin != tr.optin {
            out.error("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.");
            return;
        }
    }
    t.clients.insert(id, tr);
    out.ok();
}

/// `CLIENT CACHING YES|NO`: the client's choice for its next command, or the error line.
///
/// # Errors
/// Redis's texts: not tracking in OPTIN / OPTOUT mode, or the wrong one of YES / NO.
pub fn caching_cmd(t: &Tracking, id: u64, args: &Args<'_>) -> Result<bool, &'static str> {
    let yes = match args.opt(2) {
        Some(v) if eq(v, "yes") => true,
        Some(v) if eq(v, "no") => false,
        _ => return Err("ERR syntax error"),
    };
    let Some(tr) = t.clients.get(&id).filter(|tr| tr.optin || tr.optout) else {
        return Err("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled");
    };
    if yes && !tr.optin {
        return Err("ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.");
    }
    if !yes && !tr.optout {
        return Err("ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.");
    }
    Ok(yes)
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
    out.array(0);
}

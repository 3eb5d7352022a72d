//! Operations over every client connection: `CLIENT LIST`, `CLIENT KILL` (Valkey
//! `clientListCommand` / `clientKillCommand`, src/networking.c) and `CLIENT PAUSE` /
//! `UNPAUSE` (`pauseActions`).
//!
//! A connection lives on one I/O thread and only that thread touches it, so LIST and KILL are
//! a fan-out: the command leaves its reply's place open ([`ClientCtx::hold_reply`]), every I/O
//! thread visits its own connections when it reads the job from its channel
//! ([`crate::net::ToIo::Fanout`]), and the last thread to finish sends the reply to the
//! requester's place. Nothing is shared per command: a server with no LIST or KILL running
//! pays nothing for them.

use crate::client::{Args, ClientCtx, Delivery};
use crate::resp::Out;
use crate::server::Shared;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// What the I/O thread knows of a connection and the session does not: the socket and the
/// buffers (CLIENT INFO / LIST fields `fd`, `qbuf`, `qbuf-free`, `rbs`, `omem`, `tot-mem`,
/// `events`). Sizes in bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct ConnFacts {
    /// The socket's file descriptor.
    pub fd: i32,
    /// Bytes in the query buffer not yet parsed into commands.
    pub qbuf: usize,
    /// Free capacity of the query buffer.
    pub qbuf_free: usize,
    /// Capacity of the query buffer (`rbs`).
    pub rbs: usize,
    /// Capacity of the output buffer (`omem`).
    pub omem: usize,
    /// Output waits for the socket to be writable (`events=rw`).
    pub writing: bool,
    /// The connection closes once its output is written (flag `c`).
    pub closing: bool,
}

/// `CLIENT LIST` / `CLIENT KILL` `TYPE` values (Valkey `getClientTypeByName`; `slave` is the
/// old name of `replica`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientType {
    /// `normal`: an ordinary client.
    Normal,
    /// `replica` (or `slave`): a replica's replication link.
    Replica,
    /// `pubsub`: a client with subscriptions.
    Pubsub,
    /// `master` (or `primary`): our link to our primary; this server applies its stream
    /// without a client connection, so no connection has this type.
    Primary,
}

impl ClientType {
    fn parse(s: &[u8]) -> Option<ClientType> {
        let s = String::from_utf8_lossy(s).to_ascii_lowercase();
        match s.as_str() {
            "normal" => Some(ClientType::Normal),
            "replica" | "slave" => Some(ClientType::Replica),
            "pubsub" => Some(ClientType::Pubsub),
            "master" | "primary" => Some(ClientType::Primary),
            _ => None,
        }
    }

    /// The type of a session (Valkey `getClientType`: a replica link first, then pubsub).
    pub fn of(c: &ClientCtx) -> ClientType {
        if c.is_replica_link {
            ClientType::Replica
        } else if c.subscriptions() > 0 {
            ClientType::Pubsub
        } else {
            ClientType::Normal
        }
    }
}

/// The filters of `CLIENT LIST [TYPE t] [ID id ...]` and `CLIENT KILL <filter> <value> ...`.
#[derive(Debug, Default, Clone)]
pub struct Filter {
    ids: Option<Vec<u64>>,
    kind: Option<ClientType>,
    addr: Option<String>,
    laddr: Option<String>,
    user: Option<String>,
    /// SKIPME: the requester's id, not matched.
    skip: Option<u64>,
    /// MAXAGE: only clients older than this many seconds.
    max_age_s: Option<u64>,
    /// Only clients that logged in as an older incarnation of `user` (`crate::acl`).
    incarnation_below: Option<u64>,
    /// Only clients of `user` with a subscription this (changed) user may no longer have.
    lost_channels: Option<std::sync::Arc<ferrocluster_acl::User>>,
}

impl Filter {
    fn matches(&self, c: &ClientCtx, now_ms: u64) -> bool {
        if self.skip == Some(c.id) {
            return false;
        }
        if let Some(ids) = &self.ids {
            if !ids.contains(&c.id) {
                return false;
            }
        }
        if let Some(k) = self.kind {
            if ClientType::of(c) != k {
                return false;
            }
        }
        let addr_is = |want: &Option<String>, got: Option<std::net::SocketAddr>| {
            want.as_ref()
                .is_none_or(|w| got.is_some_and(|a| a.to_string() == *w))
        };
        if !addr_is(&self.addr, c.addr) || !addr_is(&self.laddr, c.laddr) {
            return false;
        }
        if self
            .user
            .as_ref()
            .is_some_and(|u| u.as_bytes() != c.user.as_slice())
            || self
                .incarnation_below
                .is_some_and(|n| c.user_incarnation >= n)
        {
            return false;
        }
        if let Some(u) = &self.lost_channels {
            // Valkey `ACLShouldKillPubsubClient`: a channel by pattern matching, a pattern
            // literally.
            let kept = c.channels.iter().all(|ch| u.channel_allowed(ch, false))
                && c.shard_channels
                    .iter()
                    .all(|ch| u.channel_allowed(ch, false))
                && c.patterns.iter().all(|p| u.channel_allowed(p, true));
            if kept {
                return false;
            }
        }
        if let Some(max) = self.max_age_s {
            if now_ms.saturating_sub(c.created_ms) / 1000 < max {
                return false;
            }
        }
        true
    }
}

/// What a fan-out does on each connection.
#[derive(Debug)]
enum Job {
    /// Collect CLIENT LIST lines.
    List,
    /// Close the matching connections; `old_style` is `CLIENT KILL addr:port` (replies OK or
    /// `No such client` instead of a count).
    Kill { old_style: bool },
}

/// Where the reply goes: the requester's connection and the place it left open.
#[derive(Debug, Clone, Copy)]
struct ReplyTo {
    io_thread: usize,
    token: usize,
    client_id: u64,
    request: u64,
    proto: u8,
}

/// One CLIENT LIST / CLIENT KILL running on every I/O thread.
#[derive(Debug)]
pub struct Fanout {
    job: Job,
    filter: Filter,
    /// `None`: nobody waits for a reply (the ACL closing a removed user's clients).
    reply: Option<ReplyTo>,
    left: AtomicUsize,
    lines: Mutex<Vec<(u64, String)>>,
    killed: AtomicU64,
}

/// Reply places of fan-outs are numbered apart from the cluster's deferred replies (whose
/// ids count up from 0) by the top bit.
const FANOUT_ID_BIT: u64 = 1 << 63;
static NEXT_FANOUT: AtomicU64 = AtomicU64::new(0);

impl Fanout {
    /// Whether this connection matches; a KILL marks it for closing (after what it already
    /// has queued, as Valkey's `CLIENT_CLOSE_AFTER_REPLY` for the caller itself).
    /// `line` formats a CLIENT LIST line for it.
    pub fn visit(&self, c: &ClientCtx, now_ms: u64, line: impl FnOnce() -> String) -> bool {
        if !self.filter.matches(c, now_ms) {
            return false;
        }
        match self.job {
            Job::List => self.lines.lock().push((c.id, line())),
            Job::Kill { .. } => {
                self.killed.fetch_add(1, Ordering::Relaxed);
            }
        }
        true
    }

    /// Whether a match is to be closed.
    pub fn kills(&self) -> bool {
        matches!(self.job, Job::Kill { .. })
    }

    /// One I/O thread finished its connections; the last one sends the reply.
    pub fn part_done(&self, shared: &Shared) {
        if self.left.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        let Some(reply) = self.reply else {
            return;
        };
        let mut out = Out::new();
        out.proto = reply.proto;
        match self.job {
            Job::List => {
                let mut lines = std::mem::take(&mut *self.lines.lock());
                // Valkey 9.1 lists clients in creation (ID) order, also under `ID a b ...`:
                // each matching client once. (Redis 7.0 answers `ID` in the order asked,
                // repeating a repeated ID; we follow Valkey.)
                lines.sort_unstable_by_key(|(id, _)| *id);
                let mut text = String::new();
                for (_, l) in lines {
                    text.push_str(&l);
                    text.push('\n');
                }
                out.verbatim(text.as_bytes());
            }
            Job::Kill { old_style } => {
                let n = self.killed.load(Ordering::Relaxed);
                if !old_style {
                    out.int(n as i64);
                } else if n == 0 {
                    out.error("ERR No such client");
                } else {
                    out.ok();
                }
            }
        }
        deliver(
            shared,
            reply,
            Delivery::Reply {
                id: reply.request,
                bytes: out.buf,
            },
        );
    }
}

fn deliver(shared: &Shared, to: ReplyTo, what: Delivery) {
    if let Some(h) = shared.io.get().and_then(|io| io.get(to.io_thread)) {
        h.send(crate::net::ToIo::Deliver {
            token: to.token,
            client_id: to.client_id,
            what,
        });
    }
}

/// Starts a fan-out for `client`'s command: its reply's place is held in `out` and filled
/// when every I/O thread has visited its connections. A session without a connection (the
/// replication applier) gets `None` back and answers nothing.
fn start(shared: &Shared, client: &mut ClientCtx, out: &Out, job: Job, filter: Filter) {
    let Some(io) = shared.io.get() else {
        return;
    };
    if client.io_thread >= io.len() {
        return;
    }
    let request = FANOUT_ID_BIT | NEXT_FANOUT.fetch_add(1, Ordering::Relaxed);
    client.hold_reply(out.buf.len(), request);
    let fan = std::sync::Arc::new(Fanout {
        job,
        filter,
        reply: Some(ReplyTo {
            io_thread: client.io_thread,
            token: client.token,
            client_id: client.id,
            request,
            proto: out.proto,
        }),
        left: AtomicUsize::new(io.len()),
        lines: Mutex::new(Vec::new()),
        killed: AtomicU64::new(0),
    });
    for h in io {
        h.send(crate::net::ToIo::Fanout(std::sync::Arc::clone(&fan)));
    }
}

/// Closes at once the Pub/Sub connections of user `name` that hold a subscription `user`,
/// its new rules, no longer allows (ACL SETUSER: Valkey `ACLKillPubsubClientsIfNeeded`).
/// Nothing is replied.
pub fn close_lost_subscribers(shared: &Shared, user: ferrocluster_acl::User) {
    let name = String::from_utf8_lossy(user.name()).into_owned();
    fan_out_quiet(
        shared,
        Filter {
            user: Some(name),
            lost_channels: Some(std::sync::Arc::new(user)),
            ..Filter::default()
        },
    );
}

/// Closes at once, on every I/O thread, the connections logged in as user `name` before its
/// incarnation `incarnation` (ACL DELUSER / LOAD removed it: Valkey
/// `ACLFreeUserAndKillClients`). Nothing is replied.
pub fn close_user(shared: &Shared, name: &[u8], incarnation: u64) {
    fan_out_quiet(
        shared,
        Filter {
            user: Some(String::from_utf8_lossy(name).into_owned()),
            incarnation_below: Some(incarnation),
            ..Filter::default()
        },
    );
}

/// A KILL fan-out that replies to nobody.
fn fan_out_quiet(shared: &Shared, filter: Filter) {
    let Some(io) = shared.io.get() else {
        return;
    };
    let fan = std::sync::Arc::new(Fanout {
        job: Job::Kill { old_style: false },
        filter,
        reply: None,
        left: AtomicUsize::new(io.len()),
        lines: Mutex::new(Vec::new()),
        killed: AtomicU64::new(0),
    });
    for h in io {
        h.send(crate::net::ToIo::Fanout(std::sync::Arc::clone(&fan)));
    }
}

fn eq(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

/// `CLIENT LIST [filter ...]`: every client matching the filters ([`parse_filters`]; `SKIPME`
/// defaults to no), once each, in ID order.
///
/// Valkey 9.1 and Redis 7.0 differ here, and we follow Valkey: Redis 7.0 takes either `TYPE t`
/// or `ID id ...` alone, answers `ID` in the order asked with a repeated ID repeated, and says
/// `Invalid client ID` where Valkey says `syntax error` or `client-id should be greater than
/// 0` (checked side by side in `tests/operator_view.rs`).
pub fn list(
    shared: &Shared,
    users: &ferrocluster_acl::Users,
    client: &mut ClientCtx,
    args: &Args<'_>,
    out: &mut Out,
) {
    if let Some(filter) = parse_filters(users, client, args, false, out) {
        start(shared, client, out, Job::List, filter);
    }
}

/// `CLIENT KILL addr:port` (old form: `+OK` or `No such client`) or `CLIENT KILL <filter>
/// ...` ([`parse_filters`]; `SKIPME` defaults to yes): closes the matching clients and
/// answers how many.
pub fn kill(
    shared: &Shared,
    users: &ferrocluster_acl::Users,
    client: &mut ClientCtx,
    args: &Args<'_>,
    out: &mut Out,
) {
    if args.len() == 3 {
        let filter = Filter {
            addr: Some(String::from_utf8_lossy(args.get(2)).into_owned()),
            ..Filter::default()
        };
        start(shared, client, out, Job::Kill { old_style: true }, filter);
        return;
    }
    if let Some(filter) = parse_filters(users, client, args, true, out) {
        start(shared, client, out, Job::Kill { old_style: false }, filter);
    }
}

/// The client filters of CLIENT LIST and CLIENT KILL from `args[2..]`, as Valkey 9.1 parses
/// them for both (`parseClientFilters`): `ID id [id ...]` (IDs up to the next argument that
/// is not an integer; `ID` again adds more), `TYPE normal|master|replica|pubsub` (the last
/// one counts), `ADDR ip:port`, `LADDR ip:port`, `USER name`, `SKIPME yes|no` (default
/// `skipme`) and `MAXAGE seconds` (clients older than that). `None` after writing the error
/// Valkey answers (`syntax error`, `client-id should be greater than 0`, `Unknown client
/// type '<t>'`, `No such user '<u>'`, `maxage should be greater than 0`, `maxage is not an
/// integer or out of range`).
fn parse_filters(
    users: &ferrocluster_acl::Users,
    client: &ClientCtx,
    args: &Args<'_>,
    skipme: bool,
    out: &mut Out,
) -> Option<Filter> {
    let mut filter = Filter {
        skip: skipme.then_some(client.id),
        ..Filter::default()
    };
    let mut i = 2;
    while i < args.len() {
        let opt = args.get(i);
        if i + 1 >= args.len() {
            out.error("ERR syntax error");
            return None;
        }
        let v = args.get(i + 1);
        let text = || String::from_utf8_lossy(v).into_owned();
        if eq(opt, "id") {
            i += 1;
            let start = i;
            while i < args.len() {
                let Some(id) = parse_i64(args.get(i)) else {
                    break;
                };
                if id <= 0 {
                    out.error("ERR client-id should be greater than 0");
                    return None;
                }
                filter.ids.get_or_insert_with(Vec::new).push(id as u64);
                i += 1;
            }
            if i == start {
                out.error("ERR syntax error");
                return None;
            }
            continue;
        }
        if eq(opt, "type") {
            let Some(k) = ClientType::parse(v) else {
                out.error(&format!("ERR Unknown client type '{}'", text()));
                return None;
            };
            filter.kind = Some(k);
        } else if eq(opt, "addr") {
            filter.addr = Some(text());
        } else if eq(opt, "laddr") {
            filter.laddr = Some(text());
        } else if eq(opt, "user") {
            if users.get(v).is_none() {
                out.error(&format!("ERR No such user '{}'", text()));
                return None;
            }
            filter.user = Some(text());
        } else if eq(opt, "skipme") {
            if eq(v, "yes") {
                filter.skip = Some(client.id);
            } else if eq(v, "no") {
                filter.skip = None;
            } else {
                out.error("ERR syntax error");
                return None;
            }
        } else if eq(opt, "maxage") {
            match parse_i64(v) {
                Some(s) if s > 0 => filter.max_age_s = Some(s as u64),
                Some(_) => {
                    out.error("ERR maxage should be greater than 0");
                    return None;
                }
                None => {
                    out.error("ERR maxage is not an integer or out of range");
                    return None;
                }
            }
        } else {
            out.error("ERR syntax error");
            return None;
        }
        i += 2;
    }
    Some(filter)
}

/// An integer argument as Valkey's `string2ll` reads it (no sign `+`, spaces or leading
/// zeros).
fn parse_i64(v: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(v).ok()?;
    if s.starts_with('+') || (s.len() > 1 && s.starts_with('0')) || s.starts_with("-0") {
        return None;
    }
    s.parse().ok()
}

/// The state of `CLIENT PAUSE` (Valkey `pauseActions` for `PAUSE_BY_CLIENT_COMMAND`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientPause {
    /// Unix ms at which the pause ends.
    pub until_ms: u64,
    /// `ALL` (every command waits) rather than `WRITE` (writes and may-replicate commands
    /// wait).
    pub all: bool,
}

impl ClientPause {
    /// Whether a command with these properties waits now. Replica links never wait
    /// (Valkey: "Replicas are never paused").
    pub fn holds(&self, now_ms: u64, write: bool) -> bool {
        now_ms < self.until_ms && (self.all || write)
    }
}

/// `CLIENT PAUSE timeout [WRITE|ALL]` (timeout in ms; a second pause extends, never
/// shortens, and ALL is kept until the end, as Valkey's `pauseActions`).
///
/// # Errors
/// The error line for the reply.
pub fn pause(
    current: Option<ClientPause>,
    args: &Args<'_>,
    now_ms: u64,
) -> Result<ClientPause, &'static str> {
    if args.len() != 3 && args.len() != 4 {
        return Err("ERR syntax error");
    }
    let ms: i64 = std::str::from_utf8(args.get(2))
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or("ERR timeout is not an integer or out of range")?;
    if ms < 0 {
        return Err("ERR timeout is negative");
    }
    let all = match args.opt(3) {
        None => true,
        Some(m) if eq(m, "all") => true,
        Some(m) if eq(m, "write") => false,
        Some(_) => return Err("ERR CLIENT PAUSE mode must be WRITE or ALL"),
    };
    let until = now_ms.saturating_add(ms as u64);
    Ok(match current.filter(|p| p.until_ms > now_ms) {
        Some(p) => ClientPause {
            until_ms: p.until_ms.max(until),
            all: p.all || all,
        },
        None => ClientPause {
            until_ms: until,
            all,
        },
    })
}

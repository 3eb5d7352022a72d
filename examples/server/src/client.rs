//! Per-connection state the commands see, the argument view, and cross-thread deliveries.

use crate::resp::Out;
use crate::server::Shared;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::ops::Range;
use std::sync::Arc;

/// A request's arguments: byte ranges into the connection's read buffer (no copies).
pub struct Args<'a> {
    buf: &'a [u8],
    ranges: &'a [Range<usize>],
}

impl<'a> Args<'a> {
    /// Wraps ranges into `buf`.
    pub fn new(buf: &'a [u8], ranges: &'a [Range<usize>]) -> Args<'a> {
        Args { buf, ranges }
    }

    /// Number of arguments, the command name included.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// Argument `i` (0 is the command name). Panics when out of range; callers check arity
    /// first through the command table.
    pub fn get(&self, i: usize) -> &'a [u8] {
        &self.buf[self.ranges[i].clone()]
    }

    /// Argument `i`, or `None` past the end.
    pub fn opt(&self, i: usize) -> Option<&'a [u8]> {
        self.ranges.get(i).map(|r| &self.buf[r.clone()])
    }

    /// Copies every argument (MULTI queues them).
    pub fn to_owned_vec(&self) -> Vec<Vec<u8>> {
        self.ranges
            .iter()
            .map(|r| self.buf[r.clone()].to_vec())
            .collect()
    }
}

/// What the connection does after a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Go on reading.
    Continue,
    /// Flush the reply and close (QUIT).
    Close,
}

/// Something another thread asks a connection to write.
#[derive(Debug, Clone)]
pub enum Delivery {
    /// A pub/sub message: `kind` is `message` or `smessage`.
    Message {
        /// `message` or `smessage`.
        kind: &'static str,
        /// Channel name.
        channel: Arc<[u8]>,
        /// Payload.
        payload: Arc<[u8]>,
    },
    /// A published message for a pattern subscription (`pmessage`).
    PatternMessage {
        /// The pattern it matched.
        pattern: Arc<[u8]>,
        /// Channel name.
        channel: Arc<[u8]>,
        /// Payload.
        payload: Arc<[u8]>,
    },
    /// Bytes of the replication stream for a replica's connection.
    Raw(Arc<[u8]>),
    /// Close the connection after what is queued (a slot migration link the node closed).
    Close,
    /// The reply of a CLUSTER command or CONFIG SET that waited for its nodes.conf write
    /// (`Output::Reply`): it goes where the command left its place
    /// ([`ClientCtx::hold_reply`]).
    Reply {
        /// The request ([`crate::cluster::ClusterSide`] gave it).
        id: u64,
        /// The encoded reply.
        bytes: Vec<u8>,
    },
    /// The reply of a client blocked on keys (`crate::blocking`), already encoded in its
    /// protocol; the connection reads again.
    Unblock(Arc<[u8]>),
    /// A client-side caching invalidation (`crate::tracking`): one key, or `None` for all;
    /// `redirected`: this connection is another client's REDIRECT target.
    Invalidate {
        /// The keys, or `None` after a flush.
        keys: Option<Vec<Vec<u8>>>,
        /// Sent to a REDIRECT target.
        redirected: bool,
    },
    /// The REDIRECT target of this tracking client is gone (RESP3 push
    /// `tracking-redir-broken`).
    RedirectBroken(u64),
}

impl Delivery {
    /// Encodes the delivery into the connection's output buffer.
    pub fn write_to(&self, out: &mut Out, client: &mut ClientCtx) {
        match self {
            Delivery::Message {
                kind,
                channel,
                payload,
            } => {
                out.push(3);
                out.bulk(kind.as_bytes());
                out.bulk(channel);
                out.bulk(payload);
            }
            Delivery::PatternMessage {
                pattern,
                channel,
                payload,
            } => {
                out.push(4);
                out.bulk(b"pmessage");
                out.bulk(pattern);
                out.bulk(channel);
                out.bulk(payload);
            }
            Delivery::Raw(b) => out.buf.extend_from_slice(b),
            Delivery::Unblock(b) => {
                // Valkey `updateStatsOnUnblock`: the blocked command counts now.
                client.blocked = false;
                client.cmds += 1;
                out.buf.extend_from_slice(b);
            }
            Delivery::Close => {}
            Delivery::Invalidate { keys, redirected } => crate::tracking::encode_invalidation(
                out,
                keys.as_deref(),
                *redirected,
                client.subscriptions() > 0,
            ),
            Delivery::RedirectBroken(id) => {
                if out.proto >= 3 {
                    out.buf
                        .extend_from_slice(b">2\r\n$21\r\ntracking-redir-broken\r\n");
                    out.int(*id as i64);
                }
            }
            Delivery::Reply { id, bytes } => client.fill_reply(out, *id, bytes),
        }
    }
}

/// One connection's session state.
#[derive(Debug)]
pub struct ClientCtx {
    /// CLIENT ID (unique, increasing).
    pub id: u64,
    /// I/O thread owning the connection.
    pub io_thread: usize,
    /// Slot of the connection in its thread.
    pub token: usize,
    /// Peer address.
    pub addr: Option<SocketAddr>,
    /// Local address.
    pub laddr: Option<SocketAddr>,
    /// CLIENT SETNAME.
    pub name: Option<Vec<u8>>,
    /// CLIENT SETINFO LIB-NAME.
    pub lib_name: Option<Vec<u8>>,
    /// CLIENT SETINFO LIB-VER.
    pub lib_ver: Option<Vec<u8>>,
    /// SELECTed database.
    pub db: usize,
    /// Authenticated (at once when the default user is on and `nopass`).
    pub authed: bool,
    /// The ACL user (`default` until AUTH).
    pub user: Vec<u8>,
    /// The user's incarnation when this client logged in (`crate::acl`).
    pub user_incarnation: u64,
    /// Queued MULTI commands (`Some` inside MULTI).
    pub multi: Option<Vec<Vec<Vec<u8>>>>,
    /// A command queued in MULTI failed (EXEC aborts).
    pub multi_error: bool,
    /// READONLY was sent.
    pub readonly: bool,
    /// ASKING was sent (valid for the next command only).
    pub asking: bool,
    /// SUBSCRIBEd channels.
    pub channels: BTreeSet<Vec<u8>>,
    /// SSUBSCRIBEd shard channels.
    pub shard_channels: BTreeSet<Vec<u8>>,
    /// PSUBSCRIBEd patterns.
    pub patterns: BTreeSet<Vec<u8>>,
    /// Creation time (unix ms).
    pub created_ms: u64,
    /// Waiting for a WAIT reply or blocked on keys (`crate::blocking`).
    pub blocked: bool,
    /// Its next request waits for the end of a pause (`ClientGate::set_paused` keeps the
    /// count).
    pub paused: bool,
    /// Running the commands of an EXEC (a blocking command then answers at once).
    pub in_exec: bool,
    /// Name of the last command (CLIENT INFO `cmd=`).
    pub last_cmd: &'static str,
    /// Bytes read from the connection (CLIENT INFO `tot-net-in`, Valkey 8).
    pub net_in: u64,
    /// Bytes written to the connection (`tot-net-out`).
    pub net_out: u64,
    /// Commands this client ran (`tot-cmds`, Valkey `commands_processed`): counted once a
    /// command ran, a blocked one when it is served or times out, each command inside an
    /// EXEC and the EXEC itself.
    pub cmds: u64,
    /// This connection is a replica's replication stream (REPLCONF/PSYNC).
    pub is_replica_link: bool,
    /// Cluster mode: the command crate's per-connection state (ASKING, READONLY, MULTI, db).
    pub cluster: Option<ferrocluster_command::ClientState>,
    /// This connection sent `CLUSTER SYNCSLOTS` (a slot migration data link, target side).
    pub migration_conn: bool,
    /// Replies that wait for a nodes.conf write, oldest first: (position in the output
    /// buffer, request). Nothing at or after the first position is written until it is
    /// filled, so later replies (pipelined commands, the rest of an EXEC) stay behind it,
    /// as Valkey writes replies only after `clusterBeforeSleep` saved the config.
    pub reply_holes: std::collections::VecDeque<(usize, u64)>,
    /// WATCH was used (its watches are dropped when the connection closes).
    pub watching: bool,
    /// What the I/O thread knows of the connection (socket and buffers), brought up to date
    /// before each command runs.
    pub conn: crate::clients::ConnFacts,
    /// When the connection last brought a request (unix ms; CLIENT LIST `idle=`).
    pub last_io_ms: u64,
    /// MONITOR was sent: the connection receives every command run (`crate::monitor`).
    pub monitor: bool,
    /// CLIENT TRACKING is on: the redirect id, 0 without one (`crate::tracking`).
    pub tracking_redir: Option<i64>,
    /// CLIENT CACHING for the next command (OPTIN / OPTOUT).
    pub caching: Option<bool>,
    /// CLIENT REPLY: which command replies are sent ([`ReplyMode`]).
    pub reply: ReplyMode,
}

/// CLIENT REPLY ON | OFF | SKIP (Redis 7.0 / Valkey 9.1 `CLIENT_REPLY_OFF`,
/// `CLIENT_REPLY_SKIP_NEXT`, `CLIENT_REPLY_SKIP`). Pushes (pub/sub messages, invalidations)
/// are sent in every mode, as Valkey's `CLIENT_PUSHING` replies are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReplyMode {
    /// Every reply is sent (the default).
    #[default]
    On,
    /// No reply is sent until `CLIENT REPLY ON`.
    Off,
    /// `CLIENT REPLY SKIP` ran: the next command's reply is not sent.
    SkipNext,
    /// This command's reply is not sent (the one after `SKIP`).
    Skip,
}

impl ReplyMode {
    /// After a command ran in this mode (the command may have changed it): whether its reply
    /// is dropped, and the mode for the next command (Valkey `resetClient`: SKIP_NEXT becomes
    /// SKIP, SKIP ends).
    pub fn after_command(self) -> (bool, ReplyMode) {
        match self {
            ReplyMode::On => (false, ReplyMode::On),
            ReplyMode::Off => (true, ReplyMode::Off),
            ReplyMode::SkipNext => (true, ReplyMode::Skip),
            ReplyMode::Skip => (true, ReplyMode::On),
        }
    }
}

impl ClientCtx {
    /// A new session for an accepted connection, numbered `id` by the accept loop.
    pub fn new(
        shared: &Shared,
        id: u64,
        io_thread: usize,
        token: usize,
        addr: Option<SocketAddr>,
        laddr: Option<SocketAddr>,
    ) -> ClientCtx {
        shared.stats.client_connected();
        let mut c = ClientCtx::with_id(shared, id);
        c.io_thread = io_thread;
        c.token = token;
        shared.directory.lock().insert(c.id, (io_thread, token));
        c.addr = addr;
        c.laddr = laddr;
        if shared.config.cluster_enabled {
            let ipv6 = addr.is_some_and(|a| a.is_ipv6());
            c.cluster = Some(ferrocluster_command::ClientState::new(false, ipv6));
        }
        c
    }

    /// A session not tied to a connection (the replication stream applier).
    pub fn internal(shared: &Shared) -> ClientCtx {
        ClientCtx::with_id(shared, shared.next_client_id())
    }

    fn with_id(shared: &Shared, id: u64) -> ClientCtx {
        ClientCtx {
            id,
            io_thread: usize::MAX,
            token: usize::MAX,
            addr: None,
            laddr: None,
            name: None,
            lib_name: None,
            lib_ver: None,
            db: 0,
            authed: shared
                .acl_default_open
                .load(std::sync::atomic::Ordering::Relaxed),
            user: b"default".to_vec(),
            user_incarnation: 0,
            multi: None,
            multi_error: false,
            readonly: false,
            asking: false,
            channels: BTreeSet::new(),
            shard_channels: BTreeSet::new(),
            patterns: BTreeSet::new(),
            created_ms: crate::server::unix_ms(),
            blocked: false,
            paused: false,
            in_exec: false,
            last_cmd: "NULL",
            net_in: 0,
            net_out: 0,
            cmds: 0,
            is_replica_link: false,
            cluster: None,
            migration_conn: false,
            reply_holes: std::collections::VecDeque::new(),
            watching: false,
            conn: crate::clients::ConnFacts::default(),
            last_io_ms: 0,
            monitor: false,
            tracking_redir: None,
            caching: None,
            reply: ReplyMode::On,
        }
    }

    /// Number of subscriptions (channels, patterns and shard channels).
    pub fn subscriptions(&self) -> usize {
        self.channels.len() + self.patterns.len() + self.shard_channels.len()
    }

    /// The count a (P)SUBSCRIBE / (P)UNSUBSCRIBE reply carries: channels and patterns
    /// (Redis 7.0 `clientSubscriptionsCount`); shard channels count apart.
    pub fn channel_and_pattern_count(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }

    /// Drops every subscription from the shared registry (connection closed, RESET).
    pub fn drop_subscriptions(&mut self, shared: &Shared) {
        if self.subscriptions() == 0 {
            return;
        }
        let mut ps = shared.pubsub.write();
        for ch in std::mem::take(&mut self.channels) {
            ps.unsubscribe(false, &ch, self.id);
        }
        for ch in std::mem::take(&mut self.shard_channels) {
            ps.unsubscribe(true, &ch, self.id);
        }
        for p in std::mem::take(&mut self.patterns) {
            ps.punsubscribe(&p, self.id);
        }
    }

    /// Cleans up shared registries when the connection closes.
    pub fn on_close(&mut self, shared: &Shared) {
        shared.stats.client_disconnected();
        shared.clients.set_paused(self, false);
        shared.directory.lock().remove(&self.id);
        self.drop_subscriptions(shared);
        if self.tracking_redir.is_some() {
            shared.state.lock().tracking.client_closed(self.id);
        }
        if self.monitor {
            shared.monitors.remove(self.id);
        }
        if self.migration_conn {
            crate::migrate::client_closed(shared, self.id);
        }
        if self.watching {
            crate::cmd::txn::client_closed(&mut shared.state.lock(), self.id);
        }
        if self.is_replica_link || self.blocked {
            let mut st = shared.state.lock();
            crate::repl::replica_link_closed(&mut st, self.id);
            crate::repl::flush(shared, &mut st);
            crate::blocking::client_closed(&mut st, self.id);
            crate::cluster::client_closed(&mut st, self.id);
        }
    }

    /// The CLIENT INFO / CLIENT LIST line for this client in Redis 7.0's field order;
    /// `proto` is the connection's protocol (2, or 3 after `HELLO 3`). Fields this server
    /// cannot fill truthfully are left out rather than printed as constants: `argv-mem`
    /// (arguments are ranges into the query buffer, not separate allocations), `rbp`,
    /// `obl` / `oll` (one output buffer, reported as `omem`).
    pub fn info_line(&self, now_ms: u64, proto: u8) -> String {
        let age = now_ms.saturating_sub(self.created_ms) / 1000;
        let idle = now_ms.saturating_sub(self.last_io_ms.max(self.created_ms)) / 1000;
        let name = self
            .name
            .as_deref()
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .unwrap_or_default();
        // Valkey `getClientInfoString`'s flag letters, in its order.
        let mut flags = String::new();
        if self.is_replica_link {
            flags.push('S');
        }
        if self.subscriptions() > 0 {
            flags.push('P');
        }
        if self.multi.is_some() {
            flags.push('x');
        }
        if self.blocked || self.paused {
            flags.push('b');
        }
        if self.tracking_redir.is_some() {
            flags.push('t');
        }
        if self.conn.closing {
            flags.push('c');
        }
        if self.readonly {
            flags.push('r');
        }
        if self.monitor {
            flags.push('O');
        }
        if flags.is_empty() {
            flags.push('N');
        }
        let multi_mem: usize = self
            .multi
            .as_ref()
            .map(|q| q.iter().flatten().map(Vec::len).sum())
            .unwrap_or(0);
        let tot_mem = self.conn.rbs + self.conn.omem + multi_mem;
        format!(
            "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf={} qbuf-free={} multi-mem={} rbs={} omem={} tot-mem={} events={} cmd={} user={} redir={} resp={} lib-name={} lib-ver={} tot-net-in={} tot-net-out={} tot-cmds={}",
            self.id,
            self.addr.map(|a| a.to_string()).unwrap_or_default(),
            self.laddr.map(|a| a.to_string()).unwrap_or_default(),
            self.conn.fd,
            name,
            age,
            idle,
            flags,
            self.db,
            self.channels.len(),
            self.patterns.len(),
            self.shard_channels.len(),
            self.multi.as_ref().map(|m| m.len() as i64).unwrap_or(-1),
            self.conn.qbuf,
            self.conn.qbuf_free,
            multi_mem,
            self.conn.rbs,
            self.conn.omem,
            tot_mem,
            if self.conn.writing { "rw" } else { "r" },
            self.last_cmd,
            String::from_utf8_lossy(&self.user),
            self.tracking_redir.unwrap_or(-1),
            proto,
            self.lib_name.as_deref().map(String::from_utf8_lossy).unwrap_or_default(),
            self.lib_ver.as_deref().map(String::from_utf8_lossy).unwrap_or_default(),
            self.net_in,
            self.net_out,
            self.cmds,
        )
    }
}

impl ClientCtx {
    /// The reply of request `id` will go at `at` (the current end of the output buffer).
    pub fn hold_reply(&mut self, at: usize, id: u64) {
        self.reply_holes.push_back((at, id));
    }

    /// How much of an output buffer of `len` bytes may be written now: up to the first reply
    /// still waiting.
    pub fn writable(&self, len: usize) -> usize {
        self.reply_holes
            .front()
            .map_or(len, |(at, _)| (*at).min(len))
    }

    /// `n` bytes at the front of the output buffer were written.
    pub fn written(&mut self, n: usize) {
        self.net_out += n as u64;
        for (at, _) in self.reply_holes.iter_mut() {
            *at -= n.min(*at);
        }
    }

    /// Puts the reply of `id` in its place (a reply nobody waits for any more is dropped).
    pub fn fill_reply(&mut self, out: &mut crate::resp::Out, id: u64, bytes: &[u8]) {
        let Some(i) = self.reply_holes.iter().position(|(_, h)| *h == id) else {
            return;
        };
        let Some((at, _)) = self.reply_holes.remove(i) else {
            return;
        };
        let at = at.min(out.buf.len());
        out.buf.splice(at..at, bytes.iter().copied());
        for (later, _) in self.reply_holes.iter_mut().skip(i) {
            *later += bytes.len();
        }
    }
}

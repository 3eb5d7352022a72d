//! The `MIGRATE` client: arguments, the request (AUTH, SELECT, pipelined `RESTORE`s of DUMP
//! payloads), the replies, the cached connections, the retry and the error texts (Valkey
//! `migrateCommand`, `migrateGetSocket`, `migrateCloseTimedoutSockets`; the bytes
//! valkey-server 9.1.2 and redis-server 7.0.15 send are captured in
//! `tests/vectors/migrate/`).

use crate::error::CommandError;
use crate::resp::{encode_command, parse_i64, LineReader};
use ferrocluster_migration::ConnId;
use ferrocluster_rdb::{dump, EncodeError, Encoder, EncoderConfig, RdbValue};
use ferrocluster_topology::{Millis, Reply};
use std::collections::{BTreeMap, VecDeque};

/// `MIGRATE_SOCKET_CACHE_ITEMS`.
pub const CACHE_ITEMS: usize = 64;
/// `MIGRATE_SOCKET_CACHE_TTL`, ms: an idle cached connection is closed after this long.
pub const CACHE_IDLE_MS: u64 = 10_000;
/// Valkey writes the request in chunks of at most this many bytes (`connSyncWrite`); a host
/// MAY write it at once.
pub const WRITE_CHUNK: usize = 64 * 1024;
/// Reply lines longer than this are a protocol error (Valkey reads them into 1 KiB buffers).
const MAX_REPLY_LINE: usize = 1024;

/// Settings of the MIGRATE client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrateConfig {
    /// `cluster-enabled`: the target gets `RESTORE-ASKING` (it may not own the slot yet),
    /// else `RESTORE`.
    pub cluster_enabled: bool,
    /// The DUMP payloads' RDB version and encodings. The default (RDB 10) restores on
    /// redis-server 7.0 and valkey-server 8/9 alike; Valkey 9.1 itself writes RDB 80
    /// payloads, which Redis 7.0 refuses.
    pub encoder: EncoderConfig,
}

impl Default for MigrateConfig {
    fn default() -> MigrateConfig {
        MigrateConfig {
            cluster_enabled: true,
            encoder: EncoderConfig::default(),
        }
    }
}

/// `AUTH password` or `AUTH2 username password`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrateAuth {
    /// The ACL user (`AUTH2`).
    pub user: Option<Vec<u8>>,
    /// The password.
    pub password: Vec<u8>,
}

/// `MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE] [AUTH password | AUTH2
/// username password] [KEYS key [key ...]]`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrateArgs {
    /// The target's host, as given.
    pub host: Vec<u8>,
    /// The target's port, as given (a bad one fails to connect, as in Valkey).
    pub port: Vec<u8>,
    /// The target database.
    pub db: i64,
    /// The timeout of each connect, write and read, ms (`0` or less: 1000).
    pub timeout_ms: u64,
    /// `COPY`: keep the keys here.
    pub copy: bool,
    /// `REPLACE`: overwrite keys on the target.
    pub replace: bool,
    /// `AUTH` / `AUTH2`.
    pub auth: Option<MigrateAuth>,
    /// The keys to move (the `key` argument, or those after `KEYS`).
    pub keys: Vec<Vec<u8>>,
}

/// A MIGRATE refused before any I/O, with Valkey's text. Nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MigrateError {
    /// A generic refusal: [`CommandError::WrongArity`] (`migrate`), [`CommandError::Syntax`],
    /// [`CommandError::NotAnInteger`] (the timeout or the database).
    #[error(transparent)]
    Command(#[from] CommandError),
    /// `ERR When using MIGRATE KEYS option, the key argument must be set to the empty string`.
    #[error(
        "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string"
    )]
    KeysNeedEmptyKey,
    /// A value could not be written as a DUMP payload (a host error; the key is skipped by
    /// no server, so the MIGRATE fails).
    #[error("ERR {0}")]
    Encode(EncodeError),
}

impl MigrateError {
    /// The error reply.
    pub fn to_reply(&self) -> Reply {
        Reply::Error(self.to_string())
    }
}

impl MigrateArgs {
    /// Parses MIGRATE's arguments (`argv[0]` is `MIGRATE`), in Valkey's order: the options
    /// (any case), then the timeout, then the database.
    ///
    /// # Errors
    /// [`MigrateError`] with Valkey's text.
    pub fn parse<A: AsRef<[u8]>>(argv: &[A]) -> Result<MigrateArgs, MigrateError> {
        if argv.len() < 6 {
            return Err(CommandError::WrongArity("migrate").into());
        }
        let a = |i: usize| argv[i].as_ref();
        let (mut copy, mut replace, mut auth) = (false, false, None);
        let mut keys = vec![a(3).to_vec()];
        let mut j = 6;
        while j < argv.len() {
            let more = argv.len() - 1 - j;
            let opt = a(j);
            if opt.eq_ignore_ascii_case(b"copy") {
                copy = true;
            } else if opt.eq_ignore_ascii_case(b"replace") {
                replace = true;
            } else if opt.eq_ignore_ascii_case(b"auth") {
                if more == 0 {
                    return Err(CommandError::Syntax.into());
                }
                j += 1;
                auth = Some(MigrateAuth {
                    user: None,
                    password: a(j).to_vec(),
                });
            } else if opt.eq_ignore_ascii_case(b"auth2") {
                if more < 2 {
                    return Err(CommandError::Syntax.into());
                }
                auth = Some(MigrateAuth {
                    user: Some(a(j + 1).to_vec()),
                    password: a(j + 2).to_vec(),
                });
                j += 2;
            } else if opt.eq_ignore_ascii_case(b"keys") {
                if !a(3).is_empty() {
                    return Err(MigrateError::KeysNeedEmptyKey);
                }
                keys = (j + 1..argv.len()).map(|i| a(i).to_vec()).collect();
                break;
            } else {
                return Err(CommandError::Syntax.into());
            }
            j += 1;
        }
        let timeout = parse_i64(a(5)).ok_or(CommandError::NotAnInteger)?;
        let db = parse_i64(a(4)).ok_or(CommandError::NotAnInteger)?;
        Ok(MigrateArgs {
            host: a(1).to_vec(),
            port: a(2).to_vec(),
            db,
            timeout_ms: if timeout <= 0 { 1000 } else { timeout as u64 },
            copy,
            replace,
            auth,
            keys,
        })
    }
}

/// One connection of the MIGRATE client, chosen by it; never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MigrateLink(pub u64);

/// What the MIGRATE client asks the host to do, polled in order.
#[derive(Debug, Clone, PartialEq)]
pub enum MigrateOutput {
    /// Open a TCP connection to `host:port` within `timeout_ms`; report
    /// [`MigrateClient::handle_connected`] or [`MigrateClient::handle_connect_failed`].
    Connect {
        /// The link.
        link: MigrateLink,
        /// The host, as MIGRATE named it.
        host: Vec<u8>,
        /// The port, as MIGRATE named it.
        port: Vec<u8>,
        /// Connect timeout, ms.
        timeout_ms: u64,
    },
    /// Write these bytes on the link.
    Send {
        /// The link.
        link: MigrateLink,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// Close the link; the client has forgotten it.
    Close {
        /// The link.
        link: MigrateLink,
    },
    /// The MIGRATE of `client` is done: send `reply`; unless `COPY`, delete `moved` (the keys
    /// the target acknowledged) from this node and propagate their deletion (Valkey rewrites
    /// the command as `DEL` of them for replicas and the AOF).
    Done {
        /// The client that ran MIGRATE.
        client: ConnId,
        /// `+OK`, or the error.
        reply: Reply,
        /// Keys to delete here (empty with `COPY`).
        moved: Vec<Vec<u8>>,
    },
}

#[derive(Debug)]
struct Cached {
    link: MigrateLink,
    /// The database last selected on it (`None`: unknown).
    db: Option<i64>,
    last_use: Millis,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Connecting,
    Reading,
}

#[derive(Debug)]
struct Op {
    client: ConnId,
    args: MigrateArgs,
    /// The keys still to send and their RESTORE commands (key, command bytes).
    restores: Vec<(Vec<u8>, Vec<u8>)>,
    link: MigrateLink,
    phase: Phase,
    select: bool,
    deadline: Millis,
    may_retry: bool,
    lines: LineReader,
    /// Replies read: AUTH, SELECT, then one per RESTORE.
    replies: Vec<Vec<u8>>,
}

impl Op {
    fn expected(&self) -> usize {
        usize::from(self.args.auth.is_some()) + usize::from(self.select) + self.restores.len()
    }

    fn request(&self) -> Vec<u8> {
        let mut b = Vec::new();
        if let Some(auth) = &self.args.auth {
            match &auth.user {
                Some(u) => encode_command(&mut b, &[b"AUTH", u.as_slice(), &auth.password]),
                None => encode_command(&mut b, &[b"AUTH".as_slice(), &auth.password]),
            }
        }
        if self.select {
            encode_command(
                &mut b,
                &[b"SELECT".as_slice(), self.args.db.to_string().as_bytes()],
            );
        }
        for (_, r) in &self.restores {
            b.extend_from_slice(r);
        }
        b
    }
}

/// The MIGRATE client of one node: in-flight MIGRATEs (one per client connection) and the
/// cached connections to targets (at most [`CACHE_ITEMS`], closed after [`CACHE_IDLE_MS`]
/// idle). Sans-IO: [`MigrateOutput`]s out, connection events in.
///
/// The host MUST NOT let other commands change the migrated keys between
/// [`MigrateClient::start`] and its [`MigrateOutput::Done`] (Valkey runs MIGRATE to the end
/// before anything else); blocking the client and the keys' database is enough.
#[derive(Debug)]
pub struct MigrateClient {
    cfg: MigrateConfig,
    enc: Encoder,
    cache: BTreeMap<(Vec<u8>, Vec<u8>), Cached>,
    ops: BTreeMap<ConnId, Op>,
    next_link: u64,
    out: VecDeque<MigrateOutput>,
    now: Millis,
}

impl MigrateClient {
    /// A client without connections.
    pub fn new(cfg: MigrateConfig, now: Millis) -> MigrateClient {
        MigrateClient {
            enc: Encoder::new(cfg.encoder),
            cfg,
            cache: BTreeMap::new(),
            ops: BTreeMap::new(),
            next_link: 1,
            out: VecDeque::new(),
            now,
        }
    }

    fn clock(&mut self, now: Millis) -> Millis {
        crate::clock::advance(&mut self.now, now)
    }

    /// The next output, `None` when drained.
    pub fn poll_output(&mut self) -> Option<MigrateOutput> {
        self.out.pop_front()
    }

    /// Cached idle connections.
    pub fn cached(&self) -> usize {
        self.cache.len()
    }

    fn new_link(&mut self) -> MigrateLink {
        let l = MigrateLink(self.next_link);
        self.next_link += 1;
        l
    }

    /// Starts `client`'s MIGRATE of the keys found here: `found` gives each key of
    /// `args.keys` that exists, with its value and absolute expiry (Unix ms), in the order of
    /// `args.keys`. Returns `+NOKEY` at once when none was found (Valkey replies so without
    /// connecting); otherwise the reply comes as [`MigrateOutput::Done`]. A key whose expiry
    /// passed since the host looked is skipped; the others get `RESTORE key <ms left, at
    /// least 1> payload [REPLACE]` (`RESTORE-ASKING` in cluster mode).
    ///
    /// # Errors
    /// [`MigrateError::Encode`] when a value cannot be written; nothing started.
    pub fn start<'v, V, I>(
        &mut self,
        client: ConnId,
        args: MigrateArgs,
        found: I,
        now: Millis,
    ) -> Result<Option<Reply>, MigrateError>
    where
        V: RdbValue + 'v,
        I: IntoIterator<Item = (&'v [u8], &'v V, Option<i64>)>,
    {
        let now = self.clock(now);
        let found: Vec<_> = found.into_iter().collect();
        if found.is_empty() {
            return Ok(Some(Reply::Simple("NOKEY".to_owned())));
        }
        let name: &[u8] = if self.cfg.cluster_enabled {
            b"RESTORE-ASKING"
        } else {
            b"RESTORE"
        };
        let now_ms = now.as_u64() as i64;
        let mut restores = Vec::with_capacity(found.len());
        let mut payload = Vec::new();
        for (key, value, at) in found {
            let ttl = match at {
                Some(at) if at - now_ms < 0 => continue,
                Some(at) => (at - now_ms).max(1),
                None => 0,
            };
            payload.clear();
            dump::encode_into(&mut self.enc, value, &mut payload).map_err(MigrateError::Encode)?;
            let ttl = ttl.to_string();
            let mut cmd = Vec::new();
            if args.replace {
                encode_command(&mut cmd, &[name, key, ttl.as_bytes(), &payload, b"REPLACE"]);
            } else {
                encode_command(&mut cmd, &[name, key, ttl.as_bytes(), &payload]);
            }
            restores.push((key.to_vec(), cmd));
        }
        let deadline = now.saturating_add_ms(args.timeout_ms);
        let mut op = Op {
            client,
            restores,
            link: MigrateLink(0),
            phase: Phase::Connecting,
            select: true,
            deadline,
            may_retry: true,
            lines: LineReader::default(),
            replies: Vec::new(),
            args,
        };
        let key = (op.args.host.clone(), op.args.port.clone());
        match self.cache.remove(&key) {
            Some(c) => {
                op.link = c.link;
                op.select = c.db != Some(op.args.db);
                op.phase = Phase::Reading;
                let bytes = op.request();
                self.out.push_back(MigrateOutput::Send {
                    link: op.link,
                    bytes,
                });
            }
            None => self.connect(&mut op),
        }
        self.ops.insert(client, op);
        Ok(None)
    }

    fn connect(&mut self, op: &mut Op) {
        if self.cache.len() >= CACHE_ITEMS {
            // Valkey drops a random entry; we drop the least recently used.
            if let Some(k) = self
                .cache
                .iter()
                .min_by_key(|(_, c)| c.last_use)
                .map(|(k, _)| k.clone())
            {
                if let Some(c) = self.cache.remove(&k) {
                    self.out.push_back(MigrateOutput::Close { link: c.link });
                }
            }
        }
        op.link = self.new_link();
        op.phase = Phase::Connecting;
        op.select = true;
        op.lines = LineReader::default();
        op.replies.clear();
        self.out.push_back(MigrateOutput::Connect {
            link: op.link,
            host: op.args.host.clone(),
            port: op.args.port.clone(),
            timeout_ms: op.args.timeout_ms,
        });
    }

    fn op_of(&self, link: MigrateLink) -> Option<ConnId> {
        self.ops
            .iter()
            .find(|(_, o)| o.link == link)
            .map(|(c, _)| *c)
    }

    /// The connection asked for by [`MigrateOutput::Connect`] is up: the request goes out.
    pub fn handle_connected(&mut self, link: MigrateLink, now: Millis) {
        let now = self.clock(now);
        let Some(client) = self.op_of(link) else {
            // Its MIGRATE ended (timed out): nothing wants it.
            self.out.push_back(MigrateOutput::Close { link });
            return;
        };
        let Some(op) = self.ops.get_mut(&client) else {
            return;
        };
        if op.phase != Phase::Connecting {
            return;
        }
        op.phase = Phase::Reading;
        op.deadline = now.saturating_add_ms(op.args.timeout_ms);
        let bytes = op.request();
        self.out.push_back(MigrateOutput::Send { link, bytes });
    }

    /// The connection could not be made: `-IOERR error or timeout connecting to the client`.
    pub fn handle_connect_failed(&mut self, link: MigrateLink, now: Millis) {
        self.clock(now);
        if let Some(client) = self.op_of(link) {
            let op = self.ops.remove(&client).expect("found above");
            self.done(op, connect_error(), Vec::new());
        }
    }

    /// Bytes read from a MIGRATE link: the replies.
    pub fn handle_bytes(&mut self, link: MigrateLink, bytes: &[u8], now: Millis) {
        let now = self.clock(now);
        let Some(client) = self.op_of(link) else {
            if self.cache.values().any(|c| c.link == link) {
                // An idle connection that talks: drop it (Valkey would read it with the
                // next MIGRATE and misattribute the replies).
                self.cache.retain(|_, c| c.link != link);
                self.out.push_back(MigrateOutput::Close { link });
            }
            return;
        };
        let op = self.ops.get_mut(&client).expect("found above");
        if op.phase != Phase::Reading {
            return;
        }
        op.lines.push(bytes);
        op.deadline = now.saturating_add_ms(op.args.timeout_ms);
        loop {
            if op.replies.len() == op.expected() {
                break;
            }
            match op.lines.next_line(MAX_REPLY_LINE) {
                Ok(Some(line)) => op.replies.push(line),
                Ok(None) => return,
                Err(_) => {
                    let op = self.ops.remove(&client).expect("found above");
                    self.out.push_back(MigrateOutput::Close { link });
                    self.socket_error(op, false, false);
                    return;
                }
            }
        }
        let op = self.ops.remove(&client).expect("found above");
        self.finish(op);
    }

    /// The host could not write the request on `link`.
    pub fn handle_write_failed(&mut self, link: MigrateLink, now: Millis) {
        self.clock(now);
        if let Some(client) = self.op_of(link) {
            let op = self.ops.remove(&client).expect("found above");
            self.out.push_back(MigrateOutput::Close { link });
            self.socket_error(op, true, false);
        }
    }

    /// `link` closed (the peer, an I/O error). A MIGRATE on it fails or retries; a cached
    /// one is forgotten.
    pub fn handle_closed(&mut self, link: MigrateLink, now: Millis) {
        self.clock(now);
        self.cache.retain(|_, c| c.link != link);
        if let Some(client) = self.op_of(link) {
            let op = self.ops.remove(&client).expect("found above");
            if op.phase == Phase::Connecting {
                self.done(op, connect_error(), Vec::new());
            } else {
                self.socket_error(op, false, false);
            }
        }
    }

    /// Timeouts of connects and reads, and idle cached connections (closed after
    /// [`CACHE_IDLE_MS`]). An early or repeated call is harmless.
    pub fn handle_timeout(&mut self, now: Millis) {
        let now = self.clock(now);
        let late: Vec<ConnId> = self
            .ops
            .iter()
            .filter(|(_, o)| now >= o.deadline)
            .map(|(c, _)| *c)
            .collect();
        for client in late {
            let op = self.ops.remove(&client).expect("listed above");
            self.out.push_back(MigrateOutput::Close { link: op.link });
            if op.phase == Phase::Connecting {
                self.done(op, connect_error(), Vec::new());
            } else {
                self.socket_error(op, false, true);
            }
        }
        let idle: Vec<(Vec<u8>, Vec<u8>)> = self
            .cache
            .iter()
            .filter(|(_, c)| now.since(c.last_use) > CACHE_IDLE_MS)
            .map(|(k, _)| k.clone())
            .collect();
        for k in idle {
            if let Some(c) = self.cache.remove(&k) {
                self.out.push_back(MigrateOutput::Close { link: c.link });
            }
        }
    }

    /// When [`MigrateClient::handle_timeout`] must next be called.
    pub fn poll_timeout(&self) -> Option<Millis> {
        let ops = self.ops.values().map(|o| o.deadline);
        let idle = self
            .cache
            .values()
            .map(|c| c.last_use.saturating_add_ms(CACHE_IDLE_MS + 1));
        ops.chain(idle).min()
    }

    /// A socket error after the connect (Valkey `socket_err`): retried once on a new
    /// connection when no reply was read and it was not a timeout, else `-IOERR error or
    /// timeout <writing|reading> to target instance`, with the keys acknowledged so far.
    fn socket_error(&mut self, mut op: Op, writing: bool, timed_out: bool) {
        let pre = usize::from(op.args.auth.is_some()) + usize::from(op.select);
        let restores_read = op.replies.len().saturating_sub(pre);
        if restores_read == 0 && op.may_retry && !timed_out {
            op.may_retry = false;
            op.deadline = self.now.saturating_add_ms(op.args.timeout_ms);
            self.connect(&mut op);
            self.ops.insert(op.client, op);
            return;
        }
        let moved = if op.args.copy || !self.pre_ok(&op) {
            Vec::new()
        } else {
            op.replies[pre.min(op.replies.len())..]
                .iter()
                .zip(&op.restores)
                .filter(|(r, _)| r.first() != Some(&b'-'))
                .map(|(_, (k, _))| k.clone())
                .collect()
        };
        let what = if writing { "writing" } else { "reading" };
        let reply = Reply::Error(format!("IOERR error or timeout {what} to target instance"));
        self.done(op, reply, moved);
    }

    /// Whether the AUTH and SELECT replies (if any) were not errors.
    fn pre_ok(&self, op: &Op) -> bool {
        let mut i = 0;
        let mut ok = true;
        if op.args.auth.is_some() {
            ok &= op.replies.get(i).is_none_or(|r| r.first() != Some(&b'-'));
            i += 1;
        }
        if op.select {
            ok &= op.replies.get(i).is_none_or(|r| r.first() != Some(&b'-'));
        }
        ok
    }

    fn finish(&mut self, op: Op) {
        let mut i = 0;
        let auth_err = op.args.auth.is_some().then(|| {
            i += 1;
            op.replies[i - 1].clone()
        });
        let select_err = op.select.then(|| {
            i += 1;
            op.replies[i - 1].clone()
        });
        let first_err = |r: &Option<Vec<u8>>| r.clone().filter(|l| l.first() == Some(&b'-'));
        let (auth_err, select_err) = (first_err(&auth_err), first_err(&select_err));
        let mut error: Option<Vec<u8>> = None;
        let mut moved = Vec::new();
        for (reply, (key, _)) in op.replies[i..].iter().zip(&op.restores) {
            let failed = auth_err.is_some() || select_err.is_some() || reply.first() == Some(&b'-');
            if failed {
                if error.is_none() {
                    error = Some(
                        auth_err
                            .clone()
                            .or_else(|| select_err.clone())
                            .unwrap_or_else(|| reply.clone()),
                    );
                }
            } else if !op.args.copy {
                moved.push(key.clone());
            }
        }
        let reply = match &error {
            None => Reply::ok(),
            Some(e) => Reply::Error(format!(
                "ERR Target instance replied with error: {}",
                String::from_utf8_lossy(&e[1..])
            )),
        };
        // The connection stays cached; its database is known only after a success.
        let db = error.is_none().then_some(op.args.db);
        let key = (op.args.host.clone(), op.args.port.clone());
        if let Some(old) = self.cache.insert(
            key,
            Cached {
                link: op.link,
                db,
                last_use: self.now,
            },
        ) {
            self.out.push_back(MigrateOutput::Close { link: old.link });
        }
        self.done(op, reply, moved);
    }

    fn done(&mut self, op: Op, reply: Reply, moved: Vec<Vec<u8>>) {
        self.out.push_back(MigrateOutput::Done {
            client: op.client,
            reply,
            moved,
        });
    }

    /// The client that ran a MIGRATE went away: its MIGRATE is abandoned (its link closed).
    pub fn handle_client_closed(&mut self, client: ConnId, now: Millis) {
        self.clock(now);
        if let Some(op) = self.ops.remove(&client) {
            self.out.push_back(MigrateOutput::Close { link: op.link });
        }
    }
}

fn connect_error() -> Reply {
    Reply::Error("IOERR error or timeout connecting to the client".to_owned())
}

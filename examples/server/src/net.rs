//! The data-port network layer: one accept thread and `io-threads` event-loop threads.
//!
//! Each I/O thread owns its connections and a `mio::Poll`. One loop turn:
//! 1. wait for readiness (no wait when a connection still has unread bytes or pending output);
//! 2. take new connections and cross-thread deliveries (pub/sub messages, deferred replies)
//!    from the thread's channel (a `mio::Waker` wakes the loop);
//! 3. for every readable connection: one `read` into its buffer, parse every complete request,
//!    and run the whole batch under one lock of the shared state ([`crate::server::Shared`]);
//! 4. for every connection with output: one `write`; what is left waits for WRITABLE.
//!
//! Sockets are edge-triggered, so a connection whose read filled the buffer is kept on a
//! "read again" list for the next turn instead of being drained in a loop: one busy client
//! cannot starve the others. Arguments are byte ranges into the read buffer and replies are
//! encoded into the connection's output buffer, so a command allocates nothing here.

use crate::client::{ClientCtx, Delivery};
use crate::resp::{parse_request, Limits, Out, Parsed};
use crate::server::Shared;
use crossbeam_channel::{Receiver, Sender};
use ferrocluster_host::tls::Stream;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token, Waker};
use std::io::{ErrorKind, Read, Write};
use std::ops::Range;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const WAKER: Token = Token(usize::MAX);
const READ_CHUNK: usize = 64 * 1024;

/// A message to an I/O thread.
pub enum ToIo {
    /// An accepted connection, its client ID, given in accept order (Redis `createClient`
    /// numbers clients as they are accepted), and `true` when it came in on `tls-port` (TLS).
    Accepted(std::net::TcpStream, u64, bool),
    /// Something to write to one of the thread's connections (pub/sub message, WAIT reply).
    Deliver {
        /// The connection's slot in the thread.
        token: usize,
        /// Its client id (guards against a slot reused by a newer connection).
        client_id: u64,
        /// What to write.
        what: Delivery,
    },
    /// A CLIENT LIST / CLIENT KILL to run on this thread's connections.
    Fanout(Arc<crate::clients::Fanout>),
}

/// The sending half to one I/O thread.
#[derive(Clone)]
pub struct IoHandle {
    tx: Sender<ToIo>,
    waker: Arc<Waker>,
}

impl IoHandle {
    /// Wakes the thread for one loop turn (it re-runs requests that waited for the end of a
    /// write pause at once instead of at its next 10 ms retry).
    pub fn wake(&self) {
        let _ = self.waker.wake();
    }

    /// Sends a message and wakes the thread. A closed thread is ignored (shutdown).
    pub fn send(&self, msg: ToIo) {
        if self.tx.send(msg).is_ok() {
            let _ = self.waker.wake();
        }
    }
}

struct Conn {
    /// Plain TCP, or TLS on `tls-port` (the handshake runs inside reads and writes).
    stream: Stream,
    rbuf: Vec<u8>,
    out: Out,
    args: Vec<Range<usize>>,
    /// Unescaped words of an inline request (its `args` point here).
    inline: Vec<u8>,
    /// Bytes at the start of `rbuf` that hold whole arguments of the request in progress
    /// (not counted against `client-query-buffer-limit`, as Valkey moves them out of its
    /// query buffer).
    settled: usize,
    client: ClientCtx,
    /// Close once the output is flushed (QUIT, protocol error).
    close_after_flush: bool,
    /// Waiting for WRITABLE.
    want_write: bool,
    /// Since when (unix ms) the output has been over the class's soft limit.
    soft_since: Option<u64>,
    /// A replica link's unsent bytes as last told to `Shared::replica_unsent`.
    told_unsent: usize,
}

/// Creates the I/O threads; returns their handles (index = thread number).
///
/// # Errors
/// When a poller cannot be created.
pub fn spawn_io_threads(shared: &Arc<Shared>) -> std::io::Result<Vec<IoHandle>> {
    let n = shared.config.io_threads;
    let mut handles = Vec::with_capacity(n);
    let mut parts = Vec::with_capacity(n);
    for _ in 0..n {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let (tx, rx) = crossbeam_channel::unbounded();
        handles.push(IoHandle { tx, waker });
        parts.push((poll, rx));
    }
    for (i, (poll, rx)) in parts.into_iter().enumerate() {
        let shared = Arc::clone(shared);
        std::thread::Builder::new()
            .name(format!("io-{i}"))
            .spawn(move || IoThread::new(i, shared, poll, rx).run())?;
    }
    Ok(handles)
}

pub use ferrocluster_host::listen::listen_all;

/// Admission of client connections: `maxclients` (Valkey `acceptCommonHandler`), counted over
/// the connected clients, the ones accepted but not yet registered by their I/O thread, and,
/// in cluster mode, Valkey's estimate of the bus connections, two per known node other than
/// myself (`getClusterConnectionsCount`). A client past the limit gets
/// `-ERR max number of clients + cluster connections reached` (cluster mode; `-ERR max number
/// of clients reached` otherwise) and is closed, as redis-server 7.0 and valkey-server 9.1
/// answer (`tests/vectors/maxclients.json`).
#[derive(Debug)]
pub struct ClientGate {
    maxclients: AtomicU32,
    pending: AtomicUsize,
    rejected: AtomicU64,
    /// Clients whose next request waits for the end of a pause (CLIENT PAUSE or a manual
    /// failover's write pause): counted in INFO `blocked_clients` and flagged `b` in CLIENT
    /// LIST, as Redis 7.0 and Valkey 9.1 block them (`blockPostponeClient`).
    paused: AtomicUsize,
}

impl ClientGate {
    /// How many clients wait for the end of a pause now.
    pub fn paused(&self) -> usize {
        self.paused.load(Ordering::Relaxed)
    }

    /// Notes whether `c`'s next request waits for a pause (changes the count on a change).
    pub fn set_paused(&self, c: &mut ClientCtx, paused: bool) {
        if c.paused != paused {
            c.paused = paused;
            if paused {
                self.paused.fetch_add(1, Ordering::Relaxed);
            } else {
                self.paused.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// A gate for `maxclients` clients (at least 1).
    pub fn new(maxclients: u32) -> ClientGate {
        ClientGate {
            maxclients: AtomicU32::new(maxclients.max(1)),
            pending: AtomicUsize::new(0),
            rejected: AtomicU64::new(0),
            paused: AtomicUsize::new(0),
        }
    }

    /// The limit in force (`maxclients`, after the start-up reduction to the open files limit).
    pub fn maxclients(&self) -> u32 {
        self.maxclients.load(Ordering::Relaxed)
    }

    /// Sets the limit (CONFIG SET maxclients); clients connected already stay.
    pub fn set_maxclients(&self, n: u32) {
        self.maxclients.store(n.max(1), Ordering::Relaxed);
    }

    /// Connections refused so far (INFO `rejected_connections`).
    pub fn rejected(&self) -> u64 {
        self.rejected.load(Ordering::Relaxed)
    }

    /// CONFIG RESETSTAT.
    pub fn reset_rejected(&self) {
        self.rejected.store(0, Ordering::Relaxed);
    }
}

/// Descriptors kept for everything but clients (Valkey `CONFIG_MIN_RESERVED_FDS`).
const RESERVED_FDS: u64 = 32;

/// Valkey's `adjustOpenFilesLimit`: raises the open files limit to `maxclients` + 32 (up to the
/// hard limit); when it stays lower, `maxclients` is reduced to fit, with Valkey's log lines.
/// Returns the `maxclients` to use (at start; CONFIG SET refuses a value that does not fit).
///
/// # Errors
/// When the limit leaves no room for a single client (Valkey's text).
pub fn adjust_open_files_limit(maxclients: u32) -> Result<u32, String> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let want = u64::from(maxclients) + RESERVED_FDS;
    let limit = getrlimit(Resource::Nofile);
    let Some(old) = limit.current else {
        return Ok(maxclients); // unlimited
    };
    if old >= want {
        return Ok(maxclients);
    }
    let best = limit.maximum.map_or(want, |hard| hard.min(want));
    let raised = best > old
        && setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(best),
                maximum: limit.maximum,
            },
        )
        .is_ok();
    let now = if raised { best } else { old };
    if now >= want {
        tracing::info!(
            "Increased maximum number of open files to {now} (it was originally set to {old})."
        );
        return Ok(maxclients);
    }
    if now <= RESERVED_FDS {
        return Err(format!(
            "Your current 'ulimit -n' of {now} is not enough for the server to start. Please \
             increase your open file limit to at least {}. Exiting.",
            RESERVED_FDS + 1
        ));
    }
    // `now - 32` is below `maxclients`, a u32.
    let reduced = u32::try_from(now - RESERVED_FDS).unwrap_or(maxclients);
    tracing::warn!(
        "You requested maxclients of {maxclients} requiring at least {want} max file descriptors."
    );
    if !raised {
        tracing::warn!(
            "Server can't set maximum open files to {want} because the hard limit is {}.",
            limit
                .maximum
                .map_or("unlimited".to_string(), |h| h.to_string())
        );
    }
    tracing::warn!(
        "Current maximum open files is {now}. maxclients has been reduced to {reduced} to \
         compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'."
    );
    Ok(reduced)
}

/// Valkey's estimate of the sockets the cluster bus takes: two per known node besides myself
/// (`getClusterConnectionsCount`; INFO `cluster_connections`).
pub fn cluster_connections(state: &crate::server::State) -> usize {
    state
        .cluster
        .as_ref()
        .map_or(0, |c| c.node.topology().len().saturating_sub(1) * 2)
}

/// The reply to a client past `maxclients`.
fn refusal_text(cluster: bool) -> &'static [u8] {
    if cluster {
        b"-ERR max number of clients + cluster connections reached\r\n"
    } else {
        b"-ERR max number of clients reached\r\n"
    }
}

/// Best effort, as Valkey's: the reply is written once, errors ignored, and the connection
/// dropped.
/// The reply to a client refused by protected mode, Valkey 9.1's text (`clientAcceptHandler`;
/// Redis 7.0's says `Redis is running in protected mode ...` and names Redis where this says
/// nothing or "it"; Valkey's words are followed, as everywhere in this server).
pub const PROTECTED_DENIED: &str = "-DENIED Running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers, you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting from the same host the server is running, however MAKE SURE it's not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Set up an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

/// Protected mode (Valkey `clientAcceptHandler`): on, no password for the default user and a
/// peer that is not loopback (`connIsLocal`: 127.0.0.0/8, `::1`, or either mapped in IPv6).
/// The `bind` list plays no part, as in Redis 7.0 and Valkey 9.1.
fn protected_denies(shared: &Shared, peer: std::net::SocketAddr) -> bool {
    let local = match peer.ip() {
        std::net::IpAddr::V4(v4) => v4.is_loopback(),
        std::net::IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    };
    shared.protected_mode.load(Ordering::Relaxed)
        && shared.acl_default_open.load(Ordering::Relaxed)
        && !local
}

fn refuse(shared: &Shared, mut s: std::net::TcpStream) {
    use std::io::Write as _;
    let _ = s.write_all(refusal_text(shared.config.cluster_enabled));
    shared.clients.rejected.fetch_add(1, Ordering::Relaxed);
}

/// `accept` errors, logged at most once a second with the number of repeats (at the file
/// descriptor limit every accepted-then-refused client is one).
struct AcceptErrors {
    last_logged: Option<std::time::Instant>,
    suppressed: u64,
}

impl AcceptErrors {
    fn note(&mut self, e: &std::io::Error) {
        let now = std::time::Instant::now();
        match self.last_logged {
            Some(t) if now.duration_since(t) < Duration::from_secs(1) => self.suppressed += 1,
            _ => {
                if self.suppressed > 0 {
                    tracing::warn!(
                        "accept failed: {e} (and {} more times in the last second)",
                        self.suppressed
                    );
                } else {
                    tracing::warn!("accept failed: {e}");
                }
                self.last_logged = Some(now);
                self.suppressed = 0;
            }
        }
    }

    /// After a good accept: the repeats of the last burst, if any were not reported.
    fn flush(&mut self) {
        if self.suppressed > 0 {
            tracing::warn!(
                "accept failed {} more times before the last success",
                self.suppressed
            );
            self.suppressed = 0;
        }
    }
}

/// Runs the blocking accept loop on `listener`, handing connections round-robin to `io` and
/// refusing those past `maxclients` ([`ClientGate`]). `tls`: the listener is a `tls-port` one;
/// its connections run the TLS handshake on their I/O thread. A TLS connection refused here
/// (protected mode, `maxclients`) is closed without the plain-text reply, which a TLS client
/// could not read before a handshake.
///
/// At the open files limit `accept` fails with `EMFILE` and the connection would wait in the
/// backlog, its client hanging: one spare descriptor (`/dev/null`) is kept open and given up
/// for a moment to accept that client and answer it the `maxclients` refusal.
pub fn accept_loop(
    shared: Arc<Shared>,
    listener: std::net::TcpListener,
    io: Vec<IoHandle>,
    tls: bool,
) {
    let mut next = 0usize;
    let mut spare = std::fs::File::open("/dev/null").ok();
    let mut errors = AcceptErrors {
        last_logged: None,
        suppressed: 0,
    };
    loop {
        match listener.accept() {
            Ok((mut s, peer)) => {
                errors.flush();
                if protected_denies(&shared, peer) {
                    use std::io::Write as _;
                    if !tls {
                        let _ = s.write_all(PROTECTED_DENIED.as_bytes());
                    }
                    shared.clients.rejected.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let gate = &shared.clients;
                let connected = shared.stats.snapshot().0 as usize;
                let bus = if shared.config.cluster_enabled {
                    cluster_connections(&shared.state.lock())
                } else {
                    0
                };
                let pending = gate.pending.load(Ordering::Relaxed);
                if connected + pending + bus >= gate.maxclients() as usize {
                    if tls {
                        shared.clients.rejected.fetch_add(1, Ordering::Relaxed);
                    } else {
                        refuse(&shared, s);
                    }
                    continue;
                }
                let _ = s.set_nodelay(true);
                gate.pending.fetch_add(1, Ordering::Relaxed);
                // The ID is taken here, in accept order, not when an I/O thread registers the
                // connection (two threads would number them in either order).
                let id = shared.next_client_id();
                io[next % io.len()].send(ToIo::Accepted(s, id, tls));
                next = next.wrapping_add(1);
            }
            Err(e) if matches!(e.raw_os_error(), Some(EMFILE) | Some(ENFILE)) => {
                errors.note(&e);
                drop(spare.take());
                if let Ok((s, _)) = listener.accept() {
                    if tls {
                        shared.clients.rejected.fetch_add(1, Ordering::Relaxed);
                    } else {
                        refuse(&shared, s);
                    }
                }
                spare = std::fs::File::open("/dev/null").ok();
                if spare.is_none() {
                    // Nothing could be freed: wait for descriptors to come back.
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            Err(e) => {
                errors.note(&e);
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// `EMFILE` / `ENFILE` (Linux): the process / the system is out of file descriptors.
const EMFILE: i32 = 24;
const ENFILE: i32 = 23;

struct IoThread {
    index: usize,
    shared: Arc<Shared>,
    poll: Poll,
    rx: Receiver<ToIo>,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    /// Connections to read from this turn (readable, or a full buffer last turn).
    to_read: Vec<usize>,
    /// Connections with output to write this turn.
    to_write: Vec<usize>,
    read_again: Vec<usize>,
    /// Connections holding a write that waits for the end of a write pause.
    paused: Vec<usize>,
    /// When `close_idle` last looked (unix ms).
    idle_checked_ms: u64,
    limits: Limits,
    /// One read's landing buffer, zeroed once per thread: reading straight into the
    /// connection's buffer would zero `READ_CHUNK` bytes per read (`Vec::resize`), a 64 KiB
    /// memset for a 30-byte request; copying the `n` bytes read is far cheaper.
    scratch: Box<[u8]>,
}

impl IoThread {
    fn new(index: usize, shared: Arc<Shared>, poll: Poll, rx: Receiver<ToIo>) -> IoThread {
        let limits = Limits {
            max_bulk_len: shared.config.proto_max_bulk_len,
            unauthenticated: false,
        };
        IoThread {
            index,
            shared,
            poll,
            rx,
            conns: Vec::new(),
            free: Vec::new(),
            to_read: Vec::new(),
            to_write: Vec::new(),
            read_again: Vec::new(),
            paused: Vec::new(),
            idle_checked_ms: 0,
            limits,
            scratch: vec![0; READ_CHUNK].into_boxed_slice(),
        }
    }

    fn run(mut self) {
        let mut events = Events::with_capacity(1024);
        let mut spins = 0u32;
        loop {
            let timeout = if !self.read_again.is_empty() || spins > 0 {
                Some(Duration::ZERO)
            } else if !self.paused.is_empty() {
                Some(Duration::from_millis(10))
            } else {
                Some(Duration::from_millis(250))
            };
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() != ErrorKind::Interrupted {
                    tracing::error!("poll failed: {e}");
                }
                continue;
            }
            // After a turn with events, a few non-blocking polls before blocking again
            // (`io-busy-polls`): a request that finds the thread awake costs no wakeup.
            // The spin yields the core between polls, so a thread that has work (a client, a
            // snapshot, another server) runs first.
            spins = if events.is_empty() {
                if spins > 0 {
                    std::thread::yield_now();
                }
                spins.saturating_sub(1)
            } else {
                self.shared.config.io_busy_polls
            };
            self.to_read.clear();
            self.to_read.append(&mut self.read_again);
            for ev in events.iter() {
                let t = ev.token();
                if t == WAKER {
                    continue;
                }
                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                    self.to_read.push(t.0);
                }
                if ev.is_writable() {
                    if let Some(Some(c)) = self.conns.get_mut(t.0) {
                        if c.want_write {
                            self.to_write.push(t.0);
                        }
                    }
                }
            }
            self.drain_channel();
            self.retry_paused();
            self.close_idle();
            let mut i = 0;
            while i < self.to_read.len() {
                let t = self.to_read[i];
                self.read_and_execute(t);
                i += 1;
            }
            self.flush_all();
        }
    }

    fn drain_channel(&mut self) {
        while let Ok(msg) = self.rx.try_recv() {
            match msg {
                ToIo::Accepted(s, id, tls) => self.add_conn(s, id, tls),
                ToIo::Fanout(f) => self.fanout(&f),
                ToIo::Deliver {
                    token,
                    client_id,
                    what,
                } => {
                    if let Some(Some(c)) = self.conns.get_mut(token) {
                        if c.client.id == client_id {
                            let was_blocked = c.client.blocked;
                            if matches!(what, Delivery::Close) {
                                c.close_after_flush = true;
                            }
                            what.write_to(&mut c.out, &mut c.client);
                            let limits = *self.shared.output_limits.read();
                            close_if_over_output_limit(&limits, c, crate::server::unix_ms());
                            self.to_write.push(token);
                            if was_blocked && !c.client.blocked && !c.close_after_flush {
                                // Requests pipelined after the WAIT run now, and bytes that
                                // arrived meanwhile are read next turn.
                                if execute_buffer(&self.shared, c, self.limits) {
                                    self.paused.push(token);
                                }
                                self.read_again.push(token);
                            }
                        }
                    }
                }
            }
        }
    }

    /// `timeout`: closes clients idle longer than it, at most once a second (Redis's
    /// `clientsCronHandleTimeout`: replicas, subscribers and blocked clients stay).
    fn close_idle(&mut self) {
        let secs = self.shared.idle_timeout_s.load(Ordering::Relaxed);
        if secs == 0 {
            return;
        }
        let now = crate::server::unix_ms();
        if now.saturating_sub(self.idle_checked_ms) < 1000 {
            return;
        }
        self.idle_checked_ms = now;
        let idle: Vec<usize> = self
            .conns
            .iter()
            .enumerate()
            .filter_map(|(t, c)| {
                let c = &c.as_ref()?.client;
                let since = c.last_io_ms.max(c.created_ms);
                (!c.is_replica_link
                    && !c.migration_conn
                    && c.subscriptions() == 0
                    && !c.blocked
                    && now.saturating_sub(since) > secs * 1000)
                    .then_some(t)
            })
            .collect();
        for t in idle {
            tracing::debug!("Closing idle client");
            self.close(t);
        }
    }

    /// Runs a CLIENT LIST / KILL on this thread's connections ([`crate::clients`]).
    fn fanout(&mut self, f: &crate::clients::Fanout) {
        let now = crate::server::unix_ms();
        for (token, slot) in self.conns.iter_mut().enumerate() {
            let Some(c) = slot else { continue };
            c.client.conn = facts(c, c.rbuf.len());
            let client = &c.client;
            let proto = c.out.proto;
            if f.visit(client, now, || client.info_line(now, proto)) && f.kills() {
                c.close_after_flush = true;
                self.to_write.push(token);
            }
        }
        f.part_done(&self.shared);
    }

    /// Re-runs the buffers of connections whose writes waited for a write pause.
    fn retry_paused(&mut self) {
        let mut list = std::mem::take(&mut self.paused);
        list.sort_unstable();
        list.dedup();
        for token in list {
            let Some(Some(c)) = self.conns.get_mut(token) else {
                continue;
            };
            if c.client.blocked || c.close_after_flush {
                continue;
            }
            if execute_buffer(&self.shared, c, self.limits) {
                self.paused.push(token);
            }
            if !c.out.buf.is_empty() {
                self.to_write.push(token);
            }
        }
    }

    fn add_conn(&mut self, s: std::net::TcpStream, id: u64, tls: bool) {
        // Counted by the gate until its client is (or is not) created below.
        struct Pending<'a>(&'a ClientGate);
        impl Drop for Pending<'_> {
            fn drop(&mut self) {
                self.0.pending.fetch_sub(1, Ordering::Relaxed);
            }
        }
        let shared = Arc::clone(&self.shared);
        let _pending = Pending(&shared.clients);
        if s.set_nonblocking(true).is_err() {
            return;
        }
        keepalive(&s, self.shared.config.tcp_keepalive_s);
        let peer = s.peer_addr().ok();
        let local = s.local_addr().ok();
        let stream = TcpStream::from_std(s);
        let mut stream = match (&self.shared.tls, tls) {
            (Some(t), true) => match t.current().accept(stream) {
                Ok(s) => s,
                Err(e) => {
                    tracing::debug!("Error accepting a client connection: {e}");
                    return;
                }
            },
            _ => Stream::Plain(stream),
        };
        let token = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        if self
            .poll
            .registry()
            .register(&mut stream, Token(token), Interest::READABLE)
            .is_err()
        {
            self.free.push(token);
            return;
        }
        let mut client = ClientCtx::new(&self.shared, id, self.index, token, peer, local);
        if tls {
            if let Some(cs) = client.cluster.as_mut() {
                // MOVED / ASK / CLUSTER SLOTS etc. give a TLS client the TLS ports.
                *cs = ferrocluster_command::ClientState::new(true, cs.ipv6());
            }
        }
        self.conns[token] = Some(Conn {
            stream,
            rbuf: Vec::with_capacity(READ_CHUNK),
            out: Out::new(),
            args: Vec::with_capacity(8),
            inline: Vec::new(),
            settled: 0,
            client,
            close_after_flush: false,
            want_write: false,
            soft_since: None,
            told_unsent: 0,
        });
        // Bytes may already be waiting; edge-triggered readiness would not report them again.
        self.to_read.push(token);
    }

    fn close(&mut self, token: usize) {
        if let Some(mut c) = self.conns.get_mut(token).and_then(Option::take) {
            let _ = self.poll.registry().deregister(&mut c.stream);
            c.client.on_close(&self.shared);
            self.free.push(token);
        }
    }

    fn read_and_execute(&mut self, token: usize) {
        let Some(Some(c)) = self.conns.get_mut(token) else {
            return;
        };
        if c.close_after_flush {
            return;
        }
        // A blocked client (WAIT, BLPOP, ...) is still read, as Valkey reads a blocked
        // client's socket: a close is noticed at once (it leaves the waiters, so a push never
        // goes to a closed connection) and what it sends meanwhile waits in its buffer,
        // executed once it is answered (which re-runs the buffer and schedules a read).
        let blocked = c.client.blocked;
        let n = match c.stream.read(&mut self.scratch) {
            Ok(0) => {
                self.close(token);
                return;
            }
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                if c.stream.wants_write() {
                    // A handshake message the socket did not take yet.
                    self.to_write.push(token);
                }
                return;
            }
            Err(e) => {
                if c.stream.is_tls() && e.kind() == ErrorKind::InvalidData {
                    // Valkey `clientAcceptHandler`'s words (a failed handshake, a bad record).
                    tracing::debug!(
                        "Error accepting a client connection: {e} (addr={})",
                        c.client.addr.map(|a| a.to_string()).unwrap_or_default()
                    );
                }
                self.close(token);
                return;
            }
        };
        c.rbuf.extend_from_slice(&self.scratch[..n]);
        if n == READ_CHUNK {
            self.read_again.push(token);
        }
        let Some(Some(c)) = self.conns.get_mut(token) else {
            return;
        };
        self.shared.stats.net_input_bytes(n);
        c.client.net_in += n as u64;
        if !blocked && execute_buffer(&self.shared, c, self.limits) {
            self.paused.push(token);
        }
        if c.rbuf.len() - c.settled.min(c.rbuf.len()) > self.shared.config.client_query_buffer_limit
        {
            // Valkey and Redis 7.0 close such a client without a reply
            // (tests/vectors/resp-cases.json, `qbuf-*`) and log it.
            tracing::warn!(
                client = c.client.id,
                addr = ?c.client.addr,
                qbuf = c.rbuf.len() - c.settled,
                "closing client that reached max query buffer length"
            );
            self.close(token);
            return;
        }
        if !c.out.buf.is_empty() || c.close_after_flush {
            self.to_write.push(token);
        }
    }

    fn flush_all(&mut self) {
        // The AOF first: no reply of this turn leaves before its write is in the file (and,
        // with `appendfsync always`, fsynced): Redis's `beforeSleep` order.
        if let Err(e) = self.shared.aof.flush() {
            crate::aof::exit_fatal(&e);
        }
        let mut list = std::mem::take(&mut self.to_write);
        list.sort_unstable();
        list.dedup();
        for &token in &list {
            let Some(Some(c)) = self.conns.get_mut(token) else {
                continue;
            };
            // TLS records left from the last write (or a handshake message) go first.
            let mut closed = c.stream.flush_pending().is_err();
            // Replies waiting for a nodes.conf write hold back what follows them.
            let ready = c.client.writable(c.out.buf.len());
            if ready > 0 && !closed {
                match c.stream.write(&c.out.buf[..ready]) {
                    Ok(n) => {
                        self.shared.stats.net_output_bytes(n);
                        c.out.buf.drain(..n);
                        c.client.written(n);
                    }
                    Err(e)
                        if e.kind() == ErrorKind::WouldBlock
                            || e.kind() == ErrorKind::Interrupted => {}
                    Err(_) => closed = true,
                }
            }
            if c.client.is_replica_link && c.out.buf.len() != c.told_unsent {
                // client-output-buffer-limit replica: the engine hears it at its next tick.
                c.told_unsent = c.out.buf.len();
                self.shared
                    .replica_unsent
                    .lock()
                    .insert(c.client.id, c.told_unsent as u64);
            }
            let flushed =
                c.out.buf.is_empty() && c.client.reply_holes.is_empty() && !c.stream.wants_write();
            if closed || (flushed && c.close_after_flush) {
                self.close(token);
                continue;
            }
            let need = c.client.writable(c.out.buf.len()) > 0 || c.stream.wants_write();
            if need != c.want_write {
                c.want_write = need;
                let interest = if need {
                    Interest::READABLE | Interest::WRITABLE
                } else {
                    Interest::READABLE
                };
                let _ = self
                    .poll
                    .registry()
                    .reregister(&mut c.stream, Token(token), interest);
            }
            if c.out.buf.capacity() > 1024 * 1024 && c.out.buf.is_empty() {
                c.out.buf = Vec::with_capacity(16 * 1024);
            }
        }
        list.clear();
        self.to_write = list;
    }
}

/// `client-output-buffer-limit` (Valkey `closeClientOnOutputBufferLimitReached`, asynchronous
/// form): a client whose unsent replies passed its class's limit ([`over_output_limit`])
/// loses them and is closed once this turn's writes are done, with Valkey's log line. Called
/// on each delivery to the connection and after each command it runs (Valkey checks on each
/// reply added), so a client that pipelines requests and never reads stops being served at
/// the command that passes the limit. Returns whether it is now closing; `now` is unix ms.
fn close_if_over_output_limit(
    limits: &crate::config::OutputLimits,
    c: &mut Conn,
    now: u64,
) -> bool {
    if c.close_after_flush || !over_output_limit(limits, c, now) {
        return false;
    }
    c.client.conn = facts(c, c.rbuf.len());
    let proto = c.out.proto;
    tracing::warn!(
        "Client {} scheduled to be closed ASAP for overcoming of output buffer limits.",
        c.client.info_line(now, proto)
    );
    c.out.buf.clear();
    c.client.reply_holes.clear();
    c.close_after_flush = true;
    true
}

/// Whether a client's unsent output passed its class of `client-output-buffer-limit` (Valkey
/// `checkClientOutputBufferLimits`): at least `hard` bytes, or at least `soft` bytes for more
/// than `soft_secs` seconds. The class is Valkey `getClientType`'s: `pubsub` for a subscriber,
/// `normal` for any other client (MONITOR included); a replica link is the replication
/// engine's (`replica` class, `Replication::handle_replica_pending`). `now` is unix ms.
fn over_output_limit(limits: &crate::config::OutputLimits, c: &mut Conn, now: u64) -> bool {
    if c.client.is_replica_link {
        return false;
    }
    let class = if c.client.subscriptions() > 0 {
        limits.pubsub
    } else {
        limits.normal
    };
    let used = c.out.buf.len() as u64;
    if class.hard > 0 && used >= class.hard {
        return true;
    }
    if class.soft > 0 && used >= class.soft {
        let since = *c.soft_since.get_or_insert(now);
        return now.saturating_sub(since) > class.soft_secs * 1000;
    }
    c.soft_since = None;
    false
}

/// `tcp-keepalive` on a client socket as Redis's `anetKeepAlive`: SO_KEEPALIVE, the first
/// probe after `secs` idle seconds, then every `secs / 3`, three probes. A socket option the
/// kernel refuses leaves the connection as it is.
fn keepalive(s: &std::net::TcpStream, secs: u32) {
    use rustix::net::sockopt;
    if secs == 0 {
        return;
    }
    let _ = sockopt::set_socket_keepalive(s, true);
    let _ = sockopt::set_tcp_keepidle(s, Duration::from_secs(u64::from(secs)));
    let _ = sockopt::set_tcp_keepintvl(s, Duration::from_secs(u64::from((secs / 3).max(1))));
    let _ = sockopt::set_tcp_keepcnt(s, 3);
}

/// The connection's socket and buffer figures for CLIENT INFO / LIST, with `unparsed`
/// bytes of requests still in the query buffer.
fn facts(c: &Conn, unparsed: usize) -> crate::clients::ConnFacts {
    use std::os::fd::AsRawFd;
    crate::clients::ConnFacts {
        fd: c.stream.tcp().as_raw_fd(),
        qbuf: unparsed,
        qbuf_free: c.rbuf.capacity() - c.rbuf.len(),
        rbs: c.rbuf.capacity(),
        omem: c.out.buf.capacity(),
        writing: c.want_write,
        closing: c.close_after_flush,
    }
}

/// Parses every complete request in the connection's buffer and runs them as one batch.
fn execute_buffer(shared: &Shared, c: &mut Conn, limits: Limits) -> bool {
    let mut paused = false;
    let mut pos = 0;
    let mut guard = None;
    // One clock read per batch (what one read brought, at most READ_CHUNK bytes), taken once
    // the lock is held so a wait for the lock does not age it.
    let mut now = 0;
    // client-output-buffer-limit, checked after each command ([`close_if_over_output_limit`]).
    let out_limits = *shared.output_limits.read();
    c.settled = 0;
    loop {
        if c.client.migration_conn && pos < c.rbuf.len() {
            // A slot import link: its bytes go to the ASM data plane (at most what one read
            // brought, so the lock is held for one batch as for any client).
            let state = guard.get_or_insert_with(|| {
                let locked = shared.state.lock();
                now = crate::server::unix_ms();
                locked
            });
            if crate::migrate::import_bytes(shared, state, &c.client, &c.rbuf[pos..]) {
                pos = c.rbuf.len();
                break;
            }
        }
        let limits = Limits {
            unauthenticated: !c.client.authed,
            ..limits
        };
        match parse_request(&c.rbuf[pos..], &mut c.args, &mut c.inline, limits) {
            Parsed::Command { consumed, inline } => {
                if !c.args.is_empty() {
                    let from = if inline {
                        &c.inline[..]
                    } else {
                        &c.rbuf[pos..]
                    };
                    let args = crate::client::Args::new(from, &c.args);
                    let state = guard.get_or_insert_with(|| {
                        let locked = shared.state.lock();
                        now = crate::server::unix_ms();
                        locked
                    });
                    c.client.last_io_ms = now;
                    c.client.conn = facts(c, c.rbuf.len() - pos - consumed);
                    if (state.writes_paused_until.is_some() || state.client_pause.is_some())
                        && !c.client.is_replica_link
                        && is_paused(state, &c.client, &args, now)
                    {
                        // A manual failover paused client writes, or CLIENT PAUSE paused
                        // writes or every command (redis-server pauses the client; replicas
                        // are never paused): the request stays in the buffer and is retried.
                        paused = true;
                        break;
                    }
                    let (reply_at, holes) = (c.out.buf.len(), c.client.reply_holes.len());
                    let subscribing = c.client.reply != crate::client::ReplyMode::On
                        && [
                            "subscribe",
                            "psubscribe",
                            "ssubscribe",
                            "unsubscribe",
                            "punsubscribe",
                            "sunsubscribe",
                        ]
                        .iter()
                        .any(|n| args.get(0).eq_ignore_ascii_case(n.as_bytes()));
                    let flow = crate::commands::execute(
                        shared,
                        state,
                        &mut c.client,
                        &args,
                        &mut c.out,
                        now,
                    );
                    // CLIENT REPLY OFF / SKIP: the reply is dropped (not one that waits for
                    // nodes.conf: its place is kept for the write that fills it).
                    if c.client.reply != crate::client::ReplyMode::On {
                        let (drop, next) = c.client.reply.after_command();
                        // (Un)subscribe confirmations are pushes, sent in every mode (Valkey
                        // `addReplyPubsubSubscribed` and the like).
                        if drop && !subscribing && c.client.reply_holes.len() == holes {
                            c.out.buf.truncate(reply_at);
                        }
                        c.client.reply = next;
                    }
                    if close_if_over_output_limit(&out_limits, c, now) {
                        // Valkey stops reading a client scheduled to be closed (the rest of
                        // its pipeline is not run).
                        pos += consumed;
                        break;
                    }
                    if flow == crate::client::Flow::Close {
                        c.close_after_flush = true;
                        pos += consumed;
                        break;
                    }
                    if c.client.blocked {
                        pos += consumed;
                        break;
                    }
                }
                pos += consumed;
            }
            Parsed::Incomplete { settled } => {
                c.settled = settled;
                break;
            }
            Parsed::Error(e) => {
                tracing::debug!(client = c.client.id, "protocol error: {e:?}");
                e.write_reply(&mut c.out.buf);
                c.close_after_flush = true;
                pos = c.rbuf.len();
                break;
            }
        }
    }
    if let Some(mut state) = guard {
        crate::repl::flush(shared, &mut state);
    }
    if pos > 0 {
        c.rbuf.drain(..pos);
    }
    if c.rbuf.capacity() > 4 * READ_CHUNK && c.rbuf.len() < READ_CHUNK {
        c.rbuf.shrink_to(2 * READ_CHUNK);
    }
    shared.clients.set_paused(&mut c.client, paused);
    paused
}

/// Whether this request must wait for the end of a pause (a manual failover's write pause or
/// CLIENT PAUSE): a write pause holds what may feed the replication stream (Valkey
/// `processCommand`'s `is_may_replicate_command`): a write, a `may_replicate` command, an EXEC
/// whose queue holds one.
fn is_paused(
    state: &crate::server::State,
    client: &crate::client::ClientCtx,
    args: &crate::client::Args<'_>,
    now: u64,
) -> bool {
    let Some(spec) = crate::table::lookup(args.get(0)) else {
        return false;
    };
    // Refused before the pause check (Valkey `processCommand`: a wrong arity or an unknown
    // subcommand is answered at once).
    if crate::commands::resolve(args).is_err() {
        return false;
    }
    let replicates = |s: &crate::table::Spec| s.is_write() || crate::commands::may_replicate(s);
    let write = replicates(spec)
        || (spec.cmd == crate::table::Cmd::Exec && crate::commands::queued_any(client, replicates));
    (write && state.writes_paused(now)) || state.client_pause.is_some_and(|p| p.holds(now, write))
}

//! The cluster bus driver: the bus listeners, the links, and the bytes between them and a
//! [`ClusterNode`].
//!
//! One [`BusDriver`] owns every bus socket of a node: a listener per `bind` address (IPv4 and
//! IPv6, Valkey `clusterInit`), the inbound links it accepts, and the outbound links the node
//! asks for with `Output::Connect`. It keeps the map between the node's [`LinkId`]s and the
//! sockets. It is one `mio::Poll` (epoll on Linux), edge-triggered, non-blocking; see the crate
//! docs for why not a thread per link (`benches/benches/bus_driver.rs` measures both).
//!
//! # Use
//! 1. [`BusDriver::bind`] (or [`BusDriver::new`] with listeners of your own), then
//!    [`BusDriver::set_sendbuf_limit`] with `cluster-link-sendbuf-limit`.
//! 2. Wait: [`BusDriver::wait`] with the time until `ClusterNode::poll_timeout` (the drive
//!    loop does this). It accepts, reads, finishes connects and writes what is queued; it
//!    returns at once while inputs are waiting for [`BusDriver::feed`]. A host with an event
//!    loop of its own registers [`BusDriver`]'s descriptor (`AsRawFd`, readable when there is
//!    something to do) and calls `wait(Some(Duration::ZERO))` when it is readable.
//! 3. [`BusDriver::feed`] hands what happened to the node, in the order it happened:
//!    accepted connections (`handle_accept_local`, the node picks the link's ID), bytes
//!    (`handle_link_bytes`), connect results and closes (`handle_link`).
//! 4. Give every bus output the node polls to [`BusDriver::handle_output`] (or call
//!    [`BusDriver::connect`] / [`BusDriver::transmit`] / [`BusDriver::close`]), in order.
//!
//! # Semantics the driver takes over
//! * **Connect**: non-blocking; the result is reported at the next `feed` as
//!   `LinkEvent::Connected` or `LinkEvent::ConnectFailed` (also when the connect fails at
//!   once). The driver has no connect timeout of its own: the node closes a link that does not
//!   answer within its timeouts (Valkey's `clusterNodeCronHandleReconnect`). Bytes transmitted
//!   while connecting are sent once connected. `TCP_NODELAY` is set on every link, as Valkey.
//! * **Close**: `Output::Close` drops the socket at once, *without* flushing what the driver
//!   still holds for it (Valkey's `freeClusterLink` frees the send queue the same way); bytes
//!   the kernel already accepted are still delivered by TCP. No event is reported for it (the
//!   node has forgotten the link). A close by the peer or an I/O error is reported as
//!   `LinkEvent::Closed`, after the bytes read before it.
//! * **Connect races**: an output for a link the driver does not hold (closed meanwhile by
//!   the peer, reported or about to be) is ignored; the node ignores events of links it
//!   already forgot.
//! * **Send-buffer limit** (`cluster-link-sendbuf-limit`, Valkey
//!   `freeClusterLinkOnBufferLimitReached`): a link whose unsent bytes pass the limit after a
//!   write attempt is freed, counted ([`BusDriver::links_buffer_limit_exceeded`]) and reported
//!   to the node as closed (an outbound link is then reconnected by the node, an inbound one
//!   by the peer). Valkey checks in `clusterCron` every 100 ms; the driver checks whenever it
//!   queued or wrote bytes, so it frees the same slow links, a little earlier. Valkey counts
//!   its queue's memory (message blocks plus 24 bytes of list node each and a 48-byte list
//!   header); the driver counts the unsent bytes themselves.
//! * **Send-buffer figures**: [`BusDriver::send_buffer`] gives each link's
//!   `send-buffer-allocated` (the capacity the driver holds for it) and `send-buffer-used`
//!   (unsent bytes): Redis 7.0's `sdsalloc` / `sdslen` of its link buffer. An idle link reads
//!   0 / 0, as on Redis 7.0 (Valkey 8+ shows its empty list's 48 bytes).
//! * **Accept errors** (`EMFILE`, `ENFILE`, `ENOBUFS`, ...) never stop a listener: the
//!   connections wait in the kernel's backlog and the driver tries again on every turn, at
//!   most 100 ms apart, until one succeeds (an edge-triggered listener is not woken again by
//!   connections that were already pending). The first failure and the recovery are logged.
//! * **Fairness**: at most [`READ_BUDGET`] bytes are read from one link and at most
//!   [`ACCEPTS_PER_TURN`] connections accepted from one listener per turn; the rest waits for
//!   the next turn, which does not sleep. One busy peer cannot starve the others or the node's
//!   timers.

use crate::listen::{listen_all, BindAddr};
use crate::tls::{Stream, TlsReloader};
use ferrocluster_node::{ClusterNode, LinkEvent, LinkId, Millis, Output};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// Bytes read from one link per turn at most (the rest is read next turn).
pub const READ_BUDGET: usize = 256 * 1024;

/// Connections accepted from one listener per turn at most (Valkey
/// `MAX_CLUSTER_ACCEPTS_PER_CALL`).
pub const ACCEPTS_PER_TURN: usize = 1000;

/// How long a listener whose `accept` failed waits before the next try at most.
pub const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// A send buffer that grew past this and drained is given back.
const KEEP_CAPACITY: usize = 64 * 1024;

/// One read's landing buffer.
const READ_CHUNK: usize = 64 * 1024;

const WAKER: Token = Token(usize::MAX);

/// Listener `i` is token `usize::MAX - 1 - i`; link `n` is token `n`.
fn listener_token(i: usize) -> Token {
    Token(usize::MAX - 1 - i)
}

fn link_token(id: LinkId) -> Token {
    // LinkIds count up from 1 in the node; they never reach the listeners' tokens.
    Token(id.0 as usize)
}

/// A link's send-buffer figures (CLUSTER LINKS `send-buffer-allocated` and
/// `send-buffer-used`), bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SendBuffer {
    /// Capacity held for the link's unsent bytes.
    pub allocated: u64,
    /// Unsent bytes.
    pub used: u64,
}

/// Unsent bytes of a link: `buf[sent..]`.
#[derive(Debug, Default)]
struct SendQueue {
    buf: Vec<u8>,
    sent: usize,
}

impl SendQueue {
    fn used(&self) -> usize {
        self.buf.len() - self.sent
    }

    fn figures(&self) -> SendBuffer {
        SendBuffer {
            allocated: self.buf.capacity() as u64,
            used: self.used() as u64,
        }
    }

    /// Writes as much as the socket takes. `Err` = the link is broken.
    fn flush(&mut self, stream: &mut Stream) -> std::io::Result<()> {
        // TLS records a write left in the session go first.
        stream.flush_pending()?;
        while self.sent < self.buf.len() {
            match stream.write(&self.buf[self.sent..]) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.sent == self.buf.len() {
            self.sent = 0;
            if self.buf.capacity() > KEEP_CAPACITY {
                self.buf = Vec::new();
            } else {
                self.buf.clear();
            }
        } else if self.sent > self.buf.len() / 2 {
            self.buf.drain(..self.sent);
            self.sent = 0;
        }
        Ok(())
    }
}

#[derive(Debug)]
struct Link {
    /// Plain TCP, or TLS with `tls-cluster yes` (the handshake runs inside reads and writes).
    stream: Stream,
    /// Outbound and not connected yet.
    connecting: bool,
    /// Made by `connect` (not accepted).
    outbound: bool,
    out: SendQueue,
}

#[derive(Debug)]
struct Listener {
    sock: TcpListener,
    addr: SocketAddr,
    /// Try `accept` this turn without a readiness event (an error, or the per-turn cap).
    retry: bool,
    /// Failed accepts since the last success (for the log).
    failures: u64,
}

/// Something for the node, in the order it happened ([`BusDriver::poll_input`]).
#[derive(Debug)]
pub enum BusInput {
    /// A new inbound connection: ask the node for its link ID
    /// (`ClusterNode::handle_accept_local`) and give both to [`BusDriver::adopt`].
    Accepted(Accepted),
    /// Bytes read on a link (`ClusterNode::handle_link_bytes`).
    Bytes {
        /// The link.
        link: LinkId,
        /// The bytes, in order.
        bytes: Vec<u8>,
    },
    /// A connect result or a close (`ClusterNode::handle_link`).
    Link(LinkEvent),
}

/// An accepted bus connection that has no link ID yet.
#[derive(Debug)]
pub struct Accepted {
    stream: Stream,
    /// The peer's IP.
    pub peer: IpAddr,
    /// The local IP the connection arrived on (`None` if the system did not say).
    pub local: Option<IpAddr>,
}

use BusInput as Input;

/// The bus sockets of one node (see the module docs).
#[derive(Debug)]
pub struct BusDriver {
    poll: Poll,
    events: Events,
    waker: Arc<Waker>,
    listeners: Vec<Listener>,
    links: HashMap<LinkId, Link>,
    inputs: VecDeque<Input>,
    /// Links whose read budget ran out last turn.
    read_again: Vec<LinkId>,
    sendbuf_limit: u64,
    limit_exceeded: u64,
    /// Links whose send-buffer figures changed since the last `feed`.
    figures_changed: Vec<LinkId>,
    scratch: Box<[u8]>,
    /// `tls-cluster yes`: every link, accepted or made, is TLS with these configurations.
    tls: Option<TlsReloader>,
}

impl std::os::fd::AsRawFd for BusDriver {
    /// The poll descriptor: readable when a socket of the driver is ready or it was woken,
    /// for a host that waits in an event loop of its own (then call `wait(Some(ZERO))`).
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.poll.as_raw_fd()
    }
}

impl BusDriver {
    /// Binds the bus port on every address of `bind` ([`listen_all`]: Valkey's rules and
    /// texts) and builds the driver.
    ///
    /// # Errors
    /// The bind error text, or the poll's creation error.
    pub fn bind(bind: &[BindAddr], port: u16) -> Result<BusDriver, String> {
        let listeners = listen_all(bind, port)?;
        BusDriver::new(listeners).map_err(|e| format!("can't start the cluster bus: {e}"))
    }

    /// A driver over listening sockets the caller made (made non-blocking here).
    ///
    /// # Errors
    /// Creating the poll or registering a listener failed.
    pub fn new(listeners: Vec<std::net::TcpListener>) -> std::io::Result<BusDriver> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let mut ls = Vec::with_capacity(listeners.len());
        for (i, l) in listeners.into_iter().enumerate() {
            l.set_nonblocking(true)?;
            let addr = l.local_addr()?;
            let mut sock = TcpListener::from_std(l);
            poll.registry()
                .register(&mut sock, listener_token(i), Interest::READABLE)?;
            ls.push(Listener {
                sock,
                addr,
                retry: false,
                failures: 0,
            });
        }
        Ok(BusDriver {
            poll,
            events: Events::with_capacity(256),
            waker,
            listeners: ls,
            links: HashMap::new(),
            inputs: VecDeque::new(),
            read_again: Vec::new(),
            sendbuf_limit: 0,
            limit_exceeded: 0,
            figures_changed: Vec::new(),
            scratch: vec![0; READ_CHUNK].into_boxed_slice(),
            tls: None,
        })
    }

    /// `tls-cluster yes`: from now on every accepted and every outgoing link runs TLS with
    /// `tls`'s configurations in force when it is made (mutual authentication: a peer
    /// without a certificate of the CA fails the handshake, is logged with Valkey's words
    /// and closed; no byte of it reaches the node). A plain TCP peer on the TLS bus port
    /// gets nothing readable: the driver answers it with a TLS alert at most.
    pub fn set_tls(&mut self, tls: TlsReloader) {
        self.tls = Some(tls);
    }

    /// The addresses the listeners are bound to.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.listeners.iter().map(|l| l.addr).collect()
    }

    /// A handle that makes a [`BusDriver::wait`] in progress (or the next one) return at
    /// once, from any thread: call it after giving the node an input from another thread
    /// (a client command) so its outputs are acted on without waiting for the timeout.
    pub fn waker(&self) -> Arc<Waker> {
        Arc::clone(&self.waker)
    }

    /// Sets `cluster-link-sendbuf-limit` in bytes (0 = no limit, Valkey's default). It
    /// applies from the next write on.
    pub fn set_sendbuf_limit(&mut self, bytes: u64) {
        self.sendbuf_limit = bytes;
    }

    /// Links freed because their send buffer passed the limit, since start (CLUSTER INFO
    /// `total_cluster_links_buffer_limit_exceeded`).
    pub fn links_buffer_limit_exceeded(&self) -> u64 {
        self.limit_exceeded
    }

    /// A link's send-buffer figures; `None` for a link the driver does not hold.
    pub fn send_buffer(&self, link: LinkId) -> Option<SendBuffer> {
        self.links.get(&link).map(|l| l.out.figures())
    }

    /// The links whose send-buffer figures changed since the last call, each once, (0, 0)
    /// for a link that is gone (for a host that reports them itself; [`BusDriver::feed`]
    /// takes and reports them).
    pub fn take_changed_send_buffers(&mut self) -> Vec<(LinkId, SendBuffer)> {
        let mut ids = std::mem::take(&mut self.figures_changed);
        ids.sort_unstable();
        ids.dedup();
        ids.into_iter()
            .map(|id| (id, self.send_buffer(id).unwrap_or_default()))
            .collect()
    }

    /// Open links (inbound and outbound, connecting included).
    pub fn link_count(&self) -> usize {
        self.links.len()
    }

    /// Whether inputs wait for [`BusDriver::feed`].
    pub fn has_input(&self) -> bool {
        !self.inputs.is_empty()
    }

    /// Waits up to `timeout` (`None`: without limit) for something to happen on the bus or a
    /// wake-up, then does the I/O that is ready: accepts, reads (within the budgets), connect
    /// results, writes of queued bytes. Returns at once when inputs are waiting to be fed or
    /// work is left from the last turn; waits at most [`ACCEPT_RETRY`] while a listener is
    /// retrying. What it found is handed to the node by [`BusDriver::feed`].
    ///
    /// # Errors
    /// The poll itself failed (not a socket: a socket error closes that link).
    pub fn wait(&mut self, timeout: Option<Duration>) -> std::io::Result<()> {
        let busy = !self.inputs.is_empty()
            || !self.read_again.is_empty()
            || self.listeners.iter().any(|l| l.retry && l.failures == 0);
        let retrying = self.listeners.iter().any(|l| l.retry);
        let timeout = if busy {
            Some(Duration::ZERO)
        } else if retrying {
            Some(timeout.map_or(ACCEPT_RETRY, |t| t.min(ACCEPT_RETRY)))
        } else {
            timeout
        };
        match self.poll.poll(&mut self.events, timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        let mut ready_listeners = Vec::new();
        let mut ready_links = Vec::new();
        for ev in self.events.iter() {
            let t = ev.token();
            if t == WAKER {
                continue;
            }
            if let Some(i) = (usize::MAX - 1)
                .checked_sub(t.0)
                .filter(|i| *i < self.listeners.len())
            {
                ready_listeners.push(i);
            } else {
                ready_links.push((
                    LinkId(t.0 as u64),
                    ev.is_readable() || ev.is_read_closed() || ev.is_error(),
                    ev.is_writable() || ev.is_write_closed(),
                ));
            }
        }
        for (i, l) in self.listeners.iter_mut().enumerate() {
            if l.retry || ready_listeners.contains(&i) {
                accept_from(l, &mut self.inputs, self.tls.as_ref());
            }
        }
        for id in std::mem::take(&mut self.read_again) {
            if !ready_links.iter().any(|(l, _, _)| *l == id) {
                ready_links.push((id, true, false));
            }
        }
        for (id, readable, writable) in ready_links {
            self.link_ready(id, readable, writable);
        }
        Ok(())
    }

    /// A socket event on `id`.
    fn link_ready(&mut self, id: LinkId, readable: bool, writable: bool) {
        let Some(link) = self.links.get_mut(&id) else {
            return;
        };
        if link.connecting {
            match link.stream.tcp().take_error() {
                Ok(None) => {}
                Ok(Some(_)) | Err(_) => {
                    self.drop_link(id);
                    self.inputs
                        .push_back(Input::Link(LinkEvent::ConnectFailed(id)));
                    return;
                }
            }
            match link.stream.tcp().peer_addr() {
                Ok(_) => {
                    link.connecting = false;
                    self.inputs.push_back(Input::Link(LinkEvent::Connected(id)));
                }
                Err(e)
                    if e.kind() == ErrorKind::NotConnected
                        || e.raw_os_error()
                            == Some(rustix::io::Errno::INPROGRESS.raw_os_error()) =>
                {
                    return
                }
                Err(_) => {
                    self.drop_link(id);
                    self.inputs
                        .push_back(Input::Link(LinkEvent::ConnectFailed(id)));
                    return;
                }
            }
            // Connected: what was transmitted meanwhile goes now.
            self.write_queued(id);
        } else if writable {
            self.write_queued(id);
        }
        if readable {
            self.read(id);
        }
    }

    /// Reads up to [`READ_BUDGET`] bytes from `id`.
    fn read(&mut self, id: LinkId) {
        let Some(link) = self.links.get_mut(&id) else {
            return;
        };
        let mut got = Vec::new();
        let mut closed = false;
        loop {
            if got.len() >= READ_BUDGET {
                self.read_again.push(id);
                break;
            }
            match link.stream.read(&mut self.scratch) {
                Ok(0) => {
                    closed = true;
                    break;
                }
                Ok(n) => got.extend_from_slice(&self.scratch[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    if e.kind() == ErrorKind::InvalidData && link.stream.is_tls() {
                        // A failed handshake (a certificate of another CA, none, not TLS)
                        // or a bad record: Valkey's `clusterConnAcceptHandler` words.
                        let peer = link
                            .stream
                            .tcp()
                            .peer_addr()
                            .map(|a| a.to_string())
                            .unwrap_or_default();
                        if link.outbound {
                            // Valkey `clusterLinkConnectHandler`'s words.
                            tracing::info!(%id, "Connection with node at {peer} failed: {e}");
                        } else {
                            tracing::info!(
                                %id,
                                "Error accepting cluster node connection: {e} (peer {peer})"
                            );
                        }
                    }
                    closed = true;
                    break;
                }
            }
        }
        if link.stream.wants_write() {
            // A handshake message or alert the socket did not take: WRITABLE sends it.
            let _ = link.stream.flush_pending();
        }
        if !got.is_empty() {
            self.inputs.push_back(Input::Bytes {
                link: id,
                bytes: got,
            });
        }
        if closed {
            self.drop_link(id);
            self.inputs.push_back(Input::Link(LinkEvent::Closed(id)));
        }
    }

    /// Writes what is queued for `id`; a broken link is closed and reported, one over the
    /// send-buffer limit freed and counted.
    fn write_queued(&mut self, id: LinkId) {
        let Some(link) = self.links.get_mut(&id) else {
            return;
        };
        if link.connecting {
            self.check_limit(id);
            return;
        }
        let before = link.out.figures();
        if link.out.flush(&mut link.stream).is_err() {
            self.drop_link(id);
            self.inputs.push_back(Input::Link(LinkEvent::Closed(id)));
            return;
        }
        if link.out.figures() != before {
            self.figures_changed.push(id);
        }
        self.check_limit(id);
    }

    /// Valkey `freeClusterLinkOnBufferLimitReached`, on the unsent bytes.
    fn check_limit(&mut self, id: LinkId) {
        let Some(link) = self.links.get(&id) else {
            return;
        };
        let used = link.out.used() as u64;
        if self.sendbuf_limit == 0 || used <= self.sendbuf_limit {
            return;
        }
        tracing::warn!(
            %id,
            used,
            limit = self.sendbuf_limit,
            "Freeing cluster link due to exceeding send buffer memory limit."
        );
        self.limit_exceeded += 1;
        self.drop_link(id);
        self.inputs.push_back(Input::Link(LinkEvent::Closed(id)));
    }

    fn drop_link(&mut self, id: LinkId) {
        if let Some(mut l) = self.links.remove(&id) {
            let _ = self.poll.registry().deregister(&mut l.stream);
            self.figures_changed.push(id);
        }
    }

    /// Hands what happened since the last call to `node`, in order: accepted connections
    /// (the node picks their link IDs: `handle_accept_local`, which also lets it learn its
    /// own IP), bytes (`handle_link_bytes`), connect results and closes (`handle_link`); then
    /// the send-buffer figures that changed (`handle_link_send_buffer`) and the limit counter
    /// (`handle_links_buffer_limit_exceeded`), for CLUSTER LINKS and CLUSTER INFO.
    pub fn feed(&mut self, node: &mut ClusterNode, now: Millis) {
        self.feed_inputs(node, now);
        for (link, b) in self.take_changed_send_buffers() {
            node.handle_link_send_buffer(link, b.allocated, b.used);
        }
        node.handle_links_buffer_limit_exceeded(self.limit_exceeded);
    }

    fn feed_inputs(&mut self, node: &mut ClusterNode, now: Millis) {
        while let Some(input) = self.poll_input() {
            match input {
                Input::Accepted(a) => {
                    let id = match a.local {
                        Some(local) => node.handle_accept_local(a.peer, local, now),
                        None => node.handle_accept(a.peer, now),
                    };
                    if !self.adopt(a, id) {
                        node.handle_link(LinkEvent::Closed(id), now);
                    }
                }
                Input::Bytes { link, bytes } => node.handle_link_bytes(link, &bytes, now),
                Input::Link(e) => node.handle_link(e, now),
            }
        }
    }

    /// The next thing that happened, for a host that hands inputs to its node itself
    /// ([`BusDriver::feed`] is this loop).
    pub fn poll_input(&mut self) -> Option<BusInput> {
        self.inputs.pop_front()
    }

    /// Makes an accepted connection the link `link` (the ID the node gave it). `false`: the
    /// socket could not be registered and is closed; the caller reports
    /// `LinkEvent::Closed(link)` to the node.
    pub fn adopt(&mut self, accepted: Accepted, link: LinkId) -> bool {
        self.add_link(link, accepted.stream, false)
    }

    /// Registers `stream` as `link` (replacing a socket the node reused the ID of, which
    /// would be a node bug). `false`: it could not be registered and is dropped.
    fn add_link(&mut self, link: LinkId, mut stream: Stream, connecting: bool) -> bool {
        self.drop_link(link);
        let interest = Interest::READABLE | Interest::WRITABLE;
        if self
            .poll
            .registry()
            .register(&mut stream, link_token(link), interest)
            .is_err()
        {
            return false;
        }
        let out = SendQueue::default();
        self.links.insert(
            link,
            Link {
                stream,
                connecting,
                outbound: connecting,
                out,
            },
        );
        true
    }

    /// Acts on a bus output (`Connect`, `Transmit`, `Close`) and returns `None`; any other
    /// output is given back for the host.
    pub fn handle_output(&mut self, out: Output) -> Option<Output> {
        match out {
            Output::Connect { link, ip, port } => {
                self.connect(link, SocketAddr::new(ip, port));
                None
            }
            Output::Transmit { link, bytes } => {
                self.transmit(link, bytes);
                None
            }
            Output::Close { link } => {
                self.close(link);
                None
            }
            other => Some(other),
        }
    }

    /// Starts a non-blocking connect for `link` (`Output::Connect`). The result is reported
    /// at the next [`BusDriver::feed`].
    pub fn connect(&mut self, link: LinkId, addr: SocketAddr) {
        let stream = match TcpStream::connect(addr) {
            Ok(s) => s,
            Err(_) => {
                self.inputs
                    .push_back(Input::Link(LinkEvent::ConnectFailed(link)));
                return;
            }
        };
        let _ = stream.set_nodelay(true);
        let stream = match &self.tls {
            Some(t) => match t.current().connect(stream, addr.ip()) {
                Ok(s) => s,
                Err(e) => {
                    tracing::info!(%link, "Connection with node at {addr} failed: {e}");
                    self.inputs
                        .push_back(Input::Link(LinkEvent::ConnectFailed(link)));
                    return;
                }
            },
            None => Stream::Plain(stream),
        };
        if !self.add_link(link, stream, true) {
            self.inputs
                .push_back(Input::Link(LinkEvent::ConnectFailed(link)));
        }
    }

    /// Queues `bytes` on `link` and writes what the socket takes now (`Output::Transmit`).
    /// Ignored for a link the driver does not hold.
    pub fn transmit(&mut self, link: LinkId, bytes: Vec<u8>) {
        let Some(l) = self.links.get_mut(&link) else {
            return;
        };
        if l.out.used() == 0 {
            l.out.buf = bytes;
            l.out.sent = 0;
        } else {
            l.out.buf.extend_from_slice(&bytes);
        }
        self.figures_changed.push(link);
        self.write_queued(link);
    }

    /// Closes `link` at once, dropping its unsent bytes (`Output::Close`; see the module
    /// docs). No event is reported.
    pub fn close(&mut self, link: LinkId) {
        self.drop_link(link);
    }
}

/// Accepts from `l` until it would block, an error, or [`ACCEPTS_PER_TURN`].
fn accept_from(l: &mut Listener, inputs: &mut VecDeque<Input>, tls: Option<&TlsReloader>) {
    l.retry = false;
    for _ in 0..ACCEPTS_PER_TURN {
        match l.sock.accept() {
            Ok((stream, peer)) => {
                if l.failures > 0 {
                    tracing::info!(
                        addr = %l.addr,
                        failures = l.failures,
                        "cluster bus accept works again"
                    );
                    l.failures = 0;
                }
                let _ = stream.set_nodelay(true);
                let local = stream.local_addr().ok().map(|a| a.ip());
                let stream = match tls {
                    Some(t) => match t.current().accept(stream) {
                        Ok(s) => s,
                        Err(e) => {
                            tracing::info!("Error accepting cluster node connection: {e}");
                            continue;
                        }
                    },
                    None => Stream::Plain(stream),
                };
                inputs.push_back(Input::Accepted(Accepted {
                    stream,
                    peer: peer.ip(),
                    local,
                }));
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::ConnectionAborted => {}
            Err(e) => {
                if l.failures == 0 {
                    tracing::warn!(addr = %l.addr, "cluster bus accept failed, retrying: {e}");
                }
                l.failures += 1;
                l.retry = true;
                return;
            }
        }
    }
    // The cap: more may be pending.
    l.retry = true;
}

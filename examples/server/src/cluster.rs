//! The cluster side: the `ClusterNode` under the state lock, routing of client requests through
//! the command crate, the CLUSTER command, and the bus thread that moves bytes, time and files.

use crate::client::{Args, ClientCtx};
use crate::config::Config;
use crate::nodesconf::NodesConfFile;
use crate::resp::Out;
use crate::server::Value;
use crate::server::{unix_ms, Shared, State};
use crate::table::{Cmd, Spec};
use ferrocluster_command::{ClientState, ClusterContext, Dispatch, ErrorReply, RoutingConfig};
use ferrocluster_kvstore::KvStore;
use ferrocluster_node::{
    ClusterConfig, ClusterNode, CommandOutcome, CommandRequest, Event, LinkEvent, LinkId, Millis,
    NodeError, Output, SlotKeys,
};
use ferrocluster_slot::Slot;
use ferrocluster_topology::Reply;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

const WAKER: Token = Token(1);

/// Bus listener tokens count down from the top (links count up from 2).
fn listener_token(i: usize) -> Token {
    Token(usize::MAX - i)
}

fn listener_index(t: Token) -> Option<usize> {
    usize::MAX
        .checked_sub(t.0)
        .filter(|i| *i < crate::config::BIND_MAX)
}

/// The node and what the I/O threads need to reach the bus thread.
pub struct ClusterSide {
    /// The Sans-IO node.
    pub node: ClusterNode,
    /// Wakes the bus thread after a command queued outputs in the node.
    pub waker: Option<Arc<Waker>>,
    /// Number of open bus links (INFO).
    pub links_open: usize,
    /// Routing configuration.
    pub routing: RoutingConfig,
    /// The locked nodes.conf (durable, ordered writes: src/nodesconf.rs).
    pub conf: Arc<NodesConfFile>,
}

impl ClusterSide {
    /// Wakes the bus thread (outputs are waiting in the node).
    pub fn wake(&self) {
        if let Some(w) = &self.waker {
            let _ = w.wake();
        }
    }
}

/// Builds the node from the configuration and the saved nodes.conf (if any).
///
/// # Errors
/// A message naming the nodes.conf line and the reason when the file does not load, or the
/// invalid setting.
pub fn build_node(config: &Config, seed: u64) -> Result<ClusterSide, String> {
    let cc = ClusterConfig {
        // The slot migration source AUTHs to the target with our requirepass (all nodes of a
        // cluster share it, as replication does).
        primaryauth_set: config.requirepass.is_some(),
        ..config.cluster.clone()
    };
    let path = config.nodes_conf_path();
    // Lock before reading: a second process with the same file must not even load it.
    let conf = Arc::new(NodesConfFile::open(&path)?);
    let saved = match std::fs::read(&path) {
        Ok(b) => Some(b),
        Err(e) if e.kind() == ErrorKind::NotFound => None,
        Err(e) => return Err(format!("can't read {}: {e}", path.display())),
    };
    let node =
        ClusterNode::new(cc, Millis(unix_ms()), seed, saved.as_deref()).map_err(|e| match e {
            NodeError::NodesConf(c) => {
                format!("unrecoverable error loading {}: {c}", path.display())
            }
            other => format!("bad cluster configuration: {other}"),
        })?;
    // Redis saves the config at start (a new node's ID must survive a crash right after it).
    conf.write_current(node.persist_seq(), node.nodes_conf().as_bytes(), false)
        .map_err(|e| {
            format!(
                "Fatal: can't update cluster config file {}: {e}",
                path.display()
            )
        })?;
    tracing::info!(id = %node.myself_id(), file = %path.display(), loaded = saved.is_some(), "cluster node ready");
    Ok(ClusterSide {
        conf,
        node,
        waker: None,
        links_open: 0,
        routing: RoutingConfig {
            databases: config.cluster_databases as usize,
            ..RoutingConfig::default()
        },
    })
}

/// Collects a request's arguments as slices (on the stack for up to 8 arguments).
fn with_argv<R>(args: &Args<'_>, f: impl FnOnce(&[&[u8]]) -> R) -> R {
    const EMPTY: &[u8] = b"";
    if args.len() <= 8 {
        let mut a = [EMPTY; 8];
        for (i, slot) in a.iter_mut().enumerate().take(args.len()) {
            *slot = args.get(i);
        }
        f(&a[..args.len()])
    } else {
        let v: Vec<&[u8]> = (0..args.len()).map(|i| args.get(i)).collect();
        f(&v)
    }
}

/// What the cluster layer decided for a request.
pub enum ClusterDispatch {
    /// Run the command (by our table) now.
    Run,
    /// The reply is written already.
    Done,
    /// EXEC: run these queued commands.
    Exec(Vec<ferrocluster_command::QueuedCommand>),
}

/// What the command crate's routing reads of the node: the topology, the cluster state and
/// the routing options (this server's database count).
pub fn routing_ctx(side: &ClusterSide) -> ClusterContext<'_, ferrocluster_topology::Topology> {
    ClusterContext {
        view: side.node.topology(),
        state_ok: side.node.cluster_state_ok(),
        config: RoutingConfig {
            databases: side.routing.databases,
            ..side.node.routing_config()
        },
    }
}

/// Key presence for routing (ASK/TRYAGAIN): a key that is stored but logically expired
/// counts as present (Valkey's LOOKUP_NOEXPIRE).
pub fn key_present(kv: &KvStore<Value>, db: usize, key: &[u8]) -> bool {
    kv.exists(db, key, 0).unwrap_or(false)
}

/// Passes a request through the command crate's per-client state machine and router
/// (MULTI/ASKING/READONLY/SELECT and MOVED/ASK/TRYAGAIN/CROSSSLOT/CLUSTERDOWN).
pub fn dispatch(
    state: &mut State,
    client: &mut ClientCtx,
    args: &Args<'_>,
    out: &mut Out,
) -> ClusterDispatch {
    let State { kv, cluster, .. } = state;
    let Some(side) = cluster.as_ref() else {
        return ClusterDispatch::Run;
    };
    let ctx = routing_ctx(side);
    let keys = |db: usize, key: &[u8]| key_present(kv, db, key);
    let cs = client
        .cluster
        .get_or_insert_with(|| ClientState::new(false, false));
    let d = with_argv(args, |argv| {
        cs.handle_command_in(crate::table::table(), argv, &ctx, &keys)
    });
    client.db = cs.db();
    client.readonly = cs.readonly();
    client.asking = cs.asking();
    match d {
        Dispatch::Execute { .. } => ClusterDispatch::Run,
        Dispatch::Ok => {
            out.ok();
            ClusterDispatch::Done
        }
        Dispatch::Queued => {
            out.simple("QUEUED");
            ClusterDispatch::Done
        }
        Dispatch::Exec(q) => ClusterDispatch::Exec(q),
        Dispatch::Reject(e) => {
            out.buf.extend_from_slice(&e.to_resp());
            ClusterDispatch::Done
        }
    }
}

/// In non-cluster mode nothing is routed; in cluster mode routing happens in [`dispatch`].
pub fn route_request(
    state: &mut State,
    client: &mut ClientCtx,
    spec: &Spec,
    args: &Args<'_>,
    now: u64,
) -> Option<String> {
    let _ = (state, client, spec, args, now);
    None
}

/// PUBLISH goes to every node, SPUBLISH to the nodes of my shard, over the bus
/// (`ClusterNode::publish` / `spublish`); they deliver it to their own subscribers when the
/// bus thread sees `Event::PubSubMessage`.
pub fn propagate_publish(state: &mut State, shard: bool, channel: &[u8], payload: &[u8]) {
    if let Some(side) = state.cluster.as_mut() {
        let now = Millis(unix_ms());
        if shard {
            side.node.spublish(channel, payload, now);
        } else {
            side.node.publish(channel, payload, now);
        }
        side.wake();
    }
}

fn write_reply(reply: &Reply, out: &mut Out) {
    if out.resp3() {
        reply.encode_resp3(&mut out.buf);
    } else {
        reply.encode_resp2(&mut out.buf);
    }
}

/// The host's keyspace as the node's CLUSTER executor reads it (COUNTKEYSINSLOT,
/// GETKEYSINSLOT, the "node holds keys" checks).
struct KvKeys<'a>(&'a KvStore<Value>);

impl SlotKeys for KvKeys<'_> {
    fn count_keys_in_slot(&self, db: usize, slot: Slot) -> u64 {
        self.0.count_keys_in_slot(db, slot).unwrap_or(0)
    }
    fn keys_in_slot(&self, db: usize, slot: Slot, count: usize) -> Vec<Vec<u8>> {
        self.0
            .keys_in_slot(db, slot, count)
            .unwrap_or_default()
            .into_iter()
            .map(|k| k.to_vec())
            .collect()
    }
    fn db_size(&self, db: usize) -> u64 {
        self.0.dbsize(db).unwrap_or(0)
    }
    fn databases(&self) -> usize {
        self.0.databases()
    }
}

/// CLUSTER subcommands: parsed by the command crate and executed by the node
/// (`ClusterNode::cluster_command_argv`), replies encoded here.
pub fn cluster_command(
    shared: &Shared,
    state: &mut State,
    client: &mut ClientCtx,
    args: &Args<'_>,
    out: &mut Out,
    now: u64,
) {
    if state.cluster.is_none() {
        out.error("ERR This instance has cluster support disabled");
        return;
    }
    let _ = shared;
    let mut req = client
        .cluster
        .as_ref()
        .map(CommandRequest::from_client)
        .unwrap_or_default();
    req.db = client.db;
    // The connection is the node's handle for SYNCSLOTS (slot migration links).
    req.conn = Some(ferrocluster_node::ConnId(client.id));
    let syncslots = args.len() > 1 && args.get(1).eq_ignore_ascii_case(b"syncslots");
    if syncslots && client.io_thread != usize::MAX {
        crate::migrate::note_client_conn(state, client);
    }
    let State { kv, cluster, .. } = state;
    let Some(side) = cluster.as_mut() else {
        return;
    };
    let keys = KvKeys(kv);
    let mut outcome = with_argv(args, |argv| {
        side.node
            .cluster_command_argv(argv, &req, &keys, Millis(now))
    });
    if let CommandOutcome::ReplicateFirst { .. } = outcome {
        // The node asks that the command reach our replicas first (Valkey 8 replicates
        // SETSLOT before applying it). Our replication stream carries data only, so the
        // command is applied at once (see the report).
        req.replication_done = true;
        outcome = with_argv(args, |argv| {
            side.node
                .cluster_command_argv(argv, &req, &keys, Millis(now))
        });
    }
    // Durability before the reply (Redis saves nodes.conf, fsynced, inside the command): a
    // config change this command made (or one still waiting for the bus thread) is written
    // here, under the state lock, before anyone hears of it. The bus thread's later write of
    // the same `Persist` finds the bytes on disk and only acknowledges it.
    let sub = if args.len() > 1 { args.get(1) } else { b"" };
    let saveconfig = sub.eq_ignore_ascii_case(b"saveconfig");
    if !is_read_only_subcommand(sub) {
        // The snapshot ranks just above the latest Persist the node queued (src/nodesconf.rs).
        let contents = side.node.nodes_conf().into_bytes();
        let seq = side.node.persist_seq();
        if let Err(e) = side.conf.write_current(seq, &contents, saveconfig) {
            if saveconfig {
                // Redis: `error saving the cluster node config: <strerror>`.
                out.error(&format!("ERR error saving the cluster node config: {e}"));
                side.wake();
                return;
            }
            side.conf.save_failed(&e);
        }
    }
    match &outcome {
        CommandOutcome::NoReply => {}
        o => match o.reply() {
            Some(reply) => write_reply(reply, out),
            None => out.error("ERR the node deferred this command"),
        },
    }
    side.wake();
}

/// CLUSTER subcommands that never change the node's saved config (no nodes.conf check).
fn is_read_only_subcommand(sub: &[u8]) -> bool {
    const READ_ONLY: [&str; 14] = [
        "info",
        "nodes",
        "slots",
        "shards",
        "myid",
        "myshardid",
        "keyslot",
        "countkeysinslot",
        "getkeysinslot",
        "links",
        "count-failure-reports",
        "replicas",
        "slaves",
        "help",
    ];
    READ_ONLY
        .iter()
        .any(|r| sub.eq_ignore_ascii_case(r.as_bytes()))
        || sub.eq_ignore_ascii_case(b"slot-stats")
}

struct Link {
    stream: TcpStream,
    id: LinkId,
    connecting: bool,
    wbuf: Vec<u8>,
    writable_registered: bool,
}

/// Starts the bus thread: listener on the bus port, outbound links, timers, persistence.
///
/// # Errors
/// When the bus port cannot be bound or the poller cannot be created.
pub fn spawn_bus_thread(shared: &Arc<Shared>) -> Result<(), String> {
    let bus_port = shared.config.bus_port()?;
    // The bus listens on the `bind` addresses too (Valkey `clusterInit`).
    let poll = Poll::new().map_err(|e| e.to_string())?;
    let mut listeners = Vec::new();
    for (i, l) in crate::net::listen_all(&shared.config.bind, bus_port)?
        .into_iter()
        .enumerate()
    {
        l.set_nonblocking(true).map_err(|e| e.to_string())?;
        let mut l = TcpListener::from_std(l);
        poll.registry()
            .register(&mut l, listener_token(i), Interest::READABLE)
            .map_err(|e| e.to_string())?;
        listeners.push(l);
    }
    let waker = Arc::new(Waker::new(poll.registry(), WAKER).map_err(|e| e.to_string())?);
    if let Some(side) = shared.state.lock().cluster.as_mut() {
        side.waker = Some(Arc::clone(&waker));
    }
    let shared = Arc::clone(shared);
    std::thread::Builder::new()
        .name("cluster-bus".into())
        .spawn(move || {
            BusThread {
                shared,
                poll,
                listeners,
                links: HashMap::new(),
                by_link: HashMap::new(),
                next_token: 2,
                last_role: None,
                last_slots: None,
            }
            .run()
        })
        .map_err(|e| e.to_string())?;
    Ok(())
}

struct BusThread {
    shared: Arc<Shared>,
    poll: Poll,
    /// One per `bind` address, token [`listener_token`].
    listeners: Vec<TcpListener>,
    links: HashMap<usize, Link>,
    by_link: HashMap<LinkId, usize>,
    next_token: usize,
    last_role: Option<Option<(String, u16)>>,
    /// Slots myself served at the last look (for the slot-change log line).
    last_slots: Option<usize>,
}

enum Input {
    Accepted(TcpStream, IpAddr, Option<IpAddr>),
    Bytes(LinkId, Vec<u8>),
    Link(LinkEvent),
}

impl BusThread {
    fn run(mut self) {
        let mut events = Events::with_capacity(256);
        let mut timeout = Duration::from_millis(10);
        loop {
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() != ErrorKind::Interrupted {
                    tracing::error!("bus poll failed: {e}");
                }
                continue;
            }
            let mut inputs = Vec::new();
            for ev in events.iter() {
                match ev.token() {
                    t if listener_index(t).is_some_and(|i| i < self.listeners.len()) => loop {
                        let i = listener_index(t).unwrap_or_default();
                        match self.listeners[i].accept() {
                            Ok((s, peer)) => {
                                let local = s.local_addr().ok().map(|a| a.ip());
                                inputs.push(Input::Accepted(s, peer.ip(), local))
                            }
                            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                            Err(e) => {
                                tracing::warn!("bus accept failed: {e}");
                                break;
                            }
                        }
                    },
                    WAKER => {}
                    t => self.link_event(
                        t.0,
                        ev.is_readable() || ev.is_read_closed() || ev.is_error(),
                        ev.is_writable(),
                        &mut inputs,
                    ),
                }
            }
            let now = Millis(unix_ms());
            let mut outputs = Vec::new();
            let next = {
                let shared = Arc::clone(&self.shared);
                let mut st = shared.state.lock();
                let facts = st.repl.facts();
                let Some(side) = st.cluster.as_mut() else {
                    return;
                };
                // The replication facts first: the bus input of this turn (an MFSTART, an
                // auth request) is handled with the offset the data has now.
                if *side.node.replication() != facts {
                    side.node.handle_replication(facts, now);
                }
                for input in inputs {
                    match input {
                        Input::Accepted(mut s, ip, local) => {
                            let link = match local {
                                Some(local) => side.node.handle_accept_local(ip, local, now),
                                None => side.node.handle_accept(ip, now),
                            };
                            let token = self.next_token;
                            self.next_token += 1;
                            if self
                                .poll
                                .registry()
                                .register(&mut s, Token(token), Interest::READABLE)
                                .is_ok()
                            {
                                self.links.insert(
                                    token,
                                    Link {
                                        stream: s,
                                        id: link,
                                        connecting: false,
                                        wbuf: Vec::new(),
                                        writable_registered: false,
                                    },
                                );
                                self.by_link.insert(link, token);
                            } else {
                                side.node.handle_link(LinkEvent::Closed(link), now);
                            }
                        }
                        Input::Bytes(link, b) => side.node.handle_link_bytes(link, &b, now),
                        Input::Link(e) => side.node.handle_link(e, now),
                    }
                }
                side.node.handle_timeout(now);
                while let Some(o) = side.node.poll_output() {
                    outputs.push(o);
                }
                side.links_open = self.links.len();
                let next = side.node.poll_timeout();
                self.follow_role(&mut st);
                next
            };
            self.act(outputs, now);
            let now2 = unix_ms();
            timeout = match next {
                Some(t) if t.0 > now2 => Duration::from_millis((t.0 - now2).min(100)),
                Some(_) => Duration::from_millis(1),
                None => Duration::from_millis(100),
            };
        }
    }

    /// Follows the node's role: a replica syncs from its primary's data port.
    fn follow_role(&mut self, st: &mut State) {
        let Some(side) = st.cluster.as_ref() else {
            return;
        };
        let topo = side.node.topology();
        let me = topo.myself();
        let slots = me.slot_count();
        if self.last_slots != Some(slots) {
            if self.last_slots.is_some() || slots > 0 {
                tracing::info!(
                    before = self.last_slots.unwrap_or(0),
                    now = slots,
                    assigned_in_cluster = topo.assigned_slot_count(),
                    "slots served by myself changed"
                );
            }
            self.last_slots = Some(slots);
        }
        let want = if me.is_replica() {
            me.primary
                .and_then(|p| topo.node(&p))
                .and_then(|p| p.ip.map(|ip| (ip.to_string(), p.port)))
        } else {
            None
        };
        if self.last_role.as_ref() != Some(&want) {
            if me.is_replica() && want.is_none() {
                // Primary known by ID only so far: wait for its address.
                return;
            }
            self.last_role = Some(want.clone());
            let primary = want.map(|(host, port)| crate::repl::PrimaryAddr { host, port });
            crate::repl::set_primary(&self.shared, st, primary);
        }
    }

    fn link_event(
        &mut self,
        token: usize,
        readable: bool,
        writable: bool,
        inputs: &mut Vec<Input>,
    ) {
        let Some(link) = self.links.get_mut(&token) else {
            return;
        };
        if link.connecting && (writable || readable) {
            let failed = link.stream.take_error().ok().flatten().is_some()
                || link.stream.peer_addr().is_err();
            if failed {
                if writable || readable {
                    let id = link.id;
                    self.drop_link(token);
                    inputs.push(Input::Link(LinkEvent::ConnectFailed(id)));
                }
                return;
            }
            link.connecting = false;
            inputs.push(Input::Link(LinkEvent::Connected(link.id)));
        }
        if writable {
            self.flush(token, inputs);
        }
        if readable {
            let mut closed = false;
            let mut got = Vec::new();
            if let Some(link) = self.links.get_mut(&token) {
                let mut buf = [0u8; 64 * 1024];
                loop {
                    match link.stream.read(&mut buf) {
                        Ok(0) => {
                            closed = true;
                            break;
                        }
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == ErrorKind::Interrupted => {}
                        Err(_) => {
                            closed = true;
                            break;
                        }
                    }
                }
                if !got.is_empty() {
                    inputs.push(Input::Bytes(link.id, got));
                }
                if closed {
                    inputs.push(Input::Link(LinkEvent::Closed(link.id)));
                }
            }
            if closed {
                self.drop_link(token);
            }
        }
    }

    fn flush(&mut self, token: usize, inputs: &mut Vec<Input>) {
        let Some(link) = self.links.get_mut(&token) else {
            return;
        };
        if link.connecting {
            return;
        }
        while !link.wbuf.is_empty() {
            match link.stream.write(&link.wbuf) {
                Ok(n) => {
                    link.wbuf.drain(..n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    let id = link.id;
                    self.drop_link(token);
                    inputs.push(Input::Link(LinkEvent::Closed(id)));
                    return;
                }
            }
        }
        let want = !link.wbuf.is_empty();
        if want != link.writable_registered {
            link.writable_registered = want;
            let interest = if want {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            let _ = self
                .poll
                .registry()
                .reregister(&mut link.stream, Token(token), interest);
        }
    }

    fn drop_link(&mut self, token: usize) {
        if let Some(mut l) = self.links.remove(&token) {
            let _ = self.poll.registry().deregister(&mut l.stream);
            self.by_link.remove(&l.id);
        }
    }

    fn act(&mut self, outputs: Vec<Output>, now: Millis) {
        let mut queue = std::collections::VecDeque::from(outputs);
        let mut late_inputs = Vec::new();
        while let Some(o) = queue.pop_front() {
            match o {
                Output::Connect { link, ip, port } => {
                    let addr = SocketAddr::new(ip, port);
                    match TcpStream::connect(addr) {
                        Ok(mut s) => {
                            let token = self.next_token;
                            self.next_token += 1;
                            let _ = s.set_nodelay(true);
                            if self
                                .poll
                                .registry()
                                .register(
                                    &mut s,
                                    Token(token),
                                    Interest::READABLE | Interest::WRITABLE,
                                )
                                .is_ok()
                            {
                                self.links.insert(
                                    token,
                                    Link {
                                        stream: s,
                                        id: link,
                                        connecting: true,
                                        wbuf: Vec::new(),
                                        writable_registered: true,
                                    },
                                );
                                self.by_link.insert(link, token);
                            } else {
                                late_inputs.push(LinkEvent::ConnectFailed(link));
                            }
                        }
                        Err(_) => late_inputs.push(LinkEvent::ConnectFailed(link)),
                    }
                }
                Output::Transmit { link, bytes } => {
                    if let Some(&token) = self.by_link.get(&link) {
                        if let Some(l) = self.links.get_mut(&token) {
                            l.wbuf.extend_from_slice(&bytes);
                        }
                        let mut ins = Vec::new();
                        self.flush(token, &mut ins);
                        for i in ins {
                            if let Input::Link(e) = i {
                                late_inputs.push(e);
                            }
                        }
                    }
                }
                Output::Close { link } => {
                    if let Some(token) = self.by_link.get(&link).copied() {
                        self.drop_link(token);
                    }
                }
                Output::Persist { seq, contents } => {
                    let conf = self
                        .shared
                        .state
                        .lock()
                        .cluster
                        .as_ref()
                        .map(|side| Arc::clone(&side.conf));
                    let Some(conf) = conf else {
                        continue;
                    };
                    // Ordered by `seq` (src/nodesconf.rs): skipped when the file holds a newer
                    // snapshot, which covers this one. A failed write exits (Redis's
                    // clusterSaveConfigOrDie: held transmits stay held) unless
                    // cluster-config-save-behavior is best-effort.
                    if let Err(e) = conf.write_persist(seq, &contents) {
                        conf.save_failed(&e);
                    }
                    let mut st = self.shared.state.lock();
                    if let Some(side) = st.cluster.as_mut() {
                        side.node.handle_persisted(seq);
                        while let Some(o) = side.node.poll_output() {
                            queue.push_back(o);
                        }
                    }
                }
                Output::Event(e) => {
                    log_event(&e);
                    match e {
                        Event::PubSubMessage {
                            channel,
                            message,
                            sharded,
                            ..
                        } => {
                            self.shared.publish_local(sharded, &channel, &message);
                        }
                        Event::PauseWrites { until } => {
                            // Under the lock the writers take: once it is set no write runs,
                            // so the offset read here is final; the node announces it
                            // (manual failover, §13.2) only after hearing it.
                            let mut st = self.shared.state.lock();
                            st.writes_paused_until = Some(until.0);
                            let offset = st.repl.offset;
                            if let Some(side) = st.cluster.as_mut() {
                                side.node.handle_writes_paused(offset, now);
                                while let Some(o) = side.node.poll_output() {
                                    queue.push_back(o);
                                }
                            }
                        }
                        Event::UnpauseWrites => {
                            self.shared.state.lock().writes_paused_until = None;
                            self.shared.wake_io();
                        }
                        Event::DeleteSlotKeys(slots) => {
                            let mut st = self.shared.state.lock();
                            let n = crate::repl::delete_slot_keys(&mut st, &slots);
                            crate::repl::flush(&self.shared, &mut st);
                            // The node also sweeps every slot another node owns when a
                            // replica is promoted: most hold no key.
                            if n > 0 {
                                tracing::info!(
                                    slots = slots.len(),
                                    keys = n,
                                    "deleted the keys of slots another node owns"
                                );
                            }
                        }
                        Event::Migration(req) => crate::migrate::act(&self.shared, *req),
                        Event::ClusterReset {
                            was_replica: true, ..
                        } => {
                            // Valkey empties the data set of a replica that is reset.
                            self.shared.state.lock().kv.flush_all();
                        }
                        _ => {}
                    }
                }
            }
        }
        if !late_inputs.is_empty() {
            let mut st = self.shared.state.lock();
            if let Some(side) = st.cluster.as_mut() {
                for e in late_inputs {
                    side.node.handle_link(e, now);
                }
            }
            drop(st);
            if let Some(side) = self.shared.state.lock().cluster.as_ref() {
                side.wake();
            }
        }
    }
}

fn log_event(e: &Event) {
    match e {
        Event::HandshakeCompleted(id) => {
            tracing::info!(node = %id, "node joined (handshake completed)")
        }
        Event::NodeDiscovered(id) => tracing::info!(node = %id, "node discovered through gossip"),
        Event::NodeDeleted(id) => tracing::info!(node = %id, "node deleted"),
        Event::NodePfail(id) => tracing::warn!(node = %id, "node marked PFAIL"),
        Event::NodeFail(id) => tracing::warn!(node = %id, "node marked FAIL"),
        Event::NodePfailCleared(id) => tracing::info!(node = %id, "PFAIL cleared"),
        Event::NodeFailCleared(id) => tracing::info!(node = %id, "FAIL cleared"),
        Event::ClusterStateChanged(ok) => tracing::warn!(
            ok = *ok,
            "cluster state changed to {}",
            if *ok { "ok" } else { "fail" }
        ),
        Event::ConfigEpochBumped(e) => {
            tracing::info!(epoch = %e, "configEpoch bumped after a collision")
        }
        Event::FrameDropped { link, error } => {
            tracing::warn!(%link, "bad bus frame dropped: {error}")
        }
        Event::FramingLost { link, error } => {
            tracing::warn!(%link, "bus framing lost, link closed: {error}")
        }
        Event::BecameReplica { primary } => {
            tracing::info!(%primary, "role change: myself became a replica")
        }
        Event::BecamePrimary => tracing::info!("role change: myself became a primary"),
        Event::ReplicateFrom {
            primary, ip, port, ..
        } => tracing::info!(%primary, ?ip, port, "replicating from the new primary"),
        Event::Epoch(e) => tracing::info!("epoch/election: {e:?}"),
        Event::PauseWrites { until } => {
            tracing::info!(until = until.0, "manual failover: client writes paused")
        }
        Event::UnpauseWrites => tracing::info!("client writes resumed"),
        Event::DeleteSlotKeys(_) => {}
        Event::MyIpChanged(ip) => tracing::info!(%ip, "learned my own IP"),
        Event::NodeIdCollision { id, mine, peer, .. } => tracing::warn!(
            node = %id,
            mine = %format_addr(mine),
            peer = %format_addr(peer),
            "another node uses my node ID: its messages are refused (give one of the two its \
             own nodes.conf, or CLUSTER RESET HARD it)"
        ),
        Event::NodesConfWarning(w) => tracing::warn!("{w}"),
        Event::PubSubMessage { .. } => {}
        Event::Migration(r) => tracing::debug!("slot migration request: {r:?}"),
        other => tracing::info!("cluster event: {other:?}"),
    }
}

/// `ip:port@bus_port` (`?` for an unknown IP).
fn format_addr(a: &ferrocluster_node::NodeAddress) -> String {
    match a.ip {
        Some(ip) => format!("{}@{}", SocketAddr::new(ip, a.port), a.bus_port),
        None => format!("?:{}@{}", a.port, a.bus_port),
    }
}

/// Which command of our table a queued command is (EXEC in cluster mode).
pub fn queued_spec(q: &ferrocluster_command::QueuedCommand) -> Option<&'static Spec> {
    q.argv().first().and_then(|n| crate::table::lookup(n))
}

/// Whether `cmd` is handled by us before the cluster router (internal replication commands
/// that the command crate's table does not list).
pub fn bypasses_router(cmd: Cmd) -> bool {
    // FERROCLUSTER is ours (src/readiness.rs): the command crate's Valkey table lacks it.
    matches!(cmd, Cmd::Replconf | Cmd::Psync | Cmd::Ferrocluster)
}

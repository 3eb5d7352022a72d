//! The cluster side: the `ClusterNode` under the state lock, routing of client requests through
//! the command crate, the CLUSTER command, and the server's part of the host kit's drive loop
//! (`ferrocluster_host::DriveLoop`): the data-set duties of the node's outputs.

use crate::client::{Args, ClientCtx};
use crate::config::Config;
use crate::resp::Out;
use crate::server::Value;
use crate::server::{unix_ms, Shared, State};
use crate::table::{Cmd, Spec};
use ferrocluster_command::{ClientState, ClusterContext, ClusterError, Dispatch, ErrorReply};
use ferrocluster_host::{BusDriver, DriveLoop, Host, NodesConfFile, Waker};
use ferrocluster_kvstore::KvStore;
use ferrocluster_node::{
    error_reply, Capabilities, ClusterConfig, ClusterNode, CommandOutcome, CommandRequest, Millis,
    NodeError, Notice, Output, RequestId, SlotKeys,
};
use ferrocluster_slot::Slot;
use ferrocluster_topology::Reply;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// The node and what the I/O threads need to reach the bus thread.
pub struct ClusterSide {
    /// The Sans-IO node.
    pub node: ClusterNode,
    /// Wakes the bus thread after a command queued outputs in the node.
    pub waker: Option<Arc<Waker>>,
    /// The locked nodes.conf (`ferrocluster_host::NodesConfFile`).
    pub conf: Arc<NodesConfFile>,
    /// Replies waiting for their nodes.conf write (`CommandOutcome::Deferred`), by request:
    /// the bus thread delivers each when the node releases it (`Output::Reply`).
    pub pending: HashMap<u64, PendingReply>,
    /// CLUSTER SETSLOTs sent to our replicas and waiting for their ACK
    /// (`CommandOutcome::ReplicateFirst`), oldest first.
    setslot_waits: Vec<SetSlotWait>,
    /// The last request ID handed out.
    next_request: u64,
}

/// A CLUSTER SETSLOT of a primary with replicas, propagated to them and waiting until every
/// eligible one acknowledged it (Valkey `clusterCommandSetSlot` with
/// `blockClientForReplicaAck`): then the node applies it (`replication_done`) and the reply
/// follows its persist; past `deadline` the client gets `-NOREPLICAS` and nothing changes.
#[derive(Debug)]
struct SetSlotWait {
    argv: Vec<Vec<u8>>,
    req: CommandRequest,
    /// The client connection (to drop the wait when it closes).
    client_id: u64,
    /// The stream offset just past the propagated command.
    target: u64,
    /// Eligible replicas when it was propagated.
    replicas: usize,
    /// Unix ms; `None`: `TIMEOUT 0`, wait forever.
    deadline: Option<Millis>,
}

/// Where a deferred reply goes.
#[derive(Debug, Clone, Copy)]
pub struct PendingReply {
    io_thread: usize,
    token: usize,
    client_id: u64,
    resp3: bool,
    /// CLUSTER SAVECONFIG: a failed write is answered with Valkey's error text.
    saveconfig: bool,
}

impl ClusterSide {
    /// A new request ID for a command whose reply may be deferred.
    pub fn next_request(&mut self) -> RequestId {
        self.next_request += 1;
        RequestId(self.next_request)
    }
}

/// The node deferred the reply of request `id` (`CommandOutcome::Deferred`): the client's
/// output keeps its place (what follows waits behind it), and the bus thread delivers the
/// reply once the node releases it after its persist. A session without a connection (the
/// replication stream) gets no reply.
pub fn defer_reply(
    side: &mut ClusterSide,
    client: &mut ClientCtx,
    out: &Out,
    id: RequestId,
    saveconfig: bool,
) {
    if client.io_thread == usize::MAX {
        return;
    }
    client.hold_reply(out.buf.len(), id.0);
    side.pending.insert(
        id.0,
        PendingReply {
            io_thread: client.io_thread,
            token: client.token,
            client_id: client.id,
            resp3: out.resp3(),
            saveconfig,
        },
    );
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
        // The slot migration source AUTHs to the target as our replica does to its primary
        // (`primaryuser` / `primaryauth`, else requirepass: all nodes of a cluster share it).
        primaryauth_set: config.requirepass.is_some() || config.repl.primary_auth.is_some(),
        // `tls-cluster yes`: the bus port derives from `tls-port` (Valkey
        // `defaultClientPort`); the engine announces the port the bus listens on. Without it
        // the engine derives `port + 10000` itself, and CONFIG GET cluster-port stays 0.
        cluster_port: if config.tls_cluster {
            config.bus_port()?
        } else {
            config.cluster.cluster_port
        },
        tls_cluster: config.tls_cluster,
        ..config.cluster.clone()
    };
    let path = config.nodes_conf_path();
    // Lock before reading: a second process with the same file must not even load it.
    let conf = Arc::new(NodesConfFile::open(&path).map_err(|e| e.to_string())?);
    let saved = conf.saved();
    // The host replicates (src/repl.rs) and runs the slot migration data plane
    // (src/migrate.rs); its databases are `cluster-databases`.
    let caps = Capabilities {
        replication: true,
        slot_migration: true,
        databases: config.cluster_databases.max(1) as usize,
    };
    // Redis saves the config at start (a new node's ID must survive a crash right after it):
    // the node's first output is that Persist, which the drive loop's first turn writes
    // before the data port opens (`spawn_bus_thread`).
    let node = ClusterNode::new(cc, caps, Millis(unix_ms()), seed, saved).map_err(|e| match e {
        NodeError::NodesConf(c) => {
            format!("unrecoverable error loading {}: {c}", path.display())
        }
        other => format!("bad cluster configuration: {other}"),
    })?;
    tracing::info!(id = %node.myself_id(), file = %path.display(), loaded = saved.is_some(), "cluster node ready");
    Ok(ClusterSide {
        conf,
        node,
        waker: None,
        pending: HashMap::new(),
        setslot_waits: Vec::new(),
        next_request: 0,
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
/// the routing options (the database count is the node's capability, `cluster-databases`).
pub fn routing_ctx(side: &ClusterSide) -> ClusterContext<'_, ferrocluster_topology::Topology> {
    side.node.cluster_context()
}

/// Key presence for routing (ASK/TRYAGAIN): a key that is stored but logically expired
/// counts as present (Valkey's LOOKUP_NOEXPIRE).
pub fn key_present(kv: &KvStore<Value>, db: usize, key: &[u8]) -> bool {
    kv.exists(db, key, 0).unwrap_or(false)
}

/// Passes a request through the node's entry point for client commands
/// (`ClusterNode::dispatch_client_command_in`: the per-client state machine and router,
/// MULTI/ASKING/READONLY/SELECT and MOVED/ASK/TRYAGAIN/CROSSSLOT/CLUSTERDOWN).
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
    let keys = |db: usize, key: &[u8]| key_present(kv, db, key);
    let cs = client
        .cluster
        .get_or_insert_with(|| ClientState::new(false, false));
    // The node's entry point for client commands, over our own table (the `COMMAND` reply's
    // rows, so routing knows the keys of every command we serve).
    let d = with_argv(args, |argv| {
        side.node
            .dispatch_client_command_in(crate::table::table(), cs, argv, &keys)
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
/// bus thread sees `Output::PubSubMessage`.
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

/// Writes a reply in the connection's protocol (RESP2 or RESP3).
pub fn write_reply(reply: &Reply, out: &mut Out) {
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
    let sub = if args.len() > 1 { args.get(1) } else { b"" };
    let syncslots = sub.eq_ignore_ascii_case(b"syncslots") && client.io_thread != usize::MAX;
    if syncslots {
        crate::migrate::note_client_conn(state, client);
    }
    let State { kv, cluster, .. } = state;
    let Some(side) = cluster.as_mut() else {
        return;
    };
    let mut req = client
        .cluster
        .as_ref()
        .map(|c| CommandRequest::from_client(c, RequestId::default()))
        .unwrap_or_default();
    req.id = side.next_request();
    req.db = client.db;
    // The connection is the node's handle for SYNCSLOTS (slot migration links).
    req.conn = Some(ferrocluster_node::ConnId(client.id));
    let keys = KvKeys(kv);
    let mut outcome = with_argv(args, |argv| {
        side.node
            .cluster_command_argv(argv, &req, &keys, Millis(now))
    });
    if let CommandOutcome::ReplicateFirst { deadline } = outcome {
        // Valkey 8+: SETSLOT reaches our replicas first; it is applied once every eligible
        // replica acknowledged it (`check_setslot_waits`). None eligible: apply at once.
        let replicas = if state.repl.is_replica() {
            0
        } else {
            state.repl.setslot_replicas().len()
        };
        if replicas > 0 && client.io_thread != usize::MAX {
            let argv: Vec<Vec<u8>> = (0..args.len()).map(|i| args.get(i).to_vec()).collect();
            let parts: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
            crate::repl::propagate_command(state, &parts);
            // The offset right after the SETSLOT (the GETACK that follows is not waited
            // for: a replica acknowledges it with the offset before it).
            let target = state.repl.offset();
            // Valkey `clusterCommandSetSlot`: ask the replicas for their ACK at once.
            state.repl.engine.request_acks();
            crate::repl::flush(shared, state);
            let Some(side) = state.cluster.as_mut() else {
                return;
            };
            defer_reply(side, client, out, req.id, false);
            side.setslot_waits.push(SetSlotWait {
                argv,
                req,
                client_id: client.id,
                target,
                replicas,
                deadline,
            });
            return;
        }
        req.replication_done = true;
        outcome = with_argv(args, |argv| {
            side.node
                .cluster_command_argv(argv, &req, &keys, Millis(now))
        });
    }
    if syncslots {
        // An accepted ESTABLISH: the data plane reads this connection from its next byte.
        crate::migrate::after_syncslots(state, client);
    }
    let Some(side) = state.cluster.as_mut() else {
        return;
    };
    match outcome {
        CommandOutcome::Reply(reply) => write_reply(&reply, out),
        // The config changed: the reply is written once nodes.conf is durable (the bus
        // thread writes the Persist, then the node releases the reply).
        CommandOutcome::Deferred => {
            let saveconfig = sub.eq_ignore_ascii_case(b"saveconfig");
            defer_reply(side, client, out, req.id, saveconfig);
        }
        CommandOutcome::NoReply => {}
        // Only the first call asks this; the second has `replication_done`.
        CommandOutcome::ReplicateFirst { .. } => {
            write_reply(&error_reply(&ClusterError::NoReplicas), out)
        }
    }
    side.wake();
}

/// Ends the SETSLOT waits whose replicas all acknowledged (the node applies the command now:
/// its reply follows the persist) or whose deadline passed (`-NOREPLICAS Not enough good
/// replicas to write.`, nothing applied: Valkey `replyToBlockedClientTimedOut`). Called on
/// every `REPLCONF ACK` and from the timer.
pub fn check_setslot_waits(shared: &Shared, state: &mut State, now: u64) {
    let State {
        kv, cluster, repl, ..
    } = state;
    let Some(side) = cluster.as_mut() else {
        return;
    };
    if side.setslot_waits.is_empty() {
        return;
    }
    let waits = std::mem::take(&mut side.setslot_waits);
    for mut w in waits {
        let acked = repl
            .setslot_replicas()
            .iter()
            .filter(|&&acked| acked >= w.target)
            .count();
        let reply = if acked >= w.replicas {
            w.req.replication_done = true;
            let outcome = side
                .node
                .cluster_command_argv(&w.argv, &w.req, &KvKeys(kv), Millis(now));
            match outcome {
                // The reply comes as `Output::Reply` after the persist (`pending` has it).
                CommandOutcome::Deferred | CommandOutcome::NoReply => None,
                CommandOutcome::Reply(r) => Some(r),
                CommandOutcome::ReplicateFirst { .. } => {
                    Some(error_reply(&ClusterError::NoReplicas))
                }
            }
        } else if w.deadline.is_some_and(|d| now >= d.0) {
            Some(error_reply(&ClusterError::NoReplicas))
        } else {
            side.setslot_waits.push(w);
            continue;
        };
        if let Some(reply) = reply {
            deliver_pending(shared, side, w.req.id, &reply);
        }
    }
    side.wake();
}

/// Delivers `reply` to the client waiting for request `id`, if it still waits.
fn deliver_pending(shared: &Shared, side: &mut ClusterSide, id: RequestId, reply: &Reply) {
    let Some(p) = side.pending.remove(&id.0) else {
        return;
    };
    let mut bytes = Vec::new();
    if p.resp3 {
        reply.encode_resp3(&mut bytes);
    } else {
        reply.encode_resp2(&mut bytes);
    }
    shared.deliver(
        p.io_thread,
        p.token,
        p.client_id,
        crate::client::Delivery::Reply { id: id.0, bytes },
    );
}

/// A client connection closed: its SETSLOT waits end without applying the command (Valkey
/// frees a blocked client with its pending command).
pub fn client_closed(state: &mut State, client_id: u64) {
    if let Some(side) = state.cluster.as_mut() {
        side.setslot_waits.retain(|w| w.client_id != client_id);
    }
}

/// Starts the bus thread: the kit's drive loop (`ferrocluster_host::DriveLoop`) over the bus
/// listeners (every `bind` address at the bus port), the node under the state lock and
/// nodes.conf.
///
/// # Errors
/// When the bus port cannot be bound or the poller cannot be created.
pub fn spawn_bus_thread(shared: &Arc<Shared>) -> Result<(), String> {
    let bus_port = shared.config.bus_port()?;
    // The bus listens on the `bind` addresses too (Valkey `clusterInit`).
    let mut bus = BusDriver::bind(&shared.config.bind, bus_port)?;
    if shared.config.tls_cluster {
        // `tls-cluster yes`: every bus link is mutual TLS (Valkey `connTypeOfCluster`).
        let tls = shared
            .tls
            .clone()
            .ok_or("tls-cluster yes needs the tls-* files")?;
        bus.set_tls(tls);
    }
    let conf = {
        let mut st = shared.state.lock();
        let Some(side) = st.cluster.as_mut() else {
            return Ok(());
        };
        Arc::clone(&side.conf)
    };
    let host = ServerHost {
        shared: Arc::clone(shared),
        last_slots: Cell::new(None),
        waiting_primary: Cell::new(None),
        last_save_error: RefCell::new(None),
    };
    let mut drive = DriveLoop::new(bus, conf, host);
    {
        let mut st = shared.state.lock();
        // The data set is loaded: the node checks it against the slots (Valkey
        // `verifyClusterConfigWithData`; the first turn acts on what it decides).
        let loaded: ferrocluster_slot::SlotSet = ferrocluster_slot::Slot::all()
            .filter(|s| st.kv.count_keys_in_slot_all_dbs(*s) > 0)
            .collect();
        if let Some(side) = st.cluster.as_mut() {
            side.waker = Some(drive.waker());
            side.node.handle_keys_loaded(&loaded, Millis(unix_ms()));
        }
    }
    // The first turn here, before the data port opens: the node's start-up Persist is on
    // disk and its start-up notices are logged before anything is served.
    drive.turn().map_err(|e| format!("cluster bus: {e}"))?;
    std::thread::Builder::new()
        .name("cluster-bus".into())
        .spawn(move || {
            let Err(e) = drive.run();
            tracing::error!("cluster bus stopped: {e}");
        })
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// The server as the drive loop sees it: the node under the state lock, the data-set duties.
struct ServerHost {
    shared: Arc<Shared>,
    /// Slots myself served at the last look (for the slot-change log line).
    last_slots: Cell<Option<usize>>,
    /// A primary to replicate whose address was not known yet (`ReplicateFrom { ip: None }`).
    waiting_primary: Cell<Option<(ferrocluster_node::NodeId, bool)>>,
    /// The error of the last nodes.conf write, if it failed (for CLUSTER SAVECONFIG).
    last_save_error: RefCell<Option<String>>,
}

/// The state lock, seen by the drive loop as the node.
struct ServerGuard<'a>(parking_lot::MutexGuard<'a, State>);

impl std::ops::Deref for ServerGuard<'_> {
    type Target = ClusterNode;
    fn deref(&self) -> &ClusterNode {
        // The bus runs in cluster mode only (spawn_bus_thread), and the node is never removed.
        &self.0.cluster.as_ref().expect("cluster mode").node
    }
}

impl std::ops::DerefMut for ServerGuard<'_> {
    fn deref_mut(&mut self) -> &mut ClusterNode {
        // As in `deref`.
        &mut self.0.cluster.as_mut().expect("cluster mode").node
    }
}

impl Host for ServerHost {
    type Guard<'a> = ServerGuard<'a>;

    fn lock(&self) -> ServerGuard<'_> {
        ServerGuard(self.shared.state.lock())
    }

    fn before_turn(&self, g: &mut ServerGuard<'_>, now: Millis) {
        let st = &mut *g.0;
        let facts = st.repl.facts();
        let Some(side) = st.cluster.as_mut() else {
            return;
        };
        // The replication facts first: the bus input of this turn (an MFSTART, an auth
        // request) is handled with the offset the data has now.
        if *side.node.replication() != facts {
            side.node.handle_replication(facts, now);
        }
        self.log_slot_change(side);
        if let Some((primary, full_sync)) = self.waiting_primary.get() {
            let topo = side.node.topology();
            let tls = self.tls_replication();
            let addr = topo.node(&primary).and_then(|p| {
                p.ip.map(|ip| {
                    (
                        ip,
                        if tls && p.tls_port != 0 {
                            p.tls_port
                        } else {
                            p.port
                        },
                    )
                })
            });
            if let Some((ip, port)) = addr {
                self.waiting_primary.set(None);
                self.replicate_from(st, ip, port, full_sync);
            }
        }
    }

    fn persisted(&self, _g: &mut ServerGuard<'_>, _seq: u64, result: Result<(), &std::io::Error>) {
        // A CLUSTER SAVECONFIG waiting for this write answers its error (Redis: `error saving
        // the cluster node config: <strerror>`).
        *self.last_save_error.borrow_mut() = result.err().map(ToString::to_string);
    }

    fn act<'a>(&'a self, mut g: ServerGuard<'a>, out: Output, now: Millis) -> ServerGuard<'a> {
        match out {
            // The drive loop acts on these itself.
            Output::Connect { .. }
            | Output::Transmit { .. }
            | Output::Close { .. }
            | Output::Persist { .. } => {}
            Output::Reply { to, reply } => {
                let Some(side) = g.0.cluster.as_mut() else {
                    return g;
                };
                // No entry: the replication stream's command, no client.
                let saveconfig = side.pending.get(&to.0).is_some_and(|p| p.saveconfig);
                let reply = match (self.last_save_error.borrow().as_ref(), saveconfig) {
                    (Some(e), true) => {
                        Reply::Error(format!("ERR error saving the cluster node config: {e}"))
                    }
                    _ => reply,
                };
                deliver_pending(&self.shared, side, to, &reply);
            }
            Output::PubSubMessage {
                channel,
                message,
                sharded,
                ..
            } => {
                // Delivery needs no state: the pub/sub lock alone.
                drop(g);
                self.shared.publish_local(sharded, &channel, &message);
                return self.lock();
            }
            // Modules are not supported: nothing receives it.
            Output::ModuleMessage { .. } => {}
            Output::ReplicateFrom {
                primary,
                ip,
                port,
                tls_port,
                full_sync,
            } => {
                // `tls-replication yes`: the primary's TLS port (Valkey `replicationSetPrimary`
                // with the TLS connection type).
                let port = if self.tls_replication() && tls_port != 0 {
                    tls_port
                } else {
                    port
                };
                crate::logline::set_replica(true);
                match ip {
                    Some(ip) => {
                        tracing::info!("replicating from the new primary {primary} at {ip}:{port}")
                    }
                    None => tracing::info!(
                        "replicating from the new primary {primary} (address not known yet)"
                    ),
                }
                match ip {
                    Some(ip) => {
                        self.waiting_primary.set(None);
                        self.replicate_from(&mut g.0, ip, port, full_sync);
                    }
                    // Primary known by ID only so far: wait for its address.
                    None => self.waiting_primary.set(Some((primary, full_sync))),
                }
            }
            Output::BecamePrimary => {
                crate::logline::set_replica(false);
                tracing::info!("role change: myself became a primary");
                self.waiting_primary.set(None);
                crate::repl::set_primary(&self.shared, &mut g.0, None, false);
            }
            Output::PauseWrites { until } => {
                tracing::info!(until = until.0, "client writes paused");
                // Under the lock the writers take: once it is set no write runs, so the
                // offset read here is final; the node announces it (manual failover) only
                // after hearing it.
                g.0.writes_paused_until = Some(until.0);
                crate::repl::set_paused(&mut g.0, true);
                let offset = g.0.repl.offset();
                g.handle_writes_paused(offset, now);
            }
            Output::UnpauseWrites => {
                tracing::info!("client writes resumed");
                g.0.writes_paused_until = None;
                crate::repl::set_paused(&mut g.0, false);
                self.shared.wake_io();
            }
            Output::DeleteSlotKeys(slots) => {
                let started = std::time::Instant::now();
                let n = crate::lazyfree::delete_slot_keys(&self.shared, &mut g.0, &slots);
                crate::repl::flush(&self.shared, &mut g.0);
                let ms = started.elapsed().as_millis() as u64;
                // The node also sweeps every slot another node owns when a replica is
                // promoted: most hold no key.
                if n > 0 {
                    tracing::info!(
                        slots = slots.len(),
                        keys = n,
                        ms,
                        "detached the keys of slots another node owns (state lock held; DELs follow)"
                    );
                }
            }
            Output::Migration(req) => {
                tracing::debug!("slot migration request: {req:?}");
                // The data plane takes the state lock itself.
                drop(g);
                crate::migrate::act(&self.shared, *req);
                return self.lock();
            }
            Output::ClusterReset { was_replica, .. } => {
                if was_replica {
                    // Valkey empties the data set of a replica that is reset.
                    g.0.kv.flush_all();
                }
            }
            Output::Notice(n) => log_notice(&n),
        }
        g
    }
}

impl ServerHost {
    /// `tls-replication` in force.
    fn tls_replication(&self) -> bool {
        self.shared
            .tls_replication
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Replicates from the primary's data port.
    fn replicate_from(&self, st: &mut State, ip: IpAddr, port: u16, full_sync: bool) {
        let primary = crate::repl::PrimaryAddr {
            host: ip.to_string(),
            port,
        };
        crate::repl::set_primary(&self.shared, st, Some(primary), full_sync);
    }

    fn log_slot_change(&self, side: &ClusterSide) {
        let topo = side.node.topology();
        let slots = topo.myself().slot_count();
        let last = self.last_slots.get();
        if last != Some(slots) {
            if last.is_some() || slots > 0 {
                tracing::info!(
                    before = last.unwrap_or(0),
                    now = slots,
                    assigned_in_cluster = topo.assigned_slot_count(),
                    "slots served by myself changed"
                );
            }
            self.last_slots.set(Some(slots));
        }
    }
}

fn log_notice(n: &Notice) {
    match n {
        Notice::HandshakeCompleted(id) => {
            tracing::info!(node = %id, "node joined (handshake completed)")
        }
        Notice::NodeDiscovered(id) => tracing::info!(node = %id, "node discovered through gossip"),
        Notice::NodeDeleted(id) => tracing::info!(node = %id, "node deleted"),
        Notice::NodePfail(id) => tracing::warn!(node = %id, "node marked PFAIL"),
        Notice::NodeFail(id) => tracing::warn!(node = %id, "node marked FAIL"),
        Notice::NodePfailCleared(id) => tracing::info!(node = %id, "PFAIL cleared"),
        Notice::NodeFailCleared(id) => tracing::info!(node = %id, "FAIL cleared"),
        Notice::ClusterStateChanged(ok) => tracing::warn!(
            ok = *ok,
            "cluster state changed to {}",
            if *ok { "ok" } else { "fail" }
        ),
        Notice::ConfigEpochBumped(e) => {
            tracing::info!(epoch = %e, "configEpoch bumped after a collision")
        }
        Notice::FrameDropped { link, error } => {
            tracing::warn!(%link, "bad bus frame dropped: {error}")
        }
        Notice::FramingLost { link, error } => {
            tracing::warn!(%link, "bus framing lost, link closed: {error}")
        }
        Notice::BecameReplica { primary } => {
            tracing::info!(%primary, "role change: myself became a replica")
        }
        Notice::Epoch(e) => tracing::info!("epoch/election: {e:?}"),
        Notice::MyIpChanged(ip) => tracing::info!(%ip, "learned my own IP"),
        Notice::NodeIdCollision { id, mine, peer, .. } => tracing::warn!(
            node = %id,
            mine = %format_addr(mine),
            peer = %format_addr(peer),
            "another node uses my node ID: its messages are refused (give one of the two its \
             own nodes.conf, or CLUSTER RESET HARD it)"
        ),
        Notice::NodesConfWarning(w) => tracing::warn!("{w}"),
        Notice::UnassignedSlotsClaimed(slots) => tracing::warn!(
            ?slots,
            "I have keys for unassigned slots. Taking responsibility for them."
        ),
        Notice::MigrationStateChanged {
            job,
            kind,
            from,
            to,
        } => tracing::info!(
            job = %crate::migrate::job_text(job),
            kind = ?kind,
            from = from.as_str(),
            to = to.as_str(),
            "slot migration job changed state"
        ),
        other => tracing::info!("cluster notice: {other:?}"),
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
    matches!(
        cmd,
        Cmd::Replconf | Cmd::Psync | Cmd::Sync | Cmd::Ferrocluster
    )
}

//! Request routing: the decision order of Valkey's `getNodeByQuery` (facts sheet §20.2-20.6,
//! slot-migration sheet C.8).

use crate::args::{eq_ignore_case, parse_i64};
use crate::client::ClientState;
use crate::error::{Redirect, RouteError};
use crate::spec::{CommandFlags, CommandKind, CommandSpec};
use ferrocluster_slot::{Slot, SlotKey};
use ferrocluster_topology::{Node, NodeId, Topology};

/// Read-only key existence, used for the ASK / TRYAGAIN decisions on a migrating or importing
/// slot (§20.3 step 3: a lookup that neither touches, expires nor counts statistics).
///
/// The host implements it over its keyspace in a few lines, e.g. over a kvstore:
///
/// ```
/// use ferrocluster_command::KeyPresence;
/// struct Store(Vec<std::collections::HashSet<Vec<u8>>>); // one set per database
/// impl KeyPresence for Store {
///     fn key_exists(&self, db: usize, key: &[u8]) -> bool {
///         self.0.get(db).is_some_and(|d| d.contains(key))
///     }
/// }
/// ```
///
/// A logically expired key that is still stored counts as present (Valkey looks it up with
/// `LOOKUP_NOEXPIRE`). Closures `Fn(usize, &[u8]) -> bool` implement it too.
pub trait KeyPresence {
    /// Whether `key` exists in database `db` (0-based).
    fn key_exists(&self, db: usize, key: &[u8]) -> bool;
}

impl<F: Fn(usize, &[u8]) -> bool> KeyPresence for F {
    fn key_exists(&self, db: usize, key: &[u8]) -> bool {
        self(db, key)
    }
}

/// A keyspace with no keys (every lookup says "missing").
#[derive(Debug, Clone, Copy, Default)]
pub struct NoKeys;

impl KeyPresence for NoKeys {
    fn key_exists(&self, _db: usize, _key: &[u8]) -> bool {
        false
    }
}

/// What routing needs to know about the cluster model. [`Topology`] implements it; a node may
/// implement it over its own state.
pub trait ClusterView {
    /// Myself.
    fn myself(&self) -> &Node;
    /// A node by ID.
    fn node(&self, id: &NodeId) -> Option<&Node>;
    /// The owner of a slot.
    fn slot_owner(&self, slot: Slot) -> Option<&NodeId>;
    /// The node a slot is being imported from (importing mark).
    fn importing_from(&self, slot: Slot) -> Option<&NodeId>;
    /// The node a slot is being migrated to (migrating mark).
    fn migrating_to(&self, slot: Slot) -> Option<&NodeId>;
}

impl ClusterView for Topology {
    fn myself(&self) -> &Node {
        Topology::myself(self)
    }
    fn node(&self, id: &NodeId) -> Option<&Node> {
        Topology::node(self, id)
    }
    fn slot_owner(&self, slot: Slot) -> Option<&NodeId> {
        Topology::slot_owner(self, slot)
    }
    fn importing_from(&self, slot: Slot) -> Option<&NodeId> {
        Topology::importing_from(self, slot)
    }
    fn migrating_to(&self, slot: Slot) -> Option<&NodeId> {
        Topology::migrating_to(self, slot)
    }
}

/// `cluster-preferred-endpoint-type`: what MOVED/ASK (and CLUSTER SLOTS) name a node by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EndpointType {
    /// The client-facing IP (announced client IPv4/IPv6 for the client's family, else the
    /// cluster IP). Default.
    #[default]
    Ip,
    /// The announced hostname, `?` when the node has none.
    Hostname,
    /// The empty string (`-MOVED 3999 :6381`).
    UnknownEndpoint,
}

/// The configuration routing reads (Valkey defaults, facts sheet §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoutingConfig {
    /// `cluster-allow-reads-when-down` (default `false`).
    pub allow_reads_when_down: bool,
    /// `cluster-allow-pubsubshard-when-down` (default `true`).
    pub allow_pubsubshard_when_down: bool,
    /// `cluster-preferred-endpoint-type` (default [`EndpointType::Ip`]).
    pub preferred_endpoint: EndpointType,
    /// `cluster-databases` (Valkey 9, default 1): SELECT accepts `0..databases`.
    pub databases: usize,
}

impl Default for RoutingConfig {
    fn default() -> Self {
        RoutingConfig {
            allow_reads_when_down: false,
            allow_pubsubshard_when_down: true,
            preferred_endpoint: EndpointType::Ip,
            databases: 1,
        }
    }
}

/// The cluster as routing sees it at one moment: the model, whether the cluster state is
/// `ok` (§10), and the configuration.
#[derive(Debug, Clone, Copy)]
pub struct ClusterContext<'a, V: ?Sized> {
    /// The cluster model.
    pub view: &'a V,
    /// `cluster_state:ok` (false = `fail`).
    pub state_ok: bool,
    /// Routing configuration.
    pub config: RoutingConfig,
}

/// The outcome of [`route`]: `Ok(slot)` means "serve here" (`slot` is the request's hash slot,
/// `None` for a keyless request), `Err` is the error to send.
pub type Route = Result<Option<Slot>, RouteError>;

/// Decides whether this node serves a request, following Valkey's `getNodeByQuery` (§20.3):
///
/// 1. A client that must be obeyed (the primary link, [`ClientState::primary_link`] clients) is never
///    routed: `Ok(None)`.
/// 2. EXEC outside MULTI is served (EXEC itself fails); EXEC routes the keys of all queued
///    commands together; other commands route their own keys ([`CommandSpec::key_positions`]).
/// 3. Keys in command order. First key: its slot; no owner → `CLUSTERDOWN Hash slot not
///    served` at once. If myself is a primary or the client is READONLY: the slot is
///    *migrating* if its owner is my primary (myself for a primary) and it has a migrating
///    mark, else *importing* if it has an importing mark. Later keys: another slot →
///    CROSSSLOT at once; on an importing slot a key different from the first makes the request
///    *multi-key*. On a migrating/importing slot: MOVE, and COPY with a `DB` other than the
///    current one, get TRYAGAIN (Valkey 9); keys are looked up ([`KeyPresence`]) in the
///    current database (a queued SELECT changes it for the commands after it) unless the
///    command is sharded Pub/Sub or is being queued inside MULTI (Valkey 9: EXEC checks).
/// 4. No keys → serve.
/// 5. Cluster state fail: sharded Pub/Sub → `CLUSTERDOWN The cluster is down` unless
///    `cluster-allow-pubsubshard-when-down`; otherwise down unless
///    `cluster-allow-reads-when-down`, and with it a write gets the read-only variant (EXEC's
///    own flags are used here, as Valkey does).
/// 6. MIGRATE on a migrating/importing slot on a primary → serve.
/// 7. Migrating and some keys missing: some present → TRYAGAIN, none → ASK to the target.
/// 8. Importing and (ASKING or the command's `asking` flag): multi-key with some missing →
///    TRYAGAIN, else serve.
/// 9. READONLY client (or sharded Pub/Sub), not a write (EXEC: no queued write), myself a
///    replica of the owner → serve.
/// 10. Owner is not myself → MOVED to the owner; else serve.
///
/// Redirections name the node by [`RoutingConfig::preferred_endpoint`] and its TLS or TCP
/// port by the connection ([`ClientState::new`]). Pure: nothing is changed; the ASKING flag is
/// consumed by [`ClientState::handle_command`], not here.
///
/// Valkey 9 checks CROSSSLOT for all keys before the unassigned slot; this follows Valkey 8's
/// key-by-key order (an unassigned first key wins). Redis 7.0 detects migrating/importing on
/// replicas too and counts any second distinct key as multi-key; its replicas have no marks,
/// which is why the captured READONLY+ASKING read on a Redis replica is redirected.
pub fn route<A, V, K>(
    spec: &CommandSpec,
    argv: &[A],
    client: &ClientState,
    ctx: &ClusterContext<'_, V>,
    keys: &K,
) -> Route
where
    A: AsRef<[u8]>,
    V: ClusterView + ?Sized,
    K: KeyPresence + ?Sized,
{
    if client.is_primary_link() {
        return Ok(None);
    }
    let mut scan = Scan::new(client, ctx, keys, spec.kind == CommandKind::Exec);
    if spec.kind == CommandKind::Exec {
        let Some(queue) = client.queued() else {
            return Ok(None);
        };
        let mut pubsub = false;
        let mut any_write = false;
        for q in queue {
            pubsub |= q.spec().flags.contains(CommandFlags::PUBSUB);
            any_write |= q.spec().is_write(q.argv());
        }
        for q in queue {
            scan.feed(q.spec(), q.argv(), pubsub)?;
        }
        scan.finish(Finish {
            own_write: false,
            any_write,
            pubsub,
            migrate: false,
            asking: false,
        })
    } else {
        let pubsub = spec.flags.contains(CommandFlags::PUBSUB);
        let write = spec.is_write(argv);
        scan.feed(spec, argv, pubsub)?;
        scan.finish(Finish {
            own_write: write,
            any_write: write,
            pubsub,
            migrate: spec.kind == CommandKind::Migrate,
            asking: spec.flags.contains(CommandFlags::ASKING),
        })
    }
}

/// The slot shared by a list of shard channels (SPUBLISH, SSUBSCRIBE, SUNSUBSCRIBE; §20.6):
/// `Ok(None)` for no channels, CROSSSLOT if they hash to different slots. Routing itself is
/// done by [`route`], which treats these commands as keyed.
///
/// # Errors
/// [`RouteError::CrossSlot`].
pub fn shard_channels_slot<A: AsRef<[u8]>>(channels: &[A]) -> Result<Option<Slot>, RouteError> {
    let mut slot = None;
    for ch in channels {
        let s = SlotKey::new(ch.as_ref()).slot();
        match slot {
            None => slot = Some(s),
            Some(prev) if prev != s => return Err(RouteError::CrossSlot),
            Some(_) => {}
        }
    }
    Ok(slot)
}

struct Finish {
    own_write: bool,
    any_write: bool,
    pubsub: bool,
    migrate: bool,
    asking: bool,
}

struct Scan<'c, V: ?Sized, K: ?Sized> {
    client: &'c ClientState,
    ctx: &'c ClusterContext<'c, V>,
    keys: &'c K,
    exec: bool,
    db: usize,
    slot: Option<Slot>,
    owner: Option<NodeId>,
    first_key: Vec<u8>,
    multiple_keys: bool,
    migrating: bool,
    importing: bool,
    missing: usize,
    existing: usize,
}

impl<'c, V: ClusterView + ?Sized, K: KeyPresence + ?Sized> Scan<'c, V, K> {
    fn new(
        client: &'c ClientState,
        ctx: &'c ClusterContext<'c, V>,
        keys: &'c K,
        exec: bool,
    ) -> Self {
        Scan {
            client,
            ctx,
            keys,
            exec,
            db: client.db(),
            slot: None,
            owner: None,
            first_key: Vec::new(),
            multiple_keys: false,
            migrating: false,
            importing: false,
            missing: 0,
            existing: 0,
        }
    }

    fn my_primary(&self) -> NodeId {
        let me = self.ctx.view.myself();
        match me.primary {
            Some(p) if me.is_replica() => p,
            _ => *me.id(),
        }
    }

    fn feed<A: AsRef<[u8]>>(
        &mut self,
        spec: &CommandSpec,
        argv: &[A],
        pubsub: bool,
    ) -> Result<(), RouteError> {
        if self.exec && spec.kind == CommandKind::Select {
            if let Some(db) = argv.get(1).and_then(|a| parse_i64(a.as_ref())) {
                if let Ok(db) = usize::try_from(db) {
                    if db < self.ctx.config.databases {
                        self.db = db;
                    }
                }
            }
        }
        for pos in spec.key_positions(argv) {
            let key = argv[pos].as_ref();
            // `key_hash_slot(key)`, by the branch-free path for short keys.
            let s = SlotKey::new(key).slot();
            match self.slot {
                None => {
                    self.slot = Some(s);
                    let owner = *self
                        .ctx
                        .view
                        .slot_owner(s)
                        .ok_or(RouteError::SlotNotServed)?;
                    self.owner = Some(owner);
                    let me = self.ctx.view.myself();
                    if me.is_primary() || self.client.readonly() {
                        if owner == self.my_primary() && self.ctx.view.migrating_to(s).is_some() {
                            self.migrating = true;
                        } else if self.ctx.view.importing_from(s).is_some() {
                            self.importing = true;
                        }
                    }
                    self.first_key.clear();
                    self.first_key.extend_from_slice(key);
                }
                Some(prev) => {
                    if prev != s {
                        return Err(RouteError::CrossSlot);
                    }
                    if self.importing && !self.multiple_keys && key != self.first_key.as_slice() {
                        self.multiple_keys = true;
                    }
                }
            }
            if !(self.migrating || self.importing) {
                continue;
            }
            if spec.kind == CommandKind::Move {
                return Err(RouteError::TryAgain);
            }
            if spec.kind == CommandKind::Copy
                && argv
                    .get(3)
                    .is_some_and(|a| eq_ignore_case(a.as_ref(), "db"))
            {
                let target = argv.get(4).and_then(|a| parse_i64(a.as_ref()));
                if target.and_then(|t| usize::try_from(t).ok()) != Some(self.db) {
                    return Err(RouteError::TryAgain);
                }
            }
            let queueing = self.client.in_multi() && !self.exec;
            if !pubsub && !queueing {
                if self.keys.key_exists(self.db, key) {
                    self.existing += 1;
                } else {
                    self.missing += 1;
                }
            }
        }
        Ok(())
    }

    fn finish(self, f: Finish) -> Route {
        let (Some(slot), Some(owner)) = (self.slot, self.owner) else {
            return Ok(None);
        };
        let cfg = &self.ctx.config;
        if !self.ctx.state_ok {
            if f.pubsub {
                if !cfg.allow_pubsubshard_when_down {
                    return Err(RouteError::ClusterDown);
                }
            } else if !cfg.allow_reads_when_down {
                return Err(RouteError::ClusterDown);
            } else if f.own_write {
                return Err(RouteError::ClusterDownReadOnly);
            }
        }
        let me = self.ctx.view.myself();
        if (self.migrating || self.importing) && f.migrate && me.is_primary() {
            return Ok(Some(slot));
        }
        if self.migrating && self.missing > 0 {
            if self.existing > 0 {
                return Err(RouteError::TryAgain);
            }
            // The migrating mark was seen at the first key (step 3).
            let target = self.ctx.view.migrating_to(slot).copied().unwrap_or(owner);
            return Err(RouteError::Ask(self.redirect(slot, target)));
        }
        if self.importing && (self.client.asking() || f.asking) {
            if self.multiple_keys && self.missing > 0 {
                return Err(RouteError::TryAgain);
            }
            return Ok(Some(slot));
        }
        if (self.client.readonly() || f.pubsub)
            && !f.any_write
            && me.is_replica()
            && me.primary == Some(owner)
        {
            return Ok(Some(slot));
        }
        if owner != *me.id() {
            return Err(RouteError::Moved(self.redirect(slot, owner)));
        }
        Ok(Some(slot))
    }

    fn redirect(&self, slot: Slot, node: NodeId) -> Redirect {
        let (endpoint, port) = match self.ctx.view.node(&node) {
            Some(n) => endpoint_of(n, self.ctx.config.preferred_endpoint, self.client),
            None => (String::new(), 0),
        };
        Redirect {
            slot,
            node,
            endpoint,
            port,
        }
    }
}

/// The error a client blocked on keys of `slot` (BLPOP and the other blocking pops) gets
/// when this node no longer serves the slot, or `None` while it still waits here (Valkey
/// `clusterRedirectBlockedClientIfNeeded`, called from the clients cron):
///
/// 1. the cluster state is fail → `CLUSTERDOWN The cluster is down`;
/// 2. the slot has no owner → `CLUSTERDOWN Hash slot not served`;
/// 3. another node owns it and it is not being imported here → `MOVED slot endpoint:port`
///    (a blocking pop is a write: READONLY does not keep it on a replica).
///
/// A slot this node is migrating away, or importing, keeps its blocked clients (Valkey sends
/// no ASK or TRYAGAIN to them). The host MUST unblock the client with the error and MUST NOT
/// run its command.
pub fn blocked_redirect<V: ClusterView + ?Sized>(
    ctx: &ClusterContext<'_, V>,
    client: &ClientState,
    slot: Slot,
) -> Option<RouteError> {
    if !ctx.state_ok {
        return Some(RouteError::ClusterDown);
    }
    let me = ctx.view.myself();
    let owner = match ctx.view.slot_owner(slot) {
        None => return Some(RouteError::SlotNotServed),
        Some(o) => *o,
    };
    if owner == *me.id() || ctx.view.importing_from(slot).is_some() {
        return None;
    }
    let (endpoint, port) = match ctx.view.node(&owner) {
        Some(n) => endpoint_of(n, ctx.config.preferred_endpoint, client),
        None => (String::new(), 0),
    };
    Some(RouteError::Moved(Redirect {
        slot,
        node: owner,
        endpoint,
        port,
    }))
}

/// The endpoint text and port a client is given for `node` (Valkey
/// `clusterNodePreferredEndpoint`, `clusterNodeClientPort`): see [`Redirect`].
pub fn endpoint_of(node: &Node, kind: EndpointType, client: &ClientState) -> (String, u16) {
    let endpoint = match kind {
        EndpointType::Ip => node
            .client_ip(client.ipv6())
            .map(|ip| ip.to_string())
            .unwrap_or_default(),
        EndpointType::Hostname => match &node.hostname {
            Some(h) if !h.as_str().is_empty() => h.as_str().to_owned(),
            _ => "?".to_owned(),
        },
        EndpointType::UnknownEndpoint => String::new(),
    };
    let port = if client.tls() {
        node.tls_port
    } else {
        node.port
    };
    (endpoint, port)
}

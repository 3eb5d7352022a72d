//! The simulator driving real `ferrocluster_node::ClusterNode`s: the [`Engine`] impl, a
//! builder, command helpers for scenarios, and the cluster invariants.

use crate::engine::{Engine, EngineOutput, LinkEvent};
use crate::net::NetConfig;
use crate::sim::{host_ip, Invariant, Sim, StepInfo, StepKind, Violation, BUS_PORT, CLIENT_PORT};
use ferrocluster_node::{
    Capabilities, ClusterConfig, ClusterNode, CommandOutcome, CommandRequest, EmptyKeyspace,
    LinkEvent as NodeLinkEvent, LinkId, Notice, Output,
};
use ferrocluster_slot::{Slot, SlotSet};
use ferrocluster_topology::{Millis, Node, NodeFlags, NodeId, Reply, Topology};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::IpAddr;

/// What every simulated host can do: replication ([`crate::World`] runs it) and the atomic
/// slot migration data plane (`world/asm.rs`), one database.
pub const SIM_CAPABILITIES: Capabilities = Capabilities {
    replication: true,
    slot_migration: true,
    databases: 1,
};

impl Engine for ClusterNode {
    type Link = LinkId;
    /// Every output but the bus and disk ones (replies, role changes, pauses, data-plane
    /// requests, notices).
    type Event = Output;

    fn handle_accept(&mut self, peer_ip: IpAddr, now: Millis) -> LinkId {
        ClusterNode::handle_accept(self, peer_ip, now)
    }
    fn handle_link(&mut self, event: LinkEvent<LinkId>, now: Millis) {
        let ev = match event {
            LinkEvent::Connected(l) => NodeLinkEvent::Connected(l),
            LinkEvent::ConnectFailed(l) => NodeLinkEvent::ConnectFailed(l),
            LinkEvent::Closed(l) => NodeLinkEvent::Closed(l),
        };
        ClusterNode::handle_link(self, ev, now);
    }
    fn handle_link_bytes(&mut self, link: LinkId, bytes: &[u8], now: Millis) {
        ClusterNode::handle_link_bytes(self, link, bytes, now);
    }
    fn handle_timeout(&mut self, now: Millis) {
        ClusterNode::handle_timeout(self, now);
    }
    fn handle_persisted(&mut self, seq: u64, _now: Millis) {
        ClusterNode::handle_persisted(self, seq);
    }
    fn poll_output(&mut self) -> Option<EngineOutput<LinkId, Output>> {
        Some(match ClusterNode::poll_output(self)? {
            Output::Connect { link, ip, port } => EngineOutput::Connect { link, ip, port },
            Output::Transmit { link, bytes } => EngineOutput::Transmit { link, bytes },
            Output::Close { link } => EngineOutput::Close { link },
            Output::Persist { seq, contents, .. } => EngineOutput::Persist { seq, contents },
            other => EngineOutput::Event(other),
        })
    }
    fn poll_timeout(&self) -> Option<Millis> {
        ClusterNode::poll_timeout(self)
    }
    fn trace_text(ev: &Output) -> Option<String> {
        // The texts the trace had before outputs and notices were split (issue 17), so the
        // trace hashes of the refactoring can be compared with the old ones: a notice is
        // traced without its wrapper, a reply (new) not at all.
        match ev {
            Output::Reply { .. } => None,
            Output::Notice(Notice::MigrationStateChanged {
                job,
                kind,
                from,
                to,
            }) => Some(format!(
                "Migration(StateChanged {{ job: {job:?}, kind: {kind:?}, from: {from:?}, to: \
                 {to:?} }})"
            )),
            Output::Notice(n) => Some(format!("{n:?}")),
            other => Some(format!("{other:?}")),
        }
    }
}

/// A simulator of `ClusterNode`s.
pub type ClusterSim = Sim<ClusterNode>;

/// Why a scenario helper failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SimError {
    /// An invariant broke (the run is over).
    Violation(Violation),
    /// The host is crashed.
    HostDown(usize),
    /// The node refused the command: its error reply.
    Refused(String),
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::Violation(v) => write!(f, "{v}"),
            SimError::HostDown(h) => write!(f, "host {h} is down"),
            SimError::Refused(e) => write!(f, "node refused: {e}"),
        }
    }
}

impl std::error::Error for SimError {}

impl From<Violation> for SimError {
    fn from(v: Violation) -> SimError {
        SimError::Violation(v)
    }
}

/// The configuration host `index` runs with: `base` with the simulator's client port (so the
/// bus port is [`BUS_PORT`]); every host shares the rest.
pub fn host_config(base: &ClusterConfig, _index: usize) -> ClusterConfig {
    ClusterConfig {
        port: CLIENT_PORT,
        cluster_port: 0,
        announce_bus_port: 0,
        ..base.clone()
    }
}

/// Builds a simulator of `hosts` fresh `ClusterNode`s (each from [`host_config`]) with the
/// [`ClusterInvariants`] registered.
///
/// # Errors
/// A [`Violation`] of `engine start` if the configuration is refused.
pub fn cluster_sim(
    seed: u64,
    hosts: usize,
    config: ClusterConfig,
    net: NetConfig,
) -> Result<ClusterSim, Violation> {
    cluster_sim_with(seed, hosts, config, net, ClusterInvariants::new())
}

/// [`cluster_sim`] with the given invariants (say, [`ClusterInvariants::exhaustive`], or
/// with external IDs declared).
///
/// # Errors
/// A [`Violation`] of `engine start` if the configuration is refused.
pub fn cluster_sim_with(
    seed: u64,
    hosts: usize,
    config: ClusterConfig,
    net: NetConfig,
    invariants: ClusterInvariants,
) -> Result<ClusterSim, Violation> {
    let mut sim = Sim::new(
        seed,
        net,
        hosts,
        Box::new(move |i, now, seed, saved| {
            ClusterNode::new(host_config(&config, i), SIM_CAPABILITIES, now, seed, saved)
                .map_err(|e| format!("host {i}: ClusterNode::new refused: {e}"))
        }),
    )?;
    sim.add_invariant(Box::new(invariants));
    Ok(sim)
}

/// Builds a simulator of `hosts` `ClusterNode`s that start from a nodes.conf already listing
/// the whole cluster, as after a restart: host *i* at [`host_ip`]`(i)`, every node a primary
/// with configEpoch *i* + 1 and an equal contiguous share of the 16384 slots, IDs drawn from
/// `seed`. Loading sets the saved non-zero pong times to the load time (§18.3), so the first
/// PINGs go out one ping interval (NODE_TIMEOUT / 2) after the start. No invariants are
/// registered (benchmarks; add them with [`Sim::add_invariant`]).
///
/// # Errors
/// A [`Violation`] of `engine start` if a node refuses its configuration.
pub fn preset_cluster_sim(
    seed: u64,
    hosts: usize,
    config: ClusterConfig,
    net: NetConfig,
) -> Result<ClusterSim, Violation> {
    preset_cluster_sim_staggered(seed, hosts, config, net, 0)
}

/// [`preset_cluster_sim`] with the hosts starting one after another, evenly spread over the
/// first `stagger_ms` ms (host *i* at `i * stagger_ms / hosts`; host 0 at once), through
/// [`Sim::new_staggered`]: bounds the PINGs in flight at start-up for large clusters. Keep
/// `stagger_ms` well under NODE_TIMEOUT, or the early nodes mark the late ones PFAIL.
///
/// # Errors
/// A [`Violation`] of `engine start` if a node started at once refuses its configuration.
pub fn preset_cluster_sim_staggered(
    seed: u64,
    hosts: usize,
    config: ClusterConfig,
    net: NetConfig,
    stagger_ms: u64,
) -> Result<ClusterSim, Violation> {
    preset_cluster_sim_with_replicas(seed, hosts, &[], config, net, stagger_ms)
}

/// [`preset_cluster_sim_staggered`] with replicas: every `(replica, primary)` pair of
/// `replicas` makes host `replica` a replica of host `primary` in every nodes.conf (flag
/// `slave`, the primary's ID, the primary's shard ID, configEpoch 0, no slots); the other
/// hosts are primaries with configEpoch *i* + 1 sharing the 16384 slots in equal contiguous
/// ranges, in host order. The IDs are drawn as without replicas (same seed, same IDs). A
/// replica's data link is the host's to bring up ([`crate::World`] starts its replication
/// engine as a replica of its primary when the host starts, [`crate::Sim::take_started`]).
///
/// # Errors
/// A [`Violation`] of `engine start` if a node started at once refuses its configuration.
pub fn preset_cluster_sim_with_replicas(
    seed: u64,
    hosts: usize,
    replicas: &[(usize, usize)],
    config: ClusterConfig,
    net: NetConfig,
    stagger_ms: u64,
) -> Result<ClusterSim, Violation> {
    use rand_chacha::rand_core::SeedableRng;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let start = crate::sim::START_TIME;
    let mut records: Vec<Node> = (0..hosts)
        .map(|i| {
            let id = NodeId::random(&mut rng);
            let shard = ferrocluster_topology::ShardId::random(&mut rng);
            let mut node = Node::new(id, shard, start);
            node.flags = NodeFlags::PRIMARY;
            node.ip = Some(host_ip(i));
            node.port = CLIENT_PORT;
            node.bus_port = BUS_PORT;
            node.config_epoch = ferrocluster_topology::ConfigEpoch(i as u64 + 1);
            node.pong_received = Some(start);
            node
        })
        .collect();
    for &(r, p) in replicas {
        let (Some(pid), Some(pshard)) = (
            records.get(p).map(|n| *n.id()),
            records.get(p).map(|n| n.shard_id),
        ) else {
            continue;
        };
        if let Some(n) = records.get_mut(r) {
            n.flags = NodeFlags::REPLICA;
            n.primary = Some(pid);
            n.shard_id = pshard;
            n.config_epoch = ferrocluster_topology::ConfigEpoch(0);
        }
    }
    let n = hosts.max(1) as u64;
    Sim::new_staggered(
        seed,
        net,
        hosts,
        Box::new(move |i, now, seed, saved| {
            let conf = match saved {
                Some(bytes) => bytes.to_vec(),
                None => preset_nodes_conf(&records, i),
            };
            ClusterNode::new(
                host_config(&config, i),
                SIM_CAPABILITIES,
                now,
                seed,
                Some(&conf),
            )
            .map_err(|e| format!("host {i}: ClusterNode::new refused: {e}"))
        }),
        &|i| i as u64 * stagger_ms / n,
    )
}

/// Host `me`'s nodes.conf for the cluster `nodes` (see [`preset_cluster_sim_with_replicas`]):
/// the primaries share the slots in table order, in the ranges
/// [`ClusterSimExt::assign_slots_evenly`] gives.
fn preset_nodes_conf(nodes: &[Node], me: usize) -> Vec<u8> {
    let mut myself = nodes[me].clone();
    myself.link = ferrocluster_topology::LinkState::Connected;
    let mut topo = Topology::new(myself);
    for (i, node) in nodes.iter().enumerate() {
        if i != me {
            // IDs are distinct (random 160-bit) and the records carry no MYSELF flag.
            let _ = topo.add_node(node.clone());
        }
    }
    let primaries: Vec<NodeId> = nodes
        .iter()
        .filter(|n| n.is_primary())
        .map(|n| *n.id())
        .collect();
    // The ranges of `ClusterSimExt::assign_slots_evenly` (and `Layout::first_slot`).
    let n = primaries.len().max(1);
    let total = ferrocluster_slot::SLOT_COUNT;
    for (i, owner) in primaries.iter().enumerate() {
        for s in total * i / n..total * (i + 1) / n {
            if let Ok(slot) = Slot::new(s as u16) {
                // The owner is one of the nodes just added.
                let _ = topo.set_slot_owner(slot, Some(*owner));
            }
        }
    }
    topo.current_epoch = ferrocluster_topology::CurrentEpoch(nodes.len() as u64);
    ferrocluster_topology::save_nodes_conf(&topo).into_bytes()
}

/// Scenario helpers on a [`ClusterSim`]. Host indexes are simulator hosts; node IDs are what
/// each node calls itself.
pub trait ClusterSimExt {
    /// The node of a running host.
    fn node(&self, host: usize) -> Option<&ClusterNode>;
    /// A running host's node ID.
    fn id(&self, host: usize) -> Option<NodeId>;
    /// The record `observer` holds about the node `target` currently calls itself.
    fn view(&self, observer: usize, target: usize) -> Option<&Node>;
    /// The flags `observer` holds for `target` (see [`ClusterSimExt::view`]).
    fn flags(&self, observer: usize, target: usize) -> Option<NodeFlags> {
        self.view(observer, target).map(|n| n.flags)
    }
    /// Whether every running host in `hosts` knows every other one by its real ID, not in
    /// handshake, with an outbound link (a full mesh).
    fn full_mesh(&self, hosts: &[usize]) -> bool;
    /// `CLUSTER MEET` from `from` to `to`'s address.
    ///
    /// # Errors
    /// [`SimError`].
    fn meet(&mut self, from: usize, to: usize) -> Result<(), SimError>;
    /// `CLUSTER MEET ip port` from `from` (bus port = `port + 10000`).
    ///
    /// # Errors
    /// [`SimError`].
    fn meet_addr(&mut self, from: usize, ip: IpAddr, port: u16) -> Result<(), SimError>;
    /// `CLUSTER ADDSLOTSRANGE first last` on `host`.
    ///
    /// # Errors
    /// [`SimError`].
    fn add_slot_range(&mut self, host: usize, first: u16, last: u16) -> Result<(), SimError>;
    /// Splits all 16384 slots into contiguous equal ranges over `primaries`.
    ///
    /// # Errors
    /// [`SimError`].
    fn assign_slots_evenly(&mut self, primaries: &[usize]) -> Result<(), SimError>;
    /// `CLUSTER REPLICATE` on `replica` naming `primary`'s ID.
    ///
    /// # Errors
    /// [`SimError`].
    fn replicate(&mut self, replica: usize, primary: usize) -> Result<(), SimError>;
    /// `CLUSTER FORGET id` on `host`.
    ///
    /// # Errors
    /// [`SimError`].
    fn forget(&mut self, host: usize, id: &NodeId) -> Result<(), SimError>;
    /// `CLUSTER <args>` on `host` through the executor, as a client would send it: `Ok` when
    /// accepted (the reply may still wait for its persist).
    ///
    /// # Errors
    /// [`SimError::Refused`] with the error reply, [`SimError::HostDown`],
    /// [`SimError::Violation`].
    fn command(&mut self, host: usize, args: &[&str]) -> Result<(), SimError>;
    /// Runs until every host in `hosts` is in a full mesh, at most `max_ms`.
    ///
    /// # Errors
    /// [`SimError::Violation`].
    fn run_until_mesh(&mut self, hosts: &[usize], max_ms: u64) -> Result<bool, SimError>;
}

impl ClusterSimExt for ClusterSim {
    fn node(&self, host: usize) -> Option<&ClusterNode> {
        self.engine(host)
    }

    fn id(&self, host: usize) -> Option<NodeId> {
        self.engine(host).map(|n| *n.myself_id())
    }

    fn view(&self, observer: usize, target: usize) -> Option<&Node> {
        let id = self.id(target)?;
        self.engine(observer)?.topology().node(&id)
    }

    fn full_mesh(&self, hosts: &[usize]) -> bool {
        hosts.iter().all(|&a| {
            hosts.iter().all(|&b| {
                a == b
                    || self.view(a, b).is_some_and(|n| {
                        !n.in_handshake() && n.link == ferrocluster_topology::LinkState::Connected
                    })
            })
        })
    }

    fn meet(&mut self, from: usize, to: usize) -> Result<(), SimError> {
        self.meet_addr(from, host_ip(to), CLIENT_PORT)
    }

    fn meet_addr(&mut self, from: usize, ip: IpAddr, port: u16) -> Result<(), SimError> {
        let (ip, port) = (ip.to_string(), port.to_string());
        self.command(from, &["MEET", &ip, &port])
    }

    fn add_slot_range(&mut self, host: usize, first: u16, last: u16) -> Result<(), SimError> {
        let (first, last) = (first.to_string(), last.to_string());
        self.command(host, &["ADDSLOTSRANGE", &first, &last])
    }

    fn assign_slots_evenly(&mut self, primaries: &[usize]) -> Result<(), SimError> {
        let n = primaries.len().max(1);
        let total = ferrocluster_slot::SLOT_COUNT;
        for (i, &p) in primaries.iter().enumerate() {
            let first = total * i / n;
            let last = total * (i + 1) / n - 1;
            // Both below 16384: they fit u16.
            self.add_slot_range(p, first as u16, last as u16)?;
        }
        Ok(())
    }

    fn replicate(&mut self, replica: usize, primary: usize) -> Result<(), SimError> {
        let id = self.id(primary).ok_or(SimError::HostDown(primary))?;
        self.command(replica, &["REPLICATE", id.as_str()])
    }

    fn forget(&mut self, host: usize, id: &NodeId) -> Result<(), SimError> {
        self.command(host, &["FORGET", id.as_str()])
    }

    fn command(&mut self, host: usize, args: &[&str]) -> Result<(), SimError> {
        let mut argv = vec!["CLUSTER"];
        argv.extend_from_slice(args);
        let outcome = self
            .with_engine(host, |n, now| {
                n.cluster_command_argv(&argv, &CommandRequest::default(), &EmptyKeyspace, now)
            })?
            .ok_or(SimError::HostDown(host))?;
        match outcome {
            // A refusal changes nothing and comes at once; an accepted change is
            // acknowledged once durable (the scenario goes on meanwhile).
            CommandOutcome::Reply(Reply::Error(e)) => Err(SimError::Refused(e)),
            CommandOutcome::Reply(_) | CommandOutcome::Deferred => Ok(()),
            other => Err(SimError::Refused(format!("unexpected outcome {other:?}"))),
        }
    }

    fn run_until_mesh(&mut self, hosts: &[usize], max_ms: u64) -> Result<bool, SimError> {
        let hosts = hosts.to_vec();
        Ok(self.run_until_cond(max_ms, |s| s.full_mesh(&hosts))?)
    }
}

/// Checks that every running host in `hosts` agrees with every other: all know each other by
/// their current IDs (no handshake), none sees another as PFAIL or FAIL, every slot has the
/// same owner in every view, and every cluster_state is `ok` when all slots are assigned.
/// For the end of a run, after the network healed and the cluster had time to settle.
///
/// # Errors
/// A description of the first disagreement.
pub fn check_converged(sim: &ClusterSim, hosts: &[usize]) -> Result<(), String> {
    let up: Vec<usize> = hosts.iter().copied().filter(|&h| sim.is_up(h)).collect();
    for &a in &up {
        for &b in &up {
            if a == b {
                continue;
            }
            let Some(n) = sim.view(a, b) else {
                return Err(format!("host {a} does not know host {b}"));
            };
            if n.in_handshake() || n.is_pfail() || n.is_fail() {
                return Err(format!("host {a} sees host {b} as {}", n.flags.names()));
            }
        }
    }
    let Some(&first) = up.first() else {
        return Ok(());
    };
    let Some(reference) = sim.node(first).map(ClusterNode::topology) else {
        return Ok(());
    };
    for &h in &up[1..] {
        let Some(t) = sim.node(h).map(ClusterNode::topology) else {
            continue;
        };
        if same_slot_owners(reference, t) {
            continue;
        }
        if let Some(s) = Slot::all().find(|&s| t.slot_owner(s) != reference.slot_owner(s)) {
            return Err(format!(
                "slot {s}: host {first} says {:?}, host {h} says {:?}",
                reference.slot_owner(s).map(NodeId::as_str),
                t.slot_owner(s).map(NodeId::as_str)
            ));
        }
    }
    for &h in &up {
        if let Some(n) = sim.node(h) {
            check_shards_match_slots(n.topology()).map_err(|m| format!("host {h}: {m}"))?;
            let full = n.topology().assigned_slot_count() == ferrocluster_slot::SLOT_COUNT;
            if full && !n.cluster_state_ok() {
                return Err(format!(
                    "host {h}: cluster_state fail with every slot served"
                ));
            }
        }
    }
    Ok(())
}

/// The views agree on slot ownership (issue 16 item 3): the slots over all shards of CLUSTER
/// SHARDS are exactly the owned slots of CLUSTER SLOTS, each in one shard only. Holds once a
/// view settled (a failed-over shard's old primary is FAIL or follows the new one, shard IDs
/// propagated); part of [`check_converged`].
///
/// # Errors
/// What differs.
pub fn check_shards_match_slots(topo: &Topology) -> Result<(), String> {
    let opts = ferrocluster_topology::views::ViewOptions::default();
    let pairs = |r: &Reply| -> Option<SlotSet> {
        let Reply::Array(v) = r else { return None };
        let mut set = SlotSet::new();
        for p in v.chunks(2) {
            let (Some(Reply::Integer(a)), Some(Reply::Integer(b))) = (p.first(), p.get(1)) else {
                return None;
            };
            for s in *a..=*b {
                set.insert(Slot::new(u16::try_from(s).ok()?).ok()?);
            }
        }
        Some(set)
    };
    let Reply::Array(shards) = ferrocluster_topology::views::cluster_shards(topo, &opts) else {
        return Err("CLUSTER SHARDS is not an array".into());
    };
    let mut in_shards = SlotSet::new();
    for (i, sh) in shards.iter().enumerate() {
        let Reply::Map(m) = sh else {
            return Err(format!("CLUSTER SHARDS entry {i} is not a map"));
        };
        let slots = m
            .iter()
            .find(|(k, _)| *k == Reply::bulk("slots"))
            .and_then(|(_, v)| pairs(v))
            .ok_or_else(|| format!("CLUSTER SHARDS entry {i} has no slot pairs"))?;
        if let Some(s) = slots.intersection(&in_shards).iter().next() {
            return Err(format!("slot {s} is in two shards of CLUSTER SHARDS"));
        }
        in_shards = in_shards.union(&slots);
    }
    let Reply::Array(ranges) = ferrocluster_topology::views::cluster_slots(topo, &opts) else {
        return Err("CLUSTER SLOTS is not an array".into());
    };
    let mut owned = SlotSet::new();
    for r in &ranges {
        let Reply::Array(e) = r else {
            return Err("a CLUSTER SLOTS entry is not an array".into());
        };
        let set = pairs(&Reply::Array(e.iter().take(2).cloned().collect()))
            .ok_or("a CLUSTER SLOTS entry has no range")?;
        owned = owned.union(&set);
    }
    if owned != in_shards {
        let missing = owned.difference(&in_shards);
        let extra = in_shards.difference(&owned);
        return Err(format!(
            "CLUSTER SHARDS covers {} slots, CLUSTER SLOTS {}: missing from SHARDS {:?}, not \
             owned {:?}",
            in_shards.len(),
            owned.len(),
            missing.ranges().next(),
            extra.ranges().next()
        ));
    }
    Ok(())
}

/// Whether two views give every slot the same owner, compared through the nodes' slot sets
/// (a 2 KiB comparison per node instead of 16384 owner look-ups: [`check_converged`] runs as
/// the stop condition of long runs, after every step). Exact because each view's owner table
/// and slot sets agree ([`Topology::check_invariants`], checked by [`ClusterInvariants`]);
/// a `false` is confirmed slot by slot by the caller.
fn same_slot_owners(a: &Topology, b: &Topology) -> bool {
    let same = |x: &Topology, y: &Topology| {
        x.nodes().all(|n| match y.node(n.id()) {
            Some(m) => m.slots() == n.slots(),
            None => n.slots().is_empty(),
        })
    };
    same(a, b)
        && b.nodes()
            .all(|m| a.contains(m.id()) || m.slots().is_empty())
}

/// The cluster invariants, checked after every step on the host that ran:
///
/// 0. **node**: [`ClusterNode::invariants`] (a vote or an auth request never leaves before
///    its persist is acknowledged; currentEpoch, configEpoch and lastVoteEpoch never go down;
///    one vote per epoch; myself's slots go to a peer only with a higher configEpoch;
///    myself's record is never rewritten by a peer).
/// 1. **topology**: [`Topology::check_invariants`] (one myself; slot-owner table and node slot
///    sets agree; marks name known nodes). It runs after every step that changed the node
///    table or a node's slot set, and after every command and restart: those are the only
///    changes that touch what it checks. [`ClusterInvariants::exhaustive`] runs it after
///    every step.
/// 2. **myself**: myself is PRIMARY xor REPLICA and never PFAIL/FAIL.
/// 3. **identity**: no two hosts ever call themselves by the same ID; every node record that
///    is not a handshake node carries an ID some host really had, and if it has an address,
///    that host's address (a node never believes a wrong real ID for a node).
/// 4. **PFAIL soundness** (§9.1): a known node becomes PFAIL in a view only with a ping
///    pending and `min(now − ping_sent, now − data_received) > NODE_TIMEOUT`.
/// 5. **FAIL soundness** (§9.3, §8 step 7): a known node becomes FAIL in a view only if a FAIL
///    message about it reached the viewer in that step, or the viewer holds a quorum:
///    valid failure reports (≤ 2 × NODE_TIMEOUT old) plus itself if it is a voting primary
///    ≥ cluster_size / 2 + 1.
///
/// 4 and 5 judge transitions of nodes the viewer knew before the step: a node learned from a
/// gossip entry takes the entry's flags, PFAIL and FAIL included (§7.4).
#[derive(Debug, Default)]
pub struct ClusterInvariants {
    exhaustive: bool,
    ever_ids: BTreeMap<NodeId, usize>,
    external: BTreeMap<NodeId, Option<(IpAddr, u16)>>,
    seen: Vec<Option<HostSnapshot>>,
}

#[derive(Debug, Default)]
struct HostSnapshot {
    slots: Vec<(NodeId, SlotSet)>,
    known: BTreeSet<NodeId>,
    pfail: BTreeSet<NodeId>,
    fail: BTreeSet<NodeId>,
    /// Myself was a voting primary.
    voting: bool,
    /// `cluster_size` (voting primaries).
    size: usize,
    /// The failure reports about each PFAIL node: reporter -> time.
    reports: BTreeMap<NodeId, BTreeMap<NodeId, Millis>>,
}

impl ClusterInvariants {
    /// The invariants with the topology check gated on changes (see the type docs).
    pub fn new() -> ClusterInvariants {
        ClusterInvariants::default()
    }

    /// The invariants with the topology check after every step.
    pub fn exhaustive() -> ClusterInvariants {
        ClusterInvariants {
            exhaustive: true,
            ..ClusterInvariants::default()
        }
    }

    /// Declares an ID no simulated host has but a test injects on purpose (a fabricated
    /// gossip entry), optionally with the bus address records of it must carry.
    pub fn allow_external_id(mut self, id: NodeId, addr: Option<(IpAddr, u16)>) -> Self {
        self.external.insert(id, addr);
        self
    }

    fn bind_id(&mut self, id: NodeId, host: usize) -> Result<(), String> {
        match self.ever_ids.insert(id, host) {
            Some(other) if other != host => Err(format!(
                "hosts {other} and {host} both call themselves {id}"
            )),
            _ => Ok(()),
        }
    }
}

impl Invariant<ClusterNode> for ClusterInvariants {
    fn name(&self) -> &str {
        "cluster"
    }

    fn check(&mut self, sim: &ClusterSim, step: &StepInfo<Output>) -> Result<(), String> {
        let host = step.host;
        if self.seen.len() < sim.hosts() {
            self.seen.resize_with(sim.hosts(), || None);
            for h in 0..sim.hosts() {
                if let Some(n) = sim.engine(h) {
                    self.bind_id(*n.myself_id(), h)?;
                }
            }
        }
        let Some(node) = sim.engine(host) else {
            return Ok(());
        };
        // 0. the node's own invariants (durable votes and auth requests, epochs that never
        // go down, one vote per epoch, myself's slots and record; `ClusterNode::invariants`).
        node.invariants()
            .map_err(|e| format!("node invariant: {e}"))?;
        let topo = node.topology();
        let now = sim.now();
        let timeout = node.config().node_timeout_ms;
        self.bind_id(*topo.myself_id(), host)?;

        // 1. topology
        let mut prev = self.seen[host].take();
        let fresh = step.kind == StepKind::Restart || step.kind == StepKind::Command;
        let slots_changed = prev.as_ref().is_none_or(|p| {
            p.slots.len() != topo.len()
                || p.slots
                    .iter()
                    .zip(topo.nodes())
                    .any(|((id, s), n)| id != n.id() || s != n.slots())
        });
        let slots = if slots_changed || fresh || self.exhaustive {
            topo.check_invariants()
                .map_err(|e| format!("topology: {e}"))?;
            topo.nodes().map(|n| (*n.id(), n.slots().clone())).collect()
        } else {
            // Unchanged: moved over from the previous snapshot, not cloned.
            prev.as_mut()
                .map(|p| std::mem::take(&mut p.slots))
                .unwrap_or_default()
        };

        // 2. myself
        let me = topo.myself();
        if me.is_primary() == me.is_replica() {
            return Err(format!(
                "myself flags {} are not PRIMARY xor REPLICA",
                me.flags.names()
            ));
        }
        if me.is_pfail() || me.is_fail() {
            return Err(format!("myself is {}", me.flags.names()));
        }

        // 3. identity
        for n in topo.nodes().filter(|n| !n.is_myself() && !n.in_handshake()) {
            let expected = match (self.ever_ids.get(n.id()), self.external.get(n.id())) {
                (Some(&owner), _) => Some((sim.ip(owner), BUS_PORT)),
                (None, Some(addr)) => *addr,
                (None, None) => {
                    return Err(format!(
                        "record {} is no host's ID (a handshake ID leaked?)",
                        n.id()
                    ))
                }
            };
            if let (Some(ip), Some((want_ip, want_port)), false) =
                (n.ip, expected, n.has_no_addr() || n.bus_port == 0)
            {
                if ip != want_ip || n.bus_port != want_port {
                    return Err(format!(
                        "record {} (at {want_ip}:{want_port}) has address {ip}:{}",
                        n.id(),
                        n.bus_port
                    ));
                }
            }
        }

        // 4. + 5. PFAIL / FAIL transitions of nodes already known before the step. A node
        // learned from gossip in this step starts with the flags of the gossip entry, PFAIL
        // or FAIL included (§7.4: "create the node with the gossiped ID, flags, ip and ports").
        let known: BTreeSet<NodeId> = topo.nodes().map(|n| *n.id()).collect();
        let pfail: BTreeSet<NodeId> = topo
            .nodes()
            .filter(|n| n.is_pfail())
            .map(|n| *n.id())
            .collect();
        let fail: BTreeSet<NodeId> = topo
            .nodes()
            .filter(|n| n.is_fail())
            .map(|n| *n.id())
            .collect();
        if let (Some(p), false) = (&prev, step.kind == StepKind::Restart) {
            for id in pfail.difference(&p.pfail) {
                if p.fail.contains(id) || !p.known.contains(id) {
                    continue;
                }
                let Some(n) = topo.node(id) else { continue };
                let silent = |t: Option<Millis>| t.is_none_or(|t| now.since(t) > timeout);
                if n.ping_sent.is_none() || !silent(n.ping_sent) || !silent(n.data_received) {
                    return Err(format!(
                        "{id} became PFAIL at {now} with ping_sent {:?}, data_received {:?}, \
                         node timeout {timeout} ms (§9.1)",
                        n.ping_sent, n.data_received
                    ));
                }
            }
            for id in fail.difference(&p.fail) {
                if !p.known.contains(id) {
                    continue;
                }
                if step
                    .fail_names_delivered
                    .iter()
                    .any(|name| name == id.as_bytes())
                {
                    continue;
                }
                // One step can deliver several frames: myself's vote, the cluster size and
                // the reports may change after the mark (a PING's gossip marks FAIL, an UPDATE
                // in the same delivery then takes myself's slots). The mark is sound if the
                // quorum held with the values of the step's start or end.
                let validity = timeout.saturating_mul(2);
                let valid = |r: &BTreeMap<NodeId, Millis>| -> BTreeSet<NodeId> {
                    r.iter()
                        .filter(|(_, t)| now.since(**t) <= validity)
                        .map(|(n, _)| *n)
                        .collect()
                };
                let mut reporters = topo
                    .node(id)
                    .map(|n| valid(&n.failure_reports))
                    .unwrap_or_default();
                if let Some(r) = p.reports.get(id) {
                    reporters.extend(valid(r));
                }
                let me = topo.myself().is_voting_primary() || p.voting;
                let have = reporters.len() + usize::from(me);
                let need = topo.cluster_size().min(p.size) / 2 + 1;
                if have < need {
                    let (now_have, now_need) = fail_quorum(topo, id, now, timeout);
                    return Err(format!(
                        "{id} became FAIL without a FAIL message and with {have} of {need} \
                         votes (valid reports + self over the step; {now_have} of {now_need} at \
                         its end), §9.3"
                    ));
                }
            }
        }
        let reports = topo
            .nodes()
            .filter(|n| n.is_pfail())
            .map(|n| (*n.id(), n.failure_reports.clone()))
            .collect();
        self.seen[host] = Some(HostSnapshot {
            slots,
            known,
            pfail,
            fail,
            voting: topo.myself().is_voting_primary(),
            size: topo.cluster_size(),
            reports,
        });
        Ok(())
    }
}

/// (valid failure reports about `id` + 1 if myself is a voting primary, quorum) in `topo` at
/// `now` (§9.2, §9.3).
pub fn fail_quorum(
    topo: &Topology,
    id: &NodeId,
    now: Millis,
    node_timeout_ms: u64,
) -> (usize, usize) {
    let validity = node_timeout_ms.saturating_mul(2);
    let reports = topo
        .node(id)
        .map(|n| {
            n.failure_reports
                .values()
                .filter(|t| now.since(**t) <= validity)
                .count()
        })
        .unwrap_or(0);
    let me = usize::from(topo.myself().is_voting_primary());
    (reports + me, topo.cluster_size() / 2 + 1)
}

//! A small in-memory harness (like quinn's `Pair`): N nodes, instant delivery, a virtual
//! clock, nodes that can be cut off.
#![allow(dead_code)]

use ferrocluster_node::{
    Capabilities, ClusterConfig, ClusterNode, CommandOutcome, CommandRequest, EmptyKeyspace,
    LinkEvent, LinkId, Millis, NodeId, Output, Reply, RequestId, SlotKeys,
};
use ferrocluster_slot::{key_hash_slot, Slot};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::{IpAddr, Ipv4Addr};

pub const T0: Millis = Millis(1_700_000_000_000);

/// The harness hosts replicate and run the slot migration data plane (one database).
pub const CAPS: Capabilities = Capabilities {
    replication: true,
    slot_migration: true,
    databases: 1,
};

pub fn ip(i: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1 + i as u8))
}

pub fn port(i: usize) -> u16 {
    7000 + i as u16
}

pub fn config(i: usize, node_timeout_ms: u64) -> ClusterConfig {
    ClusterConfig {
        port: port(i),
        node_timeout_ms,
        ..ClusterConfig::default()
    }
}

pub struct Net {
    pub nodes: Vec<ClusterNode>,
    pub now: Millis,
    /// (node, link) -> (peer node, peer link)
    wires: BTreeMap<(usize, LinkId), (usize, LinkId)>,
    /// Every output but the bus and disk ones: (node, output).
    pub events: Vec<(usize, Output)>,
    /// Deferred replies as they came: (node, request, reply).
    pub replies: Vec<(usize, RequestId, Reply)>,
    next_request: u64,
    pub persisted: Vec<Option<Vec<u8>>>,
    pub down: BTreeSet<usize>,
    /// Every transmit: (from node, link, bytes).
    pub sent: Vec<(usize, LinkId, Vec<u8>)>,
    /// Every output of every node in the order acted on: (node, output).
    pub log: Vec<(usize, Output)>,
    /// Every transmit decoded: (index in `log`, from node, to node if wired, message).
    pub wire: Vec<(usize, usize, Option<usize>, ferrocluster_bus::Message)>,
    /// Nodes whose persists are not acknowledged until [`Net::release_persists`].
    pub hold_persist: BTreeSet<usize>,
    /// Nodes whose `PauseWrites` the harness does not confirm (the test calls
    /// `handle_writes_paused` itself).
    pub hold_pause: BTreeSet<usize>,
    held: Vec<(usize, u64)>,
    deliveries: VecDeque<(usize, LinkId, Vec<u8>)>,
}

impl Net {
    pub fn new(n: usize, node_timeout_ms: u64) -> Net {
        let nodes = (0..n)
            .map(|i| {
                ClusterNode::new(config(i, node_timeout_ms), CAPS, T0, 1000 + i as u64, None)
                    .unwrap()
            })
            .collect();
        Net::from_nodes(nodes)
    }

    pub fn from_nodes(nodes: Vec<ClusterNode>) -> Net {
        let n = nodes.len();
        let mut net = Net {
            nodes,
            now: T0,
            wires: BTreeMap::new(),
            events: Vec::new(),
            replies: Vec::new(),
            next_request: 0,
            persisted: vec![None; n],
            down: BTreeSet::new(),
            sent: Vec::new(),
            log: Vec::new(),
            wire: Vec::new(),
            hold_persist: BTreeSet::new(),
            hold_pause: BTreeSet::new(),
            held: Vec::new(),
            deliveries: VecDeque::new(),
        };
        net.drain();
        net
    }

    fn index_of(&self, ip_: IpAddr, bus_port: u16) -> Option<usize> {
        (0..self.nodes.len()).find(|&i| ip(i) == ip_ && port(i) + 10000 == bus_port)
    }

    /// Acts on every output of every node until all are quiet.
    pub fn drain(&mut self) {
        loop {
            let mut any = false;
            for i in 0..self.nodes.len() {
                while let Some(out) = self.nodes[i].poll_output() {
                    any = true;
                    self.act(i, out);
                }
            }
            while let Some((to, link, bytes)) = self.deliveries.pop_front() {
                any = true;
                let now = self.now;
                self.nodes[to].handle_link_bytes(link, &bytes, now);
            }
            if !any {
                break;
            }
        }
        for (i, n) in self.nodes.iter().enumerate() {
            if let Err(e) = n.invariants() {
                panic!("node {i}: {e}");
            }
        }
    }

    fn act(&mut self, i: usize, out: Output) {
        let now = self.now;
        self.log.push((i, out.clone()));
        match out {
            Output::Connect {
                link,
                ip: dst_ip,
                port: dst_port,
            } => match self.index_of(dst_ip, dst_port) {
                Some(j) if !self.down.contains(&i) && !self.down.contains(&j) => {
                    // The connection's local address on j is j's own address (§7.3).
                    let peer_link = self.nodes[j].handle_accept_local(ip(i), ip(j), now);
                    self.wires.insert((i, link), (j, peer_link));
                    self.wires.insert((j, peer_link), (i, link));
                    self.nodes[i].handle_link(LinkEvent::Connected(link), now);
                }
                _ => self.nodes[i].handle_link(LinkEvent::ConnectFailed(link), now),
            },
            Output::Transmit { link, bytes } => {
                let to = self.peer_of(i, link);
                let mut rest = &bytes[..];
                while rest.len() >= 8 {
                    let len = u32::from_be_bytes([rest[4], rest[5], rest[6], rest[7]]) as usize;
                    let (frame, tail) = rest.split_at(len.min(rest.len()));
                    let m = ferrocluster_bus::decode(frame).expect("the node sends valid frames");
                    self.wire.push((self.log.len() - 1, i, to, m));
                    rest = tail;
                }
                self.sent.push((i, link, bytes.clone()));
                if let Some(&(j, peer)) = self.wires.get(&(i, link)) {
                    if !self.down.contains(&i) && !self.down.contains(&j) {
                        self.deliveries.push_back((j, peer, bytes));
                    }
                }
            }
            Output::Close { link } => {
                if let Some((j, peer)) = self.wires.remove(&(i, link)) {
                    self.wires.remove(&(j, peer));
                    self.nodes[j].handle_link(LinkEvent::Closed(peer), now);
                }
            }
            Output::Persist { seq, contents, .. } => {
                self.persisted[i] = Some(contents);
                if self.hold_persist.contains(&i) {
                    self.held.push((i, seq));
                } else {
                    self.nodes[i].handle_persisted(seq);
                }
            }
            Output::Reply { to, reply } => {
                self.replies.push((i, to, reply.clone()));
                self.events.push((i, Output::Reply { to, reply }));
            }
            Output::PauseWrites { until } => {
                // A host that pauses at once: its offset is the one it reported last.
                if !self.hold_pause.contains(&i) {
                    let offset = self.nodes[i].replication().offset;
                    self.nodes[i].handle_writes_paused(offset, now);
                }
                self.events.push((i, Output::PauseWrites { until }));
            }
            e @ (Output::ReplicateFrom { .. }
            | Output::BecamePrimary
            | Output::UnpauseWrites
            | Output::DeleteSlotKeys(_)
            | Output::ClusterReset { .. }
            | Output::PubSubMessage { .. }
            | Output::ModuleMessage { .. }
            | Output::Migration(_)
            | Output::Notice(_)) => self.events.push((i, e)),
        }
    }

    /// The node at the other end of node `i`'s `link`, if wired.
    pub fn peer_of(&self, i: usize, link: LinkId) -> Option<usize> {
        self.wires.get(&(i, link)).map(|&(j, _)| j)
    }

    /// Cuts a node off: its existing links are closed on both sides, new connects fail.
    pub fn isolate(&mut self, i: usize) {
        self.down.insert(i);
        let now = self.now;
        let cut: Vec<_> = self
            .wires
            .keys()
            .filter(|(a, _)| *a == i)
            .copied()
            .collect();
        for (a, l) in cut {
            if let Some((j, peer)) = self.wires.remove(&(a, l)) {
                self.wires.remove(&(j, peer));
                self.nodes[j].handle_link(LinkEvent::Closed(peer), now);
                self.nodes[a].handle_link(LinkEvent::Closed(l), now);
            }
        }
        self.drain();
    }

    /// Acknowledges every held persist of node `i` and stops holding them.
    pub fn release_persists(&mut self, i: usize) {
        self.hold_persist.remove(&i);
        let (mine, rest): (Vec<_>, Vec<_>) = self.held.drain(..).partition(|(n, _)| *n == i);
        self.held = rest;
        for (_, seq) in mine {
            self.nodes[i].handle_persisted(seq);
        }
        self.drain();
    }

    pub fn heal(&mut self, i: usize) {
        self.down.remove(&i);
    }

    /// Advances the clock by `ms` in 100 ms cron steps.
    pub fn run_for(&mut self, ms: u64) {
        let end = self.now.saturating_add_ms(ms);
        while self.now < end {
            self.now = self.now.saturating_add_ms(100);
            let now = self.now;
            for i in 0..self.nodes.len() {
                self.nodes[i].handle_timeout(now);
            }
            self.drain();
        }
    }

    /// Runs until `cond` holds or `max_ms` pass; returns whether it held.
    pub fn run_until(&mut self, max_ms: u64, mut cond: impl FnMut(&Net) -> bool) -> bool {
        let end = self.now.saturating_add_ms(max_ms);
        while self.now < end {
            if cond(self) {
                return true;
            }
            self.run_for(100);
        }
        cond(self)
    }

    /// `CLUSTER <args>` on node `i` from a client with a fresh request ID (no keys), then
    /// [`Net::drain`]: the outcome and the request ID (a deferred reply lands in
    /// [`Net::replies`]).
    pub fn command(&mut self, i: usize, args: &[&str]) -> (CommandOutcome, RequestId) {
        self.next_request += 1;
        let id = RequestId(self.next_request);
        let mut argv = vec!["CLUSTER"];
        argv.extend_from_slice(args);
        let req = CommandRequest {
            id,
            ..CommandRequest::default()
        };
        let now = self.now;
        let out = self.nodes[i].cluster_command_argv(&argv, &req, &EmptyKeyspace, now);
        self.drain();
        (out, id)
    }

    /// The reply node `i` gave to `id`, at once or deferred (`None` while it waits).
    pub fn reply_of(&self, i: usize, id: RequestId, outcome: &CommandOutcome) -> Option<Reply> {
        match outcome {
            CommandOutcome::Reply(r) => Some(r.clone()),
            _ => self
                .replies
                .iter()
                .find(|(n, to, _)| *n == i && *to == id)
                .map(|(_, _, r)| r.clone()),
        }
    }

    /// `CLUSTER <args>` on node `i`, which must answer `+OK` (at once or after its persist).
    pub fn ok(&mut self, i: usize, args: &[&str]) {
        let (out, id) = self.command(i, args);
        let reply = self.reply_of(i, id, &out);
        assert_eq!(
            reply,
            Some(Reply::ok()),
            "CLUSTER {args:?} on node {i}: {out:?}"
        );
    }

    /// CLUSTER MEET from `a` to `b`.
    pub fn meet(&mut self, a: usize, b: usize) {
        let (ip, port) = (ip(b).to_string(), port(b).to_string());
        self.ok(a, &["MEET", &ip, &port]);
    }

    /// CLUSTER ADDSLOTSRANGE `first` `last` on node `i`.
    pub fn add_slots(&mut self, i: usize, first: u16, last: u16) {
        let (f, l) = (first.to_string(), last.to_string());
        self.ok(i, &["ADDSLOTSRANGE", &f, &l]);
    }

    /// CLUSTER REPLICATE `primary` on node `i`.
    pub fn replicate(&mut self, i: usize, primary: &NodeId) {
        self.ok(i, &["REPLICATE", primary.as_str()]);
    }

    /// Whether node `a` knows node `b` by its real ID, out of handshake.
    pub fn knows(&self, a: usize, b: usize) -> bool {
        let id = self.nodes[b].myself_id();
        self.nodes[a]
            .topology()
            .node(id)
            .is_some_and(|n| !n.in_handshake())
    }

    /// Every node knows every other by its real ID and holds no handshake node.
    pub fn fully_meshed(&self) -> bool {
        let n = self.nodes.len();
        (0..n).all(|a| {
            self.nodes[a].topology().len() == n && (0..n).all(|b| a == b || self.knows(a, b))
        })
    }
}

// ----- captured vectors (Valkey 8.0) -----

pub const FLAVOR: &str = "valkey-8.0";

/// The exact reply bytes of a captured case (`text/<file>`).
pub fn captured(file: &str) -> Vec<u8> {
    ferrocluster_testvectors::read(format!("{FLAVOR}/text/{file}"))
}

/// The argv of the last step of a captured case (from `text/index.json`).
pub fn case_argv(file: &str) -> Vec<Vec<u8>> {
    let index = ferrocluster_testvectors::read_json(format!("{FLAVOR}/text/index.json"));
    let entry = index["replies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["file"] == file)
        .unwrap_or_else(|| panic!("{file} not in index.json"));
    let step = entry["steps"].as_array().unwrap().last().unwrap();
    step["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().as_bytes().to_vec())
        .collect()
}

/// The node at data port `port` as saved in nodes.conf at `moment`, loaded into a node
/// whose configuration matches the capture (`cluster-node-timeout 2000`).
pub fn load(moment: &str, port: u16) -> ClusterNode {
    let conf = ferrocluster_testvectors::read(format!(
        "{FLAVOR}/text/nodes-conf/{moment}/nodes-{port}.conf"
    ));
    let cfg = ClusterConfig {
        port,
        node_timeout_ms: 2000,
        ..ClusterConfig::default()
    };
    ClusterNode::new(
        cfg,
        CAPS,
        Millis(1_796_060_450_000),
        u64::from(port),
        Some(&conf),
    )
    .unwrap()
}

/// A keyspace of database 0 given by key names, in insertion order.
#[derive(Debug, Clone, Default)]
pub struct TestKeys(pub Vec<Vec<u8>>);

impl TestKeys {
    pub fn new(keys: &[&str]) -> TestKeys {
        TestKeys(keys.iter().map(|k| k.as_bytes().to_vec()).collect())
    }
}

impl SlotKeys for TestKeys {
    fn count_keys_in_slot(&self, db: usize, slot: Slot) -> u64 {
        if db != 0 {
            return 0;
        }
        self.0.iter().filter(|k| key_hash_slot(k) == slot).count() as u64
    }
    fn keys_in_slot(&self, db: usize, slot: Slot, count: usize) -> Vec<Vec<u8>> {
        if db != 0 {
            return Vec::new();
        }
        self.0
            .iter()
            .filter(|k| key_hash_slot(k) == slot)
            .take(count)
            .cloned()
            .collect()
    }
    fn db_size(&self, db: usize) -> u64 {
        if db == 0 {
            self.0.len() as u64
        } else {
            0
        }
    }
}

/// The reply to one command on a lone node: the one `outcome` carries, or — for
/// `Deferred` — the `Output::Reply` to `id`, checked to stay inside the node until the
/// `Persist` it waits for is acknowledged. Drains `node` (acknowledging every persist once
/// nothing else comes out) and returns what came out, the reply included.
pub fn settle(
    node: &mut ClusterNode,
    id: RequestId,
    outcome: &CommandOutcome,
) -> (Reply, Vec<Output>) {
    let mut outs = Vec::new();
    let mut persists = Vec::new();
    while let Some(o) = node.poll_output() {
        if let Output::Persist { seq, .. } = &o {
            persists.push(*seq);
        }
        assert!(
            !matches!(&o, Output::Reply { to, .. } if *to == id),
            "the reply left before its persist was acknowledged: {outs:?}"
        );
        outs.push(o);
    }
    if *outcome == CommandOutcome::Deferred {
        assert!(!persists.is_empty(), "deferred without a persist: {outs:?}");
    }
    let mut reply = outcome.reply().cloned();
    loop {
        for seq in persists.drain(..) {
            node.handle_persisted(seq);
        }
        let Some(o) = node.poll_output() else { break };
        match &o {
            Output::Persist { seq, .. } => persists.push(*seq),
            Output::Reply { to, reply: r } if *to == id => {
                assert!(reply.is_none(), "two replies to {id:?}");
                reply = Some(r.clone());
            }
            _ => {}
        }
        outs.push(o);
    }
    let reply = reply.unwrap_or_else(|| panic!("no reply to {id:?} ({outcome:?}): {outs:?}"));
    (reply, outs)
}

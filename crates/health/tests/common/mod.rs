//! Hand-built topologies for the tests.
#![allow(dead_code)]

use ferrocluster_slot::{Slot, SLOT_COUNT};
use ferrocluster_topology::{
    ConfigEpoch, LinkState, Millis, Node, NodeFlags, NodeId, ShardId, Topology,
};

/// The time every test runs at.
pub const NOW: Millis = Millis(1_700_000_000_000);

/// Node ID number `n` (40 hex digits).
pub fn id(n: u32) -> NodeId {
    NodeId::parse(&format!("{n:040x}")).unwrap()
}

/// Shard ID of primary `i`.
pub fn sid(i: u32) -> ShardId {
    ShardId::parse(&format!("{:040x}", 0xab00 + i)).unwrap()
}

/// ID of primary `i`.
pub fn p(i: u32) -> NodeId {
    id(i + 1)
}

/// ID of replica `j` of primary `i`.
pub fn r(i: u32, j: u32) -> NodeId {
    id(100 + i * 10 + j)
}

/// A healthy node as seen from elsewhere: connected, answered a ping at NOW, offset 1000.
fn healthy(id: NodeId, shard: ShardId) -> Node {
    let mut n = Node::new(id, shard, Millis(0));
    n.link = LinkState::Connected;
    n.pong_received = Some(NOW);
    n.repl_offset = 1000;
    n
}

/// Who is myself.
#[derive(Clone, Copy, Debug)]
pub enum Me {
    /// Primary `i`.
    Primary(u32),
    /// Replica `j` of primary `i`.
    Replica(u32, u32),
}

/// `primaries` primaries, each with `replicas` synced replicas; the slots split evenly
/// (contiguous ranges) over the primaries; configEpoch of primary i = i + 1.
pub fn cluster(primaries: u32, replicas: u32, me: Me) -> Topology {
    let mut nodes = Vec::new();
    for i in 0..primaries {
        let mut n = healthy(p(i), sid(i));
        n.flags = NodeFlags::PRIMARY;
        n.config_epoch = ConfigEpoch(u64::from(i) + 1);
        nodes.push(n);
        for j in 0..replicas {
            let mut n = healthy(r(i, j), sid(i));
            n.flags = NodeFlags::REPLICA;
            n.primary = Some(p(i));
            nodes.push(n);
        }
    }
    let my_id = match me {
        Me::Primary(i) => p(i),
        Me::Replica(i, j) => r(i, j),
    };
    let pos = nodes.iter().position(|n| *n.id() == my_id).unwrap();
    let myself = nodes.remove(pos);
    let mut topo = Topology::new(myself);
    for n in nodes {
        topo.add_node(n).unwrap();
    }
    if let Some(per) = (SLOT_COUNT as u32).checked_div(primaries) {
        for s in Slot::all() {
            let owner = (u32::from(s.get()) / per).min(primaries - 1);
            topo.set_slot_owner(s, Some(p(owner))).unwrap();
        }
    }
    topo.check_invariants().unwrap();
    topo
}

/// Sets flags on a node.
pub fn flag(topo: &mut Topology, n: &NodeId, f: NodeFlags) {
    topo.node_mut(n).unwrap().flags.insert(f);
}

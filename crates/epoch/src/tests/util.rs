//! Small deterministic clusters for the rule tests.

use crate::EpochEffect;
use ferrocluster_slot::{Slot, SlotSet};
use ferrocluster_topology::{
    ConfigEpoch, LinkState, Millis, Node, NodeFlags, NodeId, ShardId, Topology,
};

pub const T0: Millis = Millis(1_700_000_000_000);

/// The node ID made of 40 copies of `c`.
pub fn id(c: char) -> NodeId {
    NodeId::parse(&c.to_string().repeat(40)).unwrap()
}

pub fn shard(c: char) -> ShardId {
    ShardId::parse(&c.to_string().repeat(40)).unwrap()
}

pub fn slots(range: std::ops::RangeInclusive<u16>) -> SlotSet {
    range.map(|s| Slot::new(s).unwrap()).collect()
}

pub fn slot(n: u16) -> Slot {
    Slot::new(n).unwrap()
}

/// A model whose myself is `me`, a primary in shard `me`, with configEpoch `epoch`, owning
/// `owned`.
pub fn topo(me: char, epoch: u64, owned: &SlotSet) -> Topology {
    let mut n = Node::new(id(me), shard(me), T0);
    n.flags = NodeFlags::PRIMARY;
    n.config_epoch = ConfigEpoch(epoch);
    n.link = LinkState::Connected;
    let mut t = Topology::new(n);
    for s in owned.iter() {
        t.set_slot_owner(s, Some(id(me))).unwrap();
    }
    t.current_epoch = ConfigEpoch(epoch).as_current();
    t
}

/// Adds a connected primary `c` in shard `sh` with `epoch` owning `owned`.
pub fn add_primary(t: &mut Topology, c: char, sh: char, epoch: u64, owned: &SlotSet) {
    let mut n = Node::new(id(c), shard(sh), T0);
    n.flags = NodeFlags::PRIMARY;
    n.config_epoch = ConfigEpoch(epoch);
    n.link = LinkState::Connected;
    t.add_node(n).unwrap();
    for s in owned.iter() {
        t.set_slot_owner(s, Some(id(c))).unwrap();
    }
    if t.current_epoch.get() < epoch {
        t.current_epoch = ConfigEpoch(epoch).as_current();
    }
}

/// Adds a connected replica `c` of `of` (in `of`'s shard) with offset `offset`.
pub fn add_replica(t: &mut Topology, c: char, of: char, offset: u64) {
    let sh = t.node(&id(of)).unwrap().shard_id;
    let mut n = Node::new(id(c), sh, T0);
    n.flags = NodeFlags::REPLICA;
    n.link = LinkState::Connected;
    n.repl_offset = offset;
    t.add_node(n).unwrap();
    t.set_primary(&id(c), id(of)).unwrap();
    t.node_mut(&id(of))
        .unwrap()
        .flags
        .insert(NodeFlags::MIGRATE_TO);
}

/// Turns myself into a replica of `of` (taking its shard).
pub fn make_me_replica(t: &mut Topology, of: char) {
    let me = *t.myself_id();
    let owned: Vec<_> = t.myself().slots().iter().collect();
    for s in owned {
        t.set_slot_owner(s, None).unwrap();
    }
    t.set_primary(&me, id(of)).unwrap();
    t.myself_mut().shard_id = t.node(&id(of)).unwrap().shard_id;
    t.myself_mut().config_epoch = ConfigEpoch(0);
}

pub fn has(out: &[EpochEffect], e: &EpochEffect) -> bool {
    out.iter().any(|x| x == e)
}

pub fn position(out: &[EpochEffect], f: impl Fn(&EpochEffect) -> bool) -> Option<usize> {
    out.iter().position(f)
}

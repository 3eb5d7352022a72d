//! Shared test helpers: topologies and a two-sided harness.
#![allow(dead_code)]

pub mod harness;

use ferrocluster_migration::{MigrationOutput, Migrations};
use ferrocluster_slot::{Slot, SlotRange};
use ferrocluster_topology::{Millis, Node, NodeFlags, NodeId, ShardId, Topology};
use rand_chacha::rand_core::SeedableRng;

pub const T0: Millis = Millis(1_700_000_000_000);

pub fn id(c: char) -> NodeId {
    NodeId::parse(&c.to_string().repeat(40)).unwrap()
}

pub fn ids(c: char) -> String {
    c.to_string().repeat(40)
}

pub fn slot(n: u16) -> Slot {
    Slot::new(n).unwrap()
}

pub fn range(a: u16, b: u16) -> SlotRange {
    SlotRange::new(slot(a), slot(b)).unwrap()
}

pub fn rng() -> rand_chacha::ChaCha8Rng {
    rand_chacha::ChaCha8Rng::seed_from_u64(42)
}

fn node(c: char, primary: Option<char>) -> Node {
    let shard = ShardId::parse(&primary.unwrap_or(c).to_string().repeat(40)).unwrap();
    let mut n = Node::new(id(c), shard, T0);
    // Every node has an address: an export connects to its target's client port.
    n.ip = Some(std::net::IpAddr::from([127, 0, 0, 1]));
    n.port = 7000 + (c as u16 - u16::from(b'a'));
    match primary {
        None => n.flags = NodeFlags::PRIMARY,
        Some(p) => {
            n.flags = NodeFlags::REPLICA;
            n.primary = Some(id(p));
        }
    }
    n
}

/// A view from `me` of the cluster: `s` primary owning 0..=99, `t` primary owning
/// 100..=199, `u` primary owning nothing, `r` replica of `t`, `q` replica of `s`.
pub fn cluster(me: char) -> Topology {
    let spec = [
        ('s', None),
        ('t', None),
        ('u', None),
        ('r', Some('t')),
        ('q', Some('s')),
    ];
    let (_, mine) = spec.iter().find(|(c, _)| *c == me).copied().unwrap();
    let mut topo = Topology::new(node(me, mine));
    for (c, p) in spec {
        if c != me {
            topo.add_node(node(c, p)).unwrap();
        }
    }
    for s in 0..100 {
        topo.set_slot_owner(slot(s), Some(id('s'))).unwrap();
    }
    for s in 100..200 {
        topo.set_slot_owner(slot(s), Some(id('t'))).unwrap();
    }
    topo
}

pub fn drain(m: &mut Migrations) -> Vec<MigrationOutput> {
    std::iter::from_fn(|| m.poll_output()).collect()
}

/// The outputs without StateChanged noise.
pub fn effects(m: &mut Migrations) -> Vec<MigrationOutput> {
    drain(m)
        .into_iter()
        .filter(|o| !matches!(o, MigrationOutput::StateChanged { .. }))
        .collect()
}

pub fn argv(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_owned).collect()
}

//! The link table's node index against the definition it replaces: a scan of every link in
//! ID order (`outbound_of` / `inbound_of` = the first link of that node and direction,
//! `peer_knows_us` = an inbound link of the node that carried more than one message,
//! `unbind_node` = every link of the node, ascending).

use ferrocluster_gossip::{LinkDirection, LinkId, Links};
use ferrocluster_topology::{Millis, NodeId};
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn scan_first(links: &Links, node: &NodeId, dir: LinkDirection) -> Option<LinkId> {
    links
        .iter()
        .find(|l| l.direction == dir && l.node.as_ref() == Some(node))
        .map(|l| l.id)
}

fn scan_knows_us(links: &Links, node: &NodeId) -> bool {
    links.iter().any(|l| {
        l.direction == LinkDirection::Inbound && l.node.as_ref() == Some(node) && l.received > 1
    })
}

fn check(links: &Links, nodes: &[NodeId], step: usize) {
    for n in nodes {
        for dir in [LinkDirection::Outbound, LinkDirection::Inbound] {
            let indexed = match dir {
                LinkDirection::Outbound => links.outbound_of(n),
                LinkDirection::Inbound => links.inbound_of(n),
            };
            assert_eq!(indexed, scan_first(links, n, dir), "step {step}, {dir:?}");
        }
        assert_eq!(
            links.peer_knows_us(n),
            scan_knows_us(links, n),
            "step {step}"
        );
    }
}

#[test]
fn node_index_agrees_with_a_scan_under_random_changes() {
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let nodes: Vec<NodeId> = (0..6).map(|_| NodeId::random(&mut rng)).collect();
    let mut links = Links::default();
    let now = Millis(1_700_000_000_000);
    let pick = |rng: &mut ChaCha8Rng, n: usize| (rng.next_u64() % n as u64) as usize;
    for step in 0..5_000 {
        let ids: Vec<LinkId> = links.iter().map(|l| l.id).collect();
        match pick(&mut rng, 7) {
            0 | 1 => {
                let dir = if rng.next_u64() & 1 == 0 {
                    LinkDirection::Outbound
                } else {
                    LinkDirection::Inbound
                };
                let node = (rng.next_u64() % 3 != 0).then(|| nodes[pick(&mut rng, nodes.len())]);
                links.open(dir, node, None, now);
            }
            2 if !ids.is_empty() => {
                // Bind (or rebind, or unbind) a link's node through `get_mut`.
                let id = ids[pick(&mut rng, ids.len())];
                let node = (rng.next_u64() % 4 != 0).then(|| nodes[pick(&mut rng, nodes.len())]);
                if let Some(mut l) = links.get_mut(id) {
                    l.node = node;
                    l.received += rng.next_u64() % 2;
                }
            }
            3 if !ids.is_empty() => {
                links.remove(ids[pick(&mut rng, ids.len())]);
            }
            4 => {
                let a = nodes[pick(&mut rng, nodes.len())];
                let b = nodes[pick(&mut rng, nodes.len())];
                links.rename_node(&a, b);
            }
            5 => {
                let n = nodes[pick(&mut rng, nodes.len())];
                let mut expected: Vec<LinkId> = links
                    .iter()
                    .filter(|l| l.node == Some(n))
                    .map(|l| l.id)
                    .collect();
                expected.sort();
                assert_eq!(links.unbind_node(&n), expected, "step {step}");
            }
            6 if rng.next_u64() % 50 == 0 => {
                links.clear();
            }
            _ => {}
        }
        check(&links, &nodes, step);
    }
}

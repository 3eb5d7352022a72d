//! The bus link table: outbound links (ours, one per node) and inbound links (accepted, bound
//! to a node once a known sender speaks on them) (§2).

use ferrocluster_topology::{Millis, NodeId};
use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

/// A bus link, named by the node engine (never reused within one engine's life).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId(pub u64);

impl fmt::Display for LinkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "link#{}", self.0)
    }
}

/// Who opened a link (§2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkDirection {
    /// Opened by us to the peer's bus port: we send PING/MEET and broadcasts on it.
    Outbound,
    /// Accepted from the peer: we answer its PING/MEET with PONG on it.
    Inbound,
}

/// One link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// Its ID.
    pub id: LinkId,
    /// Outbound or inbound.
    pub direction: LinkDirection,
    /// The node it belongs to: for an outbound link the node we connect to; for an inbound
    /// link the node bound to it (`None` until a known sender speaks, or a MEET creates one).
    pub node: Option<NodeId>,
    /// When the link was created, ms.
    pub created: Millis,
    /// The peer's IP as the host saw it (inbound links); outbound links carry the destination.
    pub peer_ip: Option<IpAddr>,
    /// Whether the connection is up (outbound: after `Connected`; inbound: always).
    pub connected: bool,
}

/// All links, ordered by ID (deterministic iteration).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Links {
    next: u64,
    links: BTreeMap<LinkId, Link>,
}

impl Links {
    /// Allocates a new link.
    pub fn open(
        &mut self,
        direction: LinkDirection,
        node: Option<NodeId>,
        peer_ip: Option<IpAddr>,
        now: Millis,
    ) -> LinkId {
        self.next += 1;
        let id = LinkId(self.next);
        let connected = direction == LinkDirection::Inbound;
        self.links.insert(
            id,
            Link {
                id,
                direction,
                node,
                created: now,
                peer_ip,
                connected,
            },
        );
        id
    }

    /// The link with this ID.
    pub fn get(&self, id: LinkId) -> Option<&Link> {
        self.links.get(&id)
    }

    /// The link with this ID, mutable.
    pub fn get_mut(&mut self, id: LinkId) -> Option<&mut Link> {
        self.links.get_mut(&id)
    }

    /// Removes a link; returns it.
    pub fn remove(&mut self, id: LinkId) -> Option<Link> {
        self.links.remove(&id)
    }

    /// Every link, ascending by ID.
    pub fn iter(&self) -> impl Iterator<Item = &Link> {
        self.links.values()
    }

    /// Number of links.
    pub fn len(&self) -> usize {
        self.links.len()
    }

    /// Whether there are no links.
    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    /// The node's outbound link, if any.
    pub fn outbound_of(&self, node: &NodeId) -> Option<LinkId> {
        self.find(node, LinkDirection::Outbound)
    }

    /// The node's inbound link, if any.
    pub fn inbound_of(&self, node: &NodeId) -> Option<LinkId> {
        self.find(node, LinkDirection::Inbound)
    }

    fn find(&self, node: &NodeId, dir: LinkDirection) -> Option<LinkId> {
        self.links
            .values()
            .find(|l| l.direction == dir && l.node.as_ref() == Some(node))
            .map(|l| l.id)
    }

    /// Removes every link of a node; returns their IDs (ascending).
    pub fn unbind_node(&mut self, node: &NodeId) -> Vec<LinkId> {
        let ids: Vec<LinkId> = self
            .links
            .values()
            .filter(|l| l.node.as_ref() == Some(node))
            .map(|l| l.id)
            .collect();
        for id in &ids {
            self.links.remove(id);
        }
        ids
    }

    /// Points every link of `old` at `new` (a handshake node got its real ID).
    pub fn rename_node(&mut self, old: &NodeId, new: NodeId) {
        for l in self.links.values_mut() {
            if l.node.as_ref() == Some(old) {
                l.node = Some(new);
            }
        }
    }

    /// Removes every link; returns their IDs (ascending).
    pub fn clear(&mut self) -> Vec<LinkId> {
        let ids = self.links.keys().copied().collect();
        self.links.clear();
        ids
    }
}

//! The bus link table: outbound links (ours, one per node) and inbound links (accepted, bound
//! to a node once a known sender speaks on them) (§2), with what each peer has shown over its
//! links: which ping extensions it understands ([`ExtensionSet`]) and whether it has bound our
//! outbound link to us (the light-header rule, [`Link::bound_at_peer`]).

use ferrocluster_topology::{Millis, NodeId};
use hashbrown::HashMap;
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
    /// Messages (full or light header) processed on this link so far.
    pub received: u64,
    /// Outbound links: a full-header message of ours went out on this link after the peer had
    /// shown it knows our real node ID ([`Links::peer_knows_us`]), so the peer has bound this
    /// link (its inbound one) to us, and light-header messages sent after it are accepted
    /// (§2, §3.1). Never reset while the link lives: a peer's binding lasts until the link
    /// closes.
    pub bound_at_peer: bool,
    /// A message on this link claimed myself's node ID, and it was reported
    /// ([`crate::GossipEffect::IdCollision`]): later ones are refused silently.
    pub id_collision_reported: bool,
}

/// Which ping extensions a peer is sent (§6.2, §6.3, §21.1) — the Redis 7.0 interop rule.
///
/// Redis 7.0 knows only HOSTNAME (type 0) and logs "Received unknown extension type" for
/// every other one, on every ping; it sets EXT_DATA only when it attaches its hostname, so a
/// Redis 7.0 node with `cluster-announce-hostname` set gets EXTENSIONS_SUPPORTED like a
/// Valkey node. Valkey / Redis 7.2+ always attach SHARDID (type 3) when they attach anything.
/// The set is decided from each PING/PONG/MEET with EXT_DATA from the peer (the latest one
/// wins), in §8 step 3, before the PONG reply of step 5 is built:
/// * extensions present, none of them SHARDID → [`ExtensionSet::HostnameOnly`] (Redis 7.0);
/// * SHARDID present, or EXT_DATA with no extension at all (only 7.2+ set EXT_DATA without
///   attaching one: the first message to a peer not yet known to support extensions) →
///   [`ExtensionSet::Full`].
///
/// A peer with no such message yet (e.g. EXTENSIONS_SUPPORTED copied from a third node's
/// gossip, §6.3) gets [`ExtensionSet::HostnameOnly`]: the one type every extension-capable
/// version knows. A 7.2+/Valkey peer is upgraded by its first direct message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ExtensionSet {
    /// Only HOSTNAME (type 0), if myself has one.
    #[default]
    HostnameOnly,
    /// Everything Valkey 8 writes (§6.3): HOSTNAME, HUMAN_NODENAME, CLIENT_IPV4/6,
    /// FORGOTTEN_NODE, SHARDID.
    Full,
}

/// All links, ordered by ID (deterministic iteration).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Links {
    next: u64,
    links: BTreeMap<LinkId, Link>,
    ext_sets: BTreeMap<NodeId, ExtensionSet>,
    /// Index of `links` by bound node: (node, direction) → its links, ascending by ID.
    /// [`Links::outbound_of`] runs for every node on every cron run and every PING sent; a
    /// scan of the table made a 1000-node cron O(nodes × links).
    by_node: NodeIndex,
}

/// (node, direction) → link IDs, ascending (almost always one).
type NodeIndex = HashMap<(NodeId, LinkDirection), Vec<LinkId>>;

fn index_insert(ix: &mut NodeIndex, key: (NodeId, LinkDirection), id: LinkId) {
    let v = ix.entry(key).or_default();
    if let Err(pos) = v.binary_search(&id) {
        v.insert(pos, id);
    }
}

fn index_remove(ix: &mut NodeIndex, key: (NodeId, LinkDirection), id: LinkId) {
    if let Some(v) = ix.get_mut(&key) {
        v.retain(|&l| l != id);
        if v.is_empty() {
            ix.remove(&key);
        }
    }
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
        if let Some(n) = node {
            index_insert(&mut self.by_node, (n, direction), id);
        }
        self.links.insert(
            id,
            Link {
                id,
                direction,
                node,
                created: now,
                peer_ip,
                connected,
                received: 0,
                bound_at_peer: false,
                id_collision_reported: false,
            },
        );
        id
    }

    /// The link with this ID.
    pub fn get(&self, id: LinkId) -> Option<&Link> {
        self.links.get(&id)
    }

    /// The link with this ID, mutable (through a guard that keeps the node index in step
    /// when `node` is changed).
    pub fn get_mut(&mut self, id: LinkId) -> Option<LinkMut<'_>> {
        let link = self.links.get_mut(&id)?;
        let old_node = link.node;
        Some(LinkMut {
            link,
            by_node: &mut self.by_node,
            old_node,
        })
    }

    /// Removes a link; returns it.
    pub fn remove(&mut self, id: LinkId) -> Option<Link> {
        let l = self.links.remove(&id)?;
        if let Some(n) = l.node {
            index_remove(&mut self.by_node, (n, l.direction), id);
        }
        Some(l)
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

    /// The lowest-numbered link of `node` in direction `dir` (the one a scan in ID order
    /// finds first).
    fn find(&self, node: &NodeId, dir: LinkDirection) -> Option<LinkId> {
        self.of_node(node, dir).next()
    }

    /// The links of `node` in direction `dir`, ascending by ID.
    fn of_node(&self, node: &NodeId, dir: LinkDirection) -> impl Iterator<Item = LinkId> + '_ {
        self.by_node
            .get(&(*node, dir))
            .into_iter()
            .flatten()
            .copied()
    }

    /// The extension set the node is sent ([`ExtensionSet`]; `HostnameOnly` when nothing was
    /// learned from it directly).
    pub fn extension_set(&self, node: &NodeId) -> ExtensionSet {
        self.ext_sets.get(node).copied().unwrap_or_default()
    }

    /// Records the extension set learned from a message of `node`.
    pub fn set_extension_set(&mut self, node: NodeId, set: ExtensionSet) {
        self.ext_sets.insert(node, set);
    }

    /// Whether `node` has shown that it knows our real node ID: one of its inbound links (its
    /// outbound link to us) has carried more than one message. A node sends its first message
    /// on a new link (the connect-time PING or MEET, §7.3) possibly to a HANDSHAKE record of
    /// us with a random ID; it sends nothing else to a handshake record (the cron pings, the
    /// broadcasts and Pub/Sub skip HANDSHAKE nodes, V8 and here alike), so every later
    /// message was addressed to our real ID.
    pub fn peer_knows_us(&self, node: &NodeId) -> bool {
        self.of_node(node, LinkDirection::Inbound)
            .any(|id| self.links.get(&id).is_some_and(|l| l.received > 1))
    }

    /// Removes every link of a node (and what it showed over them); returns their IDs
    /// (ascending).
    pub fn unbind_node(&mut self, node: &NodeId) -> Vec<LinkId> {
        self.ext_sets.remove(node);
        let mut ids: Vec<LinkId> = self
            .of_node(node, LinkDirection::Outbound)
            .chain(self.of_node(node, LinkDirection::Inbound))
            .collect();
        ids.sort_unstable();
        for id in &ids {
            self.remove(*id);
        }
        ids
    }

    /// Points every link of `old` at `new` (a handshake node got its real ID).
    pub fn rename_node(&mut self, old: &NodeId, new: NodeId) {
        if let Some(set) = self.ext_sets.remove(old) {
            self.ext_sets.insert(new, set);
        }
        let ids: Vec<LinkId> = self
            .of_node(old, LinkDirection::Outbound)
            .chain(self.of_node(old, LinkDirection::Inbound))
            .collect();
        for id in ids {
            if let Some(mut l) = self.get_mut(id) {
                l.node = Some(new);
            }
        }
    }

    /// Removes every link; returns their IDs (ascending).
    pub fn clear(&mut self) -> Vec<LinkId> {
        let ids = self.links.keys().copied().collect();
        self.links.clear();
        self.ext_sets.clear();
        self.by_node.clear();
        ids
    }
}

/// A link borrowed mutably from [`Links::get_mut`]; dereferences to the [`Link`]. When it is
/// dropped, a changed `node` (binding an inbound link, a renamed handshake node) is carried
/// into the table's node index.
#[derive(Debug)]
pub struct LinkMut<'a> {
    link: &'a mut Link,
    by_node: &'a mut NodeIndex,
    old_node: Option<NodeId>,
}

impl std::ops::Deref for LinkMut<'_> {
    type Target = Link;
    fn deref(&self) -> &Link {
        self.link
    }
}

impl std::ops::DerefMut for LinkMut<'_> {
    fn deref_mut(&mut self) -> &mut Link {
        self.link
    }
}

impl Drop for LinkMut<'_> {
    fn drop(&mut self) {
        let l = &*self.link;
        if l.node == self.old_node {
            return;
        }
        let d = l.direction;
        if let Some(old) = self.old_node {
            index_remove(self.by_node, (old, d), l.id);
        }
        if let Some(new) = l.node {
            index_insert(self.by_node, (new, d), l.id);
        }
    }
}

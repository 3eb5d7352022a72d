//! Gossip of a Valkey Cluster node: the MEET handshake, discovery of nodes through gossip,
//! ping scheduling (the 100 ms cron), gossip sections, ping extensions, link intents and the
//! CLUSTER FORGET ban list (facts sheet §6, §7, §8 steps 1–6, §16).
//!
//! [`Gossip`] holds what this layer owns beside the shared [`Topology`]: the bus link table
//! ([`Links`]), the [`Blacklist`] and the cron counter. Every operation borrows the topology,
//! takes `now` (Unix ms) and a seeded RNG where it draws, and pushes [`GossipEffect`]s into an
//! outbox: open/close a link, send a [`Message`] on a link, save the config, re-evaluate the
//! cluster state, hand a gossiped health view to the failure detector. The `node` crate orders
//! the calls, encodes messages and turns effects into host outputs. This crate knows no other
//! engine crate beside it (failure information leaves as [`GossipEffect::GossipHealth`] and
//! [`GossipEffect::PongReceived`]).
//!
//! The configuration a PING/PONG/MEET header carries (§8 steps 6f–6h: role switch, slot
//! claims, UPDATE trigger, configEpoch collision) is not applied here: [`Gossip::handle_message`]
//! stops before step 6f with [`Received::Claims`], the caller (the `node` crate, with the
//! `epoch` crate) applies it, then calls [`Gossip::handle_message_gossip`] for step 6i.
//!
//! # Interop note: Redis 7.0 and ping extensions
//!
//! Valkey 8 attaches its whole extension set (ending with SHARDID, type 3) to every PING/PONG/
//! MEET for a peer that has sent EXT_DATA (§6.3). Redis 7.0 sends EXT_DATA only when
//! `cluster-announce-hostname` is set, then with HOSTNAME (type 0) alone, and logs "Received
//! unknown extension type" for anything else, on every ping (§21.1). So the set is chosen per
//! peer ([`ExtensionSet`], kept in [`Links`]): a peer whose extension-bearing message carries
//! no SHARDID gets HOSTNAME only; one that sent SHARDID (Valkey, Redis/Valkey 7.2+), or EXT_DATA
//! without any extension (which Redis 7.0 never does), gets the full Valkey 8 set; a peer with
//! no direct message yet gets HOSTNAME only. The choice is made from each message in §8 step 3,
//! before the PONG reply to that same message is built (step 5).
//!
//! # Light header only once the peer has bound our link
//!
//! A receiver closes a link that carries a light-header message before it has bound the link
//! to a known node (§2). Valkey 8 uses the light header towards every node that advertised
//! LIGHT_HDR_SUPPORTED, which loses PUBLISH messages (and the link) when the peer learned of us
//! through gossip after our link to it was up. [`Gossip::takes_light_header`] adds a provable
//! condition: the peer has shown it knows our real node ID (a second message on its link to
//! us, [`Links::peer_knows_us`]) and a full-header message of ours went out on our link after
//! that ([`Link::bound_at_peer`]; the connect-time and cron PINGs of [`Gossip::send_ping`]).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod blacklist;
mod build;
mod commands;
mod cron;
mod links;
mod process;

pub use blacklist::Blacklist;
pub use build::{build_header, build_ping, gossip_wanted, PingKind};
pub use commands::{CommandError, ResetKind};
pub use links::{ExtensionSet, Link, LinkDirection, LinkId, LinkMut, Links};
pub use process::Received;

use ferrocluster_bus::Message;
use ferrocluster_topology::{Millis, NodeFlags, NodeId, Topology};
use std::net::IpAddr;

/// Default `cluster-blacklist-ttl` in seconds (§1, §16).
pub const DEFAULT_BLACKLIST_TTL_SECS: u64 = 60;
/// The cron period in ms (§1: the cluster cron runs 10 times a second).
pub const CRON_PERIOD_MS: u64 = 100;
/// The random-ping work runs every this many cron runs (§7.2 step 2).
pub const RANDOM_PING_EVERY: u64 = 10;
/// How many random nodes the once-a-second ping samples (§7.2 step 2).
pub const RANDOM_PING_SAMPLE: usize = 5;

/// Settings of the gossip layer (a subset of the node's `ClusterConfig`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GossipConfig {
    /// `cluster-node-timeout`, ms.
    pub node_timeout_ms: u64,
    /// `cluster-blacklist-ttl`, seconds (default 60).
    pub blacklist_ttl_secs: u64,
    /// `cluster-ping-interval`, ms; `None` (Valkey's 0) means NODE_TIMEOUT / 2.
    pub ping_interval_ms: Option<u64>,
    /// `cluster-announce-ip`: sent in the header `myip`; `None` sends zeros (receivers use the
    /// connection's peer address).
    pub announce_ip: Option<IpAddr>,
    /// `tls-cluster yes`: on the wire the header's and gossip entries' `port` is the TLS
    /// port and `pport` the plaintext one (Valkey); the nodes' fields keep their meaning.
    /// Messages received are turned back with [`ferrocluster_bus::Message::swap_tls_ports`].
    pub tls_cluster: bool,
}

impl GossipConfig {
    /// Handshake nodes older than this many ms are deleted: max(NODE_TIMEOUT, 1000) (§1).
    pub fn handshake_timeout_ms(&self) -> u64 {
        self.node_timeout_ms.max(1000)
    }
    /// A node whose last PONG is older than this gets a PING (§7.2 step 3).
    pub fn ping_interval(&self) -> u64 {
        self.ping_interval_ms.unwrap_or(self.node_timeout_ms / 2)
    }
}

/// What a gossip operation asks the caller to do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GossipEffect {
    /// Open an outbound bus connection for `link` to `ip:port` (the node's bus port) and
    /// report the result with `Connected` / `ConnectFailed`.
    Connect {
        /// The new link.
        link: LinkId,
        /// The node it leads to (its ID at the time; handshake nodes are renamed later).
        node: NodeId,
        /// Destination IP.
        ip: IpAddr,
        /// Destination bus port.
        port: u16,
    },
    /// Send `message` on `link`.
    Send {
        /// The link.
        link: LinkId,
        /// The message (the caller encodes it).
        message: Message,
    },
    /// Close `link` (already removed from the link table).
    Close {
        /// The link.
        link: LinkId,
    },
    /// The persisted configuration changed: save nodes.conf.
    Save,
    /// Something the cluster state depends on changed: re-evaluate it.
    UpdateState,
    /// A gossip entry from a known `sender` about a known node `about` (not myself) carried
    /// these flags: the failure detector adds or removes the sender's failure report (§7.4,
    /// §9.2).
    GossipHealth {
        /// The sender of the message.
        sender: NodeId,
        /// The node the entry describes.
        about: NodeId,
        /// The flags in the entry.
        flags: NodeFlags,
    },
    /// A PONG from this node arrived on our outbound link (PFAIL/FAIL clearing, §9.4).
    PongReceived(NodeId),
    /// A handshake completed: the handshake node now carries its real ID.
    HandshakeCompleted(NodeId),
    /// A node was learned from a gossip section (§7.4).
    NodeDiscovered(NodeId),
    /// A node was deleted (handshake timeout, duplicate handshake, FORGET, forgotten-node
    /// extension).
    NodeDeleted(NodeId),
    /// A message on `link` claims myself's node ID (two nodes share one ID: built from one
    /// seed, or a copied nodes.conf). It was refused — nothing of it was applied, myself's
    /// address least of all; a handshake this link served was dropped. Reported once per
    /// link.
    IdCollision {
        /// The link it came on.
        link: LinkId,
        /// Myself's address as the model has it.
        mine: NodeAddress,
        /// The address the other node gave (header `myip`, else the link's peer IP; header
        /// ports).
        peer: NodeAddress,
    },
}

/// A node's address as a message or the model gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NodeAddress {
    /// IP, if known.
    pub ip: Option<IpAddr>,
    /// Client (data) port; 0 = none.
    pub port: u16,
    /// Cluster bus port.
    pub bus_port: u16,
}

/// The gossip layer's own state. See the crate docs.
#[derive(Debug, Clone, Default)]
pub struct Gossip {
    /// The bus link table.
    pub links: Links,
    /// The FORGET ban list.
    pub blacklist: Blacklist,
    cron_runs: u64,
    pfail_count: usize,
    /// The header `state` byte sent in every message (§5.3: 0 ok, 1 fail); the caller keeps
    /// it current.
    pub state_byte: u8,
}

impl Gossip {
    /// Empty link table and ban list, cluster state byte 1 (fail), as a starting node reports.
    pub fn new() -> Gossip {
        Gossip {
            state_byte: 1,
            ..Gossip::default()
        }
    }

    /// Whether a PUBLISH / PUBLISHSHARD to `node` may use the 16-byte light header (§3.1, §17)
    /// on its outbound link: the node advertised LIGHT_HDR_SUPPORTED (V8's whole rule), and
    /// that link is bound to us at the peer ([`Link::bound_at_peer`]).
    ///
    /// Why the second condition: a receiver closes a link that carries a light message before
    /// it has bound the link to a known node (§2; V8 and here alike), which happens when it
    /// learns of us through gossip only after our link to it was up. A receiver binds the link
    /// on the first full-header message from us it processes while knowing our real ID. We
    /// know it knows our ID once its own link to us has carried a second message (see
    /// [`Links::peer_knows_us`]); the first full-header PING/MEET/PONG we send on our link
    /// after that ([`Gossip::send_ping`]) is processed by the peer while it knows us, so it
    /// binds the link, and TCP delivers every later light message after it. Until then (about
    /// two ping intervals after both links are up) the full header is used, which every
    /// version accepts. (If the peer still holds our link bound to a HANDSHAKE
    /// record while it knows our real ID from gossip, it deletes that record — and the link —
    /// when its handshake completes, §7.3: such a link is lost either way.)
    pub fn takes_light_header(&self, node: &ferrocluster_topology::Node) -> bool {
        node.flags.contains(NodeFlags::LIGHT_HDR_SUPPORTED)
            && self.outbound_bound_at_peer(node.id())
    }

    /// The second condition of [`Gossip::takes_light_header`]: the node's outbound link is
    /// connected and bound to us at the peer ([`Link::bound_at_peer`]).
    pub fn outbound_bound_at_peer(&self, id: &NodeId) -> bool {
        self.links
            .outbound_of(id)
            .and_then(|l| self.links.get(l))
            .is_some_and(|l| l.connected && l.bound_at_peer)
    }

    /// Number of PFAIL nodes counted by the last cron run (§7.1: bounds the PFAIL entries
    /// appended to a gossip section).
    pub fn pfail_count(&self) -> usize {
        self.pfail_count
    }

    /// Deletes a node (not myself): closes its links, removes it from the topology (its slots
    /// become unowned, its failure reports vanish, §9.2).
    pub fn delete_node(&mut self, topo: &mut Topology, id: &NodeId, out: &mut Vec<GossipEffect>) {
        for link in self.links.unbind_node(id) {
            out.push(GossipEffect::Close { link });
        }
        if topo.remove_node(id).is_ok() {
            out.push(GossipEffect::NodeDeleted(*id));
            out.push(GossipEffect::UpdateState);
            out.push(GossipEffect::Save);
        }
    }

    /// Closes a node's outbound link (it will be reopened by the cron).
    pub fn close_outbound(
        &mut self,
        topo: &mut Topology,
        id: &NodeId,
        out: &mut Vec<GossipEffect>,
    ) {
        if let Some(link) = self.links.outbound_of(id) {
            self.links.remove(link);
            out.push(GossipEffect::Close { link });
        }
        if let Some(n) = topo.node_mut(id) {
            if !n.is_myself() {
                n.link = ferrocluster_topology::LinkState::Disconnected;
            }
        }
    }

    /// The clock-independent part of link teardown when the host reports a link closed (or a
    /// connect failed): the link leaves the table; a failed or dropped outbound link marks its
    /// node disconnected; a connect that failed sets `ping_sent = now` if no ping was pending,
    /// so failure detection still progresses (§7.2 step 1).
    pub fn handle_link_closed(
        &mut self,
        topo: &mut Topology,
        link: LinkId,
        connect_failed: bool,
        now: Millis,
    ) {
        let Some(l) = self.links.remove(link) else {
            return;
        };
        if l.direction == LinkDirection::Outbound {
            if let Some(n) = l.node.and_then(|id| topo.node_mut(&id)) {
                if !n.is_myself() {
                    n.link = ferrocluster_topology::LinkState::Disconnected;
                    if connect_failed && n.ping_sent.is_none() {
                        n.ping_sent = Some(now);
                    }
                }
            }
        }
    }
}

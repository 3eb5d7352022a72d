//! Processing a received message: §8 steps 1–6 (sender resolution, header bookkeeping,
//! PING/PONG/MEET), the gossip section (§7.4) and ping extensions (§6.4).

use crate::build::{build_ping, PingKind};
use crate::{ExtensionSet, Gossip, GossipConfig, GossipEffect, LinkDirection, LinkId};
use ferrocluster_bus::{msg_flags, Body, FullHeader, GossipEntry, IpField, Message, PingExt};
use ferrocluster_topology::{
    parse_client_ipv4, parse_client_ipv6, ConfigEpoch, Hostname, HumanNodename, Millis, Node,
    NodeFlags, NodeId, ShardId, Topology,
};
use rand_core::RngCore;
use std::net::IpAddr;

fn parse_ip_field(f: &IpField) -> Option<IpAddr> {
    f.as_str().and_then(|s| s.parse().ok())
}

fn node_id(name: &ferrocluster_bus::NodeName) -> Option<NodeId> {
    NodeId::from_bytes(name.as_bytes()).ok()
}

/// Whether a node's stored address differs from `ip`/ports; stores them if so.
fn update_address(
    n: &mut Node,
    ip: Option<IpAddr>,
    port: u16,
    tls_port: u16,
    bus_port: u16,
) -> bool {
    if n.ip == ip && n.port == port && n.tls_port == tls_port && n.bus_port == bus_port {
        return false;
    }
    n.ip = ip;
    n.port = port;
    n.tls_port = tls_port;
    n.bus_port = bus_port;
    n.flags.remove(NodeFlags::NOADDR);
    true
}

/// How far [`Gossip::handle_message`] got with a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Received {
    /// Processing by this layer is complete. The identified sender — a known node not in
    /// handshake — is given for the caller's type-specific steps (FAIL, UPDATE, …); `None`
    /// when the sender is unknown (those steps then ignore the message).
    Done(Option<NodeId>),
    /// A PING/PONG/MEET from this known sender reached §8 step 6f. The caller applies the
    /// configuration its header carries (steps 6f–6h: role switch, slot claims, UPDATE,
    /// configEpoch collision — the `epoch` crate), then MUST call
    /// [`Gossip::handle_message_gossip`] with the same message for step 6i.
    Claims(NodeId),
}

impl Received {
    /// The identified sender, whichever the stage.
    pub fn sender(&self) -> Option<NodeId> {
        match self {
            Received::Done(s) => *s,
            Received::Claims(s) => Some(*s),
        }
    }
}

impl Gossip {
    /// §8 step 1 without side effects: the sender a message on `link_id` will be attributed
    /// to — the link's node if it is known and not in handshake, else the header's sender ID
    /// if known and not in handshake. A caller takes the sender's prior role with it before
    /// [`Gossip::handle_message`] changes anything (§8 step 2).
    pub fn message_sender(
        &self,
        topo: &Topology,
        link_id: LinkId,
        msg: &Message,
    ) -> Option<NodeId> {
        let link = self.links.get(link_id)?;
        let link_node = link
            .node
            .filter(|id| topo.node(id).is_some_and(|n| !n.in_handshake()));
        let Some(h) = msg.full_header() else {
            return link_node;
        };
        resolve_sender(topo, link_node, h)
    }

    /// Processes one decoded message received on `link` at `now`: §8 steps 1–6e (for types
    /// other than PING/PONG/MEET only the header bookkeeping of steps 1–4). A PING/PONG/MEET
    /// from a known sender stops before step 6f and returns [`Received::Claims`]: the caller
    /// applies the header's configuration and then calls [`Gossip::handle_message_gossip`].
    ///
    /// A light message on a link without an identified node closes the link (§2).
    #[allow(clippy::too_many_arguments)]
    pub fn handle_message<R: RngCore + ?Sized>(
        &mut self,
        topo: &mut Topology,
        cfg: &GossipConfig,
        link_id: LinkId,
        msg: &Message,
        now: Millis,
        rng: &mut R,
        out: &mut Vec<GossipEffect>,
    ) -> Received {
        self.handle_message_inner(topo, cfg, link_id, msg, now, rng, out)
            .unwrap_or(Received::Done(None))
    }

    /// Step 6i of a PING/PONG/MEET from `sender` after [`Received::Claims`]: the gossip
    /// section (§7.4), then the ping extensions (§6.4). Other messages are ignored.
    pub fn handle_message_gossip(
        &mut self,
        topo: &mut Topology,
        cfg: &GossipConfig,
        sender: &NodeId,
        msg: &Message,
        now: Millis,
        out: &mut Vec<GossipEffect>,
    ) {
        if !topo.contains(sender) {
            return;
        }
        if let Some(section) = msg.body.gossip() {
            self.process_gossip_section(topo, sender, &section.entries, now, out);
            self.process_extensions(topo, cfg, sender, &section.extensions, now, out);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn handle_message_inner<R: RngCore + ?Sized>(
        &mut self,
        topo: &mut Topology,
        cfg: &GossipConfig,
        link_id: LinkId,
        msg: &Message,
        now: Millis,
        rng: &mut R,
        out: &mut Vec<GossipEffect>,
    ) -> Option<Received> {
        let link = self.links.get(link_id)?.clone();
        if let Some(mut l) = self.links.get_mut(link_id) {
            l.received = l.received.saturating_add(1);
        }
        let link_node = link
            .node
            .filter(|id| topo.node(id).is_some_and(|n| !n.in_handshake()));
        let Some(h) = msg.full_header() else {
            // Light header (§2): only from an identified node.
            match link_node {
                Some(id) => {
                    if let Some(n) = topo.node_mut(&id) {
                        n.data_received = Some(now);
                    }
                    return Some(Received::Done(Some(id)));
                }
                None => {
                    self.links.remove(link_id);
                    out.push(GossipEffect::Close { link: link_id });
                    return None;
                }
            }
        };
        // Step 1: the sender.
        let hdr_id = node_id(&h.sender);
        if hdr_id.as_ref() == Some(topo.myself_id()) {
            self.refuse_my_id(topo, cfg, &link, msg, h, now, rng, out);
            return None;
        }
        let sender = resolve_sender(topo, link_node, h);
        if let Some(s) = sender {
            if link.node.is_none() && link.direction == LinkDirection::Inbound {
                // Bind this inbound link; an older inbound link of the node is closed (§2).
                if let Some(old) = self.links.inbound_of(&s) {
                    self.links.remove(old);
                    out.push(GossipEffect::Close { link: old });
                }
                if let Some(mut l) = self.links.get_mut(link_id) {
                    l.node = Some(s);
                }
            }
        }
        // Step 2.
        let replicaof = h.replicaof.filter(|r| !r.is_zero());
        let claims_primary = replicaof.is_none();
        // Steps 3 and 4.
        let gossip = msg.body.gossip();
        if let Some(s) = sender {
            let exts = gossip.map(|g| g.extensions.as_slice());
            self.header_bookkeeping(topo, &s, h, exts, claims_primary, now, out);
        }
        let kind = match &msg.body {
            Body::Ping(_) => Some(PingKind::Ping),
            Body::Pong(_) => Some(PingKind::Pong),
            Body::Meet(_) => Some(PingKind::Meet),
            _ => None,
        };
        let (Some(kind), Some(section)) = (kind, gossip) else {
            return Some(Received::Done(sender));
        };

        // Step 5: PING / MEET get a PONG on the same link.
        if matches!(kind, PingKind::Ping | PingKind::Meet) {
            let mut reply_to = sender;
            let mut ext_override = false;
            if kind == PingKind::Meet && sender.is_none() {
                match link.node {
                    // A second MEET on an inbound link bound to a handshake node: ignored (§7.3).
                    Some(_) => return None,
                    None if link.direction == LinkDirection::Inbound => {
                        let hs = self.meet_from_unknown(
                            topo,
                            link_id,
                            h,
                            &section.extensions,
                            now,
                            rng,
                            out,
                        )?;
                        // Its gossip section is not used: nodes are learned only from a
                        // known sender (Redis 7.0 `clusterProcessGossipSection`: "otherwise we
                        // risk joining another cluster"). Valkey 9.1.2 counts the new handshake
                        // node as the sender and adds every node a MEET names (captured:
                        // crates/gossip/tests/vectors/meet-gossip/); so a forged MEET could
                        // plant nodes whose PINGs then claim slots. Redis also takes pong times
                        // and addresses of known nodes from it; we take nothing.
                        reply_to = Some(hs);
                        ext_override = h.ext_data();
                    }
                    None => {}
                }
            }
            let pong = self.pong(topo, cfg, reply_to.as_ref(), ext_override, now, rng);
            out.push(GossipEffect::Send {
                link: link_id,
                message: pong,
            });
        }

        // Step 6.
        // a. MEET flag cleared on a known sender.
        if let Some(s) = sender {
            if let Some(n) = topo.node_mut(&s) {
                if n.flags.contains(NodeFlags::MEET) {
                    n.flags.remove(NodeFlags::MEET);
                }
            }
        }
        // b. Outbound-link handshake completion / ID mismatch.
        if link.direction == LinkDirection::Outbound {
            if let Some(ln) = link.node {
                let in_handshake = topo.node(&ln).is_some_and(|n| n.in_handshake());
                if in_handshake {
                    if let Some(known) = sender {
                        // Already known under its real ID: refresh its address, drop the
                        // handshake node (§7.3).
                        let ip = parse_ip_field(&h.myip).or(link.peer_ip);
                        if let Some(n) = topo.node_mut(&known) {
                            if update_address(n, ip, h.port, h.pport, h.cport) {
                                out.push(GossipEffect::Save);
                            }
                        }
                        self.delete_node(topo, &ln, out);
                        return None;
                    }
                    let real = hdr_id?;
                    if topo.rename_node(&ln, real).is_err() {
                        return None;
                    }
                    self.links.rename_node(&ln, real);
                    if let Some(n) = topo.node_mut(&real) {
                        n.flags.remove(NodeFlags::HANDSHAKE);
                        n.flags.insert(
                            NodeFlags::from_bits(h.flags)
                                & (NodeFlags::PRIMARY | NodeFlags::REPLICA),
                        );
                    }
                    out.push(GossipEffect::HandshakeCompleted(real));
                    out.push(GossipEffect::Save);
                } else if hdr_id != Some(ln) {
                    // The address now answers with another ID (§7.3): NOADDR, link closed.
                    if let Some(n) = topo.node_mut(&ln) {
                        n.flags.insert(NodeFlags::NOADDR);
                        n.ip = None;
                        n.port = 0;
                        n.tls_port = 0;
                        n.bus_port = 0;
                    }
                    self.close_outbound(topo, &ln, out);
                    out.push(GossipEffect::Save);
                    return None;
                }
            }
        }
        // c. NOFAILOVER mirrored; MY_PRIMARY_FAIL too (Valkey 9.1: a replica advertises that
        // it sees its primary FAIL, so its siblings know whether every replica of the shard
        // has seen the failure: the best-ranked one may then elect at once).
        if let Some(s) = sender {
            if let Some(n) = topo.node_mut(&s) {
                n.flags.set(
                    NodeFlags::NOFAILOVER,
                    h.has_flags(NodeFlags::NOFAILOVER.bits()),
                );
                n.flags.set(
                    NodeFlags::MY_PRIMARY_FAIL,
                    h.has_flags(NodeFlags::MY_PRIMARY_FAIL.bits()),
                );
            }
        }
        // d. Address update on a PING that did not arrive on the sender's outbound link.
        if kind == PingKind::Ping {
            if let Some(s) = sender {
                if self.links.outbound_of(&s) != Some(link_id) {
                    let ip = parse_ip_field(&h.myip).or(link.peer_ip);
                    let changed = topo
                        .node_mut(&s)
                        .is_some_and(|n| update_address(n, ip, h.port, h.pport, h.cport));
                    if changed {
                        self.close_outbound(topo, &s, out);
                        out.push(GossipEffect::Save);
                    }
                }
            }
        }
        // e. PONG on the outbound link.
        if kind == PingKind::Pong && link.direction == LinkDirection::Outbound {
            if let Some(ln) = self.links.get(link_id).and_then(|l| l.node) {
                if let Some(n) = topo.node_mut(&ln) {
                    n.pong_received = Some(now);
                    n.ping_sent = None;
                }
                out.push(GossipEffect::PongReceived(ln));
            }
        }
        // f–h belong to the caller (the epoch layer); i follows in handle_message_gossip.
        sender.map(Received::Claims)
    }

    /// The PONG that answers a PING or MEET (§8 step 5), addressed to `to` when the sender is
    /// known (its extension set); `ext_override` forces the extensions (a MEET with EXT_DATA).
    fn pong<R: RngCore + ?Sized>(
        &self,
        topo: &Topology,
        cfg: &GossipConfig,
        to: Option<&NodeId>,
        ext_override: bool,
        now: Millis,
        rng: &mut R,
    ) -> Message {
        build_ping(
            topo,
            &self.links,
            &self.blacklist,
            cfg,
            self.state_byte,
            PingKind::Pong,
            to,
            ext_override,
            self.pfail_count,
            now,
            rng,
        )
    }

    /// A message whose sender ID is myself's (another node has my ID): nothing of it is
    /// applied — no address, epoch, offset, role, slot or gossip — so a peer can never move
    /// myself. Valkey would resolve the sender to myself and could rewrite myself's address
    /// ("known under its real ID" on a handshake link); we refuse instead. A PING or MEET is
    /// still answered with a PONG (Valkey answers every PING/MEET), from which the other node
    /// learns of the collision in turn; a handshake node this outbound link was opened for is
    /// dropped (the MEET is refused). The first such message on a link is reported
    /// ([`GossipEffect::IdCollision`]).
    #[allow(clippy::too_many_arguments)]
    fn refuse_my_id<R: RngCore + ?Sized>(
        &mut self,
        topo: &mut Topology,
        cfg: &GossipConfig,
        link: &crate::Link,
        msg: &Message,
        h: &FullHeader,
        now: Millis,
        rng: &mut R,
        out: &mut Vec<GossipEffect>,
    ) {
        if !link.id_collision_reported {
            if let Some(mut l) = self.links.get_mut(link.id) {
                l.id_collision_reported = true;
            }
            let me = topo.myself();
            out.push(GossipEffect::IdCollision {
                link: link.id,
                mine: crate::NodeAddress {
                    ip: me.ip,
                    port: me.port,
                    bus_port: me.bus_port,
                },
                peer: crate::NodeAddress {
                    ip: parse_ip_field(&h.myip).or(link.peer_ip),
                    port: h.port,
                    bus_port: h.cport,
                },
            });
        }
        if matches!(msg.body, Body::Ping(_) | Body::Meet(_)) {
            let pong = self.pong(topo, cfg, None, false, now, rng);
            out.push(GossipEffect::Send {
                link: link.id,
                message: pong,
            });
        }
        if link.direction == LinkDirection::Outbound {
            let handshake = link
                .node
                .filter(|ln| topo.node(ln).is_some_and(|n| n.in_handshake()));
            if let Some(ln) = handshake {
                self.delete_node(topo, &ln, out);
            }
        }
    }

    /// §8 steps 3 and 4 for a known sender; `exts` are the message's ping extensions (PING,
    /// PONG and MEET only), which decide the sender's [`ExtensionSet`] here, before step 5
    /// builds the PONG reply.
    #[allow(clippy::too_many_arguments)]
    fn header_bookkeeping(
        &mut self,
        topo: &mut Topology,
        s: &NodeId,
        h: &FullHeader,
        exts: Option<&[PingExt]>,
        claims_primary: bool,
        now: Millis,
        out: &mut Vec<GossipEffect>,
    ) {
        let Some(n) = topo.node_mut(s) else { return };
        if h.has_mflags(msg_flags::EXT_DATA) {
            n.flags.insert(NodeFlags::EXTENSIONS_SUPPORTED);
        }
        if let Some(set) = exts.and_then(|e| extension_set_shown(h, e)) {
            self.links.set_extension_set(*s, set);
        }
        n.flags.set(
            NodeFlags::LIGHT_HDR_SUPPORTED,
            h.has_flags(NodeFlags::LIGHT_HDR_SUPPORTED.bits()),
        );
        n.data_received = Some(now);
        if n.in_handshake() {
            return;
        }
        n.repl_offset = h.offset;
        n.repl_offset_time = Some(now);
        let mut save = false;
        if claims_primary && h.config_epoch > n.config_epoch.get() {
            n.config_epoch = ConfigEpoch(h.config_epoch);
            save = true;
        }
        if h.current_epoch > topo.current_epoch.get() {
            topo.current_epoch = ferrocluster_topology::CurrentEpoch(h.current_epoch);
            save = true;
        }
        if save {
            out.push(GossipEffect::Save);
        }
    }

    /// A MEET from an unknown sender on an unbound inbound link (§7.3): a HANDSHAKE node with a
    /// random ID, the address from `myip` or the peer address, ports from the header,
    /// EXTENSIONS_SUPPORTED if EXT_DATA and its [`ExtensionSet`] from the MEET's extensions
    /// `exts`; the link is bound to it.
    #[allow(clippy::too_many_arguments)]
    fn meet_from_unknown<R: RngCore + ?Sized>(
        &mut self,
        topo: &mut Topology,
        link_id: LinkId,
        h: &FullHeader,
        exts: &[PingExt],
        now: Millis,
        rng: &mut R,
        out: &mut Vec<GossipEffect>,
    ) -> Option<NodeId> {
        let peer = self.links.get(link_id).and_then(|l| l.peer_ip);
        let ip = parse_ip_field(&h.myip).or(peer);
        let id = NodeId::random(rng);
        let mut n = Node::new(id, ShardId::random(rng), now);
        n.flags = NodeFlags::HANDSHAKE;
        if h.ext_data() {
            n.flags.insert(NodeFlags::EXTENSIONS_SUPPORTED);
        }
        n.ip = ip;
        n.port = h.port;
        n.tls_port = h.pport;
        n.bus_port = h.cport;
        n.data_received = Some(now);
        topo.add_node(n).ok()?;
        if let Some(set) = extension_set_shown(h, exts) {
            self.links.set_extension_set(id, set);
        }
        if let Some(mut l) = self.links.get_mut(link_id) {
            l.node = Some(id);
        }
        out.push(GossipEffect::UpdateState);
        Some(id)
    }

    /// The gossip section of a message from `sender` (§7.4).
    fn process_gossip_section(
        &mut self,
        topo: &mut Topology,
        sender: &NodeId,
        entries: &[GossipEntry],
        now: Millis,
        out: &mut Vec<GossipEffect>,
    ) {
        // Any invalid ID makes the whole section ignored (V8).
        let Some(ids) = entries
            .iter()
            .map(|e| node_id(&e.name))
            .collect::<Option<Vec<_>>>()
        else {
            return;
        };
        for (e, id) in entries.iter().zip(ids) {
            if id == *topo.myself_id() {
                continue;
            }
            let flags = NodeFlags::from_bits(e.flags);
            if let Some(n) = topo.node_mut(&id) {
                let was_down = n.is_pfail() || n.is_fail();
                if !n.in_handshake() {
                    out.push(GossipEffect::GossipHealth {
                        sender: *sender,
                        about: id,
                        flags,
                    });
                }
                let healthy = !flags.intersects(NodeFlags::PFAIL | NodeFlags::FAIL);
                if healthy && adopts_gossiped_pong(n) {
                    // A newer pong time, at most 500 ms in the future.
                    let t = Millis(u64::from(e.pong_received_secs) * 1000);
                    if n.pong_received.is_none_or(|p| t > p) && t <= now.saturating_add_ms(500) {
                        n.pong_received = Some(t);
                    }
                }
                // A node we see down, reported healthy at another address (§7.4).
                if was_down && healthy && !flags.contains(NodeFlags::NOADDR) {
                    // Parsed only here and for discovery: most entries need no address.
                    let ip = parse_ip_field(&e.ip);
                    let changed = n.ip != ip
                        || n.port != e.port
                        || n.tls_port != e.pport
                        || n.bus_port != e.cport;
                    if changed && ip.is_some() {
                        self.close_outbound(topo, &id, out);
                        if let Some(n) = topo.node_mut(&id) {
                            update_address(n, ip, e.port, e.pport, e.cport);
                        }
                        out.push(GossipEffect::Save);
                    }
                }
            } else if let Some(ip) = parse_ip_field(&e.ip).filter(|_| {
                !flags.contains(NodeFlags::NOADDR) && !self.blacklist.contains(&id, now)
            }) {
                // Discovery: only from a known sender (the caller guarantees it).
                let mut n = Node::new(id, placeholder_shard(&id), now);
                let mut f = flags;
                f.remove(NodeFlags::MYSELF);
                n.flags = f;
                n.ip = Some(ip);
                n.port = e.port;
                n.tls_port = e.pport;
                n.bus_port = e.cport;
                if topo.add_node(n).is_ok() {
                    out.push(GossipEffect::NodeDiscovered(id));
                    out.push(GossipEffect::Save);
                    out.push(GossipEffect::UpdateState);
                }
            }
        }
    }

    /// Ping extensions of a known sender (§6.4). Invalid announced values are ignored (the
    /// stored value is kept), so nothing unvalidated reaches nodes.conf.
    fn process_extensions(
        &mut self,
        topo: &mut Topology,
        cfg: &GossipConfig,
        sender: &NodeId,
        exts: &[PingExt],
        now: Millis,
        out: &mut Vec<GossipEffect>,
    ) {
        let mut hostname = None;
        let mut nodename = None;
        let mut ipv4 = None;
        let mut ipv6 = None;
        let mut shard = None;
        let mut forgotten = Vec::new();
        for ext in exts {
            match ext {
                PingExt::Hostname(s) => hostname = Some(s.as_str().map(Hostname::new)),
                PingExt::HumanNodename(s) => nodename = Some(s.as_str().map(HumanNodename::new)),
                PingExt::ClientIpv4(s) => ipv4 = Some(s.as_str().map(parse_client_ipv4)),
                PingExt::ClientIpv6(s) => ipv6 = Some(s.as_str().map(parse_client_ipv6)),
                PingExt::ShardId(name) => shard = ShardId::from_bytes(name.as_bytes()).ok(),
                PingExt::ForgottenNode { name, ttl_secs } => {
                    if let Some(id) = node_id(name) {
                        forgotten.push((id, *ttl_secs));
                    }
                }
                PingExt::Raw(_) => {}
            }
        }
        let my_primary = topo.myself().primary;
        let mut save = false;
        if let Some(n) = topo.node_mut(sender) {
            // Set to the received value, or cleared when absent (§6.4); invalid ones ignored.
            save |= apply_announced(&mut n.hostname, hostname);
            save |= apply_announced(&mut n.human_nodename, nodename);
            save |= apply_announced(&mut n.client_ipv4, ipv4);
            save |= apply_announced(&mut n.client_ipv6, ipv6);
        }
        // Shard ID (§6.4): absent → a replica takes its primary's. A replica is always in its
        // primary's shard, so the announced ID applies to the sender's whole replication tree
        // (its top primary, every replica under it, myself if I am one of them): Valkey's
        // `updateShardId` with PR #573, which also moves a primary to the shard its replica
        // announces ("best effort" for primaries that send no SHARDID). Never from a remote
        // claim onto myself as the top: my own shard is mine to announce, and a replica of
        // mine is put back in it.
        let shard = shard.or_else(|| {
            let n = topo.node(sender)?;
            n.primary.and_then(|p| topo.node(&p)).map(|p| p.shard_id)
        });
        if let Some(shard) = shard {
            let me = *topo.myself_id();
            if let Some(root) = topo.shard_root(sender) {
                let shard = if root == me {
                    topo.myself().shard_id
                } else {
                    shard
                };
                save |= topo.set_shard_id(&root, shard);
            }
        }
        if save {
            out.push(GossipEffect::Save);
        }
        for (id, ttl_secs) in forgotten {
            if id == *topo.myself_id() || Some(id) == my_primary || !topo.contains(&id) {
                continue;
            }
            let _ = cfg;
            self.blacklist.add(id, ttl_secs, now);
            self.delete_node(topo, &id, out);
        }
    }
}

/// Whether a healthy gossip entry's pong time may replace ours for `n` (§7.4; Valkey's
/// `clusterProcessGossipSection`): only while `n` is healthy in our own view — neither PFAIL
/// nor FAIL, no ping of ours pending, no failure report about it — and then only a newer
/// time at most 500 ms ahead of our clock (the caller checks the time).
///
/// Valkey 9.0 narrowed the rule to our own view (valkey-io/valkey PR #2512, "Update
/// pong_received time via gossip only if the node is healthy from our view"); Redis 7.0 and
/// Valkey 8 check only the entry's flags, the pending ping and the reports. We follow
/// Valkey 9: a node we hold PFAIL or FAIL must be heard from directly, so a neighbour's
/// fresh pong times for a node we cannot reach never make it look alive in our view (CLUSTER
/// NODES `pong-recv`, the pong time we gossip on) nor delay our own ping to it.
fn adopts_gossiped_pong(n: &Node) -> bool {
    !n.is_pfail() && !n.is_fail() && n.ping_sent.is_none() && n.failure_reports.is_empty()
}

/// The [`ExtensionSet`] a PING/PONG/MEET shows its sender understands (the rule is on
/// [`ExtensionSet`]): `None` without EXT_DATA (nothing learned).
fn extension_set_shown(h: &FullHeader, exts: &[PingExt]) -> Option<ExtensionSet> {
    if !h.ext_data() {
        return None;
    }
    let shard = exts.iter().any(|e| matches!(e, PingExt::ShardId(_)));
    Some(if shard || exts.is_empty() {
        ExtensionSet::Full
    } else {
        ExtensionSet::HostnameOnly
    })
}

/// §8 step 1: the link's (identified) node, else the header's sender if known; never a node
/// in handshake.
fn resolve_sender(topo: &Topology, link_node: Option<NodeId>, h: &FullHeader) -> Option<NodeId> {
    link_node
        .or_else(|| node_id(&h.sender).filter(|id| topo.contains(id)))
        .filter(|s| topo.node(s).is_some_and(|n| !n.in_handshake()))
}

/// A deterministic shard ID for a node learned from gossip before its own SHARDID extension
/// arrives (Valkey draws a random one; any value is replaced by the first SHARDID seen). A node
/// ID is a valid shard ID: same length and alphabet.
fn placeholder_shard(id: &NodeId) -> ShardId {
    match ShardId::from_bytes(id.as_bytes()) {
        Ok(s) => s,
        // Unreachable: NodeId and ShardId share the 40 × a-z0-9 rule.
        Err(_) => unreachable!("a node ID is a valid shard ID"),
    }
}

/// Applies one announced value of a ping extension to the stored `field` (§6.4): `None` (the
/// extension was absent) clears it, a valid value replaces it, an invalid or non-UTF-8 one is
/// ignored. Returns whether the field changed (the config must be saved).
fn apply_announced<T: PartialEq, E>(
    field: &mut Option<T>,
    received: Option<Option<Result<T, E>>>,
) -> bool {
    match received {
        None if field.is_some() => {
            *field = None;
            true
        }
        Some(Some(Ok(v))) if field.as_ref() != Some(&v) => {
            *field = Some(v);
            true
        }
        _ => false,
    }
}

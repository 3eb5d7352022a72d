//! The 100 ms cron (§7.2 steps 1–3, gossip part), connecting links and sending pings.

use crate::build::{build_ping, PingKind};
use crate::{
    Gossip, GossipConfig, GossipEffect, LinkDirection, LinkId, RANDOM_PING_EVERY,
    RANDOM_PING_SAMPLE,
};
use ferrocluster_bus::Message;
use ferrocluster_topology::{LinkState, Millis, NodeFlags, NodeId, Topology};
use rand_core::RngCore;

impl Gossip {
    /// One cron run at `now` (§7.2 steps 1–3 without PFAIL marking, which is the failure
    /// detector's):
    /// 1. count PFAIL nodes; delete HANDSHAKE nodes older than max(NODE_TIMEOUT, 1000) ms;
    ///    open an outbound link to every node (not myself, not NOADDR) that has none;
    /// 2. every 10th run, PING the node with the oldest PONG among 5 random picks that have a
    ///    connected outbound link and no pending ping (not myself, not HANDSHAKE);
    /// 3. for every node except myself, NOADDR and HANDSHAKE: close an outbound link older than
    ///    NODE_TIMEOUT whose ping has waited, and whose data has been silent, for more than
    ///    NODE_TIMEOUT/2; PING a node with no pending ping whose last PONG is older than the
    ///    ping interval (NODE_TIMEOUT/2 unless `cluster-ping-interval` is set).
    pub fn handle_cron<R: RngCore + ?Sized>(
        &mut self,
        topo: &mut Topology,
        cfg: &GossipConfig,
        now: Millis,
        rng: &mut R,
        out: &mut Vec<GossipEffect>,
    ) {
        let run = self.cron_runs;
        self.cron_runs = self.cron_runs.wrapping_add(1);
        self.blacklist.purge(now);

        // Step 1.
        let mut pfail = 0;
        let mut expired = Vec::new();
        let mut connect = Vec::new();
        for n in topo.nodes() {
            if n.is_myself() || n.has_no_addr() {
                continue;
            }
            if n.is_pfail() {
                pfail += 1;
            }
            if n.in_handshake() && now.since(n.created) > cfg.handshake_timeout_ms() {
                expired.push(*n.id());
                continue;
            }
            if self.links.outbound_of(n.id()).is_none() {
                if let Some(ip) = n.ip {
                    connect.push((*n.id(), ip, n.bus_port));
                }
            }
        }
        self.pfail_count = pfail;
        for id in expired {
            self.delete_node(topo, &id, out);
        }
        for (id, ip, port) in connect {
            let link = self
                .links
                .open(LinkDirection::Outbound, Some(id), Some(ip), now);
            if let Some(n) = topo.node_mut(&id) {
                n.link = LinkState::Connected;
            }
            out.push(GossipEffect::Connect {
                link,
                node: id,
                ip,
                port,
            });
        }

        // Step 2.
        if run.is_multiple_of(RANDOM_PING_EVERY) && !topo.is_empty() {
            let ids: Vec<NodeId> = topo.nodes().map(|n| *n.id()).collect();
            let mut best: Option<(Option<Millis>, NodeId)> = None;
            for _ in 0..RANDOM_PING_SAMPLE {
                let id = ids[(rng.next_u64() % ids.len() as u64) as usize];
                let Some(n) = topo.node(&id) else { continue };
                if n.is_myself() || n.in_handshake() || n.ping_sent.is_some() {
                    continue;
                }
                if !self.outbound_connected(&id) {
                    continue;
                }
                if best.is_none_or(|(p, _)| n.pong_received < p) {
                    best = Some((n.pong_received, id));
                }
            }
            if let Some((_, id)) = best {
                self.send_ping(topo, cfg, &id, PingKind::Ping, now, rng, out);
            }
        }

        // Step 3.
        let half = cfg.node_timeout_ms / 2;
        let ids: Vec<NodeId> = topo
            .nodes()
            .filter(|n| {
                !n.flags
                    .intersects(NodeFlags::MYSELF | NodeFlags::NOADDR | NodeFlags::HANDSHAKE)
            })
            .map(|n| *n.id())
            .collect();
        for id in ids {
            let Some(n) = topo.node(&id) else { continue };
            let outbound = self
                .links
                .outbound_of(&id)
                .and_then(|l| self.links.get(l))
                .cloned();
            if let (Some(link), Some(ps)) = (&outbound, n.ping_sent) {
                let silent = n.data_received.is_none_or(|d| now.since(d) > half);
                if now.since(link.created) > cfg.node_timeout_ms && now.since(ps) > half && silent {
                    self.close_outbound(topo, &id, out);
                    continue;
                }
            }
            let Some(n) = topo.node(&id) else { continue };
            if outbound.is_some_and(|l| l.connected)
                && n.ping_sent.is_none()
                && n.pong_received
                    .is_none_or(|p| now.since(p) > cfg.ping_interval())
            {
                self.send_ping(topo, cfg, &id, PingKind::Ping, now, rng, out);
            }
        }
    }

    fn outbound_connected(&self, id: &NodeId) -> bool {
        self.links
            .outbound_of(id)
            .and_then(|l| self.links.get(l))
            .is_some_and(|l| l.connected)
    }

    /// Sends a PING, PONG or MEET to `node` on its outbound link (nothing if it has no
    /// connected one). A PING sets the node's `ping_sent = now` (§7.1). Returns whether a
    /// message was queued.
    #[allow(clippy::too_many_arguments)]
    pub fn send_ping<R: RngCore + ?Sized>(
        &mut self,
        topo: &mut Topology,
        cfg: &GossipConfig,
        node: &NodeId,
        kind: PingKind,
        now: Millis,
        rng: &mut R,
        out: &mut Vec<GossipEffect>,
    ) -> bool {
        let Some(link) = self.links.outbound_of(node) else {
            return false;
        };
        if !self.links.get(link).is_some_and(|l| l.connected) {
            return false;
        }
        let msg = build_ping(
            topo,
            &self.links,
            &self.blacklist,
            cfg,
            self.state_byte,
            kind,
            Some(node),
            false,
            self.pfail_count,
            now,
            rng,
        );
        if kind == PingKind::Ping {
            if let Some(n) = topo.node_mut(node) {
                n.ping_sent = Some(now);
            }
        }
        out.push(GossipEffect::Send { link, message: msg });
        if self.links.peer_knows_us(node) {
            // This full-header message reaches a peer that knows our real ID: it binds the
            // link, and so before anything sent on it later (TCP order).
            if let Some(mut l) = self.links.get_mut(link) {
                l.bound_at_peer = true;
            }
        }
        true
    }

    /// The host reports that outbound `link` connected (§7.3): it becomes usable and carries a
    /// MEET if its node has the MEET flag, else a PING; a ping that was pending before the
    /// reconnect keeps its original `ping_sent`.
    pub fn handle_connected<R: RngCore + ?Sized>(
        &mut self,
        topo: &mut Topology,
        cfg: &GossipConfig,
        link: LinkId,
        now: Millis,
        rng: &mut R,
        out: &mut Vec<GossipEffect>,
    ) {
        let node = {
            let Some(mut l) = self.links.get_mut(link) else {
                return;
            };
            if l.direction != LinkDirection::Outbound {
                return;
            }
            l.connected = true;
            l.node
        };
        let Some(id) = node else { return };
        let Some(n) = topo.node(&id) else { return };
        let old_ping = n.ping_sent;
        let kind = if n.flags.contains(NodeFlags::MEET) {
            PingKind::Meet
        } else {
            PingKind::Ping
        };
        self.send_ping(topo, cfg, &id, kind, now, rng, out);
        if old_ping.is_some() {
            if let Some(n) = topo.node_mut(&id) {
                n.ping_sent = old_ping;
            }
        }
    }

    /// Sends `message` on the outbound link of every node except myself and handshake nodes
    /// that has a connected one (FAIL broadcast, §9.3; PONG broadcast). Node order is table
    /// order.
    pub fn broadcast(&self, topo: &Topology, message: &Message, out: &mut Vec<GossipEffect>) {
        for n in topo.nodes() {
            if n.is_myself() || n.in_handshake() {
                continue;
            }
            if let Some(link) = self.links.outbound_of(n.id()) {
                if self.links.get(link).is_some_and(|l| l.connected) {
                    out.push(GossipEffect::Send {
                        link,
                        message: message.clone(),
                    });
                }
            }
        }
    }
}

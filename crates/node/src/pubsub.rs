//! Pub/Sub and module traffic over the cluster bus (facts sheet §3.1, §4.3, §4.5, §17).

use crate::output::Tag;
use crate::stats::MessageStats;
use crate::{ClusterNode, Output};
use ferrocluster_bus::{encode, Body, Message, MessageType, ModuleMsg, Publish};
use ferrocluster_topology::{Millis, NodeFlags, NodeId};

impl ClusterNode {
    /// PUBLISH in cluster mode (§17): after the host delivered `message` to its own
    /// subscribers, a PUBLISH bus message goes to every other known node (not in handshake)
    /// on its connected outbound link — with the 16-byte light header to nodes that
    /// advertised LIGHT_HDR_SUPPORTED, the full header otherwise (§3.1; one encoding per
    /// header kind). Nodes without a connected link are skipped. Returns how many nodes it
    /// was sent to.
    pub fn publish(&mut self, channel: &[u8], message: &[u8], now: Millis) -> usize {
        let body = Body::Publish(Publish {
            channel: channel.to_vec(),
            message: message.to_vec(),
        });
        self.fan_out(body, |_| true, now)
    }

    /// SPUBLISH in cluster mode (§17): like [`ClusterNode::publish`] with PUBLISHSHARD, sent
    /// only to the other members of my shard (same shard ID: my primary and its replicas).
    /// Routing (the channel's slot must be served by my shard) is checked before, by
    /// [`ClusterNode::route`].
    pub fn spublish(&mut self, channel: &[u8], message: &[u8], now: Millis) -> usize {
        let body = Body::PublishShard(Publish {
            channel: channel.to_vec(),
            message: message.to_vec(),
        });
        let shard = self.topo.myself().shard_id;
        self.fan_out(body, move |n| n.shard_id == shard, now)
    }

    /// Sends a MODULE message (§4.5, §17) to `target`, or to every other known node when
    /// `None`, always with the full header (Valkey 8.0 drops a light MODULE message). Nodes
    /// without a connected outbound link are skipped. Returns how many nodes it was sent to.
    pub fn send_module_message(
        &mut self,
        target: Option<&NodeId>,
        module_id: u64,
        module_type: u8,
        payload: &[u8],
        now: Millis,
    ) -> usize {
        let now = self.clamp(now);
        let msg = Message::full(
            self.header(),
            Body::Module(ModuleMsg {
                module_id,
                module_type,
                payload: payload.to_vec(),
            }),
        );
        let bytes = encode(&msg);
        let links: Vec<_> = self
            .peers(|n| target.is_none_or(|t| t == n.id()))
            .into_iter()
            .map(|(l, _)| l)
            .collect();
        for &link in &links {
            self.push_bytes(link, MessageType::Module, bytes.clone());
        }
        self.finish(now);
        links.len()
    }

    /// Connected outbound links of the other known nodes (not handshake) matching `keep`,
    /// with whether each node takes the light header; table order.
    fn peers(
        &self,
        keep: impl Fn(&ferrocluster_topology::Node) -> bool,
    ) -> Vec<(ferrocluster_gossip::LinkId, bool)> {
        self.topo
            .nodes()
            .filter(|n| !n.is_myself() && !n.in_handshake() && keep(n))
            .filter_map(|n| {
                let link = self.gossip.links.outbound_of(n.id())?;
                let up = self.gossip.links.get(link).is_some_and(|l| l.connected);
                // The light header only once the peer has bound our link to us: a light
                // message on a link the peer cannot attribute closes it (§2; gossip's
                // `outbound_bound_at_peer` documents the proof).
                let light = n.flags.contains(NodeFlags::LIGHT_HDR_SUPPORTED)
                    && self.gossip.outbound_bound_at_peer(n.id());
                up.then_some((link, light))
            })
            .collect()
    }

    fn fan_out(
        &mut self,
        body: Body,
        keep: impl Fn(&ferrocluster_topology::Node) -> bool,
        now: Millis,
    ) -> usize {
        let now = self.clamp(now);
        let t = body.message_type();
        let peers = self.peers(keep);
        let mut light = None;
        let mut full = None;
        for &(link, takes_light) in &peers {
            let bytes = if takes_light {
                light
                    .get_or_insert_with(|| encode(&Message::light(body.clone())))
                    .clone()
            } else {
                full.get_or_insert_with(|| encode(&Message::full(self.header(), body.clone())))
                    .clone()
            };
            self.push_bytes(link, t, bytes);
        }
        self.finish(now);
        peers.len()
    }

    fn push_bytes(&mut self, link: ferrocluster_gossip::LinkId, t: MessageType, bytes: Vec<u8>) {
        MessageStats::count(&mut self.stats.sent, t);
        self.step
            .transmit(Output::Transmit { link, bytes }, Tag::None);
    }

    /// §8 steps 8 and 13 for a message from the known node `from`.
    pub(crate) fn deliver_bus_message(&mut self, from: NodeId, body: &Body) {
        let ev = match body {
            Body::Publish(p) | Body::PublishShard(p) => Output::PubSubMessage {
                from,
                channel: p.channel.clone(),
                message: p.message.clone(),
                sharded: matches!(body, Body::PublishShard(_)),
            },
            Body::Module(m) => Output::ModuleMessage {
                from,
                module_id: m.module_id,
                module_type: m.module_type,
                payload: m.payload.clone(),
            },
            _ => return,
        };
        self.step.push(ev);
    }
}

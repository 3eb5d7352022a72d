//! The epoch layer wired into the node (`ferrocluster-epoch`): configuration carried by
//! PING/PONG/MEET (§8 steps 6f–6h), FAILOVER_AUTH_REQUEST / ACK, MFSTART and UPDATE (§8 steps
//! 9–12), the cron part (§7.2 step 5), and the effects turned into outputs: persist-gated
//! transmits, role changes, write pauses and key deletions for the host.

use crate::node::{Pointed, ReplSync};
use crate::output::Tag;
use crate::{ClusterNode, Notice, Output};
use ferrocluster_bus::{msg_flags, Body, FullHeader, Message, NodeName, Update};
use ferrocluster_epoch::{
    AuthRequest, ClaimedRole, Epoch, EpochEffect, EpochEvent, EpochMessage, PingClaims, PriorRole,
    ReplLink, ReplicationState, Target,
};
use ferrocluster_gossip::{build_ping, LinkId, PingKind};
use ferrocluster_topology::{ConfigEpoch, CurrentEpoch, Millis, NodeId};

impl ClusterNode {
    /// The host reports myself's replication: the offset processed (a replica) or produced (a
    /// primary: its own replication offset), and the state of the link to my primary. Call it
    /// whenever either changes (a replica at least when the link goes up or down and as data
    /// arrives; a primary as its offset grows — pausing for a manual failover freezes it).
    ///
    /// The offset is what every header myself sends carries (`offset`, §3), so peers rank
    /// replicas (§12.2.1) and a replica doing a manual failover learns the paused primary's
    /// final offset (§13). The link gives the data age that may forbid an automatic failover
    /// (§12.2) and is myself's evidence in [`ClusterNode::readiness`] (a replica that never
    /// synced is not eligible). Nothing is sent or saved by this call itself.
    ///
    /// After myself is pointed at another primary ([`Output::ReplicateFrom`]) the offset the
    /// host reports belongs to the old primary's stream: until the host reports the link up
    /// again after polling that event (its first sync with the new primary completed), myself
    /// advertises offset 0 and ranks itself with it, so a synced sibling does not rank behind
    /// a replica that has nothing of the new primary yet (issue 16, BUG-08). Valkey keeps
    /// advertising its cached primary's offset until then.
    pub fn handle_replication(&mut self, state: ReplicationState, now: Millis) {
        let now = self.clamp(now);
        self.repl.state = state;
        self.repl.reported = true;
        if self.repl.sync == ReplSync::Polled && matches!(state.link, ReplLink::Up { .. }) {
            self.repl.sync = ReplSync::Synced;
        }
        self.topo.myself_mut().repl_offset = self.advertised_replication().offset;
        self.topo.myself_mut().repl_offset_time = Some(now);
        self.finish(now);
    }

    /// Myself's replication as the cluster is told it: the host's report, with offset 0 while
    /// a re-pointed replica has not completed its first sync with its new primary (see
    /// [`ClusterNode::handle_replication`]).
    pub(crate) fn advertised_replication(&self) -> ReplicationState {
        if self.repl.sync == ReplSync::Synced {
            self.repl.state
        } else {
            ReplicationState {
                offset: 0,
                ..self.repl.state
            }
        }
    }

    /// Stages [`Notice::BecameReplica`] and [`Output::ReplicateFrom`] for a new primary, and
    /// advertises offset 0 until the first sync with it.
    pub(crate) fn stage_replicate_from(
        &mut self,
        primary: NodeId,
        ip: Option<std::net::IpAddr>,
        port: u16,
        tls_port: u16,
        full_sync: bool,
    ) {
        self.step.notice(Notice::BecameReplica { primary });
        self.point_replication(Pointed {
            primary,
            ip,
            port,
            tls_port,
            full_sync,
        });
    }

    /// Stages the [`Output::ReplicateFrom`] for `to` and notes it as what the host was told.
    fn point_replication(&mut self, to: Pointed) {
        self.step.push(Output::ReplicateFrom {
            primary: to.primary,
            ip: to.ip,
            port: to.port,
            tls_port: to.tls_port,
            full_sync: to.full_sync,
        });
        self.repl.pointed = Some(to);
        self.repl.sync = ReplSync::Pending;
        self.topo.myself_mut().repl_offset = 0;
    }

    /// The replication part of the cron (Valkey `clusterCron`: "If we are a replica node but
    /// the replication is still turned off, enable it if we know the address of our primary"
    /// → `replicationSetPrimary`). A replica whose host was never told to replicate from its
    /// primary — loaded from nodes.conf as a replica, or told while the primary's address was
    /// unknown — or was told an address the primary no longer has, gets an
    /// [`Output::ReplicateFrom`] for the primary's current address once that address is known
    /// (an IP and a client port). No [`Notice::BecameReplica`]: its role did not change.
    pub(crate) fn replication_cron(&mut self) {
        let me = self.topo.myself();
        if me.is_primary() {
            return;
        }
        let Some(primary) = me.primary else {
            return;
        };
        let Some(p) = self.topo.node(&primary) else {
            return;
        };
        if p.ip.is_none() || (p.port == 0 && p.tls_port == 0) {
            return;
        }
        let want = Pointed {
            primary,
            ip: p.ip,
            port: p.port,
            tls_port: p.tls_port,
            full_sync: false,
        };
        match self.repl.pointed {
            Some(was) if was.same_target(&want) => {}
            Some(was) if was.primary == primary => self.point_replication(Pointed {
                full_sync: was.full_sync,
                ..want
            }),
            _ => self.point_replication(want),
        }
    }

    /// The host acted on an [`Output::PauseWrites`]: it accepts no client write any more, and
    /// `offset` is myself's replication offset after the last write it accepted (bytes, as in
    /// [`ClusterNode::handle_replication`], which this call also updates). The host MUST call
    /// it after acting on every `PauseWrites`, with the offset read once the pause holds (a
    /// multi-threaded host: under the lock its writers take).
    ///
    /// A primary serving a manual failover announces its offset with PAUSED (§13.2) only after
    /// this call: its node may have been told an older offset, and writes the host accepted
    /// between the MFSTART and the pause move it further, while the replica keeps the first
    /// PAUSED offset it hears and waits for exactly that one (Valkey, which pauses inside the
    /// MFSTART handler, announces a final offset at once). The call then PINGs the replica at
    /// once. Harmless when no manual failover waits for it (a slot migration's pause).
    pub fn handle_writes_paused(&mut self, offset: u64, now: Millis) {
        let now = self.clamp(now);
        self.repl.state.offset = offset;
        self.repl.reported = true;
        self.topo.myself_mut().repl_offset = offset;
        self.topo.myself_mut().repl_offset_time = Some(now);
        let mut eout = Vec::new();
        self.epoch.handle_writes_paused(&self.topo, &mut eout);
        self.apply_epoch_effects(eout, None, now);
        self.finish(now);
    }

    /// Myself's replication as last reported by [`ClusterNode::handle_replication`] (the
    /// default — offset 0, link down, never synced — before any report).
    pub fn replication(&self) -> &ReplicationState {
        &self.repl.state
    }

    /// The epoch layer's state: the running election ([`Epoch::election`]), the manual
    /// failover ([`Epoch::manual_failover`]), owner-not-claiming marks.
    pub fn epoch(&self) -> &Epoch {
        &self.epoch
    }

    /// §7.2 step 5: the epoch cron, then the manual-failover PING to the replica being served
    /// (§13.2: every cron run while paused).
    pub(crate) fn epoch_cron(&mut self, now: Millis) {
        let mut eout = Vec::new();
        let ok = self.state.is_ok();
        let repl = self.advertised_replication();
        self.epoch.handle_cron(
            &mut self.topo,
            &self.cfg.epoch,
            &repl,
            ok,
            now,
            &mut self.rng,
            &mut eout,
        );
        self.apply_epoch_effects(eout, None, now);
        if self.epoch.paused_for_manual_failover(&self.topo) {
            if let Some(r) = self.epoch.manual_failover().replica().copied() {
                self.send_ping_kind(&r, PingKind::Ping, now);
            }
        }
    }

    /// One election step now (after a counted ACK or a FORCE failover) rather than at the
    /// next cron run (Valkey's "before sleep").
    pub(crate) fn run_failover(&mut self, now: Millis) {
        let mut eout = Vec::new();
        let repl = self.advertised_replication();
        self.epoch.handle_failover(
            &mut self.topo,
            &self.cfg.epoch,
            &repl,
            now,
            &mut self.rng,
            &mut eout,
        );
        self.apply_epoch_effects(eout, None, now);
    }

    /// §8 steps 6f–6h for a PING/PONG/MEET from the known sender `s`.
    pub(crate) fn apply_ping_claims(
        &mut self,
        link: LinkId,
        s: &NodeId,
        h: &FullHeader,
        prior: PriorRole,
        now: Millis,
    ) {
        let role = match h.replicaof.as_ref().filter(|r| !r.is_zero()) {
            None => ClaimedRole::Primary,
            Some(r) => ClaimedRole::ReplicaOf(NodeId::from_bytes(r.as_bytes()).ok()),
        };
        let claims = PingClaims {
            sender: *s,
            role,
            config_epoch: ConfigEpoch(h.config_epoch),
            slots: &h.myslots,
        };
        let mut eout = Vec::new();
        self.epoch
            .handle_ping_claims(&mut self.topo, &self.cfg.epoch, &claims, prior, &mut eout);
        self.apply_epoch_effects(eout, Some(link), now);
    }

    /// §8 steps 9–12 for a message from the known node `from` received on `link`.
    pub(crate) fn handle_epoch_message(
        &mut self,
        link: LinkId,
        from: &NodeId,
        h: &FullHeader,
        body: &Body,
        now: Millis,
    ) {
        let mut eout = Vec::new();
        match body {
            Body::FailoverAuthRequest => {
                let req = AuthRequest {
                    requester: *from,
                    current_epoch: CurrentEpoch(h.current_epoch),
                    config_epoch: ConfigEpoch(h.config_epoch),
                    slots: &h.myslots,
                    force_ack: h.has_mflags(msg_flags::FORCEACK),
                };
                self.epoch
                    .handle_auth_request(&mut self.topo, &req, &mut eout);
            }
            Body::FailoverAuthAck => {
                let counted = self.epoch.election_mut().handle_auth_ack(
                    &self.topo,
                    from,
                    CurrentEpoch(h.current_epoch),
                );
                if counted {
                    self.run_failover(now);
                }
            }
            Body::MfStart => {
                self.epoch
                    .handle_mfstart(&self.topo, &self.cfg.epoch, from, now, &mut eout);
            }
            Body::Update(u) => {
                if let Ok(node) = NodeId::from_bytes(u.name.as_bytes()) {
                    self.epoch.handle_update(
                        &mut self.topo,
                        &self.cfg.epoch,
                        &node,
                        ConfigEpoch(u.config_epoch),
                        &u.slots,
                        &mut eout,
                    );
                }
            }
            _ => {}
        }
        self.apply_epoch_effects(eout, Some(link), now);
    }

    /// Turns epoch effects into outputs, in order. `reply_link` is the link of the message
    /// being handled ([`Target::ReplyLink`]).
    pub(crate) fn apply_epoch_effects(
        &mut self,
        effects: Vec<EpochEffect>,
        reply_link: Option<LinkId>,
        now: Millis,
    ) {
        for e in effects {
            match e {
                EpochEffect::Save => self.step.save(),
                EpochEffect::Persist => self.step.save_before_later_transmits(),
                EpochEffect::UpdateState => self.step.update_state(),
                EpochEffect::Send {
                    to,
                    message,
                    after_persist,
                } => {
                    if after_persist {
                        // Never before the configuration it announces is durable.
                        self.step.save_before_later_transmits();
                    }
                    self.send_epoch_message(to, message, reply_link, now);
                }
                EpochEffect::BecomeReplica {
                    primary,
                    ip,
                    port,
                    tls_port,
                    full_sync,
                } => self.stage_replicate_from(primary, ip, port, tls_port, full_sync),
                EpochEffect::BecomePrimary => {
                    self.step.promoted();
                    self.became_primary();
                    self.step.push(Output::BecamePrimary);
                }
                EpochEffect::PauseWrites { until } => {
                    self.mf_pause = Some(until);
                    self.announce_pause();
                }
                EpochEffect::UnpauseWrites => {
                    self.mf_pause = None;
                    self.announce_pause();
                }
                EpochEffect::DeleteSlotKeys(slots) => {
                    self.slot_keys_deleted(&slots);
                    self.step.push(Output::DeleteSlotKeys(slots));
                }
                EpochEffect::Event(EpochEvent::ConfigEpochBumped(e)) => {
                    self.step.notice(Notice::ConfigEpochBumped(e));
                }
                EpochEffect::Event(ev) => self.step.notice(Notice::Epoch(ev)),
            }
        }
    }

    /// Myself is a primary now: its offset is its own again.
    pub(crate) fn became_primary(&mut self) {
        self.repl.sync = ReplSync::Synced;
        self.repl.pointed = None;
        self.topo.myself_mut().repl_offset = self.repl.state.offset;
    }

    /// PING/PONG on `id`'s connected outbound link (nothing without one).
    pub(crate) fn send_ping_kind(&mut self, id: &NodeId, kind: PingKind, now: Millis) {
        let mut out = Vec::new();
        self.gossip.send_ping(
            &mut self.topo,
            &self.cfg.gossip,
            id,
            kind,
            now,
            &mut self.rng,
            &mut out,
        );
        self.apply_gossip_effects(out, now);
    }

    /// Nodes that replicate myself or my primary (`CLUSTER_BROADCAST_LOCAL_REPLICAS`).
    fn is_local_replica(&self, n: &ferrocluster_topology::Node) -> bool {
        let me = self.topo.myself();
        let my_primary = if me.is_replica() { me.primary } else { None };
        n.is_replica()
            && n.primary
                .is_some_and(|p| p == *me.id() || Some(p) == my_primary)
    }

    /// Builds and sends one epoch message with the header as it is now.
    fn send_epoch_message(
        &mut self,
        to: Target,
        message: EpochMessage,
        reply_link: Option<LinkId>,
        now: Millis,
    ) {
        let kind = match message {
            EpochMessage::Ping => Some(PingKind::Ping),
            EpochMessage::Pong => Some(PingKind::Pong),
            _ => None,
        };
        if let Some(kind) = kind {
            match to {
                Target::Node(id) => self.send_ping_kind(&id, kind, now),
                Target::AllNodes => self.broadcast_ping_kind(kind, |_| true, now),
                Target::LocalReplicas => {
                    let ids: Vec<NodeId> = self
                        .topo
                        .nodes()
                        .filter(|n| !n.is_myself() && self.is_local_replica(n))
                        .map(|n| *n.id())
                        .collect();
                    for id in ids {
                        self.send_ping_kind(&id, kind, now);
                    }
                }
                Target::ReplyLink => {
                    let Some(link) = reply_link else { return };
                    let node = self.gossip.links.get(link).and_then(|l| l.node);
                    let msg = build_ping(
                        &self.topo,
                        &self.gossip.links,
                        &self.gossip.blacklist,
                        &self.cfg.gossip,
                        self.gossip.state_byte,
                        kind,
                        node.as_ref(),
                        false,
                        self.gossip.pfail_count(),
                        now,
                        &mut self.rng,
                    );
                    self.transmit(link, &msg, Tag::None);
                }
            }
            return;
        }
        let mut header = self.header();
        let tag = match message {
            EpochMessage::AuthAck => Tag::Vote(self.topo.last_vote_epoch.0),
            EpochMessage::AuthRequest { .. } => Tag::AuthRequest(header.current_epoch),
            _ => Tag::None,
        };
        let body = match message {
            EpochMessage::AuthRequest { force_ack } => {
                if force_ack {
                    header.mflags[0] |= msg_flags::FORCEACK;
                }
                Body::FailoverAuthRequest
            }
            EpochMessage::AuthAck => Body::FailoverAuthAck,
            EpochMessage::MfStart => Body::MfStart,
            EpochMessage::Update {
                node,
                config_epoch,
                slots,
            } => Body::Update(Box::new(Update {
                config_epoch: config_epoch.get(),
                name: NodeName::new(*node.as_bytes()),
                slots: *slots,
            })),
            EpochMessage::Ping | EpochMessage::Pong => return,
        };
        let msg = Message::full(header, body);
        let links: Vec<LinkId> = match to {
            Target::ReplyLink => reply_link.into_iter().collect(),
            Target::Node(id) => self.connected_outbound(&id).into_iter().collect(),
            Target::AllNodes | Target::LocalReplicas => {
                let local = to == Target::LocalReplicas;
                self.topo
                    .nodes()
                    .filter(|n| !n.is_myself() && !n.in_handshake())
                    .filter(|n| !local || self.is_local_replica(n))
                    .filter_map(|n| self.connected_outbound(n.id()))
                    .collect()
            }
        };
        for link in links {
            self.transmit(link, &msg, tag);
        }
    }

    fn connected_outbound(&self, id: &NodeId) -> Option<LinkId> {
        let link = self.gossip.links.outbound_of(id)?;
        self.gossip
            .links
            .get(link)
            .is_some_and(|l| l.connected)
            .then_some(link)
    }
}

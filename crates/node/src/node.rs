//! `ClusterNode`: the one Sans-IO entry point.

use crate::output::{OutputQueue, Staged};
use crate::stats::MessageStats;
use crate::{ClusterConfig, Event, LinkEvent, NodeError, Output};
use ferrocluster_bus::{
    encode, msg_flags, Body, FrameDecoder, Header, Message, MessageType, NodeName,
};
use ferrocluster_epoch::{Epoch, EpochConfig, PriorRole, ReplicationState};
use ferrocluster_failure::{
    self as failure, ClusterState, FailureConfig, FailureEffect, StateConfig,
};
use ferrocluster_gossip::{
    Gossip, GossipConfig, GossipEffect, LinkDirection, LinkId, PingKind, Received, ResetKind,
    CRON_PERIOD_MS,
};
use ferrocluster_health::HealthConfig;
use ferrocluster_migration::Migrations;
use ferrocluster_slot::SlotSet;
use ferrocluster_topology::views::{self, InfoInputs, ViewOptions};
use ferrocluster_topology::{
    load_nodes_conf_with_warnings, save_nodes_conf, Hostname, HumanNodename, LinkState,
    LoadOptions, Millis, NodeFlags, NodeId, Topology,
};
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::net::IpAddr;

/// A Valkey Cluster node engine (Sans-IO). See the crate docs for the host loop.
///
/// Every input takes `now` (Unix ms); time that goes backwards is clamped to the latest time
/// seen. All randomness comes from a ChaCha8 generator seeded at construction, and no hash-map
/// order reaches an output, so the same inputs give the same outputs.
#[derive(Debug)]
pub struct ClusterNode {
    pub(crate) config: ClusterConfig,
    pub(crate) gossip_cfg: GossipConfig,
    pub(crate) failure_cfg: FailureConfig,
    pub(crate) state_cfg: StateConfig,
    pub(crate) topo: Topology,
    pub(crate) gossip: Gossip,
    pub(crate) state: ClusterState,
    pub(crate) rng: ChaCha8Rng,
    pub(crate) decoders: BTreeMap<LinkId, FrameDecoder>,
    pub(crate) queue: OutputQueue,
    /// Outputs of the current step, released by `finish`.
    pub(crate) staged: Staged,
    pub(crate) last_now: Millis,
    pub(crate) next_cron: Millis,
    pub(crate) save_pending: bool,
    pub(crate) save_critical: bool,
    /// A durable save was asked for in this step (an epoch `Persist`): every transmit staged
    /// from now until the step ends waits for it.
    pub(crate) gate_transmits: bool,
    pub(crate) state_dirty: bool,
    pub(crate) persist_seq: u64,
    pub(crate) stats: MessageStats,
    /// Local address of accepted links, when the host told it (own-IP learning, §7.3).
    pub(crate) local_ips: BTreeMap<LinkId, IpAddr>,
    /// The last CLUSTER FAILOVER accepted on this replica (kept for
    /// [`ClusterNode::manual_failover_request`]; the epoch layer runs it).
    pub(crate) manual_failover: Option<crate::ManualFailoverRequest>,
    /// Epochs, elections, manual failover, configuration propagation (§11–§14).
    pub(crate) epoch: Epoch,
    pub(crate) epoch_cfg: EpochConfig,
    pub(crate) health_cfg: HealthConfig,
    /// Myself's replication as the host last reported it.
    pub(crate) repl: ReplicationState,
    /// Whether the host ever reported it ([`ClusterNode::handle_replication`]).
    pub(crate) repl_reported: bool,
    /// Atomic slot migration jobs (slot-migration sheet A).
    pub(crate) migrations: Migrations,
    /// Myself became a primary in this step: the migration engine hears of it at the step end.
    pub(crate) promoted: bool,
    /// End of the manual failover's write pause (epoch layer), if one holds.
    pub(crate) mf_pause: Option<Millis>,
    /// End of the slot migrations' write pause, if one holds.
    pub(crate) asm_pause: Option<Millis>,
    /// Where myself stands with the first sync from the primary it was last pointed at
    /// ([`ClusterNode::advertised_replication`]).
    pub(crate) repl_sync: ReplSync,
    /// Slots whose keys the host may hold: myself's slots, importing ones, every slot while
    /// myself is a replica (its data is its primary's, whatever that held), minus the slots
    /// the host was told to empty. See [`ClusterNode::sweep_stale_keys`].
    pub(crate) key_slots: SlotSet,
}

impl ClusterNode {
    /// Builds a node from `config` at `now` with randomness from `seed`, either with a fresh
    /// identity (random node ID and shard ID, flags MYSELF|PRIMARY, §18.3) or from the contents
    /// of a previously saved nodes.conf. A `Persist` output (seq 1) is queued at once: Valkey
    /// writes the config at startup. Skipped parts of the saved file (aux fields a newer node
    /// wrote) come out as [`Event::NodesConfWarning`]s before it.
    ///
    /// Identity: a fresh node's ID and shard ID are the first draws of the ChaCha8 generator
    /// seeded with `seed` (then the node's other randomness follows from it), so two nodes
    /// built with the same seed and no saved file get the same ID, as do two nodes loading
    /// copies of one nodes.conf. A host MUST give every node its own seed (drawn from the OS
    /// RNG, say) and its own file. Two nodes that share an ID anyway refuse each other's
    /// messages and report it ([`Event::NodeIdCollision`]); myself's address is never taken
    /// from a peer.
    ///
    /// # Errors
    /// [`NodeError::Config`] from [`ClusterConfig::validate`]; [`NodeError::NodesConf`] when the
    /// saved text does not load. An empty `saved_nodes_conf` means "start fresh".
    pub fn new(
        config: ClusterConfig,
        now: Millis,
        seed: u64,
        saved_nodes_conf: Option<&[u8]>,
    ) -> Result<ClusterNode, NodeError> {
        config.validate()?;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let (mut topo, warnings) = match saved_nodes_conf.filter(|b| !b.is_empty()) {
            Some(text) => {
                load_nodes_conf_with_warnings(text, now, &mut rng, LoadOptions::default())?
            }
            None => (Topology::fresh(&mut rng, now), Vec::new()),
        };
        for n in topo.nodes_mut().filter(|n| !n.is_myself()) {
            n.link = LinkState::Disconnected;
        }
        apply_config_to_myself(&mut topo, &config);
        let gossip_cfg = config.gossip_config();
        let failure_cfg = config.failure_config();
        let state_cfg = config.state_config();
        let epoch_cfg = config.epoch_config();
        let health_cfg = config.health_config();
        let migrations_cfg = config.migration_config();
        let mut node = ClusterNode {
            config,
            gossip_cfg,
            failure_cfg,
            state_cfg,
            topo,
            gossip: Gossip::new(),
            state: ClusterState::new(),
            rng,
            decoders: BTreeMap::new(),
            queue: OutputQueue::default(),
            staged: Staged::default(),
            last_now: now,
            next_cron: now,
            save_pending: true,
            save_critical: false,
            gate_transmits: false,
            state_dirty: true,
            persist_seq: 0,
            stats: MessageStats::default(),
            local_ips: BTreeMap::new(),
            manual_failover: None,
            epoch: Epoch::new(),
            epoch_cfg,
            health_cfg,
            repl: ReplicationState::default(),
            repl_reported: false,
            migrations: Migrations::new(migrations_cfg, now),
            promoted: false,
            mf_pause: None,
            asm_pause: None,
            key_slots: SlotSet::new(),
            repl_sync: ReplSync::Synced,
        };
        for w in warnings {
            node.staged.push(Output::Event(Event::NodesConfWarning(w)));
        }
        node.finish(now);
        Ok(node)
    }

    pub(crate) fn clamp(&mut self, now: Millis) -> Millis {
        if now > self.last_now {
            self.last_now = now;
        }
        self.last_now
    }

    // ----- inputs -----

    /// The host accepted an inbound bus connection from `peer_ip`; returns the link's ID for
    /// later [`ClusterNode::handle_link_bytes`] and [`LinkEvent::Closed`] calls.
    pub fn handle_accept(&mut self, peer_ip: IpAddr, now: Millis) -> LinkId {
        let now = self.clamp(now);
        let link = self
            .gossip
            .links
            .open(LinkDirection::Inbound, None, Some(peer_ip), now);
        self.decoders.insert(link, FrameDecoder::new());
        link
    }

    /// Like [`ClusterNode::handle_accept`], with the local address of the accepted
    /// connection (`getsockname`). Without `cluster-announce-ip`, a MEET arriving on this link
    /// (or any PING while myself has no IP yet) sets myself's IP to `local_ip` (§7.3 "own IP
    /// discovery", §8 step 5), saved to nodes.conf, with [`Event::MyIpChanged`].
    pub fn handle_accept_local(
        &mut self,
        peer_ip: IpAddr,
        local_ip: IpAddr,
        now: Millis,
    ) -> LinkId {
        let link = self.handle_accept(peer_ip, now);
        self.local_ips.insert(link, local_ip);
        link
    }

    /// The host reports a link event. Unknown links are ignored.
    pub fn handle_link(&mut self, event: LinkEvent, now: Millis) {
        let now = self.clamp(now);
        let mut out = Vec::new();
        match event {
            LinkEvent::Connected(link) => {
                self.gossip.handle_connected(
                    &mut self.topo,
                    &self.gossip_cfg,
                    link,
                    now,
                    &mut self.rng,
                    &mut out,
                );
            }
            LinkEvent::ConnectFailed(link) => {
                self.gossip
                    .handle_link_closed(&mut self.topo, link, true, now);
                self.decoders.remove(&link);
            }
            LinkEvent::Closed(link) => {
                self.gossip
                    .handle_link_closed(&mut self.topo, link, false, now);
                self.decoders.remove(&link);
                self.local_ips.remove(&link);
            }
        }
        self.apply_gossip_effects(out, now);
        self.finish(now);
    }

    /// Bytes arrived on `link`. The node frames the stream itself: every whole frame is
    /// decoded and processed; a frame that fails to decode is dropped and counted (nothing else
    /// changes, [`Event::FrameDropped`]); lost framing closes the link ([`Output::Close`], then
    /// [`Event::FramingLost`]). Bytes for an unknown link are ignored.
    pub fn handle_link_bytes(&mut self, link: LinkId, bytes: &[u8], now: Millis) {
        let now = self.clamp(now);
        let Some(dec) = self.decoders.get_mut(&link) else {
            return;
        };
        dec.push(bytes);
        while let Some(dec) = self.decoders.get_mut(&link) {
            match dec.next_message() {
                Ok(Some(msg)) => {
                    MessageStats::count(&mut self.stats.received, msg.message_type());
                    self.process_message(link, &msg, now);
                }
                Ok(None) => break,
                Err(error) if error.framing_lost() => {
                    self.stats.framing_lost += 1;
                    self.decoders.remove(&link);
                    self.gossip
                        .handle_link_closed(&mut self.topo, link, false, now);
                    self.staged.push(Output::Close { link });
                    self.staged
                        .push(Output::Event(Event::FramingLost { link, error }));
                    break;
                }
                Err(error) => {
                    self.stats.dropped_frames += 1;
                    self.staged
                        .push(Output::Event(Event::FrameDropped { link, error }));
                }
            }
        }
        self.finish(now);
    }

    /// Runs the timers due at `now` (the 100 ms cron: pings, reconnects, handshake expiry,
    /// PFAIL marking, cluster state; the slot migration timers: heartbeats, inactivity,
    /// pause deadlines). Calling it early or twice is harmless.
    pub fn handle_timeout(&mut self, now: Millis) {
        let now = self.clamp(now);
        if now < self.next_cron {
            // Only the slot migration engine may be due (its work runs at the step end).
            self.finish(now);
            return;
        }
        self.next_cron = now.saturating_add_ms(CRON_PERIOD_MS);
        let mut out = Vec::new();
        self.gossip.handle_cron(
            &mut self.topo,
            &self.gossip_cfg,
            now,
            &mut self.rng,
            &mut out,
        );
        self.apply_gossip_effects(out, now);
        let mut fout = Vec::new();
        failure::check_pfail(&mut self.topo, now, &self.failure_cfg, &mut fout);
        self.apply_failure_effects(fout, now);
        // §7.2 step 5: the epoch layer (manual failover timeout, election, replica migration).
        self.epoch_cron(now);
        // §10: re-evaluated when something changed (effects set `state_dirty`) or, every run,
        // while the state is FAIL so its delays expire on time.
        if self.state.needs_cron_update() {
            self.state_dirty = true;
        }
        self.finish(now);
    }

    /// The host has durably written every `Persist` output up to `seq` (cumulative). Held
    /// transmits that waited for it become pollable.
    pub fn handle_persisted(&mut self, seq: u64) {
        self.queue.acknowledge(seq);
    }

    /// Applies a changed configuration at run time (CONFIG SET of a `cluster-*` option): every
    /// layer takes the new values at once (node timeout, ping interval, failure report
    /// validity, coverage rule, replica validity, migration barrier, manual failover timeout,
    /// slot migration log length, routing options), and myself's announced values (ports,
    /// hostname, human nodename, client IPs, NOFAILOVER) change in the topology, saved with a
    /// `Persist` and gossiped with the next messages, as Valkey's config callbacks
    /// (`updateClusterHostname`, `updateClusterAnnouncedPort`, `updateClusterFlags`, ...) do.
    ///
    /// The host MUST keep `port`, `tls_port` and `cluster_port` as they were: the sockets are
    /// the host's, so those options are immutable at run time (as in Valkey).
    ///
    /// # Errors
    /// [`NodeError::Config`] from [`ClusterConfig::validate`]; nothing changed then.
    pub fn set_config(&mut self, config: ClusterConfig, now: Millis) -> Result<(), NodeError> {
        config.validate()?;
        let now = self.clamp(now);
        self.gossip_cfg = config.gossip_config();
        self.failure_cfg = config.failure_config();
        self.state_cfg = config.state_config();
        self.epoch_cfg = config.epoch_config();
        self.health_cfg = config.health_config();
        self.migrations.set_config(config.migration_config());
        apply_config_to_myself(&mut self.topo, &config);
        self.config = config;
        self.save_pending = true;
        self.state_dirty = true;
        self.finish(now);
        Ok(())
    }

    /// The sequence number of the latest [`Output::Persist`] queued (0 before the first; the
    /// constructor queues seq 1). [`ClusterNode::nodes_conf`] is at least as new as that
    /// Persist's contents, so a host that writes the current config out of band (a CLUSTER
    /// command acknowledged only once its change is on disk) labels that write with this
    /// number: a queued Persist of the same or a lower number, written later, must not replace
    /// it (it is older), while a higher one is newer.
    pub fn persist_seq(&self) -> u64 {
        self.persist_seq
    }

    // ----- outputs -----

    /// The next instruction for the host, in order; `None` when there is nothing (more) to do
    /// now. Drain it after every input.
    pub fn poll_output(&mut self) -> Option<Output> {
        let o = self.queue.pop();
        if let Some(Output::Event(Event::ReplicateFrom { .. })) = &o {
            // The host has seen the re-point: what it reports from now on is about the new
            // primary ([`ClusterNode::advertised_replication`]).
            if self.repl_sync == ReplSync::Pending {
                self.repl_sync = ReplSync::Polled;
            }
        }
        o
    }

    /// When [`ClusterNode::handle_timeout`] must be called next (absolute Unix ms): the next
    /// cron run or the slot migration engine's next deadline, whichever is first.
    pub fn poll_timeout(&self) -> Option<Millis> {
        Some(match self.migrations.poll_timeout() {
            Some(t) => t.min(self.next_cron),
            None => self.next_cron,
        })
    }

    // ----- commands -----

    /// CLUSTER MEET `ip port [bus_port]` (§7.3): a handshake node is created (unless one with
    /// the same address exists) and the cron connects to it with a MEET.
    ///
    /// # Errors
    /// [`NodeError::Command`] for port 0 or an overflowing default bus port.
    pub fn meet(
        &mut self,
        ip: IpAddr,
        port: u16,
        bus_port: Option<u16>,
        now: Millis,
    ) -> Result<(), NodeError> {
        let now = self.clamp(now);
        self.gossip
            .meet(&mut self.topo, ip, port, bus_port, now, &mut self.rng)?;
        self.state_dirty = true;
        self.finish(now);
        Ok(())
    }

    /// CLUSTER ADDSLOTS (§15): every slot must be unassigned; they become myself's, their
    /// importing marks are cleared.
    ///
    /// # Errors
    /// [`NodeError::SlotBusy`] naming the first slot that has an owner (nothing assigned).
    pub fn add_slots(&mut self, slots: &SlotSet, now: Millis) -> Result<(), NodeError> {
        let now = self.clamp(now);
        if let Some(busy) = slots.iter().find(|s| self.topo.slot_owner(*s).is_some()) {
            return Err(NodeError::SlotBusy(busy));
        }
        let me = *self.topo.myself_id();
        for s in slots.iter() {
            // Myself is always known.
            let _ = self.topo.set_slot_owner(s, Some(me));
            let _ = self.topo.set_importing(s, None);
            self.epoch.clear_not_claiming(s);
        }
        self.save_pending = true;
        self.state_dirty = true;
        self.finish(now);
        Ok(())
    }

    /// CLUSTER REPLICATE `id` (§19.6), the role part: myself becomes a replica of `primary`
    /// (taking its shard ID) and a PONG is broadcast. Replicating the current primary again is
    /// OK. Data replication is the host's business.
    ///
    /// # Errors
    /// [`NodeError::UnknownNode`], [`NodeError::ReplicateMyself`],
    /// [`NodeError::ReplicateReplica`], [`NodeError::ReplicateWithSlots`].
    pub fn replicate(&mut self, primary: &NodeId, now: Millis) -> Result<(), NodeError> {
        let now = self.clamp(now);
        let me = *self.topo.myself_id();
        let p = self
            .topo
            .node(primary)
            .ok_or(NodeError::UnknownNode(*primary))?;
        if *primary == me {
            return Err(NodeError::ReplicateMyself);
        }
        if p.is_replica() {
            return Err(NodeError::ReplicateReplica);
        }
        if self.topo.myself().is_primary() && self.topo.myself().slot_count() != 0 {
            return Err(NodeError::ReplicateWithSlots);
        }
        self.become_replica_of(primary, now);
        self.broadcast_pong(now);
        self.finish(now);
        Ok(())
    }

    /// CLUSTER FORGET `id` (§16): the node is banned for `cluster-blacklist-ttl` seconds and
    /// deleted; the ban travels in FORGOTTEN_NODE extensions.
    ///
    /// # Errors
    /// [`NodeError::Command`]: unknown (and not banned), myself, or my primary.
    pub fn forget(&mut self, id: &NodeId, now: Millis) -> Result<(), NodeError> {
        let now = self.clamp(now);
        let mut out = Vec::new();
        self.gossip
            .forget(&mut self.topo, &self.gossip_cfg, id, now, &mut out)?;
        self.apply_gossip_effects(out, now);
        self.finish(now);
        Ok(())
    }

    /// CLUSTER RESET SOFT (`hard = false`) or HARD (§19.6). The host refuses it for a primary
    /// holding keys before calling this.
    ///
    /// # Errors
    /// None today; the `Result` leaves room for checks the node will own.
    pub fn reset(&mut self, hard: bool, now: Millis) -> Result<(), NodeError> {
        let now = self.clamp(now);
        self.reset_inner(hard, now);
        self.finish(now);
        Ok(())
    }

    /// RESET effects without the step end: see [`ClusterNode::reset`].
    pub(crate) fn reset_inner(&mut self, hard: bool, now: Millis) {
        let was_replica = self.topo.myself().is_replica();
        let mut out = Vec::new();
        let kind = if hard {
            ResetKind::Hard
        } else {
            ResetKind::Soft
        };
        self.gossip
            .reset(&mut self.topo, kind, &mut self.rng, &mut out);
        self.decoders.clear();
        self.local_ips.clear();
        self.manual_failover = None;
        let mut eout = Vec::new();
        self.epoch.reset(&mut eout);
        apply_config_to_myself(&mut self.topo, &self.config);
        self.apply_gossip_effects(out, now);
        self.apply_epoch_effects(eout, None, now);
        if was_replica {
            self.promoted = true;
            self.became_primary();
            self.staged.push(Output::Event(Event::BecamePrimary));
        }
        // A reset replica's data is emptied by the host; a primary with keys is refused.
        self.key_slots = SlotSet::new();
        self.staged
            .push(Output::Event(Event::ClusterReset { hard, was_replica }));
    }

    // ----- queries -----

    /// Myself's node ID.
    pub fn myself_id(&self) -> &NodeId {
        self.topo.myself_id()
    }

    /// The cluster model (read-only).
    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    /// The configuration.
    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// Whether the cluster state is `ok` (§10).
    pub fn cluster_state_ok(&self) -> bool {
        self.state.is_ok()
    }

    /// The CLUSTER FAILOVER last accepted on this replica (§13.1), a record for the host: the
    /// epoch layer already runs it. Cleared by [`ClusterNode::take_manual_failover_request`],
    /// a role change or RESET.
    pub fn manual_failover_request(&self) -> Option<&crate::ManualFailoverRequest> {
        self.manual_failover.as_ref()
    }

    /// Takes the pending CLUSTER FAILOVER request (see
    /// [`ClusterNode::manual_failover_request`]).
    pub fn take_manual_failover_request(&mut self) -> Option<crate::ManualFailoverRequest> {
        self.manual_failover.take()
    }

    /// Message counters.
    pub fn stats(&self) -> &MessageStats {
        &self.stats
    }

    /// The CLUSTER INFO text (§19.4).
    pub fn cluster_info(&self) -> String {
        let inputs = InfoInputs {
            state_ok: self.state.is_ok(),
            messages_sent: self.stats.sent,
            messages_received: self.stats.received,
            links_buffer_limit_exceeded: 0,
        };
        views::cluster_info_text(&self.topo, &inputs)
    }

    /// The CLUSTER NODES text (§19.1) as a plain-TCP IPv4 client sees it.
    pub fn cluster_nodes(&self) -> String {
        views::cluster_nodes_text(&self.topo, &ViewOptions::default())
    }

    /// The nodes.conf text the next `Persist` would carry (§18).
    pub fn nodes_conf(&self) -> String {
        save_nodes_conf(&self.topo)
    }

    /// The number of valid failure reports about `id` (`CLUSTER COUNT-FAILURE-REPORTS`);
    /// `None` for an unknown node. Expired reports are not counted.
    pub fn failure_report_count(&self, id: &NodeId, now: Millis) -> Option<usize> {
        let validity = self.failure_cfg.report_validity_ms();
        self.topo.node(id).map(|n| {
            n.failure_reports
                .values()
                .filter(|t| now.since(**t) <= validity)
                .count()
        })
    }

    // ----- internals -----

    pub(crate) fn process_message(&mut self, link: LinkId, msg: &Message, now: Millis) {
        self.learn_own_ip(link, msg);
        // §8 step 2: the sender's role before anything in this message changes it.
        let prior = self
            .gossip
            .message_sender(&self.topo, link, msg)
            .map(|s| PriorRole::of(&self.topo, &s))
            .unwrap_or_default();
        let mut out = Vec::new();
        let received = self.gossip.handle_message(
            &mut self.topo,
            &self.gossip_cfg,
            link,
            msg,
            now,
            &mut self.rng,
            &mut out,
        );
        self.apply_gossip_effects(out, now);
        let sender = received.sender();
        // §8 step 4, last item: a paused primary's final offset (manual failover).
        if let (Some(s), Some(h)) = (sender, msg.full_header()) {
            self.epoch.handle_primary_offset(
                &self.topo,
                &s,
                h.has_mflags(msg_flags::PAUSED),
                h.offset,
            );
        }
        // §8 steps 6f–6h (epoch layer), then 6i (gossip section and extensions).
        if let (Received::Claims(s), Some(h)) = (received, msg.full_header()) {
            self.apply_ping_claims(link, &s, h, prior, now);
            let mut out = Vec::new();
            self.gossip.handle_message_gossip(
                &mut self.topo,
                &self.gossip_cfg,
                &s,
                msg,
                now,
                &mut out,
            );
            self.apply_gossip_effects(out, now);
        }
        let Some(from) = sender else { return };
        match &msg.body {
            // §8 step 7.
            Body::Fail { about } => {
                if let Ok(id) = NodeId::from_bytes(about.as_bytes()) {
                    let mut fout = Vec::new();
                    failure::handle_fail_message(&mut self.topo, &id, now, &mut fout);
                    self.apply_failure_effects(fout, now);
                }
            }
            // §8 steps 9–12: the epoch layer.
            Body::FailoverAuthRequest | Body::FailoverAuthAck | Body::MfStart | Body::Update(_) => {
                if let Some(h) = msg.full_header() {
                    self.handle_epoch_message(link, &from, h, &msg.body, now);
                }
            }
            // §8 steps 8 and 13: Pub/Sub and module messages.
            _ => self.deliver_bus_message(from, &msg.body),
        }
    }

    /// §7.3 own-IP discovery on a PING/MEET received on an accepted link whose local address
    /// the host gave ([`ClusterNode::handle_accept_local`]).
    fn learn_own_ip(&mut self, link: LinkId, msg: &Message) {
        if self.config.announce_ip.is_some() {
            return;
        }
        let t = msg.message_type();
        let wanted =
            t == MessageType::Meet || (t == MessageType::Ping && self.topo.myself().ip.is_none());
        let Some(ip) = self.local_ips.get(&link).copied() else {
            return;
        };
        if wanted && msg.full_header().is_some() && self.topo.myself().ip != Some(ip) {
            self.topo.myself_mut().ip = Some(ip);
            self.save_pending = true;
            self.staged.push(Output::Event(Event::MyIpChanged(ip)));
        }
    }

    /// Stages `message` on `link`. While myself is a primary serving a manual failover every
    /// full header carries mflags PAUSED (§5.2, §13.2); after an epoch `Persist` in this step
    /// the transmit waits for that persist.
    pub(crate) fn transmit(&mut self, link: LinkId, message: &Message) {
        MessageStats::count(&mut self.stats.sent, message.message_type());
        let bytes = if self.epoch.paused_for_manual_failover(&self.topo) && !message.is_light() {
            let mut m = message.clone();
            if let Header::Full(h) = &mut m.header {
                h.mflags[0] |= msg_flags::PAUSED;
            }
            encode(&m)
        } else {
            encode(message)
        };
        self.stage_transmit(link, bytes);
    }

    /// Stages encoded bytes on `link`, gated when this step asked for a durable save.
    pub(crate) fn stage_transmit(&mut self, link: LinkId, bytes: Vec<u8>) {
        let out = Output::Transmit { link, bytes };
        if self.gate_transmits {
            self.staged.push_gated(out);
        } else {
            self.staged.push(out);
        }
    }

    pub(crate) fn apply_gossip_effects(&mut self, effects: Vec<GossipEffect>, now: Millis) {
        for e in effects {
            match e {
                GossipEffect::Connect { link, ip, port, .. } => {
                    self.decoders.insert(link, FrameDecoder::new());
                    self.staged.push(Output::Connect { link, ip, port });
                }
                GossipEffect::Send { link, message } => self.transmit(link, &message),
                GossipEffect::Close { link } => {
                    self.decoders.remove(&link);
                    self.staged.push(Output::Close { link });
                }
                GossipEffect::Save => self.save_pending = true,
                GossipEffect::UpdateState => self.state_dirty = true,
                GossipEffect::GossipHealth {
                    sender,
                    about,
                    flags,
                } => {
                    let mut fout = Vec::new();
                    failure::handle_gossip_flags(
                        &mut self.topo,
                        &sender,
                        &about,
                        flags,
                        now,
                        &self.failure_cfg,
                        &mut fout,
                    );
                    self.apply_failure_effects(fout, now);
                }
                GossipEffect::PongReceived(id) => {
                    let mut fout = Vec::new();
                    failure::handle_pong(&mut self.topo, &id, now, &self.failure_cfg, &mut fout);
                    self.apply_failure_effects(fout, now);
                }
                GossipEffect::HandshakeCompleted(id) => {
                    // The node now counts with its real role flags.
                    self.state_dirty = true;
                    self.staged
                        .push(Output::Event(Event::HandshakeCompleted(id)));
                }
                GossipEffect::NodeDiscovered(id) => {
                    self.staged.push(Output::Event(Event::NodeDiscovered(id)));
                }
                GossipEffect::NodeDeleted(id) => {
                    self.staged.push(Output::Event(Event::NodeDeleted(id)));
                }
                GossipEffect::IdCollision { link, mine, peer } => {
                    self.staged.push(Output::Event(Event::NodeIdCollision {
                        id: *self.topo.myself_id(),
                        link,
                        mine,
                        peer,
                    }));
                }
            }
        }
    }

    pub(crate) fn apply_failure_effects(&mut self, effects: Vec<FailureEffect>, _now: Millis) {
        for e in effects {
            self.state_dirty = true;
            let ev = match e {
                FailureEffect::MarkedPfail(id) => Event::NodePfail(id),
                FailureEffect::MarkedFail { node, broadcast } => {
                    self.save_pending = true;
                    if broadcast {
                        self.broadcast_fail(&node);
                    }
                    Event::NodeFail(node)
                }
                FailureEffect::PfailCleared(id) => Event::NodePfailCleared(id),
                FailureEffect::FailCleared(id) => {
                    self.save_pending = true;
                    Event::NodeFailCleared(id)
                }
            };
            self.staged.push(Output::Event(ev));
        }
    }

    pub(crate) fn broadcast_fail(&mut self, about: &NodeId) {
        let header = self.header();
        let msg = Message::full(
            header,
            Body::Fail {
                about: NodeName::new(*about.as_bytes()),
            },
        );
        let mut out = Vec::new();
        self.gossip.broadcast(&self.topo, &msg, &mut out);
        for e in out {
            if let GossipEffect::Send { link, message } = e {
                self.transmit(link, &message);
            }
        }
    }

    /// PONG to every known node but myself and handshake nodes, on connected outbound links
    /// (`clusterBroadcastPong(CLUSTER_BROADCAST_ALL)`).
    pub(crate) fn broadcast_pong(&mut self, now: Millis) {
        self.broadcast_ping_kind(PingKind::Pong, |_| true, now);
    }

    /// A PING or PONG to every node but myself and handshake nodes matching `keep`.
    pub(crate) fn broadcast_ping_kind(
        &mut self,
        kind: PingKind,
        keep: impl Fn(&ferrocluster_topology::Node) -> bool,
        now: Millis,
    ) {
        let ids: Vec<NodeId> = self
            .topo
            .nodes()
            .filter(|n| !n.is_myself() && !n.in_handshake() && keep(n))
            .map(|n| *n.id())
            .collect();
        let mut out = Vec::new();
        for id in ids {
            self.gossip.send_ping(
                &mut self.topo,
                &self.gossip_cfg,
                &id,
                kind,
                now,
                &mut self.rng,
                &mut out,
            );
        }
        self.apply_gossip_effects(out, now);
    }

    /// Ends a step: re-evaluates the cluster state if needed, then releases the staged outputs
    /// into the queue — a `Persist` first when the config changed, and, when the change must
    /// be durable before anyone hears of it (a bumped configEpoch), every transmit of the step
    /// held until that persist is acknowledged.
    pub(crate) fn finish(&mut self, now: Millis) {
        self.pump_migrations(now);
        self.sweep_stale_keys();
        if self.state_dirty {
            self.state_dirty = false;
            if let Some(h) = self.state.update(&self.topo, now, &self.state_cfg) {
                self.staged.push(Output::Event(Event::ClusterStateChanged(
                    h == failure::ClusterHealth::Ok,
                )));
            }
            self.gossip.state_byte = self.state.health().wire();
        }
        let mut gate = None;
        if self.save_pending {
            self.save_pending = false;
            self.persist_seq += 1;
            let contents = save_nodes_conf(&self.topo).into_bytes();
            self.queue.push(Output::Persist {
                seq: self.persist_seq,
                contents,
            });
            gate = Some(self.persist_seq);
        }
        let critical = std::mem::take(&mut self.save_critical);
        self.gate_transmits = false;
        // A gated entry without a persist in this step (cannot happen: every gate comes with a
        // save) waits for the latest persist instead.
        let seq = gate.unwrap_or(self.persist_seq);
        for (gated, o) in self.staged.drain() {
            let hold = gated || (critical && matches!(o, Output::Transmit { .. }));
            if hold && seq > self.queue.persisted() {
                self.queue.push_after_persist(seq, o);
            } else {
                self.queue.push(o);
            }
        }
    }

    /// Keys of a slot another node owns must not stay on a primary (issue 16; Valkey deletes
    /// the keys of slots it lost on a config update, `clusterUpdateSlotsConfigWith`, and of
    /// slots assigned to another node at startup, `verifyClusterConfigWithData`). At the end
    /// of every step: while myself is a replica its data is its primary's, so every slot may
    /// hold keys; while a primary, the slots of [`ClusterNode::key_slots`] that another node
    /// owns now — not myself's, not importing (a legacy IMPORTING mark or an atomic slot
    /// migration's hidden slots), not unassigned — get one [`Event::DeleteSlotKeys`]. This
    /// covers what the epoch layer's dirty slots do not: a promoted replica whose old
    /// primary lost slots it never heard deleted (a slot migration source killed after
    /// granting the failover), a slot that was unassigned when myself took its keys, an
    /// aborted import.
    pub(crate) fn sweep_stale_keys(&mut self) {
        let me = self.topo.myself();
        if !me.is_primary() {
            self.key_slots = SlotSet::full();
            return;
        }
        let mut keep = me.slots().clone();
        for (s, _) in self.topo.importing() {
            keep.insert(s);
        }
        if self.migrations_active() {
            keep = keep.union(&self.migrations.hidden_slots());
        }
        let extra = self.key_slots.difference(&keep);
        let stale: SlotSet = extra
            .iter()
            .filter(|s| self.topo.slot_owner(*s).is_some())
            .collect();
        self.key_slots = self.key_slots.union(&keep).difference(&stale);
        if !stale.is_empty() {
            self.staged
                .push(Output::Event(Event::DeleteSlotKeys(Box::new(stale))));
        }
    }

    /// The host was told to empty `slots` (a dirty-slot deletion, a slot migration's drop).
    pub(crate) fn slot_keys_deleted(&mut self, slots: &SlotSet) {
        self.key_slots = self.key_slots.difference(slots);
    }

    /// The full header of every message myself sends now (§3), with mflags PAUSED while
    /// myself is a primary serving a manual failover (§13.2; messages the gossip layer builds
    /// get it in [`ClusterNode::transmit`]).
    pub(crate) fn header(&self) -> ferrocluster_bus::FullHeader {
        let mut h =
            ferrocluster_gossip::build_header(&self.topo, &self.gossip_cfg, self.gossip.state_byte);
        if self.epoch.paused_for_manual_failover(&self.topo) {
            h.mflags[0] |= msg_flags::PAUSED;
        }
        h
    }
}

/// Myself's first sync with the primary it follows (issue 16 item 14, BUG-08).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReplSync {
    /// Synced, or a primary: the host's offset is advertised.
    Synced,
    /// Re-pointed (`ReplicateFrom` staged, not yet polled): reports still describe the old
    /// link.
    Pending,
    /// The host polled the `ReplicateFrom`; the first report with the link up ends it.
    Polled,
}

/// Writes the configured announce values into myself's record (ports, hostname, names, client
/// IPs, NOFAILOVER, LIGHT_HDR_SUPPORTED which V8 always advertises, §5.1).
fn apply_config_to_myself(topo: &mut Topology, c: &ClusterConfig) {
    let me = topo.myself_mut();
    me.port = c.effective_port();
    me.tls_port = c.effective_tls_port();
    me.bus_port = c.effective_bus_port();
    if let Some(ip) = c.announce_ip {
        me.ip = Some(ip);
    }
    // validate() checked these; an invalid value cannot reach here.
    me.hostname = c
        .announce_hostname
        .as_deref()
        .and_then(|h| Hostname::new(h).ok());
    me.human_nodename = c
        .announce_human_nodename
        .as_deref()
        .and_then(|h| HumanNodename::new(h).ok());
    me.client_ipv4 = c.announce_client_ipv4;
    me.client_ipv6 = c.announce_client_ipv6;
    me.flags.set(NodeFlags::NOFAILOVER, c.replica_no_failover);
    me.flags.insert(NodeFlags::LIGHT_HDR_SUPPORTED);
    me.link = LinkState::Connected;
}

//! `ClusterNode`: the one Sans-IO entry point.

use crate::checks::{Checks, InvariantViolation};
use crate::output::{OutputQueue, Tag};
use crate::stats::MessageStats;
use crate::step::Step;
use crate::{Capabilities, ClusterConfig, LinkEvent, NodeError, Notice, Output};
use ferrocluster_bus::{
    encode, msg_flags, Body, FrameDecoder, Header, Message, MessageType, NodeName,
};
use ferrocluster_epoch::{Epoch, EpochConfig, PriorRole, ReplicationState};
use ferrocluster_failure::{
    self as failure, ClusterState, FailureConfig, FailureEffect, StateConfig,
};
use ferrocluster_gossip::{
    Gossip, GossipConfig, GossipEffect, LinkDirection, LinkId, PingKind, Received, CRON_PERIOD_MS,
};
use ferrocluster_health::HealthConfig;
use ferrocluster_migration::Migrations;
use ferrocluster_slot::SlotSet;
use ferrocluster_topology::views::{self, ViewOptions};
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
    pub(crate) caps: Capabilities,
    /// Each layer's settings, derived from `config`.
    pub(crate) cfg: LayerConfigs,
    pub(crate) topo: Topology,
    pub(crate) gossip: Gossip,
    pub(crate) state: ClusterState,
    /// Epochs, elections, manual failover, configuration propagation.
    pub(crate) epoch: Epoch,
    /// Atomic slot migration jobs.
    pub(crate) migrations: Migrations,
    pub(crate) rng: ChaCha8Rng,
    /// The framer of every link, and the local address of accepted ones.
    pub(crate) links: BTreeMap<LinkId, LinkIo>,
    pub(crate) queue: OutputQueue,
    /// The effects of the current input, drained by [`ClusterNode::finish`].
    pub(crate) step: Step,
    pub(crate) checks: Checks,
    pub(crate) last_now: Millis,
    pub(crate) next_cron: Millis,
    pub(crate) persist_seq: u64,
    /// What the latest queued `Persist` said of the epochs and myself's role (`None` before
    /// the first): a local change that keeps them is saved without fsync.
    pub(crate) saved_vars: Option<SavedVars>,
    pub(crate) stats: MessageStats,
    /// The host's send-buffer figures per link, bytes (allocated, used); see
    /// [`ClusterNode::handle_link_send_buffer`].
    pub(crate) send_buffers: std::collections::HashMap<LinkId, (u64, u64)>,
    /// Links the host freed over `cluster-link-sendbuf-limit` (cumulative, from the host).
    pub(crate) links_buffer_limit_exceeded: u64,
    /// Myself's replication as the host reported it.
    pub(crate) repl: Replication,
    /// End of the manual failover's write pause (epoch layer), if one holds.
    pub(crate) mf_pause: Option<Millis>,
    /// End of the slot migrations' write pause, if one holds.
    pub(crate) asm_pause: Option<Millis>,
    /// Slots whose keys the host may hold: myself's slots, importing ones, every slot while
    /// myself is a replica (its data is its primary's, whatever that held), minus the slots
    /// the host was told to empty. See [`ClusterNode::sweep_stale_keys`].
    pub(crate) key_slots: SlotSet,
}

/// The settings of each layer, derived from the [`ClusterConfig`].
#[derive(Debug, Clone)]
pub(crate) struct LayerConfigs {
    pub(crate) gossip: GossipConfig,
    pub(crate) failure: FailureConfig,
    pub(crate) state: StateConfig,
    pub(crate) epoch: EpochConfig,
    pub(crate) health: HealthConfig,
}

impl LayerConfigs {
    fn of(c: &ClusterConfig) -> LayerConfigs {
        LayerConfigs {
            gossip: c.gossip_config(),
            failure: c.failure_config(),
            state: c.state_config(),
            epoch: c.epoch_config(),
            health: c.health_config(),
        }
    }
}

/// One bus link's framer, and the local address of an accepted link when the host gave it.
#[derive(Debug)]
pub(crate) struct LinkIo {
    pub(crate) decoder: FrameDecoder,
    /// Own-IP learning.
    pub(crate) local_ip: Option<IpAddr>,
}

impl LinkIo {
    fn new() -> LinkIo {
        LinkIo {
            decoder: FrameDecoder::new(),
            local_ip: None,
        }
    }
}

/// Myself's replication as the host reported it.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Replication {
    /// The last report ([`ClusterNode::handle_replication`]).
    pub(crate) state: ReplicationState,
    /// Whether the host ever reported.
    pub(crate) reported: bool,
    /// Where myself stands with the first sync from the primary it was last pointed at
    /// ([`ClusterNode::advertised_replication`]).
    pub(crate) sync: ReplSync,
    /// What the host was last told to replicate from (the last staged
    /// [`Output::ReplicateFrom`]); `None` on a primary and on a node that was never told
    /// (one loaded from nodes.conf as a replica: the cron tells it).
    pub(crate) pointed: Option<Pointed>,
}

/// The primary and address of the last [`Output::ReplicateFrom`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pointed {
    pub(crate) primary: NodeId,
    pub(crate) ip: Option<std::net::IpAddr>,
    pub(crate) port: u16,
    pub(crate) tls_port: u16,
    /// The `full_sync` it carried (kept when the same primary's address is re-sent).
    pub(crate) full_sync: bool,
}

impl Pointed {
    /// Whether `self` points at the same primary at the same address as `other`.
    pub(crate) fn same_target(&self, other: &Pointed) -> bool {
        (self.primary, self.ip, self.port, self.tls_port)
            == (other.primary, other.ip, other.port, other.tls_port)
    }
}

impl ClusterNode {
    /// Builds a node from `config` at `now` with randomness from `seed`, either with a fresh
    /// identity or from the contents of a previously saved nodes.conf. `caps` says what the
    /// host can do beside the bus ([`Capabilities`]). A `Persist` output (seq 1) is queued at
    /// once: Valkey writes the config at startup (`clusterInit`), so a new node's ID survives
    /// a crash right after it. Skipped parts of the saved file (aux fields a newer node
    /// wrote) come out as [`Notice::NodesConfWarning`]s before it.
    ///
    /// Identity: a fresh node's ID and shard ID are the first two draws (20 bytes each, as
    /// hex) of the ChaCha8 generator seeded with `seed`, and the node's other randomness
    /// follows from it; a node loaded from nodes.conf keeps the ID of its `myself` line. So
    /// two nodes built with the same seed and no saved file get the same ID, as do two nodes
    /// loading copies of one nodes.conf. A host MUST give every node its own seed (drawn
    /// from the OS RNG, say) and its own file, and SHOULD hold an exclusive lock on that file
    /// for the process lifetime (Valkey `clusterLockConfig`). Two nodes that share an ID
    /// anyway refuse each other's messages and report it ([`Notice::NodeIdCollision`]);
    /// myself's address is never taken from a peer.
    ///
    /// # Errors
    /// [`NodeError::Config`] from [`ClusterConfig::validate`] or
    /// [`Capabilities::validate`]; [`NodeError::NodesConf`] when the saved text does not
    /// load. An empty `saved_nodes_conf` means "start fresh".
    pub fn new(
        config: ClusterConfig,
        caps: Capabilities,
        now: Millis,
        seed: u64,
        saved_nodes_conf: Option<&[u8]>,
    ) -> Result<ClusterNode, NodeError> {
        config.validate()?;
        caps.validate()?;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let saved = saved_nodes_conf.filter(|b| !b.is_empty());
        let (mut topo, warnings) = match saved {
            Some(text) => {
                load_nodes_conf_with_warnings(text, now, &mut rng, LoadOptions::default())?
            }
            None => (Topology::fresh(&mut rng, now), Vec::new()),
        };
        for n in topo.nodes_mut().filter(|n| !n.is_myself()) {
            n.link = LinkState::Disconnected;
        }
        apply_config_to_myself(&mut topo, &config);
        let checks = Checks::new(&topo, saved.is_some());
        let migrations = Migrations::new(config.migration_config(), now);
        let mut node = ClusterNode {
            cfg: LayerConfigs::of(&config),
            config,
            caps,
            topo,
            gossip: Gossip::new(),
            state: ClusterState::new(),
            epoch: Epoch::new(),
            migrations,
            rng,
            links: BTreeMap::new(),
            queue: OutputQueue::default(),
            step: Step::default(),
            checks,
            last_now: now,
            next_cron: now,
            persist_seq: 0,
            saved_vars: None,
            stats: MessageStats::default(),
            send_buffers: std::collections::HashMap::new(),
            links_buffer_limit_exceeded: 0,
            repl: Replication::default(),
            mf_pause: None,
            asm_pause: None,
            key_slots: SlotSet::new(),
        };
        for w in warnings {
            node.step.notice(Notice::NodesConfWarning(w));
        }
        node.step.save();
        node.step.update_state();
        node.finish(now);
        Ok(node)
    }

    /// Clamps `now` to the latest time seen: a clock that steps back is held where it was
    /// (timers wait until it catches up), never a panic.
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
        self.accept(peer_ip, None, now)
    }

    /// Like [`ClusterNode::handle_accept`], with the local address of the accepted
    /// connection (`getsockname`). Without `cluster-announce-ip`, a MEET arriving on this link
    /// (or any PING while myself has no IP yet) sets myself's IP to `local_ip` (Valkey
    /// `clusterProcessPacket`, "own IP discovery"), saved to nodes.conf, with
    /// [`Notice::MyIpChanged`]. A host that knows the local address SHOULD use this one.
    pub fn handle_accept_local(
        &mut self,
        peer_ip: IpAddr,
        local_ip: IpAddr,
        now: Millis,
    ) -> LinkId {
        self.accept(peer_ip, Some(local_ip), now)
    }

    fn accept(&mut self, peer_ip: IpAddr, local_ip: Option<IpAddr>, now: Millis) -> LinkId {
        let now = self.clamp(now);
        let link = self
            .gossip
            .links
            .open(LinkDirection::Inbound, None, Some(peer_ip), now);
        let mut io = LinkIo::new();
        io.local_ip = local_ip;
        self.links.insert(link, io);
        link
    }

    /// The host's send-buffer figures of `link`, bytes: CLUSTER LINKS
    /// `send-buffer-allocated` and `send-buffer-used` (Redis 7.0 `sdsalloc` / `sdslen` of the
    /// link's buffer), and `w` in its `events` while `used` > 0. A host SHOULD report them
    /// whenever they change (`ferrocluster-host`'s bus driver does); unreported links show 0,
    /// Redis 7.0's idle value (Valkey 8+ shows its empty queue's 48 bytes). Figures of a link
    /// the node does not know are ignored; (0, 0) forgets the link's entry.
    pub fn handle_link_send_buffer(&mut self, link: LinkId, allocated: u64, used: u64) {
        if allocated == 0 && used == 0 {
            self.send_buffers.remove(&link);
        } else if self.gossip.links.get(link).is_some() {
            self.send_buffers.insert(link, (allocated, used));
        }
    }

    /// The number of links the host freed because their send buffer passed
    /// `cluster-link-sendbuf-limit` (`ClusterConfig::link_sendbuf_limit_bytes`), since start:
    /// CLUSTER INFO `total_cluster_links_buffer_limit_exceeded` (Valkey
    /// `freeClusterLinkOnBufferLimitReached`). The host enforces the limit, reports each
    /// such link with [`LinkEvent::Closed`], and gives its running total here (a lower value
    /// than before is ignored).
    pub fn handle_links_buffer_limit_exceeded(&mut self, total: u64) {
        self.links_buffer_limit_exceeded = self.links_buffer_limit_exceeded.max(total);
    }

    /// The host reports a link event. Events for links the node does not know (never opened,
    /// or already closed with [`Output::Close`]) are ignored, so a host may report a close or
    /// a connect result that raced with the node's own `Close`.
    pub fn handle_link(&mut self, event: LinkEvent, now: Millis) {
        let now = self.clamp(now);
        let mut out = Vec::new();
        match event {
            LinkEvent::Connected(link) => {
                self.gossip.handle_connected(
                    &mut self.topo,
                    &self.cfg.gossip,
                    link,
                    now,
                    &mut self.rng,
                    &mut out,
                );
            }
            LinkEvent::ConnectFailed(link) => {
                self.gossip
                    .handle_link_closed(&mut self.topo, link, true, now);
                self.links.remove(&link);
            }
            LinkEvent::Closed(link) => {
                self.gossip
                    .handle_link_closed(&mut self.topo, link, false, now);
                self.links.remove(&link);
            }
        }
        self.apply_gossip_effects(out, now);
        self.finish(now);
    }

    /// Bytes arrived on `link`, in stream order and split anywhere. The node frames the
    /// stream itself: every whole frame is decoded and processed; a frame that fails to
    /// decode is dropped and counted (nothing else changes, [`Notice::FrameDropped`]); lost
    /// framing closes the link ([`Output::Close`], then [`Notice::FramingLost`]). Bytes for
    /// an unknown link are ignored.
    pub fn handle_link_bytes(&mut self, link: LinkId, bytes: &[u8], now: Millis) {
        let now = self.clamp(now);
        let Some(io) = self.links.get_mut(&link) else {
            return;
        };
        io.decoder.push(bytes);
        while let Some(io) = self.links.get_mut(&link) {
            match io.decoder.next_message() {
                Ok(Some(mut msg)) => {
                    if self.cfg.gossip.tls_cluster {
                        // Valkey's wire order with tls-cluster yes (`ClusterConfig::tls_cluster`).
                        msg.swap_tls_ports();
                    }
                    MessageStats::count(&mut self.stats.received, msg.message_type());
                    self.process_message(link, &msg, now);
                }
                Ok(None) => break,
                Err(error) if error.framing_lost() => {
                    self.stats.framing_lost += 1;
                    self.links.remove(&link);
                    self.gossip
                        .handle_link_closed(&mut self.topo, link, false, now);
                    self.step.push(Output::Close { link });
                    self.step.notice(Notice::FramingLost { link, error });
                    break;
                }
                Err(error) => {
                    self.stats.dropped_frames += 1;
                    self.step.notice(Notice::FrameDropped { link, error });
                }
            }
        }
        self.finish(now);
    }

    /// Runs the timers due at `now` (the 100 ms cron, Valkey `clusterCron`: pings,
    /// reconnects, handshake expiry, PFAIL marking, cluster state, elections; the slot
    /// migration timers: heartbeats, inactivity, pause deadlines). Calling it early or twice
    /// is harmless.
    ///
    /// The host MUST call it once [`ClusterNode::poll_timeout`] has passed, also while input
    /// keeps arriving (a loop that always finds bytes ready still checks the deadline every
    /// turn: PINGs, PFAIL and elections run only here). A clock step forward runs the due
    /// timers once (a jump past `cluster-node-timeout` can mark silent peers PFAIL, as in
    /// Valkey); a step back is clamped, and timers wait until the clock passes the latest
    /// time seen again.
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
            &self.cfg.gossip,
            now,
            &mut self.rng,
            &mut out,
        );
        self.apply_gossip_effects(out, now);
        let mut fout = Vec::new();
        failure::check_pfail(&mut self.topo, now, &self.cfg.failure, &mut fout);
        self.apply_failure_effects(fout, now);
        // The epoch layer (manual failover timeout, election, replica migration).
        self.epoch_cron(now);
        // A replica whose host does not replicate from its primary yet.
        self.replication_cron();
        // Re-evaluated when something changed (effects mark the step) or, every run, while
        // the state is FAIL so its delays expire on time.
        if self.state.needs_cron_update() {
            self.step.update_state();
        }
        self.finish(now);
    }

    /// The host loaded its data set at start-up (RDB or AOF) and `slots` hold keys (any
    /// database); call it once, before serving clients. Valkey `verifyClusterConfigWithData`
    /// (`src/cluster.c`): on a primary, each of those slots that no node owns is taken by
    /// myself (saved; [`Notice::UnassignedSlotsClaimed`]), and each that another node owns
    /// and myself does not import (no IMPORTING mark) has its keys deleted: an
    /// [`Output::DeleteSlotKeys`] at the end of this step (Valkey 8+ "Deleting keys in the
    /// slot"; Redis 7.0 marked the slot importing instead: we follow Valkey 9). A replica's
    /// data is its primary's: nothing is checked.
    pub fn handle_keys_loaded(&mut self, slots: &SlotSet, now: Millis) {
        let now = self.clamp(now);
        if self.topo.myself().is_primary() {
            let unassigned: SlotSet = slots
                .iter()
                .filter(|s| self.topo.slot_owner(*s).is_none())
                .collect();
            if !unassigned.is_empty() {
                self.assign_slots_to_myself(&unassigned);
                self.step
                    .notice(Notice::UnassignedSlotsClaimed(Box::new(unassigned)));
            }
            // The end of the step's sweep deletes those another node owns.
            self.key_slots = self.key_slots.union(slots);
        }
        self.finish(now);
    }

    /// The host has durably written every `Persist` output up to `seq` (cumulative). Held
    /// transmits and replies that waited for it become pollable.
    pub fn handle_persisted(&mut self, seq: u64) {
        self.queue.acknowledge(seq);
        self.checks.persisted(seq);
    }

    /// Applies a changed configuration at run time (CONFIG SET of a `cluster-*` option): every
    /// layer takes the new values at once (node timeout, ping interval, failure report
    /// validity, coverage rule, replica validity, migration barrier, manual failover timeout,
    /// slot migration log length, routing options), and myself's announced values (ports,
    /// hostname, human nodename, client IPs, NOFAILOVER) change in the topology, saved with a
    /// `Persist` and gossiped with the next messages, as Valkey's config callbacks
    /// (`updateClusterHostname`, `updateClusterAnnouncedPort`, `updateClusterFlags`, ...) do.
    /// The `+OK` of the CONFIG SET is `to`'s: [`crate::CommandOutcome::Deferred`] when the
    /// change was saved (the reply comes as [`Output::Reply`] once durable), else
    /// [`crate::CommandOutcome::Reply`] now.
    ///
    /// The host MUST keep `port`, `tls_port` and `cluster_port` as they were: the sockets are
    /// the host's, so those options are immutable at run time (as in Valkey).
    ///
    /// # Errors
    /// [`NodeError::Config`] from [`ClusterConfig::validate`]; nothing changed then.
    pub fn set_config(
        &mut self,
        config: ClusterConfig,
        to: crate::RequestId,
        now: Millis,
    ) -> Result<crate::CommandOutcome, NodeError> {
        config.validate()?;
        let now = self.clamp(now);
        self.cfg = LayerConfigs::of(&config);
        self.migrations.set_config(config.migration_config());
        apply_config_to_myself(&mut self.topo, &config);
        self.config = config;
        self.step.local();
        self.step.save();
        self.step.update_state();
        self.step.reply(to, ferrocluster_topology::Reply::ok());
        Ok(self.finish_command(now))
    }

    // ----- outputs -----

    /// The next instruction for the host, in order; `None` when there is nothing (more) to do
    /// now. Drain it after every input.
    pub fn poll_output(&mut self) -> Option<Output> {
        let (o, tag) = self.queue.pop()?;
        self.checks.left(tag);
        if let Output::ReplicateFrom { .. } = &o {
            // The host has seen the re-point: what it reports from now on is about the new
            // primary ([`ClusterNode::advertised_replication`]).
            if self.repl.sync == ReplSync::Pending {
                self.repl.sync = ReplSync::Polled;
            }
        }
        Some(o)
    }

    /// When [`ClusterNode::handle_timeout`] must be called next (absolute Unix ms): the next
    /// cron run or the slot migration engine's next deadline, whichever is first. Always
    /// `Some` (the cron never stops); it may lie in the past.
    pub fn poll_timeout(&self) -> Option<Millis> {
        Some(match self.migrations.poll_timeout() {
            Some(t) => t.min(self.next_cron),
            None => self.next_cron,
        })
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

    /// What the host declared it can do.
    pub fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    /// Whether the cluster state is `ok` (Valkey `clusterUpdateState`).
    pub fn cluster_state_ok(&self) -> bool {
        self.state.is_ok()
    }

    /// Message counters.
    pub fn stats(&self) -> &MessageStats {
        &self.stats
    }

    /// The CLUSTER INFO text.
    pub fn cluster_info(&self) -> String {
        views::cluster_info_text(&self.topo, &self.info_inputs())
    }

    /// The CLUSTER NODES text as a plain-TCP IPv4 client sees it.
    pub fn cluster_nodes(&self) -> String {
        views::cluster_nodes_text(&self.topo, &ViewOptions::default())
    }

    /// The nodes.conf text the next `Persist` would carry (Valkey `clusterGenNodesDescription`
    /// plus the `vars` line).
    pub fn nodes_conf(&self) -> String {
        save_nodes_conf(&self.topo)
    }

    /// The number of valid failure reports about `id` (`CLUSTER COUNT-FAILURE-REPORTS`);
    /// `None` for an unknown node. Expired reports are not counted.
    pub fn failure_report_count(&self, id: &NodeId, now: Millis) -> Option<usize> {
        let validity = self.cfg.failure.report_validity_ms();
        self.topo.node(id).map(|n| {
            n.failure_reports
                .values()
                .filter(|t| now.since(**t) <= validity)
                .count()
        })
    }

    /// Checks the node's invariants; they hold after every input whatever the inputs were,
    /// so an `Err` is a bug in the engine (the simulator checks after every step, the fuzz
    /// targets after every input). Cheap: the transitions are checked as they happen (at
    /// each step end and as each output leaves) and the first broken one is kept.
    ///
    /// 1. A vote (FAILOVER_AUTH_ACK) or an auth request (FAILOVER_AUTH_REQUEST) never leaves
    ///    [`ClusterNode::poll_output`] before the persist that holds its lastVoteEpoch /
    ///    currentEpoch is acknowledged.
    /// 2. currentEpoch, myself's configEpoch and lastVoteEpoch never go down (CLUSTER RESET
    ///    HARD, which zeroes them, excepted).
    /// 3. At most one vote per epoch: each vote that leaves is for a higher epoch than the
    ///    one before.
    /// 4. No slot is owned by two nodes with the same configEpoch in myself's view: a slot of
    ///    myself's goes to another node on a peer's word (not a command of the host's) only
    ///    when that node's configEpoch is above myself's.
    /// 5. Myself's own record is never rewritten by a peer: its address and ports change only
    ///    through the host's commands and own-IP discovery; it is PRIMARY xor REPLICA and
    ///    never PFAIL, FAIL, in handshake or without an address.
    ///
    /// # Errors
    /// The first violation found since the node was built.
    pub fn invariants(&self) -> Result<(), InvariantViolation> {
        match self.checks.violation() {
            Some(v) => Err(v.clone()),
            None => Ok(()),
        }
    }

    // ----- internals -----

    pub(crate) fn process_message(&mut self, link: LinkId, msg: &Message, now: Millis) {
        self.learn_own_ip(link, msg);
        // The sender's role before anything in this message changes it.
        let prior = self
            .gossip
            .message_sender(&self.topo, link, msg)
            .map(|s| PriorRole::of(&self.topo, &s))
            .unwrap_or_default();
        let mut out = Vec::new();
        let received = self.gossip.handle_message(
            &mut self.topo,
            &self.cfg.gossip,
            link,
            msg,
            now,
            &mut self.rng,
            &mut out,
        );
        self.apply_gossip_effects(out, now);
        let sender = received.sender();
        // A paused primary's final offset (manual failover).
        if let (Some(s), Some(h)) = (sender, msg.full_header()) {
            self.epoch.handle_primary_offset(
                &self.topo,
                &s,
                h.has_mflags(msg_flags::PAUSED),
                h.offset,
            );
        }
        // The epoch layer's part of PING/PONG/MEET, then the gossip section and extensions.
        if let (Received::Claims(s), Some(h)) = (received, msg.full_header()) {
            self.apply_ping_claims(link, &s, h, prior, now);
            let mut out = Vec::new();
            self.gossip.handle_message_gossip(
                &mut self.topo,
                &self.cfg.gossip,
                &s,
                msg,
                now,
                &mut out,
            );
            self.apply_gossip_effects(out, now);
        }
        let Some(from) = sender else { return };
        match &msg.body {
            Body::Fail { about } => {
                if let Ok(id) = NodeId::from_bytes(about.as_bytes()) {
                    let mut fout = Vec::new();
                    failure::handle_fail_message(&mut self.topo, &id, now, &mut fout);
                    self.apply_failure_effects(fout, now);
                }
            }
            Body::FailoverAuthRequest | Body::FailoverAuthAck | Body::MfStart | Body::Update(_) => {
                if let Some(h) = msg.full_header() {
                    self.handle_epoch_message(link, &from, h, &msg.body, now);
                }
            }
            // Pub/Sub and module messages.
            _ => self.deliver_bus_message(from, &msg.body),
        }
    }

    /// Own-IP discovery on a PING/MEET received on an accepted link whose local address the
    /// host gave ([`ClusterNode::handle_accept_local`]).
    fn learn_own_ip(&mut self, link: LinkId, msg: &Message) {
        if self.config.announce_ip.is_some() {
            return;
        }
        let t = msg.message_type();
        let wanted =
            t == MessageType::Meet || (t == MessageType::Ping && self.topo.myself().ip.is_none());
        let Some(ip) = self.links.get(&link).and_then(|l| l.local_ip) else {
            return;
        };
        if wanted && msg.full_header().is_some() && self.topo.myself().ip != Some(ip) {
            self.topo.myself_mut().ip = Some(ip);
            self.step.save();
            self.step.learned_ip();
            self.step.notice(Notice::MyIpChanged(ip));
        }
    }

    /// Stages `message` on `link`. While myself is a primary serving a manual failover every
    /// full header carries mflags PAUSED; after an epoch `Persist` in this step the transmit
    /// waits for that persist.
    pub(crate) fn transmit(&mut self, link: LinkId, message: &Message, tag: Tag) {
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
        self.step.transmit(Output::Transmit { link, bytes }, tag);
    }

    pub(crate) fn apply_gossip_effects(&mut self, effects: Vec<GossipEffect>, now: Millis) {
        for e in effects {
            match e {
                GossipEffect::Connect { link, ip, port, .. } => {
                    self.links.insert(link, LinkIo::new());
                    self.step.push(Output::Connect { link, ip, port });
                }
                GossipEffect::Send { link, message } => self.transmit(link, &message, Tag::None),
                GossipEffect::Close { link } => {
                    self.links.remove(&link);
                    self.step.push(Output::Close { link });
                }
                GossipEffect::Save => self.step.save(),
                GossipEffect::UpdateState => self.step.update_state(),
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
                        &self.cfg.failure,
                        &mut fout,
                    );
                    self.apply_failure_effects(fout, now);
                }
                GossipEffect::PongReceived(id) => {
                    let mut fout = Vec::new();
                    failure::handle_pong(&mut self.topo, &id, now, &self.cfg.failure, &mut fout);
                    self.apply_failure_effects(fout, now);
                }
                GossipEffect::HandshakeCompleted(id) => {
                    // The node now counts with its real role flags.
                    self.step.update_state();
                    self.step.notice(Notice::HandshakeCompleted(id));
                }
                GossipEffect::NodeDiscovered(id) => self.step.notice(Notice::NodeDiscovered(id)),
                GossipEffect::NodeDeleted(id) => self.step.notice(Notice::NodeDeleted(id)),
                GossipEffect::IdCollision { link, mine, peer } => {
                    self.step.notice(Notice::NodeIdCollision {
                        id: *self.topo.myself_id(),
                        link,
                        mine,
                        peer,
                    });
                }
            }
        }
    }

    pub(crate) fn apply_failure_effects(&mut self, effects: Vec<FailureEffect>, now: Millis) {
        let my_primary = self.topo.myself().primary;
        let mut primary_failed = false;
        for e in effects {
            self.step.update_state();
            let n = match e {
                FailureEffect::MarkedPfail(id) => Notice::NodePfail(id),
                FailureEffect::MarkedFail { node, broadcast } => {
                    primary_failed |= Some(node) == my_primary;
                    self.step.save();
                    if broadcast {
                        self.broadcast_fail(&node);
                    }
                    Notice::NodeFail(node)
                }
                FailureEffect::PfailCleared(id) => Notice::NodePfailCleared(id),
                FailureEffect::FailCleared(id) => {
                    self.step.save();
                    Notice::NodeFailCleared(id)
                }
            };
            self.step.notice(n);
        }
        // My primary just failed: schedule the election now, not at the next cron run
        // (Valkey 9.0 PR #2209, `clusterDoBeforeSleep(CLUSTER_TODO_HANDLE_FAILOVER)`), so a
        // best-ranked replica that may elect at once does.
        if primary_failed {
            self.run_failover(now);
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
                self.transmit(link, &message, Tag::None);
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
                &self.cfg.gossip,
                &id,
                kind,
                now,
                &mut self.rng,
                &mut out,
            );
        }
        self.apply_gossip_effects(out, now);
    }

    /// Ends a command's step ([`ClusterNode::finish`]) and says where its reply is: now,
    /// or — when the step saved the configuration — as an [`Output::Reply`] held until that
    /// persist is acknowledged.
    pub(crate) fn finish_command(&mut self, now: Millis) -> crate::CommandOutcome {
        match self.finish(now) {
            Some(reply) => crate::CommandOutcome::Reply(reply),
            None => crate::CommandOutcome::Deferred,
        }
    }

    /// Ends a step: re-evaluates the cluster state if needed, then releases the step's
    /// outputs into the queue — a `Persist` first when the config changed, and, when the
    /// change must be durable before anyone hears of it, the transmits held until that
    /// persist is acknowledged. The step's reply comes back when the step saved nothing
    /// (it may be sent now); otherwise it waits in the queue for the persist and `None` is
    /// returned.
    pub(crate) fn finish(&mut self, now: Millis) -> Option<ferrocluster_topology::Reply> {
        self.pump_migrations(now);
        self.sweep_stale_keys();
        if self.step.take_state_dirty() {
            if let Some(h) = self.state.update(&self.topo, now, &self.cfg.state) {
                self.step
                    .notice(Notice::ClusterStateChanged(h == failure::ClusterHealth::Ok));
            }
            self.gossip.state_byte = self.state.health().wire();
        }
        let step = self.step.drain();
        let mut gate = None;
        if step.save {
            self.persist_seq += 1;
            let contents = save_nodes_conf(&self.topo).into_bytes();
            self.checks.persist_queued(self.persist_seq, &self.topo);
            let vars = SavedVars::of(&self.topo);
            let fsync = !step.local || self.saved_vars.as_ref() != Some(&vars);
            self.saved_vars = Some(vars);
            self.queue.push(
                Output::Persist {
                    seq: self.persist_seq,
                    contents,
                    fsync,
                },
                Tag::None,
            );
            gate = Some(self.persist_seq);
        }
        // A gated entry without a persist in this step (cannot happen: every gate comes with a
        // save) waits for the latest persist instead.
        let seq = gate.unwrap_or(self.persist_seq);
        let mut outputs = step.outputs;
        for (gated, o, tag) in outputs.drain(..) {
            let hold = gated || (step.durable_first && matches!(o, Output::Transmit { .. }));
            if hold && seq > self.queue.persisted() {
                self.queue.push_after_persist(seq, o, tag);
            } else {
                self.queue.push(o, tag);
            }
        }
        self.step.recycle(outputs);
        self.checks
            .step_end(&self.topo, step.local, step.learned_ip);
        let (to, reply) = step.reply?;
        match gate {
            Some(seq) => {
                self.queue.push_reply(seq, Output::Reply { to, reply });
                None
            }
            None => Some(reply),
        }
    }

    /// Keys of a slot another node owns must not stay on a primary (Valkey deletes the keys
    /// of slots it lost on a config update, `clusterUpdateSlotsConfigWith`, and of slots
    /// assigned to another node at startup, `verifyClusterConfigWithData`). At the end of
    /// every step: while myself is a replica its data is its primary's, so every slot may
    /// hold keys; while a primary, the slots of [`ClusterNode::key_slots`] that another node
    /// owns now — not myself's, not importing (a legacy IMPORTING mark or an atomic slot
    /// migration's hidden slots), not unassigned — get one [`Output::DeleteSlotKeys`]. This
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
            self.step.push(Output::DeleteSlotKeys(Box::new(stale)));
        }
    }

    /// The host was told to empty `slots` (a dirty-slot deletion, a slot migration's drop).
    pub(crate) fn slot_keys_deleted(&mut self, slots: &SlotSet) {
        self.key_slots = self.key_slots.difference(slots);
    }

    /// The full header of every message myself sends now, with mflags PAUSED while myself is
    /// a primary serving a manual failover (messages the gossip layer builds get it in
    /// [`ClusterNode::transmit`]).
    pub(crate) fn header(&self) -> ferrocluster_bus::FullHeader {
        let mut h =
            ferrocluster_gossip::build_header(&self.topo, &self.cfg.gossip, self.gossip.state_byte);
        if self.epoch.paused_for_manual_failover(&self.topo) {
            h.mflags[0] |= msg_flags::PAUSED;
        }
        h
    }
}

/// Myself's first sync with the primary it follows (issue 16 item 14, BUG-08).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum ReplSync {
    /// Synced, or a primary: the host's offset is advertised.
    #[default]
    Synced,
    /// Re-pointed (`ReplicateFrom` staged, not yet polled): reports still describe the old
    /// link.
    Pending,
    /// The host polled the `ReplicateFrom`; the first report with the link up ends it.
    Polled,
}

/// Writes the configured announce values into myself's record (ports, hostname, names, client
/// IPs, NOFAILOVER, LIGHT_HDR_SUPPORTED which V8 always advertises).
pub(crate) fn apply_config_to_myself(topo: &mut Topology, c: &ClusterConfig) {
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

/// The part of nodes.conf whose change a `Persist` must fsync even for a CLUSTER command
/// (see `Output::Persist::fsync`): the epochs and myself's role and primary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SavedVars {
    epochs: crate::checks::Epochs,
    primary: bool,
    replica_of: Option<NodeId>,
}

impl SavedVars {
    fn of(topo: &Topology) -> SavedVars {
        let me = topo.myself();
        SavedVars {
            epochs: crate::checks::Epochs::of(topo),
            primary: me.flags.contains(NodeFlags::PRIMARY),
            replica_of: me.primary,
        }
    }
}

//! The CLUSTER command executor: every subcommand parsed by `ferrocluster-command` runs here
//! against the node's state, with Valkey 8's replies and error texts (facts sheet §15, §16,
//! §19; slot-migration sheet C.2–C.4, D.6; captured replies in `vectors/*/text/`).

use crate::keys::{keys_in_slot_all_dbs, SlotKeys};
use crate::{ClusterNode, Event, PreferredEndpoint};
use ferrocluster_command::check::{
    check_forget, check_known_node, check_replicas, check_replicate, check_setslot,
    check_slot_assignments,
};
use ferrocluster_command::{
    parse_cluster, ClientState, ClusterCommand, ClusterError, ErrorReply, FailoverMode,
    ParseOptions, SetSlot, SetSlotAction, SlotStatsMetric, SlotStatsQuery, CLUSTER_HELP,
};
use ferrocluster_epoch::{FailoverError, SetConfigEpochError};
use ferrocluster_migration::is_migration_subcommand;
use ferrocluster_migration::legacy::{apply_setslot, check_setslot_allowed, LegacyAction};
use ferrocluster_slot::{Slot, SlotSet};
use ferrocluster_topology::views::{self, EndpointType, InfoInputs, LinkDirection, LinkInfo};
use ferrocluster_topology::{Millis, NodeId, Reply};

/// Who sent a CLUSTER command and how: the per-connection facts the executor needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct CommandRequest {
    /// The client's selected database (COUNTKEYSINSLOT, GETKEYSINSLOT, RESET, SLOT-STATS).
    pub db: usize,
    /// The client connection uses TLS: views show TLS ports (§19.1).
    pub tls: bool,
    /// The client connection is IPv6: views show announced client IPv6 addresses (§19.1).
    pub ipv6: bool,
    /// The command came over the replication link from my primary (Valkey `mustObeyClient`):
    /// SETSLOT is then accepted on a replica and applied at once (§15).
    pub from_primary: bool,
    /// The host already replicated this SETSLOT to its replicas and they acknowledged it
    /// (the second call after [`CommandOutcome::ReplicateFirst`]): apply it now.
    pub replication_done: bool,
    /// The host's handle of the connection the command came on (slot migration): a
    /// `CLUSTER SYNCSLOTS ESTABLISH` binds the import job to it, and later SYNCSLOTS messages
    /// on it are matched to that job. `None` (the default): SYNCSLOTS from a client is
    /// refused with [`crate::MSG_SYNCSLOTS_NO_CONN`] (the other ASM subcommands do not need
    /// it).
    pub conn: Option<ferrocluster_migration::ConnId>,
    /// The command is replayed from the AOF (slot migration: a SYNCSLOTS ESTABLISH / FINISH
    /// then tracks an import without side effects, sheet A.16).
    pub from_aof: bool,
}

impl CommandRequest {
    /// The request facts of a client connection: its database, TLS, IPv6 and whether it is
    /// the primary's replication link.
    pub fn from_client(client: &ClientState) -> CommandRequest {
        CommandRequest {
            db: client.db(),
            tls: client.tls(),
            ipv6: client.ipv6(),
            from_primary: client.is_primary_link(),
            replication_done: false,
            conn: None,
            from_aof: false,
        }
    }
}

/// The result of [`ClusterNode::cluster_command`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CommandOutcome {
    /// Send this reply to the client (encode with `Reply::encode_resp2`/`encode_resp3`).
    Reply(Reply),
    /// Valkey 8 SETSLOT on a primary that has replicas (§15, slot-migration sheet C.2):
    /// nothing was applied yet. The host MUST propagate the command to its replicas over
    /// replication, block the client until every eligible replica (online, Valkey ≥ 8)
    /// acknowledged that offset, then call [`ClusterNode::cluster_command`] again with the
    /// same command and [`CommandRequest::replication_done`] set. If `deadline` (Unix ms;
    /// `None` = wait forever, `TIMEOUT 0`) passes first, the host replies
    /// `-NOREPLICAS Not enough good replicas to write.` ([`ClusterError::NoReplicas`]) and the
    /// change is not applied. A host with no eligible replica calls again at once.
    ReplicateFirst {
        /// When to give up waiting for the acknowledgements.
        deadline: Option<Millis>,
    },
    /// Send nothing back: a `CLUSTER SYNCSLOTS` message on a slot migration link (Valkey
    /// replies only to ESTABLISH and FINISH, slot-migration sheet A.5).
    NoReply,
}

impl CommandOutcome {
    /// The reply, if this outcome is one.
    pub fn reply(&self) -> Option<&Reply> {
        match self {
            CommandOutcome::Reply(r) => Some(r),
            CommandOutcome::ReplicateFirst { .. } | CommandOutcome::NoReply => None,
        }
    }
}

/// A CLUSTER FAILOVER accepted on a replica (§13.1). The epoch layer runs the failover at
/// once (MFSTART, FORCE election, TAKEOVER; see [`ClusterNode::epoch`] for its progress);
/// this record of the request stays readable with [`ClusterNode::manual_failover_request`]
/// until taken or until myself's role changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ManualFailoverRequest {
    /// Default, FORCE or TAKEOVER.
    pub mode: FailoverMode,
    /// When it was requested (Unix ms).
    pub requested_at: Millis,
    /// `mf_end`: requested_at + `cluster-manual-failover-timeout` (§13.1).
    pub deadline: Millis,
}

/// A [`ClusterError`] as a protocol-neutral error reply (the exact text, code first).
pub fn error_reply(e: &impl ErrorReply) -> Reply {
    Reply::Error(String::from_utf8_lossy(&e.text()).into_owned())
}

type Res = Result<Reply, ClusterError>;

impl ClusterNode {
    /// The options [`parse_cluster`] needs for this node and keyspace
    /// (`cluster-slot-stats-enabled` from [`SlotKeys::slot_stats_enabled`]).
    pub fn parse_options(&self, keys: &dyn SlotKeys) -> ParseOptions {
        ParseOptions {
            slot_stats_enabled: keys.slot_stats_enabled(),
        }
    }

    /// Parses `CLUSTER <subcommand> ...` and executes it ([`ClusterNode::cluster_command`]);
    /// a parse error becomes its exact error reply. The Valkey 9 atomic slot migration
    /// subcommands (MIGRATESLOTS, GETSLOTMIGRATIONS, CANCELSLOTMIGRATIONS, SYNCSLOTS) go to
    /// [`ClusterNode::migration_command`] with the origin `req` gives (`from_aof`,
    /// `from_primary`, else [`CommandRequest::conn`]); a SYNCSLOTS message on a migration
    /// link gives [`CommandOutcome::NoReply`].
    pub fn cluster_command_argv<A: AsRef<[u8]>>(
        &mut self,
        argv: &[A],
        req: &CommandRequest,
        keys: &dyn SlotKeys,
        now: Millis,
    ) -> CommandOutcome {
        let is_cluster = argv
            .first()
            .is_some_and(|a| a.as_ref().eq_ignore_ascii_case(b"cluster"));
        if is_cluster
            && argv
                .get(1)
                .is_some_and(|s| is_migration_subcommand(s.as_ref()))
        {
            return self.exec_migration_command(argv, req, now);
        }
        match parse_cluster(argv, self.parse_options(keys)) {
            Ok(cmd) => self.cluster_command(&cmd, req, keys, now),
            Err(e) => CommandOutcome::Reply(error_reply(&e)),
        }
    }

    /// Executes one parsed CLUSTER subcommand with Valkey 8's semantics and replies. State
    /// errors are checked in Valkey's order (see each [`ClusterCommand`] variant) and leave the
    /// node unchanged. Changes are followed by the usual outputs: a `Persist` when the config
    /// changed, PONG broadcasts, [`Event`]s for role changes (the host starts or stops
    /// replication on [`Event::BecameReplica`] / [`Event::BecamePrimary`]).
    ///
    /// Notes per subcommand:
    /// * SETSLOT on a primary with replicas first returns
    ///   [`CommandOutcome::ReplicateFirst`] (Valkey 8 replicates SETSLOT before applying it).
    /// * FAILOVER on a replica: the epoch layer checks the preconditions and starts it
    ///   (§13.1: MFSTART to the primary; FORCE: election at once; TAKEOVER: configEpoch bump
    ///   and take-over, [`Event::BecamePrimary`]); a [`ManualFailoverRequest`] is recorded and
    ///   [`Event::ManualFailoverRequested`] emitted.
    /// * BUMPEPOCH, SET-CONFIG-EPOCH: the epoch layer (§11.6, §19.6); the new epoch is durable
    ///   before any message carries it.
    /// * RESET also resets the epoch layer (election, manual failover: a paused primary gets
    ///   [`Event::UnpauseWrites`]).
    /// * SAVECONFIG queues a `Persist` and replies `+OK` (a host whose write fails replies
    ///   [`ClusterError::SaveConfig`] itself).
    /// * RESET of a primary holding keys is refused; otherwise [`Event::ClusterReset`] tells
    ///   the host to drop its data when myself was a replica.
    pub fn cluster_command(
        &mut self,
        cmd: &ClusterCommand,
        req: &CommandRequest,
        keys: &dyn SlotKeys,
        now: Millis,
    ) -> CommandOutcome {
        let now = self.clamp(now);
        let out = self.execute(cmd, req, keys, now);
        self.finish(now);
        match out {
            Ok(o) => o,
            Err(e) => CommandOutcome::Reply(error_reply(&e)),
        }
    }

    fn view_options(&self, req: &CommandRequest) -> views::ViewOptions {
        views::ViewOptions {
            tls_client: req.tls,
            ipv6_client: req.ipv6,
            endpoint: match self.config.preferred_endpoint {
                PreferredEndpoint::Ip => EndpointType::Ip,
                PreferredEndpoint::Hostname => EndpointType::Hostname,
                PreferredEndpoint::UnknownEndpoint => EndpointType::Unknown,
            },
            ..views::ViewOptions::default()
        }
    }

    fn execute(
        &mut self,
        cmd: &ClusterCommand,
        req: &CommandRequest,
        keys: &dyn SlotKeys,
        now: Millis,
    ) -> Result<CommandOutcome, ClusterError> {
        let opts = self.view_options(req);
        use ClusterCommand as C;
        Ok(CommandOutcome::Reply(match cmd {
            C::Help => Reply::Array(
                CLUSTER_HELP
                    .iter()
                    .map(|l| Reply::Simple((*l).to_owned()))
                    .collect(),
            ),
            C::Nodes => views::cluster_nodes(&self.topo, &opts),
            C::MyId => views::cluster_myid(&self.topo),
            C::MyShardId => views::cluster_myshardid(&self.topo),
            C::Slots => views::cluster_slots(&self.topo, &opts),
            C::Shards => views::cluster_shards(&self.topo, &opts),
            C::Info => views::cluster_info(&self.topo, &self.info_inputs()),
            C::Links => views::cluster_links(&self.link_infos()),
            C::BumpEpoch => {
                let mut eout = Vec::new();
                let reply = ferrocluster_epoch::bump_epoch(&mut self.topo, &mut eout);
                self.apply_epoch_effects(eout, None, now);
                Reply::Simple(reply.to_string())
            }
            C::SaveConfig => {
                self.save_pending = true;
                Reply::ok()
            }
            C::FlushSlots => {
                if keys.db_size(0) != 0 {
                    return Err(ClusterError::FlushSlotsNotEmpty);
                }
                let mine = self.topo.myself().slots().clone();
                self.delete_slots(&mine);
                Reply::ok()
            }
            C::KeySlot(s) => Reply::Integer(i64::from(s.get())),
            C::CountKeysInSlot(s) => Reply::uint(keys.count_keys_in_slot(req.db, *s)),
            C::GetKeysInSlot { slot, count } => {
                let n = usize::try_from(*count).unwrap_or(usize::MAX);
                Reply::Array(
                    keys.keys_in_slot(req.db, *slot, n)
                        .into_iter()
                        .take(n)
                        .map(Reply::Bulk)
                        .collect(),
                )
            }
            C::Replicas(arg) => {
                let id = check_replicas(arg, &self.topo)?;
                views::cluster_replicas(&self.topo, id.as_str(), &opts)
            }
            C::AddSlots(a) | C::AddSlotsRange(a) => {
                let set = check_slot_assignments(a, false, &self.topo)?;
                self.assign_slots_to_myself(&set);
                Reply::ok()
            }
            C::DelSlots(a) | C::DelSlotsRange(a) => {
                let set = check_slot_assignments(a, true, &self.topo)?;
                self.delete_slots(&set);
                Reply::ok()
            }
            C::SetSlot(parsed) => return self.exec_setslot(parsed, req, keys, now),
            C::Meet { ip, port, bus_port } => {
                if self
                    .gossip
                    .meet(
                        &mut self.topo,
                        *ip,
                        *port,
                        Some(*bus_port),
                        now,
                        &mut self.rng,
                    )
                    .is_err()
                {
                    // parse_cluster refused ports outside 1..=65535, the only MEET errors.
                    return Ok(CommandOutcome::Reply(Reply::Error(format!(
                        "ERR Invalid node address specified: {ip}:{port}"
                    ))));
                }
                self.state_dirty = true;
                Reply::ok()
            }
            C::Forget(arg) => {
                let banned = arg
                    .id()
                    .is_some_and(|id| self.gossip.blacklist.contains(id, now));
                if let Some(id) = check_forget(arg, &self.topo, banned)? {
                    let mut out = Vec::new();
                    // check_forget ran the same checks as Gossip::forget.
                    let _ =
                        self.gossip
                            .forget(&mut self.topo, &self.gossip_cfg, &id, now, &mut out);
                    self.apply_gossip_effects(out, now);
                }
                Reply::ok()
            }
            C::Replicate(arg) => {
                let id = check_replicate(arg, &self.topo, keys.db_size(0) != 0)?;
                self.become_replica_of(&id, now);
                self.broadcast_pong(now);
                Reply::ok()
            }
            C::CountFailureReports(arg) => {
                let id = check_known_node(arg, &self.topo)?;
                Reply::uint(self.failure_report_count(&id, now).unwrap_or(0) as u64)
            }
            C::Failover(mode) => self.exec_failover(*mode, now)?,
            C::SetConfigEpoch(epoch) => {
                // The parser accepts 0..=i64::MAX only.
                let epoch = i64::try_from(*epoch).unwrap_or(i64::MAX);
                let mut eout = Vec::new();
                ferrocluster_epoch::set_config_epoch(&mut self.topo, epoch, &mut eout).map_err(
                    |e| match e {
                        SetConfigEpochError::KnowsOtherNodes => ClusterError::ConfigEpochOtherNodes,
                        SetConfigEpochError::AlreadyNonZero => ClusterError::ConfigEpochNonZero,
                        _ => ClusterError::InvalidConfigEpoch(epoch),
                    },
                )?;
                self.apply_epoch_effects(eout, None, now);
                // Durable before any message carries the new epoch.
                self.save_critical = true;
                Reply::ok()
            }
            C::Reset { hard } => {
                if self.topo.myself().is_primary() && keys.db_size(req.db) != 0 {
                    return Err(ClusterError::ResetWithKeys);
                }
                self.reset_inner(*hard, now);
                Reply::ok()
            }
            C::SlotStats(q) => self.slot_stats(q, req, keys),
            // A subcommand added to the parser after this executor: refuse it the way Valkey
            // refuses an unknown one.
            _ => Reply::Error("ERR unknown subcommand. Try CLUSTER HELP.".to_owned()),
        }))
    }

    pub(crate) fn info_inputs(&self) -> InfoInputs {
        InfoInputs {
            state_ok: self.state.is_ok(),
            messages_sent: self.stats.sent,
            messages_received: self.stats.received,
            links_buffer_limit_exceeded: 0,
        }
    }

    /// CLUSTER LINKS rows (§19.5): per node in table order its outbound link (`to`), then its
    /// inbound link (`from`). Send buffers are the host's and reported as 0.
    fn link_infos(&self) -> Vec<LinkInfo> {
        let mut rows = Vec::new();
        for n in self.topo.nodes().filter(|n| !n.is_myself()) {
            let links = &self.gossip.links;
            let pairs = [
                (links.outbound_of(n.id()), LinkDirection::To),
                (links.inbound_of(n.id()), LinkDirection::From),
            ];
            for (id, direction) in pairs {
                if let Some(l) = id.and_then(|id| links.get(id)) {
                    rows.push(LinkInfo {
                        direction,
                        node: *n.id(),
                        create_time: l.created,
                        readable: l.connected,
                        writable: false,
                        send_buffer_allocated: 0,
                        send_buffer_used: 0,
                    });
                }
            }
        }
        rows
    }

    /// ADDSLOTS effects (§15): each slot becomes myself's and loses its importing mark.
    pub(crate) fn assign_slots_to_myself(&mut self, set: &SlotSet) {
        let me = *self.topo.myself_id();
        for s in set.iter() {
            // Myself is always known.
            let _ = self.topo.set_importing(s, None);
            let _ = self.topo.set_slot_owner(s, Some(me));
            self.epoch.clear_not_claiming(s);
        }
        self.save_pending = true;
        self.state_dirty = true;
    }

    /// DELSLOTS / FLUSHSLOTS effects (§15): each slot loses its owner and its importing mark.
    fn delete_slots(&mut self, set: &SlotSet) {
        for s in set.iter() {
            // Clearing never refers to an unknown node.
            let _ = self.topo.set_importing(s, None);
            let _ = self.topo.set_slot_owner(s, None);
            self.epoch.clear_not_claiming(s);
        }
        self.save_pending = true;
        self.state_dirty = true;
    }

    /// Makes myself a replica of `primary` (Valkey `clusterSetPrimary`): a primary drops its
    /// importing/migrating marks; myself takes the primary's shard ID; a recorded manual
    /// failover is dropped, and the epoch layer's election and manual failover are reset (a
    /// primary serving one unpauses writes); [`Event::BecameReplica`] and
    /// [`Event::ReplicateFrom`] (full sync unless myself was already in the primary's shard)
    /// unless it already replicated `primary`.
    pub(crate) fn become_replica_of(&mut self, primary: &NodeId, now: Millis) {
        let me = *self.topo.myself_id();
        let was_in_shard = self
            .topo
            .node(primary)
            .is_some_and(|p| p.shard_id == self.topo.myself().shard_id);
        let already =
            self.topo.myself().primary.as_ref() == Some(primary) && self.topo.myself().is_replica();
        if self.topo.myself().is_primary() {
            let marked: Vec<Slot> = self
                .topo
                .importing()
                .map(|(s, _)| s)
                .chain(self.topo.migrating().map(|(s, _)| s))
                .collect();
            for s in marked {
                let _ = self.topo.set_importing(s, None);
                let _ = self.topo.set_migrating(s, None);
            }
        }
        let Some(shard) = self.topo.node(primary).map(|p| p.shard_id) else {
            return;
        };
        if primary == &me || self.topo.set_primary(&me, *primary).is_err() {
            return;
        }
        // Myself and any replica under it join the primary's shard (Valkey PR #573).
        self.topo.set_shard_id(&me, shard);
        self.manual_failover = None;
        if self.epoch.manual_failover().end().is_some()
            || self.epoch.election().auth_time().is_some()
        {
            let mut eout = Vec::new();
            self.epoch.reset(&mut eout);
            self.apply_epoch_effects(eout, None, now);
        }
        self.save_pending = true;
        self.state_dirty = true;
        if !already {
            let p = self.topo.node(primary);
            let (ip, port, tls_port) = (
                p.and_then(|p| p.ip),
                p.map_or(0, |p| p.port),
                p.map_or(0, |p| p.tls_port),
            );
            self.stage_replicate_from(*primary, ip, port, tls_port, !was_in_shard);
        }
    }

    /// CLUSTER FAILOVER [FORCE|TAKEOVER] (§13.1): the epoch layer checks the preconditions
    /// and starts it; a FORCE election starts at once. The request is also recorded
    /// ([`ClusterNode::manual_failover_request`]) with [`Event::ManualFailoverRequested`].
    fn exec_failover(&mut self, mode: FailoverMode, now: Millis) -> Res {
        let emode = match mode {
            FailoverMode::Default => ferrocluster_epoch::FailoverMode::Default,
            FailoverMode::Force => ferrocluster_epoch::FailoverMode::Force,
            FailoverMode::Takeover => ferrocluster_epoch::FailoverMode::Takeover,
        };
        let mut eout = Vec::new();
        let started = self.epoch.handle_failover_command(
            &mut self.topo,
            &self.epoch_cfg,
            emode,
            now,
            &mut eout,
        );
        match started {
            Ok(()) => {}
            Err(FailoverError::NotReplica) => return Err(ClusterError::FailoverOnPrimary),
            Err(FailoverError::PrimaryUnknown) => return Err(ClusterError::FailoverPrimaryUnknown),
            Err(FailoverError::PrimaryDown) => return Err(ClusterError::FailoverPrimaryDown),
            // The parser refused other options already; the epoch layer's text otherwise.
            Err(e) => return Ok(Reply::Error(e.to_string())),
        }
        self.manual_failover = Some(ManualFailoverRequest {
            mode,
            requested_at: now,
            deadline: now.saturating_add_ms(self.config.manual_failover_timeout_ms),
        });
        self.staged
            .push(crate::Output::Event(Event::ManualFailoverRequested(mode)));
        self.apply_epoch_effects(eout, None, now);
        if mode == FailoverMode::Force {
            self.run_failover(now);
        }
        Ok(Reply::ok())
    }

    fn exec_setslot(
        &mut self,
        parsed: &Result<SetSlot, ClusterError>,
        req: &CommandRequest,
        keys: &dyn SlotKeys,
        now: Millis,
    ) -> Result<CommandOutcome, ClusterError> {
        let target = check_setslot(parsed, &self.topo, req.from_primary, |s| {
            keys_in_slot_all_dbs(keys, s)
        })?;
        let cmd = parsed.as_ref().map_err(Clone::clone)?;
        let slot = cmd.slot;
        // check_setslot returned the target of every action but STABLE, known and a primary.
        let action = match (&cmd.action, target) {
            (SetSlotAction::Migrating(_), Some(n)) => LegacyAction::Migrating(n),
            (SetSlotAction::Importing(_), Some(n)) => LegacyAction::Importing(n),
            (SetSlotAction::Node(_), Some(n)) => LegacyAction::Node(n),
            _ => LegacyAction::Stable,
        };
        // Valkey 9: MIGRATING / IMPORTING are refused while an atomic slot migration runs
        // (slot-migration sheet A.17).
        if let Err(e) = check_setslot_allowed(&self.migrations, &action) {
            return Ok(CommandOutcome::Reply(e.to_reply()));
        }
        let me = *self.topo.myself_id();
        let has_replicas = self.topo.replicas_of(&me).next().is_some();
        if self.topo.myself().is_primary()
            && has_replicas
            && !req.replication_done
            && !req.from_primary
        {
            let timeout = cmd.timeout.as_ref().map_err(Clone::clone)?;
            let deadline = timeout.deadline_ms(now.as_u64())?;
            return Ok(CommandOutcome::ReplicateFirst {
                deadline: deadline.map(Millis),
            });
        }
        let effect = apply_setslot(
            &mut self.topo,
            slot,
            action,
            keys_in_slot_all_dbs(keys, slot),
            self.config.allow_replica_migration,
        );
        // check_setslot made sure the node is known, the only error of apply_setslot.
        let effect = effect.unwrap_or_default();
        if matches!(action, LegacyAction::Node(_)) {
            self.epoch.clear_not_claiming(slot);
            if let Some(p) = effect.become_replica_of {
                self.become_replica_of(&p, now);
                self.save_critical = true;
            }
            if effect.bump_epoch_and_broadcast {
                // Slot-migration sheet C.5: bump without agreement, durable before the PONG.
                let mut eout = Vec::new();
                ferrocluster_epoch::bump_config_epoch_without_consensus(&mut self.topo, &mut eout);
                self.apply_epoch_effects(eout, None, now);
                self.broadcast_pong(now);
            }
        }
        self.save_pending = true;
        self.state_dirty = true;
        Ok(CommandOutcome::Reply(Reply::ok()))
    }

    fn slot_stats(&self, q: &SlotStatsQuery, req: &CommandRequest, keys: &dyn SlotKeys) -> Reply {
        let me = self.topo.myself();
        let owner = match me.primary {
            Some(p) if me.is_replica() => p,
            _ => *me.id(),
        };
        let mine = self
            .topo
            .node(&owner)
            .map(|n| n.slots().clone())
            .unwrap_or_default();
        let enabled = keys.slot_stats_enabled();
        let usage = |s: Slot| {
            if enabled {
                keys.slot_usage(s).unwrap_or_default()
            } else {
                Default::default()
            }
        };
        let row = |s: Slot| {
            let mut stats = vec![(
                Reply::bulk("key-count"),
                Reply::uint(keys.count_keys_in_slot(req.db, s)),
            )];
            if enabled {
                let u = usage(s);
                stats.push((Reply::bulk("cpu-usec"), Reply::uint(u.cpu_usec)));
                stats.push((
                    Reply::bulk("network-bytes-in"),
                    Reply::uint(u.network_bytes_in),
                ));
                stats.push((
                    Reply::bulk("network-bytes-out"),
                    Reply::uint(u.network_bytes_out),
                ));
            }
            Reply::Array(vec![Reply::Integer(i64::from(s.get())), Reply::Map(stats)])
        };
        let slots: Vec<Slot> = match *q {
            SlotStatsQuery::Range { start, end } => {
                mine.iter().filter(|s| *s >= start && *s <= end).collect()
            }
            SlotStatsQuery::OrderBy {
                metric,
                limit,
                descending,
            } => {
                let value = |s: Slot| match metric {
                    SlotStatsMetric::KeyCount => keys.count_keys_in_slot(req.db, s),
                    SlotStatsMetric::CpuUsec => usage(s).cpu_usec,
                    SlotStatsMetric::NetworkBytesIn => usage(s).network_bytes_in,
                    SlotStatsMetric::NetworkBytesOut => usage(s).network_bytes_out,
                };
                let mut v: Vec<(u64, Slot)> = mine.iter().map(|s| (value(s), s)).collect();
                v.sort_by(|a, b| {
                    let by_value = if descending {
                        b.0.cmp(&a.0)
                    } else {
                        a.0.cmp(&b.0)
                    };
                    by_value.then(a.1.cmp(&b.1))
                });
                v.into_iter()
                    .take(usize::from(limit))
                    .map(|(_, s)| s)
                    .collect()
            }
        };
        Reply::Array(slots.into_iter().map(row).collect())
    }
}

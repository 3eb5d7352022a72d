//! The whole public API of the node crate, used through `ferrocluster_node::` only: an
//! embedder depends on this one crate (issue 17 B). Every type that appears in a signature
//! of the node's public items is named here through this crate's paths; the test fails to
//! compile when one is no longer reachable, and fails when this file names another of our
//! crates.

use fc::{
    AnnounceError, AuthReply, Capabilities, ClientState, ClusterCommand, ClusterConfig,
    ClusterNode, CommandOutcome, CommandRequest, CommandSpec, ConfError, ConfWarning, ConfigEpoch,
    ConfigError, ConnId, CurrentEpoch, DecodeError, Dispatch, EmptyKeyspace, Epoch, EpochEvent,
    ErrorReply, FailoverMode, FinishState, Health, InvariantViolation, Job, JobKind, JobName,
    JobState, KeyPresence, LinkEvent, LinkId, MessageStats, MigrationInput, MigrationRequest,
    Migrations, Millis, NoKeys, Node, NodeAddress, NodeError, NodeFlags, NodeId, Notice, Origin,
    Output, PreferredEndpoint, QueuedCommand, QuorumCheck, QuorumVerdict, Readiness, ReplLink,
    ReplicationState, Reply, RequestId, Route, RouteError, ShardId, ShardReadiness, Slot, SlotKeys,
    SlotRange, SlotSet, SlotUsage, SnapshotResult, SyncSlots, Topology, BUS_PORT_OFFSET,
    MAX_PORT_WITH_DEFAULT_BUS_PORT, MSG_NO_REPLICATION, MSG_NO_SLOT_MIGRATION,
    MSG_SYNCSLOTS_NO_CONN,
};
use ferrocluster_node as fc;
use std::net::{IpAddr, Ipv4Addr};

/// A host's keyspace over key names in database 0, hashed with the crate's own function.
struct Keys(Vec<Vec<u8>>);

impl SlotKeys for Keys {
    fn count_keys_in_slot(&self, db: usize, slot: Slot) -> u64 {
        self.0
            .iter()
            .filter(|k| db == 0 && fc::key_hash_slot(k) == slot)
            .count() as u64
    }
    fn keys_in_slot(&self, _: usize, slot: Slot, count: usize) -> Vec<Vec<u8>> {
        let keys = self.0.iter().filter(|k| fc::key_hash_slot(k) == slot);
        keys.take(count).cloned().collect()
    }
    fn db_size(&self, db: usize) -> u64 {
        if db == 0 {
            self.0.len() as u64
        } else {
            0
        }
    }
    fn slot_usage(&self, _: Slot) -> Option<SlotUsage> {
        Some(SlotUsage::default())
    }
}

/// Acts on one output the way a host does: every arm named, no `_`.
fn act(node: &mut ClusterNode, out: Output, log: &mut Vec<String>) {
    match out {
        Output::Connect { link, ip, port } => {
            let _: (LinkId, IpAddr, u16) = (link, ip, port);
            node.handle_link(LinkEvent::ConnectFailed(link), Millis(1));
        }
        Output::Transmit { link, bytes } => log.push(format!("{link}: {} bytes", bytes.len())),
        Output::Close { link } => {
            node.handle_link(LinkEvent::Closed(link), Millis(1));
        }
        Output::Persist { seq, contents, .. } => {
            let _: &[u8] = &contents;
            node.handle_persisted(seq);
        }
        Output::Reply { to, reply } => {
            let (_, _): (RequestId, Reply) = (to, reply);
        }
        Output::ReplicateFrom {
            primary,
            ip,
            port,
            tls_port,
            full_sync,
        } => {
            let _: (NodeId, Option<IpAddr>, u16, u16, bool) =
                (primary, ip, port, tls_port, full_sync);
        }
        Output::BecamePrimary | Output::UnpauseWrites => {}
        Output::PauseWrites { until } => node.handle_writes_paused(0, until),
        Output::DeleteSlotKeys(slots) => {
            let _: &SlotSet = &slots;
        }
        Output::ClusterReset { hard, was_replica } => {
            let _ = (hard, was_replica);
        }
        Output::PubSubMessage {
            from,
            channel,
            message,
            sharded,
        } => {
            let _: (NodeId, Vec<u8>, Vec<u8>, bool) = (from, channel, message, sharded);
        }
        Output::ModuleMessage {
            from,
            module_id,
            module_type,
            payload,
        } => {
            let _: (NodeId, u64, u8, Vec<u8>) = (from, module_id, module_type, payload);
        }
        Output::Migration(r) => data_plane(*r),
        Output::Notice(n) => log.push(notice(&n)),
    }
}

fn data_plane(r: MigrationRequest) {
    match r {
        MigrationRequest::Connect {
            job,
            target,
            ip,
            port,
            tls_port,
        } => {
            let _: (JobName, NodeId, IpAddr, u16, u16) = (job, target, ip, port, tls_port);
        }
        MigrationRequest::SendAuth { job, conn } => {
            let _: (JobName, ConnId) = (job, conn);
        }
        MigrationRequest::Send { conn, message } => {
            let _: (ConnId, Vec<u8>) = (conn, message.to_resp());
        }
        MigrationRequest::AcceptImportLink { job, conn, slots } => {
            let _: (JobName, ConnId, SlotSet) = (job, conn, slots);
        }
        MigrationRequest::StartSnapshot { job, conn, ranges } => {
            let _: (JobName, ConnId, Vec<SlotRange>) = (job, conn, ranges);
        }
        MigrationRequest::AbortSnapshot { job } | MigrationRequest::BeginStreaming { job, .. } => {
            let _: JobName = job;
        }
        MigrationRequest::QueryBacklog { job, conn } => {
            let _: (JobName, ConnId) = (job, conn);
        }
        MigrationRequest::HideSlots { slots }
        | MigrationRequest::RevealSlots { slots }
        | MigrationRequest::DropSlotKeys { slots } => {
            let _: SlotSet = slots;
        }
        MigrationRequest::Propagate { message } => {
            let _: SyncSlots = message;
        }
        MigrationRequest::Close { conn } => {
            let _: ConnId = conn;
        }
    }
}

fn notice(n: &Notice) -> String {
    match n {
        Notice::FrameDropped { link, error } | Notice::FramingLost { link, error } => {
            let _: (&LinkId, &DecodeError) = (link, error);
            format!("{link}: {error}")
        }
        Notice::NodeIdCollision { id, mine, peer, .. } => {
            let _: (&NodeId, &NodeAddress, &NodeAddress) = (id, mine, peer);
            "collision".into()
        }
        Notice::NodesConfWarning(w) => {
            let _: &ConfWarning = w;
            w.to_string()
        }
        Notice::ConfigEpochBumped(e) => {
            let _: &ConfigEpoch = e;
            e.to_string()
        }
        Notice::Epoch(e) => {
            let _: &EpochEvent = e;
            format!("{e:?}")
        }
        Notice::ManualFailoverRequested(m) => {
            let _: &FailoverMode = m;
            format!("{m:?}")
        }
        Notice::MigrationStateChanged {
            job,
            kind,
            from,
            to,
        } => {
            let _: (&JobName, &JobKind, &JobState, &JobState) = (job, kind, from, to);
            "job".into()
        }
        other => format!("{other:?}"),
    }
}

#[test]
fn the_whole_api_through_the_node_crate() {
    let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let config = ClusterConfig {
        port: 7000,
        preferred_endpoint: PreferredEndpoint::Ip,
        ..ClusterConfig::default()
    };
    assert_eq!(config.bus_port(), 7000 + BUS_PORT_OFFSET);
    // The largest port whose default bus port (port + 10000) still fits in 16 bits.
    assert_eq!(MAX_PORT_WITH_DEFAULT_BUS_PORT, u16::MAX - BUS_PORT_OFFSET);
    let caps = Capabilities {
        replication: true,
        slot_migration: true,
        databases: 1,
    };
    let bad: Result<ClusterNode, NodeError> = ClusterNode::new(
        config.clone(),
        caps,
        Millis(1),
        1,
        Some(b"not a nodes.conf"),
    );
    assert!(matches!(bad, Err(NodeError::NodesConf(ConfError { .. }))));
    let _: Option<ConfigError> = ClusterConfig {
        node_timeout_ms: 0,
        ..config.clone()
    }
    .validate()
    .err();
    let _: Option<AnnounceError> = None;
    let mut node = ClusterNode::new(config, caps, Millis(1), 1, None).unwrap();
    let mut log = Vec::new();
    while let Some(o) = node.poll_output() {
        act(&mut node, o, &mut log);
    }

    // Inputs.
    let link = node.handle_accept_local(lo, lo, Millis(2));
    node.handle_link_bytes(link, b"RCmb", Millis(2));
    node.handle_link(LinkEvent::Closed(link), Millis(2));
    node.handle_timeout(Millis(200));
    node.handle_replication(
        ReplicationState {
            offset: 0,
            link: ReplLink::Down,
        },
        Millis(200),
    );
    node.handle_migration(MigrationInput::Flush, Millis(200));
    let _: Option<Millis> = node.poll_timeout();

    // Commands: CLUSTER, routing, Pub/Sub.
    let keys = Keys(vec![b"{a}1".to_vec()]);
    let req = CommandRequest {
        id: RequestId(1),
        conn: Some(ConnId(1)),
        ..CommandRequest::default()
    };
    let outcome: CommandOutcome =
        node.cluster_command_argv(&["CLUSTER", "ADDSLOTS", "1"], &req, &keys, Millis(300));
    assert_eq!(outcome, CommandOutcome::Deferred);
    let parsed: ClusterCommand =
        fc::command::parse_cluster(&["CLUSTER", "INFO"], fc::command::ParseOptions::default())
            .unwrap();
    let info = node.cluster_command(&parsed, &req, &EmptyKeyspace, Millis(300));
    assert!(matches!(info, CommandOutcome::Reply(_)), "{info:?}");
    let _ = (
        MSG_NO_REPLICATION,
        MSG_NO_SLOT_MIGRATION,
        MSG_SYNCSLOTS_NO_CONN,
    );
    let _: Reply = fc::error_reply(&fc::command::ClusterError::FailoverOnPrimary);
    let mut client = ClientState::new(false, false);
    let _: CommandRequest = CommandRequest::from_client(&client, RequestId(2));
    let d: Dispatch = node.dispatch_client_command(&mut client, &["GET", "{a}1"], &NoKeys);
    if let Dispatch::Exec(q) = &d {
        let _: &Vec<QueuedCommand> = q;
    }
    let spec: &CommandSpec = fc::lookup(b"get").unwrap();
    let present = |_: usize, _: &[u8]| true;
    let r: Route = node.route(spec, &["GET", "{a}1"], &client, &present);
    if let Err(e) = &r {
        let _: &RouteError = e;
        let _: Vec<u8> = e.to_resp();
    }
    fn _presence(_: &dyn KeyPresence) {}
    node.publish(b"ch", b"m", Millis(300));
    node.spublish(b"ch", b"m", Millis(300));
    node.send_module_message(None, 1, 2, b"p", Millis(300));
    node.set_config(node.config().clone(), RequestId(3), Millis(300))
        .unwrap();
    while let Some(o) = node.poll_output() {
        act(&mut node, o, &mut log);
    }

    // Queries.
    let t: &Topology = node.topology();
    let me: &Node = t.myself();
    let _: (NodeFlags, ShardId, ConfigEpoch, CurrentEpoch) =
        (me.flags, me.shard_id, me.config_epoch, t.current_epoch);
    let _: &NodeId = node.myself_id();
    let _: &Capabilities = node.capabilities();
    let _: bool = node.cluster_state_ok();
    let _: &MessageStats = node.stats();
    let _: String = node.cluster_info() + &node.cluster_nodes() + &node.nodes_conf();
    let _: Option<usize> = node.failure_report_count(node.myself_id(), Millis(300));
    let _: &Epoch = node.epoch();
    let _: &ReplicationState = node.replication();
    let m: &Migrations = node.migrations();
    let _: Option<&Job> = m.jobs().next();
    let _: (Readiness, QuorumCheck, Health, Vec<ShardReadiness>) = (
        node.readiness(Millis(300)),
        node.quorum_check(Millis(300)),
        node.health(Millis(300)),
        node.shard_readiness(Millis(300)),
    );
    let _: QuorumVerdict = node.quorum_check(Millis(300)).verdict;
    let _: (Origin, AuthReply, SnapshotResult, FinishState) = (
        Origin::Aof,
        AuthReply::Ok,
        SnapshotResult::Done { cow_bytes: 0 },
        FinishState::Success,
    );
    let _: Result<(), InvariantViolation> = node.invariants();
    assert!(node.invariants().is_ok());
    let _ = SlotRange::new(Slot::new(0).unwrap(), Slot::new(1).unwrap());
}

#[test]
fn this_file_reaches_everything_through_the_node_crate_alone() {
    let me = include_str!("public_api.rs");
    let prefix = concat!("ferrocluster", "_");
    for (i, _) in me.match_indices(prefix) {
        let rest = &me[i + prefix.len()..];
        assert!(
            rest.starts_with("node"),
            "names another crate: {}",
            &me[i..(i + 40).min(me.len())]
        );
    }
}

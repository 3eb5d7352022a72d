//! One node record (Valkey's `clusterNode`), as this node knows it.

use crate::{ConfigEpoch, Hostname, HumanNodename, Millis, NodeFlags, NodeId, ShardId};
use ferrocluster_slot::SlotSet;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Whether an outbound bus link to the node exists, as CLUSTER NODES and nodes.conf print it
/// (§18.1 field 8: `connected` if an outbound link exists, always for myself).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LinkState {
    /// An outbound link exists (or the node is myself).
    Connected,
    /// No outbound link.
    #[default]
    Disconnected,
}

impl LinkState {
    /// `connected` / `disconnected`.
    pub fn as_str(self) -> &'static str {
        match self {
            LinkState::Connected => "connected",
            LinkState::Disconnected => "disconnected",
        }
    }
}

/// A node record: everything this node knows about one cluster node (itself included).
///
/// Most fields are public and may be changed directly by the engine. Two are not: the node's
/// [`id`](Node::id) (change it with [`crate::Topology::rename_node`]) and its owned
/// [`slots`](Node::slots) (change them with [`crate::Topology::set_slot_owner`], which keeps
/// the slot-owner table consistent). Replica lists are derived from the `primary` fields
/// ([`crate::Topology::replicas_of`]).
///
/// Announced text (hostname, nodename, addresses) is held in validated types, so a record can
/// never carry a value that would break a nodes.conf line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub(crate) id: NodeId,
    /// Boxed: inline, its 2 KiB would make every record ~2.4 KB, and the per-cron walks over
    /// all records (1000 of them per node at 1000 nodes) would touch a new cache line per
    /// field read.
    pub(crate) slots: Box<SlotSet>,
    /// Flag word with the wire bit values (§5.1).
    pub flags: NodeFlags,
    /// Cluster (bus) IP address; `None` when unknown (a NOADDR node, or nodes.conf `:0@0`).
    pub ip: Option<IpAddr>,
    /// Plaintext client port (0 = none).
    pub port: u16,
    /// TLS client port (0 = none; the `tls-port` aux field / header `pport`).
    pub tls_port: u16,
    /// Cluster bus port (`cport`).
    pub bus_port: u16,
    /// Announced hostname, if any (`cluster-announce-hostname`, HOSTNAME extension).
    pub hostname: Option<Hostname>,
    /// Announced human nodename, if any (`nodename=` aux field, HUMAN_NODENAME extension).
    pub human_nodename: Option<HumanNodename>,
    /// Announced client IPv4 (`client-ipv4=`, V8), used instead of `ip` for IPv4 clients.
    pub client_ipv4: Option<Ipv4Addr>,
    /// Announced client IPv6 (`client-ipv6=`, V8), used instead of `ip` for IPv6 clients.
    pub client_ipv6: Option<Ipv6Addr>,
    /// Shard ID (a replica shares its primary's).
    pub shard_id: ShardId,
    /// The primary this node replicates, for a replica whose primary is known.
    pub primary: Option<NodeId>,
    /// The node's own configEpoch. A replica's is 0 after loading nodes.conf (§18.3); views
    /// report the primary's instead ([`crate::Topology::reported_config_epoch`]).
    pub config_epoch: ConfigEpoch,
    /// When the pending PING was sent; `None` when no ping is in flight.
    pub ping_sent: Option<Millis>,
    /// When the last PONG arrived on our outbound link; `None` if never.
    pub pong_received: Option<Millis>,
    /// When any data last arrived from the node (PFAIL uses it with `ping_sent`, §9.1).
    pub data_received: Option<Millis>,
    /// When the node was marked FAIL (§9.3); `None` if never.
    pub fail_time: Option<Millis>,
    /// When `repl_offset` was last updated.
    pub repl_offset_time: Option<Millis>,
    /// For a primary: since when it has had no working replica (§14); `None` if not orphaned.
    pub orphaned_time: Option<Millis>,
    /// Whether an outbound bus link exists (always `Connected` for myself in the views).
    pub link: LinkState,
    /// Last known replication offset (header `offset`; for myself the host's own offset).
    pub repl_offset: u64,
    /// When the record was created (`ctime`).
    pub created: Millis,
    /// Failure reports about this node: reporter -> time of the last report (§9.2). Ordered,
    /// so iteration is deterministic.
    pub failure_reports: BTreeMap<NodeId, Millis>,
}

impl Node {
    /// A blank record: given ID and shard, no flags, no address, no slots, epoch 0,
    /// disconnected, created at `now`.
    pub fn new(id: NodeId, shard_id: ShardId, now: Millis) -> Node {
        Node {
            id,
            slots: Box::new(SlotSet::new()),
            flags: NodeFlags::empty(),
            ip: None,
            port: 0,
            tls_port: 0,
            bus_port: 0,
            hostname: None,
            human_nodename: None,
            client_ipv4: None,
            client_ipv6: None,
            shard_id,
            primary: None,
            config_epoch: ConfigEpoch(0),
            ping_sent: None,
            pong_received: None,
            data_received: None,
            fail_time: None,
            repl_offset_time: None,
            orphaned_time: None,
            link: LinkState::Disconnected,
            repl_offset: 0,
            created: now,
            failure_reports: BTreeMap::new(),
        }
    }

    /// The node's ID.
    pub fn id(&self) -> &NodeId {
        &self.id
    }

    /// The slots this node owns according to the slot-owner table (always consistent with
    /// [`crate::Topology::slot_owner`]).
    pub fn slots(&self) -> &SlotSet {
        &self.slots
    }

    /// Number of owned slots.
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// Flag MYSELF.
    pub fn is_myself(&self) -> bool {
        self.flags.contains(NodeFlags::MYSELF)
    }
    /// Flag PRIMARY.
    pub fn is_primary(&self) -> bool {
        self.flags.contains(NodeFlags::PRIMARY)
    }
    /// Flag REPLICA.
    pub fn is_replica(&self) -> bool {
        self.flags.contains(NodeFlags::REPLICA)
    }
    /// Flag PFAIL.
    pub fn is_pfail(&self) -> bool {
        self.flags.contains(NodeFlags::PFAIL)
    }
    /// Flag FAIL.
    pub fn is_fail(&self) -> bool {
        self.flags.contains(NodeFlags::FAIL)
    }
    /// Flag HANDSHAKE.
    pub fn in_handshake(&self) -> bool {
        self.flags.contains(NodeFlags::HANDSHAKE)
    }
    /// Flag NOADDR.
    pub fn has_no_addr(&self) -> bool {
        self.flags.contains(NodeFlags::NOADDR)
    }
    /// A voting primary: flagged PRIMARY and owning at least one slot (facts sheet §0).
    pub fn is_voting_primary(&self) -> bool {
        self.is_primary() && !self.slots.is_empty()
    }

    /// The client-facing IP for a client of the given family (§19.1): the announced client
    /// IPv4/IPv6 if set, else the cluster IP.
    pub fn client_ip(&self, ipv6_client: bool) -> Option<IpAddr> {
        let announced = if ipv6_client {
            self.client_ipv6.map(IpAddr::V6)
        } else {
            self.client_ipv4.map(IpAddr::V4)
        };
        announced.or(self.ip)
    }

    /// Adds or refreshes the failure report from `reporter` at `now` (§9.2). Returns `true`
    /// if it is a new report, `false` if an existing one was refreshed.
    pub fn add_failure_report(&mut self, reporter: NodeId, now: Millis) -> bool {
        self.failure_reports.insert(reporter, now).is_none()
    }

    /// Removes the failure report from `reporter`; returns whether there was one.
    pub fn remove_failure_report(&mut self, reporter: &NodeId) -> bool {
        self.failure_reports.remove(reporter).is_some()
    }

    /// Drops reports older than `validity_ms` (`now - time > validity_ms`; Valkey uses
    /// 2 × NODE_TIMEOUT, §9.2) and returns how many remain.
    pub fn count_valid_failure_reports(&mut self, now: Millis, validity_ms: u64) -> usize {
        self.failure_reports
            .retain(|_, at| now.since(*at) <= validity_ms);
        self.failure_reports.len()
    }
}

//! The views behind CLUSTER NODES / SLOTS / SHARDS / INFO / LINKS / MYID / MYSHARDID /
//! REPLICAS (facts sheet §19), computed from a [`Topology`] plus the run-time inputs the node
//! passes in (message counters, links, cluster state). Each returns a protocol-neutral
//! [`Reply`].
//!
//! Behaviour follows Valkey 8/9 (checked byte-for-byte against the Valkey 8.0 captures);
//! [`Flavor::Redis70`] switches the few places where Redis 7.0 differs.

use crate::nodes_conf::{write_node_line, LineStyle};
use crate::{Millis, Node, NodeId, Reply, ShardId, Topology};
use ferrocluster_slot::Slot;

/// Which server's reply shapes to imitate where they differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Flavor {
    /// Valkey 8.x / 9.x (the default).
    #[default]
    Valkey,
    /// Redis 7.0: CLUSTER SHARDS groups each primary with its replicas (no shard IDs, §21.1);
    /// CLUSTER MYSHARDID does not exist (the caller replies the unknown-subcommand error).
    Redis70,
}

/// `cluster-preferred-endpoint-type` (§1): what CLUSTER SLOTS / SHARDS / redirects name first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EndpointType {
    /// The client-facing IP (default).
    #[default]
    Ip,
    /// The hostname, `?` when the node has none.
    Hostname,
    /// Unknown: null in CLUSTER SLOTS, empty string in CLUSTER SHARDS.
    Unknown,
}

/// Per-request view options: who asks and how the server is configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ViewOptions {
    /// The requesting connection uses TLS: ports shown are TLS ports (§19.1, §19.2).
    pub tls_client: bool,
    /// The requesting connection is IPv6: announced `client-ipv6` is shown instead of
    /// `client-ipv4` (§19.1).
    pub ipv6_client: bool,
    /// `cluster-preferred-endpoint-type`.
    pub endpoint: EndpointType,
    /// Server flavour to imitate.
    pub flavor: Flavor,
    /// Add the shard-level `id` key to CLUSTER SHARDS (V9x #2568; release unverified, so off
    /// by default; the Valkey 8.0 captures do not have it).
    pub shard_id_in_shards: bool,
}

/// Bus message type names as CLUSTER INFO prints them, indexed by type number 0..=10
/// (§19.4; `CLUSTERMSG_TYPE_COUNT` = 11).
pub const MESSAGE_TYPE_NAMES: [&str; 11] = [
    "ping",
    "pong",
    "meet",
    "fail",
    "publish",
    "auth-req",
    "auth-ack",
    "update",
    "mfstart",
    "module",
    "publishshard",
];

/// Run-time inputs of CLUSTER INFO that the topology does not hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InfoInputs {
    /// The cluster state as last evaluated (§10): `true` = `ok`.
    pub state_ok: bool,
    /// Messages sent, per type number (index = type, [`MESSAGE_TYPE_NAMES`]).
    pub messages_sent: [u64; 11],
    /// Messages received, per type number.
    pub messages_received: [u64; 11],
    /// `total_cluster_links_buffer_limit_exceeded`.
    pub links_buffer_limit_exceeded: u64,
}

/// Direction of a bus link (§19.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkDirection {
    /// Outbound (we connected): `to`.
    To,
    /// Inbound (they connected): `from`.
    From,
}

/// One bus link as CLUSTER LINKS reports it; the node crate owns links and passes these in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkInfo {
    /// Direction.
    pub direction: LinkDirection,
    /// The node the link is bound to.
    pub node: NodeId,
    /// Creation time (Unix ms).
    pub create_time: Millis,
    /// Whether the connection is registered for reading.
    pub readable: bool,
    /// Whether the connection is registered for writing (data queued).
    pub writable: bool,
    /// Send buffer allocated, bytes.
    pub send_buffer_allocated: u64,
    /// Send buffer used, bytes.
    pub send_buffer_used: u64,
}

/// The CLUSTER NODES text (§19.1): one line per node (handshake nodes included) in table
/// order, each ending `\n`; myself carries its open-slot markers; no aux fields; hostname
/// appended as `,hostname` only when set.
pub fn cluster_nodes_text(topo: &Topology, opts: &ViewOptions) -> String {
    let style = LineStyle {
        conf: false,
        tls_client: opts.tls_client,
        ipv6_client: opts.ipv6_client,
    };
    let mut out = String::new();
    for n in topo.nodes() {
        write_node_line(topo, n, &style, &mut out);
        out.push('\n');
    }
    out
}

/// CLUSTER NODES as a reply: verbatim text (`txt`), a bulk string in RESP2.
pub fn cluster_nodes(topo: &Topology, opts: &ViewOptions) -> Reply {
    Reply::Verbatim(cluster_nodes_text(topo, opts))
}

/// CLUSTER REPLICAS / SLAVES `id` (§19.1): an array of node lines without trailing newline;
/// errors `ERR Unknown node <id>` and `ERR The specified node is not a master`.
pub fn cluster_replicas(topo: &Topology, id: &str, opts: &ViewOptions) -> Reply {
    let node = NodeId::parse(id).ok().and_then(|n| topo.node(&n));
    let Some(node) = node else {
        return Reply::Error(format!("ERR Unknown node {id}"));
    };
    if !node.is_primary() {
        return Reply::Error("ERR The specified node is not a master".to_owned());
    }
    let style = LineStyle {
        conf: false,
        tls_client: opts.tls_client,
        ipv6_client: opts.ipv6_client,
    };
    let lines = topo
        .replicas_of(node.id())
        .map(|r| {
            let mut s = String::new();
            write_node_line(topo, r, &style, &mut s);
            Reply::Bulk(s.into_bytes())
        })
        .collect();
    Reply::Array(lines)
}

fn client_ip_text(n: &Node, opts: &ViewOptions) -> String {
    n.client_ip(opts.ipv6_client)
        .map(|i| i.to_string())
        .unwrap_or_default()
}

fn client_port(n: &Node, opts: &ViewOptions) -> u16 {
    if opts.tls_client {
        n.tls_port
    } else {
        n.port
    }
}

/// A replica is listed in CLUSTER SLOTS only if not FAIL and its replication offset is not 0
/// (`isNodeAvailable`; both Valkey 8.0 and Redis 7.0 captures leave offset-0 replicas out).
fn replica_available(n: &Node) -> bool {
    !n.is_fail() && n.repl_offset != 0
}

fn slots_node_entry(n: &Node, opts: &ViewOptions) -> Reply {
    let preferred = match opts.endpoint {
        EndpointType::Ip => Reply::bulk(client_ip_text(n, opts)),
        EndpointType::Hostname => Reply::bulk(n.hostname.as_ref().map_or("?", |h| h.as_str())),
        EndpointType::Unknown => Reply::Null,
    };
    let mut meta = Vec::new();
    if opts.endpoint != EndpointType::Ip {
        meta.push((Reply::bulk("ip"), Reply::bulk(client_ip_text(n, opts))));
    }
    if opts.endpoint != EndpointType::Hostname {
        if let Some(h) = &n.hostname {
            meta.push((Reply::bulk("hostname"), Reply::bulk(h.as_str())));
        }
    }
    Reply::Array(vec![
        preferred,
        Reply::Integer(i64::from(client_port(n, opts))),
        Reply::bulk(n.id().as_str()),
        Reply::Map(meta),
    ])
}

/// CLUSTER SLOTS (§19.2): one entry per maximal run of consecutive slots with the same owner
/// (unowned slots omitted), in slot order: `[start, end, primary, replica...]`, each node
/// `[endpoint, port, id, {ip|hostname metadata}]`. Replicas (table order) are listed only when
/// not FAIL and with a non-zero replication offset.
pub fn cluster_slots(topo: &Topology, opts: &ViewOptions) -> Reply {
    let mut entries = Vec::new();
    let mut run: Option<(Slot, Slot, NodeId)> = None;
    let flush = |run: Option<(Slot, Slot, NodeId)>, entries: &mut Vec<Reply>| {
        if let Some((start, end, owner)) = run {
            if let Some(p) = topo.node(&owner) {
                let mut e = vec![
                    Reply::Integer(i64::from(start.get())),
                    Reply::Integer(i64::from(end.get())),
                    slots_node_entry(p, opts),
                ];
                e.extend(
                    topo.replicas_of(&owner)
                        .filter(|r| replica_available(r))
                        .map(|r| slots_node_entry(r, opts)),
                );
                entries.push(Reply::Array(e));
            }
        }
    };
    for s in Slot::all() {
        let owner = topo.slot_owner(s).copied();
        match (&mut run, owner) {
            (Some((_, end, cur)), Some(o)) if *cur == o => *end = s,
            (_, o) => {
                flush(run.take(), &mut entries);
                run = o.map(|o| (s, s, o));
            }
        }
    }
    flush(run, &mut entries);
    Reply::Array(entries)
}

fn health(n: &Node) -> &'static str {
    if n.is_fail() {
        "fail"
    } else if n.is_replica() && n.repl_offset == 0 {
        "loading"
    } else {
        "online"
    }
}

fn shard_node_entry(n: &Node, opts: &ViewOptions) -> Reply {
    let mut m = vec![(Reply::bulk("id"), Reply::bulk(n.id().as_str()))];
    if n.port != 0 {
        m.push((Reply::bulk("port"), Reply::Integer(i64::from(n.port))));
    }
    if n.tls_port != 0 {
        m.push((
            Reply::bulk("tls-port"),
            Reply::Integer(i64::from(n.tls_port)),
        ));
    }
    let ip = client_ip_text(n, opts);
    m.push((Reply::bulk("ip"), Reply::bulk(&ip)));
    let endpoint = match opts.endpoint {
        EndpointType::Ip => ip,
        EndpointType::Hostname => n.hostname.as_ref().map_or("?", |h| h.as_str()).to_owned(),
        EndpointType::Unknown => String::new(),
    };
    m.push((Reply::bulk("endpoint"), Reply::bulk(endpoint)));
    if let Some(h) = &n.hostname {
        m.push((Reply::bulk("hostname"), Reply::bulk(h.as_str())));
    }
    let role = if n.is_primary() { "master" } else { "replica" };
    m.push((Reply::bulk("role"), Reply::bulk(role)));
    m.push((
        Reply::bulk("replication-offset"),
        Reply::uint(n.repl_offset),
    ));
    m.push((Reply::bulk("health"), Reply::bulk(health(n))));
    Reply::Map(m)
}

fn shard_entry(
    topo: &Topology,
    members: &[&Node],
    shard: Option<ShardId>,
    o: &ViewOptions,
) -> Reply {
    // The shard's slots are its primary's. Valkey 8+ (`clusterGetPrimaryFromShard`) takes
    // the primary of the first member that is not FAIL: after a failover the first member
    // can be the old primary, which owns nothing any more — failed (then skipped), or, until
    // its demotion is heard, still shown as a primary. So a member that is a primary owning
    // slots and not FAIL is the shard's primary when there is one; otherwise Valkey's rule
    // (a shard whose primary failed before any failover shows that primary's slots); none
    // but FAIL members: no slots.
    let owner = members
        .iter()
        .find(|n| n.is_primary() && !n.is_fail() && n.slot_count() > 0)
        .or_else(|| members.iter().find(|n| !n.is_fail()))
        .map(|n| n.primary.and_then(|p| topo.node(&p)).unwrap_or(n));
    let mut slots = Vec::new();
    if let Some(p) = owner {
        for r in p.slots().ranges() {
            slots.push(Reply::Integer(i64::from(r.start().get())));
            slots.push(Reply::Integer(i64::from(r.end().get())));
        }
    }
    let mut m = vec![
        (Reply::bulk("slots"), Reply::Array(slots)),
        (
            Reply::bulk("nodes"),
            Reply::Array(members.iter().map(|n| shard_node_entry(n, o)).collect()),
        ),
    ];
    if let (true, Some(id)) = (o.shard_id_in_shards, shard) {
        m.push((Reply::bulk("id"), Reply::bulk(id.as_str())));
    }
    Reply::Map(m)
}

/// CLUSTER SHARDS (§19.3): one map per shard with `slots` (flat start/end pairs: the slots
/// of the shard's member that is a primary owning slots and not FAIL, else of the primary of
/// its first member that is not FAIL — Valkey 8+ `clusterGetPrimaryFromShard`, which shows a
/// failed-over shard without slots while its demoted old primary still looks like a primary;
/// empty when every member is FAIL) and `nodes`
/// (per node: `id`, `port` if non-zero, `tls-port` if non-zero, `ip`, `endpoint`, `hostname`
/// if set, `role`, `replication-offset`, `health` = `fail` / `loading` (replica with offset 0)
/// / `online`).
///
/// Order: Valkey uses its shard hash table's order for shards and the order nodes joined the
/// shard for members (file order right after loading nodes.conf, history-dependent later; a
/// former primary can precede the new one). We use table order for both: shards in the order
/// their first member appears in the node table, members in table order. With [`Flavor::Redis70`], shards are each primary with its replicas
/// (Redis 7.0 has no shard IDs).
pub fn cluster_shards(topo: &Topology, opts: &ViewOptions) -> Reply {
    let mut out = Vec::new();
    match opts.flavor {
        Flavor::Valkey => {
            let mut shards: Vec<ShardId> = Vec::new();
            for n in topo.nodes() {
                if !shards.contains(&n.shard_id) {
                    shards.push(n.shard_id);
                }
            }
            for s in shards {
                let members: Vec<&Node> = topo.shard_members(&s).collect();
                out.push(shard_entry(topo, &members, Some(s), opts));
            }
        }
        Flavor::Redis70 => {
            for p in topo.nodes().filter(|n| n.is_primary()) {
                let mut members = vec![p];
                members.extend(topo.replicas_of(p.id()));
                out.push(shard_entry(topo, &members, None, opts));
            }
        }
    }
    Reply::Array(out)
}

/// The CLUSTER INFO text (§19.4), lines ending `\r\n`, fields in the real order:
/// state, slots assigned/ok/pfail/fail (a slot counts as fail/pfail by its owner's flag),
/// known nodes (handshake included), size (voting primaries), current epoch, my epoch
/// (my primary's configEpoch for a replica), then per message type with a non-zero count
/// `cluster_stats_messages_<type>_sent`, the sent total, the same for received, and
/// `total_cluster_links_buffer_limit_exceeded`.
pub fn cluster_info_text(topo: &Topology, inputs: &InfoInputs) -> String {
    let (mut assigned, mut ok, mut pfail, mut fail) = (0u64, 0u64, 0u64, 0u64);
    for s in Slot::all() {
        if let Some(n) = topo.slot_owner(s).and_then(|o| topo.node(o)) {
            assigned += 1;
            if n.is_fail() {
                fail += 1;
            } else if n.is_pfail() {
                pfail += 1;
            } else {
                ok += 1;
            }
        }
    }
    let mut out = String::new();
    let mut line = |k: &str, v: &dyn std::fmt::Display| {
        out.push_str(k);
        out.push(':');
        out.push_str(&v.to_string());
        out.push_str("\r\n");
    };
    line(
        "cluster_state",
        &if inputs.state_ok { "ok" } else { "fail" },
    );
    line("cluster_slots_assigned", &assigned);
    line("cluster_slots_ok", &ok);
    line("cluster_slots_pfail", &pfail);
    line("cluster_slots_fail", &fail);
    line("cluster_known_nodes", &topo.len());
    line("cluster_size", &topo.cluster_size());
    line("cluster_current_epoch", &topo.current_epoch);
    line(
        "cluster_my_epoch",
        &topo.reported_config_epoch(topo.myself()),
    );
    for (dir, counts) in [
        ("sent", &inputs.messages_sent),
        ("received", &inputs.messages_received),
    ] {
        let mut total = 0u64;
        for (name, &c) in MESSAGE_TYPE_NAMES.iter().zip(counts.iter()) {
            if c != 0 {
                line(&format!("cluster_stats_messages_{name}_{dir}"), &c);
                total = total.saturating_add(c);
            }
        }
        line(&format!("cluster_stats_messages_{dir}"), &total);
    }
    line(
        "total_cluster_links_buffer_limit_exceeded",
        &inputs.links_buffer_limit_exceeded,
    );
    out
}

/// CLUSTER INFO as a reply: verbatim text (`txt`), a bulk string in RESP2.
pub fn cluster_info(topo: &Topology, inputs: &InfoInputs) -> Reply {
    Reply::Verbatim(cluster_info_text(topo, inputs))
}

/// CLUSTER LINKS (§19.5): one map per link with `direction` (`to`/`from`), `node`,
/// `create-time` (ms), `events` (`r`, `w`, `rw` or empty), `send-buffer-allocated`,
/// `send-buffer-used`, in the order given.
pub fn cluster_links(links: &[LinkInfo]) -> Reply {
    Reply::Array(
        links
            .iter()
            .map(|l| {
                let dir = match l.direction {
                    LinkDirection::To => "to",
                    LinkDirection::From => "from",
                };
                let events = match (l.readable, l.writable) {
                    (true, true) => "rw",
                    (true, false) => "r",
                    (false, true) => "w",
                    (false, false) => "",
                };
                Reply::Map(vec![
                    (Reply::bulk("direction"), Reply::bulk(dir)),
                    (Reply::bulk("node"), Reply::bulk(l.node.as_str())),
                    (
                        Reply::bulk("create-time"),
                        Reply::uint(l.create_time.as_u64()),
                    ),
                    (Reply::bulk("events"), Reply::bulk(events)),
                    (
                        Reply::bulk("send-buffer-allocated"),
                        Reply::uint(l.send_buffer_allocated),
                    ),
                    (
                        Reply::bulk("send-buffer-used"),
                        Reply::uint(l.send_buffer_used),
                    ),
                ])
            })
            .collect(),
    )
}

/// CLUSTER MYID: my node ID as a bulk string.
pub fn cluster_myid(topo: &Topology) -> Reply {
    Reply::bulk(topo.myself_id().as_str())
}

/// CLUSTER MYSHARDID (V72+): my shard ID as a bulk string. Redis 7.0 has no such
/// subcommand (it replies `ERR unknown subcommand 'MYSHARDID'. Try CLUSTER HELP.`).
pub fn cluster_myshardid(topo: &Topology) -> Reply {
    Reply::bulk(topo.myself().shard_id.as_str())
}

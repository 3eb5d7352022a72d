//! Typed parsing of `CLUSTER <subcommand> ...` argv (Valkey 8 `clusterCommand`,
//! `clusterCommandSpecial`, `clusterParseSetSlotCommand`, `clusterSlotStatsCommand`).
//!
//! [`parse_cluster`] reports every error the real server reports before it looks at any
//! cluster state, with the real texts. Where Valkey checks state *before* some argument
//! (SETSLOT checks "am I a replica" before the slot; *RANGE checks each pair's assignment
//! before parsing the next pair; SETSLOT checks the node before the TIMEOUT), the later
//! argument errors are carried inside the parsed value so the node can report them in the
//! same order.

use crate::args::{c_str, eq_ignore_case, parse_i64};
use crate::error::{ClusterError, CommandError};
use crate::table::{resolve, CommandKind};
use bytes::Bytes;
use ferrocluster_slot::{key_hash_slot, Slot, SLOT_COUNT};
use ferrocluster_topology::NodeId;
use std::net::IpAddr;

/// `CLUSTER_OPERATION_TIMEOUT`: the default SETSLOT replication timeout, 2000 ms (§1).
pub const SETSLOT_DEFAULT_TIMEOUT_MS: u64 = 2000;

/// The CLUSTER HELP reply: each line is sent as a simple string, in this order (Valkey
/// `clusterCommandHelp` + `clusterCommandExtendedHelp` through `addExtendedReplyHelp`:
/// header, the common part, the legacy-bus part, the HELP footer). Not captured; taken from
/// the Valkey sources (`src/cluster.c`, `src/cluster_legacy.c`).
pub const CLUSTER_HELP: &[&str] = &[
    "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "COUNTKEYSINSLOT <slot>",
    "    Return the number of keys in <slot>.",
    "GETKEYSINSLOT <slot> <count>",
    "    Return key names stored by current node in a slot.",
    "INFO",
    "    Return information about the cluster.",
    "KEYSLOT <key>",
    "    Return the hash slot for <key>.",
    "MYID",
    "    Return the node id.",
    "MYSHARDID",
    "    Return the node's shard id.",
    "NODES",
    "    Return cluster configuration seen by node. Output format:",
    "    <id> <ip:port@bus-port[,hostname]> <flags> <primary> <pings> <pongs> <epoch> <link> <slot> ...",
    "REPLICAS <node-id>",
    "    Return <node-id> replicas.",
    "SLOTS",
    "    Return information about slots range mappings. Each range is made of:",
    "    start, end, primary and replicas IP addresses, ports and ids",
    "SLOT-STATS",
    "    Return an array of slot usage statistics for slots assigned to the current node.",
    "SHARDS",
    "    Return information about slot range mappings and the nodes associated with them.",
    "ADDSLOTS <slot> [<slot> ...]",
    "    Assign slots to current node.",
    "ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Assign slots which are between <start-slot> and <end-slot> to current node.",
    "BUMPEPOCH",
    "    Advance the cluster config epoch.",
    "COUNT-FAILURE-REPORTS <node-id>",
    "    Return number of failure reports for <node-id>.",
    "DELSLOTS <slot> [<slot> ...]",
    "    Delete slots information from current node.",
    "DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Delete slots information which are between <start-slot> and <end-slot> from current node.",
    "FAILOVER [FORCE|TAKEOVER]",
    "    Promote current replica node to being a master.",
    "FORGET <node-id>",
    "    Remove a node from the cluster.",
    "FLUSHSLOTS",
    "    Delete current node own slots information.",
    "MEET <ip> <port> [<bus-port>]",
    "    Connect nodes into a working cluster.",
    "REPLICATE <node-id>",
    "    Configure current node as replica to <node-id>.",
    "RESET [HARD|SOFT]",
    "    Reset current node (default: soft).",
    "SET-CONFIG-EPOCH <epoch>",
    "    Set config epoch of current node.",
    "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
    "    Set slot state.",
    "SAVECONFIG",
    "    Force saving cluster configuration on disk.",
    "LINKS",
    "    Return information about all network links between this node and its peers.",
    "    Output format is an array where each array element is a map containing attributes of a link",
    "HELP",
    "    Print this help.",
];

/// A node-ID argument: the bytes as sent (error texts echo them) and the ID when they form a
/// valid one. An invalid ID is never a known node (Valkey `clusterLookupNode` checks
/// `verifyClusterNodeId` first), so the node reports it as unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeArg {
    raw: Bytes,
    id: Option<NodeId>,
}

impl NodeArg {
    fn new(arg: &[u8]) -> NodeArg {
        NodeArg {
            raw: Bytes::copy_from_slice(arg),
            id: NodeId::from_bytes(arg).ok(),
        }
    }
    /// The argument as sent.
    pub fn raw(&self) -> &Bytes {
        &self.raw
    }
    /// The node ID, if the argument is a valid one (40 × `a-z0-9`).
    pub fn id(&self) -> Option<&NodeId> {
        self.id.as_ref()
    }
    /// `Unknown node <arg>`.
    pub fn unknown(&self) -> ClusterError {
        ClusterError::UnknownNode(self.raw.clone())
    }
    /// `I don't know about node <arg>`.
    pub fn dont_know(&self) -> ClusterError {
        ClusterError::DontKnowNode(self.raw.clone())
    }
}

/// The slots of ADDSLOTS / DELSLOTS (each slot as a one-slot range) or the pairs of
/// ADDSLOTSRANGE / DELSLOTSRANGE.
///
/// Valkey parses all ADDSLOTS/DELSLOTS arguments first, so `error` is always `None` for them.
/// For the *RANGE forms it checks each pair's assignment before parsing the next pair:
/// `ranges` holds the pairs before the first bad one and `error` that pair's error
/// (`Invalid or out of range slot` or `start slot number .. is greater than ..`). The node
/// checks the assignments of `ranges` in order ([`crate::check::check_slot_assignments`]) and
/// reports `error` only if they all pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotArgs {
    /// Inclusive `(start, end)` pairs in argument order.
    pub ranges: Vec<(Slot, Slot)>,
    /// The error of the first malformed pair (RANGE forms only).
    pub error: Option<ClusterError>,
}

/// The action of CLUSTER SETSLOT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetSlotAction {
    /// `IMPORTING <node-id>`. Node checks, in order: `I'm already the owner of hash slot
    /// <n>` (myself owns it), `I don't know about node <id>`, `Target node is not a master`.
    Importing(NodeArg),
    /// `MIGRATING <node-id>`. Node checks, in order: `I'm not the owner of hash slot <n>`
    /// (myself is a primary not owning it), `I don't know about node <id>`, `Target node is
    /// not a master`.
    Migrating(NodeArg),
    /// `STABLE`.
    Stable,
    /// `NODE <node-id>`. Node checks, in order: `Unknown node <id>`, `Target node is not a
    /// master`, `Can't assign hashslot <n> to a different node while I still hold keys for
    /// this hash slot.` (myself owns it, the target is another node, keys remain).
    Node(NodeArg),
}

/// The optional `TIMEOUT <ms>` of SETSLOT (Valkey 8): how long a primary waits for its
/// replicas to acknowledge the replicated SETSLOT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetSlotTimeout(Option<u64>);

impl SetSlotTimeout {
    /// The timeout as given: `None` = not given (default [`SETSLOT_DEFAULT_TIMEOUT_MS`]),
    /// `Some(0)` = wait forever, else milliseconds.
    pub fn given_ms(&self) -> Option<u64> {
        self.0
    }

    /// The absolute deadline for a command received at `now_ms` (Unix ms): `None` = no
    /// deadline (`TIMEOUT 0`).
    ///
    /// # Errors
    /// [`ClusterError::TimeoutOutOfRange`] when `now_ms + timeout` exceeds `i64::MAX`
    /// (Valkey `getTimeoutFromObjectOrReply`).
    pub fn deadline_ms(&self, now_ms: u64) -> Result<Option<u64>, ClusterError> {
        let t = match self.0 {
            None => SETSLOT_DEFAULT_TIMEOUT_MS,
            Some(0) => return Ok(None),
            Some(t) => t,
        };
        let d = now_ms
            .checked_add(t)
            .ok_or(ClusterError::TimeoutOutOfRange)?;
        if d > i64::MAX as u64 {
            return Err(ClusterError::TimeoutOutOfRange);
        }
        Ok(Some(d))
    }
}

/// CLUSTER SETSLOT arguments after the slot and action checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetSlot {
    /// The slot.
    pub slot: Slot,
    /// The action.
    pub action: SetSlotAction,
    /// The TIMEOUT option, or its error (`Missing timeout value`, `timeout is not an integer
    /// or out of range`, `timeout is negative`), which Valkey reports after the action's state
    /// checks. Unknown trailing arguments are ignored, as in Valkey.
    pub timeout: Result<SetSlotTimeout, ClusterError>,
}

/// CLUSTER FAILOVER's option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailoverMode {
    /// No option: coordinated manual failover.
    Default,
    /// FORCE.
    Force,
    /// TAKEOVER.
    Takeover,
}

/// A CLUSTER SLOT-STATS metric (slot-migration sheet D.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotStatsMetric {
    /// `key-count`.
    KeyCount,
    /// `cpu-usec` (only with `cluster-slot-stats-enabled`).
    CpuUsec,
    /// `network-bytes-in` (only with `cluster-slot-stats-enabled`).
    NetworkBytesIn,
    /// `network-bytes-out` (only with `cluster-slot-stats-enabled`).
    NetworkBytesOut,
}

/// A CLUSTER SLOT-STATS query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotStatsQuery {
    /// `SLOTSRANGE start end`.
    Range {
        /// First slot.
        start: Slot,
        /// Last slot (inclusive).
        end: Slot,
    },
    /// `ORDERBY metric [LIMIT n] [ASC|DESC]`.
    OrderBy {
        /// Sort metric.
        metric: SlotStatsMetric,
        /// At most this many slots (1..=16384, default 16384).
        limit: u16,
        /// Descending (default) or ascending.
        descending: bool,
    },
}

/// A parsed CLUSTER subcommand. State errors the node reports for each are listed on the
/// variant, in Valkey's order.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClusterCommand {
    /// HELP: reply [`CLUSTER_HELP`].
    Help,
    /// NODES.
    Nodes,
    /// MYID.
    MyId,
    /// MYSHARDID (Valkey; Redis 7.0 answers `unknown subcommand 'MYSHARDID'`).
    MyShardId,
    /// SLOTS.
    Slots,
    /// SHARDS.
    Shards,
    /// INFO.
    Info,
    /// LINKS.
    Links,
    /// BUMPEPOCH: reply `+BUMPED <epoch>` or `+STILL <epoch>`.
    BumpEpoch,
    /// SAVECONFIG. State: `error saving the cluster node config: ..`.
    SaveConfig,
    /// FLUSHSLOTS. State: `DB must be empty to perform CLUSTER FLUSHSLOTS.`
    FlushSlots,
    /// KEYSLOT key: reply the slot as an integer.
    KeySlot(Slot),
    /// COUNTKEYSINSLOT slot (in the selected DB).
    CountKeysInSlot(Slot),
    /// GETKEYSINSLOT slot count (in the selected DB).
    GetKeysInSlot {
        /// The slot.
        slot: Slot,
        /// At most this many keys.
        count: u64,
    },
    /// REPLICAS / SLAVES node. State: `Unknown node`, `The specified node is not a master`.
    Replicas(NodeArg),
    /// ADDSLOTS. State per slot: `Slot <n> is already busy`, `Slot <n> specified multiple
    /// times`.
    AddSlots(SlotArgs),
    /// DELSLOTS. State per slot: `Slot <n> is already unassigned`, `.. multiple times`.
    DelSlots(SlotArgs),
    /// ADDSLOTSRANGE (see [`SlotArgs`] for the error order).
    AddSlotsRange(SlotArgs),
    /// DELSLOTSRANGE (see [`SlotArgs`]).
    DelSlotsRange(SlotArgs),
    /// SETSLOT. The node first checks `Please use SETSLOT only with masters.` (myself a
    /// replica and the command not from its primary), then reports the `Err` inside, then the
    /// action's checks ([`SetSlotAction`]), then [`SetSlot::timeout`]'s error.
    SetSlot(Result<SetSlot, ClusterError>),
    /// MEET ip port [bus-port] (validated: IP syntax, ports in 1..=65535; the bus port
    /// defaults to port + 10000). A handshake already in progress is `+OK` too.
    Meet {
        /// The address.
        ip: IpAddr,
        /// Client port.
        port: u16,
        /// Cluster bus port.
        bus_port: u16,
    },
    /// FORGET node. State: `Unknown node` (but `+OK` if the ID is in the FORGET ban list,
    /// Valkey 8; Redis 7.0 answers `Unknown node`), `I tried hard but I can't forget
    /// myself...`, `Can't forget my master!`.
    Forget(NodeArg),
    /// REPLICATE node. State: `Unknown node`, `Can't replicate myself`, `I can only
    /// replicate a master, not a replica.`, `To set a master the node must be empty and
    /// without assigned slots.`
    Replicate(NodeArg),
    /// COUNT-FAILURE-REPORTS node. State: `Unknown node`.
    CountFailureReports(NodeArg),
    /// FAILOVER [FORCE|TAKEOVER]. State: `You should send CLUSTER FAILOVER to a replica`,
    /// `I'm a replica but my master is unknown to me`, `Master is down or failed, please use
    /// CLUSTER FAILOVER FORCE` (without FORCE/TAKEOVER).
    Failover(FailoverMode),
    /// SET-CONFIG-EPOCH epoch (non-negative). State: `The user can assign a config epoch only
    /// when the node does not know any other node.`, `Node config epoch is already non-zero`.
    SetConfigEpoch(u64),
    /// RESET [HARD|SOFT] (`hard` false = soft, the default). State: `CLUSTER RESET can't be
    /// called with master nodes containing keys`.
    Reset {
        /// HARD.
        hard: bool,
    },
    /// SLOT-STATS.
    SlotStats(SlotStatsQuery),
}

/// Configuration that changes how CLUSTER arguments parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ParseOptions {
    /// `cluster-slot-stats-enabled`: without it only `key-count` is a SLOT-STATS metric.
    pub slot_stats_enabled: bool,
}

fn get_slot(arg: &[u8]) -> Result<Slot, ClusterError> {
    match parse_i64(arg) {
        Some(n) if (0..SLOT_COUNT as i64).contains(&n) => Ok(Slot::from_masked(n as u16)),
        _ => Err(ClusterError::InvalidSlot),
    }
}

fn not_integer() -> ClusterError {
    ClusterError::Command(CommandError::NotAnInteger)
}

fn syntax() -> ClusterError {
    ClusterError::Command(CommandError::Syntax)
}

/// Parses `CLUSTER <subcommand> ...` (argv\[0\] is `CLUSTER`, any case).
///
/// # Errors
/// Table-level errors first (as Valkey's `processCommand`): `unknown subcommand '<sub>'. Try
/// CLUSTER HELP.` and `wrong number of arguments for 'cluster|<sub>' command`; then the
/// subcommand's own argument errors with Valkey 8's texts (see [`ClusterError`]), or `unknown
/// subcommand or wrong number of arguments for '<sub>'. Try CLUSTER HELP.` for argument counts
/// the table allows but the subcommand does not. An argv whose first word is not CLUSTER is
/// an unknown command.
pub fn parse_cluster<A: AsRef<[u8]>>(
    argv: &[A],
    opts: ParseOptions,
) -> Result<ClusterCommand, ClusterError> {
    let spec = resolve(argv)?;
    if spec.kind != CommandKind::ClusterSub {
        let name = argv
            .first()
            .map(|a| Bytes::copy_from_slice(a.as_ref()))
            .unwrap_or_default();
        return Err(CommandError::UnknownCommand {
            name,
            args: Vec::new(),
        }
        .into());
    }
    let a = |i: usize| argv[i].as_ref();
    let argc = argv.len();
    let sub_syntax = || -> ClusterError {
        CommandError::SubcommandSyntax {
            container: String::from_utf8_lossy(a(0)).to_ascii_uppercase(),
            sub: Bytes::copy_from_slice(a(1)),
        }
        .into()
    };
    // The arity was checked by `resolve`, so every index below exists.
    Ok(match &spec.name["cluster|".len()..] {
        "help" => ClusterCommand::Help,
        "nodes" => ClusterCommand::Nodes,
        "myid" => ClusterCommand::MyId,
        "myshardid" => ClusterCommand::MyShardId,
        "slots" => ClusterCommand::Slots,
        "shards" => ClusterCommand::Shards,
        "info" => ClusterCommand::Info,
        "links" => ClusterCommand::Links,
        "bumpepoch" => ClusterCommand::BumpEpoch,
        "saveconfig" => ClusterCommand::SaveConfig,
        "flushslots" => ClusterCommand::FlushSlots,
        "keyslot" => ClusterCommand::KeySlot(key_hash_slot(a(2))),
        "countkeysinslot" => {
            let n = parse_i64(a(2)).ok_or_else(not_integer)?;
            if !(0..SLOT_COUNT as i64).contains(&n) {
                return Err(ClusterError::InvalidSlotNumber);
            }
            ClusterCommand::CountKeysInSlot(Slot::from_masked(n as u16))
        }
        "getkeysinslot" => {
            let slot = parse_i64(a(2)).ok_or_else(not_integer)?;
            let count = parse_i64(a(3)).ok_or_else(not_integer)?;
            if !(0..SLOT_COUNT as i64).contains(&slot) || count < 0 {
                return Err(ClusterError::InvalidSlotOrCount);
            }
            ClusterCommand::GetKeysInSlot {
                slot: Slot::from_masked(slot as u16),
                count: count as u64,
            }
        }
        "replicas" | "slaves" => ClusterCommand::Replicas(NodeArg::new(a(2))),
        "addslots" | "delslots" => {
            let mut ranges = Vec::with_capacity(argc - 2);
            for i in 2..argc {
                let s = get_slot(a(i))?;
                ranges.push((s, s));
            }
            let args = SlotArgs {
                ranges,
                error: None,
            };
            if spec.name == "cluster|addslots" {
                ClusterCommand::AddSlots(args)
            } else {
                ClusterCommand::DelSlots(args)
            }
        }
        "addslotsrange" | "delslotsrange" => {
            if argc % 2 == 1 {
                return Err(CommandError::WrongArity {
                    fullname: spec.name,
                }
                .into());
            }
            let mut args = SlotArgs {
                ranges: Vec::new(),
                error: None,
            };
            for i in (2..argc).step_by(2) {
                let pair = get_slot(a(i))
                    .and_then(|s| Ok((s, get_slot(a(i + 1))?)))
                    .and_then(|(start, end)| {
                        if start > end {
                            Err(ClusterError::StartAfterEnd { start, end })
                        } else {
                            Ok((start, end))
                        }
                    });
                match pair {
                    Ok(p) => args.ranges.push(p),
                    Err(e) => {
                        args.error = Some(e);
                        break;
                    }
                }
            }
            if spec.name == "cluster|addslotsrange" {
                ClusterCommand::AddSlotsRange(args)
            } else {
                ClusterCommand::DelSlotsRange(args)
            }
        }
        "setslot" => ClusterCommand::SetSlot(parse_setslot(argv)),
        "meet" => {
            if argc != 4 && argc != 5 {
                return Err(sub_syntax());
            }
            let port = parse_i64(a(3))
                .ok_or_else(|| ClusterError::InvalidBasePort(Bytes::copy_from_slice(a(3))))?;
            let bus = if argc == 5 {
                parse_i64(a(4))
                    .ok_or_else(|| ClusterError::InvalidBusPort(Bytes::copy_from_slice(a(4))))?
            } else {
                port.saturating_add(10_000)
            };
            let invalid = || ClusterError::InvalidNodeAddress {
                ip: Bytes::copy_from_slice(a(2)),
                port: Bytes::copy_from_slice(a(3)),
            };
            let ip: IpAddr = std::str::from_utf8(c_str(a(2)))
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(invalid)?;
            let in_range = |p: i64| (1..=65_535).contains(&p);
            if !in_range(port) || !in_range(bus) {
                return Err(invalid());
            }
            // Both are in 1..=65535 (checked just above).
            ClusterCommand::Meet {
                ip,
                port: port as u16,
                bus_port: bus as u16,
            }
        }
        "forget" => ClusterCommand::Forget(NodeArg::new(a(2))),
        "replicate" => ClusterCommand::Replicate(NodeArg::new(a(2))),
        "count-failure-reports" => ClusterCommand::CountFailureReports(NodeArg::new(a(2))),
        "failover" => match argc {
            2 => ClusterCommand::Failover(FailoverMode::Default),
            3 if eq_ignore_case(a(2), "force") => ClusterCommand::Failover(FailoverMode::Force),
            3 if eq_ignore_case(a(2), "takeover") => {
                ClusterCommand::Failover(FailoverMode::Takeover)
            }
            3 => return Err(syntax()),
            _ => return Err(sub_syntax()),
        },
        "set-config-epoch" => {
            let epoch = parse_i64(a(2)).ok_or_else(not_integer)?;
            if epoch < 0 {
                return Err(ClusterError::InvalidConfigEpoch(epoch));
            }
            ClusterCommand::SetConfigEpoch(epoch as u64)
        }
        "reset" => match argc {
            2 => ClusterCommand::Reset { hard: false },
            3 if eq_ignore_case(a(2), "hard") => ClusterCommand::Reset { hard: true },
            3 if eq_ignore_case(a(2), "soft") => ClusterCommand::Reset { hard: false },
            3 => return Err(syntax()),
            _ => return Err(sub_syntax()),
        },
        "slot-stats" => {
            ClusterCommand::SlotStats(parse_slot_stats(argv, opts).map_err(|e| match e {
                None => sub_syntax(),
                Some(e) => e,
            })?)
        }
        // The subcommand table and this match list the same names (tested).
        _ => return Err(sub_syntax()),
    })
}

fn parse_setslot<A: AsRef<[u8]>>(argv: &[A]) -> Result<SetSlot, ClusterError> {
    let a = |i: usize| argv[i].as_ref();
    let argc = argv.len();
    let slot = get_slot(a(2))?;
    let (action, optarg) = if eq_ignore_case(a(3), "migrating") && argc >= 5 {
        (SetSlotAction::Migrating(NodeArg::new(a(4))), 5)
    } else if eq_ignore_case(a(3), "importing") && argc >= 5 {
        (SetSlotAction::Importing(NodeArg::new(a(4))), 5)
    } else if eq_ignore_case(a(3), "stable") {
        (SetSlotAction::Stable, 4)
    } else if eq_ignore_case(a(3), "node") && argc >= 5 {
        (SetSlotAction::Node(NodeArg::new(a(4))), 5)
    } else {
        return Err(ClusterError::SetSlotAction);
    };
    // After the action only `TIMEOUT <ms>` pairs may follow (Valkey 8's one option); any other
    // trailing argument is the action error, as Redis 7's exact argument counts give it
    // (`CLUSTER SETSLOT 5 STABLE extra` -> "Invalid CLUSTER SETSLOT action or number of
    // arguments. Try CLUSTER HELP").
    let mut i = optarg;
    while i < argc {
        if !eq_ignore_case(a(i), "timeout") {
            return Err(ClusterError::SetSlotAction);
        }
        i += 2;
    }
    let mut timeout = Ok(SetSlotTimeout(None));
    let mut i = optarg;
    while i < argc {
        // Every argument at an even distance from `optarg` is TIMEOUT (checked above).
        if i + 1 >= argc {
            timeout = Err(ClusterError::MissingTimeout);
            break;
        }
        match parse_i64(a(i + 1)) {
            None => {
                timeout = Err(ClusterError::TimeoutNotInteger);
                break;
            }
            Some(t) if t < 0 => {
                timeout = Err(ClusterError::TimeoutNegative);
                break;
            }
            // t >= 0 here.
            Some(t) => timeout = Ok(SetSlotTimeout(Some(t as u64))),
        }
        i += 2;
    }
    Ok(SetSlot {
        slot,
        action,
        timeout,
    })
}

/// `Err(None)` = the generic subcommand syntax error.
fn parse_slot_stats<A: AsRef<[u8]>>(
    argv: &[A],
    opts: ParseOptions,
) -> Result<SlotStatsQuery, Option<ClusterError>> {
    let a = |i: usize| argv[i].as_ref();
    let argc = argv.len();
    if argc == 5 && eq_ignore_case(a(2), "slotsrange") {
        let start = get_slot(a(3)).map_err(Some)?;
        let end = get_slot(a(4)).map_err(Some)?;
        if start > end {
            return Err(Some(ClusterError::StatsStartAfterEnd { start, end }));
        }
        return Ok(SlotStatsQuery::Range { start, end });
    }
    if !(argc >= 4 && eq_ignore_case(a(2), "orderby")) {
        return Err(None);
    }
    let metric = if eq_ignore_case(a(3), "key-count") {
        SlotStatsMetric::KeyCount
    } else if opts.slot_stats_enabled && eq_ignore_case(a(3), "cpu-usec") {
        SlotStatsMetric::CpuUsec
    } else if opts.slot_stats_enabled && eq_ignore_case(a(3), "network-bytes-in") {
        SlotStatsMetric::NetworkBytesIn
    } else if opts.slot_stats_enabled && eq_ignore_case(a(3), "network-bytes-out") {
        SlotStatsMetric::NetworkBytesOut
    } else {
        return Err(Some(ClusterError::UnrecognizedSortMetric));
    };
    let (mut limit, mut descending) = (SLOT_COUNT as u16, true);
    let (mut limits, mut orders) = (0, 0);
    let mut i = 4;
    while i < argc {
        if eq_ignore_case(a(i), "limit") && argc > i + 1 {
            match parse_i64(a(i + 1)) {
                Some(n) if (1..=SLOT_COUNT as i64).contains(&n) => limit = n as u16,
                _ => return Err(Some(ClusterError::InvalidLimit)),
            }
            i += 1;
            limits += 1;
        } else if eq_ignore_case(a(i), "asc") {
            descending = false;
            orders += 1;
        } else if eq_ignore_case(a(i), "desc") {
            descending = true;
            orders += 1;
        } else {
            return Err(Some(syntax()));
        }
        if limits > 1 || orders > 1 {
            return Err(Some(ClusterError::MultipleFilters));
        }
        i += 1;
    }
    Ok(SlotStatsQuery::OrderBy {
        metric,
        limit,
        descending,
    })
}

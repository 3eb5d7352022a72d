//! Error replies with the exact texts real servers send.
//!
//! Every error type here renders to the bytes of one RESP error line: [`ErrorReply::text`] is
//! the line without the leading `-` and the trailing CRLF (it starts with the error code,
//! `ERR`, `MOVED`, `CROSSSLOT`, ...), [`ErrorReply::to_resp`] the whole line. `Display` shows
//! the same text (lossily, when a client argument echoed in it is not UTF-8).
//!
//! Client arguments echoed in a text are printed as the C servers print them with `%s`: up to
//! the first NUL byte; `\r` and `\n` become spaces in the final line, as Valkey's
//! `addReplyErrorLength` does, so a reply can never break the protocol.

use crate::args::{c_str, c_str_max};
use bytes::Bytes;
use ferrocluster_slot::Slot;
use ferrocluster_topology::NodeId;
use std::fmt;
use std::io::Write as _;

/// An error that is sent to a client as one RESP error line.
pub trait ErrorReply {
    /// Appends the error text (code first, e.g. `ERR Slot 0 is already busy`; no `-`, no CRLF).
    fn write_text(&self, out: &mut Vec<u8>);

    /// The error text (code first, no `-`, no CRLF).
    fn text(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        self.write_text(&mut out);
        out
    }

    /// The complete RESP2/RESP3 error line: `-` + text + `\r\n`, with any `\r`/`\n` inside the
    /// text replaced by spaces (the same bytes in both protocol versions).
    fn to_resp(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(66);
        out.push(b'-');
        self.write_text(&mut out);
        for b in &mut out[1..] {
            if *b == b'\r' || *b == b'\n' {
                *b = b' ';
            }
        }
        out.extend_from_slice(b"\r\n");
        out
    }
}

macro_rules! display_via_text {
    ($t:ty) => {
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&String::from_utf8_lossy(&self.text()))
            }
        }
        impl std::error::Error for $t {}
    };
}

/// Where a redirection points: the slot, the node, and the endpoint text the client is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// The hash slot of the request.
    pub slot: Slot,
    /// The node the client is sent to.
    pub node: NodeId,
    /// The preferred endpoint (`cluster-preferred-endpoint-type`): the client-facing IP (IPv6
    /// without brackets), the hostname (`?` if none), or empty for `unknown-endpoint`.
    pub endpoint: String,
    /// The node's client port: its TLS port for a TLS connection, else its TCP port.
    pub port: u16,
}

/// The outcome of a routing decision that is not "serve here" (facts sheet §20.4; Valkey
/// `clusterRedirectClient`). Texts are identical in Redis 7.0 and Valkey 8 (captured).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RouteError {
    /// `CROSSSLOT Keys in request don't hash to the same slot`.
    CrossSlot,
    /// `TRYAGAIN Multiple keys request during rehashing of slot`.
    TryAgain,
    /// `CLUSTERDOWN The cluster is down`.
    ClusterDown,
    /// `CLUSTERDOWN The cluster is down and only accepts read commands`.
    ClusterDownReadOnly,
    /// `CLUSTERDOWN Hash slot not served`.
    SlotNotServed,
    /// `MOVED <slot> <endpoint>:<port>`.
    Moved(Redirect),
    /// `ASK <slot> <endpoint>:<port>`.
    Ask(Redirect),
}

impl ErrorReply for RouteError {
    fn write_text(&self, out: &mut Vec<u8>) {
        let fixed: &str = match self {
            RouteError::CrossSlot => "CROSSSLOT Keys in request don't hash to the same slot",
            RouteError::TryAgain => "TRYAGAIN Multiple keys request during rehashing of slot",
            RouteError::ClusterDown => "CLUSTERDOWN The cluster is down",
            RouteError::ClusterDownReadOnly => {
                "CLUSTERDOWN The cluster is down and only accepts read commands"
            }
            RouteError::SlotNotServed => "CLUSTERDOWN Hash slot not served",
            RouteError::Moved(r) | RouteError::Ask(r) => {
                let code = if matches!(self, RouteError::Ask(_)) {
                    "ASK"
                } else {
                    "MOVED"
                };
                // Writing into a Vec cannot fail.
                let _ = write!(out, "{code} {} {}:{}", r.slot, r.endpoint, r.port);
                return;
            }
        };
        out.extend_from_slice(fixed.as_bytes());
    }
}
display_via_text!(RouteError);

/// General command errors (not specific to CLUSTER subcommands), with Valkey's texts.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CommandError {
    /// `ERR unknown command '<name>', with args beginning with: '<a1>' '<a2>' ` (Valkey
    /// `processCommand`: name cut to 128 bytes; arguments added while the list is shorter
    /// than 128 bytes, each cut so the list stays within 128).
    UnknownCommand {
        /// The command name as sent.
        name: Bytes,
        /// The arguments as sent.
        args: Vec<Bytes>,
    },
    /// `ERR unknown subcommand '<sub>'. Try <CONTAINER> HELP.` (sub cut to 128 bytes).
    UnknownSubcommand {
        /// The container command name, uppercased (`CLUSTER`).
        container: String,
        /// The subcommand as sent.
        sub: Bytes,
    },
    /// `ERR wrong number of arguments for '<fullname>' command`, with the table's full name
    /// (`get`, `cluster|setslot`), checked before the command runs.
    WrongArity {
        /// Full lowercase name (`container|sub` for subcommands).
        fullname: &'static str,
    },
    /// `ERR unknown subcommand or wrong number of arguments for '<sub>'. Try <CONTAINER>
    /// HELP.` (Valkey `addReplySubcommandSyntaxError`; sub cut to 128 bytes).
    SubcommandSyntax {
        /// The container command name, uppercased.
        container: String,
        /// The subcommand as sent.
        sub: Bytes,
    },
    /// `ERR syntax error`.
    Syntax,
    /// `ERR value is not an integer or out of range`.
    NotAnInteger,
    /// `ERR DB index is out of range` (SELECT beyond `cluster-databases`, Valkey 9).
    DbIndexOutOfRange,
    /// `ERR SELECT is not allowed in cluster mode`: Valkey 8 / Redis 7.0 for a non-zero DB
    /// (captured `select-1`); Valkey 9 allows numbered databases, see [`crate::select_db`].
    SelectNotAllowed,
    /// `ERR SWAPDB is not allowed in cluster mode` (all versions, captured `swapdb`).
    SwapdbNotAllowed,
    /// `ERR MOVE is not allowed in cluster mode` (Valkey 8 / Redis 7.0, captured `move-db`;
    /// Valkey 9 allows MOVE).
    MoveNotAllowed,
    /// `ERR Copying to another database is not allowed in cluster mode` (Valkey 8).
    CopyDbNotAllowed,
    /// `EXECABORT Transaction discarded because of previous errors.` (captured
    /// `crossslot-multi-exec`).
    ExecAbort,
    /// `ERR EXEC without MULTI`.
    ExecWithoutMulti,
    /// `ERR DISCARD without MULTI`.
    DiscardWithoutMulti,
    /// `ERR MULTI calls can not be nested`.
    MultiNested,
    /// `ERR WATCH inside MULTI is not allowed` (Redis 7.0; Valkey 9 flags WATCH `no_multi`:
    /// [`CommandError::NotAllowedInTransaction`]).
    WatchInsideMulti,
    /// `ERR Command '<fullname>' not allowed inside a transaction`: a `no_multi` command
    /// inside MULTI (Valkey 9 `processCommand`; the transaction is flagged). Redis 7.0 said
    /// `Command not allowed inside a transaction`, and answered MULTI and WATCH with their
    /// own errors without flagging.
    NotAllowedInTransaction {
        /// Full lowercase name.
        fullname: &'static str,
    },
    /// `ERR This instance has cluster support disabled`.
    ClusterSupportDisabled,
    /// `ERR FAILOVER not allowed in cluster mode. Use CLUSTER FAILOVER command instead.`
    FailoverInClusterMode,
    /// `READONLY You can't write against a read only replica.`: a write from a normal client
    /// on a replica (Valkey `processCommand`, `shared.roreplicaerr`; captured on Redis 7.0 and
    /// Valkey 9.1 in the server's `tests/vectors/replica-writes.json`).
    ReadonlyReplica,
    /// `EXECABORT Transaction discarded because of: <error>`: EXEC refused as a whole for the
    /// reason `error` (Valkey `execCommandAbort`), e.g. a transaction with a queued write on a
    /// node that became a replica after queueing it.
    ExecAbortBecause(Box<CommandError>),
}

impl ErrorReply for CommandError {
    fn write_text(&self, out: &mut Vec<u8>) {
        let fixed: &str = match self {
            CommandError::UnknownCommand { name, args } => {
                out.extend_from_slice(b"ERR unknown command '");
                out.extend_from_slice(c_str_max(name, 128));
                out.extend_from_slice(b"', with args beginning with: ");
                let mut list: Vec<u8> = Vec::new();
                for a in args {
                    if list.len() >= 128 {
                        break;
                    }
                    let room = 128 - list.len();
                    list.push(b'\'');
                    list.extend_from_slice(c_str_max(a, room));
                    list.extend_from_slice(b"' ");
                }
                out.extend_from_slice(&list);
                return;
            }
            CommandError::UnknownSubcommand { container, sub } => {
                out.extend_from_slice(b"ERR unknown subcommand '");
                out.extend_from_slice(c_str_max(sub, 128));
                let _ = write!(out, "'. Try {container} HELP.");
                return;
            }
            CommandError::SubcommandSyntax { container, sub } => {
                out.extend_from_slice(b"ERR unknown subcommand or wrong number of arguments for '");
                out.extend_from_slice(c_str_max(sub, 128));
                let _ = write!(out, "'. Try {container} HELP.");
                return;
            }
            CommandError::NotAllowedInTransaction { fullname } => {
                let _ = write!(
                    out,
                    "ERR Command '{fullname}' not allowed inside a transaction"
                );
                return;
            }
            CommandError::WrongArity { fullname } => {
                let _ = write!(
                    out,
                    "ERR wrong number of arguments for '{fullname}' command"
                );
                return;
            }
            CommandError::ExecAbortBecause(why) => {
                out.extend_from_slice(b"EXECABORT Transaction discarded because of: ");
                why.write_text(out);
                return;
            }
            CommandError::Syntax => "ERR syntax error",
            CommandError::NotAnInteger => "ERR value is not an integer or out of range",
            CommandError::DbIndexOutOfRange => "ERR DB index is out of range",
            CommandError::SelectNotAllowed => "ERR SELECT is not allowed in cluster mode",
            CommandError::SwapdbNotAllowed => "ERR SWAPDB is not allowed in cluster mode",
            CommandError::MoveNotAllowed => "ERR MOVE is not allowed in cluster mode",
            CommandError::CopyDbNotAllowed => {
                "ERR Copying to another database is not allowed in cluster mode"
            }
            CommandError::ExecAbort => {
                "EXECABORT Transaction discarded because of previous errors."
            }
            CommandError::ExecWithoutMulti => "ERR EXEC without MULTI",
            CommandError::DiscardWithoutMulti => "ERR DISCARD without MULTI",
            CommandError::MultiNested => "ERR MULTI calls can not be nested",
            CommandError::WatchInsideMulti => "ERR WATCH inside MULTI is not allowed",
            CommandError::ClusterSupportDisabled => {
                "ERR This instance has cluster support disabled"
            }
            CommandError::FailoverInClusterMode => {
                "ERR FAILOVER not allowed in cluster mode. Use CLUSTER FAILOVER command instead."
            }
            CommandError::ReadonlyReplica => {
                "READONLY You can't write against a read only replica."
            }
        };
        out.extend_from_slice(fixed.as_bytes());
    }
}
display_via_text!(CommandError);

/// Errors of the CLUSTER subcommands, argument errors and state errors alike, with Valkey 8's
/// texts (facts sheet §15, §16, §19.6; slot-migration sheet C.2-C.4, D.6; captured replies in
/// `vectors/*/text/errors/`). All but [`ClusterError::Command`] and
/// [`ClusterError::NoReplicas`] are sent as `ERR <text>`.
///
/// Argument errors are produced by [`crate::parse_cluster`]; the state errors (marked
/// "state") are chosen by the node when it executes a parsed command, in the order the doc of
/// each [`crate::ClusterCommand`] variant gives. Some of them can be checked with the pure
/// helpers of [`crate::check`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClusterError {
    /// A general error (arity, unknown subcommand, syntax error, not an integer).
    Command(CommandError),
    /// `Invalid or out of range slot` (Valkey `getSlotOrReply`).
    InvalidSlot,
    /// `Invalid slot` (COUNTKEYSINSLOT).
    InvalidSlotNumber,
    /// `Invalid slot or number of keys` (GETKEYSINSLOT).
    InvalidSlotOrCount,
    /// `start slot number <s> is greater than end slot number <e>` (ADDSLOTSRANGE and
    /// DELSLOTSRANGE; lowercase, no dot).
    StartAfterEnd {
        /// First slot of the pair.
        start: Slot,
        /// Last slot of the pair.
        end: Slot,
    },
    /// `Start slot number <s> is greater than end slot number <e>` (SLOT-STATS SLOTSRANGE).
    StatsStartAfterEnd {
        /// First slot.
        start: Slot,
        /// Last slot.
        end: Slot,
    },
    /// `Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP`.
    SetSlotAction,
    /// `Missing timeout value` (SETSLOT ... TIMEOUT without a value).
    MissingTimeout,
    /// `timeout is not an integer or out of range`.
    TimeoutNotInteger,
    /// `timeout is negative`.
    TimeoutNegative,
    /// `timeout is out of range` (deadline overflow, see [`crate::SetSlotTimeout`]).
    TimeoutOutOfRange,
    /// `Invalid base port specified: <arg>` (MEET; Redis 7.0 says `Invalid TCP base port
    /// specified: <arg>`).
    InvalidBasePort(Bytes),
    /// `Invalid bus port specified: <arg>` (MEET).
    InvalidBusPort(Bytes),
    /// `Invalid node address specified: <ip>:<port>` (MEET: bad IP, or a port or bus port
    /// outside 1..=65535; the base port argument is printed in every case).
    InvalidNodeAddress {
        /// The IP argument as sent.
        ip: Bytes,
        /// The base port argument as sent.
        port: Bytes,
    },
    /// `Invalid config epoch specified: <n>` (SET-CONFIG-EPOCH with a negative value).
    InvalidConfigEpoch(i64),
    /// `Unrecognized sort metric for ORDERBY.` (SLOT-STATS).
    UnrecognizedSortMetric,
    /// `Limit has to lie in between 1 and 16384 (maximum number of slots).` (SLOT-STATS).
    InvalidLimit,
    /// `Multiple filters of the same type are disallowed.` (SLOT-STATS).
    MultipleFilters,
    /// State: `Slot <n> is already busy` (ADDSLOTS*, captured `addslots-busy`).
    SlotBusy(Slot),
    /// State: `Slot <n> is already unassigned` (DELSLOTS*, captured `delslots-unassigned`).
    SlotUnassigned(Slot),
    /// State: `Slot <n> specified multiple times`.
    SlotRepeated(Slot),
    /// State: `DB must be empty to perform CLUSTER FLUSHSLOTS.`
    FlushSlotsNotEmpty,
    /// State: `Please use SETSLOT only with masters.` (checked before the SETSLOT arguments).
    SetSlotOnReplica,
    /// State: `I'm not the owner of hash slot <n>` (SETSLOT MIGRATING).
    NotOwner(Slot),
    /// State: `I'm already the owner of hash slot <n>` (SETSLOT IMPORTING).
    AlreadyOwner(Slot),
    /// State: `I don't know about node <id>` (SETSLOT MIGRATING / IMPORTING).
    DontKnowNode(Bytes),
    /// State: `Unknown node <id>` (SETSLOT NODE, FORGET, REPLICATE, REPLICAS,
    /// COUNT-FAILURE-REPORTS).
    UnknownNode(Bytes),
    /// State: `Target node is not a master` (SETSLOT).
    TargetNotPrimary,
    /// State: `Can't assign hashslot <n> to a different node while I still hold keys for this
    /// hash slot.` (SETSLOT NODE).
    SlotHasKeys(Slot),
    /// State: `I tried hard but I can't forget myself...`
    ForgetMyself,
    /// State: `Can't forget my master!`
    ForgetMyPrimary,
    /// State: `Can't replicate myself`
    ReplicateMyself,
    /// State: `I can only replicate a master, not a replica.`
    ReplicateReplica,
    /// State: `To set a master the node must be empty and without assigned slots.`
    ReplicateNotEmpty,
    /// State: `The specified node is not a master` (REPLICAS).
    NotAPrimary,
    /// State: `You should send CLUSTER FAILOVER to a replica`
    FailoverOnPrimary,
    /// State: `I'm a replica but my master is unknown to me`
    FailoverPrimaryUnknown,
    /// State: `Master is down or failed, please use CLUSTER FAILOVER FORCE`
    FailoverPrimaryDown,
    /// State: `The user can assign a config epoch only when the node does not know any other
    /// node.`
    ConfigEpochOtherNodes,
    /// State: `Node config epoch is already non-zero`
    ConfigEpochNonZero,
    /// State: `CLUSTER RESET can't be called with master nodes containing keys`
    ResetWithKeys,
    /// State: `error saving the cluster node config: <strerror>` (SAVECONFIG).
    SaveConfig(String),
    /// State: `NOREPLICAS Not enough good replicas to write.` (SETSLOT replication timed out;
    /// its own error code).
    NoReplicas,
}

impl From<CommandError> for ClusterError {
    fn from(e: CommandError) -> ClusterError {
        ClusterError::Command(e)
    }
}

impl ErrorReply for ClusterError {
    fn write_text(&self, out: &mut Vec<u8>) {
        use ClusterError as E;
        let fixed: &str = match self {
            E::Command(e) => return e.write_text(out),
            E::NoReplicas => {
                out.extend_from_slice(b"NOREPLICAS Not enough good replicas to write.");
                return;
            }
            E::InvalidSlot => "Invalid or out of range slot",
            E::InvalidSlotNumber => "Invalid slot",
            E::InvalidSlotOrCount => "Invalid slot or number of keys",
            E::SetSlotAction => {
                "Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP"
            }
            E::MissingTimeout => "Missing timeout value",
            E::TimeoutNotInteger => "timeout is not an integer or out of range",
            E::TimeoutNegative => "timeout is negative",
            E::TimeoutOutOfRange => "timeout is out of range",
            E::UnrecognizedSortMetric => "Unrecognized sort metric for ORDERBY.",
            E::InvalidLimit => "Limit has to lie in between 1 and 16384 (maximum number of slots).",
            E::MultipleFilters => "Multiple filters of the same type are disallowed.",
            E::FlushSlotsNotEmpty => "DB must be empty to perform CLUSTER FLUSHSLOTS.",
            E::SetSlotOnReplica => "Please use SETSLOT only with masters.",
            E::TargetNotPrimary => "Target node is not a master",
            E::ForgetMyself => "I tried hard but I can't forget myself...",
            E::ForgetMyPrimary => "Can't forget my master!",
            E::ReplicateMyself => "Can't replicate myself",
            E::ReplicateReplica => "I can only replicate a master, not a replica.",
            E::ReplicateNotEmpty => {
                "To set a master the node must be empty and without assigned slots."
            }
            E::NotAPrimary => "The specified node is not a master",
            E::FailoverOnPrimary => "You should send CLUSTER FAILOVER to a replica",
            E::FailoverPrimaryUnknown => "I'm a replica but my master is unknown to me",
            E::FailoverPrimaryDown => "Master is down or failed, please use CLUSTER FAILOVER FORCE",
            E::ConfigEpochOtherNodes => {
                "The user can assign a config epoch only when the node does not know any other node."
            }
            E::ConfigEpochNonZero => "Node config epoch is already non-zero",
            E::ResetWithKeys => "CLUSTER RESET can't be called with master nodes containing keys",
            E::StartAfterEnd { start, end } => {
                let _ = write!(
                    out,
                    "ERR start slot number {start} is greater than end slot number {end}"
                );
                return;
            }
            E::StatsStartAfterEnd { start, end } => {
                let _ = write!(
                    out,
                    "ERR Start slot number {start} is greater than end slot number {end}"
                );
                return;
            }
            E::InvalidBasePort(arg) => {
                out.extend_from_slice(b"ERR Invalid base port specified: ");
                out.extend_from_slice(c_str(arg));
                return;
            }
            E::InvalidBusPort(arg) => {
                out.extend_from_slice(b"ERR Invalid bus port specified: ");
                out.extend_from_slice(c_str(arg));
                return;
            }
            E::InvalidNodeAddress { ip, port } => {
                out.extend_from_slice(b"ERR Invalid node address specified: ");
                out.extend_from_slice(c_str(ip));
                out.push(b':');
                out.extend_from_slice(c_str(port));
                return;
            }
            E::InvalidConfigEpoch(n) => {
                let _ = write!(out, "ERR Invalid config epoch specified: {n}");
                return;
            }
            E::SlotBusy(s) => {
                let _ = write!(out, "ERR Slot {s} is already busy");
                return;
            }
            E::SlotUnassigned(s) => {
                let _ = write!(out, "ERR Slot {s} is already unassigned");
                return;
            }
            E::SlotRepeated(s) => {
                let _ = write!(out, "ERR Slot {s} specified multiple times");
                return;
            }
            E::NotOwner(s) => {
                let _ = write!(out, "ERR I'm not the owner of hash slot {s}");
                return;
            }
            E::AlreadyOwner(s) => {
                let _ = write!(out, "ERR I'm already the owner of hash slot {s}");
                return;
            }
            E::SlotHasKeys(s) => {
                let _ = write!(
                    out,
                    "ERR Can't assign hashslot {s} to a different node while I still hold keys for this hash slot."
                );
                return;
            }
            E::DontKnowNode(id) => {
                out.extend_from_slice(b"ERR I don't know about node ");
                out.extend_from_slice(c_str(id));
                return;
            }
            E::UnknownNode(id) => {
                out.extend_from_slice(b"ERR Unknown node ");
                out.extend_from_slice(c_str(id));
                return;
            }
            E::SaveConfig(reason) => {
                let _ = write!(out, "ERR error saving the cluster node config: {reason}");
                return;
            }
        };
        out.extend_from_slice(b"ERR ");
        out.extend_from_slice(fixed.as_bytes());
    }
}
display_via_text!(ClusterError);

/// Any error a client can get from this crate's decisions: a routing outcome, a general
/// command error, or a CLUSTER error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// A redirection or cluster-state error from [`crate::route`].
    Route(RouteError),
    /// A general command error.
    Command(CommandError),
    /// A CLUSTER subcommand error.
    Cluster(ClusterError),
}

impl ErrorReply for Rejection {
    fn write_text(&self, out: &mut Vec<u8>) {
        match self {
            Rejection::Route(e) => e.write_text(out),
            Rejection::Command(e) => e.write_text(out),
            Rejection::Cluster(e) => e.write_text(out),
        }
    }
}
display_via_text!(Rejection);

impl From<RouteError> for Rejection {
    fn from(e: RouteError) -> Rejection {
        Rejection::Route(e)
    }
}
impl From<CommandError> for Rejection {
    fn from(e: CommandError) -> Rejection {
        Rejection::Command(e)
    }
}
impl From<ClusterError> for Rejection {
    fn from(e: ClusterError) -> Rejection {
        Rejection::Cluster(e)
    }
}

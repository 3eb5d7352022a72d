//! The client-facing, pure half of a Valkey Cluster node.
//!
//! * [`route`]: whether this node serves a request or answers MOVED / ASK / TRYAGAIN /
//!   CROSSSLOT / CLUSTERDOWN, in the decision order of Valkey's `getNodeByQuery` (facts
//!   sheet §20.3), over a [`ClusterView`] (implemented for [`ferrocluster_topology::Topology`])
//!   and the host's [`KeyPresence`].
//! * [`ClientState`]: per-connection ASKING (one command), READONLY/READWRITE, the selected
//!   database and MULTI/EXEC; [`ClientState::handle_command`] runs the whole per-command
//!   sequence (table lookup and arity, routing, queueing, connection commands) and returns a
//!   [`Dispatch`].
//! * The command table: [`CommandSpec`] (one row: arity, flags, key specs, ACL categories,
//!   tips, subcommands, docs; `COMMAND INFO` / `COMMAND DOCS` are written from it),
//!   [`BUILTIN`] (every Valkey 9.1 built-in command), and [`CommandTable`], the rows a host
//!   serves: built-in ones and its own, so routing knows the keys of a command a database
//!   adds ([`lookup`] and [`resolve`] read [`builtin_table`]).
//! * [`parse_cluster`]: typed parsing of every CLUSTER subcommand into a [`ClusterCommand`];
//!   [`check`]: the pure state checks of the subcommands that need the cluster model.
//! * Errors ([`RouteError`], [`CommandError`], [`ClusterError`]) render the exact texts real
//!   servers send ([`ErrorReply::to_resp`]).
//! * [`select_db`]: SELECT in cluster mode (Valkey 9 numbered databases).
//!
//! Nothing here executes a command or changes the cluster: the node crate does that with the
//! values this crate returns.
//!
//! ```
//! use ferrocluster_command::*;
//! let argv: [&[u8]; 4] = [b"CLUSTER", b"SETSLOT", b"16384", b"STABLE"];
//! let cmd = parse_cluster(&argv, ParseOptions::default()).unwrap();
//! let ClusterCommand::SetSlot(Err(e)) = cmd else { panic!() };
//! assert_eq!(e.to_resp(), b"-ERR Invalid or out of range slot\r\n");
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod args;
#[rustfmt::skip]
mod builtin;
pub mod check;
mod client;
mod cluster;
mod error;
mod route;
mod spec;
mod table;

pub use args::{atoi, eq_ignore_case, parse_i64};
pub use client::{select_db, ClientState, Dispatch, QueuedCommand};
pub use cluster::{
    parse_cluster, ClusterCommand, FailoverMode, NodeArg, ParseOptions, SetSlot, SetSlotAction,
    SetSlotTimeout, SlotArgs, SlotStatsMetric, SlotStatsQuery, CLUSTER_HELP,
    SETSLOT_DEFAULT_TIMEOUT_MS,
};
pub use error::{ClusterError, CommandError, ErrorReply, Redirect, Rejection, RouteError};
pub use route::{
    blocked_redirect, endpoint_of, route, shard_channels_slot, ClusterContext, ClusterView,
    EndpointType, KeyPresence, NoKeys, Route, RoutingConfig,
};
pub use table::{
    builtin, builtin_table, cluster_subcommands, lookup, resolve, AclCategories, Arg, ArgFlags,
    ArgType, BeginSearch, CommandDoc, CommandFlags, CommandKind, CommandSpec, CommandTable,
    DocFlags, FindKeys, KeyFlags, KeyPositions, KeySpec, KeysProc, ReplyWriter, Resolved, Row,
    TableError, BUILTIN,
};

//! What the resolver asks the host to do, and what it concluded.

use crate::{Addr, ObservedRole, Want};
use std::fmt;

/// A connection the resolver asked the host to open. Ids are never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub u64);

impl fmt::Display for ConnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "conn#{}", self.0)
    }
}

/// What a connection is for; informational (logs, thread names), the host treats all alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConnPurpose {
    /// Asking a Sentinel (steps 1 and 2, and the Sentinel list refresh).
    Sentinel,
    /// Checking the role of a reported instance (step 3).
    RoleCheck,
    /// The long-lived `+switch-master` subscription.
    Subscription,
}

/// Why the host asks for re-verification (Sentinel client spec, "Handle reconnections").
/// Informational: every cause starts again at step 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReconnectCause {
    /// A command on the data connection timed out.
    Timeout,
    /// A socket error on the data connection.
    SocketError,
    /// The application closed the connection explicitly.
    ClosedByClient,
    /// The server closed the connection (Sentinel's `CLIENT KILL` on reconfiguration).
    ClosedByServer,
}

/// A confirmed answer: Sentinel named it and `ROLE` agreed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolution {
    /// What was asked for.
    pub want: Want,
    /// For [`Want::Primary`] exactly one address; for [`Want::Replicas`] the confirmed
    /// replicas (at least one) in Sentinel's order.
    pub addrs: Vec<Addr>,
    /// The Sentinel that gave the answer.
    pub via: Addr,
    /// Host time (ms) at which the last role check confirmed it.
    pub at_ms: u64,
}

/// Why a resolution failed. The three kinds tell the user different things to fix
/// (Sentinel client spec, "Error reporting").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResolveError {
    /// No Sentinel answered at all (all connect failures or timeouts): check the Sentinel
    /// addresses and the network.
    #[error("no Sentinel could be reached ({tried} tried)")]
    NoSentinelReachable {
        /// Sentinels tried in this round.
        tried: usize,
    },
    /// Every Sentinel that answered said it does not know the service (null reply);
    /// check the service name.
    #[error("no Sentinel knows the service {name} ({null_answers} answered null, {unreachable} unreachable)")]
    UnknownService {
        /// The service name asked for.
        name: String,
        /// Sentinels that answered null.
        null_answers: usize,
        /// Sentinels that could not be reached.
        unreachable: usize,
    },
    /// Sentinels answered, but only with errors or malformed replies (e.g. `NOAUTH`).
    #[error("Sentinels answered with errors only (last: {last_error})")]
    SentinelErrors {
        /// The last error text.
        last_error: String,
        /// Sentinels that answered null.
        null_answers: usize,
    },
    /// Sentinel gave addresses, but the role check never confirmed them within
    /// `resolve_timeout_ms` (for example during a failover).
    #[error("role check did not confirm {want:?} within {elapsed_ms} ms (last seen: {last_seen})")]
    NotConfirmed {
        /// What was asked for.
        want: Want,
        /// Time spent on this resolution.
        elapsed_ms: u64,
        /// The last address checked and what was seen there, as text.
        last_seen: String,
    },
}

/// One thing for the host to do or know; drain with
/// [`Resolver::poll_output`](crate::Resolver::poll_output) and act in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Open a TCP connection to `addr` and report `handle_connected` or
    /// `handle_connect_failed` (later `handle_closed` if the peer closes it).
    Connect {
        /// Id for later inputs and outputs.
        conn: ConnId,
        /// Where to connect.
        addr: Addr,
        /// Why (informational).
        purpose: ConnPurpose,
    },
    /// Send one command (RESP-encode `argv` as an array of bulk strings). Only emitted
    /// after `handle_connected(conn)`; replies come back in order via `handle_reply`.
    Send {
        /// Connection.
        conn: ConnId,
        /// Command and arguments.
        argv: Vec<Vec<u8>>,
    },
    /// Close the connection and forget it; later events for it are answered with
    /// [`InputError::UnknownConn`] and can be ignored.
    Close {
        /// Connection.
        conn: ConnId,
    },
    /// The service moved away from `addr`: close every pooled data connection to it
    /// (Sentinel client spec, "Connection pools"). Comes before the `Resolved` it explains.
    ClosePool {
        /// The old address.
        addr: Addr,
    },
    /// A resolution finished with a confirmed answer.
    Resolved {
        /// The answer.
        resolution: Resolution,
        /// Whether the addresses differ from the previous resolution (`true` for the first).
        changed: bool,
    },
    /// A resolution failed.
    Error(ResolveError),
}

/// Host misuse of an input. The input changed nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// The id is not (or no longer) a connection of this resolver, e.g. after `Close`.
    #[error("{0} is not an open connection of this resolver")]
    UnknownConn(ConnId),
    /// `handle_connected` for a connection already reported connected.
    #[error("{0} was already reported connected")]
    AlreadyConnected(ConnId),
    /// `handle_reply` for a connection not yet reported connected.
    #[error("{0} received a reply before it was reported connected")]
    NotConnected(ConnId),
}

pub(crate) fn describe(addr: &Addr, seen: &Result<ObservedRole, String>) -> String {
    match seen {
        Ok(role) => format!("{addr} has role {role:?}"),
        Err(e) => format!("{addr}: {e}"),
    }
}

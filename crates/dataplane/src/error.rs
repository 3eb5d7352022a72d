//! Error types. Each says what happened to the state.

use ferrocluster_topology::Reply;

/// Why bytes from a peer are not valid replication protocol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StreamErrorKind {
    /// A command must start with `*` (a newline between commands is allowed); the byte found.
    #[error("expected '*', got byte {0:#04x}")]
    NotACommand(u8),
    /// An argument must be a bulk string starting with `$`; the byte found.
    #[error("expected '$', got byte {0:#04x}")]
    ExpectedBulk(u8),
    /// `*<n>` is not a count or exceeds the limit (Valkey: `invalid multibulk length`).
    #[error("invalid multibulk length")]
    InvalidMultibulkLength,
    /// `$<n>` is not a length or exceeds the limit (Valkey: `invalid bulk length`).
    #[error("invalid bulk length")]
    InvalidBulkLength,
    /// A line or a bulk string is not terminated by CR LF.
    #[error("missing CRLF")]
    MissingCrlf,
    /// A header or reply line is longer than the limit.
    #[error("line too long")]
    LineTooLong,
    /// The reply to PING is an error other than the ones Valkey accepts (`syncWithPrimary`).
    #[error("error reply to PING: {0}")]
    PingRejected(String),
    /// The AUTH reply is an error.
    #[error("AUTH refused: {0}")]
    AuthRejected(String),
    /// `+FULLRESYNC` without a 40-character replid and an offset.
    #[error("malformed +FULLRESYNC: {0}")]
    BadFullResync(String),
    /// The line before the RDB payload does not start with `$` (Valkey: "Bad protocol from
    /// PRIMARY, the first byte is not '$'") or is not a valid length / EOF marker.
    #[error("bad RDB preamble: {0}")]
    BadPreamble(String),
    /// The primary aborted the transfer with an error line instead of the RDB preamble.
    #[error("primary aborted the sync: {0}")]
    SyncAborted(String),
}

/// Malformed bytes on a replication link, with their position on that connection. The link is
/// closed; the state is what it was before the bad item.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("replication protocol error at byte {offset}: {kind}")]
pub struct StreamError {
    /// What was wrong.
    pub kind: StreamErrorKind,
    /// Where on the connection (bytes from its first byte) the bad input was found: the exact
    /// byte in the command stream; for a handshake or preamble line, the start of the read
    /// that held it.
    pub offset: u64,
}

/// A rejected REPLCONF / PSYNC / SYNC / WAIT, with Valkey's error text. An `Err` changed
/// nothing: no replica was registered or modified. [`CommandError::to_reply`] gives the reply
/// the client gets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// `ERR wrong number of arguments for '<cmd>' command`.
    #[error("ERR wrong number of arguments for '{0}' command")]
    WrongArity(&'static str),
    /// `ERR syntax error` (REPLCONF with an even number of arguments).
    #[error("ERR syntax error")]
    Syntax,
    /// `ERR value is not an integer or out of range`.
    #[error("ERR value is not an integer or out of range")]
    NotAnInteger,
    /// `ERR timeout is not an integer or out of range` (WAIT).
    #[error("ERR timeout is not an integer or out of range")]
    TimeoutNotInteger,
    /// `ERR timeout is negative` (WAIT).
    #[error("ERR timeout is negative")]
    TimeoutNegative,
    /// `ERR Unrecognized REPLCONF option: <opt>`.
    #[error("ERR Unrecognized REPLCONF option: {0}")]
    UnknownOption(String),
    /// A command that is not REPLCONF / PSYNC / SYNC was passed to
    /// [`crate::Replication::handle_command`] (Valkey's unknown-command text).
    #[error("ERR unknown command '{0}', with args beginning with: ")]
    UnknownCommand(String),
    /// `ERR Unrecognized version format: <v>`.
    #[error("ERR Unrecognized version format: {0}")]
    BadVersion(String),
    /// `ERR REPLCONF ip-address provided by replica instance is too long: <n> bytes`.
    #[error("ERR REPLCONF ip-address provided by replica instance is too long: {0} bytes")]
    IpTooLong(usize),
    /// `NOMASTERLINK Can't SYNC while not connected with my master` (a replica whose own
    /// link is not up).
    #[error("NOMASTERLINK Can't SYNC while not connected with my master")]
    NoPrimaryLink,
    /// `ERR WAIT cannot be used with replica instances. ...` (Valkey's full text).
    #[error("ERR WAIT cannot be used with replica instances. Please also note that if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.")]
    WaitOnReplica,
}

impl CommandError {
    /// The error reply (`-ERR ...`, `-NOMASTERLINK ...`).
    pub fn to_reply(&self) -> Reply {
        Reply::Error(self.to_string())
    }
}

/// The host called something the current state does not allow. Nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// [`crate::Replication::feed`] on a replica: a replica proxies its primary's stream and
    /// never originates writes (Valkey `replicationFeedReplicas` returns early).
    #[error("this node is a replica: writes come from its primary's stream")]
    NotPrimary,
    /// A snapshot input names a snapshot that is not the one in progress.
    #[error("unknown snapshot {0}")]
    UnknownSnapshot(u64),
    /// A snapshot input out of order: a `$<len>` snapshot's chunk before its length, a
    /// length for a diskless snapshot or a second length, more bytes than announced, or an
    /// end before all announced bytes.
    #[error("snapshot {id}: {what}")]
    SnapshotOrder {
        /// The snapshot.
        id: u64,
        /// What was out of order.
        what: &'static str,
    },
    /// A database number at or above [`crate::ReplicationConfig::databases`].
    #[error("database {0} out of range")]
    BadDatabase(u32),
    /// A configuration value out of range.
    #[error("invalid configuration: {0}")]
    Config(&'static str),
}

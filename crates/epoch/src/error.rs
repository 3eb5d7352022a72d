//! Typed errors of the operator commands this crate implements. `Display` is the exact reply
//! text real servers send, code first (`ERR ...`); the RESP line is `-` + text + CRLF
//! (facts sheet §13.1, §19.6; captured in `vectors/*/text/errors`).

/// `CLUSTER FAILOVER [FORCE|TAKEOVER]` refused (§13.1). Nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FailoverError {
    /// Sent to a primary.
    #[error("ERR You should send CLUSTER FAILOVER to a replica")]
    NotReplica,
    /// Myself is a replica whose primary is unknown.
    #[error("ERR I'm a replica but my master is unknown to me")]
    PrimaryUnknown,
    /// No FORCE/TAKEOVER while the primary is FAIL or has no outbound link.
    #[error("ERR Master is down or failed, please use CLUSTER FAILOVER FORCE")]
    PrimaryDown,
    /// An option other than FORCE or TAKEOVER.
    #[error("ERR syntax error")]
    Syntax,
}

/// `CLUSTER SET-CONFIG-EPOCH` refused (§19.6). Nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SetConfigEpochError {
    /// A negative epoch.
    #[error("ERR Invalid config epoch specified: {0}")]
    Invalid(i64),
    /// Myself knows another node.
    #[error(
        "ERR The user can assign a config epoch only when the node does not know any other node."
    )]
    KnowsOtherNodes,
    /// Myself already has a configEpoch.
    #[error("ERR Node config epoch is already non-zero")]
    AlreadyNonZero,
}

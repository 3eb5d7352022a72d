//! Small value types: job names, connection handles, job kinds and states (sheet A.6, A.7).

use ferrocluster_topology::NodeId;
use rand_core::RngCore;
use std::fmt;

/// Length of a job name in bytes: 40 (`CLUSTER_NAMELEN`, sheet A.2).
pub const JOB_NAME_LEN: usize = 40;

/// A slot migration job's name: 40 bytes, identical on the source and the target of one
/// migration (sheet A.3). Jobs created here get 40 lowercase hex digits; names received in
/// `SYNCSLOTS ESTABLISH` / `FINISH` are only checked for length, as Valkey does, so any 40
/// bytes are accepted.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JobName([u8; JOB_NAME_LEN]);

impl JobName {
    /// A fresh random name (40 lowercase hex digits from `rng`, Valkey `getRandomHexChars`).
    pub fn random<R: RngCore + ?Sized>(rng: &mut R) -> JobName {
        JobName(*NodeId::random(rng).as_bytes())
    }

    /// A name from exactly 40 bytes; `None` for any other length.
    pub fn from_bytes(bytes: &[u8]) -> Option<JobName> {
        bytes.try_into().ok().map(JobName)
    }

    /// The 40 bytes.
    pub fn as_bytes(&self) -> &[u8; JOB_NAME_LEN] {
        &self.0
    }
}

impl fmt::Display for JobName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.0))
    }
}

impl fmt::Debug for JobName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JobName({self})")
    }
}

/// The host's handle for one data connection: the source's connection to the target (bound
/// by [`crate::Migrations::handle_connected`]) or the client connection on which the target
/// received `SYNCSLOTS ESTABLISH`. Opaque to this crate; the host keeps them unique while
/// open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub u64);

/// Where a `CLUSTER` subcommand came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Origin {
    /// A client or data connection (an operator, or the peer of a migration).
    Conn(ConnId),
    /// This node's primary, through the replication stream (sheet A.5: only `ESTABLISH` and
    /// `FINISH` are acted on; they create/finish tracking-only jobs).
    Primary,
    /// The AOF loader (same treatment as [`Origin::Primary`]; a `FINISH` while loading
    /// implies cleanup already happened, sheet A.7).
    Aof,
}

/// Which side of a migration a job is (the GETSLOTMIGRATIONS `operation` field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobKind {
    /// This node receives the slots (`IMPORT`).
    Import,
    /// This node gives the slots away (`EXPORT`).
    Export,
}

impl JobKind {
    /// `IMPORT` or `EXPORT`.
    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::Import => "IMPORT",
            JobKind::Export => "EXPORT",
        }
    }
}

/// A job state with Valkey's user-visible names (sheet A.7,
/// `slotMigrationJobStateToString`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobState {
    /// Import: `waiting-for-ack`, waits for the source's first `ACK`.
    WaitingForAck,
    /// Import: `receiving-snapshot`, applies snapshot commands until `SNAPSHOT-EOF`.
    ReceivingSnapshot,
    /// Import: `waiting-for-paused`, applies streamed writes until `PAUSED`.
    WaitingForPaused,
    /// Import: `failover-requested`, waits for `FAILOVER-GRANTED`.
    FailoverRequested,
    /// Import: `failover-granted`; the takeover runs at the next [`crate::Migrations::handle_timeout`].
    ImportFailoverGranted,
    /// Import: `cleaning-up`; staged keys are dropped at the next
    /// [`crate::Migrations::handle_timeout`], then the recorded final state is entered.
    CleaningUp,
    /// Import (tracking only): `occurring-on-primary`, waits for `SYNCSLOTS FINISH` from the
    /// primary.
    OccurringOnPrimary,
    /// Export: `connecting`, waits for the connection to the target.
    Connecting,
    /// Export: `sending-auth-command` (transient).
    SendingAuth,
    /// Export: `reading-auth-response`, waits for the AUTH reply.
    ReadingAuthResponse,
    /// Export: `sending-establish-command` (transient).
    SendingEstablish,
    /// Export: `reading-establish-response`, waits for the ESTABLISH reply line.
    ReadingEstablishResponse,
    /// Export: `waiting-to-snapshot`, waits until no child process / other snapshot runs.
    WaitingToSnapshot,
    /// Export: `snapshotting`, waits for the snapshot to finish.
    Snapshotting,
    /// Export: `replicating`, streams writes and waits for `REQUEST-PAUSE`.
    Replicating,
    /// Export: `waiting-to-pause`, waits for the link backlog to drop to
    /// `slot-migration-max-failover-repl-bytes`.
    WaitingToPause,
    /// Export: `failover-paused`, writes paused, waits for `REQUEST-FAILOVER`.
    FailoverPaused,
    /// Export: `failover-granted`, waits for the topology to show the target owning the slots.
    ExportFailoverGranted,
    /// Terminal: `success`.
    Success,
    /// Terminal: `failed`.
    Failed,
    /// Terminal: `cancelled` (exports only, CANCELSLOTMIGRATIONS).
    Cancelled,
}

impl JobState {
    /// The state string GETSLOTMIGRATIONS shows.
    pub fn as_str(self) -> &'static str {
        use JobState::*;
        match self {
            WaitingForAck => "waiting-for-ack",
            ReceivingSnapshot => "receiving-snapshot",
            WaitingForPaused => "waiting-for-paused",
            FailoverRequested => "failover-requested",
            ImportFailoverGranted | ExportFailoverGranted => "failover-granted",
            CleaningUp => "cleaning-up",
            OccurringOnPrimary => "occurring-on-primary",
            Connecting => "connecting",
            SendingAuth => "sending-auth-command",
            ReadingAuthResponse => "reading-auth-response",
            SendingEstablish => "sending-establish-command",
            ReadingEstablishResponse => "reading-establish-response",
            WaitingToSnapshot => "waiting-to-snapshot",
            Snapshotting => "snapshotting",
            Replicating => "replicating",
            WaitingToPause => "waiting-to-pause",
            FailoverPaused => "failover-paused",
            Success => "success",
            Failed => "failed",
            Cancelled => "cancelled",
        }
    }

    /// `success`, `failed` or `cancelled` (Valkey `isSlotMigrationJobFinished`).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobState::Success | JobState::Failed | JobState::Cancelled
        )
    }

    /// Neither terminal nor `cleaning-up` (Valkey `isSlotMigrationJobInProgress`).
    pub fn is_in_progress(self) -> bool {
        !self.is_terminal() && self != JobState::CleaningUp
    }

    /// Whether a job in this state sends the 1000 ms heartbeat `ACK` (Valkey
    /// `canSlotMigrationJobSendAck`; `failover-granted` exports are excluded by the cron).
    pub(crate) fn can_send_ack(self) -> bool {
        use JobState::*;
        !matches!(
            self,
            Snapshotting
                | WaitingForAck
                | Connecting
                | SendingAuth
                | ReadingAuthResponse
                | SendingEstablish
                | ReadingEstablishResponse
                | OccurringOnPrimary
                | ExportFailoverGranted
        )
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

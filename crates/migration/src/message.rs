//! `CLUSTER SYNCSLOTS` messages the engine asks the host to write (sheet A.5, A.8).

use crate::types::JobName;
use ferrocluster_slot::SlotRange;
use ferrocluster_topology::NodeId;

/// Final state carried by `SYNCSLOTS FINISH`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FinishState {
    /// `success`.
    Success,
    /// `failed`.
    Failed,
}

/// One `CLUSTER SYNCSLOTS <SUB> ...` message. [`SyncSlots::argv`] gives the arguments,
/// [`SyncSlots::to_resp`] the RESP array bytes (what Valkey writes on the link).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncSlots {
    /// `ESTABLISH SOURCE <id> NAME <name> SLOTSRANGE s e [s e ...]` (source → target; target
    /// primary → replicas/AOF). `source` is `None` only when re-propagating a tracking job's
    /// ESTABLISH that arrived without one.
    Establish {
        /// The source primary.
        source: Option<NodeId>,
        /// The job name.
        name: JobName,
        /// The ranges, in the order given.
        ranges: Vec<SlotRange>,
    },
    /// `ACK` (heartbeat, both directions).
    Ack,
    /// `SNAPSHOT-EOF` (end of the snapshot; written by the host's snapshot producer, listed
    /// here for completeness).
    SnapshotEof,
    /// `REQUEST-PAUSE` (target → source).
    RequestPause,
    /// `PAUSED` (source → target).
    Paused,
    /// `REQUEST-FAILOVER` (target → source).
    RequestFailover,
    /// `FAILOVER-GRANTED` (source → target).
    FailoverGranted,
    /// `FINISH STATE success|failed NAME <name> [MESSAGE <m>]` (target primary → replicas
    /// and AOF).
    Finish {
        /// Final state.
        state: FinishState,
        /// The job name.
        name: JobName,
        /// The status message, if any.
        message: Option<String>,
    },
}

impl SyncSlots {
    /// The full argument vector, starting with `CLUSTER`, `SYNCSLOTS`.
    pub fn argv(&self) -> Vec<Vec<u8>> {
        let mut v: Vec<Vec<u8>> = vec![b"CLUSTER".to_vec(), b"SYNCSLOTS".to_vec()];
        let mut push = |s: &[u8]| v.push(s.to_vec());
        match self {
            SyncSlots::Establish {
                source,
                name,
                ranges,
            } => {
                push(b"ESTABLISH");
                if let Some(src) = source {
                    push(b"SOURCE");
                    push(src.as_bytes());
                }
                push(b"NAME");
                push(name.as_bytes());
                push(b"SLOTSRANGE");
                for r in ranges {
                    push(r.start().to_string().as_bytes());
                    push(r.end().to_string().as_bytes());
                }
            }
            SyncSlots::Ack => push(b"ACK"),
            SyncSlots::SnapshotEof => push(b"SNAPSHOT-EOF"),
            SyncSlots::RequestPause => push(b"REQUEST-PAUSE"),
            SyncSlots::Paused => push(b"PAUSED"),
            SyncSlots::RequestFailover => push(b"REQUEST-FAILOVER"),
            SyncSlots::FailoverGranted => push(b"FAILOVER-GRANTED"),
            SyncSlots::Finish {
                state,
                name,
                message,
            } => {
                push(b"FINISH");
                push(b"STATE");
                push(match state {
                    FinishState::Success => b"success",
                    FinishState::Failed => b"failed",
                });
                push(b"NAME");
                push(name.as_bytes());
                if let Some(m) = message {
                    push(b"MESSAGE");
                    push(m.as_bytes());
                }
            }
        }
        v
    }

    /// The RESP array of bulk strings, e.g. `*3\r\n$7\r\nCLUSTER\r\n$9\r\nSYNCSLOTS\r\n$3\r\nACK\r\n`
    /// ([`ferrocluster_topology::encode_command`], the one command encoder).
    pub fn to_resp(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }

    /// Appends [`SyncSlots::to_resp`] to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        ferrocluster_topology::encode_command(out, &self.argv());
    }
}

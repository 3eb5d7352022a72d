//! Failure detection of a Valkey Cluster node (facts sheet §9) and the cluster state (§10).
//!
//! Every function borrows the shared [`Topology`] for one operation, takes `now`, and pushes
//! what happened into an outbox of [`FailureEffect`]s; the `node` crate turns those into bus
//! messages (a FAIL broadcast), config saves, state re-evaluation and events. This crate knows
//! no other engine crate and never reads a clock.
//!
//! * [`check_pfail`]: the cron's PFAIL marking (§9.1);
//! * [`handle_gossip_flags`]: failure reports from voting primaries (§7.4, §9.2) and the
//!   PFAIL → FAIL check ([`mark_fail_if_quorum`], §9.3);
//! * [`handle_fail_message`]: a FAIL message from a known node (§8 step 7);
//! * [`handle_pong`]: PFAIL clearing and every FAIL clearing rule (§9.4);
//! * [`ClusterState`]: ok/fail with full coverage, the minority rule, the rejoin delay and
//!   `CLUSTER_WRITABLE_DELAY` (§10).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod detect;
mod state;

pub use detect::{
    check_pfail, handle_fail_message, handle_gossip_flags, handle_pong, mark_fail_if_quorum,
    quorum, FailureConfig, FailureEffect,
};
pub use ferrocluster_topology::Topology;
pub use state::{ClusterHealth, ClusterState, StateConfig, CLUSTER_WRITABLE_DELAY_MS};

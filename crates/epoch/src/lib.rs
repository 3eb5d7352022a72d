//! Epochs, configuration propagation, replica election and failover of a Valkey Cluster node
//! (facts sheet `shared/spec/cluster-bus.md` §8, §11–§14, §19.6; Valkey 8 `cluster_legacy.c`).
//!
//! Like the gossip and failure crates, every operation borrows the shared [`Topology`] for one
//! step, takes `now` (Unix ms) and a seeded RNG where it draws, and pushes [`EpochEffect`]s
//! into an outbox the caller drains in order. [`Epoch`] holds the little state this layer
//! keeps beside the topology (owner-not-claiming marks, the [`Election`], the
//! [`ManualFailover`]). No clock, no socket, no global randomness.
//!
//! # What it covers
//! * epochs: currentEpoch raised by elections and bumps, configEpoch collisions
//!   ([`handle_config_epoch_collision`], §11.5), the bump without consensus
//!   ([`bump_config_epoch_without_consensus`], [`bump_epoch`], §11.6), `SET-CONFIG-EPOCH`
//!   ([`set_config_epoch`]); lastVoteEpoch set when voting;
//! * configuration propagation: the role switch ([`Epoch::handle_role`], §11.1), slot claims
//!   ([`Epoch::apply_slot_claims`], §11.2: unassigned slot, higher configEpoch wins, dirty
//!   slots, importing/migrating re-pointing, owner-not-claiming marks §11.4, following the node
//!   that took my shard's last slot), the UPDATE trigger ([`Epoch::check_stale_claims`],
//!   §11.3) and a received UPDATE ([`Epoch::handle_update`]);
//! * elections: the replica side ([`Epoch::handle_failover`], [`Election::handle_auth_ack`],
//!   rank [`replica_rank`], Valkey 8.1's shard stagger [`failed_primary_rank`] and retry after
//!   a lost epoch, [`EpochEvent::ElectionLost`]) and the voter ([`Epoch::handle_auth_request`], every rule of §12.3);
//! * manual failover ([`Epoch::handle_failover_command`], [`Epoch::handle_mfstart`],
//!   [`Epoch::handle_writes_paused`], [`Epoch::handle_primary_offset`]) and replica migration
//!   ([`Epoch::handle_replica_migration`]).
//!
//! # Durability
//! Whatever must be on disk before others hear of it is followed by
//! [`EpochEffect::Persist`]; a [`EpochEffect::Send`] with `after_persist: true` MUST be held
//! until the host acknowledged that persist. So a FAILOVER_AUTH_ACK leaves only after
//! lastVoteEpoch is durable, an auth request only after the bumped currentEpoch is, and the
//! PONG announcing a take-over only after the new slots and configEpoch are.
//!
//! # How the node wires it (one `Epoch`, one `EpochConfig` built from `ClusterConfig`)
//! For a received (non-light) message, following §8:
//! 1. Before anything else (§8 step 2) take `let prior = PriorRole::of(&topo, &sender)` for a
//!    known sender.
//! 2. Run the header bookkeeping of step 4 (the gossip crate does it: currentEpoch raised to
//!    the header's, a primary's larger configEpoch adopted, `repl_offset` stored), then call
//!    [`Epoch::handle_primary_offset`]`(topo, sender, mflags & PAUSED, hdr.offset)` for every
//!    message type.
//! 3. PING/PONG/MEET from a known sender: after step 6e (PONG bookkeeping) and before the
//!    gossip section (6i), call [`Epoch::handle_ping_claims`] with the header's `replicaof`
//!    ([`ClaimedRole`]), configEpoch and myslots. It does 6f (role switch), 6g (claims +
//!    UPDATE) and 6h (collision); the gossip crate's basic `claims` module MUST then no longer
//!    run.
//! 4. FAILOVER_AUTH_REQUEST from a known sender: [`Epoch::handle_auth_request`].
//! 5. FAILOVER_AUTH_ACK from a known sender: `epoch.election_mut().handle_auth_ack(topo,
//!    sender, hdr.currentEpoch)`; if it counted, run [`Epoch::handle_failover`] before
//!    returning to the host (Valkey's "before sleep"), so a won election completes at once.
//! 6. MFSTART from a known sender: [`Epoch::handle_mfstart`]; once the host confirms that
//!    client writes are paused (it reports its final offset), [`Epoch::handle_writes_paused`]
//!    (the PAUSED offset is announced only from then on).
//! 7. UPDATE from a known sender: [`Epoch::handle_update`] with the body's node ID,
//!    configEpoch and slot bitmap.
//!
//! Every 100 ms cron (§7.2 step 5, after PFAIL marking): [`Epoch::handle_cron`] with the
//! host's [`ReplicationState`] and whether the cluster state is ok. While
//! [`Epoch::paused_for_manual_failover`] holds, the node sets PAUSED in every header it sends
//! and PINGs `epoch.manual_failover().replica()` every cron run (§13.2).
//!
//! Commands: `CLUSTER FAILOVER [FORCE|TAKEOVER]` → [`FailoverMode::parse`] then
//! [`Epoch::handle_failover_command`] (run [`Epoch::handle_failover`] right after a FORCE so
//! the election starts without waiting for the cron); `CLUSTER BUMPEPOCH` → [`bump_epoch`]
//! (reply `+` + its `Display`); `CLUSTER SET-CONFIG-EPOCH` → [`set_config_epoch`]; a
//! finished import (SETSLOT NODE to myself) → [`bump_config_epoch_without_consensus`];
//! ADDSLOTS/DELSLOTS/SETSLOT NODE → [`Epoch::clear_not_claiming`] per slot; CLUSTER RESET →
//! [`Epoch::reset`]. Errors render as `-` + `Display` + CRLF.
//!
//! Effects: [`EpochEffect::Save`] / [`EpochEffect::Persist`] become a persist output (the
//! latter gates the following `after_persist` transmits); [`EpochEffect::Send`] is built with
//! the node's header builder at that moment ([`EpochMessage::Update`] carries its body) and
//! sent per its [`Target`]; role, pause and key-deletion effects become host outputs.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod claims;
mod config;
mod effect;
mod election;
mod engine;
mod epochs;
mod error;
mod manual;
mod migration;
mod roles;
mod vote;

pub use claims::{ClaimedRole, PingClaims, PriorRole};
pub use config::{
    EpochConfig, CLUSTER_OPERATION_TIMEOUT_MS, ELECTION_FIXED_DELAY_MS,
    ELECTION_NEW_REPLICA_DELAY_MS, MF_PAUSE_MULT, REPLICA_MIGRATION_DELAY_MS,
};
pub use effect::{
    CantFailover, EpochEffect, EpochEvent, EpochMessage, FailoverMode, Target, VoteDenied,
};
pub use election::{
    all_replicas_see_primary_fail, failed_primary_rank, replica_rank, Election, ReplLink,
    ReplicationState,
};
pub use engine::Epoch;
pub use epochs::{
    bump_config_epoch_without_consensus, bump_epoch, handle_config_epoch_collision, max_epoch,
    set_config_epoch, BumpEpochReply,
};
pub use error::{FailoverError, SetConfigEpochError};
pub use ferrocluster_topology::Topology;
pub use manual::ManualFailover;
pub use vote::{AuthRequest, VoteOutcome};

#[cfg(test)]
mod tests;

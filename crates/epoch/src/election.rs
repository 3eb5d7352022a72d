//! The replica side of elections (§12.1, §12.2, §12.4, V8 `clusterHandleReplicaFailover`).

use crate::config::ELECTION_NEW_REPLICA_DELAY_MS;
use crate::{CantFailover, Epoch, EpochConfig, EpochEffect, EpochEvent, EpochMessage, Target};
use ferrocluster_topology::{ConfigEpoch, CurrentEpoch, Millis, NodeFlags, NodeId, Topology};
use rand_core::RngCore;

/// Replication facts about myself that only the host knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReplicationState {
    /// The replication offset myself has processed (Valkey `replicationGetReplicaOffset`),
    /// bytes. Used for the rank (§12.2.1) and the manual-failover catch-up (§13.1).
    pub offset: u64,
    /// The link to my primary.
    pub link: ReplLink,
}

/// The state of myself's replication link (for the data age, §12.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReplLink {
    /// Connected; `last_interaction` is when data last came from the primary.
    Up {
        /// Last interaction with the primary.
        last_interaction: Millis,
    },
    /// Never connected (a replica that never synced): its data age is unbounded, so it
    /// cannot start an automatic failover unless the validity factor is 0.
    #[default]
    Down,
    /// Not connected since this time.
    DownSince(Millis),
}

impl ReplicationState {
    /// The data age in ms (§12.2): seconds since the last interaction (link up) or since the
    /// link went down, times 1000 (Valkey keeps 1 s granularity); minus NODE_TIMEOUT when
    /// larger than it. `u64::MAX` when the link never came up.
    pub fn data_age_ms(&self, now: Millis, node_timeout_ms: u64) -> u64 {
        let since = match self.link {
            ReplLink::Up { last_interaction } => last_interaction,
            ReplLink::DownSince(t) => t,
            ReplLink::Down => return u64::MAX,
        };
        let age = (now.0 / 1000).saturating_sub(since.0 / 1000) * 1000;
        if age > node_timeout_ms {
            age - node_timeout_ms
        } else {
            age
        }
    }
}

/// My rank among the replicas of my primary (§12.2.1, V8 `clusterGetReplicaRank`): the number
/// of other replicas of it, not flagged NOFAILOVER, whose last advertised offset is greater
/// than `my_offset`, or equal with a smaller node ID. 0 for a primary or a replica with an
/// unknown primary.
pub fn replica_rank(topo: &Topology, my_offset: u64) -> u32 {
    let me = topo.myself();
    let Some(primary) = me.primary else {
        return 0;
    };
    let my_id = *me.id();
    let better = topo
        .replicas_of(&primary)
        .filter(|r| *r.id() != my_id && !r.flags.contains(NodeFlags::NOFAILOVER))
        .filter(|r| {
            r.repl_offset > my_offset
                || (r.repl_offset == my_offset && r.id().as_bytes() < my_id.as_bytes())
        })
        .count();
    u32::try_from(better).unwrap_or(u32::MAX)
}

/// Whether every replica of my primary, myself included, carries `MY_PRIMARY_FAIL` (Valkey
/// 9.1 `clusterAllReplicasThinkPrimaryIsFail`): each has seen the primary FAIL, so the
/// offsets they advertised since are their last. False for a primary or an unknown primary.
pub fn all_replicas_see_primary_fail(topo: &Topology) -> bool {
    let me = topo.myself();
    let Some(primary) = me.primary else {
        return false;
    };
    me.flags.contains(NodeFlags::MY_PRIMARY_FAIL)
        && topo
            .replicas_of(&primary)
            .all(|r| r.flags.contains(NodeFlags::MY_PRIMARY_FAIL))
}

/// My primary's rank among the failed primaries (Valkey 8.1 `clusterGetFailedPrimaryRank`):
/// the number of nodes that are FAIL, voting primaries (owning slots), have at least one
/// replica, and whose shard ID sorts before myself's (bytewise); when
/// `cluster-replica-validity-factor` is not 0, a primary FAIL for longer than
/// NODE_TIMEOUT × factor no longer counts. 0 for a primary.
///
/// The election start is delayed by this rank × [`EpochConfig::election_delay_ms`], so when
/// several primaries fail at once their replicas ask for votes one shard after another, in
/// an order every node computes alike, instead of splitting the voters' one vote per epoch
/// between simultaneous candidates. This follows Valkey 8.1+ (kept in 9.x); Redis 7.0 has
/// no such delay (only `500 + random(0..499) + rank × 1000` ms), and with ten primaries
/// lost in one tick its replicas collide epoch after epoch, each collision costing a retry
/// period of 4 × NODE_TIMEOUT.
pub fn failed_primary_rank(topo: &Topology, cfg: &EpochConfig, now: Millis) -> u32 {
    let me = topo.myself();
    if me.is_primary() {
        return 0;
    }
    let mine = me.shard_id;
    let window = (cfg.replica_validity_factor > 0).then(|| {
        cfg.node_timeout_ms
            .saturating_mul(u64::from(cfg.replica_validity_factor))
    });
    let before = topo
        .nodes()
        .filter(|n| n.is_fail() && n.is_voting_primary())
        .filter(|n| window.is_none_or(|w| n.fail_time.is_none_or(|t| now.since(t) <= w)))
        .filter(|n| n.shard_id.as_bytes() < mine.as_bytes())
        .filter(|n| topo.replicas_of(n.id()).next().is_some())
        .count();
    u32::try_from(before).unwrap_or(u32::MAX)
}

/// The election a replica runs (Valkey's `failover_auth_*` fields).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Election {
    auth_time: Option<Millis>,
    rank: u32,
    shard_rank: u32,
    sent: bool,
    count: usize,
    epoch: CurrentEpoch,
    cant: Option<CantFailover>,
}

impl Election {
    /// When votes may be (or were) requested (`failover_auth_time`); `None` if no election was
    /// ever scheduled (or it was forgotten).
    pub fn auth_time(&self) -> Option<Millis> {
        self.auth_time
    }
    /// The rank the delay was computed with.
    pub fn rank(&self) -> u32 {
        self.rank
    }
    /// The failed-primary rank the delay was computed with ([`failed_primary_rank`]).
    pub fn shard_rank(&self) -> u32 {
        self.shard_rank
    }
    /// Whether the auth request of this attempt was sent.
    pub fn sent(&self) -> bool {
        self.sent
    }
    /// Votes received for this attempt.
    pub fn votes(&self) -> usize {
        self.count
    }
    /// The epoch of the last attempt that asked for votes (`failover_auth_epoch`).
    pub fn epoch(&self) -> CurrentEpoch {
        self.epoch
    }

    /// Forgets any scheduled or running attempt (`failover_auth_time = 0`): a new one can be
    /// scheduled at once.
    pub(crate) fn forget(&mut self) {
        self.auth_time = None;
    }

    /// A primary `claimer` claimed `claimed` as its configEpoch (a PING/PONG/MEET header):
    /// if my election asked for votes in an epoch ≤ `claimed`, another node has won that
    /// epoch (or a later one), so mine cannot win; it is forgotten, and the next
    /// [`Epoch::handle_failover`] schedules a new attempt at once (the usual delays, a fresh
    /// epoch) instead of waiting for the attempt to expire and the retry time (4 ×
    /// NODE_TIMEOUT) to pass. Valkey 8.1 (`clusterProcessPacket`, PRs #1009 and #1339; not
    /// in Redis 7.0). Returns whether it reset.
    pub(crate) fn lost_to_claim(
        &mut self,
        claimer: &NodeId,
        claimed: ConfigEpoch,
        out: &mut Vec<EpochEffect>,
    ) -> bool {
        if self.auth_time.is_none() || !self.sent || claimed < self.epoch.as_config() {
            return false;
        }
        self.auth_time = None;
        out.push(EpochEffect::Event(EpochEvent::ElectionLost {
            epoch: self.epoch,
            winner: *claimer,
            claimed,
        }));
        true
    }

    /// §8 step 10 / §12.4: a FAILOVER_AUTH_ACK from a known `sender` whose header carried
    /// `current_epoch` counts when the sender is a voting primary and `current_epoch` ≥ the
    /// epoch of my election. There is no per-voter de-duplication (as in Valkey). Returns
    /// whether it counted; if so the node SHOULD run [`Epoch::handle_failover`] soon (Valkey
    /// does it before sleeping) so a won election completes without waiting for the cron.
    pub fn handle_auth_ack(
        &mut self,
        topo: &Topology,
        sender: &NodeId,
        current_epoch: CurrentEpoch,
    ) -> bool {
        let voter = topo.node(sender).is_some_and(|n| n.is_voting_primary());
        if voter && current_epoch >= self.epoch {
            self.count += 1;
            return true;
        }
        false
    }
}

impl Epoch {
    fn cant_failover(&mut self, reason: Option<CantFailover>, out: &mut Vec<EpochEffect>) {
        if self.election.cant != reason {
            self.election.cant = reason;
            if let Some(r) = reason {
                out.push(EpochEffect::Event(EpochEvent::CantFailover(r)));
            }
        }
    }

    /// One step of the replica's election (§12.1, §12.2, §12.4; the cron runs it every 100 ms,
    /// and the node SHOULD also run it right after a counted ACK or a FORCE failover).
    ///
    /// Preconditions: myself is a replica with a known primary, and the primary is FAIL or a
    /// manual failover may start; with `cluster-replica-no-failover` only manual failovers
    /// proceed. (Valkey 8 does not require the failed primary to own slots, so an empty shard
    /// can elect too.) Then, for automatic failovers only, the data age must not exceed
    /// `repl-ping-replica-period × 1000 + NODE_TIMEOUT × factor` (factor 0 disables it).
    ///
    /// Scheduling: when no attempt exists or the last one is older than the retry time
    /// (4 × NODE_TIMEOUT, at least 4000 ms), or was lost to another node's claim
    /// ([`EpochEvent::ElectionLost`]), a new one is set at
    /// `now + d + random(0..d) + rank × 2d + shard rank × d` ms, plus
    /// [`crate::ELECTION_NEW_REPLICA_DELAY_MS`] while my offset is 0, where `d` is
    /// [`EpochConfig::election_delay_ms`] (`min(NODE_TIMEOUT / 30, 500)`: Valkey 9.0; Redis 7.0
    /// uses `d = 500` whatever the timeout) ([`replica_rank`], [`failed_primary_rank`]; manual
    /// failover: `now`, rank 0), votes reset, and a PONG goes to my primary's other replicas.
    /// Until votes are requested both ranks are recomputed and the start shifted by the rank
    /// change × 2d and the shard rank change × d (automatic only). The shard rank and the
    /// reset on a lost epoch are Valkey 8.1's (`clusterHandleReplicaFailover`,
    /// `clusterGetFailedPrimaryRank`), not Redis 7.0's.
    ///
    /// Best-ranked fast path (Valkey 9.1): myself carries `MY_PRIMARY_FAIL` while my primary
    /// is FAIL in my view (set here, advertised in every header; the gossip layer mirrors a
    /// sibling's), and when I am rank 0 with failed-primary rank 0 and every replica of my
    /// primary carries it (every sibling has seen the failure, so the offsets they sent
    /// since are final: `clusterAllReplicasThinkPrimaryIsFail`), the election starts at once
    /// instead of after the delay, at scheduling or at a later rank update. A sole replica
    /// thus elects right after FAIL. Not taken from Valkey 9: its refusal to start an
    /// election at replication offset 0 (our hosts report 0 until a primary with no writes
    /// streams anything, which would leave an idle shard without failover).
    /// At the start time, unless the attempt expired (older than the auth timeout,
    /// 2 × NODE_TIMEOUT, at least 2000 ms): `currentEpoch += 1`, persist, then broadcast
    /// FAILOVER_AUTH_REQUEST (FORCEACK for a manual failover) after the persist. With
    /// `size / 2 + 1` votes: my configEpoch becomes the election epoch if lower, and myself
    /// takes over (§12.5: [`EpochEffect::BecomePrimary`], slots, persist, PONG to all).
    #[allow(clippy::too_many_arguments)]
    pub fn handle_failover<R: RngCore + ?Sized>(
        &mut self,
        topo: &mut Topology,
        cfg: &EpochConfig,
        repl: &ReplicationState,
        now: Millis,
        rng: &mut R,
        out: &mut Vec<EpochEffect>,
    ) {
        let manual = self.manual.end.is_some() && self.manual.can_start;
        let me = topo.myself();
        let primary_failed = me.primary.and_then(|p| topo.node(&p)).map(|p| p.is_fail());
        let sees_fail = !me.is_primary() && primary_failed == Some(true);
        if me.flags.contains(NodeFlags::MY_PRIMARY_FAIL) != sees_fail {
            topo.myself_mut()
                .flags
                .set(NodeFlags::MY_PRIMARY_FAIL, sees_fail);
        }
        let me = topo.myself();
        let ok = !me.is_primary()
            && primary_failed.is_some()
            && (primary_failed == Some(true) || manual)
            && (!cfg.replica_no_failover || manual);
        if !ok {
            self.election.cant = None;
            return;
        }
        if !manual {
            if let Some(max) = cfg.max_data_age_ms() {
                if repl.data_age_ms(now, cfg.node_timeout_ms) > max {
                    self.cant_failover(Some(CantFailover::DataAge), out);
                    return;
                }
            }
        }
        let auth_age = |e: &Election| e.auth_time.map_or(u64::MAX, |t| now.since(t));
        if auth_age(&self.election) > cfg.auth_retry_ms() {
            let rank = replica_rank(topo, repl.offset);
            let shard_rank = failed_primary_rank(topo, cfg, now);
            let d = cfg.election_delay_ms();
            let mut at = now
                .saturating_add_ms(d)
                .saturating_add_ms(rng.next_u64() % d)
                .saturating_add_ms(u64::from(rank) * 2 * d)
                .saturating_add_ms(u64::from(shard_rank) * d);
            if repl.offset == 0 {
                at = at.saturating_add_ms(ELECTION_NEW_REPLICA_DELAY_MS);
            }
            let mut rank = rank;
            if rank == 0 && shard_rank == 0 && all_replicas_see_primary_fail(topo) {
                at = now;
            }
            if self.manual.end.is_some() {
                at = now;
                rank = 0;
            }
            let e = &mut self.election;
            e.auth_time = Some(at);
            e.rank = rank;
            e.shard_rank = shard_rank;
            e.count = 0;
            e.sent = false;
            out.push(EpochEffect::Event(EpochEvent::ElectionScheduled {
                at,
                rank,
                shard_rank,
            }));
            out.push(EpochEffect::Send {
                to: Target::LocalReplicas,
                message: EpochMessage::Pong,
                after_persist: false,
            });
            if now < at {
                return;
            }
        }
        if !self.election.sent && self.manual.end.is_none() {
            // Both ranks may have changed since the schedule (better offsets heard from the
            // other replicas; a failed shard elected its new primary): the start moves by
            // the difference (Valkey 8.1).
            let new = replica_rank(topo, repl.offset);
            let new_shard = failed_primary_rank(topo, cfg, now);
            let e = &mut self.election;
            if let (Some(t), true) = (e.auth_time, new != e.rank || new_shard != e.shard_rank) {
                let shift = |t: Millis, old: u32, new: u32, step: u64| {
                    if new >= old {
                        t.saturating_add_ms(u64::from(new - old) * step)
                    } else {
                        t.saturating_sub_ms(u64::from(old - new) * step)
                    }
                };
                let d = cfg.election_delay_ms();
                let t = shift(t, e.rank, new, 2 * d);
                let t = shift(t, e.shard_rank, new_shard, d);
                e.auth_time = Some(t);
                e.rank = new;
                e.shard_rank = new_shard;
                out.push(EpochEffect::Event(EpochEvent::ElectionRankChanged {
                    at: t,
                    rank: new,
                    shard_rank: new_shard,
                }));
            }
            // Best ranked, and every sibling has seen the failure by now (Valkey 9.1: "Myself
            // become the best ranked replica, initiate the election immediately").
            let best = e.rank == 0 && e.shard_rank == 0;
            if best && e.auth_time.is_some_and(|t| now < t) && all_replicas_see_primary_fail(topo) {
                e.auth_time = Some(now);
                out.push(EpochEffect::Event(EpochEvent::ElectionRankChanged {
                    at: now,
                    rank: 0,
                    shard_rank: 0,
                }));
            }
        }
        let Some(at) = self.election.auth_time else {
            return;
        };
        if now < at {
            self.cant_failover(Some(CantFailover::WaitingDelay), out);
            return;
        }
        if now.since(at) > cfg.auth_timeout_ms() {
            self.cant_failover(Some(CantFailover::Expired), out);
            return;
        }
        if !self.election.sent {
            topo.current_epoch = topo.current_epoch.next();
            self.election.epoch = topo.current_epoch;
            self.election.sent = true;
            out.push(EpochEffect::Persist);
            out.push(EpochEffect::Send {
                to: Target::AllNodes,
                message: EpochMessage::AuthRequest {
                    force_ack: self.manual.end.is_some(),
                },
                after_persist: true,
            });
            out.push(EpochEffect::UpdateState);
            out.push(EpochEffect::Event(EpochEvent::ElectionStarted(
                self.election.epoch,
            )));
            return;
        }
        let quorum = topo.cluster_size() / 2 + 1;
        if self.election.count >= quorum {
            let epoch = self.election.epoch;
            let mine = topo.myself().config_epoch;
            if mine < epoch.as_config() {
                topo.myself_mut().config_epoch = epoch.as_config();
            }
            out.push(EpochEffect::Event(EpochEvent::ElectionWon(epoch)));
            self.replace_my_primary(topo, out);
            self.election.cant = None;
            // The attempt is over (Valkey 8.1, PR #1711): a later claim of the epoch is not
            // a loss, and a new failure of the shard schedules a fresh election at once.
            self.election.forget();
        } else {
            self.cant_failover(Some(CantFailover::WaitingVotes), out);
        }
    }
}

//! The voting side of replica elections (§12.3, V8 `clusterSendFailoverAuthIfNeeded`).

use crate::{Epoch, EpochEffect, EpochEvent, EpochMessage, Target, VoteDenied};
use ferrocluster_slot::SlotSet;
use ferrocluster_topology::{ConfigEpoch, CurrentEpoch, NodeId, Topology};

/// The fields of a FAILOVER_AUTH_REQUEST header the vote reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthRequest<'a> {
    /// The requesting replica (a known node).
    pub requester: NodeId,
    /// Header `currentEpoch` (the election epoch).
    pub current_epoch: CurrentEpoch,
    /// Header `configEpoch` (the requester's primary's, as the requester knows it).
    pub config_epoch: ConfigEpoch,
    /// Header `myslots` (the requester's primary's slots).
    pub slots: &'a SlotSet,
    /// mflags FORCEACK (manual failover).
    pub force_ack: bool,
}

/// The result of a vote request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VoteOutcome {
    /// Rule 1: myself is not a voting primary; ignored without even an event.
    NotVoter,
    /// Refused: nothing is sent, except the UPDATE that answers a stale slot claim.
    Denied(VoteDenied),
    /// Granted in this epoch: lastVoteEpoch is set, persisted, then the ACK leaves.
    Granted(CurrentEpoch),
}

impl Epoch {
    /// §12.3: decides on a FAILOVER_AUTH_REQUEST from a known node, checking in Valkey 8's
    /// order:
    /// 1. myself must be a voting primary (flag PRIMARY, ≥ 1 slot), else ignored;
    /// 2. request currentEpoch < my currentEpoch → deny;
    /// 3. lastVoteEpoch == currentEpoch (already voted in this epoch) → deny;
    /// 4. the requester is flagged PRIMARY, or its primary is unknown, or its primary is not
    ///    FAIL and FORCEACK is not set → deny;
    /// 5. (the fact sheet's "voted for a replica of the same primary less than
    ///    2 × NODE_TIMEOUT ago → deny" is not applied: Valkey 8.1 removed it, for manual
    ///    failovers in PR #1305 and for automatic ones in PR #1356, and the Valkey 9.1.2
    ///    binary has no such refusal; one vote per epoch, rule 3, is what keeps two replicas
    ///    from winning the same epoch. Redis 7.0 still has it: "can't vote about this master
    ///    before". With it, the immediate retry after a lost epoch
    ///    ([`EpochEvent::ElectionLost`]) cannot win: after a split vote every voter that
    ///    backed the replica refuses it again for 2 × NODE_TIMEOUT, the replica cannot reach
    ///    a quorum, and the shard waits out the auth timeout and the retry time — seed 70 of
    ///    the simulator's `ten_simultaneous_failovers_at_30_primaries`);
    /// 6. a claimed slot is owned (and claimed, §11.4) by a node with a configEpoch greater
    ///    than the request's → deny;
    /// 7. grant: `lastVoteEpoch = currentEpoch`, then [`EpochEffect::Persist`] followed by the
    ///    FAILOVER_AUTH_ACK to the requester with `after_persist` (the vote is on disk before
    ///    it leaves).
    ///
    /// A refusal sends nothing (only [`EpochEvent::VoteDenied`]), except for rule 6: the
    /// requester claims its primary's slots with a configEpoch older than the owner's in my
    /// view — it never heard its primary's last bump (the primary's messages to it were lost) —
    /// and gets the §11.3 UPDATE about that owner ([`Epoch::check_stale_claims`] applied to
    /// the request's claim), so its next attempt claims the current configEpoch; without it
    /// such a replica is refused in every election and its shard stays down. The node MUST
    /// have run the header bookkeeping of §8 step 4 first (my currentEpoch raised to the
    /// request's).
    pub fn handle_auth_request(
        &mut self,
        topo: &mut Topology,
        req: &AuthRequest<'_>,
        out: &mut Vec<EpochEffect>,
    ) -> VoteOutcome {
        let outcome = self.decide_vote(topo, req);
        match outcome {
            VoteOutcome::NotVoter => {}
            VoteOutcome::Denied(reason) => {
                out.push(EpochEffect::Event(EpochEvent::VoteDenied {
                    to: req.requester,
                    reason,
                }));
                if reason == VoteDenied::StaleSlotClaim {
                    // The requester holds an old view of its primary's configEpoch (it missed
                    // a bump): the §11.3 UPDATE about the slot's owner tells it, so its next
                    // attempt claims the current epoch and can win (issue 16, BUG-07).
                    self.check_stale_claims(topo, &req.requester, req.config_epoch, req.slots, out);
                }
            }
            VoteOutcome::Granted(epoch) => {
                topo.last_vote_epoch = epoch;
                out.push(EpochEffect::Persist);
                out.push(EpochEffect::Send {
                    to: Target::Node(req.requester),
                    message: EpochMessage::AuthAck,
                    after_persist: true,
                });
                out.push(EpochEffect::Event(EpochEvent::VoteGranted {
                    to: req.requester,
                    epoch,
                }));
            }
        }
        outcome
    }

    fn decide_vote(&self, topo: &Topology, req: &AuthRequest<'_>) -> VoteOutcome {
        if !topo.myself().is_voting_primary() {
            return VoteOutcome::NotVoter;
        }
        let current = topo.current_epoch;
        if req.current_epoch < current {
            return VoteOutcome::Denied(VoteDenied::StaleRequestEpoch);
        }
        if topo.last_vote_epoch == current {
            return VoteOutcome::Denied(VoteDenied::AlreadyVoted);
        }
        let Some(node) = topo.node(&req.requester) else {
            return VoteOutcome::Denied(VoteDenied::PrimaryUnknown);
        };
        if node.is_primary() {
            return VoteOutcome::Denied(VoteDenied::RequesterIsPrimary);
        }
        let Some(primary) = node.primary.and_then(|p| topo.node(&p)) else {
            return VoteOutcome::Denied(VoteDenied::PrimaryUnknown);
        };
        if !primary.is_fail() && !req.force_ack {
            return VoteOutcome::Denied(VoteDenied::PrimaryNotFailed);
        }
        for slot in req.slots.iter() {
            if self.is_slot_unclaimed(topo, slot) {
                continue;
            }
            let stale = topo
                .slot_owner(slot)
                .and_then(|o| topo.node(o))
                .is_some_and(|o| o.config_epoch > req.config_epoch);
            if stale {
                return VoteOutcome::Denied(VoteDenied::StaleSlotClaim);
            }
        }
        VoteOutcome::Granted(current)
    }
}

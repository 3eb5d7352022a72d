use super::util::*;
use crate::*;
use ferrocluster_slot::SlotSet;
use ferrocluster_topology::{ConfigEpoch, CurrentEpoch, NodeFlags, Topology};
use proptest::prelude::*;

/// Voter `v` (primary of 100..=199, epoch 2); failed primary `p` (0..=99, epoch 1) with
/// replicas `r` and `s`. currentEpoch 5.
fn setup() -> Topology {
    let mut t = topo('v', 2, &slots(100..=199));
    add_primary(&mut t, 'p', 'p', 1, &slots(0..=99));
    add_replica(&mut t, 'r', 'p', 10);
    add_replica(&mut t, 's', 'p', 10);
    t.node_mut(&id('p')).unwrap().flags.insert(NodeFlags::FAIL);
    t.current_epoch = CurrentEpoch(5);
    t
}

fn req(from: char, epoch: u64, force_ack: bool, s: &SlotSet) -> AuthRequest<'_> {
    AuthRequest {
        requester: id(from),
        current_epoch: CurrentEpoch(epoch),
        config_epoch: ConfigEpoch(1),
        slots: s,
        force_ack,
    }
}

#[test]
fn grant_persists_last_vote_epoch_before_the_ack() {
    // §12.3 rule 7 and §22 item 7.
    let mut t = setup();
    let s = slots(0..=99);
    let mut out = Vec::new();
    let o = Epoch::new().handle_auth_request(&mut t, &req('r', 5, false, &s), &mut out);
    assert_eq!(o, VoteOutcome::Granted(CurrentEpoch(5)));
    assert_eq!(t.last_vote_epoch, CurrentEpoch(5));
    assert_eq!(out[0], EpochEffect::Persist);
    assert_eq!(
        out[1],
        EpochEffect::Send {
            to: Target::Node(id('r')),
            message: EpochMessage::AuthAck,
            after_persist: true
        }
    );
}

#[test]
fn rule1_only_voting_primaries_vote() {
    let mut t = setup();
    for s in 100..=199 {
        t.set_slot_owner(slot(s), None).unwrap();
    }
    let s = slots(0..=99);
    let mut out = Vec::new();
    let o = Epoch::new().handle_auth_request(&mut t, &req('r', 5, false, &s), &mut out);
    assert_eq!(o, VoteOutcome::NotVoter);
    assert!(out.is_empty());
}

#[test]
fn rules_2_to_6_deny_silently_in_order() {
    let s = slots(0..=99);
    // Silence, no refusal message — but rule 6 answers with the owner's UPDATE (issue 16,
    // `a_stale_slot_claim_is_answered_with_an_update_about_the_owner`).
    let deny = |t: &mut Topology, r: AuthRequest<'_>| {
        let mut out = Vec::new();
        let o = Epoch::new().handle_auth_request(t, &r, &mut out);
        let stale = o == VoteOutcome::Denied(VoteDenied::StaleSlotClaim);
        assert!(
            !out.iter().any(|e| match e {
                EpochEffect::Persist => true,
                EpochEffect::Send { message, .. } =>
                    !(stale && matches!(message, EpochMessage::Update { .. })),
                _ => false,
            }),
            "silence, no refusal: {out:?}"
        );
        o
    };
    // 2: an older request epoch.
    let mut t = setup();
    assert_eq!(
        deny(&mut t, req('r', 4, false, &s)),
        VoteOutcome::Denied(VoteDenied::StaleRequestEpoch)
    );
    // 3: already voted in this epoch (checked before the requester's role).
    let mut t = setup();
    t.last_vote_epoch = CurrentEpoch(5);
    assert_eq!(
        deny(&mut t, req('v', 5, false, &s)),
        VoteOutcome::Denied(VoteDenied::AlreadyVoted)
    );
    // 4: a primary requester; a replica with an unknown primary; a primary that is not FAIL.
    let mut t = setup();
    assert_eq!(
        deny(&mut t, req('p', 5, false, &s)),
        VoteOutcome::Denied(VoteDenied::RequesterIsPrimary)
    );
    t.node_mut(&id('r')).unwrap().primary = None;
    assert_eq!(
        deny(&mut t, req('r', 5, false, &s)),
        VoteOutcome::Denied(VoteDenied::PrimaryUnknown)
    );
    let mut t = setup();
    t.node_mut(&id('p')).unwrap().flags.remove(NodeFlags::FAIL);
    assert_eq!(
        deny(&mut t, req('r', 5, false, &s)),
        VoteOutcome::Denied(VoteDenied::PrimaryNotFailed)
    );
    // ... unless FORCEACK (manual failover).
    let o = Epoch::new().handle_auth_request(&mut t, &req('r', 5, true, &s), &mut Vec::new());
    assert_eq!(o, VoteOutcome::Granted(CurrentEpoch(5)));
    // 6: a claimed slot owned by a node with a greater configEpoch (my own 100..=199, epoch 2
    // > request's 1).
    let mut t = setup();
    let both = slots(0..=150);
    assert_eq!(
        deny(&mut t, req('r', 5, false, &both)),
        VoteOutcome::Denied(VoteDenied::StaleSlotClaim)
    );
}

/// Issue 16 item 11 (BUG-07): a replica that missed its primary's configEpoch bump asks with
/// the old epoch; the vote is denied and the requester is told the owner's configuration
/// (an UPDATE about the primary, §11.3), so its next attempt can win. Nothing is persisted.
#[test]
fn a_stale_slot_claim_is_answered_with_an_update_about_the_owner() {
    let mut t = setup();
    t.node_mut(&id('p')).unwrap().config_epoch = ConfigEpoch(4);
    let s = slots(0..=99);
    let mut out = Vec::new();
    let o = Epoch::new().handle_auth_request(&mut t, &req('r', 5, false, &s), &mut out);
    assert_eq!(o, VoteOutcome::Denied(VoteDenied::StaleSlotClaim));
    assert_eq!(t.last_vote_epoch, CurrentEpoch(0));
    assert_eq!(
        out,
        vec![
            EpochEffect::Event(EpochEvent::VoteDenied {
                to: id('r'),
                reason: VoteDenied::StaleSlotClaim
            }),
            EpochEffect::Send {
                to: Target::Node(id('r')),
                message: EpochMessage::Update {
                    node: id('p'),
                    config_epoch: ConfigEpoch(4),
                    slots: Box::new(s.clone()),
                },
                after_persist: false
            }
        ]
    );
    // Other refusals stay silent.
    let mut out = Vec::new();
    t.node_mut(&id('p')).unwrap().flags.remove(NodeFlags::FAIL);
    Epoch::new().handle_auth_request(&mut t, &req('r', 5, false, &s), &mut out);
    assert!(!out.iter().any(|e| matches!(e, EpochEffect::Send { .. })));
}

proptest! {
    /// Whatever sequence of requests arrives (requesters, epochs, FORCEACK), a voter
    /// grants at most one vote per epoch, and every grant is preceded by a persist.
    #[test]
    fn never_two_votes_in_one_epoch(reqs in proptest::collection::vec((0usize..3, 0u64..8, any::<bool>()), 1..40)) {
        let mut t = setup();
        let mut e = Epoch::new();
        let s = slots(0..=99);
        let mut granted = std::collections::BTreeSet::new();
        for (who, ep, force) in reqs {
            // §8 step 4: the header raises currentEpoch.
            t.current_epoch = t.current_epoch.max(CurrentEpoch(ep));
            let from = ['r', 's', 'p'][who];
            let mut out = Vec::new();
            if let VoteOutcome::Granted(g) = e.handle_auth_request(&mut t, &req(from, ep, force, &s), &mut out) {
                prop_assert!(granted.insert(g), "second vote in epoch {}", g);
                prop_assert_eq!(&out[0], &EpochEffect::Persist);
            }
        }
    }
}

/// Valkey 8.1 PR #1356 (kept in 9.x; the 9.1.2 binary has no such refusal): a voter that
/// voted for replica `r` of the failed primary `p` votes for `s`, another replica of `p`, in
/// the next epoch at once, and for `r` again after `r` lost its epoch — only one vote per
/// epoch limits it. Redis 7.0 refuses both for 2 × NODE_TIMEOUT. Seed 70 of the simulator's
/// `ten_simultaneous_failovers_at_30_primaries` failed on that refusal.
#[test]
fn a_later_epoch_gets_a_vote_for_the_same_failed_primary_at_once() {
    let mut t = setup();
    let s = slots(0..=99);
    let mut e = Epoch::new();
    let vote = |e: &mut Epoch, t: &mut Topology, from: char, epoch: u64| {
        t.current_epoch = CurrentEpoch(epoch);
        e.handle_auth_request(t, &req(from, epoch, false, &s), &mut Vec::new())
    };
    assert_eq!(
        vote(&mut e, &mut t, 'r', 5),
        VoteOutcome::Granted(CurrentEpoch(5))
    );
    assert_eq!(
        vote(&mut e, &mut t, 's', 5),
        VoteOutcome::Denied(VoteDenied::AlreadyVoted),
        "one vote per epoch"
    );
    assert_eq!(
        vote(&mut e, &mut t, 's', 6),
        VoteOutcome::Granted(CurrentEpoch(6))
    );
    assert_eq!(
        vote(&mut e, &mut t, 'r', 7),
        VoteOutcome::Granted(CurrentEpoch(7))
    );
}

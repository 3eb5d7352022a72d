use super::util::*;
use crate::*;
use ferrocluster_slot::SlotSet;
use ferrocluster_topology::{ConfigEpoch, CurrentEpoch, Millis, NodeFlags, Topology};
use proptest::prelude::*;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Myself `m` replicates `p` (0..=99, epoch 3, FAIL) with sibling `s`; voters `x` and `y`
/// (two more primaries) → cluster size 3, quorum 2. currentEpoch 4.
fn setup(my_offset_sibling: u64) -> Topology {
    let mut t = setup_sole_replica();
    add_replica(&mut t, 's', 'p', my_offset_sibling);
    t
}

fn synced(now: Millis) -> ReplicationState {
    ReplicationState {
        offset: 100,
        link: ReplLink::DownSince(now),
    }
}

fn run(
    e: &mut Epoch,
    t: &mut Topology,
    cfg: &EpochConfig,
    repl: &ReplicationState,
    now: Millis,
) -> Vec<EpochEffect> {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut out = Vec::new();
    e.handle_failover(t, cfg, repl, now, &mut rng, &mut out);
    out
}

#[test]
fn rank_counts_better_offsets_ties_by_smaller_id_and_skips_nofailover() {
    // §12.2.1: sibling s has offset 100 = mine; s > m by ID → rank 0. Sibling a (< m) with the
    // same offset counts; sibling z with a larger offset counts unless NOFAILOVER.
    let mut t = setup(100);
    assert_eq!(replica_rank(&t, 100), 0);
    add_replica(&mut t, 'a', 'p', 100);
    assert_eq!(replica_rank(&t, 100), 1);
    add_replica(&mut t, 'z', 'p', 500);
    assert_eq!(replica_rank(&t, 100), 2);
    t.node_mut(&id('z'))
        .unwrap()
        .flags
        .insert(NodeFlags::NOFAILOVER);
    assert_eq!(replica_rank(&t, 100), 1);
    assert_eq!(replica_rank(&t, 1000), 0);
}

proptest! {
    /// A larger offset never gives a worse (larger) rank.
    #[test]
    fn rank_is_monotonic_in_the_offset(offs in proptest::collection::vec(0u64..50, 0..6), a in 0u64..60, b in 0u64..60) {
        let mut t = setup(0);
        for (i, o) in offs.iter().enumerate() {
            add_replica(&mut t, char::from(b'0' + i as u8), 'p', *o);
        }
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        prop_assert!(replica_rank(&t, hi) <= replica_rank(&t, lo));
    }
}

#[test]
fn delay_is_500_plus_random_plus_rank_seconds() {
    // §12.2: failover_auth_time in [now + 500 + rank×1000, now + 999 + rank×1000].
    for seed in 0..50u64 {
        for (sib, rank) in [(50u64, 0u32), (500, 1)] {
            let mut t = setup(sib);
            let mut e = Epoch::new();
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut out = Vec::new();
            e.handle_failover(
                &mut t,
                &EpochConfig::default(),
                &synced(T0),
                T0,
                &mut rng,
                &mut out,
            );
            let at = e.election().auth_time().unwrap();
            let lo = 500 + u64::from(rank) * 1000;
            assert!((lo..lo + 500).contains(&at.since(T0)), "{}", at.since(T0));
            assert_eq!(e.election().rank(), rank);
            assert_eq!(
                out[1],
                EpochEffect::Send {
                    to: Target::LocalReplicas,
                    message: EpochMessage::Pong,
                    after_persist: false
                }
            );
            assert_eq!(
                t.current_epoch,
                CurrentEpoch(4),
                "no epoch bump before the delay"
            );
        }
    }
}

#[test]
fn delay_unit_is_node_timeout_over_30_and_a_new_replica_waits_500_more() {
    // Valkey 9.0 (PR #2449, clusterHandleReplicaFailover): d = min(NODE_TIMEOUT / 30, 500);
    // start in [d + rank × 2d, 2d + rank × 2d), + 500 ms while my offset is 0.
    let cfg = EpochConfig {
        node_timeout_ms: 5000,
        ..EpochConfig::default()
    };
    let d = 166;
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..50u64 {
        for (sib, rank) in [(50u64, 0u32), (500, 1)] {
            for (offset, extra) in [(100u64, 0u64), (0, 500)] {
                let mut t = setup(sib);
                let mut e = Epoch::new();
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                let mut out = Vec::new();
                let repl = ReplicationState {
                    offset,
                    link: ReplLink::DownSince(T0),
                };
                e.handle_failover(&mut t, &cfg, &repl, T0, &mut rng, &mut out);
                let at = e.election().auth_time().unwrap().since(T0);
                let rank = if offset == 0 { 1 } else { rank };
                let lo = d + u64::from(rank) * 2 * d + extra;
                assert!((lo..lo + d).contains(&at), "{at} not in {lo}..{}", lo + d);
                seen.insert(at - lo);
            }
        }
    }
    assert!(seen.len() > 10, "the random part varies: {seen:?}");
}

#[test]
fn full_election_auth_request_waits_for_the_bumped_epoch_then_quorum_wins() {
    let cfg = EpochConfig::default();
    let mut t = setup(50);
    let mut e = Epoch::new();
    run(&mut e, &mut t, &cfg, &synced(T0), T0);
    let at = e.election().auth_time().unwrap();
    // Before the delay: waiting.
    let out = run(&mut e, &mut t, &cfg, &synced(T0), at.saturating_sub_ms(1));
    assert!(has(
        &out,
        &EpochEffect::Event(EpochEvent::CantFailover(CantFailover::WaitingDelay))
    ));
    // At the delay: currentEpoch 4 → 5, persist, then the request after the persist.
    let out = run(&mut e, &mut t, &cfg, &synced(T0), at);
    assert_eq!(t.current_epoch, CurrentEpoch(5));
    assert_eq!(out[0], EpochEffect::Persist);
    assert_eq!(
        out[1],
        EpochEffect::Send {
            to: Target::AllNodes,
            message: EpochMessage::AuthRequest { force_ack: false },
            after_persist: true
        }
    );
    assert_eq!(e.election().epoch(), CurrentEpoch(5));
    // ACKs: from a replica or an older epoch do not count.
    assert!(!e
        .election_mut()
        .handle_auth_ack(&t, &id('s'), CurrentEpoch(5)));
    assert!(!e
        .election_mut()
        .handle_auth_ack(&t, &id('x'), CurrentEpoch(4)));
    assert!(e
        .election_mut()
        .handle_auth_ack(&t, &id('x'), CurrentEpoch(5)));
    let out = run(&mut e, &mut t, &cfg, &synced(T0), at.saturating_add_ms(10));
    assert!(has(
        &out,
        &EpochEffect::Event(EpochEvent::CantFailover(CantFailover::WaitingVotes))
    ));
    assert!(e
        .election_mut()
        .handle_auth_ack(&t, &id('y'), CurrentEpoch(5)));
    // Quorum 2 of 3 reached: configEpoch = 5, primary, slots of p, PONG after the persist.
    let out = run(&mut e, &mut t, &cfg, &synced(T0), at.saturating_add_ms(20));
    assert!(t.myself().is_primary());
    assert_eq!(t.myself().config_epoch, ConfigEpoch(5));
    assert_eq!(t.slot_owner(slot(42)), Some(&id('m')));
    assert_eq!(t.node(&id('p')).unwrap().slot_count(), 0);
    assert!(has(&out, &EpochEffect::BecomePrimary));
    let p = position(&out, |x| *x == EpochEffect::Persist).unwrap();
    assert_eq!(
        out[p + 1],
        EpochEffect::Send {
            to: Target::AllNodes,
            message: EpochMessage::Pong,
            after_persist: true
        }
    );
}

#[test]
fn expired_election_waits_for_the_retry_window() {
    // auth timeout = max(2×NODE_TIMEOUT, 2000); retry = 2 × that (§12.2).
    let cfg = EpochConfig {
        node_timeout_ms: 500,
        ..EpochConfig::default()
    };
    assert_eq!((cfg.auth_timeout_ms(), cfg.auth_retry_ms()), (2000, 4000));
    let mut t = setup(50);
    let mut e = Epoch::new();
    run(&mut e, &mut t, &cfg, &synced(T0), T0);
    let at = e.election().auth_time().unwrap();
    run(&mut e, &mut t, &cfg, &synced(T0), at);
    assert!(e.election().sent());
    let out = run(
        &mut e,
        &mut t,
        &cfg,
        &synced(T0),
        at.saturating_add_ms(2001),
    );
    assert!(has(
        &out,
        &EpochEffect::Event(EpochEvent::CantFailover(CantFailover::Expired))
    ));
    run(
        &mut e,
        &mut t,
        &cfg,
        &synced(T0),
        at.saturating_add_ms(4000),
    );
    assert_eq!(
        e.election().auth_time(),
        Some(at),
        "not rescheduled at exactly the retry time"
    );
    run(
        &mut e,
        &mut t,
        &cfg,
        &synced(T0),
        at.saturating_add_ms(4001),
    );
    assert!(e.election().auth_time().unwrap() > at.saturating_add_ms(4001));
    assert!(!e.election().sent());
}

#[test]
fn rank_change_before_the_request_shifts_the_start() {
    let cfg = EpochConfig::default();
    let mut t = setup(50);
    let mut e = Epoch::new();
    run(&mut e, &mut t, &cfg, &synced(T0), T0);
    let at = e.election().auth_time().unwrap();
    t.node_mut(&id('s')).unwrap().repl_offset = 1000; // sibling advertised a better offset
    let out = run(&mut e, &mut t, &cfg, &synced(T0), T0.saturating_add_ms(100));
    assert_eq!(e.election().auth_time(), Some(at.saturating_add_ms(1000)));
    assert!(has(
        &out,
        &EpochEffect::Event(EpochEvent::ElectionRankChanged {
            at: at.saturating_add_ms(1000),
            rank: 1,
            shard_rank: 0,
        })
    ));
}

#[test]
fn preconditions_primary_fail_no_failover_and_data_age() {
    let cfg = EpochConfig::default();
    // Primary not FAIL → nothing.
    let mut t = setup(50);
    t.node_mut(&id('p')).unwrap().flags.remove(NodeFlags::FAIL);
    let mut e = Epoch::new();
    assert!(run(&mut e, &mut t, &cfg, &synced(T0), T0).is_empty());
    // cluster-replica-no-failover → nothing.
    let mut t = setup(50);
    let c = EpochConfig {
        replica_no_failover: true,
        ..cfg
    };
    assert!(run(&mut e, &mut t, &c, &synced(T0), T0).is_empty());
    // Never synced: refused with the default factor, allowed with factor 0.
    let never = ReplicationState {
        offset: 0,
        link: ReplLink::Down,
    };
    let out = run(&mut e, &mut t, &cfg, &never, T0);
    assert_eq!(
        out,
        vec![EpochEffect::Event(EpochEvent::CantFailover(
            CantFailover::DataAge
        ))]
    );
    let c0 = EpochConfig {
        replica_validity_factor: 0,
        ..cfg
    };
    run(&mut e, &mut t, &c0, &never, T0);
    assert!(e.election().auth_time().is_some());
}

#[test]
fn data_age_limit_is_ping_period_plus_timeout_times_factor() {
    // §12.2: limit = 10 × 1000 + 15000 × 10 = 160000 ms, data age minus NODE_TIMEOUT.
    let cfg = EpochConfig::default();
    assert_eq!(cfg.max_data_age_ms(), Some(160_000));
    let down = |ago: u64| ReplicationState {
        offset: 0,
        link: ReplLink::DownSince(Millis(T0.0 - ago)),
    };
    assert_eq!(down(175_000).data_age_ms(T0, 15_000), 160_000);
    assert_eq!(down(176_000).data_age_ms(T0, 15_000), 161_000);
    let mut e = Epoch::new();
    let mut t = setup(50);
    run(&mut e, &mut t, &cfg, &down(175_000), T0);
    assert!(
        e.election().auth_time().is_some(),
        "exactly at the limit: allowed"
    );
    let mut e = Epoch::new();
    let out = run(&mut e, &mut t, &cfg, &down(176_000), T0);
    assert!(has(
        &out,
        &EpochEffect::Event(EpochEvent::CantFailover(CantFailover::DataAge))
    ));
}

#[test]
fn empty_shard_can_elect() {
    // V8: the failed primary need not own slots; voters see no conflicting claim.
    let mut t = setup(50);
    for s in 0..=99 {
        t.set_slot_owner(slot(s), None).unwrap();
    }
    let cfg = EpochConfig::default();
    let mut e = Epoch::new();
    run(&mut e, &mut t, &cfg, &synced(T0), T0);
    let at = e.election().auth_time().unwrap();
    run(&mut e, &mut t, &cfg, &synced(T0), at);
    // The voters' side: x grants (primary FAIL, nothing claimed).
    let mut vx = topo('x', 1, &slots(100..=199));
    add_primary(&mut vx, 'p', 'p', 3, &SlotSet::new());
    add_primary(&mut vx, 'y', 'y', 2, &slots(200..=299));
    add_replica(&mut vx, 'm', 'p', 100);
    vx.node_mut(&id('p')).unwrap().flags.insert(NodeFlags::FAIL);
    vx.current_epoch = CurrentEpoch(5);
    let empty = SlotSet::new();
    let r = AuthRequest {
        requester: id('m'),
        current_epoch: CurrentEpoch(5),
        config_epoch: ConfigEpoch(3),
        slots: &empty,
        force_ack: false,
    };
    let o = Epoch::new().handle_auth_request(&mut vx, &r, &mut Vec::new());
    assert_eq!(o, VoteOutcome::Granted(CurrentEpoch(5)));
    e.election_mut()
        .handle_auth_ack(&t, &id('x'), CurrentEpoch(5));
    e.election_mut()
        .handle_auth_ack(&t, &id('y'), CurrentEpoch(5));
    let out = run(&mut e, &mut t, &cfg, &synced(T0), at.saturating_add_ms(1));
    assert!(has(&out, &EpochEffect::BecomePrimary));
}

/// Valkey 8.1 `clusterGetFailedPrimaryRank`: FAIL voting primaries with replicas whose shard
/// ID sorts before mine, FAIL for at most NODE_TIMEOUT × validity factor.
#[test]
fn shard_rank_counts_failed_primaries_with_replicas_in_smaller_shards() {
    let cfg = EpochConfig::default();
    let mut t = setup(50);
    assert_eq!(
        failed_primary_rank(&t, &cfg, T0),
        0,
        "only my own primary failed"
    );
    // 'a' < 'p': counts once FAIL, with a replica, owning slots.
    add_primary(&mut t, 'a', 'a', 5, &slots(300..=399));
    t.node_mut(&id('a')).unwrap().flags.insert(NodeFlags::FAIL);
    assert_eq!(failed_primary_rank(&t, &cfg, T0), 0, "no replica");
    add_replica(&mut t, 'b', 'a', 0);
    assert_eq!(failed_primary_rank(&t, &cfg, T0), 1);
    // 'z' > 'p': never counts.
    add_primary(&mut t, 'z', 'z', 6, &slots(400..=499));
    add_replica(&mut t, 'w', 'z', 0);
    t.node_mut(&id('z')).unwrap().flags.insert(NodeFlags::FAIL);
    assert_eq!(failed_primary_rank(&t, &cfg, T0), 1);
    // FAIL for longer than NODE_TIMEOUT × factor: no longer counts (unless factor 0).
    t.node_mut(&id('a')).unwrap().fail_time = Some(T0);
    let late = T0.saturating_add_ms(cfg.node_timeout_ms * 10 + 1);
    assert_eq!(failed_primary_rank(&t, &cfg, late), 0);
    let no_factor = EpochConfig {
        replica_validity_factor: 0,
        ..cfg
    };
    assert_eq!(failed_primary_rank(&t, &no_factor, late), 1);
    // PFAIL is not FAIL.
    let a = t.node_mut(&id('a')).unwrap();
    a.flags.remove(NodeFlags::FAIL);
    a.flags.insert(NodeFlags::PFAIL);
    assert_eq!(failed_primary_rank(&t, &cfg, T0), 0);
}

#[test]
fn delay_adds_half_a_second_per_shard_rank_and_moves_when_it_changes() {
    for seed in 0..20u64 {
        let cfg = EpochConfig::default();
        let mut t = setup(50);
        for (p, r, first) in [('a', 'b', 300u16), ('c', 'd', 400)] {
            add_primary(&mut t, p, p, 5, &slots(first..=first + 99));
            add_replica(&mut t, r, p, 0);
            t.node_mut(&id(p)).unwrap().flags.insert(NodeFlags::FAIL);
        }
        let mut e = Epoch::new();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut out = Vec::new();
        e.handle_failover(&mut t, &cfg, &synced(T0), T0, &mut rng, &mut out);
        let at = e.election().auth_time().unwrap();
        assert!((1500..2000).contains(&at.since(T0)), "{}", at.since(T0));
        assert_eq!(e.election().shard_rank(), 2);
        assert!(out.iter().any(|x| matches!(
            x,
            EpochEffect::Event(EpochEvent::ElectionScheduled {
                shard_rank: 2,
                rank: 0,
                ..
            })
        )));
        // Shard 'a' got its new primary: one failed shard less before mine, 500 ms earlier.
        t.node_mut(&id('a')).unwrap().flags.remove(NodeFlags::FAIL);
        let out = run(&mut e, &mut t, &cfg, &synced(T0), T0.saturating_add_ms(100));
        assert_eq!(e.election().auth_time(), Some(at.saturating_sub_ms(500)));
        assert!(has(
            &out,
            &EpochEffect::Event(EpochEvent::ElectionRankChanged {
                at: at.saturating_sub_ms(500),
                rank: 0,
                shard_rank: 1,
            })
        ));
    }
}

/// Valkey 8.1 (`clusterProcessPacket`, PRs #1009/#1339): a primary claiming a configEpoch ≥
/// the epoch my election asked for won it; my election is reset and the next failover step
/// schedules a new one at once, which asks for a fresh epoch — no auth timeout and retry
/// period (4 × NODE_TIMEOUT) wasted.
#[test]
fn an_election_lost_to_a_claim_is_retried_at_once_with_a_fresh_epoch() {
    let cfg = EpochConfig::default();
    let mut t = setup(50);
    let mut e = Epoch::new();
    run(&mut e, &mut t, &cfg, &synced(T0), T0);
    let at = e.election().auth_time().unwrap();
    run(&mut e, &mut t, &cfg, &synced(T0), at);
    assert_eq!(e.election().epoch(), CurrentEpoch(5));
    let x_slots = t.node(&id('x')).unwrap().slots().clone();
    let claim = |epoch: u64| PingClaims {
        sender: id('x'),
        role: ClaimedRole::Primary,
        config_epoch: ConfigEpoch(epoch),
        slots: &x_slots,
    };
    // A claim below my epoch changes nothing.
    let mut out = Vec::new();
    let prior = PriorRole::of(&t, &id('x'));
    e.handle_ping_claims(&mut t, &cfg, &claim(4), prior, &mut out);
    assert_eq!(e.election().auth_time(), Some(at));
    // x claims configEpoch 5, the epoch I asked for: lost.
    t.node_mut(&id('x')).unwrap().config_epoch = ConfigEpoch(5); // §8 step 4 adoption
    let prior = PriorRole::of(&t, &id('x'));
    let mut out = Vec::new();
    e.handle_ping_claims(&mut t, &cfg, &claim(5), prior, &mut out);
    assert!(has(
        &out,
        &EpochEffect::Event(EpochEvent::ElectionLost {
            epoch: CurrentEpoch(5),
            winner: id('x'),
            claimed: ConfigEpoch(5),
        })
    ));
    assert_eq!(e.election().auth_time(), None);
    // The next step (one cron tick later) schedules again with the usual delay …
    let now = at.saturating_add_ms(100);
    let out = run(&mut e, &mut t, &cfg, &synced(T0), now);
    assert!(out
        .iter()
        .any(|x| matches!(x, EpochEffect::Event(EpochEvent::ElectionScheduled { .. }))));
    let again = e.election().auth_time().unwrap();
    assert!(
        (500..1000).contains(&again.since(now)),
        "{}",
        again.since(now)
    );
    // … and asks for a fresh epoch.
    run(&mut e, &mut t, &cfg, &synced(T0), again);
    assert_eq!(e.election().epoch(), CurrentEpoch(6));
    assert!(e.election().sent());
}

/// [`setup`] without the sibling: myself is the only replica of the FAIL primary `p`.
fn setup_sole_replica() -> Topology {
    let mut t = topo('m', 0, &SlotSet::new());
    add_primary(&mut t, 'p', 'p', 3, &slots(0..=99));
    add_primary(&mut t, 'x', 'x', 1, &slots(100..=199));
    add_primary(&mut t, 'y', 'y', 2, &slots(200..=299));
    make_me_replica(&mut t, 'p');
    t.node_mut(&id('p')).unwrap().flags.insert(NodeFlags::FAIL);
    t.current_epoch = CurrentEpoch(4);
    t
}

#[test]
fn a_sole_replica_marks_my_primary_fail_and_elects_at_once() {
    // Valkey 9.1: the sole replica is always the best ranked one, and every replica of its
    // shard (itself) sees the primary FAIL: "Start of election delayed for 0 milliseconds".
    let mut t = setup_sole_replica();
    let mut e = Epoch::new();
    let out = run(&mut e, &mut t, &EpochConfig::default(), &synced(T0), T0);
    assert!(t.myself().flags.contains(NodeFlags::MY_PRIMARY_FAIL));
    assert!(all_replicas_see_primary_fail(&t));
    assert!(out.iter().any(
        |o| matches!(o, EpochEffect::Event(EpochEvent::ElectionScheduled { at, .. }) if *at == T0)
    ));
    // The request went out in the same step.
    assert_eq!(t.current_epoch, CurrentEpoch(5));
    // Once the primary is no longer FAIL the flag goes.
    t.node_mut(&id('p')).unwrap().flags.remove(NodeFlags::FAIL);
    run(&mut e, &mut t, &EpochConfig::default(), &synced(T0), T0);
    assert!(!t.myself().flags.contains(NodeFlags::MY_PRIMARY_FAIL));
}

#[test]
fn the_best_ranked_replica_elects_at_once_when_its_sibling_has_seen_the_failure() {
    // Sibling s has a lower offset (rank 0 for me) but has not advertised MY_PRIMARY_FAIL:
    // the regular delay. When its header says it sees the failure too, the start moves to
    // now (Valkey 9.1 "Myself become the best ranked replica, initiate the election
    // immediately").
    let mut t = setup(50);
    let mut e = Epoch::new();
    let cfg = EpochConfig::default();
    run(&mut e, &mut t, &cfg, &synced(T0), T0);
    let at = e.election().auth_time().unwrap();
    assert!(at.since(T0) >= 500, "{}", at.since(T0));
    assert_eq!(t.current_epoch, CurrentEpoch(4));
    let later = T0.saturating_add_ms(100);
    t.node_mut(&id('s'))
        .unwrap()
        .flags
        .insert(NodeFlags::MY_PRIMARY_FAIL);
    let out = run(&mut e, &mut t, &cfg, &synced(later), later);
    assert!(
        out.iter().any(|o| matches!(
            o,
            EpochEffect::Event(EpochEvent::ElectionRankChanged { at, rank: 0, shard_rank: 0 })
                if *at == later
        )),
        "{out:?}"
    );
    assert_eq!(t.current_epoch, CurrentEpoch(5), "the request went out");
    // A replica that is not the best ranked keeps its delay.
    let mut t = setup(500);
    t.node_mut(&id('s'))
        .unwrap()
        .flags
        .insert(NodeFlags::MY_PRIMARY_FAIL);
    let mut e = Epoch::new();
    run(&mut e, &mut t, &cfg, &synced(T0), T0);
    assert_eq!(e.election().rank(), 1);
    assert!(e.election().auth_time().unwrap().since(T0) >= 1500);
}

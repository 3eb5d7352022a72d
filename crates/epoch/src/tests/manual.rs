use super::util::*;
use crate::*;
use ferrocluster_slot::SlotSet;
use ferrocluster_topology::{ConfigEpoch, CurrentEpoch, LinkState, NodeFlags, Topology};
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Replica `m` of `p` (0..=99, epoch 1), voters `x`, `y`; currentEpoch 7 (as captured).
fn replica_side() -> Topology {
    let mut t = topo('m', 0, &SlotSet::new());
    add_primary(&mut t, 'p', 'p', 1, &slots(0..=99));
    add_primary(&mut t, 'x', 'x', 2, &slots(100..=199));
    add_primary(&mut t, 'y', 'y', 7, &slots(200..=299));
    make_me_replica(&mut t, 'p');
    t.current_epoch = CurrentEpoch(7);
    t
}

fn cron(
    e: &mut Epoch,
    t: &mut Topology,
    offset: u64,
    now: ferrocluster_topology::Millis,
) -> Vec<EpochEffect> {
    let mut out = Vec::new();
    let repl = ReplicationState {
        offset,
        link: ReplLink::Up {
            last_interaction: now,
        },
    };
    e.handle_cron(
        t,
        &EpochConfig::default(),
        &repl,
        true,
        now,
        &mut ChaCha8Rng::seed_from_u64(1),
        &mut out,
    );
    out
}

#[test]
fn command_errors_match_the_captures() {
    let cfg = EpochConfig::default();
    let mut t = topo('p', 1, &slots(0..=9));
    let e = Epoch::new()
        .handle_failover_command(&mut t, &cfg, FailoverMode::Default, T0, &mut Vec::new())
        .unwrap_err();
    for flavor in ["valkey-8.0", "redis-7.0"] {
        let want =
            ferrocluster_testvectors::read(format!("{flavor}/text/errors/failover-on-master.resp"));
        assert_eq!(format!("-{e}\r\n").into_bytes(), want);
        let want =
            ferrocluster_testvectors::read(format!("{flavor}/text/errors/failover-bad-arg.resp"));
        let e = FailoverMode::parse(Some(b"NOW")).unwrap_err();
        assert_eq!(format!("-{e}\r\n").into_bytes(), want);
    }
    assert_eq!(FailoverMode::parse(Some(b"fOrCe")), Ok(FailoverMode::Force));
    assert_eq!(
        FailoverMode::parse(Some(b"TAKEOVER")),
        Ok(FailoverMode::Takeover)
    );
    // Primary down or unreachable: default refused, FORCE accepted (§13.1).
    let mut t = replica_side();
    t.node_mut(&id('p')).unwrap().link = LinkState::Disconnected;
    let e = Epoch::new()
        .handle_failover_command(&mut t, &cfg, FailoverMode::Default, T0, &mut Vec::new())
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "ERR Master is down or failed, please use CLUSTER FAILOVER FORCE"
    );
    assert!(Epoch::new()
        .handle_failover_command(&mut t, &cfg, FailoverMode::Force, T0, &mut Vec::new())
        .is_ok());
    t.myself_mut().primary = None;
    let e = Epoch::new()
        .handle_failover_command(&mut t, &cfg, FailoverMode::Default, T0, &mut Vec::new())
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "ERR I'm a replica but my master is unknown to me"
    );
}

#[test]
fn default_manual_failover_end_to_end() {
    // The captured sequence (valkey-8.0 bus, phase manual-failover): MFSTART with
    // currentEpoch 7 and offset 537 → the primary PINGs with PAUSED and offset 537 → the
    // replica asks with FORCEACK at currentEpoch 8 → its PONG claims configEpoch 8.
    let cfg = EpochConfig::default();
    // Replica side.
    let mut t = replica_side();
    let mut e = Epoch::new();
    let mut out = Vec::new();
    e.handle_failover_command(&mut t, &cfg, FailoverMode::Default, T0, &mut out)
        .unwrap();
    assert!(has(
        &out,
        &EpochEffect::Send {
            to: Target::Node(id('p')),
            message: EpochMessage::MfStart,
            after_persist: false
        }
    ));
    assert_eq!(e.manual_failover().end(), Some(T0.saturating_add_ms(5000)));
    // Primary side receives MFSTART.
    let mut tp = topo('p', 1, &slots(0..=99));
    add_replica(&mut tp, 'm', 'p', 537);
    let mut ep = Epoch::new();
    let mut pout = Vec::new();
    assert!(ep.handle_mfstart(&tp, &cfg, &id('m'), T0, &mut pout));
    assert_eq!(
        pout[0],
        EpochEffect::PauseWrites {
            until: T0.saturating_add_ms(10_000)
        }
    );
    // Nothing is announced until the host confirms the pause (its offset is final then).
    assert!(!pout.iter().any(|e| matches!(e, EpochEffect::Send { .. })));
    assert!(!ep.paused_for_manual_failover(&tp));
    let mut pout = Vec::new();
    assert!(ep.handle_writes_paused(&tp, &mut pout));
    assert_eq!(
        pout,
        vec![EpochEffect::Send {
            to: Target::Node(id('m')),
            message: EpochMessage::Ping,
            after_persist: false
        }]
    );
    assert!(ep.paused_for_manual_failover(&tp));
    assert!(!ep.handle_writes_paused(&tp, &mut pout), "confirmed once");
    assert_eq!(ep.manual_failover().replica(), Some(&id('m')));
    // Not from one of my replicas: ignored.
    assert!(!Epoch::new().handle_mfstart(&tp, &cfg, &id('x'), T0, &mut Vec::new()));
    // The replica hears the PAUSED offset; a non-paused header is not recorded.
    assert!(!e.handle_primary_offset(&t, &id('p'), false, 537));
    assert!(e.handle_primary_offset(&t, &id('p'), true, 537));
    assert!(
        !e.handle_primary_offset(&t, &id('p'), true, 999),
        "only the first is kept"
    );
    // Not caught up: no election yet.
    let out = cron(&mut e, &mut t, 500, T0.saturating_add_ms(100));
    assert!(!e.manual_failover().can_start());
    assert!(!out.iter().any(|x| matches!(
        x,
        EpochEffect::Send {
            message: EpochMessage::AuthRequest { .. },
            ..
        }
    )));
    // Caught up: no delay, rank 0, FORCEACK, currentEpoch 8 (no data-age check).
    let out = cron(&mut e, &mut t, 537, T0.saturating_add_ms(200));
    assert_eq!(t.current_epoch, CurrentEpoch(8));
    assert!(has(
        &out,
        &EpochEffect::Send {
            to: Target::AllNodes,
            message: EpochMessage::AuthRequest { force_ack: true },
            after_persist: true
        }
    ));
    // Voter x grants despite p not being FAIL (FORCEACK).
    let mut tx = topo('x', 2, &slots(100..=199));
    add_primary(&mut tx, 'p', 'p', 1, &slots(0..=99));
    add_replica(&mut tx, 'm', 'p', 537);
    tx.current_epoch = CurrentEpoch(8);
    let s = slots(0..=99);
    let r = AuthRequest {
        requester: id('m'),
        current_epoch: CurrentEpoch(8),
        config_epoch: ConfigEpoch(1),
        slots: &s,
        force_ack: true,
    };
    assert_eq!(
        Epoch::new().handle_auth_request(&mut tx, &r, &mut Vec::new()),
        VoteOutcome::Granted(CurrentEpoch(8))
    );
    e.election_mut()
        .handle_auth_ack(&t, &id('x'), CurrentEpoch(8));
    e.election_mut()
        .handle_auth_ack(&t, &id('y'), CurrentEpoch(8));
    let out = cron(&mut e, &mut t, 537, T0.saturating_add_ms(300));
    assert!(has(&out, &EpochEffect::BecomePrimary));
    assert_eq!(t.myself().config_epoch, ConfigEpoch(8));
    assert_eq!(e.manual_failover().end(), None, "reset after taking over");
    // The old primary hears the new claim (epoch 8 > 1): it follows m and unpauses.
    let mut pout = Vec::new();
    add_primary(&mut tp, 'z', 'z', 0, &SlotSet::new()); // unrelated node, keeps table order honest
    tp.set_as_primary(&id('m')).unwrap();
    tp.node_mut(&id('m')).unwrap().config_epoch = ConfigEpoch(8);
    ep.apply_slot_claims(&mut tp, &cfg, &id('m'), ConfigEpoch(8), &s, &mut pout);
    assert_eq!(tp.myself().primary, Some(id('m')));
    assert!(has(&pout, &EpochEffect::UnpauseWrites));
    assert!(!ep.paused_for_manual_failover(&tp));
}

#[test]
fn manual_failover_times_out() {
    let cfg = EpochConfig {
        manual_failover_timeout_ms: 1000,
        ..EpochConfig::default()
    };
    let mut tp = topo('p', 1, &slots(0..=99));
    add_replica(&mut tp, 'm', 'p', 0);
    let mut ep = Epoch::new();
    ep.handle_mfstart(&tp, &cfg, &id('m'), T0, &mut Vec::new());
    let mut out = Vec::new();
    ep.handle_cron(
        &mut tp,
        &cfg,
        &ReplicationState::default(),
        true,
        T0.saturating_add_ms(1000),
        &mut ChaCha8Rng::seed_from_u64(1),
        &mut out,
    );
    assert!(out.is_empty(), "not yet: mf_end < now is required");
    ep.handle_cron(
        &mut tp,
        &cfg,
        &ReplicationState::default(),
        true,
        T0.saturating_add_ms(1001),
        &mut ChaCha8Rng::seed_from_u64(1),
        &mut out,
    );
    assert_eq!(
        out,
        vec![
            EpochEffect::UnpauseWrites,
            EpochEffect::Event(EpochEvent::ManualFailoverTimedOut)
        ]
    );
    assert!(!ep.paused_for_manual_failover(&tp));
}

#[test]
fn force_starts_an_election_at_once() {
    let cfg = EpochConfig::default();
    let mut t = replica_side();
    t.node_mut(&id('p')).unwrap().flags.insert(NodeFlags::FAIL);
    let mut e = Epoch::new();
    let mut out = Vec::new();
    e.handle_failover_command(&mut t, &cfg, FailoverMode::Force, T0, &mut out)
        .unwrap();
    assert!(e.manual_failover().can_start());
    let out = cron(&mut e, &mut t, 0, T0);
    assert!(has(
        &out,
        &EpochEffect::Send {
            to: Target::AllNodes,
            message: EpochMessage::AuthRequest { force_ack: true },
            after_persist: true
        }
    ));
    assert_eq!(e.election().rank(), 0);
}

#[test]
fn takeover_bumps_and_takes_over_without_votes() {
    let cfg = EpochConfig::default();
    let mut t = replica_side();
    let mut e = Epoch::new();
    let mut out = Vec::new();
    e.handle_failover_command(&mut t, &cfg, FailoverMode::Takeover, T0, &mut out)
        .unwrap();
    // §11.6: configEpoch 0 → currentEpoch + 1 = 8.
    assert_eq!(t.myself().config_epoch, ConfigEpoch(8));
    assert!(t.myself().is_primary());
    assert_eq!(t.slot_owner(slot(0)), Some(&id('m')));
    assert!(has(&out, &EpochEffect::BecomePrimary));
    assert!(!out.iter().any(|x| matches!(
        x,
        EpochEffect::Send {
            message: EpochMessage::AuthRequest { .. },
            ..
        }
    )));
}

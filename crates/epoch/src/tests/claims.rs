use super::util::*;
use crate::*;
use ferrocluster_slot::SlotSet;
use ferrocluster_topology::{ConfigEpoch, NodeFlags};

fn cfg() -> EpochConfig {
    EpochConfig::default()
}

fn claims_of(
    e: &mut Epoch,
    t: &mut ferrocluster_topology::Topology,
    from: char,
    epoch: u64,
    s: &SlotSet,
) -> Vec<EpochEffect> {
    let mut out = Vec::new();
    e.apply_slot_claims(t, &cfg(), &id(from), ConfigEpoch(epoch), s, &mut out);
    out
}

#[test]
fn rule1_an_unassigned_slot_goes_to_the_claimer() {
    let mut t = topo('a', 1, &slots(0..=99));
    add_primary(&mut t, 'b', 'b', 2, &SlotSet::new());
    let mut e = Epoch::new();
    let out = claims_of(&mut e, &mut t, 'b', 2, &slots(100..=199));
    assert_eq!(t.slot_owner(slot(150)), Some(&id('b')));
    assert_eq!(t.node(&id('b')).unwrap().slot_count(), 100);
    assert_eq!(out, vec![EpochEffect::Persist, EpochEffect::UpdateState]);
}

#[test]
fn rule2_a_higher_config_epoch_wins_and_lower_or_equal_loses() {
    let mut t = topo('a', 1, &SlotSet::new());
    add_primary(&mut t, 'b', 'b', 5, &slots(0..=9));
    add_primary(&mut t, 'c', 'c', 5, &SlotSet::new());
    let mut e = Epoch::new();
    let out = claims_of(&mut e, &mut t, 'c', 5, &slots(0..=9));
    assert!(out.is_empty(), "equal epoch: nothing moves");
    assert_eq!(t.slot_owner(slot(0)), Some(&id('b')));
    claims_of(&mut e, &mut t, 'c', 4, &slots(0..=9));
    assert_eq!(t.slot_owner(slot(0)), Some(&id('b')));
    claims_of(&mut e, &mut t, 'c', 6, &slots(0..=4));
    assert_eq!(t.slot_owner(slot(4)), Some(&id('c')));
    assert_eq!(t.slot_owner(slot(5)), Some(&id('b')));
}

#[test]
fn owner_not_claiming_keeps_the_binding_but_counts_as_unclaimed() {
    // §11.4: b stops claiming slot 9: it stays bound to b, but a lower-epoch claim may take it
    // and UPDATE messages about b leave it out.
    let mut t = topo('a', 1, &SlotSet::new());
    add_primary(&mut t, 'b', 'b', 5, &slots(0..=9));
    add_primary(&mut t, 'c', 'c', 2, &SlotSet::new());
    let mut e = Epoch::new();
    claims_of(&mut e, &mut t, 'b', 5, &slots(0..=8));
    assert_eq!(t.slot_owner(slot(9)), Some(&id('b')));
    assert!(e.is_slot_unclaimed(&t, slot(9)));
    assert!(!e.is_slot_unclaimed(&t, slot(8)));
    match e.update_message(&t, &id('b')).unwrap() {
        EpochMessage::Update {
            slots: s,
            config_epoch,
            ..
        } => {
            assert_eq!(*s, slots(0..=8));
            assert_eq!(config_epoch, ConfigEpoch(5));
        }
        m => panic!("{m:?}"),
    }
    claims_of(&mut e, &mut t, 'c', 2, &slots(9..=9));
    assert_eq!(t.slot_owner(slot(9)), Some(&id('c')));
    // b claiming it again clears the mark.
    claims_of(&mut e, &mut t, 'b', 5, &slots(0..=8));
    let mut t2 = t.clone();
    claims_of(&mut e, &mut t2, 'b', 5, &slots(0..=9));
    assert_eq!(t2.slot_owner(slot(9)), Some(&id('b')));
}

#[test]
fn lost_slots_with_some_left_are_dirty_and_deleted() {
    // §11.2: myself keeps some slots; the lost ones are deleted (dirty slots).
    let mut t = topo('a', 1, &slots(0..=99));
    add_primary(&mut t, 'b', 'b', 3, &SlotSet::new());
    let mut e = Epoch::new();
    let out = claims_of(&mut e, &mut t, 'b', 3, &slots(0..=9));
    assert!(has(
        &out,
        &EpochEffect::DeleteSlotKeys(Box::new(slots(0..=9)))
    ));
    assert!(!out
        .iter()
        .any(|x| matches!(x, EpochEffect::BecomeReplica { .. })));
    assert!(t.myself().is_primary());
}

#[test]
fn primary_losing_its_last_slot_in_its_shard_follows_the_new_owner() {
    // §11.2 after the loop: my shard lost everything to b (same shard: a failover) → replica
    // of b, marks kept, partial sync, PONG to all after the persist.
    let mut t = topo('a', 1, &slots(0..=9));
    add_primary(&mut t, 'b', 'a', 4, &SlotSet::new());
    add_primary(&mut t, 'c', 'c', 2, &slots(10..=19));
    t.set_migrating(slot(5), Some(id('c'))).unwrap();
    let mut e = Epoch::new();
    let out = claims_of(&mut e, &mut t, 'b', 4, &slots(0..=9));
    assert_eq!(t.myself().primary, Some(id('b')));
    assert!(t.myself().is_replica() && !t.myself().is_primary());
    assert_eq!(
        t.migrating_to(slot(5)),
        Some(&id('c')),
        "same shard: mark kept"
    );
    let became = position(&out, |x| matches!(x, EpochEffect::BecomeReplica { primary, full_sync: false, .. } if *primary == id('b'))).unwrap();
    let persist = position(&out[became..], |x| *x == EpochEffect::Persist).unwrap() + became;
    assert_eq!(
        out[persist + 2],
        EpochEffect::Send {
            to: Target::AllNodes,
            message: EpochMessage::Pong,
            after_persist: true
        }
    );
    assert!(
        !out.iter()
            .any(|x| matches!(x, EpochEffect::DeleteSlotKeys(_))),
        "a replica resyncs instead"
    );
}

#[test]
fn primary_losing_everything_to_another_shard() {
    // allow-replica-migration yes → follows with a full sync, marks cleared.
    let mut t = topo('a', 1, &slots(0..=9));
    add_primary(&mut t, 'b', 'b', 4, &SlotSet::new());
    add_primary(&mut t, 'c', 'c', 2, &slots(20..=29));
    t.set_importing(slot(20), Some(id('c'))).unwrap();
    let mut e = Epoch::new();
    let out = claims_of(&mut e, &mut t, 'b', 4, &slots(0..=9));
    assert!(out.iter().any(|x| matches!(
        x,
        EpochEffect::BecomeReplica {
            full_sync: true,
            ..
        }
    )));
    assert_eq!(t.importing().count(), 0);
    assert_eq!(t.myself().shard_id, shard('b'));
    // allow-replica-migration no → stays an empty primary and deletes the lost keys.
    let mut t = topo('a', 1, &slots(0..=9));
    add_primary(&mut t, 'b', 'b', 4, &SlotSet::new());
    let mut out = Vec::new();
    let c = EpochConfig {
        allow_replica_migration: false,
        ..cfg()
    };
    Epoch::new().apply_slot_claims(
        &mut t,
        &c,
        &id('b'),
        ConfigEpoch(4),
        &slots(0..=9),
        &mut out,
    );
    assert!(t.myself().is_primary());
    assert!(has(
        &out,
        &EpochEffect::Event(EpochEvent::EmptyPrimary { lost_to: id('b') })
    ));
    assert!(has(
        &out,
        &EpochEffect::DeleteSlotKeys(Box::new(slots(0..=9)))
    ));
}

#[test]
fn replica_follows_the_sibling_that_took_its_primarys_slots() {
    let mut t = topo('r', 0, &SlotSet::new());
    add_primary(&mut t, 'p', 'p', 3, &slots(0..=9));
    make_me_replica(&mut t, 'p');
    add_replica(&mut t, 's', 'p', 0);
    // s won the election: it claims as a primary with epoch 7 (role switch done first).
    let mut e = Epoch::new();
    let mut out = Vec::new();
    let claim = PingClaims {
        sender: id('s'),
        role: ClaimedRole::Primary,
        config_epoch: ConfigEpoch(7),
        slots: &slots(0..=9),
    };
    let prior = PriorRole::of(&t, &id('s'));
    t.node_mut(&id('s')).unwrap().config_epoch = ConfigEpoch(7); // §8 step 4 adoption
    e.handle_ping_claims(&mut t, &cfg(), &claim, prior, &mut out);
    assert_eq!(t.slot_owner(slot(0)), Some(&id('s')));
    assert_eq!(t.myself().primary, Some(id('s')));
    assert!(out.iter().any(|x| matches!(
        x,
        EpochEffect::BecomeReplica {
            full_sync: false,
            ..
        }
    )));
    // s was promoted: MIGRATE_TO set on it (§14 maintenance).
    assert!(t
        .node(&id('s'))
        .unwrap()
        .flags
        .contains(NodeFlags::MIGRATE_TO));
}

#[test]
fn importing_and_migrating_marks_follow_failovers() {
    // Importing slot 5 from x; y (in x's shard) takes it → re-pointed to y; z (other shard)
    // takes slot 6 → importing mark cleared.
    let mut t = topo('a', 1, &slots(100..=110));
    add_primary(&mut t, 'x', 'x', 2, &slots(0..=9));
    add_primary(&mut t, 'y', 'x', 5, &SlotSet::new());
    add_primary(&mut t, 'z', 'z', 5, &SlotSet::new());
    t.set_importing(slot(5), Some(id('x'))).unwrap();
    t.set_importing(slot(6), Some(id('x'))).unwrap();
    let mut e = Epoch::new();
    claims_of(&mut e, &mut t, 'y', 5, &slots(5..=5));
    claims_of(&mut e, &mut t, 'z', 5, &slots(6..=6));
    assert_eq!(t.importing_from(slot(5)), Some(&id('y')));
    assert_eq!(t.importing_from(slot(6)), None);
    // Migrating slot 100 to m; m's shard fails over to n (claim without slot 100, higher
    // epoch) → the migrating mark moves to n.
    add_primary(&mut t, 'm', 'm', 2, &SlotSet::new());
    add_primary(&mut t, 'n', 'm', 6, &SlotSet::new());
    t.set_migrating(slot(100), Some(id('m'))).unwrap();
    claims_of(&mut e, &mut t, 'n', 6, &SlotSet::new());
    assert_eq!(t.migrating_to(slot(100)), Some(&id('n')));
    // Another shard takes slot 101 while it migrates → mark cleared.
    t.set_migrating(slot(101), Some(id('m'))).unwrap();
    claims_of(&mut e, &mut t, 'z', 9, &slots(101..=101));
    assert_eq!(t.migrating_to(slot(101)), None);
}

#[test]
fn import_finished_by_a_claim_takes_the_slot_and_bumps() {
    // §11.2: myself (primary) imports slot 7 from b; b's claim no longer has it → importing
    // cleared, myself owns it, configEpoch bumped without consensus (§11.6).
    let mut t = topo('a', 1, &slots(100..=110));
    add_primary(&mut t, 'b', 'b', 3, &slots(0..=9));
    t.set_importing(slot(7), Some(id('b'))).unwrap();
    let mut e = Epoch::new();
    let out = claims_of(&mut e, &mut t, 'b', 3, &slots(0..=6));
    assert_eq!(t.importing_from(slot(7)), None);
    assert_eq!(t.slot_owner(slot(7)), Some(&id('a')));
    assert_eq!(t.myself().config_epoch, ConfigEpoch(4));
    assert!(has(
        &out,
        &EpochEffect::Event(EpochEvent::ConfigEpochBumped(ConfigEpoch(4)))
    ));
}

#[test]
fn stale_claim_triggers_exactly_one_update() {
    // §11.3: b claims slots 0..=19 with epoch 2, but our table gives 0..=9 to c (epoch 5)
    // and 10..=19 to d (epoch 6): one UPDATE, about the first such owner (c).
    let mut t = topo('a', 1, &slots(100..=110));
    add_primary(&mut t, 'b', 'b', 2, &slots(0..=19));
    add_primary(&mut t, 'c', 'c', 5, &SlotSet::new());
    add_primary(&mut t, 'd', 'd', 6, &SlotSet::new());
    for s in 0..=9 {
        t.set_slot_owner(slot(s), Some(id('c'))).unwrap();
    }
    for s in 10..=19 {
        t.set_slot_owner(slot(s), Some(id('d'))).unwrap();
    }
    let mut e = Epoch::new();
    let mut out = Vec::new();
    let claim = PingClaims {
        sender: id('b'),
        role: ClaimedRole::Primary,
        config_epoch: ConfigEpoch(2),
        slots: &slots(0..=19),
    };
    let prior = PriorRole::of(&t, &id('b'));
    e.handle_ping_claims(&mut t, &cfg(), &claim, prior, &mut out);
    let updates: Vec<_> = out
        .iter()
        .filter(|x| {
            matches!(
                x,
                EpochEffect::Send {
                    message: EpochMessage::Update { .. },
                    ..
                }
            )
        })
        .collect();
    assert_eq!(updates.len(), 1);
    assert_eq!(
        *updates[0],
        EpochEffect::Send {
            to: Target::Node(id('b')),
            message: EpochMessage::Update {
                node: id('c'),
                config_epoch: ConfigEpoch(5),
                slots: Box::new(slots(0..=9))
            },
            after_persist: false,
        }
    );
}

#[test]
fn received_update_applies_only_a_newer_epoch() {
    let mut t = topo('a', 1, &slots(100..=110));
    add_primary(&mut t, 'b', 'b', 3, &slots(0..=9));
    add_replica(&mut t, 'c', 'b', 0);
    let mut e = Epoch::new();
    let mut out = Vec::new();
    assert!(!e.handle_update(
        &mut t,
        &cfg(),
        &id('c'),
        ConfigEpoch(0),
        &slots(0..=9),
        &mut out
    ));
    // c (a replica in our view) reported with epoch 4 owning 0..=9 → primary, epoch stored.
    assert!(e.handle_update(
        &mut t,
        &cfg(),
        &id('c'),
        ConfigEpoch(4),
        &slots(0..=9),
        &mut out
    ));
    assert!(t.node(&id('c')).unwrap().is_primary());
    assert_eq!(t.node(&id('c')).unwrap().config_epoch, ConfigEpoch(4));
    assert_eq!(t.slot_owner(slot(3)), Some(&id('c')));
    assert_eq!(out[0], EpochEffect::Persist);
    // Same epoch again: nothing new.
    assert!(!e.handle_update(
        &mut t,
        &cfg(),
        &id('c'),
        ConfigEpoch(4),
        &slots(0..=9),
        &mut Vec::new()
    ));
    // About myself: ignored.
    assert!(!e.handle_update(
        &mut t,
        &cfg(),
        &id('a'),
        ConfigEpoch(99),
        &SlotSet::new(),
        &mut Vec::new()
    ));
}

#[test]
fn role_switch_replica_claiming_primary() {
    // §11.1: a node we saw as replica of b now claims primary → PRIMARY, MIGRATE_TO (it was a
    // replica), b loses MIGRATE_TO (no replica left).
    let mut t = topo('a', 1, &slots(100..=110));
    add_primary(&mut t, 'b', 'b', 3, &slots(0..=9));
    add_replica(&mut t, 'c', 'b', 0);
    let mut out = Vec::new();
    let prior = PriorRole::of(&t, &id('c'));
    Epoch::new().handle_role(
        &mut t,
        &id('c'),
        ClaimedRole::Primary,
        ConfigEpoch(3),
        prior,
        &mut out,
    );
    let c = t.node(&id('c')).unwrap();
    assert!(c.is_primary() && !c.is_replica() && c.primary.is_none());
    assert!(c.flags.contains(NodeFlags::MIGRATE_TO));
    assert!(!t
        .node(&id('b'))
        .unwrap()
        .flags
        .contains(NodeFlags::MIGRATE_TO));
    assert_eq!(out, vec![EpochEffect::Save, EpochEffect::UpdateState]);
}

#[test]
fn role_switch_failover_in_the_senders_shard() {
    // §11.1: b (primary, epoch 3) now says it replicates c (same shard) with header epoch 7 →
    // c becomes primary with configEpoch 7; b becomes its replica and keeps its slots bound
    // until c's claims arrive.
    let mut t = topo('a', 1, &slots(100..=110));
    add_primary(&mut t, 'b', 'b', 3, &slots(0..=9));
    add_replica(&mut t, 'c', 'b', 0);
    let prior = PriorRole::of(&t, &id('b'));
    let mut out = Vec::new();
    Epoch::new().handle_role(
        &mut t,
        &id('b'),
        ClaimedRole::ReplicaOf(Some(id('c'))),
        ConfigEpoch(7),
        prior,
        &mut out,
    );
    let c = t.node(&id('c')).unwrap();
    assert!(c.is_primary());
    assert_eq!(c.config_epoch, ConfigEpoch(7));
    let b = t.node(&id('b')).unwrap();
    assert!(b.is_replica() && !b.is_primary());
    assert_eq!(b.primary, Some(id('c')));
    assert_eq!(b.slot_count(), 10);
}

/// Issue 16 (seed 5225 of the 12-host random failover run): the demoted old primary b says it
/// replicates c with c's configEpoch and slots; c died right after its promotion, so c's own
/// claim never comes. The header's slots are applied as c's claim: c owns them, b none, and
/// myself — a replica of b — follows c, so an election it wins takes the slots.
#[test]
fn a_demoted_primarys_header_gives_its_slots_to_the_new_primary() {
    let mut t = topo('a', 1, &slots(100..=110));
    add_primary(&mut t, 'b', 'b', 3, &slots(0..=9));
    add_replica(&mut t, 'c', 'b', 0);
    make_me_replica_of_b(&mut t);
    let mut e = Epoch::new();
    let mut out = Vec::new();
    let claim = PingClaims {
        sender: id('b'),
        role: ClaimedRole::ReplicaOf(Some(id('c'))),
        config_epoch: ConfigEpoch(7),
        slots: &slots(0..=9),
    };
    let prior = PriorRole::of(&t, &id('b'));
    e.handle_ping_claims(&mut t, &cfg(), &claim, prior, &mut out);
    let c = t.node(&id('c')).unwrap();
    assert!(c.is_primary());
    assert_eq!(c.config_epoch, ConfigEpoch(7));
    assert_eq!(c.slot_count(), 10);
    let b = t.node(&id('b')).unwrap();
    assert!(b.is_replica() && b.slot_count() == 0);
    assert_eq!(t.myself().primary, Some(id('c')));
    assert!(out.contains(&EpochEffect::Persist));
}

/// The model of [`a_demoted_primarys_header_gives_its_slots_to_the_new_primary`]: myself (a
/// primary 'a' owning 100..=110 so far) becomes a slotless replica of b.
fn make_me_replica_of_b(t: &mut Topology) {
    for s in 100..=110 {
        t.set_slot_owner(slot(s), None).unwrap();
    }
    make_me_replica(t, 'b');
}

#[test]
fn role_switch_stale_message_does_not_promote() {
    let mut t = topo('a', 1, &slots(100..=110));
    add_primary(&mut t, 'b', 'b', 9, &slots(0..=9));
    add_replica(&mut t, 'c', 'b', 0);
    let prior = PriorRole::of(&t, &id('b'));
    let mut out = Vec::new();
    Epoch::new().handle_role(
        &mut t,
        &id('b'),
        ClaimedRole::ReplicaOf(Some(id('c'))),
        ConfigEpoch(7),
        prior,
        &mut out,
    );
    assert!(has(
        &out,
        &EpochEffect::Event(EpochEvent::StaleRoleMessage(id('b')))
    ));
    assert!(t.node(&id('c')).unwrap().is_replica());
}

#[test]
fn role_switch_to_another_shard_drops_the_slots() {
    let mut t = topo('a', 1, &slots(100..=110));
    add_primary(&mut t, 'b', 'b', 3, &slots(0..=9));
    add_primary(&mut t, 'x', 'x', 2, &slots(20..=29));
    let prior = PriorRole::of(&t, &id('b'));
    let mut out = Vec::new();
    Epoch::new().handle_role(
        &mut t,
        &id('b'),
        ClaimedRole::ReplicaOf(Some(id('x'))),
        ConfigEpoch(2),
        prior,
        &mut out,
    );
    assert_eq!(t.slot_owner(slot(0)), None);
    let b = t.node(&id('b')).unwrap();
    assert_eq!(b.primary, Some(id('x')));
    assert_eq!(b.shard_id, shard('x'));
    assert!(t
        .node(&id('x'))
        .unwrap()
        .flags
        .contains(NodeFlags::MIGRATE_TO));
}

#[test]
fn sub_replica_follows_its_grand_primary() {
    // Myself replicates b; b now says it replicates c (same shard) → myself follows c with a
    // partial sync (same shard).
    let mut t = topo('r', 0, &SlotSet::new());
    add_primary(&mut t, 'b', 'b', 3, &slots(0..=9));
    make_me_replica(&mut t, 'b');
    add_replica(&mut t, 'c', 'b', 0);
    let prior = PriorRole::of(&t, &id('b'));
    let mut out = Vec::new();
    Epoch::new().handle_role(
        &mut t,
        &id('b'),
        ClaimedRole::ReplicaOf(Some(id('c'))),
        ConfigEpoch(5),
        prior,
        &mut out,
    );
    assert_eq!(t.myself().primary, Some(id('c')));
    assert!(out.iter().any(|x| matches!(x, EpochEffect::BecomeReplica { primary, full_sync: false, .. } if *primary == id('c'))));
}

//! SETSLOT effects (sheet C.2).
mod common;

use common::*;
use ferrocluster_migration::legacy::{apply_setslot, LegacyAction, SetSlotEffect};

#[test]
fn marks_and_stable() {
    let mut topo = cluster('s');
    apply_setslot(
        &mut topo,
        slot(5),
        LegacyAction::Migrating(id('t')),
        3,
        true,
    )
    .unwrap();
    assert_eq!(topo.migrating_to(slot(5)), Some(&id('t')));
    apply_setslot(
        &mut topo,
        slot(150),
        LegacyAction::Importing(id('t')),
        0,
        true,
    )
    .unwrap();
    assert_eq!(topo.importing_from(slot(150)), Some(&id('t')));
    apply_setslot(&mut topo, slot(5), LegacyAction::Stable, 0, true).unwrap();
    apply_setslot(&mut topo, slot(150), LegacyAction::Stable, 0, true).unwrap();
    assert_eq!(topo.migrating().count() + topo.importing().count(), 0);
    assert!(apply_setslot(&mut topo, slot(5), LegacyAction::Node(id('z')), 0, true).is_err());
}

#[test]
fn node_clears_migrating_only_when_empty() {
    let mut topo = cluster('s');
    topo.set_migrating(slot(5), Some(id('t'))).unwrap();
    apply_setslot(&mut topo, slot(5), LegacyAction::Node(id('t')), 2, true).unwrap();
    assert_eq!(topo.migrating_to(slot(5)), Some(&id('t')));
    assert_eq!(topo.slot_owner(slot(5)), Some(&id('t')));
    topo.set_migrating(slot(6), Some(id('t'))).unwrap();
    apply_setslot(&mut topo, slot(6), LegacyAction::Node(id('t')), 0, true).unwrap();
    assert_eq!(topo.migrating_to(slot(6)), None);
}

#[test]
fn node_to_myself_finishes_an_import_with_an_epoch_bump() {
    let mut topo = cluster('t');
    topo.set_importing(slot(5), Some(id('s'))).unwrap();
    let e = apply_setslot(&mut topo, slot(5), LegacyAction::Node(id('t')), 1, true).unwrap();
    assert_eq!(
        e,
        SetSlotEffect {
            bump_epoch_and_broadcast: true,
            ..Default::default()
        }
    );
    assert_eq!(topo.importing_from(slot(5)), None);
    // On the replica (replicated SETSLOT naming its primary): cleared, no bump.
    let mut r = cluster('r');
    r.set_importing(slot(5), Some(id('s'))).unwrap();
    let e = apply_setslot(&mut r, slot(5), LegacyAction::Node(id('t')), 1, true).unwrap();
    assert_eq!(e, SetSlotEffect::default());
    assert_eq!(r.importing_from(slot(5)), None);
}

#[test]
fn losing_the_last_slot() {
    let mut topo = cluster('s');
    for s in 1..100 {
        topo.set_slot_owner(slot(s), Some(id('t'))).unwrap();
    }
    let mut t2 = topo.clone();
    let e = apply_setslot(&mut topo, slot(0), LegacyAction::Node(id('t')), 0, true).unwrap();
    assert_eq!(e.become_replica_of, Some(id('t')));
    let e = apply_setslot(&mut t2, slot(0), LegacyAction::Node(id('t')), 0, false).unwrap();
    assert!(e.now_empty_primary && e.become_replica_of.is_none());
}

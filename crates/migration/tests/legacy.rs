//! SETSLOT effects (sheet C.2) and the DUMP codec.
mod common;

use common::*;
use ferrocluster_migration::dump::{decode, encode, DumpError, Dumped};
use ferrocluster_migration::legacy::{apply_setslot, LegacyAction, SetSlotEffect};
use proptest::prelude::*;

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

#[test]
fn dump_layout_and_errors() {
    let p = encode(b"v", Some(5));
    assert_eq!(p[0], 0xFC);
    assert_eq!(p[1], 1);
    assert_eq!(&p[2..10], &5u64.to_le_bytes());
    assert_eq!(p[10], b'v');
    assert_eq!(&p[11..13], &1u16.to_le_bytes());
    assert_eq!(
        decode(&p),
        Ok(Dumped {
            value: b"v".to_vec(),
            ttl_ms: Some(5)
        })
    );
    assert_eq!(decode(&p[..5]), Err(DumpError::TooShort(5)));
    let mut bad = p.clone();
    bad[10] ^= 1;
    assert_eq!(decode(&bad), Err(DumpError::Checksum));
    assert_eq!(
        decode(&encode(b"", None)),
        Ok(Dumped {
            value: vec![],
            ttl_ms: None
        })
    );
}

proptest! {
    #[test]
    fn dump_round_trip(value in proptest::collection::vec(any::<u8>(), 0..300), ttl in proptest::option::of(any::<u64>())) {
        prop_assert_eq!(decode(&encode(&value, ttl)), Ok(Dumped { value, ttl_ms: ttl }));
    }

    #[test]
    fn dump_decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = decode(&bytes);
    }

    #[test]
    fn dump_single_bit_flips_are_detected(value in proptest::collection::vec(any::<u8>(), 0..64), bit in 0usize..1000) {
        let mut p = encode(&value, Some(9));
        let i = bit % (p.len() * 8);
        p[i / 8] ^= 1 << (i % 8);
        prop_assert!(decode(&p).is_err());
    }
}

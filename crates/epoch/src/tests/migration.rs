use super::util::*;
use crate::*;
use ferrocluster_topology::{Millis, NodeFlags, Topology};

/// Primary `p` with replicas `b` (myself) and `c`; primary `q` orphaned (MIGRATE_TO, slots, its
/// only replica `f` FAIL).
fn setup() -> Topology {
    let mut t = topo('b', 0, &slots(0..=0));
    t.set_slot_owner(slot(0), None).unwrap();
    add_primary(&mut t, 'p', 'p', 1, &slots(0..=99));
    add_primary(&mut t, 'q', 'q', 2, &slots(100..=199));
    make_me_replica(&mut t, 'p');
    add_replica(&mut t, 'c', 'p', 0);
    add_replica(&mut t, 'f', 'q', 0);
    t.node_mut(&id('f')).unwrap().flags.insert(NodeFlags::FAIL);
    t
}

fn step(
    t: &mut Topology,
    cfg: &EpochConfig,
    now: Millis,
) -> (Option<ferrocluster_topology::NodeId>, Vec<EpochEffect>) {
    let mut out = Vec::new();
    let r = Epoch::new().handle_replica_migration(t, cfg, true, now, &mut out);
    (r, out)
}

#[test]
fn smallest_id_of_the_richest_shard_migrates_after_the_delay() {
    let cfg = EpochConfig::default();
    let mut t = setup();
    assert_eq!(step(&mut t, &cfg, T0).0, None);
    assert_eq!(t.node(&id('q')).unwrap().orphaned_time, Some(T0));
    assert_eq!(
        step(&mut t, &cfg, T0.saturating_add_ms(5000)).0,
        None,
        "needs more than 5000 ms"
    );
    let (r, out) = step(&mut t, &cfg, T0.saturating_add_ms(5001));
    assert_eq!(r, Some(id('q')));
    assert_eq!(t.myself().primary, Some(id('q')));
    assert!(out.iter().any(|x| matches!(
        x,
        EpochEffect::BecomeReplica {
            full_sync: true,
            ..
        }
    )));
    assert!(
        !t.node(&id('p'))
            .unwrap()
            .flags
            .contains(NodeFlags::MIGRATE_TO)
            || t.replicas_of(&id('p')).count() > 0
    );
}

#[test]
fn no_migration_when_not_candidate_or_barrier_or_disabled() {
    let cfg = EpochConfig::default();
    // A sibling with a smaller ID is the candidate.
    let mut t = setup();
    add_replica(&mut t, 'a', 'p', 0);
    step(&mut t, &cfg, T0);
    assert_eq!(step(&mut t, &cfg, T0.saturating_add_ms(6000)).0, None);
    // Barrier 2: p must keep more than 2 healthy replicas.
    let mut t = setup();
    let c2 = EpochConfig {
        migration_barrier: 2,
        ..cfg
    };
    step(&mut t, &c2, T0);
    assert_eq!(step(&mut t, &c2, T0.saturating_add_ms(6000)).0, None);
    // A PFAIL sibling does not count toward the barrier.
    let mut t = setup();
    t.node_mut(&id('c')).unwrap().flags.insert(NodeFlags::PFAIL);
    step(&mut t, &cfg, T0);
    assert_eq!(step(&mut t, &cfg, T0.saturating_add_ms(6000)).0, None);
    // cluster-allow-replica-migration no.
    let mut t = setup();
    let off = EpochConfig {
        allow_replica_migration: false,
        ..cfg
    };
    step(&mut t, &off, T0);
    assert_eq!(step(&mut t, &off, T0.saturating_add_ms(6000)).0, None);
    // Cluster state not ok.
    let mut t = setup();
    let mut out = Vec::new();
    Epoch::new().handle_replica_migration(&mut t, &cfg, false, T0, &mut out);
    assert_eq!(
        Epoch::new().handle_replica_migration(
            &mut t,
            &cfg,
            false,
            T0.saturating_add_ms(6000),
            &mut out
        ),
        None
    );
    // Orphan without MIGRATE_TO (never had replicas) is no target.
    let mut t = setup();
    t.node_mut(&id('q'))
        .unwrap()
        .flags
        .remove(NodeFlags::MIGRATE_TO);
    step(&mut t, &cfg, T0);
    assert_eq!(step(&mut t, &cfg, T0.saturating_add_ms(6000)).0, None);
}

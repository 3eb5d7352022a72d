//! The model's operations: node table changes, slot ownership, roles, marks, failure reports.

use ferrocluster_slot::Slot;
use ferrocluster_topology::{
    ConfigEpoch, LinkState, Millis, Node, NodeFlags, NodeId, ShardId, Topology, TopologyError,
};
use rand_chacha::rand_core::SeedableRng;

fn rng() -> rand_chacha::ChaCha8Rng {
    rand_chacha::ChaCha8Rng::seed_from_u64(1)
}

/// An ID no test model contains (all-'z' is never drawn from the seeded hex generator here).
fn stranger() -> NodeId {
    NodeId::parse(&"z".repeat(40)).unwrap()
}

fn slot(n: u16) -> Slot {
    Slot::new(n).unwrap()
}

fn with_nodes(k: usize) -> (Topology, Vec<NodeId>) {
    let mut r = rng();
    let mut t = Topology::fresh(&mut r, Millis(1000));
    let mut ids = vec![*t.myself_id()];
    for _ in 0..k {
        let mut n = Node::new(
            NodeId::random(&mut r),
            ShardId::random(&mut r),
            Millis(1000),
        );
        n.flags = NodeFlags::PRIMARY;
        ids.push(*n.id());
        t.add_node(n).unwrap();
    }
    (t, ids)
}

#[test]
fn fresh_identity_is_myself_primary() {
    let t = Topology::fresh(&mut rng(), Millis(5));
    let me = t.myself();
    assert!(me.is_myself() && me.is_primary());
    assert_eq!(me.link, LinkState::Connected);
    assert_eq!(t.len(), 1);
    assert_eq!(t.current_epoch.get(), 0);
    // Same seed, same identity (deterministic).
    assert_eq!(
        Topology::fresh(&mut rng(), Millis(5)).myself_id(),
        t.myself_id()
    );
    t.check_invariants().unwrap();
}

#[test]
fn slot_owner_table_and_slot_sets_stay_consistent() {
    let (mut t, ids) = with_nodes(2);
    assert_eq!(t.set_slot_owner(slot(7), Some(ids[1])).unwrap(), None);
    assert_eq!(
        t.set_slot_owner(slot(7), Some(ids[2])).unwrap(),
        Some(ids[1])
    );
    assert!(!t.node(&ids[1]).unwrap().slots().contains(slot(7)));
    assert!(t.node(&ids[2]).unwrap().slots().contains(slot(7)));
    assert_eq!(t.slot_owner(slot(7)), Some(&ids[2]));
    assert_eq!(t.assigned_slot_count(), 1);
    assert_eq!(t.cluster_size(), 1);
    let stranger = stranger();
    assert_eq!(
        t.set_slot_owner(slot(8), Some(stranger)),
        Err(TopologyError::UnknownNode(stranger))
    );
    assert_eq!(t.set_slot_owner(slot(7), None).unwrap(), Some(ids[2]));
    assert_eq!(t.assigned_slot_count(), 0);
    t.check_invariants().unwrap();
}

#[test]
fn remove_node_clears_everything_that_names_it() {
    let (mut t, ids) = with_nodes(3);
    let (a, b, c) = (ids[1], ids[2], ids[3]);
    t.set_slot_owner(slot(1), Some(a)).unwrap();
    t.set_migrating(slot(2), Some(a)).unwrap();
    t.set_importing(slot(3), Some(a)).unwrap();
    t.set_primary(&b, a).unwrap();
    t.add_failure_report(&c, &a, Millis(10)).unwrap();
    let removed = t.remove_node(&a).unwrap();
    assert_eq!(removed.id(), &a);
    assert_eq!(t.slot_owner(slot(1)), None);
    assert_eq!(t.migrating_to(slot(2)), None);
    assert_eq!(t.importing_from(slot(3)), None);
    assert_eq!(t.node(&b).unwrap().primary, None);
    // §9.2: reports authored by a deleted node are removed.
    assert!(t.node(&c).unwrap().failure_reports.is_empty());
    assert_eq!(t.remove_node(&ids[0]), Err(TopologyError::RemoveMyself));
    assert_eq!(t.remove_node(&a), Err(TopologyError::UnknownNode(a)));
    t.check_invariants().unwrap();
}

#[test]
fn rename_moves_every_reference() {
    let (mut t, ids) = with_nodes(3);
    let (a, b, c) = (ids[1], ids[2], ids[3]);
    t.set_slot_owner(slot(100), Some(a)).unwrap();
    t.set_importing(slot(5), Some(a)).unwrap();
    t.set_primary(&b, a).unwrap();
    t.add_failure_report(&c, &a, Millis(10)).unwrap();
    let real = NodeId::parse("0123456789abcdef0123456789abcdef01234567").unwrap();
    t.rename_node(&a, real).unwrap();
    assert!(t.node(&a).is_none());
    assert_eq!(t.slot_owner(slot(100)), Some(&real));
    assert_eq!(t.importing_from(slot(5)), Some(&real));
    assert_eq!(t.node(&b).unwrap().primary, Some(real));
    assert!(t.node(&c).unwrap().failure_reports.contains_key(&real));
    assert_eq!(t.rename_node(&b, c), Err(TopologyError::DuplicateNode(c)));
    // Renaming myself (CLUSTER RESET HARD) follows too.
    let me2 = NodeId::parse("fedcba9876543210fedcba9876543210fedcba98").unwrap();
    t.rename_node(&ids[0], me2).unwrap();
    assert_eq!(t.myself_id(), &me2);
    t.check_invariants().unwrap();
}

#[test]
fn roles_and_derived_replica_lists() {
    let (mut t, ids) = with_nodes(3);
    t.set_primary(&ids[2], ids[1]).unwrap();
    t.set_primary(&ids[3], ids[1]).unwrap();
    let reps: Vec<_> = t.replicas_of(&ids[1]).map(|n| *n.id()).collect();
    assert_eq!(reps, vec![ids[2], ids[3]]);
    let r = t.node(&ids[2]).unwrap();
    assert!(r.is_replica() && !r.is_primary());
    assert_eq!(
        t.set_primary(&ids[1], ids[1]),
        Err(TopologyError::SelfReplication(ids[1]))
    );
    // A node with a primary reports the primary's configEpoch (§18.1 field 7).
    t.node_mut(&ids[1]).unwrap().config_epoch = ConfigEpoch(9);
    assert_eq!(
        t.reported_config_epoch(t.node(&ids[2]).unwrap()),
        ConfigEpoch(9)
    );
    t.set_as_primary(&ids[2]).unwrap();
    assert_eq!(t.replicas_of(&ids[1]).count(), 1);
    assert!(t.node(&ids[2]).unwrap().is_primary());
}

#[test]
fn failure_reports_expire_after_validity() {
    let (mut t, ids) = with_nodes(3);
    let target = ids[1];
    assert!(t
        .add_failure_report(&target, &ids[2], Millis(1_000))
        .unwrap());
    assert!(!t
        .add_failure_report(&target, &ids[2], Millis(2_000))
        .unwrap()); // refresh
    assert!(t
        .add_failure_report(&target, &ids[3], Millis(3_000))
        .unwrap());
    // validity 2 x NODE_TIMEOUT (§9.2); node timeout 1000 -> 2000 ms.
    assert_eq!(
        t.count_valid_failure_reports(&target, Millis(4_000), 2_000)
            .unwrap(),
        2
    );
    assert_eq!(
        t.count_valid_failure_reports(&target, Millis(4_001), 2_000)
            .unwrap(),
        1
    );
    assert!(t.remove_failure_report(&target, &ids[3]).unwrap());
    assert_eq!(
        t.count_valid_failure_reports(&target, Millis(4_001), 2_000)
            .unwrap(),
        0
    );
    let stranger = stranger();
    assert!(t.add_failure_report(&target, &stranger, Millis(1)).is_err());
}

#[test]
fn add_node_refuses_duplicates_and_second_myself() {
    let (mut t, ids) = with_nodes(1);
    let dup = Node::new(ids[1], ShardId::random(&mut rng()), Millis(0));
    assert_eq!(t.add_node(dup), Err(TopologyError::DuplicateNode(ids[1])));
    let mut me2 = Node::new(stranger(), ShardId::random(&mut rng()), Millis(0));
    me2.flags = NodeFlags::MYSELF;
    assert!(matches!(
        t.add_node(me2),
        Err(TopologyError::SecondMyself(_))
    ));
}

#[test]
fn a_new_shard_id_reaches_the_whole_replication_tree_and_nothing_else() {
    // ids[0] = myself; 1 is a primary, 2 and myself replicate it, 3 replicates 2 (a chain),
    // 4 is an unrelated primary.
    let (mut t, ids) = with_nodes(4);
    t.set_primary(&ids[2], ids[1]).unwrap();
    t.set_primary(&ids[0], ids[1]).unwrap();
    t.set_primary(&ids[3], ids[2]).unwrap();
    let other = t.node(&ids[4]).unwrap().shard_id;
    let new = ShardId::random(&mut rand_chacha::ChaCha8Rng::seed_from_u64(99));
    assert!(t.set_shard_id(&ids[1], new));
    for (i, id) in ids.iter().enumerate().take(4) {
        assert_eq!(t.node(id).unwrap().shard_id, new, "node {i}");
    }
    assert_eq!(t.node(&ids[4]).unwrap().shard_id, other);
    // Same value again: nothing changes; unknown node: nothing done.
    assert!(!t.set_shard_id(&ids[1], new));
    assert!(!t.set_shard_id(&stranger(), new));
    // The root of every member of the tree is the primary.
    for id in &ids[..4] {
        assert_eq!(t.shard_root(id), Some(ids[1]));
    }
    assert_eq!(t.shard_root(&ids[4]), Some(ids[4]));
    assert_eq!(t.shard_root(&stranger()), None);
    t.check_invariants().unwrap();
}

#[test]
fn shard_root_ends_on_a_replication_cycle() {
    let (mut t, ids) = with_nodes(2);
    t.set_primary(&ids[1], ids[2]).unwrap();
    t.set_primary(&ids[2], ids[1]).unwrap();
    assert!(t.shard_root(&ids[1]).is_some());
    let s = ShardId::random(&mut rng());
    assert!(t.set_shard_id(&ids[1], s));
    assert_eq!(t.node(&ids[2]).unwrap().shard_id, s);
}

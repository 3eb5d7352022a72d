use super::util::*;
use crate::*;
use ferrocluster_slot::SlotSet;
use ferrocluster_topology::{ConfigEpoch, CurrentEpoch};
use proptest::prelude::*;

#[test]
fn collision_moves_the_smaller_id() {
    // §11.5: both primaries at configEpoch 5; the sender's ID is greater → myself bumps to
    // currentEpoch + 1 (7 + 1) and saves with fsync.
    let mut t = topo('a', 5, &slots(0..=10));
    add_primary(&mut t, 'b', 'b', 5, &slots(11..=20));
    t.current_epoch = CurrentEpoch(7);
    let mut out = Vec::new();
    assert!(handle_config_epoch_collision(&mut t, &id('b'), &mut out));
    assert_eq!(t.myself().config_epoch, ConfigEpoch(8));
    assert_eq!(t.current_epoch, CurrentEpoch(8));
    assert_eq!(out[0], EpochEffect::Persist);
    assert!(has(
        &out,
        &EpochEffect::Event(EpochEvent::ConfigEpochBumped(ConfigEpoch(8)))
    ));
}

#[test]
fn collision_never_moves_the_largest_id() {
    let mut t = topo('b', 5, &slots(0..=10));
    add_primary(&mut t, 'a', 'a', 5, &slots(11..=20));
    let mut out = Vec::new();
    assert!(!handle_config_epoch_collision(&mut t, &id('a'), &mut out));
    assert_eq!(t.myself().config_epoch, ConfigEpoch(5));
    assert!(out.is_empty());
}

#[test]
fn collision_needs_equal_epochs_and_two_primaries() {
    let mut t = topo('a', 5, &slots(0..=10));
    add_primary(&mut t, 'b', 'b', 6, &slots(11..=20));
    let mut out = Vec::new();
    assert!(!handle_config_epoch_collision(&mut t, &id('b'), &mut out));
    add_replica(&mut t, 'c', 'b', 0);
    t.node_mut(&id('c')).unwrap().config_epoch = ConfigEpoch(5);
    assert!(!handle_config_epoch_collision(&mut t, &id('c'), &mut out));
    assert!(out.is_empty());
}

proptest! {
    /// Two primaries with the same configEpoch (currentEpochs at least that, as §8 step 4
    /// guarantees) end with distinct configEpochs after exchanging one PING each way, whatever
    /// the IDs and epochs.
    #[test]
    fn collision_resolution_yields_distinct_epochs(
        e in 0u64..1000, ca in 0u64..50, cb in 0u64..50,
        a in "[a-z0-9]{40}", b in "[a-z0-9]{40}",
    ) {
        prop_assume!(a != b);
        let ida = ferrocluster_topology::NodeId::parse(&a).unwrap();
        let idb = ferrocluster_topology::NodeId::parse(&b).unwrap();
        let mk = |me: ferrocluster_topology::NodeId, other, cur| {
            let mut n = ferrocluster_topology::Node::new(me, shard('x'), T0);
            n.flags = ferrocluster_topology::NodeFlags::PRIMARY;
            n.config_epoch = ConfigEpoch(e);
            let mut t = ferrocluster_topology::Topology::new(n);
            let mut o = ferrocluster_topology::Node::new(other, shard('y'), T0);
            o.flags = ferrocluster_topology::NodeFlags::PRIMARY;
            o.config_epoch = ConfigEpoch(e);
            t.add_node(o).unwrap();
            t.current_epoch = CurrentEpoch(e + cur);
            t
        };
        let mut ta = mk(ida, idb, ca);
        let mut tb = mk(idb, ida, cb);
        let mut out = Vec::new();
        // Each side hears the other's header: currentEpoch raised (§8 step 4), then §11.5.
        for _ in 0..2 {
            let (ea, ca) = (ta.myself().config_epoch, ta.current_epoch);
            let (eb, cb) = (tb.myself().config_epoch, tb.current_epoch);
            ta.current_epoch = ta.current_epoch.max(cb);
            ta.node_mut(&idb).unwrap().config_epoch = eb;
            if eb == ta.myself().config_epoch {
                handle_config_epoch_collision(&mut ta, &idb, &mut out);
            }
            tb.current_epoch = tb.current_epoch.max(ca);
            tb.node_mut(&ida).unwrap().config_epoch = ea;
            if ea == tb.myself().config_epoch {
                handle_config_epoch_collision(&mut tb, &ida, &mut out);
            }
        }
        prop_assert_ne!(ta.myself().config_epoch, tb.myself().config_epoch);
        // The larger ID kept its epoch.
        let larger = if a > b { &ta } else { &tb };
        prop_assert_eq!(larger.myself().config_epoch, ConfigEpoch(e));
    }
}

#[test]
fn bumpepoch_bumps_zero_and_non_maximal_epochs() {
    // §11.6: configEpoch 0 → bumped to currentEpoch + 1.
    let mut t = topo('a', 0, &SlotSet::new());
    t.current_epoch = CurrentEpoch(6);
    let mut out = Vec::new();
    let r = bump_epoch(&mut t, &mut out);
    assert_eq!(
        r,
        BumpEpochReply {
            bumped: true,
            config_epoch: ConfigEpoch(7)
        }
    );
    assert_eq!(t.current_epoch, CurrentEpoch(7));
    assert_eq!(out[0], EpochEffect::Persist);
    // Now mine is the maximum → STILL.
    let mut out = Vec::new();
    let r = bump_epoch(&mut t, &mut out);
    assert_eq!(r.to_string(), "STILL 7");
    assert!(out.is_empty());
    // Another node has a larger configEpoch → bumped past currentEpoch.
    add_primary(&mut t, 'b', 'b', 9, &SlotSet::new());
    let r = bump_epoch(&mut t, &mut out);
    assert_eq!(r.to_string(), "BUMPED 10");
}

#[test]
fn bumpepoch_reply_matches_the_capture() {
    // Captured on Valkey 8.0 and Redis 7.0: `CLUSTER BUMPEPOCH` → `+BUMPED 7`.
    for flavor in ["valkey-8.0", "redis-7.0"] {
        let want =
            ferrocluster_testvectors::read(format!("{flavor}/text/errors/cluster-bumpepoch.resp"));
        let r = BumpEpochReply {
            bumped: true,
            config_epoch: ConfigEpoch(7),
        };
        assert_eq!(format!("+{r}\r\n").into_bytes(), want);
    }
}

#[test]
fn set_config_epoch_rules_and_texts() {
    let mut t = topo('a', 0, &SlotSet::new());
    let mut out = Vec::new();
    let e = set_config_epoch(&mut t, -1, &mut out).unwrap_err();
    assert_eq!(e.to_string(), "ERR Invalid config epoch specified: -1");
    set_config_epoch(&mut t, 5, &mut out).unwrap();
    assert_eq!(t.myself().config_epoch, ConfigEpoch(5));
    assert_eq!(
        t.current_epoch,
        CurrentEpoch(5),
        "currentEpoch raised to it"
    );
    assert_eq!(out, vec![EpochEffect::UpdateState, EpochEffect::Save]);
    let e = set_config_epoch(&mut t, 6, &mut Vec::new()).unwrap_err();
    assert_eq!(e.to_string(), "ERR Node config epoch is already non-zero");
    add_primary(&mut t, 'b', 'b', 1, &SlotSet::new());
    let e = set_config_epoch(&mut t, 5, &mut Vec::new()).unwrap_err();
    for flavor in ["valkey-8.0", "redis-7.0"] {
        let want = ferrocluster_testvectors::read(format!(
            "{flavor}/text/errors/cluster-set-config-epoch-nonzero.resp"
        ));
        assert_eq!(format!("-{e}\r\n").into_bytes(), want);
    }
}

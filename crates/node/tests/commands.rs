//! The CLUSTER command executor against the captured replies of Valkey 8.0
//! (`shared/vectors/valkey-8.0/text/`): each case loads the node that answered from its saved
//! nodes.conf of the moment before the command, replays the captured command(s) through
//! `ClusterNode::cluster_command_argv` and compares the exact RESP2 bytes.
//!
//! Covered here: every CLUSTER case the command crate deferred to the node (BUMPEPOCH, the
//! clusterdown DELSLOTS/ADDSLOTS/SETSLOT sequence, SETSLOT cleanup, the migration SETSLOT
//! finalization on source, target and a third node, COUNTKEYSINSLOT before/after, the FORGET
//! and MEET replies of the forget phase), the cases it only rendered (RESET with keys,
//! FAILOVER on a primary, SET-CONFIG-EPOCH with known nodes) and every other captured CLUSTER
//! error, run end to end through the node.

mod common;

use common::{captured, case_argv, load, settle, TestKeys};
use ferrocluster_node::{
    ClusterNode, CommandOutcome, CommandRequest, FailoverMode, Millis, Notice, Output, Reply,
    RequestId,
};
use ferrocluster_slot::{key_hash_slot, Slot};
use ferrocluster_topology::NodeId;

/// Runs one captured case (its last step) on `node` and checks the bytes. A SETSLOT on a
/// primary with replicas first asks for replication; the captured server had replicas that
/// acknowledged, so the case is replayed with `replication_done`.
fn run(node: &mut ClusterNode, file: &str, keys: &TestKeys, now: Millis) {
    let argv = case_argv(file);
    let mut req = CommandRequest::default();
    let mut out = node.cluster_command_argv(&argv, &req, keys, now);
    if let CommandOutcome::ReplicateFirst { deadline } = out {
        assert_eq!(
            deadline,
            Some(Millis(now.0 + 2000)),
            "{file}: default 2000 ms"
        );
        assert!(node.topology().myself().is_primary());
        req.replication_done = true;
        out = node.cluster_command_argv(&argv, &req, keys, now);
    }
    let (reply, _) = settle(node, req.id, &out);
    assert_eq!(
        String::from_utf8_lossy(&reply.to_resp2()),
        String::from_utf8_lossy(&captured(file)),
        "{file}: {argv:?}"
    );
}

const T: Millis = Millis(1_796_060_460_000);

/// The keys of the data phase, per the captured steps: `foo` (slot 12182) and `{u}:a..c`
/// (slot 11826) on 22003.
fn keys_22003() -> TestKeys {
    TestKeys::new(&["foo", "{u}:a", "{u}:b", "{u}:c"])
}

#[test]
fn stable_errors_and_replies_of_cluster_subcommands() {
    // (file, port that answered, keys it held)
    let cases: &[(&str, u16, bool)] = &[
        ("errors/addslots-busy.resp", 22003, true),
        ("errors/addslots-own-busy.resp", 22003, true),
        ("errors/addslots-out-of-range.resp", 22003, true),
        ("errors/addslots-duplicate-arg.resp", 22003, true),
        ("errors/addslotsrange-busy.resp", 22003, true),
        ("errors/delslots-unassigned-out-of-range.resp", 22003, true),
        ("errors/setslot-unknown-node-migrating.resp", 22003, true),
        ("errors/setslot-unknown-node-importing.resp", 22003, true),
        ("errors/setslot-unknown-node-node.resp", 22003, true),
        ("errors/setslot-invalid-slot.resp", 22003, true),
        ("errors/setslot-bad-action.resp", 22003, true),
        ("errors/setslot-missing-node-arg.resp", 22003, true),
        ("errors/setslot-migrating-not-owner.resp", 22001, false),
        ("errors/setslot-importing-already-owner.resp", 22003, true),
        (
            "errors/setslot-unknown-node-importing-nonowner.resp",
            22001,
            false,
        ),
        ("errors/setslot-node-replica-target.resp", 22003, true),
        ("errors/setslot-on-replica.resp", 22005, false),
        ("errors/setslot-node-with-keys-not-mine.resp", 22003, true),
        ("errors/meet-port-out-of-range.resp", 22003, true),
        ("errors/meet-port-not-number.resp", 22003, true),
        ("errors/meet-cport-out-of-range.resp", 22003, true),
        ("errors/meet-bad-address.resp", 22003, true),
        ("errors/meet-port-zero.resp", 22003, true),
        ("errors/forget-myself.resp", 22003, true),
        ("errors/forget-my-master.resp", 22005, false),
        ("errors/forget-unknown.resp", 22003, true),
        ("errors/reset-master-with-keys.resp", 22003, true),
        ("errors/reset-bad-arg.resp", 22003, true),
        ("errors/replicate-myself.resp", 22003, true),
        ("errors/replicate-master-with-slots.resp", 22003, true),
        ("errors/replicate-unknown.resp", 22003, true),
        ("errors/replicate-a-replica.resp", 22001, false),
        ("errors/failover-on-master.resp", 22003, true),
        ("errors/failover-bad-arg.resp", 22005, false),
        ("errors/cluster-unknown-subcommand.resp", 22003, true),
        ("errors/cluster-keyslot-arity.resp", 22003, true),
        ("errors/cluster-setslot-arity.resp", 22003, true),
        ("errors/cluster-countfailure-unknown.resp", 22003, true),
        ("errors/cluster-replicas-unknown.resp", 22003, true),
        ("errors/cluster-replicas-of-replica.resp", 22003, true),
        ("errors/cluster-set-config-epoch-nonzero.resp", 22003, true),
        ("errors/countkeysinslot-invalid.resp", 22003, true),
        ("errors/getkeysinslot-invalid.resp", 22003, true),
        ("errors/getkeysinslot-negative-count.resp", 22003, true),
        ("errors/cluster-bumpepoch.resp", 22003, true),
        ("slots/countkeysinslot-owner.resp", 22003, true),
        ("slots/getkeysinslot-owner.resp", 22003, true),
        ("slots/getkeysinslot-owner-limit2.resp", 22003, true),
        ("slots/countkeysinslot-nonowner.resp", 22001, false),
        ("slots/getkeysinslot-nonowner.resp", 22001, false),
    ];
    for &(file, port, has_keys) in cases {
        let mut node = load("stable", port);
        let before = node.nodes_conf();
        let keys = if has_keys {
            keys_22003()
        } else {
            TestKeys::default()
        };
        run(&mut node, file, &keys, T);
        if captured(file).starts_with(b"-") {
            assert_eq!(
                node.nodes_conf(),
                before,
                "{file}: an error changes nothing"
            );
        }
    }
}

#[test]
fn stable_myid_and_myshardid_match_the_capture() {
    for (dir, port) in [
        ("stable/22001-master", 22001),
        ("stable/22006-slave", 22006),
    ] {
        let mut node = load("stable", port);
        for (sub, file) in [
            ("MYID", "cluster-myid.resp"),
            ("MYSHARDID", "cluster-myshardid.resp"),
        ] {
            let out = node.cluster_command_argv(
                &["CLUSTER", sub],
                &CommandRequest::default(),
                &TestKeys::default(),
                T,
            );
            let got = out.reply().unwrap().to_resp2();
            assert_eq!(got, captured(&format!("{dir}/{file}")), "{dir} {sub}");
        }
    }
}

#[test]
fn bumpepoch_then_still_and_persisted_with_fsync_gate() {
    // Captured: +BUMPED 7 (currentEpoch 6, my configEpoch 3). Run again: my epoch is the
    // unique maximum, so STILL (§11.6).
    let mut node = load("stable", 22003);
    while node.poll_output().is_some() {}
    let req = CommandRequest::default();
    let argv = case_argv("errors/cluster-bumpepoch.resp");
    let out = node.cluster_command_argv(&argv, &req, &keys_22003(), T);
    // The bump is saved: the reply waits for its persist.
    assert_eq!(out, CommandOutcome::Deferred);
    assert_eq!(node.topology().current_epoch.get(), 7);
    let (reply, outs) = settle(&mut node, req.id, &out);
    assert_eq!(reply.to_resp2(), captured("errors/cluster-bumpepoch.resp"));
    assert!(
        matches!(outs.first(), Some(Output::Persist { .. })),
        "{outs:?}"
    );
    assert!(outs
        .iter()
        .any(|o| matches!(o, Output::Notice(Notice::ConfigEpochBumped(e)) if e.get() == 7)));
    let again = node.cluster_command_argv(
        &["CLUSTER", "BUMPEPOCH"],
        &CommandRequest::default(),
        &TestKeys::default(),
        T,
    );
    assert_eq!(again.reply(), Some(&Reply::Simple("STILL 7".into())));
}

#[test]
fn clusterdown_phase_delslots_setslot_addslots() {
    let t = T;
    // The owner 22002: DELSLOTS, DELSLOTS again (unassigned now), SETSLOT STABLE on the
    // unassigned slot, ADDSLOTS to restore.
    let mut owner = load("stable", 22002);
    let none = TestKeys::default();
    run(&mut owner, "clusterdown/delslots-owner.resp", &none, t);
    let s9127 = Slot::new(9127).unwrap();
    assert_eq!(owner.topology().slot_owner(s9127), None);
    run(&mut owner, "errors/delslots-unassigned.resp", &none, t);
    run(
        &mut owner,
        "clusterdown/setslot-stable-unassigned.resp",
        &none,
        t,
    );
    run(&mut owner, "clusterdown/addslots-restore.resp", &none, t);
    assert_eq!(owner.topology().slot_owner(s9127), Some(owner.myself_id()));
    // Every other node still saw 22002 owning it (Valkey does not propagate an unassigned
    // slot), so DELSLOTS is +OK there too, on primaries and replicas alike.
    for (port, file) in [
        (22001, "clusterdown/delslots-22001-master.resp"),
        (22003, "clusterdown/delslots-22003-master.resp"),
        (22004, "clusterdown/delslots-22004-slave.resp"),
        (22005, "clusterdown/delslots-22005-slave.resp"),
        (22006, "clusterdown/delslots-22006-slave.resp"),
    ] {
        let mut n = load("stable", port);
        run(&mut n, file, &none, t);
        assert_eq!(n.topology().slot_owner(s9127), None, "{file}");
    }
}

#[test]
fn setslot_importing_from_myself_then_stable_cleanup() {
    let mut node = load("stable", 22001);
    let none = TestKeys::default();
    run(
        &mut node,
        "errors/setslot-importing-from-myself.resp",
        &none,
        T,
    );
    let s = Slot::new(12182).unwrap();
    assert_eq!(node.topology().importing_from(s), Some(node.myself_id()));
    run(&mut node, "slots/setslot-stable-cleanup.resp", &none, T);
    assert_eq!(node.topology().importing_from(s), None);
    assert_eq!(node.topology().migrating_to(s), None);
}

/// The migration phase: slot 13513 with 5 keys moves from 22005 to 22004 (captured steps in
/// order). Each node starts from its nodes.conf before the migration and must end with the
/// slot's owner and marks of its nodes.conf after it.
#[test]
fn legacy_migration_setslot_sequence_matches_the_after_migration_configs() {
    let slot = Slot::new(13513).unwrap();
    let mig: Vec<String> = (1..=5).map(|i| format!("{{mig}}:{i}")).collect();
    let mig_refs: Vec<&str> = mig.iter().map(String::as_str).collect();
    assert!(mig_refs.iter().all(|k| key_hash_slot(k.as_bytes()) == slot));
    let five = TestKeys::new(&mig_refs);
    let none = TestKeys::default();
    let mut src = load("after-pause-failover", 22005);
    let mut dst = load("after-pause-failover", 22004);
    let mut other = load("after-pause-failover", 22006);
    run(&mut src, "migration/countkeysinslot-before.resp", &five, T);
    run(&mut dst, "migration/setslot-importing.resp", &none, T);
    run(&mut src, "migration/setslot-migrating.resp", &five, T);
    assert_eq!(src.topology().migrating_to(slot), Some(dst.myself_id()));
    assert_eq!(dst.topology().importing_from(slot), Some(src.myself_id()));
    // Keys still on the source: the finalization is refused there.
    run(
        &mut src,
        "errors/setslot-node-source-with-keys.resp",
        &five,
        T,
    );
    // MIGRATE moved every key: finalize on the target, the source, then a third node.
    run(&mut dst, "migration/setslot-node-dst.resp", &five, T);
    run(&mut src, "migration/setslot-node-src.resp", &none, T);
    run(
        &mut other,
        "migration/setslot-node-other-22006.resp",
        &none,
        T,
    );
    run(&mut dst, "migration/countkeysinslot-after.resp", &five, T);
    for (n, port) in [(&dst, 22004), (&src, 22005), (&other, 22006)] {
        let after = load("after-migration", port);
        let t = n.topology();
        assert_eq!(
            t.slot_owner(slot),
            after.topology().slot_owner(slot),
            "{port}: owner"
        );
        assert_eq!(t.importing_from(slot), None, "{port}");
        assert_eq!(t.migrating_to(slot), None, "{port}");
    }
    // The target bumped its configEpoch without consensus (C.5) to the cluster's largest.
    let d = dst.topology();
    assert_eq!(d.myself().config_epoch, d.max_config_epoch());
    assert_eq!(d.myself().config_epoch.get(), d.current_epoch.get());
}

#[test]
fn forget_phase_replies() {
    let none = TestKeys::default();
    for port in [22001, 22002, 22004, 22005, 22006] {
        let mut n = load("after-migration", port);
        run(
            &mut n,
            &format!("forget/forget-22003-on-{port}.resp"),
            &none,
            T,
        );
        let forgotten = NodeId::parse("4eadaabf17acf23d536fe0210c26701af5ee844a").unwrap();
        assert!(n.topology().node(&forgotten).is_none());
        if port == 22001 {
            // Forgetting a banned ID again is +OK in Valkey 8 (§16).
            run(&mut n, "errors/forget-already-forgotten.resp", &none, T);
        }
        // MEET does not consult the ban list: +OK, and again while in handshake.
        run(
            &mut n,
            &format!("forget/meet-22003-from-{port}.resp"),
            &none,
            T,
        );
        let hs = n.topology().nodes().filter(|x| x.in_handshake()).count();
        assert_eq!(hs, 1);
        run(
            &mut n,
            &format!("forget/meet-again-22003-from-{port}.resp"),
            &none,
            T,
        );
        assert_eq!(n.topology().nodes().filter(|x| x.in_handshake()).count(), 1);
    }
}

#[test]
fn failover_preconditions_and_the_started_manual_failover() {
    let mut replica = load("stable", 22005);
    let none = TestKeys::default();
    let req = CommandRequest::default();
    // The primary has no outbound link yet (nothing connected): only FORCE/TAKEOVER pass.
    let out = replica.cluster_command_argv(&["CLUSTER", "FAILOVER"], &req, &none, T);
    assert_eq!(
        out.reply().unwrap().to_resp2(),
        b"-ERR Master is down or failed, please use CLUSTER FAILOVER FORCE\r\n"
    );
    assert!(replica.epoch().manual_failover().end().is_none());
    let out = replica.cluster_command_argv(&["CLUSTER", "FAILOVER", "FORCE"], &req, &none, T);
    // The epoch layer runs it: mf_end = now + cluster-manual-failover-timeout (§13.1).
    assert_eq!(
        replica.epoch().manual_failover().end(),
        Some(Millis(T.0 + 5000))
    );
    let evs: Vec<Output> = std::iter::from_fn(|| {
        let o = replica.poll_output();
        if let Some(Output::Persist { seq, .. }) = &o {
            replica.handle_persisted(*seq);
        }
        o
    })
    .collect();
    assert!(
        evs.contains(&Output::Notice(Notice::ManualFailoverRequested(
            FailoverMode::Force
        )))
    );
    // +OK, at once or (the FORCE election bumped currentEpoch) after its persist.
    let ok = out.reply() == Some(&Reply::ok())
        || (out == CommandOutcome::Deferred
            && evs.contains(&Output::Reply {
                to: req.id,
                reply: Reply::ok(),
            }));
    assert!(ok, "{out:?} {evs:?}");
}

#[test]
fn slot_stats_reports_my_shards_slots() {
    let mut node = load("stable", 22003);
    let keys = keys_22003();
    let req = CommandRequest::default();
    // SLOTSRANGE: only slots of my shard (10923-16383), ascending (D.6).
    let out = node.cluster_command_argv(
        &["CLUSTER", "SLOT-STATS", "SLOTSRANGE", "10922", "10924"],
        &req,
        &keys,
        T,
    );
    let row = |s: i64, n: i64| {
        Reply::Array(vec![
            Reply::Integer(s),
            Reply::Map(vec![(Reply::bulk("key-count"), Reply::Integer(n))]),
        ])
    };
    assert_eq!(
        out.reply(),
        Some(&Reply::Array(vec![row(10923, 0), row(10924, 0)]))
    );
    // ORDERBY key-count LIMIT 3: 11826 (3 keys), 12182 (1), then ties by ascending slot.
    let out = node.cluster_command_argv(
        &[
            "CLUSTER",
            "SLOT-STATS",
            "ORDERBY",
            "key-count",
            "LIMIT",
            "3",
        ],
        &req,
        &keys,
        T,
    );
    assert_eq!(
        out.reply(),
        Some(&Reply::Array(vec![
            row(11826, 3),
            row(12182, 1),
            row(10923, 0)
        ]))
    );
    // ASC: zeros first from the lowest slot.
    let out = node.cluster_command_argv(
        &[
            "CLUSTER",
            "SLOT-STATS",
            "ORDERBY",
            "KEY-COUNT",
            "LIMIT",
            "1",
            "ASC",
        ],
        &req,
        &keys,
        T,
    );
    assert_eq!(out.reply(), Some(&Reply::Array(vec![row(10923, 0)])));
    // A replica reports its primary's slots.
    let mut replica = load("stable", 22005);
    let out = replica.cluster_command_argv(
        &["CLUSTER", "SLOT-STATS", "SLOTSRANGE", "0", "16383"],
        &req,
        &TestKeys::default(),
        T,
    );
    let Some(Reply::Array(rows)) = out.reply() else {
        panic!("{out:?}")
    };
    assert_eq!(rows.len(), 16384 - 10923);
}

#[test]
fn set_config_epoch_on_a_lone_node_and_help() {
    let mut n = ClusterNode::new(common::config(0, 2000), common::CAPS, T, 5, None).unwrap();
    let none = TestKeys::default();
    let req = CommandRequest::default();
    let out = n.cluster_command_argv(&["CLUSTER", "SET-CONFIG-EPOCH", "9"], &req, &none, T);
    assert_eq!(settle(&mut n, req.id, &out).0, Reply::ok());
    assert_eq!(n.topology().myself().config_epoch.get(), 9);
    assert_eq!(
        n.topology().current_epoch.get(),
        9,
        "currentEpoch raised (§19.6)"
    );
    let out = n.cluster_command_argv(&["CLUSTER", "SET-CONFIG-EPOCH", "10"], &req, &none, T);
    assert_eq!(
        out.reply().unwrap().to_resp2(),
        b"-ERR Node config epoch is already non-zero\r\n"
    );
    let out = n.cluster_command_argv(&["CLUSTER", "HELP"], &req, &none, T);
    let Some(Reply::Array(lines)) = out.reply() else {
        panic!()
    };
    assert_eq!(
        lines.first(),
        Some(&Reply::Simple(
            "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:".into()
        ))
    );
    // SAVECONFIG queues a Persist; its +OK comes once that is acknowledged.
    let out = n.cluster_command_argv(&["CLUSTER", "SAVECONFIG"], &req, &none, T);
    assert_eq!(out, CommandOutcome::Deferred);
    let (reply, outs) = settle(&mut n, req.id, &out);
    assert_eq!(reply, Reply::ok());
    assert!(
        matches!(outs.first(), Some(Output::Persist { .. })),
        "{outs:?}"
    );
    // FLUSHSLOTS needs an empty DB 0 (§15).
    let out = n.cluster_command_argv(&["CLUSTER", "ADDSLOTSRANGE", "0", "9"], &req, &none, T);
    assert_eq!(settle(&mut n, req.id, &out).0, Reply::ok());
    let out = n.cluster_command_argv(&["CLUSTER", "FLUSHSLOTS"], &req, &TestKeys::new(&["k"]), T);
    assert_eq!(
        out.reply().unwrap().to_resp2(),
        b"-ERR DB must be empty to perform CLUSTER FLUSHSLOTS.\r\n"
    );
    let out = n.cluster_command_argv(&["CLUSTER", "FLUSHSLOTS"], &req, &none, T);
    assert_eq!(settle(&mut n, req.id, &out).0, Reply::ok());
    assert_eq!(n.topology().myself().slot_count(), 0);
}

#[test]
fn reset_of_a_replica_turns_it_into_an_empty_primary() {
    let mut r = load("stable", 22005);
    while r.poll_output().is_some() {}
    let old = *r.myself_id();
    let out = r.cluster_command_argv(
        &["CLUSTER", "RESET", "HARD"],
        &CommandRequest::default(),
        &TestKeys::new(&["x"]), // a replica may hold keys: Valkey empties them
        T,
    );
    assert!(r.topology().myself().is_primary());
    assert_eq!(r.topology().len(), 1);
    assert_ne!(r.myself_id(), &old, "HARD draws a new node ID");
    assert_eq!(r.topology().current_epoch.get(), 0);
    let (reply, evs) = settle(&mut r, RequestId::default(), &out);
    assert_eq!(reply, Reply::ok());
    assert!(evs.contains(&Output::BecamePrimary));
    assert!(evs.contains(&Output::ClusterReset {
        hard: true,
        was_replica: true
    }));
}

#[test]
fn setslot_on_a_replica_from_its_primary_applies_at_once() {
    let mut r = load("stable", 22005);
    let req = CommandRequest {
        from_primary: true,
        ..CommandRequest::default()
    };
    let target = "e5a1974b82f449db4a9a1e945d97a393bd7ed61a"; // a replica: refused
    let out = r.cluster_command_argv(
        &["CLUSTER", "SETSLOT", "12182", "MIGRATING", target],
        &req,
        &TestKeys::default(),
        T,
    );
    assert_eq!(
        out.reply().unwrap().to_resp2(),
        b"-ERR Target node is not a master\r\n"
    );
    let p22001 = "4ac9751fe685983989b445845514090e6915e16b";
    let out = r.cluster_command_argv(
        &[
            "CLUSTER",
            "SETSLOT",
            "12182",
            "MIGRATING",
            p22001,
            "TIMEOUT",
            "100",
        ],
        &req,
        &TestKeys::default(),
        T,
    );
    assert_eq!(settle(&mut r, req.id, &out).0, Reply::ok());
    let s = Slot::new(12182).unwrap();
    assert_eq!(
        r.topology().migrating_to(s).map(NodeId::as_str),
        Some(p22001)
    );
    // A TIMEOUT that overflows the deadline is refused on a primary with replicas.
    let mut p = load("stable", 22003);
    let out = p.cluster_command_argv(
        &[
            "CLUSTER",
            "SETSLOT",
            "12182",
            "STABLE",
            "TIMEOUT",
            "9223372036854775807",
        ],
        &CommandRequest::default(),
        &TestKeys::default(),
        T,
    );
    assert_eq!(
        out.reply().unwrap().to_resp2(),
        b"-ERR timeout is out of range\r\n"
    );
    let out = p.cluster_command_argv(
        &["CLUSTER", "SETSLOT", "12182", "STABLE", "TIMEOUT", "0"],
        &CommandRequest::default(),
        &TestKeys::default(),
        T,
    );
    assert_eq!(out, CommandOutcome::ReplicateFirst { deadline: None });
}

#[test]
fn stable_slots_view_matches_the_capture_in_both_protocols() {
    for (dir, port) in [
        ("stable/22001-master", 22001),
        ("stable/22006-slave", 22006),
    ] {
        let mut node = load("stable", port);
        for (sub, file, resp3) in [
            ("SLOTS", "cluster-slots.resp", false),
            ("SLOTS", "cluster-slots-resp3.resp", true),
        ] {
            let out = node.cluster_command_argv(
                &["CLUSTER", sub],
                &CommandRequest::default(),
                &TestKeys::default(),
                T,
            );
            let r = out.reply().unwrap();
            let enc = |r: &Reply| if resp3 { r.to_resp3() } else { r.to_resp2() };
            let want = captured(&format!("{dir}/{file}"));
            let got = enc(r);
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want),
                "{dir} {sub} resp3={resp3}"
            );
        }
    }
}

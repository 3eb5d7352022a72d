//! Replies wait for their persist (issue 17 B): a naive host — one that writes whatever
//! `cluster_command_argv` returns the moment it returns, then acts on every output in order,
//! acknowledging each `Persist` once written and writing each `Output::Reply` as it comes —
//! never acknowledges a configuration change before it is durable. Checked for every CLUSTER
//! subcommand that changes the configuration, from the states where Valkey accepts it (a
//! fresh node; the captured Valkey 8.0 cluster's primary 22003 and its replica 22005), with
//! Valkey's order: `clusterBeforeSleep` saves nodes.conf before client replies are written.

mod common;

use common::{load, TestKeys, CAPS, T0};
use ferrocluster_node::{
    ClusterNode, CommandOutcome, CommandRequest, Millis, Output, Reply, RequestId,
};

const T: Millis = Millis(1_796_060_460_000);
const P22001: &str = "4ac9751fe685983989b445845514090e6915e16b";
const R22004: &str = "e5a1974b82f449db4a9a1e945d97a393bd7ed61a";

/// Acts on every output in order, acknowledging persists; returns the contents of the last
/// persist, now durable.
fn settle(node: &mut ClusterNode, mut disk: Vec<u8>) -> Vec<u8> {
    while let Some(o) = node.poll_output() {
        if let Output::Persist { seq, contents, .. } = o {
            disk = contents;
            node.handle_persisted(seq);
        }
    }
    disk
}

/// What a naive host saw for one command.
#[derive(Debug, PartialEq)]
enum Seen {
    /// Written at once, nothing to make durable.
    AtOnce,
    /// Written after the persist it waited for.
    AfterPersist,
}

/// Runs `args` (after `CLUSTER`) as a naive host would and checks that every reply it
/// writes acknowledges only what is durable at that moment.
fn naive(node: &mut ClusterNode, args: &[&str], keys: &TestKeys) -> Seen {
    let mut disk = settle(node, node.nodes_conf().into_bytes());
    assert_eq!(
        disk,
        node.nodes_conf().into_bytes(),
        "{args:?}: the test starts from a durable state"
    );
    let mut argv = vec!["CLUSTER"];
    argv.extend_from_slice(args);
    let mut req = CommandRequest {
        id: RequestId(42),
        ..CommandRequest::default()
    };
    let mut out = node.cluster_command_argv(&argv, &req, keys, T);
    if let CommandOutcome::ReplicateFirst { .. } = out {
        // A primary with replicas: the host replicates the SETSLOT first, then calls again.
        req.replication_done = true;
        out = node.cluster_command_argv(&argv, &req, keys, T);
    }
    // What the reply acknowledges: the configuration right after the command.
    let after = node.nodes_conf().into_bytes();
    let mut seen = None;
    match &out {
        CommandOutcome::Reply(r) => {
            assert!(!matches!(r, Reply::Error(_)), "{args:?} was refused: {r:?}");
            assert_eq!(
                String::from_utf8_lossy(&disk),
                String::from_utf8_lossy(&after),
                "{args:?}: replied at once, but its change is not on disk"
            );
            seen = Some(Seen::AtOnce);
        }
        CommandOutcome::Deferred => {}
        other => panic!("{args:?}: {other:?}"),
    }
    // A host that does not acknowledge gets no reply, however long it polls.
    let mut held = Vec::new();
    while let Some(o) = node.poll_output() {
        assert!(
            !matches!(o, Output::Reply { .. }),
            "{args:?}: a reply left before its persist was acknowledged"
        );
        held.push(o);
    }
    // Now in order, acknowledging each persist once written.
    let mut queue: std::collections::VecDeque<Output> = held.into();
    while let Some(o) = queue.pop_front().or_else(|| node.poll_output()) {
        match o {
            Output::Persist { seq, contents, .. } => {
                disk = contents;
                node.handle_persisted(seq);
            }
            Output::Reply { to, reply } => {
                assert_eq!(to, req.id);
                assert!(!matches!(reply, Reply::Error(_)), "{args:?}: {reply:?}");
                assert_eq!(seen, None, "{args:?}: two replies");
                assert_eq!(
                    String::from_utf8_lossy(&disk),
                    String::from_utf8_lossy(&after),
                    "{args:?}: the reply left before its change was durable"
                );
                seen = Some(Seen::AfterPersist);
            }
            _ => {}
        }
    }
    seen.unwrap_or_else(|| panic!("{args:?}: no reply"))
}

/// One command case: its name, the node it runs on, and its CLUSTER arguments.
type Case = (&'static str, fn() -> ClusterNode, &'static [&'static str]);

fn fresh() -> ClusterNode {
    ClusterNode::new(common::config(0, 2000), CAPS, T0, 11, None).unwrap()
}

fn fresh_with_slots() -> ClusterNode {
    let mut n = fresh();
    assert_eq!(
        naive(&mut n, &["ADDSLOTSRANGE", "0", "100"], &TestKeys::default()),
        Seen::AfterPersist
    );
    n
}

#[test]
fn every_config_change_of_a_fresh_node_is_durable_before_its_reply() {
    let none = TestKeys::default();
    let myself = |n: &ClusterNode| n.myself_id().as_str().to_owned();
    let cases: &[Case] = &[
        ("ADDSLOTS", fresh, &["ADDSLOTS", "0", "1", "2"]),
        ("ADDSLOTSRANGE", fresh, &["ADDSLOTSRANGE", "0", "100"]),
        ("DELSLOTS", fresh_with_slots, &["DELSLOTS", "5"]),
        (
            "DELSLOTSRANGE",
            fresh_with_slots,
            &["DELSLOTSRANGE", "0", "10"],
        ),
        ("FLUSHSLOTS", fresh_with_slots, &["FLUSHSLOTS"]),
        (
            "SETSLOT STABLE",
            fresh_with_slots,
            &["SETSLOT", "5", "STABLE"],
        ),
        ("SET-CONFIG-EPOCH", fresh, &["SET-CONFIG-EPOCH", "3"]),
        ("BUMPEPOCH", fresh, &["BUMPEPOCH"]),
        ("SAVECONFIG", fresh, &["SAVECONFIG"]),
        ("MEET", fresh, &["MEET", "127.0.0.1", "7001"]),
        ("RESET SOFT", fresh_with_slots, &["RESET", "SOFT"]),
        ("RESET HARD", fresh_with_slots, &["RESET", "HARD"]),
    ];
    for (name, build, args) in cases {
        let mut n = build();
        let seen = naive(&mut n, args, &none);
        // Only a change that is saved waits; MEET saves nothing (a handshake node is not
        // written to nodes.conf) and a BUMPEPOCH of a lone node bumps.
        let saves = *name != "MEET";
        assert_eq!(seen == Seen::AfterPersist, saves, "{name}: {seen:?}");
    }
    // SETSLOT <slot> NODE <myself> of a slot myself owns.
    let mut n = fresh_with_slots();
    let me = myself(&n);
    naive(&mut n, &["SETSLOT", "7", "NODE", &me], &none);
    // A second BUMPEPOCH of the lone node: STILL, nothing saved, replied at once.
    let mut n = fresh();
    naive(&mut n, &["BUMPEPOCH"], &none);
    assert_eq!(naive(&mut n, &["BUMPEPOCH"], &none), Seen::AtOnce);
}

#[test]
fn every_config_change_in_a_cluster_is_durable_before_its_reply() {
    let none = TestKeys::default();
    let primary: &[&[&str]] = &[
        &["SETSLOT", "10923", "MIGRATING", P22001],
        &["SETSLOT", "100", "IMPORTING", P22001],
        &["SETSLOT", "10923", "NODE", P22001],
        &["FORGET", R22004],
        &["DELSLOTSRANGE", "10923", "10930"],
        &[
            "MIGRATESLOTS",
            "SLOTSRANGE",
            "10923",
            "10930",
            "NODE",
            P22001,
        ],
    ];
    for args in primary {
        let mut n = load("stable", 22003);
        naive(&mut n, args, &none);
    }
    let mut n = load("stable", 22003);
    naive(
        &mut n,
        &[
            "MIGRATESLOTS",
            "SLOTSRANGE",
            "10923",
            "10930",
            "NODE",
            P22001,
        ],
        &none,
    );
    naive(&mut n, &["CANCELSLOTMIGRATIONS"], &none);
    // The replica 22005 of 22003.
    let replica: &[&[&str]] = &[
        &["FAILOVER", "TAKEOVER"],
        &["FAILOVER", "FORCE"],
        &["REPLICATE", P22001],
        &["RESET", "HARD"],
        &["RESET", "SOFT"],
    ];
    for args in replica {
        let mut n = load("stable", 22005);
        let seen = naive(&mut n, args, &TestKeys::new(&["k"]));
        assert_eq!(seen, Seen::AfterPersist, "{args:?}");
    }
}

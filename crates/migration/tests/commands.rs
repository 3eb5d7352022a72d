//! Subcommand validation with Valkey's exact error texts (sheet A.2, A.4, A.5, A.10).
mod common;

use common::*;
use ferrocluster_migration::*;
use ferrocluster_topology::{Reply, Topology};

fn run(m: &mut Migrations, topo: &Topology, origin: Origin, text: &str) -> Option<Reply> {
    m.handle_cluster_command(topo, origin, &argv(text), &mut rng(), T0)
}

fn err(text: &str) -> Option<Reply> {
    Some(Reply::Error(format!("ERR {text}")))
}

#[test]
fn migrateslots_errors_in_valkey_order() {
    let topo = cluster('s');
    let t = ids('t');
    let cases: Vec<(String, &str)> = vec![
        (
            "SLOTSRANGE".into(),
            "wrong number of arguments for 'cluster|migrateslots' command",
        ),
        (format!("NODE {t} SLOTSRANGE 0 1"), "syntax error"),
        (
            format!("SLOTSRANGE 0 16384 NODE {t}"),
            "Invalid or out of range slot",
        ),
        (
            format!("SLOTSRANGE a 0 NODE {t}"),
            "No slot ranges specified",
        ),
        (
            "SLOTSRANGE 0 1 2".into(),
            "No end slot for final slot range",
        ),
        (
            format!("SLOTSRANGE 5 1 NODE {t}"),
            "Start slot number 5 is greater than end slot number 1.",
        ),
        (
            format!("SLOTSRANGE 300 300 NODE {t}"),
            "Slot 300 has no node served.",
        ),
        (
            format!("SLOTSRANGE 99 100 NODE {t}"),
            "Requested slots span multiple shards",
        ),
        (
            format!("SLOTSRANGE 0 10 5 6 NODE {t}"),
            "Slot range 5-6 overlaps with previous range 0-10.",
        ),
        (
            format!("SLOTSRANGE 100 101 NODE {t}"),
            "Slots are not served by this node.",
        ),
        (
            format!("SLOTSRANGE 0 5 NODE {t} SLOTSRANGE 5 6 NODE {t}"),
            "Slot ranges in migrations overlap",
        ),
        ("SLOTSRANGE 0 5 NOD x".into(), "syntax error"),
        ("SLOTSRANGE 0 5 NODE".into(), "syntax error"),
        ("SLOTSRANGE 0 5 NODE abc".into(), "Invalid node name: abc"),
        (
            format!("SLOTSRANGE 0 5 NODE {}", ids('z')),
            &*Box::leak(format!("Unknown node name: {}", ids('z')).into_boxed_str()),
        ),
        (
            format!("SLOTSRANGE 0 5 NODE {}", ids('s')),
            "Target node can not be this node.",
        ),
    ];
    for (args, e) in cases {
        let mut m = Migrations::new(MigrationConfig::default(), T0);
        let r = run(
            &mut m,
            &topo,
            Origin::Conn(ConnId(1)),
            &format!("CLUSTER MIGRATESLOTS {args}"),
        );
        assert_eq!(r, err(e), "{args}");
        assert_eq!(m.jobs().len(), 0, "all or nothing: {args}");
    }
}

#[test]
fn migrateslots_state_checks() {
    let t = ids('t');
    let text = format!("CLUSTER MIGRATESLOTS SLOTSRANGE 0 5 NODE {t}");
    let mut m = Migrations::new(MigrationConfig::default(), T0);
    assert_eq!(
        run(&mut m, &cluster('q'), Origin::Conn(ConnId(1)), &text),
        err("Slot migration can only be used on primary nodes.")
    );
    let mut topo = cluster('s');
    topo.set_importing(slot(150), Some(id('t'))).unwrap();
    assert_eq!(
        run(&mut m, &topo, Origin::Conn(ConnId(1)), &text),
        err("Slots are being manually imported")
    );
    let mut topo = cluster('s');
    topo.set_migrating(slot(1), Some(id('t'))).unwrap();
    assert_eq!(
        run(&mut m, &topo, Origin::Conn(ConnId(1)), &text),
        err("Slots are being manually migrated")
    );
    let topo = cluster('s');
    assert_eq!(
        run(&mut m, &topo, Origin::Conn(ConnId(1)), &text),
        Some(Reply::ok())
    );
    assert_eq!(
        run(
            &mut m,
            &topo,
            Origin::Conn(ConnId(1)),
            &format!("CLUSTER MIGRATESLOTS SLOTSRANGE 3 8 NODE {t}")
        ),
        err("I am already migrating slot 3.")
    );
}

#[test]
fn migrateslots_groups_make_one_job_each_first_group_newest() {
    let topo = cluster('s');
    let mut m = Migrations::new(MigrationConfig::default(), T0);
    let text = format!(
        "CLUSTER MIGRATESLOTS SLOTSRANGE 0 9 20 29 NODE {} SLOTSRANGE 10 19 NODE {}",
        ids('t'),
        ids('u')
    );
    assert_eq!(
        run(&mut m, &topo, Origin::Conn(ConnId(1)), &text),
        Some(Reply::ok())
    );
    let jobs: Vec<(String, Option<ferrocluster_topology::NodeId>)> = m
        .jobs()
        .map(|j| (j.slot_ranges_text(), j.target().copied()))
        .collect();
    assert_eq!(
        jobs,
        vec![
            ("0-9 20-29".into(), Some(id('t'))),
            ("10-19".into(), Some(id('u')))
        ]
    );
}

#[test]
fn arity_and_unknown() {
    let topo = cluster('s');
    let mut m = Migrations::new(MigrationConfig::default(), T0);
    let o = Origin::Conn(ConnId(1));
    assert_eq!(
        run(&mut m, &topo, o, "CLUSTER GETSLOTMIGRATIONS x"),
        err("wrong number of arguments for 'cluster|getslotmigrations' command")
    );
    assert_eq!(
        run(&mut m, &topo, o, "CLUSTER CANCELSLOTMIGRATIONS ARG"),
        err("wrong number of arguments for 'cluster|cancelslotmigrations' command")
    );
    assert_eq!(
        run(&mut m, &topo, o, "CLUSTER SYNCSLOTS"),
        err("wrong number of arguments for 'cluster|syncslots' command")
    );
    assert_eq!(
        run(&mut m, &topo, o, "CLUSTER CANCELSLOTMIGRATIONS"),
        err("No migrations ongoing")
    );
    assert!(is_migration_subcommand(b"MigrateSlots"));
    assert!(!is_migration_subcommand(b"setslot"));
}

#[test]
fn syncslots_from_a_plain_client() {
    let topo = cluster('t');
    let mut m = Migrations::new(MigrationConfig::default(), T0);
    let o = Origin::Conn(ConnId(5));
    for sub in [
        "SNAPSHOT-EOF",
        "REQUEST-PAUSE",
        "PAUSED",
        "REQUEST-FAILOVER",
        "FAILOVER-GRANTED",
        "ACK",
    ] {
        assert_eq!(
            run(
                &mut m,
                &topo,
                o,
                &format!("CLUSTER SYNCSLOTS {}", sub.to_lowercase())
            ),
            err(&format!(
                "CLUSTER SYNCSLOTS {sub} should only be used by slot migration clients"
            ))
        );
        // From the primary these are ignored.
        assert_eq!(
            run(
                &mut m,
                &topo,
                Origin::Primary,
                &format!("CLUSTER SYNCSLOTS {sub}")
            ),
            None
        );
    }
    assert_eq!(run(&mut m, &topo, o, "CLUSTER SYNCSLOTS CAPA foo"), None);
    assert_eq!(
        run(&mut m, &topo, o, "CLUSTER SYNCSLOTS NOPE"),
        err("syntax error")
    );
}

#[test]
fn establish_validation() {
    let s = ids('s');
    let n = "1".repeat(40);
    let cases: Vec<(String, String)> = vec![
        (
            format!("SOURCE {} NAME {n} SLOTSRANGE 0 1", ids('z')),
            "Target node does not know the source node".into(),
        ),
        (
            format!("SOURCE {} NAME {n} SLOTSRANGE 0 1", ids('t')),
            "Source node is target node itself".into(),
        ),
        (
            format!("SOURCE {s} NAME abc SLOTSRANGE 0 1"),
            "syntax error".into(),
        ),
        (
            format!("SOURCE {s} SOURCE {s} NAME {n} SLOTSRANGE 0 1"),
            "syntax error".into(),
        ),
        (
            format!("SOURCE {s} NAME {n} SLOTSRANGE 0 1 SLOTSRANGE 2 3"),
            "syntax error".into(),
        ),
        (
            format!("SOURCE {s} NAME {n} SLOTSRANGE 0 1 BOGUS x"),
            "syntax error".into(),
        ),
        (format!("SOURCE {s} NAME {n}"), "syntax error".into()),
        (format!("NAME {n} SLOTSRANGE 0 1"), "syntax error".into()),
        (
            format!("SOURCE {s} NAME {n} SLOTSRANGE 150 151"),
            "Target node does not agree about current slot ownership".into(),
        ),
        (
            format!("SOURCE {s} NAME {n} SLOTSRANGE 5 1"),
            "Start slot number 5 is greater than end slot number 1.".into(),
        ),
    ];
    for (args, e) in cases {
        let mut m = Migrations::new(MigrationConfig::default(), T0);
        let r = run(
            &mut m,
            &cluster('t'),
            Origin::Conn(ConnId(3)),
            &format!("CLUSTER SYNCSLOTS ESTABLISH {args}"),
        );
        assert_eq!(r, err(&e), "{args}");
        assert_eq!(m.jobs().len(), 0);
    }
    let mut m = Migrations::new(MigrationConfig::default(), T0);
    let ok = format!("CLUSTER SYNCSLOTS ESTABLISH SLOTSRANGE 0 1 NAME {n} SOURCE {s}");
    assert_eq!(
        run(&mut m, &cluster('t'), Origin::Conn(ConnId(3)), &ok),
        Some(Reply::ok())
    );
    let again = format!(
        "CLUSTER SYNCSLOTS ESTABLISH SOURCE {s} NAME {} SLOTSRANGE 1 2",
        "2".repeat(40)
    );
    assert_eq!(
        run(&mut m, &cluster('t'), Origin::Conn(ConnId(4)), &again),
        err("Slot is already being imported on the target by a different migration")
    );
    // The target refuses while it has legacy marks, or as a replica.
    let mut topo = cluster('t');
    topo.set_importing(slot(5), Some(id('s'))).unwrap();
    let mut m = Migrations::new(MigrationConfig::default(), T0);
    assert_eq!(
        run(&mut m, &topo, Origin::Conn(ConnId(3)), &ok),
        err("Slots are being manually imported")
    );
    assert_eq!(
        run(&mut m, &cluster('r'), Origin::Conn(ConnId(3)), &ok),
        err("Slot migration can only be used on primary nodes.")
    );
    // From the primary the same ESTABLISH makes a tracking job, SOURCE unchecked.
    assert_eq!(
        run(&mut m, &cluster('r'), Origin::Primary, &ok),
        Some(Reply::ok())
    );
    assert!(m.jobs().next().unwrap().is_tracking_only());
}

#[test]
fn finish_validation() {
    let topo = cluster('r');
    let n = "1".repeat(40);
    let mut m = Migrations::new(MigrationConfig::default(), T0);
    let est = format!("CLUSTER SYNCSLOTS ESTABLISH NAME {n} SLOTSRANGE 0 1");
    assert_eq!(run(&mut m, &topo, Origin::Primary, &est), Some(Reply::ok()));
    for (args, e) in [
        ("STATE success".to_string(), "syntax error"),
        (format!("NAME {n}"), "syntax error"),
        (format!("STATE maybe NAME {n}"), "syntax error"),
        (
            format!("STATE success NAME {n} STATE failed"),
            "syntax error",
        ),
        (
            format!("STATE success NAME {}", "3".repeat(40)),
            "No such slot migration job",
        ),
        ("STATE success NAME short".to_string(), "syntax error"),
    ] {
        assert_eq!(
            run(
                &mut m,
                &topo,
                Origin::Primary,
                &format!("CLUSTER SYNCSLOTS FINISH {args}")
            ),
            err(e),
            "{args}"
        );
    }
    let fin = format!("CLUSTER SYNCSLOTS FINISH STATE failed NAME {n} MESSAGE boom");
    assert_eq!(run(&mut m, &topo, Origin::Primary, &fin), Some(Reply::ok()));
    let j = m.jobs().next().unwrap();
    assert_eq!((j.state(), j.message()), (JobState::Failed, Some("boom")));
}

#[test]
fn legacy_setslot_is_refused_while_asm_runs() {
    use ferrocluster_migration::legacy::{check_setslot_allowed, LegacyAction};
    let topo = cluster('s');
    let mut m = Migrations::new(MigrationConfig::default(), T0);
    assert_eq!(
        check_setslot_allowed(&m, &LegacyAction::Migrating(id('t'))),
        Ok(())
    );
    m.migrate_slots(
        &topo,
        &argv(&format!(
            "CLUSTER MIGRATESLOTS SLOTSRANGE 16 16 NODE {}",
            ids('t')
        )),
        &mut rng(),
        T0,
    )
    .unwrap();
    let e = check_setslot_allowed(&m, &LegacyAction::Importing(id('t'))).unwrap_err();
    assert_eq!(
        e.to_reply(),
        Reply::Error("ERR Slot export in progress".into())
    );
    assert_eq!(check_setslot_allowed(&m, &LegacyAction::Stable), Ok(()));
    let mut t = Migrations::new(MigrationConfig::default(), T0);
    let est = format!(
        "CLUSTER SYNCSLOTS ESTABLISH SOURCE {} NAME {} SLOTSRANGE 0 1",
        ids('s'),
        "1".repeat(40)
    );
    run(&mut t, &cluster('t'), Origin::Conn(ConnId(2)), &est);
    assert_eq!(
        check_setslot_allowed(&t, &LegacyAction::Migrating(id('s'))),
        Err(MigrationError::SlotImportInProgress)
    );
}

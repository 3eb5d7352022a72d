//! Export (source) state machine, one transition at a time (sheet A.7, A.9, A.10).
mod common;

use common::*;
use ferrocluster_migration::*;
use ferrocluster_topology::{Millis, Reply, Topology};

const C: ConnId = ConnId(7);

fn cmd(
    m: &mut Migrations,
    topo: &Topology,
    origin: Origin,
    text: &str,
    now: Millis,
) -> Option<Reply> {
    m.handle_cluster_command(topo, origin, &argv(text), &mut rng(), now)
}

/// A source manager with one export job of slots 0-9 to `t`, driven to `state`.
fn export_to(state: JobState, cfg: MigrationConfig) -> (Migrations, Topology, JobName) {
    let topo = cluster('s');
    let mut m = Migrations::new(cfg, T0);
    let text = format!("CLUSTER MIGRATESLOTS SLOTSRANGE 0 9 NODE {}", ids('t'));
    assert_eq!(
        cmd(&mut m, &topo, Origin::Conn(ConnId(1)), &text, T0),
        Some(Reply::ok())
    );
    let job = *m.jobs().next().unwrap().name();
    let steps = [
        JobState::Connecting,
        JobState::ReadingEstablishResponse,
        JobState::Snapshotting,
        JobState::Replicating,
        JobState::FailoverPaused,
        JobState::ExportFailoverGranted,
    ];
    for st in steps {
        if m.job(JobKind::Export, &job).unwrap().state() == state {
            break;
        }
        match st {
            JobState::Connecting => m.handle_connected(&topo, &job, C, T0),
            JobState::ReadingEstablishResponse => {
                m.handle_establish_reply(&topo, &job, b"+OK\r\n", T0)
            }
            JobState::Snapshotting => {
                m.handle_snapshot_done(&topo, &job, SnapshotResult::Done { cow_bytes: 7 }, T0)
            }
            JobState::Replicating => {
                assert_eq!(
                    cmd(
                        &mut m,
                        &topo,
                        Origin::Conn(C),
                        "CLUSTER SYNCSLOTS REQUEST-PAUSE",
                        T0
                    ),
                    None
                )
            }
            _ => assert_eq!(
                cmd(
                    &mut m,
                    &topo,
                    Origin::Conn(C),
                    "CLUSTER SYNCSLOTS REQUEST-FAILOVER",
                    T0
                ),
                None
            ),
        }
    }
    assert_eq!(m.job(JobKind::Export, &job).unwrap().state(), state);
    drain(&mut m);
    (m, topo, job)
}

fn st(m: &Migrations, job: &JobName) -> (JobState, String) {
    let j = m.job(JobKind::Export, job).unwrap();
    (j.state(), j.message().unwrap_or("").to_owned())
}

#[test]
fn migrateslots_creates_a_connecting_job_and_asks_to_connect() {
    let topo = cluster('s');
    let mut m = Migrations::new(MigrationConfig::default(), T0);
    let names = m
        .migrate_slots(
            &topo,
            &argv(&format!(
                "CLUSTER MIGRATESLOTS SLOTSRANGE 0 9 NODE {}",
                ids('t')
            )),
            &mut rng(),
            T0,
        )
        .unwrap();
    let j = m.job(JobKind::Export, &names[0]).unwrap();
    assert_eq!(j.state(), JobState::Connecting);
    assert_eq!(j.source(), Some(&id('s')));
    assert_eq!(j.target(), Some(&id('t')));
    assert!(j.name().to_string().bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(
        effects(&mut m),
        vec![MigrationOutput::Request(MigrationRequest::Connect {
            job: names[0],
            target: id('t'),
            ip: std::net::IpAddr::from([127, 0, 0, 1]),
            port: 7000 + u16::from(b't' - b'a'),
            tls_port: 0,
        })]
    );
}

#[test]
fn connected_without_auth_sends_establish() {
    let (mut m, topo, job) = export_to(JobState::Connecting, MigrationConfig::default());
    m.handle_connected(&topo, &job, C, T0);
    let out = effects(&mut m);
    assert_eq!(
        out,
        vec![MigrationOutput::Request(MigrationRequest::Send {
            conn: C,
            message: SyncSlots::Establish {
                source: Some(id('s')),
                name: job,
                ranges: vec![range(0, 9)]
            }
        })]
    );
    assert_eq!(st(&m, &job).0, JobState::ReadingEstablishResponse);
    // The exact wire bytes Valkey's generateSyncSlotsEstablishCommand writes.
    let MigrationOutput::Request(MigrationRequest::Send { message, .. }) = &out[0] else {
        unreachable!()
    };
    let expect = format!(
        "*10\r\n$7\r\nCLUSTER\r\n$9\r\nSYNCSLOTS\r\n$9\r\nESTABLISH\r\n$6\r\nSOURCE\r\n$40\r\n{}\r\n$4\r\nNAME\r\n$40\r\n{}\r\n$10\r\nSLOTSRANGE\r\n$1\r\n0\r\n$1\r\n9\r\n",
        ids('s'),
        job
    );
    assert_eq!(String::from_utf8(message.to_resp()).unwrap(), expect);
}

#[test]
fn auth_path_and_its_failures() {
    let cfg = MigrationConfig {
        auth_to_target: true,
        ..MigrationConfig::default()
    };
    let (mut m, topo, job) = export_to(JobState::Connecting, cfg.clone());
    m.handle_connected(&topo, &job, C, T0);
    assert_eq!(
        effects(&mut m),
        vec![MigrationOutput::Request(MigrationRequest::SendAuth {
            job,
            conn: C
        })]
    );
    assert_eq!(st(&m, &job).0, JobState::ReadingAuthResponse);
    m.handle_auth_reply(&topo, &job, AuthReply::Ok, T0);
    assert_eq!(st(&m, &job).0, JobState::ReadingEstablishResponse);

    let cases = [
        (
            AuthReply::Rejected("-WRONGPASS invalid username-password pair".into()),
            "Failed to AUTH to target node: -WRONGPASS invalid username-password pair",
        ),
        (
            AuthReply::NoResponse,
            "Target node did not respond to AUTH command",
        ),
        (
            AuthReply::WriteFailed("Broken pipe".into()),
            "Failed to send AUTH command to target node: Broken pipe",
        ),
    ];
    for (reply, msg) in cases {
        let (mut m, topo, job) = export_to(JobState::Connecting, cfg.clone());
        m.handle_connected(&topo, &job, C, T0);
        m.handle_auth_reply(&topo, &job, reply, T0);
        assert_eq!(st(&m, &job), (JobState::Failed, msg.to_owned()));
        assert!(
            effects(&mut m).contains(&MigrationOutput::Request(MigrationRequest::Close {
                conn: C
            }))
        );
    }
}

#[test]
fn connect_failure_fails_the_job() {
    let (mut m, topo, job) = export_to(JobState::Connecting, MigrationConfig::default());
    m.handle_connect_failed(&topo, &job, "Connection refused", T0);
    assert_eq!(
        st(&m, &job),
        (
            JobState::Failed,
            "Unable to connect to target node: Connection refused".into()
        )
    );
}

#[test]
fn establish_reply_ok_acks_and_snapshots() {
    let (mut m, topo, job) = export_to(
        JobState::ReadingEstablishResponse,
        MigrationConfig::default(),
    );
    m.handle_establish_reply(&topo, &job, b"+OK\r\n", T0);
    assert_eq!(
        effects(&mut m),
        vec![
            MigrationOutput::Request(MigrationRequest::Send {
                conn: C,
                message: SyncSlots::Ack
            }),
            MigrationOutput::Request(MigrationRequest::StartSnapshot {
                job,
                conn: C,
                ranges: vec![range(0, 9)]
            }),
        ]
    );
    assert_eq!(st(&m, &job).0, JobState::Snapshotting);
}

#[test]
fn establish_errors_fail_the_job() {
    let (mut m, topo, job) = export_to(
        JobState::ReadingEstablishResponse,
        MigrationConfig::default(),
    );
    m.handle_establish_reply(
        &topo,
        &job,
        b"-ERR Slots are being manually imported\r\n",
        T0,
    );
    assert_eq!(
        st(&m, &job),
        (
            JobState::Failed,
            "Received error during handshake to target: -ERR Slots are being manually imported\r\n"
                .into()
        )
    );
    let (mut m, topo, job) = export_to(
        JobState::ReadingEstablishResponse,
        MigrationConfig::default(),
    );
    m.handle_establish_reply_too_large(&topo, &job, T0);
    assert_eq!(
        st(&m, &job),
        (
            JobState::Failed,
            "Response to establish job is larger than buffer limit".into()
        )
    );
}

#[test]
fn snapshot_waits_for_a_busy_child() {
    let (mut m, topo, job) = export_to(
        JobState::ReadingEstablishResponse,
        MigrationConfig::default(),
    );
    m.handle_child_process(&topo, true, T0);
    m.handle_establish_reply(&topo, &job, b"+OK\r\n", T0);
    assert_eq!(st(&m, &job).0, JobState::WaitingToSnapshot);
    m.handle_timeout(&topo, T0.saturating_add_ms(100));
    assert_eq!(st(&m, &job).0, JobState::WaitingToSnapshot);
    m.handle_child_process(&topo, false, T0.saturating_add_ms(200));
    assert_eq!(st(&m, &job).0, JobState::Snapshotting);
}

#[test]
fn snapshot_failures() {
    let (mut m, topo, job) = export_to(JobState::Snapshotting, MigrationConfig::default());
    m.handle_snapshot_done(&topo, &job, SnapshotResult::Failed, T0);
    assert_eq!(
        st(&m, &job),
        (JobState::Failed, "Failed to perform snapshot".into())
    );
    let (mut m, topo, job) = export_to(JobState::Snapshotting, MigrationConfig::default());
    m.handle_snapshot_start_failed(&topo, &job, T0);
    assert_eq!(
        st(&m, &job),
        (JobState::Failed, "Failed to start snapshot".into())
    );
}

#[test]
fn snapshot_done_begins_streaming_and_records_cow() {
    let (mut m, topo, job) = export_to(JobState::Snapshotting, MigrationConfig::default());
    m.handle_snapshot_done(&topo, &job, SnapshotResult::Done { cow_bytes: 123 }, T0);
    assert_eq!(
        effects(&mut m),
        vec![MigrationOutput::Request(MigrationRequest::BeginStreaming {
            job,
            conn: C
        })]
    );
    assert_eq!(m.job(JobKind::Export, &job).unwrap().cow_bytes(), 123);
    assert_eq!(st(&m, &job).0, JobState::Replicating);
}

#[test]
fn request_pause_during_snapshot_starts_streaming_and_pauses() {
    let (mut m, topo, job) = export_to(JobState::Snapshotting, MigrationConfig::default());
    cmd(
        &mut m,
        &topo,
        Origin::Conn(C),
        "CLUSTER SYNCSLOTS REQUEST-PAUSE",
        T0,
    );
    let until = T0.saturating_add_ms(10_000);
    let mut slots = ferrocluster_slot::SlotSet::new();
    slots.insert_range(range(0, 9));
    assert_eq!(
        effects(&mut m),
        vec![
            MigrationOutput::Request(MigrationRequest::BeginStreaming { job, conn: C }),
            MigrationOutput::PauseWrites { until, slots },
            MigrationOutput::Request(MigrationRequest::Send {
                conn: C,
                message: SyncSlots::Paused
            }),
        ]
    );
    assert_eq!(st(&m, &job).0, JobState::FailoverPaused);
    assert_eq!(
        m.job(JobKind::Export, &job).unwrap().pause_until(),
        Some(until)
    );
}

#[test]
fn backlog_above_limit_waits_to_pause_negative_limit_disables() {
    let (mut m, topo, job) = export_to(JobState::Replicating, MigrationConfig::default());
    m.handle_link_backlog(&topo, &job, 10, T0);
    cmd(
        &mut m,
        &topo,
        Origin::Conn(C),
        "CLUSTER SYNCSLOTS REQUEST-PAUSE",
        T0,
    );
    assert_eq!(st(&m, &job).0, JobState::WaitingToPause);
    assert_eq!(
        effects(&mut m),
        vec![MigrationOutput::Request(MigrationRequest::QueryBacklog {
            job,
            conn: C
        })]
    );
    // Re-asked every cron tick.
    m.handle_timeout(&topo, T0.saturating_add_ms(100));
    assert!(
        effects(&mut m).contains(&MigrationOutput::Request(MigrationRequest::QueryBacklog {
            job,
            conn: C
        }))
    );
    m.handle_link_backlog(&topo, &job, 0, T0.saturating_add_ms(150));
    assert_eq!(st(&m, &job).0, JobState::FailoverPaused);

    let cfg = MigrationConfig {
        max_failover_repl_bytes: -1,
        ..MigrationConfig::default()
    };
    let (mut m, topo, job) = export_to(JobState::Replicating, cfg);
    m.handle_link_backlog(&topo, &job, 1 << 30, T0);
    cmd(
        &mut m,
        &topo,
        Origin::Conn(C),
        "CLUSTER SYNCSLOTS REQUEST-PAUSE",
        T0,
    );
    assert_eq!(st(&m, &job).0, JobState::FailoverPaused);
}

#[test]
fn failover_paused_times_out_after_twice_the_mf_timeout() {
    let (mut m, topo, job) = export_to(JobState::FailoverPaused, MigrationConfig::default());
    m.handle_timeout(&topo, T0.saturating_add_ms(10_000));
    assert_eq!(st(&m, &job).0, JobState::FailoverPaused);
    assert!(m.poll_timeout().unwrap() <= T0.saturating_add_ms(10_001));
    m.handle_timeout(&topo, T0.saturating_add_ms(10_001));
    assert_eq!(
        st(&m, &job),
        (
            JobState::Failed,
            "Timed out before streaming completed".into()
        )
    );
    assert!(effects(&mut m).contains(&MigrationOutput::UnpauseWrites));
}

#[test]
fn request_failover_grants_and_extends_the_pause() {
    let (mut m, topo, job) = export_to(JobState::FailoverPaused, MigrationConfig::default());
    let now = T0.saturating_add_ms(9_000);
    cmd(
        &mut m,
        &topo,
        Origin::Conn(C),
        "CLUSTER SYNCSLOTS REQUEST-FAILOVER",
        now,
    );
    assert_eq!(st(&m, &job).0, JobState::ExportFailoverGranted);
    // Raised to now + 2000 ms (never lowered).
    assert_eq!(
        m.job(JobKind::Export, &job).unwrap().pause_until(),
        Some(now.saturating_add_ms(2000))
    );
    let out = effects(&mut m);
    assert!(
        out.contains(&MigrationOutput::Request(MigrationRequest::Send {
            conn: C,
            message: SyncSlots::FailoverGranted
        }))
    );
}

#[test]
fn request_failover_after_the_pause_lapsed_is_denied() {
    let (mut m, topo, job) = export_to(JobState::FailoverPaused, MigrationConfig::default());
    cmd(
        &mut m,
        &topo,
        Origin::Conn(C),
        "CLUSTER SYNCSLOTS REQUEST-FAILOVER",
        T0.saturating_add_ms(10_001),
    );
    assert_eq!(
        st(&m, &job),
        (
            JobState::Failed,
            "Unpaused before failover completed".into()
        )
    );
}

#[test]
fn granted_export_survives_link_loss_and_succeeds_on_topology() {
    let (mut m, mut topo, job) =
        export_to(JobState::ExportFailoverGranted, MigrationConfig::default());
    m.handle_link_closed(&topo, C, T0);
    assert_eq!(st(&m, &job).0, JobState::ExportFailoverGranted);
    for s in 0..10 {
        topo.set_slot_owner(slot(s), Some(id('t'))).unwrap();
    }
    m.handle_topology_changed(&topo, T0);
    assert_eq!(st(&m, &job), (JobState::Success, String::new()));
    assert!(effects(&mut m).contains(&MigrationOutput::UnpauseWrites));
}

#[test]
fn granted_export_unpauses_with_lost_writes_warning() {
    let (mut m, topo, job) = export_to(JobState::ExportFailoverGranted, MigrationConfig::default());
    m.handle_timeout(&topo, T0.saturating_add_ms(10_001));
    assert_eq!(
        st(&m, &job),
        (
            JobState::Failed,
            "Unpaused before migration completed (migration may have succeeded with lost writes)"
                .into()
        )
    );
}

#[test]
fn third_owner_fails_the_export() {
    let (mut m, mut topo, job) = export_to(JobState::Replicating, MigrationConfig::default());
    topo.set_slot_owner(slot(3), Some(id('u'))).unwrap();
    m.handle_topology_changed(&topo, T0);
    assert_eq!(
        st(&m, &job),
        (
            JobState::Failed,
            "Slots are no longer owned by myself".into()
        )
    );
}

#[test]
fn unexpected_messages_fail_the_job() {
    for (state, msg) in [
        (JobState::Replicating, "REQUEST-FAILOVER"),
        (JobState::FailoverPaused, "REQUEST-PAUSE"),
        (JobState::Replicating, "SNAPSHOT-EOF"),
        (JobState::Replicating, "PAUSED"),
        (JobState::Replicating, "FAILOVER-GRANTED"),
    ] {
        let (mut m, topo, job) = export_to(state, MigrationConfig::default());
        let r = cmd(
            &mut m,
            &topo,
            Origin::Conn(C),
            &format!("CLUSTER SYNCSLOTS {msg}"),
            T0,
        );
        assert_eq!(r, None);
        assert_eq!(
            st(&m, &job),
            (JobState::Failed, MSG_UNEXPECTED.into()),
            "{msg} in {state}"
        );
    }
    let (mut m, topo, job) = export_to(JobState::Replicating, MigrationConfig::default());
    assert_eq!(
        cmd(
            &mut m,
            &topo,
            Origin::Conn(C),
            "CLUSTER SYNCSLOTS BOGUS",
            T0
        ),
        None
    );
    assert_eq!(
        st(&m, &job),
        (JobState::Failed, "Unknown SYNCSLOTS subcommand used".into())
    );
}

#[test]
fn no_ack_for_repl_timeout_fails_and_acks_reset_it() {
    let (mut m, topo, job) = export_to(JobState::Replicating, MigrationConfig::default());
    m.handle_timeout(&topo, T0.saturating_add_ms(30_000));
    cmd(
        &mut m,
        &topo,
        Origin::Conn(C),
        "CLUSTER SYNCSLOTS ACK",
        T0.saturating_add_ms(30_000),
    );
    assert_eq!(
        m.job(JobKind::Export, &job).unwrap().last_ack(),
        T0.saturating_add_ms(30_000)
    );
    m.handle_timeout(&topo, T0.saturating_add_ms(90_000));
    assert_eq!(st(&m, &job).0, JobState::Replicating);
    m.handle_timeout(&topo, T0.saturating_add_ms(90_001));
    assert_eq!(st(&m, &job), (JobState::Failed, MSG_TIMED_OUT.into()));
}

#[test]
fn heartbeat_ack_every_second_but_not_while_snapshotting() {
    let (mut m, topo, _job) = export_to(JobState::Snapshotting, MigrationConfig::default());
    m.handle_timeout(&topo, T0.saturating_add_ms(5_000));
    assert!(!effects(&mut m)
        .iter()
        .any(|o| matches!(o, MigrationOutput::Request(MigrationRequest::Send { .. }))));
    let (mut m, topo, _job) = export_to(JobState::Replicating, MigrationConfig::default());
    m.handle_timeout(&topo, T0.saturating_add_ms(1_000));
    assert_eq!(
        effects(&mut m),
        vec![MigrationOutput::Request(MigrationRequest::Send {
            conn: C,
            message: SyncSlots::Ack
        })]
    );
    m.handle_timeout(&topo, T0.saturating_add_ms(1_500));
    assert!(effects(&mut m).is_empty());
    m.handle_timeout(&topo, T0.saturating_add_ms(2_000));
    assert_eq!(
        effects(&mut m),
        vec![MigrationOutput::Request(MigrationRequest::Send {
            conn: C,
            message: SyncSlots::Ack
        })]
    );
}

#[test]
fn output_buffer_limit_closes_the_link_and_fails() {
    let (mut m, topo, job) = export_to(JobState::Replicating, MigrationConfig::default());
    m.handle_output_buffer_limit(&topo, &job, T0);
    assert_eq!(st(&m, &job), (JobState::Failed, MSG_LOST_TARGET.into()));
    assert!(
        effects(&mut m).contains(&MigrationOutput::Request(MigrationRequest::Close {
            conn: C
        }))
    );
}

#[test]
fn flush_fails_exports_and_cancel_cancels_them() {
    let (mut m, topo, job) = export_to(JobState::FailoverPaused, MigrationConfig::default());
    m.handle_flush(&topo, T0);
    assert_eq!(st(&m, &job), (JobState::Failed, MSG_FLUSHED.into()));
    assert!(effects(&mut m).contains(&MigrationOutput::UnpauseWrites));

    let (mut m, topo, job) = export_to(JobState::FailoverPaused, MigrationConfig::default());
    assert_eq!(
        cmd(
            &mut m,
            &topo,
            Origin::Conn(ConnId(1)),
            "CLUSTER CANCELSLOTMIGRATIONS",
            T0
        ),
        Some(Reply::ok())
    );
    assert_eq!(st(&m, &job), (JobState::Cancelled, String::new()));
    let out = effects(&mut m);
    assert!(
        out.contains(&MigrationOutput::Request(MigrationRequest::Close {
            conn: C
        }))
    );
    assert!(out.contains(&MigrationOutput::UnpauseWrites));
    assert_eq!(
        cmd(
            &mut m,
            &topo,
            Origin::Conn(ConnId(1)),
            "CLUSTER CANCELSLOTMIGRATIONS",
            T0
        ),
        Some(Reply::Error("ERR No migrations ongoing".into()))
    );
}

#[test]
fn cancel_during_snapshot_aborts_it() {
    let (mut m, topo, job) = export_to(JobState::Snapshotting, MigrationConfig::default());
    m.cancel_slot_migrations(&topo, T0).unwrap();
    assert!(
        effects(&mut m).contains(&MigrationOutput::Request(MigrationRequest::AbortSnapshot {
            job
        }))
    );
}

#[test]
fn getslotmigrations_fields_in_order() {
    let (mut m, topo, job) = export_to(JobState::Replicating, MigrationConfig::default());
    m.handle_link_backlog(&topo, &job, 55, T0);
    let Reply::Array(items) = m.get_slot_migrations() else {
        panic!()
    };
    let Reply::Map(pairs) = &items[0] else {
        panic!()
    };
    let keys: Vec<String> = pairs
        .iter()
        .map(|(k, _)| match k {
            Reply::Bulk(b) => String::from_utf8(b.clone()).unwrap(),
            _ => panic!(),
        })
        .collect();
    assert_eq!(
        keys,
        [
            "name",
            "operation",
            "slot_ranges",
            "target_node",
            "source_node",
            "create_time",
            "last_update_time",
            "last_ack_time",
            "state",
            "message",
            "cow_size",
            "remaining_repl_size"
        ]
    );
    assert_eq!(pairs[1].1, Reply::bulk("EXPORT"));
    assert_eq!(pairs[2].1, Reply::bulk("0-9"));
    assert_eq!(pairs[3].1, Reply::bulk(ids('t')));
    assert_eq!(pairs[4].1, Reply::bulk(ids('s')));
    assert_eq!(pairs[5].1, Reply::Integer((T0.as_u64() / 1000) as i64));
    assert_eq!(pairs[8].1, Reply::bulk("replicating"));
    assert_eq!(pairs[9].1, Reply::bulk(""));
    assert_eq!(pairs[10].1, Reply::Integer(7));
    assert_eq!(pairs[11].1, Reply::Integer(55));
    let m2 = Migrations::new(
        MigrationConfig {
            report_remaining_repl_size: false,
            ..Default::default()
        },
        T0,
    );
    assert_eq!(m2.get_slot_migrations(), Reply::Array(vec![]));
}

#[test]
fn a_target_without_a_known_address_fails_the_job_at_once() {
    let mut topo = cluster('s');
    topo.node_mut(&id('t')).unwrap().ip = None;
    let mut m = Migrations::new(MigrationConfig::default(), T0);
    let names = m
        .migrate_slots(
            &topo,
            &argv(&format!(
                "CLUSTER MIGRATESLOTS SLOTSRANGE 0 9 NODE {}",
                ids('t')
            )),
            &mut rng(),
            T0,
        )
        .unwrap();
    let j = m.job(JobKind::Export, &names[0]).unwrap();
    assert_eq!(j.state(), JobState::Failed);
    assert_eq!(
        j.message(),
        Some("Unable to connect to target node: target node not found")
    );
    assert!(!effects(&mut m).iter().any(|o| matches!(
        o,
        MigrationOutput::Request(MigrationRequest::Connect { .. })
    )));
}

//! Import (target) side and every failure cause ending in rollback, through the two-sided
//! harness (sheet A.7 import table, A.10, A.11).
mod common;

use common::harness::Pair;
use common::*;
use ferrocluster_migration::*;
use ferrocluster_topology::{NodeFlags, Reply};

/// A pair with one job of slots 10-19 in `replicating`/`waiting-for-paused`.
fn streaming() -> (Pair, JobName) {
    let mut p = Pair::new(MigrationConfig::default());
    p.auto_backlog = None; // keep the source from pausing
    p.migrate(&format!("SLOTSRANGE 10 19 NODE {}", ids('t')));
    let job = p.last_job();
    p.connect(true);
    let tc = *p.t2s.keys().next().unwrap();
    p.s.m.handle_link_backlog(&p.s.topo, &job, 99, p.now);
    p.snapshot_done(true);
    assert_eq!(
        p.t.state(JobKind::Import, &job),
        Some(JobState::WaitingForPaused)
    );
    assert_eq!(
        p.s.state(JobKind::Export, &job),
        Some(JobState::WaitingToPause)
    );
    assert!(p.t.hidden.contains(slot(10)));
    assert_eq!(p.t.keys.get(&slot(10)), Some(&10));
    let _ = tc;
    (p, job)
}

/// The target rolled back: job failed with `msg`, staged keys dropped, slots revealed,
/// FINISH failed propagated (replica followed); the source still owns the slots.
fn assert_rolled_back(p: &Pair, job: &JobName, msg: &str) {
    let tj = p.t.m.job(JobKind::Import, job).unwrap();
    assert_eq!((tj.state(), tj.message()), (JobState::Failed, Some(msg)));
    assert_eq!(p.t.keys.get(&slot(10)), None, "staged keys not dropped");
    assert!(p.t.hidden.is_empty());
    assert!(p.finishes.contains(&(*job, FinishState::Failed)));
    assert_eq!(p.r.state(JobKind::Import, job), Some(JobState::Failed));
    assert!(p.r.hidden.is_empty());
    assert_eq!(p.s.topo.slot_owner(slot(10)), Some(&id('s')));
    assert_eq!(p.t.topo.slot_owner(slot(10)), Some(&id('s')));
    assert!(p.taken.is_empty());
    assert_eq!(p.paused_until, None);
    assert_eq!(p.s.keys.get(&slot(10)), Some(&10));
}

fn export_state(p: &Pair, job: &JobName) -> (JobState, String) {
    let j = p.s.m.job(JobKind::Export, job).unwrap();
    (j.state(), j.message().unwrap_or("").to_owned())
}

#[test]
fn cleanup_is_deferred_to_the_next_timeout() {
    let (mut p, job) = streaming();
    let tc = *p.t2s.keys().next().unwrap();
    p.t.m.handle_import_oom(&p.t.topo, tc, p.now);
    assert_eq!(p.t.state(JobKind::Import, &job), Some(JobState::CleaningUp));
    assert_eq!(p.t.m.poll_timeout(), Some(p.now));
    p.pump();
    p.advance(0);
    assert_rolled_back(&p, &job, "Ran out of memory (OOM) during slot import");
    assert_eq!(
        export_state(&p, &job),
        (JobState::Failed, MSG_LOST_TARGET.into())
    );
}

#[test]
fn link_loss_rolls_back() {
    let (mut p, job) = streaming();
    p.drop_links();
    p.advance(0);
    assert_rolled_back(&p, &job, MSG_LOST_SOURCE);
    assert_eq!(
        export_state(&p, &job),
        (JobState::Failed, MSG_LOST_TARGET.into())
    );
}

#[test]
fn source_output_buffer_overrun_rolls_back() {
    let (mut p, job) = streaming();
    p.s.m.handle_output_buffer_limit(&p.s.topo, &job, p.now);
    p.pump();
    p.advance(0);
    assert_rolled_back(&p, &job, MSG_LOST_SOURCE);
}

#[test]
fn flush_on_either_side_rolls_back() {
    let (mut p, job) = streaming();
    p.s.m.handle_flush(&p.s.topo, p.now);
    p.pump();
    p.advance(0);
    assert_rolled_back(&p, &job, MSG_LOST_SOURCE);
    assert_eq!(
        export_state(&p, &job),
        (JobState::Failed, MSG_FLUSHED.into())
    );

    let (mut p, job) = streaming();
    p.t.m.handle_flush(&p.t.topo, p.now);
    p.pump();
    p.advance(0);
    assert_rolled_back(&p, &job, MSG_FLUSHED);
    assert_eq!(
        export_state(&p, &job),
        (JobState::Failed, MSG_LOST_TARGET.into())
    );
}

#[test]
fn cancel_rolls_back_through_link_loss() {
    let (mut p, job) = streaming();
    let r = p.s.m.handle_cluster_command(
        &p.s.topo,
        Origin::Conn(ConnId(0)),
        &argv("CLUSTER CANCELSLOTMIGRATIONS"),
        &mut rng(),
        p.now,
    );
    assert_eq!(r, Some(Reply::ok()));
    p.pump();
    p.advance(0);
    assert_rolled_back(&p, &job, MSG_LOST_SOURCE);
    assert_eq!(export_state(&p, &job), (JobState::Cancelled, String::new()));
}

#[test]
fn apply_error_and_timeout_roll_back() {
    let (mut p, job) = streaming();
    let tc = *p.t2s.keys().next().unwrap();
    p.t.m.handle_import_apply_error(&p.t.topo, tc, p.now);
    p.pump();
    p.advance(0);
    assert_rolled_back(
        &p,
        &job,
        "Failed to process command during slot migration. Check logs for more information",
    );
}

#[test]
fn source_ownership_change_rolls_back() {
    let (mut p, job) = streaming();
    // A third node takes slot 12 (as seen by the target).
    p.t.topo.set_slot_owner(slot(12), Some(id('u'))).unwrap();
    p.t.m.handle_topology_changed(&p.t.topo, p.now);
    p.pump();
    p.advance(0);
    let tj = p.t.m.job(JobKind::Import, &job).unwrap();
    assert_eq!(
        tj.message(),
        Some("Slots are no longer owned by source node")
    );
    assert_eq!(tj.state(), JobState::Failed);
    assert!(p.t.hidden.is_empty());

    // Mixed owners (one slot mine) count as "no longer owned by source node" (Valkey
    // getClusterNodeBySlotRanges gives no single owner); slot 12's keys stay.
    let (mut p, job) = streaming();
    p.t.topo.set_slot_owner(slot(12), Some(id('t'))).unwrap();
    p.t.m.handle_topology_changed(&p.t.topo, p.now);
    p.pump();
    p.advance(0);
    let tj = p.t.m.job(JobKind::Import, &job).unwrap();
    assert_eq!(
        tj.message(),
        Some("Slots are no longer owned by source node")
    );
    assert_eq!(p.t.keys.get(&slot(12)), Some(&10));
    assert_eq!(p.t.keys.get(&slot(11)), None);

    let (mut p, job) = streaming();
    for s in 10..20 {
        p.t.topo.set_slot_owner(slot(s), Some(id('t'))).unwrap();
    }
    p.t.m.handle_topology_changed(&p.t.topo, p.now);
    p.pump();
    p.advance(0);
    let tj = p.t.m.job(JobKind::Import, &job).unwrap();
    assert_eq!(
        tj.message(),
        Some("Slots were unexpectedly assigned to myself during import")
    );
    assert_eq!(p.t.keys.get(&slot(15)), Some(&10));
}

#[test]
fn demoted_target_keeps_keys_promoted_replica_cleans_up() {
    let (mut p, job) = streaming();
    // The target's replica takes over: the old primary is demoted...
    p.t.topo.set_primary(&id('t'), id('r')).unwrap();
    p.t.topo.set_as_primary(&id('r')).unwrap();
    p.t.m.handle_topology_changed(&p.t.topo, p.now);
    p.pump();
    p.advance(0);
    let tj = p.t.m.job(JobKind::Import, &job).unwrap();
    assert_eq!(tj.state(), JobState::OccurringOnPrimary);
    assert!(tj.is_tracking_only());
    assert_eq!(
        p.t.keys.get(&slot(10)),
        Some(&10),
        "a demoted primary must not clean up"
    );
    assert!(p.t.hidden.contains(slot(10)));
    assert_eq!(
        export_state(&p, &job),
        (JobState::Failed, MSG_LOST_TARGET.into())
    );
    // ...and the promoted replica drops the staged keys and sends FINISH itself.
    p.r.keys.insert(slot(10), 10);
    p.r.topo.set_as_primary(&id('r')).unwrap();
    p.r.topo.set_primary(&id('t'), id('r')).unwrap();
    p.r.m.handle_promoted(&p.r.topo, p.now);
    p.pump();
    p.advance(0);
    let rj = p.r.m.job(JobKind::Import, &job).unwrap();
    assert_eq!(rj.state(), JobState::Failed);
    assert_eq!(rj.message(), Some("A failover occurred during slot import"));
    assert_eq!(p.r.keys.get(&slot(10)), None);
    assert!(p.r.hidden.is_empty());
    assert!(p.finishes.contains(&(job, FinishState::Failed)));
    assert!(p.r.topo.myself().flags.contains(NodeFlags::PRIMARY));
}

#[test]
fn restart_with_a_pending_import_fails_it_and_cleans_up() {
    let topo = cluster('t');
    let mut m = Migrations::new(MigrationConfig::default(), T0);
    let name = JobName::from_bytes(&[b'9'; 40]).unwrap();
    m.handle_before_load(&topo, T0);
    m.handle_loaded_slot_import(name, vec![range(10, 19)], T0);
    assert_eq!(
        m.job(JobKind::Import, &name).unwrap().state(),
        JobState::OccurringOnPrimary
    );
    m.handle_after_load(&topo, T0);
    m.handle_timeout(&topo, T0);
    let out = effects(&mut m);
    let mut slots = ferrocluster_slot::SlotSet::new();
    slots.insert_range(range(10, 19));
    assert_eq!(
        out,
        vec![
            MigrationOutput::Request(MigrationRequest::HideSlots {
                slots: slots.clone()
            }),
            MigrationOutput::Request(MigrationRequest::DropSlotKeys {
                slots: slots.clone()
            }),
            MigrationOutput::Request(MigrationRequest::RevealSlots { slots }),
            MigrationOutput::Request(MigrationRequest::Propagate {
                message: SyncSlots::Finish {
                    state: FinishState::Failed,
                    name,
                    message: Some("Process restarted".into())
                }
            }),
        ]
    );
    // A replica keeps its tracking job after loading; a full sync fails it.
    let rtopo = cluster('r');
    let mut r = Migrations::new(MigrationConfig::default(), T0);
    r.handle_loaded_slot_import(name, vec![range(10, 19)], T0);
    r.handle_after_load(&rtopo, T0);
    assert_eq!(
        r.job(JobKind::Import, &name).unwrap().state(),
        JobState::OccurringOnPrimary
    );
    r.handle_full_sync(&rtopo, T0);
    let j = r.job(JobKind::Import, &name).unwrap();
    assert_eq!(
        (j.state(), j.message()),
        (JobState::Failed, Some("Full resynchronization occurred"))
    );
    assert!(!effects(&mut r).iter().any(|o| matches!(
        o,
        MigrationOutput::Request(MigrationRequest::DropSlotKeys { .. })
    )));
}

#[test]
fn import_getslotmigrations_and_tracking_entry_shape() {
    let (p, job) = streaming();
    let Reply::Array(items) = p.t.m.get_slot_migrations() else {
        panic!()
    };
    let Reply::Map(pairs) = &items[0] else {
        panic!()
    };
    assert_eq!(pairs.len(), 12);
    assert_eq!(pairs[0].1, Reply::bulk(job.as_bytes()));
    assert_eq!(pairs[1].1, Reply::bulk("IMPORT"));
    assert_eq!(pairs[3].1, Reply::bulk(ids('t')));
    assert_eq!(pairs[4].1, Reply::bulk(ids('s')));
    assert_eq!(pairs[8].1, Reply::bulk("waiting-for-paused"));
    let Reply::Array(items) = p.r.m.get_slot_migrations() else {
        panic!()
    };
    let Reply::Map(pairs) = &items[0] else {
        panic!()
    };
    assert_eq!(
        pairs.len(),
        10,
        "tracking entries omit target_node and source_node"
    );
    assert_eq!(pairs[6].1, Reply::bulk("occurring-on-primary"));
}

#[test]
fn import_messages_in_the_wrong_state_fail() {
    let (mut p, job) = streaming();
    let tc = *p.t2s.keys().next().unwrap();
    let r = p.t.m.handle_cluster_command(
        &p.t.topo,
        Origin::Conn(tc),
        &argv("CLUSTER SYNCSLOTS FAILOVER-GRANTED"),
        &mut rng(),
        p.now,
    );
    assert_eq!(r, None);
    p.pump();
    p.advance(0);
    assert_rolled_back(&p, &job, MSG_UNEXPECTED);
}

#[test]
fn log_is_bounded_and_keeps_in_progress_jobs() {
    let cfg = MigrationConfig {
        log_max_len: 2,
        ..MigrationConfig::default()
    };
    let mut p = Pair::new(cfg);
    for i in 0..4u16 {
        p.migrate(&format!("SLOTSRANGE {i} {i} NODE {}", ids('t')));
        p.connect(false);
    }
    p.migrate(&format!("SLOTSRANGE 50 50 NODE {}", ids('t')));
    assert_eq!(p.s.m.jobs().len(), 5);
    p.advance(0);
    let states: Vec<JobState> = p.s.m.jobs().map(|j| j.state()).collect();
    assert_eq!(states, vec![JobState::Connecting, JobState::Failed]);
    // The newest failed one survives (oldest removed first).
    assert_eq!(p.s.m.jobs().nth(1).unwrap().ranges(), &[range(3, 3)]);
    let cfg0 = MigrationConfig {
        log_max_len: 0,
        ..MigrationConfig::default()
    };
    p.s.m.set_config(cfg0);
    p.advance(0);
    assert_eq!(p.s.m.jobs().len(), 1);
}

//! Two-sided end-to-end runs through the scripted host (sheet A.8 wire sequence).
mod common;

use common::harness::Pair;
use common::{id, ids, slot};
use ferrocluster_migration::{
    FinishState, JobKind, JobState, MigrationConfig, MigrationOutput, MigrationRequest, SyncSlots,
};
use ferrocluster_topology::Reply;

#[test]
fn happy_path_migration_runs_end_to_end() {
    let mut p = Pair::new(MigrationConfig::default());
    let r = p.migrate(&format!("SLOTSRANGE 10 19 NODE {}", ids('t')));
    assert_eq!(r, Reply::ok());
    let job = p.last_job();
    assert_eq!(p.s.state(JobKind::Export, &job), Some(JobState::Connecting));

    p.connect(true);
    // ESTABLISH accepted, first ACK sent, snapshot started.
    assert_eq!(
        p.s.state(JobKind::Export, &job),
        Some(JobState::Snapshotting)
    );
    assert_eq!(
        p.t.state(JobKind::Import, &job),
        Some(JobState::ReceivingSnapshot)
    );
    assert!(p.t.hidden.contains(slot(10)) && p.t.hidden.contains(slot(19)));
    // The replica tracks the import and hides the staged keys too.
    assert_eq!(
        p.r.state(JobKind::Import, &job),
        Some(JobState::OccurringOnPrimary)
    );
    assert!(p.r.hidden.contains(slot(15)));

    p.snapshot_done(true);
    // SNAPSHOT-EOF -> REQUEST-PAUSE -> pause -> PAUSED -> REQUEST-FAILOVER -> GRANTED.
    assert_eq!(
        p.s.state(JobKind::Export, &job),
        Some(JobState::ExportFailoverGranted)
    );
    assert_eq!(
        p.t.state(JobKind::Import, &job),
        Some(JobState::ImportFailoverGranted)
    );
    assert!(p.paused_until.is_some());
    assert_eq!(p.t.keys.get(&slot(12)), Some(&10));

    // Target's before-sleep: takeover.
    p.advance(0);
    assert_eq!(p.t.state(JobKind::Import, &job), Some(JobState::Success));
    assert_eq!(p.taken, vec![job]);
    assert_eq!(p.t.topo.slot_owner(slot(10)), Some(&id('t')));
    assert!(!p.t.hidden.contains(slot(10)));
    assert_eq!(p.finishes, vec![(job, FinishState::Success)]);
    assert_eq!(p.r.state(JobKind::Import, &job), Some(JobState::Success));
    assert!(p.r.hidden.is_empty());
    // Source still paused until gossip shows the new owner.
    assert_eq!(
        p.s.state(JobKind::Export, &job),
        Some(JobState::ExportFailoverGranted)
    );
    assert!(p.paused_until.is_some());

    p.gossip();
    assert_eq!(p.s.state(JobKind::Export, &job), Some(JobState::Success));
    assert_eq!(p.paused_until, None);
    assert_eq!(p.s.topo.slot_owner(slot(19)), Some(&id('t')));
    assert_eq!(p.s.keys.get(&slot(10)), None);
    assert_eq!(p.t.keys.get(&slot(10)), Some(&10));
    // The messages the target sent, in order.
    let sent: Vec<SyncSlots> =
        p.t.log
            .iter()
            .filter_map(|o| match o {
                MigrationOutput::Request(MigrationRequest::Send { message, .. }) => {
                    Some(message.clone())
                }
                _ => None,
            })
            .collect();
    assert_eq!(
        sent,
        vec![SyncSlots::RequestPause, SyncSlots::RequestFailover]
    );
}

#[test]
fn backlog_delays_the_pause_until_drained() {
    let mut p = Pair::new(MigrationConfig::default());
    p.auto_backlog = None;
    p.migrate(&format!("SLOTSRANGE 0 0 NODE {}", ids('t')));
    let job = p.last_job();
    p.connect(true);
    p.s.m.handle_link_backlog(&p.s.topo, &job, 500, p.now);
    p.snapshot_done(true);
    assert_eq!(
        p.s.state(JobKind::Export, &job),
        Some(JobState::WaitingToPause)
    );
    assert_eq!(p.paused_until, None);
    p.backlog(1);
    assert_eq!(
        p.s.state(JobKind::Export, &job),
        Some(JobState::WaitingToPause)
    );
    p.backlog(0);
    assert_eq!(
        p.s.state(JobKind::Export, &job),
        Some(JobState::ExportFailoverGranted)
    );
}

#[test]
fn heartbeats_keep_a_long_snapshot_alive() {
    let mut p = Pair::new(MigrationConfig::default());
    p.migrate(&format!("SLOTSRANGE 0 5 NODE {}", ids('t')));
    let job = p.last_job();
    p.connect(true);
    // The snapshot takes 3 minutes: snapshot data keeps reaching the target and the target
    // keeps ACKing, so neither side times out (sheet A.8).
    let tc = *p.t2s.keys().next().unwrap();
    for _ in 0..18 {
        p.advance(10_000);
        p.t.m.handle_import_data(tc, p.now);
    }
    assert_eq!(
        p.s.state(JobKind::Export, &job),
        Some(JobState::Snapshotting)
    );
    assert_eq!(
        p.t.state(JobKind::Import, &job),
        Some(JobState::ReceivingSnapshot)
    );
    p.snapshot_done(true);
    p.advance(0);
    p.gossip();
    assert_eq!(p.s.state(JobKind::Export, &job), Some(JobState::Success));
}

#[test]
fn silent_snapshot_times_out_on_the_target_and_rolls_back() {
    let mut p = Pair::new(MigrationConfig::default());
    p.migrate(&format!("SLOTSRANGE 0 5 NODE {}", ids('t')));
    let job = p.last_job();
    p.connect(true);
    p.advance(60_001);
    let tj = p.t.m.job(JobKind::Import, &job).unwrap();
    assert_eq!(tj.state(), JobState::Failed);
    assert_eq!(tj.message(), Some(ferrocluster_migration::MSG_TIMED_OUT));
    assert_eq!(p.s.state(JobKind::Export, &job), Some(JobState::Failed));
    assert!(p.t.hidden.is_empty());
    assert_eq!(p.s.topo.slot_owner(slot(0)), Some(&id('s')));
}

#[test]
fn two_jobs_to_one_target_snapshot_one_at_a_time() {
    let mut p = Pair::new(MigrationConfig::default());
    let r = p.migrate(&format!(
        "SLOTSRANGE 0 9 NODE {} SLOTSRANGE 20 29 NODE {}",
        ids('t'),
        ids('t')
    ));
    assert_eq!(r, Reply::ok());
    p.connect(true);
    p.connect(true);
    let names: Vec<_> = p.s.m.jobs().map(|j| *j.name()).collect();
    let states: Vec<_> = names
        .iter()
        .map(|n| p.s.state(JobKind::Export, n).unwrap())
        .collect();
    assert!(states.contains(&JobState::Snapshotting));
    assert!(states.contains(&JobState::WaitingToSnapshot));
    p.snapshot_done(true);
    p.snapshot_done(true);
    p.advance(0);
    p.gossip();
    for n in &names {
        assert_eq!(p.s.state(JobKind::Export, n), Some(JobState::Success));
        assert_eq!(p.t.state(JobKind::Import, n), Some(JobState::Success));
    }
    assert_eq!(p.t.topo.slot_owner(slot(25)), Some(&id('t')));
    assert_eq!(p.t.topo.slot_owner(slot(15)), Some(&id('s')));
}

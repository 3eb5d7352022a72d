//! The [`Migrations`] manager: the job list, finishing jobs (rollback), the cron
//! ([`Migrations::handle_timeout`]), the write pause and the output queue.

use crate::config::MigrationConfig;
use crate::job::Job;
use crate::message::{FinishState, SyncSlots};
use crate::output::{MigrationOutput, MigrationRequest};
use crate::types::{ConnId, JobKind, JobName, JobState};
use ferrocluster_slot::{Slot, SlotSet};
use ferrocluster_topology::{Millis, Topology};
use std::collections::VecDeque;

/// Status message of an export whose link closed (sheet A.10).
pub const MSG_LOST_TARGET: &str =
    "Connection lost to target. Check CLUSTER GETSLOTMIGRATIONS on the target node for more information.";
/// Status message of an import whose link closed (sheet A.4, A.10).
pub const MSG_LOST_SOURCE: &str =
    "Connection lost to source. Check CLUSTER GETSLOTMIGRATIONS on the source node for more information.";
/// Inactivity timeout message (sheet A.8).
pub const MSG_TIMED_OUT: &str = "Timed out after too long with no interaction";
/// FLUSHDB/FLUSHALL message (sheet A.17).
pub const MSG_FLUSHED: &str = "Data was flushed";
/// A SYNCSLOTS message arrived in the wrong state.
pub const MSG_UNEXPECTED: &str = "Unexpected state machine transition";

/// All slot migration jobs of one node and their Sans-IO driver (sheet A).
///
/// Inputs are `handle_*` methods taking the shared [`Topology`] (read only: ownership checks,
/// validation, whether myself is a primary) and `now`; effects are queued as
/// [`MigrationOutput`]s drained with [`Migrations::poll_output`];
/// [`Migrations::poll_timeout`] names the next instant [`Migrations::handle_timeout`] is
/// due. Time that goes backwards is clamped to the latest `now` seen. Jobs are kept newest
/// first, as GETSLOTMIGRATIONS lists them.
#[derive(Debug, Clone)]
pub struct Migrations {
    pub(crate) config: MigrationConfig,
    pub(crate) jobs: VecDeque<Job>,
    out: VecDeque<MigrationOutput>,
    pub(crate) now: Millis,
    /// The pause the host was last told about.
    announced_pause: Option<Millis>,
    /// The export job whose snapshot runs (only one at a time, sheet A.6).
    pub(crate) snapshot_running: Option<JobName>,
    /// Another child process (BGSAVE, AOF rewrite) is active on the host.
    pub(crate) child_active: bool,
    /// Work deferred to the next `handle_timeout` (Valkey's before-sleep).
    pub(crate) deferred: bool,
}

impl Migrations {
    /// An empty manager.
    pub fn new(config: MigrationConfig, now: Millis) -> Migrations {
        Migrations {
            config,
            jobs: VecDeque::new(),
            out: VecDeque::new(),
            now,
            announced_pause: None,
            snapshot_running: None,
            child_active: false,
            deferred: false,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &MigrationConfig {
        &self.config
    }

    /// Replaces the configuration (CONFIG SET); takes effect at the next input.
    pub fn set_config(&mut self, config: MigrationConfig) {
        self.config = config;
    }

    // ----- queries -----

    /// Every job, newest first (the GETSLOTMIGRATIONS order).
    pub fn jobs(&self) -> impl ExactSizeIterator<Item = &Job> {
        self.jobs.iter()
    }

    /// The newest job of this kind with this name.
    pub fn job(&self, kind: JobKind, name: &JobName) -> Option<&Job> {
        self.jobs.iter().find(|j| j.kind == kind && j.name == *name)
    }

    /// Whether an unfinished import job covers `slot` (Valkey `clusterIsSlotImporting`).
    pub fn is_slot_importing(&self, slot: Slot) -> bool {
        self.unfinished(JobKind::Import)
            .any(|j| j.slots.contains(slot))
    }

    /// Whether an unfinished export job covers `slot` (Valkey `clusterIsSlotExporting`).
    pub fn is_slot_exporting(&self, slot: Slot) -> bool {
        self.unfinished(JobKind::Export)
            .any(|j| j.slots.contains(slot))
    }

    /// Whether any import job is unfinished (blocks legacy SETSLOT, sheet A.17).
    pub fn is_any_importing(&self) -> bool {
        self.unfinished(JobKind::Import).next().is_some()
    }

    /// Whether any export job is unfinished.
    pub fn is_any_exporting(&self) -> bool {
        self.unfinished(JobKind::Export).next().is_some()
    }

    /// Whether the export covering `slot` has granted the failover (Valkey
    /// `clusterSlotFailoverGranted`).
    pub fn is_failover_granted(&self, slot: Slot) -> bool {
        self.jobs
            .iter()
            .filter(|j| j.kind == JobKind::Export && j.state.is_in_progress())
            .find(|j| j.slots.contains(slot))
            .is_some_and(|j| j.state == JobState::ExportFailoverGranted)
    }

    /// The in-progress job bound to this connection.
    pub fn job_for_conn(&self, conn: ConnId) -> Option<&Job> {
        self.jobs
            .iter()
            .find(|j| j.conn == Some(conn) && j.state.is_in_progress())
    }

    /// Slots whose keys are staged (hidden) by an unfinished import.
    pub fn hidden_slots(&self) -> SlotSet {
        let mut s = SlotSet::new();
        for j in self.unfinished(JobKind::Import) {
            s = s.union(&j.slots);
        }
        s
    }

    fn unfinished(&self, kind: JobKind) -> impl Iterator<Item = &Job> {
        self.jobs
            .iter()
            .filter(move |j| j.kind == kind && !j.state.is_terminal())
    }

    // ----- outputs and timers -----

    /// The next request for the host, in order; `None` when drained.
    pub fn poll_output(&mut self) -> Option<MigrationOutput> {
        self.out.pop_front()
    }

    /// The instant [`Migrations::handle_timeout`] must next be called, or `None` when no job
    /// needs time. Calling it early or repeatedly is harmless.
    pub fn poll_timeout(&self) -> Option<Millis> {
        let c = &self.config;
        let mut best: Option<Millis> = None;
        let mut at = |t: Millis| best = Some(best.map_or(t, |b| b.min(t)));
        if self.deferred || self.jobs.len() > c.log_max_len && self.any_trimmable() {
            at(self.now);
        }
        for j in &self.jobs {
            if !j.state.is_in_progress() {
                continue;
            }
            let watched = !matches!(
                j.state,
                JobState::ExportFailoverGranted | JobState::OccurringOnPrimary
            );
            if watched {
                let last = match j.kind {
                    JobKind::Export => j.last_ack,
                    JobKind::Import => j.last_interaction,
                };
                at(last.saturating_add_ms(c.repl_timeout_ms.saturating_add(1)));
            }
            if j.state.can_send_ack() && j.conn.is_some() {
                at(j.last_ack_sent
                    .map_or(self.now, |t| t.saturating_add_ms(c.ack_interval_ms)));
            }
            match j.state {
                JobState::FailoverPaused | JobState::ExportFailoverGranted => {
                    at(j.pause_until.map_or(self.now, |t| t.saturating_add_ms(1)));
                }
                JobState::WaitingToSnapshot | JobState::WaitingToPause => {
                    at(self.now.saturating_add_ms(c.cron_interval_ms));
                }
                _ => {}
            }
        }
        best
    }

    /// The cron (Valkey `clusterSlotMigrationCron` + before-sleep): runs deferred takeovers
    /// and cleanups, fails jobs without interaction for more than `repl-timeout`, retries
    /// waiting states, ends lapsed pauses, checks granted exports against the topology,
    /// sends heartbeat ACKs and trims the log to `cluster-slot-migration-log-max-len`.
    pub fn handle_timeout(&mut self, topo: &Topology, now: Millis) {
        self.tick(now);
        self.deferred = false;
        let names: Vec<(JobKind, JobName)> = self.jobs.iter().map(|j| (j.kind, j.name)).collect();
        for (idx, _) in names.iter().enumerate() {
            let j = &self.jobs[idx];
            let watched = j.state.is_in_progress()
                && !matches!(
                    j.state,
                    JobState::ExportFailoverGranted | JobState::OccurringOnPrimary
                );
            if watched {
                let last = match j.kind {
                    JobKind::Export => j.last_ack,
                    JobKind::Import => j.last_interaction,
                };
                if self.now.since(last) > self.config.repl_timeout_ms {
                    self.finish(idx, JobState::Failed, Some(MSG_TIMED_OUT), topo, false);
                    continue;
                }
            }
            self.proceed(idx, topo);
            let j = &self.jobs[idx];
            if j.state.is_in_progress() && j.state.can_send_ack() {
                if let Some(conn) = j.conn {
                    let due = j
                        .last_ack_sent
                        .is_none_or(|t| self.now.since(t) >= self.config.ack_interval_ms);
                    if due {
                        self.jobs[idx].last_ack_sent = Some(self.now);
                        self.push(MigrationOutput::Request(MigrationRequest::Send {
                            conn,
                            message: SyncSlots::Ack,
                        }));
                    }
                }
            }
        }
        self.trim_log(self.config.log_max_len);
        self.sync_pause();
    }

    // ----- internals shared by the handlers -----

    pub(crate) fn tick(&mut self, now: Millis) {
        if now > self.now {
            self.now = now;
        }
    }

    pub(crate) fn push(&mut self, o: MigrationOutput) {
        self.out.push_back(o);
    }

    pub(crate) fn index_of(&self, kind: JobKind, name: &JobName) -> Option<usize> {
        self.jobs
            .iter()
            .position(|j| j.kind == kind && j.name == *name)
    }

    pub(crate) fn index_of_conn(&self, conn: ConnId) -> Option<usize> {
        self.jobs
            .iter()
            .position(|j| j.conn == Some(conn) && j.state.is_in_progress())
    }

    pub(crate) fn set_state(&mut self, idx: usize, to: JobState) {
        let now = self.now;
        let j = &mut self.jobs[idx];
        let from = j.state;
        j.state = to;
        j.last_update = now;
        let (job, kind) = (j.name, j.kind);
        self.push(MigrationOutput::StateChanged {
            job,
            kind,
            from,
            to,
        });
    }

    /// Valkey `resetSlotMigrationJob`: close the link (if any) and stop its snapshot.
    pub(crate) fn reset_link(&mut self, idx: usize) {
        if let Some(conn) = self.jobs[idx].conn.take() {
            self.push(MigrationOutput::Request(MigrationRequest::Close { conn }));
        }
        let name = self.jobs[idx].name;
        if self.jobs[idx].kind == JobKind::Export && self.snapshot_running == Some(name) {
            self.snapshot_running = None;
            self.push(MigrationOutput::Request(MigrationRequest::AbortSnapshot {
                job: name,
            }));
        }
    }

    /// Valkey `finishSlotMigrationJob`: record the message, drop the job's pause, close its
    /// link; a non-successful import on a primary goes through `cleaning-up` first (unless
    /// `loading`); a finished import reveals its slots and, on a primary, propagates FINISH.
    pub(crate) fn finish(
        &mut self,
        idx: usize,
        state: JobState,
        message: Option<&str>,
        topo: &Topology,
        loading: bool,
    ) {
        self.finish_inner(idx, state, message, topo, loading, true);
    }

    pub(crate) fn finish_inner(
        &mut self,
        idx: usize,
        state: JobState,
        message: Option<&str>,
        topo: &Topology,
        loading: bool,
        propagate: bool,
    ) {
        let primary = topo.myself().is_primary();
        let j = &mut self.jobs[idx];
        j.message = message.map(str::to_owned);
        if j.kind == JobKind::Export {
            j.pause_until = None;
        }
        let cleanup = j.kind == JobKind::Import
            && primary
            && j.state != JobState::CleaningUp
            && !loading
            && state != JobState::Success;
        let mut to = state;
        if cleanup {
            j.post_cleanup = state;
            to = JobState::CleaningUp;
            self.deferred = true;
        }
        self.set_state(idx, to);
        self.reset_link(idx);
        if cleanup {
            return;
        }
        let j = &self.jobs[idx];
        if j.kind == JobKind::Import {
            let (slots, name, msg) = (j.slots.clone(), j.name, j.message.clone());
            self.push(MigrationOutput::Request(MigrationRequest::RevealSlots {
                slots,
            }));
            if primary && propagate {
                let state = if to == JobState::Success {
                    FinishState::Success
                } else {
                    FinishState::Failed
                };
                self.push(MigrationOutput::Request(MigrationRequest::Propagate {
                    message: SyncSlots::Finish {
                        state,
                        name,
                        message: msg,
                    },
                }));
            }
        }
    }

    /// Valkey `proceedWithSlotMigration` for the states that act on their own.
    pub(crate) fn proceed(&mut self, idx: usize, topo: &Topology) {
        let state = self.jobs[idx].state;
        match state {
            JobState::ImportFailoverGranted => {
                let j = &self.jobs[idx];
                let (job, slots) = (j.name, j.slots.clone());
                self.push(MigrationOutput::TakeOwnership { job, slots });
                self.finish(idx, JobState::Success, None, topo, false);
            }
            JobState::CleaningUp => {
                let me = topo.myself_id();
                let j = &self.jobs[idx];
                let drop: SlotSet = j
                    .slots
                    .iter()
                    .filter(|s| topo.slot_owner(*s) != Some(me))
                    .collect();
                let (post, msg) = (j.post_cleanup, j.message.clone());
                if !drop.is_empty() {
                    self.push(MigrationOutput::Request(MigrationRequest::DropSlotKeys {
                        slots: drop,
                    }));
                }
                self.finish(idx, post, msg.as_deref(), topo, false);
            }
            JobState::WaitingToSnapshot => self.try_start_snapshot(idx),
            JobState::WaitingToPause if !self.try_pause(idx) => {
                if let Some(conn) = self.jobs[idx].conn {
                    let job = self.jobs[idx].name;
                    self.push(MigrationOutput::Request(MigrationRequest::QueryBacklog {
                        job,
                        conn,
                    }));
                }
            }
            JobState::FailoverPaused if self.pause_lapsed(idx) => {
                self.finish(
                    idx,
                    JobState::Failed,
                    Some("Timed out before streaming completed"),
                    topo,
                    false,
                );
            }
            JobState::ExportFailoverGranted => {
                if self.pause_lapsed(idx) {
                    self.finish(
                        idx,
                        JobState::Failed,
                        Some("Unpaused before migration completed (migration may have succeeded with lost writes)"),
                        topo,
                        false,
                    );
                } else {
                    self.check_export_ownership(idx, topo);
                }
            }
            _ => {}
        }
    }

    /// Valkey `isSlotExportPauseTimedOut`.
    pub(crate) fn pause_lapsed(&self, idx: usize) -> bool {
        self.jobs[idx].pause_until.is_none_or(|t| t < self.now)
    }

    /// Tells the host about the pause every job's deadline adds up to.
    pub(crate) fn sync_pause(&mut self) {
        let mut until: Option<Millis> = None;
        let mut slots = SlotSet::new();
        for j in &self.jobs {
            if let Some(t) = j.pause_until {
                until = Some(until.map_or(t, |u| u.max(t)));
                slots = slots.union(&j.slots);
            }
        }
        if until != self.announced_pause {
            self.announced_pause = until;
            self.push(match until {
                Some(until) => MigrationOutput::PauseWrites { until, slots },
                None => MigrationOutput::UnpauseWrites,
            });
        }
    }

    /// Valkey `clusterCleanupSlotMigrationLog`: drop finished jobs oldest-first while the
    /// log is longer than `max_len`.
    pub(crate) fn trim_log(&mut self, max_len: usize) {
        let mut i = self.jobs.len();
        while self.jobs.len() > max_len && i > 0 {
            i -= 1;
            if self.jobs[i].state.is_terminal() {
                self.jobs.remove(i);
            }
        }
    }

    fn any_trimmable(&self) -> bool {
        self.jobs.iter().any(|j| j.state.is_terminal())
    }
}

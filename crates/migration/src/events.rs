//! Host events that concern both sides or the import side: link loss, FLUSH, topology
//! changes, OOM, role changes, RDB/AOF loading (sheet A.7, A.10, A.11, A.16, A.17).

use crate::job::Job;
use crate::manager::{Migrations, MSG_FLUSHED, MSG_LOST_SOURCE, MSG_LOST_TARGET};
use crate::output::{MigrationOutput, MigrationRequest};
use crate::types::{ConnId, JobKind, JobName, JobState};
use ferrocluster_slot::SlotRange;
use ferrocluster_topology::{Millis, Topology};

impl Migrations {
    /// A data connection closed (peer closed it, I/O error, client kill, the host dropped
    /// it). An in-progress job on it fails with `Connection lost to target. ...` (export) or
    /// `Connection lost to source. ...` (import; the target then cleans up its staged keys)
    /// — except an export in `failover-granted`, which stays paused until the topology shows
    /// the outcome or the pause lapses (the takeover may already have happened).
    pub fn handle_link_closed(&mut self, topo: &Topology, conn: ConnId, now: Millis) {
        self.tick(now);
        let Some(idx) = self.jobs.iter().position(|j| j.conn == Some(conn)) else {
            return;
        };
        self.jobs[idx].conn = None;
        let j = &self.jobs[idx];
        if !j.state.is_in_progress()
            || j.tracking_only
            || j.state == JobState::ExportFailoverGranted
        {
            self.sync_pause();
            return;
        }
        let msg = match (j.kind, j.state) {
            (JobKind::Export, JobState::ReadingAuthResponse) => {
                "Target node did not respond to AUTH command"
            }
            (JobKind::Export, _) => MSG_LOST_TARGET,
            (JobKind::Import, _) => MSG_LOST_SOURCE,
        };
        self.finish(idx, JobState::Failed, Some(msg), topo, false);
        self.sync_pause();
    }

    /// FLUSHDB / FLUSHALL (sync or async) ran on this node: every in-progress job fails with
    /// `Data was flushed` (sheet A.17).
    pub fn handle_flush(&mut self, topo: &Topology, now: Millis) {
        self.tick(now);
        for idx in 0..self.jobs.len() {
            if self.jobs[idx].state.is_in_progress() {
                self.finish(idx, JobState::Failed, Some(MSG_FLUSHED), topo, false);
            }
        }
        self.sync_pause();
    }

    /// The topology changed (slot owners, my role). Exports: all slots the target's →
    /// `success`; some slot neither mine nor... → `Slots are no longer owned by myself`.
    /// Imports on a primary: slots now mine → `Slots were unexpectedly assigned to myself
    /// during import`; not all the source's → `Slots are no longer owned by source node`.
    /// Imports when myself is no longer a primary: link closed, job becomes tracking-only
    /// `occurring-on-primary` without cleanup (the promoted replica cleans up, sheet A.11).
    /// Lifts the pause when no job holds one.
    pub fn handle_topology_changed(&mut self, topo: &Topology, now: Millis) {
        self.tick(now);
        let primary = topo.myself().is_primary();
        for idx in 0..self.jobs.len() {
            let j = &self.jobs[idx];
            if !j.state.is_in_progress() {
                continue;
            }
            match j.kind {
                JobKind::Export => self.check_export_ownership(idx, topo),
                JobKind::Import if !primary => {
                    if j.state != JobState::OccurringOnPrimary {
                        self.set_state(idx, JobState::OccurringOnPrimary);
                        self.jobs[idx].tracking_only = true;
                        self.reset_link(idx);
                    }
                }
                JobKind::Import => {
                    let Some(source) = j.source else { continue };
                    let owner = crate::export::single_owner(topo, j);
                    if owner == Some(source) {
                        continue;
                    }
                    let msg = if owner.as_ref() == Some(topo.myself_id()) {
                        "Slots were unexpectedly assigned to myself during import"
                    } else {
                        "Slots are no longer owned by source node"
                    };
                    self.finish(idx, JobState::Failed, Some(msg), topo, false);
                }
            }
        }
        self.sync_pause();
    }

    fn import_conn_idx(&self, conn: ConnId) -> Option<usize> {
        self.index_of_conn(conn)
            .filter(|&i| self.jobs[i].kind == JobKind::Import)
    }

    /// A command (data or SYNCSLOTS) arrived on an import link: refreshes the inactivity
    /// timer (`repl-timeout` is measured from the last command received on the target).
    pub fn handle_import_data(&mut self, conn: ConnId, now: Millis) {
        self.tick(now);
        if let Some(idx) = self.import_conn_idx(conn) {
            self.jobs[idx].last_interaction = self.now;
        }
    }

    /// Applying a command from the import link hit OOM: the import fails with `Ran out of
    /// memory (OOM) during slot import` and is cleaned up.
    pub fn handle_import_oom(&mut self, topo: &Topology, conn: ConnId, now: Millis) {
        self.fail_import_conn(
            topo,
            conn,
            now,
            "Ran out of memory (OOM) during slot import",
        );
    }

    /// Applying a command from the import link produced an error reply (e.g. ACL NOPERM):
    /// the import fails with `Failed to process command during slot migration. Check logs
    /// for more information`.
    pub fn handle_import_apply_error(&mut self, topo: &Topology, conn: ConnId, now: Millis) {
        self.fail_import_conn(
            topo,
            conn,
            now,
            "Failed to process command during slot migration. Check logs for more information",
        );
    }

    fn fail_import_conn(&mut self, topo: &Topology, conn: ConnId, now: Millis, msg: &str) {
        self.tick(now);
        if let Some(idx) = self.import_conn_idx(conn) {
            self.finish(idx, JobState::Failed, Some(msg), topo, false);
        }
        self.sync_pause();
    }

    fn fail_imports(&mut self, topo: &Topology, msg: &str) {
        for idx in 0..self.jobs.len() {
            let j = &self.jobs[idx];
            if j.kind == JobKind::Import && j.state.is_in_progress() {
                self.finish(idx, JobState::Failed, Some(msg), topo, false);
            }
        }
    }

    /// This node was promoted to primary (the topology already says so): every in-progress
    /// import — tracking ones included — fails with `A failover occurred during slot
    /// import`; as a primary it now drops the staged keys and propagates FINISH (sheet A.11).
    pub fn handle_promoted(&mut self, topo: &Topology, now: Millis) {
        self.tick(now);
        self.fail_imports(topo, "A failover occurred during slot import");
        self.sync_pause();
    }

    /// This replica did a full resynchronization with a primary: its tracking imports fail
    /// with `Full resynchronization occurred` (the new RDB recreates pending ones).
    pub fn handle_full_sync(&mut self, topo: &Topology, now: Millis) {
        self.tick(now);
        self.fail_imports(topo, "Full resynchronization occurred");
        self.sync_pause();
    }

    /// An RDB is about to be loaded: imports fail with `A new RDB is being loaded`, then the
    /// whole log is emptied (sheet A.16).
    pub fn handle_before_load(&mut self, topo: &Topology, now: Millis) {
        self.tick(now);
        self.fail_imports(topo, "A new RDB is being loaded");
        self.trim_log(0);
        self.sync_pause();
    }

    /// The loader met a slot-import section (RDB opcode 243: job name and ranges): a
    /// tracking-only import in `occurring-on-primary` is added (at the oldest end, as Valkey
    /// appends it) and its slots hidden. Names must be 40 bytes; ranges as loaded.
    pub fn handle_loaded_slot_import(
        &mut self,
        name: JobName,
        ranges: Vec<SlotRange>,
        now: Millis,
    ) {
        self.tick(now);
        let mut job = Job::new(JobKind::Import, name, ranges, self.now);
        job.state = JobState::OccurringOnPrimary;
        job.tracking_only = true;
        let slots = job.slots.clone();
        self.jobs.push_back(job);
        self.push(MigrationOutput::Request(MigrationRequest::HideSlots {
            slots,
        }));
    }

    /// Loading (RDB or AOF) finished. On a primary every in-progress import fails with
    /// `Process restarted` and is cleaned up; a replica keeps its tracking jobs so a partial
    /// resync can still deliver the primary's FINISH.
    pub fn handle_after_load(&mut self, topo: &Topology, now: Millis) {
        self.tick(now);
        if topo.myself().is_primary() {
            self.fail_imports(topo, "Process restarted");
        }
        self.sync_pause();
    }
}

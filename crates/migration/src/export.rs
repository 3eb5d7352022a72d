//! Export (source) side host events (sheet A.7 export table, A.8, A.9).

use crate::config::FAILOVER_GRANT_PAUSE_MS;
use crate::manager::{Migrations, MSG_UNEXPECTED};
use crate::message::SyncSlots;
use crate::output::{MigrationOutput, MigrationRequest};
use crate::types::{ConnId, JobKind, JobName, JobState};
use ferrocluster_topology::{Millis, Topology};

/// The reply to the source's AUTH (sheet A.10 messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthReply {
    /// `+OK` (any `+` line).
    Ok,
    /// An error line (e.g. `-WRONGPASS ...`): fails with `Failed to AUTH to target node: <line>`.
    Rejected(String),
    /// The connection produced no reply: fails with `Target node did not respond to AUTH command`.
    NoResponse,
    /// Writing AUTH failed: fails with `Failed to send AUTH command to target node: <err>`.
    WriteFailed(String),
}

/// How the snapshot of an export ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotResult {
    /// Written completely (including `SNAPSHOT-EOF`); the copy-on-write bytes of the fork
    /// (0 if the host has none), shown as `cow_size`.
    Done {
        /// Copy-on-write bytes.
        cow_bytes: u64,
    },
    /// The producer failed or was killed: fails with `Failed to perform snapshot`.
    Failed,
}

impl Migrations {
    fn export_idx(&self, job: &JobName) -> Option<usize> {
        self.index_of(JobKind::Export, job)
    }

    /// The connection requested by [`MigrationRequest::Connect`] is up: it is bound to the
    /// job as `conn`; the job sends AUTH (when `primaryauth` is set) or ESTABLISH. Ignored
    /// unless the job is `connecting`.
    pub fn handle_connected(&mut self, topo: &Topology, job: &JobName, conn: ConnId, now: Millis) {
        self.tick(now);
        let Some(idx) = self.export_idx(job) else {
            return;
        };
        if self.jobs[idx].state != JobState::Connecting {
            return;
        }
        self.jobs[idx].conn = Some(conn);
        if self.config.auth_to_target {
            self.set_state(idx, JobState::SendingAuth);
            self.push(MigrationOutput::Request(MigrationRequest::SendAuth {
                job: *job,
                conn,
            }));
            self.set_state(idx, JobState::ReadingAuthResponse);
        } else {
            self.send_establish(idx);
        }
        let _ = topo;
        self.sync_pause();
    }

    fn send_establish(&mut self, idx: usize) {
        self.set_state(idx, JobState::SendingEstablish);
        let j = &self.jobs[idx];
        if let Some(conn) = j.conn {
            let message = SyncSlots::Establish {
                source: j.source,
                name: j.name,
                ranges: j.ranges.clone(),
            };
            self.push(MigrationOutput::Request(MigrationRequest::Send {
                conn,
                message,
            }));
        }
        self.set_state(idx, JobState::ReadingEstablishResponse);
    }

    /// The connection could not be made: the job fails with `Unable to connect to target
    /// node: <err>` (e.g. `Connection refused`).
    pub fn handle_connect_failed(
        &mut self,
        topo: &Topology,
        job: &JobName,
        err: &str,
        now: Millis,
    ) {
        self.tick(now);
        let Some(idx) = self.export_idx(job) else {
            return;
        };
        if self.jobs[idx].state != JobState::Connecting {
            return;
        }
        let msg = format!("Unable to connect to target node: {err}");
        self.finish(idx, JobState::Failed, Some(&msg), topo, false);
        self.sync_pause();
    }

    /// The AUTH reply (after [`MigrationRequest::SendAuth`]). `Ok` → ESTABLISH is sent;
    /// otherwise the job fails with the matching message. Ignored unless the job is
    /// `reading-auth-response`.
    pub fn handle_auth_reply(
        &mut self,
        topo: &Topology,
        job: &JobName,
        reply: AuthReply,
        now: Millis,
    ) {
        self.tick(now);
        let Some(idx) = self.export_idx(job) else {
            return;
        };
        if self.jobs[idx].state != JobState::ReadingAuthResponse {
            return;
        }
        let msg = match reply {
            AuthReply::Ok => {
                self.send_establish(idx);
                return;
            }
            AuthReply::Rejected(e) => format!("Failed to AUTH to target node: {e}"),
            AuthReply::NoResponse => "Target node did not respond to AUTH command".to_owned(),
            AuthReply::WriteFailed(e) => format!("Failed to send AUTH command to target node: {e}"),
        };
        self.finish(idx, JobState::Failed, Some(&msg), topo, false);
        self.sync_pause();
    }

    /// The one CRLF-terminated reply line to ESTABLISH, as read (including `\r\n`). A line
    /// starting with `-` fails the job with `Received error during handshake to target:
    /// <line>`; anything else moves it to `waiting-to-snapshot`, sends the first `ACK` and
    /// tries to start the snapshot. Ignored unless `reading-establish-response`.
    pub fn handle_establish_reply(
        &mut self,
        topo: &Topology,
        job: &JobName,
        line: &[u8],
        now: Millis,
    ) {
        self.tick(now);
        let Some(idx) = self.export_idx(job) else {
            return;
        };
        if self.jobs[idx].state != JobState::ReadingEstablishResponse {
            return;
        }
        if line.first() == Some(&b'-') {
            let msg = format!(
                "Received error during handshake to target: {}",
                String::from_utf8_lossy(line)
            );
            self.finish(idx, JobState::Failed, Some(&msg), topo, false);
        } else {
            self.set_state(idx, JobState::WaitingToSnapshot);
            if let Some(conn) = self.jobs[idx].conn {
                self.jobs[idx].last_ack_sent = Some(self.now);
                self.push(MigrationOutput::Request(MigrationRequest::Send {
                    conn,
                    message: SyncSlots::Ack,
                }));
            }
            self.try_start_snapshot(idx);
        }
        self.sync_pause();
    }

    /// The ESTABLISH reply did not fit one I/O buffer (16 KiB in Valkey): the job fails with
    /// `Response to establish job is larger than buffer limit`.
    pub fn handle_establish_reply_too_large(
        &mut self,
        topo: &Topology,
        job: &JobName,
        now: Millis,
    ) {
        self.tick(now);
        let Some(idx) = self.export_idx(job) else {
            return;
        };
        if self.jobs[idx].state != JobState::ReadingEstablishResponse {
            return;
        }
        self.finish(
            idx,
            JobState::Failed,
            Some("Response to establish job is larger than buffer limit"),
            topo,
            false,
        );
        self.sync_pause();
    }

    /// Whether another child process (BGSAVE, AOF rewrite) is active on the host; exports in
    /// `waiting-to-snapshot` wait while it is. Starts a waiting snapshot when it ends.
    pub fn handle_child_process(&mut self, topo: &Topology, active: bool, now: Millis) {
        self.tick(now);
        self.child_active = active;
        if !active {
            if let Some(idx) = self
                .jobs
                .iter()
                .position(|j| j.state == JobState::WaitingToSnapshot)
            {
                self.try_start_snapshot(idx);
            }
        }
        let _ = topo;
        self.sync_pause();
    }

    pub(crate) fn try_start_snapshot(&mut self, idx: usize) {
        if self.child_active || self.snapshot_running.is_some() {
            return;
        }
        let j = &self.jobs[idx];
        let Some(conn) = j.conn else { return };
        let (job, ranges) = (j.name, j.ranges.clone());
        self.snapshot_running = Some(job);
        self.push(MigrationOutput::Request(MigrationRequest::StartSnapshot {
            job,
            conn,
            ranges,
        }));
        self.set_state(idx, JobState::Snapshotting);
    }

    /// The snapshot could not be started (fork failed): the job fails with `Failed to start
    /// snapshot`.
    pub fn handle_snapshot_start_failed(&mut self, topo: &Topology, job: &JobName, now: Millis) {
        self.tick(now);
        let Some(idx) = self.export_idx(job) else {
            return;
        };
        if self.jobs[idx].state != JobState::Snapshotting {
            return;
        }
        if self.snapshot_running == Some(*job) {
            self.snapshot_running = None;
        }
        self.finish(
            idx,
            JobState::Failed,
            Some("Failed to start snapshot"),
            topo,
            false,
        );
        self.sync_pause();
    }

    /// The snapshot producer ended. `Done` in `snapshotting` → `replicating` and
    /// [`MigrationRequest::BeginStreaming`]; `Failed` in `snapshotting` → `Failed to perform
    /// snapshot`. (If `REQUEST-PAUSE` already moved the job on, only the slot is freed.)
    pub fn handle_snapshot_done(
        &mut self,
        topo: &Topology,
        job: &JobName,
        result: SnapshotResult,
        now: Millis,
    ) {
        self.tick(now);
        if self.snapshot_running == Some(*job) {
            self.snapshot_running = None;
        }
        if let Some(idx) = self.export_idx(job) {
            if self.jobs[idx].state == JobState::Snapshotting {
                match result {
                    SnapshotResult::Done { cow_bytes } => {
                        self.jobs[idx].cow_bytes = cow_bytes;
                        self.begin_streaming(idx);
                    }
                    SnapshotResult::Failed => self.finish(
                        idx,
                        JobState::Failed,
                        Some("Failed to perform snapshot"),
                        topo,
                        false,
                    ),
                }
            }
        }
        // The next waiting export may start now: the first in the job list, as Valkey's cron walks it.
        if let Some(idx) = self
            .jobs
            .iter()
            .position(|j| j.state == JobState::WaitingToSnapshot)
        {
            self.try_start_snapshot(idx);
        }
        self.sync_pause();
    }

    fn begin_streaming(&mut self, idx: usize) {
        self.set_state(idx, JobState::Replicating);
        if let Some(conn) = self.jobs[idx].conn {
            let job = self.jobs[idx].name;
            self.push(MigrationOutput::Request(MigrationRequest::BeginStreaming {
                job,
                conn,
            }));
        }
    }

    /// Bytes still queued towards the target on the job's link (after
    /// [`MigrationRequest::QueryBacklog`], or whenever the host likes). Shown as
    /// `remaining_repl_size`; a job in `waiting-to-pause` pauses as soon as it is at most
    /// `slot-migration-max-failover-repl-bytes`.
    pub fn handle_link_backlog(&mut self, topo: &Topology, job: &JobName, bytes: u64, now: Millis) {
        self.tick(now);
        let Some(idx) = self.export_idx(job) else {
            return;
        };
        self.jobs[idx].backlog_bytes = bytes;
        if self.jobs[idx].state == JobState::WaitingToPause {
            self.try_pause(idx);
        }
        let _ = topo;
        self.sync_pause();
    }

    /// The link's output buffer passed `client-output-buffer-limit replica`: the link is
    /// closed ([`MigrationRequest::Close`]) and the job fails with the connection-lost message.
    pub fn handle_output_buffer_limit(&mut self, topo: &Topology, job: &JobName, now: Millis) {
        self.tick(now);
        let Some(idx) = self.export_idx(job) else {
            return;
        };
        if let Some(conn) = self.jobs[idx].conn {
            self.handle_link_closed(topo, conn, now);
            self.push(MigrationOutput::Request(MigrationRequest::Close { conn }));
        }
    }

    /// Valkey `slotExportTryDoPause`.
    pub(crate) fn try_pause(&mut self, idx: usize) -> bool {
        let max = self.config.max_failover_repl_bytes;
        let j = &self.jobs[idx];
        if max >= 0 && j.backlog_bytes > max as u64 {
            return false;
        }
        let until = self.now.saturating_add_ms(self.config.pause_ms());
        self.jobs[idx].pause_until = Some(until);
        self.sync_pause();
        if let Some(conn) = self.jobs[idx].conn {
            self.push(MigrationOutput::Request(MigrationRequest::Send {
                conn,
                message: SyncSlots::Paused,
            }));
        }
        self.set_state(idx, JobState::FailoverPaused);
        true
    }

    pub(crate) fn on_request_pause(&mut self, idx: usize, topo: &Topology) {
        let st = self.jobs[idx].state;
        if st != JobState::Replicating && st != JobState::Snapshotting {
            self.finish(idx, JobState::Failed, Some(MSG_UNEXPECTED), topo, false);
            return;
        }
        if st == JobState::Snapshotting {
            self.begin_streaming(idx);
        }
        if !self.try_pause(idx) {
            self.set_state(idx, JobState::WaitingToPause);
            if let Some(conn) = self.jobs[idx].conn {
                let job = self.jobs[idx].name;
                self.push(MigrationOutput::Request(MigrationRequest::QueryBacklog {
                    job,
                    conn,
                }));
            }
        }
    }

    pub(crate) fn on_request_failover(&mut self, idx: usize, topo: &Topology) {
        if self.jobs[idx].state != JobState::FailoverPaused {
            self.finish(idx, JobState::Failed, Some(MSG_UNEXPECTED), topo, false);
            return;
        }
        if self.pause_lapsed(idx) {
            self.finish(
                idx,
                JobState::Failed,
                Some("Unpaused before failover completed"),
                topo,
                false,
            );
            return;
        }
        let floor = self.now.saturating_add_ms(FAILOVER_GRANT_PAUSE_MS);
        let j = &mut self.jobs[idx];
        if j.pause_until.is_none_or(|t| t < floor) {
            j.pause_until = Some(floor);
        }
        if let Some(conn) = j.conn {
            self.push(MigrationOutput::Request(MigrationRequest::Send {
                conn,
                message: SyncSlots::FailoverGranted,
            }));
        }
        self.set_state(idx, JobState::ExportFailoverGranted);
    }

    /// Valkey `checkSlotExportOwnership`: all job slots mine → nothing; all the target's →
    /// success; anything else → `Slots are no longer owned by myself`.
    pub(crate) fn check_export_ownership(&mut self, idx: usize, topo: &Topology) {
        let j = &self.jobs[idx];
        if !j.state.is_in_progress() {
            return;
        }
        let owner = single_owner(topo, j);
        let me = *topo.myself_id();
        match owner {
            Some(o) if o == me => {}
            Some(o) if Some(o) == j.target => {
                self.finish(idx, JobState::Success, None, topo, false)
            }
            _ => self.finish(
                idx,
                JobState::Failed,
                Some("Slots are no longer owned by myself"),
                topo,
                false,
            ),
        }
    }
}

/// The node owning every slot of the job, if there is exactly one.
pub(crate) fn single_owner(
    topo: &Topology,
    j: &crate::job::Job,
) -> Option<ferrocluster_topology::NodeId> {
    let mut owner = None;
    for s in j.slots.iter() {
        match (topo.slot_owner(s), owner) {
            (None, _) => return None,
            (Some(o), None) => owner = Some(*o),
            (Some(o), Some(p)) if *o != p => return None,
            _ => {}
        }
    }
    owner
}

//! The ASM CLUSTER subcommands: MIGRATESLOTS, GETSLOTMIGRATIONS, CANCELSLOTMIGRATIONS,
//! SYNCSLOTS (sheet A.2–A.5; Valkey `clusterCommandMigrateSlots` & co. @ 008734ee).

use crate::args::{eq_ic, parse_ranges};
use crate::error::MigrationError;
use crate::job::Job;
use crate::manager::{Migrations, MSG_UNEXPECTED};
use crate::message::SyncSlots;
use crate::output::{MigrationOutput, MigrationRequest};
use crate::types::{JobKind, JobName, JobState, Origin, JOB_NAME_LEN};
use ferrocluster_slot::SlotRange;
use ferrocluster_topology::{Millis, NodeId, Reply, Topology};
use rand_core::RngCore;

/// The CLUSTER subcommands this crate serves (lowercase): the node dispatches
/// `CLUSTER <sub> ...` here when [`is_migration_subcommand`] holds.
pub const SUBCOMMANDS: [&str; 4] = [
    "migrateslots",
    "getslotmigrations",
    "cancelslotmigrations",
    "syncslots",
];

/// Whether `CLUSTER <sub>` is served by [`Migrations::handle_cluster_command`]
/// (case-insensitive).
pub fn is_migration_subcommand(sub: &[u8]) -> bool {
    SUBCOMMANDS.iter().any(|s| eq_ic(sub, s))
}

/// `validateSlotMigrationCanStartOrReply` (module gate not modelled): myself a primary, no
/// legacy IMPORTING mark, no legacy MIGRATING mark.
fn validate_can_start(topo: &Topology) -> Result<(), MigrationError> {
    if !topo.myself().is_primary() {
        return Err(MigrationError::NotPrimary);
    }
    if topo.importing().next().is_some() {
        return Err(MigrationError::ManuallyImported);
    }
    if topo.migrating().next().is_some() {
        return Err(MigrationError::ManuallyMigrated);
    }
    Ok(())
}

fn lossy(a: &[u8]) -> String {
    String::from_utf8_lossy(a).into_owned()
}

impl Migrations {
    /// Runs `CLUSTER <sub> ...` for the four ASM subcommands (`argv[0]` is `CLUSTER`).
    /// Returns the reply to send, or `None` where Valkey sends none (SYNCSLOTS messages other
    /// than ESTABLISH/FINISH, and errors those messages turn into job failures). `rng` names
    /// new jobs. Arity errors use Valkey's text; an unknown subcommand gives `syntax error`.
    pub fn handle_cluster_command<A: AsRef<[u8]>, R: RngCore + ?Sized>(
        &mut self,
        topo: &Topology,
        origin: Origin,
        argv: &[A],
        rng: &mut R,
        now: Millis,
    ) -> Option<Reply> {
        self.tick(now);
        let sub = argv.get(1).map(|a| a.as_ref()).unwrap_or_default();
        let r = if eq_ic(sub, "migrateslots") {
            Some(match self.migrate_slots(topo, argv, rng, now) {
                Ok(_) => Reply::ok(),
                Err(e) => e.to_reply(),
            })
        } else if eq_ic(sub, "getslotmigrations") {
            Some(match argv.len() {
                2 => self.get_slot_migrations(),
                _ => MigrationError::WrongArity("getslotmigrations").to_reply(),
            })
        } else if eq_ic(sub, "cancelslotmigrations") {
            Some(match argv.len() {
                2 => match self.cancel_slot_migrations(topo, now) {
                    Ok(()) => Reply::ok(),
                    Err(e) => e.to_reply(),
                },
                _ => MigrationError::WrongArity("cancelslotmigrations").to_reply(),
            })
        } else if eq_ic(sub, "syncslots") {
            self.syncslots(topo, origin, argv, now)
        } else {
            Some(MigrationError::Syntax.to_reply())
        };
        self.sync_pause();
        r
    }

    /// `CLUSTER MIGRATESLOTS SLOTSRANGE s e [s e ...] NODE <id> [SLOTSRANGE ... NODE ...]`
    /// (`argv[0..2]` = `CLUSTER MIGRATESLOTS`). All or nothing: on success one export job
    /// per group is created (state `connecting`, a [`MigrationRequest::Connect`] to the
    /// target's address each; a target without a known IP fails its job at once with
    /// `Unable to connect to target node: target node not found`) and their names returned
    /// in argument order.
    ///
    /// # Errors
    /// The first of, in Valkey's order: arity, `Slot migration can only be used on primary
    /// nodes.`, `Slots are being manually imported`, `Slots are being manually migrated`,
    /// then per group: `syntax error` (no `SLOTSRANGE`), the range errors of
    /// [`MigrationError`], `Slots are not served by this node.`, `I am already migrating slot
    /// <n>.`, `Slot ranges in migrations overlap`, `syntax error` (no `NODE <id>`), `Invalid
    /// node name: <id>`, `Unknown node name: <id>`, `Target node can not be this node.`.
    pub fn migrate_slots<A: AsRef<[u8]>, R: RngCore + ?Sized>(
        &mut self,
        topo: &Topology,
        argv: &[A],
        rng: &mut R,
        now: Millis,
    ) -> Result<Vec<JobName>, MigrationError> {
        self.tick(now);
        if argv.len() < 4 {
            return Err(MigrationError::WrongArity("migrateslots"));
        }
        validate_can_start(topo)?;
        let me = *topo.myself_id();
        let mut groups: Vec<(Vec<SlotRange>, NodeId)> = Vec::new();
        let mut i = 2;
        while i < argv.len() {
            if !eq_ic(argv[i].as_ref(), "slotsrange") {
                return Err(MigrationError::Syntax);
            }
            let parsed = parse_ranges(argv, i + 1, topo)?;
            i = parsed.next;
            if parsed.owner != me {
                return Err(MigrationError::NotServedHere);
            }
            for r in &parsed.ranges {
                if let Some(s) = r.iter().find(|s| self.is_slot_exporting(*s)) {
                    return Err(MigrationError::AlreadyMigrating(s.get()));
                }
            }
            let clash = groups.iter().any(|(g, _)| {
                g.iter()
                    .any(|a| parsed.ranges.iter().any(|b| crate::args::overlaps(a, b)))
            });
            if clash {
                return Err(MigrationError::MigrationsOverlap);
            }
            if i + 1 >= argv.len() || !eq_ic(argv[i].as_ref(), "node") {
                return Err(MigrationError::Syntax);
            }
            let id = argv[i + 1].as_ref();
            if id.len() != JOB_NAME_LEN {
                return Err(MigrationError::InvalidNodeName(lossy(id)));
            }
            let target = NodeId::from_bytes(id)
                .ok()
                .filter(|n| topo.contains(n))
                .ok_or_else(|| MigrationError::UnknownNodeName(lossy(id)))?;
            if target == me {
                return Err(MigrationError::TargetIsMyself);
            }
            i += 2;
            groups.push((parsed.ranges, target));
        }
        let mut names = Vec::with_capacity(groups.len());
        let mut created = Vec::with_capacity(groups.len());
        for (ranges, target) in groups {
            let name = JobName::random(rng);
            let mut job = Job::new(JobKind::Export, name, ranges, self.now);
            job.state = JobState::Connecting;
            job.source = Some(me);
            job.target = Some(target);
            names.push(name);
            created.push(job);
        }
        // Valkey builds the new jobs head-first and then pushes each to the head of the log:
        // the first group ends up newest (front), and the last group is kicked first.
        let mut unreachable = Vec::new();
        for job in created.into_iter().rev() {
            let (name, target) = (job.name, job.target);
            self.jobs.push_front(job);
            let Some(target) = target else { continue };
            // The data connection goes to the target's client port, as myself knows it.
            match topo
                .node(&target)
                .and_then(|n| Some((n.ip?, n.port, n.tls_port)))
            {
                Some((ip, port, tls_port)) => self.push(
                    MigrationRequest::Connect {
                        job: name,
                        target,
                        ip,
                        port,
                        tls_port,
                    }
                    .into(),
                ),
                None => unreachable.push(name),
            }
        }
        // Valkey: the job fails when the target cannot be reached (sheet A.7); after the
        // other groups' connects, in their order.
        for name in unreachable {
            self.handle_connect_failed(topo, &name, "target node not found", now);
        }
        Ok(names)
    }

    /// `CLUSTER GETSLOTMIGRATIONS`: every job, newest first, as [`Job::to_reply`] maps.
    pub fn get_slot_migrations(&self) -> Reply {
        Reply::Array(
            self.jobs
                .iter()
                .map(|j| j.to_reply(self.config.report_remaining_repl_size))
                .collect(),
        )
    }

    /// `CLUSTER CANCELSLOTMIGRATIONS`: every in-progress export becomes `cancelled` (empty
    /// message), its link closes (the target fails with the connection-lost message and
    /// cleans up) and its pause is lifted. Imports are not touched.
    ///
    /// # Errors
    /// `No migrations ongoing` when no export job is unfinished.
    pub fn cancel_slot_migrations(
        &mut self,
        topo: &Topology,
        now: Millis,
    ) -> Result<(), MigrationError> {
        self.tick(now);
        if !self.is_any_exporting() {
            return Err(MigrationError::NoMigrations);
        }
        for idx in 0..self.jobs.len() {
            let j = &self.jobs[idx];
            if j.kind == JobKind::Export && j.state.is_in_progress() {
                self.finish(idx, JobState::Cancelled, None, topo, false);
            }
        }
        self.sync_pause();
        Ok(())
    }

    fn syncslots<A: AsRef<[u8]>>(
        &mut self,
        topo: &Topology,
        origin: Origin,
        argv: &[A],
        now: Millis,
    ) -> Option<Reply> {
        let Some(sub) = argv.get(2).map(|a| a.as_ref()) else {
            return Some(MigrationError::WrongArity("syncslots").to_reply());
        };
        if eq_ic(sub, "establish") {
            return Some(match self.establish(topo, origin, argv) {
                Ok(()) => Reply::ok(),
                Err(e) => e.to_reply(),
            });
        }
        if eq_ic(sub, "finish") {
            return Some(match self.finish_command(topo, origin, argv) {
                Ok(()) => Reply::ok(),
                Err(e) => e.to_reply(),
            });
        }
        let conn = match origin {
            Origin::Conn(c) => c,
            // Only ESTABLISH/FINISH matter on the replication stream (and in the AOF).
            Origin::Primary | Origin::Aof => return None,
        };
        const MSGS: [&str; 6] = [
            "SNAPSHOT-EOF",
            "REQUEST-PAUSE",
            "PAUSED",
            "REQUEST-FAILOVER",
            "FAILOVER-GRANTED",
            "ACK",
        ];
        let idx = self.index_of_conn(conn);
        if let Some(&canon) = MSGS.iter().find(|m| eq_ic(sub, m)) {
            let Some(idx) = idx else {
                return Some(MigrationError::NotMigrationClient(canon).to_reply());
            };
            if self.jobs[idx].kind == JobKind::Import {
                self.jobs[idx].last_interaction = now.max(self.now);
            }
            match canon {
                "SNAPSHOT-EOF" => self.on_import_message(
                    idx,
                    topo,
                    JobState::ReceivingSnapshot,
                    Some(SyncSlots::RequestPause),
                    JobState::WaitingForPaused,
                ),
                "PAUSED" => self.on_import_message(
                    idx,
                    topo,
                    JobState::WaitingForPaused,
                    Some(SyncSlots::RequestFailover),
                    JobState::FailoverRequested,
                ),
                "FAILOVER-GRANTED" => {
                    self.on_import_message(
                        idx,
                        topo,
                        JobState::FailoverRequested,
                        None,
                        JobState::ImportFailoverGranted,
                    );
                    if self.jobs[idx].state == JobState::ImportFailoverGranted {
                        self.deferred = true;
                    }
                }
                "REQUEST-PAUSE" => self.on_request_pause(idx, topo),
                "REQUEST-FAILOVER" => self.on_request_failover(idx, topo),
                _ => {
                    self.jobs[idx].last_ack = self.now;
                    if self.jobs[idx].state == JobState::WaitingForAck {
                        self.set_state(idx, JobState::ReceivingSnapshot);
                    }
                }
            }
            return None;
        }
        if eq_ic(sub, "capa") {
            return None;
        }
        match idx {
            Some(idx) => {
                self.finish(
                    idx,
                    JobState::Failed,
                    Some("Unknown SYNCSLOTS subcommand used"),
                    topo,
                    false,
                );
                None
            }
            None => Some(MigrationError::Syntax.to_reply()),
        }
    }

    fn on_import_message(
        &mut self,
        idx: usize,
        topo: &Topology,
        expect: JobState,
        reply: Option<SyncSlots>,
        next: JobState,
    ) {
        if self.jobs[idx].state != expect {
            self.finish(idx, JobState::Failed, Some(MSG_UNEXPECTED), topo, false);
            return;
        }
        if let (Some(message), Some(conn)) = (reply, self.jobs[idx].conn) {
            self.push(MigrationOutput::Request(MigrationRequest::Send {
                conn,
                message,
            }));
        }
        self.set_state(idx, next);
    }

    /// `SYNCSLOTS ESTABLISH` (Valkey `clusterCommandSyncSlotsEstablish`).
    fn establish<A: AsRef<[u8]>>(
        &mut self,
        topo: &Topology,
        origin: Origin,
        argv: &[A],
    ) -> Result<(), MigrationError> {
        let tracking = matches!(origin, Origin::Primary | Origin::Aof);
        if !tracking {
            validate_can_start(topo)?;
        }
        let me = *topo.myself_id();
        let mut source: Option<NodeId> = None;
        let mut name: Option<JobName> = None;
        let mut ranges: Option<(Vec<SlotRange>, NodeId)> = None;
        let mut i = 3;
        while i < argv.len() {
            let key = argv[i].as_ref();
            let val = argv.get(i + 1).map(|v| v.as_ref());
            if eq_ic(key, "source") {
                let Some(v) = val.filter(|v| v.len() == JOB_NAME_LEN) else {
                    return Err(MigrationError::Syntax);
                };
                if source.is_some() {
                    return Err(MigrationError::Syntax);
                }
                i += 2;
                if tracking {
                    continue;
                }
                let n = NodeId::from_bytes(v)
                    .ok()
                    .filter(|n| topo.contains(n))
                    .ok_or(MigrationError::UnknownSource)?;
                if n == me {
                    return Err(MigrationError::SourceIsMyself);
                }
                source = Some(n);
            } else if eq_ic(key, "name") {
                let Some(v) = val.filter(|v| v.len() == JOB_NAME_LEN) else {
                    return Err(MigrationError::Syntax);
                };
                if name.is_some() {
                    return Err(MigrationError::Syntax);
                }
                name = JobName::from_bytes(v);
                i += 2;
            } else if eq_ic(key, "slotsrange") {
                if ranges.is_some() {
                    return Err(MigrationError::Syntax);
                }
                let parsed = parse_ranges(argv, i + 1, topo)?;
                i = parsed.next;
                for r in &parsed.ranges {
                    if r.iter().any(|s| self.is_slot_importing(s)) {
                        return Err(MigrationError::AlreadyImporting);
                    }
                }
                ranges = Some((parsed.ranges, parsed.owner));
            } else {
                return Err(MigrationError::Syntax);
            }
        }
        let (Some(name), Some((ranges, owner))) = (name, ranges) else {
            return Err(MigrationError::Syntax);
        };
        if !tracking && source.is_none() {
            return Err(MigrationError::Syntax);
        }
        if source.is_some_and(|s| s != owner) {
            return Err(MigrationError::OwnershipDisagreement);
        }
        let mut job = Job::new(JobKind::Import, name, ranges.clone(), self.now);
        let slots = job.slots.clone();
        if tracking {
            job.state = JobState::OccurringOnPrimary;
            job.tracking_only = true;
        } else {
            job.state = JobState::WaitingForAck;
            job.source = source;
            job.target = Some(me);
            if let Origin::Conn(c) = origin {
                // A connection carries at most one job: a second ESTABLISH rebinds it.
                for other in self.jobs.iter_mut().filter(|j| j.conn == Some(c)) {
                    other.conn = None;
                }
                job.conn = Some(c);
            }
        }
        let conn = job.conn;
        self.jobs.push_front(job);
        self.push(MigrationOutput::Request(MigrationRequest::HideSlots {
            slots: slots.clone(),
        }));
        self.push(MigrationOutput::Request(MigrationRequest::Propagate {
            message: SyncSlots::Establish {
                source,
                name,
                ranges,
            },
        }));
        if let Some(conn) = conn {
            self.push(MigrationOutput::Request(
                MigrationRequest::AcceptImportLink {
                    job: name,
                    conn,
                    slots,
                },
            ));
        }
        Ok(())
    }

    /// `SYNCSLOTS FINISH STATE success|failed NAME <name> [MESSAGE <m>]` (Valkey
    /// `clusterCommandSyncSlotsFinish`). A job that already ended is left as it is.
    fn finish_command<A: AsRef<[u8]>>(
        &mut self,
        topo: &Topology,
        origin: Origin,
        argv: &[A],
    ) -> Result<(), MigrationError> {
        let mut state: Option<&[u8]> = None;
        let mut name: Option<&[u8]> = None;
        let mut message: Option<&[u8]> = None;
        let mut i = 3;
        while i < argv.len() {
            let key = argv[i].as_ref();
            let val = argv.get(i + 1).map(|v| v.as_ref());
            let slot = if eq_ic(key, "state") {
                &mut state
            } else if eq_ic(key, "name") {
                if val.is_some_and(|v| v.len() != JOB_NAME_LEN) {
                    return Err(MigrationError::Syntax);
                }
                &mut name
            } else if eq_ic(key, "message") {
                &mut message
            } else {
                return Err(MigrationError::Syntax);
            };
            if slot.is_some() || val.is_none() {
                return Err(MigrationError::Syntax);
            }
            *slot = val;
            i += 2;
        }
        let (Some(state), Some(name)) = (state, name) else {
            return Err(MigrationError::Syntax);
        };
        let idx = JobName::from_bytes(name)
            .and_then(|n| self.jobs.iter().position(|j| j.name == n))
            .ok_or(MigrationError::NoSuchJob)?;
        let target = if eq_ic(state, "success") {
            JobState::Success
        } else if eq_ic(state, "failed") {
            JobState::Failed
        } else {
            return Err(MigrationError::Syntax);
        };
        let message = message.map(lossy);
        let j = &self.jobs[idx];
        if j.state.is_terminal() {
            return Ok(());
        }
        let job_name = j.name;
        self.push(MigrationOutput::Request(MigrationRequest::Propagate {
            message: SyncSlots::Finish {
                state: if target == JobState::Success {
                    crate::message::FinishState::Success
                } else {
                    crate::message::FinishState::Failed
                },
                name: job_name,
                message: message.clone(),
            },
        }));
        let loading = origin == Origin::Aof;
        self.finish_inner(idx, target, message.as_deref(), topo, loading, false);
        Ok(())
    }
}

//! The job record (sheet A.6) and its GETSLOTMIGRATIONS entry (sheet A.3).

use crate::types::{ConnId, JobKind, JobName, JobState};
use ferrocluster_slot::{SlotRange, SlotSet};
use ferrocluster_topology::{Millis, NodeId, Reply};

/// One slot migration job, import or export. Read-only outside the crate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    pub(crate) kind: JobKind,
    pub(crate) name: JobName,
    pub(crate) source: Option<NodeId>,
    pub(crate) target: Option<NodeId>,
    pub(crate) ranges: Vec<SlotRange>,
    pub(crate) slots: SlotSet,
    pub(crate) state: JobState,
    pub(crate) message: Option<String>,
    pub(crate) created: Millis,
    pub(crate) last_update: Millis,
    pub(crate) last_ack: Millis,
    pub(crate) last_interaction: Millis,
    pub(crate) last_ack_sent: Option<Millis>,
    pub(crate) pause_until: Option<Millis>,
    pub(crate) post_cleanup: JobState,
    pub(crate) cow_bytes: u64,
    pub(crate) backlog_bytes: u64,
    pub(crate) tracking_only: bool,
    pub(crate) conn: Option<ConnId>,
}

impl Job {
    pub(crate) fn new(kind: JobKind, name: JobName, ranges: Vec<SlotRange>, now: Millis) -> Job {
        let mut slots = SlotSet::new();
        for r in &ranges {
            slots.insert_range(*r);
        }
        Job {
            kind,
            name,
            source: None,
            target: None,
            ranges,
            slots,
            state: JobState::Failed,
            message: None,
            created: now,
            last_update: now,
            last_ack: now,
            last_interaction: now,
            last_ack_sent: None,
            pause_until: None,
            post_cleanup: JobState::Failed,
            cow_bytes: 0,
            backlog_bytes: 0,
            tracking_only: false,
            conn: None,
        }
    }

    /// Import or export.
    pub fn kind(&self) -> JobKind {
        self.kind
    }
    /// The job name (same on both sides).
    pub fn name(&self) -> &JobName {
        &self.name
    }
    /// The source primary (`None` on tracking-only jobs).
    pub fn source(&self) -> Option<&NodeId> {
        self.source.as_ref()
    }
    /// The target primary (`None` on tracking-only jobs).
    pub fn target(&self) -> Option<&NodeId> {
        self.target.as_ref()
    }
    /// The slot ranges, in the order given to MIGRATESLOTS / ESTABLISH.
    pub fn ranges(&self) -> &[SlotRange] {
        &self.ranges
    }
    /// Every slot of the job.
    pub fn slots(&self) -> &SlotSet {
        &self.slots
    }
    /// Current state.
    pub fn state(&self) -> JobState {
        self.state
    }
    /// Status message (`None` shows as the empty string).
    pub fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }
    /// Creation time.
    pub fn created(&self) -> Millis {
        self.created
    }
    /// Time of the last state change.
    pub fn last_update(&self) -> Millis {
        self.last_update
    }
    /// Time the last `ACK` was received (creation time before the first).
    pub fn last_ack(&self) -> Millis {
        self.last_ack
    }
    /// End of this job's write pause (export, `failover-paused`/`failover-granted`).
    pub fn pause_until(&self) -> Option<Millis> {
        self.pause_until
    }
    /// Copy-on-write bytes of the snapshot (export), as the host reported.
    pub fn cow_bytes(&self) -> u64 {
        self.cow_bytes
    }
    /// Bytes still queued towards the target, as the host last reported (export).
    pub fn backlog_bytes(&self) -> u64 {
        self.backlog_bytes
    }
    /// Whether the job only tracks an import run by this node's primary (or reloaded).
    pub fn is_tracking_only(&self) -> bool {
        self.tracking_only
    }
    /// The data connection, while one is bound.
    pub fn conn(&self) -> Option<ConnId> {
        self.conn
    }
    /// `slot_ranges` text: `start-end` for every range (also for one slot), space separated.
    pub fn slot_ranges_text(&self) -> String {
        let parts: Vec<String> = self
            .ranges
            .iter()
            .map(|r| format!("{}-{}", r.start(), r.end()))
            .collect();
        parts.join(" ")
    }

    /// The GETSLOTMIGRATIONS entry: a map with, in order, `name`, `operation`,
    /// `slot_ranges`, `target_node`, `source_node` (both omitted when tracking-only),
    /// `create_time`, `last_update_time`, `last_ack_time` (Unix seconds), `state`,
    /// `message`, `cow_size` and (when `remaining_repl_size` is true, Valkey 9.1)
    /// `remaining_repl_size`.
    pub fn to_reply(&self, remaining_repl_size: bool) -> Reply {
        let k = |s: &str| Reply::bulk(s);
        let secs = |t: Millis| Reply::uint(t.as_u64() / 1000);
        let mut m = vec![
            (k("name"), Reply::bulk(self.name.as_bytes())),
            (k("operation"), k(self.kind.as_str())),
            (k("slot_ranges"), Reply::bulk(self.slot_ranges_text())),
        ];
        if !self.tracking_only {
            let id = |n: &Option<NodeId>| match n {
                Some(n) => Reply::bulk(n.as_bytes()),
                None => Reply::bulk(""),
            };
            m.push((k("target_node"), id(&self.target)));
            m.push((k("source_node"), id(&self.source)));
        }
        m.push((k("create_time"), secs(self.created)));
        m.push((k("last_update_time"), secs(self.last_update)));
        m.push((k("last_ack_time"), secs(self.last_ack)));
        m.push((k("state"), k(self.state.as_str())));
        m.push((k("message"), k(self.message.as_deref().unwrap_or(""))));
        m.push((k("cow_size"), Reply::uint(self.cow_bytes)));
        if remaining_repl_size {
            let rem = if self.kind == JobKind::Export && self.state.is_in_progress() {
                self.backlog_bytes
            } else {
                0
            };
            m.push((k("remaining_repl_size"), Reply::uint(rem)));
        }
        Reply::Map(m)
    }
}

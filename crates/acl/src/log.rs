//! `ACL LOG` (Valkey `addACLLogEntry`, `ACLLogMatchEntry`).

use std::collections::VecDeque;

/// `acllog-max-len`'s default.
pub const DEFAULT_LOG_MAX_LEN: usize = 128;

/// Entries closer than this (ms) with the same reason, context, object and user are one
/// entry with a count (Valkey `ACL_LOG_GROUPING_MAX_TIME_DELTA`).
const GROUPING_MS: u64 = 60_000;

/// Where the denied command ran (`context`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogContext {
    /// `toplevel`
    Toplevel,
    /// `multi`: queued in MULTI, refused at EXEC.
    Multi,
    /// `lua`
    Lua,
}

impl LogContext {
    /// The printed name.
    pub fn name(self) -> &'static str {
        match self {
            LogContext::Toplevel => "toplevel",
            LogContext::Multi => "multi",
            LogContext::Lua => "lua",
        }
    }
}

/// One entry.
#[derive(Debug, Clone, PartialEq)]
pub struct LogEntry {
    /// How many events it stands for.
    pub count: u64,
    /// `command`, `key`, `channel`, `auth`, `database`.
    pub reason: &'static str,
    /// Where.
    pub context: LogContext,
    /// The command's full name, the key / channel / database argument, or for `auth` the
    /// command (`AUTH`, `HELLO` as the client sent it).
    pub object: Vec<u8>,
    /// The user (for `auth`, the name tried).
    pub username: Vec<u8>,
    /// The last event's CLIENT LIST line of the client.
    pub client_info: String,
    /// Unique, increasing.
    pub entry_id: u64,
    /// First event, Unix ms.
    pub created_ms: u64,
    /// Last event, Unix ms.
    pub updated_ms: u64,
}

impl LogEntry {
    /// `age-seconds` at `now_ms`.
    pub fn age_seconds(&self, now_ms: u64) -> f64 {
        now_ms.saturating_sub(self.updated_ms) as f64 / 1000.0
    }
}

/// The log, newest first.
#[derive(Debug, Clone, PartialEq)]
pub struct AclLog {
    entries: VecDeque<LogEntry>,
    next_id: u64,
    max_len: usize,
}

impl Default for AclLog {
    fn default() -> Self {
        AclLog::new(DEFAULT_LOG_MAX_LEN)
    }
}

impl AclLog {
    /// An empty log keeping at most `max_len` entries.
    pub fn new(max_len: usize) -> AclLog {
        AclLog {
            entries: VecDeque::new(),
            next_id: 0,
            max_len,
        }
    }

    /// `acllog-max-len`: trims at once.
    pub fn set_max_len(&mut self, n: usize) {
        self.max_len = n;
        self.entries.truncate(n);
    }

    /// The `acllog-max-len` in force.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// `ACL LOG RESET` (entry ids go on).
    pub fn reset(&mut self) {
        self.entries.clear();
    }

    /// The entries, newest first.
    pub fn entries(&self) -> impl Iterator<Item = &LogEntry> {
        self.entries.iter()
    }

    /// Records an event at `now_ms`: a match among the 10 newest entries (same reason,
    /// context, object and user within 60 s of its last event) is counted and moved to the
    /// front; else a new entry.
    pub fn add(
        &mut self,
        reason: &'static str,
        context: LogContext,
        object: &[u8],
        username: &[u8],
        client_info: String,
        now_ms: u64,
    ) {
        if self.max_len == 0 {
            self.entries.clear();
            return;
        }
        let found = self.entries.iter().take(10).position(|e| {
            e.reason == reason
                && e.context == context
                && e.updated_ms.abs_diff(now_ms) <= GROUPING_MS
                && e.object == object
                && e.username == username
        });
        if let Some(i) = found {
            if let Some(mut e) = self.entries.remove(i) {
                e.count += 1;
                e.updated_ms = now_ms;
                e.client_info = client_info;
                self.entries.push_front(e);
            }
            return;
        }
        self.entries.push_front(LogEntry {
            count: 1,
            reason,
            context,
            object: object.to_vec(),
            username: username.to_vec(),
            client_info,
            entry_id: self.next_id,
            created_ms: now_ms,
            updated_ms: now_ms,
        });
        self.next_id += 1;
        self.entries.truncate(self.max_len);
    }
}

//! The `INFO replication` figures (Valkey `genValkeyInfoString`, section "replication").

use crate::replica::LinkState;
use crate::replication::Replication;
use crate::ConnId;
use ferrocluster_topology::Millis;
use std::fmt::Write;

/// One replica as the primary sees it (`slave<i>:ip=..,port=..,state=..,offset=..,lag=..`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaInfo {
    /// The connection.
    pub conn: ConnId,
    /// `REPLCONF ip-address`, else the peer address the host gave.
    pub ip: Option<String>,
    /// `REPLCONF listening-port`.
    pub port: Option<u16>,
    /// `wait_bgsave`, `send_bulk` or `online`.
    pub state: &'static str,
    /// The offset it acknowledged.
    pub offset: u64,
    /// When it last acknowledged (or synced).
    pub last_ack: Millis,
    /// `REPLCONF version`.
    pub version: Option<(u8, u8, u8)>,
}

/// The replica side's figures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamInfo {
    /// `master_host`.
    pub host: String,
    /// `master_port`.
    pub port: u16,
    /// `master_link_status:up`.
    pub link_up: bool,
    /// `master_last_io_seconds_ago` (when up).
    pub last_io_seconds_ago: Option<u64>,
    /// `master_sync_in_progress`.
    pub sync_in_progress: bool,
    /// `master_sync_total_bytes` during a transfer (`None`: `-1`, an EOF-framed one).
    pub sync_total_bytes: Option<u64>,
    /// `master_sync_read_bytes` during a transfer.
    pub sync_read_bytes: u64,
    /// `master_sync_last_io_seconds_ago` during a transfer.
    pub sync_last_io_seconds_ago: u64,
    /// `master_link_down_since_seconds` when down (`None`: never up, shown as -1).
    pub link_down_since_seconds: Option<u64>,
}

/// `INFO replication` figures. Fields this engine cannot know (the replication buffer's
/// memory, the failover state) are absent: the host adds its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicationInfo {
    /// The replica side (`role:slave`), or `None` (`role:master`).
    pub upstream: Option<UpstreamInfo>,
    /// `slave_repl_offset` / `master_repl_offset`.
    pub offset: u64,
    /// Connected replicas.
    pub replicas: Vec<ReplicaInfo>,
    /// `master_replid`.
    pub replid: String,
    /// `master_replid2`.
    pub replid2: String,
    /// `second_repl_offset` (`None`: -1).
    pub second_offset: Option<u64>,
    /// `repl_backlog_active`.
    pub backlog_active: bool,
    /// `repl_backlog_size`.
    pub backlog_size: u64,
    /// `repl_backlog_first_byte_offset`.
    pub backlog_first_byte_offset: u64,
    /// `repl_backlog_histlen`.
    pub backlog_histlen: u64,
    /// `now`, for the lag column.
    pub now: Millis,
}

impl ReplicationInfo {
    /// The section's lines in Valkey 9's order and names (`CRLF` line ends, no header line),
    /// without the fields listed as absent.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let secs = |ms: u64| ms / 1000;
        match &self.upstream {
            None => s.push_str("role:master\r\n"),
            Some(u) => {
                let _ = write!(
                    s,
                    "role:slave\r\nmaster_host:{}\r\nmaster_port:{}\r\nmaster_link_status:{}\r\nmaster_last_io_seconds_ago:{}\r\nmaster_sync_in_progress:{}\r\nslave_read_repl_offset:{}\r\nslave_repl_offset:{}\r\n",
                    u.host,
                    u.port,
                    if u.link_up { "up" } else { "down" },
                    u.last_io_seconds_ago.map_or(-1, |v| v as i64),
                    u8::from(u.sync_in_progress),
                    self.offset,
                    self.offset,
                );
                if u.sync_in_progress {
                    let total = u.sync_total_bytes.map_or(-1, |v| v as i64);
                    let _ = write!(
                        s,
                        "master_sync_total_bytes:{}\r\nmaster_sync_read_bytes:{}\r\nmaster_sync_left_bytes:{}\r\nmaster_sync_perc:{:.2}\r\nmaster_sync_last_io_seconds_ago:{}\r\n",
                        total,
                        u.sync_read_bytes,
                        if total < 0 { -1 } else { total - u.sync_read_bytes as i64 },
                        match u.sync_total_bytes {
                            Some(t) if t > 0 => u.sync_read_bytes as f64 * 100.0 / t as f64,
                            _ => 0.0,
                        },
                        u.sync_last_io_seconds_ago,
                    );
                }
                if !u.link_up {
                    let _ = write!(
                        s,
                        "master_link_down_since_seconds:{}\r\n",
                        u.link_down_since_seconds.map_or(-1, |v| v as i64)
                    );
                }
            }
        }
        let _ = write!(s, "connected_slaves:{}\r\n", self.replicas.len());
        for (i, r) in self.replicas.iter().enumerate() {
            let _ = write!(
                s,
                "slave{i}:ip={},port={},state={},offset={},lag={},type=replica\r\n",
                r.ip.as_deref().unwrap_or("?"),
                r.port.unwrap_or(0),
                r.state,
                r.offset,
                secs(self.now.since(r.last_ack)),
            );
        }
        let _ = write!(
            s,
            "master_replid:{}\r\nmaster_replid2:{}\r\nmaster_repl_offset:{}\r\nsecond_repl_offset:{}\r\nrepl_backlog_active:{}\r\nrepl_backlog_size:{}\r\nrepl_backlog_first_byte_offset:{}\r\nrepl_backlog_histlen:{}\r\n",
            self.replid,
            self.replid2,
            self.offset,
            self.second_offset.map_or(-1, |v| v as i64),
            u8::from(self.backlog_active),
            self.backlog_size,
            self.backlog_first_byte_offset,
            self.backlog_histlen,
        );
        s
    }
}

impl Replication {
    /// The `INFO replication` figures at `now`.
    pub fn info(&self, now: Millis) -> ReplicationInfo {
        let upstream = self.upstream.as_ref().map(|u| {
            let link_up = matches!(u.state, LinkState::Connected { .. });
            UpstreamInfo {
                host: u.host.clone(),
                port: u.port,
                link_up,
                last_io_seconds_ago: link_up.then(|| now.since(u.last_interaction) / 1000),
                sync_in_progress: u.in_transfer(),
                sync_total_bytes: u.transfer_size,
                sync_read_bytes: u.transfer_read,
                sync_last_io_seconds_ago: now.since(u.lastio) / 1000,
                link_down_since_seconds: u
                    .down_since
                    .filter(|_| u.ever_up)
                    .map(|t| now.since(t) / 1000),
            }
        });
        ReplicationInfo {
            upstream,
            offset: self.offset,
            replicas: self.replicas(),
            replid: self.replid.to_string(),
            replid2: self.replid2.to_string(),
            second_offset: self.second_offset,
            backlog_active: self.backlog_active,
            backlog_size: self.cfg.backlog_size,
            backlog_first_byte_offset: if self.backlog_active {
                self.backlog.first_byte_offset()
            } else {
                0
            },
            backlog_histlen: self.backlog.histlen(),
            now,
        }
    }
}

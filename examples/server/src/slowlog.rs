//! The slow log and per-command statistics: `SLOWLOG GET / LEN / RESET / HELP` (Redis 7.0
//! `slowlogCommand`, src/slowlog.c; Valkey 9 keeps it as the `slow` type of its command log)
//! and INFO `commandstats` (`cmdstat_<name>:calls=..,usec=..,usec_per_call=..,failed_calls=..`).
//!
//! Every command run ([`crate::commands::run`]) is timed around its execution only (not its
//! propagation), as Redis's `call()`. Entries keep at most 32 arguments of at most 128 bytes
//! each, with Redis's markers for what was cut. A command refused before it runs (arity,
//! routing, NOAUTH, ...) counts in `rejected_calls`.
//!
//! `LATENCY HISTOGRAM` (Valkey 9.1 `latencyAllCommandsFillCDF`) reads the per-command
//! latency distribution kept here: Valkey records each call's duration in an HDR histogram
//! (1 µs to 1 s, 2 significant digits) and reports it in power-of-two buckets from 1024 ns;
//! here the calls are counted in those buckets directly ([`HIST_BUCKETS`]), so the reply is
//! the same.

use crate::client::Args;
use crate::resp::Out;
use std::collections::{HashMap, VecDeque};

/// Arguments kept per entry (Redis `SLOWLOG_ENTRY_MAX_ARGC`).
const MAX_ARGC: usize = 32;
/// Bytes kept per argument (Redis `SLOWLOG_ENTRY_MAX_STRING`).
const MAX_STRING: usize = 128;

/// One slow command.
#[derive(Debug, Clone)]
struct Entry {
    id: u64,
    /// Unix seconds when it ran.
    time_s: u64,
    /// Execution time, µs.
    duration_us: u64,
    argv: Vec<Vec<u8>>,
    addr: String,
    name: Vec<u8>,
}

/// Calls, time and failures of one command (INFO `commandstats`).
#[derive(Debug, Clone, Copy, Default)]
struct CmdStat {
    calls: u64,
    usec: u64,
    failed: u64,
    /// Refused before it ran (Valkey `rejected_calls`: arity, NOAUTH, ACL, OOM, MISCONF,
    /// a cluster redirection, ...).
    rejected: u64,
    /// Calls by duration: bucket `k` counts those over bucket `k - 1`'s bound and at most
    /// [`bucket_bound_ns`]`(k)`.
    hist: [u64; HIST_BUCKETS],
}

/// Buckets of the latency histogram: 1024 ns · 2^k for k in 0..21 reaches Valkey's 1 s
/// ceiling (`LATENCY_HISTOGRAM_MAX_VALUE`).
pub const HIST_BUCKETS: usize = 21;

/// The highest duration (ns) bucket `k` holds: the HDR histogram's highest value equivalent
/// to 1024 · 2^k at 2 significant digits (one sub-bucket is 1/128 of the value there).
fn bucket_bound_ns(k: usize) -> u64 {
    let v = 1024u64 << k;
    v + v / 128 - 1
}

/// The bucket of a call that took `us` µs (Valkey records at least 1 µs, at most 1 s).
fn bucket_of(us: u64) -> usize {
    let ns = us.saturating_mul(1000).clamp(1000, 1_000_000_000);
    (0..HIST_BUCKETS)
        .find(|&k| ns <= bucket_bound_ns(k))
        .unwrap_or(HIST_BUCKETS - 1)
}

/// The slow log (newest first) and the command statistics.
#[derive(Debug)]
pub struct SlowLog {
    /// `slowlog-log-slower-than`, µs: negative logs nothing, 0 logs every command.
    slower_than_us: i64,
    /// `slowlog-max-len`: entries kept.
    max_len: usize,
    entries: VecDeque<Entry>,
    next_id: u64,
    stats: HashMap<&'static str, CmdStat>,
}

/// What [`SlowLog::record`] needs to know about the command that ran.
pub struct Ran<'a> {
    /// Its full name (`get`, `config|get`).
    pub name: &'static str,
    /// Its arguments.
    pub args: &'a Args<'a>,
    /// Execution time, µs.
    pub duration_us: u64,
    /// It replied with an error.
    pub failed: bool,
    /// It may enter the slow log (not `skip_commandlog`, not left blocked).
    pub loggable: bool,
    /// The client's address (none for the replication applier) and name; the address is
    /// formatted only for an entry that is kept.
    pub client: (Option<std::net::SocketAddr>, &'a [u8]),
    /// Unix ms now.
    pub now_ms: u64,
}

impl SlowLog {
    /// A slow log with these limits (`slowlog-log-slower-than` µs, `slowlog-max-len`).
    pub fn new(slower_than_us: i64, max_len: u64) -> SlowLog {
        SlowLog {
            slower_than_us,
            max_len: max_len as usize,
            entries: VecDeque::new(),
            next_id: 0,
            stats: HashMap::new(),
        }
    }

    /// The limits in force (`slowlog-log-slower-than`, `slowlog-max-len`).
    pub fn limits(&self) -> (i64, u64) {
        (self.slower_than_us, self.max_len as u64)
    }

    /// Changes the limits (CONFIG SET); a shorter `max_len` drops the oldest entries.
    pub fn set_limits(&mut self, slower_than_us: i64, max_len: u64) {
        self.slower_than_us = slower_than_us;
        self.max_len = max_len as usize;
        self.entries.truncate(self.max_len);
    }

    /// Counts a command that ran and logs it when it took at least the threshold (Redis
    /// `slowlogPushEntryIfNeeded`).
    pub fn record(&mut self, ran: Ran<'_>) {
        let s = self.stats.entry(ran.name).or_default();
        s.calls += 1;
        s.usec += ran.duration_us;
        s.failed += u64::from(ran.failed);
        s.hist[bucket_of(ran.duration_us)] += 1;
        self.log_only(ran);
    }

    /// Logs a command that took at least the threshold, without counting it in the
    /// statistics (a blocked command, counted when it blocked, is logged once answered).
    pub fn log_only(&mut self, ran: Ran<'_>) {
        if !ran.loggable
            || self.slower_than_us < 0
            || self.max_len == 0
            || ran.duration_us < self.slower_than_us as u64
        {
            return;
        }
        let argc = ran.args.len();
        let kept = argc.min(MAX_ARGC);
        let mut argv = Vec::with_capacity(kept);
        for i in 0..kept {
            if kept != argc && i == kept - 1 {
                argv.push(format!("... ({} more arguments)", argc - kept + 1).into_bytes());
                break;
            }
            let a = ran.args.get(i);
            if a.len() > MAX_STRING {
                let mut cut = a[..MAX_STRING].to_vec();
                cut.extend_from_slice(
                    format!("... ({} more bytes)", a.len() - MAX_STRING).as_bytes(),
                );
                argv.push(cut);
            } else {
                argv.push(a.to_vec());
            }
        }
        self.entries.push_front(Entry {
            id: self.next_id,
            time_s: ran.now_ms / 1000,
            duration_us: ran.duration_us,
            argv,
            addr: ran.client.0.map(|a| a.to_string()).unwrap_or_default(),
            name: ran.client.1.to_vec(),
        });
        self.next_id += 1;
        self.entries.truncate(self.max_len);
    }

    /// Command `name` was refused before it ran (Valkey `rejectCommand`: `rejected_calls`).
    pub fn rejected(&mut self, name: &'static str) {
        self.stats.entry(name).or_default().rejected += 1;
    }

    /// INFO `commandstats` lines, sorted by name (Valkey 9.1's fields and order).
    pub fn commandstats(&self, out: &mut String) {
        use std::fmt::Write;
        let mut names: Vec<_> = self.stats.iter().collect();
        names.sort_unstable_by_key(|(n, _)| **n);
        for (name, s) in names {
            let per_call = if s.calls == 0 {
                0.0
            } else {
                s.usec as f64 / s.calls as f64
            };
            let _ = write!(
                out,
                "cmdstat_{name}:calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}\r\n",
                s.calls, s.usec, s.rejected, s.failed
            );
        }
    }

    /// `LATENCY HISTOGRAM [command ...]` (Valkey 9.1 `latencyHistogramCommand`): per command
    /// that ran since the last `CONFIG RESETSTAT`, `calls` and `histogram_usec` (bucket bound
    /// in µs → calls at most that long, cumulative, buckets that add calls only), as a map
    /// (RESP2: a flat array). No name: every command; a container's name: its subcommands;
    /// unknown names are skipped.
    pub fn latency_histogram(&self, args: &Args<'_>, out: &mut Out) {
        let ran = |n: &str| self.stats.get(n).is_some_and(|s| s.calls > 0);
        let mut names: Vec<&'static str> = Vec::new();
        if args.len() == 2 {
            names.extend(self.stats.keys().copied().filter(|n| ran(n)));
            names.sort_unstable();
        }
        // Valkey `latencySpecificCommandsFillCDF`: in the order asked, a command, then the
        // subcommands of a container.
        for i in 2..args.len() {
            let want = String::from_utf8_lossy(args.get(i)).to_ascii_lowercase();
            let mut subs: Vec<&'static str> = self
                .stats
                .keys()
                .copied()
                .filter(|n| ran(n))
                .filter(|n| *n == want || n.split_once('|').is_some_and(|(c, _)| c == want))
                .collect();
            subs.sort_unstable();
            names.extend(subs);
        }
        out.map(names.len());
        for name in names {
            let s = &self.stats[name];
            out.bulk(name.as_bytes());
            out.map(2);
            out.bulk(b"calls");
            out.int(s.calls as i64);
            out.bulk(b"histogram_usec");
            let mut points = Vec::new();
            let mut cumulative = 0;
            for (k, n) in s.hist.iter().enumerate() {
                if *n > 0 {
                    cumulative += n;
                    points.push((bucket_bound_ns(k) / 1000, cumulative));
                }
            }
            out.map(points.len());
            for (us, c) in points {
                out.int(us as i64);
                out.int(c as i64);
            }
        }
    }

    /// `CONFIG RESETSTAT`: the command statistics start again.
    pub fn reset_stats(&mut self) {
        self.stats.clear();
    }

    /// `SLOWLOG GET [count] | LEN | RESET | HELP`.
    pub fn command(&mut self, args: &Args<'_>, out: &mut Out) {
        let sub = String::from_utf8_lossy(args.get(1)).to_ascii_lowercase();
        match sub.as_str() {
            "get" if args.len() <= 3 => {
                let count = match args.opt(2) {
                    None => 10,
                    Some(v) => match std::str::from_utf8(v)
                        .ok()
                        .and_then(|s| s.parse::<i64>().ok())
                    {
                        Some(-1) => usize::MAX,
                        Some(n) if n >= 0 => n as usize,
                        _ => {
                            out.error("ERR count should be greater than or equal to -1");
                            return;
                        }
                    },
                };
                let n = count.min(self.entries.len());
                out.array(n);
                for e in self.entries.iter().take(n) {
                    out.array(6);
                    out.int(e.id as i64);
                    out.int(e.time_s as i64);
                    out.int(e.duration_us as i64);
                    out.array(e.argv.len());
                    for a in &e.argv {
                        out.bulk(a);
                    }
                    out.bulk(e.addr.as_bytes());
                    out.bulk(&e.name);
                }
            }
            "len" if args.len() == 2 => out.int(self.entries.len() as i64),
            "reset" if args.len() == 2 => {
                self.entries.clear();
                out.ok();
            }
            "help" if args.len() == 2 => crate::admin::help(
                out,
                "SLOWLOG",
                &[
                    "GET [<count>]",
                    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
                    "    Entries are made of:",
                    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
                    "    client name",
                    "LEN",
                    "    Return the length of the slowlog.",
                    "RESET",
                    "    Reset the slowlog.",
                ],
            ),
            _ => out.error(&format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try SLOWLOG HELP.",
                String::from_utf8_lossy(args.get(1))
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args_of(words: &[&[u8]]) -> (Vec<u8>, Vec<std::ops::Range<usize>>) {
        let mut flat = Vec::new();
        let mut ranges = Vec::new();
        for w in words {
            let s = flat.len();
            flat.extend_from_slice(w);
            ranges.push(s..flat.len());
        }
        (flat, ranges)
    }

    fn ran<'a>(args: &'a Args<'a>, us: u64) -> Ran<'a> {
        Ran {
            name: "set",
            args,
            duration_us: us,
            failed: false,
            loggable: true,
            client: (Some("127.0.0.1:5000".parse().unwrap()), b"app"),
            now_ms: 1_700_000_000_123,
        }
    }

    #[test]
    fn only_commands_at_or_over_the_threshold_are_logged_newest_first() {
        let mut log = SlowLog::new(100, 2);
        let (f, r) = args_of(&[b"set", b"k", b"v"]);
        let a = Args::new(&f, &r);
        log.record(ran(&a, 99));
        assert_eq!(log.entries.len(), 0);
        log.record(ran(&a, 100));
        log.record(ran(&a, 500));
        log.record(ran(&a, 700));
        // max-len 2: the oldest (id 0) went.
        let ids: Vec<u64> = log.entries.iter().map(|e| e.id).collect();
        assert_eq!(ids, vec![2, 1]);
        assert_eq!(log.entries[0].time_s, 1_700_000_000);
        let mut s = String::new();
        log.commandstats(&mut s);
        assert_eq!(
            s,
            "cmdstat_set:calls=4,usec=1399,usec_per_call=349.75,rejected_calls=0,failed_calls=0\r\n"
        );
    }

    #[test]
    fn long_argument_lists_and_strings_are_cut_with_redis_markers() {
        let mut log = SlowLog::new(0, 10);
        let long = vec![b'x'; 130];
        let mut words: Vec<&[u8]> = vec![b"rpush", &long];
        let filler = b"e".to_vec();
        for _ in 0..38 {
            words.push(&filler);
        }
        let (f, r) = args_of(&words);
        let a = Args::new(&f, &r);
        log.record(ran(&a, 1));
        let e = &log.entries[0];
        assert_eq!(e.argv.len(), 32);
        assert_eq!(e.argv[31], b"... (9 more arguments)".to_vec());
        assert_eq!(&e.argv[1][..128], &long[..128]);
        assert_eq!(&e.argv[1][128..], b"... (2 more bytes)");
    }

    /// Valkey's bucket bounds (HDR `highest_equivalent_value` / 1000 for 1024 ns · 2^k).
    #[test]
    fn histogram_buckets_are_valkeys() {
        let bounds: Vec<u64> = (0..6).map(|k| bucket_bound_ns(k) / 1000).collect();
        assert_eq!(bounds, [1, 2, 4, 8, 16, 33]);
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(1), 0);
        assert_eq!(bucket_of(2), 1);
        assert_eq!(bucket_of(3), 2);
        assert_eq!(bucket_of(5_000_000), HIST_BUCKETS - 1);
        let mut log = SlowLog::new(-1, 10);
        let (f, r) = args_of(&[b"set", b"k", b"v"]);
        let a = Args::new(&f, &r);
        log.record(ran(&a, 1));
        log.record(ran(&a, 3));
        log.record(ran(&a, 3));
        let (f, r) = args_of(&[b"latency", b"histogram"]);
        let mut out = Out::new();
        log.latency_histogram(&Args::new(&f, &r), &mut out);
        assert_eq!(
            out.buf,
            b"*2\r\n$3\r\nset\r\n*4\r\n$5\r\ncalls\r\n:3\r\n$14\r\nhistogram_usec\r\n*4\r\n:1\r\n:1\r\n:4\r\n:3\r\n"
        );
    }

    #[test]
    fn a_negative_threshold_logs_nothing_but_counts() {
        let mut log = SlowLog::new(-1, 10);
        let (f, r) = args_of(&[b"get", b"k"]);
        let a = Args::new(&f, &r);
        log.record(ran(&a, 1_000_000));
        assert!(log.entries.is_empty());
        assert_eq!(log.stats["set"].calls, 1);
    }
}

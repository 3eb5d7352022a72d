//! The latency monitor: `LATENCY LATEST / HISTORY / RESET / DOCTOR / HELP` and
//! `latency-monitor-threshold` (Redis 7.0 src/latency.c: `latencyAddSample`,
//! `latencyCommand`).
//!
//! Events recorded here: `command` and `fast-command` (a command at or over the threshold, by
//! its `fast` flag, Redis's `call()`), and `expire-cycle` (one active-expiry run of the timer
//! thread). Each event keeps its last 160 one-second samples (a second's samples keep their
//! maximum) and its all-time maximum, in ms. The threshold is in ms; 0 turns the monitor off.
//!
//! `LATENCY DOCTOR` gives Valkey 9.1's report (`createLatencyReport`): the disabled-monitor
//! text, one statistics line per event (samples, average, mean deviation, period, worst), or
//! the no-spike text. Valkey's advice paragraphs (which read the slowlog settings, the fork
//! rate, the AOF policy and the kernel's transparent huge pages) are left out; with events
//! the report ends as Valkey's does when it has no advice. `LATENCY HISTOGRAM` is in
//! `crate::slowlog` (it reads the command statistics).

use crate::client::Args;
use crate::resp::Out;
use std::collections::BTreeMap;

/// Samples kept per event (Redis `LATENCY_TS_LEN`).
const TS_LEN: usize = 160;

/// One event's samples.
#[derive(Debug, Clone, Default)]
struct Series {
    /// (unix s, ms), oldest first.
    samples: std::collections::VecDeque<(u64, u64)>,
    max: u64,
}

/// The latency monitor's events.
#[derive(Debug, Default)]
pub struct Latency {
    /// `latency-monitor-threshold`, ms (0: off).
    threshold_ms: u64,
    events: BTreeMap<&'static str, Series>,
}

impl Latency {
    /// A monitor with `latency-monitor-threshold` `threshold_ms`.
    pub fn new(threshold_ms: u64) -> Latency {
        Latency {
            threshold_ms,
            events: BTreeMap::new(),
        }
    }

    /// The threshold in force, ms.
    pub fn threshold(&self) -> u64 {
        self.threshold_ms
    }

    /// CONFIG SET `latency-monitor-threshold`.
    pub fn set_threshold(&mut self, ms: u64) {
        self.threshold_ms = ms;
    }

    /// Records `ms` for `event` at `now_ms` when the monitor is on and `ms` reaches the
    /// threshold (Redis `latencyAddSampleIfNeeded`).
    pub fn add_if_needed(&mut self, event: &'static str, ms: u64, now_ms: u64) {
        if self.threshold_ms == 0 || ms < self.threshold_ms {
            return;
        }
        let now_s = now_ms / 1000;
        let s = self.events.entry(event).or_default();
        s.max = s.max.max(ms);
        match s.samples.back_mut() {
            Some((t, v)) if *t == now_s => *v = (*v).max(ms),
            _ => {
                s.samples.push_back((now_s, ms));
                if s.samples.len() > TS_LEN {
                    s.samples.pop_front();
                }
            }
        }
    }

    /// The `LATENCY DOCTOR` report at unix second `now_s` (Valkey `createLatencyReport` and
    /// `analyzeLatencyForEvent`, without the advice paragraphs).
    fn doctor(&self, now_s: u64) -> String {
        use std::fmt::Write;
        if self.events.is_empty() && self.threshold_ms == 0 {
            return "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Valkey instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it.\n".into();
        }
        if self.events.is_empty() {
            return "No latency spike was observed during the lifetime of this Valkey instance, not in the slightest bit.\n".into();
        }
        let mut r = String::from("Latency spikes are observed in this Valkey instance.\n\n");
        for (n, (name, s)) in self.events.iter().enumerate() {
            let samples = s.samples.len() as u64;
            let sum: u64 = s.samples.iter().map(|(_, v)| v).sum();
            let avg = sum.checked_div(samples).unwrap_or(0);
            let mad = s
                .samples
                .iter()
                .map(|(_, v)| avg.abs_diff(*v))
                .sum::<u64>()
                .checked_div(samples)
                .unwrap_or(0);
            let oldest = s.samples.iter().map(|(t, _)| *t).min().unwrap_or(now_s);
            let period = now_s.saturating_sub(oldest).max(1);
            let _ = writeln!(
                r,
                "{}. {name}: {samples} latency spikes (average {avg}ms, mean deviation {mad}ms, period {:.2} sec). Worst all time event {}ms.",
                n + 1,
                period as f64 / samples.max(1) as f64,
                s.max
            );
        }
        r.push_str("\nThere are latency events logged that are not easy to fix. Please get some help from Valkey community, providing this report in your help request.\n");
        r
    }

    /// `LATENCY LATEST | HISTORY event | RESET [event ...] | DOCTOR | HELP`.
    pub fn command(&mut self, args: &Args<'_>, out: &mut Out) {
        let sub = String::from_utf8_lossy(args.get(1)).to_ascii_lowercase();
        match sub.as_str() {
            "latest" if args.len() == 2 => {
                out.array(self.events.len());
                for (name, s) in &self.events {
                    let (t, v) = s.samples.back().copied().unwrap_or((0, 0));
                    out.array(4);
                    out.bulk(name.as_bytes());
                    out.int(t as i64);
                    out.int(v as i64);
                    out.int(s.max as i64);
                }
            }
            "history" if args.len() == 3 => {
                let name = String::from_utf8_lossy(args.get(2));
                match self.events.get(name.as_ref()) {
                    None => out.array(0),
                    Some(s) => {
                        out.array(s.samples.len());
                        for (t, v) in &s.samples {
                            out.array(2);
                            out.int(*t as i64);
                            out.int(*v as i64);
                        }
                    }
                }
            }
            "doctor" if args.len() == 2 => {
                let now_s = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                out.verbatim(self.doctor(now_s).as_bytes());
            }
            "reset" => {
                let n = if args.len() == 2 {
                    let n = self.events.len();
                    self.events.clear();
                    n
                } else {
                    (2..args.len())
                        .filter(|&i| {
                            let name = String::from_utf8_lossy(args.get(i)).into_owned();
                            self.events.remove(name.as_str()).is_some()
                        })
                        .count()
                };
                out.int(n as i64);
            }
            "help" if args.len() == 2 => crate::admin::help(
                out,
                "LATENCY",
                &[
                    "DOCTOR",
                    "    Return a human readable latency analysis report.",
                    "HISTORY <event>",
                    "    Return time-latency samples for the <event> class.",
                    "LATEST",
                    "    Return the latest latency samples for all events.",
                    "RESET [<event> ...]",
                    "    Reset latency data of one or more <event> classes.",
                    "    (default: reset all data for all event classes)",
                    "HISTOGRAM [COMMAND ...]",
                    "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
                    "    If no commands are specified then all histograms are replied.",
                ],
            ),
            _ => out.error(&format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try LATENCY HELP.",
                String::from_utf8_lossy(args.get(1))
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_under_the_threshold_or_with_the_monitor_off_are_not_kept() {
        let mut l = Latency::new(0);
        l.add_if_needed("command", 500, 1_000);
        assert!(l.events.is_empty());
        l.set_threshold(100);
        l.add_if_needed("command", 99, 1_000);
        assert!(l.events.is_empty());
        l.add_if_needed("command", 100, 1_000);
        assert_eq!(l.events["command"].samples, vec![(1, 100)]);
    }

    #[test]
    fn one_sample_per_second_keeps_the_maximum_and_the_last_160() {
        let mut l = Latency::new(1);
        l.add_if_needed("command", 5, 10_100);
        l.add_if_needed("command", 9, 10_900);
        l.add_if_needed("command", 3, 10_950);
        assert_eq!(l.events["command"].samples, vec![(10, 9)]);
        for s in 11..200u64 {
            l.add_if_needed("command", 2, s * 1000);
        }
        let s = &l.events["command"];
        assert_eq!(s.samples.len(), 160);
        assert_eq!(s.samples.front(), Some(&(40, 2)));
        assert_eq!(s.max, 9);
    }
}

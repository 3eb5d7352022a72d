//! The trace log: with `FERROCLUSTER_SIM_TRACE_LOG=<file>` set, every [`crate::Sim`] appends
//! one line to `<file>` when it is dropped — the test thread's name (libtest names it after
//! the test), the number of simulators that thread dropped before, the seed, the trace digest
//! and the event count. Two runs of the simulator's tests from two commits give two logs;
//! sorted, they are equal exactly when every simulated run delivered the same events in the
//! same order (`scripts/sim-trace-hashes` runs and sorts them). That is the check that a
//! refactoring of the engines kept their behaviour.

use std::cell::Cell;
use std::io::Write as _;

/// The environment variable naming the log file.
pub const TRACE_LOG_ENV: &str = "FERROCLUSTER_SIM_TRACE_LOG";

thread_local! {
    static DROPPED: Cell<u64> = const { Cell::new(0) };
}

/// Appends the line of one finished simulator (see the module docs); nothing without the
/// environment variable. A write error is ignored: the log is a diagnostic, never a result.
pub(crate) fn record(seed: u64, digest: u64, events: u64) {
    let Some(path) = std::env::var_os(TRACE_LOG_ENV) else {
        return;
    };
    let n = DROPPED.with(|c| {
        let n = c.get();
        c.set(n + 1);
        n
    });
    let thread = std::thread::current();
    let name = thread.name().unwrap_or("?");
    let line = format!("{name}\t{n}\t{seed}\t{digest:016x}\t{events}\n");
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = f.write_all(line.as_bytes());
    }
}

//! Waits for a condition. A test never depends on the machine's speed: it waits for what it
//! needs, and the deadline only bounds a hang, long enough that no load makes it fire on a
//! correct program.

use std::time::{Duration, Instant};

/// The deadline of every wait: a bound on a hang, never a measure of speed.
pub const HANG: Duration = Duration::from_secs(60);

/// Polls `f` every 50 ms until it returns true; panics naming `what` after [`HANG`].
pub fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    wait_for(what, || f().then_some(()))
}

/// Polls `f` every 50 ms until it returns `Some`, and returns that; panics naming `what`
/// after [`HANG`].
pub fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + HANG;
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() >= end {
            panic!("still waiting after {HANG:?} (a hang) for: {what}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Like [`wait_for`], where `f` says why it is not done yet: the panic after [`HANG`] gives
/// the last reason.
pub fn wait_ok<T>(what: &str, mut f: impl FnMut() -> Result<T, String>) -> T {
    let end = Instant::now() + HANG;
    loop {
        match f() {
            Ok(v) => return v,
            Err(why) if Instant::now() >= end => {
                panic!("still waiting after {HANG:?} (a hang) for: {what}; last: {why}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

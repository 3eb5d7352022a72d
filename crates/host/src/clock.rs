//! The one clock read of a host.
//!
//! The engine takes time as a parameter: Unix time in milliseconds ([`Millis`]), the unit of
//! nodes.conf, `CLUSTER LINKS` `create-time` and the bus `ping_sent` / `pong_received` fields.
//! Everything in this crate that needs "now" takes it from [`now`] (the drive loop reads it
//! once per turn and hands the same value to every input of that turn), so a host that uses
//! the kit reads the wall clock in exactly one place.
//!
//! The wall clock can step (NTP, an operator): a step forward looks to the node like time
//! passing (timers fire early); a step back is clamped by the node (its deadlines wait for the
//! clock to catch up, nothing panics). Valkey reads the same wall clock (`mstime()`).

use ferrocluster_node::Millis;
use std::time::{SystemTime, UNIX_EPOCH};

/// The current Unix time in ms. A clock set before 1970 reads as 0.
#[allow(clippy::disallowed_methods)] // the one clock read of the host side
pub fn now() -> Millis {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    Millis(ms)
}

/// How long to wait from `now` until `deadline` (`None`: no deadline), capped at `max`.
/// A deadline in the past is due now (zero).
pub fn until(
    deadline: Option<Millis>,
    now: Millis,
    max: std::time::Duration,
) -> std::time::Duration {
    match deadline {
        Some(d) => std::time::Duration::from_millis(d.0.saturating_sub(now.0)).min(max),
        None => max,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn until_is_capped_and_never_negative() {
        let max = Duration::from_millis(100);
        assert_eq!(until(None, Millis(5), max), max);
        assert_eq!(until(Some(Millis(4)), Millis(5), max), Duration::ZERO);
        assert_eq!(
            until(Some(Millis(35)), Millis(5), max),
            Duration::from_millis(30)
        );
        assert_eq!(until(Some(Millis(500)), Millis(5), max), max);
    }

    #[test]
    fn now_is_after_2023() {
        assert!(now().0 > 1_700_000_000_000);
    }
}

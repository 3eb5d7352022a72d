//! The engines' clock: the latest time seen, never going backwards.

use ferrocluster_topology::Millis;

/// Moves `latest` to `now` unless `now` is earlier (time that goes backwards is clamped,
/// never a panic) and returns the time to use.
pub(crate) fn advance(latest: &mut Millis, now: Millis) -> Millis {
    if now > *latest {
        *latest = now;
    }
    *latest
}

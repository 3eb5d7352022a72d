//! Wall-clock time in Unix milliseconds, passed in by the host.

use std::fmt;

/// A point in time: Unix wall-clock milliseconds.
///
/// The protocol compares times across nodes (facts sheet §0: "Times in the engine are wall-clock
/// Unix milliseconds"), so the host passes `now` as Unix ms; the engine never reads a clock.
/// Durations are plain `u64` values whose names end in `_ms`.
///
/// ```
/// use ferrocluster_topology::Millis;
/// let t = Millis(1_718_000_000_000);
/// assert_eq!(t.saturating_add_ms(500).since(t), 500);
/// assert_eq!(t.since(t.saturating_add_ms(1)), 0); // time going backwards clamps to 0
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Millis(pub u64);

impl Millis {
    /// The Unix epoch, 0 ms.
    pub const ZERO: Millis = Millis(0);

    /// The raw milliseconds.
    pub const fn as_u64(self) -> u64 {
        self.0
    }

    /// Milliseconds elapsed from `earlier` to `self`; 0 if `earlier` is later (a clock that
    /// went backwards is clamped, never a panic).
    pub const fn since(self, earlier: Millis) -> u64 {
        self.0.saturating_sub(earlier.0)
    }

    /// `self + ms`, saturating at `u64::MAX`.
    pub const fn saturating_add_ms(self, ms: u64) -> Millis {
        Millis(self.0.saturating_add(ms))
    }

    /// `self - ms`, saturating at 0.
    pub const fn saturating_sub_ms(self, ms: u64) -> Millis {
        Millis(self.0.saturating_sub(ms))
    }
}

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl From<u64> for Millis {
    fn from(ms: u64) -> Millis {
        Millis(ms)
    }
}

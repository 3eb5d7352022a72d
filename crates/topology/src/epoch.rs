//! Epochs: the cluster-wide currentEpoch (also used for lastVoteEpoch) and each primary's
//! configEpoch (facts sheet §11, §12). Distinct types so they cannot be mixed up silently;
//! converting is explicit ([`ConfigEpoch::as_current`], [`CurrentEpoch::as_config`]).

use std::fmt;

/// The cluster's logical clock (`currentEpoch`); also the type of `lastVoteEpoch` (the
/// currentEpoch in which this node last granted a vote). u64 on the wire and in nodes.conf.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct CurrentEpoch(pub u64);

/// A primary's configuration version (`configEpoch`): higher wins slot-ownership conflicts.
/// A replica reports its primary's. u64 on the wire and in nodes.conf.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ConfigEpoch(pub u64);

impl CurrentEpoch {
    /// The raw value.
    pub const fn get(self) -> u64 {
        self.0
    }
    /// The next epoch (`+1`, saturating).
    pub const fn next(self) -> CurrentEpoch {
        CurrentEpoch(self.0.saturating_add(1))
    }
    /// The same number as a configEpoch (a node that wins an election or bumps its epoch
    /// takes the currentEpoch as its configEpoch).
    pub const fn as_config(self) -> ConfigEpoch {
        ConfigEpoch(self.0)
    }
}

impl ConfigEpoch {
    /// The raw value.
    pub const fn get(self) -> u64 {
        self.0
    }
    /// The same number as a currentEpoch (currentEpoch is raised to the largest configEpoch
    /// seen, §18.3).
    pub const fn as_current(self) -> CurrentEpoch {
        CurrentEpoch(self.0)
    }
}

impl fmt::Display for CurrentEpoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::Display for ConfigEpoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

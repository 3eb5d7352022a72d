//! configEpoch collisions (§11.5), the bump without consensus (§11.6, `CLUSTER BUMPEPOCH`) and
//! `CLUSTER SET-CONFIG-EPOCH` (§19.6).

use crate::{EpochEffect, EpochEvent, SetConfigEpochError};
use ferrocluster_topology::{ConfigEpoch, NodeId, Topology};
use std::fmt;

/// §11.5 (Valkey `clusterHandleConfigEpochCollision`): called for a PING/PONG/MEET from
/// `sender` whose header configEpoch equals mine while both of us are primaries. When the
/// sender's recorded configEpoch equals mine and its ID is greater than mine (byte order),
/// myself moves: `currentEpoch += 1; configEpoch = currentEpoch`, saved with fsync. The node
/// with the smaller ID moves; the largest ID never does. Returns whether myself moved.
///
/// Effects: [`EpochEffect::Persist`], [`EpochEvent::ConfigEpochBumped`].
pub fn handle_config_epoch_collision(
    topo: &mut Topology,
    sender: &NodeId,
    out: &mut Vec<EpochEffect>,
) -> bool {
    let me = topo.myself();
    let Some(s) = topo.node(sender) else {
        return false;
    };
    if s.is_myself()
        || s.config_epoch != me.config_epoch
        || !s.is_primary()
        || !me.is_primary()
        || s.id().as_bytes() <= me.id().as_bytes()
    {
        return false;
    }
    topo.current_epoch = topo.current_epoch.next();
    let e = topo.current_epoch.as_config();
    topo.myself_mut().config_epoch = e;
    out.push(EpochEffect::Persist);
    out.push(EpochEffect::Event(EpochEvent::ConfigEpochBumped(e)));
    true
}

/// The largest configEpoch of any known node, or the currentEpoch if that is larger
/// (Valkey `clusterGetMaxEpoch`, §11.6).
pub fn max_epoch(topo: &Topology) -> u64 {
    topo.max_config_epoch().get().max(topo.current_epoch.get())
}

/// §11.6 (Valkey `clusterBumpConfigEpochWithoutConsensus`): if my configEpoch is 0 or not the
/// largest epoch known ([`max_epoch`]), `currentEpoch += 1; configEpoch = currentEpoch` and
/// save with fsync; otherwise nothing. Returns whether it bumped.
///
/// Used by `CLUSTER BUMPEPOCH`, `CLUSTER FAILOVER TAKEOVER`, a finished slot import
/// (SETSLOT NODE to myself) and a claim that ends an import (§11.2).
pub fn bump_config_epoch_without_consensus(
    topo: &mut Topology,
    out: &mut Vec<EpochEffect>,
) -> bool {
    let mine = topo.myself().config_epoch.get();
    if mine != 0 && mine == max_epoch(topo) {
        return false;
    }
    topo.current_epoch = topo.current_epoch.next();
    let e = topo.current_epoch.as_config();
    topo.myself_mut().config_epoch = e;
    out.push(EpochEffect::Persist);
    out.push(EpochEffect::Event(EpochEvent::ConfigEpochBumped(e)));
    true
}

/// The reply of `CLUSTER BUMPEPOCH`: a simple string `BUMPED <configEpoch>` or
/// `STILL <configEpoch>` (§19.6; captured `+BUMPED 7`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BumpEpochReply {
    /// Whether the epoch moved.
    pub bumped: bool,
    /// My configEpoch afterwards.
    pub config_epoch: ConfigEpoch,
}

impl fmt::Display for BumpEpochReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let word = if self.bumped { "BUMPED" } else { "STILL" };
        write!(f, "{word} {}", self.config_epoch)
    }
}

/// `CLUSTER BUMPEPOCH` (§11.6, §19.6): [`bump_config_epoch_without_consensus`] and the reply.
pub fn bump_epoch(topo: &mut Topology, out: &mut Vec<EpochEffect>) -> BumpEpochReply {
    let bumped = bump_config_epoch_without_consensus(topo, out);
    BumpEpochReply {
        bumped,
        config_epoch: topo.myself().config_epoch,
    }
}

/// `CLUSTER SET-CONFIG-EPOCH <epoch>` (§19.6): only on a node that knows no other node and
/// has configEpoch 0; sets my configEpoch and raises currentEpoch to it if lower. Effects:
/// [`EpochEffect::UpdateState`], [`EpochEffect::Save`]. The caller parses the argument as a
/// signed 64-bit integer (a non-integer is the command layer's "value is not an integer"
/// error).
///
/// # Errors
/// In Valkey's order: [`SetConfigEpochError::Invalid`] for a negative epoch,
/// [`SetConfigEpochError::KnowsOtherNodes`], [`SetConfigEpochError::AlreadyNonZero`]. The model
/// is unchanged on error.
pub fn set_config_epoch(
    topo: &mut Topology,
    epoch: i64,
    out: &mut Vec<EpochEffect>,
) -> Result<(), SetConfigEpochError> {
    let Ok(e) = u64::try_from(epoch) else {
        return Err(SetConfigEpochError::Invalid(epoch));
    };
    if topo.len() > 1 {
        return Err(SetConfigEpochError::KnowsOtherNodes);
    }
    if topo.myself().config_epoch.get() != 0 {
        return Err(SetConfigEpochError::AlreadyNonZero);
    }
    topo.myself_mut().config_epoch = ConfigEpoch(e);
    if topo.current_epoch.get() < e {
        topo.current_epoch = ConfigEpoch(e).as_current();
    }
    out.push(EpochEffect::UpdateState);
    out.push(EpochEffect::Save);
    Ok(())
}

//! CLUSTER MEET, FORGET and RESET as far as gossip owns them (§7.3, §16, §19.6).

use crate::{Gossip, GossipConfig, GossipEffect};
use ferrocluster_slot::Slot;
use ferrocluster_topology::{
    ConfigEpoch, CurrentEpoch, Millis, Node, NodeFlags, NodeId, ShardId, Topology,
};
use rand_core::RngCore;
use std::net::IpAddr;

/// Why a command was refused; nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// A port of 0 (`Invalid base port specified` / `Invalid bus port specified`, §19.6).
    #[error("invalid {what} port {port}")]
    InvalidPort {
        /// `base` or `bus`.
        what: &'static str,
        /// The port given.
        port: u16,
    },
    /// `Unknown node <id>`.
    #[error("Unknown node {0}")]
    UnknownNode(NodeId),
    /// `I tried hard but I can't forget myself...`.
    #[error("I tried hard but I can't forget myself...")]
    ForgetMyself,
    /// `Can't forget my master!`.
    #[error("Can't forget my master!")]
    ForgetMyPrimary,
}

/// CLUSTER RESET SOFT or HARD (§19.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResetKind {
    /// SOFT: become an empty primary, forget every other node and the ban list.
    Soft,
    /// HARD: also epochs to 0 and a new node ID and shard ID.
    Hard,
}

impl Gossip {
    /// CLUSTER MEET (§7.3): unless a HANDSHAKE node with the same ip/port/bus port exists, a
    /// node with a random ID and flags HANDSHAKE|MEET is created; the cron connects to it and
    /// sends MEET. `bus_port` defaults to `port + 10000`. MEET does not consult the ban list.
    ///
    /// # Errors
    /// [`CommandError::InvalidPort`] for port 0 or a bus port that does not fit (port > 55535
    /// without an explicit bus port).
    pub fn meet<R: RngCore + ?Sized>(
        &mut self,
        topo: &mut Topology,
        ip: IpAddr,
        port: u16,
        bus_port: Option<u16>,
        now: Millis,
        rng: &mut R,
    ) -> Result<Option<NodeId>, CommandError> {
        if port == 0 {
            return Err(CommandError::InvalidPort { what: "base", port });
        }
        let cport = match bus_port {
            Some(0) => {
                return Err(CommandError::InvalidPort {
                    what: "bus",
                    port: 0,
                })
            }
            Some(p) => p,
            None => port
                .checked_add(10000)
                .ok_or(CommandError::InvalidPort { what: "bus", port })?,
        };
        let dup = topo
            .nodes()
            .any(|n| n.in_handshake() && n.ip == Some(ip) && n.port == port && n.bus_port == cport);
        if dup {
            return Ok(None);
        }
        let id = NodeId::random(rng);
        let mut n = Node::new(id, ShardId::random(rng), now);
        n.flags = NodeFlags::HANDSHAKE | NodeFlags::MEET;
        n.ip = Some(ip);
        n.port = port;
        n.bus_port = cport;
        // A fresh ID cannot collide with a known one except with negligible probability; a
        // collision is reported as "nothing done".
        Ok(topo.add_node(n).ok().map(|_| id))
    }

    /// CLUSTER FORGET (§16): bans `id` for `cluster-blacklist-ttl` seconds and deletes it.
    /// An unknown but banned ID succeeds (already forgotten).
    ///
    /// # Errors
    /// [`CommandError::UnknownNode`], [`CommandError::ForgetMyself`],
    /// [`CommandError::ForgetMyPrimary`].
    pub fn forget(
        &mut self,
        topo: &mut Topology,
        cfg: &GossipConfig,
        id: &NodeId,
        now: Millis,
        out: &mut Vec<GossipEffect>,
    ) -> Result<(), CommandError> {
        if !topo.contains(id) {
            return if self.blacklist.contains(id, now) {
                Ok(())
            } else {
                Err(CommandError::UnknownNode(*id))
            };
        }
        if id == topo.myself_id() {
            return Err(CommandError::ForgetMyself);
        }
        if topo.myself().primary.as_ref() == Some(id) {
            return Err(CommandError::ForgetMyPrimary);
        }
        self.blacklist.add(*id, cfg.blacklist_ttl_secs, now);
        self.delete_node(topo, id, out);
        Ok(())
    }

    /// CLUSTER RESET (§19.6): myself becomes an empty primary, every slot and mark is cleared,
    /// every other node and the ban list are forgotten, every link is closed. HARD also sets
    /// currentEpoch, lastVoteEpoch and my configEpoch to 0 and draws a new node ID and shard ID.
    /// (Refusing a primary that holds keys is the host's check.)
    pub fn reset<R: RngCore + ?Sized>(
        &mut self,
        topo: &mut Topology,
        kind: ResetKind,
        rng: &mut R,
        out: &mut Vec<GossipEffect>,
    ) {
        for link in self.links.clear() {
            out.push(GossipEffect::Close { link });
        }
        let me = *topo.myself_id();
        let _ = topo.set_as_primary(&me);
        for slot in Slot::all() {
            let _ = topo.set_slot_owner(slot, None);
            let _ = topo.set_importing(slot, None);
            let _ = topo.set_migrating(slot, None);
        }
        let others: Vec<NodeId> = topo
            .nodes()
            .filter(|n| !n.is_myself())
            .map(|n| *n.id())
            .collect();
        for id in others {
            if topo.remove_node(&id).is_ok() {
                out.push(GossipEffect::NodeDeleted(id));
            }
        }
        self.blacklist.clear();
        if kind == ResetKind::Hard {
            topo.current_epoch = CurrentEpoch(0);
            topo.last_vote_epoch = CurrentEpoch(0);
            topo.myself_mut().config_epoch = ConfigEpoch(0);
            let new_id = NodeId::random(rng);
            // Only myself is left, so the new ID cannot be taken.
            let _ = topo.rename_node(&me, new_id);
            topo.myself_mut().shard_id = ShardId::random(rng);
        }
        out.push(GossipEffect::UpdateState);
        out.push(GossipEffect::Save);
    }
}

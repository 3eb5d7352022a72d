//! Configuration carried by PING/PONG/MEET and UPDATE messages (§11.1–§11.4, §8 steps 6f–6h
//! and 12): the role switch, slot claims (unassigned slot, higher configEpoch wins, dirty
//! slots, importing/migrating re-pointing, "owner not claiming" marks, following the node that
//! took my shard's last slot), the UPDATE trigger and a received UPDATE.

use crate::epochs::{bump_config_epoch_without_consensus, handle_config_epoch_collision};
use crate::roles::{attach_replica, same_shard, set_node_as_primary};
use crate::{Epoch, EpochConfig, EpochEffect, EpochEvent, EpochMessage, Target};
use ferrocluster_slot::{Slot, SlotSet};
use ferrocluster_topology::{ConfigEpoch, NodeFlags, NodeId, Topology};

/// The role a PING/PONG/MEET header claims (§8 step 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClaimedRole {
    /// `replicaof` is all zero.
    Primary,
    /// `replicaof` names a node; `None` if the 40 bytes are not a valid node ID (treated like
    /// an unknown node, as Valkey's lookup fails).
    ReplicaOf(Option<NodeId>),
}

/// What we knew of the sender's role before this message changed anything (§8 step 2,
/// Valkey `sender_last_reported_as_primary` / `_as_replica`). The node MUST take it with
/// [`PriorRole::of`] before any processing of the message that can change roles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PriorRole {
    /// The sender was flagged PRIMARY.
    pub was_primary: bool,
    /// The sender was flagged REPLICA.
    pub was_replica: bool,
}

impl PriorRole {
    /// The sender's role flags as the model holds them now (all false for an unknown node).
    pub fn of(topo: &Topology, sender: &NodeId) -> PriorRole {
        topo.node(sender)
            .map_or_else(PriorRole::default, |n| PriorRole {
                was_primary: n.is_primary(),
                was_replica: n.is_replica(),
            })
    }
}

/// The configuration fields of a PING/PONG/MEET header from a known sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PingClaims<'a> {
    /// The sender (known, not in handshake).
    pub sender: NodeId,
    /// Header `replicaof`.
    pub role: ClaimedRole,
    /// Header `configEpoch` (a replica sends its primary's).
    pub config_epoch: ConfigEpoch,
    /// Header `myslots` (a replica sends its primary's).
    pub slots: &'a SlotSet,
}

impl Epoch {
    /// Whether `slot` counts as unclaimed (§11.4, Valkey `isSlotUnclaimed`): no owner, or its
    /// owner sent a claim without it (and still owns it in our table).
    pub fn is_slot_unclaimed(&self, topo: &Topology, slot: Slot) -> bool {
        match topo.slot_owner(slot) {
            None => true,
            Some(o) => self.not_claiming.get(&slot) == Some(o),
        }
    }

    /// The UPDATE message describing `node` (§4.4, §11.4): its configEpoch and its slots minus
    /// those it stopped claiming. `None` for an unknown node.
    pub fn update_message(&self, topo: &Topology, node: &NodeId) -> Option<EpochMessage> {
        let n = topo.node(node)?;
        let slots: SlotSet = n
            .slots()
            .iter()
            .filter(|s| self.not_claiming.get(s) != Some(node))
            .collect();
        Some(EpochMessage::Update {
            node: *node,
            config_epoch: n.config_epoch,
            slots: Box::new(slots),
        })
    }

    /// §8 steps 6f–6h for a PING/PONG/MEET from a known sender, in Valkey's order: the role
    /// switch (§11.1), then — if the sender claims primary and (was a replica or claims other
    /// slots than we have for it) — the slot claims (§11.2) and the UPDATE check (§11.3), then
    /// the configEpoch collision check (§11.5).
    ///
    /// The node calls it after the header bookkeeping of §8 step 4 (currentEpoch raised,
    /// a primary's larger configEpoch adopted) and before the gossip section (step 6i), with
    /// `prior` taken before the message was processed.
    pub fn handle_ping_claims(
        &mut self,
        topo: &mut Topology,
        cfg: &EpochConfig,
        msg: &PingClaims<'_>,
        prior: PriorRole,
        out: &mut Vec<EpochEffect>,
    ) {
        let s = msg.sender;
        if s == *topo.myself_id() || !topo.contains(&s) {
            return;
        }
        // A primary claiming a configEpoch my running election asked for has won it (or a
        // later one): retry with a fresh epoch (`Election::lost_to_claim`, Valkey 8.1).
        if msg.role == ClaimedRole::Primary {
            self.election.lost_to_claim(&s, msg.config_epoch, out);
        }
        if let Some(p) = self.handle_role(topo, &s, msg.role, msg.config_epoch, prior, out) {
            // A failover occurred in the sender's shard: the header is now a replica's, its
            // myslots and configEpoch are P's (§3), so they are applied as P's own claim —
            // as an UPDATE about P would be. Valkey leaves the slots bound to the demoted
            // sender until P's claim arrives, which never happens when P died right after
            // its promotion; the shard's next election then gives its winner no slots and
            // the slots stay with a replica (issue 16, found at seed 5225 of the 12-host
            // random failover run).
            self.apply_slot_claims(topo, cfg, &p, msg.config_epoch, msg.slots, out);
        }
        if msg.role == ClaimedRole::Primary {
            let differs = topo.node(&s).is_some_and(|n| n.slots() != msg.slots);
            if prior.was_replica || differs {
                self.apply_slot_claims(topo, cfg, &s, msg.config_epoch, msg.slots, out);
                self.check_stale_claims(topo, &s, msg.config_epoch, msg.slots, out);
            }
        }
        let me = topo.myself();
        let collide = me.is_primary()
            && topo.node(&s).is_some_and(|n| n.is_primary())
            && msg.config_epoch == me.config_epoch;
        if collide {
            handle_config_epoch_collision(topo, &s, out);
        }
    }

    /// §11.1, the role switch (V8). A sender claiming primary becomes one (see
    /// `clusterSetNodeAsPrimary`). A sender claiming to replicate P:
    /// * if we last saw it as a primary: when P is known and in the sender's shard, either the
    ///   message is stale (`sender.configEpoch > header configEpoch`: P is not promoted) or P
    ///   becomes a primary with the header configEpoch ("a failover occurred in the shard");
    ///   otherwise the sender loses all its slots. In all cases the sender becomes a replica;
    /// * if P is known and differs from the sender's recorded primary, the sender moves to P
    ///   (P gets MIGRATE_TO), takes P's shard ID (so do the replicas under it), and — if myself is a replica whose primary
    ///   now replicates some X other than myself — myself follows X (a sub-replica fix; full
    ///   sync unless X is in my shard).
    ///
    /// Never changes myself's own role or epoch from a remote claim naming myself as P.
    /// Returns P when it was made a primary because a failover occurred in the sender's shard
    /// ([`Epoch::handle_ping_claims`] then applies the header's slots as P's claim).
    pub fn handle_role(
        &mut self,
        topo: &mut Topology,
        sender: &NodeId,
        role: ClaimedRole,
        hdr_config_epoch: ConfigEpoch,
        prior: PriorRole,
        out: &mut Vec<EpochEffect>,
    ) -> Option<NodeId> {
        let me = *topo.myself_id();
        if *sender == me || !topo.contains(sender) {
            return None;
        }
        let p = match role {
            ClaimedRole::Primary => {
                if set_node_as_primary(topo, sender) {
                    out.push(EpochEffect::Save);
                    out.push(EpochEffect::UpdateState);
                }
                return None;
            }
            ClaimedRole::ReplicaOf(p) => p.filter(|p| topo.contains(p) && p != sender),
        };
        let mut promoted = None;
        if prior.was_primary {
            match p {
                Some(p) if same_shard(topo, &p, sender) => {
                    let sender_epoch = topo.node(sender).map(|n| n.config_epoch);
                    if sender_epoch.is_some_and(|e| e > hdr_config_epoch) {
                        out.push(EpochEffect::Event(EpochEvent::StaleRoleMessage(*sender)));
                    } else if p != me {
                        set_node_as_primary(topo, &p);
                        if let Some(pn) = topo.node_mut(&p) {
                            pn.config_epoch = hdr_config_epoch;
                        }
                        promoted = Some(p);
                    }
                }
                _ => self.remove_node_slots(topo, sender),
            }
            if let Some(n) = topo.node_mut(sender) {
                n.flags.remove(NodeFlags::PRIMARY | NodeFlags::MIGRATE_TO);
                n.flags.insert(NodeFlags::REPLICA);
            }
            out.push(EpochEffect::Save);
            out.push(EpochEffect::UpdateState);
        }
        let Some(p) = p else { return promoted };
        if topo.node(sender).and_then(|n| n.primary) == Some(p) {
            return promoted;
        }
        attach_replica(topo, sender, &p);
        // Sub-replica: my primary now replicates X (not myself) → follow X.
        let grand = topo
            .myself()
            .primary
            .filter(|_| topo.myself().is_replica())
            .and_then(|mp| topo.node(&mp))
            .and_then(|mp| mp.primary)
            .filter(|x| *x != me);
        if let Some(x) = grand {
            let full = !same_shard(topo, &x, &me);
            if self.set_my_primary(topo, &x, true, full, out) {
                out.push(EpochEffect::Persist);
                out.push(EpochEffect::UpdateState);
            }
        }
        // The sender — and every replica under it — joins P's shard (`updateShardId`, PR #573).
        if let Some(shard) = topo.node(&p).map(|n| n.shard_id) {
            topo.set_shard_id(sender, shard);
        }
        out.push(EpochEffect::Save);
        promoted
    }

    /// Unbinds every slot of `id` (Valkey `clusterDelNodeSlots`).
    fn remove_node_slots(&mut self, topo: &mut Topology, id: &NodeId) {
        let slots: Vec<_> = topo
            .node(id)
            .map(|n| n.slots().iter().collect())
            .unwrap_or_default();
        for s in slots {
            let _ = topo.set_slot_owner(s, None);
            self.not_claiming.remove(&s);
        }
    }

    /// §11.2 (V8 `clusterUpdateSlotsConfigWith`): applies `sender`'s claim of `claimed` under
    /// `claim_epoch` (from a primary's PING/PONG/MEET, or from an UPDATE about `sender`).
    /// Ignored when `sender` is myself or unknown. For every slot:
    /// * claimed and already the sender's: its "owner not claiming" mark is cleared;
    /// * claimed and unclaimed in our table (no owner, or the owner stopped claiming it) or
    ///   owned with a configEpoch lower than `claim_epoch`: rebound to the sender. A slot that
    ///   was mine becomes dirty; one that was my shard's primary's counts as lost to the
    ///   sender; a migrating mark is cleared unless the sender is in my shard; an importing mark
    ///   naming another node is re-pointed to the sender if it is in the source's shard, else
    ///   cleared;
    /// * not claimed but owned by the sender: marked "owner not claiming" (still bound);
    /// * not claimed and migrating to a node M ≠ sender of the sender's shard whose configEpoch
    ///   is lower than the claim's (or which is a replica): the mark moves to the sender;
    /// * not claimed, myself a primary importing it from the sender: the importing mark is
    ///   cleared and, if I do not own it, I take it and bump my configEpoch (§11.6).
    ///
    /// Then: if nothing moved from my shard but the sender and my shard are both empty, in my
    /// shard, with a higher epoch than mine, the sender is my new primary. If my shard lost
    /// its last slot to the sender: myself follows the sender (when replica migration is
    /// allowed or it is in my shard; marks kept and partial sync within the shard), or stays an
    /// empty primary (another shard took the slots by migration) and deletes the keys of its
    /// lost slots. Otherwise the keys of slots I lost are deleted
    /// ([`EpochEffect::DeleteSlotKeys`]).
    pub fn apply_slot_claims(
        &mut self,
        topo: &mut Topology,
        cfg: &EpochConfig,
        sender: &NodeId,
        claim_epoch: ConfigEpoch,
        claimed: &SlotSet,
        out: &mut Vec<EpochEffect>,
    ) {
        let me = *topo.myself_id();
        if *sender == me {
            return;
        }
        let Some(sender_shard) = topo.node(sender).map(|n| n.shard_id) else {
            return;
        };
        let in_my_shard = topo.myself().shard_id == sender_shard;
        let cur_primary = if topo.myself().is_primary() {
            Some(me)
        } else {
            topo.myself().primary
        };
        let mut dirty = SlotSet::new();
        let mut lost_by_my_shard = 0usize;
        let mut changed = false;
        for slot in Slot::all() {
            let owner = topo.slot_owner(slot).copied();
            if claimed.contains(slot) {
                if owner == Some(*sender) {
                    self.not_claiming.remove(&slot);
                    continue;
                }
                let older = owner
                    .and_then(|o| topo.node(&o))
                    .is_some_and(|o| o.config_epoch < claim_epoch);
                if !(self.is_slot_unclaimed(topo, slot) || older) {
                    continue;
                }
                if owner == Some(me) {
                    dirty.insert(slot);
                }
                if owner.is_some() && owner == cur_primary {
                    lost_by_my_shard += 1;
                }
                if topo.migrating_to(slot).is_some() && !in_my_shard {
                    let _ = topo.set_migrating(slot, None);
                }
                if let Some(src) = topo.importing_from(slot).copied() {
                    if src != *sender {
                        let to = same_shard(topo, sender, &src).then_some(*sender);
                        let _ = topo.set_importing(slot, to);
                    }
                }
                // `sender` is known (checked above).
                let _ = topo.set_slot_owner(slot, Some(*sender));
                self.not_claiming.remove(&slot);
                changed = true;
            } else {
                if owner == Some(*sender) {
                    self.not_claiming.insert(slot, *sender);
                }
                if let Some(m) = topo.migrating_to(slot).copied() {
                    let repoint = m != *sender
                        && topo.node(&m).is_some_and(|mn| {
                            (mn.config_epoch < claim_epoch || mn.is_replica())
                                && mn.shard_id == sender_shard
                        });
                    if repoint {
                        let _ = topo.set_migrating(slot, Some(*sender));
                        changed = true;
                    }
                }
                if topo.myself().is_primary() && topo.importing_from(slot) == Some(sender) {
                    let _ = topo.set_importing(slot, None);
                    if owner != Some(me) {
                        let _ = topo.set_slot_owner(slot, Some(me));
                        self.not_claiming.remove(&slot);
                        bump_config_epoch_without_consensus(topo, out);
                    }
                    changed = true;
                }
            }
        }
        if changed {
            out.push(EpochEffect::Persist);
            out.push(EpochEffect::UpdateState);
        }
        let mut new_primary = lost_by_my_shard > 0;
        let my_epoch = topo.reported_config_epoch(topo.myself());
        if !new_primary
            && topo.myself().primary != Some(*sender)
            && claimed.is_empty()
            && topo.myself().slot_count() == 0
            && my_epoch < claim_epoch
            && in_my_shard
        {
            new_primary = true;
        }
        let shard_empty = cur_primary
            .and_then(|c| topo.node(&c))
            .is_some_and(|c| c.slot_count() == 0);
        if new_primary && shard_empty {
            if cfg.allow_replica_migration || in_my_shard {
                if self.set_my_primary(topo, sender, !in_my_shard, !in_my_shard, out) {
                    out.push(EpochEffect::Persist);
                    out.push(EpochEffect::UpdateState);
                    out.push(EpochEffect::Send {
                        to: Target::AllNodes,
                        message: EpochMessage::Pong,
                        after_persist: true,
                    });
                }
            } else if topo.myself().is_primary() && claimed.len() >= lost_by_my_shard {
                out.push(EpochEffect::Event(EpochEvent::EmptyPrimary {
                    lost_to: *sender,
                }));
                if !dirty.is_empty() {
                    out.push(EpochEffect::DeleteSlotKeys(Box::new(dirty)));
                }
            }
        } else if !dirty.is_empty() {
            out.push(EpochEffect::DeleteSlotKeys(Box::new(dirty)));
        }
    }

    /// §11.3: after applying a primary's claims, the first claimed slot that our table gives
    /// (claimed) to another node with a configEpoch greater than `claim_epoch` triggers one
    /// UPDATE about that owner, sent to the sender's outbound link. Returns whether one was
    /// sent.
    pub fn check_stale_claims(
        &self,
        topo: &Topology,
        sender: &NodeId,
        claim_epoch: ConfigEpoch,
        claimed: &SlotSet,
        out: &mut Vec<EpochEffect>,
    ) -> bool {
        for slot in claimed.iter() {
            let Some(owner) = topo.slot_owner(slot) else {
                continue;
            };
            if owner == sender || self.is_slot_unclaimed(topo, slot) {
                continue;
            }
            if topo
                .node(owner)
                .is_some_and(|o| o.config_epoch > claim_epoch)
            {
                if let Some(message) = self.update_message(topo, owner) {
                    out.push(EpochEffect::Send {
                        to: Target::Node(*sender),
                        message,
                        after_persist: false,
                    });
                    return true;
                }
            }
        }
        false
    }

    /// §8 step 12, a received UPDATE (from a known sender) describing `node` with
    /// `config_epoch` and `slots`. Ignored if the node is unknown, is myself (Valkey would
    /// overwrite its own configEpoch first; we leave myself's epoch to myself), or its stored
    /// configEpoch is not lower. Otherwise a replica in our view becomes a primary, the new
    /// configEpoch is stored (save with fsync) and the claims are applied as in §11.2 with the
    /// described node as sender. Returns whether it was applied.
    pub fn handle_update(
        &mut self,
        topo: &mut Topology,
        cfg: &EpochConfig,
        node: &NodeId,
        config_epoch: ConfigEpoch,
        slots: &SlotSet,
        out: &mut Vec<EpochEffect>,
    ) -> bool {
        if node == topo.myself_id() {
            return false;
        }
        let Some(n) = topo.node(node) else {
            return false;
        };
        if n.config_epoch >= config_epoch {
            return false;
        }
        if n.is_replica() {
            set_node_as_primary(topo, node);
        }
        if let Some(n) = topo.node_mut(node) {
            n.config_epoch = config_epoch;
        }
        out.push(EpochEffect::Persist);
        self.apply_slot_claims(topo, cfg, node, config_epoch, slots, out);
        true
    }
}

//! Alert-grade health: what `cluster_state` hides (facts sheet §10, §11.4, §11.5, §11.7).

use crate::HealthInputs;
use ferrocluster_slot::{Slot, SlotSet};
use ferrocluster_topology::{ConfigEpoch, NodeId};
use std::collections::BTreeMap;

/// Slots whose ownership other nodes may see differently from us, by cause. Only what the
/// topology holds (plus the optional owner-not-claiming bitmap) can be judged; see the crate
/// docs, "configEpoch disagreement".
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Disagreements {
    /// Slots owned in our table by a node not flagged PRIMARY. Such a node announces itself
    /// as a replica, so its own claim holds no slots (receivers never take slot ownership
    /// from a replica's message, §11.7) while our table still binds them to it.
    pub owner_not_primary: SlotSet,
    /// Slots owned by a slot-owning primary whose configEpoch equals another slot-owning
    /// primary's: a configEpoch collision not yet resolved (§11.5). While it lasts, a
    /// contested slot goes to whichever claim a node heard first (a claim must have a
    /// *greater* epoch to rebind, §11.2), so nodes can disagree.
    pub epoch_tie: SlotSet,
    /// Slots that have an owner and are in the owner-not-claiming bitmap passed in
    /// ([`HealthInputs::owner_not_claiming`], §11.4): the owner's latest claim left them out.
    pub not_claimed: SlotSet,
}

impl Disagreements {
    /// The union of all causes.
    pub fn all(&self) -> SlotSet {
        self.owner_not_primary
            .union(&self.epoch_tie)
            .union(&self.not_claimed)
    }
}

/// What an alert needs beyond `cluster_state`, from this node's view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    /// The cluster state the node computed (`cluster_state:ok`).
    pub state_ok: bool,
    /// `cluster-require-full-coverage`: when `false`, [`Health::unserved_slots`] and
    /// [`Health::fail_slots`] do not turn the state to fail (§10 step 2).
    pub coverage_required: bool,
    /// Slots with no owner — reported whatever the coverage setting.
    pub unserved_slots: SlotSet,
    /// Slots whose owner is flagged PFAIL and not FAIL (PFAIL never changes the state).
    pub pfail_slots: SlotSet,
    /// Slots whose owner is flagged FAIL.
    pub fail_slots: SlotSet,
    /// Nodes flagged PFAIL and not FAIL (any role; handshake nodes excluded), table order.
    pub pfail_nodes: Vec<NodeId>,
    /// Nodes flagged FAIL (any role; handshake nodes excluded), table order.
    pub fail_nodes: Vec<NodeId>,
    /// Slots whose ownership may be seen differently elsewhere.
    pub disagreements: Disagreements,
}

impl Health {
    /// Evaluates health from the inputs.
    pub fn evaluate(inputs: &HealthInputs<'_>) -> Health {
        let topo = inputs.topology;
        let mut h = Health {
            state_ok: inputs.state_ok,
            coverage_required: inputs.config.require_full_coverage,
            unserved_slots: SlotSet::new(),
            pfail_slots: SlotSet::new(),
            fail_slots: SlotSet::new(),
            pfail_nodes: Vec::new(),
            fail_nodes: Vec::new(),
            disagreements: Disagreements::default(),
        };
        for slot in Slot::all() {
            match topo.slot_owner(slot).and_then(|o| topo.node(o)) {
                None => {
                    h.unserved_slots.insert(slot);
                }
                Some(n) if n.is_fail() => {
                    h.fail_slots.insert(slot);
                }
                Some(n) if n.is_pfail() => {
                    h.pfail_slots.insert(slot);
                }
                Some(_) => {}
            }
        }
        for n in topo.nodes().filter(|n| !n.in_handshake()) {
            if n.is_fail() {
                h.fail_nodes.push(*n.id());
            } else if n.is_pfail() {
                h.pfail_nodes.push(*n.id());
            }
        }
        // configEpoch -> number of slot-owning primaries holding it.
        let mut epochs: BTreeMap<ConfigEpoch, usize> = BTreeMap::new();
        for n in topo.nodes().filter(|n| n.is_voting_primary()) {
            *epochs.entry(n.config_epoch).or_default() += 1;
        }
        let d = &mut h.disagreements;
        for n in topo.nodes().filter(|n| !n.slots().is_empty()) {
            if !n.is_primary() {
                d.owner_not_primary = d.owner_not_primary.union(n.slots());
            } else if epochs.get(&n.config_epoch).is_some_and(|&c| c > 1) {
                d.epoch_tie = d.epoch_tie.union(n.slots());
            }
        }
        if let Some(nc) = inputs.owner_not_claiming {
            let owned = SlotSet::full().difference(&h.unserved_slots);
            d.not_claimed = nc.intersection(&owned);
        }
        h
    }

    /// Slots in any disagreement (the union of [`Health::disagreements`]).
    pub fn disagreeing_slots(&self) -> SlotSet {
        self.disagreements.all()
    }

    /// `fail` when the state is not ok; `degraded` when it is ok but any slot is unserved,
    /// PFAIL, FAIL or disagreeing, or any node is PFAIL/FAIL; else `ok` (INFO `cluster_health`).
    pub fn grade(&self) -> &'static str {
        if !self.state_ok {
            "fail"
        } else if self.unserved_slots.is_empty()
            && self.pfail_slots.is_empty()
            && self.fail_slots.is_empty()
            && self.pfail_nodes.is_empty()
            && self.fail_nodes.is_empty()
            && self.disagreeing_slots().is_empty()
        {
            "ok"
        } else {
            "degraded"
        }
    }
}

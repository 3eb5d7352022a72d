//! The cluster model one node holds: the node table, the slot-owner table, importing/migrating
//! marks, currentEpoch, lastVoteEpoch and which node is myself (Valkey's `clusterState`).

use crate::{ConfigEpoch, CurrentEpoch, Millis, Node, NodeFlags, NodeId, ShardId};
use ferrocluster_slot::{Slot, SLOT_COUNT};
use hashbrown::HashMap;
use std::collections::BTreeMap;

/// Host or engine misuse of the model: an operation named a node that does not exist, or would
/// break an invariant. The model is unchanged whenever one of these is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TopologyError {
    /// No node with this ID is known.
    #[error("unknown node {0}")]
    UnknownNode(NodeId),
    /// A node with this ID already exists.
    #[error("node {0} already exists")]
    DuplicateNode(NodeId),
    /// Myself cannot be removed.
    #[error("cannot remove myself")]
    RemoveMyself,
    /// A node cannot be its own primary.
    #[error("node {0} cannot replicate itself")]
    SelfReplication(NodeId),
    /// The record passed to [`Topology::add_node`] carried MYSELF; there is exactly one myself.
    #[error("node {0} carries the MYSELF flag; there is exactly one myself")]
    SecondMyself(NodeId),
}

/// The cluster as this node sees it.
///
/// Invariants (kept by every method; fields are private for that reason):
/// * exactly one node is myself ([`Topology::myself`]) and carries [`NodeFlags::MYSELF`];
/// * for every slot, `slot_owner(slot) == Some(id)` exactly when `node(id).slots()` contains
///   it;
/// * importing/migrating marks and slot owners only name known nodes.
///
/// Iteration over nodes ([`Topology::nodes`]) is in insertion order (nodes.conf load order
/// for a loaded model), so every output built from it is deterministic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    nodes: Vec<Node>,
    index: HashMap<NodeId, usize>,
    owners: Box<[Option<NodeId>]>,
    importing: BTreeMap<Slot, NodeId>,
    migrating: BTreeMap<Slot, NodeId>,
    myself: NodeId,
    /// Position of myself in `nodes` (kept by `from_nodes` and `remove_node`, the only
    /// changes that move records): [`Topology::myself`] is called on every input.
    myself_pos: usize,
    /// The cluster's currentEpoch.
    pub current_epoch: CurrentEpoch,
    /// The currentEpoch in which this node last voted (persisted before a vote leaves, §22).
    pub last_vote_epoch: CurrentEpoch,
}

impl Topology {
    /// A model holding only `myself` (its MYSELF flag is set here; its slots must be empty,
    /// slots are assigned with [`Topology::set_slot_owner`]). Epochs start at 0.
    pub fn new(mut myself: Node) -> Topology {
        myself.flags.insert(NodeFlags::MYSELF);
        myself.slots.clear();
        let id = myself.id;
        let mut index = HashMap::new();
        index.insert(id, 0);
        Topology {
            nodes: vec![myself],
            index,
            owners: vec![None; SLOT_COUNT].into_boxed_slice(),
            importing: BTreeMap::new(),
            migrating: BTreeMap::new(),
            myself: id,
            myself_pos: 0,
            current_epoch: CurrentEpoch(0),
            last_vote_epoch: CurrentEpoch(0),
        }
    }

    /// Builds a model from records in table order; `myself` must be among them (the loader
    /// uses this to keep the file's line order). Slots of the records are ignored.
    pub(crate) fn from_nodes(nodes: Vec<Node>, myself: NodeId) -> Option<Topology> {
        let mut t = Topology {
            nodes: Vec::with_capacity(nodes.len()),
            index: HashMap::with_capacity(nodes.len()),
            owners: vec![None; SLOT_COUNT].into_boxed_slice(),
            importing: BTreeMap::new(),
            migrating: BTreeMap::new(),
            myself,
            myself_pos: 0,
            current_epoch: CurrentEpoch(0),
            last_vote_epoch: CurrentEpoch(0),
        };
        for mut n in nodes {
            if t.index.contains_key(&n.id) {
                return None;
            }
            n.slots.clear();
            n.flags.set(NodeFlags::MYSELF, n.id == myself);
            t.index.insert(n.id, t.nodes.len());
            t.nodes.push(n);
        }
        t.myself_pos = *t.index.get(&myself)?;
        Some(t)
    }

    /// A brand-new identity as Valkey creates on first start (§18.3: random node ID and shard
    /// ID, flags MYSELF|PRIMARY), both drawn from `rng`.
    pub fn fresh<R: rand_core::RngCore + ?Sized>(rng: &mut R, now: Millis) -> Topology {
        let id = NodeId::random(rng);
        let shard = ShardId::random(rng);
        let mut me = Node::new(id, shard, now);
        me.flags = NodeFlags::MYSELF | NodeFlags::PRIMARY;
        me.link = crate::LinkState::Connected;
        Topology::new(me)
    }

    // ----- lookups -----

    /// The ID of myself.
    pub fn myself_id(&self) -> &NodeId {
        &self.myself
    }

    /// Myself.
    pub fn myself(&self) -> &Node {
        // `myself_pos` always points at myself (invariant, checked by check_invariants).
        &self.nodes[self.myself_pos]
    }

    /// Myself, mutable (not its ID or slots, see [`Node`]).
    pub fn myself_mut(&mut self) -> &mut Node {
        &mut self.nodes[self.myself_pos]
    }

    /// The node with this ID (case-sensitive, §1.1).
    pub fn node(&self, id: &NodeId) -> Option<&Node> {
        self.index.get(id).map(|&i| &self.nodes[i])
    }

    /// The node with this ID, mutable.
    pub fn node_mut(&mut self, id: &NodeId) -> Option<&mut Node> {
        self.index.get(id).map(|&i| &mut self.nodes[i])
    }

    /// Whether a node with this ID is known.
    pub fn contains(&self, id: &NodeId) -> bool {
        self.index.contains_key(id)
    }

    /// Every node (myself and handshake nodes included) in table order.
    pub fn nodes(&self) -> impl ExactSizeIterator<Item = &Node> + DoubleEndedIterator {
        self.nodes.iter()
    }

    /// The node at position `i` of table order (`0..len()`), as [`Topology::nodes`] lists
    /// it; `None` past the end. For uniform random picks without collecting the table.
    pub fn node_at(&self, i: usize) -> Option<&Node> {
        self.nodes.get(i)
    }

    /// Every node, mutable, in table order.
    pub fn nodes_mut(&mut self) -> impl ExactSizeIterator<Item = &mut Node> {
        self.nodes.iter_mut()
    }

    /// Number of known nodes, myself and handshake nodes included (`cluster_known_nodes`).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Always `false`: myself is always present. Present for API symmetry.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The replicas whose `primary` is `id`, in table order (Valkey keeps an explicit list;
    /// here it is derived, so it cannot go stale).
    pub fn replicas_of<'a>(&'a self, id: &'a NodeId) -> impl Iterator<Item = &'a Node> + 'a {
        self.nodes
            .iter()
            .filter(move |n| n.primary.as_ref() == Some(id))
    }

    /// Number of voting primaries (flag PRIMARY and at least one slot): `cluster_size`.
    pub fn cluster_size(&self) -> usize {
        self.nodes.iter().filter(|n| n.is_voting_primary()).count()
    }

    /// The configEpoch a node reports (nodes.conf, CLUSTER NODES, `cluster_my_epoch`): the
    /// primary's for a node whose `primary` is known, else its own (§18.1 field 7;
    /// Valkey `nodeEpoch`).
    pub fn reported_config_epoch(&self, node: &Node) -> ConfigEpoch {
        match node.primary.as_ref().and_then(|p| self.node(p)) {
            Some(p) => p.config_epoch,
            None => node.config_epoch,
        }
    }

    /// The largest configEpoch of any node.
    pub fn max_config_epoch(&self) -> ConfigEpoch {
        self.nodes
            .iter()
            .map(|n| n.config_epoch)
            .max()
            .unwrap_or_default()
    }

    /// The nodes of a shard, in table order.
    pub fn shard_members<'a>(&'a self, shard: &'a ShardId) -> impl Iterator<Item = &'a Node> + 'a {
        self.nodes.iter().filter(move |n| n.shard_id == *shard)
    }

    /// The top of `id`'s replication chain: follows `primary` while it names a known node
    /// (at most [`Topology::len`] hops, so a cycle ends). `id` itself when it has no known
    /// primary; `None` if `id` is unknown.
    pub fn shard_root(&self, id: &NodeId) -> Option<NodeId> {
        let mut cur = self.node(id)?;
        for _ in 0..self.nodes.len() {
            match cur.primary.as_ref().and_then(|p| self.node(p)) {
                Some(p) if p.id != *id => cur = p,
                _ => break,
            }
        }
        Some(cur.id)
    }

    /// Sets the shard ID of `id` and of every node that replicates it, directly or through a
    /// chain of replicas (myself included): a replica is always in its primary's shard. This
    /// is Valkey's `updateShardId` with the fix of valkey-io/valkey PR #573 (replicas follow
    /// their primary's new shard ID; before it, a replica could keep a placeholder shard ID
    /// and write a nodes.conf its own restart refused, issues #774 / #2171).
    ///
    /// Returns whether any node's shard ID changed; `false` (nothing done) if `id` is unknown.
    pub fn set_shard_id(&mut self, id: &NodeId, shard: ShardId) -> bool {
        if !self.contains(id) {
            return false;
        }
        let mut tree = vec![*id];
        let mut i = 0;
        while i < tree.len() {
            let p = tree[i];
            for n in &self.nodes {
                if n.primary == Some(p) && !tree.contains(&n.id) {
                    tree.push(n.id);
                }
            }
            i += 1;
        }
        let mut changed = false;
        for m in &tree {
            if let Some(n) = self.node_mut(m) {
                if n.shard_id != shard {
                    n.shard_id = shard;
                    changed = true;
                }
            }
        }
        changed
    }

    // ----- node table changes -----

    /// Adds a node record. Its slot set is ignored (cleared): assign slots afterwards with
    /// [`Topology::set_slot_owner`].
    ///
    /// # Errors
    /// [`TopologyError::DuplicateNode`] if the ID is known; [`TopologyError::SecondMyself`] if
    /// the record carries MYSELF.
    pub fn add_node(&mut self, mut node: Node) -> Result<(), TopologyError> {
        if self.index.contains_key(&node.id) {
            return Err(TopologyError::DuplicateNode(node.id));
        }
        if node.is_myself() {
            return Err(TopologyError::SecondMyself(node.id));
        }
        node.slots.clear();
        self.index.insert(node.id, self.nodes.len());
        self.nodes.push(node);
        Ok(())
    }

    /// Deletes a node as Valkey's `clusterDelNode` does: its slots become unowned, marks naming
    /// it are cleared, failure reports it authored are removed from every node (§9.2), and its
    /// replicas forget their primary. Returns the removed record.
    ///
    /// # Errors
    /// [`TopologyError::RemoveMyself`], [`TopologyError::UnknownNode`].
    pub fn remove_node(&mut self, id: &NodeId) -> Result<Node, TopologyError> {
        if *id == self.myself {
            return Err(TopologyError::RemoveMyself);
        }
        let pos = *self.index.get(id).ok_or(TopologyError::UnknownNode(*id))?;
        let node = self.nodes.remove(pos);
        if pos < self.myself_pos {
            self.myself_pos -= 1;
        }
        self.index.remove(id);
        for (i, n) in self.nodes.iter().enumerate().skip(pos) {
            self.index.insert(n.id, i);
        }
        for slot in node.slots.iter() {
            self.owners[slot.index()] = None;
        }
        self.importing.retain(|_, n| n != id);
        self.migrating.retain(|_, n| n != id);
        for n in &mut self.nodes {
            n.failure_reports.remove(id);
            if n.primary.as_ref() == Some(id) {
                n.primary = None;
            }
        }
        Ok(node)
    }

    /// Renames a node (a handshake node gets its real ID, Valkey `clusterRenameNode`). Every
    /// reference moves with it: slot owners, marks, `primary` fields, failure reports it
    /// authored. Myself may be renamed too (CLUSTER RESET HARD).
    ///
    /// # Errors
    /// [`TopologyError::UnknownNode`] for `old`; [`TopologyError::DuplicateNode`] if `new` is
    /// already taken.
    pub fn rename_node(&mut self, old: &NodeId, new: NodeId) -> Result<(), TopologyError> {
        let pos = *self
            .index
            .get(old)
            .ok_or(TopologyError::UnknownNode(*old))?;
        if *old == new {
            return Ok(());
        }
        if self.index.contains_key(&new) {
            return Err(TopologyError::DuplicateNode(new));
        }
        self.index.remove(old);
        self.index.insert(new, pos);
        self.nodes[pos].id = new;
        if self.myself == *old {
            self.myself = new;
        }
        for slot in self.nodes[pos].slots.iter() {
            self.owners[slot.index()] = Some(new);
        }
        for v in self
            .importing
            .values_mut()
            .chain(self.migrating.values_mut())
        {
            if v == old {
                *v = new;
            }
        }
        for n in &mut self.nodes {
            if n.primary.as_ref() == Some(old) {
                n.primary = Some(new);
            }
            if let Some(t) = n.failure_reports.remove(old) {
                n.failure_reports.insert(new, t);
            }
        }
        Ok(())
    }

    // ----- roles -----

    /// Makes `replica` a replica of `primary`: sets its `primary`, sets REPLICA and clears
    /// PRIMARY. Its slots, shard ID and the primary's flags are left to the caller (the engine
    /// decides those by the rules of §11.1).
    ///
    /// # Errors
    /// [`TopologyError::UnknownNode`] for either ID; [`TopologyError::SelfReplication`].
    pub fn set_primary(&mut self, replica: &NodeId, primary: NodeId) -> Result<(), TopologyError> {
        if *replica == primary {
            return Err(TopologyError::SelfReplication(primary));
        }
        if !self.contains(&primary) {
            return Err(TopologyError::UnknownNode(primary));
        }
        let n = self
            .node_mut(replica)
            .ok_or(TopologyError::UnknownNode(*replica))?;
        n.primary = Some(primary);
        n.flags.remove(NodeFlags::PRIMARY);
        n.flags.insert(NodeFlags::REPLICA);
        Ok(())
    }

    /// Makes a node a primary: clears `primary` and REPLICA, sets PRIMARY.
    ///
    /// # Errors
    /// [`TopologyError::UnknownNode`].
    pub fn set_as_primary(&mut self, id: &NodeId) -> Result<(), TopologyError> {
        let n = self.node_mut(id).ok_or(TopologyError::UnknownNode(*id))?;
        n.primary = None;
        n.flags.remove(NodeFlags::REPLICA);
        n.flags.insert(NodeFlags::PRIMARY);
        Ok(())
    }

    // ----- slots -----

    /// The owner of a slot, if any.
    pub fn slot_owner(&self, slot: Slot) -> Option<&NodeId> {
        self.owners[slot.index()].as_ref()
    }

    /// Sets (or with `None` clears) a slot's owner, updating both the owner table and the old
    /// and new owners' slot sets. Returns the previous owner. Marks are not touched.
    ///
    /// # Errors
    /// [`TopologyError::UnknownNode`] for an unknown new owner.
    pub fn set_slot_owner(
        &mut self,
        slot: Slot,
        owner: Option<NodeId>,
    ) -> Result<Option<NodeId>, TopologyError> {
        let new_pos = match owner {
            Some(id) => Some(*self.index.get(&id).ok_or(TopologyError::UnknownNode(id))?),
            None => None,
        };
        let prev = self.owners[slot.index()].take();
        if let Some(p) = prev {
            // The owner table only names known nodes (invariant).
            let i = self.index[&p];
            self.nodes[i].slots.remove(slot);
        }
        if let Some(i) = new_pos {
            self.nodes[i].slots.insert(slot);
        }
        self.owners[slot.index()] = owner;
        Ok(prev)
    }

    /// Number of slots with an owner (`cluster_slots_assigned`).
    pub fn assigned_slot_count(&self) -> usize {
        self.owners.iter().filter(|o| o.is_some()).count()
    }

    // ----- importing / migrating marks (myself's open slots, §15) -----

    /// The node a slot is being imported from, if marked importing.
    pub fn importing_from(&self, slot: Slot) -> Option<&NodeId> {
        self.importing.get(&slot)
    }

    /// The node a slot is being migrated to, if marked migrating.
    pub fn migrating_to(&self, slot: Slot) -> Option<&NodeId> {
        self.migrating.get(&slot)
    }

    /// Sets or clears a slot's importing mark. Returns the previous mark.
    ///
    /// # Errors
    /// [`TopologyError::UnknownNode`] for an unknown node.
    pub fn set_importing(
        &mut self,
        slot: Slot,
        from: Option<NodeId>,
    ) -> Result<Option<NodeId>, TopologyError> {
        Self::set_mark(&self.index, &mut self.importing, slot, from)
    }

    /// Sets or clears a slot's migrating mark. Returns the previous mark.
    ///
    /// # Errors
    /// [`TopologyError::UnknownNode`] for an unknown node.
    pub fn set_migrating(
        &mut self,
        slot: Slot,
        to: Option<NodeId>,
    ) -> Result<Option<NodeId>, TopologyError> {
        Self::set_mark(&self.index, &mut self.migrating, slot, to)
    }

    fn set_mark(
        index: &HashMap<NodeId, usize>,
        marks: &mut BTreeMap<Slot, NodeId>,
        slot: Slot,
        node: Option<NodeId>,
    ) -> Result<Option<NodeId>, TopologyError> {
        match node {
            Some(id) if !index.contains_key(&id) => Err(TopologyError::UnknownNode(id)),
            Some(id) => Ok(marks.insert(slot, id)),
            None => Ok(marks.remove(&slot)),
        }
    }

    /// Every importing mark (slot -> source), ascending by slot.
    pub fn importing(&self) -> impl Iterator<Item = (Slot, &NodeId)> {
        self.importing.iter().map(|(s, n)| (*s, n))
    }

    /// Every migrating mark (slot -> target), ascending by slot.
    pub fn migrating(&self) -> impl Iterator<Item = (Slot, &NodeId)> {
        self.migrating.iter().map(|(s, n)| (*s, n))
    }

    // ----- failure reports -----

    /// Adds or refreshes `reporter`'s failure report about `target` at `now` (§9.2); `true` if
    /// it is new.
    ///
    /// # Errors
    /// [`TopologyError::UnknownNode`] for either ID.
    pub fn add_failure_report(
        &mut self,
        target: &NodeId,
        reporter: &NodeId,
        now: Millis,
    ) -> Result<bool, TopologyError> {
        if !self.contains(reporter) {
            return Err(TopologyError::UnknownNode(*reporter));
        }
        let n = self
            .node_mut(target)
            .ok_or(TopologyError::UnknownNode(*target))?;
        Ok(n.add_failure_report(*reporter, now))
    }

    /// Removes `reporter`'s report about `target`; `true` if there was one.
    ///
    /// # Errors
    /// [`TopologyError::UnknownNode`] for `target`.
    pub fn remove_failure_report(
        &mut self,
        target: &NodeId,
        reporter: &NodeId,
    ) -> Result<bool, TopologyError> {
        let n = self
            .node_mut(target)
            .ok_or(TopologyError::UnknownNode(*target))?;
        Ok(n.remove_failure_report(reporter))
    }

    /// Discards reports about `target` older than `validity_ms` and counts the rest
    /// (`CLUSTER COUNT-FAILURE-REPORTS`, the FAIL quorum check, §9.2/§9.3).
    ///
    /// # Errors
    /// [`TopologyError::UnknownNode`] for `target`.
    pub fn count_valid_failure_reports(
        &mut self,
        target: &NodeId,
        now: Millis,
        validity_ms: u64,
    ) -> Result<usize, TopologyError> {
        let n = self
            .node_mut(target)
            .ok_or(TopologyError::UnknownNode(*target))?;
        Ok(n.count_valid_failure_reports(now, validity_ms))
    }

    /// Checks the invariants listed on [`Topology`]; `Err` names the first broken one. For
    /// tests and simulators (cheap enough to call after every step of a small cluster).
    ///
    /// # Errors
    /// A text naming the broken invariant.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mine: Vec<_> = self.nodes.iter().filter(|n| n.is_myself()).collect();
        if mine.len() != 1 || mine[0].id != self.myself {
            return Err(format!("{} nodes carry MYSELF", mine.len()));
        }
        if self.nodes.get(self.myself_pos).map(|n| n.id) != Some(self.myself) {
            return Err("myself's cached position is stale".into());
        }
        for (i, n) in self.nodes.iter().enumerate() {
            if self.index.get(&n.id) != Some(&i) {
                return Err(format!("index out of date for {}", n.id));
            }
            for s in n.slots.iter() {
                if self.owners[s.index()].as_ref() != Some(&n.id) {
                    return Err(format!("{} has slot {s} but the table disagrees", n.id));
                }
            }
        }
        if self.index.len() != self.nodes.len() {
            return Err("index has stale entries".into());
        }
        // Every slot in a node's set maps to that node in the table (above), so the sets
        // cover every owned slot exactly when they hold as many slots as the table has owned
        // ones; only on a mismatch is the table walked slot by slot (16384 look-ups) to name
        // the first slot whose owner does not hold it.
        let held: usize = self.nodes.iter().map(|n| n.slot_count()).sum();
        let owned = self.owners.iter().filter(|o| o.is_some()).count();
        if held != owned {
            for (s, owner) in Slot::all().zip(self.owners.iter()) {
                if let Some(o) = owner {
                    match self.node(o) {
                        Some(n) if n.slots.contains(s) => {}
                        _ => return Err(format!("slot {s} owner {o} does not hold it")),
                    }
                }
            }
            return Err(format!(
                "nodes hold {held} slots, the table has {owned} owners"
            ));
        }
        for n in self.importing.values().chain(self.migrating.values()) {
            if !self.contains(n) {
                return Err(format!("mark names unknown node {n}"));
            }
        }
        Ok(())
    }
}

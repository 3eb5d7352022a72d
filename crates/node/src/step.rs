//! One step of the node: the context every layer of an input pushes into.
//!
//! An input (`handle_*`, a command) opens nothing explicitly: [`Step`] is the node's
//! per-input context, and the layers' effects land in it — outputs in order, whether the
//! configuration must be saved, whether transmits must wait for that save, whether the
//! cluster state must be re-evaluated, the reply of a command. [`crate::ClusterNode`]'s step
//! end drains it into the output queue, in one place (openraft's `Engine` handlers push
//! commands into one output the same way).

use crate::output::Tag;
use crate::{Notice, Output, RequestId};
use ferrocluster_topology::Reply;

/// The effects of the current step, drained by the node's step end.
#[derive(Debug, Default)]
pub(crate) struct Step {
    /// Outputs in order; `true` = waits for this step's persist.
    outputs: Vec<(bool, Output, Tag)>,
    /// The configuration changed: a `Persist` ends the step.
    save: bool,
    /// Every transmit of the step (staged before or after) waits for the persist: the change
    /// must be durable before any message carries it (a configEpoch set by command, a
    /// SETSLOT that made myself a replica).
    durable_first: bool,
    /// Transmits staged from now on wait for the persist (an epoch `Persist`: a vote, a
    /// bumped epoch, a take-over).
    gate_from_here: bool,
    /// The cluster state must be re-evaluated.
    state_dirty: bool,
    /// Myself became a primary (the migration engine hears of it at the step end).
    promoted: bool,
    /// The step is a CLUSTER command or a configuration change of the host's (exempt from
    /// the "only a higher configEpoch takes my slots" invariant).
    local: bool,
    /// Myself's IP was learned from a link's local address in this step.
    learned_ip: bool,
    /// The reply of the command this step runs.
    reply: Option<(RequestId, Reply)>,
}

/// What the step end takes out of a [`Step`].
#[derive(Debug)]
pub(crate) struct Drained {
    pub(crate) outputs: Vec<(bool, Output, Tag)>,
    pub(crate) save: bool,
    pub(crate) durable_first: bool,
    pub(crate) local: bool,
    pub(crate) learned_ip: bool,
    pub(crate) reply: Option<(RequestId, Reply)>,
}

impl Step {
    /// Stages an output that may leave at once.
    pub(crate) fn push(&mut self, out: Output) {
        self.outputs.push((false, out, Tag::None));
    }

    /// Stages a notice.
    pub(crate) fn notice(&mut self, n: Notice) {
        self.push(Output::Notice(n));
    }

    /// Stages a transmit: held for the persist when the step asked for it.
    pub(crate) fn transmit(&mut self, out: Output, tag: Tag) {
        self.outputs.push((self.gate_from_here, out, tag));
    }

    /// The configuration changed: save it at the step end.
    pub(crate) fn save(&mut self) {
        self.save = true;
    }

    /// Save, and hold every transmit staged from now on until the save is durable.
    pub(crate) fn save_before_later_transmits(&mut self) {
        self.save = true;
        self.gate_from_here = true;
    }

    /// Save, and hold every transmit of the whole step until the save is durable.
    pub(crate) fn save_before_all_transmits(&mut self) {
        self.save = true;
        self.durable_first = true;
    }

    /// Whether a save is due at the step end.
    pub(crate) fn saving(&self) -> bool {
        self.save
    }

    /// The cluster state must be re-evaluated at the step end.
    pub(crate) fn update_state(&mut self) {
        self.state_dirty = true;
    }

    /// Takes the "re-evaluate the cluster state" request.
    pub(crate) fn take_state_dirty(&mut self) -> bool {
        std::mem::take(&mut self.state_dirty)
    }

    /// Whether the state will be re-evaluated (a topology change is pending).
    pub(crate) fn state_dirty(&self) -> bool {
        self.state_dirty
    }

    /// Myself became a primary.
    pub(crate) fn promoted(&mut self) {
        self.promoted = true;
    }

    /// Takes the "myself became a primary" mark.
    pub(crate) fn take_promoted(&mut self) -> bool {
        std::mem::take(&mut self.promoted)
    }

    /// The step runs a command of the host's (CLUSTER, a configuration change).
    pub(crate) fn local(&mut self) {
        self.local = true;
    }

    /// Myself's IP was learned from a link's local address.
    pub(crate) fn learned_ip(&mut self) {
        self.learned_ip = true;
    }

    /// The reply of the command this step runs.
    pub(crate) fn reply(&mut self, to: RequestId, reply: Reply) {
        self.reply = Some((to, reply));
    }

    /// Empties the step for the next one (hand the outputs' buffer back with
    /// [`Step::recycle`]).
    pub(crate) fn drain(&mut self) -> Drained {
        let outputs = std::mem::take(&mut self.outputs);
        let s = std::mem::take(self);
        Drained {
            outputs,
            save: s.save,
            durable_first: s.durable_first,
            local: s.local,
            learned_ip: s.learned_ip,
            reply: s.reply,
        }
    }

    /// Keeps the emptied buffer of a drained step for the next one.
    pub(crate) fn recycle(&mut self, mut outputs: Vec<(bool, Output, Tag)>) {
        if self.outputs.is_empty() {
            outputs.clear();
            self.outputs = outputs;
        }
    }
}

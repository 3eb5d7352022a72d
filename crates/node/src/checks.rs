//! The node's own invariants ([`crate::ClusterNode::invariants`]): what must hold after every
//! step whatever the inputs were. The simulator calls it after every step and the fuzz
//! targets after every input; a violation is a bug in the engine, never a host error.
//!
//! The checks are cheap (constant work per step and per output, plus one comparison of
//! myself's slot bitmap): transitions are checked where they happen — at the step end and
//! when an output leaves — and the first broken one is kept.

use crate::output::Tag;
use ferrocluster_slot::{Slot, SlotSet};
use ferrocluster_topology::{Node, NodeId, Topology};
use std::collections::VecDeque;
use std::hash::{Hash, Hasher};

/// A broken invariant of [`crate::ClusterNode`] (a bug; see
/// [`crate::ClusterNode::invariants`] for the list).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvariantViolation {
    /// A FAILOVER_AUTH_ACK left before the lastVoteEpoch of that vote was durable (Valkey
    /// saves it with `clusterSaveConfigOrDie` in `clusterSendFailoverAuthIfNeeded` before
    /// replying).
    #[error("a vote for epoch {epoch} left while the durable lastVoteEpoch was {durable}")]
    VoteNotDurable {
        /// The vote's epoch.
        epoch: u64,
        /// lastVoteEpoch of the latest acknowledged persist.
        durable: u64,
    },
    /// A FAILOVER_AUTH_REQUEST left before its bumped currentEpoch was durable.
    #[error("an auth request for epoch {epoch} left while the durable currentEpoch was {durable}")]
    AuthRequestNotDurable {
        /// The request's currentEpoch.
        epoch: u64,
        /// currentEpoch of the latest acknowledged persist.
        durable: u64,
    },
    /// Two votes left in one epoch, or a vote in an older epoch after a newer one.
    #[error("a vote for epoch {epoch} left after a vote for epoch {previous}")]
    SecondVote {
        /// The new vote's epoch.
        epoch: u64,
        /// The epoch of the vote before it.
        previous: u64,
    },
    /// currentEpoch, myself's configEpoch or lastVoteEpoch went down (only CLUSTER RESET
    /// HARD zeroes them).
    #[error("{which} went down from {from} to {to}")]
    EpochWentDown {
        /// `currentEpoch`, `configEpoch` or `lastVoteEpoch`.
        which: &'static str,
        /// Before the step.
        from: u64,
        /// After it.
        to: u64,
    },
    /// A slot of myself's went to another node, on a peer's word (not a command of the
    /// host's), although that node's configEpoch is not above myself's: two nodes of one
    /// configEpoch would both have claimed it.
    #[error("slot {slot} went from myself (configEpoch {mine}) to {to} with configEpoch {theirs}")]
    SlotTakenWithoutHigherEpoch {
        /// The slot.
        slot: Slot,
        /// Its new owner.
        to: NodeId,
        /// The new owner's configEpoch.
        theirs: u64,
        /// Myself's configEpoch before the step.
        mine: u64,
    },
    /// Myself's record was rewritten by a peer's message: its address or ports changed
    /// outside a command of the host's and own-IP discovery, or it carries a flag only other
    /// nodes can have (PFAIL, FAIL, handshake, no address), or it is not PRIMARY xor REPLICA.
    #[error("myself's record was rewritten: {0}")]
    MyselfRewritten(String),
}

/// The epochs one nodes.conf carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Epochs {
    current: u64,
    config: u64,
    last_vote: u64,
}

impl Epochs {
    pub(crate) fn of(topo: &Topology) -> Epochs {
        Epochs {
            current: topo.current_epoch.0,
            config: topo.myself().config_epoch.0,
            last_vote: topo.last_vote_epoch.0,
        }
    }
}

/// The state the invariants compare against, kept by the node.
#[derive(Debug, Clone)]
pub(crate) struct Checks {
    /// The epochs of the latest acknowledged persist.
    durable: Epochs,
    /// Persists queued and not acknowledged yet, oldest first.
    pending: VecDeque<(u64, Epochs)>,
    /// The epochs at the last step end.
    last: Epochs,
    /// The epoch of the last vote that left.
    last_vote_sent: Option<u64>,
    /// Myself's slots at the last step end.
    my_slots: SlotSet,
    /// Myself's IP and a digest of its other address fields at the last step end.
    my_addr: (Option<std::net::IpAddr>, u64),
    /// The first violation found.
    violation: Option<InvariantViolation>,
}

impl Checks {
    /// The checks of a node built from `topo`: when it was loaded from a saved nodes.conf,
    /// that file's epochs are durable already.
    pub(crate) fn new(topo: &Topology, loaded: bool) -> Checks {
        let now = Epochs::of(topo);
        Checks {
            durable: if loaded { now } else { Epochs::default() },
            pending: VecDeque::new(),
            last: now,
            last_vote_sent: None,
            my_slots: topo.myself().slots().clone(),
            my_addr: (topo.myself().ip, addr_fingerprint(topo.myself())),
            violation: None,
        }
    }

    fn fail(&mut self, v: InvariantViolation) {
        if self.violation.is_none() {
            self.violation = Some(v);
        }
    }

    /// A `Persist` of `topo` as it is now was queued with `seq`.
    pub(crate) fn persist_queued(&mut self, seq: u64, topo: &Topology) {
        self.pending.push_back((seq, Epochs::of(topo)));
    }

    /// The host acknowledged every persist up to `seq`.
    pub(crate) fn persisted(&mut self, seq: u64) {
        while let Some(&(s, e)) = self.pending.front() {
            if s > seq {
                break;
            }
            self.durable = e;
            self.pending.pop_front();
        }
    }

    /// An output with `tag` left the node.
    pub(crate) fn left(&mut self, tag: Tag) {
        match tag {
            Tag::None => {}
            Tag::Vote(epoch) => {
                if self.durable.last_vote < epoch {
                    self.fail(InvariantViolation::VoteNotDurable {
                        epoch,
                        durable: self.durable.last_vote,
                    });
                }
                if let Some(previous) = self.last_vote_sent.filter(|p| *p >= epoch) {
                    self.fail(InvariantViolation::SecondVote { epoch, previous });
                }
                self.last_vote_sent = Some(epoch);
            }
            Tag::AuthRequest(epoch) => {
                if self.durable.current < epoch {
                    self.fail(InvariantViolation::AuthRequestNotDurable {
                        epoch,
                        durable: self.durable.current,
                    });
                }
            }
        }
    }

    /// CLUSTER RESET HARD zeroed the epochs: the new values are the baseline.
    pub(crate) fn epochs_reset(&mut self, topo: &Topology) {
        self.last = Epochs::of(topo);
        self.last_vote_sent = None;
    }

    /// The step end: epochs, myself's slots and record against the previous step end.
    /// `local`: the step ran a command or configuration change of the host's;
    /// `learned_ip`: own-IP discovery set myself's IP in it.
    pub(crate) fn step_end(&mut self, topo: &Topology, local: bool, learned_ip: bool) {
        let now = Epochs::of(topo);
        for (which, from, to) in [
            ("currentEpoch", self.last.current, now.current),
            ("configEpoch", self.last.config, now.config),
            ("lastVoteEpoch", self.last.last_vote, now.last_vote),
        ] {
            if to < from {
                self.fail(InvariantViolation::EpochWentDown { which, from, to });
            }
        }
        let me = topo.myself();
        if me.slots() != &self.my_slots {
            if !local {
                let lost = self.my_slots.difference(me.slots());
                for slot in lost.iter() {
                    let Some(to) = topo.slot_owner(slot).copied() else {
                        continue;
                    };
                    let theirs = topo.node(&to).map_or(0, |n| n.config_epoch.0);
                    if theirs <= self.last.config {
                        self.fail(InvariantViolation::SlotTakenWithoutHigherEpoch {
                            slot,
                            to,
                            theirs,
                            mine: self.last.config,
                        });
                        break;
                    }
                }
            }
            self.my_slots = me.slots().clone();
        }
        if let Err(why) = check_myself(me) {
            self.fail(InvariantViolation::MyselfRewritten(why));
        }
        let addr = (me.ip, addr_fingerprint(me));
        let ip_only = learned_ip && addr.1 == self.my_addr.1;
        if addr != self.my_addr && !local && !ip_only {
            // Own-IP discovery may set the IP (from the link's local address, not from the
            // peer's words); nothing else of myself's address changes on a peer's message.
            self.fail(InvariantViolation::MyselfRewritten(format!(
                "address changed to {:?}:{}@{} outside a command",
                me.ip, me.port, me.bus_port
            )));
        }
        self.my_addr = addr;
        self.last = now;
    }

    /// The first violation found, if any.
    pub(crate) fn violation(&self) -> Option<&InvariantViolation> {
        self.violation.as_ref()
    }
}

/// Myself's flags: PRIMARY xor REPLICA, none of the flags only other nodes carry.
fn check_myself(me: &Node) -> Result<(), String> {
    if me.is_primary() == me.is_replica() {
        return Err(format!(
            "flags {} are not PRIMARY xor REPLICA",
            me.flags.names()
        ));
    }
    if me.is_pfail() || me.is_fail() || me.in_handshake() || me.has_no_addr() {
        return Err(format!("flags {}", me.flags.names()));
    }
    Ok(())
}

/// A digest of myself's address fields but the IP (ports, names, client IPs).
fn addr_fingerprint(n: &Node) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    n.port.hash(&mut h);
    n.tls_port.hash(&mut h);
    n.bus_port.hash(&mut h);
    n.hostname.hash(&mut h);
    n.human_nodename.hash(&mut h);
    n.client_ipv4.hash(&mut h);
    n.client_ipv6.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrocluster_topology::{ConfigEpoch, CurrentEpoch, Millis, NodeFlags, ShardId};
    use rand_chacha::rand_core::SeedableRng;

    fn topo() -> (Topology, NodeId) {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let mut t = Topology::fresh(&mut rng, Millis(0));
        let other = NodeId::random(&mut rng);
        let mut n = Node::new(other, ShardId::random(&mut rng), Millis(0));
        n.flags = NodeFlags::PRIMARY;
        t.add_node(n).unwrap();
        (t, other)
    }

    #[test]
    fn a_vote_before_its_persist_is_acknowledged_is_caught() {
        let (mut t, _) = topo();
        let mut c = Checks::new(&t, false);
        t.last_vote_epoch = CurrentEpoch(4);
        c.persist_queued(1, &t);
        c.left(Tag::Vote(4));
        assert_eq!(
            c.violation(),
            Some(&InvariantViolation::VoteNotDurable {
                epoch: 4,
                durable: 0
            })
        );
        // After the acknowledgement it is fine.
        let mut c = Checks::new(&t, false);
        c.persist_queued(1, &t);
        c.persisted(1);
        c.left(Tag::Vote(4));
        c.left(Tag::AuthRequest(0));
        assert_eq!(c.violation(), None);
        // A second vote in the same epoch is not.
        c.left(Tag::Vote(4));
        assert!(matches!(
            c.violation(),
            Some(InvariantViolation::SecondVote { epoch: 4, .. })
        ));
    }

    #[test]
    fn an_auth_request_before_its_epoch_is_durable_is_caught() {
        let (mut t, _) = topo();
        let mut c = Checks::new(&t, false);
        t.current_epoch = CurrentEpoch(2);
        c.persist_queued(1, &t);
        c.left(Tag::AuthRequest(2));
        assert!(matches!(
            c.violation(),
            Some(InvariantViolation::AuthRequestNotDurable { epoch: 2, .. })
        ));
    }

    #[test]
    fn epochs_that_go_down_are_caught_unless_reset() {
        let (mut t, _) = topo();
        t.current_epoch = CurrentEpoch(5);
        let mut c = Checks::new(&t, true);
        t.current_epoch = CurrentEpoch(3);
        c.step_end(&t, false, false);
        assert!(matches!(
            c.violation(),
            Some(InvariantViolation::EpochWentDown {
                which: "currentEpoch",
                from: 5,
                to: 3
            })
        ));
        let mut c = Checks::new(&t, true);
        t.current_epoch = CurrentEpoch(0);
        c.epochs_reset(&t);
        c.step_end(&t, true, false);
        assert_eq!(c.violation(), None);
    }

    #[test]
    fn a_slot_of_mine_taken_with_an_equal_config_epoch_is_caught() {
        let (mut t, other) = topo();
        let me = *t.myself_id();
        let s = Slot::new(9).unwrap();
        t.set_slot_owner(s, Some(me)).unwrap();
        t.myself_mut().config_epoch = ConfigEpoch(3);
        t.node_mut(&other).unwrap().config_epoch = ConfigEpoch(3);
        let mut c = Checks::new(&t, true);
        t.set_slot_owner(s, Some(other)).unwrap();
        // By a command of the host's (SETSLOT NODE, DELSLOTS ...) it may.
        let mut local = c.clone();
        local.step_end(&t, true, false);
        assert_eq!(local.violation(), None);
        c.step_end(&t, false, false);
        assert!(matches!(
            c.violation(),
            Some(InvariantViolation::SlotTakenWithoutHigherEpoch {
                theirs: 3,
                mine: 3,
                ..
            })
        ));
        // With a higher configEpoch it may.
        let (mut t, other) = topo();
        t.set_slot_owner(s, Some(*t.myself_id())).unwrap();
        let mut c = Checks::new(&t, true);
        t.node_mut(&other).unwrap().config_epoch = ConfigEpoch(1);
        t.set_slot_owner(s, Some(other)).unwrap();
        c.step_end(&t, false, false);
        assert_eq!(c.violation(), None);
    }

    #[test]
    fn myself_rewritten_by_a_peer_is_caught() {
        let (mut t, _) = topo();
        let mut c = Checks::new(&t, true);
        t.myself_mut().port = 7777;
        c.step_end(&t, false, false);
        assert!(matches!(
            c.violation(),
            Some(InvariantViolation::MyselfRewritten(_))
        ));
        // Own-IP discovery may set the IP, and a command anything.
        let (mut t, _) = topo();
        let mut c = Checks::new(&t, true);
        t.myself_mut().ip = Some(std::net::IpAddr::from([10, 0, 0, 1]));
        c.step_end(&t, false, true);
        t.myself_mut().port = 7001;
        c.step_end(&t, true, false);
        assert_eq!(c.violation(), None);
        t.myself_mut().flags.insert(NodeFlags::PFAIL);
        c.step_end(&t, true, false);
        assert!(matches!(
            c.violation(),
            Some(InvariantViolation::MyselfRewritten(_))
        ));
    }
}

//! Manual failover (§13, V8 `CLUSTER FAILOVER`, MFSTART, `clusterHandleManualFailover`).

use crate::epochs::bump_config_epoch_without_consensus;
use crate::{
    Epoch, EpochConfig, EpochEffect, EpochEvent, EpochMessage, FailoverError, FailoverMode, Target,
};
use ferrocluster_topology::{LinkState, Millis, NodeId, Topology};

/// The manual-failover state (Valkey's `mf_*` fields), for both roles.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ManualFailover {
    /// `mf_end`: when the manual failover is aborted; `None` = none in progress.
    pub(crate) end: Option<Millis>,
    /// `mf_can_start` (replica side): the election may start.
    pub(crate) can_start: bool,
    /// `mf_replica` (primary side): the replica being served; writes are paused.
    pub(crate) replica: Option<NodeId>,
    /// `mf_primary_offset` (replica side): the paused primary's final offset, once known.
    pub(crate) primary_offset: Option<u64>,
    /// Primary side: the host confirmed that client writes are paused
    /// ([`Epoch::handle_writes_paused`]), so myself's reported offset is final. Valkey pauses
    /// inside the MFSTART handler (`pauseActions`); a Sans-IO host pauses when it acts on the
    /// output, later, so the PAUSED offset waits for its word.
    pub(crate) writes_paused: bool,
}

impl ManualFailover {
    /// When the manual failover in progress ends (`mf_end`), if any.
    pub fn end(&self) -> Option<Millis> {
        self.end
    }
    /// Replica side: whether the election may start.
    pub fn can_start(&self) -> bool {
        self.can_start
    }
    /// Primary side: the replica this primary is serving (writes paused), if any.
    pub fn replica(&self) -> Option<&NodeId> {
        self.replica.as_ref()
    }
    /// Primary side: whether the host confirmed the write pause
    /// ([`Epoch::handle_writes_paused`]); only then is the offset announced with PAUSED.
    pub fn writes_paused(&self) -> bool {
        self.writes_paused
    }
    /// Replica side: the primary's offset announced with PAUSED, if received.
    pub fn primary_offset(&self) -> Option<u64> {
        self.primary_offset
    }

    /// `resetManualFailover`: a primary that was serving one unpauses writes.
    pub(crate) fn reset(&mut self, out: &mut Vec<EpochEffect>) {
        if self.replica.is_some() {
            out.push(EpochEffect::UnpauseWrites);
        }
        *self = ManualFailover::default();
    }
}

impl FailoverMode {
    /// Parses the optional argument of `CLUSTER FAILOVER` (case-insensitive `FORCE` /
    /// `TAKEOVER`).
    ///
    /// # Errors
    /// [`FailoverError::Syntax`] for anything else (captured: `CLUSTER FAILOVER NOW` →
    /// `-ERR syntax error`).
    pub fn parse(arg: Option<&[u8]>) -> Result<FailoverMode, FailoverError> {
        match arg {
            None => Ok(FailoverMode::Default),
            Some(a) if a.eq_ignore_ascii_case(b"force") => Ok(FailoverMode::Force),
            Some(a) if a.eq_ignore_ascii_case(b"takeover") => Ok(FailoverMode::Takeover),
            Some(_) => Err(FailoverError::Syntax),
        }
    }
}

impl Epoch {
    /// Whether every header myself sends must carry mflags PAUSED (§5.2, §13.2): myself is a
    /// primary with a manual failover in progress whose host confirmed the write pause
    /// ([`Epoch::handle_writes_paused`]). Its `offset` is then final.
    ///
    /// Valkey sets PAUSED from `mf_end` alone because it pauses its clients inside the MFSTART
    /// handler, before any header goes out. Here the host pauses when it acts on
    /// [`EpochEffect::PauseWrites`], after the MFSTART step: a header sent in between would
    /// announce an offset that later writes pass, and the replica, which keeps the first
    /// PAUSED offset it hears, would wait for it until the manual failover times out.
    pub fn paused_for_manual_failover(&self, topo: &Topology) -> bool {
        self.manual.end.is_some() && self.manual.writes_paused && topo.myself().is_primary()
    }

    /// `CLUSTER FAILOVER [FORCE|TAKEOVER]` on myself (§13.1). Resets the manual failover state
    /// and sets its end to `now + cluster-manual-failover-timeout`, then:
    /// * default: MFSTART to my primary (the election starts once its PAUSED offset is
    ///   reached, [`Epoch::handle_cron`]);
    /// * FORCE: the election may start at once (a running election is forgotten so it can
    ///   restart with no delay, Valkey #1274);
    /// * TAKEOVER: configEpoch bump without consensus (§11.6) and immediate take-over
    ///   (§12.5), no vote.
    ///
    /// # Errors
    /// [`FailoverError::NotReplica`], [`FailoverError::PrimaryUnknown`], and — without FORCE or
    /// TAKEOVER — [`FailoverError::PrimaryDown`] when the primary is FAIL or we have no
    /// outbound link to it. Nothing changes on error.
    pub fn handle_failover_command(
        &mut self,
        topo: &mut Topology,
        cfg: &EpochConfig,
        mode: FailoverMode,
        now: Millis,
        out: &mut Vec<EpochEffect>,
    ) -> Result<(), FailoverError> {
        let me = topo.myself();
        if me.is_primary() {
            return Err(FailoverError::NotReplica);
        }
        let Some(primary) = me.primary.and_then(|p| topo.node(&p)) else {
            return Err(FailoverError::PrimaryUnknown);
        };
        let primary_id = *primary.id();
        if mode == FailoverMode::Default
            && (primary.is_fail() || primary.link == LinkState::Disconnected)
        {
            return Err(FailoverError::PrimaryDown);
        }
        self.manual.reset(out);
        self.manual.end = Some(now.saturating_add_ms(cfg.manual_failover_timeout_ms));
        out.push(EpochEffect::Event(EpochEvent::ManualFailoverStarted(mode)));
        match mode {
            FailoverMode::Takeover => {
                bump_config_epoch_without_consensus(topo, out);
                self.replace_my_primary(topo, out);
            }
            FailoverMode::Force => self.manual_failover_can_start(out),
            FailoverMode::Default => out.push(EpochEffect::Send {
                to: Target::Node(primary_id),
                message: EpochMessage::MfStart,
                after_persist: false,
            }),
        }
        Ok(())
    }

    fn manual_failover_can_start(&mut self, out: &mut Vec<EpochEffect>) {
        self.election.forget();
        self.manual.can_start = true;
        out.push(EpochEffect::Event(EpochEvent::ManualFailoverCanStart));
    }

    /// §8 step 11 / §13.2: an MFSTART from a known `sender`. Accepted only if the sender is one
    /// of my replicas: the manual failover state is reset, its end set to
    /// `now + timeout`, the replica remembered and client writes paused for 2 × timeout
    /// ([`EpochEffect::PauseWrites`]). Once the host confirmed the pause
    /// ([`Epoch::handle_writes_paused`]: Valkey's PING right after `pauseActions`) and while
    /// the manual failover lasts, the node MUST set PAUSED in every header
    /// ([`Epoch::paused_for_manual_failover`]) and PING the replica every cron run
    /// ([`Epoch::manual_failover`]`.replica()`). Returns whether it was accepted.
    pub fn handle_mfstart(
        &mut self,
        topo: &Topology,
        cfg: &EpochConfig,
        sender: &NodeId,
        now: Millis,
        out: &mut Vec<EpochEffect>,
    ) -> bool {
        let me = topo.myself_id();
        if topo.node(sender).and_then(|n| n.primary).as_ref() != Some(me) {
            return false;
        }
        self.manual.reset(out);
        self.manual.end = Some(now.saturating_add_ms(cfg.manual_failover_timeout_ms));
        self.manual.replica = Some(*sender);
        out.push(EpochEffect::PauseWrites {
            until: now.saturating_add_ms(cfg.mf_pause_ms()),
        });
        out.push(EpochEffect::Event(EpochEvent::ManualFailoverRequested(
            *sender,
        )));
        true
    }

    /// Primary side, §13.2: the host acted on the [`EpochEffect::PauseWrites`] of an accepted
    /// MFSTART — no client write is accepted any more — and reported myself's final
    /// replication offset. From now on every header carries PAUSED with that offset, and a PING
    /// goes to the replica being served at once (`clusterSendPing` after `pauseActions` in
    /// Valkey's MFSTART handler). Nothing happens without a manual failover in progress on
    /// this primary or when it was confirmed already; returns whether the PING was sent.
    pub fn handle_writes_paused(&mut self, topo: &Topology, out: &mut Vec<EpochEffect>) -> bool {
        let Some(replica) = self.manual.replica else {
            return false;
        };
        if self.manual.end.is_none() || self.manual.writes_paused || !topo.myself().is_primary() {
            return false;
        }
        self.manual.writes_paused = true;
        out.push(EpochEffect::Send {
            to: Target::Node(replica),
            message: EpochMessage::Ping,
            after_persist: false,
        });
        true
    }

    /// §8 step 4 (last item): any message from a known `sender` with header mflags `paused`
    /// and `offset`. If myself is a replica doing a manual failover, the sender is my primary,
    /// PAUSED is set and the offset is still unknown, it is recorded. Returns whether it was.
    pub fn handle_primary_offset(
        &mut self,
        topo: &Topology,
        sender: &NodeId,
        paused: bool,
        offset: u64,
    ) -> bool {
        let me = topo.myself();
        if me.is_replica()
            && me.primary.as_ref() == Some(sender)
            && paused
            && self.manual.end.is_some()
            && self.manual.primary_offset.is_none()
        {
            self.manual.primary_offset = Some(offset);
            return true;
        }
        false
    }

    /// Cron: a manual failover whose end has passed is reset (writes unpaused on a primary).
    pub(crate) fn check_manual_failover_timeout(
        &mut self,
        now: Millis,
        out: &mut Vec<EpochEffect>,
    ) {
        if self.manual.end.is_some_and(|end| end < now) {
            self.manual.reset(out);
            out.push(EpochEffect::Event(EpochEvent::ManualFailoverTimedOut));
        }
    }

    /// Cron, replica side (`clusterHandleManualFailover`): once the paused primary's offset is
    /// known and my processed offset equals it, the election may start.
    pub(crate) fn manual_failover_step(&mut self, my_offset: u64, out: &mut Vec<EpochEffect>) {
        if self.manual.end.is_none() || self.manual.can_start {
            return;
        }
        if self.manual.primary_offset == Some(my_offset) {
            self.manual_failover_can_start(out);
        }
    }
}

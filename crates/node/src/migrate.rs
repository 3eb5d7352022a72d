//! Atomic slot migration (ASM, Valkey 9) wired into the node: the node owns one
//! [`Migrations`] engine (`ferrocluster-migration`), dispatches the four ASM CLUSTER
//! subcommands to it, forwards the host's data-plane facts ([`MigrationInput`], the
//! migration crate's type), tells it about topology changes and promotions, drives its
//! timers, carries out the take-over and the write pause itself, and hands the engine's
//! data-plane requests ([`MigrationRequest`], the migration crate's type) to the host as
//! [`Output::Migration`].

use crate::exec::{CommandOutcome, CommandRequest};
use crate::{ClusterNode, Notice, Output};
use ferrocluster_migration::{
    ConnId, MigrationInput, MigrationOutput, MigrationRequest, Migrations, Origin,
};
use ferrocluster_slot::SlotSet;
use ferrocluster_topology::{Millis, Reply};

/// How often the node re-runs the engine's outputs after a take-over changed the topology
/// within one step (a take-over can finish other jobs, which cannot take over again: two
/// rounds suffice; the bound only guards against a bug looping).
const MAX_MIGRATION_ROUNDS: usize = 8;

/// Reply to a SYNCSLOTS that came neither from a connection the host identified
/// ([`CommandRequest::conn`]) nor from the primary / AOF: the node cannot bind it to a
/// migration link.
pub const MSG_SYNCSLOTS_NO_CONN: &str =
    "ERR CLUSTER SYNCSLOTS is not supported on a connection the host did not identify";

impl ClusterNode {
    /// The slot migration engine (read only): its jobs (newest first), which slots import or
    /// export, the staged (hidden) slots.
    pub fn migrations(&self) -> &Migrations {
        &self.migrations
    }

    /// Reports a data-plane fact of a slot migration ([`MigrationInput`]: connected, AUTH /
    /// ESTABLISH replies, snapshot done, backlog, link closed, OOM, FLUSH, full sync,
    /// loading; facts about unknown jobs or connections are ignored). Effects come out of
    /// [`ClusterNode::poll_output`] as usual.
    pub fn handle_migration(&mut self, input: MigrationInput, now: Millis) {
        let now = self.clamp(now);
        self.migrations.handle_input(&self.topo, input, now);
        self.finish(now);
    }

    /// The ASM subcommands through the CLUSTER executor (argv[0] is `CLUSTER`), with Valkey
    /// 9's replies and errors: the origin comes from `req` (`from_aof`, then `from_primary`,
    /// then `conn`). Without a slot migration data plane MIGRATESLOTS and SYNCSLOTS are
    /// refused at once.
    pub(crate) fn exec_migration_command<A: AsRef<[u8]>>(
        &mut self,
        argv: &[A],
        req: &CommandRequest,
        now: Millis,
    ) -> CommandOutcome {
        let sub = |name: &[u8]| {
            argv.get(1)
                .is_some_and(|s| s.as_ref().eq_ignore_ascii_case(name))
        };
        let syncslots = sub(b"syncslots");
        if !self.caps.slot_migration && (syncslots || sub(b"migrateslots")) {
            return CommandOutcome::Reply(Reply::Error(crate::MSG_NO_SLOT_MIGRATION.to_owned()));
        }
        let origin = if req.from_aof {
            Origin::Aof
        } else if req.from_primary {
            Origin::Primary
        } else if let Some(c) = req.conn {
            Origin::Conn(c)
        } else if syncslots {
            return CommandOutcome::Reply(Reply::Error(MSG_SYNCSLOTS_NO_CONN.to_owned()));
        } else {
            // MIGRATESLOTS / GETSLOTMIGRATIONS / CANCELSLOTMIGRATIONS do not look at the
            // connection.
            Origin::Conn(ConnId(u64::MAX))
        };
        let reply =
            self.migrations
                .handle_cluster_command(&self.topo, origin, argv, &mut self.rng, now);
        match reply {
            Some(r) => CommandOutcome::Reply(r),
            None => CommandOutcome::NoReply,
        }
    }

    /// Whether any migration job is unfinished (only then can a topology change matter).
    pub(crate) fn migrations_active(&self) -> bool {
        self.migrations.is_any_importing() || self.migrations.is_any_exporting()
    }

    /// Runs at the start of every step end ([`ClusterNode::finish`]): tells the engine about
    /// a promotion and about topology changes, runs its due timers and deferred work
    /// (Valkey's before-sleep), and turns its outputs into node outputs.
    pub(crate) fn pump_migrations(&mut self, now: Millis) {
        if self.step.take_promoted() {
            self.migrations.handle_promoted(&self.topo, now);
        }
        if (self.step.saving() || self.step.state_dirty()) && self.migrations_active() {
            self.migrations.handle_topology_changed(&self.topo, now);
        }
        for _ in 0..MAX_MIGRATION_ROUNDS {
            if self.migrations.poll_timeout().is_some_and(|t| t <= now) {
                self.migrations.handle_timeout(&self.topo, now);
            }
            let mut took_over = false;
            while let Some(o) = self.migrations.poll_output() {
                took_over |= self.apply_migration_output(o, now);
            }
            if !took_over {
                break;
            }
            self.migrations.handle_topology_changed(&self.topo, now);
        }
    }

    /// Acts on one engine output; returns whether it was a take-over (the topology changed).
    /// Data-plane requests go to the host as they are ([`Output::Migration`]).
    fn apply_migration_output(&mut self, o: MigrationOutput, now: Millis) -> bool {
        let req = match o {
            MigrationOutput::TakeOwnership { slots, .. } => {
                self.take_ownership(&slots, now);
                return true;
            }
            MigrationOutput::PauseWrites { until, .. } => {
                self.asm_pause = Some(until);
                self.announce_pause();
                return false;
            }
            MigrationOutput::UnpauseWrites => {
                self.asm_pause = None;
                self.announce_pause();
                return false;
            }
            MigrationOutput::StateChanged {
                job,
                kind,
                from,
                to,
            } => {
                self.step.notice(Notice::MigrationStateChanged {
                    job,
                    kind,
                    from,
                    to,
                });
                return false;
            }
            MigrationOutput::Request(r) => {
                if let MigrationRequest::DropSlotKeys { slots } = &r {
                    self.slot_keys_deleted(slots);
                }
                r
            }
        };
        self.step.push(Output::Migration(Box::new(req)));
        false
    }

    /// The import's take-over (sheet A.14, C.5): bump the configEpoch without agreement,
    /// assign every slot to myself, save (the PONG broadcast waits for the persist), and
    /// broadcast PONG to every node.
    fn take_ownership(&mut self, slots: &SlotSet, now: Millis) {
        let mut eout = Vec::new();
        ferrocluster_epoch::bump_config_epoch_without_consensus(&mut self.topo, &mut eout);
        self.apply_epoch_effects(eout, None, now);
        self.assign_slots_to_myself(slots);
        // Nobody hears of the new owner before it is durable.
        self.step.save_before_later_transmits();
        self.broadcast_pong(now);
    }

    /// Tells the host the write pause that the manual failover and the slot migrations add
    /// up to (Valkey pauses per purpose; the effective end is the latest).
    pub(crate) fn announce_pause(&mut self) {
        let until = match (self.mf_pause, self.asm_pause) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        self.step.push(match until {
            Some(until) => Output::PauseWrites { until },
            None => Output::UnpauseWrites,
        });
    }
}

//! The resolver state machine: steps 1–3 of the Sentinel client spec, reconnection,
//! connection-pool invalidation, Sentinel list refresh and the `+switch-master` hint.

use std::collections::{BTreeMap, VecDeque};

use crate::output::describe;
use crate::reply::{self, MasterAddrReply, ReplicasReply, RoleFailure};
use crate::{
    Addr, Config, ConfigError, ConnId, ConnPurpose, InputError, ObservedRole, Output,
    ReconnectCause, Resolution, ResolveError, Value, Want,
};

/// What a connection is waiting for, in reply order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    MasterAddr,
    Replicas,
    Sentinels,
    Role,
    InfoReplication,
    SubscribeAck,
}

/// Role of a connection inside the resolver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The Sentinel currently asked (steps 1–2).
    Ask,
    /// A Sentinel that already answered, kept only for the trailing `SENTINEL sentinels`.
    Drain,
    /// A role check (step 3).
    Check,
    /// The `+switch-master` subscription.
    Sub,
}

#[derive(Debug)]
struct Conn {
    kind: Kind,
    connected: bool,
    /// Commands to send once connected (their replies are already in `expect`).
    on_open: Vec<Vec<Vec<u8>>>,
    expect: VecDeque<Expect>,
    /// Absolute time (ms) at which the connection is given up; `None` for none.
    deadline: Option<u64>,
}

/// Counters of one round over the Sentinel list, for error classification.
#[derive(Debug, Default)]
struct Round {
    unreachable: usize,
    null_answers: usize,
    error_answers: usize,
    last_error: Option<String>,
}

#[derive(Debug)]
struct Check {
    addr: Addr,
    conn: Option<ConnId>,
    seen: Option<Result<ObservedRole, String>>,
}

#[derive(Debug)]
enum Step {
    /// Asking the Sentinel at `pos` of the list over `conn`.
    Ask { pos: usize, conn: ConnId },
    /// Checking the roles of the addresses `via` gave.
    Verify { via: Addr, checks: Vec<Check> },
    /// Role check failed: start again at step 1 at `until`.
    Wait { until: u64 },
}

#[derive(Debug)]
struct Attempt {
    started_ms: u64,
    round: Round,
    step: Step,
    last_seen: Option<String>,
}

#[derive(Debug)]
enum Sub {
    Off,
    /// Not subscribed; subscribe at `retry_at`, or after the next resolution if `None`.
    Idle {
        retry_at: Option<u64>,
    },
    Open,
}

/// Sans-IO Sentinel client: finds the primary (or the replicas) of a service.
///
/// See the crate documentation for the host loop. Every `handle_*` input takes the host's
/// current time in ms; time that goes backwards is treated as the latest time seen.
#[derive(Debug)]
pub struct Resolver {
    cfg: Config,
    sentinels: Vec<Addr>,
    now_ms: u64,
    next_conn: u64,
    conns: BTreeMap<ConnId, Conn>,
    out: VecDeque<Output>,
    attempt: Option<Attempt>,
    next_start_ms: Option<u64>,
    current: Option<Resolution>,
    sub: Sub,
    sub_pos: usize,
}

fn argv(parts: &[&str]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.as_bytes().to_vec()).collect()
}

impl Resolver {
    /// Validates `cfg` and starts the first resolution at step 1: the first output is a
    /// [`Output::Connect`] to the first Sentinel. Duplicate Sentinel addresses are dropped.
    ///
    /// # Errors
    /// [`ConfigError`] from [`Config::validate`]; nothing is constructed.
    pub fn new(cfg: Config, now_ms: u64) -> Result<Resolver, ConfigError> {
        cfg.validate()?;
        let mut sentinels: Vec<Addr> = Vec::with_capacity(cfg.sentinels.len());
        for s in &cfg.sentinels {
            if !sentinels.contains(s) {
                sentinels.push(s.clone());
            }
        }
        let sub = if cfg.follow_switch_master {
            Sub::Idle { retry_at: None }
        } else {
            Sub::Off
        };
        let mut r = Resolver {
            cfg,
            sentinels,
            now_ms,
            next_conn: 0,
            conns: BTreeMap::new(),
            out: VecDeque::new(),
            attempt: None,
            next_start_ms: None,
            current: None,
            sub,
            sub_pos: 0,
        };
        r.start_attempt();
        Ok(r)
    }

    // ----- queries -------------------------------------------------------------------

    /// The configuration in use.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The Sentinel list in its current order: the last Sentinel that answered first,
    /// refreshed entries appended at the end.
    pub fn sentinels(&self) -> &[Addr] {
        &self.sentinels
    }

    /// The last confirmed resolution, if any. It stays set while a new resolution runs and
    /// after an error (it may then be stale).
    pub fn current(&self) -> Option<&Resolution> {
        self.current.as_ref()
    }

    /// Whether a resolution is in progress.
    pub fn is_resolving(&self) -> bool {
        self.attempt.is_some()
    }

    /// Whether the `+switch-master` subscription is open (connected or connecting).
    pub fn is_subscribed(&self) -> bool {
        matches!(self.sub, Sub::Open)
    }

    // ----- outputs -------------------------------------------------------------------

    /// The next thing to do, in order; `None` when drained.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// The absolute time (ms) at which [`handle_timeout`](Self::handle_timeout) must be
    /// called, or `None` if nothing is timed. Calling it early or twice is harmless.
    pub fn poll_timeout(&self) -> Option<u64> {
        let conns = self.conns.values().filter_map(|c| c.deadline);
        let wait = match &self.attempt {
            Some(Attempt {
                step: Step::Wait { until },
                ..
            }) => Some(*until),
            _ => None,
        };
        let sub = match self.sub {
            Sub::Idle { retry_at } => retry_at,
            _ => None,
        };
        conns.chain(wait).chain(self.next_start_ms).chain(sub).min()
    }

    // ----- inputs --------------------------------------------------------------------

    /// Fires every deadline at or before `now_ms`: Sentinel and role-check timeouts,
    /// the retry wait, the recheck interval, the re-subscription.
    pub fn handle_timeout(&mut self, now_ms: u64) {
        self.tick(now_ms);
        let now = self.now_ms;
        let expired: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.deadline.is_some_and(|d| d <= now))
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            // A previous expiry in this loop may have closed it already.
            if self.conns.contains_key(&id) {
                self.close(id);
                self.lost(id, "timed out");
            }
        }
        if let Some(Attempt {
            step: Step::Wait { until },
            ..
        }) = &self.attempt
        {
            if *until <= now {
                self.start_round();
            }
        }
        if self.attempt.is_none() && self.next_start_ms.is_some_and(|t| t <= now) {
            self.start_attempt();
        }
        if let Sub::Idle {
            retry_at: Some(t), ..
        } = self.sub
        {
            if t <= now {
                self.open_sub();
            }
        }
    }

    /// The connection `conn` is established: the resolver emits its commands.
    ///
    /// # Errors
    /// [`InputError::UnknownConn`] (e.g. already closed: the host SHOULD drop the socket),
    /// [`InputError::AlreadyConnected`]. Nothing changes on error.
    pub fn handle_connected(&mut self, conn: ConnId, now_ms: u64) -> Result<(), InputError> {
        let c = self
            .conns
            .get_mut(&conn)
            .ok_or(InputError::UnknownConn(conn))?;
        if c.connected {
            return Err(InputError::AlreadyConnected(conn));
        }
        c.connected = true;
        for argv in std::mem::take(&mut c.on_open) {
            self.out.push_back(Output::Send { conn, argv });
        }
        self.tick(now_ms);
        Ok(())
    }

    /// Connecting to `conn` failed (refused, unreachable, host's own connect timeout).
    ///
    /// # Errors
    /// [`InputError::UnknownConn`]; nothing changes.
    pub fn handle_connect_failed(&mut self, conn: ConnId, now_ms: u64) -> Result<(), InputError> {
        self.handle_gone(conn, now_ms, "connect failed")
    }

    /// The connection `conn` closed (peer closed it, or a socket error). The host MUST
    /// NOT report a connection it closed on the resolver's `Close`; if it does, the
    /// answer is [`InputError::UnknownConn`].
    ///
    /// # Errors
    /// [`InputError::UnknownConn`]; nothing changes.
    pub fn handle_closed(&mut self, conn: ConnId, now_ms: u64) -> Result<(), InputError> {
        self.handle_gone(conn, now_ms, "connection closed")
    }

    /// One decoded reply on `conn`, in wire order.
    ///
    /// # Errors
    /// [`InputError::UnknownConn`], [`InputError::NotConnected`]; nothing changes.
    pub fn handle_reply(
        &mut self,
        conn: ConnId,
        value: Value,
        now_ms: u64,
    ) -> Result<(), InputError> {
        let c = self.conns.get(&conn).ok_or(InputError::UnknownConn(conn))?;
        if !c.connected {
            return Err(InputError::NotConnected(conn));
        }
        let kind = c.kind;
        self.tick(now_ms);
        if kind == Kind::Sub {
            self.sub_reply(conn, &value);
            return Ok(());
        }
        // Checked just above that `conn` is present; nothing removed it since.
        let c = self.conns.get_mut(&conn).expect("conn present");
        let Some(expect) = c.expect.pop_front() else {
            // A reply nobody asked for: the stream is out of step, give the connection up.
            self.close(conn);
            self.lost(conn, "unexpected reply");
            return Ok(());
        };
        match expect {
            Expect::MasterAddr | Expect::Replicas => self.sentinel_answer(conn, expect, &value),
            Expect::Sentinels => self.sentinel_list(conn, &value),
            Expect::Role | Expect::InfoReplication => self.role_answer(conn, expect, &value),
            Expect::SubscribeAck => {}
        }
        Ok(())
    }

    /// The host's data connection needs a reconnect (timeout, socket error, explicit
    /// close, server closed it): re-verify from step 1, as the Sentinel client spec
    /// requires on every reconnection. A resolution in progress is abandoned (its
    /// connections closed) and started again.
    pub fn handle_reconnect(&mut self, cause: ReconnectCause, now_ms: u64) {
        let _ = cause; // every cause restarts at step 1; the enum documents the cases
        self.tick(now_ms);
        self.restart();
    }

    // ----- internals -----------------------------------------------------------------

    fn tick(&mut self, now_ms: u64) {
        self.now_ms = self.now_ms.max(now_ms);
    }

    fn handle_gone(&mut self, conn: ConnId, now_ms: u64, why: &str) -> Result<(), InputError> {
        if !self.conns.contains_key(&conn) {
            return Err(InputError::UnknownConn(conn));
        }
        self.tick(now_ms);
        self.lost(conn, why);
        Ok(())
    }

    fn open(&mut self, addr: Addr, kind: Kind, commands: Vec<(Vec<Vec<u8>>, Expect)>) -> ConnId {
        self.next_conn += 1;
        let id = ConnId(self.next_conn);
        let (timeout, purpose) = match kind {
            Kind::Ask | Kind::Drain => (self.cfg.sentinel_timeout_ms, ConnPurpose::Sentinel),
            Kind::Check => (self.cfg.node_timeout_ms, ConnPurpose::RoleCheck),
            Kind::Sub => (self.cfg.sentinel_timeout_ms, ConnPurpose::Subscription),
        };
        let (on_open, expect) = commands.into_iter().unzip();
        self.conns.insert(
            id,
            Conn {
                kind,
                connected: false,
                on_open,
                expect,
                deadline: Some(self.now_ms.saturating_add(timeout)),
            },
        );
        self.out.push_back(Output::Connect {
            conn: id,
            addr,
            purpose,
        });
        id
    }

    /// Emits `Close` and forgets the connection.
    fn close(&mut self, id: ConnId) {
        if self.conns.contains_key(&id) {
            self.out.push_back(Output::Close { conn: id });
        }
    }

    /// The connection is gone (closed by us or by the peer, failed, timed out): forget it
    /// and move the protocol on. `close` must already have been emitted if we closed it.
    fn lost(&mut self, id: ConnId, why: &str) {
        let Some(c) = self.conns.remove(&id) else {
            return;
        };
        match c.kind {
            Kind::Drain => {}
            Kind::Sub => self.sub_failed(),
            Kind::Ask => {
                if let Some(Attempt {
                    step: Step::Ask { pos, conn },
                    round,
                    ..
                }) = &mut self.attempt
                {
                    if *conn == id {
                        round.unreachable += 1;
                        let next = *pos + 1;
                        self.ask(next);
                    }
                }
            }
            Kind::Check => {
                let msg = format!("{why} before a role answer");
                self.check_done(id, Err(msg));
            }
        }
    }

    fn restart(&mut self) {
        if let Some(a) = self.attempt.take() {
            match a.step {
                Step::Ask { conn, .. } => {
                    self.close(conn);
                    self.conns.remove(&conn);
                }
                Step::Verify { checks, .. } => {
                    for conn in checks.iter().filter_map(|c| c.conn) {
                        self.close(conn);
                        self.conns.remove(&conn);
                    }
                }
                Step::Wait { .. } => {}
            }
        }
        self.start_attempt();
    }

    fn start_attempt(&mut self) {
        self.next_start_ms = None;
        self.attempt = Some(Attempt {
            started_ms: self.now_ms,
            round: Round::default(),
            step: Step::Wait { until: self.now_ms },
            last_seen: None,
        });
        self.start_round();
    }

    /// Step 1 from the top of the list (counters of the previous round dropped).
    fn start_round(&mut self) {
        if let Some(a) = &mut self.attempt {
            a.round = Round::default();
        }
        self.ask(0);
    }

    /// Step 1/2 with the Sentinel at `pos`, or the round's error when the list is done.
    fn ask(&mut self, pos: usize) {
        let Some(addr) = self.sentinels.get(pos).cloned() else {
            self.round_exhausted();
            return;
        };
        let name = self.cfg.service_name.clone();
        let mut cmds = vec![match self.cfg.want {
            Want::Primary => (
                argv(&["SENTINEL", "get-master-addr-by-name", &name]),
                Expect::MasterAddr,
            ),
            Want::Replicas => (argv(&["SENTINEL", "replicas", &name]), Expect::Replicas),
        }];
        if self.cfg.refresh_sentinels {
            cmds.push((argv(&["SENTINEL", "sentinels", &name]), Expect::Sentinels));
        }
        let conn = self.open(addr, Kind::Ask, cmds);
        if let Some(a) = &mut self.attempt {
            a.step = Step::Ask { pos, conn };
        }
    }

    fn round_exhausted(&mut self) {
        let Some(a) = &self.attempt else { return };
        let r = &a.round;
        let err = if r.null_answers > 0 && r.error_answers == 0 {
            ResolveError::UnknownService {
                name: self.cfg.service_name.clone(),
                null_answers: r.null_answers,
                unreachable: r.unreachable,
            }
        } else if r.null_answers == 0 && r.error_answers == 0 {
            ResolveError::NoSentinelReachable {
                tried: r.unreachable,
            }
        } else {
            ResolveError::SentinelErrors {
                last_error: r.last_error.clone().unwrap_or_default(),
                null_answers: r.null_answers,
            }
        };
        self.finish(Err(err));
    }

    fn sentinel_answer(&mut self, conn: ConnId, expect: Expect, value: &Value) {
        let current = matches!(
            &self.attempt,
            Some(Attempt { step: Step::Ask { conn: c, .. }, .. }) if *c == conn
        );
        if !current {
            self.close(conn);
            self.conns.remove(&conn);
            return;
        }
        let answer = if expect == Expect::MasterAddr {
            match reply::master_addr(value) {
                MasterAddrReply::Addr(a) => Ok(vec![a]),
                MasterAddrReply::Unknown => Err(None),
                MasterAddrReply::Unusable(e) => Err(Some(e)),
            }
        } else {
            match reply::replicas(value) {
                ReplicasReply::Addrs(v) => Ok(v),
                ReplicasReply::Unknown => Err(None),
                ReplicasReply::Unusable(e) => Err(Some(e)),
            }
        };
        // `current` above established that the attempt is in step Ask on `conn`.
        let Some(Attempt {
            step: Step::Ask { pos, .. },
            round,
            ..
        }) = &mut self.attempt
        else {
            return;
        };
        let pos = *pos;
        match answer {
            Ok(addrs) => {
                // The first Sentinel that answers moves to the front of the list.
                let via = self.sentinels.remove(pos);
                self.sentinels.insert(0, via.clone());
                let keep = self
                    .conns
                    .get(&conn)
                    .is_some_and(|c| c.expect.contains(&Expect::Sentinels));
                if keep {
                    if let Some(c) = self.conns.get_mut(&conn) {
                        c.kind = Kind::Drain;
                    }
                } else {
                    self.close(conn);
                    self.conns.remove(&conn);
                }
                self.verify(via, addrs);
            }
            Err(err) => {
                match err {
                    None => round.null_answers += 1,
                    Some(e) => {
                        round.error_answers += 1;
                        round.last_error = Some(e);
                    }
                }
                self.close(conn);
                self.conns.remove(&conn);
                self.ask(pos + 1);
            }
        }
    }

    fn sentinel_list(&mut self, conn: ConnId, value: &Value) {
        if let Some(list) = reply::sentinels(value) {
            for s in list {
                if !self.sentinels.contains(&s) {
                    self.sentinels.push(s);
                }
            }
        }
        let done = self.conns.get(&conn).is_some_and(|c| c.expect.is_empty());
        if done && self.conns.get(&conn).is_some_and(|c| c.kind == Kind::Drain) {
            self.close(conn);
            self.conns.remove(&conn);
        }
    }

    /// Step 3: check the role of every address Sentinel gave.
    fn verify(&mut self, via: Addr, addrs: Vec<Addr>) {
        if addrs.is_empty() {
            if let Some(a) = &mut self.attempt {
                a.last_seen = Some(format!("{via} listed no usable replica"));
            }
            self.retry_or_fail();
            return;
        }
        let mut checks = Vec::with_capacity(addrs.len());
        for addr in addrs {
            let conn = self.open(
                addr.clone(),
                Kind::Check,
                vec![(argv(&["ROLE"]), Expect::Role)],
            );
            checks.push(Check {
                addr,
                conn: Some(conn),
                seen: None,
            });
        }
        if let Some(a) = &mut self.attempt {
            a.step = Step::Verify { via, checks };
        }
    }

    fn role_answer(&mut self, conn: ConnId, expect: Expect, value: &Value) {
        let seen = if expect == Expect::Role {
            match reply::role(value) {
                Ok(role) => Ok(role),
                Err(RoleFailure::ErrorReply(_)) => {
                    // ROLE refused (old server, ACL): fall back to INFO replication.
                    if let Some(c) = self.conns.get_mut(&conn) {
                        c.expect.push_back(Expect::InfoReplication);
                    }
                    self.out.push_back(Output::Send {
                        conn,
                        argv: argv(&["INFO", "replication"]),
                    });
                    return;
                }
                Err(RoleFailure::Malformed(m)) => Err(format!("malformed ROLE reply {m}")),
            }
        } else {
            reply::info_role(value).ok_or_else(|| "INFO replication has no role line".to_string())
        };
        self.close(conn);
        self.conns.remove(&conn);
        self.check_done(conn, seen);
    }

    fn check_done(&mut self, conn: ConnId, seen: Result<ObservedRole, String>) {
        let Some(Attempt {
            step: Step::Verify { checks, .. },
            ..
        }) = &mut self.attempt
        else {
            return;
        };
        let Some(check) = checks.iter_mut().find(|c| c.conn == Some(conn)) else {
            return;
        };
        check.conn = None;
        check.seen = Some(seen);
        if checks.iter().all(|c| c.seen.is_some()) {
            self.finish_verify();
        }
    }

    fn finish_verify(&mut self) {
        let wanted = match self.cfg.want {
            Want::Primary => ObservedRole::Primary,
            Want::Replicas => ObservedRole::Replica,
        };
        let Some(Attempt {
            step: Step::Verify { via, checks },
            last_seen,
            ..
        }) = &mut self.attempt
        else {
            return;
        };
        let confirmed: Vec<Addr> = checks
            .iter()
            .filter(|c| c.seen.as_ref() == Some(&Ok(wanted.clone())))
            .map(|c| c.addr.clone())
            .collect();
        if confirmed.is_empty() {
            *last_seen = checks
                .iter()
                .find_map(|c| c.seen.as_ref().map(|s| describe(&c.addr, s)));
            self.retry_or_fail();
            return;
        }
        let resolution = Resolution {
            want: self.cfg.want,
            addrs: confirmed,
            via: via.clone(),
            at_ms: self.now_ms,
        };
        self.finish(Ok(resolution));
    }

    /// Step 3 failed: wait and start again at step 1, unless the budget is spent.
    fn retry_or_fail(&mut self) {
        let now = self.now_ms;
        let Some(a) = &mut self.attempt else { return };
        let until = now.saturating_add(self.cfg.retry_delay_ms);
        if until >= a.started_ms.saturating_add(self.cfg.resolve_timeout_ms) {
            let err = ResolveError::NotConfirmed {
                want: self.cfg.want,
                elapsed_ms: now - a.started_ms,
                last_seen: a.last_seen.clone().unwrap_or_default(),
            };
            self.finish(Err(err));
        } else {
            a.step = Step::Wait { until };
        }
    }

    fn finish(&mut self, result: Result<Resolution, ResolveError>) {
        self.attempt = None;
        match result {
            Ok(resolution) => {
                let mut new_sorted = resolution.addrs.clone();
                new_sorted.sort();
                let changed = match &self.current {
                    None => true,
                    Some(old) => {
                        let mut old_sorted = old.addrs.clone();
                        old_sorted.sort();
                        for addr in old_sorted.iter().filter(|a| !new_sorted.contains(a)) {
                            self.out.push_back(Output::ClosePool { addr: addr.clone() });
                        }
                        old_sorted != new_sorted
                    }
                };
                self.current = Some(resolution.clone());
                self.out.push_back(Output::Resolved {
                    resolution,
                    changed,
                });
                if let Sub::Idle { retry_at: None } = self.sub {
                    self.sub_pos = 0;
                    self.open_sub();
                }
            }
            Err(e) => self.out.push_back(Output::Error(e)),
        }
        self.next_start_ms = self
            .cfg
            .recheck_interval_ms
            .map(|i| self.now_ms.saturating_add(i));
    }

    // ----- +switch-master subscription ------------------------------------------------

    fn open_sub(&mut self) {
        let pos = self.sub_pos % self.sentinels.len().max(1);
        let Some(addr) = self.sentinels.get(pos).cloned() else {
            return;
        };
        self.open(
            addr,
            Kind::Sub,
            vec![(
                argv(&["SUBSCRIBE", reply::SWITCH_MASTER_CHANNEL]),
                Expect::SubscribeAck,
            )],
        );
        self.sub = Sub::Open;
    }

    fn sub_failed(&mut self) {
        self.sub_pos = self.sub_pos.wrapping_add(1);
        self.sub = Sub::Idle {
            retry_at: Some(self.now_ms.saturating_add(self.cfg.resubscribe_delay_ms)),
        };
    }

    fn sub_reply(&mut self, conn: ConnId, value: &Value) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if c.expect.front() == Some(&Expect::SubscribeAck) {
            if reply::is_subscribe_ack(value) {
                c.expect.pop_front();
                c.deadline = None;
            } else {
                self.close(conn);
                self.lost(conn, "subscription refused");
            }
            return;
        }
        if let Some((name, _new_addr)) = reply::switch_master(value) {
            // The event only triggers the steps; its address is not trusted by itself.
            if name == self.cfg.service_name {
                self.restart();
            }
        }
    }
}

//! The simulator core: hosts, the virtual clock, the event queue, links and the disk.
//!
//! One [`Sim`] owns many engines (one per simulated host) and plays their host: it turns
//! their outputs into network and disk events, delivers those events at their virtual time,
//! and calls the engines' inputs. Every random choice comes from one `ChaCha8Rng` seeded with
//! the run's seed, and the event queue is ordered by (time, insertion number), so one seed
//! gives one run. After every step the registered [`Invariant`]s are checked; the first
//! broken one stops the run with a [`Violation`] that names the seed and the replay command.

use crate::disk::Disk;
use crate::engine::{Engine, EngineOutput, LinkEvent};
use crate::net::{NetConfig, PartitionedConnect, Partitions};
use crate::sniff::{SniffedFrame, Sniffer};
use crate::trace::TraceHash;
use ferrocluster_topology::Millis;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr};

/// Virtual time at which every run starts (Unix ms, 2023-11-14): the protocol compares
/// wall-clock times, so the clock starts at a plausible date, not at 0.
pub const START_TIME: Millis = Millis(1_700_000_000_000);
/// Bus port of every simulated host (client port 6379 + 10000, facts sheet §1).
pub const BUS_PORT: u16 = 16379;
/// Client port of every simulated host.
pub const CLIENT_PORT: u16 = 6379;
/// How often a SYN lost in a partition is retransmitted.
const SYN_RETRY_MS: u64 = 1000;
/// After this long without an answer a connect attempt fails (a TCP connect timeout).
const SYN_GIVE_UP_MS: u64 = 30_000;
/// The host index of a raw test peer (no engine; see [`Sim::raw_connect`]).
const RAW: usize = usize::MAX;

/// Builds (or rebuilds, after a crash) the engine of host `host` at time `now` with the given
/// seed, from the nodes.conf the disk holds (`None` for a host never persisted). An `Err`
/// (say, a saved nodes.conf the engine refuses) stops the run as a [`Violation`] of the
/// pseudo-invariant `engine start`.
pub type Factory<E> = Box<dyn FnMut(usize, Millis, u64, Option<&[u8]>) -> Result<E, String>>;

/// The bus IP of host `index`: 10.x.y.z, distinct for every index below 2^24 − 1.
pub fn host_ip(index: usize) -> IpAddr {
    let n = (index as u32).wrapping_add(1);
    IpAddr::V4(Ipv4Addr::new(10, (n >> 16) as u8, (n >> 8) as u8, n as u8))
}

/// What kind of step just ran (given to invariants).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepKind {
    /// A timer fired (`handle_timeout`).
    Timer,
    /// Bytes were delivered on a link.
    Bytes,
    /// A link event (accepted, connected, connect failed, closed).
    Link,
    /// A nodes.conf write was acknowledged.
    Persisted,
    /// A test called into the engine directly ([`Sim::with_engine`]).
    Command,
    /// The host reported a fact of its own (replication progress, [`Sim::report_to_engine`]):
    /// an input like a timer, not a command.
    Report,
    /// The host was (re)started: its state is new, not a transition.
    Restart,
}

/// Facts about one step, for invariants.
#[derive(Debug, Clone)]
pub struct StepInfo<V> {
    /// The host whose engine ran.
    pub host: usize,
    /// What ran.
    pub kind: StepKind,
    /// Node names (bus form) of FAIL messages whose last byte reached the host in this step.
    pub fail_names_delivered: Vec<[u8; 40]>,
    /// Events the engine emitted in this step, in order.
    pub events: Vec<V>,
}

/// A property checked after every step.
pub trait Invariant<E: Engine> {
    /// A short name for reports.
    fn name(&self) -> &str;
    /// Checks the simulator's state after `step`; `Err` describes what is broken.
    ///
    /// # Errors
    /// A description of the broken property.
    fn check(&mut self, sim: &Sim<E>, step: &StepInfo<E::Event>) -> Result<(), String>;
}

/// A broken invariant: everything needed to replay the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The run's seed.
    pub seed: u64,
    /// Virtual time of the step.
    pub at: Millis,
    /// Ms since the start of the run.
    pub elapsed_ms: u64,
    /// Number of events processed before it.
    pub event_no: u64,
    /// The host of the step.
    pub host: usize,
    /// The invariant.
    pub invariant: String,
    /// What was wrong.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invariant `{}` broken (seed {}, t=+{} ms, event {}, host {}): {}",
            self.invariant, self.seed, self.elapsed_ms, self.event_no, self.host, self.message
        )
    }
}

impl std::error::Error for Violation {}

/// A FAILOVER_AUTH_REQUEST or FAILOVER_AUTH_ACK frame a host transmitted, as the sniffer read
/// it from the byte stream (header `currentEpoch` and `sender`, facts sheet §3). Recorded when
/// the frame is handed to the network, whether or not it is delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthFrame {
    /// When it was transmitted.
    pub at: Millis,
    /// Message type: 5 = FAILOVER_AUTH_REQUEST, 6 = FAILOVER_AUTH_ACK.
    pub msg_type: u16,
    /// The transmitting host ([`usize::MAX`] for a raw test peer).
    pub from: usize,
    /// The host at the other end of the link.
    pub to: usize,
    /// The header's currentEpoch.
    pub current_epoch: u64,
    /// The header's sender node name.
    pub sender: [u8; 40],
}

/// Bus traffic sent by one host, counted from the frames on its links.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Bytes transmitted.
    pub bytes: u64,
    /// Frames transmitted by message type (index = type code; 11..=15 = other).
    pub frames_by_type: [u64; 16],
}

impl Traffic {
    /// Frames of all types.
    pub fn frames(&self) -> u64 {
        self.frames_by_type.iter().sum()
    }

    fn add(&mut self, other: &Traffic) {
        self.bytes += other.bytes;
        for (a, b) in self
            .frames_by_type
            .iter_mut()
            .zip(other.frames_by_type.iter())
        {
            *a += b;
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Timer {
        host: usize,
    },
    Syn {
        conn: u64,
    },
    SynAck {
        conn: u64,
    },
    Refused {
        conn: u64,
    },
    Flush {
        conn: u64,
        dir: usize,
    },
    Fsync {
        host: usize,
        incarnation: u32,
        seq: u64,
    },
    /// The delayed first start of a host ([`Sim::new_staggered`]).
    Start {
        host: usize,
    },
}

#[derive(Debug)]
enum Chunk {
    Bytes(Vec<u8>),
    Fin,
}

#[derive(Debug)]
struct End<L> {
    host: usize,
    link: Option<L>,
    open: bool,
}

#[derive(Debug, Default)]
struct Dir {
    queue: VecDeque<(Millis, Chunk)>,
    last_ready: Millis,
    sniffer: Sniffer,
    delivered: u64,
    fail_marks: VecDeque<(u64, [u8; 40])>,
}

#[derive(Debug)]
struct Conn<L> {
    /// 0 = the side that connected, 1 = the side that accepted.
    ends: [End<L>; 2],
    /// `dirs[d]` carries bytes sent by `ends[d]`.
    dirs: [Dir; 2],
    started: Millis,
    accepted: bool,
    /// The connecting side's IP (a host's, or a raw peer's).
    from_ip: IpAddr,
}

/// A connection opened by a test with [`Sim::raw_connect`]: the test plays the connecting
/// side with no engine behind it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RawConn(u64);

#[derive(Debug, Default)]
struct RawState {
    received: Vec<u8>,
    closed_by_peer: bool,
}

struct Host<E: Engine> {
    ip: IpAddr,
    engine: Option<E>,
    incarnation: u32,
    disk: Disk,
    links: BTreeMap<E::Link, (u64, usize)>,
    /// The engine's last reported deadline.
    deadline: Option<Millis>,
    /// The instant at which a Timer event is queued for it.
    timer: Option<Millis>,
    /// The instant of the last `handle_timeout` call.
    last_fired: Option<Millis>,
    traffic: Traffic,
    crashes: u64,
}

/// The deterministic simulator. See the crate docs for the model.
///
/// Host indexes run from 0 to [`Sim::hosts`]` - 1`; the methods that take one panic on an
/// index out of range (a bug in the test driving the simulator, not an input to handle).
pub struct Sim<E: Engine> {
    seed: u64,
    rng: ChaCha8Rng,
    now: Millis,
    net: NetConfig,
    partitions: Partitions,
    hosts: Vec<Host<E>>,
    by_addr: BTreeMap<(IpAddr, u16), usize>,
    conns: BTreeMap<u64, Conn<E::Link>>,
    next_conn: u64,
    queue: BTreeMap<(Millis, u64), Ev>,
    next_ev: u64,
    events: u64,
    trace: TraceHash,
    factory: Factory<E>,
    invariants: Vec<Box<dyn Invariant<E>>>,
    check_invariants: bool,
    violation: Option<Violation>,
    step_fail_names: Vec<[u8; 40]>,
    raw: BTreeMap<u64, RawState>,
    step_events: Vec<E::Event>,
    record_events: bool,
    recorded: Vec<(Millis, usize, E::Event)>,
    event_outputs: u64,
    auth_frames: Vec<AuthFrame>,
    transmit_tap: Option<TransmitTap<E>>,
    /// Hosts whose delayed first start ([`Sim::new_staggered`]) ran, not yet taken.
    started: Vec<usize>,
}

/// A test's look at every transmit an engine asks for ([`Sim::set_transmit_tap`]): called
/// with the sending host, its engine (in the state it had when the output was polled), the
/// time and the bytes, before the network takes them. It observes only: the run is the same
/// with or without one.
pub type TransmitTap<E> = Box<dyn FnMut(usize, &E, Millis, &[u8])>;

impl<E: Engine> Drop for Sim<E> {
    fn drop(&mut self) {
        crate::trace_log::record(self.seed, self.trace.digest(), self.trace.events());
    }
}

impl<E: Engine> Sim<E> {
    /// A simulator with `hosts` hosts, each started at [`START_TIME`] through `factory`
    /// with a seed drawn from the run's RNG and no saved nodes.conf.
    ///
    /// # Errors
    /// A [`Violation`] of `engine start` if the factory refuses a host.
    pub fn new(
        seed: u64,
        net: NetConfig,
        hosts: usize,
        factory: Factory<E>,
    ) -> Result<Sim<E>, Violation> {
        Sim::new_staggered(seed, net, hosts, factory, &|_| 0)
    }

    /// [`Sim::new`] with staggered start-up: host *i* starts `start_delay_ms(i)` ms after
    /// [`START_TIME`] (0: at once, as with [`Sim::new`]). Until then it is down without
    /// having crashed (connects to it are refused, [`Sim::crashes`] stays 0); it starts as
    /// [`Sim::restart`] would, from its (empty) disk. Large clusters use this to bound the
    /// bytes in flight: every node PINGs every peer as its links come up, so 1000 nodes
    /// starting at one instant put ~1M full PINGs (~12.7 KB each) in flight at once.
    ///
    /// # Errors
    /// A [`Violation`] of `engine start` if the factory refuses a host started at once
    /// (a delayed host's refusal stops the run at its start time).
    pub fn new_staggered(
        seed: u64,
        net: NetConfig,
        hosts: usize,
        mut factory: Factory<E>,
        start_delay_ms: &dyn Fn(usize) -> u64,
    ) -> Result<Sim<E>, Violation> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let now = START_TIME;
        let mut hs = Vec::with_capacity(hosts);
        let mut by_addr = BTreeMap::new();
        let mut delayed = Vec::new();
        for i in 0..hosts {
            let ip = host_ip(i);
            by_addr.insert((ip, BUS_PORT), i);
            let delay = start_delay_ms(i);
            let engine = if delay > 0 {
                delayed.push((i, delay));
                None
            } else {
                Some(
                    factory(i, now, rng.next_u64(), None).map_err(|message| Violation {
                        seed,
                        at: now,
                        elapsed_ms: 0,
                        event_no: 0,
                        host: i,
                        invariant: "engine start".into(),
                        message,
                    })?,
                )
            };
            hs.push(Host {
                ip,
                engine,
                incarnation: 0,
                disk: Disk::new(),
                links: BTreeMap::new(),
                deadline: None,
                timer: None,
                last_fired: None,
                traffic: Traffic::default(),
                crashes: 0,
            });
        }
        let mut sim = Sim {
            seed,
            rng,
            now,
            net,
            partitions: Partitions::default(),
            hosts: hs,
            by_addr,
            conns: BTreeMap::new(),
            next_conn: 0,
            queue: BTreeMap::new(),
            next_ev: 0,
            events: 0,
            trace: TraceHash::new(),
            factory,
            invariants: Vec::new(),
            check_invariants: true,
            violation: None,
            step_fail_names: Vec::new(),
            raw: BTreeMap::new(),
            step_events: Vec::new(),
            record_events: false,
            recorded: Vec::new(),
            event_outputs: 0,
            auth_frames: Vec::new(),
            transmit_tap: None,
            started: Vec::new(),
        };
        for i in 0..hosts {
            sim.after_engine_call(i);
        }
        for (host, delay) in delayed {
            sim.schedule(now.saturating_add_ms(delay), Ev::Start { host });
        }
        Ok(sim)
    }

    // ----- queries -----

    /// The run's seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }
    /// The virtual clock.
    pub fn now(&self) -> Millis {
        self.now
    }
    /// Ms since [`START_TIME`].
    pub fn elapsed_ms(&self) -> u64 {
        self.now.since(START_TIME)
    }
    /// Number of hosts.
    pub fn hosts(&self) -> usize {
        self.hosts.len()
    }
    /// The bus IP of a host.
    pub fn ip(&self, host: usize) -> IpAddr {
        self.hosts[host].ip
    }
    /// The engine of a host, `None` while it is crashed.
    pub fn engine(&self, host: usize) -> Option<&E> {
        self.hosts.get(host).and_then(|h| h.engine.as_ref())
    }
    /// Whether a host is running.
    pub fn is_up(&self, host: usize) -> bool {
        self.engine(host).is_some()
    }
    /// A host's disk.
    pub fn disk(&self, host: usize) -> &Disk {
        &self.hosts[host].disk
    }
    /// How many times a host crashed.
    pub fn crashes(&self, host: usize) -> u64 {
        self.hosts[host].crashes
    }
    /// The trace so far (digest and event count).
    pub fn trace(&self) -> TraceHash {
        self.trace
    }
    /// Events processed so far.
    pub fn events(&self) -> u64 {
        self.events
    }
    /// Event outputs seen so far.
    pub fn event_outputs(&self) -> u64 {
        self.event_outputs
    }
    /// The events recorded since [`Sim::set_record_events`] turned recording on:
    /// (time, host, event).
    pub fn recorded_events(&self) -> &[(Millis, usize, E::Event)] {
        &self.recorded
    }
    /// Takes the events recorded so far out of the simulator (recording stays as it is).
    pub fn take_recorded_events(&mut self) -> Vec<(Millis, usize, E::Event)> {
        std::mem::take(&mut self.recorded)
    }
    /// Takes the hosts whose delayed first start ([`Sim::new_staggered`]) ran since the last
    /// call, in start order. A host beside the engine (a data plane) starts its own part for
    /// them: the simulator starts them on its own, not through a call of the driver's.
    pub fn take_started(&mut self) -> Vec<usize> {
        std::mem::take(&mut self.started)
    }
    /// Every FAILOVER_AUTH_REQUEST and FAILOVER_AUTH_ACK frame transmitted so far, in order.
    pub fn auth_frames(&self) -> &[AuthFrame] {
        &self.auth_frames
    }
    /// Sets (or, with `None`, removes) the [`TransmitTap`] that sees every transmit from now
    /// on: for checks on what engines send (say, the gossip entries of every PING), which the
    /// sniffer's frame boundaries and types do not show.
    pub fn set_transmit_tap(&mut self, tap: Option<TransmitTap<E>>) {
        self.transmit_tap = tap;
    }
    /// The virtual time of the next queued event, if any.
    pub fn next_event_time(&self) -> Option<Millis> {
        self.queue.first_key_value().map(|(&(at, _), _)| at)
    }
    /// Turns event recording on or off (off by default; recorded events are kept).
    pub fn set_record_events(&mut self, on: bool) {
        self.record_events = on;
    }
    /// Bus traffic sent by one host so far.
    pub fn traffic(&self, host: usize) -> &Traffic {
        &self.hosts[host].traffic
    }
    /// Bus traffic of all hosts so far.
    pub fn total_traffic(&self) -> Traffic {
        let mut t = Traffic::default();
        for h in &self.hosts {
            t.add(&h.traffic);
        }
        t
    }
    /// Open links of a host (engine link IDs known to the simulator).
    pub fn open_links(&self, host: usize) -> usize {
        self.hosts[host].links.len()
    }
    /// The network parameters.
    pub fn net(&self) -> &NetConfig {
        &self.net
    }
    /// The partition table (read only; change it with the fault methods).
    pub fn partitions(&self) -> &Partitions {
        &self.partitions
    }
    /// The first broken invariant, if the run stopped on one.
    pub fn violation(&self) -> Option<&Violation> {
        self.violation.as_ref()
    }

    // ----- configuration -----

    /// Registers an invariant checked after every step.
    pub fn add_invariant(&mut self, inv: Box<dyn Invariant<E>>) {
        self.invariants.push(inv);
    }
    /// Turns invariant checking on or off (benchmarks turn it off).
    pub fn set_check_invariants(&mut self, on: bool) {
        self.check_invariants = on;
    }
    /// Changes the network parameters from now on.
    pub fn set_net(&mut self, net: NetConfig) {
        self.net = net;
    }
    /// A fresh random number from the run's RNG (for fault drivers, so that the whole run
    /// stays a function of the seed).
    pub fn random(&mut self) -> u64 {
        self.rng.next_u64()
    }
    /// A random number in `lo..=hi` from the run's RNG.
    pub fn random_range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.rng.next_u64() % (hi - lo + 1)
    }

    // ----- running -----

    /// Processes the earliest pending event, if any. `Ok(false)` when the queue is empty.
    ///
    /// # Errors
    /// The first broken invariant (also kept in [`Sim::violation`]).
    pub fn step(&mut self) -> Result<bool, Violation> {
        if let Some(v) = &self.violation {
            return Err(v.clone());
        }
        let Some(((at, _), ev)) = self.queue.pop_first() else {
            return Ok(false);
        };
        if at > self.now {
            self.now = at;
        }
        self.dispatch(ev);
        match &self.violation {
            Some(v) => Err(v.clone()),
            None => Ok(true),
        }
    }

    /// Runs every event due at or before `until`, then sets the clock to `until`.
    ///
    /// # Errors
    /// The first broken invariant.
    pub fn run_until(&mut self, until: Millis) -> Result<(), Violation> {
        while let Some((&(at, _), _)) = self.queue.first_key_value() {
            if at > until {
                break;
            }
            self.step()?;
        }
        if until > self.now {
            self.now = until;
        }
        Ok(())
    }

    /// Runs for `ms` of virtual time.
    ///
    /// # Errors
    /// The first broken invariant.
    pub fn run_for(&mut self, ms: u64) -> Result<(), Violation> {
        self.run_until(self.now.saturating_add_ms(ms))
    }

    /// Runs until `cond` holds (checked after every step) or `max_ms` of virtual time passed.
    /// Returns whether `cond` held.
    ///
    /// # Errors
    /// The first broken invariant.
    pub fn run_until_cond(
        &mut self,
        max_ms: u64,
        mut cond: impl FnMut(&Sim<E>) -> bool,
    ) -> Result<bool, Violation> {
        let deadline = self.now.saturating_add_ms(max_ms);
        if cond(self) {
            return Ok(true);
        }
        while let Some((&(at, _), _)) = self.queue.first_key_value() {
            if at > deadline {
                break;
            }
            self.step()?;
            if cond(self) {
                return Ok(true);
            }
        }
        if deadline > self.now {
            self.now = deadline;
        }
        Ok(cond(self))
    }

    /// Calls into a running host's engine (a CLUSTER command, a test probe), then acts on its
    /// outputs and checks invariants. `None` if the host is down.
    ///
    /// # Errors
    /// The first broken invariant.
    pub fn with_engine<R>(
        &mut self,
        host: usize,
        f: impl FnOnce(&mut E, Millis) -> R,
    ) -> Result<Option<R>, Violation> {
        self.engine_step(host, 0xC0, StepKind::Command, f)
    }

    /// Like [`Sim::with_engine`], but the step counts as a host report
    /// ([`StepKind::Report`]): invariants treat it as an ordinary input, not a command.
    ///
    /// # Errors
    /// The first broken invariant.
    pub fn report_to_engine<R>(
        &mut self,
        host: usize,
        f: impl FnOnce(&mut E, Millis) -> R,
    ) -> Result<Option<R>, Violation> {
        self.engine_step(host, 0xC1, StepKind::Report, f)
    }

    /// One call into a running host's engine, traced with `tag`, then the step's outputs and
    /// invariants as `kind`. `None` if the host is down.
    fn engine_step<R>(
        &mut self,
        host: usize,
        tag: u8,
        kind: StepKind,
        f: impl FnOnce(&mut E, Millis) -> R,
    ) -> Result<Option<R>, Violation> {
        let now = self.now;
        let Some(engine) = self.hosts[host].engine.as_mut() else {
            return Ok(None);
        };
        let r = f(engine, now);
        self.trace.event(now.0, tag);
        self.trace.u64(host as u64);
        self.after_step(host, kind);
        match &self.violation {
            Some(v) => Err(v.clone()),
            None => Ok(Some(r)),
        }
    }

    // ----- faults -----

    /// Blocks `from → to` (one-way partition). Bytes already sent stay queued until healed.
    pub fn block_one_way(&mut self, from: usize, to: usize) {
        self.partitions.block_one_way(from, to);
    }
    /// Blocks both directions between `a` and `b`.
    pub fn block_two_way(&mut self, a: usize, b: usize) {
        self.partitions.block_two_way(a, b);
    }
    /// Splits the hosts into groups that cannot reach each other.
    pub fn split(&mut self, groups: &[&[usize]]) {
        self.partitions.split(groups);
    }
    /// Cuts one host off from every other.
    pub fn isolate(&mut self, host: usize) {
        let n = self.hosts.len();
        self.partitions.isolate(host, n);
    }
    /// Removes every partition; stalled streams resume after one latency.
    pub fn heal(&mut self) {
        self.partitions.heal();
        let stalled: Vec<(u64, usize)> = self
            .conns
            .iter()
            .flat_map(|(&id, c)| {
                (0..2)
                    .filter(move |&d| !c.dirs[d].queue.is_empty())
                    .map(move |d| (id, d))
            })
            .collect();
        for (conn, dir) in stalled {
            let lat = self.latency();
            self.schedule(self.now.saturating_add_ms(lat), Ev::Flush { conn, dir });
        }
    }

    /// Breaks every link between `a` and `b` (a connectivity loss): both ends see `Closed`
    /// after one latency; bytes in flight are lost.
    pub fn break_links(&mut self, a: usize, b: usize) {
        let ids: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                (c.ends[0].host == a && c.ends[1].host == b)
                    || (c.ends[0].host == b && c.ends[1].host == a)
            })
            .map(|(&id, _)| id)
            .collect();
        for id in ids {
            for d in 0..2 {
                let lat = self.latency();
                if let Some(c) = self.conns.get_mut(&id) {
                    // A reset: in-flight data is discarded, the close is all that arrives.
                    c.dirs[d].queue.clear();
                    c.dirs[d].fail_marks.clear();
                }
                self.push_chunk(id, d, Chunk::Fin, lat);
            }
        }
    }

    /// Crashes a host: its engine is dropped, unacknowledged nodes.conf writes are kept or
    /// lost at random, and every peer sees its links to the host close within
    /// `crash_close_max_ms`. Returns `false` if the host was already down.
    pub fn crash(&mut self, host: usize) -> bool {
        if self.hosts[host].engine.is_none() {
            return false;
        }
        let pending = self.hosts[host].disk.pending_len() as u64;
        let keep = self.random_range(0, pending) as usize;
        let h = &mut self.hosts[host];
        h.engine = None;
        h.incarnation += 1;
        h.timer = None;
        h.deadline = None;
        h.crashes += 1;
        h.disk.crash(keep);
        let links: Vec<(u64, usize)> = std::mem::take(&mut h.links).into_values().collect();
        for (conn, side) in links {
            if let Some(c) = self.conns.get_mut(&conn) {
                c.ends[side].open = false;
                if !c.accepted {
                    self.conns.remove(&conn);
                    continue;
                }
            }
            let delay = self.random_range(0, self.net.crash_close_max_ms);
            self.push_chunk(conn, side, Chunk::Fin, delay);
        }
        self.trace.event(self.now.0, 0xCC);
        self.trace.u64(host as u64);
        true
    }

    /// Restarts a crashed host from the nodes.conf on its disk. Returns `false` if it is up.
    ///
    /// # Errors
    /// The first broken invariant.
    pub fn restart(&mut self, host: usize) -> Result<bool, Violation> {
        if self.hosts[host].engine.is_some() {
            return Ok(false);
        }
        let seed = self.rng.next_u64();
        let now = self.now;
        let engine = match (self.factory)(host, now, seed, self.hosts[host].disk.contents()) {
            Ok(e) => e,
            Err(message) => {
                let v = Violation {
                    seed: self.seed,
                    at: now,
                    elapsed_ms: self.elapsed_ms(),
                    event_no: self.events,
                    host,
                    invariant: "engine start".into(),
                    message,
                };
                self.violation = Some(v.clone());
                return Err(v);
            }
        };
        self.hosts[host].engine = Some(engine);
        self.trace.event(now.0, 0xAA);
        self.trace.u64(host as u64);
        self.after_step(host, StepKind::Restart);
        match &self.violation {
            Some(v) => Err(v.clone()),
            None => Ok(true),
        }
    }

    /// Crashes a host and wipes its disk (a host replaced by an empty machine). It restarts
    /// with [`Sim::restart`] as a brand-new node.
    pub fn crash_and_wipe(&mut self, host: usize) {
        self.crash(host);
        self.hosts[host].disk.wipe();
    }

    // ----- raw link access for tests -----

    /// Injects raw bytes on every open link that `from` holds towards `to`, in `from`'s
    /// outgoing stream (as if `from`'s engine had transmitted them). Returns the number of
    /// links used.
    pub fn inject_bytes(&mut self, from: usize, to: usize, bytes: &[u8]) -> usize {
        let targets: Vec<(u64, usize)> = self.hosts[from]
            .links
            .values()
            .copied()
            .filter(|&(c, side)| {
                self.conns
                    .get(&c)
                    .is_some_and(|c| c.ends[1 - side].host == to)
            })
            .collect();
        for &(conn, side) in &targets {
            self.transmit(conn, side, bytes.to_vec());
        }
        targets.len()
    }

    /// Opens a connection from a raw test peer at `from_ip` to host `to`'s bus port. The
    /// host accepts it (`handle_accept(from_ip)`) one latency later, like any connect; the
    /// test then writes with [`Sim::raw_send`] and reads with [`Sim::raw_received`].
    pub fn raw_connect(&mut self, from_ip: IpAddr, to: usize) -> RawConn {
        let now = self.now;
        let conn = self.next_conn;
        self.next_conn += 1;
        self.conns.insert(
            conn,
            Conn {
                ends: [
                    End {
                        host: RAW,
                        link: None,
                        open: true,
                    },
                    End {
                        host: to,
                        link: None,
                        open: true,
                    },
                ],
                dirs: [Dir::default(), Dir::default()],
                started: now,
                accepted: false,
                from_ip,
            },
        );
        self.raw.insert(conn, RawState::default());
        let lat = self.latency();
        self.schedule(now.saturating_add_ms(lat), Ev::Syn { conn });
        RawConn(conn)
    }

    /// Writes bytes from a raw peer (split and delayed like any transmit).
    pub fn raw_send(&mut self, raw: RawConn, bytes: &[u8]) {
        if self.conns.get(&raw.0).is_some_and(|c| c.ends[0].open) {
            self.transmit(raw.0, 0, bytes.to_vec());
        }
    }

    /// Closes a raw peer's side.
    pub fn raw_close(&mut self, raw: RawConn) {
        if let Some(c) = self.conns.get_mut(&raw.0) {
            c.ends[0].open = false;
            let lat = self.latency();
            self.push_chunk(raw.0, 0, Chunk::Fin, lat);
        }
    }

    /// Everything the host sent to a raw peer so far.
    pub fn raw_received(&self, raw: RawConn) -> &[u8] {
        self.raw.get(&raw.0).map_or(&[][..], |r| &r.received)
    }

    /// Whether the host closed (or never accepted) the raw peer's connection.
    pub fn raw_closed_by_peer(&self, raw: RawConn) -> bool {
        self.raw.get(&raw.0).is_none_or(|r| r.closed_by_peer)
    }

    // ----- internals -----

    fn latency(&mut self) -> u64 {
        let (lo, hi) = (self.net.min_latency_ms, self.net.max_latency_ms);
        self.random_range(lo, hi)
    }

    fn percent(&mut self, p: u8) -> bool {
        p > 0 && (self.rng.next_u64() % 100) < u64::from(p)
    }

    fn schedule(&mut self, at: Millis, ev: Ev) {
        let at = at.max(self.now);
        self.next_ev += 1;
        self.queue.insert((at, self.next_ev), ev);
    }

    fn dispatch(&mut self, ev: Ev) {
        self.events += 1;
        match ev {
            Ev::Timer { host } => self.on_timer(host),
            Ev::Syn { conn } => self.on_syn(conn),
            Ev::SynAck { conn } => self.on_syn_ack(conn),
            Ev::Refused { conn } => self.on_refused(conn),
            Ev::Flush { conn, dir } => self.on_flush(conn, dir),
            Ev::Fsync {
                host,
                incarnation,
                seq,
            } => self.on_fsync(host, incarnation, seq),
            Ev::Start { host } => {
                // A refusal is recorded as the run's violation and stops it.
                if let Ok(true) = self.restart(host) {
                    self.started.push(host);
                }
            }
        }
    }

    fn on_timer(&mut self, host: usize) {
        let now = self.now;
        let h = &mut self.hosts[host];
        if h.timer != Some(now) {
            return; // a stale entry: the deadline moved or the host crashed
        }
        h.timer = None;
        h.last_fired = Some(now);
        let Some(e) = h.engine.as_mut() else { return };
        e.handle_timeout(now);
        self.trace.event(now.0, 1);
        self.trace.u64(host as u64);
        self.after_step(host, StepKind::Timer);
    }

    fn on_syn(&mut self, conn: u64) {
        let now = self.now;
        let Some(c) = self.conns.get(&conn) else {
            return;
        };
        let (from, to) = (c.ends[0].host, c.ends[1].host);
        if !c.ends[0].open {
            // The connecting side gave up before the SYN arrived.
            self.conns.remove(&conn);
            return;
        }
        let started = c.started;
        if !self.partitions.delivers(from, to) {
            let fail = match self.net.partitioned_connect {
                PartitionedConnect::Hang => false,
                PartitionedConnect::Fail => true,
                PartitionedConnect::Random => self.rng.next_u64() & 1 == 0,
            };
            if fail || now.since(started) >= SYN_GIVE_UP_MS {
                let lat = self.latency();
                self.schedule(now.saturating_add_ms(lat), Ev::Refused { conn });
            } else {
                self.schedule(now.saturating_add_ms(SYN_RETRY_MS), Ev::Syn { conn });
            }
            return;
        }
        let from_ip = c.from_ip;
        let Some(engine) = self.hosts[to].engine.as_mut() else {
            // Nothing listens: refused.
            let lat = self.latency();
            self.schedule(now.saturating_add_ms(lat), Ev::Refused { conn });
            return;
        };
        let link = engine.handle_accept(from_ip, now);
        self.hosts[to].links.insert(link, (conn, 1));
        if let Some(c) = self.conns.get_mut(&conn) {
            c.ends[1].link = Some(link);
            c.accepted = true;
        }
        self.trace.event(now.0, 2);
        self.trace.u64(conn);
        self.after_step(to, StepKind::Link);
        let lat = self.latency();
        self.schedule(now.saturating_add_ms(lat), Ev::SynAck { conn });
        // Bytes the connecting side queued early can flow now.
        self.schedule(now.saturating_add_ms(lat), Ev::Flush { conn, dir: 0 });
    }

    fn on_syn_ack(&mut self, conn: u64) {
        let now = self.now;
        let Some(c) = self.conns.get(&conn) else {
            return;
        };
        let (from, to) = (c.ends[0].host, c.ends[1].host);
        if !c.ends[0].open {
            return;
        }
        if !self.partitions.delivers(to, from) {
            // The SYN-ACK is retransmitted until the partition heals.
            self.schedule(now.saturating_add_ms(SYN_RETRY_MS), Ev::SynAck { conn });
            return;
        }
        let Some(link) = c.ends[0].link else { return };
        let Some(engine) = self.hosts[from].engine.as_mut() else {
            return;
        };
        engine.handle_link(LinkEvent::Connected(link), now);
        self.trace.event(now.0, 3);
        self.trace.u64(conn);
        self.after_step(from, StepKind::Link);
    }

    fn on_refused(&mut self, conn: u64) {
        let now = self.now;
        let Some(c) = self.conns.remove(&conn) else {
            return;
        };
        if let Some(r) = self.raw.get_mut(&conn) {
            r.closed_by_peer = true;
        }
        if !c.ends[0].open || c.ends[0].host == RAW {
            return;
        }
        let host = c.ends[0].host;
        let Some(link) = c.ends[0].link else { return };
        self.hosts[host].links.remove(&link);
        let Some(engine) = self.hosts[host].engine.as_mut() else {
            return;
        };
        engine.handle_link(LinkEvent::ConnectFailed(link), now);
        self.trace.event(now.0, 4);
        self.trace.u64(conn);
        self.after_step(host, StepKind::Link);
    }

    fn on_flush(&mut self, conn: u64, dir: usize) {
        let now = self.now;
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let (from, to) = (c.ends[dir].host, c.ends[1 - dir].host);
        if !c.accepted {
            return; // the SYN has not arrived; on_syn flushes later
        }
        if !self.partitions.delivers(from, to) {
            return; // stalled; heal() flushes again
        }
        // Take the ready prefix of the stream.
        let mut ready = Vec::new();
        while let Some((at, _)) = c.dirs[dir].queue.front() {
            if *at > now {
                break;
            }
            if let Some((_, chunk)) = c.dirs[dir].queue.pop_front() {
                ready.push(chunk);
            }
        }
        if ready.is_empty() {
            return;
        }
        let receiver_open = c.ends[1 - dir].open;
        let link = c.ends[1 - dir].link;
        if to == RAW {
            if let Some(r) = self.raw.get_mut(&conn) {
                for chunk in ready {
                    match chunk {
                        Chunk::Bytes(b) if receiver_open => r.received.extend_from_slice(&b),
                        Chunk::Bytes(_) => {}
                        Chunk::Fin => r.closed_by_peer = true,
                    }
                }
            }
            return;
        }
        if !receiver_open || link.is_none() {
            self.maybe_drop_conn(conn);
            return; // the receiving side is gone: the bytes vanish
        }
        let Some(link) = link else { return };
        // Group byte chunks into deliveries (coalescing at random), keeping the order.
        let mut deliveries: Vec<Chunk> = Vec::new();
        for chunk in ready {
            match (deliveries.last_mut(), chunk) {
                (Some(Chunk::Bytes(prev)), Chunk::Bytes(b))
                    if self.rng.next_u64() % 100 < u64::from(self.net.coalesce_percent) =>
                {
                    prev.extend_from_slice(&b)
                }
                (_, chunk) => deliveries.push(chunk),
            }
        }
        for chunk in deliveries {
            // The receiver may have closed or crashed during an earlier delivery of this loop.
            let Some(c) = self.conns.get_mut(&conn) else {
                return;
            };
            if !c.ends[1 - dir].open {
                return;
            }
            match chunk {
                Chunk::Bytes(bytes) => {
                    let d = &mut c.dirs[dir];
                    d.delivered += bytes.len() as u64;
                    while d
                        .fail_marks
                        .front()
                        .is_some_and(|(end, _)| *end <= d.delivered)
                    {
                        if let Some((_, name)) = d.fail_marks.pop_front() {
                            self.step_fail_names.push(name);
                        }
                    }
                    let Some(engine) = self.hosts[to].engine.as_mut() else {
                        return;
                    };
                    engine.handle_link_bytes(link, &bytes, now);
                    self.trace.event(now.0, 5);
                    self.trace.u64(conn);
                    self.trace.u64(dir as u64);
                    hash_payload(&mut self.trace, &bytes);
                    self.after_step(to, StepKind::Bytes);
                }
                Chunk::Fin => {
                    c.ends[1 - dir].open = false;
                    self.hosts[to].links.remove(&link);
                    let Some(engine) = self.hosts[to].engine.as_mut() else {
                        return;
                    };
                    engine.handle_link(LinkEvent::Closed(link), now);
                    self.trace.event(now.0, 6);
                    self.trace.u64(conn);
                    self.after_step(to, StepKind::Link);
                }
            }
            if self.violation.is_some() {
                return;
            }
        }
        self.maybe_drop_conn(conn);
    }

    fn maybe_drop_conn(&mut self, conn: u64) {
        if let Some(c) = self.conns.get(&conn) {
            let closed = !c.ends[0].open && !c.ends[1].open;
            let drained = c.dirs.iter().all(|d| d.queue.is_empty());
            if closed && drained {
                self.conns.remove(&conn);
            }
        }
    }

    fn on_fsync(&mut self, host: usize, incarnation: u32, seq: u64) {
        let now = self.now;
        let h = &mut self.hosts[host];
        if h.incarnation != incarnation {
            return; // the host crashed before the fsync completed
        }
        if !h.disk.ack(seq) {
            return;
        }
        let Some(engine) = h.engine.as_mut() else {
            return;
        };
        engine.handle_persisted(seq, now);
        self.trace.event(now.0, 7);
        self.trace.u64(host as u64);
        self.trace.u64(seq);
        self.after_step(host, StepKind::Persisted);
    }

    /// Drains the engine's outputs, re-arms its timer, checks invariants.
    fn after_step(&mut self, host: usize, kind: StepKind) {
        self.after_engine_call(host);
        let names = std::mem::take(&mut self.step_fail_names);
        let events = std::mem::take(&mut self.step_events);
        if self.check_invariants && self.violation.is_none() && !self.invariants.is_empty() {
            let info = StepInfo {
                host,
                kind,
                fail_names_delivered: names,
                events,
            };
            let mut invs = std::mem::take(&mut self.invariants);
            for inv in invs.iter_mut() {
                if let Err(message) = inv.check(self, &info) {
                    self.violation = Some(Violation {
                        seed: self.seed,
                        at: self.now,
                        elapsed_ms: self.elapsed_ms(),
                        event_no: self.events,
                        host,
                        invariant: inv.name().to_string(),
                        message,
                    });
                    break;
                }
            }
            self.invariants = invs;
        }
    }

    fn after_engine_call(&mut self, host: usize) {
        let now = self.now;
        loop {
            let Some(engine) = self.hosts[host].engine.as_mut() else {
                return;
            };
            let Some(out) = engine.poll_output() else {
                break;
            };
            match out {
                EngineOutput::Connect { link, ip, port } => self.connect(host, link, ip, port),
                EngineOutput::Transmit { link, bytes } => {
                    if let (Some(tap), Some(engine)) =
                        (self.transmit_tap.as_mut(), self.hosts[host].engine.as_ref())
                    {
                        tap(host, engine, now, &bytes);
                    }
                    if let Some(&(conn, side)) = self.hosts[host].links.get(&link) {
                        self.transmit(conn, side, bytes);
                    }
                }
                EngineOutput::Close { link } => {
                    if let Some((conn, side)) = self.hosts[host].links.remove(&link) {
                        if let Some(c) = self.conns.get_mut(&conn) {
                            c.ends[side].open = false;
                            if !c.accepted {
                                // Never reached the peer: nothing to tell it.
                                self.conns.remove(&conn);
                                continue;
                            }
                        }
                        let lat = self.latency();
                        self.push_chunk(conn, side, Chunk::Fin, lat);
                    }
                }
                EngineOutput::Persist { seq, contents } => {
                    let h = &mut self.hosts[host];
                    h.disk.write(seq, contents);
                    let inc = h.incarnation;
                    let (lo, hi) = (self.net.min_fsync_ms, self.net.max_fsync_ms);
                    let d = self.random_range(lo, hi);
                    self.schedule(
                        now.saturating_add_ms(d),
                        Ev::Fsync {
                            host,
                            incarnation: inc,
                            seq,
                        },
                    );
                }
                EngineOutput::Event(ev) => {
                    if let Some(text) = E::trace_text(&ev) {
                        self.event_outputs += 1;
                        self.trace.event(now.0, 8);
                        self.trace.bytes(text.as_bytes());
                    }
                    if self.record_events {
                        self.recorded.push((now, host, ev.clone()));
                    }
                    if self.check_invariants && !self.invariants.is_empty() {
                        self.step_events.push(ev);
                    }
                }
            }
        }
        // Re-arm the timer if the deadline moved (or the queued one fired).
        let h = &mut self.hosts[host];
        let deadline = h.engine.as_ref().and_then(|e| e.poll_timeout());
        if deadline == h.deadline && (h.timer.is_some() || deadline.is_none()) {
            return;
        }
        h.deadline = deadline;
        h.timer = None;
        if let Some(at) = deadline {
            // A deadline in the past fires now; but never twice at one instant, so an engine
            // that does not move its deadline cannot stall the clock.
            let floor = if h.last_fired == Some(now) {
                now.saturating_add_ms(1)
            } else {
                now
            };
            let at = at.max(floor);
            h.timer = Some(at);
            self.schedule(at, Ev::Timer { host });
        }
    }

    fn connect(&mut self, host: usize, link: E::Link, ip: IpAddr, port: u16) {
        let now = self.now;
        let conn = self.next_conn;
        self.next_conn += 1;
        self.hosts[host].links.insert(link, (conn, 0));
        let target = self.by_addr.get(&(ip, port)).copied();
        let Some(target) = target else {
            // No host has this address: the SYN is never answered (a black hole). The
            // connection stays pending until the engine closes it.
            self.conns.insert(
                conn,
                Conn {
                    ends: [
                        End {
                            host,
                            link: Some(link),
                            open: true,
                        },
                        End {
                            host,
                            link: None,
                            open: false,
                        },
                    ],
                    dirs: [Dir::default(), Dir::default()],
                    started: now,
                    accepted: false,
                    from_ip: self.hosts[host].ip,
                },
            );
            return;
        };
        self.conns.insert(
            conn,
            Conn {
                ends: [
                    End {
                        host,
                        link: Some(link),
                        open: true,
                    },
                    End {
                        host: target,
                        link: None,
                        open: true,
                    },
                ],
                dirs: [Dir::default(), Dir::default()],
                started: now,
                accepted: false,
                from_ip: self.hosts[host].ip,
            },
        );
        let lat = self.latency();
        self.schedule(now.saturating_add_ms(lat), Ev::Syn { conn });
    }

    fn transmit(&mut self, conn: u64, side: usize, bytes: Vec<u8>) {
        if bytes.is_empty() {
            return;
        }
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let host = c.ends[side].host;
        let peer = c.ends[1 - side].host;
        // Follow frame boundaries for traffic counts and FAIL tracking.
        let mut frames: Vec<SniffedFrame> = Vec::new();
        let d = &mut c.dirs[side];
        d.sniffer.feed(&bytes, &mut frames);
        let mut scratch = Traffic::default();
        let traffic = match self.hosts.get_mut(host) {
            Some(h) => &mut h.traffic,
            None => &mut scratch, // a raw peer
        };
        traffic.bytes += bytes.len() as u64;
        for f in frames {
            let idx = usize::from(f.msg_type & 0x7fff).min(15);
            traffic.frames_by_type[idx] += 1;
            if let Some(name) = f.fail_name {
                d.fail_marks.push_back((f.end, name));
            }
            if let Some((current_epoch, sender)) = f.epoch_sender {
                self.auth_frames.push(AuthFrame {
                    at: self.now,
                    msg_type: f.msg_type,
                    from: host,
                    to: peer,
                    current_epoch,
                    sender,
                });
            }
        }
        // Split the transmit at random points; each piece is its own delivery.
        let mut pieces = vec![bytes];
        for _ in 0..3 {
            if !self.percent(self.net.split_percent) {
                break;
            }
            let Some(last) = pieces.pop() else { break };
            if last.len() < 2 {
                pieces.push(last);
                break;
            }
            let at = 1 + (self.rng.next_u64() % (last.len() as u64 - 1)) as usize;
            let (a, b) = last.split_at(at);
            pieces.push(a.to_vec());
            pieces.push(b.to_vec());
        }
        for p in pieces {
            let lat = self.latency();
            self.push_chunk(conn, side, Chunk::Bytes(p), lat);
        }
    }

    /// Appends to `side`'s outgoing stream, ready after `delay_ms` but never before the
    /// chunk sent before it (streams keep their order).
    fn push_chunk(&mut self, conn: u64, side: usize, chunk: Chunk, delay_ms: u64) {
        let now = self.now;
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let d = &mut c.dirs[side];
        let ready = now.saturating_add_ms(delay_ms).max(d.last_ready);
        d.last_ready = ready;
        d.queue.push_back((ready, chunk));
        self.schedule(ready, Ev::Flush { conn, dir: side });
    }
}

/// Mixes a payload into the trace: its length, then 8-byte little-endian words (FNV-1a step
/// per word, so long frames cost an eighth of a byte-wise pass), then the tail bytes.
fn hash_payload(trace: &mut TraceHash, bytes: &[u8]) {
    trace.u64(bytes.len() as u64);
    let mut words = bytes.chunks_exact(8);
    let mut acc: u64 = 0;
    for w in &mut words {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        acc = (acc ^ u64::from_le_bytes(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    trace.u64(acc);
    trace.bytes(words.remainder());
}

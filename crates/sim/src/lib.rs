//! The deterministic simulator of ferrocluster (issue 4): many cluster nodes under one
//! virtual clock, a network that delays, splits, stalls and partitions bus links, hosts that
//! crash and restart from the nodes.conf they had made durable, invariants checked after
//! every step, and every run reproducible from one seed.
//!
//! The idea follows TigerBeetle's VOPR and FoundationDB's simulation (STYLE.md): the
//! simulator is the host of every engine, so the engines' Sans-IO contract (DESIGN.md) is all
//! it needs; nothing reads a real clock or real randomness.
//!
//! # Model
//!
//! * **Clock**: one virtual [`Millis`](ferrocluster_topology::Millis) clock starting at
//!   [`START_TIME`]. Events sit in one queue ordered by (time, insertion number); a step pops
//!   the earliest, advances the clock to it and calls one engine input.
//! * **Hosts**: host *i* has bus address [`host_ip`]`(i)`:[`BUS_PORT`]. Its engine is built by
//!   a [`Factory`] from a seed drawn from the run's RNG and from the nodes.conf on its
//!   [`Disk`] (on restart).
//! * **Links** are TCP-like ordered byte streams. A `Connect` output reaches the host at that
//!   address after one latency and becomes `handle_accept` there; the connecting side gets
//!   `Connected` one latency later. A connect to an address nobody has is never answered; to
//!   a crashed host it is refused. Every transmit gets a latency drawn per message from
//!   `min_latency_ms..=max_latency_ms` ([`NetConfig`]), but a stream never overtakes itself;
//!   transmits are split at random points and ready pieces are coalesced at random, so the
//!   engines' framers see arbitrary read boundaries. `Close` reaches the peer after the
//!   bytes sent before it.
//! * **Partitions** ([`Partitions`]) are directed: a blocked direction delivers nothing; its
//!   bytes wait (TCP retransmission) and flow after [`Sim::heal`], unless an engine closes
//!   the link first. A connect across a partition hangs (SYN retried every second, failing
//!   after 30 s) or fails at once, chosen per [`PartitionedConnect`].
//!   [`Sim::break_links`] resets every link between two hosts (connectivity loss).
//! * **Disk and crashes**: a `Persist` output is written to the host's [`Disk`] and
//!   acknowledged with `handle_persisted` after a seeded fsync delay. [`Sim::crash`] drops the
//!   engine; each unacknowledged write may or may not have reached the disk (a seeded
//!   choice); peers see their links close within `crash_close_max_ms`. [`Sim::restart`]
//!   builds a new engine from what the disk holds.
//! * **Trace**: every delivered event (kind, time, host or link, payload) is mixed into a
//!   [`TraceHash`]; the same seed gives the same digest (tested).
//! * **Invariants** ([`Invariant`]) run after every step. The first broken one stops the run
//!   with a [`Violation`] naming the seed; [`seed::replay_hint`] gives the command that
//!   replays it (`FERROCLUSTER_SIM_SEED=<seed> cargo test -p ferrocluster-sim <test>`).
//!
//! * **Data plane** ([`World`], module [`world`]): a [`ClusterSim`] plus what a database
//!   host does beside the bus — a real keyspace per host and replication from primaries to
//!   replicas with the shipped `ferrocluster_dataplane::Replication` over simulated
//!   connections (RDB full syncs, partial resyncs from the backlog, links that drop with
//!   partitions and crashes), the engine's replication state reported to every node
//!   (`ClusterNode::handle_replication`), write pauses (`Event::PauseWrites`), re-pointing on
//!   role events, and a client that writes to slots and records acknowledged writes.
//!   Atomic slot migration runs on it too: the host side of every `MigrationRequest` (data
//!   connections, snapshot, forwarded writes, hide/reveal/drop, injected OOM, output-buffer
//!   overrun, AUTH refusal and FLUSHALL; see [`world`]).
//! * **Failover** ([`failover`]): clusters with replicas ([`build_world`]), the
//!   one-ACK-per-voter-and-epoch invariant ([`OneVotePerEpoch`], from FAILOVER_AUTH_ACK
//!   frames sniffed off the streams, [`Sim::auth_frames`]), the epoch convergence check,
//!   the random failover run and the failover-time measurement of the benchmark.
//!
//! # Seeds and sweeps
//!
//! CI runs the default seed counts (a debug build on 2 cores: `cargo test -p
//! ferrocluster-sim` takes about 80 s there). Bigger sweeps set the counts:
//!
//! ```text
//! FERROCLUSTER_SIM_SEEDS=3000 cargo test -p ferrocluster-sim --test random_faults
//! FERROCLUSTER_SIM_FAILOVER_SEEDS=3400 cargo test -p ferrocluster-sim --test random_failover
//! ```
//!
//! and one failing seed replays with `FERROCLUSTER_SIM_SEED=<seed>` (every seeded test
//! honours it). Run sweeps with `--release` for speed.
//!
//! Schedules chosen from outside — by the `sim_schedule` fuzz target or a named scenario in
//! `tests/schedules.rs` — run through [`run_schedule`] ([`schedule`]). Long sweeps of the
//! random runs across cores: the `soak` binary (`src/bin/soak.rs`, `cargo run -p
//! ferrocluster-sim --release --bin soak -- --help`).
//!
//! The engine surface the simulator drives is the [`Engine`] trait; [`cluster`] implements
//! it for `ferrocluster_node::ClusterNode` and holds the cluster invariants and scenario
//! helpers.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod cluster;
pub mod disk;
pub mod engine;
pub mod failover;
pub mod faults;
pub mod net;
pub mod schedule;
pub mod seed;
pub mod sim;
pub mod sniff;
pub mod trace;
pub mod trace_log;
pub mod world;

pub use cluster::{
    check_converged, check_shards_match_slots, cluster_sim, cluster_sim_with, preset_cluster_sim,
    preset_cluster_sim_staggered, preset_cluster_sim_with_replicas, ClusterInvariants, ClusterSim,
    ClusterSimExt, SimError, SIM_CAPABILITIES,
};
pub use disk::Disk;
pub use engine::{Engine, EngineOutput, LinkEvent};
pub use failover::{
    build_preset_world, build_world, build_world_blocked, check_epochs_converged, measure_failover,
    random_failover_run, FailoverPlan, FailoverReport, FailoverTiming, Layout, OneVotePerEpoch,
};
pub use faults::{random_fault_run, FaultPlan, RunReport};
/// The node crate, re-exported so users of the simulator (benchmarks) need one dependency.
pub use ferrocluster_node as node;
pub use net::{NetConfig, PartitionedConnect, Partitions};
pub use schedule::{check_acked_writes, run_schedule, SchedulePlan, ScheduleReport, ScheduleStep};
pub use sim::{
    host_ip, AuthFrame, Factory, Invariant, RawConn, Sim, StepInfo, StepKind, Traffic, TransmitTap,
    Violation, BUS_PORT, CLIENT_PORT, START_TIME,
};
pub use trace::TraceHash;
pub use world::{
    AckedWrite, Answer, AsmConfig, AsmStats, DataConfig, World, WriteRefusal, CONNECT_TIMEOUT_MS,
    WRONGPASS,
};

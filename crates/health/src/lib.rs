//! Failover readiness, a quorum check and alert-grade health for one Valkey Cluster node.
//!
//! `cluster_state:ok` says little: right after a cluster is created every node says `ok`, yet
//! a replica that never completed a sync is never promoted (with the default validity factor);
//! with `cluster-require-full-coverage no` an unserved slot leaves the state `ok`; PFAIL slots
//! never change it; and a node's view of reachable primaries is local. This crate answers, from
//! one node's [`Topology`] and nothing else (pure `&` queries, no I/O, time passed in):
//!
//! * [`shard_readiness`] — per shard: the primary, each replica's eligibility
//!   ([`ReplicaEligibility`]) and the verdict "a failover of this shard would succeed now"
//!   ([`ShardVerdict::Ready`] with the expected winner) or the first reason it would not
//!   ([`NotReady`]);
//! * [`QuorumCheck`] — the cluster-wide check in the spirit of `SENTINEL CKQUORUM`: voting
//!   primaries, how many are reachable, the quorum, whether a FAIL could be agreed, the shards
//!   that cannot fail over, a verdict ([`QuorumVerdict`]: `OK` / `NOTREADY` / `NOQUORUM`) and a
//!   human-readable reason;
//! * [`Health`] — `cluster_state` plus unserved slots (whatever the coverage setting), slots
//!   owned by PFAIL/FAIL primaries, PFAIL/FAIL nodes and slots whose ownership other nodes may
//!   see differently;
//! * [`Readiness`] — all three at once, with the `INFO readiness` renderer
//!   ([`Readiness::info_section`]) and a one-line [`Readiness::summary`].
//!
//! Every query takes a [`HealthInputs`]: the topology, `now` (Unix ms), a [`HealthConfig`], the
//! cluster state the node computed, and optionally the host's [`ReplicationFacts`] for myself
//! and the owner-not-claiming bitmap (§11.4). Section numbers (§) refer to the cluster-bus
//! facts sheet (`shared/spec/cluster-bus.md`).
//!
//! ```
//! use ferrocluster_health::{HealthConfig, HealthInputs, QuorumVerdict, Readiness};
//! use ferrocluster_slot::Slot;
//! use ferrocluster_topology::{LinkState, Millis, Node, NodeFlags, NodeId, ShardId, Topology};
//!
//! let id = |c: char| NodeId::parse(&c.to_string().repeat(40)).unwrap();
//! let shard = ShardId::parse(&"s".repeat(40)).unwrap();
//! let now = Millis(1_000_000);
//! // Myself: a primary owning every slot, with one replica that has never synced (offset 0).
//! let mut me = Node::new(id('a'), shard, now);
//! me.flags = NodeFlags::PRIMARY;
//! let mut topo = Topology::new(me);
//! let mut r = Node::new(id('b'), shard, now);
//! r.flags = NodeFlags::REPLICA;
//! r.primary = Some(id('a'));
//! r.link = LinkState::Connected;
//! r.pong_received = Some(now);
//! topo.add_node(r).unwrap();
//! for s in Slot::all() {
//!     topo.set_slot_owner(s, Some(id('a'))).unwrap();
//! }
//! let inputs = HealthInputs::new(&topo, now, HealthConfig::default(), true);
//! let rd = Readiness::evaluate(&inputs);
//! assert!(!rd.failover_ready());
//! assert_eq!(rd.quorum.verdict, QuorumVerdict::NotReady);
//! assert_eq!(
//!     rd.summary(),
//!     format!(
//!         "cluster ok, failover-ready: no (replica {} of primary {} has not synced yet)",
//!         id('b'),
//!         id('a')
//!     )
//! );
//! assert!(rd.info_fields().contains("failover_blocker:no_eligible_replica\r\n"));
//!
//! // Once the replica advertises an offset it is eligible, yet with a single primary no
//! // failover can succeed: the only voter would be the primary that failed.
//! topo.node_mut(&id('b')).unwrap().repl_offset = 100;
//! let rd = Readiness::evaluate(&HealthInputs::new(&topo, now, HealthConfig::default(), true));
//! assert!(rd.shards[0].replicas[0].is_eligible());
//! assert_eq!(rd.info_fields().lines().nth(5), Some("failover_blocker:no_quorum"));
//! ```
//!
//! # What a node can know
//!
//! Only myself knows its own replication state: the host reports it as [`ReplicationFacts`]
//! (link up with the last-interaction time, or down since a time, or down and never synced;
//! plus the offset). For myself as a replica with facts, the verdict uses Valkey's own rule
//! ([`Evidence::Local`]), checked in this order:
//!
//! 1. NOFAILOVER flag on myself → [`Ineligibility::NoFailoverFlag`];
//! 2. only when `replica_validity_factor != 0`: no sync completed since start →
//!    [`Ineligibility::NotSynced`]; data age ([`ReplicationFacts::data_age_ms`]: whole seconds
//!    since the last interaction or since the link went down, × 1000, minus NODE_TIMEOUT once
//!    it exceeds NODE_TIMEOUT) greater than [`HealthConfig::validity_limit_ms`]
//!    (`NODE_TIMEOUT × factor + repl-ping-replica-period`) → [`Ineligibility::DataTooOld`].
//!
//! A link that is merely down is not a reason by itself: when the primary dies, every
//! replica's link goes down, and Valkey measures the age from then (§12.2).
//!
//! For every other replica a node cannot know the data age: it sees only gossip. The verdict
//! then degrades to proxies ([`Evidence::Proxy`]), in this order:
//!
//! 1. flagged PFAIL or FAIL here → [`Ineligibility::Unreachable`];
//! 2. NOFAILOVER flag (from its own PING flags) → [`Ineligibility::NoFailoverFlag`];
//! 3. only when `replica_validity_factor != 0`: advertised replication offset 0 (header
//!    `offset`; Valkey treats offset 0 as "not yet synced", CLUSTER SHARDS health `loading`)
//!    → [`Ineligibility::NotSynced`];
//! 4. no outbound bus link from here → [`Ineligibility::NoBusLink`];
//! 5. no PONG within NODE_TIMEOUT (a healthy node is pinged at least every NODE_TIMEOUT/2,
//!    §7.2) → [`Ineligibility::NoRecentPong`].
//!
//! An offset > 0 shows that a sync completed at some point, not that the data is recent; a
//! replica that lost its link long ago but keeps answering bus pings passes these proxies and
//! would still refuse to fail over. Myself as a replica without facts is judged by rules 2–3
//! on its recorded offset. The offset lag (primary's last known offset minus the replica's) is
//! reported but never disqualifies: Valkey uses offsets only to rank replicas (§12.2.1).
//!
//! Reachability is this node's: "reachable" means not flagged PFAIL/FAIL here (myself always),
//! exactly as §10 counts for the minority check. The replica that would run an election needs
//! its own links to a majority; two sides of a partition answer differently, and both answers
//! are honest about their side.
//!
//! # Shard verdict
//!
//! A shard is a node flagged PRIMARY (handshake nodes excluded) and the replicas whose
//! `primary` names it, in table order. Its verdict is the first of ([`NotReady`]):
//!
//! 1. the primary owns no slots → `no_slots` (such shards need no failover and are ignored by
//!    the quorum check and `failover_ready`);
//! 2. no replica → `no_replicas`;
//! 3. no eligible replica → `no_eligible_replica`, naming the first replica and its reason;
//! 4. fewer voting primaries *other than this shard's primary* are reachable than the quorum
//!    `size/2 + 1` → `no_quorum` (if the primary failed now, neither the FAIL reports (§9.3)
//!    nor the votes (§12.2) could reach a majority);
//! 5. otherwise ready; the expected winner is the eligible replica with the largest offset,
//!    ties to the smaller node ID (V8 rank, §12.2.1).
//!
//! # Quorum check
//!
//! `voting_primaries` = PRIMARY with ≥ 1 slot; `reachable` = those not PFAIL/FAIL (myself
//! always); `quorum` = `voting_primaries / 2 + 1`; `fail_agreeable` = `reachable >= quorum`.
//! Verdict: `NOQUORUM` when not `fail_agreeable` (also with no voting primaries at all, as §10
//! reports FAIL then), naming every slot-owning shard; `NOTREADY` when a FAIL could be agreed
//! but some slot-owning shard is not ready; `OK` otherwise. The reply ([`QuorumCheck::reply`])
//! has Sentinel's shape: `+OK <reason>` or the error `-NOQUORUM <reason>` / `-NOTREADY
//! <reason>`. `NOTREADY` is a third answer beyond Sentinel's two because "a majority is
//! reachable" alone would call a cluster whose only replica never synced OK.
//!
//! # configEpoch disagreement
//!
//! The topology keeps one owner per slot, and a node's slot set *is* our table's view, so a
//! node's own claim is not stored. What can be judged ([`Disagreements`]):
//!
//! * `owner_not_primary`: slots owned in our table by a node not flagged PRIMARY — it announces
//!   itself as a replica, whose messages never carry its own slot claims (§11.7), so its claim
//!   (none) differs from our table;
//! * `epoch_tie`: slots of a slot-owning primary whose configEpoch equals another slot-owning
//!   primary's — an unresolved configEpoch collision (§11.5); until it resolves, contested slots
//!   go to whichever claim a node heard first (rebinding needs a *greater* epoch, §11.2). Ties
//!   are normal for a few seconds after slots are assigned by hand with all epochs 0;
//! * `not_claimed`: owned slots in the owner-not-claiming bitmap (§11.4: the owner's latest
//!   claim left them out), when the caller passes it in [`HealthInputs::owner_not_claiming`].
//!
//! `slots_disagreeing` counts their union.
//!
//! # `INFO readiness` fields
//!
//! Section header `# Readiness`; lines `name:value` ending CRLF, in this order ([`INFO_FIELDS`]).
//! yes/no fields print `yes`/`no`; unknown or unbounded numbers print `-1`.
//!
//! | field | value |
//! |---|---|
//! | `cluster_state` | `ok`/`fail`: the state the node computed (as CLUSTER INFO) |
//! | `cluster_health` | `fail` if the state is fail; `degraded` if ok but any slot is unserved, PFAIL, FAIL or disagreeing or any node PFAIL/FAIL; else `ok` |
//! | `failover_ready` | `yes` when every slot-owning shard could fail over now (quorum verdict OK) |
//! | `failover_shards` | number of slot-owning shards |
//! | `failover_ready_shards` | slot-owning shards whose verdict is ready |
//! | `failover_blocker` | code of the first slot-owning shard's reason (`no_replicas`, `no_eligible_replica`, `no_quorum`), `none` when ready |
//! | `quorum_verdict` | `ok` / `notready` / `noquorum` |
//! | `quorum_voting_primaries` | primaries owning ≥ 1 slot (`cluster_size`) |
//! | `quorum_reachable_primaries` | of those, not PFAIL/FAIL here (myself counts) |
//! | `quorum_needed` | `quorum_voting_primaries / 2 + 1` |
//! | `quorum_fail_agreeable` | `yes` when reachable ≥ needed |
//! | `quorum_shards_unable` | slot-owning shards that could not fail over now |
//! | `slots_unserved` | slots with no owner (counted even with `cluster-require-full-coverage no`) |
//! | `slots_pfail` | slots whose owner is PFAIL (not FAIL) |
//! | `slots_fail` | slots whose owner is FAIL |
//! | `slots_disagreeing` | slots in any configEpoch disagreement (above) |
//! | `nodes_pfail` | nodes PFAIL (not FAIL), any role |
//! | `nodes_fail` | nodes FAIL, any role |
//! | `shard<i>` | per shard, `i` from 0 in table order of the primaries: `id=<shard id>,primary=<node id>,slots=<n>,replicas=<n>,eligible=<n>,ready=yes\|no,reason=<code>\|none,candidate=<node id>\|none` |
//! | `shard<i>_replica<j>` | per replica: `id=<node id>,eligible=yes\|no,reason=<code>\|none,evidence=local\|proxy,link=up\|down,offset=<n>,lag=<n>,data_age_ms=<n>,pong_age_ms=<n>` |
//!
//! Shard reason codes: `no_slots`, `no_replicas`, `no_eligible_replica`, `no_quorum`. Replica
//! reason codes: `unreachable`, `nofailover`, `not_synced`, `data_too_old`, `no_bus_link`,
//! `no_recent_pong`. `link` is the replication link for `evidence=local`, the bus link from
//! this node for `evidence=proxy`.
//!
//! # Command name: `FERROCLUSTER CKQUORUM`
//!
//! The quorum check should be served as `FERROCLUSTER CKQUORUM` (a top-level container command
//! `FERROCLUSTER` with the subcommand `CKQUORUM`; `FERROCLUSTER READINESS` could return the
//! same data as a map later). Neither Valkey nor Redis has a top-level `FERROCLUSTER`, and a
//! vendor-named container cannot be taken by a future release. `CLUSTER CKQUORUM` does not
//! exist today either (Valkey's and Redis's `src/commands/` have `sentinel-ckquorum.json` but
//! no `cluster-ckquorum.json`), but Valkey keeps adding CLUSTER subcommands (9.0 added
//! several), cluster clients and proxies treat `CLUSTER *` as the server's own namespace, and
//! `CLUSTER HELP` / `COMMAND DOCS` would list a subcommand the real server lacks. The name
//! keeps Sentinel's `CKQUORUM` so operators recognise it.
//!
//! # Wiring (node and server)
//!
//! * `node`: build a [`HealthConfig`] from `ClusterConfig` (`node_timeout_ms`,
//!   `replica_validity_factor`, `repl_ping_replica_period_secs × 1000`,
//!   `require_full_coverage`); keep the latest [`ReplicationFacts`] the host reports for myself
//!   (its replication-facts input); expose `&self` queries that build a [`HealthInputs`] with
//!   the topology, the `now` of the call, the state flag of `failure::ClusterState::is_ok()`
//!   and those facts, and return [`Readiness`] / [`QuorumCheck`] / [`Health`] /
//!   `Vec<ShardReadiness>`. The bus code must keep `Node::repl_offset` (header `offset`),
//!   `pong_received`, `link` and the NOFAILOVER flag up to date; they are the proxies.
//! * server: `INFO readiness` appends [`Readiness::info_section`]; `FERROCLUSTER CKQUORUM`
//!   replies [`QuorumCheck::reply`]; the demo prints [`Readiness::summary`].
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod config;
mod health;
mod info;
mod quorum;
mod replica;
mod shard;

pub use config::{quorum, HealthConfig, ReplLink, ReplicationFacts};
pub use health::{Disagreements, Health};
pub use info::{Readiness, INFO_FIELDS, INFO_SECTION};
pub use quorum::{QuorumCheck, QuorumVerdict, ShardUnable};
pub use replica::{Evidence, Ineligibility, ReplicaEligibility};
pub use shard::{shard_readiness, shard_readiness_of, NotReady, ShardReadiness, ShardVerdict};

use ferrocluster_slot::SlotSet;
use ferrocluster_topology::{Millis, Topology};

/// Everything the queries read, borrowed for one evaluation.
#[derive(Debug, Clone, Copy)]
pub struct HealthInputs<'a> {
    /// This node's view of the cluster.
    pub topology: &'a Topology,
    /// The current time, Unix ms (data and pong ages are measured to it).
    pub now: Millis,
    /// The options the rules use.
    pub config: HealthConfig,
    /// The cluster state the node computed (`true` = `ok`, §10), reported as is.
    pub state_ok: bool,
    /// The host's replication facts for myself when myself is a replica; `None` makes myself
    /// judged by proxies like any other replica.
    pub my_replication: Option<&'a ReplicationFacts>,
    /// The owner-not-claiming bitmap (§11.4) if the engine keeps one; `None` leaves
    /// [`Disagreements::not_claimed`] empty.
    pub owner_not_claiming: Option<&'a SlotSet>,
}

impl<'a> HealthInputs<'a> {
    /// Inputs without replication facts or owner-not-claiming bitmap.
    pub fn new(
        topology: &'a Topology,
        now: Millis,
        config: HealthConfig,
        state_ok: bool,
    ) -> HealthInputs<'a> {
        HealthInputs {
            topology,
            now,
            config,
            state_ok,
            my_replication: None,
            owner_not_claiming: None,
        }
    }

    /// The same with myself's replication facts.
    pub fn with_replication(mut self, facts: &'a ReplicationFacts) -> HealthInputs<'a> {
        self.my_replication = Some(facts);
        self
    }

    /// The same with the owner-not-claiming bitmap.
    pub fn with_owner_not_claiming(mut self, slots: &'a SlotSet) -> HealthInputs<'a> {
        self.owner_not_claiming = Some(slots);
        self
    }
}

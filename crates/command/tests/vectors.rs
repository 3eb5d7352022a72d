//! Table-driven tests against the captured replies of Redis 7.0 and Valkey 8.0
//! (`shared/vectors/<flavor>/text/`). Every captured file under `errors/`, `clusterdown/`,
//! `migration/`, `slots/`, `forget/` and `pubsub/` is classified below: decided here
//! (routing, CLUSTER parsing, CLUSTER state checks), rendered here (the node decides), or
//! deferred to the node with a reason. `every_captured_file_is_classified` fails on any file
//! that is in none of the tables.

mod common;

use common::{cases, resp, topology, Case};
use ferrocluster_command::check::*;
use ferrocluster_command::*;
use ferrocluster_slot::{key_hash_slot, Slot};
use ferrocluster_testvectors::{files_with_suffix, FLAVORS};
use ferrocluster_topology::Topology;
use std::collections::BTreeSet;

/// The nodes.conf moment that describes the cluster when a case ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Moment {
    Stable,
    /// Stable, minus the slot removed by the captured DELSLOTS; `fail`: the cluster state is
    /// the one captured in `clusterdown/cluster-info-fail.resp`, else
    /// `cluster-info-partial-coverage.resp`.
    ClusterDown {
        fail: bool,
    },
    WithHostname,
    DuringMigration,
    AfterMigration,
    AfterForget,
}

/// Routing cases: the whole connection (every step) is replayed through
/// `ClientState::handle_command` and each reply compared with the capture.
const ROUTED: &[(&str, Moment)] = &[
    ("errors/moved-get.resp", Moment::Stable),
    ("errors/moved-set.resp", Moment::Stable),
    ("errors/moved-from-replica-get.resp", Moment::Stable),
    ("errors/replica-readonly-get.resp", Moment::Stable),
    ("errors/replica-readonly-set.resp", Moment::Stable),
    ("errors/replica-readwrite-get.resp", Moment::Stable),
    ("errors/crossslot-mset.resp", Moment::Stable),
    ("errors/crossslot-mget.resp", Moment::Stable),
    ("errors/crossslot-del.resp", Moment::Stable),
    ("errors/crossslot-multi-exec.resp", Moment::Stable),
    ("errors/crossslot-eval.resp", Moment::Stable),
    ("errors/select-0.resp", Moment::Stable),
    ("errors/swapdb.resp", Moment::Stable),
    ("errors/spublish-moved.resp", Moment::Stable),
    ("errors/ssubscribe-crossslot.resp", Moment::Stable),
    ("errors/ssubscribe-moved.resp", Moment::Stable),
    ("pubsub/publish.resp", Moment::Stable),
    ("pubsub/publish-big.resp", Moment::Stable),
    ("pubsub/spublish.resp", Moment::Stable),
    ("pubsub/spublish-from-replica.resp", Moment::Stable),
    (
        "errors/clusterdown-slot-not-served.resp",
        Moment::ClusterDown { fail: false },
    ),
    (
        "errors/clusterdown-slot-not-served-other.resp",
        Moment::ClusterDown { fail: false },
    ),
    (
        "errors/clusterdown-cluster-down.resp",
        Moment::ClusterDown { fail: true },
    ),
    (
        "errors/clusterdown-cluster-down-write.resp",
        Moment::ClusterDown { fail: true },
    ),
    (
        "errors/clusterdown-reads-only-write.resp",
        Moment::ClusterDown { fail: true },
    ),
    (
        "errors/clusterdown-reads-only-read.resp",
        Moment::ClusterDown { fail: true },
    ),
    ("errors/moved-endpoint-hostname.resp", Moment::WithHostname),
    (
        "errors/moved-endpoint-unknown-endpoint.resp",
        Moment::WithHostname,
    ),
    ("errors/ask-get-missing.resp", Moment::DuringMigration),
    ("errors/ask-set-new-key.resp", Moment::DuringMigration),
    ("errors/tryagain-mget-split.resp", Moment::DuringMigration),
    (
        "errors/tryagain-mget-all-missing-is-ask.resp",
        Moment::DuringMigration,
    ),
    (
        "errors/moved-importing-without-asking.resp",
        Moment::DuringMigration,
    ),
    (
        "errors/asking-get-on-importing.resp",
        Moment::DuringMigration,
    ),
    (
        "errors/asking-mget-split-on-importing.resp",
        Moment::DuringMigration,
    ),
    (
        "errors/asking-mget-all-present-on-importing.resp",
        Moment::DuringMigration,
    ),
    ("errors/asking-only-once.resp", Moment::DuringMigration),
    (
        "errors/readonly-asking-replica-of-importing.resp",
        Moment::DuringMigration,
    ),
    (
        "migration/get-present-on-source.resp",
        Moment::DuringMigration,
    ),
    ("migration/migrate-keys.resp", Moment::DuringMigration),
    ("errors/moved-after-migration.resp", Moment::AfterMigration),
];

/// CLUSTER cases: parsed with `parse_cluster` and checked with the `check` helpers against
/// the model of the moment; the outcome (error text, or success for a non-error reply) is
/// compared with the capture.
const CLUSTER_DECIDED: &[(&str, Moment)] = &[
    ("errors/countkeysinslot-invalid.resp", Moment::Stable),
    ("errors/getkeysinslot-invalid.resp", Moment::Stable),
    ("errors/getkeysinslot-negative-count.resp", Moment::Stable),
    ("errors/addslots-busy.resp", Moment::Stable),
    ("errors/addslots-own-busy.resp", Moment::Stable),
    ("errors/addslots-out-of-range.resp", Moment::Stable),
    ("errors/addslots-duplicate-arg.resp", Moment::Stable),
    ("errors/addslotsrange-busy.resp", Moment::Stable),
    (
        "errors/delslots-unassigned-out-of-range.resp",
        Moment::Stable,
    ),
    ("errors/setslot-unknown-node-migrating.resp", Moment::Stable),
    ("errors/setslot-unknown-node-importing.resp", Moment::Stable),
    ("errors/setslot-unknown-node-node.resp", Moment::Stable),
    ("errors/setslot-invalid-slot.resp", Moment::Stable),
    ("errors/setslot-bad-action.resp", Moment::Stable),
    ("errors/setslot-missing-node-arg.resp", Moment::Stable),
    ("errors/setslot-migrating-not-owner.resp", Moment::Stable),
    (
        "errors/setslot-importing-already-owner.resp",
        Moment::Stable,
    ),
    (
        "errors/setslot-unknown-node-importing-nonowner.resp",
        Moment::Stable,
    ),
    ("errors/setslot-importing-from-myself.resp", Moment::Stable),
    ("errors/setslot-node-replica-target.resp", Moment::Stable),
    ("errors/setslot-on-replica.resp", Moment::Stable),
    (
        "errors/setslot-node-with-keys-not-mine.resp",
        Moment::Stable,
    ),
    (
        "errors/setslot-node-source-with-keys.resp",
        Moment::DuringMigration,
    ),
    ("errors/meet-port-out-of-range.resp", Moment::Stable),
    ("errors/meet-cport-out-of-range.resp", Moment::Stable),
    ("errors/meet-bad-address.resp", Moment::Stable),
    ("errors/meet-port-zero.resp", Moment::Stable),
    ("errors/forget-myself.resp", Moment::Stable),
    ("errors/forget-my-master.resp", Moment::Stable),
    ("errors/forget-unknown.resp", Moment::Stable),
    ("errors/forget-already-forgotten.resp", Moment::AfterForget),
    ("errors/reset-bad-arg.resp", Moment::Stable),
    ("errors/replicate-myself.resp", Moment::Stable),
    ("errors/replicate-master-with-slots.resp", Moment::Stable),
    ("errors/replicate-unknown.resp", Moment::Stable),
    ("errors/replicate-a-replica.resp", Moment::Stable),
    ("errors/failover-bad-arg.resp", Moment::Stable),
    ("errors/cluster-unknown-subcommand.resp", Moment::Stable),
    ("errors/cluster-keyslot-arity.resp", Moment::Stable),
    ("errors/cluster-setslot-arity.resp", Moment::Stable),
    ("errors/cluster-countfailure-unknown.resp", Moment::Stable),
    ("errors/cluster-replicas-unknown.resp", Moment::Stable),
    ("errors/cluster-replicas-of-replica.resp", Moment::Stable),
    (
        "errors/delslots-unassigned.resp",
        Moment::ClusterDown { fail: false },
    ),
    ("clusterdown/delslots-owner.resp", Moment::Stable),
    ("slots/countkeysinslot-owner.resp", Moment::Stable),
    ("slots/countkeysinslot-nonowner.resp", Moment::Stable),
    ("slots/getkeysinslot-owner.resp", Moment::Stable),
    ("slots/getkeysinslot-owner-limit2.resp", Moment::Stable),
    ("slots/getkeysinslot-nonowner.resp", Moment::Stable),
    ("migration/setslot-importing.resp", Moment::DuringMigration),
    ("migration/setslot-migrating.resp", Moment::DuringMigration),
];

/// Files whose error *text* is produced here but whose *decision* needs node state (or an
/// older server's behaviour): the typed value the node picks, rendered and compared.
fn rendered_only(flavor: &str, name: &str) -> Option<(ErrorRenderCase, &'static str)> {
    use ErrorRenderCase as R;
    Some(match name {
        "errors/reset-master-with-keys.resp" => {
            (R::Cluster(ClusterError::ResetWithKeys), "executed by node: needs the keyspace")
        }
        "errors/failover-on-master.resp" => (
            R::Cluster(ClusterError::FailoverOnPrimary),
            "executed by node: manual-failover preconditions",
        ),
        "errors/cluster-set-config-epoch-nonzero.resp" => (
            R::Cluster(ClusterError::ConfigEpochOtherNodes),
            "executed by node: node-table size and configEpoch",
        ),
        "errors/select-1.resp" => (
            R::Command(CommandError::SelectNotAllowed),
            "Valkey 8 text; this crate follows Valkey 9 (select_db allows DBs below cluster-databases)",
        ),
        "errors/move-db.resp" => (
            R::Command(CommandError::MoveNotAllowed),
            "Valkey 8 text; Valkey 9 allows MOVE in cluster mode (the node decides)",
        ),
        "errors/meet-port-not-number.resp" if flavor == "redis-7.0" => (
            R::Redis("ERR Invalid TCP base port specified: notaport"),
            "Redis 7.0 text; parse_cluster follows Valkey (`Invalid base port specified`)",
        ),
        _ => return None,
    })
}

enum ErrorRenderCase {
    Cluster(ClusterError),
    Command(CommandError),
    Redis(&'static str),
}

/// Captured files this crate cannot reproduce, with the reason (the node crate picks these
/// up). Non-error replies whose body is node output are listed by directory.
fn deferred(name: &str) -> Option<&'static str> {
    const DEFERRED: &[(&str, &str)] = &[
        ("errors/cluster-bumpepoch.resp", "executed by node: +BUMPED <epoch> needs the epochs"),
        ("clusterdown/addslots-restore.resp", "executed by node: +OK after re-adding the slot (state after DELSLOTS on every node)"),
        ("clusterdown/setslot-stable-unassigned.resp", "executed by node: +OK; used to trigger a state update"),
        ("clusterdown/delslots-22001-master.resp", "executed by node: DELSLOTS after the owner removed the slot (intermediate state not captured)"),
        ("clusterdown/delslots-22003-master.resp", "executed by node: intermediate state not captured"),
        ("clusterdown/delslots-22004-slave.resp", "executed by node: intermediate state not captured"),
        ("clusterdown/delslots-22005-slave.resp", "executed by node: intermediate state not captured"),
        ("clusterdown/delslots-22006-slave.resp", "executed by node: intermediate state not captured"),
        ("slots/setslot-stable-cleanup.resp", "executed by node: +OK after setslot-importing-from-myself changed the marks"),
        ("migration/migrate-rest.resp", "executed by node: MIGRATE after the first batch moved (intermediate key state)"),
        ("migration/migrate-nokey.resp", "executed by node: +NOKEY needs the keyspace"),
        ("migration/setslot-node-dst.resp", "executed by node: finalization order (marks change between steps)"),
        ("migration/setslot-node-src.resp", "executed by node: finalization order"),
        ("migration/countkeysinslot-before.resp", "executed by node: needs the keyspace"),
        ("migration/countkeysinslot-after.resp", "executed by node: needs the keyspace"),
        ("pubsub/ssubscriber-message.resp", "executed by node: Pub/Sub delivery"),
        ("pubsub/subscriber-message-via-bus.resp", "executed by node: Pub/Sub delivery over the bus"),
        ("pubsub/pubsub-shardchannels.resp", "executed by node: PUBSUB SHARDCHANNELS output"),
    ];
    if let Some((_, why)) = DEFERRED.iter().find(|(n, _)| *n == name) {
        return Some(why);
    }
    let base = name.rsplit('/').next().unwrap_or(name);
    if base.starts_with("cluster-nodes")
        || base.starts_with("cluster-slots")
        || base.starts_with("cluster-shards")
        || base.starts_with("cluster-info")
        || base.starts_with("cluster-links")
    {
        return Some(
            "executed by node: CLUSTER NODES/SLOTS/SHARDS/INFO/LINKS output (topology views)",
        );
    }
    if name.starts_with("migration/setslot-node-other-") {
        return Some("executed by node: finalization order (marks change between steps)");
    }
    if name.starts_with("forget/forget-22003-on-") || name.starts_with("forget/meet") {
        return Some(
            "executed by node: FORGET/MEET +OK during the forget phase (ban list and handshakes)",
        );
    }
    None
}

fn moment_dir(m: Moment) -> &'static str {
    match m {
        Moment::Stable | Moment::ClusterDown { .. } => "stable",
        Moment::WithHostname => "with-hostname",
        Moment::DuringMigration => "during-migration",
        Moment::AfterMigration => "after-migration",
        Moment::AfterForget => "after-forget",
    }
}

fn text_of(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The keys each shard holds at a moment, derived from the captured steps.
struct Keys {
    /// (port of the shard's primary, key)
    held: BTreeSet<(u16, Vec<u8>)>,
}

impl Keys {
    fn build(flavor: &str, moment: Moment, all: &std::collections::BTreeMap<String, Case>) -> Keys {
        let mut held = BTreeSet::new();
        let after_keys = |c: &Case| -> Vec<Vec<u8>> {
            let args = &c.steps[0].0;
            match args.iter().position(|a| a.eq_ignore_ascii_case(b"keys")) {
                Some(i) => args[i + 1..].to_vec(),
                None => vec![args[3].clone()],
            }
        };
        match moment {
            Moment::DuringMigration | Moment::AfterMigration => {
                let first = &all["migration/migrate-keys.resp"];
                let rest = &all["migration/migrate-rest.resp"];
                let source = first.port;
                let target: u16 = text_of(&first.steps[0].0[2]).parse().unwrap();
                for k in after_keys(first) {
                    held.insert((target, k));
                }
                for k in after_keys(rest) {
                    let at = if moment == Moment::DuringMigration {
                        source
                    } else {
                        target
                    };
                    held.insert((at, k));
                }
            }
            _ => {
                // Keys a captured GET returned a value for, held by the slot owner's shard.
                let topo = topology(flavor, "stable", 22001);
                for c in all.values() {
                    for (args, reply) in &c.steps {
                        if args[0].eq_ignore_ascii_case(b"GET")
                            && reply.starts_with(b"$")
                            && !reply.starts_with(b"$-1")
                        {
                            let owner = topo.slot_owner(key_hash_slot(&args[1])).unwrap();
                            held.insert((topo.node(owner).unwrap().port, args[1].clone()));
                        }
                    }
                }
            }
        }
        Keys { held }
    }

    /// The port of the primary whose data `topo`'s myself holds.
    fn holder(topo: &Topology) -> u16 {
        let me = topo.myself();
        match me.primary {
            Some(p) if me.is_replica() => topo.node(&p).unwrap().port,
            _ => me.port,
        }
    }

    fn presence<'a>(&'a self, topo: &Topology) -> impl Fn(usize, &[u8]) -> bool + 'a {
        let port = Keys::holder(topo);
        move |db, key| db == 0 && self.held.contains(&(port, key.to_vec()))
    }

    fn count_in_slot(&self, topo: &Topology, slot: Slot) -> u64 {
        let port = Keys::holder(topo);
        self.held
            .iter()
            .filter(|(p, k)| *p == port && key_hash_slot(k) == slot)
            .count() as u64
    }
}

fn model(
    flavor: &str,
    moment: Moment,
    port: u16,
    all: &std::collections::BTreeMap<String, Case>,
) -> (Topology, bool) {
    let mut topo = topology(flavor, moment_dir(moment), port);
    let mut ok = true;
    if let Moment::ClusterDown { fail } = moment {
        let del = &all["clusterdown/delslots-owner.resp"].steps[0].0;
        let slot = Slot::parse(&text_of(&del[2])).unwrap();
        topo.set_slot_owner(slot, None).unwrap();
        let info = if fail {
            "clusterdown/cluster-info-fail.resp"
        } else {
            "clusterdown/cluster-info-partial-coverage.resp"
        };
        let info = text_of(&resp(flavor, info));
        ok = info.contains("cluster_state:ok");
        assert!(ok || info.contains("cluster_state:fail"), "{info}");
    }
    (topo, ok)
}

fn config_from_note(note: &str) -> RoutingConfig {
    let mut cfg = RoutingConfig::default();
    if note.contains("cluster-allow-reads-when-down yes") {
        cfg.allow_reads_when_down = true;
    }
    if note.contains("cluster-preferred-endpoint-type hostname") {
        cfg.preferred_endpoint = EndpointType::Hostname;
    }
    if note.contains("cluster-preferred-endpoint-type unknown-endpoint") {
        cfg.preferred_endpoint = EndpointType::UnknownEndpoint;
    }
    cfg
}

#[test]
fn routed_cases_reproduce_every_reply() {
    let mut checked = 0;
    for flavor in FLAVORS {
        let all = cases(flavor);
        for &(name, moment) in ROUTED {
            let case = all
                .get(name)
                .unwrap_or_else(|| panic!("{flavor}: {name} not in index"));
            assert_eq!(
                case.steps.last().unwrap().1,
                resp(flavor, name),
                "{flavor} {name}: index vs .resp"
            );
            let (topo, state_ok) = model(flavor, moment, case.port, &all);
            let keys = Keys::build(flavor, moment, &all);
            let presence = keys.presence(&topo);
            let ctx = ClusterContext {
                view: &topo,
                state_ok,
                config: config_from_note(&case.note),
            };
            let mut client = ClientState::new(false, false);
            for (i, (args, reply)) in case.steps.iter().enumerate() {
                let d = client.handle_command(args, &ctx, &presence);
                let what = format!(
                    "{flavor} {name} step {i} {:?} -> {:?}",
                    args.iter().map(|a| text_of(a)).collect::<Vec<_>>(),
                    d
                );
                match d {
                    Dispatch::Ok => assert_eq!(text_of(reply), "+OK\r\n", "{what}"),
                    Dispatch::Queued => assert_eq!(text_of(reply), "+QUEUED\r\n", "{what}"),
                    Dispatch::Reject(e) => {
                        assert_eq!(text_of(&e.to_resp()), text_of(reply), "{what}")
                    }
                    Dispatch::Execute { .. } | Dispatch::Exec(_) => {
                        assert!(
                            !reply.starts_with(b"-"),
                            "{what}: captured {}",
                            text_of(reply)
                        )
                    }
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 80, "{checked}");
}

fn cluster_outcome(
    cmd: Result<ClusterCommand, ClusterError>,
    topo: &Topology,
    keys: &Keys,
    banned: bool,
) -> Result<(), ClusterError> {
    match cmd? {
        ClusterCommand::SetSlot(p) => {
            check_setslot(&p, topo, false, |s| keys.count_in_slot(topo, s)).map(|_| ())
        }
        ClusterCommand::AddSlots(a) | ClusterCommand::AddSlotsRange(a) => {
            check_slot_assignments(&a, false, topo).map(|_| ())
        }
        ClusterCommand::DelSlots(a) | ClusterCommand::DelSlotsRange(a) => {
            check_slot_assignments(&a, true, topo).map(|_| ())
        }
        ClusterCommand::Forget(n) => check_forget(&n, topo, banned).map(|_| ()),
        ClusterCommand::Replicate(n) => check_replicate(&n, topo, false).map(|_| ()),
        ClusterCommand::Replicas(n) => check_replicas(&n, topo).map(|_| ()),
        ClusterCommand::CountFailureReports(n) => check_known_node(&n, topo).map(|_| ()),
        _ => Ok(()),
    }
}

#[test]
fn cluster_cases_reproduce_every_outcome() {
    let mut checked = 0;
    for flavor in FLAVORS {
        let all = cases(flavor);
        for &(name, moment) in CLUSTER_DECIDED {
            let case = all
                .get(name)
                .unwrap_or_else(|| panic!("{flavor}: {name} not in index"));
            let (args, reply) = case.steps.last().unwrap();
            assert_eq!(
                *reply,
                resp(flavor, name),
                "{flavor} {name}: index vs .resp"
            );
            let (topo, _) = model(flavor, moment, case.port, &all);
            let keys = Keys::build(flavor, moment, &all);
            // In the FORGET ban list: this node ran a captured `forget/forget-*-on-<port>` of the
            // same ID earlier. Valkey consults the list; Redis 7.0 does not.
            let banned = flavor == "valkey-8.0"
                && args.len() == 3
                && all.iter().any(|(f, c)| {
                    f.starts_with("forget/forget-")
                        && c.port == case.port
                        && c.steps[0].0.get(2) == args.get(2)
                });
            let out = cluster_outcome(
                parse_cluster(args, ParseOptions::default()),
                &topo,
                &keys,
                banned,
            );
            match out {
                Err(e) => assert_eq!(text_of(&e.to_resp()), text_of(reply), "{flavor} {name}"),
                Ok(()) => assert!(
                    !reply.starts_with(b"-"),
                    "{flavor} {name}: captured {}",
                    text_of(reply)
                ),
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 2 * CLUSTER_DECIDED.len());
}

#[test]
fn rendered_errors_match_the_captures() {
    let mut n = 0;
    for flavor in FLAVORS {
        for f in files_with_suffix(format!("{flavor}/text"), ".resp") {
            let name = f
                .strip_prefix(flavor)
                .unwrap()
                .strip_prefix("text")
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let Some((value, _why)) = rendered_only(flavor, &name) else {
                continue;
            };
            let got = match value {
                ErrorRenderCase::Cluster(e) => e.to_resp(),
                ErrorRenderCase::Command(e) => e.to_resp(),
                ErrorRenderCase::Redis(t) => format!("-{t}\r\n").into_bytes(),
            };
            assert_eq!(
                text_of(&got),
                text_of(&resp(flavor, &name)),
                "{flavor} {name}"
            );
            n += 1;
        }
    }
    assert_eq!(n, 2 * 5 + 1);
}

#[test]
fn every_captured_file_is_classified() {
    // How many captures each folder holds (../shared/vectors): a folder that went missing or
    // empty would leave nothing to classify.
    let counts = |flavor: &str| -> [(&'static str, usize); 6] {
        let forget = if flavor == "valkey-8.0" { 19 } else { 13 };
        [
            ("errors", 86),
            ("clusterdown", 12),
            ("migration", 16),
            ("slots", 6),
            ("forget", forget),
            ("pubsub", 7),
        ]
    };
    for flavor in FLAVORS {
        for (dir, count) in counts(flavor) {
            let files = files_with_suffix(format!("{flavor}/text/{dir}"), ".resp");
            assert_eq!(files.len(), count, "{flavor}/text/{dir}");
            for f in files {
                let name = f
                    .strip_prefix(format!("{flavor}/text"))
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                let n = name.as_str();
                let routed = ROUTED.iter().any(|(c, _)| *c == n);
                let decided = CLUSTER_DECIDED.iter().any(|(c, _)| *c == n);
                let rendered = rendered_only(flavor, n).is_some();
                let later = deferred(n).is_some();
                assert!(
                    // meet-port-not-number (Valkey): meet_port_not_number_follows_valkey.
                    routed
                        || decided
                        || rendered
                        || later
                        || n == "errors/meet-port-not-number.resp",
                    "{flavor}: {n} is not classified"
                );
            }
        }
    }
}

#[test]
fn meet_port_not_number_follows_valkey() {
    let all = cases("valkey-8.0");
    let args = &all["errors/meet-port-not-number.resp"].steps[0].0;
    let e = parse_cluster(args, ParseOptions::default()).unwrap_err();
    assert_eq!(
        e.to_resp(),
        resp("valkey-8.0", "errors/meet-port-not-number.resp")
    );
}

#[test]
fn keyslot_capture_agrees_with_the_parsed_command() {
    for flavor in FLAVORS {
        let ks = ferrocluster_testvectors::read_json(format!("{flavor}/text/keyslot.json"));
        let entries = ks
            .as_array()
            .or_else(|| ks["keys"].as_array())
            .expect("keyslot entries");
        assert!(entries.len() >= 20);
        for e in entries {
            let key = match e.get("key_hex").and_then(|k| k.as_str()) {
                Some(h) => ferrocluster_testvectors::hex(h),
                None => {
                    // Long keys are written as `<text>*<count>` ("k*1024").
                    let (unit, n) = e["key"]
                        .as_str()
                        .expect("key")
                        .rsplit_once('*')
                        .expect("x*n");
                    unit.repeat(n.parse().expect("count")).into_bytes()
                }
            };
            assert_eq!(key.len() as u64, e["key_len"].as_u64().unwrap());
            assert!(e["error"].is_null());
            let want = e["slot"].as_u64().expect("slot");
            let argv: [&[u8]; 3] = [b"CLUSTER", b"KEYSLOT", &key];
            let got = parse_cluster(&argv, ParseOptions::default()).unwrap();
            assert_eq!(
                got,
                ClusterCommand::KeySlot(Slot::new(want as u16).unwrap())
            );
        }
    }
}

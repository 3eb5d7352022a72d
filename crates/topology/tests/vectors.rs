//! Real-server captures (`shared/vectors/*/text`): nodes.conf loading and writing, and the
//! CLUSTER views rendered from a loaded nodes.conf compared with the replies captured at the
//! same moment.
//!
//! What is compared exactly and what loosely:
//! * nodes.conf: every captured file loads; Valkey 8 files are written back byte-for-byte;
//!   Redis 7.0 files are written back in the Valkey 8 format, and with the aux fields removed
//!   they are again the Redis file; write -> load gives the same model.
//! * CLUSTER NODES, CLUSTER REPLICAS: every line exact, except the ping_sent / pong_recv
//!   fields (run-time values that can move between the nodes.conf save and the command):
//!   those two fields are taken from the capture before comparing whole lines. Line order is
//!   ignored for CLUSTER NODES (hash-table order on the server). MYID, MYSHARDID: exact.
//! * CLUSTER SLOTS (RESP2 and RESP3): exact bytes. Replication offsets are run-time values
//!   not in nodes.conf, so they are taken from the CLUSTER SHARDS capture of the same moment
//!   (that decides which replicas SLOTS lists).
//! * CLUSTER SHARDS (RESP2, RESP3): every shard entry exact (offsets from the capture as
//!   above; `health` is computed by us from them), shard order ignored (Valkey's is hash-table
//!   order).
//! * CLUSTER INFO: exact bytes; the message counters and `cluster_state` are inputs the node
//!   passes in, taken from the capture; everything else is computed from the model.
//! * CLUSTER LINKS: links are run-time inputs: taken from the capture, re-encoded, exact.

mod common;

use common::{parse_resp, text_of};
use ferrocluster_testvectors::{files_with_suffix, read, read_json, FLAVORS};
use ferrocluster_topology::views::{
    self, Flavor, InfoInputs, LinkDirection, LinkInfo, ViewOptions,
};
use ferrocluster_topology::{
    load_nodes_conf, save_nodes_conf, LoadOptions, Millis, NodeId, Reply, Topology,
};
use rand_chacha::rand_core::SeedableRng;
use std::path::Path;

const NOW: Millis = Millis(1_800_000_000_000);

fn rng() -> rand_chacha::ChaCha8Rng {
    rand_chacha::ChaCha8Rng::seed_from_u64(42)
}

fn load(bytes: &[u8], preserve_times: bool) -> Topology {
    load_nodes_conf(
        bytes,
        NOW,
        &mut rng(),
        LoadOptions {
            preserve_times,
            ..Default::default()
        },
    )
    .expect("captured nodes.conf loads")
}

fn all_conf_files() -> Vec<std::path::PathBuf> {
    let mut v = Vec::new();
    for f in FLAVORS {
        v.extend(files_with_suffix(format!("{f}/text/nodes-conf"), ".conf"));
    }
    assert!(
        v.len() >= 120,
        "expected 2 flavors x 10 moments x 6 files, got {}",
        v.len()
    );
    v
}

/// Removes the aux fields (and the empty hostname slot) from a Valkey 8 line: the Redis 7.0
/// address form.
fn strip_aux(line: &str) -> String {
    let mut fields: Vec<String> = line.split(' ').map(str::to_owned).collect();
    if fields.len() > 1 {
        let mut parts = fields[1].split(',');
        let addr = parts.next().unwrap_or("").to_owned();
        let host = parts.next().unwrap_or("");
        fields[1] = if host.is_empty() {
            addr
        } else {
            format!("{addr},{host}")
        };
    }
    fields.join(" ")
}

#[test]
fn every_captured_nodes_conf_loads_and_round_trips() {
    for rel in all_conf_files() {
        let bytes = read(&rel);
        let text = String::from_utf8(bytes.clone()).unwrap();
        let topo = load(&bytes, true);
        topo.check_invariants()
            .unwrap_or_else(|e| panic!("{}: {e}", rel.display()));

        // myself matches roles.json of that moment.
        let port = rel
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .trim_start_matches("nodes-")
            .to_owned();
        let roles = read_json(rel.parent().unwrap().join("roles.json"));
        let want_id = roles[&port]["id"].as_str().unwrap();
        assert_eq!(topo.myself_id().as_str(), want_id, "{}", rel.display());
        let want_role = roles[&port]["role"].as_str().unwrap();
        let is_primary = topo.myself().is_primary();
        assert_eq!(is_primary, want_role == "master", "{}", rel.display());

        let saved = save_nodes_conf(&topo);
        if rel.starts_with("valkey-8.0") {
            assert_eq!(saved, text, "{}: byte-identical rewrite", rel.display());
        } else {
            let stripped: Vec<String> = saved.lines().map(strip_aux).collect();
            let orig: Vec<&str> = text.lines().collect();
            assert_eq!(
                stripped,
                orig,
                "{}: Redis form after removing aux",
                rel.display()
            );
        }
        let again = load(saved.as_bytes(), true);
        assert_eq!(again, topo, "{}: write -> load", rel.display());

        // Valkey's rule: non-zero times become the load time; write -> load is stable too.
        let valkey_rule = load(&bytes, false);
        for n in valkey_rule.nodes() {
            assert!(n.ping_sent.is_none_or(|t| t == NOW));
            assert!(n.pong_received.is_none_or(|t| t == NOW));
        }
        assert_eq!(
            load(save_nodes_conf(&valkey_rule).as_bytes(), false),
            valkey_rule
        );
    }
}

#[test]
fn loaded_capture_has_expected_shape() {
    // valkey during-migration, node 22005: myself primary of 10923-16383 migrating 13513 to
    // 22004 (e5a1...), currentEpoch 10.
    let t = load(
        &read("valkey-8.0/text/nodes-conf/during-migration/nodes-22005.conf"),
        true,
    );
    let slot = ferrocluster_slot::Slot::new(13513).unwrap();
    let target = NodeId::parse("e5a1974b82f449db4a9a1e945d97a393bd7ed61a").unwrap();
    assert_eq!(t.migrating_to(slot), Some(&target));
    assert_eq!(t.importing_from(slot), None);
    assert_eq!(t.myself().slot_count(), 16384 - 10923);
    assert_eq!(t.current_epoch.get(), 10);
    assert_eq!(t.len(), 6);
    assert_eq!(t.cluster_size(), 3);
    // A replica's configEpoch is 0 after loading (§18.3); it reports its primary's.
    let replica = t.nodes().find(|n| n.is_replica()).unwrap();
    assert_eq!(replica.config_epoch.get(), 0);
    // Shards: replicas share their primary's shard ID.
    for n in t.nodes() {
        if let Some(p) = n.primary {
            assert_eq!(t.node(&p).unwrap().shard_id, n.shard_id);
        }
    }
}

fn opts(flavor: &str) -> ViewOptions {
    ViewOptions {
        flavor: if flavor == "redis-7.0" {
            Flavor::Redis70
        } else {
            Flavor::Valkey
        },
        ..Default::default()
    }
}

/// Replaces fields 5 and 6 (ping_sent, pong_recv) of each of our lines with the captured
/// line's values for the same node.
fn align_times(ours: &str, theirs: &str) -> String {
    let mut out = String::new();
    for line in ours.lines() {
        let mut f: Vec<&str> = line.split(' ').collect();
        if let Some(t) = theirs.lines().find(|l| l.split(' ').next() == Some(f[0])) {
            let tf: Vec<&str> = t.split(' ').collect();
            f[4] = tf[4];
            f[5] = tf[5];
        }
        out.push_str(&f.join(" "));
        out.push('\n');
    }
    out
}

/// The lines of a CLUSTER NODES text, sorted. The servers print nodes in hash-table order,
/// which can change between the nodes.conf save and the command (a rehash); the loaded model
/// keeps the file's order. So CLUSTER NODES is compared as a set of lines (each exact).
fn sorted_lines(text: &str) -> Vec<String> {
    assert!(text.ends_with('\n'));
    let mut v: Vec<String> = text.lines().map(str::to_owned).collect();
    v.sort();
    v
}

/// Sets every node's replication offset from a captured CLUSTER SHARDS reply.
fn apply_offsets(topo: &mut Topology, shards: &Reply) {
    let Reply::Array(shards) = shards else {
        panic!("shards reply is an array")
    };
    for s in shards {
        let nodes = common::map_get(s, "nodes");
        let Reply::Array(nodes) = nodes else { panic!() };
        for n in nodes {
            let id = NodeId::parse(&text_of(common::map_get(n, "id"))).unwrap();
            let Reply::Integer(off) = common::map_get(n, "replication-offset") else {
                panic!()
            };
            topo.node_mut(&id).unwrap().repl_offset = u64::try_from(*off).unwrap();
        }
    }
}

fn info_inputs(captured: &str) -> InfoInputs {
    let mut i = InfoInputs::default();
    for line in captured.split("\r\n") {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        if k == "cluster_state" {
            i.state_ok = v == "ok";
        }
        if k == "total_cluster_links_buffer_limit_exceeded" {
            i.links_buffer_limit_exceeded = v.parse().unwrap();
        }
        for (t, name) in views::MESSAGE_TYPE_NAMES.iter().enumerate() {
            if k == format!("cluster_stats_messages_{name}_sent") {
                i.messages_sent[t] = v.parse().unwrap();
            }
            if k == format!("cluster_stats_messages_{name}_received") {
                i.messages_received[t] = v.parse().unwrap();
            }
        }
    }
    i
}

fn links_from(reply: &Reply) -> Vec<LinkInfo> {
    let Reply::Array(items) = reply else { panic!() };
    items
        .iter()
        .map(|m| {
            let int = |k| match common::map_get(m, k) {
                Reply::Integer(n) => u64::try_from(*n).unwrap(),
                _ => panic!(),
            };
            let events = text_of(common::map_get(m, "events"));
            LinkInfo {
                direction: if text_of(common::map_get(m, "direction")) == "to" {
                    LinkDirection::To
                } else {
                    LinkDirection::From
                },
                node: NodeId::parse(&text_of(common::map_get(m, "node"))).unwrap(),
                create_time: Millis(int("create-time")),
                readable: events.contains('r'),
                writable: events.contains('w'),
                send_buffer_allocated: int("send-buffer-allocated"),
                send_buffer_used: int("send-buffer-used"),
            }
        })
        .collect()
}

/// CLUSTER SHARDS with shard order and member order made canonical (sorted by encoding):
/// both are history-dependent on the server (hash-table order; the order nodes joined the
/// shard), so a model loaded from nodes.conf cannot reproduce them. Every shard's `slots` and
/// every node map are still compared exactly.
fn sorted_entries(r: &Reply, resp3: bool) -> Vec<Vec<u8>> {
    let enc = |x: &Reply| if resp3 { x.to_resp3() } else { x.to_resp2() };
    let Reply::Array(items) = r else { panic!() };
    let mut v: Vec<Vec<u8>> = items
        .iter()
        .map(|shard| {
            let canon = |pairs: Vec<(Reply, Reply)>| {
                pairs
                    .into_iter()
                    .map(|(k, v)| match (common::text_of(&k).as_str(), v) {
                        ("nodes", Reply::Array(mut nodes)) => {
                            nodes.sort_by_key(|n| enc(n));
                            (k, Reply::Array(nodes))
                        }
                        (_, v) => (k, v),
                    })
                    .collect::<Vec<_>>()
            };
            match shard.clone() {
                Reply::Map(pairs) => enc(&Reply::Map(canon(pairs))),
                Reply::Array(items) => {
                    let pairs = items
                        .chunks(2)
                        .map(|c| (c[0].clone(), c[1].clone()))
                        .collect();
                    enc(&Reply::Map(canon(pairs)))
                }
                other => panic!("shard entry {other:?}"),
            }
        })
        .collect();
    v.sort();
    v
}

/// Checks every view of one captured reply directory against a model loaded from `conf`.
fn check_views(flavor: &str, dir: &Path, conf: &Path) -> usize {
    let o = opts(flavor);
    let mut topo = load(&read(conf), true);
    let mut checked = 0;
    let file = |name: &str| dir.join(name);
    let exists = |name: &str| {
        ferrocluster_testvectors::vectors_dir()
            .join(dir.join(name))
            .is_file()
    };

    // CLUSTER NODES
    let captured = read(file("cluster-nodes.resp"));
    let Reply::Bulk(theirs) = parse_resp(&captured) else {
        panic!("nodes is bulk")
    };
    let theirs = String::from_utf8(theirs).unwrap();
    let ours = align_times(&views::cluster_nodes_text(&topo, &o), &theirs);
    assert_eq!(
        sorted_lines(&ours),
        sorted_lines(&theirs),
        "{}",
        dir.display()
    );
    assert_eq!(Reply::Verbatim(ours).to_resp2().len(), captured.len());
    checked += 1;

    // MYID / MYSHARDID
    assert_eq!(
        views::cluster_myid(&topo).to_resp2(),
        read(file("cluster-myid.resp"))
    );
    checked += 1;
    if flavor == "valkey-8.0" {
        assert_eq!(
            views::cluster_myshardid(&topo).to_resp2(),
            read(file("cluster-myshardid.resp"))
        );
        checked += 1;
    }

    // Offsets from the SHARDS capture, then SLOTS and SHARDS.
    let shards2 = parse_resp(&read(file("cluster-shards.resp")));
    apply_offsets(&mut topo, &shards2);
    assert_eq!(
        views::cluster_slots(&topo, &o).to_resp2(),
        read(file("cluster-slots.resp")),
        "{} SLOTS",
        dir.display()
    );
    checked += 1;
    let ours = views::cluster_shards(&topo, &o);
    assert_eq!(
        sorted_entries(&ours, false),
        sorted_entries(&shards2, false),
        "{}",
        dir.display()
    );
    checked += 1;
    if exists("cluster-slots-resp3.resp") {
        assert_eq!(
            views::cluster_slots(&topo, &o).to_resp3(),
            read(file("cluster-slots-resp3.resp")),
            "{} SLOTS resp3",
            dir.display()
        );
        let shards3 = parse_resp(&read(file("cluster-shards-resp3.resp")));
        assert_eq!(sorted_entries(&ours, true), sorted_entries(&shards3, true));
        checked += 2;
    }

    // INFO
    let captured = read(file("cluster-info.resp"));
    let Reply::Bulk(info_text) = parse_resp(&captured) else {
        panic!()
    };
    let inputs = info_inputs(std::str::from_utf8(&info_text).unwrap());
    assert_eq!(
        views::cluster_info(&topo, &inputs).to_resp2(),
        captured,
        "{} INFO",
        dir.display()
    );
    checked += 1;

    // LINKS
    if exists("cluster-links.resp") {
        let captured = read(file("cluster-links.resp"));
        let links = links_from(&parse_resp(&captured));
        assert_eq!(views::cluster_links(&links).to_resp2(), captured);
        if exists("cluster-links-resp3.resp") {
            let captured3 = read(file("cluster-links-resp3.resp"));
            assert_eq!(
                views::cluster_links(&links_from(&parse_resp(&captured3))).to_resp3(),
                captured3
            );
        }
        checked += 1;
    }

    // REPLICAS of myself (stable primary dirs).
    if exists("cluster-replicas.resp") {
        let captured = read(file("cluster-replicas.resp"));
        let id = topo.myself_id().to_string();
        let ours = views::cluster_replicas(&topo, &id, &o);
        let Reply::Array(theirs) = parse_resp(&captured) else {
            panic!()
        };
        let Reply::Array(our_lines) = &ours else {
            panic!()
        };
        assert_eq!(our_lines.len(), theirs.len());
        for (a, b) in our_lines.iter().zip(theirs.iter()) {
            let (a, b) = (text_of(a), text_of(b));
            assert_eq!(align_times(&a, &b).trim_end(), b);
        }
        checked += 1;
    }
    checked
}

#[test]
fn views_match_captured_replies() {
    let mut checked = 0;
    for flavor in FLAVORS {
        for moment in ["stable", "after-rejoin", "final"] {
            let base = Path::new(flavor).join("text").join(moment);
            let abs = ferrocluster_testvectors::vectors_dir().join(&base);
            let mut dirs: Vec<_> = std::fs::read_dir(&abs)
                .unwrap_or_else(|e| panic!("{}: {e}", abs.display()))
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            dirs.sort();
            assert!(!dirs.is_empty());
            for d in dirs {
                let port = d.split('-').next().unwrap();
                let conf = Path::new(flavor)
                    .join("text/nodes-conf")
                    .join(moment)
                    .join(format!("nodes-{port}.conf"));
                checked += check_views(flavor, &base.join(&d), &conf);
            }
        }
    }
    assert!(checked >= 40, "checked {checked} replies");
}

#[test]
fn failed_node_views_match_capture() {
    // text/failover/*-with-failed-node.resp were taken on 22001 after 22002 was killed; the
    // nodes.conf of 22001 at the after-failover moment is the same model.
    let flavor = "valkey-8.0";
    let topo = load(
        &read(format!(
            "{flavor}/text/nodes-conf/after-failover/nodes-22001.conf"
        )),
        true,
    );
    let o = opts(flavor);
    let captured = read(format!(
        "{flavor}/text/failover/cluster-nodes-with-failed-node.resp"
    ));
    let Reply::Bulk(theirs) = parse_resp(&captured) else {
        panic!()
    };
    let theirs = String::from_utf8(theirs).unwrap();
    let ours = views::cluster_nodes_text(&topo, &o);
    assert_eq!(
        sorted_lines(&align_times(&ours, &theirs)),
        sorted_lines(&theirs)
    );
    assert!(theirs.contains(" master,fail - "));
    let captured = read(format!(
        "{flavor}/text/failover/cluster-info-with-failed-node.resp"
    ));
    let Reply::Bulk(info) = parse_resp(&captured) else {
        panic!()
    };
    let inputs = info_inputs(std::str::from_utf8(&info).unwrap());
    assert_eq!(views::cluster_info(&topo, &inputs).to_resp2(), captured);
}

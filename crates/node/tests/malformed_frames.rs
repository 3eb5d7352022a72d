//! Malformed and forged cluster-bus frames through the public API only (str0m's
//! `malformed-packet-injection` style; issue 16 item 10).
//!
//! The victim is a primary loaded from a captured nodes.conf (`<flavor>/text/nodes-conf/stable`),
//! so the captured frames (`<flavor>/bus/*.bin`) come from nodes it knows. Each case feeds
//! bytes on a fresh inbound link with [`ClusterNode::handle_link_bytes`] and compares the
//! model before and after. The assertion is that nothing changes that the same frame would
//! not change on a real node:
//!
//! * a frame from a sender the victim does not know (forged or mutated sender ID) changes
//!   nothing: no node learned, no epoch, address, role, slot, flag or failure report; a MEET
//!   adds one handshake node for its sender and nothing else — its gossip section teaches no
//!   node (Redis 7.0 `clusterProcessGossipSection`; Valkey 9.1.2 adds the MEET's gossiped
//!   nodes, which is how mutated MEETs planted phantom nodes: see
//!   `crates/gossip/tests/vectors/meet-gossip/`);
//! * a node seen only in handshake never changes a role or a slot;
//! * a frame claiming the victim's own ID changes nothing and is reported once
//!   (`Notice::NodeIdCollision`);
//! * whatever arrives, myself's address is never taken from a frame, the model's own
//!   invariants hold ([`ferrocluster_topology::Topology::check_invariants`]), the node never
//!   panics, and what it saves loads again.

use ferrocluster_bus::{decode, encode, Body, Message, MessageType};
use ferrocluster_node::{Capabilities, ClusterConfig, ClusterNode, LinkId, Millis, Notice, Output};
use ferrocluster_testvectors as tv;
use ferrocluster_topology::{NodeId, Topology};
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::net::{IpAddr, Ipv4Addr};

/// Shortly after the captures were made (their gossip carries pong times of about 1.796e9 s).
const NOW: Millis = Millis(1_796_100_000_000);
/// Mutated frames per flavor (the external run used 300).
const MUTATIONS: usize = 300;
/// Of those, how many are also checked one by one on a fresh victim.
const FRESH_MUTATIONS: usize = 100;

struct Victim {
    node: ClusterNode,
    port: u16,
}

/// A primary of the captured cluster, loaded from its stable nodes.conf.
fn victim(flavor: &str) -> Victim {
    let dir = format!("{flavor}/text/nodes-conf/stable");
    for f in tv::files_with_suffix(&dir, ".conf") {
        let text = tv::read(&f);
        let s = String::from_utf8_lossy(&text).into_owned();
        let Some(me) = s.lines().find(|l| l.contains("myself,master")) else {
            continue;
        };
        let port: u16 = me
            .split(' ')
            .nth(1)
            .and_then(|a| a.split([':', '@']).nth(1))
            .and_then(|p| p.parse().ok())
            .expect("port in the myself line");
        let cfg = ClusterConfig {
            port,
            node_timeout_ms: 2_000,
            ..ClusterConfig::default()
        };
        let mut node = ClusterNode::new(cfg, Capabilities::default(), NOW, 77, Some(&text))
            .expect("captured file loads");
        while node.poll_output().is_some() {}
        node.handle_persisted(u64::MAX);
        return Victim { node, port };
    }
    panic!("no primary's nodes.conf in {dir}");
}

/// Everything a frame must not change without cause, as text: every node that is not in
/// handshake with its whole record (but the receive-time fields), the epochs, the marks, and
/// the number of handshake nodes.
fn snapshot(t: &Topology) -> (String, usize) {
    let mut lines: Vec<String> = t
        .nodes()
        .filter(|n| !n.in_handshake())
        .map(|n| {
            format!(
                "{} {} p={:?} ce={} {:?}:{}/{}@{} shard={} slots={:?} host={:?} name={:?} \
                 pong={:?} ping={:?} fail={:?} reports={:?} v4={:?} v6={:?}",
                n.id(),
                n.flags.names(),
                n.primary,
                n.config_epoch.0,
                n.ip,
                n.port,
                n.tls_port,
                n.bus_port,
                n.shard_id.as_str(),
                n.slots().ranges().collect::<Vec<_>>(),
                n.hostname,
                n.human_nodename,
                n.pong_received,
                n.ping_sent,
                n.fail_time,
                n.failure_reports,
                n.client_ipv4,
                n.client_ipv6,
            )
        })
        .collect();
    lines.sort();
    lines.push(format!(
        "current={} lastvote={} importing={:?} migrating={:?}",
        t.current_epoch.get(),
        t.last_vote_epoch.get(),
        t.importing().collect::<Vec<_>>(),
        t.migrating().collect::<Vec<_>>()
    ));
    let handshakes = t.nodes().filter(|n| n.in_handshake()).count();
    (lines.join("\n"), handshakes)
}

/// The sender ID a frame's full header names, if it decodes.
fn sender_of(bytes: &[u8]) -> Option<NodeId> {
    let m = decode(bytes).ok()?;
    let h = m.full_header()?;
    NodeId::from_bytes(h.sender.as_bytes()).ok()
}

/// Feeds `bytes` on a new inbound link from 127.0.0.9; returns the link and the events.
fn feed(v: &mut Victim, bytes: &[u8]) -> (LinkId, Vec<Output>) {
    let peer = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 9));
    let local = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let link = v.node.handle_accept_local(peer, local, NOW);
    v.node.handle_link_bytes(link, bytes, NOW);
    (link, drain(v))
}

fn drain(v: &mut Victim) -> Vec<Output> {
    let mut evs = Vec::new();
    while let Some(o) = v.node.poll_output() {
        match o {
            Output::Persist { seq, .. } => v.node.handle_persisted(seq),
            Output::Transmit { .. } | Output::Connect { .. } | Output::Close { .. } => {}
            e => evs.push(e),
        }
    }
    evs
}

/// What must hold after any input.
fn always(v: &Victim, what: &str) {
    let t = v.node.topology();
    t.check_invariants()
        .unwrap_or_else(|e| panic!("{what}: model invariant broken: {e}"));
    let me = t.myself();
    assert_eq!(me.port, v.port, "{what}: myself's port moved");
    assert_eq!(
        me.bus_port,
        v.port + 10_000,
        "{what}: myself's bus port moved"
    );
    assert!(
        me.ip.is_none_or(|ip| ip == IpAddr::V4(Ipv4Addr::LOCALHOST)),
        "{what}: myself's IP is {:?}",
        me.ip
    );
    let conf = v.node.nodes_conf();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    ferrocluster_topology::load_nodes_conf(
        conf.as_bytes(),
        NOW,
        &mut rng,
        ferrocluster_topology::LoadOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{what}: the saved config does not load: {e}\n{conf}"));
}

/// An unknown sender changed nothing but (for a MEET) one handshake node, and no event says
/// otherwise.
fn unchanged_by_unknown(
    v: &Victim,
    before: &(String, usize),
    is_meet: bool,
    evs: &[Output],
    what: &str,
) {
    let after = snapshot(v.node.topology());
    assert_eq!(
        after.0, before.0,
        "{what}: a frame from an unknown sender changed the model"
    );
    let extra = after.1 - before.1.min(after.1);
    assert!(
        extra <= usize::from(is_meet),
        "{what}: {extra} handshake nodes added"
    );
    for e in evs {
        assert!(
            matches!(
                e,
                Output::Notice(Notice::FrameDropped { .. })
                    | Output::Notice(Notice::FramingLost { .. })
            ),
            "{what}: unexpected event {e:?}"
        );
    }
}

fn random_id(rng: &mut ChaCha8Rng) -> [u8; 40] {
    let mut id = [0u8; 40];
    for b in &mut id {
        *b = b"0123456789abcdef"[(rng.next_u32() % 16) as usize];
    }
    id
}

/// One mutation of a captured frame: 1–4 random bit flips, a random message type in the
/// header's `type` field (a PING's gossip section read as a MEET's, say), or both.
fn mutate(orig: &[u8], rng: &mut ChaCha8Rng) -> Vec<u8> {
    let mut bytes = orig.to_vec();
    let kind = rng.next_u32() % 3;
    if kind != 1 {
        for _ in 0..1 + rng.next_u32() % 4 {
            let at = rng.next_u32() as usize % bytes.len();
            bytes[at] ^= 1 << (rng.next_u32() % 8);
        }
    }
    if kind != 0 && bytes.len() >= 14 {
        bytes[12] = 0;
        bytes[13] = (rng.next_u32() % 11) as u8;
    }
    bytes
}

/// A primary of another cluster owning every slot: to it every captured sender is unknown.
fn stranger() -> Victim {
    let cfg = ClusterConfig {
        port: 7000,
        node_timeout_ms: 2_000,
        announce_ip: Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        ..ClusterConfig::default()
    };
    let mut node =
        ClusterNode::new(cfg, Capabilities::default(), NOW, 5, None).expect("fresh node");
    node.cluster_command_argv(
        &["CLUSTER", "ADDSLOTSRANGE", "0", "16383"],
        &ferrocluster_node::CommandRequest::default(),
        &ferrocluster_node::EmptyKeyspace,
        NOW,
    );
    let mut v = Victim { node, port: 7000 };
    drain(&mut v);
    assert_eq!(v.node.topology().myself().slot_count(), 16384);
    v
}

/// The external run of issue 16 item 10: byte-mutated captured frames (types changed too, so
/// PINGs full of gossip arrive as MEETs) into a node of another cluster turned primaries into
/// replicas of phantom nodes. Every sender is unknown here: after all of them, one after the
/// other, the node knows nothing but handshake nodes (one per MEET at most) and still owns
/// every slot.
#[test]
fn mutated_frames_into_a_node_of_another_cluster_plant_nothing_and_never_demote_it() {
    for flavor in tv::FLAVORS {
        let frames = captured(flavor);
        let mut rng = ChaCha8Rng::seed_from_u64(1610);
        let mut v = stranger();
        let me = *v.node.myself_id();
        let before = snapshot(v.node.topology());
        let mut meets = 0;
        for i in 0..MUTATIONS {
            let (name, orig) = &frames[i % frames.len()];
            let bytes = if i < frames.len() {
                orig.clone()
            } else {
                mutate(orig, &mut rng)
            };
            meets +=
                usize::from(decode(&bytes).is_ok_and(|m| m.message_type() == MessageType::Meet));
            let (_, evs) = feed(&mut v, &bytes);
            let what = format!("{flavor} {name} #{i}");
            assert_eq!(
                snapshot(v.node.topology()).0,
                before.0,
                "{what}: the model changed"
            );
            for e in &evs {
                assert!(
                    matches!(
                        e,
                        Output::Notice(Notice::FrameDropped { .. })
                            | Output::Notice(Notice::FramingLost { .. })
                    ),
                    "{what}: unexpected event {e:?}"
                );
            }
        }
        let t = v.node.topology();
        assert!(
            meets > 10,
            "{flavor}: only {meets} MEETs among the mutations"
        );
        assert!(
            t.len() - 1 <= meets,
            "{flavor}: {} nodes from {meets} MEETs",
            t.len() - 1
        );
        assert!(t.nodes().all(|n| n.is_myself() || n.in_handshake()));
        assert!(t.myself().is_primary() && t.myself().slot_count() == 16384);
        assert_eq!(*t.myself_id(), me);
        always(&v, flavor);
    }
}

/// Every captured bus frame of `flavor` (../shared/vectors/<flavor>/bus: 32 from Redis 7.0,
/// 34 from Valkey 8.0), by name. Panics when the folder holds another number: a folder that
/// went missing would leave the tests that walk it nothing to check.
fn captured(flavor: &str) -> Vec<(String, Vec<u8>)> {
    let files = tv::files_with_suffix(format!("{flavor}/bus"), ".bin");
    let want = if flavor == "valkey-8.0" { 34 } else { 32 };
    assert_eq!(files.len(), want, "captured frames of {flavor}");
    files
        .into_iter()
        .map(|p| (p.display().to_string(), tv::read(&p)))
        .collect()
}

/// Every captured frame as it was (from a known sender), and with its sender replaced by an
/// unknown ID.
#[test]
fn captured_frames_from_a_forged_unknown_sender_change_nothing() {
    let mut rng = ChaCha8Rng::seed_from_u64(16);
    for flavor in tv::FLAVORS {
        for (name, bytes) in captured(flavor) {
            let mut v = victim(flavor);
            let (_, _) = feed(&mut v, &bytes);
            always(&v, &format!("{name} as captured"));
            if bytes.len() < 80
                || decode(&bytes)
                    .ok()
                    .and_then(|m| m.full_header().cloned())
                    .is_none()
            {
                continue; // light header: no sender ID to forge
            }
            let mut forged = bytes.clone();
            forged[40..80].copy_from_slice(&random_id(&mut rng));
            let mut v = victim(flavor);
            let before = snapshot(v.node.topology());
            let is_meet = decode(&forged).is_ok_and(|m| m.message_type() == MessageType::Meet);
            let (_, evs) = feed(&mut v, &forged);
            let what = format!("{name} from an unknown sender");
            unchanged_by_unknown(&v, &before, is_meet, &evs, &what);
            always(&v, &what);
        }
    }
}

/// Byte-mutated captured frames, one at a time on a fresh victim and then all in sequence
/// on one victim: no panic, and whatever the mutation made of the sender (unknown, myself,
/// known), the rule for it holds.
#[test]
fn byte_mutated_captured_frames_change_only_what_their_sender_may_change() {
    for flavor in tv::FLAVORS {
        let frames = captured(flavor);
        let mut rng = ChaCha8Rng::seed_from_u64(1600);
        let mut seq = victim(flavor);
        let mut seq_unknown = victim(flavor);
        let seq_me = *seq_unknown.node.myself_id();
        let seq_slots = seq_unknown.node.topology().myself().slot_count();
        for i in 0..MUTATIONS {
            let (name, orig) = &frames[rng.next_u32() as usize % frames.len()];
            let bytes = mutate(orig, &mut rng);
            let what = format!("{name} mutation {i}");
            let sender = sender_of(&bytes);
            let known = sender.is_some_and(|s| seq_unknown.node.topology().node(&s).is_some());
            // The same frame into the long-lived victims.
            // (The whole check every tenth frame: it saves and reloads the config.)
            feed(&mut seq, &bytes);
            if i % 10 == 9 {
                always(&seq, &format!("{what} (sequence)"));
            }
            if !known {
                feed(&mut seq_unknown, &bytes);
                if i % 10 == 9 {
                    always(&seq_unknown, &format!("{what} (unknown-sender sequence)"));
                }
            }
            if i >= FRESH_MUTATIONS {
                continue;
            }
            let mut v = victim(flavor);
            let me = *v.node.myself_id();
            let before = snapshot(v.node.topology());
            let is_meet = decode(&bytes).is_ok_and(|m| m.message_type() == MessageType::Meet);
            let (_, evs) = feed(&mut v, &bytes);
            always(&v, &what);
            if sender == Some(me) {
                let after = snapshot(v.node.topology());
                assert_eq!(
                    after, before,
                    "{what}: a frame claiming my ID changed the model"
                );
                assert!(
                    evs.iter()
                        .any(|e| matches!(e, Output::Notice(Notice::NodeIdCollision { .. }))),
                    "{what}: a frame claiming my ID was not reported"
                );
            } else if !known && decode(&bytes).is_ok_and(|m| m.full_header().is_some()) {
                unchanged_by_unknown(&v, &before, is_meet, &evs, &what);
            }
        }
        always(&seq, "after the sequence");
        always(&seq_unknown, "after the unknown-sender sequence");
        // Frames that did not come from a node it knows never cost the primary its role.
        let t = seq_unknown.node.topology();
        assert!(
            t.myself().is_primary(),
            "{flavor}: the victim became a replica"
        );
        assert_eq!(
            t.myself().slot_count(),
            seq_slots,
            "{flavor}: the victim lost slots"
        );
        assert_eq!(*t.myself_id(), seq_me);
    }
}

/// The phantom-node attack of issue 16 item 10 with forged frames: a MEET from an unknown
/// sender names three more unknown nodes; then one of them PINGs, claiming the victim's slots
/// with a far larger configEpoch, and the MEET's own (handshake) sender does the same on its
/// link. Nothing is learned and the victim stays the primary of its slots.
#[test]
fn a_forged_meet_plants_no_phantom_and_no_unknown_or_handshake_sender_demotes_a_primary() {
    for flavor in tv::FLAVORS {
        let mut rng = ChaCha8Rng::seed_from_u64(10);
        let mut v = victim(flavor);
        let before = snapshot(v.node.topology());
        let mine = v.node.topology().myself().slots().clone();
        let ping = tv::read(format!("{flavor}/bus/ping-01.bin"));
        let template = decode(&ping).expect("captured PING decodes");
        let Some(h) = template.full_header().cloned() else {
            panic!("captured PING has a full header")
        };
        let sender = random_id(&mut rng);
        let phantoms: Vec<[u8; 40]> = (0..3).map(|_| random_id(&mut rng)).collect();
        let entries = phantoms
            .iter()
            .enumerate()
            .map(|(i, p)| ferrocluster_bus::GossipEntry {
                name: ferrocluster_bus::NodeName::new(*p),
                ping_sent_secs: 0,
                pong_received_secs: (NOW.0 / 1000) as u32,
                ip: ferrocluster_bus::IpField::from_text(b"127.0.0.50").unwrap(),
                port: 7300 + i as u16,
                cport: 17300 + i as u16,
                flags: ferrocluster_bus::node_flags::PRIMARY,
                pport: 0,
                reserved: Default::default(),
            })
            .collect();
        let mut mh = h.clone();
        mh.sender = ferrocluster_bus::NodeName::new(sender);
        let meet = Message::full(
            mh.clone(),
            Body::Meet(ferrocluster_bus::Gossip {
                entries,
                extensions: vec![],
            }),
        );
        let (link, evs) = feed(&mut v, &encode(&meet));
        unchanged_by_unknown(&v, &before, true, &evs, "forged MEET");
        for p in &phantoms {
            let id = NodeId::from_bytes(p).unwrap();
            assert!(
                v.node.topology().node(&id).is_none(),
                "{flavor}: phantom {id} learned"
            );
        }
        // The claim: all of the victim's slots, configEpoch and currentEpoch 10^6, primary.
        let claim = |name: [u8; 40]| {
            let mut c = h.clone();
            c.sender = ferrocluster_bus::NodeName::new(name);
            c.myslots = mine.clone();
            c.config_epoch = 1_000_000;
            c.current_epoch = 1_000_000;
            c.replicaof = None;
            encode(&Message::full(
                c,
                Body::Ping(ferrocluster_bus::Gossip {
                    entries: vec![],
                    extensions: vec![],
                }),
            ))
        };
        // From the handshake node's own link.
        v.node.handle_link_bytes(link, &claim(sender), NOW);
        let evs = drain(&mut v);
        unchanged_by_unknown(&v, &before, true, &evs, "claim from the handshake sender");
        // From a gossiped phantom, on a new link.
        let (_, evs) = feed(&mut v, &claim(phantoms[0]));
        unchanged_by_unknown(&v, &before, true, &evs, "claim from a phantom");
        let me = v.node.topology().myself();
        assert!(
            me.is_primary() && *me.slots() == mine,
            "{flavor}: the victim was demoted"
        );
        always(&v, "phantom attack");
    }
}

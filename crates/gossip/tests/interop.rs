//! Interop rules that real captures show: which ping extensions a peer gets (Redis 7.0 knows
//! only HOSTNAME, facts sheet §6.2, §21.1, vectors README "Redis 7.0 vs Valkey 8.0
//! differences"), and when the light header may be used (§2, §3.1, §17).

use ferrocluster_bus::{decode, Body, Message, PingExt, Publish};
use ferrocluster_gossip::*;
use ferrocluster_testvectors::{read, read_json};
use ferrocluster_topology::{Hostname, Millis, Node, NodeFlags, NodeId, ShardId, Topology};
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::net::{IpAddr, Ipv4Addr};

fn cfg() -> GossipConfig {
    GossipConfig {
        node_timeout_ms: 15_000,
        blacklist_ttl_secs: 60,
        ping_interval_ms: None,
        announce_ip: None,
        tls_cluster: false,
    }
}

fn lo() -> IpAddr {
    IpAddr::V4(Ipv4Addr::LOCALHOST)
}

/// The index entry of capture `file` in `<flavor>/bus/index.json`.
fn index_entry(flavor: &str, file: &str) -> serde_json::Value {
    let idx = read_json(format!("{flavor}/bus/index.json"));
    idx["messages"]
        .as_array()
        .expect("messages array")
        .iter()
        .find(|m| m["file"] == file)
        .unwrap_or_else(|| panic!("{file} not in {flavor} index"))
        .clone()
}

/// A captured PING of the "hostname" phase, decoded, with its index entry.
fn captured_ping(flavor: &str, file: &str) -> (Message, serde_json::Value) {
    let entry = index_entry(flavor, file);
    assert_eq!(entry["phase"], "hostname", "{flavor}/{file}");
    assert_eq!(entry["type_name"], "ping", "{flavor}/{file}");
    let msg = decode(&read(format!("{flavor}/bus/{file}"))).expect("capture decodes");
    (msg, entry)
}

/// Myself (with a hostname, so HOSTNAME is written) knowing the capture's sender.
fn receiver_knowing(sender: NodeId, rng: &mut ChaCha8Rng, now: Millis) -> Topology {
    let mut t = Topology::fresh(rng, now);
    t.myself_mut().hostname = Some(Hostname::new("ours.example").unwrap());
    let mut n = Node::new(sender, ShardId::random(rng), now);
    n.flags = NodeFlags::PRIMARY;
    n.ip = Some(lo());
    t.add_node(n).unwrap();
    t
}

fn sender_of(msg: &Message) -> NodeId {
    NodeId::from_bytes(msg.full_header().unwrap().sender.as_bytes()).unwrap()
}

/// The PONG our node sends back on `link` for `msg`.
fn reply_to(
    g: &mut Gossip,
    t: &mut Topology,
    link: LinkId,
    msg: &Message,
    now: Millis,
    rng: &mut ChaCha8Rng,
) -> Vec<PingExt> {
    let mut out = Vec::new();
    g.handle_message(t, &cfg(), link, msg, now, rng, &mut out);
    let pong = out
        .iter()
        .find_map(|e| match e {
            GossipEffect::Send { link: l, message } if *l == link => Some(message.clone()),
            _ => None,
        })
        .expect("a PONG on the same link (§8 step 5)");
    let Body::Pong(section) = pong.body else {
        panic!("not a PONG: {pong:?}")
    };
    section.extensions
}

fn types(exts: &[PingExt]) -> Vec<u16> {
    exts.iter().map(PingExt::ext_type).collect()
}

/// Redis 7.0 with `cluster-announce-hostname` sends EXT_DATA with HOSTNAME alone (capture
/// `redis-7.0/bus/ping-05.bin`): our reply carries HOSTNAME (type 0, the only one it knows)
/// and no SHARDID (type 3), which it would log as "Received unknown extension type 3".
#[test]
fn redis70_hostname_ping_gets_hostname_only() {
    let mut rng = ChaCha8Rng::seed_from_u64(70);
    let now = Millis(1_796_000_000_000);
    let (ping, entry) = captured_ping("redis-7.0", "ping-05.bin");
    assert_eq!(entry["extension_types"], serde_json::json!([0]));
    assert!(ping.full_header().unwrap().ext_data());
    let sender = sender_of(&ping);
    let mut t = receiver_knowing(sender, &mut rng, now);
    let mut g = Gossip::new();
    let link = g.links.open(LinkDirection::Inbound, None, Some(lo()), now);
    let exts = reply_to(&mut g, &mut t, link, &ping, now, &mut rng);
    assert_eq!(types(&exts), vec![0], "HOSTNAME only: {exts:?}");
    assert!(matches!(&exts[0], PingExt::Hostname(h) if h.as_str() == Some("ours.example")));
    assert_eq!(g.links.extension_set(&sender), ExtensionSet::HostnameOnly);
    assert!(t
        .node(&sender)
        .unwrap()
        .flags
        .contains(NodeFlags::EXTENSIONS_SUPPORTED));

    // Our later cron PINGs to it follow the same rule.
    let out_link = g
        .links
        .open(LinkDirection::Outbound, Some(sender), Some(lo()), now);
    let mut out = Vec::new();
    g.handle_connected(&mut t, &cfg(), out_link, now, &mut rng, &mut out);
    let Some(GossipEffect::Send { message, .. }) = out.first() else {
        panic!("no PING: {out:?}")
    };
    assert_eq!(types(&message.body.gossip().unwrap().extensions), vec![0]);
}

/// Valkey 8.0 attaches SHARDID to every extension-bearing message (capture
/// `valkey-8.0/bus/ping-05.bin`: HOSTNAME, HUMAN_NODENAME, SHARDID): our reply carries the
/// full Valkey 8 set, ending with SHARDID (§6.3).
#[test]
fn valkey_shardid_ping_gets_the_full_set() {
    let mut rng = ChaCha8Rng::seed_from_u64(80);
    let now = Millis(1_796_000_000_000);
    let (ping, entry) = captured_ping("valkey-8.0", "ping-05.bin");
    assert_eq!(entry["extension_types"], serde_json::json!([0, 1, 3]));
    let sender = sender_of(&ping);
    let mut t = receiver_knowing(sender, &mut rng, now);
    let mut g = Gossip::new();
    let link = g.links.open(LinkDirection::Inbound, None, Some(lo()), now);
    let exts = reply_to(&mut g, &mut t, link, &ping, now, &mut rng);
    assert_eq!(types(&exts), vec![0, 3], "HOSTNAME then SHARDID: {exts:?}");
    let my_shard = t.myself().shard_id;
    assert!(matches!(&exts[1], PingExt::ShardId(s) if s.as_bytes() == my_shard.as_bytes()));
    assert_eq!(g.links.extension_set(&sender), ExtensionSet::Full);

    // The latest message decides: the same node later sending the Redis 7.0 shape (a
    // downgrade in place) gets HOSTNAME only again.
    let (mut r70, _) = captured_ping("redis-7.0", "ping-05.bin");
    let mut h = r70.full_header().unwrap().clone();
    h.sender = ping.full_header().unwrap().sender;
    r70 = Message::full(h, r70.body.clone());
    let exts = reply_to(&mut g, &mut t, link, &r70, now, &mut rng);
    assert_eq!(types(&exts), vec![0]);
}

/// Valkey's first message to a peer not yet known to support extensions has EXT_DATA and no
/// extension (captures `meet-01.bin`, `ping-08.bin`); Redis 7.0 never sets EXT_DATA without
/// one. Our reply to such a MEET from an unknown node (the handshake node inherits
/// EXTENSIONS_SUPPORTED, §6.3) already carries SHARDID.
#[test]
fn ext_data_without_extensions_means_valkey() {
    let mut rng = ChaCha8Rng::seed_from_u64(81);
    let now = Millis(1_796_000_000_000);
    let entry = index_entry("valkey-8.0", "meet-01.bin");
    assert_eq!(entry["mflags0_names"], serde_json::json!(["ext_data"]));
    assert_eq!(entry["extensions"], serde_json::json!([]));
    let meet = decode(&read("valkey-8.0/bus/meet-01.bin")).unwrap();
    let mut t = Topology::fresh(&mut rng, now);
    let mut g = Gossip::new();
    let link = g.links.open(LinkDirection::Inbound, None, Some(lo()), now);
    let exts = reply_to(&mut g, &mut t, link, &meet, now, &mut rng);
    assert_eq!(types(&exts), vec![3], "no hostname set: SHARDID alone");
}

/// A node flagged EXTENSIONS_SUPPORTED only because a third node's gossip said so (§6.3, last
/// bullet) may be a Redis 7.0 node: until it speaks to us it gets HOSTNAME only.
#[test]
fn gossip_copied_extension_flag_gets_hostname_only() {
    let mut rng = ChaCha8Rng::seed_from_u64(82);
    let now = Millis(0);
    let mut t = Topology::fresh(&mut rng, now);
    t.myself_mut().hostname = Some(Hostname::new("ours.example").unwrap());
    let id = NodeId::random(&mut rng);
    let mut n = Node::new(id, ShardId::random(&mut rng), now);
    n.flags = NodeFlags::PRIMARY | NodeFlags::EXTENSIONS_SUPPORTED;
    t.add_node(n).unwrap();
    let g = Gossip::new();
    let ping = build_ping(
        &t,
        &g.links,
        &g.blacklist,
        &cfg(),
        0,
        PingKind::Ping,
        Some(&id),
        false,
        0,
        now,
        &mut rng,
    );
    assert_eq!(types(&ping.body.gossip().unwrap().extensions), vec![0]);
}

// ----- light header -----

struct Peer {
    t: Topology,
    g: Gossip,
}

impl Peer {
    fn new(port: u16, rng: &mut ChaCha8Rng) -> Peer {
        let mut t = Topology::fresh(rng, Millis(0));
        let me = t.myself_mut();
        me.flags
            .insert(NodeFlags::PRIMARY | NodeFlags::LIGHT_HDR_SUPPORTED);
        me.ip = Some(lo());
        me.port = port;
        me.bus_port = port + 10000;
        Peer {
            t,
            g: Gossip::new(),
        }
    }
    fn id(&self) -> NodeId {
        *self.t.myself_id()
    }
    /// Learns `other` as gossip would describe it (§7.4: flags and address as gossiped).
    fn learn(&mut self, other: &Peer) {
        let o = other.t.myself();
        let mut n = Node::new(other.id(), o.shard_id, Millis(0));
        n.flags = NodeFlags::PRIMARY | NodeFlags::LIGHT_HDR_SUPPORTED;
        n.ip = Some(lo());
        n.port = o.port;
        n.bus_port = o.bus_port;
        self.t.add_node(n).unwrap();
    }
    /// Opens and connects the outbound link to `to`; returns it and the connect-time PING.
    fn connect(&mut self, to: NodeId, rng: &mut ChaCha8Rng) -> (LinkId, Message) {
        let link = self
            .g
            .links
            .open(LinkDirection::Outbound, Some(to), Some(lo()), Millis(0));
        let mut out = Vec::new();
        self.g
            .handle_connected(&mut self.t, &cfg(), link, Millis(0), rng, &mut out);
        (link, sent(&out, link))
    }
    fn ping(&mut self, to: NodeId, rng: &mut ChaCha8Rng) -> Message {
        let mut out = Vec::new();
        assert!(self.g.send_ping(
            &mut self.t,
            &cfg(),
            &to,
            PingKind::Ping,
            Millis(0),
            rng,
            &mut out
        ));
        let link = self.g.links.outbound_of(&to).unwrap();
        sent(&out, link)
    }
    /// Processes `msg` on `link` (steps 1–6e and 6i); returns what was sent back on it and
    /// whether the link was closed.
    fn receive(
        &mut self,
        link: LinkId,
        msg: &Message,
        rng: &mut ChaCha8Rng,
    ) -> (Option<Message>, bool) {
        let out = self.receive_all(link, msg, rng);
        let closed = out.contains(&GossipEffect::Close { link });
        let reply = out.iter().find_map(|e| match e {
            GossipEffect::Send { link: l, message } if *l == link => Some(message.clone()),
            _ => None,
        });
        (reply, closed)
    }
    /// Processes `msg` on `link`; returns every effect.
    fn receive_all(
        &mut self,
        link: LinkId,
        msg: &Message,
        rng: &mut ChaCha8Rng,
    ) -> Vec<GossipEffect> {
        let mut out = Vec::new();
        let r = self
            .g
            .handle_message(&mut self.t, &cfg(), link, msg, Millis(0), rng, &mut out);
        if let Received::Claims(s) = r {
            self.g
                .handle_message_gossip(&mut self.t, &cfg(), &s, msg, Millis(0), &mut out);
        }
        out
    }
}

fn sent(out: &[GossipEffect], link: LinkId) -> Message {
    out.iter()
        .find_map(|e| match e {
            GossipEffect::Send { link: l, message } if *l == link => Some(message.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("nothing sent on {link}: {out:?}"))
}

fn publish() -> Message {
    Message::light(Body::Publish(Publish {
        channel: b"news".to_vec(),
        message: b"hi".to_vec(),
    }))
}

/// The second finding of the mixed-cluster test: B knows A and connects; A learns of B only
/// later (through gossip). A's inbound link from B stays unbound until a full-header message
/// from B arrives on it while A knows B, and a light PUBLISH before that closes the link (§2).
/// B uses the light header only once A has shown it knows B (a second message on A's link to
/// B) and a PING of B went out afterwards — and then A accepts it.
#[test]
fn light_header_waits_until_the_peer_has_bound_our_link() {
    let mut rng = ChaCha8Rng::seed_from_u64(90);
    let mut a = Peer::new(7000, &mut rng);
    let mut b = Peer::new(7001, &mut rng);
    let (a_id, b_id) = (a.id(), b.id());
    b.learn(&a);

    // B -> A: PING on B's outbound link; A does not know B: link unbound, PONG anyway.
    let (b_out, ping) = b.connect(a_id, &mut rng);
    let a_in =
        a.g.links
            .open(LinkDirection::Inbound, None, Some(lo()), Millis(0));
    let (pong, closed) = a.receive(a_in, &ping, &mut rng);
    assert!(!closed);
    assert_eq!(a.g.links.get(a_in).unwrap().node, None);
    b.receive(b_out, &pong.unwrap(), &mut rng);
    let a_at_b = b.t.node(&a_id).unwrap();
    assert!(
        a_at_b.flags.contains(NodeFlags::LIGHT_HDR_SUPPORTED),
        "mirrored (§8 step 3)"
    );
    assert!(
        !b.g.takes_light_header(a_at_b),
        "A has not shown it knows B"
    );
    // What a light PUBLISH would do now: A closes the link (the bug).
    let (_, closed) = a.clone_peer().receive(a_in, &publish(), &mut rng);
    assert!(closed);

    // A learns B (gossip) and connects: its first message may be a handshake PING, no proof.
    a.learn(&b);
    let (a_out, ping) = a.connect(b_id, &mut rng);
    let b_in =
        b.g.links
            .open(LinkDirection::Inbound, None, Some(lo()), Millis(0));
    let (pong, _) = b.receive(b_in, &ping, &mut rng);
    a.receive(a_out, &pong.unwrap(), &mut rng);
    assert!(!b.g.links.peer_knows_us(&a_id));
    assert!(!b.g.takes_light_header(b.t.node(&a_id).unwrap()));
    // A's second message on that link proves A knows B's real ID.
    let ping = a.ping(b_id, &mut rng);
    b.receive(b_in, &ping, &mut rng);
    assert!(b.g.links.peer_knows_us(&a_id));
    assert!(
        !b.g.takes_light_header(b.t.node(&a_id).unwrap()),
        "no full-header message has gone out on B's link since"
    );
    // B's next PING binds the link at A; from then on the light header is used and accepted.
    let ping = b.ping(a_id, &mut rng);
    assert!(b.g.takes_light_header(b.t.node(&a_id).unwrap()));
    let (_, closed) = a.receive(a_in, &ping, &mut rng);
    assert!(!closed);
    assert_eq!(a.g.links.get(a_in).unwrap().node, Some(b_id));
    let (_, closed) = a.receive(a_in, &publish(), &mut rng);
    assert!(!closed, "light PUBLISH accepted on the bound link");

    // A reconnect: the new link's connect-time PING follows the proof B still holds (A's
    // link to B), so A binds the new link on it and takes light messages after it.
    b.g.handle_link_closed(&mut b.t, b_out, false, Millis(0));
    let (_, ping) = b.connect(a_id, &mut rng);
    assert!(b.g.takes_light_header(b.t.node(&a_id).unwrap()));
    let a_in2 =
        a.g.links
            .open(LinkDirection::Inbound, None, Some(lo()), Millis(0));
    a.receive(a_in2, &ping, &mut rng);
    let (_, closed) = a.receive(a_in2, &publish(), &mut rng);
    assert!(!closed);
}

/// After a MEET (§7.3) both sides start in handshake: the first message of each link may be
/// addressed to a handshake record, so neither side uses the light header until a second
/// message arrived on its inbound link and a PING of its own followed.
#[test]
fn light_header_after_meet_needs_a_second_message() {
    let mut rng = ChaCha8Rng::seed_from_u64(91);
    let mut a = Peer::new(7000, &mut rng);
    let mut b = Peer::new(7001, &mut rng);
    let (a_id, b_id) = (a.id(), b.id());
    // B: CLUSTER MEET A.
    let hs =
        b.g.meet(&mut b.t, lo(), 7000, None, Millis(0), &mut rng)
            .unwrap()
            .unwrap();
    let (b_out, meet) = b.connect(hs, &mut rng);
    assert!(matches!(meet.body, Body::Meet(_)));
    let a_in =
        a.g.links
            .open(LinkDirection::Inbound, None, Some(lo()), Millis(0));
    let (pong, _) = a.receive(a_in, &meet, &mut rng);
    b.receive(b_out, &pong.unwrap(), &mut rng);
    assert!(b.t.contains(&a_id), "B's handshake completed");
    // A connects to its handshake record of B and PINGs (the handshake PING).
    let b_hs = a.g.links.get(a_in).unwrap().node.unwrap();
    assert!(a.t.node(&b_hs).unwrap().in_handshake());
    let (a_out, ping) = a.connect(b_hs, &mut rng);
    let b_in =
        b.g.links
            .open(LinkDirection::Inbound, None, Some(lo()), Millis(0));
    let (pong, _) = b.receive(b_in, &ping, &mut rng);
    assert!(
        !b.g.links.peer_knows_us(&a_id),
        "a handshake PING proves nothing"
    );
    let _ = b.ping(a_id, &mut rng);
    assert!(!b.g.takes_light_header(b.t.node(&a_id).unwrap()));
    a.receive(a_out, &pong.unwrap(), &mut rng);
    assert!(a.t.contains(&b_id), "A's handshake completed");
    // Now A's PINGs are to B's real ID.
    let ping = a.ping(b_id, &mut rng);
    b.receive(b_in, &ping, &mut rng);
    let ping = b.ping(a_id, &mut rng);
    assert!(b.g.takes_light_header(b.t.node(&a_id).unwrap()));
    a.receive(a_in, &ping, &mut rng);
    let (_, closed) = a.receive(a_in, &publish(), &mut rng);
    assert!(!closed);
}

impl Peer {
    fn clone_peer(&self) -> Peer {
        Peer {
            t: self.t.clone(),
            g: self.g.clone(),
        }
    }
}

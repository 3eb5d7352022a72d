//! Pub/Sub over the bus (§17), own-IP discovery (§7.3) and routing through the node (§20),
//! with the in-memory harness and captured frames.

mod common;

use common::{captured, ip, load, Net, FLAVOR};
use ferrocluster_bus::{decode, encode, Body, Message, Publish};
use ferrocluster_command::{lookup, ClientState, Dispatch, ErrorReply, NoKeys};
use ferrocluster_node::{ClusterConfig, ClusterNode, Millis, NodeId, Notice, Output};
use std::net::IpAddr;

const NT: u64 = 2000;

/// Three primaries and a replica of node 0 (node 3), fully meshed.
fn cluster() -> Net {
    let mut net = Net::new(4, NT);
    net.add_slots(0, 0, 5460);
    net.add_slots(1, 5461, 10922);
    net.add_slots(2, 10923, 16383);
    for b in 1..4 {
        net.meet(0, b);
    }
    assert!(net.run_until(10_000, |n| n.fully_meshed()));
    let p = *net.nodes[0].myself_id();
    net.replicate(3, &p);
    net.drain();
    // Two ping intervals (2 × NODE_TIMEOUT) let every peer prove it has bound our outbound
    // link to us, which the light header waits for.
    net.run_for(2 * NT + 1_000);
    net
}

fn received(net: &Net, sharded: bool) -> Vec<(usize, NodeId, Vec<u8>, Vec<u8>)> {
    net.events
        .iter()
        .filter_map(|(i, e)| match e {
            Output::PubSubMessage {
                from,
                channel,
                message,
                sharded: s,
            } if *s == sharded => Some((*i, *from, channel.clone(), message.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn publish_reaches_every_other_node_with_the_light_header() {
    let mut net = cluster();
    let from = *net.nodes[1].myself_id();
    let sent_before = net.sent.len();
    let now = net.now;
    assert_eq!(net.nodes[1].publish(b"news", b"hello-cluster", now), 3);
    net.drain();
    let got = received(&net, false);
    let mut at: Vec<usize> = got.iter().map(|g| g.0).collect();
    at.sort();
    assert_eq!(at, vec![0, 2, 3], "every node but the publisher, once");
    assert!(got
        .iter()
        .all(|g| g.1 == from && g.2 == b"news" && g.3 == b"hello-cluster"));
    // Every peer advertised LIGHT_HDR_SUPPORTED: 16-byte header + 8 + data (§3.1), the same
    // bytes as the captured `publish-light-01.bin` (PUBLISH news hello-cluster).
    let frames: Vec<&Vec<u8>> = net.sent[sent_before..]
        .iter()
        .filter(|(i, _, _)| *i == 1)
        .map(|(_, _, b)| b)
        .collect();
    assert_eq!(frames.len(), 3);
    let capture = ferrocluster_testvectors::read(format!("{FLAVOR}/bus/publish-light-01.bin"));
    for f in frames {
        assert_eq!(f, &capture);
    }
    assert_eq!(net.nodes[1].stats().sent[4], 3, "counted as publish");
}

#[test]
fn spublish_reaches_only_my_shard() {
    let mut net = cluster();
    let now = net.now;
    // Node 0's shard: itself and its replica node 3.
    assert_eq!(net.nodes[0].spublish(b"shard-news", b"hello-shard", now), 1);
    net.drain();
    let got = received(&net, true);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, 3);
    assert_eq!(
        (got[0].2.as_slice(), got[0].3.as_slice()),
        (&b"shard-news"[..], &b"hello-shard"[..])
    );
    // From the replica: reaches its primary only.
    let now = net.now;
    assert_eq!(
        net.nodes[3].spublish(b"shard-news", b"from-replica", now),
        1
    );
    net.drain();
    let got = received(&net, true);
    assert_eq!(got.len(), 2);
    assert_eq!(got[1].0, 0);
    assert!(received(&net, false).is_empty());
    // A primary alone in its shard sends nothing.
    let now = net.now;
    assert_eq!(net.nodes[2].spublish(b"c", b"m", now), 0);
}

#[test]
fn captured_publish_frames_in_both_header_forms_become_events() {
    // 22003 at the stable moment; a link bound to 22001 by a PING from it.
    let mut node = load("stable", 22003);
    let now = Millis(1_796_060_460_000);
    let link = node.handle_accept(ip(0), now);
    let ping = ferrocluster_testvectors::read(format!("{FLAVOR}/bus/ping-01.bin"));
    node.handle_link_bytes(link, &ping, now);
    let light = ferrocluster_testvectors::read(format!("{FLAVOR}/bus/publish-light-01.bin"));
    let shard = ferrocluster_testvectors::read(format!("{FLAVOR}/bus/publishshard-light-02.bin"));
    // A full-header PUBLISH as Redis 7.0 sends it (§4.3).
    let header = decode(&ping).unwrap().full_header().unwrap().clone();
    let full = encode(&Message::full(
        header,
        Body::Publish(Publish {
            channel: b"news".to_vec(),
            message: b"full".to_vec(),
        }),
    ));
    let mut bytes = light.clone();
    bytes.extend_from_slice(&shard);
    bytes.extend_from_slice(&full);
    node.handle_link_bytes(link, &bytes, now);
    let sender = NodeId::parse("4ac9751fe685983989b445845514090e6915e16b").unwrap();
    let evs: Vec<Output> = std::iter::from_fn(|| node.poll_output())
        .filter(|o| matches!(o, Output::PubSubMessage { .. }))
        .collect();
    let msg = |ch: &[u8], m: &[u8], sharded| Output::PubSubMessage {
        from: sender,
        channel: ch.to_vec(),
        message: m.to_vec(),
        sharded,
    };
    assert_eq!(
        evs,
        vec![
            msg(b"news", b"hello-cluster", false),
            msg(b"shard-news", b"hello-shard-from-replica", true),
            msg(b"news", b"full", false),
        ]
    );
    // A light frame on a link nobody identified: the link is closed, no event (§2).
    let stranger = node.handle_accept(ip(9), now);
    node.handle_link_bytes(stranger, &light, now);
    let outs: Vec<_> = std::iter::from_fn(|| node.poll_output()).collect();
    assert_eq!(
        outs,
        vec![ferrocluster_node::Output::Close { link: stranger }]
    );
}

#[test]
fn module_messages_are_sent_with_the_full_header_and_delivered() {
    let mut net = cluster();
    let from = *net.nodes[2].myself_id();
    let to = *net.nodes[1].myself_id();
    let now = net.now;
    assert_eq!(
        net.nodes[2].send_module_message(Some(&to), 0x1234, 7, b"payload", now),
        1
    );
    net.drain();
    let got: Vec<_> = net
        .events
        .iter()
        .filter(|(_, e)| matches!(e, Output::ModuleMessage { .. }))
        .collect();
    assert_eq!(
        got,
        vec![&(
            1,
            Output::ModuleMessage {
                from,
                module_id: 0x1234,
                module_type: 7,
                payload: b"payload".to_vec()
            }
        )]
    );
    let now = net.now;
    assert_eq!(net.nodes[2].send_module_message(None, 1, 1, b"", now), 3);
}

#[test]
fn own_ip_is_learned_from_the_link_a_meet_arrives_on() {
    let mut net = Net::new(2, NT);
    assert_eq!(net.nodes[1].topology().myself().ip, None);
    net.meet(0, 1);
    assert!(net.run_until(3_000, |n| n.fully_meshed()));
    // Node 1 accepted node 0's MEET on a connection whose local address is ip(1).
    assert_eq!(net.nodes[1].topology().myself().ip, Some(ip(1)));
    assert!(net
        .events
        .iter()
        .any(|(i, e)| *i == 1 && *e == Output::Notice(Notice::MyIpChanged(ip(1)))));
    let conf = String::from_utf8(net.persisted[1].clone().unwrap()).unwrap();
    assert!(
        conf.lines()
            .any(|l| l.contains("myself") && l.contains("127.0.0.2:7001@17001")),
        "{conf}"
    );
    // Node 0 got PINGs too once its IP was known? It never received a MEET, and its first
    // PING arrived with its IP unknown: learned from that PING (§7.3).
    assert_eq!(net.nodes[0].topology().myself().ip, Some(ip(0)));
}

#[test]
fn announce_ip_wins_over_the_local_address() {
    let announced: IpAddr = "10.9.9.9".parse().unwrap();
    let mk = |i: usize| ClusterConfig {
        announce_ip: (i == 1).then_some(announced),
        ..common::config(i, NT)
    };
    let nodes = (0..2)
        .map(|i| ClusterNode::new(mk(i), common::CAPS, common::T0, 7 + i as u64, None).unwrap())
        .collect();
    let mut net = Net::from_nodes(nodes);
    net.meet(0, 1);
    net.run_for(3_000);
    assert_eq!(net.nodes[1].topology().myself().ip, Some(announced));
    assert!(!net
        .events
        .iter()
        .any(|(i, e)| *i == 1 && matches!(e, Output::Notice(Notice::MyIpChanged(_)))));
}

#[test]
fn routing_through_the_node_matches_the_captures() {
    let mut node = load("stable", 22001);
    // The cluster state starts fail; a primary becomes ok after CLUSTER_WRITABLE_DELAY (§10).
    let t0 = Millis(1_796_060_450_000);
    let mut client = ClientState::new(false, false);
    let spec = lookup(b"get").unwrap();
    let early = node.route(spec, &[&b"GET"[..], b"foo"], &client, &NoKeys);
    assert_eq!(
        early.unwrap_err().to_resp(),
        b"-CLUSTERDOWN The cluster is down\r\n"
    );
    for k in 1..=30 {
        node.handle_timeout(Millis(t0.0 + 100 * k));
    }
    assert!(node.cluster_state_ok());
    let r = node.route(spec, &[&b"GET"[..], b"foo"], &client, &NoKeys);
    assert_eq!(r.unwrap_err().to_resp(), captured("errors/moved-get.resp"));
    let d = node.dispatch_client_command(
        &mut client,
        &[&b"SPUBLISH"[..], b"shard-news", b"x"],
        &NoKeys,
    );
    let Dispatch::Reject(e) = d else {
        panic!("{d:?}")
    };
    assert_eq!(e.to_resp(), captured("errors/spublish-moved.resp"));
    // A key of my own slots is served here.
    let d = node.dispatch_client_command(&mut client, &[&b"GET"[..], b"hello"], &TestKeysPresence);
    assert!(
        matches!(d, Dispatch::Execute { slot: Some(s), .. } if s.get() == 866),
        "{d:?}"
    );
}

/// Key presence for routing: every key exists.
struct TestKeysPresence;

impl ferrocluster_command::KeyPresence for TestKeysPresence {
    fn key_exists(&self, _db: usize, _key: &[u8]) -> bool {
        true
    }
}

//! View rules not covered by the captures: slot health counts in CLUSTER INFO, endpoint
//! types, TLS ports, announced client IPs (facts sheet §19.1–§19.4).

use ferrocluster_slot::Slot;
use ferrocluster_topology::views::{self, EndpointType, InfoInputs, ViewOptions};
use ferrocluster_topology::{Hostname, Millis, Node, NodeFlags, NodeId, Reply, ShardId, Topology};
use rand_chacha::rand_core::SeedableRng;

fn model() -> (Topology, NodeId, NodeId) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
    let mut t = Topology::fresh(&mut rng, Millis(0));
    let me = *t.myself_id();
    t.myself_mut().ip = Some("10.0.0.1".parse().unwrap());
    t.myself_mut().port = 7000;
    t.myself_mut().tls_port = 8000;
    t.myself_mut().bus_port = 17000;
    t.myself_mut().hostname = Some(Hostname::new("me.example").unwrap());
    t.myself_mut().client_ipv4 = Some("192.0.2.1".parse().unwrap());
    let other = NodeId::random(&mut rng);
    let mut n = Node::new(other, ShardId::random(&mut rng), Millis(0));
    n.flags = NodeFlags::PRIMARY | NodeFlags::PFAIL;
    n.ip = Some("10.0.0.2".parse().unwrap());
    n.port = 7001;
    t.add_node(n).unwrap();
    for s in 0..10 {
        t.set_slot_owner(Slot::new(s).unwrap(), Some(me)).unwrap();
    }
    for s in 10..15 {
        t.set_slot_owner(Slot::new(s).unwrap(), Some(other))
            .unwrap();
    }
    (t, me, other)
}

#[test]
fn info_counts_slots_by_owner_health() {
    let (mut t, _, other) = model();
    let mut inputs = InfoInputs {
        state_ok: false,
        ..Default::default()
    };
    inputs.messages_sent[0] = 3; // ping
    inputs.messages_sent[10] = 1; // publishshard
    inputs.messages_received[7] = 2; // update
    let text = views::cluster_info_text(&t, &inputs);
    let expected = "cluster_state:fail\r\ncluster_slots_assigned:15\r\ncluster_slots_ok:10\r\n\
        cluster_slots_pfail:5\r\ncluster_slots_fail:0\r\ncluster_known_nodes:2\r\ncluster_size:2\r\n\
        cluster_current_epoch:0\r\ncluster_my_epoch:0\r\ncluster_stats_messages_ping_sent:3\r\n\
        cluster_stats_messages_publishshard_sent:1\r\ncluster_stats_messages_sent:4\r\n\
        cluster_stats_messages_update_received:2\r\ncluster_stats_messages_received:2\r\n\
        total_cluster_links_buffer_limit_exceeded:0\r\n";
    assert_eq!(text, expected);
    // FAIL (not PFAIL) counts as fail.
    t.node_mut(&other).unwrap().flags = NodeFlags::PRIMARY | NodeFlags::FAIL;
    assert!(views::cluster_info_text(&t, &inputs).contains("cluster_slots_fail:5\r\n"));
    // RESP3: verbatim txt.
    let r = views::cluster_info(&t, &inputs).to_resp3();
    assert!(r.starts_with(b"=") && r[..12].windows(4).any(|w| w == b"txt:"));
}

#[test]
fn nodes_line_uses_client_ip_tls_port_and_hostname() {
    let (t, me, _) = model();
    let plain = views::cluster_nodes_text(&t, &ViewOptions::default());
    let first = plain.lines().next().unwrap();
    assert_eq!(
        first,
        format!("{me} 192.0.2.1:7000@17000,me.example myself,master - 0 0 0 connected 0-9")
    );
    let tls = views::cluster_nodes_text(
        &t,
        &ViewOptions {
            tls_client: true,
            ..Default::default()
        },
    );
    assert!(tls
        .lines()
        .next()
        .unwrap()
        .contains(" 192.0.2.1:8000@17000,me.example "));
    // IPv6 client: no client-ipv6 announced, so the cluster IP.
    let v6 = views::cluster_nodes_text(
        &t,
        &ViewOptions {
            ipv6_client: true,
            ..Default::default()
        },
    );
    assert!(v6
        .lines()
        .next()
        .unwrap()
        .contains(" 10.0.0.1:7000@17000,me.example "));
    assert!(plain.lines().nth(1).unwrap().contains(" master,fail? - "));
}

#[test]
fn slots_endpoint_types() {
    let (t, me, other) = model();
    let entry = |endpoint| {
        let Reply::Array(runs) = views::cluster_slots(
            &t,
            &ViewOptions {
                endpoint,
                ..Default::default()
            },
        ) else {
            panic!()
        };
        assert_eq!(runs.len(), 2);
        let Reply::Array(run) = &runs[0] else {
            panic!()
        };
        assert_eq!(run[0], Reply::Integer(0));
        assert_eq!(run[1], Reply::Integer(9));
        run[2].clone()
    };
    assert_eq!(
        entry(EndpointType::Ip),
        Reply::Array(vec![
            Reply::bulk("192.0.2.1"),
            Reply::Integer(7000),
            Reply::bulk(me.as_str()),
            Reply::Map(vec![(Reply::bulk("hostname"), Reply::bulk("me.example"))]),
        ])
    );
    assert_eq!(
        entry(EndpointType::Hostname),
        Reply::Array(vec![
            Reply::bulk("me.example"),
            Reply::Integer(7000),
            Reply::bulk(me.as_str()),
            Reply::Map(vec![(Reply::bulk("ip"), Reply::bulk("192.0.2.1"))]),
        ])
    );
    let Reply::Array(u) = entry(EndpointType::Unknown) else {
        panic!()
    };
    assert_eq!(u[0], Reply::Null);
    // Hostname mode without a hostname: "?" (§19.2).
    let Reply::Array(runs) = views::cluster_slots(
        &t,
        &ViewOptions {
            endpoint: EndpointType::Hostname,
            ..Default::default()
        },
    ) else {
        panic!()
    };
    let Reply::Array(run) = &runs[1] else {
        panic!()
    };
    let Reply::Array(node) = &run[2] else {
        panic!()
    };
    assert_eq!(node[0], Reply::bulk("?"));
    assert_eq!(node[2], Reply::bulk(other.as_str()));
}

#[test]
fn shards_show_tls_port_hostname_and_health() {
    let (mut t, me, _) = model();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(10);
    let r = NodeId::random(&mut rng);
    let mut n = Node::new(r, t.myself().shard_id, Millis(0));
    n.port = 7002;
    t.add_node(n).unwrap();
    t.set_primary(&r, me).unwrap();
    let Reply::Array(shards) = views::cluster_shards(&t, &ViewOptions::default()) else {
        panic!()
    };
    assert_eq!(shards.len(), 2);
    let Reply::Map(shard) = &shards[0] else {
        panic!()
    };
    assert_eq!(
        shard[0].1,
        Reply::Array(vec![Reply::Integer(0), Reply::Integer(9)])
    );
    let Reply::Array(nodes) = &shard[1].1 else {
        panic!()
    };
    let Reply::Map(mine) = &nodes[0] else {
        panic!()
    };
    let keys: Vec<_> = mine.iter().map(|(k, _)| k.clone()).collect();
    let want: Vec<Reply> = [
        "id",
        "port",
        "tls-port",
        "ip",
        "endpoint",
        "hostname",
        "role",
        "replication-offset",
        "health",
    ]
    .iter()
    .map(Reply::bulk)
    .collect();
    assert_eq!(keys, want);
    let Reply::Map(replica) = &nodes[1] else {
        panic!()
    };
    assert_eq!(replica.last().unwrap().1, Reply::bulk("loading"));
    assert_eq!(replica[replica.len() - 3].1, Reply::bulk("replica"));
    // REPLICAS of myself lists it; of a replica it is an error.
    let Reply::Array(lines) = views::cluster_replicas(&t, me.as_str(), &ViewOptions::default())
    else {
        panic!()
    };
    assert_eq!(lines.len(), 1);
    assert_eq!(
        views::cluster_replicas(&t, r.as_str(), &ViewOptions::default()),
        Reply::Error("ERR The specified node is not a master".into())
    );
    assert_eq!(
        views::cluster_replicas(&t, "nope", &ViewOptions::default()),
        Reply::Error("ERR Unknown node nope".into())
    );
}

/// Issue 16 item 3: after a failover the failed old primary, still first in its shard, owns
/// nothing; the shard's slots are the new primary's and the old one is listed with health
/// `fail` (Valkey 8+ `clusterGetPrimaryFromShard`: the first member that is not FAIL).
#[test]
fn shards_after_a_failover_show_the_new_primarys_slots() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
    let mut t = Topology::fresh(&mut rng, Millis(0));
    let me = *t.myself_id();
    for s in 5461..16384 {
        t.set_slot_owner(Slot::new(s).unwrap(), Some(me)).unwrap();
    }
    let shard = ShardId::random(&mut rng);
    let (old, new) = (NodeId::random(&mut rng), NodeId::random(&mut rng));
    for (id, flags) in [
        (old, NodeFlags::PRIMARY | NodeFlags::FAIL),
        (new, NodeFlags::PRIMARY),
    ] {
        let mut n = Node::new(id, shard, Millis(0));
        n.flags = flags;
        n.ip = Some("10.0.0.9".parse().unwrap());
        n.port = 7009;
        t.add_node(n).unwrap();
    }
    for s in 0..5461 {
        t.set_slot_owner(Slot::new(s).unwrap(), Some(new)).unwrap();
    }
    let Reply::Array(shards) = views::cluster_shards(&t, &ViewOptions::default()) else {
        panic!()
    };
    let entry = shards
        .iter()
        .find_map(|s| match s {
            Reply::Map(m) if m[1].1.to_resp2().windows(40).any(|w| w == old.as_bytes()) => Some(m),
            _ => None,
        })
        .expect("the failed-over shard is listed");
    assert_eq!(
        entry[0].1,
        Reply::Array(vec![Reply::Integer(0), Reply::Integer(5460)])
    );
    let Reply::Array(nodes) = &entry[1].1 else {
        panic!()
    };
    let Reply::Map(first) = &nodes[0] else {
        panic!()
    };
    assert_eq!(first[0].1, Reply::bulk(old.as_str()));
    assert_eq!(first.last().unwrap().1, Reply::bulk("fail"));
    // Before its demotion is heard the old primary may still look like a primary, not FAIL
    // (a manual failover): the shard's slots are still the new primary's.
    t.node_mut(&old).unwrap().flags.remove(NodeFlags::FAIL);
    let Reply::Array(shards) = views::cluster_shards(&t, &ViewOptions::default()) else {
        panic!()
    };
    assert!(shards.iter().any(|s| matches!(s, Reply::Map(m)
        if m[0].1 == Reply::Array(vec![Reply::Integer(0), Reply::Integer(5460)]))));
    // Every member FAIL: no slots (nothing is served).
    t.node_mut(&old).unwrap().flags.insert(NodeFlags::FAIL);
    t.node_mut(&new).unwrap().flags.insert(NodeFlags::FAIL);
    let Reply::Array(shards) = views::cluster_shards(&t, &ViewOptions::default()) else {
        panic!()
    };
    assert!(shards
        .iter()
        .any(|s| matches!(s, Reply::Map(m) if m[0].1 == Reply::Array(vec![]))));
}

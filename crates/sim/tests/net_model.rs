//! The network, disk and clock models, tested against a toy engine (no cluster logic): each
//! toy connects to the hosts it is told to, then streams a counting byte pattern on its
//! outbound links every 10 ms and saves its counter as "nodes.conf".

use ferrocluster_sim::{
    host_ip, Engine, EngineOutput, LinkEvent, NetConfig, PartitionedConnect, Sim, BUS_PORT,
};
use ferrocluster_topology::Millis;
use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr};

#[derive(Default)]
struct Toy {
    targets: Vec<(IpAddr, u16)>,
    next_link: u64,
    out: VecDeque<EngineOutput<u64, ()>>,
    outbound: BTreeMap<u64, bool>,
    inbound: BTreeMap<u64, Vec<u8>>,
    closed_inbound: Vec<Vec<u8>>,
    sent: BTreeMap<u64, u64>,
    connect_failed: u64,
    next_tick: Millis,
    restored: Option<Vec<u8>>,
    persist_seq: u64,
    acked: u64,
}

impl Toy {
    fn new(targets: Vec<(IpAddr, u16)>, now: Millis, saved: Option<&[u8]>) -> Toy {
        let mut t = Toy {
            targets,
            next_tick: now,
            restored: saved.map(<[u8]>::to_vec),
            ..Toy::default()
        };
        for (ip, port) in t.targets.clone() {
            let link = t.next_link;
            t.next_link += 1;
            t.outbound.insert(link, false);
            t.out.push_back(EngineOutput::Connect { link, ip, port });
        }
        t
    }
}

fn pattern(offset: u64, len: u64) -> Vec<u8> {
    (offset..offset + len).map(|i| (i % 251) as u8).collect()
}

impl Engine for Toy {
    type Link = u64;
    type Event = ();
    fn handle_accept(&mut self, _peer: IpAddr, _now: Millis) -> u64 {
        let link = self.next_link;
        self.next_link += 1;
        self.inbound.insert(link, Vec::new());
        link
    }
    fn handle_link(&mut self, ev: LinkEvent<u64>, _now: Millis) {
        match ev {
            LinkEvent::Connected(l) => {
                self.outbound.insert(l, true);
            }
            LinkEvent::ConnectFailed(l) => {
                self.outbound.remove(&l);
                self.connect_failed += 1;
            }
            LinkEvent::Closed(l) => {
                self.outbound.remove(&l);
                if let Some(b) = self.inbound.remove(&l) {
                    self.closed_inbound.push(b);
                }
            }
        }
    }
    fn handle_link_bytes(&mut self, link: u64, bytes: &[u8], _now: Millis) {
        if let Some(buf) = self.inbound.get_mut(&link) {
            buf.extend_from_slice(bytes);
        }
    }
    fn handle_timeout(&mut self, now: Millis) {
        if now < self.next_tick {
            return;
        }
        self.next_tick = now.saturating_add_ms(10);
        for (&link, &up) in &self.outbound {
            if up {
                let off = self.sent.entry(link).or_insert(0);
                let len = 50 + (*off % 97);
                self.out.push_back(EngineOutput::Transmit {
                    link,
                    bytes: pattern(*off, len),
                });
                *off += len;
            }
        }
        self.persist_seq += 1;
        self.out.push_back(EngineOutput::Persist {
            seq: self.persist_seq,
            contents: self.persist_seq.to_le_bytes().to_vec(),
        });
    }
    fn handle_persisted(&mut self, seq: u64, _now: Millis) {
        self.acked = self.acked.max(seq);
    }
    fn poll_output(&mut self) -> Option<EngineOutput<u64, ()>> {
        self.out.pop_front()
    }
    fn poll_timeout(&self) -> Option<Millis> {
        Some(self.next_tick)
    }
}

/// Host 0 connects to every other host.
fn star(seed: u64, hosts: usize, net: NetConfig) -> Sim<Toy> {
    Sim::new(
        seed,
        net,
        hosts,
        Box::new(move |i, now, _seed, saved| {
            let targets = if i == 0 {
                (1..hosts).map(|h| (host_ip(h), BUS_PORT)).collect()
            } else {
                vec![]
            };
            Ok(Toy::new(targets, now, saved))
        }),
    )
    .unwrap()
}

fn stream_ok(sim: &Sim<Toy>, host: usize) -> usize {
    let toy = sim.engine(host).expect("host is up");
    let mut checked = 0;
    for buf in toy.inbound.values().chain(toy.closed_inbound.iter()) {
        assert_eq!(
            buf,
            &pattern(0, buf.len() as u64),
            "stream order broken on host {host}"
        );
        checked += buf.len();
    }
    checked
}

#[test]
fn streams_arrive_in_order_despite_latency_splits_and_coalescing() {
    let net = NetConfig {
        min_latency_ms: 1,
        max_latency_ms: 40,
        split_percent: 80,
        coalesce_percent: 50,
        ..NetConfig::default()
    };
    let mut sim = star(11, 4, net);
    sim.run_for(2_000).unwrap();
    for h in 1..4 {
        assert!(stream_ok(&sim, h) > 5_000, "host {h} received too little");
    }
    let sent: u64 = sim.engine(0).unwrap().sent.values().sum();
    assert_eq!(sim.traffic(0).bytes, sent);
}

#[test]
fn same_seed_same_trace_and_different_seed_different_trace() {
    let run = |seed| {
        let mut sim = star(seed, 3, NetConfig::default());
        sim.run_for(500).unwrap();
        sim.block_one_way(0, 2);
        sim.run_for(300).unwrap();
        sim.crash(1);
        sim.run_for(100).unwrap();
        sim.restart(1).unwrap();
        sim.heal();
        sim.run_for(500).unwrap();
        (sim.trace().digest(), sim.trace().events())
    };
    assert_eq!(run(5), run(5));
    assert_ne!(run(5).0, run(6).0);
}

#[test]
fn a_partitioned_direction_delivers_nothing_until_healed() {
    let mut sim = star(3, 2, NetConfig::default());
    sim.run_for(200).unwrap();
    let before = stream_ok(&sim, 1);
    assert!(before > 0);
    sim.block_one_way(0, 1);
    sim.run_for(1_000).unwrap();
    // Only bytes already due before the block may still have landed within one latency.
    let during = stream_ok(&sim, 1);
    sim.run_for(1_000).unwrap();
    assert_eq!(
        stream_ok(&sim, 1),
        during,
        "bytes crossed a blocked direction"
    );
    sim.heal();
    sim.run_for(100).unwrap();
    assert!(
        stream_ok(&sim, 1) > during + 1_000,
        "stalled bytes did not resume"
    );
}

#[test]
fn connects_hang_into_a_black_hole_and_are_refused_by_a_crashed_host() {
    let mut sim = Sim::new(
        1,
        NetConfig::default(),
        2,
        Box::new(|i, now, _s, saved| {
            let targets = if i == 0 {
                vec![
                    (IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)), BUS_PORT),
                    (host_ip(1), BUS_PORT),
                ]
            } else {
                vec![]
            };
            Ok(Toy::new(targets, now, saved))
        }),
    )
    .unwrap();
    sim.crash(1);
    sim.run_for(60_000).unwrap();
    let toy = sim.engine(0).unwrap();
    assert_eq!(toy.connect_failed, 1, "only the crashed host refuses");
    assert_eq!(
        toy.outbound.len(),
        1,
        "the black-hole connect is still pending"
    );
    assert_eq!(toy.outbound.values().filter(|up| **up).count(), 0);
}

#[test]
fn a_connect_across_a_partition_fails_or_hangs_as_configured() {
    for (mode, failed) in [(PartitionedConnect::Fail, 1), (PartitionedConnect::Hang, 0)] {
        let net = NetConfig {
            partitioned_connect: mode,
            ..NetConfig::default()
        };
        let mut sim = star(2, 2, net);
        sim.isolate(1);
        sim.run_for(5_000).unwrap();
        assert_eq!(sim.engine(0).unwrap().connect_failed, failed, "{mode:?}");
        if mode == PartitionedConnect::Hang {
            // Retried SYNs get through once the partition heals.
            sim.heal();
            sim.run_for(3_000).unwrap();
            assert!(stream_ok(&sim, 1) > 0);
        }
    }
}

#[test]
fn a_crash_closes_peer_links_and_restart_reads_the_durable_file() {
    let net = NetConfig {
        min_fsync_ms: 5,
        max_fsync_ms: 30,
        ..NetConfig::default()
    };
    let mut sim = star(9, 2, net);
    sim.run_for(1_000).unwrap();
    assert_eq!(sim.engine(1).unwrap().inbound.len(), 1);
    let acked = sim.engine(0).unwrap().acked;
    let durable = sim.disk(0).contents().map(<[u8]>::to_vec).unwrap();
    let durable_seq = u64::from_le_bytes(durable.clone().try_into().unwrap());
    assert_eq!(
        durable_seq, acked,
        "the disk holds the last acknowledged write"
    );
    let pending = sim.disk(0).pending_len() as u64;
    assert!(sim.crash(0));
    assert!(!sim.is_up(0));
    sim.run_for(NetConfig::default().crash_close_max_ms + 10)
        .unwrap();
    let peer = sim.engine(1).unwrap();
    assert!(
        peer.inbound.is_empty(),
        "the peer's link closed after the crash"
    );
    assert_eq!(peer.closed_inbound.len(), 1);
    assert!(sim.restart(0).unwrap());
    let restored = sim.engine(0).unwrap().restored.clone().unwrap();
    let seq = u64::from_le_bytes(restored.try_into().unwrap());
    // Acknowledged writes survive; unacknowledged ones may or may not.
    assert!(
        seq >= acked && seq <= acked + pending,
        "restored {seq}, acked {acked}, pending {pending}"
    );
}

#[test]
fn a_crash_keeps_or_loses_unacknowledged_writes_depending_on_the_seed() {
    let net = NetConfig {
        min_fsync_ms: 500,
        max_fsync_ms: 500,
        ..NetConfig::default()
    };
    let mut kept = 0;
    let mut lost = 0;
    for seed in 0..40 {
        let mut sim = star(seed, 1, net.clone());
        sim.run_for(1_000).unwrap();
        let acked = sim.engine(0).unwrap().acked;
        sim.crash(0);
        sim.restart(0).unwrap();
        let seq = sim
            .engine(0)
            .unwrap()
            .restored
            .clone()
            .map(|r| u64::from_le_bytes(r.try_into().unwrap()))
            .unwrap_or(0);
        assert!(seq >= acked);
        if seq > acked {
            kept += 1
        } else {
            lost += 1
        }
    }
    assert!(kept > 0 && lost > 0, "kept {kept}, lost {lost}");
}

#[test]
fn break_links_closes_both_ends() {
    let mut sim = star(4, 2, NetConfig::default());
    sim.run_for(300).unwrap();
    sim.break_links(0, 1);
    sim.run_for(100).unwrap();
    assert!(sim.engine(0).unwrap().outbound.is_empty());
    assert!(sim.engine(1).unwrap().inbound.is_empty());
    assert_eq!(sim.open_links(0), 0);
    assert_eq!(sim.open_links(1), 0);
}

#[test]
fn staggered_hosts_start_at_their_delay_and_mesh_like_the_others() {
    use ferrocluster_sim::{preset_cluster_sim_staggered, ClusterSimExt};
    let cfg = ferrocluster_sim::node::ClusterConfig {
        node_timeout_ms: 15_000,
        ..ferrocluster_sim::node::ClusterConfig::default()
    };
    // 4 hosts over 2 s: hosts start at +0, +500, +1000 and +1500 ms.
    let mut s = preset_cluster_sim_staggered(5, 4, cfg, NetConfig::default(), 2_000).unwrap();
    assert!(s.is_up(0) && !s.is_up(1) && !s.is_up(3));
    s.run_for(499).unwrap();
    assert!(!s.is_up(1));
    s.run_for(1).unwrap();
    assert!(s.is_up(1) && !s.is_up(2));
    s.run_for(1_000).unwrap();
    assert!((0..4).all(|h| s.is_up(h)));
    assert_eq!(s.crashes(3), 0, "a delayed start is no crash");
    assert!(s.run_until_mesh(&[0, 1, 2, 3], 10_000).unwrap());
}

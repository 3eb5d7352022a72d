//! Cluster scenarios in the simulator, expected values from the facts sheet
//! (`shared/spec/cluster-bus.md` §7–§10, §16). Each runs from fixed seeds; a failure prints
//! the seed and the command that replays it. The cluster invariants (PFAIL/FAIL soundness,
//! identity, topology) are checked after every step of every scenario.

use ferrocluster_bus::{encode, Body, FullHeader, Gossip, GossipEntry, IpField, Message, NodeName};
use ferrocluster_node::{ClusterConfig, Event};
use ferrocluster_sim::seed::check_seeds;
use ferrocluster_sim::{
    cluster_sim_with, host_ip, ClusterInvariants, ClusterSim, ClusterSimExt, NetConfig, BUS_PORT,
    CLIENT_PORT,
};
use ferrocluster_topology::{Millis, NodeId};
use std::error::Error;
use std::net::{IpAddr, Ipv4Addr};

type Res = Result<(), Box<dyn Error>>;

/// NODE_TIMEOUT used by the scenarios (ms). Small, so runs stay short; every expectation below
/// is written in multiples of it.
const NT: u64 = 2_000;
/// Seeds every scenario runs (override with FERROCLUSTER_SIM_SEED).
const SEEDS: [u64; 3] = [1, 2, 3];

fn config() -> ClusterConfig {
    ClusterConfig {
        node_timeout_ms: NT,
        ..ClusterConfig::default()
    }
}

fn sim_with(seed: u64, hosts: usize, config: ClusterConfig) -> Result<ClusterSim, Box<dyn Error>> {
    Ok(cluster_sim_with(
        seed,
        hosts,
        config,
        NetConfig::default(),
        ClusterInvariants::exhaustive(),
    )?)
}

fn ensure(cond: bool, what: impl FnOnce() -> String) -> Res {
    if cond {
        Ok(())
    } else {
        Err(what().into())
    }
}

/// Meets every host to host 0 and waits for the full mesh.
fn meshed(seed: u64, hosts: usize, config: ClusterConfig) -> Result<ClusterSim, Box<dyn Error>> {
    let mut s = sim_with(seed, hosts, config)?;
    for i in 1..hosts {
        s.meet(i, 0)?;
    }
    let all: Vec<usize> = (0..hosts).collect();
    ensure(s.run_until_mesh(&all, 20 * NT)?, || "no full mesh".into())?;
    Ok(s)
}

/// `primaries` get all slots, `replicas[i]` replicates `primaries[i % len]`; then waits until
/// every node's cluster_state is ok.
fn with_shards(s: &mut ClusterSim, primaries: &[usize], replicas: &[usize]) -> Res {
    s.assign_slots_evenly(primaries)?;
    for (i, &r) in replicas.iter().enumerate() {
        s.replicate(r, primaries[i % primaries.len()])?;
    }
    let n = s.hosts();
    let ok = s.run_until_cond(10 * NT, |s| {
        (0..n).all(|h| s.node(h).is_none_or(|n| n.cluster_state_ok()))
    })?;
    ensure(ok, || "cluster_state never became ok".into())
}

fn info_field(s: &ClusterSim, host: usize, field: &str) -> Option<String> {
    let info = s.node(host)?.cluster_info();
    info.lines()
        .find_map(|l| l.strip_prefix(field).and_then(|r| r.strip_prefix(':')))
        .map(|v| v.trim().to_string())
}

// ----- §7: MEET, discovery, FORGET -----

#[test]
fn six_nodes_met_in_a_chain_converge_to_a_full_mesh() {
    check_seeds(
        "six_nodes_met_in_a_chain_converge_to_a_full_mesh",
        SEEDS,
        |seed| -> Res {
            let mut s = sim_with(seed, 6, config())?;
            for i in 0..5 {
                s.meet(i, i + 1)?;
            }
            let all: Vec<usize> = (0..6).collect();
            ensure(s.run_until_mesh(&all, 10 * NT)?, || "no full mesh".into())?;
            for h in 0..6 {
                let t = s.node(h).unwrap().topology();
                ensure(t.len() == 6, || {
                    format!("host {h} knows {} nodes, not 6", t.len())
                })?;
                ensure(t.nodes().all(|n| !n.in_handshake()), || {
                    format!("host {h} has handshake nodes")
                })?;
            }
            Ok(())
        },
    );
}

/// A PING gossip entry about node `about` at `ip`, flags PRIMARY.
fn gossip_entry(about: &NodeId, ip: IpAddr) -> GossipEntry {
    GossipEntry {
        name: NodeName::new(*about.as_bytes()),
        ping_sent_secs: 0,
        pong_received_secs: 0,
        ip: IpField::from_text(ip.to_string().as_bytes()).unwrap(),
        port: CLIENT_PORT,
        cport: BUS_PORT,
        flags: ferrocluster_bus::node_flags::PRIMARY,
        pport: 0,
        reserved: Default::default(),
    }
}

#[test]
fn gossip_from_an_unknown_sender_adds_no_node_not_even_in_a_meet() {
    // §7.4 with Redis 7.0's rule (`clusterProcessGossipSection`: no node is created unless the
    // sender is known, "otherwise we risk joining another cluster"): neither a PING nor a MEET
    // from an unknown sender teaches nodes. A MEET creates a handshake node for its sender
    // only. (Valkey 9.1.2 adds a MEET's gossiped nodes: issue 16 item 10, captured in
    // crates/gossip/tests/vectors/meet-gossip/.) A PING from a node named only in such a MEET
    // then changes nothing, although it claims host 0's slots with a larger configEpoch.
    check_seeds(
        "gossip_from_an_unknown_sender_adds_no_node_not_even_in_a_meet",
        SEEDS,
        |seed| -> Res {
            let ghost_ip = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 77));
            let sender = NodeId::parse("0123456789abcdef0123456789abcdef01234567").unwrap();
            let fresh = NodeId::parse("aaaaaaaaaabbbbbbbbbbccccccccccdddddddddd").unwrap();
            let invariants = ClusterInvariants::exhaustive()
                .allow_external_id(fresh, Some((host_ip(9), BUS_PORT)))
                .allow_external_id(sender, Some((ghost_ip, BUS_PORT)));
            let mut s = cluster_sim_with(seed, 2, config(), NetConfig::default(), invariants)?;
            s.meet(1, 0)?;
            ensure(s.run_until_mesh(&[0, 1], 10 * NT)?, || "no mesh".into())?;
            s.add_slot_range(0, 0, 8191)?;
            s.add_slot_range(1, 8192, 16383)?;
            s.run_for(NT)?;
            let header = FullHeader {
                sender: NodeName::new(*sender.as_bytes()),
                port: CLIENT_PORT,
                cport: BUS_PORT,
                flags: ferrocluster_bus::node_flags::PRIMARY,
                ..FullHeader::default()
            };
            let body = |entries| Gossip {
                entries,
                extensions: vec![],
            };
            // 1. A PING from an unknown sender: answered, its gossip ignored.
            let raw = s.raw_connect(ghost_ip, 0);
            let ping = Message::full(
                header.clone(),
                Body::Ping(body(vec![gossip_entry(&fresh, host_ip(9))])),
            );
            s.run_for(20)?;
            s.raw_send(raw, &encode(&ping));
            s.run_for(200)?;
            ensure(!s.raw_received(raw).is_empty(), || {
                "no PONG to an unknown sender's PING".into()
            })?;
            let t = s.node(0).unwrap().topology();
            ensure(t.node(&fresh).is_none(), || {
                "a node was learned from an unknown sender".into()
            })?;
            ensure(t.node(&sender).is_none(), || {
                "the unknown PING sender was added".into()
            })?;
            // 2. A MEET from the same unknown sender: answered, a handshake node is created for
            // its sender, and its gossip is ignored too.
            let raw2 = s.raw_connect(ghost_ip, 0);
            let meet = Message::full(
                header,
                Body::Meet(body(vec![gossip_entry(&fresh, host_ip(9))])),
            );
            s.run_for(20)?;
            s.raw_send(raw2, &encode(&meet));
            s.run_for(200)?;
            ensure(!s.raw_received(raw2).is_empty(), || {
                "no PONG to an unknown sender's MEET".into()
            })?;
            let t = s.node(0).unwrap().topology();
            ensure(t.node(&fresh).is_none(), || {
                "a MEET's gossip entry from an unknown sender was learned".into()
            })?;
            ensure(t.nodes().any(|n| n.in_handshake()), || {
                "no handshake node for the MEET sender".into()
            })?;
            ensure(t.len() == 3, || {
                format!("host 0 knows {} nodes, not 3", t.len())
            })?;
            // 3. The gossiped ID speaks: a PING claiming host 0's slots with a larger
            // configEpoch. Unknown sender: host 0 stays the primary of its slots.
            let mut slots = ferrocluster_slot::SlotSet::new();
            for x in 0..8192 {
                slots.insert(ferrocluster_slot::Slot::new(x).unwrap());
            }
            let claim = FullHeader {
                sender: NodeName::new(*fresh.as_bytes()),
                port: CLIENT_PORT,
                cport: BUS_PORT,
                flags: ferrocluster_bus::node_flags::PRIMARY,
                config_epoch: 1_000,
                current_epoch: 1_000,
                myslots: slots,
                ..FullHeader::default()
            };
            let raw3 = s.raw_connect(host_ip(9), 0);
            s.run_for(20)?;
            s.raw_send(
                raw3,
                &encode(&Message::full(claim, Body::Ping(body(vec![])))),
            );
            s.run_for(500)?;
            let n = s.node(0).unwrap();
            let me = n.topology().myself();
            ensure(me.is_primary() && me.slot_count() == 8192, || {
                format!(
                    "host 0 is {} with {} slots after a PING from an unknown node",
                    me.flags.names(),
                    me.slot_count()
                )
            })?;
            ensure(n.topology().current_epoch.get() < 1_000, || {
                "an unknown sender's currentEpoch was adopted".into()
            })?;
            Ok(())
        },
    );
}

#[test]
fn a_forgotten_node_is_not_readded_while_banned_and_is_readded_after_the_ban() {
    // §16: FORGET bans the ID for cluster-blacklist-ttl (60 s); a banned ID is not re-created
    // from gossip. After the ban, gossip from a node that still knows it re-adds it (§7.4).
    check_seeds(
        "a_forgotten_node_is_not_readded_while_banned_and_is_readded_after_the_ban",
        SEEDS,
        |seed| -> Res {
            let mut s = meshed(seed, 4, config())?;
            // Host 3 is cut off, so it never hears the ban (FORGOTTEN_NODE extension) and
            // still knows host 2 when it comes back.
            s.isolate(3);
            s.run_for(100)?;
            let victim = s.id(2).unwrap();
            let banned_at = s.now();
            s.forget(0, &victim)?;
            ensure(
                s.node(0).unwrap().topology().node(&victim).is_none(),
                || "FORGET kept the node".into(),
            )?;
            let ttl_ms = config().blacklist_ttl_secs * 1000;
            // Until the ban expires host 0 never knows host 2 again, although host 1 gossips
            // about it (until it learns the ban) and host 2 keeps pinging host 0.
            let readded = s.run_until_cond(ttl_ms - 1_000, |s| {
                s.node(0).unwrap().topology().node(&victim).is_some()
            })?;
            ensure(!readded, || {
                format!(
                    "re-added at +{} ms, during the ban",
                    s.now().since(banned_at)
                )
            })?;
            // Host 1 learned the ban from a FORGOTTEN_NODE extension whose TTL is whole
            // seconds rounded up (§16), so its copy may outlive host 0's by up to 1 s plus a
            // delivery; host 3 reconnects once every copy has expired (before, a live copy
            // reaching host 3 would make it forget host 2 too, and nobody would re-add it).
            s.run_until(banned_at.saturating_add_ms(ttl_ms + 2_000))?;
            s.heal();
            let back = s.run_until_cond(10 * NT, |s| {
                s.node(0).unwrap().topology().node(&victim).is_some()
            })?;
            ensure(back, || "not re-added by gossip after the ban".into())?;
            Ok(())
        },
    );
}

#[test]
fn a_meet_to_an_address_that_never_answers_is_dropped_after_the_handshake_timeout() {
    // §7.2 step 1, §1: handshake nodes older than max(NODE_TIMEOUT, 1000) ms are deleted.
    check_seeds(
        "a_meet_to_an_address_that_never_answers_is_dropped_after_the_handshake_timeout",
        SEEDS,
        |seed| -> Res {
            let mut s = sim_with(seed, 1, config())?;
            s.set_record_events(true);
            s.run_for(500)?;
            let t0 = s.now();
            s.meet_addr(0, IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)), CLIENT_PORT)?;
            ensure(s.node(0).unwrap().topology().len() == 2, || {
                "no handshake node".into()
            })?;
            s.run_until(t0.saturating_add_ms(NT))?;
            ensure(s.node(0).unwrap().topology().len() == 2, || {
                "deleted before the timeout".into()
            })?;
            s.run_for(300)?;
            ensure(s.node(0).unwrap().topology().len() == 1, || {
                "not deleted after the timeout".into()
            })?;
            let deleted = s
                .recorded_events()
                .iter()
                .find(|(_, _, e)| matches!(e, Event::NodeDeleted(_)))
                .map(|(at, _, _)| *at);
            let at = deleted.ok_or("no NodeDeleted event")?;
            // The first cron run (every 100 ms) after the age exceeds the timeout.
            ensure(at.since(t0) > NT && at.since(t0) <= NT + 100, || {
                format!(
                    "deleted at +{} ms, expected in (NT, NT + 100]",
                    at.since(t0)
                )
            })?;
            Ok(())
        },
    );
}

// ----- §9: failure detection -----

/// Time at which `observer` first sees `target` with a flag, polling every step.
fn first_seen(
    s: &mut ClusterSim,
    max_ms: u64,
    observers: &[usize],
    target_id: NodeId,
    flag: ferrocluster_topology::NodeFlags,
) -> Result<Option<Millis>, Box<dyn Error>> {
    let obs = observers.to_vec();
    let hit = s.run_until_cond(max_ms, |s| {
        obs.iter().any(|&o| {
            s.node(o)
                .and_then(|n| n.topology().node(&target_id))
                .is_some_and(|n| n.flags.contains(flag))
        })
    })?;
    Ok(hit.then(|| s.now()))
}

#[test]
fn a_dead_primary_goes_pfail_after_node_timeout_then_fail_with_a_majority() {
    use ferrocluster_topology::NodeFlags;
    check_seeds(
        "a_dead_primary_goes_pfail_after_node_timeout_then_fail_with_a_majority",
        SEEDS,
        |seed| -> Res {
            // 3 primaries (0, 1, 2), replicas 3, 4, 5, slot-less primary 6.
            let mut s = meshed(seed, 7, config())?;
            with_shards(&mut s, &[0, 1, 2], &[3, 4, 5])?;
            s.run_for(2 * NT)?;
            let dead = s.id(0).unwrap();
            let t0 = s.now();
            s.crash(0);
            let others: Vec<usize> = (1..7).collect();
            let pfail = first_seen(&mut s, 3 * NT, &others, dead, NodeFlags::PFAIL)?
                .ok_or("never PFAIL")?;
            // Last data from it arrived at most one ping interval (NT/2) before the crash; PFAIL
            // needs more than NT of silence with a ping pending (§9.1).
            let since = pfail.since(t0);
            ensure(since > NT / 2 && since <= NT + NT / 2 + 200, || {
                format!("PFAIL at +{since} ms")
            })?;
            let fail =
                first_seen(&mut s, 3 * NT, &others, dead, NodeFlags::FAIL)?.ok_or("never FAIL")?;
            ensure(fail >= pfail, || "FAIL before PFAIL".into())?;
            // The FAIL broadcast reaches every live node.
            let all = s.run_until_cond(NT, |s| {
                (1..7).all(|o| {
                    s.node(o)
                        .unwrap()
                        .topology()
                        .node(&dead)
                        .is_some_and(|n| n.is_fail())
                })
            })?;
            ensure(all, || "FAIL did not spread to every node".into())?;
            Ok(())
        },
    );
}

#[test]
fn with_three_shards_and_two_primaries_down_fail_cannot_be_reached() {
    use ferrocluster_topology::NodeFlags;
    check_seeds(
        "with_three_shards_and_two_primaries_down_fail_cannot_be_reached",
        SEEDS,
        |seed| -> Res {
            // Replicas (3, 4, 5) and the slot-less primary 6 see the dead primaries PFAIL, but
            // their reports do not count (§9.2: only voting primaries report); the one live voting
            // primary is short of the quorum 2 of 3.
            let mut s = meshed(seed, 7, config())?;
            with_shards(&mut s, &[0, 1, 2], &[3, 4, 5])?;
            s.run_for(2 * NT)?;
            let (d0, d1) = (s.id(0).unwrap(), s.id(1).unwrap());
            s.crash(0);
            s.crash(1);
            let live = [2usize, 3, 4, 5, 6];
            let pfail = first_seen(&mut s, 3 * NT, &live, d0, NodeFlags::PFAIL)?;
            ensure(pfail.is_some(), || "never PFAIL".into())?;
            let failed = s.run_until_cond(10 * NT, |s| {
                live.iter().any(|&o| {
                    let t = s.node(o).unwrap().topology();
                    [d0, d1]
                        .iter()
                        .any(|d| t.node(d).is_some_and(|n| n.is_fail()))
                })
            })?;
            ensure(!failed, || {
                "FAIL reached without a quorum of voting primaries".into()
            })?;
            let now = s.now();
            for d in [d0, d1] {
                let reports = s
                    .node(2)
                    .unwrap()
                    .failure_report_count(&d, now)
                    .unwrap_or(0);
                ensure(reports == 0, || {
                    format!("host 2 counts {reports} reports from non-voting nodes")
                })?;
                let seen = live.iter().all(|&o| {
                    s.node(o)
                        .unwrap()
                        .topology()
                        .node(&d)
                        .is_some_and(|n| n.is_pfail())
                });
                ensure(seen, || {
                    "not every live node sees the dead primaries PFAIL".into()
                })?;
            }
            Ok(())
        },
    );
}

/// Isolates `victim` until the others see it FAIL, heals, and returns (time FAIL was first seen
/// by `observer`, time it cleared there).
fn fail_then_heal(
    s: &mut ClusterSim,
    victim: usize,
    observer: usize,
) -> Result<(Millis, Millis, Millis), Box<dyn Error>> {
    use ferrocluster_topology::NodeFlags;
    let id = s.id(victim).unwrap();
    s.isolate(victim);
    let failed = first_seen(s, 5 * NT, &[observer], id, NodeFlags::FAIL)?.ok_or("never FAIL")?;
    s.heal();
    let healed = s.now();
    let cleared = s.run_until_cond(5 * NT, |s| {
        s.node(observer)
            .unwrap()
            .topology()
            .node(&id)
            .is_some_and(|n| !n.is_fail() && !n.is_pfail())
    })?;
    ensure(cleared, || "FAIL never cleared".into())?;
    Ok((failed, healed, s.now()))
}

#[test]
fn fail_on_a_replica_or_slotless_primary_clears_at_the_first_pong() {
    check_seeds(
        "fail_on_a_replica_or_slotless_primary_clears_at_the_first_pong",
        SEEDS,
        |seed| -> Res {
            // §9.4: a replica or a primary without slots is cleared as soon as a PONG arrives.
            for victim in [3usize, 4] {
                let mut s = meshed(seed, 5, config())?;
                with_shards(&mut s, &[0, 1, 2], &[3])?; // host 3: replica, host 4: slot-less primary
                s.run_for(NT)?;
                let (failed, healed, cleared) = fail_then_heal(&mut s, victim, 1)?;
                // Cleared by the first PONG after the links come back: well before the 2 × NT undo
                // time a voting primary would need.
                let after = cleared.since(healed);
                ensure(after < NT, || {
                    format!("host {victim}: cleared {after} ms after heal")
                })?;
                ensure(cleared.since(failed) < 2 * NT + NT, || {
                    "cleared too late".into()
                })?;
            }
            Ok(())
        },
    );
}

#[test]
fn fail_on_a_voting_primary_clears_only_after_the_undo_time() {
    check_seeds(
        "fail_on_a_voting_primary_clears_only_after_the_undo_time",
        SEEDS,
        |seed| -> Res {
            // §9.4: a voting primary's FAIL is cleared by a PONG only when now − fail_time >
            // 2 × NODE_TIMEOUT (no replica took its slots: no failover exists here).
            let mut s = meshed(seed, 4, config())?;
            with_shards(&mut s, &[0, 1, 2, 3], &[])?;
            s.run_for(NT)?;
            let id = s.id(0).unwrap();
            let (_failed, _healed, cleared) = fail_then_heal(&mut s, 0, 1)?;
            let fail_time = s
                .node(1)
                .unwrap()
                .topology()
                .node(&id)
                .and_then(|n| n.fail_time)
                .ok_or("no fail_time")?;
            let after = cleared.since(fail_time);
            ensure(after > 2 * NT, || {
                format!(
                    "cleared {after} ms after fail_time, undo time is {}",
                    2 * NT
                )
            })?;
            // One ping interval (NT/2) plus a cron tick and a round trip after the undo time at most.
            ensure(after <= 2 * NT + NT / 2 + 300, || {
                format!("cleared {after} ms after fail_time")
            })?;
            ensure(
                s.node(1)
                    .unwrap()
                    .topology()
                    .node(&id)
                    .unwrap()
                    .slot_count()
                    > 0,
                || "slots moved".into(),
            )?;
            Ok(())
        },
    );
}

// ----- §10: cluster state -----

#[test]
fn a_minority_partition_turns_cluster_state_to_fail_after_node_timeout() {
    check_seeds(
        "a_minority_partition_turns_cluster_state_to_fail_after_node_timeout",
        SEEDS,
        |seed| -> Res {
            for full_coverage in [true, false] {
                let cfg = ClusterConfig {
                    require_full_coverage: full_coverage,
                    ..config()
                };
                let mut s = meshed(seed, 5, cfg)?;
                with_shards(&mut s, &[0, 1, 2, 3, 4], &[])?;
                s.run_for(NT)?;
                let t0 = s.now();
                s.split(&[&[0, 1], &[2, 3, 4]]);
                // The minority (2 of 5 voting primaries reachable < quorum 3) goes fail once it
                // sees the others PFAIL, i.e. after NODE_TIMEOUT (§10 step 4).
                let minority_fail = s.run_until_cond(4 * NT, |s| {
                    (0..2).all(|h| !s.node(h).unwrap().cluster_state_ok())
                })?;
                ensure(minority_fail, || "minority still ok".into())?;
                let since = s.now().since(t0);
                ensure(since > NT / 2, || {
                    format!("minority failed {since} ms after the split")
                })?;
                s.run_for(4 * NT)?;
                for h in 2..5 {
                    let ok = s.node(h).unwrap().cluster_state_ok();
                    // The majority marks hosts 0 and 1 FAIL; their slots are then served by FAIL
                    // nodes: fail with full coverage required, ok without (§10 step 2).
                    ensure(ok != full_coverage, || {
                        format!(
                            "host {h}: state ok={ok} with require-full-coverage {full_coverage}"
                        )
                    })?;
                }
                for h in 0..2 {
                    ensure(!s.node(h).unwrap().cluster_state_ok(), || {
                        format!("minority host {h} ok")
                    })?;
                }
            }
            Ok(())
        },
    );
}

#[test]
fn without_full_coverage_unassigned_slots_leave_cluster_state_ok() {
    check_seeds(
        "without_full_coverage_unassigned_slots_leave_cluster_state_ok",
        SEEDS,
        |seed| -> Res {
            for full_coverage in [false, true] {
                let cfg = ClusterConfig {
                    require_full_coverage: full_coverage,
                    ..config()
                };
                let mut s = meshed(seed, 3, cfg)?;
                // Slots 0..=9999 only; 10000..=16383 have no owner.
                s.add_slot_range(0, 0, 4999)?;
                s.add_slot_range(1, 5000, 9999)?;
                s.run_for(5 * NT)?;
                for h in 0..3 {
                    let ok = s.node(h).unwrap().cluster_state_ok();
                    ensure(ok != full_coverage, || {
                        format!("host {h}: ok={ok} with require-full-coverage {full_coverage}")
                    })?;
                    let assigned = info_field(&s, h, "cluster_slots_assigned");
                    ensure(assigned.as_deref() == Some("10000"), || {
                        format!("assigned {assigned:?}")
                    })?;
                }
            }
            Ok(())
        },
    );
}

#[test]
fn slots_in_pfail_are_reported_with_cluster_state_ok() {
    check_seeds(
        "slots_in_pfail_are_reported_with_cluster_state_ok",
        SEEDS,
        |seed| -> Res {
            // Host 1 alone loses host 0: PFAIL in its view, but the others keep hearing from host 0
            // and report it healthy, so FAIL is never reached; PFAIL does not break coverage (§10
            // step 2) and 4 of 5 voting primaries are reachable.
            let mut s = meshed(seed, 5, config())?;
            with_shards(&mut s, &[0, 1, 2, 3, 4], &[])?;
            s.run_for(NT)?;
            s.block_two_way(0, 1);
            let seen = s.run_until_cond(4 * NT, |s| {
                info_field(s, 1, "cluster_slots_pfail")
                    .and_then(|v| v.parse::<u64>().ok())
                    .is_some_and(|v| v > 0)
            })?;
            ensure(seen, || "host 1 never reported PFAIL slots".into())?;
            s.run_for(4 * NT)?;
            let pfail = info_field(&s, 1, "cluster_slots_pfail").unwrap_or_default();
            let state = info_field(&s, 1, "cluster_state").unwrap_or_default();
            ensure(
                pfail == (16384 / 5).to_string() || pfail == (16384 / 5 + 1).to_string(),
                || format!("cluster_slots_pfail:{pfail}"),
            )?;
            ensure(state == "ok", || {
                format!("cluster_state:{state} with only PFAIL slots")
            })?;
            ensure(
                info_field(&s, 1, "cluster_slots_fail").as_deref() == Some("0"),
                || "slots in FAIL".into(),
            )?;
            Ok(())
        },
    );
}

// ----- §2: malformed bytes -----

#[test]
fn malformed_bytes_close_that_link_and_nothing_else_changes() {
    check_seeds(
        "malformed_bytes_close_that_link_and_nothing_else_changes",
        SEEDS,
        |seed| -> Res {
            let mut s = meshed(seed, 3, config())?;
            with_shards(&mut s, &[0, 1, 2], &[])?;
            s.run_for(NT)?;
            s.set_record_events(true);
            let snapshot = |s: &ClusterSim| {
                let t = s.node(0).unwrap().topology();
                let nodes: Vec<_> = t
                    .nodes()
                    .map(|n| {
                        (
                            *n.id(),
                            n.flags,
                            n.config_epoch,
                            n.slots().clone(),
                            n.ip,
                            n.bus_port,
                        )
                    })
                    .collect();
                (
                    nodes,
                    t.current_epoch,
                    s.node(0).unwrap().cluster_state_ok(),
                )
            };
            let before = snapshot(&s);
            // Garbage on host 1's stream to host 0: bad signature, framing lost (§2 step 2).
            let used = s.inject_bytes(1, 0, b"GARBAGE!GARBAGE!GARBAGE!");
            ensure(used >= 1, || "no link from host 1 to host 0".into())?;
            s.run_for(50)?;
            let lost = s
                .recorded_events()
                .iter()
                .filter(|(_, h, e)| *h == 0 && matches!(e, Event::FramingLost { .. }))
                .count();
            ensure(lost == used, || {
                format!("{lost} links closed for {used} corrupted streams")
            })?;
            ensure(snapshot(&s) == before, || {
                "state changed after malformed bytes".into()
            })?;
            // A well-framed message with protocol version 2 is dropped, the link stays (§2).
            let mut frame = encode(&Message::full(
                FullHeader::default(),
                Body::Ping(Gossip::default()),
            ));
            frame[8..10].copy_from_slice(&2u16.to_be_bytes());
            let links_before = s.open_links(2);
            s.inject_bytes(2, 0, &frame);
            s.run_for(50)?;
            let dropped = s
                .recorded_events()
                .iter()
                .any(|(_, h, e)| *h == 0 && matches!(e, Event::FrameDropped { .. }));
            ensure(dropped, || {
                "bad-version frame not reported as dropped".into()
            })?;
            ensure(s.open_links(2) == links_before, || {
                "a dropped frame closed a link".into()
            })?;
            ensure(snapshot(&s) == before, || {
                "state changed after a dropped frame".into()
            })?;
            // The cluster heals the closed link by itself.
            s.run_for(2 * NT)?;
            ensure(s.full_mesh(&[0, 1, 2]), || "mesh not restored".into())?;
            Ok(())
        },
    );
}

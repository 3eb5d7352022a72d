//! Failover scenarios in the simulator (issue 5), expected values from the facts sheet
//! (`shared/spec/cluster-bus.md` §11–§14). Every scenario runs on a [`World`]: the cluster
//! bus plus simulated replication, write pauses and a writing client. The cluster invariants
//! and "one FAILOVER_AUTH_ACK per voter and epoch" are checked after every step; a failure
//! prints the seed and the command that replays it.

use ferrocluster_node::{ClusterConfig, EpochEvent, Notice, Output, Reply};
use ferrocluster_sim::failover::{agreed_owner, all_ok_with_owner, host_of};
use ferrocluster_sim::seed::check_seeds;
use ferrocluster_sim::sniff::{TYPE_AUTH_ACK, TYPE_AUTH_REQUEST};
use ferrocluster_sim::{
    build_world, build_world_blocked, check_epochs_converged, Answer, ClusterInvariants,
    ClusterSimExt, Layout, NetConfig, World, WriteRefusal,
};
use ferrocluster_slot::Slot;
use ferrocluster_topology::NodeId;
use std::error::Error;

type Res = Result<(), Box<dyn Error>>;

/// NODE_TIMEOUT of the scenarios (ms); expectations are written in multiples of it.
const NT: u64 = 2_000;
/// Seeds every scenario runs (override with FERROCLUSTER_SIM_SEED).
const SEEDS: [u64; 3] = [1, 2, 3];

fn config() -> ClusterConfig {
    ClusterConfig {
        node_timeout_ms: NT,
        ..ClusterConfig::default()
    }
}

fn ensure(cond: bool, what: impl FnOnce() -> String) -> Res {
    if cond {
        Ok(())
    } else {
        Err(what().into())
    }
}

fn world(seed: u64, cfg: ClusterConfig, layout: &Layout) -> Result<World, Box<dyn Error>> {
    Ok(build_world(
        seed,
        cfg,
        NetConfig::default(),
        layout,
        ClusterInvariants::new(),
    )?)
}

/// Primaries 0, 1, 2 (slot ranges in that order) and the given `(replica, primary)` pairs.
fn layout(hosts: usize, replicas: &[(usize, usize)]) -> Layout {
    Layout {
        hosts,
        primaries: vec![0, 1, 2],
        replicas: replicas.to_vec(),
    }
}

fn id(w: &World, h: usize) -> NodeId {
    w.sim().id(h).expect("host is up")
}

/// configEpoch of `target` as `viewer` sees it (a replica reports its primary's, §11.7).
fn epoch_of(w: &World, viewer: usize, target: &NodeId) -> Option<u64> {
    let t = w.node(viewer)?.topology();
    t.node(target).map(|n| t.reported_config_epoch(n).0)
}

fn primary_of(w: &World, h: usize) -> Option<NodeId> {
    let me = w.node(h)?.topology().myself();
    me.is_replica().then_some(me.primary).flatten()
}

/// The command was accepted: `+OK` at once, or a change whose reply waits for its persist.
fn reply_ok(r: Option<Answer>) -> Res {
    match r {
        Some(Answer::Now(Reply::Simple(s))) if s == "OK" => Ok(()),
        Some(Answer::Later(_)) => Ok(()),
        other => Err(format!("expected +OK, got {other:?}").into()),
    }
}

/// The owner of `slot` in the views of `viewers` if they all agree (host index).
fn owner_in(w: &World, viewers: &[usize], slot: Slot) -> Option<usize> {
    let mut owner = None;
    for &v in viewers {
        let o = *w.node(v)?.topology().slot_owner(slot)?;
        match owner {
            None => owner = Some(o),
            Some(x) if x != o => return None,
            Some(_) => {}
        }
    }
    owner.and_then(|o| host_of(w.sim(), &o))
}

/// Runs until [`check_epochs_converged`] holds for `hosts` (at most 5 × NODE_TIMEOUT), then
/// checks that no primary holds keys of a slot it does not own; the last disagreement
/// otherwise.
fn converge(w: &mut World, hosts: &[usize]) -> Res {
    let ok = w.run_until_cond(5 * NT, |w| check_epochs_converged(w.sim(), hosts).is_ok())?;
    match check_epochs_converged(w.sim(), hosts).and_then(|()| w.check_no_stale_keys()) {
        Ok(()) if ok => Ok(()),
        Ok(()) => Err("converged only after the deadline".into()),
        Err(e) => Err(format!("no convergence within 5 × NODE_TIMEOUT: {e}").into()),
    }
}

fn update_frames(w: &World) -> u64 {
    w.sim().total_traffic().frames_by_type[7]
}

// ----- §12: automatic failover -----

#[test]
fn a_dead_primary_is_replaced_by_its_replica_with_the_larger_offset() {
    check_seeds(
        "a_dead_primary_is_replaced_by_its_replica_with_the_larger_offset",
        SEEDS,
        |seed| -> Res {
            // Primaries 0, 1, 2; hosts 3 and 4 replicate 0. Host 4's data link breaks while
            // writes keep going, so host 3 ends with the larger offset: rank 0 (§12.2.1), its
            // election starts 1000 ms before host 4's (§12.2) and wins.
            let l = layout(5, &[(3, 0), (4, 0)]);
            let mut w = world(seed, config(), &l)?;
            let slot = l.first_slot(0);
            w.start_writer(vec![slot], 10);
            w.run_for(NT / 2)?;
            w.block_data(4, true);
            w.run_for(NT / 2)?;
            w.stop_writer();
            w.run_for(100)?;
            ensure(w.offset(3) > w.offset(4), || {
                format!("offsets {} vs {}", w.offset(3), w.offset(4))
            })?;
            ensure(w.offset(3) == w.offset(0), || {
                "host 3 did not catch up".into()
            })?;
            w.run_for(NT)?; // the replicas' offsets reach everyone through PINGs
            w.crash(0);
            let t0 = w.now();
            let done = w.run_until_cond(10 * NT, |w| agreed_owner(w.sim(), slot) == Some(3))?;
            ensure(done, || {
                format!("no agreed new owner: {:?}", agreed_owner(w.sim(), slot))
            })?;
            let took = w.now().since(t0);
            let e3 = w.node(3).unwrap().topology().myself().config_epoch.0;
            for v in [1usize, 2, 3, 4] {
                let t = w.node(v).unwrap().topology();
                for n in t.nodes().filter(|n| n.is_primary() && *n.id() != id(&w, 3)) {
                    ensure(n.config_epoch.0 < e3, || {
                        format!(
                            "host {v} sees {} with configEpoch {} ≥ the winner's {e3}",
                            n.id(),
                            n.config_epoch.0
                        )
                    })?;
                }
            }
            // The loser follows the winner (§11.2: its primary lost its last slot).
            let id3 = id(&w, 3);
            let follows = w.run_until_cond(4 * NT, |w| primary_of(w, 4) == Some(id3))?;
            ensure(follows, || "host 4 does not replicate the winner".into())?;
            ensure(
                w.run_until_cond(4 * NT, |w| all_ok_with_owner(w.sim(), slot, 3))?,
                || "cluster_state not ok everywhere".into(),
            )?;
            // The old primary returns with its stale claim. It cannot hear the winner (whose
            // own claims would also demote it, §11.2), and a replica's messages never move
            // slots (§11.7): only an UPDATE from a node that sees the stale claim (§11.3)
            // can turn it into a replica of the winner.
            let updates = update_frames(&w);
            w.block_data(4, false);
            w.sim_mut().block_two_way(0, 3);
            w.restart(0)?;
            let demoted = w.run_until_cond(4 * NT, |w| primary_of(w, 0) == Some(id3))?;
            ensure(demoted, || {
                "the old primary did not become a replica".into()
            })?;
            ensure(update_frames(&w) > updates, || "no UPDATE was sent".into())?;
            w.sim_mut().heal();
            converge(&mut w, &[0, 1, 2, 3, 4])?;
            println!("seed {seed}: failover in {took} ms, winner configEpoch {e3}");
            Ok(())
        },
    );
}

/// Issue 37: a replica restarted from its nodes.conf syncs with its primary again and can
/// take over when the primary dies, with every acknowledged write. The simulated hosts act
/// on their node's `ReplicateFrom` / `BecamePrimary` outputs alone, as a real host: before
/// the node's cron re-pointed a replica whose host does not replicate (Valkey `clusterCron`),
/// a restarted replica never synced again and could not be elected (never synced).
#[test]
fn a_restarted_replica_syncs_again_and_takes_over_when_its_primary_dies() {
    check_seeds(
        "a_restarted_replica_syncs_again_and_takes_over_when_its_primary_dies",
        SEEDS,
        |seed| -> Res {
            let l = layout(4, &[(3, 0)]);
            let mut w = world(seed, config(), &l)?;
            let slot = l.first_slot(0);
            w.start_writer(vec![slot], 10);
            w.run_for(NT / 2)?;
            ensure(w.synced(3), || "host 3 never synced".into())?;
            w.crash(3);
            w.run_for(NT / 4)?;
            w.restart(3)?;
            let synced = w.run_until_cond(10 * NT, |w| w.synced(3) && w.follows(3) == Some(0))?;
            ensure(synced, || {
                format!(
                    "the restarted replica never synced again: follows {:?}, link {:?}",
                    w.follows(3),
                    w.link(3)
                )
            })?;
            w.run_for(NT / 2)?;
            w.stop_writer();
            let caught_up = w.run_until_cond(4 * NT, |w| w.offset(3) == w.offset(0))?;
            ensure(caught_up, || {
                format!("offsets {} vs {}", w.offset(3), w.offset(0))
            })?;
            w.run_for(NT)?; // its offset reaches everyone through PINGs
            w.crash(0);
            let done = w.run_until_cond(10 * NT, |w| agreed_owner(w.sim(), slot) == Some(3))?;
            ensure(done, || {
                format!("no failover to host 3: {:?}", agreed_owner(w.sim(), slot))
            })?;
            let acked: Vec<u64> = w.acked().iter().map(|a| a.id).collect();
            ensure(!acked.is_empty(), || "no write was acknowledged".into())?;
            for id in acked {
                ensure(w.has_write(3, id), || {
                    format!("acknowledged write {id} lost")
                })?;
            }
            Ok(())
        },
    );
}

#[test]
fn partition_story_the_last_replica_wins_and_the_first_cannot_reclaim() {
    check_seeds(
        "partition_story_the_last_replica_wins_and_the_first_cannot_reclaim",
        SEEDS,
        |seed| -> Res {
            // The failover story of the Redis Cluster specification ("Practical example of
            // configuration epoch usefulness during partitions"): primary 0 has replicas
            // 3, 4, 5 and dies; replica A wins; A is partitioned away and replica B wins;
            // A's partition heals while B's starts; the last replica C wins with a configEpoch
            // above B's, and A, although back with a primary's claim (configEpoch below B's),
            // never gets its slots back (§11.2: the higher configEpoch wins). A writer keeps
            // the current owner's offset growing, so C (which follows B) ranks before A.
            let l = layout(6, &[(3, 0), (4, 0), (5, 0)]);
            let mut w = world(seed, config(), &l)?;
            let slot = l.first_slot(0);
            w.set_vantage(1);
            w.start_writer(vec![slot], 10);
            w.run_for(NT)?;
            w.crash(0);
            let majority_of = |except: &[usize]| -> Vec<usize> {
                (1..6).filter(|h| !except.contains(h)).collect()
            };
            let all = majority_of(&[]);
            let won =
                w.run_until_cond(10 * NT, |w| owner_in(w, &all, slot).is_some_and(|o| o != 0))?;
            ensure(won, || "no first failover".into())?;
            let a = owner_in(&w, &all, slot).unwrap();
            let ea = w.node(a).unwrap().topology().myself().config_epoch.0;
            w.run_for(NT)?;
            w.sim_mut().isolate(a);
            let rest = majority_of(&[a]);
            let won = w.run_until_cond(15 * NT, |w| {
                owner_in(w, &rest, slot).is_some_and(|o| o != a && o != 0)
            })?;
            ensure(won, || "no second failover".into())?;
            let b = owner_in(&w, &rest, slot).unwrap();
            let eb = epoch_of(&w, 1, &id(&w, b)).unwrap();
            ensure(eb > ea, || format!("B's configEpoch {eb} ≤ A's {ea}"))?;
            w.run_for(NT)?;
            let c = [3usize, 4, 5]
                .into_iter()
                .find(|&h| h != a && h != b)
                .unwrap();
            w.sim_mut().heal();
            w.sim_mut().isolate(b);
            let id_a = id(&w, a);
            let others = majority_of(&[b]);
            let mut reclaimed = None;
            let won = w.run_until_cond(15 * NT, |w| {
                for v in [1usize, 2] {
                    if w.node(v).unwrap().topology().slot_owner(slot) == Some(&id_a) {
                        reclaimed = Some((v, w.now()));
                    }
                }
                owner_in(w, &others, slot) == Some(c)
            })?;
            ensure(reclaimed.is_none(), || {
                format!("A (host {a}) got its slots back: {reclaimed:?}")
            })?;
            ensure(won, || {
                format!(
                    "C (host {c}) did not win; owner in the majority: {:?}",
                    owner_in(&w, &others, slot)
                )
            })?;
            let ec = epoch_of(&w, 1, &id(&w, c)).unwrap();
            ensure(ec > eb, || format!("C's configEpoch {ec} ≤ B's {eb}"))?;
            w.run_for(2 * NT)?;
            ensure(w.node(a).unwrap().topology().myself().is_replica(), || {
                "A is still a primary".into()
            })?;
            ensure(owner_in(&w, &others, slot) == Some(c), || {
                "C lost the slots".into()
            })?;
            println!("seed {seed}: A={a} ({ea}) B={b} ({eb}) C={c} ({ec})");
            Ok(())
        },
    );
}

// ----- §12.3: one vote per epoch, across crashes -----

/// Where the voter crashes.
#[derive(Debug, Clone, Copy)]
enum CrashPoint {
    /// After the request arrived and the vote was written, before the fsync acknowledged it
    /// (the write may or may not survive: a seeded choice).
    BeforeDurable,
    /// Right after its FAILOVER_AUTH_ACK left.
    AfterAck,
}

fn vote_crash(seed: u64, point: CrashPoint) -> Res {
    // Slow fsyncs so the window between the vote and its durability is wide.
    let net = NetConfig {
        min_fsync_ms: 5,
        max_fsync_ms: 40,
        ..NetConfig::default()
    };
    let l = Layout::uniform(3, 1);
    let mut w = build_world(seed, config(), net, &l, ClusterInvariants::new())?;
    w.run_for(NT)?;
    let slot = l.first_slot(0);
    w.crash(0);
    let frames_before = w.sim().auth_frames().len();
    // Voter: host 1. Crash it at the chosen point of its first vote, restart it 200 ms later;
    // repeat for the next election, three times at most.
    let mut crashes = 0;
    while crashes < 3 {
        let mark = w.sim().auth_frames().len().max(frames_before);
        let hit = w.run_until_cond(10 * NT, |w| {
            let new = &w.sim().auth_frames()[mark..];
            match point {
                CrashPoint::BeforeDurable => {
                    new.iter()
                        .any(|f| f.msg_type == TYPE_AUTH_REQUEST && f.to == 1)
                        && w.sim().disk(1).pending_len() > 0
                }
                CrashPoint::AfterAck => new
                    .iter()
                    .any(|f| f.msg_type == TYPE_AUTH_ACK && f.from == 1),
            }
        })?;
        if !hit {
            break;
        }
        w.crash(1);
        crashes += 1;
        w.run_for(200)?;
        w.restart(1)?;
        if agreed_owner(w.sim(), slot) == Some(3) {
            break;
        }
    }
    ensure(crashes > 0, || {
        format!("{point:?}: the crash point was never reached")
    })?;
    let done = w.run_until_cond(20 * NT, |w| all_ok_with_owner(w.sim(), slot, 3))?;
    ensure(done, || {
        format!("{point:?}: no failover after {crashes} voter crashes")
    })?;
    // The restarted voter remembers the epoch it voted in (persisted before the ACK).
    let acks: Vec<u64> = w
        .sim()
        .auth_frames()
        .iter()
        .filter(|f| f.msg_type == TYPE_AUTH_ACK && f.from == 1)
        .map(|f| f.current_epoch)
        .collect();
    let last_vote = w.node(1).unwrap().topology().last_vote_epoch.0;
    if let Some(&max) = acks.iter().max() {
        ensure(last_vote >= max, || {
            format!("voter's lastVoteEpoch {last_vote} below an epoch it acknowledged ({max})")
        })?;
    }
    converge(&mut w, &[1, 2, 3, 4, 5])?;
    Ok(())
}

#[test]
fn a_voter_crashing_before_its_vote_is_durable_never_votes_twice_in_an_epoch() {
    check_seeds(
        "a_voter_crashing_before_its_vote_is_durable_never_votes_twice_in_an_epoch",
        SEEDS,
        |seed| vote_crash(seed, CrashPoint::BeforeDurable),
    );
}

#[test]
fn a_voter_crashing_after_its_ack_never_votes_twice_in_an_epoch() {
    check_seeds(
        "a_voter_crashing_after_its_ack_never_votes_twice_in_an_epoch",
        SEEDS,
        |seed| vote_crash(seed, CrashPoint::AfterAck),
    );
}

// ----- §11.5: configEpoch collision -----

#[test]
fn primaries_forced_to_one_config_epoch_end_with_distinct_ones() {
    check_seeds(
        "primaries_forced_to_one_config_epoch_end_with_distinct_ones",
        SEEDS,
        |seed| -> Res {
            for hosts in [2usize, 4] {
                let sim =
                    ferrocluster_sim::cluster_sim(seed, hosts, config(), NetConfig::default())?;
                let mut w = World::new(sim)?;
                for h in 0..hosts {
                    reply_ok(w.cluster_command(h, &["SET-CONFIG-EPOCH", "5"])?)?;
                }
                for h in 1..hosts {
                    w.sim_mut().meet(h, 0)?;
                }
                let all: Vec<usize> = (0..hosts).collect();
                let meshed = w.run_until_cond(20 * NT, |w| w.sim().full_mesh(&all))?;
                ensure(meshed, || "no mesh".into())?;
                w.sim_mut().assign_slots_evenly(&all)?;
                let distinct =
                    w.run_until_cond(20 * NT, |w| check_epochs_converged(w.sim(), &all).is_ok())?;
                ensure(distinct, || {
                    format!(
                        "{hosts} hosts: {:?}",
                        check_epochs_converged(w.sim(), &all).err()
                    )
                })?;
                // §11.5: the node with the largest ID never moves.
                let largest = (0..hosts).max_by_key(|&h| id(&w, h)).unwrap();
                let e = w.node(largest).unwrap().topology().myself().config_epoch.0;
                ensure(e == 5, || {
                    format!("{hosts} hosts: the largest ID moved to configEpoch {e}")
                })?;
                if hosts == 2 {
                    // The other one bumped once: currentEpoch 5 + 1.
                    let other = 1 - largest;
                    let e = w.node(other).unwrap().topology().myself().config_epoch.0;
                    ensure(e == 6, || {
                        format!("the smaller ID took configEpoch {e}, not 6")
                    })?;
                    let bumped = w.events().iter().any(|(_, h, e)| {
                        *h == other
                            && matches!(e, Output::Notice(Notice::ConfigEpochBumped(c)) if c.0 == 6)
                    });
                    ensure(bumped, || "no ConfigEpochBumped(6) event".into())?;
                }
            }
            Ok(())
        },
    );
}

// ----- §12.2: data age -----

#[test]
fn a_replica_that_never_synced_promotes_only_with_validity_factor_zero() {
    check_seeds(
        "a_replica_that_never_synced_promotes_only_with_validity_factor_zero",
        SEEDS,
        |seed| -> Res {
            for factor in [10u32, 0] {
                let cfg = ClusterConfig {
                    replica_validity_factor: factor,
                    ..config()
                };
                let l = Layout::uniform(3, 1);
                let mut w = build_world_blocked(
                    seed,
                    cfg,
                    NetConfig::default(),
                    &l,
                    ClusterInvariants::new(),
                    &[3],
                )?;
                w.run_for(NT)?;
                ensure(!w.synced(3), || "host 3 synced".into())?;
                let slot = l.first_slot(0);
                w.crash(0);
                let promoted =
                    w.run_until_cond(10 * NT, |w| agreed_owner(w.sim(), slot) == Some(3))?;
                if factor == 0 {
                    ensure(promoted, || "factor 0: no promotion".into())?;
                    converge(&mut w, &[1, 2, 3, 4, 5])?;
                } else {
                    ensure(!promoted, || {
                        "a never-synced replica promoted with the default validity factor".into()
                    })?;
                    let why = w.events().iter().any(|(_, h, e)| {
                        *h == 3
                            && matches!(
                                e,
                                Output::Notice(Notice::Epoch(EpochEvent::CantFailover(
                                    ferrocluster_epoch::CantFailover::DataAge
                                )))
                            )
                    });
                    ensure(why, || {
                        "no CantFailover(DataAge) event on the replica".into()
                    })?;
                    ensure(w.node(3).unwrap().topology().myself().is_replica(), || {
                        "host 3 is not a replica".into()
                    })?;
                }
            }
            Ok(())
        },
    );
}

/// Issue 16 item 11 (BUG-07): the bus link primary → replica is cut, the primary bumps its
/// configEpoch (CLUSTER BUMPEPOCH: everyone else learns it, the replica does not), then the
/// primary dies. The replica's requests claim the old configEpoch and are refused
/// (`StaleSlotClaim`); a voter's UPDATE tells it the current one, and it is promoted within
/// two election attempts (auth retry 4 × NODE_TIMEOUT), with every slot served again.
#[test]
fn a_replica_that_missed_its_primarys_epoch_bump_is_told_and_elected() {
    check_seeds(
        "a_replica_that_missed_its_primarys_epoch_bump_is_told_and_elected",
        SEEDS,
        |seed| -> Res {
            let l = Layout::uniform(3, 1);
            let mut w = world(seed, config(), &l)?;
            w.run_for(NT)?;
            let p = id(&w, 0);
            w.sim_mut().block_one_way(0, 3);
            w.run_for(200)?;
            let before = epoch_of(&w, 1, &p).unwrap_or(0);
            // A bump is saved: the reply waits for its persist.
            let Some(Answer::Later(req)) = w.cluster_command(0, &["BUMPEPOCH"])? else {
                return Err("BUMPEPOCH was not deferred for its persist".into());
            };
            let bumped = w.run_until_cond(NT, |w| {
                (1..3).all(|v| epoch_of(w, v, &p).is_some_and(|e| e > before))
            })?;
            match w.reply(req) {
                Some(Reply::Simple(s)) if s.starts_with("BUMPED") => {}
                other => return Err(format!("BUMPEPOCH: {other:?}").into()),
            }
            ensure(bumped, || {
                "the other primaries never learned the bump".into()
            })?;
            ensure(epoch_of(&w, 3, &p) == Some(before), || {
                "the replica learned the bump: the case is not built".into()
            })?;
            w.crash(0);
            let t0 = w.now();
            let promoted = w.run_until_cond(12 * NT, |w| {
                w.node(3)
                    .is_some_and(|n| n.topology().myself().is_primary())
            })?;
            let denied = w.events().iter().any(|(at, _, e)| {
                *at >= t0
                    && matches!(
                        e,
                        Output::Notice(Notice::Epoch(EpochEvent::VoteDenied {
                            reason: ferrocluster_node::epoch::VoteDenied::StaleSlotClaim,
                            ..
                        }))
                    )
            });
            ensure(promoted, || {
                format!(
                    "the replica was not promoted within 12 × NODE_TIMEOUT (stale-claim denials: {denied})"
                )
            })?;
            ensure(denied, || "no vote was refused for the stale claim".into())?;
            println!(
                "seed {seed}: promoted {} ms after the crash",
                w.now().since(t0)
            );
            w.sim_mut().heal();
            let slot = l.first_slot(0);
            let ok = w.run_until_cond(5 * NT, |w| all_ok_with_owner(w.sim(), slot, 3))?;
            ensure(ok, || {
                "the shard's slots are not served by the new primary".into()
            })?;
            converge(&mut w, &[1, 2, 3, 4, 5])
        },
    );
}

// ----- §13: manual failover -----

#[test]
fn a_default_manual_failover_loses_no_acknowledged_write() {
    check_seeds(
        "a_default_manual_failover_loses_no_acknowledged_write",
        SEEDS,
        |seed| -> Res {
            let l = Layout::uniform(3, 1);
            let mut w = world(seed, config(), &l)?;
            let slot = l.first_slot(0);
            w.start_writer(vec![slot], 5);
            w.run_for(NT)?;
            let t0 = w.now();
            reply_ok(w.cluster_command(3, &["FAILOVER"])?)?;
            let done = w.run_until_cond(5_000, |w| agreed_owner(w.sim(), slot) == Some(3))?;
            ensure(done, || {
                "no switch within the manual failover timeout".into()
            })?;
            let took = w.now().since(t0);
            w.run_for(NT)?;
            w.stop_writer();
            w.run_for(500)?;
            // The primary paused (§13.2) and every write it acknowledged is on the new
            // primary: the replica waited for the paused offset before the election (§13.1).
            let paused = w
                .events()
                .iter()
                .any(|(_, h, e)| *h == 0 && matches!(e, Output::PauseWrites { .. }));
            ensure(paused, || "the primary never paused writes".into())?;
            let refused = w.refused().get(&WriteRefusal::Paused).copied().unwrap_or(0);
            ensure(refused > 0, || "no write met the pause".into())?;
            let by_old: Vec<_> = w.acked().iter().filter(|a| a.host == 0).copied().collect();
            ensure(!by_old.is_empty(), || "no writes before the switch".into())?;
            let lost: Vec<u64> = by_old
                .iter()
                .filter(|a| !w.has_write(3, a.id))
                .map(|a| a.id)
                .collect();
            ensure(lost.is_empty(), || {
                format!(
                    "{} acknowledged writes missing on the new primary: {lost:?}",
                    lost.len()
                )
            })?;
            ensure(w.acked().iter().any(|a| a.host == 3), || {
                "the new primary took no writes".into()
            })?;
            ensure(primary_of(&w, 0) == Some(id(&w, 3)), || {
                "the old primary does not follow the new one".into()
            })?;
            converge(&mut w, &[0, 1, 2, 3, 4, 5])?;
            println!(
                "seed {seed}: manual failover in {took} ms, {} writes",
                by_old.len()
            );
            Ok(())
        },
    );
}

/// Issue 16 item 1: a burst of 100 acknowledged writes right before CLUSTER FAILOVER. The
/// primary's node hears of them only on its host's next turn, after the MFSTART may have
/// arrived (the reference server), and still the replica is promoted with every write.
#[test]
fn a_default_manual_failover_right_after_a_burst_of_writes_promotes_and_loses_nothing() {
    check_seeds(
        "a_default_manual_failover_right_after_a_burst_of_writes_promotes_and_loses_nothing",
        SEEDS,
        |seed| -> Res {
            let l = Layout::uniform(3, 1);
            let mut w = world(seed, config(), &l)?;
            let slot = l.first_slot(0);
            w.run_for(NT)?;
            let mut burst = Vec::new();
            for _ in 0..100 {
                match w.write(slot)? {
                    Ok(a) => burst.push(a),
                    Err(why) => return Err(format!("write refused: {why:?}").into()),
                }
            }
            reply_ok(w.cluster_command(3, &["FAILOVER"])?)?;
            let done = w.run_until_cond(5_000, |w| agreed_owner(w.sim(), slot) == Some(3))?;
            let timed_out = w.events().iter().any(|(_, _, e)| {
                matches!(
                    e,
                    Output::Notice(Notice::Epoch(EpochEvent::ManualFailoverTimedOut))
                )
            });
            ensure(done && !timed_out, || {
                format!("no switch within the manual failover timeout (timed out: {timed_out})")
            })?;
            let lost: Vec<u64> = burst
                .iter()
                .filter(|a| !w.has_write(3, a.id))
                .map(|a| a.id)
                .collect();
            ensure(lost.is_empty(), || {
                format!("acknowledged writes missing on the new primary: {lost:?}")
            })?;
            converge(&mut w, &[0, 1, 2, 3, 4, 5])
        },
    );
}

#[test]
fn a_forced_manual_failover_replaces_a_dead_primary_before_fail_is_detected() {
    check_seeds(
        "a_forced_manual_failover_replaces_a_dead_primary_before_fail_is_detected",
        SEEDS,
        |seed| -> Res {
            // FORCE: the election starts at once with FORCEACK; voters grant it although the
            // primary is not FAIL (§12.3 rule 4, §13.1).
            let l = Layout::uniform(3, 1);
            let mut w = world(seed, config(), &l)?;
            let slot = l.first_slot(0);
            w.run_for(NT)?;
            w.crash(0);
            let t0 = w.now();
            reply_ok(w.cluster_command(3, &["FAILOVER", "FORCE"])?)?;
            let done =
                w.run_until_cond(NT, |w| w.node(3).unwrap().topology().myself().is_primary())?;
            ensure(done, || "no promotion within NODE_TIMEOUT".into())?;
            let fail_seen = w
                .events()
                .iter()
                .any(|(at, _, e)| *at >= t0 && matches!(e, Output::Notice(Notice::NodeFail(_))));
            ensure(!fail_seen, || {
                "FAIL was detected before the forced promotion".into()
            })?;
            let conv = w.run_until_cond(5 * NT, |w| all_ok_with_owner(w.sim(), slot, 3))?;
            ensure(conv, || "no convergence".into())?;
            converge(&mut w, &[1, 2, 3, 4, 5])
        },
    );
}

#[test]
fn a_takeover_promotes_without_a_majority_and_wins_after_the_heal() {
    check_seeds(
        "a_takeover_promotes_without_a_majority_and_wins_after_the_heal",
        SEEDS,
        |seed| -> Res {
            // TAKEOVER: configEpoch bump without agreement and immediate take-over, no vote
            // (§13.1, §11.6), even cut off from every other node.
            let l = Layout::uniform(3, 1);
            let mut w = world(seed, config(), &l)?;
            let slot = l.first_slot(0);
            w.run_for(NT)?;
            w.sim_mut().isolate(3);
            w.run_for(100)?;
            let requests = w.sim().auth_frames().len();
            let max_before = (0..6)
                .filter_map(|h| w.node(h))
                .flat_map(|n| {
                    n.topology()
                        .nodes()
                        .map(|x| x.config_epoch.0)
                        .collect::<Vec<_>>()
                })
                .max()
                .unwrap_or(0);
            reply_ok(w.cluster_command(3, &["FAILOVER", "TAKEOVER"])?)?;
            w.run_for(100)?;
            let me = w.node(3).unwrap().topology().myself();
            ensure(me.is_primary() && me.slot_count() > 0, || {
                "TAKEOVER did not promote at once".into()
            })?;
            ensure(me.config_epoch.0 > max_before, || {
                format!("configEpoch {} not above {max_before}", me.config_epoch.0)
            })?;
            ensure(w.sim().auth_frames().len() == requests, || {
                "TAKEOVER asked for votes".into()
            })?;
            w.run_for(NT)?;
            w.sim_mut().heal();
            let conv = w.run_until_cond(10 * NT, |w| all_ok_with_owner(w.sim(), slot, 3))?;
            ensure(conv, || "the take-over did not win after the heal".into())?;
            let id3 = id(&w, 3);
            ensure(
                w.run_until_cond(4 * NT, |w| primary_of(w, 0) == Some(id3))?,
                || "the old primary does not follow the new one".into(),
            )?;
            converge(&mut w, &[0, 1, 2, 3, 4, 5])?;
            Ok(())
        },
    );
}

// ----- §14: replica migration -----

fn migration(seed: u64, barrier: u32) -> Result<Option<usize>, Box<dyn Error>> {
    // Primary 0 has replicas 3 and 4; 1 has 5; 2 has 6. Primary 1 dies, 5 takes over and
    // is orphaned (no replica, slots, MIGRATE_TO as a promoted node).
    let cfg = ClusterConfig {
        migration_barrier: barrier,
        ..config()
    };
    let l = layout(7, &[(3, 0), (4, 0), (5, 1), (6, 2)]);
    let mut w = world(seed, cfg, &l)?;
    w.run_for(NT)?;
    let slot = l.first_slot(1);
    w.crash(1);
    let promoted = w.run_until_cond(10 * NT, |w| agreed_owner(w.sim(), slot) == Some(5))?;
    ensure(promoted, || "host 5 was not promoted".into())?;
    let t_promoted = w.now();
    let id5 = id(&w, 5);
    let (id3, id4) = (id(&w, 3), id(&w, 4));
    let mut early = None;
    let migrated = w.run_until_cond(10_000 + 2 * NT, |w| {
        let m = [3usize, 4]
            .into_iter()
            .filter(|&r| primary_of(w, r) == Some(id5))
            .count();
        if m > 0 && w.now().since(t_promoted) < 5_000 {
            early = Some(w.now().since(t_promoted));
        }
        m > 0
    })?;
    ensure(early.is_none(), || {
        format!("migrated {early:?} ms after the orphaning, before the 5000 ms delay")
    })?;
    if barrier >= 2 {
        ensure(!migrated, || {
            format!("a replica migrated with barrier {barrier} and 2 replicas")
        })?;
        converge(&mut w, &[0, 2, 3, 4, 5, 6])?;
        return Ok(None);
    }
    ensure(migrated, || "no replica migrated".into())?;
    // Let it settle: still exactly one moved, and primary 0 keeps one (never below the
    // barrier).
    w.run_for(3 * NT + 5_000)?;
    let moved: Vec<usize> = [3usize, 4]
        .into_iter()
        .filter(|&r| primary_of(&w, r) == Some(id5))
        .collect();
    ensure(moved.len() == 1, || format!("replicas moved: {moved:?}"))?;
    let expected = if id3.as_bytes() < id4.as_bytes() {
        3
    } else {
        4
    };
    ensure(moved[0] == expected, || {
        format!(
            "host {} moved, the smallest ID is host {expected}",
            moved[0]
        )
    })?;
    let id0 = id(&w, 0);
    let stayed = 7 - moved[0];
    ensure(primary_of(&w, stayed) == Some(id0), || {
        "primary 0 lost both replicas".into()
    })?;
    converge(&mut w, &[0, 2, 3, 4, 5, 6])?;
    Ok(Some(moved[0]))
}

#[test]
fn after_a_failover_exactly_one_replica_of_the_richest_primary_migrates_to_the_orphan() {
    check_seeds(
        "after_a_failover_exactly_one_replica_of_the_richest_primary_migrates_to_the_orphan",
        SEEDS,
        |seed| -> Res {
            migration(seed, 1)?;
            Ok(())
        },
    );
}

#[test]
fn no_replica_migrates_below_the_migration_barrier() {
    check_seeds(
        "no_replica_migrates_below_the_migration_barrier",
        SEEDS,
        |seed| -> Res {
            migration(seed, 2)?;
            Ok(())
        },
    );
}

// ----- §18.3: every nodes.conf a node saves must load again -----

#[test]
fn every_host_restarts_from_the_nodes_conf_it_saved_right_after_setup() {
    // A crash right after the cluster formed: each host must load the nodes.conf it made
    // durable (§18.3 makes a replica whose shard-id differs from its primary's a fatal
    // error, so a saved file must never hold one). 4 primaries × 2 replicas; every host is
    // crashed and restarted in turn, 50 ms apart.
    check_seeds(
        "every_host_restarts_from_the_nodes_conf_it_saved_right_after_setup",
        0..8,
        |seed| -> Res {
            let l = Layout::uniform(4, 2);
            let mut w = world(seed, config(), &l)?;
            for h in 0..l.hosts {
                let conf = w.sim().disk(h).contents().unwrap_or_default();
                check_shard_ids(&String::from_utf8_lossy(conf))
                    .map_err(|e| format!("host {h}'s durable nodes.conf: {e}"))?;
            }
            for h in 0..l.hosts {
                w.crash(h);
                w.run_for(50)?;
                w.restart(h)?;
            }
            converge(&mut w, &(0..l.hosts).collect::<Vec<_>>())?;
            Ok(())
        },
    );
}

/// §18.3: in a nodes.conf, every replica's `shard-id` equals its primary's.
fn check_shard_ids(conf: &str) -> Res {
    let shard_of = |line: &str| -> Option<String> {
        let addr = line.split_whitespace().nth(1)?;
        addr.split(',')
            .find_map(|f| f.strip_prefix("shard-id="))
            .map(str::to_string)
    };
    let lines: Vec<&str> = conf.lines().filter(|l| !l.starts_with("vars")).collect();
    for line in &lines {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 || !f[2].contains("slave") {
            continue;
        }
        let primary = f[3];
        let Some(pline) = lines.iter().find(|l| l.starts_with(primary)) else {
            continue;
        };
        let (mine, theirs) = (shard_of(line), shard_of(pline));
        if mine != theirs {
            return Err(format!(
                "replica {} has shard-id {mine:?}, its primary {primary} has {theirs:?}{}",
                f[0],
                if mine.as_deref() == Some(primary) {
                    " (the replica's shard-id is its primary's node ID: the placeholder shard \
                     of a node learned from gossip, copied before the primary's SHARDID \
                     extension arrived)"
                } else {
                    ""
                }
            )
            .into());
        }
    }
    Ok(())
}

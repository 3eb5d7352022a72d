//! The simulator's hosts replicate with the shipped `ferrocluster_dataplane::Replication` and
//! real RDB bytes (issue 18, "One copy"): a full sync carries the keyspace, a manual failover
//! under continuous writes completes on the real stream (issue 16 item 1: the offsets the
//! nodes compare are the engine's byte offsets, pings and SELECTs included, so a difference
//! between the simulator and the shipped stream cannot hide), and after it the old primary
//! and its sibling resync partially through the new primary's replid2.

use ferrocluster_node::{ClusterConfig, EpochEvent, Notice, Output};
use ferrocluster_sim::failover::agreed_owner;
use ferrocluster_sim::seed::check_seeds;
use ferrocluster_sim::{
    build_preset_world, build_world_blocked, ClusterInvariants, Layout, NetConfig, World,
};
use ferrocluster_slot::SlotSet;
use std::error::Error;

type Res = Result<(), Box<dyn Error>>;

const NT: u64 = 2_000;

fn ensure(cond: bool, what: impl FnOnce() -> String) -> Res {
    if cond {
        Ok(())
    } else {
        Err(what().into())
    }
}

/// A cluster of `l` with NODE_TIMEOUT [`NT`], `blocked` hosts' replication blocked.
fn world(seed: u64, l: &Layout, blocked: &[usize]) -> Result<World, Box<dyn Error>> {
    let cfg = ClusterConfig {
        node_timeout_ms: NT,
        ..ClusterConfig::default()
    };
    let inv = ClusterInvariants::new();
    Ok(build_world_blocked(
        seed,
        cfg,
        NetConfig::default(),
        l,
        inv,
        blocked,
    )?)
}

fn primary_host(w: &World, h: usize) -> Option<usize> {
    let me = w.node(h)?.topology().myself();
    let p = me.primary.filter(|_| me.is_replica())?;
    (0..w.sim().hosts()).find(|&x| w.last_id(x) == Some(p))
}

/// Primaries 0, 1, 2; replicas 3 and 6 of 0, 4 of 1, 5 of 2. Host 6's replication is
/// blocked until 200 writes are in, so its first sync is a full one with those keys.
#[test]
fn a_manual_failover_under_continuous_writes_completes_on_the_real_stream() {
    check_seeds(
        "a_manual_failover_under_continuous_writes_completes_on_the_real_stream",
        [1, 2],
        |seed| -> Res {
            let l = Layout {
                hosts: 7,
                primaries: vec![0, 1, 2],
                replicas: vec![(3, 0), (4, 1), (5, 2), (6, 0)],
            };
            let mut w = world(seed, &l, &[6])?;
            let slot = l.first_slot(0);
            for _ in 0..200 {
                w.write(slot)?
                    .map_err(|e| format!("write refused: {e:?}"))?;
            }
            // A full sync: the RDB of host 0's keyspace, loaded by host 6.
            w.block_data(6, false);
            let synced = w.run_until_cond(3_000, |w| w.synced(6) && w.offset(6) == w.offset(0))?;
            ensure(synced, || format!("host 6 not synced: {:?}", w.link(6)))?;
            ensure(w.sync_counts(6) == (1, 0), || {
                format!("host 6 syncs (full, partial): {:?}", w.sync_counts(6))
            })?;
            let mut only = SlotSet::new();
            only.insert(slot);
            ensure(w.count_keys_in(6, &only) == 200, || {
                format!("host 6 loaded {} keys", w.count_keys_in(6, &only))
            })?;
            for a in w.acked() {
                ensure(w.has_write(6, a.id), || {
                    format!("write {} not loaded", a.id)
                })?;
            }
            // Continuous writes, then CLUSTER FAILOVER on host 3.
            w.start_writer(vec![slot], 5);
            w.run_for(NT)?;
            let (old_replid, _) = w.replids(0).ok_or("host 0 down")?;
            let before = [w.sync_counts(0), w.sync_counts(6)];
            let t0 = w.now();
            w.cluster_command(3, &["FAILOVER"])?;
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
            let took = w.now().since(t0);
            w.run_for(NT)?;
            w.stop_writer();
            w.run_for(1_000)?;
            // Every write host 0 acknowledged is on the new primary, applied once.
            let by_old: Vec<u64> = w
                .acked()
                .iter()
                .filter(|a| a.host == 0)
                .map(|a| a.id)
                .collect();
            let lost: Vec<u64> = by_old
                .iter()
                .copied()
                .filter(|&id| !w.has_write(3, id))
                .collect();
            ensure(lost.is_empty(), || {
                format!(
                    "{} acknowledged writes missing on host 3: {lost:?}",
                    lost.len()
                )
            })?;
            ensure(w.acked().iter().any(|a| a.host == 3), || {
                "the new primary took no writes".into()
            })?;
            // The new primary keeps the old history as replid2; the old primary and the
            // sibling follow it with a partial resync and hold every write.
            let (_, replid2) = w.replids(3).ok_or("host 3 down")?;
            ensure(replid2 == old_replid, || {
                format!("host 3 replid2 {replid2}, host 0 had {old_replid}")
            })?;
            for (i, h) in [0usize, 6].into_iter().enumerate() {
                ensure(primary_host(&w, h) == Some(3) && w.synced(h), || {
                    format!("host {h} does not follow host 3: {:?}", w.link(h))
                })?;
                ensure(w.offset(h) == w.offset(3), || {
                    format!("host {h} at {}, host 3 at {}", w.offset(h), w.offset(3))
                })?;
                let (full, partial) = w.sync_counts(h);
                ensure(full == before[i].0 && partial > before[i].1, || {
                    format!(
                        "host {h} syncs (full, partial) {:?} before, {:?} after",
                        before[i],
                        w.sync_counts(h)
                    )
                })?;
                for a in w.acked() {
                    ensure(w.has_write(h, a.id), || {
                        format!("write {} missing on host {h}", a.id)
                    })?;
                }
            }
            println!(
                "seed {seed}: manual failover in {took} ms, {} writes by the old primary",
                by_old.len()
            );
            Ok(())
        },
    );
}

/// A replica that crashes under writes restarts from its data with the replication ID and
/// offset it saved, and resyncs partially from its primary's backlog (Valkey
/// `loadDataFromDisk` + `PSYNC <replid> <offset + 1>`), ending with every write applied once.
#[test]
fn a_restarted_replica_resumes_with_a_partial_resync() {
    check_seeds(
        "a_restarted_replica_resumes_with_a_partial_resync",
        [1, 2],
        |seed| -> Res {
            let l = Layout::uniform(3, 1);
            let mut w = world(seed, &l, &[])?;
            let slot = l.first_slot(0);
            w.start_writer(vec![slot], 5);
            w.run_for(500)?;
            let before = w.sync_counts(3);
            w.crash(3);
            w.run_for(500)?;
            w.restart(3)?;
            w.run_for(1_500)?;
            w.stop_writer();
            w.run_for(500)?;
            ensure(w.synced(3) && w.offset(3) == w.offset(0), || {
                format!(
                    "host 3 at {} ({:?}), host 0 at {}",
                    w.offset(3),
                    w.link(3),
                    w.offset(0)
                )
            })?;
            let (full, partial) = w.sync_counts(3);
            ensure(full == before.0 && partial == before.1 + 1, || {
                format!(
                    "host 3 syncs (full, partial) {before:?} before, {:?} after",
                    (full, partial)
                )
            })?;
            ensure(w.acked().len() > 300, || {
                format!("{} writes", w.acked().len())
            })?;
            for a in w.acked() {
                ensure(w.has_write(3, a.id), || {
                    format!("write {} missing on host 3", a.id)
                })?;
            }
            Ok(())
        },
    );
}

/// A preset world whose hosts start one after another ([`build_preset_world`], the large
/// cluster scenarios' builder): every host but host 0 starts after the [`World`] was made,
/// so its replication engine starts with the simulator's delayed start. Every replica
/// settles with one full sync, and follows its primary's writes.
#[test]
fn replicas_that_start_late_in_a_staggered_preset_world_sync() {
    check_seeds(
        "replicas_that_start_late_in_a_staggered_preset_world_sync",
        [1, 2],
        |seed| -> Res {
            let cfg = ClusterConfig {
                node_timeout_ms: NT,
                ..ClusterConfig::default()
            };
            let l = Layout::uniform(3, 1);
            let mut w = build_preset_world(
                seed,
                cfg,
                NetConfig::default(),
                &l,
                ClusterInvariants::new(),
                500,
            )?;
            for &(r, p) in &l.replicas {
                ensure(w.synced(r) && w.follows(r) == Some(p), || {
                    format!("host {r} follows {:?}: {:?}", w.follows(r), w.link(r))
                })?;
                ensure(w.sync_counts(r) == (1, 0), || {
                    format!("host {r} syncs (full, partial): {:?}", w.sync_counts(r))
                })?;
            }
            let slots: Vec<_> = (0..3).map(|i| l.first_slot(i)).collect();
            w.start_writer(slots, 5);
            w.run_for(1_000)?;
            w.stop_writer();
            w.run_for(500)?;
            ensure(w.acked().len() > 150, || {
                format!("{} writes", w.acked().len())
            })?;
            for a in w.acked() {
                let r = l.replicas[a.host].0;
                ensure(w.has_write(r, a.id), || {
                    format!("write {} of host {} missing on host {r}", a.id, a.host)
                })?;
            }
            Ok(())
        },
    );
}

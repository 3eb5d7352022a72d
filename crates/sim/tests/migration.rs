//! Atomic slot migration (Valkey 9 `CLUSTER MIGRATESLOTS`) in the simulator, with the data
//! plane of [`World`]: six hosts (primaries 0, 1, 2; host 3 replicates 0, 4 replicates 1,
//! 5 replicates 2), slots 0–9 (owned by primary 0) migrate to primary 1.
//!
//! Expected values follow the slot-migration facts sheet, part A: the happy path (A.8 wire
//! sequence, A.14 epoch bump, A.11 source deletion), every failure cause of A.10 ending in a
//! rollback (A.11: no key of the slots left on the target shard, the source still owning
//! and serving them, GETSLOTMIGRATIONS showing `failed` / `cancelled` with A.10's
//! messages), failovers on either side (A.11: a demoted primary does not clean up, the
//! promoted replica does and sends FINISH) and concurrent writes (A.8/A.9: every
//! acknowledged write reaches the new owner). The cluster invariants, one vote per epoch and
//! "one host accepts writes to a migrating slot at a time" ([`World::watch_single_writer`])
//! are checked after every step. Seeds replay with `FERROCLUSTER_SIM_SEED`.

use ferrocluster_node::{
    ClusterConfig, JobKind, JobState, MigrationRequest, Notice, Output, Reply,
};
use ferrocluster_sim::seed::check_seeds;
use ferrocluster_sim::{
    build_world, Answer, AsmConfig, ClusterInvariants, ClusterSimExt, Layout, NetConfig, TraceHash,
    World, WRONGPASS,
};
use ferrocluster_slot::{Slot, SlotSet};
use std::collections::BTreeMap;
use std::error::Error;

type Res = Result<(), Box<dyn Error>>;
/// Acknowledged writes as (write ID, slot).
type Keys = Vec<(u64, Slot)>;

/// NODE_TIMEOUT of the scenarios (ms).
const NT: u64 = 2_000;
/// Source primary, its replica, target primary, its replica.
const SRC: usize = 0;
const SRC_REPLICA: usize = 3;
const DST: usize = 1;
const DST_REPLICA: usize = 4;
/// The migrating slots: 0..=9 (primary 0's range starts at 0).
const FIRST: u16 = 0;
const LAST: u16 = 9;

/// Sheet A.10 messages.
const LOST_TARGET: &str = "Connection lost to target. Check CLUSTER GETSLOTMIGRATIONS on the target node for more information.";
const LOST_SOURCE: &str = "Connection lost to source. Check CLUSTER GETSLOTMIGRATIONS on the source node for more information.";
const FLUSHED: &str = "Data was flushed";
const OOM: &str = "Ran out of memory (OOM) during slot import";
const FAILOVER_DURING_IMPORT: &str = "A failover occurred during slot import";
const NOT_OWNED_BY_SOURCE: &str = "Slots are no longer owned by source node";
const NOT_OWNED_BY_MYSELF: &str = "Slots are no longer owned by myself";

fn ensure(cond: bool, what: impl FnOnce() -> String) -> Res {
    if cond {
        Ok(())
    } else {
        Err(what().into())
    }
}

fn slot(s: u16) -> Slot {
    Slot::new(s).expect("slot below 16384")
}

fn slots() -> SlotSet {
    let mut set = SlotSet::new();
    for s in FIRST..=LAST {
        set.insert(slot(s));
    }
    set
}

fn config() -> ClusterConfig {
    ClusterConfig {
        node_timeout_ms: NT,
        ..ClusterConfig::default()
    }
}

fn world(seed: u64, cfg: ClusterConfig) -> Result<World, Box<dyn Error>> {
    let mut w = build_world(
        seed,
        cfg,
        NetConfig::default(),
        &Layout::uniform(3, 1),
        ClusterInvariants::new(),
    )?;
    w.watch_single_writer(&slots());
    Ok(w)
}

fn id(w: &World, h: usize) -> String {
    w.sim().id(h).expect("host is up").as_str().to_owned()
}

/// The command was accepted: `+OK` at once, or a change whose reply waits for its persist.
fn reply_ok(r: Option<Answer>) -> Res {
    match r {
        Some(Answer::Now(Reply::Simple(s))) if s == "OK" => Ok(()),
        Some(Answer::Later(_)) => Ok(()),
        other => Err(format!("expected +OK, got {other:?}").into()),
    }
}

/// Forty keys in the slots, all acknowledged by the source, replicated to its replica.
fn seed_keys(w: &mut World) -> Res {
    for i in 0..40u16 {
        let ack = w.write(slot(FIRST + i % (LAST - FIRST + 1)))?;
        ensure(ack.is_ok_and(|a| a.host == SRC), || {
            format!("write: {ack:?}")
        })?;
    }
    w.run_for(200)?;
    Ok(())
}

/// `CLUSTER MIGRATESLOTS SLOTSRANGE 0 9 NODE <host 1>` on the source.
fn migrate(w: &mut World) -> Res {
    let target = id(w, DST);
    let last = LAST.to_string();
    let first = FIRST.to_string();
    reply_ok(w.cluster_command(
        SRC,
        &["MIGRATESLOTS", "SLOTSRANGE", &first, &last, "NODE", &target],
    )?)
}

/// The state and message of the newest `kind` job on `host` (the engine's view).
fn job(w: &World, host: usize, kind: JobKind) -> Option<(JobState, String)> {
    let j = w
        .node(host)?
        .migrations()
        .jobs()
        .find(|j| j.kind() == kind)?;
    Some((j.state(), j.message().unwrap_or("").to_owned()))
}

fn state(w: &World, host: usize, kind: JobKind) -> Option<JobState> {
    job(w, host, kind).map(|(s, _)| s)
}

/// `CLUSTER GETSLOTMIGRATIONS` on `host`, each entry as field → text.
fn getslotmigrations(
    w: &mut World,
    host: usize,
) -> Result<Vec<BTreeMap<String, String>>, Box<dyn Error>> {
    let r = w.cluster_command(host, &["GETSLOTMIGRATIONS"])?;
    let Some(Answer::Now(Reply::Array(entries))) = r else {
        return Err(format!("GETSLOTMIGRATIONS on {host}: {r:?}").into());
    };
    let text = |r: &Reply| match r {
        Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
        Reply::Simple(s) => s.clone(),
        Reply::Integer(i) => i.to_string(),
        other => format!("{other:?}"),
    };
    let mut out = Vec::new();
    for e in entries {
        let Reply::Map(pairs) = e else {
            return Err(format!("entry {e:?}").into());
        };
        out.push(pairs.iter().map(|(k, v)| (text(k), text(v))).collect());
    }
    Ok(out)
}

/// The newest GETSLOTMIGRATIONS entry of `operation` on `host` shows `state` and one of
/// `messages`, for slots 0-9.
fn shows(w: &mut World, host: usize, operation: &str, state: &str, messages: &[&str]) -> Res {
    let entries = getslotmigrations(w, host)?;
    let e = entries
        .iter()
        .find(|e| e.get("operation").map(String::as_str) == Some(operation))
        .ok_or_else(|| format!("host {host}: no {operation} entry in {entries:?}"))?;
    let st = e.get("state").map(String::as_str);
    let msg = e.get("message").map(String::as_str).unwrap_or("<none>");
    ensure(st == Some(state) && messages.contains(&msg), || {
        format!(
            "host {host} {operation}: got ({st:?}, {msg:?}), want ({state:?}, one of {messages:?})"
        )
    })?;
    ensure(
        e.get("slot_ranges").map(String::as_str) == Some(&format!("{FIRST}-{LAST}")),
        || format!("host {host}: slot_ranges {:?}", e.get("slot_ranges")),
    )
}

/// Whether `host` is up and a primary by its own view.
fn is_primary(w: &World, host: usize) -> bool {
    w.node(host)
        .is_some_and(|n| n.topology().myself().is_primary())
}

/// Whether `host` is up and a replica by its own view.
fn is_replica(w: &World, host: usize) -> bool {
    w.node(host)
        .is_some_and(|n| n.topology().myself().is_replica())
}

/// Runs until `cond`, at most `max_ms`; an error naming `what` otherwise.
fn wait(w: &mut World, max_ms: u64, what: &str, cond: impl FnMut(&World) -> bool) -> Res {
    if w.run_until_cond(max_ms, cond)? {
        Ok(())
    } else {
        Err(format!("{what}: not within {max_ms} ms").into())
    }
}

/// Runs until the source's export job is in `st`.
fn wait_export(w: &mut World, st: JobState) -> Res {
    wait(w, 5_000, &format!("export {st:?}"), |w| {
        state(w, SRC, JobKind::Export) == Some(st)
    })
}

/// Acknowledged writes to the migrating slots (all of them, or those after `after_id`).
fn acked_ids(w: &World, after_id: u64) -> Vec<(u64, Slot)> {
    let set = slots();
    w.acked()
        .iter()
        .filter(|a| a.id > after_id && set.contains(a.slot))
        .map(|a| (a.id, a.slot))
        .collect()
}

/// Every write in `ids` is a key of `host`.
fn holds_all(w: &World, host: usize, ids: &[(u64, Slot)]) -> Res {
    let missing: Vec<u64> = ids
        .iter()
        .filter(|(id, s)| !w.slot_keys(host, *s).contains(id))
        .map(|(id, _)| *id)
        .collect();
    ensure(missing.is_empty(), || {
        format!(
            "host {host} lacks {} acknowledged writes: {missing:?}",
            missing.len()
        )
    })
}

/// Whether every running host's table gives every migrating slot to `owner`.
fn all_agree_owner(w: &World, owner: usize) -> bool {
    let Some(oid) = w.sim().id(owner) else {
        return false;
    };
    (0..w.sim().hosts()).filter(|&h| w.sim().is_up(h)).all(|h| {
        w.node(h).is_some_and(|n| {
            slots()
                .iter()
                .all(|s| n.topology().slot_owner(s) == Some(&oid))
        })
    })
}

/// The rollback of sheet A.11, checked once the cluster settled: no key of the slots on
/// the target shard (`target_shard`, running hosts), none of them hidden there, `owner`
/// (the source, or its promoted replica) owning the slots in every view, not paused,
/// holding every write in `kept` and acknowledging a new write to every slot.
fn rolled_back(w: &mut World, owner: usize, target_shard: &[usize], kept: &[(u64, Slot)]) -> Res {
    wait(w, 5 * NT, "target shard emptied and owner agreed", |w| {
        all_agree_owner(w, owner)
            && (0..w.sim().hosts()).all(|h| {
                w.node(h)
                    .is_none_or(ferrocluster_node::ClusterNode::cluster_state_ok)
            })
            && target_shard.iter().all(|&h| {
                !w.sim().is_up(h)
                    || (w.count_keys_in(h, &slots()) == 0
                        && !w.hidden_slots(h).intersects(&slots()))
            })
    })?;
    for &h in target_shard {
        if !w.sim().is_up(h) {
            continue;
        }
        ensure(w.count_keys_in(h, &slots()) == 0, || {
            format!(
                "host {h} kept {} keys of the slots",
                w.count_keys_in(h, &slots())
            )
        })?;
        ensure(!w.hidden_slots(h).intersects(&slots()), || {
            format!("host {h} still hides migrating slots")
        })?;
    }
    ensure(!w.paused(owner), || format!("host {owner} still paused"))?;
    settled_views(w)?;
    holds_all(w, owner, kept)?;
    for s in FIRST..=LAST {
        let ack = w.write(slot(s))?;
        ensure(ack.is_ok_and(|a| a.host == owner), || {
            format!("slot {s} after the rollback: {ack:?}")
        })?;
    }
    Ok(())
}

/// Once settled (issue 16): no primary holds keys of a slot another node owns, and every
/// running node's CLUSTER SHARDS covers exactly the slots of its CLUSTER SLOTS.
fn settled_views(w: &World) -> Res {
    w.check_no_stale_keys()?;
    for h in (0..w.sim().hosts()).filter(|&h| w.sim().is_up(h)) {
        if let Some(n) = w.node(h) {
            ferrocluster_sim::check_shards_match_slots(n.topology())
                .map_err(|m| format!("host {h}: {m}"))?;
        }
    }
    Ok(())
}

/// Whether `host` emitted a DropSlotKeys for the migrating slots at or after `since`.
fn dropped_since(w: &World, host: usize, since: ferrocluster_node::Millis) -> bool {
    w.events().iter().any(|(t, h, e)| {
        *t >= since
            && *h == host
            && matches!(e, Output::Migration(r) if matches!(&**r,
                MigrationRequest::DropSlotKeys { slots: s } if s.intersects(&slots())))
    })
}

/// Whether `host` propagated `SYNCSLOTS FINISH STATE failed` at or after `since`.
fn finished_failed_since(w: &World, host: usize, since: ferrocluster_node::Millis) -> bool {
    w.events().iter().any(|(t, h, e)| {
        *t >= since
            && *h == host
            && matches!(e, Output::Migration(r) if matches!(&**r,
                MigrationRequest::Propagate { message: ferrocluster_node::SyncSlots::Finish {
                    state: ferrocluster_node::FinishState::Failed, .. } }))
    })
}

// ----- happy path -----

#[test]
fn slots_move_with_their_keys_and_every_node_follows() {
    check_seeds(
        "slots_move_with_their_keys_and_every_node_follows",
        [1, 2],
        |seed| -> Res {
            let mut w = world(seed, config())?;
            seed_keys(&mut w)?;
            let before = acked_ids(&w, 0);
            // A.14 (Valkey `clusterBumpConfigEpochWithoutConsensus`): unless the target's
            // configEpoch is non-zero and already the maximum of every configEpoch it knows and
            // its currentEpoch, currentEpoch + 1 becomes its configEpoch.
            let config_epoch =
                |w: &World, h: usize| w.node(h).unwrap().topology().myself().config_epoch.0;
            let epoch_before = config_epoch(&w, DST);
            let t = w.node(DST).unwrap().topology();
            let current_before = t.current_epoch.get();
            let max_before = t
                .nodes()
                .map(|n| n.config_epoch.0)
                .max()
                .unwrap_or(0)
                .max(current_before);
            let want_epoch = if epoch_before != 0 && epoch_before == max_before {
                epoch_before
            } else {
                current_before + 1
            };
            migrate(&mut w)?;
            ensure(
                state(&w, SRC, JobKind::Export) == Some(JobState::Connecting),
                || format!("export starts in {:?}", job(&w, SRC, JobKind::Export)),
            )?;
            // The target stages the keys hidden, its replica tracks the import.
            wait(&mut w, 2_000, "import receiving the snapshot", |w| {
                state(w, DST, JobKind::Import) == Some(JobState::ReceivingSnapshot)
            })?;
            ensure(
                w.hidden_slots(DST).is_subset(&slots()) && w.hidden_slots(DST).len() == 10,
                || "target does not hide the slots".into(),
            )?;
            wait(&mut w, 2_000, "replica tracking", |w| {
                state(w, DST_REPLICA, JobKind::Import) == Some(JobState::OccurringOnPrimary)
                    && w.hidden_slots(DST_REPLICA).len() == 10
            })?;
            wait_export(&mut w, JobState::Success)?;
            ensure(
                state(&w, DST, JobKind::Import) == Some(JobState::Success),
                || format!("import {:?}", job(&w, DST, JobKind::Import)),
            )?;
            let epoch_after = config_epoch(&w, DST);
            ensure(epoch_after == want_epoch, || {
                format!("configEpoch {epoch_before} -> {epoch_after}, want {want_epoch} (max {max_before}, currentEpoch {current_before})")
            })?;
            wait(&mut w, 3 * NT, "every node sees the new owner", |w| {
                all_agree_owner(w, DST)
                    && state(w, DST_REPLICA, JobKind::Import) == Some(JobState::Success)
                    && w.count_keys_in(SRC_REPLICA, &slots()) == 0
            })?;
            // The keys moved: on the target shard, visible; gone from the source shard.
            holds_all(&w, DST, &before)?;
            holds_all(&w, DST_REPLICA, &before)?;
            for h in [DST, DST_REPLICA] {
                ensure(w.hidden_slots(h).is_empty(), || {
                    format!("host {h} still hides slots")
                })?;
            }
            for h in [SRC, SRC_REPLICA] {
                ensure(w.count_keys_in(h, &slots()) == 0, || {
                    format!("host {h} kept {} keys", w.count_keys_in(h, &slots()))
                })?;
            }
            ensure(!w.paused(SRC), || "source still paused".into())?;
            ensure(w.asm_stats().snapshot_keys == before.len() as u64, || {
                format!(
                    "snapshot carried {} keys, not {}",
                    w.asm_stats().snapshot_keys,
                    before.len()
                )
            })?;
            shows(&mut w, SRC, "EXPORT", "success", &[""])?;
            shows(&mut w, DST, "IMPORT", "success", &[""])?;
            // The new owner serves the slots.
            let ack = w.write(slot(FIRST))?;
            ensure(ack.is_ok_and(|a| a.host == DST), || {
                format!("write after: {ack:?}")
            })?;
            ensure(w.migration_links() == 0, || {
                "a data link stayed open".into()
            })?;
            Ok(())
        },
    );
}

#[test]
fn every_acknowledged_concurrent_write_reaches_the_new_owner() {
    check_seeds(
        "every_acknowledged_concurrent_write_reaches_the_new_owner",
        [1, 2, 3],
        |seed| -> Res {
            let mut w = world(seed, config())?;
            w.set_asm_config(AsmConfig { snapshot_ms: 300 });
            seed_keys(&mut w)?;
            let set: Vec<Slot> = slots().iter().collect();
            w.start_writer(set, 3);
            w.run_for(100)?;
            migrate(&mut w)?;
            wait_export(&mut w, JobState::Success)?;
            // Keep writing through the hand-over and after it.
            w.run_for(NT)?;
            w.stop_writer();
            wait(&mut w, 3 * NT, "owner agreed", |w| all_agree_owner(w, DST))?;
            w.run_for(500)?;
            let all = acked_ids(&w, 0);
            let by_src = w.acked().iter().filter(|a| a.host == SRC).count();
            let by_dst = w.acked().iter().filter(|a| a.host == DST).count();
            ensure(by_dst > 0 && by_src > 40, || {
                format!("writes by source {by_src}, by target {by_dst}")
            })?;
            holds_all(&w, DST, &all)?;
            holds_all(&w, DST_REPLICA, &all)?;
            ensure(w.asm_stats().forwarded > 0, || {
                "no write was forwarded".into()
            })?;
            let stray = w.count_keys_in(SRC, &slots()) + w.count_keys_in(SRC_REPLICA, &slots());
            ensure(stray == 0, || {
                format!("{stray} keys left on the source shard")
            })?;
            println!(
                "seed {seed}: {} writes ({by_src} by the source, {by_dst} by the target), \
                 {} forwarded, refused {:?}",
                all.len(),
                w.asm_stats().forwarded,
                w.refused()
            );
            Ok(())
        },
    );
}

// ----- failures: every cause ends in a rollback (sheet A.10, A.11) -----

/// A world with forty keys in the slots and a migration whose snapshot (400 ms) runs: the
/// target and its replica hold staged, hidden keys. Returns the world and the keys.
fn midway(seed: u64, cfg: ClusterConfig) -> Result<(World, Keys), Box<dyn Error>> {
    let mut w = world(seed, cfg)?;
    w.set_asm_config(AsmConfig { snapshot_ms: 400 });
    seed_keys(&mut w)?;
    let before = acked_ids(&w, 0);
    migrate(&mut w)?;
    wait_export(&mut w, JobState::Snapshotting)?;
    wait(&mut w, 300, "staged keys on the target shard", |w| {
        w.count_keys_in(DST, &slots()) == 40
            && w.count_keys_in(DST_REPLICA, &slots()) == 40
            && w.hidden_slots(DST_REPLICA).len() == 10
    })?;
    ensure(
        state(&w, SRC, JobKind::Export) == Some(JobState::Snapshotting),
        || "the snapshot ended before the staged keys settled".into(),
    )?;
    Ok((w, before))
}

/// Runs until the job of `kind` on `host` reached `st`; its message must be one of
/// `messages`.
fn ends(w: &mut World, host: usize, kind: JobKind, st: JobState, messages: &[&str]) -> Res {
    wait(w, 4 * NT, &format!("host {host} {kind:?} {st:?}"), |w| {
        state(w, host, kind).is_some_and(JobState::is_terminal)
    })?;
    let got = job(w, host, kind);
    ensure(
        got.as_ref()
            .is_some_and(|(s, m)| *s == st && messages.contains(&m.as_str())),
        || format!("host {host} {kind:?}: {got:?}, want {st:?} with one of {messages:?}"),
    )
}

/// The common end of a failure on both primaries: export `failed` with `export_msg`,
/// import `failed` with `import_msg`, both shown by GETSLOTMIGRATIONS, then the rollback.
fn both_failed(w: &mut World, export_msg: &str, import_msg: &str, kept: &[(u64, Slot)]) -> Res {
    ends(w, SRC, JobKind::Export, JobState::Failed, &[export_msg])?;
    ends(w, DST, JobKind::Import, JobState::Failed, &[import_msg])?;
    shows(w, SRC, "EXPORT", "failed", &[export_msg])?;
    shows(w, DST, "IMPORT", "failed", &[import_msg])?;
    rolled_back(w, SRC, &[DST, DST_REPLICA], kept)?;
    // The target's replica followed the FINISH its primary propagated.
    ensure(
        state(w, DST_REPLICA, JobKind::Import) == Some(JobState::Failed),
        || format!("replica import {:?}", job(w, DST_REPLICA, JobKind::Import)),
    )
}

#[test]
fn a_lost_link_rolls_back() {
    check_seeds("a_lost_link_rolls_back", [1, 2], |seed| -> Res {
        let (mut w, before) = midway(seed, config())?;
        ensure(w.break_migration_links(SRC, DST) == 1, || {
            "no link to break".into()
        })?;
        both_failed(&mut w, LOST_TARGET, LOST_SOURCE, &before)
    });
}

#[test]
fn the_target_running_out_of_memory_rolls_back_and_a_retry_succeeds() {
    check_seeds(
        "the_target_running_out_of_memory_rolls_back_and_a_retry_succeeds",
        [1, 2],
        |seed| -> Res {
            let mut w = world(seed, config())?;
            seed_keys(&mut w)?;
            let before = acked_ids(&w, 0);
            w.set_import_oom(DST, true);
            migrate(&mut w)?;
            both_failed(&mut w, LOST_TARGET, OOM, &before)?;
            ensure(w.asm_stats().ooms > 0, || "no OOM was reported".into())?;
            // No automatic retry (A.11); the operator's retry works once memory is back.
            w.set_import_oom(DST, false);
            let all = acked_ids(&w, 0);
            migrate(&mut w)?;
            wait_export(&mut w, JobState::Success)?;
            wait(&mut w, 3 * NT, "owner agreed", |w| all_agree_owner(w, DST))?;
            holds_all(&w, DST, &all)
        },
    );
}

#[test]
fn an_output_buffer_overrun_rolls_back() {
    check_seeds(
        "an_output_buffer_overrun_rolls_back",
        [1, 2],
        |seed| -> Res {
            let mut w = world(seed, config())?;
            w.set_asm_config(AsmConfig { snapshot_ms: 400 });
            seed_keys(&mut w)?;
            // Room for about ten held writes (a write is about 40 bytes of RESP on the link);
            // the writer makes one every 3 ms during the snapshot, which the source holds.
            w.set_output_buffer_limit(SRC, Some(512));
            w.start_writer(slots().iter().collect(), 3);
            migrate(&mut w)?;
            ends(
                &mut w,
                SRC,
                JobKind::Export,
                JobState::Failed,
                &[LOST_TARGET],
            )?;
            w.stop_writer();
            ensure(w.asm_stats().output_limits > 0, || {
                "no overrun was reported".into()
            })?;
            let kept = acked_ids(&w, 0);
            both_failed(&mut w, LOST_TARGET, LOST_SOURCE, &kept)
        },
    );
}

#[test]
fn a_flush_on_the_source_rolls_back() {
    check_seeds("a_flush_on_the_source_rolls_back", [1, 2], |seed| -> Res {
        let (mut w, _) = midway(seed, config())?;
        w.flush_all(SRC)?;
        ensure(w.count_keys_in(SRC, &slots()) == 0, || {
            "FLUSHALL left keys".into()
        })?;
        // Nothing written before the flush survives it; the source keeps the slots.
        both_failed(&mut w, FLUSHED, LOST_SOURCE, &[])
    });
}

#[test]
fn a_flush_on_the_target_rolls_back() {
    check_seeds("a_flush_on_the_target_rolls_back", [1, 2], |seed| -> Res {
        let (mut w, before) = midway(seed, config())?;
        w.flush_all(DST)?;
        both_failed(&mut w, LOST_TARGET, FLUSHED, &before)
    });
}

#[test]
fn an_auth_failure_rolls_back_before_anything_is_staged() {
    check_seeds(
        "an_auth_failure_rolls_back_before_anything_is_staged",
        [1, 2],
        |seed| -> Res {
            let cfg = ClusterConfig {
                primaryauth_set: true,
                ..config()
            };
            let mut w = world(seed, cfg)?;
            seed_keys(&mut w)?;
            let before = acked_ids(&w, 0);
            w.set_auth_rejected(DST, true);
            migrate(&mut w)?;
            // The job's message quotes the target's error line, its `-` included.
            let msg = format!("Failed to AUTH to target node: -{WRONGPASS}");
            ends(&mut w, SRC, JobKind::Export, JobState::Failed, &[&msg])?;
            shows(&mut w, SRC, "EXPORT", "failed", &[&msg])?;
            // ESTABLISH was never sent: the target has no job and hid nothing.
            ensure(job(&w, DST, JobKind::Import).is_none(), || {
                format!("target job {:?}", job(&w, DST, JobKind::Import))
            })?;
            rolled_back(&mut w, SRC, &[DST, DST_REPLICA], &before)?;
            // With the password accepted the same migration goes through AUTH and succeeds.
            w.set_auth_rejected(DST, false);
            migrate(&mut w)?;
            wait_export(&mut w, JobState::Success)
        },
    );
}

#[test]
fn cancel_rolls_back() {
    check_seeds("cancel_rolls_back", [1, 2], |seed| -> Res {
        let (mut w, before) = midway(seed, config())?;
        reply_ok(w.cluster_command(SRC, &["CANCELSLOTMIGRATIONS"])?)?;
        // A.4: cancelled with an empty message; the target loses the link.
        ends(&mut w, SRC, JobKind::Export, JobState::Cancelled, &[""])?;
        shows(&mut w, SRC, "EXPORT", "cancelled", &[""])?;
        ends(
            &mut w,
            DST,
            JobKind::Import,
            JobState::Failed,
            &[LOST_SOURCE],
        )?;
        shows(&mut w, DST, "IMPORT", "failed", &[LOST_SOURCE])?;
        rolled_back(&mut w, SRC, &[DST, DST_REPLICA], &before)?;
        // Nothing left to cancel.
        let r = w.cluster_command(SRC, &["CANCELSLOTMIGRATIONS"])?;
        ensure(
            r == Some(Answer::Now(Reply::Error(
                "ERR No migrations ongoing".into(),
            ))),
            || format!("second cancel: {r:?}"),
        )
    });
}

// ----- failovers and crashes mid-migration -----

#[test]
fn a_crashed_target_is_replaced_by_its_replica_which_cleans_up() {
    check_seeds(
        "a_crashed_target_is_replaced_by_its_replica_which_cleans_up",
        [1, 2],
        |seed| -> Res {
            let (mut w, before) = midway(seed, config())?;
            let t0 = w.now();
            w.crash(DST);
            ends(
                &mut w,
                SRC,
                JobKind::Export,
                JobState::Failed,
                &[LOST_TARGET],
            )?;
            wait(&mut w, 10 * NT, "the target's replica promoted", |w| {
                is_primary(w, DST_REPLICA)
            })?;
            // A.11: the promoted replica fails the import, drops the staged keys and sends
            // FINISH.
            ends(
                &mut w,
                DST_REPLICA,
                JobKind::Import,
                JobState::Failed,
                &[FAILOVER_DURING_IMPORT],
            )?;
            shows(
                &mut w,
                DST_REPLICA,
                "IMPORT",
                "failed",
                &[FAILOVER_DURING_IMPORT],
            )?;
            rolled_back(&mut w, SRC, &[DST_REPLICA], &before)?;
            ensure(
                dropped_since(&w, DST_REPLICA, t0) && finished_failed_since(&w, DST_REPLICA, t0),
                || "the promoted replica did not clean up and finish".into(),
            )?;
            // The old target comes back as a replica of its replica: no staged key survives.
            w.restart(DST)?;
            wait(&mut w, 5 * NT, "old target follows", |w| w.synced(DST))?;
            rolled_back(&mut w, SRC, &[DST, DST_REPLICA], &before)
        },
    );
}

#[test]
fn a_crashed_source_is_replaced_by_its_replica_and_the_target_rolls_back() {
    check_seeds(
        "a_crashed_source_is_replaced_by_its_replica_and_the_target_rolls_back",
        [1, 2],
        |seed| -> Res {
            let (mut w, before) = midway(seed, config())?;
            w.crash(SRC);
            ends(
                &mut w,
                DST,
                JobKind::Import,
                JobState::Failed,
                &[LOST_SOURCE],
            )?;
            shows(&mut w, DST, "IMPORT", "failed", &[LOST_SOURCE])?;
            wait(&mut w, 10 * NT, "the source's replica promoted", |w| {
                is_primary(w, SRC_REPLICA)
            })?;
            // The promoted replica owns and serves the slots with every key.
            rolled_back(&mut w, SRC_REPLICA, &[DST, DST_REPLICA], &before)?;
            w.restart(SRC)?;
            wait(&mut w, 5 * NT, "old source follows", |w| w.synced(SRC))?;
            rolled_back(&mut w, SRC_REPLICA, &[DST, DST_REPLICA], &before)
        },
    );
}

#[test]
fn a_target_failover_leaves_the_cleanup_to_the_promoted_replica() {
    check_seeds(
        "a_target_failover_leaves_the_cleanup_to_the_promoted_replica",
        [1, 2],
        |seed| -> Res {
            let (mut w, before) = midway(seed, config())?;
            let t0 = w.now();
            reply_ok(w.cluster_command(DST_REPLICA, &["FAILOVER"])?)?;
            wait(&mut w, 5 * NT, "manual failover of the target", |w| {
                is_primary(w, DST_REPLICA) && is_replica(w, DST)
            })?;
            ends(
                &mut w,
                SRC,
                JobKind::Export,
                JobState::Failed,
                &[LOST_TARGET],
            )?;
            ends(
                &mut w,
                DST_REPLICA,
                JobKind::Import,
                JobState::Failed,
                &[FAILOVER_DURING_IMPORT],
            )?;
            rolled_back(&mut w, SRC, &[DST, DST_REPLICA], &before)?;
            // A.11: the demoted primary did not clean up; the promoted replica did and sent
            // FINISH, which closed the demoted one's (tracking) job.
            ensure(!dropped_since(&w, DST, t0), || {
                "the demoted primary cleaned up".into()
            })?;
            ensure(
                dropped_since(&w, DST_REPLICA, t0) && finished_failed_since(&w, DST_REPLICA, t0),
                || "the promoted replica did not clean up and finish".into(),
            )?;
            ensure(
                state(&w, DST, JobKind::Import) == Some(JobState::Failed),
                || format!("demoted primary's job {:?}", job(&w, DST, JobKind::Import)),
            )?;
            // On demotion its job became tracking-only (A.7 `occurring-on-primary`).
            let tracked = w.events().iter().any(|(t, h, e)| {
                *t >= t0
                    && *h == DST
                    && matches!(
                        e,
                        Output::Notice(Notice::MigrationStateChanged {
                            to: JobState::OccurringOnPrimary,
                            ..
                        })
                    )
            });
            ensure(tracked, || {
                "the demoted primary's job never became tracking-only".into()
            })
        },
    );
}

#[test]
fn a_source_failover_rolls_back_and_the_new_source_primary_serves() {
    check_seeds(
        "a_source_failover_rolls_back_and_the_new_source_primary_serves",
        [1, 2],
        |seed| -> Res {
            let (mut w, before) = midway(seed, config())?;
            reply_ok(w.cluster_command(SRC_REPLICA, &["FAILOVER"])?)?;
            wait(&mut w, 5 * NT, "manual failover of the source", |w| {
                is_primary(w, SRC_REPLICA)
            })?;
            // A.10: the demoted source fails its export (either text is accepted); the target
            // sees the slots move to another node or the link close.
            ends(
                &mut w,
                SRC,
                JobKind::Export,
                JobState::Failed,
                &[NOT_OWNED_BY_MYSELF, LOST_TARGET],
            )?;
            ends(
                &mut w,
                DST,
                JobKind::Import,
                JobState::Failed,
                &[NOT_OWNED_BY_SOURCE, LOST_SOURCE],
            )?;
            rolled_back(&mut w, SRC_REPLICA, &[DST, DST_REPLICA], &before)
        },
    );
}

/// Issue 16 item 4: the source is killed when its export reaches `failover-granted`. The
/// target takes the slots (or, if the grant never reached it, the source's promoted replica
/// keeps them); either way no acknowledged write is lost and, once the cluster settled, no
/// primary holds keys of a slot another node owns — in particular the source's promoted
/// replica, whose data still has the migrated slots' keys (its primary died before deleting
/// them), deletes them.
#[test]
fn a_source_killed_at_failover_granted_leaves_no_stale_keys_on_its_promoted_replica() {
    let mut target_won = 0;
    check_seeds(
        "a_source_killed_at_failover_granted_leaves_no_stale_keys_on_its_promoted_replica",
        [1, 2, 3, 4],
        |seed| -> Res {
            let mut w = world(seed, config())?;
            seed_keys(&mut w)?;
            let before = acked_ids(&w, 0);
            migrate(&mut w)?;
            wait_export(&mut w, JobState::ExportFailoverGranted)?;
            w.crash(SRC);
            wait(&mut w, 10 * NT, "the source's replica promoted", |w| {
                is_primary(w, SRC_REPLICA)
            })?;
            let owner = if all_agree_owner(&w, DST) {
                DST
            } else {
                SRC_REPLICA
            };
            wait(&mut w, 5 * NT, "settled", |w| {
                (all_agree_owner(w, DST) || all_agree_owner(w, SRC_REPLICA))
                    && (0..w.sim().hosts()).all(|h| {
                        w.node(h)
                            .is_none_or(ferrocluster_node::ClusterNode::cluster_state_ok)
                    })
            })?;
            let owner = if all_agree_owner(&w, DST) { DST } else { owner };
            holds_all(&w, owner, &before)?;
            w.run_for(NT)?;
            settled_views(&w)?;
            if owner == DST {
                target_won += 1;
                ensure(w.count_keys_in(SRC_REPLICA, &slots()) == 0, || {
                    format!(
                        "the promoted replica kept {} keys of the migrated slots",
                        w.count_keys_in(SRC_REPLICA, &slots())
                    )
                })?;
            }
            // The old source comes back as a replica: no stale keys anywhere.
            w.restart(SRC)?;
            wait(&mut w, 5 * NT, "old source follows", |w| w.synced(SRC))?;
            settled_views(&w)?;
            holds_all(&w, owner, &before)
        },
    );
    assert!(target_won > 0, "the target never took the slots over");
}

#[test]
fn a_partition_times_both_sides_out_and_rolls_back() {
    check_seeds(
        "a_partition_times_both_sides_out_and_rolls_back",
        [1, 2],
        |seed| -> Res {
            // A short repl-timeout (A.13) keeps the run small; the rule is the same at 60 s.
            let cfg = ClusterConfig {
                repl_timeout_ms: 3_000,
                ..config()
            };
            let (mut w, before) = midway(seed, cfg)?;
            w.sim_mut().block_two_way(SRC, DST);
            let timed_out = "Timed out after too long with no interaction";
            ends(&mut w, SRC, JobKind::Export, JobState::Failed, &[timed_out])?;
            ends(&mut w, DST, JobKind::Import, JobState::Failed, &[timed_out])?;
            shows(&mut w, SRC, "EXPORT", "failed", &[timed_out])?;
            shows(&mut w, DST, "IMPORT", "failed", &[timed_out])?;
            w.sim_mut().heal();
            rolled_back(&mut w, SRC, &[DST, DST_REPLICA], &before)?;
            ensure(w.migration_links() == 0, || {
                "a data link stayed open".into()
            })
        },
    );
}

#[test]
fn a_target_that_refuses_the_connection_fails_the_export() {
    check_seeds(
        "a_target_that_refuses_the_connection_fails_the_export",
        [1],
        |seed| -> Res {
            let mut w = world(seed, config())?;
            seed_keys(&mut w)?;
            let before = acked_ids(&w, 0);
            let target = id(&w, DST);
            w.crash(DST);
            reply_ok(w.cluster_command(
                SRC,
                &["MIGRATESLOTS", "SLOTSRANGE", "0", "9", "NODE", &target],
            )?)?;
            let msg = "Unable to connect to target node: Connection refused";
            ends(&mut w, SRC, JobKind::Export, JobState::Failed, &[msg])?;
            shows(&mut w, SRC, "EXPORT", "failed", &[msg])?;
            w.restart(DST)?;
            rolled_back(&mut w, SRC, &[DST, DST_REPLICA], &before)
        },
    );
}

#[test]
fn a_target_restarted_from_its_aof_cleans_up_the_pending_import() {
    check_seeds(
        "a_target_restarted_from_its_aof_cleans_up_the_pending_import",
        [1, 2],
        |seed| -> Res {
            let (mut w, before) = midway(seed, config())?;
            // Down and back well within NODE_TIMEOUT: still the primary, no failover.
            w.crash(DST);
            w.run_for(50)?;
            w.restart(DST)?;
            ends(
                &mut w,
                SRC,
                JobKind::Export,
                JobState::Failed,
                &[LOST_TARGET],
            )?;
            // A.16: the replayed ESTABLISH without FINISH is failed after loading and cleaned up.
            ends(
                &mut w,
                DST,
                JobKind::Import,
                JobState::Failed,
                &["Process restarted"],
            )?;
            rolled_back(&mut w, SRC, &[DST, DST_REPLICA], &before)?;
            ensure(is_primary(&w, DST), || "the target lost its role".into())
        },
    );
}

#[test]
fn a_migration_run_is_a_function_of_its_seed() {
    check_seeds(
        "a_migration_run_is_a_function_of_its_seed",
        [7],
        |seed| -> Res {
            let run = || -> Result<(TraceHash, Keys), Box<dyn Error>> {
                let mut w = world(seed, config())?;
                seed_keys(&mut w)?;
                w.start_writer(slots().iter().collect(), 4);
                migrate(&mut w)?;
                wait_export(&mut w, JobState::Success)?;
                w.stop_writer();
                Ok((w.sim().trace(), acked_ids(&w, 0)))
            };
            let (a, b) = (run()?, run()?);
            ensure(a == b, || {
                format!("two runs differ: {:?} vs {:?}", a.0, b.0)
            })
        },
    );
}

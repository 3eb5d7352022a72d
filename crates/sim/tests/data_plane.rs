//! The simulated data plane of [`World`]: replicas follow their primary's stream (the shipped
//! `ferrocluster_dataplane::Replication` over simulated connections), the state each host
//! reports to its node (`ClusterNode::handle_replication`) reaches the bus headers (§3
//! `offset`), links go down with refused connections and crashes and come back with a
//! resync, and the client's writes obey ownership, cluster state and pauses.

use ferrocluster_node::{ClusterConfig, ReplLink};
use ferrocluster_sim::seed::check_seeds;
use ferrocluster_sim::{
    build_world, ClusterInvariants, ClusterSimExt, Layout, NetConfig, WriteRefusal,
};
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

#[test]
fn replicas_follow_their_primary_and_report_it() {
    check_seeds(
        "replicas_follow_their_primary_and_report_it",
        [1, 2],
        |seed| -> Res {
            let cfg = ClusterConfig {
                node_timeout_ms: NT,
                ..ClusterConfig::default()
            };
            let l = Layout::uniform(2, 1);
            let mut w = build_world(
                seed,
                cfg,
                NetConfig::default(),
                &l,
                ClusterInvariants::new(),
            )?;
            ensure(w.synced(2) && w.synced(3), || "replicas not synced".into())?;
            ensure(w.follows(2) == Some(0) && w.follows(3) == Some(1), || {
                "wrong replication targets".into()
            })?;
            // Ten writes to primary 0's first slot: acknowledged by host 0, replicated to host 2.
            let slot = l.first_slot(0);
            for _ in 0..10 {
                let ack = w.write(slot)?;
                ensure(ack.is_ok_and(|a| a.host == 0), || format!("write: {ack:?}"))?;
            }
            let after = w.offset(0);
            ensure(after > 0 && w.offset(2) < after, || {
                "replication was not delayed".into()
            })?;
            w.run_for(200)?;
            ensure(w.offset(2) == after && w.offset(3) == w.offset(1), || {
                format!(
                    "offsets {} {} (primaries {after} {})",
                    w.offset(2),
                    w.offset(3),
                    w.offset(1)
                )
            })?;
            for a in w.acked() {
                ensure(w.has_write(2, a.id), || format!("write {} missing", a.id))?;
            }
            // Both replicas started with a full sync (RDB bytes), none since.
            ensure(w.sync_counts(2).0 == 1 && w.sync_counts(3).0 == 1, || {
                format!("full syncs {:?} {:?}", w.sync_counts(2), w.sync_counts(3))
            })?;
            // The reported offsets travel in the headers: after a ping interval every node
            // knows them (§3 `offset`).
            w.run_for(NT)?;
            for h in 0..4 {
                let t = w.node(h).unwrap().topology();
                for (target, want) in [(0usize, after), (2, after)] {
                    let id = w.sim().id(target).unwrap();
                    let got = t.node(&id).unwrap().repl_offset;
                    ensure(got == want, || {
                        format!("host {h} sees host {target} at offset {got}, not {want}")
                    })?;
                }
            }
            ensure(
                w.node(2).unwrap().replication().offset == after
                    && matches!(w.node(2).unwrap().replication().link, ReplLink::Up { .. }),
                || format!("host 2 reported {:?}", w.node(2).unwrap().replication()),
            )?;
            // A blocked replication link goes down (with its time); unblocked, it resyncs
            // partially (the primary's backlog holds what it missed) on the replica's next
            // reconnect (once a second, Valkey `replicationCron`).
            let t_block = w.now();
            w.block_data(2, true);
            w.run_for(200)?;
            ensure(
                matches!(w.link(2), ReplLink::DownSince(t) if t >= t_block),
                || format!("link {:?}", w.link(2)),
            )?;
            w.write(slot)?.map_err(|e| format!("{e:?}"))?;
            w.run_for(200)?;
            ensure(w.offset(2) == after, || {
                "data crossed a blocked link".into()
            })?;
            w.block_data(2, false);
            w.run_for(1_300)?;
            ensure(w.synced(2) && w.offset(2) == w.offset(0), || {
                "no resync".into()
            })?;
            ensure(w.sync_counts(2) == (1, 1), || {
                format!("syncs of host 2 (full, partial): {:?}", w.sync_counts(2))
            })?;
            for a in w.acked() {
                ensure(w.has_write(2, a.id), || format!("write {} missing", a.id))?;
            }
            // A crashed primary: its replica's link is down within one data cron.
            w.crash(1);
            w.run_for(200)?;
            ensure(matches!(w.link(3), ReplLink::DownSince(_)), || {
                format!("link of host 3: {:?}", w.link(3))
            })?;
            // Writes to a slot nobody reachable serves are refused, not acknowledged.
            let refused = w.write(l.first_slot(1))?;
            ensure(refused.is_err(), || {
                format!("write to a dead primary: {refused:?}")
            })?;
            // A write from a client cut off from the owner is refused as unreachable.
            w.sim_mut().block_two_way(0, 1);
            w.restart(1)?;
            w.run_for(500)?;
            let r = w.write(l.first_slot(1))?;
            ensure(r == Err(WriteRefusal::Unreachable), || format!("{r:?}"))?;
            Ok(())
        },
    );
}

//! Our primary ↔ our replica, in memory, every byte stream cut in seeded random chunks.

mod harness;

use ferrocluster_dataplane::{
    CloseReason, ConnId, Event, LinkDownReason, ReplLink, ReplicationConfig, Reply, Restored, Role,
};
use harness::Net;

fn replica_of(port: u16) -> Role {
    Role::Replica {
        host: "127.0.0.1".into(),
        port,
    }
}

fn synced(net: &Net, p: usize, r: usize) {
    assert_eq!(net.hosts[r].data, net.hosts[p].data, "data");
    assert_eq!(
        net.hosts[r].repl.offset(),
        net.hosts[p].repl.offset(),
        "offset"
    );
    assert_eq!(
        net.hosts[r].repl.replid(),
        net.hosts[p].repl.replid(),
        "replid"
    );
}

fn partial_accepted(net: &Net, h: usize) -> usize {
    net.count_events(h, |e| matches!(e, Event::PartialResyncAccepted { .. }))
}

/// Full sync (disk and diskless), then streamed writes in two databases, for several chunk
/// sizes: the replica ends with the primary's data, offset and replid.
#[test]
fn full_sync_then_stream() {
    for diskless in [false, true] {
        for (seed, chunk) in [(1, 1), (2, 7), (3, 4096)] {
            let mut net = Net::new(seed, chunk);
            let mut cfg = Net::cfg(7000);
            cfg.diskless_sync = diskless;
            let p = net.add(cfg, Role::Primary, None);
            for i in 0..20 {
                net.write(p, i % 3, &format!("k{i}"), &format!("v{i}"));
            }
            let r = net.add(Net::cfg(7001), replica_of(7000), None);
            net.settle(10);
            synced(&net, p, r);
            for i in 0..50 {
                net.write(p, (i * 7) % 16, &format!("s{i}"), &"x".repeat(i as usize));
            }
            net.settle(10);
            synced(&net, p, r);
            assert_eq!(net.hosts[p].snapshots_started, 1);
            let link = net.hosts[r].repl.replication_state().link;
            assert!(matches!(link, ReplLink::Up { .. }), "{link:?}");
            let info = net.hosts[p].repl.info(net.now).render();
            assert!(info.contains("state=online"), "{info}");
        }
    }
}

/// After the link drops, the replica reconnects with `PSYNC <replid> <offset+1>` and gets
/// `+CONTINUE` plus the writes it missed from the backlog; no new snapshot.
#[test]
fn partial_resync_after_reconnect() {
    let mut net = Net::new(4, 13);
    let p = net.add(Net::cfg(7000), Role::Primary, None);
    net.write(p, 0, "a", "1");
    let r = net.add(Net::cfg(7001), replica_of(7000), None);
    net.settle(10);
    synced(&net, p, r);
    net.kill_links_of(r);
    assert!(matches!(
        net.hosts[r].repl.replication_state().link,
        ReplLink::Up { .. } | ReplLink::DownSince(_)
    ));
    for i in 0..10 {
        net.write(p, 1, &format!("m{i}"), "missed");
    }
    net.settle(10);
    synced(&net, p, r);
    assert_eq!(net.hosts[p].snapshots_started, 1, "no second full sync");
    assert_eq!(partial_accepted(&net, p), 1);
}

/// Primary P with replicas A and B; A is promoted, B follows A: B resyncs partially through
/// A's replid2 (`+CONTINUE <new replid>`), and so does the old primary P when it rejoins as
/// A's replica without having taken writes of its own.
#[test]
fn sibling_resyncs_partially_after_failover() {
    let mut net = Net::new(5, 9);
    let p = net.add(Net::cfg(7000), Role::Primary, None);
    net.write(p, 0, "a", "1");
    let a = net.add(Net::cfg(7001), replica_of(7000), None);
    let b = net.add(Net::cfg(7002), replica_of(7000), None);
    net.settle(10);
    net.write(p, 2, "b", "2");
    net.settle(10);
    synced(&net, p, a);
    synced(&net, p, b);
    let old = net.hosts[p].repl.replid();
    let off = net.hosts[p].repl.offset();
    // Failover: the old primary goes away, A takes over.
    net.hosts[p].down = true;
    net.kill_links_of(a);
    net.kill_links_of(b);
    let now = net.now;
    net.hosts[a].repl.become_primary(now);
    assert_eq!(net.hosts[a].repl.replid2(), old);
    assert_eq!(net.hosts[a].repl.second_offset(), Some(off + 1));
    assert_ne!(net.hosts[a].repl.replid(), old);
    net.hosts[b]
        .repl
        .replicate_from("127.0.0.1", 7001, false, now);
    net.settle(10);
    net.write(a, 3, "c", "3");
    net.settle(10);
    synced(&net, a, b);
    assert_eq!(
        net.hosts[a].snapshots_started, 0,
        "no full sync on the new primary"
    );
    assert_eq!(partial_accepted(&net, a), 1);
    assert!(net.count_events(b, |e| matches!(e, Event::ReplIdShifted { .. })) >= 1);
    // The old primary comes back as a replica of A: its history matches up to `off`.
    net.hosts[p].down = false;
    let now = net.now;
    net.hosts[p]
        .repl
        .replicate_from("127.0.0.1", 7001, false, now);
    net.settle(10);
    synced(&net, a, p);
    assert_eq!(net.hosts[a].snapshots_started, 0);
    assert_eq!(partial_accepted(&net, a), 2);
}

/// A primary that took writes after the promotion has a history the new primary does not
/// share: its PSYNC by replid2 asks past `second_repl_offset`, and it gets a full sync.
#[test]
fn diverged_old_primary_gets_a_full_sync() {
    let mut net = Net::new(6, 64);
    let p = net.add(Net::cfg(7000), Role::Primary, None);
    let a = net.add(Net::cfg(7001), replica_of(7000), None);
    net.write(p, 0, "a", "1");
    net.settle(10);
    net.kill_links_of(a);
    net.hosts[p].down = true;
    let now = net.now;
    net.hosts[a].repl.become_primary(now);
    net.write(p, 0, "lost", "write"); // accepted by the isolated old primary
    net.hosts[p].data.remove(&(0, b"lost".to_vec()));
    net.hosts[p].down = false;
    net.hosts[p]
        .repl
        .replicate_from("127.0.0.1", 7001, false, now);
    net.settle(10);
    synced(&net, a, p);
    assert_eq!(net.hosts[a].snapshots_started, 1);
    assert_eq!(partial_accepted(&net, a), 0);
}

/// More writes than the backlog holds while the replica is away: a full sync.
#[test]
fn backlog_overrun_forces_full_sync() {
    let mut net = Net::new(7, 100);
    let mut cfg = Net::cfg(7000);
    cfg.backlog_size = 256;
    let p = net.add(cfg, Role::Primary, None);
    let r = net.add(Net::cfg(7001), replica_of(7000), None);
    net.settle(10);
    net.kill_links_of(r);
    for i in 0..20 {
        net.write(p, 0, &format!("k{i}"), "0123456789");
    }
    assert!(net.hosts[p].repl.backlog().histlen() == 256);
    net.settle(10);
    synced(&net, p, r);
    assert_eq!(net.hosts[p].snapshots_started, 2);
    assert_eq!(partial_accepted(&net, p), 0);
}

/// WAIT: answered at once when enough replicas acked; blocked otherwise, with `REPLCONF GETACK
/// *` sent, and answered on the ACK; a WAIT for more replicas than exist times out with the
/// count at the deadline.
#[test]
fn wait_and_getack() {
    let mut net = Net::new(8, 5);
    let p = net.add(Net::cfg(7000), Role::Primary, None);
    let r = net.add(Net::cfg(7001), replica_of(7000), None);
    net.settle(10);
    net.write(p, 0, "k", "v");
    let woff = net.hosts[p].woff;
    let now = net.now;
    let client = ConnId(999);
    assert_eq!(net.hosts[p].repl.acked_replicas(woff), 0);
    let got = net.hosts[p]
        .repl
        .handle_wait(client, &["WAIT", "1", "0"], woff, now)
        .unwrap();
    assert_eq!(got, None, "blocks until the ACK");
    net.settle(1);
    assert_eq!(net.hosts[p].waits, vec![(client, Reply::Integer(1))]);
    let getack = b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n";
    let n = net.hosts[p]
        .sent
        .windows(getack.len())
        .filter(|w| w == getack)
        .count();
    assert_eq!(n, 1, "one GETACK in the stream");
    // The GETACK is part of the stream: the replica is at the primary's offset.
    synced(&net, p, r);
    // Already acknowledged: immediate.
    let now = net.now;
    assert_eq!(
        net.hosts[p]
            .repl
            .handle_wait(client, &["WAIT", "1", "100"], woff, now)
            .unwrap(),
        Some(Reply::Integer(1))
    );
    // Two replicas wanted, one exists: the reply comes at the 100 ms deadline.
    net.write(p, 0, "k2", "v2");
    let woff = net.hosts[p].woff;
    let start = net.now;
    assert_eq!(
        net.hosts[p]
            .repl
            .handle_wait(client, &["WAIT", "2", "100"], woff, start)
            .unwrap(),
        None
    );
    assert_eq!(
        net.hosts[p].repl.poll_timeout(),
        Some(start.saturating_add_ms(100))
    );
    net.run_for(200, 10);
    assert_eq!(
        net.hosts[p].waits.last(),
        Some(&(client, Reply::Integer(1)))
    );
    // Errors with Valkey's texts.
    let now = net.now;
    let e = net.hosts[p]
        .repl
        .handle_wait(client, &["WAIT", "1", "-1"], 0, now)
        .unwrap_err();
    assert_eq!(e.to_reply(), Reply::Error("ERR timeout is negative".into()));
    let e = net.hosts[r]
        .repl
        .handle_wait(client, &["WAIT", "0", "0"], 0, now)
        .unwrap_err();
    assert!(e
        .to_string()
        .starts_with("ERR WAIT cannot be used with replica instances."));
}

/// `request_acks` (Valkey `replicationRequestAckFromReplicas`, after a replicated `CLUSTER
/// SETSLOT`): one `REPLCONF GETACK *` enters the stream at once, and the replica's ACK of the
/// write comes at once, not at its next 1 s cron.
#[test]
fn request_acks_sends_one_getack_and_the_ack_follows() {
    let mut net = Net::new(8, 5);
    let p = net.add(Net::cfg(7000), Role::Primary, None);
    let _r = net.add(Net::cfg(7001), replica_of(7000), None);
    net.settle(10);
    net.write(p, 0, "k", "v");
    let woff = net.hosts[p].woff;
    let getack = b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n";
    let count = |net: &Net| {
        net.hosts[p]
            .sent
            .windows(getack.len())
            .filter(|w| w == getack)
            .count()
    };
    let before = count(&net);
    assert_eq!(net.hosts[p].repl.acked_replicas(woff), 0);
    net.hosts[p].repl.request_acks();
    net.hosts[p].repl.request_acks();
    net.run_for(50, 1);
    assert_eq!(count(&net), before + 1, "one GETACK for both requests");
    assert_eq!(
        net.hosts[p].repl.acked_replicas(woff),
        1,
        "acknowledged within 50 ms"
    );
}

/// A replica ACKs every second; the primary pings every `repl-ping-replica-period`; a silent
/// link times out on both sides after `repl-timeout`, and the replica resyncs partially once
/// the network heals.
#[test]
fn pings_acks_and_timeouts() {
    let mut net = Net::new(9, 50);
    let mut cfg = Net::cfg(7000);
    cfg.ping_period_ms = 2_000;
    cfg.timeout_ms = 5_000;
    let p = net.add(cfg.clone(), Role::Primary, None);
    cfg.listening_port = 7001;
    cfg.timeout_ms = 60_000;
    let r = net.add(cfg, replica_of(7000), None);
    net.settle(10);
    let before = net.hosts[p].repl.offset();
    net.run_for(4_500, 100);
    let after = net.hosts[p].repl.offset();
    assert_eq!(
        (after - before) % 14,
        0,
        "only pings: *1 $4 ping, 14 bytes each"
    );
    assert!(after - before >= 28, "{before} -> {after}");
    synced(&net, p, r);
    // The last ACK (once a second) may predate the last ping.
    let acked = net.hosts[p].repl.info(net.now).replicas[0].offset;
    assert!(
        acked == after || acked + 14 == after,
        "acked {acked}, offset {after}"
    );
    // Silence: the link stays open but carries nothing. The primary (repl-timeout 5 s) drops
    // the replica, whose own timeout is longer.
    net.cut_links_of(r, true);
    net.run_for(6_500, 100);
    assert!(net.hosts[p]
        .outputs
        .iter()
        .any(|o| o.contains(&format!("{:?}", CloseReason::Timeout))));
    net.cut_links_of(r, false);
    net.settle(100);
    net.write(p, 0, "after", "heal");
    net.settle(100);
    synced(&net, p, r);
    assert_eq!(net.hosts[p].snapshots_started, 1);
    assert_eq!(partial_accepted(&net, p), 1);
}

/// `CONFIG SET repl-ping-replica-period` at run time (`Replication::set_timing`): from a
/// period of 60 s to 1 s, the primary pings once a second at once, not after the minute it
/// had scheduled; a zero period is refused and changes nothing.
#[test]
fn ping_period_changes_at_run_time() {
    let mut net = Net::new(11, 50);
    let mut cfg = Net::cfg(7000);
    cfg.ping_period_ms = 60_000;
    let p = net.add(cfg.clone(), Role::Primary, None);
    cfg.listening_port = 7001;
    let r = net.add(cfg, replica_of(7000), None);
    net.settle(10);
    synced(&net, p, r);
    let before = net.hosts[p].repl.offset();
    net.run_for(3_000, 100);
    assert_eq!(
        net.hosts[p].repl.offset(),
        before,
        "no ping within 3 s of 60"
    );
    let now = net.now;
    assert!(net.hosts[p].repl.set_timing(0, 60_000, now).is_err());
    assert_eq!(net.hosts[p].repl.config().ping_period_ms, 60_000);
    net.hosts[p].repl.set_timing(1_000, 60_000, now).unwrap();
    net.run_for(3_500, 100);
    let pings = (net.hosts[p].repl.offset() - before) / 14;
    assert!((3..=4).contains(&pings), "{pings} pings in 3.5 s at 1 s");
    synced(&net, p, r);
}

/// The replica side's repl-timeout: no data nor ping from the primary for longer than it, and
/// the replica drops the link and reconnects (partial resync).
#[test]
fn replica_times_out_a_silent_primary() {
    let mut net = Net::new(14, 50);
    let p = net.add(Net::cfg(7000), Role::Primary, None);
    let mut cfg = Net::cfg(7001);
    cfg.timeout_ms = 3_000;
    let r = net.add(cfg, replica_of(7000), None);
    net.settle(10);
    net.cut_links_of(r, true);
    net.run_for(4_500, 100);
    assert!(net.count_events(r, |e| *e == Event::LinkDown(LinkDownReason::Timeout)) >= 1);
    assert!(matches!(
        net.hosts[r].repl.replication_state().link,
        ReplLink::DownSince(_) | ReplLink::Up { .. }
    ));
    net.cut_links_of(r, false);
    net.write(p, 0, "k", "v");
    net.settle(100);
    synced(&net, p, r);
    assert_eq!(partial_accepted(&net, p), 1);
}

/// Restarts with the saved replication fields: a replica asks `PSYNC <saved> <offset+1>` and
/// continues; a primary keeps the saved history as replid2 so its replicas continue too.
#[test]
fn restarts_resume_partially() {
    let mut net = Net::new(10, 33);
    let p = net.add(Net::cfg(7000), Role::Primary, None);
    net.write(p, 4, "a", "1");
    let r = net.add(Net::cfg(7001), replica_of(7000), None);
    net.settle(10);
    net.write(p, 5, "b", "2");
    net.settle(10);
    // The replica restarts from its "RDB" with the saved fields.
    let saved = net.hosts[r].repl.save_info().unwrap();
    assert_eq!(saved.stream_db, 5);
    let data = net.hosts[r].data.clone();
    net.kill_links_of(r);
    net.hosts[r].down = true;
    let r2 = net.add(
        Net::cfg(7002),
        replica_of(7000),
        Some(Restored {
            replid: saved.replid,
            offset: saved.offset,
            stream_db: saved.stream_db,
        }),
    );
    net.hosts[r2].data = data;
    net.write(p, 5, "c", "3");
    net.settle(10);
    synced(&net, p, r2);
    assert_eq!(partial_accepted(&net, p), 1);
    assert_eq!(net.hosts[p].snapshots_started, 1);
    // The primary restarts with its saved fields; the replica continues with the new replid.
    let psaved = net.hosts[p].repl.save_info().unwrap();
    let pdata = net.hosts[p].data.clone();
    net.hosts[p].down = true;
    net.kill_links_of(r2);
    let p2 = net.add(
        Net::cfg(7000),
        Role::Primary,
        Some(Restored {
            replid: psaved.replid,
            offset: psaved.offset,
            stream_db: psaved.stream_db,
        }),
    );
    net.hosts[p2].data = pdata;
    assert_eq!(net.hosts[p2].repl.replid2(), psaved.replid);
    net.settle(10);
    net.write(p2, 0, "d", "4");
    net.settle(10);
    synced(&net, p2, r2);
    assert_eq!(partial_accepted(&net, p2), 1);
    assert_eq!(net.hosts[p2].snapshots_started, 0);
}

/// Replicas arriving while a diskless snapshot waits for `repl-diskless-sync-delay` share it.
#[test]
fn diskless_delay_shares_one_snapshot() {
    let mut net = Net::new(11, 20);
    let mut cfg = Net::cfg(7000);
    cfg.diskless_sync_delay_ms = 3_000;
    let p = net.add(cfg, Role::Primary, None);
    net.write(p, 0, "a", "1");
    let r1 = net.add(Net::cfg(7001), replica_of(7000), None);
    let r2 = net.add(Net::cfg(7002), replica_of(7000), None);
    net.run_for(5_000, 100);
    synced(&net, p, r1);
    synced(&net, p, r2);
    assert_eq!(net.hosts[p].snapshots_started, 1);
}

/// The output buffer limit: a replica whose held stream grows past the hard limit while its
/// snapshot is produced is closed.
#[test]
fn output_buffer_limit_closes_a_slow_full_sync() {
    let mut net = Net::new(12, 10);
    let mut cfg = Net::cfg(7000);
    cfg.diskless_sync = false;
    cfg.output_buffer_limit.hard_bytes = 1_000;
    let p = net.add(cfg, Role::Primary, None);
    let r = net.add(Net::cfg(7001), replica_of(7000), None);
    // Connect and PSYNC, but the snapshot is not streamed (a slow BGSAVE).
    net.hosts[p].hold_snapshots = true;
    net.settle(10);
    assert_eq!(net.hosts[p].snapshots_started, 1);
    for i in 0..50 {
        net.write(p, 0, &format!("k{i}"), &"v".repeat(40));
    }
    net.run_for(10, 10);
    assert!(net.hosts[p]
        .outputs
        .iter()
        .any(|o| o.contains("OutputBufferLimit")));
    assert!(matches!(
        net.hosts[r].repl.replication_state().link,
        ReplLink::Down
    ));
}

/// The replica class counts the stream the host has not sent, never the full copy (Valkey
/// counts a replica's replication buffer, not its RDB transfer): a replica still reading a
/// copy larger than the hard limit stays; once the unsent stream past the copy passes the
/// limit it is closed.
#[test]
fn output_buffer_limit_counts_the_hosts_unsent_stream_not_the_copy() {
    use ferrocluster_dataplane::{Millis, Output, Replication, SnapshotTarget};
    let now = Millis(1_000_000);
    let mut cfg = Net::cfg(7000);
    cfg.diskless_sync = false;
    cfg.output_buffer_limit.hard_bytes = 1_000;
    let mut p = Replication::new(cfg, 1, Role::Primary, None, now).unwrap();
    let c = ConnId(7);
    for argv in [
        &["REPLCONF", "listening-port", "7001"][..],
        &["REPLCONF", "capa", "psync2"],
        &["PSYNC", "?", "-1"],
    ] {
        p.handle_command(c, None, argv, now).unwrap();
    }
    let mut handed = 0u64;
    let mut closed = false;
    let drain = |p: &mut Replication, handed: &mut u64, closed: &mut bool| {
        let mut snap = None;
        while let Some(o) = p.poll_output() {
            match o {
                Output::ToReplica { conn, bytes } if conn == c => *handed += bytes.len() as u64,
                Output::CloseReplica { conn, reason } if conn == c => {
                    assert_eq!(reason, CloseReason::OutputBufferLimit);
                    *closed = true;
                }
                Output::StartSnapshot { id, target, .. } => {
                    assert_eq!(target, SnapshotTarget::Disk);
                    snap = Some(id);
                }
                _ => {}
            }
        }
        snap
    };
    let id = drain(&mut p, &mut handed, &mut closed).expect("a snapshot for the replica");
    let rdb = vec![b'x'; 5_000];
    p.handle_snapshot_ready(id, rdb.len() as u64, now).unwrap();
    p.handle_snapshot_chunk(id, &rdb, now).unwrap();
    p.handle_snapshot_end(id, now).unwrap();
    drain(&mut p, &mut handed, &mut closed);
    // Nothing sent yet: 5000 copy bytes unsent, over the hard limit, and not counted.
    p.handle_replica_pending(c, handed, now);
    drain(&mut p, &mut handed, &mut closed);
    assert!(!closed, "the copy counted against the limit");
    let value = "v".repeat(1_500);
    p.feed(0, &["SET", "k", value.as_str()], now).unwrap();
    drain(&mut p, &mut handed, &mut closed);
    // The copy and 1000 stream bytes sent: ~500 stream bytes unsent, under the limit.
    p.handle_replica_pending(c, handed - 5_000 - 1_000, now);
    drain(&mut p, &mut handed, &mut closed);
    assert!(!closed, "closed under the limit");
    // Nothing sent: the whole stream (~1.5 KB) unsent, over the limit.
    p.handle_replica_pending(c, handed, now);
    drain(&mut p, &mut handed, &mut closed);
    assert!(closed, "a replica over the hard limit was kept");
}

/// A SELECT of a database the host does not have is ignored; REPLCONF errors use Valkey's
/// texts.
#[test]
fn command_errors_have_valkey_texts() {
    let mut net = Net::new(13, 10);
    let p = net.add(ReplicationConfig::default(), Role::Primary, None);
    let now = net.now;
    let c = ConnId(5);
    let repl = &mut net.hosts[p].repl;
    fn err<T: std::fmt::Debug>(r: Result<T, ferrocluster_dataplane::CommandError>) -> String {
        r.unwrap_err().to_string()
    }
    assert_eq!(
        err(repl.handle_command(c, None, &["REPLCONF", "foo"], now)),
        "ERR syntax error"
    );
    assert_eq!(
        err(repl.handle_command(c, None, &["REPLCONF", "foo", "bar"], now)),
        "ERR Unrecognized REPLCONF option: foo"
    );
    assert_eq!(
        err(repl.handle_command(c, None, &["REPLCONF", "listening-port", "x"], now)),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(repl.handle_command(c, None, &["REPLCONF", "version", "x"], now)),
        "ERR Unrecognized version format: x"
    );
    assert_eq!(
        err(repl.handle_command(c, None, &["PSYNC", "abc", "x"], now)),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(repl.handle_command(c, None, &["PSYNC"], now)),
        "ERR wrong number of arguments for 'psync' command"
    );
    assert_eq!(
        err(repl.handle_wait(c, &["WAIT", "1", "x"], 0, now)),
        "ERR timeout is not an integer or out of range"
    );
    assert_eq!(
        err(repl.handle_wait(c, &["WAIT", "x", "1"], 0, now)),
        "ERR value is not an integer or out of range"
    );
}

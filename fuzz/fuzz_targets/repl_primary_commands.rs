//! Fuzz target: the primary side of the replication protocol (ferrocluster-dataplane
//! `Replication::handle_command` / `handle_wait` / `feed` / the snapshot inputs / timers):
//! REPLCONF, PSYNC, SYNC and WAIT argument parsing and the replica table.
//!
//! Input: a RESP command stream (what replicas send; `*3\r\n$8\r\nREPLCONF\r\n...`). Each
//! command goes to the engine from connection `1 + (index % 3)`; `WAIT` goes to `handle_wait`,
//! `SET k v` is fed as a write, `TICK` advances the clock 700 ms, `SNAP` streams a pending
//! snapshot, `CLOSE` closes the connection. Properties: no panic; an `Err` is a Valkey error
//! text; the offset only grows; `ToReplica` only targets connections that sent PSYNC/SYNC.
#![no_main]

use ferrocluster_dataplane::resp::{CommandReader, Item, ReaderLimits};
use ferrocluster_dataplane::{
    ConnId, Millis, Output, Replication, ReplicationConfig, Role, SnapshotTarget,
};
use libfuzzer_sys::fuzz_target;
use std::collections::BTreeSet;

fuzz_target!(|data: &[u8]| {
    let mut now = Millis(10_000);
    let cfg = ReplicationConfig {
        diskless_sync_delay_ms: 1_000,
        backlog_size: 300,
        ..ReplicationConfig::default()
    };
    let mut r = Replication::new(cfg, 7, Role::Primary, None, now).unwrap();
    let mut reader = CommandReader::new(ReaderLimits::default());
    reader.push(data);
    let mut synced: BTreeSet<ConnId> = BTreeSet::new();
    let mut snapshots = Vec::new();
    let mut offset = r.offset();
    let mut i = 0u64;
    while let Ok(Some(item)) = reader.next_item() {
        let Item::Command(c) = item else { continue };
        let conn = ConnId(1 + i % 3);
        i += 1;
        let name = c.argv[0].to_ascii_uppercase();
        match name.as_slice() {
            b"WAIT" => {
                if let Err(e) = r.handle_wait(conn, &c.argv, offset, now) {
                    assert!(e.to_string().starts_with("ERR "));
                }
            }
            b"SET" if c.argv.len() == 3 => {
                r.feed(0, &c.argv, now).unwrap();
            }
            b"TICK" => {
                now = Millis(now.0 + 700);
                r.handle_timeout(now);
            }
            b"CLOSE" => {
                r.handle_conn_closed(conn, now);
                synced.remove(&conn);
            }
            b"SNAP" => {
                if let Some((id, target)) = snapshots.pop() {
                    if target == SnapshotTarget::Disk {
                        r.handle_snapshot_ready(id, 4, now).unwrap();
                    }
                    r.handle_snapshot_chunk(id, b"RDB!", now).unwrap();
                    r.handle_snapshot_end(id, now).unwrap();
                }
            }
            _ => {
                let is_sync = name == b"PSYNC" || name == b"SYNC";
                match r.handle_command(conn, None, &c.argv, now) {
                    Ok(_) if is_sync => {
                        synced.insert(conn);
                    }
                    Ok(_) => {}
                    Err(e) => {
                        let t = e.to_string();
                        assert!(
                            t.starts_with("ERR ") || t.starts_with("NOMASTERLINK "),
                            "{t}"
                        );
                    }
                }
            }
        }
        while let Some(o) = r.poll_output() {
            match o {
                Output::ToReplica { conn, .. } => assert!(synced.contains(&conn)),
                Output::CloseReplica { conn, .. } => {
                    synced.remove(&conn);
                }
                Output::StartSnapshot { id, target, .. } => snapshots.push((id, target)),
                _ => {}
            }
        }
        assert!(r.offset() >= offset);
        offset = r.offset();
        let _ = r.info(now).render();
    }
});

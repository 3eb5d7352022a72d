//! Our export against our import, driven by the real control plane (`Migrations` on both
//! sides), every byte stream cut in seeded random chunks; client writes, non-idempotent ones
//! included, run on the source throughout the snapshot and the stream.

use super::harness::{Pair, PASSWORD, SRC, TGT, WRONGPASS};
use ferrocluster_dataplane::resp::command_bytes;
use ferrocluster_dataplane::{AsmConfig, AsmEvent, OutputBufferLimit, SnapshotMode};
use ferrocluster_migration::{JobState, MSG_LOST_SOURCE, MSG_LOST_TARGET};
use ferrocluster_slot::{key_hash_slot, Slot, SlotSet};

/// Hash tags of the migrating slots, and of one that stays.
const MOVING: [&str; 3] = ["m1", "m2", "m3"];
const STAYS: &str = "x";
const DATABASES: u32 = 2;

fn slot(tag: &str) -> Slot {
    key_hash_slot(format!("{{{tag}}}").as_bytes())
}

fn owned() -> SlotSet {
    let mut s = SlotSet::new();
    for t in MOVING.iter().chain([&STAYS]) {
        s.insert(slot(t));
    }
    // Empty slots around the moving ones.
    for t in MOVING {
        let n = slot(t).get();
        for m in n.saturating_sub(2)..=n.saturating_add(2).min(16383) {
            s.insert(Slot::new(m).unwrap());
        }
    }
    s
}

fn ranges() -> Vec<(u16, u16)> {
    // One range holding empty slots too, and two single slots, out of order.
    let a = slot(MOVING[0]).get();
    vec![
        (slot(MOVING[2]).get(), slot(MOVING[2]).get()),
        (a.saturating_sub(2), a.saturating_add(2).min(16383)),
        (slot(MOVING[1]).get(), slot(MOVING[1]).get()),
    ]
}

fn moving_slots() -> SlotSet {
    let mut s = SlotSet::new();
    for (a, b) in ranges() {
        for n in a..=b {
            s.insert(Slot::new(n).unwrap());
        }
    }
    s
}

fn argv(parts: &[&[u8]]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.to_vec()).collect()
}

fn key(tag: &str, kind: &str, i: u64) -> Vec<u8> {
    format!("{{{tag}}}{kind}:{i}").into_bytes()
}

/// Some data in every slot of interest, both databases, big collections included.
fn populate(p: &mut Pair) {
    for db in 0..DATABASES {
        for tag in MOVING.iter().chain([&STAYS]) {
            for i in 0..12 {
                let n = i.to_string();
                let n = n.as_bytes();
                assert!(p.write(db, &argv(&[b"SET", &key(tag, "s", i), b"v"])));
                assert!(p.write(db, &argv(&[b"INCRBY", &key(tag, "n", i), n])));
                assert!(p.write(db, &argv(&[b"RPUSH", &key(tag, "l", i), b"a", b"b", n])));
                assert!(p.write(db, &argv(&[b"SADD", &key(tag, "t", i), b"x", n])));
                assert!(p.write(db, &argv(&[b"HSET", &key(tag, "h", i), b"f", n])));
                assert!(p.write(db, &argv(&[b"ZADD", &key(tag, "z", i), b"1.5", n])));
            }
            let big: Vec<Vec<u8>> = (0..150).map(|i| format!("e{i}").into_bytes()).collect();
            let mut cmd = argv(&[b"RPUSH", &key(tag, "l", 99)]);
            cmd.extend(big.iter().cloned());
            assert!(p.write(db, &cmd));
            let mut cmd = argv(&[b"HSET", &key(tag, "h", 99)]);
            for b in &big {
                cmd.push(b.clone());
                cmd.push(b.clone());
            }
            assert!(p.write(db, &cmd));
            assert!(p.write(
                db,
                &argv(&[
                    b"HSETEX",
                    &key(tag, "h", 98),
                    b"PXAT",
                    b"1900000000000",
                    b"FIELDS",
                    b"1",
                    b"f",
                    b"v"
                ])
            ));
            assert!(p.write(
                db,
                &argv(&[b"PEXPIREAT", &key(tag, "s", 0), b"1900000000000"])
            ));
        }
    }
}

/// One random client write; `false` when the source did not take it.
fn random_write(p: &mut Pair) -> bool {
    let db = p.rand(DATABASES as u64) as u32;
    let tag = match p.rand(5) {
        4 => STAYS,
        i => MOVING[i as usize % 3],
    };
    let i = p.rand(16);
    let n = p.rand(1000).to_string();
    let n = n.as_bytes();
    let cmd = match p.rand(14) {
        0 => argv(&[b"SET", &key(tag, "s", i), n]),
        1 => argv(&[b"APPEND", &key(tag, "s", i), b"+"]),
        2 => argv(&[b"INCRBY", &key(tag, "n", i), n]),
        3 => argv(&[b"LPUSH", &key(tag, "l", i), n]),
        4 => argv(&[b"RPUSH", &key(tag, "l", i), n, b"r"]),
        5 => argv(&[b"SADD", &key(tag, "t", i), n]),
        6 => argv(&[b"SREM", &key(tag, "t", i), b"x"]),
        7 => argv(&[b"HINCRBY", &key(tag, "h", i), b"f", b"1"]),
        8 => argv(&[
            b"HSETEX",
            &key(tag, "h", i),
            b"PXAT",
            b"1900000000000",
            b"FIELDS",
            b"1",
            n,
            b"v",
        ]),
        9 => argv(&[b"ZINCRBY", &key(tag, "z", i), b"0.25", n]),
        10 => argv(&[b"ZADD", &key(tag, "z", i), b"2", b"m"]),
        11 => {
            let kind = ["s", "n", "l", "t", "h", "z"][p.rand(6) as usize];
            argv(&[b"DEL", &key(tag, kind, i)])
        }
        12 => argv(&[b"PEXPIREAT", &key(tag, "l", i), b"1950000000000"]),
        _ => argv(&[b"SET", &key(tag, "s", i), n, b"PXAT", b"1960000000000"]),
    };
    p.write(db, &cmd)
}

fn cfg() -> AsmConfig {
    AsmConfig {
        databases: DATABASES,
        step_bytes: 700,
        page_keys: 5,
        ..AsmConfig::default()
    }
}

/// Keys of `slots` in every database, in the facts form.
fn keys_in(
    p: &Pair,
    side: usize,
    slots: &SlotSet,
) -> Vec<std::collections::BTreeMap<String, serde_json::Value>> {
    (0..DATABASES)
        .map(|db| {
            let mut d = p.s[side].db.clone();
            for space in &mut d.spaces {
                space.retain(|s, _| slots.contains(Slot::new(*s).unwrap()));
            }
            d.facts(db)
        })
        .collect()
}

/// The model check: a migration under writes (during the snapshot they are held, or dropped
/// for slots a slot-atomic snapshot has not read; after it they are streamed), then the
/// hand-off. The target's slots equal the source's at the pause, in every database.
fn model_check(mode: SnapshotMode, seeds: std::ops::Range<u64>) {
    for seed in seeds {
        // The link must outrun the writes or the source never pauses (as with Valkey): the
        // smallest chunks are the replay tests' business.
        let chunk = [64, 1500, 1 << 16][(seed % 3) as usize];
        let mut p = Pair::new(seed, mode, cfg(), &owned(), seed % 2 == 0, chunk);
        populate(&mut p);
        p.migrate(&ranges());
        let (mut during_snapshot, mut during_stream) = (0, 0);
        for _ in 0..200_000 {
            if p.finished() {
                break;
            }
            let state = p.state(SRC);
            // Busy during the snapshot; later slower than the link, so the backlog drains.
            let writes = match state {
                Some(JobState::Snapshotting | JobState::Replicating) => 1 + p.rand(3),
                _ => u64::from(p.rand(3) == 0),
            };
            for _ in 0..writes {
                if random_write(&mut p) {
                    match state {
                        Some(JobState::Snapshotting) => during_snapshot += 1,
                        Some(JobState::Replicating | JobState::WaitingToPause) => {
                            during_stream += 1
                        }
                        _ => {}
                    }
                }
            }
            p.step();
        }
        p.run(10_000);
        assert_eq!(
            p.state(SRC),
            Some(JobState::Success),
            "seed {seed}: {:?}",
            p.message(SRC)
        );
        assert_eq!(
            p.state(TGT),
            Some(JobState::Success),
            "seed {seed}: {:?}",
            p.message(TGT)
        );
        assert!(
            during_snapshot > 0 && during_stream > 0,
            "seed {seed}: {during_snapshot} {during_stream}"
        );
        let moving = moving_slots();
        let want = keys_in(&p, SRC, &moving);
        assert!(
            want.iter().map(|d| d.len()).sum::<usize>() > 100,
            "seed {seed}"
        );
        assert_eq!(
            keys_in(&p, TGT, &moving),
            want,
            "seed {seed} ({mode:?}, chunk {chunk})"
        );
        // What did not move stayed.
        let mut stays = SlotSet::new();
        stays.insert(slot(STAYS));
        assert!(
            keys_in(&p, TGT, &stays).iter().all(|d| d.is_empty()),
            "seed {seed}"
        );
        assert!(
            p.events
                .iter()
                .all(|(_, e)| matches!(e, AsmEvent::SnapshotWritten { .. })),
            "{:?}",
            p.events
        );
    }
}

#[test]
fn point_in_time_snapshot_under_writes() {
    model_check(SnapshotMode::PointInTime, 1..9);
}

#[test]
fn slot_atomic_snapshot_under_writes() {
    model_check(SnapshotMode::SlotAtomic, 101..109);
}

/// Slots read in pages with writes between them (the server's snapshot), the walk meeting
/// keys again when keys below its cursor are deleted: the key states fed for the slot being
/// read make the fuzzy content converge. Fails without them (a lost `INCRBY`, an `RPUSH`
/// applied twice) and without the `DEL` before a list met again.
#[test]
fn slot_paged_snapshot_under_writes() {
    model_check(SnapshotMode::SlotPaged, 201..213);
}

fn start(seed: u64, auth: bool) -> Pair {
    let mut p = Pair::new(seed, SnapshotMode::PointInTime, cfg(), &owned(), auth, 512);
    populate(&mut p);
    p
}

fn lost_keys_are_dropped(p: &Pair) {
    let moving = moving_slots();
    assert!(keys_in(p, TGT, &moving).iter().all(|d| d.is_empty()));
    assert!(!p.s[TGT].dropped.is_empty(), "the target cleaned up");
}

/// The connection breaks in the middle of the snapshot: both jobs fail with Valkey's
/// messages and the target drops what it staged.
#[test]
fn link_lost_during_snapshot() {
    let mut p = start(7, false);
    p.faults.cut_after_bytes = Some(3000);
    p.migrate(&ranges());
    p.run(100_000);
    assert_eq!(p.state(SRC), Some(JobState::Failed));
    assert_eq!(p.message(SRC).as_deref(), Some(MSG_LOST_TARGET));
    assert_eq!(p.state(TGT), Some(JobState::Failed));
    assert_eq!(p.message(TGT).as_deref(), Some(MSG_LOST_SOURCE));
    lost_keys_are_dropped(&p);
}

/// The target stops reading: the source's held and unsent bytes pass
/// `client-output-buffer-limit replica`, the link is dropped and both jobs fail.
#[test]
fn output_buffer_limit() {
    let mut p = Pair::new(
        8,
        SnapshotMode::PointInTime,
        AsmConfig {
            output_buffer_limit: OutputBufferLimit {
                hard_bytes: 16 * 1024,
                soft_bytes: 0,
                soft_ms: 0,
            },
            ..cfg()
        },
        &owned(),
        false,
        512,
    );
    populate(&mut p);
    p.migrate(&ranges());
    // Let the handshake through, then stall the target.
    for _ in 0..2_000 {
        p.step();
        if p.state(SRC) == Some(JobState::Snapshotting) {
            break;
        }
    }
    p.faults.target_stalls = true;
    p.run(100_000);
    assert_eq!(p.state(SRC), Some(JobState::Failed));
    assert_eq!(p.message(SRC).as_deref(), Some(MSG_LOST_TARGET));
    assert!(p.events.iter().any(|(s, e)| *s == SRC
        && matches!(e, AsmEvent::OutputBufferLimit { bytes, .. } if *bytes >= 16 * 1024)));
    assert_eq!(p.state(TGT), Some(JobState::Failed));
}

/// `primaryauth` set: AUTH goes first and the migration succeeds; refused, the job fails with
/// the target's error line, and the target never hears of the job.
#[test]
fn auth_accepted_and_refused() {
    let mut p = start(9, true);
    p.migrate(&ranges());
    p.run(100_000);
    assert_eq!(p.state(SRC), Some(JobState::Success));
    let mut p = start(10, true);
    p.faults.auth_refused = true;
    p.migrate(&ranges());
    p.run(100_000);
    assert_eq!(p.state(SRC), Some(JobState::Failed));
    assert_eq!(
        p.message(SRC),
        Some(format!("Failed to AUTH to target node: -{WRONGPASS}"))
    );
    assert_eq!(p.state(TGT), None);
    assert_eq!(PASSWORD, b"pw");
}

/// The target runs out of memory applying the snapshot: the import fails with Valkey's OOM
/// message, its staged keys are dropped, the source hears the link close.
#[test]
fn target_out_of_memory() {
    let mut p = start(11, false);
    p.faults.oom_at_apply = Some(40);
    p.migrate(&ranges());
    p.run(100_000);
    assert_eq!(p.state(TGT), Some(JobState::Failed));
    assert_eq!(
        p.message(TGT).as_deref(),
        Some("Ran out of memory (OOM) during slot import")
    );
    assert_eq!(p.state(SRC), Some(JobState::Failed));
    assert_eq!(p.message(SRC).as_deref(), Some(MSG_LOST_TARGET));
    lost_keys_are_dropped(&p);
}

/// The target sends what is not its protocol (a reply line after the handshake, a command
/// that is not SYNCSLOTS): the source closes the link, the jobs fail.
#[test]
fn target_breaks_the_protocol() {
    for (seed, garbage) in [
        (12, b"+OK\r\n".to_vec()),
        (13, command_bytes(&["SET", "x", "y"])),
        (14, b"*1\r\n$3\r\nACK\r\n".to_vec()),
    ] {
        let mut p = start(seed, false);
        p.faults.target_garbage = Some(garbage);
        p.migrate(&ranges());
        p.run(100_000);
        assert_eq!(p.state(SRC), Some(JobState::Failed), "seed {seed}");
        assert_eq!(p.message(SRC).as_deref(), Some(MSG_LOST_TARGET));
        assert!(
            p.events.iter().any(|(s, e)| *s == SRC
                && matches!(
                    e,
                    AsmEvent::Protocol { .. } | AsmEvent::UnexpectedCommand { .. }
                )),
            "seed {seed}: {:?}",
            p.events
        );
        assert_eq!(p.state(TGT), Some(JobState::Failed));
        lost_keys_are_dropped(&p);
    }
}

/// The slot-paged rules one by one, on one slot read a key per step: a list met twice by the
/// walk (a key below the cursor was deleted) is written twice, the second time after a
/// `DEL`; a write to a key already read reaches the target as the key's state, not as the
/// command (which the snapshot would double or lose). The target equals the source.
#[test]
fn slot_paged_walk_meets_a_list_twice() {
    use super::db::{Backward, Db};
    use ferrocluster_dataplane::{AsmOutput, AsmPlane, ConnId, Millis, SnapshotProgress};
    use ferrocluster_migration::JobName;
    let cfg = AsmConfig {
        databases: 1,
        page_keys: 1,
        step_bytes: 1,
        ..AsmConfig::default()
    };
    let now = Millis(1_000);
    let conn = ConnId(7);
    let mut plane = AsmPlane::new(cfg, now);
    plane
        .handle_connected(JobName::from_bytes(&[b'j'; 40]).unwrap(), conn, now)
        .unwrap();
    let mut src = Db::new(1);
    for c in [
        argv(&[b"SET", b"{t}k1", b"1"]),
        argv(&[b"SET", b"{t}k2", b"2"]),
        argv(&[b"SET", b"{t}k3", b"3"]),
        argv(&[b"RPUSH", b"{t}l", b"x", b"y"]),
    ] {
        src.exec(0, &c).unwrap();
    }
    let s = key_hash_slot(b"{t}l");
    let range = ferrocluster_slot::SlotRange::new(s, s).unwrap();
    plane
        .start_snapshot(conn, &[range], SnapshotMode::SlotPaged, now)
        .unwrap();
    // Before the first page the slot is unread: a write is in the snapshot, no key state.
    assert!(!plane.wants_key_state(s));
    assert_eq!(
        plane.snapshot_step(conn, &Backward(&src), now),
        Ok(SnapshotProgress::More)
    );
    assert!(plane.wants_key_state(s));
    // The walk read `l`; deleting `k1` below the cursor moves `l` down into the unread part,
    // and `l` changes after it was read.
    let write = |plane: &mut AsmPlane, src: &mut Db, c: Vec<Vec<u8>>| {
        src.exec(0, &c).unwrap();
        plane.feed(0, Some(s), &c, now).unwrap();
        let state = src.get(0, &c[1]).map(|e| (&e.val, e.expire));
        plane.feed_key_state(0, s, &c[1], state, now).unwrap();
    };
    write(&mut plane, &mut src, argv(&[b"DEL", b"{t}k1"]));
    write(&mut plane, &mut src, argv(&[b"RPUSH", b"{t}l", b"z"]));
    let mut steps = 0;
    while plane.snapshot_step(conn, &Backward(&src), now) == Ok(SnapshotProgress::More) {
        steps += 1;
        assert!(steps < 10);
    }
    assert!(!plane.wants_key_state(s));
    plane.begin_streaming(conn, now).unwrap();
    // After the slot was read, writes are commands again.
    write(&mut plane, &mut src, argv(&[b"RPUSH", b"{t}l", b"w"]));
    let mut wire = Vec::new();
    while let Some(o) = plane.poll_output() {
        if let AsmOutput::Send { bytes, .. } = o {
            wire.extend_from_slice(&bytes);
        }
    }
    let cmds: Vec<Vec<Vec<u8>>> = super::commands(&wire).into_iter().map(|c| c.0).collect();
    let lists: Vec<&Vec<Vec<u8>>> = cmds.iter().filter(|c| c[1] == b"{t}l").collect();
    assert_eq!(
        lists,
        [
            &argv(&[b"RPUSH", b"{t}l", b"x", b"y"]),
            &argv(&[b"DEL", b"{t}l"]),
            &argv(&[b"RPUSH", b"{t}l", b"x", b"y", b"z"]),
            &argv(&[b"DEL", b"{t}l"]),
            &argv(&[b"RPUSH", b"{t}l", b"x", b"y", b"z"]),
            &argv(&[b"RPUSH", b"{t}l", b"w"]),
        ]
    );
    let mut tgt = Db::new(1);
    for c in &cmds {
        let name = String::from_utf8_lossy(&c[0]).to_ascii_uppercase();
        if name != "CLUSTER" && name != "SELECT" {
            tgt.exec(0, c).unwrap();
        }
    }
    for k in [&b"{t}k1"[..], b"{t}k2", b"{t}k3", b"{t}l"] {
        assert_eq!(
            tgt.get(0, k),
            src.get(0, k),
            "{}",
            String::from_utf8_lossy(k)
        );
    }
}

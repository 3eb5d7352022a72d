//! Replays of the real migrations in `tests/vectors/asm/` (valkey-server 9.1.2 to
//! valkey-server 9.1.2, captured by `tests/vectors/asm/capture.py`) through both sides.

use super::db::{canon_facts, Db};
use super::{chunks, commands};
use ferrocluster_dataplane::resp::command_bytes;
use ferrocluster_dataplane::{
    AsmConfig, AsmEvent, AsmOutput, AsmPlane, ConnId, Millis, SnapshotMode, SnapshotProgress,
};
use ferrocluster_migration::{AuthReply, JobName, MigrationInput, SnapshotResult, SyncSlots};
use ferrocluster_slot::{key_hash_slot, Slot, SlotRange, SlotSet};
use ferrocluster_topology::NodeId;
use std::path::PathBuf;

const SCENARIOS: [&str; 3] = ["plain", "auth", "multidb"];
const CONN: ConnId = ConnId(7);
const NOW: Millis = Millis(1_000);

fn dir(scenario: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/vectors/asm")
        .join(scenario)
}

fn read(scenario: &str, file: &str) -> Vec<u8> {
    std::fs::read(dir(scenario).join(file)).expect("capture present")
}

fn facts(scenario: &str) -> serde_json::Value {
    serde_json::from_slice(&read(scenario, "facts.json")).expect("facts")
}

fn cfg() -> AsmConfig {
    // The captures ran with `cluster-databases 4`.
    AsmConfig {
        databases: 4,
        ..AsmConfig::default()
    }
}

fn text(b: &[u8]) -> &str {
    std::str::from_utf8(b).expect("ascii")
}

/// The captured data connection, split into its parts.
struct Capture {
    cmds: Vec<Vec<Vec<u8>>>,
    /// Index of the ESTABLISH command; bytes after it.
    establish: usize,
    after_establish: Vec<u8>,
    /// Index of SNAPSHOT-EOF.
    eof: usize,
    job: JobName,
    source: NodeId,
    ranges: Vec<SlotRange>,
}

fn is_sub(argv: &[Vec<u8>], sub: &str) -> bool {
    argv.len() >= 3
        && argv[0].eq_ignore_ascii_case(b"cluster")
        && argv[1].eq_ignore_ascii_case(b"syncslots")
        && argv[2].eq_ignore_ascii_case(sub.as_bytes())
}

fn capture(scenario: &str) -> Capture {
    let s2t = read(scenario, "conn1.s2t.bin");
    let parsed = commands(&s2t);
    let cmds: Vec<Vec<Vec<u8>>> = parsed.iter().map(|(a, _)| a.clone()).collect();
    // Re-encoding gives the captured bytes: comparing re-encoded commands compares bytes.
    let again: Vec<u8> = cmds.iter().flat_map(|c| command_bytes(c)).collect();
    assert_eq!(again, s2t, "{scenario}: the capture is canonical RESP");
    let establish = cmds.iter().position(|c| is_sub(c, "establish")).unwrap();
    let upto: usize = parsed[..=establish].iter().map(|(_, n)| n).sum();
    let eof = cmds.iter().position(|c| is_sub(c, "snapshot-eof")).unwrap();
    let e = &cmds[establish];
    assert_eq!(text(&e[3]), "SOURCE");
    assert_eq!(text(&e[5]), "NAME");
    assert_eq!(text(&e[7]), "SLOTSRANGE");
    let ranges = e[8..]
        .chunks(2)
        .map(|p| {
            let s = |b: &[u8]| Slot::new(text(b).parse().unwrap()).unwrap();
            SlotRange::new(s(&p[0]), s(&p[1])).unwrap()
        })
        .collect();
    Capture {
        establish,
        after_establish: s2t[upto..].to_vec(),
        eof,
        job: JobName::from_bytes(&e[6]).unwrap(),
        source: NodeId::parse(text(&e[4])).unwrap(),
        ranges,
        cmds,
    }
}

fn slots_of(ranges: &[SlotRange]) -> SlotSet {
    let mut s = SlotSet::new();
    for r in ranges {
        s.insert_range(*r);
    }
    s
}

/// Target side: the real source's stream (after ESTABLISH), in random chunks, into our
/// import: the applies rebuild exactly what the real target had after the hand-off, and the
/// source's SYNCSLOTS messages come out in order between them.
#[test]
fn import_applies_a_real_valkey_stream() {
    for scenario in SCENARIOS {
        let cap = capture(scenario);
        let f = facts(scenario);
        let expected_subs: Vec<String> = cap.cmds[cap.establish + 1..]
            .iter()
            .filter(|c| c[0] == b"CLUSTER")
            .map(|c| text(&c[2]).to_owned())
            .collect();
        let snapshot_cmds = cap.cmds[cap.establish + 2..cap.eof]
            .iter()
            .filter(|c| !c[0].eq_ignore_ascii_case(b"select"))
            .count();
        for (seed, max) in [(1, 1), (2, 13), (3, 4096), (4, 1 << 20)] {
            let mut asm = AsmPlane::new(cfg(), NOW);
            asm.accept_import(cap.job, CONN, slots_of(&cap.ranges), &[], NOW)
                .unwrap();
            let mut target = Db::new(4);
            let mut subs = Vec::new();
            let mut applied = 0;
            let mut applied_before_eof = None;
            for c in chunks(&cap.after_establish, seed, max) {
                asm.handle_bytes(CONN, c, NOW);
                while let Some(o) = asm.poll_output() {
                    match o {
                        AsmOutput::Apply { conn, db, argv } => {
                            assert_eq!(conn, CONN);
                            target.exec(db, &argv).unwrap();
                            applied += 1;
                        }
                        AsmOutput::SyncSlots { conn, argv } => {
                            assert_eq!(conn, CONN);
                            let sub = text(&argv[2]).to_owned();
                            if sub == "SNAPSHOT-EOF" {
                                applied_before_eof = Some(applied);
                            }
                            subs.push(sub);
                        }
                        AsmOutput::Migration(MigrationInput::ImportData { conn }) => {
                            assert_eq!(conn, CONN)
                        }
                        other => panic!("{scenario}: unexpected {other:?}"),
                    }
                }
            }
            assert_eq!(subs, expected_subs, "{scenario}");
            assert_eq!(applied_before_eof, Some(snapshot_cmds), "{scenario}");
            for (db, keys) in f["after"].as_object().unwrap() {
                let db: u32 = db.parse().unwrap();
                let want = canon_facts(keys.as_object().unwrap());
                assert_eq!(target.facts(db), want, "{scenario} db {db} seed {seed}");
            }
        }
    }
}

/// Compares two command streams, naming the first command that differs.
fn same_commands(got: &[u8], want: &[u8], what: &str) {
    let short = |c: &[Vec<u8>]| {
        c.iter()
            .take(6)
            .map(|a| String::from_utf8_lossy(&a[..a.len().min(24)]).into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let (g, w) = (commands(got), commands(want));
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!(
            a.0 == b.0,
            "{what}: command {i} differs: got `{}`, want `{}`",
            short(&a.0),
            short(&b.0)
        );
    }
    assert_eq!(g.len(), w.len(), "{what}: command count");
}

fn parse_message(argv: &[Vec<u8>]) -> SyncSlots {
    match text(&argv[2]) {
        "ACK" => SyncSlots::Ack,
        "PAUSED" => SyncSlots::Paused,
        "FAILOVER-GRANTED" => SyncSlots::FailoverGranted,
        other => panic!("not a source message: {other}"),
    }
}

fn is_stream_cmd(argv: &[Vec<u8>]) -> bool {
    argv[0] == b"XADD" || argv[0] == b"XSETID"
}

fn sent(asm: &mut AsmPlane, out: &mut Vec<u8>) {
    while let Some(o) = asm.poll_output() {
        match o {
            AsmOutput::Send { conn, bytes } => {
                assert_eq!(conn, CONN);
                out.extend_from_slice(&bytes);
            }
            AsmOutput::Migration(_) | AsmOutput::Event(AsmEvent::SnapshotWritten { .. }) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// Source side: the real source's snapshot content (rebuilt from its bytes) and the writes it
/// streamed, through our export: the bytes are the real source's, but for the documented
/// differences (no streams: the data plane's hosts store none; slot-major order of the
/// (slot, database) sections; the `SELECT` Valkey 9.1.2 forgets after a snapshot that ends in
/// another database).
#[test]
fn export_reproduces_a_real_valkey_stream() {
    for scenario in SCENARIOS {
        let cap = capture(scenario);
        for step_bytes in [1, 4096, 1 << 30] {
            let mut asm = AsmPlane::new(
                AsmConfig {
                    step_bytes,
                    page_keys: 3,
                    ..cfg()
                },
                NOW,
            );
            let mut out = Vec::new();
            asm.handle_connected(cap.job, CONN, NOW).unwrap();
            if cap.establish == 1 {
                assert_eq!(cap.cmds[0][0], b"AUTH");
                asm.send_auth(CONN, None, &cap.cmds[0][1], NOW).unwrap();
            }
            let establish = SyncSlots::Establish {
                source: Some(cap.source),
                name: cap.job,
                ranges: cap.ranges.clone(),
            };
            asm.send_message(CONN, &establish, NOW);
            asm.send_message(CONN, &SyncSlots::Ack, NOW);
            // The source's keyspace at the snapshot, rebuilt from the snapshot bytes.
            let mut source = Db::new(4);
            let mut db = 0;
            let mut sections: Vec<((usize, u32), Vec<u8>)> = Vec::new();
            for c in &cap.cmds[cap.establish + 2..cap.eof] {
                if c[0] == b"SELECT" {
                    db = text(&c[1]).parse().unwrap();
                    sections.push(((usize::MAX, db), command_bytes(c)));
                    continue;
                }
                source.exec(db, c).unwrap();
                let slot = key_hash_slot(&c[1]);
                let pos = cap
                    .ranges
                    .iter()
                    .flat_map(|r| r.iter())
                    .position(|s| s == slot)
                    .unwrap();
                let last = sections.last_mut().unwrap();
                last.0 .0 = pos;
                if !is_stream_cmd(c) {
                    last.1.extend_from_slice(&command_bytes(c));
                }
            }
            asm.start_snapshot(CONN, &cap.ranges, SnapshotMode::PointInTime, NOW)
                .unwrap();
            let mut steps = 0;
            loop {
                steps += 1;
                match asm.snapshot_step(CONN, &source, NOW).unwrap() {
                    SnapshotProgress::More => {}
                    SnapshotProgress::Done => break,
                    SnapshotProgress::Failed => panic!("snapshot failed"),
                }
            }
            assert!(steps > 1 || step_bytes > 1 << 20, "stepped");
            asm.begin_streaming(CONN, NOW).unwrap();
            // The writes after the snapshot, as the node feeds them, with the messages in
            // between.
            let mut db = 0;
            for c in &cap.cmds[cap.eof + 1..] {
                if c[0] == b"SELECT" {
                    db = text(&c[1]).parse().unwrap();
                } else if c[0] == b"CLUSTER" {
                    asm.send_message(CONN, &parse_message(c), NOW);
                } else {
                    asm.feed(db, Some(key_hash_slot(&c[1])), c, NOW).unwrap();
                }
            }
            sent(&mut asm, &mut out);
            // Expected: the capture with the documented differences.
            let mut want: Vec<u8> = cap.cmds[..cap.establish + 2]
                .iter()
                .flat_map(|c| command_bytes(c))
                .collect();
            let mut sorted = sections.clone();
            sorted.sort_by_key(|(k, _)| *k);
            let snapshot_db = sorted.last().map_or(0, |((_, db), _)| *db);
            for (_, b) in &sorted {
                want.extend_from_slice(b);
            }
            want.extend_from_slice(&command_bytes(&cap.cmds[cap.eof]));
            // After the snapshot the target is in `snapshot_db`: a write in another
            // database gets its SELECT first (Valkey 9.1.2 tracks the stream's database from
            // 0, apart from the snapshot's).
            let (mut db, mut target) = (0u32, snapshot_db);
            for c in &cap.cmds[cap.eof + 1..] {
                if c[0] == b"SELECT" {
                    db = text(&c[1]).parse().unwrap();
                    continue;
                }
                if c[0] != b"CLUSTER" && db != target {
                    want.extend_from_slice(&command_bytes(&[
                        b"SELECT".to_vec(),
                        db.to_string().into_bytes(),
                    ]));
                    target = db;
                }
                want.extend_from_slice(&command_bytes(c));
            }
            same_commands(&out, &want, &format!("{scenario} step {step_bytes}"));
            if scenario == "multidb" {
                // Valkey's stream lacks the SELECT 0 after the snapshot (the write lands in
                // db 2 on the target): ours has it.
                let eof = command_bytes(&cap.cmds[cap.eof]);
                let at = out.windows(eof.len()).position(|w| w == eof).unwrap() + eof.len();
                assert!(out[at..].starts_with(b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n"));
                assert_ne!(cap.cmds[cap.eof + 1][0], b"SELECT");
            } else {
                // One database: the same bytes as Valkey, streams aside.
                let valkey: Vec<u8> = cap
                    .cmds
                    .iter()
                    .filter(|c| !is_stream_cmd(c))
                    .flat_map(|c| command_bytes(c))
                    .collect();
                same_commands(&out, &valkey, scenario);
                assert_eq!(out, valkey, "{scenario}");
            }
        }
    }
}

/// Source side: the real target's replies and messages, in random chunks: the AUTH and
/// ESTABLISH replies, then its SYNCSLOTS messages for the node, the backlog reported right
/// before REQUEST-PAUSE.
#[test]
fn export_reads_a_real_valkey_target() {
    for scenario in SCENARIOS {
        let cap = capture(scenario);
        let t2s = read(scenario, "conn1.t2s.bin");
        for (seed, max) in [(1, 1), (2, 5), (3, 1 << 16)] {
            let mut asm = AsmPlane::new(cfg(), NOW);
            asm.handle_connected(cap.job, CONN, NOW).unwrap();
            let auth = cap.establish == 1;
            if auth {
                asm.send_auth(CONN, None, b"asm-secret", NOW).unwrap();
            }
            let establish = SyncSlots::Establish {
                source: Some(cap.source),
                name: cap.job,
                ranges: cap.ranges.clone(),
            };
            asm.send_message(CONN, &establish, NOW);
            let mut got = Vec::new();
            for c in chunks(&t2s, seed, max) {
                asm.handle_bytes(CONN, c, NOW);
                while let Some(o) = asm.poll_output() {
                    match o {
                        AsmOutput::Migration(MigrationInput::AuthReply { reply, .. }) => {
                            assert_eq!(reply, AuthReply::Ok);
                            got.push("auth".to_owned());
                        }
                        AsmOutput::Migration(MigrationInput::EstablishReply { line, .. }) => {
                            assert_eq!(line, b"+OK\r\n");
                            got.push("establish".to_owned());
                        }
                        AsmOutput::Migration(MigrationInput::LinkBacklog { bytes, .. }) => {
                            assert_eq!(bytes, 0);
                            got.push("backlog".to_owned());
                        }
                        AsmOutput::Migration(MigrationInput::Connected { .. }) => {}
                        AsmOutput::Send { .. } => {}
                        AsmOutput::SyncSlots { conn, argv } => {
                            assert_eq!(conn, CONN);
                            got.push(text(&argv[2]).to_owned());
                        }
                        other => panic!("unexpected {other:?}"),
                    }
                }
            }
            let mut want: Vec<String> = Vec::new();
            if auth {
                want.push("auth".into());
            }
            want.push("establish".into());
            for (c, _) in commands(&t2s[if auth { 10 } else { 5 }..]) {
                let sub = text(&c[2]).to_owned();
                if sub == "REQUEST-PAUSE" {
                    want.push("backlog".into());
                }
                want.push(sub);
            }
            assert_eq!(got, want, "{scenario}");
        }
    }
}

/// A real snapshot's last bytes say SNAPSHOT-EOF and our import tells the node, and our
/// export tells it `SnapshotDone` once the EOF is queued.
#[test]
fn snapshot_done_is_reported() {
    let cap = capture("plain");
    let mut asm = AsmPlane::new(cfg(), NOW);
    asm.handle_connected(cap.job, CONN, NOW).unwrap();
    asm.start_snapshot(CONN, &cap.ranges, SnapshotMode::SlotAtomic, NOW)
        .unwrap();
    let db = Db::new(4);
    assert_eq!(
        asm.snapshot_step(CONN, &db, NOW).unwrap(),
        SnapshotProgress::Done
    );
    let mut done = false;
    while let Some(o) = asm.poll_output() {
        if let AsmOutput::Migration(MigrationInput::SnapshotDone { job, result }) = o {
            assert_eq!(job, cap.job);
            assert_eq!(result, SnapshotResult::Done { cow_bytes: 0 });
            done = true;
        }
    }
    assert!(done);
}

/// Garbage after a real stream: what came before it is applied, then the link closes, and
/// the outcome is the same in one read or in many (found by the `asm_import_stream` fuzz
/// target: a protocol error used to drop the applies queued from the same read).
#[test]
fn import_keeps_what_came_before_a_protocol_error() {
    let cap = capture("plain");
    let mut bytes = cap.after_establish.clone();
    bytes.extend_from_slice(b"+garbage\r\n");
    let outcome = |chunked: bool| {
        let mut asm = AsmPlane::new(cfg(), NOW);
        asm.accept_import(cap.job, CONN, slots_of(&cap.ranges), &[], NOW)
            .unwrap();
        let mut seen = Vec::new();
        let pieces = if chunked {
            chunks(&bytes, 9, 700)
        } else {
            vec![&bytes[..]]
        };
        for c in pieces {
            asm.handle_bytes(CONN, c, NOW);
            while let Some(o) = asm.poll_output() {
                match o {
                    AsmOutput::Apply { argv, .. } => seen.push(format!("apply {}", text(&argv[0]))),
                    AsmOutput::SyncSlots { argv, .. } => seen.push(text(&argv[2]).to_owned()),
                    AsmOutput::Close { .. } => seen.push("close".into()),
                    AsmOutput::Migration(MigrationInput::LinkClosed { .. }) => {
                        seen.push("closed".into())
                    }
                    _ => {}
                }
            }
        }
        seen
    };
    let whole = outcome(false);
    assert_eq!(whole, outcome(true));
    let applies = cap.cmds[cap.establish + 1..]
        .iter()
        .filter(|c| c[0] != b"SELECT" && c[0] != b"CLUSTER")
        .count();
    assert_eq!(
        whole.iter().filter(|s| s.starts_with("apply")).count(),
        applies
    );
    assert_eq!(
        whole[whole.len() - 2..],
        ["close".to_owned(), "closed".to_owned()]
    );
}

//! The captures of real replication links (`tests/vectors/<flavor>-<framing>/`, made by
//! `tests/vectors/capture.py`) replayed through our state machines, in any chunking.

use ferrocluster_dataplane::resp::{command_bytes, CommandReader, Item, ReaderLimits};
use ferrocluster_dataplane::{
    CommandOutcome, ConnId, Event, Millis, Output, ReplId, Replication, ReplicationConfig, Reply,
    Restored, Role, StreamCommand,
};
use std::path::PathBuf;

const DIRS: [&str; 4] = [
    "redis-7.0-diskless",
    "redis-7.0-disk",
    "valkey-9.1-diskless",
    "valkey-9.1-disk",
];

fn read(dir: &str, f: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/vectors")
        .join(dir)
        .join(f);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{p:?}: {e}"))
}

/// The commands of a captured client stream.
fn commands(bytes: &[u8]) -> Vec<Vec<Vec<u8>>> {
    let mut r = CommandReader::new(ReaderLimits::default());
    r.push(bytes);
    let mut v = Vec::new();
    while let Some(i) = r.next_item().unwrap() {
        if let Item::Command(c) = i {
            v.push(c.argv);
        }
    }
    v
}

fn arg<'a>(cmds: &'a [Vec<Vec<u8>>], name: &str, opt: &str) -> Option<&'a [u8]> {
    cmds.iter()
        .find(|c| c[0] == name.as_bytes() && c.get(1).is_some_and(|a| a == opt.as_bytes()))
        .map(|c| c[2].as_slice())
}

#[derive(Debug, Default, PartialEq)]
struct Seen {
    to_primary: Vec<u8>,
    rdb: Vec<u8>,
    rdb_begun: usize,
    rdb_ended: usize,
    applied: Vec<StreamCommand>,
    transactions: Vec<Vec<StreamCommand>>,
    partial: usize,
    offset: u64,
}

fn drain(r: &mut Replication, s: &mut Seen) {
    while let Some(o) = r.poll_output() {
        match o {
            Output::ToPrimary { bytes, .. } => s.to_primary.extend(bytes),
            Output::RdbBegin { .. } => s.rdb_begun += 1,
            Output::RdbChunk(b) => s.rdb.extend(b),
            Output::RdbEnd => s.rdb_ended += 1,
            Output::Apply(c) => s.applied.push(c),
            Output::ApplyTransaction(t) => s.transactions.push(t),
            Output::Event(Event::LinkUp { partial: true }) => s.partial += 1,
            _ => {}
        }
    }
}

/// Our replica, configured like the captured one, fed the captured primary bytes in pieces.
fn replay(dir: &str, conn: u8, restored: Option<Restored>, cuts: &[usize]) -> Seen {
    let real = commands(&read(dir, &format!("conn{conn}.r2p.bin")));
    let cfg = ReplicationConfig {
        listening_port: std::str::from_utf8(arg(&real, "REPLCONF", "listening-port").unwrap())
            .unwrap()
            .parse()
            .unwrap(),
        replica_version: arg(&real, "REPLCONF", "version")
            .map(|v| String::from_utf8(v.to_vec()).unwrap()),
        ..ReplicationConfig::default()
    };
    let now = Millis(1_000);
    let role = Role::Replica {
        host: "127.0.0.1".into(),
        port: 6379,
    };
    let mut r = Replication::new(cfg, 3, role, restored, now).unwrap();
    let mut link = None;
    while let Some(o) = r.poll_output() {
        if let Output::Connect { link: l, .. } = o {
            link = Some(l);
        }
    }
    let link = link.unwrap();
    r.handle_upstream_connected(link, now);
    let mut s = Seen::default();
    drain(&mut r, &mut s);
    let stream = read(dir, &format!("conn{conn}.p2r.bin"));
    let mut last = 0;
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
    cuts.sort();
    cuts.push(stream.len());
    for c in cuts {
        r.handle_upstream_bytes(link, &stream[last..c], now)
            .unwrap();
        drain(&mut r, &mut s);
        last = c;
    }
    s.offset = r.offset();
    s
}

fn cmd(db: u32, argv: &[&str]) -> StreamCommand {
    StreamCommand {
        db,
        argv: argv.iter().map(|a| a.as_bytes().to_vec()).collect(),
    }
}

/// The RDB payload inside a captured full sync.
fn payload(p2r: &[u8]) -> (ReplId, Vec<u8>, usize) {
    let fr = p2r.windows(11).position(|w| w == b"+FULLRESYNC").unwrap();
    let id = ReplId::parse(&p2r[fr + 12..fr + 52]).unwrap();
    let pre = fr + p2r[fr..].iter().position(|&c| c == b'\n').unwrap() + 1;
    let nl = pre + p2r[pre..].iter().position(|&c| c == b'\n').unwrap();
    let line = &p2r[pre..nl - 1];
    if let Some(mark) = line.strip_prefix(b"$EOF:") {
        let end = nl + 1 + p2r[nl + 1..].windows(40).position(|w| w == mark).unwrap();
        (id, p2r[nl + 1..end].to_vec(), end + 40)
    } else {
        let n: usize = std::str::from_utf8(&line[1..]).unwrap().parse().unwrap();
        (id, p2r[nl + 1..nl + 1 + n].to_vec(), nl + 1 + n)
    }
}

/// A full sync from each captured primary: our handshake is the real replica's byte for
/// byte, the RDB comes out whole, the stream's commands come out with their databases and the
/// transaction as one, and the ACK to `REPLCONF GETACK *` carries the offset the real replica
/// sent.
#[test]
fn replica_replays_real_full_syncs() {
    for dir in DIRS {
        let s = replay(dir, 1, None, &[]);
        let real_r2p = read(dir, "conn1.r2p.bin");
        let psync_end = {
            let cmds = commands(&real_r2p);
            let n = cmds.iter().position(|c| c[0] == b"PSYNC").unwrap() + 1;
            cmds[..n]
                .iter()
                .map(|c| command_bytes(c).len())
                .sum::<usize>()
        };
        assert_eq!(
            String::from_utf8_lossy(&s.to_primary[..psync_end]),
            String::from_utf8_lossy(&real_r2p[..psync_end]),
            "{dir}: handshake"
        );
        let p2r = read(dir, "conn1.p2r.bin");
        let (_, rdb, end) = payload(&p2r);
        assert_eq!(s.rdb, rdb, "{dir}: RDB");
        assert_eq!((s.rdb_begun, s.rdb_ended), (1, 1));
        assert_eq!(
            s.offset,
            (p2r.len() - end) as u64,
            "{dir}: offset counts the stream"
        );
        assert_eq!(s.applied.len(), 3, "{dir}: {:?}", s.applied);
        assert_eq!(s.applied[0], cmd(0, &["SET", "k1", "v1"]));
        assert_eq!(s.applied[1], cmd(3, &["SET", "k3", "v3"]));
        assert_eq!(
            s.applied[2].argv[..3],
            cmd(3, &["SET", "ttl", "t"]).argv[..]
        );
        assert_eq!(
            s.transactions,
            vec![vec![
                cmd(3, &["INCRBY", "counter", "1"]),
                cmd(3, &["RPUSH", "list", "x", "y"])
            ]]
        );
        // Our ACKs: one right after the RDB (as Valkey), one for the GETACK.
        let ours: Vec<Vec<u8>> = commands(&s.to_primary[psync_end..])
            .into_iter()
            .map(|c| c[2].clone())
            .collect();
        let real: Vec<Vec<u8>> = commands(&real_r2p[psync_end..])
            .into_iter()
            .map(|c| c[2].clone())
            .collect();
        assert_eq!(ours.len(), 2, "{dir}");
        assert_eq!(ours[0], b"0");
        assert!(
            real.contains(&ours[1]),
            "{dir}: GETACK answer {:?} in {real:?}",
            ours[1]
        );
    }
}

/// The captured reconnections: restored with the first connection's replid and the offset the
/// real replica asked for, our handshake (PSYNC <replid> <offset>) is the real one byte for
/// byte and `+CONTINUE` resumes the stream.
#[test]
fn replica_replays_real_partial_resyncs() {
    for dir in DIRS {
        let (replid, _, _) = payload(&read(dir, "conn1.p2r.bin"));
        let real = read(dir, "conn2.r2p.bin");
        let cmds = commands(&real);
        let psync = cmds.iter().find(|c| c[0] == b"PSYNC").unwrap();
        let asked: u64 = std::str::from_utf8(&psync[2]).unwrap().parse().unwrap();
        let restored = Restored {
            replid,
            offset: asked - 1,
            stream_db: 3,
        };
        let s = replay(dir, 2, Some(restored), &[]);
        assert_eq!(
            String::from_utf8_lossy(&s.to_primary),
            String::from_utf8_lossy(&real),
            "{dir}"
        );
        assert_eq!(s.partial, 1);
        assert_eq!(s.applied, vec![cmd(3, &["SET", "k2", "after-reconnect"])]);
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// Any chunking of the captured streams gives the same outcome.
    #[test]
    fn real_streams_in_any_chunking(which in 0usize..4, cuts in proptest::collection::vec(proptest::num::usize::ANY, 0..40)) {
        let dir = DIRS[which];
        let whole = replay(dir, 1, None, &[]);
        let parts = replay(dir, 1, None, &cuts);
        proptest::prop_assert_eq!(whole, parts);
    }
}

/// Our primary answers each captured real replica's handshake as the real primary did: `+OK`
/// to every REPLCONF, then `+FULLRESYNC <replid> 0` and the framing of the configuration.
#[test]
fn primary_answers_real_replica_handshakes() {
    for dir in DIRS {
        let diskless = dir.ends_with("diskless");
        let cfg = ReplicationConfig {
            diskless_sync: diskless,
            diskless_sync_delay_ms: 0,
            ..ReplicationConfig::default()
        };
        let now = Millis(5_000);
        let mut p = Replication::new(cfg, 9, Role::Primary, None, now).unwrap();
        let conn = ConnId(1);
        let mut wire = Vec::new();
        let real_p2r = read(dir, "conn1.p2r.bin");
        let mut snapshot = None;
        for argv in commands(&read(dir, "conn1.r2p.bin")) {
            if argv[0] == b"PING" {
                wire.extend(Reply::Simple("PONG".into()).to_resp2()); // the host's part
                continue;
            }
            if let CommandOutcome::Reply(r) = p.handle_command(conn, None, &argv, now).unwrap() {
                wire.extend(r.to_resp2());
            }
            while let Some(o) = p.poll_output() {
                match o {
                    Output::ToReplica { bytes, .. } => wire.extend(bytes),
                    Output::StartSnapshot { id, .. } => snapshot = Some(id),
                    _ => {}
                }
            }
            if argv[0] == b"PSYNC" {
                break;
            }
        }
        let fr = real_p2r
            .windows(11)
            .position(|w| w == b"+FULLRESYNC")
            .unwrap();
        assert_eq!(&wire[..fr], &real_p2r[..fr], "{dir}: replies before PSYNC");
        let line = format!("+FULLRESYNC {} 0\r\n", p.replid());
        assert_eq!(&wire[fr..fr + line.len()], line.as_bytes(), "{dir}");
        let id = snapshot.unwrap();
        if diskless {
            assert!(wire[fr + line.len()..].starts_with(b"$EOF:"));
            assert_eq!(wire.len(), fr + line.len() + 5 + 40 + 2);
        } else {
            assert_eq!(wire.len(), fr + line.len());
            p.handle_snapshot_ready(id, 3, now).unwrap();
            p.handle_snapshot_chunk(id, b"abc", now).unwrap();
            p.handle_snapshot_end(id, now).unwrap();
            let mut rest = Vec::new();
            while let Some(o) = p.poll_output() {
                if let Output::ToReplica { bytes, .. } = o {
                    rest.extend(bytes);
                }
            }
            assert_eq!(rest, b"$3\r\nabc");
        }
    }
}

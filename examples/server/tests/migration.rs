//! Slot migration against clusters of our servers: the legacy path as `redis-cli --cluster
//! reshard/rebalance` drives it (CLUSTER SETSLOT + MIGRATE/RESTORE-ASKING), DUMP/RESTORE
//! error texts, and atomic slot migration (CLUSTER MIGRATESLOTS) with redis-py writing
//! during it, plus its cancellation. Ports from `common::ports` (bus ports +10000). Missing
//! tools make the tests fail with an install hint.

mod common;

use common::{
    bulk_text, ports, require_redis_py, require_redis_tools, run_bounded, six_node_cluster,
    test_dir, wait_cluster_ok, Client, Procs, HANG,
};
use std::path::PathBuf;
use std::time::Duration;

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn script(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(name)
        .display()
        .to_string()
}

/// Three primaries formed with `redis-cli --cluster create`.
fn three_primaries(procs: &mut Procs, dir: &std::path::Path) -> Vec<u16> {
    let ports = ports::ports(3);
    let timeout = common::NODE_TIMEOUT_MS.to_string();
    for &p in &ports {
        procs.start(dir, p, &["--cluster-node-timeout", &timeout]);
    }
    let mut args = s(&["--cluster", "create"]);
    args.extend(ports.iter().map(|p| format!("127.0.0.1:{p}")));
    args.push("--cluster-yes".into());
    let (ok, out) = run_bounded("redis-cli", &args, HANG);
    assert!(ok, "redis-cli --cluster create failed:\n{out}");
    wait_cluster_ok(&ports);
    ports
}

fn cli(args: &[&str]) -> String {
    let (ok, out) = run_bounded("redis-cli", &s(args), Duration::from_secs(400));
    assert!(ok, "redis-cli {args:?} failed:\n{out}");
    out
}

fn check_cluster(port: u16) {
    let out = cli(&["--cluster", "check", &format!("127.0.0.1:{port}")]);
    assert!(
        out.contains("[OK] All nodes agree about slots configuration."),
        "{out}"
    );
    assert!(out.contains("[OK] All 16384 slots covered."), "{out}");
    assert!(
        !out.contains("[WARNING]") && !out.contains("[ERR]"),
        "check found open slots or errors:\n{out}"
    );
}

/// Waits until every node on `ports` shows the same slot map: after a reshard or rebalance
/// `redis-cli` sets the new owner on the primaries, the others learn it by gossip, and until
/// then `--cluster check` reports "Nodes don't agree" (and a reshard refuses to start).
fn wait_agree(ports: &[u16]) {
    ferrocluster_testkit::cluster::wait_agree(ports, |port| {
        Ok(bulk_text(&Client::connect(port).cmd(&["CLUSTER", "NODES"])))
    });
}

/// Reads every `key:i` through `redis-cli -c` (following MOVED/ASK) and counts the right values.
fn read_back(port: u16, n: usize) -> usize {
    (0..n)
        .step_by(1)
        .filter(|i| {
            let out = cli(&["-c", "-p", &port.to_string(), "GET", &format!("key:{i}")]);
            out.trim() == format!("value:{i}")
        })
        .count()
}

#[test]
fn dump_restore_and_migrate_texts() {
    require_redis_tools();
    let mut procs = Procs::default();
    let dir = test_dir("migrate-texts");
    // Two standalone servers: MIGRATE then sends plain RESTORE.
    // `nobody`: a port of ours nothing listens on.
    let [a_port, b_port, nobody] = ports::ports(3)[..] else {
        unreachable!()
    };
    procs.start(&dir, a_port, &["--cluster-enabled", "no"]);
    procs.start(&dir, b_port, &["--cluster-enabled", "no"]);
    let mut a = Client::connect(a_port);
    let mut b = Client::connect(b_port);
    let target = b_port.to_string();
    assert_eq!(a.cmd_s(&["SET", "k", "v"]), "+OK\r\n");
    let payload = bulk_text(&a.cmd(&["DUMP", "k"]));
    assert_eq!(a.cmd_s(&["DUMP", "nokey"]), "$-1\r\n");
    // RESTORE onto an existing key without REPLACE: Redis's BUSYKEY text.
    let dump = a.cmd(&["DUMP", "k"]);
    let raw = &dump[dump.iter().position(|&c| c == b'\n').unwrap() + 1..dump.len() - 2];
    let restore = |c: &mut Client, extra: &[&[u8]]| {
        let mut args: Vec<&[u8]> = vec![b"RESTORE", b"k", b"0", raw];
        args.extend_from_slice(extra);
        c.send_raw(&common::encode(&args));
        String::from_utf8_lossy(&c.read_reply()).into_owned()
    };
    assert_eq!(
        restore(&mut a, &[]),
        "-BUSYKEY Target key name already exists.\r\n"
    );
    assert_eq!(restore(&mut a, &[b"REPLACE"]), "+OK\r\n");
    assert_eq!(
        restore(&mut a, &[b"REPLACE", b"IDLETIME", b"10"]),
        "+OK\r\n"
    );
    assert_eq!(
        restore(&mut a, &[b"REPLACE", b"FREQ", b"300"]),
        "-ERR Invalid FREQ value, must be >= 0 and <= 255\r\n"
    );
    assert_eq!(restore(&mut b, &[]), "+OK\r\n");
    assert_eq!(b.cmd_s(&["GET", "k"]), "$1\r\nv\r\n");
    assert!(!payload.is_empty());
    // A flipped byte fails the checksum.
    let mut bad = raw.to_vec();
    bad[2] ^= 0xff;
    b.send_raw(&common::encode(&[b"RESTORE", b"k2", b"0", &bad]));
    assert_eq!(
        String::from_utf8_lossy(&b.read_reply()),
        "-ERR DUMP payload version or checksum are wrong\r\n"
    );
    assert_eq!(
        a.cmd_s(&["RESTORE", "k3", "-1", "x"]),
        "-ERR Invalid TTL value, must be >= 0\r\n"
    );
    // MIGRATE: NOKEY, KEYS form rules, COPY, REPLACE, BUSYKEY from the target, TTL kept.
    assert_eq!(
        a.cmd_s(&["MIGRATE", "127.0.0.1", &target, "missing", "0", "60000"]),
        "+NOKEY\r\n"
    );
    assert_eq!(
        a.cmd_s(&[
            "MIGRATE",
            "127.0.0.1",
            &target,
            "k",
            "0",
            "60000",
            "KEYS",
            "k"
        ]),
        "-ERR When using MIGRATE KEYS option, the key argument must be set to the empty string\r\n"
    );
    assert_eq!(
        a.cmd_s(&["MIGRATE", "127.0.0.1", &target, "k", "0", "60000"]),
        "-ERR Target instance replied with error: BUSYKEY Target key name already exists.\r\n"
    );
    assert_eq!(a.cmd_s(&["EXISTS", "k"]), ":1\r\n");
    assert_eq!(
        a.cmd_s(&[
            "MIGRATE",
            "127.0.0.1",
            &target,
            "k",
            "0",
            "60000",
            "COPY",
            "REPLACE"
        ]),
        "+OK\r\n"
    );
    assert_eq!(a.cmd_s(&["EXISTS", "k"]), ":1\r\n");
    assert_eq!(a.cmd_s(&["SET", "t1", "x", "PX", "100000"]), "+OK\r\n");
    assert_eq!(a.cmd_s(&["SET", "t2", "y"]), "+OK\r\n");
    assert_eq!(
        a.cmd_s(&[
            "MIGRATE",
            "127.0.0.1",
            &target,
            "",
            "0",
            "60000",
            "KEYS",
            "t1",
            "t2",
            "nope"
        ]),
        "+OK\r\n"
    );
    assert_eq!(a.cmd_s(&["EXISTS", "t1", "t2"]), ":0\r\n");
    assert_eq!(b.cmd_s(&["GET", "t2"]), "$1\r\ny\r\n");
    let pttl: i64 = b.cmd_s(&["PTTL", "t1"]).trim()[1..].parse().unwrap();
    assert!(pttl > 0 && pttl <= 100_000, "PTTL after MIGRATE: {pttl}");
    // Nothing listens on `nobody`.
    assert_eq!(
        a.cmd_s(&["MIGRATE", "127.0.0.1", &nobody.to_string(), "k", "0", "500"]),
        "-IOERR error or timeout connecting to the client\r\n"
    );
}

#[test]
fn redis_cli_reshard_and_rebalance_then_check() {
    require_redis_tools();
    let mut procs = Procs::default();
    let dir = test_dir("migrate-legacy");
    let ports = three_primaries(&mut procs, &dir);
    let n = 300;
    let mut pipe = String::new();
    for i in 0..n {
        pipe.push_str(&format!("SET key:{i} value:{i}\n"));
    }
    let file = dir.join("keys.txt");
    std::fs::write(&file, pipe).unwrap();
    let (ok, out) = run_bounded(
        "sh",
        &[
            "-c".into(),
            format!("redis-cli -c -p {} < {}", ports[0], file.display()),
        ],
        Duration::from_secs(120),
    );
    assert!(ok, "writing keys failed: {out}");
    let id = |p: u16| bulk_text(&Client::connect(p).cmd(&["CLUSTER", "MYID"]));
    let (from, to) = (id(ports[0]), id(ports[1]));
    let out = cli(&[
        "--cluster",
        "reshard",
        &format!("127.0.0.1:{}", ports[0]),
        "--cluster-from",
        &from,
        "--cluster-to",
        &to,
        "--cluster-slots",
        "200",
        "--cluster-yes",
    ]);
    assert!(out.contains("Moving slot"), "{out}");
    wait_agree(&ports);
    check_cluster(ports[2]);
    let slots_of = |p: u16| {
        let nodes = bulk_text(&Client::connect(p).cmd(&["CLUSTER", "NODES"]));
        nodes
            .lines()
            .find(|l| l.contains("myself"))
            .map(|l| l.to_string())
            .unwrap_or_default()
    };
    assert!(
        slots_of(ports[0]).ends_with("200-5460"),
        "{}",
        slots_of(ports[0])
    );
    assert_eq!(read_back(ports[2], n), n);
    let out = cli(&[
        "--cluster",
        "rebalance",
        &format!("127.0.0.1:{}", ports[0]),
        "--cluster-yes",
    ]);
    assert!(out.contains("Moving"), "{out}");
    wait_agree(&ports);
    check_cluster(ports[1]);
    assert_eq!(read_back(ports[0], n), n);
    let total: i64 = ports
        .iter()
        .map(|&p| {
            Client::connect(p).cmd_s(&["DBSIZE"]).trim()[1..]
                .parse::<i64>()
                .unwrap()
        })
        .sum();
    assert_eq!(total, n as i64, "keys were duplicated or lost");
}

fn run_asm(ports: &[u16], src: u16, dst: u16, first: u16, last: u16, keys: usize, mode: &str) {
    let (ok, out) = run_bounded(
        "python3",
        &[
            script("redis_py_migration.py"),
            src.to_string(),
            dst.to_string(),
            first.to_string(),
            last.to_string(),
            keys.to_string(),
            mode.into(),
        ],
        Duration::from_secs(240),
    );
    assert!(ok, "redis-py ASM {mode} failed:\n{out}");
    assert!(
        out.contains(&format!("RESULT mode={mode} jobs_ok=True")),
        "{out}"
    );
    wait_cluster_ok(ports);
}

#[test]
fn atomic_slot_migration_live_and_cancelled() {
    require_redis_tools();
    require_redis_py();
    let mut procs = Procs::default();
    let dir = test_dir("migrate-asm");
    // Three primaries with one replica each: the import is propagated to the replicas too.
    let ports = six_node_cluster(&mut procs, &dir, ports::block(6));
    // The write pause of a migration's handoff is 2 x cluster-manual-failover-timeout (5 s by
    // default): on a loaded machine a handoff outlasting it would fail the export. Every node
    // gets HANG, so the migrations complete however slowly.
    common::manual_failover_timeout_hang(&ports);
    // --cluster create gives the first node slots 0-5460 and the second slots 5461-10922.
    run_asm(&ports, ports[0], ports[1], 100, 400, 3000, "success");
    // The slots moved back by a cancelled migration stay with the source.
    run_asm(&ports, ports[1], ports[2], 6000, 9000, 20000, "cancel");
    // The replicas learn the moved slots' owner by gossip: check once every view agrees.
    wait_agree(&ports);
    let (ok, out) = run_bounded(
        "redis-cli",
        &s(&["--cluster", "check", &format!("127.0.0.1:{}", ports[0])]),
        HANG,
    );
    assert!(ok && out.contains("[OK] All 16384 slots covered."), "{out}");
}

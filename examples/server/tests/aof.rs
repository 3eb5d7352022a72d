//! The append-only file (issue 19, its AOF part): crash tests (kill -9 at a seeded point under
//! a writer, for each `appendfsync` mode, and during BGREWRITEAOF), a torn last command loaded
//! with `aof-load-truncated yes` and refused with `no`, a bad file refused, and AOF
//! directories moving both ways between ours and redis-server 7.0 / valkey-server 9.1.2.
//! A replica writes an AOF of what it applies. Ports from `common::ports`.
//!
//! The kill points come from a seed (`FERROCLUSTER_AOF_SEED`, a fixed one by default; printed
//! with each point, so a run is replayed by giving it): these are crash tests, not timing
//! tests; what is checked holds at every kill point.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{
    bulk_text, ports, run_to_exit, start_real_server, test_dir, wait_until, Client, Logged, BIN,
    HANG,
};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Our server (standalone, no RDB saves) on `port` with its files and `stderr.log` in `dir`;
/// SIGKILLed when dropped, also when an assertion fails.
fn spawn_ours(dir: &Path, port: u16, extra: &[&str]) -> Logged {
    std::fs::create_dir_all(dir).unwrap();
    let mut cmd = std::process::Command::new(BIN);
    cmd.args(["--port", &port.to_string(), "--cluster-enabled", "no"])
        .arg("--dir")
        .arg(dir)
        .args(["--save", ""])
        .args(extra);
    let mut node = Logged::spawn(
        &mut cmd,
        &dir.join("stderr.log"),
        &format!("ferrocluster-server on {port}"),
    );
    node.wait_listening(port);
    node
}

fn kill9(mut node: Logged) {
    node.kill();
}

/// The wall clock, unix ms (the clock the servers stamp deadlines with).
fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// `key`'s deadline (`PEXPIRETIME`, unix ms) on `c`'s server.
fn pexpiretime(c: &mut Client, key: &str) -> i64 {
    let r = c.cmd_s(&["PEXPIRETIME", key]);
    r.strip_prefix(':')
        .and_then(|n| n.trim_end().parse().ok())
        .unwrap_or_else(|| panic!("PEXPIRETIME {key}: {r:?}"))
}

/// The seed of the kill points: `FERROCLUSTER_AOF_SEED` (decimal), else a fixed one, so a
/// run is replayed by giving the seed it printed.
const DEFAULT_SEED: u64 = 0x5eed_a0f1;

/// A kill point below `bound` for the test `label`: from the seed ([`DEFAULT_SEED`] or
/// `FERROCLUSTER_AOF_SEED`) and the label (each test its own point), printed with both.
fn kill_point(label: &str, bound: u64) -> u64 {
    let seed = std::env::var("FERROCLUSTER_AOF_SEED")
        .ok()
        .map(|s| {
            s.trim()
                .parse::<u64>()
                .unwrap_or_else(|_| panic!("FERROCLUSTER_AOF_SEED={s:?} is not a decimal u64"))
        })
        .unwrap_or(DEFAULT_SEED);
    // FNV-1a over the label, mixed with the seed (splitmix64's finaliser).
    let mut x = label.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    }) ^ seed;
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    let point = x % bound;
    println!("seed {seed} (FERROCLUSTER_AOF_SEED), {label}: kill point {point} of {bound}");
    point
}

/// A list `log` of 0..n, as the restarted node has it.
fn read_log(port: u16) -> Vec<u64> {
    let mut c = Client::connect(port);
    let r = c.cmd(&["LRANGE", "log", "0", "-1"]);
    let text = String::from_utf8_lossy(&r).into_owned();
    let mut lines = text.split("\r\n");
    let head = lines.next().unwrap();
    assert!(head.starts_with('*'), "{text}");
    lines
        .filter(|l| !l.starts_with('$') && !l.is_empty())
        .map(|l| l.parse().unwrap())
        .collect()
}

/// One writer connection: `RPUSH log i` for i = 0, 1, ... until the server dies. `sent`: the
/// commands sent; `acked`: the ones whose reply arrived.
fn writer(port: u16, sent: Arc<AtomicU64>, acked: Arc<AtomicU64>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(HANG)).unwrap();
        let mut buf = [0u8; 64];
        for i in 0u64.. {
            let v = i.to_string();
            let cmd = common::encode(&[b"RPUSH", b"log", v.as_bytes()]);
            sent.store(i + 1, Ordering::SeqCst);
            if s.write_all(&cmd).is_err() {
                return;
            }
            let want = format!(":{}\r\n", i + 1);
            let mut got = Vec::new();
            while got.len() < want.len() {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
            assert_eq!(String::from_utf8_lossy(&got), want);
            acked.store(i + 1, Ordering::SeqCst);
        }
    })
}

/// kill -9 under a writer at a seeded point, restart, check the list: a prefix of what was
/// sent (no holes, nothing invented), and with `always` every acknowledged element.
fn crash_under_writer(mode: &str, port: u16) {
    let dir = test_dir(&format!("aof-crash-{mode}"));
    let flags = ["--appendonly", "yes", "--appendfsync", mode];
    let node = spawn_ours(&dir, port, &flags);
    let (sent, acked) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let w = writer(port, Arc::clone(&sent), Arc::clone(&acked));
    // The kill point: a seeded moment after the first acknowledged write.
    wait_until("the writer's first reply", || {
        acked.load(Ordering::SeqCst) > 0 || w.is_finished()
    });
    std::thread::sleep(Duration::from_millis(kill_point(
        &format!("crash-{mode} (ms)"),
        700,
    )));
    kill9(node);
    let _ = w.join();
    let (sent, acked) = (sent.load(Ordering::SeqCst), acked.load(Ordering::SeqCst));
    assert!(acked > 0, "the writer got no reply before the kill");
    let node = spawn_ours(&dir, port, &flags);
    let got = read_log(port);
    let n = got.len() as u64;
    assert_eq!(
        got,
        (0..n).collect::<Vec<_>>(),
        "holes or invented elements"
    );
    assert!(n <= sent, "{n} elements, {sent} sent");
    if mode == "always" {
        assert!(n >= acked, "{n} elements, {acked} acknowledged");
    }
    println!("{mode}: sent {sent}, acknowledged {acked}, loaded {n}");
    kill9(node);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn kill_9_under_a_writer_with_appendfsync_always_keeps_every_acknowledged_write() {
    crash_under_writer("always", ports::port());
}

#[test]
fn kill_9_under_a_writer_with_appendfsync_everysec_keeps_a_prefix() {
    crash_under_writer("everysec", ports::port());
}

#[test]
fn kill_9_under_a_writer_with_appendfsync_no_keeps_a_prefix() {
    crash_under_writer("no", ports::port());
}

fn fill_pipelined(port: u16, n: usize) {
    let mut c = Client::connect(port);
    let value = "v".repeat(100);
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let mut bytes = Vec::new();
        for i in chunk {
            let k = format!("key:{i}");
            bytes.extend(common::encode(&[b"SET", k.as_bytes(), value.as_bytes()]));
        }
        c.send_raw(&bytes);
        for _ in chunk {
            assert_eq!(c.read_reply(), b"+OK\r\n");
        }
    }
}

fn info_field(port: u16, name: &str) -> String {
    let mut c = Client::connect(port);
    let info = bulk_text(&c.cmd(&["INFO", "persistence"]));
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in {info}"))
        .trim()
        .to_string()
}

#[test]
fn kill_9_during_bgrewriteaof_loads_the_old_or_the_new_set_fully() {
    let dir = test_dir("aof-crash-rewrite");
    let port = ports::port();
    let flags = ["--appendonly", "yes", "--appendfsync", "always"];
    let node = spawn_ours(&dir, port, &flags);
    let keys = 100_000;
    fill_pipelined(port, keys);
    // A first rewrite gives its duration (measured only to choose the kill point: nothing is
    // asserted on it); the second one is killed at a seeded point of it.
    let mut c = Client::connect(port);
    assert_eq!(
        c.cmd_s(&["BGREWRITEAOF"]),
        "+Background append only file rewriting started\r\n"
    );
    let started = Instant::now();
    while info_field(port, "aof_rewrite_in_progress") != "0" {
        assert!(
            started.elapsed() < HANG,
            "the first rewrite did not end within {HANG:?} (a hang)"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let took = started.elapsed().as_micros() as u64;
    let (sent, acked) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let w = writer(port, Arc::clone(&sent), Arc::clone(&acked));
    assert_eq!(
        c.cmd_s(&["BGREWRITEAOF"]),
        "+Background append only file rewriting started\r\n"
    );
    // Kill while the new base is being written (its temporary file is there), at a seeded
    // point of that window, or of the whole rewrite when the window is missed.
    let aofdir = dir.join("appendonlydir");
    let temp_present = || {
        std::fs::read_dir(&aofdir).unwrap().any(|e| {
            e.unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("temp-rewriteaof")
        })
    };
    let end = Instant::now() + Duration::from_micros(took);
    while !temp_present() && Instant::now() < end {}
    std::thread::sleep(Duration::from_micros(kill_point("rewrite (µs)", 2000)));
    kill9(node);
    let during = temp_present();
    let _ = w.join();
    let (sent, acked) = (sent.load(Ordering::SeqCst), acked.load(Ordering::SeqCst));
    println!("rewrite took {took} µs; killed with the temporary base file present: {during} (sent {sent}, acknowledged {acked})");
    let node = spawn_ours(&dir, port, &flags);
    let got = read_log(port);
    let n = got.len() as u64;
    assert_eq!(got, (0..n).collect::<Vec<_>>());
    assert!(
        n >= acked && n <= sent,
        "{n} elements, {acked} acknowledged, {sent} sent"
    );
    let mut c = Client::connect(port);
    let want = if n > 0 { keys + 1 } else { keys };
    assert_eq!(c.cmd_s(&["DBSIZE"]), format!(":{want}\r\n"));
    assert_eq!(
        c.cmd_s(&["STRLEN", &format!("key:{}", keys - 1)]),
        ":100\r\n"
    );
    // A manifest naming only files that exist, and no temporary file left to load.
    let manifest =
        std::fs::read_to_string(dir.join("appendonlydir/appendonly.aof.manifest")).unwrap();
    for line in manifest.lines() {
        let name = line.split_whitespace().nth(1).unwrap();
        assert!(dir.join("appendonlydir").join(name).exists(), "{name}");
    }
    kill9(node);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Writes a few commands with ours, stops it, and returns the incremental file's path.
fn small_aof(dir: &Path, port: u16) -> std::path::PathBuf {
    let node = spawn_ours(
        dir,
        port,
        &["--appendonly", "yes", "--appendfsync", "always"],
    );
    let mut c = Client::connect(port);
    assert_eq!(c.cmd_s(&["SET", "a", "1"]), "+OK\r\n");
    assert_eq!(c.cmd_s(&["SET", "b", "2"]), "+OK\r\n");
    kill9(node);
    dir.join("appendonlydir/appendonly.aof.1.incr.aof")
}

/// Appends `bytes` to the file at `path`.
fn append(path: &std::path::Path, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
}

#[test]
fn a_torn_last_command_is_cut_with_aof_load_truncated_yes_and_refused_with_no() {
    let dir = test_dir("aof-torn");
    let port = ports::port();
    let incr = small_aof(&dir, port);
    let whole = std::fs::read(&incr).unwrap().len() as u64;
    append(&incr, b"*3\r\n$3\r\nSET\r\n$1\r\nc\r\n$1");
    // Redis 7.0.15's lines for the same file (see the module docs of src/aof.rs).
    let (code, err) = run_to_exit(
        &dir,
        port,
        &[
            "--cluster-enabled",
            "no",
            "--appendonly",
            "yes",
            "--aof-load-truncated",
            "no",
        ],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("Unexpected end of file reading the append only file appendonly.aof.1.incr.aof. You can: 1) Make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>. 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server."),
        "{err}"
    );
    assert!(err.contains(&format!("offset {whole}")), "{err}");
    let node = spawn_ours(&dir, port, &["--appendonly", "yes"]);
    let mut c = Client::connect(port);
    assert_eq!(
        c.cmd_s(&["MGET", "a", "b", "c"]),
        "*3\r\n$1\r\n1\r\n$1\r\n2\r\n$-1\r\n"
    );
    let log = std::fs::read_to_string(dir.join("stderr.log")).unwrap();
    assert!(
        log.contains(
            "!!! Warning: short read while loading the AOF file appendonly.aof.1.incr.aof!!!"
        ),
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "!!! Truncating the AOF appendonly.aof.1.incr.aof at offset {whole} !!!"
        )),
        "{log}"
    );
    assert!(log.contains(
        "AOF appendonly.aof.1.incr.aof loaded anyway because aof-load-truncated is enabled"
    ));
    // Cut where the last whole command ended; new writes follow it.
    assert_eq!(std::fs::metadata(&incr).unwrap().len(), whole);
    assert_eq!(c.cmd_s(&["SET", "c", "3"]), "+OK\r\n");
    kill9(node);
    let node = spawn_ours(&dir, port, &["--appendonly", "yes"]);
    let mut c = Client::connect(port);
    assert_eq!(
        c.cmd_s(&["MGET", "a", "b", "c"]),
        "*3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n"
    );
    kill9(node);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_file_that_is_not_commands_refuses_to_start_with_the_file_offset_and_reason() {
    let dir = test_dir("aof-bad");
    let port = ports::port();
    let incr = small_aof(&dir, port);
    let whole = std::fs::read(&incr).unwrap().len() as u64;
    append(&incr, b"xx garbage\r\n");
    // Refused even with aof-load-truncated yes, as redis-server 7.0.15 does.
    let (code, err) = run_to_exit(
        &dir,
        port,
        &["--cluster-enabled", "no", "--appendonly", "yes"],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("Bad file format reading the append only file appendonly.aof.1.incr.aof: make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>"),
        "{err}"
    );
    assert!(err.contains(&format!("offset {whole}")), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The deadline (unix ms) of `fill`'s key `ttl` lies in this range: its `PX 600000` after
/// the clock read just before the SET and just after its reply.
type Deadline = (i64, i64);

/// A data set of every type, with a TTL; returns the TTL's deadline range.
fn fill(c: &mut Client) -> Deadline {
    assert_eq!(c.cmd_s(&["SET", "s", "v"]), "+OK\r\n");
    let before = unix_ms();
    assert_eq!(c.cmd_s(&["SET", "ttl", "x", "PX", "600000"]), "+OK\r\n");
    let deadline = (before + 600_000, unix_ms() + 600_000);
    assert_eq!(c.cmd_s(&["HSET", "h", "f", "1", "g", "2"]), ":2\r\n");
    assert_eq!(c.cmd_s(&["RPUSH", "l", "a", "b", "c"]), ":3\r\n");
    assert_eq!(c.cmd_s(&["SADD", "set", "1", "2", "x"]), ":3\r\n");
    assert_eq!(c.cmd_s(&["ZADD", "z", "1.5", "a", "2", "b"]), ":2\r\n");
    assert_eq!(c.cmd_s(&["INCR", "n"]), ":1\r\n");
    assert_eq!(c.cmd_s(&["SELECT", "3"]), "+OK\r\n");
    assert_eq!(c.cmd_s(&["SET", "in3", "x"]), "+OK\r\n");
    assert_eq!(c.cmd_s(&["SELECT", "0"]), "+OK\r\n");
    deadline
}

/// What `fill` wrote, read back: the TTL keeps its deadline (`deadline`, `fill`'s range).
fn check(port: u16, deadline: Deadline) {
    // A real server listens while it loads the AOF (and answers -LOADING meanwhile).
    wait_until(&format!("{port}: the AOF loaded"), || {
        info_field(port, "loading") == "0"
    });
    let mut c = Client::connect(port);
    assert_eq!(c.cmd_s(&["GET", "s"]), "$1\r\nv\r\n");
    let at = pexpiretime(&mut c, "ttl");
    assert!(
        (deadline.0..=deadline.1).contains(&at),
        "ttl's deadline {at}, set in {deadline:?}"
    );
    assert_eq!(c.cmd_s(&["HGET", "h", "g"]), "$1\r\n2\r\n");
    assert_eq!(
        c.cmd_s(&["LRANGE", "l", "0", "-1"]),
        "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"
    );
    assert_eq!(c.cmd_s(&["SCARD", "set"]), ":3\r\n");
    assert_eq!(c.cmd_s(&["ZSCORE", "z", "a"]), "$3\r\n1.5\r\n");
    assert_eq!(c.cmd_s(&["GET", "n"]), "$1\r\n1\r\n");
    assert_eq!(c.cmd_s(&["DBSIZE"]), ":7\r\n");
    assert_eq!(c.cmd_s(&["SELECT", "3"]), "+OK\r\n");
    assert_eq!(c.cmd_s(&["GET", "in3"]), "$1\r\nx\r\n");
}

/// Half of `fill` before a rewrite, half after: the directory has a base and increments.
/// Returns `fill`'s TTL deadline range.
fn fill_with_rewrite(port: u16) -> Deadline {
    let mut c = Client::connect(port);
    let deadline = fill(&mut c);
    assert_eq!(
        c.cmd_s(&["BGREWRITEAOF"]),
        "+Background append only file rewriting started\r\n"
    );
    wait_until("rewrite done", || {
        info_field(port, "aof_rewrite_in_progress") == "0"
    });
    assert_eq!(c.cmd_s(&["DEL", "s"]), ":1\r\n");
    assert_eq!(c.cmd_s(&["SET", "s", "v"]), "+OK\r\n");
    deadline
}

fn shutdown(port: u16) {
    let mut c = Client::connect(port);
    c.send_raw(&common::encode(&[b"SHUTDOWN", b"NOSAVE"]));
    let _ = c.read_to_close();
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

#[test]
fn redis_7_aof_directories_load_in_ours_and_ours_load_in_redis_and_valkey() {
    let base = test_dir("aof-interop");
    let [redis_port, from_redis, ours_port, redis_from_ours, valkey_from_ours] =
        ports::ports(5)[..]
    else {
        unreachable!()
    };
    // redis-server 7.0 writes an AOF directory (base RDB + increments), stops.
    let rdir = base.join("redis");
    let deadline = {
        let mut r = start_real_server(
            "redis-server",
            redis_port,
            &rdir,
            &["--appendonly", "yes", "--appendfsync", "always"],
        );
        let deadline = fill_with_rewrite(redis_port);
        shutdown(redis_port);
        r.0.wait_exit();
        deadline
    };
    // `start_real_server` passes `--appendonly no` first; ours is given yes.
    let ours_from_redis = base.join("ours-from-redis");
    copy_dir(
        &rdir.join("appendonlydir"),
        &ours_from_redis.join("appendonlydir"),
    );
    let node = spawn_ours(&ours_from_redis, from_redis, &["--appendonly", "yes"]);
    check(from_redis, deadline);
    kill9(node);

    // Ours writes one with an RDB base, one with a command base; redis-server 7.0 and
    // valkey-server 9.1.2 load each.
    for preamble in ["yes", "no"] {
        let odir = base.join(format!("ours-{preamble}"));
        let mut node = spawn_ours(
            &odir,
            ours_port,
            &["--appendonly", "yes", "--aof-use-rdb-preamble", preamble],
        );
        let deadline = fill_with_rewrite(ours_port);
        shutdown(ours_port);
        node.wait_exit();
        let manifest =
            std::fs::read_to_string(odir.join("appendonlydir/appendonly.aof.manifest")).unwrap();
        let ext = if preamble == "yes" { "rdb" } else { "aof" };
        assert_eq!(
            manifest,
            format!("file appendonly.aof.2.base.{ext} seq 2 type b\nfile appendonly.aof.2.incr.aof seq 2 type i\n")
        );
        for (bin, port) in [
            ("redis-server", redis_from_ours),
            ("valkey-server", valkey_from_ours),
        ] {
            let d = base.join(format!("{bin}-from-ours-{preamble}"));
            copy_dir(&odir.join("appendonlydir"), &d.join("appendonlydir"));
            let _r = start_real_server(bin, port, &d, &["--appendonly", "yes"]);
            check(port, deadline);
        }
    }
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn config_set_appendonly_yes_rewrites_first_and_info_shows_the_aof() {
    let dir = test_dir("aof-config");
    let port = ports::port();
    let node = spawn_ours(&dir, port, &[]);
    let mut c = Client::connect(port);
    assert_eq!(c.cmd_s(&["SET", "before", "1"]), "+OK\r\n");
    assert_eq!(info_field(port, "aof_enabled"), "0");
    assert_eq!(
        c.cmd_s(&["CONFIG", "GET", "appendfsync"]),
        "*2\r\n$11\r\nappendfsync\r\n$8\r\neverysec\r\n"
    );
    // redis-server 7.0.15's and valkey-server 9.1.2's texts.
    for (name, value, why) in [
        (
            "appendfsync",
            "x",
            "argument(s) must be one of the following: everysec, always, no",
        ),
        ("appenddirname", "x", "can't set immutable config"),
        ("appendfilename", "x", "can't set immutable config"),
        (
            "auto-aof-rewrite-percentage",
            "-1",
            "argument must be between 0 and 2147483647 inclusive",
        ),
    ] {
        assert_eq!(
            c.cmd_s(&["CONFIG", "SET", name, value]),
            format!("-ERR CONFIG SET failed (possibly related to argument '{name}') - {why}\r\n")
        );
    }
    assert_eq!(
        c.cmd_s(&["CONFIG", "GET", "auto-aof-rewrite-min-size"]),
        "*2\r\n$25\r\nauto-aof-rewrite-min-size\r\n$8\r\n67108864\r\n"
    );
    // With the AOF off a rewrite writes a base only, as redis-server 7.0.15 does.
    assert_eq!(
        c.cmd_s(&["BGREWRITEAOF"]),
        "+Background append only file rewriting started\r\n"
    );
    wait_until("rewrite done", || {
        info_field(port, "aof_rewrite_in_progress") == "0"
    });
    assert_eq!(
        std::fs::read_to_string(dir.join("appendonlydir/appendonly.aof.manifest")).unwrap(),
        "file appendonly.aof.1.base.rdb seq 1 type b\n"
    );
    assert_eq!(info_field(port, "aof_enabled"), "0");
    assert_eq!(c.cmd_s(&["CONFIG", "SET", "appendonly", "yes"]), "+OK\r\n");
    assert_eq!(c.cmd_s(&["SET", "after", "2"]), "+OK\r\n");
    wait_until("rewrite done", || {
        info_field(port, "aof_rewrite_in_progress") == "0"
    });
    assert_eq!(info_field(port, "aof_enabled"), "1");
    assert_eq!(info_field(port, "aof_last_bgrewrite_status"), "ok");
    assert_eq!(info_field(port, "aof_last_write_status"), "ok");
    assert_eq!(info_field(port, "aof_rewrites"), "2");
    assert_eq!(
        std::fs::read_to_string(dir.join("appendonlydir/appendonly.aof.manifest")).unwrap(),
        "file appendonly.aof.2.base.rdb seq 2 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n"
    );
    let size: u64 = info_field(port, "aof_current_size").parse().unwrap();
    let base: u64 = info_field(port, "aof_base_size").parse().unwrap();
    let d = dir.join("appendonlydir");
    let on_disk: u64 = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| !e.file_name().to_string_lossy().ends_with(".manifest"))
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert_eq!(size, on_disk);
    assert_eq!(
        base,
        std::fs::metadata(d.join("appendonly.aof.2.base.rdb"))
            .unwrap()
            .len()
    );
    kill9(node);
    // Loaded from the AOF (not from an RDB: there is none, `save ""`); its commands entered
    // no replication stream.
    let node = spawn_ours(&dir, port, &["--appendonly", "yes"]);
    let mut c = Client::connect(port);
    assert!(bulk_text(&c.cmd(&["INFO", "replication"])).contains("master_repl_offset:0\r\n"));
    assert_eq!(
        c.cmd_s(&["MGET", "before", "after"]),
        "*2\r\n$1\r\n1\r\n$1\r\n2\r\n"
    );
    kill9(node);
    let _ = std::fs::remove_dir_all(&dir);
}

fn myid(port: u16) -> String {
    bulk_text(&Client::connect(port).cmd(&["CLUSTER", "MYID"]))
}

/// A replica writes an AOF of what it applies from its primary (the full copy as a rewrite's
/// base, then the stream): restarted alone, it has the primary's writes.
#[test]
fn a_replica_writes_an_aof_of_what_it_applies() {
    let [p, r] = ports::ports(2)[..] else {
        unreachable!()
    };
    let dir = test_dir("aof-replica");
    let mut procs = common::Procs::default();
    let flags = [
        "--appendonly",
        "yes",
        "--cluster-node-timeout",
        "2000",
        "--cluster-allow-reads-when-down",
        "yes",
    ];
    procs.start(&dir, p, &flags);
    procs.start(&dir, r, &flags);
    let mut cp = Client::connect(p);
    assert_eq!(
        cp.cmd_s(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]),
        "+OK\r\n"
    );
    wait_until("cluster_state:ok", || {
        bulk_text(&Client::connect(p).cmd(&["CLUSTER", "INFO"])).contains("cluster_state:ok")
    });
    // Written before the replica syncs: they come in its full copy.
    assert_eq!(cp.cmd_s(&["SET", "early", "1"]), "+OK\r\n");
    let pid = myid(p);
    assert_eq!(
        Client::connect(r).cmd_s(&["CLUSTER", "MEET", "127.0.0.1", &p.to_string()]),
        "+OK\r\n"
    );
    wait_until("the MEET completes", || {
        bulk_text(&Client::connect(r).cmd(&["CLUSTER", "NODES"])).contains(&pid)
    });
    assert_eq!(
        Client::connect(r).cmd_s(&["CLUSTER", "REPLICATE", &pid]),
        "+OK\r\n"
    );
    wait_until("the replica to sync", || {
        Client::connect(p).cmd_s(&["WAIT", "1", "100"]) == ":1\r\n"
    });
    // Then the stream. `k:0`'s deadline lies 1000 s after a clock read around its SET.
    let mut cp = Client::connect(p);
    let before = unix_ms();
    let mut deadline = (0, 0);
    for i in 0..50 {
        let k = format!("k:{i}");
        assert_eq!(
            cp.cmd_s(&["SET", &k, &i.to_string(), "EX", "1000"]),
            "+OK\r\n"
        );
        if i == 0 {
            deadline = (before + 1_000_000, unix_ms() + 1_000_000);
        }
    }
    let wait = HANG.as_millis().to_string();
    assert_eq!(cp.cmd_s(&["WAIT", "1", &wait]), ":1\r\n");
    wait_until("the replica's AOF written", || {
        info_field(r, "aof_buffer_length") == "0" && info_field(r, "aof_rewrite_in_progress") == "0"
    });
    procs.kill(p);
    procs.kill(r);
    procs.start(&dir, r, &flags);
    let mut cr = Client::connect(r);
    assert_eq!(cr.cmd_s(&["DBSIZE"]), ":51\r\n");
    // Its slots have no serving primary now: the values are read from the same AOF by a
    // standalone start.
    procs.kill(r);
    procs.start(&dir, r, &["--cluster-enabled", "no", "--appendonly", "yes"]);
    let mut cr = Client::connect(r);
    assert_eq!(cr.cmd_s(&["GET", "k:49"]), "$2\r\n49\r\n");
    assert_eq!(cr.cmd_s(&["GET", "early"]), "$1\r\n1\r\n");
    let at = pexpiretime(&mut cr, "k:0");
    assert!(
        (deadline.0..=deadline.1).contains(&at),
        "k:0's deadline {at}, set in {deadline:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

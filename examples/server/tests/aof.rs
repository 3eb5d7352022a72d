//! The append-only file (issue 19, its AOF part): crash tests (kill -9 at a random point under
//! a writer, for each `appendfsync` mode, and during BGREWRITEAOF), a torn last command loaded
//! with `aof-load-truncated yes` and refused with `no`, a bad file refused, and AOF
//! directories moving both ways between ours and redis-server 7.0 / valkey-server 9.1.2.
//! A replica writes an AOF of what it applies. Ports 23260-23273 (bus ports +10000).
//!
//! The kill points are random (the seed is printed): these are crash tests, not timing tests;
//! what is checked holds at every kill point.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{bulk_text, run_to_exit, start_real_server, test_dir, Client, BIN};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Our server; killed (SIGKILL) when dropped, also when an assertion fails.
struct Node(std::process::Child);

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_ours(dir: &Path, port: u16, extra: &[&str]) -> Node {
    std::fs::create_dir_all(dir).unwrap();
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("stderr.log"))
        .unwrap();
    let child = std::process::Command::new(BIN)
        .args(["--port", &port.to_string(), "--cluster-enabled", "no"])
        .arg("--dir")
        .arg(dir)
        .args(["--save", ""])
        .args(extra)
        .stderr(log)
        .spawn()
        .unwrap();
    let node = Node(child);
    common::wait_for_port(port);
    node
}

fn kill9(node: Node) {
    drop(node);
}

fn seed() -> u64 {
    let s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    println!("seed {s}");
    s
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
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
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

/// kill -9 under a writer at a random point, restart, check the list: a prefix of what was
/// sent (no holes, nothing invented), and with `always` every acknowledged element.
fn crash_under_writer(mode: &str, port: u16) {
    let dir = test_dir(&format!("aof-crash-{mode}"));
    let flags = ["--appendonly", "yes", "--appendfsync", mode];
    let node = spawn_ours(&dir, port, &flags);
    let (sent, acked) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let w = writer(port, Arc::clone(&sent), Arc::clone(&acked));
    std::thread::sleep(Duration::from_millis(100 + seed() % 700));
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
    crash_under_writer("always", 23260);
}

#[test]
fn kill_9_under_a_writer_with_appendfsync_everysec_keeps_a_prefix() {
    crash_under_writer("everysec", 23261);
}

#[test]
fn kill_9_under_a_writer_with_appendfsync_no_keeps_a_prefix() {
    crash_under_writer("no", 23262);
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
    let port = 23263;
    let flags = ["--appendonly", "yes", "--appendfsync", "always"];
    let node = spawn_ours(&dir, port, &flags);
    let keys = 100_000;
    fill_pipelined(port, keys);
    // A first rewrite gives its duration; the second one is killed at a random point of it.
    let mut c = Client::connect(port);
    assert_eq!(
        c.cmd_s(&["BGREWRITEAOF"]),
        "+Background append only file rewriting started\r\n"
    );
    let started = std::time::Instant::now();
    while info_field(port, "aof_rewrite_in_progress") != "0" {
        std::thread::sleep(Duration::from_millis(1));
    }
    let took = started.elapsed().as_micros() as u64;
    let (sent, acked) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let w = writer(port, Arc::clone(&sent), Arc::clone(&acked));
    assert_eq!(
        c.cmd_s(&["BGREWRITEAOF"]),
        "+Background append only file rewriting started\r\n"
    );
    // Kill while the new base is being written (its temporary file is there), at a random
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
    let end = std::time::Instant::now() + Duration::from_micros(took);
    while !temp_present() && std::time::Instant::now() < end {}
    std::thread::sleep(Duration::from_micros(seed() % 2000));
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
    let port = 23264;
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
    let port = 23265;
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

/// A data set of every type, with a TTL.
fn fill(c: &mut Client) {
    assert_eq!(c.cmd_s(&["SET", "s", "v"]), "+OK\r\n");
    assert_eq!(c.cmd_s(&["SET", "ttl", "x", "PX", "600000"]), "+OK\r\n");
    assert_eq!(c.cmd_s(&["HSET", "h", "f", "1", "g", "2"]), ":2\r\n");
    assert_eq!(c.cmd_s(&["RPUSH", "l", "a", "b", "c"]), ":3\r\n");
    assert_eq!(c.cmd_s(&["SADD", "set", "1", "2", "x"]), ":3\r\n");
    assert_eq!(c.cmd_s(&["ZADD", "z", "1.5", "a", "2", "b"]), ":2\r\n");
    assert_eq!(c.cmd_s(&["INCR", "n"]), ":1\r\n");
    assert_eq!(c.cmd_s(&["SELECT", "3"]), "+OK\r\n");
    assert_eq!(c.cmd_s(&["SET", "in3", "x"]), "+OK\r\n");
    assert_eq!(c.cmd_s(&["SELECT", "0"]), "+OK\r\n");
}

/// What `fill` wrote, read back.
fn check(port: u16) {
    let mut c = Client::connect(port);
    assert_eq!(c.cmd_s(&["GET", "s"]), "$1\r\nv\r\n");
    let ttl: i64 = c
        .cmd_s(&["PTTL", "ttl"])
        .trim_start_matches(':')
        .trim()
        .parse()
        .unwrap();
    assert!(ttl > 500_000 && ttl <= 600_000, "ttl {ttl}");
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
fn fill_with_rewrite(port: u16) {
    let mut c = Client::connect(port);
    fill(&mut c);
    assert_eq!(
        c.cmd_s(&["BGREWRITEAOF"]),
        "+Background append only file rewriting started\r\n"
    );
    common::wait_until("rewrite done", || {
        info_field(port, "aof_rewrite_in_progress") == "0"
    });
    assert_eq!(c.cmd_s(&["DEL", "s"]), ":1\r\n");
    assert_eq!(c.cmd_s(&["SET", "s", "v"]), "+OK\r\n");
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
    // redis-server 7.0 writes an AOF directory (base RDB + increments), stops.
    let rdir = base.join("redis");
    {
        let _r = start_real_server(
            "redis-server",
            23266,
            &rdir,
            &["--appendonly", "yes", "--appendfsync", "always"],
        );
        fill_with_rewrite(23266);
        shutdown(23266);
    }
    // `start_real_server` passes `--appendonly no` first; ours is given yes.
    let ours_from_redis = base.join("ours-from-redis");
    copy_dir(
        &rdir.join("appendonlydir"),
        &ours_from_redis.join("appendonlydir"),
    );
    let node = spawn_ours(&ours_from_redis, 23267, &["--appendonly", "yes"]);
    check(23267);
    kill9(node);

    // Ours writes one with an RDB base, one with a command base; redis-server 7.0 and
    // valkey-server 9.1.2 load each.
    for preamble in ["yes", "no"] {
        let odir = base.join(format!("ours-{preamble}"));
        let node = spawn_ours(
            &odir,
            23268,
            &["--appendonly", "yes", "--aof-use-rdb-preamble", preamble],
        );
        fill_with_rewrite(23268);
        shutdown(23268);
        let mut node = node;
        let _ = node.0.wait();
        let manifest =
            std::fs::read_to_string(odir.join("appendonlydir/appendonly.aof.manifest")).unwrap();
        let ext = if preamble == "yes" { "rdb" } else { "aof" };
        assert_eq!(
            manifest,
            format!("file appendonly.aof.2.base.{ext} seq 2 type b\nfile appendonly.aof.2.incr.aof seq 2 type i\n")
        );
        for (bin, port) in [("redis-server", 23269), ("valkey-server", 23270)] {
            let d = base.join(format!("{bin}-from-ours-{preamble}"));
            copy_dir(&odir.join("appendonlydir"), &d.join("appendonlydir"));
            let _r = start_real_server(bin, port, &d, &["--appendonly", "yes"]);
            check(port);
        }
    }
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn config_set_appendonly_yes_rewrites_first_and_info_shows_the_aof() {
    let dir = test_dir("aof-config");
    let port = 23271;
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
    common::wait_until("rewrite done", || {
        info_field(port, "aof_rewrite_in_progress") == "0"
    });
    assert_eq!(
        std::fs::read_to_string(dir.join("appendonlydir/appendonly.aof.manifest")).unwrap(),
        "file appendonly.aof.1.base.rdb seq 1 type b\n"
    );
    assert_eq!(info_field(port, "aof_enabled"), "0");
    assert_eq!(c.cmd_s(&["CONFIG", "SET", "appendonly", "yes"]), "+OK\r\n");
    assert_eq!(c.cmd_s(&["SET", "after", "2"]), "+OK\r\n");
    common::wait_until("rewrite done", || {
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
    let (p, r) = (23272, 23273);
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
    common::wait_until("cluster_state:ok", || {
        bulk_text(&Client::connect(p).cmd(&["CLUSTER", "INFO"])).contains("cluster_state:ok")
    });
    // Written before the replica syncs: they come in its full copy.
    assert_eq!(cp.cmd_s(&["SET", "early", "1"]), "+OK\r\n");
    let pid = myid(p);
    assert_eq!(
        Client::connect(r).cmd_s(&["CLUSTER", "MEET", "127.0.0.1", &p.to_string()]),
        "+OK\r\n"
    );
    common::wait_until("the MEET completes", || {
        bulk_text(&Client::connect(r).cmd(&["CLUSTER", "NODES"])).contains(&pid)
    });
    assert_eq!(
        Client::connect(r).cmd_s(&["CLUSTER", "REPLICATE", &pid]),
        "+OK\r\n"
    );
    common::wait_until("the replica to sync", || {
        Client::connect(p).cmd_s(&["WAIT", "1", "100"]) == ":1\r\n"
    });
    // Then the stream.
    let mut cp = Client::connect(p);
    for i in 0..50 {
        let k = format!("k:{i}");
        assert_eq!(
            cp.cmd_s(&["SET", &k, &i.to_string(), "EX", "1000"]),
            "+OK\r\n"
        );
    }
    assert_eq!(cp.cmd_s(&["WAIT", "1", "5000"]), ":1\r\n");
    common::wait_until("the replica's AOF written", || {
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
    let ttl: i64 = cr
        .cmd_s(&["TTL", "k:0"])
        .trim_start_matches(':')
        .trim()
        .parse()
        .unwrap();
    assert!(ttl > 900 && ttl <= 1000, "ttl {ttl}");
    let _ = std::fs::remove_dir_all(&dir);
}

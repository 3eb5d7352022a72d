//! RDB persistence (issue 19, its RDB part): SAVE / BGSAVE / LASTSAVE / INFO persistence, the
//! file loaded at start, SHUTDOWN and SIGTERM saving first, a corrupt file refused with its
//! reason, and the files moving both ways between ours and redis-server 7.0 / valkey-server
//! 9.1 (each loads the other's `dump.rdb`). Ports from the one allocator (`common::ports`).
#![allow(clippy::disallowed_methods)] // TTLs are checked against the wall clock

mod common;

use common::{bulk_text, ports, start_real_server, test_dir, wait_until, Client, Logged, BIN};
use std::path::Path;

/// The wall clock, unix ms (the clock the servers stamp deadlines with).
fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A data set of every type, with a TTL (600 s). Returns the clock read just before the TTL
/// was set, for [`check`].
fn fill(c: &mut Client) -> i64 {
    assert_eq!(c.cmd_s(&["SET", "s", "v"]), "+OK\r\n");
    let before = unix_ms();
    assert_eq!(c.cmd_s(&["SET", "ttl", "x", "PX", "600000"]), "+OK\r\n");
    assert_eq!(c.cmd_s(&["HSET", "h", "f", "1", "g", "2"]), ":2\r\n");
    assert_eq!(c.cmd_s(&["RPUSH", "l", "a", "b", "c"]), ":3\r\n");
    assert_eq!(c.cmd_s(&["SADD", "set", "1", "2", "x"]), ":3\r\n");
    assert_eq!(c.cmd_s(&["ZADD", "z", "1.5", "a", "2", "b"]), ":2\r\n");
    before
}

/// What `fill` wrote, read back; `filled`: what `fill` returned. The TTL is 600 s minus at
/// most the time since `filled` (the deadline is absolute, in the file too).
fn check(c: &mut Client, filled: i64) {
    assert_eq!(c.cmd_s(&["GET", "s"]), "$1\r\nv\r\n");
    let ttl: i64 = c
        .cmd_s(&["PTTL", "ttl"])
        .trim_start_matches(':')
        .trim()
        .parse()
        .unwrap();
    let elapsed = unix_ms() - filled;
    assert!(
        (600_000 - elapsed..=600_000).contains(&ttl),
        "ttl {ttl}, {elapsed} ms after it was set"
    );
    assert_eq!(c.cmd_s(&["HGET", "h", "g"]), "$1\r\n2\r\n");
    assert_eq!(
        c.cmd_s(&["LRANGE", "l", "0", "-1"]),
        "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"
    );
    assert_eq!(c.cmd_s(&["SCARD", "set"]), ":3\r\n");
    assert_eq!(c.cmd_s(&["ZSCORE", "z", "a"]), "$3\r\n1.5\r\n");
    assert_eq!(c.cmd_s(&["DBSIZE"]), ":6\r\n");
}

fn standalone(dir: &Path, port: u16) -> Vec<String> {
    vec![
        "--port".into(),
        port.to_string(),
        "--cluster-enabled".into(),
        "no".into(),
        "--dir".into(),
        dir.display().to_string(),
    ]
}

/// Our server, standalone on `port` with its files in `dir`; its output goes to `log` (in
/// `dir`), one file per start so a test reads what that process said.
fn spawn_ours(dir: &Path, port: u16, log: &str, extra: &[&str]) -> Logged {
    std::fs::create_dir_all(dir).unwrap();
    let mut cmd = std::process::Command::new(BIN);
    cmd.args(standalone(dir, port)).args(extra);
    let mut child = Logged::spawn(
        &mut cmd,
        &dir.join(log),
        &format!("ferrocluster-server on {port}"),
    );
    child.wait_listening(port);
    child
}

fn info_field(c: &mut Client, name: &str) -> String {
    let info = bulk_text(&c.cmd(&["INFO", "persistence"]));
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in {info}"))
        .trim()
        .to_string()
}

#[test]
fn save_bgsave_and_restart_keep_the_data_set() {
    let dir = test_dir("persist-restart");
    let port = ports::port();
    let mut node = spawn_ours(&dir, port, "first.log", &[]);
    let mut c = Client::connect(port);
    assert_eq!(
        c.cmd_s(&["CONFIG", "GET", "save"]),
        "*2\r\n$4\r\nsave\r\n$23\r\n3600 1 300 100 60 10000\r\n"
    );
    let filled = fill(&mut c);
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "6");
    assert_eq!(c.cmd_s(&["SAVE"]), "+OK\r\n");
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "0");
    assert!(dir.join("dump.rdb").exists());
    let lastsave = c.cmd_s(&["LASTSAVE"]);
    assert_eq!(c.cmd_s(&["SET", "after", "1"]), "+OK\r\n");
    assert_eq!(c.cmd_s(&["BGSAVE"]), "+Background saving started\r\n");
    wait_until("bgsave done", || {
        info_field(&mut c, "rdb_bgsave_in_progress") == "0"
    });
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    assert_eq!(info_field(&mut c, "rdb_saves"), "2");
    assert!(c.cmd_s(&["LASTSAVE"]) >= lastsave);
    // A kill -9 after the save: the restarted server has what was saved.
    node.kill();
    let mut node = spawn_ours(&dir, port, "second.log", &[]);
    let mut c = Client::connect(port);
    assert_eq!(c.cmd_s(&["GET", "after"]), "$1\r\n1\r\n");
    assert_eq!(c.cmd_s(&["DEL", "after"]), ":1\r\n");
    check(&mut c, filled);
    assert_eq!(info_field(&mut c, "rdb_last_load_keys_loaded"), "7");
    // SIGTERM saves first (save points are set), then exits 0.
    assert_eq!(c.cmd_s(&["SET", "late", "1"]), "+OK\r\n");
    let pid = node.pid().expect("running");
    let st = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    assert_eq!(node.wait_exit().code(), Some(0));
    let log = std::fs::read_to_string(dir.join("second.log")).unwrap();
    assert!(
        log.contains("Saving the final RDB snapshot before exiting."),
        "{log}"
    );
    let mut node = spawn_ours(&dir, port, "third.log", &[]);
    let mut c = Client::connect(port);
    assert_eq!(c.cmd_s(&["GET", "late"]), "$1\r\n1\r\n");
    // SHUTDOWN NOSAVE: the write after the last save is gone after the restart.
    assert_eq!(c.cmd_s(&["SET", "lost", "1"]), "+OK\r\n");
    c.send_raw(&common::encode(&[b"SHUTDOWN", b"NOSAVE"]));
    assert_eq!(node.wait_exit().code(), Some(0));
    let mut node = spawn_ours(&dir, port, "fourth.log", &["--save", ""]);
    let mut c = Client::connect(port);
    assert_eq!(c.cmd_s(&["EXISTS", "lost"]), ":0\r\n");
    assert_eq!(c.cmd_s(&["EXISTS", "late"]), ":1\r\n");
    assert_eq!(
        c.cmd_s(&["SHUTDOWN", "ABORT"]),
        "-ERR No shutdown in progress.\r\n"
    );
    node.kill();
}

#[test]
fn a_corrupt_file_is_refused_with_its_reason() {
    let dir = test_dir("persist-corrupt");
    let port = ports::port();
    let mut node = spawn_ours(&dir, port, "first.log", &[]);
    let mut c = Client::connect(port);
    fill(&mut c);
    assert_eq!(c.cmd_s(&["SAVE"]), "+OK\r\n");
    node.kill();
    // One byte of the file flipped: the checksum (or the decoder) refuses it.
    let path = dir.join("dump.rdb");
    let mut bytes = std::fs::read(&path).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x55;
    std::fs::write(&path, &bytes).unwrap();
    let (code, err) = common::run_to_exit(&dir, port, &["--cluster-enabled", "no"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("Short read or OOM loading DB. Unrecoverable error, aborting now.")
            && err.contains("dump.rdb"),
        "{err}"
    );
}

#[test]
fn dump_files_move_both_ways_with_redis_7_and_valkey_9() {
    for bin in ["redis-server", "valkey-server"] {
        let [port_theirs, port_ours] = ports::ports(2)[..] else {
            unreachable!()
        };
        // Theirs -> ours.
        let dir = test_dir(&format!("persist-from-{bin}"));
        let filled = {
            let _real = start_real_server(bin, port_theirs, &dir, &[]);
            let mut c = Client::connect(port_theirs);
            let filled = fill(&mut c);
            assert_eq!(c.cmd_s(&["SAVE"]), "+OK\r\n");
            filled
        };
        let mut node = spawn_ours(&dir, port_ours, "ours.log", &[]);
        let mut c = Client::connect(port_ours);
        check(&mut c, filled);
        node.kill();
        // Ours -> theirs.
        let dir2 = test_dir(&format!("persist-to-{bin}"));
        let mut node = spawn_ours(&dir2, port_ours, "ours.log", &[]);
        let mut c = Client::connect(port_ours);
        let filled = fill(&mut c);
        assert_eq!(c.cmd_s(&["SAVE"]), "+OK\r\n");
        node.kill();
        let _real = start_real_server(bin, port_theirs, &dir2, &["--dbfilename", "dump.rdb"]);
        let mut c = Client::connect(port_theirs);
        wait_until("loaded", || c.cmd_s(&["DBSIZE"]) == ":6\r\n");
        check(&mut c, filled);
    }
}

//! RDB persistence (issue 19, its RDB part): SAVE / BGSAVE / LASTSAVE / INFO persistence, the
//! file loaded at start, SHUTDOWN and SIGTERM saving first, a corrupt file refused with its
//! reason, and the files moving both ways between ours and redis-server 7.0 / valkey-server
//! 9.1 (each loads the other's `dump.rdb`). Ports 23220-23227.

mod common;

use common::{bulk_text, start_real_server, test_dir, wait_until, Client, BIN};
use std::path::Path;
use std::time::Duration;

/// A data set of every type, with a TTL.
fn fill(c: &mut Client) {
    assert_eq!(c.cmd_s(&["SET", "s", "v"]), "+OK\r\n");
    assert_eq!(c.cmd_s(&["SET", "ttl", "x", "PX", "600000"]), "+OK\r\n");
    assert_eq!(c.cmd_s(&["HSET", "h", "f", "1", "g", "2"]), ":2\r\n");
    assert_eq!(c.cmd_s(&["RPUSH", "l", "a", "b", "c"]), ":3\r\n");
    assert_eq!(c.cmd_s(&["SADD", "set", "1", "2", "x"]), ":3\r\n");
    assert_eq!(c.cmd_s(&["ZADD", "z", "1.5", "a", "2", "b"]), ":2\r\n");
}

/// What `fill` wrote, read back.
fn check(c: &mut Client) {
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

fn spawn_ours(dir: &Path, port: u16, extra: &[&str]) -> std::process::Child {
    std::fs::create_dir_all(dir).unwrap();
    let log = std::fs::File::create(dir.join("stderr.log")).unwrap();
    let child = std::process::Command::new(BIN)
        .args(standalone(dir, port))
        .args(extra)
        .stderr(log)
        .spawn()
        .unwrap();
    common::wait_for_port(port);
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
    let mut node = spawn_ours(&dir, 23220, &[]);
    let mut c = Client::connect(23220);
    assert_eq!(
        c.cmd_s(&["CONFIG", "GET", "save"]),
        "*2\r\n$4\r\nsave\r\n$23\r\n3600 1 300 100 60 10000\r\n"
    );
    fill(&mut c);
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
    node.kill().unwrap();
    node.wait().unwrap();
    let mut node = spawn_ours(&dir, 23220, &[]);
    let mut c = Client::connect(23220);
    assert_eq!(c.cmd_s(&["GET", "after"]), "$1\r\n1\r\n");
    assert_eq!(c.cmd_s(&["DEL", "after"]), ":1\r\n");
    check(&mut c);
    assert_eq!(info_field(&mut c, "rdb_last_load_keys_loaded"), "7");
    // SIGTERM saves first (save points are set), then exits 0.
    assert_eq!(c.cmd_s(&["SET", "late", "1"]), "+OK\r\n");
    let st = std::process::Command::new("kill")
        .args(["-TERM", &node.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    assert_eq!(node.wait().unwrap().code(), Some(0));
    let log = std::fs::read_to_string(dir.join("stderr.log")).unwrap();
    assert!(
        log.contains("Saving the final RDB snapshot before exiting."),
        "{log}"
    );
    let mut node = spawn_ours(&dir, 23220, &[]);
    let mut c = Client::connect(23220);
    assert_eq!(c.cmd_s(&["GET", "late"]), "$1\r\n1\r\n");
    // SHUTDOWN NOSAVE: the write after the last save is gone after the restart.
    assert_eq!(c.cmd_s(&["SET", "lost", "1"]), "+OK\r\n");
    c.send_raw(&common::encode(&[b"SHUTDOWN", b"NOSAVE"]));
    assert_eq!(node.wait().unwrap().code(), Some(0));
    let mut node = spawn_ours(&dir, 23220, &["--save", ""]);
    let mut c = Client::connect(23220);
    assert_eq!(c.cmd_s(&["EXISTS", "lost"]), ":0\r\n");
    assert_eq!(c.cmd_s(&["EXISTS", "late"]), ":1\r\n");
    assert_eq!(
        c.cmd_s(&["SHUTDOWN", "ABORT"]),
        "-ERR No shutdown in progress.\r\n"
    );
    node.kill().unwrap();
    let _ = node.wait();
}

#[test]
fn a_corrupt_file_is_refused_with_its_reason() {
    let dir = test_dir("persist-corrupt");
    let mut node = spawn_ours(&dir, 23221, &[]);
    let mut c = Client::connect(23221);
    fill(&mut c);
    assert_eq!(c.cmd_s(&["SAVE"]), "+OK\r\n");
    node.kill().unwrap();
    node.wait().unwrap();
    // One byte of the file flipped: the checksum (or the decoder) refuses it.
    let path = dir.join("dump.rdb");
    let mut bytes = std::fs::read(&path).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x55;
    std::fs::write(&path, &bytes).unwrap();
    let out = std::process::Command::new(BIN)
        .args(standalone(&dir, 23221))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Short read or OOM loading DB. Unrecoverable error, aborting now.")
            && err.contains("dump.rdb"),
        "{err}"
    );
}

#[test]
fn dump_files_move_both_ways_with_redis_7_and_valkey_9() {
    for (i, bin) in ["redis-server", "valkey-server"].iter().enumerate() {
        let port_theirs = 23222 + 2 * i as u16;
        let port_ours = port_theirs + 1;
        // Theirs -> ours.
        let dir = test_dir(&format!("persist-from-{bin}"));
        {
            let _real = start_real_server(bin, port_theirs, &dir, &[]);
            let mut c = Client::connect(port_theirs);
            fill(&mut c);
            assert_eq!(c.cmd_s(&["SAVE"]), "+OK\r\n");
        }
        let mut node = spawn_ours(&dir, port_ours, &[]);
        let mut c = Client::connect(port_ours);
        check(&mut c);
        node.kill().unwrap();
        let _ = node.wait();
        // Ours -> theirs.
        let dir2 = test_dir(&format!("persist-to-{bin}"));
        let mut node = spawn_ours(&dir2, port_ours, &[]);
        let mut c = Client::connect(port_ours);
        fill(&mut c);
        assert_eq!(c.cmd_s(&["SAVE"]), "+OK\r\n");
        node.kill().unwrap();
        let _ = node.wait();
        let _real = start_real_server(bin, port_theirs, &dir2, &["--dbfilename", "dump.rdb"]);
        let mut c = Client::connect(port_theirs);
        wait_until("loaded", || c.cmd_s(&["DBSIZE"]) == ":6\r\n");
        check(&mut c);
    }
}

//! nodes.conf ownership and durability (ports 23900-23949, bus ports +10000): the config lock
//! against a second process, `dir` checks, CLUSTER replies only after the change is on disk,
//! SAVECONFIG's error and the fatal exit on a failed config save (Redis's behaviour), plus the
//! SET EXAT overflow and SETSLOT trailing-argument errors through a real connection.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{test_dir, Client, Procs};
use std::time::Duration;

fn run_to_exit(dir: &std::path::Path, port: u16) -> (Option<i32>, String) {
    common::run_to_exit(dir, port, &[])
}

#[test]
fn second_process_on_the_same_config_file_is_refused() {
    let base = test_dir("conf-lock");
    let mut procs = Procs::default();
    let dir = procs.start(&base, 23900, &[]);
    let (code, stderr) = run_to_exit(&dir, 23901);
    assert_eq!(code, Some(1), "{stderr}");
    let file = dir.join("nodes.conf");
    let text = format!(
        "Sorry, the cluster configuration file {} is already used by a different Redis Cluster \
         node. Please make sure that different nodes use different cluster configuration files.",
        file.display()
    );
    assert!(stderr.contains(&text), "{stderr}");
    // The first node keeps running, with its own ID.
    let mut c = Client::connect(23900);
    assert_eq!(c.cmd_s(&["PING"]), "+PONG\r\n");
}

#[test]
fn missing_dir_is_refused() {
    let base = test_dir("conf-nodir");
    let (code, stderr) = run_to_exit(&base.join("does-not-exist"), 23902);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("does-not-exist"), "{stderr}");
}

#[test]
fn cluster_change_is_on_disk_when_acknowledged() {
    let base = test_dir("conf-durable");
    let mut procs = Procs::default();
    let dir = procs.start(&base, 23903, &[]);
    let mut c = Client::connect(23903);
    let id = c.cmd_s(&["CLUSTER", "MYID"]);
    let id = id.lines().nth(1).expect("MYID bulk").to_string();
    assert_eq!(c.cmd_s(&["CLUSTER", "ADDSLOTS", "0", "1", "2"]), "+OK\r\n");
    // No wait: the reply came after the write and fsync.
    procs.kill(23903);
    let conf = std::fs::read_to_string(dir.join("nodes.conf")).unwrap();
    let mine = conf
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("myself missing in:\n{conf}"));
    assert!(mine.ends_with(" 0-2"), "{mine}");
}

#[test]
fn saveconfig_error_and_fatal_exit_on_failed_config_save() {
    let base = test_dir("conf-fail");
    let mut procs = Procs::default();
    let dir = procs.start(&base, 23904, &[]);
    let pid = procs.children[0].1.as_ref().unwrap().id();
    let mut c = Client::connect(23904);
    assert_eq!(c.cmd_s(&["CLUSTER", "SAVECONFIG"]), "+OK\r\n");
    // A directory where the temporary file goes makes every save fail.
    std::fs::create_dir_all(dir.join(format!(".nodes.conf.tmp-{pid}")).join("x")).unwrap();
    let r = c.cmd_s(&["CLUSTER", "SAVECONFIG"]);
    assert!(
        r.starts_with("-ERR error saving the cluster node config: "),
        "{r}"
    );
    // A config change that cannot be saved is fatal, never acknowledged.
    c.send_raw(&common::encode(&[b"CLUSTER", b"ADDSLOTS", b"7"]));
    let rest = c.read_to_close();
    assert!(
        rest.is_empty(),
        "acknowledged: {:?}",
        String::from_utf8_lossy(&rest)
    );
    let child = procs.children[0].1.as_mut().unwrap();
    let mut status = None;
    for _ in 0..100 {
        if let Some(s) = child.try_wait().unwrap() {
            status = Some(s);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(status.and_then(|s| s.code()), Some(1));
    let log = std::fs::read_to_string(dir.join("stderr.log")).unwrap();
    assert!(
        log.contains("Fatal: can't update cluster config file"),
        "{log}"
    );
    let conf = std::fs::read_to_string(dir.join("nodes.conf")).unwrap();
    assert!(!conf.contains(" 7\n"), "{conf}");
}

#[test]
fn expire_overflow_and_setslot_extra_arguments() {
    let base = test_dir("conf-errors");
    let mut procs = Procs::default();
    procs.start(&base, 23905, &[]);
    let mut c = Client::connect(23905);
    assert_eq!(
        c.cmd_s(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]),
        "+OK\r\n"
    );
    common::wait_until(Duration::from_secs(30), "cluster_state:ok", || {
        c.cmd_s(&["CLUSTER", "INFO"]).contains("cluster_state:ok")
    });
    let invalid = "-ERR invalid expire time in 'set' command\r\n";
    let key = slot5_key();
    assert_eq!(
        c.cmd_s(&["SET", &key, "v", "EXAT", "9999999999999999"]),
        invalid
    );
    let id = c.cmd_s(&["CLUSTER", "MYID"]);
    let id = id.lines().nth(1).unwrap().to_string();
    let action = "-ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP\r\n";
    assert_eq!(
        c.cmd_s(&["CLUSTER", "SETSLOT", "5", "STABLE", "extra"]),
        action
    );
    assert_eq!(
        c.cmd_s(&["CLUSTER", "SETSLOT", "5", "NODE", &id, "extra"]),
        action
    );
    assert_eq!(c.cmd_s(&["CLUSTER", "SETSLOT", "5", "STABLE"]), "+OK\r\n");
}

/// A key of hash slot 5.
fn slot5_key() -> String {
    (0..100_000)
        .map(|i| format!("k{i}"))
        .find(|k| ferrocluster_slot::key_hash_slot(k.as_bytes()).get() == 5)
        .expect("a key of slot 5")
}

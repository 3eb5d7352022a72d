//! The config surface (ports from `common::ports`, bus ports +10000; issue 16 item 8): every `cluster-*`
//! option of valkey-server 9.1.2 is accepted as a flag and in a config file and shown by
//! CONFIG GET as Valkey shows it; CONFIG SET answers as Valkey does
//! (`tests/vectors/config-surface.json`, captured by `tests/vectors/capture_config.py`), the
//! run-time changes take effect in the node, and no message points to something that does not
//! exist.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{bulk_text, ports, test_dir, wait_until, Client, Procs};
use ferrocluster_testkit::BUS_OFFSET;
use redis_protocol::resp2::decode::decode;
use redis_protocol::resp2::types::OwnedFrame;
use std::collections::BTreeMap;

fn vectors() -> serde_json::Value {
    common::vector("config-surface.json")
}

/// Valkey 9.1's CONFIG GET cluster-* (name -> default) and the hidden options.
fn valkey_defaults() -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let doc = vectors();
    let map = |v: &serde_json::Value| {
        v.as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
            .collect()
    };
    (
        map(&doc["defaults"]["valkey-9.1"]["listed"]),
        map(&doc["defaults"]["valkey-9.1"]["hidden"]),
    )
}

/// A CONFIG GET reply as (name -> value).
fn config_get(port: u16, pattern: &str) -> BTreeMap<String, String> {
    let reply = Client::connect(port).cmd(&["CONFIG", "GET", pattern]);
    let (frame, _) = decode(&reply).unwrap().unwrap();
    let OwnedFrame::Array(items) = frame else {
        panic!("{reply:?}")
    };
    let text = |f: &OwnedFrame| match f {
        OwnedFrame::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("{other:?}"),
    };
    items
        .chunks(2)
        .map(|p| (text(&p[0]), text(&p[1])))
        .collect()
}

fn shown_as_valkey(port: u16) {
    let (listed, hidden) = valkey_defaults();
    assert!(listed.len() >= 31, "{listed:?}");
    let ours = config_get(port, "cluster-*");
    assert_eq!(
        ours, listed,
        "CONFIG GET cluster-* (names and default values)"
    );
    for (name, value) in &hidden {
        assert_eq!(config_get(port, name).get(name), Some(value), "{name}");
    }
}

#[test]
fn every_valkey_cluster_option_is_a_flag_and_a_file_line_shown_like_valkey() {
    let (listed, hidden) = valkey_defaults();
    let all: Vec<(&String, &String)> = listed.iter().chain(hidden.iter()).collect();
    let mut procs = Procs::default();
    let dir = test_dir("config-flags");
    // Every option as a flag, with Valkey's default value.
    let mut flags: Vec<String> = Vec::new();
    for (name, value) in &all {
        flags.push(format!("--{name}"));
        flags.push(value.to_string());
    }
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let [flag_port, file_port, value_port] = ports::ports(3)[..] else {
        unreachable!()
    };
    procs.start(&dir, flag_port, &flags);
    shown_as_valkey(flag_port);
    // The same lines in a config file.
    let file = dir.join("all.conf");
    let text: String = all.iter().map(|(n, v)| format!("{n} \"{v}\"\n")).collect();
    std::fs::write(&file, text).unwrap();
    let dir2 = test_dir("config-file");
    let node2 = dir2.join(format!("node-{file_port}"));
    std::fs::create_dir_all(&node2).unwrap();
    std::fs::copy(&file, node2.join("all.conf")).unwrap();
    procs.start_with_file(&dir2, file_port, &node2.join("all.conf"), &[]);
    shown_as_valkey(file_port);
    // A value other than the default is taken, as a flag and shown back in Valkey's format.
    procs.start(
        &test_dir("config-values"),
        value_port,
        &[
            "--cluster-preferred-endpoint-type",
            "HOSTNAME",
            "--cluster-announce-hostname",
            "node-a.example",
            "--cluster-node-timeout",
            "4000",
            "--cluster-slave-validity-factor",
            "3",
            "--cluster-config-save-behavior",
            "best-effort",
        ],
    );
    let got = config_get(value_port, "cluster-*");
    assert_eq!(got["cluster-preferred-endpoint-type"], "hostname");
    assert_eq!(got["cluster-announce-hostname"], "node-a.example");
    assert_eq!(got["cluster-node-timeout"], "4000");
    assert_eq!(got["cluster-replica-validity-factor"], "3");
    assert_eq!(got["cluster-slave-validity-factor"], "3");
    assert_eq!(got["cluster-config-save-behavior"], "best-effort");
    let nodes = bulk_text(&Client::connect(value_port).cmd(&["CLUSTER", "NODES"]));
    assert!(nodes.contains(",node-a.example "), "{nodes}");
}

/// Sets every mutable option back to Valkey's default.
fn reset(c: &mut Client, listed: &BTreeMap<String, String>, hidden: &BTreeMap<String, String>) {
    for (n, v) in listed.iter().chain(hidden) {
        if [
            "cluster-enabled",
            "cluster-config-file",
            "cluster-port",
            "cluster-databases",
        ]
        .contains(&n.as_str())
        {
            continue;
        }
        assert_eq!(c.cmd_s(&["CONFIG", "SET", n, v]), "+OK\r\n", "reset {n}");
    }
    assert_eq!(
        c.cmd_s(&["CONFIG", "SET", "maxclients", "10000"]),
        "+OK\r\n"
    );
}

#[test]
fn config_set_answers_like_valkey() {
    let doc = vectors();
    let (listed, hidden) = valkey_defaults();
    let mut procs = Procs::default();
    let port = ports::port();
    procs.start(&test_dir("config-set"), port, &[]);
    let mut c = Client::connect(port);
    let mut failures = Vec::new();
    for case in doc["sets"].as_array().unwrap() {
        let args: Vec<&str> = case["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        let want = &case["expect"]["valkey-9.1"];
        let mut argv = vec!["CONFIG", "SET"];
        argv.extend(&args);
        let got = c.cmd_s(&argv);
        if got != want["reply"].as_str().unwrap() {
            failures.push(format!(
                "CONFIG SET {args:?}: got {got:?}, Valkey {}",
                want["reply"]
            ));
        } else {
            for (name, value) in want["get"].as_object().unwrap() {
                let shown = config_get(port, name);
                if shown.get(name).map(String::as_str) != value.as_str() {
                    failures.push(format!(
                        "after {args:?}: {name} = {shown:?}, Valkey {value}"
                    ));
                }
            }
        }
        reset(&mut c, &listed, &hidden);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Where we differ from Valkey, on purpose (src/config.rs docs): a value the engine cannot
    // honour is refused with the reason, never taken silently.
    let ours = [
        (
            &["cluster-node-timeout", "0"][..],
            "cluster-node-timeout must be at least 1 ms in ferrocluster",
        ),
        (
            &["cluster-announce-ip", "not-an-ip"],
            "cluster-announce-ip must be an IP address (ferrocluster announces an address)",
        ),
        (
            &["cluster-blacklist-ttl", "-1"],
            "argument must be between 0 and 18446744073709551615 inclusive",
        ),
        (
            &["cluster-slot-stats-enabled", "yes"],
            "ferrocluster keeps no per-slot CPU time and network bytes; only no is accepted",
        ),
        (
            &["cluster-announce-client-port", "7001"],
            "cluster-announce-client-port is not implemented by ferrocluster; only 0 is accepted",
        ),
    ];
    for (args, reason) in ours {
        let mut argv = vec!["CONFIG", "SET"];
        argv.extend(args);
        assert_eq!(
            c.cmd_s(&argv),
            format!(
                "-ERR CONFIG SET failed (possibly related to argument '{}') - {reason}\r\n",
                args[0]
            )
        );
    }
    // maxmemory takes Redis's units and shows bytes (tests/maxmemory.rs: what it does).
    assert_eq!(c.cmd_s(&["CONFIG", "SET", "maxmemory", "1mb"]), "+OK\r\n");
    assert_eq!(config_get(port, "maxmemory")["maxmemory"], "1048576");
    assert_eq!(c.cmd_s(&["CONFIG", "SET", "maxmemory", "0"]), "+OK\r\n");
    assert_eq!(
        c.cmd_s(&["CONFIG", "SET", "maxmemory-policy", "lru"]),
        "-ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction\r\n"
    );
}

#[test]
fn run_time_changes_take_effect_in_the_node() {
    let mut procs = Procs::default();
    let dir = test_dir("config-runtime");
    let [a_port, b_port, announced] = ports::ports(3)[..] else {
        unreachable!()
    };
    // A node timeout no test outlives: a peer seen failing below shows the new one.
    let a_dir = procs.start(&dir, a_port, &["--cluster-node-timeout", "3600000"]);
    procs.start(&dir, b_port, &["--cluster-node-timeout", "3600000"]);
    let mut a = Client::connect(a_port);
    let mut b = Client::connect(b_port);
    assert_eq!(
        a.cmd_s(&["CLUSTER", "ADDSLOTSRANGE", "0", "8191"]),
        "+OK\r\n"
    );
    // Coverage: half the slots -> fail, until full coverage is not required.
    wait_until("a is up", || {
        bulk_text(&Client::connect(a_port).cmd(&["CLUSTER", "INFO"])).contains("cluster_state:fail")
    });
    assert_eq!(
        a.cmd_s(&["CONFIG", "SET", "cluster-require-full-coverage", "no"]),
        "+OK\r\n"
    );
    wait_until("state ok without full coverage", || {
        bulk_text(&Client::connect(a_port).cmd(&["CLUSTER", "INFO"])).contains("cluster_state:ok")
    });
    assert_eq!(
        a.cmd_s(&["CONFIG", "SET", "cluster-require-full-coverage", "yes"]),
        "+OK\r\n"
    );
    assert_eq!(
        b.cmd_s(&["CLUSTER", "ADDSLOTSRANGE", "8192", "16383"]),
        "+OK\r\n"
    );
    assert_eq!(
        b.cmd_s(&["CLUSTER", "MEET", "127.0.0.1", &a_port.to_string()]),
        "+OK\r\n"
    );
    // An announced hostname and port: in nodes.conf when acknowledged, then gossiped.
    assert_eq!(
        b.cmd_s(&[
            "CONFIG",
            "SET",
            "cluster-announce-hostname",
            "node-b.example"
        ]),
        "+OK\r\n"
    );
    let b_nodes = bulk_text(&b.cmd(&["CLUSTER", "NODES"]));
    assert!(
        b_nodes.contains(&format!(
            ":{b_port}@{},node-b.example myself",
            b_port + BUS_OFFSET
        )),
        "{b_nodes}"
    );
    assert_eq!(
        a.cmd_s(&[
            "CONFIG",
            "SET",
            "cluster-announce-port",
            &announced.to_string()
        ]),
        "+OK\r\n"
    );
    let conf = std::fs::read_to_string(a_dir.join("nodes.conf")).unwrap();
    let announced_addr = format!(":{announced}@{}", a_port + BUS_OFFSET);
    assert!(conf.contains(&announced_addr), "{conf}");
    wait_until("both views updated", || {
        let a_view = bulk_text(&Client::connect(a_port).cmd(&["CLUSTER", "NODES"]));
        let b_view = bulk_text(&Client::connect(b_port).cmd(&["CLUSTER", "NODES"]));
        a_view.contains(",node-b.example ")
            && b_view.contains(&announced_addr)
            && bulk_text(&Client::connect(a_port).cmd(&["CLUSTER", "INFO"]))
                .contains("cluster_state:ok")
    });
    // The endpoint type: MOVED names the node by its hostname.
    let key = (0..1000)
        .map(|i| format!("k{i}"))
        .find(|k| ferrocluster_slot::key_hash_slot(k.as_bytes()).get() >= 8192)
        .unwrap();
    let slot = ferrocluster_slot::key_hash_slot(key.as_bytes()).get();
    assert_eq!(
        a.cmd_s(&["GET", &key]),
        format!("-MOVED {slot} 127.0.0.1:{b_port}\r\n")
    );
    assert_eq!(
        a.cmd_s(&[
            "CONFIG",
            "SET",
            "cluster-preferred-endpoint-type",
            "hostname"
        ]),
        "+OK\r\n"
    );
    assert_eq!(
        a.cmd_s(&["GET", &key]),
        format!("-MOVED {slot} node-b.example:{b_port}\r\n")
    );
    // The node timeout: with 1 s, a dead peer is seen failing (with the hour it started with,
    // never within this test).
    assert_eq!(
        a.cmd_s(&["CONFIG", "SET", "cluster-node-timeout", "1000"]),
        "+OK\r\n"
    );
    procs.kill(b_port);
    wait_until("b seen failing with the new timeout", || {
        bulk_text(&Client::connect(a_port).cmd(&["CLUSTER", "NODES"])).contains("fail")
    });
    // maxclients at run time.
    assert_eq!(a.cmd_s(&["CONFIG", "SET", "maxclients", "3"]), "+OK\r\n");
    let _second = Client::connect(a_port);
    let mut third = Client::connect(a_port);
    third.send_raw(b"PING\r\n");
    assert_eq!(
        String::from_utf8_lossy(&third.read_to_close()),
        "-ERR max number of clients + cluster connections reached\r\n"
    );
}

#[test]
fn best_effort_save_behavior_keeps_the_node_running() {
    let mut procs = Procs::default();
    let port = ports::port();
    let dir = procs.start(&test_dir("config-besteffort"), port, &[]);
    let pid = procs.pid(port);
    let mut c = Client::connect(port);
    assert_eq!(
        c.cmd_s(&[
            "CONFIG",
            "SET",
            "cluster-config-save-behavior",
            "best-effort"
        ]),
        "+OK\r\n"
    );
    let blocker = dir.join(format!(".nodes.conf.tmp-{pid}"));
    std::fs::create_dir_all(blocker.join("x")).unwrap();
    assert_eq!(c.cmd_s(&["CLUSTER", "ADDSLOTS", "7"]), "+OK\r\n");
    assert_eq!(c.cmd_s(&["PING"]), "+PONG\r\n");
    let log = std::fs::read_to_string(dir.join("stderr.log")).unwrap();
    assert!(
        log.contains("Could not save the cluster config file"),
        "{log}"
    );
    // Back to sync: the next failed save is fatal, as in Valkey.
    assert_eq!(
        c.cmd_s(&["CONFIG", "SET", "cluster-config-save-behavior", "sync"]),
        "+OK\r\n"
    );
    c.send_raw(&common::encode(&[b"CLUSTER", b"ADDSLOTS", b"8"]));
    assert!(c.read_to_close().is_empty(), "a failed save acknowledged");
    std::fs::remove_dir_all(&blocker).unwrap();
}

#[test]
fn help_and_error_texts_point_to_what_exists() {
    let mut procs = Procs::default();
    let port = ports::port();
    procs.start(&test_dir("config-help"), port, &[]);
    let mut c = Client::connect(port);
    for cmd in [
        "CONFIG",
        "CLIENT",
        "COMMAND",
        "DEBUG",
        "CLUSTER",
        "FERROCLUSTER",
    ] {
        // "Try <CMD> HELP." must lead somewhere.
        let unknown = c.cmd_s(&[cmd, "NOSUCHSUB"]);
        assert!(unknown.contains(&format!("Try {cmd} HELP.")), "{unknown}");
        let help = c.cmd(&[cmd, "HELP"]);
        assert_eq!(
            help[0],
            b'*',
            "{cmd} HELP: {}",
            String::from_utf8_lossy(&help)
        );
        let text = String::from_utf8_lossy(&help);
        assert!(text.contains("HELP"), "{text}");
    }
    assert_eq!(
        c.cmd_s(&["CONFIG", "REWRITE"]),
        "-ERR The server is running without a config file\r\n"
    );
    assert_eq!(c.cmd_s(&["CONFIG", "RESETSTAT"]), "+OK\r\n");
    let stats = bulk_text(&c.cmd(&["INFO", "stats"]));
    assert!(stats.contains("total_commands_processed:1\r\n"), "{stats}");
}

/// A log that is not a terminal (a file, a pipe) is plain text: no ANSI colour codes, which
/// redis-server never writes and which make a log file unreadable in an editor.
#[test]
fn a_log_that_is_not_a_terminal_has_no_colour_codes() {
    let mut procs = Procs::default();
    let node = procs.start(&test_dir("plain-log"), ports::port(), &[]);
    let read = || std::fs::read_to_string(node.join("stderr.log")).unwrap_or_default();
    wait_until("the start lines in the log", || {
        read().contains("ready to accept connections")
    });
    let log = read();
    assert!(
        !log.contains('\u{1b}'),
        "ANSI escape codes in a log written to a file: {log:?}"
    );
}

/// Every log line is in redis-server's format (`pid:role dd Mon yyyy hh:mm:ss.mmm <level>
/// message`, Redis 7.0 `serverLogRaw`), and SIGTERM ends the server with exit code 0 and
/// redis-server's shutdown lines.
#[test]
fn log_lines_are_in_redis_format_and_sigterm_says_so_and_exits_cleanly() {
    let mut procs = Procs::default();
    let port = ports::port();
    let node = procs.start(&test_dir("redis-log-format"), port, &[]);
    let read = || std::fs::read_to_string(node.join("stderr.log")).unwrap_or_default();
    wait_until("the start lines in the log", || {
        read().contains("ready to accept connections")
    });
    let pid = procs.pid(port);
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let code = procs.child(port).expect("the node").wait_exit();
    assert_eq!(code.code(), Some(0), "SIGTERM exits cleanly");
    let log = read();
    let months = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    for line in log.lines() {
        let (head, rest) = line.split_once(' ').unwrap_or_else(|| panic!("{line}"));
        assert_eq!(head, format!("{pid}:M"), "{line}");
        let w: Vec<&str> = rest.splitn(6, ' ').collect();
        assert_eq!(w.len(), 6, "{line}");
        assert!(
            w[0].len() == 2 && w[0].bytes().all(|b| b.is_ascii_digit()),
            "{line}"
        );
        assert!(months.contains(&w[1]), "{line}");
        assert!(w[2].len() == 4 && w[2].parse::<u32>().is_ok(), "{line}");
        let t = w[3].as_bytes();
        assert!(
            t.len() == 12 && t[2] == b':' && t[5] == b':' && t[8] == b'.',
            "{line}"
        );
        assert!(["#", "*", "-", "."].contains(&w[4]), "{line}");
        assert!(!w[5].is_empty(), "{line}");
    }
    assert!(
        log.contains(" # Received SIGTERM scheduling shutdown...\n"),
        "{log}"
    );
    assert!(log.contains(" # ferrocluster-server is now ready to exit, bye bye...\n"));
}

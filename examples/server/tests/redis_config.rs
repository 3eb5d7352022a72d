//! Directives a Redis user's config carries (issue 19): `include`, `pidfile`, `timeout`,
//! `tcp-keepalive`, `save`, `dbfilename`, `slowlog-*`, `latency-monitor-threshold`, taken from
//! a config file and shown by CONFIG GET with Redis's names and values; Debian's whole Redis 7.0
//! redis.conf (daemonize, pidfile, logfile, cluster mode, AOF); protected mode,
//! stop-writes-on-bgsave-error and `client-output-buffer-limit normal` against valkey-server
//! 9.1, its pubsub class against redis-server 7.0. Ports from `common::ports`.

#![allow(clippy::disallowed_methods)] // a poll sleeps between two looks at CLIENT LIST

mod common;

use common::{bulk_text, ports, test_dir, wait_for, wait_until, Client, Logged, BIN, HANG};
use std::io::Read;
use std::time::Duration;

fn get(c: &mut Client, name: &str) -> String {
    let reply = c.cmd(&["CONFIG", "GET", name]);
    let text = String::from_utf8_lossy(&reply).into_owned();
    // *2 $len name $len value
    text.split("\r\n").nth(4).unwrap_or_default().to_string()
}

/// The `idle=` seconds of client `id` in CLIENT LIST on `port`, None once it is gone.
fn idle_seconds(port: u16, id: &str) -> Option<u64> {
    let list = bulk_text(&Client::connect(port).cmd(&["CLIENT", "LIST", "ID", id]));
    let line = list.lines().find(|l| l.starts_with(&format!("id={id} ")))?;
    let idle = line
        .split(' ')
        .find_map(|f| f.strip_prefix("idle="))
        .unwrap_or_else(|| panic!("no idle= in {line}"));
    Some(idle.parse().unwrap())
}

#[test]
fn a_redis_style_config_with_include_pidfile_and_timeout_is_taken() {
    let dir = test_dir("redis-config");
    let port = ports::port();
    std::fs::create_dir_all(&dir).unwrap();
    let pidfile = dir.join("server.pid");
    std::fs::write(
        dir.join("extra.conf"),
        "# included\nslowlog-log-slower-than 5\nlatency-monitor-threshold 10\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("main.conf"),
        format!(
            "port {port}\ncluster-enabled no\ndir {}\ninclude {}\npidfile {}\ntimeout 1\ntcp-keepalive 60\nsave 900 1 300 10\ndbfilename data.rdb\n",
            dir.display(),
            dir.join("extra.conf").display(),
            pidfile.display()
        ),
    )
    .unwrap();
    let mut cmd = std::process::Command::new(BIN);
    cmd.arg(dir.join("main.conf"));
    let mut child = Logged::spawn(
        &mut cmd,
        &dir.join("stderr.log"),
        &format!("ferrocluster-server on {port}"),
    );
    child.wait_listening(port);
    // `timeout 1` closes a client idle for a second: each look is a new connection.
    let get = |name: &str| get(&mut Client::connect(port), name);
    assert_eq!(get("slowlog-log-slower-than"), "5");
    assert_eq!(get("latency-monitor-threshold"), "10");
    assert_eq!(get("timeout"), "1");
    assert_eq!(get("tcp-keepalive"), "60");
    assert_eq!(get("save"), "900 1 300 10");
    assert_eq!(get("dbfilename"), "data.rdb");
    let pid = std::fs::read_to_string(&pidfile).unwrap();
    assert_eq!(pid.trim(), child.pid().unwrap().to_string());
    // `timeout 1`: an idle client is kept while the server counts it idle for less than
    // the timeout, and still when CLIENT LIST says `idle=1` (not more than 1 s yet), then
    // closed; a subscriber is not. (A client closed between two looks at it, before one saw
    // `idle=1`, proves nothing either way: another is tried.)
    let mut sub = Client::connect(port);
    assert!(sub.cmd_s(&["SUBSCRIBE", "ch"]).starts_with("*3\r\n"));
    let mut idle = wait_for("an idle client kept at idle=1", || {
        let mut idle = Client::connect(port);
        let id = idle.cmd_s(&["CLIENT", "ID"]);
        let id = id.trim_start_matches(':').trim_end().to_string();
        // From here on it sends nothing.
        loop {
            match idle_seconds(port, &id) {
                None => return None,
                Some(0) => std::thread::sleep(Duration::from_millis(20)),
                Some(_) => return Some(idle),
            }
        }
    });
    let mut buf = [0u8; 16];
    assert_eq!(
        idle.stream.read(&mut buf).unwrap(),
        0,
        "closed by the server"
    );
    wait_until("the subscriber still served", || {
        let mut c = Client::connect(port);
        bulk_text(&c.cmd(&["CLIENT", "LIST"])).contains("sub=1")
    });
    // SHUTDOWN saves (save points are set) to data.rdb and removes the pidfile.
    assert_eq!(Client::connect(port).cmd_s(&["SET", "k", "v"]), "+OK\r\n");
    let mut stop = Client::connect(port);
    stop.send_raw(&common::encode(&[b"SHUTDOWN"]));
    assert_eq!(child.wait_exit().code(), Some(0));
    assert!(dir.join("data.rdb").exists());
    assert!(!pidfile.exists());
}

#[test]
fn an_include_that_cannot_be_read_is_refused_with_its_line() {
    let dir = test_dir("redis-config-bad-include");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("main.conf"),
        format!("port {}\n\ninclude /nonexistent/x.conf\n", ports::port()),
    )
    .unwrap();
    let out = std::process::Command::new(BIN)
        .arg(dir.join("main.conf"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("line 3 of") && err.contains("can't open the included file"),
        "{err}"
    );
}

/// Kills a daemonized server by its pid (from its pid file) if the test ends early.
struct Daemon(Option<u32>);

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status();
        }
    }
}

/// Debian's installed /etc/redis/redis.conf (Redis 7.0.15), whole, with only `port`, `dir`,
/// `appendonly` and `cluster-enabled` changed, and `pidfile` / `logfile` moved to the test's
/// directory (the directives stay as Debian writes them: `daemonize yes`, a pid file, a log
/// file): ours starts with it, detaches, serves as a cluster node with the AOF on, and stops.
#[test]
fn debians_whole_redis_conf_starts_a_cluster_node_with_aof() {
    let debian = std::fs::read_to_string("/etc/redis/redis.conf")
        .expect("/etc/redis/redis.conf (Debian's redis-server package, .ci/run installs it)");
    let dir = test_dir("debian-conf");
    let port = ports::port();
    let (pidfile, logfile) = (dir.join("redis.pid"), dir.join("redis.log"));
    let mut changed = 0;
    let mut conf: String = debian
        .lines()
        .map(|l| {
            let word = l.split_whitespace().next().unwrap_or("");
            let new = match word {
                "port" => format!("port {port}"),
                "dir" => format!("dir {}", dir.display()),
                "appendonly" => "appendonly yes".into(),
                "cluster-enabled" => "cluster-enabled yes".into(),
                "pidfile" => format!("pidfile {}", pidfile.display()),
                "logfile" => format!("logfile {}", logfile.display()),
                _ => return format!("{l}\n"),
            };
            changed += 1;
            format!("{new}\n")
        })
        .collect();
    // Debian's file leaves `cluster-enabled` commented out (Redis's default is no).
    if !conf.lines().any(|l| l.starts_with("cluster-enabled")) {
        conf.push_str("cluster-enabled yes\n");
    }
    assert_eq!(
        changed, 5,
        "port, dir, appendonly, pidfile, logfile in Debian's file"
    );
    assert!(conf.contains("\ndaemonize yes\n") && conf.contains("\nprotected-mode yes\n"));
    let path = dir.join("redis.conf");
    std::fs::write(&path, &conf).unwrap();
    // daemonize yes: the process started exits 0 at once, the server goes on.
    let out = std::process::Command::new(BIN).arg(&path).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    common::wait_for_port(port);
    let mut daemon = Daemon(None);
    wait_until("the pid file", || pidfile.exists());
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    daemon.0 = Some(pid);
    // disable-thp yes: THP is off for the server process.
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(status.contains("THP_enabled:\t0"), "{status}");
    let mut c = Client::connect(port);
    assert!(bulk_text(&c.cmd(&["INFO", "cluster"])).contains("cluster_enabled:1"));
    assert!(bulk_text(&c.cmd(&["INFO", "persistence"])).contains("aof_enabled:1"));
    assert_eq!(get(&mut c, "protected-mode"), "yes");
    assert_eq!(get(&mut c, "daemonize"), "yes");
    assert_eq!(
        get(&mut c, "client-output-buffer-limit"),
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
    );
    assert_eq!(
        c.cmd_s(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]),
        "+OK\r\n"
    );
    wait_until("cluster_state:ok", || {
        bulk_text(&c.cmd(&["CLUSTER", "INFO"])).contains("cluster_state:ok")
    });
    assert_eq!(c.cmd_s(&["SET", "k", "v"]), "+OK\r\n");
    assert_eq!(c.cmd_s(&["GET", "k"]), "$1\r\nv\r\n");
    let log = std::fs::read_to_string(&logfile).unwrap();
    assert!(log.contains("ready to accept connections"), "{log}");
    c.send_raw(&common::encode(&[b"SHUTDOWN"]));
    wait_until("the pid file removed at shutdown", || !pidfile.exists());
    wait_until("the server gone", || {
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
    });
    daemon.0 = None;
    let aof_dir = dir.join("appendonlydir");
    let aof = std::fs::read_dir(&aof_dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .find(|e| e.file_name().to_string_lossy().ends_with(".incr.aof"))
        .expect("an incremental AOF file");
    let text = String::from_utf8_lossy(&std::fs::read(aof.path()).unwrap()).into_owned();
    assert!(text.contains("SET\r\n$1\r\nk\r\n$1\r\nv"), "{text}");
}

/// The address tests give a non-loopback client: added to `lo` inside a network namespace
/// the test makes for itself (`unshare -n`), so nothing outside it sees the address.
const OUTSIDE: &str = "192.0.2.1";

/// Runs this test again inside its own network namespace where `OUTSIDE` is an address of
/// `lo`; true when this process is that run.
fn in_own_netns(test: &str) -> bool {
    if std::env::var_os("FC_TEST_NETNS").is_some() {
        return true;
    }
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new("unshare")
        .args(["-n", "sh", "-c"])
        .arg(format!(
            "ip link set lo up && ip addr add {OUTSIDE}/32 dev lo && exec \"$0\" --exact {test} --nocapture --test-threads 1"
        ))
        .arg(exe)
        .env("FC_TEST_NETNS", "1")
        .output()
        .expect("unshare (util-linux) and ip (iproute2)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("test result: ok. 1 passed"),
        "the run in its own network namespace failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    false
}

/// What a client connecting from `OUTSIDE` gets before the server closes (or nothing, then
/// PING's reply).
fn from_outside(port: u16) -> String {
    let mut c = Client::connect_to(OUTSIDE, port);
    c.stream.set_read_timeout(Some(HANG)).unwrap();
    // The refusal is sent at accept; a PING may meet a reset socket, which is fine.
    let _ = std::io::Write::write_all(&mut c.stream, b"PING\r\n");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match c.stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                got.extend_from_slice(&buf[..n]);
                if got == b"+PONG\r\n" || got.starts_with(b"-NOAUTH") {
                    break;
                }
            }
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// `protected-mode yes` without a password: a client from a non-loopback address gets
/// valkey-server 9.1's `-DENIED ...` and is closed, whatever `bind` says (checked against the
/// real server beside ours); a loopback client is served; `CONFIG SET protected-mode no` or
/// a password lets the outside client in.
#[test]
fn protected_mode_refuses_outside_clients_as_valkey_does() {
    if !in_own_netns("protected_mode_refuses_outside_clients_as_valkey_does") {
        return;
    }
    let dir = test_dir("protected-mode");
    let [valkey, ours] = ports::ports(2)[..] else {
        unreachable!()
    };
    let _valkey = common::start_real_server(
        "valkey-server",
        valkey,
        &dir.join("valkey"),
        &["--bind", "0.0.0.0", "--protected-mode", "yes"],
    );
    let expected = from_outside(valkey);
    assert!(
        expected.starts_with("-DENIED Running in protected mode"),
        "{expected}"
    );
    let mut procs = common::Procs::default();
    procs.start(
        &dir.join("ours"),
        ours,
        &[
            "--cluster-enabled",
            "no",
            "--bind",
            "0.0.0.0",
            "--protected-mode",
            "yes",
        ],
    );
    assert_eq!(from_outside(ours), expected);
    let mut local = Client::connect(ours);
    assert_eq!(local.cmd_s(&["PING"]), "+PONG\r\n");
    assert!(bulk_text(&local.cmd(&["INFO", "stats"])).contains("rejected_connections:1"));
    assert_eq!(
        local.cmd_s(&["CONFIG", "SET", "protected-mode", "no"]),
        "+OK\r\n"
    );
    assert_eq!(from_outside(ours), "+PONG\r\n");
    procs.kill(ours);
    // A password for the default user: protected mode lets the client in (to authenticate).
    procs.start(
        &dir.join("ours-pass"),
        ours,
        &[
            "--cluster-enabled",
            "no",
            "--bind",
            "0.0.0.0",
            "--requirepass",
            "pw",
        ],
    );
    assert!(from_outside(ours).starts_with("-NOAUTH"));
}

/// `stop-writes-on-bgsave-error yes` (the default) with save points: after a failed BGSAVE
/// (its directory gone) writes are refused with valkey-server 9.1's `-MISCONF` text, captured
/// from the real server put in the same state; `CONFIG SET stop-writes-on-bgsave-error no`
/// lets them through.
#[test]
fn a_failed_bgsave_stops_writes_with_valkeys_misconf() {
    let dir = test_dir("bgsave-error");
    let [valkey, ours] = ports::ports(2)[..] else {
        unreachable!()
    };
    let fail_bgsave = |port: u16| -> String {
        let mut c = Client::connect(port);
        assert_eq!(c.cmd_s(&["SET", "a", "1"]), "+OK\r\n");
        let _ = c.cmd(&["BGSAVE"]);
        wait_until("rdb_last_bgsave_status:err", || {
            bulk_text(&c.cmd(&["INFO", "persistence"])).contains("rdb_last_bgsave_status:err")
        });
        c.cmd_s(&["SET", "a", "2"])
    };
    let vdir = dir.join("valkey");
    let _valkey = common::start_real_server("valkey-server", valkey, &vdir, &["--save", "3600 1"]);
    std::fs::remove_dir_all(&vdir).unwrap();
    let expected = fail_bgsave(valkey);
    assert!(
        expected.starts_with("-MISCONF Valkey is configured to save RDB"),
        "{expected}"
    );
    let mut procs = common::Procs::default();
    let odir = procs.start(
        &dir.join("ours"),
        ours,
        &["--cluster-enabled", "no", "--save", "3600 1"],
    );
    std::fs::remove_dir_all(&odir).unwrap();
    assert_eq!(fail_bgsave(ours), expected);
    let mut c = Client::connect(ours);
    assert_eq!(c.cmd_s(&["GET", "a"]), "$1\r\n1\r\n");
    assert_eq!(
        c.cmd_s(&["CONFIG", "SET", "stop-writes-on-bgsave-error", "no"]),
        "+OK\r\n"
    );
    assert_eq!(c.cmd_s(&["SET", "a", "2"]), "+OK\r\n");
}

/// `client-output-buffer-limit pubsub`: a subscriber that does not read is closed once its
/// unsent output passes the hard limit, or stays over the soft limit longer than its seconds
/// (the same sequence run on redis-server 7.0 beside ours, which closes it too; valkey-server
/// 9.1 keeps large published payloads by reference in the output list, so its `omem` stays
/// small and 30 MB pending does not reach 1 MiB there).
#[test]
fn a_subscriber_past_its_output_limit_is_closed_as_redis_does() {
    let dir = test_dir("pubsub-limit");
    let [redis, ours] = ports::ports(2)[..] else {
        unreachable!()
    };
    let _redis = common::start_real_server("redis-server", redis, &dir.join("redis"), &[]);
    let mut procs = common::Procs::default();
    procs.start(&dir.join("ours"), ours, &["--cluster-enabled", "no"]);
    let payload = "x".repeat(100_000);
    for port in [redis, ours] {
        let mut admin = Client::connect(port);
        // Subscribers in CLIENT LIST (valkey's INFO pubsub_clients lags a closed one).
        let subscribers = |admin: &mut Client| {
            let list = bulk_text(&admin.cmd(&["CLIENT", "LIST"]));
            list.lines()
                .filter(|l| l.contains(" sub=1 "))
                .count()
                .to_string()
        };
        // Hard limit 1 MiB: 30 MB published to a subscriber that never reads.
        assert_eq!(
            admin.cmd_s(&[
                "CONFIG",
                "SET",
                "client-output-buffer-limit",
                "pubsub 1mb 0 0"
            ]),
            "+OK\r\n",
            "{port}"
        );
        let mut sub = Client::connect(port);
        assert!(sub.cmd_s(&["SUBSCRIBE", "ch"]).starts_with("*3\r\n"));
        assert_eq!(subscribers(&mut admin), "1", "{port}");
        for _ in 0..300 {
            admin.cmd(&["PUBLISH", "ch", &payload]);
        }
        wait_until(&format!("{port}: closed (hard)"), || {
            subscribers(&mut admin) == "0"
        });
        drop(sub);
        // Soft limit 64 KiB for 1 s: over it, the subscriber is kept (unlike the hard
        // limit), then closed once it stayed over it past the second (the limit is checked
        // as output is added: each look publishes once more). A subscriber that stayed over
        // it past the second before the look proves nothing either way: another is tried.
        assert_eq!(
            admin.cmd_s(&[
                "CONFIG",
                "SET",
                "client-output-buffer-limit",
                "pubsub 0 64kb 1"
            ]),
            "+OK\r\n"
        );
        let sub = wait_for(
            &format!("{port}: a subscriber over the soft limit kept"),
            || {
                let mut sub = Client::connect(port);
                assert!(sub.cmd_s(&["SUBSCRIBE", "ch"]).starts_with("*3\r\n"));
                for _ in 0..100 {
                    admin.cmd(&["PUBLISH", "ch", &payload]);
                }
                // Listed, with its output buffer (`omem`) past the soft limit.
                let list = bulk_text(&admin.cmd(&["CLIENT", "LIST"]));
                let omem: Vec<u64> = list
                    .lines()
                    .filter(|l| l.contains(" sub=1 "))
                    .filter_map(|l| l.split(' ').find_map(|f| f.strip_prefix("omem=")))
                    .map(|n| n.parse().unwrap())
                    .collect();
                (omem.len() == 1 && omem[0] >= 64 * 1024).then_some(sub)
            },
        );
        wait_until(&format!("{port}: closed (soft)"), || {
            admin.cmd(&["PUBLISH", "ch", &payload]);
            subscribers(&mut admin) == "0"
        });
        drop(sub);
    }
}

/// `client-output-buffer-limit normal` (Valkey `closeClientOnOutputBufferLimitReached`): a
/// client that pipelines GETs of a 4 KB value and never reads is kept while the normal class
/// has no limit (Valkey's default `normal 0 0 0`: its whole pipeline runs), and with
/// `normal 1mb 0 0` closed once its unsent replies pass the hard limit, the rest of its
/// pipeline not run (Valkey stops parsing a client it scheduled to close); a client whose
/// replies stay under the limit, and the others, are served. The same steps on
/// valkey-server 9.1 and on ours. The value is under Valkey 9.1's
/// `min-string-size-avoid-copy-reply` (16 KB), so Valkey copies it into the output buffer and
/// counts it (larger values are kept there by reference, see the pubsub test above). The
/// pipeline's 40 MB of replies is far more than loopback socket buffers take, so the unsent
/// part passes 1 MB however the server's reads and writes interleave.
#[test]
fn a_client_past_the_normal_output_limit_is_closed_as_valkey_does() {
    use std::io::Write as _;
    let dir = test_dir("normal-limit");
    let [valkey, ours] = ports::ports(2)[..] else {
        unreachable!()
    };
    let _valkey = common::start_real_server("valkey-server", valkey, &dir.join("valkey"), &[]);
    let mut procs = common::Procs::default();
    procs.start(&dir.join("ours"), ours, &["--cluster-enabled", "no"]);
    let value = "v".repeat(4_000);
    let gets = 10_000;
    // `gets` GETs of the value, then `INCR <marker>`: the marker says the whole pipeline ran.
    let pipeline = |marker: &str| {
        let mut bytes = common::encode(&[b"GET", b"big"]).repeat(gets);
        bytes.extend_from_slice(&common::encode(&[b"INCR", marker.as_bytes()]));
        bytes
    };
    let client_id = |c: &mut Client| {
        let id = c.cmd_s(&["CLIENT", "ID"]);
        id.trim_start_matches(':').trim_end().to_string()
    };
    let listed = |admin: &mut Client, id: &str| {
        bulk_text(&admin.cmd(&["CLIENT", "LIST", "ID", id])).contains(&format!("id={id} "))
    };
    for port in [valkey, ours] {
        let mut admin = Client::connect(port);
        assert_eq!(admin.cmd_s(&["SET", "big", &value]), "+OK\r\n");
        // No limit (the default): the non-reader's whole pipeline runs and it stays.
        assert_eq!(
            get(&mut admin, "client-output-buffer-limit"),
            "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
            "{port}"
        );
        let mut kept = Client::connect(port);
        let kept_id = client_id(&mut kept);
        kept.send_raw(&pipeline("done-unlimited"));
        wait_until(&format!("{port}: the unlimited pipeline ran"), || {
            admin.cmd_s(&["GET", "done-unlimited"]) == "$1\r\n1\r\n"
        });
        assert!(
            listed(&mut admin, &kept_id),
            "{port}: closed without a limit"
        );
        drop(kept);
        // Hard limit 1 MiB.
        assert_eq!(
            admin.cmd_s(&[
                "CONFIG",
                "SET",
                "client-output-buffer-limit",
                "normal 1mb 0 0"
            ]),
            "+OK\r\n",
            "{port}"
        );
        assert_eq!(
            get(&mut admin, "client-output-buffer-limit"),
            "normal 1048576 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
            "{port}"
        );
        let mut sink = Client::connect(port);
        let sink_id = client_id(&mut sink);
        assert!(listed(&mut admin, &sink_id), "{port}");
        // The server may close it while the pipeline is still being written.
        let _ = sink.stream.write_all(&pipeline("done-limited"));
        wait_until(&format!("{port}: the non-reader closed"), || {
            !listed(&mut admin, &sink_id)
        });
        // Closed: the rest of its pipeline never runs.
        assert_eq!(admin.cmd_s(&["GET", "done-limited"]), "$-1\r\n", "{port}");
        // A client whose replies stay under the limit (100 GETs, 400 KB) gets them all.
        let mut reader = Client::connect(port);
        reader.send_raw(&common::encode(&[b"GET", b"big"]).repeat(100));
        let expected = format!("$4000\r\n{value}\r\n");
        for _ in 0..100 {
            assert_eq!(
                String::from_utf8(reader.read_reply()).unwrap(),
                expected,
                "{port}"
            );
        }
        assert_eq!(admin.cmd_s(&["PING"]), "+PONG\r\n", "{port}");
        assert_eq!(
            admin.cmd_s(&[
                "CONFIG",
                "SET",
                "client-output-buffer-limit",
                "normal 0 0 0"
            ]),
            "+OK\r\n",
            "{port}"
        );
    }
}

//! Directives a Redis user's config carries (issue 19): `include`, `pidfile`, `timeout`,
//! `tcp-keepalive`, `save`, `dbfilename`, `slowlog-*`, `latency-monitor-threshold`, taken from
//! a config file and shown by CONFIG GET with Redis's names and values. Ports 23230-23231.

#![allow(clippy::disallowed_methods)] // the test waits on the clock

mod common;

use common::{bulk_text, test_dir, wait_until, Client, BIN};
use std::io::Read;
use std::time::Duration;

fn get(c: &mut Client, name: &str) -> String {
    let reply = c.cmd(&["CONFIG", "GET", name]);
    let text = String::from_utf8_lossy(&reply).into_owned();
    // *2 $len name $len value
    text.split("\r\n").nth(4).unwrap_or_default().to_string()
}

#[test]
fn a_redis_style_config_with_include_pidfile_and_timeout_is_taken() {
    let dir = test_dir("redis-config");
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
            "port 23230\ncluster-enabled no\ndir {}\ninclude {}\npidfile {}\ntimeout 1\ntcp-keepalive 60\nsave 900 1 300 10\ndbfilename data.rdb\n",
            dir.display(),
            dir.join("extra.conf").display(),
            pidfile.display()
        ),
    )
    .unwrap();
    let mut child = std::process::Command::new(BIN)
        .arg(dir.join("main.conf"))
        .stderr(std::fs::File::create(dir.join("stderr.log")).unwrap())
        .spawn()
        .unwrap();
    common::wait_for_port(23230, Duration::from_secs(15));
    let mut c = Client::connect(23230);
    assert_eq!(get(&mut c, "slowlog-log-slower-than"), "5");
    assert_eq!(get(&mut c, "latency-monitor-threshold"), "10");
    assert_eq!(get(&mut c, "timeout"), "1");
    assert_eq!(get(&mut c, "tcp-keepalive"), "60");
    assert_eq!(get(&mut c, "save"), "900 1 300 10");
    assert_eq!(get(&mut c, "dbfilename"), "data.rdb");
    let pid = std::fs::read_to_string(&pidfile).unwrap();
    assert_eq!(pid.trim(), child.id().to_string());
    // `timeout 1`: an idle client is closed, a subscriber is not.
    let mut sub = Client::connect(23230);
    assert!(sub.cmd_s(&["SUBSCRIBE", "ch"]).starts_with("*3\r\n"));
    let mut idle = Client::connect(23230);
    assert_eq!(idle.cmd_s(&["PING"]), "+PONG\r\n");
    let mut buf = [0u8; 16];
    idle.stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let t0 = std::time::Instant::now();
    assert_eq!(
        idle.stream.read(&mut buf).unwrap(),
        0,
        "closed by the server"
    );
    assert!(t0.elapsed() >= Duration::from_millis(900));
    wait_until(
        Duration::from_secs(5),
        "the subscriber still served",
        || {
            let mut c = Client::connect(23230);
            bulk_text(&c.cmd(&["CLIENT", "LIST"])).contains("sub=1")
        },
    );
    // SHUTDOWN saves (save points are set) to data.rdb and removes the pidfile.
    c = Client::connect(23230);
    assert_eq!(c.cmd_s(&["SET", "k", "v"]), "+OK\r\n");
    c.send_raw(&common::encode(&[b"SHUTDOWN"]));
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert!(dir.join("data.rdb").exists());
    assert!(!pidfile.exists());
}

#[test]
fn an_include_that_cannot_be_read_is_refused_with_its_line() {
    let dir = test_dir("redis-config-bad-include");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("main.conf"),
        "port 23231\n\ninclude /nonexistent/x.conf\n",
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

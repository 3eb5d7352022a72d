//! CONFIG REWRITE (issue 19) side by side with redis-server 7.0: the same config file (comments,
//! an `include`, two `save` lines, an alias, runs of blank lines), the same CONFIG SETs, then
//! the rewritten files agree line for line on everything both servers have; ours restarts
//! from its rewritten file with the new values; without a config file both refuse with the
//! same error. Ports from `common::ports` (both config files enable cluster mode: bus ports
//! +10000, allocated with them).

mod common;

use common::{bulk_text, ports, test_dir, Client, Logged, BIN};
use std::path::Path;
use std::process::Command;

/// The config file both servers start with, for `port` in `dir`.
fn config_text(port: u16, dir: &Path) -> String {
    format!(
        "# a comment at the top\n\
         port {port}\n\
         include {inc}\n\
         save 900 1\n\
         save 300 10\n\
         hz 10\n\
         # a comment in the middle\n\
         \n\n\n\
         loglevel notice\n\
         slave-read-only yes\n\
         cluster-enabled yes\n\
         cluster-config-file nodes-{port}.conf\n\
         cluster-node-timeout 5000\n",
        inc = dir.join("included.conf").display(),
    )
}

/// What both servers are told by CONFIG SET.
const SETS: &[(&str, &str)] = &[
    ("save", "60 5"),
    ("slowlog-max-len", "200"),
    ("cluster-node-timeout", "7000"),
    ("client-output-buffer-limit", "pubsub 1mb 512kb 30"),
    ("maxclients", "500"),
    ("timeout", "30"),
    ("latency-monitor-threshold", "100"),
    ("cluster-require-full-coverage", "no"),
    ("auto-aof-rewrite-min-size", "128mb"),
];

/// Starts `bin` on its config `file` (which names `port`) in `dir`; waits until it listens.
fn start(bin: &str, file: &Path, port: u16, dir: &Path) -> Logged {
    let mut cmd = Command::new(bin);
    cmd.arg(file).arg("--dir").arg(dir);
    let mut child = Logged::spawn(
        &mut cmd,
        &dir.join("stderr.log"),
        &format!("{bin} on {port}"),
    );
    child.wait_listening(port);
    child
}

fn get(c: &mut Client, name: &str) -> String {
    let reply = String::from_utf8_lossy(&c.cmd(&["CONFIG", "GET", name])).into_owned();
    reply.split("\r\n").nth(4).unwrap_or_default().to_string()
}

/// Sets [`SETS`] on the server at `port`, rewrites its file and returns the file's text.
fn set_and_rewrite(port: u16, file: &Path) -> String {
    let mut c = Client::connect(port);
    for (name, value) in SETS {
        assert_eq!(
            c.cmd_s(&["CONFIG", "SET", name, value]),
            "+OK\r\n",
            "{name}"
        );
    }
    assert_eq!(c.cmd_s(&["CONFIG", "REWRITE"]), "+OK\r\n");
    std::fs::read_to_string(file).unwrap()
}

/// The file's lines, the directory and the port made neutral (the port only as a number of
/// its own: not inside a longer number or the directory's name).
fn neutral(text: &str, port: u16, dir: &Path) -> Vec<String> {
    let port = port.to_string();
    text.lines()
        .map(|l| {
            let l = l.replace(&dir.display().to_string(), "DIR");
            let mut out = String::new();
            let mut rest = l.as_str();
            while let Some(at) = rest.find(&port) {
                let end = at + port.len();
                let digit = |c: Option<char>| c.is_some_and(|c| c.is_ascii_digit());
                out.push_str(&rest[..at]);
                if digit(rest[..at].chars().next_back()) || digit(rest[end..].chars().next()) {
                    out.push_str(&port);
                } else {
                    out.push_str("PORT");
                }
                rest = &rest[end..];
            }
            out.push_str(rest);
            out
        })
        .collect()
}

#[test]
fn rewritten_file_matches_redis_and_restarts_with_the_new_values() {
    let base = test_dir("config-rewrite");
    let mut files = Vec::new();
    let [redis_port, ours_port] = ports::ports(2)[..] else {
        unreachable!()
    };
    for (port, name) in [(redis_port, "redis"), (ours_port, "ours")] {
        let dir = base.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("included.conf"),
            "# included\nslowlog-log-slower-than 5000\n",
        )
        .unwrap();
        let file = dir.join("server.conf");
        std::fs::write(&file, config_text(port, &dir)).unwrap();
        files.push((port, dir, file));
    }
    let redis_text = {
        let (port, dir, file) = &files[0];
        let _redis = start("redis-server", file, *port, dir);
        neutral(&set_and_rewrite(*port, file), *port, dir)
    };
    let (port, dir, file) = &files[1];
    let ours_text = {
        let _ours = start(BIN, file, *port, dir);
        let mut c = Client::connect(*port);
        let info = bulk_text(&c.cmd(&["INFO", "server"]));
        assert!(
            info.contains(&format!("config_file:{}\r\n", file.display())),
            "{info}"
        );
        neutral(&set_and_rewrite(*port, file), *port, dir)
    };
    // The old lines: reused in place, in the same order, with the same values; the second
    // save line blanked; the alias renamed; the include kept.
    let signature = "# Generated by CONFIG REWRITE";
    let head = |t: &[String]| -> Vec<String> {
        t.iter().take_while(|l| *l != signature).cloned().collect()
    };
    assert_eq!(
        head(&ours_text),
        head(&redis_text),
        "ours:\n{ours_text:#?}\nredis:\n{redis_text:#?}"
    );
    assert!(head(&ours_text).contains(&"replica-read-only yes".to_string()));
    // The appended lines of what was set (and `dir`): the same in both files (in another
    // order: redis-server appends in its option dictionary's hash order, we in table order).
    let appended = |t: &[String]| {
        let tail: Vec<String> = t.iter().skip_while(|l| *l != signature).cloned().collect();
        tail.into_iter()
            .filter(|l| {
                SETS.iter().any(|(n, _)| l.starts_with(&format!("{n} "))) || l.starts_with("dir ")
            })
            .collect::<std::collections::BTreeSet<String>>()
    };
    assert_eq!(appended(&ours_text), appended(&redis_text));
    for line in [
        "dir \"DIR\"",
        "slowlog-max-len 200",
        "maxclients 500",
        "auto-aof-rewrite-min-size 128mb",
        "client-output-buffer-limit pubsub 1mb 512kb 30",
    ] {
        assert!(
            appended(&ours_text).iter().any(|l| l == line),
            "{line}: {ours_text:#?}"
        );
    }
    // Ours restarts from the rewritten file with the values that were set.
    let _ours = start(BIN, file, *port, dir);
    let mut c = Client::connect(*port);
    for (name, value) in SETS {
        let expect = match *name {
            "client-output-buffer-limit" => {
                "normal 0 0 0 slave 268435456 67108864 60 pubsub 1048576 524288 30".to_string()
            }
            "auto-aof-rewrite-min-size" => "134217728".to_string(),
            _ => value.to_string(),
        };
        assert_eq!(get(&mut c, name), expect, "{name} after the restart");
    }
}

#[test]
fn without_a_config_file_both_refuse_alike() {
    let base = test_dir("config-rewrite-none");
    let redis_dir = base.join("redis");
    let [redis_port, ours_port] = ports::ports(2)[..] else {
        unreachable!()
    };
    let _redis = common::start_real_server("redis-server", redis_port, &redis_dir, &[]);
    let redis_reply = Client::connect(redis_port).cmd_s(&["CONFIG", "REWRITE"]);
    let mut procs = common::Procs::default();
    procs.start(&base, ours_port, &[]);
    let ours = Client::connect(ours_port).cmd_s(&["CONFIG", "REWRITE"]);
    assert_eq!(ours, redis_reply);
    assert_eq!(ours, "-ERR The server is running without a config file\r\n");
    let mut c = Client::connect(ours_port);
    assert!(bulk_text(&c.cmd(&["INFO", "server"])).contains("config_file:\r\n"));
}

//! The minimal host as a real cluster node: three processes formed into a cluster by
//! `redis-cli --cluster create`, `redis-cli -c` following redirects, a restart from
//! nodes.conf, and an acknowledged ADDSLOTS surviving kill -9. Ports (and bus ports, + 10000)
//! come from the shared allocator (`ferrocluster_testkit::ports`); every wait only bounds a
//! hang (`HANG`). Each node's output is in `node.log` of its directory, which is kept when
//! the test fails.
#![allow(clippy::disallowed_methods)]

use ferrocluster_testkit::proc::Logged;
use ferrocluster_testkit::{ports, wait_until, TestDir, HANG};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A minimal host process, SIGKILLed on drop.
struct Node {
    port: u16,
    dir: PathBuf,
    child: Option<Logged>,
}

impl Node {
    fn start(base: &Path, port: u16) -> Node {
        let dir = base.join(port.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        let mut n = Node {
            port,
            dir,
            child: None,
        };
        n.spawn();
        n
    }

    /// Starts the process (its output appended to `node.log`) and waits for its client port;
    /// a start that fails panics with the log's tail and who holds the ports.
    fn spawn(&mut self) {
        let mut child = Logged::spawn(
            Command::new(env!("CARGO_BIN_EXE_ferrocluster-minimal-host"))
                .args(["--port", &self.port.to_string(), "--dir"])
                .arg(&self.dir),
            &self.dir.join("node.log"),
            &format!("minimal host on port {}", self.port),
        );
        child.wait_listening(self.port);
        self.child = Some(child);
    }

    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill();
        }
    }

    fn cmd(&self, args: &[&str]) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(HANG)).unwrap();
        let mut req = format!("*{}\r\n", args.len());
        for a in args {
            req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        s.write_all(req.as_bytes()).unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 64 * 1024];
        // One reply: read until it parses.
        loop {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "connection closed");
            out.extend_from_slice(&buf[..n]);
            if let Ok(Some(_)) = redis_protocol::resp2::decode::decode(&out) {
                return String::from_utf8_lossy(&out).into_owned();
            }
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Runs `redis-cli args` to its end, its output (stdout and stderr) in a log of its own in
/// `dir`, and returns that output. A run that fails, or hangs (`HANG`), fails the test.
fn redis_cli(dir: &Path, args: &[&str]) -> String {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let log = dir.join(format!(
        "redis-cli-{}.log",
        RUNS.fetch_add(1, Ordering::Relaxed)
    ));
    let mut cli = Logged::spawn(
        Command::new("redis-cli").args(args),
        &log,
        &format!("redis-cli {args:?}"),
    );
    let status = cli.wait_exit();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(status.success(), "redis-cli {args:?} ({status}): {text}");
    text
}

fn myself_line(n: &Node) -> String {
    let nodes = n.cmd(&["CLUSTER", "NODES"]);
    nodes
        .lines()
        .find(|l| l.contains("myself"))
        .unwrap_or_else(|| panic!("{nodes}"))
        .to_string()
}

#[test]
fn three_nodes_form_a_cluster_route_and_restart_from_nodes_conf() {
    let b = TestDir::new("minimal-three");
    let mut nodes: Vec<Node> = ports::ports(3)
        .into_iter()
        .map(|p| Node::start(&b, p))
        .collect();
    let addrs: Vec<String> = nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect();
    let (p0, p2) = (nodes[0].port.to_string(), nodes[2].port.to_string());
    let mut create = vec!["--cluster", "create"];
    create.extend(addrs.iter().map(String::as_str));
    create.push("--cluster-yes");
    let out = redis_cli(&b, &create);
    assert!(out.contains("[OK] All 16384 slots covered."), "{out}");
    for n in &nodes {
        wait_until("cluster_state:ok", || {
            n.cmd(&["CLUSTER", "INFO"]).contains("cluster_state:ok")
        });
    }
    // redis-cli -c follows MOVED: keys of every node, written through the first node and
    // read through the third.
    for i in 0..20 {
        let key = format!("key:{i}");
        let val = format!("value-{i}");
        assert_eq!(
            redis_cli(&b, &["-c", "-p", &p0, "SET", &key, &val]).trim(),
            "OK"
        );
        assert_eq!(redis_cli(&b, &["-c", "-p", &p2, "GET", &key]).trim(), val);
    }
    let direct = nodes[0].cmd(&["GET", "key:0"]);
    let moved = nodes
        .iter()
        .any(|n| n.cmd(&["GET", "key:0"]).starts_with("-MOVED "));
    assert!(moved, "some node redirects key:0 ({direct})");
    // Restart the second node from its nodes.conf: same ID, same slots, the cluster ok again.
    let before = myself_line(&nodes[1]);
    nodes[1].kill9();
    nodes[1].spawn();
    let after = myself_line(&nodes[1]);
    let id = |l: &str| l.split(' ').next().unwrap().to_string();
    let slots = |l: &str| l.split(' ').skip(8).collect::<Vec<_>>().join(" ");
    assert_eq!(id(&before), id(&after));
    assert_eq!(slots(&before), slots(&after));
    wait_until("cluster_state:ok after the restart", || {
        nodes[1]
            .cmd(&["CLUSTER", "INFO"])
            .contains("cluster_state:ok")
    });
    wait_until("the others see the restarted node connected", || {
        nodes[0]
            .cmd(&["CLUSTER", "NODES"])
            .lines()
            .any(|l| l.starts_with(&id(&after)) && l.contains(" connected") && !l.contains("fail"))
    });
}

#[test]
fn acknowledged_addslots_survives_kill_9() {
    let b = TestDir::new("minimal-ack");
    let mut n = Node::start(&b, ports::port());
    assert_eq!(n.cmd(&["CLUSTER", "ADDSLOTS", "0", "1", "2"]), "+OK\r\n");
    // No wait: the reply came after the write and fsync.
    n.kill9();
    n.spawn();
    let line = myself_line(&n);
    assert!(line.ends_with(" 0-2"), "{line}");
}

//! The minimal host as a real cluster node: three processes formed into a cluster by
//! `redis-cli --cluster create`, `redis-cli -c` following redirects, a restart from
//! nodes.conf, and an acknowledged ADDSLOTS surviving kill -9 (ports 7100-7199, bus ports
//! +10000: run inside a network namespace).
#![allow(clippy::disallowed_methods)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Node {
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
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

    fn spawn(&mut self) {
        let log = std::fs::File::create(self.dir.join("stderr.log")).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_ferrocluster-minimal-host"))
            .args(["--port", &self.port.to_string(), "--dir"])
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        wait_until("the client port", || {
            TcpStream::connect(("127.0.0.1", self.port)).is_ok()
        });
    }

    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn cmd(&self, args: &[&str]) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
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

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn base(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fc-minimal-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn redis_cli(args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("redis-cli is installed (.ci/run)");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "redis-cli {args:?}: {text}");
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
    let b = base("three");
    let mut nodes: Vec<Node> = (7100..7103).map(|p| Node::start(&b, p)).collect();
    let out = redis_cli(&[
        "--cluster",
        "create",
        "127.0.0.1:7100",
        "127.0.0.1:7101",
        "127.0.0.1:7102",
        "--cluster-yes",
    ]);
    assert!(out.contains("[OK] All 16384 slots covered."), "{out}");
    for n in &nodes {
        wait_until("cluster_state:ok", || {
            n.cmd(&["CLUSTER", "INFO"]).contains("cluster_state:ok")
        });
    }
    // redis-cli -c follows MOVED: keys of every node, written and read through node 7100.
    for i in 0..20 {
        let key = format!("key:{i}");
        let val = format!("value-{i}");
        assert_eq!(
            redis_cli(&["-c", "-p", "7100", "SET", &key, &val]).trim(),
            "OK"
        );
        assert_eq!(redis_cli(&["-c", "-p", "7102", "GET", &key]).trim(), val);
    }
    let direct = nodes[0].cmd(&["GET", "key:0"]);
    let moved = nodes
        .iter()
        .any(|n| n.cmd(&["GET", "key:0"]).starts_with("-MOVED "));
    assert!(moved, "some node redirects key:0 ({direct})");
    // Restart node 7101 from its nodes.conf: same ID, same slots, the cluster ok again.
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
    wait_until("the others see 7101 connected", || {
        nodes[0]
            .cmd(&["CLUSTER", "NODES"])
            .lines()
            .any(|l| l.starts_with(&id(&after)) && l.contains(" connected") && !l.contains("fail"))
    });
}

#[test]
fn acknowledged_addslots_survives_kill_9() {
    let b = base("ack");
    let mut n = Node::start(&b, 7110);
    assert_eq!(n.cmd(&["CLUSTER", "ADDSLOTS", "0", "1", "2"]), "+OK\r\n");
    // No wait: the reply came after the write and fsync.
    n.kill9();
    n.spawn();
    let line = myself_line(&n);
    assert!(line.ends_with(" 0-2"), "{line}");
}

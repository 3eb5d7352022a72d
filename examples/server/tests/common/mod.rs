//! Helpers for the server's integration tests: spawning the built binary, a tiny RESP client,
//! a guard that kills every process a test started (also when the test fails), external tool
//! checks that fail with an install hint.
#![allow(dead_code, unused_imports, clippy::disallowed_methods)]

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub use ferrocluster_testkit::certs;
pub mod resp_cases;
pub mod stream;

/// A capture of `tests/vectors/` (JSON), by file name.
pub fn vector(name: &str) -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/vectors")
        .join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("can't read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Runs the server binary with `--port port --dir dir` and `extra` until it exits (a start
/// that must fail): (exit code, stderr).
pub fn run_to_exit(dir: &Path, port: u16, extra: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(BIN)
        .arg("--port")
        .arg(port.to_string())
        .arg("--dir")
        .arg(dir)
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .expect("run ferrocluster-server");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The server binary cargo built for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_ferrocluster-server");

/// Loopback ports from the one allocator every test binary shares (`ferrocluster-testkit`):
/// `ports::port()`, `ports::ports(n)`, `ports::block(n)` (consecutive, for base-port tools).
pub use ferrocluster_testkit::ports;
pub use ferrocluster_testkit::proc::{log_tail, run_bounded, Logged};
pub use ferrocluster_testkit::wait::{wait_for, wait_ok, HANG};

/// Kills every process it holds when dropped; removes their directories when the test passed
/// and keeps them (naming them on stderr) when it failed.
#[derive(Default)]
pub struct Procs {
    pub children: Vec<(u16, Logged)>,
    pub dirs: Vec<PathBuf>,
}

impl Procs {
    /// Starts a node on `port` with its own directory under `base`, plus `extra` flags; waits
    /// until it listens (a start that fails panics with its log's tail and who holds its
    /// ports).
    pub fn start(&mut self, base: &Path, port: u16, extra: &[&str]) -> PathBuf {
        self.start_inner(base, port, None, extra)
    }

    /// Like [`Procs::start`], with a config file as the first argument.
    pub fn start_with_file(
        &mut self,
        base: &Path,
        port: u16,
        file: &Path,
        extra: &[&str],
    ) -> PathBuf {
        self.start_inner(base, port, Some(file), extra)
    }

    fn start_inner(
        &mut self,
        base: &Path,
        port: u16,
        file: Option<&Path>,
        extra: &[&str],
    ) -> PathBuf {
        let dir = base.join(format!("node-{port}"));
        std::fs::create_dir_all(&dir).expect("create node dir");
        let mut cmd = Command::new(BIN);
        cmd.args(file)
            .arg("--port")
            .arg(port.to_string())
            .arg("--dir")
            .arg(&dir)
            .args(extra);
        let mut child = Logged::spawn(
            &mut cmd,
            &dir.join("stderr.log"),
            &format!("ferrocluster-server on {port}"),
        );
        child.wait_listening(port);
        self.children.push((port, child));
        if !self.dirs.contains(&dir) {
            self.dirs.push(dir.clone());
        }
        dir
    }

    /// The running node on `port`, if any.
    pub fn child(&mut self, port: u16) -> Option<&mut Logged> {
        self.children
            .iter_mut()
            .rev()
            .find(|(p, c)| *p == port && c.pid().is_some())
            .map(|(_, c)| c)
    }

    /// The pid of the running node on `port`.
    pub fn pid(&mut self, port: u16) -> u32 {
        self.child(port)
            .and_then(|c| c.pid())
            .unwrap_or_else(|| panic!("no running node on {port}"))
    }

    /// Kills (SIGKILL) the node on `port`.
    pub fn kill(&mut self, port: u16) {
        for (p, c) in &mut self.children {
            if *p == port {
                c.kill();
            }
        }
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for (_, c) in &mut self.children {
            c.kill();
        }
        if std::thread::panicking() {
            for d in &self.dirs {
                eprintln!("test failed: node files kept in {}", d.display());
            }
        } else {
            for d in &self.dirs {
                let _ = std::fs::remove_dir_all(d);
            }
        }
    }
}

/// A real `redis-server` / `valkey-server` a test started; killed when dropped.
pub struct RealServer(pub Logged);

/// Starts a real server `bin` on `port` without persistence (`--save ""`, no AOF), its files
/// and log (`log`) in `dir`, plus `extra` arguments; waits until it listens (a start that
/// fails panics with the log's tail). A missing binary fails the test with the hint that
/// `.ci/run` installs it.
pub fn start_real_server(bin: &str, port: u16, dir: &Path, extra: &[&str]) -> RealServer {
    std::fs::create_dir_all(dir).expect("create the server's dir");
    let mut cmd = Command::new(bin);
    cmd.args(["--port", &port.to_string(), "--save", ""])
        .args(["--appendonly", "no"])
        .args(extra)
        .arg("--dir")
        .arg(dir)
        .arg("--logfile")
        .arg(dir.join("log"));
    // The server logs to `log`; what it prints before it opens the log goes to `stdout.log`.
    let mut child = Logged::spawn(
        &mut cmd,
        &dir.join("stdout.log"),
        &format!("{bin} on {port}"),
    );
    if let Some(status) = child.exited() {
        panic!(
            "{bin} exited at once ({status}):\n{}",
            log_tail(&dir.join("log"), 40)
        );
    }
    wait_real_listening(&mut child, port, &dir.join("log"));
    RealServer(child)
}

/// Waits until a real server listens on `port`; its own log is `log`.
fn wait_real_listening(child: &mut Logged, port: u16, log: &Path) {
    let end = Instant::now() + HANG;
    loop {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        if child.exited().is_some() || Instant::now() >= end {
            panic!(
                "{}\n--- last lines of {} ---\n{}",
                child.failure("did not start", port),
                log.display(),
                log_tail(log, 40)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts a valkey-server 9.1 replica of the (non-cluster) primary on `primary` at `port`,
/// its files in `dir`/valkey, and waits until its link is up. Returns it and a client on it.
pub fn valkey_replica_of(primary: u16, port: u16, dir: &Path) -> (RealServer, Client) {
    let p = primary.to_string();
    let server = start_real_server(
        "valkey-server",
        port,
        &dir.join("valkey"),
        &["--replicaof", "127.0.0.1", &p],
    );
    let mut c = Client::connect(port);
    wait_until("the replica in sync", || {
        bulk_text(&c.cmd(&["INFO", "replication"])).contains("master_link_status:up")
    });
    (server, c)
}

/// Makes the node on `port` (ours or a real one, cluster mode) a one-node cluster owning every
/// slot, and waits for `cluster_state:ok`.
pub fn own_every_slot(port: u16) {
    let mut c = Client::connect(port);
    assert_eq!(
        c.cmd_s(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]),
        "+OK\r\n",
        "{port}: ADDSLOTSRANGE"
    );
    wait_until(&format!("{port}: cluster_state:ok"), || {
        bulk_text(&c.cmd(&["CLUSTER", "INFO"])).contains("cluster_state:ok")
    });
}

/// A fresh directory for one test (`$TMPDIR/ferrocluster-server-test-<name>-<pid>`).
pub fn test_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "ferrocluster-server-test-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create test dir");
    d
}

/// Waits until `port` accepts TCP connections; panics after [`HANG`].
pub fn wait_for_port(port: u16) {
    wait_until(&format!("port {port} to accept connections"), || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
}

/// Polls `f` until it holds; panics naming `what` after [`HANG`] (a bound on a hang, never a
/// measure of speed).
pub fn wait_until(what: &str, f: impl FnMut() -> bool) {
    ferrocluster_testkit::wait::wait_until(what, f)
}

/// Encodes a request as a RESP multibulk array.
pub fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// A minimal RESP client: sends requests, returns each reply's exact bytes.
pub struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    pub fn connect(port: u16) -> Client {
        Client::connect_to("127.0.0.1", port)
    }

    /// Connects to `host` (`127.0.0.1`, `::1`, ...).
    pub fn connect_to(host: &str, port: u16) -> Client {
        let stream = TcpStream::connect((host, port)).expect("connect");
        stream.set_read_timeout(Some(HANG)).expect("timeout");
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    /// Sends raw bytes.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write");
    }

    /// Reads one complete reply (RESP2 or RESP3) and returns its bytes.
    pub fn read_reply(&mut self) -> Vec<u8> {
        loop {
            if let Some(used) = frame_len(&self.buf, 0) {
                return self.buf.drain(..used).collect();
            }
            let mut chunk = [0u8; 65536];
            let n = self.stream.read(&mut chunk).expect("read reply");
            assert!(n > 0, "connection closed while waiting for a reply");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Sends one command and returns its reply bytes.
    pub fn cmd(&mut self, args: &[&str]) -> Vec<u8> {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        self.send_raw(&encode(&a));
        self.read_reply()
    }

    /// Sends one command and returns its reply as text (lossy), for readable assertions.
    pub fn cmd_s(&mut self, args: &[&str]) -> String {
        String::from_utf8_lossy(&self.cmd(args)).into_owned()
    }

    /// Reads until the server closes the connection; returns everything that arrived.
    pub fn read_to_close(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        let _ = self.stream.read_to_end(&mut out);
        out
    }

    /// Reads until the server closes the connection (an end of stream, or a reset when it
    /// closed with our bytes unread) and returns everything that arrived. Panics when the
    /// connection is still open at the read timeout ([`HANG`]): unlike
    /// [`Client::read_to_close`], a connection left open is a failure, never an empty answer.
    pub fn read_until_closed(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        if let Err(e) = self.stream.read_to_end(&mut out) {
            let open = [ErrorKind::WouldBlock, ErrorKind::TimedOut].contains(&e.kind());
            assert!(
                !open,
                "the server kept the connection open for {HANG:?}; it sent {:?}",
                String::from_utf8_lossy(&out)
            );
        }
        out
    }
}

/// The length of the one RESP2/RESP3 value starting at `pos`, or `None` while incomplete.
/// Panics on bytes that are not RESP (the server under test is broken then).
pub fn frame_len(buf: &[u8], pos: usize) -> Option<usize> {
    let line_end = buf[pos..].windows(2).position(|w| w == b"\r\n")? + pos;
    let head = &buf[pos + 1..line_end];
    let num = || -> i64 {
        std::str::from_utf8(head)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad RESP header {:?}", String::from_utf8_lossy(head)))
    };
    let after = line_end + 2;
    match buf.get(pos)? {
        b'+' | b'-' | b':' | b'_' | b'#' | b',' | b'(' => Some(after - pos),
        b'$' | b'=' | b'!' => {
            let n = num();
            if n < 0 {
                return Some(after - pos);
            }
            let end = after + n as usize + 2;
            (buf.len() >= end).then_some(end - pos)
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let n = num();
            let count = if matches!(buf[pos], b'%' | b'|') {
                2 * n
            } else {
                n
            };
            let mut p = after;
            for _ in 0..count.max(0) {
                p += frame_len(buf, p)?;
            }
            Some(p - pos)
        }
        other => panic!(
            "not a RESP type byte: {other:?} in {:?}",
            String::from_utf8_lossy(buf)
        ),
    }
}

/// The text of a bulk-string reply (`$n\r\n...\r\n`) or verbatim string.
pub fn bulk_text(reply: &[u8]) -> String {
    let s = String::from_utf8_lossy(reply).into_owned();
    let body = s
        .split_once("\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    body.strip_suffix("\r\n").unwrap_or(&body).to_string()
}

/// Fails (never skips) when an external tool is missing, with the install hint.
pub fn require_tool(cmd: &str, check_args: &[&str], hint: &str) {
    let ok = Command::new(cmd)
        .args(check_args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "`{cmd}` is required by this test but is not installed; install it with: {hint}"
    );
}

/// redis-cli and redis-benchmark come from Debian's redis-tools.
pub fn require_redis_tools() {
    let hint = "apt-get update && apt-get install -y redis-tools (or redis-server)";
    require_tool("redis-cli", &["--version"], hint);
    require_tool("redis-benchmark", &["--version"], hint);
}

/// redis-py from PyPI.
pub fn require_redis_py() {
    require_tool(
        "python3",
        &["-c", "import redis.cluster"],
        "pip install redis",
    );
}

/// `cluster-node-timeout` (ms) of every cluster the tests start: longer than any stall of a
/// loaded machine, so no live node is ever marked PFAIL/FAIL and no failover comes unasked.
/// A test that kills a node and needs the failure detected (a failover, FAIL flags, a lost
/// quorum) calls [`detect_failures_fast`] on every live node just before the kill.
pub const NODE_TIMEOUT_MS: u64 = 60_000;

/// Sets `cluster-manual-failover-timeout` (Valkey 8.1; 5 s by default, Redis 7.0's fixed
/// `CLUSTER_MF_TIMEOUT`) to [`HANG`] on every node of `ports`: a manual failover on a loaded
/// machine then completes however slowly, and the tests wait for its outcome rather than
/// race its deadline. The write pause of an atomic migration's handoff (twice this timeout)
/// completes however slowly too.
pub fn manual_failover_timeout_hang(ports: &[u16]) {
    let ms = HANG.as_millis().to_string();
    for &p in ports {
        assert_eq!(
            Client::connect(p).cmd_s(&["CONFIG", "SET", "cluster-manual-failover-timeout", &ms]),
            "+OK\r\n",
            "CONFIG SET cluster-manual-failover-timeout on {p}"
        );
    }
}

/// `cluster-node-timeout` (ms) [`detect_failures_fast`] sets: a killed node is marked PFAIL
/// after this (each voter's own timeout), then FAIL, and its replica elected.
pub const DETECT_TIMEOUT_MS: u64 = 5_000;

/// `CONFIG SET cluster-node-timeout` [`DETECT_TIMEOUT_MS`] on every node of `ports` (ours or a
/// real server on 127.0.0.1): called just before a test kills a node whose failure must be
/// detected (PFAIL needs each voter's own timeout, so every live node gets it).
pub fn detect_failures_fast(ports: &[u16]) {
    let ms = DETECT_TIMEOUT_MS.to_string();
    for &p in ports {
        assert_eq!(
            Client::connect(p).cmd_s(&["CONFIG", "SET", "cluster-node-timeout", &ms]),
            "+OK\r\n",
            "CONFIG SET cluster-node-timeout on {p}"
        );
    }
}

/// Starts six nodes on `base_port..base_port+6` (node timeout [`NODE_TIMEOUT_MS`]) and forms a
/// cluster of 3 primaries with one replica each through `redis-cli --cluster create`; waits
/// until every node is ok, every replica is synced, and every node's `CLUSTER NODES` shows the
/// same 3 primaries with their slots and 3 replicas, each of one of them, all connected.
pub fn six_node_cluster(procs: &mut Procs, dir: &Path, base_port: u16) -> Vec<u16> {
    let ports: Vec<u16> = (0..6).map(|i| base_port + i).collect();
    let timeout = NODE_TIMEOUT_MS.to_string();
    for &p in &ports {
        procs.start(
            dir,
            p,
            &["--cluster-node-timeout", &timeout, "--loglevel", "verbose"],
        );
    }
    let mut args: Vec<String> = vec!["--cluster".into(), "create".into()];
    args.extend(ports.iter().map(|p| format!("127.0.0.1:{p}")));
    args.extend(
        ["--cluster-replicas", "1", "--cluster-yes"]
            .iter()
            .map(|s| s.to_string()),
    );
    let out = run_bounded("redis-cli", &args, HANG);
    assert!(out.0, "redis-cli --cluster create failed:\n{}", out.1);
    wait_cluster_ok(&ports);
    wait_views_agree(&ports, 3, 3);
    ports
}

/// Waits until every node of `ports` lists every one of them, connected, without a
/// handshake/fail/noaddr flag, as `primaries` primaries that own slots and `replicas` replicas
/// each of one of those primaries, and all show the same roles, primaries and slots (a role
/// set by `CLUSTER REPLICATE` reaches the other nodes by gossip).
pub fn wait_views_agree(ports: &[u16], primaries: usize, replicas: usize) {
    wait_ok("every node's CLUSTER NODES to agree on the layout", || {
        let mut first: Option<(u16, Vec<String>)> = None;
        for &p in ports {
            let text = bulk_text(&Client::connect(p).cmd(&["CLUSTER", "NODES"]));
            let mut layout = Vec::new();
            let (mut m, mut r) = (0, 0);
            for line in text.lines().filter(|l| !l.is_empty()) {
                let f: Vec<&str> = line.split(' ').collect();
                let flags = f.get(2).copied().unwrap_or_default();
                if f.len() < 8
                    || f[7] != "connected"
                    || ["handshake", "fail", "noaddr"]
                        .iter()
                        .any(|x| flags.contains(x))
                {
                    return Err(format!("{p}: {line}"));
                }
                if flags.contains("master") && f.len() > 8 {
                    m += 1;
                    layout.push(format!("{} master {}", f[0], f[8..].join(" ")));
                } else if flags.contains("slave") && f[3] != "-" {
                    r += 1;
                    layout.push(format!("{} replica of {}", f[0], f[3]));
                } else {
                    return Err(format!("{p}: {line}"));
                }
            }
            if (m, r) != (primaries, replicas) {
                return Err(format!("{p} sees {m} primaries, {r} replicas:\n{text}"));
            }
            layout.sort();
            match &first {
                None => first = Some((p, layout)),
                Some((q, l)) if *l != layout => {
                    return Err(format!("{p} sees {layout:?}, {q} sees {l:?}"))
                }
                Some(_) => {}
            }
        }
        Ok(())
    });
}

/// Waits until every node says cluster_state:ok and every replica's link is up.
pub fn wait_cluster_ok(ports: &[u16]) {
    wait_until("cluster_state:ok everywhere and replicas in sync", || {
        ports.iter().all(|&p| {
            let mut c = Client::connect(p);
            let info = bulk_text(&c.cmd(&["CLUSTER", "INFO"]));
            let repl = bulk_text(&c.cmd(&["INFO", "replication"]));
            info.contains("cluster_state:ok")
                && (repl.contains("role:master") || repl.contains("master_link_status:up"))
        })
    });
}

/// A RESP2 reply, parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum Resp {
    Int(i64),
    Bulk(String),
    Array(Vec<Resp>),
    /// A simple string or an error line, as sent.
    Line(String),
}

impl Resp {
    /// Parses one whole reply (panics on anything else).
    pub fn parse(bytes: &[u8]) -> Resp {
        let (v, used) = Resp::parse_at(bytes, 0);
        assert_eq!(used, bytes.len(), "{:?}", String::from_utf8_lossy(bytes));
        v
    }

    fn parse_at(b: &[u8], pos: usize) -> (Resp, usize) {
        let end = pos
            + b[pos..]
                .windows(2)
                .position(|w| w == b"\r\n")
                .unwrap_or_else(|| panic!("no CRLF in {:?}", String::from_utf8_lossy(b)));
        let head = String::from_utf8_lossy(&b[pos + 1..end]).into_owned();
        let num = || -> i64 {
            head.parse()
                .unwrap_or_else(|_| panic!("bad header {head:?}"))
        };
        match b[pos] {
            b':' => (Resp::Int(num()), end + 2),
            b'$' => {
                let n = num() as usize;
                let body = String::from_utf8_lossy(&b[end + 2..end + 2 + n]).into_owned();
                (Resp::Bulk(body), end + 2 + n + 2)
            }
            b'*' => {
                let mut p = end + 2;
                let mut items = Vec::new();
                for _ in 0..num() {
                    let (v, next) = Resp::parse_at(b, p);
                    items.push(v);
                    p = next;
                }
                (Resp::Array(items), p)
            }
            _ => (
                Resp::Line(String::from_utf8_lossy(&b[pos..end]).into_owned()),
                end + 2,
            ),
        }
    }

    pub fn array(&self) -> &[Resp] {
        match self {
            Resp::Array(v) => v,
            other => panic!("not an array: {other:?}"),
        }
    }

    pub fn int(&self) -> i64 {
        match self {
            Resp::Int(n) => *n,
            other => panic!("not an integer: {other:?}"),
        }
    }

    pub fn bulk(&self) -> &str {
        match self {
            Resp::Bulk(s) => s,
            other => panic!("not a bulk string: {other:?}"),
        }
    }
}

//! Harness for the mixed-cluster tests (issue 9): real `redis-server` 7.0 nodes and
//! `ferrocluster-server` nodes on one cluster bus.
//!
//! * [`Procs`] starts both kinds of process in a per-test temp directory (each a
//!   [`Logged`] child, SIGKILLed when dropped, also when the test panics); on a panic it
//!   prints the tail of every node's log so a CI failure can be read without the machine.
//! * [`Client`] is a minimal RESP2 client (requests as multibulk, replies parsed into [`Reply`]).
//! * [`Mixed`] forms a cluster from a layout of primaries and replicas of either kind: slots are
//!   split evenly over the primaries in layout order, primary `i` gets configEpoch `i + 1`
//!   (`CLUSTER SET-CONFIG-EPOCH`), and consecutive nodes MEET each other (with the bus port
//!   given), so MEETs go both from real nodes to ours and from ours to real ones.
//!   [`Mixed::wait_view`] compares every live node's `CLUSTER NODES` with the expected view
//!   (flags, primary, configEpoch, link, slots).
//! * [`Mixed::assert_bus_clean`] reads every real node's log for the warnings Redis 7.0 prints
//!   when a bus message is malformed (spec §2, §6: `clusterIsValidPacket`, `clusterReadHandler`,
//!   `clusterProcessPingExt`), every one of our logs for dropped frames, and compares
//!   `CLUSTER LINKS` create-times to find links a real node closed and reopened.
//!
//! Ports: the caller passes the first of a block from the one allocator
//! (`ports::block(layout.len())`); a node's bus port is its data port + [`BUS_OFFSET`]
//! (10000, Valkey's default), which the allocator keeps free too.
//!
//! Every wait polls for a condition and its deadline only bounds a hang ([`HANG`]); nothing
//! asserts on speed. Missing `redis-server`/`redis-cli` fail the test with an install hint.
#![allow(dead_code, unused_imports, clippy::disallowed_methods)]

pub mod keys;

pub use ferrocluster_testkit::ports;
pub use ferrocluster_testkit::proc::{log_tail, run_bounded, Logged};
pub use ferrocluster_testkit::wait::{wait_ok, HANG};

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Our server binary, built by cargo for these tests.
pub const OURS: &str = env!("CARGO_BIN_EXE_ferrocluster-server");

/// `cluster-node-timeout` every node of the mixed tests starts with (ms): longer than any
/// stall of a loaded machine, so no live node is marked PFAIL/FAIL, no failover comes unasked
/// and no link is reopened by the liveness rule. A test that kills a node whose failure must
/// be detected calls [`Mixed::detect_failures_fast`] just before the kill.
pub const NODE_TIMEOUT_MS: u64 = 60_000;

/// `cluster-node-timeout` (ms) [`Mixed::detect_failures_fast`] sets on every live node, real
/// ones too (PFAIL needs each voter's own timeout): failovers take a few seconds, and no test
/// depends on how long anything takes.
pub const DETECT_TIMEOUT_MS: u64 = 3000;

/// Bus port = data port + this (Valkey's default `cluster-port` offset); the port allocator
/// keeps every handed-out data port's bus port free too.
pub const BUS_OFFSET: u16 = ferrocluster_testkit::BUS_OFFSET;

/// Which implementation a node runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Debian's `redis-server` 7.0.
    Real,
    /// `ferrocluster-server`.
    Ours,
    /// `valkey-server` 9.1 (started with the same flags as `redis-server`).
    Valkey,
}

/// One started process.
pub struct Proc {
    /// Data port; the bus port is `port + BUS_OFFSET`.
    pub port: u16,
    /// The implementation.
    pub kind: Kind,
    /// Its working directory (nodes.conf lives here).
    pub dir: PathBuf,
    /// Its log file.
    pub log: PathBuf,
    /// The running child (`None` once killed).
    child: Option<Logged>,
    /// nodes.conf text written into `dir` before our server starts.
    nodes_conf: Option<String>,
    /// `cluster-announce-hostname` it is started with.
    hostname: Option<String>,
}

/// Every process a test started; all are killed on drop.
pub struct Procs {
    /// The test's temp directory.
    pub base: PathBuf,
    /// Started processes, in start order (a restarted port appears twice).
    pub procs: Vec<Proc>,
    /// `cluster-announce-hostname` per data port, for every start of a node on that port.
    pub hostnames: BTreeMap<u16, String>,
}

/// Fails (never skips) when an external tool is missing, with the install hint.
pub fn require_redis() {
    for tool in ["redis-server", "redis-cli"] {
        let ok = Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "`{tool}` (Redis 7.0) is required by the mixed-cluster tests but is not installed; \
             install it with: apt-get update && apt-get install -y redis-server redis-tools"
        );
    }
}

impl Procs {
    /// A fresh temp directory for test `name`; checks that the Redis tools are installed.
    pub fn new(name: &str) -> Procs {
        require_redis();
        let base =
            std::env::temp_dir().join(format!("ferrocluster-mixed-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).expect("create test dir");
        Procs {
            base,
            procs: Vec::new(),
            hostnames: BTreeMap::new(),
        }
    }

    fn node_dir(&self, port: u16, kind: Kind) -> PathBuf {
        let n = self.procs.iter().filter(|p| p.port == port).count();
        let tag = match kind {
            Kind::Real => "real",
            Kind::Ours => "ours",
            Kind::Valkey => "valkey",
        };
        let dir = self.base.join(format!("{tag}-{port}-{n}"));
        std::fs::create_dir_all(&dir).expect("create node dir");
        dir
    }

    /// Starts `redis-server` on `port` in cluster mode with a debug-level log (debug is needed
    /// for the `*** NODE ... possibly failing` PFAIL line and the per-packet lines
    /// [`Mixed::assert_bus_clean`] reads). Does not wait for the port.
    pub fn spawn_real(&mut self, port: u16) -> PathBuf {
        self.spawn_server(port, Kind::Real)
    }

    /// Starts `valkey-server` on `port` as [`Procs::spawn_real`] starts `redis-server`.
    pub fn spawn_valkey(&mut self, port: u16) -> PathBuf {
        self.spawn_server(port, Kind::Valkey)
    }

    fn spawn_server(&mut self, port: u16, kind: Kind) -> PathBuf {
        let dir = self.node_dir(port, kind);
        let log = dir.join(if kind == Kind::Valkey {
            "valkey.log"
        } else {
            "redis.log"
        });
        self.launch(Proc {
            port,
            kind,
            dir: dir.clone(),
            log,
            child: None,
            nodes_conf: None,
            hostname: None,
        });
        dir
    }

    /// Starts `ferrocluster-server` on `port` in cluster mode, with `nodes_conf` as its
    /// nodes.conf if given. Does not wait for the port.
    pub fn spawn_ours(&mut self, port: u16, nodes_conf: Option<String>) -> PathBuf {
        let dir = self.node_dir(port, Kind::Ours);
        let log = dir.join("ours.log");
        self.launch(Proc {
            port,
            kind: Kind::Ours,
            dir: dir.clone(),
            log,
            child: None,
            nodes_conf,
            hostname: None,
        });
        dir
    }

    fn launch(&mut self, mut p: Proc) {
        p.hostname = self.hostnames.get(&p.port).cloned();
        p.child = Some(start(&p));
        self.procs.push(p);
    }

    /// The live process on `port`.
    pub fn live(&self, port: u16) -> &Proc {
        self.procs
            .iter()
            .rev()
            .find(|p| p.port == port && p.child.is_some())
            .unwrap_or_else(|| panic!("no live process on port {port}"))
    }

    /// Waits until `port` and its bus port accept connections; fails at once, with its log's
    /// tail and who holds its ports, if its process exits first.
    pub fn wait_port(&mut self, port: u16) {
        let p = self
            .procs
            .iter_mut()
            .rev()
            .find(|p| p.port == port && p.child.is_some())
            .unwrap_or_else(|| panic!("no process on port {port}"));
        let end = Instant::now() + HANG;
        loop {
            if TcpStream::connect(("127.0.0.1", port)).is_ok()
                && TcpStream::connect(("127.0.0.1", port + BUS_OFFSET)).is_ok()
            {
                return;
            }
            let child = p.child.as_mut().expect("a live process");
            let why = match child.exited() {
                Some(status) => format!("exited ({status}) before it listened"),
                None if Instant::now() >= end => format!("did not listen within {HANG:?}"),
                None => {
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            panic!(
                "{:?} node: {}\n--- last lines of {} ---\n{}",
                p.kind,
                child.failure(&why, port),
                p.log.display(),
                log_tail(&p.log, 40)
            );
        }
    }

    /// SIGKILLs the live process on `port` (`kill -9`).
    pub fn kill9(&mut self, port: u16) {
        for p in self.procs.iter_mut().filter(|p| p.port == port) {
            if let Some(mut c) = p.child.take() {
                c.kill();
            }
        }
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for p in &mut self.procs {
            if let Some(mut c) = p.child.take() {
                c.kill();
            }
        }
        if std::thread::panicking() {
            eprintln!(
                "mixed-cluster test failed; node directories kept under {}",
                self.base.display()
            );
            for p in &self.procs {
                eprintln!(
                    "----- {:?} node {} log {} (tail) -----\n{}",
                    p.kind,
                    p.port,
                    p.log.display(),
                    tail_filtered(&p.log, 25)
                );
            }
        } else {
            let _ = std::fs::remove_dir_all(&self.base);
        }
    }
}

/// Starts the process described by `p` (its directory exists).
fn start(p: &Proc) -> Logged {
    let mut cmd = match p.kind {
        Kind::Real | Kind::Valkey => {
            let bin = if p.kind == Kind::Valkey {
                "valkey-server"
            } else {
                "redis-server"
            };
            let mut cmd = Command::new(bin);
            cmd.args(["--port", &p.port.to_string()])
                .args(["--bind", "127.0.0.1"])
                .args(["--cluster-enabled", "yes"])
                .args(["--cluster-port", &(p.port + BUS_OFFSET).to_string()])
                .args(["--cluster-config-file", "nodes.conf"])
                .args(["--cluster-node-timeout", &NODE_TIMEOUT_MS.to_string()])
                .arg("--dir")
                .arg(&p.dir)
                .arg("--logfile")
                .arg(&p.log)
                .args(["--loglevel", "debug", "--save", ""])
                .args(["--appendonly", "no", "--daemonize", "no"])
                // Log times in UTC: `liveness_reopen` measures silences between log lines.
                .env("TZ", "UTC");
            cmd
        }
        Kind::Ours => {
            if let Some(conf) = &p.nodes_conf {
                std::fs::write(p.dir.join("nodes.conf"), conf).expect("write nodes.conf");
            }
            let mut cmd = Command::new(OURS);
            cmd.args(["--port", &p.port.to_string()])
                .args(["--bind", "127.0.0.1"])
                .args(["--cluster-enabled", "yes"])
                .args(["--cluster-port", &(p.port + BUS_OFFSET).to_string()])
                .args(["--cluster-config-file", "nodes.conf"])
                .args(["--cluster-node-timeout", &NODE_TIMEOUT_MS.to_string()])
                .arg("--dir")
                .arg(&p.dir)
                .args(["--loglevel", "verbose"])
                .env("NO_COLOR", "1");
            cmd
        }
    };
    cmd.args(hostname_args(p));
    // A real server writes its own log (`--logfile`); what it prints before it opens that
    // goes to `stdout.log`. Ours logs to stderr, which is `p.log`.
    let out = match p.kind {
        Kind::Ours => p.log.clone(),
        Kind::Real | Kind::Valkey => p.dir.join("stdout.log"),
    };
    Logged::spawn(&mut cmd, &out, &format!("{:?} node on {}", p.kind, p.port))
}

/// `--cluster-announce-hostname H` when the node has one (both servers take the same flag).
fn hostname_args(p: &Proc) -> Vec<String> {
    match &p.hostname {
        Some(h) => vec!["--cluster-announce-hostname".into(), h.clone()],
        None => Vec::new(),
    }
}

/// The last `n` lines of a file.
pub fn tail(path: &Path, n: usize) -> String {
    log_tail(path, n)
}

/// The last `n` lines of a log without Redis's per-packet/per-client debug noise.
fn tail_filtered(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| {
            !l.contains("--- Processing packet")
                && !l.contains("packet received:")
                && !l.contains("Client closed connection")
                && !l.contains("Accepted 127.0.0.1")
                && !l.contains("keys in 0 volatile")
                && !l.contains("clients connected")
        })
        .collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// `redis-cli --cluster reshard <entry> --cluster-from <from> --cluster-to <to>
/// --cluster-slots <slots> --cluster-yes`: moves the `slots` lowest slots of `from` (by
/// `CLUSTER SETSLOT` and `MIGRATE`), asserting it ran and reported no error.
pub fn reshard(entry: u16, from: &str, to: &str, slots: usize) {
    let addr = format!("127.0.0.1:{entry}");
    let n = slots.to_string();
    let args = [
        "--cluster",
        "reshard",
        &addr,
        "--cluster-from",
        from,
        "--cluster-to",
        to,
        "--cluster-slots",
        &n,
        "--cluster-yes",
    ];
    let (ok, out) = run_bounded("redis-cli", &args, HANG);
    assert!(ok && out.contains("Moving slot"), "reshard failed:\n{out}");
    assert!(!out.contains("ERR"), "reshard reported an error:\n{out}");
}

/// [`wait_ok`] for callers that still pass a limit: the limit is raised to at least [`HANG`],
/// so it only bounds a hang. New code calls [`wait_ok`].
pub fn wait_for<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Result<T, String>) -> T {
    let limit = limit.max(HANG);
    let end = Instant::now() + limit;
    loop {
        match f() {
            Ok(v) => return v,
            Err(e) if Instant::now() > end => {
                panic!("still waiting after {limit:?} (a hang) for: {what}; last: {e}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// RESP2 client

/// One RESP2 reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// `+...`
    Status(String),
    /// `-...`
    Error(String),
    /// `:n`
    Int(i64),
    /// `$n ...` (`None` = null bulk)
    Bulk(Option<Vec<u8>>),
    /// `*n ...` (`None` = null array)
    Array(Option<Vec<Reply>>),
}

impl Reply {
    /// The text of a status or bulk reply; panics on anything else (the server under test is
    /// wrong then).
    pub fn text(&self) -> String {
        match self {
            Reply::Status(s) => s.clone(),
            Reply::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
            other => panic!("expected a string reply, got {other:?}"),
        }
    }

    /// The elements of an array reply.
    pub fn items(&self) -> &[Reply] {
        match self {
            Reply::Array(Some(v)) => v,
            other => panic!("expected an array reply, got {other:?}"),
        }
    }
}

/// A blocking RESP2 connection.
pub struct Client {
    reader: BufReader<TcpStream>,
    port: u16,
}

impl Client {
    /// Connects to `127.0.0.1:port`; a read waits at most [`HANG`] (a hang).
    pub fn connect(port: u16) -> Result<Client, String> {
        let s =
            TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect {port}: {e}"))?;
        s.set_read_timeout(Some(HANG)).map_err(|e| e.to_string())?;
        Ok(Client {
            reader: BufReader::new(s),
            port,
        })
    }

    /// Sends one command and reads its reply.
    pub fn try_cmd(&mut self, args: &[&str]) -> Result<Reply, String> {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.try_cmd_bytes(&args)
    }

    /// [`Client::try_cmd`] with binary arguments (DUMP payloads).
    pub fn try_cmd_bytes(&mut self, args: &[&[u8]]) -> Result<Reply, String> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        self.reader
            .get_mut()
            .write_all(&out)
            .map_err(|e| format!("write to {}: {e}", self.port))?;
        self.read_reply()
    }

    /// [`Client::try_cmd_bytes`] that panics on an I/O error.
    pub fn cmd_bytes(&mut self, args: &[&[u8]]) -> Reply {
        let port = self.port;
        self.try_cmd_bytes(args)
            .unwrap_or_else(|e| panic!("command on port {port}: {e}"))
    }

    /// [`Client::try_cmd`] that panics on an I/O error.
    pub fn cmd(&mut self, args: &[&str]) -> Reply {
        let port = self.port;
        self.try_cmd(args)
            .unwrap_or_else(|e| panic!("{args:?} on port {port}: {e}"))
    }

    /// Reads one reply.
    pub fn read_reply(&mut self) -> Result<Reply, String> {
        let mut line = Vec::new();
        self.reader
            .read_until(b'\n', &mut line)
            .map_err(|e| format!("read from {}: {e}", self.port))?;
        if line.len() < 3 || !line.ends_with(b"\r\n") {
            return Err(format!(
                "connection to {} closed or bad line {line:?}",
                self.port
            ));
        }
        let body = String::from_utf8_lossy(&line[1..line.len() - 2]).into_owned();
        let num = || -> Result<i64, String> {
            body.parse::<i64>()
                .map_err(|_| format!("bad RESP number {body:?}"))
        };
        match line[0] {
            b'+' => Ok(Reply::Status(body)),
            b'-' => Ok(Reply::Error(body)),
            b':' => Ok(Reply::Int(num()?)),
            b'$' => {
                let n = num()?;
                if n < 0 {
                    return Ok(Reply::Bulk(None));
                }
                let mut buf = vec![0; n as usize + 2];
                self.reader
                    .read_exact(&mut buf)
                    .map_err(|e| format!("read bulk from {}: {e}", self.port))?;
                buf.truncate(n as usize);
                Ok(Reply::Bulk(Some(buf)))
            }
            b'*' => {
                let n = num()?;
                if n < 0 {
                    return Ok(Reply::Array(None));
                }
                let mut v = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    v.push(self.read_reply()?);
                }
                Ok(Reply::Array(Some(v)))
            }
            other => Err(format!(
                "not a RESP2 type byte {other:?} from {}",
                self.port
            )),
        }
    }
}

/// One command on a fresh connection.
pub fn cmd(port: u16, args: &[&str]) -> Reply {
    Client::connect(port)
        .unwrap_or_else(|e| panic!("{e}"))
        .cmd(args)
}

/// One command on a fresh connection, errors as `Err` (for polling).
pub fn try_cmd(port: u16, args: &[&str]) -> Result<Reply, String> {
    Client::connect(port)?.try_cmd(args)
}

/// `CLUSTER INFO` field `name` of the node on `port`.
pub fn cluster_info_field(port: u16, name: &str) -> Result<String, String> {
    let info = try_cmd(port, &["CLUSTER", "INFO"])?.text();
    info.lines()
        .find_map(|l| {
            l.strip_prefix(&format!("{name}:"))
                .map(|v| v.trim().to_string())
        })
        .ok_or_else(|| format!("no {name} in CLUSTER INFO of {port}:\n{info}"))
}

// ---------------------------------------------------------------------------------------------
// CLUSTER NODES

/// One parsed `CLUSTER NODES` line (spec §19).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeLine {
    /// 40-character node ID.
    pub id: String,
    /// Data port.
    pub port: u16,
    /// Bus port.
    pub bus_port: u16,
    /// Flags, e.g. `["myself", "master"]`.
    pub flags: Vec<String>,
    /// The primary's ID for a replica.
    pub primary: Option<String>,
    /// configEpoch column.
    pub epoch: u64,
    /// `connected` / `disconnected`.
    pub link: String,
    /// Owned slot ranges (migration entries in brackets are left out).
    pub slots: Vec<(u16, u16)>,
}

impl NodeLine {
    /// Whether flag `f` is set.
    pub fn has(&self, f: &str) -> bool {
        self.flags.iter().any(|x| x == f)
    }
}

/// Parses `CLUSTER NODES` output.
pub fn parse_nodes(text: &str) -> Result<Vec<NodeLine>, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            if f.len() < 8 {
                return Err(format!("short CLUSTER NODES line {l:?}"));
            }
            let addr = f[1].split(',').next().unwrap_or_default();
            let (hostport, bus) = addr
                .split_once('@')
                .ok_or_else(|| format!("no @ in {l:?}"))?;
            let port = hostport
                .rsplit_once(':')
                .and_then(|(_, p)| p.parse().ok())
                .ok_or_else(|| format!("bad address in {l:?}"))?;
            let mut slots = Vec::new();
            for s in &f[8..] {
                if s.starts_with('[') {
                    continue;
                }
                let (a, b) = s.split_once('-').unwrap_or((s, s));
                let a = a.parse().map_err(|_| format!("bad slot {s:?}"))?;
                let b = b.parse().map_err(|_| format!("bad slot {s:?}"))?;
                slots.push((a, b));
            }
            Ok(NodeLine {
                id: f[0].to_string(),
                port,
                bus_port: bus.parse().map_err(|_| format!("bad bus port in {l:?}"))?,
                flags: f[2].split(',').map(str::to_string).collect(),
                primary: (f[3] != "-").then(|| f[3].to_string()),
                epoch: f[6].parse().map_err(|_| format!("bad epoch in {l:?}"))?,
                link: f[7].to_string(),
                slots,
            })
        })
        .collect()
}

/// The hostname each node shows in `CLUSTER NODES` of the node on `port` (the text after the
/// first `,` of the address field, §19.1; `None` when absent or empty), keyed by node ID.
pub fn hostnames_of(port: u16) -> Result<BTreeMap<String, Option<String>>, String> {
    let text = try_cmd(port, &["CLUSTER", "NODES"])?.text();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let addr = f.get(1).ok_or_else(|| format!("short line {l:?}"))?;
            let host = addr
                .split(',')
                .nth(1)
                .filter(|h| !h.is_empty())
                .map(str::to_string);
            Ok((f[0].to_string(), host))
        })
        .collect()
}

/// `CLUSTER NODES` of the node on `port`, parsed, keyed by node ID.
pub fn nodes_of(port: u16) -> Result<BTreeMap<String, NodeLine>, String> {
    let text = try_cmd(port, &["CLUSTER", "NODES"])?.text();
    Ok(parse_nodes(&text)?
        .into_iter()
        .map(|n| (n.id.clone(), n))
        .collect())
}

// ---------------------------------------------------------------------------------------------
// Mixed cluster

/// A node's role in a layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A primary owning the next share of slots.
    Primary,
    /// A replica of the layout entry at this index (a primary of the same kind).
    ReplicaOf(usize),
}

/// One member of a mixed cluster.
#[derive(Clone, Debug)]
pub struct Member {
    /// Data port.
    pub port: u16,
    /// Implementation.
    pub kind: Kind,
    /// Node ID.
    pub id: String,
    /// Role in the expected view.
    pub role: Role,
    /// Slot range for a primary (inclusive).
    pub slots: Option<(u16, u16)>,
    /// Expected configEpoch (a replica shows its primary's).
    pub epoch: u64,
    /// False once the test killed it.
    pub alive: bool,
}

/// A formed mixed cluster.
pub struct Mixed {
    /// Every process.
    pub procs: Procs,
    /// Layout entries with their IDs.
    pub members: Vec<Member>,
    /// `CLUSTER LINKS` snapshot of each real node taken at convergence:
    /// (real port, direction, peer id) -> create-time.
    links: BTreeMap<(u16, String, String), i64>,
    /// Log sizes at convergence, to look only at what came after.
    log_marks: BTreeMap<PathBuf, usize>,
    /// `cluster-node-timeout` (ms) the live nodes have now: [`NODE_TIMEOUT_MS`] until
    /// [`Mixed::detect_failures_fast`].
    node_timeout_ms: u64,
    /// The shortest `cluster-node-timeout` (ms) any node had since the mark: the liveness
    /// rule [`Mixed::assert_bus_clean`] allows reopens by fires after half of it.
    shortest_timeout_since_mark: u64,
}

impl Mixed {
    /// Starts `layout[i]` on `base_port + i`, assigns slots and epochs to the primaries, MEETs
    /// consecutive nodes (node `i - 1` sends MEET to node `i`), attaches replicas and waits for
    /// the full expected view on every node.
    pub fn form(name: &str, base_port: u16, layout: &[(Kind, Role)]) -> Mixed {
        Mixed::form_with_hostnames(name, base_port, layout, &[])
    }

    /// [`Mixed::form`] with `cluster-announce-hostname` set on some members: `(layout index,
    /// hostname)`.
    pub fn form_with_hostnames(
        name: &str,
        base_port: u16,
        layout: &[(Kind, Role)],
        hostnames: &[(usize, &str)],
    ) -> Mixed {
        let mut procs = Procs::new(name);
        let ports: Vec<u16> = (0..layout.len() as u16).map(|i| base_port + i).collect();
        for &(i, h) in hostnames {
            procs.hostnames.insert(ports[i], h.to_string());
        }
        for (&(kind, _), &port) in layout.iter().zip(&ports) {
            match kind {
                Kind::Real => procs.spawn_real(port),
                Kind::Valkey => procs.spawn_valkey(port),
                Kind::Ours => procs.spawn_ours(port, None),
            };
        }
        for &p in &ports {
            procs.wait_port(p);
        }
        let primaries = layout.iter().filter(|(_, r)| *r == Role::Primary).count() as u32;
        let mut members = Vec::new();
        let mut pi = 0u32;
        for (&(kind, role), &port) in layout.iter().zip(&ports) {
            let id = cmd(port, &["CLUSTER", "MYID"]).text();
            let (slots, epoch) = if role == Role::Primary {
                let start = (pi * 16384 / primaries) as u16;
                let end = ((pi + 1) * 16384 / primaries - 1) as u16;
                pi += 1;
                (Some((start, end)), u64::from(pi))
            } else {
                (None, 0)
            };
            members.push(Member {
                port,
                kind,
                id,
                role,
                slots,
                epoch,
                alive: true,
            });
        }
        for i in 0..members.len() {
            if let Role::ReplicaOf(p) = members[i].role {
                assert_eq!(
                    members[p].role,
                    Role::Primary,
                    "replica of a replica in layout"
                );
                members[i].epoch = members[p].epoch;
            }
        }
        // Every node gets a distinct configEpoch before the MEETs (replicas-to-be after the
        // primaries' 1..=P), so no configEpoch collision (§11.5) bumps anyone while they meet:
        // two empty primaries at epoch 0 would collide, and the bumped one could then collide
        // with a real primary and move it to a new epoch.
        let mut spare_epoch = u64::from(primaries);
        for m in &members {
            if let Some((a, b)) = m.slots {
                let r = cmd(
                    m.port,
                    &["CLUSTER", "ADDSLOTSRANGE", &a.to_string(), &b.to_string()],
                );
                assert_eq!(r, Reply::Status("OK".into()), "ADDSLOTSRANGE on {}", m.port);
            }
            let epoch = if m.role == Role::Primary {
                m.epoch
            } else {
                spare_epoch += 1;
                spare_epoch
            };
            let r = cmd(m.port, &["CLUSTER", "SET-CONFIG-EPOCH", &epoch.to_string()]);
            assert_eq!(
                r,
                Reply::Status("OK".into()),
                "SET-CONFIG-EPOCH on {}",
                m.port
            );
        }
        for w in members.windows(2) {
            let r = cmd(
                w[0].port,
                &[
                    "CLUSTER",
                    "MEET",
                    "127.0.0.1",
                    &w[1].port.to_string(),
                    &(w[1].port + BUS_OFFSET).to_string(),
                ],
            );
            assert_eq!(
                r,
                Reply::Status("OK".into()),
                "MEET from {:?} {} to {:?} {}",
                w[0].kind,
                w[0].port,
                w[1].kind,
                w[1].port
            );
        }
        let mut mixed = Mixed {
            procs,
            members,
            links: BTreeMap::new(),
            log_marks: BTreeMap::new(),
            node_timeout_ms: NODE_TIMEOUT_MS,
            shortest_timeout_since_mark: NODE_TIMEOUT_MS,
        };
        for m in mixed.members.clone() {
            if let Role::ReplicaOf(p) = m.role {
                let primary = mixed.members[p].id.clone();
                wait_ok("the replica to learn its primary", || {
                    match nodes_of(m.port)?.get(&primary) {
                        Some(n) if !n.has("handshake") && n.link == "connected" => Ok(()),
                        other => Err(format!("{} sees its primary as {other:?}", m.port)),
                    }
                });
                let r = cmd(m.port, &["CLUSTER", "REPLICATE", &primary]);
                assert_eq!(r, Reply::Status("OK".into()), "REPLICATE on {}", m.port);
            }
        }
        mixed.wait_view("the mixed cluster to converge");
        mixed.wait_state_ok();
        // Redis 7.0 replicas that never finished a sync refuse to fail over (data age check in
        // clusterHandleSlaveFailover), so wait for every replication link to be up.
        for m in mixed.members.iter().filter(|m| m.role != Role::Primary) {
            wait_ok("replicas to finish their sync", || {
                let info = try_cmd(m.port, &["INFO", "replication"])?.text();
                if info.contains("master_link_status:up") {
                    Ok(())
                } else {
                    Err(format!("{}: {info}", m.port))
                }
            });
        }
        mixed.mark();
        mixed
    }

    /// The member at layout index `i`.
    pub fn m(&self, i: usize) -> &Member {
        &self.members[i]
    }

    /// Ports of live members.
    pub fn live_ports(&self) -> Vec<u16> {
        self.members
            .iter()
            .filter(|m| m.alive)
            .map(|m| m.port)
            .collect()
    }

    /// Checks one node's `CLUSTER NODES` against the expected view; `Err` says what differs.
    pub fn check_view_of(&self, port: u16) -> Result<(), String> {
        let view = nodes_of(port)?;
        if view.len() != self.members.len() {
            return Err(format!(
                "{port} knows {} nodes, expected {}: {:?}",
                view.len(),
                self.members.len(),
                view.values()
                    .map(|n| (n.port, &n.flags))
                    .collect::<Vec<_>>()
            ));
        }
        for m in &self.members {
            let n = view
                .get(&m.id)
                .ok_or_else(|| format!("{port} does not know {} ({})", m.id, m.port))?;
            let is_self = m.port == port;
            let role_flag = match m.role {
                Role::Primary => "master",
                Role::ReplicaOf(_) => "slave",
            };
            let mut want_flags = Vec::new();
            if is_self {
                want_flags.push("myself");
            }
            want_flags.push(role_flag);
            let want_primary = match m.role {
                Role::Primary => None,
                Role::ReplicaOf(p) => Some(self.members[p].id.clone()),
            };
            let want_link = if m.alive || is_self {
                "connected"
            } else {
                "disconnected"
            };
            let want_slots: Vec<(u16, u16)> = m.slots.into_iter().collect();
            // A killed node: FAIL, disconnected, and its slots (none once failed over); its
            // role and epoch columns are whatever the node last announced.
            let ok = if m.alive || is_self {
                n.port == m.port
                    && n.bus_port == m.port + BUS_OFFSET
                    && n.flags == want_flags
                    && n.primary == want_primary
                    && n.epoch == m.epoch
                    && n.link == want_link
                    && n.slots == want_slots
            } else {
                n.port == m.port && n.has("fail") && n.link == want_link && n.slots == want_slots
            };
            if !ok {
                return Err(format!(
                    "{port} sees {}: {n:?}; expected port {} flags {want_flags:?} primary \
                     {want_primary:?} epoch {} link {want_link} slots {want_slots:?}",
                    m.port, m.port, m.epoch
                ));
            }
        }
        Ok(())
    }

    /// Waits until every live node's view matches the expected one.
    pub fn wait_view(&self, what: &str) {
        wait_ok(what, || {
            for p in self.live_ports() {
                self.check_view_of(p)?;
            }
            Ok(())
        });
    }

    /// Waits until every live node reports `cluster_state:ok`.
    pub fn wait_state_ok(&self) {
        wait_ok("cluster_state:ok on every node", || {
            for p in self.live_ports() {
                let s = cluster_info_field(p, "cluster_state")?;
                if s != "ok" {
                    return Err(format!("{p}: cluster_state:{s}"));
                }
            }
            Ok(())
        });
    }

    /// Records log sizes and the real nodes' `CLUSTER LINKS` create-times; later checks look
    /// only at what came after. Waits until the links have settled: every live real node
    /// holds an outbound and an inbound link with every live peer, and each is the peer's
    /// current end of the connection (the inbound link a real node holds is not older than
    /// the peer's outbound link to it, and the other way round), so no replacement that
    /// started before the mark is still on its way.
    pub fn mark(&mut self) {
        self.shortest_timeout_since_mark = self.node_timeout_ms;
        self.log_marks.clear();
        for p in self.procs.procs.iter().filter(|p| p.child.is_some()) {
            let len = std::fs::metadata(&p.log)
                .map(|m| m.len() as usize)
                .unwrap_or(0);
            self.log_marks.insert(p.log.clone(), len);
        }
        self.links = wait_ok("every real node's links with every peer to settle", || {
            let mut links = BTreeMap::new();
            for r in self
                .members
                .iter()
                .filter(|m| m.alive && m.kind != Kind::Ours)
            {
                let mine = links_of(r.port)?;
                for peer in self.members.iter().filter(|m| m.alive && m.port != r.port) {
                    let theirs = links_of(peer.port)?;
                    for (dir, other) in [("to", "from"), ("from", "to")] {
                        let Some(&t) = mine.get(&(dir.to_string(), peer.id.clone())) else {
                            return Err(format!(
                                "real node {} has no '{dir}' link with {:?} node {}",
                                r.port, peer.kind, peer.port
                            ));
                        };
                        let Some(&u) = theirs.get(&(other.to_string(), r.id.clone())) else {
                            return Err(format!(
                                "{:?} node {} has no '{other}' link with real node {}",
                                peer.kind, peer.port, r.port
                            ));
                        };
                        // A connection's outbound end is created before its inbound end.
                        let (outbound, inbound) = if dir == "to" { (t, u) } else { (u, t) };
                        if inbound < outbound {
                            return Err(format!(
                                "real node {} and {:?} node {}: the '{dir}' link is being \
                                 replaced (inbound end created {inbound}, outbound end {outbound})",
                                r.port, peer.kind, peer.port
                            ));
                        }
                        links.insert((r.port, dir.to_string(), peer.id.clone()), t);
                    }
                }
            }
            Ok(links)
        });
    }

    fn real_links(&self) -> BTreeMap<(u16, String, String), i64> {
        let mut out = BTreeMap::new();
        for m in self
            .members
            .iter()
            .filter(|m| m.alive && m.kind != Kind::Ours)
        {
            let links = links_of(m.port).unwrap_or_else(|e| panic!("{e}"));
            for ((dir, node), t) in links {
                out.insert((m.port, dir, node), t);
            }
        }
        out
    }

    /// Checks that nothing our nodes sent upset a real node, and nothing a real node sent
    /// upset ours, since [`Mixed::mark`] (plus the whole of every log for complaints):
    /// * no real node logged a bus complaint ([`REAL_COMPLAINTS`]);
    /// * none of our nodes logged a dropped frame or lost framing;
    /// * every link a real node had at the mark to a node that is still alive is the same link
    ///   (same `create-time`): no real node closed and reopened a link to any peer — unless the
    ///   reopen is the liveness rule both implementations share (Redis 7.0 `clusterCron`,
    ///   Valkey `clusterNodeCronHandleReconnect`): a node that waited `node-timeout / 2` for
    ///   its PING's answer with nothing received from the peer frees the link and connects
    ///   again. That rule fires only after such a silence, which a process stalled by the
    ///   machine (a slow fsync of nodes.conf, no CPU) causes without any bus defect; the real
    ///   node's debug log shows whether one came before the reopen ([`liveness_reopen`]). A
    ///   reopen without that silence fails as any other.
    ///
    /// Logs and link create-times are cumulative, so what this finds does not depend on the
    /// moment it looks.
    pub fn assert_bus_clean(&self) {
        for p in &self.procs.procs {
            let text = std::fs::read_to_string(&p.log).unwrap_or_default();
            let bad: &[&str] = match p.kind {
                Kind::Real | Kind::Valkey => REAL_COMPLAINTS,
                Kind::Ours => OUR_COMPLAINTS,
            };
            let found: Vec<&str> = text
                .lines()
                .filter(|l| bad.iter().any(|b| l.contains(b)))
                .take(10)
                .collect();
            assert!(
                found.is_empty(),
                "{:?} node {} logged bus complaints:\n{}",
                p.kind,
                p.port,
                found.join("\n")
            );
        }
        let now = self.real_links();
        let alive: Vec<&str> = self
            .members
            .iter()
            .filter(|m| m.alive)
            .map(|m| m.id.as_str())
            .collect();
        for ((port, dir, peer), t) in &self.links {
            if !alive.contains(&peer.as_str())
                || !self.members.iter().any(|m| m.port == *port && m.alive)
            {
                continue;
            }
            let later = now.get(&(*port, dir.clone(), peer.clone()));
            if later == Some(t) {
                continue;
            }
            let p = self.procs.live(*port);
            let text = std::fs::read(&p.log).unwrap_or_default();
            let from = self.log_marks.get(&p.log).copied().unwrap_or(0);
            // Half the shortest node timeout any node had since the mark: a node fires the
            // rule after half of its own (the one it had at that moment).
            let silence_ms = self.shortest_timeout_since_mark / 2;
            match liveness_reopen(&text, from, dir, peer, silence_ms) {
                Some(why) => eprintln!(
                    "real node {port}'s {dir} link with {peer} was reopened by the liveness \
                     rule: {why}"
                ),
                None => panic!(
                    "real node {port}'s {dir} link with {peer} was closed and reopened (or \
                     lost): create-time {t} at the mark, {later:?} now, and no silence of \
                     {silence_ms} ms before it in {}",
                    p.log.display()
                ),
            }
        }
    }

    /// Lines of the log of the live (or last) process on `port` after the mark.
    pub fn log_since_mark(&self, port: u16) -> Vec<String> {
        let p = self
            .procs
            .procs
            .iter()
            .rev()
            .find(|p| p.port == port)
            .unwrap_or_else(|| panic!("no process on {port}"));
        let text = std::fs::read(&p.log).unwrap_or_default();
        let from = self
            .log_marks
            .get(&p.log)
            .copied()
            .unwrap_or(0)
            .min(text.len());
        String::from_utf8_lossy(&text[from..])
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// `CONFIG SET cluster-node-timeout` [`DETECT_TIMEOUT_MS`] on every live node (ours and
    /// real ones): called just before a kill whose failure the test needs detected (PFAIL
    /// needs each voter's own timeout). Nodes started later start with [`NODE_TIMEOUT_MS`].
    pub fn detect_failures_fast(&mut self) {
        let ms = DETECT_TIMEOUT_MS.to_string();
        for p in self.live_ports() {
            let r = cmd(p, &["CONFIG", "SET", "cluster-node-timeout", &ms]);
            assert_eq!(
                r,
                Reply::Status("OK".into()),
                "CONFIG SET cluster-node-timeout on {p}"
            );
        }
        self.node_timeout_ms = DETECT_TIMEOUT_MS;
        self.shortest_timeout_since_mark = self.shortest_timeout_since_mark.min(DETECT_TIMEOUT_MS);
    }

    /// `CONFIG SET cluster-manual-failover-timeout` [`HANG`] on every live node (ours and
    /// Valkey 9.1 ones; 5 s by default): a manual failover, and the write pause of a slot
    /// migration's handoff (twice it), then complete however slowly a loaded machine runs
    /// them, instead of being aborted at their deadline.
    pub fn manual_failover_timeout_hang(&self) {
        let ms = HANG.as_millis().to_string();
        for p in self.live_ports() {
            let r = cmd(
                p,
                &["CONFIG", "SET", "cluster-manual-failover-timeout", &ms],
            );
            assert_eq!(
                r,
                Reply::Status("OK".into()),
                "CONFIG SET cluster-manual-failover-timeout on {p}"
            );
        }
    }

    /// `kill -9` of member `i`.
    pub fn kill9(&mut self, i: usize) {
        let port = self.members[i].port;
        self.procs.kill9(port);
        self.members[i].alive = false;
    }

    /// A key whose slot lies in member `i`'s range (asks a live node `CLUSTER KEYSLOT`).
    pub fn key_for(&self, i: usize, prefix: &str) -> String {
        let (a, b) = self.members[i].slots.expect("a primary");
        let ask = self.live_ports()[0];
        let mut c = Client::connect(ask).unwrap_or_else(|e| panic!("{e}"));
        for n in 0..100_000u32 {
            let key = format!("{prefix}:{n}");
            let Reply::Int(slot) = c.cmd(&["CLUSTER", "KEYSLOT", &key]) else {
                panic!("CLUSTER KEYSLOT did not return an integer");
            };
            if (i64::from(a)..=i64::from(b)).contains(&slot) {
                return key;
            }
        }
        panic!("no key found for slots {a}-{b}");
    }

    /// Runs `redis-cli --cluster check` against `port` and asserts it passes with every live
    /// primary listed.
    pub fn assert_cluster_check(&self, port: u16) {
        let addr = format!("127.0.0.1:{port}");
        let (ok, out) = run_bounded(
            "redis-cli",
            &["--no-raw", "--cluster", "check", &addr],
            HANG,
        );
        assert!(ok, "redis-cli --cluster check {addr} failed:\n{out}");
        assert!(
            out.contains("[OK] All nodes agree about slots configuration.")
                && out.contains("[OK] All 16384 slots covered.")
                && !out.contains("[ERR]")
                && !out.contains("[WARNING]"),
            "redis-cli --cluster check {addr} reported problems:\n{out}"
        );
        for m in self.members.iter().filter(|m| m.alive && m.slots.is_some()) {
            let (a, b) = m.slots.expect("checked");
            let want = format!("slots:[{a}-{b}]");
            assert!(
                out.contains(&format!("M: {} 127.0.0.1:{}", m.id, m.port)) && out.contains(&want),
                "redis-cli --cluster check {addr} does not list primary {} with {want}:\n{out}",
                m.port
            );
        }
    }
}

/// `CLUSTER LINKS` of the node on `port` (Redis 7.0, Valkey or ours): (direction, peer id) ->
/// create-time.
pub fn links_of(port: u16) -> Result<BTreeMap<(String, String), i64>, String> {
    let r = try_cmd(port, &["CLUSTER", "LINKS"])?;
    let Reply::Array(Some(list)) = r else {
        return Err(format!("CLUSTER LINKS on {port}: {r:?}"));
    };
    let mut out = BTreeMap::new();
    for link in &list {
        let kv = link.items();
        let field = |name: &str| {
            kv.chunks(2)
                .find(|c| c[0].text() == name)
                .map(|c| c[1].clone())
                .ok_or_else(|| format!("CLUSTER LINKS entry on {port} without {name}: {kv:?}"))
        };
        let Reply::Int(t) = field("create-time")? else {
            return Err(format!("create-time not an integer in {kv:?}"));
        };
        out.insert((field("direction")?.text(), field("node")?.text()), t);
    }
    Ok(out)
}

/// The time of a Redis / Valkey log line (`pid:role DD Mon YYYY HH:MM:SS.mmm ...`) in ms on
/// the log's own clock, or `None` for a line without one.
pub fn log_time(line: &str) -> Option<i64> {
    let f: Vec<&str> = line.split_whitespace().take(5).collect();
    let [_, day, month, year, clock] = f[..] else {
        return None;
    };
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let m = MONTHS.iter().position(|x| *x == month)? as i64 + 1;
    let (d, y): (i64, i64) = (day.parse().ok()?, year.parse().ok()?);
    let (hms, ms) = clock.split_once('.')?;
    let mut t = hms.split(':').map(|x| x.parse::<i64>().ok());
    let (h, mi, s) = (t.next()??, t.next()??, t.next()??);
    let ms: i64 = ms.parse().ok()?;
    // Days from 1970-01-01 of the civil date (Howard Hinnant's days_from_civil).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((((days * 24 + h) * 60 + mi) * 60 + s) * 1000 + ms)
}

/// Whether a real node's debug log (`text`, the mark at byte `mark`) shows that its `dir`
/// link with `peer` was reopened after `silence_ms` of silence, the liveness rule's
/// precondition (Redis 7.0 `clusterCron`: a node that waited `node-timeout / 2` for a PONG
/// with no data from the peer frees the link and connects again), and how:
/// * its outbound link (`to`): before each `Connecting with Node <peer>` line after the mark,
///   nothing came from the peer (`... packet received: <peer>`) for `silence_ms` or more at
///   some point since the previous `Connecting` line (the rule frees the link on the silence;
///   the peer may speak again on its own link before the cron connects anew), or nothing
///   came from the peer for that long up to the log's end;
/// * its inbound link (`from`), which the peer reopens by the same rule when nothing came
///   from the real node: the real node logged nothing at all for `silence_ms` or more after
///   the mark (it was stalled; at debug level it logs every packet it processes).
pub fn liveness_reopen(
    text: &[u8],
    mark: usize,
    dir: &str,
    peer: &str,
    silence_ms: u64,
) -> Option<String> {
    let silence = silence_ms as i64;
    let received = format!("packet received: {peer}");
    let connecting = format!("Connecting with Node {peer}");
    let mut offset = 0usize;
    let mut last_line: Option<i64> = None;
    let mut last_from_peer: Option<i64> = None;
    // The longest silence of the peer since the previous `Connecting` line (ms).
    let mut longest_quiet: Option<i64> = None;
    // Every reconnect of the outbound link after the mark, each with the longest silence of
    // the peer since the reconnect before it.
    let mut reconnects: Vec<(String, Option<i64>)> = Vec::new();
    let mut stall: Option<String> = None;
    for raw in text.split(|&b| b == b'\n') {
        let after_mark = offset >= mark;
        offset += raw.len() + 1;
        let line = String::from_utf8_lossy(raw);
        let Some(t) = log_time(&line) else {
            continue;
        };
        if after_mark && stall.is_none() {
            if let Some(prev) = last_line.filter(|&p| t - p >= silence) {
                stall = Some(format!(
                    "the real node logged nothing for {} ms (stalled) before: {line}",
                    t - prev
                ));
            }
        }
        let quiet_now = last_from_peer.map(|p| t - p);
        if line.contains(&connecting) {
            let quiet = longest_quiet.max(quiet_now);
            if after_mark {
                reconnects.push((line.to_string(), quiet));
            }
            longest_quiet = None;
        }
        if line.contains(&received) {
            longest_quiet = longest_quiet.max(quiet_now);
            last_from_peer = Some(t);
        }
        last_line = Some(t);
    }
    if dir == "from" {
        return stall;
    }
    if !reconnects.is_empty() {
        // Every reconnect must follow a silence of the peer, not only one of them.
        let mut why = Vec::new();
        for (line, quiet) in reconnects {
            match quiet {
                Some(q) if q >= silence => why.push(format!(
                    "nothing received from the peer for {q} ms since the link before: {line}"
                )),
                _ => return None,
            }
        }
        return Some(why.join("; "));
    }
    // The outbound link freed and not connected again yet: the peer is silent still.
    match (last_from_peer, last_line) {
        (Some(p), Some(end)) if end - p >= silence => Some(format!(
            "nothing received from the peer for the last {} ms of the log",
            end - p
        )),
        _ => None,
    }
}

/// Warnings Redis 7.0 logs about malformed or unexpected bus traffic (strings from the
/// 7.0.15 binary: `clusterIsValidPacket`, `clusterReadHandler`, `clusterProcessPingExt`,
/// `clusterProcessPacket`), and the link-freeing messages.
pub const REAL_COMPLAINTS: &[&str] = &[
    "Bad message length or signature received from Cluster bus",
    "Received invalid",
    "without proper padding",
    "missing null terminator",
    "Received unknown packet type",
    "Received unknown extension type",
    "PONG contains mismatching sender ID",
    "Ignoring FAIL message from unknown node",
    "Discarding UPDATE message about myself",
    "Error converting peer IP to string",
    "Freeing cluster link",
    "Unable to connect to Cluster Node",
];

/// What our server logs when a bus frame from a peer does not decode (`cluster.rs` events).
pub const OUR_COMPLAINTS: &[&str] = &["bad bus frame dropped", "bus framing lost"];

/// Every slot migration job on `port` as (operation, state), in `CLUSTER GETSLOTMIGRATIONS`
/// order (newest first).
pub fn slot_jobs(port: u16) -> Vec<(String, String)> {
    let r = cmd(port, &["CLUSTER", "GETSLOTMIGRATIONS"]);
    r.items()
        .iter()
        .map(|job| {
            let kv = job.items();
            let field = |name: &str| {
                kv.chunks(2)
                    .find(|p| p[0].text() == name)
                    .map(|p| p[1].text())
                    .unwrap_or_default()
            };
            (field("operation"), field("state"))
        })
        .collect()
}

/// The state of the newest export job on `port` (`CLUSTER GETSLOTMIGRATIONS`).
pub fn export_state(port: u16) -> Option<String> {
    slot_jobs(port)
        .into_iter()
        .find(|(op, _)| op == "EXPORT")
        .map(|(_, state)| state)
}

//! `ferrocluster-server demo`: six nodes on loopback (3 primaries, 3 replicas) as separate
//! processes, a cluster formed with MEET / ADDSLOTSRANGE / REPLICATE, a workload through the
//! `redis` crate's cluster client, a `kill -9` of a primary with what a client sees over time,
//! the restart of that node, and a summary. Every process it starts is stopped at the end
//! (also on an early error: the process guard kills them when dropped).
//!
//! Every deadline only bounds a hang (at least [`HANG`]): on a slow or loaded machine the demo
//! takes longer, it does not fail. A query that fails is retried, or reported as the failure
//! it is, never taken as an answer. The times it prints are measurements, not checks.

use ferrocluster_slot::key_hash_slot;
use redis::cluster::ClusterClient;
use redis::{Commands, Connection, RedisResult};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::time::{Duration, Instant};

const KEYS: usize = 10_000;
/// `cluster-node-timeout` (ms) the nodes start with: longer than any stall of a loaded
/// machine, so no live node is failed over unasked while the demo forms and fills the cluster.
const STEADY_NODE_TIMEOUT_MS: u64 = 60_000;
/// `cluster-node-timeout` (ms) every node gets (`CONFIG SET`) just before the kill: the
/// failover the demo shows is detected after this.
const NODE_TIMEOUT_MS: u64 = 2000;
/// The bound of every wait, connect, read and write of the demo: it only bounds a hang, so a
/// slow machine never turns into a failed check.
const HANG: Duration = Duration::from_secs(60);
/// How long the demo waits for a replica to take over after the kill (bounds a hang).
const FAILOVER_DEADLINE: Duration = HANG;
/// How long the demo watches readiness right after forming the cluster (replicas advertise a
/// replication offset only once a write reached them, so this phase may end "not ready"). Not
/// a check: whatever it sees, the demo goes on.
const FORMING_READINESS_DEADLINE: Duration = Duration::from_secs(5);
/// How long the demo waits for every shard to be failover-ready before the kill (bounds a
/// hang).
const READINESS_DEADLINE: Duration = HANG;

struct Nodes {
    exe: PathBuf,
    base: PathBuf,
    ports: Vec<u16>,
    children: Vec<Option<Child>>,
}

impl Nodes {
    fn dir(&self, i: usize) -> PathBuf {
        self.base.join(format!("node-{}", self.ports[i]))
    }

    fn start(&mut self, i: usize) -> std::io::Result<()> {
        let dir = self.dir(i);
        std::fs::create_dir_all(&dir)?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("stderr.log"))?;
        let child = Command::new(&self.exe)
            .arg("--port")
            .arg(self.ports[i].to_string())
            .arg("--dir")
            .arg(&dir)
            .arg("--cluster-node-timeout")
            .arg(STEADY_NODE_TIMEOUT_MS.to_string())
            .arg("--logfile")
            .arg(dir.join("server.log"))
            .arg("--loglevel")
            .arg("verbose")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()?;
        self.children[i] = Some(child);
        Ok(())
    }

    /// The exit status of node `i` if its process has exited.
    fn exited(&mut self, i: usize) -> Option<ExitStatus> {
        self.children[i].as_mut()?.try_wait().ok().flatten()
    }

    /// Waits (bounded by [`HANG`]) until node `i` answers PING; fails early if it exited.
    fn wait_ping(&mut self, i: usize) -> Result<(), String> {
        let port = self.ports[i];
        let end = Instant::now() + HANG;
        loop {
            let err = match query_string(port, &["PING"]) {
                Ok(_) => return Ok(()),
                Err(e) => e,
            };
            if let Some(status) = self.exited(i) {
                return Err(format!(
                    "node {port} exited ({status}) before answering PING (see {})",
                    self.dir(i).display()
                ));
            }
            if Instant::now() >= end {
                return Err(format!(
                    "node {port} did not answer PING within {} s: {err} (see {})",
                    HANG.as_secs(),
                    self.dir(i).display()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.children[i].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for i in 0..self.children.len() {
            self.kill(i);
        }
    }
}

struct Clock(Instant);

impl Clock {
    fn say(&self, msg: impl AsRef<str>) {
        println!(
            "[demo {:>6.2}s] {}",
            self.0.elapsed().as_secs_f64(),
            msg.as_ref()
        );
    }
}

/// A plain connection to `port`. Connecting, reading and writing are bounded by [`HANG`] only:
/// a loaded machine may take seconds to accept or answer, and that is no failure. (A node that
/// is down refuses the connection at once on loopback.)
fn conn(port: u16) -> RedisResult<Connection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let c = client.get_connection_with_timeout(HANG)?;
    c.set_read_timeout(Some(HANG))?;
    c.set_write_timeout(Some(HANG))?;
    Ok(c)
}

fn query(port: u16, args: &[&str]) -> RedisResult<redis::Value> {
    let mut c = conn(port)?;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(&mut c)
}

fn query_string(port: u16, args: &[&str]) -> RedisResult<String> {
    let mut c = conn(port)?;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(&mut c)
}

/// Asks `port` a read-only question until it answers (bounded by [`HANG`]); a failed attempt
/// is retried, and if none succeeds the error says so, with the last failure.
fn query_retry(port: u16, args: &[&str]) -> Result<String, String> {
    let end = Instant::now() + HANG;
    loop {
        match query_string(port, args) {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() >= end => {
                return Err(format!(
                    "node {port} did not answer {} within {} s: {e}",
                    args.join(" "),
                    HANG.as_secs()
                ))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// `WAIT 1 <HANG in ms>` on the primary `port`: how many replicas acknowledged everything it
/// streamed (our WAIT waits for the node's replication offset at the call, whoever wrote).
/// The reply is read with a bound longer than the WAIT's own, so a WAIT that times out is
/// answered (0), not cut off.
fn wait_for_replica(port: u16) -> RedisResult<i64> {
    let mut c = conn(port)?;
    c.set_read_timeout(Some(HANG * 2))?;
    redis::cmd("WAIT")
        .arg(1)
        .arg(HANG.as_millis() as u64)
        .query(&mut c)
}

/// The role `port` reports in ROLE (`master`, `slave`), if it answers.
fn role(port: u16) -> Option<String> {
    match query(port, &["ROLE"]).ok()? {
        redis::Value::Array(items) => redis::from_redis_value_ref(items.first()?).ok(),
        _ => None,
    }
}

/// Polls `f` every 100 ms until it holds; gives up after [`HANG`] (the bound of a hang).
fn wait_until(mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + HANG;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What a plain (not cluster-aware) client gets for `GET key` from `port`, in one line.
fn observe(port: u16, key: &str) -> String {
    match conn(port) {
        Err(e) => format!("connection failed ({})", e.kind_str()),
        Ok(mut c) => match redis::cmd("GET").arg(key).query::<Option<String>>(&mut c) {
            Ok(Some(v)) => format!("value {v:?}"),
            Ok(None) => "nil".into(),
            Err(e) => match (e.code(), e.detail()) {
                (Some(code), Some(d)) => format!("-{code} {d}"),
                (Some(code), None) => format!("-{code}"),
                _ => format!("error {e}"),
            },
        },
    }
}

trait KindStr {
    fn kind_str(&self) -> String;
}

impl KindStr for redis::RedisError {
    fn kind_str(&self) -> String {
        if self.is_connection_refusal() {
            "connection refused".into()
        } else {
            format!("{self}")
        }
    }
}

/// `FERROCLUSTER SUMMARY` of `port`: e.g. `cluster ok, failover-ready: no (replica <id> of
/// primary <id> has not synced yet)`.
fn readiness_summary(port: u16) -> String {
    match query_string(port, &["FERROCLUSTER", "SUMMARY"]) {
        Ok(s) => s,
        Err(e) => format!("readiness unknown ({})", e.kind_str()),
    }
}

/// Prints the readiness summary of `port` each time it changes until every shard is
/// failover-ready or `deadline` passes; returns whether it became ready.
fn watch_readiness(clock: &Clock, port: u16, deadline: Duration) -> bool {
    let t0 = Instant::now();
    let mut last = String::new();
    loop {
        let now = readiness_summary(port);
        if now != last {
            clock.say(format!("  readiness seen by 127.0.0.1:{port}: {now}"));
            last = now;
        }
        if last.contains("failover-ready: yes") {
            return true;
        }
        if t0.elapsed() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn cluster_nodes(port: u16) -> Option<String> {
    query_string(port, &["CLUSTER", "NODES"]).ok()
}

/// The id and address of the node owning slot 0's range start (a primary line containing it).
fn owner_of_slot(nodes_text: &str, slot: u16) -> Option<(String, String, bool)> {
    for line in nodes_text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        if f.len() < 8 || !f[2].contains("master") {
            continue;
        }
        for r in &f[8..] {
            let (a, b) = match r.split_once('-') {
                Some((a, b)) => (a.parse::<u16>().ok(), b.parse::<u16>().ok()),
                None => (r.parse().ok(), r.parse().ok()),
            };
            if let (Some(a), Some(b)) = (a, b) {
                if a <= slot && slot <= b {
                    let addr = f[1].split('@').next().unwrap_or_default().to_string();
                    return Some((f[0].to_string(), addr, f[2].contains("fail")));
                }
            }
        }
    }
    None
}

/// Runs the demo; returns success only if everything it claims happened.
pub fn run(base_port: u16) -> ExitCode {
    let clock = Clock(Instant::now());
    match demo(base_port, &clock) {
        Ok(true) => {
            clock.say("demo finished: every claim above was checked. All processes stopped.");
            ExitCode::SUCCESS
        }
        Ok(false) => {
            clock.say("demo finished with a failed check (see above). All processes stopped.");
            ExitCode::from(1)
        }
        Err(e) => {
            clock.say(format!("demo failed: {e}. All processes stopped."));
            ExitCode::from(1)
        }
    }
}

fn demo(base_port: u16, clock: &Clock) -> Result<bool, String> {
    let exe = std::env::current_exe().map_err(|e| format!("can't find my own binary: {e}"))?;
    let base = std::env::temp_dir().join(format!("ferrocluster-demo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).map_err(|e| format!("can't create {}: {e}", base.display()))?;
    let ports: Vec<u16> = (0..6).map(|i| base_port + i).collect();
    let mut nodes = Nodes {
        exe,
        base: base.clone(),
        ports: ports.clone(),
        children: (0..6).map(|_| None).collect(),
    };
    clock.say(format!(
        "starting 6 ferrocluster-server processes on 127.0.0.1:{}-{} (bus ports +10000), data in {}",
        ports[0],
        ports[5],
        base.display()
    ));
    for (i, port) in ports.iter().enumerate() {
        nodes
            .start(i)
            .map_err(|e| format!("can't start node {port}: {e}"))?;
    }
    for i in 0..ports.len() {
        nodes.wait_ping(i)?;
    }
    clock.say("all 6 nodes answer PING");

    // Form the cluster.
    let ranges = [(0u16, 5460u16), (5461, 10922), (10923, 16383)];
    for (i, (a, b)) in ranges.iter().enumerate() {
        query(
            ports[i],
            &["CLUSTER", "ADDSLOTSRANGE", &a.to_string(), &b.to_string()],
        )
        .map_err(|e| format!("ADDSLOTSRANGE on {}: {e}", ports[i]))?;
        clock.say(format!(
            "CLUSTER ADDSLOTSRANGE {a} {b} on 127.0.0.1:{}",
            ports[i]
        ));
    }
    for &p in &ports[1..] {
        query(ports[0], &["CLUSTER", "MEET", "127.0.0.1", &p.to_string()])
            .map_err(|e| format!("MEET {p}: {e}"))?;
    }
    clock.say(format!(
        "CLUSTER MEET: 127.0.0.1:{} meets the other five",
        ports[0]
    ));
    let joined = wait_until(|| {
        ports.iter().all(|&p| {
            cluster_nodes(p).is_some_and(|t| {
                t.lines().count() == 6 && !t.contains("handshake") && !t.contains("noaddr")
            })
        })
    });
    if !joined {
        return Err(format!(
            "the six nodes did not all learn each other within {} s",
            HANG.as_secs()
        ));
    }
    clock.say("gossip done: every node knows all 6 nodes");
    let mut ids = Vec::new();
    for &p in &ports {
        ids.push(query_retry(p, &["CLUSTER", "MYID"])?);
    }
    for i in 0..3 {
        query(ports[3 + i], &["CLUSTER", "REPLICATE", &ids[i]])
            .map_err(|e| format!("REPLICATE on {}: {e}", ports[3 + i]))?;
        clock.say(format!(
            "CLUSTER REPLICATE: 127.0.0.1:{} replicates 127.0.0.1:{}",
            ports[3 + i],
            ports[i]
        ));
    }
    // cluster_state:ok says little about failover: watch what FERROCLUSTER SUMMARY says while
    // the replicas attach (INFO readiness has the details).
    let observer = ports[1];
    if !watch_readiness(clock, observer, FORMING_READINESS_DEADLINE) {
        clock.say(
            "  not failover-ready yet: a replica counts as synced once it advertises a \
             replication offset, i.e. after the first write reaches it",
        );
    }
    let ok = wait_until(|| {
        ports.iter().all(|&p| {
            query_string(p, &["CLUSTER", "INFO"]).is_ok_and(|t| t.contains("cluster_state:ok"))
        }) && ports[3..].iter().all(|&p| {
            query_string(p, &["INFO", "replication"])
                .is_ok_and(|t| t.contains("master_link_status:up"))
        })
    });
    if !ok {
        return Err(format!(
            "the cluster did not reach cluster_state:ok with 3 synced replicas within {} s",
            HANG.as_secs()
        ));
    }
    clock.say("cluster_state:ok on all 6 nodes; 3 replicas streaming from their primaries");

    // Workload.
    let client = ClusterClient::builder(vec![format!("redis://127.0.0.1:{}/", ports[0])])
        .retries(2)
        .connection_timeout(HANG)
        .response_timeout(HANG)
        .build()
        .map_err(|e| format!("cluster client: {e}"))?;
    let mut cc = client
        .get_connection()
        .map_err(|e| format!("cluster connection: {e}"))?;
    for i in 0..KEYS {
        let _: () = cc
            .set(format!("key:{i}"), format!("value:{i}"))
            .map_err(|e| format!("SET key:{i}: {e}"))?;
        if (i + 1) % 2500 == 0 {
            clock.say(format!(
                "written {} / {KEYS} keys through the cluster client",
                i + 1
            ));
        }
    }
    let mut read_ok = 0;
    for i in 0..KEYS {
        let v: Option<String> = cc
            .get(format!("key:{i}"))
            .map_err(|e| format!("GET key:{i}: {e}"))?;
        if v.as_deref() == Some(format!("value:{i}").as_str()) {
            read_ok += 1;
        }
    }
    clock.say(format!("read back {read_ok} / {KEYS} keys correctly"));
    let per_node: Vec<i64> = ports
        .iter()
        .map(|&p| {
            query_retry(p, &["DBSIZE"])
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(-1)
        })
        .collect();
    clock.say(format!(
        "keys per node (primaries 0-2, replicas 3-5): {per_node:?}"
    ));
    let mut all_good = read_ok == KEYS;

    // Readiness before the kill: wait (bounded) until every shard could fail over.
    clock.say(format!(
        "waiting up to {} s until every shard is failover-ready (FERROCLUSTER SUMMARY on 127.0.0.1:{observer})",
        READINESS_DEADLINE.as_secs()
    ));
    if watch_readiness(clock, observer, READINESS_DEADLINE) {
        let ck = match query_string(observer, &["FERROCLUSTER", "CKQUORUM"]) {
            Ok(s) => format!("+{s}"),
            Err(e) => format!("-{}", e.detail().unwrap_or("error")),
        };
        clock.say(format!("  FERROCLUSTER CKQUORUM: {ck}"));
    } else {
        clock.say(format!(
            "FAILED CHECK: not every shard was failover-ready within {} s; killing a primary anyway",
            READINESS_DEADLINE.as_secs()
        ));
        all_good = false;
    }

    // Replication is asynchronous: a write a primary acknowledged a moment before a kill -9
    // may not have reached its replica yet. Each primary confirms with WAIT that its replica
    // holds its whole stream, so that no acknowledged key is lost by the kill below.
    for &p in &ports {
        // A query that failed is no answer: ask until the node says (bounded by HANG).
        let mut said = None;
        wait_until(|| {
            said = role(p);
            said.is_some()
        });
        match said.as_deref() {
            Some("master") => {}
            Some(_) => continue,
            None => {
                clock.say(format!(
                    "FAILED CHECK: 127.0.0.1:{p} did not answer ROLE within {} s",
                    HANG.as_secs()
                ));
                all_good = false;
                continue;
            }
        }
        match wait_for_replica(p) {
            Ok(n) if n >= 1 => clock.say(format!(
                "WAIT 1 {} on the primary 127.0.0.1:{p}: {n} replica(s) hold every write",
                HANG.as_millis()
            )),
            Ok(n) => {
                clock.say(format!(
                    "FAILED CHECK: WAIT 1 {} on the primary 127.0.0.1:{p} answered {n}: its replica \
                     did not acknowledge every write",
                    HANG.as_millis()
                ));
                all_good = false;
            }
            Err(e) => {
                clock.say(format!("FAILED CHECK: WAIT on 127.0.0.1:{p}: {e}"));
                all_good = false;
            }
        }
    }

    // Kill a primary.
    let victim = 0;
    let key_idx = (0..KEYS)
        .find(|i| u16::from(key_hash_slot(format!("key:{i}").as_bytes())) <= 5460)
        .unwrap_or(0);
    let key = format!("key:{key_idx}");
    let slot = u16::from(key_hash_slot(key.as_bytes()));
    clock.say(format!(
        "kill -9 of the primary 127.0.0.1:{} (slots 0-5460). Watching GET {key} (slot {slot}) at the old address and at 127.0.0.1:{observer}",
        ports[victim]
    ));
    for &p in &ports {
        if let Err(e) = query_retry(
            p,
            &[
                "CONFIG",
                "SET",
                "cluster-node-timeout",
                &NODE_TIMEOUT_MS.to_string(),
            ],
        ) {
            clock.say(format!(
                "FAILED CHECK: CONFIG SET cluster-node-timeout on 127.0.0.1:{p}: {e}"
            ));
            all_good = false;
        }
    }
    clock.say(format!(
        "cluster-node-timeout {NODE_TIMEOUT_MS} ms on every node (started with {STEADY_NODE_TIMEOUT_MS})"
    ));
    nodes.kill(victim);
    let t0 = Instant::now();
    let mut last = (String::new(), String::new());
    let mut failover_ms = None;
    let mut new_primary = None;
    while t0.elapsed() < FAILOVER_DEADLINE {
        let old = observe(ports[victim], &key);
        let seen = observe(observer, &key);
        if (old.clone(), seen.clone()) != last {
            clock.say(format!(
                "  +{:>5} ms  old address: {old:<40} 127.0.0.1:{observer}: {seen}",
                t0.elapsed().as_millis()
            ));
            last = (old, seen);
        }
        if let Some((id, addr, failed)) =
            cluster_nodes(observer).and_then(|t| owner_of_slot(&t, slot))
        {
            if id != ids[victim] && !failed {
                failover_ms = Some(t0.elapsed().as_millis());
                new_primary = Some(addr);
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    match (&failover_ms, &new_primary) {
        (Some(ms), Some(addr)) => {
            let seen = observe(observer, &key);
            clock.say(format!("  +{ms:>5} ms  new primary for slot {slot}: {addr}; 127.0.0.1:{observer} now answers: {seen}"));
            clock.say(format!(
                "  readiness seen by 127.0.0.1:{observer}: {}",
                readiness_summary(observer)
            ));
        }
        _ => {
            let state = query_string(observer, &["CLUSTER", "INFO"]).unwrap_or_default();
            let st = state
                .lines()
                .find(|l| l.starts_with("cluster_state"))
                .unwrap_or("cluster_state:?")
                .to_string();
            clock.say(format!(
                "FAILED CHECK: no replica was promoted for slots 0-5460 within {} s, so that shard stayed \
                 unserved ({st} on the survivors, cluster-require-full-coverage yes); the replica's \
                 log in {} tells why (its election steps are logged as `epoch/election`).",
                FAILOVER_DEADLINE.as_secs(),
                base.display()
            ));
            all_good = false;
        }
    }

    // Restart the old primary.
    clock.say(format!(
        "restarting 127.0.0.1:{} with its nodes.conf",
        ports[victim]
    ));
    nodes.start(victim).map_err(|e| format!("restart: {e}"))?;
    nodes
        .wait_ping(victim)
        .map_err(|e| format!("the restarted node: {e}"))?;
    // A query that failed is no answer: only an ID the node actually returned is compared.
    let id_now = query_retry(ports[victim], &["CLUSTER", "MYID"])?;
    let same_id = id_now == ids[victim];
    clock.say(if same_id {
        "restarted node is back with the same node ID".to_string()
    } else {
        format!(
            "restarted node is back with a DIFFERENT node ID ({id_now}; it was {})",
            ids[victim]
        )
    });
    all_good &= same_id;
    let restarted_role;
    if let Some(addr) = &new_primary {
        // It rejoins with its old slots in nodes.conf, learns they moved and turns replica;
        // wait (bounded) for both the role and the redirect, keeping what was last seen.
        let moved = format!("MOVED {slot} {addr}");
        let (mut became_replica, mut seen) = (false, String::new());
        wait_until(|| {
            became_replica = role(ports[victim]).as_deref() == Some("slave");
            seen = observe(ports[victim], &key);
            became_replica && seen.contains(&moved)
        });
        clock.say(format!(
            "restarted node: {}; GET {key} there answers {seen}",
            if became_replica {
                format!("a replica of {addr}")
            } else {
                "NOT a replica".into()
            }
        ));
        all_good &= became_replica && seen.contains(&moved);
        // The restarted node is the new primary's replica: the shard can fail over again.
        watch_readiness(clock, observer, READINESS_DEADLINE);
        restarted_role = if became_replica { "replica" } else { "primary" };
    } else {
        let back = wait_until(|| {
            [observer, ports[victim]].iter().all(|&p| {
                query_string(p, &["CLUSTER", "INFO"]).is_ok_and(|t| t.contains("cluster_state:ok"))
            })
        });
        let seen = observe(ports[victim], &key);
        clock.say(format!(
            "without a failover the restarted node takes its slots back as primary ({}); it has no persistence, \
             so it restarts empty: GET {key} there answers {seen}",
            if back { "cluster_state:ok again" } else { "cluster still not ok" }
        ));
        restarted_role = "primary (no failover happened)";
        all_good &= back;
    }

    // Read everything back after the restart.
    let client = ClusterClient::builder(vec![format!("redis://127.0.0.1:{}/", ports[1])])
        .retries(5)
        .connection_timeout(HANG)
        .response_timeout(HANG)
        .build()
        .map_err(|e| format!("cluster client: {e}"))?;
    let mut cc = client
        .get_connection()
        .map_err(|e| format!("cluster connection: {e}"))?;
    let (mut after_ok, mut after_lost_victim, mut after_lost_other) = (0usize, 0usize, 0usize);
    // A GET that fails is retried (bounded by HANG); once one still fails after that, the
    // rest are not retried (the cluster is not serving) and failures are counted and shown.
    let (mut errors, mut last_error, mut retry) = (0usize, None, true);
    for i in 0..KEYS {
        let k = format!("key:{i}");
        let mut v: RedisResult<Option<String>> = cc.get(&k);
        if retry && v.is_err() {
            let end = Instant::now() + HANG;
            while v.is_err() && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(100));
                v = cc.get(&k);
            }
            retry = v.is_ok();
        }
        if let Err(e) = &v {
            errors += 1;
            last_error = Some(e.to_string());
        }
        if matches!(&v, Ok(Some(s)) if *s == format!("value:{i}")) {
            after_ok += 1;
        } else if u16::from(key_hash_slot(k.as_bytes())) <= 5460 {
            after_lost_victim += 1;
        } else {
            after_lost_other += 1;
        }
    }
    clock.say(format!(
        "after the restart: {after_ok} / {KEYS} keys read back; missing: {after_lost_victim} in the killed shard, {after_lost_other} elsewhere"
    ));
    if let Some(e) = last_error {
        clock.say(format!(
            "  {errors} of those GETs failed instead of answering (last error: {e})"
        ));
    }
    if failover_ms.is_some() {
        all_good &= after_ok == KEYS;
    } else {
        all_good &= after_lost_other == 0;
    }

    println!();
    println!("==================== summary ====================");
    println!(
        "nodes:             6 processes (3 primaries + 3 replicas) on 127.0.0.1:{}-{}",
        ports[0], ports[5]
    );
    println!("keys written:      {KEYS}");
    println!("keys read back:    {read_ok} before the kill, {after_ok} after the restart");
    match failover_ms {
        Some(ms) => {
            println!("failover time:     {ms} ms from kill -9 to a new primary for slots 0-5460")
        }
        None => println!(
            "failover time:     none: no replica was promoted within {} s (FAILED)",
            FAILOVER_DEADLINE.as_secs()
        ),
    }
    println!("restarted node:    {restarted_role}");
    if all_good {
        println!("logs:              removed (every check passed)");
    } else {
        println!(
            "logs:              {} (kept: a check failed)",
            base.display()
        );
    }
    println!("==================================================");
    drop(nodes);
    if all_good {
        let _ = std::fs::remove_dir_all(Path::new(&base));
    }
    Ok(all_good)
}

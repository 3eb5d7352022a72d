//! Atomic slot migration against real valkey-server 9.1 nodes, both directions, without a
//! cluster node of ours: the control plane is `ferrocluster_migration::Migrations` over a
//! topology that mirrors the real cluster's, the data plane is `AsmPlane`, the keyspace the
//! tests' `Db`.
//!
//! * `real_source_into_our_import`: a real node A exports two slots to "B"; B is a real node
//!   whose announced client port is our listener, so A's data connection reaches our import.
//!   Writes land on A during the snapshot and the stream; when our import is granted the
//!   failover, the real B claims the slots (`CLUSTER BUMPEPOCH`, `SETSLOT .. NODE`), A sees the
//!   take-over and its job succeeds. Our keyspace equals A's at the pause.
//! * `our_export_into_a_real_target`: our source, speaking for the real node A that owns the
//!   slots, connects to a real node B (with `requirepass`: AUTH first) and migrates a keyspace
//!   of our own with writes during the snapshot and the stream; B takes the slots over and
//!   its keys equal ours.
//!
//! The servers must be installed (`.ci/run` installs them). Their ports (and bus ports, data
//! port + 10000) come from the shared allocator (`ferrocluster_testkit::ports`); the listener
//! that stands for our "B" takes port 0 and stays open for the whole test. Every wait only
//! bounds a hang (`HANG`); the real nodes' timers that could end a migration or mark a node
//! failed on a loaded machine (`cluster-node-timeout`, the write pause of 2 ×
//! `cluster-manual-failover-timeout`) are set to `HANG` too.
#![allow(clippy::disallowed_methods)] // a test host reads the clock

#[path = "../asm/db.rs"]
mod db;
#[path = "../interop/driver.rs"]
#[allow(dead_code)]
mod driver;

use db::{Db, Entry, Val};
use driver::{unix_ms, Server};
use ferrocluster_dataplane::resp::{CommandReader, Item, ReaderLimits};
use ferrocluster_dataplane::{
    AsmConfig, AsmOutput, AsmPlane, ConnId, Millis, SnapshotMode, SnapshotProgress,
};
use ferrocluster_migration::{
    JobState, MigrationConfig, MigrationOutput, MigrationRequest, Migrations, Origin,
};
use ferrocluster_slot::{key_hash_slot, Slot};
use ferrocluster_testkit::{ports, wait_until, BUS_OFFSET, HANG};
use ferrocluster_topology::{Node, NodeFlags, NodeId, ShardId, Topology};
use rand_core::SeedableRng;
use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `HANG` in ms, for the real nodes' timers and ours.
fn hang_ms() -> u64 {
    HANG.as_millis() as u64
}

const TAGS: [&str; 2] = ["t7", "t2"];
const CONN: ConnId = ConnId(1);

fn cmd<T: redis::FromRedisValue>(c: &mut redis::Connection, args: &[&str]) -> T {
    let mut q = redis::cmd(args[0]);
    for a in &args[1..] {
        q.arg(*a);
    }
    q.query(c).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// A valkey-server 9.1 cluster node on a port of the allocator (its bus port + 10000),
/// announcing `announce` as its client port when given. Its node timeout and its write pause
/// (2 × the manual failover timeout) only bound a hang.
fn node(announce: Option<u16>, password: Option<&str>) -> Server {
    let port = ports::port();
    let bus = (port + BUS_OFFSET).to_string();
    let node_timeout = hang_ms().to_string();
    let mf_timeout = (hang_ms() / 2).to_string();
    let mut args = vec![
        "--cluster-enabled",
        "yes",
        "--cluster-port",
        &bus,
        "--cluster-node-timeout",
        &node_timeout,
        "--cluster-manual-failover-timeout",
        &mf_timeout,
        "--enable-debug-command",
        "yes",
    ];
    let announced = announce.map(|p| p.to_string());
    if let Some(p) = &announced {
        args.extend(["--cluster-announce-port", p]);
    }
    if let Some(pw) = password {
        args.extend(["--masterauth", pw]);
    }
    Server::start_on("valkey-server", port, &args, password)
}

fn bus_port(s: &Server) -> String {
    let v: Vec<String> = cmd(&mut s.conn(), &["CONFIG", "GET", "cluster-port"]);
    v[1].clone()
}

fn my_id(s: &Server) -> NodeId {
    let id: String = cmd(&mut s.conn(), &["CLUSTER", "MYID"]);
    NodeId::parse(&id).unwrap()
}

/// A owns every slot, B none; both know each other.
fn cluster(a: &Server, b: &Server) {
    let bp = b.port.to_string();
    let bb = bus_port(b);
    let _: () = cmd(&mut a.conn(), &["CLUSTER", "MEET", "127.0.0.1", &bp, &bb]);
    let _: () = cmd(&mut a.conn(), &["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]);
    wait_until("cluster ok", || {
        [a, b].iter().all(|s| {
            let info: String = cmd(&mut s.conn(), &["CLUSTER", "INFO"]);
            info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:2")
        })
    });
}

fn slot(tag: &str) -> Slot {
    key_hash_slot(format!("{{{tag}}}").as_bytes())
}

/// The commands that fill a slot with keys of every type.
fn fill_cmds(tag: &str) -> Vec<Vec<String>> {
    let k = |n: &str| format!("{{{tag}}}{n}");
    let mut v: Vec<Vec<String>> = vec![
        vec!["SET".into(), k("str"), "hello".into()],
        vec!["SET".into(), k("int"), "100".into()],
        vec![
            "SET".into(),
            k("ttl"),
            "x".into(),
            "PXAT".into(),
            "1900000000000".into(),
        ],
        vec!["RPUSH".into(), k("list"), "a".into(), "b".into()],
        vec!["SADD".into(), k("set"), "1".into(), "2".into()],
        vec!["SADD".into(), k("sset"), "x".into(), "y".into()],
        vec!["HSET".into(), k("hash"), "f".into(), "1".into()],
        vec!["ZADD".into(), k("zset"), "1.5".into(), "m".into()],
        vec![
            "HSETEX".into(),
            k("hexp"),
            "PXAT".into(),
            "1900000000000".into(),
            "FIELDS".into(),
            "1".into(),
            "f".into(),
            "v".into(),
        ],
    ];
    let mut big = vec!["RPUSH".into(), k("biglist")];
    big.extend((0..200).map(|i| format!("e{i}")));
    v.push(big);
    let mut bigh = vec!["HSET".into(), k("bighash")];
    for i in 0..600 {
        bigh.push(format!("f{i}"));
        bigh.push(format!("v{i}"));
    }
    v.push(bigh);
    for i in 0..40 {
        v.push(vec!["SET".into(), k(&format!("k{i}")), format!("v{i}")]);
    }
    v
}

/// Non-idempotent writes to a slot.
fn write_cmds(tag: &str, round: u32) -> Vec<Vec<String>> {
    let k = |n: &str| format!("{{{tag}}}{n}");
    vec![
        vec!["INCRBY".into(), k("int"), "7".into()],
        vec!["APPEND".into(), k("str"), format!("+{round}")],
        vec!["LPUSH".into(), k("list"), format!("l{round}")],
        vec!["SADD".into(), k("set"), format!("{round}00")],
        vec!["HINCRBY".into(), k("hash"), "f".into(), "3".into()],
        vec!["ZINCRBY".into(), k("zset"), "0.5".into(), "m".into()],
        vec!["SET".into(), k(&format!("new{round}")), "n".into()],
        vec!["DEL".into(), k(&format!("k{round}"))],
    ]
}

/// The keyspace of `tags`' slots on a real node, read with DUMP.
fn real_keys(c: &mut redis::Connection) -> Db {
    let mut d = Db::new(1);
    for tag in TAGS {
        let s = slot(tag).get().to_string();
        let keys: Vec<Vec<u8>> = cmd(c, &["CLUSTER", "GETKEYSINSLOT", &s, "100000"]);
        for k in keys {
            let dump: Vec<u8> = redis::cmd("DUMP").arg(&k).query(c).unwrap();
            let at: i64 = redis::cmd("PEXPIRETIME").arg(&k).query(c).unwrap();
            let obj = ferrocluster_rdb::dump::decode(&dump).unwrap().object;
            d.insert(
                0,
                &k,
                Entry {
                    val: Val::from_object(obj),
                    expire: (at >= 0).then_some(at),
                },
            );
        }
    }
    d
}

fn job_state(c: &mut redis::Connection) -> Option<String> {
    let v: redis::Value = cmd(c, &["CLUSTER", "GETSLOTMIGRATIONS"]);
    let redis::Value::Array(jobs) = v else {
        return None;
    };
    let job = jobs.first()?;
    let pairs: Vec<(String, redis::Value)> = match job {
        redis::Value::Map(m) => m
            .iter()
            .map(|(k, v)| (redis::from_redis_value(k.clone()).unwrap(), v.clone()))
            .collect(),
        redis::Value::Array(a) => a
            .chunks(2)
            .map(|p| (redis::from_redis_value(p[0].clone()).unwrap(), p[1].clone()))
            .collect(),
        _ => return None,
    };
    pairs
        .into_iter()
        .find(|(k, _)| k == "state")
        .map(|(_, v)| redis::from_redis_value(v).unwrap())
}

fn primary(id: NodeId, shard: ShardId) -> Node {
    let mut n = Node::new(id, shard, Millis(0));
    n.flags = NodeFlags::PRIMARY;
    // The slot migration engine connects to the target's address.
    n.ip = Some(std::net::IpAddr::from([127, 0, 0, 1]));
    n
}

/// A topology of the two real nodes as myself (`me`) sees it: A owns every slot.
fn mirror(me: NodeId, other: NodeId, a: NodeId) -> Topology {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let mut t = Topology::new(primary(me, ShardId::random(&mut rng)));
    t.add_node(primary(other, ShardId::random(&mut rng)))
        .unwrap();
    for s in Slot::all() {
        t.set_slot_owner(s, Some(a)).unwrap();
    }
    t
}

/// What a target does when its import takes the slots over.
type Takeover = Box<dyn FnMut(&[Slot])>;

/// One host of ours on a real socket: the engine, the data plane, the keyspace.
struct Host {
    topo: Topology,
    mig: Migrations,
    asm: AsmPlane,
    db: Arc<Mutex<Db>>,
    sock: Option<TcpStream>,
    /// Before the import link: the client layer's reader (AUTH, ESTABLISH).
    client: Option<CommandReader>,
    rng: rand_chacha::ChaCha8Rng,
    /// Called on TakeOwnership (the import's take-over).
    on_takeover: Takeover,
    snapshot: bool,
    /// A point-in-time snapshot reads this copy (taken at StartSnapshot); a slot-atomic one
    /// the live keyspace under its lock.
    mode: SnapshotMode,
    frozen: Option<Db>,
    paused: bool,
}

impl Host {
    fn new(
        topo: Topology,
        auth: bool,
        db: Arc<Mutex<Db>>,
        mode: SnapshotMode,
        on_takeover: Takeover,
    ) -> Host {
        let now = unix_ms();
        Host {
            topo,
            mig: Migrations::new(
                MigrationConfig {
                    auth_to_target: auth,
                    // The write pause (2 × this) only bounds a hang.
                    manual_failover_timeout_ms: hang_ms() / 2,
                    ..MigrationConfig::default()
                },
                now,
            ),
            asm: AsmPlane::new(
                AsmConfig {
                    step_bytes: 2048,
                    page_keys: 4,
                    ..AsmConfig::default()
                },
                now,
            ),
            db,
            sock: None,
            client: None,
            rng: rand_chacha::ChaCha8Rng::seed_from_u64(7),
            on_takeover,
            snapshot: false,
            mode,
            frozen: None,
            paused: false,
        }
    }

    fn write(&mut self, b: &[u8]) {
        if let Some(s) = self.sock.as_mut() {
            s.set_nonblocking(false).unwrap();
            let _ = s.write_all(b);
            s.set_nonblocking(true).unwrap();
        }
    }

    fn drain(&mut self, connect_to: Option<u16>, password: &[u8]) {
        loop {
            let now = unix_ms();
            let mut any = false;
            while let Some(o) = self.mig.poll_output() {
                any = true;
                match o {
                    MigrationOutput::Request(MigrationRequest::Connect { job, .. }) => {
                        let s = TcpStream::connect(("127.0.0.1", connect_to.unwrap())).unwrap();
                        s.set_nonblocking(true).unwrap();
                        self.sock = Some(s);
                        self.asm.handle_connected(job, CONN, now).unwrap();
                    }
                    MigrationOutput::Request(MigrationRequest::SendAuth { conn, .. }) => {
                        self.asm.send_auth(conn, None, password, now).unwrap()
                    }
                    MigrationOutput::Request(MigrationRequest::Send { conn, message }) => {
                        self.asm.send_message(conn, &message, now)
                    }
                    MigrationOutput::Request(MigrationRequest::StartSnapshot {
                        conn,
                        ranges,
                        ..
                    }) => {
                        self.asm
                            .start_snapshot(conn, &ranges, self.mode, now)
                            .unwrap();
                        if self.mode == SnapshotMode::PointInTime {
                            self.frozen = Some(self.db.lock().unwrap().clone());
                        }
                        self.snapshot = true;
                    }
                    MigrationOutput::Request(MigrationRequest::BeginStreaming { conn, .. }) => {
                        self.asm.begin_streaming(conn, now).unwrap()
                    }
                    MigrationOutput::Request(MigrationRequest::QueryBacklog { job, conn }) => {
                        self.asm.query_backlog(job, conn, now)
                    }
                    MigrationOutput::Request(MigrationRequest::AcceptImportLink {
                        job,
                        conn,
                        slots,
                    }) => {
                        let already = self
                            .client
                            .take()
                            .map(|mut c| c.take_buffered())
                            .unwrap_or_default();
                        self.asm
                            .accept_import(job, conn, slots, &already, now)
                            .unwrap();
                    }
                    MigrationOutput::TakeOwnership { slots, .. } => {
                        let me = *self.topo.myself_id();
                        let list: Vec<Slot> = slots.iter().collect();
                        for s in &list {
                            self.topo.set_slot_owner(*s, Some(me)).unwrap();
                        }
                        (self.on_takeover)(&list);
                    }
                    MigrationOutput::Request(MigrationRequest::DropSlotKeys { slots }) => {
                        let mut db = self.db.lock().unwrap();
                        for space in &mut db.spaces {
                            space.retain(|s, _| !slots.contains(Slot::new(*s).unwrap()));
                        }
                    }
                    MigrationOutput::PauseWrites { .. } => self.paused = true,
                    MigrationOutput::UnpauseWrites => self.paused = false,
                    MigrationOutput::Request(MigrationRequest::Close { conn }) => {
                        self.asm.close(conn, now);
                        self.sock = None;
                    }
                    _ => {}
                }
            }
            while let Some(o) = self.asm.poll_output() {
                any = true;
                match o {
                    AsmOutput::Send { bytes, .. } => self.write(&bytes),
                    AsmOutput::Close { .. } => self.sock = None,
                    AsmOutput::Migration(input) => self.mig.handle_input(&self.topo, input, now),
                    AsmOutput::SyncSlots { conn, argv } => {
                        let _ = self.mig.handle_cluster_command(
                            &self.topo,
                            Origin::Conn(conn),
                            &argv,
                            &mut self.rng,
                            now,
                        );
                    }
                    AsmOutput::Apply { db, argv, .. } => {
                        self.db.lock().unwrap().exec(db, &argv).unwrap();
                    }
                    AsmOutput::Event(e) => eprintln!("asm event: {e:?}"),
                }
            }
            if !any {
                return;
            }
        }
    }

    /// The client layer of a target before the import link.
    fn client_bytes(&mut self, bytes: &[u8]) {
        let c = self
            .client
            .get_or_insert_with(|| CommandReader::new(ReaderLimits::default()));
        c.push(bytes);
        while let Some(c) = self.client.as_mut() {
            let argv = match c.next_item().unwrap() {
                Some(Item::Command(c)) => c.argv,
                Some(Item::Empty(_)) => continue,
                None => return,
            };
            if argv[0].eq_ignore_ascii_case(b"auth") {
                self.write(b"+OK\r\n");
                continue;
            }
            let now = unix_ms();
            let reply = self.mig.handle_cluster_command(
                &self.topo,
                Origin::Conn(CONN),
                &argv,
                &mut self.rng,
                now,
            );
            if let Some(r) = reply {
                self.write(&r.to_resp2());
            }
            self.drain(None, b"");
        }
    }

    /// One round: read the socket, run the engines, a snapshot step, timers.
    fn poll(&mut self, accepted_import: bool, connect_to: Option<u16>, password: &[u8]) {
        let mut buf = [0u8; 65536];
        let mut closed = false;
        let mut got = Vec::new();
        if let Some(s) = self.sock.as_mut() {
            match s.read(&mut buf) {
                Ok(0) => closed = true,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(_) => closed = true,
            }
        }
        let now = unix_ms();
        if !got.is_empty() {
            if accepted_import && self.asm.import_of(CONN).is_none() {
                self.client_bytes(&got);
            } else {
                self.asm.handle_bytes(CONN, &got, now);
            }
        }
        if closed {
            self.sock = None;
            self.asm.handle_closed(CONN, now);
        }
        self.drain(connect_to, password);
        if self.snapshot && self.asm.wants_snapshot_step(CONN) {
            // Slot-atomic: the keyspace's lock is held across the step.
            let db = Arc::clone(&self.db);
            let r = match &self.frozen {
                Some(f) => self.asm.snapshot_step(CONN, f, now),
                None => self.asm.snapshot_step(CONN, &*db.lock().unwrap(), now),
            };
            if r.unwrap() != SnapshotProgress::More {
                self.snapshot = false;
                self.frozen = None;
            }
        }
        if self.mig.poll_timeout().is_some_and(|t| t <= now) {
            self.mig.handle_timeout(&self.topo, now);
        }
        self.drain(connect_to, password);
    }

    fn state(&self) -> Option<JobState> {
        self.mig.jobs().next().map(|j| j.state())
    }
}

/// A real Valkey source's migration into our import.
#[test]
fn real_source_into_our_import() {
    // Port 0, the kernel's pick: the listener stays open until the test ends.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let fake_port = listener.local_addr().unwrap().port();
    let a = node(None, None);
    let b = node(Some(fake_port), None);
    cluster(&a, &b);
    let (a_id, b_id) = (my_id(&a), my_id(&b));
    let mut ac = a.conn();
    for tag in TAGS {
        for c in fill_cmds(tag) {
            let args: Vec<&str> = c.iter().map(String::as_str).collect();
            let _: redis::Value = cmd(&mut ac, &args);
        }
    }
    // Our "B": the import side, serving the connection A opens to B's announced port.
    let db = Arc::new(Mutex::new(Db::new(1)));
    let stop = Arc::new(AtomicBool::new(false));
    let b_port = b.port;
    let target = {
        let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
        std::thread::spawn(move || {
            let takeover = Box::new(move |slots: &[Slot]| {
                // The real B claims the slots as our take-over would: a new configEpoch and
                // the slots, which its PONGs tell A.
                let mut c = redis::Client::open(format!("redis://127.0.0.1:{b_port}/"))
                    .unwrap()
                    .get_connection_with_timeout(HANG)
                    .unwrap();
                c.set_read_timeout(Some(HANG)).unwrap();
                let _: String = cmd(&mut c, &["CLUSTER", "BUMPEPOCH"]);
                let me = b_id.to_string();
                for s in slots {
                    let s = s.get().to_string();
                    let _: () = cmd(&mut c, &["CLUSTER", "SETSLOT", &s, "NODE", &me]);
                }
            });
            let mut host = Host::new(
                mirror(b_id, a_id, a_id),
                false,
                db,
                SnapshotMode::SlotAtomic,
                takeover,
            );
            listener.set_nonblocking(true).unwrap();
            while !stop.load(Ordering::SeqCst) {
                if host.sock.is_none() {
                    if let Ok((s, _)) = listener.accept() {
                        s.set_nonblocking(true).unwrap();
                        host.sock = Some(s);
                    }
                }
                host.poll(true, None, b"");
                std::thread::sleep(Duration::from_millis(1));
            }
            host.state()
        })
    };
    // Slow snapshot so writes land during it; no pause until we say.
    let _: () = cmd(&mut ac, &["DEBUG", "SLOTMIGRATION", "PREVENT-PAUSE", "1"]);
    let _: () = cmd(&mut ac, &["CONFIG", "SET", "rdb-key-save-delay", "10000"]);
    let (s0, s1) = (
        slot(TAGS[0]).get().to_string(),
        slot(TAGS[1]).get().to_string(),
    );
    let _: () = cmd(
        &mut ac,
        &[
            "CLUSTER",
            "MIGRATESLOTS",
            "SLOTSRANGE",
            &s0,
            &s0,
            &s1,
            &s1,
            "NODE",
            &b_id.to_string(),
        ],
    );
    wait_until("snapshotting", || {
        job_state(&mut ac).as_deref() == Some("snapshotting")
    });
    for tag in TAGS {
        for c in write_cmds(tag, 1) {
            let args: Vec<&str> = c.iter().map(String::as_str).collect();
            let _: redis::Value = cmd(&mut ac, &args);
        }
    }
    wait_until("streaming", || {
        matches!(
            job_state(&mut ac).as_deref(),
            Some("replicating" | "waiting-to-pause")
        )
    });
    let _: () = cmd(&mut ac, &["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    for tag in TAGS {
        for c in write_cmds(tag, 2) {
            let args: Vec<&str> = c.iter().map(String::as_str).collect();
            let _: redis::Value = cmd(&mut ac, &args);
        }
    }
    let at_pause = real_keys(&mut ac);
    let _: () = cmd(&mut ac, &["DEBUG", "SLOTMIGRATION", "PREVENT-PAUSE", "0"]);
    wait_until("the source's success", || {
        job_state(&mut ac).as_deref() == Some("success")
    });
    stop.store(true, Ordering::SeqCst);
    let ours = target.join().unwrap();
    assert_eq!(ours, Some(JobState::Success));
    let got = db.lock().unwrap().facts(0);
    assert_eq!(got, at_pause.facts(0));
    assert!(got.len() > 80, "{}", got.len());
}

/// Our export into a real Valkey target (AUTH first).
#[test]
fn our_export_into_a_real_target() {
    let a = node(None, Some("pw"));
    let b = node(None, Some("pw"));
    cluster(&a, &b);
    let (a_id, b_id) = (my_id(&a), my_id(&b));
    // Our keyspace, as A would have it (the real A holds none of it).
    let db = Arc::new(Mutex::new(Db::new(1)));
    for tag in TAGS {
        for c in fill_cmds(tag) {
            let argv: Vec<Vec<u8>> = c.iter().map(|s| s.as_bytes().to_vec()).collect();
            db.lock().unwrap().exec(0, &argv).unwrap();
        }
    }
    let mut host = Host::new(
        mirror(a_id, b_id, a_id),
        true,
        Arc::clone(&db),
        SnapshotMode::PointInTime,
        Box::new(|_| {}),
    );
    let (s0, s1) = (
        slot(TAGS[0]).get().to_string(),
        slot(TAGS[1]).get().to_string(),
    );
    let now = unix_ms();
    let argv = [
        "CLUSTER",
        "MIGRATESLOTS",
        "SLOTSRANGE",
        &s0,
        &s0,
        &s1,
        &s1,
        "NODE",
        &b_id.to_string(),
    ];
    let reply = host.mig.handle_cluster_command(
        &host.topo,
        Origin::Conn(ConnId(99)),
        &argv,
        &mut host.rng,
        now,
    );
    assert_eq!(reply, Some(ferrocluster_topology::Reply::ok()));
    let mut bc = b.conn();
    let mut round = 0;
    let end = Instant::now() + HANG;
    let mut wrote = BTreeMap::new();
    while host.state().is_some_and(|s| !s.is_terminal()) {
        assert!(
            Instant::now() < end,
            "stuck for {HANG:?} (a hang) in {:?}",
            host.state()
        );
        host.poll(false, Some(b.port), b"pw");
        // Client writes on our source while it takes them: at most 20 rounds while it
        // snapshots, so that rounds are left for the stream after it however many turns the
        // snapshot takes (turns, not time, count them).
        let state = host.state();
        let cap = if state == Some(JobState::Snapshotting) {
            20
        } else {
            40
        };
        if !host.paused
            && matches!(
                state,
                Some(JobState::Snapshotting | JobState::Replicating | JobState::WaitingToPause)
            )
            && round < cap
        {
            round += 1;
            *wrote.entry(format!("{state:?}")).or_insert(0) += 1;
            let now = unix_ms();
            for tag in TAGS {
                for c in write_cmds(tag, round) {
                    let argv: Vec<Vec<u8>> = c.iter().map(|s| s.as_bytes().to_vec()).collect();
                    let mut d = db.lock().unwrap();
                    d.exec(0, &argv).unwrap();
                    host.asm
                        .feed(0, Some(key_hash_slot(&argv[1])), &argv, now)
                        .unwrap();
                }
            }
        }
        // The take-over reaches us through the cluster: B owns the slots.
        if state == Some(JobState::ExportFailoverGranted) {
            let nodes: String = cmd(&mut bc, &["CLUSTER", "NODES"]);
            let owns = nodes.lines().any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f[0] == b_id.to_string()
                    && f[8..].contains(&s0.as_str())
                    && f[8..].contains(&s1.as_str())
            });
            if owns {
                for s in [slot(TAGS[0]), slot(TAGS[1])] {
                    host.topo.set_slot_owner(s, Some(b_id)).unwrap();
                }
                host.mig.handle_topology_changed(&host.topo, unix_ms());
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        host.state(),
        Some(JobState::Success),
        "{:?}",
        host.mig
            .jobs()
            .next()
            .and_then(|j| j.message().map(str::to_owned))
    );
    eprintln!("write rounds by state: {wrote:?}");
    assert!(wrote.contains_key("Some(Snapshotting)"), "{wrote:?}");
    assert!(wrote.len() > 1, "writes after the snapshot too: {wrote:?}");
    wait_until("the target's success", || {
        job_state(&mut bc).as_deref() == Some("success")
    });
    let theirs = real_keys(&mut bc);
    assert_eq!(theirs.facts(0), db.lock().unwrap().facts(0));
}

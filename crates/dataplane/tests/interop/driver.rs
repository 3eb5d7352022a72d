//! A small std driver for the Sans-IO engine: nonblocking sockets polled in one loop, the
//! clock, and real servers started as child processes. Test-only: the crate has no sockets.

use ferrocluster_dataplane::resp::{CommandReader, Item, ReaderLimits};
use ferrocluster_dataplane::{
    CommandOutcome, ConnId, Event, Millis, Output, Replication, ReplicationConfig, Reply, Restored,
    Role, SnapshotId, SnapshotTarget, StreamCommand, UpstreamId,
};
use ferrocluster_testkit::proc::Logged;
use ferrocluster_testkit::{ports, TestDir, HANG};
use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub fn unix_ms() -> Millis {
    Millis(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64,
    )
}

/// The captured vectors' directory.
pub fn vectors() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors")
}

/// A real redis-server / valkey-server child process on a port of the shared allocator
/// (`ferrocluster_testkit::ports`), its output in `server.log` of its own directory. The child
/// is killed on drop; the directory is removed when the test passes and kept (its path
/// printed) when it fails. A start that fails panics with the log's last lines and who
/// holds the port.
pub struct Server {
    /// Declared before `dir`: the child is killed before its directory goes.
    child: Logged,
    pub port: u16,
    dir: TestDir,
    bin: String,
    args: Vec<String>,
    /// `requirepass`, when set.
    password: Option<String>,
}

impl Server {
    pub fn start(bin: &str, extra: &[&str]) -> Server {
        Server::start_with(bin, extra, None)
    }

    /// A server with `requirepass <password>` (its clients here authenticate).
    pub fn start_with(bin: &str, extra: &[&str], password: Option<&str>) -> Server {
        Server::start_on(bin, ports::port(), extra, password)
    }

    /// A server on `port` (from `ports`; a cluster node's bus port is `port + BUS_OFFSET`,
    /// which the allocator keeps free too).
    pub fn start_on(bin: &str, port: u16, extra: &[&str], password: Option<&str>) -> Server {
        let dir = TestDir::new(&format!("dp-interop-{bin}-{port}"));
        let mut args: Vec<String> = [
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            dir.to_str().unwrap(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        if let Some(pw) = password {
            args.extend(["--requirepass".to_string(), pw.to_string()]);
        }
        let child = spawn(bin, &args, &dir, port);
        let mut s = Server {
            child,
            port,
            dir,
            bin: bin.to_string(),
            args,
            password: password.map(str::to_owned),
        };
        s.wait_up();
        s
    }

    /// Waits until the server listens and answers PING (not `-LOADING`). Panics, with the
    /// log's tail and who holds the port, when the child exits first or after `HANG`.
    fn wait_up(&mut self) {
        self.child.wait_listening(self.port);
        let end = Instant::now() + HANG;
        loop {
            let last = match self.conn_opt() {
                Ok(mut c) => match redis::cmd("PING").query::<String>(&mut c) {
                    Ok(_) => return,
                    Err(e) => e.to_string(),
                },
                Err(e) => e.to_string(),
            };
            if let Some(status) = self.child.exited() {
                let why = format!("exited ({status}) before it answered PING ({last})");
                panic!("{}", self.child.failure(&why, self.port));
            }
            if Instant::now() >= end {
                let why = format!("did not answer PING within {HANG:?} ({last})");
                panic!("{}", self.child.failure(&why, self.port));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A connection whose connect, reads and writes give up only after `HANG`.
    fn conn_opt(&self) -> redis::RedisResult<redis::Connection> {
        self.conn_db_opt(0)
    }

    /// A connection to database `db` (connect, reads and writes bounded by `HANG`).
    fn conn_db_opt(&self, db: u32) -> redis::RedisResult<redis::Connection> {
        let auth = self
            .password
            .as_ref()
            .map_or(String::new(), |p| format!(":{p}@"));
        let c = redis::Client::open(format!("redis://{auth}127.0.0.1:{}/{db}", self.port))?
            .get_connection_with_timeout(HANG)?;
        c.set_read_timeout(Some(HANG))?;
        c.set_write_timeout(Some(HANG))?;
        Ok(c)
    }

    pub fn conn(&self) -> redis::Connection {
        self.conn_db(0)
    }

    /// A connection to database `db`.
    pub fn conn_db(&self, db: u32) -> redis::Connection {
        self.conn_db_opt(db)
            .unwrap_or_else(|e| panic!("{}", self.child.failure(&e.to_string(), self.port)))
    }

    pub fn cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        let mut c = self.conn();
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query(&mut c).unwrap_or_else(|e| {
            panic!(
                "{}",
                self.child.failure(&format!("{args:?}: {e}"), self.port)
            )
        })
    }

    /// One field of `INFO <section>`.
    pub fn info(&self, section: &str, field: &str) -> Option<String> {
        let text: String = self.cmd(&["INFO", section]);
        text.lines().find_map(|l| {
            l.strip_prefix(&format!("{field}:"))
                .map(|v| v.trim().to_string())
        })
    }

    /// `SHUTDOWN SAVE` and start again on the same port and directory (the log goes on in
    /// the same file).
    pub fn restart_with_save(&mut self) {
        let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN").arg("SAVE").query(&mut self.conn());
        self.child.wait_exit();
        self.child = spawn(&self.bin, &self.args, &self.dir, self.port);
        self.wait_up();
    }
}

fn spawn(bin: &str, args: &[String], dir: &Path, port: u16) -> Logged {
    Logged::spawn(
        Command::new(bin).args(args),
        &dir.join("server.log"),
        &format!("{bin} on port {port}"),
    )
}

struct Client {
    stream: TcpStream,
    reader: CommandReader,
    out: Vec<u8>,
}

/// Our engine on real sockets.
pub struct Driver {
    pub repl: Replication,
    listener: Option<TcpListener>,
    pub port: u16,
    clients: BTreeMap<ConnId, Client>,
    up: Option<(UpstreamId, TcpStream, Vec<u8>)>,
    next_conn: u64,
    /// The RDB a snapshot of ours sends (a real server's file).
    pub snapshot_rdb: Vec<u8>,
    pub snapshots: Vec<SnapshotTarget>,
    /// RDB being received, and the completed ones.
    loading: Option<Vec<u8>>,
    pub loaded: Vec<Vec<u8>>,
    pub applied: Vec<StreamCommand>,
    pub events: Vec<Event>,
    pub waits: Vec<(ConnId, Reply)>,
    /// Every byte our primary side sent to replicas.
    pub sent: Vec<u8>,
    /// Every byte our replica side received.
    pub received: Vec<u8>,
}

impl Driver {
    pub fn new(
        cfg: ReplicationConfig,
        role: Role,
        restored: Option<Restored>,
        listen: bool,
    ) -> Driver {
        let (listener, port) = if listen {
            // Port 0, the kernel's pick: the listener stays open for the Driver's whole life.
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.set_nonblocking(true).unwrap();
            let port = l.local_addr().unwrap().port();
            (Some(l), port)
        } else {
            (None, cfg.listening_port)
        };
        Driver {
            repl: Replication::new(cfg, 42, role, restored, unix_ms()).unwrap(),
            listener,
            port,
            clients: BTreeMap::new(),
            up: None,
            next_conn: 1,
            snapshot_rdb: Vec::new(),
            snapshots: Vec::new(),
            loading: None,
            loaded: Vec::new(),
            applied: Vec::new(),
            events: Vec::new(),
            waits: Vec::new(),
            sent: Vec::new(),
            received: Vec::new(),
        }
    }

    fn act(&mut self, o: Output) {
        let now = unix_ms();
        match o {
            Output::ToReplica { conn, bytes } => {
                self.sent.extend_from_slice(&bytes);
                if let Some(c) = self.clients.get_mut(&conn) {
                    c.out.extend_from_slice(&bytes);
                }
            }
            Output::CloseReplica { conn, .. } => {
                self.clients.remove(&conn);
            }
            Output::StartSnapshot { id, target, .. } => {
                self.snapshots.push(target);
                self.produce(id, target);
            }
            Output::Connect { link, host, port } => match TcpStream::connect((host.as_str(), port))
            {
                Ok(s) => {
                    s.set_nonblocking(true).unwrap();
                    s.set_nodelay(true).unwrap();
                    self.up = Some((link, s, Vec::new()));
                    self.repl.handle_upstream_connected(link, now);
                }
                Err(_) => self.repl.handle_upstream_connect_failed(link, now),
            },
            Output::ToPrimary { link, bytes } => {
                if let Some((l, _, out)) = self.up.as_mut() {
                    if *l == link {
                        out.extend_from_slice(&bytes);
                    }
                }
            }
            Output::CloseUpstream { link } => {
                if self.up.as_ref().is_some_and(|(l, _, _)| *l == link) {
                    self.up = None;
                }
            }
            Output::RdbBegin { .. } => self.loading = Some(Vec::new()),
            Output::RdbChunk(b) => self.loading.as_mut().expect("RdbBegin first").extend(b),
            Output::RdbAbort => self.loading = None,
            Output::RdbEnd => {
                let b = self.loading.take().expect("RdbBegin first");
                self.loaded.push(b);
            }
            Output::Apply(c) => self.applied.push(c),
            Output::ApplyTransaction(cs) => self.applied.extend(cs),
            Output::WaitDone { client, reply } => self.waits.push((client, reply)),
            Output::Event(e) => self.events.push(e),
        }
    }

    fn produce(&mut self, id: SnapshotId, target: SnapshotTarget) {
        let now = unix_ms();
        let rdb = self.snapshot_rdb.clone();
        if target == SnapshotTarget::Disk {
            self.repl
                .handle_snapshot_ready(id, rdb.len() as u64, now)
                .unwrap();
        }
        for chunk in rdb.chunks(100) {
            self.repl.handle_snapshot_chunk(id, chunk, now).unwrap();
        }
        self.repl.handle_snapshot_end(id, now).unwrap();
    }

    pub fn drain(&mut self) {
        while let Some(o) = self.repl.poll_output() {
            self.act(o);
        }
    }

    /// One round: accept, read, timers, outputs, writes.
    pub fn step(&mut self) {
        let now = unix_ms();
        if let Some(l) = &self.listener {
            while let Ok((s, _)) = l.accept() {
                s.set_nonblocking(true).unwrap();
                s.set_nodelay(true).unwrap();
                let id = ConnId(self.next_conn);
                self.next_conn += 1;
                self.clients.insert(
                    id,
                    Client {
                        stream: s,
                        reader: CommandReader::new(ReaderLimits::default()),
                        out: Vec::new(),
                    },
                );
            }
        }
        // Client connections (real replicas of our primary).
        let ids: Vec<ConnId> = self.clients.keys().copied().collect();
        for id in ids {
            let mut buf = [0u8; 65536];
            let mut closed = false;
            let mut cmds = Vec::new();
            {
                let c = self.clients.get_mut(&id).unwrap();
                loop {
                    match c.stream.read(&mut buf) {
                        Ok(0) => {
                            closed = true;
                            break;
                        }
                        Ok(n) => c.reader.push(&buf[..n]),
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(_) => {
                            closed = true;
                            break;
                        }
                    }
                }
                while let Ok(Some(item)) = c.reader.next_item() {
                    match item {
                        Item::Command(cmd) => cmds.push(cmd.argv),
                        Item::Empty(_) => cmds.push(Vec::new()),
                    }
                }
            }
            for argv in cmds {
                if argv.is_empty() {
                    self.repl.handle_replica_newline(id, now);
                    continue;
                }
                let reply = match argv[0].to_ascii_uppercase().as_slice() {
                    b"PING" => Some(Reply::Simple("PONG".into())),
                    b"AUTH" => Some(Reply::ok()),
                    _ => match self.repl.handle_command(
                        id,
                        Some("127.0.0.1".parse().unwrap()),
                        &argv,
                        now,
                    ) {
                        Ok(CommandOutcome::Reply(r)) => Some(r),
                        Ok(CommandOutcome::NoReply) => None,
                        Err(e) => Some(e.to_reply()),
                    },
                };
                if let Some(r) = reply {
                    if let Some(c) = self.clients.get_mut(&id) {
                        c.out.extend(r.to_resp2());
                    }
                }
                self.drain();
            }
            if closed {
                self.clients.remove(&id);
                self.repl.handle_conn_closed(id, now);
            }
        }
        // The upstream link (our replica of a real primary).
        if let Some((link, s, _)) = self.up.as_mut() {
            let link = *link;
            let mut buf = [0u8; 65536];
            let mut got = Vec::new();
            let mut closed = false;
            loop {
                match s.read(&mut buf) {
                    Ok(0) => {
                        closed = true;
                        break;
                    }
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(_) => {
                        closed = true;
                        break;
                    }
                }
            }
            if !got.is_empty() {
                self.received.extend_from_slice(&got);
                self.repl
                    .handle_upstream_bytes(link, &got, now)
                    .unwrap_or_else(|e| panic!("the real primary's bytes are the protocol: {e}"));
            }
            if closed {
                self.up = None;
                self.repl.handle_upstream_closed(link, now);
            }
        }
        if self.repl.poll_timeout().is_some_and(|t| t <= now) {
            self.repl.handle_timeout(now);
        }
        self.drain();
        // Writes.
        for c in self.clients.values_mut() {
            flush(&mut c.stream, &mut c.out);
        }
        if let Some((_, s, out)) = self.up.as_mut() {
            flush(s, out);
        }
    }

    /// Steps until `cond` holds; panics after `HANG` (a bound on a hang, never a measure of
    /// speed).
    pub fn run_until(&mut self, what: &str, mut cond: impl FnMut(&mut Driver) -> bool) {
        let end = Instant::now() + HANG;
        loop {
            self.step();
            if cond(self) {
                return;
            }
            if Instant::now() >= end {
                panic!(
                    "still waiting after {HANG:?} (a hang) for: {what}; events {:?}",
                    self.events
                );
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Closes every replica connection (as if the network dropped them).
    pub fn drop_replicas(&mut self) {
        let now = unix_ms();
        let ids: Vec<ConnId> = self.clients.keys().copied().collect();
        for id in ids {
            self.clients.remove(&id);
            self.repl.handle_conn_closed(id, now);
        }
    }

    pub fn link_up(&self) -> bool {
        matches!(
            self.repl.replication_state().link,
            ferrocluster_dataplane::ReplLink::Up { .. }
        )
    }

    pub fn count(&self, f: impl Fn(&Event) -> bool) -> usize {
        self.events.iter().filter(|e| f(e)).count()
    }
}

fn flush(s: &mut TcpStream, out: &mut Vec<u8>) {
    while !out.is_empty() {
        match s.write(out) {
            Ok(0) => return,
            Ok(n) => {
                out.drain(..n);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(_) => return,
        }
    }
}

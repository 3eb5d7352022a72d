//! An in-memory cluster of hosts running our `Replication` (primaries and replicas), with
//! byte links that deliver in seeded random chunks. The hosts keep a tiny key-value data set;
//! their snapshots are that data set serialized (the engine treats RDB bytes as opaque).

use ferrocluster_dataplane::resp::{CommandReader, Item, ReaderLimits};
use ferrocluster_dataplane::{
    CommandOutcome, ConnId, Event, Millis, Output, Replication, ReplicationConfig, Reply, Restored,
    Role, SnapshotId, SnapshotTarget, StreamCommand, UpstreamId,
};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use std::collections::{BTreeMap, VecDeque};

pub type Data = BTreeMap<(u32, Vec<u8>), Vec<u8>>;

pub struct Host {
    pub repl: Replication,
    pub port: u16,
    pub data: Data,
    loading: Option<Vec<u8>>,
    /// Snapshot being streamed: id, target, bytes, sent so far, length announced.
    snapshot: Option<(SnapshotId, SnapshotTarget, Vec<u8>, usize, bool)>,
    pub events: Vec<Event>,
    pub outputs: Vec<String>,
    pub waits: Vec<(ConnId, Reply)>,
    /// Inbound client connections (replicas of this host): their RESP reader.
    conns: BTreeMap<ConnId, CommandReader>,
    /// Whether the last write offset of the writing client.
    pub woff: u64,
    pub snapshots_started: usize,
    /// A down host neither acts nor is reachable (a crashed process).
    pub down: bool,
    /// Snapshots are not streamed while set (a slow BGSAVE).
    pub hold_snapshots: bool,
    /// Every byte sent to replicas.
    pub sent: Vec<u8>,
}

pub struct Link {
    /// Replica host index and its upstream link id.
    replica: usize,
    up: UpstreamId,
    /// Primary host index and the connection id there.
    primary: usize,
    conn: ConnId,
    to_primary: VecDeque<u8>,
    to_replica: VecDeque<u8>,
    /// A cut link delivers nothing (but stays open): for timeouts.
    pub cut: bool,
}

pub struct Net {
    pub hosts: Vec<Host>,
    pub links: Vec<Link>,
    pub now: Millis,
    rng: ChaCha8Rng,
    next_conn: u64,
    pub max_chunk: usize,
}

pub fn serialize(d: &Data) -> Vec<u8> {
    let mut v = b"SNAP".to_vec();
    for ((db, k), val) in d {
        v.extend_from_slice(&db.to_le_bytes());
        v.extend_from_slice(&(k.len() as u32).to_le_bytes());
        v.extend_from_slice(k);
        v.extend_from_slice(&(val.len() as u32).to_le_bytes());
        v.extend_from_slice(val);
    }
    v
}

fn deserialize(b: &[u8]) -> Data {
    assert_eq!(&b[..4], b"SNAP", "RDB bytes arrived intact");
    let mut d = Data::new();
    let mut i = 4;
    let u32at = |i: &mut usize| {
        let v = u32::from_le_bytes(b[*i..*i + 4].try_into().unwrap());
        *i += 4;
        v
    };
    while i < b.len() {
        let db = u32at(&mut i);
        let kl = u32at(&mut i) as usize;
        let k = b[i..i + kl].to_vec();
        i += kl;
        let vl = u32at(&mut i) as usize;
        let v = b[i..i + vl].to_vec();
        i += vl;
        d.insert((db, k), v);
    }
    d
}

fn apply(d: &mut Data, c: &StreamCommand) {
    let name = c.argv[0].to_ascii_uppercase();
    match name.as_slice() {
        b"SET" => {
            d.insert((c.db, c.argv[1].clone()), c.argv[2].clone());
        }
        b"DEL" => {
            d.remove(&(c.db, c.argv[1].clone()));
        }
        other => panic!("unexpected command {:?}", String::from_utf8_lossy(other)),
    }
}

impl Net {
    pub fn new(seed: u64, max_chunk: usize) -> Net {
        Net {
            hosts: Vec::new(),
            links: Vec::new(),
            now: Millis(1_000_000),
            rng: ChaCha8Rng::seed_from_u64(seed),
            next_conn: 1,
            max_chunk,
        }
    }

    fn pick(&mut self) -> usize {
        1 + self.rng.next_u32() as usize % self.max_chunk
    }

    pub fn cfg(port: u16) -> ReplicationConfig {
        ReplicationConfig {
            listening_port: port,
            diskless_sync_delay_ms: 0,
            ..ReplicationConfig::default()
        }
    }

    pub fn add(&mut self, cfg: ReplicationConfig, role: Role, restored: Option<Restored>) -> usize {
        let port = cfg.listening_port;
        let seed = 100 + self.hosts.len() as u64;
        let repl = Replication::new(cfg, seed, role, restored, self.now).unwrap();
        self.hosts.push(Host {
            repl,
            port,
            data: Data::new(),
            loading: None,
            snapshot: None,
            events: Vec::new(),
            outputs: Vec::new(),
            waits: Vec::new(),
            conns: BTreeMap::new(),
            woff: 0,
            snapshots_started: 0,
            down: false,
            hold_snapshots: false,
            sent: Vec::new(),
        });
        self.hosts.len() - 1
    }

    pub fn write(&mut self, h: usize, db: u32, key: &str, val: &str) {
        let now = self.now;
        let host = &mut self.hosts[h];
        host.data
            .insert((db, key.as_bytes().to_vec()), val.as_bytes().to_vec());
        host.woff = host.repl.feed(db, &["SET", key, val], now).unwrap();
    }

    fn by_port(&self, port: u16) -> Option<usize> {
        self.hosts.iter().position(|h| h.port == port && !h.down)
    }

    /// Drains every host's outputs, acting on them.
    fn drain(&mut self) {
        for h in 0..self.hosts.len() {
            if self.hosts[h].down {
                continue;
            }
            while let Some(o) = self.hosts[h].repl.poll_output() {
                self.hosts[h]
                    .outputs
                    .push(format!("{o:?}").chars().take(120).collect());
                self.act(h, o);
            }
        }
    }

    fn act(&mut self, h: usize, o: Output) {
        let now = self.now;
        match o {
            Output::ToReplica { conn, bytes } => {
                self.hosts[h].sent.extend_from_slice(&bytes);
                if let Some(l) = self
                    .links
                    .iter_mut()
                    .find(|l| l.primary == h && l.conn == conn)
                {
                    l.to_replica.extend(bytes);
                }
            }
            Output::CloseReplica { conn, .. } => {
                if let Some(i) = self
                    .links
                    .iter()
                    .position(|l| l.primary == h && l.conn == conn)
                {
                    let l = self.links.remove(i);
                    self.hosts[h].conns.remove(&conn);
                    self.hosts[l.replica].repl.handle_upstream_closed(l.up, now);
                }
            }
            Output::StartSnapshot { id, target, .. } => {
                let host = &mut self.hosts[h];
                host.snapshots_started += 1;
                host.snapshot = Some((id, target, serialize(&host.data), 0, false));
            }
            Output::Connect { link, port, .. } => match self.by_port(port) {
                Some(p) => {
                    let conn = ConnId(self.next_conn);
                    self.next_conn += 1;
                    self.hosts[p]
                        .conns
                        .insert(conn, CommandReader::new(ReaderLimits::default()));
                    self.links.push(Link {
                        replica: h,
                        up: link,
                        primary: p,
                        conn,
                        to_primary: VecDeque::new(),
                        to_replica: VecDeque::new(),
                        cut: false,
                    });
                    self.hosts[h].repl.handle_upstream_connected(link, now);
                }
                None => self.hosts[h].repl.handle_upstream_connect_failed(link, now),
            },
            Output::ToPrimary { link, bytes } => {
                if let Some(l) = self
                    .links
                    .iter_mut()
                    .find(|l| l.replica == h && l.up == link)
                {
                    l.to_primary.extend(bytes);
                }
            }
            Output::CloseUpstream { link } => {
                if let Some(i) = self
                    .links
                    .iter()
                    .position(|l| l.replica == h && l.up == link)
                {
                    let l = self.links.remove(i);
                    self.hosts[l.primary].conns.remove(&l.conn);
                    self.hosts[l.primary].repl.handle_conn_closed(l.conn, now);
                }
            }
            Output::RdbBegin { .. } => self.hosts[h].loading = Some(Vec::new()),
            Output::RdbChunk(b) => self.hosts[h].loading.as_mut().unwrap().extend(b),
            Output::RdbAbort => self.hosts[h].loading = None,
            Output::RdbEnd => {
                let b = self.hosts[h].loading.take().unwrap();
                self.hosts[h].data = deserialize(&b);
            }
            Output::Apply(c) => apply(&mut self.hosts[h].data, &c),
            Output::ApplyTransaction(cs) => {
                for c in &cs {
                    apply(&mut self.hosts[h].data, c);
                }
            }
            Output::WaitDone { client, reply } => self.hosts[h].waits.push((client, reply)),
            Output::Event(e) => self.hosts[h].events.push(e),
        }
    }

    /// Moves some bytes on every link, feeds snapshot chunks, and drains.
    fn deliver(&mut self) -> bool {
        let mut moved = false;
        let now = self.now;
        // Snapshots: one chunk per step.
        for h in 0..self.hosts.len() {
            let chunk = self.pick();
            let host = &mut self.hosts[h];
            if host.down || host.hold_snapshots {
                continue;
            }
            if let Some((id, target, bytes, sent, announced)) = host.snapshot.as_mut() {
                let (id, target) = (*id, *target);
                if target == SnapshotTarget::Disk && !*announced {
                    *announced = true;
                    host.repl
                        .handle_snapshot_ready(id, bytes.len() as u64, now)
                        .unwrap();
                } else if *sent < bytes.len() {
                    let end = (*sent + chunk).min(bytes.len());
                    let part = bytes[*sent..end].to_vec();
                    *sent = end;
                    host.repl.handle_snapshot_chunk(id, &part, now).unwrap();
                } else {
                    host.snapshot = None;
                    host.repl.handle_snapshot_end(id, now).unwrap();
                }
                moved = true;
            }
        }
        self.drain();
        for i in 0..self.links.len() {
            if i >= self.links.len() || self.links[i].cut {
                continue;
            }
            let (n, m) = (self.pick(), self.pick());
            let l = &mut self.links[i];
            let to_p: Vec<u8> = l.to_primary.drain(..n.min(l.to_primary.len())).collect();
            let n = m;
            let to_r: Vec<u8> = l.to_replica.drain(..n.min(l.to_replica.len())).collect();
            let (p, conn, r, up) = (l.primary, l.conn, l.replica, l.up);
            if !to_r.is_empty() {
                moved = true;
                let _ = self.hosts[r].repl.handle_upstream_bytes(up, &to_r, now);
            }
            if !to_p.is_empty() {
                moved = true;
                self.primary_input(p, conn, &to_p);
            }
            self.drain();
        }
        moved
    }

    /// The primary host's command dispatch for one client connection.
    fn primary_input(&mut self, p: usize, conn: ConnId, bytes: &[u8]) {
        let now = self.now;
        let Some(reader) = self.hosts[p].conns.get_mut(&conn) else {
            return;
        };
        reader.push(bytes);
        let mut cmds = Vec::new();
        while let Ok(Some(item)) = reader.next_item() {
            if let Item::Command(c) = item {
                cmds.push(c.argv);
            }
        }
        for argv in cmds {
            let name = argv[0].to_ascii_uppercase();
            let reply = match name.as_slice() {
                b"PING" => Some(Reply::Simple("PONG".into())),
                b"AUTH" => Some(Reply::ok()),
                _ => match self.hosts[p].repl.handle_command(conn, None, &argv, now) {
                    Ok(CommandOutcome::Reply(r)) => Some(r),
                    Ok(CommandOutcome::NoReply) => None,
                    Err(e) => Some(e.to_reply()),
                },
            };
            if let Some(r) = reply {
                if let Some(l) = self
                    .links
                    .iter_mut()
                    .find(|l| l.primary == p && l.conn == conn)
                {
                    l.to_replica.extend(r.to_resp2());
                }
            }
            self.drain();
        }
    }

    /// Runs 3 s of simulated time (every 1 s cron fires: reconnects, ACKs, keep-alives) in
    /// steps of `step_ms`.
    pub fn settle(&mut self, step_ms: u64) {
        self.run_for(3_000, step_ms);
    }

    pub fn tick(&mut self, ms: u64) {
        self.now = self.now.saturating_add_ms(ms);
        let now = self.now;
        for h in self.hosts.iter_mut().filter(|h| !h.down) {
            if h.repl.poll_timeout().is_some_and(|t| t <= now) {
                h.repl.handle_timeout(now);
            }
        }
        self.drain();
    }

    /// Runs for `ms` of simulated time in steps of `step` ms.
    pub fn run_for(&mut self, ms: u64, step: u64) {
        let end = self.now.saturating_add_ms(ms);
        while self.now < end {
            while self.deliver() {}
            self.tick(step);
        }
        while self.deliver() {}
    }

    /// Closes every link of replica host `r` (as the network would).
    pub fn kill_links_of(&mut self, r: usize) {
        let now = self.now;
        while let Some(i) = self.links.iter().position(|l| l.replica == r) {
            let l = self.links.remove(i);
            self.hosts[l.primary].conns.remove(&l.conn);
            self.hosts[l.primary].repl.handle_conn_closed(l.conn, now);
            self.hosts[r].repl.handle_upstream_closed(l.up, now);
        }
        self.drain();
    }

    pub fn cut_links_of(&mut self, r: usize, cut: bool) {
        for l in self.links.iter_mut().filter(|l| l.replica == r) {
            l.cut = cut;
        }
    }

    pub fn count_events(&self, h: usize, f: impl Fn(&Event) -> bool) -> usize {
        self.hosts[h].events.iter().filter(|e| f(e)).count()
    }
}

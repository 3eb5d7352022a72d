//! `ferrocluster-minimal-host --port N --dir DIR`: the smallest complete cluster node on
//! `ferrocluster-host`. The keyspace is a `HashMap` (GET, SET, DEL, routed with MOVED / ASK /
//! CROSSSLOT / CLUSTERDOWN); the CLUSTER commands, gossip and failure detection are the
//! engine's; the bus (port N + 10000), nodes.conf (in DIR) and the drive loop are the kit's.
//! Clients are served by one thread each, RESP2 through the `redis-protocol` crate.
//!
//! What a host does, in order: open nodes.conf (locked), build the node from what it holds
//! and save it at once, bind the bus, run the drive loop on a thread, then serve clients.
#![allow(clippy::disallowed_methods)] // a host: threads and sockets are its job
#![forbid(unsafe_code)]

use ferrocluster_host::{clock, BindAddr, BusDriver, DriveLoop, Host, NodesConfFile, Waker};
use ferrocluster_node::{
    key_hash_slot, Capabilities, ClientState, ClusterConfig, ClusterNode, CommandOutcome,
    CommandRequest, Dispatch, ErrorReply, Millis, Output, Reply, RequestId, Slot, SlotKeys,
};
use redis_protocol::resp2::{decode::decode, types::OwnedFrame};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard};

type Kv = HashMap<Vec<u8>, Vec<u8>>;

/// The node and the keys, each under its lock (taken in this order), and where the replies
/// that wait for their nodes.conf write go (by connection).
struct Shared {
    node: Mutex<ClusterNode>,
    kv: Mutex<Kv>,
    replies: Mutex<HashMap<RequestId, Sender<Reply>>>,
    /// Wakes the drive loop after a client command gave the node an input.
    waker: std::sync::OnceLock<Arc<Waker>>,
}

impl Shared {
    fn node(&self) -> MutexGuard<'_, ClusterNode> {
        self.node.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn kv(&self) -> MutexGuard<'_, Kv> {
        self.kv.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn wake(&self) {
        if let Some(w) = self.waker.get() {
            let _ = w.wake();
        }
    }
}

/// The keyspace as the CLUSTER executor reads it (COUNTKEYSINSLOT, GETKEYSINSLOT, ...).
struct Keys<'a>(&'a Kv);

impl SlotKeys for Keys<'_> {
    fn count_keys_in_slot(&self, _db: usize, slot: Slot) -> u64 {
        self.0.keys().filter(|k| key_hash_slot(k) == slot).count() as u64
    }
    fn keys_in_slot(&self, _db: usize, slot: Slot, count: usize) -> Vec<Vec<u8>> {
        let keys = self.0.keys().filter(|k| key_hash_slot(k) == slot);
        keys.take(count).cloned().collect()
    }
    fn db_size(&self, _db: usize) -> u64 {
        self.0.len() as u64
    }
}

/// The drive loop's view of this host.
struct Loop(Arc<Shared>);

impl Host for Loop {
    type Guard<'a> = MutexGuard<'a, ClusterNode>;
    fn lock(&self) -> Self::Guard<'_> {
        self.0.node()
    }
    fn act<'a>(&'a self, node: Self::Guard<'a>, out: Output, _now: Millis) -> Self::Guard<'a> {
        match out {
            // A CLUSTER command's reply, now that its change is on disk.
            Output::Reply { to, reply } => {
                if let Some(tx) = self.0.replies.lock().unwrap().get(&to) {
                    let _ = tx.send(reply);
                }
            }
            // Slots another node took: their keys go (Valkey's dirty slots).
            Output::DeleteSlotKeys(slots) => {
                self.0.kv().retain(|k, _| !slots.contains(key_hash_slot(k)));
            }
            Output::ClusterReset { was_replica, .. } if was_replica => self.0.kv().clear(),
            Output::Notice(n) => eprintln!("cluster: {n:?}"),
            // Bus outputs and Persist are the loop's; this host declares no replication, no
            // slot migration data plane, no modules; PUBLISH is not served.
            _ => {}
        }
        node
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| {
        let i = args.iter().position(|a| a == name);
        i.and_then(|i| args.get(i + 1)).cloned().unwrap_or_else(|| {
            eprintln!("usage: ferrocluster-minimal-host --port N --dir DIR");
            std::process::exit(1)
        })
    };
    let port: u16 = flag("--port").parse().expect("--port: a port number");
    let dir = std::path::PathBuf::from(flag("--dir"));
    if let Err(e) = run(port, &dir) {
        eprintln!("ferrocluster-minimal-host: {e}");
        std::process::exit(1);
    }
}

fn run(port: u16, dir: &std::path::Path) -> Result<(), String> {
    let conf = NodesConfFile::open(&dir.join("nodes.conf")).map_err(|e| e.to_string())?;
    let now = clock::now();
    let seed = now.0 ^ (u64::from(std::process::id()) << 32);
    let config = ClusterConfig {
        port,
        ..ClusterConfig::default()
    };
    let bus_port = config.bus_port();
    let caps = Capabilities {
        replication: false,
        slot_migration: false,
        databases: 1,
    };
    let node =
        ClusterNode::new(config, caps, now, seed, conf.saved()).map_err(|e| e.to_string())?;
    let lo = [BindAddr::required("127.0.0.1")];
    let bus = BusDriver::bind(&lo, bus_port)?;
    let shared = Arc::new(Shared {
        node: Mutex::new(node),
        kv: Mutex::new(HashMap::new()),
        replies: Mutex::new(HashMap::new()),
        waker: std::sync::OnceLock::new(),
    });
    let mut drive = DriveLoop::new(bus, Arc::new(conf), Loop(Arc::clone(&shared)));
    let _ = shared.waker.set(drive.waker());
    // The first turn writes the node's start-up nodes.conf (a new node's ID survives a crash
    // right after the start) before any client is served.
    drive.turn().map_err(|e| e.to_string())?;
    std::thread::spawn(move || drive.run());
    let listener = ferrocluster_host::listen::listen_all(&lo, port)?.remove(0);
    for (n, conn) in listener.incoming().flatten().enumerate() {
        let shared = Arc::clone(&shared);
        let (tx, rx) = channel();
        let id = RequestId(n as u64);
        shared.replies.lock().unwrap().insert(id, tx);
        std::thread::spawn(move || {
            serve(&shared, conn, id, &rx);
            shared.replies.lock().unwrap().remove(&id);
        });
    }
    Ok(())
}

/// One client connection: read requests, answer each in order (a deferred reply arrives on
/// `replies` from the drive loop).
fn serve(shared: &Shared, mut conn: TcpStream, id: RequestId, replies: &Receiver<Reply>) {
    let mut client = ClientState::new(false, false);
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let n = match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        let mut out = Vec::new();
        loop {
            let (frame, used) = match decode(&buf) {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => {
                    let _ = conn.write_all(format!("-ERR Protocol error: {e}\r\n").as_bytes());
                    return;
                }
            };
            buf.drain(..used);
            let argv: Vec<Vec<u8>> = match frame {
                OwnedFrame::Array(items) => items
                    .into_iter()
                    .filter_map(|f| match f {
                        OwnedFrame::BulkString(b) | OwnedFrame::SimpleString(b) => Some(b),
                        _ => None,
                    })
                    .collect(),
                _ => continue,
            };
            if argv.is_empty() {
                continue;
            }
            execute(shared, &mut client, &argv, id, replies).encode_resp2(&mut out);
        }
        if conn.write_all(&out).is_err() {
            return;
        }
    }
}

fn execute(
    shared: &Shared,
    client: &mut ClientState,
    argv: &[Vec<u8>],
    id: RequestId,
    replies: &Receiver<Reply>,
) -> Reply {
    let name = String::from_utf8_lossy(&argv[0]).to_ascii_uppercase();
    let now = clock::now();
    let mut node = shared.node();
    let kv = &mut *shared.kv();
    match name.as_str() {
        "PING" => return Reply::Simple("PONG".into()),
        "INFO" => return info(kv),
        "CLUSTER" => {
            let req = CommandRequest::from_client(client, id);
            let outcome = node.cluster_command_argv(argv, &req, &Keys(kv), now);
            drop(node);
            shared.wake();
            return match outcome {
                CommandOutcome::Reply(r) => r,
                // The change must reach nodes.conf first: the loop sends the reply after it.
                CommandOutcome::Deferred => replies.recv().unwrap_or(Reply::Null),
                // Without replicas (no replication declared) SETSLOT never asks this.
                CommandOutcome::ReplicateFirst { .. } | CommandOutcome::NoReply => Reply::Null,
            };
        }
        _ => {}
    }
    let keys = |_db: usize, key: &[u8]| kv.contains_key(key);
    match node.dispatch_client_command(client, argv, &keys) {
        Dispatch::Execute { spec, .. } => data_command(spec.name, argv, kv),
        Dispatch::Ok => Reply::ok(),
        Dispatch::Queued => Reply::Simple("QUEUED".into()),
        Dispatch::Exec(queued) => Reply::Array(
            queued
                .iter()
                .map(|q| data_command(q.spec().name, q.argv(), kv))
                .collect(),
        ),
        Dispatch::Reject(e) => Reply::Error(String::from_utf8_lossy(&e.text()).into_owned()),
    }
}

/// GET, SET and DEL on the keyspace (routing already put the keys here).
fn data_command<A: AsRef<[u8]>>(name: &str, argv: &[A], kv: &mut Kv) -> Reply {
    let arg = |i: usize| argv[i].as_ref().to_vec();
    match name {
        "get" => kv
            .get(&arg(1))
            .map_or(Reply::Null, |v| Reply::Bulk(v.clone())),
        "set" if argv.len() == 3 => {
            kv.insert(arg(1), arg(2));
            Reply::ok()
        }
        "del" => Reply::uint(
            (1..argv.len())
                .filter(|i| kv.remove(&arg(*i)).is_some())
                .count() as u64,
        ),
        _ => Reply::Error(format!("ERR unknown command '{name}'")),
    }
}

/// What `redis-cli --cluster` reads of INFO: cluster mode on, the keyspace.
fn info(kv: &Kv) -> Reply {
    let mut text = String::from("# Server\r\nredis_version:7.0.0\r\n");
    text.push_str("# Cluster\r\ncluster_enabled:1\r\n# Keyspace\r\n");
    if !kv.is_empty() {
        text.push_str(&format!("db0:keys={},expires=0,avg_ttl=0\r\n", kv.len()));
    }
    Reply::Verbatim(text)
}

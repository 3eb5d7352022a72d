//! The drive loop over real sockets and files (run inside a network namespace).
#![allow(clippy::disallowed_methods)]

mod common;
use common::meet;

use ferrocluster_host::{clock, BindAddr, BusDriver, DriveLoop, Host, NodesConfFile};
use ferrocluster_node::{Capabilities, ClusterConfig, ClusterNode, Millis, Output};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

struct Shared {
    node: Mutex<ClusterNode>,
    acted: Mutex<Vec<String>>,
}

#[derive(Clone)]
struct TestHost(Arc<Shared>);

impl Host for TestHost {
    type Guard<'a> = MutexGuard<'a, ClusterNode>;
    fn lock(&self) -> MutexGuard<'_, ClusterNode> {
        self.0.node.lock().unwrap()
    }
    fn act<'a>(&'a self, g: Self::Guard<'a>, out: Output, _now: Millis) -> Self::Guard<'a> {
        self.0.acted.lock().unwrap().push(format!("{out:?}"));
        g
    }
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fc-host-drive-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

type Started = (
    TestHost,
    u16,
    Arc<ferrocluster_host::Waker>,
    Arc<NodesConfFile>,
);

fn start(dir: &std::path::Path, seed: u64) -> Started {
    let bus = BusDriver::bind(&[BindAddr::required("127.0.0.1")], 0).unwrap();
    let port = bus.local_addrs()[0].port();
    let conf = Arc::new(NodesConfFile::open(&dir.join("nodes.conf")).unwrap());
    let cfg = ClusterConfig {
        port,
        cluster_port: port,
        node_timeout_ms: 500,
        ..ClusterConfig::default()
    };
    let node = ClusterNode::new(
        cfg,
        Capabilities::default(),
        clock::now(),
        seed,
        conf.saved(),
    )
    .unwrap();
    let host = TestHost(Arc::new(Shared {
        node: Mutex::new(node),
        acted: Mutex::new(Vec::new()),
    }));
    let lp = DriveLoop::new(bus, Arc::clone(&conf), host.clone());
    let waker = lp.waker();
    std::thread::spawn(move || lp.run());
    (host, port, waker, conf)
}

#[test]
fn two_loops_meet_and_persist_what_they_learned() {
    let (da, db) = (tmpdir("a"), tmpdir("b"));
    let (a, _pa, wake_a, _) = start(&da, 1);
    let (b, pb, _wake_b, _) = start(&db, 2);
    let b_id = *b.0.node.lock().unwrap().myself_id();
    meet(&mut a.lock(), pb, clock::now());
    // A command from another thread: wake the loop so it acts on the outputs now.
    wake_a.wake().unwrap();
    for _ in 0..200 {
        std::thread::sleep(Duration::from_millis(25));
        let conf_a = std::fs::read_to_string(da.join("nodes.conf")).unwrap_or_default();
        let a_id = *a.0.node.lock().unwrap().myself_id();
        let conf_b = std::fs::read_to_string(db.join("nodes.conf")).unwrap_or_default();
        if conf_a.contains(&b_id.to_string()) && conf_b.contains(&a_id.to_string()) {
            // Both learned the other and the loop wrote it to disk.
            assert_eq!(a.0.node.lock().unwrap().topology().len(), 2);
            return;
        }
    }
    panic!(
        "no meeting:\n{}\n{}",
        a.0.node.lock().unwrap().cluster_nodes(),
        b.0.node.lock().unwrap().cluster_nodes()
    );
}

#[test]
fn timers_fire_under_steady_wakeups() {
    let d = tmpdir("starve");
    let (a, _pa, wake, _) = start(&d, 3);
    // A MEET to a port nothing listens on: the handshake node is deleted after the handshake
    // timeout (max(node timeout, 1 s)), by handle_timeout only.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = free.local_addr().unwrap().port();
    drop(free);
    meet(&mut a.lock(), dead, clock::now());
    assert_eq!(a.0.node.lock().unwrap().topology().len(), 2);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spam = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = wake.wake();
            }
        })
    };
    let mut gone = false;
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(50));
        if a.0.node.lock().unwrap().topology().len() == 1 {
            gone = true;
            break;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    spam.join().unwrap();
    assert!(gone, "the handshake never timed out under steady input");
}

#[test]
fn config_changes_of_one_turn_are_written_once_and_every_reply_follows_the_write() {
    let d = tmpdir("coalesce");
    let (a, _pa, wake, conf) = start(&d, 4);
    // The start-up save.
    for _ in 0..200 {
        if conf.writes() == 1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(conf.writes(), 1);
    // Three CLUSTER commands from client threads before the loop's next turn (the lock is
    // held throughout): each reply waits for its persist.
    {
        let mut n = a.lock();
        let now = clock::now();
        for (i, slot) in ["10", "11", "12"].iter().enumerate() {
            let req = ferrocluster_node::CommandRequest {
                id: ferrocluster_node::RequestId(100 + i as u64),
                ..ferrocluster_node::CommandRequest::default()
            };
            let out = n.cluster_command_argv(
                &["CLUSTER", "ADDSLOTS", slot],
                &req,
                &ferrocluster_node::EmptyKeyspace,
                now,
            );
            assert_eq!(out, ferrocluster_node::CommandOutcome::Deferred);
        }
    }
    wake.wake().unwrap();
    let replies = |a: &TestHost| {
        a.0.acted
            .lock()
            .unwrap()
            .iter()
            .filter(|o| o.starts_with("Reply"))
            .count()
    };
    for _ in 0..200 {
        if replies(&a) == 3 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(replies(&a), 3, "{:?}", a.0.acted.lock().unwrap());
    // One write covered the three, and it holds all three slots.
    assert_eq!(conf.writes(), 2);
    let saved = std::fs::read_to_string(d.join("nodes.conf")).unwrap();
    let me = saved.lines().find(|l| l.contains("myself")).unwrap();
    assert!(me.ends_with(" 10-12"), "{me}");
}

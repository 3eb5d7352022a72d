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

fn start(dir: &std::path::Path, seed: u64) -> (TestHost, u16, Arc<ferrocluster_host::Waker>) {
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
    let lp = DriveLoop::new(bus, conf, host.clone());
    let waker = lp.waker();
    std::thread::spawn(move || lp.run());
    (host, port, waker)
}

#[test]
fn two_loops_meet_and_persist_what_they_learned() {
    let (da, db) = (tmpdir("a"), tmpdir("b"));
    let (a, _pa, wake_a) = start(&da, 1);
    let (b, pb, _wake_b) = start(&db, 2);
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
    let (a, _pa, wake) = start(&d, 3);
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

//! The drive loop over real sockets and files. Each loop's bus listener takes port 0 (the
//! kernel's pick) and keeps it for the whole test; a port that must have no listener comes
//! from the shared allocator (`ferrocluster_testkit::ports`). Waits only bound a hang
//! (`HANG`). A test's directory is removed when it passes (after its loops stopped) and kept
//! when it fails.
#![allow(clippy::disallowed_methods)]

mod common;
use common::meet;

use ferrocluster_host::{clock, BindAddr, BusDriver, DriveLoop, Host, NodesConfFile, Waker};
use ferrocluster_node::{Capabilities, ClusterConfig, ClusterNode, Millis, Output};
use ferrocluster_testkit::wait::wait_ok;
use ferrocluster_testkit::{ports, wait_until, TestDir, HANG};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

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

/// A drive loop turning on its own thread, stopped and joined on drop: no turn writes
/// nodes.conf after the test (whose directory goes then; a failed save would end the
/// process, as Redis's `clusterSaveConfigOrDie`).
struct Running {
    stop: Arc<AtomicBool>,
    waker: Arc<Waker>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A node on a drive loop. Declare it after the test's `TestDir`: it is dropped (its loop
/// stopped) before the directory is removed.
struct Started {
    host: TestHost,
    port: u16,
    waker: Arc<Waker>,
    conf: Arc<NodesConfFile>,
    _running: Running,
}

/// A node whose bus listens on a port the kernel picks (kept open while it runs), with
/// nodes.conf in `dir`, on its own drive loop.
fn start(dir: &std::path::Path, seed: u64, node_timeout_ms: u64) -> Started {
    let bus = BusDriver::bind(&[BindAddr::required("127.0.0.1")], 0).unwrap();
    let port = bus.local_addrs()[0].port();
    let conf = Arc::new(NodesConfFile::open(&dir.join("nodes.conf")).unwrap());
    let cfg = ClusterConfig {
        port,
        cluster_port: port,
        node_timeout_ms,
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
    let mut lp = DriveLoop::new(bus, Arc::clone(&conf), host.clone());
    let waker = lp.waker();
    let stop = Arc::new(AtomicBool::new(false));
    let thread = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                lp.turn().unwrap();
            }
        })
    };
    Started {
        host,
        port,
        waker: Arc::clone(&waker),
        conf,
        _running: Running {
            stop,
            waker,
            thread: Some(thread),
        },
    }
}

#[test]
fn two_loops_meet_and_persist_what_they_learned() {
    let (da, db) = (TestDir::new("host-drive-a"), TestDir::new("host-drive-b"));
    // A node timeout of HANG: the handshake (deleted after max(node timeout, 1 s)) cannot
    // time out on a loaded machine before the wait gives up.
    let hang_ms = HANG.as_millis() as u64;
    let a = start(&da, 1, hang_ms);
    let b = start(&db, 2, hang_ms);
    let b_id = *b.host.0.node.lock().unwrap().myself_id();
    let a_id = *a.host.0.node.lock().unwrap().myself_id();
    meet(&mut a.host.lock(), b.port, clock::now());
    // A command from another thread: wake the loop so it acts on the outputs now.
    a.waker.wake().unwrap();
    wait_ok(
        "both loops learned the other and wrote it to nodes.conf",
        || {
            let conf_a = std::fs::read_to_string(da.join("nodes.conf")).unwrap_or_default();
            let conf_b = std::fs::read_to_string(db.join("nodes.conf")).unwrap_or_default();
            if conf_a.contains(&b_id.to_string()) && conf_b.contains(&a_id.to_string()) {
                Ok(())
            } else {
                Err(format!(
                    "no meeting yet:\n{}\n{}",
                    a.host.0.node.lock().unwrap().cluster_nodes(),
                    b.host.0.node.lock().unwrap().cluster_nodes()
                ))
            }
        },
    );
    // Both learned the other and the loop wrote it to disk.
    assert_eq!(a.host.0.node.lock().unwrap().topology().len(), 2);
}

#[test]
fn timers_fire_under_steady_wakeups() {
    let d = TestDir::new("host-drive-starve");
    let a = start(&d, 3, 500);
    // A MEET to a port nothing listens on (the allocator's, held by this process): the
    // handshake node is deleted after the handshake timeout (max(node timeout, 1 s)), by
    // handle_timeout only.
    let dead = ports::port();
    meet(&mut a.host.lock(), dead, clock::now());
    assert_eq!(a.host.0.node.lock().unwrap().topology().len(), 2);
    let stop = Arc::new(AtomicBool::new(false));
    let spam = {
        let stop = Arc::clone(&stop);
        let wake = Arc::clone(&a.waker);
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let _ = wake.wake();
            }
        })
    };
    // However long the machine takes; HANG only bounds a loop whose timers never fire.
    let end = Instant::now() + HANG;
    let gone = loop {
        if a.host.0.node.lock().unwrap().topology().len() == 1 {
            break true;
        }
        if Instant::now() >= end {
            break false;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    stop.store(true, Ordering::Relaxed);
    spam.join().unwrap();
    assert!(
        gone,
        "the handshake did not time out within {HANG:?} (a hang) under steady input"
    );
}

#[test]
fn config_changes_of_one_turn_are_written_once_and_every_reply_follows_the_write() {
    let d = TestDir::new("host-drive-coalesce");
    let started = start(&d, 4, 500);
    let (a, wake, conf) = (&started.host, &started.waker, &started.conf);
    // The start-up save.
    wait_until("the start-up save", || conf.writes() >= 1);
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
    wait_until("the three replies", || replies(a) >= 3);
    assert_eq!(replies(a), 3, "{:?}", a.0.acted.lock().unwrap());
    // One write covered the three, and it holds all three slots.
    assert_eq!(conf.writes(), 2);
    let saved = std::fs::read_to_string(d.join("nodes.conf")).unwrap();
    let me = saved.lines().find(|l| l.contains("myself")).unwrap();
    assert!(me.ends_with(" 10-12"), "{me}");
}

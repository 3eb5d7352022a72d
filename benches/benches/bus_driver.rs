//! Threads or mio for the bus driver (`crates/host`): the shipped `BusDriver` (one
//! `mio::Poll`, non-blocking sockets, edge-triggered) against the other design a host could
//! use, a thread per link direction (a blocking reader thread per link feeding one channel the
//! drive thread waits on, and a writer thread per link fed by a channel).
//!
//! Both drive the same loopback links to echo peers (one blocking echo thread per connection,
//! the same for both) and are measured on the work a cluster node's bus does:
//! * `rtt`: one 2 KiB frame (a PING with a few gossip entries) out on one link and back: the
//!   latency of a turn;
//! * `broadcast`: one 2 KiB frame on each of 32 links and every echo back: a PING round or a
//!   FAIL / UPDATE broadcast in a 33-node cluster;
//! * `wake`: another thread wakes the drive loop and waits until the loop has seen it: a
//!   client command that queued outputs (the node's outputs must be acted on at once).
//!
//! Run inside a network namespace (`/work/tools/nsrun <ns> cargo bench -p
//! ferrocluster-benches --bench bus_driver`).
#![allow(clippy::disallowed_methods)]

use criterion::{criterion_group, criterion_main, Criterion};
use crossbeam_channel::{Receiver, Sender};
use ferrocluster_host::bus::{BusDriver, BusInput};
use ferrocluster_host::BindAddr;
use ferrocluster_node::{LinkEvent, LinkId};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

const FRAME: usize = 2048;

/// An echo peer: every connection echoes what it reads.
fn echo_peer() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            let _ = s.set_nodelay(true);
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    addr
}

/// The driver under test.
trait Driver {
    fn transmit(&mut self, link: usize, bytes: Vec<u8>);
    /// Waits for and returns bytes received (per link index) this turn.
    fn turn(&mut self, got: &mut [usize]);
}

struct Mio {
    d: BusDriver,
}

impl Mio {
    fn new(links: usize, peer: SocketAddr) -> Mio {
        let mut d = BusDriver::bind(&[BindAddr::required("127.0.0.1")], 0).unwrap();
        for i in 0..links {
            d.connect(LinkId(i as u64 + 1), peer);
        }
        let mut up = 0;
        while up < links {
            d.wait(Some(Duration::from_millis(100))).unwrap();
            while let Some(i) = d.poll_input() {
                assert!(
                    matches!(i, BusInput::Link(LinkEvent::Connected(_))),
                    "{i:?}"
                );
                up += 1;
            }
        }
        Mio { d }
    }
}

impl Driver for Mio {
    fn transmit(&mut self, link: usize, bytes: Vec<u8>) {
        self.d.transmit(LinkId(link as u64 + 1), bytes);
    }
    fn turn(&mut self, got: &mut [usize]) {
        self.d.wait(Some(Duration::from_millis(100))).unwrap();
        while let Some(i) = self.d.poll_input() {
            if let BusInput::Bytes { link, bytes } = i {
                got[link.0 as usize - 1] += bytes.len();
            }
        }
    }
}

/// A thread per link direction.
struct Threads {
    rx: Receiver<(usize, Vec<u8>)>,
    writers: Vec<Sender<Vec<u8>>>,
}

impl Threads {
    fn new(links: usize, peer: SocketAddr) -> Threads {
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut writers = Vec::new();
        for i in 0..links {
            let s = TcpStream::connect(peer).unwrap();
            s.set_nodelay(true).unwrap();
            let mut r = s.try_clone().unwrap();
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    match r.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if tx.send((i, buf[..n].to_vec())).is_err() {
                                return;
                            }
                        }
                    }
                }
            });
            let (wtx, wrx) = crossbeam_channel::unbounded::<Vec<u8>>();
            let mut w = s;
            std::thread::spawn(move || {
                while let Ok(b) = wrx.recv() {
                    if w.write_all(&b).is_err() {
                        return;
                    }
                }
            });
            writers.push(wtx);
        }
        Threads { rx, writers }
    }
}

impl Driver for Threads {
    fn transmit(&mut self, link: usize, bytes: Vec<u8>) {
        let _ = self.writers[link].send(bytes);
    }
    fn turn(&mut self, got: &mut [usize]) {
        if let Ok((i, b)) = self.rx.recv_timeout(Duration::from_millis(100)) {
            got[i] += b.len();
            while let Ok((i, b)) = self.rx.try_recv() {
                got[i] += b.len();
            }
        }
    }
}

/// Sends one frame on each link and turns until every echo is back.
fn round(d: &mut dyn Driver, links: usize, got: &mut [usize]) {
    got.iter_mut().for_each(|g| *g = 0);
    for i in 0..links {
        d.transmit(i, vec![0xab; FRAME]);
    }
    while got.iter().any(|g| *g < FRAME) {
        d.turn(got);
    }
}

fn bench_links(c: &mut Criterion, name: &str, links: usize) {
    let peer = echo_peer();
    let mut g = c.benchmark_group(name);
    let mut got = vec![0; links];
    let mut mio = Mio::new(links, peer);
    g.bench_function("mio", |b| b.iter(|| round(&mut mio, links, &mut got)));
    let mut threads = Threads::new(links, peer);
    g.bench_function("threads", |b| {
        b.iter(|| round(&mut threads, links, &mut got))
    });
    g.finish();
}

fn rtt(c: &mut Criterion) {
    bench_links(c, "bus_rtt_1link", 1);
}

fn broadcast(c: &mut Criterion) {
    bench_links(c, "bus_broadcast_32links", 32);
}

/// A wake from another thread until the loop has seen it: the mio waker against a channel.
fn wake(c: &mut Criterion) {
    let mut g = c.benchmark_group("bus_wake");
    {
        let mut d = BusDriver::bind(&[BindAddr::required("127.0.0.1")], 0).unwrap();
        let waker = d.waker();
        let (seen_tx, seen_rx) = crossbeam_channel::bounded::<()>(1);
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let h = std::thread::spawn(move || {
            while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
                d.wait(Some(Duration::from_millis(100))).unwrap();
                let _ = seen_tx.try_send(());
            }
        });
        g.bench_function("mio", |b| {
            b.iter(|| {
                // Drain an earlier timeout's notice, then wake and wait for the turn.
                while seen_rx.try_recv().is_ok() {}
                waker.wake().unwrap();
                seen_rx.recv().unwrap();
            })
        });
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        waker.wake().unwrap();
        h.join().unwrap();
    }
    {
        let (wake_tx, wake_rx) = crossbeam_channel::unbounded::<()>();
        let (seen_tx, seen_rx) = crossbeam_channel::bounded::<()>(1);
        let h = std::thread::spawn(move || loop {
            match wake_rx.recv_timeout(Duration::from_millis(100)) {
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return,
                _ => {
                    let _ = seen_tx.try_send(());
                }
            }
        });
        g.bench_function("threads", |b| {
            b.iter(|| {
                while seen_rx.try_recv().is_ok() {}
                wake_tx.send(()).unwrap();
                seen_rx.recv().unwrap();
            })
        });
        drop(wake_tx);
        h.join().unwrap();
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = rtt, broadcast, wake
}
criterion_main!(benches);

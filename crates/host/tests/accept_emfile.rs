//! An accept error (the open files limit, EMFILE) does not stop the bus listener: the
//! connections that waited in the backlog are accepted once descriptors are free again,
//! without any new connection waking the (edge-triggered) listener.
//!
//! Alone in its test binary: it lowers the process's open files limit. The listener takes
//! port 0 (the kernel's pick) and keeps it for the whole test; the wait for the accepts only
//! bounds a hang (`HANG`).
#![allow(clippy::disallowed_methods)]

use ferrocluster_host::bus::{BusDriver, BusInput};
use ferrocluster_host::BindAddr;
use ferrocluster_testkit::HANG;
use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn accepted(d: &mut BusDriver) -> usize {
    let mut n = 0;
    while let Some(i) = d.poll_input() {
        assert!(matches!(i, BusInput::Accepted(_)), "{i:?}");
        n += 1;
    }
    n
}

#[test]
fn accept_at_the_open_files_limit_recovers() {
    let mut d = BusDriver::bind(&[BindAddr::required("127.0.0.1")], 0).unwrap();
    let port = d.local_addrs()[0].port();
    // The handshakes complete in the kernel's backlog.
    let clients: Vec<TcpStream> = (0..3)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    let highest = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
        .max()
        .unwrap();
    let old = getrlimit(Resource::Nofile);
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(highest + 1),
            maximum: old.maximum,
        },
    )
    .unwrap();
    // Fill every free descriptor number below the limit.
    let mut fillers = Vec::new();
    while let Ok(f) = std::fs::File::open("/dev/null") {
        fillers.push(f);
    }
    for _ in 0..3 {
        d.wait(Some(Duration::from_millis(20))).unwrap();
        assert_eq!(accepted(&mut d), 0, "accept cannot succeed at the limit");
    }
    drop(fillers);
    setrlimit(Resource::Nofile, old).unwrap();
    let mut n = 0;
    let end = Instant::now() + HANG;
    while n < 3 && Instant::now() < end {
        d.wait(Some(Duration::from_millis(200))).unwrap();
        n += accepted(&mut d);
    }
    assert_eq!(
        n, 3,
        "the pending connections were not accepted within {HANG:?} (a hang)"
    );
    drop(clients);
}

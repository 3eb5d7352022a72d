//! The bus driver over real loopback sockets. The listeners take port 0 (the kernel's
//! choice) and stay open for the whole test; a port that must refuse connections comes from
//! the shared allocator (`ferrocluster_testkit::ports`). Waits only bound a hang (`HANG`).
#![allow(clippy::disallowed_methods)]

mod common;
use common::meet;

use ferrocluster_host::bus::{BusDriver, BusInput};
use ferrocluster_host::{clock, BindAddr};
use ferrocluster_node::{Capabilities, ClusterConfig, ClusterNode, LinkEvent, LinkId, Output};
use ferrocluster_testkit::{ports, HANG};
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

const LO: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

fn driver() -> BusDriver {
    BusDriver::bind(&[BindAddr::required("127.0.0.1")], 0).unwrap()
}

fn port(d: &BusDriver) -> u16 {
    d.local_addrs()[0].port()
}

/// Turns of `d` until `pred` holds on the inputs seen so far (`HANG` only bounds a hang).
fn inputs_until(d: &mut BusDriver, mut pred: impl FnMut(&[BusInput]) -> bool) -> Vec<BusInput> {
    let mut seen = Vec::new();
    let end = Instant::now() + HANG;
    loop {
        d.wait(Some(Duration::from_millis(10))).unwrap();
        while let Some(i) = d.poll_input() {
            seen.push(i);
        }
        if pred(&seen) {
            return seen;
        }
        assert!(
            Instant::now() < end,
            "condition not reached within {HANG:?} (a hang); inputs: {seen:?}"
        );
    }
}

#[test]
fn two_nodes_meet_over_the_driver() {
    let now = clock::now();
    let (mut da, mut db) = (driver(), driver());
    // A node timeout of HANG: the handshake (deleted after max(node timeout, 1 s)) cannot
    // time out on a loaded machine before the wait gives up.
    let cfg = |p| ClusterConfig {
        port: p,
        cluster_port: p,
        node_timeout_ms: HANG.as_millis() as u64,
        ..ClusterConfig::default()
    };
    let mut a = ClusterNode::new(cfg(port(&da)), Capabilities::default(), now, 1, None).unwrap();
    let mut b = ClusterNode::new(cfg(port(&db)), Capabilities::default(), now, 2, None).unwrap();
    meet(&mut a, port(&db), now);
    let end = Instant::now() + HANG;
    while Instant::now() < end {
        let now = clock::now();
        for (d, n) in [(&mut da, &mut a), (&mut db, &mut b)] {
            d.wait(Some(Duration::from_millis(5))).unwrap();
            d.feed(n, now);
            n.handle_timeout(now);
            while let Some(o) = n.poll_output() {
                match d.handle_output(o) {
                    None => {}
                    Some(Output::Persist { seq, .. }) => n.handle_persisted(seq),
                    Some(_) => {}
                }
            }
        }
        let knows = |n: &ClusterNode, other: &ClusterNode| {
            n.topology()
                .node(other.myself_id())
                .is_some_and(|r| !r.in_handshake())
        };
        if knows(&a, &b) && knows(&b, &a) {
            assert_eq!(da.link_count(), 2, "one link each way");
            assert_eq!(db.link_count(), 2);
            return;
        }
    }
    panic!(
        "no handshake within {HANG:?} (a hang):\n{}\n{}",
        a.cluster_nodes(),
        b.cluster_nodes()
    );
}

#[test]
fn connect_results_bytes_and_peer_close_in_order() {
    let mut d = driver();
    // Refused: nothing listens on a port of the allocator (held by this process, so no other
    // test listens there either).
    let refused = std::net::SocketAddr::from((LO, ports::port()));
    d.connect(LinkId(1), refused);
    let seen = inputs_until(&mut d, |s| !s.is_empty());
    assert!(
        matches!(
            seen[..],
            [BusInput::Link(LinkEvent::ConnectFailed(LinkId(1)))]
        ),
        "{seen:?}"
    );
    // Connected, bytes both ways, then the peer closes: bytes before the close.
    let peer = TcpListener::bind((LO, 0)).unwrap();
    d.connect(LinkId(2), peer.local_addr().unwrap());
    d.transmit(LinkId(2), b"queued while connecting".to_vec());
    let (mut s, _) = peer.accept().unwrap();
    let seen = inputs_until(&mut d, |s| !s.is_empty());
    assert!(
        matches!(seen[..], [BusInput::Link(LinkEvent::Connected(LinkId(2)))]),
        "{seen:?}"
    );
    let mut buf = [0u8; 23];
    s.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"queued while connecting");
    s.write_all(b"hello").unwrap();
    drop(s);
    let seen = inputs_until(&mut d, |s| {
        s.iter()
            .any(|i| matches!(i, BusInput::Link(LinkEvent::Closed(_))))
    });
    let mut bytes = Vec::new();
    for i in &seen[..seen.len() - 1] {
        match i {
            BusInput::Bytes { link, bytes: b } => {
                assert_eq!(*link, LinkId(2));
                bytes.extend_from_slice(b);
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(bytes, b"hello");
    assert!(matches!(
        seen.last(),
        Some(BusInput::Link(LinkEvent::Closed(LinkId(2))))
    ));
    assert_eq!(d.link_count(), 0);
}

#[test]
fn accepted_links_carry_the_ids_they_are_given() {
    let mut d = driver();
    let mut c = TcpStream::connect((LO, port(&d))).unwrap();
    let seen = inputs_until(&mut d, |s| !s.is_empty());
    let Some(BusInput::Accepted(a)) = seen.into_iter().next() else {
        panic!("no accept");
    };
    assert_eq!(a.peer, LO);
    assert_eq!(a.local, Some(LO));
    assert!(d.adopt(a, LinkId(7)));
    d.transmit(LinkId(7), b"pong".to_vec());
    let mut buf = [0u8; 4];
    c.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"pong");
    c.write_all(b"ping").unwrap();
    let seen = inputs_until(&mut d, |s| !s.is_empty());
    assert!(
        matches!(&seen[..], [BusInput::Bytes { link: LinkId(7), bytes }] if bytes == b"ping"),
        "{seen:?}"
    );
    // Close: no event, the socket is gone (the peer reads EOF).
    d.close(LinkId(7));
    assert_eq!(d.link_count(), 0);
    assert_eq!(c.read(&mut buf).unwrap(), 0);
    d.wait(Some(Duration::from_millis(20))).unwrap();
    assert!(d.poll_input().is_none());
    // An output for a link the driver does not hold is ignored.
    d.transmit(LinkId(7), b"late".to_vec());
    d.close(LinkId(99));
    assert!(d.poll_input().is_none());
}

/// A peer that never reads: the kernel buffers fill, then the driver's send buffer grows.
fn stalled_link(d: &mut BusDriver, id: LinkId) -> TcpStream {
    let peer = TcpListener::bind((LO, 0)).unwrap();
    d.connect(id, peer.local_addr().unwrap());
    let (s, _) = peer.accept().unwrap();
    inputs_until(d, |s| !s.is_empty());
    s
}

#[test]
fn send_buffer_figures_and_the_limit() {
    let mut d = driver();
    // Without a limit the bytes wait, and the figures say so.
    let _s1 = stalled_link(&mut d, LinkId(1));
    assert_eq!(d.send_buffer(LinkId(1)).unwrap().used, 0);
    let chunk = vec![0u8; 1 << 20];
    let mut sent = 0;
    while d.send_buffer(LinkId(1)).unwrap().used == 0 {
        d.transmit(LinkId(1), chunk.clone());
        sent += chunk.len();
        assert!(sent < 256 << 20, "the kernel took 256 MiB");
    }
    let f = d.send_buffer(LinkId(1)).unwrap();
    assert!(f.used > 0 && f.allocated >= f.used, "{f:?}");
    let changed = d.take_changed_send_buffers();
    assert!(
        changed.iter().any(|(l, b)| *l == LinkId(1) && *b == f),
        "{changed:?}"
    );
    assert_eq!(d.links_buffer_limit_exceeded(), 0);
    // With a limit, a link whose unsent bytes pass it is freed, counted and reported closed.
    d.set_sendbuf_limit(1 << 20);
    let _s2 = stalled_link(&mut d, LinkId(2));
    let mut n = 0;
    while d.send_buffer(LinkId(2)).is_some() {
        d.transmit(LinkId(2), chunk.clone());
        n += 1;
        assert!(n < 256, "never freed");
    }
    assert_eq!(d.links_buffer_limit_exceeded(), 1);
    let seen = inputs_until(&mut d, |s| !s.is_empty());
    assert!(
        matches!(seen[..], [BusInput::Link(LinkEvent::Closed(LinkId(2)))]),
        "{seen:?}"
    );
    // The limit applies to link 1 from its next write on.
    d.transmit(LinkId(1), vec![1; 2 << 20]);
    assert!(d.send_buffer(LinkId(1)).is_none());
    assert_eq!(d.links_buffer_limit_exceeded(), 2);
}

#[test]
fn one_busy_link_does_not_hold_up_the_turn() {
    let mut d = driver();
    let mut flood = TcpStream::connect((LO, port(&d))).unwrap();
    let mut quiet = TcpStream::connect((LO, port(&d))).unwrap();
    let seen = inputs_until(&mut d, |s| s.len() == 2);
    let mut ids = [LinkId(1), LinkId(2)].into_iter();
    for i in seen {
        let BusInput::Accepted(a) = i else { panic!() };
        assert!(d.adopt(a, ids.next().unwrap()));
    }
    let big = vec![7u8; 4 << 20];
    let writer = std::thread::spawn(move || {
        flood.write_all(&big).unwrap();
        flood
    });
    quiet.write_all(b"x").unwrap();
    let mut per_turn_max = 0;
    let mut total = 0;
    let mut quiet_seen = false;
    let end = Instant::now() + HANG;
    while Instant::now() < end {
        d.wait(Some(Duration::from_millis(10))).unwrap();
        while let Some(i) = d.poll_input() {
            if let BusInput::Bytes { bytes, .. } = i {
                if bytes == b"x" {
                    quiet_seen = true;
                } else {
                    per_turn_max = per_turn_max.max(bytes.len());
                    total += bytes.len();
                }
            }
        }
        if quiet_seen && total == 4 << 20 {
            break;
        }
    }
    let _flood = writer.join().unwrap();
    assert!(quiet_seen);
    assert_eq!(total, 4 << 20);
    assert!(
        per_turn_max <= ferrocluster_host::bus::READ_BUDGET + 64 * 1024,
        "{per_turn_max}"
    );
}

#[test]
fn send_buffer_figures_reach_cluster_links_and_cluster_info() {
    use ferrocluster_node::{CommandOutcome, CommandRequest, EmptyKeyspace, Reply};
    let mut d = driver();
    let now = clock::now();
    let cfg = ClusterConfig {
        port: port(&d),
        cluster_port: port(&d),
        ..ClusterConfig::default()
    };
    let mut a = ClusterNode::new(cfg, Capabilities::default(), now, 5, None).unwrap();
    // A peer that accepts and never reads.
    let stalled = TcpListener::bind((LO, 0)).unwrap();
    meet(&mut a, stalled.local_addr().unwrap().port(), now);
    let mut link = None;
    let mut peer = None;
    let end = Instant::now() + HANG;
    while Instant::now() < end {
        d.wait(Some(Duration::from_millis(5))).unwrap();
        d.feed(&mut a, clock::now());
        a.handle_timeout(clock::now());
        while let Some(o) = a.poll_output() {
            match o {
                Output::Connect { link: l, .. } => {
                    link = Some(l);
                    d.handle_output(o);
                    peer = Some(stalled.accept().unwrap().0);
                }
                Output::Persist { seq, .. } => a.handle_persisted(seq),
                o => {
                    d.handle_output(o);
                }
            }
        }
        if link.is_some_and(|l| d.send_buffer(l).is_some()) {
            break;
        }
    }
    let link = link.expect("the node connected");
    let _peer = peer;
    // A backlog the kernel does not take.
    while d.send_buffer(link).unwrap().used == 0 {
        d.transmit(link, vec![0; 1 << 20]);
    }
    let want = d.send_buffer(link).unwrap();
    d.feed(&mut a, clock::now());
    let cmd = |a: &mut ClusterNode, argv: &[&str]| match a.cluster_command_argv(
        argv,
        &CommandRequest::default(),
        &EmptyKeyspace,
        clock::now(),
    ) {
        CommandOutcome::Reply(r) => r,
        other => panic!("{other:?}"),
    };
    let Reply::Array(rows) = cmd(&mut a, &["CLUSTER", "LINKS"]) else {
        panic!("not an array");
    };
    let field = |row: &Reply, name: &str| match row {
        Reply::Map(kv) => kv
            .iter()
            .find(|(k, _)| *k == Reply::bulk(name))
            .map(|(_, v)| v.clone()),
        _ => None,
    };
    let to = rows
        .iter()
        .find(|r| field(r, "direction") == Some(Reply::bulk("to")))
        .expect("the outbound link is listed");
    assert_eq!(field(to, "send-buffer-used"), Some(Reply::uint(want.used)));
    assert_eq!(
        field(to, "send-buffer-allocated"),
        Some(Reply::uint(want.allocated))
    );
    // `w`: registered for writing while bytes wait (the `r` is the node's link state).
    let Some(Reply::Bulk(events)) = field(to, "events") else {
        panic!("no events field");
    };
    assert!(events.ends_with(b"w"), "{events:?}");
    // Over the limit: freed, counted in CLUSTER INFO.
    d.set_sendbuf_limit(1);
    d.transmit(link, vec![0]);
    assert!(d.send_buffer(link).is_none());
    d.feed(&mut a, clock::now());
    let info = match cmd(&mut a, &["CLUSTER", "INFO"]) {
        Reply::Verbatim(t) => t,
        Reply::Bulk(b) => String::from_utf8(b).unwrap(),
        other => panic!("{other:?}"),
    };
    assert!(
        info.contains("total_cluster_links_buffer_limit_exceeded:1\r\n"),
        "{info}"
    );
}

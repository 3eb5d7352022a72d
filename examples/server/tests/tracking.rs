//! Client-side caching (`CLIENT TRACKING` default and BCAST modes with REDIRECT, NOLOOP, OPTIN /
//! OPTOUT, PREFIX, CLIENT CACHING / GETREDIR / TRACKINGINFO): the same sessions on redis-server 7.0 and on
//! ours, every byte each client receives compared. Ports from the one allocator
//! (`common::ports`).

mod common;

use common::{encode, ports, start_real_server, test_dir, Client, Procs};

/// What `PING <token>` answers, outside and inside RESP2 Pub/Sub mode.
const MARK: &str = "pending-mark";
const MARK_REPLY: &str = "$12\r\npending-mark\r\n";
const MARK_REPLY_PUBSUB: &str = "*2\r\n$4\r\npong\r\n$12\r\npending-mark\r\n";

/// Everything that arrived on `c` that no request asked for (pushes and messages) since the
/// last reply. Called after a write on another client has been answered: both servers queue
/// the write's invalidations before its reply leaves (Redis writes them into the client's
/// buffer inside the command, ours hands them to the client's I/O thread, which takes them
/// before it reads the client's next request), so what `PING <mark>` answers comes after all
/// of them; everything before that answer is the write's doing.
fn pending(c: &mut Client) -> String {
    c.send_raw(&encode(&[b"PING", MARK.as_bytes()]));
    let mut got = Vec::new();
    loop {
        let frame = c.read_reply();
        if frame == MARK_REPLY.as_bytes() || frame == MARK_REPLY_PUBSUB.as_bytes() {
            return String::from_utf8_lossy(&got).into_owned();
        }
        got.extend_from_slice(&frame);
    }
}

fn id_of(c: &mut Client) -> String {
    c.cmd_s(&["CLIENT", "ID"])
        .trim_start_matches(':')
        .trim()
        .to_string()
}

fn session(port: u16) -> Vec<String> {
    let mut log = Vec::new();
    let mut w = Client::connect(port);
    w.cmd(&["FLUSHALL"]);
    // RESP3, default mode.
    let mut a = Client::connect(port);
    a.cmd(&["HELLO", "3"]);
    log.push(a.cmd_s(&["CLIENT", "TRACKINGINFO"]));
    log.push(a.cmd_s(&["CLIENT", "TRACKING", "ON"]));
    log.push(a.cmd_s(&["CLIENT", "GETREDIR"]));
    log.push(a.cmd_s(&["CLIENT", "TRACKINGINFO"]));
    w.cmd(&["SET", "k", "1"]);
    log.push(a.cmd_s(&["GET", "k"]));
    w.cmd(&["SET", "k", "2"]);
    log.push(format!("a after set: {}", pending(&mut a)));
    w.cmd(&["SET", "k", "3"]);
    log.push(format!(
        "a after second set (forgotten): {}",
        pending(&mut a)
    ));
    log.push(a.cmd_s(&["MGET", "k", "other"]));
    w.cmd(&["DEL", "other"]);
    w.cmd(&["SET", "other", "x"]);
    log.push(format!("a after other: {}", pending(&mut a)));
    w.cmd(&["FLUSHALL"]);
    log.push(format!("a after flushall: {}", pending(&mut a)));
    // NOLOOP: its own write tells it nothing.
    let mut n = Client::connect(port);
    n.cmd(&["HELLO", "3"]);
    log.push(n.cmd_s(&["CLIENT", "TRACKING", "ON", "NOLOOP"]));
    n.cmd(&["GET", "k"]);
    log.push(n.cmd_s(&["SET", "k", "4"]));
    log.push(format!("noloop after own set: {}", pending(&mut n)));
    // OPTIN: tracked only after CACHING yes.
    let mut o = Client::connect(port);
    o.cmd(&["HELLO", "3"]);
    log.push(o.cmd_s(&["CLIENT", "CACHING", "yes"]));
    // Tracking is checked before the argument, the argument before the mode.
    log.push(o.cmd_s(&["CLIENT", "CACHING", "maybe"]));
    log.push(n.cmd_s(&["CLIENT", "CACHING", "yes"]));
    log.push(n.cmd_s(&["CLIENT", "CACHING", "maybe"]));
    log.push(o.cmd_s(&["CLIENT", "TRACKING", "ON", "OPTIN"]));
    log.push(o.cmd_s(&["CLIENT", "CACHING", "no"]));
    log.push(o.cmd_s(&["CLIENT", "CACHING", "on"]));
    o.cmd(&["GET", "p"]);
    w.cmd(&["SET", "p", "1"]);
    log.push(format!("optin untracked: {}", pending(&mut o)));
    log.push(o.cmd_s(&["CLIENT", "CACHING", "yes"]));
    log.push(o.cmd_s(&["CLIENT", "TRACKINGINFO"]));
    o.cmd(&["GET", "p"]);
    w.cmd(&["SET", "p", "2"]);
    log.push(format!("optin tracked: {}", pending(&mut o)));
    log.push(o.cmd_s(&["CLIENT", "TRACKING", "ON", "OPTOUT"]));
    // BCAST: prefixes, one message per prefix with its keys; NOLOOP leaves out its own.
    let mut bc = Client::connect(port);
    bc.cmd(&["HELLO", "3"]);
    log.push(bc.cmd_s(&["CLIENT", "TRACKING", "ON", "PREFIX", "user:"]));
    log.push(bc.cmd_s(&["CLIENT", "TRACKING", "ON", "BCAST", "OPTIN"]));
    log.push(bc.cmd_s(&[
        "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "user:", "PREFIX", "us",
    ]));
    log.push(bc.cmd_s(&[
        "CLIENT", "TRACKING", "ON", "BCAST", "NOLOOP", "PREFIX", "user:", "PREFIX", "job:",
    ]));
    log.push(bc.cmd_s(&["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "use"]));
    log.push(bc.cmd_s(&["CLIENT", "TRACKINGINFO"]));
    log.push(bc.cmd_s(&["CLIENT", "TRACKING", "ON"]));
    w.cmd(&["MSET", "user:2", "a", "user:1", "b", "other", "c"]);
    log.push(format!("bcast after mset: {}", pending(&mut bc)));
    w.cmd(&["SET", "job:9", "x"]);
    log.push(format!("bcast after job: {}", pending(&mut bc)));
    log.push(bc.cmd_s(&["SET", "user:3", "own"]));
    log.push(format!("bcast noloop own write: {}", pending(&mut bc)));
    log.push(bc.cmd_s(&["CLIENT", "TRACKING", "OFF"]));
    w.cmd(&["SET", "user:1", "z"]);
    log.push(format!("bcast off: {}", pending(&mut bc)));
    let mut all = Client::connect(port);
    all.cmd(&["HELLO", "3"]);
    log.push(all.cmd_s(&["CLIENT", "TRACKING", "ON", "BCAST"]));
    w.cmd(&["SET", "anything", "1"]);
    log.push(format!("bcast every key: {}", pending(&mut all)));
    // RESP2 with REDIRECT to a subscriber of __redis__:invalidate.
    let mut r = Client::connect(port);
    let rid = id_of(&mut r);
    log.push(r.cmd_s(&["SUBSCRIBE", "__redis__:invalidate"]));
    let mut b = Client::connect(port);
    log.push(b.cmd_s(&["CLIENT", "TRACKING", "ON", "REDIRECT", "999999"]));
    log.push(b.cmd_s(&["CLIENT", "TRACKING", "ON", "REDIRECT", &rid]));
    log.push(b.cmd_s(&["CLIENT", "GETREDIR"]).replace(&rid, "<rid>"));
    b.cmd(&["GET", "q"]);
    w.cmd(&["SET", "q", "1"]);
    log.push(format!("redirect target: {}", pending(&mut r)));
    log.push(format!("redirecting client: {}", pending(&mut b)));
    log.push(b.cmd_s(&["CLIENT", "TRACKING", "OFF"]));
    log.push(b.cmd_s(&["CLIENT", "GETREDIR"]));
    log
}

#[test]
fn tracking_sessions_match_redis_7_byte_for_byte() {
    let dir = test_dir("tracking");
    let [ours_port, redis_port] = ports::ports(2)[..] else {
        unreachable!()
    };
    let mut procs = Procs::default();
    procs.start(&dir, ours_port, &["--cluster-enabled", "no"]);
    let _redis = start_real_server("redis-server", redis_port, &dir.join("redis"), &[]);
    let ours = session(ours_port);
    let theirs = session(redis_port);
    for (i, (o, t)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(o, t, "step {i}");
    }
    assert_eq!(ours.len(), theirs.len());
    // The steps that show invalidations are not empty on either.
    assert!(ours[5].contains("invalidate"), "{}", ours[5]);
    for step in [
        "bcast after mset: >2",
        "bcast after job: >2",
        "bcast every key: >2",
    ] {
        assert!(
            ours.iter().any(|l| l.starts_with(step)),
            "{step} in {ours:?}"
        );
    }
}

//! Atomic slot migration (`CLUSTER MIGRATESLOTS`) between our node and a real
//! `valkey-server` 9.1 node, both directions, under a concurrent writer (issue 18): the
//! moving slots hold keys of every value type, with and without TTLs, and a client writes
//! keys of those slots throughout (SET, SET PX, RPUSH, INCR, HSET, SADD, ZADD: the
//! non-idempotent ones show a write applied twice or lost), following MOVED / ASK /
//! TRYAGAIN as a cluster client does and recording every write acknowledged. After each
//! move the new owner holds every key as it was made (TTL still pending) and every
//! acknowledged write exactly once, and the old owner holds none of the moved keys.
//!
//! Ports from the one allocator (`ferrocluster_testkit::ports`; the harness's bus ports,
//! +10000, are free too). A missing server fails the test.
#![allow(clippy::disallowed_methods)]

mod mixed;

use ferrocluster_testkit::ports;
use ferrocluster_testkit::wait::{wait_ok, wait_until, HANG};
use mixed::keys::{check_on, content, dbsize, keys_in, make_keys, SLOTS};
use mixed::{cmd, export_state, Client, Kind, Member, Mixed, Reply, Role};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the writer's acknowledged writes made, key by key.
#[derive(Debug, Default, Clone)]
struct Acked {
    /// Writes sent so far (the next write's number).
    n: u64,
    /// `SET {t}w:<i> v<i>` (and `PX 900000` for odd `i`).
    strings: Vec<(String, String, bool)>,
    /// `RPUSH {t}wl e<i>`, in order.
    list: Vec<String>,
    /// `INCR {t}wc`.
    incrs: i64,
    /// `HSET {t}wh f<i> <i>`.
    fields: Vec<String>,
    /// `SADD {t}ws m<i>`.
    members: Vec<String>,
    /// `ZADD {t}wz <i> z<i>`.
    scored: Vec<String>,
}

/// The port in a `MOVED <slot> <ip>:<port>` / `ASK ...` error.
fn redirect_port(e: &str) -> u16 {
    e.rsplit(':')
        .next()
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("bad redirect {e:?}"))
}

/// Sends one write until it is acknowledged, following redirects like a cluster client.
fn write_once(conns: &mut Vec<(u16, Client)>, port: &mut u16, args: &[&str]) {
    fn conn(conns: &mut Vec<(u16, Client)>, p: u16) -> usize {
        if let Some(i) = conns.iter().position(|(q, _)| *q == p) {
            return i;
        }
        conns.push((p, Client::connect(p).unwrap()));
        conns.len() - 1
    }
    let mut asking = None;
    let end = Instant::now() + HANG;
    while Instant::now() < end {
        let (target, ask) = match asking.take() {
            Some(p) => (p, true),
            None => (*port, false),
        };
        let i = conn(conns, target);
        let c = &mut conns[i].1;
        if ask {
            assert_eq!(c.cmd(&["ASKING"]), Reply::Status("OK".into()));
        }
        match c.cmd(args) {
            Reply::Error(e) if e.starts_with("MOVED") => *port = redirect_port(&e),
            Reply::Error(e) if e.starts_with("ASK") => asking = Some(redirect_port(&e)),
            Reply::Error(e) if e.starts_with("TRYAGAIN") || e.starts_with("CLUSTERDOWN") => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Reply::Error(e) => panic!("{args:?}: {e}"),
            _ => return,
        }
    }
    panic!("{args:?} was not acknowledged within {HANG:?} (a hang)");
}

/// Writes keys of tag `t` starting at `port` until `stop`; returns what was acknowledged.
/// `done` counts the acknowledged writes as they come.
fn writer(
    mut port: u16,
    t: String,
    mut acked: Acked,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
) -> Acked {
    let mut conns = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let i = acked.n;
        acked.n += 1;
        let n = i.to_string();
        match i % 6 {
            0 => {
                let (k, v, ttl) = (format!("{{{t}}}w:{i}"), format!("v{i}"), i % 12 == 6);
                if ttl {
                    write_once(&mut conns, &mut port, &["SET", &k, &v, "PX", "900000"]);
                } else {
                    write_once(&mut conns, &mut port, &["SET", &k, &v]);
                }
                acked.strings.push((k, v, ttl));
            }
            1 => {
                let e = format!("e{i}");
                write_once(&mut conns, &mut port, &["RPUSH", &format!("{{{t}}}wl"), &e]);
                acked.list.push(e);
            }
            2 => {
                write_once(&mut conns, &mut port, &["INCR", &format!("{{{t}}}wc")]);
                acked.incrs += 1;
            }
            3 => {
                let f = format!("f{i}");
                write_once(
                    &mut conns,
                    &mut port,
                    &["HSET", &format!("{{{t}}}wh"), &f, &n],
                );
                acked.fields.push(format!("{f}={n}"));
            }
            4 => {
                let m = format!("m{i}");
                write_once(&mut conns, &mut port, &["SADD", &format!("{{{t}}}ws"), &m]);
                acked.members.push(m);
            }
            _ => {
                let m = format!("z{i}");
                write_once(
                    &mut conns,
                    &mut port,
                    &["ZADD", &format!("{{{t}}}wz"), &n, &m],
                );
                acked.scored.push(format!("{m},{n}"));
            }
        }
        done.fetch_add(1, Ordering::SeqCst);
    }
    acked
}

/// `got` equals `want` (a key's content as `content` writes it); the failure names the sizes
/// and the first differing element, not thousands of elements.
fn same(what: &str, got: &str, want: &str) {
    if got == want {
        return;
    }
    let (g, w): (Vec<&str>, Vec<&str>) = (got.split(',').collect(), want.split(',').collect());
    let at = g.iter().zip(&w).position(|(a, b)| a != b);
    let show = |v: &[&str], i: Option<usize>| i.and_then(|i| v.get(i)).map(|s| s.to_string());
    panic!(
        "{what}: {} elements, {} expected; first difference at {at:?}: {:?} instead of {:?}",
        g.len(),
        w.len(),
        show(&g, at),
        show(&w, at)
    );
}

/// Every acknowledged write is on `port`, once.
fn check_acked(port: u16, t: &str, a: &Acked) {
    let mut c = Client::connect(port).unwrap();
    for (k, v, ttl) in &a.strings {
        assert_eq!(c.cmd(&["GET", k]).text(), *v, "{k} on {port}");
        let Reply::Int(pttl) = c.cmd(&["PTTL", k]) else {
            panic!("PTTL")
        };
        if *ttl {
            assert!(pttl > 0 && pttl <= 900_000, "{k} on {port}: PTTL {pttl}");
        } else {
            assert_eq!(pttl, -1, "{k} on {port}");
        }
    }
    let want = format!("list:{}", a.list.join(","));
    same(
        &format!("list on {port}"),
        &content(&mut c, &format!("{{{t}}}wl")),
        &want,
    );
    assert_eq!(
        c.cmd(&["GET", &format!("{{{t}}}wc")]).text(),
        a.incrs.to_string(),
        "counter on {port}"
    );
    let mut fields = a.fields.clone();
    fields.sort();
    let want = format!("hash:{}", fields.join(","));
    same(
        &format!("hash on {port}"),
        &content(&mut c, &format!("{{{t}}}wh")),
        &want,
    );
    let mut members = a.members.clone();
    members.sort();
    let want = format!("set:{}", members.join(","));
    same(
        &format!("set on {port}"),
        &content(&mut c, &format!("{{{t}}}ws")),
        &want,
    );
    let want = format!("zset:{}", a.scored.join(","));
    same(
        &format!("zset on {port}"),
        &content(&mut c, &format!("{{{t}}}wz")),
        &want,
    );
}
/// A hash tag whose slot is in `lo..lo + SLOTS`.
fn tag_in(port: u16, lo: u16) -> String {
    let mut c = Client::connect(port).unwrap();
    (0..100_000u32)
        .map(|n| format!("w{n}"))
        .find(|t| {
            matches!(c.cmd(&["CLUSTER", "KEYSLOT", t]),
                Reply::Int(s) if (i64::from(lo)..i64::from(lo + SLOTS)).contains(&s))
        })
        .expect("a tag in the moving slots")
}

/// Acknowledged writes of each stretch of the writer: before the move starts, and at the new
/// owner after it ended.
const STRETCH: u64 = 31;

/// Moves `lo..lo + SLOTS` from `from` to `to` with `CLUSTER MIGRATESLOTS` while the writer
/// runs; returns what it acknowledged.
fn migrate_under_writes(from: &Member, to: &Member, lo: u16, t: &str, acked: Acked) -> Acked {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let w = {
        let (stop, done, t, port) = (
            Arc::clone(&stop),
            Arc::clone(&done),
            t.to_string(),
            from.port,
        );
        std::thread::spawn(move || writer(port, t, acked, stop, done))
    };
    // The writer is at work on the source before the move starts.
    wait_until("the writer's first writes acknowledged", || {
        w.is_finished() || done.load(Ordering::SeqCst) >= STRETCH
    });
    let (a, b) = (lo.to_string(), (lo + SLOTS - 1).to_string());
    let r = cmd(
        from.port,
        &[
            "CLUSTER",
            "MIGRATESLOTS",
            "SLOTSRANGE",
            &a,
            &b,
            "NODE",
            &to.id,
        ],
    );
    assert_eq!(
        r,
        Reply::Status("OK".into()),
        "{:?} -> {:?}",
        from.kind,
        to.kind
    );
    wait_ok("the export to succeed", || match export_state(from.port) {
        Some(s) if s == "success" => Ok(()),
        Some(s) if s == "failed" || s == "cancelled" => {
            panic!("{:?} -> {:?}: export {s}", from.kind, to.kind)
        }
        other => Err(format!("{other:?}")),
    });
    // Writes go on at the new owner for a while.
    let at = done.load(Ordering::SeqCst);
    wait_until("writes acknowledged after the move", || {
        w.is_finished() || done.load(Ordering::SeqCst) >= at + STRETCH
    });
    stop.store(true, Ordering::Relaxed);
    w.join().expect("the writer")
}

#[test]
fn migrateslots_under_writes_between_ours_and_valkey_9() {
    let m = Mixed::form(
        "asm-interop",
        ports::block(2),
        &[(Kind::Valkey, Role::Primary), (Kind::Ours, Role::Primary)],
    );
    // The handoff's write pause (2 x the manual failover timeout) outlasts any stall.
    m.manual_failover_timeout_hang();
    let (valkey, ours) = (m.m(0).clone(), m.m(1).clone());
    let (lo, _) = valkey.slots.expect("valkey owns the first slots");
    let keys = keys_in(&m, lo);
    let mut v = Client::connect(valkey.port).unwrap();
    let want = make_keys(&mut v, &keys);
    let made = keys.len() as i64;
    let t = tag_in(valkey.port, lo);
    let mut acked = Acked::default();
    for (from, to) in [(&valkey, &ours), (&ours, &valkey)] {
        acked = migrate_under_writes(from, to, lo, &t, acked);
        assert!(acked.n >= 2 * STRETCH, "the writer ran: {} writes", acked.n);
        check_on(to.port, &keys, &want);
        check_acked(to.port, &t, &acked);
        // The writer's keys: strings, and one of each other type.
        let total = made + acked.strings.len() as i64 + 5;
        assert_eq!(dbsize(to.port), total, "{:?} -> {:?}", from.kind, to.kind);
        // The old owner drops the moved keys once it sees the new owner.
        wait_ok("the source to drop the keys", || match dbsize(from.port) {
            0 => Ok(()),
            n => Err(format!("{n} keys left on {:?}", from.kind)),
        });
    }
    m.assert_cluster_check(ours.port);
}

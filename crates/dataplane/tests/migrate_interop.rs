//! Legacy migration against real servers, both directions: our MIGRATE client moving keys of
//! every type into a real valkey-server 9.1 and redis-server 7.0, and a real MIGRATE of each
//! into a test listener that answers with our RESTORE checks. The servers must be installed
//! (`.ci/run` installs them); a missing one fails the test. The servers' ports come from the
//! shared allocator (`ferrocluster_testkit::ports`); the RESTORE listener takes port 0 and
//! stays open until it has served its connection. Every wait, and MIGRATE's own timeout,
//! only bounds a hang (`HANG`); an expiry is checked against the times measured around the
//! move, never against a fixed tolerance.
#![allow(clippy::disallowed_methods)] // a test host reads the clock

#[path = "interop/driver.rs"]
#[allow(dead_code)]
mod driver;

use driver::{unix_ms, Server};
use ferrocluster_dataplane::legacy::{
    restore, MigrateArgs, MigrateClient, MigrateConfig, MigrateLink, MigrateOutput, Restore,
};
use ferrocluster_dataplane::resp::{CommandReader, Item, ReaderLimits};
use ferrocluster_dataplane::{ConnId, Reply};
use ferrocluster_rdb::RdbObject;
use ferrocluster_testkit::HANG;
use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const FLAVORS: [&str; 2] = ["valkey-server", "redis-server"];

/// Keys of every type and encoding, some with a TTL (absolute ms from `now`).
fn values(now: i64) -> Vec<(Vec<u8>, RdbObject, Option<i64>)> {
    let s = |x: &str| x.as_bytes().to_vec();
    let many = |n: usize, p: &str| {
        (0..n)
            .map(|i| format!("{p}{i}").into_bytes())
            .collect::<Vec<_>>()
    };
    vec![
        (s("str"), RdbObject::String(s("hello")), None),
        (
            s("int"),
            RdbObject::String(s("-12345")),
            Some(now + 3_600_000),
        ),
        (s("long"), RdbObject::String(vec![b'a'; 3000]), None),
        (
            s("list"),
            RdbObject::List(vec![s("a"), s("1"), s("")]),
            None,
        ),
        (
            s("biglist"),
            RdbObject::List(many(3000, "element-")),
            Some(now + 7_200_000),
        ),
        (
            s("hash"),
            RdbObject::Hash(vec![(s("f"), s("v")), (s("n"), s("7"))]),
            None,
        ),
        (
            s("bighash"),
            RdbObject::Hash(many(600, "f").into_iter().zip(many(600, "v")).collect()),
            None,
        ),
        (
            s("intset"),
            RdbObject::Set(vec![s("1"), s("-2"), s("300000")]),
            None,
        ),
        (s("set"), RdbObject::Set(vec![s("x"), s("y")]), None),
        (s("bigset"), RdbObject::Set(many(700, "m")), None),
        (
            s("zset"),
            RdbObject::SortedSet(vec![(s("a"), 1.5), (s("b"), -3.0), (s("c"), f64::INFINITY)]),
            None,
        ),
        (
            s("bigzset"),
            RdbObject::SortedSet(
                many(300, "z")
                    .into_iter()
                    .zip((0..300).map(|i| i as f64 / 7.0))
                    .collect(),
            ),
            Some(now + 100_000),
        ),
    ]
}

/// MIGRATE's timeout argument (ms): it only bounds a hang.
fn migrate_timeout() -> String {
    HANG.as_millis().to_string()
}

/// Whether `got`, an expiry set from a relative TTL, is `at` moved by at most the time the move
/// took (`took` ms, measured around it): the TTL was computed and applied inside that window
/// (1 ms of slack for the two clocks' rounding).
fn expiry_within(got: i64, at: i64, took: i64) -> bool {
    (at - 1..=at + took + 1).contains(&got)
}

/// Runs a MIGRATE of our client over real sockets until its `Done`.
fn run(
    c: &mut MigrateClient,
    socks: &mut BTreeMap<MigrateLink, TcpStream>,
) -> (Reply, Vec<Vec<u8>>) {
    let deadline = std::time::Instant::now() + HANG;
    loop {
        assert!(
            std::time::Instant::now() < deadline,
            "MIGRATE did not finish within {HANG:?} (a hang)"
        );
        while let Some(o) = c.poll_output() {
            match o {
                MigrateOutput::Connect {
                    link,
                    host,
                    port,
                    timeout_ms,
                } => {
                    let addr = format!(
                        "{}:{}",
                        String::from_utf8_lossy(&host),
                        String::from_utf8_lossy(&port)
                    );
                    let addr: std::net::SocketAddr = addr.parse().unwrap();
                    match TcpStream::connect_timeout(&addr, Duration::from_millis(timeout_ms)) {
                        Ok(s) => {
                            s.set_read_timeout(Some(Duration::from_millis(5))).unwrap();
                            socks.insert(link, s);
                            c.handle_connected(link, unix_ms());
                        }
                        Err(_) => c.handle_connect_failed(link, unix_ms()),
                    }
                }
                MigrateOutput::Send { link, bytes } => {
                    if socks.get_mut(&link).unwrap().write_all(&bytes).is_err() {
                        c.handle_write_failed(link, unix_ms());
                    }
                }
                MigrateOutput::Close { link } => {
                    socks.remove(&link);
                }
                MigrateOutput::Done { reply, moved, .. } => return (reply, moved),
            }
        }
        let mut buf = [0u8; 65536];
        let links: Vec<MigrateLink> = socks.keys().copied().collect();
        for link in links {
            let s = socks.get_mut(&link).unwrap();
            match s.read(&mut buf) {
                Ok(0) => {
                    socks.remove(&link);
                    c.handle_closed(link, unix_ms());
                }
                Ok(n) => c.handle_bytes(link, &buf[..n], unix_ms()),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(_) => {
                    socks.remove(&link);
                    c.handle_closed(link, unix_ms());
                }
            }
        }
        c.handle_timeout(unix_ms());
    }
}

/// Our MIGRATE client into a real target (with `requirepass`): every key arrives with its
/// value and TTL; a second MIGRATE without REPLACE meets BUSYKEY; with REPLACE and COPY it
/// succeeds and moves nothing.
#[test]
fn our_migrate_into_real_servers() {
    for bin in FLAVORS {
        let target = Server::start_with(bin, &[], Some("pw"));
        let now = unix_ms().as_u64() as i64;
        let vals = values(now);
        let port = target.port.to_string();
        let timeout = migrate_timeout();
        let mut argv: Vec<String> = [
            "MIGRATE",
            "127.0.0.1",
            &port,
            "",
            "4",
            &timeout,
            "AUTH",
            "pw",
            "KEYS",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        argv.extend(
            vals.iter()
                .map(|(k, _, _)| String::from_utf8(k.clone()).unwrap()),
        );
        let args = MigrateArgs::parse(&argv).unwrap();
        let mut c = MigrateClient::new(
            MigrateConfig {
                cluster_enabled: false,
                ..MigrateConfig::default()
            },
            unix_ms(),
        );
        let mut socks = BTreeMap::new();
        let found = vals.iter().map(|(k, v, at)| (k.as_slice(), v, *at));
        let t0 = unix_ms();
        assert_eq!(c.start(ConnId(1), args.clone(), found, t0).unwrap(), None);
        let (reply, moved) = run(&mut c, &mut socks);
        let took = (unix_ms().as_u64() - t0.as_u64()) as i64;
        assert_eq!(reply, Reply::ok(), "{bin}");
        assert_eq!(moved.len(), vals.len());
        let mut conn = target.conn();
        redis::cmd("SELECT").arg(4).query::<()>(&mut conn).unwrap();
        for (k, v, at) in &vals {
            let dump: Vec<u8> = redis::cmd("DUMP").arg(k).query(&mut conn).unwrap();
            let got = ferrocluster_rdb::dump::decode(&dump).unwrap().object;
            assert_eq!(got.normalized(), v.normalized(), "{bin} {k:?}");
            let pexpiretime: i64 = redis::cmd("PEXPIRETIME").arg(k).query(&mut conn).unwrap();
            match at {
                None => assert_eq!(pexpiretime, -1, "{bin} {k:?}"),
                Some(at) => assert!(
                    expiry_within(pexpiretime, *at, took),
                    "{bin} {k:?}: {pexpiretime} vs {at} (the move took {took} ms)"
                ),
            }
        }
        // Again, without REPLACE: the target refuses the existing keys.
        let found = vals.iter().map(|(k, v, at)| (k.as_slice(), v, *at));
        c.start(ConnId(2), args.clone(), found, unix_ms()).unwrap();
        let (reply, moved) = run(&mut c, &mut socks);
        assert_eq!(
            reply,
            Reply::Error(
                "ERR Target instance replied with error: BUSYKEY Target key name already exists."
                    .into()
            ),
            "{bin}"
        );
        assert!(moved.is_empty());
        // With REPLACE and COPY, on the cached connection.
        let mut again = argv.clone();
        again.insert(6, "REPLACE".into());
        again.insert(6, "COPY".into());
        let found = vals.iter().map(|(k, v, at)| (k.as_slice(), v, *at));
        c.start(
            ConnId(3),
            MigrateArgs::parse(&again).unwrap(),
            found,
            unix_ms(),
        )
        .unwrap();
        let (reply, moved) = run(&mut c, &mut socks);
        assert_eq!(reply, Reply::ok(), "{bin}");
        assert!(moved.is_empty());
        assert_eq!(socks.len(), 1, "{bin}: one cached connection");
    }
}

/// A listener that answers AUTH and SELECT with `+OK` and RESTORE with our checks, storing
/// what it restored; it serves one connection.
/// What the listener restored: (db, key) to value and expiry.
type Restored = Arc<Mutex<BTreeMap<(u32, Vec<u8>), (RdbObject, Option<i64>)>>>;

fn restore_listener() -> (u16, Restored, std::thread::JoinHandle<Vec<Vec<Vec<u8>>>>) {
    // Port 0, the kernel's pick: the listener stays open until it accepted its connection.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let store = Arc::new(Mutex::new(BTreeMap::new()));
    let st = Arc::clone(&store);
    let h = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut r = CommandReader::new(ReaderLimits::default());
        let mut db = 0u32;
        let mut seen = Vec::new();
        let mut buf = [0u8; 65536];
        loop {
            let n = match s.read(&mut buf) {
                Ok(0) | Err(_) => return seen,
                Ok(n) => n,
            };
            r.push(&buf[..n]);
            while let Some(Item::Command(c)) = r.next_item().unwrap() {
                let argv = c.argv;
                seen.push(argv.clone());
                let name = String::from_utf8_lossy(&argv[0]).to_ascii_uppercase();
                let reply = match name.as_str() {
                    "AUTH" => Reply::ok(),
                    "SELECT" => {
                        db = std::str::from_utf8(&argv[1]).unwrap().parse().unwrap();
                        Reply::ok()
                    }
                    "RESTORE" | "RESTORE-ASKING" => {
                        let mut m = st.lock().unwrap();
                        let now = unix_ms().as_u64() as i64;
                        match restore::<RdbObject, _>(
                            &argv,
                            |k| m.contains_key(&(db, k.to_vec())),
                            now,
                            true,
                        ) {
                            Ok(Restore::Store {
                                key,
                                value,
                                expire_at_ms,
                                ..
                            }) => {
                                m.insert((db, key), (value, expire_at_ms));
                                Reply::ok()
                            }
                            Ok(Restore::Expired { key, .. }) => {
                                m.remove(&(db, key));
                                Reply::ok()
                            }
                            Err(e) => e.to_reply(),
                        }
                    }
                    other => Reply::Error(format!("ERR unknown command '{other}'")),
                };
                s.write_all(&reply.to_resp2()).unwrap();
            }
        }
    });
    (port, store, h)
}

/// A real MIGRATE (KEYS, AUTH, another database) into our RESTORE: every key of every type
/// is restored with the source's value and expiry, and the source deletes them.
#[test]
fn real_migrate_into_our_restore() {
    for bin in FLAVORS {
        let source = Server::start(bin, &[]);
        let now = unix_ms().as_u64() as i64;
        let vals = values(now);
        let mut conn = source.conn();
        let mut payloads = Vec::new();
        for (k, v, at) in &vals {
            // Load them through our own DUMP payloads (RDB 10 restores on both).
            let p = ferrocluster_rdb::dump::encode(v).unwrap();
            let mut cmd = redis::cmd("RESTORE");
            cmd.arg(k).arg(at.unwrap_or(0)).arg(&p);
            if at.is_some() {
                cmd.arg("ABSTTL");
            }
            cmd.query::<()>(&mut conn).unwrap();
            payloads.push(p);
        }
        let (port, store, h) = restore_listener();
        let mut cmd = redis::cmd("MIGRATE");
        cmd.arg("127.0.0.1")
            .arg(port)
            .arg("")
            .arg(3)
            .arg(migrate_timeout())
            .arg("AUTH")
            .arg("secret")
            .arg("KEYS");
        for (k, _, _) in &vals {
            cmd.arg(k);
        }
        let t0 = unix_ms();
        let reply: String = cmd.query(&mut conn).unwrap();
        let took = (unix_ms().as_u64() - t0.as_u64()) as i64;
        assert_eq!(reply, "OK", "{bin}");
        let n: i64 = redis::cmd("DBSIZE").query(&mut conn).unwrap();
        assert_eq!(n, 0, "{bin}: the source deleted what moved");
        drop(source);
        let seen = h.join().unwrap();
        assert_eq!(seen[0], vec![b"AUTH".to_vec(), b"secret".to_vec()]);
        assert_eq!(seen[1], vec![b"SELECT".to_vec(), b"3".to_vec()]);
        assert!(
            seen[2..].iter().all(|c| c[0] == b"RESTORE"),
            "{bin}: standalone sends RESTORE"
        );
        let m = store.lock().unwrap();
        assert_eq!(m.len(), vals.len(), "{bin}");
        for (k, v, at) in &vals {
            let (got, exp) = &m[&(3, k.clone())];
            assert_eq!(got.normalized(), v.normalized(), "{bin} {k:?}");
            match (at, exp) {
                (None, None) => {}
                (Some(a), Some(e)) => assert!(
                    expiry_within(*e, *a, took),
                    "{bin} {k:?}: {e} vs {a} (the move took {took} ms)"
                ),
                other => panic!("{bin} {k:?}: {other:?}"),
            }
        }
    }
}

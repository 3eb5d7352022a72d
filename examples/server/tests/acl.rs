//! ACL users beside real servers. Every test takes its ports from `common::ports` (the one
//! allocator of every test binary; bus ports are the data port + `BUS_OFFSET`, free too).
//! Waits only bound a hang (`wait_until`, `HANG`); a connection the server must close is read
//! to its end, and one left open fails the test.
//!
//! * One command script (ACL SETUSER / GETUSER / LIST / USERS / WHOAMI / CAT / DRYRUN / LOG /
//!   DELUSER, AUTH, HELLO AUTH, NOPERM for commands, keys and channels, MULTI) against
//!   valkey-server 9.1.2, redis-server 7.0.15 and ours (standalone): every reply of ours
//!   equals valkey's (ACL CAT <category> compared as a set, GENPASS by length, ACL LOG by its
//!   stable fields); the replies Redis 7.0 gives alike are compared with Redis too.
//! * A 3-primary cluster of ours and one of valkey-server 9.1.2: a user limited to `~app:*`
//!   and `+@read` gets -NOPERM for a write and for another key in a slot another node owns
//!   (NOPERM before MOVED, as valkey answers), MOVED for an allowed read there; ACL LOG
//!   records the denials.
//! * ACL SAVE, a restart, ACL LOAD keep the users; a bad aclfile is refused with its line.
//! * ACL DELUSER closes the user's clients at once; ACL SETUSER closes a subscriber that lost
//!   its channel (beside valkey); CONFIG REWRITE writes the users as valkey does.
//! * A valkey-server 9.1 replica of our primary authenticating with masteruser/masterauth
//!   syncs; ours as a replica of a valkey-server 9.1 cluster primary (requirepass, an ACL
//!   user for replication) authenticates with masteruser/masterauth and syncs.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{
    bulk_text, ports, require_redis_tools, run_bounded, start_real_server, test_dir,
    wait_cluster_ok, wait_until, wait_views_agree, Client, Logged, Procs, RealServer, HANG,
    NODE_TIMEOUT_MS,
};
use ferrocluster_testkit::BUS_OFFSET;

fn s(r: &[u8]) -> String {
    String::from_utf8_lossy(r).into_owned()
}

/// The elements of a flat RESP2 array of bulk strings, sorted.
fn sorted_bulks(reply: &[u8]) -> Vec<String> {
    let text = s(reply);
    let mut v: Vec<String> = text
        .split("\r\n")
        .skip(1)
        .collect::<Vec<_>>()
        .chunks(2)
        .filter(|c| c.len() == 2)
        .map(|c| c[1].to_owned())
        .collect();
    v.sort();
    v
}

/// Compare mode of one script line.
#[derive(Clone, Copy, PartialEq)]
enum Cmp {
    /// Valkey and Redis 7.0 answer the same bytes.
    Both,
    /// Only Valkey 9.1 (Redis 7.0 differs: see crates/acl/tests/vectors/README.md).
    Valkey,
    /// As a set of bulk strings (ACL CAT <category>: the servers list in dict order).
    Set,
}

/// (client index, command, comparison). Client 0 is the default user.
const SCRIPT: &[(usize, &[&str], Cmp)] = &[
    (0, &["ACL", "LIST"], Cmp::Valkey),
    (0, &["ACL", "WHOAMI"], Cmp::Both),
    (0, &["ACL", "CAT"], Cmp::Both),
    (0, &["ACL", "CAT", "dangerous"], Cmp::Set),
    (0, &["ACL", "CAT", "nosuch"], Cmp::Both),
    (
        0,
        &[
            "ACL",
            "SETUSER",
            "app",
            "on",
            ">apppw",
            "~app:*",
            "+@read",
            "&ch*",
            "%W~w:*",
            "+set",
            "+@pubsub",
            "-@dangerous",
        ],
        Cmp::Both,
    ),
    (0, &["ACL", "GETUSER", "app"], Cmp::Valkey),
    (
        0,
        &[
            "ACL", "SETUSER", "plain", "on", ">pw", "~k:*", "+get", "+set", "+multi", "+exec",
        ],
        Cmp::Both,
    ),
    (0, &["ACL", "GETUSER", "plain"], Cmp::Valkey),
    (
        0,
        &[
            "ACL",
            "SETUSER",
            "sel",
            "on",
            "nopass",
            "+get",
            "(~s:*",
            "+set)",
            "(+lpush ~l:*)",
        ],
        Cmp::Both,
    ),
    (0, &["ACL", "LIST"], Cmp::Valkey),
    (0, &["ACL", "USERS"], Cmp::Both),
    (0, &["ACL", "SETUSER", "bad", "+nosuch"], Cmp::Both),
    (0, &["ACL", "SETUSER", "bad", "%X~x"], Cmp::Both),
    (0, &["ACL", "SETUSER", "bad", "(~a"], Cmp::Both),
    (0, &["ACL", "SETUSER", "bad", "#abc"], Cmp::Both),
    (0, &["ACL", "SETUSER", "bad", "allkeys", "~x"], Cmp::Both),
    (0, &["ACL", "SETUSER", "sp ace"], Cmp::Both),
    (0, &["ACL", "GETUSER", "bad"], Cmp::Both),
    (0, &["ACL", "DELUSER", "default"], Cmp::Both),
    (0, &["ACL", "DRYRUN", "app", "get", "app:1"], Cmp::Both),
    (0, &["ACL", "DRYRUN", "app", "get", "other"], Cmp::Valkey),
    (0, &["ACL", "DRYRUN", "app", "flushall"], Cmp::Valkey),
    (0, &["ACL", "DRYRUN", "nosuch", "get", "a"], Cmp::Both),
    (0, &["ACL", "DRYRUN", "app", "nosuchcmd"], Cmp::Both),
    (0, &["ACL", "GENPASS", "0"], Cmp::Both),
    (0, &["ACL", "LOG", "RESET"], Cmp::Both),
    (0, &["SET", "app:1", "v"], Cmp::Both),
    (0, &["SET", "w:1", "v"], Cmp::Both),
    (1, &["AUTH", "app", "wrong"], Cmp::Both),
    (1, &["AUTH", "nosuch", "x"], Cmp::Both),
    (1, &["AUTH", "app", "apppw"], Cmp::Both),
    (1, &["ACL", "WHOAMI"], Cmp::Valkey),
    (1, &["GET", "app:1"], Cmp::Both),
    (1, &["SET", "app:1", "x"], Cmp::Both),
    (1, &["GET", "other"], Cmp::Valkey),
    (1, &["MGET", "app:1", "zz"], Cmp::Valkey),
    (1, &["GET", "w:1"], Cmp::Valkey),
    (1, &["LPUSH", "app:l", "x"], Cmp::Valkey),
    (1, &["FLUSHALL"], Cmp::Valkey),
    (1, &["PUBLISH", "ch1", "m"], Cmp::Both),
    (1, &["PUBLISH", "other", "m"], Cmp::Valkey),
    (1, &["SUBSCRIBE", "nope"], Cmp::Valkey),
    (1, &["RESET"], Cmp::Both),
    (1, &["ACL", "WHOAMI"], Cmp::Both),
    (2, &["HELLO", "2", "AUTH", "plain", "wrong"], Cmp::Both),
    (2, &["AUTH", "plain", "pw"], Cmp::Both),
    (2, &["MULTI"], Cmp::Both),
    (2, &["SET", "k:1", "x"], Cmp::Both),
    (2, &["SET", "nope", "x"], Cmp::Valkey),
    (2, &["EXEC"], Cmp::Valkey),
    (2, &["GET", "k:1"], Cmp::Both),
    (2, &["MULTI"], Cmp::Both),
    (2, &["GET", "k:1"], Cmp::Both),
    (0, &["ACL", "SETUSER", "plain", "-get"], Cmp::Both),
    (2, &["EXEC"], Cmp::Both),
    (3, &["AUTH", "sel", "any"], Cmp::Both),
    (3, &["SET", "s:1", "x"], Cmp::Both),
    (3, &["LPUSH", "l:1", "x"], Cmp::Both),
    (3, &["SET", "l:1", "x"], Cmp::Valkey),
    (3, &["GET", "zz"], Cmp::Valkey),
    (0, &["CLIENT", "KILL", "USER", "nosuch"], Cmp::Both),
    (0, &["CLIENT", "KILL", "USER", "sel"], Cmp::Both),
    (0, &["INFO", "nosuchsection"], Cmp::Both),
    (0, &["ACL", "DELUSER", "sel", "nosuch"], Cmp::Both),
    (0, &["ACL", "USERS"], Cmp::Both),
];

/// The log entries' stable fields: (count, reason, context, object, username).
fn log_fields(c: &mut Client) -> Vec<String> {
    let text = s(&c.cmd(&["ACL", "LOG"]));
    let parts: Vec<&str> = text.split("\r\n").collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < parts.len() {
        let field = |k: &str, from: usize| -> String {
            let at = parts[from..].iter().position(|p| *p == k).map(|p| p + from);
            at.map(|a| {
                let v = parts[a + 1];
                if v.starts_with('$') {
                    parts[a + 2].to_owned()
                } else {
                    v.to_owned()
                }
            })
            .unwrap_or_default()
        };
        if parts[i] == "count" {
            out.push(format!(
                "{} {} {} {} {}",
                parts[i + 1],
                field("reason", i),
                field("context", i),
                field("object", i),
                field("username", i)
            ));
        }
        i += 1;
    }
    out
}

fn run_script(port: u16) -> (Vec<Vec<u8>>, Vec<String>, String) {
    let mut clients: Vec<Client> = (0..4).map(|_| Client::connect(port)).collect();
    let mut replies = Vec::new();
    for (ci, cmd, _) in SCRIPT {
        replies.push(clients[*ci].cmd(cmd));
    }
    let genpass = bulk_text(&clients[0].cmd(&["ACL", "GENPASS", "64"]));
    let log = log_fields(&mut clients[0]);
    let all = s(&clients[0].cmd(&["ACL", "LOG", "100"]));
    let log_len = all.split("\r\n").next().unwrap_or_default().to_owned();
    let info = bulk_text(&clients[0].cmd(&["INFO", "stats"]));
    let acl_info: String = info
        .lines()
        .filter(|l| l.starts_with("acl_access_denied"))
        .map(|l| format!("{l}\n"))
        .collect();
    replies.push(genpass.len().to_string().into_bytes());
    replies.push(log_len.into_bytes());
    (replies, log, acl_info)
}

#[test]
fn acl_script_matches_valkey_and_redis() {
    let [vport, rport, oport] = ports::ports(3)[..] else {
        unreachable!()
    };
    let dir = test_dir("acl-script");
    let _valkey: RealServer = start_real_server("valkey-server", vport, &dir.join("valkey"), &[]);
    let _redis: RealServer = start_real_server("redis-server", rport, &dir.join("redis"), &[]);
    let mut procs = Procs::default();
    procs.start(&dir, oport, &["--cluster-enabled", "no"]);
    let (v, vlog, vinfo) = run_script(vport);
    let (r, rlog, rinfo) = run_script(rport);
    let (o, olog, oinfo) = run_script(oport);
    for (i, (_, cmd, cmp)) in SCRIPT.iter().enumerate() {
        match cmp {
            Cmp::Set => {
                assert_eq!(sorted_bulks(&o[i]), sorted_bulks(&v[i]), "{cmd:?}");
                assert!(!sorted_bulks(&o[i]).is_empty());
            }
            _ => assert_eq!(s(&o[i]), s(&v[i]), "{cmd:?} vs valkey"),
        }
        if *cmp == Cmp::Both {
            assert_eq!(s(&o[i]), s(&r[i]), "{cmd:?} vs redis 7.0");
        }
    }
    assert_eq!(
        o[o.len() - 2],
        v[v.len() - 2],
        "GENPASS 64 is 16 hex digits"
    );
    assert_eq!(s(&o[o.len() - 1]), "*15", "ACL LOG 100: every entry");
    assert_eq!(o.last(), v.last(), "ACL LOG 100 vs valkey");
    assert_eq!(olog, vlog, "ACL LOG (count reason context object username)");
    assert_eq!(olog, rlog, "ACL LOG vs redis 7.0");
    assert!(
        olog.iter().any(|l| l == ":1 command multi get plain"),
        "EXEC's re-check: {olog:?}"
    );
    assert!(
        olog.iter().any(|l| l == ":1 key toplevel w:1 app"),
        "{olog:?}"
    );
    let without = |text: &str, name: &str| -> String {
        text.lines()
            .filter(|l| !l.starts_with(name))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    // Valkey 9.1 also has acl_access_denied_tls_cert (no client certificates here).
    assert_eq!(oinfo, without(&vinfo, "acl_access_denied_tls_cert"));
    assert_eq!(
        rinfo, "",
        "Redis 7.0 has no acl_access_denied_* in INFO (7.2 added them)"
    );
    assert!(oinfo.contains("acl_access_denied_auth:3"), "{oinfo}");
}

/// Starts a 3-primary cluster (node timeout [`NODE_TIMEOUT_MS`]: no failover comes unasked on
/// a loaded machine): ours when `bin` is None, else that real server. Bus ports are the data
/// ports + `BUS_OFFSET` (the allocator keeps them free). Waits until every node is ok and
/// every node's CLUSTER NODES shows the same three primaries with their slots.
fn three_primaries(
    procs: &mut Procs,
    reals: &mut Vec<RealServer>,
    dir: &std::path::Path,
    bin: Option<&str>,
    ports: [u16; 3],
) {
    let timeout = NODE_TIMEOUT_MS.to_string();
    for p in ports {
        let b = (p + BUS_OFFSET).to_string();
        match bin {
            None => {
                procs.start(
                    dir,
                    p,
                    &[
                        "--cluster-enabled",
                        "yes",
                        "--cluster-port",
                        &b,
                        "--cluster-node-timeout",
                        &timeout,
                    ],
                );
            }
            Some(bin) => reals.push(start_real_server(
                bin,
                p,
                &dir.join(format!("real-{p}")),
                &[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-port",
                    &b,
                    "--cluster-node-timeout",
                    &timeout,
                    "--cluster-config-file",
                    "nodes.conf",
                ],
            )),
        }
    }
    let mut args: Vec<String> = vec!["--cluster".into(), "create".into()];
    args.extend(ports.iter().map(|p| format!("127.0.0.1:{p}")));
    args.extend(
        ["--cluster-replicas", "0", "--cluster-yes"]
            .iter()
            .map(|s| s.to_string()),
    );
    let out = run_bounded("redis-cli", &args, HANG);
    assert!(out.0, "redis-cli --cluster create failed:\n{}", out.1);
    wait_cluster_ok(&ports);
    wait_views_agree(&ports, 3, 0);
}

/// A key with the given prefix whose slot the node `c` is connected to does not own.
fn foreign_key(c: &mut Client, prefix: &str) -> String {
    for i in 0..1000 {
        let k = format!("{prefix}{i}");
        if s(&c.cmd(&["GET", &k])).starts_with("-MOVED") {
            return k;
        }
    }
    panic!("no foreign key");
}

fn noperm_before_moved(ports: [u16; 3]) -> (Vec<String>, Vec<String>) {
    for &p in &ports {
        let mut c = Client::connect(p);
        assert_eq!(
            s(&c.cmd(&["ACL", "SETUSER", "app", "on", ">pw", "~app:*", "+@read"])),
            "+OK\r\n"
        );
        c.cmd(&["ACL", "LOG", "RESET"]);
    }
    let mut admin = Client::connect(ports[0]);
    let app_key = foreign_key(&mut admin, "app:");
    let other_key = foreign_key(&mut admin, "other:");
    let mut u = Client::connect(ports[0]);
    assert_eq!(s(&u.cmd(&["AUTH", "app", "pw"])), "+OK\r\n");
    let read = s(&u.cmd(&["GET", &app_key]));
    assert!(
        read.starts_with("-MOVED "),
        "an allowed read is redirected: {read}"
    );
    let replies = vec![
        s(&u.cmd(&["SET", &app_key, "x"])),
        s(&u.cmd(&["GET", &other_key])),
        s(&u.cmd(&["MULTI"])),
        s(&u.cmd(&["GET", &other_key])),
    ];
    (replies, log_fields(&mut admin))
}

#[test]
fn cluster_noperm_before_moved_like_valkey() {
    require_redis_tools();
    let p = ports::ports(6);
    let (ours_ports, valkey_ports) = ([p[0], p[1], p[2]], [p[3], p[4], p[5]]);
    let dir = test_dir("acl-cluster");
    let mut procs = Procs::default();
    let mut reals = Vec::new();
    three_primaries(&mut procs, &mut reals, &dir, None, ours_ports);
    three_primaries(
        &mut procs,
        &mut reals,
        &dir,
        Some("valkey-server"),
        valkey_ports,
    );
    let (ours, ours_log) = noperm_before_moved(ours_ports);
    let (theirs, their_log) = noperm_before_moved(valkey_ports);
    assert_eq!(
        ours[0],
        "-NOPERM User app has no permissions to run the 'set' command\r\n"
    );
    assert_eq!(ours[1], "-NOPERM No permissions to access a key\r\n");
    assert_eq!(ours, theirs);
    let strip = |v: Vec<String>| -> Vec<String> {
        // The keys differ (each cluster's slot owners): keep reason, context, user.
        v.iter()
            .map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                format!("{} {} {} {}", f[0], f[1], f[2], f[4])
            })
            .collect()
    };
    assert_eq!(strip(ours_log.clone()), strip(their_log));
    // GET of the other key twice (the second after the refused MULTI), SET, MULTI.
    assert_eq!(ours_log.len(), 3, "{ours_log:?}");
    assert_eq!(
        ours_log[1..],
        [
            ":1 command toplevel multi app",
            ":1 command toplevel set app"
        ]
    );
    assert!(
        ours_log[0].starts_with(":2 key toplevel other:"),
        "{ours_log:?}"
    );
}

#[test]
fn aclfile_save_restart_load() {
    let port = ports::port();
    let dir = test_dir("acl-file");
    // `Procs::start` runs the node in `<dir>/node-<port>`; the aclfile is relative to it.
    let node = dir.join(format!("node-{port}"));
    std::fs::create_dir_all(&node).unwrap();
    std::fs::write(node.join("users.acl"), "").unwrap();
    let mut procs = Procs::default();
    procs.start(
        &dir,
        port,
        &["--cluster-enabled", "no", "--aclfile", "users.acl"],
    );
    let mut c = Client::connect(port);
    assert_eq!(
        s(&c.cmd(&[
            "ACL",
            "SETUSER",
            "keep",
            "on",
            ">pw",
            "~app:*",
            "+@read",
            "(+set ~w:*)"
        ])),
        "+OK\r\n"
    );
    assert_eq!(s(&c.cmd(&["ACL", "SAVE"])), "+OK\r\n");
    let list = s(&c.cmd(&["ACL", "LIST"]));
    procs.kill(port);
    procs.start(
        &dir,
        port,
        &["--cluster-enabled", "no", "--aclfile", "users.acl"],
    );
    let mut c = Client::connect(port);
    assert_eq!(
        s(&c.cmd(&["ACL", "LIST"])),
        list,
        "the users survive a restart"
    );
    let mut u = Client::connect(port);
    assert_eq!(s(&u.cmd(&["AUTH", "keep", "pw"])), "+OK\r\n");
    assert_eq!(s(&u.cmd(&["SET", "w:1", "x"])), "+OK\r\n");
    // Edit the file: ACL LOAD replaces the users; the removed user's client is closed.
    std::fs::write(node.join("users.acl"), "user other on nopass ~* +@all\n").unwrap();
    assert_eq!(s(&c.cmd(&["ACL", "LOAD"])), "+OK\r\n");
    assert_eq!(
        s(&c.cmd(&["ACL", "USERS"])),
        "*2\r\n$7\r\ndefault\r\n$5\r\nother\r\n"
    );
    // Closed at once, or at this PING without a reply (crate::acl): either way no reply.
    u.send_raw(&common::encode(&[b"PING"]));
    assert!(
        u.read_until_closed().is_empty(),
        "a client of a removed user is closed"
    );
    // A bad file is refused with its line and reason; the users stay.
    std::fs::write(node.join("users.acl"), "user a on\nuser b +nosuch\n").unwrap();
    let err = s(&c.cmd(&["ACL", "LOAD"]));
    assert!(err.contains("users.acl:2: Error in applying operation '+nosuch': Unknown command or category name in ACL"), "{err}");
    assert_eq!(
        s(&c.cmd(&["ACL", "USERS"])),
        "*2\r\n$7\r\ndefault\r\n$5\r\nother\r\n"
    );
}

#[test]
fn requirepass_is_the_default_users_password() {
    let port = ports::port();
    let dir = test_dir("acl-requirepass");
    let mut procs = Procs::default();
    procs.start(
        &dir,
        port,
        &["--cluster-enabled", "no", "--requirepass", "s3"],
    );
    let mut c = Client::connect(port);
    assert_eq!(
        s(&c.cmd(&["GET", "a"])),
        "-NOAUTH Authentication required.\r\n"
    );
    assert_eq!(
        s(&c.cmd(&["AUTH", "no"])),
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    assert_eq!(s(&c.cmd(&["AUTH", "default", "s3"])), "+OK\r\n");
    let line = format!("user default on #{} ~* &* +@all", sha256_hex("s3"));
    assert_eq!(
        s(&c.cmd(&["ACL", "LIST"])),
        format!("*1\r\n${}\r\n{line}\r\n", line.len())
    );
    assert_eq!(s(&c.cmd(&["CONFIG", "SET", "requirepass", ""])), "+OK\r\n");
    let mut fresh = Client::connect(port);
    assert_eq!(
        s(&fresh.cmd(&["SET", "a", "1"])),
        "+OK\r\n",
        "no password: new clients are in"
    );
    assert_eq!(s(&fresh.cmd(&["AUTH", "x"])), "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n");
    assert_eq!(
        s(&c.cmd(&["CONFIG", "SET", "requirepass", "new"])),
        "+OK\r\n"
    );
    let mut again = Client::connect(port);
    assert_eq!(
        s(&again.cmd(&["GET", "a"])),
        "-NOAUTH Authentication required.\r\n"
    );
    assert_eq!(s(&again.cmd(&["AUTH", "new"])), "+OK\r\n");
    assert_eq!(
        s(&again.cmd(&["CONFIG", "GET", "requirepass"])),
        "*2\r\n$11\r\nrequirepass\r\n$3\r\nnew\r\n"
    );
    // RESET logs out (Valkey clientSetDefaultAuth).
    assert_eq!(s(&again.cmd(&["RESET"])), "+RESET\r\n");
    assert_eq!(
        s(&again.cmd(&["GET", "a"])),
        "-NOAUTH Authentication required.\r\n"
    );
}

fn sha256_hex(p: &str) -> String {
    let out = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut ch| {
            use std::io::Write;
            ch.stdin.take().unwrap().write_all(p.as_bytes())?;
            ch.wait_with_output()
        })
        .expect("sha256sum");
    String::from_utf8_lossy(&out.stdout)[..64].to_owned()
}

#[test]
fn valkey_replica_authenticates_with_masteruser() {
    let [pport, rport] = ports::ports(2)[..] else {
        unreachable!()
    };
    let dir = test_dir("acl-masteruser");
    let conf = dir.join("primary.conf");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        &conf,
        "requirepass adminpw\nuser repl on >replpw +@all ~*\n",
    )
    .unwrap();
    let mut procs = Procs::default();
    procs.start_with_file(&dir, pport, &conf, &["--cluster-enabled", "no"]);
    let mut p = Client::connect(pport);
    assert_eq!(s(&p.cmd(&["AUTH", "adminpw"])), "+OK\r\n");
    assert_eq!(s(&p.cmd(&["SET", "k", "v"])), "+OK\r\n");
    let primary = pport.to_string();
    let _replica = start_real_server(
        "valkey-server",
        rport,
        &dir.join("valkey"),
        &[
            "--replicaof",
            "127.0.0.1",
            &primary,
            "--masteruser",
            "repl",
            "--masterauth",
            "replpw",
        ],
    );
    let mut r = Client::connect(rport);
    wait_until("the replica in sync", || {
        bulk_text(&r.cmd(&["INFO", "replication"])).contains("master_link_status:up")
    });
    assert_eq!(s(&p.cmd(&["SET", "k2", "v2"])), "+OK\r\n");
    wait_until("k2 on the replica", || {
        s(&r.cmd(&["GET", "k2"])) == "$2\r\nv2\r\n"
    });
    assert_eq!(s(&r.cmd(&["GET", "k"])), "$1\r\nv\r\n");
    let clients = bulk_text(&p.cmd(&["CLIENT", "LIST"]));
    assert!(clients.contains("user=repl"), "{clients}");
}

#[test]
fn ours_replica_authenticates_to_valkey_with_masteruser() {
    let [vport, oport] = ports::ports(2)[..] else {
        unreachable!()
    };
    let (vbus, obus) = (
        (vport + BUS_OFFSET).to_string(),
        (oport + BUS_OFFSET).to_string(),
    );
    let timeout = NODE_TIMEOUT_MS.to_string();
    let dir = test_dir("acl-ours-masteruser");
    let _valkey = start_real_server(
        "valkey-server",
        vport,
        &dir.join("valkey"),
        &[
            "--cluster-enabled",
            "yes",
            "--cluster-port",
            &vbus,
            "--cluster-node-timeout",
            &timeout,
            "--requirepass",
            "adminpw",
            "--user",
            "repl",
            "on",
            ">replpw",
            "+@all",
            "~*",
            "&*",
        ],
    );
    let mut v = Client::connect(vport);
    assert_eq!(s(&v.cmd(&["AUTH", "adminpw"])), "+OK\r\n");
    assert_eq!(
        s(&v.cmd(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"])),
        "+OK\r\n"
    );
    wait_until("valkey's cluster_state:ok", || {
        bulk_text(&v.cmd(&["CLUSTER", "INFO"])).contains("cluster_state:ok")
    });
    assert_eq!(s(&v.cmd(&["SET", "k", "v"])), "+OK\r\n");
    let mut procs = Procs::default();
    procs.start(
        &dir,
        oport,
        &[
            "--cluster-port",
            &obus,
            "--cluster-node-timeout",
            &timeout,
            "--masteruser",
            "repl",
            "--masterauth",
            "replpw",
        ],
    );
    let mut o = Client::connect(oport);
    assert_eq!(
        s(&o.cmd(&["CLUSTER", "MEET", "127.0.0.1", &vport.to_string(), &vbus])),
        "+OK\r\n"
    );
    let vid = bulk_text(&v.cmd(&["CLUSTER", "MYID"]));
    wait_until("ours knows the valkey node", || {
        bulk_text(&o.cmd(&["CLUSTER", "NODES"])).contains(&vid)
    });
    assert_eq!(s(&o.cmd(&["CLUSTER", "REPLICATE", &vid])), "+OK\r\n");
    wait_until("ours synced from valkey", || {
        bulk_text(&o.cmd(&["INFO", "replication"])).contains("master_link_status:up")
    });
    assert_eq!(s(&o.cmd(&["READONLY"])), "+OK\r\n");
    assert_eq!(s(&o.cmd(&["GET", "k"])), "$1\r\nv\r\n");
    let clients = bulk_text(&v.cmd(&["CLIENT", "LIST", "TYPE", "replica"]));
    assert!(clients.contains("user=repl"), "{clients}");
}

/// The `user` lines of a rewritten config file.
fn user_lines(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("user "))
        .map(str::to_owned)
        .collect()
}

#[test]
fn config_rewrite_keeps_users_like_valkey() {
    let [vport, oport] = ports::ports(2)[..] else {
        unreachable!()
    };
    let dir = test_dir("acl-rewrite");
    let vdir = dir.join("valkey");
    std::fs::create_dir_all(&vdir).unwrap();
    let text = "user alice on >pw ~a:* +get\n";
    let vconf = vdir.join("valkey.conf");
    std::fs::write(&vconf, text).unwrap();
    // The config file must be valkey-server's first argument (CONFIG REWRITE writes it), so
    // `start_real_server` does not fit: the same settings, by hand, on the common `Logged`.
    let vp = vport.to_string();
    let mut cmd = std::process::Command::new("valkey-server");
    cmd.arg(&vconf)
        .args(["--port", &vp, "--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(&vdir)
        .arg("--logfile")
        .arg(vdir.join("log"));
    let mut child = Logged::spawn(
        &mut cmd,
        &vdir.join("stdout.log"),
        &format!("valkey-server on {vport}"),
    );
    child.wait_listening(vport);
    let _valkey = RealServer(child);
    let oconf = dir.join("ours.conf");
    std::fs::write(&oconf, text).unwrap();
    let mut procs = Procs::default();
    procs.start_with_file(&dir, oport, &oconf, &["--cluster-enabled", "no"]);
    for port in [vport, oport] {
        let mut c = Client::connect(port);
        assert_eq!(
            s(&c.cmd(&[
                "ACL",
                "SETUSER",
                "bob",
                "on",
                "nopass",
                "+@read",
                "(~x +set)"
            ])),
            "+OK\r\n"
        );
        assert_eq!(s(&c.cmd(&["CONFIG", "REWRITE"])), "+OK\r\n");
    }
    let ours = user_lines(&oconf);
    assert_eq!(ours, user_lines(&vconf));
    assert_eq!(ours.len(), 3, "{ours:?}");
    procs.kill(oport);
    procs.start_with_file(&dir, oport, &oconf, &["--cluster-enabled", "no"]);
    let mut c = Client::connect(oport);
    assert_eq!(
        s(&c.cmd(&["ACL", "USERS"])),
        "*3\r\n$5\r\nalice\r\n$3\r\nbob\r\n$7\r\ndefault\r\n"
    );
}

#[test]
fn a_deleted_users_clients_are_closed_at_once() {
    let port = ports::port();
    let dir = test_dir("acl-deluser");
    let mut procs = Procs::default();
    procs.start(&dir, port, &["--cluster-enabled", "no"]);
    let mut admin = Client::connect(port);
    assert_eq!(
        s(&admin.cmd(&["ACL", "SETUSER", "sub", "on", ">pw", "+@all", "allchannels"])),
        "+OK\r\n"
    );
    let mut subscriber = Client::connect(port);
    assert_eq!(s(&subscriber.cmd(&["AUTH", "sub", "pw"])), "+OK\r\n");
    assert!(s(&subscriber.cmd(&["SUBSCRIBE", "news"])).contains("subscribe"));
    let mut other = Client::connect(port);
    assert_eq!(s(&other.cmd(&["AUTH", "sub", "pw"])), "+OK\r\n");
    assert_eq!(s(&admin.cmd(&["ACL", "DELUSER", "sub"])), ":1\r\n");
    // Neither sends anything: the server closes both (Valkey ACLFreeUserAndKillClients); a
    // connection left open fails the read.
    assert!(subscriber.read_until_closed().is_empty());
    assert!(other.read_until_closed().is_empty());
    // A new user of the same name: its new logins work.
    assert_eq!(
        s(&admin.cmd(&["ACL", "SETUSER", "sub", "on", ">pw", "+@all"])),
        "+OK\r\n"
    );
    let mut again = Client::connect(port);
    assert_eq!(s(&again.cmd(&["AUTH", "sub", "pw"])), "+OK\r\n");
    assert_eq!(s(&again.cmd(&["PING"])), "+PONG\r\n");
    assert_eq!(s(&admin.cmd(&["PING"])), "+PONG\r\n");
}

/// A subscriber whose channel ACL SETUSER takes away is closed; one that keeps its channel
/// stays. Returns (what the first got, the second's PING reply).
fn lost_channel(port: u16) -> (Vec<u8>, String) {
    let mut admin = Client::connect(port);
    assert_eq!(
        s(&admin.cmd(&["ACL", "SETUSER", "ps", "on", ">pw", "+@all", "allchannels"])),
        "+OK\r\n"
    );
    let mut news = Client::connect(port);
    assert_eq!(s(&news.cmd(&["AUTH", "ps", "pw"])), "+OK\r\n");
    assert!(s(&news.cmd(&["SUBSCRIBE", "news"])).contains("subscribe"));
    let mut keep = Client::connect(port);
    assert_eq!(s(&keep.cmd(&["AUTH", "ps", "pw"])), "+OK\r\n");
    assert!(s(&keep.cmd(&["PSUBSCRIBE", "k*"])).contains("psubscribe"));
    assert_eq!(
        s(&admin.cmd(&["ACL", "SETUSER", "ps", "resetchannels", "&k*"])),
        "+OK\r\n"
    );
    let closed = news.read_until_closed();
    (closed, s(&keep.cmd(&["PING"])))
}

#[test]
fn setuser_closes_subscribers_that_lost_their_channel_like_valkey() {
    let [vport, oport] = ports::ports(2)[..] else {
        unreachable!()
    };
    let dir = test_dir("acl-lost-channel");
    let _valkey = start_real_server("valkey-server", vport, &dir.join("valkey"), &[]);
    let mut procs = Procs::default();
    procs.start(&dir, oport, &["--cluster-enabled", "no"]);
    let theirs = lost_channel(vport);
    let ours = lost_channel(oport);
    assert_eq!(ours, theirs);
    assert!(ours.0.is_empty(), "closed without a message");
}

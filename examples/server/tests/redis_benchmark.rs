//! redis-benchmark's default suite gets real replies: every test runs (`-t <test>`) against
//! one node and, with `--cluster`, against a 3+3 cluster of ours. On one node redis-benchmark
//! stops a test at the first error reply and prints `Error from server: ...`; with
//! `--cluster` it counts error replies like any other (the 79k requests/s of issue 20), so
//! each test must print its CSV row, no error, leave the keyspace its commands imply (the
//! checks), and its command sent by hand must not answer an error.
//!
//! [`SUITE`] lists redis-benchmark 7.0's default tests (`redis-benchmark` without `-t`).
//! A test whose commands a family has not served yet is in [`PENDING`]; it must still fail
//! with `unknown command` (so this file is updated when it starts working). Adding a family:
//! move its tests from PENDING to SUITE with a check. Ports from `common::ports`.

mod common;

use common::{bulk_text, ports, run_bounded, six_node_cluster, test_dir, Client, Procs, HANG};
use std::time::Duration;

const N: usize = 2000;
/// `-r`: random keys, members and fields in 0..KEYSPACE.
const KEYSPACE: usize = 100;

/// What a test leaves behind, read on every node of the cluster (the counts are sums).
struct Keys {
    nodes: Vec<u16>,
}

impl Keys {
    fn sum(&self, f: impl Fn(&mut Client) -> i64) -> i64 {
        self.nodes
            .iter()
            .map(|&p| {
                let mut c = Client::connect(p);
                f(&mut c)
            })
            .sum()
    }
    /// The sum of `size_cmd` (SCARD, HLEN, ZCARD) over the keys matching `prefix*`, over every
    /// node.
    fn total_size(&self, prefix: &str, size_cmd: &str) -> i64 {
        self.sum(|c| {
            let r = c.cmd_s(&["KEYS", &format!("{prefix}*")]);
            r.split("\r\n")
                .filter(|l| l.starts_with(prefix))
                .map(|key| {
                    c.cmd_s(&[size_cmd, key])
                        .trim_start_matches(':')
                        .trim_end()
                        .parse::<i64>()
                        .unwrap()
                })
                .sum()
        })
    }
    /// Keys matching `pattern` of `type`, over every node.
    fn count(&self, pattern: &str, kind: &str) -> i64 {
        self.sum(|c| {
            let keys = c.cmd(&["KEYS", pattern]);
            let text = String::from_utf8_lossy(&keys).into_owned();
            text.split("\r\n")
                .filter(|l| !l.starts_with(['*', '$']) && !l.is_empty())
                .filter(|k| c.cmd_s(&["TYPE", k]) == format!("+{kind}\r\n"))
                .count() as i64
        })
    }
    fn int(&self, cmd: &[&str]) -> i64 {
        self.sum(|c| {
            let r = c.cmd_s(cmd);
            r.trim_start_matches(':').trim_end().parse().unwrap_or(0)
        })
    }
}

type Check = fn(&Keys, i64);

/// The command a test sends, sent once by hand: its reply must not be an error.
type Probe = &'static [&'static str];

/// (`-t` name, CSV rows it prints, check of the keyspace afterwards given `spread`: with
/// `--cluster` redis-benchmark gives each primary its own `{tag}`, so each key name exists
/// once per primary).
const SUITE: &[(&str, &[&str], Probe, Check)] = &[
    (
        "ping",
        &["PING_INLINE", "PING_MBULK"],
        &["PING"],
        |k, _spread| {
            assert_eq!(k.int(&["DBSIZE"]), 0);
        },
    ),
    ("set", &["SET"], &["SET", "key:{p}", "v"], |k, spread| {
        let n = k.count("key:*", "string");
        assert!(n > 1 && n <= spread * KEYSPACE as i64, "{n} SET keys");
    }),
    ("get", &["GET"], &["GET", "key:{p}"], |k, _spread| {
        // GET writes nothing.
        assert_eq!(k.int(&["DBSIZE"]), 0);
    }),
    ("incr", &["INCR"], &["INCR", "counter:{p}"], |k, spread| {
        let keys = k.count("counter:*", "string");
        assert!(
            keys > 1 && keys <= spread * KEYSPACE as i64,
            "{keys} counters"
        );
        // Every INCR counted once: the counters sum to N.
        let total = k.sum(|c| {
            let list = String::from_utf8_lossy(&c.cmd(&["KEYS", "counter:*"])).into_owned();
            list.split("\r\n")
                .filter(|l| l.starts_with("counter:"))
                .map(|key| bulk_text(&c.cmd(&["GET", key])).parse::<i64>().unwrap())
                .sum()
        });
        assert_eq!(total, N as i64);
    }),
    (
        "sadd",
        &["SADD"],
        &["SADD", "myset:{p}", "m"],
        |k, spread| {
            let sets = k.count("myset*", "set");
            assert!(sets >= 1 && sets <= spread, "{sets} sets");
            let members = k.total_size("myset", "SCARD");
            assert!(
                members > 1 && members <= spread * KEYSPACE as i64,
                "{members} members"
            );
        },
    ),
    (
        "hset",
        &["HSET"],
        &["HSET", "myhash:{p}", "f", "v"],
        |k, spread| {
            let hashes = k.count("myhash*", "hash");
            assert!(hashes >= 1 && hashes <= spread, "{hashes} hashes");
            let fields = k.total_size("myhash", "HLEN");
            assert!(
                fields > 1 && fields <= spread * (KEYSPACE as i64 + 1),
                "{fields} fields"
            );
        },
    ),
    ("spop", &["SPOP"], &["SPOP", "myset:{p}"], |k, _spread| {
        // SPOP of a missing set answers nil: nothing is left or created.
        assert_eq!(k.count("myset*", "set"), 0);
    }),
    (
        "mset",
        &["MSET (10 keys)"],
        &["MSET", "key:{p}1", "v", "key:{p}2", "v"],
        |k, spread| {
            let n = k.count("key:*", "string");
            assert!(n > 1 && n <= spread * KEYSPACE as i64, "{n} MSET keys");
        },
    ),
];

/// The default tests served by no family yet, with the command each sends: it must answer
/// `unknown command` until then. (Empty: every default test is served.)
const PENDING: &[(&str, Probe)] = &[];

/// Elements of the lists named `mylist*` (one per primary with `--cluster`), summed.
fn list_len(k: &Keys) -> i64 {
    k.sum(|c| {
        let r = c.cmd_s(&["KEYS", "mylist*"]);
        r.split("\r\n")
            .filter(|l| l.starts_with("mylist"))
            .map(|key| {
                c.cmd_s(&["LLEN", key])
                    .trim_start_matches(':')
                    .trim_end()
                    .parse::<i64>()
                    .unwrap()
            })
            .sum()
    })
}

/// The list and sorted-set tests: LPUSH/RPUSH push `N` elements onto `mylist`, LRANGE_* run
/// after an `N`-element LPUSH; LPOP/RPOP/ZPOPMIN on a flushed keyspace pop nothing.
const LIST_ZSET_SUITE: &[(&str, &[&str], Probe, Check)] = &[
    (
        "lpush",
        &["LPUSH"],
        &["LPUSH", "mylist:{p}", "x"],
        |k, spread| {
            assert!(k.count("mylist*", "list") <= spread);
            assert_eq!(list_len(k), N as i64);
        },
    ),
    (
        "rpush",
        &["RPUSH"],
        &["RPUSH", "mylist:{p}", "x"],
        |k, _| {
            assert_eq!(list_len(k), N as i64);
        },
    ),
    ("lpop", &["LPOP"], &["LPOP", "mylist:{p}"], |k, _| {
        assert_eq!(k.int(&["DBSIZE"]), 0);
    }),
    ("rpop", &["RPOP"], &["RPOP", "mylist:{p}"], |k, _| {
        assert_eq!(k.int(&["DBSIZE"]), 0);
    }),
    (
        "zadd",
        &["ZADD"],
        &["ZADD", "myzset:{p}", "1", "x"],
        |k, spread| {
            let sets = k.count("myzset*", "zset");
            assert!(sets >= 1 && sets <= spread, "{sets} sorted sets");
            let members = k.total_size("myzset", "ZCARD");
            assert!(
                members > 1 && members <= spread * KEYSPACE as i64,
                "{members} members"
            );
        },
    ),
    (
        "zpopmin",
        &["ZPOPMIN"],
        &["ZPOPMIN", "myzset:{p}"],
        |k, _| {
            assert_eq!(k.int(&["DBSIZE"]), 0);
        },
    ),
    (
        "lrange_100",
        &[
            "LPUSH (needed to benchmark LRANGE)",
            "LRANGE_100 (first 100 elements)",
        ],
        &["LRANGE", "mylist:{p}", "0", "99"],
        |k, _| assert_eq!(list_len(k), N as i64),
    ),
    (
        "lrange_300",
        &[
            "LPUSH (needed to benchmark LRANGE)",
            "LRANGE_300 (first 300 elements)",
        ],
        &["LRANGE", "mylist:{p}", "0", "299"],
        |k, _| assert_eq!(list_len(k), N as i64),
    ),
    (
        "lrange_500",
        &[
            "LPUSH (needed to benchmark LRANGE)",
            "LRANGE_500 (first 500 elements)",
        ],
        &["LRANGE", "mylist:{p}", "0", "499"],
        |k, _| assert_eq!(list_len(k), N as i64),
    ),
    (
        "lrange_600",
        &[
            "LPUSH (needed to benchmark LRANGE)",
            "LRANGE_600 (first 600 elements)",
        ],
        &["LRANGE", "mylist:{p}", "0", "599"],
        |k, _| assert_eq!(list_len(k), N as i64),
    ),
];

fn benchmark(port: u16, test: &str, cluster: bool) -> String {
    let mut args: Vec<String> = [
        "-p",
        &port.to_string(),
        "-n",
        &N.to_string(),
        "-r",
        &KEYSPACE.to_string(),
        "-c",
        "10",
        "-t",
        test,
        "--csv",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if cluster {
        args.push("--cluster".into());
    }
    let (_, out) = run_bounded("redis-benchmark", &args, Duration::from_secs(120));
    out
}

fn flush(nodes: &[u16]) {
    for &p in nodes {
        let mut c = Client::connect(p);
        // Replicas refuse FLUSHALL; their primaries' flush reaches them.
        let r = c.cmd_s(&["FLUSHALL"]);
        assert!(r == "+OK\r\n" || r.starts_with("-READONLY"), "{r}");
    }
}

fn run_suite(entry: u16, nodes: &[u16], primaries: &[u16], cluster: bool) {
    let keys = Keys {
        nodes: primaries.to_vec(),
    };
    for (test, rows, probe, check) in SUITE.iter().chain(LIST_ZSET_SUITE) {
        flush(nodes);
        let out = benchmark(entry, test, cluster);
        assert!(
            !out.contains("Error from server"),
            "redis-benchmark -t {test}:\n{out}"
        );
        for row in *rows {
            assert!(
                out.contains(&format!("\"{row}\",")),
                "redis-benchmark -t {test} printed no {row} row:\n{out}"
            );
        }
        // The replicas have applied what their primaries wrote before the checks read them
        // (a primary without replicas, the one node, has none to wait for).
        for &p in primaries {
            let mut c = Client::connect(p);
            let replicas = bulk_text(&c.cmd(&["INFO", "replication"]))
                .lines()
                .find_map(|l| l.strip_prefix("connected_slaves:"))
                .map(|n| n.trim().to_string())
                .unwrap_or_else(|| panic!("{p}: no connected_slaves in INFO replication"));
            // The 3+3 cluster gives each primary one replica; the one node has none.
            assert_eq!(replicas, if cluster { "1" } else { "0" }, "{p}'s replicas");
            if replicas != "0" {
                assert_eq!(
                    c.cmd_s(&["WAIT", &replicas, &HANG.as_millis().to_string()]),
                    format!(":{replicas}\r\n"),
                    "{p}: WAIT for its replicas"
                );
            }
        }
        check(&keys, if cluster { primaries.len() as i64 } else { 1 });
        let reply = by_hand(nodes, probe);
        assert!(!reply.starts_with('-'), "{probe:?}: {reply}");
    }
    for (test, probe) in PENDING {
        flush(nodes);
        let out = benchmark(entry, test, cluster);
        let reply = by_hand(nodes, probe);
        let unknown = reply.starts_with("-ERR unknown command")
            && (cluster || out.contains("Error from server: ERR unknown command"));
        assert!(
            unknown,
            "redis-benchmark -t {test} works now: move it from PENDING to SUITE:\n{out}\n{reply}"
        );
    }
}

/// `argv` sent to the node that serves its key (following one MOVED).
fn by_hand(nodes: &[u16], argv: &[&str]) -> String {
    let mut reply = Client::connect(nodes[0]).cmd_s(argv);
    if let Some(rest) = reply.strip_prefix("-MOVED ") {
        let port: u16 = rest.trim_end().rsplit(':').next().unwrap().parse().unwrap();
        reply = Client::connect(port).cmd_s(argv);
    }
    reply
}

#[test]
fn every_default_test_gets_real_replies_on_one_node() {
    let dir = test_dir("redis-benchmark-one");
    let mut procs = Procs::default();
    let port = ports::port();
    procs.start(&dir, port, &["--cluster-enabled", "no"]);
    run_suite(port, &[port], &[port], false);
}

#[test]
fn every_default_test_gets_real_replies_with_cluster() {
    common::require_redis_tools();
    let dir = test_dir("redis-benchmark-cluster");
    let mut procs = Procs::default();
    let ports = six_node_cluster(&mut procs, &dir, ports::block(6));
    let primaries: Vec<u16> = ports
        .iter()
        .copied()
        .filter(|&p| Client::connect(p).cmd_s(&["ROLE"]).contains("master"))
        .collect();
    assert_eq!(primaries.len(), 3);
    run_suite(primaries[0], &ports, &primaries, true);
}

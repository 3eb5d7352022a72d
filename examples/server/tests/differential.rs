//! Differential tests: the same command sequences on redis-server 7.0, valkey-server 9.1
//! and ours, replies compared byte for byte, in RESP2 and in RESP3.
//!
//! Cases live in `tests/vectors/differential/*.txt` (one file per family; add a file or a
//! case to cover more). Format:
//! * `# mode: standalone` or `# mode: cluster` (first line; cluster: each server is a
//!   one-node cluster owning every slot), other `#` lines are comments;
//! * `## name` starts a case: every server gets a fresh connection and `FLUSHALL`, then the
//!   case's commands run in order on each, once over RESP2 and once over RESP3 (`HELLO 3`);
//! * a command line: arguments split at spaces, `"..."` quotes an argument (with `\"`, `\\`,
//!   `\n`, `\r`, `\xHH` escapes); a prefix chooses the comparison:
//!   - none: the reply bytes must be equal;
//!   - `@sorted`: aggregates of plain values are compared as multisets (set and hash
//!     replies whose order is the hash table's);
//!   - `@len`: only the type and length line (random picks: SRANDMEMBER, SPOP);
//!   - `@type`: only the type byte;
//!   - `@any`: run, not compared (setup whose reply differs by design, e.g. DEBUG);
//!   - `@ttl=N`: a TTL read back after a relative expiry of N seconds (EX, EXPIRE, SETEX,
//!     PSETEX, GETEX EX/PX): the reply of every one of the three servers must be an integer
//!     in `[N - ceil(elapsed / 1 s), N]`, `elapsed` being read from the clock before the
//!     case's first command and after the three replies (TTL rounds the remaining ms, so a
//!     stall of 500 ms between the EXPIRE and the TTL makes 100 read 99 on any server).
//!     Where a TTL's survival is checked (RENAME, COPY, KEEPTTL, INCR), cases set it with
//!     EXAT/PXAT far ahead and read it with EXPIRETIME/PEXPIRETIME, exactly;
//!   - `@valkey`: compared with valkey-server 9.1 instead of redis-server 7.0: the places
//!     where we follow Valkey (the reason is in a `#` comment above the line).
//!
//! Every mismatch is reported (case, protocol, command, both replies) before the test fails.
//! Peers: redis-server 7.0 and valkey-server 9.1 (see `.ci/run`); ports from `common::ports`.

#![allow(clippy::disallowed_methods)] // `@ttl` cases bound a TTL by the wall clock

mod common;

use common::{encode, frame_len, ports, test_dir, Client, Logged, Procs, RealServer};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Compare {
    Exact,
    Sorted,
    Len,
    Type,
    Any,
    /// `@ttl=N`: an integer reply in `[N - ceil(elapsed s), N]` from every server.
    Ttl(i64),
}

#[derive(Debug, Clone)]
struct Line {
    compare: Compare,
    valkey: bool,
    argv: Vec<Vec<u8>>,
    text: String,
}

#[derive(Debug, Clone)]
struct Case {
    name: String,
    lines: Vec<Line>,
}

/// Splits a command line (see the module docs).
fn split(line: &str) -> Vec<Vec<u8>> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && b[i] == b' ' {
            i += 1;
        }
        if i >= b.len() {
            break;
        }
        let mut arg = Vec::new();
        if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' && i + 1 < b.len() {
                    i += 1;
                    match b[i] {
                        b'n' => arg.push(b'\n'),
                        b'r' => arg.push(b'\r'),
                        b'x' if i + 2 < b.len() => {
                            let h = std::str::from_utf8(&b[i + 1..i + 3]).unwrap();
                            arg.push(u8::from_str_radix(h, 16).expect("\\xHH"));
                            i += 2;
                        }
                        c => arg.push(c),
                    }
                } else {
                    arg.push(b[i]);
                }
                i += 1;
            }
            i += 1;
        } else {
            while i < b.len() && b[i] != b' ' {
                arg.push(b[i]);
                i += 1;
            }
        }
        out.push(arg);
    }
    out
}

fn parse_cases(text: &str) -> (bool, Vec<Case>) {
    let mut cluster = false;
    let mut cases: Vec<Case> = Vec::new();
    for raw in text.lines() {
        let line = raw.trim();
        if let Some(mode) = line.strip_prefix("# mode:") {
            cluster = mode.trim() == "cluster";
            continue;
        }
        if let Some(name) = line.strip_prefix("## ") {
            cases.push(Case {
                name: name.trim().to_owned(),
                lines: Vec::new(),
            });
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut rest = line;
        let mut compare = Compare::Exact;
        let mut valkey = false;
        while let Some(r) = rest.strip_prefix('@') {
            let (tag, after) = r.split_once(' ').unwrap_or((r, ""));
            match tag {
                "sorted" => compare = Compare::Sorted,
                "len" => compare = Compare::Len,
                "type" => compare = Compare::Type,
                "any" => compare = Compare::Any,
                t if t.starts_with("ttl=") => {
                    let n = t["ttl=".len()..]
                        .parse()
                        .unwrap_or_else(|_| panic!("@ttl=N needs a number: {raw:?}"));
                    compare = Compare::Ttl(n);
                }
                "valkey" => valkey = true,
                other => panic!("unknown tag @{other} in {raw:?}"),
            }
            rest = after.trim_start();
        }
        let case = cases
            .last_mut()
            .unwrap_or_else(|| panic!("a command before the first `## case`: {raw:?}"));
        case.lines.push(Line {
            compare,
            valkey,
            argv: split(rest),
            text: rest.to_owned(),
        });
    }
    (cluster, cases)
}

/// One reply as a tree (enough RESP2/RESP3 to sort aggregates).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Node {
    Leaf(Vec<u8>),
    Agg(u8, Vec<Node>),
}

fn parse_node(b: &[u8], pos: &mut usize) -> Node {
    let len = frame_len(b, *pos).expect("complete reply");
    let t = b[*pos];
    if !matches!(t, b'*' | b'~' | b'%' | b'>' | b'|') {
        let leaf = b[*pos..*pos + len].to_vec();
        *pos += len;
        return Node::Leaf(leaf);
    }
    let end = b[*pos..].windows(2).position(|w| w == b"\r\n").unwrap() + *pos;
    let n: i64 = std::str::from_utf8(&b[*pos + 1..end])
        .unwrap()
        .parse()
        .unwrap();
    *pos = end + 2;
    if n < 0 {
        return Node::Leaf(b"nil-aggregate".to_vec());
    }
    let count = if matches!(t, b'%' | b'|') { 2 * n } else { n };
    let mut kids: Vec<Node> = (0..count).map(|_| parse_node(b, pos)).collect();
    if matches!(t, b'%' | b'|') {
        // Keep pairs together.
        let mut pairs: Vec<Node> = kids
            .chunks(2)
            .map(|p| Node::Agg(b'p', p.to_vec()))
            .collect();
        pairs.sort();
        kids = pairs;
    }
    Node::Agg(t, kids)
}

/// Sorts every aggregate whose elements are all plain values (or pairs).
fn normalise(n: Node) -> Node {
    match n {
        Node::Leaf(_) => n,
        Node::Agg(t, kids) => {
            let mut kids: Vec<Node> = kids.into_iter().map(normalise).collect();
            let flat = kids
                .iter()
                .all(|k| matches!(k, Node::Leaf(_) | Node::Agg(b'p', _)));
            if flat {
                kids.sort();
            }
            Node::Agg(t, kids)
        }
    }
}

fn same(compare: Compare, want: &[u8], got: &[u8]) -> bool {
    let head = |b: &[u8]| -> Vec<u8> {
        let end = b.windows(2).position(|w| w == b"\r\n").unwrap_or(b.len());
        b[..end].to_vec()
    };
    match compare {
        Compare::Exact => want == got,
        Compare::Any => true,
        Compare::Type => want.first() == got.first(),
        Compare::Len => head(want) == head(got),
        Compare::Sorted => {
            want.first() == got.first()
                && normalise(parse_node(want, &mut 0)) == normalise(parse_node(got, &mut 0))
        }
        // Checked on each server's reply against its bounds ([`ttl_within`]), not pairwise.
        Compare::Ttl(_) => unreachable!("@ttl lines are checked by ttl_within"),
    }
}

/// Whether `reply` is the integer reply of a TTL read `elapsed` after (at most) a relative
/// expiry of `n` seconds was set: in `[n - ceil(elapsed in s), n]`. TTL reports
/// `(remaining ms + 500) / 1000`: at most `n`, and the remaining ms are at least
/// `n * 1000 - elapsed` (less a ms of clock granularity the +500 absorbs).
fn ttl_within(n: i64, elapsed: Duration, reply: &[u8]) -> bool {
    let Some(v) = std::str::from_utf8(reply)
        .ok()
        .and_then(|s| s.strip_prefix(':'))
        .and_then(|s| s.strip_suffix("\r\n"))
        .and_then(|s| s.parse::<i64>().ok())
    else {
        return false;
    };
    let secs = elapsed.as_nanos().div_ceil(1_000_000_000) as i64;
    (n - secs..=n).contains(&v)
}

struct Peer {
    name: &'static str,
    port: u16,
}

/// Starts the real server `bin` on `port` (in the C locale: SORT ALPHA compares bytes, as
/// ours does), its files and log in `dir`/`bin-port`; waits until it listens.
fn spawn_real(bin: &str, port: u16, dir: &Path, cluster: bool) -> RealServer {
    let d = dir.join(format!("{bin}-{port}"));
    std::fs::create_dir_all(&d).unwrap();
    let mut c = Command::new(bin);
    c.env("LC_ALL", "C")
        .args([
            "--port",
            &port.to_string(),
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .args(["--enable-debug-command", "yes", "--daemonize", "no"])
        .arg("--dir")
        .arg(&d);
    if cluster {
        c.args(["--cluster-enabled", "yes"]);
    }
    let mut child = Logged::spawn(&mut c, &d.join("log"), &format!("{bin} on {port}"));
    child.wait_listening(port);
    RealServer(child)
}

/// A one-node cluster owning every slot, when `cluster`.
fn own_every_slot(port: u16, cluster: bool) {
    if !cluster {
        return;
    }
    common::own_every_slot(port);
}

struct Servers {
    _procs: Procs,
    _real: Vec<RealServer>,
    redis: Peer,
    valkey: Peer,
    ours: Peer,
}

/// Ours on `base`, redis-server on `base + 1`, valkey-server on `base + 2`.
fn start(base: u16, cluster: bool, dir: &Path) -> Servers {
    let mut procs = Procs::default();
    let enabled = if cluster { "yes" } else { "no" };
    procs.start(dir, base, &["--cluster-enabled", enabled]);
    let real = vec![
        spawn_real("redis-server", base + 1, dir, cluster),
        spawn_real("valkey-server", base + 2, dir, cluster),
    ];
    for p in [base, base + 1, base + 2] {
        own_every_slot(p, cluster);
    }
    Servers {
        _procs: procs,
        _real: real,
        ours: Peer {
            name: "ours",
            port: base,
        },
        redis: Peer {
            name: "redis-server 7.0",
            port: base + 1,
        },
        valkey: Peer {
            name: "valkey-server 9.1",
            port: base + 2,
        },
    }
}

fn connect(port: u16, resp3: bool) -> Client {
    let mut c = Client::connect(port);
    if resp3 {
        let r = c.cmd(&["HELLO", "3"]);
        assert_eq!(r[0], b'%', "HELLO 3 on {port}");
    }
    c.cmd(&["FLUSHALL"]);
    c
}

fn request(c: &mut Client, argv: &[Vec<u8>]) -> Vec<u8> {
    let a: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
    c.send_raw(&encode(&a));
    c.read_reply()
}

/// Runs every case of `file`; returns the mismatches as readable lines.
fn run_file(file: &Path, s: &Servers) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap();
    let (_, cases) = parse_cases(&text);
    let mut bad = Vec::new();
    for case in &cases {
        for resp3 in [false, true] {
            let mut ours = connect(s.ours.port, resp3);
            let mut redis = connect(s.redis.port, resp3);
            let mut valkey = connect(s.valkey.port, resp3);
            // Read before the case's first command: every relative expiry comes after it.
            let start = Instant::now();
            for line in &case.lines {
                let got = request(&mut ours, &line.argv);
                let r = request(&mut redis, &line.argv);
                let v = request(&mut valkey, &line.argv);
                if let Compare::Ttl(n) = line.compare {
                    // Read after the three replies: each TTL was computed before it.
                    let elapsed = start.elapsed();
                    for (peer, reply) in [(&s.ours, &got), (&s.redis, &r), (&s.valkey, &v)] {
                        if !ttl_within(n, elapsed, reply) {
                            bad.push(format!(
                                "{}: case {:?} (RESP{}): {}\n    {}: {:?}, not a TTL in \
                                 [{n} - ceil({elapsed:?}), {n}]",
                                file.file_name().unwrap().to_string_lossy(),
                                case.name,
                                if resp3 { 3 } else { 2 },
                                line.text,
                                peer.name,
                                String::from_utf8_lossy(reply),
                            ));
                        }
                    }
                    continue;
                }
                let (peer, want) = if line.valkey {
                    (&s.valkey, v)
                } else {
                    (&s.redis, r)
                };
                if !same(line.compare, &want, &got) {
                    bad.push(format!(
                        "{}: case {:?} (RESP{}): {}\n    {}: {:?}\n    {}: {:?}",
                        file.file_name().unwrap().to_string_lossy(),
                        case.name,
                        if resp3 { 3 } else { 2 },
                        line.text,
                        peer.name,
                        String::from_utf8_lossy(&want),
                        s.ours.name,
                        String::from_utf8_lossy(&got),
                    ));
                }
            }
        }
    }
    bad
}

fn case_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/differential");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    files
}

fn run_mode(cluster: bool, base: u16) {
    let files: Vec<PathBuf> = case_files()
        .into_iter()
        .filter(|f| parse_cases(&std::fs::read_to_string(f).unwrap()).0 == cluster)
        .collect();
    assert!(!files.is_empty(), "no case files for this mode");
    let dir = test_dir(if cluster {
        "differential-cluster"
    } else {
        "differential"
    });
    let servers = start(base, cluster, &dir);
    let mut bad = Vec::new();
    let mut lines = 0;
    for f in &files {
        let cases = parse_cases(&std::fs::read_to_string(f).unwrap()).1;
        // Every file runs something: a file whose cases all came out empty checks nothing.
        assert!(
            !cases.is_empty() && cases.iter().all(|c| !c.lines.is_empty()),
            "{}: a case without commands, or no case",
            f.display()
        );
        lines += cases.iter().map(|c| c.lines.len()).sum::<usize>();
        bad.extend(run_file(f, &servers));
    }
    assert!(lines > 0);
    assert!(
        bad.is_empty(),
        "{} of {} commands (x2 protocols) differ:\n{}",
        bad.len(),
        lines,
        bad.join("\n")
    );
}

#[test]
fn standalone_replies_match_redis_byte_for_byte() {
    run_mode(false, ports::block(3));
}

#[test]
fn cluster_mode_replies_match_redis_byte_for_byte() {
    run_mode(true, ports::block(3));
}

/// INCRBYFLOAT and HINCRBYFLOAT (80-bit long double arithmetic and `%.17Lf` formatting) on
/// seeded random operands: integers, decimals of 1 to 19 digits, exponents, negative values.
#[test]
fn incrbyfloat_matches_redis_on_random_operands() {
    let dir = test_dir("differential-float");
    let s = start(ports::block(3), false, &dir);
    let mut ours = connect(s.ours.port, false);
    let mut redis = connect(s.redis.port, false);
    // xorshift64*, fixed seed: the same operands every run.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let mut operand = move || -> String {
        let r = next();
        let digits = 1 + (r % 19) as usize;
        let mut m: String = (0..digits)
            .map(|i| char::from(b'0' + ((r >> (i % 60)) % 10) as u8))
            .collect();
        if m.len() > 1 {
            m = m.trim_start_matches('0').to_string();
            if m.is_empty() {
                m = "0".into();
            }
        }
        let point = (r >> 20) as usize % (m.len() + 1);
        let mut t = if point > 0 && point < m.len() {
            format!("{}.{}", &m[..point], &m[point..])
        } else {
            m
        };
        if (r >> 30) % 5 == 0 {
            t = format!("{t}e{}", ((r >> 33) % 40) as i64 - 20);
        }
        if (r >> 40) % 3 == 0 {
            t = format!("-{t}");
        }
        t
    };
    let mut bad = Vec::new();
    for i in 0..300 {
        let (a, b) = (operand(), operand());
        for c in [&mut ours, &mut redis] {
            c.cmd(&["SET", "f", &a]);
            c.cmd(&["HSET", "h", "f", &a]);
        }
        for cmd in [
            vec!["INCRBYFLOAT", "f", b.as_str()],
            vec!["HINCRBYFLOAT", "h", "f", b.as_str()],
        ] {
            let (o, r) = (ours.cmd(&cmd), redis.cmd(&cmd));
            if o != r {
                bad.push(format!(
                    "#{i} {a} {cmd:?}: redis {:?}, ours {:?}",
                    String::from_utf8_lossy(&r),
                    String::from_utf8_lossy(&o)
                ));
            }
        }
    }
    assert!(bad.is_empty(), "{} differ:\n{}", bad.len(), bad.join("\n"));
}

#[test]
fn the_case_format_parses() {
    let (cluster, cases) = parse_cases(
        "# mode: cluster\n## one\nSET k \"a b\"\n@sorted @valkey SMEMBERS \"\\x41\"\n## two\nGET k\n",
    );
    assert!(cluster);
    assert_eq!(cases.len(), 2);
    assert_eq!(
        cases[0].lines[0].argv,
        vec![b"SET".to_vec(), b"k".to_vec(), b"a b".to_vec()]
    );
    let l = &cases[0].lines[1];
    assert!(l.valkey && l.compare == Compare::Sorted);
    assert_eq!(l.argv[1], b"A");
    // Sorted comparison: same members in another order are equal, a different member not.
    assert!(same(
        Compare::Sorted,
        b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
        b"*2\r\n$1\r\nb\r\n$1\r\na\r\n"
    ));
    assert!(!same(
        Compare::Sorted,
        b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
        b"*2\r\n$1\r\nb\r\n$1\r\nc\r\n"
    ));
    assert!(!same(
        Compare::Sorted,
        b"~1\r\n$1\r\na\r\n",
        b"*1\r\n$1\r\na\r\n"
    ));
    assert!(same(
        Compare::Len,
        b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
        b"*2\r\n$1\r\nx\r\n$1\r\ny\r\n"
    ));
    // @ttl=N: N less the whole seconds (rounded up) the case took, up to N; integers only.
    let (_, cases) = parse_cases("## t\n@ttl=100 TTL k\n");
    assert_eq!(cases[0].lines[0].compare, Compare::Ttl(100));
    assert_eq!(cases[0].lines[0].argv, vec![b"TTL".to_vec(), b"k".to_vec()]);
    let ms = Duration::from_millis;
    assert!(ttl_within(100, ms(0), b":100\r\n"));
    assert!(!ttl_within(100, ms(0), b":99\r\n"));
    assert!(!ttl_within(100, ms(0), b":101\r\n"));
    assert!(ttl_within(100, ms(600), b":99\r\n"));
    assert!(!ttl_within(100, ms(600), b":98\r\n"));
    assert!(ttl_within(100, ms(1001), b":98\r\n"));
    assert!(!ttl_within(100, ms(1001), b":97\r\n"));
    assert!(!ttl_within(100, ms(0), b"$3\r\n100\r\n"));
    assert!(!ttl_within(100, ms(0), b":-1\r\n"));
}

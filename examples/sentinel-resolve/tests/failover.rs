//! Integration test with real servers from Debian's packages (`redis-server`,
//! `redis-sentinel`): one primary, two replicas, three Sentinels on loopback ports from the
//! shared allocator (`ferrocluster_testkit::ports`). The resolver finds the primary and the
//! replicas; after `kill -9` of the primary it finds the promoted replica; when the old
//! primary comes back still believing it is primary, it is never reported, and the resolver
//! keeps the new primary once Sentinel has demoted the old one. Every process is a
//! `Logged` child (its output in a log of the test's directory, which is kept when the test
//! fails), killed on drop, even on failure. Every wait only bounds a hang (`HANG`); the
//! times a run takes are printed, never asserted.
#![allow(clippy::disallowed_methods)] // a host-side test: real clock, real processes

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use ferrocluster_testkit::proc::{log_tail, Logged, TAIL_LINES};
use ferrocluster_testkit::{ports, wait_until, TestDir, HANG};
use redis_protocol::resp2::types::OwnedFrame;

const SERVICE: &str = "mymaster";
const BIN: &str = env!("CARGO_BIN_EXE_sentinel-resolve");
/// Sentinel's `down-after-milliseconds` from the start: longer than any stall of a loaded
/// machine, so a live primary never looks down (no spurious failover).
const START_DOWN_AFTER_MS: u64 = 60_000;
/// `down-after-milliseconds` every Sentinel gets (`SENTINEL SET`) just before the test kills
/// the primary, for a quick failover.
const DOWN_AFTER_MS: u64 = 5000;

/// The test's ports, all from the allocator: held by this process, so the `unused` ones
/// have no listener.
struct Net {
    primary: u16,
    replicas: [u16; 2],
    sentinels: [u16; 3],
    unused: [u16; 3],
}

impl Net {
    fn new() -> Net {
        let p = ports::ports(9);
        Net {
            primary: p[0],
            replicas: [p[1], p[2]],
            sentinels: [p[3], p[4], p[5]],
            unused: [p[6], p[7], p[8]],
        }
    }
}

fn addr(port: u16) -> String {
    format!("127.0.0.1:{port}")
}

/// Every process the test started, as `Logged` children (killed and reaped on drop, even on
/// panic), each logging to `<name>.log` in `dir`. Declare it after the test's `TestDir`.
struct Procs {
    dir: PathBuf,
    children: Vec<(String, Logged)>,
}

impl Procs {
    fn spawn(&mut self, name: &str, cmd: &mut Command) -> &mut Logged {
        let child = Logged::spawn(cmd, &self.dir.join(format!("{name}.log")), name);
        self.children.push((name.to_string(), child));
        &mut self.children.last_mut().expect("just pushed").1
    }

    fn kill(&mut self, name: &str) {
        let i = self
            .children
            .iter()
            .position(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no process {name}"));
        let (_, mut child) = self.children.remove(i);
        child.kill();
    }
}

fn which(bin: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(bin))
        .find(|p| p.is_file())
}

/// One command over a fresh connection; `Err` if the server is not there (connect and read
/// give up only after `HANG`).
fn cmd(port: u16, args: &[&str]) -> Result<OwnedFrame, String> {
    let mut s = TcpStream::connect_timeout(
        &format!("127.0.0.1:{port}")
            .parse()
            .expect("literal address"),
        HANG,
    )
    .map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(HANG)).map_err(|e| e.to_string())?;
    let mut req = format!("*{}\r\n", args.len());
    for a in args {
        req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some((frame, _)) =
            redis_protocol::resp2::decode::decode(&buf).map_err(|e| format!("{e:?}"))?
        {
            return Ok(frame);
        }
        let n = s.read(&mut chunk).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("closed".into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn text(f: &OwnedFrame) -> String {
    match f {
        OwnedFrame::BulkString(b) | OwnedFrame::SimpleString(b) => {
            String::from_utf8_lossy(b).into_owned()
        }
        OwnedFrame::Integer(i) => i.to_string(),
        other => format!("{other:?}"),
    }
}

fn role(port: u16) -> Option<String> {
    match cmd(port, &["ROLE"]).ok()? {
        OwnedFrame::Array(items) => items.first().map(text),
        _ => None,
    }
}

fn sentinel_primary(sentinel: u16) -> Option<String> {
    match cmd(sentinel, &["SENTINEL", "get-master-addr-by-name", SERVICE]).ok()? {
        OwnedFrame::Array(items) if items.len() == 2 => {
            Some(format!("{}:{}", text(&items[0]), text(&items[1])))
        }
        _ => None,
    }
}

/// Replicas a Sentinel lists without a down/disconnected flag.
fn sentinel_healthy_replicas(sentinel: u16) -> usize {
    let Ok(OwnedFrame::Array(entries)) = cmd(sentinel, &["SENTINEL", "replicas", SERVICE]) else {
        return 0;
    };
    entries
        .iter()
        .filter(|e| {
            let OwnedFrame::Array(kv) = e else {
                return false;
            };
            kv.chunks(2).any(|p| {
                text(&p[0]) == "flags" && {
                    let f = text(&p[1]);
                    !f.contains("s_down") && !f.contains("disconnected")
                }
            })
        })
        .count()
}

/// Whether every Sentinel names `primary` and none has a failover in progress.
fn failover_settled(net: &Net, primary: &str) -> bool {
    net.sentinels.iter().all(|s| {
        sentinel_primary(*s).as_deref() == Some(primary)
            && match cmd(*s, &["SENTINEL", "master", SERVICE]) {
                Ok(OwnedFrame::Array(kv)) => kv
                    .chunks(2)
                    .any(|p| text(&p[0]) == "flags" && !text(&p[1]).contains("failover")),
                _ => false,
            }
    })
}

fn known_sentinels(sentinel: u16) -> usize {
    match cmd(sentinel, &["SENTINEL", "sentinels", SERVICE]) {
        Ok(OwnedFrame::Array(v)) => v.len(),
        _ => 0,
    }
}

/// A config file in `dir/name/`; the process logs to stdout (its `Logged` log).
fn write_conf(dir: &Path, name: &str, body: &str) -> PathBuf {
    let d = dir.join(name);
    fs::create_dir_all(&d).expect("create node dir");
    let conf = d.join("node.conf");
    fs::write(
        &conf,
        format!(
            "bind 127.0.0.1\ndaemonize no\ndir {}\nlogfile \"\"\n{body}",
            d.display()
        ),
    )
    .expect("write conf");
    conf
}

fn server_conf(dir: &Path, port: u16, replicaof: Option<u16>) -> PathBuf {
    let mut body = format!(
        "port {port}\nsave \"\"\nappendonly no\nrepl-diskless-sync yes\nrepl-diskless-sync-delay 0\n"
    );
    if let Some(p) = replicaof {
        body.push_str(&format!("replicaof 127.0.0.1 {p}\n"));
    }
    write_conf(dir, &format!("redis-{port}"), &body)
}

fn sentinel_conf(dir: &Path, port: u16, primary: u16) -> PathBuf {
    write_conf(
        dir,
        &format!("sentinel-{port}"),
        &format!(
            "port {port}\n\
             sentinel monitor {SERVICE} 127.0.0.1 {primary} 2\n\
             sentinel down-after-milliseconds {SERVICE} {START_DOWN_AFTER_MS}\n\
             sentinel failover-timeout {SERVICE} 4000\n\
             sentinel parallel-syncs {SERVICE} 2\n"
        ),
    )
}

/// A one-shot run of the resolver: its exit status and its output (stdout and stderr in one
/// log: a successful run writes nothing to stderr).
#[derive(Debug)]
struct Run {
    status: ExitStatus,
    out: String,
}

/// Runs the resolver once to its end, as a `Logged` child whose log (`resolve-N.log` in
/// `dir`) is its output. Its own budgets only bound a hang (`HANG`): a Sentinel or a node
/// counts as unreachable when it refuses the connection, never because a loaded machine was
/// slow; a run that hangs fails the test.
fn resolve(dir: &Path, args: &[&str]) -> Run {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let hang_ms = HANG.as_millis().to_string();
    let log = dir.join(format!(
        "resolve-{}.log",
        RUNS.fetch_add(1, Ordering::Relaxed)
    ));
    let mut child = Logged::spawn(
        Command::new(BIN)
            .args([
                "--sentinel-timeout-ms",
                &hang_ms,
                "--node-timeout-ms",
                &hang_ms,
                "--resolve-timeout-ms",
                &hang_ms,
            ])
            .args(args),
        &log,
        &format!("sentinel-resolve {args:?}"),
    );
    let status = child.wait_exit();
    let out = fs::read_to_string(&log).unwrap_or_default();
    Run { status, out }
}

fn sentinel_args(net: &Net) -> Vec<String> {
    net.sentinels
        .iter()
        .flat_map(|p| ["--sentinel".to_string(), addr(*p)])
        .collect()
}

/// One-shot resolution of the primary through all three Sentinels.
fn resolve_primary(dir: &Path, net: &Net) -> Run {
    let mut args = sentinel_args(net);
    args.push(SERVICE.into());
    resolve(dir, &args.iter().map(String::as_str).collect::<Vec<_>>())
}

fn stdout(o: &Run) -> String {
    o.out.trim().to_string()
}

/// Sets its flag on drop: stops the thread that follows the watch's log.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Follows the `--watch` run's log (stdout and stderr in one file) from its start: each
/// stdout line, `<time> primary <addr> via <sentinel>` (stderr lines have `error`,
/// `close-pool` or `data` as their second word), with the instant it was read.
fn follow_watch(log: PathBuf) -> (mpsc::Receiver<(Instant, String)>, StopOnDrop) {
    let (tx, lines) = mpsc::channel::<(Instant, String)>();
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = Arc::clone(&stop);
    std::thread::spawn(move || {
        let Ok(mut f) = fs::File::open(&log) else {
            return;
        };
        let mut pending = Vec::new();
        let mut buf = [0u8; 8192];
        while !stopped.load(Ordering::SeqCst) {
            match f.read(&mut buf) {
                Ok(0) => std::thread::sleep(Duration::from_millis(10)),
                Ok(n) => {
                    pending.extend_from_slice(&buf[..n]);
                    while let Some(i) = pending.iter().position(|&b| b == b'\n') {
                        let line: Vec<u8> = pending.drain(..=i).collect();
                        let line = String::from_utf8_lossy(&line).trim_end().to_string();
                        if line.split_whitespace().nth(1) == Some("primary")
                            && tx.send((Instant::now(), line)).is_err()
                        {
                            return;
                        }
                    }
                }
                Err(_) => return,
            }
        }
    });
    (lines, StopOnDrop(stop))
}

#[test]
fn resolver_follows_a_real_sentinel_failover() {
    let test_start = Instant::now();
    let server = which("redis-server");
    let sentinel = which("redis-sentinel");
    assert!(
        server.is_some() && sentinel.is_some(),
        "redis-server and redis-sentinel must be installed for this test: \
         run `apt-get install redis-server redis-sentinel`"
    );
    let (server, sentinel) = (server.expect("checked"), sentinel.expect("checked"));
    let net = Net::new();
    // Declared before `procs`: the children are killed before the directory goes (kept when
    // the test fails).
    let test_dir = TestDir::new("sentinel-failover");
    let dir: &Path = &test_dir;
    let mut procs = Procs {
        dir: dir.to_path_buf(),
        children: Vec::new(),
    };
    let primary = net.primary;

    // --- one primary, two replicas, three Sentinels --------------------------------------
    let primary_conf = server_conf(dir, primary, None);
    procs
        .spawn("primary", Command::new(&server).arg(&primary_conf))
        .wait_listening(primary);
    for (i, r) in net.replicas.into_iter().enumerate() {
        procs
            .spawn(
                &format!("replica-{i}"),
                Command::new(&server).arg(server_conf(dir, r, Some(primary))),
            )
            .wait_listening(r);
    }
    wait_until("data nodes up, replicas in sync", || {
        net.replicas.iter().all(|r| {
            matches!(cmd(*r, &["ROLE"]), Ok(OwnedFrame::Array(v))
                if v.len() >= 4 && text(&v[3]) == "connected")
        })
    });
    for (i, s) in net.sentinels.into_iter().enumerate() {
        procs
            .spawn(
                &format!("sentinel-{i}"),
                Command::new(&sentinel).arg(sentinel_conf(dir, s, primary)),
            )
            .wait_listening(s);
    }
    wait_until("Sentinels know each other and both replicas", || {
        net.sentinels
            .iter()
            .all(|s| known_sentinels(*s) == 2 && sentinel_healthy_replicas(*s) == 2)
    });
    eprintln!("[{:?}] cluster up", test_start.elapsed());

    // --- steps 1-3 against real servers -------------------------------------------------
    let o = resolve_primary(dir, &net);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(stdout(&o), addr(primary));

    // The first Sentinel is not there: the next one answers.
    let o = resolve(
        dir,
        &[
            "-s",
            &addr(net.unused[0]),
            "-s",
            &addr(net.sentinels[1]),
            "--refresh-sentinels",
            SERVICE,
        ],
    );
    assert!(o.status.success(), "{o:?}");
    assert_eq!(stdout(&o), addr(primary));

    let mut args = sentinel_args(&net);
    args.extend(["--replicas".to_string(), SERVICE.to_string()]);
    let o = resolve(dir, &args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{o:?}");
    let mut replicas: Vec<String> = stdout(&o).lines().map(str::to_string).collect();
    replicas.sort();
    let mut want: Vec<String> = net.replicas.iter().map(|r| addr(*r)).collect();
    want.sort();
    assert_eq!(replicas, want);

    // The two error kinds.
    let mut args = sentinel_args(&net);
    args.push("nosuchservice".into());
    let o = resolve(dir, &args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(o.status.code(), Some(4), "{o:?}");
    assert!(
        o.out
            .contains("no Sentinel knows the service nosuchservice"),
        "{o:?}"
    );
    let o = resolve(
        dir,
        &[
            "-s",
            &addr(net.unused[0]),
            "-s",
            &addr(net.unused[1]),
            "-s",
            &addr(net.unused[2]),
            SERVICE,
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{o:?}");
    assert!(o.out.contains("no Sentinel could be reached"), "{o:?}");

    // --- watch, then kill -9 the primary -------------------------------------------------
    let mut args = sentinel_args(&net);
    args.extend([
        "--watch".into(),
        "--refresh-sentinels".into(),
        SERVICE.into(),
    ]);
    let watch_log = dir.join("watch.log");
    procs.spawn("watch", Command::new(BIN).args(&args));
    let (lines, _follow) = follow_watch(watch_log.clone());
    let next_line =
        |within: Duration| -> Option<(Instant, String)> { lines.recv_timeout(within).ok() };
    let (_, first) = next_line(HANG).unwrap_or_else(|| {
        panic!(
            "the watch printed no primary within {HANG:?} (a hang):\n{}",
            log_tail(&watch_log, TAIL_LINES)
        )
    });
    assert!(
        first.contains(&format!(" primary {} via ", addr(primary))),
        "{first}"
    );

    // Every Sentinel detects the dead primary with the short down-after from now on.
    let down_after = DOWN_AFTER_MS.to_string();
    for s in net.sentinels {
        let r = cmd(
            s,
            &[
                "SENTINEL",
                "SET",
                SERVICE,
                "down-after-milliseconds",
                &down_after,
            ],
        );
        assert!(
            matches!(&r, Ok(f) if text(f) == "OK"),
            "SENTINEL SET down-after-milliseconds on {s}: {r:?}"
        );
    }
    procs.kill("primary");
    let killed_at = Instant::now();
    let mut sentinel_switched_at = None;
    let deadline = killed_at + HANG;
    let (followed_at, new_primary) = loop {
        assert!(
            Instant::now() < deadline,
            "no new primary within {HANG:?} of kill -9 (a hang):\n{}",
            log_tail(&watch_log, TAIL_LINES)
        );
        if sentinel_switched_at.is_none()
            && sentinel_primary(net.sentinels[0]).is_some_and(|p| p != addr(primary))
        {
            sentinel_switched_at = Some(Instant::now());
        }
        if let Some((at, line)) = next_line(Duration::from_millis(50)) {
            eprintln!("watch: {line}");
            let new = line
                .split_whitespace()
                .nth(2)
                .expect("line format: <time> primary <addr> via <sentinel>")
                .to_string();
            assert_ne!(
                new,
                addr(primary),
                "reported the dead primary again: {line}"
            );
            break (at, new);
        }
    };
    let replica_addrs: Vec<String> = net.replicas.iter().map(|r| addr(*r)).collect();
    assert!(
        replica_addrs.contains(&new_primary),
        "new primary {new_primary} is not one of the replicas"
    );
    let new_port: u16 = new_primary
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port");
    assert_eq!(role(new_port).as_deref(), Some("master"));
    let follow = followed_at - killed_at;
    eprintln!(
        "FAILOVER-FOLLOW: kill -9 of the primary -> resolver reported {new_primary} after {} ms \
         (Sentinel itself switched after {}; down-after-milliseconds {DOWN_AFTER_MS})",
        follow.as_millis(),
        sentinel_switched_at.map_or(
            format!(
                "<= {} ms (this test's 50 ms poll saw it only after the resolver)",
                follow.as_millis()
            ),
            |t| format!("{} ms", (t - killed_at).as_millis())
        )
    );

    // --- the old primary comes back, still believing it is primary -----------------------
    // Let the failover finish first (every Sentinel agrees, none is mid-failover). On a
    // loaded machine Sentinel may fail over once more; follow whatever it settles on.
    let mut current = new_primary.clone();
    wait_until("the failover to settle", || {
        if let Some(p) = sentinel_primary(net.sentinels[0]) {
            current = p;
        }
        failover_settled(&net, &current)
    });
    assert!(replica_addrs.contains(&current), "settled on {current}");
    procs
        .spawn("old-primary", Command::new(&server).arg(&primary_conf))
        .wait_listening(primary);
    // Its first ROLE: it starts from a config without `replicaof`, so it reports master until
    // Sentinel, after seeing it for a while, demotes it.
    let mut saw_old_as_master = false;
    wait_until("old primary back", || {
        let r = role(primary);
        saw_old_as_master |= r.as_deref() == Some("master");
        r.is_some()
    });
    let mut one_shots = 0;
    let deadline = Instant::now() + HANG;
    loop {
        assert!(
            Instant::now() < deadline,
            "Sentinel did not demote the old primary within {HANG:?} (a hang)"
        );
        let old_role = role(primary);
        if old_role.as_deref() == Some("master") {
            saw_old_as_master = true;
        }
        let o = resolve_primary(dir, &net);
        one_shots += 1;
        let got = stdout(&o);
        // Reported only if Sentinel and ROLE both said so; Sentinel names the new primary.
        assert_ne!(
            got,
            addr(primary),
            "one-shot resolution reported the old primary"
        );
        if o.status.success() {
            assert!(replica_addrs.contains(&got), "one-shot reported {got}");
        }
        while let Some((_, line)) = next_line(Duration::from_millis(0)) {
            eprintln!("watch: {line}");
            assert!(
                !line.contains(&format!(" primary {} ", addr(primary))),
                "{line}"
            );
            assert!(
                replica_addrs
                    .iter()
                    .any(|a| line.contains(&format!(" primary {a} "))),
                "{line}"
            );
        }
        if old_role.as_deref() == Some("slave") {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        saw_old_as_master,
        "the restarted old primary was expected to report ROLE master before its demotion"
    );
    eprintln!(
        "[{:?}] old primary demoted by Sentinel after {one_shots} one-shot resolutions, none reported it",
        test_start.elapsed()
    );
    // Sentinel demoted it: the resolver moves on with the primary Sentinel names (and
    // ROLE confirms). Compare with Sentinel's answer before and after the one-shot run;
    // if Sentinel changed its mind in between, try again.
    let deadline = Instant::now() + HANG;
    loop {
        assert!(
            Instant::now() < deadline,
            "resolver and Sentinel did not agree within {HANG:?} (a hang)"
        );
        let before = sentinel_primary(net.sentinels[0]);
        let o = resolve_primary(dir, &net);
        let after = sentinel_primary(net.sentinels[0]);
        if o.status.success() && before == after {
            let got = stdout(&o);
            assert_ne!(got, addr(primary));
            assert_eq!(Some(got), after);
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // An observation window, not a wait for a condition: whatever the watch prints in it must
    // not name the old primary.
    std::thread::sleep(Duration::from_millis(1500));
    while let Some((_, line)) = next_line(Duration::from_millis(0)) {
        assert!(
            !line.contains(&format!(" primary {} ", addr(primary))),
            "{line}"
        );
    }
    eprintln!(
        "watch tool log:\n{}",
        fs::read_to_string(&watch_log).unwrap_or_default()
    );
    eprintln!("[{:?}] done", test_start.elapsed());
}

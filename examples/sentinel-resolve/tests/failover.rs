//! Integration test with real servers from Debian's packages (`redis-server`,
//! `redis-sentinel`): one primary, two replicas, three Sentinels on loopback ports
//! 26300–26399. The resolver finds the primary and the replicas; after `kill -9` of the
//! primary it finds the promoted replica; when the old primary comes back still believing
//! it is primary, it is never reported, and the resolver keeps the new primary once
//! Sentinel has demoted the old one. Every process is killed by a guard, even on failure.
//! Phase deadlines add up to about 100 s in the worst case; a normal run takes ~17 s.
#![allow(clippy::disallowed_methods)] // a host-side test: real clock, real processes

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use redis_protocol::resp2::types::OwnedFrame;

const SERVICE: &str = "mymaster";
const PRIMARY: u16 = 26300;
const REPLICAS: [u16; 2] = [26301, 26302];
const SENTINELS: [u16; 3] = [26310, 26311, 26312];
const UNUSED: [u16; 3] = [26390, 26391, 26392];
const BIN: &str = env!("CARGO_BIN_EXE_sentinel-resolve");

fn addr(port: u16) -> String {
    format!("127.0.0.1:{port}")
}

/// Every process the test started, killed (SIGKILL) and reaped on drop, even on panic.
struct Procs {
    dir: PathBuf,
    children: Vec<(String, Child)>,
}

impl Procs {
    fn spawn(&mut self, name: &str, cmd: &mut Command) -> &mut Child {
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
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
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!("logs kept in {}", self.dir.display());
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

fn which(bin: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(bin))
        .find(|p| p.is_file())
}

/// One command over a fresh connection; `Err` if the server is not there.
fn cmd(port: u16, args: &[&str]) -> Result<OwnedFrame, String> {
    let mut s = TcpStream::connect_timeout(
        &format!("127.0.0.1:{port}")
            .parse()
            .expect("literal address"),
        Duration::from_millis(300),
    )
    .map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(|e| e.to_string())?;
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
fn failover_settled(primary: &str) -> bool {
    SENTINELS.iter().all(|s| {
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

fn wait_until(what: &str, within: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !ok() {
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn write_conf(dir: &Path, name: &str, body: &str) -> PathBuf {
    let d = dir.join(name);
    fs::create_dir_all(&d).expect("create node dir");
    let conf = d.join("node.conf");
    fs::write(
        &conf,
        format!(
            "bind 127.0.0.1\ndaemonize no\ndir {}\nlogfile {}\n{body}",
            d.display(),
            d.join("log.txt").display()
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

fn sentinel_conf(dir: &Path, port: u16) -> PathBuf {
    write_conf(
        dir,
        &format!("sentinel-{port}"),
        &format!(
            "port {port}\n\
             sentinel monitor {SERVICE} 127.0.0.1 {PRIMARY} 2\n\
             sentinel down-after-milliseconds {SERVICE} 1000\n\
             sentinel failover-timeout {SERVICE} 4000\n\
             sentinel parallel-syncs {SERVICE} 2\n"
        ),
    )
}

fn resolve(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("run sentinel-resolve")
}

fn sentinel_args() -> Vec<String> {
    SENTINELS
        .iter()
        .flat_map(|p| ["--sentinel".to_string(), addr(*p)])
        .collect()
}

/// One-shot resolution of the primary through all three Sentinels.
fn resolve_primary() -> Output {
    let mut args = sentinel_args();
    // Bounded: one run never takes more than about 3 s.
    args.extend(["--resolve-timeout-ms".into(), "3000".into(), SERVICE.into()]);
    resolve(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).trim().to_string()
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
    for port in [PRIMARY, REPLICAS[0], REPLICAS[1]]
        .into_iter()
        .chain(SENTINELS)
        .chain(UNUSED)
    {
        assert!(
            TcpStream::connect(("127.0.0.1", port)).is_err(),
            "port {port} is already in use; this test needs 26300-26399 free"
        );
    }
    let dir = std::env::temp_dir().join(format!(
        "ferrocluster-sentinel-it-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    fs::create_dir_all(&dir).expect("temp dir");
    let mut procs = Procs {
        dir: dir.clone(),
        children: Vec::new(),
    };
    let quiet = |c: &mut Command| {
        c.stdout(Stdio::null()).stderr(Stdio::null());
    };

    // --- one primary, two replicas, three Sentinels --------------------------------------
    let primary_conf = server_conf(&dir, PRIMARY, None);
    let mut c = Command::new(&server);
    c.arg(&primary_conf);
    quiet(&mut c);
    procs.spawn("primary", &mut c);
    for r in REPLICAS {
        let mut c = Command::new(&server);
        c.arg(server_conf(&dir, r, Some(PRIMARY)));
        quiet(&mut c);
        procs.spawn(&format!("replica-{r}"), &mut c);
    }
    wait_until(
        "data nodes up, replicas in sync",
        Duration::from_secs(15),
        || {
            REPLICAS.iter().all(|r| {
                matches!(cmd(*r, &["ROLE"]), Ok(OwnedFrame::Array(v))
                if v.len() >= 4 && text(&v[3]) == "connected")
            })
        },
    );
    for s in SENTINELS {
        let mut c = Command::new(&sentinel);
        c.arg(sentinel_conf(&dir, s));
        quiet(&mut c);
        procs.spawn(&format!("sentinel-{s}"), &mut c);
    }
    wait_until(
        "Sentinels know each other and both replicas",
        Duration::from_secs(20),
        || {
            SENTINELS
                .iter()
                .all(|s| known_sentinels(*s) == 2 && sentinel_healthy_replicas(*s) == 2)
        },
    );
    eprintln!("[{:?}] cluster up", test_start.elapsed());

    // --- steps 1-3 against real servers -------------------------------------------------
    let o = resolve_primary();
    assert!(o.status.success(), "{o:?}");
    assert_eq!(stdout(&o), addr(PRIMARY));

    // The first Sentinel is not there: the next one answers.
    let o = resolve(&[
        "-s",
        &addr(UNUSED[0]),
        "-s",
        &addr(SENTINELS[1]),
        "--refresh-sentinels",
        SERVICE,
    ]);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(stdout(&o), addr(PRIMARY));

    let mut args = sentinel_args();
    args.extend(["--replicas".to_string(), SERVICE.to_string()]);
    let o = resolve(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{o:?}");
    let mut replicas: Vec<String> = stdout(&o).lines().map(str::to_string).collect();
    replicas.sort();
    assert_eq!(replicas, vec![addr(REPLICAS[0]), addr(REPLICAS[1])]);

    // The two error kinds.
    let mut args = sentinel_args();
    args.push("nosuchservice".into());
    let o = resolve(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(o.status.code(), Some(4), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no Sentinel knows the service nosuchservice")
    );
    let o = resolve(&[
        "-s",
        &addr(UNUSED[0]),
        "-s",
        &addr(UNUSED[1]),
        "-s",
        &addr(UNUSED[2]),
        SERVICE,
    ]);
    assert_eq!(o.status.code(), Some(3), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("no Sentinel could be reached"));

    // --- watch, then kill -9 the primary -------------------------------------------------
    let mut args = sentinel_args();
    args.extend([
        "--watch".into(),
        "--refresh-sentinels".into(),
        SERVICE.into(),
    ]);
    let watch_log = fs::File::create(dir.join("watch.stderr")).expect("watch log");
    let mut c = Command::new(BIN);
    c.args(&args).stdout(Stdio::piped()).stderr(watch_log);
    let watch = procs.spawn("watch", &mut c);
    let out = watch.stdout.take().expect("piped stdout");
    let (tx, lines) = mpsc::channel::<(Instant, String)>();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send((Instant::now(), line)).is_err() {
                break;
            }
        }
    });
    let next_line =
        |within: Duration| -> Option<(Instant, String)> { lines.recv_timeout(within).ok() };
    let (_, first) = next_line(Duration::from_secs(10)).expect("watch prints the primary");
    assert!(
        first.contains(&format!(" primary {} via ", addr(PRIMARY))),
        "{first}"
    );

    procs.kill("primary");
    let killed_at = Instant::now();
    let mut sentinel_switched_at = None;
    let deadline = killed_at + Duration::from_secs(25);
    let (followed_at, new_primary) = loop {
        assert!(
            Instant::now() < deadline,
            "no new primary within 25 s of kill -9"
        );
        if sentinel_switched_at.is_none()
            && sentinel_primary(SENTINELS[0]).is_some_and(|p| p != addr(PRIMARY))
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
                addr(PRIMARY),
                "reported the dead primary again: {line}"
            );
            break (at, new);
        }
    };
    assert!(
        REPLICAS.iter().any(|r| addr(*r) == new_primary),
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
         (Sentinel itself switched after {}; down-after-milliseconds 1000)",
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
    // Let the failover finish first (every Sentinel agrees, none is mid-failover). With
    // down-after-milliseconds 1000 on a loaded machine Sentinel may fail over once more;
    // follow whatever it settles on.
    let mut current = new_primary.clone();
    wait_until("the failover to settle", Duration::from_secs(15), || {
        if let Some(p) = sentinel_primary(SENTINELS[0]) {
            current = p;
        }
        failover_settled(&current)
    });
    let replica_addrs: Vec<String> = REPLICAS.iter().map(|r| addr(*r)).collect();
    assert!(replica_addrs.contains(&current), "settled on {current}");
    let mut c = Command::new(&server);
    c.arg(&primary_conf);
    quiet(&mut c);
    procs.spawn("old-primary", &mut c);
    wait_until("old primary back", Duration::from_secs(10), || {
        role(PRIMARY).is_some()
    });
    let mut saw_old_as_master = false;
    let mut one_shots = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(
            Instant::now() < deadline,
            "Sentinel did not demote the old primary within 30 s"
        );
        let old_role = role(PRIMARY);
        if old_role.as_deref() == Some("master") {
            saw_old_as_master = true;
        }
        let o = resolve_primary();
        one_shots += 1;
        let got = stdout(&o);
        // Reported only if Sentinel and ROLE both said so; Sentinel names the new primary.
        assert_ne!(
            got,
            addr(PRIMARY),
            "one-shot resolution reported the old primary"
        );
        if o.status.success() {
            assert!(replica_addrs.contains(&got), "one-shot reported {got}");
        }
        while let Some((_, line)) = next_line(Duration::from_millis(0)) {
            eprintln!("watch: {line}");
            assert!(
                !line.contains(&format!(" primary {} ", addr(PRIMARY))),
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
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert!(
            Instant::now() < deadline,
            "resolver and Sentinel never agreed"
        );
        let before = sentinel_primary(SENTINELS[0]);
        let o = resolve_primary();
        let after = sentinel_primary(SENTINELS[0]);
        if o.status.success() && before == after {
            let got = stdout(&o);
            assert_ne!(got, addr(PRIMARY));
            assert_eq!(Some(got), after);
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(1500));
    while let Some((_, line)) = next_line(Duration::from_millis(0)) {
        assert!(
            !line.contains(&format!(" primary {} ", addr(PRIMARY))),
            "{line}"
        );
    }
    eprintln!(
        "watch tool stderr:\n{}",
        fs::read_to_string(dir.join("watch.stderr")).unwrap_or_default()
    );
    eprintln!("[{:?}] done", test_start.elapsed());
}

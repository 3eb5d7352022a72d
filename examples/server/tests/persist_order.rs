//! nodes.conf durability under load (ports from the one allocator, `common::ports`): an
//! acknowledged CLUSTER change is on disk and stays there. A watcher reads nodes.conf
//! continuously while a client adds slots, and the node is killed with SIGKILL at seeded
//! random moments (after a seeded number of acknowledged changes, with one more in flight and
//! a seeded delay of up to a few ms, so no outcome depends on the machine's speed); the file
//! must never lack a slot whose ADDSLOTSRANGE was acknowledged before the read started (issue
//! 16 item 12: snapshots written out of order once reverted the file), and after every
//! restart the node serves every acknowledged slot. Also: temporary files a crash leaves
//! behind are removed at start.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{ports, test_dir, Client, Logged, Procs};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The slots on the myself line of a nodes.conf text (ranges and single slots; importing and
/// migrating marks are skipped). `None` when the text has no myself line yet.
fn myself_slots(text: &str) -> Option<BTreeSet<u16>> {
    let line = text
        .lines()
        .find(|l| l.split(' ').nth(2).is_some_and(|f| f.contains("myself")))?;
    let mut out = BTreeSet::new();
    for tok in line.split(' ').skip(8) {
        if tok.starts_with('[') {
            continue;
        }
        match tok.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u16, u16) = (a.parse().ok()?, b.parse().ok()?);
                out.extend(a..=b);
            }
            None => {
                if let Ok(s) = tok.parse() {
                    out.insert(s);
                }
            }
        }
    }
    Some(out)
}

/// A small seeded generator (xorshift64*): the kill moments are reproducible from the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

#[test]
fn acknowledged_addslotsrange_is_never_lost_across_kill_9() {
    let seed = std::env::var("FERROCLUSTER_PERSIST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_1216u64);
    let mut rng = Rng(seed | 1);
    let base = test_dir("persist-order");
    let mut procs = Procs::default();
    let port = ports::port();
    // Slot pairs (2i, 2i+1) are added in order; `acked` is one past the last pair
    // acknowledged so far, and `unknown` holds the pairs whose request was in flight at a kill.
    let acked = Arc::new(AtomicUsize::new(0));
    let mut unknown = BTreeSet::new();
    let mut next_pair = 0usize;
    let rounds = 8;
    for round in 0..rounds {
        let dir = procs.start(&base, port, &[]);
        let conf = dir.join("nodes.conf");
        // After a restart the node must serve every acknowledged slot.
        let mut c = Client::connect(port);
        let nodes = common::bulk_text(&c.cmd(&["CLUSTER", "NODES"]));
        let served = myself_slots(&nodes).expect("myself line in CLUSTER NODES");
        let want = acknowledged(acked.load(Ordering::SeqCst), &unknown);
        assert!(
            want.is_subset(&served),
            "seed {seed} round {round}: acknowledged slots missing after restart: {:?}",
            want.difference(&served).take(10).collect::<Vec<_>>()
        );
        let stop = Arc::new(AtomicBool::new(false));
        let violation = Arc::new(Mutex::new(None::<String>));
        let watcher = {
            let (stop, acked, violation, conf, unknown) = (
                Arc::clone(&stop),
                Arc::clone(&acked),
                Arc::clone(&violation),
                conf.clone(),
                unknown.clone(),
            );
            std::thread::spawn(move || watch(&conf, &acked, &unknown, &stop, &violation))
        };
        // The kill comes after a seeded number of acknowledged changes (not after some time:
        // a slow machine would make fewer), with one more request in flight.
        let changes = 1 + rng.next() % 60;
        let goal = next_pair + changes as usize;
        while next_pair < goal && next_pair < 8192 {
            let (a, b) = ((2 * next_pair).to_string(), (2 * next_pair + 1).to_string());
            assert_eq!(
                c.cmd_s(&["CLUSTER", "ADDSLOTSRANGE", &a, &b]),
                "+OK\r\n",
                "seed {seed} round {round}"
            );
            next_pair += 1;
            acked.store(next_pair, Ordering::SeqCst);
        }
        // One more request in flight while the process dies: its outcome is unknown, so it is
        // not counted, and its slots are never asked for again.
        let (a, b) = ((2 * next_pair).to_string(), (2 * next_pair + 1).to_string());
        c.send_raw(&common::encode(&[
            b"CLUSTER",
            b"ADDSLOTSRANGE",
            a.as_bytes(),
            b.as_bytes(),
        ]));
        unknown.insert(next_pair);
        next_pair += 1;
        // A seeded pause of 0-3 ms moves the kill over the request's handling: before it is
        // read, while its nodes.conf write is under way, after its reply.
        std::thread::sleep(Duration::from_micros(rng.next() % 3000));
        procs.kill(port);
        stop.store(true, Ordering::SeqCst);
        watcher.join().expect("watcher");
        if let Some(v) = violation.lock().unwrap().take() {
            panic!("seed {seed} round {round}: {v}");
        }
        let text = std::fs::read_to_string(&conf).expect("nodes.conf after kill");
        let on_disk = myself_slots(&text).expect("myself line");
        let want = acknowledged(acked.load(Ordering::SeqCst), &unknown);
        assert!(
            want.is_subset(&on_disk),
            "seed {seed} round {round}: acknowledged slots missing on disk after kill -9: {:?}",
            want.difference(&on_disk).take(10).collect::<Vec<_>>()
        );
        procs.children.clear();
    }
    assert!(acked.load(Ordering::SeqCst) > rounds, "too few changes");
}

/// The slots of the pairs below `acked` whose outcome is known.
fn acknowledged(acked: usize, unknown: &BTreeSet<usize>) -> BTreeSet<u16> {
    (0..acked)
        .filter(|p| !unknown.contains(p))
        .flat_map(|p| [2 * p as u16, 2 * p as u16 + 1])
        .collect()
}

/// Reads nodes.conf until `stop`: every read must hold every pair acknowledged before it
/// began. Records the first violation.
fn watch(
    conf: &Path,
    acked: &AtomicUsize,
    unknown: &BTreeSet<usize>,
    stop: &AtomicBool,
    violation: &Mutex<Option<String>>,
) {
    while !stop.load(Ordering::SeqCst) {
        let before = acked.load(Ordering::SeqCst);
        let Ok(text) = std::fs::read_to_string(conf) else {
            continue;
        };
        let Some(slots) = myself_slots(&text) else {
            continue;
        };
        if let Some(missing) = acknowledged(before, unknown)
            .into_iter()
            .find(|s| !slots.contains(s))
        {
            *violation.lock().unwrap() = Some(format!(
                "nodes.conf reverted: slot {missing} was acknowledged ({before} pairs) but the \
                 file lacks it:\n{text}"
            ));
            return;
        }
    }
}

#[test]
fn temporary_config_files_of_a_crash_are_removed_at_start() {
    let base = test_dir("persist-tmp");
    let mut procs = Procs::default();
    let port = ports::port();
    let dir = procs.start(&base, port, &[]);
    procs.kill(port);
    // What a crash between the write of the temporary file and its rename leaves behind, from
    // two earlier processes; a file of another config name is not ours to touch.
    for name in [".nodes.conf.tmp-4242", ".nodes.conf.tmp-77"] {
        std::fs::write(dir.join(name), b"partial").unwrap();
    }
    std::fs::write(dir.join(".other.conf.tmp-4242"), b"x").unwrap();
    procs.start(&base, port, &[]);
    let mut c = Client::connect(port);
    assert_eq!(c.cmd_s(&["PING"]), "+PONG\r\n");
    let left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert_eq!(left, vec![".other.conf.tmp-4242".to_string()], "{left:?}");
}

#[test]
fn fatal_save_exits_1_even_when_stderr_is_a_full_disk() {
    let dir = test_dir("persist-fulldisk");
    let port = ports::port();
    // The server's stderr is /dev/full (every write fails with ENOSPC); the shell that sets
    // that up execs it, so the child is the server itself, and its stdout goes to the log.
    std::fs::metadata("/dev/full").expect("/dev/full (every write fails with ENOSPC)");
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", r#"exec "$0" "$@" 2>/dev/full"#, common::BIN])
        .args(["--port", &port.to_string(), "--dir"])
        .arg(&dir);
    let mut child = Logged::spawn(
        &mut cmd,
        &dir.join("stdout.log"),
        &format!("ferrocluster-server on {port}"),
    );
    child.wait_listening(port);
    let pid = child.pid().expect("running");
    // A directory where the temporary file goes makes every save fail.
    std::fs::create_dir_all(dir.join(format!(".nodes.conf.tmp-{pid}")).join("x")).unwrap();
    let mut c = Client::connect(port);
    c.send_raw(&common::encode(&[b"CLUSTER", b"ADDSLOTS", b"7"]));
    let rest = c.read_to_close();
    assert!(rest.is_empty(), "acknowledged: {rest:?}");
    assert_eq!(
        child.wait_exit().code(),
        Some(1),
        "the process must exit 1 after a failed config save"
    );
}

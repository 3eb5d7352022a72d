//! The source's cleanup after an atomic slot migration (`CLUSTER MIGRATESLOTS`, issue 18):
//! the moved keys leave the keyspace at the handoff and their `DEL`s reach the replication
//! stream and the AOF afterwards, a batch at a time (`crate::lazyfree` of the server).
//!
//! Two of our primaries (A, B) and a replica R of A, A and R with an AOF (`appendfsync
//! always`). Checked:
//! * after a slot of many keys moves A → B, R and A's AOF (loaded by a fresh standalone node)
//!   end without the moved keys, and INFO memory `lazyfree_pending_objects` returns to 0;
//! * a slot moved A → B and at once back B → A (the import re-creates every key on A while
//!   the `DEL`s of the first move may still be pending), and the same with a `FLUSHALL` on A
//!   between the two moves: R and both AOFs end with every re-created key, a list exactly
//!   once (a `DEL` fed after its re-creation would delete it on R; an `RPUSH` of the import
//!   applied onto R's old list would double it).
//!
//! Whether the `DEL`s were still pending when the slot came back depends on the machine's
//! speed; the test prints it. What it checks holds either way.
//!
//! * at start-up, a primary whose data set holds keys of a slot another node owns deletes
//!   them (Valkey `verifyClusterConfigWithData`): B restarted on a copy of A's AOF.
//!
//! Ports from `ferrocluster_testkit::ports` (bus ports +10000).
#![allow(clippy::disallowed_methods)]

mod mixed;

use ferrocluster_testkit::ports;
use ferrocluster_testkit::proc::Logged;
use ferrocluster_testkit::wait::{wait_ok, HANG};
use mixed::{cmd, slot_jobs, try_cmd, Client, Kind, Mixed, Reply, Role};
use std::path::Path;

const A: usize = 0;
const B: usize = 1;
const R: usize = 2;

/// Keys DEBUG POPULATE puts in each moving slot: several of the server's batches of 4096.
const KEYS: u64 = 60_000;

/// The list in each moving slot and its elements.
const LIST: [&str; 3] = ["e1", "e2", "e3"];

fn ok(r: Reply, what: &str) {
    assert_eq!(r, Reply::Status("OK".into()), "{what}");
}

fn int(r: Reply) -> i64 {
    match r {
        Reply::Int(n) => n,
        other => panic!("not an integer: {other:?}"),
    }
}

/// A field of `INFO <section>` on `port`.
fn info(port: u16, section: &str, field: &str) -> Result<String, String> {
    let text = try_cmd(port, &["INFO", section])?.text();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().to_string())
        .ok_or_else(|| format!("no {field} in INFO {section} of {port}"))
}

/// A hash tag whose slot lies in A's slots and is not in `taken`; returns (tag, slot).
fn tag_on(port: u16, range: (u16, u16), taken: &[i64]) -> (String, i64) {
    let mut c = Client::connect(port).unwrap();
    (0..100_000u32)
        .map(|n| format!("c{n}"))
        .find_map(|t| {
            let s = int(c.cmd(&["CLUSTER", "KEYSLOT", &t]));
            let inside = (i64::from(range.0)..=i64::from(range.1)).contains(&s);
            (inside && !taken.contains(&s)).then_some((t, s))
        })
        .expect("a tag in the first primary's slots")
}

/// Fills the slot of `tag` on `port`: `KEYS` strings `{tag}:<i>` = `v<i>` (pipelined SETs)
/// and the list `{tag}l`.
fn fill(port: u16, tag: &str) {
    fill_n(port, tag, KEYS);
}

/// [`fill`] with `n` strings.
fn fill_n(port: u16, tag: &str, n: u64) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(HANG)).unwrap();
    let chunk = 1000u64;
    for start in (0..n).step_by(chunk as usize) {
        let end = (start + chunk).min(n);
        let mut req = Vec::new();
        for i in start..end {
            let (k, v) = (format!("{{{tag}}}:{i}"), format!("v{i}"));
            req.extend_from_slice(
                format!(
                    "*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n${}\r\n{v}\r\n",
                    k.len(),
                    v.len()
                )
                .as_bytes(),
            );
        }
        s.write_all(&req).unwrap();
        let want = b"+OK\r\n".repeat((end - start) as usize);
        let mut got = vec![0u8; want.len()];
        s.read_exact(&mut got).unwrap();
        assert_eq!(got, want, "pipelined SETs");
    }
    let list = format!("{{{tag}}}l");
    let mut args = vec!["RPUSH", list.as_str()];
    args.extend(LIST);
    let mut c = Client::connect(port).unwrap();
    assert_eq!(c.cmd(&args), Reply::Int(LIST.len() as i64));
}

fn keys_in_slot(port: u16, slot: i64) -> i64 {
    int(cmd(
        port,
        &["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()],
    ))
}

/// Moves `slot` from `from` to the node `to_id` and waits for the export to succeed (one more
/// successful EXPORT job on `from`). Retries the command while the nodes' views still differ.
fn migrate(from: u16, to_id: &str, slot: i64) {
    let done = |p: u16| {
        slot_jobs(p)
            .iter()
            .filter(|(op, st)| op == "EXPORT" && st == "success")
            .count()
    };
    let before = done(from);
    let s = slot.to_string();
    wait_ok("MIGRATESLOTS accepted", || {
        let args = [
            "CLUSTER",
            "MIGRATESLOTS",
            "SLOTSRANGE",
            &s,
            &s,
            "NODE",
            to_id,
        ];
        match try_cmd(from, &args)? {
            Reply::Status(o) if o == "OK" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });
    // An export of KEYS keys: its bound on a hang is three times the usual one.
    mixed::wait_for(3 * HANG, "the export to succeed", || {
        let jobs = slot_jobs(from);
        if let Some((_, st)) = jobs.iter().find(|(op, _)| op == "EXPORT") {
            assert!(st != "failed" && st != "cancelled", "export {st}: {jobs:?}");
        }
        if done(from) > before {
            Ok(())
        } else {
            Err(format!("{jobs:?}"))
        }
    });
}

/// Waits until `port` owns `slot` in its own view.
fn wait_owner(port: u16, id: &str, slot: i64) {
    wait_ok("the slot's owner to show", || {
        let nodes = try_cmd(port, &["CLUSTER", "NODES"])?.text();
        let line = nodes
            .lines()
            .find(|l| l.starts_with(id))
            .ok_or("no line")?
            .to_string();
        let owns = line.split(' ').skip(8).any(|r| {
            let mut it = r.splitn(2, '-');
            let lo = it.next().and_then(|x| x.parse::<i64>().ok());
            let hi = it.next().map_or(lo, |x| x.parse::<i64>().ok());
            matches!((lo, hi), (Some(a), Some(b)) if (a..=b).contains(&slot))
        });
        owns.then_some(()).ok_or(line)
    });
}

/// Waits until `port` has nothing left to free (INFO memory `lazyfree_pending_objects` 0).
fn wait_freed(port: u16) {
    wait_ok("lazyfree_pending_objects 0", || {
        match info(port, "memory", "lazyfree_pending_objects")?.as_str() {
            "0" => Ok(()),
            n => Err(format!("{port}: {n} pending")),
        }
    });
}

/// Waits until R holds `want` keys of `slot`.
fn wait_keys(port: u16, slot: i64, want: i64, what: &str) {
    wait_ok(what, || {
        let n = int(try_cmd(
            port,
            &["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()],
        )?);
        (n == want).then_some(()).ok_or(format!("{port}: {n} keys"))
    });
}

/// The list of `tag` on `port` (a replica: READONLY).
fn list_on(port: u16, tag: &str) -> Vec<String> {
    let mut c = Client::connect(port).unwrap();
    let _ = c.cmd(&["READONLY"]);
    c.cmd(&["LRANGE", &format!("{{{tag}}}l"), "0", "-1"])
        .items()
        .iter()
        .map(Reply::text)
        .collect()
}

/// `SHA1` of what `port` holds of the keys `{tag}:<i>` for a sample of `i` (a replica:
/// READONLY), as one string per key.
fn sample(port: u16, tag: &str) -> Vec<String> {
    let mut c = Client::connect(port).unwrap();
    let _ = c.cmd(&["READONLY"]);
    (0..KEYS)
        .step_by(997)
        .map(|i| c.cmd(&["GET", &format!("{{{tag}}}:{i}")]).text())
        .collect()
}

/// Turns the AOF on at `port` with `appendfsync always` and waits for its first rewrite.
fn aof_on(port: u16) {
    ok(
        cmd(port, &["CONFIG", "SET", "appendfsync", "always"]),
        "appendfsync",
    );
    ok(
        cmd(port, &["CONFIG", "SET", "appendonly", "yes"]),
        "appendonly",
    );
    wait_ok("the AOF to be on", || {
        let on = info(port, "persistence", "aof_enabled")?;
        let busy = info(port, "persistence", "aof_rewrite_in_progress")?;
        (on == "1" && busy == "0")
            .then_some(())
            .ok_or(format!("aof_enabled {on}, rewriting {busy}"))
    });
}

/// A copy of the AOF directory of the node in `dir` (in a fresh directory, returned).
fn copy_aof(dir: &Path, name: &str) -> std::path::PathBuf {
    let copy = std::env::temp_dir().join(format!(
        "ferrocluster-asm-cleanup-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&copy);
    std::fs::create_dir_all(copy.join("appendonlydir")).unwrap();
    for e in std::fs::read_dir(dir.join("appendonlydir")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), copy.join("appendonlydir").join(e.file_name())).unwrap();
    }
    copy
}

/// Waits until our node on `port` answers PING (its data set loaded); fails at once, with
/// its log, when it exits.
fn wait_pong(node: &mut Logged, port: u16, what: &str) {
    wait_ok(what, || {
        if let Some(status) = node.exited() {
            panic!("{}", node.failure(&format!("exited ({status})"), port));
        }
        match try_cmd(port, &["PING"])? {
            Reply::Status(p) if p == "PONG" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });
}

/// A standalone node of ours on `dir`'s AOF (killed when dropped).
fn standalone(dir: &Path, port: u16) -> Logged {
    let mut cmd = std::process::Command::new(mixed::OURS);
    cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--cluster-enabled", "no", "--appendonly", "yes"])
        .arg("--dir")
        .arg(dir);
    let mut node = Logged::spawn(
        &mut cmd,
        &dir.join("stderr.log"),
        &format!("standalone ferrocluster-server on {port}"),
    );
    wait_pong(&mut node, port, "the AOF to load");
    node
}

/// Keys `{tag}:<i>` on a standalone node (no slots there: KEYS with the tag's pattern).
fn standalone_count(port: u16, tag: &str) -> usize {
    cmd(port, &["KEYS", &format!("{{{tag}}}:*")]).items().len()
}

#[test]
fn migrateslots_source_cleanup_reaches_replica_and_aof_in_order() {
    let m = Mixed::form(
        "asm-cleanup",
        ports::block(3),
        &[
            (Kind::Ours, Role::Primary),
            (Kind::Ours, Role::Primary),
            (Kind::Ours, Role::ReplicaOf(A)),
        ],
    );
    // The handoff's write pause (2 x the manual failover timeout) outlasts any stall.
    m.manual_failover_timeout_hang();
    let (a, b, r) = (m.m(A).clone(), m.m(B).clone(), m.m(R).clone());
    let range = a.slots.expect("A owns slots");
    aof_on(a.port);
    aof_on(r.port);
    // Slot 1 moves away; slot 2 moves away and back; slot 3 too, with a FLUSHALL between.
    let (t1, s1) = tag_on(a.port, range, &[]);
    let (t2, s2) = tag_on(a.port, range, &[s1]);
    let (t3, s3) = tag_on(a.port, range, &[s1, s2]);
    for t in [&t1, &t2, &t3] {
        fill(a.port, t);
    }
    let per_slot = KEYS as i64 + 1;
    for s in [s1, s2, s3] {
        wait_keys(r.port, s, per_slot, "R to hold the filled slots");
    }
    let want2 = sample(a.port, &t2);
    let want3 = sample(a.port, &t3);

    // 1: away for good.
    migrate(a.port, &b.id, s1);
    wait_freed(a.port);
    assert_eq!(keys_in_slot(a.port, s1), 0);
    wait_keys(r.port, s1, 0, "R to lose the moved keys");
    wait_freed(r.port);
    assert_eq!(keys_in_slot(b.port, s1), per_slot, "B holds the moved slot");

    // 2: away and at once back; the import re-creates every key.
    migrate(a.port, &b.id, s2);
    let pending = info(a.port, "memory", "lazyfree_pending_objects").unwrap();
    eprintln!("slot {s2} moved away; A's DELs pending when it moves back: {pending}");
    wait_owner(b.port, &b.id, s2);
    migrate(b.port, &a.id, s2);
    wait_owner(a.port, &a.id, s2);
    // R's keys come back by replication, its view of the owner by gossip: READONLY reads on R
    // need both (else -MOVED).
    wait_owner(r.port, &a.id, s2);
    for p in [a.port, b.port, r.port] {
        wait_freed(p);
    }
    assert_eq!(keys_in_slot(a.port, s2), per_slot);
    assert_eq!(keys_in_slot(b.port, s2), 0);
    wait_keys(r.port, s2, per_slot, "R to hold slot 2 again");
    assert_eq!(sample(a.port, &t2), want2);
    assert_eq!(sample(r.port, &t2), want2, "R's re-created keys");
    assert_eq!(list_on(r.port, &t2), LIST, "R's re-created list, once");
    wait_keys(r.port, s1, 0, "R to stay without slot 1");
    check_aofs(&m, &[(&t1, None), (&t2, Some(&want2)), (&t3, Some(&want3))]);

    // 3: away, FLUSHALL on A (slot 2 goes too), back.
    migrate(a.port, &b.id, s3);
    let pending = info(a.port, "memory", "lazyfree_pending_objects").unwrap();
    eprintln!("slot {s3} moved away; A's DELs pending at its FLUSHALL: {pending}");
    ok(cmd(a.port, &["FLUSHALL"]), "FLUSHALL");
    wait_owner(b.port, &b.id, s3);
    migrate(b.port, &a.id, s3);
    wait_owner(a.port, &a.id, s3);
    wait_owner(r.port, &a.id, s3);
    for p in [a.port, b.port, r.port] {
        wait_freed(p);
    }
    assert_eq!(keys_in_slot(a.port, s2), 0, "FLUSHALL emptied slot 2");
    assert_eq!(keys_in_slot(a.port, s3), per_slot);
    assert_eq!(keys_in_slot(b.port, s3), 0);
    assert_eq!(sample(a.port, &t3), want3);
    wait_keys(r.port, s3, per_slot, "R to hold slot 3 again");
    wait_keys(r.port, s2, 0, "R to lose slot 2 to the FLUSHALL");
    assert_eq!(sample(r.port, &t3), want3, "R's re-created keys");
    assert_eq!(list_on(r.port, &t3), LIST, "R's re-created list, once");
    check_aofs(&m, &[(&t1, None), (&t2, None), (&t3, Some(&want3))]);
}

/// The AOFs of A and R, each copied and loaded by a fresh standalone node: each tag's keys
/// are all there with the sampled values and the list once (`Some`), or none is (`None`).
fn check_aofs(m: &Mixed, want: &[(&str, Option<&Vec<String>>)]) {
    let [a_port, r_port] = ports::ports(2)[..] else {
        unreachable!()
    };
    for (i, port, name) in [(A, a_port, "A"), (R, r_port, "R")] {
        let dir = m.procs.live(m.m(i).port).dir.clone();
        let copy = copy_aof(&dir, name);
        let node = standalone(&copy, port);
        for (tag, values) in want {
            let n = standalone_count(port, tag) as u64;
            match values {
                None => assert_eq!(n, 0, "{name}'s AOF: keys of {tag}"),
                Some(values) => {
                    assert_eq!(n, KEYS, "{name}'s AOF: keys of {tag}");
                    assert_eq!(&&sample(port, tag), values, "{name}'s AOF: {tag} values");
                    assert_eq!(list_on(port, tag), LIST, "{name}'s AOF: {tag}'s list, once");
                }
            }
        }
        drop(node);
        let _ = std::fs::remove_dir_all(&copy);
    }
}

/// Starts our node on `port` in `dir` as the mixed harness does, with an AOF (killed when
/// dropped).
fn restart_ours(dir: &Path, port: u16) -> Logged {
    let mut cmd = std::process::Command::new(mixed::OURS);
    cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--cluster-enabled", "yes"])
        .args(["--cluster-port", &(port + mixed::BUS_OFFSET).to_string()])
        .args(["--cluster-config-file", "nodes.conf"])
        .args([
            "--cluster-node-timeout",
            &mixed::NODE_TIMEOUT_MS.to_string(),
        ])
        .args(["--appendonly", "yes", "--loglevel", "verbose"])
        .arg("--dir")
        .arg(dir)
        .env("NO_COLOR", "1");
    let _ = std::fs::remove_file(dir.join("ours.log"));
    Logged::spawn(
        &mut cmd,
        &dir.join("ours.log"),
        &format!("ferrocluster-server restarted on {port}"),
    )
}

#[test]
fn a_primary_restarted_with_keys_of_a_slot_another_node_owns_deletes_them() {
    let mut m = Mixed::form(
        "asm-restart",
        ports::block(2),
        &[(Kind::Ours, Role::Primary), (Kind::Ours, Role::Primary)],
    );
    let (a, b) = (m.m(A).clone(), m.m(B).clone());
    aof_on(a.port);
    let (tag, slot) = tag_on(a.port, a.slots.expect("A owns slots"), &[]);
    let n = 3000;
    fill_n(a.port, &tag, n);
    assert_eq!(keys_in_slot(a.port, slot), n as i64 + 1);
    // B starts again on A's AOF: keys of a slot its nodes.conf gives to A.
    let dir = m.procs.live(b.port).dir.clone();
    m.kill9(B);
    let aof = copy_aof(&m.procs.live(a.port).dir, "restart");
    let _ = std::fs::remove_dir_all(dir.join("appendonlydir"));
    std::fs::rename(aof.join("appendonlydir"), dir.join("appendonlydir")).unwrap();
    let _ = std::fs::remove_dir_all(&aof);
    let mut node = restart_ours(&dir, b.port);
    wait_pong(&mut node, b.port, "B to serve again");
    wait_keys(b.port, slot, 0, "B to delete the keys of A's slot");
    wait_freed(b.port);
    assert_eq!(int(cmd(b.port, &["DBSIZE"])), 0);
    let log = std::fs::read_to_string(dir.join("ours.log")).unwrap();
    assert!(
        log.contains("detached the keys of slots another node owns"),
        "B's log:\n{log}"
    );
    // A keeps its own.
    assert_eq!(keys_in_slot(a.port, slot), n as i64 + 1);
}

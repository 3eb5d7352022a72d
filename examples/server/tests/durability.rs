//! nodes.conf ownership and durability (ports from `common::ports`, bus ports +10000): the config lock
//! against a second process, `dir` checks, CLUSTER replies only after the change is on disk,
//! SAVECONFIG's error and the fatal exit on a failed config save (Redis's behaviour), plus the
//! SET EXAT overflow and SETSLOT trailing-argument errors through a real connection; a
//! primary's CLUSTER SETSLOT reaches its replica before it is applied and answered (Valkey 8+
//! `clusterCommandSetSlot`), times out with `-NOREPLICAS` when the replica does not
//! acknowledge, and survives a `kill -9` right after its reply.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{bulk_text, ports, test_dir, wait_until, Client, Procs};

fn run_to_exit(dir: &std::path::Path, port: u16) -> (Option<i32>, String) {
    common::run_to_exit(dir, port, &[])
}

#[test]
fn second_process_on_the_same_config_file_is_refused() {
    let base = test_dir("conf-lock");
    let mut procs = Procs::default();
    let [first, second] = ports::ports(2)[..] else {
        unreachable!()
    };
    let dir = procs.start(&base, first, &[]);
    let (code, stderr) = run_to_exit(&dir, second);
    assert_eq!(code, Some(1), "{stderr}");
    let file = dir.join("nodes.conf");
    let text = format!(
        "Sorry, the cluster configuration file {} is already used by a different Redis Cluster \
         node. Please make sure that different nodes use different cluster configuration files.",
        file.display()
    );
    assert!(stderr.contains(&text), "{stderr}");
    // The first node keeps running, with its own ID.
    let mut c = Client::connect(first);
    assert_eq!(c.cmd_s(&["PING"]), "+PONG\r\n");
}

#[test]
fn missing_dir_is_refused() {
    let base = test_dir("conf-nodir");
    let (code, stderr) = run_to_exit(&base.join("does-not-exist"), ports::port());
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("does-not-exist"), "{stderr}");
}

#[test]
fn cluster_change_is_on_disk_when_acknowledged() {
    let base = test_dir("conf-durable");
    let mut procs = Procs::default();
    let port = ports::port();
    let dir = procs.start(&base, port, &[]);
    let mut c = Client::connect(port);
    let id = c.cmd_s(&["CLUSTER", "MYID"]);
    let id = id.lines().nth(1).expect("MYID bulk").to_string();
    assert_eq!(c.cmd_s(&["CLUSTER", "ADDSLOTS", "0", "1", "2"]), "+OK\r\n");
    // No wait: the reply came after the write and fsync.
    procs.kill(port);
    let conf = std::fs::read_to_string(dir.join("nodes.conf")).unwrap();
    let mine = conf
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("myself missing in:\n{conf}"));
    assert!(mine.ends_with(" 0-2"), "{mine}");
    // Restarted from that file, the node serves the slots.
    procs.start(&base, port, &[]);
    let nodes = bulk_text(&Client::connect(port).cmd(&["CLUSTER", "NODES"]));
    let mine = nodes
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("myself missing in:\n{nodes}"));
    assert!(mine.ends_with(" 0-2"), "{mine}");
}

fn myid(port: u16) -> String {
    bulk_text(&Client::connect(port).cmd(&["CLUSTER", "MYID"]))
}

/// The slot ranges of node `id`'s line of `CLUSTER NODES` on `port`.
fn slots_of(port: u16, id: &str) -> String {
    let nodes = bulk_text(&Client::connect(port).cmd(&["CLUSTER", "NODES"]));
    slots_in(&nodes, id)
}

fn slots_in(nodes: &str, id: &str) -> String {
    let line = nodes
        .lines()
        .find(|l| l.starts_with(id))
        .unwrap_or_else(|| panic!("{id} missing in:\n{nodes}"));
    line.split(' ').skip(8).collect::<Vec<_>>().join(" ")
}

fn signal(procs: &mut Procs, port: u16, sig: &str) {
    let pid = procs.pid(port);
    let ok = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("run kill")
        .success();
    assert!(ok, "kill {sig} {pid}");
}

fn wait_knows(port: u16, id: &str) {
    wait_until("the node is known", || {
        bulk_text(&Client::connect(port).cmd(&["CLUSTER", "NODES"])).contains(id)
    });
}

#[test]
fn setslot_reaches_the_replica_first_times_out_without_it_and_survives_kill_9() {
    let [pport, rport, tport] = ports::ports(3)[..] else {
        unreachable!()
    };
    let base = test_dir("setslot-replicated");
    let mut procs = Procs::default();
    let timeout = ["--cluster-node-timeout", "3000"];
    let pdir = procs.start(&base, pport, &timeout);
    procs.start(&base, rport, &timeout);
    procs.start(&base, tport, &timeout);
    let (pid, tid) = (myid(pport), myid(tport));
    let mut p = Client::connect(pport);
    assert_eq!(
        p.cmd_s(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]),
        "+OK\r\n"
    );
    for port in [rport, tport] {
        assert_eq!(
            Client::connect(port).cmd_s(&["CLUSTER", "MEET", "127.0.0.1", &pport.to_string()]),
            "+OK\r\n"
        );
    }
    wait_knows(rport, &pid);
    wait_knows(rport, &tid);
    assert_eq!(
        Client::connect(rport).cmd_s(&["CLUSTER", "REPLICATE", &pid]),
        "+OK\r\n"
    );
    let rid = myid(rport);
    wait_until("the replica is attached", || {
        bulk_text(&p.cmd(&["INFO", "replication"])).contains("connected_slaves:1")
            && bulk_text(&Client::connect(rport).cmd(&["INFO", "replication"]))
                .contains("master_link_status:up")
            // The primary's node must know R as its replica to replicate SETSLOT first
            // (its gossip, which a fast sync can precede).
            && bulk_text(&p.cmd(&["CLUSTER", "NODES"]))
                .lines()
                .any(|l| l.starts_with(&rid) && l.contains("slave") && l.contains(&pid))
    });
    // CLUSTER SETSLOT ... NODE <T> on the primary needs the primary itself to know T as a
    // primary, its handshake done (T met P, R's view of T says nothing of P's).
    wait_until("the primary knows T as a primary", || {
        bulk_text(&p.cmd(&["CLUSTER", "NODES"]))
            .lines()
            .any(|l| l.starts_with(&tid) && l.contains("master") && !l.contains("handshake"))
    });

    // Applied and answered only after the replica has it: the replica's view shows it when
    // the primary replies (gossip alone would take up to a ping period). The TIMEOUT for the
    // replica's acknowledgement only bounds a hang (the default, 2 s, is a race on a loaded
    // machine).
    assert_eq!(
        p.cmd_s(&["CLUSTER", "SETSLOT", "5", "NODE", &tid, "TIMEOUT", "60000"]),
        "+OK\r\n"
    );
    assert_eq!(slots_of(rport, &tid), "5");
    assert_eq!(slots_of(rport, &pid), "0-4 6-16383");
    assert_eq!(slots_of(pport, &tid), "5");

    // The replica stopped (its connection stays open): no ACK, Valkey's timeout error
    // (captured from valkey-server 9.1 by `tests/vectors/capture_setslot.py`), and the
    // primary applied nothing.
    let real = common::vector("setslot.json");
    signal(&mut procs, rport, "-STOP");
    assert_eq!(
        p.cmd_s(&["CLUSTER", "SETSLOT", "6", "NODE", &tid, "TIMEOUT", "300"]),
        real["timeout_reply"].as_str().expect("timeout_reply")
    );
    assert_eq!(slots_of(pport, &pid), "0-4 6-16383");
    signal(&mut procs, rport, "-CONT");

    // Acknowledged means on disk: kill -9 right after the reply, restart from nodes.conf.
    assert_eq!(
        p.cmd_s(&["CLUSTER", "SETSLOT", "7", "NODE", &tid, "TIMEOUT", "60000"]),
        "+OK\r\n"
    );
    procs.kill(pport);
    let conf = std::fs::read_to_string(pdir.join("nodes.conf")).expect("nodes.conf");
    assert_eq!(slots_in(&conf, &tid), "5 7", "{conf}");
    procs.start(&base, pport, &timeout);
    assert_eq!(slots_of(pport, &pid), "0-4 6 8-16383");
    assert_eq!(slots_of(pport, &tid), "5 7");
}

#[test]
fn saveconfig_error_and_fatal_exit_on_failed_config_save() {
    let base = test_dir("conf-fail");
    let mut procs = Procs::default();
    let port = ports::port();
    let dir = procs.start(&base, port, &[]);
    let pid = procs.pid(port);
    let mut c = Client::connect(port);
    assert_eq!(c.cmd_s(&["CLUSTER", "SAVECONFIG"]), "+OK\r\n");
    // A directory where the temporary file goes makes every save fail.
    std::fs::create_dir_all(dir.join(format!(".nodes.conf.tmp-{pid}")).join("x")).unwrap();
    let r = c.cmd_s(&["CLUSTER", "SAVECONFIG"]);
    assert!(
        r.starts_with("-ERR error saving the cluster node config: "),
        "{r}"
    );
    // A config change that cannot be saved is fatal, never acknowledged.
    c.send_raw(&common::encode(&[b"CLUSTER", b"ADDSLOTS", b"7"]));
    let rest = c.read_to_close();
    assert!(
        rest.is_empty(),
        "acknowledged: {:?}",
        String::from_utf8_lossy(&rest)
    );
    let status = procs.child(port).expect("the node").wait_exit();
    assert_eq!(status.code(), Some(1), "{status}");
    let log = std::fs::read_to_string(dir.join("stderr.log")).unwrap();
    assert!(
        log.contains("Fatal: can't update cluster config file"),
        "{log}"
    );
    let conf = std::fs::read_to_string(dir.join("nodes.conf")).unwrap();
    assert!(!conf.contains(" 7\n"), "{conf}");
}

#[test]
fn expire_overflow_and_setslot_extra_arguments() {
    let base = test_dir("conf-errors");
    let mut procs = Procs::default();
    let port = ports::port();
    procs.start(&base, port, &[]);
    let mut c = Client::connect(port);
    assert_eq!(
        c.cmd_s(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]),
        "+OK\r\n"
    );
    common::wait_until("cluster_state:ok", || {
        c.cmd_s(&["CLUSTER", "INFO"]).contains("cluster_state:ok")
    });
    let invalid = "-ERR invalid expire time in 'set' command\r\n";
    let key = slot5_key();
    assert_eq!(
        c.cmd_s(&["SET", &key, "v", "EXAT", "9999999999999999"]),
        invalid
    );
    let id = c.cmd_s(&["CLUSTER", "MYID"]);
    let id = id.lines().nth(1).unwrap().to_string();
    let action = "-ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP\r\n";
    assert_eq!(
        c.cmd_s(&["CLUSTER", "SETSLOT", "5", "STABLE", "extra"]),
        action
    );
    assert_eq!(
        c.cmd_s(&["CLUSTER", "SETSLOT", "5", "NODE", &id, "extra"]),
        action
    );
    assert_eq!(c.cmd_s(&["CLUSTER", "SETSLOT", "5", "STABLE"]), "+OK\r\n");
}

/// A key of hash slot 5.
fn slot5_key() -> String {
    (0..100_000)
        .map(|i| format!("k{i}"))
        .find(|k| ferrocluster_slot::key_hash_slot(k.as_bytes()).get() == 5)
        .expect("a key of slot 5")
}

//! The blocking list and sorted-set pops, run side by side on redis-server 7.0 and on
//! ferrocluster-server (standalone): wake order, timeouts, MULTI, CLIENT UNBLOCK, a BLMOVE
//! chain, pipelined commands behind a blocked one. Every scenario's replies on ours must equal
//! redis-server's. Then the cluster rules on a cluster of ours: what replicas receive, MOVED
//! when the slot moves, UNBLOCKED on a failover. Ports from `common::ports` (the cluster's
//! bus ports +10000). The cluster runs with the long node timeout (`common::NODE_TIMEOUT_MS`):
//! a stalled node is never failed over unasked.

mod common;

use common::{
    bulk_text, ports, require_redis_tools, start_real_server, test_dir, wait_until, Client, Procs,
    RealServer, NODE_TIMEOUT_MS,
};

/// redis-server on `redis` and ours (standalone) on `ours`, their files in `name`'s directory.
fn start_pair(name: &str, redis: u16, ours: u16) -> (Procs, RealServer) {
    require_redis_tools();
    let dir = test_dir(name);
    let real = start_real_server("redis-server", redis, &dir.join("redis"), &[]);
    let mut procs = Procs::default();
    procs.start(&dir, ours, &["--cluster-enabled", "no"]);
    (procs, real)
}

fn c(port: u16) -> Client {
    Client::connect(port)
}

fn id_of(cl: &mut Client) -> String {
    let r = cl.cmd(&["CLIENT", "ID"]);
    String::from_utf8_lossy(&r[1..r.len() - 2]).into_owned()
}

/// INFO `blocked_clients` on `admin`'s server.
fn blocked_clients(admin: &mut Client) -> usize {
    let info = bulk_text(&admin.cmd(&["INFO", "clients"]));
    info.lines()
        .find_map(|l| l.trim().strip_prefix("blocked_clients:"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no blocked_clients in {info}"))
}

/// Waits until `n` clients are blocked (INFO `blocked_clients`).
fn wait_blocked(port: u16, n: usize) {
    let mut admin = c(port);
    wait_until("clients to block", || blocked_clients(&mut admin) == n);
}

/// Whether bytes of a reply wait on `cl`'s connection (without reading them).
fn reply_waiting(cl: &Client) -> bool {
    cl.stream.set_nonblocking(true).expect("nonblocking");
    let mut byte = [0u8; 1];
    let got = cl.stream.peek(&mut byte);
    cl.stream.set_nonblocking(false).expect("blocking");
    matches!(got, Ok(n) if n > 0)
}

/// `BLPOP nokey <timeout>` on `a`: the server reports the client blocked while the command
/// is pending, and the reply that comes afterwards is returned (the timeout's nil). Watching
/// a short timeout can miss the blocked state on a busy machine: the reply must be nil every
/// time, and the command is sent again until one attempt was seen blocked before its reply
/// arrived. Nothing is timed.
fn blpop_seen_blocked_until_timeout(port: u16, a: &mut Client, timeout: &str) -> Vec<u8> {
    let mut admin = c(port);
    common::wait_for("a BLPOP seen blocked before its timeout's reply", || {
        a.send_raw(&common::encode(&[b"BLPOP", b"nokey", timeout.as_bytes()]));
        let mut seen_blocked = false;
        wait_until("the BLPOP blocked or answered", || {
            seen_blocked = blocked_clients(&mut admin) == 1;
            seen_blocked || reply_waiting(a)
        });
        let reply = a.read_reply();
        assert_eq!(
            String::from_utf8_lossy(&reply),
            "*-1\r\n",
            "BLPOP nokey {timeout}: the timeout's nil"
        );
        assert_eq!(blocked_clients(&mut admin), 0, "unblocked by its timeout");
        seen_blocked.then_some(reply)
    })
}

/// A scenario on one server: the replies it collected, in order.
fn scenario(port: u16, run: fn(u16) -> Vec<Vec<u8>>) -> Vec<String> {
    c(port).cmd(&["FLUSHALL"]);
    run(port)
        .into_iter()
        .map(|r| String::from_utf8_lossy(&r).into_owned())
        .collect()
}

fn fifo(port: u16) -> Vec<Vec<u8>> {
    let (mut a, mut b, mut p) = (c(port), c(port), c(port));
    a.send_raw(&common::encode(&[b"BLPOP", b"k1", b"k2", b"0"]));
    wait_blocked(port, 1);
    b.send_raw(&common::encode(&[b"BRPOP", b"k2", b"0"]));
    wait_blocked(port, 2);
    // One push of two elements: the longest waiter gets the first, the next the second.
    let pushed = p.cmd(&["RPUSH", "k2", "x", "y"]);
    vec![
        pushed,
        a.read_reply(),
        b.read_reply(),
        p.cmd(&["EXISTS", "k2"]),
    ]
}

fn timeouts(port: u16) -> Vec<Vec<u8>> {
    let mut a = c(port);
    let r1 = blpop_seen_blocked_until_timeout(port, &mut a, "0.2");
    let r2 = a.cmd(&["BLMOVE", "nokey", "d", "LEFT", "LEFT", "0.05"]);
    let r3 = a.cmd(&["BZPOPMIN", "nokey", "0.05"]);
    let r4 = a.cmd(&["BZMPOP", "0.05", "1", "nokey", "MIN"]);
    let r5 = a.cmd(&["BLMPOP", "0.05", "1", "nokey", "LEFT"]);
    a.cmd(&["HELLO", "3"]);
    let r6 = a.cmd(&["BLPOP", "nokey", "0.05"]);
    let r7 = a.cmd(&["BRPOPLPUSH", "nokey", "d", "0.05"]);
    vec![r1, r2, r3, r4, r5, r6, r7]
}

fn multi(port: u16) -> Vec<Vec<u8>> {
    let mut a = c(port);
    a.cmd(&["MULTI"]);
    a.cmd(&["BLPOP", "nokey", "0"]);
    a.cmd(&["RPUSH", "k", "v"]);
    a.cmd(&["BLPOP", "k", "0"]);
    vec![a.cmd(&["EXEC"])]
}

fn unblock(port: u16) -> Vec<Vec<u8>> {
    let (mut a, mut b, mut p) = (c(port), c(port), c(port));
    let (ida, idb) = (id_of(&mut a), id_of(&mut b));
    a.send_raw(&common::encode(&[b"BLPOP", b"k", b"0"]));
    b.send_raw(&common::encode(&[b"BZPOPMAX", b"z", b"0"]));
    wait_blocked(port, 2);
    let u1 = p.cmd(&["CLIENT", "UNBLOCK", &ida]);
    let ra = a.read_reply();
    let u2 = p.cmd(&["CLIENT", "UNBLOCK", &idb, "ERROR"]);
    let rb = b.read_reply();
    let u3 = p.cmd(&["CLIENT", "UNBLOCK", &ida]);
    let u4 = p.cmd(&["CLIENT", "UNBLOCK", &ida, "FOO"]);
    vec![u1, ra, u2, rb, u3, u4]
}

fn chain(port: u16) -> Vec<Vec<u8>> {
    let (mut a, mut b, mut p) = (c(port), c(port), c(port));
    // b waits on "dst", a moves from "src" to "dst" when src gets an element: one push wakes
    // both, through the move.
    b.send_raw(&common::encode(&[b"BLPOP", b"dst", b"0"]));
    wait_blocked(port, 1);
    a.send_raw(&common::encode(&[
        b"BLMOVE", b"src", b"dst", b"RIGHT", b"LEFT", b"0",
    ]));
    wait_blocked(port, 2);
    let pushed = p.cmd(&["LPUSH", "src", "v"]);
    vec![
        pushed,
        a.read_reply(),
        b.read_reply(),
        p.cmd(&["EXISTS", "src", "dst"]),
    ]
}

fn pipelined(port: u16) -> Vec<Vec<u8>> {
    let (mut a, mut p) = (c(port), c(port));
    // Commands after a blocked one wait for it, and run in order once it is answered.
    let mut req = common::encode(&[b"BLPOP", b"k", b"0"]);
    req.extend(common::encode(&[b"LLEN", b"k"]));
    req.extend(common::encode(&[b"PING"]));
    a.send_raw(&req);
    wait_blocked(port, 1);
    let pushed = p.cmd(&["RPUSH", "k", "a", "b"]);
    vec![pushed, a.read_reply(), a.read_reply(), a.read_reply()]
}

fn zsets(port: u16) -> Vec<Vec<u8>> {
    let (mut a, mut b, mut p) = (c(port), c(port), c(port));
    a.send_raw(&common::encode(&[b"BZPOPMIN", b"z", b"0"]));
    wait_blocked(port, 1);
    b.send_raw(&common::encode(&[
        b"BZMPOP", b"0", b"1", b"z", b"MAX", b"COUNT", b"5",
    ]));
    wait_blocked(port, 2);
    // A list push does not wake sorted-set waiters.
    p.cmd(&["SET", "x", "1"]);
    let added = p.cmd(&["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
    vec![added, a.read_reply(), b.read_reply()]
}

fn wrong_type_wait(port: u16) -> Vec<Vec<u8>> {
    let (mut a, mut p) = (c(port), c(port));
    // A BLPOP waiter stays blocked while its key holds a sorted set.
    a.send_raw(&common::encode(&[b"BLPOP", b"k", b"0"]));
    wait_blocked(port, 1);
    p.cmd(&["ZADD", "k", "1", "a"]);
    p.cmd(&["DEL", "k"]);
    p.cmd(&["RPUSH", "k", "v"]);
    vec![a.read_reply()]
}

/// Waiters are served when their key arrives by RENAME, COPY, SORT ... STORE, RESTORE, MOVE
/// or SWAPDB, not only by a push (issue 37: ours woke them only for pushes and moves; Redis's
/// `dbAdd` signals the key).
fn key_arrivals(port: u16) -> Vec<Vec<u8>> {
    let mut a = c(port);
    let mut got = Vec::new();
    // `block` on `a`, then `arrive` on `p`: its reply and the waiter's.
    let mut serve = |block: &[&[u8]], p: &mut Client, arrive: &[&[u8]]| {
        a.send_raw(&common::encode(block));
        wait_blocked(port, 1);
        p.send_raw(&common::encode(arrive));
        got.push(p.read_reply());
        got.push(a.read_reply());
    };
    let mut p = c(port);
    let mut setup = c(port);
    setup.cmd(&["RPUSH", "src", "r"]);
    setup.cmd(&["ZADD", "zsrc", "1", "c"]);
    setup.cmd(&["RPUSH", "unsorted", "3", "1", "2"]);
    setup.cmd(&["RPUSH", "dumped", "d"]);
    let dump = setup.cmd(&["DUMP", "dumped"]);
    let payload = dump[dump.iter().position(|&b| b == b'\n').unwrap() + 1..dump.len() - 2].to_vec();
    setup.cmd(&["SELECT", "1"]);
    setup.cmd(&["RPUSH", "k4", "m"]);
    serve(
        &[b"BLPOP", b"k1", b"0"],
        &mut p,
        &[b"RENAME", b"src", b"k1"],
    );
    serve(
        &[b"BZPOPMIN", b"z", b"0"],
        &mut p,
        &[b"COPY", b"zsrc", b"z"],
    );
    serve(
        &[b"BLMPOP", b"0", b"1", b"k2", b"LEFT", b"COUNT", b"3"],
        &mut p,
        &[b"SORT", b"unsorted", b"STORE", b"k2"],
    );
    serve(
        &[b"BRPOP", b"k3", b"0"],
        &mut p,
        &[b"RESTORE", b"k3", b"0", &payload],
    );
    // `setup` is in database 1, where k4 is.
    serve(
        &[b"BLPOP", b"k4", b"0"],
        &mut setup,
        &[b"MOVE", b"k4", b"0"],
    );
    // SWAPDB brings database 1's k5 into database 0 (Redis `scanDatabaseForReadyKeys`).
    setup.cmd(&["RPUSH", "k5", "s"]);
    serve(
        &[b"BLPOP", b"k5", b"0"],
        &mut setup,
        &[b"SWAPDB", b"0", b"1"],
    );
    got
}

#[test]
fn blocking_pops_match_redis() {
    let [redis, ours] = ports::ports(2)[..] else {
        unreachable!()
    };
    let (_procs, _redis) = start_pair("blocking-pops", redis, ours);
    type Scenario = fn(u16) -> Vec<Vec<u8>>;
    let all: [(&str, Scenario); 9] = [
        ("fifo", fifo),
        ("timeouts", timeouts),
        ("multi", multi),
        ("unblock", unblock),
        ("chain", chain),
        ("pipelined", pipelined),
        ("zsets", zsets),
        ("wrong_type_wait", wrong_type_wait),
        ("key_arrivals", key_arrivals),
    ];
    for (name, run) in all {
        let want = scenario(redis, run);
        let got = scenario(ours, run);
        assert_eq!(
            got, want,
            "scenario {name}: ours (left) vs redis-server (right)"
        );
    }
}

fn myid(port: u16) -> String {
    bulk_text(&c(port).cmd(&["CLUSTER", "MYID"]))
}

/// `from` MEETs `to` and waits until it knows it; returns `to`'s ID.
fn meet(from: u16, to: u16) -> String {
    assert_eq!(
        c(from).cmd_s(&["CLUSTER", "MEET", "127.0.0.1", &to.to_string()]),
        "+OK\r\n"
    );
    let id = myid(to);
    wait_until("the MEET completes", || {
        bulk_text(&c(from).cmd(&["CLUSTER", "NODES"])).contains(&id)
    });
    id
}

/// A cluster: `primary` owns every slot, `replica` replicates it, `other` is a primary without
/// slots.
fn cluster(procs: &mut Procs, name: &str, [primary, replica, other]: [u16; 3]) -> (String, String) {
    let dir = test_dir(name);
    let timeout = NODE_TIMEOUT_MS.to_string();
    for port in [primary, replica, other] {
        procs.start(&dir, port, &["--cluster-node-timeout", &timeout]);
    }
    assert_eq!(
        c(primary).cmd_s(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]),
        "+OK\r\n"
    );
    let pid = meet(replica, primary);
    meet(other, primary);
    let oid = myid(other);
    assert_eq!(c(replica).cmd_s(&["CLUSTER", "REPLICATE", &pid]), "+OK\r\n");
    for port in [primary, replica, other] {
        wait_until("cluster_state:ok", || {
            bulk_text(&c(port).cmd(&["CLUSTER", "INFO"])).contains("cluster_state:ok")
        });
    }
    wait_until("the replica to sync", || {
        c(primary).cmd_s(&["WAIT", "1", "100"]) == ":1\r\n"
    });
    // CLUSTER SETSLOT ... NODE <other> needs the primary to know `other` as a primary (its
    // handshake done), which cluster_state:ok does not say.
    wait_until("the primary knows the other node as a primary", || {
        bulk_text(&c(primary).cmd(&["CLUSTER", "NODES"]))
            .lines()
            .any(|l| l.starts_with(&oid) && l.contains("master") && !l.contains("handshake"))
    });
    // Every node knows the other two, handshake done and link up, and `other` knows the
    // replica as the primary's replica: a failover's vote request from a sender `other` does
    // not know yet is dropped (Valkey `clusterProcessPacket`), and the election would retry
    // only after two node timeouts (a stalled machine once left it waiting for its votes).
    let rid = myid(replica);
    wait_until("every node to know the other two, connected", || {
        [primary, replica, other].into_iter().all(|port| {
            let text = bulk_text(&c(port).cmd(&["CLUSTER", "NODES"]));
            let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
            lines.len() == 3
                && lines
                    .iter()
                    .all(|l| l.contains(" connected") && !l.contains("handshake"))
                && lines
                    .iter()
                    .any(|l| l.starts_with(&rid) && l.contains("slave") && l.contains(&pid))
        })
    });
    (pid, oid)
}

/// In cluster mode: replicas receive the pop a blocked client was served (`LMOVE`,
/// `ZPOPMAX`), not the blocking command; a client blocked on a slot that moves to another
/// node gets `-MOVED` (Valkey `clusterRedirectBlockedClientIfNeeded`); a primary that turns
/// replica answers its blocked clients `-UNBLOCKED` and closes them (Valkey
/// `disconnectAllBlockedClients`).
#[test]
fn cluster_rules_for_blocked_clients() {
    let mut procs = Procs::default();
    let [primary, replica, other] = ports::ports(3)[..] else {
        unreachable!()
    };
    let (_pid, oid) = cluster(&mut procs, "blocking-cluster", [primary, replica, other]);
    // Replication of served pops.
    let (mut a, mut p) = (c(primary), c(primary));
    a.send_raw(&common::encode(&[
        b"BLMOVE", b"{t}src", b"{t}dst", b"LEFT", b"RIGHT", b"0",
    ]));
    wait_blocked(primary, 1);
    p.cmd(&["RPUSH", "{t}src", "1", "2"]);
    assert_eq!(a.read_reply(), b"$1\r\n1\r\n");
    p.cmd(&["ZADD", "z", "1", "a", "2", "b"]);
    assert_eq!(
        p.cmd(&["BZPOPMAX", "z", "0"]),
        b"*3\r\n$1\r\nz\r\n$1\r\nb\r\n$1\r\n2\r\n"
    );
    assert_eq!(p.cmd_s(&["WAIT", "1", "60000"]), ":1\r\n");
    let mut r = c(replica);
    r.cmd(&["READONLY"]);
    assert_eq!(
        r.cmd(&["LRANGE", "{t}dst", "0", "-1"]),
        b"*1\r\n$1\r\n1\r\n"
    );
    assert_eq!(
        r.cmd(&["LRANGE", "{t}src", "0", "-1"]),
        b"*1\r\n$1\r\n2\r\n"
    );
    assert_eq!(r.cmd(&["ZRANGE", "z", "0", "-1"]), b"*1\r\n$1\r\na\r\n");

    // The slot of "moved" goes to `other` while a client waits on it.
    let slot = "1999"; // CLUSTER KEYSLOT moved
    assert_eq!(
        p.cmd_s(&["CLUSTER", "KEYSLOT", "moved"]),
        format!(":{slot}\r\n")
    );
    let mut b = c(primary);
    b.send_raw(&common::encode(&[b"BLPOP", b"moved", b"0"]));
    wait_blocked(primary, 1);
    for port in [other, primary] {
        assert_eq!(
            c(port).cmd_s(&["CLUSTER", "SETSLOT", slot, "NODE", &oid, "TIMEOUT", "60000"]),
            "+OK\r\n"
        );
    }
    assert_eq!(
        String::from_utf8_lossy(&b.read_reply()),
        format!("-MOVED {slot} 127.0.0.1:{other}\r\n")
    );

    // A failover: the old primary's blocked client is unblocked and disconnected. The manual
    // failover's timeout (5 s by default) is HANG on every node: a loaded machine cannot
    // abort it.
    common::manual_failover_timeout_hang(&[primary, replica, other]);
    let mut d = c(primary);
    d.send_raw(&common::encode(&[b"BLPOP", b"{t}src2", b"0"]));
    wait_blocked(primary, 1);
    assert_eq!(c(replica).cmd_s(&["CLUSTER", "FAILOVER"]), "+OK\r\n");
    assert_eq!(
        String::from_utf8_lossy(&d.read_to_close()),
        "-UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)\r\n"
    );
}

/// A client that closes while blocked in `BLPOP k 0` leaves the waiters at once: the next
/// push goes to the next waiter, never to the closed connection, and nothing is lost (issue
/// 37: ours kept the closed client blocked, and the push that answered `:1` vanished). The
/// same steps on valkey-server 9.1 and on ours.
#[test]
fn a_waiter_that_closes_leaves_and_the_next_push_reaches_the_next_waiter() {
    let dir = test_dir("blocking-closed-waiter");
    let [valkey, ours] = ports::ports(2)[..] else {
        unreachable!()
    };
    let _valkey = start_real_server("valkey-server", valkey, &dir.join("valkey"), &[]);
    let mut procs = Procs::default();
    procs.start(
        &dir,
        ours,
        &["--cluster-enabled", "no", "--io-threads", "2"],
    );
    for port in [valkey, ours] {
        let mut admin = c(port);
        let connected = |admin: &mut Client| {
            let info = bulk_text(&admin.cmd(&["INFO", "clients"]));
            info.lines()
                .find_map(|l| l.trim().strip_prefix("connected_clients:"))
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or_else(|| panic!("no connected_clients in {info}"))
        };
        let mut gone = c(port);
        gone.send_raw(&common::encode(&[b"BLPOP", b"k", b"0"]));
        wait_blocked(port, 1);
        drop(gone);
        wait_until("the closed waiter to leave", || {
            blocked_clients(&mut admin) == 0 && connected(&mut admin) == 1
        });
        let mut next = c(port);
        next.send_raw(&common::encode(&[b"BLPOP", b"k", b"0"]));
        wait_blocked(port, 1);
        assert_eq!(admin.cmd_s(&["RPUSH", "k", "v"]), ":1\r\n", "port {port}");
        assert_eq!(
            String::from_utf8_lossy(&next.read_reply()),
            "*2\r\n$1\r\nk\r\n$1\r\nv\r\n",
            "port {port}: the live waiter gets the element"
        );
        assert_eq!(admin.cmd_s(&["LLEN", "k"]), ":0\r\n", "port {port}");
    }
}

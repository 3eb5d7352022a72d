//! TLS on every port (issue #24): the client `tls-port` beside the plain port, with
//! redis-cli 7.0 (`--tls --cacert --cert --key`) and redis-py (`ssl=True`) as the clients;
//! `tls-auth-clients`; certificate reload by CONFIG SET without a restart; a 3+3 cluster with
//! `tls-cluster yes` and `tls-replication yes` formed by `redis-cli --tls --cluster create`,
//! used by redis-py through an atomic slot migration and a failover; a node of another CA
//! kept out of the bus; a mixed cluster with redis-server 7.0 nodes, bus and replication over
//! TLS both ways.
//!
//! Every port comes from `common::ports` (the one allocator of every test binary). A node's
//! TLS port is an allocated data port too: with `tls-cluster yes` its bus port is the TLS
//! port + `BUS_OFFSET` (Valkey `defaultClientPort`), which the allocator keeps free. Clusters
//! start with the long node timeout (`common::NODE_TIMEOUT_MS`), set short on every node just
//! before a kill; waits only bound a hang (`wait_until`, `HANG`); a connection the server
//! must close is read to its end, and one left open fails the test.
#![allow(clippy::disallowed_methods)]

mod common;

use common::certs::{NodeCert, TestCa};
use common::*;
use ferrocluster_testkit::BUS_OFFSET;
use std::path::{Path, PathBuf};

/// redis-cli over TLS to `port` with `cert`'s files (or none: `cert` = None sends no
/// client certificate but still verifies the server with `ca`); returns (success, output).
fn cli_tls(port: u16, ca: &Path, cert: Option<&NodeCert>, args: &[&str]) -> (bool, String) {
    let mut a: Vec<String> = vec!["-p".into(), port.to_string()];
    match cert {
        Some(c) => a.extend(c.cli_flags()),
        None => a.extend(["--tls".into(), "--cacert".into(), ca.display().to_string()]),
    }
    a.extend(args.iter().map(|s| s.to_string()));
    let (ok, out) = run_bounded("redis-cli", &a, HANG);
    (ok, out.trim().to_string())
}

/// The ports of the endpoints in redis-cli's printout of `CLUSTER SLOTS` (one value a line:
/// each endpoint's `127.0.0.1` line is followed by its port's), not slot numbers or IDs.
fn endpoint_ports(slots: &str) -> Vec<u16> {
    let lines: Vec<&str> = slots.lines().map(str::trim).collect();
    lines
        .windows(2)
        .filter(|w| w[0] == "127.0.0.1")
        .filter_map(|w| w[1].parse().ok())
        .collect()
}

/// Runs a redis-py script (bounded by [`HANG`]); returns what it printed. Fails the test
/// when the script fails.
fn redis_py(script: &str) -> String {
    let (ok, out) = run_bounded("python3", &["-c", script], HANG);
    assert!(ok, "redis-py failed:\n{out}");
    out.trim().to_string()
}

#[test]
fn tls_port_beside_the_plain_port_with_redis_cli_and_redis_py_and_reload() {
    require_redis_tools();
    require_redis_py();
    let [port, tls_port] = ports::ports(2)[..] else {
        unreachable!()
    };
    let dir = test_dir("tls-client");
    let ca = TestCa::new(&dir.join("ca1"), "one");
    let node = ca.node("node");
    let client = ca.node("client");
    let mut procs = Procs::default();
    let mut flags = vec![
        "--cluster-enabled".to_string(),
        "no".into(),
        "--tls-port".into(),
        tls_port.to_string(),
    ];
    flags.extend(node.server_flags());
    let f: Vec<&str> = flags.iter().map(String::as_str).collect();
    procs.start(&dir, port, &f);
    wait_for_port(tls_port);

    // redis-cli over TLS with a client certificate of the CA.
    assert_eq!(
        cli_tls(tls_port, &node.ca, Some(&client), &["PING"]),
        (true, "PONG".into())
    );
    assert_eq!(
        cli_tls(tls_port, &node.ca, Some(&client), &["SET", "k", "v1"]).1,
        "OK"
    );
    // The plain port serves the same data.
    let mut plain = Client::connect(port);
    assert_eq!(bulk_text(&plain.cmd(&["GET", "k"])), "v1");
    // tls-auth-clients yes (the default): no client certificate, no session.
    let (_, out) = cli_tls(tls_port, &node.ca, None, &["PING"]);
    assert_ne!(out, "PONG");
    // A plain client on the TLS port learns nothing (its bytes are not a TLS record) and is
    // closed.
    let mut raw = Client::connect(tls_port);
    raw.send_raw(b"PING\r\n");
    let got = raw.read_until_closed();
    assert!(!String::from_utf8_lossy(&got).contains("PONG"), "{got:?}");

    // redis-py with ssl=True (ssl_ca_certs, ssl_certfile, ssl_keyfile).
    let script = format!(
        "import redis\n\
         r = redis.Redis(host='127.0.0.1', port={tls_port}, ssl=True, ssl_ca_certs='{}', \
         ssl_certfile='{}', ssl_keyfile='{}')\n\
         r.set('py', 'x' * 100000)\n\
         p = r.pipeline(transaction=False)\n\
         for i in range(200): p.incr('n')\n\
         p.execute()\n\
         print(len(r.get('py')), int(r.get('n')), r.get('k').decode())",
        client.ca.display(),
        client.cert.display(),
        client.key.display()
    );
    assert_eq!(redis_py(&script), "100000 200 v1");

    // CONFIG SET tls-auth-clients optional: no client certificate is fine now.
    assert_eq!(
        plain.cmd_s(&["CONFIG", "SET", "tls-auth-clients", "optional"]),
        "+OK\r\n"
    );
    assert_eq!(
        cli_tls(tls_port, &node.ca, None, &["PING"]),
        (true, "PONG".into())
    );

    // Reload: files of a second CA, set through the plain port, take over for new
    // connections without a restart; the old CA's clients are refused from then on.
    let ca2 = TestCa::new(&dir.join("ca2"), "two");
    let node2 = ca2.node("node");
    let client2 = ca2.node("client");
    let reply = plain.cmd_s(&[
        "CONFIG",
        "SET",
        "tls-cert-file",
        &node2.cert.display().to_string(),
        "tls-key-file",
        &node2.key.display().to_string(),
        "tls-ca-cert-file",
        &node2.ca.display().to_string(),
        "tls-auth-clients",
        "yes",
    ]);
    assert_eq!(reply, "+OK\r\n");
    assert_eq!(
        cli_tls(tls_port, &node2.ca, Some(&client2), &["GET", "k"]),
        (true, "v1".into())
    );
    let (_, out) = cli_tls(tls_port, &node.ca, Some(&client), &["PING"]);
    assert_ne!(out, "PONG");
    let got = plain.cmd_s(&["CONFIG", "GET", "tls-cert-file"]);
    assert!(
        got.ends_with(&format!("{}\r\n", node2.cert.display())),
        "{got}"
    );
    // A file that does not load is refused and the files in force stay.
    let reply = plain.cmd_s(&["CONFIG", "SET", "tls-cert-file", "/nonexistent.crt"]);
    assert!(
        reply.starts_with("-ERR CONFIG SET failed (possibly related to argument 'tls-cert-file') - Failed to load certificate: /nonexistent.crt"),
        "{reply}"
    );
    assert_eq!(
        cli_tls(tls_port, &node2.ca, Some(&client2), &["PING"]),
        (true, "PONG".into())
    );
    // An unknown cipher name is refused by name.
    let reply = plain.cmd_s(&["CONFIG", "SET", "tls-ciphersuites", "TLS_NOPE"]);
    assert!(reply.contains("unknown cipher 'TLS_NOPE'"), "{reply}");
}

/// The flags of a cluster node with every port TLS: `tls-port`, `tls-cluster yes`,
/// `tls-replication yes` (the plain port stays on for the test's own probes), the long node
/// timeout ([`NODE_TIMEOUT_MS`]).
fn tls_node_flags(tls_port: u16, cert: &NodeCert) -> Vec<String> {
    let mut f: Vec<String> = [
        "--tls-port",
        &tls_port.to_string(),
        "--tls-cluster",
        "yes",
        "--tls-replication",
        "yes",
        "--cluster-node-timeout",
        &NODE_TIMEOUT_MS.to_string(),
        "--loglevel",
        "verbose",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    f.extend(cert.server_flags());
    f
}

/// Starts our node on `port` with TLS on `tls_port` (its bus port `tls_port` +
/// [`BUS_OFFSET`]) and waits until both listen; returns the node's directory.
fn start_tls_node(
    procs: &mut Procs,
    dir: &Path,
    port: u16,
    tls_port: u16,
    cert: &NodeCert,
) -> PathBuf {
    let flags = tls_node_flags(tls_port, cert);
    let f: Vec<&str> = flags.iter().map(String::as_str).collect();
    let node_dir = procs.start(dir, port, &f);
    wait_for_port(tls_port);
    node_dir
}

/// The flags of a redis-server 7.0 cluster node with every port TLS, as
/// [`tls_node_flags`].
fn redis_tls_flags(tls_port: u16, cert: &NodeCert) -> Vec<String> {
    let mut f: Vec<String> = [
        "--cluster-enabled",
        "yes",
        "--cluster-node-timeout",
        &NODE_TIMEOUT_MS.to_string(),
        "--tls-port",
        &tls_port.to_string(),
        "--tls-cluster",
        "yes",
        "--tls-replication",
        "yes",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    f.extend(cert.server_flags());
    f
}

fn known_nodes(port: u16) -> usize {
    let mut c = Client::connect(port);
    bulk_text(&c.cmd(&["CLUSTER", "NODES"])).lines().count()
}

fn info(port: u16, section: &str) -> String {
    bulk_text(&Client::connect(port).cmd(&["INFO", section]))
}

/// `CLUSTER MEET 127.0.0.1 <tls_port> <tls_port + BUS_OFFSET>` on `port`: a node of a
/// `tls-cluster yes` cluster, at its TLS bus port.
fn meet_tls(port: u16, tls_port: u16) {
    let bus = (tls_port + BUS_OFFSET).to_string();
    assert_eq!(
        Client::connect(port).cmd_s(&["CLUSTER", "MEET", "127.0.0.1", &tls_port.to_string(), &bus]),
        "+OK\r\n",
        "CLUSTER MEET {tls_port} on {port}"
    );
}

/// Waits until every node of `ports` shows the same slot map (`CLUSTER NODES` read on the
/// plain ports).
fn wait_agree(ports: &[u16]) {
    ferrocluster_testkit::cluster::wait_agree(ports, |port| {
        Ok(bulk_text(&Client::connect(port).cmd(&["CLUSTER", "NODES"])))
    });
}

#[test]
fn tls_cluster_formed_by_redis_cli_used_by_redis_py_through_a_failover() {
    require_redis_tools();
    require_redis_py();
    let dir = test_dir("tls-cluster");
    let ca = TestCa::new(&dir.join("ca"), "cluster");
    let client = ca.node("client");
    let mut procs = Procs::default();
    let all = ports::ports(12);
    let (plain, tls) = (all[..6].to_vec(), all[6..].to_vec());
    for (i, (&p, &t)) in plain.iter().zip(&tls).enumerate() {
        let cert = ca.node(&format!("node{i}"));
        start_tls_node(&mut procs, &dir, p, t, &cert);
    }
    // redis-cli --tls --cluster create over the TLS ports (the first three are primaries).
    let mut args = client.cli_flags();
    args.extend(["--cluster".into(), "create".into()]);
    args.extend(tls.iter().map(|p| format!("127.0.0.1:{p}")));
    args.extend([
        "--cluster-replicas".into(),
        "1".into(),
        "--cluster-yes".into(),
    ]);
    let (ok, out) = run_bounded("redis-cli", &args, HANG);
    assert!(ok && out.contains("[OK] All 16384 slots covered."), "{out}");
    wait_cluster_ok(&plain);
    wait_views_agree(&plain, 3, 3);

    // Announcements: a TLS client sees the TLS ports, a plain one the plain ports.
    let (_, slots_tls) = cli_tls(tls[0], &client.ca, Some(&client), &["CLUSTER", "SLOTS"]);
    let shown = endpoint_ports(&slots_tls);
    assert!(
        !shown.is_empty() && shown.iter().all(|p| tls.contains(p)),
        "{slots_tls}"
    );
    let plain_shown = endpoint_ports(
        &run_bounded(
            "redis-cli",
            &["-p", &plain[0].to_string(), "CLUSTER", "SLOTS"],
            HANG,
        )
        .1,
    );
    assert!(
        !plain_shown.is_empty() && plain_shown.iter().all(|p| plain.contains(p)),
        "{plain_shown:?}"
    );
    let shards = Client::connect(plain[0]).cmd_s(&["CLUSTER", "SHARDS"]);
    assert!(shards.contains("tls-port"), "{shards}");
    // MOVED sends a TLS client to a TLS port: the first of k0..k19 that tls[0] does not own.
    let moved = (0..20)
        .find_map(|k| {
            let key = format!("k{k}");
            let (_, out) = cli_tls(tls[0], &client.ca, Some(&client), &["SET", &key, "x"]);
            out.starts_with("MOVED").then_some(out)
        })
        .expect("a key of another primary among k0..k19");
    let moved_port: u16 = moved.rsplit(':').next().unwrap().parse().unwrap();
    assert!(tls.contains(&moved_port), "{moved}");

    // Every replica syncs over TLS from its primary's TLS port.
    for &p in &plain {
        let repl = info(p, "replication");
        if repl.contains("role:slave") {
            assert!(
                tls.iter()
                    .any(|t| repl.contains(&format!("master_port:{t}\r\n"))),
                "{repl}"
            );
        }
    }

    // redis-py RedisCluster(ssl=True) through the TLS port `port` (no socket timeout: the
    // run is bounded by HANG instead).
    let py = |port: u16, body: &str| {
        redis_py(&format!(
            "from redis.cluster import RedisCluster\n\
             rc = RedisCluster(host='127.0.0.1', port={port}, ssl=True, ssl_ca_certs='{}', \
             ssl_certfile='{}', ssl_keyfile='{}')\n{body}",
            client.ca.display(),
            client.cert.display(),
            client.key.display()
        ))
    };
    assert_eq!(
        py(tls[1], "for i in range(300): rc.set(f'key:{i}', f'v{i}')\nprint(sum(rc.get(f'key:{i}') == f'v{i}'.encode() for i in range(300)))"),
        "300"
    );
    // Atomic slot migration between two primaries runs over TLS too (tls-replication yes:
    // Valkey's `connTypeOfReplication` to the target's TLS port): move key:0's slot. The
    // handoff's write pause completes however slowly the machine runs.
    manual_failover_timeout_hang(&plain);
    let primary = |p: u16| info(p, "replication").contains("role:master");
    let from = plain
        .iter()
        .copied()
        .find(|&p| {
            primary(p)
                && !Client::connect(p)
                    .cmd_s(&["GET", "key:0"])
                    .starts_with("-MOVED")
        })
        .expect("key:0's primary");
    let to = plain
        .iter()
        .copied()
        .find(|&p| p != from && primary(p))
        .expect("another primary");
    let to_id = bulk_text(&Client::connect(to).cmd(&["CLUSTER", "MYID"]))
        .trim()
        .to_string();
    let slot = Client::connect(from).cmd_s(&["CLUSTER", "KEYSLOT", "key:0"]);
    let slot = slot.trim_start_matches(':').trim().to_string();
    let r = Client::connect(from).cmd_s(&[
        "CLUSTER",
        "MIGRATESLOTS",
        "SLOTSRANGE",
        &slot,
        &slot,
        "NODE",
        &to_id,
    ]);
    assert_eq!(r, "+OK\r\n");
    wait_until("key:0's slot moved with its key", || {
        bulk_text(&Client::connect(to).cmd(&["GET", "key:0"])) == "v0"
    });
    wait_agree(&plain);
    // Let the replicas take every write (WAIT on each primary), then kill -9 a primary;
    // every node detects the failure with the short node timeout from just before.
    let wait_ms = HANG.as_millis().to_string();
    for &p in &plain {
        if primary(p) {
            assert_eq!(
                Client::connect(p).cmd_s(&["WAIT", "1", &wait_ms]),
                ":1\r\n",
                "WAIT on {p}"
            );
        }
    }
    let victim = plain
        .iter()
        .copied()
        .find(|&p| primary(p))
        .expect("a primary");
    let victim_id = bulk_text(&Client::connect(victim).cmd(&["CLUSTER", "MYID"]))
        .trim()
        .to_string();
    detect_failures_fast(&plain);
    procs.kill(victim);
    let survivors: Vec<u16> = plain.iter().copied().filter(|p| *p != victim).collect();
    // A replica took over: every survivor is ok and shows the victim without slots.
    wait_until("a replica took over the victim's slots everywhere", || {
        survivors.iter().all(|&p| {
            let mut c = Client::connect(p);
            let nodes = bulk_text(&c.cmd(&["CLUSTER", "NODES"]));
            let victim_slots = nodes
                .lines()
                .find(|l| l.starts_with(&victim_id))
                .is_some_and(|l| l.split(' ').nth(8).is_some());
            !victim_slots && bulk_text(&c.cmd(&["CLUSTER", "INFO"])).contains("cluster_state:ok")
        })
    });
    // Read through a survivor's TLS port.
    let entry = tls[plain.iter().position(|&p| p != victim).expect("a survivor")];
    let read_back = py(
        entry,
        "print(sum(rc.get(f'key:{i}') == f'v{i}'.encode() for i in range(300)))",
    );
    assert_eq!(read_back, "300");
}

#[test]
fn a_node_of_another_ca_cannot_join_and_plain_tcp_to_the_tls_bus_port_learns_nothing() {
    let [a_port, b_port, x_port, a_tls, b_tls, x_tls] = ports::ports(6)[..] else {
        unreachable!()
    };
    let dir = test_dir("tls-foreign");
    let ca = TestCa::new(&dir.join("ca"), "good");
    let bad_ca = TestCa::new(&dir.join("bad"), "bad");
    let mut procs = Procs::default();
    let a_dir = start_tls_node(&mut procs, &dir, a_port, a_tls, &ca.node("a"));
    start_tls_node(&mut procs, &dir, b_port, b_tls, &ca.node("b"));
    start_tls_node(&mut procs, &dir, x_port, x_tls, &bad_ca.node("x"));
    // a and b meet over TLS.
    meet_tls(a_port, b_tls);
    wait_until("a and b know each other", || {
        known_nodes(a_port) == 2 && known_nodes(b_port) == 2
    });
    // x meets a, and a meets x: both handshakes fail, logged on a in Valkey's words.
    meet_tls(x_port, a_tls);
    meet_tls(a_port, x_tls);
    let log_a = a_dir.join("stderr.log");
    let refused_out = format!(
        "Connection with node at 127.0.0.1:{} failed",
        x_tls + BUS_OFFSET
    );
    wait_until("a logged both refusals", || {
        let log = std::fs::read_to_string(&log_a).unwrap_or_default();
        log.contains("Error accepting cluster node connection") && log.contains(&refused_out)
    });
    // Plain TCP to the TLS bus port: a bus-looking frame gets no bus frame back, and the
    // connection is closed.
    let mut raw = Client::connect(a_tls + BUS_OFFSET);
    let mut frame = b"RCmb".to_vec();
    frame.extend_from_slice(&[0u8; 2252]);
    raw.send_raw(&frame);
    let got = raw.read_until_closed();
    // Nothing but a TLS alert record (content type 21) may come back before the close.
    assert!(got.is_empty() || got[0] == 0x15, "{got:?}");
    assert!(!got.windows(4).any(|w| w == b"RCmb"), "{got:?}");
    // x never became a member: to a it is at most a node in handshake under a made-up ID
    // (Valkey keeps a MEET's node in handshake until the handshake timeout), never a
    // connected master and never under x's own ID; b never heard of it; x never learned a's
    // ID.
    let mut a = Client::connect(a_port);
    let text = bulk_text(&a.cmd(&["CLUSTER", "NODES"]));
    let x_addr = format!(":{x_tls}@");
    for line in text.lines().filter(|l| l.contains(&x_addr)) {
        assert!(
            line.contains("handshake") && !line.contains(" connected"),
            "{text}"
        );
    }
    let x_id = bulk_text(&Client::connect(x_port).cmd(&["CLUSTER", "MYID"]));
    assert!(!text.contains(x_id.trim()), "{text}");
    let b_nodes = bulk_text(&Client::connect(b_port).cmd(&["CLUSTER", "NODES"]));
    assert!(
        !b_nodes.contains(&x_addr) && !b_nodes.contains(x_id.trim()),
        "{b_nodes}"
    );
    let a_id = bulk_text(&a.cmd(&["CLUSTER", "MYID"]));
    let xs = bulk_text(&Client::connect(x_port).cmd(&["CLUSTER", "NODES"]));
    assert!(!xs.contains(a_id.trim()), "{xs}");
}

#[test]
fn mixed_tls_cluster_with_redis_7_nodes_both_directions() {
    require_redis_tools();
    // Ours: a, b, c; redis-server 7.0: r, r2. Each a plain port and a TLS port.
    let [a_port, b_port, r_port, r2_port, c_port, a_tls, b_tls, r_tls, r2_tls, c_tls] =
        ports::ports(10)[..]
    else {
        unreachable!()
    };
    let dir = test_dir("tls-mixed");
    let ca = TestCa::new(&dir.join("ca"), "mixed");
    let client = ca.node("client");
    let mut procs = Procs::default();
    start_tls_node(&mut procs, &dir, a_port, a_tls, &ca.node("a"));
    start_tls_node(&mut procs, &dir, b_port, b_tls, &ca.node("b"));
    let rflags = redis_tls_flags(r_tls, &ca.node("redis"));
    let rf: Vec<&str> = rflags.iter().map(String::as_str).collect();
    let _redis = start_real_server("redis-server", r_port, &dir.join("redis"), &rf);
    wait_for_port(r_tls);
    // Ours meets Redis, and Redis meets ours (bus ports: TLS port + 10000 on both sides).
    meet_tls(a_port, r_tls);
    meet_tls(r_port, b_tls);
    let connected = |p: u16| {
        let t = bulk_text(&Client::connect(p).cmd(&["CLUSTER", "NODES"]));
        t.lines().count() == 3 && t.lines().all(|l| l.contains(" connected"))
    };
    wait_until("three nodes connected everywhere", || {
        [a_port, b_port, r_port].into_iter().all(connected)
    });
    let add = |p: u16, from: u16, to: u16| {
        let r = Client::connect(p).cmd_s(&[
            "CLUSTER",
            "ADDSLOTSRANGE",
            &from.to_string(),
            &to.to_string(),
        ]);
        assert_eq!(r, "+OK\r\n", "ADDSLOTSRANGE on {p}");
    };
    add(a_port, 0, 5000);
    add(b_port, 5001, 10000);
    add(r_port, 10001, 16383);
    wait_until("cluster_state:ok everywhere", || {
        [a_port, b_port, r_port].into_iter().all(|p| {
            bulk_text(&Client::connect(p).cmd(&["CLUSTER", "INFO"])).contains("cluster_state:ok")
        })
    });
    // Every node, asked over TLS, comes to give the same slot map with the TLS ports (Redis
    // 7.0 reads our header's `port` as the TLS port, as we read its).
    let tls_ports = [a_tls, b_tls, r_tls];
    // (the printout's lines without node IDs, sorted; the endpoints' ports in order)
    let slots_over_tls = |t: u16| -> Result<(String, Vec<u16>), String> {
        let (ok, out) = cli_tls(t, &client.ca, Some(&client), &["CLUSTER", "SLOTS"]);
        if !ok {
            return Err(out);
        }
        let mut lines: Vec<&str> = out
            .lines()
            .filter(|l| !(l.len() == 40 && l.chars().all(|c| c.is_ascii_hexdigit())))
            .collect();
        lines.sort_unstable();
        Ok((lines.join("\n"), endpoint_ports(&out)))
    };
    wait_ok(
        "the same slot map with the TLS ports on ours and Redis 7.0",
        || {
            let slots = tls_ports
                .iter()
                .map(|&t| slots_over_tls(t))
                .collect::<Result<Vec<_>, _>>()?;
            let complete = tls_ports.iter().all(|t| slots[2].1.contains(t));
            if slots[0].0 == slots[2].0 && slots[1].0 == slots[2].0 && complete {
                Ok(())
            } else {
                Err(format!("ours {:?}, Redis 7.0 {:?}", &slots[..2], slots[2]))
            }
        },
    );
    // A plain client of Redis sees our plaintext ports (its pport), as of its own.
    let (_, plain_slots) = run_bounded(
        "redis-cli",
        &["-p", &r_port.to_string(), "CLUSTER", "SLOTS"],
        HANG,
    );
    let shown = endpoint_ports(&plain_slots);
    assert!(
        shown.contains(&a_port) && shown.contains(&b_port),
        "{plain_slots}"
    );
    // A key written through Redis's TLS port reads back from ours with -c redirects.
    let with_client = |args: &[&str]| {
        let mut a = client.cli_flags();
        a.extend(args.iter().map(|s| s.to_string()));
        let (ok, out) = run_bounded("redis-cli", &a, HANG);
        (ok, out.trim().to_string())
    };
    let (ok, out) = with_client(&["-c", "-p", &r_tls.to_string(), "SET", "foo", "bar"]);
    assert!(ok && out == "OK", "{out}");
    let (ok, out) = with_client(&["-c", "-p", &a_tls.to_string(), "GET", "foo"]);
    assert!(ok && out == "bar", "{out}");

    // Replication over TLS both ways (tls-replication yes): a Redis 7.0 replica of our a,
    // and our replica c of the Redis primary.
    let r2flags = redis_tls_flags(r2_tls, &ca.node("redis2"));
    let r2f: Vec<&str> = r2flags.iter().map(String::as_str).collect();
    let _redis2 = start_real_server("redis-server", r2_port, &dir.join("redis2"), &r2f);
    wait_for_port(r2_tls);
    start_tls_node(&mut procs, &dir, c_port, c_tls, &ca.node("c"));
    meet_tls(r2_port, a_tls);
    meet_tls(c_port, r_tls);
    let five = [a_port, b_port, r_port, r2_port, c_port];
    wait_until("five nodes known and connected everywhere", || {
        five.into_iter().all(|p| {
            let t = bulk_text(&Client::connect(p).cmd(&["CLUSTER", "NODES"]));
            t.lines().count() == 5 && t.lines().all(|l| l.contains(" connected"))
        })
    });
    let mut a = Client::connect(a_port);
    let mut red = Client::connect(r_port);
    let a_id = bulk_text(&a.cmd(&["CLUSTER", "MYID"])).trim().to_string();
    let r_id = bulk_text(&red.cmd(&["CLUSTER", "MYID"])).trim().to_string();
    assert_eq!(
        Client::connect(r2_port).cmd_s(&["CLUSTER", "REPLICATE", &a_id]),
        "+OK\r\n"
    );
    assert_eq!(
        Client::connect(c_port).cmd_s(&["CLUSTER", "REPLICATE", &r_id]),
        "+OK\r\n"
    );
    wait_until("both replicas linked over TLS", || {
        info(r2_port, "replication").contains("master_link_status:up")
            && info(c_port, "replication").contains("master_link_status:up")
    });
    let r2i = info(r2_port, "replication");
    assert!(r2i.contains(&format!("master_port:{a_tls}\r\n")), "{r2i}");
    let ci = info(c_port, "replication");
    assert!(ci.contains(&format!("master_port:{r_tls}\r\n")), "{ci}");
    // Writes flow: `foo` lives on Redis (slot 12182, in 10001-16383), `key_a` on a.
    let key_a = (0..1000)
        .map(|i| format!("ka{i}"))
        .find(|k| {
            let r = a.cmd_s(&["CLUSTER", "KEYSLOT", k]);
            r.trim_start_matches(':').trim().parse::<u32>().unwrap() <= 5000
        })
        .unwrap();
    assert_eq!(a.cmd_s(&["SET", &key_a, "from-ours"]), "+OK\r\n");
    assert_eq!(red.cmd_s(&["SET", "foo", "from-redis"]), "+OK\r\n");
    wait_until("the writes replicated", || {
        let mut r2r = Client::connect(r2_port);
        r2r.cmd(&["READONLY"]);
        let mut cr = Client::connect(c_port);
        cr.cmd(&["READONLY"]);
        bulk_text(&r2r.cmd(&["GET", &key_a])) == "from-ours"
            && bulk_text(&cr.cmd(&["GET", "foo"])) == "from-redis"
    });
}

/// `CONFIG SET tls-replication yes` on a server started without TLS is refused (a replica link
/// would speak plain TCP to its primary's TLS port; Valkey `applyTlsCfg` refuses what cannot
/// load), and nothing changes.
#[test]
fn tls_replication_needs_tls_configured() {
    let dir = test_dir("tls-replication-off");
    let port = ports::port();
    let mut procs = Procs::default();
    procs.start(&dir, port, &["--cluster-enabled", "no"]);
    let mut c = Client::connect(port);
    let r = c.cmd_s(&["CONFIG", "SET", "tls-replication", "yes"]);
    assert!(r.contains("TLS is not configured"), "{r}");
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "tls-replication"]),
        b"*2\r\n$15\r\ntls-replication\r\n$2\r\nno\r\n"
    );
}

/// With `tls-cluster yes`, MIGRATE talks TLS to the target (Valkey `connTypeOfCluster`), so
/// `redis-cli --cluster reshard` works on a TLS cluster: a key moves to another TLS node's TLS
/// port; a MIGRATE to a plain port fails with Valkey's IOERR and the key stays. Two one-node
/// clusters (each owning every slot, so the target takes the RESTORE).
#[test]
fn migrate_talks_tls_with_tls_cluster() {
    let [a_port, b_port, a_tls, b_tls] = ports::ports(4)[..] else {
        unreachable!()
    };
    let dir = test_dir("tls-migrate");
    let ca = TestCa::new(&dir.join("ca"), "migrate");
    let mut procs = Procs::default();
    start_tls_node(&mut procs, &dir, a_port, a_tls, &ca.node("a"));
    start_tls_node(&mut procs, &dir, b_port, b_tls, &ca.node("b"));
    for port in [a_port, b_port] {
        common::own_every_slot(port);
    }
    let mut a = Client::connect(a_port);
    let big = "v".repeat(200_000);
    assert_eq!(a.cmd_s(&["SET", "k", &big]), "+OK\r\n");
    let hang_ms = HANG.as_millis().to_string();
    let t = b_tls.to_string();
    assert_eq!(
        a.cmd_s(&["MIGRATE", "127.0.0.1", &t, "k", "0", &hang_ms]),
        "+OK\r\n"
    );
    assert_eq!(a.cmd_s(&["EXISTS", "k"]), ":0\r\n");
    assert_eq!(
        bulk_text(&Client::connect(b_port).cmd(&["GET", "k"])),
        big,
        "the key arrived whole (more than one TLS record)"
    );
    // The plain port of b speaks no TLS: the handshake fails, the key stays on a.
    assert_eq!(a.cmd_s(&["SET", "k2", "v"]), "+OK\r\n");
    let p = b_port.to_string();
    let r = a.cmd_s(&["MIGRATE", "127.0.0.1", &p, "k2", "0", "2000"]);
    assert!(r.starts_with("-IOERR"), "{r}");
    assert_eq!(a.cmd_s(&["EXISTS", "k2"]), ":1\r\n");
}

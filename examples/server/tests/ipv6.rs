//! IPv6 and `bind` lists (ports from `common::ports`, bus ports +10000; issue 16 item 7): every bind
//! form redis-server 7.0 and valkey-server 9.1 accept (`::1`, `127.0.0.1 -::1`, `*`, `::*`,
//! `* -::*`, host names, optional addresses that are not available), for the data port and the
//! bus port; the forms they refuse (`[::1]`, a required address that is not available) stop the
//! start; and a 3+3 cluster on `::1` formed by `redis-cli --cluster create`, with MOVED texts
//! as Redis prints them (`MOVED 3999 ::1:7002`, no brackets) and a kill -9 failover after which
//! `redis-cli -c` still reads every key. The cluster runs with the long node timeout
//! (`common::NODE_TIMEOUT_MS`: no failover unasked), set short on every node just before the
//! kill.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{
    bulk_text, ports, run_bounded, test_dir, wait_until, Client, Procs, DETECT_TIMEOUT_MS, HANG,
    NODE_TIMEOUT_MS,
};
use ferrocluster_testkit::BUS_OFFSET;
use std::net::TcpStream;

fn listens(host: &str, port: u16) -> bool {
    TcpStream::connect((host, port)).is_ok()
}

/// Runs the server with `extra` until it exits (it must fail to start): (code, stderr).
fn start_fails(port: u16, extra: &[&str]) -> (Option<i32>, String) {
    common::run_to_exit(&test_dir(&format!("bind-fail-{port}")), port, extra)
}

#[test]
fn every_bind_form_redis_accepts_works_for_the_data_and_the_bus_port() {
    let mut procs = Procs::default();
    let base = test_dir("bind-forms");
    // (flags, addresses that listen, addresses that must not)
    let cases: &[(&[&str], &[&str], &[&str])] = &[
        (&["--bind", "::1"], &["::1"], &["127.0.0.1"]),
        (&["--bind", "127.0.0.1", "-::1"], &["127.0.0.1", "::1"], &[]),
        (&["--bind", "127.0.0.1", "::1"], &["127.0.0.1", "::1"], &[]),
        (&["--bind", "*"], &["127.0.0.1"], &["::1"]),
        (&["--bind", "::*"], &["::1"], &["127.0.0.1"]),
        (&["--bind", "*", "-::*"], &["127.0.0.1", "::1"], &[]),
        (&["--bind", "-10.9.9.9", "127.0.0.1"], &["127.0.0.1"], &[]),
        (&["--bind", "localhost"], &["127.0.0.1"], &[]),
    ];
    let case_ports = ports::ports(cases.len());
    for ((flags, yes, no), &port) in cases.iter().zip(&case_ports) {
        procs.start(&base, port, flags);
        for host in *yes {
            assert!(listens(host, port), "{flags:?}: data port on {host}");
            assert!(
                listens(host, port + BUS_OFFSET),
                "{flags:?}: bus port on {host}"
            );
        }
        for host in *no {
            assert!(!listens(host, port), "{flags:?}: data port on {host}");
            assert!(
                !listens(host, port + BUS_OFFSET),
                "{flags:?}: bus port on {host}"
            );
        }
        let shown = Client::connect_to(yes[0], port).cmd_s(&["CONFIG", "GET", "bind"]);
        let want: Vec<&str> = flags[1..].to_vec();
        assert!(
            shown.ends_with(&format!("{}\r\n", want.join(" "))),
            "{shown}"
        );
        procs.kill(port);
    }
    // What the real servers refuse.
    let refused = ports::port();
    let (code, err) = start_fails(refused, &["--bind", "[::1]"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("Could not create server TCP listening socket [::1]:"),
        "{err}"
    );
    assert!(err.contains("Name or service not known"), "{err}");
    let (code, err) = start_fails(refused, &["--bind", "10.9.9.9", "127.0.0.1"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("10.9.9.9:"), "{err}");
    let (code, err) = start_fails(refused, &["--bind", "-10.9.9.9"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("Configured to not listen anywhere"), "{err}");
}

/// The node owning `slot` in a CLUSTER NODES text: (port, id).
fn owner(nodes: &str, slot: u16) -> (u16, String) {
    find_owner(nodes, slot).unwrap_or_else(|| panic!("no owner of slot {slot} in\n{nodes}"))
}

/// The primary (not failing) owning `slot` in a CLUSTER NODES text.
fn find_owner(nodes: &str, slot: u16) -> Option<(u16, String)> {
    for line in nodes.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        if !f[2].contains("master") || f[2].contains("fail") {
            continue;
        }
        for range in &f[8..] {
            let (a, b) = range.split_once('-').unwrap_or((range, range));
            let (Ok(a), Ok(b)) = (a.parse::<u16>(), b.parse::<u16>()) else {
                continue;
            };
            if (a..=b).contains(&slot) {
                let addr = f[1].split('@').next().unwrap();
                let port = addr.rsplit_once(':').unwrap().1.parse().unwrap();
                return Some((port, f[0].to_string()));
            }
        }
    }
    None
}

#[test]
fn a_3_plus_3_cluster_on_ipv6_forms_redirects_and_fails_over() {
    common::require_redis_tools();
    let mut procs = Procs::default();
    let dir = test_dir("ipv6-cluster");
    let base = ports::block(6);
    let ports: Vec<u16> = (base..base + 6).collect();
    let timeout = NODE_TIMEOUT_MS.to_string();
    for &p in &ports {
        procs.start(
            &dir,
            p,
            &["--bind", "::1", "--cluster-node-timeout", &timeout],
        );
    }
    let mut args: Vec<String> = vec!["--cluster".into(), "create".into()];
    args.extend(ports.iter().map(|p| format!("::1:{p}")));
    args.extend(["--cluster-replicas", "1", "--cluster-yes"].map(String::from));
    let (ok, out) = run_bounded("redis-cli", &args, HANG);
    assert!(ok, "redis-cli --cluster create on ::1:\n{out}");
    let all_ok = |ports: &[u16]| {
        ports.iter().all(|&p| {
            let mut c = Client::connect_to("::1", p);
            bulk_text(&c.cmd(&["CLUSTER", "INFO"])).contains("cluster_state:ok") && {
                let r = bulk_text(&c.cmd(&["INFO", "replication"]));
                r.contains("role:master") || r.contains("master_link_status:up")
            }
        })
    };
    wait_until("cluster ok on ::1", || all_ok(&ports));
    let nodes = bulk_text(&Client::connect_to("::1", ports[0]).cmd(&["CLUSTER", "NODES"]));
    for p in &ports {
        assert!(
            nodes.contains(&format!(" ::1:{p}@{} ", p + BUS_OFFSET)),
            "{nodes}"
        );
    }
    // Keys through redis-cli -c, then a MOVED as Redis prints it for IPv6.
    let keys: Vec<String> = (0..30).map(|i| format!("key:{i}")).collect();
    for k in &keys {
        let args: Vec<String> = ["-c", "-h", "::1", "-p", &ports[0].to_string(), "SET", k, k]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let (ok, out) = run_bounded("redis-cli", &args, HANG);
        assert!(ok && out.trim() == "OK", "SET {k}: {out}");
    }
    let key = &keys[0];
    let slot = ferrocluster_slot::key_hash_slot(key.as_bytes()).get();
    let (owner_port, owner_id) = owner(&nodes, slot);
    let other = *ports.iter().find(|&&p| p != owner_port).unwrap();
    let mut c = Client::connect_to("::1", other);
    let reply = c.cmd_s(&["GET", key]);
    if owner_port != other {
        assert_eq!(reply, format!("-MOVED {slot} ::1:{owner_port}\r\n"));
    }
    // Every write reached the replicas before the kill.
    for &p in &ports {
        let mut c = Client::connect_to("::1", p);
        if bulk_text(&c.cmd(&["INFO", "replication"])).contains("role:master") {
            assert_eq!(c.cmd_s(&["WAIT", "1", "60000"]), ":1\r\n", "replica of {p}");
        }
    }
    // kill -9 the owner of the key's slot: its replica takes over. Every node detects the
    // failure with the short node timeout from just before the kill.
    let detect = DETECT_TIMEOUT_MS.to_string();
    for &p in &ports {
        assert_eq!(
            Client::connect_to("::1", p).cmd_s(&["CONFIG", "SET", "cluster-node-timeout", &detect]),
            "+OK\r\n",
            "{p}"
        );
    }
    procs.kill(owner_port);
    let alive: Vec<u16> = ports.iter().copied().filter(|&p| p != owner_port).collect();
    wait_until("replica promoted, cluster ok", || {
        alive.iter().all(|&p| {
            let mut c = Client::connect_to("::1", p);
            let nodes = bulk_text(&c.cmd(&["CLUSTER", "NODES"]));
            find_owner(&nodes, slot).is_some_and(|(_, id)| id != owner_id)
                && bulk_text(&c.cmd(&["CLUSTER", "INFO"])).contains("cluster_state:ok")
        })
    });
    let nodes = bulk_text(&Client::connect_to("::1", alive[0]).cmd(&["CLUSTER", "NODES"]));
    let (new_port, new_id) = owner(&nodes, slot);
    assert_ne!(new_id, owner_id, "{nodes}");
    assert_ne!(new_port, owner_port);
    for k in &keys {
        let args: Vec<String> = ["-c", "-h", "::1", "-p", &alive[0].to_string(), "GET", k]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let (ok, out) = run_bounded("redis-cli", &args, HANG);
        assert!(
            ok && out.trim() == k.as_str(),
            "GET {k} after the failover: {out}"
        );
    }
}

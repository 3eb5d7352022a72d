//! Issue 11 on the data port: `INFO readiness` and `FERROCLUSTER CKQUORUM` over RESP.
//!
//! Ports from the one allocator (`common::ports`, bus ports +10000 kept free too). The expected values follow the `ferrocluster-health`
//! crate's rules (its crate docs: "Quorum check", "`INFO readiness` fields"): a voting
//! primary owns at least one slot, the quorum is `voting / 2 + 1`, a replica is eligible by
//! proxy once it advertises a replication offset > 0, `OK` needs every slot-owning shard
//! ready, and `NOQUORUM` comes when fewer than the quorum of voting primaries are reachable.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{
    bulk_text, ports, require_redis_tools, six_node_cluster, test_dir, wait_until, Client, Procs,
};
use ferrocluster_node::health::INFO_FIELDS;
use std::collections::HashMap;

/// `name -> value` of an INFO text.
fn fields(info: &str) -> HashMap<String, String> {
    info.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn readiness(port: u16) -> HashMap<String, String> {
    fields(&bulk_text(
        &Client::connect(port).cmd(&["INFO", "readiness"]),
    ))
}

fn ckquorum(port: u16) -> String {
    Client::connect(port).cmd_s(&["FERROCLUSTER", "CKQUORUM"])
}

/// Whether `port` is a primary (INFO replication `role:master`).
fn is_primary(port: u16) -> bool {
    bulk_text(&Client::connect(port).cmd(&["INFO", "replication"])).contains("role:master")
}

/// Writes one key into every primary's slots (a replica advertises an offset > 0 only after
/// a write reached it, as in Valkey where offset 0 means "not yet synced").
fn write_to_every_shard(primaries: &[u16]) {
    for &p in primaries {
        let mut c = Client::connect(p);
        let mut written = false;
        for i in 0..1000 {
            let key = format!("readiness:{i}");
            if c.cmd_s(&["SET", &key, "v"]) == "+OK\r\n" {
                written = true;
                break;
            }
        }
        assert!(written, "no key of the first 1000 hashes to a slot of {p}");
    }
}

#[test]
fn info_readiness_and_ckquorum_follow_the_cluster() {
    require_redis_tools();
    let mut procs = Procs::default();
    let dir = test_dir("readiness");
    let ports = six_node_cluster(&mut procs, &dir, ports::block(6));
    let primaries: Vec<u16> = ports.iter().copied().filter(|&p| is_primary(p)).collect();
    assert_eq!(
        primaries.len(),
        3,
        "redis-cli --cluster create made 3 primaries"
    );

    // The section is optional: in INFO all / everything, not in the default INFO.
    let mut c = Client::connect(ports[0]);
    assert!(!bulk_text(&c.cmd(&["INFO"])).contains("# Readiness"));
    assert!(bulk_text(&c.cmd(&["INFO", "default"])).contains("# Server"));
    assert!(!bulk_text(&c.cmd(&["INFO", "default"])).contains("# Readiness"));
    for all in ["all", "everything"] {
        let text = bulk_text(&c.cmd(&["INFO", all]));
        assert!(
            text.contains("# Readiness\r\ncluster_state:ok\r\n"),
            "{text}"
        );
    }
    let only = bulk_text(&c.cmd(&["INFO", "readiness"]));
    assert!(only.starts_with("# Readiness\r\n"), "{only}");
    assert!(!only.contains("# Server"), "{only}");

    // Every fixed field, in the documented order, one line each.
    let names: Vec<&str> = only
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':').map(|(k, _)| k))
        .collect();
    assert_eq!(&names[..INFO_FIELDS.len()], &INFO_FIELDS[..], "{only}");

    // The command sits in our table and in COMMAND output; HELP lists CKQUORUM.
    let info = c.cmd_s(&["COMMAND", "INFO", "ferrocluster"]);
    assert!(
        info.starts_with("*1\r\n*10\r\n$12\r\nferrocluster\r\n:-2\r\n"),
        "{info}"
    );
    assert!(c
        .cmd_s(&["COMMAND", "LIST"])
        .contains("\r\nferrocluster\r\n"));
    let help = c.cmd_s(&["FERROCLUSTER", "HELP"]);
    assert!(
        help.starts_with("*") && help.contains("+CKQUORUM\r\n"),
        "{help}"
    );
    assert!(c
        .cmd_s(&["FERROCLUSTER", "NOSUCH"])
        .starts_with("-ERR unknown subcommand 'NOSUCH'. Try FERROCLUSTER HELP."));
    assert!(c
        .cmd_s(&["FERROCLUSTER", "CKQUORUM", "extra"])
        .starts_with("-ERR wrong number of arguments for 'ferrocluster|ckquorum' command"));

    // Healthy cluster: once a write reached every replica, every node sees every shard ready.
    write_to_every_shard(&primaries);
    wait_until("failover_ready:yes on every node", || {
        ports
            .iter()
            .all(|&p| readiness(p).get("failover_ready").map(String::as_str) == Some("yes"))
    });
    for &p in &ports {
        let f = readiness(p);
        let get = |k: &str| f.get(k).map(String::as_str).unwrap_or("<missing>");
        assert_eq!(get("cluster_state"), "ok", "{p}: {f:?}");
        assert_eq!(get("cluster_health"), "ok", "{p}: {f:?}");
        assert_eq!(get("failover_shards"), "3", "{p}: {f:?}");
        assert_eq!(get("failover_ready_shards"), "3", "{p}: {f:?}");
        assert_eq!(get("failover_blocker"), "none", "{p}: {f:?}");
        assert_eq!(get("quorum_verdict"), "ok", "{p}: {f:?}");
        assert_eq!(get("quorum_voting_primaries"), "3", "{p}: {f:?}");
        assert_eq!(get("quorum_reachable_primaries"), "3", "{p}: {f:?}");
        assert_eq!(get("quorum_needed"), "2", "{p}: {f:?}");
        assert_eq!(get("quorum_fail_agreeable"), "yes", "{p}: {f:?}");
        assert_eq!(get("quorum_shards_unable"), "0", "{p}: {f:?}");
        for k in [
            "slots_unserved",
            "slots_pfail",
            "slots_fail",
            "nodes_pfail",
            "nodes_fail",
        ] {
            assert_eq!(get(k), "0", "{p} {k}: {f:?}");
        }
        // Three shards with one eligible replica each; their slots add up to 16384.
        let mut slots = 0;
        for i in 0..3 {
            let s = get(&format!("shard{i}"));
            assert!(
                s.contains(",replicas=1,eligible=1,ready=yes,reason=none,"),
                "{p}: {s}"
            );
            slots += s
                .split(',')
                .find_map(|kv| kv.strip_prefix("slots="))
                .and_then(|n| n.parse::<u32>().ok())
                .unwrap_or_else(|| panic!("no slots= in {s}"));
            let r = get(&format!("shard{i}_replica0"));
            assert!(r.contains(",eligible=yes,reason=none,"), "{p}: {r}");
            assert!(!r.contains("offset=0,"), "{p}: {r}");
        }
        assert_eq!(slots, 16384, "{p}: {f:?}");
        assert!(!f.contains_key("shard3"), "{p}: {f:?}");
        let ck = ckquorum(p);
        assert!(
            ck.starts_with("+OK 3 usable voting primaries of 3, quorum 2: "),
            "{p}: {ck}"
        );
    }
    let summary = bulk_text(&c.cmd(&["FERROCLUSTER", "SUMMARY"]));
    assert_eq!(summary, "cluster ok, failover-ready: yes");

    // Kill two of the three primaries: the survivor alone is 1 of 3, below the quorum of 2,
    // so no FAIL can be agreed and no failover authorized.
    let survivor = primaries[2];
    procs.kill(primaries[0]);
    procs.kill(primaries[1]);
    wait_until("-NOQUORUM from the surviving primary", || {
        ckquorum(survivor).starts_with("-NOQUORUM ")
    });
    let ck = ckquorum(survivor);
    assert!(
        ck.starts_with("-NOQUORUM 1 usable voting primaries of 3, quorum 2: "),
        "{ck}"
    );
    let f = readiness(survivor);
    let get = |k: &str| f.get(k).map(String::as_str).unwrap_or("<missing>");
    assert_eq!(get("quorum_verdict"), "noquorum", "{f:?}");
    assert_eq!(get("quorum_reachable_primaries"), "1", "{f:?}");
    assert_eq!(get("quorum_fail_agreeable"), "no", "{f:?}");
    assert_eq!(get("failover_ready"), "no", "{f:?}");
    assert_eq!(
        get("cluster_health"),
        if get("cluster_state") == "ok" {
            "degraded"
        } else {
            "fail"
        },
        "{f:?}"
    );
    let down: u32 = ["nodes_pfail", "nodes_fail"]
        .iter()
        .map(|k| get(k).parse::<u32>().unwrap_or(0))
        .sum();
    assert!(down >= 2, "{f:?}");
    // Every slot-owning shard is named in a NOQUORUM answer.
    assert_eq!(get("quorum_shards_unable"), "3", "{f:?}");
}

#[test]
fn standalone_mode_has_an_empty_section_and_refuses_ckquorum() {
    let mut procs = Procs::default();
    let dir = test_dir("readiness-standalone");
    let port = ports::port();
    procs.start(&dir, port, &["--cluster-enabled", "no"]);
    let mut c = Client::connect(port);
    assert_eq!(bulk_text(&c.cmd(&["INFO", "readiness"])), "# Readiness\r\n");
    assert_eq!(
        c.cmd_s(&["FERROCLUSTER", "CKQUORUM"]),
        "-ERR This instance has cluster support disabled\r\n"
    );
}

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
    bulk_text, detect_failures_fast, ports, require_redis_tools, six_node_cluster, test_dir,
    wait_ok, wait_until, Client, Procs,
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

/// Every `INFO readiness` field of `port` (one read) and its CKQUORUM answer as in a healthy
/// cluster of 3 primaries with one synced replica each; `Err` names what differs.
fn healthy(p: u16) -> Result<(), String> {
    let f = readiness(p);
    let get = |k: &str| f.get(k).map(String::as_str).unwrap_or("<missing>");
    let mut want: Vec<(&str, &str)> = vec![
        ("failover_ready", "yes"),
        ("cluster_state", "ok"),
        ("cluster_health", "ok"),
        ("failover_shards", "3"),
        ("failover_ready_shards", "3"),
        ("failover_blocker", "none"),
        ("quorum_verdict", "ok"),
        ("quorum_voting_primaries", "3"),
        ("quorum_reachable_primaries", "3"),
        ("quorum_needed", "2"),
        ("quorum_fail_agreeable", "yes"),
        ("quorum_shards_unable", "0"),
    ];
    for k in [
        "slots_unserved",
        "slots_pfail",
        "slots_fail",
        "nodes_pfail",
        "nodes_fail",
    ] {
        want.push((k, "0"));
    }
    for (k, v) in want {
        if get(k) != v {
            return Err(format!("{p} {k}: {} (want {v}): {f:?}", get(k)));
        }
    }
    // Three shards with one eligible replica each; their slots add up to 16384.
    let mut slots = 0;
    for i in 0..3 {
        let s = get(&format!("shard{i}"));
        if !s.contains(",replicas=1,eligible=1,ready=yes,reason=none,") {
            return Err(format!("{p}: {s}"));
        }
        slots += s
            .split(',')
            .find_map(|kv| kv.strip_prefix("slots="))
            .and_then(|n| n.parse::<u32>().ok())
            .ok_or_else(|| format!("no slots= in {s}"))?;
        let r = get(&format!("shard{i}_replica0"));
        if !r.contains(",eligible=yes,reason=none,") || r.contains("offset=0,") {
            return Err(format!("{p}: {r}"));
        }
    }
    if slots != 16384 || f.contains_key("shard3") {
        return Err(format!("{p}: {slots} slots: {f:?}"));
    }
    let ck = ckquorum(p);
    if !ck.starts_with("+OK 3 usable voting primaries of 3, quorum 2: ") {
        return Err(format!("{p}: {ck}"));
    }
    Ok(())
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
    // Every field is checked inside the wait, on one read per node (`healthy`): a node that
    // has not seen a replica's offset yet shows it not ready, which is no failure.
    write_to_every_shard(&primaries);
    wait_ok(
        "every node to see a healthy, failover-ready cluster",
        || ports.iter().try_for_each(|&p| healthy(p)),
    );
    let summary = bulk_text(&c.cmd(&["FERROCLUSTER", "SUMMARY"]));
    assert_eq!(summary, "cluster ok, failover-ready: yes");

    // Kill two of the three primaries: the survivor alone is 1 of 3, below the quorum of 2,
    // so no FAIL can be agreed and no failover authorized. The survivor must see the two
    // unreachable: every node detects failures with the short node timeout from now on.
    let survivor = primaries[2];
    detect_failures_fast(&ports);
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

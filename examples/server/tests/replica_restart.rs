//! A replica restarted from its nodes.conf replicates again (issue 37). Before the fix, a
//! replica killed with `kill -9` and started on the same directory loaded `myself,slave
//! <primary>` but never asked its primary for a sync: `role:master`, no link, no data, and
//! its shard could not fail over any more. Valkey's `clusterCron` re-points a replica whose
//! replication is off (`replicationSetPrimary`); our engine's cron does the same, so every
//! host gets it. Redis 7.0 in the same steps: `role:slave`, its data back, link up.
//!
//! Two shapes: a 3+3 cluster of ours (the restarted replica syncs again, then its primary is
//! killed and it takes over with every key), and ours as the replica of a valkey-server 9.1
//! primary. Ports from `common::ports` (bus ports +10000).
#![allow(clippy::disallowed_methods)]

mod common;

use common::{
    bulk_text, detect_failures_fast, ports, require_redis_tools, six_node_cluster,
    start_real_server, test_dir, wait_until, Client, Procs, NODE_TIMEOUT_MS,
};

fn info(port: u16, section: &str) -> String {
    bulk_text(&Client::connect(port).cmd(&["INFO", section]))
}

/// The replica on `port` replicates from `primary_port` with its link up and holds `keys`
/// keys (read with READONLY once its own view is ok).
fn wait_replicating(port: u16, primary_port: u16, keys: usize) {
    let want = format!(":{keys}\r\n");
    wait_until(
        &format!("{port} a synced replica of {primary_port} holding {keys} keys"),
        || {
            let repl = info(port, "replication");
            let ok = bulk_text(&Client::connect(port).cmd(&["CLUSTER", "INFO"]))
                .contains("cluster_state:ok");
            repl.contains("role:slave")
                && repl.contains(&format!("master_port:{primary_port}\r\n"))
                && repl.contains("master_link_status:up")
                && ok
                && Client::connect(port).cmd_s(&["DBSIZE"]) == want
        },
    );
}

/// Writes `n` keys `{tag}:i` through `port` (the tag's slot is `port`'s).
fn write_keys(port: u16, tag: &str, n: usize) {
    let mut c = Client::connect(port);
    for i in 0..n {
        let k = format!("{{{tag}}}:{i}");
        assert_eq!(c.cmd_s(&["SET", &k, &i.to_string()]), "+OK\r\n", "{k}");
    }
}

/// A hash tag whose slot the primary on `port` owns: the first `t<i>` whose probe key
/// `{t<i>}probe` it takes (+OK; a node that does not own the slot answers -MOVED). The probe
/// key stays written.
fn tag_owned_by(port: u16) -> String {
    let mut c = Client::connect(port);
    (0..10_000)
        .map(|i| format!("t{i}"))
        .find(|t| c.cmd_s(&["SET", &format!("{{{t}}}probe"), "1"]) == "+OK\r\n")
        .expect("a tag of one of its slots")
}

#[test]
fn a_replica_restarted_from_nodes_conf_syncs_again_and_takes_over_with_every_key() {
    require_redis_tools();
    let dir = test_dir("replica-restart");
    let mut procs = Procs::default();
    let ports = six_node_cluster(&mut procs, &dir, ports::block(6));
    // A replica and its primary.
    let (replica, primary) = ports
        .iter()
        .find_map(|&p| {
            let repl = info(p, "replication");
            let primary = repl
                .lines()
                .find_map(|l| l.trim().strip_prefix("master_port:"))
                .map(|v| v.parse::<u16>().expect("a port"))?;
            Some((p, primary))
        })
        .expect("a replica in a 3+3 cluster");
    let tag = tag_owned_by(primary);
    // `tag_owned_by` wrote one probe key of the tag; 100 more.
    write_keys(primary, &tag, 100);
    let keys = 101;
    wait_replicating(replica, primary, keys);

    // kill -9 and a start on the same directory (its nodes.conf says `myself,slave`).
    procs.kill(replica);
    let mut p = Client::connect(primary);
    assert_eq!(
        p.cmd_s(&["SET", &format!("{{{tag}}}:while-down"), "x"]),
        "+OK\r\n"
    );
    let timeout = NODE_TIMEOUT_MS.to_string();
    procs.start(
        &dir,
        replica,
        &["--cluster-node-timeout", &timeout, "--loglevel", "verbose"],
    );
    wait_replicating(replica, primary, keys + 1);

    // Its primary dies: the restarted replica takes over, with every key. Every node detects
    // the failure with the short node timeout from now on.
    detect_failures_fast(&ports);
    procs.kill(primary);
    wait_until(&format!("{replica} promoted"), || {
        info(replica, "replication").contains("role:master")
            && bulk_text(&Client::connect(replica).cmd(&["CLUSTER", "INFO"]))
                .contains("cluster_state:ok")
    });
    let mut r = Client::connect(replica);
    assert_eq!(r.cmd_s(&["DBSIZE"]), format!(":{}\r\n", keys + 1));
    assert_eq!(
        r.cmd_s(&["GET", &format!("{{{tag}}}:while-down")]),
        "$1\r\nx\r\n"
    );
    assert_eq!(r.cmd_s(&["GET", &format!("{{{tag}}}:99")]), "$2\r\n99\r\n");
}

#[test]
fn our_replica_of_a_valkey_primary_restarted_from_nodes_conf_syncs_again() {
    let dir = test_dir("replica-restart-valkey");
    let [vport, ours] = ports::ports(2)[..] else {
        unreachable!()
    };
    let _valkey = start_real_server(
        "valkey-server",
        vport,
        &dir.join("valkey"),
        &["--cluster-enabled", "yes", "--cluster-node-timeout", "3000"],
    );
    let mut v = Client::connect(vport);
    assert_eq!(
        v.cmd_s(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]),
        "+OK\r\n"
    );
    wait_until("valkey's cluster_state:ok", || {
        bulk_text(&Client::connect(vport).cmd(&["CLUSTER", "INFO"])).contains("cluster_state:ok")
    });
    write_keys(vport, "v", 50);
    let mut procs = Procs::default();
    let flags = ["--cluster-node-timeout", "3000"];
    procs.start(&dir, ours, &flags);
    let mut o = Client::connect(ours);
    assert_eq!(
        o.cmd_s(&["CLUSTER", "MEET", "127.0.0.1", &vport.to_string()]),
        "+OK\r\n"
    );
    let vid = bulk_text(&v.cmd(&["CLUSTER", "MYID"]));
    wait_until("ours knows the valkey node", || {
        bulk_text(&Client::connect(ours).cmd(&["CLUSTER", "NODES"])).contains(&vid)
    });
    assert_eq!(o.cmd_s(&["CLUSTER", "REPLICATE", &vid]), "+OK\r\n");
    wait_replicating(ours, vport, 50);

    procs.kill(ours);
    assert_eq!(v.cmd_s(&["SET", "{v}:while-down", "x"]), "+OK\r\n");
    procs.start(&dir, ours, &flags);
    wait_replicating(ours, vport, 51);
    let mut r = Client::connect(ours);
    assert_eq!(r.cmd_s(&["READONLY"]), "+OK\r\n");
    assert_eq!(r.cmd_s(&["GET", "{v}:while-down"]), "$1\r\nx\r\n");
    // Valkey sees ours as its connected replica again.
    wait_until("valkey lists ours as a connected replica", || {
        info(vport, "replication").contains(&format!("port={ours},state=online"))
    });
}

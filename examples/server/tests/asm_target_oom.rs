//! A slot import that runs the target out of memory fails cleanly (issue 19 with the ASM of
//! issue 18): with `maxmemory` on the target and `noeviction`, the imported writes meet
//! `-OOM`, the job fails with Valkey's reason `Ran out of memory (OOM) during slot import`
//! on the target, which closes the link; the source's export fails with `Connection lost to
//! target...` (sheet A.16; it stayed in progress before: the last data connection's close was
//! never reported to the node), the source keeps the slot and every key, the target shows
//! none of them. Ports from `common::ports` (bus ports +10000 free too).

#![allow(clippy::disallowed_methods)] // the test waits on the clock

mod common;

use common::{
    bulk_text, ports, run_bounded, test_dir, wait_cluster_ok, wait_until, Client, Procs, HANG,
    NODE_TIMEOUT_MS,
};

fn node_id(port: u16) -> String {
    bulk_text(&Client::connect(port).cmd(&["CLUSTER", "MYID"]))
}

#[test]
fn an_import_out_of_memory_fails_and_the_source_keeps_everything() {
    common::require_redis_tools();
    let dir = test_dir("asm-target-oom");
    let mut procs = Procs::default();
    let [a, b, c] = ports::ports(3)[..] else {
        unreachable!()
    };
    let ports = [a, b, c];
    // The long node timeout: no replicas, so a node a loaded machine stalls must never be
    // taken for failed (a FAIL would put the cluster down).
    let timeout = NODE_TIMEOUT_MS.to_string();
    for p in ports {
        procs.start(&dir, p, &["--cluster-node-timeout", &timeout]);
    }
    let mut args: Vec<String> = vec!["--cluster".into(), "create".into()];
    args.extend(ports.iter().map(|p| format!("127.0.0.1:{p}")));
    args.push("--cluster-yes".into());
    let (ok, out) = run_bounded("redis-cli", &args, HANG);
    assert!(ok, "{out}");
    wait_cluster_ok(&ports);
    // --cluster create gives the first node slots 0-5460; 3000 keys of 1 KB in slot 100's
    // hash tag.
    let mut src = Client::connect(a);
    let tag = "{48063}"; // CLUSTER KEYSLOT {48063} = 100
    assert_eq!(src.cmd_s(&["CLUSTER", "KEYSLOT", tag]), ":100\r\n");
    let value = "v".repeat(1000);
    for i in 0..3000 {
        assert_eq!(
            src.cmd_s(&["SET", &format!("{tag}:{i}"), &value]),
            "+OK\r\n"
        );
    }
    let mut dst = Client::connect(b);
    let used = bulk_text(&dst.cmd(&["INFO", "memory"]))
        .lines()
        .find_map(|l| l.strip_prefix("used_memory_dataset:").map(str::to_string))
        .unwrap();
    let limit = (used.trim().parse::<u64>().unwrap() + 200_000).to_string();
    assert_eq!(
        dst.cmd_s(&["CONFIG", "SET", "maxmemory", &limit]),
        "+OK\r\n"
    );
    let target = node_id(b);
    let r = src.cmd_s(&[
        "CLUSTER",
        "MIGRATESLOTS",
        "SLOTSRANGE",
        "100",
        "100",
        "NODE",
        &target,
    ]);
    assert_eq!(r, "+OK\r\n");
    wait_until("the import fails with OOM", || {
        String::from_utf8_lossy(&dst.cmd(&["CLUSTER", "GETSLOTMIGRATIONS"]))
            .contains("Ran out of memory (OOM) during slot import")
    });
    wait_until("the source's export fails", || {
        String::from_utf8_lossy(&src.cmd(&["CLUSTER", "GETSLOTMIGRATIONS"]))
            .contains("Connection lost to target. Check CLUSTER GETSLOTMIGRATIONS on the target node for more information.")
    });
    wait_cluster_ok(&ports);
    // The slot and its keys stay with the source; the target holds none of them.
    assert_eq!(
        src.cmd_s(&["CLUSTER", "COUNTKEYSINSLOT", "100"]),
        ":3000\r\n"
    );
    assert!(src
        .cmd_s(&["GET", &format!("{tag}:2999")])
        .starts_with("$1000\r\n"));
    wait_until("the target's staged keys are dropped", || {
        dst.cmd_s(&["CLUSTER", "COUNTKEYSINSLOT", "100"]) == ":0\r\n"
    });
    assert!(dst
        .cmd_s(&["GET", &format!("{tag}:1")])
        .starts_with("-MOVED 100 "));
}

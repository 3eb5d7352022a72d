//! Issue 9: one cluster of real `redis-server` 7.0 nodes and `ferrocluster-server` nodes on
//! the same bus (spec `cluster-bus.md` §21 "what Redis 7.0 does differently", §22 "interop
//! checklist").
//!
//! Each test forms its own mixed cluster on its own ports (a block from the one allocator,
//! `ports::block`; bus ports + [`mixed::BUS_OFFSET`], kept free by it too) with the long
//! `cluster-node-timeout` ([`mixed::NODE_TIMEOUT_MS`]: no node a loaded machine stalls is
//! taken for failed), so the tests can run in parallel with each other and with every other
//! test binary; a test that kills a node for a failover sets the short one
//! ([`mixed::DETECT_TIMEOUT_MS`]) on every live node, real ones too, just before the kill.
//! Every test ends with
//! [`Mixed::assert_bus_clean`]: no real node logged a bus complaint, none of ours dropped a frame,
//! and no real node closed and reopened a link (but by the liveness rule, after a silence its
//! log shows: a stalled process, not the bus). Every wait is for a condition, bounded only
//! against a hang; no test depends on how fast failure detection or a failover is. Needs `redis-server` and `redis-cli` (Debian's
//! redis-server and redis-tools, installed by `.ci/run`); missing tools fail the tests.
#![allow(clippy::disallowed_methods)]

mod mixed;

use mixed::{
    cluster_info_field, cmd, hostnames_of, nodes_of, ports, run_bounded, wait_ok, Client, Kind,
    Mixed, Reply, Role, HANG,
};

use Kind::{Ours, Real};
use Role::{Primary, ReplicaOf};

/// Three real and three of our primaries, interleaved so that each MEET of the chain goes from
/// one kind to the other.
const SIX_PRIMARIES: [(Kind, Role); 6] = [
    (Real, Primary),
    (Ours, Primary),
    (Real, Primary),
    (Ours, Primary),
    (Real, Primary),
    (Ours, Primary),
];

fn layout(extra: &[(Kind, Role)]) -> Vec<(Kind, Role)> {
    SIX_PRIMARIES.iter().chain(extra).copied().collect()
}

/// `redis-cli -c -p port args...`, returning its trimmed output (fails on a non-zero exit).
fn cli_c(port: u16, args: &[&str]) -> String {
    let p = port.to_string();
    let mut all = vec!["-c", "-p", &p];
    all.extend_from_slice(args);
    let (ok, out) = run_bounded("redis-cli", &all, HANG);
    assert!(ok, "redis-cli {all:?} failed:\n{out}");
    out.trim().to_string()
}

/// Log lines of `port` (since the mark) that contain every one of `parts`, as indices.
fn lines_with(m: &Mixed, port: u16, parts: &[&str]) -> Vec<usize> {
    m.log_since_mark(port)
        .iter()
        .enumerate()
        .filter(|(_, l)| parts.iter().all(|p| l.contains(p)))
        .map(|(i, _)| i)
        .collect()
}

/// The first line where real node `port` learned that `id` is FAIL (its own quorum or a FAIL
/// message), since the mark.
fn real_fail_line(m: &Mixed, port: u16, id: &str) -> Option<usize> {
    let own = lines_with(m, port, &["Marking node ", id, "as failing"]);
    let msg = lines_with(
        m,
        port,
        &["FAIL message received from", &format!("about {id}")],
    );
    own.into_iter().chain(msg).min()
}

/// Waits until the replica at `replica` has taken over the slots of the killed primary at
/// `failed` in every live node's view, then updates the expected layout accordingly.
fn wait_failover(m: &mut Mixed, failed: usize, replica: usize) -> u64 {
    let slots = m.m(failed).slots;
    let rport = m.m(replica).port;
    let rid = m.m(replica).id.clone();
    let max_epoch = m.members.iter().map(|x| x.epoch).max().unwrap_or(0);
    let epoch = wait_ok("the replica to win the election", || {
        let view = nodes_of(rport)?;
        let me = view.get(&rid).ok_or("replica does not list itself")?;
        let (a, b) = slots.ok_or("failed node had no slots")?;
        if me.has("myself") && me.has("master") && me.slots == vec![(a, b)] {
            Ok(me.epoch)
        } else {
            Err(format!("replica sees itself as {me:?}"))
        }
    });
    assert!(
        epoch > max_epoch,
        "the promoted replica's configEpoch {epoch} must exceed every earlier one ({max_epoch})"
    );
    m.members[replica].role = Primary;
    m.members[replica].slots = slots;
    m.members[replica].epoch = epoch;
    m.members[failed].slots = None;
    m.wait_view("every live node to see the failed-over layout");
    m.wait_state_ok();
    epoch
}

/// Topology, `redis-cli --cluster check` from both kinds, `redis-cli -c` through both kinds
/// into every primary's slots, raw MOVED replies both ways, replicas of each kind.
#[test]
fn mixed_cluster_forms_checks_and_redirects_both_ways() {
    let layout = layout(&[(Real, ReplicaOf(0)), (Ours, ReplicaOf(1))]);
    let m = Mixed::form("topology", ports::block(layout.len()), &layout);
    let (real, ours) = (m.m(0).port, m.m(1).port);

    m.assert_cluster_check(real);
    m.assert_cluster_check(ours);

    for i in 0..6 {
        let owner = m.m(i).port;
        for (entry, reader, tag) in [(real, ours, "via-real"), (ours, real, "via-ours")] {
            let key = m.key_for(i, &format!("key-{tag}"));
            let value = format!("value-{tag}-{i}");
            assert_eq!(
                cli_c(entry, &["SET", &key, &value]),
                "OK",
                "SET {key} via {entry}"
            );
            assert_eq!(
                cli_c(reader, &["GET", &key]),
                value,
                "GET {key} via {reader}"
            );
            // The raw reply of a node that does not own the slot is the MOVED redirect.
            let Reply::Int(slot) = cmd(entry, &["CLUSTER", "KEYSLOT", &key]) else {
                panic!("CLUSTER KEYSLOT");
            };
            for asked in [real, ours] {
                let got = cmd(asked, &["GET", &key]);
                if asked == owner {
                    assert_eq!(got, Reply::Bulk(Some(value.clone().into_bytes())));
                } else {
                    assert_eq!(
                        got,
                        Reply::Error(format!("MOVED {slot} 127.0.0.1:{owner}")),
                        "GET {key} on {asked}"
                    );
                }
            }
        }
    }

    // Each replica follows its primary's data (replication within one kind).
    for (replica, primary) in [(6, 0), (7, 1)] {
        let key = m.key_for(primary, "replicated");
        assert_eq!(
            cmd(m.m(primary).port, &["SET", &key, "r"]),
            Reply::Status("OK".into())
        );
        let rport = m.m(replica).port;
        wait_ok("the replica to have the key", || {
            let mut c = Client::connect(rport)?;
            c.try_cmd(&["READONLY"])?;
            match c.try_cmd(&["GET", &key])? {
                Reply::Bulk(Some(v)) if v == b"r" => Ok(()),
                other => Err(format!("{rport}: GET {key} = {other:?}")),
            }
        });
    }

    m.assert_bus_clean();
}

/// `kill -9` of one of our primaries: real nodes mark it PFAIL then FAIL, and our replica of it
/// wins an election whose majority needs real primaries' votes.
#[test]
fn killing_our_primary_elects_our_replica_with_real_votes() {
    let layout = layout(&[(Ours, ReplicaOf(1))]);
    let mut m = Mixed::form("fail-ours", ports::block(layout.len()), &layout);
    let dead = m.m(1).id.clone();
    let replica = m.m(6).id.clone();
    m.detect_failures_fast();
    m.kill9(1);
    wait_failover(&mut m, 1, 6);

    // Quorum for FAIL and for the election is 4 of the 6 slot-owning primaries; only two of
    // ours (ports +3, +5) are left, so at least two real primaries must have flagged PFAIL and
    // at least two must have voted.
    let real_primaries = [0, 2, 4].map(|i| m.m(i).port);
    let mut pfail = 0;
    let mut granted = 0;
    for p in real_primaries {
        let fail = real_fail_line(&m, p, &dead)
            .unwrap_or_else(|| panic!("real node {p} never learned that {dead} is FAIL"));
        let pf = lines_with(&m, p, &["*** NODE ", &dead, "possibly failing"]);
        if let Some(&first) = pf.first() {
            assert!(
                first < fail,
                "real node {p} logged FAIL before PFAIL for {dead}"
            );
            pfail += 1;
        }
        granted +=
            usize::from(!lines_with(&m, p, &["Failover auth granted to", &replica]).is_empty());
    }
    assert!(
        pfail >= 2,
        "only {pfail} real primaries flagged {dead} PFAIL"
    );
    assert!(
        granted >= 2,
        "only {granted} real primaries voted for our replica"
    );
    for i in [3, 5] {
        let p = m.m(i).port;
        assert!(
            !lines_with(&m, p, &["node marked FAIL", &dead]).is_empty(),
            "our node {p} did not mark {dead} FAIL"
        );
    }

    // The moved slots serve writes through both kinds.
    let key = m.key_for(6, "after-failover");
    assert_eq!(cli_c(m.m(0).port, &["SET", &key, "x"]), "OK");
    assert_eq!(cli_c(m.m(3).port, &["GET", &key]), "x");
    m.assert_bus_clean();
}

/// `kill -9` of a real primary: our nodes mark it PFAIL then FAIL, and its real replica wins an
/// election that cannot reach a majority without our primaries' votes.
#[test]
fn killing_a_real_primary_elects_its_real_replica_with_our_votes() {
    let layout = layout(&[(Real, ReplicaOf(0))]);
    let mut m = Mixed::form("fail-real", ports::block(layout.len()), &layout);
    let dead = m.m(0).id.clone();
    let replica = m.m(6).id.clone();
    m.detect_failures_fast();
    m.kill9(0);
    wait_failover(&mut m, 0, 6);

    // Two real primaries are left; the quorum is 4, so at least two of ours flagged PFAIL and
    // at least two of ours voted.
    let mut pfail = 0;
    for i in [1, 3, 5] {
        let p = m.m(i).port;
        let fail = lines_with(&m, p, &["node marked FAIL", &dead]);
        let fail = *fail
            .first()
            .unwrap_or_else(|| panic!("our node {p} never marked {dead} FAIL"));
        if let Some(&first) = lines_with(&m, p, &["node marked PFAIL", &dead]).first() {
            assert!(
                first < fail,
                "our node {p} logged FAIL before PFAIL for {dead}"
            );
            pfail += 1;
        }
    }
    assert!(
        pfail >= 2,
        "only {pfail} of our primaries flagged {dead} PFAIL"
    );
    let rport = m.m(6).port;
    assert!(
        !lines_with(&m, rport, &["Failover election won"]).is_empty(),
        "the real replica did not log its election win"
    );
    // Votes the replica has counted beyond those real primaries logged granting: ours. The
    // counter is read first and the real primaries' logs after it (a real primary logs its
    // grant before it sends it, so every real vote in the count is in the logs read after),
    // and both again until the bound holds: a vote the election did not wait for may still
    // be on its way when the replica has won.
    wait_ok("our primaries' votes counted by the real replica", || {
        let acks: u64 = cluster_info_field(rport, "cluster_stats_messages_auth-ack_received")?
            .parse()
            .map_err(|e| format!("auth-ack counter: {e}"))?;
        let real_granted: u64 = [2, 4]
            .map(|i| {
                lines_with(&m, m.m(i).port, &["Failover auth granted to", &replica]).len() as u64
            })
            .iter()
            .sum();
        if acks >= real_granted + 2 {
            Ok(())
        } else {
            Err(format!(
                "the replica received {acks} votes, {real_granted} of them from real \
                 primaries: our primaries' votes were needed for the majority of 4"
            ))
        }
    });

    let key = m.key_for(6, "after-failover");
    assert_eq!(cli_c(m.m(1).port, &["SET", &key, "y"]), "OK");
    assert_eq!(cli_c(m.m(2).port, &["GET", &key]), "y");
    m.assert_bus_clean();
}

/// Our node started from a nodes.conf written by redis-server 7.0 rejoins with the real node's
/// identity, slots and epochs (spec §18, §21.1: R70 format, no aux fields).
#[test]
fn our_node_rejoins_from_a_redis_nodes_conf() {
    let mut m = Mixed::form(
        "nodes-conf",
        ports::block(SIX_PRIMARIES.len()),
        &SIX_PRIMARIES,
    );
    let port = m.m(4).port;
    let id = m.m(4).id.clone();
    assert_eq!(
        cmd(port, &["CLUSTER", "SAVECONFIG"]),
        Reply::Status("OK".into())
    );
    let conf_path = m.procs.live(port).dir.join("nodes.conf");
    let conf = std::fs::read_to_string(&conf_path).expect("redis wrote nodes.conf");
    let my_line = conf
        .lines()
        .find(|l| l.contains("myself"))
        .expect("a myself line");
    assert!(
        my_line.starts_with(&format!(
            "{id} 127.0.0.1:{port}@{} myself,master - ",
            port + mixed::BUS_OFFSET
        )),
        "unexpected Redis 7.0 nodes.conf line {my_line:?}"
    );
    assert!(
        conf.contains("vars currentEpoch 6 lastVoteEpoch 0"),
        "{conf}"
    );

    m.kill9(4);
    m.procs.spawn_ours(port, Some(conf.clone()));
    m.procs.wait_port(port);
    m.members[4].kind = Ours;
    m.members[4].alive = true;
    assert_eq!(cmd(port, &["CLUSTER", "MYID"]).text(), id, "identity kept");
    m.wait_view("the cluster to take our node back under the real node's identity");
    m.wait_state_ok();
    assert_eq!(
        cluster_info_field(port, "cluster_current_epoch").as_deref(),
        Ok("6")
    );
    assert_eq!(
        cluster_info_field(port, "cluster_my_epoch").as_deref(),
        Ok("5")
    );
    m.mark();

    m.assert_cluster_check(port);
    m.assert_cluster_check(m.m(0).port);
    let key = m.key_for(4, "rejoined");
    assert_eq!(cli_c(m.m(0).port, &["SET", &key, "z"]), "OK");
    assert_eq!(cli_c(port, &["GET", &key]), "z");
    assert_eq!(cli_c(m.m(2).port, &["GET", &key]), "z");
    m.assert_bus_clean();
}

/// PUBLISH on a real node reaches a subscriber on ours, and PUBLISH on ours reaches channel and
/// pattern subscribers on real nodes (spec §17: PUBLISH is broadcast over the bus).
#[test]
fn pubsub_crosses_between_real_and_our_nodes() {
    let m = Mixed::form(
        "pubsub",
        ports::block(4),
        &[
            (Real, Primary),
            (Ours, Primary),
            (Real, Primary),
            (Ours, Primary),
        ],
    );
    let subscribe = |port: u16, verb: &str, chan: &str| {
        let mut c = Client::connect(port).unwrap_or_else(|e| panic!("{e}"));
        let r = c.cmd(&[verb, chan]);
        let confirm = if verb == "SUBSCRIBE" {
            "subscribe"
        } else {
            "psubscribe"
        };
        assert_eq!(
            r,
            Reply::Array(Some(vec![
                Reply::Bulk(Some(confirm.into())),
                Reply::Bulk(Some(chan.into())),
                Reply::Int(1),
            ]))
        );
        c
    };
    let msg = |chan: &str, payload: &str| {
        Reply::Array(Some(vec![
            Reply::Bulk(Some(b"message".to_vec())),
            Reply::Bulk(Some(chan.into())),
            Reply::Bulk(Some(payload.into())),
        ]))
    };
    let pmsg = |payload: &str| {
        Reply::Array(Some(vec![
            Reply::Bulk(Some(b"pmessage".to_vec())),
            Reply::Bulk(Some(b"ne*".to_vec())),
            Reply::Bulk(Some(b"news".to_vec())),
            Reply::Bulk(Some(payload.into())),
        ]))
    };
    let mut on_ours = subscribe(m.m(1).port, "SUBSCRIBE", "news");
    let mut on_real = subscribe(m.m(0).port, "SUBSCRIBE", "news");
    let mut pattern_on_real = subscribe(m.m(2).port, "PSUBSCRIBE", "ne*");

    // Real -> ours (and to the other real node). PUBLISH counts local receivers only (here the
    // pattern subscriber on the publishing node).
    assert_eq!(
        cmd(m.m(2).port, &["PUBLISH", "news", "from-real"]),
        Reply::Int(1)
    );
    assert_eq!(on_ours.read_reply(), Ok(msg("news", "from-real")));
    assert_eq!(on_real.read_reply(), Ok(msg("news", "from-real")));
    assert_eq!(pattern_on_real.read_reply(), Ok(pmsg("from-real")));

    // Ours -> real (channel and pattern subscribers). Ours -> ours is left out on purpose: our
    // nodes advertise LIGHT_HDR_SUPPORTED to each other and send PUBLISH with the light header,
    // which the receiver drops (closing the link) while its inbound link from the publisher is
    // not yet bound to a node — a window of up to node-timeout/2 after it learned the
    // publisher through gossip (Valkey 8.0 behaves the same, §2/§8); it is not an interop path.
    assert_eq!(
        cmd(m.m(3).port, &["PUBLISH", "news", "from-ours"]),
        Reply::Int(0)
    );
    assert_eq!(on_real.read_reply(), Ok(msg("news", "from-ours")));
    assert_eq!(pattern_on_real.read_reply(), Ok(pmsg("from-ours")));

    m.assert_bus_clean();
}

/// `cluster-announce-hostname` on a real node and on ours (spec §6, §21.1). A Redis 7.0 node
/// with a hostname sends EXT_DATA with the HOSTNAME extension alone, and knows no other
/// extension type: our nodes must send it HOSTNAME only (no SHARDID, which it would log as
/// "Received unknown extension type 3" on every ping — [`Mixed::assert_bus_clean`] fails on
/// that). Node 2 learns the real node only through node 1's gossip (the MEET chain is 0→1→2),
/// with EXTENSIONS_SUPPORTED copied from it (§6.3), so its first PINGs are covered too.
/// Every node shows every hostname in CLUSTER NODES; each hostname seen on the real node
/// proves that at least one extension-bearing message of that node of ours reached it.
#[test]
fn hostnames_cross_without_unknown_extensions() {
    let base = ports::block(3);
    let hosts = [
        format!("real-{base}.example"),
        format!("ours-{}.example", base + 1),
        format!("ours-{}.example", base + 2),
    ];
    let m = Mixed::form_with_hostnames(
        "hostname",
        base,
        &[(Real, Primary), (Ours, Primary), (Ours, Primary)],
        &[(0, &hosts[0]), (1, &hosts[1]), (2, &hosts[2])],
    );
    let want: std::collections::BTreeMap<String, Option<String>> = m
        .members
        .iter()
        .zip(&hosts)
        .map(|(n, h)| (n.id.clone(), Some(h.clone())))
        .collect();
    wait_ok("every node to show every hostname", || {
        for p in m.live_ports() {
            let got = hostnames_of(p)?;
            if got != want {
                return Err(format!("{p} shows {got:?}"));
            }
        }
        Ok(())
    });
    // The real node's view of our hostnames is also what redis-cli --cluster check reads.
    m.assert_cluster_check(m.m(0).port);
    m.assert_bus_clean();
}

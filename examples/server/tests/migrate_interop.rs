//! Legacy slot migration of every value type between our nodes and real ones (issue 18):
//! `redis-cli --cluster reshard` (`CLUSTER SETSLOT` + `MIGRATE` of DUMP payloads, on
//! `ferrocluster_dataplane::legacy`) moves slots holding strings (raw and integer), hashes,
//! lists, sets (intset and listpack) and sorted sets, small and large encodings, with and
//! without TTLs, from a `valkey-server` 9.1 node to ours, from ours to a `redis-server` 7.0
//! node, from that node back to ours, and from ours to the valkey node. After every move the
//! target holds every key with the same value and a TTL still pending, and the source none.
//! A reshard sets the new owner on each node itself; the next step (a check, the next
//! reshard, which refuses to start while nodes disagree) waits until every node's
//! `CLUSTER NODES` shows the same slot map.
//!
//! Ports from the one allocator (`ports::block`, bus ports + `mixed::BUS_OFFSET` kept free by
//! it too). A missing server fails the test.
#![allow(clippy::disallowed_methods)]

mod mixed;

use mixed::keys::{check_on, dbsize, keys_in, make_keys, SLOTS};
use mixed::{ports, reshard, try_cmd, Client, Kind, Mixed, Reply, Role};

/// Waits until every node on `ports` shows the same slot map.
fn wait_agree(ports: &[u16]) {
    ferrocluster_testkit::cluster::wait_agree(ports, |port| {
        match try_cmd(port, &["CLUSTER", "NODES"])? {
            Reply::Bulk(Some(b)) => Ok(String::from_utf8_lossy(&b).into_owned()),
            other => Err(format!("CLUSTER NODES on {port}: {other:?}")),
        }
    });
}

#[test]
fn redis_cli_reshard_moves_every_type_with_ttls_between_ours_valkey_9_and_redis_7() {
    let m = Mixed::form(
        "migrate-interop",
        ports::block(3),
        &[
            (Kind::Valkey, Role::Primary),
            (Kind::Ours, Role::Primary),
            (Kind::Real, Role::Primary),
        ],
    );
    let (valkey, ours, redis) = (m.m(0).clone(), m.m(1).clone(), m.m(2).clone());
    let (lo, _) = valkey.slots.expect("valkey owns the first slots");
    let keys = keys_in(&m, lo);
    let mut v = Client::connect(valkey.port).unwrap();
    let want = make_keys(&mut v, &keys);
    let n = keys.len() as i64;
    assert_eq!(dbsize(valkey.port), n);

    // valkey -> ours -> redis -> ours -> valkey: each reshard moves the source's lowest
    // slots, which are the ones holding the keys.
    for (from, to) in [
        (&valkey, &ours),
        (&ours, &redis),
        (&redis, &ours),
        (&ours, &valkey),
    ] {
        reshard(from.port, &from.id, &to.id, usize::from(SLOTS));
        wait_agree(&m.live_ports());
        check_on(to.port, &keys, &want);
        assert_eq!(dbsize(to.port), n, "{:?} -> {:?}", from.kind, to.kind);
        assert_eq!(dbsize(from.port), 0, "{:?} -> {:?}", from.kind, to.kind);
    }
    m.assert_cluster_check(ours.port);
}

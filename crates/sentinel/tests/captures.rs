//! Replies captured from real Redis 7.0.15 / Sentinel 7.0.15 (Debian bookworm packages,
//! loopback, ports 26350-26353), decoded with `redis-protocol` exactly as a host would,
//! then fed to the resolver. The expected outcomes follow the Sentinel client spec.

use ferrocluster_sentinel::{Addr, Config, ConnId, Output, ResolveError, Resolver, Value, Want};
use redis_protocol::resp2::types::OwnedFrame;

const GET_MASTER_ADDR: &[u8] = b"*2\r\n$9\r\n127.0.0.1\r\n$5\r\n26350\r\n";
const GET_MASTER_ADDR_UNKNOWN: &[u8] = b"*-1\r\n";
const REPLICAS_UNKNOWN: &[u8] = b"-ERR No such master with that name\r\n";
const REPLICAS: &[u8] = b"*1\r\n*42\r\n$4\r\nname\r\n$15\r\n127.0.0.1:26351\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$4\r\nport\r\n$5\r\n26351\r\n$5\r\nrunid\r\n$40\r\na62a5554fb3502b550bb19cc0f0d781d3e6c5676\r\n$5\r\nflags\r\n$5\r\nslave\r\n$21\r\nlink-pending-commands\r\n$1\r\n0\r\n$13\r\nlink-refcount\r\n$1\r\n1\r\n$14\r\nlast-ping-sent\r\n$1\r\n0\r\n$18\r\nlast-ok-ping-reply\r\n$3\r\n416\r\n$15\r\nlast-ping-reply\r\n$3\r\n416\r\n$23\r\ndown-after-milliseconds\r\n$4\r\n1000\r\n$12\r\ninfo-refresh\r\n$4\r\n8752\r\n$13\r\nrole-reported\r\n$5\r\nslave\r\n$18\r\nrole-reported-time\r\n$4\r\n8836\r\n$21\r\nmaster-link-down-time\r\n$1\r\n0\r\n$18\r\nmaster-link-status\r\n$2\r\nok\r\n$11\r\nmaster-host\r\n$9\r\n127.0.0.1\r\n$11\r\nmaster-port\r\n$5\r\n26350\r\n$14\r\nslave-priority\r\n$3\r\n100\r\n$17\r\nslave-repl-offset\r\n$4\r\n1132\r\n$17\r\nreplica-announced\r\n$1\r\n1\r\n";
const SENTINELS: &[u8] = b"*1\r\n*28\r\n$4\r\nname\r\n$40\r\n05489405d0c30fa91fc123de017539060ad96ded\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$4\r\nport\r\n$5\r\n26353\r\n$5\r\nrunid\r\n$40\r\n05489405d0c30fa91fc123de017539060ad96ded\r\n$5\r\nflags\r\n$8\r\nsentinel\r\n$21\r\nlink-pending-commands\r\n$1\r\n0\r\n$13\r\nlink-refcount\r\n$1\r\n1\r\n$14\r\nlast-ping-sent\r\n$1\r\n0\r\n$18\r\nlast-ok-ping-reply\r\n$3\r\n318\r\n$15\r\nlast-ping-reply\r\n$3\r\n318\r\n$23\r\ndown-after-milliseconds\r\n$4\r\n1000\r\n$18\r\nlast-hello-message\r\n$3\r\n368\r\n$12\r\nvoted-leader\r\n$1\r\n?\r\n$18\r\nvoted-leader-epoch\r\n$1\r\n0\r\n";
const ROLE_PRIMARY: &[u8] =
    b"*3\r\n$6\r\nmaster\r\n:850\r\n*1\r\n*3\r\n$9\r\n127.0.0.1\r\n$5\r\n26351\r\n$3\r\n559\r\n";
const ROLE_REPLICA: &[u8] =
    b"*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:26350\r\n$9\r\nconnected\r\n:850\r\n";
const ROLE_SENTINEL: &[u8] = b"*2\r\n$8\r\nsentinel\r\n*1\r\n$8\r\nmymaster\r\n";
const INFO_REPLICATION_REPLICA: &[u8] = b"$590\r\n# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:26350\r\nmaster_link_status:up\r\nmaster_last_io_seconds_ago:0\r\nmaster_sync_in_progress:0\r\nslave_read_repl_offset:1118\r\nslave_repl_offset:1118\r\nslave_priority:100\r\nslave_read_only:1\r\nreplica_announced:1\r\nconnected_slaves:0\r\nmaster_failover_state:no-failover\r\nmaster_replid:373f302ba6b7fd8bbc0a16f8d5671edcc0869449\r\nmaster_replid2:0000000000000000000000000000000000000000\r\nmaster_repl_offset:1118\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:1\r\nrepl_backlog_size:1048576\r\nrepl_backlog_first_byte_offset:560\r\nrepl_backlog_histlen:559\r\n\r\n";
const SUBSCRIBE_ACK: &[u8] = b"*3\r\n$9\r\nsubscribe\r\n$14\r\n+switch-master\r\n:1\r\n";

fn to_value(f: OwnedFrame) -> Value {
    match f {
        OwnedFrame::SimpleString(s) => Value::Simple(String::from_utf8_lossy(&s).into_owned()),
        OwnedFrame::Error(e) => Value::Error(e),
        OwnedFrame::Integer(i) => Value::Int(i),
        OwnedFrame::BulkString(b) => Value::Bulk(b),
        OwnedFrame::Array(v) => Value::Array(v.into_iter().map(to_value).collect()),
        OwnedFrame::Null => Value::Nil,
    }
}

fn decode(bytes: &[u8]) -> Value {
    let (frame, used) = redis_protocol::resp2::decode::decode(bytes)
        .expect("valid RESP2")
        .expect("complete frame");
    assert_eq!(used, bytes.len());
    to_value(frame)
}

fn s(port: u16) -> Addr {
    Addr::new("127.0.0.1", port)
}

fn drain(r: &mut Resolver) -> Vec<Output> {
    std::iter::from_fn(|| r.poll_output()).collect()
}

fn connects(out: &[Output]) -> Vec<(ConnId, Addr)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Connect { conn, addr, .. } => Some((*conn, addr.clone())),
            _ => None,
        })
        .collect()
}

/// Runs one resolution: Sentinel 26352 answers `sentinel_reply`; returns the outputs
/// after it and the resolver.
fn ask(want: Want, name: &str, sentinel_reply: &[u8]) -> (Resolver, Vec<Output>) {
    let mut cfg = Config::new(name, want, vec![s(26352)]);
    cfg.refresh_sentinels = false;
    let mut r = Resolver::new(cfg, 0).unwrap();
    let c = connects(&drain(&mut r))[0].0;
    r.handle_connected(c, 1).unwrap();
    drain(&mut r);
    r.handle_reply(c, decode(sentinel_reply), 2).unwrap();
    let out = drain(&mut r);
    (r, out)
}

/// Answers the single pending role check with `reply`.
fn role_check(r: &mut Resolver, out: &[Output], reply: &[u8]) -> Vec<Output> {
    let (c, _) = connects(out)[0].clone();
    r.handle_connected(c, 3).unwrap();
    drain(r);
    r.handle_reply(c, decode(reply), 4).unwrap();
    drain(r)
}

fn is_resolved_to(out: &[Output], addrs: &[Addr]) -> bool {
    out.iter()
        .any(|o| matches!(o, Output::Resolved { resolution, .. } if resolution.addrs == addrs))
}

#[test]
fn captured_primary_address_then_role_master_resolves() {
    let (mut r, out) = ask(Want::Primary, "mymaster", GET_MASTER_ADDR);
    assert_eq!(connects(&out)[0].1, s(26350));
    let out = role_check(&mut r, &out, ROLE_PRIMARY);
    assert!(is_resolved_to(&out, &[s(26350)]), "{out:?}");
}

#[test]
fn captured_role_replica_or_sentinel_is_not_a_primary() {
    for role in [ROLE_REPLICA, ROLE_SENTINEL] {
        let (mut r, out) = ask(Want::Primary, "mymaster", GET_MASTER_ADDR);
        let out = role_check(&mut r, &out, role);
        assert!(!out.iter().any(|o| matches!(o, Output::Resolved { .. })));
        assert_eq!(r.poll_timeout(), Some(4 + 250), "waits, then step 1 again");
    }
}

#[test]
fn captured_null_address_is_an_unknown_service() {
    let (_, out) = ask(Want::Primary, "nosuch", GET_MASTER_ADDR_UNKNOWN);
    assert!(out.contains(&Output::Error(ResolveError::UnknownService {
        name: "nosuch".into(),
        null_answers: 1,
        unreachable: 0
    })));
}

#[test]
fn captured_replicas_list_then_role_replica_resolves() {
    let (mut r, out) = ask(Want::Replicas, "mymaster", REPLICAS);
    assert_eq!(connects(&out)[0].1, s(26351));
    let out = role_check(&mut r, &out, ROLE_REPLICA);
    assert!(is_resolved_to(&out, &[s(26351)]), "{out:?}");
}

#[test]
fn captured_replicas_of_unknown_name_is_an_unknown_service() {
    let (_, out) = ask(Want::Replicas, "nosuch", REPLICAS_UNKNOWN);
    assert!(matches!(
        out.last(),
        Some(Output::Error(ResolveError::UnknownService { .. }))
    ));
}

#[test]
fn captured_info_replication_fallback_reads_role_slave() {
    let (mut r, out) = ask(Want::Replicas, "mymaster", REPLICAS);
    let (c, _) = connects(&out)[0].clone();
    r.handle_connected(c, 3).unwrap();
    drain(&mut r);
    r.handle_reply(
        c,
        Value::Error("NOPERM this user has no permissions to run the 'role' command".into()),
        4,
    )
    .unwrap();
    drain(&mut r);
    r.handle_reply(c, decode(INFO_REPLICATION_REPLICA), 5)
        .unwrap();
    assert!(is_resolved_to(&drain(&mut r), &[s(26351)]));
}

#[test]
fn captured_sentinels_list_is_appended() {
    let mut cfg = Config::new("mymaster", Want::Primary, vec![s(26352)]);
    cfg.refresh_sentinels = true;
    let mut r = Resolver::new(cfg, 0).unwrap();
    let c = connects(&drain(&mut r))[0].0;
    r.handle_connected(c, 1).unwrap();
    drain(&mut r);
    r.handle_reply(c, decode(GET_MASTER_ADDR), 2).unwrap();
    r.handle_reply(c, decode(SENTINELS), 3).unwrap();
    assert_eq!(r.sentinels(), &[s(26352), s(26353)]);
}

#[test]
fn captured_subscribe_ack_opens_the_subscription() {
    let mut cfg = Config::new("mymaster", Want::Primary, vec![s(26352)]);
    cfg.follow_switch_master = true;
    let mut r = Resolver::new(cfg, 0).unwrap();
    let c = connects(&drain(&mut r))[0].0;
    r.handle_connected(c, 1).unwrap();
    drain(&mut r);
    r.handle_reply(c, decode(GET_MASTER_ADDR), 2).unwrap();
    let out = drain(&mut r);
    let out = role_check(&mut r, &out, ROLE_PRIMARY);
    let (sub, addr) = connects(&out)[0].clone();
    assert_eq!(addr, s(26352));
    r.handle_connected(sub, 5).unwrap();
    drain(&mut r);
    r.handle_reply(sub, decode(SUBSCRIBE_ACK), 6).unwrap();
    assert!(r.is_subscribed());
    assert_eq!(r.poll_timeout(), None);
}

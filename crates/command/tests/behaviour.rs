//! Behaviour from the facts sheets and the Valkey sources that the captures do not show.

use ferrocluster_command::*;
use ferrocluster_slot::{key_hash_slot, Slot};
use ferrocluster_topology::{Millis, Node, NodeFlags, NodeId, ShardId, Topology};
use proptest::prelude::*;

fn id(n: u8) -> NodeId {
    NodeId::from_bytes(&[b'a' + n; 40]).unwrap()
}

fn node(n: u8, primary: bool, port: u16) -> Node {
    let mut x = Node::new(
        id(n),
        ShardId::from_bytes(&[b'a' + n; 40]).unwrap(),
        Millis(0),
    );
    x.flags = if primary {
        NodeFlags::PRIMARY
    } else {
        NodeFlags::REPLICA
    };
    x.ip = Some("127.0.0.1".parse().unwrap());
    x.port = port;
    x.tls_port = port + 1000;
    x
}

/// Myself (a) owns every slot except `foo`'s (12182), owned by b; c replicates b.
fn cluster(myself_primary: bool) -> Topology {
    let mut t = Topology::new(node(0, myself_primary, 7000));
    t.add_node(node(1, true, 7001)).unwrap();
    t.add_node(node(2, false, 7002)).unwrap();
    t.set_primary(&id(2), id(1)).unwrap();
    for s in Slot::all() {
        t.set_slot_owner(s, Some(if s.get() == 12182 { id(1) } else { id(0) }))
            .unwrap();
    }
    t
}

fn ctx(t: &Topology) -> ClusterContext<'_, Topology> {
    ClusterContext {
        view: t,
        state_ok: true,
        config: RoutingConfig::default(),
    }
}

fn text(r: &Rejection) -> String {
    String::from_utf8(r.to_resp()).unwrap()
}

#[test]
fn moved_uses_the_tls_port_and_ipv6_without_brackets() {
    let mut t = cluster(true);
    t.node_mut(&id(1)).unwrap().ip = Some("::1".parse().unwrap());
    let mut c = ClientState::new(true, true);
    match c.handle_command(&["GET", "foo"], &ctx(&t), &NoKeys) {
        Dispatch::Reject(r) => assert_eq!(text(&r), "-MOVED 12182 ::1:8001\r\n"),
        d => panic!("{d:?}"),
    }
}

#[test]
fn hostname_endpoint_without_hostname_is_a_question_mark() {
    let t = cluster(true);
    let mut cx = ctx(&t);
    cx.config.preferred_endpoint = EndpointType::Hostname;
    let mut c = ClientState::new(false, false);
    match c.handle_command(&["GET", "foo"], &cx, &NoKeys) {
        Dispatch::Reject(r) => assert_eq!(text(&r), "-MOVED 12182 ?:7001\r\n"),
        d => panic!("{d:?}"),
    }
}

#[test]
fn asking_lasts_through_multi_and_ends_after_exec() {
    let mut t = cluster(true);
    t.set_slot_owner(Slot::new(12182).unwrap(), Some(id(1)))
        .unwrap();
    t.set_importing(Slot::new(12182).unwrap(), Some(id(1)))
        .unwrap();
    let cx = ctx(&t);
    let mut c = ClientState::new(false, false);
    assert_eq!(c.handle_command(&["ASKING"], &cx, &NoKeys), Dispatch::Ok);
    assert_eq!(c.handle_command(&["MULTI"], &cx, &NoKeys), Dispatch::Ok);
    assert!(c.asking());
    assert_eq!(
        c.handle_command(&["GET", "foo"], &cx, &NoKeys),
        Dispatch::Queued
    );
    assert_eq!(
        c.handle_command(&["SET", "foo", "1"], &cx, &NoKeys),
        Dispatch::Queued
    );
    assert!(matches!(c.handle_command(&["EXEC"], &cx, &NoKeys), Dispatch::Exec(q) if q.len() == 2));
    assert!(!c.asking());
    // Without ASKING the importing slot redirects.
    assert!(matches!(
        c.handle_command(&["GET", "foo"], &cx, &NoKeys),
        Dispatch::Reject(_)
    ));
}

#[test]
fn redirect_of_exec_discards_the_transaction() {
    // Slot of foo changes owner between queueing and EXEC.
    let mut t = cluster(true);
    t.set_slot_owner(Slot::new(12182).unwrap(), Some(id(0)))
        .unwrap();
    let mut c = ClientState::new(false, false);
    assert_eq!(
        c.handle_command(&["MULTI"], &ctx(&t), &NoKeys),
        Dispatch::Ok
    );
    assert_eq!(
        c.handle_command(&["GET", "foo"], &ctx(&t), &NoKeys),
        Dispatch::Queued
    );
    t.set_slot_owner(Slot::new(12182).unwrap(), Some(id(1)))
        .unwrap();
    match c.handle_command(&["EXEC"], &ctx(&t), &NoKeys) {
        Dispatch::Reject(r) => assert_eq!(text(&r), "-MOVED 12182 127.0.0.1:7001\r\n"),
        d => panic!("{d:?}"),
    }
    assert!(!c.in_multi());
}

#[test]
fn crossslot_across_a_transaction_is_detected_at_exec() {
    let mut t = cluster(true);
    t.set_slot_owner(Slot::new(12182).unwrap(), Some(id(0)))
        .unwrap();
    let mut c = ClientState::new(false, false);
    c.handle_command(&["MULTI"], &ctx(&t), &NoKeys);
    assert_eq!(
        c.handle_command(&["GET", "foo"], &ctx(&t), &NoKeys),
        Dispatch::Queued
    );
    assert_eq!(
        c.handle_command(&["GET", "bar"], &ctx(&t), &NoKeys),
        Dispatch::Queued
    );
    match c.handle_command(&["EXEC"], &ctx(&t), &NoKeys) {
        Dispatch::Reject(r) => {
            assert_eq!(
                text(&r),
                "-CROSSSLOT Keys in request don't hash to the same slot\r\n"
            )
        }
        d => panic!("{d:?}"),
    }
}

#[test]
fn unknown_command_and_arity_flag_the_transaction() {
    let t = cluster(true);
    let mut c = ClientState::new(false, false);
    c.handle_command(&["MULTI"], &ctx(&t), &NoKeys);
    match c.handle_command(&["FOO", "a", "b"], &ctx(&t), &NoKeys) {
        Dispatch::Reject(r) => assert_eq!(
            text(&r),
            "-ERR unknown command 'FOO', with args beginning with: 'a' 'b' \r\n"
        ),
        d => panic!("{d:?}"),
    }
    assert!(c.transaction_failed());
    match c.handle_command(&["EXEC"], &ctx(&t), &NoKeys) {
        Dispatch::Reject(r) => {
            assert_eq!(
                text(&r),
                "-EXECABORT Transaction discarded because of previous errors.\r\n"
            )
        }
        d => panic!("{d:?}"),
    }
    match c.handle_command(&["GET"], &ctx(&t), &NoKeys) {
        Dispatch::Reject(r) => {
            assert_eq!(
                text(&r),
                "-ERR wrong number of arguments for 'get' command\r\n"
            )
        }
        d => panic!("{d:?}"),
    }
}

#[test]
fn migrating_slot_ask_and_tryagain_and_migrate_served() {
    let mut t = cluster(true);
    let slot = key_hash_slot(b"{m}a");
    t.set_migrating(slot, Some(id(1))).unwrap();
    let have = |_db: usize, k: &[u8]| k == b"{m}a";
    let mut c = ClientState::new(false, false);
    let cx = ctx(&t);
    assert!(matches!(
        c.handle_command(&["GET", "{m}a"], &cx, &have),
        Dispatch::Execute { .. }
    ));
    match c.handle_command(&["GET", "{m}b"], &cx, &have) {
        Dispatch::Reject(r) => assert_eq!(text(&r), format!("-ASK {slot} 127.0.0.1:7001\r\n")),
        d => panic!("{d:?}"),
    }
    match c.handle_command(&["MGET", "{m}a", "{m}b"], &cx, &have) {
        Dispatch::Reject(r) => {
            assert_eq!(
                text(&r),
                "-TRYAGAIN Multiple keys request during rehashing of slot\r\n"
            )
        }
        d => panic!("{d:?}"),
    }
    assert!(matches!(
        c.handle_command(&["MIGRATE", "h", "1", "{m}b", "0", "10"], &cx, &have),
        Dispatch::Execute { .. }
    ));
    // Valkey 9: MOVE during migration is TRYAGAIN.
    assert!(matches!(
        c.handle_command(&["MOVE", "{m}a", "0"], &cx, &have),
        Dispatch::Reject(Rejection::Route(RouteError::TryAgain))
    ));
}

#[test]
fn sharded_pubsub_is_served_by_replicas_and_when_down() {
    let t = {
        let mut t = Topology::new(node(2, false, 7002));
        t.add_node(node(1, true, 7001)).unwrap();
        t.set_primary(&id(2), id(1)).unwrap();
        for s in Slot::all() {
            t.set_slot_owner(s, Some(id(1))).unwrap();
        }
        t
    };
    let mut cx = ctx(&t);
    cx.state_ok = false;
    let mut c = ClientState::new(false, false);
    assert!(matches!(
        c.handle_command(&["SPUBLISH", "ch", "m"], &cx, &NoKeys),
        Dispatch::Execute { .. }
    ));
    assert!(matches!(
        c.handle_command(&["GET", "ch"], &cx, &NoKeys),
        Dispatch::Reject(Rejection::Route(RouteError::ClusterDown))
    ));
    cx.config.allow_pubsubshard_when_down = false;
    assert!(matches!(
        c.handle_command(&["SSUBSCRIBE", "ch"], &cx, &NoKeys),
        Dispatch::Reject(Rejection::Route(RouteError::ClusterDown))
    ));
    assert_eq!(shard_channels_slot(&["a", "b"]), Err(RouteError::CrossSlot));
    assert_eq!(
        shard_channels_slot(&["{x}a", "{x}b"]),
        Ok(Some(key_hash_slot(b"x")))
    );
}

/// Myself (c) replicates b, which owns every slot.
fn replica_view() -> Topology {
    let mut t = Topology::new(node(2, false, 7002));
    t.add_node(node(1, true, 7001)).unwrap();
    t.set_primary(&id(2), id(1)).unwrap();
    for s in Slot::all() {
        t.set_slot_owner(s, Some(id(1))).unwrap();
    }
    t
}

#[test]
fn a_replica_refuses_keyless_writes_and_redirects_keyed_ones() {
    // Replies captured on Redis 7.0 and Valkey 9.1 (examples/server/tests/vectors/
    // replica-writes.json).
    let readonly = "-READONLY You can't write against a read only replica.\r\n";
    let t = replica_view();
    let cx = ctx(&t);
    let mut c = ClientState::new(false, false);
    for argv in [
        &["FLUSHALL"][..],
        &["FLUSHDB", "SYNC"],
        &["FLUSHALL", "ASYNC", "x"],
        // Before SWAPDB's own cluster-mode refusal.
        &["SWAPDB", "0", "0"],
    ] {
        match c.handle_command(argv, &cx, &NoKeys) {
            Dispatch::Reject(r) => assert_eq!(text(&r), readonly, "{argv:?}"),
            d => panic!("{argv:?}: {d:?}"),
        }
    }
    let moved = format!("-MOVED {} 127.0.0.1:7001\r\n", key_hash_slot(b"k").get());
    match c.handle_command(&["SET", "k", "v"], &cx, &NoKeys) {
        Dispatch::Reject(r) => assert_eq!(text(&r), moved),
        d => panic!("{d:?}"),
    }
    assert_eq!(c.handle_command(&["READONLY"], &cx, &NoKeys), Dispatch::Ok);
    assert!(matches!(
        c.handle_command(&["GET", "k"], &cx, &NoKeys),
        Dispatch::Execute { .. }
    ));
    match c.handle_command(&["SET", "k", "v"], &cx, &NoKeys) {
        Dispatch::Reject(r) => assert_eq!(text(&r), moved),
        d => panic!("{d:?}"),
    }
    // Inside MULTI the refusal flags the transaction.
    assert_eq!(c.handle_command(&["MULTI"], &cx, &NoKeys), Dispatch::Ok);
    assert!(
        matches!(c.handle_command(&["FLUSHALL"], &cx, &NoKeys), Dispatch::Reject(r) if text(&r) == readonly)
    );
    assert_eq!(
        c.handle_command(&["EXEC"], &cx, &NoKeys),
        Dispatch::Reject(CommandError::ExecAbort.into())
    );
    assert_eq!(c.handle_command(&["MULTI"], &cx, &NoKeys), Dispatch::Ok);
    assert_eq!(c.handle_command(&["PING"], &cx, &NoKeys), Dispatch::Queued);
    assert!(matches!(c.handle_command(&["EXEC"], &cx, &NoKeys), Dispatch::Exec(q) if q.len() == 1));
    // The primary's replication link is obeyed.
    let mut link = ClientState::primary_link();
    assert!(matches!(
        link.handle_command(&["FLUSHALL"], &cx, &NoKeys),
        Dispatch::Execute { .. }
    ));
}

#[test]
fn exec_of_a_queued_write_after_becoming_a_replica_is_aborted() {
    // A primary without slots queues FLUSHALL, then becomes a replica before EXEC.
    let mut t = Topology::new(node(2, true, 7002));
    t.add_node(node(1, true, 7001)).unwrap();
    let mut c = ClientState::new(false, false);
    assert_eq!(
        c.handle_command(&["MULTI"], &ctx(&t), &NoKeys),
        Dispatch::Ok
    );
    assert_eq!(
        c.handle_command(&["FLUSHALL"], &ctx(&t), &NoKeys),
        Dispatch::Queued
    );
    let t = replica_view();
    match c.handle_command(&["EXEC"], &ctx(&t), &NoKeys) {
        Dispatch::Reject(r) => assert_eq!(
            text(&r),
            "-EXECABORT Transaction discarded because of: READONLY You can't write against a \
             read only replica.\r\n"
        ),
        d => panic!("{d:?}"),
    }
    assert!(!c.in_multi());
}

#[test]
fn select_follows_valkey_9() {
    assert_eq!(select_db(b"0", 1), Ok(0));
    assert_eq!(select_db(b"1", 1), Err(CommandError::DbIndexOutOfRange));
    assert_eq!(select_db(b"3", 16), Ok(3));
    assert_eq!(select_db(b"-1", 16), Err(CommandError::DbIndexOutOfRange));
    assert_eq!(select_db(b"x", 16), Err(CommandError::NotAnInteger));
    assert_eq!(
        select_db(b"4294967296", 16),
        Err(CommandError::NotAnInteger)
    );
    assert_eq!(
        String::from_utf8(CommandError::DbIndexOutOfRange.to_resp()).unwrap(),
        "-ERR DB index is out of range\r\n"
    );
}

fn parse(args: &[&str]) -> Result<ClusterCommand, ClusterError> {
    parse_cluster(args, ParseOptions::default())
}

fn err(args: &[&str]) -> String {
    String::from_utf8(parse(args).unwrap_err().to_resp()).unwrap()
}

#[test]
fn cluster_parse_texts() {
    assert_eq!(
        err(&["CLUSTER"]),
        "-ERR wrong number of arguments for 'cluster' command\r\n"
    );
    assert_eq!(
        err(&["cluster", "meet", "a", "1", "2", "3"]),
        "-ERR unknown subcommand or wrong number of arguments for 'meet'. Try CLUSTER HELP.\r\n"
    );
    assert_eq!(
        err(&["CLUSTER", "ADDSLOTSRANGE", "1", "2", "3"]),
        "-ERR wrong number of arguments for 'cluster|addslotsrange' command\r\n"
    );
    assert_eq!(
        err(&["CLUSTER", "MEET", "1.2.3.4", "1", "x"]),
        "-ERR Invalid bus port specified: x\r\n"
    );
    assert_eq!(
        err(&["CLUSTER", "MEET", "1.2.3.4", "60000"]),
        "-ERR Invalid node address specified: 1.2.3.4:60000\r\n"
    );
    assert_eq!(
        parse(&["CLUSTER", "MEET", "::1", "7000"]).unwrap(),
        ClusterCommand::Meet {
            ip: "::1".parse().unwrap(),
            port: 7000,
            bus_port: 17000
        }
    );
    assert_eq!(
        err(&["CLUSTER", "SET-CONFIG-EPOCH", "-3"]),
        "-ERR Invalid config epoch specified: -3\r\n"
    );
    assert_eq!(
        err(&["CLUSTER", "COUNTKEYSINSLOT", "x"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        parse(&["CLUSTER", "FAILOVER", "takeover"]).unwrap(),
        ClusterCommand::Failover(FailoverMode::Takeover)
    );
    assert_eq!(
        parse(&["CLUSTER", "RESET", "HARD"]).unwrap(),
        ClusterCommand::Reset { hard: true }
    );
    assert_eq!(parse(&["CLUSTER", "HELP"]).unwrap(), ClusterCommand::Help);
    assert_eq!(
        CLUSTER_HELP.first(),
        Some(&"CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")
    );
    assert_eq!(CLUSTER_HELP.last(), Some(&"    Print this help."));
    assert!(matches!(
        parse(&["CLUSTER", "SLAVES", "x"]).unwrap(),
        ClusterCommand::Replicas(_)
    ));
}

#[test]
fn range_errors_come_after_earlier_pairs() {
    let ClusterCommand::AddSlotsRange(a) =
        parse(&["CLUSTER", "ADDSLOTSRANGE", "0", "5", "9", "3"]).unwrap()
    else {
        panic!()
    };
    assert_eq!(
        a.ranges,
        vec![(Slot::new(0).unwrap(), Slot::new(5).unwrap())]
    );
    assert_eq!(
        String::from_utf8(a.error.unwrap().to_resp()).unwrap(),
        "-ERR start slot number 9 is greater than end slot number 3\r\n"
    );
}

#[test]
fn setslot_trailing_arguments_are_the_action_error() {
    // Redis 7 checks exact argument counts; the text is the captured one
    // (vectors redis-7.0/text/errors.txt, setslot-bad-action).
    let msg = "-ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP";
    let captured =
        String::from_utf8_lossy(&ferrocluster_testvectors::read("redis-7.0/text/errors.txt"))
            .into_owned();
    assert!(
        captured.contains(msg),
        "capture lacks the SETSLOT action text"
    );
    let text = format!("{msg}\r\n");
    for args in [
        &["CLUSTER", "SETSLOT", "5", "STABLE", "extra"][..],
        &["CLUSTER", "SETSLOT", "5", "NODE", "abc", "extra"],
        &["CLUSTER", "SETSLOT", "5", "MIGRATING", "abc", "extra"],
        &["CLUSTER", "SETSLOT", "5", "IMPORTING", "abc", "foo", "bar"],
        &["CLUSTER", "SETSLOT", "5", "STABLE", "TIMEOUT", "5", "extra"],
    ] {
        match parse(args).unwrap() {
            ClusterCommand::SetSlot(Err(e)) => {
                assert_eq!(e, ClusterError::SetSlotAction, "{args:?}");
                assert_eq!(String::from_utf8(e.to_resp()).unwrap(), text, "{args:?}");
            }
            other => panic!("{args:?}: {other:?}"),
        }
    }
}

#[test]
fn setslot_timeout_rules() {
    let get = |args: &[&str]| match parse(args).unwrap() {
        ClusterCommand::SetSlot(Ok(s)) => s.timeout,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        get(&["CLUSTER", "SETSLOT", "1", "STABLE"])
            .unwrap()
            .deadline_ms(100),
        Ok(Some(2100))
    );
    assert_eq!(
        get(&["CLUSTER", "SETSLOT", "1", "STABLE", "TIMEOUT", "0"])
            .unwrap()
            .deadline_ms(100),
        Ok(None)
    );
    assert_eq!(
        get(&["CLUSTER", "SETSLOT", "1", "NODE", "x", "TIMEOUT", "7"])
            .unwrap()
            .given_ms(),
        Some(7)
    );
    assert_eq!(
        get(&["CLUSTER", "SETSLOT", "1", "STABLE", "TIMEOUT"]),
        Err(ClusterError::MissingTimeout)
    );
    assert_eq!(
        get(&["CLUSTER", "SETSLOT", "1", "STABLE", "TIMEOUT", "-5"]),
        Err(ClusterError::TimeoutNegative)
    );
    assert_eq!(
        get(&["CLUSTER", "SETSLOT", "1", "NODE", "x", "TIMEOUT", "y"]),
        Err(ClusterError::TimeoutNotInteger)
    );
    let t = get(&[
        "CLUSTER",
        "SETSLOT",
        "1",
        "STABLE",
        "TIMEOUT",
        "9223372036854775807",
    ])
    .unwrap();
    assert_eq!(t.deadline_ms(1), Err(ClusterError::TimeoutOutOfRange));
}

#[test]
fn slot_stats_parse() {
    let on = ParseOptions {
        slot_stats_enabled: true,
    };
    let p = |a: &[&str], o| parse_cluster(a, o);
    assert_eq!(
        p(
            &[
                "CLUSTER",
                "SLOT-STATS",
                "ORDERBY",
                "KEY-COUNT",
                "LIMIT",
                "10",
                "ASC"
            ],
            ParseOptions::default()
        )
        .unwrap(),
        ClusterCommand::SlotStats(SlotStatsQuery::OrderBy {
            metric: SlotStatsMetric::KeyCount,
            limit: 10,
            descending: false
        })
    );
    assert_eq!(
        p(
            &["CLUSTER", "SLOT-STATS", "ORDERBY", "cpu-usec"],
            ParseOptions::default()
        ),
        Err(ClusterError::UnrecognizedSortMetric)
    );
    assert!(p(&["CLUSTER", "SLOT-STATS", "ORDERBY", "cpu-usec"], on).is_ok());
    assert_eq!(
        p(
            &[
                "CLUSTER",
                "SLOT-STATS",
                "ORDERBY",
                "key-count",
                "LIMIT",
                "0"
            ],
            on
        ),
        Err(ClusterError::InvalidLimit)
    );
    assert_eq!(
        p(
            &[
                "CLUSTER",
                "SLOT-STATS",
                "ORDERBY",
                "key-count",
                "ASC",
                "DESC"
            ],
            on
        ),
        Err(ClusterError::MultipleFilters)
    );
    assert_eq!(
        p(&["CLUSTER", "SLOT-STATS", "SLOTSRANGE", "9", "3"], on),
        Err(ClusterError::StatsStartAfterEnd {
            start: Slot::new(9).unwrap(),
            end: Slot::new(3).unwrap()
        })
    );
    assert_eq!(
        String::from_utf8(p(&["CLUSTER", "SLOT-STATS", "BOGUS", "1"], on).unwrap_err().to_resp()).unwrap(),
        "-ERR unknown subcommand or wrong number of arguments for 'SLOT-STATS'. Try CLUSTER HELP.\r\n"
    );
}

#[test]
fn error_lines_never_carry_newlines() {
    let e = ClusterError::UnknownNode(bytes::Bytes::from_static(b"a\r\nb\0c"));
    assert_eq!(e.to_resp(), b"-ERR Unknown node a  b\r\n");
}

fn arb_argv() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let word = prop_oneof![
        Just(b"GET".to_vec()),
        Just(b"MGET".to_vec()),
        Just(b"EXEC".to_vec()),
        Just(b"MULTI".to_vec()),
        Just(b"ASKING".to_vec()),
        Just(b"READONLY".to_vec()),
        Just(b"EVAL".to_vec()),
        Just(b"MIGRATE".to_vec()),
        Just(b"KEYS".to_vec()),
        Just(b"CLUSTER".to_vec()),
        Just(b"SETSLOT".to_vec()),
        Just(b"COPY".to_vec()),
        Just(b"DB".to_vec()),
        Just(b"SELECT".to_vec()),
        Just(b"MSET".to_vec()),
        Just(b"SPUBLISH".to_vec()),
        Just(b"1".to_vec()),
        Just(b"-1".to_vec()),
        Just(b"{m}a".to_vec()),
        Just(Vec::new()),
        proptest::collection::vec(any::<u8>(), 0..12),
    ];
    proptest::collection::vec(word, 0..9)
}

proptest! {
    #[test]
    fn route_and_parse_never_panic(cmds in proptest::collection::vec(arb_argv(), 1..6), ok in any::<bool>(), primary in any::<bool>()) {
        let mut t = cluster(primary);
        let s = key_hash_slot(b"{m}a");
        t.set_migrating(s, Some(id(1))).unwrap();
        t.set_importing(Slot::new(5).unwrap(), Some(id(1))).unwrap();
        let mut cx = ctx(&t);
        cx.state_ok = ok;
        let have = |_db: usize, k: &[u8]| k.len().is_multiple_of(2);
        let mut c = ClientState::new(false, false);
        for argv in &cmds {
            let _ = c.handle_command(argv, &cx, &have);
            if let Some(spec) = lookup(argv.first().map(|v| v.as_slice()).unwrap_or(b"")) {
                let _ = route(spec, argv, &c, &cx, &have);
                let _ = spec.key_positions(argv).count();
            }
            let _ = parse_cluster(argv, ParseOptions { slot_stats_enabled: ok });
        }
    }

    #[test]
    fn asking_is_consumed_by_exactly_one_command(cmds in proptest::collection::vec(arb_argv(), 1..5)) {
        let t = cluster(true);
        let cx = ctx(&t);
        for argv in cmds {
            let mut c = ClientState::new(false, false);
            prop_assert_eq!(c.handle_command(&["ASKING"], &cx, &NoKeys), Dispatch::Ok);
            prop_assert!(c.asking());
            let is_asking = argv.first().is_some_and(|a| a.eq_ignore_ascii_case(b"ASKING"));
            let _ = c.handle_command(&argv, &cx, &NoKeys);
            if c.in_multi() {
                // Inside MULTI the flag lasts until EXEC/DISCARD.
                prop_assert!(c.asking());
                let _ = c.handle_command(&["DISCARD"], &cx, &NoKeys);
                prop_assert!(!c.asking());
            } else if is_asking {
                prop_assert!(c.asking());
            } else {
                prop_assert!(!c.asking());
            }
        }
    }
}

/// Valkey `clusterRedirectBlockedClientIfNeeded`: a client blocked on `foo` (slot 12182).
#[test]
fn blocked_clients_follow_their_slot() {
    let foo = Slot::new(12182).unwrap();
    let bar = key_hash_slot(b"bar");
    let c = ClientState::new(false, false);
    let t = cluster(true);
    let text = |e: Option<RouteError>| e.map(|e| String::from_utf8(e.to_resp()).unwrap());
    // Myself owns bar's slot: it stays blocked.
    assert_eq!(text(blocked_redirect(&ctx(&t), &c, bar)), None);
    // Another node owns foo's slot: MOVED.
    assert_eq!(
        text(blocked_redirect(&ctx(&t), &c, foo)),
        Some("-MOVED 12182 127.0.0.1:7001\r\n".into())
    );
    // ... unless it is being imported here.
    let mut imp = cluster(true);
    imp.set_importing(foo, Some(id(1))).unwrap();
    assert_eq!(text(blocked_redirect(&ctx(&imp), &c, foo)), None);
    // A slot this node is migrating away keeps its clients (no ASK, no TRYAGAIN).
    let mut mig = cluster(true);
    mig.set_migrating(bar, Some(id(1))).unwrap();
    assert_eq!(text(blocked_redirect(&ctx(&mig), &c, bar)), None);
    // No owner, or the cluster down.
    let mut none = cluster(true);
    none.set_slot_owner(bar, None).unwrap();
    assert_eq!(
        text(blocked_redirect(&ctx(&none), &c, bar)),
        Some("-CLUSTERDOWN Hash slot not served\r\n".into())
    );
    let mut down = ctx(&t);
    down.state_ok = false;
    assert_eq!(
        text(blocked_redirect(&down, &c, bar)),
        Some("-CLUSTERDOWN The cluster is down\r\n".into())
    );
    // A replica of foo's owner still redirects a blocked (write) client to the owner, READONLY
    // or not.
    let mut rep = cluster(false);
    rep.set_primary(&id(0), id(1)).unwrap();
    let ro = {
        let mut c = ClientState::new(false, false);
        let _ = c.handle_command(&["READONLY"], &ctx(&rep), &NoKeys);
        c
    };
    assert_eq!(
        text(blocked_redirect(&ctx(&rep), &ro, foo)),
        Some("-MOVED 12182 127.0.0.1:7001\r\n".into())
    );
}

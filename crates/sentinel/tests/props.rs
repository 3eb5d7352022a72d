//! Property tests: arbitrary host event sequences never panic and keep the host contract.

use std::collections::BTreeSet;

use ferrocluster_sentinel::{Addr, Config, ConnId, Output, ReconnectCause, Resolver, Value, Want};
use proptest::prelude::*;

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Nil),
        any::<i64>().prop_map(Value::Int),
        "[a-z0-9.: ]{0,12}".prop_map(Value::bulk),
        Just(Value::bulk("master")),
        Just(Value::bulk("slave")),
        Just(Value::bulk("127.0.0.1")),
        Just(Value::bulk("6379")),
        Just(Value::bulk("message")),
        Just(Value::bulk("+switch-master")),
        Just(Value::bulk("mymaster 127.0.0.1 1 127.0.0.1 2")),
        Just(Value::bulk("subscribe")),
        Just(Value::Error("ERR x".into())),
    ];
    leaf.prop_recursive(3, 24, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((inner.clone(), inner), 0..3).prop_map(Value::Map),
        ]
    })
}

#[derive(Debug, Clone)]
enum Ev {
    Connected(usize),
    Failed(usize),
    Closed(usize),
    Reply(usize, Value),
    Timeout(u64),
    Reconnect,
    Backwards(u64),
}

fn event() -> impl Strategy<Value = Ev> {
    prop_oneof![
        3 => (0usize..8).prop_map(Ev::Connected),
        1 => (0usize..8).prop_map(Ev::Failed),
        1 => (0usize..8).prop_map(Ev::Closed),
        4 => ((0usize..8), value()).prop_map(|(i, v)| Ev::Reply(i, v)),
        3 => (0u64..600).prop_map(Ev::Timeout),
        1 => Just(Ev::Reconnect),
        1 => (0u64..1000).prop_map(Ev::Backwards),
    ]
}

proptest! {
    #[test]
    fn random_sequences_keep_the_contract(
        want in prop_oneof![Just(Want::Primary), Just(Want::Replicas)],
        refresh in any::<bool>(),
        follow in any::<bool>(),
        events in prop::collection::vec(event(), 0..80),
    ) {
        let mut cfg = Config::new(
            "mymaster",
            want,
            vec![Addr::new("127.0.0.1", 1), Addr::new("127.0.0.1", 2)],
        );
        cfg.refresh_sentinels = refresh;
        cfg.follow_switch_master = follow;
        cfg.recheck_interval_ms = Some(500);
        let mut now = 10_000u64;
        let mut r = Resolver::new(cfg, now).unwrap();
        let mut open: Vec<ConnId> = Vec::new(); // asked for, not closed
        let mut connected: BTreeSet<ConnId> = BTreeSet::new();
        let check = |r: &mut Resolver, open: &mut Vec<ConnId>, connected: &mut BTreeSet<ConnId>| {
            while let Some(o) = r.poll_output() {
                match o {
                    Output::Connect { conn, .. } => {
                        prop_assert!(!open.contains(&conn), "id reused");
                        open.push(conn);
                    }
                    Output::Send { conn, argv } => {
                        prop_assert!(connected.contains(&conn), "send before connected");
                        prop_assert!(!argv.is_empty());
                    }
                    Output::Close { conn } => {
                        prop_assert!(open.contains(&conn), "close of unknown conn");
                        open.retain(|c| *c != conn);
                        connected.remove(&conn);
                    }
                    Output::Resolved { resolution, .. } => {
                        prop_assert!(!resolution.addrs.is_empty());
                    }
                    Output::ClosePool { .. } | Output::Error(_) => {}
                }
            }
            Ok(())
        };
        check(&mut r, &mut open, &mut connected)?;
        for ev in events {
            let pick = |i: usize| open.get(i % open.len().max(1)).copied().unwrap_or(ConnId(999));
            match ev {
                Ev::Connected(i) => {
                    let c = pick(i);
                    if r.handle_connected(c, now).is_ok() {
                        connected.insert(c);
                    }
                }
                Ev::Failed(i) | Ev::Closed(i) => {
                    let c = pick(i);
                    let res = if matches!(ev, Ev::Failed(_)) {
                        r.handle_connect_failed(c, now)
                    } else {
                        r.handle_closed(c, now)
                    };
                    if res.is_ok() {
                        open.retain(|x| *x != c);
                        connected.remove(&c);
                    }
                }
                Ev::Reply(i, v) => {
                    let _ = r.handle_reply(pick(i), v, now);
                }
                Ev::Timeout(dt) => {
                    now += dt;
                    r.handle_timeout(now);
                }
                Ev::Reconnect => r.handle_reconnect(ReconnectCause::SocketError, now),
                Ev::Backwards(dt) => r.handle_timeout(now.saturating_sub(dt)),
            }
            check(&mut r, &mut open, &mut connected)?;
            // Liveness of the timer: something is always pending (recheck is set), and
            // after a timeout at `now` nothing is left due at or before `now`.
            r.handle_timeout(now);
            check(&mut r, &mut open, &mut connected)?;
            prop_assert!(r.poll_timeout().is_some_and(|t| t > now), "{:?}", r.poll_timeout());
        }
    }

    #[test]
    fn addr_text_round_trips(host in "[a-z0-9.:]{1,20}", port in any::<u16>()) {
        let a = Addr::new(host, port);
        prop_assert_eq!(a.to_string().parse::<Addr>(), Ok(a));
    }
}

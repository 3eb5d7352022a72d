//! Step-by-step tests of the Sentinel client spec through the public API, with scripted
//! replies and host time.

use ferrocluster_sentinel::{
    Addr, Config, ConnId, ConnPurpose, InputError, Output, ReconnectCause, ResolveError, Resolver,
    Value, Want,
};

fn s(n: u16) -> Addr {
    Addr::new("127.0.0.1", 26300 + n)
}
fn node(n: u16) -> Addr {
    Addr::new("10.0.0.1", 6300 + n)
}
fn bulk(x: &str) -> Value {
    Value::bulk(x)
}
fn argv(v: &[&str]) -> Vec<Vec<u8>> {
    v.iter().map(|p| p.as_bytes().to_vec()).collect()
}
fn addr_reply(a: &Addr) -> Value {
    Value::Array(vec![bulk(&a.host), bulk(&a.port.to_string())])
}
/// `ROLE` of a primary, as in the ROLE command documentation.
fn role_master() -> Value {
    Value::Array(vec![
        bulk("master"),
        Value::Int(3129659),
        Value::Array(vec![Value::Array(vec![
            bulk("127.0.0.1"),
            bulk("9001"),
            bulk("3129242"),
        ])]),
    ])
}
/// `ROLE` of a replica, as in the ROLE command documentation.
fn role_slave() -> Value {
    Value::Array(vec![
        bulk("slave"),
        bulk("127.0.0.1"),
        Value::Int(9000),
        bulk("connected"),
        Value::Int(3167038),
    ])
}

struct H {
    r: Resolver,
    now: u64,
}

impl H {
    fn new(cfg: Config) -> H {
        H {
            r: Resolver::new(cfg, 1000).unwrap(),
            now: 1000,
        }
    }
    fn primary(n: u16) -> H {
        H::new(Config::new(
            "mymaster",
            Want::Primary,
            (1..=n).map(s).collect(),
        ))
    }
    fn drain(&mut self) -> Vec<Output> {
        std::iter::from_fn(|| self.r.poll_output()).collect()
    }
    fn advance(&mut self, ms: u64) {
        self.now += ms;
    }
    fn fire(&mut self) -> Vec<Output> {
        self.r.handle_timeout(self.now);
        self.drain()
    }
    /// Drains and expects exactly one Connect, after any Close; returns its id.
    fn connect_to(&mut self, addr: &Addr) -> ConnId {
        let mut out = self.drain();
        out.retain(|o| !matches!(o, Output::Close { .. }));
        match out.as_slice() {
            [Output::Connect { conn, addr: a, .. }] if a == addr => *conn,
            _ => panic!("expected one Connect to {addr}, got {out:?}"),
        }
    }
    fn connected(&mut self, c: ConnId) -> Vec<Output> {
        self.r.handle_connected(c, self.now).unwrap();
        self.drain()
    }
    fn reply(&mut self, c: ConnId, v: Value) {
        self.r.handle_reply(c, v, self.now).unwrap();
    }
    /// Sentinel `addr` answers `v` to the step-2 question.
    fn sentinel_says(&mut self, addr: &Addr, v: Value) {
        let c = self.connect_to(addr);
        self.connected(c);
        self.reply(c, v);
    }
    /// Runs step 3 on `addr` with `role`; returns the outputs after the reply.
    fn role_is(&mut self, addr: &Addr, role: Value) -> Vec<Output> {
        let out = self.drain();
        let c = match out.as_slice() {
            [Output::Close { .. }, Output::Connect {
                conn,
                addr: a,
                purpose,
            }] if a == addr && *purpose == ConnPurpose::RoleCheck => *conn,
            _ => panic!("expected Close of the Sentinel and Connect to {addr}: {out:?}"),
        };
        assert_eq!(
            self.connected(c),
            vec![Output::Send {
                conn: c,
                argv: argv(&["ROLE"])
            }]
        );
        self.reply(c, role);
        self.drain()
    }
}

fn resolved(out: &[Output]) -> Vec<(Vec<Addr>, bool)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Resolved {
                resolution,
                changed,
            } => Some((resolution.addrs.clone(), *changed)),
            _ => None,
        })
        .collect()
}
fn errors(out: &[Output]) -> Vec<ResolveError> {
    out.iter()
        .filter_map(|o| match o {
            Output::Error(e) => Some(e.clone()),
            _ => None,
        })
        .collect()
}

// ----- step 1 --------------------------------------------------------------------------

#[test]
fn step1_starts_with_the_first_sentinel() {
    let mut h = H::primary(3);
    let out = h.drain();
    assert!(matches!(
        out.as_slice(),
        [Output::Connect { addr, purpose: ConnPurpose::Sentinel, .. }] if *addr == s(1)
    ));
    // The default budget per Sentinel is "a few hundred ms": 300.
    assert_eq!(h.r.poll_timeout(), Some(1300));
}

#[test]
fn step1_timeout_moves_to_the_next_sentinel() {
    let mut h = H::primary(3);
    let c1 = h.connect_to(&s(1));
    h.advance(299);
    assert!(h.fire().is_empty(), "not yet");
    h.advance(1);
    let out = h.fire();
    assert_eq!(out[0], Output::Close { conn: c1 });
    assert!(matches!(&out[1], Output::Connect { addr, .. } if *addr == s(2)));
    assert_eq!(out.len(), 2);
}

#[test]
fn step1_answer_timeout_after_connect_also_moves_on() {
    let mut h = H::primary(2);
    let c1 = h.connect_to(&s(1));
    h.advance(100);
    h.connected(c1);
    h.advance(200);
    let out = h.fire();
    assert_eq!(out[0], Output::Close { conn: c1 });
    assert!(matches!(&out[1], Output::Connect { addr, .. } if *addr == s(2)));
}

#[test]
fn step1_connect_error_moves_to_the_next_sentinel() {
    let mut h = H::primary(3);
    let c1 = h.connect_to(&s(1));
    h.r.handle_connect_failed(c1, h.now).unwrap();
    let c2 = h.connect_to(&s(2));
    h.connected(c2);
    h.r.handle_closed(c2, h.now).unwrap();
    h.connect_to(&s(3));
}

#[test]
fn step1_first_answering_sentinel_moves_to_the_front() {
    let mut h = H::primary(3);
    let c1 = h.connect_to(&s(1));
    h.r.handle_connect_failed(c1, h.now).unwrap();
    h.sentinel_says(&s(2), addr_reply(&node(1)));
    assert_eq!(h.r.sentinels(), &[s(2), s(1), s(3)]);
    let out = h.role_is(&node(1), role_master());
    assert_eq!(resolved(&out), vec![(vec![node(1)], true)]);
    // The next resolution starts with the Sentinel that answered.
    h.r.handle_reconnect(ReconnectCause::SocketError, h.now);
    h.connect_to(&s(2));
}

// ----- step 2 --------------------------------------------------------------------------

#[test]
fn step2_asks_get_master_addr_by_name() {
    let mut h = H::primary(1);
    let c = h.connect_to(&s(1));
    assert_eq!(
        h.connected(c),
        vec![Output::Send {
            conn: c,
            argv: argv(&["SENTINEL", "get-master-addr-by-name", "mymaster"])
        }]
    );
}

#[test]
fn step2_null_reply_tries_the_next_sentinel() {
    let mut h = H::primary(2);
    let c1 = h.connect_to(&s(1));
    h.connected(c1);
    h.reply(c1, Value::Nil);
    let out = h.drain();
    assert_eq!(out[0], Output::Close { conn: c1 });
    assert!(matches!(&out[1], Output::Connect { addr, .. } if *addr == s(2)));
    // A null answer does not promote the Sentinel.
    assert_eq!(h.r.sentinels(), &[s(1), s(2)]);
}

#[test]
fn step2_error_reply_tries_the_next_sentinel() {
    let mut h = H::primary(2);
    h.sentinel_says(
        &s(1),
        Value::Error("NOAUTH Authentication required.".into()),
    );
    let out = h.drain();
    assert!(matches!(&out[1], Output::Connect { addr, .. } if *addr == s(2)));
}

#[test]
fn step2_replicas_asks_sentinel_replicas_and_skips_down_entries() {
    let mut h = H::new(Config::new("mymaster", Want::Replicas, vec![s(1)]));
    let c = h.connect_to(&s(1));
    assert_eq!(
        h.connected(c),
        vec![Output::Send {
            conn: c,
            argv: argv(&["SENTINEL", "replicas", "mymaster"])
        }]
    );
    let entry = |a: &Addr, flags: &str| {
        Value::Array(vec![
            bulk("name"),
            bulk(&a.to_string()),
            bulk("ip"),
            bulk(&a.host),
            bulk("port"),
            bulk(&a.port.to_string()),
            bulk("flags"),
            bulk(flags),
        ])
    };
    h.reply(
        c,
        Value::Array(vec![
            entry(&node(2), "slave"),
            entry(&node(3), "s_down,slave,disconnected"),
            entry(&node(4), "slave"),
        ]),
    );
    let out = h.drain();
    assert_eq!(out[0], Output::Close { conn: c });
    let checks: Vec<(ConnId, Addr)> = out[1..]
        .iter()
        .map(|o| match o {
            Output::Connect { conn, addr, .. } => (*conn, addr.clone()),
            o => panic!("{o:?}"),
        })
        .collect();
    assert_eq!(
        checks.iter().map(|c| c.1.clone()).collect::<Vec<_>>(),
        vec![node(2), node(4)]
    );
    // node(2) is a replica; node(4) turns out to be a primary: only node(2) is reported.
    h.connected(checks[0].0);
    h.connected(checks[1].0);
    h.reply(checks[0].0, role_slave());
    assert!(resolved(&h.drain()).is_empty(), "waits for every check");
    h.reply(checks[1].0, role_master());
    assert_eq!(resolved(&h.drain()), vec![(vec![node(2)], true)]);
}

#[test]
fn step2_replicas_unknown_name_is_an_unknown_service() {
    let mut h = H::new(Config::new("nosuch", Want::Replicas, vec![s(1)]));
    // Real Sentinel answers SENTINEL replicas for an unknown name with this error.
    h.sentinel_says(
        &s(1),
        Value::Error("ERR No such master with that name".into()),
    );
    assert_eq!(
        errors(&h.drain()),
        vec![ResolveError::UnknownService {
            name: "nosuch".into(),
            null_answers: 1,
            unreachable: 0
        }]
    );
}

// ----- step 3 --------------------------------------------------------------------------

#[test]
fn step3_role_master_resolves() {
    let mut h = H::primary(1);
    h.sentinel_says(&s(1), addr_reply(&node(1)));
    let out = h.role_is(&node(1), role_master());
    assert!(matches!(out[0], Output::Close { .. }));
    match &out[1] {
        Output::Resolved {
            resolution,
            changed: true,
        } => {
            assert_eq!(resolution.addrs, vec![node(1)]);
            assert_eq!(resolution.via, s(1));
            assert_eq!(resolution.want, Want::Primary);
        }
        o => panic!("{o:?}"),
    }
    assert!(!h.r.is_resolving());
    assert_eq!(h.r.poll_timeout(), None, "one-shot: nothing left to time");
}

#[test]
fn step3_wrong_role_waits_then_starts_again_at_step1() {
    let mut h = H::primary(2);
    h.sentinel_says(&s(1), addr_reply(&node(1)));
    let out = h.role_is(&node(1), role_slave());
    assert!(resolved(&out).is_empty() && errors(&out).is_empty());
    // Default wait "a few hundred ms": 250.
    assert_eq!(h.r.poll_timeout(), Some(h.now + 250));
    h.advance(249);
    assert!(h.fire().is_empty());
    h.advance(1);
    let out = h.fire();
    // Step 1 again, from the front of the list (s1 answered, so it is first).
    assert!(matches!(out.as_slice(), [Output::Connect { addr, .. }] if *addr == s(1)));
}

#[test]
fn step3_falls_back_to_info_replication() {
    let mut h = H::primary(1);
    h.sentinel_says(&s(1), addr_reply(&node(1)));
    let out = h.drain();
    let c = match &out[1] {
        Output::Connect { conn, .. } => *conn,
        o => panic!("{o:?}"),
    };
    h.connected(c);
    h.reply(c, Value::Error("ERR unknown command 'ROLE'".into()));
    assert_eq!(
        h.drain(),
        vec![Output::Send {
            conn: c,
            argv: argv(&["INFO", "replication"])
        }]
    );
    h.reply(
        c,
        bulk("# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_repl_offset:0\r\n"),
    );
    assert_eq!(resolved(&h.drain()), vec![(vec![node(1)], true)]);
}

#[test]
fn step3_info_fallback_with_replica_role_retries() {
    let mut h = H::primary(1);
    h.sentinel_says(&s(1), addr_reply(&node(1)));
    let out = h.drain();
    let Output::Connect { conn: c, .. } = out[1] else {
        panic!("{out:?}")
    };
    h.connected(c);
    h.reply(c, Value::Error("NOPERM".into()));
    h.drain();
    h.reply(
        c,
        bulk("# Replication\r\nrole:slave\r\nmaster_host:10.0.0.2\r\n"),
    );
    let out = h.drain();
    assert!(resolved(&out).is_empty());
    assert_eq!(h.r.poll_timeout(), Some(h.now + 250));
}

#[test]
fn step3_unreachable_address_waits_and_retries() {
    let mut h = H::primary(1);
    h.sentinel_says(&s(1), addr_reply(&node(1)));
    let out = h.drain();
    let Output::Connect { conn: c, .. } = out[1] else {
        panic!("{out:?}")
    };
    h.r.handle_connect_failed(c, h.now).unwrap();
    assert!(h.drain().is_empty());
    assert_eq!(h.r.poll_timeout(), Some(h.now + 250));
}

#[test]
fn step3_role_timeout_waits_and_retries() {
    let mut h = H::primary(1);
    h.sentinel_says(&s(1), addr_reply(&node(1)));
    let out = h.drain();
    let Output::Connect { conn: c, .. } = out[1] else {
        panic!("{out:?}")
    };
    h.connected(c);
    h.advance(300);
    assert_eq!(h.fire(), vec![Output::Close { conn: c }]);
    assert_eq!(h.r.poll_timeout(), Some(h.now + 250));
}

#[test]
fn step3_never_confirmed_ends_in_not_confirmed_error() {
    let mut cfg = Config::new("mymaster", Want::Primary, vec![s(1)]);
    cfg.resolve_timeout_ms = 1000;
    let mut h = H::new(cfg);
    let mut rounds = 0;
    loop {
        h.sentinel_says(&s(1), addr_reply(&node(1)));
        let out = h.role_is(&node(1), role_slave());
        rounds += 1;
        if let [e] = errors(&out).as_slice() {
            match e {
                ResolveError::NotConfirmed {
                    want: Want::Primary,
                    last_seen,
                    ..
                } => assert!(last_seen.contains("Replica"), "{last_seen}"),
                e => panic!("{e:?}"),
            }
            break;
        }
        assert!(rounds < 10);
        h.advance(250);
        h.r.handle_timeout(h.now);
    }
    // Rounds start at 0, 250, 500, 750; the wait after the 4th would end at 1000.
    assert_eq!(rounds, 4);
}

// ----- errors --------------------------------------------------------------------------

#[test]
fn error_no_sentinel_could_be_reached() {
    let mut h = H::primary(3);
    for n in 1..=3 {
        let c = h.connect_to(&s(n));
        if n == 2 {
            h.advance(300);
            h.r.handle_timeout(h.now);
            let out = h.r.poll_output();
            assert_eq!(out, Some(Output::Close { conn: c }));
        } else {
            h.r.handle_connect_failed(c, h.now).unwrap();
        }
    }
    let out = h.drain();
    assert_eq!(
        errors(&out),
        vec![ResolveError::NoSentinelReachable { tried: 3 }]
    );
    assert_eq!(
        errors(&out)[0].to_string(),
        "no Sentinel could be reached (3 tried)"
    );
}

#[test]
fn error_no_sentinel_knows_the_service() {
    // s1 null, s2 unreachable, s3 null: every answer was null.
    let mut h2 = H::primary(3);
    h2.sentinel_says(&s(1), Value::Nil);
    let out = h2.drain();
    let Output::Connect { conn, .. } = out[1] else {
        panic!()
    };
    h2.r.handle_connect_failed(conn, h2.now).unwrap();
    h2.sentinel_says(&s(3), Value::Nil);
    let err = errors(&h2.drain());
    assert_eq!(
        err,
        vec![ResolveError::UnknownService {
            name: "mymaster".into(),
            null_answers: 2,
            unreachable: 1
        }]
    );
    assert!(err[0]
        .to_string()
        .starts_with("no Sentinel knows the service mymaster"));
}

#[test]
fn error_answers_that_are_errors_are_neither_kind() {
    let mut h = H::primary(2);
    h.sentinel_says(&s(1), Value::Nil);
    h.sentinel_says(
        &s(2),
        Value::Error("NOAUTH Authentication required.".into()),
    );
    assert_eq!(
        errors(&h.drain()),
        vec![ResolveError::SentinelErrors {
            last_error: "NOAUTH Authentication required.".into(),
            null_answers: 1
        }]
    );
}

// ----- reconnects and pools --------------------------------------------------------------

fn resolve_once(h: &mut H, sentinel: &Addr, primary: &Addr) -> Vec<Output> {
    h.sentinel_says(sentinel, addr_reply(primary));
    h.role_is(primary, role_master())
}

#[test]
fn reconnect_reverifies_from_step1_and_closes_the_old_pool() {
    let mut h = H::primary(2);
    assert_eq!(
        resolved(&resolve_once(&mut h, &s(1), &node(1))),
        vec![(vec![node(1)], true)]
    );
    for cause in [
        ReconnectCause::Timeout,
        ReconnectCause::SocketError,
        ReconnectCause::ClosedByClient,
    ] {
        h.advance(10);
        h.r.handle_reconnect(cause, h.now);
        let out = resolve_once(&mut h, &s(1), &node(1));
        assert_eq!(resolved(&out), vec![(vec![node(1)], false)], "{cause:?}");
        assert!(!out.iter().any(|o| matches!(o, Output::ClosePool { .. })));
    }
    // The server closed the connection (failover): Sentinel now names node(2).
    h.r.handle_reconnect(ReconnectCause::ClosedByServer, h.now);
    let out = resolve_once(&mut h, &s(1), &node(2));
    let tail: Vec<&Output> = out
        .iter()
        .skip_while(|o| matches!(o, Output::Close { .. }))
        .collect();
    assert_eq!(*tail[0], Output::ClosePool { addr: node(1) });
    assert!(matches!(tail[1], Output::Resolved { changed: true, .. }));
    assert_eq!(h.r.current().unwrap().addrs, vec![node(2)]);
}

#[test]
fn reconnect_during_a_resolution_abandons_it() {
    let mut h = H::primary(2);
    h.sentinel_says(&s(1), addr_reply(&node(1)));
    let out = h.drain();
    let Output::Connect { conn: check, .. } = out[1] else {
        panic!()
    };
    h.r.handle_reconnect(ReconnectCause::SocketError, h.now);
    let out = h.drain();
    assert_eq!(out[0], Output::Close { conn: check });
    assert!(matches!(&out[1], Output::Connect { addr, .. } if *addr == s(1)));
    // Late events on the abandoned connection are refused and change nothing.
    assert_eq!(
        h.r.handle_reply(check, role_master(), h.now),
        Err(InputError::UnknownConn(check))
    );
    assert!(h.drain().is_empty());
}

#[test]
fn recheck_interval_starts_a_new_resolution() {
    let mut cfg = Config::new("mymaster", Want::Primary, vec![s(1)]);
    cfg.recheck_interval_ms = Some(1000);
    let mut h = H::new(cfg);
    resolve_once(&mut h, &s(1), &node(1));
    assert_eq!(h.r.poll_timeout(), Some(h.now + 1000));
    h.advance(1000);
    h.r.handle_timeout(h.now);
    h.connect_to(&s(1));
}

#[test]
fn error_then_recheck_retries() {
    let mut cfg = Config::new("mymaster", Want::Primary, vec![s(1)]);
    cfg.recheck_interval_ms = Some(500);
    let mut h = H::new(cfg);
    let c = h.connect_to(&s(1));
    h.r.handle_connect_failed(c, h.now).unwrap();
    assert_eq!(errors(&h.drain()).len(), 1);
    h.advance(500);
    h.r.handle_timeout(h.now);
    h.connect_to(&s(1));
}

// ----- Sentinel list refresh -------------------------------------------------------------

#[test]
fn refresh_appends_unknown_sentinels_at_the_end() {
    let mut cfg = Config::new("mymaster", Want::Primary, vec![s(1), s(2)]);
    cfg.refresh_sentinels = true;
    let mut h = H::new(cfg);
    let c1 = h.connect_to(&s(1));
    h.r.handle_connect_failed(c1, h.now).unwrap();
    let c = h.connect_to(&s(2));
    assert_eq!(
        h.connected(c),
        vec![
            Output::Send {
                conn: c,
                argv: argv(&["SENTINEL", "get-master-addr-by-name", "mymaster"])
            },
            Output::Send {
                conn: c,
                argv: argv(&["SENTINEL", "sentinels", "mymaster"])
            },
        ]
    );
    h.reply(c, addr_reply(&node(1)));
    // The Sentinel connection stays open for the second reply; step 3 starts at once.
    let out = h.drain();
    assert!(matches!(out.as_slice(), [Output::Connect { addr, .. }] if *addr == node(1)));
    let entry = |a: &Addr| {
        Value::Array(vec![
            bulk("name"),
            bulk("x"),
            bulk("ip"),
            bulk(&a.host),
            bulk("port"),
            bulk(&a.port.to_string()),
        ])
    };
    h.reply(
        c,
        Value::Array(vec![entry(&s(1)), entry(&s(7)), entry(&s(5))]),
    );
    assert_eq!(h.drain(), vec![Output::Close { conn: c }]);
    assert_eq!(h.r.sentinels(), &[s(2), s(1), s(7), s(5)]);
}

// ----- +switch-master --------------------------------------------------------------------

fn switch_msg(name: &str, old: &Addr, new: &Addr) -> Value {
    Value::Array(vec![
        bulk("message"),
        bulk("+switch-master"),
        bulk(&format!(
            "{name} {} {} {} {}",
            old.host, old.port, new.host, new.port
        )),
    ])
}

#[test]
fn switch_master_triggers_the_steps_without_replacing_them() {
    let mut cfg = Config::new("mymaster", Want::Primary, vec![s(1), s(2)]);
    cfg.follow_switch_master = true;
    let mut h = H::new(cfg);
    let out = resolve_once(&mut h, &s(1), &node(1));
    // After the first resolution: subscribe on the front Sentinel.
    let sub = match out.last() {
        Some(Output::Connect {
            conn,
            addr,
            purpose: ConnPurpose::Subscription,
        }) if *addr == s(1) => *conn,
        o => panic!("{o:?}"),
    };
    assert_eq!(
        h.connected(sub),
        vec![Output::Send {
            conn: sub,
            argv: argv(&["SUBSCRIBE", "+switch-master"])
        }]
    );
    h.reply(
        sub,
        Value::Array(vec![
            bulk("subscribe"),
            bulk("+switch-master"),
            Value::Int(1),
        ]),
    );
    assert!(h.r.is_subscribed());
    assert_eq!(
        h.r.poll_timeout(),
        None,
        "an acknowledged subscription has no deadline"
    );
    // Another service: ignored.
    h.reply(sub, switch_msg("other", &node(8), &node(9)));
    assert!(h.drain().is_empty());
    // Ours: start at step 1; the event's address is checked like any other.
    h.reply(sub, switch_msg("mymaster", &node(1), &node(2)));
    h.sentinel_says(&s(1), addr_reply(&node(2)));
    let out = h.role_is(&node(2), role_slave());
    assert!(
        resolved(&out).is_empty(),
        "ROLE must agree before anything is reported"
    );
}

#[test]
fn lost_subscription_is_retried_on_the_next_sentinel() {
    let mut cfg = Config::new("mymaster", Want::Primary, vec![s(1), s(2)]);
    cfg.follow_switch_master = true;
    let mut h = H::new(cfg);
    let out = resolve_once(&mut h, &s(1), &node(1));
    let Some(Output::Connect { conn: sub, .. }) = out.last().cloned() else {
        panic!()
    };
    h.r.handle_connect_failed(sub, h.now).unwrap();
    assert!(!h.r.is_subscribed());
    assert_eq!(h.r.poll_timeout(), Some(h.now + 1000));
    h.advance(1000);
    h.r.handle_timeout(h.now);
    let out = h.drain();
    assert!(matches!(
        out.as_slice(),
        [Output::Connect { addr, purpose: ConnPurpose::Subscription, .. }] if *addr == s(2)
    ));
}

// ----- time and host misuse --------------------------------------------------------------

#[test]
fn time_going_backwards_is_clamped() {
    let mut h = H::primary(2);
    let c = h.connect_to(&s(1));
    h.advance(200);
    h.r.handle_connected(c, h.now).unwrap();
    h.drain();
    // An older time changes nothing and fires nothing.
    h.r.handle_timeout(0);
    assert!(h.drain().is_empty());
    h.r.handle_reply(c, addr_reply(&node(1)), 5).unwrap();
    let out = h.drain();
    let Output::Connect { conn: check, .. } = out[1] else {
        panic!()
    };
    h.r.handle_connected(check, 3).unwrap();
    h.drain();
    h.r.handle_reply(check, role_master(), 1).unwrap();
    let out = h.drain();
    match &out[1] {
        // The latest time seen (1200) stands.
        Output::Resolved { resolution, .. } => assert_eq!(resolution.at_ms, 1200),
        o => panic!("{o:?}"),
    }
}

#[test]
fn host_misuse_is_a_typed_error_that_changes_nothing() {
    let mut h = H::primary(1);
    let c = h.connect_to(&s(1));
    let bogus = ConnId(999);
    assert_eq!(
        h.r.handle_connected(bogus, h.now),
        Err(InputError::UnknownConn(bogus))
    );
    assert_eq!(
        h.r.handle_closed(bogus, h.now),
        Err(InputError::UnknownConn(bogus))
    );
    assert_eq!(
        h.r.handle_reply(c, Value::Nil, h.now),
        Err(InputError::NotConnected(c))
    );
    h.connected(c);
    assert_eq!(
        h.r.handle_connected(c, h.now),
        Err(InputError::AlreadyConnected(c))
    );
    assert!(h.drain().is_empty());
    // The connection still works.
    h.reply(c, addr_reply(&node(1)));
    assert_eq!(h.drain().len(), 2);
}

#[test]
fn malformed_sentinel_reply_counts_as_an_error_answer() {
    let mut h = H::primary(1);
    h.sentinel_says(
        &s(1),
        Value::Array(vec![bulk("10.0.0.1"), bulk("notaport")]),
    );
    assert!(matches!(
        errors(&h.drain()).as_slice(),
        [ResolveError::SentinelErrors { .. }]
    ));
}

#[test]
fn unexpected_extra_reply_drops_the_connection() {
    let mut h = H::primary(2);
    h.sentinel_says(&s(1), addr_reply(&node(1)));
    let out = h.drain();
    let Output::Connect { conn: check, .. } = out[1] else {
        panic!()
    };
    h.connected(check);
    h.reply(check, role_master());
    h.drain();
    // The check connection is closed after its answer: more replies are refused.
    assert_eq!(
        h.r.handle_reply(check, Value::Nil, h.now),
        Err(InputError::UnknownConn(check))
    );
}

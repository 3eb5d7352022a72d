//! The replica side against a scripted primary: error replies, retries, the SYNC fallback,
//! malformed bytes.

use ferrocluster_dataplane::{
    Event, LinkDownReason, Millis, Output, ReplLink, Replication, ReplicationConfig, Role,
    StreamErrorKind, UpstreamId,
};

fn replica(cfg: ReplicationConfig) -> (Replication, UpstreamId) {
    let now = Millis(1_000);
    let role = Role::Replica {
        host: "10.0.0.1".into(),
        port: 6379,
    };
    let mut r = Replication::new(cfg, 5, role, None, now).unwrap();
    let mut outs = Vec::new();
    while let Some(o) = r.poll_output() {
        outs.push(o);
    }
    let Some(Output::Connect { link, host, port }) = outs.pop() else {
        panic!("a replica connects first")
    };
    assert_eq!((host.as_str(), port), ("10.0.0.1", 6379));
    r.handle_upstream_connected(link, now);
    (r, link)
}

fn drain(r: &mut Replication) -> Vec<Output> {
    let mut v = Vec::new();
    while let Some(o) = r.poll_output() {
        v.push(o);
    }
    v
}

fn sent(outs: &[Output]) -> String {
    outs.iter()
        .filter_map(|o| match o {
            Output::ToPrimary { bytes, .. } => Some(String::from_utf8_lossy(bytes).into_owned()),
            _ => None,
        })
        .collect()
}

/// PING, then (with masterauth/masteruser and replica-announce-ip) AUTH user pass, REPLCONF
/// listening-port, ip-address, capa eof capa psync2, in that order; PSYNC only after their
/// replies; errors to REPLCONF are not fatal; an AUTH error is.
#[test]
fn handshake_order_and_auth() {
    let cfg = ReplicationConfig {
        listening_port: 6380,
        announce_ip: Some("1.2.3.4".into()),
        primary_user: Some("u".into()),
        primary_auth: Some(b"pw".to_vec()),
        ..ReplicationConfig::default()
    };
    let (mut r, link) = replica(cfg.clone());
    let now = Millis(1_000);
    assert_eq!(sent(&drain(&mut r)), "*1\r\n$4\r\nPING\r\n");
    r.handle_upstream_bytes(link, b"-NOAUTH Authentication required.\r\n", now)
        .unwrap();
    assert_eq!(
        sent(&drain(&mut r)),
        "*3\r\n$4\r\nAUTH\r\n$1\r\nu\r\n$2\r\npw\r\n\
         *3\r\n$8\r\nREPLCONF\r\n$14\r\nlistening-port\r\n$4\r\n6380\r\n\
         *3\r\n$8\r\nREPLCONF\r\n$10\r\nip-address\r\n$7\r\n1.2.3.4\r\n\
         *5\r\n$8\r\nREPLCONF\r\n$4\r\ncapa\r\n$3\r\neof\r\n$4\r\ncapa\r\n$6\r\npsync2\r\n"
    );
    r.handle_upstream_bytes(link, b"+OK\r\n-ERR unknown\r\n+OK\r\n", now)
        .unwrap();
    assert_eq!(sent(&drain(&mut r)), "");
    r.handle_upstream_bytes(link, b"+OK\r\n", now).unwrap();
    assert_eq!(
        sent(&drain(&mut r)),
        "*3\r\n$5\r\nPSYNC\r\n$1\r\n?\r\n$2\r\n-1\r\n"
    );

    let (mut r, link) = replica(cfg);
    drain(&mut r);
    r.handle_upstream_bytes(link, b"+PONG\r\n", now).unwrap();
    drain(&mut r);
    let e = r
        .handle_upstream_bytes(link, b"-WRONGPASS invalid username-password pair\r\n", now)
        .unwrap_err();
    assert!(matches!(e.kind, StreamErrorKind::AuthRejected(_)));
    let outs = drain(&mut r);
    assert!(outs.contains(&Output::CloseUpstream { link }));
}

/// Answers PING and the two REPLCONFs; returns what the replica sent (its PSYNC).
fn to_psync(r: &mut Replication, link: UpstreamId, now: Millis) -> String {
    r.handle_upstream_bytes(link, b"+PONG\r\n+OK\r\n+OK\r\n", now)
        .unwrap();
    sent(&drain(r))
}

/// `-LOADING` / `-NOMASTERLINK` to PSYNC: the link closes and the next attempt comes at the
/// next cron (1 s), as Valkey's PSYNC_TRY_LATER.
#[test]
fn try_later_replies_retry_at_the_next_cron() {
    for reply in [
        &b"-LOADING Valkey is loading the dataset in memory\r\n"[..],
        b"-NOMASTERLINK Can't SYNC while not connected with my master\r\n",
    ] {
        let (mut r, link) = replica(ReplicationConfig::default());
        let now = Millis(1_000);
        drain(&mut r);
        to_psync(&mut r, link, now);
        assert!(r.handle_upstream_bytes(link, reply, now).is_err());
        let outs = drain(&mut r);
        assert!(outs.contains(&Output::CloseUpstream { link }));
        assert!(outs.iter().any(|o| matches!(
            o,
            Output::Event(Event::LinkDown(LinkDownReason::TryLater(_)))
        )));
        r.handle_timeout(Millis(1_500));
        assert!(!drain(&mut r)
            .iter()
            .any(|o| matches!(o, Output::Connect { .. })));
        r.handle_timeout(Millis(2_000));
        assert!(drain(&mut r)
            .iter()
            .any(|o| matches!(o, Output::Connect { .. })));
    }
}

/// A primary that does not know PSYNC (`-ERR unknown command`): SYNC, then a `$<len>` RDB and
/// the stream; no ACKs are sent to such a primary.
#[test]
fn sync_fallback() {
    let (mut r, link) = replica(ReplicationConfig::default());
    let now = Millis(1_000);
    drain(&mut r);
    to_psync(&mut r, link, now);
    r.handle_upstream_bytes(link, b"-ERR unknown command 'PSYNC'\r\n", now)
        .unwrap();
    assert_eq!(sent(&drain(&mut r)), "SYNC\r\n");
    r.handle_upstream_bytes(link, b"\n$3\r\nRDB*1\r\n$4\r\nPING\r\n", now)
        .unwrap();
    let outs = drain(&mut r);
    assert!(outs.contains(&Output::RdbChunk(b"RDB".to_vec())));
    assert!(outs.contains(&Output::RdbEnd));
    assert_eq!(sent(&outs), "", "no REPLCONF ACK to a pre-PSYNC primary");
    assert_eq!(r.offset(), 14);
    r.handle_timeout(Millis(3_000));
    assert_eq!(sent(&drain(&mut r)), "");
}

/// Malformed bytes in the stream: a typed error with the position, the link closed and
/// reopened at once, the history kept for a partial resync.
#[test]
fn malformed_stream_closes_and_resyncs() {
    let (mut r, link) = replica(ReplicationConfig::default());
    let now = Millis(1_000);
    drain(&mut r);
    to_psync(&mut r, link, now);
    let id = "a".repeat(40);
    let head = format!(
        "+FULLRESYNC {id} 100\r\n$EOF:{}\r\nRDB{}",
        "m".repeat(40),
        "m".repeat(40)
    );
    r.handle_upstream_bytes(link, head.as_bytes(), now).unwrap();
    r.handle_upstream_bytes(link, b"*1\r\n$4\r\nPING\r\n", now)
        .unwrap();
    assert_eq!(r.offset(), 114);
    drain(&mut r);
    let e = r
        .handle_upstream_bytes(link, b"*1\r\n$4\r\nPINGxx", now)
        .unwrap_err();
    assert_eq!(e.kind, StreamErrorKind::MissingCrlf);
    // PONG +OK +OK, the sync, one PING, then the missing CRLF after `PING`.
    assert_eq!(e.offset, 17 + head.len() as u64 + 14 + 12);
    let outs = drain(&mut r);
    assert!(outs.contains(&Output::CloseUpstream { link }));
    assert!(outs.iter().any(|o| matches!(o, Output::Connect { .. })));
    assert!(matches!(r.replication_state().link, ReplLink::DownSince(_)));
    let next = outs
        .iter()
        .find_map(|o| match o {
            Output::Connect { link, .. } => Some(*link),
            _ => None,
        })
        .unwrap();
    r.handle_upstream_connected(next, now);
    drain(&mut r);
    // The PSYNC asks for the byte after the last one processed.
    let psync = to_psync(&mut r, next, now);
    assert!(
        psync.ends_with(&format!(
            "*3\r\n$5\r\nPSYNC\r\n$40\r\n{id}\r\n$3\r\n115\r\n"
        )),
        "{psync}"
    );
    r.handle_upstream_bytes(next, format!("+CONTINUE {id}\r\n").as_bytes(), now)
        .unwrap();
    assert!(drain(&mut r).contains(&Output::Event(Event::LinkUp { partial: true })));
    assert!(matches!(r.replication_state().link, ReplLink::Up { .. }));
}

/// A replica restarted from its saved data before it knows its primary
/// ([`Role::ReplicaAwaitingPrimary`]; Valkey `loadDataFromDisk` in cluster mode, where the
/// node's role decides): it connects nowhere until told, then asks `PSYNC <saved replid>
/// <saved offset + 1>` (a partial resync), where a primary restarted with the same data asks
/// with a fresh replid (its saved history became its replid2).
#[test]
fn a_replica_awaiting_its_primary_resyncs_with_its_saved_history() {
    use ferrocluster_dataplane::{ReplId, Restored};
    let now = Millis(1_000);
    let saved = "0123456789abcdef0123456789abcdef01234567";
    let restored = || {
        Some(Restored {
            replid: ReplId::parse(saved.as_bytes()).unwrap(),
            offset: 1234,
            stream_db: 0,
        })
    };
    let psync_of = |role: Role| {
        let mut r =
            Replication::new(ReplicationConfig::default(), 5, role, restored(), now).unwrap();
        assert!(
            !drain(&mut r)
                .iter()
                .any(|o| matches!(o, Output::Connect { .. })),
            "connects before it is told whom to follow"
        );
        r.replicate_from("10.0.0.1", 6379, false, now);
        let Some(Output::Connect { link, .. }) = drain(&mut r)
            .into_iter()
            .find(|o| matches!(o, Output::Connect { .. }))
        else {
            panic!("replicate_from connects")
        };
        r.handle_upstream_connected(link, now);
        drain(&mut r);
        let sent = to_psync(&mut r, link, now);
        let at = sent.find("*3\r\n$5\r\nPSYNC").expect("a PSYNC");
        sent[at..].to_string()
    };
    assert_eq!(
        psync_of(Role::ReplicaAwaitingPrimary),
        format!("*3\r\n$5\r\nPSYNC\r\n$40\r\n{saved}\r\n$4\r\n1235\r\n")
    );
    let as_primary = psync_of(Role::Primary);
    assert!(!as_primary.contains(saved), "{as_primary}");
    assert!(as_primary.ends_with("$4\r\n1235\r\n"), "{as_primary}");
}

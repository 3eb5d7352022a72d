//! Legacy migration against the captures of `tests/vectors/migrate/` (valkey-server 9.1.2,
//! redis-server 7.0.15): RESTORE's replies to every case, the MIGRATE requests byte for byte
//! (standalone, AUTH/AUTH2, a cached connection, errors, and `redis-cli --cluster reshard`'s
//! pipelines), and the MIGRATE client's own state machine (retry, timeouts, the cache).

use ferrocluster_dataplane::legacy::{
    restore, MigrateArgs, MigrateAuth, MigrateClient, MigrateConfig, MigrateLink, MigrateOutput,
    Restore, RestoreError, CACHE_IDLE_MS, CACHE_ITEMS,
};
use ferrocluster_dataplane::resp::{command_bytes, CommandReader, Item, ReaderLimits};
use ferrocluster_dataplane::{ConnId, Millis, Reply};
use ferrocluster_rdb::{EncoderConfig, RdbObject, RdbVersion};
use serde_json::Value as Json;
use std::collections::BTreeSet;
use std::path::PathBuf;

fn vectors() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/migrate")
}

fn json(path: &str) -> Json {
    serde_json::from_slice(&std::fs::read(vectors().join(path)).unwrap()).unwrap()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn commands(bytes: &[u8]) -> Vec<Vec<Vec<u8>>> {
    let mut r = CommandReader::new(ReaderLimits::default());
    r.push(bytes);
    let mut out = Vec::new();
    while let Some(i) = r.next_item().unwrap() {
        if let Item::Command(c) = i {
            out.push(c.argv);
        }
    }
    out
}

/// Every RESTORE case sent to a real server: our verdict gives its reply byte for byte,
/// but where we are stricter on purpose (an object that ends early or reads into the
/// footer: `Bad data format`; the servers read the object from the whole payload).
#[test]
fn restore_replies_match_real_servers() {
    for flavor in ["valkey-9.1", "redis-7.0"] {
        let facts = json(&format!("restore-{flavor}.json"));
        let mut keys: BTreeSet<Vec<u8>> =
            [b"src".to_vec(), b"hsrc".to_vec(), b"exists".to_vec()].into();
        let now = 1_796_000_000_000i64;
        for case in facts["cases"].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let argv: Vec<Vec<u8>> = case["argv"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| unhex(a.as_str().unwrap()))
                .collect();
            let real = case["reply"].as_str().unwrap();
            let r = restore::<RdbObject, _>(&argv, |k| keys.contains(k), now, true);
            let ours = match &r {
                Ok(Restore::Store { key, .. }) => {
                    keys.insert(key.clone());
                    "+OK\r\n".to_owned()
                }
                Ok(Restore::Expired { key, replace }) => {
                    if *replace {
                        keys.remove(key);
                    }
                    "+OK\r\n".to_owned()
                }
                Err(e) => String::from_utf8(e.to_reply().to_resp2()).unwrap(),
            };
            if matches!(name, "object-into-footer" | "trailing-bytes") {
                assert_eq!(real, "+OK\r\n", "{flavor} {name}");
                assert!(
                    matches!(r, Err(RestoreError::BadData(_))),
                    "{flavor} {name}"
                );
                continue;
            }
            assert_eq!(ours, real, "{flavor} {name}");
        }
    }
}

/// What a restored value decodes to, and its expiry.
#[test]
fn restore_values_and_expiry() {
    let facts = json("restore-valkey-9.1.json");
    let payload = unhex(facts["payload"].as_str().unwrap());
    let now = 1_000_000i64;
    let argv = |ttl: &str, opts: &[&str]| {
        let mut a = vec![
            b"RESTORE".to_vec(),
            b"k".to_vec(),
            ttl.into(),
            payload.clone(),
        ];
        a.extend(opts.iter().map(|o| o.as_bytes().to_vec()));
        a
    };
    let r = restore::<RdbObject, _>(&argv("5000", &["IDLETIME", "7"]), |_| false, now, true);
    assert_eq!(
        r,
        Ok(Restore::Store {
            key: b"k".to_vec(),
            value: RdbObject::String(b"payload-source".to_vec()),
            expire_at_ms: Some(1_005_000),
            replace: false,
            idle_secs: Some(7),
            freq: None,
        })
    );
    let r = restore::<RdbObject, _>(
        &argv("2000000", &["ABSTTL", "FREQ", "255"]),
        |_| true,
        now,
        true,
    );
    assert_eq!(r, Err(RestoreError::BusyKey));
    let r = restore::<RdbObject, _>(&argv("999999", &["ABSTTL", "REPLACE"]), |_| true, now, true);
    assert_eq!(
        r,
        Ok(Restore::Expired {
            key: b"k".to_vec(),
            replace: true
        })
    );
    // A replica stores it as given.
    let r = restore::<RdbObject, _>(&argv("999999", &["ABSTTL"]), |_| false, now, false);
    assert!(matches!(
        r,
        Ok(Restore::Store {
            expire_at_ms: Some(999_999),
            ..
        })
    ));
    let asking = [b"RESTORE-ASKING".to_vec(), b"k".to_vec()];
    assert_eq!(
        restore::<RdbObject, _>(&asking, |_| false, now, true)
            .unwrap_err()
            .to_reply(),
        Reply::Error("ERR wrong number of arguments for 'restore-asking' command".into())
    );
}

#[test]
fn migrate_arguments() {
    let p = |a: &[&str]| MigrateArgs::parse(a);
    let ok = p(&[
        "MIGRATE", "h", "7000", "", "3", "0", "copy", "Replace", "AUTH2", "u", "pw", "KEYS", "a",
        "b",
    ])
    .unwrap();
    assert_eq!(
        ok,
        MigrateArgs {
            host: b"h".to_vec(),
            port: b"7000".to_vec(),
            db: 3,
            timeout_ms: 1000,
            copy: true,
            replace: true,
            auth: Some(MigrateAuth {
                user: Some(b"u".to_vec()),
                password: b"pw".to_vec()
            }),
            keys: vec![b"a".to_vec(), b"b".to_vec()],
        }
    );
    let e = |a: &[&str]| p(a).unwrap_err().to_reply();
    assert_eq!(
        e(&["MIGRATE", "h", "1", "k", "0"]),
        Reply::Error("ERR wrong number of arguments for 'migrate' command".into())
    );
    assert_eq!(
        e(&["MIGRATE", "h", "1", "k", "0", "10", "KEYS", "a"]),
        Reply::Error(
            "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string"
                .into()
        )
    );
    assert_eq!(
        e(&["MIGRATE", "h", "1", "k", "0", "10", "AUTH"]),
        Reply::Error("ERR syntax error".into())
    );
    assert_eq!(
        e(&["MIGRATE", "h", "1", "k", "0", "10", "AUTH2", "u"]),
        Reply::Error("ERR syntax error".into())
    );
    assert_eq!(
        e(&["MIGRATE", "h", "1", "k", "0", "10", "BOGUS"]),
        Reply::Error("ERR syntax error".into())
    );
    // Options are checked before the numbers.
    assert_eq!(
        e(&["MIGRATE", "h", "1", "k", "x", "y", "BOGUS"]),
        Reply::Error("ERR syntax error".into())
    );
    assert_eq!(
        e(&["MIGRATE", "h", "1", "k", "x", "10"]),
        Reply::Error("ERR value is not an integer or out of range".into())
    );
    assert_eq!(
        p(&["MIGRATE", "h", "1", "k", "0", "-5"])
            .unwrap()
            .timeout_ms,
        1000
    );
}

/// A key of the capture's source, rebuilt from its facts.
fn object(v: &Json) -> RdbObject {
    let hexes = |v: &Json| -> Vec<Vec<u8>> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| unhex(x.as_str().unwrap()))
            .collect()
    };
    let val = &v["value"];
    match v["type"].as_str().unwrap() {
        "string" => RdbObject::String(unhex(val.as_str().unwrap())),
        "list" => RdbObject::List(hexes(val)),
        "set" => RdbObject::Set(hexes(val)),
        "zset" => RdbObject::SortedSet(
            val.as_array()
                .unwrap()
                .iter()
                .map(|p| {
                    (
                        unhex(p[0].as_str().unwrap()),
                        p[1].as_str().unwrap().parse().unwrap(),
                    )
                })
                .collect(),
        ),
        "hash" => RdbObject::Hash(
            val.as_array()
                .unwrap()
                .iter()
                .map(|p| (unhex(p[0].as_str().unwrap()), unhex(p[1].as_str().unwrap())))
                .collect(),
        ),
        other => panic!("{other}"),
    }
}

fn expire_of(v: &Json) -> Option<i64> {
    Some(v["expire_at_ms"].as_i64().unwrap()).filter(|t| *t >= 0)
}

fn drain(c: &mut MigrateClient) -> Vec<MigrateOutput> {
    std::iter::from_fn(|| c.poll_output()).collect()
}

/// The MIGRATEs of the standalone captures, through our client: the bytes it writes are the
/// real source's (payloads in the source's RDB version), the replies it reads give the real
/// MIGRATE's reply and the keys it deletes.
#[test]
fn migrate_requests_match_real_servers() {
    for (flavor, version) in [
        ("valkey-9.1", RdbVersion::V80),
        ("redis-7.0", RdbVersion::V10),
    ] {
        let dir = format!("standalone-{flavor}");
        let facts = json(&format!("{dir}/facts.json"));
        let source = facts["source_before"].as_object().unwrap();
        let mut client = MigrateClient::new(
            MigrateConfig {
                cluster_enabled: false,
                encoder: EncoderConfig {
                    version,
                    ..EncoderConfig::default()
                },
            },
            Millis(1),
        );
        let mut streams = [
            (
                std::fs::read(vectors().join(&dir).join("conn1.s2t.bin")).unwrap(),
                std::fs::read(vectors().join(&dir).join("conn1.t2s.bin")).unwrap(),
            ),
            (
                std::fs::read(vectors().join(&dir).join("auth1.s2t.bin")).unwrap(),
                std::fs::read(vectors().join(&dir).join("auth1.t2s.bin")).unwrap(),
            ),
        ];
        let mut links: [Option<MigrateLink>; 2] = [None, None];
        let mut moved_keys = BTreeSet::new();
        for (n, m) in facts["migrates"].as_array().unwrap().iter().enumerate() {
            let target = m["target"].as_u64().unwrap() as usize;
            let mut argv = vec![b"MIGRATE".to_vec()];
            argv.extend(
                m["args"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap().as_bytes().to_vec()),
            );
            let args = MigrateArgs::parse(&argv).unwrap();
            let values: Vec<(Vec<u8>, RdbObject, Option<i64>)> = args
                .keys
                .iter()
                .filter(|k| !moved_keys.contains(*k))
                .filter_map(|k| {
                    let v =
                        source.get(&k.iter().map(|b| format!("{b:02x}")).collect::<String>())?;
                    Some((k.clone(), object(v), expire_of(v)))
                })
                .collect();
            // The source's clock at this MIGRATE, from a TTL it sent.
            let (s2t, t2s) = &mut streams[target];
            let cmds = commands(s2t);
            let now = values
                .iter()
                .find_map(|(k, _, at)| {
                    let at = (*at)?;
                    let c = cmds.iter().find(|c| c.len() >= 3 && &c[1] == k)?;
                    let ttl: i64 = std::str::from_utf8(&c[2]).unwrap().parse().unwrap();
                    Some(at - ttl)
                })
                .unwrap_or(1_796_000_000_000);
            let client_id = ConnId(n as u64);
            let found = values.iter().map(|(k, v, at)| (k.as_slice(), v, *at));
            let r = client
                .start(client_id, args.clone(), found, Millis(now as u64))
                .unwrap();
            if m["reply"] == "NOKEY" {
                assert_eq!(
                    r,
                    Some(Reply::Simple("NOKEY".into())),
                    "{flavor} {}",
                    m["name"]
                );
                assert!(drain(&mut client).is_empty());
                continue;
            }
            assert_eq!(r, None);
            let mut sent = Vec::new();
            let mut done = None;
            let mut rounds = 0;
            while done.is_none() {
                rounds += 1;
                assert!(rounds < 10, "{flavor} {}: stuck", m["name"]);
                for o in drain(&mut client) {
                    match o {
                        MigrateOutput::Connect {
                            link, host, port, ..
                        } => {
                            assert!(
                                links[target].is_none(),
                                "{flavor}: one connection per target"
                            );
                            assert_eq!(host, args.host);
                            assert_eq!(port, args.port);
                            links[target] = Some(link);
                            client.handle_connected(link, Millis(now as u64));
                        }
                        MigrateOutput::Send { link, bytes } => {
                            assert_eq!(Some(link), links[target]);
                            sent.extend_from_slice(&bytes);
                            // The target's replies to this request.
                            let replies = commands_count(&bytes);
                            let mut cut = 0;
                            for _ in 0..replies {
                                cut += t2s[cut..].iter().position(|b| *b == b'\n').unwrap() + 1;
                            }
                            let reply: Vec<u8> = t2s.drain(..cut).collect();
                            client.handle_bytes(link, &reply, Millis(now as u64));
                        }
                        MigrateOutput::Done {
                            client: c,
                            reply,
                            moved,
                        } => {
                            assert_eq!(c, client_id);
                            done = Some((reply, moved));
                        }
                        MigrateOutput::Close { .. } => panic!("{flavor}: nothing closes"),
                    }
                }
            }
            let (reply, moved) = done.unwrap();
            let want = match (&m["reply"], &m["error"]) {
                (Json::String(s), _) => Reply::Simple(s.clone()),
                (_, Json::String(e)) => Reply::Error(format!("ERR {e}")),
                other => panic!("{other:?}"),
            };
            assert_eq!(reply, want, "{flavor} {}", m["name"]);
            let n_sent = commands_count(&sent);
            for (ours, theirs) in commands(&sent).iter().zip(&cmds[..n_sent]) {
                same_restore(ours, theirs, &format!("{flavor} {}", m["name"]));
            }
            let theirs_len: usize = cmds[..n_sent].iter().map(|c| command_bytes(c).len()).sum();
            assert_eq!(sent.len(), theirs_len, "{flavor} {}", m["name"]);
            s2t.drain(..theirs_len);
            if !args.copy {
                moved_keys.extend(moved.iter().cloned());
            } else {
                assert!(moved.is_empty());
            }
        }
        for (s2t, t2s) in &streams {
            assert!(
                s2t.is_empty() && t2s.is_empty(),
                "{flavor}: every byte accounted for"
            );
        }
        // The keys the real source deleted are the ones we would delete.
        let after = facts["source_after"].as_object().unwrap();
        for k in &moved_keys {
            let hex: String = k.iter().map(|b| format!("{b:02x}")).collect();
            assert!(
                !after.contains_key(&hex),
                "{flavor}: {k:?} still on the source"
            );
        }
        for k in source.keys() {
            if !after.contains_key(k) {
                assert!(
                    moved_keys.contains(&unhex(k)),
                    "{flavor}: {k} deleted by the source only"
                );
            }
        }
    }
}

/// One command of ours against the real one: equal bytes, but a set's payload whose members
/// come in another order (Redis 7.0 writes its hash table's order, which nobody can
/// reproduce) compares as a set.
fn same_restore(ours: &[Vec<u8>], theirs: &[Vec<u8>], what: &str) {
    if ours == theirs {
        return;
    }
    assert!(
        ours[0].starts_with(b"RESTORE"),
        "{what}: {ours:?} vs {theirs:?}"
    );
    assert_eq!(ours[..3], theirs[..3], "{what}");
    assert_eq!(ours[4..], theirs[4..], "{what}");
    let decode = |p: &[u8]| {
        ferrocluster_rdb::dump::decode(p)
            .unwrap()
            .object
            .normalized()
    };
    assert_eq!(
        decode(&ours[3]),
        decode(&theirs[3]),
        "{what}: {:?}",
        ours[1]
    );
}

fn commands_count(bytes: &[u8]) -> usize {
    commands(bytes).len()
}

/// `redis-cli --cluster reshard`: the MIGRATEs redis-cli sent to a Valkey 9.1 source (KEYS,
/// pipelines of 10), and the `RESTORE-ASKING` pipelines the source sent: our client sends
/// the same bytes for the same MIGRATEs.
#[test]
fn reshard_pipelines_match_valkey() {
    let dir = vectors().join("reshard-valkey-9.1");
    let facts = json("reshard-valkey-9.1/facts.json");
    let cli = commands(&std::fs::read(dir.join("node0-conn1.s2t.bin")).unwrap());
    let restores = commands(&std::fs::read(dir.join("node1-conn2.s2t.bin")).unwrap());
    let replies = std::fs::read(dir.join("node1-conn2.t2s.bin")).unwrap();
    let mut source = serde_json::Map::new();
    for slot in facts["source_before"].as_object().unwrap().values() {
        source.extend(slot.as_object().unwrap().clone());
    }
    let mut client = MigrateClient::new(
        MigrateConfig {
            cluster_enabled: true,
            encoder: EncoderConfig {
                version: RdbVersion::V80,
                ..EncoderConfig::default()
            },
        },
        Millis(1),
    );
    let migrates: Vec<&Vec<Vec<u8>>> = cli.iter().filter(|c| c[0] == b"MIGRATE").collect();
    assert_eq!(migrates.len(), 4);
    let mut want = restores.iter();
    let mut link = None;
    let mut replies = &replies[..];
    for (n, argv) in migrates.into_iter().enumerate() {
        assert_eq!(&argv[5], b"60000");
        let args = MigrateArgs::parse(argv).unwrap();
        assert!(args.keys.len() <= 10);
        let values: Vec<(Vec<u8>, RdbObject, Option<i64>)> = args
            .keys
            .iter()
            .map(|k| {
                let v = &source[&k.iter().map(|b| format!("{b:02x}")).collect::<String>()];
                (k.clone(), object(v), expire_of(v))
            })
            .collect();
        let mut now = 1_796_000_000_000i64;
        let mut expected = Vec::new();
        if n == 0 {
            expected.push(want.next().unwrap().clone()); // SELECT 0 on the new connection
        }
        for (k, _, at) in &values {
            let c = want.next().unwrap().clone();
            assert_eq!(&c[1], k);
            if let Some(at) = at {
                let ttl: i64 = std::str::from_utf8(&c[2]).unwrap().parse().unwrap();
                now = at - ttl;
            }
            expected.push(c);
        }
        let found = values.iter().map(|(k, v, at)| (k.as_slice(), v, *at));
        assert_eq!(
            client
                .start(ConnId(9), args, found, Millis(now as u64))
                .unwrap(),
            None
        );
        let mut done = false;
        while !done {
            for o in drain(&mut client) {
                match o {
                    MigrateOutput::Connect { link: l, .. } => {
                        assert!(link.is_none());
                        link = Some(l);
                        client.handle_connected(l, Millis(now as u64));
                    }
                    MigrateOutput::Send { link: l, bytes } => {
                        let want: Vec<u8> =
                            expected.iter().flat_map(|c| command_bytes(c)).collect();
                        assert_eq!(bytes, want, "MIGRATE {n}");
                        let lines = expected.len();
                        let mut cut = 0;
                        for _ in 0..lines {
                            cut += replies[cut..].iter().position(|b| *b == b'\n').unwrap() + 1;
                        }
                        client.handle_bytes(l, &replies[..cut], Millis(now as u64));
                        replies = &replies[cut..];
                    }
                    MigrateOutput::Done { reply, moved, .. } => {
                        assert_eq!(reply, Reply::ok());
                        assert_eq!(moved.len(), expected.len() - usize::from(n == 0));
                        done = true;
                    }
                    MigrateOutput::Close { .. } => panic!("nothing closes"),
                }
            }
        }
    }
    assert!(want.next().is_none() && replies.is_empty());
}

fn one_key() -> (Vec<u8>, RdbObject) {
    (b"k".to_vec(), RdbObject::String(b"v".to_vec()))
}

fn args(extra: &[&str]) -> MigrateArgs {
    let mut a = vec!["MIGRATE", "10.0.0.1", "7000", "", "0", "100"];
    a.extend_from_slice(extra);
    a.extend_from_slice(&["KEYS", "k"]);
    MigrateArgs::parse(&a).unwrap()
}

fn start(c: &mut MigrateClient, client: u64, a: MigrateArgs, now: u64) {
    let (k, v) = one_key();
    let found = [(k.as_slice(), &v, None)];
    assert_eq!(
        c.start(ConnId(client), a, found, Millis(now)).unwrap(),
        None
    );
}

fn done_of(out: &[MigrateOutput]) -> Option<(Reply, Vec<Vec<u8>>)> {
    out.iter().find_map(|o| match o {
        MigrateOutput::Done { reply, moved, .. } => Some((reply.clone(), moved.clone())),
        _ => None,
    })
}

fn link_of(out: &[MigrateOutput]) -> MigrateLink {
    out.iter()
        .find_map(|o| match o {
            MigrateOutput::Connect { link, .. } | MigrateOutput::Send { link, .. } => Some(*link),
            _ => None,
        })
        .unwrap()
}

#[test]
fn migrate_io_errors_and_retry() {
    let mut c = MigrateClient::new(MigrateConfig::default(), Millis(0));
    // Connect refused.
    start(&mut c, 1, args(&[]), 0);
    let l = link_of(&drain(&mut c));
    c.handle_connect_failed(l, Millis(1));
    assert_eq!(
        done_of(&drain(&mut c)).unwrap().0,
        Reply::Error("IOERR error or timeout connecting to the client".into())
    );
    // Connect timeout.
    start(&mut c, 1, args(&[]), 10);
    drain(&mut c);
    c.handle_timeout(Millis(110));
    let out = drain(&mut c);
    assert!(matches!(out[0], MigrateOutput::Close { .. }));
    assert_eq!(
        done_of(&out).unwrap().0,
        Reply::Error("IOERR error or timeout connecting to the client".into())
    );
    // A read timeout is not retried.
    start(&mut c, 1, args(&[]), 200);
    let l = link_of(&drain(&mut c));
    c.handle_connected(l, Millis(201));
    drain(&mut c);
    c.handle_bytes(l, b"+OK\r\n", Millis(250)); // the SELECT's reply; the deadline moves
    c.handle_timeout(Millis(340));
    assert!(drain(&mut c).is_empty());
    c.handle_timeout(Millis(350));
    assert_eq!(
        done_of(&drain(&mut c)).unwrap().0,
        Reply::Error("IOERR error or timeout reading to target instance".into())
    );
    // A closed connection before any RESTORE reply: retried once on a new one (SELECT again),
    // then the error.
    start(&mut c, 1, args(&[]), 400);
    let l = link_of(&drain(&mut c));
    c.handle_connected(l, Millis(401));
    drain(&mut c);
    c.handle_closed(l, Millis(402));
    let out = drain(&mut c);
    let MigrateOutput::Connect { link: l2, .. } = out[0] else {
        panic!("{out:?}")
    };
    assert_ne!(l2, l);
    c.handle_connected(l2, Millis(403));
    let out = drain(&mut c);
    let MigrateOutput::Send { bytes, .. } = &out[0] else {
        panic!()
    };
    assert!(bytes.starts_with(b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*4\r\n$14\r\nRESTORE-ASKING"));
    c.handle_write_failed(l2, Millis(404));
    let out = drain(&mut c);
    assert_eq!(
        done_of(&out).unwrap().0,
        Reply::Error("IOERR error or timeout writing to target instance".into())
    );
}

#[test]
fn migrate_cache() {
    let mut c = MigrateClient::new(MigrateConfig::default(), Millis(0));
    start(&mut c, 1, args(&[]), 0);
    let l = link_of(&drain(&mut c));
    c.handle_connected(l, Millis(1));
    drain(&mut c);
    c.handle_bytes(l, b"+OK\r\n+OK\r\n", Millis(2));
    let (reply, moved) = done_of(&drain(&mut c)).unwrap();
    assert_eq!((reply, moved), (Reply::ok(), vec![b"k".to_vec()]));
    assert_eq!(c.cached(), 1);
    // The next MIGRATE to the same target reuses it without SELECT; an error forgets the
    // database.
    start(&mut c, 2, args(&["COPY"]), 3);
    let out = drain(&mut c);
    let MigrateOutput::Send { link, bytes } = &out[0] else {
        panic!("{out:?}")
    };
    assert_eq!(*link, l);
    assert!(bytes.starts_with(b"*4\r\n$14\r\nRESTORE-ASKING"));
    c.handle_bytes(
        l,
        b"-BUSYKEY Target key name already exists.\r\n",
        Millis(4),
    );
    let (reply, moved) = done_of(&drain(&mut c)).unwrap();
    assert_eq!(
        reply,
        Reply::Error(
            "ERR Target instance replied with error: BUSYKEY Target key name already exists."
                .into()
        )
    );
    assert!(moved.is_empty());
    start(&mut c, 3, args(&["REPLACE"]), 5);
    let out = drain(&mut c);
    let MigrateOutput::Send { bytes, .. } = &out[0] else {
        panic!()
    };
    assert!(bytes.starts_with(b"*2\r\n$6\r\nSELECT"));
    assert!(bytes.ends_with(b"$7\r\nREPLACE\r\n"));
    c.handle_bytes(l, b"+OK\r\n+OK\r\n", Millis(6));
    drain(&mut c);
    // Idle for more than 10 s: closed.
    c.handle_timeout(Millis(6 + CACHE_IDLE_MS));
    assert!(drain(&mut c).is_empty());
    assert_eq!(c.poll_timeout(), Some(Millis(6 + CACHE_IDLE_MS + 1)));
    c.handle_timeout(Millis(6 + CACHE_IDLE_MS + 1));
    assert_eq!(drain(&mut c), vec![MigrateOutput::Close { link: l }]);
    assert_eq!(c.cached(), 0);
    // At most 64: the least recently used goes.
    let mut first = None;
    for i in 0..=CACHE_ITEMS {
        let port = (8000 + i).to_string();
        let a = MigrateArgs::parse(&["MIGRATE", "h", &port, "k", "0", "100"]).unwrap();
        let now = 100_000 + i as u64;
        start(&mut c, 10, a, now);
        let out = drain(&mut c);
        if i == CACHE_ITEMS {
            assert_eq!(
                out[0],
                MigrateOutput::Close {
                    link: first.unwrap()
                }
            );
        }
        let l = link_of(&out);
        first.get_or_insert(l);
        c.handle_connected(l, Millis(now));
        drain(&mut c);
        c.handle_bytes(l, b"+OK\r\n+OK\r\n", Millis(now));
        drain(&mut c);
    }
    assert_eq!(c.cached(), CACHE_ITEMS);
}

/// AUTH or SELECT refused: no key counts as moved even when its RESTORE succeeded (the
/// captured `auth-wrong` case left the key on the source).
#[test]
fn migrate_auth_error_moves_nothing() {
    let mut c = MigrateClient::new(MigrateConfig::default(), Millis(0));
    start(&mut c, 1, args(&["AUTH", "nope"]), 0);
    let l = link_of(&drain(&mut c));
    c.handle_connected(l, Millis(1));
    let out = drain(&mut c);
    let MigrateOutput::Send { bytes, .. } = &out[0] else {
        panic!()
    };
    assert!(bytes.starts_with(b"*2\r\n$4\r\nAUTH\r\n$4\r\nnope\r\n*2\r\n$6\r\nSELECT"));
    c.handle_bytes(
        l,
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n+OK\r\n+OK\r\n",
        Millis(2),
    );
    let (reply, moved) = done_of(&drain(&mut c)).unwrap();
    assert_eq!(
        reply,
        Reply::Error("ERR Target instance replied with error: WRONGPASS invalid username-password pair or user is disabled.".into())
    );
    assert!(moved.is_empty());
}

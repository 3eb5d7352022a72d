//! Sentinel replies (issue 21): a `ferrocluster_sentinel::Resolver` for service `mymaster`
//! with three Sentinels, fed what the input makes its peers answer. Each step: a connect
//! result, a close, a reconnect, time, or one reply on a connection — shaped after the
//! command last sent there (`SENTINEL get-master-addr-by-name` / `replicas` / `sentinels`,
//! `ROLE`, `INFO replication`, the `+switch-master` subscription) with addresses from a
//! small pool, or any value (nil, integers, bulk, errors, nested arrays and maps).
//!
//! Properties: no panic; every output names a connection the resolver opened (Send and
//! Close only after Connect); a `Resolved` carries at least one address, for the wanted
//! role, via one of the Sentinels it knows.
#![no_main]

use ferrocluster_sentinel::{Addr, Config, ConnId, Output, ReconnectCause, Resolver, Value, Want};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use std::collections::BTreeMap;

const HOSTS: [&str; 4] = ["127.0.0.1", "10.0.0.2", "::1", "redis.example"];

fn addr_parts(u: &mut Unstructured) -> Result<(String, String)> {
    let host = HOSTS[u.choose_index(HOSTS.len())?].to_string();
    let port = match u.int_in_range(0..=5u8)? {
        0 => "0".to_string(),
        1 => "65536".to_string(),
        2 => "x".to_string(),
        _ => (6379 + u16::from(u.int_in_range(0..=3u8)?)).to_string(),
    };
    Ok((host, port))
}

fn any_value(u: &mut Unstructured, depth: u8) -> Result<Value> {
    Ok(match u.int_in_range(0..=6u8)? {
        0 => Value::Nil,
        1 => Value::Int(u.arbitrary()?),
        2 => {
            let n = u.int_in_range(0..=16usize)?;
            Value::Bulk(u.bytes(n)?.to_vec())
        }
        3 => Value::Simple("OK".into()),
        4 => Value::Error("ERR No such master with that name".into()),
        5 if depth < 3 => {
            let n = u.int_in_range(0..=4u8)?;
            let mut v = Vec::new();
            for _ in 0..n {
                v.push(any_value(u, depth + 1)?);
            }
            Value::Array(v)
        }
        _ if depth < 3 => {
            let n = u.int_in_range(0..=3u8)?;
            let mut v = Vec::new();
            for _ in 0..n {
                v.push((any_value(u, depth + 1)?, any_value(u, depth + 1)?));
            }
            Value::Map(v)
        }
        _ => Value::Nil,
    })
}

/// A Sentinel's description of an instance (`SENTINEL replicas` / `sentinels` entries), as
/// the flat field/value array RESP2 gives or a RESP3 map.
fn instance(u: &mut Unstructured) -> Result<Value> {
    let (ip, port) = addr_parts(u)?;
    let flags = [
        "slave",
        "sentinel",
        "slave,s_down",
        "slave,disconnected",
        "master",
    ];
    let flags = flags[u.choose_index(flags.len())?];
    let fields = [
        ("name", format!("{ip}:{port}")),
        ("ip", ip),
        ("port", port),
        ("flags", flags.to_string()),
        (
            "master-link-status",
            if u.arbitrary()? { "ok" } else { "err" }.to_string(),
        ),
    ];
    Ok(if u.arbitrary()? {
        Value::Array(
            fields
                .iter()
                .flat_map(|(k, v)| [Value::bulk(k), Value::bulk(v)])
                .collect(),
        )
    } else {
        Value::Map(
            fields
                .iter()
                .map(|(k, v)| (Value::bulk(k), Value::bulk(v)))
                .collect(),
        )
    })
}

/// A reply shaped after the command sent (`argv`), or any value one time in five.
fn reply(u: &mut Unstructured, argv: &[Vec<u8>]) -> Result<Value> {
    if u.ratio(1u8, 5)? {
        return any_value(u, 0);
    }
    let word = |i: usize| {
        argv.get(i)
            .map(|a| a.to_ascii_lowercase())
            .unwrap_or_default()
    };
    Ok(match (word(0).as_slice(), word(1).as_slice()) {
        (b"sentinel", b"get-master-addr-by-name") => match u.int_in_range(0..=4u8)? {
            0 => Value::Nil,
            1 => Value::Error("IDONTKNOW I don't know".into()),
            _ => {
                let (ip, port) = addr_parts(u)?;
                Value::Array(vec![Value::bulk(ip), Value::bulk(port)])
            }
        },
        (b"sentinel", _) => {
            let n = u.int_in_range(0..=3u8)?;
            let mut v = Vec::new();
            for _ in 0..n {
                v.push(instance(u)?);
            }
            Value::Array(v)
        }
        (b"role", _) => {
            let role = ["master", "slave", "sentinel", "other"][u.choose_index(4)?];
            let (ip, port) = addr_parts(u)?;
            match role {
                "slave" => Value::Array(vec![
                    Value::bulk(role),
                    Value::bulk(ip),
                    Value::Int(port.parse().unwrap_or(0)),
                    Value::bulk("connected"),
                    Value::Int(u.arbitrary::<u16>()?.into()),
                ]),
                _ => Value::Array(vec![
                    Value::bulk(role),
                    Value::Int(u.arbitrary::<u16>()?.into()),
                    Value::Array(vec![]),
                ]),
            }
        }
        (b"info", _) => {
            let role = ["master", "slave"][u.choose_index(2)?];
            Value::bulk(format!(
                "# Replication\r\nrole:{role}\r\nconnected_slaves:0\r\n"
            ))
        }
        (b"subscribe", _) => {
            if u.arbitrary()? {
                Value::Array(vec![
                    Value::bulk("subscribe"),
                    Value::bulk("+switch-master"),
                    Value::Int(1),
                ])
            } else {
                let (ip, port) = addr_parts(u)?;
                let name = if u.ratio(3u8, 4)? {
                    "mymaster"
                } else {
                    "other"
                };
                Value::Array(vec![
                    Value::bulk("message"),
                    Value::bulk("+switch-master"),
                    Value::bulk(format!("{name} 127.0.0.1 6379 {ip} {port}")),
                ])
            }
        }
        _ => any_value(u, 0)?,
    })
}

#[derive(Default)]
struct Conn {
    connected: bool,
    last_sent: Vec<Vec<u8>>,
}

fn run(u: &mut Unstructured) -> Result<()> {
    let sentinels: Vec<Addr> = (0..3).map(|i| Addr::new("127.0.0.1", 26379 + i)).collect();
    let want = if u.arbitrary()? {
        Want::Primary
    } else {
        Want::Replicas
    };
    let mut cfg = Config::new("mymaster", want, sentinels.clone());
    cfg.refresh_sentinels = u.arbitrary()?;
    cfg.follow_switch_master = u.arbitrary()?;
    if u.arbitrary()? {
        cfg.recheck_interval_ms = Some(1000);
    }
    let mut now = 1_000u64;
    let mut r = Resolver::new(cfg, now).expect("valid config");
    let mut conns: BTreeMap<u64, Conn> = BTreeMap::new();
    let mut known: Vec<Addr> = sentinels;
    for _ in 0..64 {
        while let Some(o) = r.poll_output() {
            match o {
                Output::Connect { conn, addr, .. } => {
                    assert!(
                        conns.insert(conn.0, Conn::default()).is_none(),
                        "{conn} opened twice"
                    );
                    if !known.contains(&addr) {
                        known.push(addr);
                    }
                }
                Output::Send { conn, argv } => {
                    let c = conns
                        .get_mut(&conn.0)
                        .expect("Send on a connection never opened");
                    assert!(c.connected, "Send on {conn} before it connected");
                    c.last_sent = argv;
                }
                Output::Close { conn } => {
                    conns.remove(&conn.0);
                }
                Output::Resolved { resolution, .. } => {
                    assert!(!resolution.addrs.is_empty(), "resolved to no address");
                    assert_eq!(resolution.want, want);
                    assert!(known.contains(&resolution.via), "resolved via a stranger");
                }
                _ => {}
            }
        }
        if u.is_empty() {
            break;
        }
        let ids: Vec<u64> = conns.keys().copied().collect();
        let pick = |u: &mut Unstructured| -> Result<Option<u64>> {
            Ok(if ids.is_empty() {
                None
            } else {
                Some(ids[u.choose_index(ids.len())?])
            })
        };
        match u.int_in_range(0..=9u8)? {
            0 | 1 => {
                if let Some(c) = pick(u)? {
                    if r.handle_connected(ConnId(c), now).is_ok() {
                        if let Some(x) = conns.get_mut(&c) {
                            x.connected = true;
                        }
                    }
                }
            }
            2 => {
                if let Some(c) = pick(u)? {
                    let _ = if u.arbitrary()? {
                        r.handle_connect_failed(ConnId(c), now)
                    } else {
                        r.handle_closed(ConnId(c), now)
                    };
                    conns.remove(&c);
                }
            }
            3 => {
                now += u64::from(u.arbitrary::<u16>()?);
                r.handle_timeout(now);
            }
            4 => r.handle_reconnect(ReconnectCause::SocketError, now),
            _ => {
                if let Some(c) = pick(u)? {
                    let sent = conns[&c].last_sent.clone();
                    let v = reply(u, &sent)?;
                    let _ = r.handle_reply(ConnId(c), v, now);
                }
            }
        }
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = run(&mut Unstructured::new(data));
});

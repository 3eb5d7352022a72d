//! Parsing of the replies the resolver asks for. Pure functions over [`Value`].

use crate::{Addr, Value};

/// A role as an instance reports it (`ROLE` first element, or the `role:` line of
/// `INFO replication`). Wire strings are `master`, `slave` and `sentinel`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ObservedRole {
    /// `master`.
    Primary,
    /// `slave` (a replica).
    Replica,
    /// `sentinel`.
    Sentinel,
    /// Any other text, kept as received.
    Other(String),
}

impl ObservedRole {
    /// The role named by a wire string (`master`, `slave`, `sentinel`; case-insensitive).
    pub fn from_wire(s: &str) -> ObservedRole {
        match s.trim().to_ascii_lowercase().as_str() {
            "master" => ObservedRole::Primary,
            "slave" | "replica" => ObservedRole::Replica,
            "sentinel" => ObservedRole::Sentinel,
            other => ObservedRole::Other(other.to_string()),
        }
    }
}

/// The answer to `SENTINEL get-master-addr-by-name` (step 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MasterAddrReply {
    /// `[ip, port]`.
    Addr(Addr),
    /// Null: this Sentinel does not know the name.
    Unknown,
    /// An error reply or a value of the wrong shape; the text says which.
    Unusable(String),
}

fn port_of(v: &Value) -> Option<u16> {
    v.as_text()?.trim().parse().ok()
}

pub(crate) fn master_addr(v: &Value) -> MasterAddrReply {
    match v {
        Value::Nil => MasterAddrReply::Unknown,
        Value::Array(items) if items.is_empty() => MasterAddrReply::Unknown,
        Value::Array(items) if items.len() == 2 => match (items[0].as_text(), port_of(&items[1])) {
            (Some(host), Some(port)) if !host.is_empty() => {
                MasterAddrReply::Addr(Addr::new(host, port))
            }
            _ => MasterAddrReply::Unusable(format!("malformed address reply {v:?}")),
        },
        Value::Error(e) => MasterAddrReply::Unusable(e.clone()),
        other => MasterAddrReply::Unusable(format!("unexpected reply {other:?}")),
    }
}

/// The answer to `SENTINEL replicas <name>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReplicasReply {
    /// Replicas Sentinel does not flag as down or disconnected, in Sentinel's order.
    Addrs(Vec<Addr>),
    /// Sentinel does not know the name (it answers `-ERR No such master with that name`).
    Unknown,
    /// Another error or a malformed value.
    Unusable(String),
}

/// Flags that make Sentinel's replica entry unusable: subjectively/objectively down or
/// disconnected (the `flags` field of `SENTINEL replicas`).
const BAD_REPLICA_FLAGS: [&str; 3] = ["s_down", "o_down", "disconnected"];

pub(crate) fn replicas(v: &Value) -> ReplicasReply {
    match v {
        Value::Nil => ReplicasReply::Unknown,
        Value::Error(e) if e.contains("No such master") => ReplicasReply::Unknown,
        Value::Error(e) => ReplicasReply::Unusable(e.clone()),
        Value::Array(items) => {
            let mut out = Vec::new();
            for item in items {
                let Some(pairs) = item.as_pairs() else {
                    return ReplicasReply::Unusable(format!("malformed replica entry {item:?}"));
                };
                let get = |k: &str| pairs.iter().find(|(key, _)| key == k).map(|(_, v)| v);
                let flags = get("flags").map(String::as_str).unwrap_or("");
                if flags
                    .split(',')
                    .any(|f| BAD_REPLICA_FLAGS.contains(&f.trim()))
                {
                    continue;
                }
                match (get("ip"), get("port").and_then(|p| p.parse::<u16>().ok())) {
                    (Some(ip), Some(port)) if !ip.is_empty() => out.push(Addr::new(ip, port)),
                    _ => {
                        return ReplicasReply::Unusable(format!(
                            "replica entry without ip/port {item:?}"
                        ))
                    }
                }
            }
            ReplicasReply::Addrs(out)
        }
        other => ReplicasReply::Unusable(format!("unexpected reply {other:?}")),
    }
}

/// Addresses in a `SENTINEL sentinels <name>` reply (entries with `ip` and `port`);
/// `None` for an error or a malformed reply.
pub(crate) fn sentinels(v: &Value) -> Option<Vec<Addr>> {
    let Value::Array(items) = v else { return None };
    let mut out = Vec::new();
    for item in items {
        let pairs = item.as_pairs()?;
        let get = |k: &str| pairs.iter().find(|(key, _)| key == k).map(|(_, v)| v);
        let ip = get("ip")?;
        let port = get("port")?.parse::<u16>().ok()?;
        if ip.is_empty() {
            return None;
        }
        out.push(Addr::new(ip.clone(), port));
    }
    Some(out)
}

/// The role in a `ROLE` reply: the first element of the array. `Err` carries the text of
/// an error reply (the caller falls back to `INFO replication`) or a description of a
/// malformed reply.
pub(crate) fn role(v: &Value) -> Result<ObservedRole, RoleFailure> {
    match v {
        Value::Array(items) => match items.first().and_then(Value::as_text) {
            Some(r) => Ok(ObservedRole::from_wire(&r)),
            None => Err(RoleFailure::Malformed(format!("{v:?}"))),
        },
        Value::Error(e) => Err(RoleFailure::ErrorReply(e.clone())),
        other => Err(RoleFailure::Malformed(format!("{other:?}"))),
    }
}

/// Why a role reply gave no role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RoleFailure {
    /// The server answered with an error (unknown command, ACL): fall back to INFO.
    ErrorReply(String),
    /// The reply had the wrong shape.
    Malformed(String),
}

/// The `role:` line of an `INFO replication` bulk reply.
pub(crate) fn info_role(v: &Value) -> Option<ObservedRole> {
    let text = match v {
        Value::Bulk(_) | Value::Simple(_) => v.as_text()?,
        _ => return None,
    };
    text.lines()
        .find_map(|l| l.trim().strip_prefix("role:"))
        .map(ObservedRole::from_wire)
}

/// A pub/sub message on `+switch-master`: `["message", "+switch-master",
/// "<name> <old-ip> <old-port> <new-ip> <new-port>"]`. Returns the service name it is
/// about and the new address, or `None` for anything else (subscribe confirmations too).
pub(crate) fn switch_master(v: &Value) -> Option<(String, Addr)> {
    let Value::Array(items) = v else { return None };
    if items.len() != 3
        || !items[0].as_text()?.eq_ignore_ascii_case("message")
        || items[1].as_text()? != SWITCH_MASTER_CHANNEL
    {
        return None;
    }
    let payload = items[2].as_text()?;
    let parts: Vec<&str> = payload.split_whitespace().collect();
    let [name, _old_ip, _old_port, new_ip, new_port] = parts.as_slice() else {
        return None;
    };
    Some((name.to_string(), Addr::new(*new_ip, new_port.parse().ok()?)))
}

/// Whether a value is the confirmation of `SUBSCRIBE +switch-master`.
pub(crate) fn is_subscribe_ack(v: &Value) -> bool {
    match v {
        Value::Array(items) if items.len() == 3 => {
            items[0]
                .as_text()
                .is_some_and(|s| s.eq_ignore_ascii_case("subscribe"))
                && items[1].as_text().as_deref() == Some(SWITCH_MASTER_CHANNEL)
        }
        _ => false,
    }
}

/// The Sentinel event channel announcing a new primary.
pub(crate) const SWITCH_MASTER_CHANNEL: &str = "+switch-master";

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Value {
        Value::bulk(s)
    }

    #[test]
    fn master_addr_shapes() {
        assert_eq!(
            master_addr(&Value::Array(vec![b("::1"), b("6379")])),
            MasterAddrReply::Addr(Addr::new("::1", 6379))
        );
        assert_eq!(master_addr(&Value::Nil), MasterAddrReply::Unknown);
        assert!(matches!(
            master_addr(&Value::Array(vec![b("h")])),
            MasterAddrReply::Unusable(_)
        ));
        assert!(matches!(
            master_addr(&Value::Array(vec![b("h"), b("70000")])),
            MasterAddrReply::Unusable(_)
        ));
        assert!(matches!(
            master_addr(&Value::Int(1)),
            MasterAddrReply::Unusable(_)
        ));
    }

    #[test]
    fn replicas_accepts_resp3_maps_and_skips_down_flags() {
        let entry = |port: &str, flags: &str| {
            Value::Map(vec![
                (b("ip"), b("10.0.0.1")),
                (b("port"), b(port)),
                (b("flags"), b(flags)),
            ])
        };
        let v = Value::Array(vec![
            entry("1", "slave"),
            entry("2", "slave,o_down"),
            entry("3", "disconnected,slave"),
            entry("4", "slave"),
        ]);
        assert_eq!(
            replicas(&v),
            ReplicasReply::Addrs(vec![Addr::new("10.0.0.1", 1), Addr::new("10.0.0.1", 4)])
        );
        assert!(matches!(
            replicas(&Value::Array(vec![Value::Int(3)])),
            ReplicasReply::Unusable(_)
        ));
    }

    #[test]
    fn role_and_info() {
        assert_eq!(
            role(&Value::Array(vec![b("MASTER")])),
            Ok(ObservedRole::Primary)
        );
        assert_eq!(
            role(&Value::Array(vec![b("weird")])),
            Ok(ObservedRole::Other("weird".into()))
        );
        assert!(matches!(
            role(&Value::Error("ERR".into())),
            Err(RoleFailure::ErrorReply(_))
        ));
        assert!(matches!(
            role(&Value::Array(vec![])),
            Err(RoleFailure::Malformed(_))
        ));
        assert_eq!(
            info_role(&b("# Replication\r\nrole:master\r\n")),
            Some(ObservedRole::Primary)
        );
        assert_eq!(info_role(&b("# Replication\r\n")), None);
        assert_eq!(info_role(&Value::Int(1)), None);
    }

    #[test]
    fn switch_master_payload() {
        // Payload format from the Sentinel documentation:
        // "<master name> <oldip> <oldport> <newip> <newport>".
        let msg = Value::Array(vec![
            b("message"),
            b("+switch-master"),
            b("mymaster 127.0.0.1 26300 127.0.0.1 26301"),
        ]);
        assert_eq!(
            switch_master(&msg),
            Some(("mymaster".into(), Addr::new("127.0.0.1", 26301)))
        );
        let short = Value::Array(vec![b("message"), b("+switch-master"), b("mymaster 1 2")]);
        assert_eq!(switch_master(&short), None);
        let other = Value::Array(vec![b("message"), b("+sdown"), b("x 1 2 3 4")]);
        assert_eq!(switch_master(&other), None);
        assert!(is_subscribe_ack(&Value::Array(vec![
            b("subscribe"),
            b("+switch-master"),
            Value::Int(1)
        ])));
        assert!(!is_subscribe_ack(&msg));
    }

    #[test]
    fn sentinels_list_rejects_malformed_entries() {
        assert_eq!(sentinels(&Value::Error("ERR".into())), None);
        assert_eq!(
            sentinels(&Value::Array(vec![Value::Array(vec![b("ip"), b("h")])])),
            None
        );
        assert_eq!(sentinels(&Value::Array(vec![])), Some(vec![]));
    }
}

//! An optional Prometheus endpoint: with `metrics-port N` (default 0: off) the server answers
//! `GET /metrics` on the `bind` addresses at port N in the OpenMetrics text format
//! (`prometheus-client`), with:
//! * every numeric INFO field (`INFO everything`) as `ferrocluster_<field>`: counters for the
//!   running totals (`total_*` fields, which lose the prefix, keyspace hits/misses, expired keys,
//!   rejected connections, CPU seconds), gauges for the rest; `db<N>:keys=` / `expires=` as
//!   `ferrocluster_db_keys{db}` / `ferrocluster_db_expires{db}`; `commandstats` as `ferrocluster_command_calls{cmd}`,
//!   `ferrocluster_command_duration_seconds{cmd}` and `ferrocluster_command_failed_calls{cmd}`;
//! * in cluster mode the numeric CLUSTER INFO fields as `ferrocluster_cluster_*` gauges,
//!   `cluster_state` as `ferrocluster_cluster_state_ok` (1 or 0), and the bus counters
//!   `cluster_stats_messages_<type>_<sent|received>` as
//!   `ferrocluster_cluster_bus_messages{type,direction}`;
//! * per-slot key counts (CLUSTER SLOT-STATS `key-count`, every database) for the slots that
//!   hold keys, as `ferrocluster_slot_keys{slot}`.
//!
//! A scrape builds its registry from one consistent reading taken under the state lock; the
//! server's command path pays nothing for the endpoint.

use crate::server::Shared;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::collections::HashSet;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

type FCounter = Counter<f64, AtomicU64>;
type FGauge = Gauge<f64, AtomicU64>;
type Labels = Vec<(String, String)>;

/// INFO fields that only grow (besides `total_*`): exposed as counters.
const COUNTERS: &[&str] = &[
    "expired_keys",
    "keyspace_hits",
    "keyspace_misses",
    "rejected_connections",
    "used_cpu_sys",
    "used_cpu_user",
    "sync_full",
    "sync_partial_ok",
    "sync_partial_err",
];

/// Numeric-looking INFO fields that are identifiers, not figures.
const NOT_FIGURES: &[&str] = &["master_replid", "master_replid2", "run_id"];

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The registry under construction, refusing a second metric of the same name.
struct Builder {
    registry: Registry,
    names: HashSet<String>,
}

impl Builder {
    fn gauge(&mut self, name: &str, help: &str, v: f64) {
        if self.names.insert(name.to_string()) {
            let g = FGauge::default();
            g.set(v);
            self.registry.register(name, help, g);
        }
    }

    fn counter(&mut self, name: &str, help: &str, v: f64) {
        if self.names.insert(name.to_string()) {
            let c = FCounter::default();
            c.inc_by(v);
            self.registry.register(name, help, c);
        }
    }
}

/// The metrics of one INFO text (`# Section` headers and `field:value` lines).
fn from_info(b: &mut Builder, info: &str) {
    let db_keys = Family::<Labels, FGauge>::default();
    let db_expires = Family::<Labels, FGauge>::default();
    let calls = Family::<Labels, FCounter>::default();
    let usec = Family::<Labels, FCounter>::default();
    let failed = Family::<Labels, FCounter>::default();
    for line in info.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        if let Some(cmd) = key.strip_prefix("cmdstat_") {
            let labels = vec![("cmd".to_string(), cmd.to_string())];
            for kv in value.split(',') {
                let Some((k, v)) = kv.split_once('=') else {
                    continue;
                };
                let Ok(v) = v.parse::<f64>() else { continue };
                match k {
                    "calls" => calls.get_or_create(&labels).inc_by(v),
                    "usec" => usec.get_or_create(&labels).inc_by(v / 1e6),
                    "failed_calls" => failed.get_or_create(&labels).inc_by(v),
                    _ => 0.0,
                };
            }
            continue;
        }
        if let Some(db) = key.strip_prefix("db").filter(|d| d.parse::<u32>().is_ok()) {
            for kv in value.split(',') {
                let family = match kv.split_once('=') {
                    Some(("keys", n)) => Some((&db_keys, n)),
                    Some(("expires", n)) => Some((&db_expires, n)),
                    _ => None,
                };
                if let Some((family, n)) = family {
                    if let Ok(n) = n.parse::<f64>() {
                        family
                            .get_or_create(&vec![("db".to_string(), db.to_string())])
                            .set(n);
                    }
                }
            }
            continue;
        }
        let Ok(v) = value.trim().parse::<f64>() else {
            continue;
        };
        if NOT_FIGURES.contains(&key) {
            continue;
        }
        let help = format!("INFO {key}");
        if let Some(rest) = key.strip_prefix("total_") {
            b.counter(&format!("ferrocluster_{}", sanitize(rest)), &help, v);
        } else if COUNTERS.contains(&key) {
            b.counter(&format!("ferrocluster_{}", sanitize(key)), &help, v);
        } else {
            b.gauge(&format!("ferrocluster_{}", sanitize(key)), &help, v);
        }
    }
    b.registry.register(
        "ferrocluster_db_keys",
        "INFO keyspace keys= per database",
        db_keys,
    );
    b.registry.register(
        "ferrocluster_db_expires",
        "INFO keyspace expires= per database",
        db_expires,
    );
    b.registry.register(
        "ferrocluster_command_calls",
        "INFO commandstats calls per command",
        calls,
    );
    b.registry.register(
        "ferrocluster_command_duration_seconds",
        "INFO commandstats usec per command, in seconds",
        usec,
    );
    b.registry.register(
        "ferrocluster_command_failed_calls",
        "INFO commandstats failed_calls per command",
        failed,
    );
}

/// The metrics of CLUSTER INFO.
fn from_cluster_info(b: &mut Builder, text: &str) {
    let bus = Family::<Labels, FCounter>::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if key == "cluster_state" {
            b.gauge(
                "ferrocluster_cluster_state_ok",
                "CLUSTER INFO cluster_state is ok",
                f64::from(u8::from(value == "ok")),
            );
            continue;
        }
        let Ok(v) = value.parse::<f64>() else {
            continue;
        };
        if let Some(rest) = key.strip_prefix("cluster_stats_messages_") {
            let split = rest
                .strip_suffix("_sent")
                .map(|t| (t, "sent"))
                .or_else(|| rest.strip_suffix("_received").map(|t| (t, "received")));
            if let Some((kind, dir)) = split {
                // `cluster_stats_messages_sent` / `_received` are the totals of the per-type
                // counters: left to the query (`sum by (direction)`).
                if !kind.is_empty() {
                    bus.get_or_create(&vec![
                        ("type".to_string(), kind.to_string()),
                        ("direction".to_string(), dir.to_string()),
                    ])
                    .inc_by(v);
                }
            }
            continue;
        }
        b.gauge(
            &format!("ferrocluster_{}", sanitize(key)),
            &format!("CLUSTER INFO {key}"),
            v,
        );
    }
    b.registry.register(
        "ferrocluster_cluster_bus_messages",
        "cluster bus messages by type and direction (CLUSTER INFO cluster_stats_messages_*)",
        bus,
    );
}

/// The whole exposition text of one scrape.
pub fn render(shared: &Shared) -> String {
    let now = crate::server::unix_ms();
    let flat = b"INFOeverything".to_vec();
    let ranges = vec![0..4, 4..14];
    let args = crate::client::Args::new(&flat, &ranges);
    let mut out = crate::resp::Out::new();
    let (cluster_info, slot_keys) = {
        let st = shared.state.lock();
        crate::admin::info(shared, &st, &args, &mut out, now);
        let cluster_info = st.cluster.as_ref().map(|side| side.node.cluster_info());
        let slot_keys: Vec<(u16, u64)> = (0..ferrocluster_slot::SLOT_COUNT as u16)
            .filter_map(|s| {
                let n = st
                    .kv
                    .count_keys_in_slot_all_dbs(ferrocluster_slot::Slot::new(s).ok()?);
                (n > 0).then_some((s, n))
            })
            .collect();
        (cluster_info, slot_keys)
    };
    // The INFO reply is a bulk string: `$<len>\r\n<text>\r\n`.
    let text = String::from_utf8_lossy(&out.buf);
    let info = text.split_once("\r\n").map_or("", |(_, t)| t);
    let mut b = Builder {
        registry: Registry::default(),
        names: HashSet::new(),
    };
    from_info(&mut b, info);
    if let Some(ci) = cluster_info {
        from_cluster_info(&mut b, &ci);
        let slots = Family::<Labels, FGauge>::default();
        for (s, n) in slot_keys {
            slots
                .get_or_create(&vec![("slot".to_string(), s.to_string())])
                .set(n as f64);
        }
        b.registry.register(
            "ferrocluster_slot_keys",
            "keys per hash slot, every database (CLUSTER SLOT-STATS key-count), slots with keys",
            slots,
        );
    }
    let mut body = String::new();
    // Writing into a String cannot fail.
    let _ = encode(&mut body, &b.registry);
    body
}

/// Starts the endpoint's threads when `metrics-port` is set (one per `bind` address).
///
/// # Errors
/// A port that cannot be bound, with redis-server's wording for listening sockets.
pub fn spawn(shared: &Arc<Shared>) -> Result<(), String> {
    let port = shared.config.metrics_port;
    if port == 0 {
        return Ok(());
    }
    for (i, l) in ferrocluster_host::listen::listen_all(&shared.config.bind, port)?
        .into_iter()
        .enumerate()
    {
        let server = tiny_http::Server::from_listener(l, None)
            .map_err(|e| format!("can't serve metrics on port {port}: {e}"))?;
        let shared = Arc::clone(shared);
        std::thread::Builder::new()
            .name(format!("metrics-{i}"))
            .spawn(move || serve(&shared, &server))
            .map_err(|e| format!("can't start the metrics thread: {e}"))?;
    }
    tracing::info!("metrics (Prometheus) on port {port}, path /metrics");
    Ok(())
}

fn serve(shared: &Shared, server: &tiny_http::Server) {
    for req in server.incoming_requests() {
        let ok = *req.method() == tiny_http::Method::Get
            && req.url().split('?').next() == Some("/metrics");
        let response = if ok {
            let header = tiny_http::Header::from_bytes(
                "Content-Type",
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )
            .ok();
            let mut r = tiny_http::Response::from_string(render(shared));
            if let Some(h) = header {
                r = r.with_header(h);
            }
            r
        } else {
            tiny_http::Response::from_string("not found: the metrics are at GET /metrics\n")
                .with_status_code(404)
        };
        let _ = req.respond(response);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(info: &str, cluster: &str) -> String {
        let mut b = Builder {
            registry: Registry::default(),
            names: HashSet::new(),
        };
        from_info(&mut b, info);
        from_cluster_info(&mut b, cluster);
        let mut s = String::new();
        encode(&mut s, &b.registry).unwrap();
        s
    }

    #[test]
    fn info_and_cluster_info_become_counters_gauges_and_families() {
        let info = "# Clients\r\nconnected_clients:3\r\nmaster_replid2:0000000000000000000000000000000000000000\r\n# Stats\r\ntotal_commands_processed:42\r\nkeyspace_hits:7\r\nrole:master\r\n# Commandstats\r\ncmdstat_get:calls=5,usec=2000000,usec_per_call=400000.00,failed_calls=1\r\n# Keyspace\r\ndb0:keys=9,expires=2,avg_ttl=1500\r\n";
        let cluster = "cluster_state:ok\r\ncluster_known_nodes:6\r\ncluster_stats_messages_ping_sent:10\r\ncluster_stats_messages_sent:10\r\ncluster_stats_messages_pong_received:4\r\n";
        let text = build(info, cluster);
        for want in [
            "# TYPE ferrocluster_connected_clients gauge\nferrocluster_connected_clients 3.0\n",
            "# TYPE ferrocluster_commands_processed counter\nferrocluster_commands_processed_total 42.0\n",
            "ferrocluster_keyspace_hits_total 7.0\n",
            "ferrocluster_command_calls_total{cmd=\"get\"} 5.0\n",
            "ferrocluster_command_duration_seconds_total{cmd=\"get\"} 2.0\n",
            "ferrocluster_command_failed_calls_total{cmd=\"get\"} 1.0\n",
            "ferrocluster_db_keys{db=\"0\"} 9.0\n",
            "ferrocluster_db_expires{db=\"0\"} 2.0\n",
            "ferrocluster_cluster_state_ok 1.0\n",
            "ferrocluster_cluster_known_nodes 6.0\n",
            "ferrocluster_cluster_bus_messages_total{type=\"ping\",direction=\"sent\"} 10.0\n",
            "ferrocluster_cluster_bus_messages_total{type=\"pong\",direction=\"received\"} 4.0\n",
        ] {
            assert!(text.contains(want), "{want:?} missing in:\n{text}");
        }
        assert!(!text.contains("role"), "non-numeric fields are left out");
        assert!(!text.contains("replid"), "identifiers are left out");
        assert!(text.ends_with("# EOF\n"));
    }
}

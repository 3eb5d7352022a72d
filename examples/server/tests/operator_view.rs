//! The operator's view (issue 20): CLIENT LIST / KILL across I/O threads, CLIENT PAUSE /
//! UNPAUSE, SLOWLOG, MONITOR and INFO `commandstats`, with the texts that must equal
//! redis-server 7.0's compared against a real one; the latency monitor and the Prometheus
//! endpoint; INFO keyspace. Ports from `common::ports`.

#![allow(clippy::disallowed_methods)] // tests measure waits with the clock

mod common;

use common::{
    bulk_text, ports, start_real_server, test_dir, wait_until, Client, Procs, Resp, HANG,
};
use std::io::Read;

/// `key=value` fields of a CLIENT INFO / LIST line.
fn fields(line: &str) -> Vec<(String, String)> {
    line.split(' ')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn field(line: &str, name: &str) -> String {
    fields(line)
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no {name}= in {line}"))
}

fn list_lines(c: &mut Client, args: &[&str]) -> Vec<String> {
    let reply = c.cmd(args);
    bulk_text(&reply)
        .lines()
        .map(str::to_string)
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn client_list_and_kill_see_every_connection_on_every_io_thread() {
    let dir = test_dir("operator-clients");
    let mut procs = Procs::default();
    let port = ports::port();
    procs.start(
        &dir,
        port,
        &["--cluster-enabled", "no", "--io-threads", "2"],
    );
    // Connected one after another: each connection is accepted before the next one starts.
    let mut me = Client::connect(port);
    let mut others: Vec<Client> = (0..5).map(|_| Client::connect(port)).collect();
    for (i, o) in others.iter_mut().enumerate() {
        assert_eq!(o.cmd_s(&["CLIENT", "SETNAME", &format!("c{i}")]), "+OK\r\n");
    }
    wait_probe_gone(&mut me, 6);
    let my_id = me.cmd_s(&["CLIENT", "ID"]);
    let my_id = my_id.trim_start_matches(':').trim().to_string();
    let lines = list_lines(&mut me, &["CLIENT", "LIST"]);
    assert_eq!(lines.len(), 6, "{lines:?}");
    // Client IDs follow the accept order, whichever I/O thread took each connection (Redis
    // `createClient`), and CLIENT LIST lists clients in ID order (Valkey 9.1): me first, then
    // c0..c4 as they connected.
    let names: Vec<String> = lines.iter().map(|l| field(l, "name")).collect();
    assert_eq!(names, ["", "c0", "c1", "c2", "c3", "c4"], "{lines:?}");
    assert_eq!(field(&lines[0], "id"), my_id);
    let ids: Vec<u64> = lines
        .iter()
        .map(|l| field(l, "id").parse().unwrap())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    for l in &lines {
        // Real figures, not constants: every socket has its own descriptor.
        assert!(field(l, "fd").parse::<i32>().unwrap() > 2, "{l}");
        assert_eq!(field(l, "flags"), "N");
        for absent in ["argv-mem", "obl", "oll", "rbp"] {
            assert!(
                fields(l).iter().all(|(k, _)| k != absent),
                "{absent} in {l}"
            );
        }
    }
    let fds: std::collections::BTreeSet<String> = lines.iter().map(|l| field(l, "fd")).collect();
    assert_eq!(fds.len(), 6);
    let mine = lines.iter().find(|l| field(l, "id") == my_id).unwrap();
    assert_eq!(field(mine, "cmd"), "client|list");

    // ID filter: each client asked for once, in ID order (Valkey 9.1; Redis 7.0 answers in
    // the order asked and repeats a repeated ID).
    let one = field(&lines[1], "id");
    let got = list_lines(&mut me, &["CLIENT", "LIST", "ID", &one, &my_id, &one]);
    let got_ids: Vec<String> = got.iter().map(|l| field(l, "id")).collect();
    assert_eq!(got_ids, [my_id.clone(), one.clone()]);
    assert_eq!(
        me.cmd_s(&["CLIENT", "LIST", "TYPE", "bogus"]),
        "-ERR Unknown client type 'bogus'\r\n"
    );

    // KILL by ID closes that connection only; old style by address; SKIPME.
    let victim = field(
        &lines
            .iter()
            .find(|l| field(l, "name") == "c0")
            .unwrap()
            .clone(),
        "id",
    );
    assert_eq!(me.cmd_s(&["CLIENT", "KILL", "ID", &victim]), ":1\r\n");
    let addr1 = field(
        lines.iter().find(|l| field(l, "name") == "c1").unwrap(),
        "addr",
    );
    assert_eq!(me.cmd_s(&["CLIENT", "KILL", &addr1]), "+OK\r\n");
    assert_eq!(
        me.cmd_s(&["CLIENT", "KILL", "10.0.0.1:1"]),
        "-ERR No such client\r\n"
    );
    for o in others.iter_mut().take(2) {
        assert!(o.read_to_close().is_empty());
    }
    assert_eq!(me.cmd_s(&["CLIENT", "KILL", "TYPE", "normal"]), ":3\r\n");
    for o in others.iter_mut().skip(2) {
        assert!(o.read_to_close().is_empty());
    }
    // The caller survived (SKIPME yes is the default).
    assert_eq!(list_lines(&mut me, &["CLIENT", "LIST"]).len(), 1);
    assert_eq!(
        me.cmd_s(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "no"]),
        ":1\r\n"
    );
    assert!(me.read_to_close().is_empty());
}

#[test]
fn client_pause_holds_writes_or_everything_until_unpause_or_timeout() {
    let dir = test_dir("operator-pause");
    let mut procs = Procs::default();
    let [port, metrics] = ports::ports(2)[..] else {
        unreachable!()
    };
    let metrics_arg = metrics.to_string();
    procs.start(
        &dir,
        port,
        &["--cluster-enabled", "no", "--metrics-port", &metrics_arg],
    );
    common::wait_for_port(metrics);
    let mut admin = Client::connect(port);
    let mut c = Client::connect(port);
    assert_eq!(c.cmd_s(&["SET", "k", "1"]), "+OK\r\n");
    assert_eq!(
        admin.cmd_s(&["CLIENT", "PAUSE", "600000", "WRITE"]),
        "+OK\r\n"
    );
    // Reads go on; a write waits, and the server says the client is blocked (INFO
    // `blocked_clients`, flag `b`, as Redis 7.0 and Valkey 9.1 show a paused client).
    assert_eq!(c.cmd_s(&["GET", "k"]), "$1\r\n1\r\n");
    let c_id = c.cmd_s(&["CLIENT", "ID"]);
    let c_id = c_id.trim_start_matches(':').trim().to_string();
    c.send_raw(&common::encode(&[b"SET", b"k", b"2"]));
    wait_paused(&mut admin, &c_id);
    assert_eq!(
        admin.cmd_s(&["GET", "k"]),
        "$1\r\n1\r\n",
        "the write waited"
    );
    assert_eq!(admin.cmd_s(&["CLIENT", "UNPAUSE"]), "+OK\r\n");
    assert_eq!(c.read_reply(), b"+OK\r\n");
    assert_eq!(admin.cmd_s(&["GET", "k"]), "$1\r\n2\r\n");
    assert!(bulk_text(&admin.cmd(&["INFO", "clients"])).contains("blocked_clients:0\r\n"));
    assert_eq!(
        admin.cmd_s(&["CLIENT", "PAUSE", "10", "SOME"]),
        "-ERR CLIENT PAUSE mode must be WRITE or ALL\r\n"
    );
    // ALL: reads wait too. A short pause ends by itself (no UNPAUSE) and the held read is
    // answered then.
    assert_eq!(admin.cmd_s(&["CLIENT", "PAUSE", "200"]), "+OK\r\n");
    assert_eq!(c.cmd_s(&["GET", "k"]), "$1\r\n2\r\n");
    // Under a long ALL pause every client's commands wait, CLIENT UNPAUSE and INFO too (as
    // valkey-server 9.1 does), so the held read is seen from outside the clients: the
    // Prometheus endpoint's `blocked_clients`. The pause never ends; the node is killed.
    assert_eq!(
        admin.cmd_s(&["CLIENT", "PAUSE", "600000", "ALL"]),
        "+OK\r\n"
    );
    c.send_raw(&common::encode(&[b"GET", b"k"]));
    wait_until("the paused read to show on the metrics endpoint", || {
        http_get(metrics, "/metrics").contains("\nferrocluster_blocked_clients 1")
    });
    c.stream.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let unanswered = matches!(
        c.stream.read(&mut byte),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
    );
    assert!(unanswered, "the read was answered during an ALL pause");
}

/// Under CLIENT PAUSE WRITE keys do not expire (Valkey pauses expiry with writes): a key past
/// its TTL reads as missing but stays in the data set, nothing is counted expired, and it is
/// deleted once the pause ends. The same steps on valkey-server 9.1 and on ours.
#[test]
fn keys_do_not_expire_under_client_pause_write() {
    let dir = test_dir("operator-pause-expiry");
    let [ours, valkey] = ports::ports(2)[..] else {
        unreachable!()
    };
    let mut procs = Procs::default();
    procs.start(&dir, ours, &["--cluster-enabled", "no"]);
    let _valkey = start_real_server("valkey-server", valkey, &dir.join("valkey"), &[]);
    for port in [ours, valkey] {
        let mut c = Client::connect(port);
        // The key and the pause in one transaction: nothing can expire between them.
        assert_eq!(c.cmd_s(&["MULTI"]), "+OK\r\n");
        c.cmd(&["SET", "k", "v", "PX", "100"]);
        c.cmd(&["CLIENT", "PAUSE", "600000", "WRITE"]);
        assert_eq!(c.cmd_s(&["EXEC"]), "*2\r\n+OK\r\n+OK\r\n");
        wait_until(&format!("{port}: k to read as missing"), || {
            c.cmd_s(&["GET", "k"]) == "$-1\r\n"
        });
        let stats = bulk_text(&c.cmd(&["INFO", "stats"]));
        assert_eq!(info_value(&stats, "expired_keys"), 0, "{port}");
        assert_eq!(
            c.cmd_s(&["DBSIZE"]),
            ":1\r\n",
            "{port}: k is kept under the pause"
        );
        assert_eq!(c.cmd_s(&["CLIENT", "UNPAUSE"]), "+OK\r\n");
        wait_until(&format!("{port}: k to expire after the pause"), || {
            c.cmd_s(&["DBSIZE"]) == ":0\r\n"
        });
    }
}

/// A field of an INFO reply (`name:value` line).
fn info_value(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

/// Waits until the server has seen the start-up probe's connection (`Logged::wait_listening`
/// and `start_real_server` connect once and close at once) come and go: `mine` connections are
/// open and answered already (`c` is one of them), one more was received (the probe) and is
/// closed. Until then the probe may still be listed (a CLIENT LIST line, a kill counted).
/// Our server and valkey-server count `total_connections_received` and `connected_clients`
/// alike (a connection counts in both once the server took it).
fn wait_probe_gone(c: &mut Client, mine: u64) {
    wait_until("the start-up probe's connection to be closed", || {
        let text = bulk_text(&c.cmd(&["INFO", "clients", "stats"]));
        info_value(&text, "connected_clients") == mine
            && info_value(&text, "total_connections_received") == mine + 1
    });
}

/// Waits until CLIENT LIST shows client `id` blocked (`b`) and INFO counts one blocked client.
fn wait_paused(admin: &mut Client, id: &str) {
    wait_until("the paused client to show as blocked", || {
        let lines = list_lines(admin, &["CLIENT", "LIST", "ID", id]);
        lines.len() == 1
            && field(&lines[0], "flags").contains('b')
            && bulk_text(&admin.cmd(&["INFO", "clients"])).contains("blocked_clients:1\r\n")
    });
}

/// Runs the same session on a server and returns the MONITOR lines (timestamp and client
/// port cut) and the SLOWLOG GET reply shape (id, time, duration and address cut).
fn monitor_and_slowlog(port: u16) -> (Vec<String>, Vec<String>) {
    let mut mon = Client::connect(port);
    assert_eq!(mon.cmd_s(&["MONITOR"]), "+OK\r\n");
    let mut c = Client::connect(port);
    c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    c.cmd(&["SLOWLOG", "RESET"]);
    c.cmd(&["CLIENT", "SETNAME", "probe"]);
    c.cmd(&["SET", "quote\"d", "line\nbreak\x01\\"]);
    let long = "x".repeat(140);
    let mut many: Vec<String> = vec!["RPUSH".into(), "list".into()];
    many.extend((0..40).map(|i| format!("e{i}")));
    many[2] = long;
    let many_ref: Vec<&str> = many.iter().map(String::as_str).collect();
    c.cmd(&many_ref);
    c.cmd(&["GET", "missing"]);
    let slow = c.cmd(&["SLOWLOG", "GET", "3"]);
    c.cmd(&["SET", "done", "1"]);
    // MONITOR lines up to the marker.
    let mut text = String::new();
    let mut buf = [0u8; 4096];
    mon.stream.set_read_timeout(Some(HANG)).unwrap();
    while !text.contains("\"done\"") {
        let n = mon.stream.read(&mut buf).expect("monitor lines");
        assert!(n > 0, "monitor closed");
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    let lines = text
        .lines()
        .map(|l| {
            // `+<ts> [<db> <ip:port>] args` -> `[<db>] args`
            let (_, rest) = l.split_once(' ').unwrap();
            let (where_, args) = rest.split_once("] ").unwrap();
            let db = where_.trim_start_matches('[').split(' ').next().unwrap();
            format!("[{db}] {args}")
        })
        .collect();
    // SLOWLOG GET: per entry, its arguments and name (ids, times, durations and the
    // client's port vary).
    let shape = String::from_utf8_lossy(&slow)
        .split("\r\n")
        .filter(|p| !p.is_empty())
        .filter(|p| !p.starts_with(['$', '*', ':']) && !p.starts_with("127.0.0.1:"))
        .map(str::to_string)
        .collect();
    (lines, shape)
}

#[test]
fn monitor_lines_and_slowlog_entries_are_redis_7s() {
    let dir = test_dir("operator-monitor");
    let mut procs = Procs::default();
    let [port, redis_port] = ports::ports(2)[..] else {
        unreachable!()
    };
    procs.start(&dir, port, &["--cluster-enabled", "no"]);
    let _redis = start_real_server("redis-server", redis_port, &dir.join("redis"), &[]);
    let ours = monitor_and_slowlog(port);
    let theirs = monitor_and_slowlog(redis_port);
    assert_eq!(ours.0, theirs.0, "MONITOR lines");
    assert_eq!(ours.1, theirs.1, "SLOWLOG GET entries");
    assert!(
        ours.1.iter().any(|l| l == "... (11 more arguments)"),
        "{:?}",
        ours.1
    );
    // Per-command statistics count what ran.
    let mut c = Client::connect(port);
    let info = bulk_text(&c.cmd(&["INFO", "commandstats"]));
    let get = info
        .lines()
        .find(|l| l.starts_with("cmdstat_get:"))
        .unwrap_or_else(|| panic!("{info}"));
    assert!(get.starts_with("cmdstat_get:calls=1,usec="), "{get}");
    wait_until("slowlog len", || c.cmd_s(&["SLOWLOG", "LEN"]) != ":0\r\n");
    assert_eq!(c.cmd_s(&["SLOWLOG", "RESET"]), "+OK\r\n");
    assert_eq!(
        c.cmd_s(&["SLOWLOG", "LEN"]),
        ":1\r\n",
        "RESET itself is logged next"
    );
}

/// INFO commandstats counts commands refused before they ran as `rejected_calls` (wrong
/// arity, a command not allowed in MULTI), apart from `calls` and `failed_calls`: the same
/// steps on valkey-server 9.1 and on ours, the lines compared without their times.
#[test]
fn rejected_calls_are_counted_as_valkey_counts_them() {
    let dir = test_dir("operator-rejected");
    let [ours, valkey] = ports::ports(2)[..] else {
        unreachable!()
    };
    let mut procs = Procs::default();
    procs.start(&dir, ours, &["--cluster-enabled", "no"]);
    let _valkey = start_real_server("valkey-server", valkey, &dir.join("valkey"), &[]);
    let lines = |port: u16| -> Vec<String> {
        let mut c = Client::connect(port);
        c.cmd(&["CONFIG", "RESETSTAT"]);
        c.cmd(&["SET", "k", "v"]);
        c.cmd(&["GET"]);
        c.cmd(&["GET", "a", "b"]);
        c.cmd(&["GET", "k"]);
        c.cmd(&["INCR", "k"]);
        c.cmd(&["MULTI"]);
        c.cmd(&["MULTI"]);
        c.cmd(&["DISCARD"]);
        let info = bulk_text(&c.cmd(&["INFO", "commandstats"]));
        let mut lines: Vec<String> = info
            .lines()
            .filter(|l| l.starts_with("cmdstat_") && !l.starts_with("cmdstat_config"))
            .map(|l| {
                // calls=..,usec=..,usec_per_call=..,rejected_calls=..,failed_calls=..
                l.split(',')
                    .filter(|f| !f.starts_with("usec"))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect();
        lines.sort();
        lines
    };
    let want = lines(valkey);
    assert!(
        want.iter()
            .any(|l| l == "cmdstat_get:calls=1,rejected_calls=2,failed_calls=0"),
        "{want:?}"
    );
    assert_eq!(lines(ours), want);
}

fn http_get(port: u16, path: &str) -> String {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("metrics port");
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text
}

#[test]
fn the_prometheus_endpoint_serves_info_commandstats_bus_and_slot_figures() {
    let dir = test_dir("operator-metrics");
    let mut procs = Procs::default();
    let [port, metrics] = ports::ports(2)[..] else {
        unreachable!()
    };
    procs.start(&dir, port, &["--metrics-port", &metrics.to_string()]);
    common::wait_for_port(metrics);
    let mut c = Client::connect(port);
    assert_eq!(
        c.cmd_s(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]),
        "+OK\r\n"
    );
    wait_until("cluster ok", || {
        bulk_text(&c.cmd(&["CLUSTER", "INFO"])).contains("cluster_state:ok")
    });
    for k in ["a", "b", "c"] {
        assert_eq!(c.cmd_s(&["SET", k, "v"]), "+OK\r\n");
    }
    let page = http_get(metrics, "/metrics");
    assert!(
        page.starts_with("HTTP/1.0 200") || page.starts_with("HTTP/1.1 200"),
        "{page}"
    );
    // Slots of a, b and c: 15495, 3300, 7365.
    for want in [
        "ferrocluster_command_calls_total{cmd=\"set\"} 3.0\n",
        "ferrocluster_db_keys{db=\"0\"} 3.0\n",
        "ferrocluster_cluster_state_ok 1.0\n",
        "ferrocluster_cluster_slots_assigned 16384.0\n",
        "ferrocluster_slot_keys{slot=\"15495\"} 1.0\n",
        "ferrocluster_slot_keys{slot=\"3300\"} 1.0\n",
        "ferrocluster_slot_keys{slot=\"7365\"} 1.0\n",
        "# EOF\n",
    ] {
        assert!(page.contains(want), "{want:?} missing in:\n{page}");
    }
    assert!(http_get(metrics, "/other").contains(" 404 "));
}

/// The wall clock, unix ms (the clock the server stamps samples and deadlines with).
fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[test]
fn the_latency_monitor_records_commands_over_its_threshold_only_when_on() {
    let dir = test_dir("operator-latency");
    let mut procs = Procs::default();
    let port = ports::port();
    procs.start(&dir, port, &["--cluster-enabled", "no"]);
    let mut c = Client::connect(port);
    // Off by default (latency-monitor-threshold 0): a slow command leaves nothing.
    assert_eq!(
        c.cmd_s(&["CONFIG", "GET", "latency-monitor-threshold"]),
        "*2\r\n$25\r\nlatency-monitor-threshold\r\n$1\r\n0\r\n"
    );
    assert_eq!(c.cmd_s(&["DEBUG", "POPULATE", "200000"]), "+OK\r\n");
    assert_eq!(c.cmd_s(&["LATENCY", "LATEST"]), "*0\r\n");
    // On (1 ms) for three commands, then off again: what was recorded is from those (and
    // maybe an expiry run of the timer thread, `expire-cycle`, that took 1 ms or more on a
    // loaded machine), stamped within the seconds the clock reads around them span.
    let on_s = unix_ms() / 1000;
    assert_eq!(
        c.cmd_s(&["CONFIG", "SET", "latency-monitor-threshold", "1"]),
        "+OK\r\n"
    );
    assert_eq!(c.cmd_s(&["FLUSHALL"]), "+OK\r\n");
    assert_eq!(c.cmd_s(&["DEBUG", "POPULATE", "200000"]), "+OK\r\n");
    assert_eq!(
        c.cmd_s(&["CONFIG", "SET", "latency-monitor-threshold", "0"]),
        "+OK\r\n"
    );
    let off_s = unix_ms() / 1000;
    let latest = Resp::parse(&c.cmd(&["LATENCY", "LATEST"]));
    // `command` (DEBUG is not a fast command; none of the three is), four fields per event.
    let events: Vec<(String, i64, i64, i64)> = latest
        .array()
        .iter()
        .map(|e| match e.array() {
            [name, t, last, max] => (name.bulk().to_string(), t.int(), last.int(), max.int()),
            other => panic!("not a LATEST entry: {other:?}"),
        })
        .collect();
    let names: Vec<&str> = events.iter().map(|e| e.0.as_str()).collect();
    assert!(names.contains(&"command"), "{latest:?}");
    assert!(!names.contains(&"fast-command"), "{latest:?}");
    assert!(
        names
            .iter()
            .all(|n| ["command", "expire-cycle"].contains(n)),
        "{latest:?}"
    );
    // One sample per second a slow command ended in: at least one (DEBUG POPULATE 200000),
    // at most one per second the clock reads span, each in that span, in order, each at or
    // over the threshold; LATEST shows the last one and the maximum.
    let history = Resp::parse(&c.cmd(&["LATENCY", "HISTORY", "command"]));
    let samples: Vec<(i64, i64)> = history
        .array()
        .iter()
        .map(|e| match e.array() {
            [t, ms] => (t.int(), ms.int()),
            other => panic!("not a HISTORY entry: {other:?}"),
        })
        .collect();
    let seconds = (off_s - on_s + 1) as usize;
    assert!(
        !samples.is_empty() && samples.len() <= seconds,
        "{} samples over {seconds} s: {history:?}",
        samples.len()
    );
    assert!(
        samples
            .iter()
            .all(|&(t, ms)| (on_s..=off_s).contains(&t) && ms >= 1),
        "samples outside {on_s}..={off_s} or under 1 ms: {history:?}"
    );
    assert!(samples.windows(2).all(|w| w[0].0 < w[1].0), "{history:?}");
    let command = events.iter().find(|e| e.0 == "command").unwrap();
    let (last_t, last_ms) = *samples.last().unwrap();
    let max_ms = samples.iter().map(|s| s.1).max().unwrap();
    assert_eq!(
        (command.1, command.2, command.3),
        (last_t, last_ms, max_ms),
        "LATEST {latest:?} vs HISTORY {history:?}"
    );
    assert_eq!(c.cmd_s(&["LATENCY", "HISTORY", "nothing"]), "*0\r\n");
    assert_eq!(c.cmd_s(&["LATENCY", "RESET", "nothing"]), ":0\r\n");
    // Off: nothing more was recorded; RESET drops the events LATEST listed.
    assert_eq!(
        c.cmd_s(&["LATENCY", "RESET"]),
        format!(":{}\r\n", events.len())
    );
    assert_eq!(c.cmd_s(&["LATENCY", "LATEST"]), "*0\r\n");
}

/// The `db0:` line of INFO keyspace, split into its fields.
fn keyspace_fields(port: u16) -> Vec<(String, String)> {
    let mut c = Client::connect(port);
    let info = bulk_text(&c.cmd(&["INFO", "keyspace"]));
    let line = info
        .lines()
        .find_map(|l| l.strip_prefix("db0:"))
        .unwrap_or_else(|| panic!("{info}"));
    line.split(',')
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (k.to_string(), v.to_string())
        })
        .collect()
}

#[test]
fn info_keyspace_counts_keys_with_a_deadline_and_their_mean_ttl_as_redis_7_prints_them() {
    let dir = test_dir("operator-keyspace");
    let mut procs = Procs::default();
    let [ours_port, redis_port] = ports::ports(2)[..] else {
        unreachable!()
    };
    procs.start(&dir, ours_port, &["--cluster-enabled", "no"]);
    let _redis = start_real_server("redis-server", redis_port, &dir.join("redis"), &[]);
    let fill = |port: u16| {
        let mut c = Client::connect(port);
        assert_eq!(c.cmd_s(&["SET", "a", "1"]), "+OK\r\n");
        assert_eq!(c.cmd_s(&["SET", "b", "2", "PX", "1000000"]), "+OK\r\n");
        assert_eq!(c.cmd_s(&["SET", "c", "3", "PX", "500000"]), "+OK\r\n");
        assert_eq!(c.cmd_s(&["SET", "d", "4", "EX", "30"]), "+OK\r\n");
        assert_eq!(c.cmd_s(&["PERSIST", "d"]), ":1\r\n");
    };
    // The clock read before the SETs and after the INFO bound how much of the TTLs has passed.
    let before = unix_ms();
    fill(ours_port);
    let ours = keyspace_fields(ours_port);
    let elapsed = unix_ms() - before;
    fill(redis_port);
    let theirs = keyspace_fields(redis_port);
    // The same fields in the same order as redis-server 7.0, the same counts.
    let names = |f: &[(String, String)]| f.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    assert_eq!(names(&ours), names(&theirs), "{ours:?} vs {theirs:?}");
    assert_eq!(ours[..2], theirs[..2], "keys= and expires=");
    assert_eq!(ours[1].1, "2");
    // avg_ttl: ours is the exact mean of the two remaining TTLs (1000 s and 500 s, minus the
    // time since they were set, at most `elapsed` ms); Redis's is a sampled estimate (0 until
    // its expiry cycle has seen the keys).
    let avg: i64 = ours[2].1.parse().unwrap();
    assert!(
        (750_000 - elapsed..=750_000).contains(&avg),
        "avg_ttl={avg}, {elapsed} ms after the SETs"
    );
}

/// `CLIENT LIST` and `CLIENT KILL` filters, side by side with valkey-server 9.1: the same four
/// connections on each server, the same filters (IDs given as connection numbers), the same
/// answer (the listed connections, by number, the kill count, or the exact error). Redis 7.0
/// differs (its LIST takes `TYPE` or `ID` alone, answers IDs in the order asked); we follow
/// Valkey.
#[test]
fn client_filters_answer_as_valkey_9_1() {
    let dir = test_dir("operator-list-filters");
    let mut procs = Procs::default();
    let [ours, valkey] = ports::ports(2)[..] else {
        unreachable!()
    };
    procs.start(
        &dir,
        ours,
        &["--cluster-enabled", "no", "--io-threads", "2"],
    );
    let _valkey = start_real_server("valkey-server", valkey, &dir.join("valkey"), &[]);
    // `{n}` is connection n's ID; connection 0 asks.
    let cases: &[&[&str]] = &[
        &[],
        &["ID", "{3}", "{1}", "{1}", "{2}"],
        &["ID", "{2}", "999999"],
        &["ID", "0", "{1}"],
        &["ID", "-1"],
        &["ID", "x"],
        &["ID"],
        &["ID", "{1}", "x"],
        &["ID", "{1}", "TYPE", "normal", "ID", "{2}"],
        &["ID", "{1}", "ID", "{3}"],
        &["ID", "{2}", "TYPE", "normal"],
        &["ID", "{2}", "TYPE"],
        &["ID", "04"],
        &["TYPE", "normal", "TYPE", "pubsub"],
        &["TYPE", "pubsub", "TYPE", "normal"],
        &["TYPE", "bogus"],
        &["TYPE", "master"],
        &["TYPE", "replica"],
        &["SKIPME", "yes"],
        &["SKIPME", "no"],
        &["SKIPME", "maybe"],
        &["ID", "{0}", "{1}", "SKIPME", "yes"],
        &["USER", "default"],
        &["USER", "nobody"],
        &["MAXAGE", "0"],
        &["MAXAGE", "-1"],
        &["MAXAGE", "x"],
        &["MAXAGE", "100000"],
        &["ADDR"],
        &["BOGUS", "1"],
    ];
    // CLIENT KILL shares the filters (Valkey `parseClientFilters`): cases that kill nobody.
    let kills: &[&[&str]] = &[
        &["ID", "0"],
        &["ID", "x"],
        &["ID", "{1}", "TYPE"],
        &["ID", "999999", "999998"],
        &["ID", "999999", "ID", "999998"],
        &["MAXAGE", "x"],
        &["MAXAGE", "0"],
        &["MAXAGE", "100000"],
        &["SKIPME", "maybe"],
        &["USER", "nobody"],
        &["ADDR", "10.0.0.1:1"],
        &["TYPE", "pubsub"],
        &["TYPE", "normal", "SKIPME", "yes", "TYPE", "pubsub"],
        &["BOGUS", "1"],
    ];
    let run = |port: u16| -> Vec<String> {
        let mut conns: Vec<Client> = (0..4).map(|_| Client::connect(port)).collect();
        let ids: Vec<String> = conns
            .iter_mut()
            .map(|c| {
                c.cmd_s(&["CLIENT", "ID"])
                    .trim_start_matches(':')
                    .trim()
                    .to_string()
            })
            .collect();
        wait_probe_gone(&mut conns[0], 4);
        let list = cases.iter().map(|c| ("LIST", c));
        let kill = kills.iter().map(|c| ("KILL", c));
        list.chain(kill)
            .map(|(sub, case)| {
                let mut args = vec!["CLIENT".to_string(), sub.to_string()];
                for a in case.iter() {
                    let mut a = a.to_string();
                    for (n, id) in ids.iter().enumerate() {
                        a = a.replace(&format!("{{{n}}}"), id);
                    }
                    args.push(a);
                }
                let argv: Vec<&str> = args.iter().map(String::as_str).collect();
                let reply = conns[0].cmd(&argv);
                if reply.starts_with(b"-") || reply.starts_with(b":") {
                    return format!(
                        "{sub} {case:?} -> {}",
                        String::from_utf8_lossy(&reply).trim_end()
                    );
                }
                let listed: Vec<String> = bulk_text(&reply)
                    .lines()
                    .filter(|l| !l.is_empty())
                    .map(|l| {
                        let id = field(l, "id");
                        ids.iter()
                            .position(|i| *i == id)
                            .map_or(format!("other:{id}"), |n| n.to_string())
                    })
                    .collect();
                format!("{sub} {case:?} -> {listed:?}")
            })
            .collect()
    };
    let theirs = run(valkey);
    let got = run(ours);
    for (o, t) in got.iter().zip(&theirs) {
        assert_eq!(o, t, "ours vs valkey-server 9.1");
    }
    assert_eq!(got.len(), theirs.len());
}

/// Client IDs are given in accept order, on our server (two I/O threads) as on redis-server
/// 7.0: connections opened one after another get increasing IDs.
#[test]
fn client_ids_follow_the_accept_order_as_redis_7() {
    let dir = test_dir("operator-accept-order");
    let mut procs = Procs::default();
    let [ours, redis] = ports::ports(2)[..] else {
        unreachable!()
    };
    procs.start(
        &dir,
        ours,
        &["--cluster-enabled", "no", "--io-threads", "2"],
    );
    let _redis = start_real_server("redis-server", redis, &dir.join("redis"), &[]);
    for port in [ours, redis] {
        // All connected first (each accepted before the next connects), asked afterwards.
        let mut conns: Vec<Client> = (0..16).map(|_| Client::connect(port)).collect();
        let ids: Vec<u64> = conns
            .iter_mut()
            .map(|c| {
                c.cmd_s(&["CLIENT", "ID"])
                    .trim_start_matches(':')
                    .trim()
                    .parse()
                    .unwrap()
            })
            .collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "port {port}: {ids:?}");
    }
}

/// INFO `migrate_cached_sockets`: MIGRATE keeps its connection to a target for the next
/// MIGRATE, and closes it once idle for 10 s (Valkey `MIGRATE_SOCKET_CACHE_TTL`,
/// `migrateCloseTimedoutSockets`), here to a valkey-server 9.1 target.
#[test]
fn migrate_cached_sockets_are_counted_and_released_when_idle() {
    let dir = test_dir("operator-migrate-cache");
    let [ours, target] = ports::ports(2)[..] else {
        unreachable!()
    };
    let mut procs = Procs::default();
    procs.start(&dir, ours, &["--cluster-enabled", "no"]);
    let _valkey = start_real_server("valkey-server", target, &dir.join("valkey"), &[]);
    let mut c = Client::connect(ours);
    let cached = |c: &mut Client| {
        bulk_text(&c.cmd(&["INFO", "stats"]))
            .lines()
            .find_map(|l| l.strip_prefix("migrate_cached_sockets:"))
            .map(|v| v.trim().to_string())
            .expect("migrate_cached_sockets in INFO stats")
    };
    assert_eq!(cached(&mut c), "0");
    assert_eq!(c.cmd_s(&["SET", "k", "v"]), "+OK\r\n");
    let t = target.to_string();
    assert_eq!(
        c.cmd_s(&["MIGRATE", "127.0.0.1", &t, "k", "0", "5000"]),
        "+OK\r\n"
    );
    assert_eq!(cached(&mut c), "1");
    wait_until("the idle MIGRATE connection closed", || {
        cached(&mut c) == "0"
    });
    assert_eq!(Client::connect(target).cmd_s(&["GET", "k"]), "$1\r\nv\r\n");
}

/// `rdb-key-save-delay` (hidden, Valkey's DEBUG_CONFIG for slow saves): CONFIG GET names it
/// only when asked by name; with a long delay a BGSAVE stays in progress, and setting it back
/// to 0 lets the save end.
#[test]
fn rdb_key_save_delay_holds_a_bgsave_until_reset() {
    let dir = test_dir("operator-save-delay");
    let port = ports::port();
    let mut procs = Procs::default();
    procs.start(&dir, port, &["--cluster-enabled", "no"]);
    let mut c = Client::connect(port);
    assert!(!bulk_text(&c.cmd(&["CONFIG", "GET", "*"])).contains("rdb-key-save-delay"));
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "rdb-key-save-delay"]),
        b"*2\r\n$18\r\nrdb-key-save-delay\r\n$1\r\n0\r\n"
    );
    assert_eq!(c.cmd_s(&["SET", "k", "v"]), "+OK\r\n");
    let set = c.cmd_s(&["CONFIG", "SET", "rdb-key-save-delay", "10000000"]);
    assert_eq!(set, "+OK\r\n");
    assert_eq!(c.cmd_s(&["BGSAVE"]), "+Background saving started\r\n");
    let in_progress = |c: &mut Client| {
        bulk_text(&c.cmd(&["INFO", "persistence"])).contains("rdb_bgsave_in_progress:1")
    };
    assert!(in_progress(&mut c), "the save waits after its key");
    assert!(c.cmd_s(&["PING"]) == "+PONG\r\n" && in_progress(&mut c));
    assert_eq!(
        c.cmd_s(&["CONFIG", "SET", "rdb-key-save-delay", "0"]),
        "+OK\r\n"
    );
    wait_until("the save ended", || !in_progress(&mut c));
}

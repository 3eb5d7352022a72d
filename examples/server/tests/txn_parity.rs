//! Transactions and what watches commands, beside valkey-server 9.1, both one-node clusters
//! owning every slot (the mode Valkey's own suite runs in against us, issue 37):
//! - the write stream (`SYNC`): an EXEC with several writes goes out as `MULTI` ... `EXEC`
//!   (one write bare, none nothing), a served BLMOVE as `LMOVE` with the client's own words;
//! - MONITOR and INFO commandstats see MULTI and EXEC, CLIENT LIST shows `cmd=exec`;
//! - SLOWLOG and MONITOR show passwords and user names as `(redacted)`;
//! - LATENCY HISTOGRAM has the commands that ran, with their calls;
//! - `min-replicas-to-write` refuses writes and EXECs with Valkey's errors;
//! - a BCAST tracking client gets one invalidation per prefix for a whole transaction.
//!
//! Expected values are what valkey-server 9.1 does in the same steps. Ports from
//! `common::ports`.

mod common;

use common::stream::ReplStream;
use common::{
    bulk_text, encode, own_every_slot, ports, start_real_server, test_dir, wait_until, Client,
    Procs, RealServer, Resp,
};

/// Ours and valkey-server 9.1, each a one-node cluster owning every slot.
struct Pair {
    _procs: Procs,
    _valkey: RealServer,
    ours: u16,
    valkey: u16,
}

fn pair(name: &str) -> Pair {
    let dir = test_dir(name);
    let [ours, valkey] = ports::ports(2)[..] else {
        unreachable!()
    };
    let mut procs = Procs::default();
    procs.start(&dir, ours, &["--cluster-enabled", "yes"]);
    let v = start_real_server(
        "valkey-server",
        valkey,
        &dir.join("valkey"),
        &["--cluster-enabled", "yes"],
    );
    own_every_slot(ours);
    own_every_slot(valkey);
    Pair {
        _procs: procs,
        _valkey: v,
        ours,
        valkey,
    }
}

/// Runs `steps` on valkey-server 9.1, then on ours (fresh servers named after `name`), and
/// checks that ours gives what Valkey gives; returns Valkey's.
fn same_as_valkey<T: PartialEq + std::fmt::Debug>(name: &str, steps: fn(u16) -> T) -> T {
    let p = pair(name);
    let want = steps(p.valkey);
    let got = steps(p.ours);
    assert_eq!(got, want, "ours, then valkey-server 9.1");
    want
}

/// Waits until `port` counts `n` blocked clients.
fn wait_blocked(port: u16, n: usize) {
    let mut c = Client::connect(port);
    let want = format!("blocked_clients:{n}\r\n");
    wait_until(&format!("{port}: {want:?}"), || {
        bulk_text(&c.cmd(&["INFO", "clients"])).contains(&want)
    });
}

/// The stream commands the script produces on `port`, up to a marker write.
fn stream_of_script(port: u16) -> Vec<Vec<String>> {
    let mut s = ReplStream::attach(port);
    let mut c = Client::connect(port);
    let mut run = |args: &[&str]| c.cmd_s(args);
    for script in [
        &[
            &["MULTI"][..],
            &["SET", "a{t}", "1"],
            &["GET", "a{t}"],
            &["SET", "b{t}", "2"],
            &["EXEC"],
        ][..],
        &[&["MULTI"], &["EXEC"]],
        &[&["MULTI"], &["GET", "a{t}"], &["EXEC"]],
        &[&["MULTI"], &["DEL", "nosuch{t}"], &["EXEC"]],
        &[&["MULTI"], &["SET", "c{t}", "3"], &["EXEC"]],
    ] {
        for cmd in script {
            run(cmd);
        }
    }
    // Served blocked moves: the effect keeps the client's words.
    let mut b = Client::connect(port);
    b.send_raw(&encode(&[
        b"BLMOVE", b"src{t}", b"dst{t}", b"left", b"Right", b"0",
    ]));
    wait_blocked(port, 1);
    assert_eq!(run(&["LPUSH", "src{t}", "x"]), ":1\r\n");
    assert_eq!(b.read_reply(), b"$1\r\nx\r\n");
    b.send_raw(&encode(&[b"BRPOPLPUSH", b"src{t}", b"dst{t}", b"0"]));
    wait_blocked(port, 1);
    assert_eq!(run(&["RPUSH", "src{t}", "y"]), ":1\r\n");
    assert_eq!(b.read_reply(), b"$1\r\ny\r\n");
    assert_eq!(run(&["SET", "marker{t}", "end"]), "+OK\r\n");
    s.commands_until(&["set", "marker{t}", "end"])
}

#[test]
fn transactions_and_served_moves_reach_the_stream_as_on_valkey() {
    let p = pair("txn-stream");
    let want = stream_of_script(p.valkey);
    let got = stream_of_script(p.ours);
    assert_eq!(got, want, "ours, then valkey-server 9.1's stream");
    // Valkey's shape, spelled out: the three writes of the first EXEC inside MULTI/EXEC
    // with the SELECT after MULTI, the single write of the last EXEC bare.
    let words: Vec<String> = want.iter().map(|c| c.join(" ")).collect();
    assert_eq!(
        &words[..5],
        ["multi", "select 0", "set a{t} 1", "set b{t} 2", "exec"]
    );
    assert_eq!(words[5], "set c{t} 3");
    assert!(words.contains(&"lmove src{t} dst{t} left Right".to_string()));
}

/// MONITOR lines without their timestamp and client address.
fn monitor_lines(m: &mut Client, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| {
            let line = String::from_utf8_lossy(&m.read_reply()).into_owned();
            line.split_once("] ")
                .map(|(_, rest)| rest.trim_end().to_string())
                .unwrap_or(line)
        })
        .collect()
}

/// `(calls, rejected_calls, failed_calls)` of a command in INFO commandstats.
type CmdStat = (u64, u64, u64);

/// The [`CmdStat`] of `cmdstat_<name>` in INFO commandstats.
fn cmdstat(c: &mut Client, name: &str) -> Option<CmdStat> {
    let info = bulk_text(&c.cmd(&["INFO", "commandstats"]));
    let line = info
        .lines()
        .find(|l| l.starts_with(&format!("cmdstat_{name}:")))?;
    let field = |f: &str| -> u64 {
        line.split([':', ','])
            .find_map(|kv| kv.strip_prefix(&format!("{f}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{f} in {line}"))
    };
    Some((
        field("calls"),
        field("rejected_calls"),
        field("failed_calls"),
    ))
}

/// The id of the client `c`.
fn client_id(c: &mut Client) -> String {
    Resp::parse(&c.cmd(&["CLIENT", "ID"])).int().to_string()
}

/// MONITOR's lines for MULTI / EXEC / DISCARD (with an aborted EXEC), the commandstats of
/// those commands and SET, and whether another client's CLIENT LIST shows `cmd=exec` for
/// the client after its EXEC.
fn monitor_and_stats(port: u16) -> (Vec<String>, Vec<Option<CmdStat>>, bool) {
    let mut c = Client::connect(port);
    let id = client_id(&mut c);
    c.cmd(&["CONFIG", "RESETSTAT"]);
    let mut m = Client::connect(port);
    assert_eq!(m.cmd_s(&["MONITOR"]), "+OK\r\n");
    c.cmd(&["MULTI"]);
    c.cmd(&["SET", "foo", "bar"]);
    c.cmd(&["EXEC"]);
    c.cmd(&["MULTI"]);
    c.cmd(&["NOSUCHCOMMAND"]);
    let abort = c.cmd_s(&["EXEC"]);
    assert!(abort.starts_with("-EXECABORT"), "{port}: {abort}");
    c.cmd(&["MULTI"]);
    c.cmd(&["DISCARD"]);
    c.cmd(&["MULTI"]);
    c.cmd(&["EXEC"]);
    let lines = monitor_lines(&mut m, 9);
    let seen = bulk_text(&Client::connect(port).cmd(&["CLIENT", "LIST", "ID", &id]));
    let stats = ["multi", "exec", "discard", "set"]
        .iter()
        .map(|n| cmdstat(&mut c, n))
        .collect();
    (lines, stats, seen.contains(" cmd=exec "))
}

#[test]
fn monitor_commandstats_and_client_list_see_transactions_as_on_valkey() {
    let want = same_as_valkey("txn-monitor", monitor_and_stats);
    assert_eq!(
        want.0,
        [
            "\"MULTI\"",
            "\"SET\" \"foo\" \"bar\"",
            "\"EXEC\"",
            "\"MULTI\"",
            "\"EXEC\"",
            "\"MULTI\"",
            "\"DISCARD\"",
            "\"MULTI\"",
            "\"EXEC\""
        ]
    );
    assert!(want.2, "CLIENT LIST shows cmd=exec");
}

/// The argument lists SLOWLOG keeps for a run of commands with secrets, oldest first.
fn slowlog_of_secrets(port: u16) -> Vec<Vec<String>> {
    let mut c = Client::connect(port);
    c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    c.cmd(&["SLOWLOG", "RESET"]);
    for cmd in [
        &["CONFIG", "SET", "primaryuser", ""][..],
        &["CONFIG", "SET", "primaryauth", ""],
        &["CONFIG", "SET", "masterauth", "", "maxmemory-samples", "5"],
        &["CONFIG", "SET", "tls-key-file-pass", ""],
        &["CONFIG", "SET", "tls-client-key-file-pass", ""],
        &["ACL", "SETUSER", "slowlog-user", "+get", ">pw"],
        &["ACL", "GETUSER", "slowlog-user"],
        &["ACL", "DELUSER", "slowlog-user", "nobody"],
        &["AUTH", "not-real"],
        &["AUTH", "not-real", "not-a-password"],
        &[
            "MIGRATE",
            "127.0.0.1",
            "1",
            "nokey",
            "0",
            "5000",
            "AUTH2",
            "u",
            "pw",
        ],
    ] {
        c.cmd(cmd);
    }
    c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "-1"]);
    let log = Resp::parse(&c.cmd(&["SLOWLOG", "GET", "-1"]));
    let mut entries: Vec<Vec<String>> = log
        .array()
        .iter()
        .map(|e| {
            e.array()[3]
                .array()
                .iter()
                .map(|a| a.bulk().to_string())
                .collect()
        })
        .collect();
    entries.reverse();
    entries
}

#[test]
fn slowlog_redacts_secrets_as_valkey_does() {
    let want = same_as_valkey("txn-redact", slowlog_of_secrets);
    assert!(
        want.iter()
            .any(|e| e.join(" ") == "ACL SETUSER (redacted) (redacted) (redacted)"),
        "{want:?}"
    );
}

/// `(name, calls)` of every command in LATENCY HISTOGRAM after a few commands.
fn histogram_calls(port: u16) -> Vec<(String, i64)> {
    let mut c = Client::connect(port);
    c.cmd(&["CONFIG", "RESETSTAT"]);
    c.cmd(&["SET", "a", "b"]);
    c.cmd(&["SET", "c", "d"]);
    c.cmd(&["GET", "a"]);
    c.cmd(&["CLIENT", "ID"]);
    let mut out = Vec::new();
    for ask in [
        &["LATENCY", "HISTOGRAM"][..],
        &["LATENCY", "HISTOGRAM", "set", "client", "nosuch"],
    ] {
        let h = Resp::parse(&c.cmd(ask));
        for pair in h.array().chunks(2) {
            let fields = pair[1].array();
            assert_eq!(fields[0].bulk(), "calls");
            assert_eq!(fields[2].bulk(), "histogram_usec");
            // Cumulative counts, the last one all the calls.
            let points = fields[3].array();
            assert_eq!(points.last().map(Resp::int), Some(fields[1].int()));
            out.push((pair[0].bulk().to_string(), fields[1].int()));
        }
        out.push(("--".into(), 0));
    }
    // Without names, Valkey's order is its command table's hash order.
    let all = out.iter().position(|(n, _)| n == "--").unwrap_or(0);
    out[..all].sort();
    out
}

#[test]
fn latency_histogram_counts_calls_as_valkey_does() {
    same_as_valkey("txn-histogram", histogram_calls);
}

/// The replies to a write, an EXEC with a write and an EXEC of reads under
/// `min-replicas-to-write 1` without replicas, then the write once it is off again.
fn min_replicas(port: u16) -> Vec<String> {
    let mut c = Client::connect(port);
    let mut r = Vec::new();
    c.cmd(&["SET", "xx", "1"]);
    c.cmd(&["MULTI"]);
    c.cmd(&["INCR", "xx"]);
    r.push(Client::connect(port).cmd_s(&["CONFIG", "SET", "min-replicas-to-write", "1"]));
    r.push(c.cmd_s(&["EXEC"]));
    r.push(c.cmd_s(&["GET", "xx"]));
    r.push(c.cmd_s(&["SET", "xx", "2"]));
    c.cmd(&["MULTI"]);
    c.cmd(&["GET", "xx"]);
    r.push(c.cmd_s(&["EXEC"]));
    // A write queued while short of replicas: refused, and the EXEC aborts.
    c.cmd(&["MULTI"]);
    r.push(c.cmd_s(&["SET", "xx", "3"]));
    r.push(c.cmd_s(&["EXEC"]));
    r.push(bulk_text(&c.cmd(&["CONFIG", "GET", "min-slaves-to-write"])));
    // `min_slaves_good_slaves` and where it stands (the line before it).
    let info = bulk_text(&c.cmd(&["INFO", "replication"]));
    let lines: Vec<&str> = info.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("min_slaves_good_slaves"))
        .expect("min_slaves_good_slaves");
    r.push(format!(
        "{} then {}",
        lines[at - 1].split(':').next().unwrap_or(""),
        lines[at]
    ));
    r.push(c.cmd_s(&["CONFIG", "SET", "min-replicas-to-write", "0"]));
    r.push(c.cmd_s(&["SET", "xx", "2"]));
    r
}

#[test]
fn min_replicas_to_write_refuses_writes_as_valkey_does() {
    let want = same_as_valkey("txn-min-replicas", min_replicas);
    assert_eq!(
        want[1],
        "-EXECABORT Transaction discarded because of: NOREPLICAS Not enough good replicas to write.\r\n"
    );
    assert_eq!(
        want[3],
        "-NOREPLICAS Not enough good replicas to write.\r\n"
    );
}

/// The keys of the next `__redis__:invalidate` message on a subscribed RESP2 connection.
fn invalidation_keys(redir: &mut Client) -> Vec<String> {
    let msg = Resp::parse(&redir.read_reply());
    msg.array()[2]
        .array()
        .iter()
        .map(|k| k.bulk().to_string())
        .collect()
}

/// The invalidations a BCAST client with two prefixes gets for one transaction.
fn bcast_invalidations(port: u16) -> Vec<Vec<String>> {
    let mut redir = Client::connect(port);
    let id = client_id(&mut redir);
    redir.cmd(&["SUBSCRIBE", "__redis__:invalidate"]);
    let mut c = Client::connect(port);
    let on = c.cmd_s(&[
        "CLIENT", "TRACKING", "on", "BCAST", "REDIRECT", &id, "PREFIX", "a:", "PREFIX", "b:",
    ]);
    assert_eq!(on, "+OK\r\n");
    c.cmd(&["MULTI"]);
    for k in ["a:1{t}", "a:2{t}", "b:1{t}", "b:2{t}", "c:1{t}"] {
        c.cmd(&["INCR", k]);
    }
    c.cmd(&["EXEC"]);
    // A marker after the transaction: its message comes last.
    c.cmd(&["INCR", "a:marker"]);
    let mut got = Vec::new();
    loop {
        let keys = invalidation_keys(&mut redir);
        let end = keys.iter().any(|k| k == "a:marker");
        got.push(keys);
        if end {
            return got;
        }
    }
}

#[test]
fn bcast_tracking_sends_a_transaction_per_prefix_as_valkey_does() {
    let want = same_as_valkey("txn-bcast", bcast_invalidations);
    assert_eq!(want.len(), 3, "{want:?}");
}

/// The keys of the invalidations a BCAST NOLOOP client gets for a key that expires, up to a
/// marker key another client writes.
fn expired_invalidations(port: u16) -> Vec<Vec<String>> {
    let mut redir = Client::connect(port);
    let id = client_id(&mut redir);
    redir.cmd(&["SUBSCRIBE", "__redis__:invalidate"]);
    let mut c = Client::connect(port);
    let on = c.cmd_s(&[
        "CLIENT", "TRACKING", "on", "BCAST", "REDIRECT", &id, "NOLOOP",
    ]);
    assert_eq!(on, "+OK\r\n");
    c.cmd(&["SET", "mykey", "myval", "PX", "1"]);
    c.cmd(&["SET", "mykeyotherkey", "myval"]); // NOLOOP: not sent
    let mut got = Vec::new();
    loop {
        got.push(invalidation_keys(&mut redir));
        if got.last().is_some_and(|k| k.iter().any(|k| k == "mykey")) {
            // The marker, written by another client once the expiry was seen.
            Client::connect(port).cmd(&["SET", "marker", "1"]);
        }
        if got.last().is_some_and(|k| k.iter().any(|k| k == "marker")) {
            return got;
        }
    }
}

#[test]
fn tracking_invalidates_expired_keys_as_valkey_does() {
    let want = same_as_valkey("txn-expired-tracking", expired_invalidations);
    assert_eq!(want[0], ["mykey"]);
}

/// Under `CLIENT PAUSE ... WRITE` (transactions queued before it): an EXEC of reads answers
/// at once, an EXEC with a write and a PUBLISH wait for the end of the pause (counted as
/// blocked meanwhile).
fn exec_under_write_pause(port: u16) -> Vec<String> {
    let mut admin = Client::connect(port);
    admin.cmd(&["SET", "FOO", "BAR"]);
    let mut w = Client::connect(port);
    w.cmd(&["MULTI"]);
    w.cmd(&["SET", "FOO", "BAZ"]);
    let mut r = Client::connect(port);
    r.cmd(&["MULTI"]);
    r.cmd(&["PING"]);
    r.cmd(&["GET", "FOO"]);
    assert_eq!(
        admin.cmd_s(&["CLIENT", "PAUSE", "100000", "WRITE"]),
        "+OK\r\n"
    );
    let mut replies = vec![r.cmd_s(&["EXEC"])];
    // Refused before the pause check: answered at once.
    replies.push(Client::connect(port).cmd_s(&["SET", "FOO"]));
    w.send_raw(&encode(&[b"EXEC"]));
    wait_blocked(port, 1);
    let mut p = Client::connect(port);
    p.send_raw(&encode(&[b"PUBLISH", b"ch", b"m"]));
    wait_blocked(port, 2);
    assert_eq!(admin.cmd_s(&["CLIENT", "UNPAUSE"]), "+OK\r\n");
    replies.push(String::from_utf8_lossy(&w.read_reply()).into_owned());
    replies.push(String::from_utf8_lossy(&p.read_reply()).into_owned());
    replies
}

#[test]
fn a_write_pause_holds_only_execs_that_replicate_as_on_valkey() {
    let want = same_as_valkey("txn-pause", exec_under_write_pause);
    assert_eq!(want[0], "*2\r\n+PONG\r\n$3\r\nBAR\r\n");
}

/// The `evicted` event of a key, with no command after the CONFIG SET that lowered
/// `maxmemory` below the data set.
fn evicted_at_config_set(port: u16) -> String {
    let mut c = Client::connect(port);
    c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "Ee"]);
    c.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
    let mut sub = Client::connect(port);
    sub.cmd(&["PSUBSCRIBE", "*"]);
    c.cmd(&["SET", "foo", "bar"]);
    assert_eq!(c.cmd_s(&["CONFIG", "SET", "maxmemory", "1"]), "+OK\r\n");
    let event = String::from_utf8_lossy(&sub.read_reply()).into_owned();
    c.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
    event
}

#[test]
fn lowering_maxmemory_evicts_at_once_as_valkey_does() {
    let want = same_as_valkey("txn-evict", evicted_at_config_set);
    assert!(want.contains("__keyevent@0__:evicted"), "{want}");
}

/// What a client tracking two keys sees when `tracking-table-max-keys` drops to 1: the
/// number of invalidations (one key, either), then INFO's tracking counts.
fn tracking_table_limit(port: u16) -> (usize, Vec<String>) {
    let mut redir = Client::connect(port);
    let id = client_id(&mut redir);
    redir.cmd(&["SUBSCRIBE", "__redis__:invalidate"]);
    let mut c = Client::connect(port);
    c.cmd(&["MSET", "key1{t}", "1", "key2{t}", "2"]);
    let on = c.cmd_s(&["CLIENT", "TRACKING", "on", "REDIRECT", &id, "NOLOOP"]);
    assert_eq!(on, "+OK\r\n");
    c.cmd(&["MGET", "key1{t}", "key2{t}"]);
    let mut b = Client::connect(port);
    b.cmd(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "p:"]);
    let set = c.cmd_s(&["CONFIG", "SET", "tracking-table-max-keys", "1"]);
    assert_eq!(set, "+OK\r\n");
    let keys = invalidation_keys(&mut redir).len();
    let mut admin = Client::connect(port);
    wait_until(&format!("{port}: tracking_total_keys:1"), || {
        bulk_text(&admin.cmd(&["INFO", "stats"])).contains("tracking_total_keys:1\r\n")
    });
    let mut info: Vec<String> = bulk_text(&admin.cmd(&["INFO"]))
        .lines()
        .filter(|l| l.starts_with("tracking_"))
        .map(str::to_string)
        .collect();
    info.sort();
    (keys, info)
}

#[test]
fn the_tracking_table_keeps_its_limit_as_on_valkey() {
    let want = same_as_valkey("txn-tracking-limit", tracking_table_limit);
    assert_eq!(want.0, 1);
}

/// Tracking turned on, then on again with OPTIN (allowed: only OPTIN <-> OPTOUT is refused),
/// then OPTOUT.
fn optin_after_on(port: u16) -> Vec<String> {
    let mut c = Client::connect(port);
    ["on", "on OPTIN", "on OPTOUT", "off", "on OPTOUT"]
        .iter()
        .map(|mode| {
            let mut args = vec!["CLIENT", "TRACKING"];
            args.extend(mode.split(' '));
            c.cmd_s(&args)
        })
        .collect()
}

#[test]
fn tracking_modes_switch_as_on_valkey() {
    let want = same_as_valkey("txn-optin", optin_after_on);
    assert_eq!(want[1], "+OK\r\n");
}

/// BLPOP entries in SLOWLOG (threshold 0) while a BLPOP is blocked, then once it is served.
fn blocked_in_slowlog(port: u16) -> (usize, usize) {
    let mut c = Client::connect(port);
    c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    c.cmd(&["SLOWLOG", "RESET"]);
    let mut b = Client::connect(port);
    b.send_raw(&encode(&[b"BLPOP", b"mylist", b"0"]));
    wait_blocked(port, 1);
    let count = |c: &mut Client| {
        Resp::parse(&c.cmd(&["SLOWLOG", "GET", "-1"]))
            .array()
            .iter()
            .filter(|e| e.array()[3].array()[0].bulk() == "BLPOP")
            .count()
    };
    let before = count(&mut c);
    c.cmd(&["LPUSH", "mylist", "1"]);
    assert_eq!(b.read_reply(), b"*2\r\n$6\r\nmylist\r\n$1\r\n1\r\n");
    let after = count(&mut c);
    c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "10000"]);
    (before, after)
}

#[test]
fn a_blocked_command_enters_the_slowlog_when_served_as_on_valkey() {
    assert_eq!(
        same_as_valkey("txn-blocked-slowlog", blocked_in_slowlog),
        (0, 1)
    );
}

/// A client's `tot-net-in`, `tot-net-out` and `tot-cmds` as CLIENT LIST shows them.
fn totals(c: &mut Client, id: &str) -> [u64; 3] {
    let line = bulk_text(&c.cmd(&["CLIENT", "LIST", "ID", id]));
    ["tot-net-in", "tot-net-out", "tot-cmds"].map(|f| {
        line.split(' ')
            .find_map(|kv| kv.strip_prefix(&format!("{f}=")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{f} in {line}"))
    })
}

/// How a client's totals move: over a GET, a blocked BLPOP, its serving, and an EXEC of two.
fn client_totals(port: u16) -> Vec<[u64; 3]> {
    let mut admin = Client::connect(port);
    let mut b = Client::connect(port);
    let id = client_id(&mut b);
    let mut seen = vec![totals(&mut admin, &id)];
    b.cmd(&["GET", "k"]);
    seen.push(totals(&mut admin, &id));
    b.send_raw(&encode(&[b"BLPOP", b"mylist", b"0"]));
    wait_blocked(port, 1);
    seen.push(totals(&mut admin, &id));
    admin.cmd(&["LPUSH", "mylist", "a"]);
    b.read_reply();
    seen.push(totals(&mut admin, &id));
    b.cmd(&["MULTI"]);
    b.cmd(&["SET", "k", "v"]);
    b.cmd(&["GET", "k"]);
    b.cmd(&["EXEC"]);
    seen.push(totals(&mut admin, &id));
    // Differences from one step to the next.
    seen.windows(2)
        .map(|w| [0, 1, 2].map(|i| w[1][i] - w[0][i]))
        .collect()
}

#[test]
fn client_totals_count_as_on_valkey() {
    let steps = same_as_valkey("txn-client-totals", client_totals);
    // A GET: 20 bytes in, `$-1` out, one command; the BLPOP while blocked: in, no command.
    assert_eq!(steps[0], [20, 5, 1]);
    assert_eq!(steps[1][2], 0);
}

/// `expired_keys` around a key that expires while writes are paused (no expiry then), and
/// once a read meets it after the pause (Valkey's lookup deletes it, counted): the increments
/// `(during the pause, after the read)`.
fn expired_by_a_read(port: u16) -> (u64, u64) {
    let mut c = Client::connect(port);
    let expired = |c: &mut Client| -> u64 {
        bulk_text(&c.cmd(&["INFO", "stats"]))
            .lines()
            .find_map(|l| l.strip_prefix("expired_keys:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("expired_keys")
    };
    let before = expired(&mut c);
    c.cmd(&["MULTI"]);
    c.cmd(&["SET", "foo{t}", "bar", "PX", "10"]);
    c.cmd(&["CLIENT", "PAUSE", "50000", "WRITE"]);
    c.cmd(&["EXEC"]);
    wait_until(&format!("{port}: foo{{t}} logically expired"), || {
        c.cmd(&["GET", "foo{t}"]) == b"$-1\r\n"
    });
    let during = expired(&mut c) - before;
    c.cmd(&["CLIENT", "UNPAUSE"]);
    c.cmd(&["GET", "foo{t}"]);
    (during, expired(&mut c) - before)
}

#[test]
fn a_read_deletes_and_counts_an_expired_key_as_valkey_does() {
    assert_eq!(
        same_as_valkey("txn-read-expired", expired_by_a_read),
        (0, 1)
    );
}

/// CLIENT CACHING yes lasts over a whole transaction (Valkey `resetClient`): the GET inside
/// EXEC is tracked, its key's change invalidates.
fn caching_over_a_transaction(port: u16) -> Vec<Vec<String>> {
    let mut redir = Client::connect(port);
    let id = client_id(&mut redir);
    redir.cmd(&["SUBSCRIBE", "__redis__:invalidate"]);
    let mut c = Client::connect(port);
    let on = c.cmd_s(&["CLIENT", "TRACKING", "on", "REDIRECT", &id, "OPTIN"]);
    assert_eq!(on, "+OK\r\n");
    c.cmd(&["SET", "k", "1"]);
    assert_eq!(c.cmd_s(&["CLIENT", "CACHING", "yes"]), "+OK\r\n");
    c.cmd(&["MULTI"]);
    c.cmd(&["GET", "k"]);
    c.cmd(&["EXEC"]);
    Client::connect(port).cmd(&["SET", "k", "2"]);
    vec![invalidation_keys(&mut redir)]
}

#[test]
fn client_caching_lasts_over_a_transaction_as_on_valkey() {
    assert_eq!(
        same_as_valkey("txn-caching", caching_over_a_transaction),
        [["k"]]
    );
}

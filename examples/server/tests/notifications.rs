//! Keyspace notifications (`notify-keyspace-events`) compared with valkey-server 9.1: the
//! same command sequences on ours and on valkey-server (standalone, and one-node clusters for
//! the cases named `cluster: ...`), and every
//! message a `PSUBSCRIBE __key*__:*` subscriber receives, in order, must be the same.
//!
//! Cases live in `tests/vectors/notifications.txt`: `## name` starts a case (a fresh
//! `FLUSHALL`, `notify-keyspace-events` back to `KEA`), then one command per line (split at
//! spaces, no quoting). A line `@until0 CMD ...` repeats `CMD` until it answers `:0` (a key's
//! expiry awaited by reading it: the read that finds it gone announces `expired` once,
//! whichever of the lazy or active expiry deleted it); `@noreply CMD ...` runs `CMD` without
//! comparing its (random) reply. Replies are compared too.
//!
//! The end of a case's messages is a `PUBLISH` to a channel the subscriber also listens on:
//! a node delivers one subscriber's messages in the order it published them.

mod common;

use common::{bulk_text, encode, frame_len, ports, test_dir, wait_until, Client};
use std::path::Path;

/// One case: its name and command lines.
struct Case {
    name: String,
    lines: Vec<String>,
}

fn cases() -> Vec<Case> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/notifications.txt");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut out: Vec<Case> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(name) = line.strip_prefix("## ") {
            out.push(Case {
                name: name.into(),
                lines: Vec::new(),
            });
        } else if !line.is_empty() && !line.starts_with('#') {
            out.last_mut()
                .expect("a command before the first case")
                .lines
                .push(line.into());
        }
    }
    out
}

fn request(c: &mut Client, args: &[&str]) -> Vec<u8> {
    let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
    c.send_raw(&encode(&a));
    c.read_reply()
}

/// The RESP2 array of bulk strings `reply` (a pub/sub push), as texts.
fn push_parts(reply: &[u8]) -> Vec<String> {
    let mut parts = Vec::new();
    let mut pos = reply.iter().position(|&b| b == b'\n').unwrap() + 1;
    while pos < reply.len() {
        let len = frame_len(reply, pos).unwrap();
        parts.push(bulk_text(&reply[pos..pos + len]));
        pos += len;
    }
    parts
}

/// Runs `case` on the server at `port`: the replies, then the messages received.
fn run(port: u16, case: &Case) -> (Vec<String>, Vec<String>) {
    let mut c = Client::connect(port);
    request(&mut c, &["FLUSHALL"]);
    request(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
    let mut sub = Client::connect(port);
    request(&mut sub, &["PSUBSCRIBE", "__key*__:*"]);
    request(&mut sub, &["SUBSCRIBE", "end-of-case"]);
    let mut replies = Vec::new();
    for line in &case.lines {
        let (until0, text) = match line.strip_prefix("@until0 ") {
            Some(rest) => (true, rest),
            None => (false, line.as_str()),
        };
        let (noreply, text) = match text.strip_prefix("@noreply ") {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let args: Vec<&str> = text.split(' ').collect();
        if until0 {
            wait_until(&format!("{port}: {text} to answer 0"), || {
                request(&mut c, &args) == b":0\r\n"
            });
            replies.push(format!("{text} -> :0 (at last)"));
        } else {
            let r = request(&mut c, &args);
            if noreply {
                replies.push(format!("{text} -> (random)"));
            } else {
                replies.push(format!("{text} -> {}", String::from_utf8_lossy(&r)));
            }
        }
    }
    request(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);
    request(&mut c, &["PUBLISH", "end-of-case", "."]);
    let mut messages = Vec::new();
    loop {
        let parts = push_parts(&sub.read_reply());
        if parts[0] == "message" && parts[1] == "end-of-case" {
            break;
        }
        assert_eq!(parts[0], "pmessage", "{port}: {parts:?}");
        messages.push(format!("{} {}", parts[2], parts[3]));
    }
    (replies, messages)
}

/// Ours and valkey-server 9.1 on two allocated ports, one-node clusters owning every slot
/// when `cluster`.
fn start_pair(dir: &Path, cluster: bool) -> (common::Procs, common::RealServer, u16, u16) {
    let [ours, valkey] = ports::ports(2)[..] else {
        unreachable!()
    };
    let enabled = if cluster { "yes" } else { "no" };
    let mut procs = common::Procs::default();
    procs.start(dir, ours, &["--cluster-enabled", enabled]);
    let real = common::start_real_server(
        "valkey-server",
        valkey,
        &dir.join("valkey"),
        &[
            "--cluster-enabled",
            enabled,
            "--enable-debug-command",
            "yes",
        ],
    );
    if cluster {
        for port in [ours, valkey] {
            common::own_every_slot(port);
        }
    }
    (procs, real, ours, valkey)
}

/// Runs `cases` on both servers; the differences, readable.
fn differences(cases: &[&Case], ours: u16, valkey: u16) -> Vec<String> {
    let mut bad = Vec::new();
    for case in cases {
        let (want_replies, want) = run(valkey, case);
        let (got_replies, got) = run(ours, case);
        for (what, want, got) in [
            ("replies", &want_replies, &got_replies),
            ("messages", &want, &got),
        ] {
            if let Some(at) = (0..want.len().max(got.len())).find(|&i| want.get(i) != got.get(i)) {
                let from = at.saturating_sub(2);
                let show = |v: &[String]| v.iter().skip(from).take(8).cloned().collect::<Vec<_>>();
                bad.push(format!(
                    "case {:?}: {what} differ from #{at}\n  valkey-server 9.1: {:#?}\n  ours: {:#?}",
                    case.name,
                    show(want),
                    show(got)
                ));
            }
        }
    }
    bad
}

/// Every case of `tests/vectors/notifications.txt` on ours and on valkey-server 9.1,
/// standalone.
#[test]
fn notifications_match_valkey() {
    let dir = test_dir("notifications");
    let (_procs, _valkey, ours, valkey) = start_pair(&dir, false);
    let all = cases();
    assert!(all.len() >= 10, "cases: {}", all.len());
    let bad = differences(&all.iter().collect::<Vec<_>>(), ours, valkey);
    assert!(
        bad.is_empty(),
        "{} of {} cases differ:\n{}",
        bad.len(),
        all.len(),
        bad.join("\n")
    );
}

/// The cases named `cluster: ...` (keys of one slot) on one-node clusters: in cluster mode
/// the node that owns the key announces it, to its own subscribers.
#[test]
fn notifications_match_valkey_in_cluster_mode() {
    let dir = test_dir("notifications-cluster");
    let (_procs, _valkey, ours, valkey) = start_pair(&dir, true);
    let all = cases();
    let picked: Vec<&Case> = all
        .iter()
        .filter(|c| c.name.starts_with("cluster:"))
        .collect();
    assert!(!picked.is_empty());
    let bad = differences(&picked, ours, valkey);
    assert!(
        bad.is_empty(),
        "{} of {} cases differ:\n{}",
        bad.len(),
        picked.len(),
        bad.join("\n")
    );
}

/// CONFIG SET / GET of `notify-keyspace-events` as valkey-server 9.1.2 answers (the texts were
/// read from it), and nothing published while it is empty.
#[test]
fn config_texts_and_off_by_default() {
    let dir = test_dir("notifications-config");
    let port = ports::port();
    let mut procs = common::Procs::default();
    procs.start(&dir, port, &[]);
    let mut c = Client::connect(port);
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "notify-keyspace-events"]),
        b"*2\r\n$22\r\nnotify-keyspace-events\r\n$0\r\n\r\n"
    );
    let mut sub = Client::connect(port);
    request(&mut sub, &["PSUBSCRIBE", "*"]);
    c.cmd(&["SET", "k", "v"]);
    c.cmd(&["PUBLISH", "end", "."]);
    // The first message is the PUBLISH: SET published nothing.
    assert_eq!(push_parts(&sub.read_reply()), ["pmessage", "*", "end", "."]);
    // `m` is Valkey's, not sent here: refused, not accepted and never sent.
    assert!(c
        .cmd_s(&["CONFIG", "SET", "notify-keyspace-events", "KEAm"])
        .contains("does not send the m (key miss) class"));
    assert_eq!(
        c.cmd_s(&["CONFIG", "SET", "notify-keyspace-events", "KEAq"]),
        "-ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - \
         Invalid event class character. Use 'Ag$lshzxeKEtmdn'.\r\n"
    );
    for (set, get) in [("Ex", "xE"), ("Kl$", "$lK"), ("g$lshzxetdKE", "AKE")] {
        assert_eq!(
            c.cmd_s(&["CONFIG", "SET", "notify-keyspace-events", set]),
            "+OK\r\n"
        );
        assert_eq!(
            push_parts(&c.cmd(&["CONFIG", "GET", "notify-keyspace-events"]))[1],
            get
        );
    }
}

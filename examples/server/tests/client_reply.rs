//! CLIENT REPLY ON | OFF | SKIP beside valkey-server 9.1: the same pipeline on both, and the
//! bytes that come back must be the same (OFF and SKIP answer nothing, SKIP drops the next
//! reply only, ON answers OK and replies resume; RESET turns replies on and tracking off).
//! Ports from `common::ports`.

mod common;

use common::{encode, ports, start_real_server, test_dir, Client, Procs};

/// Sends `cmds` as one pipeline ending in `PING`, and returns every byte up to `+PONG`.
fn pipeline(port: u16, cmds: &[&[&str]]) -> String {
    let mut c = Client::connect(port);
    let mut req = Vec::new();
    for cmd in cmds.iter().chain(std::iter::once(&&["PING"][..])) {
        let a: Vec<&[u8]> = cmd.iter().map(|s| s.as_bytes()).collect();
        req.extend(encode(&a));
    }
    c.send_raw(&req);
    let mut got = Vec::new();
    loop {
        let r = c.read_reply();
        let done = r == b"+PONG\r\n";
        got.extend(r);
        if done {
            return String::from_utf8_lossy(&got).into_owned();
        }
    }
}

#[test]
fn client_reply_modes_match_valkey() {
    let dir = test_dir("client-reply");
    let [ours, valkey] = ports::ports(2)[..] else {
        unreachable!()
    };
    let mut procs = Procs::default();
    procs.start(&dir, ours, &["--cluster-enabled", "no"]);
    let _valkey = start_real_server("valkey-server", valkey, &dir.join("valkey"), &[]);
    let cmds: &[&[&str]] = &[
        &["SET", "a", "1"],
        &["CLIENT", "REPLY", "OFF"],
        &["SET", "a", "2"],
        &["GET", "a"],
        &["CLIENT", "REPLY", "SKIP"],
        &["GET", "a"],
        &["CLIENT", "REPLY", "ON"],
        &["GET", "a"],
        &["CLIENT", "REPLY", "SKIP"],
        &["INCR", "a"],
        &["GET", "a"],
        &["CLIENT", "REPLY", "SKIP"],
        &["CLIENT", "REPLY", "ON"],
        &["GET", "a"],
        &["CLIENT", "REPLY", "BOGUS"],
        &["CLIENT", "REPLY"],
        // RESET turns replies back on and tracking off (Valkey `clearClientConnectionState`).
        &["CLIENT", "TRACKING", "ON"],
        &["CLIENT", "REPLY", "OFF"],
        &["RESET"],
        &["CLIENT", "TRACKINGINFO"],
        // (Un)subscribe confirmations are pushes: sent even with replies off.
        &["CLIENT", "REPLY", "OFF"],
        &["SUBSCRIBE", "ch"],
        &["UNSUBSCRIBE", "ch"],
        &["GET", "a"],
        &["CLIENT", "REPLY", "ON"],
        // A SKIP in force outlives RESET: its reply is the one skipped.
        &["CLIENT", "REPLY", "SKIP"],
        &["RESET"],
        &["GET", "a"],
    ];
    let want = pipeline(valkey, cmds);
    assert_eq!(pipeline(ours, cmds), want);
    // The writes made while replies were off took effect.
    assert_eq!(Client::connect(ours).cmd_s(&["GET", "a"]), "$1\r\n3\r\n");
    assert!(want.contains("+RESET\r\n"), "{want}");
}

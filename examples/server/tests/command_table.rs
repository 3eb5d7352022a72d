//! `COMMAND` replies come from the command crate's one table: for every command and
//! subcommand this server serves, `COMMAND INFO` and `COMMAND DOCS` equal valkey-server
//! 9.1's captured replies byte for byte, in RESP2 and RESP3 (the capture and the Redis 7.0
//! comparison are in `crates/command/tests`). A container lists the subcommands served.
//! Ports from the one allocator (`common::ports`).

mod common;

use common::{ports, test_dir, Client, Procs};
use serde_json::Value as Json;
use std::collections::HashMap;

fn capture() -> HashMap<String, Json> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../crates/command/tests/vectors/commands-valkey-9.1.json"
    );
    let j: Json = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    j["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap().to_owned(), e.clone()))
        .collect()
}

fn bytes(j: &Json) -> Vec<u8> {
    j.as_str()
        .unwrap()
        .chars()
        .map(|c| c as u32 as u8)
        .collect()
}

fn names(reply: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(reply)
        .split("\r\n")
        .skip(1)
        .filter(|l| !l.starts_with('$') && !l.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn command_info_and_docs_are_valkey_9_1_for_every_command_served() {
    let dir = test_dir("command-table");
    let mut procs = Procs::default();
    let port = ports::port();
    procs.start(&dir, port, &["--cluster-enabled", "no"]);
    let cap = capture();
    let mut c2 = Client::connect(port);
    let mut c3 = Client::connect(port);
    c3.cmd(&["HELLO", "3"]);
    let served = names(&c2.cmd(&["COMMAND", "LIST"]));
    assert!(served.len() > 150, "{} served", served.len());
    let top: Vec<&String> = served.iter().filter(|n| !n.contains('|')).collect();
    assert_eq!(
        c2.cmd_s(&["COMMAND", "COUNT"]),
        format!(":{}\r\n", top.len())
    );
    let mut compared = 0;
    for name in &served {
        if name == "ferrocluster" {
            continue;
        }
        let want = &cap[name.as_str()];
        let container = served.iter().any(|n| n.starts_with(&format!("{name}|")));
        let all_subs = cap
            .keys()
            .filter(|n| n.starts_with(&format!("{name}|")))
            .count();
        let served_subs = served
            .iter()
            .filter(|n| n.starts_with(&format!("{name}|")))
            .count();
        // A container served in part lists only its served subcommands; those are
        // compared one by one.
        if container && served_subs != all_subs {
            continue;
        }
        for (c, i, d) in [(&mut c2, "info2", "docs2"), (&mut c3, "info3", "docs3")] {
            assert_eq!(
                String::from_utf8_lossy(&c.cmd(&["COMMAND", "INFO", name])),
                String::from_utf8_lossy(&bytes(&want[i])),
                "COMMAND INFO {name} ({i})"
            );
            assert_eq!(
                String::from_utf8_lossy(&c.cmd(&["COMMAND", "DOCS", name])),
                String::from_utf8_lossy(&bytes(&want[d])),
                "COMMAND DOCS {name} ({d})"
            );
        }
        compared += 1;
    }
    assert!(compared > 150, "{compared} compared");
    // Ours is listed too, with its own row.
    let f = c2.cmd_s(&["COMMAND", "INFO", "ferrocluster"]);
    assert!(
        f.starts_with("*1\r\n*10\r\n$12\r\nferrocluster\r\n:-2\r\n"),
        "{f}"
    );
    // Unknown names: a null entry (RESP2 `$-1`, RESP3 `_`), and no DOCS entry.
    assert_eq!(c2.cmd_s(&["COMMAND", "INFO", "nosuch"]), "*1\r\n$-1\r\n");
    assert_eq!(c3.cmd_s(&["COMMAND", "INFO", "nosuch"]), "*1\r\n_\r\n");
    assert_eq!(c2.cmd_s(&["COMMAND", "DOCS", "nosuch"]), "*0\r\n");
    // A built-in command not served here is unknown.
    assert_eq!(c2.cmd_s(&["COMMAND", "INFO", "xadd"]), "*1\r\n$-1\r\n");
    assert!(c2
        .cmd_s(&["XADD", "s", "*", "f", "v"])
        .starts_with("-ERR unknown command 'XADD'"));
    // A partly served container lists what it serves.
    let obj = c2.cmd_s(&["COMMAND", "INFO", "memory"]);
    assert!(
        obj.contains("memory|usage") && !obj.contains("memory|doctor"),
        "{obj}"
    );
    assert!(c2
        .cmd_s(&["MEMORY", "DOCTOR"])
        .starts_with("-ERR unknown subcommand 'DOCTOR'. Try MEMORY HELP."));
}

#[test]
fn command_getkeys_follows_the_key_specs() {
    let dir = test_dir("command-getkeys");
    let mut procs = Procs::default();
    let port = ports::port();
    procs.start(&dir, port, &["--cluster-enabled", "no"]);
    let mut c = Client::connect(port);
    let cases: &[(&[&str], &str)] = &[
        (&["GET", "k"], "*1\r\n$1\r\nk\r\n"),
        (
            &["SUNIONSTORE", "d", "a", "b"],
            "*3\r\n$1\r\nd\r\n$1\r\na\r\n$1\r\nb\r\n",
        ),
        (
            &["SINTERCARD", "2", "a", "b", "LIMIT", "1"],
            "*2\r\n$1\r\na\r\n$1\r\nb\r\n",
        ),
        // Served since the sorted sets landed: valkey-server 9.1.2 answers the same.
        (
            &["ZUNIONSTORE", "d", "2", "a", "b"],
            "*3\r\n$1\r\nd\r\n$1\r\na\r\n$1\r\nb\r\n",
        ),
        (&["SORT", "s", "STORE", "d"], "*2\r\n$1\r\ns\r\n$1\r\nd\r\n"),
        (&["OBJECT", "ENCODING", "k"], "*1\r\n$1\r\nk\r\n"),
        (&["PING"], "-ERR The command has no key arguments\r\n"),
        (&["NOSUCH", "k"], "-ERR Invalid command specified\r\n"),
        (
            &["GET"],
            "-ERR Invalid number of arguments specified for command\r\n",
        ),
    ];
    for (argv, want) in cases {
        let mut full = vec!["COMMAND", "GETKEYS"];
        full.extend_from_slice(argv);
        assert_eq!(c.cmd_s(&full), *want, "{argv:?}");
    }
    assert_eq!(
        c.cmd_s(&["COMMAND", "GETKEYSANDFLAGS", "SET", "k", "v", "GET"]),
        "*1\r\n*2\r\n$1\r\nk\r\n*3\r\n+RW\r\n+access\r\n+update\r\n"
    );
}

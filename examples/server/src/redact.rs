//! Arguments that SLOWLOG and MONITOR show as `(redacted)` (Valkey 9.1
//! `redactClientCommandArgument` and its callers): passwords and user names never reach a log
//! or a monitoring client. The command still runs with its real arguments; only what
//! [`crate::slowlog`] keeps and what [`crate::monitor`] sends is changed.
//!
//! The callers' rules, by command:
//! - `AUTH password` / `AUTH user password` (`authCommand`): every argument, when there are
//!   one or two.
//! - `HELLO protover AUTH user password` (`helloCommand`): the two after `AUTH`, when the
//!   protocol version is an integer.
//! - `MIGRATE ... AUTH password | AUTH2 user password` (`migrateCommand`): those values, among
//!   the options before `KEYS`.
//! - `ACL SETUSER` / `ACL DELUSER` (every argument after the subcommand) and `ACL GETUSER
//!   name` (`aclCommand`).
//! - `CONFIG SET`: the value of every option flagged `SENSITIVE_CONFIG` in Valkey
//!   (`requirepass`, `primaryauth`, `primaryuser` and their aliases, `tls-key-file-pass`,
//!   `tls-client-key-file-pass`), valid or not (`configSetCommand`).

use crate::client::Args;
use std::ops::Range;

/// What a redacted argument shows.
pub const REDACTED: &[u8] = b"(redacted)";

/// Valkey's `SENSITIVE_CONFIG` options (with their aliases).
const SENSITIVE_OPTIONS: &[&str] = &[
    "requirepass",
    "primaryauth",
    "masterauth",
    "primaryuser",
    "masteruser",
    "tls-key-file-pass",
    "tls-client-key-file-pass",
];

/// The positions of `args` to redact for the command whose table row is `name` (a
/// subcommand's row is `container|sub`); empty for almost every command.
pub fn positions(name: &str, args: &Args<'_>) -> Vec<usize> {
    let n = args.len();
    let is = |i: usize, word: &str| args.get(i).eq_ignore_ascii_case(word.as_bytes());
    match name {
        "auth" if n <= 3 => (1..n).collect(),
        "hello"
            if n >= 2
                && std::str::from_utf8(args.get(1)).is_ok_and(|v| v.parse::<i64>().is_ok()) =>
        {
            (2..n.saturating_sub(2))
                .filter(|&j| is(j, "auth"))
                .flat_map(|j| [j + 1, j + 2])
                .collect()
        }
        "migrate" => {
            let mut at = Vec::new();
            let mut j = 6;
            while j < n && !is(j, "keys") {
                if is(j, "auth") && j + 1 < n {
                    at.push(j + 1);
                    j += 1;
                } else if is(j, "auth2") && j + 2 < n {
                    at.extend([j + 1, j + 2]);
                    j += 2;
                }
                j += 1;
            }
            at
        }
        "acl|setuser" | "acl|deluser" => (2..n).collect(),
        "acl|getuser" if n == 3 => vec![2],
        "config|set" => (2..n)
            .step_by(2)
            .filter(|&j| j + 1 < n)
            .filter(|&j| {
                let opt = args.get(j);
                SENSITIVE_OPTIONS
                    .iter()
                    .any(|s| opt.eq_ignore_ascii_case(s.as_bytes()))
            })
            .map(|j| j + 1)
            .collect(),
        _ => Vec::new(),
    }
}

/// `args` with the arguments of [`positions`] replaced by [`REDACTED`], as a flat buffer and
/// its ranges (for [`Args::new`]); `None` when nothing is redacted.
pub fn redacted(name: &str, args: &Args<'_>) -> Option<(Vec<u8>, Vec<Range<usize>>)> {
    let at = positions(name, args);
    if at.is_empty() {
        return None;
    }
    let mut flat = Vec::new();
    let mut ranges = Vec::with_capacity(args.len());
    for i in 0..args.len() {
        let start = flat.len();
        if at.contains(&i) {
            flat.extend_from_slice(REDACTED);
        } else {
            flat.extend_from_slice(args.get(i));
        }
        ranges.push(start..flat.len());
    }
    Some((flat, ranges))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(name: &str, words: &[&str]) -> Vec<String> {
        let mut flat = Vec::new();
        let mut ranges = Vec::new();
        for w in words {
            let s = flat.len();
            flat.extend_from_slice(w.as_bytes());
            ranges.push(s..flat.len());
        }
        let args = Args::new(&flat, &ranges);
        let Some((f, r)) = redacted(name, &args) else {
            return words.iter().map(|w| w.to_string()).collect();
        };
        r.into_iter()
            .map(|r| String::from_utf8_lossy(&f[r]).into_owned())
            .collect()
    }

    /// The expectations of Valkey's `unit/slowlog` and `unit/introspection` (MONITOR).
    #[test]
    fn valkey_rules() {
        assert_eq!(shown("auth", &["auth", "pw"]), ["auth", "(redacted)"]);
        assert_eq!(
            shown("auth", &["auth", "u", "pw"]),
            ["auth", "(redacted)", "(redacted)"]
        );
        // A syntax error: nothing read, nothing redacted.
        assert_eq!(
            shown("auth", &["auth", "a", "b", "c"]),
            ["auth", "a", "b", "c"]
        );
        assert_eq!(
            shown("hello", &["hello", "3", "AUTH", "u", "pw", "SETNAME", "n"]),
            [
                "hello",
                "3",
                "AUTH",
                "(redacted)",
                "(redacted)",
                "SETNAME",
                "n"
            ]
        );
        assert_eq!(
            shown(
                "migrate",
                &["migrate", "h", "1", "key", "9", "5000", "AUTH2", "u", "pw"]
            ),
            [
                "migrate",
                "h",
                "1",
                "key",
                "9",
                "5000",
                "AUTH2",
                "(redacted)",
                "(redacted)"
            ]
        );
        assert_eq!(
            shown(
                "migrate",
                &["migrate", "h", "1", "", "9", "5000", "AUTH", "pw", "KEYS", "auth", "x"]
            ),
            [
                "migrate",
                "h",
                "1",
                "",
                "9",
                "5000",
                "AUTH",
                "(redacted)",
                "KEYS",
                "auth",
                "x"
            ]
        );
        assert_eq!(
            shown("acl|setuser", &["acl", "setuser", "u", "+get"]),
            ["acl", "setuser", "(redacted)", "(redacted)"]
        );
        assert_eq!(
            shown("acl|getuser", &["acl", "getuser", "u"]),
            ["acl", "getuser", "(redacted)"]
        );
        assert_eq!(
            shown(
                "config|set",
                &["config", "set", "maxmemory", "1", "masterauth", "pw"]
            ),
            [
                "config",
                "set",
                "maxmemory",
                "1",
                "masterauth",
                "(redacted)"
            ]
        );
        assert_eq!(shown("set", &["set", "auth", "x"]), ["set", "auth", "x"]);
    }
}

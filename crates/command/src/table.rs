//! The command table: names, arities, flags and key positions of the commands the reference
//! server supports, as the real COMMAND table declares them (Valkey 8 `src/commands/*.json`;
//! `first, last, step` are the legacy key range COMMAND INFO prints).

use crate::args::{atoi, eq_ignore_case};
use crate::error::CommandError;

/// Command flags that matter for routing (a subset of the real `CMD_*` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CommandFlags(u8);

impl CommandFlags {
    /// `write`: may modify the keyspace.
    pub const WRITE: CommandFlags = CommandFlags(1);
    /// `readonly`: only reads.
    pub const READONLY: CommandFlags = CommandFlags(2);
    /// `pubsub`: a Pub/Sub command; with keys it is sharded Pub/Sub (§20.6).
    pub const PUBSUB: CommandFlags = CommandFlags(4);
    /// `asking`: served on an importing slot without a preceding ASKING (RESTORE-ASKING).
    pub const ASKING: CommandFlags = CommandFlags(8);
    /// No flags.
    pub const NONE: CommandFlags = CommandFlags(0);

    /// Whether every flag of `other` is set.
    pub const fn contains(self, other: CommandFlags) -> bool {
        self.0 & other.0 == other.0
    }

    const fn or(self, other: CommandFlags) -> CommandFlags {
        CommandFlags(self.0 | other.0)
    }
}

/// Where a command's keys are (Valkey `getKeysFromCommand`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySpec {
    /// No keys: served locally whatever the cluster state (§20.2).
    None,
    /// The legacy range: keys at `first, first+step, ...` up to `last` (a negative `last`
    /// counts from the end: -1 is the last argument).
    Range {
        /// Index of the first key in argv (argv\[0\] is the command name).
        first: u8,
        /// Index of the last key; negative counts from the end.
        last: i8,
        /// Distance between keys.
        step: u8,
    },
    /// `numkeys` at argv\[2\] (read with C `atoi`), keys from argv\[3\]: EVAL, EVALSHA,
    /// FCALL and their `_RO` forms. A `numkeys` below 1 or above the argument count gives no
    /// keys (the command then fails itself).
    NumKeys,
    /// MIGRATE: the key at argv\[3\], or with an empty argv\[3\] the keys after `KEYS`
    /// (Valkey `migrateGetKeys`, skipping the `AUTH`/`AUTH2` option values).
    Migrate,
}

/// Commands that the client state or the router treats specially.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CommandKind {
    /// An ordinary command.
    Plain,
    /// MULTI.
    Multi,
    /// EXEC.
    Exec,
    /// DISCARD.
    Discard,
    /// WATCH.
    Watch,
    /// ASKING.
    Asking,
    /// READONLY.
    Readonly,
    /// READWRITE.
    Readwrite,
    /// SELECT.
    Select,
    /// SWAPDB.
    Swapdb,
    /// MIGRATE.
    Migrate,
    /// MOVE.
    Move,
    /// COPY.
    Copy,
    /// EVAL / EVAL_RO (script body in argv\[1\]; a shebang may declare flags).
    EvalScript,
    /// EVALSHA / FCALL and their `_RO` forms.
    EvalOther,
    /// RESET.
    Reset,
    /// QUIT.
    Quit,
    /// CLUSTER (a container; see [`CommandSpec::subcommands`]).
    Cluster,
    /// A CLUSTER subcommand.
    ClusterSub,
}

/// One row of the command table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandSpec {
    /// Full lowercase name (`get`, `cluster|setslot`).
    pub name: &'static str,
    /// Arity as in the real table: `n` means exactly `n` arguments (name included), `-n` at
    /// least `n`.
    pub arity: i32,
    /// Routing-relevant flags.
    pub flags: CommandFlags,
    /// Key positions.
    pub keys: KeySpec,
    /// Special handling.
    pub kind: CommandKind,
    /// Subcommands of a container command (CLUSTER); empty otherwise.
    pub subcommands: &'static [CommandSpec],
}

impl CommandSpec {
    /// Whether `argc` arguments (name included) satisfy the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = i64::try_from(argc).unwrap_or(i64::MAX);
        let arity = i64::from(self.arity);
        if arity >= 0 {
            argc == arity
        } else {
            argc >= -arity
        }
    }

    /// Whether the command writes (the `write` flag, adjusted for an EVAL script's shebang
    /// flags as Valkey's `evalGetCommandFlags` does: a script that declares flags writes unless
    /// it declares `no-writes`). Scripts known only by SHA and functions keep the table flags;
    /// a host that knows their flags may apply them itself.
    pub fn is_write<A: AsRef<[u8]>>(&self, argv: &[A]) -> bool {
        if self.kind == CommandKind::EvalScript {
            if let Some(body) = argv.get(1) {
                if let Some(no_writes) = shebang_no_writes(body.as_ref()) {
                    return !no_writes;
                }
            }
        }
        self.flags.contains(CommandFlags::WRITE)
    }

    /// The argv positions of the keys (Valkey `getKeysFromCommand`). Never panics: a too
    /// short argv gives no keys.
    pub fn key_positions<A: AsRef<[u8]>>(&self, argv: &[A]) -> KeyPositions {
        let argc = argv.len();
        let empty = KeyPositions {
            next: 1,
            last: 0,
            step: 1,
        };
        match self.keys {
            KeySpec::None => empty,
            KeySpec::Range { first, last, step } => {
                let first = usize::from(first);
                let last = if last >= 0 {
                    usize::from(last as u8)
                } else {
                    match argc.checked_sub(usize::from(last.unsigned_abs())) {
                        Some(l) => l,
                        None => return empty,
                    }
                };
                if last < first {
                    return empty;
                }
                // Every position up to `last` must exist (getKeysUsingLegacyRangeSpec returns
                // no keys otherwise).
                let step = usize::from(step.max(1));
                let top = first + (last - first) / step * step;
                if top >= argc {
                    return empty;
                }
                KeyPositions {
                    next: first,
                    last,
                    step,
                }
            }
            KeySpec::NumKeys => {
                let Some(n) = argv.get(2) else { return empty };
                let num = atoi(n.as_ref());
                let avail = i64::try_from(argc.saturating_sub(3)).unwrap_or(i64::MAX);
                if num < 1 || num > avail {
                    return empty;
                }
                // 1 <= num <= argc - 3, so the cast and the sum stay in range.
                KeyPositions {
                    next: 3,
                    last: 3 + num as usize - 1,
                    step: 1,
                }
            }
            KeySpec::Migrate => {
                if argc < 4 {
                    return empty;
                }
                let mut first = 3;
                let mut num = 1;
                let mut i = 6;
                while i < argc {
                    let a = argv[i].as_ref();
                    if eq_ignore_case(a, "keys") {
                        if !argv[3].as_ref().is_empty() {
                            return empty;
                        }
                        first = i + 1;
                        num = argc - first;
                        break;
                    }
                    if eq_ignore_case(a, "auth") {
                        i += 1;
                    } else if eq_ignore_case(a, "auth2") {
                        i += 2;
                    }
                    i += 1;
                }
                if num == 0 {
                    return empty;
                }
                KeyPositions {
                    next: first,
                    last: first + num - 1,
                    step: 1,
                }
            }
        }
    }
}

/// Iterator over key positions in argv (ascending).
#[derive(Debug, Clone)]
pub struct KeyPositions {
    next: usize,
    last: usize,
    step: usize,
}

impl Iterator for KeyPositions {
    type Item = usize;
    fn next(&mut self) -> Option<usize> {
        if self.next > self.last {
            return None;
        }
        let cur = self.next;
        self.next = self.next.saturating_add(self.step);
        if self.next == cur {
            self.next = self.last + 1;
        }
        Some(cur)
    }
}

/// `Some(no_writes)` when `body` starts with a well-formed `#!lua` shebang (Valkey
/// `evalExtractShebangFlags`), `None` otherwise (then the command's own flags apply).
fn shebang_no_writes(body: &[u8]) -> Option<bool> {
    let rest = body.strip_prefix(b"#!")?;
    let line = rest.split(|&b| b == b'\n').next().unwrap_or(rest);
    let mut parts = line.split(|&b| b == b' ').filter(|p| !p.is_empty());
    if parts.next()? != b"lua" {
        return None;
    }
    let mut no_writes = false;
    for part in parts {
        let flags = part.strip_prefix(b"flags=")?;
        for flag in flags.split(|&b| b == b',').filter(|f| !f.is_empty()) {
            match flag {
                b"no-writes" => no_writes = true,
                b"allow-oom" | b"allow-stale" | b"no-cluster" | b"allow-cross-slot-keys" => {}
                _ => return None,
            }
        }
    }
    Some(no_writes)
}

const W: CommandFlags = CommandFlags::WRITE;
const R: CommandFlags = CommandFlags::READONLY;
const P: CommandFlags = CommandFlags::PUBSUB;
const N: CommandFlags = CommandFlags::NONE;

const fn c(name: &'static str, arity: i32, flags: CommandFlags, keys: KeySpec) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        keys,
        kind: CommandKind::Plain,
        subcommands: &[],
    }
}
const fn k(
    name: &'static str,
    arity: i32,
    flags: CommandFlags,
    keys: KeySpec,
    kind: CommandKind,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        keys,
        kind,
        subcommands: &[],
    }
}
const fn sub(name: &'static str, arity: i32) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags: N,
        keys: KeySpec::None,
        kind: CommandKind::ClusterSub,
        subcommands: &[],
    }
}
const fn r(first: u8, last: i8, step: u8) -> KeySpec {
    KeySpec::Range { first, last, step }
}
const K1: KeySpec = KeySpec::Range {
    first: 1,
    last: 1,
    step: 1,
};
const KALL: KeySpec = KeySpec::Range {
    first: 1,
    last: -1,
    step: 1,
};
const NOKEY: KeySpec = KeySpec::None;

/// CLUSTER subcommands with their arities (Valkey 8 `src/commands/cluster-*.json`), sorted by
/// the part after `cluster|`. The Valkey 9 atomic-migration subcommands are not listed yet.
pub static CLUSTER_SUBCOMMANDS: &[CommandSpec] = &[
    sub("cluster|addslots", -3),
    sub("cluster|addslotsrange", -4),
    sub("cluster|bumpepoch", 2),
    // Valkey 9 atomic slot migration; executed by the node's migration engine.
    sub("cluster|cancelslotmigrations", 2),
    sub("cluster|count-failure-reports", 3),
    sub("cluster|countkeysinslot", 3),
    sub("cluster|delslots", -3),
    sub("cluster|delslotsrange", -4),
    sub("cluster|failover", -2),
    sub("cluster|flushslots", 2),
    sub("cluster|forget", 3),
    sub("cluster|getkeysinslot", 4),
    sub("cluster|getslotmigrations", 2),
    sub("cluster|help", 2),
    sub("cluster|info", 2),
    sub("cluster|keyslot", 3),
    sub("cluster|links", 2),
    sub("cluster|meet", -4),
    sub("cluster|migrateslots", -4),
    sub("cluster|myid", 2),
    sub("cluster|myshardid", 2),
    sub("cluster|nodes", 2),
    sub("cluster|replicas", 3),
    sub("cluster|replicate", 3),
    sub("cluster|reset", -2),
    sub("cluster|saveconfig", 2),
    sub("cluster|set-config-epoch", 3),
    sub("cluster|setslot", -4),
    sub("cluster|shards", 2),
    sub("cluster|slaves", 3),
    sub("cluster|slot-stats", -4),
    sub("cluster|slots", 2),
    sub("cluster|syncslots", -3),
];

/// The commands the reference server supports, sorted by name. Arity, flags and key ranges
/// follow the real COMMAND table; anything not listed is an unknown command.
pub static COMMANDS: &[CommandSpec] = &[
    c("append", 3, W, K1),
    k("asking", 1, N, NOKEY, CommandKind::Asking),
    c("auth", -2, N, NOKEY),
    c("bgsave", -1, N, NOKEY),
    c("client", -2, N, NOKEY),
    CommandSpec {
        name: "cluster",
        arity: -2,
        flags: N,
        keys: NOKEY,
        kind: CommandKind::Cluster,
        subcommands: CLUSTER_SUBCOMMANDS,
    },
    c("command", -1, N, NOKEY),
    c("config", -2, N, NOKEY),
    k("copy", -3, W, r(1, 2, 1), CommandKind::Copy),
    c("dbsize", 1, R, NOKEY),
    c("debug", -2, N, NOKEY),
    c("decr", 2, W, K1),
    c("decrby", 3, W, K1),
    c("del", -2, W, KALL),
    k("discard", 1, N, NOKEY, CommandKind::Discard),
    c("dump", 2, R, K1),
    c("echo", 2, N, NOKEY),
    k("eval", -3, N, KeySpec::NumKeys, CommandKind::EvalScript),
    k("eval_ro", -3, R, KeySpec::NumKeys, CommandKind::EvalScript),
    k("evalsha", -3, N, KeySpec::NumKeys, CommandKind::EvalOther),
    k(
        "evalsha_ro",
        -3,
        R,
        KeySpec::NumKeys,
        CommandKind::EvalOther,
    ),
    k("exec", 1, N, NOKEY, CommandKind::Exec),
    c("exists", -2, R, KALL),
    c("expire", -3, W, K1),
    c("expireat", -3, W, K1),
    c("expiretime", 2, R, K1),
    c("failover", -1, N, NOKEY),
    k("fcall", -3, N, KeySpec::NumKeys, CommandKind::EvalOther),
    k("fcall_ro", -3, R, KeySpec::NumKeys, CommandKind::EvalOther),
    c("flushall", -1, W, NOKEY),
    c("flushdb", -1, W, NOKEY),
    c("get", 2, R, K1),
    c("getdel", 2, W, K1),
    c("getex", -2, W, K1),
    c("getrange", 4, R, K1),
    c("getset", 3, W, K1),
    c("hello", -1, N, NOKEY),
    c("incr", 2, W, K1),
    c("incrby", 3, W, K1),
    c("incrbyfloat", 3, W, K1),
    c("info", -1, N, NOKEY),
    c("keys", 2, R, NOKEY),
    c("lastsave", 1, N, NOKEY),
    c("mget", -2, R, KALL),
    k("migrate", -6, W, KeySpec::Migrate, CommandKind::Migrate),
    c("monitor", 1, N, NOKEY),
    k("move", 3, W, K1, CommandKind::Move),
    c("mset", -3, W, r(1, -1, 2)),
    c("msetnx", -3, W, r(1, -1, 2)),
    k("multi", 1, N, NOKEY, CommandKind::Multi),
    c("persist", 2, W, K1),
    c("pexpire", -3, W, K1),
    c("pexpireat", -3, W, K1),
    c("pexpiretime", 2, R, K1),
    c("ping", -1, N, NOKEY),
    c("psetex", 4, W, K1),
    c("psubscribe", -2, P, NOKEY),
    c("pttl", 2, R, K1),
    c("publish", 3, P, NOKEY),
    c("pubsub", -2, N, NOKEY),
    c("punsubscribe", -1, P, NOKEY),
    k("quit", -1, N, NOKEY, CommandKind::Quit),
    c("randomkey", 1, R, NOKEY),
    k("readonly", 1, N, NOKEY, CommandKind::Readonly),
    k("readwrite", 1, N, NOKEY, CommandKind::Readwrite),
    c("rename", 3, W, r(1, 2, 1)),
    c("renamenx", 3, W, r(1, 2, 1)),
    c("replicaof", 3, N, NOKEY),
    k("reset", 1, N, NOKEY, CommandKind::Reset),
    c("restore", -4, W, K1),
    c("restore-asking", -4, W.or(CommandFlags::ASKING), K1),
    c("role", 1, N, NOKEY),
    c("save", 1, N, NOKEY),
    c("scan", -2, R, NOKEY),
    k("select", 2, N, NOKEY, CommandKind::Select),
    c("set", -3, W, K1),
    c("setex", 4, W, K1),
    c("setnx", 3, W, K1),
    c("setrange", 4, W, K1),
    c("shutdown", -1, N, NOKEY),
    c("slaveof", 3, N, NOKEY),
    c("spublish", 3, P, K1),
    c("ssubscribe", -2, P, KALL),
    c("strlen", 2, R, K1),
    c("subscribe", -2, P, NOKEY),
    c("substr", 4, R, K1),
    c("sunsubscribe", -1, P, KALL),
    k("swapdb", 3, W, NOKEY, CommandKind::Swapdb),
    c("time", 1, N, NOKEY),
    c("touch", -2, R, KALL),
    c("ttl", 2, R, K1),
    c("type", 2, R, K1),
    c("unlink", -2, W, KALL),
    c("unsubscribe", -1, P, NOKEY),
    c("unwatch", 1, N, NOKEY),
    c("wait", 3, N, NOKEY),
    k("watch", -2, N, KALL, CommandKind::Watch),
];

fn find(table: &'static [CommandSpec], name: &[u8], skip: usize) -> Option<&'static CommandSpec> {
    let mut buf = [0u8; 40];
    if name.len() > buf.len() {
        return None;
    }
    let lower = &mut buf[..name.len()];
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    table
        .binary_search_by(|s| s.name.as_bytes()[skip..].cmp(lower))
        .ok()
        .map(|i| &table[i])
}

/// Looks a command up by name (case-insensitive). `None` for an unknown command.
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    find(COMMANDS, name, 0)
}

/// Resolves argv to its table row as Valkey's `processCommand` does before running anything:
/// the command (or, for CLUSTER with at least one argument, the subcommand), then the arity.
///
/// # Errors
/// [`CommandError::UnknownCommand`], [`CommandError::UnknownSubcommand`],
/// [`CommandError::WrongArity`]. An empty argv is an unknown command with an empty name.
pub fn resolve<A: AsRef<[u8]>>(argv: &[A]) -> Result<&'static CommandSpec, CommandError> {
    let Some(name) = argv.first() else {
        return Err(CommandError::UnknownCommand {
            name: bytes::Bytes::new(),
            args: Vec::new(),
        });
    };
    let Some(mut spec) = lookup(name.as_ref()) else {
        return Err(CommandError::UnknownCommand {
            name: bytes::Bytes::copy_from_slice(name.as_ref()),
            args: argv[1..]
                .iter()
                .take(130)
                .map(|a| bytes::Bytes::copy_from_slice(a.as_ref()))
                .collect(),
        });
    };
    if !spec.subcommands.is_empty() && argv.len() >= 2 {
        let prefix = spec.name.len() + 1;
        match find(spec.subcommands, argv[1].as_ref(), prefix) {
            Some(s) => spec = s,
            None => {
                return Err(CommandError::UnknownSubcommand {
                    container: spec.name.to_ascii_uppercase(),
                    sub: bytes::Bytes::copy_from_slice(argv[1].as_ref()),
                })
            }
        }
    }
    if !spec.arity_ok(argv.len()) {
        return Err(CommandError::WrongArity {
            fullname: spec.name,
        });
    }
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_sorted_for_binary_search() {
        for t in [COMMANDS, CLUSTER_SUBCOMMANDS] {
            for w in t.windows(2) {
                assert!(w[0].name < w[1].name, "{} !< {}", w[0].name, w[1].name);
            }
        }
    }

    #[test]
    fn every_name_is_found() {
        for s in COMMANDS {
            assert_eq!(lookup(s.name.to_ascii_uppercase().as_bytes()), Some(s));
        }
        for s in CLUSTER_SUBCOMMANDS {
            let sub = s.name["cluster|".len()..].to_ascii_uppercase();
            assert_eq!(find(CLUSTER_SUBCOMMANDS, sub.as_bytes(), 8), Some(s));
        }
    }

    fn keys(argv: &[&str]) -> Vec<usize> {
        lookup(argv[0].as_bytes())
            .unwrap()
            .key_positions(argv)
            .collect()
    }

    #[test]
    fn key_positions_match_the_real_table() {
        assert_eq!(keys(&["GET", "foo"]), vec![1]);
        assert_eq!(keys(&["MSET", "a", "1", "b", "2"]), vec![1, 3]);
        assert_eq!(keys(&["MGET", "a", "b", "c"]), vec![1, 2, 3]);
        assert_eq!(keys(&["RENAME", "a", "b"]), vec![1, 2]);
        assert_eq!(keys(&["EVAL", "return 1", "2", "foo", "bar"]), vec![3, 4]);
        assert_eq!(keys(&["EVAL", "return 1", "0"]), Vec::<usize>::new());
        assert_eq!(keys(&["EVAL", "return 1", "3", "a"]), Vec::<usize>::new());
        assert_eq!(
            keys(&["MIGRATE", "h", "1", "", "0", "5000", "KEYS", "a", "b"]),
            vec![7, 8]
        );
        assert_eq!(
            keys(&["MIGRATE", "h", "1", "", "0", "5000", "AUTH", "keys", "KEYS", "a"]),
            vec![9]
        );
        assert_eq!(keys(&["MIGRATE", "h", "1", "k", "0", "5000"]), vec![3]);
        assert_eq!(keys(&["SPUBLISH", "ch", "msg"]), vec![1]);
        assert_eq!(keys(&["SUNSUBSCRIBE"]), Vec::<usize>::new());
        assert_eq!(keys(&["GET"]), Vec::<usize>::new());
        assert_eq!(keys(&["PING"]), Vec::<usize>::new());
    }

    #[test]
    fn shebang_flags() {
        let eval = lookup(b"eval").unwrap();
        assert!(!eval.is_write(&["EVAL", "return 1", "0"]));
        assert!(eval.is_write(&["EVAL", "#!lua\nreturn 1", "0"]));
        assert!(!eval.is_write(&["EVAL", "#!lua flags=no-writes\nreturn 1", "0"]));
        assert!(!eval.is_write(&["EVAL", "#!lua flags=bogus\nreturn 1", "0"]));
    }
}

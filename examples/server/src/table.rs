//! The commands this server serves: the command crate's one table
//! ([`ferrocluster_command::CommandTable`]) with a [`Spec`] (our handler, [`Cmd`]) per row.
//!
//! Every row's arity, flags, key specs, ACL categories and docs are the command crate's
//! built-in Valkey 9.1 ones ([`ferrocluster_command::BUILTIN`]); `COMMAND`, routing, MULTI
//! and the propagation rules read them from here. Ours is [`FERROCLUSTER`] alone. A family
//! adds its commands to [`SERVED`] (and subcommands to [`SUBCOMMANDS`]) with their `Cmd`.

use ferrocluster_command::{CommandDoc, CommandFlags, CommandKind, CommandSpec, CommandTable};
use std::sync::OnceLock;

/// Every command the server dispatches on (a container's subcommands share its `Cmd`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum Cmd {
    // Connection and server.
    Ping,
    Echo,
    Hello,
    Auth,
    Acl,
    Client,
    Command,
    Info,
    Config,
    Select,
    Quit,
    Reset,
    Time,
    Lastsave,
    Dbsize,
    Flushdb,
    Flushall,
    Swapdb,
    Debug,
    Memory,
    Role,
    Wait,
    Replconf,
    Psync,
    Sync,
    Readonly,
    Readwrite,
    Asking,
    Cluster,
    Ferrocluster,
    Monitor,
    Slowlog,
    Latency,
    Save,
    Bgsave,
    Bgrewriteaof,
    Shutdown,
    // Transactions.
    Multi,
    Exec,
    Discard,
    Watch,
    Unwatch,
    // Pub/Sub.
    Publish,
    Pubsub,
    Psubscribe,
    Punsubscribe,
    Subscribe,
    Unsubscribe,
    Spublish,
    Ssubscribe,
    Sunsubscribe,
    // Keyspace.
    Del,
    Unlink,
    Exists,
    Type,
    Keys,
    Scan,
    Randomkey,
    Rename,
    Renamenx,
    Copy,
    Move,
    Touch,
    Object,
    Expire,
    Pexpire,
    Expireat,
    Pexpireat,
    Expiretime,
    Pexpiretime,
    Ttl,
    Pttl,
    Persist,
    Dump,
    Restore,
    RestoreAsking,
    Migrate,
    Sort,
    SortRo,
    // Strings.
    Get,
    Set,
    Setnx,
    Setex,
    Psetex,
    Getdel,
    Getex,
    Getset,
    Getrange,
    Substr,
    Setrange,
    Mget,
    Mset,
    Msetnx,
    Incr,
    Decr,
    Incrby,
    Decrby,
    Incrbyfloat,
    Append,
    Strlen,
    Lcs,
    // Hashes.
    Hset,
    Hmset,
    Hsetnx,
    Hget,
    Hmget,
    Hdel,
    Hexists,
    Hlen,
    Hstrlen,
    Hincrby,
    Hincrbyfloat,
    Hkeys,
    Hvals,
    Hgetall,
    Hrandfield,
    Hscan,
    // Sets.
    Sadd,
    Srem,
    Scard,
    Sismember,
    Smismember,
    Smembers,
    Srandmember,
    Spop,
    Smove,
    Sinter,
    Sintercard,
    Sinterstore,
    Sunion,
    Sunionstore,
    Sdiff,
    Sdiffstore,
    Sscan,
    // Lists.
    Lpush,
    Rpush,
    Lpushx,
    Rpushx,
    Linsert,
    Llen,
    Lindex,
    Lset,
    Lrange,
    Ltrim,
    Lrem,
    Lpos,
    Lpop,
    Rpop,
    Lmove,
    Rpoplpush,
    Lmpop,
    Blmpop,
    Blpop,
    Brpop,
    Blmove,
    Brpoplpush,
    // Sorted sets.
    Zadd,
    Zincrby,
    Zrem,
    Zcard,
    Zscore,
    Zmscore,
    Zrank,
    Zrevrank,
    Zcount,
    Zlexcount,
    Zrange,
    Zrangestore,
    Zrevrange,
    Zrangebyscore,
    Zrevrangebyscore,
    Zrangebylex,
    Zrevrangebylex,
    Zremrangebyrank,
    Zremrangebyscore,
    Zremrangebylex,
    Zpopmin,
    Zpopmax,
    Bzpopmin,
    Bzpopmax,
    Zmpop,
    Bzmpop,
    Zrandmember,
    Zscan,
    Zunion,
    Zinter,
    Zdiff,
    Zunionstore,
    Zinterstore,
    Zdiffstore,
    Zintercard,
}

/// A served row: our handler and the command crate's spec (for a subcommand, the
/// subcommand's row and its container's `Cmd`).
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// Which handler.
    pub cmd: Cmd,
    /// Full lowercase name (`get`, `object|encoding`).
    pub name: &'static str,
    /// The row (arity, flags, key specs, docs).
    pub info: &'static CommandSpec,
}

impl Spec {
    /// Whether `argc` satisfies the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        self.info.arity_ok(argc)
    }

    /// Whether the command writes.
    pub fn is_write(&self) -> bool {
        self.info.flags.contains(CommandFlags::WRITE)
    }

    /// Whether the row has `flag`.
    pub fn has(&self, flag: CommandFlags) -> bool {
        self.info.flags.contains(flag)
    }
}

/// Ours, not Valkey's or Redis's: `FERROCLUSTER CKQUORUM | SUMMARY | HELP` (src/readiness.rs).
pub static FERROCLUSTER: CommandSpec = CommandSpec::new(
    "ferrocluster",
    -2,
    CommandFlags::LOADING.or(CommandFlags::STALE),
    CommandDoc::new(
        "Failover readiness and quorum of the cluster from this node's view.",
        "1.0.0",
        "cluster",
    )
    .complexity("O(N) where N is the number of nodes"),
);

/// The built-in commands served, with their handlers.
pub const SERVED: &[(&str, Cmd)] = &[
    ("acl", Cmd::Acl),
    ("append", Cmd::Append),
    ("asking", Cmd::Asking),
    ("auth", Cmd::Auth),
    ("bgrewriteaof", Cmd::Bgrewriteaof),
    ("bgsave", Cmd::Bgsave),
    ("blmove", Cmd::Blmove),
    ("blmpop", Cmd::Blmpop),
    ("blpop", Cmd::Blpop),
    ("brpop", Cmd::Brpop),
    ("brpoplpush", Cmd::Brpoplpush),
    ("bzmpop", Cmd::Bzmpop),
    ("bzpopmax", Cmd::Bzpopmax),
    ("bzpopmin", Cmd::Bzpopmin),
    ("client", Cmd::Client),
    ("cluster", Cmd::Cluster),
    ("command", Cmd::Command),
    ("config", Cmd::Config),
    ("copy", Cmd::Copy),
    ("dbsize", Cmd::Dbsize),
    ("debug", Cmd::Debug),
    ("decr", Cmd::Decr),
    ("decrby", Cmd::Decrby),
    ("del", Cmd::Del),
    ("discard", Cmd::Discard),
    ("dump", Cmd::Dump),
    ("echo", Cmd::Echo),
    ("exec", Cmd::Exec),
    ("exists", Cmd::Exists),
    ("expire", Cmd::Expire),
    ("expireat", Cmd::Expireat),
    ("expiretime", Cmd::Expiretime),
    ("flushall", Cmd::Flushall),
    ("flushdb", Cmd::Flushdb),
    ("get", Cmd::Get),
    ("getdel", Cmd::Getdel),
    ("getex", Cmd::Getex),
    ("getrange", Cmd::Getrange),
    ("getset", Cmd::Getset),
    ("hdel", Cmd::Hdel),
    ("hello", Cmd::Hello),
    ("hexists", Cmd::Hexists),
    ("hget", Cmd::Hget),
    ("hgetall", Cmd::Hgetall),
    ("hincrby", Cmd::Hincrby),
    ("hincrbyfloat", Cmd::Hincrbyfloat),
    ("hkeys", Cmd::Hkeys),
    ("hlen", Cmd::Hlen),
    ("hmget", Cmd::Hmget),
    ("hmset", Cmd::Hmset),
    ("hrandfield", Cmd::Hrandfield),
    ("hscan", Cmd::Hscan),
    ("hset", Cmd::Hset),
    ("hsetnx", Cmd::Hsetnx),
    ("hstrlen", Cmd::Hstrlen),
    ("hvals", Cmd::Hvals),
    ("incr", Cmd::Incr),
    ("incrby", Cmd::Incrby),
    ("incrbyfloat", Cmd::Incrbyfloat),
    ("info", Cmd::Info),
    ("keys", Cmd::Keys),
    ("lastsave", Cmd::Lastsave),
    ("latency", Cmd::Latency),
    ("lcs", Cmd::Lcs),
    ("lindex", Cmd::Lindex),
    ("linsert", Cmd::Linsert),
    ("llen", Cmd::Llen),
    ("lmove", Cmd::Lmove),
    ("lmpop", Cmd::Lmpop),
    ("lpop", Cmd::Lpop),
    ("lpos", Cmd::Lpos),
    ("lpush", Cmd::Lpush),
    ("lpushx", Cmd::Lpushx),
    ("lrange", Cmd::Lrange),
    ("lrem", Cmd::Lrem),
    ("lset", Cmd::Lset),
    ("ltrim", Cmd::Ltrim),
    ("memory", Cmd::Memory),
    ("mget", Cmd::Mget),
    ("migrate", Cmd::Migrate),
    ("monitor", Cmd::Monitor),
    ("move", Cmd::Move),
    ("mset", Cmd::Mset),
    ("msetnx", Cmd::Msetnx),
    ("multi", Cmd::Multi),
    ("object", Cmd::Object),
    ("persist", Cmd::Persist),
    ("pexpire", Cmd::Pexpire),
    ("pexpireat", Cmd::Pexpireat),
    ("pexpiretime", Cmd::Pexpiretime),
    ("ping", Cmd::Ping),
    ("psetex", Cmd::Psetex),
    ("psync", Cmd::Psync),
    ("pttl", Cmd::Pttl),
    ("publish", Cmd::Publish),
    ("pubsub", Cmd::Pubsub),
    ("psubscribe", Cmd::Psubscribe),
    ("punsubscribe", Cmd::Punsubscribe),
    ("quit", Cmd::Quit),
    ("randomkey", Cmd::Randomkey),
    ("readonly", Cmd::Readonly),
    ("readwrite", Cmd::Readwrite),
    ("rename", Cmd::Rename),
    ("renamenx", Cmd::Renamenx),
    ("replconf", Cmd::Replconf),
    ("reset", Cmd::Reset),
    ("restore", Cmd::Restore),
    ("restore-asking", Cmd::RestoreAsking),
    ("role", Cmd::Role),
    ("rpop", Cmd::Rpop),
    ("rpoplpush", Cmd::Rpoplpush),
    ("rpush", Cmd::Rpush),
    ("rpushx", Cmd::Rpushx),
    ("sadd", Cmd::Sadd),
    ("save", Cmd::Save),
    ("scan", Cmd::Scan),
    ("scard", Cmd::Scard),
    ("sdiff", Cmd::Sdiff),
    ("sdiffstore", Cmd::Sdiffstore),
    ("select", Cmd::Select),
    ("set", Cmd::Set),
    ("setex", Cmd::Setex),
    ("setnx", Cmd::Setnx),
    ("setrange", Cmd::Setrange),
    ("shutdown", Cmd::Shutdown),
    ("sinter", Cmd::Sinter),
    ("sintercard", Cmd::Sintercard),
    ("sinterstore", Cmd::Sinterstore),
    ("sismember", Cmd::Sismember),
    ("slowlog", Cmd::Slowlog),
    ("smembers", Cmd::Smembers),
    ("smismember", Cmd::Smismember),
    ("smove", Cmd::Smove),
    ("sort", Cmd::Sort),
    ("sort_ro", Cmd::SortRo),
    ("spop", Cmd::Spop),
    ("spublish", Cmd::Spublish),
    ("srandmember", Cmd::Srandmember),
    ("srem", Cmd::Srem),
    ("sscan", Cmd::Sscan),
    ("ssubscribe", Cmd::Ssubscribe),
    ("strlen", Cmd::Strlen),
    ("subscribe", Cmd::Subscribe),
    ("substr", Cmd::Substr),
    ("sunion", Cmd::Sunion),
    ("sunionstore", Cmd::Sunionstore),
    ("sunsubscribe", Cmd::Sunsubscribe),
    ("swapdb", Cmd::Swapdb),
    ("sync", Cmd::Sync),
    ("time", Cmd::Time),
    ("touch", Cmd::Touch),
    ("ttl", Cmd::Ttl),
    ("type", Cmd::Type),
    ("unlink", Cmd::Unlink),
    ("unsubscribe", Cmd::Unsubscribe),
    ("unwatch", Cmd::Unwatch),
    ("wait", Cmd::Wait),
    ("watch", Cmd::Watch),
    ("zadd", Cmd::Zadd),
    ("zcard", Cmd::Zcard),
    ("zcount", Cmd::Zcount),
    ("zdiff", Cmd::Zdiff),
    ("zdiffstore", Cmd::Zdiffstore),
    ("zincrby", Cmd::Zincrby),
    ("zinter", Cmd::Zinter),
    ("zintercard", Cmd::Zintercard),
    ("zinterstore", Cmd::Zinterstore),
    ("zlexcount", Cmd::Zlexcount),
    ("zmpop", Cmd::Zmpop),
    ("zmscore", Cmd::Zmscore),
    ("zpopmax", Cmd::Zpopmax),
    ("zpopmin", Cmd::Zpopmin),
    ("zrandmember", Cmd::Zrandmember),
    ("zrange", Cmd::Zrange),
    ("zrangebylex", Cmd::Zrangebylex),
    ("zrangebyscore", Cmd::Zrangebyscore),
    ("zrangestore", Cmd::Zrangestore),
    ("zrank", Cmd::Zrank),
    ("zrem", Cmd::Zrem),
    ("zremrangebylex", Cmd::Zremrangebylex),
    ("zremrangebyrank", Cmd::Zremrangebyrank),
    ("zremrangebyscore", Cmd::Zremrangebyscore),
    ("zrevrange", Cmd::Zrevrange),
    ("zrevrangebylex", Cmd::Zrevrangebylex),
    ("zrevrangebyscore", Cmd::Zrevrangebyscore),
    ("zrevrank", Cmd::Zrevrank),
    ("zscan", Cmd::Zscan),
    ("zscore", Cmd::Zscore),
    ("zunion", Cmd::Zunion),
    ("zunionstore", Cmd::Zunionstore),
];

/// The subcommands served of each container served (the container's handler runs them).
pub const SUBCOMMANDS: &[(&str, &[&str])] = &[
    (
        "client",
        &[
            "caching",
            "getname",
            "getredir",
            "help",
            "id",
            "info",
            "kill",
            "list",
            "no-evict",
            "no-touch",
            "pause",
            "reply",
            "setinfo",
            "setname",
            "tracking",
            "trackinginfo",
            "unblock",
            "unpause",
        ],
    ),
    (
        "cluster",
        &[
            "addslots",
            "addslotsrange",
            "bumpepoch",
            "cancelslotmigrations",
            "count-failure-reports",
            "countkeysinslot",
            "delslots",
            "delslotsrange",
            "failover",
            "flushslots",
            "forget",
            "getkeysinslot",
            "getslotmigrations",
            "help",
            "info",
            "keyslot",
            "links",
            "meet",
            "migrateslots",
            "myid",
            "myshardid",
            "nodes",
            "replicas",
            "replicate",
            "reset",
            "saveconfig",
            "set-config-epoch",
            "setslot",
            "shards",
            "slaves",
            "slot-stats",
            "slots",
            "syncslots",
        ],
    ),
    (
        "command",
        &[
            "count",
            "docs",
            "getkeys",
            "getkeysandflags",
            "help",
            "info",
            "list",
        ],
    ),
    (
        "acl",
        &[
            "cat", "deluser", "dryrun", "genpass", "getuser", "help", "list", "load", "log",
            "save", "setuser", "users", "whoami",
        ],
    ),
    ("config", &["get", "help", "resetstat", "rewrite", "set"]),
    ("memory", &["help", "usage"]),
    (
        "object",
        &["encoding", "freq", "help", "idletime", "refcount"],
    ),
    (
        "latency",
        &["doctor", "help", "histogram", "history", "latest", "reset"],
    ),
    ("slowlog", &["get", "help", "len", "reset"]),
    (
        "pubsub",
        &[
            "channels",
            "help",
            "numpat",
            "numsub",
            "shardchannels",
            "shardnumsub",
        ],
    ),
];

/// The server's table.
pub fn table() -> &'static CommandTable<Spec> {
    static TABLE: OnceLock<CommandTable<Spec>> = OnceLock::new();
    TABLE.get_or_init(build)
}

fn spec_of(info: &'static CommandSpec, cmd: Cmd) -> Spec {
    Spec {
        cmd,
        name: info.name,
        info,
    }
}

fn build() -> CommandTable<Spec> {
    let mut t = CommandTable::new();
    let mut add = |info: &'static CommandSpec, cmd: Cmd| {
        // SERVED and SUBCOMMANDS name built-in rows once each (test `every_row_resolves`).
        let _ = t.register(info, spec_of(info, cmd));
    };
    for &(name, cmd) in SERVED {
        if let Some(info) = ferrocluster_command::builtin(name.as_bytes()) {
            add(info, cmd);
        }
    }
    add(&FERROCLUSTER, Cmd::Ferrocluster);
    for &(container, subs) in SUBCOMMANDS {
        let Some(&(_, cmd)) = SERVED.iter().find(|(n, _)| *n == container) else {
            continue;
        };
        for sub in subs {
            let full = format!("{container}|{sub}");
            if let Some(info) = ferrocluster_command::builtin(full.as_bytes()) {
                add(info, cmd);
            }
        }
    }
    t
}

/// Finds a top-level command by name, ASCII case-insensitively, without allocating (one or
/// two probes of the table's index: this runs for every request).
#[inline]
pub fn lookup(name: &[u8]) -> Option<&'static Spec> {
    table().get(name).map(|r| &r.handler)
}

/// The command crate's row for `spec` when the cluster fast path may route it directly with
/// [`ferrocluster_command::route`] instead of `ClientState::handle_command`: a
/// `CommandKind::Plain` command without subcommands (not FAILOVER), whose only client-state
/// effect in `handle_command` is clearing ASKING. `None` for every other command (MULTI,
/// EXEC, SELECT, ASKING, CLUSTER, containers, ...).
#[inline]
pub fn routed(spec: &Spec) -> Option<&'static CommandSpec> {
    let c = spec.info;
    (c.kind == CommandKind::Plain && c.subcommands.is_empty() && c.name != "failover").then_some(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_resolves() {
        for &(name, cmd) in SERVED {
            let spec = lookup(name.to_ascii_uppercase().as_bytes())
                .unwrap_or_else(|| panic!("{name} is not a built-in command"));
            assert_eq!(spec.cmd, cmd);
            assert_eq!(spec.name, name);
        }
        for &(container, subs) in SUBCOMMANDS {
            let row = table().get(container.as_bytes()).unwrap();
            assert_eq!(row.subcommands().len(), subs.len(), "{container}");
        }
        assert_eq!(table().len(), SERVED.len() + 1);
        assert_eq!(lookup(b"ferrocluster").unwrap().cmd, Cmd::Ferrocluster);
        assert!(ferrocluster_command::builtin(b"ferrocluster").is_none());
    }

    #[test]
    fn lookup_is_case_insensitive() {
        assert_eq!(lookup(b"GeT").unwrap().cmd, Cmd::Get);
        assert!(lookup(b"nosuchcommand").is_none());
        assert!(lookup(b"averyveryverylongcommandname").is_none());
        // Built in, not served.
        assert!(lookup(b"xadd").is_none());
    }

    #[test]
    fn subcommands_resolve_with_their_arity() {
        let s = table()
            .resolve(&["OBJECT", "encoding", "k"])
            .unwrap()
            .handler;
        assert_eq!((s.cmd, s.name), (Cmd::Object, "object|encoding"));
        assert!(table().resolve(&["OBJECT", "encoding"]).is_err());
        assert!(table().resolve(&["memory", "doctor"]).is_err());
    }

    #[test]
    fn routed_rows_are_plain_commands() {
        assert_eq!(routed(lookup(b"get").unwrap()).unwrap().name, "get");
        for name in [
            "multi",
            "exec",
            "discard",
            "watch",
            "asking",
            "readonly",
            "readwrite",
            "select",
            "cluster",
            "quit",
            "reset",
            "swapdb",
            "object",
            "config",
        ] {
            assert!(routed(lookup(name.as_bytes()).unwrap()).is_none(), "{name}");
        }
    }
}

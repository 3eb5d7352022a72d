//! The command table: names, arity, flags and key positions, as `COMMAND` reports them.
//!
//! Values follow redis-server 7.0 (`COMMAND INFO <name>`): arity (negative = at least),
//! flags, first key, last key (-1 = last argument), key step. redis-py's cluster client uses
//! these key positions to route requests (vectors README "Real client").

/// Command flags (a subset of redis-server's).
pub mod flag {
    /// May modify the keyspace.
    pub const WRITE: u16 = 1;
    /// Only reads the keyspace.
    pub const READONLY: u16 = 2;
    /// May grow memory.
    pub const DENYOOM: u16 = 4;
    /// Administrative.
    pub const ADMIN: u16 = 8;
    /// Pub/sub command.
    pub const PUBSUB: u16 = 16;
    /// Not allowed in scripts.
    pub const NOSCRIPT: u16 = 32;
    /// Allowed while loading.
    pub const LOADING: u16 = 64;
    /// Allowed on a stale replica.
    pub const STALE: u16 = 128;
    /// O(1) or O(log N).
    pub const FAST: u16 = 256;
    /// Allowed before AUTH.
    pub const NO_AUTH: u16 = 512;
    /// Allowed in RESP2 subscribe context.
    pub const SUB_OK: u16 = 1024;
    /// Not queued inside MULTI (runs at once).
    pub const NO_MULTI: u16 = 2048;

    /// (bit, name) pairs for COMMAND output.
    pub const NAMES: &[(u16, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
    ];
}

/// Every command the server knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum Cmd {
    Ping,
    Echo,
    Hello,
    Auth,
    Client,
    Command,
    Info,
    Config,
    Select,
    Get,
    Set,
    Setnx,
    Setex,
    Psetex,
    Getdel,
    Getset,
    Mget,
    Mset,
    Msetnx,
    Del,
    Unlink,
    Exists,
    Incr,
    Decr,
    Incrby,
    Decrby,
    Append,
    Strlen,
    Expire,
    Pexpire,
    Expireat,
    Pexpireat,
    Ttl,
    Pttl,
    Persist,
    Type,
    Keys,
    Scan,
    Dbsize,
    Randomkey,
    Flushdb,
    Flushall,
    Swapdb,
    Multi,
    Exec,
    Discard,
    Wait,
    Readonly,
    Readwrite,
    Asking,
    Role,
    Publish,
    Subscribe,
    Unsubscribe,
    Spublish,
    Ssubscribe,
    Sunsubscribe,
    Cluster,
    Dump,
    Restore,
    RestoreAsking,
    Migrate,
    Debug,
    Quit,
    Replconf,
    Psync,
    Time,
    Lastsave,
    Ferrocluster,
}

/// One row of the table.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// Lower-case name.
    pub name: &'static str,
    /// Which command.
    pub cmd: Cmd,
    /// Arity: exact when positive, at least `-arity` when negative (the name counts).
    pub arity: i32,
    /// [`flag`] bits.
    pub flags: u16,
    /// First key position (0 = no keys).
    pub first_key: i32,
    /// Last key position (-1 = last argument).
    pub last_key: i32,
    /// Step between keys.
    pub step: i32,
}

impl Spec {
    /// Whether `argc` satisfies the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i32;
        if self.arity >= 0 {
            argc == self.arity
        } else {
            argc >= -self.arity
        }
    }

    /// Whether the command writes.
    pub fn is_write(&self) -> bool {
        self.flags & flag::WRITE != 0
    }

    /// Key argument positions for a request of `argc` arguments.
    pub fn key_positions(&self, argc: usize) -> impl Iterator<Item = usize> {
        let (first, step) = (self.first_key, self.step.max(1));
        let last = if self.first_key == 0 {
            -1i64
        } else if self.last_key < 0 {
            argc as i64 + i64::from(self.last_key)
        } else {
            i64::from(self.last_key).min(argc as i64 - 1)
        };
        let first = i64::from(first);
        (0..)
            .map(move |i| first + i * i64::from(step))
            .take_while(move |&p| first > 0 && p <= last)
            .map(|p| p as usize)
    }
}

use flag::*;

macro_rules! spec {
    ($name:literal, $cmd:ident, $arity:expr, $flags:expr, $f:expr, $l:expr, $s:expr) => {
        Spec {
            name: $name,
            cmd: Cmd::$cmd,
            arity: $arity,
            flags: $flags,
            first_key: $f,
            last_key: $l,
            step: $s,
        }
    };
}

/// The table (redis-server 7.0 values).
pub const TABLE: &[Spec] = &[
    spec!("ping", Ping, -1, FAST | SUB_OK, 0, 0, 0),
    spec!("echo", Echo, 2, FAST, 0, 0, 0),
    spec!(
        "hello",
        Hello,
        -1,
        NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | NO_MULTI,
        0,
        0,
        0
    ),
    spec!(
        "auth",
        Auth,
        -2,
        NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | NO_MULTI,
        0,
        0,
        0
    ),
    spec!("client", Client, -2, NOSCRIPT | LOADING | STALE, 0, 0, 0),
    spec!("command", Command, -1, LOADING | STALE, 0, 0, 0),
    spec!("info", Info, -1, LOADING | STALE, 0, 0, 0),
    spec!(
        "config",
        Config,
        -2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        0,
        0,
        0
    ),
    spec!("select", Select, 2, LOADING | STALE | FAST, 0, 0, 0),
    spec!("get", Get, 2, READONLY | FAST, 1, 1, 1),
    spec!("set", Set, -3, WRITE | DENYOOM, 1, 1, 1),
    spec!("setnx", Setnx, 3, WRITE | DENYOOM | FAST, 1, 1, 1),
    spec!("setex", Setex, 4, WRITE | DENYOOM, 1, 1, 1),
    spec!("psetex", Psetex, 4, WRITE | DENYOOM, 1, 1, 1),
    spec!("getdel", Getdel, 2, WRITE | FAST, 1, 1, 1),
    spec!("getset", Getset, 3, WRITE | DENYOOM | FAST, 1, 1, 1),
    spec!("mget", Mget, -2, READONLY | FAST, 1, -1, 1),
    spec!("mset", Mset, -3, WRITE | DENYOOM, 1, -1, 2),
    spec!("msetnx", Msetnx, -3, WRITE | DENYOOM, 1, -1, 2),
    spec!("del", Del, -2, WRITE, 1, -1, 1),
    spec!("unlink", Unlink, -2, WRITE | FAST, 1, -1, 1),
    spec!("exists", Exists, -2, READONLY | FAST, 1, -1, 1),
    spec!("incr", Incr, 2, WRITE | DENYOOM | FAST, 1, 1, 1),
    spec!("decr", Decr, 2, WRITE | DENYOOM | FAST, 1, 1, 1),
    spec!("incrby", Incrby, 3, WRITE | DENYOOM | FAST, 1, 1, 1),
    spec!("decrby", Decrby, 3, WRITE | DENYOOM | FAST, 1, 1, 1),
    spec!("append", Append, 3, WRITE | DENYOOM | FAST, 1, 1, 1),
    spec!("strlen", Strlen, 2, READONLY | FAST, 1, 1, 1),
    spec!("expire", Expire, -3, WRITE | FAST, 1, 1, 1),
    spec!("pexpire", Pexpire, -3, WRITE | FAST, 1, 1, 1),
    spec!("expireat", Expireat, -3, WRITE | FAST, 1, 1, 1),
    spec!("pexpireat", Pexpireat, -3, WRITE | FAST, 1, 1, 1),
    spec!("ttl", Ttl, 2, READONLY | FAST, 1, 1, 1),
    spec!("pttl", Pttl, 2, READONLY | FAST, 1, 1, 1),
    spec!("persist", Persist, 2, WRITE | FAST, 1, 1, 1),
    spec!("type", Type, 2, READONLY | FAST, 1, 1, 1),
    spec!("keys", Keys, 2, READONLY, 0, 0, 0),
    spec!("scan", Scan, -2, READONLY, 0, 0, 0),
    spec!("dbsize", Dbsize, 1, READONLY | FAST, 0, 0, 0),
    spec!("randomkey", Randomkey, 1, READONLY, 0, 0, 0),
    spec!("flushdb", Flushdb, -1, WRITE, 0, 0, 0),
    spec!("flushall", Flushall, -1, WRITE, 0, 0, 0),
    spec!("swapdb", Swapdb, 3, WRITE | FAST, 0, 0, 0),
    spec!(
        "multi",
        Multi,
        1,
        NOSCRIPT | LOADING | STALE | FAST | NO_MULTI,
        0,
        0,
        0
    ),
    spec!(
        "exec",
        Exec,
        1,
        NOSCRIPT | LOADING | STALE | NO_MULTI,
        0,
        0,
        0
    ),
    spec!(
        "discard",
        Discard,
        1,
        NOSCRIPT | LOADING | STALE | FAST | NO_MULTI,
        0,
        0,
        0
    ),
    spec!("wait", Wait, 3, NOSCRIPT, 0, 0, 0),
    spec!("readonly", Readonly, 1, LOADING | STALE | FAST, 0, 0, 0),
    spec!("readwrite", Readwrite, 1, LOADING | STALE | FAST, 0, 0, 0),
    spec!("asking", Asking, 1, FAST, 0, 0, 0),
    spec!("role", Role, 1, NOSCRIPT | LOADING | STALE | FAST, 0, 0, 0),
    spec!(
        "publish",
        Publish,
        3,
        PUBSUB | LOADING | STALE | FAST,
        0,
        0,
        0
    ),
    spec!(
        "subscribe",
        Subscribe,
        -2,
        PUBSUB | NOSCRIPT | LOADING | STALE | SUB_OK,
        0,
        0,
        0
    ),
    spec!(
        "unsubscribe",
        Unsubscribe,
        -1,
        PUBSUB | NOSCRIPT | LOADING | STALE | SUB_OK,
        0,
        0,
        0
    ),
    spec!(
        "spublish",
        Spublish,
        3,
        PUBSUB | LOADING | STALE | FAST,
        1,
        1,
        1
    ),
    spec!(
        "ssubscribe",
        Ssubscribe,
        -2,
        PUBSUB | NOSCRIPT | LOADING | STALE | SUB_OK,
        1,
        -1,
        1
    ),
    spec!(
        "sunsubscribe",
        Sunsubscribe,
        -1,
        PUBSUB | NOSCRIPT | LOADING | STALE | SUB_OK,
        1,
        -1,
        1
    ),
    spec!("cluster", Cluster, -2, 0, 0, 0, 0),
    // Legacy migration (redis-server 7.0 COMMAND INFO; MIGRATE's keys are movable).
    spec!("dump", Dump, 2, READONLY, 1, 1, 1),
    spec!("restore", Restore, -4, WRITE | DENYOOM, 1, 1, 1),
    spec!(
        "restore-asking",
        RestoreAsking,
        -4,
        WRITE | DENYOOM,
        1,
        1,
        1
    ),
    spec!("migrate", Migrate, -6, WRITE, 3, 3, 1),
    spec!(
        "debug",
        Debug,
        -2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        0,
        0,
        0
    ),
    spec!(
        "quit",
        Quit,
        -1,
        NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | SUB_OK | NO_MULTI,
        0,
        0,
        0
    ),
    spec!(
        "replconf",
        Replconf,
        -1,
        ADMIN | NOSCRIPT | LOADING | STALE,
        0,
        0,
        0
    ),
    spec!("psync", Psync, -3, ADMIN | NOSCRIPT, 0, 0, 0),
    spec!("time", Time, 1, LOADING | STALE | FAST, 0, 0, 0),
    spec!("lastsave", Lastsave, 1, LOADING | STALE | FAST, 0, 0, 0),
    // Ours, not Valkey's/Redis's: FERROCLUSTER CKQUORUM | SUMMARY | HELP (src/readiness.rs).
    spec!("ferrocluster", Ferrocluster, -2, LOADING | STALE, 0, 0, 0),
];

/// Finds a command by name, ASCII case-insensitively, without allocating.
///
/// Hot path (every request): the name is lower-cased into 16 bytes packed as a `u128` and
/// looked up in an open-addressing table with a multiplicative hash, one or two probes; the
/// std `HashMap` (SipHash over a slice) cost several times more per request.
pub fn lookup(name: &[u8]) -> Option<&'static Spec> {
    let key = pack(name)?;
    let index = index();
    let mask = index.slots.len() - 1;
    let mut i = slot_of(key, index.bits);
    loop {
        let (k, pos) = index.slots[i];
        if pos == 0 {
            return None;
        }
        let spec = &TABLE[usize::from(pos - 1)];
        // Names never hold NUL bytes, so equal packed keys and equal lengths mean equal names.
        if k == key && spec.name.len() == name.len() {
            return Some(spec);
        }
        i = (i + 1) & mask;
    }
}

/// The command crate's table row for `spec` when the cluster fast path may route it directly
/// with [`ferrocluster_command::route`] instead of `ClientState::handle_command`: a
/// `CommandKind::Plain` command without subcommands (not FAILOVER), whose only client-state
/// effect in `handle_command` is clearing ASKING. `None` for every other command (MULTI, EXEC,
/// SELECT, ASKING, CLUSTER, ...) and for ours the command crate does not list.
pub fn routed(spec: &Spec) -> Option<&'static ferrocluster_command::CommandSpec> {
    index().routed.get(spec.cmd as usize).copied().flatten()
}

/// Lower-cased name packed little-endian into a `u128`; `None` when longer than 16 bytes (no
/// command name is). Built in registers: writing bytes into an array and reading it back as
/// words stalls on store-to-load forwarding.
fn pack(name: &[u8]) -> Option<u128> {
    if name.len() > 16 {
        return None;
    }
    let (mut lo, mut hi) = (0u64, 0u64);
    for (i, &b) in name.iter().enumerate() {
        let b = u64::from(b.to_ascii_lowercase());
        if i < 8 {
            lo |= b << (8 * i);
        } else {
            hi |= b << (8 * (i - 8));
        }
    }
    Some(u128::from(lo) | (u128::from(hi) << 64))
}

fn slot_of(key: u128, bits: u32) -> usize {
    let folded = (key as u64) ^ ((key >> 64) as u64).rotate_left(29);
    (folded.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
}

struct Index {
    /// (packed name, position in [`TABLE`] + 1); 0 marks an empty slot.
    slots: Box<[(u128, u16)]>,
    /// log2 of `slots.len()`.
    bits: u32,
    /// [`routed`] by `Cmd as usize`.
    routed: Box<[Option<&'static ferrocluster_command::CommandSpec>]>,
}

fn index() -> &'static Index {
    static INDEX: std::sync::OnceLock<Index> = std::sync::OnceLock::new();
    INDEX.get_or_init(|| {
        // At most a quarter full: probes stay short.
        let bits = (TABLE.len() * 4).next_power_of_two().trailing_zeros();
        let mut slots = vec![(0u128, 0u16); 1 << bits].into_boxed_slice();
        let mask = slots.len() - 1;
        for (pos, spec) in TABLE.iter().enumerate() {
            // Table names are lower case and at most 16 bytes (test `names_fit_the_index`).
            let Some(key) = pack(spec.name.as_bytes()) else {
                continue;
            };
            let mut i = slot_of(key, bits);
            while slots[i].1 != 0 {
                i = (i + 1) & mask;
            }
            // The table has far fewer than u16::MAX rows.
            slots[i] = (key, u16::try_from(pos + 1).unwrap_or(u16::MAX));
        }
        let width = TABLE.iter().map(|s| s.cmd as usize + 1).max().unwrap_or(0);
        let mut routed = vec![None; width].into_boxed_slice();
        for spec in TABLE {
            routed[spec.cmd as usize] =
                ferrocluster_command::lookup(spec.name.as_bytes()).filter(|c| {
                    c.kind == ferrocluster_command::CommandKind::Plain
                        && c.subcommands.is_empty()
                        && c.name != "failover"
                });
        }
        Index {
            slots,
            bits,
            routed,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_is_case_insensitive() {
        assert_eq!(lookup(b"GeT").unwrap().cmd, Cmd::Get);
        assert!(lookup(b"nosuchcommand").is_none());
        assert!(lookup(b"averyveryverylongcommandname").is_none());
    }

    #[test]
    fn key_positions_follow_first_last_step() {
        let mset = lookup(b"mset").unwrap();
        assert_eq!(mset.key_positions(5).collect::<Vec<_>>(), vec![1, 3]);
        let del = lookup(b"del").unwrap();
        assert_eq!(del.key_positions(4).collect::<Vec<_>>(), vec![1, 2, 3]);
        let get = lookup(b"get").unwrap();
        assert_eq!(get.key_positions(2).collect::<Vec<_>>(), vec![1]);
        let ping = lookup(b"ping").unwrap();
        assert_eq!(ping.key_positions(2).count(), 0);
    }

    #[test]
    fn arity_rules() {
        let get = lookup(b"get").unwrap();
        assert!(get.arity_ok(2));
        assert!(!get.arity_ok(3));
        let set = lookup(b"set").unwrap();
        assert!(set.arity_ok(3) && set.arity_ok(7) && !set.arity_ok(2));
    }

    #[test]
    fn every_name_is_found_in_any_case() {
        for spec in TABLE {
            assert_eq!(lookup(spec.name.as_bytes()).map(|s| s.cmd), Some(spec.cmd));
            let upper = spec.name.to_ascii_uppercase();
            assert_eq!(lookup(upper.as_bytes()).map(|s| s.cmd), Some(spec.cmd));
            // A trailing NUL packs like the name itself: the length check must refuse it.
            let mut nul = spec.name.as_bytes().to_vec();
            nul.push(0);
            assert!(lookup(&nul).is_none(), "{}", spec.name);
            assert!(lookup(&spec.name.as_bytes()[1..]).is_none_or(|s| s.cmd != spec.cmd));
        }
        assert!(lookup(b"").is_none());
    }

    #[test]
    fn names_fit_the_index() {
        assert!(TABLE.iter().all(|s| s.name.len() <= 16));
    }

    #[test]
    fn routed_rows_are_plain_commands_of_the_command_crate() {
        let get = routed(lookup(b"get").unwrap()).unwrap();
        assert_eq!(get.name, "get");
        assert_eq!(routed(lookup(b"set").unwrap()).unwrap().name, "set");
        // Commands with client-state effects or subcommands take handle_command.
        for name in [
            "multi",
            "exec",
            "discard",
            "watch",
            "asking",
            "readonly",
            "readwrite",
        ] {
            if let Some(spec) = lookup(name.as_bytes()) {
                assert!(routed(spec).is_none(), "{name}");
            }
        }
        for name in ["select", "cluster", "quit", "reset", "swapdb", "failover"] {
            if let Some(spec) = lookup(name.as_bytes()) {
                assert!(routed(spec).is_none(), "{name}");
            }
        }
        for spec in TABLE {
            if let Some(c) = routed(spec) {
                assert_eq!(c.name, spec.name);
            }
        }
    }

    #[test]
    fn names_are_unique_and_lower_case() {
        let mut names: Vec<_> = TABLE.iter().map(|s| s.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len());
        assert!(TABLE.iter().all(|s| s.name == s.name.to_ascii_lowercase()));
    }
}

//! The shape of one command-table row ([`CommandSpec`]) and what `COMMAND INFO` / `COMMAND
//! DOCS` print of it ([`CommandSpec::write_info`], [`CommandSpec::write_docs`]).
//!
//! The fields are Valkey's `struct serverCommand` as `COMMAND INFO` reports it (Valkey
//! `addReplyCommandInfo`, `addReplyCommandDocs`): arity, flags, the legacy key range
//! (`first, last, step`), ACL categories, tips, key specs, subcommands, and the docs. The
//! built-in rows are generated from real servers' replies (`crate::builtin`).

use crate::args::{atoi, eq_ignore_case, parse_i64};

macro_rules! bitset {
    ($(#[$m:meta])* $name:ident : $int:ty { $($(#[$fm:meta])* $flag:ident = $bit:expr, $text:expr;)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name(pub $int);

        impl $name {
            $($(#[$fm])* pub const $flag: $name = $name(1 << $bit);)*
            /// No flag.
            pub const NONE: $name = $name(0);
            /// Every flag with its printed name, in the order the servers print them.
            pub const NAMES: &'static [($name, &'static str)] = &[$(($name::$flag, $text)),*];

            /// Whether every flag of `other` is set.
            pub const fn contains(self, other: $name) -> bool {
                self.0 & other.0 == other.0
            }

            /// Whether any flag of `other` is set.
            pub const fn intersects(self, other: $name) -> bool {
                self.0 & other.0 != 0
            }

            /// The union.
            pub const fn or(self, other: $name) -> $name {
                $name(self.0 | other.0)
            }

            /// The printed names of the flags set, in print order.
            pub fn names(self) -> impl Iterator<Item = &'static str> + Clone {
                Self::NAMES.iter().filter(move |(f, _)| self.contains(*f)).map(|(_, n)| *n)
            }

            /// The flag printed as `name` (ASCII case-insensitive).
            pub fn from_name(name: &str) -> Option<$name> {
                Self::NAMES.iter().find(|(_, n)| n.eq_ignore_ascii_case(name)).map(|(f, _)| *f)
            }
        }

        impl std::ops::BitOr for $name {
            type Output = $name;
            fn bitor(self, rhs: $name) -> $name {
                self.or(rhs)
            }
        }
    };
}

bitset! {
    /// Command flags (Valkey `CMD_*`), in `COMMAND INFO`'s print order. Redis 7.0 prints
    /// `skip_slowlog` where Valkey 9 prints `skip_commandlog` (EXEC is the only built-in
    /// command with it); we follow Valkey.
    CommandFlags: u32 {
        /// `write`: may modify the keyspace.
        WRITE = 0, "write";
        /// `readonly`: only reads.
        READONLY = 1, "readonly";
        /// `denyoom`: may grow memory (refused when out of memory).
        DENYOOM = 2, "denyoom";
        /// `module`: a module command.
        MODULE = 3, "module";
        /// `admin`: administrative.
        ADMIN = 4, "admin";
        /// `pubsub`: a Pub/Sub command; with keys it is sharded Pub/Sub.
        PUBSUB = 5, "pubsub";
        /// `noscript`: not allowed in scripts.
        NOSCRIPT = 6, "noscript";
        /// `blocking`: may block the client.
        BLOCKING = 7, "blocking";
        /// `loading`: allowed while loading.
        LOADING = 8, "loading";
        /// `stale`: allowed on a replica with stale data.
        STALE = 9, "stale";
        /// `skip_monitor`: not shown to MONITOR.
        SKIP_MONITOR = 10, "skip_monitor";
        /// `skip_commandlog` (Redis 7.0 `skip_slowlog`): not logged.
        SKIP_COMMANDLOG = 11, "skip_commandlog";
        /// `fast`: O(1) or O(log N).
        FAST = 12, "fast";
        /// `no_auth`: allowed before AUTH.
        NO_AUTH = 13, "no_auth";
        /// `no_mandatory_keys`: may take no keys even though it has key specs.
        NO_MANDATORY_KEYS = 14, "no_mandatory_keys";
        /// `no_async_loading`: refused during async loading.
        NO_ASYNC_LOADING = 15, "no_async_loading";
        /// `no_multi`: refused (or run at once) inside MULTI.
        NO_MULTI = 16, "no_multi";
        /// `movablekeys`: the key positions depend on the arguments.
        MOVABLEKEYS = 17, "movablekeys";
        /// `allow_busy`: allowed while a script is busy.
        ALLOW_BUSY = 18, "allow_busy";
        /// `asking`: served on an importing slot without a preceding ASKING
        /// (RESTORE-ASKING, Valkey `CMD_ASKING`).
        ASKING = 19, "asking";
    }
}

bitset! {
    /// ACL categories (Valkey `ACL_CATEGORY_*`), in print order (`@keyspace`, ...).
    AclCategories: u32 {
        /// `@keyspace`
        KEYSPACE = 0, "@keyspace";
        /// `@read`
        READ = 1, "@read";
        /// `@write`
        WRITE = 2, "@write";
        /// `@set`
        SET = 3, "@set";
        /// `@sortedset`
        SORTEDSET = 4, "@sortedset";
        /// `@list`
        LIST = 5, "@list";
        /// `@hash`
        HASH = 6, "@hash";
        /// `@string`
        STRING = 7, "@string";
        /// `@bitmap`
        BITMAP = 8, "@bitmap";
        /// `@hyperloglog`
        HYPERLOGLOG = 9, "@hyperloglog";
        /// `@geo`
        GEO = 10, "@geo";
        /// `@stream`
        STREAM = 11, "@stream";
        /// `@pubsub`
        PUBSUB = 12, "@pubsub";
        /// `@admin`
        ADMIN = 13, "@admin";
        /// `@fast`
        FAST = 14, "@fast";
        /// `@slow`
        SLOW = 15, "@slow";
        /// `@blocking`
        BLOCKING = 16, "@blocking";
        /// `@dangerous`
        DANGEROUS = 17, "@dangerous";
        /// `@connection`
        CONNECTION = 18, "@connection";
        /// `@transaction`
        TRANSACTION = 19, "@transaction";
        /// `@scripting`
        SCRIPTING = 20, "@scripting";
    }
}

bitset! {
    /// Key-spec flags (Valkey `CMD_KEY_*`), in print order.
    KeyFlags: u16 {
        /// `RO`: read only.
        RO = 0, "RO";
        /// `RW`: read and modified.
        RW = 1, "RW";
        /// `OW`: overwritten.
        OW = 2, "OW";
        /// `RM`: deleted.
        RM = 3, "RM";
        /// `access`: the value is returned or read.
        ACCESS = 4, "access";
        /// `update`: the value is updated.
        UPDATE = 5, "update";
        /// `insert`: the value is added to.
        INSERT = 6, "insert";
        /// `delete`: the value is removed from.
        DELETE = 7, "delete";
        /// `not_key`: a channel, not a key (sharded Pub/Sub).
        NOT_KEY = 8, "not_key";
        /// `incomplete`: the spec may miss keys (the command's own key function decides).
        INCOMPLETE = 9, "incomplete";
        /// `variable_flags`: the flags depend on the arguments.
        VARIABLE_FLAGS = 10, "variable_flags";
    }
}

bitset! {
    /// Command doc flags (`COMMAND DOCS` `doc_flags`).
    DocFlags: u8 {
        /// `deprecated`
        DEPRECATED = 0, "deprecated";
        /// `syscmd`: a system command, not for users.
        SYSCMD = 1, "syscmd";
    }
}

bitset! {
    /// Argument flags (`COMMAND DOCS` argument `flags`).
    ArgFlags: u8 {
        /// `optional`
        OPTIONAL = 0, "optional";
        /// `multiple`
        MULTIPLE = 1, "multiple";
        /// `multiple_token`
        MULTIPLE_TOKEN = 2, "multiple_token";
    }
}

/// Where a key spec starts searching (Valkey `kspec_bs_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BeginSearch {
    /// At this argv index.
    Index(i32),
    /// After the first argument equal to `keyword` (ASCII case-insensitive), searching from
    /// `startfrom` (negative: from the end, backwards).
    Keyword {
        /// The keyword.
        keyword: &'static str,
        /// Where to start; negative counts from the end.
        startfrom: i32,
    },
    /// Not describable (the command's key function decides).
    Unknown,
}

/// How a key spec finds its keys after the begin index (Valkey `kspec_fk_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FindKeys {
    /// Keys from the begin index up to `lastkey` (relative; negative counts from the end,
    /// with `limit` > 1 the range is the first `1/limit` of the rest), every `keystep`.
    Range {
        /// Last key, relative to the begin index (negative: from the end).
        lastkey: i32,
        /// Distance between keys.
        keystep: i32,
        /// With `lastkey` -1: divide the remaining arguments by this (0: all of them).
        limit: i32,
    },
    /// The key count is at `keynumidx` (relative), keys from `firstkey` (relative), every
    /// `keystep`.
    Keynum {
        /// Index of the count, relative to the begin index.
        keynumidx: i32,
        /// Index of the first key, relative to the begin index.
        firstkey: i32,
        /// Distance between keys.
        keystep: i32,
    },
    /// Not describable.
    Unknown,
}

/// One key spec (Valkey `keySpec`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeySpec {
    /// Notes for humans, if any.
    pub notes: Option<&'static str>,
    /// Access flags.
    pub flags: KeyFlags,
    /// Where the search starts.
    pub begin: BeginSearch,
    /// How the keys are found.
    pub find: FindKeys,
}

/// The command's own key function, used where its key specs cannot tell (Valkey's
/// `getkeys_proc`: when a spec is `incomplete` or unknown, when a spec has
/// `variable_flags`, or when a `keynum` count is not a number).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeysProc {
    /// None: the key specs are the whole truth.
    None,
    /// Valkey `genericGetKeys`: the count at `count` (read with C `atoi`), keys from
    /// `first` every `step`, plus the destination at `store` when non-zero (last). A count
    /// below 1 or beyond the arguments gives no keys.
    Generic {
        /// Destination key index (0: none).
        store: u8,
        /// Index of the key count.
        count: u8,
        /// Index of the first key.
        first: u8,
        /// Distance between keys.
        step: u8,
    },
    /// `sortGetKeys`: key 1, and the argument after the last `STORE` (skipping `LIMIT a b`,
    /// `GET p`, `BY p`).
    Sort,
    /// `sortROGetKeys`: key 1.
    SortRo,
    /// `migrateGetKeys`: argv\[3\], or with the `KEYS` option the arguments after it.
    Migrate,
    /// `georadiusGetKeys`: key 1 and the argument after the last `STORE`/`STOREDIST`.
    Georadius,
    /// `xreadGetKeys`: the first half of the arguments after `STREAMS`.
    Xread,
    /// `setGetKeys`: key 1 (`RW access update` with `GET`, else `OW update`).
    Set,
    /// `bitfieldGetKeys`: key 1 (`RO access` when only `GET` subcommands, else `RW access
    /// update`).
    Bitfield,
}

/// An argument's type in `COMMAND DOCS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgType {
    /// `string`
    String,
    /// `integer`
    Integer,
    /// `double`
    Double,
    /// `key`
    Key,
    /// `pattern`
    Pattern,
    /// `unix-time`
    UnixTime,
    /// `pure-token`
    PureToken,
    /// `oneof`
    Oneof,
    /// `block`
    Block,
}

impl ArgType {
    /// The printed name.
    pub const fn name(self) -> &'static str {
        match self {
            ArgType::String => "string",
            ArgType::Integer => "integer",
            ArgType::Double => "double",
            ArgType::Key => "key",
            ArgType::Pattern => "pattern",
            ArgType::UnixTime => "unix-time",
            ArgType::PureToken => "pure-token",
            ArgType::Oneof => "oneof",
            ArgType::Block => "block",
        }
    }
}

/// One documented argument (Valkey `serverCommandArg`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arg {
    /// Name.
    pub name: &'static str,
    /// Type.
    pub kind: ArgType,
    /// Display text (Valkey 8+ prints it for every non-container argument).
    pub display_text: Option<&'static str>,
    /// For a key argument, the index of its key spec.
    pub key_spec_index: Option<i32>,
    /// The token that introduces the argument.
    pub token: Option<&'static str>,
    /// Summary.
    pub summary: Option<&'static str>,
    /// Version that added it.
    pub since: Option<&'static str>,
    /// Flags.
    pub flags: ArgFlags,
    /// Version that deprecated it.
    pub deprecated_since: Option<&'static str>,
    /// The arguments of a `oneof` or `block`.
    pub arguments: &'static [Arg],
}

impl Arg {
    /// An argument with a name and type only.
    pub const fn new(name: &'static str, kind: ArgType) -> Arg {
        Arg {
            name,
            kind,
            display_text: None,
            key_spec_index: None,
            token: None,
            summary: None,
            since: None,
            flags: ArgFlags::NONE,
            deprecated_since: None,
            arguments: &[],
        }
    }
    /// With a display text.
    pub const fn display(mut self, text: &'static str) -> Arg {
        self.display_text = Some(text);
        self
    }
    /// With a key spec index.
    pub const fn key_spec(mut self, index: i32) -> Arg {
        self.key_spec_index = Some(index);
        self
    }
    /// With a token.
    pub const fn token(mut self, token: &'static str) -> Arg {
        self.token = Some(token);
        self
    }
    /// With a summary.
    pub const fn summary(mut self, text: &'static str) -> Arg {
        self.summary = Some(text);
        self
    }
    /// With a version.
    pub const fn since(mut self, version: &'static str) -> Arg {
        self.since = Some(version);
        self
    }
    /// With flags.
    pub const fn flags(mut self, flags: ArgFlags) -> Arg {
        self.flags = flags;
        self
    }
    /// Deprecated since a version.
    pub const fn deprecated(mut self, version: &'static str) -> Arg {
        self.deprecated_since = Some(version);
        self
    }
    /// With sub-arguments.
    pub const fn args(mut self, arguments: &'static [Arg]) -> Arg {
        self.arguments = arguments;
        self
    }
}

/// A command's documentation (`COMMAND DOCS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandDoc {
    /// One line.
    pub summary: &'static str,
    /// Version that added it.
    pub since: &'static str,
    /// Group (`string`, `hash`, `generic`, ...).
    pub group: &'static str,
    /// Time complexity.
    pub complexity: Option<&'static str>,
    /// Doc flags.
    pub doc_flags: DocFlags,
    /// Version that deprecated it.
    pub deprecated_since: Option<&'static str>,
    /// What replaces it.
    pub replaced_by: Option<&'static str>,
    /// (version, change) pairs.
    pub history: &'static [(&'static str, &'static str)],
    /// Arguments.
    pub arguments: &'static [Arg],
}

impl CommandDoc {
    /// Docs with a summary, version and group only.
    pub const fn new(summary: &'static str, since: &'static str, group: &'static str) -> Self {
        CommandDoc {
            summary,
            since,
            group,
            complexity: None,
            doc_flags: DocFlags::NONE,
            deprecated_since: None,
            replaced_by: None,
            history: &[],
            arguments: &[],
        }
    }
    /// With a complexity.
    pub const fn complexity(mut self, text: &'static str) -> Self {
        self.complexity = Some(text);
        self
    }
    /// With doc flags.
    pub const fn flags(mut self, flags: DocFlags) -> Self {
        self.doc_flags = flags;
        self
    }
    /// Deprecated since `version`, replaced by `by`.
    pub const fn deprecated(mut self, version: &'static str, by: &'static str) -> Self {
        self.deprecated_since = Some(version);
        self.replaced_by = Some(by);
        self
    }
    /// With history.
    pub const fn history(mut self, history: &'static [(&'static str, &'static str)]) -> Self {
        self.history = history;
        self
    }
    /// With arguments.
    pub const fn args(mut self, arguments: &'static [Arg]) -> Self {
        self.arguments = arguments;
        self
    }
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

/// One row of the command table: what `COMMAND INFO` and `COMMAND DOCS` print, and what
/// routing needs (key positions, flags, special handling).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandSpec {
    /// Full lowercase name (`get`, `cluster|setslot`).
    pub name: &'static str,
    /// Arity: `n` means exactly `n` arguments (name included), `-n` at least `n`.
    pub arity: i32,
    /// Flags.
    pub flags: CommandFlags,
    /// ACL categories.
    pub acl: AclCategories,
    /// The legacy key range `COMMAND INFO` prints: first key (0: none).
    pub first_key: i32,
    /// Last key (negative: from the end).
    pub last_key: i32,
    /// Step between keys.
    pub key_step: i32,
    /// Tips (`nondeterministic_output`, `request_policy:all_shards`, ...).
    pub tips: &'static [&'static str],
    /// Key specs.
    pub key_specs: &'static [KeySpec],
    /// The command's own key function.
    pub keys_proc: KeysProc,
    /// Special handling.
    pub kind: CommandKind,
    /// Subcommands of a container command, in the order `COMMAND INFO` lists them; empty
    /// otherwise.
    pub subcommands: &'static [CommandSpec],
    /// Documentation.
    pub doc: CommandDoc,
}

/// What the `COMMAND` replies are written to: the host's RESP encoder. RESP2 hosts write
/// sets as arrays and maps as flat arrays of `2 n` elements.
pub trait ReplyWriter {
    /// An array header of `n` elements.
    fn array(&mut self, n: usize);
    /// A set header (RESP3 `~`).
    fn set(&mut self, n: usize);
    /// A map header of `n` pairs (RESP3 `%`).
    fn map(&mut self, n: usize);
    /// A bulk string.
    fn bulk(&mut self, b: &[u8]);
    /// A simple string.
    fn simple(&mut self, s: &str);
    /// An integer.
    fn int(&mut self, n: i64);
}

impl CommandSpec {
    /// A row with a name, arity and flags: no keys, no ACL categories, no docs beyond
    /// `summary` (for a host's own commands; fill the rest with struct update syntax).
    pub const fn new(
        name: &'static str,
        arity: i32,
        flags: CommandFlags,
        doc: CommandDoc,
    ) -> CommandSpec {
        CommandSpec {
            name,
            arity,
            flags,
            acl: AclCategories::NONE,
            first_key: 0,
            last_key: 0,
            key_step: 0,
            tips: &[],
            key_specs: &[],
            keys_proc: KeysProc::None,
            kind: CommandKind::Plain,
            subcommands: &[],
            doc,
        }
    }

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

    /// The name after the container's (`setslot` for `cluster|setslot`).
    pub fn short_name(&self) -> &'static str {
        self.name.rsplit('|').next().unwrap_or(self.name)
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

    /// The argv positions of the keys, in Valkey's order (`getKeysFromCommandWithSpecs`):
    /// the key specs when they describe every key, else the command's key function
    /// ([`KeysProc`]). Channels of sharded Pub/Sub (`not_key` specs) count as keys for a
    /// `pubsub` command, as cluster routing treats them. Never panics: a too short argv gives
    /// no keys.
    pub fn key_positions<A: AsRef<[u8]>>(&self, argv: &[A]) -> KeyPositions {
        let mut out = KeyPositions::default();
        let include_not_key = self.flags.contains(CommandFlags::PUBSUB);
        self.find_keys(argv, include_not_key, &mut |p, _| out.push(p));
        out
    }

    /// The keys and their access flags as `COMMAND GETKEYSANDFLAGS` gives them (Valkey
    /// `getKeysFromCommandWithSpecs` without channels; the key functions' own flags).
    pub fn keys_with_flags<A: AsRef<[u8]>>(&self, argv: &[A]) -> Vec<(usize, KeyFlags)> {
        let mut out = Vec::new();
        self.find_keys(argv, false, &mut |p, f| out.push((p, f)));
        out
    }

    /// Whether the command may have keys (Valkey `doesCommandHaveKeys`).
    pub fn has_keys(&self) -> bool {
        self.keys_proc != KeysProc::None
            || self
                .key_specs
                .iter()
                .any(|s| !s.flags.contains(KeyFlags::NOT_KEY))
    }

    fn find_keys<A: AsRef<[u8]>>(
        &self,
        argv: &[A],
        include_not_key: bool,
        sink: &mut dyn FnMut(usize, KeyFlags),
    ) {
        let usable = self
            .key_specs
            .iter()
            .any(|s| include_not_key || !s.flags.contains(KeyFlags::NOT_KEY));
        let varflags = self
            .key_specs
            .iter()
            .any(|s| s.flags.contains(KeyFlags::VARIABLE_FLAGS));
        if usable && !varflags {
            let mut found = Vec::new();
            if self.keys_from_specs(argv, include_not_key, &mut found) {
                for (p, f) in found {
                    sink(p, f);
                }
                return;
            }
        }
        self.keys_from_proc(argv, sink);
    }

    /// Valkey `getKeysUsingKeySpecs` without partial results: `false` when a spec is
    /// invalid for this argv or incomplete.
    fn keys_from_specs<A: AsRef<[u8]>>(
        &self,
        argv: &[A],
        include_not_key: bool,
        out: &mut Vec<(usize, KeyFlags)>,
    ) -> bool {
        let argc = argv.len() as i64;
        for spec in self.key_specs {
            if spec.flags.contains(KeyFlags::NOT_KEY) && !include_not_key {
                continue;
            }
            let first = match spec.begin {
                BeginSearch::Index(i) => i64::from(i),
                BeginSearch::Keyword { keyword, startfrom } => {
                    let startfrom = i64::from(startfrom);
                    let (start, end) = if startfrom > 0 {
                        (startfrom, argc - 1)
                    } else {
                        (argc + startfrom, 1)
                    };
                    let mut found = 0;
                    let mut i = start;
                    while i != end {
                        if i >= argc || i < 1 {
                            break;
                        }
                        // 1 <= i < argc.
                        if eq_ignore_case(argv[i as usize].as_ref(), keyword) {
                            found = i + 1;
                            break;
                        }
                        i += if start <= end { 1 } else { -1 };
                    }
                    if found == 0 {
                        continue;
                    }
                    found
                }
                BeginSearch::Unknown => return false,
            };
            let (first, last, step) = match spec.find {
                FindKeys::Range {
                    lastkey,
                    keystep,
                    limit,
                } => {
                    let last = if lastkey >= 0 {
                        first + i64::from(lastkey)
                    } else if limit == 0 {
                        argc + i64::from(lastkey)
                    } else {
                        first + ((argc - first) / i64::from(limit) + i64::from(lastkey))
                    };
                    (first, last, i64::from(keystep))
                }
                FindKeys::Keynum {
                    keynumidx,
                    firstkey,
                    keystep,
                } => {
                    let at = first + i64::from(keynumidx);
                    if at >= argc || at < 0 {
                        return false;
                    }
                    let Some(n) = parse_i64(argv[at as usize].as_ref()).filter(|n| *n >= 0) else {
                        return false;
                    };
                    let first = first + i64::from(firstkey);
                    (first, first.saturating_add(n) - 1, i64::from(keystep))
                }
                FindKeys::Unknown => return false,
            };
            if last >= argc || last < first || first >= argc {
                return false;
            }
            let mut i = first;
            while i <= last {
                out.push((i as usize, spec.flags));
                i += step.max(1);
            }
            if spec.flags.contains(KeyFlags::INCOMPLETE) {
                return false;
            }
        }
        true
    }

    fn keys_from_proc<A: AsRef<[u8]>>(&self, argv: &[A], out: &mut dyn FnMut(usize, KeyFlags)) {
        let argc = argv.len();
        let arg = |i: usize| argv.get(i).map(|a| a.as_ref()).unwrap_or(b"");
        let none = KeyFlags::NONE;
        match self.keys_proc {
            KeysProc::None => {}
            KeysProc::Generic {
                store,
                count,
                first,
                step,
            } => {
                let (count, first, step) = (
                    usize::from(count),
                    usize::from(first),
                    usize::from(step.max(1)),
                );
                if count >= argc {
                    return;
                }
                let num = atoi(arg(count));
                let avail = (argc.saturating_sub(first) / step) as i64;
                if num < 1 || num > avail {
                    return;
                }
                for i in 0..num as usize {
                    out(first + i * step, none);
                }
                if store != 0 {
                    out(usize::from(store), none);
                }
            }
            KeysProc::Sort | KeysProc::SortRo => {
                if argc < 2 {
                    return;
                }
                out(1, KeyFlags::RO.or(KeyFlags::ACCESS));
                if self.keys_proc == KeysProc::SortRo {
                    return;
                }
                let mut store = None;
                let mut i = 2;
                while i < argc {
                    let a = arg(i);
                    if eq_ignore_case(a, "limit") {
                        i += 2;
                    } else if eq_ignore_case(a, "store") && i + 1 < argc {
                        store = Some(i + 1);
                    } else if eq_ignore_case(a, "get") || eq_ignore_case(a, "by") {
                        i += 1;
                    }
                    i += 1;
                }
                if let Some(s) = store {
                    out(s, KeyFlags::OW.or(KeyFlags::UPDATE));
                }
            }
            KeysProc::Migrate => {
                if argc < 4 {
                    return;
                }
                let (mut first, mut num) = (3, 1);
                let mut i = 6;
                while i < argc {
                    let a = arg(i);
                    if eq_ignore_case(a, "keys") {
                        if arg(3).is_empty() {
                            first = i + 1;
                            num = argc - first;
                        } else {
                            num = 0;
                        }
                        break;
                    }
                    if eq_ignore_case(a, "auth") {
                        i += 1;
                    } else if eq_ignore_case(a, "auth2") {
                        i += 2;
                    }
                    i += 1;
                }
                let f = KeyFlags::RW.or(KeyFlags::ACCESS).or(KeyFlags::DELETE);
                for k in first..first + num {
                    out(k, f);
                }
            }
            KeysProc::Georadius => {
                if argc < 2 {
                    return;
                }
                out(1, none);
                let mut stored = None;
                let mut i = 5;
                while i < argc {
                    let a = arg(i);
                    if (eq_ignore_case(a, "store") || eq_ignore_case(a, "storedist"))
                        && i + 1 < argc
                    {
                        stored = Some(i + 1);
                        i += 1;
                    }
                    i += 1;
                }
                if let Some(s) = stored {
                    out(s, none);
                }
            }
            KeysProc::Xread => {
                let mut streams = None;
                let mut i = 1;
                while i < argc {
                    let a = arg(i);
                    if eq_ignore_case(a, "block") || eq_ignore_case(a, "count") {
                        i += 1;
                    } else if eq_ignore_case(a, "group") {
                        i += 2;
                    } else if eq_ignore_case(a, "noack") {
                    } else if eq_ignore_case(a, "streams") {
                        streams = Some(i);
                        break;
                    } else {
                        break;
                    }
                    i += 1;
                }
                let Some(pos) = streams else { return };
                let num = argc - pos - 1;
                if num == 0 || !num.is_multiple_of(2) {
                    return;
                }
                for k in pos + 1..argc - num / 2 {
                    out(k, none);
                }
            }
            KeysProc::Set => {
                if argc < 2 {
                    return;
                }
                let get = (3..argc).any(|i| eq_ignore_case(arg(i), "get"));
                out(
                    1,
                    if get {
                        KeyFlags::RW.or(KeyFlags::ACCESS).or(KeyFlags::UPDATE)
                    } else {
                        KeyFlags::OW.or(KeyFlags::UPDATE)
                    },
                );
            }
            KeysProc::Bitfield => {
                if argc < 2 {
                    return;
                }
                let mut readonly = true;
                let mut i = 2;
                while i < argc {
                    let rem = argc - i - 1;
                    let a = arg(i);
                    if eq_ignore_case(a, "get") && rem >= 2 {
                        i += 2;
                    } else if (eq_ignore_case(a, "set") || eq_ignore_case(a, "incrby")) && rem >= 3
                    {
                        readonly = false;
                        break;
                    } else if eq_ignore_case(a, "overflow") && rem >= 1 {
                        i += 1;
                    } else {
                        readonly = false;
                        break;
                    }
                    i += 1;
                }
                out(
                    1,
                    if readonly {
                        KeyFlags::RO.or(KeyFlags::ACCESS)
                    } else {
                        KeyFlags::RW.or(KeyFlags::ACCESS).or(KeyFlags::UPDATE)
                    },
                );
            }
        }
    }

    /// Writes the `COMMAND INFO` entry of this command (Valkey `addReplyCommandInfo`), with
    /// `subcommands` as its subcommand entries (the host passes the ones it serves).
    pub fn write_info<'a, W: ReplyWriter + ?Sized>(
        &self,
        w: &mut W,
        subcommands: impl ExactSizeIterator<Item = &'a CommandSpec>,
    ) {
        w.array(10);
        w.bulk(self.name.as_bytes());
        w.int(i64::from(self.arity));
        let flags = self.flags.names();
        w.set(flags.clone().count());
        for f in flags {
            w.simple(f);
        }
        w.int(i64::from(self.first_key));
        w.int(i64::from(self.last_key));
        w.int(i64::from(self.key_step));
        let acl = self.acl.names();
        w.set(acl.clone().count());
        for c in acl {
            w.simple(c);
        }
        w.set(self.tips.len());
        for t in self.tips {
            w.bulk(t.as_bytes());
        }
        w.set(self.key_specs.len());
        for ks in self.key_specs {
            write_key_spec(ks, w);
        }
        w.array(subcommands.len());
        for s in subcommands {
            s.write_info(w, std::iter::empty());
        }
    }

    /// Writes the value of this command's `COMMAND DOCS` map entry (Valkey
    /// `addReplyCommandDocs`), with `subcommands` as its subcommand docs.
    pub fn write_docs<'a, W: ReplyWriter + ?Sized>(
        &self,
        w: &mut W,
        subcommands: impl ExactSizeIterator<Item = &'a CommandSpec>,
    ) {
        let d = &self.doc;
        let n = 3
            + usize::from(d.complexity.is_some())
            + usize::from(d.doc_flags != DocFlags::NONE)
            + usize::from(d.deprecated_since.is_some())
            + usize::from(d.replaced_by.is_some())
            + usize::from(!d.history.is_empty())
            + usize::from(!d.arguments.is_empty())
            + usize::from(subcommands.len() > 0);
        w.map(n);
        pair(w, "summary", d.summary);
        pair(w, "since", d.since);
        pair(w, "group", d.group);
        if let Some(c) = d.complexity {
            pair(w, "complexity", c);
        }
        if d.doc_flags != DocFlags::NONE {
            w.bulk(b"doc_flags");
            let names = d.doc_flags.names();
            w.set(names.clone().count());
            for f in names {
                w.simple(f);
            }
        }
        if let Some(v) = d.deprecated_since {
            pair(w, "deprecated_since", v);
        }
        if let Some(v) = d.replaced_by {
            pair(w, "replaced_by", v);
        }
        if !d.history.is_empty() {
            w.bulk(b"history");
            w.set(d.history.len());
            for (version, change) in d.history {
                w.array(2);
                w.bulk(version.as_bytes());
                w.bulk(change.as_bytes());
            }
        }
        if !d.arguments.is_empty() {
            w.bulk(b"arguments");
            write_args(d.arguments, w);
        }
        if subcommands.len() > 0 {
            w.bulk(b"subcommands");
            w.map(subcommands.len());
            for s in subcommands {
                w.bulk(s.name.as_bytes());
                s.write_docs(w, std::iter::empty());
            }
        }
    }
}

fn pair<W: ReplyWriter + ?Sized>(w: &mut W, key: &str, value: &str) {
    w.bulk(key.as_bytes());
    w.bulk(value.as_bytes());
}

fn write_key_spec<W: ReplyWriter + ?Sized>(ks: &KeySpec, w: &mut W) {
    w.map(3 + usize::from(ks.notes.is_some()));
    if let Some(n) = ks.notes {
        pair(w, "notes", n);
    }
    w.bulk(b"flags");
    let names = ks.flags.names();
    w.set(names.clone().count());
    for f in names {
        w.simple(f);
    }
    w.bulk(b"begin_search");
    w.map(2);
    match ks.begin {
        BeginSearch::Index(i) => {
            pair(w, "type", "index");
            w.bulk(b"spec");
            w.map(1);
            w.bulk(b"index");
            w.int(i64::from(i));
        }
        BeginSearch::Keyword { keyword, startfrom } => {
            pair(w, "type", "keyword");
            w.bulk(b"spec");
            w.map(2);
            pair(w, "keyword", keyword);
            w.bulk(b"startfrom");
            w.int(i64::from(startfrom));
        }
        BeginSearch::Unknown => {
            pair(w, "type", "unknown");
            w.bulk(b"spec");
            w.map(0);
        }
    }
    w.bulk(b"find_keys");
    w.map(2);
    match ks.find {
        FindKeys::Range {
            lastkey,
            keystep,
            limit,
        } => {
            pair(w, "type", "range");
            w.bulk(b"spec");
            w.map(3);
            for (k, v) in [("lastkey", lastkey), ("keystep", keystep), ("limit", limit)] {
                w.bulk(k.as_bytes());
                w.int(i64::from(v));
            }
        }
        FindKeys::Keynum {
            keynumidx,
            firstkey,
            keystep,
        } => {
            pair(w, "type", "keynum");
            w.bulk(b"spec");
            w.map(3);
            for (k, v) in [
                ("keynumidx", keynumidx),
                ("firstkey", firstkey),
                ("keystep", keystep),
            ] {
                w.bulk(k.as_bytes());
                w.int(i64::from(v));
            }
        }
        FindKeys::Unknown => {
            pair(w, "type", "unknown");
            w.bulk(b"spec");
            w.map(0);
        }
    }
}

fn write_args<W: ReplyWriter + ?Sized>(args: &[Arg], w: &mut W) {
    w.array(args.len());
    for a in args {
        let n = 2
            + usize::from(a.display_text.is_some())
            + usize::from(a.key_spec_index.is_some())
            + usize::from(a.token.is_some())
            + usize::from(a.summary.is_some())
            + usize::from(a.since.is_some())
            + usize::from(a.flags != ArgFlags::NONE)
            + usize::from(a.deprecated_since.is_some())
            + usize::from(!a.arguments.is_empty());
        w.map(n);
        pair(w, "name", a.name);
        pair(w, "type", a.kind.name());
        if let Some(v) = a.display_text {
            pair(w, "display_text", v);
        }
        if let Some(i) = a.key_spec_index {
            w.bulk(b"key_spec_index");
            w.int(i64::from(i));
        }
        if let Some(v) = a.token {
            pair(w, "token", v);
        }
        if let Some(v) = a.summary {
            pair(w, "summary", v);
        }
        if let Some(v) = a.since {
            pair(w, "since", v);
        }
        if a.flags != ArgFlags::NONE {
            w.bulk(b"flags");
            let names = a.flags.names();
            w.set(names.clone().count());
            for f in names {
                w.simple(f);
            }
        }
        if let Some(v) = a.deprecated_since {
            pair(w, "deprecated_since", v);
        }
        if !a.arguments.is_empty() {
            w.bulk(b"arguments");
            write_args(a.arguments, w);
        }
    }
}

/// Key positions in argv, in the order the key specs (or key function) give them. At most
/// a few positions are kept inline; more spill to the heap.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyPositions {
    inline: [u32; 4],
    len: usize,
    more: Vec<usize>,
    next: usize,
}

impl KeyPositions {
    fn push(&mut self, pos: usize) {
        if self.len < self.inline.len() && self.more.is_empty() {
            // Positions index argv, which holds far fewer than u32::MAX arguments.
            self.inline[self.len] = pos as u32;
            self.len += 1;
        } else {
            if self.more.is_empty() {
                self.more
                    .extend(self.inline[..self.len].iter().map(|&p| p as usize));
            }
            self.more.push(pos);
        }
    }

    /// Number of positions not yet iterated.
    pub fn remaining(&self) -> usize {
        self.total() - self.next
    }

    fn total(&self) -> usize {
        if self.more.is_empty() {
            self.len
        } else {
            self.more.len()
        }
    }

    fn at(&self, i: usize) -> usize {
        if self.more.is_empty() {
            self.inline[i] as usize
        } else {
            self.more[i]
        }
    }
}

impl Iterator for KeyPositions {
    type Item = usize;
    fn next(&mut self) -> Option<usize> {
        if self.next >= self.total() {
            return None;
        }
        let p = self.at(self.next);
        self.next += 1;
        Some(p)
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

//! The command table: the rows a server serves, found by name on every request.
//!
//! * [`BUILTIN`] holds every built-in command of Valkey 9.1 (with its subcommands), as its
//!   `COMMAND INFO` and `COMMAND DOCS` give them (see [`crate::spec`] for the row's shape).
//! * A [`CommandTable`] is the set a host serves: the built-in rows it implements
//!   ([`CommandTable::serve`]) plus rows of its own ([`CommandTable::register`]), each with a
//!   host value `H` (its handler id). Routing, MULTI and `COMMAND` read the host's table, so
//!   a command a database adds is routed by its keys like a built-in one.
//! * [`lookup`] / [`resolve`] read [`builtin_table`], the table of every built-in command
//!   (what [`ClientState::handle_command`](crate::ClientState::handle_command) uses when the
//!   host passes no table of its own).
//!
//! Lookup is on every request: a name of up to 16 bytes is lower-cased into a `u128` in
//! registers and found in an open-addressing index with a multiplicative hash, one or two
//! probes (the std `HashMap`, SipHash over a slice, cost several times more per request);
//! longer names (`georadiusbymember_ro`) take a binary search.

use crate::error::CommandError;
pub use crate::spec::{
    AclCategories, Arg, ArgFlags, ArgType, BeginSearch, CommandDoc, CommandFlags, CommandKind,
    CommandSpec, DocFlags, FindKeys, KeyFlags, KeyPositions, KeySpec, KeysProc, ReplyWriter,
};
use std::sync::OnceLock;

pub use crate::builtin::BUILTIN;

/// The built-in CLUSTER subcommands, sorted by name.
pub fn cluster_subcommands() -> &'static [CommandSpec] {
    builtin(b"cluster").map_or(&[], |s| s.subcommands)
}

/// The built-in row of a command or subcommand by full name (`get`, `config|get`), ASCII
/// case-insensitive; `None` when no Valkey 9.1 command has that name.
pub fn builtin(name: &[u8]) -> Option<&'static CommandSpec> {
    let (top, sub) = match name.iter().position(|&b| b == b'|') {
        Some(i) => (&name[..i], Some(&name[i + 1..])),
        None => (name, None),
    };
    let spec = search(BUILTIN, top, 0)?;
    match sub {
        None => Some(spec),
        Some(s) => spec
            .subcommands
            .iter()
            .find(|c| cmp_lower(c.short_name().as_bytes(), s).is_eq()),
    }
}

/// Binary search of a name-sorted slice, comparing `name` ASCII case-insensitively with the
/// part of each row's name after `skip` bytes.
fn search<'a>(rows: &'a [CommandSpec], name: &[u8], skip: usize) -> Option<&'a CommandSpec> {
    rows.binary_search_by(|s| cmp_lower(&s.name.as_bytes()[skip.min(s.name.len())..], name))
        .ok()
        .map(|i| &rows[i])
}

/// Compares a lower-case `row` name with `name` lower-cased, without allocating.
fn cmp_lower(row: &[u8], name: &[u8]) -> std::cmp::Ordering {
    let n = row.len().min(name.len());
    for i in 0..n {
        let o = row[i].cmp(&name[i].to_ascii_lowercase());
        if o.is_ne() {
            return o;
        }
    }
    row.len().cmp(&name.len())
}

/// Why a row could not be added to a [`CommandTable`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TableError {
    /// No built-in command has this name ([`CommandTable::serve`]).
    #[error("no built-in command is named '{0}'")]
    NotBuiltin(String),
    /// A row with this name is in the table already.
    #[error("command '{0}' is in the table already")]
    Duplicate(String),
    /// A subcommand's container is not in the table.
    #[error("container command '{0}' is not in the table")]
    NoContainer(String),
    /// The name is empty, not lower case, or holds a space or `|` where it cannot.
    #[error("'{0}' is not a valid command name")]
    BadName(String),
}

/// One served command: its row, the host's value, and the subcommands served.
#[derive(Debug, Clone)]
pub struct Row<H> {
    /// The command's row.
    pub spec: &'static CommandSpec,
    /// The host's value (its handler).
    pub handler: H,
    /// Sorted by name.
    subcommands: Vec<(&'static CommandSpec, H)>,
    /// `subcommands` positions in listing order.
    listed: Vec<usize>,
}

impl<H> Row<H> {
    /// The subcommands served, in the order `COMMAND INFO` lists them: the built-in
    /// container's order ([`CommandSpec::subcommands`]), then the host's own in the order
    /// registered.
    pub fn subcommands(&self) -> impl ExactSizeIterator<Item = &'static CommandSpec> + '_ {
        self.listed.iter().map(|&i| self.subcommands[i].0)
    }

    fn relist(&mut self) {
        let rank = |s: &CommandSpec| {
            self.spec
                .subcommands
                .iter()
                .position(|c| c.name == s.name)
                .unwrap_or(usize::MAX)
        };
        let mut listed: Vec<usize> = (0..self.subcommands.len()).collect();
        listed.sort_by_key(|&i| rank(self.subcommands[i].0));
        self.listed = listed;
    }

    /// Whether the row is a container (it has subcommands in [`BUILTIN`] or served ones).
    pub fn is_container(&self) -> bool {
        !self.spec.subcommands.is_empty() || !self.subcommands.is_empty()
    }

    /// A served subcommand by its name after the container's, ASCII case-insensitive.
    pub fn subcommand(&self, name: &[u8]) -> Option<&(&'static CommandSpec, H)> {
        let skip = self.spec.name.len() + 1;
        self.subcommands
            .binary_search_by(|(s, _)| cmp_lower(&s.name.as_bytes()[skip..], name))
            .ok()
            .map(|i| &self.subcommands[i])
    }
}

/// A command resolved from argv: the row to run (the subcommand's for a container with a
/// subcommand) and the host's value for it.
#[derive(Debug, Clone, Copy)]
pub struct Resolved<'t, H> {
    /// The row run (the subcommand's, for a container).
    pub spec: &'static CommandSpec,
    /// The host's value.
    pub handler: H,
    /// The top-level row (the container, for a subcommand).
    pub row: &'t Row<H>,
}

/// The commands a host serves (see the module docs). Built once at start, then read.
#[derive(Debug, Clone)]
pub struct CommandTable<H = ()> {
    /// Sorted by name.
    rows: Vec<Row<H>>,
    index: Index,
}

impl<H: Copy> Default for CommandTable<H> {
    fn default() -> Self {
        CommandTable::new()
    }
}

impl<H: Copy> CommandTable<H> {
    /// An empty table.
    pub fn new() -> Self {
        CommandTable {
            rows: Vec::new(),
            index: Index::build::<H>(&[]),
        }
    }

    /// Serves the built-in command `name` (`get`, or `config|get` for a subcommand, whose
    /// container must be served already) with `handler`.
    ///
    /// # Errors
    /// [`TableError::NotBuiltin`], [`TableError::Duplicate`], [`TableError::NoContainer`].
    pub fn serve(&mut self, name: &str, handler: H) -> Result<(), TableError> {
        let spec = builtin(name.as_bytes()).ok_or_else(|| TableError::NotBuiltin(name.into()))?;
        self.register(spec, handler)
    }

    /// Serves `spec` with `handler`: a host's own command (or subcommand: a name
    /// `container|sub` whose container is in the table), or a built-in row. Routing then knows
    /// its keys from its key specs and key function, and `COMMAND` lists it.
    ///
    /// # Errors
    /// [`TableError::BadName`], [`TableError::Duplicate`], [`TableError::NoContainer`].
    pub fn register(&mut self, spec: &'static CommandSpec, handler: H) -> Result<(), TableError> {
        let name = spec.name;
        let bad = name.is_empty()
            || name.bytes().any(|b| b.is_ascii_uppercase() || b == b' ')
            || name.matches('|').count() > 1
            || name.starts_with('|')
            || name.ends_with('|');
        if bad {
            return Err(TableError::BadName(name.into()));
        }
        if let Some((container, _)) = name.split_once('|') {
            let pos = self
                .position(container.as_bytes())
                .ok_or_else(|| TableError::NoContainer(container.into()))?;
            let subs = &mut self.rows[pos].subcommands;
            match subs.binary_search_by(|(s, _)| s.name.cmp(name)) {
                Ok(_) => return Err(TableError::Duplicate(name.into())),
                Err(at) => subs.insert(at, (spec, handler)),
            }
            self.rows[pos].relist();
            return Ok(());
        }
        match self.rows.binary_search_by(|r| r.spec.name.cmp(name)) {
            Ok(_) => Err(TableError::Duplicate(name.into())),
            Err(at) => {
                self.rows.insert(
                    at,
                    Row {
                        spec,
                        handler,
                        subcommands: Vec::new(),
                        listed: Vec::new(),
                    },
                );
                self.index = Index::build(&self.rows);
                Ok(())
            }
        }
    }

    /// Serves every subcommand of the built-in container `container` with `handler`.
    ///
    /// # Errors
    /// As [`CommandTable::register`].
    pub fn serve_all_subcommands(&mut self, container: &str, handler: H) -> Result<(), TableError> {
        let spec = builtin(container.as_bytes())
            .ok_or_else(|| TableError::NotBuiltin(container.into()))?;
        for s in spec.subcommands {
            self.register(s, handler)?;
        }
        Ok(())
    }

    /// Number of top-level commands (`COMMAND COUNT`).
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The rows, sorted by name.
    pub fn rows(&self) -> &[Row<H>] {
        &self.rows
    }

    fn position(&self, name: &[u8]) -> Option<usize> {
        match pack(name) {
            Some(key) => self.index.find(key, name.len(), &self.rows),
            None => self
                .rows
                .binary_search_by(|r| cmp_lower(r.spec.name.as_bytes(), name))
                .ok(),
        }
    }

    /// A top-level command by name, ASCII case-insensitive, without allocating.
    #[inline]
    pub fn get(&self, name: &[u8]) -> Option<&Row<H>> {
        self.position(name).map(|i| &self.rows[i])
    }

    /// A command or subcommand by full name (`config|get`), ASCII case-insensitive.
    pub fn get_full(&self, name: &[u8]) -> Option<(&'static CommandSpec, H)> {
        match name.iter().position(|&b| b == b'|') {
            None => self.get(name).map(|r| (r.spec, r.handler)),
            Some(i) => self.get(&name[..i])?.subcommand(&name[i + 1..]).copied(),
        }
    }

    /// Resolves argv to the row to run as Valkey's `processCommand` does before running
    /// anything: the command (or, for a container with at least one argument, the
    /// subcommand), then the arity.
    ///
    /// # Errors
    /// [`CommandError::UnknownCommand`], [`CommandError::UnknownSubcommand`],
    /// [`CommandError::WrongArity`]. An empty argv is an unknown command with an empty name.
    pub fn resolve<A: AsRef<[u8]>>(&self, argv: &[A]) -> Result<Resolved<'_, H>, CommandError> {
        let Some(name) = argv.first() else {
            return Err(CommandError::UnknownCommand {
                name: bytes::Bytes::new(),
                args: Vec::new(),
            });
        };
        let Some(row) = self.get(name.as_ref()) else {
            return Err(unknown(argv));
        };
        let (spec, handler) = if row.is_container() && argv.len() >= 2 {
            match row.subcommand(argv[1].as_ref()) {
                Some(&(s, h)) => (s, h),
                None => {
                    return Err(CommandError::UnknownSubcommand {
                        container: row.spec.name.to_ascii_uppercase(),
                        sub: bytes::Bytes::copy_from_slice(argv[1].as_ref()),
                    })
                }
            }
        } else {
            (row.spec, row.handler)
        };
        if !spec.arity_ok(argv.len()) {
            return Err(CommandError::WrongArity {
                fullname: spec.name,
            });
        }
        Ok(Resolved { spec, handler, row })
    }
}

fn unknown<A: AsRef<[u8]>>(argv: &[A]) -> CommandError {
    CommandError::UnknownCommand {
        name: bytes::Bytes::copy_from_slice(argv[0].as_ref()),
        args: argv[1..]
            .iter()
            .take(130)
            .map(|a| bytes::Bytes::copy_from_slice(a.as_ref()))
            .collect(),
    }
}

/// The table of every built-in command and subcommand of [`BUILTIN`].
pub fn builtin_table() -> &'static CommandTable<()> {
    static TABLE: OnceLock<CommandTable<()>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = CommandTable::new();
        for spec in BUILTIN {
            // BUILTIN names are unique, lower case and sorted (test `builtin_is_sorted`).
            let _ = t.register(spec, ());
            for s in spec.subcommands {
                let _ = t.register(s, ());
            }
        }
        t
    })
}

/// Looks a built-in command up by name (case-insensitive). `None` for an unknown command.
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    builtin_table().get(name).map(|r| r.spec)
}

/// [`CommandTable::resolve`] over [`builtin_table`].
///
/// # Errors
/// As [`CommandTable::resolve`].
pub fn resolve<A: AsRef<[u8]>>(argv: &[A]) -> Result<&'static CommandSpec, CommandError> {
    builtin_table().resolve(argv).map(|r| r.spec)
}

/// Lower-cased name packed little-endian into a `u128`; `None` when longer than 16 bytes.
/// Built in registers: writing bytes into an array and reading it back as words stalls on
/// store-to-load forwarding.
#[inline]
fn pack(name: &[u8]) -> Option<u128> {
    if name.len() > 16 || name.is_empty() {
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

#[inline]
fn slot_of(key: u128, bits: u32) -> usize {
    let folded = (key as u64) ^ ((key >> 64) as u64).rotate_left(29);
    (folded.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
}

/// Open addressing over the rows with names of at most 16 bytes.
#[derive(Debug, Clone)]
struct Index {
    /// (packed name, row + 1); 0 marks an empty slot.
    slots: Box<[(u128, u32)]>,
    bits: u32,
}

impl Index {
    fn build<H>(rows: &[Row<H>]) -> Index {
        // At most a quarter full: probes stay short.
        let bits = (rows.len() * 4).next_power_of_two().max(4).trailing_zeros();
        let mut slots = vec![(0u128, 0u32); 1 << bits].into_boxed_slice();
        let mask = slots.len() - 1;
        for (pos, row) in rows.iter().enumerate() {
            let Some(key) = pack(row.spec.name.as_bytes()) else {
                continue;
            };
            let mut i = slot_of(key, bits);
            while slots[i].1 != 0 {
                i = (i + 1) & mask;
            }
            // Far fewer rows than u32::MAX.
            slots[i] = (key, pos as u32 + 1);
        }
        Index { slots, bits }
    }

    #[inline]
    fn find<H>(&self, key: u128, len: usize, rows: &[Row<H>]) -> Option<usize> {
        let mask = self.slots.len() - 1;
        let mut i = slot_of(key, self.bits);
        loop {
            let (k, pos) = self.slots[i];
            if pos == 0 {
                return None;
            }
            let row = (pos - 1) as usize;
            // Names never hold NUL bytes, so equal packed keys and equal lengths mean equal
            // names.
            if k == key && rows[row].spec.name.len() == len {
                return Some(row);
            }
            i = (i + 1) & mask;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_is_sorted_unique_and_lower_case() {
        let check = |t: &[CommandSpec]| {
            for w in t.windows(2) {
                assert!(w[0].name < w[1].name, "{} !< {}", w[0].name, w[1].name);
            }
            for s in t {
                assert_eq!(s.name, s.name.to_ascii_lowercase());
                assert!(!s.name.contains(' '));
            }
        };
        check(BUILTIN);
        for s in BUILTIN {
            // Subcommands keep the servers' listing order; names are unique.
            let mut subs: Vec<_> = s.subcommands.to_vec();
            subs.sort_by_key(|c| c.name);
            check(&subs);
            for sub in s.subcommands {
                assert!(
                    sub.name.starts_with(&format!("{}|", s.name)),
                    "{}",
                    sub.name
                );
            }
        }
        assert!(BUILTIN.len() > 250, "{}", BUILTIN.len());
    }

    #[test]
    fn every_name_is_found_in_any_case() {
        let t = builtin_table();
        for s in BUILTIN {
            assert_eq!(lookup(s.name.to_ascii_uppercase().as_bytes()), Some(s));
            assert_eq!(t.get(s.name.as_bytes()).map(|r| r.spec), Some(s));
            // A trailing NUL packs like the name itself: the length check must refuse it.
            let mut nul = s.name.as_bytes().to_vec();
            nul.push(0);
            assert!(lookup(&nul).is_none(), "{}", s.name);
            for sub in s.subcommands {
                let short = sub.short_name().to_ascii_uppercase();
                assert_eq!(builtin(sub.name.to_ascii_uppercase().as_bytes()), Some(sub));
                let row = t.get(s.name.as_bytes()).unwrap();
                assert_eq!(row.subcommand(short.as_bytes()).map(|x| x.0), Some(sub));
            }
        }
        assert!(lookup(b"").is_none());
        assert!(lookup(b"nosuchcommand").is_none());
        assert!(lookup(b"averyveryverylongcommandname").is_none());
        assert!(lookup(b"GEORADIUSBYMEMBER_RO").is_some());
    }

    fn keys(argv: &[&str]) -> Vec<usize> {
        resolve(argv).unwrap().key_positions(argv).collect()
    }

    fn keys_any(argv: &[&str]) -> Vec<usize> {
        lookup(argv[0].as_bytes())
            .unwrap()
            .key_positions(argv)
            .collect()
    }

    #[test]
    fn key_positions_match_valkey() {
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
        assert_eq!(keys_any(&["SUNSUBSCRIBE"]), Vec::<usize>::new());
        assert_eq!(keys_any(&["GET"]), Vec::<usize>::new());
        assert_eq!(keys(&["PING"]), Vec::<usize>::new());
        // Key specs with numkeys, keywords and subcommands.
        assert_eq!(
            keys(&["ZUNIONSTORE", "d", "2", "a", "b", "WEIGHTS", "1", "2"]),
            vec![1, 3, 4]
        );
        assert_eq!(
            keys(&["SINTERCARD", "2", "a", "b", "LIMIT", "1"]),
            vec![2, 3]
        );
        assert_eq!(keys(&["BLMPOP", "0", "2", "a", "b", "LEFT"]), vec![3, 4]);
        assert_eq!(keys(&["LMOVE", "a", "b", "LEFT", "RIGHT"]), vec![1, 2]);
        assert_eq!(keys(&["SORT", "a", "BY", "w_*", "STORE", "d"]), vec![1, 5]);
        assert_eq!(
            keys(&["SORT", "a", "LIMIT", "0", "1", "GET", "store"]),
            vec![1]
        );
        assert_eq!(keys(&["SORT_RO", "a", "BY", "w_*"]), vec![1]);
        assert_eq!(
            keys(&["XREAD", "COUNT", "2", "STREAMS", "s1", "s2", "0", "0"]),
            vec![4, 5]
        );
        assert_eq!(keys(&["OBJECT", "ENCODING", "k"]), vec![2]);
        assert_eq!(keys(&["MEMORY", "USAGE", "k", "SAMPLES", "5"]), vec![2]);
        assert_eq!(keys(&["SET", "k", "v", "GET"]), vec![1]);
        assert_eq!(
            keys(&["GEORADIUS", "k", "1", "2", "3", "m", "STORE", "d"]),
            vec![1, 7]
        );
        assert_eq!(keys(&["COPY", "a", "b", "DB", "1"]), vec![1, 2]);
        // A count that is not a number makes the spec invalid; the key function reads it
        // with atoi (Valkey `genericGetKeys`).
        assert_eq!(keys(&["ZUNION", "1x", "a"]), vec![2]);
        assert_eq!(keys(&["ZUNION", "-1", "a"]), Vec::<usize>::new());
    }

    #[test]
    fn resolve_finds_subcommands_and_checks_arity() {
        let t = builtin_table();
        let r = t.resolve(&["config", "GET", "x"]).unwrap();
        assert_eq!(r.spec.name, "config|get");
        assert_eq!(r.row.spec.name, "config");
        assert!(matches!(
            t.resolve(&["CONFIG", "nosuch"]),
            Err(CommandError::UnknownSubcommand { .. })
        ));
        assert!(matches!(
            t.resolve(&["get"]),
            Err(CommandError::WrongArity { fullname: "get" })
        ));
        assert!(matches!(
            t.resolve(&["object", "encoding"]),
            Err(CommandError::WrongArity {
                fullname: "object|encoding"
            })
        ));
        // A container alone is checked against its own arity.
        assert!(matches!(
            t.resolve(&["config"]),
            Err(CommandError::WrongArity { fullname: "config" })
        ));
    }

    #[test]
    fn a_host_registers_its_own_commands() {
        static MINE: CommandSpec = CommandSpec {
            first_key: 1,
            last_key: 1,
            key_step: 1,
            key_specs: &[KeySpec {
                notes: None,
                flags: KeyFlags::RW,
                begin: BeginSearch::Index(1),
                find: FindKeys::Range {
                    lastkey: 0,
                    keystep: 1,
                    limit: 0,
                },
            }],
            ..CommandSpec::new(
                "mycmd",
                -2,
                CommandFlags::WRITE,
                CommandDoc::new("Mine.", "1.0.0", "generic"),
            )
        };
        static MINE_SUB: CommandSpec = CommandSpec::new(
            "mycmd|help",
            2,
            CommandFlags::NONE,
            CommandDoc::new("Help.", "1.0.0", "generic"),
        );
        let mut t = CommandTable::<u8>::new();
        t.serve("get", 1).unwrap();
        t.register(&MINE, 2).unwrap();
        t.register(&MINE_SUB, 3).unwrap();
        assert_eq!(
            t.register(&MINE, 2),
            Err(TableError::Duplicate("mycmd".into()))
        );
        assert_eq!(
            t.serve("nosuch", 0),
            Err(TableError::NotBuiltin("nosuch".into()))
        );
        assert_eq!(
            t.serve("config|get", 0),
            Err(TableError::NoContainer("config".into()))
        );
        let r = t.resolve(&["MYCMD", "help"]).unwrap();
        assert_eq!((r.spec.name, r.handler), ("mycmd|help", 3));
        assert_eq!(t.len(), 2);
        assert!(t.resolve(&["set", "a", "b"]).is_err());
        assert_eq!(
            MINE.key_positions(&["mycmd", "k", "x"]).collect::<Vec<_>>(),
            vec![1]
        );
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

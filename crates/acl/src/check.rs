//! The permission check (Valkey `ACLCheckAllUserCommandPerm`, `ACLSelectorCheckCmd`).

use crate::rules::{spec_id, Databases, Selector, User};
use ferrocluster_command::{CommandFlags, CommandSpec, KeyFlags};
use ferrocluster_kvstore::glob_match;

/// What a denial is about; the order is Valkey's preference when no selector allows the
/// command (`ACL_DENIED_CMD` < `ACL_DENIED_KEY` < `ACL_DENIED_CHANNEL`; Valkey 9's
/// database denial last).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DeniedReason {
    /// The command (`reason` `command` in ACL LOG).
    Command,
    /// A key (`key`).
    Key,
    /// A channel (`channel`).
    Channel,
    /// A database (`database`, Valkey 9).
    Database,
}

impl DeniedReason {
    /// The `reason` field of an ACL LOG entry.
    pub fn log_name(self) -> &'static str {
        match self {
            DeniedReason::Command => "command",
            DeniedReason::Key => "key",
            DeniedReason::Channel => "channel",
            DeniedReason::Database => "database",
        }
    }
}

/// A refused command: why, and the argv position of the key / channel / database
/// argument (`None` for the command itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Denied {
    /// Why.
    pub reason: DeniedReason,
    /// The argument at fault.
    pub arg: Option<usize>,
}

impl Denied {
    /// The error text after `-NOPERM ` (Valkey `getAclErrorMessage`; `verbose` is ACL
    /// DRYRUN's form naming the key or channel). `object` is the argument at fault,
    /// `command` the full name (`client|list`).
    pub fn message(&self, user: &[u8], command: &str, object: &[u8], verbose: bool) -> String {
        let user = String::from_utf8_lossy(user);
        let object = String::from_utf8_lossy(object);
        match self.reason {
            DeniedReason::Command => {
                format!("User {user} has no permissions to run the '{command}' command")
            }
            DeniedReason::Key if verbose => {
                format!("User {user} has no permissions to access the '{object}' key")
            }
            DeniedReason::Key => "No permissions to access a key".into(),
            DeniedReason::Channel if verbose => {
                format!("User {user} has no permissions to access the '{object}' channel")
            }
            DeniedReason::Channel => "No permissions to access a channel".into(),
            DeniedReason::Database if verbose => {
                format!("User {user} has no permissions to access database {object}")
            }
            DeniedReason::Database => "No permissions to access database".into(),
        }
    }

    /// The ACL LOG `object`: the command's full name, else the argument at fault.
    pub fn log_object<'a>(&self, command: &'a str, argv: &'a [&'a [u8]]) -> &'a [u8] {
        match self.arg.and_then(|i| argv.get(i)) {
            Some(a) => a,
            None => command.as_bytes(),
        }
    }
}

/// How a command publishes or subscribes (Valkey `getChannelsFromCommand` for the commands
/// whose channels ACL checks: PUBLISH/SPUBLISH's first argument, SUBSCRIBE/SSUBSCRIBE's
/// and PSUBSCRIBE's (patterns, matched literally) every argument).
fn channels(spec: &CommandSpec, argc: usize) -> Option<(std::ops::Range<usize>, bool)> {
    match spec.name {
        "publish" | "spublish" => Some((1..argc.min(2), false)),
        "subscribe" | "ssubscribe" => Some((1..argc, false)),
        "psubscribe" => Some((1..argc, true)),
        _ => None,
    }
}

fn db_arg(argv: &[&[u8]], i: usize) -> Option<u64> {
    std::str::from_utf8(argv.get(i)?).ok()?.parse().ok()
}

impl Selector {
    fn db_allowed(&self, db: u64) -> bool {
        match self.databases() {
            Databases::All => true,
            Databases::Some(s) => s.contains(&db),
        }
    }

    /// The databases a command names besides the current one, as argv positions
    /// (Valkey 9.1 as measured: SELECT's, MOVE's, SWAPDB's, COPY's `DB` argument;
    /// FLUSHALL needs every database).
    fn check_dbs(&self, spec: &CommandSpec, argv: &[&[u8]], db: u64) -> Result<(), Denied> {
        if matches!(self.databases(), Databases::All) {
            return Ok(());
        }
        let deny = |arg| {
            Err(Denied {
                reason: DeniedReason::Database,
                arg,
            })
        };
        let named: Vec<usize> = match spec.name {
            "select" => vec![1],
            "move" => vec![2],
            "swapdb" => vec![1, 2],
            "copy" => (3..argv.len())
                .filter(|&i| argv[i - 1].eq_ignore_ascii_case(b"db"))
                .collect(),
            "flushall" => return deny(None),
            _ => Vec::new(),
        };
        for i in named {
            if db_arg(argv, i).is_some_and(|d| !self.db_allowed(d)) {
                return deny(Some(i));
            }
        }
        if spec.name != "select" && spec.name != "swapdb" && spec.has_keys() && !self.db_allowed(db)
        {
            return deny(None);
        }
        Ok(())
    }

    fn check(
        &self,
        spec: &CommandSpec,
        id: Option<usize>,
        argv: &[&[u8]],
        db: u64,
    ) -> Result<(), Denied> {
        let cmd_denied = Denied {
            reason: DeniedReason::Command,
            arg: None,
        };
        if !spec.flags.contains(CommandFlags::NO_AUTH) {
            // A host's own command (not in the built-in table) has no bit: `+@all` covers it,
            // as Valkey's `+@all` covers commands added later (modules).
            let Some(id) = id else {
                return if self.future() {
                    Ok(())
                } else {
                    Err(cmd_denied)
                };
            };
            if !self.bit(id) {
                let idx = if spec.name.contains('|') { 2 } else { 1 };
                let first = argv.get(idx).ok_or(cmd_denied)?;
                let ok = self
                    .firstargs(id)
                    .is_some_and(|l| l.iter().any(|a| a.as_bytes().eq_ignore_ascii_case(first)));
                if !ok {
                    return Err(cmd_denied);
                }
            }
        }
        self.check_dbs(spec, argv, db)?;
        if !self.allkeys() && spec.has_keys() {
            for (pos, flags) in spec.keys_with_flags(argv) {
                let need_read = flags.contains(KeyFlags::ACCESS);
                let need_write =
                    flags.intersects(KeyFlags::INSERT | KeyFlags::DELETE | KeyFlags::UPDATE);
                let key = argv.get(pos).copied().unwrap_or_default();
                let ok = self.patterns().iter().any(|p| {
                    (!need_read || p.read)
                        && (!need_write || p.write)
                        && glob_match(&p.pattern, key)
                });
                if !ok {
                    return Err(Denied {
                        reason: DeniedReason::Key,
                        arg: Some(pos),
                    });
                }
            }
        }
        if !self.allchannels() {
            if let Some((range, is_pattern)) = channels(spec, argv.len()) {
                for pos in range {
                    let ch = argv[pos];
                    let ok = self.channels().iter().any(|p| {
                        if is_pattern {
                            p.as_slice() == ch
                        } else {
                            glob_match(p, ch)
                        }
                    });
                    if !ok {
                        return Err(Denied {
                            reason: DeniedReason::Channel,
                            arg: Some(pos),
                        });
                    }
                }
            }
        }
        Ok(())
    }
}

impl User {
    /// Whether the root selector allows `spec` whatever its arguments: the command's bit is
    /// set and every key, channel and database is allowed (the default user's case). A fast
    /// path before [`User::check`], which gives the same answer then.
    pub fn allows_any_args(&self, spec: &CommandSpec) -> bool {
        let root = &self.selectors()[0];
        root.allkeys()
            && root.allchannels()
            && matches!(root.databases(), Databases::All)
            && spec_id(spec).is_some_and(|id| root.bit(id))
    }

    /// Whether this user may run `argv` (resolved to `spec`, a subcommand's own row for a
    /// container) in database `db` (Valkey `ACLCheckAllUserCommandPerm`: allowed when any
    /// selector allows it; else the highest [`DeniedReason`], and among equal ones the
    /// last argument position).
    ///
    /// # Errors
    /// [`Denied`].
    pub fn check(&self, spec: &CommandSpec, argv: &[&[u8]], db: u64) -> Result<(), Denied> {
        let id = spec_id(spec);
        let mut worst: Option<Denied> = None;
        for s in self.selectors() {
            match s.check(spec, id, argv, db) {
                Ok(()) => return Ok(()),
                Err(d) => {
                    let better = match worst {
                        None => true,
                        Some(w) => {
                            d.reason > w.reason
                                || (d.reason == w.reason && d.arg.unwrap_or(0) > w.arg.unwrap_or(0))
                        }
                    };
                    if better {
                        worst = Some(d);
                    }
                }
            }
        }
        Err(worst.unwrap_or(Denied {
            reason: DeniedReason::Command,
            arg: None,
        }))
    }

    /// Whether this user may use `channel` (a pattern when `is_pattern`) with any selector
    /// (Valkey `ACLUserCheckChannelPerm`).
    pub fn channel_allowed(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.selectors().iter().any(|s| {
            s.allchannels()
                || s.channels().iter().any(|p| {
                    if is_pattern {
                        p.as_slice() == channel
                    } else {
                        glob_match(p, channel)
                    }
                })
        })
    }
}

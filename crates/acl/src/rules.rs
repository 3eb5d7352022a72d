//! Users, selectors and their rules (Valkey `acl.c`: `ACLSetUser`, `ACLSetSelector`,
//! `ACLDescribeUser`, `ACLStringSetUser`).

use crate::registry::{category, lookup_command, registry};
use ferrocluster_command::CommandSpec;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};

/// SHA-256 of a password as 64 lowercase hex digits (Valkey `ACLHashPassword`).
pub fn hash_password(pass: &[u8]) -> String {
    let digest = Sha256::digest(pass);
    let mut s = String::with_capacity(64);
    for b in digest {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Why one rule was refused (Valkey `ACLSetUserStringError`; the texts are Valkey's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// Not a rule, or a pattern with a space (`EINVAL`).
    #[error("Syntax error")]
    Syntax,
    /// `+cmd` / `-cmd` / `+@cat` naming nothing known (`ENOENT`).
    #[error("Unknown command or category name in ACL")]
    UnknownCommand,
    /// A key pattern after `allkeys` (`EEXIST`).
    #[error("Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns")]
    PatternAfterAllKeys,
    /// A channel pattern after `allchannels` (`EISDIR`).
    #[error("Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels")]
    PatternAfterAllChannels,
    /// `<pass` / `!hash` of a password the user does not have (`ENODEV`).
    #[error("The password you are trying to remove from the user does not exist")]
    NoSuchPassword,
    /// `#hash` / `!hash` not 64 lowercase hex digits (`EBADMSG`).
    #[error("The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters")]
    BadHash,
    /// `+container|sub|arg` (`ECHILD`).
    #[error("Allowing first-arg of a subcommand is not supported")]
    FirstArgOfSubcommand,
}

/// Why `ACL SETUSER` (or a `user` line) was refused; the `Display` text is the error reply
/// without `ERR ` (Valkey `ACLStringSetUser`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetUserError {
    /// A rule failed; nothing was changed.
    #[error("Error in ACL SETUSER modifier '{op}': {error}")]
    Rule {
        /// The rule as given (a selector merged with spaces).
        op: String,
        /// Why.
        error: RuleError,
    },
    /// An argument opened a selector `(` that no later argument closed.
    #[error("Unmatched parenthesis in acl selector starting at '{0}'.")]
    Unmatched(String),
    /// The user name holds a space or NUL (ACL SETUSER's own check).
    #[error("Usernames can't contain spaces or null characters")]
    BadName,
}

/// One key pattern with its permissions (`~p`: both, `%R~p`, `%W~p`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPattern {
    /// The glob (Valkey `stringmatchlen` rules).
    pub pattern: Vec<u8>,
    /// Reads allowed.
    pub read: bool,
    /// Writes allowed.
    pub write: bool,
}

/// Valkey 9 database permissions of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Databases {
    /// `alldbs` (the default).
    All,
    /// `db=0,3` (sorted), or `resetdbs` (empty).
    Some(BTreeSet<u64>),
}

/// One selector: the root one of a user or a `( ... )` one (Valkey `aclSelector`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    allowed: Vec<u64>,
    /// `+@all` was the last all-rule (Valkey's reserved "future commands" bit).
    future: bool,
    /// The retained command rules (`+get -@write`), Valkey `command_rules`.
    rules: String,
    /// Allowed first arguments of otherwise denied commands, by command id.
    firstargs: BTreeMap<usize, Vec<String>>,
    allkeys: bool,
    patterns: Vec<KeyPattern>,
    allchannels: bool,
    channels: Vec<Vec<u8>>,
    dbs: Databases,
}

/// A selector as `ACL GETUSER` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectorInfo {
    /// `commands`: `+@all -flushall`.
    pub commands: String,
    /// `keys`: `~app:* %R~r:*` (`~*` for allkeys).
    pub keys: String,
    /// `channels`: `&*` or `&a &b` (empty when none).
    pub channels: String,
    /// `databases`: `alldbs`, `db=0,3`, or empty.
    pub databases: String,
}

/// `ACL GETUSER`'s reply (Valkey 9.1 `aclCommand` getuser): flags, password hashes, the
/// root selector and the other selectors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetUser {
    /// `on`/`off`, then `nopass` when set.
    pub flags: Vec<&'static str>,
    /// SHA-256 hex of each password.
    pub passwords: Vec<String>,
    /// The root selector.
    pub root: SelectorInfo,
    /// The `( ... )` selectors.
    pub selectors: Vec<SelectorInfo>,
}

/// Valkey `ACLStringHasSpaces`: C `isspace` or NUL.
fn has_space(s: &[u8]) -> bool {
    s.iter()
        .any(|&b| matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r' | 0))
}

fn is_hash(h: &[u8]) -> bool {
    h.len() == 64
        && h.iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
}

impl Selector {
    /// An empty selector: no commands, keys, channels; all databases (Valkey
    /// `ACLCreateSelector`).
    pub fn new() -> Selector {
        Selector {
            allowed: vec![0; registry().len().div_ceil(64)],
            future: false,
            rules: String::new(),
            firstargs: BTreeMap::new(),
            allkeys: false,
            patterns: Vec::new(),
            allchannels: false,
            channels: Vec::new(),
            dbs: Databases::All,
        }
    }

    pub(crate) fn bit(&self, id: usize) -> bool {
        self.allowed[id / 64] & (1 << (id % 64)) != 0
    }

    fn set_bit(&mut self, id: usize, on: bool) {
        if on {
            self.allowed[id / 64] |= 1 << (id % 64);
        } else {
            self.allowed[id / 64] &= !(1 << (id % 64));
        }
    }

    pub(crate) fn future(&self) -> bool {
        self.future
    }

    pub(crate) fn firstargs(&self, id: usize) -> Option<&[String]> {
        self.firstargs.get(&id).map(Vec::as_slice)
    }

    pub(crate) fn allkeys(&self) -> bool {
        self.allkeys
    }

    pub(crate) fn patterns(&self) -> &[KeyPattern] {
        &self.patterns
    }

    pub(crate) fn allchannels(&self) -> bool {
        self.allchannels
    }

    pub(crate) fn channels(&self) -> &[Vec<u8>] {
        &self.channels
    }

    /// The database permissions.
    pub fn databases(&self) -> &Databases {
        &self.dbs
    }

    /// Valkey `ACLChangeSelectorPerm`: a command and its subcommands.
    fn change_perm(&mut self, id: usize, allow: bool) {
        self.set_bit(id, allow);
        self.firstargs.remove(&id);
        for &sub in &registry().children[id] {
            self.set_bit(sub, allow);
        }
    }

    /// Valkey `ACLSelectorRemoveCommandRule` + `ACLUpdateCommandRules`.
    fn update_rules(&mut self, rule: &str, allow: bool) {
        let rule = rule.to_ascii_lowercase();
        let kept: Vec<&str> = self
            .rules
            .split(' ')
            .filter(|r| !r.is_empty())
            .filter(|r| {
                let body = &r[1..];
                !(body == rule
                    || (body.len() > rule.len()
                        && body.starts_with(rule.as_str())
                        && body.as_bytes()[rule.len()] == b'|'))
            })
            .collect();
        let mut s = kept.join(" ");
        if !s.is_empty() {
            s.push(' ');
        }
        s.push(if allow { '+' } else { '-' });
        s.push_str(&rule);
        self.rules = s;
    }

    fn set_all(&mut self, allow: bool) {
        let fill = if allow { u64::MAX } else { 0 };
        self.allowed.iter_mut().for_each(|w| *w = fill);
        self.future = allow;
        self.rules.clear();
        self.firstargs.clear();
    }

    /// Applies one selector rule (Valkey `ACLSetSelector`).
    ///
    /// # Errors
    /// [`RuleError`] as Valkey sets `errno`.
    pub fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let is = |w: &str| op.eq_ignore_ascii_case(w.as_bytes());
        if is("allkeys") || op == b"~*" {
            self.allkeys = true;
            self.patterns.clear();
        } else if is("resetkeys") {
            self.allkeys = false;
            self.patterns.clear();
        } else if is("allchannels") || op == b"&*" {
            self.allchannels = true;
            self.channels.clear();
        } else if is("resetchannels") {
            self.allchannels = false;
            self.channels.clear();
        } else if is("allcommands") || is("+@all") {
            self.set_all(true);
        } else if is("nocommands") || is("-@all") {
            self.set_all(false);
        } else if is("alldbs") {
            self.dbs = Databases::All;
        } else if is("resetdbs") {
            self.dbs = Databases::Some(BTreeSet::new());
        } else if op.len() > 3 && op[..3].eq_ignore_ascii_case(b"db=") {
            let mut set = BTreeSet::new();
            for part in op[3..].split(|&b| b == b',') {
                let n = std::str::from_utf8(part)
                    .ok()
                    .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|s| s.parse::<u64>().ok())
                    .ok_or(RuleError::Syntax)?;
                set.insert(n);
            }
            self.dbs = Databases::Some(set);
        } else if op.first() == Some(&b'~') || op.first() == Some(&b'%') {
            if self.allkeys {
                return Err(RuleError::PatternAfterAllKeys);
            }
            let (read, write, offset) = if op[0] == b'%' {
                let (mut r, mut w, mut i) = (false, false, 1);
                loop {
                    match op.get(i) {
                        Some(b'R' | b'r') if !r => r = true,
                        Some(b'W' | b'w') if !w => w = true,
                        Some(b'~') if r || w => {
                            i += 1;
                            break;
                        }
                        _ => return Err(RuleError::Syntax),
                    }
                    i += 1;
                }
                (r, w, i)
            } else {
                (true, true, 1)
            };
            let pattern = &op[offset..];
            if has_space(pattern) {
                return Err(RuleError::Syntax);
            }
            match self.patterns.iter_mut().find(|p| p.pattern == pattern) {
                Some(p) => {
                    p.read |= read;
                    p.write |= write;
                }
                None => self.patterns.push(KeyPattern {
                    pattern: pattern.to_vec(),
                    read,
                    write,
                }),
            }
        } else if op.first() == Some(&b'&') {
            if self.allchannels {
                return Err(RuleError::PatternAfterAllChannels);
            }
            let pattern = &op[1..];
            if has_space(pattern) {
                return Err(RuleError::Syntax);
            }
            if !self.channels.iter().any(|c| c == pattern) {
                self.channels.push(pattern.to_vec());
            }
        } else if op.len() >= 2 && (op[0] == b'+' || op[0] == b'-') && op[1] == b'@' {
            let allow = op[0] == b'+';
            let cat = category(&op[2..]).ok_or(RuleError::UnknownCommand)?;
            let name = std::str::from_utf8(&op[1..]).map_err(|_| RuleError::UnknownCommand)?;
            self.update_rules(name, allow);
            let r = registry();
            for (id, spec) in r.specs.iter().enumerate() {
                if spec.acl.intersects(cat) {
                    self.change_perm(id, allow);
                }
            }
        } else if op.first() == Some(&b'+') {
            self.allow_command(&op[1..])?;
        } else if op.first() == Some(&b'-') {
            let spec = lookup_command(&op[1..]).ok_or(RuleError::UnknownCommand)?;
            let id = registry().id(spec).ok_or(RuleError::UnknownCommand)?;
            self.change_perm(id, false);
            self.update_rules(spec.name, false);
        } else {
            return Err(RuleError::Syntax);
        }
        Ok(())
    }

    /// `+name`, `+container|sub`, `+cmd|firstarg`.
    fn allow_command(&mut self, name: &[u8]) -> Result<(), RuleError> {
        let r = registry();
        let Some(bar) = name.iter().rposition(|&b| b == b'|') else {
            let spec = lookup_command(name).ok_or(RuleError::UnknownCommand)?;
            let id = r.id(spec).ok_or(RuleError::UnknownCommand)?;
            self.change_perm(id, true);
            self.update_rules(spec.name, true);
            return Ok(());
        };
        let (head, sub) = (&name[..bar], &name[bar + 1..]);
        let cmd = lookup_command(head).ok_or(RuleError::UnknownCommand)?;
        if cmd.name.contains('|') {
            return Err(RuleError::FirstArgOfSubcommand);
        }
        // A space in a first argument is refused: Valkey 9.1.2 takes `+select|a b` and then
        // aborts on ACL LIST (its rule string no longer splits back); we answer Syntax error.
        if sub.is_empty() || has_space(sub) {
            return Err(RuleError::Syntax);
        }
        let text = std::str::from_utf8(name).map_err(|_| RuleError::Syntax)?;
        if !cmd.subcommands.is_empty() {
            let spec = lookup_command(name).ok_or(RuleError::UnknownCommand)?;
            let id = r.id(spec).ok_or(RuleError::UnknownCommand)?;
            self.change_perm(id, true);
        } else {
            let id = r.id(cmd).ok_or(RuleError::UnknownCommand)?;
            let sub = std::str::from_utf8(sub).map_err(|_| RuleError::Syntax)?;
            let list = self.firstargs.entry(id).or_default();
            if !list.iter().any(|a| a.eq_ignore_ascii_case(sub)) {
                list.push(sub.to_owned());
            }
        }
        self.update_rules(text, true);
        Ok(())
    }

    /// The command rules as `ACL GETUSER` / `ACL LIST` print them (Valkey
    /// `ACLDescribeSelectorCommandRules`): `+@all` or `-@all`, then the retained rules.
    pub fn command_rules(&self) -> String {
        let mut s = String::from(if self.future { "+@all" } else { "-@all" });
        if !self.rules.is_empty() {
            s.push(' ');
            s.push_str(&self.rules);
        }
        s
    }

    fn key_text(p: &KeyPattern) -> String {
        let prefix = match (p.read, p.write) {
            (true, false) => "%R~",
            (false, true) => "%W~",
            _ => "~",
        };
        format!("{prefix}{}", String::from_utf8_lossy(&p.pattern))
    }

    fn dbs_text(&self) -> Option<String> {
        match &self.dbs {
            Databases::All => None,
            Databases::Some(s) if s.is_empty() => Some("resetdbs".into()),
            Databases::Some(s) => Some(format!(
                "db={}",
                s.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
            )),
        }
    }

    /// The selector in `ACL LIST` form (Valkey `ACLDescribeSelector`, Valkey 9.1's database
    /// part after the channels): `~app:* resetchannels &c db=0 -@all +get`.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if self.allkeys {
            parts.push("~*".into());
        } else {
            parts.extend(self.patterns.iter().map(Self::key_text));
        }
        if self.allchannels {
            parts.push("&*".into());
        } else {
            parts.push("resetchannels".into());
            parts.extend(
                self.channels
                    .iter()
                    .map(|c| format!("&{}", String::from_utf8_lossy(c))),
            );
        }
        parts.extend(self.dbs_text());
        parts.push(self.command_rules());
        parts.join(" ")
    }

    /// The selector as `ACL GETUSER` shows it.
    pub fn info(&self) -> SelectorInfo {
        let keys = if self.allkeys {
            "~*".to_owned()
        } else {
            self.patterns
                .iter()
                .map(Self::key_text)
                .collect::<Vec<_>>()
                .join(" ")
        };
        let channels = if self.allchannels {
            "&*".to_owned()
        } else {
            self.channels
                .iter()
                .map(|c| format!("&{}", String::from_utf8_lossy(c)))
                .collect::<Vec<_>>()
                .join(" ")
        };
        SelectorInfo {
            commands: self.command_rules(),
            keys,
            channels,
            databases: match &self.dbs {
                Databases::All => "alldbs".into(),
                _ => self
                    .dbs_text()
                    .filter(|t| t != "resetdbs")
                    .unwrap_or_default(),
            },
        }
    }
}

impl Default for Selector {
    fn default() -> Self {
        Selector::new()
    }
}

/// One user (Valkey `user`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    name: Vec<u8>,
    enabled: bool,
    nopass: bool,
    skip_sanitize: bool,
    passwords: Vec<String>,
    /// `selectors[0]` is the root selector.
    selectors: Vec<Selector>,
}

impl User {
    /// A new user: off, no passwords, no permissions, no channels (Valkey `ACLCreateUser`
    /// with `acl-pubsub-default resetchannels`).
    pub fn new(name: &[u8]) -> User {
        User {
            name: name.to_vec(),
            enabled: false,
            nopass: false,
            skip_sanitize: false,
            passwords: Vec::new(),
            selectors: vec![Selector::new()],
        }
    }

    /// The `default` user of a fresh server: `on nopass ~* &* +@all` (Valkey
    /// `ACLCreateDefaultUser`).
    pub fn default_user() -> User {
        let mut u = User::new(b"default");
        for op in ["+@all", "~*", "&*", "on", "nopass"] {
            // The five rules are valid by construction.
            let _ = u.apply(op.as_bytes());
        }
        u
    }

    /// The name.
    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// `on`.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// `nopass`.
    pub fn nopass(&self) -> bool {
        self.nopass
    }

    /// `skip-sanitize-payload`.
    pub fn skip_sanitize_payload(&self) -> bool {
        self.skip_sanitize
    }

    /// The password hashes.
    pub fn passwords(&self) -> &[String] {
        &self.passwords
    }

    /// The selectors, root first.
    pub fn selectors(&self) -> &[Selector] {
        &self.selectors
    }

    /// Whether `pass` logs this user in (Valkey `ACLCheckUserCredentials`): on, and
    /// `nopass` or a matching hash.
    pub fn password_ok(&self, pass: &[u8]) -> bool {
        if !self.enabled {
            return false;
        }
        if self.nopass {
            return true;
        }
        let h = hash_password(pass);
        // Compare every byte of every hash (Valkey's time_independent_strcmp).
        self.passwords.iter().fold(false, |ok, p| {
            let eq = p
                .bytes()
                .zip(h.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0;
            ok | eq
        })
    }

    /// Applies one rule (Valkey `ACLSetUser`); a `( ... )` rule adds a selector.
    ///
    /// # Errors
    /// [`RuleError`].
    pub fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let is = |w: &str| op.eq_ignore_ascii_case(w.as_bytes());
        if op.is_empty() {
            return Ok(());
        }
        if is("on") {
            self.enabled = true;
        } else if is("off") {
            self.enabled = false;
        } else if is("skip-sanitize-payload") {
            self.skip_sanitize = true;
        } else if is("sanitize-payload") {
            self.skip_sanitize = false;
        } else if is("nopass") {
            self.nopass = true;
            self.passwords.clear();
        } else if is("resetpass") {
            self.nopass = false;
            self.passwords.clear();
        } else if op[0] == b'>' || op[0] == b'#' {
            let h = if op[0] == b'>' {
                hash_password(&op[1..])
            } else if is_hash(&op[1..]) {
                String::from_utf8_lossy(&op[1..]).into_owned()
            } else {
                return Err(RuleError::BadHash);
            };
            if !self.passwords.contains(&h) {
                self.passwords.push(h);
            }
            self.nopass = false;
        } else if op[0] == b'<' || op[0] == b'!' {
            let h = if op[0] == b'<' {
                hash_password(&op[1..])
            } else if is_hash(&op[1..]) {
                String::from_utf8_lossy(&op[1..]).into_owned()
            } else {
                return Err(RuleError::BadHash);
            };
            let i = self
                .passwords
                .iter()
                .position(|p| *p == h)
                .ok_or(RuleError::NoSuchPassword)?;
            self.passwords.remove(i);
        } else if op[0] == b'(' && op[op.len() - 1] == b')' {
            let inner = &op[1..op.len() - 1];
            let mut s = Selector::new();
            let parts = inner.split(|&b| has_space(&[b]) && b != 0);
            for part in parts.filter(|p| !p.is_empty()) {
                // A rule ending with `)` inside a selector would end it early when the user's
                // line is read back (`ACLMergeSelectorArguments` closes a selector at the first
                // argument ending with `)`): valkey 9.1.2 takes `(~a) -@all)` and writes an
                // aclfile it then refuses to load. Refused here (found by the acl_rules fuzz
                // target).
                if part.last() == Some(&b')') {
                    return Err(RuleError::Syntax);
                }
                s.apply(part)?;
            }
            self.selectors.push(s);
        } else if is("clearselectors") {
            self.selectors.truncate(1);
        } else if is("reset") {
            for r in [
                "resetpass",
                "resetkeys",
                "resetchannels",
                "off",
                "sanitize-payload",
            ] {
                self.apply(r.as_bytes())?;
            }
            self.selectors.truncate(1);
            self.selectors[0].apply(b"-@all")?;
        } else {
            self.selectors[0].apply(op)?;
        }
        Ok(())
    }

    /// Applies `ACL SETUSER`'s rules all or nothing (Valkey `ACLStringSetUser`: selector
    /// arguments merged first, then each rule on a copy).
    ///
    /// # Errors
    /// [`SetUserError`]; the user is unchanged then.
    pub fn apply_all<A: AsRef<[u8]>>(&mut self, ops: &[A]) -> Result<(), SetUserError> {
        let merged = merge_selectors(ops)?;
        let mut copy = self.clone();
        for op in &merged {
            copy.apply(op).map_err(|error| SetUserError::Rule {
                op: String::from_utf8_lossy(op).into_owned(),
                error,
            })?;
        }
        *self = copy;
        Ok(())
    }

    /// The `ACL LIST` line (Valkey `ACLDescribeUser`, Valkey 9.1 prints no
    /// `sanitize-payload`): `user alice on #<hash> ~app:* resetchannels -@all +get`.
    pub fn describe(&self) -> String {
        let mut s = format!("user {}", String::from_utf8_lossy(&self.name));
        s.push_str(if self.enabled { " on" } else { " off" });
        if self.nopass {
            s.push_str(" nopass");
        }
        for p in &self.passwords {
            s.push_str(" #");
            s.push_str(p);
        }
        s.push(' ');
        s.push_str(&self.selectors[0].describe());
        for sel in &self.selectors[1..] {
            s.push_str(" (");
            s.push_str(&sel.describe());
            s.push(')');
        }
        s
    }

    /// `ACL GETUSER` (Valkey 9.1).
    pub fn get_user(&self) -> GetUser {
        let mut flags = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            flags.push("nopass");
        }
        GetUser {
            flags,
            passwords: self.passwords.clone(),
            root: self.selectors[0].info(),
            selectors: self.selectors[1..].iter().map(Selector::info).collect(),
        }
    }
}

/// Valkey `ACLMergeSelectorArguments`: an argument starting with `(` and not ending with
/// `)` is joined with spaces to the following ones up to one ending with `)`.
pub(crate) fn merge_selectors<A: AsRef<[u8]>>(ops: &[A]) -> Result<Vec<Vec<u8>>, SetUserError> {
    let mut out = Vec::new();
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (i, op) in ops.iter().enumerate() {
        let op = op.as_ref();
        if let Some((_, sel)) = open.as_mut() {
            sel.push(b' ');
            sel.extend_from_slice(op);
            if op.last() == Some(&b')') {
                if let Some((_, sel)) = open.take() {
                    out.push(sel);
                }
            }
            continue;
        }
        if op.first() == Some(&b'(') && op.last() != Some(&b')') {
            open = Some((i, op.to_vec()));
            continue;
        }
        if op.first() == Some(&b'(') && op.len() == 1 {
            open = Some((i, op.to_vec()));
            continue;
        }
        out.push(op.to_vec());
    }
    if let Some((i, _)) = open {
        return Err(SetUserError::Unmatched(
            String::from_utf8_lossy(ops[i].as_ref()).into_owned(),
        ));
    }
    Ok(out)
}

/// The user set (Valkey's `Users` radix tree): always holds `default`; sorted by name
/// (the order of `ACL LIST` / `ACL USERS`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Users {
    users: BTreeMap<Vec<u8>, User>,
}

impl Default for Users {
    fn default() -> Self {
        Users::new()
    }
}

impl Users {
    /// Only the default user, `on nopass ~* &* +@all`.
    pub fn new() -> Users {
        let mut users = BTreeMap::new();
        users.insert(b"default".to_vec(), User::default_user());
        Users { users }
    }

    /// A user by name.
    pub fn get(&self, name: &[u8]) -> Option<&User> {
        self.users.get(name)
    }

    /// The users, by name.
    pub fn iter(&self) -> impl Iterator<Item = &User> {
        self.users.values()
    }

    /// `ACL SETUSER name rules...`: creates the user when missing; all or nothing.
    ///
    /// # Errors
    /// [`SetUserError`].
    pub fn set_user<A: AsRef<[u8]>>(&mut self, name: &[u8], ops: &[A]) -> Result<(), SetUserError> {
        if has_space(name) {
            return Err(SetUserError::BadName);
        }
        let mut u = self
            .users
            .get(name)
            .cloned()
            .unwrap_or_else(|| User::new(name));
        u.apply_all(ops)?;
        self.users.insert(name.to_vec(), u);
        Ok(())
    }

    /// Removes a user; `false` when there was none. The caller refuses `default`.
    pub fn remove(&mut self, name: &[u8]) -> bool {
        self.users.remove(name).is_some()
    }

    /// The user that `name` / `pass` log in as (Valkey `ACLCheckUserCredentials`).
    pub fn authenticate(&self, name: &[u8], pass: &[u8]) -> Option<&User> {
        self.users.get(name).filter(|u| u.password_ok(pass))
    }

    /// `requirepass` (Valkey `ACLUpdateDefaultUserPassword`): `resetpass` then `>pass`,
    /// or `nopass` for an empty one.
    pub fn set_default_password(&mut self, pass: Option<&[u8]>) {
        if let Some(u) = self.users.get_mut(b"default".as_slice()) {
            let _ = u.apply(b"resetpass");
            match pass {
                Some(p) if !p.is_empty() => {
                    let mut op = b">".to_vec();
                    op.extend_from_slice(p);
                    let _ = u.apply(&op);
                }
                _ => {
                    let _ = u.apply(b"nopass");
                }
            }
        }
    }

    pub(crate) fn from_map(users: BTreeMap<Vec<u8>, User>) -> Users {
        Users { users }
    }

    /// `ACL SAVE`'s text: one `ACL LIST` line per user, each ending in `\n`.
    pub fn to_file(&self) -> String {
        let mut s = String::new();
        for u in self.users.values() {
            s.push_str(&u.describe());
            s.push('\n');
        }
        s
    }
}

/// The spec for a command id (for the checker).
pub(crate) fn spec_id(spec: &CommandSpec) -> Option<usize> {
    registry().id(spec)
}

//! ACL users on the server: the `ferrocluster-acl` crate's users and log kept in [`State`],
//! AUTH / HELLO AUTH, the permission check every command passes (before cluster routing:
//! Valkey and Redis 7.0 answer `-NOPERM` before `-MOVED`), and the ACL command.
//!
//! * The default user keeps `requirepass`'s meaning ([`AclState::set_requirepass`], also
//!   from CONFIG SET); `user` config lines or an `aclfile` (not both, as Valkey) give the
//!   users at start; ACL SAVE / ACL LOAD write and read the aclfile.
//! * A client authenticated as a user that ACL DELUSER or ACL LOAD removed is closed at once
//!   (`crate::clients::close_user`, on its I/O thread), as Valkey does; one whose request was
//!   already under way is closed at its next command, without a reply.
//! * ACL SETUSER closes the user's Pub/Sub clients holding a subscription the new rules no
//!   longer allow (Valkey `ACLKillPubsubClientsIfNeeded`).
//! * INFO stats `acl_access_denied_auth`, `_cmd`, `_key`, `_channel`, `_db`; `acllog-max-len`.

use crate::client::{Args, ClientCtx, Flow};
use crate::resp::Out;
use crate::server::{Shared, State};
use ferrocluster_acl::{AclLog, DeniedReason, LogContext, User, Users};
use ferrocluster_command::CommandSpec;
use std::collections::HashMap;

/// The ACL side of [`State`].
#[derive(Debug)]
pub struct AclState {
    /// The users.
    pub users: Users,
    /// ACL LOG.
    pub log: AclLog,
    /// `requirepass` in force.
    pub requirepass: Option<String>,
    /// The aclfile, resolved against `dir` (`None`: users come from the config file).
    pub aclfile: Option<std::path::PathBuf>,
    /// INFO `acl_access_denied_auth`.
    pub denied_auth: u64,
    /// INFO `acl_access_denied_cmd`.
    pub denied_cmd: u64,
    /// INFO `acl_access_denied_key`.
    pub denied_key: u64,
    /// INFO `acl_access_denied_channel`.
    pub denied_channel: u64,
    /// INFO `acl_access_denied_db` (Valkey 9).
    pub denied_db: u64,
    /// Each user's incarnation: a client logged in as an older one is closed.
    incarnation: HashMap<Vec<u8>, u64>,
    next_incarnation: u64,
}

impl AclState {
    /// The users at start: the default user with `requirepass`, then the config file's
    /// `user` lines or the aclfile.
    ///
    /// # Errors
    /// Both `user` lines and an `aclfile`; a bad `user` line; an unreadable or bad aclfile
    /// (Valkey refuses to start then too).
    pub fn from_config(config: &crate::config::Config) -> Result<AclState, String> {
        let mut users = Users::new();
        if !config.users.is_empty() && config.aclfile.is_some() {
            return Err("Configuring Valkey with users defined in valkey.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your valkey.conf, but not both.".into());
        }
        let aclfile = config.aclfile.as_ref().map(|f| config.dir.join(f));
        let mut state = AclState {
            users: Users::new(),
            log: AclLog::new(config.acllog_max_len),
            requirepass: None,
            aclfile: aclfile.clone(),
            denied_auth: 0,
            denied_cmd: 0,
            denied_key: 0,
            denied_channel: 0,
            denied_db: 0,
            incarnation: HashMap::new(),
            next_incarnation: 1,
        };
        users.set_default_password(config.requirepass.as_deref().map(str::as_bytes));
        state.requirepass = config.requirepass.clone();
        for line in &config.users {
            let (name, rules) = line
                .split_first()
                .ok_or_else(|| "user needs a name".to_string())?;
            users
                .set_user(name.as_bytes(), rules)
                .map_err(|e| format!("Error in user declaration '{name}': {e}"))?;
        }
        if let Some(path) = &aclfile {
            let text = std::fs::read_to_string(path).map_err(|e| {
                format!("Error loading ACLs, opening file '{}': {e}", path.display())
            })?;
            users = Users::load_file(&text, &path.display().to_string()).map_err(|e| e.0)?;
        }
        state.users = users;
        Ok(state)
    }

    /// Counts a denial in INFO `acl_access_denied_*` (Valkey `ACLUpdateInfoMetrics`).
    fn count(&mut self, reason: DeniedReason) {
        match reason {
            DeniedReason::Command => self.denied_cmd += 1,
            DeniedReason::Key => self.denied_key += 1,
            DeniedReason::Channel => self.denied_channel += 1,
            DeniedReason::Database => self.denied_db += 1,
        }
    }

    /// The incarnation of user `name` (0 for one never replaced).
    pub fn incarnation(&self, name: &[u8]) -> u64 {
        self.incarnation.get(name).copied().unwrap_or(0)
    }

    /// A new incarnation of user `name`: its clients are closed at once and, should one
    /// slip through, at its next command.
    fn retire(&mut self, shared: &Shared, name: &[u8]) {
        self.next_incarnation += 1;
        self.incarnation
            .insert(name.to_vec(), self.next_incarnation);
        crate::clients::close_user(shared, name, self.next_incarnation);
    }

    /// `requirepass` (Valkey `ACLUpdateDefaultUserPassword`).
    pub fn set_requirepass(&mut self, pass: Option<&str>) {
        self.users.set_default_password(pass.map(str::as_bytes));
        self.requirepass = pass.map(str::to_owned);
    }

    /// Whether a new connection starts authenticated (the default user is on and
    /// `nopass`, Valkey `clientSetDefaultAuth`).
    pub fn default_open(&self) -> bool {
        self.users
            .get(b"default")
            .is_some_and(|u| u.enabled() && u.nopass())
    }

    /// The user a client is logged in as, `None` when it was removed or replaced.
    fn user_of(&self, client: &ClientCtx) -> Option<&User> {
        if self.incarnation(&client.user) != client.user_incarnation {
            return None;
        }
        self.users.get(&client.user)
    }
}

/// The WRONGPASS text.
pub const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

fn client_info(client: &ClientCtx, out: &Out, now: u64) -> String {
    client.info_line(now, out.proto)
}

/// Logs `name` in with `pass` (AUTH, HELLO AUTH); on failure counts and logs it (reason
/// `auth`, object the command as sent) and returns the WRONGPASS text.
///
/// # Errors
/// [`WRONGPASS`].
pub fn authenticate(
    state: &mut State,
    client: &mut ClientCtx,
    name: &[u8],
    pass: &[u8],
    command: &[u8],
    out: &Out,
    now: u64,
) -> Result<(), &'static str> {
    let acl = &mut state.acl;
    if acl.users.authenticate(name, pass).is_some() {
        client.user = name.to_vec();
        client.user_incarnation = acl.incarnation(name);
        client.authed = true;
        return Ok(());
    }
    acl.denied_auth += 1;
    let info = client_info(client, out, now);
    acl.log
        .add("auth", LogContext::Toplevel, command, name, info, now);
    Err(WRONGPASS)
}

/// The permission check before a command runs (Valkey `processCommand`'s
/// `ACLCheckAllPerm`): `None` to go on; `Some(Flow::Close)` for a client whose user is
/// gone; `Some(Flow::Continue)` after writing `-NOPERM ...` (inside MULTI the transaction
/// is flagged: `flag` is called).
pub fn check(
    state: &mut State,
    client: &mut ClientCtx,
    spec: &'static CommandSpec,
    args: &Args<'_>,
    out: &mut Out,
    now: u64,
    flag: &mut dyn FnMut(&mut ClientCtx),
) -> Option<Flow> {
    let acl = &mut state.acl;
    let Some(user) = acl.user_of(client) else {
        return Some(Flow::Close);
    };
    if user.allows_any_args(spec) {
        return None;
    }
    let argv: Vec<&[u8]> = (0..args.len()).map(|i| args.get(i)).collect();
    let denied = match user.check(spec, &argv, client.db as u64) {
        Ok(()) => return None,
        Err(d) => d,
    };
    let msg = denied.message(user.name(), spec.name, b"", false);
    let object = denied.log_object(spec.name, &argv).to_vec();
    let name = user.name().to_vec();
    acl.count(denied.reason);
    let in_multi = client.multi.is_some() || client.cluster.as_ref().is_some_and(|c| c.in_multi());
    let context = if in_multi {
        LogContext::Multi
    } else {
        LogContext::Toplevel
    };
    let info = client_info(client, out, now);
    acl.log
        .add(denied.reason.log_name(), context, &object, &name, info, now);
    if in_multi {
        flag(client);
    }
    out.error(&format!("NOPERM {msg}"));
    Some(Flow::Continue)
}

fn eq(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

const HELP: &[&str] = &[
    "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "GENPASS [<bits>]",
    "    Generate a secure 256-bit user password. The optional `bits` argument can",
    "    be used to specify a different size.",
    "LIST",
    "    Show users details in config file format.",
    "LOAD",
    "    Reload users from the ACL file.",
    "LOG [<count> | RESET]",
    "    Show the ACL log entries.",
    "SAVE",
    "    Save the current config to the ACL file.",
    "SETUSER <username> <rule> [<rule> ...]",
    "    Create or modify a user with the specified rules.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
    "HELP",
    "    Print this help.",
];

fn write_selector(out: &mut Out, s: &ferrocluster_acl::SelectorInfo) {
    for (k, v) in [
        ("commands", &s.commands),
        ("keys", &s.keys),
        ("channels", &s.channels),
        ("databases", &s.databases),
    ] {
        out.bulk(k.as_bytes());
        out.bulk(v.as_bytes());
    }
}

fn random_password(bits: usize) -> Result<String, String> {
    use std::io::Read;
    let chars = bits.div_ceil(4);
    let mut bytes = vec![0u8; chars.div_ceil(2)];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| format!("ERR can't read random bytes: {e}"))?;
    let mut s: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    s.truncate(chars);
    Ok(s)
}

/// `ACL <subcommand>` (Valkey 9.1 `aclCommand`).
pub fn command(
    shared: &Shared,
    state: &mut State,
    client: &mut ClientCtx,
    args: &Args<'_>,
    out: &mut Out,
    now: u64,
) -> Flow {
    let sub = args.get(1);
    if eq(sub, "setuser") {
        let rules: Vec<&[u8]> = (3..args.len()).map(|i| args.get(i)).collect();
        match state.acl.users.set_user(args.get(2), &rules) {
            Ok(()) => {
                if let Some(u) = state.acl.users.get(args.get(2)) {
                    crate::clients::close_lost_subscribers(shared, u.clone());
                }
                refresh_default(shared, state);
                out.ok();
            }
            Err(e) => out.error(&format!("ERR {e}")),
        }
    } else if eq(sub, "getuser") && args.len() == 3 {
        let Some(u) = state.acl.users.get(args.get(2)) else {
            out.null();
            return Flow::Continue;
        };
        let g = u.get_user();
        out.map(7);
        out.bulk(b"flags");
        out.set(g.flags.len());
        for f in &g.flags {
            out.bulk(f.as_bytes());
        }
        out.bulk(b"passwords");
        out.array(g.passwords.len());
        for p in &g.passwords {
            out.bulk(p.as_bytes());
        }
        write_selector(out, &g.root);
        out.bulk(b"selectors");
        out.array(g.selectors.len());
        for s in &g.selectors {
            out.map(4);
            write_selector(out, s);
        }
    } else if eq(sub, "deluser") && args.len() >= 3 {
        if (2..args.len()).any(|i| args.get(i) == b"default") {
            out.error("ERR The 'default' user cannot be removed");
            return Flow::Continue;
        }
        let mut n = 0;
        for i in 2..args.len() {
            if state.acl.users.remove(args.get(i)) {
                state.acl.retire(shared, args.get(i));
                n += 1;
            }
        }
        out.int(n);
    } else if eq(sub, "list") && args.len() == 2 {
        let lines: Vec<String> = state.acl.users.iter().map(User::describe).collect();
        out.array(lines.len());
        for l in &lines {
            out.bulk(l.as_bytes());
        }
    } else if eq(sub, "users") && args.len() == 2 {
        let names: Vec<Vec<u8>> = state.acl.users.iter().map(|u| u.name().to_vec()).collect();
        out.array(names.len());
        for n in &names {
            out.bulk(n);
        }
    } else if eq(sub, "whoami") && args.len() == 2 {
        out.bulk(&client.user);
    } else if eq(sub, "cat") && args.len() <= 3 {
        if args.len() == 2 {
            let names: Vec<&str> = ferrocluster_acl::category_names().collect();
            out.array(names.len());
            for n in names {
                out.bulk(n.as_bytes());
            }
        } else {
            match ferrocluster_acl::category_commands(args.get(2)) {
                Some(cmds) => {
                    out.array(cmds.len());
                    for c in cmds {
                        out.bulk(c.as_bytes());
                    }
                }
                None => out.error(&format!(
                    "ERR Unknown category '{}'",
                    String::from_utf8_lossy(args.get(2))
                )),
            }
        }
    } else if eq(sub, "log") && args.len() <= 3 {
        log(state, args, out, now);
    } else if eq(sub, "save") && args.len() == 2 {
        let Some(path) = state.acl.aclfile.clone() else {
            out.error("ERR This Valkey instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Valkey configuration file set) in order to store users in the Valkey configuration.");
            return Flow::Continue;
        };
        let text = state.acl.users.to_file();
        match crate::persist::write_atomically(&path, text.as_bytes(), "temp-acl.tmp") {
            Ok(()) => out.ok(),
            Err(_) => out.error("ERR There was an error trying to save the ACLs. Please check the server logs for more information"),
        }
    } else if eq(sub, "load") && args.len() == 2 {
        let Some(path) = state.acl.aclfile.clone() else {
            out.error("ERR This Valkey instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Valkey configuration file set) in order to store users in the Valkey configuration.");
            return Flow::Continue;
        };
        let loaded = std::fs::read_to_string(&path)
            .map_err(|e| format!("Error loading ACLs, opening file '{}': {e}", path.display()))
            .and_then(|t| Users::load_file(&t, &path.display().to_string()).map_err(|e| e.0));
        match loaded {
            Ok(users) => {
                let gone: Vec<Vec<u8>> = state
                    .acl
                    .users
                    .iter()
                    .filter(|u| users.get(u.name()).is_none())
                    .map(|u| u.name().to_vec())
                    .collect();
                for name in gone {
                    state.acl.retire(shared, &name);
                }
                // The kept users' clients stay, under the new rules; a subscriber whose user
                // lost one of its channels is closed (Valkey `ACLLoadFromFile`).
                for u in users.iter() {
                    crate::clients::close_lost_subscribers(shared, u.clone());
                }
                state.acl.users = users;
                refresh_default(shared, state);
                out.ok();
            }
            Err(e) => out.error(&format!("ERR {e}")),
        }
    } else if eq(sub, "genpass") && args.len() <= 3 {
        let bits = match args.opt(2) {
            None => Some(256),
            Some(b) => crate::commands::parse_i64(b).filter(|&n| (1..=4096).contains(&n)),
        };
        let Some(bits) = bits else {
            out.error("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096");
            return Flow::Continue;
        };
        match random_password(bits as usize) {
            Ok(p) => out.bulk(p.as_bytes()),
            Err(e) => out.error(&e),
        }
    } else if eq(sub, "dryrun") && args.len() >= 4 {
        dryrun(state, args, out);
    } else if eq(sub, "help") && args.len() == 2 {
        out.array(HELP.len());
        for l in HELP {
            out.simple(l);
        }
    } else {
        out.error(&format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try ACL HELP.",
            String::from_utf8_lossy(sub)
        ));
    }
    Flow::Continue
}

/// Keeps the shared "new connections start authenticated" flag in step with the default
/// user.
pub fn refresh_default(shared: &Shared, state: &State) {
    shared.acl_default_open.store(
        state.acl.default_open(),
        std::sync::atomic::Ordering::Relaxed,
    );
}

fn dryrun(state: &State, args: &Args<'_>, out: &mut Out) {
    let Some(user) = state.acl.users.get(args.get(2)) else {
        out.error(&format!(
            "ERR User '{}' not found",
            String::from_utf8_lossy(args.get(2))
        ));
        return;
    };
    let argv: Vec<&[u8]> = (3..args.len()).map(|i| args.get(i)).collect();
    let spec = match ferrocluster_command::resolve(&argv) {
        Ok(s) => s,
        Err(ferrocluster_command::CommandError::WrongArity { fullname }) => {
            out.error(&format!(
                "ERR wrong number of arguments for '{fullname}' command"
            ));
            return;
        }
        Err(_) => {
            out.error(&format!(
                "ERR Command '{}' not found",
                String::from_utf8_lossy(argv[0])
            ));
            return;
        }
    };
    match user.check(spec, &argv, 0) {
        Ok(()) => out.ok(),
        Err(d) => {
            let obj = d.log_object(spec.name, &argv);
            out.bulk(d.message(user.name(), spec.name, obj, true).as_bytes());
        }
    }
}

fn log(state: &mut State, args: &Args<'_>, out: &mut Out, now: u64) {
    // Valkey `aclCommand` log: 10 entries unless a count is given.
    let mut count = 10;
    if let Some(a) = args.opt(2) {
        if eq(a, "reset") {
            state.acl.log.reset();
            out.ok();
            return;
        }
        match crate::commands::parse_i64(a) {
            Some(n) => count = usize::try_from(n).unwrap_or(0),
            None => {
                out.error("ERR value is not an integer or out of range");
                return;
            }
        }
    }
    let entries: Vec<_> = state.acl.log.entries().take(count).collect();
    out.array(entries.len());
    for e in entries {
        out.map(10);
        out.bulk(b"count");
        out.int(e.count as i64);
        out.bulk(b"reason");
        out.bulk(e.reason.as_bytes());
        out.bulk(b"context");
        out.bulk(e.context.name().as_bytes());
        out.bulk(b"object");
        out.bulk(&e.object);
        out.bulk(b"username");
        out.bulk(&e.username);
        out.bulk(b"age-seconds");
        crate::cmd::zset::reply_double(out, e.age_seconds(now));
        out.bulk(b"client-info");
        out.bulk(e.client_info.as_bytes());
        out.bulk(b"entry-id");
        out.int(e.entry_id as i64);
        out.bulk(b"timestamp-created");
        out.int(e.created_ms as i64);
        out.bulk(b"timestamp-last-updated");
        out.int(e.updated_ms as i64);
    }
}

/// INFO stats lines `acl_access_denied_*` (Valkey 9.1's, less `acl_access_denied_tls_cert`:
/// no client certificate authenticates here).
pub fn info_lines(state: &State) -> String {
    let a = &state.acl;
    format!(
        "acl_access_denied_auth:{}\r\nacl_access_denied_cmd:{}\r\nacl_access_denied_key:{}\r\nacl_access_denied_channel:{}\r\nacl_access_denied_db:{}\r\n",
        a.denied_auth, a.denied_cmd, a.denied_key, a.denied_channel, a.denied_db
    )
}

/// EXEC's check of each queued command (Valkey `execCommand`: the rules may have changed
/// since it was queued): `true` after writing the `-NOPERM ACLs rules changed ...` reply and
/// logging it (context `multi`); the command is then not run.
pub fn exec_denied(
    state: &mut State,
    client: &ClientCtx,
    spec: &'static CommandSpec,
    args: &Args<'_>,
    out: &mut Out,
    now: u64,
) -> bool {
    let acl = &mut state.acl;
    let Some(user) = acl.user_of(client) else {
        return false;
    };
    let argv: Vec<&[u8]> = (0..args.len()).map(|i| args.get(i)).collect();
    let Err(denied) = user.check(spec, &argv, client.db as u64) else {
        return false;
    };
    let reason = match denied.reason {
        DeniedReason::Command => "no permission to execute the command or subcommand",
        DeniedReason::Key => "no permission to touch the specified keys",
        DeniedReason::Channel => "no permission to access one of the channels used as arguments",
        DeniedReason::Database => "no permission",
    };
    let object = denied.log_object(spec.name, &argv).to_vec();
    let name = user.name().to_vec();
    acl.count(denied.reason);
    let info = client_info(client, out, now);
    acl.log.add(
        denied.reason.log_name(),
        LogContext::Multi,
        &object,
        &name,
        info,
        now,
    );
    out.error(&format!("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {reason}"));
    true
}

/// The running users as `user` config lines without the `user` word (`name rules...`), for
/// CONFIG REWRITE.
pub fn user_lines(state: &State) -> Vec<Vec<String>> {
    state
        .acl
        .users
        .iter()
        .map(|u| u.describe().split(' ').skip(1).map(str::to_owned).collect())
        .collect()
}

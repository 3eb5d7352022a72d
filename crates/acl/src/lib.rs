//! ACL users of a Valkey node (the Redis 6+ model), Sans-IO: no sockets, clocks or
//! randomness; times are parameters (Unix ms).
//!
//! * [`User`] and [`Selector`]: the rules of Valkey `ACLSetUser` / `ACLSetSelector`
//!   (`on` `off` `>pass` `<pass` `#hash` `!hash` `nopass` `resetpass` `~pat` `%R~` `%W~`
//!   `%RW~` `allkeys` `resetkeys` `&chan` `allchannels` `resetchannels` `+cmd` `-cmd`
//!   `+@cat` `-@cat` `+cmd|sub` `+cmd|firstarg` `allcommands` `nocommands` `reset`,
//!   selectors `(...)` and `clearselectors`, Valkey 9 databases `alldbs` `resetdbs`
//!   `db=0,3`), passwords kept as SHA-256 hex ([`hash_password`]).
//! * [`Users`]: the user set with `ACL SETUSER` ([`Users::set_user`]), authentication
//!   ([`Users::authenticate`]), `ACL LIST` lines ([`User::describe`]), `ACL GETUSER`
//!   ([`User::get_user`]), and the aclfile ([`Users::load_file`], [`Users::to_file`]).
//! * [`User::check`]: the permission check of Valkey `ACLCheckAllUserCommandPerm` over the
//!   command crate's table (ACL categories and key specs with their flags): command bits,
//!   first arguments, key patterns, channels, databases; the error texts
//!   ([`Denied::message`]).
//! * [`AclLog`]: `ACL LOG` entries grouped as Valkey `addACLLogEntry` groups them.
//!
//! Where Redis 7.0 and Valkey 9.1 differ this crate follows Valkey 9.1: command rules are
//! kept as given (`-@all +@read -@dangerous`, Redis 7.0 expands categories into
//! commands), error texts name the user (`User u has no permissions ...`, Redis 7.0 `this
//! user ...`), `ACL GETUSER` has `databases`, `ACL LIST` omits `sanitize-payload`, and the
//! log entries carry `entry-id` and timestamps (see `tests/vectors/README.md`).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod check;
mod file;
mod log;
mod registry;
mod rules;

pub use check::{Denied, DeniedReason};
pub use file::FileError;
pub use log::{AclLog, LogContext, LogEntry, DEFAULT_LOG_MAX_LEN};
pub use registry::{category_commands, category_names, lookup_command};
pub use rules::{
    hash_password, Databases, GetUser, KeyPattern, RuleError, Selector, SelectorInfo, SetUserError,
    User, Users,
};

//! Legacy slot migration, the commands `redis-cli --cluster reshard` drives: the `MIGRATE`
//! client ([`MigrateClient`]) and the `RESTORE` / `RESTORE-ASKING` checks on the receiving
//! node ([`restore`]), with DUMP payloads from `ferrocluster-rdb`. `CLUSTER SETSLOT` is the
//! node's.
//!
//! # What MIGRATE sends (captured from valkey-server 9.1.2 and redis-server 7.0.15)
//!
//! On one connection per target `host:port`, kept for the next MIGRATE (idle for at most
//! 10 s, at most 64), the whole request is written before any reply is read:
//!
//! 1. `AUTH <password>` or `AUTH <user> <password>` when `AUTH` / `AUTH2` was given, every
//!    time;
//! 2. `SELECT <db>` when the connection is new or its database is not known to be `<db>` (an
//!    error reply forgets it);
//! 3. per key still alive, `RESTORE <key> <ttl> <payload>` (`RESTORE-ASKING` in cluster
//!    mode), `<ttl>` the milliseconds left (at least 1) or 0, then `REPLACE` when asked;
//!
//! then one reply line per command. Keys acknowledged `+OK` are deleted here unless `COPY`
//! (none when the AUTH or SELECT reply was an error). The reply is `+OK`, `+NOKEY` (no key
//! found; nothing sent), `-ERR Target instance replied with error: <first error>`, or
//! `-IOERR error or timeout (connecting to the client|writing to target instance|reading to
//! target instance)`; a socket error before any RESTORE reply is retried once on a new
//! connection unless it was a timeout. `redis-cli --cluster reshard` sends `MIGRATE <host>
//! <port> "" <db> 60000 [REPLACE] KEYS <k1> .. <k10>` (its pipeline of 10), after `CLUSTER
//! SETSLOT <slot> IMPORTING` on the target and `MIGRATING` on the source.
//!
//! Where we differ: the payloads are RDB 10 by default ([`MigrateConfig::encoder`]; Valkey 9.1
//! writes RDB 80, which Redis 7.0 refuses); a full cache drops the least recently used entry
//! (Valkey: a random one).

mod migrate;
mod restore;

pub use migrate::{
    MigrateArgs, MigrateAuth, MigrateClient, MigrateConfig, MigrateError, MigrateLink,
    MigrateOutput, CACHE_IDLE_MS, CACHE_ITEMS, WRITE_CHUNK,
};
pub use restore::{restore, Restore, RestoreError};

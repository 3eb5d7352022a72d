//! Sans-IO client side of Redis/Valkey Sentinel service discovery.
//!
//! In the primary-with-replicas deployment watched by Sentinel, data nodes know nothing
//! of the topology: a client asks Sentinel who the primary is. [`Resolver`] implements
//! the Redis "Sentinel client spec":
//!
//! 1. Try the Sentinels in order, each with a short budget
//!    ([`Config::sentinel_timeout_ms`]); on error or timeout, the next. The first Sentinel
//!    that answers moves to the front of the list.
//! 2. Ask `SENTINEL get-master-addr-by-name <name>` (or `SENTINEL replicas <name>`); a null
//!    reply means this Sentinel does not know the name: try the next.
//! 3. Connect to the address and check `ROLE` (falling back to `INFO replication` and its
//!    `role:` line when `ROLE` is refused). If the role is not the one wanted, wait
//!    [`Config::retry_delay_ms`] and start again at step 1.
//!
//! On every reconnect of the host's data connections ([`Resolver::handle_reconnect`]) the
//! resolver starts again at step 1; when the answer moved, it first emits
//! [`Output::ClosePool`] for the old address. Errors distinguish "no Sentinel could be
//! reached" ([`ResolveError::NoSentinelReachable`]) from "no Sentinel knows the service"
//! ([`ResolveError::UnknownService`]). Optional: Sentinel list refresh
//! ([`Config::refresh_sentinels`]) and the `+switch-master` subscription
//! ([`Config::follow_switch_master`]), which only triggers the steps sooner.
//!
//! # The host loop
//!
//! The crate opens no socket and reads no clock. The host:
//!
//! 1. builds a [`Resolver`] with [`Resolver::new`] (this already queues the first
//!    [`Output::Connect`]);
//! 2. drains [`Resolver::poll_output`] to `None` and acts in order: `Connect` opens a TCP
//!    connection, `Send` RESP-encodes the argv and writes it, `Close` drops the
//!    connection, `ClosePool` closes the application's pooled connections to that
//!    address, `Resolved`/`Error` are results;
//! 3. feeds what happened: [`Resolver::handle_connected`], [`Resolver::handle_connect_failed`],
//!    [`Resolver::handle_closed`], [`Resolver::handle_reply`] with each decoded reply
//!    converted to [`Value`], and [`Resolver::handle_reconnect`] when its own data
//!    connection dropped;
//! 4. calls [`Resolver::handle_timeout`] when the time from [`Resolver::poll_timeout`] is
//!    reached, then goes back to 2.
//!
//! ```
//! use ferrocluster_sentinel::{Addr, Config, Output, Resolver, Value, Want};
//! let s1 = Addr::new("10.0.0.1", 26379);
//! let mut r = Resolver::new(Config::new("mymaster", Want::Primary, vec![s1.clone()]), 0).unwrap();
//! let conn = match r.poll_output() {
//!     Some(Output::Connect { conn, addr, .. }) => { assert_eq!(addr, s1); conn }
//!     other => panic!("{other:?}"),
//! };
//! r.handle_connected(conn, 5).unwrap();
//! assert!(matches!(r.poll_output(), Some(Output::Send { .. })));
//! r.handle_reply(conn, Value::Array(vec![Value::bulk("10.0.0.9"), Value::bulk("6379")]), 9).unwrap();
//! assert_eq!(r.poll_output(), Some(Output::Close { conn }));
//! let node = match r.poll_output() {
//!     Some(Output::Connect { conn, addr, .. }) => { assert_eq!(addr.port, 6379); conn }
//!     other => panic!("{other:?}"),
//! };
//! r.handle_connected(node, 10).unwrap();
//! assert!(matches!(r.poll_output(), Some(Output::Send { .. }))); // ROLE
//! r.handle_reply(node, Value::Array(vec![Value::bulk("master"), Value::Int(0), Value::Array(vec![])]), 12).unwrap();
//! assert_eq!(r.poll_output(), Some(Output::Close { conn: node }));
//! match r.poll_output() {
//!     Some(Output::Resolved { resolution, changed }) => {
//!         assert!(changed);
//!         assert_eq!(resolution.addrs, vec![Addr::new("10.0.0.9", 6379)]);
//!     }
//!     other => panic!("{other:?}"),
//! }
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod addr;
mod config;
mod output;
mod reply;
mod resolver;
mod value;

pub use addr::{Addr, AddrError};
pub use config::{Config, ConfigError, Want};
pub use output::{
    ConnId, ConnPurpose, InputError, Output, ReconnectCause, Resolution, ResolveError,
};
pub use reply::ObservedRole;
pub use resolver::Resolver;
pub use value::Value;

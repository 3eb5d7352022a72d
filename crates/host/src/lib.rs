//! The std side of a ferrocluster host: what every host of a [`ClusterNode`] needs and no
//! host should write again. It is not Sans-IO: with the examples, it is the one place that
//! touches sockets, files and the clock.
//!
//! The pieces stand alone, so a database with an event loop of its own takes only what it
//! lacks:
//! * [`bus::BusDriver`]: the cluster bus sockets (a listener per `bind` address, inbound and
//!   outbound links, the `LinkId` ↔ socket map, connect results, `Close`, the
//!   `cluster-link-sendbuf-limit`, accept errors that never stop a listener);
//! * [`nodesconf::NodesConfFile`]: nodes.conf loaded at start under an exclusive lock, written
//!   atomically and durably in the engine's persist order, a failed save fatal in Redis's
//!   words unless `cluster-config-save-behavior best-effort`;
//! * [`drive::DriveLoop`]: the host loop (wait, one clock read, bus input, `handle_timeout`
//!   on every turn, outputs acted on in order, `Persist` written and acknowledged) over a
//!   node the host keeps behind its own lock ([`drive::Host`]);
//! * [`listen`]: the `bind` list and Valkey's listening sockets, for the client port too;
//! * [`clock`]: the one clock read;
//! * [`tls`]: TLS with rustls for every port (the `tls-*` directives, reload, a stream type).
//!
//! # Host obligations
//! Taken over by the kit (when the piece is used): acting on `Connect` / `Transmit` / `Close`
//! in order and reporting link events ([`bus::BusDriver`]); writing, fsyncing and ordering
//! `Persist` snapshots, the lock, the fatal exit ([`nodesconf::NodesConfFile`]).
//!
//! Left to the user of the kit: everything about the data set — client connections and
//! their protocol, keys, replication, slot migration data, write pauses — and calling
//! `ClusterNode::handle_persisted(seq)` after [`nodesconf::NodesConfFile::persist`] returns.
//!
//! [`ClusterNode`]: ferrocluster_node::ClusterNode
#![deny(unsafe_code)] // one documented exception: the checked close in `nodesconf`
#![deny(missing_docs)]

pub mod bus;
pub mod clock;
pub mod drive;
pub mod listen;
pub mod nodesconf;
pub mod tls;

pub use bus::{Accepted, BusDriver, BusInput, SendBuffer};
pub use drive::{DriveLoop, Host};
pub use listen::BindAddr;
pub use mio::Waker;
pub use nodesconf::{NodesConfFile, OpenError, SaveBehavior};

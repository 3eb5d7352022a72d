//! The shared cluster model of ferrocluster (Valkey Cluster / Redis Cluster).
//!
//! Every engine crate (gossip, failure, epoch, migration) operates on the one [`Topology`]
//! this crate defines; the `node` crate orders the calls. Contents:
//!
//! * identities: [`NodeId`], [`ShardId`] (40 × `a-z0-9`, facts sheet §1.1);
//! * [`NodeFlags`]: the 16-bit flag word with the wire bit values of §5.1;
//! * [`Node`]: one node record (addresses, ports, flags, primary, configEpoch, owned slots,
//!   ping/pong times, link state, replication offset, failure reports);
//! * [`Topology`]: the node table, the slot-owner table, importing/migrating marks,
//!   currentEpoch / lastVoteEpoch, myself;
//! * time and epochs: [`Millis`] (Unix wall-clock ms, passed in by the host; durations are
//!   `u64` named `*_ms`), [`CurrentEpoch`], [`ConfigEpoch`];
//! * nodes.conf: [`load_nodes_conf`] (Redis 7.0, Valkey 7.2, Valkey 8 formats) and
//!   [`save_nodes_conf`] (Valkey 8 format), facts sheet §18;
//! * [`views`]: CLUSTER NODES / SLOTS / SHARDS / INFO / LINKS / MYID / MYSHARDID / REPLICAS
//!   as protocol-neutral [`Reply`] values (with RESP2/RESP3 encoders), facts sheet §19;
//! * announced values ([`Hostname`], [`HumanNodename`], IP parsing): validated at the trust
//!   boundary so nothing can inject separators into nodes.conf.
//!
//! This crate is Sans-IO: no clock reads, no global randomness (IDs come from a caller's
//! [`rand_core::RngCore`]).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod announce;
mod epoch;
mod flags;
mod id;
mod node;
mod nodes_conf;
mod reply;
mod time;
mod topology;
pub mod views;

pub use announce::{
    is_aux_valid_byte, parse_client_ipv4, parse_client_ipv6, parse_ip, validate_hostname,
    validate_nodename, AnnounceError, Hostname, HumanNodename, HOSTNAME_MAX_LEN, NODENAME_MAX_LEN,
};
pub use epoch::{ConfigEpoch, CurrentEpoch};
pub use flags::NodeFlags;
pub use id::{IdError, NodeId, ShardId, ID_LEN};
pub use node::{LinkState, Node};
pub use nodes_conf::{
    load_nodes_conf, load_nodes_conf_with_warnings, save_nodes_conf, ConfError, ConfErrorKind,
    ConfWarning, ConfWarningKind, LoadOptions,
};
pub use reply::{command_bytes, encode_array_len, encode_bulk, encode_command, Reply};
pub use time::Millis;
pub use topology::{Topology, TopologyError};

//! The collection types' data structures, independent of commands and of the keyspace.
//!
//! - [`packed`]: listpack entries in a byte buffer, the compact form of small collections and
//!   of list nodes.
//! - [`list`]: the quicklist.
//! - [`zset`]: the sorted set, packed when small, an order-statistic B-tree over a member
//!   table when big.
//!
//! `list-compress-depth` (LZF-compressed inner list nodes) is not implemented: the setting
//! is accepted and every node stays plain.

pub mod list;
pub mod packed;
pub mod zset;

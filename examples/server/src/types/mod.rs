//! The collection types' data structures, independent of commands and of the keyspace.
//!
//! - [`listpack`]: listpack entries (bidirectional, integers packed) in a byte buffer: the
//!   list's nodes and the small sorted set. (Hashes and sets use the forward-only varint
//!   `packed` form; a list node must also be walked from its end, for RPOP and negative
//!   indexes, which needs the listpack's back lengths.)
//! - [`list`]: the quicklist.
//! - [`zset`]: the sorted set, packed when small, an order-statistic B+tree over a member
//!   table when big.
//!
//! `list-compress-depth` (LZF-compressed inner list nodes) is not implemented: the setting
//! is accepted and every node stays plain.

pub mod list;
pub mod listpack;
pub mod zset;

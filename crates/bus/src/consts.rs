//! Wire constants: sizes, type codes and flag bits (facts sheet §1, §3, §4, §5, §6).

/// The 4-byte signature every frame starts with: ASCII `RCmb` (facts sheet §1).
pub const SIGNATURE: [u8; 4] = *b"RCmb";

/// The only protocol version (`ver` field) real nodes accept; others are dropped (§1, §2).
pub const PROTOCOL_VERSION: u16 = 1;

/// Length in bytes of the full header; the data section starts here (`CLUSTERMSG_MIN_LEN`, §3).
pub const HEADER_LEN: usize = 2256;

/// Length in bytes of the light header (Valkey 8.0+, `clusterMsgLight`, §3.1).
pub const LIGHT_HEADER_LEN: usize = 16;

/// Length in bytes of one gossip entry (§4.1).
pub const GOSSIP_ENTRY_LEN: usize = 104;

/// Length in bytes of a node name (node ID) or shard ID on the wire (§1.1).
pub const NAME_LEN: usize = 40;

/// Length in bytes of every IP field on the wire (`NET_IP_STR_LEN`, §1).
pub const IP_LEN: usize = 46;

/// Length in bytes of a slot bitmap (`myslots`, UPDATE), 16384 bits (§3).
pub const SLOT_BITMAP_LEN: usize = 2048;

/// Length in bytes of a ping extension's own header (`length` u32, `type` u16, unused u16; §6.1).
pub const EXT_HEADER_LEN: usize = 8;

/// Exact `totlen` of a FAIL message: header + 40-byte node name (§4).
pub const FAIL_LEN: usize = HEADER_LEN + NAME_LEN;

/// Exact `totlen` of an UPDATE message: header + 2096-byte update block (§4, §4.4).
pub const UPDATE_LEN: usize = HEADER_LEN + 8 + NAME_LEN + SLOT_BITMAP_LEN;

/// Bit of the `type` field that marks a light-header message (`CLUSTERMSG_LIGHT`, §3.1).
pub const LIGHT_TYPE_BIT: u16 = 0x8000;

/// Smallest `totlen` the framer accepts for a light message (§2 step 2).
pub const MIN_LIGHT_TOTLEN: u32 = LIGHT_HEADER_LEN as u32;

/// Smallest `totlen` the framer accepts for a full-header message (§2 step 2).
pub const MIN_FULL_TOTLEN: u32 = HEADER_LEN as u32;

/// Default maximum frame length of [`crate::FrameDecoder`]: 64 MiB.
///
/// Real nodes enforce no upper bound (§2 step 3); a bound keeps one peer from making us
/// buffer without limit. The largest real messages are PUBLISH frames (header + channel +
/// message), so the default leaves room for 64 MiB Pub/Sub payloads.
pub const DEFAULT_MAX_FRAME_LEN: u32 = 64 * 1024 * 1024;

/// Node flag bits, as sent in the header `flags` and in gossip entries (facts sheet §5.1).
///
/// V8 names; the Redis 7.0 names are given in the docs. Bits 10 to 13 are unknown to
/// Redis 7.0, which stores them blindly.
pub mod node_flags {
    /// `PRIMARY` (Redis 7.0: `MASTER`), 0x0001.
    pub const PRIMARY: u16 = 0x0001;
    /// `REPLICA` (Redis 7.0: `SLAVE`), 0x0002.
    pub const REPLICA: u16 = 0x0002;
    /// `PFAIL`: possibly failing, a local timeout, 0x0004.
    pub const PFAIL: u16 = 0x0004;
    /// `FAIL`: agreed failure, 0x0008.
    pub const FAIL: u16 = 0x0008;
    /// `MYSELF`: set on the own node, present in every header a node sends, 0x0010.
    pub const MYSELF: u16 = 0x0010;
    /// `HANDSHAKE`: node not yet identified (random temporary ID), 0x0020.
    pub const HANDSHAKE: u16 = 0x0020;
    /// `NOADDR`: address unknown, 0x0040.
    pub const NOADDR: u16 = 0x0040;
    /// `MEET`: send MEET, not PING, when connecting, 0x0080.
    pub const MEET: u16 = 0x0080;
    /// `MIGRATE_TO`: primary is a valid replica-migration target, 0x0100.
    pub const MIGRATE_TO: u16 = 0x0100;
    /// `NOFAILOVER`: replica will not start automatic failovers, 0x0200.
    pub const NOFAILOVER: u16 = 0x0200;
    /// `EXTENSIONS_SUPPORTED` (V72/V8): the node has sent EXT_DATA, 0x0400.
    pub const EXTENSIONS_SUPPORTED: u16 = 0x0400;
    /// `LIGHT_HDR_SUPPORTED` (V8; later `LIGHT_HDR_PUBLISH_SUPPORTED`): parses light
    /// PUBLISH/PUBLISHSHARD, 0x0800.
    pub const LIGHT_HDR_SUPPORTED: u16 = 0x0800;
    /// `LIGHT_HDR_MODULE_SUPPORTED` (Valkey 8.1+): parses light MODULE messages, 0x1000.
    pub const LIGHT_HDR_MODULE_SUPPORTED: u16 = 0x1000;
    /// `MULTI_MEET_SUPPORTED`: the same bit as [`LIGHT_HDR_MODULE_SUPPORTED`] also
    /// advertises "handles repeated MEET" (#2840), 0x1000.
    pub const MULTI_MEET_SUPPORTED: u16 = LIGHT_HDR_MODULE_SUPPORTED;
    /// `MY_PRIMARY_FAIL` (Valkey 9.x): a replica that sees its primary as FAIL, 0x2000.
    pub const MY_PRIMARY_FAIL: u16 = 0x2000;
}

/// Message flag bits of `mflags[0]` (facts sheet §5.2). `mflags[1]` and `mflags[2]` carry
/// no defined bits.
pub mod msg_flags {
    /// `PAUSED`: sender is a primary paused for a manual failover; its offset is final.
    pub const PAUSED: u8 = 0x01;
    /// `FORCEACK`: on FAILOVER_AUTH_REQUEST, vote even though the primary is not FAIL.
    pub const FORCEACK: u8 = 0x02;
    /// `EXT_DATA`: the message carries, or the sender understands, ping extensions.
    pub const EXT_DATA: u8 = 0x04;
}

/// Values of the header `state` byte (facts sheet §5.3): sent, never read by receivers.
pub mod cluster_state {
    /// `ok` (CLUSTER_OK).
    pub const OK: u8 = 0;
    /// `fail` (CLUSTER_FAIL).
    pub const FAIL: u8 = 1;
}

/// Ping extension type codes (facts sheet §6.2).
pub mod ext_type {
    /// HOSTNAME: announced hostname, NUL-terminated.
    pub const HOSTNAME: u16 = 0;
    /// HUMAN_NODENAME: announced human node name, NUL-terminated.
    pub const HUMAN_NODENAME: u16 = 1;
    /// FORGOTTEN_NODE: node name (40 bytes) + ttl u64 (seconds).
    pub const FORGOTTEN_NODE: u16 = 2;
    /// SHARDID: the sender's shard ID (40 bytes).
    pub const SHARD_ID: u16 = 3;
    /// CLIENT_IPV4: announced client IPv4 text, NUL-terminated (Valkey 8.0+).
    pub const CLIENT_IPV4: u16 = 4;
    /// CLIENT_IPV6: announced client IPv6 text, NUL-terminated (Valkey 8.0+).
    pub const CLIENT_IPV6: u16 = 5;
}

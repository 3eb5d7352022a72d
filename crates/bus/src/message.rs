//! The message model: header forms, message types and their data sections (facts sheet §3, §4).

use crate::consts::{msg_flags, LIGHT_TYPE_BIT};
use crate::ext::PingExt;
use crate::fields::{IpField, NodeName};
use ferrocluster_slot::SlotSet;

/// The type of a bus message (facts sheet §4), without the light bit.
///
/// [`MessageType::name`] gives the name CLUSTER INFO uses in its
/// `cluster_stats_messages_<name>_sent` / `_received` counters.
///
/// ```
/// use ferrocluster_bus::MessageType;
/// assert_eq!(MessageType::from_code(5), MessageType::FailoverAuthRequest);
/// assert_eq!(MessageType::FailoverAuthRequest.name(), "auth-req");
/// assert_eq!(MessageType::from_code(11), MessageType::Unknown(11));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub enum MessageType {
    /// 0, PING.
    Ping,
    /// 1, PONG.
    Pong,
    /// 2, MEET.
    Meet,
    /// 3, FAIL.
    Fail,
    /// 4, PUBLISH.
    Publish,
    /// 5, FAILOVER_AUTH_REQUEST.
    FailoverAuthRequest,
    /// 6, FAILOVER_AUTH_ACK.
    FailoverAuthAck,
    /// 7, UPDATE.
    Update,
    /// 8, MFSTART.
    MfStart,
    /// 9, MODULE.
    Module,
    /// 10, PUBLISHSHARD.
    PublishShard,
    /// Any other code (≥ 11, without the light bit); accepted and ignored by real nodes.
    Unknown(u16),
}

impl MessageType {
    /// The 11 known types in code order (`CLUSTERMSG_TYPE_COUNT` = 11).
    pub const KNOWN: [MessageType; 11] = [
        MessageType::Ping,
        MessageType::Pong,
        MessageType::Meet,
        MessageType::Fail,
        MessageType::Publish,
        MessageType::FailoverAuthRequest,
        MessageType::FailoverAuthAck,
        MessageType::Update,
        MessageType::MfStart,
        MessageType::Module,
        MessageType::PublishShard,
    ];

    /// The type for a wire code; the light bit (0x8000) is ignored.
    pub fn from_code(code: u16) -> MessageType {
        match code & !LIGHT_TYPE_BIT {
            0 => MessageType::Ping,
            1 => MessageType::Pong,
            2 => MessageType::Meet,
            3 => MessageType::Fail,
            4 => MessageType::Publish,
            5 => MessageType::FailoverAuthRequest,
            6 => MessageType::FailoverAuthAck,
            7 => MessageType::Update,
            8 => MessageType::MfStart,
            9 => MessageType::Module,
            10 => MessageType::PublishShard,
            other => MessageType::Unknown(other),
        }
    }

    /// The wire code (without the light bit).
    pub fn code(self) -> u16 {
        match self {
            MessageType::Ping => 0,
            MessageType::Pong => 1,
            MessageType::Meet => 2,
            MessageType::Fail => 3,
            MessageType::Publish => 4,
            MessageType::FailoverAuthRequest => 5,
            MessageType::FailoverAuthAck => 6,
            MessageType::Update => 7,
            MessageType::MfStart => 8,
            MessageType::Module => 9,
            MessageType::PublishShard => 10,
            MessageType::Unknown(code) => code & !LIGHT_TYPE_BIT,
        }
    }

    /// The CLUSTER INFO counter name (§4 "stats name"): `ping`, `pong`, `meet`, `fail`,
    /// `publish`, `auth-req`, `auth-ack`, `update`, `mfstart`, `module`, `publishshard`,
    /// and `unknown` for other codes (V8 `clusterGetMessageTypeString`).
    pub fn name(self) -> &'static str {
        match self {
            MessageType::Ping => "ping",
            MessageType::Pong => "pong",
            MessageType::Meet => "meet",
            MessageType::Fail => "fail",
            MessageType::Publish => "publish",
            MessageType::FailoverAuthRequest => "auth-req",
            MessageType::FailoverAuthAck => "auth-ack",
            MessageType::Update => "update",
            MessageType::MfStart => "mfstart",
            MessageType::Module => "module",
            MessageType::PublishShard => "publishshard",
            MessageType::Unknown(_) => "unknown",
        }
    }

    /// True for the types that may use the light header (§3.1): PUBLISH and PUBLISHSHARD
    /// (Valkey 8.0), MODULE (Valkey 8.1+, flag bit 12; Valkey 8.0 drops a light MODULE).
    pub fn supports_light_header(self) -> bool {
        matches!(
            self,
            MessageType::Publish | MessageType::PublishShard | MessageType::Module
        )
    }
}

/// One whole cluster bus message: a header form and a data section.
///
/// [`crate::decode`] builds it from a frame, [`crate::encode`] writes the frame back.
/// The wire fields `totlen`, `ver`, `type`, `count` and `extensions` are not stored: they
/// follow from the body (see [`crate::encode`]).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Message {
    /// The full 2256-byte header, or the 16-byte light header.
    pub header: Header,
    /// The type and its data section.
    pub body: Body,
}

impl Message {
    /// Swaps `port` and `pport` in the full header and in every gossip entry. With
    /// `tls-cluster yes` Valkey (and Redis 7.0) put the TLS client port in `port` and the
    /// plaintext one in `pport` (`clusterBuildMessageHdr`, `clusterSetGossipEntry`,
    /// `clusterProcessGossipSection`): a node so configured swaps what it receives to read it
    /// in the default order (and builds what it sends in Valkey's). The swap is its own
    /// inverse.
    pub fn swap_tls_ports(&mut self) {
        if let Header::Full(h) = &mut self.header {
            std::mem::swap(&mut h.port, &mut h.pport);
        }
        if let Body::Ping(g) | Body::Pong(g) | Body::Meet(g) = &mut self.body {
            for e in &mut g.entries {
                std::mem::swap(&mut e.port, &mut e.pport);
            }
        }
    }

    /// A message with a full header.
    pub fn full(header: FullHeader, body: Body) -> Message {
        Message {
            header: Header::Full(Box::new(header)),
            body,
        }
    }

    /// A light-header message (only PUBLISH, PUBLISHSHARD and MODULE bodies encode).
    pub fn light(body: Body) -> Message {
        Message {
            header: Header::Light(LightHeader::default()),
            body,
        }
    }

    /// The message type.
    pub fn message_type(&self) -> MessageType {
        self.body.message_type()
    }

    /// The full header, if this is not a light message.
    pub fn full_header(&self) -> Option<&FullHeader> {
        match &self.header {
            Header::Full(h) => Some(h),
            Header::Light(_) => None,
        }
    }

    /// True for a light-header message.
    pub fn is_light(&self) -> bool {
        matches!(self.header, Header::Light(_))
    }
}

/// The two header forms (facts sheet §3, §3.1).
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Header {
    /// The full header (boxed: it holds the 2048-byte slot bitmap).
    Full(Box<FullHeader>),
    /// The light header (type bit 0x8000), Valkey 8.0+.
    Light(LightHeader),
}

/// The full `clusterMsg` header without the fields derived from the body
/// (facts sheet §3; offsets in the field docs).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct FullHeader {
    /// Offset 10: the sender's primary client port (TLS port under `tls-cluster yes`).
    pub port: u16,
    /// Offset 16: the sender's currentEpoch.
    pub current_epoch: u64,
    /// Offset 24: the sender's configEpoch, or its primary's if it is a replica.
    pub config_epoch: u64,
    /// Offset 32: replication offset (primary: master offset; replica: processed offset).
    pub offset: u64,
    /// Offset 40: the sender's node name.
    pub sender: NodeName,
    /// Offset 80: the slots of the sender, or of its primary if it is a replica.
    pub myslots: SlotSet,
    /// Offset 2128 (`replicaof`, `slaveof` in Redis 7.0): the primary's name if the sender
    /// is a replica. `None` = 40 zero bytes (a primary, or a replica with an unknown
    /// primary); `Some` of 40 zero bytes encodes the same as `None`.
    pub replicaof: Option<NodeName>,
    /// Offset 2168: the announced IP, or unset (receivers use the peer address).
    pub myip: IpField,
    /// Offset 2216 (`notused1`): 30 bytes, zero from real senders, kept as received.
    pub reserved: [u8; 30],
    /// Offset 2246: the secondary client port (0 when there is none).
    pub pport: u16,
    /// Offset 2248: the sender's bus port.
    pub cport: u16,
    /// Offset 2250: the sender's own node flags (bits in [`crate::node_flags`]).
    pub flags: u16,
    /// Offset 2252: the sender's cluster state ([`crate::cluster_state`]); never read.
    pub state: u8,
    /// Offset 2253: message flags; only `mflags[0]` has defined bits ([`crate::msg_flags`]).
    pub mflags: [u8; 3],
}

impl FullHeader {
    /// True when `flags` has every bit of `mask` ([`crate::node_flags`]).
    pub fn has_flags(&self, mask: u16) -> bool {
        self.flags & mask == mask
    }

    /// True when `mflags[0]` has every bit of `mask` ([`crate::msg_flags`]).
    pub fn has_mflags(&self, mask: u8) -> bool {
        self.mflags[0] & mask == mask
    }

    /// True when `mflags[0]` has EXT_DATA: the sender understands ping extensions (§6.3).
    pub fn ext_data(&self) -> bool {
        self.has_mflags(msg_flags::EXT_DATA)
    }
}

/// The light header's spare fields (facts sheet §3.1): bytes 10–11 and 14–15, zero from
/// Valkey, kept as received.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct LightHeader {
    /// Bytes 10, 11, 14, 15 of the frame, in that order.
    pub reserved: [u8; 4],
}

/// The message type with its data section (facts sheet §4).
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Body {
    /// PING (0): gossip entries and ping extensions.
    Ping(Gossip),
    /// PONG (1): as PING.
    Pong(Gossip),
    /// MEET (2): as PING.
    Meet(Gossip),
    /// FAIL (3): the node agreed to have failed (§4.2).
    Fail {
        /// The failing node's name.
        about: NodeName,
    },
    /// PUBLISH (4): a Pub/Sub message (§4.3).
    Publish(Publish),
    /// FAILOVER_AUTH_REQUEST (5): no data; FORCEACK in `mflags[0]` for manual failover.
    FailoverAuthRequest,
    /// FAILOVER_AUTH_ACK (6): no data.
    FailoverAuthAck,
    /// UPDATE (7): a node's configEpoch and slots (§4.4); boxed, it holds a 2048-byte bitmap.
    Update(Box<Update>),
    /// MFSTART (8): no data; a replica asks its primary to start a manual failover.
    MfStart,
    /// MODULE (9): a module message (§4.5).
    Module(ModuleMsg),
    /// PUBLISHSHARD (10): a shard-channel Pub/Sub message (§4.3).
    PublishShard(Publish),
    /// A type ≥ 11: kept raw, ignored by real nodes after header processing (§2, §8).
    Unknown(UnknownMsg),
}

impl Body {
    /// The message type of this body.
    pub fn message_type(&self) -> MessageType {
        match self {
            Body::Ping(_) => MessageType::Ping,
            Body::Pong(_) => MessageType::Pong,
            Body::Meet(_) => MessageType::Meet,
            Body::Fail { .. } => MessageType::Fail,
            Body::Publish(_) => MessageType::Publish,
            Body::FailoverAuthRequest => MessageType::FailoverAuthRequest,
            Body::FailoverAuthAck => MessageType::FailoverAuthAck,
            Body::Update(_) => MessageType::Update,
            Body::MfStart => MessageType::MfStart,
            Body::Module(_) => MessageType::Module,
            Body::PublishShard(_) => MessageType::PublishShard,
            Body::Unknown(u) => MessageType::Unknown(u.msg_type),
        }
    }

    /// The gossip section of a PING, PONG or MEET.
    pub fn gossip(&self) -> Option<&Gossip> {
        match self {
            Body::Ping(g) | Body::Pong(g) | Body::Meet(g) => Some(g),
            _ => None,
        }
    }
}

/// The data section of PING, PONG and MEET: `count` gossip entries, then `extensions`
/// ping extensions (facts sheet §4, §4.1, §6).
///
/// Extensions are read only when the header has EXT_DATA (as real nodes validate them);
/// [`crate::encode`] sets EXT_DATA whenever `extensions` is not empty.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Gossip {
    /// The gossip entries (at most 65535).
    pub entries: Vec<GossipEntry>,
    /// The ping extensions, in wire order (at most 65535).
    pub extensions: Vec<PingExt>,
}

/// One 104-byte gossip entry: the sender's view of another node (facts sheet §4.1).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct GossipEntry {
    /// Offset 0: the node's name.
    pub name: NodeName,
    /// Offset 40: the sender's pending ping time for that node, Unix **seconds**; 0 = none.
    pub ping_sent_secs: u32,
    /// Offset 44: the sender's last pong time from that node, Unix **seconds**.
    pub pong_received_secs: u32,
    /// Offset 48: the node's IP, NUL-padded.
    pub ip: IpField,
    /// Offset 94: the node's primary client port.
    pub port: u16,
    /// Offset 96: the node's bus port.
    pub cport: u16,
    /// Offset 98: the sender's view of the node's flags ([`crate::node_flags`]).
    pub flags: u16,
    /// Offset 100: the node's secondary client port.
    pub pport: u16,
    /// Offset 102 (`notused1`): zero from real senders, kept as received.
    pub reserved: u16,
}

/// The data of PUBLISH and PUBLISHSHARD (facts sheet §4.3): `channel_len` u32,
/// `message_len` u32, then the channel and message bytes without padding.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Publish {
    /// The channel name.
    pub channel: Vec<u8>,
    /// The message.
    pub message: Vec<u8>,
}

/// The data of UPDATE (facts sheet §4.4): a node's configEpoch and slot bitmap.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Update {
    /// The described node's configEpoch.
    pub config_epoch: u64,
    /// The described node's name.
    pub name: NodeName,
    /// The described node's slots.
    pub slots: SlotSet,
}

/// The data of MODULE (facts sheet §4.5).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct ModuleMsg {
    /// The module ID, read as a little-endian u64: the sender writes its native u64 without
    /// byte swapping (little-endian on x86 and ARM) and this codec reads and writes it so.
    pub module_id: u64,
    /// The module-defined message type.
    pub module_type: u8,
    /// The payload (`len` u32 on the wire).
    pub payload: Vec<u8>,
}

/// A message of a type ≥ 11 with a full header, kept raw (facts sheet §2: accepted with
/// any length, logged and ignored after header processing).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct UnknownMsg {
    /// The type code (11..=0x7FFF; codes below 11 are the known types).
    pub msg_type: u16,
    /// The header `count` field as received.
    pub count: u16,
    /// The header `extensions` field as received.
    pub extensions: u16,
    /// Everything after the 2256-byte header.
    pub data: Vec<u8>,
}

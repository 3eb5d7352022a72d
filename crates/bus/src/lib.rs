//! The cluster bus wire codec of Valkey Cluster (the Redis Cluster design), byte-compatible
//! with Redis 7.0 and Valkey 8.0 (facts sheet `cluster-bus.md` §2–§8, §17, §21–§22).
//!
//! No state, no I/O: bytes in, [`Message`] out, and back.
//!
//! * [`decode`]: one whole frame → [`Message`], with the validation real nodes apply
//!   ([`DecodeError`] says what was wrong and whether framing is lost).
//! * [`encode`] / [`encode_into`] / [`try_encode_into`]: [`Message`] → the exact bytes of
//!   one frame.
//! * [`FrameDecoder`]: splits a link's byte stream into frames, whatever the read sizes,
//!   with a maximum frame length (default [`DEFAULT_MAX_FRAME_LEN`], 64 MiB).
//! * The model: [`Header`] (full [`FullHeader`] or light [`LightHeader`]), [`Body`] with one
//!   variant per message type, [`Gossip`] entries and [`PingExt`] ping extensions, raw
//!   [`NodeName`] and [`IpField`] fields, flag constants in [`node_flags`] and
//!   [`msg_flags`], and [`MessageType`] with the CLUSTER INFO counter names.
//!
//! Decoding then encoding a real capture gives back the same bytes (tested on every
//! captured frame of Redis 7.0.15 and Valkey 8.0.1).
//!
//! ```
//! use ferrocluster_bus::{decode, encode, Body, FullHeader, Gossip, Message, PingExt, NodeName};
//! let mut header = FullHeader::default();
//! header.current_epoch = 6;
//! let shard = NodeName::from_slice(&[b'a'; 40]).unwrap();
//! let ping = Message::full(
//!     header,
//!     Body::Ping(Gossip { entries: vec![], extensions: vec![PingExt::ShardId(shard)] }),
//! );
//! let frame = encode(&ping);
//! assert_eq!(frame.len(), 2256 + 48); // the worked example of facts sheet §4
//! let back = decode(&frame).unwrap();
//! assert!(back.full_header().unwrap().ext_data()); // EXT_DATA set by the encoder
//! assert_eq!(back.body, ping.body);
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod consts;
mod decode;
mod encode;
mod ext;
mod fields;
mod framer;
mod message;

pub use consts::{
    cluster_state, ext_type, msg_flags, node_flags, DEFAULT_MAX_FRAME_LEN, EXT_HEADER_LEN,
    FAIL_LEN, GOSSIP_ENTRY_LEN, HEADER_LEN, IP_LEN, LIGHT_HEADER_LEN, LIGHT_TYPE_BIT,
    MIN_FULL_TOTLEN, MIN_LIGHT_TOTLEN, NAME_LEN, PROTOCOL_VERSION, SIGNATURE, SLOT_BITMAP_LEN,
    UPDATE_LEN,
};
pub use decode::{decode, DecodeError};
pub use encode::{encode, encode_into, encoded_len, try_encode, try_encode_into, EncodeError};
pub use ext::{ExtString, PingExt, RawExt};
pub use fields::{IpField, NodeName};
pub use framer::FrameDecoder;
pub use message::{
    Body, FullHeader, Gossip, GossipEntry, Header, LightHeader, Message, MessageType, ModuleMsg,
    Publish, UnknownMsg, Update,
};

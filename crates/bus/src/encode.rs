//! Encoding a [`Message`] into the exact bytes of one frame (facts sheet §3, §4, §6, §22).

use crate::consts::*;
use crate::ext::PingExt;
use crate::message::*;

/// Why a [`Message`] cannot be written as a frame. Encoding never writes a partial frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// More than 65535 gossip entries (`count` is a u16).
    #[error("{count} gossip entries do not fit the u16 count field")]
    TooManyGossipEntries {
        /// Entries in the message.
        count: usize,
    },
    /// More than 65535 ping extensions (`extensions` is a u16).
    #[error("{count} ping extensions do not fit the u16 extensions field")]
    TooManyExtensions {
        /// Extensions in the message.
        count: usize,
    },
    /// A ping extension whose payload length is not a multiple of 8 (§6.1).
    #[error("ping extension {index} has a {len}-byte payload, not a multiple of 8")]
    ExtensionNotPadded {
        /// Position of the extension.
        index: usize,
        /// Its payload length.
        len: usize,
    },
    /// A ping extension of 64 KiB or more: real nodes truncate its length to 16 bits while
    /// validating (§4) and would drop the message.
    #[error("ping extension {index} would be {len} bytes long, 64 KiB or more")]
    ExtensionTooLong {
        /// Position of the extension.
        index: usize,
        /// Its wire length, header included.
        len: usize,
    },
    /// The frame would be longer than `u32::MAX` bytes (`totlen` is a u32).
    #[error("the frame would be {len} bytes long, more than totlen can say")]
    FrameTooLong {
        /// The length the frame would have.
        len: u64,
    },
    /// A light header on a type that has no light form (only PUBLISH, PUBLISHSHARD, MODULE).
    #[error("type {0:?} has no light-header form")]
    LightNotSupported(MessageType),
    /// An [`UnknownMsg`] whose type code is a known type (< 11) or has the light bit.
    #[error("type code {0:#06x} cannot be sent as an unknown message")]
    InvalidUnknownType(u16),
}

/// Encodes `msg` into a new buffer holding exactly one frame.
///
/// # Panics
/// If the message cannot be encoded (see [`EncodeError`]: more than 65535 gossip entries or
/// extensions, a badly sized raw extension, a frame over 4 GiB, a light header on a type
/// without one). Messages built by this crate's decoder never panic; use [`try_encode`] for
/// messages from elsewhere.
pub fn encode(msg: &Message) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(msg, &mut out);
    out
}

/// Appends one frame for `msg` to `out`, reusing its allocation.
///
/// # Panics
/// As [`encode`]; [`try_encode_into`] returns the error instead.
pub fn encode_into(msg: &Message, out: &mut Vec<u8>) {
    if let Err(e) = try_encode_into(msg, out) {
        panic!("ferrocluster_bus::encode_into: {e}");
    }
}

/// Encodes `msg` into a new buffer.
///
/// # Errors
/// [`EncodeError`] when the message does not fit the wire format.
pub fn try_encode(msg: &Message) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::new();
    try_encode_into(msg, &mut out)?;
    Ok(out)
}

/// The `totlen` the frame for `msg` will have.
///
/// # Errors
/// [`EncodeError`] when the message does not fit the wire format.
pub fn encoded_len(msg: &Message) -> Result<usize, EncodeError> {
    let header_len = match &msg.header {
        Header::Full(_) => HEADER_LEN,
        Header::Light(_) => {
            if !msg.message_type().supports_light_header() {
                return Err(EncodeError::LightNotSupported(msg.message_type()));
            }
            LIGHT_HEADER_LEN
        }
    };
    let data_len: u64 = match &msg.body {
        Body::Ping(g) | Body::Pong(g) | Body::Meet(g) => gossip_len(g)?,
        Body::Fail { .. } => NAME_LEN as u64,
        Body::Publish(p) | Body::PublishShard(p) => {
            8 + p.channel.len() as u64 + p.message.len() as u64
        }
        Body::FailoverAuthRequest | Body::FailoverAuthAck | Body::MfStart => 0,
        Body::Update(_) => (UPDATE_LEN - HEADER_LEN) as u64,
        Body::Module(m) => 13 + m.payload.len() as u64,
        Body::Unknown(u) => {
            if u.msg_type < 11 || u.msg_type & LIGHT_TYPE_BIT != 0 {
                return Err(EncodeError::InvalidUnknownType(u.msg_type));
            }
            u.data.len() as u64
        }
    };
    let len = header_len as u64 + data_len;
    if len > u64::from(u32::MAX) {
        return Err(EncodeError::FrameTooLong { len });
    }
    Ok(len as usize)
}

fn gossip_len(g: &Gossip) -> Result<u64, EncodeError> {
    if g.entries.len() > usize::from(u16::MAX) {
        return Err(EncodeError::TooManyGossipEntries {
            count: g.entries.len(),
        });
    }
    if g.extensions.len() > usize::from(u16::MAX) {
        return Err(EncodeError::TooManyExtensions {
            count: g.extensions.len(),
        });
    }
    let mut len = (GOSSIP_ENTRY_LEN * g.entries.len()) as u64;
    for (index, ext) in g.extensions.iter().enumerate() {
        let wire = ext.wire_len();
        if wire % 8 != 0 {
            return Err(EncodeError::ExtensionNotPadded {
                index,
                len: wire - EXT_HEADER_LEN,
            });
        }
        if wire > usize::from(u16::MAX) {
            return Err(EncodeError::ExtensionTooLong { index, len: wire });
        }
        len += wire as u64;
    }
    Ok(len)
}

/// Appends one frame for `msg` to `out`. On error `out` is unchanged.
///
/// Derived fields: `totlen` from the layout; `ver` = 1; `type` from the body (with bit
/// 0x8000 for a light header); `count` = gossip entries; `extensions` = ping extensions
/// when EXT_DATA is set; EXT_DATA is added to `mflags[0]` when there are extensions (as
/// V8 `writePingExtensions` does). Other types write `count` = `extensions` = 0, except
/// [`UnknownMsg`], which writes its own.
///
/// # Errors
/// [`EncodeError`] when the message does not fit the wire format.
pub fn try_encode_into(msg: &Message, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let totlen = encoded_len(msg)?;
    let start = out.len();
    out.reserve(totlen);
    let msg_type = msg.message_type();
    out.extend_from_slice(&SIGNATURE);
    out.extend_from_slice(&(totlen as u32).to_be_bytes());
    out.extend_from_slice(&PROTOCOL_VERSION.to_be_bytes());
    match &msg.header {
        Header::Light(light) => {
            let r = light.reserved;
            out.extend_from_slice(&[r[0], r[1]]);
            out.extend_from_slice(&(msg_type.code() | LIGHT_TYPE_BIT).to_be_bytes());
            out.extend_from_slice(&[r[2], r[3]]);
        }
        Header::Full(h) => write_full_header(h, &msg.body, msg_type, out),
    }
    write_data(&msg.body, out);
    debug_assert_eq!(
        out.len() - start,
        totlen,
        "encoded_len and the writer agree"
    );
    Ok(())
}

fn write_full_header(h: &FullHeader, body: &Body, msg_type: MessageType, out: &mut Vec<u8>) {
    let mut mflags = h.mflags;
    let (count, extensions) = match body {
        Body::Ping(g) | Body::Pong(g) | Body::Meet(g) => {
            if !g.extensions.is_empty() {
                mflags[0] |= msg_flags::EXT_DATA;
            }
            let ext_count = if mflags[0] & msg_flags::EXT_DATA != 0 {
                g.extensions.len()
            } else {
                0
            };
            // Both fit in u16: encoded_len checked the lengths.
            (g.entries.len() as u16, ext_count as u16)
        }
        Body::Unknown(u) => (u.count, u.extensions),
        _ => (0, 0),
    };
    out.extend_from_slice(&h.port.to_be_bytes());
    out.extend_from_slice(&msg_type.code().to_be_bytes());
    out.extend_from_slice(&count.to_be_bytes());
    out.extend_from_slice(&h.current_epoch.to_be_bytes());
    out.extend_from_slice(&h.config_epoch.to_be_bytes());
    out.extend_from_slice(&h.offset.to_be_bytes());
    out.extend_from_slice(h.sender.as_bytes());
    out.extend_from_slice(h.myslots.as_bytes());
    out.extend_from_slice(h.replicaof.unwrap_or_default().as_bytes());
    out.extend_from_slice(h.myip.as_bytes());
    out.extend_from_slice(&extensions.to_be_bytes());
    out.extend_from_slice(&h.reserved);
    out.extend_from_slice(&h.pport.to_be_bytes());
    out.extend_from_slice(&h.cport.to_be_bytes());
    out.extend_from_slice(&h.flags.to_be_bytes());
    out.push(h.state);
    out.extend_from_slice(&mflags);
}

fn write_data(body: &Body, out: &mut Vec<u8>) {
    match body {
        Body::Ping(g) | Body::Pong(g) | Body::Meet(g) => {
            for e in &g.entries {
                write_gossip_entry(e, out);
            }
            for ext in &g.extensions {
                write_ext(ext, out);
            }
        }
        Body::Fail { about } => out.extend_from_slice(about.as_bytes()),
        Body::Publish(p) | Body::PublishShard(p) => {
            // Lengths fit in u32: encoded_len bounded the whole frame by u32::MAX.
            out.extend_from_slice(&(p.channel.len() as u32).to_be_bytes());
            out.extend_from_slice(&(p.message.len() as u32).to_be_bytes());
            out.extend_from_slice(&p.channel);
            out.extend_from_slice(&p.message);
        }
        Body::FailoverAuthRequest | Body::FailoverAuthAck | Body::MfStart => {}
        Body::Update(u) => {
            out.extend_from_slice(&u.config_epoch.to_be_bytes());
            out.extend_from_slice(u.name.as_bytes());
            out.extend_from_slice(u.slots.as_bytes());
        }
        Body::Module(m) => {
            out.extend_from_slice(&m.module_id.to_le_bytes());
            // Fits in u32: encoded_len bounded the whole frame by u32::MAX.
            out.extend_from_slice(&(m.payload.len() as u32).to_be_bytes());
            out.push(m.module_type);
            out.extend_from_slice(&m.payload);
        }
        Body::Unknown(u) => out.extend_from_slice(&u.data),
    }
}

fn write_gossip_entry(e: &GossipEntry, out: &mut Vec<u8>) {
    // Assembled on the stack and appended once: one length check instead of nine.
    let mut b = [0u8; GOSSIP_ENTRY_LEN];
    b[0..40].copy_from_slice(e.name.as_bytes());
    b[40..44].copy_from_slice(&e.ping_sent_secs.to_be_bytes());
    b[44..48].copy_from_slice(&e.pong_received_secs.to_be_bytes());
    b[48..94].copy_from_slice(e.ip.as_bytes());
    b[94..96].copy_from_slice(&e.port.to_be_bytes());
    b[96..98].copy_from_slice(&e.cport.to_be_bytes());
    b[98..100].copy_from_slice(&e.flags.to_be_bytes());
    b[100..102].copy_from_slice(&e.pport.to_be_bytes());
    b[102..104].copy_from_slice(&e.reserved.to_be_bytes());
    out.extend_from_slice(&b);
}

fn write_ext(ext: &PingExt, out: &mut Vec<u8>) {
    // Fits in u32 (below 64 KiB): encoded_len checked every extension.
    out.extend_from_slice(&(ext.wire_len() as u32).to_be_bytes());
    out.extend_from_slice(&ext.ext_type().to_be_bytes());
    let reserved = match ext {
        PingExt::Raw(raw) => raw.reserved,
        _ => 0,
    };
    out.extend_from_slice(&reserved.to_be_bytes());
    match ext {
        PingExt::Hostname(s)
        | PingExt::HumanNodename(s)
        | PingExt::ClientIpv4(s)
        | PingExt::ClientIpv6(s) => out.extend_from_slice(s.payload()),
        PingExt::ForgottenNode { name, ttl_secs } => {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(&ttl_secs.to_be_bytes());
        }
        PingExt::ShardId(id) => out.extend_from_slice(id.as_bytes()),
        PingExt::Raw(raw) => out.extend_from_slice(&raw.payload),
    }
}

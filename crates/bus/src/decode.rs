//! Decoding one whole frame, with the validation real nodes apply (facts sheet §2, §4, §6).

use crate::consts::*;
use crate::ext::PingExt;
use crate::fields::{IpField, NodeName};
use crate::message::*;
use ferrocluster_slot::SlotSet;

/// Why a frame was rejected. Every variant names what was wrong.
///
/// Two classes, as real nodes treat them (facts sheet §2):
/// * framing lost ([`DecodeError::framing_lost`] is true): the byte stream cannot be split
///   into frames any more; the host MUST close the link.
/// * this frame only: the frame is dropped and the link is kept (real nodes drop such
///   messages silently).
///
/// Decoding never changes any state; a rejected frame has no effect.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// Fewer than the 8 bytes of `sig` and `totlen` (only [`crate::decode`] of a too-short
    /// slice; the framer waits for more bytes instead). Framing lost.
    #[error("frame of {len} bytes is shorter than the 8-byte prefix (sig, totlen)")]
    Truncated {
        /// Bytes given.
        len: usize,
    },
    /// The first 4 bytes are not `RCmb`. Framing lost.
    #[error("bad signature {found:02x?}, expected \"RCmb\"")]
    BadSignature {
        /// The bytes from the frame start up to and including the first one that differs
        /// from `RCmb` (the same however the stream was split).
        found: Vec<u8>,
    },
    /// [`crate::decode`] was given a slice whose length is not the frame's `totlen`.
    /// Framing lost.
    #[error("totlen {totlen} does not match the {len} bytes given")]
    TotlenMismatch {
        /// The `totlen` field.
        totlen: u32,
        /// Bytes given.
        len: usize,
    },
    /// `totlen` below the minimum: 16 for a light message, 2256 for a full-header one
    /// ("Bad message length or signature received on the Cluster bus"). Framing lost.
    #[error("totlen {totlen} is below the minimum {min}")]
    TotlenTooSmall {
        /// The `totlen` field.
        totlen: u32,
        /// The minimum for this header form.
        min: u32,
    },
    /// `totlen` above the [`crate::FrameDecoder`]'s configured maximum. Framing lost.
    #[error("totlen {totlen} exceeds the maximum frame length {max}")]
    FrameTooLarge {
        /// The `totlen` field.
        totlen: u32,
        /// The configured maximum.
        max: u32,
    },
    /// The light bit (0x8000) on a type that has no light form (§2). Frame dropped.
    #[error("type code {code:#06x} has the light bit but type {msg_type:?} has no light form")]
    LightNotSupported {
        /// The raw type field.
        code: u16,
        /// The type without the light bit.
        msg_type: MessageType,
    },
    /// `ver` is not 1 (§2). Frame dropped.
    #[error("protocol version {ver} is not 1")]
    BadVersion {
        /// The `ver` field.
        ver: u16,
    },
    /// `totlen` differs from the length the type's layout gives (§2, §4). `expected` is the
    /// length accounted for by the fields read so far (the fixed part, `count` gossip entries,
    /// the walked extensions, or the PUBLISH/MODULE length fields). Frame dropped.
    #[error("{msg_type:?} frame has totlen {totlen} but its layout gives {expected} bytes")]
    LengthMismatch {
        /// The message type.
        msg_type: MessageType,
        /// The `totlen` field.
        totlen: u32,
        /// The length computed from the layout.
        expected: u64,
    },
    /// Ping extension number `index` does not fit its 8-byte header before the end of the
    /// frame (real nodes would read past the message). Frame dropped.
    #[error("ping extension {index} at offset {offset} has no room for its 8-byte header")]
    ExtensionTruncated {
        /// Position of the extension in the walk, from 0.
        index: u16,
        /// Its offset in the frame.
        offset: usize,
    },
    /// Ping extension length not a multiple of 8 ("without proper padding", §4). Frame
    /// dropped.
    #[error("ping extension {index} has length {len}, not a multiple of 8")]
    ExtensionPadding {
        /// Position of the extension in the walk.
        index: u16,
        /// Its `length` field.
        len: u32,
    },
    /// Ping extension length below 8 (a zero length). Real nodes let it pass and walk the
    /// same extension again; it can never end exactly at `totlen` inside the frame. Frame
    /// dropped.
    #[error("ping extension {index} has length {len}, below its 8-byte header")]
    ExtensionTooShort {
        /// Position of the extension in the walk.
        index: u16,
        /// Its `length` field.
        len: u32,
    },
    /// Ping extension length of 64 KiB or more: real nodes truncate it to 16 bits while
    /// validating (§4 quirk), so such a frame is dropped by them or read past its end.
    /// Frame dropped.
    #[error("ping extension {index} has length {len}, 64 KiB or more")]
    ExtensionTooLong {
        /// Position of the extension in the walk.
        index: u16,
        /// Its `length` field.
        len: u32,
    },
    /// Ping extension longer than the bytes left in the frame ("extension data that exceeds
    /// total packet length"). Frame dropped.
    #[error("ping extension {index} has length {len} but only {remaining} bytes remain")]
    ExtensionOverrun {
        /// Position of the extension in the walk.
        index: u16,
        /// Its `length` field.
        len: u32,
        /// Bytes from the extension to the end of the frame.
        remaining: usize,
    },
}

impl DecodeError {
    /// True when the byte stream can no longer be split into frames: the host MUST close
    /// the link (facts sheet §2 step 2). False when only this frame is bad: drop it, keep
    /// the link.
    pub fn framing_lost(&self) -> bool {
        matches!(
            self,
            DecodeError::Truncated { .. }
                | DecodeError::BadSignature { .. }
                | DecodeError::TotlenMismatch { .. }
                | DecodeError::TotlenTooSmall { .. }
                | DecodeError::FrameTooLarge { .. }
        )
    }
}

/// Decodes one whole frame: `frame` must be exactly `totlen` bytes, starting with `RCmb`.
///
/// Validation follows real nodes (V8 `clusterReadHandler` + `clusterIsValidPacket`,
/// facts sheet §2): signature; `totlen` ≥ 16 (light) or ≥ 2256 (full); the light bit only on
/// PUBLISH, PUBLISHSHARD and MODULE; `ver` = 1; `totlen` equal to the length the type's
/// layout gives (PING/PONG/MEET: 2256 + 104·count + the extensions walked when EXT_DATA is
/// set; FAIL 2296; UPDATE 4352; AUTH_REQUEST/ACK and MFSTART 2256; PUBLISH(SHARD)
/// 2256 + 8 + channel + message, light 24 + …; MODULE 2256 + 13 + len, light 29 + …);
/// any length for types ≥ 11.
///
/// Where real nodes accept a frame only to read past its end, this decoder rejects it:
/// extension headers past the end, extension lengths of 0 or ≥ 64 KiB, and PUBLISH/MODULE
/// lengths whose 32-bit sum wraps around. A light MODULE is accepted (Valkey 8.1+), though
/// Valkey 8.0 drops it.
///
/// Not kept (re-encoding writes zero): the `count` and `extensions` fields of known types
/// other than PING/PONG/MEET, and the `extensions` field of a PING/PONG/MEET without
/// EXT_DATA (real nodes ignore them for validation). Everything else round-trips exactly
/// through [`crate::encode`].
///
/// # Errors
/// A [`DecodeError`] naming the first check that failed. Never panics.
pub fn decode(frame: &[u8]) -> Result<Message, DecodeError> {
    let totlen = check_prefix(frame)?;
    if totlen as usize != frame.len() {
        return Err(DecodeError::TotlenMismatch {
            totlen,
            len: frame.len(),
        });
    }
    if totlen < MIN_LIGHT_TOTLEN {
        return Err(DecodeError::TotlenTooSmall {
            totlen,
            min: MIN_LIGHT_TOTLEN,
        });
    }
    let code = be16(frame, 12);
    let light = code & LIGHT_TYPE_BIT != 0;
    let msg_type = MessageType::from_code(code);
    if !light && totlen < MIN_FULL_TOTLEN {
        return Err(DecodeError::TotlenTooSmall {
            totlen,
            min: MIN_FULL_TOTLEN,
        });
    }
    if light && !msg_type.supports_light_header() {
        return Err(DecodeError::LightNotSupported { code, msg_type });
    }
    let ver = be16(frame, 8);
    if ver != PROTOCOL_VERSION {
        return Err(DecodeError::BadVersion { ver });
    }
    if light {
        let header = Header::Light(LightHeader {
            reserved: [frame[10], frame[11], frame[14], frame[15]],
        });
        let body = decode_data(frame, LIGHT_HEADER_LEN, msg_type)?;
        return Ok(Message { header, body });
    }
    let header = decode_full_header(frame);
    let body = match msg_type {
        MessageType::Ping => Body::Ping(decode_gossip(frame, &header, msg_type)?),
        MessageType::Pong => Body::Pong(decode_gossip(frame, &header, msg_type)?),
        MessageType::Meet => Body::Meet(decode_gossip(frame, &header, msg_type)?),
        MessageType::Unknown(msg_type) => Body::Unknown(UnknownMsg {
            msg_type,
            count: be16(frame, 14),
            extensions: be16(frame, 2214),
            data: frame[HEADER_LEN..].to_vec(),
        }),
        other => decode_data(frame, HEADER_LEN, other)?,
    };
    Ok(Message {
        header: Header::Full(Box::new(header)),
        body,
    })
}

/// Checks the 8-byte prefix (signature, then room for `totlen`) and returns `totlen`.
fn check_prefix(frame: &[u8]) -> Result<u32, DecodeError> {
    check_signature(frame)?;
    if frame.len() < 8 {
        return Err(DecodeError::Truncated { len: frame.len() });
    }
    Ok(be32(frame, 4))
}

/// Checks the bytes present of the signature (up to 4): stream framing fails at the first
/// wrong byte.
pub(crate) fn check_signature(buf: &[u8]) -> Result<(), DecodeError> {
    match buf.iter().zip(SIGNATURE).position(|(&b, s)| b != s) {
        Some(i) => Err(DecodeError::BadSignature {
            found: buf[..=i].to_vec(),
        }),
        None => Ok(()),
    }
}

/// The fields of the full header; `frame` has at least [`HEADER_LEN`] bytes.
fn decode_full_header(frame: &[u8]) -> FullHeader {
    let replicaof = name_at(frame, 2128);
    FullHeader {
        port: be16(frame, 10),
        current_epoch: be64(frame, 16),
        config_epoch: be64(frame, 24),
        offset: be64(frame, 32),
        sender: name_at(frame, 40),
        myslots: slots_at(frame, 80),
        replicaof: (!replicaof.is_zero()).then_some(replicaof),
        myip: IpField(array_at(frame, 2168)),
        reserved: array_at(frame, 2216),
        pport: be16(frame, 2246),
        cport: be16(frame, 2248),
        flags: be16(frame, 2250),
        state: frame[2252],
        mflags: array_at(frame, 2253),
    }
}

/// The gossip section and ping extensions of PING/PONG/MEET (§4, §4.1, §6.1).
fn decode_gossip(
    frame: &[u8],
    header: &FullHeader,
    msg_type: MessageType,
) -> Result<Gossip, DecodeError> {
    let totlen = frame.len();
    let count = usize::from(be16(frame, 14));
    let mut pos = HEADER_LEN + GOSSIP_ENTRY_LEN * count;
    if pos > totlen {
        return Err(mismatch(msg_type, totlen, pos));
    }
    let entries = frame[HEADER_LEN..pos]
        .chunks_exact(GOSSIP_ENTRY_LEN)
        .map(decode_gossip_entry)
        .collect();
    let mut extensions = Vec::new();
    if header.ext_data() {
        let n = be16(frame, 2214);
        extensions.reserve(usize::from(n).min((totlen - pos) / EXT_HEADER_LEN));
        for index in 0..n {
            if totlen - pos < EXT_HEADER_LEN {
                return Err(DecodeError::ExtensionTruncated { index, offset: pos });
            }
            let len = be32(frame, pos);
            // Real nodes check the 16-bit truncated length for padding first.
            if !(len as u16).is_multiple_of(8) {
                return Err(DecodeError::ExtensionPadding { index, len });
            }
            if len > u32::from(u16::MAX) {
                return Err(DecodeError::ExtensionTooLong { index, len });
            }
            if (len as usize) < EXT_HEADER_LEN {
                return Err(DecodeError::ExtensionTooShort { index, len });
            }
            let remaining = totlen - pos;
            if len as usize > remaining {
                return Err(DecodeError::ExtensionOverrun {
                    index,
                    len,
                    remaining,
                });
            }
            let end = pos + len as usize;
            extensions.push(PingExt::from_wire(
                be16(frame, pos + 4),
                be16(frame, pos + 6),
                &frame[pos + EXT_HEADER_LEN..end],
            ));
            pos = end;
        }
    }
    if pos != totlen {
        return Err(mismatch(msg_type, totlen, pos));
    }
    Ok(Gossip {
        entries,
        extensions,
    })
}

fn decode_gossip_entry(e: &[u8]) -> GossipEntry {
    GossipEntry {
        name: name_at(e, 0),
        ping_sent_secs: be32(e, 40),
        pong_received_secs: be32(e, 44),
        ip: IpField(array_at(e, 48)),
        port: be16(e, 94),
        cport: be16(e, 96),
        flags: be16(e, 98),
        pport: be16(e, 100),
        reserved: be16(e, 102),
    }
}

/// The data section of every type but PING/PONG/MEET and unknown types, starting at
/// `start` (2256 for a full header, 16 for a light one).
fn decode_data(frame: &[u8], start: usize, msg_type: MessageType) -> Result<Body, DecodeError> {
    let totlen = frame.len();
    let exact = |len: usize| {
        if totlen == len {
            Ok(())
        } else {
            Err(mismatch(msg_type, totlen, len))
        }
    };
    match msg_type {
        MessageType::Fail => {
            exact(FAIL_LEN)?;
            Ok(Body::Fail {
                about: name_at(frame, start),
            })
        }
        MessageType::FailoverAuthRequest => exact(HEADER_LEN).map(|()| Body::FailoverAuthRequest),
        MessageType::FailoverAuthAck => exact(HEADER_LEN).map(|()| Body::FailoverAuthAck),
        MessageType::MfStart => exact(HEADER_LEN).map(|()| Body::MfStart),
        MessageType::Update => {
            exact(UPDATE_LEN)?;
            Ok(Body::Update(Box::new(Update {
                config_epoch: be64(frame, start),
                name: name_at(frame, start + 8),
                slots: slots_at(frame, start + 8 + NAME_LEN),
            })))
        }
        MessageType::Publish | MessageType::PublishShard => {
            let fixed = start + 8;
            if totlen < fixed {
                return Err(mismatch(msg_type, totlen, fixed));
            }
            let channel_len = be32(frame, start) as usize;
            let message_len = be32(frame, start + 4) as usize;
            let expected = fixed as u64 + channel_len as u64 + message_len as u64;
            if expected != totlen as u64 {
                return Err(DecodeError::LengthMismatch {
                    msg_type,
                    totlen: totlen as u32,
                    expected,
                });
            }
            let (channel, message) = frame[fixed..].split_at(channel_len);
            let publish = Publish {
                channel: channel.to_vec(),
                message: message.to_vec(),
            };
            Ok(if msg_type == MessageType::Publish {
                Body::Publish(publish)
            } else {
                Body::PublishShard(publish)
            })
        }
        MessageType::Module => {
            let fixed = start + 13;
            if totlen < fixed {
                return Err(mismatch(msg_type, totlen, fixed));
            }
            let len = be32(frame, start + 8);
            let expected = fixed as u64 + u64::from(len);
            if expected != totlen as u64 {
                return Err(DecodeError::LengthMismatch {
                    msg_type,
                    totlen: totlen as u32,
                    expected,
                });
            }
            Ok(Body::Module(ModuleMsg {
                module_id: u64::from_le_bytes(array_at(frame, start)),
                module_type: frame[start + 12],
                payload: frame[fixed..].to_vec(),
            }))
        }
        // PING/PONG/MEET and unknown types are decoded by the caller; a light frame never
        // reaches here with them (checked before).
        MessageType::Ping | MessageType::Pong | MessageType::Meet | MessageType::Unknown(_) => {
            Err(DecodeError::LightNotSupported {
                code: msg_type.code() | LIGHT_TYPE_BIT,
                msg_type,
            })
        }
    }
}

fn mismatch(msg_type: MessageType, totlen: usize, expected: usize) -> DecodeError {
    DecodeError::LengthMismatch {
        msg_type,
        totlen: totlen as u32,
        expected: expected as u64,
    }
}

// Field readers. Callers check that `buf` holds the field: every offset used is below the
// length checked before (8 bytes for the prefix, 16 for a light header, 2256 for a full one,
// the layout lengths for data sections).

fn array_at<const N: usize>(buf: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&buf[at..at + N]);
    out
}

pub(crate) fn be16(buf: &[u8], at: usize) -> u16 {
    u16::from_be_bytes(array_at(buf, at))
}

pub(crate) fn be32(buf: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(array_at(buf, at))
}

fn be64(buf: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(array_at(buf, at))
}

fn name_at(buf: &[u8], at: usize) -> NodeName {
    NodeName(array_at(buf, at))
}

fn slots_at(buf: &[u8], at: usize) -> SlotSet {
    SlotSet::from_bytes(&array_at(buf, at))
}

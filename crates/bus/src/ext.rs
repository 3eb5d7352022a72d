//! Ping extensions carried by PING/PONG/MEET after the gossip entries (facts sheet §6).

use crate::consts::{ext_type, EXT_HEADER_LEN, NAME_LEN};
use crate::fields::{until_nul, NodeName};
use std::fmt;

/// One ping extension (facts sheet §6.1, §6.2).
///
/// On the wire: `length` u32 (8-byte extension header included, a multiple of 8),
/// `type` u16, a u16 that is zero, then the payload zero-padded to a multiple of 8.
/// Decoding yields the typed variants only for the exact form real nodes write; anything
/// else (an unknown type, non-zero reserved bytes, a fixed-size payload of another size) is
/// kept as [`PingExt::Raw`] so that encoding gives back the same bytes. Receivers skip
/// unknown types (V8 logs "Received unknown extension type").
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum PingExt {
    /// Type 0, HOSTNAME: the sender's `cluster-announce-hostname`.
    Hostname(ExtString),
    /// Type 1, HUMAN_NODENAME: the sender's `cluster-announce-human-nodename`.
    HumanNodename(ExtString),
    /// Type 2, FORGOTTEN_NODE: a node the sender has banned (CLUSTER FORGET), 56 bytes.
    ForgottenNode {
        /// The forgotten node's name.
        name: NodeName,
        /// Seconds the ban has left (60 right after CLUSTER FORGET by default).
        ttl_secs: u64,
    },
    /// Type 3, SHARDID: the sender's shard ID, 48 bytes.
    ShardId(NodeName),
    /// Type 4, CLIENT_IPV4: the sender's `cluster-announce-client-ipv4` (Valkey 8.0+).
    ClientIpv4(ExtString),
    /// Type 5, CLIENT_IPV6: the sender's `cluster-announce-client-ipv6` (Valkey 8.0+).
    ClientIpv6(ExtString),
    /// Any other extension, kept raw.
    Raw(RawExt),
}

impl PingExt {
    /// The extension's type code (§6.2).
    pub fn ext_type(&self) -> u16 {
        match self {
            PingExt::Hostname(_) => ext_type::HOSTNAME,
            PingExt::HumanNodename(_) => ext_type::HUMAN_NODENAME,
            PingExt::ForgottenNode { .. } => ext_type::FORGOTTEN_NODE,
            PingExt::ShardId(_) => ext_type::SHARD_ID,
            PingExt::ClientIpv4(_) => ext_type::CLIENT_IPV4,
            PingExt::ClientIpv6(_) => ext_type::CLIENT_IPV6,
            PingExt::Raw(raw) => raw.ext_type,
        }
    }

    /// Bytes this extension takes on the wire, its 8-byte header included (the `length`
    /// field). Typed variants always give a multiple of 8; a [`RawExt`] whose payload is
    /// not one cannot be encoded.
    pub fn wire_len(&self) -> usize {
        EXT_HEADER_LEN
            + match self {
                PingExt::Hostname(s)
                | PingExt::HumanNodename(s)
                | PingExt::ClientIpv4(s)
                | PingExt::ClientIpv6(s) => s.payload().len(),
                PingExt::ForgottenNode { .. } => NAME_LEN + 8,
                PingExt::ShardId(_) => NAME_LEN,
                PingExt::Raw(raw) => raw.payload.len(),
            }
    }

    /// Builds the typed extension from its wire parts, or [`PingExt::Raw`] when the
    /// typed form would not re-encode to the same bytes. `payload.len()` is a multiple of 8
    /// (the decoder checked it).
    pub(crate) fn from_wire(ext_type: u16, reserved: u16, payload: &[u8]) -> PingExt {
        let raw = || {
            PingExt::Raw(RawExt {
                ext_type,
                reserved,
                payload: payload.to_vec(),
            })
        };
        if reserved != 0 {
            return raw();
        }
        let string = || ExtString(payload.to_vec());
        match ext_type {
            ext_type::HOSTNAME => PingExt::Hostname(string()),
            ext_type::HUMAN_NODENAME => PingExt::HumanNodename(string()),
            ext_type::CLIENT_IPV4 => PingExt::ClientIpv4(string()),
            ext_type::CLIENT_IPV6 => PingExt::ClientIpv6(string()),
            ext_type::FORGOTTEN_NODE if payload.len() == NAME_LEN + 8 => {
                let (name, ttl) = payload.split_at(NAME_LEN);
                match (NodeName::from_slice(name), <[u8; 8]>::try_from(ttl)) {
                    (Some(name), Ok(ttl)) => PingExt::ForgottenNode {
                        name,
                        ttl_secs: u64::from_be_bytes(ttl),
                    },
                    _ => raw(),
                }
            }
            ext_type::SHARD_ID if payload.len() == NAME_LEN => {
                match NodeName::from_slice(payload) {
                    Some(id) => PingExt::ShardId(id),
                    None => raw(),
                }
            }
            _ => raw(),
        }
    }
}

/// The payload of a string extension (HOSTNAME, HUMAN_NODENAME, CLIENT_IPV4/IPV6):
/// the text, a NUL, zero padding to a multiple of 8 (facts sheet §6.1).
///
/// The exact payload bytes are kept. [`ExtString::new`] builds the form real nodes write
/// (`8 + align8(len + 1)` bytes with the header); [`ExtString::value`] reads up to the first
/// NUL as C code does.
///
/// ```
/// use ferrocluster_bus::ExtString;
/// let h = ExtString::new(b"node-22001.example");
/// assert_eq!(h.payload().len(), 24); // 18 + NUL, padded: extension length 32 as captured
/// assert_eq!(h.as_str(), Some("node-22001.example"));
/// ```
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct ExtString(Vec<u8>);

impl ExtString {
    /// The canonical payload for `value`: the bytes, a NUL, zeros up to a multiple of 8.
    /// A NUL inside `value` ends the text as receivers read it.
    pub fn new(value: &[u8]) -> ExtString {
        let padded = (value.len() + 1).div_ceil(8) * 8;
        let mut payload = Vec::with_capacity(padded);
        payload.extend_from_slice(value);
        payload.resize(padded, 0);
        ExtString(payload)
    }

    /// Wraps raw payload bytes as received; `None` unless the length is a multiple of 8
    /// (every extension's length is).
    pub fn from_payload(payload: Vec<u8>) -> Option<ExtString> {
        payload
            .len()
            .is_multiple_of(8)
            .then_some(ExtString(payload))
    }

    /// The payload bytes exactly as on the wire (padding included).
    pub fn payload(&self) -> &[u8] {
        &self.0
    }

    /// The text before the first NUL (the whole payload if it has none).
    pub fn value(&self) -> &[u8] {
        until_nul(&self.0)
    }

    /// [`ExtString::value`] as UTF-8 text, if it is.
    pub fn as_str(&self) -> Option<&str> {
        std::str::from_utf8(self.value()).ok()
    }
}

impl fmt::Debug for ExtString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == ExtString::new(self.value()) {
            write!(f, "ExtString(\"{}\")", self.value().escape_ascii())
        } else {
            write!(f, "ExtString(raw \"{}\")", self.0.escape_ascii())
        }
    }
}

/// An extension kept as raw bytes: unknown type, or a known type in a form the typed
/// variants of [`PingExt`] do not reproduce exactly.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct RawExt {
    /// The type code (§6.2); Valkey 9.x adds types ≥ 6.
    pub ext_type: u16,
    /// The u16 after the type, zero from every real sender.
    pub reserved: u16,
    /// The payload after the 8-byte extension header; its length must be a multiple of 8
    /// for the extension to be encoded.
    pub payload: Vec<u8>,
}

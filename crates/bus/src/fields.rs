//! Raw fixed-size fields: node names (40 bytes) and IP strings (46 bytes).
//!
//! The bus is lenient: these keep the exact bytes. Validation of node IDs
//! (40 × `[a-z0-9]`, facts sheet §1.1) belongs to the `topology` crate's `NodeId`.

use crate::consts::{IP_LEN, NAME_LEN};
use std::fmt;

/// A 40-byte node name (node ID) or shard ID exactly as on the wire (facts sheet §1.1, §3).
///
/// Any bytes are kept; [`NodeName::as_str`] views them as text when they are UTF-8.
///
/// ```
/// use ferrocluster_bus::NodeName;
/// let n = NodeName::from_slice(b"4ac9751fe685983989b445845514090e6915e16b").unwrap();
/// assert_eq!(n.as_str(), Some("4ac9751fe685983989b445845514090e6915e16b"));
/// assert!(!n.is_zero());
/// assert!(NodeName::ZERO.is_zero());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeName(pub [u8; NAME_LEN]);

impl NodeName {
    /// 40 zero bytes: what a primary sends in `replicaof` (facts sheet §3).
    pub const ZERO: NodeName = NodeName([0; NAME_LEN]);

    /// Wraps 40 raw bytes.
    pub const fn new(bytes: [u8; NAME_LEN]) -> NodeName {
        NodeName(bytes)
    }

    /// Copies a slice of exactly 40 bytes; `None` for any other length.
    pub fn from_slice(bytes: &[u8]) -> Option<NodeName> {
        <[u8; NAME_LEN]>::try_from(bytes).ok().map(NodeName)
    }

    /// The 40 raw bytes.
    pub const fn as_bytes(&self) -> &[u8; NAME_LEN] {
        &self.0
    }

    /// The name as text, if the 40 bytes are UTF-8 (real IDs are lowercase hex).
    pub fn as_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
    }

    /// True when all 40 bytes are zero (the wire form of "no primary").
    pub fn is_zero(&self) -> bool {
        self.0.iter().all(|&b| b == 0)
    }
}

impl Default for NodeName {
    /// [`NodeName::ZERO`].
    fn default() -> NodeName {
        NodeName::ZERO
    }
}

impl From<[u8; NAME_LEN]> for NodeName {
    fn from(bytes: [u8; NAME_LEN]) -> NodeName {
        NodeName(bytes)
    }
}

impl fmt::Display for NodeName {
    /// Printable ASCII as is, other bytes escaped (`\x00`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0.escape_ascii(), f)
    }
}

impl fmt::Debug for NodeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NodeName(\"{self}\")")
    }
}

/// A 46-byte IP field (`myip` of the header, `ip` of a gossip entry) exactly as on the wire:
/// NUL-padded text, all zero when unset (facts sheet §3, §4.1).
///
/// ```
/// use ferrocluster_bus::IpField;
/// let ip = IpField::from_text(b"127.0.0.1").unwrap();
/// assert_eq!(ip.as_str(), Some("127.0.0.1"));
/// assert!(IpField::UNSET.is_unset());
/// assert!(IpField::from_text(&[b'1'; 46]).is_none()); // no room for the NUL
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpField(pub [u8; IP_LEN]);

impl IpField {
    /// 46 zero bytes: "no announced IP, use the connection's peer address".
    pub const UNSET: IpField = IpField([0; IP_LEN]);

    /// Builds the NUL-padded field from text of at most 45 bytes; `None` if longer.
    pub fn from_text(text: &[u8]) -> Option<IpField> {
        if text.len() >= IP_LEN {
            return None;
        }
        let mut bytes = [0u8; IP_LEN];
        bytes[..text.len()].copy_from_slice(text);
        Some(IpField(bytes))
    }

    /// The 46 raw bytes.
    pub const fn as_bytes(&self) -> &[u8; IP_LEN] {
        &self.0
    }

    /// The text before the first NUL (all 46 bytes if there is none), as C code reads it.
    pub fn text(&self) -> &[u8] {
        until_nul(&self.0)
    }

    /// [`IpField::text`] as UTF-8 text, if it is.
    pub fn as_str(&self) -> Option<&str> {
        std::str::from_utf8(self.text()).ok()
    }

    /// True when the text is empty (first byte NUL): receivers then use the peer address
    /// of the connection (V8 `nodeIp2String`).
    pub fn is_unset(&self) -> bool {
        self.0[0] == 0
    }
}

impl Default for IpField {
    fn default() -> IpField {
        IpField::UNSET
    }
}

impl fmt::Debug for IpField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tail_zero = self.0[self.text().len()..].iter().all(|&b| b == 0);
        if tail_zero {
            write!(f, "IpField(\"{}\")", self.text().escape_ascii())
        } else {
            write!(f, "IpField(raw \"{}\")", self.0.escape_ascii())
        }
    }
}

/// The bytes of `buf` before its first NUL, or all of it.
pub(crate) fn until_nul(buf: &[u8]) -> &[u8] {
    match buf.iter().position(|&b| b == 0) {
        Some(i) => &buf[..i],
        None => buf,
    }
}

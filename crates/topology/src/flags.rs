//! Node flags: the 16-bit flag word with the exact wire bit values (facts sheet §5.1).

use std::fmt;
use std::ops::{BitAnd, BitOr, BitOrAssign};

/// A node's flag word. The bit values are exactly the cluster bus ones (header `flags` at
/// offset 2250 and the gossip entry `flags`, facts sheet §5.1), so the node crate converts
/// wire <-> model with [`NodeFlags::bits`] / [`NodeFlags::from_bits`] and nothing else.
///
/// Unknown bits are kept verbatim (a node learned from gossip is created with the gossiped
/// flag word as is, §5.1). Only `myself master slave fail? fail handshake noaddr nofailover`
/// have text names ([`NodeFlags::names`], the CLUSTER NODES / nodes.conf form).
///
/// ```
/// use ferrocluster_topology::NodeFlags;
/// let f = NodeFlags::MYSELF | NodeFlags::PRIMARY;
/// assert_eq!(f.bits(), 0x0011);
/// assert_eq!(f.names(), "myself,master");
/// assert_eq!(NodeFlags::empty().names(), "noflags");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NodeFlags(u16);

impl NodeFlags {
    /// 0x0001 PRIMARY (`master`).
    pub const PRIMARY: NodeFlags = NodeFlags(0x0001);
    /// 0x0002 REPLICA (`slave`).
    pub const REPLICA: NodeFlags = NodeFlags(0x0002);
    /// 0x0004 PFAIL (`fail?`): possibly failing, local timeout.
    pub const PFAIL: NodeFlags = NodeFlags(0x0004);
    /// 0x0008 FAIL (`fail`): agreed failure.
    pub const FAIL: NodeFlags = NodeFlags(0x0008);
    /// 0x0010 MYSELF (`myself`).
    pub const MYSELF: NodeFlags = NodeFlags(0x0010);
    /// 0x0020 HANDSHAKE (`handshake`): not yet identified, temporary random ID.
    pub const HANDSHAKE: NodeFlags = NodeFlags(0x0020);
    /// 0x0040 NOADDR (`noaddr`): address unknown.
    pub const NOADDR: NodeFlags = NodeFlags(0x0040);
    /// 0x0080 MEET: send MEET rather than PING when connecting. Never printed.
    pub const MEET: NodeFlags = NodeFlags(0x0080);
    /// 0x0100 MIGRATE_TO: valid replica-migration target. Never printed.
    pub const MIGRATE_TO: NodeFlags = NodeFlags(0x0100);
    /// 0x0200 NOFAILOVER (`nofailover`).
    pub const NOFAILOVER: NodeFlags = NodeFlags(0x0200);
    /// 0x0400 EXTENSIONS_SUPPORTED (V72/V8, set locally after receiving EXT_DATA).
    pub const EXTENSIONS_SUPPORTED: NodeFlags = NodeFlags(0x0400);
    /// 0x0800 LIGHT_HDR_SUPPORTED (V8; V9x name LIGHT_HDR_PUBLISH_SUPPORTED).
    pub const LIGHT_HDR_SUPPORTED: NodeFlags = NodeFlags(0x0800);
    /// 0x1000 LIGHT_HDR_MODULE_SUPPORTED = MULTI_MEET_SUPPORTED (V9x, Valkey 8.1).
    pub const LIGHT_HDR_MODULE_SUPPORTED: NodeFlags = NodeFlags(0x1000);
    /// 0x2000 MY_PRIMARY_FAIL (V9x).
    pub const MY_PRIMARY_FAIL: NodeFlags = NodeFlags(0x2000);

    /// The printable flags in the fixed CLUSTER NODES order (§5.1).
    const NAMED: [(NodeFlags, &'static str); 8] = [
        (NodeFlags::MYSELF, "myself"),
        (NodeFlags::PRIMARY, "master"),
        (NodeFlags::REPLICA, "slave"),
        (NodeFlags::PFAIL, "fail?"),
        (NodeFlags::FAIL, "fail"),
        (NodeFlags::HANDSHAKE, "handshake"),
        (NodeFlags::NOADDR, "noaddr"),
        (NodeFlags::NOFAILOVER, "nofailover"),
    ];

    /// No flags.
    pub const fn empty() -> NodeFlags {
        NodeFlags(0)
    }

    /// The raw 16-bit wire value.
    pub const fn bits(self) -> u16 {
        self.0
    }

    /// From a raw wire value; every bit (known or not) is kept.
    pub const fn from_bits(bits: u16) -> NodeFlags {
        NodeFlags(bits)
    }

    /// Whether every bit of `other` is set.
    pub const fn contains(self, other: NodeFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether any bit of `other` is set.
    pub const fn intersects(self, other: NodeFlags) -> bool {
        self.0 & other.0 != 0
    }

    /// Sets the bits of `other`.
    pub fn insert(&mut self, other: NodeFlags) {
        self.0 |= other.0;
    }

    /// Clears the bits of `other`.
    pub fn remove(&mut self, other: NodeFlags) {
        self.0 &= !other.0;
    }

    /// Sets or clears the bits of `other`.
    pub fn set(&mut self, other: NodeFlags, on: bool) {
        if on {
            self.insert(other)
        } else {
            self.remove(other)
        }
    }

    /// Whether no bit is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The comma-separated CLUSTER NODES / nodes.conf form (§5.1): `myself`, `master`,
    /// `slave`, `fail?`, `fail`, `handshake`, `noaddr`, `nofailover` in that order, or
    /// `noflags` when none of them is set. MEET, MIGRATE_TO and bits >= 10 are never printed.
    pub fn names(self) -> String {
        let mut out = String::new();
        for (flag, name) in NodeFlags::NAMED {
            if self.contains(flag) {
                if !out.is_empty() {
                    out.push(',');
                }
                out.push_str(name);
            }
        }
        if out.is_empty() {
            out.push_str("noflags");
        }
        out
    }

    /// One flag name as nodes.conf may carry it (§18.3): the printed names, V8's synonyms
    /// `primary`/`replica`, and `noflags` (no bit). `None` for any other word.
    pub fn from_name(name: &str) -> Option<NodeFlags> {
        match name {
            "primary" => Some(NodeFlags::PRIMARY),
            "replica" => Some(NodeFlags::REPLICA),
            "noflags" => Some(NodeFlags::empty()),
            _ => NodeFlags::NAMED
                .iter()
                .find(|(_, n)| *n == name)
                .map(|(f, _)| *f),
        }
    }
}

impl BitOr for NodeFlags {
    type Output = NodeFlags;
    fn bitor(self, rhs: NodeFlags) -> NodeFlags {
        NodeFlags(self.0 | rhs.0)
    }
}

impl BitOrAssign for NodeFlags {
    fn bitor_assign(&mut self, rhs: NodeFlags) {
        self.0 |= rhs.0;
    }
}

impl BitAnd for NodeFlags {
    type Output = NodeFlags;
    fn bitand(self, rhs: NodeFlags) -> NodeFlags {
        NodeFlags(self.0 & rhs.0)
    }
}

impl fmt::Debug for NodeFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NodeFlags({:#06x} {})", self.0, self.names())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_values_match_spec_table() {
        // §5.1 table, bit by bit.
        let expected: [(NodeFlags, u16); 14] = [
            (NodeFlags::PRIMARY, 0x0001),
            (NodeFlags::REPLICA, 0x0002),
            (NodeFlags::PFAIL, 0x0004),
            (NodeFlags::FAIL, 0x0008),
            (NodeFlags::MYSELF, 0x0010),
            (NodeFlags::HANDSHAKE, 0x0020),
            (NodeFlags::NOADDR, 0x0040),
            (NodeFlags::MEET, 0x0080),
            (NodeFlags::MIGRATE_TO, 0x0100),
            (NodeFlags::NOFAILOVER, 0x0200),
            (NodeFlags::EXTENSIONS_SUPPORTED, 0x0400),
            (NodeFlags::LIGHT_HDR_SUPPORTED, 0x0800),
            (NodeFlags::LIGHT_HDR_MODULE_SUPPORTED, 0x1000),
            (NodeFlags::MY_PRIMARY_FAIL, 0x2000),
        ];
        for (f, v) in expected {
            assert_eq!(f.bits(), v);
        }
    }

    #[test]
    fn names_follow_fixed_order_and_hide_unprinted_bits() {
        let all = NodeFlags::from_bits(0xffff);
        assert_eq!(
            all.names(),
            "myself,master,slave,fail?,fail,handshake,noaddr,nofailover"
        );
        let hidden = NodeFlags::MEET | NodeFlags::MIGRATE_TO | NodeFlags::LIGHT_HDR_SUPPORTED;
        assert_eq!(hidden.names(), "noflags");
        assert_eq!(
            (NodeFlags::PRIMARY | NodeFlags::FAIL).names(),
            "master,fail"
        );
        assert_eq!(NodeFlags::from_name("primary"), Some(NodeFlags::PRIMARY));
        assert_eq!(NodeFlags::from_name("fail?"), Some(NodeFlags::PFAIL));
        assert_eq!(NodeFlags::from_name("meet"), None);
    }
}

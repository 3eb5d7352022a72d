//! The model's `NodeFlags` (topology) and the codec's wire constants (bus) are defined in two
//! crates that do not depend on each other; gossip converts between them with `bits()` /
//! `from_bits()`, so every flag must carry the same bit value on both sides (facts sheet §5.1).

use ferrocluster_bus::node_flags as wire;
use ferrocluster_topology::NodeFlags;

#[test]
fn model_flags_have_the_wire_bit_values() {
    let pairs = [
        (NodeFlags::PRIMARY, wire::PRIMARY),
        (NodeFlags::REPLICA, wire::REPLICA),
        (NodeFlags::PFAIL, wire::PFAIL),
        (NodeFlags::FAIL, wire::FAIL),
        (NodeFlags::MYSELF, wire::MYSELF),
        (NodeFlags::HANDSHAKE, wire::HANDSHAKE),
        (NodeFlags::NOADDR, wire::NOADDR),
        (NodeFlags::MEET, wire::MEET),
        (NodeFlags::MIGRATE_TO, wire::MIGRATE_TO),
        (NodeFlags::NOFAILOVER, wire::NOFAILOVER),
        (NodeFlags::EXTENSIONS_SUPPORTED, wire::EXTENSIONS_SUPPORTED),
        (NodeFlags::LIGHT_HDR_SUPPORTED, wire::LIGHT_HDR_SUPPORTED),
        (
            NodeFlags::LIGHT_HDR_MODULE_SUPPORTED,
            wire::LIGHT_HDR_MODULE_SUPPORTED,
        ),
        (NodeFlags::MY_PRIMARY_FAIL, wire::MY_PRIMARY_FAIL),
    ];
    for (model, bits) in pairs {
        assert_eq!(model.bits(), bits, "{model:?}");
        assert_eq!(NodeFlags::from_bits(bits), model);
    }
}

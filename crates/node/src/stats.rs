//! Message counters for CLUSTER INFO (§19.4).

use ferrocluster_bus::MessageType;

/// Messages sent and received per type (index = type code 0..=10), plus frames dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MessageStats {
    /// Sent per type code.
    pub sent: [u64; 11],
    /// Received per type code (counted after a frame decodes).
    pub received: [u64; 11],
    /// Frames dropped as malformed (the link kept).
    pub dropped_frames: u64,
    /// Links closed because framing was lost.
    pub framing_lost: u64,
}

impl MessageStats {
    pub(crate) fn count(arr: &mut [u64; 11], t: MessageType) {
        if let Some(slot) = arr.get_mut(usize::from(t.code())) {
            *slot += 1;
        }
    }
}

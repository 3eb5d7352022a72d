//! A passive reader of bus frames on one direction of a simulated link.
//!
//! The simulator carries bytes, not messages; to count traffic by message type and to know
//! when a FAIL message reached a node (an invariant needs it), it follows the frame
//! boundaries of each stream: `sig[4] | totlen u32 BE | ver u16 | port u16 | type u16`
//! (facts sheet §2, §3), and for FAIL (type 3) the 40-byte node name at offset 2256 (§4.2).
//! It never changes the bytes. A stream that does not start with `RCmb` (a test injecting
//! garbage) stops the sniffer for that direction.

/// Offset of the `type` field (facts sheet §3).
const TYPE_OFFSET: usize = 12;
/// Bytes needed to read `type`.
const PREFIX_LEN: usize = 14;
/// FAIL data: the node name at 2256..2296 (facts sheet §4.2).
const FAIL_NAME_START: usize = 2256;
const FAIL_NAME_END: usize = 2296;
/// The FAIL message type (facts sheet §4).
pub const TYPE_FAIL: u16 = 3;
/// The FAILOVER_AUTH_REQUEST message type (facts sheet §4).
pub const TYPE_AUTH_REQUEST: u16 = 5;
/// The FAILOVER_AUTH_ACK message type (facts sheet §4).
pub const TYPE_AUTH_ACK: u16 = 6;
/// Header fields: currentEpoch at 16..24, sender at 40..80 (facts sheet §3).
const CURRENT_EPOCH_START: usize = 16;
const SENDER_START: usize = 40;
const SENDER_END: usize = 80;

/// A whole frame seen by the sniffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SniffedFrame {
    /// Message type (with the light bit, if set).
    pub msg_type: u16,
    /// Frame length in bytes.
    pub len: u64,
    /// Stream offset just past the frame's last byte.
    pub end: u64,
    /// For a FAIL message, the 40-byte name of the failing node.
    pub fail_name: Option<[u8; 40]>,
    /// For a full header (not light), the header's `currentEpoch` and `sender` (§3); kept
    /// for FAILOVER_AUTH_REQUEST and FAILOVER_AUTH_ACK frames only (vote accounting).
    pub epoch_sender: Option<(u64, [u8; 40])>,
}

/// Follows one byte stream's frame boundaries.
#[derive(Debug, Clone, Default)]
pub struct Sniffer {
    offset: u64,
    head: Vec<u8>,
    frame_len: Option<u64>,
    frame_seen: u64,
    lost: bool,
}

impl Sniffer {
    /// A sniffer at stream offset 0.
    pub fn new() -> Sniffer {
        Sniffer::default()
    }

    /// Whether the stream stopped looking like bus frames.
    pub fn is_lost(&self) -> bool {
        self.lost
    }

    /// Stream bytes seen so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Feeds the next bytes of the stream; appends every frame that completes to `out`.
    pub fn feed(&mut self, mut bytes: &[u8], out: &mut Vec<SniffedFrame>) {
        while !bytes.is_empty() && !self.lost {
            // Keep the first bytes of the frame (enough for the FAIL name).
            let want_head = match self.head_type() {
                Some(TYPE_FAIL) => FAIL_NAME_END,
                Some(TYPE_AUTH_REQUEST | TYPE_AUTH_ACK) => SENDER_END,
                Some(_) => PREFIX_LEN,
                None => PREFIX_LEN,
            };
            if self.head.len() < want_head {
                let take = (want_head - self.head.len()).min(bytes.len());
                if let Some(len) = self.frame_len {
                    // Never read past the frame into the next one.
                    let room = len.saturating_sub(self.frame_seen) as usize;
                    let take = take.min(room);
                    self.head.extend_from_slice(&bytes[..take]);
                    self.advance(take as u64, out);
                    bytes = &bytes[take..];
                    continue;
                }
                self.head.extend_from_slice(&bytes[..take]);
                self.advance(take as u64, out);
                bytes = &bytes[take..];
                continue;
            }
            let Some(len) = self.frame_len else {
                // Header complete but no length: cannot happen, advance() sets it at 8 bytes.
                self.lost = true;
                return;
            };
            let room = len.saturating_sub(self.frame_seen) as usize;
            let take = room.min(bytes.len());
            self.advance(take as u64, out);
            bytes = &bytes[take..];
        }
        if self.lost {
            self.offset += bytes.len() as u64;
        }
    }

    fn head_type(&self) -> Option<u16> {
        (self.head.len() >= PREFIX_LEN)
            .then(|| u16::from_be_bytes([self.head[TYPE_OFFSET], self.head[TYPE_OFFSET + 1]]))
    }

    fn advance(&mut self, n: u64, out: &mut Vec<SniffedFrame>) {
        self.offset += n;
        self.frame_seen += n;
        if self.frame_len.is_none() && self.head.len() >= 8 {
            if &self.head[..4] != b"RCmb" {
                self.lost = true;
                return;
            }
            let len = u32::from_be_bytes([self.head[4], self.head[5], self.head[6], self.head[7]]);
            if (len as usize) < PREFIX_LEN {
                self.lost = true;
                return;
            }
            self.frame_len = Some(u64::from(len));
        }
        if let Some(len) = self.frame_len {
            if self.frame_seen >= len {
                let msg_type = self.head_type().unwrap_or(u16::MAX);
                let fail_name =
                    (msg_type == TYPE_FAIL && self.head.len() >= FAIL_NAME_END).then(|| {
                        let mut name = [0u8; 40];
                        name.copy_from_slice(&self.head[FAIL_NAME_START..FAIL_NAME_END]);
                        name
                    });
                let epoch_sender = (matches!(msg_type, TYPE_AUTH_REQUEST | TYPE_AUTH_ACK)
                    && self.head.len() >= SENDER_END)
                    .then(|| {
                        let mut epoch = [0u8; 8];
                        epoch.copy_from_slice(
                            &self.head[CURRENT_EPOCH_START..CURRENT_EPOCH_START + 8],
                        );
                        let mut name = [0u8; 40];
                        name.copy_from_slice(&self.head[SENDER_START..SENDER_END]);
                        (u64::from_be_bytes(epoch), name)
                    });
                out.push(SniffedFrame {
                    msg_type,
                    len,
                    end: self.offset,
                    fail_name,
                    epoch_sender,
                });
                self.head.clear();
                self.frame_len = None;
                self.frame_seen = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(msg_type: u16, len: usize, name: u8) -> Vec<u8> {
        let mut f = vec![0u8; len];
        f[..4].copy_from_slice(b"RCmb");
        f[4..8].copy_from_slice(&(len as u32).to_be_bytes());
        f[8..10].copy_from_slice(&1u16.to_be_bytes());
        f[12..14].copy_from_slice(&msg_type.to_be_bytes());
        if len >= FAIL_NAME_END {
            f[FAIL_NAME_START..FAIL_NAME_END].fill(name);
        }
        f
    }

    #[test]
    fn frames_split_anywhere_are_found() {
        let mut stream = frame(0, 2256 + 104, 0);
        stream.extend(frame(TYPE_FAIL, 2296, b'x'));
        stream.extend(frame(1, 2256, 0));
        for step in [1usize, 7, 13, 100, 2295, 5000] {
            let mut s = Sniffer::new();
            let mut out = Vec::new();
            for chunk in stream.chunks(step) {
                s.feed(chunk, &mut out);
            }
            assert_eq!(out.len(), 3, "chunk size {step}");
            assert_eq!(out[0].msg_type, 0);
            assert_eq!(out[0].end, 2360);
            assert_eq!(out[1].msg_type, TYPE_FAIL);
            assert_eq!(out[1].fail_name, Some([b'x'; 40]));
            assert_eq!(out[1].end, 2360 + 2296);
            assert_eq!(out[2].msg_type, 1);
            assert_eq!(out[2].fail_name, None);
            assert!(!s.is_lost());
        }
    }

    #[test]
    fn auth_frames_carry_their_epoch_and_sender() {
        let mut f = frame(TYPE_AUTH_ACK, 2256, 0);
        f[16..24].copy_from_slice(&7u64.to_be_bytes());
        f[40..80].fill(b'q');
        let mut stream = frame(0, 2256, 0);
        stream.extend(f);
        for step in [1usize, 15, 79, 3000] {
            let mut s = Sniffer::new();
            let mut out = Vec::new();
            for chunk in stream.chunks(step) {
                s.feed(chunk, &mut out);
            }
            assert_eq!(out.len(), 2, "chunk size {step}");
            assert_eq!(out[0].epoch_sender, None);
            assert_eq!(out[1].epoch_sender, Some((7, [b'q'; 40])));
        }
    }

    #[test]
    fn garbage_stops_the_sniffer() {
        let mut s = Sniffer::new();
        let mut out = Vec::new();
        s.feed(b"GET / HTTP/1.1\r\n", &mut out);
        assert!(s.is_lost());
        assert!(out.is_empty());
    }
}

//! Splitting a link's byte stream into frames (facts sheet §2 "Stream framing").

use crate::consts::*;
use crate::decode::{be16, be32, check_signature, decode, DecodeError};
use crate::message::Message;

/// Buffer capacity (bytes) an empty `FrameDecoder` may keep between reads; more is freed.
const IDLE_CAPACITY: usize = 8 * 1024;

/// Splits the bytes of one bus link into whole frames, whatever the read sizes.
///
/// Frames are concatenated, each starting with `RCmb` and a u32 `totlen` counting the whole
/// frame (facts sheet §2). The framer checks what real nodes check before buffering a frame:
/// the signature, `totlen` ≥ 16 for a light message (type bit 0x8000, which needs 14 bytes to
/// see) or ≥ 2256 otherwise, and — unlike real nodes, which enforce no upper bound — `totlen`
/// ≤ the maximum frame length ([`DEFAULT_MAX_FRAME_LEN`], 64 MiB, unless configured). A
/// failure means framing is lost: the error has [`DecodeError::framing_lost`], every later
/// call returns it again, the buffer is released, and the host MUST close the link.
///
/// Memory: at most one partial frame (≤ the maximum frame length) plus the bytes of the
/// last [`FrameDecoder::push`] are buffered.
///
/// Host loop: after each read, `push` the bytes, then call [`FrameDecoder::next_message`]
/// until it returns `Ok(None)`:
///
/// ```
/// use ferrocluster_bus::{encode, Body, FrameDecoder, FullHeader, Message};
/// let frame = encode(&Message::full(FullHeader::default(), Body::MfStart));
/// let mut dec = FrameDecoder::new();
/// let mut got = Vec::new();
/// for chunk in frame.chunks(1000) {
///     dec.push(chunk);
///     loop {
///         match dec.next_message() {
///             Ok(Some(msg)) => got.push(msg),
///             Ok(None) => break,                     // need more bytes
///             Err(e) if e.framing_lost() => panic!("close the link: {e}"),
///             Err(_dropped) => continue,             // only this frame was bad
///         }
///     }
/// }
/// assert_eq!(got.len(), 1);
/// ```
#[derive(Debug, Clone)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    /// Bytes of `buf` before this index have been handed out.
    start: usize,
    max_frame_len: u32,
    lost: Option<DecodeError>,
}

impl Default for FrameDecoder {
    fn default() -> FrameDecoder {
        FrameDecoder::new()
    }
}

impl FrameDecoder {
    /// A framer with the default maximum frame length, [`DEFAULT_MAX_FRAME_LEN`] (64 MiB).
    pub fn new() -> FrameDecoder {
        FrameDecoder::with_max_frame_len(DEFAULT_MAX_FRAME_LEN)
    }

    /// A framer that treats any `totlen` above `max_frame_len` bytes as lost framing.
    /// Values below 2256 reject every full-header message; 4352 (an UPDATE) is the smallest
    /// that passes every fixed-size message type.
    pub fn with_max_frame_len(max_frame_len: u32) -> FrameDecoder {
        FrameDecoder {
            buf: Vec::new(),
            start: 0,
            max_frame_len,
            lost: None,
        }
    }

    /// The configured maximum frame length, in bytes.
    pub fn max_frame_len(&self) -> u32 {
        self.max_frame_len
    }

    /// Bytes received and not yet handed out as frames.
    pub fn buffered_len(&self) -> usize {
        self.buf.len() - self.start
    }

    /// Bytes of buffer the framer holds (its capacity), for memory accounting. Once every
    /// received byte has been handed out (a read returned `Ok(None)`), this is at most
    /// 8 KiB: an idle link keeps no larger buffer.
    pub fn buffer_capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// True once framing was lost; the link must be closed.
    pub fn is_lost(&self) -> bool {
        self.lost.is_some()
    }

    /// Appends bytes read from the link. Ignored once framing is lost.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.lost.is_some() {
            return;
        }
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        // An idle link keeps no more than this much buffer: a cluster of N nodes has about
        // 2N links per node, and each would otherwise keep the capacity of its largest PING
        // (tens of KiB with big gossip sections) for the rest of its life.
        if self.buf.is_empty() && self.buf.capacity() > IDLE_CAPACITY {
            self.buf = Vec::new();
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole frame (exactly `totlen` bytes), `Ok(None)` if more bytes are needed.
    ///
    /// Checks only framing (signature, `totlen` bounds); [`crate::decode`] does the rest.
    ///
    /// # Errors
    /// A framing-lost [`DecodeError`] (`BadSignature`, `TotlenTooSmall`, `FrameTooLarge`);
    /// it is returned again by every later call.
    pub fn next_frame(&mut self) -> Result<Option<&[u8]>, DecodeError> {
        if let Some(e) = &self.lost {
            return Err(e.clone());
        }
        match frame_len(&self.buf[self.start..], self.max_frame_len) {
            Ok(None) => {
                if self.start == self.buf.len() {
                    // Every byte was handed out: the link is idle until its next read, which
                    // may be many seconds away. Keep at most IDLE_CAPACITY meanwhile (a
                    // 1000-node cluster has ~2M link ends, each of whose last frame was a
                    // ~13 KB PING or PONG).
                    self.start = 0;
                    self.buf.clear();
                    if self.buf.capacity() > IDLE_CAPACITY {
                        self.buf = Vec::new();
                    }
                }
                Ok(None)
            }
            Ok(Some(len)) => {
                let at = self.start;
                self.start += len;
                Ok(Some(&self.buf[at..at + len]))
            }
            Err(e) => {
                self.lost = Some(e.clone());
                self.buf = Vec::new();
                self.start = 0;
                Err(e)
            }
        }
    }

    /// The next frame, decoded; `Ok(None)` if more bytes are needed.
    ///
    /// # Errors
    /// A [`DecodeError`]: if [`DecodeError::framing_lost`], the link MUST be closed (the
    /// error repeats on every later call); otherwise only that frame was bad, it has been
    /// consumed, and the caller continues with the next one.
    pub fn next_message(&mut self) -> Result<Option<Message>, DecodeError> {
        match self.next_frame()? {
            Some(frame) => decode(frame).map(Some),
            None => Ok(None),
        }
    }
}

/// The length of the frame at the start of `avail`, once its bytes are all there.
fn frame_len(avail: &[u8], max: u32) -> Result<Option<usize>, DecodeError> {
    check_signature(avail)?;
    if avail.len() < 8 {
        return Ok(None);
    }
    let totlen = be32(avail, 4);
    if totlen < MIN_LIGHT_TOTLEN {
        return Err(DecodeError::TotlenTooSmall {
            totlen,
            min: MIN_LIGHT_TOTLEN,
        });
    }
    if totlen > max {
        return Err(DecodeError::FrameTooLarge { totlen, max });
    }
    if totlen < MIN_FULL_TOTLEN {
        // Only a light message may be this short; its type is at offset 12 (V8 reads 14
        // bytes before this check).
        if avail.len() < 14 {
            return Ok(None);
        }
        if be16(avail, 12) & LIGHT_TYPE_BIT == 0 {
            return Err(DecodeError::TotlenTooSmall {
                totlen,
                min: MIN_FULL_TOTLEN,
            });
        }
    }
    if avail.len() < totlen as usize {
        return Ok(None);
    }
    Ok(Some(totlen as usize))
}

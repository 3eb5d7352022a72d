//! Fuzz target: the bus stream framer (ferrocluster-bus `FrameDecoder`).
//!
//! Input: one seed byte, then the stream. The seed picks the read sizes (1 to 4096 bytes).
//! Properties: no panic; the outcome (messages, dropped frames, lost framing) is the same
//! whether the stream arrives in pieces or all at once; every message round-trips through
//! encode; nothing stays buffered beyond one partial frame.
#![no_main]

use ferrocluster_bus::{decode, encode, DecodeError, FrameDecoder, Message};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, PartialEq)]
enum Outcome {
    Message(Message),
    Dropped(DecodeError),
    Lost(DecodeError),
}

fn drain(dec: &mut FrameDecoder, out: &mut Vec<Outcome>) {
    loop {
        match dec.next_message() {
            Ok(Some(m)) => out.push(Outcome::Message(m)),
            Ok(None) => return,
            Err(e) if e.framing_lost() => {
                if !matches!(out.last(), Some(Outcome::Lost(_))) {
                    out.push(Outcome::Lost(e));
                }
                return;
            }
            Err(e) => out.push(Outcome::Dropped(e)),
        }
    }
}

#[path = "shared/read_sizes.rs"]
mod read_sizes;
use read_sizes::sizes;

fuzz_target!(|data: &[u8]| {
    let Some((&seed, stream)) = data.split_first() else {
        return;
    };
    let max = 16 * 1024;

    let mut whole = FrameDecoder::with_max_frame_len(max);
    whole.push(stream);
    let mut expected = Vec::new();
    drain(&mut whole, &mut expected);

    let mut pieces = FrameDecoder::with_max_frame_len(max);
    let mut got = Vec::new();
    let mut next = sizes(seed);
    let mut rest = stream;
    while !rest.is_empty() {
        let n = next().min(rest.len());
        pieces.push(&rest[..n]);
        rest = &rest[n..];
        drain(&mut pieces, &mut got);
        assert!(pieces.buffered_len() <= max as usize + 4096);
    }
    // With no bytes at all the split run never polls; the whole run found nothing either.
    assert_eq!(got, expected, "same outcome for any split");
    assert_eq!(pieces.buffered_len(), whole.buffered_len());
    for o in &got {
        if let Outcome::Message(m) = o {
            assert_eq!(&decode(&encode(m)).expect("re-decodes"), m);
        }
    }
});

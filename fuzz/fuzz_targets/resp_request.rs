//! Fuzz target: the server's RESP request parser (`examples/server/src/resp.rs`, included by
//! path: the server is a binary crate).
//!
//! Properties: parsing arbitrary bytes, request after request, never panics; every parsed
//! request consumes at least one byte and no more than the buffer holds, and its arguments lie
//! inside the buffer they point into; a parsed request, written again as a multibulk request,
//! parses to the same arguments; a refused one is refused again from the same bytes.
#![no_main]

#[allow(dead_code)]
#[path = "../../examples/server/src/resp.rs"]
mod resp;

use libfuzzer_sys::fuzz_target;
use resp::{parse_request, Limits, Parsed};

fuzz_target!(|data: &[u8]| {
    // The first byte picks the limits, the rest is the stream.
    let Some((&pick, stream)) = data.split_first() else {
        return;
    };
    let limits = Limits {
        max_bulk_len: if pick & 1 == 0 { 512 << 20 } else { 64 },
        unauthenticated: pick & 2 != 0,
    };
    let (mut args, mut words) = (Vec::new(), Vec::new());
    let mut pos = 0;
    while pos < stream.len() {
        let buf = &stream[pos..];
        match parse_request(buf, &mut args, &mut words, limits) {
            Parsed::Command { consumed, inline } => {
                assert!(consumed > 0 && consumed <= buf.len());
                let from: &[u8] = if inline { &words } else { buf };
                let argv: Vec<Vec<u8>> = args
                    .iter()
                    .map(|r| {
                        assert!(r.start <= r.end && r.end <= from.len());
                        from[r.clone()].to_vec()
                    })
                    .collect();
                if !argv.is_empty() {
                    let mut wire = format!("*{}\r\n", argv.len()).into_bytes();
                    for a in &argv {
                        wire.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                        wire.extend_from_slice(a);
                        wire.extend_from_slice(b"\r\n");
                    }
                    let unlimited = Limits {
                        max_bulk_len: usize::MAX / 2,
                        unauthenticated: false,
                    };
                    let (mut a2, mut w2) = (Vec::new(), Vec::new());
                    match parse_request(&wire, &mut a2, &mut w2, unlimited) {
                        Parsed::Command {
                            consumed,
                            inline: false,
                        } => {
                            assert_eq!(consumed, wire.len());
                            let again: Vec<Vec<u8>> =
                                a2.iter().map(|r| wire[r.clone()].to_vec()).collect();
                            assert_eq!(again, argv);
                        }
                        other => panic!("re-encoded request: {other:?}"),
                    }
                }
                pos += consumed;
            }
            Parsed::Incomplete { settled } => {
                assert!(settled <= buf.len());
                break;
            }
            Parsed::Error(e) => {
                let again = parse_request(buf, &mut args, &mut words, limits);
                assert_eq!(again, Parsed::Error(e));
                let mut reply = Vec::new();
                e.write_reply(&mut reply);
                assert!(reply.ends_with(b"\r\n"));
                assert!(!reply[..reply.len() - 2].contains(&b'\n'));
                break;
            }
        }
    }
});

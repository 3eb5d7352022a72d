//! Fuzz target: one cluster bus frame (ferrocluster-bus `decode`).
//!
//! Properties: decoding arbitrary bytes never panics; a decoded message encodes, the encoding
//! decodes to the same message, and encoding is then a fixed point. Inputs whose header
//! fields are all kept (the usual case; see `decode`'s docs) re-encode to the input bytes.
#![no_main]

use ferrocluster_bus::{decode, encode, Body};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(msg) = decode(data) else {
        return;
    };
    let bytes = encode(&msg);
    let again = decode(&bytes).expect("an encoded message decodes");
    assert_eq!(again, msg, "decode(encode(m)) == m");
    assert_eq!(encode(&again), bytes, "encoding is a fixed point");
    // Only the count/extensions fields of non-gossip known types and the extensions field
    // without EXT_DATA are not kept; when they were zero the input comes back exactly.
    if let Some(h) = msg.full_header() {
        let count = u16::from_be_bytes([data[14], data[15]]);
        let exts = u16::from_be_bytes([data[2214], data[2215]]);
        let dropped = match &msg.body {
            Body::Ping(g) | Body::Pong(g) | Body::Meet(g) => {
                !h.ext_data() && exts != 0 && g.extensions.is_empty()
            }
            Body::Unknown(_) => false,
            _ => count != 0 || exts != 0,
        };
        if !dropped {
            assert_eq!(bytes, data, "exact re-encoding");
        }
    } else {
        assert_eq!(bytes, data, "exact re-encoding of a light message");
    }
});

//! Fuzz target: DUMP payload decoding (ferrocluster-rdb `dump::decode`).
//!
//! Input: one mode byte, then the payload. Mode bit 0 set: the rest is an object body and
//! the target appends a valid footer (RDB 10 and its CRC-64), so the fuzzer reaches the object
//! decoders instead of stopping at the checksum; clear: the rest is the whole payload.
//! Properties: no panic; a decoded object re-encodes (at RDB 80 when it carries field expiry)
//! and decodes to the same value, sets and hashes compared without order.
#![no_main]

use ferrocluster_rdb::{dump, Encoder, EncoderConfig, RdbObject, RdbVersion};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let payload = if mode & 1 == 1 {
        let mut p = rest.to_vec();
        p.extend_from_slice(&10u16.to_le_bytes());
        let c = ferrocluster_rdb::crc64::crc64(&p);
        p.extend_from_slice(&c.to_le_bytes());
        p
    } else {
        rest.to_vec()
    };
    let Ok(d) = dump::decode(&payload) else {
        return;
    };
    let version = if matches!(d.object, RdbObject::HashWithExpiry(_)) {
        RdbVersion::V80
    } else {
        RdbVersion::V10
    };
    let mut enc = Encoder::new(EncoderConfig {
        version,
        ..EncoderConfig::default()
    });
    // Listpacks may repeat a member (servers only check that under sanitize-dump-payload
    // yes, and so do we); our writer then writes a plain set/hash that, like the servers,
    // we refuse. Everything else must come back.
    let dup_free = |keys: Vec<&Vec<u8>>| {
        let mut k = keys.clone();
        k.sort();
        k.dedup();
        k.len() == keys.len()
    };
    let distinct = match &d.object {
        RdbObject::Set(v) => dup_free(v.iter().collect()),
        RdbObject::Hash(v) => dup_free(v.iter().map(|x| &x.0).collect()),
        RdbObject::SortedSet(v) => dup_free(v.iter().map(|x| &x.0).collect()),
        RdbObject::HashWithExpiry(v) => dup_free(v.iter().map(|x| &x.0).collect()),
        _ => true,
    };
    let mut again = Vec::new();
    if dump::encode_into(&mut enc, &d.object, &mut again).is_err() || !distinct {
        return;
    }
    let back = dump::decode(&again).expect("our own payload decodes");
    assert_eq!(back.object.normalized(), d.object.normalized());
});

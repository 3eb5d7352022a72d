//! `key_hash_slot` against CLUSTER KEYSLOT captured from real Redis 7.0 and Valkey 8.0 servers,
//! and the check values the cluster spec states (facts sheet §20.1).

use ferrocluster_slot::{key_hash_slot, pattern_slot, Slot};
use ferrocluster_testvectors::{hex, read_json, FLAVORS};

#[test]
fn keyslot_matches_real_servers() {
    for flavor in FLAVORS {
        let cases = read_json(format!("{flavor}/text/keyslot.json"));
        let cases = cases.as_array().expect("keyslot.json is an array");
        assert!(
            cases.len() >= 27,
            "{flavor}: expected at least 27 captured keys"
        );
        for case in cases {
            let key = captured_key(case);
            let slot = case["slot"].as_u64().expect("slot") as u16;
            assert_eq!(
                u16::from(key_hash_slot(&key)),
                slot,
                "{flavor}: key {:?}",
                case["key"]
            );
        }
    }
}

/// The key bytes of one keyslot.json case: `key_hex`, or when that is null, the text key, where
/// the capture writes a long key as `<char>*<count>` (the 1 KiB key is `k*1024`).
fn captured_key(case: &serde_json::Value) -> Vec<u8> {
    if let Some(h) = case["key_hex"].as_str() {
        return hex(h);
    }
    let text = case["key"].as_str().expect("key");
    let len = case["key_len"].as_u64().expect("key_len") as usize;
    match text.split_once('*') {
        Some((unit, count)) if count.parse::<usize>().ok() == Some(len) => {
            unit.repeat(len).into_bytes()
        }
        _ => text.as_bytes().to_vec(),
    }
}

#[test]
fn spec_check_values() {
    // Facts sheet §20.1.
    let cases: &[(&[u8], u16)] = &[
        (b"foo", 12182),
        (b"bar", 5061),
        (b"hello", 866),
        (b"somekey", 11058),
        (b"{user1000}.following", 3443),
        (b"{user1000}.followers", 3443),
        (b"foo{}{bar}", 8363),
        (b"foo{{bar}}zap", 4015),
        (b"foo{bar}{zap}", 5061),
        (b"", 0),
    ];
    for (key, slot) in cases {
        assert_eq!(
            key_hash_slot(key).get(),
            *slot,
            "{:?}",
            String::from_utf8_lossy(key)
        );
    }
    // CRC16/XMODEM check value: "123456789" -> 0x31C3, masked to 14 bits.
    assert_eq!(key_hash_slot(b"123456789").get(), 0x31C3 & 0x3FFF);
}

#[test]
fn pattern_slot_spec_cases() {
    // Issue 2 / facts sheet §20.1 and kvstore D.4.
    let abc = Some(key_hash_slot(b"abc"));
    assert_eq!(pattern_slot(b"{abc}*"), abc);
    assert_eq!(pattern_slot(b"{abc}?x[y]"), abc);
    assert_eq!(pattern_slot(b"*{abc}"), None);
    assert_eq!(pattern_slot(b"{a*c}"), None);
    assert_eq!(pattern_slot(b"{a\\*bc}"), None);
    assert_eq!(pattern_slot(b"a?{abc}"), None);
    assert_eq!(pattern_slot(b"[a]{abc}"), None);
    // No wildcard at all: the pattern names one key.
    assert_eq!(pattern_slot(b"user:1"), Some(key_hash_slot(b"user:1")));
    // Empty tag: tags are off, the whole pattern is hashed when it has no wildcard...
    assert_eq!(pattern_slot(b"x{}{abc}"), Some(key_hash_slot(b"x{}{abc}")));
    // ... and any later wildcard makes it multi-slot.
    assert_eq!(pattern_slot(b"{}{abc}*"), None);
    assert_eq!(pattern_slot(b""), Some(Slot::MIN));
}

#[test]
fn slot_bounds_are_typed_errors() {
    assert!(Slot::new(16383).is_ok());
    assert!(Slot::new(16384).is_err());
    assert!(Slot::new(u16::MAX).is_err());
    assert!(Slot::parse("16384").is_err());
    assert!(Slot::parse("-1").is_err());
    assert!(Slot::parse("").is_err());
    assert!(Slot::parse("99999999999999999999").is_err());
    assert_eq!(Slot::parse("0").unwrap(), Slot::MIN);
    assert!(Slot::try_from(-5i64).is_err());
}

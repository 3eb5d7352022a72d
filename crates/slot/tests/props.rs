//! Property tests: hashing against the `crc16` crate oracle, hash tags, and `SlotSet` round trips.

use ferrocluster_slot::{
    format_slot_ranges, hash_tag, key_hash_slot, parse_slot_ranges, pattern_slot, Slot, SlotRange,
    SlotSet, SLOT_COUNT,
};
use proptest::prelude::*;

fn oracle(key: &[u8]) -> u16 {
    crc16::State::<crc16::XMODEM>::calculate(hash_tag(key)) & 0x3FFF
}

fn slot_set() -> impl Strategy<Value = SlotSet> {
    prop_oneof![
        proptest::collection::vec(0u16..16384, 0..200)
            .prop_map(|v| v.into_iter().map(|n| Slot::new(n).unwrap()).collect()),
        proptest::collection::vec((0u16..16384, 0u16..600), 0..12).prop_map(|v| {
            let mut s = SlotSet::new();
            for (a, len) in v {
                let b = (a as usize + len as usize).min(SLOT_COUNT - 1) as u16;
                s.insert_range(
                    SlotRange::new(Slot::new(a).unwrap(), Slot::new(b).unwrap()).unwrap(),
                );
            }
            s
        }),
        Just(SlotSet::full()),
    ]
}

proptest! {
    #[test]
    fn equals_crc16_oracle(key in proptest::collection::vec(any::<u8>(), 0..300)) {
        prop_assert_eq!(key_hash_slot(&key).get(), oracle(&key));
    }

    /// Long keys at unaligned starts: a subslice at offset 0..64 of a larger buffer, lengths
    /// 0..5000, so both CRC engines (tables under 256 bytes, carry-less folding from there),
    /// every SIMD block size and every tail length are reached. `{` is replaced so that most
    /// keys are hashed whole; `with_braces` keeps some, so tags inside long keys are tested too.
    #[test]
    fn long_unaligned_keys_equal_crc16_oracle(
        buf in proptest::collection::vec(any::<u8>(), 64..5064),
        offset in 0usize..64,
        with_braces in proptest::bool::weighted(0.2),
    ) {
        let mut buf = buf;
        if !with_braces {
            for b in &mut buf {
                if *b == b'{' {
                    *b = b'(';
                }
            }
        }
        let key = &buf[offset..];
        prop_assert_eq!(key_hash_slot(key).get(), oracle(key));
        // Half the key as well, so short lengths (the table engine) come up in every case.
        let cut = key.len() / 2;
        prop_assert_eq!(key_hash_slot(&key[..cut]).get(), oracle(&key[..cut]));
    }

    #[test]
    fn tag_prefix_hashes_like_tag(
        tag in proptest::collection::vec(any::<u8>().prop_filter("no }", |b| *b != b'}'), 1..40),
        rest in proptest::collection::vec(any::<u8>(), 0..40),
    ) {
        let mut key = vec![b'{'];
        key.extend_from_slice(&tag);
        key.push(b'}');
        key.extend_from_slice(&rest);
        prop_assert_eq!(key_hash_slot(&key), key_hash_slot(&tag));
        prop_assert_eq!(key_hash_slot(&key).get(), oracle(&tag));
    }

    #[test]
    fn packed_short_keys_hash_like_key_hash_slot(
        key in proptest::collection::vec(any::<u8>().prop_filter("no {", |b| *b != b'{'), 0..=16)
    ) {
        let mut padded = [0u8; 16];
        padded[16 - key.len()..].copy_from_slice(&key);
        prop_assert_eq!(
            ferrocluster_slot::packed_short_key_slot(u128::from_be_bytes(padded)),
            key_hash_slot(&key)
        );
    }

    #[test]
    fn wildcard_free_pattern_is_key_slot(
        key in proptest::collection::vec(
            any::<u8>().prop_filter("no glob", |b| !b"*?[\\".contains(b)), 0..60)
    ) {
        prop_assert_eq!(pattern_slot(&key), Some(key_hash_slot(&key)));
    }

    #[test]
    fn slot_set_byte_round_trip(set in slot_set()) {
        let back = SlotSet::from_bytes(set.as_bytes());
        prop_assert_eq!(&back, &set);
        // Bit layout: slot j is bit j&7 of byte j/8.
        for s in set.iter() {
            prop_assert!(set.as_bytes()[s.index() / 8] & (1 << (s.index() % 8)) != 0);
        }
        prop_assert_eq!(set.len(), set.iter().count());
    }

    #[test]
    fn slot_set_range_round_trip(set in slot_set()) {
        let text = format_slot_ranges(set.ranges());
        let parsed = parse_slot_ranges(&text).unwrap();
        let mut back = SlotSet::new();
        for r in &parsed {
            back.insert_range(*r);
        }
        prop_assert_eq!(&back, &set);
        // Ranges are maximal: no two consecutive ranges touch.
        for w in parsed.windows(2) {
            prop_assert!(w[0].end().get() + 1 < w[1].start().get());
        }
    }

    #[test]
    fn set_operations_agree_with_membership(a in slot_set(), b in slot_set(), n in 0u16..16384) {
        let s = Slot::new(n).unwrap();
        prop_assert_eq!(a.union(&b).contains(s), a.contains(s) || b.contains(s));
        prop_assert_eq!(a.intersection(&b).contains(s), a.contains(s) && b.contains(s));
        prop_assert_eq!(a.difference(&b).contains(s), a.contains(s) && !b.contains(s));
        prop_assert_eq!(a.intersects(&b), !a.intersection(&b).is_empty());
        prop_assert_eq!(a.is_subset(&b), a.difference(&b).is_empty());
    }

    /// The kept size equals the bits counted, through inserts, removes, set operations,
    /// `clear` and the byte round trip.
    #[test]
    fn len_is_the_number_of_members(
        a in slot_set(),
        b in slot_set(),
        ops in proptest::collection::vec((any::<bool>(), 0u16..16384), 0..300),
    ) {
        let mut s = a.clone();
        for (add, n) in ops {
            let slot = Slot::new(n).unwrap();
            if add { s.insert(slot); } else { s.remove(slot); }
            prop_assert_eq!(s.len(), s.iter().count());
        }
        for t in [a.union(&b), a.intersection(&b), a.difference(&b), SlotSet::from_bytes(s.as_bytes())] {
            prop_assert_eq!(t.len(), t.iter().count());
            prop_assert_eq!(t.is_empty(), t.iter().next().is_none());
        }
        s.clear();
        prop_assert!(s.is_empty());
        prop_assert_eq!(SlotSet::full().len(), SLOT_COUNT);
    }
}

#[test]
fn range_text_forms() {
    let r = parse_slot_ranges("0-5460 10923 16383").unwrap();
    assert_eq!(r.len(), 3);
    assert_eq!(r[0].len(), 5461);
    assert_eq!(format_slot_ranges(r), "0-5460 10923 16383");
    assert!(parse_slot_ranges("10-5").is_err());
    assert!(parse_slot_ranges("0-16384").is_err());
    assert!(parse_slot_ranges("a-b").is_err());
    assert!(parse_slot_ranges("").unwrap().is_empty());
    let full = SlotSet::full();
    assert_eq!(full.len(), 16384);
    assert_eq!(format_slot_ranges(full.ranges()), "0-16383");
}

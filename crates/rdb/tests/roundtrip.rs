//! Encode -> decode is the identity, for every encoding: what our writers choose (at each
//! version and with thresholds that force each form), the old encodings built by hand
//! (ziplist, zipmap, intset, quicklist v1, plain list, text-score zset), and whole files fed
//! to the streaming decoder in random chunks.
mod common;

use common::canon;

use ferrocluster_rdb::write::{write_double_text, write_len, StringWriter};
use ferrocluster_rdb::{
    decode_file, dump, intset, listpack, opcode, ziplist, zipmap, Encoder, EncoderConfig,
    EncodingLimits, EntryMeta, Item, RdbDecoder, RdbObject, RdbType, RdbVersion, RdbWriter,
    WriterConfig,
};
use proptest::prelude::*;

fn element() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => proptest::collection::vec(any::<u8>(), 0..24),
        2 => any::<i64>().prop_map(|v| v.to_string().into_bytes()),
        2 => (-300i64..300).prop_map(|v| v.to_string().into_bytes()),
        1 => proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b')], 60..200),
        1 => Just(b"007".to_vec()),
    ]
}

fn distinct(v: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let mut seen = std::collections::HashSet::new();
    v.into_iter().filter(|x| seen.insert(x.clone())).collect()
}

fn score() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>().prop_filter("not NaN", |f| !f.is_nan()),
        (-1000i64..1000).prop_map(|i| i as f64),
        (-1000i64..1000).prop_map(|i| i as f64 / 8.0),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
    ]
}

fn object() -> impl Strategy<Value = RdbObject> {
    let items = || proptest::collection::vec(element(), 1..60);
    prop_oneof![
        element().prop_map(RdbObject::String),
        proptest::collection::vec(any::<u8>(), 0..3000).prop_map(RdbObject::String),
        items().prop_map(RdbObject::List),
        items().prop_map(|v| RdbObject::Set(distinct(v))),
        proptest::collection::vec(any::<i64>(), 1..40).prop_map(|v| RdbObject::Set(distinct(
            v.into_iter().map(|i| i.to_string().into_bytes()).collect()
        ))),
        proptest::collection::vec((element(), score()), 1..40).prop_map(|v| {
            let keys = distinct(v.iter().map(|x| x.0.clone()).collect());
            RdbObject::SortedSet(
                keys.into_iter()
                    .map(|k| {
                        let s = v.iter().find(|x| x.0 == k).map(|x| x.1).unwrap_or(0.0);
                        (k, s)
                    })
                    .collect(),
            )
        }),
        proptest::collection::vec((element(), element()), 1..40).prop_map(|v| {
            let keys = distinct(v.iter().map(|x| x.0.clone()).collect());
            RdbObject::Hash(
                keys.into_iter()
                    .map(|k| {
                        let x = v
                            .iter()
                            .find(|x| x.0 == k)
                            .map(|x| x.1.clone())
                            .unwrap_or_default();
                        (k, x)
                    })
                    .collect(),
            )
        }),
    ]
}

fn limits(tiny: bool) -> EncodingLimits {
    if tiny {
        // Everything beyond one element leaves the packed forms; list nodes hold ~2 elements.
        EncodingLimits {
            hash_max_listpack_entries: 1,
            hash_max_listpack_value: 8,
            set_max_intset_entries: 1,
            set_max_listpack_entries: 1,
            set_max_listpack_value: 8,
            zset_max_listpack_entries: 1,
            zset_max_listpack_value: 8,
            list_max_listpack_bytes: 40,
        }
    } else {
        EncodingLimits::default()
    }
}

fn version() -> impl Strategy<Value = RdbVersion> {
    prop_oneof![
        Just(RdbVersion::V10),
        Just(RdbVersion::V11),
        Just(RdbVersion::V80)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn objects_round_trip_in_every_form(obj in object(), v in version(), tiny: bool, compress: bool) {
        let mut enc = Encoder::new(EncoderConfig { version: v, compress, limits: limits(tiny) });
        let mut p = Vec::new();
        dump::encode_into(&mut enc, &obj, &mut p).unwrap();
        let d = dump::decode(&p).unwrap();
        prop_assert!(v.allows(d.rdb_type), "{:?} at {:?}", d.rdb_type, v);
        prop_assert_eq!(d.version, v.number());
        prop_assert_eq!(canon(&d.object), canon(&obj));
        // Lists keep their order exactly.
        if let RdbObject::List(l) = &obj {
            prop_assert_eq!(&d.object, &RdbObject::List(l.clone()));
        }
    }

    #[test]
    fn hashes_with_field_expiry_round_trip_at_rdb_80(
        fields in proptest::collection::vec((element(), element(), proptest::option::of(0i64..i64::MAX)), 1..30)
    ) {
        let keys = distinct(fields.iter().map(|x| x.0.clone()).collect());
        let fields: Vec<_> = keys.into_iter().map(|k| fields.iter().find(|x| x.0 == k).cloned().unwrap()).collect();
        let obj = RdbObject::HashWithExpiry(fields.clone());
        let mut enc = Encoder::new(EncoderConfig { version: RdbVersion::V80, ..EncoderConfig::default() });
        let mut p = Vec::new();
        dump::encode_into(&mut enc, &obj, &mut p).unwrap();
        let d = dump::decode(&p).unwrap();
        if fields.iter().any(|f| f.2.is_some()) {
            prop_assert_eq!(d.rdb_type, RdbType::Hash2);
            prop_assert_eq!(canon(&d.object), canon(&obj));
            // Below RDB 80 it is refused, never silently dropped.
            prop_assert!(dump::encode(&obj).is_err());
        } else {
            let plain = RdbObject::Hash(fields.into_iter().map(|(f, v, _)| (f, v)).collect());
            prop_assert_eq!(canon(&d.object), canon(&plain));
        }
    }
}

#[test]
fn chosen_types_follow_the_servers_thresholds() {
    let n = |k: usize| -> Vec<Vec<u8>> { (0..k).map(|i| format!("m{i}").into_bytes()).collect() };
    let ints = |k: usize| -> Vec<Vec<u8>> { (0..k).map(|i| i.to_string().into_bytes()).collect() };
    let t = |obj: &RdbObject, v: RdbVersion| {
        let mut enc = Encoder::new(EncoderConfig {
            version: v,
            ..EncoderConfig::default()
        });
        let mut p = Vec::new();
        dump::encode_into(&mut enc, obj, &mut p).unwrap();
        RdbType::from_code(p[0])
    };
    use RdbVersion::*;
    let cases: Vec<(RdbObject, RdbVersion, RdbType)> = vec![
        (RdbObject::Set(ints(512)), V10, RdbType::SetIntset),
        (RdbObject::Set(ints(513)), V10, RdbType::Set),
        (RdbObject::Set(n(128)), V11, RdbType::SetListpack),
        (RdbObject::Set(n(129)), V11, RdbType::Set),
        (RdbObject::Set(n(3)), V10, RdbType::Set),
        (RdbObject::Set(vec![vec![b'x'; 65]]), V80, RdbType::Set),
        (
            RdbObject::SortedSet(
                (0..128)
                    .map(|i| (n(1)[0].repeat(1 + i % 2), i as f64))
                    .collect(),
            ),
            V10,
            RdbType::ZSetListpack,
        ),
        (
            RdbObject::SortedSet(n(129).into_iter().map(|m| (m, 1.0)).collect()),
            V10,
            RdbType::ZSet2,
        ),
        (
            RdbObject::SortedSet(vec![(vec![b'x'; 65], 1.0)]),
            V10,
            RdbType::ZSet2,
        ),
        (
            RdbObject::Hash(n(512).into_iter().map(|m| (m.clone(), m)).collect()),
            V10,
            RdbType::HashListpack,
        ),
        (
            RdbObject::Hash(n(513).into_iter().map(|m| (m.clone(), m)).collect()),
            V10,
            RdbType::Hash,
        ),
        (
            RdbObject::Hash(vec![(b"f".to_vec(), vec![b'v'; 65])]),
            V10,
            RdbType::Hash,
        ),
        (RdbObject::List(n(1)), V10, RdbType::ListQuicklist2),
        (RdbObject::String(b"1".to_vec()), V10, RdbType::String),
    ];
    for (obj, v, want) in cases {
        assert_eq!(t(&obj, v), want, "{:?} items at {v:?}", obj.len());
    }
}

/// `[type] payload` of an old encoding, as a DUMP payload of RDB 10 (servers do not tie types
/// to the version in payloads).
fn legacy_payload(t: RdbType, body: impl FnOnce(&mut Vec<u8>, &mut StringWriter)) -> Vec<u8> {
    let mut p = vec![t.code()];
    let mut w = StringWriter::new(true);
    body(&mut p, &mut w);
    p.extend_from_slice(&10u16.to_le_bytes());
    let c = ferrocluster_rdb::crc64::crc64(&p);
    p.extend_from_slice(&c.to_le_bytes());
    p
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    #[test]
    fn old_encodings_decode_to_what_they_hold(
        items in proptest::collection::vec(element(), 1..30),
        scores in proptest::collection::vec(score(), 30),
        ints in proptest::collection::btree_set(any::<i64>(), 1..30),
        split in 1usize..5,
    ) {
        let set = distinct(items.clone());
        let pairs: Vec<(Vec<u8>, Vec<u8>)> = set.iter().map(|k| (k.clone(), k.repeat(2))).collect();
        let zpairs: Vec<(Vec<u8>, f64)> = set.iter().cloned().zip(scores.iter().copied()).collect();
        let zl_items = |v: &[(Vec<u8>, Vec<u8>)]| -> Vec<Vec<u8>> { v.iter().flat_map(|(a, b)| [a.clone(), b.clone()]).collect() };
        let fmt = |s: f64| -> Vec<u8> {
            if s.is_infinite() { if s > 0.0 { b"inf".to_vec() } else { b"-inf".to_vec() } } else { ferrocluster_rdb::double::format_double(s).into_bytes() }
        };
        let cases: Vec<(Vec<u8>, RdbObject)> = vec![
            (legacy_payload(RdbType::ListZiplist, |p, w| w.write(p, &ziplist::encode(&items))), RdbObject::List(items.clone())),
            (legacy_payload(RdbType::List, |p, w| { write_len(p, items.len() as u64); for i in &items { w.write(p, i) } }), RdbObject::List(items.clone())),
            (legacy_payload(RdbType::ListQuicklist, |p, w| {
                let chunks: Vec<&[Vec<u8>]> = items.chunks(split).collect();
                write_len(p, chunks.len() as u64);
                for c in chunks { w.write(p, &ziplist::encode(c)) }
            }), RdbObject::List(items.clone())),
            (legacy_payload(RdbType::ListQuicklist2, |p, w| {
                let chunks: Vec<&[Vec<u8>]> = items.chunks(split).collect();
                write_len(p, chunks.len() as u64);
                for (i, c) in chunks.into_iter().enumerate() {
                    if i % 2 == 1 && c.len() == 1 && !c[0].is_empty() {
                        write_len(p, 1); w.write(p, &c[0]);
                    } else {
                        write_len(p, 2); w.write(p, &listpack::encode(c));
                    }
                }
            }), RdbObject::List(items.clone())),
            (legacy_payload(RdbType::SetIntset, |p, w| w.write(p, &intset::encode(&ints.iter().copied().collect::<Vec<_>>()))),
             RdbObject::Set(ints.iter().map(|i| i.to_string().into_bytes()).collect())),
            (legacy_payload(RdbType::SetListpack, |p, w| w.write(p, &listpack::encode(&set))), RdbObject::Set(set.clone())),
            (legacy_payload(RdbType::HashZiplist, |p, w| w.write(p, &ziplist::encode(zl_items(&pairs)))), RdbObject::Hash(pairs.clone())),
            (legacy_payload(RdbType::HashZipmap, |p, w| w.write(p, &zipmap::encode(&pairs))), RdbObject::Hash(pairs.clone())),
            (legacy_payload(RdbType::HashListpack, |p, w| w.write(p, &listpack::encode(zl_items(&pairs)))), RdbObject::Hash(pairs.clone())),
            (legacy_payload(RdbType::ZSetZiplist, |p, w| {
                let flat: Vec<Vec<u8>> = zpairs.iter().flat_map(|(m, s)| [m.clone(), fmt(*s)]).collect();
                w.write(p, &ziplist::encode(flat))
            }), RdbObject::SortedSet(zpairs.clone())),
            (legacy_payload(RdbType::ZSet, |p, w| {
                write_len(p, zpairs.len() as u64);
                for (m, s) in &zpairs { w.write(p, m); write_double_text(p, *s) }
            }), RdbObject::SortedSet(zpairs.clone())),
        ];
        for (payload, want) in cases {
            let d = dump::decode(&payload);
            prop_assert!(d.is_ok(), "{:?}", d);
            let d = d.unwrap();
            prop_assert_eq!(canon(&d.object), canon(&want), "{:?}", d.rdb_type);
            // And our writer re-encodes it in a current form that decodes the same.
            let again = dump::decode(&dump::encode(&d.object).unwrap()).unwrap();
            prop_assert_eq!(canon(&again.object), canon(&want));
        }
    }
}

#[derive(Debug, Clone)]
enum Rec {
    Aux(Vec<u8>, Vec<u8>),
    Func(Vec<u8>),
    Db(u64),
    Resize(u64, u64),
    Entry(Vec<u8>, RdbObject, EntryMeta),
}

fn record() -> impl Strategy<Value = Rec> {
    prop_oneof![
        1 => (element(), element()).prop_map(|(k, v)| Rec::Aux(k, v)),
        1 => element().prop_map(Rec::Func),
        1 => (0u64..20).prop_map(Rec::Db),
        1 => (any::<u32>(), any::<u32>()).prop_map(|(a, b)| Rec::Resize(a.into(), b.into())),
        6 => (element(), object(), proptest::option::of(any::<i64>()), proptest::option::of(any::<u32>()), proptest::option::of(any::<u8>()))
            .prop_map(|(k, o, e, i, f)| Rec::Entry(k, o, EntryMeta { expire_ms: e, lru_idle_s: i.map(u64::from), lfu_freq: f })),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(60))]

    #[test]
    fn files_round_trip_through_the_streaming_decoder(
        recs in proptest::collection::vec(record(), 0..40),
        v in version(),
        checksum: bool,
        cuts in proptest::collection::vec(1usize..300, 1..50),
    ) {
        let mut w = RdbWriter::new(WriterConfig { encoder: EncoderConfig { version: v, ..EncoderConfig::default() }, checksum });
        let mut file = Vec::new();
        for (i, r) in recs.iter().enumerate() {
            match r {
                Rec::Aux(k, x) => w.aux(k, x).unwrap(),
                Rec::Func(c) => w.function(c).unwrap(),
                Rec::Db(d) => w.select_db(*d).unwrap(),
                Rec::Resize(a, b) => w.resize_db(*a, *b).unwrap(),
                Rec::Entry(k, o, m) => w.entry(k, o, *m).unwrap(),
            }
            if i % 3 == 0 { w.take_into(&mut file); }
        }
        w.finish().unwrap();
        w.take_into(&mut file);
        prop_assert!(w.finish().is_err());
        // Feed in the given cuts, cycling.
        let items = common::stream_items(&file, |i| cuts[i % cuts.len()]).unwrap();
        prop_assert_eq!(&items, &decode_file(&file).unwrap());
        prop_assert_eq!(&items[0], &Item::Header { magic: if v == RdbVersion::V80 { ferrocluster_rdb::Magic::Valkey } else { ferrocluster_rdb::Magic::Redis }, version: v.number().into() });
        let mut db = 0;
        let mut want = Vec::new();
        for r in &recs {
            match r {
                Rec::Aux(k, x) => want.push(Item::Aux { key: k.clone(), value: x.clone() }),
                Rec::Func(c) => want.push(Item::Function(c.clone())),
                Rec::Db(x) => { db = *x; want.push(Item::SelectDb(*x)) }
                Rec::Resize(a, b) => want.push(Item::ResizeDb { keys: *a, expires: *b }),
                Rec::Entry(k, o, m) => want.push(Item::Entry(ferrocluster_rdb::Entry {
                    db, key: k.clone(), object: o.clone(), rdb_type: RdbType::String,
                    expire_ms: m.expire_ms, lru_idle_s: m.lru_idle_s, lfu_freq: m.lfu_freq,
                })),
            }
        }
        let got = &items[1..items.len() - 1];
        prop_assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            match (g, w) {
                (Item::Entry(g), Item::Entry(w)) => {
                    prop_assert_eq!((g.db, &g.key, g.expire_ms, g.lru_idle_s, g.lfu_freq), (w.db, &w.key, w.expire_ms, w.lru_idle_s, w.lfu_freq));
                    prop_assert_eq!(canon(&g.object), canon(&w.object));
                }
                (g, w) => prop_assert_eq!(g, w),
            }
        }
        match items.last() {
            Some(Item::End { checksum: c }) => prop_assert_eq!(c.is_some(), checksum),
            other => prop_assert!(false, "{:?}", other),
        }
        let _ = opcode::EOF;
    }
}

#[test]
fn trailing_bytes_after_the_checksum_are_left_for_the_host() {
    let mut w = RdbWriter::new(WriterConfig::default());
    common::write_k_v(&mut w);
    w.finish().unwrap();
    let mut bytes = w.take();
    bytes.extend_from_slice(b"0123456789abcdef0123456789abcdef01234567"); // an EOF mark
    let mut d = RdbDecoder::new();
    d.feed(&bytes);
    while d.poll().unwrap().is_some() {}
    assert!(d.is_done());
    assert_eq!(d.trailing(), b"0123456789abcdef0123456789abcdef01234567");
}

#[test]
fn slot_records_round_trip() {
    let mut w = RdbWriter::new(WriterConfig {
        encoder: EncoderConfig {
            version: RdbVersion::V80,
            ..EncoderConfig::default()
        },
        checksum: true,
    });
    let name = [b'a'; 40];
    w.slot_import(&name, &[(0, 99), (200, 200)]).unwrap();
    w.select_db(0).unwrap();
    w.slot_info(7, 1, 0, 0).unwrap();
    common::write_k_v(&mut w);
    w.finish().unwrap();
    let items = decode_file(&w.take()).unwrap();
    assert_eq!(
        items[1],
        Item::SlotImport {
            name: name.to_vec(),
            ranges: vec![(0, 99), (200, 200)]
        }
    );
    match &items[3] {
        Item::Aux { key, value } => {
            assert_eq!(key, b"slot-info");
            let si = ferrocluster_rdb::SlotInfo::parse(value).unwrap();
            assert_eq!(
                (si.slot, si.keys, si.expires, si.volatile_items),
                (7, 1, 0, Some(0))
            );
        }
        other => panic!("{other:?}"),
    }
    // Valkey 8's three-number form parses too; a slot out of range does not.
    assert_eq!(
        ferrocluster_rdb::SlotInfo::parse(b"5,2,1")
            .unwrap()
            .volatile_items,
        None
    );
    assert!(ferrocluster_rdb::SlotInfo::parse(b"16384,1,1").is_err());
    assert!(ferrocluster_rdb::SlotInfo::parse(b"5,2").is_err());
    // Slot imports exist only in RDB 80.
    let mut w = RdbWriter::new(WriterConfig::default());
    assert_eq!(
        w.slot_import(&name, &[(0, 1)]),
        Err(ferrocluster_rdb::EncodeError::SlotImportNeedsValkey9(10))
    );
}

#[test]
fn borrowed_and_owned_polls_agree() {
    let mut w = RdbWriter::new(WriterConfig::default());
    w.select_db(2).unwrap();
    for i in 0..1000 {
        let v = RdbObject::String(format!("value-{i}-{}", "x".repeat(i % 40)).into_bytes());
        let meta = EntryMeta {
            expire_ms: (i % 3 == 0).then_some(i as i64),
            ..EntryMeta::default()
        };
        w.entry(format!("key:{i}").as_bytes(), &v, meta).unwrap();
    }
    w.entry(
        b"list",
        &RdbObject::List(vec![b"a".to_vec()]),
        EntryMeta::default(),
    )
    .unwrap();
    w.finish().unwrap();
    let file = w.take();
    let owned = decode_file(&file).unwrap();
    for step in [1usize, 13, 4096, file.len()] {
        let mut d = RdbDecoder::new();
        let mut got = Vec::new();
        for c in file.chunks(step) {
            d.feed(c);
            while let Some(i) = d.poll_ref().unwrap() {
                got.push(i.into_owned());
            }
        }
        d.finish().unwrap();
        assert_eq!(got, owned, "chunks of {step}");
    }
}

//! Property tests: encode→decode round trips of arbitrary messages, the framer under random
//! splits, and no panics on arbitrary or mutated input.

use ferrocluster_bus::*;
use ferrocluster_slot::SlotSet;
use proptest::prelude::*;

fn node_name() -> impl Strategy<Value = NodeName> {
    prop_oneof![
        // Mostly hex-like text, sometimes any bytes.
        prop::array::uniform32(b'0'..=b'z').prop_map(|a| {
            let mut n = [b'0'; 40];
            n[..32].copy_from_slice(&a);
            NodeName(n)
        }),
        prop::collection::vec(any::<u8>(), 40).prop_map(|v| NodeName::from_slice(&v).unwrap()),
    ]
}

fn ip_field() -> impl Strategy<Value = IpField> {
    prop_oneof![
        Just(IpField::UNSET),
        "[0-9a-f.:]{1,45}".prop_map(|s| IpField::from_text(s.as_bytes()).unwrap()),
        prop::collection::vec(any::<u8>(), 46).prop_map(|v| IpField(v.try_into().unwrap())),
    ]
}

fn slot_set() -> impl Strategy<Value = SlotSet> {
    prop_oneof![
        Just(SlotSet::new()),
        Just(SlotSet::full()),
        prop::collection::vec(any::<u8>(), 2048)
            .prop_map(|v| SlotSet::from_bytes(&v.try_into().unwrap())),
    ]
}

fn full_header() -> impl Strategy<Value = FullHeader> {
    (
        (any::<u16>(), any::<u64>(), any::<u64>(), any::<u64>()),
        (
            node_name(),
            slot_set(),
            prop::option::of(node_name()),
            ip_field(),
        ),
        (
            prop::collection::vec(any::<u8>(), 30),
            any::<u16>(),
            any::<u16>(),
            any::<u16>(),
            any::<u8>(),
            any::<[u8; 3]>(),
        ),
    )
        .prop_map(
            |(
                (port, current_epoch, config_epoch, offset),
                (sender, myslots, replicaof, myip),
                (reserved, pport, cport, flags, state, mflags),
            )| FullHeader {
                port,
                current_epoch,
                config_epoch,
                offset,
                sender,
                myslots,
                // 40 zero bytes mean "no primary" on the wire.
                replicaof: replicaof.filter(|n| !n.is_zero()),
                myip,
                reserved: reserved.try_into().unwrap(),
                pport,
                cport,
                flags,
                state,
                mflags,
            },
        )
}

fn gossip_entry() -> impl Strategy<Value = GossipEntry> {
    (
        node_name(),
        any::<u32>(),
        any::<u32>(),
        ip_field(),
        any::<[u16; 5]>(),
    )
        .prop_map(
            |(name, ping, pong, ip, [port, cport, flags, pport, reserved])| GossipEntry {
                name,
                ping_sent_secs: ping,
                pong_received_secs: pong,
                ip,
                port,
                cport,
                flags,
                pport,
                reserved,
            },
        )
}

fn ext_string() -> impl Strategy<Value = ExtString> {
    prop_oneof![
        "[a-z0-9.:-]{0,60}".prop_map(|s| ExtString::new(s.as_bytes())),
        (0usize..6)
            .prop_flat_map(|k| prop::collection::vec(any::<u8>(), k * 8))
            .prop_map(|v| ExtString::from_payload(v).unwrap()),
    ]
}

fn ping_ext() -> impl Strategy<Value = PingExt> {
    prop_oneof![
        ext_string().prop_map(PingExt::Hostname),
        ext_string().prop_map(PingExt::HumanNodename),
        ext_string().prop_map(PingExt::ClientIpv4),
        ext_string().prop_map(PingExt::ClientIpv6),
        (node_name(), any::<u64>())
            .prop_map(|(name, ttl_secs)| PingExt::ForgottenNode { name, ttl_secs }),
        node_name().prop_map(PingExt::ShardId),
        // Raw: unknown types, or known types with non-zero reserved bytes.
        (
            prop_oneof![(6u16..=u16::MAX, Just(0u16)), (0u16..6, 1u16..=u16::MAX)],
            (0usize..5).prop_flat_map(|k| prop::collection::vec(any::<u8>(), k * 8)),
        )
            .prop_map(|((ext_type, reserved), payload)| PingExt::Raw(RawExt {
                ext_type,
                reserved,
                payload
            })),
    ]
}

fn gossip() -> impl Strategy<Value = Gossip> {
    (
        prop::collection::vec(gossip_entry(), 0..12),
        prop::collection::vec(ping_ext(), 0..6),
    )
        .prop_map(|(entries, extensions)| Gossip {
            entries,
            extensions,
        })
}

fn publish() -> impl Strategy<Value = Publish> {
    (
        prop::collection::vec(any::<u8>(), 0..40),
        prop::collection::vec(any::<u8>(), 0..200),
    )
        .prop_map(|(channel, message)| Publish { channel, message })
}

fn module() -> impl Strategy<Value = ModuleMsg> {
    (
        any::<u64>(),
        any::<u8>(),
        prop::collection::vec(any::<u8>(), 0..100),
    )
        .prop_map(|(module_id, module_type, payload)| ModuleMsg {
            module_id,
            module_type,
            payload,
        })
}

fn full_body() -> impl Strategy<Value = Body> {
    prop_oneof![
        gossip().prop_map(Body::Ping),
        gossip().prop_map(Body::Pong),
        gossip().prop_map(Body::Meet),
        node_name().prop_map(|about| Body::Fail { about }),
        publish().prop_map(Body::Publish),
        Just(Body::FailoverAuthRequest),
        Just(Body::FailoverAuthAck),
        (any::<u64>(), node_name(), slot_set()).prop_map(|(config_epoch, name, slots)| {
            Body::Update(Box::new(Update {
                config_epoch,
                name,
                slots,
            }))
        }),
        Just(Body::MfStart),
        module().prop_map(Body::Module),
        publish().prop_map(Body::PublishShard),
        (
            11u16..0x8000,
            any::<u16>(),
            any::<u16>(),
            prop::collection::vec(any::<u8>(), 0..64)
        )
            .prop_map(
                |(msg_type, count, extensions, data)| Body::Unknown(UnknownMsg {
                    msg_type,
                    count,
                    extensions,
                    data
                })
            ),
    ]
}

fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        4 => (full_header(), full_body()).prop_map(|(mut h, body)| {
            // The encoder sets EXT_DATA when there are extensions (as V8 does).
            if body.gossip().is_some_and(|g| !g.extensions.is_empty()) {
                h.mflags[0] |= msg_flags::EXT_DATA;
            }
            Message::full(h, body)
        }),
        1 => (
            any::<[u8; 4]>(),
            prop_oneof![
                publish().prop_map(Body::Publish),
                publish().prop_map(Body::PublishShard),
                module().prop_map(Body::Module),
            ],
        )
            .prop_map(|(reserved, body)| Message {
                header: Header::Light(LightHeader { reserved }),
                body,
            }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn encode_then_decode_gives_the_message_back(msg in message()) {
        let frame = encode(&msg);
        prop_assert_eq!(encoded_len(&msg).unwrap(), frame.len());
        prop_assert_eq!(&frame[..4], b"RCmb");
        prop_assert_eq!(u32::from_be_bytes(frame[4..8].try_into().unwrap()) as usize, frame.len());
        let back = decode(&frame).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&back, &msg);
        // encode_into appends after what is there.
        let mut buf = b"prefix".to_vec();
        encode_into(&back, &mut buf);
        prop_assert_eq!(&buf[6..], &frame[..]);
    }

    #[test]
    fn framer_yields_the_same_messages_for_any_split(
        msgs in prop::collection::vec(message(), 1..6),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let mut stream = Vec::new();
        for m in &msgs {
            encode_into(m, &mut stream);
        }
        let mut points: Vec<usize> = cuts.iter().map(|i| i.index(stream.len() + 1)).collect();
        points.push(0);
        points.push(stream.len());
        points.sort_unstable();
        let mut dec = FrameDecoder::new();
        let mut got = Vec::new();
        for w in points.windows(2) {
            dec.push(&stream[w[0]..w[1]]);
            while let Some(m) = dec.next_message().map_err(|e| TestCaseError::fail(e.to_string()))? {
                got.push(m);
            }
        }
        prop_assert_eq!(got, msgs);
        prop_assert_eq!(dec.buffered_len(), 0);
    }

    #[test]
    fn decode_never_panics_on_arbitrary_bytes(mut bytes in prop::collection::vec(any::<u8>(), 0..3000)) {
        // Give most inputs a valid prefix so the checks past it are reached.
        if bytes.len() >= 8 && bytes[0] % 4 != 0 {
            bytes[..4].copy_from_slice(b"RCmb");
            let len = bytes.len() as u32;
            bytes[4..8].copy_from_slice(&len.to_be_bytes());
        }
        if let Ok(msg) = decode(&bytes) {
            let again = encode(&msg);
            prop_assert_eq!(decode(&again).unwrap(), msg);
        }
    }

    #[test]
    fn mutated_frames_never_panic_and_accepted_ones_round_trip(
        msg in message(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let mut frame = encode(&msg);
        for (at, v) in flips {
            let i = at.index(frame.len());
            // Keep sig and totlen most of the time so deeper checks run.
            if i >= 8 || v % 8 == 0 {
                frame[i] = v;
            }
        }
        let mut dec = FrameDecoder::new();
        dec.push(&frame);
        let framed = dec.next_message();
        match decode(&frame) {
            Ok(m) => {
                prop_assert_eq!(decode(&encode(&m)).unwrap(), m.clone());
                prop_assert_eq!(framed.unwrap(), Some(m));
            }
            // A changed totlen leaves the framer waiting or lost; otherwise it reports
            // exactly what decode reports.
            Err(DecodeError::TotlenMismatch { .. }) => {}
            Err(e) => prop_assert_eq!(framed, Err(e)),
        }
    }

    #[test]
    fn framer_never_panics_on_arbitrary_chunks(
        chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..600), 0..8),
        max in 0u32..10_000,
    ) {
        let mut dec = FrameDecoder::with_max_frame_len(max);
        for c in &chunks {
            dec.push(c);
            loop {
                match dec.next_message() {
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(e) if e.framing_lost() => {
                        prop_assert!(dec.is_lost());
                        break;
                    }
                    Err(_) => {}
                }
            }
        }
    }
}

//! Byte layouts from the facts sheet (§3 header offsets, §3.1 light header, §4 sizes and the
//! worked example, §4.1 gossip entry, §4.3–4.5 data sections, §6 extensions), checked on
//! frames this crate encodes, and CLUSTER INFO counter names checked against the captures.

use ferrocluster_bus::*;
use ferrocluster_slot::{Slot, SlotSet};
use ferrocluster_testvectors::{files_with_suffix, read};

fn name(c: u8) -> NodeName {
    NodeName([c; 40])
}

fn header() -> FullHeader {
    let mut slots = SlotSet::new();
    slots.insert(Slot::new(0).unwrap());
    slots.insert(Slot::new(16383).unwrap());
    FullHeader {
        port: 0x1122,
        current_epoch: 0x0102_0304_0506_0708,
        config_epoch: 0x1112_1314_1516_1718,
        offset: 0x2122_2324_2526_2728,
        sender: name(b's'),
        myslots: slots,
        replicaof: Some(name(b'p')),
        myip: IpField::from_text(b"10.0.0.1").unwrap(),
        reserved: [0; 30],
        pport: 0x3344,
        cport: 0x5566,
        flags: node_flags::REPLICA | node_flags::MYSELF,
        state: cluster_state::FAIL,
        mflags: [msg_flags::PAUSED, 0, 0],
    }
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

fn be64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

#[test]
fn full_header_fields_sit_at_the_spec_offsets() {
    let f = encode(&Message::full(header(), Body::FailoverAuthRequest));
    assert_eq!(f.len(), 2256);
    assert_eq!(&f[0..4], b"RCmb");
    assert_eq!(be32(&f, 4), 2256);
    assert_eq!(be16(&f, 8), 1);
    assert_eq!(be16(&f, 10), 0x1122);
    assert_eq!(be16(&f, 12), 5);
    assert_eq!(be16(&f, 14), 0);
    assert_eq!(be64(&f, 16), 0x0102_0304_0506_0708);
    assert_eq!(be64(&f, 24), 0x1112_1314_1516_1718);
    assert_eq!(be64(&f, 32), 0x2122_2324_2526_2728);
    assert_eq!(&f[40..80], &[b's'; 40]);
    // Slot j is bit j&7 of byte j/8: slot 0 = byte 0 mask 0x01, slot 16383 = byte 2047 mask 0x80.
    assert_eq!(f[80], 0x01);
    assert_eq!(f[80 + 2047], 0x80);
    assert!(f[81..80 + 2047].iter().all(|&b| b == 0));
    assert_eq!(&f[2128..2168], &[b'p'; 40]);
    assert_eq!(&f[2168..2176], b"10.0.0.1");
    assert!(f[2176..2214].iter().all(|&b| b == 0));
    assert_eq!(be16(&f, 2214), 0);
    assert!(f[2216..2246].iter().all(|&b| b == 0));
    assert_eq!(be16(&f, 2246), 0x3344);
    assert_eq!(be16(&f, 2248), 0x5566);
    assert_eq!(be16(&f, 2250), 0x12);
    assert_eq!(f[2252], 1);
    assert_eq!(&f[2253..2256], &[1, 0, 0]);
}

#[test]
fn a_primary_sends_forty_zero_bytes_in_replicaof() {
    let mut h = header();
    h.replicaof = None;
    let f = encode(&Message::full(h.clone(), Body::MfStart));
    assert!(f[2128..2168].iter().all(|&b| b == 0));
    assert_eq!(decode(&f).unwrap().full_header().unwrap().replicaof, None);
    // Some(all zero) cannot be told apart on the wire.
    h.replicaof = Some(NodeName::ZERO);
    assert_eq!(encode(&Message::full(h, Body::MfStart)), f);
}

#[test]
fn worked_example_ping_with_shard_id_extension() {
    // Facts sheet §4: V8 PING to an extension-capable peer, no gossip, shard_id only.
    let mut h = header();
    h.mflags = [0; 3];
    let shard = name(b'd');
    let ping = Message::full(
        h.clone(),
        Body::Ping(Gossip {
            entries: vec![],
            extensions: vec![PingExt::ShardId(shard)],
        }),
    );
    let f = encode(&ping);
    assert_eq!(f.len(), 2304);
    assert_eq!(&f[4..8], &[0x00, 0x00, 0x09, 0x00]);
    assert_eq!(&f[8..10], &[0x00, 0x01]);
    assert_eq!(&f[12..14], &[0x00, 0x00]);
    assert_eq!(&f[14..16], &[0x00, 0x00]);
    assert_eq!(&f[2214..2216], &[0x00, 0x01]);
    assert_eq!(f[2253], 0x04);
    assert_eq!(&f[2256..2264], &[0, 0, 0, 0x30, 0, 3, 0, 0]);
    assert_eq!(&f[2264..2304], &[b'd'; 40]);
    // The same PING to a peer that never sent EXT_DATA: 2256 bytes, extensions 0, EXT_DATA set.
    h.mflags = [msg_flags::EXT_DATA, 0, 0];
    let bare = encode(&Message::full(h, Body::Ping(Gossip::default())));
    assert_eq!(bare.len(), 2256);
    assert_eq!(&bare[2214..2216], &[0, 0]);
    assert_eq!(bare[2253], 0x04);
}

#[test]
fn gossip_entry_fields_sit_at_the_spec_offsets() {
    let entry = GossipEntry {
        name: name(b'n'),
        ping_sent_secs: 0xA1A2_A3A4,
        pong_received_secs: 1_796_060_455,
        ip: IpField::from_text(b"127.0.0.1").unwrap(),
        port: 22005,
        cport: 32005,
        flags: 3074,
        pport: 0x0102,
        reserved: 0,
    };
    let f = encode(&Message::full(
        header(),
        Body::Pong(Gossip {
            entries: vec![entry.clone(), entry],
            extensions: vec![],
        }),
    ));
    assert_eq!(f.len(), 2256 + 2 * 104);
    assert_eq!(be16(&f, 14), 2);
    for e in [&f[2256..2360], &f[2360..2464]] {
        assert_eq!(&e[0..40], &[b'n'; 40]);
        assert_eq!(be32(e, 40), 0xA1A2_A3A4);
        assert_eq!(be32(e, 44), 1_796_060_455);
        assert_eq!(&e[48..57], b"127.0.0.1");
        assert!(e[57..94].iter().all(|&b| b == 0));
        assert_eq!(be16(e, 94), 22005);
        assert_eq!(be16(e, 96), 32005);
        assert_eq!(be16(e, 98), 3074);
        assert_eq!(be16(e, 100), 0x0102);
        assert_eq!(be16(e, 102), 0);
    }
}

#[test]
fn fixed_message_sizes() {
    let h = header();
    let full = |b: Body| encode(&Message::full(h.clone(), b)).len();
    assert_eq!(full(Body::Fail { about: name(b'f') }), 2296);
    assert_eq!(full(Body::FailoverAuthRequest), 2256);
    assert_eq!(full(Body::FailoverAuthAck), 2256);
    assert_eq!(full(Body::MfStart), 2256);
    assert_eq!(full(Body::Update(Box::default())), 4352);
    assert_eq!(FAIL_LEN, 2296);
    assert_eq!(UPDATE_LEN, 4352);
}

#[test]
fn update_block_layout() {
    let mut slots = SlotSet::new();
    slots.insert(Slot::new(9).unwrap());
    let up = Update {
        config_epoch: 10,
        name: name(b'u'),
        slots,
    };
    let f = encode(&Message::full(header(), Body::Update(Box::new(up))));
    assert_eq!(be64(&f, 2256), 10);
    assert_eq!(&f[2264..2304], &[b'u'; 40]);
    assert_eq!(f[2304 + 1], 0b10);
}

#[test]
fn publish_full_and_light_layouts() {
    let p = Publish {
        channel: b"news".to_vec(),
        message: b"hello-cluster".to_vec(),
    };
    let full = encode(&Message::full(header(), Body::Publish(p.clone())));
    assert_eq!(full.len(), 2256 + 8 + 4 + 13);
    assert_eq!(be32(&full, 2256), 4);
    assert_eq!(be32(&full, 2260), 13);
    assert_eq!(&full[2264..], b"newshello-cluster");

    // Light: 16 bytes (sig, totlen, ver, u16 0, type | 0x8000, u16 0), then the same data;
    // the captured publish-light-01.bin is exactly this message.
    let light = encode(&Message::light(Body::Publish(p.clone())));
    assert_eq!(light.len(), 41);
    assert_eq!(&light[8..16], &[0, 1, 0, 0, 0x80, 0x04, 0, 0]);
    assert_eq!(light, read("valkey-8.0/bus/publish-light-01.bin"));
    let shard = encode(&Message::light(Body::PublishShard(p)));
    assert_eq!(&shard[12..14], &[0x80, 0x0a]);
}

#[test]
fn module_layouts_full_and_light() {
    let m = ModuleMsg {
        module_id: 0x0807_0605_0403_0201,
        module_type: 7,
        payload: b"abc".to_vec(),
    };
    let full = encode(&Message::full(header(), Body::Module(m.clone())));
    assert_eq!(full.len(), 2256 + 13 + 3);
    // module_id is the sender's native (little-endian) u64, not byte-swapped (§4.5).
    assert_eq!(&full[2256..2264], &[1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(be32(&full, 2264), 3);
    assert_eq!(full[2268], 7);
    assert_eq!(&full[2269..], b"abc");
    let light = encode(&Message::light(Body::Module(m.clone())));
    assert_eq!(light.len(), 16 + 13 + 3);
    assert_eq!(&light[12..14], &[0x80, 0x09]);
    let back = decode(&light).unwrap();
    assert_eq!(back.body, Body::Module(m));
}

#[test]
fn string_extensions_are_nul_terminated_and_padded_to_eight() {
    // "node-22001.example" -> 32, "n22001" -> 16, "127.0.0.1" -> 24 (captured lengths).
    for (text, len) in [
        (&b"node-22001.example"[..], 32),
        (b"n22001", 16),
        (b"127.0.0.1", 24),
        (b"", 16),
        (b"1234567", 16),
        (b"12345678", 24),
    ] {
        let ext = PingExt::Hostname(ExtString::new(text));
        if text.is_empty() {
            // An empty value still needs its NUL: 8 + align8(1) = 16.
            assert_eq!(ext.wire_len(), 16);
        } else {
            assert_eq!(ext.wire_len(), len, "{text:?}");
        }
    }
    let f = encode(&Message::full(
        header(),
        Body::Meet(Gossip {
            entries: vec![],
            extensions: vec![
                PingExt::Hostname(ExtString::new(b"node-22001.example")),
                PingExt::ForgottenNode {
                    name: name(b'x'),
                    ttl_secs: 60,
                },
            ],
        }),
    ));
    assert_eq!(f.len(), 2256 + 32 + 56);
    assert_eq!(be32(&f, 2256), 32);
    assert_eq!(be16(&f, 2260), ext_type::HOSTNAME);
    assert_eq!(&f[2264..2283], b"node-22001.example\0");
    assert_eq!(be32(&f, 2288), 56);
    assert_eq!(be16(&f, 2292), ext_type::FORGOTTEN_NODE);
    assert_eq!(be64(&f, 2296 + 40), 60);
}

#[test]
fn message_type_names_match_cluster_info_counters() {
    // Facts sheet §4 stats names, in code order.
    let names: Vec<&str> = MessageType::KNOWN.iter().map(|t| t.name()).collect();
    assert_eq!(
        names,
        [
            "ping",
            "pong",
            "meet",
            "fail",
            "publish",
            "auth-req",
            "auth-ack",
            "update",
            "mfstart",
            "module",
            "publishshard"
        ]
    );
    for (code, t) in MessageType::KNOWN.iter().enumerate() {
        assert_eq!(t.code() as usize, code);
        assert_eq!(MessageType::from_code(code as u16 | 0x8000), *t);
    }
    assert_eq!(MessageType::Unknown(11).name(), "unknown");
    // Every counter the real servers printed names one of our types.
    let mut seen = std::collections::BTreeSet::new();
    for flavor in ferrocluster_testvectors::FLAVORS {
        for path in files_with_suffix(format!("{flavor}/text"), "cluster-info.resp") {
            let text = String::from_utf8(read(&path)).unwrap();
            for line in text.split("\r\n") {
                if let Some(rest) = line.strip_prefix("cluster_stats_messages_") {
                    let key = rest.split(':').next().unwrap();
                    let name = key
                        .strip_suffix("_sent")
                        .or_else(|| key.strip_suffix("_received"));
                    if let Some(name) = name {
                        assert!(names.contains(&name), "{path:?}: {name}");
                        seen.insert(name.to_owned());
                    }
                }
            }
        }
    }
    assert!(seen.len() >= 9, "counters found in the captures: {seen:?}");
    assert!(seen.contains("auth-req") && seen.contains("auth-ack") && seen.contains("mfstart"));
}

/// `tls-cluster yes` (Valkey `clusterBuildMessageHdr` / `clusterSetGossipEntry`): the TLS
/// port travels in `port` (header offset 10, facts sheet §3; and in each gossip entry), the
/// plaintext one in `pport`; `swap_tls_ports` turns one order into the other, header and
/// every gossip entry, and is its own inverse.
#[test]
fn swap_tls_ports_swaps_header_and_gossip_entries() {
    let entry = GossipEntry {
        name: name(b'g'),
        port: 7000,
        pport: 7100,
        cport: 17100,
        ..GossipEntry::default()
    };
    let body = Body::Ping(Gossip {
        entries: vec![entry.clone(), entry],
        extensions: Vec::new(),
    });
    let before = Message::full(header(), body);
    let mut m = before.clone();
    m.swap_tls_ports();
    let Header::Full(h) = &m.header else {
        panic!("full header")
    };
    assert_eq!((h.port, h.pport, h.cport), (0x3344, 0x1122, 0x5566));
    let g = m.body.gossip().unwrap();
    assert!(g
        .entries
        .iter()
        .all(|e| (e.port, e.pport, e.cport) == (7100, 7000, 17100)));
    // On the wire: header offset 10 carries the old pport.
    let bytes = encode(&m);
    assert_eq!(be16(&bytes, 10), 0x3344);
    m.swap_tls_ports();
    assert_eq!(m, before);
}

//! Every captured frame of Redis 7.0.15 and Valkey 8.0.1 (shared/vectors/*/bus/): decoded
//! fields checked against index.json, re-encoded to the identical bytes, and framed from
//! one concatenated stream.

use ferrocluster_bus::{
    decode, encode, encode_into, ext_type, Body, FrameDecoder, Header, Message, MessageType,
    NodeName, PingExt,
};
use ferrocluster_slot::SlotSet;
use ferrocluster_testvectors::{files_with_suffix, read, read_json, FLAVORS};
use serde_json::Value;

fn u(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("index field {key} missing in {v}"))
}

fn name_or_null(n: Option<&NodeName>) -> Value {
    match n {
        Some(n) => Value::String(n.as_str().expect("captured names are text").to_owned()),
        None => Value::Null,
    }
}

fn ranges(set: &SlotSet) -> Value {
    Value::Array(
        set.ranges()
            .map(|r| {
                Value::Array(vec![
                    Value::from(r.start().get()),
                    Value::from(r.end().get()),
                ])
            })
            .collect(),
    )
}

fn check_publish(file: &str, body: &Value, channel: &[u8], message: &[u8]) {
    assert_eq!(u(body, "channel_len") as usize, channel.len(), "{file}");
    assert_eq!(u(body, "message_len") as usize, message.len(), "{file}");
    assert_eq!(
        body["channel"].as_str().unwrap().as_bytes(),
        channel,
        "{file}"
    );
    assert_eq!(
        body["message"].as_str().unwrap().as_bytes(),
        message,
        "{file}"
    );
}

fn check_ext(file: &str, want: &Value, got: &PingExt) {
    assert_eq!(u(want, "type") as u16, got.ext_type(), "{file}");
    assert_eq!(u(want, "length") as usize, got.wire_len(), "{file}");
    assert_eq!(u(want, "unused"), 0, "{file}");
    match got {
        PingExt::Hostname(s)
        | PingExt::HumanNodename(s)
        | PingExt::ClientIpv4(s)
        | PingExt::ClientIpv6(s) => {
            assert_eq!(want["value"].as_str(), s.as_str(), "{file}");
        }
        PingExt::ForgottenNode { name, ttl_secs } => {
            assert_eq!(want["node"], name_or_null(Some(name)), "{file}");
            assert_eq!(u(want, "ttl"), *ttl_secs, "{file}");
        }
        PingExt::ShardId(id) => assert_eq!(want["shard_id"], name_or_null(Some(id)), "{file}"),
        PingExt::Raw(raw) => panic!("{file}: captured extension decoded raw: {raw:?}"),
    }
}

/// Checks one decoded message against its index.json entry.
fn check_message(file: &str, want: &Value, msg: &Message) {
    let code = u(want, "type") as u16;
    assert_eq!(msg.message_type(), MessageType::from_code(code), "{file}");
    assert_eq!(
        msg.message_type().name().replace('-', "_"),
        want["type_name"]
            .as_str()
            .unwrap()
            .replace("failover_auth_request", "auth_req")
            .replace("failover_auth_ack", "auth_ack"),
        "{file}"
    );
    assert_eq!(want["light"].as_bool(), Some(msg.is_light()), "{file}");
    assert_eq!(u(want, "ver"), 1, "{file}");
    match &msg.header {
        Header::Light(light) => {
            assert_eq!(u(want, "raw_type") as u16, code | 0x8000, "{file}");
            assert_eq!(light.reserved, [0; 4], "{file}");
        }
        Header::Full(h) => {
            assert_eq!(u(want, "trailing_bytes"), 0, "{file}");
            assert_eq!(want["sender"], name_or_null(Some(&h.sender)), "{file}");
            assert_eq!(u(want, "port") as u16, h.port, "{file}");
            assert_eq!(u(want, "cport") as u16, h.cport, "{file}");
            assert_eq!(u(want, "pport") as u16, h.pport, "{file}");
            assert_eq!(want["myip"].as_str(), h.myip.as_str(), "{file}");
            assert_eq!(h.myip.is_unset(), want["myip"] == "", "{file}");
            assert_eq!(u(want, "currentEpoch"), h.current_epoch, "{file}");
            assert_eq!(u(want, "configEpoch"), h.config_epoch, "{file}");
            assert_eq!(u(want, "offset"), h.offset, "{file}");
            assert_eq!(u(want, "flags") as u16, h.flags, "{file}");
            assert_eq!(u(want, "state") as u8, h.state, "{file}");
            let mflags: Vec<u8> = want["mflags"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as u8)
                .collect();
            assert_eq!(mflags, h.mflags, "{file}");
            assert_eq!(
                want["slaveof"],
                name_or_null(h.replicaof.as_ref()),
                "{file}"
            );
            assert_eq!(want["myslots"], ranges(&h.myslots), "{file}");
            assert_eq!(
                want["notused1_all_zero"].as_bool(),
                Some(h.reserved == [0; 30]),
                "{file}"
            );
            if msg.body.gossip().is_none() {
                assert_eq!(u(want, "count"), 0, "{file}");
                assert_eq!(u(want, "extensions_field"), 0, "{file}");
            }
        }
    }
    match &msg.body {
        Body::Ping(g) | Body::Pong(g) | Body::Meet(g) => {
            assert_eq!(u(want, "count") as usize, g.entries.len(), "{file}");
            assert_eq!(
                u(want, "gossip_entries") as usize,
                g.entries.len(),
                "{file}"
            );
            assert_eq!(
                u(want, "extensions_field") as usize,
                g.extensions.len(),
                "{file}"
            );
            let wg = want["gossip"].as_array().unwrap();
            assert_eq!(wg.len(), g.entries.len(), "{file}");
            for (w, e) in wg.iter().zip(&g.entries) {
                assert_eq!(w["nodename"], name_or_null(Some(&e.name)), "{file}");
                assert_eq!(u(w, "ping_sent") as u32, e.ping_sent_secs, "{file}");
                assert_eq!(u(w, "pong_received") as u32, e.pong_received_secs, "{file}");
                assert_eq!(w["ip"].as_str(), e.ip.as_str(), "{file}");
                assert_eq!(u(w, "port") as u16, e.port, "{file}");
                assert_eq!(u(w, "cport") as u16, e.cport, "{file}");
                assert_eq!(u(w, "pport") as u16, e.pport, "{file}");
                assert_eq!(u(w, "flags") as u16, e.flags, "{file}");
                assert_eq!(e.reserved, 0, "{file}");
            }
            let we = want["extensions"].as_array().unwrap();
            assert_eq!(we.len(), g.extensions.len(), "{file}");
            for (w, e) in we.iter().zip(&g.extensions) {
                check_ext(file, w, e);
            }
            let types: Vec<u64> = g.extensions.iter().map(|e| e.ext_type().into()).collect();
            assert_eq!(want["extension_types"], Value::from(types), "{file}");
        }
        Body::Fail { about } => {
            assert_eq!(want["body"]["about"], name_or_null(Some(about)), "{file}")
        }
        Body::Publish(p) | Body::PublishShard(p) => {
            check_publish(file, &want["body"], &p.channel, &p.message)
        }
        Body::Update(up) => {
            let b = &want["body"];
            assert_eq!(u(b, "configEpoch"), up.config_epoch, "{file}");
            assert_eq!(b["nodename"], name_or_null(Some(&up.name)), "{file}");
            assert_eq!(b["slots"], ranges(&up.slots), "{file}");
        }
        Body::FailoverAuthRequest | Body::FailoverAuthAck | Body::MfStart => {}
        other => panic!("{file}: unexpected body in the captures: {other:?}"),
    }
}

#[test]
fn every_captured_frame_decodes_matches_the_index_and_reencodes_identically() {
    let mut total = 0;
    for flavor in FLAVORS {
        let index = read_json(format!("{flavor}/bus/index.json"));
        let messages = index["messages"].as_array().expect("messages array");
        let bins = files_with_suffix(format!("{flavor}/bus"), ".bin");
        assert_eq!(
            bins.len(),
            messages.len(),
            "{flavor}: every .bin is indexed"
        );
        assert!(messages.len() >= 30, "{flavor}: captures present");
        let mut reused = Vec::new();
        for want in messages {
            let file = want["file"].as_str().unwrap();
            let bytes = read(format!("{flavor}/bus/{file}"));
            assert_eq!(u(want, "totlen") as usize, bytes.len(), "{flavor}/{file}");
            let msg = decode(&bytes).unwrap_or_else(|e| panic!("{flavor}/{file}: {e}"));
            check_message(&format!("{flavor}/{file}"), want, &msg);
            assert_eq!(encode(&msg), bytes, "{flavor}/{file}: re-encoding");
            reused.clear();
            encode_into(&msg, &mut reused);
            assert_eq!(reused, bytes, "{flavor}/{file}: encode_into");
            total += 1;
        }
    }
    assert_eq!(total, 32 + 34, "32 Redis 7.0 and 34 Valkey 8.0 frames");
}

#[test]
fn captures_cover_every_variant_the_readme_describes() {
    // Valkey: light PUBLISH (type 0x8004, 41 bytes) and PUBLISHSHARD (0x800a).
    let light = read("valkey-8.0/bus/publish-light-01.bin");
    assert_eq!(light.len(), 41);
    assert_eq!(&light[12..14], &[0x80, 0x04]);
    let msg = decode(&light).unwrap();
    assert!(msg.is_light());
    assert!(
        matches!(&msg.body, Body::Publish(p) if p.channel == b"news" && p.message == b"hello-cluster")
    );
    let shard = decode(&read("valkey-8.0/bus/publishshard-light-01.bin")).unwrap();
    assert_eq!(shard.message_type(), MessageType::PublishShard);
    assert!(shard.is_light());

    // Valkey: forgotten_node (56 bytes, ttl 59) and shard_id (48) in ping-07.
    let ping = decode(&read("valkey-8.0/bus/ping-07.bin")).unwrap();
    let g = ping.body.gossip().unwrap();
    assert!(matches!(
        g.extensions[0],
        PingExt::ForgottenNode { ttl_secs: 59, .. }
    ));
    assert_eq!(g.extensions[0].wire_len(), 56);
    assert_eq!(g.extensions[1].ext_type(), ext_type::SHARD_ID);
    assert_eq!(g.extensions[1].wire_len(), 48);

    // Redis 7.0: hostname "node-22004.example" -> extension length 32, EXT_DATA only then.
    let ping = decode(&read("redis-7.0/bus/ping-05.bin")).unwrap();
    let h = ping.full_header().unwrap();
    assert!(h.ext_data());
    let g = ping.body.gossip().unwrap();
    assert!(
        matches!(&g.extensions[..], [PingExt::Hostname(s)] if s.as_str() == Some("node-22004.example"))
    );
    assert_eq!(g.extensions[0].wire_len(), 32);

    // Valkey: the first MEET of a handshake has EXT_DATA but no extensions.
    let meet = decode(&read("valkey-8.0/bus/meet-01.bin")).unwrap();
    assert!(meet.full_header().unwrap().ext_data());
    assert!(meet.body.gossip().unwrap().extensions.is_empty());
}

#[test]
fn all_captures_concatenated_frame_in_any_chunking() {
    let mut stream = Vec::new();
    let mut expected = Vec::new();
    for flavor in FLAVORS {
        for path in files_with_suffix(format!("{flavor}/bus"), ".bin") {
            let bytes = read(&path);
            expected.push(decode(&bytes).unwrap());
            stream.extend_from_slice(&bytes);
        }
    }
    for chunk in [1usize, 7, 14, 15, 16, 1000, 2256, 2257, 4096, stream.len()] {
        let mut dec = FrameDecoder::new();
        let mut got = Vec::new();
        for piece in stream.chunks(chunk) {
            dec.push(piece);
            while let Some(msg) = dec.next_message().unwrap() {
                got.push(msg);
            }
        }
        assert_eq!(dec.buffered_len(), 0, "chunk {chunk}");
        assert_eq!(got, expected, "chunk {chunk}");
    }
}

//! Cluster bus codec (ferrocluster-bus): decode and encode of a PING with 0, 10 and 100 gossip
//! entries plus a shard_id extension (what a Valkey 8 node sends), each next to a plain copy of
//! the same bytes into a reused Vec (memcpy: the limit any codec is measured against).
#![allow(clippy::disallowed_methods)]

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ferrocluster_bus::{
    decode, encode, encode_into, msg_flags, node_flags, Body, FullHeader, Gossip, GossipEntry,
    IpField, Message, NodeName, PingExt,
};
use ferrocluster_slot::{Slot, SlotRange, SlotSet};
use std::hint::black_box;

fn hex_name(i: u32) -> NodeName {
    let text = format!("{:040x}", u128::from(i) * 0x9e37_79b9_7f4a_7c15 + 1);
    NodeName::from_slice(&text.as_bytes()[..40]).expect("40 hex digits")
}

fn ping(entries: u32) -> Message {
    let mut slots = SlotSet::new();
    slots.insert_range(SlotRange::new(Slot::new(0).unwrap(), Slot::new(5460).unwrap()).unwrap());
    let header = FullHeader {
        port: 22001,
        current_epoch: 7,
        config_epoch: 1,
        offset: 523,
        sender: hex_name(0),
        myslots: slots,
        pport: 0,
        cport: 32001,
        flags: node_flags::PRIMARY | node_flags::MYSELF | node_flags::LIGHT_HDR_SUPPORTED,
        mflags: [msg_flags::EXT_DATA, 0, 0],
        ..FullHeader::default()
    };
    let entries = (1..=entries)
        .map(|i| GossipEntry {
            name: hex_name(i),
            ping_sent_secs: 0,
            pong_received_secs: 1_796_060_455,
            ip: IpField::from_text(b"127.0.0.1").unwrap(),
            port: 22000 + i as u16,
            cport: 32000 + i as u16,
            flags: node_flags::REPLICA
                | node_flags::EXTENSIONS_SUPPORTED
                | node_flags::LIGHT_HDR_SUPPORTED,
            pport: 0,
            reserved: 0,
        })
        .collect();
    Message::full(
        header,
        Body::Ping(Gossip {
            entries,
            extensions: vec![PingExt::ShardId(hex_name(999))],
        }),
    )
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("bus_ping");
    for n in [0u32, 10, 100] {
        let msg = ping(n);
        let frame = encode(&msg);
        assert_eq!(decode(&frame).unwrap(), msg);
        g.throughput(Throughput::Bytes(frame.len() as u64));
        g.bench_with_input(BenchmarkId::new("decode", n), &frame, |b, f| {
            b.iter(|| decode(black_box(f)).unwrap())
        });
        let mut out = Vec::with_capacity(frame.len());
        g.bench_with_input(BenchmarkId::new("encode_into", n), &msg, |b, m| {
            b.iter(|| {
                out.clear();
                encode_into(black_box(m), &mut out);
                out.len()
            })
        });
        g.bench_with_input(BenchmarkId::new("encode", n), &msg, |b, m| {
            b.iter(|| encode(black_box(m)))
        });
        let mut copy = Vec::with_capacity(frame.len());
        g.bench_with_input(BenchmarkId::new("memcpy", n), &frame, |b, f| {
            b.iter(|| {
                copy.clear();
                copy.extend_from_slice(black_box(f));
                copy.len()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! Fuzz target: the replica side of the replication protocol (ferrocluster-dataplane
//! `Replication::handle_upstream_bytes`): handshake replies, the RDB preamble and payload in
//! both framings, the command stream.
//!
//! Input: one seed byte (picks the read sizes, 1 to 256 bytes), then the bytes the "primary"
//! sends. Properties: no panic; after an error the engine asks to reconnect and the rest of
//! the input goes to the new link; the outcome (RDB bytes, commands, ACKs, errors) is the
//! same whether the stream arrives in pieces or all at once; RDB chunks only come between an
//! `RdbBegin` and its `RdbEnd` / `RdbAbort`.
#![no_main]

use ferrocluster_dataplane::{Millis, Output, Replication, ReplicationConfig, Role, UpstreamId};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, PartialEq, Default)]
struct Outcome {
    to_primary: Vec<u8>,
    rdb: Vec<u8>,
    marks: Vec<&'static str>,
    applied: Vec<(u32, Vec<Vec<u8>>)>,
    errors: usize,
}

fn drain(r: &mut Replication, o: &mut Outcome, link: &mut Option<UpstreamId>, in_rdb: &mut bool) {
    while let Some(out) = r.poll_output() {
        match out {
            Output::Connect { link: l, .. } => *link = Some(l),
            Output::ToPrimary { bytes, .. } => o.to_primary.extend(bytes),
            Output::RdbBegin { .. } => {
                assert!(!*in_rdb);
                *in_rdb = true;
                o.marks.push("begin");
            }
            Output::RdbChunk(b) => {
                assert!(*in_rdb, "RDB bytes outside a transfer");
                o.rdb.extend(b);
            }
            Output::RdbEnd | Output::RdbAbort => {
                assert!(*in_rdb);
                *in_rdb = false;
                o.marks.push("end");
            }
            Output::Apply(c) => o.applied.push((c.db, c.argv)),
            Output::ApplyTransaction(cs) => {
                for c in cs {
                    o.applied.push((c.db, c.argv));
                }
            }
            _ => {}
        }
    }
}

fn run(data: &[u8], sizes: Option<u8>) -> Outcome {
    let now = Millis(1_000);
    let role = Role::Replica {
        host: "p".into(),
        port: 1,
    };
    let mut r = Replication::new(ReplicationConfig::default(), 1, role, None, now).unwrap();
    let mut o = Outcome::default();
    let (mut link, mut in_rdb) = (None, false);
    drain(&mut r, &mut o, &mut link, &mut in_rdb);
    let mut rest = data;
    let mut k = 0u32;
    while !rest.is_empty() {
        let Some(l) = link.take() else { break };
        r.handle_upstream_connected(l, now);
        drain(&mut r, &mut o, &mut link, &mut in_rdb);
        let mut failed = false;
        while !rest.is_empty() {
            let n = match sizes {
                None => rest.len(),
                Some(s) => {
                    k = k
                        .wrapping_mul(1_103_515_245)
                        .wrapping_add(u32::from(s) + 12_345);
                    1 + (k >> 16) as usize % 256
                }
            }
            .min(rest.len());
            let res = r.handle_upstream_bytes(l, &rest[..n], now);
            rest = &rest[n..];
            drain(&mut r, &mut o, &mut link, &mut in_rdb);
            if res.is_err() {
                o.errors += 1;
                failed = true;
                break;
            }
        }
        if !failed {
            break;
        }
        // Reconnects happen immediately (a dropped stream) or at the next cron.
        if link.is_none() {
            r.handle_timeout(Millis(now.0 + 1_000 * (o.errors as u64 + 1)));
            drain(&mut r, &mut o, &mut link, &mut in_rdb);
        }
    }
    o
}

fuzz_target!(|input: &[u8]| {
    let Some((&seed, data)) = input.split_first() else {
        return;
    };
    let whole = run(data, None);
    if whole.errors == 0 {
        let parts = run(data, Some(seed));
        assert_eq!(whole, parts, "chunking changed the outcome");
    } else {
        let _ = run(data, Some(seed));
    }
});

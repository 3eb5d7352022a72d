//! Fuzz target: the target side of an atomic slot migration data connection
//! (ferrocluster-dataplane `AsmPlane::handle_bytes` on an import link): the source's snapshot,
//! its streamed writes and its SYNCSLOTS messages.
//!
//! Input: one seed byte (picks the read sizes: `shared/read_sizes.rs`), then the bytes the "source"
//! sends after ESTABLISH. Properties: no panic; the outcome (applies with their databases,
//! SYNCSLOTS messages, the protocol error that closes the link) is the same whether the
//! stream arrives in pieces or all at once; every apply's database is below the configured
//! count; nothing comes out for the link after it closed.
#![no_main]

use ferrocluster_dataplane::{AsmConfig, AsmOutput, AsmPlane, ConnId, Millis};
use ferrocluster_migration::{JobName, MigrationInput};
use ferrocluster_slot::{Slot, SlotSet};
use libfuzzer_sys::fuzz_target;

#[path = "shared/read_sizes.rs"]
mod read_sizes;
use read_sizes::sizes;

const CONN: ConnId = ConnId(3);
const DATABASES: u32 = 4;

#[derive(Debug, PartialEq, Default)]
struct Outcome {
    applied: Vec<(u32, Vec<Vec<u8>>)>,
    syncslots: Vec<Vec<Vec<u8>>>,
    closed: bool,
    failed: bool,
}

fn drain(a: &mut AsmPlane, o: &mut Outcome) {
    while let Some(out) = a.poll_output() {
        match out {
            AsmOutput::Apply { conn, db, argv } => {
                assert!(!o.closed && !o.failed, "an apply after the link ended");
                assert_eq!(conn, CONN);
                assert!(db < DATABASES);
                o.applied.push((db, argv));
            }
            AsmOutput::SyncSlots { conn, argv } => {
                assert!(!o.closed && !o.failed);
                assert_eq!(conn, CONN);
                o.syncslots.push(argv);
            }
            AsmOutput::Close { conn } => {
                assert_eq!(conn, CONN);
                o.closed = true;
            }
            AsmOutput::Migration(MigrationInput::ImportApplyError { .. }) => o.failed = true,
            AsmOutput::Migration(_) | AsmOutput::Event(_) => {}
            AsmOutput::Send { .. } => panic!("an import link writes only what the node says"),
        }
    }
}

fn run(data: &[u8], pieces: Option<u8>) -> Outcome {
    let now = Millis(1_000);
    let cfg = AsmConfig {
        databases: DATABASES,
        ..AsmConfig::default()
    };
    let mut a = AsmPlane::new(cfg, now);
    let mut slots = SlotSet::new();
    slots.insert(Slot::new(553).unwrap());
    let job = JobName::from_bytes(&[b'a'; 40]).unwrap();
    a.accept_import(job, CONN, slots, &[], now).unwrap();
    let mut o = Outcome::default();
    match pieces {
        None => a.handle_bytes(CONN, data, now),
        Some(seed) => {
            let mut next = sizes(seed);
            let mut at = 0;
            while at < data.len() {
                let end = (at + next()).min(data.len());
                a.handle_bytes(CONN, &data[at..end], now);
                drain(&mut a, &mut o);
                at = end;
            }
        }
    }
    drain(&mut a, &mut o);
    o
}

fuzz_target!(|data: &[u8]| {
    let Some((&seed, stream)) = data.split_first() else {
        return;
    };
    let whole = run(stream, None);
    let pieces = run(stream, Some(seed));
    assert_eq!(whole, pieces);
});

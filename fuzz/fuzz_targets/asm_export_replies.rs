//! Fuzz target: the source side of an atomic slot migration data connection
//! (ferrocluster-dataplane `AsmPlane::handle_bytes` on an export link): the target's AUTH and
//! ESTABLISH reply lines, then its SYNCSLOTS messages.
//!
//! Input: one mode byte (bit 0: AUTH is sent first), one seed byte (picks the read sizes:
//! `shared/read_sizes.rs`), then the bytes the "target" sends. Properties: no panic; the outcome (the
//! facts for the node, the messages, the close) is the same whether the replies arrive in
//! pieces or all at once; the AUTH reply comes before the ESTABLISH reply, each at most once;
//! only `CLUSTER SYNCSLOTS` messages reach the node, after the ESTABLISH reply; nothing
//! comes out for the link after it closed.
#![no_main]

use ferrocluster_dataplane::{AsmConfig, AsmOutput, AsmPlane, ConnId, Millis};
use ferrocluster_migration::{JobName, MigrationInput, SyncSlots};
use ferrocluster_slot::{Slot, SlotRange};
use libfuzzer_sys::fuzz_target;

#[path = "shared/read_sizes.rs"]
mod read_sizes;
use read_sizes::sizes;

const CONN: ConnId = ConnId(5);

#[derive(Debug, PartialEq, Default)]
struct Outcome {
    facts: Vec<String>,
    messages: Vec<Vec<Vec<u8>>>,
    closed: bool,
}

fn drain(a: &mut AsmPlane, o: &mut Outcome) {
    while let Some(out) = a.poll_output() {
        // After the data plane closes a link only the node's fact of it follows.
        let fact_of_close = matches!(out, AsmOutput::Migration(MigrationInput::LinkClosed { .. }));
        assert!(
            !o.closed || fact_of_close,
            "output after the link closed: {out:?}"
        );
        match out {
            AsmOutput::Migration(MigrationInput::AuthReply { .. }) => {
                assert!(o.facts.iter().all(|f| f != "auth" && f != "establish"));
                o.facts.push("auth".into());
            }
            AsmOutput::Migration(MigrationInput::EstablishReply { line, .. }) => {
                assert!(line.ends_with(b"\r\n"));
                assert!(!o.facts.iter().any(|f| f == "establish"));
                o.facts.push("establish".into());
            }
            AsmOutput::Migration(m) => o.facts.push(format!("{m:?}")),
            AsmOutput::SyncSlots { argv, .. } => {
                assert!(o.facts.iter().any(|f| f == "establish"));
                assert!(argv[0].eq_ignore_ascii_case(b"cluster"));
                assert!(argv[1].eq_ignore_ascii_case(b"syncslots"));
                o.messages.push(argv);
            }
            AsmOutput::Close { .. } => o.closed = true,
            AsmOutput::Send { .. } | AsmOutput::Event(_) => {}
            AsmOutput::Apply { .. } => panic!("an export link applies nothing"),
        }
    }
    if o.facts
        .iter()
        .any(|f| f.starts_with("LinkClosed") || f.starts_with("EstablishReplyTooLarge"))
    {
        o.closed = true;
    }
}

fn run(data: &[u8], auth: bool, pieces: Option<u8>) -> Outcome {
    let now = Millis(1_000);
    let mut a = AsmPlane::new(AsmConfig::default(), now);
    let job = JobName::from_bytes(&[b'j'; 40]).unwrap();
    let mut o = Outcome::default();
    a.handle_connected(job, CONN, now).unwrap();
    if auth {
        a.send_auth(CONN, None, b"pw", now).unwrap();
    }
    let s = Slot::new(7).unwrap();
    a.send_message(
        CONN,
        &SyncSlots::Establish {
            source: None,
            name: job,
            ranges: vec![SlotRange::single(s)],
        },
        now,
    );
    drain(&mut a, &mut o);
    o.facts.clear();
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
    let [mode, seed, stream @ ..] = data else {
        return;
    };
    let auth = mode & 1 == 1;
    assert_eq!(run(stream, auth, None), run(stream, auth, Some(*seed)));
});

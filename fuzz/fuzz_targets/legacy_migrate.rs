//! Fuzz target: legacy migration (ferrocluster-dataplane `legacy`): the RESTORE checks and
//! MIGRATE's argument parsing on arbitrary commands, and the MIGRATE client on arbitrary
//! replies from a target.
//!
//! Input: one mode byte, then RESP bytes. Mode 0: each command of the bytes runs through
//! `restore` (and `MigrateArgs::parse`): no panic, a `Store` only for a payload whose footer
//! verifies. Mode 1: a MIGRATE of three keys (one with AUTH and REPLACE) is started and the
//! bytes are its target's replies, fed in two reads: no panic, exactly one `Done` once the
//! replies are complete (or at the timeout), `moved` only keys that were sent.
#![no_main]

use ferrocluster_dataplane::legacy::{
    restore, MigrateArgs, MigrateClient, MigrateConfig, MigrateOutput, Restore,
};
use ferrocluster_dataplane::resp::{CommandReader, Item, ReaderLimits};
use ferrocluster_dataplane::{ConnId, Millis};
use ferrocluster_rdb::RdbObject;
use libfuzzer_sys::fuzz_target;

fn restores(data: &[u8]) {
    let mut r = CommandReader::new(ReaderLimits::default());
    r.push(data);
    while let Ok(Some(item)) = r.next_item() {
        let Item::Command(c) = item else { continue };
        let argv = c.argv;
        let _ = MigrateArgs::parse(&argv);
        if let Ok(Restore::Store { .. }) =
            restore::<RdbObject, _>(&argv, |k| k.len() % 2 == 0, 1_000, true)
        {
            assert!(ferrocluster_rdb::dump::verify(&argv[3]).is_ok());
        }
    }
}

fn replies(data: &[u8]) {
    let now = Millis(1_000);
    let mut c = MigrateClient::new(MigrateConfig::default(), now);
    let args = MigrateArgs::parse(&[
        "MIGRATE", "h", "1", "", "2", "50", "REPLACE", "AUTH", "pw", "KEYS", "a", "b", "c",
    ])
    .unwrap();
    let v = RdbObject::String(b"v".to_vec());
    let found = [
        (b"a".as_slice(), &v, None),
        (b"b".as_slice(), &v, Some(5_000)),
        (b"c".as_slice(), &v, None),
    ];
    assert_eq!(c.start(ConnId(1), args, found, now).unwrap(), None);
    let mut done = 0;
    let mut link = None;
    let step = |c: &mut MigrateClient, done: &mut usize, link: &mut Option<_>| {
        while let Some(o) = c.poll_output() {
            match o {
                MigrateOutput::Connect { link: l, .. } => {
                    *link = Some(l);
                    c.handle_connected(l, now);
                }
                MigrateOutput::Done { moved, .. } => {
                    *done += 1;
                    assert!(moved
                        .iter()
                        .all(|k| [b"a", b"b", b"c"].iter().any(|x| *x == k.as_slice())));
                }
                _ => {}
            }
        }
    };
    step(&mut c, &mut done, &mut link);
    let l = link.expect("a new connection");
    let half = data.len() / 2;
    c.handle_bytes(l, &data[..half], now);
    step(&mut c, &mut done, &mut link);
    c.handle_bytes(l, &data[half..], now);
    step(&mut c, &mut done, &mut link);
    c.handle_timeout(Millis(1_000 + 60));
    step(&mut c, &mut done, &mut link);
    if done == 0 {
        // A retry after a bad reply line: its connection never answers, so its timeout ends it.
        if let Some(l2) = link.filter(|l2| *l2 != l) {
            c.handle_connected(l2, Millis(1_100));
            c.handle_timeout(Millis(1_200));
            step(&mut c, &mut done, &mut link);
        }
    }
    assert_eq!(done, 1);
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 0 {
        restores(rest);
    } else {
        replies(rest);
    }
});

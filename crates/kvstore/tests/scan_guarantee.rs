//! The SCAN guarantee as a property: with inserts and removes interleaved between scan steps
//! (tables growing past the index widths, shrinking, emptying), every key present for the
//! whole scan is returned at least once, and every returned key existed when returned.

use bytes::Bytes;
use ferrocluster_kvstore::{KvStore, ScanOptions};
use ferrocluster_slot::{key_hash_slot, Slot};
use proptest::prelude::*;
use std::collections::BTreeSet;

#[derive(Debug, Clone)]
enum Step {
    Scan(usize),
    Insert(u16, u8),
    /// Removes the n-th (modulo) live key.
    Remove(usize),
    /// Removes many live keys at once (shrinks tables).
    RemoveMany(usize, usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (1..40usize).prop_map(Step::Scan),
        3 => (0..700u16, 0..4u8).prop_map(|(i, t)| Step::Insert(i, t)),
        3 => any::<usize>().prop_map(Step::Remove),
        1 => (any::<usize>(), 1..200usize).prop_map(|(a, n)| Step::RemoveMany(a, n)),
    ]
}

/// Keys of four hash tags (four slots) plus untagged keys spread over many slots.
fn key(i: u16, tag: u8) -> Vec<u8> {
    if tag == 3 {
        format!("plain:{i}").into_bytes()
    } else {
        format!("{{tag{tag}}}:{i}").into_bytes()
    }
}

fn run(initial: Vec<(u16, u8)>, steps: Vec<Step>, pattern: Option<&[u8]>) {
    walk(initial, steps, Walk::Scan(pattern));
}

/// What a test walks: the whole db with SCAN, or one slot with `slot_page`.
#[derive(Clone, Copy)]
enum Walk<'a> {
    Scan(Option<&'a [u8]>),
    Slot(Slot),
}

fn walk(initial: Vec<(u16, u8)>, steps: Vec<Step>, what: Walk<'_>) {
    let mut store: KvStore<Vec<u8>> = KvStore::new(1).unwrap();
    let mut live: BTreeSet<Vec<u8>> = BTreeSet::new();
    for (i, t) in initial {
        let k = key(i, t);
        store.insert(0, &k, vec![1], 0).unwrap();
        live.insert(k);
    }
    let at_start = live.clone();
    let mut removed: BTreeSet<Vec<u8>> = BTreeSet::new();
    let mut returned: BTreeSet<Vec<u8>> = BTreeSet::new();
    let page = |store: &KvStore<Vec<u8>>, cursor: u64, count: usize| match what {
        Walk::Scan(pattern) => {
            let opts = ScanOptions {
                pattern,
                count,
                type_name: None,
            };
            let p = store.scan(0, cursor, &opts, 0).unwrap();
            (p.keys, p.cursor)
        }
        Walk::Slot(slot) => {
            let mut keys = Vec::new();
            let next = store
                .slot_page(0, slot, cursor, count, 0, |k, _, _| {
                    keys.push(Bytes::copy_from_slice(k))
                })
                .unwrap();
            (keys, next)
        }
    };
    let in_scope = |k: &[u8]| match what {
        Walk::Scan(pattern) => pattern.is_none_or(|p| ferrocluster_kvstore::glob_match(p, k)),
        Walk::Slot(slot) => key_hash_slot(k) == slot,
    };
    let mut cursor = 0u64;
    let mut done = false;
    for s in steps {
        match s {
            Step::Scan(count) => {
                if done {
                    continue;
                }
                let (keys, next) = page(&store, cursor, count);
                for k in keys {
                    assert!(
                        live.contains(&k[..]) && in_scope(&k),
                        "returned a key that is not present or not in scope: {k:?}"
                    );
                    returned.insert(k.to_vec());
                }
                cursor = next;
                done = cursor == 0;
            }
            Step::Insert(i, t) => {
                let k = key(i, t);
                store.insert(0, &k, vec![2], 0).unwrap();
                live.insert(k);
            }
            Step::Remove(n) => {
                if live.is_empty() {
                    continue;
                }
                let k = live.iter().nth(n % live.len()).cloned().unwrap();
                assert!(store.remove(0, &k, 0).unwrap().is_some());
                live.remove(&k);
                if !done {
                    removed.insert(k);
                }
            }
            Step::RemoveMany(start, n) => {
                let victims: Vec<_> = live
                    .iter()
                    .skip(start % (live.len() + 1))
                    .take(n)
                    .cloned()
                    .collect();
                for k in victims {
                    assert!(store.remove(0, &k, 0).unwrap().is_some());
                    live.remove(&k);
                    if !done {
                        removed.insert(k);
                    }
                }
            }
        }
    }
    // Finish the scan without further changes.
    let mut guard = 0;
    while !done {
        let (keys, next) = page(&store, cursor, 7);
        returned.extend(keys.iter().map(|k| k.to_vec()));
        cursor = next;
        done = cursor == 0;
        guard += 1;
        assert!(guard < 100_000, "scan did not finish");
    }
    for k in at_start.difference(&removed) {
        if in_scope(k) {
            assert!(
                returned.contains(k),
                "key present for the whole scan was missed: {k:?}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn every_key_present_throughout_is_returned(
        initial in proptest::collection::vec((0..700u16, 0..4u8), 0..500),
        steps in proptest::collection::vec(step(), 0..120),
    ) {
        run(initial, steps, None);
    }

    #[test]
    fn single_slot_match_keeps_the_guarantee(
        initial in proptest::collection::vec((0..700u16, 0..4u8), 0..400),
        steps in proptest::collection::vec(step(), 0..80),
    ) {
        run(initial, steps, Some(b"{tag1}*"));
    }

    /// `slot_page` (the chunked walk of a migration snapshot) keeps the same guarantee
    /// within its slot.
    #[test]
    fn slot_page_walk_keeps_the_guarantee(
        initial in proptest::collection::vec((0..700u16, 0..4u8), 0..400),
        steps in proptest::collection::vec(step(), 0..80),
    ) {
        walk(initial, steps, Walk::Slot(key_hash_slot(b"tag1")));
    }
}

/// A table that grows from 10 to 1000 keys (past the u8 index) in the middle of a scan.
#[test]
fn growth_past_index_widths_mid_scan() {
    let initial: Vec<_> = (0..10).map(|i| (i, 0)).collect();
    let mut steps = vec![Step::Scan(3)];
    steps.extend((10..700).map(|i| Step::Insert(i, 0)));
    steps.push(Step::Scan(3));
    steps.push(Step::RemoveMany(0, 650));
    steps.push(Step::Scan(3));
    run(initial, steps, None);
}

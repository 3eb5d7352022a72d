//! Model-based test: random operation sequences against `KvStore` and a `BTreeMap` model that
//! spells out the semantics (virtual time, lazy expiry on writes, hidden slots, drop-slot,
//! flush, swap, SCAN, KEYS, RANDOMKEY, counts, per-slot memory).

use bytes::Bytes;
use ferrocluster_kvstore::{KeyExpiry, KvStore, ScanOptions, INLINE_KEY_LEN};
use ferrocluster_slot::{key_hash_slot, Slot, SlotKey};
use proptest::prelude::*;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};

const DBS: usize = 3;
const KEYS: &[&[u8]] = &[
    b"a",
    b"b",
    b"c",
    b"{t}1",
    b"{t}2",
    b"{t}3",
    b"{t}4",
    b"{u}1",
    b"{u}2",
    b"{t}a-rather-long-key-name",
    b"",
    b"abcdefghijklmnopq",
    // Same slot and first 8 bytes, differing later; a trailing zero byte; both sides of the
    // inline key length (14 bytes inline, 15 on the heap).
    b"{t}long-key1",
    b"{t}long-key2",
    b"a\0",
    b"{t}4567890abcd",
    b"{t}4567890abcde",
];
const PATTERNS: &[&[u8]] = &[
    b"*", b"{t}*", b"a*", b"*1", b"?", b"{u}1", b"*[0-9]", b"{t}[^1]",
];

#[derive(Debug, Clone)]
enum Op {
    Insert {
        db: usize,
        key: usize,
        val: u8,
        len: usize,
        ttl: Option<u64>,
    },
    Remove {
        db: usize,
        key: usize,
    },
    Get {
        db: usize,
        key: usize,
    },
    GetMut {
        db: usize,
        key: usize,
        val: u8,
        len: usize,
    },
    Expire {
        db: usize,
        key: usize,
        delta: u64,
    },
    Persist {
        db: usize,
        key: usize,
    },
    Advance(u64),
    ExpireCycle(usize),
    Hide(usize),
    Reveal(usize),
    DropSlot(usize),
    FlushDb(usize),
    FlushAll,
    Swap(usize, usize),
    Scan {
        db: usize,
        count: usize,
        pattern: Option<usize>,
        type_name: Option<bool>,
    },
    Keys {
        db: usize,
        pattern: usize,
    },
    RandomKey {
        db: usize,
        seed: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let db = 0..DBS;
    let key = 0..KEYS.len();
    prop_oneof![
        6 => (db.clone(), key.clone(), any::<u8>(), 0..20usize, proptest::option::of(0..15u64))
            .prop_map(|(db, key, val, len, ttl)| Op::Insert { db, key, val, len, ttl }),
        3 => (db.clone(), key.clone()).prop_map(|(db, key)| Op::Remove { db, key }),
        2 => (db.clone(), key.clone()).prop_map(|(db, key)| Op::Get { db, key }),
        1 => (db.clone(), key.clone(), any::<u8>(), 0..40usize)
            .prop_map(|(db, key, val, len)| Op::GetMut { db, key, val, len }),
        2 => (db.clone(), key.clone(), 0..15u64).prop_map(|(db, key, delta)| Op::Expire { db, key, delta }),
        1 => (db.clone(), key.clone()).prop_map(|(db, key)| Op::Persist { db, key }),
        3 => (0..8u64).prop_map(Op::Advance),
        2 => (0..6usize).prop_map(Op::ExpireCycle),
        1 => key.clone().prop_map(Op::Hide),
        1 => key.clone().prop_map(Op::Reveal),
        1 => key.clone().prop_map(Op::DropSlot),
        1 => db.clone().prop_map(Op::FlushDb),
        1 => Just(Op::FlushAll),
        1 => (db.clone(), db.clone()).prop_map(|(a, b)| Op::Swap(a, b)),
        2 => (db.clone(), 1..5usize, proptest::option::of(0..PATTERNS.len()), proptest::option::of(any::<bool>()))
            .prop_map(|(db, count, pattern, type_name)| Op::Scan { db, count, pattern, type_name }),
        1 => (db.clone(), 0..PATTERNS.len()).prop_map(|(db, pattern)| Op::Keys { db, pattern }),
        1 => (db, any::<u64>()).prop_map(|(db, seed)| Op::RandomKey { db, seed }),
    ]
}

/// (db, key) -> (value, deadline): what is physically stored.
type ModelMap = BTreeMap<(usize, Vec<u8>), (Vec<u8>, Option<u64>)>;

#[derive(Default)]
struct Model {
    map: ModelMap,
    hidden: BTreeSet<Slot>,
    now: u64,
}

fn live(now: u64, deadline: Option<u64>) -> bool {
    deadline.is_none_or(|d| now <= d)
}

impl Model {
    fn live_value(&self, db: usize, key: &[u8]) -> Option<&Vec<u8>> {
        self.map
            .get(&(db, key.to_vec()))
            .filter(|(_, d)| live(self.now, *d))
            .map(|(v, _)| v)
    }

    /// Deletes the key if it is stored but expired (what a write does first).
    fn expire_if_needed(&mut self, db: usize, key: &[u8]) {
        let k = (db, key.to_vec());
        if self.map.get(&k).is_some_and(|(_, d)| !live(self.now, *d)) {
            self.map.remove(&k);
        }
    }

    fn visible_live_keys(&self, db: usize, pattern: Option<&[u8]>) -> BTreeSet<Vec<u8>> {
        self.map
            .iter()
            .filter(|((d, k), (_, dl))| {
                *d == db
                    && live(self.now, *dl)
                    && !self.hidden.contains(&key_hash_slot(k))
                    && pattern.is_none_or(|p| p == b"*" || ferrocluster_kvstore::glob_match(p, k))
            })
            .map(|((_, k), _)| k.clone())
            .collect()
    }
}

fn memory_of(key: &[u8], value: &[u8]) -> u64 {
    // Entry = 16-byte key + Vec<u8> (24 bytes); long keys add their boxed slice (16 + len).
    let key_heap = if key.len() > INLINE_KEY_LEN {
        16 + key.len()
    } else {
        0
    };
    (40 + key_heap + value.len()) as u64
}

fn check(store: &KvStore<Vec<u8>>, m: &Model) {
    for db in 0..DBS {
        let physical = m.map.keys().filter(|(d, _)| *d == db);
        let visible = physical
            .clone()
            .filter(|(_, k)| !m.hidden.contains(&key_hash_slot(k)))
            .count();
        assert_eq!(store.dbsize(db).unwrap(), visible as u64, "dbsize {db}");
        assert_eq!(
            store.len_including_hidden(db).unwrap(),
            physical.count() as u64
        );
        // INFO keyspace expires= / avg_ttl=: stored keys outside hidden slots with a deadline,
        // and the mean of their remaining time floored at 0.
        let deadlines: Vec<u64> = m
            .map
            .iter()
            .filter(|((d, k), _)| *d == db && !m.hidden.contains(&key_hash_slot(k)))
            .filter_map(|(_, (_, dl))| *dl)
            .collect();
        let n = deadlines.len() as u64;
        let avg = if n == 0 {
            0
        } else {
            let sum: i128 = deadlines.iter().map(|&d| i128::from(d)).sum();
            let mean = (sum - i128::from(m.now) * i128::from(n)).max(0) / i128::from(n);
            u64::try_from(mean).unwrap()
        };
        assert_eq!(store.expires(db, m.now).unwrap(), (n, avg), "expires {db}");
        // The snapshot walk: exactly the live keys outside hidden slots, with values and
        // deadlines.
        let mut walked = Vec::new();
        store
            .for_each_live(db, m.now, |k, v, dl| {
                walked.push((k.to_vec(), v.clone(), dl));
                Ok::<(), ()>(())
            })
            .unwrap()
            .unwrap();
        walked.sort();
        let mut expect: Vec<(Vec<u8>, Vec<u8>, Option<u64>)> = m
            .map
            .iter()
            .filter(|((d, k), (_, dl))| {
                *d == db && live(m.now, *dl) && !m.hidden.contains(&key_hash_slot(k))
            })
            .map(|((_, k), (v, dl))| (k.clone(), v.clone(), dl.map(|t| t.min(u64::MAX - 1))))
            .collect();
        expect.sort();
        assert_eq!(walked, expect, "for_each_live {db}");
    }
    for key in KEYS {
        let slot = key_hash_slot(key);
        let in_slot = |db: usize| {
            m.map
                .keys()
                .filter(|(d, k)| *d == db && key_hash_slot(k) == slot)
                .count() as u64
        };
        let mut total = 0;
        for db in 0..DBS {
            assert_eq!(store.count_keys_in_slot(db, slot).unwrap(), in_slot(db));
            total += in_slot(db);
            let expect = match m.map.get(&(db, key.to_vec())) {
                Some((_, d)) if !live(m.now, *d) => KeyExpiry::Missing,
                Some((_, Some(d))) => KeyExpiry::At(*d),
                Some((_, None)) => KeyExpiry::Persistent,
                None => KeyExpiry::Missing,
            };
            assert_eq!(store.expiry(db, key, m.now).unwrap(), expect);
            assert_eq!(store.get(db, key, m.now).unwrap(), m.live_value(db, key));
        }
        assert_eq!(store.count_keys_in_slot_all_dbs(slot), total);
        let stats = store.slot_stats(slot);
        assert_eq!(stats.key_count, total);
        let mem: u64 = m
            .map
            .iter()
            .filter(|((_, k), _)| key_hash_slot(k) == slot)
            .map(|((_, k), (v, _))| memory_of(k, v))
            .sum();
        assert_eq!(stats.memory_bytes, mem, "memory of slot {slot}");
        assert_eq!(store.is_hidden(slot), m.hidden.contains(&slot));
    }
    // The data set's size (maxmemory's measure) is every key's memory, all slots and dbs.
    let all: u64 = m.map.iter().map(|((_, k), (v, _))| memory_of(k, v)).sum();
    assert_eq!(store.memory_bytes(), all, "memory_bytes");
}

fn full_scan(
    store: &KvStore<Vec<u8>>,
    db: usize,
    opts: &ScanOptions<'_>,
    now: u64,
) -> Vec<Vec<u8>> {
    let (mut cursor, mut out) = (0, Vec::new());
    for _ in 0..10_000 {
        let page = store.scan(db, cursor, opts, now).unwrap();
        out.extend(page.keys.iter().map(|k| k.to_vec()));
        cursor = page.cursor;
        if cursor == 0 {
            return out;
        }
    }
    panic!("scan did not finish");
}

fn run(ops: Vec<Op>) {
    let mut store: KvStore<Vec<u8>> = KvStore::new(DBS).unwrap();
    let mut m = Model {
        now: 100,
        ..Model::default()
    };
    for op in ops {
        let now = m.now;
        match op {
            Op::Insert {
                db,
                key,
                val,
                len,
                ttl,
            } => {
                let k = KEYS[key];
                let v = vec![val; len];
                let expect = m.live_value(db, k).cloned();
                let deadline = ttl.map(|t| now + t);
                // Both entry points: key only, and with the slot computed by the caller.
                let got = if val % 2 == 0 {
                    store.insert_with_expiry(db, k, v.clone(), deadline, now)
                } else {
                    store.insert_in_slot(db, SlotKey::new(k), v.clone(), deadline, now)
                }
                .unwrap();
                assert_eq!(got, expect);
                m.map.insert((db, k.to_vec()), (v, deadline));
            }
            Op::Remove { db, key } => {
                let k = KEYS[key];
                let expect = m.live_value(db, k).cloned();
                let got = if key % 2 == 0 {
                    store.remove(db, k, now)
                } else {
                    store.remove_in_slot(db, SlotKey::new(k), now)
                };
                assert_eq!(got.unwrap(), expect);
                m.map.remove(&(db, k.to_vec()));
            }
            Op::Get { db, key } => {
                let k = KEYS[key];
                assert_eq!(store.get(db, k, now).unwrap(), m.live_value(db, k));
                assert_eq!(
                    store.get_in_slot(db, SlotKey::new(k), now).unwrap(),
                    m.live_value(db, k)
                );
                assert_eq!(
                    store.exists(db, k, now).unwrap(),
                    m.live_value(db, k).is_some()
                );
            }
            Op::GetMut { db, key, val, len } => {
                let k = KEYS[key];
                m.expire_if_needed(db, k);
                let got = if val % 2 == 0 {
                    store.get_mut(db, k, now)
                } else {
                    store.get_mut_in_slot(db, SlotKey::new(k), now)
                }
                .unwrap();
                match m.map.get_mut(&(db, k.to_vec())) {
                    Some((v, _)) => {
                        let mut g = got.expect("live key");
                        assert_eq!(&*g, v);
                        *g = vec![val; len];
                        *v = vec![val; len];
                    }
                    None => assert!(got.is_none()),
                }
            }
            Op::Expire { db, key, delta } => {
                let k = KEYS[key];
                m.expire_if_needed(db, k);
                let present = m.map.contains_key(&(db, k.to_vec()));
                assert_eq!(
                    store.set_expire_at(db, k, now + delta, now).unwrap(),
                    present
                );
                if let Some(e) = m.map.get_mut(&(db, k.to_vec())) {
                    e.1 = Some(now + delta);
                }
            }
            Op::Persist { db, key } => {
                let k = KEYS[key];
                m.expire_if_needed(db, k);
                let had = m.map.get(&(db, k.to_vec())).is_some_and(|e| e.1.is_some());
                assert_eq!(store.persist(db, k, now).unwrap(), had);
                if let Some(e) = m.map.get_mut(&(db, k.to_vec())) {
                    e.1 = None;
                }
            }
            Op::Advance(d) => m.now += d,
            Op::ExpireCycle(budget) => {
                let first = store.expire_cycle(now, budget);
                assert!(first <= budget as u64);
                let rest = store.expire_cycle(now, usize::MAX);
                let before = m.map.len();
                let hidden = m.hidden.clone();
                m.map
                    .retain(|(_, k), (_, d)| live(now, *d) || hidden.contains(&key_hash_slot(k)));
                assert_eq!(first + rest, (before - m.map.len()) as u64);
            }
            Op::Hide(key) => {
                let s = key_hash_slot(KEYS[key]);
                assert_eq!(store.hide_slot(s), m.hidden.insert(s));
            }
            Op::Reveal(key) => {
                let s = key_hash_slot(KEYS[key]);
                assert_eq!(store.reveal_slot(s), m.hidden.remove(&s));
            }
            Op::DropSlot(key) => {
                let s = key_hash_slot(KEYS[key]);
                let before = m.map.len();
                m.map.retain(|(_, k), _| key_hash_slot(k) != s);
                assert_eq!(store.drop_slot(s), (before - m.map.len()) as u64);
            }
            Op::FlushDb(db) => {
                let before = m.map.len();
                m.map.retain(|(d, _), _| *d != db);
                assert_eq!(store.flush_db(db).unwrap(), (before - m.map.len()) as u64);
            }
            Op::FlushAll => {
                assert_eq!(store.flush_all(), m.map.len() as u64);
                m.map.clear();
            }
            Op::Swap(a, b) => {
                store.swap_db(a, b).unwrap();
                m.map = std::mem::take(&mut m.map)
                    .into_iter()
                    .map(|((d, k), v)| {
                        let d = if d == a {
                            b
                        } else if d == b {
                            a
                        } else {
                            d
                        };
                        ((d, k), v)
                    })
                    .collect();
            }
            Op::Scan {
                db,
                count,
                pattern,
                type_name,
            } => {
                let pattern = pattern.map(|p| PATTERNS[p]);
                let ty = type_name.map(|s| if s { "STRING" } else { "hash" });
                let opts = ScanOptions {
                    pattern,
                    count,
                    type_name: ty,
                };
                let got = full_scan(&store, db, &opts, now);
                let set: BTreeSet<_> = got.iter().cloned().collect();
                assert_eq!(
                    set.len(),
                    got.len(),
                    "no duplicates without concurrent writes"
                );
                let expect = if ty == Some("hash") {
                    BTreeSet::new()
                } else {
                    m.visible_live_keys(db, pattern)
                };
                assert_eq!(set, expect);
            }
            Op::Keys { db, pattern } => {
                let p = PATTERNS[pattern];
                let got: BTreeSet<_> = store
                    .keys(db, p, now)
                    .unwrap()
                    .iter()
                    .map(|k| k.to_vec())
                    .collect();
                assert_eq!(got, m.visible_live_keys(db, Some(p)));
            }
            Op::RandomKey { db, seed } => {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                let got = store.random_key(db, now, &mut rng).unwrap();
                let candidates = m.visible_live_keys(db, None);
                match got {
                    Some(k) => assert!(candidates.contains(&k.to_vec()), "{k:?}"),
                    None => assert!(candidates.is_empty()),
                }
            }
        }
        check(&store, &m);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn store_matches_model(ops in proptest::collection::vec(op(), 1..80)) {
        run(ops);
    }
}

#[test]
fn keys_in_slot_lists_hidden_and_expired_keys() {
    let mut store: KvStore<Vec<u8>> = KvStore::new(1).unwrap();
    for k in [&b"{t}1"[..], b"{t}2", b"{t}3"] {
        store.insert_with_expiry(0, k, vec![], Some(5), 0).unwrap();
    }
    let slot = key_hash_slot(b"t");
    store.hide_slot(slot);
    let got = store.keys_in_slot(0, slot, 10).unwrap();
    assert_eq!(
        got,
        [
            Bytes::from_static(b"{t}1"),
            Bytes::from_static(b"{t}2"),
            Bytes::from_static(b"{t}3")
        ]
    );
    assert_eq!(store.keys_in_slot(0, slot, 2).unwrap().len(), 2);
    assert_eq!(store.keys_in_slot(0, slot, 0).unwrap().len(), 0);
}

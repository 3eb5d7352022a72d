//! Behaviour tests for `KvStore`: every error, the facts-sheet statements (A.12 hidden
//! importing keys, C.4 COUNTKEYSINSLOT, D.4 SCAN cursors and single-slot patterns, D.5
//! databases, D.6 SLOT-STATS), expiry and statistics.

use bytes::Bytes;
use ferrocluster_kvstore::{KeyExpiry, KvError, KvStore, ScanOptions, MAX_DATABASES};
use ferrocluster_slot::{key_hash_slot, Slot, SlotKey};
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeSet;

type Store = KvStore<Vec<u8>>;

fn scan_all(s: &Store, db: usize, opts: &ScanOptions<'_>, now: u64) -> Vec<Bytes> {
    let (mut cursor, mut out) = (0, Vec::new());
    loop {
        let page = s.scan(db, cursor, opts, now).unwrap();
        out.extend(page.keys);
        cursor = page.cursor;
        if cursor == 0 {
            return out;
        }
    }
}

#[test]
fn database_count_errors() {
    assert_eq!(Store::new(0).err(), Some(KvError::DatabaseCount(0)));
    assert_eq!(
        Store::new(MAX_DATABASES + 1).err(),
        Some(KvError::DatabaseCount(MAX_DATABASES + 1))
    );
    assert_eq!(
        Store::new(MAX_DATABASES).unwrap().databases(),
        MAX_DATABASES
    );
    assert_eq!(
        KvError::DatabaseCount(0).to_string(),
        "number of databases must be 1..=65536, got 0"
    );
}

#[test]
fn every_db_taking_call_rejects_an_out_of_range_db() {
    let mut s = Store::new(16).unwrap();
    s.insert(15, b"k", vec![1], 0).unwrap();
    let e = KvError::DbOutOfRange {
        db: 16,
        databases: 16,
    };
    // Facts sheet D.5: `SELECT n` beyond cluster-databases -> "DB index is out of range".
    assert!(e.to_string().starts_with("DB index is out of range"));
    let slot = Slot::new(0).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    assert_eq!(s.get(16, b"k", 0).err(), Some(e.clone()));
    assert_eq!(s.exists(16, b"k", 0).err(), Some(e.clone()));
    assert_eq!(s.get_mut(16, b"k", 0).err().unwrap(), e);
    assert_eq!(s.insert(16, b"k", vec![], 0).err(), Some(e.clone()));
    assert_eq!(
        s.insert_with_expiry(16, b"k", vec![], Some(1), 0).err(),
        Some(e.clone())
    );
    assert_eq!(s.remove(16, b"k", 0).err(), Some(e.clone()));
    assert_eq!(s.set_expire_at(16, b"k", 5, 0).err(), Some(e.clone()));
    assert_eq!(s.persist(16, b"k", 0).err(), Some(e.clone()));
    assert_eq!(s.expiry(16, b"k", 0).err(), Some(e.clone()));
    assert_eq!(s.dbsize(16).err(), Some(e.clone()));
    assert_eq!(s.len_including_hidden(16).err(), Some(e.clone()));
    assert_eq!(s.count_keys_in_slot(16, slot).err(), Some(e.clone()));
    assert_eq!(s.keys_in_slot(16, slot, 1).err(), Some(e.clone()));
    assert_eq!(s.flush_db(16).err(), Some(e.clone()));
    assert_eq!(s.swap_db(16, 15).err(), Some(e.clone()));
    assert_eq!(s.swap_db(15, 16).err(), Some(e.clone()));
    assert_eq!(s.random_key(16, 0, &mut rng).err(), Some(e.clone()));
    assert_eq!(
        s.scan(16, 0, &ScanOptions::default(), 0).err(),
        Some(e.clone())
    );
    assert_eq!(s.keys(16, b"*", 0).err(), Some(e.clone()));
    assert_eq!((0..15).map(|db| s.dbsize(db).unwrap()).sum::<u64>(), 0);
    // Nothing changed: the key in db 15 is still there, and the failed swap did not move it.
    assert!(s.exists(15, b"k", 0).unwrap());
    assert_eq!(s.dbsize(15).unwrap(), 1);
}

#[test]
fn scan_count_zero_is_an_error() {
    let s = Store::new(1).unwrap();
    let opts = ScanOptions {
        count: 0,
        ..ScanOptions::default()
    };
    assert_eq!(s.scan(0, 0, &opts, 0).err(), Some(KvError::ZeroScanCount));
}

#[test]
fn basic_get_insert_remove() {
    let mut s = Store::new(2).unwrap();
    assert_eq!(s.insert(0, b"foo", b"1".to_vec(), 0).unwrap(), None);
    assert_eq!(
        s.insert(0, b"foo", b"2".to_vec(), 0).unwrap(),
        Some(b"1".to_vec())
    );
    assert_eq!(s.get(0, b"foo", 0).unwrap(), Some(&b"2".to_vec()));
    assert_eq!(s.get(1, b"foo", 0).unwrap(), None, "databases are separate");
    assert_eq!(s.dbsize(0).unwrap(), 1);
    assert_eq!(s.remove(0, b"foo", 0).unwrap(), Some(b"2".to_vec()));
    assert_eq!(s.remove(0, b"foo", 0).unwrap(), None);
    assert_eq!(s.dbsize(0).unwrap(), 0);
}

#[test]
fn slot_of_a_key_is_independent_of_the_db() {
    // Facts sheet D.5 and CLUSTER KEYSLOT foo = 12182 (cluster spec).
    let mut s = Store::new(3).unwrap();
    for db in 0..3 {
        s.insert(db, b"foo", vec![], 0).unwrap();
    }
    let slot = Slot::new(12182).unwrap();
    for db in 0..3 {
        assert_eq!(s.count_keys_in_slot(db, slot).unwrap(), 1);
    }
    assert_eq!(s.count_keys_in_slot_all_dbs(slot), 3);
    assert_eq!(s.slot_stats(slot).key_count, 3);
    assert_eq!(s.drop_slot(slot), 3);
    assert_eq!(s.count_keys_in_slot_all_dbs(slot), 0);
}

/// `take_slot` removes the slot's keys from every database at once and hands them back;
/// the rest of the store is untouched.
#[test]
fn take_slot_detaches_the_keys_of_every_database() {
    let mut s = Store::new(2).unwrap();
    let slot = key_hash_slot(b"t");
    for i in 0..100 {
        s.insert(i % 2, format!("{{t}}:{i}").as_bytes(), vec![1], 0)
            .unwrap();
    }
    s.insert(0, b"other", vec![], 0).unwrap();
    let taken = s.take_slot(slot);
    assert_eq!(taken.len(), 100);
    assert!(!taken.is_empty());
    assert_eq!(s.count_keys_in_slot_all_dbs(slot), 0);
    assert_eq!(s.dbsize(0).unwrap(), 1);
    assert_eq!(s.dbsize(1).unwrap(), 0);
    assert_eq!(s.get(0, b"{t}:0", 0).unwrap(), None);
    assert!(s.take_slot(slot).is_empty());
    // The store keeps working for that slot after the detach.
    s.insert(1, b"{t}:again", vec![], 0).unwrap();
    assert_eq!(s.count_keys_in_slot(1, slot).unwrap(), 1);
    // The detached keys can be freed on another thread (checked at compile time: tests
    // follow the crate's no-threads rule).
    fn send<T: Send>(t: T) -> T {
        t
    }
    drop(send(taken));
}

/// `pop_keys` hands the detached keys out in batches, each key once with its database,
/// until none is left; `len` counts what is still held.
#[test]
fn pop_keys_hands_out_every_detached_key_once() {
    let mut s = Store::new(3).unwrap();
    let slot = key_hash_slot(b"p");
    let mut want = BTreeSet::new();
    for i in 0..1000usize {
        let (db, key) = (i % 3, format!("{{p}}:{i}"));
        s.insert(db, key.as_bytes(), vec![0; i % 7], 0).unwrap();
        want.insert((db, key.into_bytes()));
    }
    let mut taken = s.take_slot(slot);
    assert_eq!(taken.pop_keys(0).len(), 0);
    let mut got = BTreeSet::new();
    let mut held = taken.len();
    while !taken.is_empty() {
        let batch = taken.pop_keys(128);
        assert!(!batch.is_empty() && batch.len() <= 128);
        for (db, k) in batch.keys() {
            assert!(got.insert((db, k.to_vec())), "key handed out twice");
        }
        held -= batch.len() as u64;
        assert_eq!(taken.len(), held);
    }
    assert_eq!(got, want);
    assert!(taken.pop_keys(10).is_empty());
    // The store already forgot them.
    assert_eq!(s.count_keys_in_slot_all_dbs(slot), 0);
}

/// Facts sheet A.12: 1000 staged keys in an importing slot: DBSIZE 0, SCAN `0 {}`, KEYS empty,
/// RANDOMKEY nil, COUNTKEYSINSLOT counts them, active expiry leaves them; after the import the
/// keys become visible at once.
#[test]
fn importing_slot_keys_are_hidden_but_counted_in_countkeysinslot() {
    let mut s = Store::new(1).unwrap();
    let slot = key_hash_slot(b"staged");
    assert!(s.hide_slot(slot));
    assert!(!s.hide_slot(slot), "idempotent");
    for i in 0..1000 {
        let key = format!("{{staged}}:{i}");
        s.insert_with_expiry(0, key.as_bytes(), vec![], Some(10), 0)
            .unwrap();
    }
    assert_eq!(s.dbsize(0).unwrap(), 0);
    assert_eq!(s.len_including_hidden(0).unwrap(), 1000);
    let page = s.scan(0, 0, &ScanOptions::default(), 0).unwrap();
    assert_eq!((page.cursor, page.keys.len()), (0, 0));
    let opts = ScanOptions {
        pattern: Some(b"{staged}*"),
        ..ScanOptions::default()
    };
    assert_eq!(s.scan(0, 0, &opts, 0).unwrap().keys.len(), 0);
    assert!(s.keys(0, b"*", 0).unwrap().is_empty());
    assert!(s.keys(0, b"{staged}:1", 0).unwrap().is_empty());
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    assert_eq!(s.random_key(0, 0, &mut rng).unwrap(), None);
    assert_eq!(s.count_keys_in_slot(0, slot).unwrap(), 1000);
    assert_eq!(s.keys_in_slot(0, slot, 5).unwrap().len(), 5);
    // Keys stay reachable by name (the node answers -MOVED before it gets here).
    assert!(s.exists(0, b"{staged}:7", 0).unwrap());
    // Active expiry never expires importing keys.
    assert_eq!(s.expire_cycle(100, usize::MAX), 0);
    assert_eq!(s.count_keys_in_slot(0, slot).unwrap(), 1000);
    // Import done: visible at once.
    assert!(s.reveal_slot(slot));
    assert!(!s.reveal_slot(slot), "idempotent");
    assert!(!s.is_hidden(slot));
    assert_eq!(s.dbsize(0).unwrap(), 1000);
    assert_eq!(scan_all(&s, 0, &ScanOptions::default(), 0).len(), 1000);
    assert!(s.random_key(0, 0, &mut rng).unwrap().is_some());
    assert_eq!(s.expire_cycle(100, usize::MAX), 1000);
    assert_eq!(s.dbsize(0).unwrap(), 0);
}

#[test]
fn hiding_applies_to_every_database() {
    // Facts sheet A.15: importing marks apply to all DBs.
    let mut s = Store::new(4).unwrap();
    for db in 0..4 {
        s.insert(db, b"{x}a", vec![], 0).unwrap();
        s.insert(db, b"other", vec![], 0).unwrap();
    }
    s.hide_slot(key_hash_slot(b"x"));
    for db in 0..4 {
        assert_eq!(s.dbsize(db).unwrap(), 1);
        assert_eq!(s.keys(db, b"*", 0).unwrap(), [Bytes::from_static(b"other")]);
    }
}

#[test]
fn scan_cursor_encodes_the_slot_in_the_low_14_bits() {
    // Facts sheet D.4: cursor = (table cursor << 14) | slot.
    let mut s = Store::new(1).unwrap();
    for i in 0..50 {
        s.insert(0, format!("{{t}}{i}").as_bytes(), vec![], 0)
            .unwrap();
    }
    let slot = u64::from(key_hash_slot(b"t").get());
    let opts = ScanOptions {
        count: 10,
        ..ScanOptions::default()
    };
    let page = s.scan(0, 0, &opts, 0).unwrap();
    assert_eq!(page.keys.len(), 10);
    assert_eq!(page.cursor & 0x3FFF, slot);
    assert_eq!(page.cursor >> 14, 40, "40 positions of the slot remain");
    assert_eq!(scan_all(&s, 0, &opts, 0).len(), 50);
}

#[test]
fn single_slot_match_jumps_to_the_slot_or_ends() {
    // Facts sheet D.4: cursor slot < target -> jump; > target -> 0; slot done -> 0.
    let mut s = Store::new(1).unwrap();
    let keys = ["{a}1", "{a}2", "{b}1", "zzz", "foo"];
    for k in keys {
        s.insert(0, k.as_bytes(), vec![], 0).unwrap();
    }
    let target = key_hash_slot(b"a").get(); // 15495
    let opts = ScanOptions {
        pattern: Some(b"{a}*"),
        count: 100,
        type_name: None,
    };
    let page = s.scan(0, 0, &opts, 0).unwrap();
    assert_eq!(page.cursor, 0);
    let got: BTreeSet<_> = page.keys.into_iter().collect();
    assert_eq!(
        got,
        BTreeSet::from([Bytes::from_static(b"{a}1"), Bytes::from_static(b"{a}2")])
    );
    // A cursor beyond the target slot ends the scan immediately.
    let past = u64::from(target) + 1;
    assert_eq!(s.scan(0, past, &opts, 0).unwrap(), Default::default());
    // KEYS with a single-slot pattern on an empty table: empty at once.
    assert!(s.keys(0, b"{nothing}*", 0).unwrap().is_empty());
    assert_eq!(s.keys(0, b"foo", 0).unwrap(), [Bytes::from_static(b"foo")]);
}

#[test]
fn scan_type_and_match_filters() {
    let mut s = Store::new(1).unwrap();
    for k in ["key_x", "key_y", "foo_a", "foo_b"] {
        s.insert(0, k.as_bytes(), vec![], 0).unwrap();
    }
    let by = |pattern: Option<&[u8]>, ty: Option<&str>| {
        let opts = ScanOptions {
            pattern,
            count: 3,
            type_name: ty,
        };
        let mut v: Vec<_> = scan_all(&s, 0, &opts, 0);
        v.sort();
        v
    };
    assert_eq!(
        by(Some(b"foo*"), None),
        [Bytes::from_static(b"foo_a"), Bytes::from_static(b"foo_b")]
    );
    assert_eq!(
        by(None, Some("String")).len(),
        4,
        "TYPE is case-insensitive"
    );
    assert!(by(None, Some("list")).is_empty());
}

#[test]
fn star_pattern_matches_the_empty_key_in_keys_and_scan() {
    // KEYS/SCAN treat `*` as "all keys" before the matcher (which rejects "").
    let mut s = Store::new(1).unwrap();
    s.insert(0, b"", vec![], 0).unwrap();
    assert_eq!(s.keys(0, b"*", 0).unwrap(), [Bytes::new()]);
    let opts = ScanOptions {
        pattern: Some(b"*"),
        ..ScanOptions::default()
    };
    assert_eq!(scan_all(&s, 0, &opts, 0), [Bytes::new()]);
}

#[test]
fn expiry_follows_redis_now_greater_than_deadline() {
    // Redis keyIsExpired: expired iff now > when.
    let mut s = Store::new(1).unwrap();
    s.insert_with_expiry(0, b"k", vec![], Some(1000), 0)
        .unwrap();
    assert_eq!(s.expiry(0, b"k", 999).unwrap(), KeyExpiry::At(1000));
    assert!(s.exists(0, b"k", 1000).unwrap());
    assert!(!s.exists(0, b"k", 1001).unwrap());
    assert_eq!(s.expiry(0, b"k", 1001).unwrap(), KeyExpiry::Missing);
    // Not yet reclaimed: still counted, like DBSIZE in Redis.
    assert_eq!(s.dbsize(0).unwrap(), 1);
    // A write to an expired key deletes it first: SET returns no old value.
    assert_eq!(s.insert(0, b"k", vec![1], 1001).unwrap(), None);
    assert_eq!(s.expiry(0, b"k", 1001).unwrap(), KeyExpiry::Persistent);
    assert!(s.set_expire_at(0, b"k", 2000, 1001).unwrap());
    assert!(s.persist(0, b"k", 1500).unwrap());
    assert!(!s.persist(0, b"k", 1500).unwrap());
    assert!(!s.set_expire_at(0, b"missing", 5, 0).unwrap());
    // u64::MAX is clamped to u64::MAX - 1 (the internal no-deadline marker).
    s.set_expire_at(0, b"k", u64::MAX, 0).unwrap();
    assert_eq!(s.expiry(0, b"k", 0).unwrap(), KeyExpiry::At(u64::MAX - 1));
}

#[test]
fn expire_cycle_respects_its_budget_and_resumes() {
    let mut s = Store::new(2).unwrap();
    // Ten keys in ten different slots, all expired at t=100; one live key with a deadline.
    for i in 0..10 {
        s.insert_with_expiry(i % 2, format!("k{i}").as_bytes(), vec![], Some(50), 0)
            .unwrap();
    }
    s.insert_with_expiry(0, b"live", vec![], Some(500), 0)
        .unwrap();
    s.insert(0, b"persistent", vec![], 0).unwrap();
    let mut got = Vec::new();
    for _ in 0..6 {
        got.push(s.expire_cycle(100, 3));
    }
    assert_eq!(got.iter().sum::<u64>(), 10);
    assert!(got.iter().all(|&n| n <= 3));
    assert!(
        got[0] >= 2,
        "at most one examined key (live) is not expired before the 3rd"
    );
    assert_eq!(s.dbsize(0).unwrap() + s.dbsize(1).unwrap(), 2);
    assert_eq!(s.expire_cycle(100, 0), 0);
}

#[test]
fn random_key_reaches_every_visible_live_key_and_skips_expired() {
    let mut s = Store::new(1).unwrap();
    for k in ["a", "b", "c", "{t}1", "{t}2"] {
        s.insert(0, k.as_bytes(), vec![], 0).unwrap();
    }
    s.insert_with_expiry(0, b"gone", vec![], Some(5), 0)
        .unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let mut seen = BTreeSet::new();
    for _ in 0..500 {
        seen.insert(s.random_key(0, 10, &mut rng).unwrap().unwrap());
    }
    let want: BTreeSet<_> = ["a", "b", "c", "{t}1", "{t}2"]
        .iter()
        .map(|k| Bytes::copy_from_slice(k.as_bytes()))
        .collect();
    assert_eq!(seen, want);
    // Only expired keys left: none, although they still count until reclaimed.
    let mut s = Store::new(1).unwrap();
    for i in 0..300 {
        s.insert_with_expiry(0, format!("x{i}").as_bytes(), vec![], Some(5), 0)
            .unwrap();
    }
    s.insert(0, b"survivor", vec![], 0).unwrap();
    assert_eq!(
        s.random_key(0, 10, &mut rng).unwrap(),
        Some(Bytes::from_static(b"survivor"))
    );
    s.remove(0, b"survivor", 10).unwrap();
    assert_eq!(s.random_key(0, 10, &mut rng).unwrap(), None);
    assert_eq!(s.dbsize(0).unwrap(), 300);
}

#[test]
fn swap_and_flush() {
    let mut s = Store::new(3).unwrap();
    s.insert(0, b"a", vec![], 0).unwrap();
    s.insert(1, b"b", vec![], 0).unwrap();
    s.insert(1, b"c", vec![], 0).unwrap();
    s.swap_db(0, 1).unwrap();
    assert!(s.exists(0, b"b", 0).unwrap() && s.exists(1, b"a", 0).unwrap());
    assert_eq!((s.dbsize(0).unwrap(), s.dbsize(1).unwrap()), (2, 1));
    s.swap_db(2, 2).unwrap();
    assert_eq!(s.flush_db(0).unwrap(), 2);
    assert_eq!(s.flush_db(0).unwrap(), 0);
    assert_eq!(s.dbsize(0).unwrap(), 0);
    assert_eq!(s.flush_all(), 1);
    assert_eq!(s.dbsize(1).unwrap(), 0);
}

#[test]
fn slot_stats_counters_and_memory() {
    let mut s = Store::new(2).unwrap();
    let slot = key_hash_slot(b"foo");
    s.insert(0, b"foo", vec![0; 100], 0).unwrap();
    s.insert(1, b"foo", vec![0; 10], 0).unwrap();
    s.record_cpu_usec(slot, 7);
    s.record_cpu_usec(slot, u64::MAX);
    s.record_network_bytes_in(slot, 30);
    s.record_network_bytes_out(slot, 40);
    let st = s.slot_stats(slot);
    assert_eq!(st.key_count, 2);
    // Entry (16-byte key + 24-byte Vec) twice, plus the value heaps.
    assert_eq!(st.memory_bytes, 40 + 100 + 40 + 10);
    assert_eq!(
        (st.cpu_usec, st.network_bytes_in, st.network_bytes_out),
        (u64::MAX, 30, 40)
    );
    // A value grown in place is re-measured when the guard drops.
    {
        let mut v = s.get_mut(0, b"foo", 0).unwrap().unwrap();
        *v = vec![0; 1000];
    }
    assert_eq!(s.slot_stats(slot).memory_bytes, 40 + 1000 + 40 + 10);
    s.reset_slot_stats(slot);
    let st = s.slot_stats(slot);
    assert_eq!(
        (st.cpu_usec, st.network_bytes_in, st.network_bytes_out),
        (0, 0, 0)
    );
    assert_eq!(st.key_count, 2, "live figures survive a reset");
    s.record_cpu_usec(slot, 1);
    s.reset_all_slot_stats();
    assert_eq!(s.slot_stats(slot).cpu_usec, 0);
    s.drop_slot(slot);
    assert_eq!(s.slot_stats(slot).memory_bytes, 0);
}

/// Keys in one slot that share their first 8 bytes, on both sides of the inline length (14
/// bytes) and with trailing zero bytes: with thousands of them the 8-bit index tags collide,
/// so every lookup must compare whole keys (and lengths) to find its own value.
#[test]
fn keys_sharing_a_prefix_find_their_own_values() {
    let mut keys: Vec<Vec<u8>> = (0..3000u32)
        .map(|i| format!("{{t}}prefix{i}").into_bytes())
        .collect();
    keys.push(b"{t}prefix".to_vec());
    keys.push(b"{t}prefix\0".to_vec());
    keys.push(b"{t}prefix\0\0".to_vec());
    keys.rotate_right(3);
    let mut kv: KvStore<Vec<u8>> = KvStore::new(1).unwrap();
    // 200 keys: the slot table's small index (2-byte words, inline); then all: the wide one.
    for n in [200, keys.len()] {
        for (i, k) in keys.iter().enumerate().take(n) {
            let via_slot = SlotKey::new(k);
            assert_eq!(via_slot.slot(), key_hash_slot(b"t"));
            kv.insert_in_slot(0, via_slot, i.to_le_bytes().to_vec(), None, 0)
                .unwrap();
        }
        assert_eq!(kv.dbsize(0).unwrap(), n as u64);
        for (i, k) in keys.iter().enumerate().take(n) {
            let want = i.to_le_bytes().to_vec();
            assert_eq!(kv.get(0, k, 0).unwrap(), Some(&want), "{k:?}");
            assert_eq!(kv.get_in_slot(0, SlotKey::new(k), 0).unwrap(), Some(&want));
        }
    }
    for (i, k) in keys.iter().enumerate().filter(|(i, _)| i % 2 == 0) {
        let got = kv.remove_in_slot(0, SlotKey::new(k), 0).unwrap();
        assert_eq!(got, Some(i.to_le_bytes().to_vec()));
    }
    for (i, k) in keys.iter().enumerate() {
        let want = (i % 2 == 1).then(|| i.to_le_bytes().to_vec());
        assert_eq!(kv.get(0, k, 0).unwrap(), want.as_ref(), "{k:?}");
    }
}

/// Keys that differ only in trailing zero bytes (`{t}a`, `{t}a\0`, `{t}a\0\0`, ...) compare
/// equal word by word once padded, so the stored length must decide. 240 of them in one slot
/// (the small index) make 8-bit tag collisions between such keys near certain across 40 stores
/// with fresh hash seeds.
#[test]
fn keys_differing_in_trailing_zeros_stay_apart() {
    let keys: Vec<Vec<u8>> = (b'a'..b'a' + 20)
        .flat_map(|base| {
            (0..12).map(move |zeros| {
                let mut k = vec![b'{', b't', b'}', base];
                k.resize(4 + zeros, 0);
                k
            })
        })
        .collect();
    for _ in 0..40 {
        let mut kv: KvStore<Vec<u8>> = KvStore::new(1).unwrap();
        for (i, k) in keys.iter().enumerate() {
            kv.insert(0, k, i.to_le_bytes().to_vec(), 0).unwrap();
        }
        assert_eq!(kv.dbsize(0).unwrap(), keys.len() as u64);
        for (i, k) in keys.iter().enumerate() {
            let want = i.to_le_bytes().to_vec();
            assert_eq!(kv.get(0, k, 0).unwrap(), Some(&want), "{k:?}");
        }
    }
}

/// A read that meets a key past its deadline reads it as absent and says so once
/// (`take_read_expired`), so the host can delete it as Valkey's lookup does.
#[test]
fn a_read_of_an_expired_key_is_flagged_once() {
    let mut s: KvStore<Vec<u8>> = KvStore::new(1).unwrap();
    s.insert_with_expiry(0, b"k", b"v".to_vec(), Some(10), 0)
        .unwrap();
    assert!(s.get(0, b"k", 5).unwrap().is_some());
    assert!(s.get(0, b"missing", 5).unwrap().is_none());
    assert!(
        !s.take_read_expired(),
        "a live key and a missing one are not flagged"
    );
    assert!(s.get(0, b"k", 20).unwrap().is_none());
    assert!(s.take_read_expired());
    assert!(!s.take_read_expired(), "taken");
}

/// The `new` keyspace event's source (Valkey `dbAdd`): a key that was absent or expired gets
/// a value; an overwrite of a live key and a key of a hidden slot are not new.
#[test]
fn created_keys_are_logged_for_the_host_to_announce() {
    let mut s: KvStore<Vec<u8>> = KvStore::new(2).unwrap();
    s.insert(0, b"before", b"v".to_vec(), 0).unwrap();
    assert!(s.take_new().is_empty(), "not recording");
    s.log_new(true);
    s.insert(0, b"a", b"v".to_vec(), 0).unwrap();
    s.insert(0, b"a", b"w".to_vec(), 0).unwrap(); // overwrite: not new
    s.insert_with_expiry(1, b"b", b"v".to_vec(), Some(10), 0)
        .unwrap();
    s.insert(1, b"b", b"v".to_vec(), 20).unwrap(); // it had expired: new again
    let hidden = key_hash_slot(b"h");
    s.hide_slot(hidden);
    s.insert(0, b"h", b"v".to_vec(), 0).unwrap();
    assert!(s.has_new());
    let key = Bytes::from_static;
    assert_eq!(
        s.take_new(),
        [(0, key(b"a")), (1, key(b"b")), (1, key(b"b"))]
    );
    assert!(!s.has_new());
    s.log_new(false);
    s.insert(0, b"c", b"v".to_vec(), 0).unwrap();
    assert!(s.take_new().is_empty());
}

#[test]
fn expired_keys_are_logged_for_the_host_to_propagate() {
    let mut s: KvStore<Vec<u8>> = KvStore::new(2).unwrap();
    s.insert_with_expiry(0, b"cycle", b"v".to_vec(), Some(10), 0)
        .unwrap();
    s.insert_with_expiry(1, b"lazy", b"v".to_vec(), Some(10), 0)
        .unwrap();
    s.insert_with_expiry(0, b"over", b"v".to_vec(), Some(10), 0)
        .unwrap();
    s.insert(0, b"kept", b"v".to_vec(), 0).unwrap();
    // Not recording: nothing is kept.
    assert_eq!(s.expire_cycle(5, usize::MAX), 0);
    assert!(s.take_expired().is_empty());
    s.log_expired(true);
    // A mutating call that meets an expired key, an overwrite of one, the active cycle.
    assert!(s.remove(1, b"lazy", 20).unwrap().is_none());
    assert!(s.insert(0, b"over", b"new".to_vec(), 20).unwrap().is_none());
    assert!(s.has_expired());
    assert_eq!(s.expire_cycle(20, usize::MAX), 1);
    let key = Bytes::from_static;
    assert_eq!(
        s.take_expired(),
        [(1, key(b"lazy")), (0, key(b"over")), (0, key(b"cycle"))]
    );
    assert!(!s.has_expired());
    assert!(s.take_expired().is_empty());
}

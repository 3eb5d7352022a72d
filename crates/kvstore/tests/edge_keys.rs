//! Edge keys against the short-key paths: [`SlotKey::new`]'s branch-free slot for keys of up
//! to 16 bytes, the two-word table hash and inline-key comparison (keys of up to 14 bytes
//! inline, 15-16 hashed by words but stored on the heap), and the inlined walk of the small
//! 2-byte index beside the wide one.
//!
//! What the other test files do not cover and this one does:
//! * every key of 0..=2 bytes and every byte value at every position of keys of 1..=20
//!   bytes through `SlotKey::new`, plus `{`/`}` at every pair of positions;
//! * keys of every length 0..=20 made of zero bytes (all in slot 0), keys equal except for
//!   leading, middle or trailing zeros, keys sharing their first or last 8 bytes;
//! * seeded, reproducible hashers given through [`KvStore::with_hasher`], among them
//!   degenerate ones: a constant hash whose 8-bit tag equals the tombstone word's tag and whose
//!   home bucket is 0 for every key (every lookup walks one run of tombstones and tag-equal
//!   words), and one with two tag values and four homes;
//! * one slot crossing the 2-byte index's limits up and back down with lookups of present,
//!   removed (tombstoned) and never-inserted keys after every step;
//! * a model-based run mixing all of that with expiry, hidden slots, `slot_page`,
//!   `take_slot`/`drop_slot` and SCAN, every key-taking call made both key-only and with a
//!   [`SlotKey`].

use ferrocluster_kvstore::{KeyExpiry, KvStore, ScanOptions};
use ferrocluster_slot::{hash_tag, key_hash_slot, Slot, SlotKey};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{BuildHasher, Hasher};

// ---------------------------------------------------------------------------------------------
// Hashers
// ---------------------------------------------------------------------------------------------

/// How [`TestState`]'s hashes look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// A well-mixed 64-bit hash (FNV-1a then the splitmix64 finaliser, keyed by the seed).
    Mixed,
    /// Always `0x0100_0000_0000_0000`: 8-bit tag 1 (the tombstone word's tag byte) and home
    /// bucket 0 at every capacity.
    Constant,
    /// Tag 0 or 1 (top byte), home bucket 0..4 of 2^32 (low bits): every key starts its probe
    /// at bucket 0 and tags collide half the time.
    FewBits,
}

const SHAPES: [Shape; 3] = [Shape::Mixed, Shape::Constant, Shape::FewBits];

/// A reproducible `BuildHasher` for [`KvStore::with_hasher`].
#[derive(Debug, Clone, Copy)]
struct TestState {
    shape: Shape,
    seed: u64,
}

struct TestHasher {
    state: u64,
    shape: Shape,
    seed: u64,
}

impl Hasher for TestHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.state = (self.state ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        let mut x = self.state ^ self.seed;
        x ^= x >> 30;
        x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x ^= x >> 27;
        x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^= x >> 31;
        match self.shape {
            Shape::Mixed => x,
            Shape::Constant => 0x0100_0000_0000_0000,
            Shape::FewBits => ((x & 1) << 56) | ((x >> 1) & 3),
        }
    }
}

impl BuildHasher for TestState {
    type Hasher = TestHasher;
    fn build_hasher(&self) -> TestHasher {
        TestHasher {
            state: 0xcbf2_9ce4_8422_2325,
            shape: self.shape,
            seed: self.seed,
        }
    }
}

type Store = KvStore<Vec<u8>, TestState>;

fn store(dbs: usize, shape: Shape, seed: u64) -> Store {
    KvStore::with_hasher(dbs, TestState { shape, seed }).unwrap()
}

// ---------------------------------------------------------------------------------------------
// SlotKey
// ---------------------------------------------------------------------------------------------

/// CRC16/XMODEM bit by bit (poly 0x1021, init 0): an independent reference.
fn crc16_bitwise(bytes: &[u8]) -> u16 {
    let mut crc = 0u16;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

fn assert_slot_key(key: &[u8]) {
    let sk = SlotKey::new(key);
    assert_eq!(sk.key(), key);
    assert_eq!(sk.slot(), key_hash_slot(key), "SlotKey::new({key:?})");
}

/// Every key of 0..=2 bytes, against `key_hash_slot` and a bitwise CRC16 of the hash tag.
#[test]
fn slot_key_for_every_key_of_at_most_two_bytes() {
    let mut keys = vec![Vec::new()];
    for a in 0..=255u8 {
        keys.push(vec![a]);
        for b in 0..=255u8 {
            keys.push(vec![a, b]);
        }
    }
    for key in keys {
        assert_slot_key(&key);
        let want = crc16_bitwise(hash_tag(&key)) & 0x3FFF;
        assert_eq!(u16::from(SlotKey::new(&key).slot()), want, "{key:?}");
    }
}

/// Every byte value at every position of keys of 1..=20 bytes over backgrounds that stress the
/// word-wide `{` test (zero bytes, 0xFF, `}`, bytes one bit away from `{`), then `{` and `}`
/// at every pair of positions (tags of every length and place, empty tags, `}` before `{`).
#[test]
fn slot_key_for_every_byte_at_every_position_and_every_tag_placement() {
    for len in 1..=20usize {
        for bg in [0u8, 0xFF, b'}', b'z', b'{' ^ 0x80, b'{' ^ 0x01, 0x80] {
            for pos in 0..len {
                let mut key = vec![bg; len];
                for v in 0..=255u8 {
                    key[pos] = v;
                    assert_slot_key(&key);
                }
            }
        }
    }
    for len in 0..=20usize {
        for i in 0..len {
            for j in 0..len {
                for bg in [b'x', 0u8] {
                    let mut key = vec![bg; len];
                    key[j] = b'}';
                    key[i] = b'{';
                    assert_slot_key(&key);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Key pool
// ---------------------------------------------------------------------------------------------

/// The `i`-th key of the bulk family: `{t}`, then `i` as two little-endian bytes, then zero
/// bytes up to a length of 5..=20 (`i % 16`). Zero bytes inside and at the end, all lengths
/// around 8/14/15/16/17, all in the slot of `t`, sharing their first bytes.
fn bulk_key(i: usize) -> Vec<u8> {
    let mut k = b"{t}".to_vec();
    // `i` stays below 65536 in these tests.
    k.extend_from_slice(&(i as u16).to_le_bytes());
    k.resize(5 + i % 16, 0);
    k
}

/// Keys of every length 0..=20 in families that differ only where the word tricks could go
/// wrong; most share the slot of `t` or slot 0 (zero bytes only).
fn edge_keys() -> Vec<Vec<u8>> {
    let mut set = BTreeSet::new();
    for len in 0..=20usize {
        // Zero bytes only: one slot (CRC of zeros is 0), one key per length.
        set.insert(vec![0u8; len]);
        // `x` bytes: same first and last 8 bytes across lengths.
        set.insert(vec![b'x'; len]);
        if len >= 4 {
            for fill in [b'a', 0u8] {
                // Trailing zeros: `{t}a`, `{t}a\0`, `{t}a\0\0`, ...
                let mut k = b"{t}".to_vec();
                k.push(fill);
                k.resize(len, 0);
                set.insert(k);
                // Leading zeros before the tag.
                let mut k = vec![0u8; len - 4];
                k.extend_from_slice(b"{t}");
                k.push(fill);
                set.insert(k);
                // A zero in the middle, the rest `fill`.
                let mut k = b"{t}".to_vec();
                k.resize(len, fill);
                k[3 + (len - 3) / 2] = 0;
                set.insert(k);
                // Equal except for the last byte.
                let mut k = b"{t}".to_vec();
                k.resize(len, b'm');
                let last = len - 1;
                k[last] = fill;
                set.insert(k);
                // Equal except for byte 8 (the first byte of the second word), if present.
                if len > 8 {
                    let mut k = b"{t}".to_vec();
                    k.resize(len, b'n');
                    k[8] = fill;
                    set.insert(k);
                }
            }
        }
        // Untagged keys spread over slots, and keys with `{` that have no tag.
        let mut k = b"k".to_vec();
        k.extend((1..len).map(|i| b'0' + (i % 10) as u8));
        k.truncate(len);
        set.insert(k);
        if len >= 2 {
            let mut k = vec![b'{'; len];
            k[len - 1] = b'}';
            set.insert(k);
            let mut k = b"}{".to_vec();
            k.resize(len, b'y');
            set.insert(k);
        }
    }
    set.into_iter().collect()
}

fn pool() -> Vec<Vec<u8>> {
    let mut keys = edge_keys();
    let have: BTreeSet<Vec<u8>> = keys.iter().cloned().collect();
    keys.extend((0..320).map(bulk_key).filter(|k| !have.contains(k)));
    keys
}

fn value_of(i: usize, gen: u32) -> Vec<u8> {
    let mut v = (i as u32).to_le_bytes().to_vec();
    v.extend_from_slice(&gen.to_le_bytes());
    v
}

// ---------------------------------------------------------------------------------------------
// Deterministic tests
// ---------------------------------------------------------------------------------------------

/// Every edge key finds its own value under every hasher shape, by both entry points;
/// removing every other one leaves the rest, the removed ones read as absent (tombstones on
/// their paths), and reinserting them restores them.
#[test]
fn edge_keys_find_their_own_values_under_every_hasher() {
    let keys = edge_keys();
    for shape in SHAPES {
        for seed in 0..4u64 {
            let mut s = store(1, shape, seed);
            for (i, k) in keys.iter().enumerate() {
                assert_eq!(
                    s.get(0, k, 0).unwrap(),
                    None,
                    "{shape:?} {k:?} before insert"
                );
                let prev = if i % 2 == 0 {
                    s.insert(0, k, value_of(i, 0), 0)
                } else {
                    s.insert_in_slot(0, SlotKey::new(k), value_of(i, 0), None, 0)
                };
                assert_eq!(prev.unwrap(), None, "{shape:?} {k:?} inserted twice");
            }
            assert_eq!(s.dbsize(0).unwrap(), keys.len() as u64);
            let check = |s: &Store, removed: &dyn Fn(usize) -> bool| {
                for (i, k) in keys.iter().enumerate() {
                    let want = (!removed(i)).then(|| value_of(i, 0));
                    assert_eq!(s.get(0, k, 0).unwrap(), want.as_ref(), "{shape:?} {k:?}");
                    assert_eq!(
                        s.get_in_slot(0, SlotKey::new(k), 0).unwrap(),
                        want.as_ref(),
                        "{shape:?} {k:?}"
                    );
                }
            };
            check(&s, &|_| false);
            for (i, k) in keys.iter().enumerate().filter(|(i, _)| i % 2 == 1) {
                let got = if i % 4 == 1 {
                    s.remove(0, k, 0)
                } else {
                    s.remove_in_slot(0, SlotKey::new(k), 0)
                };
                assert_eq!(got.unwrap(), Some(value_of(i, 0)), "{shape:?} {k:?}");
                assert_eq!(s.remove(0, k, 0).unwrap(), None, "{shape:?} {k:?} twice");
            }
            check(&s, &|i| i % 2 == 1);
            for (i, k) in keys.iter().enumerate().filter(|(i, _)| i % 2 == 1) {
                assert_eq!(s.insert(0, k, value_of(i, 0), 0).unwrap(), None);
            }
            check(&s, &|_| false);
            let total: u64 = keys
                .iter()
                .map(|k| key_hash_slot(k))
                .collect::<BTreeSet<Slot>>()
                .into_iter()
                .map(|slot| s.count_keys_in_slot(0, slot).unwrap())
                .sum();
            assert_eq!(total, keys.len() as u64);
        }
    }
}

/// Checks `s` holds exactly `present` of the bulk keys `0..limit` in db 0 (with their
/// `value_of(i, 0)` values).
fn check_bulk(s: &Store, present: &BTreeSet<usize>, limit: usize, what: &str) {
    for i in 0..limit {
        let k = bulk_key(i);
        let want = present.contains(&i).then(|| value_of(i, 0));
        assert_eq!(
            s.get(0, &k, 0).unwrap(),
            want.as_ref(),
            "{what}: key {i} {k:?}"
        );
    }
    let slot = key_hash_slot(b"t");
    assert_eq!(
        s.count_keys_in_slot(0, slot).unwrap(),
        present.len() as u64,
        "{what}"
    );
}

/// One slot grows from 0 to 320 keys (past the inline index classes and the 2-byte word
/// limit of 255 entries, into the wide index), shrinks back to 0 in a scattered order, then
/// grows again, under every hasher shape. After each step the key just touched and its
/// neighbours are looked up; around the index-size changes, every key is.
#[test]
fn one_slot_crosses_the_small_index_limits_up_and_down() {
    const N: usize = 320;
    let near_limits = |n: usize| n < 12 || (170..=190).contains(&n) || (245..=260).contains(&n);
    for shape in SHAPES {
        let mut s = store(1, shape, 7);
        let mut present = BTreeSet::new();
        let what = format!("{shape:?}");
        for round in 0..2 {
            for i in 0..N {
                assert_eq!(s.get(0, &bulk_key(i), 0).unwrap(), None);
                s.insert_in_slot(0, SlotKey::new(&bulk_key(i)), value_of(i, 0), None, 0)
                    .unwrap();
                present.insert(i);
                assert_eq!(s.get(0, &bulk_key(i), 0).unwrap(), Some(&value_of(i, 0)));
                if near_limits(present.len()) {
                    check_bulk(&s, &present, N, &format!("{what} round {round} up"));
                }
            }
            check_bulk(&s, &present, N, &what);
            // Remove in a scattered order (stride coprime to N), re-checking the removed key
            // (now behind a tombstone or gone) and a present one.
            for step in 0..N {
                let i = (step * 97) % N;
                let got = s.remove(0, &bulk_key(i), 0).unwrap();
                assert_eq!(got, Some(value_of(i, 0)), "{what} remove {i}");
                present.remove(&i);
                assert_eq!(s.get(0, &bulk_key(i), 0).unwrap(), None, "{what} {i}");
                if let Some(&j) = present.iter().next() {
                    assert_eq!(s.get(0, &bulk_key(j), 0).unwrap(), Some(&value_of(j, 0)));
                }
                if near_limits(present.len()) {
                    check_bulk(&s, &present, N, &format!("{what} round {round} down"));
                }
            }
            assert_eq!(s.dbsize(0).unwrap(), 0);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Model-based run
// ---------------------------------------------------------------------------------------------

const DBS: usize = 2;

#[derive(Debug, Clone)]
enum Op {
    Insert {
        db: usize,
        key: usize,
        ttl: Option<u64>,
        via_slot: bool,
    },
    Remove {
        db: usize,
        key: usize,
        via_slot: bool,
    },
    Get {
        db: usize,
        key: usize,
    },
    GetMut {
        db: usize,
        key: usize,
        via_slot: bool,
    },
    Expire {
        db: usize,
        key: usize,
        delta: u64,
    },
    /// Inserts keys `start..start + n` of the pool (wrapping).
    InsertRange {
        db: usize,
        start: usize,
        n: usize,
        ttl: Option<u64>,
    },
    /// Removes keys `start, start + stride, ...` of the pool (`n` of them, wrapping).
    RemoveRange {
        db: usize,
        start: usize,
        n: usize,
        stride: usize,
    },
    Advance(u64),
    ExpireCycle(usize),
    Hide(usize),
    Reveal(usize),
    DropSlot(usize),
    TakeSlot(usize),
    SlotPage {
        db: usize,
        key: usize,
        count: usize,
    },
    Scan {
        db: usize,
        count: usize,
    },
}

fn op(pool_len: usize) -> impl Strategy<Value = Op> {
    let db = 0..DBS;
    let key = 0..pool_len;
    let ttl = proptest::option::weighted(0.3, 0..20u64);
    prop_oneof![
        6 => (db.clone(), key.clone(), ttl.clone(), any::<bool>())
            .prop_map(|(db, key, ttl, via_slot)| Op::Insert { db, key, ttl, via_slot }),
        4 => (db.clone(), key.clone(), any::<bool>())
            .prop_map(|(db, key, via_slot)| Op::Remove { db, key, via_slot }),
        4 => (db.clone(), key.clone()).prop_map(|(db, key)| Op::Get { db, key }),
        2 => (db.clone(), key.clone(), any::<bool>())
            .prop_map(|(db, key, via_slot)| Op::GetMut { db, key, via_slot }),
        2 => (db.clone(), key.clone(), 0..20u64)
            .prop_map(|(db, key, delta)| Op::Expire { db, key, delta }),
        2 => (db.clone(), key.clone(), 1..330usize, ttl)
            .prop_map(|(db, start, n, ttl)| Op::InsertRange { db, start, n, ttl }),
        2 => (db.clone(), key.clone(), 1..330usize, 1..8usize)
            .prop_map(|(db, start, n, stride)| Op::RemoveRange { db, start, n, stride }),
        2 => (0..10u64).prop_map(Op::Advance),
        1 => (1..200usize).prop_map(Op::ExpireCycle),
        1 => key.clone().prop_map(Op::Hide),
        1 => key.clone().prop_map(Op::Reveal),
        1 => key.clone().prop_map(Op::DropSlot),
        1 => key.clone().prop_map(Op::TakeSlot),
        1 => (db.clone(), key, 1..50usize)
            .prop_map(|(db, key, count)| Op::SlotPage { db, key, count }),
        1 => (db, 1..60usize).prop_map(|(db, count)| Op::Scan { db, count }),
    ]
}

/// A stored value and its deadline.
type Stored = (Vec<u8>, Option<u64>);

/// (db, key) -> (value, deadline): what is physically stored.
#[derive(Default)]
struct Model {
    map: BTreeMap<(usize, Vec<u8>), Stored>,
    hidden: BTreeSet<Slot>,
    now: u64,
}

impl Model {
    fn live(&self, deadline: Option<u64>) -> bool {
        deadline.is_none_or(|d| self.now <= d)
    }

    fn live_value(&self, db: usize, key: &[u8]) -> Option<&Vec<u8>> {
        self.map
            .get(&(db, key.to_vec()))
            .filter(|(_, d)| self.live(*d))
            .map(|(v, _)| v)
    }

    fn expire_if_needed(&mut self, db: usize, key: &[u8]) {
        let k = (db, key.to_vec());
        if self.map.get(&k).is_some_and(|(_, d)| !self.live(*d)) {
            self.map.remove(&k);
        }
    }

    fn insert(
        &mut self,
        db: usize,
        key: &[u8],
        v: Vec<u8>,
        deadline: Option<u64>,
    ) -> Option<Vec<u8>> {
        let prev = self.live_value(db, key).cloned();
        self.map.insert((db, key.to_vec()), (v, deadline));
        prev
    }

    fn remove(&mut self, db: usize, key: &[u8]) -> Option<Vec<u8>> {
        let prev = self.live_value(db, key).cloned();
        self.map.remove(&(db, key.to_vec()));
        prev
    }

    fn live_in_slot(&self, db: usize, slot: Slot) -> BTreeSet<Vec<u8>> {
        self.map
            .iter()
            .filter(|((d, k), (_, dl))| *d == db && key_hash_slot(k) == slot && self.live(*dl))
            .map(|((_, k), _)| k.clone())
            .collect()
    }

    fn stored_in_slot(&self, db: usize, slot: Slot) -> u64 {
        self.map
            .keys()
            .filter(|(d, k)| *d == db && key_hash_slot(k) == slot)
            .count() as u64
    }

    fn drop_slot(&mut self, slot: Slot) -> u64 {
        let before = self.map.len();
        self.map.retain(|(_, k), _| key_hash_slot(k) != slot);
        (before - self.map.len()) as u64
    }
}

/// The key at `i` and the store's view of it against the model, by every read.
fn check_key(s: &Store, m: &Model, db: usize, k: &[u8]) {
    let want = m.live_value(db, k);
    assert_eq!(s.get(db, k, m.now).unwrap(), want, "get {db} {k:?}");
    assert_eq!(
        s.get_in_slot(db, SlotKey::new(k), m.now).unwrap(),
        want,
        "get_in_slot {db} {k:?}"
    );
    assert_eq!(s.exists(db, k, m.now).unwrap(), want.is_some());
    let expiry = match m.map.get(&(db, k.to_vec())) {
        Some((_, d)) if !m.live(*d) => KeyExpiry::Missing,
        Some((_, Some(d))) => KeyExpiry::At(*d),
        Some((_, None)) => KeyExpiry::Persistent,
        None => KeyExpiry::Missing,
    };
    assert_eq!(s.expiry(db, k, m.now).unwrap(), expiry, "expiry {db} {k:?}");
}

fn check_counts(s: &Store, m: &Model) {
    for db in 0..DBS {
        let stored = m.map.keys().filter(|(d, _)| *d == db);
        let visible = stored
            .clone()
            .filter(|(_, k)| !m.hidden.contains(&key_hash_slot(k)))
            .count() as u64;
        assert_eq!(s.dbsize(db).unwrap(), visible, "dbsize {db}");
        assert_eq!(
            s.len_including_hidden(db).unwrap(),
            stored.count() as u64,
            "keys {db}"
        );
    }
}

fn check_all(s: &Store, m: &Model, keys: &[Vec<u8>]) {
    check_counts(s, m);
    for db in 0..DBS {
        for k in keys {
            check_key(s, m, db, k);
        }
        let slots: BTreeSet<Slot> = keys.iter().map(|k| key_hash_slot(k)).collect();
        for slot in slots {
            assert_eq!(
                s.count_keys_in_slot(db, slot).unwrap(),
                m.stored_in_slot(db, slot),
                "count {db} {slot:?}"
            );
        }
    }
}

fn run(shape: Shape, seed: u64, ops: Vec<Op>) {
    let keys = pool();
    let mut s = store(DBS, shape, seed);
    let mut m = Model {
        now: 1_000,
        ..Model::default()
    };
    let mut gen = 0u32;
    for op in ops {
        gen += 1;
        let now = m.now;
        match op {
            Op::Insert {
                db,
                key,
                ttl,
                via_slot,
            } => {
                let k = &keys[key];
                let v = value_of(key, gen);
                let deadline = ttl.map(|t| now + t);
                let got = if via_slot {
                    s.insert_in_slot(db, SlotKey::new(k), v.clone(), deadline, now)
                } else {
                    s.insert_with_expiry(db, k, v.clone(), deadline, now)
                };
                assert_eq!(got.unwrap(), m.insert(db, k, v, deadline), "insert {k:?}");
                check_key(&s, &m, db, k);
            }
            Op::Remove { db, key, via_slot } => {
                let k = &keys[key];
                let got = if via_slot {
                    s.remove_in_slot(db, SlotKey::new(k), now)
                } else {
                    s.remove(db, k, now)
                };
                assert_eq!(got.unwrap(), m.remove(db, k), "remove {k:?}");
                check_key(&s, &m, db, k);
            }
            Op::Get { db, key } => check_key(&s, &m, db, &keys[key]),
            Op::GetMut { db, key, via_slot } => {
                let k = &keys[key];
                m.expire_if_needed(db, k);
                let got = if via_slot {
                    s.get_mut_in_slot(db, SlotKey::new(k), now)
                } else {
                    s.get_mut(db, k, now)
                }
                .unwrap();
                match (got, m.map.get_mut(&(db, k.to_vec()))) {
                    (Some(mut g), Some((v, _))) => {
                        assert_eq!(&*g, v, "get_mut {k:?}");
                        g.push(gen as u8);
                        v.push(gen as u8);
                    }
                    (None, None) => {}
                    (got, want) => {
                        panic!("get_mut {k:?}: {:?} vs {want:?}", got.map(|g| g.clone()))
                    }
                }
                check_key(&s, &m, db, k);
            }
            Op::Expire { db, key, delta } => {
                let k = &keys[key];
                m.expire_if_needed(db, k);
                let at = now + delta;
                let exists = m.map.contains_key(&(db, k.to_vec()));
                assert_eq!(s.set_expire_at(db, k, at, now).unwrap(), exists);
                if let Some((_, d)) = m.map.get_mut(&(db, k.to_vec())) {
                    *d = Some(at);
                }
                check_key(&s, &m, db, k);
            }
            Op::InsertRange { db, start, n, ttl } => {
                for j in 0..n {
                    let i = (start + j) % keys.len();
                    let k = &keys[i];
                    let v = value_of(i, gen);
                    let deadline = ttl.map(|t| now + t);
                    let got = s.insert_in_slot(db, SlotKey::new(k), v.clone(), deadline, now);
                    assert_eq!(got.unwrap(), m.insert(db, k, v, deadline), "range {k:?}");
                }
                check_all(&s, &m, &keys);
            }
            Op::RemoveRange {
                db,
                start,
                n,
                stride,
            } => {
                for j in 0..n {
                    let i = (start + j * stride) % keys.len();
                    let k = &keys[i];
                    assert_eq!(
                        s.remove(db, k, now).unwrap(),
                        m.remove(db, k),
                        "range {k:?}"
                    );
                }
                check_all(&s, &m, &keys);
            }
            Op::Advance(ms) => m.now += ms,
            Op::ExpireCycle(budget) => {
                s.expire_cycle(now, budget);
                // Reclaimed keys were expired; every live read is unchanged. Reconcile the
                // stored set with the store's counts per slot afterwards.
                let expired: Vec<(usize, Vec<u8>)> = m
                    .map
                    .iter()
                    .filter(|(_, (_, d))| !m.live(*d))
                    .map(|(k, _)| k.clone())
                    .collect();
                for (db, k) in expired {
                    let slot = key_hash_slot(&k);
                    if m.hidden.contains(&slot) {
                        continue;
                    }
                    // The store either still holds it (counted) or reclaimed it; learn which
                    // from `keys_in_slot`, which lists stored keys.
                    let stored = s
                        .keys_in_slot(db, slot, usize::MAX)
                        .unwrap()
                        .iter()
                        .any(|b| b[..] == k[..]);
                    if !stored {
                        m.map.remove(&(db, k));
                    }
                }
                check_all(&s, &m, &keys);
            }
            Op::Hide(key) => {
                let slot = key_hash_slot(&keys[key]);
                assert_eq!(s.hide_slot(slot), m.hidden.insert(slot));
                check_counts(&s, &m);
            }
            Op::Reveal(key) => {
                let slot = key_hash_slot(&keys[key]);
                assert_eq!(s.reveal_slot(slot), m.hidden.remove(&slot));
                check_counts(&s, &m);
            }
            Op::DropSlot(key) => {
                let slot = key_hash_slot(&keys[key]);
                assert_eq!(s.drop_slot(slot), m.drop_slot(slot));
                check_all(&s, &m, &keys);
            }
            Op::TakeSlot(key) => {
                let slot = key_hash_slot(&keys[key]);
                let taken = s.take_slot(slot);
                assert_eq!(taken.len(), m.drop_slot(slot));
                drop(taken);
                check_all(&s, &m, &keys);
            }
            Op::SlotPage { db, key, count } => {
                let slot = key_hash_slot(&keys[key]);
                let mut seen = BTreeMap::new();
                let mut cursor = 0;
                for _ in 0..10_000 {
                    cursor = s
                        .slot_page(db, slot, cursor, count, now, |k, v, d| {
                            let again = seen.insert(k.to_vec(), (v.clone(), d));
                            assert!(again.is_none(), "slot_page visited {k:?} twice");
                        })
                        .unwrap();
                    if cursor == 0 {
                        break;
                    }
                }
                assert_eq!(cursor, 0, "slot_page did not finish");
                let want: BTreeMap<Vec<u8>, Stored> = m
                    .live_in_slot(db, slot)
                    .into_iter()
                    .map(|k| {
                        let e = m.map[&(db, k.clone())].clone();
                        (k, e)
                    })
                    .collect();
                assert_eq!(seen, want, "slot_page {db} {slot:?}");
            }
            Op::Scan { db, count } => {
                let opts = ScanOptions {
                    count,
                    ..ScanOptions::default()
                };
                let mut got = Vec::new();
                let mut cursor = 0;
                for _ in 0..100_000 {
                    let page = s.scan(db, cursor, &opts, now).unwrap();
                    got.extend(page.keys.iter().map(|b| b.to_vec()));
                    cursor = page.cursor;
                    if cursor == 0 {
                        break;
                    }
                }
                assert_eq!(cursor, 0, "scan did not finish");
                let n = got.len();
                let got: BTreeSet<Vec<u8>> = got.into_iter().collect();
                assert_eq!(n, got.len(), "scan without writes returned a key twice");
                let want: BTreeSet<Vec<u8>> = m
                    .map
                    .iter()
                    .filter(|((d, k), (_, dl))| {
                        *d == db && m.live(*dl) && !m.hidden.contains(&key_hash_slot(k))
                    })
                    .map(|((_, k), _)| k.clone())
                    .collect();
                assert_eq!(got, want, "scan {db}");
            }
        }
    }
    check_all(&s, &m, &keys);
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        Just(Shape::Mixed),
        Just(Shape::Constant),
        Just(Shape::FewBits)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn edge_keys_match_a_model(
        shape in shape(),
        seed in any::<u64>(),
        ops in proptest::collection::vec(op(pool().len()), 1..60),
    ) {
        run(shape, seed, ops);
    }
}

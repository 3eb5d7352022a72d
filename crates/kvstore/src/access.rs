//! What `maxmemory` needs from the store (Redis `evict.c`): the data set's size, a per-key
//! access word for the LRU and LFU policies, and samples of eviction candidates.
//!
//! The store does not interpret access words: the host keeps in them what Redis keeps in an
//! object's 24-bit `lru` field (an LRU clock, or an LFU counter with its decrement time) and
//! computes new ones; the store keeps one `u32` per key, only while the host asks it to
//! ([`KvStore::set_access_tracking`]), so a store without an LRU/LFU policy pays nothing.

use crate::store::KvStore;
use crate::{KvError, KvValue};
use bytes::Bytes;
use ferrocluster_slot::SlotKey;
use rand_core::RngCore;
use std::hash::BuildHasher;

/// A key drawn by [`KvStore::sample_keys`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sampled {
    /// The key.
    pub key: Bytes,
    /// Its access word (while access is tracked).
    pub access: Option<u32>,
    /// Its deadline (Unix ms), if it has one.
    pub deadline: Option<u64>,
}

impl<V: KvValue, S: BuildHasher> KvStore<V, S> {
    /// Bytes of the data set: the sum over every key of its entry, key and value heap bytes
    /// (the figure SLOT-STATS `memory-bytes` reports per slot), hidden slots included. O(1).
    /// What a host compares with `maxmemory`; not the allocator's total (tables, indexes and
    /// the host's own buffers are not in it).
    pub fn memory_bytes(&self) -> u64 {
        self.dbs.iter().flatten().map(|d| d.memory).sum()
    }

    /// Starts keeping an access word per key, every existing key and every key added later
    /// starting at `init` (Redis gives a new object the current LRU clock, or `LFU_INIT_VAL`
    /// with the current time), or stops and frees the words (`None`). O(keys) when it starts.
    pub fn set_access_tracking(&mut self, init: Option<u32>) {
        self.access_init = init;
        for d in self.dbs.iter_mut().flatten() {
            for t in d.slots.iter_mut().flatten() {
                t.set_access_all(init);
            }
        }
    }

    /// While access is tracked: the word keys added from now on start with (the host moves
    /// its clock forward with it). Ignored while access is not tracked.
    pub fn set_access_init(&mut self, init: u32) {
        if self.access_init.is_some() {
            self.access_init = Some(init);
        }
    }

    /// Whether access words are kept.
    pub fn tracks_access(&self) -> bool {
        self.access_init.is_some()
    }

    /// The access word of a key live at `now`; `None` when the key is absent or access is not
    /// tracked.
    ///
    /// # Errors
    /// [`KvError::DbOutOfRange`].
    pub fn access_word(&self, db: usize, key: &[u8], now: u64) -> Result<Option<u32>, KvError> {
        Ok(match self.locate(db, SlotKey::new(key))? {
            Some((t, pos, _)) if !t.is_expired(pos, now) => t.access(pos),
            _ => None,
        })
    }

    /// Replaces the access word of a key live at `now` with `update(old)` (the host's touch
    /// on a lookup: Redis `lookupKey` updating `lru`). Returns the new word; `None` when the
    /// key is absent (an expired one is deleted, as any mutating call does) or access is not
    /// tracked.
    ///
    /// # Errors
    /// [`KvError::DbOutOfRange`].
    pub fn touch_in_slot(
        &mut self,
        db: usize,
        key: SlotKey<'_>,
        now: u64,
        update: impl FnOnce(u32) -> u32,
    ) -> Result<Option<u32>, KvError> {
        if self.access_init.is_none() {
            self.check_db(db)?;
            return Ok(None);
        }
        let Some((slot, pos, _)) = self.locate_mut(db, key, now)? else {
            return Ok(None);
        };
        let cell = self.dbs[db]
            .as_deref_mut()
            .and_then(|d| d.slots.get_mut(slot))
            .and_then(|t| t.as_deref_mut())
            .and_then(|t| t.access_mut(pos));
        Ok(cell.map(|w| {
            *w = update(*w);
            *w
        }))
    }

    /// Draws up to `count` keys of `db` live at `now` into `out` (Redis `evictionPoolPopulate`
    /// sampling `maxmemory-samples` keys with `dictGetSomeKeys`): from all visible keys,
    /// uniformly, or (`volatile_only`) from the keys with a deadline: a random slot that has
    /// some, then a random one of its keys with a deadline. Hidden (importing) slots are never
    /// sampled. Keys may repeat; fewer than `count` come back when few exist.
    ///
    /// # Errors
    /// [`KvError::DbOutOfRange`].
    pub fn sample_keys<R: RngCore + ?Sized>(
        &self,
        db: usize,
        volatile_only: bool,
        count: usize,
        now: u64,
        rng: &mut R,
        out: &mut Vec<Sampled>,
    ) -> Result<(), KvError> {
        let Some(d) = self.db(db)? else {
            return Ok(());
        };
        let sampled = |t: &crate::table::SlotTable<V>, pos: usize| Sampled {
            key: Bytes::copy_from_slice(t.entries[pos].key.as_bytes()),
            access: t.access(pos),
            deadline: t.deadline(pos),
        };
        // Draws that hit an expired key are tried again, up to this many draws in all.
        let mut draws = count * 4;
        let mut got = 0;
        while got < count && draws > 0 {
            draws -= 1;
            let hit = if volatile_only {
                if d.expires == 0 {
                    return Ok(());
                }
                let start = (rng.next_u32() as usize) % ferrocluster_slot::SLOT_COUNT;
                let slot = d
                    .volatile
                    .next_from(start, &self.hidden)
                    .or_else(|| d.volatile.next_from(0, &self.hidden));
                let Some(t) = slot.and_then(|s| d.table(s)) else {
                    return Ok(());
                };
                let n = t.len();
                let from = (rng.next_u32() as usize) % n.max(1);
                (0..n)
                    .map(|i| (from + i) % n)
                    .find(|&p| t.deadline(p).is_some())
                    .map(|p| (t, p))
            } else {
                if d.visible == 0 {
                    return Ok(());
                }
                let r = ((u128::from(rng.next_u64()) * u128::from(d.visible)) >> 64) as u64;
                self.nth_visible(d, r)
            };
            if let Some((t, pos)) = hit {
                if !t.is_expired(pos, now) {
                    out.push(sampled(t, pos));
                    got += 1;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::KvStore;
    use ferrocluster_slot::SlotKey;
    use rand_chacha::rand_core::SeedableRng;
    use rand_chacha::ChaCha8Rng as StdRng;

    #[test]
    fn memory_follows_inserts_changes_and_deletes() {
        let mut kv: KvStore<Vec<u8>> = KvStore::new(2).unwrap();
        assert_eq!(kv.memory_bytes(), 0);
        kv.insert(0, b"a", vec![0; 100], 0).unwrap();
        kv.insert(1, b"b", vec![0; 50], 0).unwrap();
        let two = kv.memory_bytes();
        assert!(two >= 150, "{two}");
        let per_slot: u64 = [b"a".as_slice(), b"b"]
            .iter()
            .map(|k| {
                kv.slot_stats(ferrocluster_slot::key_hash_slot(k))
                    .memory_bytes
            })
            .sum();
        assert_eq!(two, per_slot);
        kv.get_mut(0, b"a", 0).unwrap().unwrap().reserve_exact(1000);
        assert!(kv.memory_bytes() >= two + 1000);
        kv.remove(0, b"a", 0).unwrap();
        kv.drop_slot(ferrocluster_slot::key_hash_slot(b"b"));
        assert_eq!(kv.memory_bytes(), 0);
    }

    #[test]
    fn access_words_follow_their_keys() {
        let mut kv: KvStore<Vec<u8>> = KvStore::new(1).unwrap();
        kv.insert(0, b"old", b"x".to_vec(), 0).unwrap();
        assert_eq!(kv.access_word(0, b"old", 0).unwrap(), None);
        kv.set_access_tracking(Some(7));
        assert_eq!(kv.access_word(0, b"old", 0).unwrap(), Some(7));
        kv.set_access_init(9);
        // Keys in one slot (hash tag), so removals move entries inside one table.
        for i in 0..300 {
            kv.insert(0, format!("{{t}}{i}").as_bytes(), b"v".to_vec(), 0)
                .unwrap();
        }
        let k = |i: usize| format!("{{t}}{i}").into_bytes();
        for i in 0..300 {
            kv.touch_in_slot(0, SlotKey::new(&k(i)), 0, |_| i as u32)
                .unwrap();
        }
        for i in (0..300).step_by(3) {
            kv.remove(0, &k(i), 0).unwrap();
        }
        for i in 0..300 {
            let want = (i % 3 != 0).then_some(i as u32);
            assert_eq!(kv.access_word(0, &k(i), 0).unwrap(), want, "{i}");
        }
        kv.set_access_tracking(None);
        assert_eq!(kv.access_word(0, &k(1), 0).unwrap(), None);
        assert_eq!(
            kv.touch_in_slot(0, SlotKey::new(&k(1)), 0, |w| w + 1)
                .unwrap(),
            None
        );
    }

    #[test]
    fn samples_are_live_and_volatile_when_asked() {
        let mut kv: KvStore<Vec<u8>> = KvStore::new(1).unwrap();
        let mut rng = StdRng::seed_from_u64(1);
        let mut out = Vec::new();
        kv.sample_keys(0, false, 5, 0, &mut rng, &mut out).unwrap();
        assert!(out.is_empty());
        for i in 0..100 {
            let deadline = (i % 10 == 0).then_some(1_000 + i);
            kv.insert_with_expiry(0, format!("k{i}").as_bytes(), b"v".to_vec(), deadline, 0)
                .unwrap();
        }
        kv.sample_keys(0, false, 5, 0, &mut rng, &mut out).unwrap();
        assert_eq!(out.len(), 5);
        out.clear();
        kv.sample_keys(0, true, 20, 0, &mut rng, &mut out).unwrap();
        assert_eq!(out.len(), 20);
        assert!(out.iter().all(|s| s.deadline.is_some()));
        // Past every deadline no volatile key is live.
        out.clear();
        kv.sample_keys(0, true, 5, 10_000, &mut rng, &mut out)
            .unwrap();
        assert!(out.is_empty());
    }
}

//! `maxmemory` and its eviction policies (Redis 7.0 / Valkey 9 `evict.c`): before a client's
//! command runs, while the data set is over `maxmemory`, keys are evicted by the policy; when
//! none can be (`noeviction`, or a `volatile-*` policy with no key that has a TTL), commands
//! flagged `denyoom` are refused with `-OOM command not allowed when used memory >
//! 'maxmemory'.`.
//!
//! * **The measure** is the data set as the store counts it
//!   ([`ferrocluster_kvstore::KvStore::memory_bytes`]: every key's entry, key and value
//!   bytes), not the allocator's total that Redis compares (its `used_memory` less the
//!   replica and AOF buffers). So the same `maxmemory` holds somewhat more data here than on
//!   redis-server, whose total also counts its tables, its start-up baseline (about 1 MB) and
//!   its client buffers. INFO shows it as `used_memory_dataset`.
//! * **Candidates**: `maxmemory-samples` keys per database per round, kept in a pool of the
//!   16 best seen so far (Redis's `EVPOOL_SIZE`), best evicted first: the longest idle (LRU,
//!   Redis's 24-bit clock of 1000 ms ticks), the least used (LFU: Redis's 8-bit logarithmic
//!   counter with `lfu-log-factor`, decremented every `lfu-decay-time` minutes), the nearest
//!   deadline (TTL); random policies take a random key, databases in turn.
//! * **An eviction** deletes the key and sends `DEL` to the replicas, the AOF and a slot
//!   export link, flags WATCHers and invalidates client-side caches, and counts
//!   `evicted_keys`. Replicas do not evict (`replica-ignore-maxmemory yes`, Redis's default):
//!   their primary's DELs keep them in step.
//! * **Access words** (LRU clock or LFU counter) are kept by the store only while an LRU or
//!   LFU policy is set; every key a command names is touched after it runs, except by the
//!   commands Redis looks keys up for with `LOOKUP_NOTOUCH` (OBJECT, TYPE, EXISTS, TTL and
//!   the like).

use crate::server::State;
use crate::value::Value;
use ferrocluster_kvstore::{KvStore, Sampled};
use rand_core::RngCore;

/// Redis's `shared.oomerr` (without `-` and CRLF).
pub const OOM_ERR: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// `maxmemory-policy` (Redis 7.0's eight).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    /// Evict nothing: refuse `denyoom` commands.
    #[default]
    NoEviction,
    /// Any key, least recently used first.
    AllKeysLru,
    /// Any key, least frequently used first.
    AllKeysLfu,
    /// Any key, at random.
    AllKeysRandom,
    /// Keys with a TTL, least recently used first.
    VolatileLru,
    /// Keys with a TTL, least frequently used first.
    VolatileLfu,
    /// Keys with a TTL, at random.
    VolatileRandom,
    /// Keys with a TTL, nearest deadline first.
    VolatileTtl,
}

/// Every policy with its name, in Redis's `maxmemory_policy_enum` order.
const POLICIES: [(Policy, &str); 8] = [
    (Policy::VolatileLru, "volatile-lru"),
    (Policy::VolatileLfu, "volatile-lfu"),
    (Policy::VolatileRandom, "volatile-random"),
    (Policy::VolatileTtl, "volatile-ttl"),
    (Policy::AllKeysLru, "allkeys-lru"),
    (Policy::AllKeysLfu, "allkeys-lfu"),
    (Policy::AllKeysRandom, "allkeys-random"),
    (Policy::NoEviction, "noeviction"),
];

impl Policy {
    /// The config name (`allkeys-lru`).
    pub fn name(self) -> &'static str {
        POLICIES
            .iter()
            .find(|(p, _)| *p == self)
            .map_or("noeviction", |(_, n)| n)
    }

    /// Parses a config value, ASCII case-insensitively.
    ///
    /// # Errors
    /// Redis's enum error text.
    pub fn parse(v: &str) -> Result<Policy, String> {
        POLICIES
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(v))
            .map(|(p, _)| *p)
            .ok_or_else(|| {
                let names: Vec<&str> = POLICIES.iter().map(|(_, n)| *n).collect();
                format!(
                    "argument(s) must be one of the following: {}",
                    names.join(", ")
                )
            })
    }

    fn is_lru(self) -> bool {
        matches!(self, Policy::AllKeysLru | Policy::VolatileLru)
    }

    /// Whether the policy reads LFU counters (OBJECT FREQ answers only then).
    pub fn is_lfu(self) -> bool {
        matches!(self, Policy::AllKeysLfu | Policy::VolatileLfu)
    }

    fn volatile_only(self) -> bool {
        matches!(
            self,
            Policy::VolatileLru
                | Policy::VolatileLfu
                | Policy::VolatileRandom
                | Policy::VolatileTtl
        )
    }
}

/// The `maxmemory*` and `lfu-*` options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxMemory {
    /// `maxmemory` (bytes; 0 = no limit). Default 0.
    pub bytes: u64,
    /// `maxmemory-policy`. Default `noeviction`.
    pub policy: Policy,
    /// `maxmemory-samples` (1-64). Default 5.
    pub samples: u32,
    /// `lfu-log-factor`. Default 10.
    pub lfu_log_factor: u32,
    /// `lfu-decay-time` (minutes). Default 1.
    pub lfu_decay_time: u32,
}

impl Default for MaxMemory {
    fn default() -> Self {
        MaxMemory {
            bytes: 0,
            policy: Policy::NoEviction,
            samples: 5,
            lfu_log_factor: 10,
            lfu_decay_time: 1,
        }
    }
}

/// Redis's `EVPOOL_SIZE`.
const POOL_SIZE: usize = 16;
/// Redis's `LRU_CLOCK_MAX` (24 bits) and `LRU_CLOCK_RESOLUTION` (ms).
const LRU_CLOCK_MAX: u32 = (1 << 24) - 1;
const LRU_CLOCK_RESOLUTION: u64 = 1000;
/// Redis's `LFU_INIT_VAL`.
const LFU_INIT_VAL: u32 = 5;

/// A pooled candidate: higher `score` is evicted first.
#[derive(Debug, Clone)]
struct Candidate {
    score: u64,
    db: usize,
    key: bytes::Bytes,
}

/// The eviction state (under the state lock).
#[derive(Debug, Default)]
pub struct Eviction {
    settings: MaxMemory,
    pool: Vec<Candidate>,
    /// The database a random policy takes its next key from.
    next_db: usize,
    /// INFO `evicted_keys`.
    pub evicted_keys: u64,
}

impl Eviction {
    /// The options in force.
    pub fn settings(&self) -> MaxMemory {
        self.settings
    }

    /// Applies new options; the store keeps access words exactly while an LRU or LFU policy
    /// is set (switching between the two starts every key afresh, as Redis's docs warn).
    pub fn configure(&mut self, next: MaxMemory, kv: &mut KvStore<Value>, now: u64) {
        let was = self.settings.policy;
        self.settings = next;
        let kind = |p: Policy| (p.is_lru(), p.is_lfu());
        let want = self.init_word(now).is_some();
        if kind(was) != kind(next.policy) || kv.tracks_access() != want {
            kv.set_access_tracking(self.init_word(now));
            self.pool.clear();
        }
    }

    /// A data set put in place of the old one (`State::install_kv`): it keeps access words
    /// exactly when the policy wants them.
    pub fn adopt(&self, kv: &mut KvStore<Value>, now: u64) {
        kv.set_access_tracking(self.init_word(now));
    }

    /// The access word a new key gets at `now` (ms), `None` without an LRU/LFU policy.
    fn init_word(&self, now: u64) -> Option<u32> {
        let p = self.settings.policy;
        if p.is_lru() {
            Some(lru_clock(now))
        } else if p.is_lfu() {
            Some((lfu_minutes(now) << 8) | LFU_INIT_VAL)
        } else {
            None
        }
    }

    /// Once per cron tick: new keys start at the current clock.
    pub fn tick(&self, kv: &mut KvStore<Value>, now: u64) {
        if let Some(w) = self.init_word(now) {
            kv.set_access_init(w);
        }
    }

    /// OBJECT IDLETIME's seconds for an access word (LRU policies; Redis
    /// `estimateObjectIdleTime`).
    pub fn idle_secs(&self, word: u32, now: u64) -> u64 {
        idle_ms(word, now) / 1000
    }

    /// OBJECT FREQ's counter for an access word (LFU policies; `LFUDecrAndReturn`).
    pub fn freq(&self, word: u32, now: u64) -> u32 {
        self.lfu_decayed(word, now)
    }

    fn lfu_decayed(&self, word: u32, now: u64) -> u32 {
        let ldt = word >> 8;
        let counter = word & 0xff;
        // `lfu-decay-time 0`: the counter never decays.
        let periods = lfu_elapsed(ldt, now)
            .checked_div(self.settings.lfu_decay_time)
            .unwrap_or(0);
        counter.saturating_sub(periods)
    }

    /// RESTORE's `IDLETIME seconds` / `FREQ counter` on the key it stored (Valkey
    /// `objectSetLRUOrLFU`): under an LFU policy the counter `freq` (with the current
    /// decrement time), under an LRU policy an access time `idle_secs` ago (the clock
    /// wrapping as Valkey's). Nothing under the other policies (the store keeps no access
    /// words then), nor for an option not given.
    pub fn restore_access(
        &self,
        kv: &mut KvStore<Value>,
        db: usize,
        key: &[u8],
        (idle_secs, freq): (Option<i64>, Option<u8>),
        now: u64,
    ) {
        let policy = self.settings.policy;
        let word = if policy.is_lfu() {
            freq.map(|f| (lfu_minutes(now) << 8) | u32::from(f))
        } else if policy.is_lru() {
            idle_secs.map(|idle| {
                let ticks = (idle.max(0) as u64).saturating_mul(1000) / LRU_CLOCK_RESOLUTION
                    % u64::from(LRU_CLOCK_MAX);
                let clock = u64::from(lru_clock(now));
                (if clock >= ticks {
                    clock - ticks
                } else {
                    clock + u64::from(LRU_CLOCK_MAX) - ticks
                }) as u32
            })
        } else {
            None
        };
        if let Some(word) = word {
            let _ = kv.touch_in_slot(db, ferrocluster_slot::SlotKey::new(key), now, |_| word);
        }
    }

    /// Touches the keys a command named (Redis `lookupKey`'s `updateLFU` / LRU clock).
    pub fn touch(
        &self,
        kv: &mut KvStore<Value>,
        rng: &mut impl RngCore,
        db: usize,
        keys: &[&[u8]],
        now: u64,
    ) {
        let policy = self.settings.policy;
        if !policy.is_lru() && !policy.is_lfu() {
            return;
        }
        for key in keys {
            // A uniform draw in [0, 1) from 53 random bits.
            let r = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            let key = ferrocluster_slot::SlotKey::new(key);
            let _ = kv.touch_in_slot(db, key, now, |w| {
                if policy.is_lru() {
                    lru_clock(now)
                } else {
                    let counter =
                        lfu_log_incr(self.lfu_decayed(w, now), self.settings.lfu_log_factor, r);
                    (lfu_minutes(now) << 8) | counter
                }
            });
        }
    }

    /// Evicts until the data set fits `maxmemory` (Redis `performEvictions`). `Ok` when it
    /// fits (or there is no limit); `Err` when it is still over and nothing more can go.
    pub fn perform(state: &mut State, now: u64) -> Result<(), ()> {
        let limit = state.evict.settings.bytes;
        // Nothing is evicted while writes are paused (Valkey `isSafeToPerformEvictions`).
        if limit == 0 || state.repl.is_replica() || state.expiry_paused(now) {
            return Ok(());
        }
        let mut evicted = Vec::new();
        let result = loop {
            if state.kv.memory_bytes() <= limit {
                break Ok(());
            }
            match state.evict.pick(&state.kv, now, &mut state.rng) {
                Some((db, key)) => {
                    if let Ok(Some(_)) = state.kv.remove(db, &key, now) {
                        state.evict.evicted_keys += 1;
                        crate::cmd::txn::touch(state, db, &key);
                        // Valkey `performEvictions`: the deletion, then `evicted`.
                        crate::notify::keyspace_event(
                            state,
                            db,
                            crate::notify::EVICTED,
                            "evicted",
                            &key,
                        );
                        evicted.push((db, key));
                    }
                }
                None => break Err(()),
            }
        };
        for (db, key) in &evicted {
            crate::repl::propagate_dels(state, *db, &[key]);
        }
        result
    }

    /// The next key to evict, `None` when the policy finds none.
    fn pick(
        &mut self,
        kv: &KvStore<Value>,
        now: u64,
        rng: &mut impl RngCore,
    ) -> Option<(usize, bytes::Bytes)> {
        let policy = self.settings.policy;
        let volatile = policy.volatile_only();
        let dbs = kv.databases();
        match policy {
            Policy::NoEviction => None,
            Policy::AllKeysRandom | Policy::VolatileRandom => {
                let mut got = Vec::with_capacity(1);
                for i in 0..dbs {
                    let db = (self.next_db + i) % dbs;
                    let _ = kv.sample_keys(db, volatile, 1, now, rng, &mut got);
                    if let Some(s) = got.pop() {
                        self.next_db = db + 1;
                        return Some((db, s.key));
                    }
                }
                None
            }
            _ => {
                let mut sampled = Vec::new();
                for db in 0..dbs {
                    sampled.clear();
                    let n = self.settings.samples as usize;
                    let _ = kv.sample_keys(db, volatile, n, now, rng, &mut sampled);
                    for s in &sampled {
                        let score = self.score(s, now);
                        self.offer(Candidate {
                            score,
                            db,
                            key: s.key.clone(),
                        });
                    }
                }
                // Best first; a pooled key that is gone (or lost its TTL) is skipped.
                while let Some(c) = self.pool.pop() {
                    let live = match kv.expiry(c.db, &c.key, now) {
                        Ok(ferrocluster_kvstore::KeyExpiry::At(_)) => true,
                        Ok(ferrocluster_kvstore::KeyExpiry::Persistent) => !volatile,
                        _ => false,
                    };
                    if live {
                        return Some((c.db, c.key));
                    }
                }
                None
            }
        }
    }

    /// How good a victim a sampled key is (Redis's `idle` in `evictionPoolPopulate`).
    fn score(&self, s: &Sampled, now: u64) -> u64 {
        match self.settings.policy {
            Policy::VolatileTtl => u64::MAX - s.deadline.unwrap_or(u64::MAX),
            p if p.is_lfu() => 255 - u64::from(s.access.map_or(0, |w| self.lfu_decayed(w, now))),
            _ => s.access.map_or(0, |w| idle_ms(w, now)),
        }
    }

    /// Puts a candidate into the pool (sorted by score, ascending; the worst dropped when
    /// full; a key already pooled keeps one place).
    fn offer(&mut self, c: Candidate) {
        if let Some(i) = self
            .pool
            .iter()
            .position(|p| p.db == c.db && p.key == c.key)
        {
            self.pool.remove(i);
        }
        let at = self.pool.partition_point(|p| p.score < c.score);
        if self.pool.len() >= POOL_SIZE {
            if at == 0 {
                return;
            }
            self.pool.remove(0);
            self.pool.insert(at - 1, c);
        } else {
            self.pool.insert(at, c);
        }
    }
}

/// Redis's `LRU_CLOCK()`: seconds, 24 bits.
fn lru_clock(now: u64) -> u32 {
    ((now / LRU_CLOCK_RESOLUTION) as u32) & LRU_CLOCK_MAX
}

/// Redis's `estimateObjectIdleTime` (ms).
fn idle_ms(word: u32, now: u64) -> u64 {
    let clock = lru_clock(now);
    let ticks = if clock >= word {
        clock - word
    } else {
        clock + (LRU_CLOCK_MAX - word)
    };
    u64::from(ticks) * LRU_CLOCK_RESOLUTION
}

/// Redis's `LFUGetTimeInMinutes`: minutes, 16 bits.
fn lfu_minutes(now: u64) -> u32 {
    ((now / 60_000) & 0xffff) as u32
}

/// Redis's `LFUTimeElapsed` (minutes since `ldt`, with wrap-around).
fn lfu_elapsed(ldt: u32, now: u64) -> u32 {
    let m = lfu_minutes(now);
    if m >= ldt {
        m - ldt
    } else {
        65535 - ldt + m
    }
}

/// Redis's `LFULogIncr`: the counter grows with probability `1 / ((counter - 5) * factor + 1)`;
/// `r` is a uniform draw in [0, 1).
fn lfu_log_incr(counter: u32, factor: u32, r: f64) -> u32 {
    if counter >= 255 {
        return 255;
    }
    let base = f64::from(counter.saturating_sub(LFU_INIT_VAL));
    let p = 1.0 / (base * f64::from(factor) + 1.0);
    if r < p {
        counter + 1
    } else {
        counter
    }
}

/// The commands Redis looks their keys up for without touching them (`LOOKUP_NOTOUCH`), and
/// RESTORE, whose key's access word is its `IDLETIME` / `FREQ` or a new key's.
pub fn touches_keys(name: &str) -> bool {
    !matches!(
        name,
        "restore"
            | "restore-asking"
            | "object|encoding"
            | "object|freq"
            | "object|idletime"
            | "object|refcount"
            | "type"
            | "exists"
            | "ttl"
            | "pttl"
            | "expiretime"
            | "pexpiretime"
            | "dump"
            | "memory|usage"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_idle_time_wraps_like_redis() {
        let now = 5_000_000;
        assert_eq!(idle_ms(lru_clock(now), now), 0);
        assert_eq!(idle_ms(lru_clock(now - 30_000), now), 30_000);
        // A word from just before the 24-bit clock wrapped: the clock reads 9 there, and
        // Redis's formula (`lruclock + (LRU_CLOCK_MAX - o->lru)`) gives 9 + 5 ticks.
        let wrapped = u64::from(LRU_CLOCK_MAX) * 1000 + 10_000;
        assert_eq!(lru_clock(wrapped), 9);
        assert_eq!(idle_ms(LRU_CLOCK_MAX - 5, wrapped), 14_000);
    }

    #[test]
    fn lfu_counter_grows_logarithmically_and_decays_per_minute() {
        assert_eq!(lfu_log_incr(5, 10, 0.99), 6);
        assert_eq!(lfu_log_incr(15, 10, 0.5), 15, "p = 1/101");
        assert_eq!(lfu_log_incr(15, 10, 0.001), 16);
        assert_eq!(lfu_log_incr(255, 10, 0.0), 255);
        let e = Eviction::default();
        let now = 600_000; // minute 10
        let word = (lfu_minutes(now - 180_000) << 8) | 20;
        assert_eq!(e.freq(word, now), 17, "three minutes of decay");
    }

    #[test]
    fn the_pool_keeps_the_best_sixteen() {
        let mut e = Eviction::default();
        for i in 0..40u64 {
            let key = bytes::Bytes::from(format!("k{i}"));
            e.offer(Candidate {
                score: (i * 7) % 40,
                db: 0,
                key,
            });
        }
        assert_eq!(e.pool.len(), POOL_SIZE);
        let scores: Vec<u64> = e.pool.iter().map(|c| c.score).collect();
        assert_eq!(scores, (24..40).collect::<Vec<_>>());
    }

    #[test]
    fn policy_names_round_trip() {
        for (p, n) in POLICIES {
            assert_eq!(Policy::parse(&n.to_uppercase()), Ok(p));
            assert_eq!(p.name(), n);
        }
        assert!(Policy::parse("lru")
            .unwrap_err()
            .starts_with("argument(s) must be one of"));
    }
}

//! Freeing memory off the state lock (Valkey's lazyfree, `src/lazyfree.c`), and the deletion
//! of the keys of slots another node now owns with their `DEL`s fed to the replication
//! stream and the AOF a batch at a time.
//!
//! When myself loses slots (`Event::DeleteSlotKeys` after a slot migration's handoff, a failed
//! import's `DropSlotKeys`), Valkey deletes each key and propagates one `DEL` per key
//! (`clusterDelKeysInSlot`, Valkey `src/cluster.c`), all in one event-loop step. Here
//! [`delete_slot_keys`] detaches the slots' keys from the keyspace at once
//! (`KvStore::take_slot`, O(databases) a slot), so reads and writes see them gone and the
//! node can resume writes; the `DEL`s follow from the `slot-dels` thread, [`BATCH_KEYS`] keys
//! per hold of the state lock, and the keys' memory is freed after each hold.
//!
//! Order (what replicas and the AOF see): a replica applies the stream in order and still
//! holds a detached key until its `DEL` arrives, so a later write to that slot (the slot came
//! back and a key was written again, an import's snapshot) must follow every pending `DEL` of
//! the slot, or the replica would apply the write to the old value (an `RPUSH` onto the old
//! list) and then a `DEL` of the new key. [`before_write`] keeps that: it runs before every
//! write effect enters the stream (`crate::repl`'s `emit`) and first feeds the slot's pending
//! `DEL`s, under the same lock hold. `FLUSHALL` drops the pending `DEL`s (it deletes those
//! keys on the replicas itself); `FLUSHDB`, `SWAPDB` and `DEBUG` feed them all first; a
//! replica's full sync drops them (its keyspace and AOF are replaced).
//!
//! INFO memory `lazyfree_pending_objects` counts the keys detached and not yet freed (and the
//! keys of a replaced data set still being freed), `lazyfreed_objects` those freed so far
//! (Valkey's fields and meanings: objects waiting for the lazyfree thread, objects it freed).

use crate::server::{unix_ms, Shared, State, Value};
use ferrocluster_kvstore::{DetachedSlot, PoppedKeys};
use ferrocluster_slot::{Slot, SlotSet};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Keys whose `DEL`s the `slot-dels` thread feeds per hold of the state lock.
pub const BATCH_KEYS: usize = 4096;

/// The lazyfree counters (INFO memory), shared with the threads that free.
#[derive(Debug, Default)]
pub struct FreedKeys {
    pending: AtomicU64,
    freed: AtomicU64,
}

impl FreedKeys {
    /// `n` objects now wait to be freed.
    fn add(&self, n: u64) {
        self.pending.fetch_add(n, Ordering::Relaxed);
    }

    /// `n` waiting objects were freed.
    fn done(&self, n: u64) {
        // Never below 0, whatever the order of the threads' updates.
        let _ = self
            .pending
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |p| {
                Some(p.saturating_sub(n))
            });
        self.freed.fetch_add(n, Ordering::Relaxed);
    }

    /// INFO memory `lazyfree_pending_objects`: objects waiting to be freed.
    pub fn pending(&self) -> u64 {
        self.pending.load(Ordering::Relaxed)
    }

    /// INFO memory `lazyfreed_objects`: objects freed off the state lock since start.
    pub fn freed(&self) -> u64 {
        self.freed.load(Ordering::Relaxed)
    }
}

/// The detached slots whose `DEL`s are not all fed yet, inside [`State`].
#[derive(Default)]
pub struct SlotDels {
    /// Oldest first: (slot, what is left of its keys).
    queue: VecDeque<(Slot, DetachedSlot<Value>)>,
    /// Slots with an entry in `queue`.
    slots: SlotSet,
    /// A `slot-dels` thread is at work on `queue`.
    running: bool,
    /// The counters INFO reports.
    counters: Arc<FreedKeys>,
}

impl SlotDels {
    /// The lazyfree counters.
    pub fn counters(&self) -> &FreedKeys {
        &self.counters
    }

    /// Frees `value` on a thread of its own (Valkey's lazyfree of a big object), counting
    /// `objects` as pending until it is gone.
    pub fn free_later<T: Send + 'static>(&self, value: T, objects: u64) {
        self.counters.add(objects);
        spawn_free(&self.counters, value, objects);
    }

    /// Up to `n` keys of the oldest slot in the queue (the slot leaves the queue when empty).
    fn pop(&mut self, n: usize) -> Option<PoppedKeys<Value>> {
        let (slot, detached) = self.queue.front_mut()?;
        let slot = *slot;
        let keys = detached.pop_keys(n);
        if detached.is_empty() {
            self.queue.pop_front();
            if !self.queue.iter().any(|(s, _)| *s == slot) {
                self.slots.remove(slot);
            }
        }
        Some(keys)
    }
}

/// Frees `value`, whose `objects` are counted pending already, on a thread of its own (here,
/// if no thread can start), then counts them freed.
fn spawn_free<T: Send + 'static>(counters: &Arc<FreedKeys>, value: T, objects: u64) {
    let c = Arc::clone(counters);
    // A failed spawn drops the closure, and `value` with it, here.
    let spawned = std::thread::Builder::new()
        .name("lazyfree".into())
        .spawn(move || {
            drop(value);
            c.done(objects);
        });
    if spawned.is_err() {
        counters.done(objects);
    }
}

/// Deletes every key of `slots` (all databases), the `DEL`s to follow on the replication
/// stream and the AOF (see the module docs): myself lost these slots to another node
/// (`Event::DeleteSlotKeys`, Valkey's dirty slots; a failed import's staged keys). Returns
/// how many keys went. O(slots × databases) under the lock, whatever the slots hold.
pub fn delete_slot_keys(shared: &Shared, state: &mut State, slots: &SlotSet) -> u64 {
    let mut deleted = 0;
    // A replica without an AOF has no one to tell: it only frees the keys.
    let dels_wanted = !state.repl.is_replica() || state.repl.aof_on();
    for slot in slots.iter() {
        if state.kv.count_keys_in_slot_all_dbs(slot) == 0 {
            continue;
        }
        let taken = state.kv.take_slot(slot);
        deleted += taken.len();
        let dels = &mut state.slot_dels;
        if !dels_wanted {
            let n = taken.len();
            dels.free_later(taken, n);
            continue;
        }
        dels.counters.add(taken.len());
        dels.queue.push_back((slot, taken));
        dels.slots.insert(slot);
    }
    if !state.slot_dels.queue.is_empty() && !state.slot_dels.running {
        start_feeder(shared, state);
    }
    deleted
}

/// Starts the `slot-dels` thread; if it cannot start, the `DEL`s are fed here and now.
fn start_feeder(shared: &Shared, state: &mut State) {
    let spawned = shared.arc().and_then(|shared| {
        std::thread::Builder::new()
            .name("slot-dels".into())
            .spawn(move || feeder(shared))
            .ok()
    });
    match spawned {
        Some(_) => state.slot_dels.running = true,
        None => {
            tracing::warn!("slot key deletion: no thread, deleting under the lock");
            while let Some(batch) = feed_batch(state, usize::MAX, None) {
                let n = batch.len() as u64;
                drop(batch);
                state.slot_dels.counters.done(n);
            }
        }
    }
}

/// The `slot-dels` thread: one batch of `DEL`s per lock hold until the queue is empty; the
/// batch's memory is freed after the lock is released.
fn feeder(shared: Arc<Shared>) {
    crate::migrate::lower_priority();
    let counters = Arc::clone(&shared.state.lock().slot_dels.counters);
    let (mut keys, started) = (0u64, std::time::Instant::now());
    loop {
        let mut st = shared.state.lock();
        let Some(batch) = feed_batch(&mut st, BATCH_KEYS, None) else {
            st.slot_dels.running = false;
            drop(st);
            if keys == 0 {
                return;
            }
            tracing::info!(
                keys,
                ms = started.elapsed().as_millis() as u64,
                "deleted keys of slots another node owns: DELs fed, memory freed"
            );
            return;
        };
        crate::repl::flush(&shared, &mut st);
        // Hand the lock to a waiting client thread rather than take it again at once.
        parking_lot::MutexGuard::unlock_fair(st);
        let n = batch.len() as u64;
        drop(batch);
        counters.done(n);
        keys += n;
    }
}

/// Pops up to `n` keys (of `slot` only, when given) and feeds their `DEL`s; `None` when
/// nothing (of that slot) is queued. The caller frees the batch and counts it done.
fn feed_batch(state: &mut State, n: usize, slot: Option<Slot>) -> Option<PoppedKeys<Value>> {
    let dels = &mut state.slot_dels;
    let batch = match slot {
        None => dels.pop(n)?,
        Some(slot) => {
            let at = dels.queue.iter().position(|(s, _)| *s == slot)?;
            let (_, detached) = dels.queue.get_mut(at)?;
            let keys = detached.pop_keys(n);
            if detached.is_empty() {
                dels.queue.remove(at);
                if !dels.queue.iter().any(|(s, _)| *s == slot) {
                    dels.slots.remove(slot);
                }
            }
            keys
        }
    };
    let now = unix_ms();
    for (db, k) in batch.keys() {
        crate::repl::feed_del(state, db, k, now);
    }
    Some(batch)
}

/// Before a write effect on `slot` enters the stream: the slot's pending `DEL`s go first
/// (module docs, "Order"), under this lock hold. Nothing to do in the common case (no slot
/// pending, one bit test).
pub fn before_write(state: &mut State, slot: Slot) {
    if !state.slot_dels.slots.contains(slot) {
        return;
    }
    let counters = Arc::clone(&state.slot_dels.counters);
    while let Some(batch) = feed_batch(state, usize::MAX, Some(slot)) {
        let n = batch.len() as u64;
        spawn_free(&counters, batch, n);
    }
}

/// Before `FLUSHDB`, `SWAPDB` or `DEBUG` enters the stream: every pending `DEL` goes first.
pub fn before_keyspace_command(state: &mut State) {
    let counters = Arc::clone(&state.slot_dels.counters);
    while let Some(batch) = feed_batch(state, usize::MAX, None) {
        let n = batch.len() as u64;
        spawn_free(&counters, batch, n);
    }
}

/// `FLUSHALL` ran, or a full sync replaced the keyspace: the pending `DEL`s are dropped
/// unsent (the replicas and the AOF lose those keys by the same event) and their keys freed
/// off the lock.
pub fn forget_pending(state: &mut State) {
    let dels = &mut state.slot_dels;
    if dels.queue.is_empty() {
        return;
    }
    let queue = std::mem::take(&mut dels.queue);
    dels.slots = SlotSet::default();
    // Counted as pending when detached.
    let n: u64 = queue.iter().map(|(_, d)| d.len()).sum();
    spawn_free(&dels.counters, queue, n);
}

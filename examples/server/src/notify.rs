//! Keyspace notifications (Valkey `notify.c`, <https://valkey.io/topics/notifications>):
//! with `notify-keyspace-events` set, a command that changes a key publishes
//! `__keyspace@<db>__:<key>` → `<event>` (class `K`) and `__keyevent@<db>__:<event>` →
//! `<key>` (class `E`) to the local subscribers, for the classes switched on.
//!
//! Commands call [`Notify::event`] where Valkey calls `notifyKeyspaceEvent`, with the same
//! class and event name, in the same order. The messages wait in [`Notify`]'s outbox until
//! [`publish`] publishes them (after the command, by `crate::commands::run`, and after the
//! cron's expiry and eviction steps), so a command needs no access to the subscribers; the
//! order of a node's notifications is the order of its events.
//!
//! In cluster mode a notification goes to the subscribers of the node where the key changed
//! only, as in Valkey (`pubsubPublishMessage(..., sharded = 0)` is not broadcast over the bus
//! for keyspace events).
//!
//! Off (the default, `""`) costs one branch per event.

use crate::client::Args;
use crate::server::{Shared, State};

/// `K`: `__keyspace@<db>__:<key>` messages (Valkey `NOTIFY_KEYSPACE`).
pub const KEYSPACE: u32 = 1 << 0;
/// `E`: `__keyevent@<db>__:<event>` messages (`NOTIFY_KEYEVENT`).
pub const KEYEVENT: u32 = 1 << 1;
/// `g`: generic commands (DEL, EXPIRE, RENAME, ...) (`NOTIFY_GENERIC`).
pub const GENERIC: u32 = 1 << 2;
/// `$`: string commands (`NOTIFY_STRING`).
pub const STRING: u32 = 1 << 3;
/// `l`: list commands (`NOTIFY_LIST`).
pub const LIST: u32 = 1 << 4;
/// `s`: set commands (`NOTIFY_SET`).
pub const SET: u32 = 1 << 5;
/// `h`: hash commands (`NOTIFY_HASH`).
pub const HASH: u32 = 1 << 6;
/// `z`: sorted set commands (`NOTIFY_ZSET`).
pub const ZSET: u32 = 1 << 7;
/// `x`: a key expired (`NOTIFY_EXPIRED`).
pub const EXPIRED: u32 = 1 << 8;
/// `e`: a key was evicted by `maxmemory` (`NOTIFY_EVICTED`).
pub const EVICTED: u32 = 1 << 9;
/// `t`: stream commands (`NOTIFY_STREAM`; accepted, no stream type here yet).
pub const STREAM: u32 = 1 << 10;
/// `m`: a read missed its key (`NOTIFY_KEY_MISS`; not in `A`).
pub const KEY_MISS: u32 = 1 << 11;
/// `d`: module events (`NOTIFY_MODULE`; accepted, no modules here).
pub const MODULE: u32 = 1 << 13;
/// `n`: a key was created (`NOTIFY_NEW`; not in `A`): the store logs the keys it creates
/// while this class is on (`KvStore::log_new`), announced before the next event.
pub const NEW: u32 = 1 << 14;
/// `A`: `g$lshzxetd` (`NOTIFY_ALL`).
pub const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// Parses a `notify-keyspace-events` value (Valkey `keyspaceEventsStringToFlags`): `None`
/// when a character names no class.
pub fn parse_flags(classes: &str) -> Option<u32> {
    let mut flags = 0;
    for c in classes.chars() {
        flags |= match c {
            'A' => ALL,
            'g' => GENERIC,
            '$' => STRING,
            'l' => LIST,
            's' => SET,
            'h' => HASH,
            'z' => ZSET,
            'x' => EXPIRED,
            'e' => EVICTED,
            'K' => KEYSPACE,
            'E' => KEYEVENT,
            't' => STREAM,
            'm' => KEY_MISS,
            'd' => MODULE,
            'n' => NEW,
            _ => return None,
        };
    }
    Some(flags)
}

/// The text of `flags` as CONFIG GET shows it (Valkey `keyspaceEventsFlagsToString`):
/// `A` for all of `A`'s classes, else the classes in `g$lshzxetdn` order, then `K`, `E`,
/// `m`.
pub fn flags_text(flags: u32) -> String {
    let mut s = String::new();
    if flags & ALL == ALL {
        s.push('A');
    } else {
        for (bit, c) in [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
            (NEW, 'n'),
        ] {
            if flags & bit != 0 {
                s.push(c);
            }
        }
    }
    for (bit, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if flags & bit != 0 {
            s.push(c);
        }
    }
    s
}

/// The notification settings and the messages not yet published (part of the server's
/// locked state).
#[derive(Debug, Default)]
pub struct Notify {
    /// `notify-keyspace-events` as flags (see the constants).
    flags: u32,
    /// (channel, payload) in event order, published by [`publish`].
    outbox: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Notify {
    /// Notifications with these flags (`notify-keyspace-events`).
    pub fn new(flags: u32) -> Notify {
        Notify {
            flags,
            outbox: Vec::new(),
        }
    }

    /// The flags in force.
    pub fn flags(&self) -> u32 {
        self.flags
    }

    /// Sets the flags (CONFIG SET); events already queued are still published. The store
    /// MUST log created keys exactly while `n` is on: use [`configure`].
    fn set_flags(&mut self, flags: u32) {
        self.flags = flags;
    }

    /// An event of `class` named `event` on `key` of database `db` (Valkey
    /// `notifyKeyspaceEvent(type, event, key, dbid)`): queued when the class is on.
    #[inline]
    pub fn event(&mut self, class: u32, event: &str, key: &[u8], db: usize) {
        if self.flags & class != 0 {
            self.queue(event, key, db);
        }
    }

    fn queue(&mut self, event: &str, key: &[u8], db: usize) {
        if self.flags & KEYSPACE != 0 {
            let mut chan = format!("__keyspace@{db}__:").into_bytes();
            chan.extend_from_slice(key);
            self.outbox.push((chan, event.as_bytes().to_vec()));
        }
        if self.flags & KEYEVENT != 0 {
            let chan = format!("__keyevent@{db}__:{event}").into_bytes();
            self.outbox.push((chan, key.to_vec()));
        }
    }

    /// Whether messages wait for [`publish`].
    #[inline]
    pub fn pending(&self) -> bool {
        !self.outbox.is_empty()
    }

    /// Takes the queued (channel, payload) pairs in order.
    pub fn take(&mut self) -> Vec<(Vec<u8>, Vec<u8>)> {
        std::mem::take(&mut self.outbox)
    }
}

/// Sets `notify-keyspace-events` (at start, CONFIG SET, and again for a data set installed
/// later): the flags, and the store's log of created keys while `n` is on.
pub fn configure(state: &mut State, flags: u32) {
    state.notify.set_flags(flags);
    state.kv.log_new(flags & NEW != 0);
}

/// An event of `class` named `event` on `key` of database `db` in `state` (Valkey
/// `notifyKeyspaceEvent`): keys found expired since the last event are announced first
/// (`expired`, with their DELs to the replicas: `crate::repl::propagate_expired`), as
/// Valkey's lookup announces them before the command's own events, then the keys created
/// (`new`, Valkey's `dbAdd`; a command that creates several keys announces them all before
/// its first own event). One branch when the class is off.
#[inline]
pub fn keyspace_event(state: &mut State, db: usize, class: u32, event: &str, key: &[u8]) {
    if state.notify.flags & class == 0 {
        return;
    }
    if state.kv.has_expired() {
        crate::repl::propagate_expired(state);
    }
    announce_new(state);
    state.notify.event(class, event, key, db);
}

/// The `new` events of the keys created since the last call.
fn announce_new(state: &mut State) {
    if state.kv.has_new() {
        for (db, key) in state.kv.take_new() {
            state.notify.event(NEW, "new", &key, db);
        }
    }
}

/// Before a command runs with `x` on, on a primary: deletes the command's keys that are
/// expired, so that a read announces `expired` as Valkey's lookup does (the store's reads
/// cannot delete). Nothing when `x` is off.
pub fn expire_keys_of(
    state: &mut State,
    spec: &crate::table::Spec,
    args: &Args<'_>,
    db: usize,
    now: u64,
) {
    if state.notify.flags & EXPIRED != 0 {
        delete_expired_keys(state, spec, args, db, now);
    }
}

/// On a primary, unless writes are paused: deletes the keys of the command that are expired
/// (into the store's log of expired keys, `crate::repl::propagate_expired` takes them).
pub fn delete_expired_keys(
    state: &mut State,
    spec: &crate::table::Spec,
    args: &Args<'_>,
    db: usize,
    now: u64,
) {
    if state.repl.is_replica() || state.expiry_paused(now) {
        return;
    }
    let argv: Vec<&[u8]> = (0..args.len()).map(|i| args.get(i)).collect();
    for p in spec.info.key_positions(&argv) {
        let _ = state.kv.expire_if_needed(db, argv[p], now);
    }
}

/// Publishes the queued notifications to the local subscribers (channels and patterns, as
/// PUBLISH without the cluster broadcast), after announcing the keys found expired since the
/// last event when `x` is on. Called with the state lock held, like PUBLISH: after every
/// command (`crate::commands::run`) and after the cron's expiry and eviction steps.
pub fn publish(shared: &Shared, state: &mut State) {
    if state.notify.flags & EXPIRED != 0 && state.kv.has_expired() {
        crate::repl::propagate_expired(state);
    }
    announce_new(state);
    if !state.notify.pending() {
        return;
    }
    for (chan, payload) in state.notify.take() {
        shared.publish_local(false, &chan, &payload);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Texts valkey-server 9.1.2 answers to CONFIG GET after CONFIG SET of the left value.
    #[test]
    fn flags_read_back_as_valkey_writes_them() {
        for (set, get) in [
            ("", ""),
            ("KEA", "AKE"),
            ("Ex", "xE"),
            ("Kgl", "glK"),
            ("AKEm", "AKEm"),
            ("KEn$", "$nKE"),
            ("g$lshzxetdKE", "AKE"),
        ] {
            assert_eq!(flags_text(parse_flags(set).unwrap()), get, "{set}");
        }
        assert_eq!(parse_flags("KEAq"), None);
    }

    #[test]
    fn events_queue_only_for_classes_on() {
        let mut n = Notify::new(parse_flags("Kl").unwrap());
        n.event(STRING, "set", b"k", 0);
        assert!(!n.pending());
        n.event(LIST, "lpush", b"k", 3);
        assert_eq!(
            n.take(),
            vec![(b"__keyspace@3__:k".to_vec(), b"lpush".to_vec())]
        );
        let mut n = Notify::new(parse_flags("Eg").unwrap());
        n.event(GENERIC, "del", b"a b", 0);
        assert_eq!(
            n.take(),
            vec![(b"__keyevent@0__:del".to_vec(), b"a b".to_vec())]
        );
    }
}

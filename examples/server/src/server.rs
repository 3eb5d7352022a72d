//! The shared state of one server process and its start-up.
//!
//! Locking: all keyspace and cluster state sits in one [`State`] behind a `parking_lot::Mutex`.
//! An I/O thread takes it once per batch of pipelined requests from one read, so a pipeline of
//! 16 commands costs one lock round-trip; the cluster thread takes it per bus event batch.
//! Keeping the node and the keyspace under one lock makes routing decisions and slot changes
//! atomic with respect to the data (no command runs against a slot the node just gave away).
//! Pub/sub subscriptions live in their own `RwLock` (publishers read, subscribers write).

use crate::client::Delivery;
use crate::config::Config;
use crate::net::{IoHandle, ToIo};
use ferrocluster_kvstore::KvStore;
use parking_lot::{Mutex, RwLock};
use rand_chacha::ChaCha8Rng;
use rand_core::SeedableRng;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// The value type the server stores: the type enum (strings up to 14 bytes inline in the
/// 16-byte value, collections boxed; see [`crate::value`]).
pub type Value = crate::value::Value;

/// Current Unix time in milliseconds: the host kit's one clock read
/// (`ferrocluster_host::clock::now`); engine crates get it as a parameter.
pub fn unix_ms() -> u64 {
    ferrocluster_host::clock::now().0
}

/// Everything the commands mutate, behind one lock.
pub struct State {
    /// The keyspace.
    pub kv: KvStore<Value>,
    /// RNG for RANDOMKEY (seeded from the clock at start: randomness here is not a test input).
    pub rng: ChaCha8Rng,
    /// Cluster side (node, links), when cluster mode is on.
    pub cluster: Option<crate::cluster::ClusterSide>,
    /// Replication bookkeeping (both roles).
    pub repl: crate::repl::ReplState,
    /// Commands executed (INFO stats).
    pub commands_processed: u64,
    /// Keys removed by expiry (INFO stats `expired_keys`).
    pub expired_keys: u64,
    /// Keyspace hits/misses (INFO stats).
    pub keyspace_hits: u64,
    /// Client writes are paused until this time (unix ms): myself is a primary serving a
    /// manual failover (`Event::PauseWrites`).
    pub writes_paused_until: Option<u64>,
    /// Keyspace misses.
    pub keyspace_misses: u64,
    /// Slot migration: export links, import links, MIGRATE's connection cache.
    pub migr: crate::migrate::MigrState,
    /// WATCHed keys (`crate::cmd::txn`).
    pub watches: crate::cmd::txn::Watches,
    /// Clients blocked on keys (`crate::blocking`).
    pub blocked: crate::blocking::Blocked,
    /// `CLIENT PAUSE` in force (its end may have passed).
    pub client_pause: Option<crate::clients::ClientPause>,
    /// SLOWLOG entries and per-command statistics (`crate::slowlog`).
    pub slowlog: crate::slowlog::SlowLog,
    /// Client-side caching (`crate::tracking`).
    pub tracking: crate::tracking::Tracking,
    /// RDB persistence (`crate::persist`).
    pub persist: crate::persist::Persistence,
    /// The latency monitor (`crate::latency`).
    pub latency: crate::latency::Latency,
    /// INFO's instantaneous figures (`crate::rates`).
    pub rates: crate::rates::Rates,
    /// `maxmemory` and eviction (`crate::evict`).
    pub evict: crate::evict::Eviction,
    /// ACL users, ACL LOG and the denial counters (`crate::acl`).
    pub acl: crate::acl::AclState,
    /// Keyspace notifications: the classes on and the messages to publish (`crate::notify`).
    pub notify: crate::notify::Notify,
    /// Keys of slots another node owns whose DELs are still to be fed, and the lazyfree
    /// counters (`crate::lazyfree`).
    pub slot_dels: crate::lazyfree::SlotDels,
}

/// Lock-free counters.
#[derive(Default)]
pub struct Stats {
    connected: AtomicU64,
    total_connections: AtomicU64,
    net_in: AtomicU64,
    net_out: AtomicU64,
}

impl State {
    /// Puts a data set loaded from a file or a full sync in place of the current one, with the
    /// store's host settings carried over (the expired-key log of
    /// `crate::repl::propagate_expired`, the access words of an LRU/LFU `maxmemory-policy`).
    /// Returns the old data set, for the caller to free where it likes.
    pub fn install_kv(&mut self, mut kv: KvStore<Value>, now: u64) -> KvStore<Value> {
        kv.log_expired(true);
        kv.log_new(self.notify.flags() & crate::notify::NEW != 0);
        let old = std::mem::replace(&mut self.kv, kv);
        self.evict.adopt(&mut self.kv, now);
        old
    }

    /// Whether client writes are paused at `now`.
    pub fn writes_paused(&self, now: u64) -> bool {
        self.writes_paused_until.is_some_and(|t| now < t)
    }

    /// Whether keys must not expire now: writes are paused by a manual failover or by CLIENT
    /// PAUSE (WRITE or ALL), which pause expiry and eviction too (Valkey
    /// `PAUSE_ACTIONS_CLIENT_WRITE_SET`: the data set does not change under a pause).
    pub fn expiry_paused(&self, now: u64) -> bool {
        self.writes_paused(now) || self.client_pause.is_some_and(|p| p.holds(now, true))
    }
}

impl Stats {
    /// A client connected.
    pub fn client_connected(&self) {
        self.connected.fetch_add(1, Ordering::Relaxed);
        self.total_connections.fetch_add(1, Ordering::Relaxed);
    }
    /// A client disconnected.
    pub fn client_disconnected(&self) {
        self.connected.fetch_sub(1, Ordering::Relaxed);
    }
    /// Bytes read from clients.
    pub fn net_input_bytes(&self, n: usize) {
        self.net_in.fetch_add(n as u64, Ordering::Relaxed);
    }
    /// Bytes written to clients.
    pub fn net_output_bytes(&self, n: usize) {
        self.net_out.fetch_add(n as u64, Ordering::Relaxed);
    }
    /// CONFIG RESETSTAT: the totals start again from zero (the connected count stays).
    pub fn reset(&self) {
        self.total_connections.store(0, Ordering::Relaxed);
        self.net_in.store(0, Ordering::Relaxed);
        self.net_out.store(0, Ordering::Relaxed);
    }
    /// (connected clients, total connections received, net in bytes, net out bytes)
    pub fn snapshot(&self) -> (u64, u64, u64, u64) {
        (
            self.connected.load(Ordering::Relaxed),
            self.total_connections.load(Ordering::Relaxed),
            self.net_in.load(Ordering::Relaxed),
            self.net_out.load(Ordering::Relaxed),
        )
    }
}

/// Where a subscriber lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subscriber {
    /// Client id.
    pub client_id: u64,
    /// I/O thread.
    pub io_thread: usize,
    /// Connection slot.
    pub token: usize,
}

/// Channel -> subscribers, for SUBSCRIBE and SSUBSCRIBE; pattern -> subscribers, for
/// PSUBSCRIBE.
#[derive(Default)]
pub struct PubSub {
    channels: HashMap<Vec<u8>, Vec<Subscriber>>,
    shard_channels: HashMap<Vec<u8>, Vec<Subscriber>>,
    patterns: HashMap<Vec<u8>, Vec<Subscriber>>,
}

impl PubSub {
    fn map(&mut self, shard: bool) -> &mut HashMap<Vec<u8>, Vec<Subscriber>> {
        if shard {
            &mut self.shard_channels
        } else {
            &mut self.channels
        }
    }

    /// Adds a subscriber.
    pub fn subscribe(&mut self, shard: bool, channel: &[u8], sub: Subscriber) {
        add_subscriber(self.map(shard), channel, sub);
    }

    /// Removes a subscriber.
    pub fn unsubscribe(&mut self, shard: bool, channel: &[u8], client_id: u64) {
        remove_subscriber(self.map(shard), channel, client_id);
    }

    /// Adds a pattern subscriber (PSUBSCRIBE).
    pub fn psubscribe(&mut self, pattern: &[u8], sub: Subscriber) {
        add_subscriber(&mut self.patterns, pattern, sub);
    }

    /// Removes a pattern subscriber.
    pub fn punsubscribe(&mut self, pattern: &[u8], client_id: u64) {
        remove_subscriber(&mut self.patterns, pattern, client_id);
    }

    /// Number of distinct patterns subscribed to (PUBSUB NUMPAT, INFO `pubsub_patterns`).
    pub fn pattern_count(&self) -> usize {
        self.patterns.len()
    }

    /// Subscribers of a channel.
    pub fn subscribers(&self, shard: bool, channel: &[u8]) -> &[Subscriber] {
        let map = if shard {
            &self.shard_channels
        } else {
            &self.channels
        };
        map.get(channel).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The channels (or shard channels) with at least one subscriber, in no order.
    pub fn channels(&self, shard: bool) -> impl Iterator<Item = &[u8]> {
        let map = if shard {
            &self.shard_channels
        } else {
            &self.channels
        };
        map.keys().map(Vec::as_slice)
    }

    /// Number of clients with at least one subscription of any kind (INFO `pubsub_clients`).
    pub fn client_count(&self) -> usize {
        let mut ids = std::collections::HashSet::new();
        for map in [&self.channels, &self.shard_channels, &self.patterns] {
            for subs in map.values() {
                ids.extend(subs.iter().map(|s| s.client_id));
            }
        }
        ids.len()
    }

    /// Number of channels with subscribers (INFO `pubsub_channels`).
    pub fn channel_count(&self) -> usize {
        self.channels.len()
    }
}

fn add_subscriber(map: &mut HashMap<Vec<u8>, Vec<Subscriber>>, name: &[u8], sub: Subscriber) {
    let list = map.entry(name.to_vec()).or_default();
    if !list.iter().any(|s| s.client_id == sub.client_id) {
        list.push(sub);
    }
}

fn remove_subscriber(map: &mut HashMap<Vec<u8>, Vec<Subscriber>>, name: &[u8], client_id: u64) {
    if let Some(list) = map.get_mut(name) {
        list.retain(|s| s.client_id != client_id);
        if list.is_empty() {
            map.remove(name);
        }
    }
}

/// The process-wide shared state.
pub struct Shared {
    /// Configuration.
    pub config: Config,
    /// Keyspace and cluster state.
    pub state: Mutex<State>,
    /// Subscriptions.
    pub pubsub: RwLock<PubSub>,
    /// Counters.
    pub stats: Stats,
    /// Where each client connection lives: id -> (I/O thread, token).
    pub directory: Mutex<std::collections::HashMap<u64, (usize, usize)>>,
    /// `timeout` in force, seconds (CONFIG SET changes it).
    pub idle_timeout_s: AtomicU64,
    /// `protected-mode` in force (CONFIG SET changes it; `crate::net` reads it on accept).
    pub protected_mode: std::sync::atomic::AtomicBool,
    /// `client-output-buffer-limit` in force (CONFIG SET changes it; `crate::net` reads it on
    /// each delivery and after each command, for the normal and pubsub classes).
    pub output_limits: RwLock<crate::config::OutputLimits>,
    /// Unsent output bytes of replica links that changed since the replication tick last
    /// took them: client id -> bytes (`crate::net` writes them after each write to a replica
    /// link; `crate::repl::tick` reports them to the engine every 10 ms for
    /// `client-output-buffer-limit replica`).
    pub replica_unsent: Mutex<HashMap<u64, u64>>,
    /// `stop-writes-on-bgsave-error` in force (CONFIG SET changes it).
    pub stop_writes_on_bgsave_error: std::sync::atomic::AtomicBool,
    /// This `Shared` itself, for work a command hands to a thread (BGSAVE); set once at start.
    pub me: OnceLock<std::sync::Weak<Shared>>,
    /// MONITOR connections (`crate::monitor`).
    pub monitors: crate::monitor::Monitors,
    /// Handles of the I/O threads (set once at start).
    pub io: OnceLock<Vec<IoHandle>>,
    /// Admission of client connections (`maxclients`).
    pub clients: crate::net::ClientGate,
    /// Start time (unix ms).
    pub start_ms: u64,
    /// Random 40-hex run id (INFO `run_id`).
    pub run_id: String,
    /// The append-only file (`crate::aof`).
    pub aof: Arc<crate::aof::Aof>,
    /// The default user is on and `nopass`: new connections start authenticated
    /// (`crate::acl::refresh_default` keeps it current).
    pub acl_default_open: std::sync::atomic::AtomicBool,
    /// The TLS configurations in force (`None`: no TLS port or link is configured);
    /// CONFIG SET tls-* swaps them for new connections.
    pub tls: Option<ferrocluster_host::tls::TlsReloader>,
    /// The `tls-*` directives in force (CONFIG SET changes them; CONFIG GET shows them).
    pub tls_settings: RwLock<ferrocluster_host::tls::TlsSettings>,
    /// `tls-replication` in force (CONFIG SET changes it; read when a replica link is made).
    pub tls_replication: std::sync::atomic::AtomicBool,
    next_client_id: AtomicU64,
}

impl Shared {
    /// Builds the shared state (no threads yet).
    ///
    /// # Errors
    /// When the keyspace cannot be built (bad database count).
    pub fn new(
        config: Config,
        cluster: Option<crate::cluster::ClusterSide>,
    ) -> Result<Shared, String> {
        let databases = if config.cluster_enabled {
            config.cluster_databases as usize
        } else {
            16
        };
        let mut kv = KvStore::new(databases).map_err(|e| e.to_string())?;
        let acl = crate::acl::AclState::from_config(&config)?;
        let acl_default_open = acl.default_open();
        let repl_cfg = config.replication(databases as u32);
        let now = unix_ms();
        let mut seed_rng = ChaCha8Rng::seed_from_u64(now ^ (u64::from(std::process::id()) << 32));
        let run_id = random_hex(&mut seed_rng);
        let clients = crate::net::ClientGate::new(config.maxclients);
        let idle_timeout_s = config.timeout_s;
        let (protected_mode, stop_writes) =
            (config.protected_mode, config.stop_writes_on_bgsave_error);
        let output_limits = config.output_limits;
        let aof = Arc::new(crate::aof::Aof::new(
            Arc::new(crate::fsio::OsDisk),
            &config.dir,
            &config.aof,
        ));
        let mut repl =
            crate::repl::ReplState::new(repl_cfg, rand_core::RngCore::next_u64(&mut seed_rng))?;
        repl.aof = Some(Arc::clone(&aof));
        repl.primary_options = (
            config.repl.primary_user.clone(),
            config.repl.primary_auth.clone(),
        );
        repl.min_replicas = (
            config.repl.min_replicas_to_write,
            config.repl.min_replicas_max_lag_s,
        );
        // A primary sends a DEL for every key that expires (crate::repl::propagate_expired);
        // `State::install_kv` keeps it so for a data set loaded later.
        kv.log_expired(true);
        crate::snapshot::KEY_SAVE_DELAY_US.store(
            config.rdb_key_save_delay_us,
            std::sync::atomic::Ordering::Relaxed,
        );
        // `notify-keyspace-events` with `n`: the store logs the keys it creates.
        kv.log_new(config.notify_keyspace_events & crate::notify::NEW != 0);
        let mut evict = crate::evict::Eviction::default();
        evict.configure(config.maxmemory, &mut kv, now);
        // Valkey `tlsConfigure` at start: a file that does not load stops the start.
        let tls = if config.tls_in_use() {
            let c = ferrocluster_host::tls::TlsConfigs::load(&config.tls)
                .map_err(|e| format!("Failed to configure TLS. Check logs for more info. ({e})"))?;
            Some(ferrocluster_host::tls::TlsReloader::new(c))
        } else {
            None
        };
        Ok(Shared {
            tls,
            tls_settings: RwLock::new(config.tls.clone()),
            tls_replication: std::sync::atomic::AtomicBool::new(config.tls_replication),
            state: Mutex::new(State {
                kv,
                evict,
                rng: ChaCha8Rng::seed_from_u64(now),
                cluster,
                repl,
                commands_processed: 0,
                expired_keys: 0,
                keyspace_hits: 0,
                keyspace_misses: 0,
                writes_paused_until: None,
                migr: crate::migrate::MigrState::new(databases),
                watches: crate::cmd::txn::Watches::default(),
                blocked: crate::blocking::Blocked::default(),
                client_pause: None,
                rates: crate::rates::Rates::default(),
                slot_dels: crate::lazyfree::SlotDels::default(),
                latency: crate::latency::Latency::new(config.latency_monitor_threshold),
                persist: crate::persist::Persistence::new(now, config.save.clone()),
                tracking: {
                    let mut t = crate::tracking::Tracking::default();
                    t.set_max_keys(config.tracking_table_max_keys);
                    t
                },
                slowlog: crate::slowlog::SlowLog::new(
                    config.slowlog_log_slower_than,
                    config.slowlog_max_len,
                ),
                acl,
                notify: crate::notify::Notify::new(config.notify_keyspace_events),
            }),
            acl_default_open: std::sync::atomic::AtomicBool::new(acl_default_open),
            config,
            pubsub: RwLock::new(PubSub::default()),
            stats: Stats::default(),
            monitors: crate::monitor::Monitors::default(),
            me: OnceLock::new(),
            directory: Mutex::new(std::collections::HashMap::new()),
            idle_timeout_s: AtomicU64::new(idle_timeout_s),
            protected_mode: std::sync::atomic::AtomicBool::new(protected_mode),
            stop_writes_on_bgsave_error: std::sync::atomic::AtomicBool::new(stop_writes),
            output_limits: RwLock::new(output_limits),
            replica_unsent: Mutex::new(HashMap::new()),
            io: OnceLock::new(),
            clients,
            start_ms: now,
            run_id,
            aof,
            next_client_id: AtomicU64::new(1),
        })
    }

    /// The I/O thread and token of client `id`, when it is connected.
    pub fn locate(&self, id: u64) -> Option<(usize, usize)> {
        self.directory.lock().get(&id).copied()
    }

    /// This `Shared` as an `Arc` (`None` before start-up set it).
    pub fn arc(&self) -> Option<Arc<Shared>> {
        self.me.get().and_then(std::sync::Weak::upgrade)
    }

    /// A new client id.
    pub fn next_client_id(&self) -> u64 {
        self.next_client_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Wakes every I/O thread (the end of a write pause: the writes it held run now).
    pub fn wake_io(&self) {
        for h in self.io.get().into_iter().flatten() {
            h.wake();
        }
    }

    /// Sends a delivery to a connection on any I/O thread.
    pub fn deliver(&self, io_thread: usize, token: usize, client_id: u64, what: Delivery) {
        if let Some(h) = self.io.get().and_then(|v| v.get(io_thread)) {
            h.send(ToIo::Deliver {
                token,
                client_id,
                what,
            });
        }
    }

    /// Publishes to local subscribers (a channel's, then, for PUBLISH, every matching
    /// pattern's as `pmessage`); returns how many received it (Redis 7.0
    /// `pubsubPublishMessage`: a client subscribed to the channel and to a matching pattern
    /// counts, and receives it, twice).
    pub fn publish_local(&self, shard: bool, channel: &[u8], payload: &[u8]) -> i64 {
        let ps = self.pubsub.read();
        let subs = ps.subscribers(shard, channel);
        let by_pattern = !shard && !ps.patterns.is_empty();
        if subs.is_empty() && !by_pattern {
            return 0;
        }
        let mut received = subs.len() as i64;
        let channel: Arc<[u8]> = channel.into();
        let payload: Arc<[u8]> = payload.into();
        let kind = if shard { "smessage" } else { "message" };
        for s in subs {
            self.deliver(
                s.io_thread,
                s.token,
                s.client_id,
                Delivery::Message {
                    kind,
                    channel: Arc::clone(&channel),
                    payload: Arc::clone(&payload),
                },
            );
        }
        if by_pattern {
            for (pattern, subs) in &ps.patterns {
                if !ferrocluster_kvstore::glob_match(pattern, &channel) {
                    continue;
                }
                let pattern: Arc<[u8]> = pattern.as_slice().into();
                for s in subs {
                    self.deliver(
                        s.io_thread,
                        s.token,
                        s.client_id,
                        Delivery::PatternMessage {
                            pattern: Arc::clone(&pattern),
                            channel: Arc::clone(&channel),
                            payload: Arc::clone(&payload),
                        },
                    );
                }
                received += subs.len() as i64;
            }
        }
        received
    }
}

/// 40 random hex characters (run ids, replication ids).
pub fn random_hex(rng: &mut ChaCha8Rng) -> String {
    use rand_core::RngCore;
    let mut b = [0u8; 20];
    rng.fill_bytes(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}

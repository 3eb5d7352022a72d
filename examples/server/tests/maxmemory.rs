//! `maxmemory` and the eviction policies (issue 19), each scenario run the same way against
//! redis-server 7.0 and ours: `noeviction` refuses writes with Redis's `-OOM` text (also when
//! queued in MULTI) while reads and deletes go on and a delete makes room again;
//! `allkeys-lru` evicts the keys not used for seconds before the ones just read or written;
//! `volatile-ttl` evicts only keys with a TTL and then refuses; an evicted key leaves a
//! valkey-server 9.1 replica of our primary too. Limits are set over each server's own start-up
//! use (`used_memory` on redis-server, `used_memory_dataset` here: `crate::evict` says why they
//! differ). Ports from `common::ports`.

mod common;

use common::{bulk_text, ports, start_real_server, test_dir, wait_until, Client, Procs};

/// A value of about 1000 bytes.
fn value(i: usize) -> String {
    format!("{i:04}{}", "v".repeat(996))
}

fn info_field(c: &mut Client, section: &str, name: &str) -> u64 {
    let text = bulk_text(&c.cmd(&["INFO", section]));
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in INFO {section}:\n{text}"))
        .trim()
        .parse()
        .unwrap()
}

/// The server under test: which one, its port.
struct Server {
    ours: bool,
    port: u16,
}

impl Server {
    /// Sets `maxmemory` to `extra` bytes over what the server uses now, and the policy.
    fn limit(&self, extra: u64, policy: &str) -> Client {
        let mut c = Client::connect(self.port);
        let base = if self.ours {
            info_field(&mut c, "memory", "used_memory_dataset")
        } else {
            info_field(&mut c, "memory", "used_memory")
        };
        let limit = (base + extra).to_string();
        assert_eq!(c.cmd_s(&["CONFIG", "SET", "maxmemory", &limit]), "+OK\r\n");
        assert_eq!(
            c.cmd_s(&["CONFIG", "SET", "maxmemory-policy", policy]),
            "+OK\r\n"
        );
        c
    }
}

/// Starts redis-server 7.0 or ours (standalone) on `port`.
fn start(
    ours: bool,
    port: u16,
    procs: &mut Procs,
    dir: &std::path::Path,
) -> Option<common::RealServer> {
    if ours {
        procs.start(dir, port, &["--cluster-enabled", "no", "--save", ""]);
        None
    } else {
        Some(start_real_server(
            "redis-server",
            port,
            &dir.join(format!("redis-{port}")),
            &[],
        ))
    }
}

/// `noeviction`: the replies a client sees, in order.
fn noeviction_script(s: &Server) -> Vec<String> {
    let mut c = s.limit(1 << 20, "noeviction");
    let mut replies = Vec::new();
    let mut written = 0;
    loop {
        let r = c.cmd_s(&["SET", &format!("k{written}"), &value(written)]);
        if r != "+OK\r\n" {
            replies.push(r);
            break;
        }
        written += 1;
        assert!(written < 5000, "no OOM after 5000 writes of 1 KB");
    }
    assert!(written > 500, "only {written} keys fit in 1 MB");
    // Reads and deletes still run; a write that would grow memory does not.
    replies.push(c.cmd_s(&["GET", "nope"]));
    replies.push(c.cmd_s(&["INCR", "counter"]));
    replies.push(c.cmd_s(&["MULTI"]));
    replies.push(c.cmd_s(&["SET", "x", "1"]));
    replies.push(c.cmd_s(&["EXEC"]));
    let dels: Vec<String> = (0..200).map(|i| format!("k{i}")).collect();
    let mut argv = vec!["DEL"];
    argv.extend(dels.iter().map(String::as_str));
    replies.push(c.cmd_s(&argv));
    // The deletes made room.
    replies.push(c.cmd_s(&["SET", "again", "1"]));
    replies.push(format!(
        "evicted_keys={}",
        info_field(&mut c, "stats", "evicted_keys")
    ));
    replies
}

#[test]
fn noeviction_refuses_writes_as_redis_does_and_deletes_make_room() {
    let dir = test_dir("maxmemory-noeviction");
    let mut procs = Procs::default();
    let [redis_port, our_port] = ports::ports(2)[..] else {
        unreachable!()
    };
    let _redis = start(false, redis_port, &mut procs, &dir);
    start(true, our_port, &mut procs, &dir);
    let redis = noeviction_script(&Server {
        ours: false,
        port: redis_port,
    });
    let ours = noeviction_script(&Server {
        ours: true,
        port: our_port,
    });
    eprintln!("redis-server: {redis:?}\nours: {ours:?}");
    assert_eq!(ours, redis);
    assert_eq!(
        ours[0],
        "-OOM command not allowed when used memory > 'maxmemory'.\r\n"
    );
}

/// `allkeys-lru`: (evicted keys, surviving "used" keys of 900, surviving new keys of 600).
fn lru_script(s: &Server) -> (u64, usize, usize) {
    let mut c = s.limit(2 << 20, "allkeys-lru");
    let set = |c: &mut Client, k: &str, i: usize| {
        assert_eq!(c.cmd_s(&["SET", k, &value(i)]), "+OK\r\n", "{k}");
    };
    for i in 0..1800 {
        set(&mut c, &format!("old{i}"), i);
    }
    // LRU clocks tick once a second: let the old keys age until the server says the last one
    // written has been idle 2 s (OBJECT IDLETIME does not touch the key), then use half of
    // them.
    wait_until("the old keys idle for 2 s", || {
        let r = c.cmd_s(&["OBJECT", "IDLETIME", "old1799"]);
        let idle: u64 = r
            .strip_prefix(':')
            .and_then(|n| n.trim_end().parse().ok())
            .unwrap_or_else(|| panic!("OBJECT IDLETIME old1799: {r:?}"));
        idle >= 2
    });
    for i in 0..900 {
        assert!(c.cmd_s(&["GET", &format!("old{i}")]).starts_with('$'));
    }
    for i in 0..600 {
        set(&mut c, &format!("new{i}"), i);
    }
    let alive = |c: &mut Client, k: String| !c.cmd_s(&["EXISTS", &k]).starts_with(":0");
    let used = (0..900)
        .filter(|i| alive(&mut c, format!("old{i}")))
        .count();
    let new = (0..600)
        .filter(|i| alive(&mut c, format!("new{i}")))
        .count();
    (info_field(&mut c, "stats", "evicted_keys"), used, new)
}

#[test]
fn allkeys_lru_evicts_the_keys_left_unused_first_like_redis() {
    let dir = test_dir("maxmemory-lru");
    let mut procs = Procs::default();
    let [redis_port, our_port] = ports::ports(2)[..] else {
        unreachable!()
    };
    let _redis = start(false, redis_port, &mut procs, &dir);
    start(true, our_port, &mut procs, &dir);
    for s in [
        Server {
            ours: false,
            port: redis_port,
        },
        Server {
            ours: true,
            port: our_port,
        },
    ] {
        let (evicted, used, new) = lru_script(&s);
        let who = if s.ours { "ours" } else { "redis-server" };
        eprintln!("{who}: {evicted} evicted, {used} of 900 used and {new} of 600 new keys left");
        assert!(evicted >= 200, "{who}: only {evicted} evicted");
        // Approximated LRU (5 samples, a pool of 16): nearly all evictions hit unused keys.
        assert!(
            used >= 880,
            "{who}: {used} of 900 used keys left ({evicted} evicted)"
        );
        assert!(
            new >= 585,
            "{who}: {new} of 600 new keys left ({evicted} evicted)"
        );
    }
}

/// `volatile-ttl`: (evicted, persistent keys left of 500, keys with a TTL left of 500, the
/// reply to one more write once the TTL keys are gone).
fn volatile_script(s: &Server) -> (u64, usize, usize, String) {
    let mut c = s.limit(1 << 20, "volatile-ttl");
    for i in 0..500 {
        assert_eq!(c.cmd_s(&["SET", &format!("p{i}"), &value(i)]), "+OK\r\n");
        let ttl = (1000 + i).to_string();
        assert_eq!(
            c.cmd_s(&["SET", &format!("t{i}"), "x", "EX", &ttl]),
            "+OK\r\n"
        );
    }
    let mut last = String::new();
    for i in 0..1500 {
        last = c.cmd_s(&["SET", &format!("q{i}"), &value(i)]);
        if last != "+OK\r\n" {
            break;
        }
    }
    let alive = |c: &mut Client, k: String| !c.cmd_s(&["EXISTS", &k]).starts_with(":0");
    let persistent = (0..500).filter(|i| alive(&mut c, format!("p{i}"))).count();
    let volatile = (0..500).filter(|i| alive(&mut c, format!("t{i}"))).count();
    (
        info_field(&mut c, "stats", "evicted_keys"),
        persistent,
        volatile,
        last,
    )
}

#[test]
fn volatile_ttl_evicts_only_keys_with_a_ttl_then_refuses() {
    let dir = test_dir("maxmemory-ttl");
    let mut procs = Procs::default();
    let [redis_port, our_port] = ports::ports(2)[..] else {
        unreachable!()
    };
    let _redis = start(false, redis_port, &mut procs, &dir);
    start(true, our_port, &mut procs, &dir);
    let redis = volatile_script(&Server {
        ours: false,
        port: redis_port,
    });
    let ours = volatile_script(&Server {
        ours: true,
        port: our_port,
    });
    // Every TTL key went (small values: 500 of them free about 30-40 KB, less than the
    // persistent writes that follow need), no persistent key did, then -OOM.
    assert_eq!((ours.1, ours.2, &ours.3), (500, 0, &redis.3));
    assert_eq!((redis.1, redis.2), (500, 0));
    assert_eq!(ours.0, 500);
    assert_eq!(redis.0, 500);
}

#[test]
fn an_evicted_key_leaves_a_valkey_replica_of_our_primary() {
    let dir = test_dir("maxmemory-replica");
    let mut procs = Procs::default();
    let [primary, replica_port] = ports::ports(2)[..] else {
        unreachable!()
    };
    start(true, primary, &mut procs, &dir);
    let (_replica, mut replica) = common::valkey_replica_of(primary, replica_port, &dir);
    let mut c = Server {
        ours: true,
        port: primary,
    }
    .limit(1 << 20, "allkeys-random");
    for i in 0..3000 {
        assert_eq!(c.cmd_s(&["SET", &format!("k{i}"), &value(i)]), "+OK\r\n");
    }
    let evicted = info_field(&mut c, "stats", "evicted_keys");
    assert!(evicted > 1000, "{evicted}");
    let dbsize = |c: &mut Client| c.cmd_s(&["DBSIZE"]);
    let ours = dbsize(&mut c);
    assert_eq!(ours, format!(":{}\r\n", 3000 - evicted));
    wait_until("the replica's DBSIZE equal", || {
        dbsize(&mut replica) == ours
    });
}

/// RESTORE's `IDLETIME` under `allkeys-lru` and `FREQ` under `allkeys-lfu` (Valkey
/// `objectSetLRUOrLFU`), then OBJECT IDLETIME / FREQ of the restored keys: `(idle seconds,
/// whole seconds the steps took, freq, whole minutes the steps spanned)`.
fn restore_access_script(s: &Server) -> (u64, u64, u64, u64) {
    #![allow(clippy::disallowed_methods)] // bounds the reading by the wall clock, as TTL cases do
    let mut c = Client::connect(s.port);
    assert_eq!(c.cmd_s(&["SET", "src", "bar"]), "+OK\r\n");
    let dump = c.cmd(&["DUMP", "src"]);
    let payload = &dump[dump.iter().position(|b| *b == b'\n').unwrap() + 1..dump.len() - 2];
    let restore = |c: &mut Client, key: &[u8], opt: &[u8], n: &[u8]| {
        c.send_raw(&common::encode(&[b"RESTORE", key, b"0", payload, opt, n]));
        assert_eq!(c.read_reply(), b"+OK\r\n");
    };
    let int = |r: String| -> u64 { r.trim_start_matches(':').trim().parse().unwrap() };
    let started = std::time::SystemTime::now();
    assert_eq!(
        c.cmd_s(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]),
        "+OK\r\n"
    );
    // An idle time far beyond the LRU clock's range is taken (no overflow).
    restore(&mut c, b"huge", b"IDLETIME", b"9223372036854775807");
    assert_eq!(c.cmd_s(&["PING"]), "+PONG\r\n");
    restore(&mut c, b"lru", b"IDLETIME", b"1000");
    let idle = int(c.cmd_s(&["OBJECT", "IDLETIME", "lru"]));
    let secs = started.elapsed().unwrap().as_secs() + 1;
    let minute =
        |t: std::time::SystemTime| t.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() / 60;
    let m0 = minute(std::time::SystemTime::now());
    assert_eq!(
        c.cmd_s(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"]),
        "+OK\r\n"
    );
    restore(&mut c, b"lfu", b"FREQ", b"100");
    let freq = int(c.cmd_s(&["OBJECT", "FREQ", "lfu"]));
    let minutes = minute(std::time::SystemTime::now()) - m0;
    c.cmd(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    (idle, secs, freq, minutes)
}

#[test]
fn restore_sets_idle_time_and_frequency_as_redis_does() {
    let dir = test_dir("maxmemory-restore-access");
    let [redis, ours] = ports::ports(2)[..] else {
        unreachable!()
    };
    let mut procs = Procs::default();
    let _r = start(false, redis, &mut procs, &dir);
    start(true, ours, &mut procs, &dir);
    for s in [
        Server {
            ours: false,
            port: redis,
        },
        Server {
            ours: true,
            port: ours,
        },
    ] {
        let (idle, secs, freq, minutes) = restore_access_script(&s);
        // The idle time given, plus at most the seconds the steps took.
        assert!(
            (1000..=1000 + secs).contains(&idle),
            "{}: idle {idle}",
            s.port
        );
        // The counter given, less one per minute boundary crossed (lfu-decay-time 1).
        assert!(
            (100 - minutes.min(100)..=100).contains(&freq),
            "{}: freq {freq}",
            s.port
        );
    }
}

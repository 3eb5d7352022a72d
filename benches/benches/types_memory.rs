//! Memory per element of the server's list and sorted set (`examples/server/src/types`,
//! included by path) with 1,000,000 elements, side by side with redis-server 7.0 in the same
//! run (issue 20 target: at most 0.7x Redis's).
//!
//! Ours: live heap bytes of the structure, size-classed like jemalloc (the counting
//! allocator in `common/`). Redis: the growth of `INFO memory` `used_memory` (jemalloc's
//! allocated bytes) while one key is loaded with the same elements (RPUSH / ZADD in batches
//! of 1,000), on a redis-server this bench starts on port 23985 (run it inside your network
//! namespace: `nsrun <ns> cargo bench -p ferrocluster-benches --bench types_memory`).
//! Needs `redis-server` on PATH; without it the bench fails.
#![allow(clippy::disallowed_methods)]

#[path = "common/counting_alloc.rs"]
mod counting_alloc;

// The server's type modules, compiled into the bench (their `super::` is this root).
#[allow(dead_code)]
#[path = "../../examples/server/src/types/list.rs"]
mod list;
#[allow(dead_code)]
#[path = "../../examples/server/src/types/listpack.rs"]
mod listpack;
#[allow(dead_code)]
#[path = "../../examples/server/src/types/zset.rs"]
mod zset;

use counting_alloc::live;
use list::{End, Fill, List};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use zset::{ZLimits, ZSet};

const N: usize = 1_000_000;
const PORT: u16 = 23985;

/// xorshift64*: the same elements on both sides, every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

fn alnum(rng: &mut Rng, len: usize) -> Vec<u8> {
    const A: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    (0..len)
        .map(|_| A[(rng.next() % A.len() as u64) as usize])
        .collect()
}

struct Redis {
    child: Child,
    conn: BufReader<TcpStream>,
}

impl Redis {
    fn start() -> Redis {
        let dir = std::env::temp_dir().join(format!("types-memory-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let child = Command::new("redis-server")
            .args([
                "--port",
                &PORT.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server on PATH (apt-get install redis-server)");
        // Dropping `guard` kills and reaps the server on every path out of here.
        let mut guard = Some(child);
        for _ in 0..100 {
            if let Ok(s) = TcpStream::connect(("127.0.0.1", PORT)) {
                let mut r = Redis {
                    child: guard.take().expect("taken once"),
                    conn: BufReader::new(s),
                };
                r.cmd(&[b"FLUSHALL"]);
                return r;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if let Some(mut c) = guard {
            let _ = c.kill();
            let _ = c.wait();
        }
        panic!("redis-server did not listen on {PORT}");
    }

    fn send(&mut self, args: &[&[u8]]) {
        let mut b = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            b.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            b.extend_from_slice(a);
            b.extend_from_slice(b"\r\n");
        }
        self.conn.get_mut().write_all(&b).expect("write to redis");
    }

    /// Reads one reply; returns bulk payloads' bytes or the line.
    fn read(&mut self) -> Vec<u8> {
        let mut line = Vec::new();
        self.conn.read_until(b'\n', &mut line).expect("read");
        match line.first() {
            Some(b'$') => {
                let n: usize = std::str::from_utf8(&line[1..line.len() - 2])
                    .expect("len")
                    .parse()
                    .expect("len");
                let mut v = vec![0; n + 2];
                self.conn.read_exact(&mut v).expect("bulk");
                v.truncate(n);
                v
            }
            Some(b'-') => panic!("redis error: {}", String::from_utf8_lossy(&line)),
            _ => line,
        }
    }

    fn cmd(&mut self, args: &[&[u8]]) -> Vec<u8> {
        self.send(args);
        self.read()
    }

    fn used_memory(&mut self) -> i64 {
        let info = self.cmd(&[b"INFO", b"memory"]);
        let text = String::from_utf8_lossy(&info);
        text.lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .expect("used_memory field")
            .trim()
            .parse()
            .expect("a number")
    }

    /// `used_memory` growth from sending `cmds` (each a full argv), pipelined.
    fn growth(&mut self, cmds: impl Iterator<Item = Vec<Vec<u8>>>) -> i64 {
        let before = self.used_memory();
        let mut pending = 0;
        for c in cmds {
            let args: Vec<&[u8]> = c.iter().map(Vec::as_slice).collect();
            self.send(&args);
            pending += 1;
            if pending == 64 {
                for _ in 0..pending {
                    self.read();
                }
                pending = 0;
            }
        }
        for _ in 0..pending {
            self.read();
        }
        self.used_memory() - before
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Size-classed heap bytes `build` leaves behind.
fn ours<T>(build: impl FnOnce() -> T) -> i64 {
    let before = live().1;
    let kept = build();
    let after = live().1;
    std::hint::black_box(&kept);
    drop(kept);
    (after - before) as i64
}

fn report(what: &str, ours: i64, redis: i64) {
    let (o, r) = (ours as f64 / N as f64, redis as f64 / N as f64);
    println!(
        "{what:<52} ours {o:>7.2} B/elem   redis-server {r:>7.2} B/elem   ratio {:.2}",
        o / r
    );
}

fn list_case(redis: &mut Redis, what: &str, key: &[u8], items: &[Vec<u8>]) {
    let o = ours(|| {
        let mut l = List::new();
        for it in items {
            l.push(End::Right, it, Fill::default());
        }
        l
    });
    let r = redis.growth(items.chunks(1000).map(|c| {
        let mut a = vec![b"RPUSH".to_vec(), key.to_vec()];
        a.extend(c.iter().cloned());
        a
    }));
    report(what, o, r);
}

fn zset_case(redis: &mut Redis, what: &str, key: &[u8], items: &[(Vec<u8>, f64)]) {
    let o = ours(|| {
        let mut z = ZSet::new();
        for (m, s) in items {
            z.add(m, *s, ZLimits::default());
        }
        z
    });
    let r = redis.growth(items.chunks(1000).map(|c| {
        let mut a = vec![b"ZADD".to_vec(), key.to_vec()];
        for (m, s) in c {
            // `{:?}` prints the shortest text that reads back to the same double.
            a.push(format!("{s:?}").into_bytes());
            a.push(m.clone());
        }
        a
    }));
    report(what, o, r);
}

fn main() {
    let mut redis = Redis::start();
    let version = redis.cmd(&[b"INFO", b"server"]);
    let version = String::from_utf8_lossy(&version);
    let version = version
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("?")
        .trim()
        .to_string();
    println!("1,000,000 elements in one key; redis-server {version} on the same machine, same run");
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);

    let xxx: Vec<Vec<u8>> = (0..N).map(|_| b"xxx".to_vec()).collect();
    list_case(
        &mut redis,
        "list, \"xxx\" (redis-benchmark's LPUSH value)",
        b"l1",
        &xxx,
    );
    drop(xxx);
    let rand16: Vec<Vec<u8>> = (0..N).map(|_| alnum(&mut rng, 16)).collect();
    list_case(
        &mut redis,
        "list, 16-byte random alphanumerics",
        b"l2",
        &rand16,
    );
    drop(rand16);
    let ints: Vec<Vec<u8>> = (0..N)
        .map(|_| (rng.next() % 1_000_000_000).to_string().into_bytes())
        .collect();
    list_case(&mut redis, "list, integers below 10^9", b"l3", &ints);
    drop(ints);

    let short: Vec<(Vec<u8>, f64)> = (0..N)
        .map(|i| {
            let s = (rng.next() >> 11) as f64 / (1u64 << 53) as f64 * 1000.0;
            (format!("member:{i}").into_bytes(), s)
        })
        .collect();
    zset_case(
        &mut redis,
        "sorted set, member:N, random double scores",
        b"z1",
        &short,
    );
    drop(short);
    let bench: Vec<(Vec<u8>, f64)> = (0..N)
        .map(|i| {
            let s = (rng.next() % 1_000_000) as f64;
            (format!("element:{i:012}").into_bytes(), s)
        })
        .collect();
    zset_case(
        &mut redis,
        "sorted set, element:%012d (20 B), integer scores",
        b"z2",
        &bench,
    );
}

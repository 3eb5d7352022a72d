//! Speed and memory of the server's big sorted set (`examples/server/src/types/zset.rs`: an
//! order-statistic B+tree of ids over a member table with a hash index) beside the obvious
//! alternative built from std collections (a `BTreeSet<(score, member)>` for order plus a
//! `HashMap<member, score>`, which has no O(log n) rank), with 1,000,000 members
//! `member:N` and random scores. Per operation: ns, single thread, one run. The list's
//! push/pop/index costs are printed too.
//!
//! Run: `cargo bench -p ferrocluster-benches --bench types_ops`.
#![allow(clippy::disallowed_methods)]

#[path = "common/counting_alloc.rs"]
mod counting_alloc;

#[allow(dead_code)]
#[path = "../../examples/server/src/types/list.rs"]
mod list;
#[allow(dead_code)]
#[path = "../../examples/server/src/types/listpack.rs"]
mod listpack;
#[allow(dead_code)]
#[path = "../../examples/server/src/types/zset.rs"]
mod zset;

use std::collections::{BTreeSet, HashMap};
use std::hint::black_box;
use std::time::Instant;
use zset::{ScoreBound, ZLimits, ZSet};

const N: usize = 1_000_000;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// A score with a total order (scores are never NaN).
#[derive(Clone, Copy, PartialEq)]
struct Score(f64);
impl Eq for Score {}
impl PartialOrd for Score {
    fn partial_cmp(&self, o: &Score) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Score {
    fn cmp(&self, o: &Score) -> std::cmp::Ordering {
        zset::cmp_score(self.0, o.0)
    }
}

#[derive(Default)]
struct StdZset {
    order: BTreeSet<(Score, Vec<u8>)>,
    index: HashMap<Vec<u8>, f64>,
}

impl StdZset {
    fn add(&mut self, m: &[u8], s: f64) {
        if let Some(old) = self.index.insert(m.to_vec(), s) {
            self.order.remove(&(Score(old), m.to_vec()));
        }
        self.order.insert((Score(s), m.to_vec()));
    }
    fn rank(&self, m: &[u8]) -> Option<usize> {
        let s = *self.index.get(m)?;
        // No order statistics: count from the start (O(n)).
        Some(self.order.range(..(Score(s), m.to_vec())).count())
    }
}

fn time(label: &str, ops: usize, f: impl FnOnce()) {
    let t = Instant::now();
    f();
    let ns = t.elapsed().as_nanos() as f64 / ops as f64;
    println!("{label:<58} {ns:>9.1} ns/op");
}

fn main() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let members: Vec<Vec<u8>> = (0..N).map(|i| format!("member:{i}").into_bytes()).collect();
    let scores: Vec<f64> = (0..N)
        .map(|_| (rng.next() >> 11) as f64 / (1u64 << 53) as f64 * 1e6)
        .collect();
    let probes: Vec<usize> = (0..100_000)
        .map(|_| (rng.next() % N as u64) as usize)
        .collect();

    println!("1,000,000 members, random scores");
    let before = counting_alloc::live().1;
    let mut z = ZSet::new_big();
    time("ours: ZADD (new member)", N, || {
        for (m, s) in members.iter().zip(&scores) {
            z.add(m, *s, ZLimits::default());
        }
    });
    let ours_mem = counting_alloc::live().1 - before;
    time("ours: ZSCORE", probes.len(), || {
        for &i in &probes {
            black_box(z.score(&members[i]));
        }
    });
    time("ours: ZRANK", probes.len(), || {
        for &i in &probes {
            black_box(z.rank(&members[i]));
        }
    });
    time("ours: ZRANGEBYSCORE x y LIMIT 0 10", probes.len(), || {
        for &i in &probes {
            let min = ScoreBound {
                value: scores[i],
                exclusive: false,
            };
            let a = z.rank_of_score(min);
            let mut n = 0;
            z.for_each_rank(a, a + 10, false, |_, _| {
                n += 1;
                true
            });
            black_box(n);
        }
    });
    time("ours: ZADD (update score)", probes.len(), || {
        for &i in &probes {
            z.add(&members[i], scores[i] + 1.0, ZLimits::default());
        }
    });
    time("ours: ZREM + ZADD", probes.len(), || {
        for &i in &probes {
            z.remove(&members[i]);
            z.add(&members[i], scores[i], ZLimits::default());
        }
    });
    drop(z);

    let before = counting_alloc::live().1;
    let mut s = StdZset::default();
    time("std BTreeSet + HashMap: ZADD (new member)", N, || {
        for (m, sc) in members.iter().zip(&scores) {
            s.add(m, *sc);
        }
    });
    let std_mem = counting_alloc::live().1 - before;
    time("std BTreeSet + HashMap: ZSCORE", probes.len(), || {
        for &i in &probes {
            black_box(s.index.get(&members[i]));
        }
    });
    time(
        "std BTreeSet + HashMap: ZRANK (O(n), 100 probes)",
        100,
        || {
            for &i in &probes[..100] {
                black_box(s.rank(&members[i]));
            }
        },
    );
    time(
        "std BTreeSet + HashMap: ZADD (update score)",
        probes.len(),
        || {
            for &i in &probes {
                s.add(&members[i], scores[i] + 1.0);
            }
        },
    );
    println!(
        "memory: ours {:.1} B/member, std BTreeSet + HashMap {:.1} B/member (size-classed)",
        ours_mem as f64 / N as f64,
        std_mem as f64 / N as f64
    );
    drop(s);

    println!("list, 1,000,000 elements of 10 bytes");
    let mut l = list::List::new();
    let fill = list::Fill::default();
    time("ours: RPUSH", N, || {
        for m in &members {
            l.push(list::End::Right, m, fill);
        }
    });
    time("ours: LINDEX (random index)", 10_000, || {
        for &i in &probes[..10_000] {
            black_box(l.get(i));
        }
    });
    time("ours: LPOP", N / 2, || {
        for _ in 0..N / 2 {
            black_box(l.pop(list::End::Left));
        }
    });
    time("ours: RPOP", N / 2, || {
        for _ in 0..N / 2 {
            black_box(l.pop(list::End::Right));
        }
    });
}

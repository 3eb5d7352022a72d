//! Differential test of the list and sorted-set commands: the same command sequences run on
//! redis-server 7.0 and on ferrocluster-server (both standalone), in RESP2 and RESP3, and
//! every reply must be byte-identical. Two parts: hand-written cases (every command of the
//! two families, their options and error paths, WRONGTYPE) and seeded random sequences over
//! a few keys (so encodings convert back and forth under the real thresholds).
//!
//! Needs `redis-server` 7.0 on PATH (`.ci/run` installs it). Ports from the one allocator
//! (`common::ports`).

mod common;

use common::{ports, require_redis_tools, start_real_server, test_dir, Client, Procs, RealServer};

/// The two servers of the test: redis-server and ours, on their ports.
struct Servers {
    _procs: Procs,
    _redis: RealServer,
    redis: u16,
    ours: u16,
}

fn start_pair(name: &str) -> Servers {
    require_redis_tools();
    let dir = test_dir(name);
    let [redis, ours] = ports::ports(2)[..] else {
        unreachable!()
    };
    let real = start_real_server("redis-server", redis, &dir.join("redis"), &[]);
    let mut procs = Procs::default();
    procs.start(&dir, ours, &["--cluster-enabled", "no"]);
    Servers {
        _procs: procs,
        _redis: real,
        redis,
        ours,
    }
}

/// Splits a case line into arguments: whitespace-separated, `"..."` for an argument with
/// spaces or an empty one.
fn words(line: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut cur = Vec::new();
    let mut quoted = false;
    let mut any = false;
    for c in line.bytes() {
        match c {
            b'"' => {
                quoted = !quoted;
                any = true;
            }
            b' ' if !quoted => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            _ => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

struct Pair {
    redis: Client,
    ours: Client,
}

impl Pair {
    fn connect(servers: &Servers, proto: u8) -> Pair {
        let mut p = Pair {
            redis: Client::connect(servers.redis),
            ours: Client::connect(servers.ours),
        };
        if proto == 3 {
            p.redis.cmd(&["HELLO", "3"]);
            p.ours.cmd(&["HELLO", "3"]);
        }
        p.redis.cmd(&["FLUSHALL"]);
        p.ours.cmd(&["FLUSHALL"]);
        p
    }

    fn both(&mut self, argv: &[Vec<u8>]) -> (Vec<u8>, Vec<u8>) {
        let args: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
        let req = common::encode(&args);
        self.redis.send_raw(&req);
        self.ours.send_raw(&req);
        (self.redis.read_reply(), self.ours.read_reply())
    }

    fn check(&mut self, argv: &[Vec<u8>], ctx: &str) {
        // Shown with a failure (a reply that never comes panics in the read).
        eprintln!("{ctx}: {}", String::from_utf8_lossy(&argv.join(&b' ')));
        let (r, o) = self.both(argv);
        assert_eq!(
            String::from_utf8_lossy(&o),
            String::from_utf8_lossy(&r),
            "{ctx}: reply to {:?} differs (left: ours, right: redis-server)",
            argv.iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
        );
    }
}

/// Hand-written cases; each block runs on a fresh keyspace. Lines starting with `#` are
/// comments.
const CASES: &str = r#"
# lists: pushes, ranges, indexes
RPUSH l a b c 1 2 300 -70000 5000000000
LPUSH l x y
LPUSHX l z
RPUSHX nolist a
LPUSHX nolist a
LLEN l
LLEN nolist
LRANGE l 0 -1
LRANGE l -3 -1
LRANGE l 5 2
LRANGE l -100 100
LRANGE l 0 x
LRANGE nolist 0 -1
LINDEX l 0
LINDEX l -1
LINDEX l 100
LINDEX l x
LINDEX nolist x
LSET l 0 first
LSET l -1 last
LSET l 100 v
LSET nolist 0 v
LSET l x v
LINSERT l BEFORE b bb
LINSERT l AFTER b ba
LINSERT l AFTER nothere v
LINSERT l MIDDLE b v
LINSERT nolist BEFORE a b
LRANGE l 0 -1
LREM l 0 bb
LREM l 1 nothing
LREM l x a
LPOS l c
LPOS l c RANK -1
LPOS l nothing
LPOS l c COUNT 0
LPOS l c RANK 0
LPOS l c COUNT -1
LPOS l c MAXLEN -1
LPOS l c MAXLEN 1
LPOS l c FOO
LPOS nolist c
LPOS nolist c COUNT 2
LPOP l
RPOP l
LPOP l 2
RPOP l 3
LPOP l 0
LPOP l -1
LPOP l x
LPOP nolist
LPOP nolist 2
RPOP nolist 0
LTRIM l 1 -2
LRANGE l 0 -1
LTRIM l 5 1
EXISTS l
LTRIM nolist 0 1
LTRIM l x 1
---
# list moves
RPUSH src a b c
LMOVE src dst LEFT RIGHT
LMOVE src dst RIGHT LEFT
LMOVE src dst UP LEFT
RPOPLPUSH src dst
RPOPLPUSH src dst
LRANGE dst 0 -1
EXISTS src
LMOVE nosrc dst LEFT LEFT
RPUSH same 1 2 3
LMOVE same same LEFT RIGHT
LRANGE same 0 -1
SET str v
LMOVE same str LEFT LEFT
LMOVE str same LEFT LEFT
LRANGE same 0 -1
---
# LMPOP
RPUSH a 1 2 3
RPUSH b 4 5
LMPOP 2 nokey a LEFT
LMPOP 2 nokey b RIGHT COUNT 5
LMPOP 1 a LEFT COUNT 0
LMPOP 0 a LEFT
LMPOP 2 a LEFT
LMPOP 1 a MIDDLE
LMPOP 1 a LEFT COUNT 1 COUNT 2
LMPOP 1 nokey LEFT
LMPOP x a LEFT
---
# blocking commands answered at once (data present) and their errors
RPUSH q a b c d e f
BLPOP q 0
BRPOP q 0.5
BLPOP nokey q 0
BLMOVE q q2 LEFT RIGHT 0
BRPOPLPUSH q2 q3 0
BLMPOP 0 1 q3 LEFT COUNT 3
BLPOP q -1
BLPOP q abc
BLMOVE q q2 LEFT UP 0
BZPOPMIN q -1
ZADD z 1 a 2 b 3 c
BZPOPMIN z 0
BZPOPMAX nokey z 0
BZMPOP 0 1 z MIN COUNT 10
BZMPOP 0 0 z MIN
SET str x
BLPOP str 0
BZPOPMIN str 0
MULTI
BLPOP nokey 1
BZPOPMIN nokey 1
BLMOVE nokey d LEFT LEFT 1
BLMPOP 1 1 nokey LEFT
BZMPOP 1 1 nokey MAX
EXEC
---
# WRONGTYPE everywhere
SET s v
LPUSH s a
RPUSH s a
LPUSHX s a
LLEN s
LRANGE s 0 1
LINDEX s 0
LSET s 0 a
LINSERT s BEFORE a b
LREM s 0 a
LPOS s a
LPOP s
RPOP s 2
LTRIM s 0 1
LMPOP 1 s LEFT
ZADD s 1 a
ZINCRBY s 1 a
ZREM s a
ZCARD s
ZSCORE s a
ZMSCORE s a b
ZRANK s a
ZREVRANK s a
ZCOUNT s 0 1
ZLEXCOUNT s - +
ZRANGE s 0 1
ZREVRANGE s 0 1
ZRANGEBYSCORE s 0 1
ZREVRANGEBYSCORE s 1 0
ZRANGEBYLEX s - +
ZREVRANGEBYLEX s + -
ZRANGESTORE d s 0 1
ZREMRANGEBYRANK s 0 1
ZREMRANGEBYSCORE s 0 1
ZREMRANGEBYLEX s - +
ZPOPMIN s
ZPOPMAX s 2
ZMPOP 1 s MIN
ZRANDMEMBER s
ZSCAN s 0
ZUNION 1 s
ZINTER 1 s
ZDIFF 1 s
ZUNIONSTORE d 1 s
ZINTERCARD 1 s
---
# ZADD options
ZADD z 1 a 2 b
ZADD z NX 5 a 3 c
ZADD z XX 6 a 4 d
ZADD z CH 7 a 2 b 8 e
ZADD z GT 1 a
ZADD z GT CH 10 a
ZADD z LT CH 100 a 0 b
ZADD z INCR 5 a
ZADD z INCR 1 a 2 b
ZADD z NX INCR 1 a
ZADD z XX INCR 1 nothere
ZADD z XX NX 1 a
ZADD z GT LT 1 a
ZADD z NX GT 1 a
ZADD z 1
ZADD z 1 a 2
ZADD z x a
ZADD z nan a
ZADD z inf inf -inf neginf
ZADD z INCR -inf inf
ZADD z 0.1 tenth 1e-5 tiny 1.5e20 big -0 negzero
ZRANGE z 0 -1 WITHSCORES
ZSCORE z tenth
ZSCORE z nothere
ZSCORE noz a
ZMSCORE z a nothere tenth
ZMSCORE noz a b
ZINCRBY z 2.5 a
ZINCRBY z x a
ZINCRBY z 1 newmember
ZINCRBY z inf inf
ZINCRBY z -inf inf
ZADD noz XX 1 a
EXISTS noz
ZADD noz XX INCR 1 a
ZCARD z
ZCARD noz
---
# ranks and ranges
ZADD z 1 a 1 b 2 c 3 d 3 e 4 f 5 g
ZRANK z c
ZREVRANK z c
ZRANK z nothere
ZRANK noz a
ZRANGE z 0 -1
ZRANGE z 2 4 WITHSCORES
ZRANGE z -2 -1
ZRANGE z 5 2
ZRANGE z 0 x
ZRANGE z 0 -1 REV
ZRANGE z 0 -1 REV WITHSCORES
ZRANGE z (1 3 BYSCORE
ZRANGE z 3 (1 BYSCORE REV
ZRANGE z -inf +inf BYSCORE LIMIT 1 2
ZRANGE z -inf +inf BYSCORE LIMIT 1 -1 WITHSCORES
ZRANGE z -inf +inf BYSCORE LIMIT -1 2
ZRANGE z 0 -1 LIMIT 1 2
ZRANGE z - + BYLEX WITHSCORES
ZRANGE z x y BYSCORE
ZRANGE z a b BYLEX
ZRANGE z 0 -1 FOO
ZRANGE z 0 -1 BYSCORE BYLEX
ZRANGE noz 0 -1
ZREVRANGE z 0 2 WITHSCORES
ZRANGEBYSCORE z 2 4
ZRANGEBYSCORE z (2 (4 WITHSCORES
ZRANGEBYSCORE z -inf +inf LIMIT 2 3
ZRANGEBYSCORE z " 2" 4
ZRANGEBYSCORE z "" 4
ZRANGEBYSCORE z 2 "4 "
ZRANGEBYSCORE z nan 4
ZREVRANGEBYSCORE z 4 2 WITHSCORES
ZREVRANGEBYSCORE z +inf -inf LIMIT 0 2
ZCOUNT z 2 4
ZCOUNT z (2 (4
ZCOUNT z 4 2
ZCOUNT z x 4
ZCOUNT noz 0 1
---
# lex ranges
ZADD l 0 a 0 b 0 c 0 d 0 e 0 f
ZRANGEBYLEX l - +
ZRANGEBYLEX l [b (e
ZRANGEBYLEX l (b [e LIMIT 1 2
ZREVRANGEBYLEX l + -
ZREVRANGEBYLEX l [e (b
ZRANGEBYLEX l b e
ZRANGEBYLEX l +a -
ZLEXCOUNT l - +
ZLEXCOUNT l [b [d
ZLEXCOUNT l x +
ZREMRANGEBYLEX l [b (d
ZRANGE l 0 -1
ZREMRANGEBYLEX l x +
---
# removals
ZADD z 1 a 2 b 3 c 4 d 5 e 6 f
ZREM z a nothere
ZREM z b c d e f g
EXISTS z
ZREM noz a
ZADD z 1 a 2 b 3 c 4 d 5 e 6 f
ZREMRANGEBYRANK z 0 1
ZREMRANGEBYRANK z -1 -1
ZREMRANGEBYRANK z 5 1
ZREMRANGEBYRANK z x 1
ZREMRANGEBYSCORE z (3 5
ZREMRANGEBYSCORE z x 5
ZRANGE z 0 -1 WITHSCORES
ZREMRANGEBYSCORE noz 0 1
ZREMRANGEBYRANK noz 0 1
---
# pops
ZADD z 1 a 2 b 3 c 4 d
ZPOPMIN z
ZPOPMAX z
ZPOPMIN z 0
ZPOPMIN z 5
EXISTS z
ZPOPMIN noz
ZPOPMIN noz 2
ZPOPMIN z -1
ZPOPMIN z x
ZPOPMIN z 1 2
ZADD z 1 a 2 b 3 c
ZMPOP 2 noz z MAX COUNT 2
ZMPOP 1 z MIN
ZMPOP 1 noz MIN
ZMPOP 1 z FOO
ZMPOP 0 z MIN
ZMPOP 1 z MIN COUNT 0
---
# set operations
ZADD a 1 x 2 y 3 z
ZADD b 10 y 20 z 30 w
SADD s y w v
ZUNION 2 a b
ZUNION 2 a b WITHSCORES
ZUNION 3 a b s WITHSCORES
ZUNION 2 a b WEIGHTS 2 3 WITHSCORES
ZUNION 2 a b AGGREGATE MIN WITHSCORES
ZUNION 2 a b AGGREGATE MAX WITHSCORES
ZUNION 2 a b AGGREGATE FOO
ZUNION 2 a b WEIGHTS 1
ZUNION 2 a b WEIGHTS 1 x
ZUNION 0 a
ZUNION 3 a b
ZUNION 2 a nokey WITHSCORES
ZINTER 2 a b WITHSCORES
ZINTER 3 a b s WITHSCORES
ZINTER 2 a nokey
ZDIFF 2 a b WITHSCORES
ZDIFF 2 b s
ZDIFF 2 a b WEIGHTS 1 2
ZUNIONSTORE d 2 a b
ZRANGE d 0 -1 WITHSCORES
ZINTERSTORE d 2 a b AGGREGATE MAX
ZRANGE d 0 -1 WITHSCORES
ZDIFFSTORE d 2 a b
ZRANGE d 0 -1 WITHSCORES
ZINTERSTORE d 2 a nokey
EXISTS d
ZUNIONSTORE d 0 a
ZINTERCARD 2 a b
ZINTERCARD 2 a b LIMIT 1
ZINTERCARD 2 a b LIMIT -1
ZINTERCARD 0 a
ZINTERCARD 3 a b
ZUNION 2 a b WEIGHTS inf -inf WITHSCORES
ZUNIONSTORE d 2 a b WEIGHTS 0 inf
ZRANGE d 0 -1 WITHSCORES
ZRANGESTORE d a 0 1
ZRANGE d 0 -1 WITHSCORES
ZRANGESTORE d a (1 +inf BYSCORE LIMIT 0 1
ZRANGESTORE d a 0 -1 WITHSCORES
ZRANGESTORE d nokey 0 -1
EXISTS d
---
# random members (shapes only: one-member sets)
ZADD one 5 m
ZRANDMEMBER one
ZRANDMEMBER one 3
ZRANDMEMBER one -3 WITHSCORES
ZRANDMEMBER one 0
ZRANDMEMBER one 1 WITHSCORES
ZRANDMEMBER one 1 FOO
ZRANDMEMBER one x
ZRANDMEMBER nokey
ZRANDMEMBER nokey 5
ZSCAN one 0
ZSCAN one 0 MATCH m*
ZSCAN one x
ZSCAN nokey 0
---
# encodings and type
RPUSH l a
TYPE l
OBJECT ENCODING l
ZADD z 1 a
TYPE z
OBJECT ENCODING z
CONFIG SET zset-max-listpack-entries 2
ZADD z 2 b 3 c
OBJECT ENCODING z
ZUNIONSTORE z2 1 z
OBJECT ENCODING z2
ZRANGESTORE z3 z 0 0
OBJECT ENCODING z3
CONFIG SET zset-max-listpack-entries 128
CONFIG SET zset-max-listpack-value 3
ZADD z4 1 abcd
OBJECT ENCODING z4
CONFIG SET zset-max-listpack-value 64
"#;

fn run_cases(pair: &mut Pair, proto: u8) {
    for block in CASES.split("\n---\n") {
        pair.check(&words("FLUSHALL"), "flush");
        for line in block.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            pair.check(&words(line), &format!("RESP{proto}"));
        }
    }
}

/// One test for both parts: they share the two servers (and their ports).
#[test]
fn lists_and_sorted_sets_match_redis() {
    let servers = start_pair("diff-list-zset");
    for proto in [2, 3] {
        let mut pair = Pair::connect(&servers, proto);
        run_cases(&mut pair, proto);
    }
    random_sequences(&servers);
}

/// xorshift64: the same sequences every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a>(&mut self, v: &[&'a str]) -> &'a str {
        v[self.below(v.len() as u64) as usize]
    }
}

fn random_member(r: &mut Rng) -> String {
    match r.below(10) {
        0 => format!("{}", r.below(300) as i64 - 100),
        1 => "x".repeat(60 + r.below(10) as usize),
        _ => format!("m{}", r.below(200)),
    }
}

fn random_score(r: &mut Rng) -> String {
    match r.below(6) {
        0 => format!("{}.5", r.below(20)),
        1 => "-inf".into(),
        2 => format!("({}", r.below(20)),
        _ => format!("{}", r.below(20)),
    }
}

fn random_command(r: &mut Rng) -> Vec<String> {
    let lkeys = ["l1", "l2"];
    let zkeys = ["z1", "z2"];
    let end = |r: &mut Rng| r.pick(&["LEFT", "RIGHT"]).to_string();
    let int = |r: &mut Rng| format!("{}", r.below(30) as i64 - 15);
    let l = r.pick(&lkeys).to_string();
    let z = r.pick(&zkeys).to_string();
    let mut v: Vec<String> = match r.below(30) {
        0..=3 => {
            let mut v = vec![r.pick(&["LPUSH", "RPUSH"]).to_string(), l];
            for _ in 0..1 + r.below(40) {
                v.push(random_member(r));
            }
            v
        }
        4 => vec![
            r.pick(&["LPOP", "RPOP"]).into(),
            l,
            format!("{}", r.below(5)),
        ],
        5 => vec!["LRANGE".into(), l, int(r), int(r)],
        6 => vec!["LINDEX".into(), l, int(r)],
        7 => vec!["LSET".into(), l, int(r), random_member(r)],
        8 => vec![
            "LINSERT".into(),
            l,
            r.pick(&["BEFORE", "AFTER"]).into(),
            random_member(r),
            random_member(r),
        ],
        9 => vec!["LREM".into(), l, int(r), random_member(r)],
        10 => vec!["LTRIM".into(), l, int(r), int(r)],
        11 => vec![
            "LPOS".into(),
            l,
            random_member(r),
            "RANK".into(),
            r.pick(&["1", "-1", "2"]).into(),
            "COUNT".into(),
            format!("{}", r.below(3)),
        ],
        12 => vec!["LMOVE".into(), l, r.pick(&lkeys).into(), end(r), end(r)],
        13 => vec![
            "LMPOP".into(),
            "2".into(),
            "l1".into(),
            "l2".into(),
            end(r),
            "COUNT".into(),
            format!("{}", 1 + r.below(4)),
        ],
        14..=17 => {
            let mut v = vec!["ZADD".to_string(), z];
            if r.below(4) == 0 {
                v.push(r.pick(&["NX", "XX", "GT", "LT", "CH"]).into());
            }
            for _ in 0..1 + r.below(30) {
                v.push(format!("{}", r.below(40) as i64 - 20));
                v.push(random_member(r));
            }
            v
        }
        18 => vec!["ZREM".into(), z, random_member(r), random_member(r)],
        19 => vec!["ZRANGE".into(), z, int(r), int(r), "WITHSCORES".into()],
        20 => vec![
            "ZRANGEBYSCORE".into(),
            z,
            random_score(r),
            random_score(r),
            "WITHSCORES".into(),
            "LIMIT".into(),
            format!("{}", r.below(5)),
            int(r),
        ],
        21 => vec![
            "ZREVRANGEBYSCORE".into(),
            z,
            random_score(r),
            random_score(r),
        ],
        22 => vec!["ZRANK".into(), z, random_member(r)],
        23 => vec![
            "ZINCRBY".into(),
            z,
            format!("{}", r.below(5)),
            random_member(r),
        ],
        24 => vec![
            r.pick(&["ZPOPMIN", "ZPOPMAX"]).into(),
            z,
            format!("{}", r.below(4)),
        ],
        25 => vec!["ZREMRANGEBYRANK".into(), z, int(r), int(r)],
        26 => vec!["ZCOUNT".into(), z, random_score(r), random_score(r)],
        27 => vec![
            r.pick(&["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"]).into(),
            r.pick(&zkeys).into(),
            "2".into(),
            "z1".into(),
            "z2".into(),
        ],
        28 => vec!["ZMSCORE".into(), z, random_member(r), random_member(r)],
        _ => vec![
            "ZREMRANGEBYSCORE".into(),
            z,
            random_score(r),
            random_score(r),
        ],
    };
    if v[0] == "ZDIFFSTORE" && r.below(2) == 0 {
        v.truncate(5);
    }
    v
}

fn random_sequences(servers: &Servers) {
    for (proto, seed) in [(2u8, 0x5eed_1234u64), (3, 0xfeed_beef)] {
        let mut pair = Pair::connect(servers, proto);
        let mut r = Rng(seed);
        for i in 0..3000 {
            let cmd = random_command(&mut r);
            let argv: Vec<Vec<u8>> = cmd.iter().map(|s| s.as_bytes().to_vec()).collect();
            let step = format!("RESP{proto} seed {seed:#x} step {i}");
            pair.check(&argv, &step);
            // The whole data set after every step: a divergence shows where it starts.
            for k in ["l1", "l2"] {
                pair.check(
                    &words(&format!("LRANGE {k} 0 -1")),
                    &format!("after {step}"),
                );
            }
            for k in ["z1", "z2"] {
                pair.check(
                    &words(&format!("ZRANGE {k} 0 -1 WITHSCORES")),
                    &format!("after {step}"),
                );
            }
            if i % 500 == 499 {
                for k in ["l1", "l2", "z1", "z2"] {
                    pair.check(&words(&format!("OBJECT ENCODING {k}")), "encoding");
                }
            }
        }
    }
}

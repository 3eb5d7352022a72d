#!/usr/bin/env bash
# Captures the RDB/DUMP test vectors of crates/rdb from the real servers: DUMP payloads of every
# encoding from redis-server 7.0 and valkey-server 9.1, SAVE files (several databases, expiries,
# a function library, LFU and LRU opcodes, a cluster-mode Valkey node), and the expected values
# of the old-encoding files of Redis 7.0.15's test suite as the real servers load them.
#
#   /work/tools/nsrun <namespace> scripts/capture-rdb-vectors.sh [OUT_DIR]
#
# Run it inside a network namespace (the servers listen on 127.0.0.1:23840-23843). OUT_DIR
# defaults to crates/rdb/tests/vectors. Needs redis-server 7.0.x, valkey-server 9.1.x, redis-py.
# The old-encoding files (tests/assets/*.rdb of Redis 7.0.15, BSD-3-Clause) must already be in
# OUT_DIR/legacy/; this script only records what the servers read from them.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-crates/rdb/tests/vectors}"
out="$(cd "$out" && pwd)"
. scripts/real-servers.sh

redis-server --version | grep -q 'v=7\.0\.' || { echo "need redis-server 7.0" >&2; exit 1; }
valkey-server --version | grep -q 'v=9\.1\.' || { echo "need valkey-server 9.1" >&2; exit 1; }

start_server redis redis-server 23840 --enable-protected-configs yes --enable-debug-command yes
start_server valkey valkey-server 23841
start_server cluster valkey-server 23842 --cluster-enabled yes --cluster-config-file "$work/cluster/nodes.conf"

mkdir -p "$out/dump/redis-7.0" "$out/dump/valkey-9.1" "$out/files" "$out/legacy"
WORK="$work" OUT="$out" python3 - <<'PY'
import json, os, shutil, struct, time
import redis

OUT = os.environ["OUT"]; WORK = os.environ["WORK"]
servers = {"redis-7.0": 23840, "valkey-9.1": 23841}
conns = {n: redis.Redis(port=p) for n, p in servers.items()}
FAR = 4102444800000  # 2100-01-01T00:00:00Z in ms: expiries that never pass while tests run

def lat(b):  # bytes -> JSON string (Latin-1: one char per byte)
    return b.decode("latin-1")

# key -> (kind, value). Values are exactly what is written.
data = {}
def S(k, v): data[k] = ("string", v)
S("str_small", b"hello")
S("str_empty", b"")
S("str_int8", b"100")
S("str_int16", b"-1000")
S("str_int32", b"12345678")
S("str_int_big", b"2147483648")            # beyond 32 bits: stored as text
S("str_int_max", b"9223372036854775807")
S("str_not_canonical_int", b"007")
S("str_lzf", b"a" * 100)
S("str_lzf_text", b"the quick brown fox jumps over the lazy dog; " * 40)
S("str_incompressible", bytes((i * 167 + 13) % 256 for i in range(40)))
S("str_binary", bytes(range(256)))
S("str_large", b"".join(b"line %06d of a long value\n" % i for i in range(2000)))
data["list_small"] = ("list", [b"a", b"b", b"c"])
data["list_ints"] = ("list", [b"1", b"-2", b"300", b"70000", b"-9000000000", b"x"])
data["list_nodes"] = ("list", [b"element-%05d-padding" % i for i in range(2000)])
data["list_big_element"] = ("list", [b"head", b"B" * 10000, b"tail"])
data["set_intset"] = ("set", [b"1", b"2", b"3"])
data["set_intset_wide"] = ("set", [b"-9000000000", b"1", b"9000000000"])
data["set_intset_large"] = ("set", [b"%d" % (i * 7) for i in range(500)])
data["set_small_strings"] = ("set", [b"apple", b"banana", b"cherry"])
data["set_mixed"] = ("set", [b"1", b"two", b"3"])
data["set_large"] = ("set", [b"member:%04d" % i for i in range(300)])
data["set_long_member"] = ("set", [b"short", b"L" * 100])
data["zset_small"] = ("zset", [(b"a", 1.5), (b"b", 2.0), (b"c", -3.25), (b"d", 0.1),
                               (b"e", 1e21), (b"f", 1.5e-7), (b"g", 123456789.0)])
data["zset_inf"] = ("zset", [(b"lo", float("-inf")), (b"hi", float("inf")), (b"mid", 0.0)])
data["zset_large"] = ("zset", [(b"m%04d" % i, i * 0.5) for i in range(200)])
data["zset_long_member"] = ("zset", [(b"x", 1.0), (b"Y" * 100, 2.0)])
data["hash_small"] = ("hash", [(b"f", b"v"), (b"n", b"123"), (b"neg", b"-5")])
data["hash_large"] = ("hash", [(b"field:%04d" % i, b"value:%d" % i) for i in range(600)])
data["hash_long_value"] = ("hash", [(b"a", b"1"), (b"big", b"V" * 100)])

def write(c, k, kind, v):
    if kind == "string": c.set(k, v)
    elif kind == "list": c.rpush(k, *v)
    elif kind == "set": c.sadd(k, *v)
    elif kind == "zset": c.zadd(k, {m: s for m, s in v})
    elif kind == "hash": c.hset(k, mapping=dict(v))

def to_json(kind, v):
    if kind == "string": return lat(v)
    if kind == "list": return [lat(x) for x in v]
    if kind == "set": return sorted(lat(x) for x in v)
    if kind == "zset":
        return [[lat(m), s if s not in (float("inf"), float("-inf")) else ("inf" if s > 0 else "-inf")]
                for m, s in sorted(v, key=lambda e: (e[1], e[0]))]
    if kind == "hash": return {lat(f): lat(x) for f, x in v}
    if kind == "hash_ttl": return {lat(f): [lat(x), e] for f, x, e in v}

dumps = []
for c in conns.values():
    c.flushall()
for k, (kind, v) in data.items():
    entry = {"key": k, "kind": kind, "value": to_json(kind, v), "servers": {}}
    for name, c in conns.items():
        write(c, k, kind, v)
        payload = c.dump(k)
        path = f"dump/{name}/{k}.bin"
        open(os.path.join(OUT, path), "wb").write(payload)
        entry["servers"][name] = {"file": path, "rdb_type": payload[0],
                                  "version": struct.unpack("<H", payload[-10:-8])[0],
                                  "encoding": c.object("encoding", k).decode()}
    dumps.append(entry)

# Valkey 9 only: a hash with per-field expiry (RDB_TYPE_HASH_2), and a stream (unsupported).
v = conns["valkey-9.1"]
v.hset("hash_field_ttl", mapping={"keep": "1"})
v.execute_command("HSETEX", "hash_field_ttl", "PXAT", FAR, "FIELDS", 1, "gone", "2")
p = v.dump("hash_field_ttl")
open(os.path.join(OUT, "dump/valkey-9.1/hash_field_ttl.bin"), "wb").write(p)
dumps.append({"key": "hash_field_ttl", "kind": "hash_ttl",
              "value": {"keep": ["1", None], "gone": ["2", FAR]},
              "servers": {"valkey-9.1": {"file": "dump/valkey-9.1/hash_field_ttl.bin", "rdb_type": p[0],
                                          "version": struct.unpack("<H", p[-10:-8])[0],
                                          "encoding": v.object("encoding", "hash_field_ttl").decode()}}})
unsupported = []
for name, c in conns.items():
    c.xadd("stream", {"f": "v"}, id="1-1")
    p = c.dump("stream")
    path = f"dump/{name}/stream.bin"
    open(os.path.join(OUT, path), "wb").write(p)
    unsupported.append({"file": path, "rdb_type": p[0], "type": "stream"})

# Whole files.
LIB = "#!lua name=vectorlib\nredis.register_function('vecfn', function(keys, args) return 1 end)"
files = []
def save_file(name, c, dirname, fname):
    c.save()
    shutil.copy(os.path.join(WORK, dirname, "dump.rdb"), os.path.join(OUT, "files", fname))

for name, c in conns.items():
    c.flushall()
    c.function_flush()
    c.function_load(LIB)
    entries = []
    for db in (0, 3, 15):
        cc = redis.Redis(port=servers[name], db=db)
        cc.set(f"db{db}:plain", f"value in {db}")
        cc.set(f"db{db}:expiring", "soon", pxat=FAR)
        cc.rpush(f"db{db}:list", "x", "y")
        cc.hset(f"db{db}:hash", mapping={"a": "1"})
        cc.pexpireat(f"db{db}:hash", FAR + db)
        entries += [{"db": db, "key": f"db{db}:plain", "kind": "string", "value": f"value in {db}", "expire_ms": None},
                    {"db": db, "key": f"db{db}:expiring", "kind": "string", "value": "soon", "expire_ms": FAR},
                    {"db": db, "key": f"db{db}:list", "kind": "list", "value": ["x", "y"], "expire_ms": None},
                    {"db": db, "key": f"db{db}:hash", "kind": "hash", "value": {"a": "1"}, "expire_ms": FAR + db}]
    fname = f"{name}-multidb.rdb"
    save_file(name, c, name.split("-")[0], fname)
    files.append({"file": f"files/{fname}", "server": name, "entries": entries, "functions": [LIB]})

    # LFU counters and LRU idle times.
    c.function_flush()
    c.flushall()
    c.config_set("maxmemory-policy", "allkeys-lfu")
    c.set("lfu:a", "1")
    freq = c.object("freq", "lfu:a")
    fname = f"{name}-lfu.rdb"
    save_file(name, c, name.split("-")[0], fname)
    files.append({"file": f"files/{fname}", "server": name, "functions": [],
                  "entries": [{"db": 0, "key": "lfu:a", "kind": "string", "value": "1", "expire_ms": None, "freq": freq}]})
    c.flushall()
    c.config_set("maxmemory-policy", "allkeys-lru")
    c.set("lru:a", "1")
    fname = f"{name}-lru.rdb"
    save_file(name, c, name.split("-")[0], fname)
    files.append({"file": f"files/{fname}", "server": name, "functions": [],
                  "entries": [{"db": 0, "key": "lru:a", "kind": "string", "value": "1", "expire_ms": None, "idle": True}]})
    c.config_set("maxmemory-policy", "noeviction")
    c.flushall()

# A cluster-mode Valkey node: slot-info aux fields before each slot's keys.
cl = redis.Redis(port=23842)
cl.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
for _ in range(100):
    if b"cluster_state:ok" in cl.execute_command("CLUSTER", "INFO"): break
    time.sleep(0.1)
entries = []
for tag in ("a", "b", "c"):
    for i in range(3):
        k = f"{{{tag}}}:k{i}"
        cl.set(k, f"v{i}")
        if i == 0: cl.pexpireat(k, FAR)
        entries.append({"db": 0, "key": k, "kind": "string", "value": f"v{i}", "expire_ms": FAR if i == 0 else None,
                        "slot": cl.execute_command("CLUSTER", "KEYSLOT", k)})
cl.save()
shutil.copy(os.path.join(WORK, "cluster", "dump.rdb"), os.path.join(OUT, "files", "valkey-9.1-cluster.rdb"))
files.append({"file": "files/valkey-9.1-cluster.rdb", "server": "valkey-9.1", "entries": entries, "functions": [],
              "slot_info": True})

# Old-encoding files: what redis-server 7.0 reads from them (loaded with DEBUG RELOAD NOSAVE).
legacy = []
r = conns["redis-7.0"]
for fname in sorted(os.listdir(os.path.join(OUT, "legacy"))):
    if not fname.endswith(".rdb"): continue
    shutil.copy(os.path.join(OUT, "legacy", fname), os.path.join(WORK, "redis", "legacy.rdb"))
    r.config_set("dbfilename", "legacy.rdb")
    r.execute_command("DEBUG", "RELOAD", "NOSAVE")
    entries = []
    for k in sorted(r.keys("*")):
        t = r.type(k).decode()
        if t == "string": val = lat(r.get(k))
        elif t == "list": val = [lat(x) for x in r.lrange(k, 0, -1)]
        elif t == "set": val = sorted(lat(x) for x in r.smembers(k))
        elif t == "zset": val = [[lat(m), s] for m, s in r.zrange(k, 0, -1, withscores=True)]
        elif t == "hash": val = {lat(f): lat(x) for f, x in r.hgetall(k).items()}
        else: raise SystemExit(f"unexpected type {t} in {fname}")
        pt = r.pttl(k)
        entries.append({"key": lat(k), "kind": {"zset": "zset"}.get(t, t), "value": val, "has_expire": pt >= 0})
    legacy.append({"file": f"legacy/{fname}", "server": "redis-7.0", "entries": entries})
r.config_set("dbfilename", "dump.rdb")

json.dump({"dumps": dumps, "unsupported": unsupported, "files": files, "legacy": legacy},
          open(os.path.join(OUT, "vectors.json"), "w"), separators=(",", ":"), sort_keys=True)
print("captured", len(dumps), "dump vectors,", len(files), "files,", len(legacy), "legacy files")
PY

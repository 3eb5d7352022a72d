#!/usr/bin/env python3
"""Capture a real atomic slot migration (CLUSTER MIGRATESLOTS) between valkey-server 9.1 nodes.

Run inside a network namespace (it listens on 127.0.0.1 ports 27001-27213 and 37001-37203):

    /work/tools/nsrun ns-asm python3 crates/dataplane/tests/vectors/asm/capture.py

Three valkey-server nodes in cluster mode (`cluster-databases 4`) form a cluster with
`redis-cli --cluster create`. Each node announces a client port on which a logging TCP proxy
listens (`cluster-announce-port`), so the source's data connection to the target (it dials the
port the target announces) runs through the proxy. Scenarios (`SCENARIOS`): `plain` (db 0,
no AUTH), `auth` (db 0; `requirepass` + `masterauth`, so the source sends AUTH first), `multidb`
(dbs 0 and 2). In each:

  1. keys of every type go into two slots of node A (hash tags {t7}: slot 553, {t2}: 4748),
     some with TTLs: strings (raw, integer, long, big, binary), hashes (small, big, with field
     expiry), lists (small, big), sets (intset, listpack, big), sorted sets (small with
     special scores, big), a stream;
  2. `CLUSTER MIGRATESLOTS SLOTSRANGE 553 555 4748 4748` (two empty slots after 553);
     `DEBUG SLOTMIGRATION PREVENT-PAUSE 1` and `rdb-key-save-delay` slow the source so that
     writes land during the snapshot (held until it ends, then flushed) and after it
     (streamed): non-idempotent ones (INCRBY, LPUSH, SADD, HINCRBY, ZINCRBY, APPEND), an
     EXPIRE, DELs, a MULTI/EXEC, a key that expires while streaming, a write to a slot not
     migrating;
  3. the pause is allowed (`PREVENT-PAUSE 0`); the target takes the slots.

Output in `<scenario>/`:
  * `conn<N>.s2t.bin` / `conn<N>.t2s.bin`: the data connection, source -> target and back
    (only the migration connection is kept; redis-cli's own connections through the proxy are
    dropped);
  * `facts.json`: node ids, the ranges, CLUSTER GETSLOTMIGRATIONS of both sides at the end
    (`source_job`, `target_job`), the keys of the migrated slots as the source had them at the
    pause (`at_pause`) and as the target has them after the hand-off (`after`): type, value
    (hex), absolute expiry in ms, per db; and the server version.
"""
import os, shutil, subprocess, sys, time

import redis

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from capturelib import Proxy, stop, wait_for, wait_port, write_facts  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
BASE = 27001
PASSWORD = "asm-secret"


def value_of(r, key):
    """The key's type, value and absolute expiry (Unix ms, -1: none) as a client reads them."""
    t = r.type(key).decode()
    if t == "string":
        v = r.get(key).hex()
    elif t == "list":
        v = [x.hex() for x in r.lrange(key, 0, -1)]
    elif t == "set":
        v = sorted(x.hex() for x in r.smembers(key))
    elif t == "zset":
        v = sorted([m.hex(), repr(s)] for m, s in r.zrange(key, 0, -1, withscores=True))
    elif t == "hash":
        h = r.hgetall(key)
        v = sorted([f.hex(), x.hex()] for f, x in h.items())
        ats = r.execute_command("HPEXPIRETIME", key, "FIELDS", len(h), *h.keys())
        fe = sorted([f.hex(), int(x)] for f, x in zip(h.keys(), ats) if int(x) >= 0)
        if fe:
            v = {"fields": v, "field_expire_at_ms": fe}
    elif t == "stream":
        v = [[i.decode(), sorted([f.hex(), x.hex()] for f, x in d.items())] for i, d in r.xrange(key)]
    else:
        v = None
    return {"type": t, "value": v, "expire_at_ms": r.pexpiretime(key)}


def keyspace(port, password, tags, dbs):
    out = {}
    for db in dbs:
        r = redis.Redis(port=port, db=db, password=password)
        keys = {}
        for tag in tags:
            for k in r.execute_command("CLUSTER", "GETKEYSINSLOT", slot_of(r, tag), 100000):
                keys[k.hex()] = value_of(r, k)
        out[str(db)] = dict(sorted(keys.items()))
    return out


def slot_of(r, key):
    return int(r.execute_command("CLUSTER", "KEYSLOT", key))


def fill(c, tag):
    """Keys of every type in the slot of `tag` (c: a db-bound client of the owner)."""
    k = lambda n: f"{{{tag}}}{n}"
    c.set(k("str"), "hello")
    c.set(k("int"), "12345")
    c.set(k("neg"), "-42")
    c.set(k("long"), "a" * 200)
    c.set(k("big"), bytes(range(256)) * 40)
    c.set(k("ttl"), "expires", px=3_600_000)
    c.set(k("bin"), b"\x00\r\n*1\r\n$3\r\n\xff")
    c.hset(k("hash"), mapping={"f1": "v1", "f2": "2", "f3": ""})
    c.hset(k("bighash"), mapping={f"field{i}": f"value{i}" for i in range(600)})
    c.hset(k("hexp"), mapping={"keep": "1", "goes": "2"})
    c.execute_command("HPEXPIRE", k("hexp"), 7_200_000, "FIELDS", 1, "goes")
    # Several expiring fields (two share a TTL), plain ones, a key TTL, and more than 64
    # fields.
    c.hset(k("hexp2"), mapping={f"p{i}": str(i) for i in range(70)})
    c.hset(k("hexp2"), mapping={"a": "x", "b": "y", "c": "z"})
    c.execute_command("HPEXPIREAT", k("hexp2"), 1_900_000_000_000, "FIELDS", 2, "a", "b")
    c.execute_command("HPEXPIREAT", k("hexp2"), 1_900_000_000_123, "FIELDS", 1, "c")
    c.pexpireat(k("hexp2"), 1_950_000_000_000)
    # Only expiring fields.
    c.hset(k("hexp3"), mapping={"only": "1"})
    c.execute_command("HPEXPIREAT", k("hexp3"), 1_900_000_000_000, "FIELDS", 1, "only")
    c.rpush(k("list"), "a", "b", "3", "")
    c.rpush(k("biglist"), *[f"e{i}" for i in range(150)])
    c.rpush(k("listttl"), "x")
    c.pexpire(k("listttl"), 5_000_000)
    c.sadd(k("intset"), 1, 2, 3, -7, 1000000)
    c.sadd(k("lpset"), "a", "b", "c")
    c.sadd(k("bigset"), *[f"m{i}" for i in range(200)])
    c.zadd(k("zset"), {"one": 1, "half": 0.5, "third": 1 / 3, "big": 1e300, "ninf": float("-inf"), "pinf": float("inf"), "negz": -0.0, "neg": -2.25})
    c.zadd(k("bigzset"), {f"z{i}": i * 1.5 for i in range(150)})
    c.xadd(k("stream"), {"f": "v"}, id="1-1")
    c.xadd(k("stream"), {"a": "1", "b": "2"}, id="2-0")


def during_snapshot(c, tag):
    """Writes while the snapshot runs: held until it ends, then flushed."""
    k = lambda n: f"{{{tag}}}{n}"
    c.incr(k("int"))
    c.lpush(k("list"), "pushed-during-snapshot")
    c.sadd(k("intset"), 99)
    c.hincrby(k("hash"), "f2", 10)
    c.zincrby(k("zset"), 2, "one")
    c.append(k("str"), "-appended")
    c.set(k("new-during"), "n")
    c.delete(k("neg"))
    # Expires on the source while the migration streams: its deletion is streamed.
    c.set(k("short"), "x", px=1500)


def during_stream(c, tag):
    """Writes after the snapshot: streamed as they happen."""
    k = lambda n: f"{{{tag}}}{n}"
    c.incr(k("int"))
    c.incrby(k("int"), 5)
    c.rpush(k("list"), "streamed")
    c.srem(k("intset"), 2)
    c.expire(k("str"), 9000)
    c.set(k("new-after"), "s", px=8_000_000)
    p = c.pipeline(transaction=True)
    p.incr(k("tx"))
    p.set(k("tx2"), "in-multi")
    p.execute()
    c.hset(k("hash"), "f4", "added")
    c.delete(k("lpset"))
    c.zadd(k("zset"), {"added": 7})


SCENARIOS = {
    # name: (AUTH, databases filled)
    "plain": (False, (0,)),
    "auth": (True, (0,)),
    "multidb": (False, (0, 2)),
}


def run(scenario, base):
    auth, dbs = SCENARIOS[scenario]
    outdir = os.path.join(HERE, scenario)
    shutil.rmtree(outdir, ignore_errors=True)
    os.makedirs(outdir)
    work = f"/tmp/asm-capture-{scenario}"
    shutil.rmtree(work, ignore_errors=True)
    ports = [base + i for i in range(3)]
    announced = [p + 10 for p in ports]
    procs, proxies = [], []
    pw = PASSWORD if auth else None
    try:
        for i, (p, a) in enumerate(zip(ports, announced)):
            d = f"{work}/n{i}"
            os.makedirs(d)
            args = ["valkey-server", "--port", str(p), "--bind", "127.0.0.1", "--dir", d,
                    "--cluster-enabled", "yes", "--cluster-databases", "4",
                    "--cluster-announce-port", str(a),
                    "--cluster-announce-bus-port", str(p + 10000),
                    "--cluster-node-timeout", "5000",
                    "--save", "", "--appendonly", "no", "--enable-debug-command", "yes"]
            if auth:
                args += ["--requirepass", PASSWORD, "--masterauth", PASSWORD]
            procs.append(subprocess.Popen(args, stdout=open(d + "/log", "w"),
                                          stderr=subprocess.STDOUT))
        for p in ports:
            wait_port(p)
        for p, a in zip(ports, announced):
            proxies.append(Proxy(a, p))
        cmd = ["redis-cli", "--cluster", "create"] + [f"127.0.0.1:{p}" for p in ports] + ["--cluster-yes"]
        if auth:
            cmd[1:1] = ["-a", PASSWORD, "--no-auth-warning"]
        subprocess.run(cmd, check=True, capture_output=True)
        a, b = (redis.Redis(port=p, password=pw) for p in ports[:2])
        wait_for(lambda: all(redis.Redis(port=p, password=pw).execute_command("CLUSTER", "INFO")
                             .decode().startswith("cluster_state:ok") for p in ports), what="cluster ok")
        a_id = a.execute_command("CLUSTER", "MYID").decode()
        b_id = b.execute_command("CLUSTER", "MYID").decode()
        tags = ["t7", "t2"]
        slots = [slot_of(a, t) for t in tags]
        assert all(s <= 5460 for s in slots), slots
        for db in dbs:
            c = redis.Redis(port=ports[0], db=db, password=pw)
            for t in tags:
                fill(c, t)
        # A key in an unmigrated slot of A, to check it never crosses.
        other = redis.Redis(port=ports[0], password=pw)
        other.set("{t3}stays", "home")
        assert slot_of(a, "t3") not in slots
        a.execute_command("DEBUG", "SLOTMIGRATION", "PREVENT-PAUSE", "1")
        # ~50 keys per slot and db: 20 ms each makes a snapshot of several seconds.
        a.config_set("rdb-key-save-delay", 20000)
        facts = {"scenario": scenario, "server_version": a.info("server")["redis_version"],
                 "source": a_id, "target": b_id, "tags": tags, "slots": slots}
        # Two ranges, given out of order; the first holds two empty slots after {t7}'s.
        ranges = [[slots[0], slots[0] + 2], [slots[1], slots[1]]]
        facts["ranges"] = ranges
        a.execute_command("CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", *ranges[0], *ranges[1],
                          "NODE", b_id)
        state = lambda r: [j if isinstance(j, dict) else dict(zip(*[iter(j)] * 2))
                           for j in r.execute_command("CLUSTER", "GETSLOTMIGRATIONS")]
        wait_for(lambda: state(a) and state(a)[0][b"state"] == b"snapshotting", what="snapshotting")
        time.sleep(0.3)
        for db in dbs:
            c = redis.Redis(port=ports[0], db=db, password=pw)
            for t in tags:
                during_snapshot(c, t)
        other.set("{t3}stays", "home-during")
        wait_for(lambda: state(a)[0][b"state"] in (b"replicating", b"waiting-to-pause"), t=120,
                 what="streaming")
        a.config_set("rdb-key-save-delay", 0)
        for db in dbs:
            c = redis.Redis(port=ports[0], db=db, password=pw)
            for t in tags:
                during_stream(c, t)
        time.sleep(1.5)  # at least one heartbeat ACK each way while streaming
        facts["at_pause"] = keyspace(ports[0], pw, tags, dbs)
        a.execute_command("DEBUG", "SLOTMIGRATION", "PREVENT-PAUSE", "0")
        wait_for(lambda: state(a)[0][b"state"] == b"success" and state(b)[0][b"state"] == b"success",
                 what="success")
        time.sleep(0.5)
        facts["source_job"] = {k.decode(): v.decode() if isinstance(v, bytes) else v
                               for k, v in state(a)[0].items()}
        facts["target_job"] = {k.decode(): v.decode() if isinstance(v, bytes) else v
                               for k, v in state(b)[0].items()}
        facts["after"] = keyspace(ports[1], pw, tags, dbs)
        # The migration connection: the one whose first bytes (after AUTH) are SYNCSLOTS.
        n = 0
        for proxy in proxies:
            n += proxy.save(outdir, "conn", keep=lambda s2t: b"SYNCSLOTS" in s2t[:400]
                            and b"ESTABLISH" in s2t[:400])
        facts["connections"] = n
        write_facts(outdir, facts)
        print(f"{scenario}: {n} migration connection(s) captured in {outdir}")
    finally:
        stop(procs, proxies)


if __name__ == "__main__":
    for s in sys.argv[1:] or list(SCENARIOS):
        run(s, BASE + 100 * list(SCENARIOS).index(s))

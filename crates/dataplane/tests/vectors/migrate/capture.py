#!/usr/bin/env python3
"""Capture legacy MIGRATE traffic and RESTORE replies of real servers.

Run inside a network namespace (it listens on 127.0.0.1 ports 27401-27499 and 37401-37499):

    /work/tools/nsrun ns-asm python3 crates/dataplane/tests/vectors/migrate/capture.py

1. `standalone-<flavor>/` (valkey-server 9.1, redis-server 7.0): a source and a target of
   the same flavor, the target behind a logging TCP proxy (and a second target with
   `requirepass` and an ACL user, behind another one). The source runs the MIGRATE commands
   of `MIGRATES` (single key, KEYS, COPY, REPLACE, another database, AUTH, AUTH2, a key the
   target already has, only missing keys). Kept: each proxied connection (`conn<N>.s2t.bin`:
   what MIGRATE sent, `conn<N>.t2s.bin`: the target's replies) and `facts.json` (each MIGRATE
   with its reply, the source's keys before, the target's keys after, the server version).
2. `restore-<flavor>.json`: RESTORE / RESTORE-ASKING argument and payload checks against a
   real server, each request's exact reply bytes (BUSYKEY, bad payload, bad TTL, IDLETIME,
   FREQ, ABSTTL, syntax errors, arity).
3. `reshard-valkey-9.1/`: `redis-cli --cluster reshard` of two slots holding 25 keys of every
   type (some with TTLs) from one valkey-server 9.1 cluster node to another, every node
   behind a proxy on its announced port: `node<I>-conn<N>.s2t.bin` (what was sent to node I on
   that connection) and `.t2s.bin` (its replies), for redis-cli's connections (to the
   source: `CLUSTER SETSLOT`, `CLUSTER GETKEYSINSLOT` and the `MIGRATE ... KEYS` it issues)
   and the source's MIGRATE connection to the target (the `RESTORE-ASKING` pipelines), and
   `facts.json`.
"""
import json, os, shutil, socket, subprocess, sys, time

import redis

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from capturelib import Proxy, stop, wait_port, write_facts  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FLAVORS = [("valkey-9.1", "valkey-server"), ("redis-7.0", "redis-server")]
PASSWORD = "mig-secret"


def start(binary, port, d, extra=()):
    os.makedirs(d, exist_ok=True)
    p = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", d,
                          "--save", "", "--appendonly", "no"] + list(extra),
                         stdout=open(d + "/log", "w"), stderr=subprocess.STDOUT)
    wait_port(port)
    return p


def value_of(r, key):
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
        v = sorted([f.hex(), x.hex()] for f, x in r.hgetall(key).items())
    else:
        v = None
    return {"type": t, "value": v, "expire_at_ms": r.pexpiretime(key)}


def keys_of(r):
    return {k.hex(): value_of(r, k) for k in sorted(r.keys("*"))}


def fill(r, prefix=""):
    r.set(prefix + "s", "hello")
    r.set(prefix + "n", "123")
    r.set(prefix + "ttl", "v", px=3_600_000)
    r.set(prefix + "abs", "w")
    r.pexpireat(prefix + "abs", 1_900_000_000_000)
    r.rpush(prefix + "l", "a", "b", "c")
    r.hset(prefix + "h", mapping={"f": "v", "g": "1"})
    r.sadd(prefix + "set", "x", "y")
    r.sadd(prefix + "iset", 1, 2, 3)
    r.zadd(prefix + "z", {"m": 1.5, "n": 2})
    r.set(prefix + "big", "x" * 10_000)


# (name, args after "MIGRATE host port", target index 0 plain / 1 with password, db)
MIGRATES = [
    ("single", ["s", "0", "5000"], 0),
    ("single-ttl", ["ttl", "0", "5000"], 0),
    ("keys", ["", "0", "5000", "KEYS", "n", "l", "h", "missing", "abs"], 0),
    ("copy", ["", "0", "5000", "COPY", "KEYS", "set", "z"], 0),
    ("busy", ["", "0", "5000", "COPY", "KEYS", "set", "iset"], 0),
    ("replace", ["", "0", "5000", "COPY", "REPLACE", "KEYS", "set", "iset"], 0),
    ("db3", ["", "3", "5000", "KEYS", "big"], 0),
    ("nokey", ["", "0", "5000", "KEYS", "missing1", "missing2"], 0),
    ("auth", ["", "0", "5000", "AUTH", PASSWORD, "KEYS", "d1:s", "d1:l"], 1),
    ("auth2", ["", "0", "5000", "AUTH2", "miguser", PASSWORD, "KEYS", "d1:h", "d1:ttl"], 1),
    ("auth-wrong", ["", "0", "5000", "AUTH", "nope", "KEYS", "d1:n"], 1),
]


def standalone(flavor, binary, base):
    outdir = os.path.join(HERE, f"standalone-{flavor}")
    shutil.rmtree(outdir, ignore_errors=True)
    os.makedirs(outdir)
    work = f"/tmp/mig-capture-{flavor}"
    shutil.rmtree(work, ignore_errors=True)
    procs, proxies = [], []
    try:
        procs.append(start(binary, base, work + "/src"))
        procs.append(start(binary, base + 1, work + "/dst"))
        procs.append(start(binary, base + 2, work + "/dst-auth", ["--requirepass", PASSWORD]))
        proxies = [Proxy(base + 11, base + 1), Proxy(base + 12, base + 2)]
        src = redis.Redis(port=base)
        fill(src)
        fill(src, "d1:")
        tgt = redis.Redis(port=base + 1)
        tgta = redis.Redis(port=base + 2, password=PASSWORD)
        tgta.execute_command("ACL", "SETUSER", "miguser", "on", f">{PASSWORD}", "~*", "+@all")
        tgt.sadd("iset", 9)  # the "busy" MIGRATE meets an existing key
        facts = {"flavor": flavor, "server_version": src.info("server")["redis_version"],
                 "source_before": keys_of(src), "migrates": []}
        for name, args, t in MIGRATES:
            port = base + 11 + t
            try:
                reply = src.execute_command("MIGRATE", "127.0.0.1", port, *args)
                reply = reply.decode() if isinstance(reply, bytes) else reply
                err = None
            except redis.ResponseError as e:
                reply, err = None, str(e)
            facts["migrates"].append({"name": name, "target": t, "args": ["127.0.0.1", str(port)] + args,
                                      "reply": reply, "error": err})
            time.sleep(0.05)
        facts["source_after"] = keys_of(src)
        facts["target_after"] = {"0": keys_of(tgt), "3": keys_of(redis.Redis(port=base + 1, db=3))}
        facts["auth_target_after"] = keys_of(tgta)
        time.sleep(0.3)
        n = proxies[0].save(outdir, "conn")
        m = proxies[1].save(outdir, "auth")
        facts["connections"] = {"plain": n, "auth": m}
        write_facts(outdir, facts)
        print(f"standalone {flavor}: {n}+{m} connections")
    finally:
        stop(procs, proxies)


def crc64(data):
    """CRC-64/Jones as Redis computes it (reflected, poly 0xad93d23594c935a9)."""
    poly = 0x95AC9329AC4BC9B5  # the reflected polynomial
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ poly if crc & 1 else crc >> 1
    return crc


def with_footer(body, version):
    b = body + version.to_bytes(2, "little")
    return b + crc64(b).to_bytes(8, "little")


def raw_replies(port, cmds):
    """Sends each command on one connection, returns the exact bytes of each reply."""
    s = socket.create_connection(("127.0.0.1", port))
    out = []
    for argv in cmds:
        b = b"*%d\r\n" % len(argv) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in argv)
        s.sendall(b)
        time.sleep(0.05)
        s.settimeout(2)
        out.append(s.recv(65536))
    s.close()
    return out


def restore_checks(flavor, binary, base):
    work = f"/tmp/mig-restore-{flavor}"
    shutil.rmtree(work, ignore_errors=True)
    p = start(binary, base, work)
    try:
        r = redis.Redis(port=base)
        r.set("src", "payload-source")
        r.hset("hsrc", "f", "v")
        good = r.dump("src")
        hgood = r.dump("hsrc")
        r.set("exists", "1")
        bad_crc = good[:-1] + bytes([good[-1] ^ 1])
        bad_ver = good[:-10] + b"\xff\x00" + good[-8:]
        E = lambda *a: [x if isinstance(x, bytes) else str(x).encode() for x in a]
        cases = [
            ("ok", E("RESTORE", "k1", 0, good)),
            ("busykey", E("RESTORE", "exists", 0, good)),
            ("replace", E("RESTORE", "exists", 0, good, "REPLACE")),
            ("ttl", E("RESTORE", "k2", 100000, good)),
            ("absttl-past", E("RESTORE", "k3", 1000, good, "ABSTTL")),
            ("absttl-future", E("RESTORE", "k4", 1_900_000_000_000, good, "ABSTTL")),
            ("negative-ttl", E("RESTORE", "k5", -1, good)),
            ("ttl-not-int", E("RESTORE", "k5", "x", good)),
            ("bad-crc", E("RESTORE", "k6", 0, bad_crc)),
            ("bad-version", E("RESTORE", "k6", 0, bad_ver)),
            ("short", E("RESTORE", "k6", 0, b"abc")),
            # A right footer over a string whose length runs past the end (the server reads
            # the object from the whole payload, footer included: 63 bytes are too many).
            ("bad-object", E("RESTORE", "k6", 0, with_footer(b"\x00\x3fab", 10))),
            # A string whose length reaches into the footer: read from the footer's bytes.
            ("object-into-footer", E("RESTORE", "k6a", 0, with_footer(b"\x00\x05ab", 10))),
            ("unknown-type", E("RESTORE", "k6b", 0, with_footer(b"\x30\x01a", 10))),
            ("trailing-bytes", E("RESTORE", "k6c", 0, with_footer(b"\x00\x01ab", 10))),
            ("busy-and-negative-ttl", E("RESTORE", "exists", -1, good)),
            ("version-10", E("RESTORE", "k13", 0, with_footer(b"\x00\x03abc", 10))),
            ("idletime", E("RESTORE", "k7", 0, good, "IDLETIME", 100)),
            ("idletime-negative", E("RESTORE", "k8", 0, good, "IDLETIME", -1)),
            ("idletime-not-int", E("RESTORE", "k8", 0, good, "IDLETIME", "x")),
            ("freq", E("RESTORE", "k9", 0, good, "FREQ", 100)),
            ("freq-256", E("RESTORE", "k10", 0, good, "FREQ", 256)),
            ("freq-negative", E("RESTORE", "k10", 0, good, "FREQ", -1)),
            ("idletime-and-freq", E("RESTORE", "k10", 0, good, "IDLETIME", 1, "FREQ", 1)),
            ("freq-and-idletime", E("RESTORE", "k10", 0, good, "FREQ", 1, "IDLETIME", 1)),
            ("idletime-missing-value", E("RESTORE", "k10", 0, good, "IDLETIME")),
            ("unknown-option", E("RESTORE", "k10", 0, good, "BOGUS")),
            ("arity", E("RESTORE", "k10", 0)),
            ("asking", E("RESTORE-ASKING", "k11", 0, hgood)),
            ("asking-busy", E("RESTORE-ASKING", "exists", 0, hgood)),
            ("replace-busy-bad-payload", E("RESTORE", "exists", 0, b"junk", "REPLACE")),
            ("busy-bad-payload", E("RESTORE", "exists", 0, b"junk")),
            ("options-any-case", E("RESTORE", "k12", 0, good, "replace", "absttl")),
        ]
        replies = raw_replies(base, [c for _, c in cases])
        facts = {"flavor": flavor, "server_version": r.info("server")["redis_version"],
                 "payload": good.hex(), "hash_payload": hgood.hex(),
                 "cases": [{"name": n, "argv": [a.hex() for a in c], "reply": rep.decode("latin1")}
                           for (n, c), rep in zip(cases, replies)],
                 "keys_after": keys_of(r)}
        with open(os.path.join(HERE, f"restore-{flavor}.json"), "w") as f:
            json.dump(facts, f, indent=1, sort_keys=True, default=str)
        print(f"restore {flavor}: {len(cases)} cases")
    finally:
        p.terminate()
        p.wait()


def crc16(d):
    crc = 0
    for b in d:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


def tag_for(slot):
    i = 0
    while True:
        t = f"r{i}"
        if crc16(t.encode()) % 16384 == slot:
            return t
        i += 1


def reshard(base):
    outdir = os.path.join(HERE, "reshard-valkey-9.1")
    shutil.rmtree(outdir, ignore_errors=True)
    os.makedirs(outdir)
    work = "/tmp/mig-reshard"
    shutil.rmtree(work, ignore_errors=True)
    ports = [base + i for i in range(3)]
    procs, proxies = [], []
    try:
        for i, p in enumerate(ports):
            procs.append(start("valkey-server", p, f"{work}/n{i}",
                               ["--cluster-enabled", "yes", "--cluster-announce-port", str(p + 10),
                                "--cluster-announce-bus-port", str(p + 10000)]))
        proxies = [Proxy(p + 10, p) for p in ports]
        subprocess.run(["redis-cli", "--cluster", "create"] + [f"127.0.0.1:{p}" for p in ports] +
                       ["--cluster-yes"], check=True, capture_output=True)
        a = redis.Redis(port=ports[0])
        b = redis.Redis(port=ports[1])
        end = time.time() + 20
        while time.time() < end and not all(
                redis.Redis(port=p).execute_command("CLUSTER", "INFO").decode().startswith("cluster_state:ok")
                for p in ports):
            time.sleep(0.1)
        a_id = a.execute_command("CLUSTER", "MYID").decode()
        b_id = b.execute_command("CLUSTER", "MYID").decode()
        # reshard moves A's lowest slots first: put 25 keys into slot 0 and a few into slot 1.
        t0, t1 = tag_for(0), tag_for(1)
        for i in range(20):
            a.set(f"{{{t0}}}k{i}", f"v{i}")
        fill(a, f"{{{t0}}}")
        a.set(f"{{{t1}}}only", "one", px=7_200_000)
        facts = {"source": a_id, "target": b_id, "tags": [t0, t1],
                 "server_version": a.info("server")["redis_version"]}
        facts["source_before"] = {str(s): {k.hex(): value_of(a, k) for k in
                                           a.execute_command("CLUSTER", "GETKEYSINSLOT", s, 1000)}
                                  for s in (0, 1)}
        for p in proxies:
            with p.lock:
                p.conns.clear()  # only what the reshard does
        out = subprocess.run(["redis-cli", "--cluster", "reshard", f"127.0.0.1:{ports[0] + 10}",
                              "--cluster-from", a_id, "--cluster-to", b_id,
                              "--cluster-slots", "2", "--cluster-yes"],
                             capture_output=True, text=True)
        facts["reshard_exit"] = out.returncode
        time.sleep(0.5)
        facts["target_after"] = {str(s): {k.hex(): value_of(b, k) for k in
                                          b.execute_command("CLUSTER", "GETKEYSINSLOT", s, 1000)}
                                 for s in (0, 1)}
        n = 0
        for i, p in enumerate(proxies):
            n += p.save(outdir, f"node{i}-conn")
        facts["connections"] = n
        write_facts(outdir, facts)
        print(f"reshard: {n} connections, exit {out.returncode}")
    finally:
        stop(procs, proxies)


if __name__ == "__main__":
    what = sys.argv[1:] or ["standalone", "restore", "reshard"]
    if "standalone" in what:
        for i, (flavor, binary) in enumerate(FLAVORS):
            standalone(flavor, binary, 27401 + 20 * i)
    if "restore" in what:
        for i, (flavor, binary) in enumerate(FLAVORS):
            restore_checks(flavor, binary, 27441 + i)
    if "reshard" in what:
        reshard(27461)

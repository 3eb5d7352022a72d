#!/usr/bin/env python3
"""Capture real replication traffic between a real primary and a real replica.

Run inside a network namespace (it listens on 127.0.0.1 ports 26400-26499):

    /work/tools/nsrun ns-dataplane python3 crates/dataplane/tests/vectors/capture.py

For each flavor (redis-server 7.0, valkey-server 9.1) and each full-sync framing (diskless
`$EOF:` and disk `$<len>`), it starts a primary and a replica whose REPLICAOF points at a
logging TCP proxy in front of the primary, then:
  1. waits for the full sync,
  2. writes through the primary (db 0 and db 3, MULTI/EXEC, an expiry),
  3. runs WAIT 1 1000 (the primary sends REPLCONF GETACK *),
  4. waits for a replication PING (repl-ping-replica-period 1),
  5. kills the replica link with CLIENT KILL TYPE replica (the replica reconnects and resyncs
     partially).
Every proxied connection is written to <flavor>-<framing>/conn<N>.<dir>.bin, with dir `r2p`
(what the replica sent) or `p2r` (what the primary sent), plus a facts.json with the
primary's and replica's INFO replication after each step and each server's version. The
primary's own RDB (SAVE) is kept as dump.rdb for tests that need a real RDB from that server.
"""
import os, shutil, subprocess, sys, time

import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from capturelib import Proxy, stop, wait_for, wait_port, write_facts  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FLAVORS = [("redis-7.0", "redis-server"), ("valkey-9.1", "valkey-server")]


def info(r):
    return r.info("replication")


def run(flavor, binary, diskless, base):
    framing = "diskless" if diskless else "disk"
    outdir = os.path.join(HERE, f"{flavor}-{framing}")
    shutil.rmtree(outdir, ignore_errors=True)
    os.makedirs(outdir)
    work = f"/tmp/dp-capture-{flavor}-{framing}"
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work + "/p")
    os.makedirs(work + "/r")
    pport, rport, xport = base, base + 1, base + 2
    common = ["--save", "", "--appendonly", "no", "--repl-ping-replica-period", "1",
              "--repl-diskless-sync", "yes" if diskless else "no",
              "--repl-diskless-sync-delay", "0", "--bind", "127.0.0.1"]
    prim = subprocess.Popen([binary, "--port", str(pport), "--dir", work + "/p"] + common,
                            stdout=open(work + "/p.log", "w"), stderr=subprocess.STDOUT)
    wait_port(pport)
    p = redis.Redis(port=pport)
    p.set("before-sync", "v0")
    p.hset("h", mapping={"a": "1", "b": "2"})
    proxy = Proxy(xport, pport)
    repl = subprocess.Popen([binary, "--port", str(rport), "--dir", work + "/r",
                             "--replicaof", "127.0.0.1", str(xport)] + common,
                            stdout=open(work + "/r.log", "w"), stderr=subprocess.STDOUT)
    facts = {"flavor": flavor, "framing": framing}
    try:
        wait_port(rport)
        r = redis.Redis(port=rport)
        wait_for(lambda: info(r).get("master_link_status") == "up")
        facts["server_version"] = p.info("server")["redis_version"]
        facts["after_full_sync"] = {"primary": info(p), "replica": info(r)}
        p.set("k1", "v1")
        p.select(3) if hasattr(p, "select") else None
        p3 = redis.Redis(port=pport, db=3)
        p3.set("k3", "v3")
        tx = p.pipeline(transaction=True)
        tx.incr("counter")
        tx.rpush("list", "x", "y")
        tx.execute()
        p.set("ttl", "t", px=100000)
        acked = p.execute_command("WAIT", 1, 1000)
        facts["wait_reply"] = acked
        time.sleep(2.5)  # at least two replication PINGs
        wait_for(lambda: info(r)["slave_repl_offset"] == info(p)["master_repl_offset"])
        facts["after_writes"] = {"primary": info(p), "replica": info(r)}
        facts["replica_get"] = {"k1": r.get("k1").decode(), "k3": redis.Redis(port=rport, db=3).get("k3").decode()}
        p.execute_command("CLIENT", "KILL", "TYPE", "replica")
        wait_for(lambda: proxy.n >= 2)
        wait_for(lambda: info(r).get("master_link_status") == "up")
        p.set("k2", "after-reconnect")
        wait_for(lambda: info(r)["slave_repl_offset"] == info(p)["master_repl_offset"])
        facts["after_partial"] = {"primary": info(p), "replica": info(r)}
        p.save()
        shutil.copy(work + "/p/dump.rdb", os.path.join(outdir, "dump.rdb"))
        facts["primary_sync_stats"] = {k: v for k, v in p.info("stats").items() if k.startswith("sync_")}
    finally:
        stop([repl, prim])
        time.sleep(0.3)
        proxy.save(outdir, "conn", names=("r2p", "p2r"))
        proxy.close()
    write_facts(outdir, facts)
    print(f"{flavor} {framing}: {proxy.n} connections captured in {outdir}")


if __name__ == "__main__":
    base = 26400
    for flavor, binary in FLAVORS:
        for diskless in (True, False):
            run(flavor, binary, diskless, base)
            base += 10

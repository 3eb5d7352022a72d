#!/usr/bin/env python3
"""Captures what a cluster replica answers to write commands from a normal client.

For redis-server 7.0 and valkey-server 9.1: two cluster nodes, the first owns every slot and
holds one key, the second replicates it. Every case is a list of commands sent on one fresh
connection to the replica; the exact reply bytes of each are recorded, then DBSIZE on both
nodes (they must still agree). One more case, `exec-after-becoming-replica`, uses a third node
without slots: MULTI and FLUSHALL are queued while it is a primary, then it is made a replica
(CLUSTER REPLICATE from another connection) and EXEC is sent. Writes `replica-writes.json` beside this script, which
`tests/replica_writes.rs` compares our server against.

    /work/tools/nsrun ns-server python3 examples/server/tests/vectors/capture_replica.py
"""
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "replica-writes.json")
SERVERS = {"redis-7.0": "redis-server", "valkey-9.1": "valkey-server"}

CASES = [
    ("flushall", [["FLUSHALL"]]),
    ("flushall-async", [["FLUSHALL", "ASYNC"]]),
    ("flushdb", [["FLUSHDB"]]),
    ("flushdb-sync", [["FLUSHDB", "SYNC"]]),
    ("swapdb", [["SWAPDB", "0", "0"]]),
    ("set-keyed", [["SET", "k", "v"]]),
    ("del-keyed", [["DEL", "k"]]),
    ("readonly-then-set", [["READONLY"], ["SET", "k", "v"]]),
    ("readonly-then-get", [["READONLY"], ["GET", "k"]]),
    ("multi-flushall-exec", [["MULTI"], ["FLUSHALL"], ["EXEC"]]),
    ("multi-set-exec", [["MULTI"], ["SET", "k", "v"], ["EXEC"]]),
    ("multi-ping-exec", [["MULTI"], ["PING"], ["EXEC"]]),
    ("flushall-bad-option", [["FLUSHALL", "NOW"]]),
    ("flushall-wrong-arity", [["FLUSHALL", "ASYNC", "x"]]),
]


def encode(args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.settimeout(5)
        self.buf = b""

    def _frame(self, pos):
        end = self.buf.find(b"\r\n", pos)
        if end < 0:
            return None
        t, n = self.buf[pos:pos + 1], self.buf[pos + 1:end]
        after = end + 2
        if t in b"+-:":
            return after
        if t == b"$":
            n = int(n)
            if n < 0:
                return after
            return after + n + 2 if len(self.buf) >= after + n + 2 else None
        if t == b"*":
            p = after
            for _ in range(max(int(n), 0)):
                p = self._frame(p)
                if p is None:
                    return None
            return p
        raise ValueError(self.buf)

    def call(self, *args):
        self.s.sendall(encode(args))
        while True:
            end = self._frame(0) if self.buf else None
            if end is not None:
                out, self.buf = self.buf[:end], self.buf[end:]
                return out
            b = self.s.recv(65536)
            if not b:
                raise EOFError
            self.buf += b


def start(binary, port, work):
    d = os.path.join(work, str(port))
    os.makedirs(d)
    p = subprocess.Popen([binary, "--port", str(port), "--cluster-enabled", "yes",
                          "--cluster-node-timeout", "2000", "--save", "", "--appendonly", "no",
                          "--dir", d, "--logfile", os.path.join(d, "log")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return p
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(binary)


def wait(what, f, limit=30):
    end = time.time() + limit
    while time.time() < end:
        if f():
            return
        time.sleep(0.1)
    raise RuntimeError("timed out: " + what)


def form(pport, rport):
    p, r = Conn(pport), Conn(rport)
    assert p.call("CLUSTER", "ADDSLOTSRANGE", "0", "16383") == b"+OK\r\n"
    assert r.call("CLUSTER", "MEET", "127.0.0.1", str(pport)) == b"+OK\r\n"
    pid = p.call("CLUSTER", "MYID").split(b"\r\n")[1].decode()
    wait("meet", lambda: pid.encode() in r.call("CLUSTER", "NODES"))
    assert r.call("CLUSTER", "REPLICATE", pid) == b"+OK\r\n"
    for c in (p, r):
        wait("cluster ok", lambda: b"cluster_state:ok" in c.call("CLUSTER", "INFO"))
    assert p.call("SET", "k", "v") == b"+OK\r\n"
    r.call("READONLY")
    wait("sync", lambda: r.call("GET", "k") == b"$1\r\nv\r\n")


def exec_after_becoming_replica(pport, cport):
    """MULTI + FLUSHALL queued on an empty primary, which then becomes a replica; EXEC."""
    p, c, admin = Conn(pport), Conn(cport), Conn(cport)
    assert admin.call("CLUSTER", "MEET", "127.0.0.1", str(pport)) == b"+OK\r\n"
    pid = p.call("CLUSTER", "MYID").split(b"\r\n")[1].decode()
    wait("meet", lambda: pid.encode() in admin.call("CLUSTER", "NODES"))
    replies = [c.call("MULTI"), c.call("FLUSHALL")]
    assert admin.call("CLUSTER", "REPLICATE", pid) == b"+OK\r\n"
    wait("replica", lambda: b"role:slave" in admin.call("INFO", "replication"))
    replies.append(c.call("EXEC"))
    return [r.decode("latin-1") for r in replies]


def main():
    work = tempfile.mkdtemp(prefix="replica-capture-")
    out = {"servers": {}, "cases": [{"name": n, "commands": c, "expect": {}} for n, c in CASES],
           "exec_after_becoming_replica": {}}
    port = 26040
    try:
        for kind, binary in SERVERS.items():
            out["servers"][kind] = subprocess.run([binary, "--version"], capture_output=True,
                                                  text=True).stdout.strip()
            procs = [start(binary, port + i, work) for i in range(3)]
            try:
                form(port, port + 1)
                for case in out["cases"]:
                    c = Conn(port + 1)
                    replies = [c.call(*cmd).decode("latin-1") for cmd in case["commands"]]
                    sizes = [Conn(q).call("DBSIZE").decode() for q in (port, port + 1)]
                    case["expect"][kind] = {"replies": replies, "dbsize_primary_replica": sizes}
                out["exec_after_becoming_replica"][kind] = exec_after_becoming_replica(
                    port, port + 2)
            finally:
                for p in procs:
                    p.kill()
                    p.wait()
            port += 3
    finally:
        shutil.rmtree(work, ignore_errors=True)
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(out["exec_after_becoming_replica"])
    for c in out["cases"]:
        r, v = c["expect"]["redis-7.0"], c["expect"]["valkey-9.1"]
        print(f"{c['name']:24} {'same' if r == v else 'DIFF'} {r}" + ("" if r == v else f"\n{'':24} valkey {v}"))


if __name__ == "__main__":
    main()

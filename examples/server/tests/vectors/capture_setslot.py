#!/usr/bin/env python3
"""Captures how valkey-server 9.1 answers a CLUSTER SETSLOT whose replica does not acknowledge.

A primary (all slots) and its replica, in cluster mode. Once the replica is `state=online`
it is stopped with SIGSTOP (its connection stays open): `CLUSTER SETSLOT 6 NODE <primary>
TIMEOUT 300` on the primary then waits for its ACK (Valkey `clusterCommandSetSlot`) and
times out. Recorded: the reply bytes, whether the primary's slot 6 changed, and that with the
replica resumed (SIGCONT) the same command answers `+OK`. Writes `setslot.json` beside this
script (read by `tests/durability.rs`).

    /work/tools/nsrun <ns> python3 examples/server/tests/vectors/capture_setslot.py
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from capture_replica import start  # noqa: E402  (one way to start a real node)
PRIMARY, REPLICA = 7101, 7102


def raw(port, *args):
    """One command, the reply's bytes (read until a first complete line for simple replies)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    cmd = b"*%d\r\n" % len(args) + b"".join(
        b"$%d\r\n%s\r\n" % (len(a), a) for a in (x.encode() for x in args))
    s.sendall(cmd)
    buf = b""
    while not buf.endswith(b"\r\n"):
        buf += s.recv(65536)
    if buf.startswith(b"$"):
        n = int(buf[1:buf.index(b"\r\n")])
        while len(buf) < buf.index(b"\r\n") + 2 + n + 2:
            buf += s.recv(65536)
    s.close()
    return buf


def bulk(b):
    head, rest = b.split(b"\r\n", 1)
    return rest[:int(head[1:])].decode()


def main():
    work = tempfile.mkdtemp()
    procs = [start("valkey-server", PRIMARY, work), start("valkey-server", REPLICA, work)]
    try:
        raw(PRIMARY, "CLUSTER", "ADDSLOTSRANGE", "0", "16383")
        raw(REPLICA, "CLUSTER", "MEET", "127.0.0.1", str(PRIMARY))
        pid = bulk(raw(PRIMARY, "CLUSTER", "MYID"))
        for _ in range(200):
            if pid in bulk(raw(REPLICA, "CLUSTER", "NODES")):
                break
            time.sleep(0.1)
        raw(REPLICA, "CLUSTER", "REPLICATE", pid)
        for _ in range(300):
            if "state=online" in bulk(raw(PRIMARY, "INFO", "replication")):
                break
            time.sleep(0.1)
        procs[1].send_signal(signal.SIGSTOP)
        timed_out = raw(PRIMARY, "CLUSTER", "SETSLOT", "6", "NODE", pid, "TIMEOUT", "300")
        mine = [l for l in bulk(raw(PRIMARY, "CLUSTER", "NODES")).splitlines()
                if l.startswith(pid)][0]
        procs[1].send_signal(signal.SIGCONT)
        resumed = raw(PRIMARY, "CLUSTER", "SETSLOT", "6", "NODE", pid, "TIMEOUT", "5000")
        out = {
            "server": subprocess.run(["valkey-server", "--version"], capture_output=True,
                                     text=True).stdout.strip(),
            "timeout_reply": timed_out.decode(),
            "primary_slots_after_timeout": " ".join(mine.split(" ")[8:]),
            "resumed_reply": resumed.decode(),
        }
        with open(os.path.join(HERE, "setslot.json"), "w") as f:
            json.dump(out, f, indent=2)
            f.write("\n")
        print(json.dumps(out, indent=2))
    finally:
        for p in procs:
            p.send_signal(signal.SIGCONT)
            p.kill()
            p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

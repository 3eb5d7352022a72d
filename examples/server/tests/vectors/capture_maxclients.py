#!/usr/bin/env python3
"""Captures what a client past `maxclients` gets from redis-server 7.0 and valkey-server 9.1.

For each server, in cluster mode with `--maxclients 3`: clients are opened one by one (each
sends PING) until one is refused; recorded are how many were served, the refused client's
exact reply bytes and whether it was closed. Then a second node is MET (the cluster bus links
count against the limit in cluster mode) and the count is taken again on fresh connections.
Writes `maxclients.json` beside this script (read by `tests/client_limits.rs`).

    /work/tools/nsrun ns-server python3 examples/server/tests/vectors/capture_maxclients.py
"""
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SERVERS = {"redis-7.0": "redis-server", "valkey-9.1": "valkey-server"}
MAXCLIENTS = 3


def start(binary, port, work, extra):
    d = os.path.join(work, str(port))
    os.makedirs(d)
    p = subprocess.Popen([binary, "--port", str(port), "--cluster-enabled", "yes", "--save", "",
                          "--dir", d, "--logfile", os.path.join(d, "log")] + extra,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            time.sleep(0.2)
            return p
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(binary)


def count_served(port):
    """Opens clients until one is refused; returns (served, refused reply, refused closed)."""
    held = []
    try:
        while len(held) < 20:
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            s.settimeout(1.0)
            got, closed = b"", False
            try:
                while not got.endswith(b"\r\n") or len(got) < 5:
                    b = s.recv(4096)
                    if not b:
                        closed = True
                        break
                    got += b
            except socket.timeout:
                pass
            except ConnectionResetError:
                closed = True
            if got == b"+PONG\r\n":
                held.append(s)
                continue
            # Refused: is it closed?
            if not closed:
                try:
                    s.settimeout(1.0)
                    closed = s.recv(4096) == b""
                except socket.timeout:
                    closed = False
                except ConnectionResetError:
                    closed = True
            s.close()
            return len(held), got.decode("latin-1"), closed
        return len(held), None, False
    finally:
        for s in held:
            s.close()
        time.sleep(0.3)


def call(port, *args):
    s = socket.create_connection(("127.0.0.1", port))
    out = b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a.encode()) for a in args)
    s.sendall(out)
    time.sleep(0.1)
    r = s.recv(65536)
    s.close()
    return r


def main():
    work = tempfile.mkdtemp(prefix="maxclients-capture-")
    out = {"maxclients": MAXCLIENTS, "servers": {}, "expect": {}}
    port = 26070
    try:
        for kind, binary in SERVERS.items():
            out["servers"][kind] = subprocess.run([binary, "--version"], capture_output=True,
                                                  text=True).stdout.strip()
            a = start(binary, port, work, ["--maxclients", str(MAXCLIENTS)])
            b = start(binary, port + 1, work, [])
            try:
                alone = count_served(port)
                call(port + 1, "CLUSTER", "MEET", "127.0.0.1", str(port))
                time.sleep(2)
                links = call(port + 1, "CLUSTER", "LINKS").count(b"direction")
                with_links = count_served(port)
                out["expect"][kind] = {
                    "alone": {"served": alone[0], "reply": alone[1], "closed": alone[2]},
                    "peer_links": links,
                    "with_one_peer": {"served": with_links[0], "reply": with_links[1],
                                      "closed": with_links[2]},
                }
            finally:
                for p in (a, b):
                    p.kill()
                    p.wait()
            port += 2
    finally:
        shutil.rmtree(work, ignore_errors=True)
    with open(os.path.join(HERE, "maxclients.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Captures the `cluster-*` config surface of valkey-server 9.1 (and redis-server 7.0).

For each server, in cluster mode: `CONFIG GET cluster-*` and `CONFIG GET cluster-ping-interval`
(the hidden one) give every option with its default as CONFIG GET shows it; then each CONFIG
SET case below is sent on a fresh server state (every option set back to its default after
the case) with its exact reply and, when it succeeded, CONFIG GET of the options it named.
Writes `config-surface.json` beside this script (read by `tests/config_surface.rs`).

    /work/tools/nsrun ns-server python3 examples/server/tests/vectors/capture_config.py
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

SETS = [
    ["cluster-require-full-coverage", "maybe"],
    ["cluster-require-full-coverage", "NO"],
    ["cluster-allow-reads-when-down", "yes"],
    ["cluster-allow-pubsubshard-when-down", "no"],
    ["cluster-allow-replica-migration", "no"],
    ["cluster-replica-no-failover", "yes"],
    ["cluster-slave-no-failover", "yes"],
    ["cluster-migration-barrier", "-1"],
    ["cluster-migration-barrier", "5"],
    ["cluster-migration-barrier", "x"],
    ["cluster-replica-validity-factor", "2147483648"],
    ["cluster-slave-validity-factor", "3"],
    ["cluster-announce-port", "70000"],
    ["cluster-announce-port", "7001"],
    ["cluster-announce-tls-port", "7101"],
    ["cluster-announce-bus-port", "17001"],
    ["cluster-manual-failover-timeout", "0"],
    ["cluster-manual-failover-timeout", "6000"],
    ["cluster-slot-migration-log-max-len", "-1"],
    ["cluster-slot-migration-log-max-len", "20"],
    ["cluster-blacklist-ttl", "120"],
    ["cluster-node-timeout", "abc"],
    ["cluster-node-timeout", "-5"],
    ["cluster-node-timeout", "5000"],
    ["cluster-ping-interval", "300"],
    ["cluster-link-sendbuf-limit", "1.5mb"],
    ["cluster-link-sendbuf-limit", "-1"],
    ["cluster-link-sendbuf-limit", "0"],
    ["cluster-link-sendbuf-limit", "1mb"],
    ["cluster-link-sendbuf-limit", "16384"],
    ["cluster-announce-hostname", "bad host"],
    ["cluster-announce-hostname", "node-a.example"],
    ["cluster-announce-human-nodename", "a b"],
    ["cluster-announce-human-nodename", "node-a"],
    ["cluster-announce-client-ipv4", "::1"],
    ["cluster-announce-client-ipv4", "10.0.0.1"],
    ["cluster-announce-client-ipv6", "1.2.3.4"],
    ["cluster-announce-client-ipv6", "2001:db8::1"],
    ["cluster-announce-ip", "10.0.0.9"],
    ["cluster-preferred-endpoint-type", "foo"],
    ["cluster-preferred-endpoint-type", "HOSTNAME"],
    ["cluster-config-save-behavior", "foo"],
    ["cluster-config-save-behavior", "best-effort"],
    ["cluster-slot-stats-enabled", "maybe"],
    ["cluster-announce-client-port", "70000"],
    ["cluster-enabled", "no"],
    ["cluster-port", "0"],
    ["cluster-config-file", "x.conf"],
    ["cluster-databases", "1"],
    ["nosuch", "1"],
    ["cluster-node-timeout"],
    ["cluster-node-timeout", "1000", "cluster-node-timeout", "2000"],
    ["cluster-migration-barrier", "2", "cluster-allow-replica-migration", "no"],
    ["cluster-migration-barrier", "3", "cluster-announce-port", "99999"],
    ["maxclients", "0"],
    ["maxclients", "5000"],
    ["maxmemory", "0"],
]


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.settimeout(5)

    def call(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)
        time.sleep(0.05)
        buf = b""
        while True:
            buf += self.s.recv(65536)
            if complete(buf, 0) is not None:
                return buf


def complete(b, pos):
    end = b.find(b"\r\n", pos)
    if end < 0:
        return None
    t, n = b[pos:pos + 1], b[pos + 1:end]
    if t in b"+-:":
        return end + 2
    if t == b"$":
        n = int(n)
        return end + 2 if n < 0 else (end + 4 + n if len(b) >= end + 4 + n else None)
    p = end + 2
    for _ in range(int(n)):
        p = complete(b, p)
        if p is None:
            return None
    return p


def pairs(reply):
    """A CONFIG GET reply (RESP2 flat array of bulks) -> [(name, value)]."""
    items, pos = [], reply.find(b"\r\n") + 2
    while pos < len(reply):
        end = reply.find(b"\r\n", pos)
        n = int(reply[pos + 1:end])
        items.append(reply[end + 2:end + 2 + n].decode())
        pos = end + 4 + n
    return list(zip(items[0::2], items[1::2]))


def main():
    work = tempfile.mkdtemp(prefix="config-capture-")
    out = {"servers": {}, "defaults": {}, "sets": []}
    port = 26090
    results = {}
    try:
        for kind, binary in SERVERS.items():
            out["servers"][kind] = subprocess.run([binary, "--version"], capture_output=True,
                                                  text=True).stdout.strip()
            d = os.path.join(work, kind)
            os.makedirs(d)
            p = subprocess.Popen([binary, "--port", str(port), "--cluster-enabled", "yes",
                                  "--save", "", "--dir", d, "--logfile", os.path.join(d, "log")],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                for _ in range(100):
                    try:
                        c = Conn(port)
                        break
                    except OSError:
                        time.sleep(0.1)
                defaults = dict(pairs(c.call("CONFIG", "GET", "cluster-*")))
                hidden = pairs(c.call("CONFIG", "GET", "cluster-ping-interval"))
                out["defaults"][kind] = {"listed": defaults, "hidden": dict(hidden)}
                base = dict(defaults, **dict(hidden))
                for case in SETS:
                    reply = c.call("CONFIG", "SET", *case).decode("latin-1")
                    names = case[0::2]
                    shown = {}
                    if reply == "+OK\r\n":
                        for n in names:
                            shown.update(dict(pairs(c.call("CONFIG", "GET", n))))
                    results.setdefault(json.dumps(case), {})[kind] = {"reply": reply,
                                                                      "get": shown}
                    for n, v in base.items():
                        c.call("CONFIG", "SET", n, v)
                    c.call("CONFIG", "SET", "maxclients", "10000")
            finally:
                p.kill()
                p.wait()
            port += 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out["sets"] = [{"args": json.loads(k), "expect": v} for k, v in results.items()]
    with open(os.path.join(HERE, "config-surface.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    for s in out["sets"]:
        r, v = s["expect"].get("redis-7.0"), s["expect"]["valkey-9.1"]
        print(f"{' '.join(s['args']):60} {v['reply'].strip()[:90]} {v['get']}"
              + ("" if r == v else "   (redis differs)"))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Captures COMMAND INFO and COMMAND DOCS of every command (and subcommand) of a running
redis-server / valkey-server, raw in RESP2 and RESP3, into a JSON vector.

Usage: capture_commands.py PORT OUT.json

Each entry: {"name", "info2", "info3", "docs2", "docs3"} with the raw reply bytes as
latin-1 text. `parse()` reads a RESP3 reply into tagged lists (["*", [..]] array, ["~", [..]]
set, ["%", [[k, v], ..]] map, ["+", s] simple string, ["$", s] bulk, [":", n] integer, ["_"]
null); `gen_specs.py` generates the command crate's built-in table from the parsed RESP3
forms; the crate's and the server's tests compare against the raw ones.
"""
import json
import socket
import sys


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.buf = b""

    def send(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)

    def _fill(self):
        d = self.s.recv(1 << 16)
        if not d:
            raise EOFError
        self.buf += d

    def _line(self, pos):
        while True:
            i = self.buf.find(b"\r\n", pos)
            if i >= 0:
                return self.buf[pos:i], i + 2
            self._fill()

    def _need(self, end):
        while len(self.buf) < end:
            self._fill()

    def _parse(self, pos):
        line, pos = self._line(pos)
        t, rest = chr(line[0]), line[1:].decode("latin-1")
        if t in "+-":
            return [t, rest], pos
        if t == ":":
            return [":", int(rest)], pos
        if t == "_":
            return ["_"], pos
        if t in "$=":
            n = int(rest)
            if n < 0:
                return ["_"], pos
            self._need(pos + n + 2)
            return ["$", self.buf[pos:pos + n].decode("latin-1")], pos + n + 2
        if t in "*~>":
            n = int(rest)
            if n < 0:
                return ["_"], pos
            items = []
            for _ in range(n):
                v, pos = self._parse(pos)
                items.append(v)
            return [t if t != ">" else "*", items], pos
        if t == "%":
            n = int(rest)
            items = []
            for _ in range(n):
                k, pos = self._parse(pos)
                v, pos = self._parse(pos)
                items.append([k, v])
            return ["%", items], pos
        raise ValueError("unexpected RESP type %r" % t)

    def reply(self):
        """(raw bytes, parsed)"""
        v, end = self._parse(0)
        raw, self.buf = self.buf[:end], self.buf[end:]
        return raw, v

    def call(self, *args):
        self.send(*args)
        return self.reply()


class _Bytes(Conn):
    """A parser over bytes already read."""

    def __init__(self, data):
        self.buf = data

    def _fill(self):
        raise EOFError


def parse(text):
    """The tagged form of one RESP3 reply stored as latin-1 text."""
    return _Bytes(text.encode("latin-1")).reply()[1]


def main():
    port, out = int(sys.argv[1]), sys.argv[2]
    c2, c3 = Conn(port), Conn(port)
    c3.call("HELLO", "3")
    _, names = c3.call("COMMAND", "LIST")
    # COMMAND LIST names the subcommands too (`config|get`).
    full = sorted(n[1] for n in names[1])
    names = [n for n in full if "|" not in n]
    entries = []
    for n in full:
        e = {"name": n}
        for key, args in (("info", ("COMMAND", "INFO", n)), ("docs", ("COMMAND", "DOCS", n))):
            raw2, _ = c2.call(*args)
            raw3, parsed = c3.call(*args)
            e[key + "2"] = raw2.decode("latin-1")
            e[key + "3"] = raw3.decode("latin-1")
        entries.append(e)
    _, server = c2.call("INFO", "server")
    version = [l for l in server[1].split("\r\n") if l.startswith(("redis_version", "valkey_version"))]
    json.dump({"server": version, "commands": entries}, open(out, "w"), indent=0)
    open(out, "a").write("\n")
    print("%d commands (%d top-level) from %s" % (len(entries), len(names), version))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""What a real node does with a MEET from an unknown sender whose gossip section names three
nodes it does not know (issue 16 item 10).

Usage (inside your network namespace): python3 capture.py SERVER PORT
  SERVER: redis-server or valkey-server; PORT: a free data port (bus port = PORT + 10000).

Starts SERVER in cluster mode in a temporary directory, connects to its bus port, sends one
MEET (sender: a random node ID, count 3, three gossip entries about random IDs at
127.0.0.1:7300-7302, flags master), waits 1.5 s, prints CLUSTER NODES before and after and how
many of the three gossiped IDs the node added, then stops the server.
"""
import os, socket, struct, subprocess, sys, tempfile, time


def nid():
    return os.urandom(20).hex().encode()


def meet(sender, entries, port=7999, cport=17999):
    h = bytearray(2256)
    h[0:4] = b"RCmb"
    struct.pack_into(">H", h, 8, 1)          # ver
    struct.pack_into(">H", h, 10, port)      # port
    struct.pack_into(">H", h, 12, 2)         # type MEET
    struct.pack_into(">H", h, 14, len(entries))
    h[40:80] = sender
    struct.pack_into(">H", h, 2248, cport)   # cport
    struct.pack_into(">H", h, 2250, 0x1)     # flags: master
    body = bytearray()
    for name, ip, p, cp in entries:
        e = bytearray(104)
        e[0:40] = name
        struct.pack_into(">I", e, 44, int(time.time()))   # pong_received (s)
        e[48:48 + len(ip)] = ip.encode()
        struct.pack_into(">HHHH", e, 94, p, cp, 0x1, 0)    # port, cport, flags, pport
        body += e
    out = h + body
    struct.pack_into(">I", out, 4, len(out))
    return bytes(out)


def cli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port)] + list(args),
                          capture_output=True, text=True).stdout


def main():
    server, port = sys.argv[1], int(sys.argv[2])
    d = tempfile.mkdtemp()
    proc = subprocess.Popen([server, "--port", str(port), "--cluster-enabled", "yes",
                             "--cluster-config-file", os.path.join(d, "nodes.conf"),
                             "--dir", d, "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1)
        info = cli(port, "info", "server")
        key = "valkey_version:" if "valkey_version:" in info else "redis_version:"
        version = key + info.split(key)[-1].split()[0]
        before = cli(port, "cluster", "nodes")
        phantoms = [nid() for _ in range(3)]
        s = socket.create_connection(("127.0.0.1", port + 10000))
        s.sendall(meet(nid(), [(p, "127.0.0.1", 7300 + i, 17300 + i)
                               for i, p in enumerate(phantoms)]))
        s.settimeout(1.0)
        got = s.recv(65536)
        reply = struct.unpack(">H", got[12:14])[0] if len(got) >= 14 else None
        time.sleep(1.5)
        after = cli(port, "cluster", "nodes")
        print(f"server: {server} ({version})")
        print(f"reply type: {reply} (1 = PONG)")
        print("CLUSTER NODES before:\n" + before + "CLUSTER NODES after:\n" + after)
        print("gossiped nodes added:", sum(p.decode() in after for p in phantoms))
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    main()

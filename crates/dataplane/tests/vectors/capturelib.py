"""What the capture scripts share: waiting for a port or a condition, a logging TCP proxy,
writing the facts and stopping what was started.

`Proxy(listen, target)` forwards every connection made to 127.0.0.1:`listen` to
127.0.0.1:`target` and keeps both directions of each in memory (`conns`: a list of
`[client_to_server, server_to_client]` bytearrays, in accept order); `save` writes them out.
"""
import json, os, socket, threading, time


def wait_port(port, t=10):
    end = time.time() + t
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"port {port} never opened")


def wait_for(pred, t=30, what="condition"):
    end = time.time() + t
    while time.time() < end:
        if pred():
            return
        time.sleep(0.05)
    raise RuntimeError(f"{what} never held")


class Proxy:
    def __init__(self, listen, target):
        self.target = target
        self.conns = []
        self.lock = threading.Lock()
        self.srv = socket.socket()
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind(("127.0.0.1", listen))
        self.srv.listen(16)
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def n(self):
        with self.lock:
            return len(self.conns)

    def _accept(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            u = socket.create_connection(("127.0.0.1", self.target))
            logs = [bytearray(), bytearray()]
            with self.lock:
                self.conns.append(logs)
            for src, dst, log in ((c, u, logs[0]), (u, c, logs[1])):
                threading.Thread(target=self._pump, args=(src, dst, log), daemon=True).start()

    def _pump(self, src, dst, log):
        while True:
            try:
                b = src.recv(65536)
            except OSError:
                b = b""
            if not b:
                for s in (src, dst):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                return
            with self.lock:
                log.extend(b)
            try:
                dst.sendall(b)
            except OSError:
                pass

    def logs(self):
        """A copy of every connection's two directions."""
        with self.lock:
            return [(bytes(a), bytes(b)) for a, b in self.conns]

    def save(self, outdir, prefix, names=("s2t", "t2s"), keep=lambda c2s: True):
        """Writes `<prefix><N>.<names[0]>.bin` (what the client sent) and `.<names[1]>.bin`
        for each kept connection, numbered from 1; returns how many."""
        n = 0
        for a, b in self.logs():
            if not keep(a):
                continue
            n += 1
            open(os.path.join(outdir, f"{prefix}{n}.{names[0]}.bin"), "wb").write(a)
            open(os.path.join(outdir, f"{prefix}{n}.{names[1]}.bin"), "wb").write(b)
        return n

    def close(self):
        self.srv.close()


def write_facts(outdir, facts):
    """`facts.json` in `outdir`, sorted and indented."""
    with open(os.path.join(outdir, "facts.json"), "w") as f:
        json.dump(facts, f, indent=1, sort_keys=True, default=str)


def stop(procs, proxies=()):
    """Terminates the server processes (and waits for them), then closes the proxies."""
    for p in procs:
        p.terminate()
        p.wait()
    for x in proxies:
        x.close()

"""redis-py RedisCluster against a ferrocluster cluster.

Usage: python3 redis_py_cluster.py PORT KEYS [PROTOCOL]
Writes KEYS keys spread over all slots through RedisCluster, reads every one back, checks
MGET (mget_nonatomic) and the slot coverage of the written keys, then prints
`RESULT written=N read_ok=N slots=N` and exits 0 only if every key read back correctly.
"""
import sys

import redis
from redis.cluster import RedisCluster


def main() -> int:
    port = int(sys.argv[1])
    n = int(sys.argv[2])
    protocol = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    # The read timeout only bounds a hang (as the Rust tests' HANG).
    rc = RedisCluster(host="127.0.0.1", port=port, protocol=protocol, socket_timeout=60)
    slots = set()
    pipe_batch = 500
    for start in range(0, n, pipe_batch):
        with rc.pipeline(transaction=False) as p:
            for i in range(start, min(n, start + pipe_batch)):
                p.set(f"key:{i}", f"value:{i}")
            p.execute()
    for i in range(n):
        slots.add(rc.keyslot(f"key:{i}"))
    ok = 0
    for i in range(n):
        if rc.get(f"key:{i}") == f"value:{i}".encode():
            ok += 1
    mget = rc.mget_nonatomic([f"key:{i}" for i in range(0, min(n, 200))])
    mget_ok = all(v == f"value:{i}".encode() for i, v in enumerate(mget))
    nodes = len(rc.get_primaries())
    print(f"RESULT written={n} read_ok={ok} slots={len(slots)} mget_ok={mget_ok} primaries={nodes}")
    return 0 if ok == n and mget_ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""redis-py RedisCluster writing through a primary's kill -9.

Usage: python3 redis_py_failover.py PORT SECONDS
Writes key:0, key:1, ... for SECONDS seconds through RedisCluster. A write that fails
(connection refused, CLUSTERDOWN, MOVED storms while the cluster reconfigures) is retried
after 0.25 s until it is acknowledged; the client itself also retries. At the end every
acknowledged key is read back. Replication inside a shard is asynchronous, as in Redis
Cluster: a write acknowledged by the primary a moment before its kill -9 may not have reached
the replica that takes over, so a few such writes may be lost (the cluster spec says so).
Prints `RESULT acked=N failed_attempts=F read_ok=M lost=L last_ok_after_failure=B` and exits 0
only if writes succeeded again after the last failure and at most MAX_LOST acknowledged writes
are missing.
"""
import sys
import time

# Writes acknowledged in the last instant before the kill that the replica had not received.
MAX_LOST = 50

from redis.cluster import RedisCluster


def main() -> int:
    port = int(sys.argv[1])
    seconds = float(sys.argv[2])
    rc = RedisCluster(host="127.0.0.1", port=port, socket_timeout=2, socket_connect_timeout=1)
    deadline = time.time() + seconds
    acked = 0
    failed = 0
    ok_after_failure = True
    while time.time() < deadline:
        try:
            rc.set(f"key:{acked}", f"value:{acked}")
            acked += 1
            ok_after_failure = True
        except Exception as e:  # the point is to see the client through the failover
            failed += 1
            ok_after_failure = False
            if failed % 20 == 1:
                print(f"write key:{acked} failed ({type(e).__name__}: {e}); retrying", flush=True)
            time.sleep(0.25)
    read_ok = 0
    for i in range(acked):
        for _ in range(40):
            try:
                if rc.get(f"key:{i}") == f"value:{i}".encode():
                    read_ok += 1
                break
            except Exception:
                time.sleep(0.25)
    lost = acked - read_ok
    print(f"RESULT acked={acked} failed_attempts={failed} read_ok={read_ok} lost={lost} "
          f"last_ok_after_failure={ok_after_failure}", flush=True)
    return 0 if acked > 0 and lost <= MAX_LOST and ok_after_failure else 1


if __name__ == "__main__":
    sys.exit(main())

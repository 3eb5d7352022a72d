"""redis-py RedisCluster writing through a primary's kill -9.

Usage: python3 redis_py_failover.py PORT READY_FILE STOP_FILE
Writes key:0, key:1, ... through RedisCluster (seeded from 127.0.0.1:PORT) until STOP_FILE
exists. Creates READY_FILE once 100 writes were acknowledged (the test kills a primary then).
A write that fails (connection refused, CLUSTERDOWN, MOVED storms while the cluster
reconfigures) is retried after 0.25 s until it is acknowledged; the client itself also
retries. Once told to stop, it still writes until a write is acknowledged after the last
failed one (for at most HANG seconds, a bound on a hang). At the end every acknowledged key is
read back. Replication inside a shard is asynchronous, as in Redis Cluster: a write
acknowledged by the primary a moment before its kill -9 may not have reached the replica that
takes over, so a few such writes may be lost (the cluster spec says so).
Prints `RESULT acked=N failed_attempts=F read_ok=M lost=L last_ok_after_failure=B` and exits 0
only if writes succeeded again after the last failure and at most MAX_LOST acknowledged writes
are missing. Nothing here depends on the machine's speed: the deadlines only bound a hang.
"""
import os
import sys
import time

# Writes acknowledged in the last instant before the kill that the replica had not received.
MAX_LOST = 50
# Acknowledged writes before READY_FILE is created.
READY_AFTER = 100
# The bound on a hang (seconds), as the Rust tests' HANG.
HANG = 60.0

from redis.cluster import RedisCluster


def main() -> int:
    port = int(sys.argv[1])
    ready_file, stop_file = sys.argv[2], sys.argv[3]
    rc = RedisCluster(host="127.0.0.1", port=port, socket_timeout=2, socket_connect_timeout=1)
    acked = 0
    failed = 0
    ok_after_failure = True
    stop_deadline = None
    while True:
        if stop_deadline is None and os.path.exists(stop_file):
            stop_deadline = time.time() + HANG
        if stop_deadline is not None and (ok_after_failure or time.time() > stop_deadline):
            break
        try:
            rc.set(f"key:{acked}", f"value:{acked}")
            acked += 1
            ok_after_failure = True
            if acked == READY_AFTER:
                with open(ready_file, "w"):
                    pass
        except Exception as e:  # the point is to see the client through the failover
            failed += 1
            ok_after_failure = False
            if failed % 20 == 1:
                print(f"write key:{acked} failed ({type(e).__name__}: {e}); retrying", flush=True)
            time.sleep(0.25)
    read_ok = 0
    deadline = time.time() + HANG
    for i in range(acked):
        while True:
            try:
                if rc.get(f"key:{i}") == f"value:{i}".encode():
                    read_ok += 1
                break
            except Exception as e:
                if time.time() > deadline:
                    print(f"read key:{i} failed after {HANG} s ({type(e).__name__}: {e})", flush=True)
                    break
                time.sleep(0.25)
    lost = acked - read_ok
    print(f"RESULT acked={acked} failed_attempts={failed} read_ok={read_ok} lost={lost} "
          f"last_ok_after_failure={ok_after_failure}", flush=True)
    return 0 if acked > 0 and lost <= MAX_LOST and ok_after_failure else 1


if __name__ == "__main__":
    sys.exit(main())

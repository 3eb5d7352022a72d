"""redis-py RedisCluster writing through a primary's kill -9.

Usage: python3 redis_py_failover.py PORT READY_FILE STOP_FILE PAUSE_FILE PAUSED_FILE
Writes key:0, key:1, ... through RedisCluster (seeded from 127.0.0.1:PORT) until STOP_FILE
exists. Creates READY_FILE once 100 writes were acknowledged. While PAUSE_FILE exists it
writes nothing (between two writes: every write it sent has its answer) and creates
PAUSED_FILE to say so; it writes on once PAUSE_FILE is gone. The test pauses it, has the
primary it will kill confirm with WAIT that its replica holds every write, kills the primary
and lets the writer go on: every write acknowledged before the kill is on the replica that
takes over, and every write acknowledged after it went to a node that stays up.
A write that fails (connection refused, CLUSTERDOWN, MOVED storms while the cluster
reconfigures) is retried after 0.25 s until it is acknowledged; the client itself also
retries. Once told to stop, it still writes until a write is acknowledged after the last
failed one (for at most HANG seconds, a bound on a hang). At the end every acknowledged key is
read back.
Prints `RESULT acked=N failed_attempts=F read_ok=M lost=L last_ok_after_failure=B` and exits 0
only if writes succeeded again after the last failure and no acknowledged write is missing
(lost=0). Nothing here depends on the machine's speed: the deadlines only bound a hang.
"""
import os
import sys
import time

# Acknowledged writes before READY_FILE is created.
READY_AFTER = 100
# The bound on a hang (seconds), as the Rust tests' HANG.
HANG = 60.0
# The longest pause (a bound on a hang: the test's WAIT and kill take at most a few HANGs).
PAUSE_HANG = 10 * HANG

from redis.cluster import RedisCluster


def pause(pause_file: str, paused_file: str) -> bool:
    """Holds while PAUSE_FILE exists; False if it outlived PAUSE_HANG (a hang)."""
    with open(paused_file, "w"):
        pass
    print("paused", flush=True)
    deadline = time.time() + PAUSE_HANG
    while os.path.exists(pause_file):
        if time.time() > deadline:
            print(f"still paused after {PAUSE_HANG} s (a hang)", flush=True)
            return False
        time.sleep(0.05)
    print("resumed", flush=True)
    return True


def main() -> int:
    port = int(sys.argv[1])
    ready_file, stop_file, pause_file, paused_file = sys.argv[2:6]
    rc = RedisCluster(host="127.0.0.1", port=port, socket_timeout=2, socket_connect_timeout=1)
    acked = 0
    failed = 0
    ok_after_failure = True
    stop_deadline = None
    paused_once = False
    while True:
        if not paused_once and os.path.exists(pause_file):
            paused_once = True
            if not pause(pause_file, paused_file):
                return 1
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
    shown = 0
    deadline = time.time() + HANG
    for i in range(acked):
        while True:
            try:
                if rc.get(f"key:{i}") == f"value:{i}".encode():
                    read_ok += 1
                elif shown < 10:
                    shown += 1
                    print(f"key:{i} acknowledged but missing or wrong", flush=True)
                break
            except Exception as e:
                if time.time() > deadline:
                    print(f"read key:{i} failed after {HANG} s ({type(e).__name__}: {e})", flush=True)
                    break
                time.sleep(0.25)
    lost = acked - read_ok
    print(f"RESULT acked={acked} failed_attempts={failed} read_ok={read_ok} lost={lost} "
          f"last_ok_after_failure={ok_after_failure}", flush=True)
    return 0 if acked > 0 and paused_once and lost == 0 and ok_after_failure else 1


if __name__ == "__main__":
    sys.exit(main())

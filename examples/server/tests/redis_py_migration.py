"""Atomic slot migration (CLUSTER MIGRATESLOTS) between two ferrocluster primaries while
redis-py writes and reads the moving slots.

Usage: python3 redis_py_migration.py SOURCE_PORT TARGET_PORT FIRST_SLOT LAST_SLOT KEYS MODE
MODE `success`: migrate, keep writing during it, then check that every acknowledged write
reads back, GETSLOTMIGRATIONS shows success on both sides, the target owns the slots and
holds the keys, the source holds none of them.
MODE `cancel`: start the migration, cancel it on the source (CANCELSLOTMIGRATIONS) once the
target shows the import, then check the source still owns and serves the slots and the
target kept no key of them. A migration that finished before its cancel arrived (a fast
machine) is no failure and no proof either: the slots are moved back and the cancel is tried
again on a new migration.
Waits are bounded by HANG (a bound on a hang, never a measure of speed).
Prints `RESULT ...` and exits 0 only when every check held.
"""
import sys
import threading
import time

import redis
from redis.cluster import RedisCluster

FIRST, LAST = 0, 0
# The bound on a hang (seconds), as the Rust tests' HANG.
HANG = 60.0


def jobs(r):
    out = []
    want = f"{FIRST}-{LAST}"
    for j in r.execute_command("CLUSTER", "GETSLOTMIGRATIONS"):
        # redis-py may already have paired the flat map into a dict.
        if not isinstance(j, dict):
            j = dict(zip(j[0::2], j[1::2]))
        dec = lambda x: x.decode() if isinstance(x, bytes) else x
        j = {dec(k): dec(v) for k, v in j.items()}
        if j.get("slot_ranges") == want:
            out.append(j)
    return out


def wait(what, f, limit=HANG):
    end = time.time() + limit
    while time.time() < end:
        v = f()
        if v:
            return v
        time.sleep(0.05)
    raise SystemExit(f"FAIL timed out waiting for: {what}")


def owner_port(r, slot):
    for start, end, primary, *_ in r.execute_command("CLUSTER", "SLOTS"):
        if start <= slot <= end:
            return int(primary[1])
    return None


def main() -> int:
    start_time = time.time()
    src_port, dst_port, first, last, nkeys = (int(x) for x in sys.argv[1:6])
    mode = sys.argv[6]
    global FIRST, LAST
    FIRST, LAST = first, last
    src = redis.Redis(port=src_port, socket_timeout=HANG)
    dst = redis.Redis(port=dst_port, socket_timeout=HANG)
    dst_id = dst.execute_command("CLUSTER", "MYID").decode()
    rc = RedisCluster(host="127.0.0.1", port=src_port, socket_timeout=HANG)
    keys = []
    i = 0
    while len(keys) < nkeys:
        k = f"mig:{i}"
        if first <= rc.keyslot(k) <= last:
            keys.append(k)
        i += 1
    for start in range(0, len(keys), 1000):
        with rc.pipeline(transaction=False) as p:
            for k in keys[start:start + 1000]:
                p.set(k, f"{k}:0")
            p.execute()
    acked = {k: f"{k}:0" for k in keys}
    stop = threading.Event()
    stats = {"writes": 0, "retries": 0}

    def writer():
        # Rewrites keys in turn; a failed write is retried until acknowledged, so `acked`
        # holds exactly the last acknowledged value of every key.
        w = RedisCluster(host="127.0.0.1", port=src_port, socket_timeout=HANG)
        seq = 0
        while not stop.is_set():
            seq += 1
            k = keys[seq % len(keys)]
            v = f"{k}:{seq}"
            while True:
                try:
                    w.set(k, v)
                    break
                except Exception:
                    stats["retries"] += 1
                    time.sleep(0.05)
            acked[k] = v
            stats["writes"] += 1

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    # Let the writer get going (it keeps writing during the migration either way).
    time.sleep(0.3)
    src_id = src.execute_command("CLUSTER", "MYID").decode()
    finished = ("success", "failed", "cancelled")

    def migrate(a, b_id):
        assert a.execute_command(
            "CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", first, last, "NODE", b_id
        ) in (b"OK", "OK", True)

    def new_jobs(r, old, op=None):
        return [j for j in jobs(r) if j["name"] not in old and (op is None or j["operation"] == op)]

    attempts = 0
    while True:
        attempts += 1
        old_src = {j["name"] for j in jobs(src)}
        old_dst = {j["name"] for j in jobs(dst)}
        migrate(src, dst_id)
        if mode == "cancel":
            wait("the import on the target", lambda: new_jobs(dst, old_dst, "IMPORT"))
            try:
                src.execute_command("CLUSTER", "CANCELSLOTMIGRATIONS")
            except redis.exceptions.ResponseError as e:
                # Already finished: the attempt below sees the export's success.
                if "No migrations ongoing" not in str(e):
                    raise
        sj = wait("source job finished", lambda: [j for j in new_jobs(src, old_src) if j["state"] in finished])
        dj = wait("target job finished", lambda: [j for j in new_jobs(dst, old_dst) if j["state"] in finished])
        if mode != "cancel" or sj[0]["state"] != "success" or time.time() > start_time + HANG:
            break
        # The migration finished before the cancel reached the source: move the slots back
        # and cancel a new one.
        print(f"attempt {attempts}: the migration finished before its cancel; moving the slots back", flush=True)
        wait("the new owner agreed", lambda: owner_port(src, first) == dst_port and owner_port(dst, last) == dst_port)
        old_back = {j["name"] for j in jobs(dst)}
        migrate(dst, src_id)
        back = wait("the move back finished", lambda: [j for j in new_jobs(dst, old_back, "EXPORT") if j["state"] in finished])
        assert back[0]["state"] == "success", f"moving the slots back: {back[0]}"
        wait("the slots back on the source", lambda: owner_port(src, first) == src_port and owner_port(dst, last) == src_port)
    # Writes after the end of the migration too.
    time.sleep(0.5)
    stop.set()
    t.join()
    src_state, dst_state = sj[0]["state"], dj[0]["state"]
    print(f"jobs (attempt {attempts}): source={sj[0]} target={dj[0]}")
    slots = range(first, last + 1)
    if mode == "cancel":
        ok_jobs = src_state == "cancelled" and dst_state == "failed"
        want_owner, other = src_port, dst
    else:
        ok_jobs = src_state == "success" and dst_state == "success"
        want_owner, other = dst_port, src
    # The new owner per both sides' view, and no key of the slots left on the other node
    # (the source drops them once it sees the new owner; the target rolls back its import).
    wait("slot ownership agreed", lambda: owner_port(src, first) == want_owner and owner_port(dst, last) == want_owner)
    wait("keys gone from the other node", lambda: sum(other.execute_command("CLUSTER", "COUNTKEYSINSLOT", s) for s in slots) == 0)
    owner = redis.Redis(port=want_owner, socket_timeout=HANG)
    held = sum(owner.execute_command("CLUSTER", "COUNTKEYSINSLOT", s) for s in slots)
    rc2 = RedisCluster(host="127.0.0.1", port=dst_port, socket_timeout=HANG)
    read_ok = 0
    lost = []
    for start in range(0, len(keys), 1000):
        chunk = keys[start:start + 1000]
        for k, v in zip(chunk, rc2.mget_nonatomic(chunk)):
            if v is not None and v.decode() == acked[k]:
                read_ok += 1
            else:
                lost.append((k, acked[k], v))
    # The owner serves writes to the slots now.
    rc2.set(keys[0], "after")
    served = rc2.get(keys[0]) == b"after"
    print(
        f"RESULT mode={mode} jobs_ok={ok_jobs} keys={len(keys)} read_ok={read_ok} "
        f"owner_holds={held} writes_during={stats['writes']} retries={stats['retries']} served={served}"
    )
    if lost:
        print(f"lost (first 5): {lost[:5]}")
    return 0 if ok_jobs and read_ok == len(keys) and held == len(keys) and served else 1


if __name__ == "__main__":
    sys.exit(main())

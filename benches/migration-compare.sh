#!/usr/bin/env bash
# Slot migration, atomic (CLUSTER MIGRATESLOTS) vs legacy (redis-cli --cluster reshard:
# SETSLOT + MIGRATE batches), between two ferrocluster-server primaries on loopback, with a
# concurrent write load on the moving slots.
#   node A (port 23970) owns slots 0-99 and 16383, node B (23971) owns 100-16382;
#   $KEYS keys with 100-byte values are put in 20 hash tags whose slots lie in 0-99;
#   ASM: A -> B of slots 0-99; then legacy: B -> A of the same 100 slots (redis-cli reshard).
# A Python writer (redis-py RedisCluster) sets keys of the moving slots during each move and
# records the longest time one write waited (redirects and retries included), overall and,
# for ASM, among the writes that overlapped the handoff (the write pause proper; the
# source's export state is polled every 2 ms to find it).
# Prints each move's total time, the ratio legacy/ASM and the longest write wait.
# Usage: benches/migration-compare.sh [KEYS, default 1000000] [PIPELINE, default 10]
# Env: FERROCLUSTER_SERVER=/path/to/binary to use a prebuilt server.
# Needs: redis-tools (apt-get install -y redis-tools) and redis-py (pip install redis).
set -euo pipefail
cd "$(dirname "$0")/.."
KEYS=${1:-1000000}
PIPELINE=${2:-10}
A=23970
B=23971
work=$(mktemp -d /tmp/ferrocluster-migcompare.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
command -v redis-cli >/dev/null || { echo "missing redis-cli: apt-get install -y redis-tools" >&2; exit 1; }
python3 -c "import redis.cluster" 2>/dev/null || { echo "missing redis-py: pip install redis" >&2; exit 1; }

BIN=${FERROCLUSTER_SERVER:-}
if [ -z "$BIN" ]; then
  cargo build --release -q -p ferrocluster-server
  BIN=target/release/ferrocluster-server
fi
for p in $A $B; do
  mkdir -p "$work/$p"
  "$BIN" --port $p --dir "$work/$p" --loglevel warning --cluster-node-timeout 3000 2>"$work/$p/log" &
  pids+=($!); disown
done
for p in $A $B; do
  for _ in $(seq 1 100); do redis-cli -p $p ping >/dev/null 2>&1 && break; sleep 0.1; done
done
# A keeps slot 16383: a primary that loses its last slot becomes a replica of the new owner.
redis-cli -p $A cluster addslotsrange 0 99 16383 16383 >/dev/null
redis-cli -p $B cluster addslotsrange 100 16382 >/dev/null
redis-cli -p $A cluster meet 127.0.0.1 $B >/dev/null
for _ in $(seq 1 200); do
  ok=0
  for p in $A $B; do redis-cli -p $p cluster info | grep -q cluster_state:ok && ok=$((ok+1)); done
  [ $ok = 2 ] && break; sleep 0.1
done
ID_A=$(redis-cli -p $A cluster myid)
ID_B=$(redis-cli -p $B cluster myid)

# 20 hash tags whose slots lie in 0-99; DEBUG POPULATE fills them with 100-byte values.
TAGS=$(python3 -c "
from redis.crc import key_slot
tags, seen, i = [], set(), 0
while len(tags) < 20:
    t = f't{i}'; s = key_slot(t.encode())
    if s < 100 and s not in seen: tags.append(t); seen.add(s)
    i += 1
print(' '.join(tags))")
per=$((KEYS / 20))
for t in $TAGS; do redis-cli -p $A debug populate $per "{$t}" 100 >/dev/null; done
echo "loaded $(redis-cli -p $A dbsize) keys in slots 0-99 on node A"

cat >"$work/writer.py" <<'EOF'
# Writes keys of the moving slots until the stop file appears, timing each write (redirects
# and retries included). A second thread polls the source's CLUSTER GETSLOTMIGRATIONS every
# 2 ms, so the handoff window (from the last poll that saw the export before its pause to the
# first that saw it end) is known. Prints: writes, worst wait, worst wait of a write that
# overlapped the handoff (ASM only; - when there was none), all in ms.
import os, sys, threading, time
import redis
from redis.cluster import RedisCluster
port, stop_file, tags = int(sys.argv[1]), sys.argv[2], sys.argv[3].split()
rc = RedisCluster(host="127.0.0.1", port=port, socket_timeout=30)
states = []  # (time, export state) transitions seen on the source
def poll():
    src = redis.Redis(port=port, socket_timeout=30)
    last = None
    while not os.path.exists(stop_file):
        try:
            rows = src.execute_command("CLUSTER", "GETSLOTMIGRATIONS")
        except Exception:
            rows = []
        st = None
        for row in rows or []:
            d = row if isinstance(row, dict) else dict(zip(row[::2], row[1::2]))
            d = {(k.decode() if isinstance(k, bytes) else k): v for k, v in d.items()}
            if d.get("operation") in (b"EXPORT", "EXPORT"):
                st = d.get("state")
                st = st.decode() if isinstance(st, bytes) else st
                break
        if st != last:
            states.append((time.time(), st))
            last = st
        time.sleep(0.002)
threading.Thread(target=poll, daemon=True).start()
writes, n, i = [], 0, 0
while not os.path.exists(stop_file):
    k = "{%s}:w%d" % (tags[i % len(tags)], i % 1000)
    t0 = time.time()
    while True:
        try:
            rc.set(k, "x" * 100); break
        except Exception:
            time.sleep(0.01)
    writes.append((t0, time.time())); n += 1; i += 1
worst = max((b - a for a, b in writes), default=0.0)
before = [t for t, st in states if st in ("snapshotting", "replicating")]
after = [t for t, st in states if st in ("success", "failed", "cancelled")]
handoff = -1.0
if before and after:
    lo = max(before)
    later = [t for t in after if t >= lo]
    if later:
        hi = min(later)
        handoff = max((b - a for a, b in writes if a <= hi and b >= lo), default=0.0)
print(f"{n} {worst*1000:.1f} " + (f"{handoff*1000:.1f}" if handoff >= 0 else "-"))
EOF

move() { # name, command... -> prints "name seconds writes worst_ms handoff_worst_ms"
  local name=$1; shift
  rm -f "$work/stop"
  python3 "$work/writer.py" $A "$work/stop" "$TAGS" >"$work/$name.writer" &
  local wpid=$!
  sleep 1
  local t0 t1
  t0=$(date +%s.%N)
  "$@"
  t1=$(date +%s.%N)
  touch "$work/stop"; wait $wpid
  read -r writes worst handoff <"$work/$name.writer"
  echo "$name $(echo "$t1 - $t0" | bc) $writes $worst $handoff"
}

asm() {
  redis-cli -p $A cluster migrateslots slotsrange 0 99 node "$ID_B" >/dev/null
  for _ in $(seq 1 36000); do
    st=$(redis-cli -p $A cluster getslotmigrations | sed -n '/^state$/{n;p;q}')
    case $st in success) return 0;; failed|cancelled) echo "ASM $st" >&2; exit 1;; esac
    sleep 0.05
  done
}
legacy() {
  redis-cli --cluster reshard 127.0.0.1:$B --cluster-from "$ID_B" --cluster-to "$ID_A" \
    --cluster-slots 100 --cluster-pipeline "$PIPELINE" --cluster-yes >"$work/reshard.log" 2>&1
}
r1=$(move asm asm)
echo "ASM:    $r1 (name seconds writes worst_write_ms worst_handoff_write_ms)"
echo "node B now holds $(redis-cli -p $B dbsize) keys, node A $(redis-cli -p $A dbsize)"
# The source drops the moved keys once it sees the new owner (dirty-slot deletion).
for _ in $(seq 1 600); do
  [ "$(redis-cli -p $A cluster countkeysinslot "$(redis-cli -p $A cluster keyslot "{${TAGS%% *}}")")" = 0 ] && break
  sleep 0.1
done
r2=$(move legacy legacy)
grep -q "Moving slot" "$work/reshard.log" || { echo "reshard failed:"; tail -20 "$work/reshard.log"; exit 1; }
echo "legacy: $r2 (name seconds writes worst_write_ms)"
echo "node A now holds $(redis-cli -p $A dbsize) keys, node B $(redis-cli -p $B dbsize)"
a=$(echo "$r1" | cut -d' ' -f2); l=$(echo "$r2" | cut -d' ' -f2)
echo "keys=$KEYS asm_s=$a legacy_s=$l legacy/asm=$(echo "scale=2; $l / $a" | bc)"

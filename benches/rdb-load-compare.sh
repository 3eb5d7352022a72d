#!/usr/bin/env bash
# RDB load time of 1M keys, ours vs redis-server 7.0 and valkey-server 9.1, on the same file:
# each server makes the data (DEBUG POPULATE 1000000: key:N -> value:N) and saves it; the
# server's load time is the client-side time of DEBUG RELOAD NOSAVE after FLUSHALL SYNC (best
# of 3); ours is criterion's `rdb/decode_file` (feed 64 KiB chunks to RdbDecoder, insert every
# entry into a KvStore, as a server loads) and `rdb/decode_file_only` (the decoder alone) on
# that same dump.rdb. Ratio = server time / our time (> 1: we load faster).
# Then whole servers at start-up: redis-server 7.0 and ferrocluster-server (release) each
# started on that file, their "DB loaded from disk: X seconds" log lines (both time the read
# and the decode into the keyspace).
#
#   /work/tools/nsrun <namespace> benches/rdb-load-compare.sh
#
# Listens on 127.0.0.1:23846-23849 (run it inside a network namespace). One run, side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/real-servers.sh

reload_time() { # port -> best of 3 DEBUG RELOAD NOSAVE, seconds
  python3 - "$1" <<'PY'
import sys, time, redis
r = redis.Redis(port=int(sys.argv[1]))
best = None
for _ in range(3):
    r.flushall(asynchronous=False)
    t = time.perf_counter()
    r.execute_command("DEBUG", "RELOAD", "NOSAVE")
    d = time.perf_counter() - t
    assert r.dbsize() == 1_000_000, r.dbsize()
    best = d if best is None else min(best, d)
print(f"{best:.4f}")
PY
}

ours_time() { # file -> criterion's median estimates for rdb/decode_file and
  # rdb/decode_file_only, seconds, space-separated
  RDB_BENCH_FILE="$1" cargo bench -q -p ferrocluster-benches --bench rdb_codec -- \
    --noplot 'rdb/decode_file' 2>&1 | tee "$work/criterion.out" >/dev/null
  python3 - "$work/criterion.out" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
out = []
for name in ("decode_file", "decode_file_only"):
    m = re.search(r"rdb/" + name + r"\s+time:\s+\[\S+ \S+ (\S+) (\S+)", text)
    if not m: sys.exit(f"no {name} estimate in criterion output:\n" + text)
    v, unit = float(m.group(1)), m.group(2)
    out.append(f"{v * {'s': 1, 'ms': 1e-3, 'µs': 1e-6, 'us': 1e-6, 'ns': 1e-9}[unit]:.4f}")
print(" ".join(out))
PY
}

start_server redis redis-server 23846 --enable-debug-command yes
start_server valkey valkey-server 23847 --enable-debug-command yes
for p in 23846 23847; do
  redis-cli -p "$p" debug populate 1000000 >/dev/null
  redis-cli -p "$p" save >/dev/null
done
echo "server   file bytes  server load s  ours load s  ratio   ours decode-only s  ratio"
for n in redis:23846 valkey:23847; do
  name=${n%%:*}; port=${n##*:}
  file="$work/$name/dump.rdb"
  srv=$(reload_time "$port")
  read -r ours only < <(ours_time "$file")
  python3 -c "print(f'{\"$name\":<8} {$(stat -c %s "$file"):>10}  {$srv:>13}  {$ours:>11}  {$srv / $ours:.2f}x  {$only:>18}  {$srv / $only:.2f}x')"
done

loaded_secs() { # log file -> the seconds of its "DB loaded from disk" line
  for _ in $(seq 600); do
    if grep -q "DB loaded from disk" "$1" 2>/dev/null; then
      grep -o "DB loaded from disk: [0-9.]*" "$1" | tail -1 | awk '{print $5}'
      return 0
    fi
    sleep 0.1
  done
  echo "no load line in $1" >&2
  cat "$1" >&2
  exit 1
}

cargo build -q --release -p ferrocluster-server
echo
echo "start-up load of the redis-server 7.0 file (1M keys)"
file="$work/redis/dump.rdb"
for who in redis-start ours-start; do
  mkdir -p "$work/$who"
  cp "$file" "$work/$who/dump.rdb"
done
redis-server --port 23848 --bind 127.0.0.1 --dir "$work/redis-start" --save "" \
  --appendonly no --logfile "$work/redis-start/log" &
pids+=($!)
redis_s=$(loaded_secs "$work/redis-start/log")
target/release/ferrocluster-server --port 23849 --bind 127.0.0.1 --dir "$work/ours-start" \
  --cluster-enabled no --save "" --logfile "$work/ours-start/log" &
pids+=($!)
ours_s=$(loaded_secs "$work/ours-start/log")
python3 -c "print(f'redis-server {$redis_s} s, ferrocluster-server {$ours_s} s: ratio {$redis_s / $ours_s:.2f}x (> 1: we load faster)')"

#!/usr/bin/env bash
# Write latency while the data set is being persisted, ferrocluster-server vs redis-server 7.0,
# same load, one run (issue 19's closing figures):
#   each server (standalone, `appendonly yes`, `appendfsync everysec`, `save ""`) holds $KEYS
#   keys (DEBUG POPULATE $KEYS key 100); then `redis-benchmark -t set -n $N -c 20 -r $KEYS
#   --csv` runs three times: with nothing else going on (baseline), while BGSAVE runs back to
#   back for the whole run, and while BGREWRITEAOF runs back to back for the whole run.
# Prints p50 / p99 / max of each run (ms, redis-benchmark's figures) and the p99 ratio
# ours / redis per case.
#
# Why the figures differ: redis-server forks, so the parent keeps serving while the child
# writes (its cost: copy-on-write faults); ours copies the live keys under the state lock
# (`snapshot::KeyspaceCopy`, one pass over the tables: BGSAVE and the rewrite alike,
# `examples/server/src/persist.rs`, `src/aof.rs`) and encodes and writes the copy on a thread,
# so the writes that arrive during the copy wait for it (one run, 500k keys, 2 loaded cores:
# the longest wait 547 ms; it was 1.68 s while the whole encoding ran under the lock).
#
# Ports 23970 (ours) and 23980 (redis). Run inside a network namespace on a shared machine.
# Usage: benches/persist-latency-compare.sh [KEYS, default 500000] [N, default 200000]
# Env: FERROCLUSTER_SERVER=/path/to/binary (default target/release/ferrocluster-server, built).
set -euo pipefail
cd "$(dirname "$0")/.."
KEYS=${1:-500000}
N=${2:-200000}
OURS=23970
REDIS=23980
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
for tool in redis-server redis-cli redis-benchmark; do
  command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 1; }
done
bin=${FERROCLUSTER_SERVER:-}
if [ -z "$bin" ]; then
  cargo build --release -q -p ferrocluster-server
  bin=target/release/ferrocluster-server
fi
mkdir -p "$work/ours" "$work/redis"
"$bin" --port $OURS --cluster-enabled no --dir "$work/ours" --save "" --appendonly yes \
  --appendfsync everysec --logfile "$work/ours/log" &
pids+=($!)
redis-server --port $REDIS --dir "$work/redis" --save "" --appendonly yes --appendfsync everysec \
  --logfile "$work/redis/log" &
pids+=($!)
for p in $OURS $REDIS; do
  for _ in $(seq 100); do redis-cli -p $p ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p $p debug populate "$KEYS" key 100 >/dev/null
done

busy() { # port, INFO field: 1 while the operation runs
  redis-cli -p "$1" info persistence | tr -d '\r' | awk -F: -v f="$2" '$1 == f { print $2 }'
}

# port, case -> "p50 p99 max" of one redis-benchmark run with the case's background work
run() {
  local port=$1 case=$2 out="$work/bench-$1-$2.csv"
  redis-benchmark -p "$port" -t set -n "$N" -c 20 -r "$KEYS" -d 100 --csv >"$out" 2>/dev/null &
  local b=$!
  case $case in
    bgsave) cmd=BGSAVE; field=rdb_bgsave_in_progress ;;
    rewrite) cmd=BGREWRITEAOF; field=aof_rewrite_in_progress ;;
    *) cmd= ;;
  esac
  local ops=0
  while kill -0 $b 2>/dev/null; do
    if [ -n "$cmd" ] && [ "$(busy "$port" $field)" = 0 ]; then
      redis-cli -p "$port" $cmd >/dev/null && ops=$((ops + 1))
    fi
    sleep 0.05
  done
  wait $b
  # "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
  tail -1 "$out" | tr -d '"' | awk -F, -v ops=$ops '{ print $5, $7, $8, ops }'
}

printf '%-8s %-6s %8s %8s %8s %6s\n' case server p50_ms p99_ms max_ms ops
for c in baseline bgsave rewrite; do
  read -r o50 o99 omax oops < <(run $OURS $c)
  read -r r50 r99 rmax rops < <(run $REDIS $c)
  printf '%-8s %-6s %8s %8s %8s %6s\n' $c ours "$o50" "$o99" "$omax" "$oops"
  printf '%-8s %-6s %8s %8s %8s %6s\n' $c redis "$r50" "$r99" "$rmax" "$rops"
  awk -v a="$o99" -v b="$r99" -v c=$c 'BEGIN { if (b > 0) printf "%-8s p99 ratio ours/redis: %.2f\n", c, a / b }'
done

#!/usr/bin/env bash
# Compares one ferrocluster-server node with redis-server 7.0 (Debian), both in cluster mode
# owning all 16384 slots, on loopback:
#   redis-benchmark -t set,get -n $N -P 16 -c 50   (pipelined)
#   redis-benchmark -t set,get -n $N -c 50         (no pipelining)
#   memory growth (RSS) after DEBUG POPULATE $KEYS key 8
# and prints ratios (ferrocluster / redis). Ports 23950 (ours) and 23960 (redis), bus +10000.
# Usage: benches/server-compare.sh [N requests, default 1000000] [KEYS, default 1000000]
# Env: FERROCLUSTER_SERVER=/path/to/binary to use a prebuilt server.
# Needs: redis-server and redis-tools (apt-get install -y redis-server redis-tools).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
KEYS=${2:-1000000}
OURS=23950
REDIS=23960
work=$(mktemp -d /tmp/ferrocluster-compare.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

for tool in redis-server redis-cli redis-benchmark; do
  command -v "$tool" >/dev/null || { echo "missing $tool: apt-get install -y redis-server redis-tools" >&2; exit 1; }
done

# FERROCLUSTER_SERVER=path skips the build (e.g. a binary built elsewhere).
BIN=${FERROCLUSTER_SERVER:-}
if [ -z "$BIN" ]; then
  cargo build --release -q -p ferrocluster-server
  BIN=target/release/ferrocluster-server
fi
mkdir -p "$work/ours" "$work/redis"
"$BIN" --port $OURS --dir "$work/ours" --loglevel warning 2>"$work/ours/log" &
pids+=($!); disown
redis-server --port $REDIS --cluster-enabled yes --cluster-config-file "$work/redis/nodes.conf" \
  --dir "$work/redis" --save "" --appendonly no --enable-debug-command yes --daemonize no \
  --loglevel warning >"$work/redis/log" 2>&1 &
pids+=($!); disown

wait_ok() {
  local port=$1
  for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p "$port" cluster addslotsrange 0 16383 >/dev/null
  for _ in $(seq 1 100); do
    redis-cli -p "$port" cluster info | grep -q cluster_state:ok && return 0; sleep 0.1
  done
  echo "node $port did not reach cluster_state:ok" >&2; exit 1
}
wait_ok $OURS
wait_ok $REDIS

bench() { # port, extra args -> "set_rps get_rps"
  local port=$1; shift
  redis-benchmark -p "$port" -t set,get -n "$N" -c 50 "$@" --csv 2>/dev/null |
    awk -F'","' '/^"SET"/{s=$2} /^"GET"/{g=$2} END{gsub(/"/,"",s); gsub(/"/,"",g); print s, g}'
}
rss() { redis-cli -p "$1" info memory | awk -F: '/^used_memory_rss:/{gsub(/\r/,"",$2); print $2}'; }
mem_per_key() { # port -> bytes per key (RSS growth)
  local port=$1 before after
  redis-cli -p "$port" flushall >/dev/null
  sleep 0.5
  before=$(rss "$port")
  redis-cli -p "$port" debug populate "$KEYS" key 8 >/dev/null
  sleep 0.5
  after=$(rss "$port")
  echo $(( (after - before) / KEYS ))
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

echo "redis-benchmark -n $N -c 50, SET/GET requests per second"
read -r o_set_p o_get_p < <(bench $OURS -P 16)
read -r r_set_p r_get_p < <(bench $REDIS -P 16)
read -r o_set o_get < <(bench $OURS)
read -r r_set r_get < <(bench $REDIS)
o_mem=$(mem_per_key $OURS)
r_mem=$(mem_per_key $REDIS)
printf '%-22s %14s %14s %8s\n' "" "ferrocluster" "redis 7.0" "ratio"
printf '%-22s %14s %14s %8s\n' "SET -P 16" "$o_set_p" "$r_set_p" "$(ratio "$o_set_p" "$r_set_p")"
printf '%-22s %14s %14s %8s\n' "GET -P 16" "$o_get_p" "$r_get_p" "$(ratio "$o_get_p" "$r_get_p")"
printf '%-22s %14s %14s %8s\n' "SET" "$o_set" "$r_set" "$(ratio "$o_set" "$r_set")"
printf '%-22s %14s %14s %8s\n' "GET" "$o_get" "$r_get" "$(ratio "$o_get" "$r_get")"
printf '%-22s %14s %14s %8s\n' "RSS bytes/key" "$o_mem" "$r_mem" "$(ratio "$o_mem" "$r_mem")"

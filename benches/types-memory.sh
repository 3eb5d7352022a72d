#!/usr/bin/env bash
# Memory per element of one big collection, ferrocluster-server vs redis-server 7.0 (Debian),
# side by side in one run: for each type, FLUSHALL, read used_memory_rss, load one key with N
# elements through redis-cli --pipe (1000 elements per command), read it again; bytes per
# element = RSS growth / N. Ratio = ours / redis (the target is <= 0.7).
#
# Elements (about 8 bytes each, as a cache's ids and small values):
#   hash  HSET key f:<i> v:<i>       set   SADD key m:<i>
#   list  RPUSH key e:<i>            zset  ZADD key <i> m:<i>
# Both servers run standalone (no cluster): the keyspace layout is not what is measured.
#
# Ports 23970 (ours) and 23971 (redis).
# Usage: benches/types-memory.sh [N elements, default 1000000]
# Env: TYPES="hash set" (default: hash set list zset; a type our server does not serve yet
#      fails loudly); FERROCLUSTER_SERVER=/path/to/binary to skip the build.
# Needs: redis-server, redis-tools, python3.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
TYPES=${TYPES:-"hash set list zset"}
OURS=${OURS_PORT:-23970}
REDIS=${REDIS_PORT:-23971}
work=$(mktemp -d /tmp/ferrocluster-types-memory.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
for tool in redis-server redis-cli python3; do
  command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 1; }
done
BIN=${FERROCLUSTER_SERVER:-}
if [ -z "$BIN" ]; then
  cargo build --release -q -p ferrocluster-server
  BIN=target/release/ferrocluster-server
fi
mkdir -p "$work/ours" "$work/redis"
"$BIN" --port "$OURS" --dir "$work/ours" --cluster-enabled no --loglevel warning 2>"$work/ours/log" &
pids+=($!)
redis-server --port "$REDIS" --dir "$work/redis" --save "" --appendonly no --daemonize no \
  --loglevel warning >"$work/redis/log" 2>&1 &
pids+=($!)
for port in $OURS $REDIS; do
  for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
done

rss() { redis-cli -p "$1" info memory | awk -F: '/^used_memory_rss:/{gsub(/\r/,"",$2); print $2}'; }
# The RESP commands that build one key of `type` with N elements.
commands() {
  python3 - "$1" "$N" <<'EOF'
import sys
kind, n = sys.argv[1], int(sys.argv[2])
out = sys.stdout.buffer
def cmd(args):
    out.write(b"*%d\r\n" % len(args))
    for a in args:
        out.write(b"$%d\r\n%s\r\n" % (len(a), a))
for start in range(0, n, 1000):
    r = range(start, min(n, start + 1000))
    if kind == "hash":
        a = [b"HSET", b"big"] + [x for i in r for x in (b"f:%d" % i, b"v:%d" % i)]
    elif kind == "set":
        a = [b"SADD", b"big"] + [b"m:%d" % i for i in r]
    elif kind == "list":
        a = [b"RPUSH", b"big"] + [b"e:%d" % i for i in r]
    elif kind == "zset":
        a = [b"ZADD", b"big"] + [x for i in r for x in (b"%d" % i, b"m:%d" % i)]
    else:
        raise SystemExit("unknown type " + kind)
    cmd(a)
EOF
}
per_element() { # port type -> bytes per element
  local port=$1 type=$2 before after out
  redis-cli -p "$port" flushall >/dev/null
  sleep 1
  before=$(rss "$port")
  out=$(commands "$type" | redis-cli -p "$port" --pipe 2>&1)
  echo "$out" | grep -q "errors: 0," || { echo "loading $type on $port failed: $out" >&2; exit 1; }
  [ "$(redis-cli -p "$port" type big)" != none ] || { echo "no key after loading $type" >&2; exit 1; }
  sleep 1
  after=$(rss "$port")
  awk -v a="$after" -v b="$before" -v n="$N" 'BEGIN{printf "%.1f", (a - b) / n}'
}
printf '%-6s %14s %14s %7s   (N = %d, bytes of RSS per element)\n' type ferrocluster "redis 7.0" ratio "$N"
for type in $TYPES; do
  o=$(per_element "$OURS" "$type")
  r=$(per_element "$REDIS" "$type")
  printf '%-6s %14s %14s %7s   (ours: %s)\n' "$type" "$o" "$r" \
    "$(awk -v a="$o" -v b="$r" 'BEGIN{printf "%.2f", a / b}')" \
    "$(redis-cli -p "$OURS" object encoding big)"
done

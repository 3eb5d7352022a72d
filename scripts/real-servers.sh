# Sourced by scripts that run redis-server / valkey-server by hand (capture-rdb-vectors.sh,
# benches/rdb-load-compare.sh): a temp directory, a start function and a cleanup trap that
# kills what was started (by PID) and removes the directory.
#
#   . scripts/real-servers.sh
#   start_server NAME BINARY PORT [EXTRA ARGS...]   # dir $work/NAME, log $work/NAME/log
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 0.3
  rm -rf "$work"
}
trap cleanup EXIT

start_server() {
  local name=$1 bin=$2 port=$3
  shift 3
  mkdir -p "$work/$name"
  "$bin" --port "$port" --bind 127.0.0.1 --dir "$work/$name" --save "" --appendonly no \
    --logfile "$work/$name/log" "$@" &
  pids+=($!)
  for _ in $(seq 100); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "$name did not start" >&2
  cat "$work/$name/log" >&2
  exit 1
}

# Sourced by the benches that compare one node of ours with one real node
# (benches/server-compare.sh, benches/tls-compare.sh):
#
#   . scripts/one-node-cluster.sh
#   "${SERVER_CPU[@]}" server ...   # PIN=1 (default when taskset exists and there are at least
#   "${CLIENT_CPU[@]}" client ...   # 2 CPUs): servers on the last CPU, the client on CPU 0
#   own_every_slot PORT   # waits for PING, ADDSLOTSRANGE 0 16383, waits for cluster_state:ok
#
# own_every_slot exits the calling script with a message when the node never gets there (10 s
# each step).
cpus=$(nproc 2>/dev/null || echo 1)
if [ "${PIN:-1}" = 1 ] && command -v taskset >/dev/null && [ "$cpus" -ge 2 ]; then
  SERVER_CPU=(taskset -c $((cpus - 1)))
  CLIENT_CPU=(taskset -c 0)
else
  SERVER_CPU=()
  CLIENT_CPU=()
fi

own_every_slot() {
  local port=$1
  for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p "$port" cluster addslotsrange 0 16383 >/dev/null
  for _ in $(seq 1 100); do
    redis-cli -p "$port" cluster info | grep -q cluster_state:ok && return 0; sleep 0.1
  done
  echo "node $port did not reach cluster_state:ok" >&2; exit 1
}

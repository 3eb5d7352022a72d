# Sourced by the benches that compare one node of ours with one real node
# (benches/server-compare.sh, benches/tls-compare.sh):
#
#   . scripts/one-node-cluster.sh
#   own_every_slot PORT   # waits for PING, ADDSLOTSRANGE 0 16383, waits for cluster_state:ok
#
# Exits the calling script with a message when the node never gets there (10 s each step).
own_every_slot() {
  local port=$1
  for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p "$port" cluster addslotsrange 0 16383 >/dev/null
  for _ in $(seq 1 100); do
    redis-cli -p "$port" cluster info | grep -q cluster_state:ok && return 0; sleep 0.1
  done
  echo "node $port did not reach cluster_state:ok" >&2; exit 1
}

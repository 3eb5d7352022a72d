#!/usr/bin/env bash
# Server CPU per request with TLS vs without: one ferrocluster-server node and one
# redis-server 7.0 (Debian, built with TLS), both in cluster mode owning all 16384 slots, each
# with its plain port and a tls-port (mutual TLS: tls-auth-clients yes), on loopback:
#   redis-benchmark [--tls ...] -t set,get -n $N -c 50 [-P 16]
# For each shape (plain / TLS, -P 1 / -P 16) it prints requests per second and the server's
# CPU time per request (user + system from /proc/<pid>/stat over the SET and GET runs, us),
# ours and redis, and the ratios: rps ours / redis, cpu redis / ours (> 1: we use less), and
# each server's TLS cost (cpu with TLS / cpu plain). One run; the load average is printed
# with it (the machine may be shared: compare ratios, not absolute figures).
#
# Certificates: made at run time with the openssl CLI (a CA and one node certificate).
# Ports 23970 / 23971 (ours plain / TLS), 23980 / 23981 (redis), bus = TLS port + 10000 is not
# used (tls-cluster no) so the buses are port + 10000.
# Usage: benches/tls-compare.sh [N requests, default 200000]
# Env: FERROCLUSTER_SERVER=/path/to/binary (prebuilt), PIN=0 to not pin (default: servers on
#      the last CPU, redis-benchmark on CPU 0, as benches/server-compare.sh).
# Needs: redis-server, redis-tools, openssl (apt-get install -y redis-server redis-tools openssl).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-200000}
. scripts/one-node-cluster.sh
OURS=23970; OURS_TLS=23971; REDIS=23980; REDIS_TLS=23981
work=$(mktemp -d /tmp/ferrocluster-tls-compare.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
for tool in redis-server redis-cli redis-benchmark openssl; do
  command -v "$tool" >/dev/null || { echo "missing $tool: apt-get install -y redis-server redis-tools openssl" >&2; exit 1; }
done

# A CA and a node certificate (server and client use) for 127.0.0.1.
(
  cd "$work"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj "/CN=bench CA" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout node.key -out node.csr -subj "/CN=node" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' >ext
  openssl x509 -req -in node.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out node.crt -days 2 -extfile ext 2>/dev/null
)
TLS_FLAGS=(--tls-cert-file "$work/node.crt" --tls-key-file "$work/node.key" --tls-ca-cert-file "$work/ca.crt")
CLI_TLS=(--tls --cacert "$work/ca.crt" --cert "$work/node.crt" --key "$work/node.key")

BIN=${FERROCLUSTER_SERVER:-}
if [ -z "$BIN" ]; then
  cargo build --release -q -p ferrocluster-server
  BIN=target/release/ferrocluster-server
fi
mkdir -p "$work/ours" "$work/redis"
"${SERVER_CPU[@]}" "$BIN" --port $OURS --tls-port $OURS_TLS "${TLS_FLAGS[@]}" --dir "$work/ours" \
  --loglevel warning 2>"$work/ours/log" &
pids+=($!); disown; ours_pid=$!
"${SERVER_CPU[@]}" redis-server --port $REDIS --tls-port $REDIS_TLS "${TLS_FLAGS[@]}" --cluster-enabled yes \
  --cluster-config-file "$work/redis/nodes.conf" --dir "$work/redis" --save "" --appendonly no \
  --daemonize no --loglevel warning >"$work/redis/log" 2>&1 &
pids+=($!); disown; redis_pid=$!

own_every_slot $OURS
own_every_slot $REDIS
for p in $OURS_TLS $REDIS_TLS; do
  [ "$(redis-cli -p $p "${CLI_TLS[@]}" ping)" = PONG ] || { echo "TLS port $p does not answer" >&2; exit 1; }
done

tick=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
bench() { # port pid args... -> "set_rps get_rps cpu_us_per_request"
  local port=$1 pid=$2 c0 c1 rps; shift 2
  c0=$(cpu_ticks "$pid")
  rps=$("${CLIENT_CPU[@]}" redis-benchmark -p "$port" -t set,get -n "$N" -c 50 "$@" --csv 2>/dev/null |
    awk -F'","' '/^"SET"/{s=$2} /^"GET"/{g=$2} END{gsub(/"/,"",s); gsub(/"/,"",g); printf "%d %d", s, g}')
  c1=$(cpu_ticks "$pid")
  echo "$rps $(awk -v a="$c0" -v b="$c1" -v t="$tick" -v n="$N" 'BEGIN{printf "%.3f", (b - a) / t * 1e6 / (2 * n)}')"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

echo "redis-benchmark -t set,get -n $N -c 50; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-12s %10s %10s %10s %10s %10s %10s %10s\n' shape "ours SET" "redis SET" "ours GET" "redis GET" "ours us" "redis us" "cpu r/o"
declare -A cpu_o cpu_r
for tls in plain tls; do
  for p in 1 16; do
    if [ $tls = tls ]; then po=$OURS_TLS; pr=$REDIS_TLS; extra=("${CLI_TLS[@]}"); else po=$OURS; pr=$REDIS; extra=(); fi
    read -r os og oc < <(bench $po "$ours_pid" -P $p "${extra[@]}")
    read -r rs rg rc < <(bench $pr "$redis_pid" -P $p "${extra[@]}")
    cpu_o[$tls$p]=$oc; cpu_r[$tls$p]=$rc
    printf '%-12s %10s %10s %10s %10s %10s %10s %10s\n' "$tls -P $p" "$os" "$rs" "$og" "$rg" "$oc" "$rc" "$(ratio "$rc" "$oc")"
  done
done
echo
echo "TLS cost (cpu per request with TLS / without): ours -P 1 $(ratio "${cpu_o[tls1]}" "${cpu_o[plain1]}"), -P 16 $(ratio "${cpu_o[tls16]}" "${cpu_o[plain16]}"); redis -P 1 $(ratio "${cpu_r[tls1]}" "${cpu_r[plain1]}"), -P 16 $(ratio "${cpu_r[tls16]}" "${cpu_r[plain16]}")"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

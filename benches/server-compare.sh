#!/usr/bin/env bash
# Compares one ferrocluster-server node with redis-server 7.0 (Debian), both in cluster mode
# owning all 16384 slots, on loopback:
#   redis-benchmark -t set,get -n $N -P 16 -c 50   (pipelined)
#   redis-benchmark -t set,get -n $N -c 50         (no pipelining)
#   memory growth (RSS) after DEBUG POPULATE $KEYS key 8
# and prints ratios (ferrocluster / redis).
#
# Noise: the machine may be shared, so absolute figures drift. The script runs $ROUNDS
# alternating rounds (ours then redis in odd rounds, redis then ours in even rounds, for each
# of the two benchmark shapes), prints every round's figures and ratio, and the median ratio
# per measure. Compare ratios, not absolute numbers. Each round also reports the server's CPU
# time per request (user + system from /proc/<pid>/stat over the SET and GET runs, in us):
# it is far less sensitive to other load on the machine than requests per second.
#
# Then the whole default suite of redis-benchmark (every test it runs without -t), one test
# at a time so each gets its own server CPU figure: requests per second and CPU time per
# request, ours vs redis, without and with `--cluster` (the client fetches the slot map and
# sends each key to its node; here one node owns every slot). A test whose commands our
# server refuses is reported as `errors` instead of a ratio (redis-benchmark prints `Error
# from server` on one node; with --cluster it counts error replies as answers, so the
# test's command is also sent once by hand). The keyspace is flushed once per pass, not per
# test, so the pops pop real elements.
#
# Ports 23950 (ours) and 23960 (redis), bus +10000.
# Usage: benches/server-compare.sh [N requests, default 1000000] [KEYS, default 1000000]
# Env (suite): TESTS="set get ..." (default: the 19 default tests), SUITE_N=200000 requests
#      per test, SUITE=0 to skip the suite.
# Env: FERROCLUSTER_SERVER=/path/to/binary to use a prebuilt server;
#      FERROCLUSTER_ARGS="--io-threads 1" extra flags for our server;
#      ROUNDS=3 number of alternating rounds (default 3);
#      OURS_PORT / REDIS_PORT to move the two servers (defaults 23950 / 23960);
#      PIN=1 (default when taskset exists and there are at least 2 CPUs): both servers run
#      on the last CPU and redis-benchmark on CPU 0, so that client and server never share a
#      core (on 2 cores an unpinned single-threaded client and server migrate onto each
#      other's core at random, which is most of the round-to-round noise); PIN=0 to disable.
# Needs: redis-server and redis-tools (apt-get install -y redis-server redis-tools).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
KEYS=${2:-1000000}
ROUNDS=${ROUNDS:-3}
. scripts/one-node-cluster.sh
OURS=${OURS_PORT:-23950}
REDIS=${REDIS_PORT:-23960}
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
# shellcheck disable=SC2086 # FERROCLUSTER_ARGS is a list of flags
"${SERVER_CPU[@]}" "$BIN" --port $OURS --dir "$work/ours" --loglevel warning ${FERROCLUSTER_ARGS:-} 2>"$work/ours/log" &
pids+=($!); disown; ours_pid=$!
"${SERVER_CPU[@]}" redis-server --port $REDIS --cluster-enabled yes --cluster-config-file "$work/redis/nodes.conf" \
  --dir "$work/redis" --save "" --appendonly no --enable-debug-command yes --daemonize no \
  --loglevel warning >"$work/redis/log" 2>&1 &
pids+=($!); disown; redis_pid=$!

own_every_slot $OURS
own_every_slot $REDIS
# Both must be the nodes we started (another process on the port would answer MOVED).
for port in $OURS $REDIS; do
  [ "$(redis-cli -p "$port" cluster info | awk -F: '/^cluster_known_nodes:/{print $2+0}')" = 1 ] || {
    echo "port $port: not a lone node (port taken by another process?)" >&2; exit 1; }
done

tick=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; } # utime + stime of a pid
bench() { # port, pid, extra args -> "set_rps get_rps cpu_us_per_request"
  local port=$1 pid=$2 c0 c1 rps; shift 2
  c0=$(cpu_ticks "$pid")
  rps=$("${CLIENT_CPU[@]}" redis-benchmark -p "$port" -t set,get -n "$N" -c 50 "$@" --csv 2>/dev/null |
    awk -F'","' '/^"SET"/{s=$2} /^"GET"/{g=$2} END{gsub(/"/,"",s); gsub(/"/,"",g); printf "%d %d", s, g}')
  c1=$(cpu_ticks "$pid")
  echo "$rps $(awk -v a="$c0" -v b="$c1" -v t="$tick" -v n="$N" 'BEGIN{printf "%.3f", (b - a) / t * 1e6 / (2 * n)}')"
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
median() { # numbers as arguments -> median ("n/a" ignored)
  printf '%s\n' "$@" | grep -v n/a | sort -g |
    awk '{v[NR]=$1} END{ if (NR == 0) print "n/a"; else if (NR % 2) printf "%.2f", v[(NR+1)/2];
      else printf "%.2f", (v[NR/2] + v[NR/2+1]) / 2 }'
}

# Per measure: the list of per-round ratios.
r_setp=(); r_getp=(); r_set=(); r_get=(); c_p=(); c_plain=()
row() { printf '%-6s %-10s %13s %13s %7s\n' "$@"; }
echo "redis-benchmark -n $N -c 50, SET/GET requests per second, $ROUNDS alternating rounds"
echo "(cpu: server CPU us per request over the SET and GET runs; its ratio is redis / ours)"
row round measure ferrocluster "redis 7.0" ratio
for round in $(seq 1 "$ROUNDS"); do
  for shape in pipelined plain; do
    extra=(); [ $shape = pipelined ] && extra=(-P 16)
    if (( round % 2 )); then
      read -r o_set o_get o_cpu < <(bench $OURS "$ours_pid" "${extra[@]}")
      read -r r_set0 r_get0 r_cpu < <(bench $REDIS "$redis_pid" "${extra[@]}")
    else
      read -r r_set0 r_get0 r_cpu < <(bench $REDIS "$redis_pid" "${extra[@]}")
      read -r o_set o_get o_cpu < <(bench $OURS "$ours_pid" "${extra[@]}")
    fi
    rs=$(ratio "$o_set" "$r_set0"); rg=$(ratio "$o_get" "$r_get0"); rc=$(ratio "$r_cpu" "$o_cpu")
    if [ $shape = pipelined ]; then
      r_setp+=("$rs"); r_getp+=("$rg"); c_p+=("$rc"); label="-P 16"
    else
      r_set+=("$rs"); r_get+=("$rg"); c_plain+=("$rc"); label=""
    fi
    row "$round" "SET $label" "$o_set" "$r_set0" "$rs"
    row "$round" "GET $label" "$o_get" "$r_get0" "$rg"
    row "$round" "cpu $label" "$o_cpu" "$r_cpu" "$rc"
  done
done
o_mem=$(mem_per_key $OURS)
r_mem=$(mem_per_key $REDIS)
echo
echo "median ratio over $ROUNDS rounds (ferrocluster / redis):"
printf '%-22s %8s   (%s)\n' "SET -P 16" "$(median "${r_setp[@]}")" "${r_setp[*]}"
printf '%-22s %8s   (%s)\n' "GET -P 16" "$(median "${r_getp[@]}")" "${r_getp[*]}"
printf '%-22s %8s   (%s)\n' "SET" "$(median "${r_set[@]}")" "${r_set[*]}"
printf '%-22s %8s   (%s)\n' "GET" "$(median "${r_get[@]}")" "${r_get[*]}"
printf '%-22s %8s   (%s)\n' "CPU/request -P 16" "$(median "${c_p[@]}")" "${c_p[*]}   redis / ours"
printf '%-22s %8s   (%s)\n' "CPU/request" "$(median "${c_plain[@]}")" "${c_plain[*]}   redis / ours"
printf '%-22s %8s   (%s vs %s bytes/key)\n' "RSS bytes/key" "$(ratio "$o_mem" "$r_mem")" "$o_mem" "$r_mem"

[ "${SUITE:-1}" = 1 ] || exit 0
TESTS=${TESTS:-"ping_inline ping_mbulk set get incr lpush rpush lpop rpop sadd hset spop zadd zpopmin lrange_100 lrange_300 lrange_500 lrange_600 mset"}
SUITE_N=${SUITE_N:-200000}
# The command each test sends, for the by-hand check (`{t}`: any hash tag).
probe() {
  case $1 in
    ping_*) echo PING ;; set) echo SET key:{t} v ;; get) echo GET key:{t} ;;
    incr) echo INCR counter:{t} ;; lpush) echo LPUSH mylist:{t} x ;; rpush) echo RPUSH mylist:{t} x ;;
    lpop) echo LPOP mylist:{t} ;; rpop) echo RPOP mylist:{t} ;; sadd) echo SADD myset:{t} x ;;
    hset) echo HSET myhash:{t} f v ;; spop) echo SPOP myset:{t} ;; zadd) echo ZADD myzset:{t} 1 x ;;
    zpopmin) echo ZPOPMIN myzset:{t} ;; lrange_*) echo LRANGE mylist:{t} 0 9 ;;
    mset) echo MSET key:{t}a v key:{t}b v ;; *) echo PING ;;
  esac
}
suite_run() { # port pid test cluster(0/1) -> "rps1[,rps2] cpu_us_per_request" or "errors"
  local port=$1 pid=$2 t=$3 cl=$4 c0 c1 out rps extra=()
  [ "$cl" = 1 ] && extra=(--cluster)
  c0=$(cpu_ticks "$pid")
  out=$("${CLIENT_CPU[@]}" redis-benchmark -p "$port" -t "$t" -n "$SUITE_N" -c 50 -r 100000 "${extra[@]}" --csv 2>&1)
  c1=$(cpu_ticks "$pid")
  # shellcheck disable=SC2046 # the probe is a list of words
  if echo "$out" | grep -q "Error from server" ||
     redis-cli -p "$port" $(probe "$t") 2>&1 | grep -qE "^(ERR|WRONGTYPE)"; then
    echo errors; return
  fi
  # The test's own rows (LRANGE tests also print their LPUSH set-up row first: the last row
  # is the test's).
  rps=$(echo "$out" | awk -F'","' '/^"[A-Z]/{v=$2} END{gsub(/"/,"",v); printf "%d", v}')
  echo "$rps $(awk -v a="$c0" -v b="$c1" -v t="$tick" -v n="$SUITE_N" 'BEGIN{printf "%.3f", (b - a) / t * 1e6 / n}')"
}
echo
echo "redis-benchmark default suite, -n $SUITE_N -c 50 -r 100000, one test at a time"
printf '%-12s %-8s %12s %12s %7s %10s %10s %7s\n' test client "ours rps" "redis rps" ratio "ours us" "redis us" "cpu r/o"
for cl in 0 1; do
  label=$([ $cl = 1 ] && echo --cluster || echo plain)
  # One flush per pass, as redis-benchmark's own default run keeps the keyspace between tests:
  # LPOP/RPOP then pop what LPUSH/RPUSH pushed, SPOP what SADD added, ZPOPMIN what ZADD added.
  redis-cli -p $OURS flushall >/dev/null
  redis-cli -p $REDIS flushall >/dev/null
  for t in $TESTS; do
    read -r o_rps o_cpu < <(suite_run $OURS "$ours_pid" "$t" $cl)
    read -r r_rps r_cpu < <(suite_run $REDIS "$redis_pid" "$t" $cl)
    if [ "$o_rps" = errors ]; then
      printf '%-12s %-8s %12s %12s %7s\n' "$t" "$label" errors "$r_rps" "-"
      continue
    fi
    printf '%-12s %-8s %12s %12s %7s %10s %10s %7s\n' "$t" "$label" "$o_rps" "$r_rps" \
      "$(ratio "$o_rps" "$r_rps")" "$o_cpu" "$r_cpu" "$(ratio "$r_cpu" "$o_cpu")"
  done
done

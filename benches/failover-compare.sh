#!/usr/bin/env bash
# Failover time in one mixed cluster (issue 22): a shard of ferrocluster-server nodes beside a
# shard of valkey-server 9.1 nodes, both failed over by kill -9 of their primary, at the same
# node timeout. Time = from the kill to the moment every live node's CLUSTER NODES shows the
# old primary `fail` and its replica `master` (polled every 20 ms).
#
# Shape: 6 primaries (3 ours, 3 valkey), each with one replica of its own kind, formed with
# redis-cli --cluster create + add-node --cluster-slave. Each round kills the primary of one
# shard of ours and then of one shard of valkey's (alternating which kind goes first), waits
# for the failover, restarts the killed node (it rejoins as a replica of the new primary) and
# waits until every node sees it healthy again.
#
# Ports: ours 23940-23945, valkey 23946-23951 (bus +10000).
# Usage: benches/failover-compare.sh [ROUNDS, default 6] [NODE_TIMEOUT ms, default 5000]
# Env: FERROCLUSTER_SERVER=/path/to/binary (else a release build).
# Needs: redis-tools, valkey-server 9.1 on PATH (.ci/run installs both), python3.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-6}
NT=${2:-5000}
work=$(mktemp -d /tmp/ferrocluster-failover.XXXXXX)
BIN=${FERROCLUSTER_SERVER:-}
if [ -z "$BIN" ]; then
  cargo build --release -q -p ferrocluster-server
  BIN=target/release/ferrocluster-server
fi
command -v valkey-server >/dev/null || { echo "missing valkey-server (see .ci/run)" >&2; exit 1; }
command -v redis-cli >/dev/null || { echo "missing redis-cli: apt-get install -y redis-tools" >&2; exit 1; }
trap 'pkill -9 -f "$work" 2>/dev/null || true; rm -rf "$work"' EXIT
export BIN NT WORK="$work" ROUNDS
python3 - <<'PY'
import os, subprocess, time, statistics, sys

BIN, NT, WORK, ROUNDS = os.environ["BIN"], int(os.environ["NT"]), os.environ["WORK"], int(os.environ["ROUNDS"])
OURS, VALKEY = list(range(23940, 23946)), list(range(23946, 23952))
procs = {}

def cli(port, *args, check=True):
    r = subprocess.run(["redis-cli", "-p", str(port), *map(str, args)], capture_output=True, text=True, timeout=10)
    if check and r.returncode != 0:
        raise RuntimeError(f"redis-cli -p {port} {args}: {r.stderr}")
    return r.stdout

def start(port):
    d = os.path.join(WORK, str(port))
    os.makedirs(d, exist_ok=True)
    log = open(os.path.join(d, "log"), "a")
    if port in OURS:
        cmd = [BIN, "--port", str(port), "--dir", d, "--cluster-node-timeout", str(NT), "--loglevel", "notice"]
    else:
        cmd = ["valkey-server", "--port", str(port), "--cluster-enabled", "yes", "--dir", d,
               "--cluster-config-file", os.path.join(d, "nodes.conf"), "--cluster-node-timeout", str(NT),
               "--save", "", "--appendonly", "no", "--daemonize", "no"]
    procs[port] = subprocess.Popen(cmd, stdout=log, stderr=log)
    for _ in range(200):
        if subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True).returncode == 0:
            return
        time.sleep(0.05)
    sys.exit(f"node {port} did not start")

def nodes(port):
    out = {}
    for line in cli(port, "cluster", "nodes", check=False).splitlines():
        f = line.split()
        if len(f) >= 8:
            out[f[0]] = (f[2].split(","), f[3])
    return out

def myid(port):
    return cli(port, "cluster", "myid").strip()

for p in OURS + VALKEY:
    start(p)
prim = [OURS[0], OURS[1], OURS[2], VALKEY[0], VALKEY[1], VALKEY[2]]
subprocess.run(["redis-cli", "--cluster", "create", *[f"127.0.0.1:{p}" for p in prim], "--cluster-yes"],
               check=True, capture_output=True)
for p, r in zip(prim, [OURS[3], OURS[4], OURS[5], VALKEY[3], VALKEY[4], VALKEY[5]]):
    time.sleep(1)
    subprocess.run(["redis-cli", "--cluster", "add-node", f"127.0.0.1:{r}", f"127.0.0.1:{p}",
                    "--cluster-slave", "--cluster-master-id", myid(p)], check=True, capture_output=True)

def healthy(live):
    views = [nodes(p) for p in live]
    return all(len(v) == 12 and all(not ({"fail", "fail?", "handshake", "noaddr"} & set(fl)) for fl, _ in v.values())
               for v in views)

def wait(cond, limit, what):
    end = time.time() + limit
    while time.time() < end:
        if cond():
            return
        time.sleep(0.02)
    sys.exit(f"timed out: {what}")

live = OURS + VALKEY
wait(lambda: healthy(live), 120, "cluster formed")
# Some data in every shard (Valkey 9 refuses to elect a replica at offset 0), then let the
# replicas advertise their offsets.
for i in range(300):
    subprocess.run(["redis-cli", "-c", "-p", str(OURS[0]), "set", f"k{i}", "v"], capture_output=True)
time.sleep(3)

def primary_of_kind(kind_ports):
    for p in kind_ports:
        info = cli(p, "info", "replication")
        if "role:master" in info and "connected_slaves:1" in info:
            return p
    sys.exit("no primary with a replica")

times = {"ours": [], "valkey": []}
for rnd in range(ROUNDS):
    order = [("ours", OURS), ("valkey", VALKEY)] if rnd % 2 == 0 else [("valkey", VALKEY), ("ours", OURS)]
    for kind, ports in order:
        victim = primary_of_kind(ports)
        vid = myid(victim)
        replica_id = None
        for nid, (fl, master) in nodes(victim).items():
            if master == vid:
                replica_id = nid
        others = [p for p in live if p != victim]
        t0 = time.time()
        procs[victim].kill()
        procs[victim].wait()
        def done():
            for p in others:
                v = nodes(p)
                if "fail" not in v.get(vid, ([], ""))[0] or "master" not in v.get(replica_id, ([], ""))[0]:
                    return False
            return True
        wait(done, 60, f"{kind} failover")
        times[kind].append(time.time() - t0)
        print(f"round {rnd + 1}: {kind} {times[kind][-1]:.2f} s", flush=True)
        start(victim)
        wait(lambda: healthy(live), 120, "rejoin")
        time.sleep(2)

mo, mv = statistics.median(times["ours"]), statistics.median(times["valkey"])
print(f"node timeout {NT} ms, {ROUNDS} rounds: ours median {mo:.2f} s (min {min(times['ours']):.2f}, max {max(times['ours']):.2f}),"
      f" valkey 9.1 median {mv:.2f} s (min {min(times['valkey']):.2f}, max {max(times['valkey']):.2f}); ours/valkey {mo / mv:.3f}")
PY

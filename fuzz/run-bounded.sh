#!/usr/bin/env bash
# Bounded fuzzing, for CI and by hand: seeds each target's corpus from ../shared/vectors (real
# captures, copied at run time, never committed) and the repository's own captures, then runs
# every target.
#
#   fuzz/run-bounded.sh SECONDS [TARGET...]   by hand: each target for SECONDS seconds (default
#                                             30), random seeds, corpus kept in corpus/<target>/
#   fuzz/run-bounded.sh --ci [TARGET...]      CI: each target for the number of inputs that
#                                             ci-runs.txt gives it, seed 1, from a fresh corpus
#                                             of the seeds only: the same inputs on every run and
#                                             every machine, however fast (a crash is never
#                                             found by chance; longer runs by hand find new ones)
#
# Works with the machine's single stable toolchain: RUSTC_BOOTSTRAP=1 lets cargo-fuzz pass its
# -Z flags (AddressSanitizer and sanitizer coverage) to stable rustc. See fuzz/README.md.
# A crash fails the run (non-zero exit) and leaves the input in fuzz/artifacts/<target>/.
set -euo pipefail
cd "$(dirname "$0")"

ci=0
secs=30
if [ "${1:-}" = "--ci" ]; then
  ci=1
  shift
elif [ "$#" -gt 0 ]; then
  secs="$1"
  shift
fi

vectors="${FERROCLUSTER_VECTORS:-../../shared/vectors}"
if [ ! -f "$vectors/README.md" ]; then
  echo "run-bounded.sh: vectors not found at $vectors (set FERROCLUSTER_VECTORS)" >&2
  exit 1
fi

if ! command -v cargo-fuzz >/dev/null 2>&1; then
  echo "run-bounded.sh: cargo-fuzz is needed: cargo install cargo-fuzz --locked --version 0.13.1 (.ci/run installs it)" >&2
  exit 1
fi
export RUSTC_BOOTSTRAP=1

if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <(cargo fuzz list)
fi

# seed_<target> functions fill corpus/<target>; a target without one starts empty.
seed_bus_decode() {
  local dir="$1" f
  for f in "$vectors"/*/bus/*.bin; do
    cp "$f" "$dir/$(basename "$(dirname "$(dirname "$f")")")-$(basename "$f")"
  done
}

seed_bus_frame_decoder() {
  # Input = one seed byte (picks the read sizes) + the stream.
  local dir="$1" f i=0
  for f in "$vectors"/*/bus/*.bin; do
    i=$((i + 1))
    { printf "\\$(printf '%03o' $((i % 256)))"; cat "$f"; } >"$dir/one-$i"
  done
  for flavor in "$vectors"/*/bus; do
    { printf '\007'; cat "$flavor"/*.bin; } >"$dir/all-$(basename "$(dirname "$flavor")")"
  done
}

seed_nodes_conf() {
  local dir="$1" f i=0
  while IFS= read -r f; do
    i=$((i + 1))
    cp "$f" "$dir/conf-$i"
  done < <(find "$vectors" -name '*.conf' | sort)
}

# The replication targets take our own captures (crates/dataplane/tests/vectors, made by its
# capture.py): what real primaries sent (replica side) and what real replicas sent (primary side).
repl_vectors=../crates/dataplane/tests/vectors

seed_repl_replica_stream() {
  local dir="$1" f i=0
  for f in "$repl_vectors"/*/conn*.p2r.bin; do
    i=$((i + 1))
    { printf "\\$(printf '%03o' $((i % 256)))"; cat "$f"; } >"$dir/p2r-$i"
  done
}

seed_repl_primary_commands() {
  local dir="$1" f i=0
  for f in "$repl_vectors"/*/conn*.r2p.bin; do
    i=$((i + 1))
    cp "$f" "$dir/r2p-$i"
    { cat "$f"; printf '*1\r\n$4\r\nTICK\r\n*1\r\n$4\r\nSNAP\r\n'; cat "$f"; } >"$dir/mix-$i"
  done
}

# RDB vectors live in the repository (crates/rdb/tests/vectors, captured by
# scripts/capture-rdb-vectors.sh from redis-server 7.0 and valkey-server 9.1).
rdb_vectors=../crates/rdb/tests/vectors

seed_rdb_dump() {
  # Input = mode byte + bytes. Mode 0: a whole payload; mode 1: the object body (the target
  # appends a valid footer).
  local dir="$1" f n
  for f in "$rdb_vectors"/dump/*/*.bin; do
    n="$(basename "$(dirname "$f")")-$(basename "$f" .bin)"
    { printf '\000'; cat "$f"; } >"$dir/$n"
    { printf '\001'; head -c -10 "$f"; } >"$dir/$n-body"
  done
}

seed_rdb_stream() {
  # Input = one seed byte (picks the chunk sizes) + the file.
  local dir="$1" f i=0
  for f in "$rdb_vectors"/files/*.rdb "$rdb_vectors"/legacy/*.rdb; do
    i=$((i + 1))
    { printf "\\$(printf '%03o' $((i % 256)))"; cat "$f"; } >"$dir/$(basename "$f" .rdb)"
  done
}

seed_resp_request() {
  # Input = one byte picking the limits + the bytes of a captured case (the server's own
  # vectors, examples/server/tests/vectors/resp-cases.json).
  python3 - "$1" ../examples/server/tests/vectors/resp-cases.json <<'PY'
import json, os, sys
out, src = sys.argv[1], sys.argv[2]
for i, c in enumerate(json.load(open(src))["cases"]):
    data = bytearray([i % 4])
    for p in (c["send"] or []) + (c["then"] or []):
        data += (p["text"] if "text" in p else p["repeat"] * p["times"]).encode("latin-1")
    open(os.path.join(out, c["name"]), "wb").write(bytes(data[:70000]))
PY
}

# The slot migration targets take our captures of real Valkey 9.1 migrations
# (crates/dataplane/tests/vectors/asm, made by its capture.py) and of MIGRATE / RESTORE
# traffic (tests/vectors/migrate).
asm_vectors=$repl_vectors/asm
migrate_vectors=$repl_vectors/migrate

seed_asm_import_stream() {
  # Input = one seed byte (picks the read sizes) + what a real source sent.
  local dir="$1" f i=0
  for f in "$asm_vectors"/*/conn*.s2t.bin; do
    i=$((i + 1))
    { printf "\\$(printf '%03o' $((i % 256)))"; cat "$f"; } >"$dir/s2t-$i"
  done
}

seed_asm_export_replies() {
  # Input = mode byte (1: AUTH first) + seed byte + what a real target sent.
  local dir="$1" f i=0 mode
  for f in "$asm_vectors"/*/conn*.t2s.bin; do
    i=$((i + 1))
    mode=0
    case "$f" in */auth/*) mode=1 ;; esac
    { printf "\\$(printf '%03o' "$mode")\\$(printf '%03o' $((i % 256)))"; cat "$f"; } >"$dir/t2s-$i"
  done
}

seed_legacy_migrate() {
  # Input = mode byte (0: commands through RESTORE, 1: a target's replies to MIGRATE) + bytes.
  local dir="$1" f i=0
  for f in "$migrate_vectors"/*/*.s2t.bin; do
    i=$((i + 1))
    { printf '\000'; cat "$f"; } >"$dir/cmds-$i"
  done
  for f in "$migrate_vectors"/*/*.t2s.bin; do
    i=$((i + 1))
    { printf '\001'; cat "$f"; } >"$dir/replies-$i"
  done
}

seed_node_steps() {
  # Input = u16 big-endian length + that many bytes of captured frames + the steps. One seed
  # per captured frame (steps: a nodes.conf start, then bent captured frames, time and
  # persist acknowledgements), and one per flavour with all its frames.
  python3 - "$1" "$vectors" <<'PY'
import glob, os, sys
out, vectors = sys.argv[1], sys.argv[2]
steps = bytes([0, 0, 1, 2, 3, 1, 2, 3, 9, 7]) + bytes([5, 0, 1, 0, 0, 7, 200, 9, 1]) * 6
for flavor in sorted(glob.glob(os.path.join(vectors, "*", "bus"))):
    frames = [open(f, "rb").read() for f in sorted(glob.glob(os.path.join(flavor, "*.bin")))]
    name = os.path.basename(os.path.dirname(flavor))
    for i, f in enumerate(frames):
        f = f[:65535]
        open(os.path.join(out, f"{name}-{i}"), "wb").write(len(f).to_bytes(2, "big") + f + steps)
    allf = b"".join(frames)[:65535]
    open(os.path.join(out, f"{name}-all"), "wb").write(len(allf).to_bytes(2, "big") + allf + steps)
PY
}

seed_sim_schedule() {
  # Input = seed byte + (pause, step) pairs: eight fixed pseudo-random schedules of 24 steps
  # (the target reads any bytes as a schedule).
  python3 - "$1" <<'PY'
import os, random, sys
r = random.Random(21)
for i in range(8):
    open(os.path.join(sys.argv[1], f"schedule-{i}"), "wb").write(bytes(r.randrange(256) for _ in range(150)))
PY
}

# The ACL SETUSER lines of the ACL crate's real-server script, as name NUL rule NUL rule...
seed_acl_rules() {
  python3 - "$1" ../crates/acl/tests/vectors/script1.txt <<'PY'
import os, shlex, sys
for i, line in enumerate(open(sys.argv[2])):
    words = shlex.split(line)
    if len(words) > 2 and words[0].upper() == "ACL" and words[1].upper() == "SETUSER":
        open(os.path.join(sys.argv[1], f"setuser-{i}"), "wb").write(b"\0".join(w.encode() for w in words[2:]))
PY
}

# --ci: the number of inputs of each target (ci-runs.txt: "target runs" lines).
ci_runs() {
  awk -v t="$1" '!/^#/ && $1 == t { print $2 }' ci-runs.txt
}

status=0
for t in "${targets[@]}"; do
  if [ "$ci" = 1 ]; then
    runs="$(ci_runs "$t")"
    if [ -z "$runs" ]; then
      echo "=== fuzz $t: no run count in fuzz/ci-runs.txt" >&2
      status=1
      continue
    fi
    corpus="$(mktemp -d)"
    limit=(-seed=1 "-runs=$runs")
  else
    corpus="corpus/$t"
    limit=("-max_total_time=$secs")
  fi
  mkdir -p "$corpus"
  if declare -F "seed_$t" >/dev/null; then
    "seed_$t" "$corpus"
  fi
  echo "=== fuzz $t: ${limit[*]} (corpus: $(find "$corpus" -type f | wc -l) inputs)"
  t0=$(date +%s)
  if ! cargo fuzz run "$t" "$corpus" -- "${limit[@]}" -rss_limit_mb=4096 -print_final_stats=1; then
    echo "=== fuzz $t FAILED (see fuzz/artifacts/$t/)"
    status=1
  fi
  echo "=== fuzz $t took $(( $(date +%s) - t0 )) s"
  if [ "$ci" = 1 ]; then
    rm -rf "$corpus"
  fi
done
exit "$status"

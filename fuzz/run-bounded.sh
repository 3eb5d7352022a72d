#!/usr/bin/env bash
# Bounded fuzzing, for CI and by hand: seeds each target's corpus from ../shared/vectors (real
# captures, copied at run time, never committed), then runs every target for SECONDS seconds.
#
#   fuzz/run-bounded.sh SECONDS [TARGET...]      (default: 30 seconds, every target)
#
# Works with the machine's single stable toolchain: RUSTC_BOOTSTRAP=1 lets cargo-fuzz pass its
# -Z flags (AddressSanitizer and sanitizer coverage) to stable rustc. See fuzz/README.md.
# A crash fails the run (non-zero exit) and leaves the input in fuzz/artifacts/<target>/.
set -euo pipefail
cd "$(dirname "$0")"

secs="${1:-30}"
if [ "$#" -gt 0 ]; then shift; fi

vectors="${FERROCLUSTER_VECTORS:-../../shared/vectors}"
if [ ! -f "$vectors/README.md" ]; then
  echo "run-bounded.sh: vectors not found at $vectors (set FERROCLUSTER_VECTORS)" >&2
  exit 1
fi

if ! command -v cargo-fuzz >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi
export RUSTC_BOOTSTRAP=1

if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <(cargo fuzz list)
fi

# seed_<target> functions fill corpus/<target>; a target without one starts empty.
seed_bus_decode() {
  local dir=corpus/bus_decode f
  for f in "$vectors"/*/bus/*.bin; do
    cp "$f" "$dir/$(basename "$(dirname "$(dirname "$f")")")-$(basename "$f")"
  done
}

seed_bus_frame_decoder() {
  # Input = one seed byte (picks the read sizes) + the stream.
  local dir=corpus/bus_frame_decoder f i=0
  for f in "$vectors"/*/bus/*.bin; do
    i=$((i + 1))
    { printf "\\$(printf '%03o' $((i % 256)))"; cat "$f"; } >"$dir/one-$i"
  done
  for flavor in "$vectors"/*/bus; do
    { printf '\007'; cat "$flavor"/*.bin; } >"$dir/all-$(basename "$(dirname "$flavor")")"
  done
}

seed_nodes_conf() {
  local dir=corpus/nodes_conf f i=0
  while IFS= read -r f; do
    i=$((i + 1))
    cp "$f" "$dir/conf-$i"
  done < <(find "$vectors" -name '*.conf' | sort)
}

# The replication targets take our own captures (crates/dataplane/tests/vectors, made by its
# capture.py): what real primaries sent (replica side) and what real replicas sent (primary side).
repl_vectors=../crates/dataplane/tests/vectors

seed_repl_replica_stream() {
  local dir=corpus/repl_replica_stream f i=0
  for f in "$repl_vectors"/*/conn*.p2r.bin; do
    i=$((i + 1))
    { printf "\\$(printf '%03o' $((i % 256)))"; cat "$f"; } >"$dir/p2r-$i"
  done
}

seed_repl_primary_commands() {
  local dir=corpus/repl_primary_commands f i=0
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
  local dir=corpus/rdb_dump f n
  for f in "$rdb_vectors"/dump/*/*.bin; do
    n="$(basename "$(dirname "$f")")-$(basename "$f" .bin)"
    { printf '\000'; cat "$f"; } >"$dir/$n"
    { printf '\001'; head -c -10 "$f"; } >"$dir/$n-body"
  done
}

seed_rdb_stream() {
  # Input = one seed byte (picks the chunk sizes) + the file.
  local dir=corpus/rdb_stream f i=0
  for f in "$rdb_vectors"/files/*.rdb "$rdb_vectors"/legacy/*.rdb; do
    i=$((i + 1))
    { printf "\\$(printf '%03o' $((i % 256)))"; cat "$f"; } >"$dir/$(basename "$f" .rdb)"
  done
}

seed_resp_request() {
  # Input = one byte picking the limits + the bytes of a captured case (the server's own
  # vectors, examples/server/tests/vectors/resp-cases.json).
  python3 - corpus/resp_request ../examples/server/tests/vectors/resp-cases.json <<'PY'
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
  local dir=corpus/asm_import_stream f i=0
  for f in "$asm_vectors"/*/conn*.s2t.bin; do
    i=$((i + 1))
    { printf "\\$(printf '%03o' $((i % 256)))"; cat "$f"; } >"$dir/s2t-$i"
  done
}

seed_asm_export_replies() {
  # Input = mode byte (1: AUTH first) + seed byte + what a real target sent.
  local dir=corpus/asm_export_replies f i=0 mode
  for f in "$asm_vectors"/*/conn*.t2s.bin; do
    i=$((i + 1))
    mode=0
    case "$f" in */auth/*) mode=1 ;; esac
    { printf "\\$(printf '%03o' "$mode")\\$(printf '%03o' $((i % 256)))"; cat "$f"; } >"$dir/t2s-$i"
  done
}

seed_legacy_migrate() {
  # Input = mode byte (0: commands through RESTORE, 1: a target's replies to MIGRATE) + bytes.
  local dir=corpus/legacy_migrate f i=0
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
  python3 - corpus/node_steps "$vectors" <<'PY'
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
  python3 - corpus/sim_schedule <<'PY'
import os, random, sys
r = random.Random(21)
for i in range(8):
    open(os.path.join(sys.argv[1], f"schedule-{i}"), "wb").write(bytes(r.randrange(256) for _ in range(150)))
PY
}

status=0
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t"
  if declare -F "seed_$t" >/dev/null; then
    "seed_$t"
  fi
  echo "=== fuzz $t for ${secs}s (corpus: $(find "corpus/$t" -type f | wc -l) inputs)"
  if ! cargo fuzz run "$t" -- -max_total_time="$secs" -rss_limit_mb=4096 -print_final_stats=1; then
    echo "=== fuzz $t FAILED (see fuzz/artifacts/$t/)"
    status=1
  fi
done
exit "$status"

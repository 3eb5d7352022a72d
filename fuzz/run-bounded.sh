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

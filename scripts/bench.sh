#!/bin/sh
# bench.sh — what `make bench` runs (after scripts/install-deps.sh and building build/kiln).
# Times Kiln's generated C for every model in models/ next to PyTorch (CPU), NumPy and
# Kiln's reference interpreter, in one run, and prints a table of median µs per inference
# with each time's ratio to Kiln's C. The work is in bench/bench.py (see its header);
# this wrapper only pins the interpreter and the kiln binary. Timings are reported,
# never asserted. Outputs go to out/bench/.
# Environment: KILN, CC, BENCH_MODELS="mlp lenet", BENCH_BUDGET_MS=1000.
set -eu
cd "$(dirname "$0")/.."
KILN="${KILN:-$PWD/build/kiln}"
export KILN
if [ ! -x "$KILN" ]; then
  echo "bench: $KILN not found (run make first)" >&2
  exit 1
fi
exec /usr/bin/python3 bench/bench.py

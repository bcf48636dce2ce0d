#!/bin/sh
# t_safetensors.sh — the safetensors reader (gen/frontend/safetensors.c) through kiln.load.
#
# tests/frontend/st_make.py writes, by hand (no safetensors library), one valid file
# with F32/F16/BF16 tensors (subnormals, infinities, NaN with payload, -0), an I64
# tensor and metadata, plus one file per way of being wrong, each with the exact
# one-line error expected. Checks:
#   valid/<t>    `kiln run` of a script outputting the tensor gives the same f32 bits
#                as numpy (f16 -> f32) and torch (bf16 -> f32) compute
#   valid/order  kiln.load returns the names in header order
#   err/<case>   exit status 1 and exactly the expected line on stderr
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
KILN=${KILN:-$ROOT/build/kiln}
PY=/usr/bin/python3
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kiln-safetensors.XXXXXX") || exit 2
trap 'rm -rf "$WORK"' EXIT

if [ ! -x "$KILN" ]; then
  echo "FAIL safetensors/kiln: no kiln binary at $KILN"
  exit 1
fi
if ! "$PY" tests/frontend/st_make.py "$WORK" > "$WORK/make.log" 2>&1; then
  echo "FAIL safetensors/make: st_make.py failed: $(tail -n 1 "$WORK/make.log")"
  exit 1
fi

cd "$WORK" || exit 2

# ---- the valid file ----
if "$KILN" run valid.lua --save outv > run.out 2> run.err; then
  echo "PASS safetensors/valid/order"
  for t in a h b; do
    res=$("$PY" - "$t" <<'EOF'
import sys
import numpy as np
t = sys.argv[1]
ref, got = np.load("ref_%s.npy" % t), np.load("outv/%s.npy" % t)
if ref.shape != got.shape:
    print("shape %s, expected %s" % (got.shape, ref.shape))
elif not np.array_equal(ref.view(np.uint32), got.view(np.uint32)):
    bad = np.nonzero(ref.view(np.uint32) != got.view(np.uint32))
    i = tuple(x[0] for x in bad)
    print("bits differ at %s: got %08x, expected %08x" % (i, got.view(np.uint32)[i], ref.view(np.uint32)[i]))
else:
    print("ok")
EOF
)
    if [ "$res" = ok ]; then echo "PASS safetensors/valid/$t"; else echo "FAIL safetensors/valid/$t: $res"; fi
  done
else
  echo "FAIL safetensors/valid/order: kiln run failed: $(head -n 1 run.err)"
fi

# ---- corrupt files ----
for e in *.expect; do
  n=${e%.expect}
  "$KILN" graph "$n.lua" > "$n.out" 2> "$n.err"
  rc=$?
  want=$(cat "$e")
  got=$(cat "$n.err")
  lines=$(wc -l < "$n.err")
  if [ "$rc" -ne 1 ]; then
    echo "FAIL safetensors/err/$n: exit status $rc, expected 1"
  elif [ "$lines" -ne 1 ]; then
    echo "FAIL safetensors/err/$n: $lines lines on stderr, expected 1: $got"
  elif [ "$got" != "$want" ]; then
    echo "FAIL safetensors/err/$n: got '$got', expected '$want'"
  else
    echo "PASS safetensors/err/$n"
  fi
done

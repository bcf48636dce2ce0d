#!/bin/sh
# t_frontend.sh — the Lua frontend (gen/frontend/lua.c, gen/frontend/lua_ops.c, gen/frontend/nn.lua, gen/frontend/init.c).
#
#   err/<script>     every tests/frontend/bad_*.lua holds a line "-- expect: <line>":
#                    `kiln build` must exit 1, print exactly that one line on stderr,
#                    and leave no output directory (nor its temporary) behind
#   err/absolute     a bad script named by absolute path is reported by base name
#   names/*          nn paths of weights and ops (tests/frontend/names.lua asserts the
#                    op names itself; here the weight names and their order)
#   graph/*          tracing twice prints identical graphs; an absolute script path
#                    leaves no absolute path in the output
#   sem/<output>     sem.lua's PyTorch-style argument handling against numpy/torch
#   init/<param>     seeded parameters bit-identical to tests/frontend/init_ref.py, an
#                    independent rendering of the documented algorithm
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
KILN=${KILN:-$ROOT/build/kiln}
PY=/usr/bin/python3
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kiln-frontend.XXXXXX") || exit 2
trap 'rm -rf "$WORK"' EXIT

if [ ! -x "$KILN" ]; then
  echo "FAIL frontend/kiln: no kiln binary at $KILN"
  exit 1
fi

# check_error NAME SCRIPT EXPECTED: kiln build fails with exactly EXPECTED and writes nothing.
check_error() {
  out="$WORK/out_$1"
  "$KILN" build "$2" -o "$out" > "$WORK/stdout" 2> "$WORK/stderr"
  rc=$?
  got=$(cat "$WORK/stderr")
  lines=$(wc -l < "$WORK/stderr")
  if [ "$rc" -ne 1 ]; then
    echo "FAIL frontend/err/$1: exit status $rc, expected 1 ($got)"
  elif [ "$lines" -ne 1 ]; then
    echo "FAIL frontend/err/$1: $lines lines on stderr, expected 1: $got"
  elif [ "$got" != "$3" ]; then
    echo "FAIL frontend/err/$1: got '$got', expected '$3'"
  elif [ -e "$out" ] || [ -e "$out.kiln-tmp" ]; then
    echo "FAIL frontend/err/$1: the output directory was created"
  elif [ -s "$WORK/stdout" ]; then
    echo "FAIL frontend/err/$1: printed to stdout: $(head -n 1 "$WORK/stdout")"
  else
    echo "PASS frontend/err/$1"
  fi
}

# ---- errors ----
for f in tests/frontend/bad_*.lua; do
  name=$(basename "$f" .lua)
  want=$(sed -n 's/^-- expect: //p' "$f" | head -n 1)
  if [ -z "$want" ]; then
    echo "FAIL frontend/err/$name: no '-- expect:' line in $f"
    continue
  fi
  check_error "$name" "$f" "$want"
done
check_error absolute "$ROOT/tests/frontend/bad_shape.lua" \
  "bad_shape.lua:5: error: add: shapes [2, 3] and [4] do not broadcast"
check_error missing_script "tests/frontend/no_such_model.lua" \
  "tests/frontend/no_such_model.lua: error: cannot open the model script: No such file or directory"

# ---- names ----
if "$KILN" graph tests/frontend/names.lua > "$WORK/names.txt" 2> "$WORK/names.err"; then
  echo "PASS frontend/names/asserts"
  got=$(awk '$3 == "weight" {print $4}' "$WORK/names.txt" | tr '\n' ' ')
  want="enc.scale enc.norm.weight enc.norm.bias enc.fc.weight enc.fc.bias enc.layers.0.weight enc.layers.0.bias enc.layers.1.weight enc.late.weight enc.late.bias bad.0.weight bad.0.bias "
  if [ "$got" = "$want" ]; then echo "PASS frontend/names/weights"; else echo "FAIL frontend/names/weights: got '$got', expected '$want'"; fi
  if grep -q ' mul .*  module enc  @tests/frontend/names.lua:17' "$WORK/names.txt"; then echo "PASS frontend/names/scope_line"
  else echo "FAIL frontend/names/scope_line: no mul named enc at names.lua:17"; fi
else
  echo "FAIL frontend/names/asserts: $(cat "$WORK/names.err")"
fi

# ---- graph determinism and paths ----
"$KILN" graph tests/frontend/sem.lua > "$WORK/g1.txt" 2>&1
"$KILN" graph tests/frontend/sem.lua > "$WORK/g2.txt" 2>&1
if [ -s "$WORK/g1.txt" ] && cmp -s "$WORK/g1.txt" "$WORK/g2.txt"; then echo "PASS frontend/graph/repeatable"
else echo "FAIL frontend/graph/repeatable: two traces differ (or are empty)"; fi
"$KILN" graph "$ROOT/tests/frontend/sem.lua" > "$WORK/g3.txt" 2>&1
if grep -q '@sem.lua:' "$WORK/g3.txt" && ! grep -q "$ROOT" "$WORK/g3.txt"; then echo "PASS frontend/graph/no_absolute_paths"
else echo "FAIL frontend/graph/no_absolute_paths: $(grep -m 1 "$ROOT" "$WORK/g3.txt")"; fi

# ---- semantics against numpy/torch ----
mkdir -p "$WORK/sem"
"$PY" tests/frontend/sem_check.py make "$WORK/sem"
if "$KILN" run tests/frontend/sem.lua --input "x=$WORK/sem/x.npy" --input "v=$WORK/sem/v.npy" \
     --input "y=$WORK/sem/y.npy" --save "$WORK/sem/out" > "$WORK/sem.out" 2> "$WORK/sem.err"; then
  "$PY" tests/frontend/sem_check.py check "$WORK/sem"
else
  echo "FAIL frontend/sem/run: $(head -n 1 "$WORK/sem.err")"
fi

# ---- the initialiser, bit for bit ----
"$PY" -c 'import numpy as np; np.save("'"$WORK"'/x100.npy", np.zeros((1, 100), np.float32))'
if "$KILN" run tests/frontend/init.lua --input "x=$WORK/x100.npy" --save "$WORK/init" > "$WORK/init.out" 2> "$WORK/init.err"; then
  "$PY" - "$WORK/init" <<'EOF'
import sys
import numpy as np
sys.path.insert(0, "tests/frontend")
import init_ref
d = sys.argv[1]
cases = {  # output: (seed, parameter name, kind, a, b, shape)
    "u0": (0, "u0", "uniform", -1, 1, (37,)),
    "n0": (0, "n0", "normal", 0, 1, (41,)),
    "u7": (7, "layers.0.attn.q.weight", "uniform", -0.25, 0.5, (3, 5)),
    "n7": (7, "emb", "normal", 1.5, 0.02, (4, 4)),
    "c7": (7, "c", "const", 0.1, 0, (3,)),
    "nneg": ((1 << 64) - 1, "n1", "normal", 0, 0.02, (64,)),
    "fcw": ((1 << 64) - 1, "weight", "uniform", -0.1, 0.1, (3, 100)),
    "fcb": ((1 << 64) - 1, "bias", "uniform", -0.1, 0.1, (3,)),
}
for out, (seed, name, kind, a, b, shape) in cases.items():
    want = np.array(init_ref.values(seed, name, kind, a, b, int(np.prod(shape))), np.float32).reshape(shape)
    got = np.load("%s/%s.npy" % (d, out))
    if got.shape != want.shape:
        print("FAIL frontend/init/%s: shape %s, expected %s" % (out, got.shape, want.shape))
    elif not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
        i = int(np.argmax(got.view(np.uint32).ravel() != want.view(np.uint32).ravel()))
        print("FAIL frontend/init/%s: element %d is %r, expected %r" % (out, i, got.ravel()[i], want.ravel()[i]))
    else:
        print("PASS frontend/init/%s" % out)
big = np.array(init_ref.values(0, "big", "normal", 0, 1, 100000))
ok = abs(big.mean()) < 0.02 and abs(big.std() - 1) < 0.02
print(("PASS" if ok else "FAIL") + " frontend/init/normal_moments" + ("" if ok else ": mean %g std %g" % (big.mean(), big.std())))
EOF
else
  echo "FAIL frontend/init/run: $(head -n 1 "$WORK/init.err")"
fi

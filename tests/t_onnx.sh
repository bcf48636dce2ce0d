#!/bin/sh
# t_onnx.sh — `kiln import` of ONNX models (docs/onnx.md; docs/testing.md, "t_onnx").
#
#   onnx/bad/<file>        every tests/robust/onnx/*.onnx listed in expect.tsv (truncated,
#                          garbage, unknown op, unsupported attribute or dtype, control flow,
#                          a dangling input, an int64 that does not fit...): exit 1, exactly
#                          the expected line on stderr, and no output directory, nor its
#                          staging directory, left behind
#   onnx/bad/keeps-previous  a failed import into a directory holding an earlier import
#                          leaves those files byte for byte, and a file of the user's
#   onnx/determinism       the same import twice, from another working directory and with an
#                          absolute path: identical bytes
#   onnx/node/<case>       ONNX's node tests (Debian libonnx-testdata) through
#                          tests/onnx/run_node.py: import, the interpreter and the generated C
#                          (batched: one compiler run per 64 cases) against ONNX's expected
#                          outputs; UNSUPPORTED lines are cases Kiln refuses with a clear
#                          message, DATAERR lines cases whose expected data contradict their
#                          own model (run_node.py's DATA_ERRORS): printed, counted nowhere
#   onnx/node/torch_cnn    a small CNN exported by torch.onnx.export (tests/onnx/torch_cnn.py),
#                          imported with -D batch=2, against PyTorch in float64
#   onnx/node/torch_rnn    a bidirectional GRU into an LSTM, exported the same way (ONNX's own
#                          tests have only forward recurrences)
#   onnx/node/torch_transformer  an encoder layer with dynamic batch and sequence dims: its
#                          reshapes come from Shape -> Gather -> Concat chains the import folds
#   onnx/node/long_chain   220 nodes (tests/onnx/long_chain.py): more values than Lua's 200
#                          locals, kept in a table by the script, against numpy in float64
#   onnx/node/narrow_<t>   uint8, int8, uint16, int16 arithmetic over each type's whole range
#                          (tests/onnx/narrow_int.py): results that overflow the type wrap as
#                          numpy's do, though Kiln carries them as int32
#   onnx/node/count        at least tests/onnx/min_pass node tests pass (a regression guard:
#                          a handler that starts refusing shows, not just a new UNSUPPORTED)
#   onnx/real/test_textdir, onnx/real/textdir_accuracy  a trained third-party model, PaddleOCR's
#                          text-direction classifier, on 240 rendered lines of real text
#                          (tests/onnx/real/README.md): import, interpreter and generated C
#                          against ONNX Runtime's outputs, and the same class as ONNX Runtime
#                          on every image (accuracy 240/240)
#   onnx/pytorch-converted/<case>, onnx/pytorch-operator/<case>, onnx/simple/<case>
#                          the other model sets of libonnx-testdata (PyTorch modules exported
#                          at opset 6, small hand-built models), run like the node tests;
#                          onnx/<set>/count: at least tests/onnx/min_pass_sets of each pass
#   onnx/canary/<case>     the runner itself: a node test with its expected output nudged by
#                          one ulp (an exact op) and by 1e-5 relative (an elementwise op) must
#                          FAIL, so a PASS means something
. "$(dirname "$0")/lib.sh"
kt_need_kiln onnx
kt_work onnx
S=onnx
DATA=/usr/share/libonnx-testdata/data/node

# ---- bad input ----
tab=$(printf '\t')
while IFS="$tab" read -r file want; do
  f=tests/robust/onnx/$file
  out=$WORK/bad-${file%.onnx}
  "$KILN" import "$f" -o "$out" > "$WORK/stdout" 2> "$WORK/stderr"
  rc=$?
  got=$(cat "$WORK/stderr")
  if [ "$rc" -ne 1 ]; then echo "FAIL $S/bad/$file: exit status $rc, expected 1 ($(head -c 300 "$WORK/stderr"))"
  elif [ "$(wc -l < "$WORK/stderr")" -ne 1 ]; then echo "FAIL $S/bad/$file: $(wc -l < "$WORK/stderr") lines on stderr"
  elif [ "$got" != "kiln: error: $f: $want" ]; then echo "FAIL $S/bad/$file: got '$got', expected 'kiln: error: $f: $want'"
  elif [ -e "$out" ] || ls "$WORK" | grep -q "kiln-tmp"; then echo "FAIL $S/bad/$file: left $out or a staging directory"
  elif [ -s "$WORK/stdout" ]; then echo "FAIL $S/bad/$file: printed to stdout"
  else echo "PASS $S/bad/$file"
  fi
done < tests/robust/onnx/expect.tsv

prev=$WORK/prev
if "$KILN" import tests/robust/onnx/valid_relu.onnx -o "$prev" 2> "$WORK/err" && echo mine > "$prev/notes.txt" &&
   cp -r "$prev" "$WORK/prev.copy" && ! "$KILN" import tests/robust/onnx/unknown_op.onnx -o "$prev" --name valid_relu 2> /dev/null &&
   diff -r "$prev" "$WORK/prev.copy" > /dev/null; then
  echo "PASS $S/bad/keeps-previous"
else
  echo "FAIL $S/bad/keeps-previous: a failed import changed the earlier output ($(cat "$WORK/err"))"
fi

if ! $PY -c "import onnx, torch" 2> /dev/null; then
  echo "NOTE $S: python3-onnx or python3-torch is missing: the node tests, the PyTorch CNN and the determinism check are skipped (scripts/install-deps.sh installs them)"
  exit 0
fi

# ---- a PyTorch CNN, and determinism on it ----
mkdir -p "$WORK/models"
if ! $PY tests/onnx/torch_cnn.py "$WORK/models" > "$WORK/torch.log" 2>&1; then
  echo "FAIL $S/node/torch_cnn: export of the PyTorch models failed: $(tail -n 1 "$WORK/torch.log")"
else
  m=$WORK/models/torch_cnn/model.onnx
  "$KILN" import "$m" -o "$WORK/d1" -D batch=2 2> /dev/null
  (cd "$WORK" && "$KILN" import models/torch_cnn/model.onnx -o d2 -D batch=2 2> /dev/null)
  "$KILN" import "$(cd "$WORK" && pwd)/models/torch_cnn/model.onnx" -o "$WORK/d3" -D batch=2 2> /dev/null
  if [ -s "$WORK/d1/model.lua" ] && [ -s "$WORK/d1/model.safetensors" ] && diff -r "$WORK/d1" "$WORK/d2" > /dev/null &&
     diff -r "$WORK/d1" "$WORK/d3" > /dev/null && ! grep -q "$WORK" "$WORK/d1/model.lua"; then
    echo "PASS $S/determinism"
  else
    echo "FAIL $S/determinism: imports of the same model differ (or are missing)"
  fi
fi
if $PY tests/onnx/long_chain.py "$WORK/models" > "$WORK/long.log" 2>&1 &&
   $PY tests/onnx/narrow_int.py "$WORK/models" >> "$WORK/long.log" 2>&1; then
  mkdir -p "$WORK/own"
  $PY tests/onnx/run_node.py "$KILN" "$WORK/models" "$WORK/own" | grep -v '^onnx node tests'
else
  echo "FAIL $S/node/long_chain: the models were not written: $(tail -n 1 "$WORK/long.log")"
fi

# ---- the runner's canaries ----
if [ -d "$DATA" ]; then
  mkdir -p "$WORK/canary-data" "$WORK/canary"
  for c in test_relu test_exp; do cp -r "$DATA/$c" "$WORK/canary-data/$c"; done
  $PY - "$WORK/canary-data" <<'EOF'
import sys
import numpy as np
from onnx import TensorProto, numpy_helper
for case, nudge in (("test_relu", lambda a: np.nextafter(a, np.float32(np.inf))),
                    ("test_exp", lambda a: a * np.float32(1 + 1e-5))):
    p = f"{sys.argv[1]}/{case}/test_data_set_0/output_0.pb"
    t = TensorProto()
    t.ParseFromString(open(p, "rb").read())
    a = numpy_helper.to_array(t).copy()
    a.flat[a.size // 2] = nudge(a.flat[a.size // 2])
    open(p, "wb").write(numpy_helper.from_array(a, t.name).SerializeToString())
EOF
  $PY tests/onnx/run_node.py "$KILN" "$WORK/canary-data" "$WORK/canary" > "$WORK/canary.out"
  for c in test_relu test_exp; do
    if grep -q "^FAIL onnx/node/$c: .*element" "$WORK/canary.out"; then echo "PASS $S/canary/$c"
    else echo "FAIL $S/canary/$c: the runner did not catch a nudged expected output: $(grep "onnx/node/$c" "$WORK/canary.out")"
    fi
  done
fi

# ---- a trained third-party model on real data ----
mkdir -p "$WORK/real"
$PY tests/onnx/real/textdir.py "$KILN" "$WORK/real"

# ---- ONNX's node tests ----
if [ ! -d "$DATA" ]; then
  echo "NOTE $S/node: $DATA is missing (Debian package libonnx-testdata): ONNX's node tests are skipped (scripts/install-deps.sh installs it)"
  exit 0
fi
mkdir -p "$WORK/node"
$PY tests/onnx/run_node.py "$KILN" "$DATA" "$WORK/node" --results "$WORK/node.tsv" > "$WORK/node.out"
grep -v '^onnx node tests' "$WORK/node.out"
echo "NOTE $S/node: $(tail -n 1 "$WORK/node.out" | sed 's/^onnx node tests: //') (docs/onnx-conformance.md)"
passed=$(grep -c '^PASS onnx/node/test_' "$WORK/node.out")
floor=$(cat tests/onnx/min_pass)
if [ "$passed" -ge "$floor" ]; then echo "PASS $S/node/count: $passed cases pass (at least $floor)"
else echo "FAIL $S/node/count: $passed cases pass, fewer than the $floor of tests/onnx/min_pass"; fi
if [ -n "$ONNX_RESULTS" ]; then cp "$WORK/node.tsv" "$ONNX_RESULTS"; fi

# ---- libonnx-testdata's other model sets (real/ holds only download pointers, no models) ----
for set in pytorch-converted pytorch-operator simple; do
  mkdir -p "$WORK/$set"
  $PY tests/onnx/run_node.py "$KILN" "${DATA%/node}/$set" "$WORK/$set" --label "$set" --results "$WORK/$set.tsv" > "$WORK/$set.out"
  grep -v '^onnx node tests' "$WORK/$set.out"
  echo "NOTE $S/$set: $(tail -n 1 "$WORK/$set.out" | sed 's/^onnx node tests: //')"
  passed=$(grep -c "^PASS onnx/$set/" "$WORK/$set.out")
  floor=$(sed -n "s/^$set //p" tests/onnx/min_pass_sets)
  if [ "$passed" -ge "$floor" ]; then echo "PASS $S/$set/count: $passed cases pass (at least $floor)"
  else echo "FAIL $S/$set/count: $passed cases pass, fewer than the $floor of tests/onnx/min_pass_sets"; fi
  if [ -n "$ONNX_RESULTS" ]; then cp "$WORK/$set.tsv" "$ONNX_RESULTS.$set"; fi
done

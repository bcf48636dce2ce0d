#!/bin/sh
# t_runtime.sh — runtime/kiln_runtime.c against good and damaged weights, and the C API.
#
# Builds tests/runtime/wt.lua, compiles tests/runtime/driver.c with the generated C and the
# runtime (gcc and clang, -Werror, ASan+UBSan), then:
#   - loads a good file, and copies with a bad magic, a wrong version, a cut-off tail, one
#     payload byte flipped, the weights of another model, and a missing file; each must
#     print the runtime's one-line message naming the problem;
#   - runs the model from the file and from the --embed-weights array, and compares the
#     outputs with the reference interpreter (`kiln run --save`) and with each other;
#   - runs tests/runtime/pool_test.c (the thread pool) under TSan and ASan + UBSan.
. "$(dirname "$0")/lib.sh"
kt_need_kiln runtime
kt_work runtime
SAN="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
W="-std=c11 -Wall -Wextra -Wpedantic -Werror"

build() {  # build NAME SCRIPT [FLAGS...]: kiln build into $WORK/NAME
  name=$1 script=$2
  shift 2
  if ! err=$("$KILN" build "$script" -o "$WORK/$name" "$@" 2>&1); then
    echo "FAIL runtime/build-$name: kiln build $script failed: $(echo "$err" | head -n 2 | tr '\n' ' ')"
    exit 1
  fi
}
build wt tests/runtime/wt.lua --embed-weights
build other tests/runtime/wt_other.lua --name wt

for cc in gcc clang; do
  if ! command -v $cc >/dev/null; then echo "FAIL runtime/compile-$cc: $cc not installed"; continue; fi
  if err=$($cc $W $SAN -I"$WORK/wt" -Iruntime -DKILN_MODEL=wt -DKILN_MODEL_UPPER=WT tests/runtime/driver.c \
      "$WORK/wt/wt.c" runtime/kiln_runtime.c -lm -o "$WORK/drv_$cc" 2>&1); then
    echo "PASS runtime/compile-$cc"
  else
    echo "FAIL runtime/compile-$cc: $(echo "$err" | head -n 3 | tr '\n' ' ')"
  fi
done
DRV=$WORK/drv_gcc
[ -x "$DRV" ] || DRV=$WORK/drv_clang
[ -x "$DRV" ] || { echo "FAIL runtime/driver: no compiler built the driver"; exit 1; }

# expect NAME FILE PATTERN [FLAG]: the driver's -c check on FILE (loaded, or with FLAG -m /
# -M mapped) prints a line matching PATTERN.
expect() {
  out=$("$DRV" -c $4 -w "$2" 2>&1 | head -n 1)
  if echo "$out" | grep -q -- "$3"; then echo "PASS runtime/$1 ($out)"; else echo "FAIL runtime/$1: expected /$3/, got: $out"; fi
}
good=$WORK/wt/wt.weights
size=$(wc -c < "$good")
patch() {  # patch NAME OFFSET PYEXPR: a copy of the good file with byte OFFSET set to PYEXPR(old)
  cp "$good" "$WORK/$1.weights"
  $PY -c "import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); o=int(sys.argv[2]); v=b[o]; b[o]=($3) & 255; open(p,'wb').write(b)" "$WORK/$1.weights" "$2"
}
expect good "$good" '^ok: '
patch magic 0 "ord('X')"; expect bad-magic "$WORK/magic.weights" 'bad magic'
patch version 8 "2"; expect wrong-version "$WORK/version.weights" 'unsupported weights format version'
head -c $((size - 8)) "$good" > "$WORK/short.weights"; expect truncated "$WORK/short.weights" 'truncated'
head -c 40 "$good" > "$WORK/stub.weights"; expect truncated-header "$WORK/stub.weights" 'truncated'
patch flip 70 "v ^ 1"; expect payload-flip "$WORK/flip.weights" 'checksum mismatch'
expect other-model "$WORK/other/wt.weights" 'different model'
expect missing "$WORK/no-such.weights" 'cannot open'
# kiln_weights_map: the same refusals, except a flipped payload byte, which only -M
# (KILN_MAP_VERIFY, hashing every page) sees; -m trusts the intact header (documented).
expect map-good "$good" '^ok: ' -m
expect map-bad-magic "$WORK/magic.weights" 'bad magic' -m
expect map-truncated "$WORK/short.weights" 'truncated' -m
expect map-truncated-header "$WORK/stub.weights" 'truncated' -m
expect map-other-model "$WORK/other/wt.weights" 'different model' -m
expect map-missing "$WORK/no-such.weights" 'cannot open' -m
expect map-flip-unverified "$WORK/flip.weights" '^ok: ' -m
expect map-flip-verified "$WORK/flip.weights" 'checksum mismatch' -M

# A run from the file and from the embedded array, against the interpreter.
$PY -c "import numpy as np; np.arange(-3, 3, dtype=np.float32).reshape(2, 3).tofile('$WORK/x.bin')"
mkdir -p "$WORK/file" "$WORK/mapped" "$WORK/emb" "$WORK/ref"
if ! err=$("$DRV" -w "$good" -o "$WORK/file" "$WORK/x.bin" 2>&1); then
  echo "FAIL runtime/run-file: $err"
elif ! err=$("$DRV" -m -w "$good" -o "$WORK/mapped" "$WORK/x.bin" 2>&1) || ! cmp -s "$WORK/mapped/y.bin" "$WORK/file/y.bin"; then
  echo "FAIL runtime/run-mapped: the run from the mapped file differs from the loaded one: $err"
elif ! err=$("$KILN" run tests/runtime/wt.lua --input x="$WORK/x.bin" --save "$WORK/ref" 2>&1); then
  echo "FAIL runtime/run-file: kiln run failed: $(echo "$err" | head -n 2 | tr '\n' ' ')"
elif $PY -c "
import numpy as np, sys
c = np.fromfile('$WORK/file/y.bin', np.float32); r = np.load('$WORK/ref/y.npy').ravel()
sys.exit(0 if c.shape == r.shape and np.allclose(c, r, rtol=1e-5, atol=1e-6) else 1)"; then
  echo "PASS runtime/run-file (matches kiln run within rtol 1e-5; the mapped file gives the same bytes)"
else
  echo "FAIL runtime/run-file: driver output differs from kiln run"
fi
if ! err=$(gcc $W $SAN -I"$WORK/wt" -Iruntime -DKILN_MODEL=wt -DKILN_MODEL_UPPER=WT -DKILN_EMBED tests/runtime/driver.c \
    "$WORK/wt/wt.c" "$WORK/wt/wt_weights.c" runtime/kiln_runtime.c -lm -o "$WORK/drv_emb" 2>&1); then
  echo "FAIL runtime/embedded: $(echo "$err" | head -n 3 | tr '\n' ' ')"
else
  out=$("$WORK/drv_emb" -c 2>&1)
  case $out in ok:*) echo "PASS runtime/embedded-validate ($out)" ;; *) echo "FAIL runtime/embedded-validate: $out" ;; esac
  if "$WORK/drv_emb" -o "$WORK/emb" "$WORK/x.bin" && cmp -s "$WORK/emb/y.bin" "$WORK/file/y.bin"; then
    echo "PASS runtime/embedded-run (same bytes as from the file)"
  else
    echo "FAIL runtime/embedded-run: output differs from the file-loaded run"
  fi
fi
# The embedded path refuses a damaged array the same way: the first byte 'K' becomes 'X'.
sed '0,/0x4b,/s//0x58,/' "$WORK/wt/wt_weights.c" > "$WORK/bad_weights.c"
if ! err=$(gcc $W -I"$WORK/wt" -Iruntime -DKILN_MODEL=wt -DKILN_MODEL_UPPER=WT -DKILN_EMBED tests/runtime/driver.c \
    "$WORK/wt/wt.c" "$WORK/bad_weights.c" runtime/kiln_runtime.c -lm -o "$WORK/drv_bad" 2>&1); then
  echo "FAIL runtime/embedded-bad-magic: $(echo "$err" | head -n 3 | tr '\n' ' ')"
else
  out=$("$WORK/drv_bad" -c 2>&1 | head -n 1)
  case $out in *"embedded weights: bad magic"*) echo "PASS runtime/embedded-bad-magic ($out)" ;;
    *) echo "FAIL runtime/embedded-bad-magic: $out" ;; esac
fi

# runtime/kiln_pool.c: every task of every job runs once, at 1 to 4 threads
# (tests/runtime/pool_test.c), under ThreadSanitizer (gcc) and ASan + UBSan (clang).
for pair in "gcc:thread" "clang:address,undefined"; do
  cc=${pair%%:*} san=${pair#*:}
  if ! command -v $cc >/dev/null; then echo "FAIL runtime/pool-$cc: $cc not installed"; continue; fi
  if ! err=$($cc $W -O1 -g -fsanitize=$san -fno-sanitize-recover=all -Iruntime tests/runtime/pool_test.c \
      runtime/kiln_pool.c -pthread -o "$WORK/pool_$cc" 2>&1); then
    echo "FAIL runtime/pool-$cc: $(echo "$err" | head -n 3 | tr '\n' ' ')"
  elif out=$("$WORK/pool_$cc" 2>&1) && [ "$(echo "$out" | grep -c ' jobs ok$')" = 4 ]; then
    echo "PASS runtime/pool-$cc ($san: $(echo "$out" | tail -n 1))"
  else
    echo "FAIL runtime/pool-$cc: $(echo "$out" | grep -v ' jobs ok$' | head -n 3 | tr '\n' ' ')"
  fi
done

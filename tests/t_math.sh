#!/bin/sh
# t_math.sh — Kiln's own exp, tanh, erf and log (templates/c/math_*.c.tmpl), which the C
# kernels call instead of libm's: the same bits on every instruction-set path, and errors
# within their documented bounds.
#
# tests/math/sweep.lua applies exp, tanh, erf, log, sigmoid, silu, gelu and gelu_tanh to 2^18
# inputs (tests/py/math_sweep.py: special values incl. NaN payloads, signalling NaNs, -0, the
# subnormals and +-inf, +-512 ulps around each threshold the functions switch method at or
# overflow/underflow at, random bit patterns over the whole range, dense values in [-12, 12]).
# The generated C is built the ways t_isa builds models — gcc -O2 (SSE2), -O2 -mavx2 -mfma,
# -O2 -march=x86-64-v3, -O3 -march=native (AVX-512 here), -march=native -DKILN_SCALAR, clang -O2
# and -O2 -march=x86-64-v3, a 2-thread _par build — and for ARM64 (plain and NEON, under
# qemu-aarch64): every output must be byte-identical across the x86-64 builds and across the
# ARM64 builds, and the two platforms must agree too (unlike t_isa's models, these kernels call
# no libm function) except in the sign of a NaN made by an invalid operation (gelu(-inf)),
# which is the platform's default NaN. The first build's outputs
# are then checked against float64 numpy/torch (max ulp vs the documented bound, t_ops'
# elementwise tolerance, non-finite results exactly). MATH_EXHAUSTIVE=1 also runs every one
# of the 2^32 floats through the four functions against glibc's double ones
# (tests/math/exhaustive.c, ~6 min of CPU).
. "$(dirname "$0")/lib.sh"
kt_need_kiln t_math
kt_work math
S=math
d=$WORK/sweep
if ! "$KILN" build tests/math/sweep.lua -o "$d/out" > "$WORK/err" 2>&1; then
  echo "FAIL $S/build: $(head -n 1 "$WORK/err")"
  exit 0
fi
"$PY" tests/py/math_sweep.py inputs "$d/in.bin" || { echo "FAIL $S/inputs: math_sweep.py inputs failed"; exit 0; }
first="" first_arm=""
for spec in "gcc -O2" "gcc -O2 -mavx2 -mfma" "gcc -O2 -march=x86-64-v3" "gcc -O3 -march=native" \
         "gcc -O2 -march=native -DKILN_SCALAR" "clang -O2" "clang -O2 -march=x86-64-v3" "gcc -O3 -march=native @2" \
         "aarch64-linux-gnu-gcc -O2 -static -DKILN_SCALAR" "aarch64-linux-gnu-gcc -O2 -static"; do
  cfg=${spec%@*} threads="" pool="" run=""
  if [ "$cfg" != "$spec" ]; then threads="-t ${spec##*@}"; pool="-DKILN_POOL -pthread runtime/kiln_pool.c"; fi
  case $cfg in aarch64*)
    if ! command -v aarch64-linux-gnu-gcc > /dev/null || ! command -v qemu-aarch64 > /dev/null; then
      echo "FAIL $S/aarch64: no aarch64-linux-gnu-gcc or qemu-aarch64 (scripts/install-deps.sh installs them)"
      continue
    fi
    run=qemu-aarch64 ;;
  esac
  tag=$(echo "$spec" | tr ' =@' '___')
  res=$d/res_$tag exe=$d/drv_$tag
  mkdir -p "$res"
  # shellcheck disable=SC2086
  if ! $cfg -std=c11 -Wall -Wextra -Wpedantic -Werror -D_POSIX_C_SOURCE=200809L -I"$d/out" -Iruntime \
       -DKILN_MODEL=sweep -DKILN_MODEL_UPPER=SWEEP $pool tests/runtime/driver.c "$d/out/sweep.c" \
       runtime/kiln_runtime.c -lm -o "$exe" 2> "$WORK/err"; then
    echo "FAIL $S/$tag: does not compile: $(grep -m 1 error "$WORK/err")"
    continue
  fi
  # shellcheck disable=SC2086
  if ! $run "$exe" -w "$d/out/sweep.weights" $threads -o "$res" "$d/in.bin" > "$WORK/err" 2>&1; then
    echo "FAIL $S/$tag: run: $(head -n 1 "$WORK/err")"
    continue
  fi
  if [ -n "$run" ] && [ -z "$first_arm" ]; then first_arm=$tag; echo "PASS $S/$tag"; continue; fi
  ref=$first
  [ -n "$run" ] && ref=$first_arm
  if [ -z "$ref" ]; then first=$tag; echo "PASS $S/$tag"; continue; fi
  if diff -r "$d/res_$ref" "$res" > /dev/null; then echo "PASS $S/$tag: bit-identical to $ref"
  else echo "FAIL $S/$tag: outputs differ from $ref: $(cd "$res" && for f in *.bin; do cmp -s "$f" "$d/res_$ref/$f" || printf '%s ' "$f"; done)"; fi
done
# x86-64 vs ARM64: the same bits but for the sign of the NaNs an invalid operation creates
# (math_sweep.py same).
if [ -n "$first" ] && [ -n "$first_arm" ]; then "$PY" tests/py/math_sweep.py same "$d/res_$first" "$d/res_$first_arm"; fi
if [ -n "$first" ]; then "$PY" tests/py/math_sweep.py check "$d/in.bin" "$d/res_$first"; fi
# A test of the test: the same kernels with GCC allowed to fuse a * b + c into an FMA
# (-ffp-contract=fast, which -std=c11 turns off) round differently, and the comparison must
# see it (else bit-identical above would prove nothing).
if [ -n "$first" ] && gcc -std=c11 -O2 -march=x86-64-v3 -ffp-contract=fast -D_POSIX_C_SOURCE=200809L -I"$d/out" -Iruntime \
     -DKILN_MODEL=sweep -DKILN_MODEL_UPPER=SWEEP tests/runtime/driver.c "$d/out/sweep.c" runtime/kiln_runtime.c -lm \
     -o "$d/drv_fma" 2> "$WORK/err"; then
  mkdir -p "$d/res_fma"
  "$d/drv_fma" -w "$d/out/sweep.weights" -o "$d/res_fma" "$d/in.bin" > /dev/null 2>&1
  if diff -r "$d/res_$first" "$d/res_fma" > /dev/null; then echo "FAIL $S/fma_control: contracted builds gave the same bits: the comparison proves nothing"
  else echo "PASS $S/fma_control: contracting into FMAs changes the bits, and the comparison sees it"; fi
else
  echo "FAIL $S/fma_control: could not build the contracted variant: $(head -n 1 "$WORK/err")"
fi
if [ "${MATH_EXHAUSTIVE:-0}" = 1 ]; then
  if gcc -std=c11 -Wall -Wextra -Wpedantic -Werror -O3 -march=native -Itemplates/c tests/math/exhaustive.c -lm \
       -o "$WORK/exhaustive" 2> "$WORK/err"; then
    "$WORK/exhaustive"
  else
    echo "FAIL $S/exhaustive: does not compile: $(grep -m 1 error "$WORK/err")"
  fi
fi
exit 0

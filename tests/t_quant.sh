#!/bin/sh
# t_quant.sh — Kiln's stored weight formats (gen/ir/quant.c, docs/quantization.md):
#   quant/<fmt>/numpy-*      tests/quant/ref.py, an independent numpy reading of the spec,
#                            decodes what quant_pack wrote bit for bit like quant_unpack and
#                            the deq values, re-lays the fields with zero padding rows, and
#                            (formats whose quantizer the spec fixes) quantizes to the same bytes
#   quant/<fmt>/same-bytes-* determinism: twice in one process, gcc -O2 against clang -O1
#                            with ASan/UBSan (which also runs every check under sanitizers)
#                            and against an ARM64 build run under qemu-aarch64
#   quant/ggml/*             random valid ggml blocks in a GGUF file: gen/frontend/gguf.c's
#                            dequantization equals quant_unpack(quant_from_ggml(raw)), and
#                            numpy's decoding of those panels equals ggml's dequantization
#   quant/<fmt>/gaussian-*   quantization error bounds; edge rows under ASan/UBSan (qtest.c)
. "$(dirname "$0")/lib.sh"
kt_work quant
S=quant
SRCS="tests/quant/qtest.c gen/ir/quant.c gen/util.c gen/frontend/gguf.c gen/ops.c gen/escape.c"
STRICT="-std=c11 -Wall -Wextra -Wpedantic -Werror -D_POSIX_C_SOURCE=200809L -Igen"
SAN="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"
built=1
for t in "gcc:-O2" "clang:$SAN"; do
  cc=${t%%:*} flags=${t#*:}
  if ! $cc $STRICT $flags -o "$WORK/qtest-$cc" $SRCS -lm 2> "$WORK/build.out"; then
    echo "FAIL $S/build-$cc: $(head -n 3 "$WORK/build.out" | tr '\n' ' ')"; built=0
  fi
done
[ $built -eq 1 ] || exit 1

# step NAME COMMAND...: runs it and shows its output; a crash or failing exit with no
# FAIL line of its own (a Python traceback, a sanitizer abort) becomes one.
step() {
  name=$1
  shift
  "$@" > "$WORK/step.out" 2>&1
  rc=$?
  cat "$WORK/step.out"
  if [ $rc -ne 0 ] && ! grep -q '^FAIL ' "$WORK/step.out"; then
    echo "FAIL $S/$name: exited $rc: $(grep -m 3 -E 'Error|ERROR|runtime error|error' "$WORK/step.out" | tr '\n' ' ')"
  fi
}

# Every format x shape, by both builds; numpy checks one, the other must be identical.
mkdir -p "$WORK/gcc" "$WORK/clang" "$WORK/ggml"
step cases-gcc "$WORK/qtest-gcc" cases "$WORK/gcc"
step cases-clang-sanitized "$WORK/qtest-clang" cases "$WORK/clang" | grep -v '^PASS '   # the same names again
step numpy-cases "$PY" tests/quant/ref.py cases "$WORK/gcc"
if diff -r "$WORK/gcc" "$WORK/clang" > /dev/null; then echo "PASS $S/same-bytes-gcc-and-clang"
else echo "FAIL $S/same-bytes-gcc-and-clang: $(diff -rq "$WORK/gcc" "$WORK/clang" | head -n 3 | tr '\n' ' ')"; fi

# Another machine: ARM64 (static, under qemu's user-mode emulation) must write the same bytes.
if command -v aarch64-linux-gnu-gcc > /dev/null && command -v qemu-aarch64 > /dev/null; then
  mkdir -p "$WORK/arm64"
  if aarch64-linux-gnu-gcc $STRICT -O2 -static -o "$WORK/qtest-arm64" $SRCS -lm 2> "$WORK/build.out" &&
     qemu-aarch64 "$WORK/qtest-arm64" cases "$WORK/arm64" > /dev/null 2>&1 && diff -r "$WORK/gcc" "$WORK/arm64" > /dev/null; then
    echo "PASS $S/same-bytes-x86-64-and-arm64"
  else
    echo "FAIL $S/same-bytes-x86-64-and-arm64: $(head -n 2 "$WORK/build.out" | tr '\n' ' ')$(diff -rq "$WORK/gcc" "$WORK/arm64" 2>&1 | head -n 3 | tr '\n' ' ')"
  fi
else
  echo "NOTE $S/arm64: no aarch64-linux-gnu-gcc or qemu-aarch64 (scripts/install-deps.sh installs them): ARM64 bytes not compared"
fi

# ggml blocks: written by numpy, re-laid and decoded by C (sanitized), decoded again by numpy.
step ggml-write "$PY" tests/quant/ref.py ggml-write "$WORK/ggml"
step ggml-sanitized "$WORK/qtest-clang" ggml "$WORK/ggml/blocks.gguf" "$WORK/ggml"
step ggml-numpy "$PY" tests/quant/ref.py ggml-check "$WORK/ggml"

# Error bounds (the optimized build: it times the quantizers too); edge rows, sanitized.
step error "$WORK/qtest-gcc" error
step edges-sanitized "$WORK/qtest-clang" edges

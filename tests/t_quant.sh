#!/bin/sh
# t_quant.sh — Kiln's stored weight formats (gen/ir/quant.c, docs/quantization.md):
#   quant/<fmt>/numpy-*      tests/quant/ref.py, an independent numpy reading of the spec,
#                            decodes what quant_pack wrote bit for bit like quant_unpack and
#                            the deq values, re-lays the fields with zero padding rows, and
#                            (formats whose quantizer the spec fixes) quantizes to the same bytes
#   quant/<fmt>/same-bytes-* determinism: twice in one process, and gcc -O2 against clang
#                            -O1 with ASan/UBSan (which also runs every check under sanitizers)
#   quant/ggml/*             random valid ggml blocks in a GGUF file: gen/frontend/gguf.c's
#                            dequantization equals quant_unpack(quant_from_ggml(raw)), and
#                            numpy's decoding of those panels equals ggml's dequantization
#   quant/<fmt>/gaussian-*   quantization error bounds, edge rows (tests/quant/qtest.c)
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

# Every format x shape, by both builds; numpy checks one, the other must be identical.
mkdir -p "$WORK/gcc" "$WORK/clang" "$WORK/ggml"
"$WORK/qtest-gcc" cases "$WORK/gcc" || echo "FAIL $S/cases-gcc: qtest exited $?"
"$WORK/qtest-clang" cases "$WORK/clang" > "$WORK/clang.out" 2>&1 ||
  echo "FAIL $S/cases-clang-sanitized: $(grep -m 3 -E 'FAIL|ERROR|runtime error' "$WORK/clang.out" | tr '\n' ' ')"
"$PY" tests/quant/ref.py cases "$WORK/gcc"
if diff -r "$WORK/gcc" "$WORK/clang" > /dev/null; then echo "PASS $S/same-bytes-gcc-and-clang"
else echo "FAIL $S/same-bytes-gcc-and-clang: $(diff -rq "$WORK/gcc" "$WORK/clang" | head -n 3 | tr '\n' ' ')"; fi

# ggml blocks: written by numpy, re-laid and decoded by C (sanitized), decoded again by numpy.
"$PY" tests/quant/ref.py ggml-write "$WORK/ggml" || echo "FAIL $S/ggml-write"
"$WORK/qtest-clang" ggml "$WORK/ggml/blocks.gguf" "$WORK/ggml" 2>&1 | grep -E '^(PASS|FAIL)|ERROR|runtime error'
"$PY" tests/quant/ref.py ggml-check "$WORK/ggml"

# Error bounds and edge rows (the optimized build: it times the quantizers too).
"$WORK/qtest-gcc" error

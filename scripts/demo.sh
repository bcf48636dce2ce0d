#!/bin/sh
# demo.sh — what `make demo` runs (after scripts/install-deps.sh and building build/kiln).
# Compiles the demo model models/mlp.lua (an MLP trained on Fashion-MNIST, see
# docs/models.md) into out/mlp, builds the generated C with the runtime and the demo
# program scripts/demo_main.c, and runs it on the 1000 bundled test images in
# models/data/: a few predictions, the accuracy, and microseconds per inference.
# Then models/stories.lua (TinyStories 260K, a trained Llama, with a KV cache: a prefill
# entry and a decode entry over per-layer key/value states): 256 tokens generated greedily
# from BOS, their ids, and prefill and decode tokens/s (scripts/stories_main.c).
# Needs only a C compiler and libm besides Kiln; no Python.
# Environment: KILN (default build/kiln), CC (default cc).
set -eu
cd "$(dirname "$0")/.."
KILN="${KILN:-build/kiln}"
CC="${CC:-cc}"
OUT=out/mlp
# The documented flags (docs/output.md): AVX2 + FMA on an x86-64 CPU that has them (the
# portable -O2 alone would run the matrix products through libm's fmaf), NEON as is on ARM64.
ARCH=""
case "$(uname -m)" in
  x86_64|amd64)
    if grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo 2>/dev/null; then ARCH="-march=x86-64-v3"; fi ;;
esac

mkdir -p out
echo "demo: $KILN build models/mlp.lua -o $OUT"
"$KILN" build models/mlp.lua -o "$OUT"
echo "demo: $CC -O2 $ARCH $OUT/mlp.c runtime/kiln_runtime.c scripts/demo_main.c -> out/mlp_demo"
# shellcheck disable=SC2086
"$CC" -std=c11 -O2 $ARCH -D_POSIX_C_SOURCE=200809L -I"$OUT" -Iruntime -o out/mlp_demo \
  scripts/demo_main.c "$OUT/mlp.c" runtime/kiln_runtime.c -lm
echo
out/mlp_demo "$OUT/mlp.weights" models/data/fashion_test_1000.images.npy \
  models/data/fashion_test_1000.labels.npy

# TinyStories 260K: a real trained Llama (models/stories.lua, weights from llama2.c, MIT; see
# models/weights/README.md), 256 tokens greedily from BOS by scripts/llm_main.c (the
# generation program for any Kiln-built LLM, with runtime/llm's tokenizer and sampler): one
# prefill, then one decode call per token over the KV cache.
SOUT=out/stories
echo
echo "demo: $KILN build models/stories.lua -o $SOUT --tokenizer models/weights/tok512.bin"
"$KILN" build models/stories.lua -o "$SOUT" --tokenizer models/weights/tok512.bin
echo "demo: $CC -O2 $ARCH $SOUT/stories.c runtime/kiln_runtime.c runtime/llm/*.c scripts/llm_main.c -> out/stories_demo"
# shellcheck disable=SC2086
"$CC" -std=c11 -O2 $ARCH -D_POSIX_C_SOURCE=200809L -I"$SOUT" -Iruntime -Iruntime/llm -DKM=stories -DKMU=STORIES \
  '-DMODEL_HEADER="stories.h"' -o out/stories_demo scripts/llm_main.c "$SOUT/stories.c" runtime/kiln_runtime.c \
  runtime/llm/kiln_tok*.c runtime/llm/kiln_sample.c runtime/llm/kiln_chat.c runtime/llm/kiln_generate.c -lm
echo
echo "TinyStories 260K (Llama, 5 layers), 256 tokens greedily from BOS with a KV cache:"
out/stories_demo "$SOUT/stories.weights" "$SOUT/stories.tok" --max-tokens 256 --ids --speed

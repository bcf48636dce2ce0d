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
. scripts/arch.sh   # ARCH: the documented flags

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
CC="$CC" sh scripts/llm_build.sh "$SOUT" out/stories_demo
echo
echo "TinyStories 260K (Llama, 5 layers), 256 tokens greedily from BOS with a KV cache:"
out/stories_demo "$SOUT/stories.weights" "$SOUT/stories.tok" --max-tokens 256 --ids --speed

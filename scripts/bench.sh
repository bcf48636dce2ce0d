#!/bin/sh
# bench.sh — what `make bench` runs (after scripts/install-deps.sh and building build/kiln).
# Timings are reported, never asserted; `make test` never runs any of this.
#
# BENCH selects the parts, run in the order given (default: all of them):
#   models  bench/bench.py: Kiln's generated C for every model in models/ next to PyTorch
#           (CPU), NumPy and Kiln's reference interpreter: a table of median µs per
#           inference and each time's ratio to Kiln's C. Outputs go to out/bench/.
#   peers   bench/peerbench/run.py: Kiln's generated C next to ONNX Runtime, PyTorch and
#           OpenBLAS at 1 and 2 threads on fixed workloads (MLP, LeNet, ResNet-18, BERT,
#           a 125M Llama prefill, GEMM, GEMV), interleaved, paired per round; installs its
#           extras first (install-deps.sh --bench, npm into .cache/bench); writes
#           bench/results/<name>.json. See docs/bench.md.
#   llm     bench/llm/run.py: Kiln's KV-cache decode (positions 1, 128, 511) and prefill of
#           stories260K, and decode of a seeded 100M Llama, next to a plain scalar C loop
#           (bench/llm/plain_llama.c) and PyTorch eager with a KV cache; bench/results/llm-*.json.
#   llamacpp bench/llamacpp/run.py: stories260K written as GGUF (F32, Q8_0, Q4_0), 256
#           greedy tokens in llama.cpp (npm node-llama-cpp, installed into .cache/bench) and in
#           Kiln built from the same file: ids compared (F32 must agree) and decode tokens/s;
#           also seeded 3M (F32, Q4_K, Q6_K) and 100M (F32, Q8_0, Q4_0, Q4_K, Q6_K; 64 tokens)
#           Llamas; 1 and 2 threads on both sides (BENCH_LLAMACPP_MODELS picks models).
#   quant   bench/quant/run.py: per weight format (f32 f16 q8_0 q4_0 q4_k q6_k from GGUF;
#           i8 g8 g4 through kiln build --quantize when kiln lists it) on stories260K and a
#           seeded 100M Llama: file size, logits error against f32, decode tokens/s and GB/s;
#           build time and peak RSS of seeded 125M and 1B checkpoints; bench/results/quant-*.
# Environment: KILN, CC; BENCH_QUICK=1 (a fast smoke run of every part); models:
# BENCH_MODELS="mlp lenet", BENCH_BUDGET_MS=1000; peers: BENCH_WORKLOADS, BENCH_ROUNDS,
# BENCH_NAME (docs/bench.md).
set -eu
cd "$(dirname "$0")/.."
KILN="${KILN:-$PWD/build/kiln}"
export KILN
if [ ! -x "$KILN" ]; then
  echo "bench: $KILN not found (run make first)" >&2
  exit 1
fi
quick=""
case "${BENCH_QUICK:-}" in ""|0) ;; *) quick=1 ;; esac
for part in ${BENCH:-models peers llm llamacpp quant}; do
  case "$part" in
    models)
      if [ -n "$quick" ]; then
        BENCH_MODELS="${BENCH_MODELS:-mlp lenet}" BENCH_BUDGET_MS="${BENCH_BUDGET_MS:-100}" /usr/bin/python3 bench/bench.py
      else
        /usr/bin/python3 bench/bench.py
      fi ;;
    peers)
      sh scripts/install-deps.sh --bench
      /usr/bin/python3 bench/peerbench/run.py ;;
    llm)
      /usr/bin/python3 bench/llm/run.py ;;
    llamacpp)
      sh scripts/install-deps.sh --bench
      /usr/bin/python3 bench/llamacpp/run.py ;;
    quant)
      /usr/bin/python3 bench/quant/run.py ;;
    *)
      echo "bench: unknown part '$part' in BENCH (known: models peers llm llamacpp quant)" >&2
      exit 2 ;;
  esac
done

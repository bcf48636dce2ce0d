#!/bin/sh
# fuzz.sh SECONDS — what `make fuzz` runs: builds every libFuzzer harness of tests/robust/
# with clang (-fsanitize=fuzzer,address,undefined) into build-fuzz/ and runs each for
# SECONDS, starting from its corpus in the repository. New inputs that reach new code
# go to build-fuzz/corpus-<name>/ (copy the interesting ones into tests/robust/<dir>/:
# `make test` replays those); a finding stops that harness and leaves crash-* files in
# build-fuzz/. Prints the executions each harness reached.
set -eu
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-60}
B=build-fuzz
mkdir -p "$B"
FLAGS="-std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -D_POSIX_C_SOURCE=200809L"
status=0
# name, seed corpus, sources
for spec in "safetensors st -Igen tests/robust/fuzz_safetensors.c gen/frontend/safetensors.c gen/frontend/json.c gen/util.c gen/ops.c gen/escape.c" \
            "weights wt -Iruntime tests/robust/fuzz_weights.c runtime/kiln_runtime.c" \
            "npy npy -Igen tests/robust/fuzz_npy.c gen/npy.c gen/util.c gen/ops.c gen/escape.c" \
            "gguf gguf -Igen tests/robust/fuzz_gguf.c gen/frontend/gguf.c gen/ir/quant.c gen/util.c gen/ops.c gen/escape.c" \
            "onnx onnx -Igen -Ibuild -Iruntime -I/usr/include/lua5.4 tests/robust/fuzz_onnx.c gen/frontend/onnx_read.c gen/frontend/onnx_import.c gen/publish.c gen/util.c gen/ops.c gen/escape.c build/onnx.pb-c.c build/embedded.c -llua5.4 -lprotobuf-c -lm" \
            "tokjson tokjson -Igen -Iruntime/llm tests/robust/fuzz_tokjson.c gen/tokjson.c gen/frontend/json.c gen/frontend/gguf.c gen/ir/quant.c gen/util.c gen/ops.c gen/escape.c $(ls runtime/llm/kiln_tok*.c | tr '\n' ' ')"; do
  set -- $spec
  name=$1 seeds=tests/robust/$2
  shift 2
  echo "fuzz: $name: building"
  clang $FLAGS -o "$B/fuzz_$name" "$@"
  mkdir -p "$B/corpus-$name"
  echo "fuzz: $name: running ${SECONDS_EACH}s from $seeds"
  if (cd "$B" && "./fuzz_$name" -max_total_time="$SECONDS_EACH" -print_final_stats=1 -artifact_prefix="./$name-" \
        "corpus-$name" "../$seeds" > "fuzz_$name.log" 2>&1); then
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$B/fuzz_$name.log")
    echo "fuzz: $name: no finding, $execs executions ($(ls "$B/corpus-$name" | wc -l) new corpus inputs)"
  else
    echo "fuzz: $name: FINDING, see $B/fuzz_$name.log and $B/$name-*"; status=1
  fi
done
exit $status

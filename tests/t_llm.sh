#!/bin/sh
# t_llm.sh — models/llm.lua, the Llama / Qwen2 / Qwen3 family script, on seeded Hugging
# Face-style checkpoints against an independent PyTorch implementation
# (tests/llm/torch_llm.py); the runner is tests/llm/run_llm.py. Then the sampler
# (runtime/llm/kiln_sample.c) against tests/llm/sample_test.c's exact expectations.
. "$(dirname "$0")/lib.sh"
kt_need_kiln llm
kt_work llm
"$PY" tests/llm/run_llm.py "$WORK"

# The sampler (runtime/llm/kiln_sample.c): exact checks, under ASan+UBSan, gcc and clang.
for cc in gcc clang; do
  if out=$($cc -std=c11 -Wall -Wextra -Wpedantic -Werror -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all \
           -Iruntime/llm -o "$WORK/sample_$cc" tests/llm/sample_test.c runtime/llm/kiln_sample.c -lm 2>&1); then
    if [ $cc = gcc ]; then "$WORK/sample_$cc"; else "$WORK/sample_$cc" > /dev/null && echo "PASS sample/clang-build-runs"; fi
  else
    echo "FAIL sample/$cc-build: $(echo "$out" | head -n 2 | tr '\n' ' ')"
  fi
done

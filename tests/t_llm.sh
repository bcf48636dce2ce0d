#!/bin/sh
# t_llm.sh — models/llm.lua, the Llama / Qwen2 / Qwen3 family script, on seeded Hugging
# Face-style checkpoints against an independent PyTorch implementation
# (tests/llm/torch_llm.py); the runner is tests/llm/run_llm.py.
. "$(dirname "$0")/lib.sh"
kt_need_kiln llm
kt_work llm
"$PY" tests/llm/run_llm.py "$WORK"

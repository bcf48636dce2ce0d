#!/bin/sh
# t_gguf.sh — GGUF weights files through kiln.load: every loaded ggml type against numpy's
# dequantization (bit-exact), metadata values, stories260K written as GGUF (f32 and Q8_0)
# with llama.cpp's tensor names. The runner is tests/py/run_gguf.py; malformed files are
# t_robust's (the fuzz corpus tests/robust/gguf/).
. "$(dirname "$0")/lib.sh"
kt_need_kiln gguf
kt_work gguf
"$PY" tests/py/run_gguf.py "$WORK"

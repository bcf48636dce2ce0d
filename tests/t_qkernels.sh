#!/bin/sh
# t_qkernels.sh — weights kept in a stored format, end to end: the generated C and the
# interpreter against numpy decoding the weights file (tests/quant/ref.py) and a GGUF's
# ggml blocks (tests/py/gguf_file.py); the formats a build chooses; --quantize's errors.
# The runner is tests/quant/run_qmodels.py. (Bit-identity across instruction sets is
# t_isa's, on tests/quant/qmix.lua; the quantizers and layouts are t_quant's.)
. "$(dirname "$0")/lib.sh"
kt_need_kiln qkernels
kt_work qkernels
"$PY" tests/quant/run_qmodels.py "$WORK"

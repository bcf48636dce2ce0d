#!/bin/sh
# t_state.sh — models with persistent state (kiln.state) and several entry points
# (kiln.entry): call sequences through the generated C (ASan/UBSan) against the reference
# interpreter and numpy, out-of-range offsets (E_RANGE, nothing touched), and
# models/stories.lua's prefill + KV-cache decode against a float64 full forward: 256
# greedy tokens and every logits row. The runner is tests/py/run_state.py.
. "$(dirname "$0")/lib.sh"
kt_need_kiln state
kt_work state
"$PY" tests/py/run_state.py "$WORK"

#!/bin/sh
# t_models.sh — whole models: each tests/models/tm_*.lua against its PyTorch twin (same
# weights, written as safetensors under the state_dict names) and every models/*.lua's
# generated C against the interpreter and against its PyTorch twin in bench/peers.py (filled
# with the build's weights; a model without a twin fails). The runner is tests/py/run_models.py.
# MODELS="tm_mlp lenet" limits the run.
. "$(dirname "$0")/lib.sh"
kt_need_kiln models
kt_work models
# shellcheck disable=SC2086
"$PY" tests/py/run_models.py "$WORK" $MODELS

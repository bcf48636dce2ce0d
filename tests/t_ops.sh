#!/bin/sh
# t_ops.sh — every op of `kiln ops`, on several shapes each: generated C vs the reference
# interpreter vs an independent float64 reference (numpy / torch.nn.functional), with the
# tolerances of docs/testing.md. One line per (op, case); the cases are tests/py/op_cases.py,
# the runner tests/py/run_ops.py. OPS="add conv2d" limits the run to cases whose name
# contains one of the words.
. "$(dirname "$0")/lib.sh"
kt_need_kiln ops
kt_work ops
# shellcheck disable=SC2086
"$PY" tests/py/run_ops.py "$WORK" $OPS

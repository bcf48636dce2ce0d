#!/bin/sh
# t_build.sh — what `kiln build` reports (the summary line, progress only on a terminal)
# and its peak memory on 128 MiB of weights. The runner is tests/build/run_build.py.
. "$(dirname "$0")/lib.sh"
kt_need_kiln build
kt_work build
"$PY" tests/build/run_build.py "$WORK"

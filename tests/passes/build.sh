#!/bin/sh
# Builds the pass test driver from the compiler's own sources for the graph, shape
# rules, passes, memory planner and interpreter (not the frontend or emitters, so it
# builds whatever state those are in): build.sh OUT [extra cflags...]
set -eu
out=$1; shift
src="gen/ops.c gen/util.c gen/ir/graph.c gen/ir/shape.c gen/ir/passes.c gen/ir/narrow.c gen/ir/pack.c gen/ir/actq.c gen/ir/quant.c gen/ir/memplan.c gen/ir/interp.c gen/ir/weight.c gen/frontend/init.c gen/frontend/gguf.c gen/escape.c gen/pipeline.c"
${CC:-cc} -std=c11 -Wall -Wextra -Wpedantic -Werror -O1 -g "$@" -D_POSIX_C_SOURCE=200809L -Igen \
  -o "$out" tests/passes/gtest.c $src -lm

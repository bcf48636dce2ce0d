#!/bin/sh
# llm_build.sh DIR [EXE] — the generation program (scripts/llm_main.c, docs/llm-runtime.md)
# for the language model Kiln built into DIR (a model with prefill and decode entries, e.g.
# `kiln build models/llm.lua -o DIR -D checkpoint=... --tokenizer tokenizer.json`), compiled
# with the runtime and the documented flags into EXE (default DIR/<model>_generate). The
# model's name is that of DIR's one .h file. `make llm OUT=DIR` runs it.
set -e
cd "$(dirname "$0")/.."
DIR=${1:?usage: scripts/llm_build.sh DIR [EXE]}
h=$(ls "$DIR"/*.h 2>/dev/null | grep -v '_metal\.h$' || true)
[ "$(echo "$h" | grep -c .)" = 1 ] || { echo "llm_build: $DIR must hold exactly one model header (kiln build -o $DIR)" >&2; exit 2; }
m=$(basename "$h" .h)
EXE=${2:-$DIR/${m}_generate}
CC="${CC:-cc}"
. scripts/arch.sh
PROF=""   # a model built with --profile: llm_main prints where the time went
grep -q "^#define $(echo "$m" | tr a-z A-Z)_PROFILE_KERNELS " "$h" && PROF=-DKILN_LLM_PROFILE
echo "llm_build: $CC -O2 $ARCH $PROF $DIR/$m.c runtime/kiln_runtime.c runtime/kiln_pool.c runtime/llm/*.c scripts/llm_main.c -> $EXE"
# shellcheck disable=SC2086
"$CC" -std=c11 -O2 $ARCH $PROF -D_POSIX_C_SOURCE=200809L -I"$DIR" -Iruntime -Iruntime/llm -DKM="$m" \
  -DKMU="$(echo "$m" | tr a-z A-Z)" "-DMODEL_HEADER=\"$m.h\"" -o "$EXE" scripts/llm_main.c "$DIR/$m.c" \
  runtime/kiln_runtime.c runtime/kiln_pool.c runtime/llm/kiln_tok*.c runtime/llm/kiln_sample.c runtime/llm/kiln_chat.c \
  runtime/llm/kiln_generate.c -pthread -lm

#!/bin/sh
# t_compile.sh — the generated C, the runtime and the compiler itself, under strict flags
# and sanitizers.
#   1. every model (models/*.lua, tests/golden/*.lua, tests/targets/*.lua, tests/state/*.lua): <m>.c and <m>_weights.c compile with
#      gcc and clang under -std=c11 -Wall -Wextra -Wpedantic -Werror, and run clean under
#      -fsanitize=address,undefined -fno-sanitize-recover=all, both with the test driver and
#      with runtime/ loading the weights (tests/py/run_compile.py); runtime/*.c alone too.
#   2. the compiler: `make san` builds <kiln's build dir>-san/kiln with ASan + UBSan, and a few kiln
#      commands (build every model, run, graph, a failing script) must run clean under it.
#      This part is last: it rebuilds kiln and is the slowest.
# Nothing is skipped: a missing compiler or a failed build is a FAIL line.
. "$(dirname "$0")/lib.sh"
kt_need_kiln compile
kt_work compile

for cc in gcc clang; do
  command -v "$cc" > /dev/null || echo "FAIL compile/$cc: $cc is not installed"
done
# shellcheck disable=SC2046
"$PY" tests/py/run_compile.py "$WORK" $(kt_models) tests/state/*.lua

# ---- 2. the compiler under sanitizers
KILN_BUILD=$(cd "$(dirname "$KILN")" && pwd)
SAN_KILN=$KILN_BUILD-san/kiln
if ! make --no-print-directory BUILD="$KILN_BUILD" san > "$WORK/make-san.log" 2>&1; then
  echo "FAIL compile/kiln_san/make: make san failed: $(grep -m 2 -i 'error' "$WORK/make-san.log" | tr '\n' ' ')"
  exit 0
fi
echo "PASS compile/kiln_san/make"
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1

# san NAME EXPECT_STATUS TEXT CMD...: runs CMD (kiln under sanitizers); its status must be
# EXPECT_STATUS, its output must hold no sanitizer report, and TEXT unless TEXT is "".
san() {
  name=$1 want=$2 expect=$3
  shift 3
  "$@" > "$WORK/san.out" 2>&1
  rc=$?
  if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:|ERROR: UndefinedBehaviorSanitizer' "$WORK/san.out"; then
    echo "FAIL compile/kiln_san/$name: sanitizer report: $(grep -m 1 -E 'Sanitizer|runtime error' "$WORK/san.out")"
  elif [ "$rc" -ne "$want" ]; then
    echo "FAIL compile/kiln_san/$name: exit $rc, want $want: $(head -n 2 "$WORK/san.out" | tr '\n' ' ')"
  elif [ -n "$expect" ] && ! grep -qF -- "$expect" "$WORK/san.out"; then
    echo "FAIL compile/kiln_san/$name: output lacks '$expect': $(head -n 2 "$WORK/san.out" | tr '\n' ' ')"
  else
    echo "PASS compile/kiln_san/$name"
  fi
}

mkdir -p "$WORK/san"
for script in $(kt_models); do
  m=$(basename "$script" .lua)
  san "build/$m" 0 "" "$SAN_KILN" build "$script" -o "$WORK/san/$m" --embed-weights
done
san "build_all_targets/tiny" 0 "" "$SAN_KILN" build tests/golden/tiny.lua --target all -o "$WORK/san/all"
"$PY" -c "import numpy as np; np.save('$WORK/features.npy', np.linspace(-2, 2, 16, dtype=np.float32).reshape(2, 8))"
san run/tiny 0 "probs:" "$SAN_KILN" run tests/golden/tiny.lua --input "features=$WORK/features.npy" --save "$WORK/san"
san graph/tiny 0 "" "$SAN_KILN" graph tests/golden/tiny.lua --after all
san graph_dot/tiny 0 "digraph" "$SAN_KILN" graph tests/golden/tiny.lua --dot
printf 'local x = kiln.input("x", {2, 3})\nkiln.output("y", x + kiln.input("y", {4}))\n' > "$WORK/bad_shapes.lua"
san error/shapes 1 "bad_shapes.lua:2:" "$SAN_KILN" build "$WORK/bad_shapes.lua" -o "$WORK/san/bad"
printf 'local x = kiln.input("x", {2, 3})\nkiln.output("y", x +)\n' > "$WORK/bad_syntax.lua"
san error/syntax 1 "bad_syntax.lua:2:" "$SAN_KILN" build "$WORK/bad_syntax.lua" -o "$WORK/san/bad"

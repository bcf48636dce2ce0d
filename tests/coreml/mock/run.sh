#!/bin/sh
# run.sh KILN WORKDIR — the Core ML wrapper (runtime/coreml/kiln_coreml.m) driven through a
# fake Core ML, as an app would use it; called by tests/t_coreml.sh (S=coreml), runnable
# alone from the repository root. Prints PASS/FAIL lines; UPDATE=1 rewrites the expected
# call logs (tests/coreml/mock/*.log).
#   build    the wrapper (without ARC: GCC's Objective-C runtime has none; the ARC build
#            is t_coreml's objc check), mock_coreml.m and drive.c link into one program
#   runs     tinystate (iOS18: prefill, decode, state) through one shared MLState and
#            through per-entry MLStates; with a Core ML that refuses a state made by
#            another function (shared: one clear error; per-entry: still correct); a plain
#            one-function model; a one-function model with a state (onefn.lua, `main`);
#            i64 inputs (tests/coreml/models/i64.lua): narrowed, and E_RANGE outside int32.
#            Each: drive.c's own checks of outputs, states and error messages, and the
#            logged Core ML calls (loads and function names, newState,
#            which state object each prediction gets, input names, shapes, types,
#            strides and values) equal to the expected log
#   cache    a second open of an unchanged package compiles nothing
KILN=$1
S=coreml
mkdir -p "$2" || exit 2
M=$(cd "$2" && pwd)
cd "$(dirname "$0")/../../.." || exit 2      # the repository root: paths below are relative to it
# tests/coreml/mock/drive.c uses kiln_coreml.h as an app would; mock_coreml.m stands in
# for Foundation and Core ML and logs every call the wrapper makes. The wrapper is built
# here without ARC (GCC's runtime has none; the ARC build is the objc check above).
mock_build() {
  mkdir -p "$M/pb" "$M/tmp" &&
  protoc-c --proto_path=gen/target --c_out="$M/pb" gen/target/coreml.proto gen/target/coreml_mil.proto &&
  OBJC="-std=gnu11 -x objective-c -fblocks -fobjc-runtime=gcc -fconstant-string-class=NSConstantString -Wall -Wextra -Werror" &&
  clang $OBJC -Wno-arc-bridge-casts-disallowed-in-nonarc -Iruntime/coreml/stub -Iruntime/coreml \
    -c runtime/coreml/kiln_coreml.m -o "$M/kiln_coreml.o" &&
  clang $OBJC -I"$M/pb" -c tests/coreml/mock/mock_coreml.m -o "$M/mock.o" &&
  cc -std=c11 -Wall -Wextra -Wpedantic -Werror -Iruntime/coreml -c tests/coreml/mock/drive.c -o "$M/drive.o" &&
  clang -o "$M/drive" "$M/drive.o" "$M/kiln_coreml.o" "$M/mock.o" "$M/pb/coreml.pb-c.c" "$M/pb/coreml_mil.pb-c.c" \
    -I"$M/pb" -lobjc -lprotobuf-c &&
  "$KILN" build tests/golden/tinystate.lua -o "$M/ts" --target coreml --min-os iOS18 >/dev/null &&
  "$KILN" build tests/coreml/golden/tiny.lua -o "$M/tiny" --target coreml >/dev/null &&
  "$KILN" build tests/coreml/mock/onefn.lua -o "$M/onefn" --target coreml --min-os iOS18 >/dev/null &&
  "$KILN" build tests/coreml/models/i64.lua -o "$M/i64" --target coreml >/dev/null 2>&1
}
# mock_run NAME PACKAGE MODE [STRICT]: drive the package in a fresh cache; the drive's
# own checks must pass and the Core ML call log must equal tests/coreml/mock/NAME.log.
mock_run() {
  rm -rf "$M/cache-$1" "$M/$1.log"
  out=$(KILN_MOCK_TMP=$M/tmp KILN_MOCK_LOG=$M/$1.log KILN_MOCK_STRICT_STATE=${4:-0} "$M/drive" "$2" "$M/cache-$1" "$3" 2>&1)
  rc=$?
  if [ $rc -eq 0 ] && ! echo "$out" | grep -q '^FAIL'; then
    echo "PASS $S/mock/$1: $(echo "$out" | grep -c '^ok') checks of the outputs, states and messages"
  else
    echo "FAIL $S/mock/$1: exit $rc: $(echo "$out" | grep -v '^ok\|^   \|^entry\|^state' | head -n 3 | tr '\n' ' ')"
  fi
  g=tests/coreml/mock/$1.log
  if [ -n "$UPDATE" ]; then cp "$M/$1.log" "$g"; echo "PASS $S/mock/$1-calls: rewritten"
  elif [ ! -f "$g" ]; then echo "FAIL $S/mock/$1-calls: no $g (run with UPDATE=1)"
  elif cmp -s "$M/$1.log" "$g"; then echo "PASS $S/mock/$1-calls: the Core ML calls are those of $g"
  else echo "FAIL $S/mock/$1-calls: the Core ML calls differ from $g:"; diff "$g" "$M/$1.log" | head -n 10; fi
}
if mock_build 2>"$M/build.err"; then
  echo "PASS $S/mock/build: the wrapper links against the fake Core ML"
  mock_run shared "$M/ts/tinystate.mlpackage" shared
  mock_run per-entry "$M/ts/tinystate.mlpackage" per-entry
  mock_run shared-strict "$M/ts/tinystate.mlpackage" shared-strict 1
  mock_run per-entry-strict "$M/ts/tinystate.mlpackage" per-entry 1
  mock_run plain "$M/tiny/tiny.mlpackage" plain
  mock_run main-state "$M/onefn/onefn.mlpackage" main-state
  mock_run i64 "$M/i64/i64.mlpackage" i64
  # The compile cache: a second open of an unchanged package compiles nothing.
  KILN_MOCK_TMP=$M/tmp KILN_MOCK_LOG=$M/again.log "$M/drive" "$M/tiny/tiny.mlpackage" "$M/cache-plain" plain >/dev/null 2>&1
  if [ -s "$M/again.log" ] && ! grep -q '^compile' "$M/again.log"; then
    echo "PASS $S/mock/cache: a second open of the same package reuses the compiled model"
  else
    echo "FAIL $S/mock/cache: the second open compiled again (or logged nothing)"
  fi
else
  echo "FAIL $S/mock/build: $(head -n 3 "$M/build.err" | tr '\n' ' ')"
fi


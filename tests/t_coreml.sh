#!/bin/sh
# t_coreml.sh — the Core ML target, checked without a Mac (nothing here runs Core ML):
#   schema     gen/coreml*.proto field by field against Apple's text (tests/coreml/apple/)
#   objc       runtime/coreml/kiln_coreml.m compile-checked with clang against the stub
#              CoreML/Foundation headers, also for macOS 12 (newer APIs only inside
#              @available); its header as C
#   mock       the wrapper driven through a fake Core ML (tests/coreml/mock/: GCC's
#              Objective-C runtime, no ARC) as an app would: tinystate's prefill and
#              decodes through one shared MLState and through per-entry MLStates, a state
#              Core ML refuses, a plain model, i64 inputs (narrowed; E_RANGE outside
#              int32, nothing run); the logged Core ML calls (order, function names,
#              which state object, input shapes, types and values) against expected logs
#   i64        an i64 input is INT32 in the package's description and function and named
#              in kiln.i64_inputs; the build's one note says so
#   milrun     the test interpreter (tests/coreml/milrun.c) builds warning-free
#   models     every models/*.lua and tests/coreml/models/*.lua, for iOS15 and iOS17 in
#              fp32 and fp16: builds; protoc --decode shows no unknown field; manifest and
#              weight.bin structure (tests/coreml/wbcheck.py); milrun validates the program
#              and its outputs match the C target (tests/coreml/compare.py states tolerances);
#              a model with state or entry points fails below iOS18 with one line
#   quant      tests/quant/qmix.lua with its --quantize rules (every stored format) at iOS18
#              and iOS15, fp32 and fp16: milrun (which evaluates iOS18's constexpr ops)
#              against the C build, and each weight's bytes in weight.bin exactly as
#              docs/coreml.md's table says and decoded to exactly the C build's values
#              (tests/coreml/qsizes.py); a GGUF file's F16/BF16/Q8_0/Q4_0/Q4_K/Q6_K blocks
#              kept as stored (tests/coreml/gguf_model.py) against the C build
#   state      models with state or entry points at iOS18, fp32 and fp16: call sequences
#              through milrun's state store against the C target after every call, and
#              out-of-range offsets leave the states untouched (tests/coreml/state_compare.py)
#   golden     the decoded text of tests/coreml/golden/tiny.lua, and the description and op
#              sequence of tests/golden/tinystate.lua at iOS18 (UPDATE=1 rewrites them)
#   twice      two builds (different working directories) give identical bytes
#   checkers   a corrupted weight.bin is rejected by wbcheck and milrun; so are stateful
#              packages with a builder-only op, an fp32 state or an undescribed state, and
#              compressed-weight packages with a constexpr op below iOS18 or an int4 blob
#              declared int8; a rotated lookup table moves the outputs
#   coremltools where `import coremltools` works: its loader reads every package back
#              (tests/coreml/ctcheck.py); a NOTE otherwise
#   errors     rank > 5, a MIL keyword as an I/O name, an i32 state and entry points below
#              iOS18 fail, naming the Lua line; so do the ops Core ML has no lowering for
#              (fmod, round_f16: tests/coreml/errors/<op>.lua)
#   ops        every op of the op table is exercised by some model above, or is one of
#              those errors
. "$(dirname "$0")/lib.sh"
kt_need_kiln coreml
kt_work coreml
S=coreml

# ---- schema ----
$PY tests/coreml/protocmp.py gen/target tests/coreml/apple

# ---- objc wrapper ----
if ! command -v clang >/dev/null; then
  echo "FAIL $S/objc: clang not installed"
elif out=$(clang -fsyntax-only -x objective-c -fobjc-arc -fblocks -fobjc-runtime=macosx-13.0 -Wall -Wextra -Werror \
           -Iruntime/coreml/stub -Iruntime/coreml runtime/coreml/kiln_coreml.m 2>&1); then
  echo "PASS $S/objc: kiln_coreml.m compiles against the CoreML/Foundation stub (ARC, -Wall -Wextra -Werror)"
else
  echo "FAIL $S/objc: $(echo "$out" | head -n 3 | tr '\n' ' ')"
fi
# Availability: compiled for macOS 12 (the stubs carry Apple's API_AVAILABLE marks), every
# newer API (functionName, MLState: macOS 15; the Neural Engine unit: 13; getBytes: 12.3)
# must sit inside @available, or an app would crash on an older OS. glibc's headers stand in
# for the SDK's C headers (their __nonnull clashes with clang's Darwin keyword).
if ! command -v clang >/dev/null; then
  echo "FAIL $S/objc-availability: clang not installed"
elif out=$(clang -target x86_64-apple-macos12.0 -isystem /usr/include/x86_64-linux-gnu -U__nonnull '-D__nonnull(p)=' \
           -fsyntax-only -x objective-c -fobjc-arc -fblocks -Wall -Wextra -Werror -Wunguarded-availability \
           -Iruntime/coreml/stub -Iruntime/coreml runtime/coreml/kiln_coreml.m 2>&1); then
  echo "PASS $S/objc-availability: built for macOS 12, every newer Core ML API is guarded by @available"
else
  echo "FAIL $S/objc-availability: $(echo "$out" | head -n 3 | tr '\n' ' ')"
fi
if out=$(cc -std=c11 -Wall -Wextra -Wpedantic -Werror -fsyntax-only -x c runtime/coreml/kiln_coreml.h 2>&1); then
  echo "PASS $S/objc-header: kiln_coreml.h is valid C11"
else
  echo "FAIL $S/objc-header: $(echo "$out" | head -n 2 | tr '\n' ' ')"
fi

# ---- the wrapper against a fake Core ML ----
# tests/coreml/mock/run.sh: the wrapper, built without ARC on GCC's runtime, driven by
# tests/coreml/mock/drive.c through tests/coreml/mock/mock_coreml.m.
sh tests/coreml/mock/run.sh "$KILN" "$WORK/mock"

# ---- milrun ----
mkdir -p "$WORK/pb"
MILRUN=$WORK/milrun
if protoc-c --proto_path=gen/target --c_out="$WORK/pb" gen/target/coreml.proto gen/target/coreml_mil.proto &&
   out=$(cc -std=c11 -Wall -Wextra -Wpedantic -Werror -O1 -D_POSIX_C_SOURCE=200809L -I"$WORK/pb" \
         -o "$MILRUN" tests/coreml/milrun.c "$WORK/pb/coreml.pb-c.c" "$WORK/pb/coreml_mil.pb-c.c" -lprotobuf-c -lm 2>&1); then
  echo "PASS $S/milrun builds"
else
  echo "FAIL $S/milrun does not build: $(echo "$out" | head -n 3 | tr '\n' ' ')"
  exit 1
fi

# ---- every model ----
# A model with state or entry points (models/stories.lua, tests/golden/tinystate.lua,
# tests/state/*.lua) needs --min-os iOS18 (Core ML states, multifunction models): at the
# default iOS15 its build must fail with one line naming the minimum OS, writing nothing.
# Its package at iOS18 is checked by tests/coreml/state_compare.py below.
for m in models/*.lua tests/coreml/models/*.lua tests/targets/*.lua; do
  n=$(basename "$m" .lua)
  if "$KILN" graph "$m" 2>/dev/null | grep -q '^entry '; then
    out=$("$KILN" build "$m" -o "$WORK/m-$n" --target coreml 2>&1)
    rc=$?
    if [ $rc -eq 1 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -q "^$m:[0-9]*: error: .*need --min-os iOS18 .*, not iOS15$" &&
       [ ! -e "$WORK/m-$n" ]; then echo "PASS $S/needs_ios18/$n: $out"
    else echo "FAIL $S/needs_ios18/$n: exit $rc, '$out' (want one line naming --min-os iOS18, nothing written)"; fi
    continue
  fi
  $PY tests/coreml/compare.py "$KILN" "$MILRUN" "$m" "$WORK/m-$n" iOS15:fp32 iOS15:fp16 iOS17:fp32 iOS17:fp16
done

# ---- stored weight formats ----
# Every format of docs/quantization.md, held as docs/coreml.md's table says: compressed
# (constexpr ops) at iOS18, plain fp16/fp32 below, each package's outputs against the C
# build of the same rules, and its weight.bin bytes per weight exactly as the table says.
$PY tests/coreml/compare.py "$KILN" "$MILRUN" tests/quant/qmix.lua "$WORK/quant" --args tests/quant/qmix.args --sizes \
  iOS18:fp32 iOS18:fp16 iOS15:fp32 iOS15:fp16
# The formats as a GGUF file stores them (ggml blocks with random K-quant scales,
# tests/coreml/gguf_model.py): kept as stored, compressed at iOS18, against the C build.
if $PY tests/coreml/gguf_model.py "$WORK/gguf"; then
  $PY tests/coreml/compare.py "$KILN" "$MILRUN" "$WORK/gguf/g.lua" "$WORK/gguf-out" iOS18:fp32 iOS18:fp16 iOS15:fp32
  if "$KILN" build "$WORK/gguf/g.lua" -o "$WORK/gguf-18" --target coreml --min-os iOS18 2>"$WORK/err" && ! grep -q "note:" "$WORK/err"; then
    echo "PASS $S/gguf/iOS18-compressed: every GGUF format held compressed (no note)"
  else
    echo "FAIL $S/gguf/iOS18-compressed: $(grep -m1 . "$WORK/err" | cut -c1-200)"
  fi
else
  echo "FAIL $S/gguf: could not write the GGUF model"
fi

# ---- state and entry points (iOS18) ----
# Call sequences (prefill, decode...) of every model with state or entry points through
# milrun, carrying the state from call to call, against the C target after every call.
$PY tests/coreml/state_compare.py "$KILN" "$MILRUN" "$WORK/state" iOS18:fp32 iOS18:fp16

# ---- golden text ----
for cfg in iOS15:fp32 iOS17:fp16; do
  os=${cfg%:*}; p=${cfg#*:}; g=tests/coreml/golden/tiny.$os-$p.txt
  d=$WORK/golden-$os-$p
  if ! "$KILN" build tests/coreml/golden/tiny.lua -o "$d" --target coreml --min-os "$os" --precision "$p" 2>"$WORK/err"; then
    echo "FAIL $S/golden/$os-$p: build failed: $(head -n 1 "$WORK/err")"; continue
  fi
  protoc --decode=CoreML.Specification.Model --proto_path=gen/target gen/target/coreml.proto \
    < "$d/tiny.mlpackage/Data/com.apple.CoreML/model.mlmodel" > "$d/decoded.txt"
  cat "$d/tiny.mlpackage/Manifest.json" >> "$d/decoded.txt"
  if [ -n "$UPDATE" ]; then cp "$d/decoded.txt" "$g"; echo "PASS $S/golden/$os-$p: rewritten"; continue; fi
  if [ ! -f "$g" ]; then echo "FAIL $S/golden/$os-$p: no $g (run with UPDATE=1)"
  elif cmp -s "$d/decoded.txt" "$g"; then echo "PASS $S/golden/$os-$p"
  else echo "FAIL $S/golden/$os-$p: decoded model differs from $g:"; diff "$g" "$d/decoded.txt" | head -n 10; fi
done
# The stateful multifunction model in short: its decoded description (functions, states,
# metadata) and, per function, its non-const op types in order (protoc prints the
# functions sorted by name).
g=tests/coreml/golden/tinystate.iOS18-fp32.txt
d=$WORK/golden-tinystate
if ! "$KILN" build tests/golden/tinystate.lua -o "$d" --target coreml --min-os iOS18 2>"$WORK/err"; then
  echo "FAIL $S/golden/tinystate: build failed: $(head -n 1 "$WORK/err")"
else
  protoc --decode=CoreML.Specification.Model --proto_path=gen/target gen/target/coreml.proto \
    < "$d/tinystate.mlpackage/Data/com.apple.CoreML/model.mlmodel" > "$d/full.txt"
  { sed -n '/^description {/,/^mlProgram {/p' "$d/full.txt" | sed '$d'
    sed -n '/^mlProgram {/,$p' "$d/full.txt" | awk '/^    key: "/ {gsub(/"/, "", $2); printf "%sfunction %s:", (n++ ? "\n" : ""), $2}
      /^            type: "/ {gsub(/"/, "", $2); if ($2 != "const") printf " %s", $2} END {print ""}'
  } > "$d/decoded.txt"
  if [ -n "$UPDATE" ]; then cp "$d/decoded.txt" "$g"; echo "PASS $S/golden/tinystate: rewritten"
  elif [ ! -f "$g" ]; then echo "FAIL $S/golden/tinystate: no $g (run with UPDATE=1)"
  elif cmp -s "$d/decoded.txt" "$g"; then echo "PASS $S/golden/tinystate: description and op sequence of the iOS18 multifunction package"
  else echo "FAIL $S/golden/tinystate: differs from $g:"; diff "$g" "$d/decoded.txt" | head -n 10; fi
fi

# ---- two builds, identical bytes ----
for m in models/transformer.lua models/resnet.lua; do
  n=$(basename "$m" .lua)
  "$KILN" build "$m" -o "$WORK/twice1-$n" --target coreml --min-os iOS17 --precision fp16 2>/dev/null
  (mkdir -p "$WORK/elsewhere" && cd "$WORK/elsewhere" && "$KILN" build "$ROOT/$m" -o "$WORK/twice2-$n" --target coreml \
     --min-os iOS17 --precision fp16 2>/dev/null)
  if [ -d "$WORK/twice1-$n/$n.mlpackage" ] && diff -r "$WORK/twice1-$n/$n.mlpackage" "$WORK/twice2-$n/$n.mlpackage" >/dev/null; then
    echo "PASS $S/twice/$n: two builds give byte-identical packages"
  else
    echo "FAIL $S/twice/$n: the packages differ (or a build failed)"
  fi
done

# A package with compressed weights (every stored format, iOS18, fp16) built twice.
"$KILN" build tests/quant/qmix.lua -o "$WORK/twice1-qmix" --target coreml --min-os iOS18 --precision fp16 $(cat tests/quant/qmix.args) 2>/dev/null
(cd "$WORK/elsewhere" && "$KILN" build "$ROOT/tests/quant/qmix.lua" -o "$WORK/twice2-qmix" --target coreml --min-os iOS18 \
   --precision fp16 $(cat "$ROOT/tests/quant/qmix.args") 2>/dev/null)
if [ -d "$WORK/twice1-qmix/qmix.mlpackage" ] && diff -r "$WORK/twice1-qmix/qmix.mlpackage" "$WORK/twice2-qmix/qmix.mlpackage" >/dev/null; then
  echo "PASS $S/twice/qmix: two builds with compressed weights give byte-identical packages"
else
  echo "FAIL $S/twice/qmix: the packages differ (or a build failed)"
fi

# ---- the checkers reject broken files ----
src=$WORK/twice1-transformer/transformer.mlpackage
corrupt() {   # corrupt NAME OFFSET HEXBYTE: a copy of $src with one byte of weight.bin changed
  rm -rf "$WORK/bad-$1"; cp -r "$src" "$WORK/bad-$1"
  printf "\\$(printf %03o "$3")" | dd of="$WORK/bad-$1/Data/com.apple.CoreML/weights/weight.bin" bs=1 seek="$2" conv=notrunc 2>/dev/null
}
corrupt sentinel 64 0
corrupt dtype 68 2          # fp16 blob claimed to be fp32
corrupt version 4 3
for b in sentinel version; do
  if $PY tests/coreml/wbcheck.py "$WORK/bad-$b" >/dev/null; then echo "FAIL $S/checkers/wbcheck-$b: accepted a broken weight.bin"
  else echo "PASS $S/checkers/wbcheck-$b: rejected"; fi
done
for b in sentinel dtype version; do
  if "$MILRUN" "$WORK/bad-$b" check >/dev/null 2>&1; then echo "FAIL $S/checkers/milrun-$b: accepted a broken weight.bin"
  else echo "PASS $S/checkers/milrun-$b: rejected"; fi
done

# milrun's state rules: a stateful package edited through protoc's text form must be
# rejected when it holds coremltools' builder op coreml_update_state (a saved program has
# write_state + read_state), when a state is described as FLOAT32 (Core ML states are fp16),
# and when a function's state input has no description.
pkg=$WORK/state/tinystate/iOS18-fp32/tinystate.mlpackage
mutate() {   # mutate NAME SED-SCRIPT: a copy of $pkg with model.mlmodel edited as text
  rm -rf "$WORK/mut-$1"; cp -r "$pkg" "$WORK/mut-$1"
  protoc --decode=CoreML.Specification.Model --proto_path=gen/target gen/target/coreml.proto \
    < "$pkg/Data/com.apple.CoreML/model.mlmodel" | sed "$2" |
    protoc --encode=CoreML.Specification.Model --proto_path=gen/target gen/target/coreml.proto \
    > "$WORK/mut-$1/Data/com.apple.CoreML/model.mlmodel"
}
if [ -d "$pkg" ] && "$MILRUN" "$pkg" check >/dev/null 2>&1; then
  mutate same 'p;d'     # the control: decoded and encoded again, unchanged
  if out=$("$MILRUN" "$WORK/mut-same" check 2>&1); then echo "PASS $S/checkers/milrun-reencoded: accepted"
  else echo "FAIL $S/checkers/milrun-reencoded: the unchanged package is rejected: $(echo "$out" | tail -n 1)"; fi
  mutate update_op 's/type: "write_state"/type: "coreml_update_state"/'
  mutate state_fp32 '/^description {/,/^mlProgram {/s/dataType: FLOAT16/dataType: FLOAT32/'
  mutate no_state_desc '/^    state {/,/^    }/d'
  for b in update_op state_fp32 no_state_desc; do
    if out=$("$MILRUN" "$WORK/mut-$b" check 2>&1); then echo "FAIL $S/checkers/milrun-$b: accepted"
    else echo "PASS $S/checkers/milrun-$b: rejected: $(echo "$out" | tail -n 1)"; fi
  done
else
  echo "FAIL $S/checkers/state: no valid $pkg to mutate"
fi

# milrun's compressed-weight rules: a qmix package edited to hold its constexpr ops at
# spec 8 (they are iOS18 ops) or with an int4 const declared int8 (blob dtype code 8 then
# names the wrong type) is rejected; and the lookup table of w_g4 rotated by one entry,
# still a valid program, moves its outputs beyond the tolerance (the comparison can fail).
qpkg=$WORK/quant/iOS18-fp32/qmix.mlpackage
if [ -d "$qpkg" ] && "$MILRUN" "$qpkg" check >/dev/null 2>&1; then
  pkg=$qpkg
  mutate q_spec8 's/^specificationVersion: 9/specificationVersion: 8/; s/"CoreML8"/"CoreML7"/'
  mutate q_int4_as_int8 '/name: "w_q4_0_q"/,/blobFileValue/s/dataType: INT4/dataType: INT8/'
  for b in q_spec8 q_int4_as_int8; do
    if out=$("$MILRUN" "$WORK/mut-$b" check 2>&1); then echo "FAIL $S/checkers/milrun-$b: accepted"
    else echo "PASS $S/checkers/milrun-$b: rejected: $(echo "$out" | tail -n 1)"; fi
  done
  rm -rf "$WORK/mut-lut" "$WORK/mut-lut-out"; cp -r "$qpkg" "$WORK/mut-lut"; mkdir -p "$WORK/mut-lut-out"
  if ! $PY tests/coreml/rotate_blob.py "$WORK/mut-lut" w_g4_lut 4 ||
     ! "$MILRUN" "$WORK/mut-lut" run "$WORK/quant/cin" "$WORK/mut-lut-out" >/dev/null 2>&1; then
    echo "FAIL $S/checkers/lut-rotated: could not edit or run the package"
  elif $PY -c "
import numpy as np, sys
a = np.load('$WORK/mut-lut-out/lin1_g4.npy')
b = np.fromfile('$WORK/quant/cref/lin1_g4.bin', dtype=np.float32).reshape(a.shape)
sys.exit(0 if np.abs(a - b).max() > 1e-4 * max(1.0, np.abs(b).max()) else 1)"; then
    echo "PASS $S/checkers/lut-rotated: w_g4's table rotated by one entry moves lin1_g4 beyond the fp32 tolerance"
  else
    echo "FAIL $S/checkers/lut-rotated: the outputs did not move"
  fi
else
  echo "FAIL $S/checkers/quant: no valid $qpkg to edit"
fi

# ---- coremltools, where installed ----
# tests/coreml/ctcheck.py: Apple's coremltools parses each package with its full schema
# and loads the program through its own MIL op definitions (types, constness, opsets).
if $PY -c "import coremltools" >/dev/null 2>&1; then
  $PY tests/coreml/ctcheck.py "$WORK"/state/*/iOS18-*/*.mlpackage "$WORK"/m-*/iOS1*-*/*.mlpackage "$WORK"/quant/iOS1*-*/*.mlpackage
else
  echo "NOTE $S: coremltools is not installed here: its loader (tests/coreml/ctcheck.py) did not read the packages"
fi

# ---- errors name the Lua line ----
# Programs the Core ML target cannot express: an i32 state (Core ML states are fp16),
# and entry points below iOS18 (each a single line naming the Lua line of the state or
# entry, nothing written).
for e in "tests/state/implicit.lua:5:iOS18:state hist is i32: Core ML keeps states in fp16" \
         "tests/state/nostate.lua:6:iOS17:entry points need --min-os iOS18 for the Core ML target"; do
  f=${e%%:*}; rest=${e#*:}; line=${rest%%:*}; rest=${rest#*:}; os=${rest%%:*}; want=${rest#*:}
  n=$(basename "$f" .lua)
  if "$KILN" build "$f" -o "$WORK/err-$n" --target coreml --min-os "$os" 2>"$WORK/err"; then
    echo "FAIL $S/errors/$n: the build succeeded"
  elif [ "$(wc -l < "$WORK/err")" -eq 1 ] && grep -qF "$f:$line: error: $want" "$WORK/err" && [ ! -e "$WORK/err-$n" ]; then
    echo "PASS $S/errors/$n: $(head -n 1 "$WORK/err")"
  else
    echo "FAIL $S/errors/$n: unexpected message (or output left behind): $(head -n 2 "$WORK/err" | tr '\n' ' ')"
  fi
done
for e in rank6:4:rank rank6_io:4:rank keyword:3:reserved fmod:3:lowering round_f16:3:lowering; do
  n=${e%%:*}; rest=${e#*:}; line=${rest%%:*}; word=${rest#*:}
  if "$KILN" build "tests/coreml/errors/$n.lua" -o "$WORK/err-$n" --target coreml 2>"$WORK/err"; then
    echo "FAIL $S/errors/$n: the build succeeded"
  elif grep -q "^tests/coreml/errors/$n.lua:$line: error: .*$word" "$WORK/err" && [ ! -e "$WORK/err-$n" ]; then
    echo "PASS $S/errors/$n: $(head -n 1 "$WORK/err")"
  else
    echo "FAIL $S/errors/$n: unexpected message (or output left behind): $(head -n 1 "$WORK/err")"
  fi
done

# ---- i64 inputs: int32 in the package ----
# Core ML has no int64 multi-array: an i64 input is declared INT32 in the description and
# the MIL function (one build note says so), named in kiln.i64_inputs for the wrapper,
# which takes int64_t and narrows (tests/coreml/mock, mode i64). Its values against the C
# target, the int32 limits included: tests/coreml/models/i64.lua in the models loop above.
if "$KILN" build tests/coreml/models/i64.lua -o "$WORK/i64" --target coreml 2>"$WORK/i64.err"; then
  protoc --decode=CoreML.Specification.Model --proto_path=gen/target gen/target/coreml.proto \
    < "$WORK/i64/i64.mlpackage/Data/com.apple.CoreML/model.mlmodel" > "$WORK/i64/decoded.txt"
  desc=$(awk 'BEGIN{RS="\n  input [{]"} NR>1 && /^\n    name: "ids"/ {split($0, a, "\n  output"); print a[1]}' \
           "$WORK/i64/decoded.txt" | grep 'dataType:')
  fn=$(awk 'BEGIN{RS="\n *inputs [{]"} NR>1 && /^\n *name: "ids"/' "$WORK/i64/decoded.txt" | grep -m1 'dataType:')
  md=$(grep -A1 '"kiln.i64_inputs"' "$WORK/i64/decoded.txt" | sed -n 2p)
  note=$(grep '^kiln: note:' "$WORK/i64.err")   # the one note; the other line is "kiln: built ..."
  if [ "$(echo $desc)" = "dataType: INT32" ] && [ "$(echo $fn)" = "dataType: INT32" ] && [ "$(echo $md)" = 'value: "ids"' ] &&
     [ "$(echo "$note" | wc -l)" -eq 1 ] && echo "$note" | grep -q '^kiln: note: Core ML package: i64 input ids declared int32 '; then
    echo "PASS $S/i64: input ids is INT32 in the description and the function, kiln.i64_inputs = ids; $note"
  else
    echo "FAIL $S/i64: description '$desc', function '$fn', metadata '$md', note '$note'"
  fi
else
  echo "FAIL $S/i64: the build failed: $(head -n 1 "$WORK/i64.err")"
fi

# ---- op coverage ----
used=$(for m in models/*.lua tests/coreml/models/*.lua tests/targets/*.lua tests/golden/tinystate.lua tests/state/chain.lua \
                tests/state/fusion.lua tests/state/order.lua tests/state/nostate.lua; do
         "$KILN" graph "$m" --after memplan 2>/dev/null; done | awk '/^ *%/ {print $3}' | sort -u)
missing=""
for op in $("$KILN" ops | awk '{print $1}'); do
  # an op Core ML cannot take has its one-line error checked above instead (docs/ops.md)
  [ -f "tests/coreml/errors/$op.lua" ] && continue
  echo "$used" | grep -qx "$op" || missing="$missing $op"
done
if [ -z "$missing" ]; then echo "PASS $S/ops: every op of the op table is in a model checked above (or its error is)"
else echo "FAIL $S/ops: never exercised:$missing"; fi

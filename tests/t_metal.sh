#!/bin/sh
# t_metal.sh — the Metal target, verified on Linux (no Mac): see docs/metal.md.
#
#  1. the harness itself: half conversions, hand-written MSL kernels that must
#     match a C reference under three thread orders, and deliberately broken ones
#     (missing barriers, an off-by-one bound, a barrier after an early return) that
#     it must catch; the lint and the shim rejecting what Apple's compiler would;
#     the 32 KiB threadgroup-memory check;
#  2. the Objective-C runtime type-checked against the Metal API stub headers;
#  3. every model in models/ and tests/metal/models/: `kiln build --target metal`
#     twice (byte-identical), lint, compile the exact .metal with clang 14 as C++ for
#     OpenCL (-Werror) under the metal_stdlib shim, run the generated dispatch table
#     on the fiber emulator under forward, reverse and random thread orders, and
#     compare every output with the C target's (|d| <= 2e-6 max(1, max|c|) + 1e-5 |c|);
#     a model with state or entry points (models/stories.lua, tests/golden/tinystate.lua,
#     tests/state/*.lua) runs sequences of calls that carry the state block, compared
#     after every call with the C target and the interpreter, and out-of-range offsets
#     (tests/py/run_metal_state.py); i64 inputs at the int32 limits and beyond them
#     (E_RANGE, as the C entry; tests/py/run_metal_i64.py); weights kept in every stored format
#     (tests/quant/qmix.lua with qmix.args, qbatch.lua as q4_k, stories as q8_0) against
#     C and the interpreter, and broken expansions caught; every op of the op table must have run in some
#     kernel; the exact text of a golden model (tests/metal/golden/) is compared byte
#     for byte;
#  4. a barrier removed from a generated kernel is caught (a test of the test).
cd "$(dirname "$0")/.." || exit 2
KILN=${KILN:-$PWD/build/kiln}
M=$PWD/tests/metal
T=$(mktemp -d "${TMPDIR:-/tmp}/t_metal.XXXXXX")
trap 'rm -rf "$T"' EXIT
PY=/usr/bin/python3

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }
# check NAME CMD...: PASS when CMD succeeds, else FAIL with its last output line.
check() {
  name=$1; shift
  if "$@" > "$T/out" 2>&1; then pass "$name"; else fail "$name" "$(tail -n 3 "$T/out" | tr '\n' ' ')"; fi
}

if ! command -v clang++ > /dev/null; then
  fail metal_tools "clang++ (clang 14) is needed to compile MSL under the shim"
  exit 1
fi

# ---- 1. the harness ----
if cc -std=c11 -O1 -Wall -Wextra -Werror -D_GNU_SOURCE -I"$M" "$M/half_test.c" "$M/emu.c" -o "$T/half_test" 2> "$T/err"; then
  "$T/half_test" | grep -E '^(PASS|FAIL) ' | sed 's/ half_/ metal_half_/'
else
  fail metal_half_build "$(tail -n 2 "$T/err" | tr '\n' ' ')"
fi

st=$T/selftest
mkdir -p "$st"
cp "$M"/selftest/* "$st/"
$PY - "$st" <<'EOF'
import struct, sys, numpy as np
d = sys.argv[1]
b = np.random.default_rng(3).uniform(-1, 1, (29, 45)).astype("<f4").tobytes()
h = 0xcbf29ce484222325
for c in b:
    h = ((h ^ c) * 0x100000001b3) & 0xffffffffffffffff
hdr = b"KILNWGT1" + struct.pack("<IIQQ", 1, 64, len(b), h)
open(d + "/selftest.weights", "wb").write(hdr + b"\0" * (64 - len(hdr)) + b)
open(d + "/checksum", "w").write("0x%016xull" % h)
EOF
sum=$(cat "$st/checksum")
# selftest VARIANT WANT_RC WANT_TEXT NAME [cc flags]
selftest() {
  v=$1; want=$2; text=$3; name=$4; shift 4
  if ! sh "$M/mkemu.sh" "$st" selftest "$st/emu$v" -DSELFTEST_CHECKSUM="$sum" -DSELFTEST_VARIANT="$v" "$@" > "$T/out" 2>&1; then
    fail "$name" "harness build: $(tail -n 2 "$T/out" | tr '\n' ' ')"; return
  fi
  "$st/emu$v" "$st/selftest.weights" > "$T/out" 2>&1
  rc=$?
  if [ "$rc" -eq "$want" ] && grep -q "$text" "$T/out"; then pass "$name"
  else fail "$name" "exit $rc, expected $want with '$text': $(tail -n 2 "$T/out" | tr '\n' ' ')"; fi
}
selftest 0 0 "match order=rand" metal_emu_handwritten_kernels_match
selftest 0 0 "match order=rand" metal_emu_ucontext_fallback_matches -DEMU_UCONTEXT
selftest 1 1 "MISMATCH order=fwd" metal_emu_catches_missing_load_barrier
selftest 4 1 "MISMATCH order=" metal_emu_catches_tile_reuse_race
selftest 2 3 "out-of-bounds access to buffer buffer(0)=arena\[0\]+6720: byte 6660 of 6660" metal_emu_catches_off_by_one
selftest 3 3 "reached by 36 of 40 threads" metal_emu_catches_barrier_after_return

# the lint: every rule fires on lint_bad.metal
$PY "$M/msllint.py" "$M/lint_bad.metal" > "$T/lint" 2>&1
missing=""
for rule in "swizzle .s0" "swizzle .lo" "vector literal" "double" "OpenCL spelling barrier" "metal::" "#include stdio.h" \
            "if constexpr" "pointer without an address space" "calls itself" "static variable" "mixes position"; do
  grep -q -- "$rule" "$T/lint" || missing="$missing [$rule]"
done
if [ -z "$missing" ]; then pass metal_lint_rejects_non_msl; else fail metal_lint_rejects_non_msl "not reported:$missing"; fi
check metal_lint_accepts_handwritten $PY "$M/msllint.py" "$M/selftest/selftest.metal"

# the shim rejects what Metal rejects
shim_rejects() {
  name=$1; body=$2
  printf '#include <metal_stdlib>\nusing namespace metal;\nkernel void k(device const float *a [[buffer(0)]], device float *b [[buffer(1)]]) {\n  %s\n}\n' "$body" > "$T/neg.metal"
  if clang++ -x clcpp -cl-std=clc++2021 -cl-no-stdinc -Xclang -cl-ext=-cl_khr_fp64,-__opencl_c_fp64 -I"$M/include" \
       -Wall -Werror -fsyntax-only "$T/neg.metal" > "$T/out" 2>&1; then
    fail "$name" "the shim accepted: $body"
  else pass "$name"; fi
}
shim_rejects metal_shim_rejects_vector_arity 'float4 v = float4(1.0f, 2.0f, 3.0f); b[0] = v.x;'
shim_rejects metal_shim_rejects_erf 'b[0] = erf(a[0]);'
shim_rejects metal_shim_rejects_double 'double d = a[0]; b[0] = d;'
shim_rejects metal_shim_rejects_double_literal 'b[0] = 1.0 * a[0];'
shim_rejects metal_shim_rejects_const_write 'a[0] = 1.0f;'
shim_rejects metal_shim_rejects_vector_mix 'float4 f = float4(1.0f); int4 i = int4(1); f = f + i; b[0] = f.x;'

# threadgroup memory over 32 KiB is rejected
printf '#include <metal_stdlib>\nusing namespace metal;\nkernel void big(device float *b [[buffer(0)]], uint3 t [[thread_position_in_threadgroup]]) {\n  threadgroup float tile[8200];\n  tile[t.x] = 1.0f;\n  threadgroup_barrier(mem_flags::mem_threadgroup);\n  b[t.x] = tile[8199 - t.x];\n}\n' > "$T/big.metal"
$PY "$M/mslreflect.py" launch "$T/big.metal" "$T/big.cl" "$T/big.c" &&
  clang++ -x clcpp -cl-std=clc++2021 -cl-no-stdinc -I"$M/include" -Werror -c "$T/big.cl" -o "$T/big.o" 2> "$T/err"
if $PY "$M/mslreflect.py" tgmem "$T/big.o" "$T/big.c" > "$T/out" 2>&1; then fail metal_tgmem_limit "a 32800-byte threadgroup array passed"
elif grep -q "32800 bytes of threadgroup memory" "$T/out"; then pass metal_tgmem_limit
else fail metal_tgmem_limit "$(tail -n 1 "$T/out")"; fi

# ---- 2. the Objective-C runtime against the Metal API stub ----
objc() { clang -fsyntax-only -x objective-c -fobjc-arc -fobjc-runtime=macosx-11.0 -Wall -Wextra -Werror \
           -I"$M/stub" -Iruntime/metal "$@"; }
check metal_objc_runtime_typechecks objc runtime/metal/kiln_metal.m
sed 's/setBuffer:region_buffer(s, e, b) offset:/setBuffer:region_buffer(s, e, b) offsets:/' runtime/metal/kiln_metal.m > "$T/bad.m"
if objc "$T/bad.m" > /dev/null 2>&1; then fail metal_objc_stub_catches_misuse "a misspelt Metal selector compiled"
else pass metal_objc_stub_catches_misuse; fi

# ---- 3. every model ----
# A model with state or entry points is built, compiled and checked like the others here,
# and its calls run afterwards (tests/py/run_metal_state.py: the harness makes one call
# per run, so the sequences are driven from Python, next to the C target and `kiln run`).
tested=""
programs=""
mkdir -p "$T/m" "$T/g"
for script in models/*.lua tests/metal/models/*.lua tests/targets/*.lua tests/golden/tinystate.lua tests/state/*.lua; do
  [ -f "$script" ] || continue
  m=$(basename "$script" .lua)
  d=$T/m/$m
  if ! "$KILN" build "$script" -o "$d" --target metal > "$T/out" 2>&1; then
    fail "metal_build_$m" "$(tail -n 2 "$T/out" | tr '\n' ' ')"; continue
  fi
  "$KILN" build "$script" -o "$d.again" --target metal > /dev/null 2>&1
  same=yes
  for f in "$m.metal" "${m}_metal.c" "${m}_metal.h"; do cmp -s "$d/$f" "$d.again/$f" || same=no; done
  if [ $same = yes ]; then pass "metal_build_$m"; else fail "metal_build_$m" "two builds differ"; fi
  if ! sh "$M/mkemu.sh" "$d" "$m" "$d/emu" > "$T/out" 2>&1; then
    fail "metal_compile_$m" "lint, shim compile or threadgroup check: $(tail -n 4 "$T/out" | tr '\n' ' ')"; continue
  fi
  pass "metal_compile_$m"
  "$d/emu" --msl > "$d/embedded.metal"
  check "metal_table_embeds_msl_$m" cmp "$d/embedded.metal" "$d/$m.metal"
  if grep -q '_METAL_NUM_ENTRIES ' "$d/${m}_metal.h"; then programs="$programs $m"; continue; fi
  "$d/emu" "$d/$m.weights" --seed 7 > "$T/out" 2>&1
  rc=$?
  n=$(sed -n 's/^model .*: \([0-9]*\) dispatches.*/\1/p' "$T/out")
  if [ $rc -eq 0 ] && grep -q "match order=rand" "$T/out"; then
    pass "metal_emulated_matches_c_$m"
    echo "  $m: $n dispatches per inference"
    tested="$tested $m"
  else
    fail "metal_emulated_matches_c_$m" "exit $rc: $(grep -E 'MISMATCH|FAIL|harness' "$T/out" | head -n 3 | tr '\n' ' ')"
  fi
done

# i64 inputs (tests/metal/models/mtl_i64.lua, built and compared with C above on random
# in-range ids): the int32 limits, and values outside them, which the Metal call and the
# C entry must both refuse with E_RANGE, touching nothing; and i64 tokens into an entry
# with state (tests/metal/i64/tokstate.lua) (tests/py/run_metal_i64.py).
d=$T/m/tokstate
if "$KILN" build tests/metal/i64/tokstate.lua -o "$d" --target metal > "$T/out" 2>&1 &&
   sh "$M/mkemu.sh" "$d" tokstate "$d/emu" > "$T/out" 2>&1; then
  pass metal_compile_tokstate
else
  fail metal_compile_tokstate "$(tail -n 3 "$T/out" | tr '\n' ' ')"; d=""
fi
# shellcheck disable=SC2086
case " $tested " in
  *" mtl_i64 "*) "$PY" tests/py/run_metal_i64.py "$T/m/mtl_i64" $d ;;
  *) fail metal_i64 "tests/metal/models/mtl_i64.lua was not built and run" ;;
esac

# metal_program NAME DEFINES SCRIPT ARGS...: SCRIPT built for Metal as model NAME with ARGS
# and its harness compiled; DEFINES (the -D arguments, for the interpreter's calls) go to
# its defines file, which run_metal_state.py reads; NAME joins $programs.
metal_program() {
  name=$1 defines=$2 script=$3
  shift 3
  d=$T/m/$name
  if "$KILN" build "$script" -o "$d" --name "$name" "$@" --target metal > "$T/out" 2>&1 &&
     sh "$M/mkemu.sh" "$d" "$name" "$d/emu" > "$T/out" 2>&1; then
    echo "$defines" > "$d/defines"
    pass "metal_compile_$name"
    programs="$programs $name"
  else
    fail "metal_compile_$name" "$(tail -n 3 "$T/out" | tr '\n' ' ')"
  fi
}

# Gemma 3 (models/llm.lua's sliding-window layers on ring caches) over the seeded gemma3
# checkpoint of tests/llm/run_llm.py, as model `gemma`; and the same with -D
# prefill_logits=last (a prefill's one row of logits, the row `last`; the gathered row
# narrows the last layer), as model `gemma_last`.
if defs=$("$PY" tests/llm/run_llm.py --checkpoint gemma3 "$T/gemma_ckpt" 2>"$T/out"); then
  # shellcheck disable=SC2086
  metal_program gemma "$defs" models/llm.lua $defs
  # shellcheck disable=SC2086
  metal_program gemma_last "$defs -D prefill_logits=last" models/llm.lua $defs -D prefill_logits=last
else
  fail metal_compile_gemma "$(tail -n 3 "$T/out" | tr '\n' ' ')"
fi

# models/stories.lua with its matrix weights kept as q8_0 (docs/quantization.md: every
# Linear weight whose rows are whole blocks, and the tied embedding/classifier), as model
# `stories_q8`: the same sequences of calls as stories, the interpreter calls built with
# the same --quantize rule (its defines file).
d=$T/m/stories_q8
if "$KILN" build models/stories.lua -o "$d" --name stories_q8 --quantize q8_0 --target metal > "$T/out" 2>&1 &&
   [ "$(grep -c '"name": "q8_0"' "$d/stories_q8.json")" -ge 30 ] &&
   sh "$M/mkemu.sh" "$d" stories_q8 "$d/emu" > "$T/out" 2>&1; then
  echo "--quantize q8_0" > "$d/defines"
  pass metal_compile_stories_q8
  programs="$programs stories_q8"
else
  fail metal_compile_stories_q8 "$(tail -n 3 "$T/out" | tr '\n' ' ')"
fi

# the calls of the models with state or entry points
if [ -n "$programs" ]; then
  # shellcheck disable=SC2086
  $PY tests/py/run_metal_state.py "$T/m" $programs > "$T/prog" 2>&1
  cat "$T/prog"
  for m in $programs; do grep -q "^PASS metal_state/$m/sequence" "$T/prog" && tested="$tested $m"; done
  for m in $programs; do
    if ! grep -q "^\(PASS\|FAIL\) metal_state/$m/sequence" "$T/prog"; then
      fail "metal_state/$m/sequence" "no result: $(tail -n 3 "$T/prog" | tr '\n' ' ')"
    fi
  done
fi
case " $programs " in *" stories "*) ;; *) fail metal_state_stories "models/stories.lua was not built and compiled for Metal" ;; esac

# ---- weights kept in a stored format (docs/quantization.md) ----
# tests/quant/qmix.lua with the --quantize rules of qmix.args: every format as a Linear
# weight (one row: a thread per output; 13 rows: the tiles), as the W of W x and as an
# embedding table, read from the panels of the one weights file the C target reads too.
# Built twice (same bytes), run like every model against the C target (ids below 40, the
# table's rows), and against the interpreter on the same inputs (quant_interp.py); then
# an expansion broken in the .metal text must be caught.
q=$T/m/qmix
qargs=$(cat tests/quant/qmix.args)
# shellcheck disable=SC2086
if "$KILN" build tests/quant/qmix.lua -o "$q" $qargs --target metal > "$T/out" 2>&1 &&
   "$KILN" build tests/quant/qmix.lua -o "$q.again" $qargs --target metal > /dev/null 2>&1; then
  same=yes
  for f in qmix.metal qmix_metal.c qmix_metal.h qmix.weights; do cmp -s "$q/$f" "$q.again/$f" || same=no; done
  if [ $same = yes ]; then pass metal_build_qmix; else fail metal_build_qmix "two builds differ"; fi
  if sh "$M/mkemu.sh" "$q" qmix "$q/emu" > "$T/out" 2>&1; then
    pass metal_compile_qmix
    mkdir -p "$q/save"
    "$q/emu" "$q/qmix.weights" --seed 7 --int-max 40 --save "$q/save" > "$T/out" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && grep -q "match order=rand output=emb_g4" "$T/out"; then
      worst=$(sed -n 's/^match .*max |diff| \([^ ]*\) (max |ref| \([^)]*\))/\1 \2/p' "$T/out" |
              awk '{ s = $2 > 1 ? $2 : 1; r = $1 / (2e-6 * s); if (r > w) w = r } END { printf "%.2g", w }')
      pass "metal_emulated_matches_c_qmix (max |diff| / (2e-6 max(1, max|c|)) = $worst)"
      tested="$tested qmix"
      # shellcheck disable=SC2086
      $PY "$M/quant_interp.py" "$q" "$q/save" tests/quant/qmix.lua $qargs
    else
      fail metal_emulated_matches_c_qmix "exit $rc: $(grep -E 'MISMATCH|FAIL|harness' "$T/out" | head -n 3 | tr '\n' ' ')"
    fi
    # tests of the test: one expansion broken at a time must give mismatches in its
    # format's outputs only (q6_k: its two words of high bits swapped; q4_k: one bit
    # too many of a high sub-block's scale)
    for mut in "q6_k|v[16 + 4 * (j / 16)|v[16 + 4 * (1 - j / 16)" "q4_k|uint(sc[s - 4] >> 6)|uint(sc[s - 4] >> 5)"; do
      f=${mut%%|*}
      s=$T/qmut
      rm -rf "$s"; mkdir -p "$s"
      cp "$q"/qmix.* "$q"/qmix_metal.* "$s/"
      if ! $PY - "$s/qmix.metal" "$mut" <<'EOF'
import sys
p, (f, old, new) = sys.argv[1], sys.argv[2].split("|")
s = open(p).read()
if s.count(old) != 1:
    sys.exit("%r occurs %d times" % (old, s.count(old)))
open(p, "w").write(s.replace(old, new))
EOF
      then fail "metal_quant_catches_broken_$f" "the mutation does not apply"; continue; fi
      if sh "$M/mkemu.sh" "$s" qmix "$s/emu" > "$T/out" 2>&1 && ! "$s/emu" "$s/qmix.weights" --seed 7 --int-max 40 \
           --orders fwd > "$T/out" 2>&1 && grep -q "MISMATCH order=fwd output=[a-z0-9]*_$f:" "$T/out" &&
         ! grep "MISMATCH" "$T/out" | grep -qv "_$f:"; then
        pass "metal_quant_catches_broken_$f"
      else
        fail "metal_quant_catches_broken_$f" "$(grep -E 'MISMATCH|match' "$T/out" | head -n 2 | tr '\n' ' ')"
      fi
    done
  else
    fail metal_compile_qmix "lint, shim compile or threadgroup check: $(tail -n 4 "$T/out" | tr '\n' ' ')"
  fi
else
  fail metal_build_qmix "$(tail -n 2 "$T/out" | tr '\n' ' ')"
fi

# The same model with --activations ggml (tests/quant/qmix_ggml.args): the roundings ggml's
# products make run as Metal kernels too, against the C target and the interpreter with the
# same option; without it the interpreter must miss (quant_interp.py's control).
q=$T/m/qmix_ggml
qargs=$(cat tests/quant/qmix_ggml.args)
# shellcheck disable=SC2086
if "$KILN" build tests/quant/qmix.lua -o "$q" $qargs --target metal > "$T/out" 2>&1 &&
   sh "$M/mkemu.sh" "$q" qmix "$q/emu" > "$T/out" 2>&1; then
  mkdir -p "$q/save"
  "$q/emu" "$q/qmix.weights" --seed 7 --int-max 40 --save "$q/save" > "$T/out" 2>&1
  rc=$?
  if [ $rc -eq 0 ] && grep -q "match order=rand output=emb_g4" "$T/out"; then
    pass metal_emulated_matches_c_qmix_ggml
    # shellcheck disable=SC2086
    $PY "$M/quant_interp.py" "$q" "$q/save" tests/quant/qmix.lua $qargs
  else
    fail metal_emulated_matches_c_qmix_ggml "exit $rc: $(grep -E 'MISMATCH|FAIL|harness' "$T/out" | head -n 3 | tr '\n' ' ')"
  fi
else
  fail metal_emulated_matches_c_qmix_ggml "build or compile: $(tail -n 3 "$T/out" | tr '\n' ' ')"
fi

# The same kernels on a grid's batch dimension: tests/metal/models/qbatch.lua (built f32
# with every model above) with --quantize q4_k, both weights stored, against the C target.
q=$T/m/qbatch_q4_k
if "$KILN" build tests/metal/models/qbatch.lua -o "$q" --quantize q4_k --target metal > "$T/out" 2>&1 &&
   [ "$(grep -c '"name": "q4_k"' "$q/qbatch.json")" -eq 2 ] && sh "$M/mkemu.sh" "$q" qbatch "$q/emu" > "$T/out" 2>&1; then
  "$q/emu" "$q/qbatch.weights" --seed 7 > "$T/out" 2>&1
  rc=$?
  if [ $rc -eq 0 ] && grep -q "match order=rand output=c" "$T/out"; then pass metal_emulated_matches_c_qbatch_q4_k
  else fail metal_emulated_matches_c_qbatch_q4_k "exit $rc: $(grep -E 'MISMATCH|FAIL|harness' "$T/out" | head -n 3 | tr '\n' ' ')"; fi
else
  fail metal_emulated_matches_c_qbatch_q4_k "build (2 weights as q4_k) or compile: $(tail -n 3 "$T/out" | tr '\n' ' ')"
fi

# every op of the op table (but leaves and views) ran in some emulated kernel: the
# first comment line of each kernel names its op ("// name: op dtype ..."), each step
# of a fused kernel's epilogue helper its op ("  const float v1 = ...;  // add, m.lua:3")
ran=$(for m in $tested; do sed -n -e 's|^// [A-Za-z0-9_]*: \([a-z0-9_]*\) [a-z0-9]* .*|\1|p' \
        -e 's|^  const [a-z0-9]* v[0-9]* = .*;  // \([a-z0-9_]*\), .*|\1|p' "$T/m/$m/$m.metal"; done | sort -u)
missing=""
for op in $("$KILN" ops | awk '{print $1}'); do
  case $op in input|weight|const|reshape|state) continue ;; esac
  echo "$ran" | grep -qx "$op" || missing="$missing $op"
done
if [ -z "$missing" ]; then pass metal_every_op_emulated; else fail metal_every_op_emulated "never run:$missing"; fi

# golden text: the exact emitted MSL and table of tests/metal/golden/*.lua (each built
# with the arguments of its .args file, if any) and of tests/golden/tinystate.lua (state
# and two entry points: the entries table).
# To accept a change after reviewing it: UPDATE_GOLDEN=1 sh tests/t_metal.sh
exp=tests/metal/golden/expected
for script in tests/metal/golden/*.lua tests/golden/tinystate.lua; do
  m=$(basename "$script" .lua)
  gargs=""
  [ -f "${script%.lua}.args" ] && gargs=$(cat "${script%.lua}.args")
  # shellcheck disable=SC2086
  if ! "$KILN" build "$script" -o "$T/g/$m" $gargs --target metal > "$T/out" 2>&1; then
    fail "metal_golden_$m" "$(tail -n 2 "$T/out" | tr '\n' ' ')"; continue
  fi
  for f in "$m.metal" "${m}_metal.c" "${m}_metal.h"; do
    if [ -n "$UPDATE_GOLDEN" ]; then cp "$T/g/$m/$f" "$exp/$f"; pass "metal_golden_$f (updated: review the diff)"
    elif cmp -s "$exp/$f" "$T/g/$m/$f"; then pass "metal_golden_$f"
    else
      fail "metal_golden_$f" "differs from $exp/$f (UPDATE_GOLDEN=1 to accept after review)"
      diff -u "$exp/$f" "$T/g/$m/$f" 2>&1 | head -n 20 | sed 's/^/    /'
    fi
  done
done

# ---- 4. a test of the test on generated code ----
# Remove the barrier after the inner product of the first tiled matmul or conv of
# a model: the next tile's loads then race with other threads' reads.
for m in transformer mtl_nn lenet; do
  d=$T/m/$m
  [ -f "$d/$m.metal" ] || continue
  s=$T/sab
  rm -rf "$s"; cp -r "$d" "$s"
  $PY - "$s/$m.metal" <<'EOF'
import sys
p = sys.argv[1]
s = open(p).read()
i = s.index("for (uint k = 0; k < 16; k++)")
key = "    threadgroup_barrier(mem_flags::mem_threadgroup);\n"
j = s.index(key, i)
open(p, "w").write(s[:j] + s[j + len(key):])
EOF
  if sh "$M/mkemu.sh" "$s" "$m" "$s/emu" > "$T/out" 2>&1 && ! "$s/emu" "$s/$m.weights" --seed 7 > "$T/out" 2>&1 &&
     grep -q MISMATCH "$T/out"; then
    pass metal_emu_catches_removed_barrier_in_generated_kernel
  else
    fail metal_emu_catches_removed_barrier_in_generated_kernel "$m with a barrier removed still matched"
  fi
  break
done
[ -n "$tested" ] || fail metal_models "no model was tested"
exit 0

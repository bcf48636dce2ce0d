#!/bin/sh
# Graph, shape rules, passes, memory plan and reference interpreter.
#  1. tests/passes/gtest.c builds graphs through the C API and prints what the
#     passes make of them; each scenario's output must equal tests/passes/NAME.expected
#     (shape-rule messages, dumps after dce/cse/fold/legalize/memplan, kernel names,
#     hand-computed interpreter results). Scenarios "chain" and "random" also run an
#     independent checker of the memory plan (no two live values overlap); it makes
#     the driver exit 1.
#  2. The same driver built with ASan + UBSan must give the same output.
#  3. With a working `kiln` (KILN): golden dumps of tests/passes/*.lua after memplan (with
#     the options of NAME.args, if any: actq.lua's --activations ggml), and byte-identical
#     dumps on a second run.
#  4. Fusion: scenario "fusion" (what pass_group fuses and what it must not); the
#     switches (--no-fuse, KILN_NOFUSE=1) give one op per kernel; and
#     tests/passes/fusecheck.py runs every model fused, unfused and interpreted.
#  5. pass_narrow: tests/passes/narrowcheck.py builds models with and without it (same bytes).
cd "$(dirname "$0")/.." || exit 2
unset KILN_NOFUSE   # the expected outputs are of fused builds
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
scenarios="shapes mlp cse fold legalize names chain random interp fusion state"

if ! sh tests/passes/build.sh "$tmp/gtest" 2> "$tmp/build.err"; then
  echo "FAIL passes_build: $(head -n 5 "$tmp/build.err" | tr '\n' ' ')"
  exit 1
fi
for s in $scenarios; do
  if ! "$tmp/gtest" "$s" > "$tmp/$s.out" 2>&1; then
    echo "FAIL passes_$s: driver exited non-zero: $(grep -m 3 . "$tmp/$s.out" | tr '\n' ' ')"
  elif diff -u "tests/passes/$s.expected" "$tmp/$s.out" > "$tmp/$s.diff"; then
    echo "PASS passes_$s"
  else
    echo "FAIL passes_$s: output differs from tests/passes/$s.expected"
    head -n 20 "$tmp/$s.diff" | sed 's/^/    /'
  fi
done

# The chain must reuse memory: far less arena than the sum of its intermediates.
set -- $(cat "$tmp/chain.out")
if [ "${2:-0}" -gt 0 ] && [ "$((${2:-0} * 4))" -lt "${5:-0}" ]; then echo "PASS passes_chain_reuse"
else echo "FAIL passes_chain_reuse: arena ${2:-?} bytes for ${5:-?} bytes of intermediates"; fi

if sh tests/passes/build.sh "$tmp/gtest-san" -fsanitize=address,undefined -fno-sanitize-recover=all \
     -fno-omit-frame-pointer 2> "$tmp/san.err"; then
  bad=""
  for s in $scenarios; do
    "$tmp/gtest-san" "$s" > "$tmp/$s.san" 2>&1 && cmp -s "$tmp/$s.san" "$tmp/$s.out" || bad="$bad $s"
  done
  if [ -z "$bad" ]; then echo "PASS passes_sanitizers"
  else echo "FAIL passes_sanitizers: under ASan/UBSan:$bad"; fi
else
  echo "FAIL passes_sanitizers: cannot build with -fsanitize: $(head -n 3 "$tmp/san.err" | tr '\n' ' ')"
fi

# Lua scripts through the real frontend (skipped, with a note, while it cannot trace).
KILN=${KILN:-build/kiln}
for lua in tests/passes/*.lua; do
  [ -f "$lua" ] || continue
  name=$(basename "$lua" .lua)
  exp="tests/passes/$name.lua.expected"
  args=""   # options a script needs (tests/passes/NAME.args)
  [ -f "${lua%.lua}.args" ] && args=$(cat "${lua%.lua}.args")
  # shellcheck disable=SC2086
  if ! "$KILN" graph "$lua" --after memplan $args > "$tmp/$name.dump" 2> "$tmp/$name.err"; then
    echo "FAIL passes_lua_$name: kiln graph failed: $(head -n 3 "$tmp/$name.err" | tr '\n' ' ')"
    continue
  fi
  if diff -u "$exp" "$tmp/$name.dump" > "$tmp/$name.diff"; then echo "PASS passes_lua_$name"
  else
    echo "FAIL passes_lua_$name: dump differs from $exp"
    head -n 20 "$tmp/$name.diff" | sed 's/^/    /'
  fi
  # shellcheck disable=SC2086
  "$KILN" graph "$lua" --after memplan $args > "$tmp/$name.dump2" 2>&1
  if cmp -s "$tmp/$name.dump" "$tmp/$name.dump2"; then echo "PASS passes_lua_${name}_deterministic"
  else echo "FAIL passes_lua_${name}_deterministic: two runs differ"; fi
done
# The memory plan of every model in models/, traced by the real frontend: the driver
# linked with the objects of KILN's build directory (every pass, then check_plan).
objdir=$(dirname "$KILN")
if [ -f "$objdir/frontend/lua.o" ] && sh tests/passes/build-full.sh "$objdir" "$tmp/gtest-full" 2> "$tmp/full.err"; then
  for m in models/*.lua; do
    name=$(basename "$m" .lua)
    if "$tmp/gtest-full" plan "$m" > "$tmp/plan-$name.out" 2>&1; then echo "PASS passes_plan_$name"
    else echo "FAIL passes_plan_$name: $(tail -n 3 "$tmp/plan-$name.out" | tr '\n' ' ')"; fi
  done
else
  echo "FAIL passes_plan_models: cannot link the driver with $objdir: $(head -n 3 "$tmp/full.err" 2>/dev/null | tr '\n' ' ')"
fi

# Fusion switches: nn.Linear + ReLU is one kernel; --no-fuse and KILN_NOFUSE=1 give one
# op per kernel and the same build; KILN_NOFUSE=0 fuses.
kernels() { "$@" 2>&1 | sed -n 's/^kernels \([0-9]*\),.*/\1/p'; }
lua=tests/passes/small_mlp.lua
k_fused=$(kernels "$KILN" graph $lua --after memplan)
k_flag=$(kernels "$KILN" graph $lua --after memplan --no-fuse)
k_env=$(kernels env KILN_NOFUSE=1 "$KILN" graph $lua --after memplan)
k_env0=$(kernels env KILN_NOFUSE=0 "$KILN" graph $lua --after memplan)
if [ "$k_fused" = 3 ] && [ "$k_flag" = 8 ] && [ "$k_env" = 8 ] && [ "$k_env0" = 3 ]; then echo "PASS passes_fuse_switches"
else echo "FAIL passes_fuse_switches: kernels fused '$k_fused' (want 3), --no-fuse '$k_flag', KILN_NOFUSE=1 '$k_env' (want 8), KILN_NOFUSE=0 '$k_env0' (want 3)"; fi
if "$KILN" build $lua -o "$tmp/nf1" --no-fuse --target metal > "$tmp/nf.err" 2>&1 &&
   KILN_NOFUSE=1 "$KILN" build $lua -o "$tmp/nf2" --target metal >> "$tmp/nf.err" 2>&1 &&
   diff -r "$tmp/nf1" "$tmp/nf2" > /dev/null; then echo "PASS passes_fuse_flag_equals_env"
else echo "FAIL passes_fuse_flag_equals_env: $(head -n 3 "$tmp/nf.err" | tr '\n' ' ')"; fi
if "$KILN" build $lua -o "$tmp/lr" > "$tmp/lr.err" 2>&1 &&
   grep -q '"name": "matmul_0", "ops": \["matmul", "add", "relu"\]' "$tmp/lr/small_mlp.json"; then
  echo "PASS passes_fuse_linear_relu_json"
else echo "FAIL passes_fuse_linear_relu_json: $(head -n 3 "$tmp/lr.err" "$tmp/lr/small_mlp.json" 2>&1 | tr '\n' ' ')"; fi
/usr/bin/python3 tests/passes/fusecheck.py "$KILN" "$tmp/fuse" models/*.lua tests/metal/models/*.lua tests/golden/*.lua tests/state/*.lua \
  tests/passes/poolact.lua
# pass_narrow: the same bytes as with KILN_NONARROW=1 (narrow.lua: a block's last row, RoPE's
# halves, attention over heads as the bench's Llama spells it, the cases it must leave).
/usr/bin/python3 tests/passes/narrowcheck.py "$KILN" "$tmp/narrow" tests/passes/narrow.lua
exit 0

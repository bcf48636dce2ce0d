#!/bin/sh
# t_hardening.sh — untrusted input must not turn into code, crash the compiler or
# leave a mixed output behind (the hardening issue; docs/output.md, docs/lua-api.md).
#
#  names     tests/hardening/evil_names.lua: parameter, module and source-file names
#            holding comment terminators, trigraphs, quotes, backslashes, long and
#            invalid UTF-8, C keywords. Built for every target (+ --embed-weights; and
#            for C with --profile, whose table holds Lua file names in string literals);
#            every generated C file compiles with gcc and clang under -std=c11
#            -Werror -Wall -Wextra -Wpedantic -Wtrigraphs -Wcomment and defines no
#            symbol that a name spelled (nm); the .metal compiles under the MSL shim
#            and its dispatch table runs on the emulator and matches the C target;
#            the JSON parses; the Core ML package decodes and evaluates like the C.
#            tests/hardening/evil_state.lua: entry, input, output and state names that
#            collide with the Metal wrappers' names, parameters, locals, the table and
#            the include guard, or would end a comment: built for C and Metal, every
#            file and one unit including both headers compile (gcc, clang, strict), and
#            every entry runs on the Metal emulator, one out of range (E_RANGE).
#  runtime   a model name whose generated files would shadow a runtime header is refused.
#  publish   tests/hardening/publish.py: interrupted, concurrent and repeated builds into one
#            output directory; never a mixed directory, stale files or leftovers.
#  scaling   tests/hardening/scaling.py: build cost ~linear in ops and outputs on every target.
#  reads     `kiln run --input` from /dev/zero or an endless FIFO, kiln.load of /dev/zero:
#            one-line errors at once (reads are bounded by what the input needs); a .npy
#            whose dtype holds escape sequences and newlines is reported on one clean line;
#            kiln.load of a FIFO is refused at once; a mapped weights file that shrinks
#            during the build gives one line (SIGBUS caught) and leaves nothing behind.
#  sandbox   (the refusals themselves are tests/robust/err/sandbox_*.lua) symbolic links do
#            not lead require or kiln.load out of the script's directory; --unsafe-lua gives
#            the standard library back, with print and io.stdout still on stderr.
cd "$(dirname "$0")/.." || exit 2
. tests/lib.sh
kt_need_kiln t_hardening
kt_work hardening
S=hardening

pass() { echo "PASS $S/$1"; }
fail() { echo "FAIL $S/$1: $2"; }

# ---- names ----
E=$WORK/evil
if "$KILN" build tests/hardening/evil_names.lua -o "$E" --target all --embed-weights > "$WORK/out" 2>&1 &&
   "$KILN" build tests/hardening/evil_names.lua -o "$E.2" --target all --embed-weights > "$WORK/out" 2>&1; then
  pass "names/build"
  if diff -r "$E" "$E.2" > /dev/null; then pass "names/deterministic"; else fail "names/deterministic" "two builds differ"; fi
else
  fail "names/build" "$(tail -n 2 "$WORK/out" | tr '\n' ' ')"
fi
STRICT="-std=c11 -Wall -Wextra -Wpedantic -Werror -Wtrigraphs -Wcomment"
for cc in gcc clang; do
  for f in evil_names.c evil_names_weights.c evil_names_metal.c evil_names.h evil_names_metal.h; do
    [ -f "$E/$f" ] || { fail "names/$cc/$f" "not generated"; continue; }
    lang=c; case $f in *.h) lang=c-header ;; esac
    if out=$($cc $STRICT -x $lang -I"$E" -Iruntime -Iruntime/metal -c "$E/$f" -o "$WORK/$f.$cc.o" 2>&1); then
      pass "names/$cc/$f"
    else
      fail "names/$cc/$f" "$(echo "$out" | grep -m 2 error | tr '\n' ' ')"
    fi
  done
done
# --profile writes each kernel's ops and Lua lines (the evil source-file names) into C
# string literals: that build compiles as strictly.
EP=$WORK/evil_profile
if "$KILN" build tests/hardening/evil_names.lua -o "$EP" --profile > "$WORK/out" 2>&1; then
  for cc in gcc clang; do
    if out=$($cc $STRICT -I"$EP" -c "$EP/evil_names.c" -o "$WORK/evil_profile.$cc.o" 2>&1); then
      pass "names/profile/$cc"
    else
      fail "names/profile/$cc" "$(echo "$out" | grep -m 2 error | tr '\n' ' ')"
    fi
  done
else
  fail "names/profile" "$(tail -n 2 "$WORK/out" | tr '\n' ' ')"
fi
# tests/hardening/profile_names.lua: entries, inputs and kernels named like what a profile
# adds (pn_profile, pn_prof_tick, PN_PROFILE_SIZE) or what <time.h> declares (time, clock,
# TIME_UTC). Built with and without --profile: the entries' functions are the same, the
# profile's own names give way (pn_profile_), and both compile strictly, with POSIX too.
PN=$WORK/profile_names
for f in plain profile; do
  flag=""; [ $f = profile ] && flag=--profile
  # shellcheck disable=SC2086
  if ! "$KILN" build tests/hardening/profile_names.lua -o "$PN/$f" --name pn $flag > "$WORK/out" 2>&1; then
    fail "profile-names/$f" "$(tail -n 2 "$WORK/out" | tr '\n' ' ')"
    continue
  fi
  ok=1
  for cc in gcc clang; do
    for posix in "" "-D_POSIX_C_SOURCE=200809L"; do
      # shellcheck disable=SC2086
      $cc $STRICT $posix -I"$PN/$f" -c "$PN/$f/pn.c" -o "$PN/$f/pn.o" 2> "$WORK/err" ||
        { fail "profile-names/$f/$cc$posix" "$(grep -m 1 error "$WORK/err")"; ok=0; }
    done
  done
  grep -q '^int pn_profile(const void \*weights' "$PN/$f/pn.h" && grep -q '^int pn_prof_tick(const void \*weights' "$PN/$f/pn.h" ||
    { fail "profile-names/$f/entries" "the entries pn_profile and pn_prof_tick are not declared as such"; ok=0; }
  [ $f = profile ] && ! grep -q '^extern pn_prof_kernel pn_profile_\[PN_PROFILE_LEN\];' "$PN/$f/pn.h" &&
    { fail "profile-names/profile/table" "the table is not pn_profile_"; ok=0; }
  [ $ok = 1 ] && pass "profile-names/$f"
done
# Only the generated API may be defined: the names must stay inside comments and strings.
syms=$(nm -g --defined-only "$WORK"/*.c.gcc.o 2>/dev/null | awk '{print $3}' | sort -u | tr '\n' ' ')
case $syms in
  *inject*|"") fail "names/symbols" "defined symbols: $syms" ;;
  *) if echo "$syms" | tr ' ' '\n' | grep -v '^$' | grep -qv '^evil_names_'; then fail "names/symbols" "unexpected symbol in: $syms"
     else pass "names/symbols"; fi ;;
esac
if /usr/bin/python3 -c "import json, sys; json.load(open(sys.argv[1], encoding='utf-8'))" "$E/evil_names.json" 2> "$WORK/err"; then
  pass "names/json"
else
  fail "names/json" "$(tail -n 1 "$WORK/err")"
fi
if sh tests/metal/mkemu.sh "$E" evil_names "$WORK/emu" > "$WORK/out" 2>&1 &&
   "$WORK/emu" "$E/evil_names.weights" --seed 7 > "$WORK/out" 2>&1 && grep -q "match order=rand" "$WORK/out"; then
  pass "names/metal"
else
  fail "names/metal" "$(tail -n 3 "$WORK/out" | tr '\n' ' ')"
fi
ES=$WORK/evil_state
if "$KILN" build tests/hardening/evil_state.lua -o "$ES" --target c --target metal > "$WORK/out" 2>&1; then
  printf '#include "evil_state.h"\n#include "evil_state_metal.h"\n' > "$ES/both.c"
  probs=""
  for cc in gcc clang; do
    for f in evil_state.c evil_state_metal.c both.c; do
      $cc $STRICT -I"$ES" -Iruntime/metal -c "$ES/$f" -o "$WORK/es.o" > "$WORK/out" 2>&1 ||
        probs="$probs $cc/$f: $(grep -m 1 error "$WORK/out")"
    done
  done
  if [ -z "$probs" ]; then pass "names/state_compiles"; else fail "names/state_compiles" "$probs"; fi
  printf '\001\000\000\000' > "$ES/one.i32"; printf '\003\000\000\000' > "$ES/three.i32"
  : > "$ES/x"; i=0; while [ $i -lt 24 ]; do printf '\000\000\200\077' >> "$ES/x"; i=$((i + 1)); done   # 1.0f
  runs=""
  if sh tests/metal/mkemu.sh "$ES" evil_state "$ES/emu" > "$WORK/out" 2>&1; then
    for e in model:8 h:16 prefill:24 metal_prefill:8; do
      head -c "${e#*:}" "$ES/x" > "$ES/k"
      "$ES/emu" "$ES/evil_state.weights" --entry "${e%:*}" --state-in - --in "$ES/k" --in "$ES/one.i32" \
        --out "$ES/o1" --out "$ES/o2" --state-out "$ES/s" > "$WORK/out" 2>&1 || runs="$runs ${e%:*}: $(tail -n 1 "$WORK/out")"
    done
    "$ES/emu" "$ES/evil_state.weights" --entry errlen --state-in "$ES/s" --out "$ES/o1" > "$WORK/out" 2>&1 || runs="$runs errlen"
    head -c 24 "$ES/x" > "$ES/k"
    "$ES/emu" "$ES/evil_state.weights" --entry prefill --state-in - --in "$ES/k" --in "$ES/three.i32" \
      --out "$ES/o1" --out "$ES/o2" > "$WORK/out" 2>&1
    [ $? -eq 6 ] || runs="$runs prefill at 3 not E_RANGE: $(tail -n 1 "$WORK/out")"
  else
    runs="mkemu: $(tail -n 2 "$WORK/out" | tr '\n' ' ')"
  fi
  if [ -z "$runs" ]; then pass "names/state_metal_runs"; else fail "names/state_metal_runs" "$runs"; fi
else
  fail "names/state_build" "$(tail -n 2 "$WORK/out" | tr '\n' ' ')"
fi
mkdir -p "$WORK/pb"
if protoc-c --proto_path=gen/target --c_out="$WORK/pb" gen/target/coreml.proto gen/target/coreml_mil.proto &&
   cc -std=c11 -O1 -D_POSIX_C_SOURCE=200809L -I"$WORK/pb" -o "$WORK/milrun" tests/coreml/milrun.c \
      "$WORK/pb/coreml.pb-c.c" "$WORK/pb/coreml_mil.pb-c.c" -lprotobuf-c -lm 2> "$WORK/err"; then
  /usr/bin/python3 tests/coreml/compare.py "$KILN" "$WORK/milrun" tests/hardening/evil_names.lua "$WORK/coreml" iOS15:fp32
else
  fail "names/coreml" "milrun does not build: $(head -n 2 "$WORK/err" | tr '\n' ' ')"
fi

# ---- runtime header names ----
for name in kiln kiln_runtime kiln_metal kiln_coreml; do
  if "$KILN" build tests/golden/tiny.lua -o "$WORK/rt-$name" --name "$name" > "$WORK/out" 2>&1; then
    fail "runtime_name/$name" "--name $name was accepted"
  elif [ "$(wc -l < "$WORK/out")" -eq 1 ] && grep -q "runtime" "$WORK/out" && [ ! -e "$WORK/rt-$name" ]; then
    pass "runtime_name/$name"
  else
    fail "runtime_name/$name" "$(head -n 2 "$WORK/out" | tr '\n' ' ')"
  fi
done
# ---- publish ----
/usr/bin/python3 tests/hardening/publish.py "$KILN" "$WORK/publish"

# ---- scaling ----
/usr/bin/python3 tests/hardening/scaling.py "$KILN" "$WORK/scaling"

# ---- reads ----
R=$WORK/reads
mkdir -p "$R"
printf 'local x = kiln.input("x", {4})\nkiln.output("y", x + 1)\n' > "$R/m.lua"
printf 'kiln.load("/dev/zero")\nlocal x = kiln.input("x", {4})\nkiln.output("y", x)\n' > "$R/z.lua"
# one_line NAME WANT CMD...: CMD exits 1 within 20 s, printing exactly one line that contains WANT.
one_line() {
  name=$1 want=$2; shift 2
  timeout 20 "$@" > "$WORK/stdout" 2> "$WORK/stderr"; rc=$?
  if [ $rc -ne 1 ]; then fail "$name" "exit status $rc (124: still reading after 20 s)"
  elif [ "$(wc -l < "$WORK/stderr")" -ne 1 ] || ! grep -qF -- "$want" "$WORK/stderr"; then fail "$name" "$(head -c 200 "$WORK/stderr")"
  elif LC_ALL=C grep -q "$(printf '[\001-\010\016-\037]')" "$WORK/stderr"; then fail "$name" "control bytes in the message"
  else pass "$name"; fi
}
one_line reads/dev_zero_input "/dev/zero: more than the 65564 bytes it can hold" "$KILN" run "$R/m.lua" --input x=/dev/zero
mkfifo "$R/fifo"
(yes 2>/dev/null | head -c 10000000 > "$R/fifo" 2>/dev/null &)
one_line reads/fifo_input "more than the 65564 bytes it can hold" "$KILN" run "$R/m.lua" --input "x=$R/fifo"
timeout 10 cat "$R/fifo" > /dev/null 2>&1 &   # let the writer finish (bounded: if it already died of SIGPIPE, no writer will come)
one_line reads/dev_zero_load "/dev/zero: not a regular file" "$KILN" graph "$R/z.lua" --unsafe-lua
# kiln.load of a FIFO inside the script's directory: refused at once (opening it to look
# for GGUF's magic would wait for a writer)
mkfifo "$R/wfifo"
printf 'kiln.load("wfifo")\nlocal x = kiln.input("x", {4})\nkiln.output("y", x)\n' > "$R/f.lua"
one_line reads/fifo_load "not a regular file" "$KILN" graph "$R/f.lua"
# A mapped weights file that shrinks after kiln.load checked it (the script truncates it:
# --unsafe-lua gives it os.execute): the build's reads of the lost pages raise SIGBUS,
# which must become one line naming the file, exit 1, and nothing in or beside the output.
/usr/bin/python3 - "$R/big.safetensors" <<'PYEOF'
import json, struct, sys
n = 256 * 1024                       # a [256, 1024] f32 weight: 1 MiB, many pages
h = json.dumps({"w": {"dtype": "F32", "shape": [256, 1024], "data_offsets": [0, 4 * n]}}).encode()
h += b" " * (-len(h) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + struct.pack("<%df" % n, *[(i % 7) * 0.25 for i in range(n)]))
PYEOF
cat > "$R/shrink.lua" <<'LUAEOF'
kiln.load("big.safetensors")
assert(os.execute("truncate -s 8192 big.safetensors"))   -- the test runs kiln from this directory
local x = kiln.input("x", {1, 1024})
kiln.output("y", kiln.matmul(x, kiln.param("w", {256, 1024}), {trans_b = true}))
LUAEOF
one_line reads/mapped_file_shrank "big.safetensors: it changed or shrank while kiln read it" \
  sh -c 'cd "$1" && exec "$2" build shrink.lua -o shrunk --unsafe-lua' sh "$R" "$KILN"
if [ -e "$R/shrunk" ] || ls -d "$R"/shrunk.kiln-tmp-* > /dev/null 2>&1; then
  fail reads/mapped_file_shrank_nothing_left "$(ls -d "$R"/shrunk* | head -n 2 | tr '\n' ' ')"
else pass reads/mapped_file_shrank_nothing_left; fi
/usr/bin/python3 -c "
import sys
h = b\"{'descr': '<f8\\x1b[31m\\nEVIL', 'fortran_order': False, 'shape': (4,), }\"
h += b' ' * (118 - len(h)) + b'\\n'
open(sys.argv[1], 'wb').write(b'\\x93NUMPY\\x01\\x00' + len(h).to_bytes(2, 'little') + h + bytes(32))" "$R/bad.npy"
one_line reads/npy_dtype_message "the file holds '<f8?[31m?EVIL'" "$KILN" run "$R/m.lua" --input "x=$R/bad.npy"

# ---- sandbox ----
B=$WORK/sb
mkdir -p "$B/outside" "$B/model"
printf 'return {}\n' > "$B/outside/helper.lua"
ln -s "$B/outside/helper.lua" "$B/model/helper.lua"
printf 'x' > "$B/outside/w.safetensors"    # never parsed: the sandbox refuses it first
ln -s "$B/outside/w.safetensors" "$B/model/w.safetensors"
printf 'local h = require "helper"\nlocal x = kiln.input("x", {2})\nkiln.output("y", x)\n' > "$B/model/req.lua"
printf 'kiln.load("w.safetensors")\nlocal x = kiln.input("x", {2})\nkiln.output("y", x)\n' > "$B/model/ld.lua"
if "$KILN" graph "$B/model/req.lua" > "$WORK/out" 2>&1; then fail "sandbox/require_symlink" "a module linked from outside loaded"
elif grep -q "only below the script's directory" "$WORK/out"; then pass "sandbox/require_symlink"
else fail "sandbox/require_symlink" "$(head -n 1 "$WORK/out")"; fi
if "$KILN" graph "$B/model/ld.lua" > "$WORK/out" 2>&1; then fail "sandbox/load_symlink" "a weights file linked from outside loaded"
elif grep -q "is outside the script's directory" "$WORK/out"; then pass "sandbox/load_symlink"
else fail "sandbox/load_symlink" "$(head -n 1 "$WORK/out")"; fi
if "$KILN" graph "$B/model/req.lua" --unsafe-lua > "$WORK/out" 2>&1; then pass "sandbox/unsafe_require_symlink"
else fail "sandbox/unsafe_require_symlink" "$(head -n 1 "$WORK/out")"; fi
printf 'io.write("w\\n"); io.stdout:write("s\\n"); print(os.getenv("HOME") ~= nil)\nlocal x = kiln.input("x", {2})\nkiln.output("y", x)\n' > "$B/model/unsafe.lua"
if "$KILN" graph "$B/model/unsafe.lua" --unsafe-lua > "$WORK/stdout" 2> "$WORK/stderr" &&
   [ "$(cat "$WORK/stderr")" = "$(printf 'w\ns\ntrue')" ] && grep -q '^%' "$WORK/stdout" && ! grep -q '^[ws]$' "$WORK/stdout"; then
  pass "sandbox/unsafe_lua"
else
  fail "sandbox/unsafe_lua" "stderr: $(head -c 200 "$WORK/stderr" | tr '\n' ' ')"
fi
if "$KILN" graph "$B/model/unsafe.lua" > "$WORK/out" 2>&1; then fail "sandbox/default" "io/os were available"
else pass "sandbox/default"; fi
exit 0

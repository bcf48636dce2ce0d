#!/bin/sh
# t_robust.sh — bad input gets a clear error, never a crash or silent garbage; unusual but
# valid input works end to end. (docs/testing.md, "Robustness".)
#
#   robust/err/<s>       every tests/robust/err/*.lua ends with "-- expect: <line>" (and may have a
#                        "-- flags: ..." line of extra options): `kiln build`
#                        and `kiln graph` (not for scripts marked "-- build-only") exit 1
#                        printing exactly that one line on stderr, nothing on stdout, and
#                        leave no output directory (nor its temporary)
#   robust/c|cwarn|stdout/<s>   tests/robust/ok/*.lua through tests/robust/e2e.py: the C target
#                        (under ASan/UBSan) equals `kiln run`, compiles warning-free, and
#                        `kiln graph` prints only the graph on stdout
#   robust/metal/<s>     the same scripts on the Metal target: built, linted, compiled under
#                        the shim and run on the emulator, matching the C target
#                        (tests/metal/mkemu.sh, as t_metal does for models/)
#   coreml/<s>/...       the same scripts on the Core ML target (tests/coreml/compare.py with
#                        tests/coreml/milrun, iOS15 fp32)
#   robust/cli/<case>    command-line misuse: missing or wrong files, directories, options
#                        given to the wrong command or twice, .npy inputs of the wrong dtype,
#                        shape, order or length, bool bytes other than 0/1; each one line
#                        "kiln: error: ..." and exit 1
#   robust/st-replay     tests/robust/fuzz_safetensors.c replays every tests/robust/st/* file
#                        under ASan/UBSan (seeds, and inputs fuzzing once found)
#   robust/st-load/<f>   `kiln graph` on a script that kiln.load()s the file: exit 0, or exit
#                        1 with one line naming the script's line and the file
#   robust/gguf-replay   tests/robust/fuzz_gguf.c replays every tests/robust/gguf/* file likewise,
#                        and robust/gguf-load/* loads each through kiln.load: it loads or gets
#                        one error line naming the script's line and the file
#   robust/npy-replay    tests/robust/fuzz_npy.c replays every tests/robust/npy/* file likewise
#   robust/wt-replay     tests/robust/fuzz_weights.c replays every tests/robust/wt/* file
#                        against runtime/kiln_runtime.c under ASan/UBSan
#   robust/onnx-replay   tests/robust/fuzz_onnx.c replays every tests/robust/onnx/* file through
#                        `kiln import`'s reader and translator (t_onnx checks their messages)
# Fuzzing itself (minutes, libFuzzer) is not part of the suite: see the two harnesses' headers.
. "$(dirname "$0")/lib.sh"
kt_need_kiln robust
kt_work robust
S=robust
SAN="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"

# ---- err ----
# err_check NAME EXPECTED CMD...: CMD exits 1 with exactly EXPECTED on stderr and nothing else.
err_check() {
  name=$1 want=$2
  shift 2
  "$@" > "$WORK/stdout" 2> "$WORK/stderr"
  rc=$?
  got=$(cat "$WORK/stderr")
  if [ "$rc" -ne 1 ]; then echo "FAIL $S/$name: exit status $rc, expected 1 ($(head -c 300 "$WORK/stderr"))"
  elif [ "$(wc -l < "$WORK/stderr")" -ne 1 ]; then echo "FAIL $S/$name: $(wc -l < "$WORK/stderr") lines on stderr: $(head -c 300 "$WORK/stderr")"
  elif [ "$got" != "$want" ]; then echo "FAIL $S/$name: got '$got', expected '$want'"
  elif [ -s "$WORK/stdout" ]; then echo "FAIL $S/$name: printed to stdout: $(head -n 1 "$WORK/stdout")"
  else echo "PASS $S/$name"
  fi
}

for f in tests/robust/err/*.lua; do
  n=$(basename "$f" .lua)
  want=$(sed -n 's/^-- expect: //p' "$f" | head -n 1)
  if [ -z "$want" ]; then echo "FAIL $S/err/$n: no '-- expect:' line"; continue; fi
  flags=$(sed -n 's/^-- flags: //p' "$f" | head -n 1)    # e.g. --unsafe-lua, --lua-max-memory 16
  out=$WORK/out-$n
  err_check "err/$n" "$want" "$KILN" build "$f" -o "$out" $flags
  if [ -e "$out" ] || [ -e "$out.kiln-tmp" ]; then echo "FAIL $S/err/$n/nothing-written: $out was created"; fi
  grep -q '^-- build-only' "$f" || err_check "err/$n/graph" "$want" "$KILN" graph "$f" $flags
done

# ---- ok: C, Metal, Core ML ----
"$PY" tests/robust/e2e.py "$WORK/e2e" tests/robust/ok/*.lua

if command -v clang++ > /dev/null; then
  for f in tests/robust/ok/*.lua; do
    m=$(basename "$f" .lua)
    d=$WORK/metal/$m
    if ! "$KILN" build "$f" -o "$d" --target metal > "$WORK/out" 2>&1; then
      echo "FAIL $S/metal/$m: build: $(tail -n 1 "$WORK/out")"; continue
    fi
    if ! sh tests/metal/mkemu.sh "$d" "$m" "$d/emu" > "$WORK/out" 2>&1; then
      echo "FAIL $S/metal/$m: lint, shim compile or link: $(grep -m 2 -E 'error|Error' "$WORK/out" | tr '\n' ' ')"; continue
    fi
    if "$d/emu" "$d/$m.weights" --seed 7 > "$WORK/out" 2>&1 && grep -q "match order=rand" "$WORK/out"; then
      echo "PASS $S/metal/$m"
    else
      echo "FAIL $S/metal/$m: emulator: $(grep -m 3 -E 'MISMATCH|FAIL|harness' "$WORK/out" | tr '\n' ' ')"
    fi
  done
else
  echo "FAIL $S/metal: clang++ (clang 14) is needed for the Metal shim"
fi

mkdir -p "$WORK/pb"
if protoc-c --proto_path=gen/target --c_out="$WORK/pb" gen/target/coreml.proto gen/target/coreml_mil.proto &&
   cc -std=c11 -O1 -D_POSIX_C_SOURCE=200809L -I"$WORK/pb" -o "$WORK/milrun" tests/coreml/milrun.c \
      "$WORK/pb/coreml.pb-c.c" "$WORK/pb/coreml_mil.pb-c.c" -lprotobuf-c -lm 2> "$WORK/out"; then
  for f in tests/robust/ok/*.lua; do
    "$PY" tests/coreml/compare.py "$KILN" "$WORK/milrun" "$f" "$WORK/coreml-$(basename "$f" .lua)" iOS15:fp32
  done
else
  echo "FAIL $S/coreml: tests/coreml/milrun does not build: $(head -n 2 "$WORK/out" | tr '\n' ' ')"
fi

# ---- cli ----
C=$WORK/cli
mkdir -p "$C"
cat > "$C/m.lua" <<'EOF'
local x = kiln.input("x", {2, 3})
local flag = kiln.input("flag", {2, 3}, "bool")
kiln.output("y", kiln.where(flag, x, 0))
EOF
"$PY" - "$C" <<'EOF'
import sys, numpy as np
d = sys.argv[1] + "/"
x = np.arange(6, dtype=np.float32).reshape(2, 3)
np.save(d + "x.npy", x)
np.save(d + "flag.npy", np.ones((2, 3), dtype=bool))
np.save(d + "x64.npy", x.astype(np.float64))
np.save(d + "xbig.npy", x.astype(">f4"))
np.save(d + "xT.npy", np.ascontiguousarray(x.T))
np.save(d + "xflat.npy", x.ravel())
np.save(d + "xfort.npy", np.asfortranarray(x))
raw = open(d + "x.npy", "rb").read()
open(d + "xcut.npy", "wb").write(raw[:-4])
open(d + "xhdr.npy", "wb").write(raw[:40])
x.ravel()[:5].tofile(d + "x_short.raw")
open(d + "flag_bad.raw", "wb").write(bytes([0, 1, 2, 1, 0, 1]))
EOF
: > "$C/afile"
cd "$C" || exit 2
F="--input flag=flag.npy"
err_check cli/no-command "kiln: error: no command (see kiln --help)" "$KILN"
err_check cli/missing-script "nope.lua: error: cannot open the model script: No such file or directory" "$KILN" graph nope.lua
err_check cli/directory-script ".: error: the model script is a directory" "$KILN" build . -o out
err_check cli/out-is-file "kiln: error: build: afile exists and is not a directory" "$KILN" build m.lua -o afile
err_check cli/out-under-file "kiln: error: cannot create afile/sub: afile is not a directory" "$KILN" build m.lua -o afile/sub
err_check cli/two-scripts "kiln: error: unexpected argument 'm.lua' (one model script per command)" "$KILN" graph m.lua m.lua
err_check cli/wrong-command-option "kiln: error: graph: option -o does not apply to this command (see kiln --help)" "$KILN" graph m.lua -o out
err_check cli/profile-without-c "kiln: error: --profile: it times the C target's kernels, and this build has no C target" "$KILN" build m.lua -o out --target metal --profile
err_check cli/name-shadows-header "kiln: error: the model's math.h would shadow the C header <math.h>; choose another --name" "$KILN" build m.lua -o out --name math
err_check cli/input-missing "kiln: error: run: missing --input x=FILE (f32 [2, 3])" "$KILN" run m.lua $F
err_check cli/input-twice "kiln: error: run: --input x is given twice" "$KILN" run m.lua --input x=x.npy --input x=x.npy $F
err_check cli/input-not-pair "kiln: error: run: --input x is not NAME=FILE" "$KILN" run m.lua --input x $F
err_check cli/input-misspelt "kiln: error: run: --input y=x.npy: the model has no input 'y' (its inputs: x, flag)" "$KILN" run m.lua --input y=x.npy $F
err_check cli/input-unknown "kiln: error: run: --input z=x.npy: the model has no input 'z' (its inputs: x, flag)" "$KILN" run m.lua --input x=x.npy --input z=x.npy $F
err_check cli/input-directory "kiln: error: --input x: .: is a directory" "$KILN" run m.lua --input x=. $F
err_check cli/input-absent "kiln: error: --input x: nope.npy: cannot open: No such file or directory" "$KILN" run m.lua --input x=nope.npy $F
err_check cli/npy-dtype "kiln: error: x64.npy: --input x is f32, which .npy spells '<f4'; the file holds '<f8'" "$KILN" run m.lua --input x=x64.npy $F
err_check cli/npy-big-endian "kiln: error: xbig.npy: --input x is f32, which .npy spells '<f4'; the file holds '>f4'" "$KILN" run m.lua --input x=xbig.npy $F
err_check cli/npy-shape "kiln: error: xT.npy: --input x is f32 [2, 3], the file holds shape [3, 2]" "$KILN" run m.lua --input x=xT.npy $F
err_check cli/npy-flat "kiln: error: xflat.npy: --input x is f32 [2, 3], the file holds shape [6]" "$KILN" run m.lua --input x=xflat.npy $F
err_check cli/npy-fortran "kiln: error: xfort.npy: Fortran-order arrays are not supported (save a C-order copy)" "$KILN" run m.lua --input x=xfort.npy $F
err_check cli/npy-truncated-data "kiln: error: xcut.npy: --input x [2, 3] needs 24 bytes of data, the file has 20" "$KILN" run m.lua --input x=xcut.npy $F
err_check cli/npy-truncated-header "kiln: error: xhdr.npy: truncated .npy header" "$KILN" run m.lua --input x=xhdr.npy $F
err_check cli/npy-bool-for-f32 "kiln: error: flag.npy: --input x is f32, which .npy spells '<f4'; the file holds '|b1'" "$KILN" run m.lua --input x=flag.npy $F
err_check cli/raw-short "kiln: error: x_short.raw: --input x is f32 [2, 3] = 24 bytes, the file has 20" "$KILN" run m.lua --input x=x_short.raw $F
err_check cli/bool-not-0-1 "kiln: error: flag_bad.raw: --input flag is bool, but element 2 is the byte 2 (not 0 or 1)" "$KILN" run m.lua --input x=x.npy --input flag=flag_bad.raw
err_check cli/save-is-file "kiln: error: run: --save afile exists and is not a directory" "$KILN" run m.lua --input x=x.npy $F --save afile
err_check cli/limit-not-number "kiln: error: --limit: a whole number >= 0 (0 = all), not 'ten'" "$KILN" run m.lua --input x=x.npy $F --limit ten
if [ -e out ] || [ -e out.kiln-tmp ] || [ -e afile.kiln-tmp ]; then echo "FAIL $S/cli/nothing-written: $(ls)"; else echo "PASS $S/cli/nothing-written"; fi
if got=$("$KILN" run m.lua --input x=/dev/stdin $F < x.npy 2>&1) && [ "$got" = "y: f32 [2, 3] = 0 1 2 3 4 5" ]; then
  echo "PASS $S/cli/input-from-pipe"
else
  echo "FAIL $S/cli/input-from-pipe: $got"
fi
cd "$ROOT" || exit 2

# ---- fuzz corpora, replayed ----
# replay NAME DIR HARNESS SOURCES...: the harness, built without libFuzzer under ASan/UBSan,
# runs every file of tests/robust/DIR; any finding aborts it.
replay() {
  name=$1 dir=$2
  shift 2
  if cc -std=c11 $SAN -D_POSIX_C_SOURCE=200809L -DKILN_FUZZ_MAIN -Igen -Iruntime -o "$WORK/${name}_replay" "$@" 2> "$WORK/out"; then
    if out=$("$WORK/${name}_replay" tests/robust/"$dir"/* 2>&1); then echo "PASS $S/$name-replay: $out"
    else echo "FAIL $S/$name-replay: $(echo "$out" | grep -m 2 -E 'fuzz_|ERROR|runtime error' | tr '\n' ' ')"; fi
  else
    echo "FAIL $S/$name-replay: the harness does not build: $(head -n 2 "$WORK/out" | tr '\n' ' ')"
  fi
}
# load_each NAME DIR FILE: each file of tests/robust/DIR, copied to FILE, through kiln.load:
# it loads, or gets one error line naming the script's line and the file.
load_each() {
  name=$1 dir=$2 file=$3
  for f in tests/robust/"$dir"/*; do
    cp "$f" "$WORK/$file"
    printf 'kiln.load("%s")\nkiln.output("y", kiln.input("x", {1}))\n' "$file" > "$WORK/${name}_load.lua"
    "$KILN" graph "$WORK/${name}_load.lua" > /dev/null 2> "$WORK/stderr"
    rc=$?
    if [ $rc -eq 0 ] || { [ $rc -eq 1 ] && [ "$(wc -l < "$WORK/stderr")" -eq 1 ] &&
         grep -q "^${name}_load.lua:1: error: .*$file: " "$WORK/stderr"; }; then
      echo "PASS $S/$name-load/$(basename "$f")"
    else
      echo "FAIL $S/$name-load/$(basename "$f"): exit $rc: $(head -c 300 "$WORK/stderr")"
    fi
  done
}
replay st st tests/robust/fuzz_safetensors.c gen/frontend/safetensors.c gen/frontend/json.c gen/util.c gen/ops.c gen/escape.c
load_each st st st.safetensors
replay gguf gguf tests/robust/fuzz_gguf.c gen/frontend/gguf.c gen/ir/quant.c gen/util.c gen/ops.c gen/escape.c
load_each gguf gguf w.gguf
replay npy npy tests/robust/fuzz_npy.c gen/npy.c gen/util.c gen/ops.c gen/escape.c
replay wt wt tests/robust/fuzz_weights.c runtime/kiln_runtime.c
# The ONNX harness runs the embedded translator: it links the build's generated sources.
B=$(dirname "$KILN")
replay onnx onnx -I"$B" $(pkg-config --cflags lua5.4 2>/dev/null || echo -I/usr/include/lua5.4) tests/robust/fuzz_onnx.c \
  gen/frontend/onnx_read.c gen/frontend/onnx_import.c gen/publish.c gen/util.c gen/ops.c gen/escape.c \
  "$B/onnx.pb-c.c" "$B/embedded.c" $(pkg-config --libs lua5.4 2>/dev/null || echo -llua5.4) -lprotobuf-c -lm

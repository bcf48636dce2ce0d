#!/bin/sh
# mkemu.sh DIR MODEL OUT — builds OUT, the Metal emulator harness for the model
# Kiln wrote into DIR (DIR/MODEL.metal, MODEL_metal.[ch], MODEL.[ch]):
#   1. lint the .metal text (msllint.py: what the shim accepts but Apple would not);
#   2. reflect its kernel signatures into launchers (mslreflect.py launch);
#   3. compile the exact .metal text, included unchanged by the launcher file, with
#      clang 14 as C++ for OpenCL 2021 against the metal_stdlib shim, -Werror, no fp64;
#   4. find each kernel's threadgroup memory in the object, check it against 32 KiB;
#   5. link harness.c + emu.c + the generated C target and dispatch table (a plain
#      model's harness compares with its <m>_run_v; one with state or entry points,
#      whose table has an entries list, runs one call per invocation: --entry).
# Extra arguments go to the C compiler (e.g. -DEMU_UCONTEXT). Exit non-zero with
# the failing step's output on any problem.
set -eu
dir=$1; m=$2; out=$3; shift 3
here=$(cd "$(dirname "$0")" && pwd)
work=$out.d
rm -rf "$work"; mkdir -p "$work"
/usr/bin/python3 "$here/msllint.py" "$dir/$m.metal"
/usr/bin/python3 "$here/mslreflect.py" launch "$dir/$m.metal" "$work/launch.cl" "$work/kernels.c"
cp "$dir/$m.metal" "$work/"
clang++ -x clcpp -cl-std=clc++2021 -cl-no-stdinc -Xclang -cl-ext=-cl_khr_fp64,-__opencl_c_fp64 \
  -I"$here/include" -Wall -Wextra -Wno-unused-parameter -Werror -O1 -fno-strict-aliasing \
  -c "$work/launch.cl" -o "$work/kernels.o"
/usr/bin/python3 "$here/mslreflect.py" tgmem "$work/kernels.o" "$work/kernels.c" > "$work/tgmem.txt"
CC=${CC:-cc}
run_v=-DKH_RUN_V="${m}_run_v"
if grep -q '_METAL_NUM_ENTRIES ' "$dir/${m}_metal.h"; then run_v=-DKH_PROGRAM; fi
$CC -std=c11 -Wall -Wextra -Wpedantic -Werror -O1 -g -D_GNU_SOURCE -I"$here" -I"$here/../../runtime/metal" -I"$dir" \
  -include "$dir/$m.h" -include "$dir/${m}_metal.h" -DKH_MODEL="${m}_metal_model" "$run_v" \
  "$@" -o "$out" "$here/harness.c" "$here/emu.c" "$work/kernels.c" "$work/kernels.o" \
  "$dir/$m.c" "$dir/${m}_metal.c" -lm

#!/bin/sh
# t_isa.sh — the generated C gives bit-identical results on every instruction-set path
# this machine can run. The matmul micro-kernels (templates/c/gemm_lib.c.tmpl) have an
# AVX-512 path, an AVX2 + FMA path, a NEON path (cross-compiled for ARM64 and run under
# qemu-aarch64) and plain C with fmaf
# (KILN_SCALAR, and any target without FMA); each output is one fused multiply-add chain in
# k order on all of them. kiln_dot4 (templates/c/dot4.c.tmpl: convolutions through gathered
# patches) has AVX, SSE/NEON and plain variants doing the same arithmetic in the same order;
# so do the kiln_cv lanes of conv_direct and stride-2 max pools (templates/c/vec_*.c.tmpl: AVX 8, SSE/NEON 4,
# plain), whose tasks, like the max pools', are images and planes (tests/conv/conv_edges.lua,
# which also has a Winograd convolution: templates/c/wino_lib.c.tmpl splits and joins rows with
# AVX-512, AVX2 and NEON shuffles, and plain loops).
# Each model (below) is compiled with gcc at -O2 (SSE2, the x86-64 baseline: the plain path, fmaf
# from libm), -O2 -mavx2 -mfma -DKILN_NO_AVX512 (AVX2 only), -O3 -march=native (this machine:
# AVX-512), -O2 -march=native -DKILN_SCALAR (the plain path with fmaf inlined), clang -O2
# -march=x86-64-v3 (an AVX2 build whose tiles switch to AVX-512 at run time here) and, for qmix, -march=native
# (clang's AVX-512 code: the stored formats' 16-lane path), and three
# builds whose matrix products run as tasks on 2, 3 and 4 threads (the _par functions with
# runtime/kiln_pool.c: a product, a batch of them or a row-wise kernel is cut into tasks that
# never split an output's chain; the first two with task sizes so small that these small
# models are cut into many tasks, the last one clang's plain path), run on the same seeded inputs (tests/runtime/driver.c); every
# output must be byte-identical across the ten. The big models (BIG: resnet, transformer,
# stories, stories_fixed) skip the -DKILN_SCALAR, 3- and 4-thread builds, which repeat paths
# the small models check; mlp and lenet (LIGHT) take three ways: plain, AVX2 only, and the
# -march=native build on 2 threads. Then aarch64-linux-gnu-gcc -O2 builds, plain
# (-DKILN_SCALAR) and NEON, run under qemu-aarch64, must be byte-identical to each other, and
# to x86-64's unless the model calls libm's sinf, cosf or powf (which may round differently
# there; exp, log, tanh and erf are Kiln's own); and edges, conv_edges and resnet compile
# for ARM64 at -O3 -Werror too (compile only). A model with entry points runs
# each entry once, in order, the state block chained from call to call and compared too. Numerical correctness against
# the interpreter and PyTorch is t_ops' and t_models' job; this suite checks that the paths
# they do not exercise agree with the one they do. tests/quant/qmix.lua does the same for the
# expansions of every stored weight format (templates/c/deq/: vector types, AVX2/NEON
# widening, F16C, plain loops).
cd "$(dirname "$0")/.." || exit 2
. tests/lib.sh
kt_need_kiln t_isa
kt_work isa
S=isa
BIG="resnet transformer stories stories_fixed"
# models/mlp.lua and lenet.lua take three ways (LIGHT: plain, AVX2 only, and -march=native,
# AVX-512 where the CPU has it, on 2 threads with tiny tasks), so that their own kernels' bodies
# run on each x86-64 path. Only three, because every kiln_* helper their C defines is in the
# models below too (conv_edges' pools, tanh after a pool and short rows; edges' one-row and
# odd-shape products), and all ten ways took 39 of this suite's 216 s in one timed run.
LIGHT="mlp lenet"
for m in models/resnet.lua models/transformer.lua models/stories.lua \
         models/stories_fixed.lua models/mlp.lua models/lenet.lua tests/golden/tiny.lua tests/matmul/edges.lua \
         tests/conv/conv_edges.lua tests/quant/qmix.lua tests/quant/qmix_ggml.lua; do
  n=$(basename "$m" .lua)
  d=$WORK/$n
  args=""   # build options a model needs (tests/quant/qmix.args: its --quantize rules)
  [ -f "${m%.lua}.args" ] && args=$(cat "${m%.lua}.args")
  # shellcheck disable=SC2086
  if ! "$KILN" build "$m" -o "$d/out" $args > "$WORK/err" 2>&1; then echo "FAIL $S/$n/build: $(head -n 1 "$WORK/err")"; continue; fi
  if [ "$n" = edges ]; then   # its two masks shared by every matrix: read along the row, not gathered
    c=$(grep -c 'e0\[row % 20 \* 24 + j\]' "$d/out/edges.c")
    if [ "$c" = 2 ]; then echo "PASS $S/edges/mask_row"; else echo "FAIL $S/edges/mask_row: $c stores read a shared mask along the row, want 2"; fi
  fi
  if [ "$n" = edges ]; then   # its two prefill attentions take the blocked kernel (attn_lib.c.tmpl), not the row one
    c=$(grep -c 'kiln_attn_par(par' "$d/out/edges.c")
    if [ "$c" = 2 ]; then echo "PASS $S/edges/attn_blocked"; else echo "FAIL $S/edges/attn_blocked: $c attentions run kiln_attn_par, want 2"; fi
  fi
  # One line per call: "-" for a plain model, else "ENTRY MACRO_PREFIX STATE?" of each entry in
  # order (a model with entries runs each once, the state block chained from call to call);
  # then the call's input files.
  calls=$("$PY" - "$d/out/$n.json" "$d" <<'PYEOF'
import json, sys, zlib, numpy as np
sig = json.load(open(sys.argv[1]))
rng = np.random.default_rng(zlib.crc32(sys.argv[1].encode()) & 0xffff)
up = sig["model"].upper() + "_"
for k, e in enumerate(sig.get("entries") or [sig]):
    files = []
    for i, x in enumerate(e["inputs"]):
        shape = x["shape"]
        if x["dtype"] == "f32": a = rng.standard_normal(shape).astype("<f4")
        elif x["dtype"] == "i32": a = rng.integers(0, 4, shape).astype("<i4")
        else: a = rng.integers(0, 2, shape).astype("u1")
        p = "%s/in%d_%d.bin" % (sys.argv[2], k, i)
        a.tofile(p)
        files.append(p)
    if "entries" not in sig:
        head = "-"
    else:
        stem = e["macros"][len(up):-1]
        head = "%s %s %s" % (e["name"], stem or "-", "state" if sig["states"] else "-")
    print(head + "|" + " ".join(files))
PYEOF
)
  [ "$n" = edges ] && edges_ins=$(echo "$calls" | head -n 1 | cut -d'|' -f2)   # for the control below, in order
  first="" first_arm=""
  for spec in "gcc -O2" "gcc -O2 -mavx2 -mfma -DKILN_NO_AVX512" "gcc -O3 -march=native" "gcc -O2 -march=native -DKILN_SCALAR" \
           "clang -O2 -march=x86-64-v3" "clang -O2 -march=native" "gcc -O3 -march=native -DKILN_TASK_FMAS=512 -DKILN_TASK_ELEMS=64 @2" \
           "gcc -O2 -mavx2 -mfma -DKILN_TASK_FMAS=8192 -DKILN_TASK_ELEMS=256 @3" "clang -O2 @4" \
           "aarch64-linux-gnu-gcc -O2 -static -DKILN_SCALAR" "aarch64-linux-gnu-gcc -O2 -static"; do
    # "@N": the entries' _par functions with a kiln_pool of N threads (runtime/kiln_pool.c);
    # tiny task sizes (KILN_TASK_FMAS, KILN_TASK_ELEMS) cut these small models into many tasks
    # clang's own AVX-512 code matters for the stored formats' 16-lane kernels; the f32
    # tiles' AVX-512 path is clang's already in the x86-64-v3 build (run-time switch)
    case $spec in "clang -O2 -march=native") [ "$n" = qmix ] || continue ;; esac
    # The four big models take 6 of the ways, a new path each (plain, AVX2, AVX-512, the
    # x86-64-v3 build's switch, threads, NEON): the others repeat a path with another compiler
    # or thread count, which the small models above and below check on every kernel kind, and
    # the big models' compiles were half of this suite's time.
    case " $BIG " in *" $n "*)
      case $spec in *-DKILN_SCALAR|*@3|*@4) continue ;; esac ;;
    esac
    case " $LIGHT " in *" $n "*)
      case $spec in "gcc -O2"|"gcc -O2 -mavx2 -mfma -DKILN_NO_AVX512"|*@2) ;; *) continue ;; esac ;;
    esac
    cfg=${spec%@*} threads="" pool="" run=""
    if [ "$cfg" != "$spec" ]; then threads="-t ${spec##*@}"; pool="-DKILN_POOL -pthread"; pool_c=runtime/kiln_pool.c; else pool_c=""; fi
    case $cfg in aarch64*)   # ARM64's NEON path, run under qemu's user-mode emulation
      if ! command -v aarch64-linux-gnu-gcc > /dev/null || ! command -v qemu-aarch64 > /dev/null; then
        echo "NOTE $S/$n/aarch64: no aarch64-linux-gnu-gcc or qemu-aarch64 (scripts/install-deps.sh installs them): the NEON path is not run"
        continue
      fi
      run=qemu-aarch64 ;;
    esac
    tag=$(echo "$spec" | tr ' =@' '___')
    res=$d/res_$tag
    mkdir -p "$res"
    # The model and runtime/kiln_runtime.c are compiled once per build way (the model's
    # object shared by its entries' drivers, the runtime's by every model), with the flags
    # the drivers get, the per-entry -D's aside (the model's .c reads none of them).
    # shellcheck disable=SC2086
    flags="-std=c11 -Wall -Wextra -Wpedantic -Werror -D_POSIX_C_SOURCE=200809L -I$d/out -Iruntime -DKILN_MODEL=$n -DKILN_MODEL_UPPER=$(echo "$n" | tr a-z A-Z) $pool"
    rt=$WORK/kiln_runtime_$tag.o
    # shellcheck disable=SC2086
    : > "$WORK/err"
    if ! { [ -f "$rt" ] || $cfg -std=c11 -Wall -Wextra -Wpedantic -Werror -D_POSIX_C_SOURCE=200809L -Iruntime $pool \
             -c runtime/kiln_runtime.c -o "$rt" 2>> "$WORK/err"; } ||
       ! $cfg $flags -c "$d/out/$n.c" -o "$d/model_$tag.o" 2>> "$WORK/err"; then
      echo "FAIL $S/$n/$tag: does not compile: $(grep -m 1 error "$WORK/err")"; continue
    fi
    ok=yes k=0
    while IFS='|' read -r head ins; do
      set -- $head
      defs="" state_args=""
      if [ "$1" != "-" ]; then
        defs="-DKILN_ENTRY=$1"
        [ "$2" != "-" ] && defs="$defs -DKILN_ENTRY_UPPER=$2"
        if [ "$3" = state ]; then
          defs="$defs -DKILN_STATE"
          state_args="-S $res/state$k.bin"
          [ "$k" -gt 0 ] && state_args="$state_args -s $res/state$((k - 1)).bin"
        fi
      fi
      exe=$d/drv_${tag}_$k
      # shellcheck disable=SC2086
      if ! $cfg $flags $defs tests/runtime/driver.c $pool_c "$d/model_$tag.o" "$rt" -lm -o "$exe" 2> "$WORK/err"; then
        echo "FAIL $S/$n/$tag: does not compile: $(grep -m 1 error "$WORK/err")"; ok=no; break
      fi
      mkdir -p "$res/call$k"
      # shellcheck disable=SC2086
      # shellcheck disable=SC2086
      if ! $run "$exe" -w "$d/out/$n.weights" $threads $state_args -o "$res/call$k" $ins > "$WORK/err" 2>&1; then
        echo "FAIL $S/$n/$tag: run: $(head -n 1 "$WORK/err")"; ok=no; break
      fi
      k=$((k + 1))
    done <<EOF2
$calls
EOF2
    [ $ok = yes ] || continue
    # ARM64 builds are compared with ARM64's plain path, and that one with x86-64's unless the
    # model calls a libm function that may round otherwise there (sinf, cosf, powf: exp, log,
    # tanh and erf are Kiln's own, templates/c/math_*.c.tmpl, the same bits everywhere).
    if [ -n "$run" ] && [ -z "$first_arm" ]; then
      first_arm=$tag
      if grep -Eq '(sinf|cosf|powf)\(' "$d/out/$n.c"; then echo "PASS $S/$n/$tag: (calls libm's sinf/cosf/powf: not compared with x86-64)"
      elif diff -r "$d/res_$first" "$res" > /dev/null; then echo "PASS $S/$n/$tag: bit-identical to x86-64's $first"
      else echo "FAIL $S/$n/$tag: outputs differ from x86-64's $first"; fi
      continue
    fi
    ref=$first
    [ -n "$run" ] && ref=$first_arm
    if [ -z "$ref" ]; then first=$tag; echo "PASS $S/$n/$tag"; continue; fi
    if diff -r "$d/res_$ref" "$res" > /dev/null; then echo "PASS $S/$n/$tag: bit-identical to $ref"
    else echo "FAIL $S/$n/$tag: outputs differ from $ref"; fi
  done
done
# ARM64 at -O3: GCC's deeper inlining there sees array bounds -O2 does not (a 4-row tile in
# a NEON build's 2-row buffer was a -Werror failure); the generated C of the models that
# reach every tile size must compile clean, compile only (the bits are -O2's job above).
if command -v aarch64-linux-gnu-gcc > /dev/null; then
  for n in edges conv_edges resnet; do
    if [ ! -f "$WORK/$n/out/$n.c" ]; then echo "FAIL $S/$n/aarch64_O3: no generated C"; continue; fi
    if aarch64-linux-gnu-gcc -std=c11 -Wall -Wextra -Wpedantic -Werror -O3 -D_POSIX_C_SOURCE=200809L -c \
         "$WORK/$n/out/$n.c" -o "$WORK/$n/a64_O3.o" 2> "$WORK/err"; then echo "PASS $S/$n/aarch64_O3: compiles with -Werror"
    else echo "FAIL $S/$n/aarch64_O3: $(grep -m 1 error "$WORK/err")"; fi
  done
fi
# conv_edges takes the paths it was written for: pass_pack's rules (lanes_fit, wino_fit) could
# drift and drop a path from every build way above without a failure.
for p in "kiln_lanes_par 3" "kiln_wino_par 3"; do
  # shellcheck disable=SC2086
  set -- $p
  got=$(grep -c "$1(par" "$WORK/conv_edges/out/conv_edges.c" 2> /dev/null)
  if [ "$got" = "$2" ]; then echo "PASS $S/conv_edges/paths_$1: $2 kernels"
  else echo "FAIL $S/conv_edges/paths_$1: ${got:-no} kernels call it, expected $2"; fi
done
# The convolution tiles ask for their next filters (kiln_ask, templates/c/ask.c.tmpl: into
# L2, prefetcht1, which nothing else emits); GCC once dropped such prefetches silently.
for cc in "gcc -O2 -march=x86-64-v3" "gcc -O3 -march=native" "clang -O2 -march=x86-64-v3"; do
  tag=$(echo "$cc" | tr ' ' '_')
  # shellcheck disable=SC2086
  if $cc -std=c11 -D_POSIX_C_SOURCE=200809L -S "$WORK/conv_edges/out/conv_edges.c" -o "$WORK/conv_edges/pf.s" 2> "$WORK/err" &&
     grep -q prefetcht1 "$WORK/conv_edges/pf.s"; then echo "PASS $S/conv_edges/prefetch_$tag"
  else echo "FAIL $S/conv_edges/prefetch_$tag: no prefetcht1 in the assembly (kiln_ask dropped?)"; fi
done
# A test of the test: the matmul chains with each product rounded before its sum (the plain
# path with fmaf replaced, tests/matmul/unfused.c) must give other bits, and the comparison
# must notice (else bit-identical above would prove nothing).
d=$WORK/edges
if [ -d "$d/res_gcc_-O2" ] && gcc -std=c11 -O2 -DKILN_SCALAR -Dfmaf=kiln_unfused_fmaf -D_POSIX_C_SOURCE=200809L -I"$d/out" \
     -Iruntime -DKILN_MODEL=edges -DKILN_MODEL_UPPER=EDGES tests/runtime/driver.c "$d/out/edges.c" runtime/kiln_runtime.c \
     tests/matmul/unfused.c -lm -o "$d/drv_unfused" 2> "$WORK/err"; then
  mkdir -p "$d/res_unfused/call0"
  # shellcheck disable=SC2086
  if ! "$d/drv_unfused" -w "$d/out/edges.weights" -o "$d/res_unfused/call0" $edges_ins > "$WORK/err" 2>&1; then
    echo "FAIL $S/unfused_control: the unfused build did not run: $(head -n 1 "$WORK/err")"
  elif [ "$(ls "$d/res_unfused/call0" | wc -l)" != "$(ls "$d/res_gcc_-O2/call0" | wc -l)" ]; then
    echo "FAIL $S/unfused_control: the unfused build wrote $(ls "$d/res_unfused/call0" | wc -l) outputs, the -O2 build $(ls "$d/res_gcc_-O2/call0" | wc -l)"
  elif diff -r "$d/res_gcc_-O2" "$d/res_unfused" > /dev/null; then echo "FAIL $S/unfused_control: unfused products gave the same bits: the check cannot see a changed rounding"
  else echo "PASS $S/unfused_control: unfused products change the bits, and the check sees it"; fi
else
  echo "FAIL $S/unfused_control: could not build the unfused variant: $(head -n 1 "$WORK/err")"
fi
exit 0

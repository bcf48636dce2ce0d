#!/bin/sh
# cmp_builds.sh OLD_KILN NEW_KILN [WORK] — builds a set of models with two kiln binaries
# and compares the output trees byte for byte (diff -r). For changes meant not to change
# any output (the lazy weights of weight.c were checked with it). Exit 1 on any difference.
#
# The set: the demo MLP (C, Metal, Core ML; --quantize q4_k; --embed-weights), stories260K
# (C + Metal, C with q4_k / q6_k / q8_0 / g4 / f16 / i8, Core ML iOS18 with q4_0, q8_0
# and fp16), LeNet and ResNet (conv, BatchNorm), the transformer (also q8_0), the bench's
# seeded 125M Llama when present (f32, q4_k, q6_k + bf16), and GGUF inputs
# written by bench/llamacpp/stories_gguf.py: stories260K as f32 and as Q4_0 / Q8_0 / Q6_K
# (kept as stored, re-quantized with --quantize q4_k, and expanded with --quantize f32).
set -u
OLD=$1 NEW=$2
WORK=${3:-/tmp/cmp_builds}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PY:-/usr/bin/python3}
rm -rf "$WORK" && mkdir -p "$WORK"
fails=0 n=0

# one NAME SCRIPT [ARGS...]: builds SCRIPT with both binaries and compares the trees.
one() {
  name=$1 script=$2
  shift 2
  for v in old new; do
    bin=$OLD
    [ $v = new ] && bin=$NEW
    if ! "$bin" build "$script" -o "$WORK/$v/$name" "$@" >"$WORK/$v.$name.log" 2>&1; then
      echo "BUILD FAILED ($v) $name: $(tail -1 "$WORK/$v.$name.log")"
      fails=$((fails + 1))
      return
    fi
  done
  n=$((n + 1))
  if diff -r "$WORK/old/$name" "$WORK/new/$name" >/dev/null; then
    echo "same  $name ($(find "$WORK/new/$name" -type f | wc -l) files, $(du -sk "$WORK/new/$name" | cut -f1) KiB)"
  else
    echo "DIFF  $name"
    diff -rq "$WORK/old/$name" "$WORK/new/$name" | head -5
    fails=$((fails + 1))
  fi
}

M=$ROOT/models
one mlp "$M/mlp.lua"
one mlp_all "$M/mlp.lua" --target all
one mlp_q4k "$M/mlp.lua" --quantize q4_k
one mlp_embed "$M/mlp.lua" --embed-weights
one stories "$M/stories.lua" --target c --target metal
for q in q4_k q6_k q8_0 g4 f16 i8; do one "stories_$q" "$M/stories.lua" --quantize $q; done
one stories_q4k_metal "$M/stories.lua" --quantize q4_k --target metal
one stories_coreml18_q4_0 "$M/stories.lua" --target coreml --min-os iOS18 --quantize q4_0
one stories_coreml18_q8_0 "$M/stories.lua" --target coreml --min-os iOS18 --quantize q8_0
one stories_coreml_fp16 "$M/stories.lua" --target coreml --min-os iOS18 --precision fp16
one lenet "$M/lenet.lua" --target all
one resnet "$M/resnet.lua" --target all
one transformer "$M/transformer.lua" --target all
one transformer_q8 "$M/transformer.lua" --quantize q8_0

# The bench's seeded 125M Llama (make bench BENCH=quant writes it), where q4_k / q6_k
# blocks of 256 fit its rows: f32 (packed panels), q4_k, q6_k, bf16 and a per-name mix.
CK=$ROOT/.cache/bench/quant/ckpt_125m
if [ -f "$CK/model.safetensors" ]; then
  one llm125m "$M/llm.lua" -D checkpoint="$CK" -D max_context=256
  one llm125m_q4k "$M/llm.lua" -D checkpoint="$CK" -D max_context=256 --quantize q4_k
  one llm125m_mix "$M/llm.lua" -D checkpoint="$CK" -D max_context=256 --quantize '*mlp*=q6_k' --quantize bf16
else
  echo "SKIP  llm125m: no $CK/model.safetensors (make bench BENCH=quant BENCH_QUICK=1 writes it)"
fi

# GGUF inputs: stories260K's own weights, written by the llama.cpp bench's writer.
G=$WORK/gguf
mkdir -p "$G"
for t in F32 Q4_0 Q8_0 Q6_K; do
  d=$G/$t
  mkdir -p "$d"
  if ! "$PY" - "$d" "$t" <<'EOF' >"$d/write.log" 2>&1
import os, sys
sys.path.insert(0, os.path.join(os.environ["ROOT"], "bench", "llamacpp"))
import stories_gguf as SG
d, t = sys.argv[1], sys.argv[2]
SG.write(os.path.join(d, "model.gguf"), "stories260K", t, quant_embedding=True)
SG.write_rope(os.path.join(d, "rope.gguf"), "stories260K")
open(os.path.join(d, "m.lua"), "w").write(SG.lua("stories260K", "model.gguf", "rope.gguf"))
EOF
  then
    echo "SKIP  gguf $t: $(tail -1 "$d/write.log")"
    continue
  fi
  one "gguf_$t" "$d/m.lua"
  one "gguf_${t}_q4k" "$d/m.lua" --quantize q4_k
  one "gguf_${t}_f32" "$d/m.lua" --quantize f32
  one "gguf_${t}_metal" "$d/m.lua" --target metal
done

echo "compared $n builds, $fails failed or differed"
[ $fails -eq 0 ]

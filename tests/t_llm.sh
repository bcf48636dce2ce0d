#!/bin/sh
# t_llm.sh — models/llm.lua, the Llama / Qwen2 / Qwen3 / Gemma 3 family script, on seeded
# Hugging Face-style checkpoints against independent PyTorch implementations
# (tests/llm/torch_llm.py, tests/llm/torch_gemma.py); the runner is tests/llm/run_llm.py. Then generation
# end to end with a byte-level vocabulary (tests/llm/gen_e2e.py), the sampler
# (runtime/llm/kiln_sample.c) against tests/llm/sample_test.c's exact expectations, and
# `make llm` building the generation program for a built model.
. "$(dirname "$0")/lib.sh"
kt_need_kiln llm
kt_work llm
"$PY" tests/llm/run_llm.py "$WORK"
# Generation end to end with a byte-level BPE vocabulary (llama3re, renumbered) on a seeded
# llm.lua Llama: scripts/llm_main.c's prompt ids, greedy ids against PyTorch, streamed
# text, a stop string, EOS, the Qwen3 chat template, memory (tests/llm/gen_e2e.py).
"$PY" tests/llm/gen_e2e.py "$WORK"

# The sampler (runtime/llm/kiln_sample.c): exact checks, under ASan+UBSan, gcc and clang.
for cc in gcc clang; do
  if out=$($cc -std=c11 -Wall -Wextra -Wpedantic -Werror -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all \
           -Iruntime/llm -o "$WORK/sample_$cc" tests/llm/sample_test.c runtime/llm/kiln_sample.c -lm 2>&1); then
    if [ $cc = gcc ]; then "$WORK/sample_$cc"; else "$WORK/sample_$cc" > /dev/null && echo "PASS sample/clang-build-runs"; fi
  else
    echo "FAIL sample/$cc-build: $(echo "$out" | head -n 2 | tr '\n' ' ')"
  fi
done

# The tokenizer on tok512.bin: llama2.c's file converted to Kiln's binary (`kiln tokenize
# --convert`: SentencePiece BPE, merges derived from the scores, gen/tokjson.c), then the
# runtime (runtime/llm/kiln_tok.c, tests/llm/tok_test.c under ASan+UBSan): 208 varied lines
# encode to llama.cpp's ids for the same vocabulary (tests/llm/tok512_ids.txt, see
# tests/llm/make_tok_fixture.py) and decode back to their text one id at a time; text
# that is not UTF-8; damaged binaries refused.
if ! "$KILN" tokenize models/weights/tok512.bin --convert "$WORK/tok512.tok" 2> "$WORK/conv_err"; then
  echo "FAIL tokenize/convert: $(head -c 200 "$WORK/conv_err")"
elif out=$(cc -std=c11 -Wall -Wextra -Wpedantic -Werror -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all \
         -D_POSIX_C_SOURCE=200809L -Iruntime/llm -o "$WORK/tok_test" tests/llm/tok_test.c runtime/llm/kiln_tok*.c 2>&1); then
  "$WORK/tok_test" tok512 "$WORK/tok512.tok" tests/llm/tok512_texts.txt tests/llm/tok512_ids.txt exact
else
  echo "FAIL tokenize/build: $(echo "$out" | head -n 2 | tr '\n' ' ')"
fi

# `kiln tokenize` (the same tokenizer, through the CLI): the fixture's texts give its ids,
# and --decode gives the texts back; a bad id and a bad file are one-line errors.
if "$KILN" tokenize models/weights/tok512.bin < tests/llm/tok512_texts.txt > "$WORK/cli_ids" 2> "$WORK/cli_err" &&
   cmp -s "$WORK/cli_ids" tests/llm/tok512_ids.txt; then
  echo "PASS tokenize/cli-encode ($(wc -l < tests/llm/tok512_ids.txt) lines equal llama.cpp's ids)"
else
  echo "FAIL tokenize/cli-encode: $(head -c 200 "$WORK/cli_err") $(cmp "$WORK/cli_ids" tests/llm/tok512_ids.txt 2>&1 | head -n 1)"
fi
if "$KILN" tokenize models/weights/tok512.bin --decode < tests/llm/tok512_ids.txt > "$WORK/cli_text" 2> "$WORK/cli_err" &&
   cmp -s "$WORK/cli_text" tests/llm/tok512_texts.txt; then
  echo "PASS tokenize/cli-decode"
else
  echo "FAIL tokenize/cli-decode: $(head -c 200 "$WORK/cli_err") $(cmp "$WORK/cli_text" tests/llm/tok512_texts.txt 2>&1 | head -n 1)"
fi
got=$(echo "1 512" | "$KILN" tokenize models/weights/tok512.bin --decode 2>&1 >/dev/null)
want="kiln: error: tokenize --decode: line 1: id 512 is outside the vocabulary (0..511)"
if [ "$got" = "$want" ]; then echo "PASS tokenize/cli-bad-id"; else echo "FAIL tokenize/cli-bad-id: $got"; fi
# damaged llama2.c files: one line naming the file and what is wrong, nothing written
for spec in "20 truncated token record (at byte 17)" "2 shorter than its 4-byte header" "11 truncated token record (at byte 4)"; do
  set -- $spec
  head -c "$1" models/weights/tok512.bin > "$WORK/cut.bin"
  shift
  rm -f "$WORK/cut.tok"
  got=$("$KILN" tokenize "$WORK/cut.bin" --convert "$WORK/cut.tok" 2>&1)
  case $got in "kiln: error: "*"cut.bin: tokenizer: $*"*)
    if [ ! -e "$WORK/cut.tok" ] && [ "$(printf '%s\n' "$got" | wc -l)" -eq 1 ]; then echo "PASS tokenize/cli-cut-$(echo "$*" | tr ' ' '-' | tr -cd 'a-z0-9-')"
    else echo "FAIL tokenize/cli-cut: wrote a file or said more than one line: $got"; fi ;;
  *) echo "FAIL tokenize/cli-cut ($*): $got" ;; esac
done

# Chat templates and stop strings (runtime/llm/kiln_chat.c): exact expected prompts.
if out=$(cc -std=c11 -Wall -Wextra -Wpedantic -Werror -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all \
         -Iruntime/llm -o "$WORK/chat_test" tests/llm/chat_test.c runtime/llm/kiln_chat.c 2>&1); then
  "$WORK/chat_test"
else
  echo "FAIL chat/build: $(echo "$out" | head -n 2 | tr '\n' ' ')"
fi

# The generation API (runtime/llm/kiln_generate.c) with the generated stories260K and
# tok512.bin converted by `kiln build --tokenizer`: greedy ids, streaming, cancel, stop
# strings, the prompt, BOS and EOS, memory, a parallel-for running tasks in reverse (tiny
# task sizes, so that stories260K's products are split) (tests/llm/generate_test.c).
if "$KILN" build models/stories.lua -o "$WORK/gen_stories" --tokenizer models/weights/tok512.bin > /dev/null 2>&1 &&
   out=$(cc -std=c11 -Wall -Wextra -Wpedantic -Werror -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all \
         -DKILN_TASK_FMAS=64.0 -DKILN_TASK_ELEMS=16.0 \
         -D_POSIX_C_SOURCE=200809L -I"$WORK/gen_stories" -Iruntime -Iruntime/llm -o "$WORK/generate_test" \
         tests/llm/generate_test.c "$WORK/gen_stories/stories.c" runtime/kiln_runtime.c runtime/llm/kiln_tok*.c \
         runtime/llm/kiln_sample.c runtime/llm/kiln_chat.c runtime/llm/kiln_generate.c -lm 2>&1); then
  "$WORK/generate_test" "$WORK/gen_stories/stories.weights" "$WORK/gen_stories/stories.tok"
else
  echo "FAIL generate/build: $(echo "$out" | head -n 2 | tr '\n' ' ')"
fi

# `kiln tokenize` on a GGUF file: the vocabulary of stories260K written as GGUF
# (bench/llamacpp/stories_gguf.py, SentencePiece tokens and scores in the metadata) gives
# the same ids as tok512.bin, and converts to the same binary byte for byte; a GGUF
# without a vocabulary is a one-line error.
if "$PY" bench/llamacpp/stories_gguf.py "$WORK/vocab.gguf" > "$WORK/gguf_out" 2>&1 &&
   "$KILN" tokenize "$WORK/vocab.gguf" < tests/llm/tok512_texts.txt > "$WORK/gguf_ids" 2>> "$WORK/gguf_out" &&
   cmp -s "$WORK/gguf_ids" tests/llm/tok512_ids.txt; then
  echo "PASS tokenize/gguf-vocabulary"
else
  echo "FAIL tokenize/gguf-vocabulary: $(head -c 300 "$WORK/gguf_out")"
fi
if "$KILN" tokenize "$WORK/vocab.gguf" --convert "$WORK/vocab_gguf.tok" 2> "$WORK/gguf_out" &&
   cmp -s "$WORK/vocab_gguf.tok" "$WORK/tok512.tok"; then
  echo "PASS tokenize/gguf-binary-equal"
else
  echo "FAIL tokenize/gguf-binary-equal: $(head -c 300 "$WORK/gguf_out")"
fi
got=$("$KILN" tokenize tests/robust/gguf/seed_f32.gguf < /dev/null 2>&1)
want='kiln: error: tokenize: tests/robust/gguf/seed_f32.gguf: tokenizer.ggml.model is missing; Kiln reads SentencePiece ("llama") and byte-level ("gpt2") vocabularies'
if [ "$got" = "$want" ]; then echo "PASS tokenize/gguf-no-vocabulary"; else echo "FAIL tokenize/gguf-no-vocabulary: $got"; fi
# `make llm OUT=DIR` (scripts/llm_build.sh): the generation program for a built model; for
# stories260K its first greedy ids after BOS are the demo's (README).
if "$KILN" build models/stories.lua -o "$WORK/mk" --tokenizer models/weights/tok512.bin > "$WORK/mk_out" 2>&1 &&
   make -s llm OUT="$WORK/mk" >> "$WORK/mk_out" 2>&1 &&
   ids=$("$WORK/mk/stories_generate" "$WORK/mk/stories.weights" "$WORK/mk/stories.tok" --max-tokens 8 --ids 2>&1 | grep '^tokens:') &&
   [ "$ids" = "tokens: 1 403 407 261 378 432 383 286 261" ]; then
  echo "PASS make-llm/stories"
else
  echo "FAIL make-llm/stories: ${ids:-$(tail -n 2 "$WORK/mk_out" | tr '\n' ' ')}"
fi
# The same model built with --profile: llm_build.sh compiles llm_main with its profile, which
# gives the same ids and then lists the kernels of both entries, the slowest first: the 20
# listed each called once (the prefill's) or 7 times (the decode's), and the rest summed.
if "$KILN" build models/stories.lua -o "$WORK/mkp" --tokenizer models/weights/tok512.bin --profile > "$WORK/mkp_out" 2>&1 &&
   make -s llm OUT="$WORK/mkp" >> "$WORK/mkp_out" 2>&1 &&
   "$WORK/mkp/stories_generate" "$WORK/mkp/stories.weights" "$WORK/mkp/stories.tok" --max-tokens 8 --ids > "$WORK/mkp_gen" 2>&1; then
  n=$(sed -n 's/^#define STORIES_PROFILE_KERNELS \([0-9]*\) .*/\1/p' "$WORK/mkp/stories.h")
  if ! grep -q '^tokens: 1 403 407 261 378 432 383 286 261$' "$WORK/mkp_gen"; then
    echo "FAIL make-llm/profile: not the plain build's ids: $(grep '^tokens' "$WORK/mkp_gen")"
  elif ! grep -q "^profile: [0-9]* kernels, " "$WORK/mkp_gen"; then
    echo "FAIL make-llm/profile: no profile: $(tail -n 3 "$WORK/mkp_gen" | tr '\n' ' ')"
  elif [ "$(grep -c '      1  prefill_\|      7  decode_' "$WORK/mkp_gen")" != 20 ] || ! grep -q "($((n - 20)) more)\$" "$WORK/mkp_gen"; then
    echo "FAIL make-llm/profile: not 20 kernels called 1 or 7 times and the header's $n - 20 more: $(sed -n 3,5p "$WORK/mkp_gen" | tr '\n' ' ')"
  else
    echo "PASS make-llm/profile"
  fi
else
  echo "FAIL make-llm/profile: $(tail -n 2 "$WORK/mkp_out" "$WORK/mkp_gen" 2>/dev/null | tr '\n' ' ')"
fi

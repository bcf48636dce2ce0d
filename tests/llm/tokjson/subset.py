#!/usr/bin/env python3
"""subset.py — a small tokenizer.json cut from a model's full one that encodes the parity
texts exactly as the full one does, so the tests can ship it (tests/llm/tokjson/).

  python3 subset.py FULL_TOKENIZER_JSON TEXTS REFERENCE_IDS OUT_JSON

Kept: every id of the reference ids, the byte pieces (GPT-2's 256 byte characters, or
SentencePiece's <0xNN>), the model's UNK, and the added tokens whose text occurs in the
texts (one that occurs nowhere cannot change how they are split); then, to a fixed point,
every merge whose result is kept, and both its parts. Why that is enough: BPE merges a word
bottom-up, so every merge the full tokenizer applies produces a kept token (an id of the
output or one of its ancestors) and is kept; at each step the full tokenizer applies the
lowest-ranked applicable merge, which is kept, and the kept merges are a subset of the
full ones, so it is also the lowest-ranked applicable kept merge: the same merges apply in
the same order. Whole-word lookups (ignore_merges) find only output ids, which are kept.
Ids keep their values (the vocabulary becomes sparse). WordPiece models are kept whole:
greedy longest-match-first is not monotone in the vocabulary (without a long piece a word
that was UNK may split into shorter ones)."""
import json
import sys


def gpt2_byte_chars():
    """The 256 characters of GPT-2's byte alphabet."""
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for c in cs]


def merge_parts(m):
    return tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m)


def main():
    full_path, texts_path, ids_path, out_path = sys.argv[1:5]
    texts = open(texts_path, encoding="utf-8").read()
    tj = json.load(open(full_path, encoding="utf-8"))
    model = tj["model"]
    vocab = model["vocab"]
    if model["type"] == "WordPiece":
        keep = set(vocab.values())
    else:
        keep = set()
    for line in open(ids_path, encoding="utf-8"):
        keep.update(int(x) for x in line.split())
    tj["added_tokens"] = [a for a in tj.get("added_tokens") or [] if a["content"] in texts]
    for a in tj["added_tokens"]:
        keep.add(a["id"])
    byte_pieces = gpt2_byte_chars() + ["<0x%02X>" % b for b in range(256)]
    keep.update(vocab[p] for p in byte_pieces if p in vocab)
    if model.get("unk_token") in vocab:
        keep.add(vocab[model["unk_token"]])
    merges = model.get("merges") or []
    by_result = {}
    for i, m in enumerate(merges):
        a, b = merge_parts(m)
        by_result.setdefault(vocab[a + b], []).append(i)
    kept_merges, todo = set(), list(keep)
    while todo:
        r = todo.pop()
        for i in by_result.get(r, []):
            if i in kept_merges:
                continue
            kept_merges.add(i)
            for part in merge_parts(merges[i]):
                if vocab[part] not in keep:
                    keep.add(vocab[part])
                    todo.append(vocab[part])
    model["vocab"] = {p: i for p, i in vocab.items() if i in keep}
    if merges:
        model["merges"] = [m for i, m in enumerate(merges) if i in kept_merges]
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print("%s: %d of %d pieces, %d of %d merges" % (out_path, len(model["vocab"]), len(vocab), len(kept_merges), len(merges)))


main()

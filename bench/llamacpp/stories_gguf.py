"""stories_gguf.py -- writes models/stories.lua's checkpoint (TinyStories 260K) as a GGUF file
that llama.cpp loads: general.architecture "llama", its hyperparameters, the SentencePiece
vocabulary of models/weights/tok512.bin, and the tensors under llama.cpp's names.

  /usr/bin/python3 bench/llamacpp/stories_gguf.py OUT.gguf [F32|Q8_0|Q4_0] [--rope]

Matrices whose rows are whole blocks are stored in the chosen type, norms and the
embedding in F32 (llama.cpp's convention for small models). The checkpoint's own RoPE
tables (rope.cos, rope.sin) are llama.cpp-foreign, so they go in only with --rope (for
Kiln, whose stories.lua reads them). Uses tests/py/gguf_file.py, the writer the tests use.
"""
import os
import struct
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "py"))
import gguf_file as G  # noqa: E402
import run_gguf  # noqa: E402  (load_safetensors, gguf_name)

# llama.cpp's token types
NORMAL, UNKNOWN, CONTROL, BYTE = 1, 2, 3, 6


def vocab(path):
    """tok512.bin's pieces (spaces back to SentencePiece's U+2581), scores and token types."""
    raw = open(path, "rb").read()
    off, tokens, scores, types = 4, [], [], []
    while off < len(raw):
        score, n = struct.unpack_from("<fi", raw, off)
        piece = raw[off + 8:off + 8 + n].decode("utf-8")
        off += 8 + n
        tokens.append(piece.replace(" ", "\u2581"))
        scores.append(score)
        if piece == "<unk>":
            types.append(UNKNOWN)
        elif piece in ("<s>", "</s>"):
            types.append(CONTROL)
        elif len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
            types.append(BYTE)
        else:
            types.append(NORMAL)
    return tokens, scores, types


def main():
    out = sys.argv[1]
    qtype = sys.argv[2] if len(sys.argv) > 2 and not sys.argv[2].startswith("--") else "F32"
    rope = "--rope" in sys.argv
    w = run_gguf.load_safetensors(os.path.join(ROOT, "models", "weights", "stories260K.safetensors"))
    tokens, scores, types = vocab(os.path.join(ROOT, "models", "weights", "tok512.bin"))
    meta = [("general.architecture", G.STR, "llama"), ("general.name", G.STR, "stories260K"),
            ("llama.context_length", G.U32, 512), ("llama.embedding_length", G.U32, 64),
            ("llama.block_count", G.U32, 5), ("llama.feed_forward_length", G.U32, 172),
            ("llama.attention.head_count", G.U32, 8), ("llama.attention.head_count_kv", G.U32, 4),
            ("llama.rope.dimension_count", G.U32, 8), ("llama.rope.freq_base", G.F32V, 10000.0),
            ("llama.attention.layer_norm_rms_epsilon", G.F32V, 1e-5),
            ("general.file_type", G.U32, {"F32": 0, "Q8_0": 7, "Q4_0": 2}[qtype]),
            ("tokenizer.ggml.model", G.STR, "llama"), ("tokenizer.ggml.tokens", G.ARR, (G.STR, tokens)),
            ("tokenizer.ggml.scores", G.ARR, (G.F32V, scores)), ("tokenizer.ggml.token_type", G.ARR, (G.I32, types)),
            ("tokenizer.ggml.bos_token_id", G.U32, 1), ("tokenizer.ggml.eos_token_id", G.U32, 2),
            ("tokenizer.ggml.unknown_token_id", G.U32, 0), ("tokenizer.ggml.add_bos_token", G.BOOL, True)]
    tensors = []
    for name, x in w.items():
        if name.startswith("rope.") and not rope:
            continue
        big = x.ndim == 2 and x.shape[1] % 32 == 0 and name != "tok_embeddings.weight" and not name.startswith("rope.")
        t = qtype if big else "F32"
        flat = x.ravel().astype(np.float32)
        raw = {"F32": lambda v: v.astype("<f4").tobytes(), "Q8_0": G.q8_0, "Q4_0": G.q4_0}[t](flat)
        tensors.append((run_gguf.gguf_name(name), t, x.shape, raw))
    G.write(out, meta, tensors)


if __name__ == "__main__":
    main()

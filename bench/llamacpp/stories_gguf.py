"""stories_gguf.py -- writes a Llama in models/stories.lua's layout as a GGUF file that
llama.cpp loads: general.architecture "llama", its hyperparameters, the SentencePiece
vocabulary of models/weights/tok512.bin, and the tensors under llama.cpp's names. The
model is TinyStories 260K (the checkpoint models/stories.lua reads), or with --seeded NAME
a seeded random Llama of one of the SEEDED shapes below (same layout, same vocabulary, so
its matrices can have rows of 256 for the K-quants, which stories260K's 64/172 cannot).

  /usr/bin/python3 bench/llamacpp/stories_gguf.py OUT.gguf [F32|F16|Q8_0|Q4_0|Q4_K|Q6_K]
                   [--rope] [--seeded NAME] [--quant-embedding] [--lua OUT.lua]

Matrices whose rows are whole blocks are stored in the chosen type; norms, and the
embedding unless --quant-embedding, in F32 (llama.cpp's convention for small models); a
matrix whose rows are not whole blocks stays F32 (their count is reported on stderr). The RoPE
tables (rope.cos, rope.sin: pairs rotation, theta 10000) are llama.cpp-foreign, so they go
in only with --rope (for Kiln, whose stories.lua reads them). --lua writes models/stories.lua
with this model's sizes, loading OUT.gguf (and rope.gguf beside it when --rope is absent).
Uses tests/py/gguf_file.py (the writer the tests use) and ggml_quant.py.
"""
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "py"))
sys.path.insert(0, HERE)
import gguf_file as G  # noqa: E402
import ggml_quant  # noqa: E402
import run_gguf  # noqa: E402  (load_safetensors, gguf_name)

# llama.cpp's token types
NORMAL, UNKNOWN, CONTROL, BYTE = 1, 2, 3, 6
FILE_TYPE = {"F32": 0, "F16": 1, "Q4_0": 2, "Q8_0": 7, "Q4_K": 15, "Q6_K": 18}   # llama_ftype (Q4_K_M, Q6_K)
# name: dim, hidden, layers, heads, kv heads, vocab, context. Vocabulary 512 is tok512.bin's.
SHAPES = {"stories260K": (64, 172, 5, 8, 4, 512, 512),
          "seeded3m": (256, 768, 4, 8, 4, 512, 512),          # bench/llamacpp's K-quant model
          "seeded100m": (768, 2048, 12, 12, 4, 32000, 1024)}  # bench/quant's ~100M model
SEEDED = [k for k in SHAPES if k != "stories260K"]


def vocab(path, n):
    """tok512.bin's pieces (spaces back to SentencePiece's U+2581), scores and token types,
    padded to n tokens with unused pieces (for seeded models with a larger vocabulary)."""
    raw = open(path, "rb").read()
    off, tokens, scores, types = 4, [], [], []
    while off < len(raw):
        score, k = struct.unpack_from("<fi", raw, off)
        piece = raw[off + 8:off + 8 + k].decode("utf-8")
        off += 8 + k
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
    for i in range(len(tokens), n):
        tokens.append("<unused%d>" % i)
        scores.append(-1e9)
        types.append(NORMAL)
    return tokens, scores, types


def rope_tables(ctx, hd, theta=10000.0):
    """cos/sin [ctx, hd/2] of angle p * theta^(-2i/hd), in float64 then f32."""
    f = theta ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    ang = np.arange(ctx, dtype=np.float64)[:, None] * f[None, :]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def weights(name):
    """The Meta-named tensors of model name (stories260K's checkpoint, or seeded ones:
    normal(0, 1/sqrt(fan_in)) matrices, norms 1 + small noise, embedding normal(0, 0.1),
    numpy's PCG64 with seed 1234: the same every run)."""
    if name == "stories260K":
        return run_gguf.load_safetensors(os.path.join(ROOT, "models", "weights", "stories260K.safetensors"))
    dim, hidden, layers, heads, kv, voc, ctx = SHAPES[name]
    hd = dim // heads
    rng = np.random.default_rng(1234)

    def mat(rows, cols):
        return (rng.standard_normal((rows, cols), dtype=np.float32) / np.float32(np.sqrt(cols))).astype(np.float32)

    def norm():
        return (1 + 0.1 * rng.standard_normal(dim, dtype=np.float32)).astype(np.float32)
    w = {"tok_embeddings.weight": (0.1 * rng.standard_normal((voc, dim), dtype=np.float32)).astype(np.float32)}
    for i in range(layers):
        p = "layers.%d." % i
        w[p + "attention_norm.weight"] = norm()
        w[p + "attention.wq.weight"] = mat(heads * hd, dim)
        w[p + "attention.wk.weight"] = mat(kv * hd, dim)
        w[p + "attention.wv.weight"] = mat(kv * hd, dim)
        w[p + "attention.wo.weight"] = mat(dim, heads * hd)
        w[p + "ffn_norm.weight"] = norm()
        w[p + "feed_forward.w1.weight"] = mat(hidden, dim)
        w[p + "feed_forward.w2.weight"] = mat(dim, hidden)
        w[p + "feed_forward.w3.weight"] = mat(hidden, dim)
    w["norm.weight"] = norm()
    w["rope.cos"], w["rope.sin"] = rope_tables(ctx, hd)
    return w


def lua(name, gguf_file, rope_file):
    """models/stories.lua with model name's sizes, loading gguf_file (and rope_file)."""
    dim, hidden, layers, heads, kv, voc, ctx = SHAPES[name]
    src = open(os.path.join(ROOT, "models", "stories.lua")).read()
    edits = [('kiln.load("weights/stories260K.safetensors", {strict = true})',
              'kiln.load("%s", {strict = true, names = "meta"})' % gguf_file +
              ('\nkiln.load("%s", {strict = true})' % rope_file if rope_file else "")),
             ("local DIM, HIDDEN, LAYERS, VOCAB = 64, 172, 5, 512", "local DIM, HIDDEN, LAYERS, VOCAB = %d, %d, %d, %d" % (dim, hidden, layers, voc)),
             ("local HEADS, KV_HEADS = 8, 4", "local HEADS, KV_HEADS = %d, %d" % (heads, kv)),
             ("local CTX = 512", "local CTX = %d" % ctx)]
    for old, new in edits:
        if old not in src:
            sys.exit("stories_gguf: models/stories.lua no longer holds %r" % old)
        src = src.replace(old, new)
    return src


def write(out, name, qtype, rope=False, quant_embedding=False, w=None):
    """Writes model name as GGUF to out, matrices in qtype; returns {tensor: type written}."""
    dim, hidden, layers, heads, kv, voc, ctx = SHAPES[name]
    w = w if w is not None else weights(name)
    tokens, scores, types = vocab(os.path.join(ROOT, "models", "weights", "tok512.bin"), voc)
    meta = [("general.architecture", G.STR, "llama"), ("general.name", G.STR, name),
            ("llama.context_length", G.U32, ctx), ("llama.embedding_length", G.U32, dim),
            ("llama.block_count", G.U32, layers), ("llama.feed_forward_length", G.U32, hidden),
            ("llama.attention.head_count", G.U32, heads), ("llama.attention.head_count_kv", G.U32, kv),
            ("llama.rope.dimension_count", G.U32, dim // heads), ("llama.rope.freq_base", G.F32V, 10000.0),
            ("llama.attention.layer_norm_rms_epsilon", G.F32V, 1e-5),
            ("general.file_type", G.U32, FILE_TYPE[qtype]),
            ("tokenizer.ggml.model", G.STR, "llama"), ("tokenizer.ggml.tokens", G.ARR, (G.STR, tokens)),
            ("tokenizer.ggml.scores", G.ARR, (G.F32V, scores)), ("tokenizer.ggml.token_type", G.ARR, (G.I32, types)),
            ("tokenizer.ggml.bos_token_id", G.U32, 1), ("tokenizer.ggml.eos_token_id", G.U32, 2),
            ("tokenizer.ggml.unknown_token_id", G.U32, 0), ("tokenizer.ggml.add_bos_token", G.BOOL, True)]
    tensors, written = [], {}
    for tname, x in w.items():
        if tname.startswith("rope.") and not rope:
            continue
        matrix = x.ndim == 2 and not tname.startswith("rope.") and (quant_embedding or tname != "tok_embeddings.weight")
        t = qtype if matrix else "F32"
        if t != "F32" and x.shape[1] % ggml_quant.BLOCK[t]:
            t = "F32"   # rows not whole blocks (the caller sees it in the returned types)
        tensors.append((run_gguf.gguf_name(tname), t, x.shape, ggml_quant.quantize(t, x)))
        written[tname] = t
    G.write(out, meta, tensors)
    return written


def write_rope(out, name, w=None):
    """Only the RoPE tables, as GGUF (what Kiln's stories.lua reads besides llama.cpp's file)."""
    w = w if w is not None else weights(name)
    G.write(out, [], [(k, "F32", v.shape, v.astype("<f4").tobytes()) for k, v in w.items() if k.startswith("rope.")])


def main():
    args = sys.argv[1:]
    out = args.pop(0)
    qtype = args.pop(0) if args and not args[0].startswith("--") else "F32"
    name = args[args.index("--seeded") + 1] if "--seeded" in args else "stories260K"
    if name not in SHAPES or qtype not in FILE_TYPE:
        sys.exit("stories_gguf: unknown model %r or type %r" % (name, qtype))
    rope = "--rope" in args
    w = weights(name)
    written = write(out, name, qtype, rope, "--quant-embedding" in args, w)
    kept = sorted(k for k, t in written.items() if t != qtype and qtype != "F32" and w[k].ndim == 2 and not k.startswith("rope.")
                  and ("--quant-embedding" in args or k != "tok_embeddings.weight"))
    if kept:
        print("stories_gguf: %d matrices kept in F32 (rows not whole %s blocks), e.g. %s" % (len(kept), qtype, kept[0]), file=sys.stderr)
    if "--lua" in args:
        lua_path = args[args.index("--lua") + 1]
        rope_file = None
        if not rope:
            rope_file = "rope.gguf"
            write_rope(os.path.join(os.path.dirname(os.path.abspath(lua_path)), rope_file), name, w)
        open(lua_path, "w").write(lua(name, os.path.relpath(os.path.abspath(out), os.path.dirname(os.path.abspath(lua_path))), rope_file))


if __name__ == "__main__":
    main()

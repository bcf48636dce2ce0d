"""prep.py -- inputs of the LLM decode benchmark (bench/llm/run.py), under .cache/bench/llm:

  raw weights for bench/llm/plain_llama.c (its header documents the layout), written from
  models/stories.lua's checkpoint (Meta names, pairs rotation, the checkpoint's RoPE
  tables) or from a Hugging Face checkpoint directory as models/llm.lua reads it (halves
  rotation, tables computed as llm.lua computes them: double precision, stored as f32);
  and a seeded ~100M-parameter Llama-shaped Hugging Face checkpoint (no file to download):
  hidden 768, 12 layers, 12 query / 4 key-value heads, intermediate 2048, vocabulary
  32000, tied embeddings, 1024 positions: 100.1M parameters.
"""
import json
import math
import os
import struct
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "py"))
sys.path.insert(0, os.path.join(ROOT, "tests", "state"))
import kt  # noqa: E402
import torch_stories  # noqa: E402

MAGIC = 0x4b4c4c4d
SEEDED = dict(model_type="llama", hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
              num_attention_heads=12, num_key_value_heads=4, vocab_size=32000, rms_norm_eps=1e-5,
              rope_theta=10000.0, tie_word_embeddings=True, max_position_embeddings=1024, hidden_act="silu")


def write_raw(path, hdr, arrays):
    with open(path, "wb") as f:
        f.write(struct.pack("<11i", MAGIC, *hdr))
        for a in arrays:
            f.write(np.ascontiguousarray(a, dtype="<f4").tobytes())


def raw_stories(path):
    w = torch_stories.load_safetensors(os.path.join(ROOT, "models", "weights", "stories260K.safetensors"))
    L = sum(1 for k in w if k.endswith(".attention.wq.weight"))
    dim, vocab = w["tok_embeddings.weight"].shape[1], w["tok_embeddings.weight"].shape[0]
    hd = 2 * w["rope.cos"].shape[1]
    arrays = [w["tok_embeddings.weight"]]
    for l in range(L):
        p = "layers.%d." % l
        arrays += [w[p + n] for n in ("attention_norm.weight", "attention.wq.weight", "attention.wk.weight",
                                      "attention.wv.weight", "attention.wo.weight", "ffn_norm.weight",
                                      "feed_forward.w1.weight", "feed_forward.w2.weight", "feed_forward.w3.weight")]
    arrays += [w["norm.weight"], w["rope.cos"], w["rope.sin"]]
    hidden = w["layers.0.feed_forward.w1.weight"].shape[0]
    kv = w["layers.0.attention.wk.weight"].shape[0] // hd
    write_raw(path, [dim, hidden, L, dim // hd, kv, vocab, w["rope.cos"].shape[0], 0, 1, int(1e-5 * 1e9)], arrays)
    return vocab


def raw_hf(path, ckpt, ctx):
    cfg = json.load(open(os.path.join(ckpt, "config.json")))
    w = torch_stories.load_safetensors(os.path.join(ckpt, "model.safetensors"))
    D, H = cfg["hidden_size"], cfg["num_attention_heads"]
    hd = D // H
    arrays = [w["model.embed_tokens.weight"]]
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        arrays += [w[p + n] for n in ("input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
                                      "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                                      "post_attention_layernorm.weight", "mlp.gate_proj.weight",
                                      "mlp.down_proj.weight", "mlp.up_proj.weight")]
    arrays.append(w["model.norm.weight"])
    if not cfg["tie_word_embeddings"]:
        arrays.append(w["lm_head.weight"])
    f = [1.0 / cfg["rope_theta"] ** (2 * i / hd) for i in range(hd // 2)]
    ang = np.array([[p * fi for fi in f] for p in range(ctx)], dtype=np.float64)
    arrays += [np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)]
    write_raw(path, [D, cfg["intermediate_size"], cfg["num_hidden_layers"], H, cfg["num_key_value_heads"],
                     cfg["vocab_size"], ctx, 1, int(cfg["tie_word_embeddings"]), int(cfg["rms_norm_eps"] * 1e9)], arrays)


def seeded_checkpoint(d):
    """The ~100M seeded checkpoint in Hugging Face's layout (skipped when present)."""
    if os.path.exists(os.path.join(d, "model.safetensors")):
        return
    os.makedirs(d, exist_ok=True)
    cfg = SEEDED
    rng = np.random.default_rng(100)
    D, F, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    hd = D // cfg["num_attention_heads"]
    kvd = cfg["num_key_value_heads"] * hd

    def mat(o, i):
        return (rng.standard_normal((o, i), dtype=np.float32) * np.float32(1 / math.sqrt(i))).astype(np.float32)
    W = {"model.embed_tokens.weight": rng.standard_normal((V, D), dtype=np.float32) * np.float32(0.5),
         "model.norm.weight": np.ones(D, np.float32)}
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        W[p + "input_layernorm.weight"] = np.ones(D, np.float32)
        W[p + "post_attention_layernorm.weight"] = np.ones(D, np.float32)
        W[p + "self_attn.q_proj.weight"] = mat(D, D)
        W[p + "self_attn.k_proj.weight"] = mat(kvd, D)
        W[p + "self_attn.v_proj.weight"] = mat(kvd, D)
        W[p + "self_attn.o_proj.weight"] = mat(D, D)
        W[p + "mlp.gate_proj.weight"] = mat(F, D)
        W[p + "mlp.up_proj.weight"] = mat(F, D)
        W[p + "mlp.down_proj.weight"] = mat(D, F)
    kt.write_safetensors(os.path.join(d, "model.safetensors"), W)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    return sum(a.size for a in W.values())

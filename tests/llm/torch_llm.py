"""torch_llm.py -- an independent PyTorch implementation of the decoder-only families that
models/llm.lua builds (Llama 2/3.x, Qwen2, Qwen3), written here from the Hugging Face
architectures (not from the Lua script), in float64: the reference of t_llm.

forward(cfg, W, tokens) -> logits [T, vocab] of a full causal forward over all tokens (no
cache: every position recomputed), for a config.json dict and a {name: array} checkpoint.
"""
import math

import numpy as np
import torch


def inv_freq(cfg, hd):
    """theta^(-2i/hd), then Llama 3's rope_scaling when the config asks for it."""
    theta = cfg.get("rope_theta", 10000.0)
    f = [1.0 / theta ** (2 * i / hd) for i in range(hd // 2)]
    rs = cfg.get("rope_scaling")
    if not rs:
        return torch.tensor(f, dtype=torch.float64)
    assert (rs.get("rope_type") or rs.get("type")) == "llama3"
    factor, lo, hi, old = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"], rs["original_max_position_embeddings"]
    out = []
    for freq in f:
        wavelen = 2 * math.pi / freq
        if wavelen < old / hi:
            out.append(freq)
        elif wavelen > old / lo:
            out.append(freq / factor)
        else:
            smooth = (old / wavelen - lo) / (hi - lo)
            out.append((1 - smooth) * freq / factor + smooth * freq)
    return torch.tensor(out, dtype=torch.float64)


def rms_norm(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def forward(cfg, W, tokens):
    t = {k: torch.tensor(np.asarray(v), dtype=torch.float64) for k, v in W.items()}
    fam = cfg["model_type"]
    D, H = cfg["hidden_size"], cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads", H)
    HD = cfg.get("head_dim", D // H)
    eps = cfg["rms_norm_eps"]
    T = len(tokens)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq(cfg, HD)[None, :]
    emb = torch.cat([ang, ang], dim=-1)
    cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]          # [T, 1, HD]
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    x = t["model.embed_tokens.weight"][torch.tensor(tokens)]
    bias = fam == "qwen2" or cfg.get("attention_bias", False)
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l

        def lin(name, v, has_bias):
            y = v @ t[p + name + ".weight"].T
            return y + t[p + name + ".bias"] if has_bias else y
        h = rms_norm(x, t[p + "input_layernorm.weight"], eps)
        q = lin("self_attn.q_proj", h, bias).view(T, H, HD)
        k = lin("self_attn.k_proj", h, bias).view(T, KV, HD)
        v = lin("self_attn.v_proj", h, bias).view(T, KV, HD)
        if fam == "qwen3":
            q = rms_norm(q, t[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, t[p + "self_attn.k_norm.weight"], eps)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(H // KV, dim=1)                          # query head h reads kv head h // (H/KV)
        v = v.repeat_interleave(H // KV, dim=1)
        s = q.transpose(0, 1) @ k.transpose(0, 1).transpose(1, 2) / math.sqrt(HD) + mask
        o = (torch.softmax(s, -1) @ v.transpose(0, 1)).transpose(0, 1).reshape(T, H * HD)
        x = x + lin("self_attn.o_proj", o, cfg.get("attention_bias", False))
        h = rms_norm(x, t[p + "post_attention_layernorm.weight"], eps)
        mb = cfg.get("mlp_bias", False)
        x = x + lin("mlp.down_proj", torch.nn.functional.silu(lin("mlp.gate_proj", h, mb)) * lin("mlp.up_proj", h, mb), mb)
    x = rms_norm(x, t["model.norm.weight"], eps)
    head = t["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", False) else t["lm_head.weight"]
    return (x @ head.T).numpy()

"""torch_gemma.py -- an independent PyTorch implementation of Gemma 3's text model, written
here from the architecture (Google's Gemma 3 report and the published config fields),
not from models/llm.lua, in float64: t_llm's reference for the gemma3 cases.

forward(cfg, W, tokens) -> logits [T, vocab] of a full forward over all tokens (no cache:
every position recomputed, each sliding layer masking its own window), for the text
config dict (a gemma3 config's text_config, defaults filled in) and {name: array} under
the text model's names (model.embed_tokens.weight, model.layers.<i>. ...).

The architecture, as this file implements it:
  x = embed[tokens] * sqrt(hidden_size)  (the factor rounded to float32, the checkpoint's
      activation dtype here)
  per layer: x += norm_post_attn(attn(norm_in(x))); x += norm_post_ff(mlp(norm_pre_ff(x)))
  norm(x) = x / sqrt(mean(x^2) + eps) * (1 + weight)
  attn: q, k, v projections; q and k RMS-normalised per head (the same (1 + w) norm), then
      rotated (RoPE, half-split layout); scores q.k * query_pre_attn_scalar^-1/2; causal;
      a sliding layer also drops keys at distance >= sliding_window; GQA
  RoPE base: rope_local_base_freq on sliding layers; rope_theta on global ones, the
      frequencies divided by rope_scaling.factor when its type is "linear" (newer configs:
      rope_parameters.sliding_attention / .full_attention give both)
  mlp: down(gelu_tanh(gate(x)) * up(x));  logits = norm(x) @ embed^T, then
      c * tanh(logits / c) when final_logit_softcapping c is set
"""
import math

import numpy as np
import torch


def layer_is_sliding(cfg):
    """Per layer: True for sliding-window attention (layer_types, else the pattern)."""
    n = cfg["num_hidden_layers"]
    if cfg.get("layer_types"):
        return [t == "sliding_attention" for t in cfg["layer_types"]]
    every = cfg.get("sliding_window_pattern", 6)
    return [(i + 1) % every != 0 for i in range(n)]


def rope(base, hd, T, factor=1.0):
    """cos, sin [T, 1, hd] for positions 0..T-1: frequency i is base^(-2i/hd) / factor,
    repeated for the two halves of a head."""
    inv = torch.tensor([base ** (-2.0 * i / hd) / factor for i in range(hd // 2)], dtype=torch.float64)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos()[:, None, :], ang.sin()[:, None, :]


def linear_factor(rs):
    """The divisor of the frequencies: rope_scaling's factor when its type is "linear"."""
    return rs.get("factor", 1.0) if rs.get("rope_type", rs.get("type")) == "linear" else 1.0


def norm(x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * (1.0 + w)


def turn(x, cos, sin):
    h = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., h:], x[..., :h]], dim=-1) * sin


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def forward(cfg, W, tokens):
    t = {k: torch.tensor(np.asarray(v), dtype=torch.float64) for k, v in W.items()}
    D, H, KV = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    HD, eps, win = cfg["head_dim"], cfg["rms_norm_eps"], cfg["sliding_window"]
    T = len(tokens)
    rp = cfg.get("rope_parameters")
    if rp:     # newer configs: per layer type {rope_type, rope_theta[, factor]}
        tables = {sliding: rope(p["rope_theta"], HD, T, linear_factor(p))
                  for sliding, p in [(True, rp["sliding_attention"]), (False, rp["full_attention"])]}
    else:
        tables = {True: rope(cfg["rope_local_base_freq"], HD, T),
                  False: rope(cfg["rope_theta"], HD, T, linear_factor(cfg.get("rope_scaling") or {}))}
    qi = torch.arange(T)[:, None]
    kj = torch.arange(T)[None, :]
    masks = {False: kj <= qi, True: (kj <= qi) & (kj > qi - win)}
    scale = cfg["query_pre_attn_scalar"] ** -0.5
    x = t["model.embed_tokens.weight"][torch.tensor(tokens)] * float(np.float32(math.sqrt(D)))
    for l, sliding in enumerate(layer_is_sliding(cfg)):
        p = "model.layers.%d." % l
        h = norm(x, t[p + "input_layernorm.weight"], eps)
        q = (h @ t[p + "self_attn.q_proj.weight"].T).view(T, H, HD)
        k = (h @ t[p + "self_attn.k_proj.weight"].T).view(T, KV, HD)
        v = (h @ t[p + "self_attn.v_proj.weight"].T).view(T, KV, HD)
        cos, sin = tables[sliding]
        q = turn(norm(q, t[p + "self_attn.q_norm.weight"], eps), cos, sin)
        k = turn(norm(k, t[p + "self_attn.k_norm.weight"], eps), cos, sin)
        outs = []
        for head in range(H):
            g = head // (H // KV)
            s = (q[:, head] @ k[:, g].T) * scale
            s = s.masked_fill(~masks[sliding], float("-inf"))
            outs.append(torch.softmax(s, -1) @ v[:, g])
        o = torch.cat(outs, dim=-1) @ t[p + "self_attn.o_proj.weight"].T
        x = x + norm(o, t[p + "post_attention_layernorm.weight"], eps)
        h = norm(x, t[p + "pre_feedforward_layernorm.weight"], eps)
        m = (gelu_tanh(h @ t[p + "mlp.gate_proj.weight"].T) * (h @ t[p + "mlp.up_proj.weight"].T)) @ t[p + "mlp.down_proj.weight"].T
        x = x + norm(m, t[p + "post_feedforward_layernorm.weight"], eps)
    logits = norm(x, t["model.norm.weight"], eps) @ t["model.embed_tokens.weight"].T
    cap = cfg.get("final_logit_softcapping")
    if cap:
        logits = cap * torch.tanh(logits / cap)
    return logits.numpy()

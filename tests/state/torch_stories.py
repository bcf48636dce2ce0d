"""torch_stories.py -- an independent PyTorch implementation of models/stories.lua's Llama
(llama2.c's TinyStories 260K), written from the architecture, not from the Lua script:
a key/value cache filled one token at a time, as an inference engine would run it.

Architecture (llama2.c run.c): token embedding; per layer x += wo(attn(rope(wq h), rope(wk
h), wv h)) with h = rmsnorm(x), then x += w2(silu(w1 h) * w3 h) with h = rmsnorm(x);
logits = rmsnorm(x) @ embedding^T. RMSNorm eps 1e-5; grouped-query attention (query head
h reads kv head h // (heads / kv_heads)); rotary embedding on the pairs (2i, 2i+1) of each
head by pos * 10000^(-2i/head_dim), taken from the checkpoint's own tables rope.cos /
rope.sin [seq_len, head_dim / 2]; causal softmax scaled by 1/sqrt(head_dim).

  Stories(path, dtype)        loads the safetensors checkpoint
  .step(token, pos) -> logits one token at position pos, its keys and values appended
  .greedy(n, bos=1) -> ids    n tokens greedily after BOS
Used by t_state (greedy ids against Kiln's generated C) and by make bench (a PyTorch eager
KV-cache peer).
"""
import math

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
import kt  # noqa: E402


def load_safetensors(path):
    return kt.read_safetensors(path)


class Stories:
    def __init__(self, path, dtype=torch.float64, ctx=512):
        w = {k: torch.tensor(v, dtype=dtype) for k, v in load_safetensors(path).items()}
        self.w, self.dtype = w, dtype
        self.dim = w["tok_embeddings.weight"].shape[1]
        self.hd = 2 * w["rope.cos"].shape[1]
        self.heads = self.dim // self.hd
        self.kv_heads = w["layers.0.attention.wk.weight"].shape[0] // self.hd
        self.layers = sum(1 for k in w if k.endswith(".attention.wq.weight"))
        self.ctx = ctx
        self.reset()

    def reset(self):
        shape = (self.layers, self.ctx, self.kv_heads, self.hd)
        self.k = torch.zeros(shape, dtype=self.dtype)
        self.v = torch.zeros(shape, dtype=self.dtype)

    def rmsnorm(self, x, name):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * self.w[name]

    def rope(self, x, pos):                                  # x [heads, hd]: rotate pairs (2i, 2i+1)
        c, s = self.w["rope.cos"][pos], self.w["rope.sin"][pos]
        a, b = x[:, 0::2], x[:, 1::2]
        out = torch.empty_like(x)
        out[:, 0::2], out[:, 1::2] = a * c - b * s, a * s + b * c
        return out

    @torch.no_grad()
    def step(self, token, pos):
        w = self.w
        x = w["tok_embeddings.weight"][token]
        group = self.heads // self.kv_heads
        for l in range(self.layers):
            p = "layers.%d." % l
            h = self.rmsnorm(x, p + "attention_norm.weight")
            q = self.rope((w[p + "attention.wq.weight"] @ h).view(self.heads, self.hd), pos)
            self.k[l, pos] = self.rope((w[p + "attention.wk.weight"] @ h).view(self.kv_heads, self.hd), pos)
            self.v[l, pos] = (w[p + "attention.wv.weight"] @ h).view(self.kv_heads, self.hd)
            keys = self.k[l, :pos + 1].repeat_interleave(group, dim=1)     # [pos+1, heads, hd]
            vals = self.v[l, :pos + 1].repeat_interleave(group, dim=1)
            att = torch.softmax(torch.einsum("thd,hd->ht", keys, q) / math.sqrt(self.hd), -1)
            out = torch.einsum("ht,thd->hd", att, vals)
            x = x + w[p + "attention.wo.weight"] @ out.reshape(-1)
            h = self.rmsnorm(x, p + "ffn_norm.weight")
            a = w[p + "feed_forward.w1.weight"] @ h
            x = x + w[p + "feed_forward.w2.weight"] @ (torch.nn.functional.silu(a) * (w[p + "feed_forward.w3.weight"] @ h))
        return self.rmsnorm(x, "norm.weight") @ w["tok_embeddings.weight"].T

    def greedy(self, n, bos=1):
        self.reset()
        ids, tok = [], bos
        for pos in range(n):
            tok = int(torch.argmax(self.step(tok, pos)))
            ids.append(tok)
        return ids

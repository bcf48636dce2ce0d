#!/usr/bin/python3
"""peers.py — the same models as models/*.lua in PyTorch and in NumPy, timed.

bench/bench.py imports this module and calls run_peers() once per model after
Kiln has built it. The twins load *Kiln's own weights*: the build's <m>.json
lists every weight with its name, shape and offset in <m>.weights, and the names
are the PyTorch state_dict names, so each torch twin is an ordinary module filled
by load_state_dict and each NumPy twin a function over the same {name: array}.
Inputs are the arrays the generated C ran on, and each peer's output is compared
with the C output (max |difference|): a sanity check that the timings compare
the same computation, not a test (tests/t_models.sh is the test: tests/py/run_models.py
imports load_kiln_weights, TORCH and torch_twin from here, and fails for a models/*.lua
that has no entry in TORCH, so keep those names and add a twin with every new model).

A model without a twin here is still timed as generated C and `kiln run`. Timing: warm up,
then time each call separately until a budget is spent; median of the samples.
PyTorch runs with 1 thread, with its default thread count and with one thread per
core (the distinct values of these). No thresholds anywhere.
"""
import json
import math
import os
import sys
import time

import numpy as np
import torch
from torch import nn


TORCH_DEFAULT_THREADS = torch.get_num_threads()   # before anything changes it


# ---- loading Kiln's weights ----

def load_kiln_weights(build_dir, model):
    """Returns {name: f32 numpy array} read from <m>.weights through <m>.json."""
    with open(os.path.join(build_dir, model + ".json")) as f:
        meta = json.load(f)
    with open(os.path.join(build_dir, model + ".weights"), "rb") as f:
        blob = f.read()
    header = 64
    out = {}
    for w in meta["weights"]:
        if w["dtype"] != "f32":
            continue
        if "packed" in w:
            out[w["name"]] = unpack_panels(blob, header + w["offset"], w["packed"]).reshape(w["shape"])
            continue
        if "winograd" in w:
            out[w["name"]] = unwino(blob, header + w["offset"], w["shape"], w["winograd"]["block"])
            continue
        if "format" in w:   # a stored format (docs/quantization.md): decoded by the spec's reference
            sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "quant"))
            import ref
            f = w["format"]
            raw = blob[header + w["offset"]:header + w["offset"] + w["bytes"]]
            out[w["name"]] = ref.decode(f["name"], raw, f["rows"], f["k"]).astype(np.float32).reshape(w["shape"])
            continue
        n = int(np.prod(w["shape"])) if w["shape"] else 1
        a = np.frombuffer(blob, dtype="<f4", count=n, offset=header + w["offset"])
        out[w["name"]] = a.reshape(w["shape"]).copy()
    return meta, out


def unpack_panels(blob, offset, p):
    """A weight stored as the C micro-kernel's panels (docs/output.md, "packed" in m.json):
    panel j holds rows 0..k-1 of columns Pj..Pj+P-1 of B (k x n), P = "panel" (32; 12 for
    convolution filters in blocks, 32 for those across the lanes), zero past n; the weight is B, or B^T when "transposed" (a matrix:
    the caller reshapes a convolution's [n, k] to its filters' shape)."""
    w, k, n = p["panel"], p["k"], p["n"]
    npan = -(-n // w)
    a = np.frombuffer(blob, dtype="<f4", count=npan * k * w, offset=offset).reshape(npan, k, w)
    b = a.transpose(1, 0, 2).reshape(k, npan * w)[:, :n]
    return (b.T if p["transposed"] else b).copy()


def unwino(blob, offset, shape, block):
    """3x3 filters stored as their Winograd F(2x2, 3x3) transforms U = G g G^T (docs/output.md,
    "winograd" in m.json: U[xi] of filter o, channel c at ((xi * OB + o // block) * C + c) *
    block + o % block), back to g = G+ U G+^T (G+ the pseudo-inverse) in float64, rounded
    to float32. U is stored rounded, so a tap comes back within a rounding or so of the
    build's value, not always bit for bit: good for a twin's reference, not for a check of
    the file's bits."""
    oc, c = shape[0], shape[1]
    ob = -(-oc // block)
    u = np.frombuffer(blob, dtype="<f4", count=16 * ob * block * c, offset=offset).astype(np.float64)
    u = u.reshape(4, 4, ob, c, block).transpose(2, 4, 3, 0, 1).reshape(ob * block, c, 4, 4)[:oc]
    G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])
    Gp = np.linalg.pinv(G)
    return np.einsum("ia,ocab,jb->ocij", Gp, u, Gp).astype(np.float32)


# ---- PyTorch twins (state_dict names as in models/*.lua) ----

class TorchBasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (self.downsample(x) if self.downsample is not None else x))


class TorchResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.layer1 = TorchBasicBlock(16, 16, 1)
        self.layer2 = TorchBasicBlock(16, 16, 1)
        self.layer3 = TorchBasicBlock(16, 32, 2)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(x.mean((2, 3)))


class TorchEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(*[nn.TransformerEncoderLayer(64, 4, 256, dropout=0.0, activation="gelu",
                                                                 batch_first=True) for _ in range(2)])

    def forward(self, x):
        return self.layers(x)


def torch_mlp():
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))


def torch_lenet():
    return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.Tanh(), nn.MaxPool2d(2),
                         nn.Conv2d(6, 16, 5), nn.Tanh(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))


class TorchLlamaRope(nn.Module):
    """llama2.c's rotary tables (cos/sin [seq_len, head_dim/2]) as buffers `rope.cos`/`rope.sin`."""

    def __init__(self, rows=512, half=4):
        super().__init__()
        self.register_buffer("cos", torch.zeros(rows, half))
        self.register_buffer("sin", torch.zeros(rows, half))

    def forward(self, x):
        """x [T, heads, hd]: rotates the pairs (2i, 2i+1) of each head by position."""
        t = x.shape[0]
        c, s = self.cos[:t, None, :], self.sin[:t, None, :]
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack((a * c - b * s, a * s + b * c), dim=-1).flatten(-2)


class TorchLlamaAttention(nn.Module):
    def __init__(self, dim, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, dim // heads
        self.wq = nn.Linear(dim, heads * self.hd, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.hd, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.hd, bias=False)
        self.wo = nn.Linear(heads * self.hd, dim, bias=False)

    def forward(self, x, rope):
        t = x.shape[0]
        q = rope(self.wq(x).view(t, self.heads, self.hd)).transpose(0, 1)
        k = rope(self.wk(x).view(t, self.kv_heads, self.hd)).transpose(0, 1)
        v = self.wv(x).view(t, self.kv_heads, self.hd).transpose(0, 1)
        rep = self.heads // self.kv_heads
        k, v = k.repeat_interleave(rep, dim=0), v.repeat_interleave(rep, dim=0)
        scores = q @ k.transpose(1, 2) / math.sqrt(self.hd)
        causal = torch.ones(t, t, dtype=torch.bool).triu(1)
        a = torch.softmax(scores.masked_fill(causal, float("-inf")), dim=-1) @ v
        return self.wo(a.transpose(0, 1).reshape(t, -1))


class TorchLlamaFeedForward(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return self.w2(torch.nn.functional.silu(self.w1(x)) * self.w3(x))


class TorchRMSNorm(nn.Module):
    """torch 1.13 has no nn.RMSNorm: x * rsqrt(mean(x^2) + eps) * weight."""

    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + self.eps) * self.weight


class TorchLlamaBlock(nn.Module):
    def __init__(self, dim, hidden, heads, kv_heads):
        super().__init__()
        self.attention_norm = TorchRMSNorm(dim)
        self.attention = TorchLlamaAttention(dim, heads, kv_heads)
        self.ffn_norm = TorchRMSNorm(dim)
        self.feed_forward = TorchLlamaFeedForward(dim, hidden)

    def forward(self, x, rope):
        x = x + self.attention(self.attention_norm(x), rope)
        return x + self.feed_forward(self.ffn_norm(x))


class TorchStories(nn.Module):
    """models/stories.lua: llama2.c's stories260K (Meta Llama state_dict names); tokens [T] -> logits [T, 512]."""

    def __init__(self, dim=64, hidden=172, layers=5, heads=8, kv_heads=4, vocab=512):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.rope = TorchLlamaRope(512, dim // heads // 2)
        self.layers = nn.ModuleList([TorchLlamaBlock(dim, hidden, heads, kv_heads) for _ in range(layers)])
        self.norm = TorchRMSNorm(dim)

    def forward(self, tokens):
        x = self.tok_embeddings(tokens.long())
        for layer in self.layers:
            x = layer(x, self.rope)
        return self.norm(x) @ self.tok_embeddings.weight.T


TORCH = {"mlp": torch_mlp, "lenet": torch_lenet, "resnet": TorchResNet, "transformer": TorchEncoder,
         "stories": TorchStories}


def torch_twin(model, params):
    """The PyTorch twin of `model` filled with Kiln's weights, in eval mode (float32).

    params: {name: array} as from load_kiln_weights. Returns (module, missing), where
    missing lists the twin's state_dict entries the build lacks (num_batches_tracked, an
    int64 counter unused at inference, is never needed); when it is not empty the module is
    None. Raises KeyError when `model` has no twin in TORCH. Used by run_peers below and
    by tests/py/run_models.py (t_models), so the test checks the very module timed here.
    """
    net = TORCH[model]()
    sd = net.state_dict()
    missing = [k for k in sd if k not in params and not k.endswith("num_batches_tracked")]
    if missing:
        return None, missing
    net.load_state_dict({k: torch.from_numpy(params[k]) if k in params else v for k, v in sd.items()})
    return net.eval(), []


# ---- NumPy twins: plain functions over the same {name: array} ----

def np_linear(x, p, name):
    y = x @ p[name + ".weight"].T
    return y + p[name + ".bias"] if name + ".bias" in p else y


def np_conv2d(x, w, b=None, stride=1, pad=0):
    """NCHW x OIHW by im2col (sliding windows) and one tensordot."""
    if pad:
        x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    kh, kw = w.shape[2], w.shape[3]
    win = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(2, 3))[:, :, ::stride, ::stride]
    y = np.tensordot(win, w, axes=([1, 4, 5], [1, 2, 3])).transpose(0, 3, 1, 2)
    return y + b[None, :, None, None] if b is not None else y


def np_maxpool2(x):
    n, c, h, w = x.shape
    return x[:, :, :h // 2 * 2, :w // 2 * 2].reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


def np_batchnorm(x, p, name, eps=1e-5):
    s = p[name + ".weight"] / np.sqrt(p[name + ".running_var"] + eps)
    t = p[name + ".bias"] - p[name + ".running_mean"] * s
    return x * s[None, :, None, None] + t[None, :, None, None]


def np_layernorm(x, p, name, eps=1e-5):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * p[name + ".weight"] + p[name + ".bias"]


def np_erf(x):
    """erf by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7); NumPy has no erf."""
    s = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * np.exp(-a * a)
    return s * y


def np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def np_mlp(p, image):
    h = np.maximum(np_linear(image, p, "0"), 0)
    h = np.maximum(np_linear(h, p, "2"), 0)
    return np_linear(h, p, "4")


def np_lenet(p, image):
    h = np_maxpool2(np.tanh(np_conv2d(image, p["0.weight"], p["0.bias"], pad=2)))
    h = np_maxpool2(np.tanh(np_conv2d(h, p["3.weight"], p["3.bias"])))
    h = h.reshape(h.shape[0], -1)
    h = np.maximum(np_linear(h, p, "7"), 0)
    h = np.maximum(np_linear(h, p, "9"), 0)
    return np_linear(h, p, "11")


def np_block(p, x, name, stride):
    y = np.maximum(np_batchnorm(np_conv2d(x, p[name + ".conv1.weight"], stride=stride, pad=1), p, name + ".bn1"), 0)
    y = np_batchnorm(np_conv2d(y, p[name + ".conv2.weight"], pad=1), p, name + ".bn2")
    if name + ".downsample.0.weight" in p:
        x = np_batchnorm(np_conv2d(x, p[name + ".downsample.0.weight"], stride=stride), p, name + ".downsample.1")
    return np.maximum(y + x, 0)


def np_resnet(p, image):
    x = np.maximum(np_batchnorm(np_conv2d(image, p["conv1.weight"], pad=1), p, "bn1"), 0)
    x = np_block(p, x, "layer1", 1)
    x = np_block(p, x, "layer2", 1)
    x = np_block(p, x, "layer3", 2)
    return np_linear(x.mean(axis=(2, 3)), p, "fc")


def np_encoder_layer(p, x, name, heads):
    b, t, d = x.shape
    hd = d // heads
    qkv = x @ p[name + ".self_attn.in_proj_weight"].T + p[name + ".self_attn.in_proj_bias"]
    q, k, v = (qkv[..., i * d:(i + 1) * d].reshape(b, t, heads, hd).transpose(0, 2, 1, 3) for i in range(3))
    a = np_softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd)) @ v
    a = a.transpose(0, 2, 1, 3).reshape(b, t, d)
    x = np_layernorm(x + np_linear(a, p, name + ".self_attn.out_proj"), p, name + ".norm1")
    h = np_linear(x, p, name + ".linear1")
    h = 0.5 * h * (1.0 + np_erf(h / math.sqrt(2.0)))
    return np_layernorm(x + np_linear(h, p, name + ".linear2"), p, name + ".norm2")


def np_transformer(p, x):
    for i in range(2):
        x = np_encoder_layer(p, x, f"layers.{i}", 4)
    return x


def np_rmsnorm(x, w, eps=1e-5):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def np_stories(p, tokens):
    """llama2.c's forward (run.c), whole sequence at once: tokens [T] -> logits [T, vocab]."""
    t = tokens.shape[0]
    x = p["tok_embeddings.weight"][tokens]
    dim = x.shape[1]
    hd = 2 * p["rope.cos"].shape[1]
    heads = dim // hd
    cos, sin = p["rope.cos"][:t, None, :], p["rope.sin"][:t, None, :]

    def rope(v):                                    # v [T, h, hd]: pairs (2i, 2i+1)
        a, b = v[..., 0::2], v[..., 1::2]
        out = np.empty_like(v)
        out[..., 0::2], out[..., 1::2] = a * cos - b * sin, a * sin + b * cos
        return out

    causal = np.triu(np.ones((t, t), bool), 1)
    i = 0
    while "layers.%d.attention.wq.weight" % i in p:
        n = "layers.%d." % i
        h = np_rmsnorm(x, p[n + "attention_norm.weight"])
        q = rope((h @ p[n + "attention.wq.weight"].T).reshape(t, heads, hd))
        k = rope((h @ p[n + "attention.wk.weight"].T).reshape(t, -1, hd))
        v = (h @ p[n + "attention.wv.weight"].T).reshape(t, -1, hd)
        kvh = k.shape[1]
        out = np.empty((t, heads, hd), x.dtype)
        for hh in range(heads):                     # query head hh reads kv head hh // (heads / kvh)
            kv = hh // (heads // kvh)
            s = q[:, hh] @ k[:, kv].T / math.sqrt(hd)
            s[causal] = -np.inf
            out[:, hh] = np_softmax(s) @ v[:, kv]
        x = x + out.reshape(t, dim) @ p[n + "attention.wo.weight"].T
        h = np_rmsnorm(x, p[n + "ffn_norm.weight"])
        a = h @ p[n + "feed_forward.w1.weight"].T
        g = a / (1 + np.exp(-a)) * (h @ p[n + "feed_forward.w3.weight"].T)
        x = x + g @ p[n + "feed_forward.w2.weight"].T
        i += 1
    return np_rmsnorm(x, p["norm.weight"]) @ p["tok_embeddings.weight"].T


NUMPY = {"mlp": np_mlp, "lenet": np_lenet, "resnet": np_resnet, "transformer": np_transformer,
         "stories": np_stories}


# ---- timing ----

def median_us(fn, budget_ms):
    """Warms fn up for a tenth of the budget, then times single calls: (median, min) in µs."""
    end = time.perf_counter() + budget_ms / 10000.0
    while time.perf_counter() < end:
        fn()
    samples = []
    end = time.perf_counter() + budget_ms / 1000.0
    while len(samples) < 5 or (time.perf_counter() < end and len(samples) < 20000):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1e6)
    samples.sort()
    return samples[len(samples) // 2], samples[0]


def maxdiff(outs, c_outs):
    """"D (rel R)": the largest |peer - C| over all outputs, and that over the largest |C|."""
    if c_outs is None:
        return "-"
    d = max(float(np.max(np.abs(np.asarray(o, dtype=np.float32).reshape(-1) - c.reshape(-1))))
            for o, c in zip(outs, c_outs))
    scale = max(float(np.max(np.abs(c))) for c in c_outs) or 1.0
    return "%.1e (rel %.1e)" % (d, d / scale)


def run_peers(model, meta, params, inputs, c_outs, budget_ms):
    """Times every twin of `model` on `inputs`; returns [(label, median_us, min_us, maxdiff or "-")].

    Notes (e.g. a twin that could not be filled with Kiln's weights) are returned
    as rows whose median is None and whose last field is the reason.
    """
    rows = []
    if model in TORCH:
        net, missing = torch_twin(model, params)
        if missing:
            rows.append(("torch", None, None, f"Kiln's build lacks {len(missing)} weights, e.g. {missing[0]}"))
        else:
            tin = [torch.from_numpy(a) for a in inputs]
            default_threads = TORCH_DEFAULT_THREADS
            for threads in sorted({1, default_threads, os.cpu_count() or 1}):
                torch.set_num_threads(threads)
                with torch.inference_mode():
                    outs = net(*tin)
                    outs = [outs] if isinstance(outs, torch.Tensor) else list(outs)
                    med, mn = median_us(lambda: net(*tin), budget_ms)
                rows.append((f"torch-{threads}t", med, mn, maxdiff([o.numpy() for o in outs], c_outs)))
            torch.set_num_threads(default_threads)
    if model in NUMPY:
        fn = NUMPY[model]
        try:
            outs = fn(params, *inputs)
        except KeyError as e:
            rows.append(("numpy", None, None, f"Kiln's build lacks weight {e}"))
        else:
            outs = [outs] if isinstance(outs, np.ndarray) else list(outs)
            med, mn = median_us(lambda: fn(params, *inputs), budget_ms)
            rows.append(("numpy", med, mn, maxdiff(outs, c_outs)))
    return rows

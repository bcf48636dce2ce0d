"""workloads.py — what the peer benchmark runs: each workload's PyTorch twin, inputs and size.

The PyTorch twin of a workload holds its weights: prepare.py builds it from a fixed
seed, writes its state_dict as safetensors for Kiln (bench/peerbench/models/*.lua load
them under the same names) and exports it to ONNX for ONNX Runtime, so every peer
computes with the same numbers. Inputs are seeded too. The Kiln script of workload
`w` is models/<w>.lua; several workloads share one set of weights (`weights`), e.g.
mlp_b1 and mlp_b64.

Shapes (batch-first, PyTorch layouts):
  noop             y = x + 1 on 16 floats: the fixed cost of one call of each runtime
  mlp_b1/_b64      models/mlp.lua's 784-512-512-10 ReLU MLP, batch 1 / 64
  lenet_b1/_b64    models/lenet.lua's LeNet-5 (tanh convs, ReLU fcs) on 1x28x28, batch 1 / 64
  resnet18_b1      torchvision's ResNet-18 (BasicBlock x [2, 2, 2, 2], 1000 classes), 3x224x224
  bert4_s128       4 x torch.nn.TransformerEncoderLayer(768, 12 heads, 3072, exact GELU,
                   post-norm, LayerNorm eps 1e-12) on hidden states [1, 128, 768]
  llama_prefill128 a 125M-parameter Llama (LLAMA below) run statelessly on 128 tokens;
                   the output is the logits of the last position [1, 32000]
  gemm1024         y = x @ w, all [1024, 1024]
  matvec4096       y = w @ x, w [4096, 4096], x [4096]       (sgemv, no transpose)
  vecmat4096       y = x @ w, x [1, 4096],  w [4096, 4096]   (sgemv, transposed)

Runs on Debian's /usr/bin/python3 with python3-torch 1.13 (which has no nn.RMSNorm).
"""
import math
from dataclasses import dataclass
from typing import Callable, Dict, List

import torch
import torch.nn.functional as F
from torch import nn


# ---- MLP and LeNet: the architectures of models/mlp.lua and models/lenet.lua ----

def mlp():
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))


def lenet():
    return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.Tanh(), nn.MaxPool2d(2),
                         nn.Conv2d(6, 16, 5), nn.Tanh(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))


# ---- ResNet-18, torchvision's module names ----

class BasicBlock(nn.Module):
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
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.downsample is None else self.downsample(x)))


class ResNet18(nn.Module):
    def __init__(self, classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        cin = 64
        for i, (cout, stride) in enumerate([(64, 1), (128, 2), (256, 2), (512, 2)]):
            setattr(self, f"layer{i + 1}", nn.Sequential(BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)))
            cin = cout
        self.fc = nn.Linear(512, classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                # statistics like a trained network's: the identity would hide a mixed-up one
                nn.init.uniform_(m.weight, 0.5, 1.5)
                nn.init.uniform_(m.bias, -0.1, 0.1)
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(x.mean((2, 3)))


# ---- BERT-base-like encoder: torch.nn.TransformerEncoderLayer as BERT configures it ----

class Bert(nn.Module):
    def __init__(self, layers=4, d=768, heads=12, ffn=3072):
        super().__init__()
        self.layers = nn.ModuleList([
            nn.TransformerEncoderLayer(d, heads, ffn, dropout=0.0, activation="gelu", layer_norm_eps=1e-12,
                                       batch_first=True) for _ in range(layers)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


# ---- a Llama-like decoder, run statelessly on a fixed number of tokens ----

@dataclass(frozen=True)
class LlamaConfig:
    dim: int = 768
    layers: int = 12
    heads: int = 12
    kv_heads: int = 4          # grouped-query attention: 3 query heads share one key/value head
    ffn: int = 2048
    vocab: int = 32000
    tokens: int = 128
    eps: float = 1e-5
    rope_theta: float = 10000.0

    @property
    def head_dim(self):
        return self.dim // self.heads


LLAMA = LlamaConfig()


class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    """(x1, x2) -> (-x2, x1) on the two halves of the last dim (the "half-split" RoPE layout)."""
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Rope(nn.Module):
    """Rotary tables as persistent buffers, so Kiln loads them instead of computing trigonometry."""

    def __init__(self, c: LlamaConfig):
        super().__init__()
        inv = 1.0 / (c.rope_theta ** (torch.arange(0, c.head_dim, 2, dtype=torch.float64) / c.head_dim))
        ang = torch.outer(torch.arange(c.tokens, dtype=torch.float64), inv)
        ang = torch.cat((ang, ang), dim=-1)                     # [tokens, head_dim]
        self.register_buffer("cos", ang.cos().float())
        self.register_buffer("sin", ang.sin().float())

    def forward(self, x):
        """x [T, heads, hd]."""
        c, s = self.cos[:, None, :], self.sin[:, None, :]
        return x * c + rotate_half(x) * s


class Attention(nn.Module):
    def __init__(self, c: LlamaConfig):
        super().__init__()
        self.c = c
        hd = c.head_dim
        self.wq = nn.Linear(c.dim, c.heads * hd, bias=False)
        self.wk = nn.Linear(c.dim, c.kv_heads * hd, bias=False)
        self.wv = nn.Linear(c.dim, c.kv_heads * hd, bias=False)
        self.wo = nn.Linear(c.heads * hd, c.dim, bias=False)

    def forward(self, x, rope):
        c = self.c
        t, hd, rep = x.shape[0], c.head_dim, c.heads // c.kv_heads
        q = rope(self.wq(x).view(t, c.heads, hd)).transpose(0, 1)        # [H, T, hd]
        k = rope(self.wk(x).view(t, c.kv_heads, hd)).transpose(0, 1)     # [KV, T, hd]
        v = self.wv(x).view(t, c.kv_heads, hd).transpose(0, 1)
        # query head h reads kv head h // rep (repeat_interleave), without copying k and v
        q = q.reshape(c.kv_heads, rep, t, hd)
        scores = (q @ k.unsqueeze(1).transpose(-1, -2)) / math.sqrt(hd)  # [KV, rep, T, T]
        causal = torch.ones(t, t, dtype=torch.bool).triu(1)
        p = torch.softmax(scores.masked_fill(causal, float("-inf")), dim=-1)
        y = (p @ v.unsqueeze(1)).reshape(c.heads, t, hd).transpose(0, 1).reshape(t, c.dim)
        return self.wo(y)


class FeedForward(nn.Module):
    def __init__(self, c: LlamaConfig):
        super().__init__()
        self.w1 = nn.Linear(c.dim, c.ffn, bias=False)   # gate
        self.w2 = nn.Linear(c.ffn, c.dim, bias=False)   # down
        self.w3 = nn.Linear(c.dim, c.ffn, bias=False)   # up

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, c: LlamaConfig):
        super().__init__()
        self.attention_norm = RMSNorm(c.dim, c.eps)
        self.attention = Attention(c)
        self.ffn_norm = RMSNorm(c.dim, c.eps)
        self.feed_forward = FeedForward(c)

    def forward(self, x, rope):
        x = x + self.attention(self.attention_norm(x), rope)
        return x + self.feed_forward(self.ffn_norm(x))


class Llama(nn.Module):
    """tokens int32 [T] -> logits of the last position [1, vocab]; Meta's state_dict names."""

    def __init__(self, c: LlamaConfig = LLAMA):
        super().__init__()
        self.tok_embeddings = nn.Embedding(c.vocab, c.dim)
        self.rope = Rope(c)
        self.layers = nn.ModuleList([Block(c) for _ in range(c.layers)])
        self.norm = RMSNorm(c.dim, c.eps)
        self.output = nn.Linear(c.dim, c.vocab, bias=False)
        for name, p in self.named_parameters():
            if name.endswith(".weight") and p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, tokens):
        x = self.tok_embeddings(tokens.long())
        for layer in self.layers:
            x = layer(x, self.rope)
        return self.output(self.norm(x[-1:]))


# ---- single products ----

class MatMul(nn.Module):
    """y = x @ w (w_left False) or y = w @ x (w_left True), w a [n, n] parameter named "w"."""

    def __init__(self, n, w_left=False):
        super().__init__()
        self.w_left = w_left
        self.w = nn.Parameter(torch.randn(n, n) / math.sqrt(n))

    def forward(self, x):
        return self.w @ x if self.w_left else x @ self.w


class AddOne(nn.Module):
    def forward(self, x):
        return x + 1.0


# ---- the registry ----

@dataclass(frozen=True)
class Workload:
    name: str
    weights: str                 # weights set (safetensors / ONNX file stem), shared by batch variants
    build: Callable[[], nn.Module]
    seed: int                    # torch.manual_seed before build()
    inputs: Dict[str, Callable[[torch.Generator], torch.Tensor]]   # name -> maker, in order
    flops: int                   # multiply-adds x 2 of the matmuls and convolutions
    blas: str = ""               # "gemm" | "gemv_n" | "gemv_t": OpenBLAS can run it as one call
    about: str = ""


def _randn(*shape):
    return lambda g: torch.randn(*shape, generator=g)


def _tokens(n, vocab):
    return lambda g: torch.randint(0, vocab, (n,), generator=g, dtype=torch.int32)


def mlp_flops(b):
    return 2 * b * (784 * 512 + 512 * 512 + 512 * 10)


def lenet_flops(b):
    return 2 * b * (28 * 28 * 6 * 25 + 10 * 10 * 16 * 150 + 400 * 120 + 120 * 84 + 84 * 10)


def resnet18_flops():
    macs, hw, cin = 112 * 112 * 64 * 3 * 49, 56, 64
    for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
        for b in range(2):
            s = stride if b == 0 else 1
            hw //= s
            macs += hw * hw * cout * 9 * (cin + cout) + (hw * hw * cout * cin if s != 1 or cin != cout else 0)
            cin = cout
    return 2 * (macs + 512 * 1000)


def bert_flops(layers=4, t=128, d=768, ffn=3072):
    return 2 * layers * (4 * t * d * d + 2 * t * d * ffn + 2 * t * t * d)


def llama_flops(c=LLAMA):
    hd, t = c.head_dim, c.tokens
    per_token = c.dim * hd * (2 * c.heads + 2 * c.kv_heads) + 3 * c.dim * c.ffn
    return 2 * (c.layers * (t * per_token + 2 * c.heads * hd * t * t) + c.dim * c.vocab)


def llama_params(c=LLAMA):
    hd = c.head_dim
    per_layer = c.dim * hd * (2 * c.heads + 2 * c.kv_heads) + 3 * c.dim * c.ffn + 2 * c.dim
    return 2 * c.vocab * c.dim + c.layers * per_layer + c.dim


WORKLOADS: List[Workload] = [
    Workload("noop", "noop", AddOne, 0, {"x": _randn(16)}, 0,
             about="y = x + 1 on 16 floats: each runtime's fixed cost per call"),
    Workload("mlp_b1", "mlp", mlp, 10, {"x": _randn(1, 784)}, mlp_flops(1),
             about="MLP 784-512-512-10 (models/mlp.lua), batch 1"),
    Workload("mlp_b64", "mlp", mlp, 10, {"x": _randn(64, 784)}, mlp_flops(64),
             about="MLP 784-512-512-10 (models/mlp.lua), batch 64"),
    Workload("lenet_b1", "lenet", lenet, 20, {"x": _randn(1, 1, 28, 28)}, lenet_flops(1),
             about="LeNet-5 (models/lenet.lua), batch 1"),
    Workload("lenet_b64", "lenet", lenet, 20, {"x": _randn(64, 1, 28, 28)}, lenet_flops(64),
             about="LeNet-5 (models/lenet.lua), batch 64"),
    Workload("resnet18_b1", "resnet18", ResNet18, 30, {"x": _randn(1, 3, 224, 224)}, resnet18_flops(),
             about="ResNet-18, 1x3x224x224, 1000 classes, BatchNorm in inference mode"),
    Workload("bert4_s128", "bert4", Bert, 40, {"x": _randn(1, 128, 768)}, bert_flops(),
             about="4 BERT-base encoder layers (768, 12 heads, ffn 3072, GELU, post-norm), seq 128"),
    Workload("llama_prefill128", "llama", Llama, 50, {"tokens": _tokens(LLAMA.tokens, LLAMA.vocab)},
             llama_flops(),
             about=f"Llama {llama_params() / 1e6:.0f}M (dim {LLAMA.dim}, {LLAMA.layers} layers, {LLAMA.heads} heads, "
                   f"{LLAMA.kv_heads} kv heads, SwiGLU {LLAMA.ffn}, vocab {LLAMA.vocab}, RMSNorm, RoPE), "
                   f"stateless forward of {LLAMA.tokens} tokens, last position's logits"),
    Workload("gemm1024", "gemm1024", lambda: MatMul(1024), 60, {"x": _randn(1024, 1024)}, 2 * 1024 ** 3,
             blas="gemm", about="y = x @ w, 1024 x 1024 x 1024"),
    Workload("matvec4096", "matvec4096", lambda: MatMul(4096, w_left=True), 70, {"x": _randn(4096)},
             2 * 4096 ** 2, blas="gemv_n", about="y = w @ x, w [4096, 4096] (64 MiB, streamed from memory)"),
    Workload("vecmat4096", "vecmat4096", lambda: MatMul(4096), 80, {"x": _randn(1, 4096)},
             2 * 4096 ** 2, blas="gemv_t", about="y = x @ w, x [1, 4096], w [4096, 4096] (64 MiB)"),
]

BY_NAME = {w.name: w for w in WORKLOADS}

# Fast workloads for BENCH_QUICK=1: a smoke run of every peer in well under a minute.
QUICK = ["noop", "mlp_b1", "lenet_b1", "gemm1024"]


def build(w: Workload) -> nn.Module:
    """The twin of w with its seeded weights, in eval mode."""
    torch.manual_seed(w.seed)
    return w.build().eval()


def make_inputs(w: Workload) -> Dict[str, torch.Tensor]:
    """w's inputs, seeded by the workload's seed + 1 (independent of the weights' stream)."""
    g = torch.Generator().manual_seed(w.seed + 1)
    return {name: make(g) for name, make in w.inputs.items()}

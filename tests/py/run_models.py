"""run_models.py -- t_models: whole models, generated C against PyTorch and the interpreter.

Part 1, twins: each tests/models/tm_*.lua has a PyTorch twin built below. The twin's
weights (random, seeded; batchnorm running statistics random too) are written as
safetensors by hand beside a copy of the script, the script loads them with kiln.load under
the state_dict names, and the outputs of the generated C and of the interpreter are compared
with the twin run in float64 on the same inputs. A separate check per model verifies that
every weight Kiln used came from the file (a misnamed parameter would otherwise be silently
initialised) and that every state_dict tensor was used.

Part 2, every models/*.lua: generated C against the interpreter on random inputs.

usage: /usr/bin/python3 tests/py/run_models.py WORKDIR [SUBSTRING...]
"""
import glob
import os
import shutil
import sys
import zlib

import numpy as np
import torch
import torch.nn as tnn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kt  # noqa: E402

torch.set_num_threads(1)
np.seterr(all="ignore")
MODEL_TOL = 1e-4          # docs/testing.md, "Whole models"


class RMSNorm(tnn.Module):
    """RMSNorm by hand (torch 1.13 has none): x * rsqrt(mean(x^2, -1) + eps) * weight."""

    def __init__(self, d, eps):
        super().__init__()
        self.weight = tnn.Parameter(torch.randn(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + self.eps) * self.weight


def randomise(m):
    """Random parameters and batchnorm statistics, so no layer is near the identity."""
    with torch.no_grad():
        for name, p in m.named_parameters():
            p.copy_(torch.randn_like(p) * (0.3 if p.dim() > 1 else 0.5) + (1.0 if name.endswith("norm1.weight") or
                                                                           name.endswith("norm2.weight") else 0.0))
        for name, b in m.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(torch.randn_like(b) * 0.2)
            elif name.endswith("running_var"):
                b.copy_(torch.rand_like(b) + 0.5)
    return m


class Attn(tnn.Module):
    def __init__(self):
        super().__init__()
        self.self_attn = tnn.MultiheadAttention(24, 3, batch_first=True)
        self.cross_attn = tnn.MultiheadAttention(24, 2, bias=False, batch_first=True)

    def forward(self, q, mem):
        h = self.self_attn(q, q, q, need_weights=False)[0]
        return h, self.cross_attn(h, mem, mem, need_weights=False)[0]


class Masked(tnn.Module):
    def __init__(self):
        super().__init__()
        self.attn = tnn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, x, causal, pad, bias):
        a = self.attn(x, x, x, attn_mask=causal, key_padding_mask=pad, need_weights=False)[0]
        return a, self.attn(x, x, x, attn_mask=bias, need_weights=False)[0]


class Net(tnn.Module):
    def __init__(self):
        super().__init__()
        self.emb = tnn.Embedding(50, 48)
        self.ln = tnn.LayerNorm(48)
        self.rms = RMSNorm(48, 1e-6)

    def forward(self, ids):
        h = self.ln(self.emb(ids.long()))
        return h, self.rms(h * 3 + 1)


class Block(tnn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv1 = tnn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False)
        self.bn1 = tnn.BatchNorm2d(cout)
        self.conv2 = tnn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = tnn.BatchNorm2d(cout)
        self.down = tnn.Sequential(tnn.Conv2d(cin, cout, 1, stride=2, bias=False), tnn.BatchNorm2d(cout))

    def forward(self, x):
        h = torch.relu(self.bn1(self.conv1(x)))
        h = self.bn2(self.conv2(h))
        return torch.relu(h + self.down(x))


def half_linear():
    """Linear(16, 8) whose weight is bf16-exact and bias f16-exact; file entries to match."""
    m = tnn.Linear(16, 8)
    with torch.no_grad():
        m.weight.copy_(m.weight.to(torch.bfloat16).float())
        m.bias.copy_(m.bias.half().float())
    files = {"weight": ("BF16", m.weight.detach().to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)),
             "bias": m.bias.detach().half().numpy()}
    return m, files


def twins():
    """name -> (module, [(input name, shape, dtype, generator)], forward, file entries or None)."""
    torch.manual_seed(1234)
    seq = tnn.Sequential
    hl, hl_files = half_linear()
    return {
        "tm_mlp": (randomise(seq(tnn.Linear(32, 64), tnn.ReLU(), tnn.Linear(64, 48), tnn.GELU(),
                                 tnn.Linear(48, 10), tnn.Tanh())), [("x", [4, 32], "f32", "n")], None, None),
        "tm_convbn": (randomise(seq(tnn.Conv2d(3, 8, 3, padding=1), tnn.BatchNorm2d(8), tnn.ReLU(),
                                    tnn.Conv2d(8, 16, 3, stride=2, padding=1, groups=2), tnn.BatchNorm2d(16),
                                    tnn.ReLU(), tnn.MaxPool2d(2),
                                    tnn.Conv2d(16, 16, 3, padding=2, dilation=2, bias=False), tnn.SiLU(),
                                    tnn.AvgPool2d(2), tnn.Flatten(), tnn.Linear(64, 10))),
                      [("x", [2, 3, 16, 16], "f32", "n")], None, None),
        "tm_encoder": (randomise(seq(
            tnn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation="gelu", batch_first=True),
            tnn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation="relu", batch_first=True,
                                        norm_first=True, layer_norm_eps=1e-6))),
            [("x", [2, 7, 32], "f32", "n")], None, None),
        "tm_mha": (randomise(Attn()), [("q", [2, 5, 24], "f32", "n"), ("mem", [2, 9, 24], "f32", "n")], None, None),
        "tm_mha_mask": (randomise(Masked()), [
            ("x", [2, 6, 16], "f32", "n"), ("causal", [6, 6], "bool", np.triu(np.ones((6, 6), bool), 1)),
            ("pad", [2, 6], "bool", np.array([[0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 1, 1]], bool)),
            ("bias", [6, 6], "f32", "n")], None, None),
        "tm_norms": (randomise(Net()), [("ids", [2, 7], "i32", "ids50")], None, None),
        "tm_resblock": (randomise(Block(8, 16)), [("x", [1, 8, 10, 10], "f32", "n")], None, None),
        "tm_halfweights": (hl, [("x", [3, 16], "f32", "n")], lambda m, x: torch.sigmoid(m(x)), hl_files),
    }


def draw(name, specs):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    out = []
    for (_, shape, dt, g) in specs:
        if isinstance(g, np.ndarray):
            out.append(g.reshape(shape))
        elif g == "ids50":
            out.append(rng.integers(0, 50, shape).astype(np.int32))
        elif dt == "i32":
            out.append(rng.integers(0, 2, shape).astype(np.int32))
        elif dt == "bool":
            out.append(rng.random(shape) < 0.5)
        else:
            out.append(rng.standard_normal(shape).astype(np.float32))
    return out


def build_and_run(script, name, inputs, d, input_names):
    """kiln build + C driver + kiln run; returns (errors, meta, C outputs, interp outputs)."""
    out = os.path.join(d, "out")
    errs, c_res, i_res, meta = [], None, None, None
    ok, why = kt.kiln_build(script, out)
    if ok:
        meta = kt.load_meta(out, name)
        probs = kt.check_meta(meta, name) + kt.check_plan(meta)
        if probs:
            errs.append("; ".join(probs))
        ok, why = kt.compile_driver(out, name, meta)
        if ok:
            ok, why, c_res = kt.run_driver(out, name, meta, inputs)
    if not ok:
        errs.append(why)
    ok, why, got = kt.kiln_run(script, list(zip(input_names, inputs)), os.path.join(d, "interp"))
    if ok and meta:
        i_res = [got.get(o["name"]) for o in meta["outputs"]]
        if any(r is None for r in i_res):
            errs.append("kiln run --save wrote no file for some output")
            i_res = None
    elif not ok:
        errs.append(why)
    return errs, meta, c_res, i_res


def run_twin(work, name, module, specs, forward, files):
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    script = os.path.join(d, name + ".lua")
    shutil.copy(os.path.join(kt.ROOT, "tests", "models", name + ".lua"), script)
    module.eval()
    sd = {k: v.detach().numpy().astype(np.float32) for k, v in module.state_dict().items()
          if not k.endswith("num_batches_tracked")}        # an int64 counter, unused at inference
    kt.write_safetensors(os.path.join(d, name + ".safetensors"), files or sd)
    inputs = draw(name, specs)
    errs, meta, c_res, i_res = build_and_run(script, name, inputs, d, [s[0] for s in specs])

    with torch.no_grad():
        m64 = module.double()
        targs = [torch.from_numpy(a.astype(np.float64)) if a.dtype == np.float32 else torch.from_numpy(a)
                 for a in inputs]
        ref = forward(m64, *targs) if forward else m64(*targs)
    refs = [r.numpy() for r in (ref if isinstance(ref, tuple) else (ref,))]
    worst = 0.0
    if meta:
        tol = kt.Tol.model(MODEL_TOL)
        if len(meta["outputs"]) != len(refs):
            errs.append("%d outputs, the twin has %d" % (len(meta["outputs"]), len(refs)))
        for k, (io, r) in enumerate(zip(meta["outputs"], refs)):
            b = tol.bound(r, inputs)
            for tag, res in (("C", c_res), ("interp", i_res)):
                if res is not None:
                    ok, ratio, msg = kt.compare(res[k], r, io["dtype"], b)
                    worst = max(worst, ratio)
                    if not ok:
                        errs.append("%s vs torch, output %s: %s" % (tag, io["name"], msg))
            if c_res is not None and i_res is not None:
                ok, _, msg = kt.compare(c_res[k], i_res[k].astype(np.float64), io["dtype"], 2 * b)
                if not ok:
                    errs.append("C vs interp, output %s: %s" % (io["name"], msg))
    kt.report(not errs, "models/twin/%s" % name, " | ".join(errs) if errs else "err/tol %.2g" % worst)
    if meta:
        used = {w["name"] for w in meta.get("weights", []) if w.get("kind", "weight") == "weight"}
        params = sorted(used)
        missing = sorted(k for k in sd if k not in used)
        extra = sorted(k for k in params if k not in sd)
        probs = (["initialised, not loaded: " + " ".join(extra)] if extra else []) + \
                (["in the file but unused: " + " ".join(missing)] if missing else [])
        kt.report(not probs, "models/twin/%s/names" % name, "; ".join(probs))


def run_repo_model(work, path):
    name = os.path.splitext(os.path.basename(path))[0]
    d = os.path.join(work, "repo_" + name)
    os.makedirs(d, exist_ok=True)
    out = os.path.join(d, "out")
    ok, why = kt.kiln_build(path, out)
    if not ok:
        return kt.report(False, "models/repo/%s" % name, why)
    meta = kt.load_meta(out, name)
    specs = [(io["name"], io["shape"], io["dtype"], "n") for io in meta["inputs"]]
    inputs = draw(name, specs)
    errs, meta, c_res, i_res = build_and_run(path, name, inputs, d, [s[0] for s in specs])
    worst = 0.0
    if c_res is not None and i_res is not None:
        for k, io in enumerate(meta["outputs"]):
            r = i_res[k].astype(np.float64) if io["dtype"] == "f32" else i_res[k]
            b = kt.Tol.model(MODEL_TOL).bound(r, inputs) if io["dtype"] == "f32" else 0
            ok, ratio, msg = kt.compare(c_res[k], r, io["dtype"], b)
            worst = max(worst, ratio)
            if not ok:
                errs.append("C vs interp, output %s: %s" % (io["name"], msg))
    kt.report(not errs, "models/repo/%s" % name, " | ".join(errs) if errs else "err/tol %.2g" % worst)


def main():
    work, pats = sys.argv[1], sys.argv[2:]
    sel = lambda n: not pats or any(p in n for p in pats)  # noqa: E731
    tw = twins()
    jobs = [(n,) + v for n, v in tw.items() if sel(n)]
    kt.pmap(lambda j: run_twin(work, *j), jobs, jobs=2)
    here = os.path.join(kt.ROOT, "tests", "models")
    for f in sorted(glob.glob(os.path.join(here, "tm_*.lua"))):
        n = os.path.splitext(os.path.basename(f))[0]
        if n not in tw and sel(n):
            kt.report(False, "models/twin/%s" % n, "tests/models/%s.lua has no PyTorch twin in run_models.py" % n)
    repo = sorted(glob.glob(os.path.join(kt.ROOT, "models", "*.lua")))
    if not repo:
        kt.report(False, "models/repo", "no models/*.lua found")
    kt.pmap(lambda p: run_repo_model(work, p), [p for p in repo if sel(os.path.basename(p))], jobs=2)


if __name__ == "__main__":
    main()

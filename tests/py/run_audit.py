"""run_audit.py -- t_audit: issue 12's list of "ops and modules that users reached for and
did not find", item by item, on every target against PyTorch.

Each family model tests/audit/<f>.lua (one per family, so the suite stays fast) has one
output per item. For each family:
  1. `kiln build` for C, Metal and Core ML (iOS15, fp32); a build that fails is a result
     for every item of the family on that target (the error line is the reason);
  2. the Metal emulator (tests/metal/mkemu.sh) runs the model on its own seeded inputs
     (f32 uniform in [-1, 1), i32 in [0, 4), bool 0/1) and saves them: those inputs feed
     every other target and PyTorch (numpy's draw of the same kinds when Metal did not build);
  3. the interpreter (`kiln run`), the generated C (tests/ops/kt_driver.c) and Core ML
     (tests/coreml/milrun: validation and evaluation of the package) run on them;
  4. the family's PyTorch twin (below; float64, fed the weights of Kiln's own build by
     name through bench/peers.load_kiln_weights) gives the reference, and every output of
     every target is compared with it: f32 within 1e-5 * max(1, max |ref|) + 1e-5 |ref|
     (docs/testing.md's whole-model bound, here per output), i32 and bool exactly.

A row of the table is an issue item; a cell is `pass`, `FAIL (reason)` or, for what a
target cannot run, `error: <the build's message>` when that error is the expected one
(EXPECTED_ERRORS: it must name the op or input, the target and the Lua line). Prints one
PASS/FAIL line per (item, target) (tests/run.sh protocol); with --table FILE also writes
the markdown table docs/ops.md includes ("Issue 12 audit").

usage: /usr/bin/python3 tests/py/run_audit.py WORK MILRUN [--table FILE] [FAMILY...]
"""
import json
import math
import os
import re
import shutil
import struct
import sys

import numpy as np
import torch
import torch.nn as tnn
import torch.nn.functional as F

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kt  # noqa: E402
sys.path.insert(0, os.path.join(kt.ROOT, "bench"))
import peers  # noqa: E402

torch.set_num_threads(1)
np.seterr(all="ignore")
TARGETS = ("interp", "c", "metal", "coreml")
RTOL = ATOL = 1e-5

# ---- the items: (the item as the issue words it, family, outputs) ----
ITEMS = [
    ("clamp / clip", "act", ["clamp", "clip"]),
    ("ReLU6 (relu6, nn.ReLU6)", "act", ["relu6", "nn_ReLU6"]),
    ("Hardtanh (hardtanh, nn.Hardtanh)", "act", ["hardtanh", "nn_Hardtanh"]),
    ("hardswish", "act", ["hardswish"]),
    ("hardsigmoid", "act", ["hardsigmoid"]),
    ("leaky_relu, nn.LeakyReLU", "act", ["leaky_relu", "nn_LeakyReLU"]),
    ("elu", "act", ["elu"]),
    ("softplus", "act", ["softplus"]),
    ("mish", "act", ["mish"]),
    ("erf", "act", ["erf"]),
    ("sin, cos", "act", ["sin", "cos"]),
    ("floor, ceil, round", "act", ["floor", "ceil", "round"]),
    ("sign", "act", ["sign"]),
    ("reciprocal", "act", ["reciprocal"]),
    ("log_softmax", "act", ["log_softmax"]),
    ("logsumexp", "act", ["logsumexp"]),
    ("nn.GELU(approximate='tanh')", "act", ["nn_GELU_tanh"]),
    ("pad constant", "spatial", ["pad_constant"]),
    ("pad reflect", "spatial", ["pad_reflect"]),
    ("pad replicate", "spatial", ["pad_replicate"]),
    ("conv1d, nn.Conv1d", "spatial", ["conv1d", "nn_Conv1d"]),
    ("conv_transpose1d", "spatial", ["conv_transpose1d"]),
    ("conv_transpose2d, nn.ConvTranspose2d", "spatial", ["conv_transpose2d", "nn_ConvTranspose2d"]),
    ("interpolate nearest", "spatial", ["interp_nearest"]),
    ("interpolate bilinear", "spatial", ["interp_bilinear"]),
    ("interpolate bilinear align_corners, nn.Upsample", "spatial", ["interp_bilinear_ac", "nn_Upsample"]),
    ("adaptive average pooling", "spatial", ["adaptive_avg_pool2d"]),
    ("group_norm, nn.GroupNorm", "spatial", ["group_norm", "nn_GroupNorm"]),
    ("instance_norm", "spatial", ["instance_norm"]),
    ("nn.BatchNorm1d", "spatial", ["nn_BatchNorm1d"]),
    ("i32 arithmetic (add sub mul max min neg abs remainder)", "ints",
     ["i32_add", "i32_sub", "i32_mul", "i32_max", "i32_min", "i32_neg_abs", "i32_remainder"]),
    ("i32 comparisons", "ints", ["i32_cmp_lt", "i32_cmp_ge", "i32_cmp_eq", "i32_cmp_ne"]),
    ("logical and / or / not / xor", "ints", ["logical_and", "logical_or", "logical_not", "logical_xor"]),
    ("i64 inputs (token ids as PyTorch exports them)", "i64", ["i64_ids"]),
    ("arange", "tensor", ["arange"]),
    ("zeros / ones / full", "tensor", ["zeros_ones_full"]),
    ("tril / triu", "tensor", ["tril", "triu"]),
    ("cumsum", "tensor", ["cumsum"]),
    ("expand / broadcast_to", "tensor", ["expand", "broadcast_to"]),
    ("repeat", "tensor", ["repeat"]),
    ("flip", "tensor", ["flip"]),
    ("split with sizes", "tensor", ["split_sizes"]),
    ("select, negative indices", "tensor", ["select_neg"]),
    ("torch.gather (per-element)", "tensor", ["torch_gather"]),
    ("scatter / index_put", "tensor", ["scatter", "index_put"]),
    ("topk / sort", "tensor", ["topk", "sort", "sort_idx"]),
    ("argmax / argmin", "tensor", ["argmax", "argmin"]),
    ("min and prod reductions", "tensor", ["amin", "prod"]),
    ("var / std", "tensor", ["var", "std"]),
    ("einsum", "tensor", ["einsum"]),
    ("nn.LSTM", "modules", ["nn_LSTM", "nn_LSTM_state"]),
    ("nn.GRU", "modules", ["nn_GRU", "nn_GRU_state"]),
    ("nn.TransformerDecoderLayer", "modules", ["nn_TransformerDecoderLayer"]),
    ("strict load accepts num_batches_tracked; parameters as fields (weight tying); "
     "nn.Sequential takes plain functions", "habits", ["tied_and_sequential"]),
    ("Lua booleans in kiln.constant give bool tensors", "habits", ["bool_constant"]),
    ("kiln.gather(x, dim, index) is torch.gather, not index_select", "habits", ["gather_torch_order"]),
    ("concat of 40 inputs (Metal binds 31 buffers)", "tlimits", ["concat_40"]),
    ("stack of 33 inputs", "tlimits", ["stack_33"]),
    ("rank-6 values (Core ML stops at rank 5)", "tlimits", ["rank6"]),
    ("dilated conv whose weight went through a reshape", "tlimits",
     ["dilated_conv_reshaped_w", "dilated_conv2d_reshaped_w"]),
]

# What a target does not run: family -> target -> (kind, a regex the build's one-line
# error must match: the Lua line, the target, the op or input). kind "limit": the target
# cannot (docs/ops.md says why); "gap": it could, Kiln does not yet. Both print PASS when
# the error is exactly that one line, and the table says which it is.
EXPECTED_ERRORS = {}


# ---- the PyTorch twins: inputs (float64 / int64 tensors) and Kiln's weights -> outputs ----

def d(a):
    """A float64 (or int64) torch tensor of a numpy array."""
    a = np.asarray(a)
    return torch.from_numpy(a.astype(np.float64 if a.dtype.kind == "f" else np.int64))


def ref_act(x, w):
    x = d(x["x"])
    v = x * 4
    return {
        "clamp": v.clamp(-0.5, 2), "clip": torch.clip(v, None, 1.5), "relu6": F.relu6(v * 2),
        "hardtanh": F.hardtanh(v, -2, 2.5), "hardswish": F.hardswish(v), "hardsigmoid": F.hardsigmoid(v),
        "leaky_relu": F.leaky_relu(v, 0.2), "elu": F.elu(v, 0.7), "softplus": F.softplus(v * 6, 1.5, 10),
        "mish": F.mish(v), "erf": torch.erf(v), "sin": torch.sin(v), "cos": torch.cos(v),
        "floor": torch.floor(v), "ceil": torch.ceil(v), "round": torch.round(v), "sign": torch.sign(x),
        "reciprocal": torch.reciprocal(x + 1.5), "log_softmax": F.log_softmax(v, -1),
        "logsumexp": torch.logsumexp(v, 1, keepdim=True), "nn_ReLU6": tnn.ReLU6()(v * 2),
        "nn_Hardtanh": tnn.Hardtanh(-1.5, 0.5)(v), "nn_LeakyReLU": tnn.LeakyReLU(0.3)(v),
        "nn_GELU_tanh": tnn.GELU(approximate="tanh")(v),
    }


def ref_spatial(i, w):
    x, s = d(i["x"]), d(i["s"])
    W = {k: d(v) for k, v in w.items()}
    ct = tnn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1).double()
    c1 = tnn.Conv1d(4, 5, 3, padding=1).double()
    gn = tnn.GroupNorm(2, 4).double()
    bn = tnn.BatchNorm1d(4).double().eval()
    for m, p in ((ct, "ct"), (c1, "c1"), (gn, "gn"), (bn, "bn")):
        load(m, W, p)
    return {
        "pad_constant": F.pad(x, (1, 2, 2, 1), "constant", 0.5), "pad_reflect": F.pad(x, (2, 1, 1, 3), "reflect"),
        "pad_replicate": F.pad(s, (3, 2), "replicate"),
        "conv1d": F.conv1d(s, W["w1"], None, stride=2, padding=1, dilation=2, groups=2),
        "conv_transpose1d": F.conv_transpose1d(s, W["wt1"], None, stride=2, padding=1, output_padding=1),
        "conv_transpose2d": F.conv_transpose2d(x, W["wt2"], W["bt2"], stride=(2, 1), padding=(1, 0), groups=2),
        "interp_nearest": F.interpolate(x, size=(7, 9), mode="nearest"),
        "interp_bilinear": F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False),
        "interp_bilinear_ac": F.interpolate(x, size=(8, 4), mode="bilinear", align_corners=True),
        "adaptive_avg_pool2d": F.adaptive_avg_pool2d(x, (3, 4)),
        "group_norm": F.group_norm(x, 2, W["gw"], W["gb"]), "instance_norm": F.instance_norm(x),
        "nn_Conv1d": c1(s), "nn_ConvTranspose2d": ct(x),
        "nn_Upsample": tnn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)(x),
        "nn_GroupNorm": gn(x), "nn_BatchNorm1d": bn(s),
    }


def wrap32(t):
    """int64 values wrapped to int32 (Kiln's i32 arithmetic wraps, as torch.int32's does)."""
    return torch.from_numpy(t.numpy().astype(np.int32).astype(np.int64))


def ref_ints(i, w):
    a, b = d(i["a"]), d(i["b"])
    p, q = wrap32(a * 3 - 5), wrap32(b - 2)
    m, n = p > 0, q <= 0
    return {
        "i32_add": p + q, "i32_sub": p - q * 7, "i32_mul": p * q, "i32_max": torch.maximum(p, q),
        "i32_min": torch.minimum(p, q), "i32_neg_abs": -p + torch.abs(q), "i32_remainder": torch.remainder(p, 3),
        "i32_cmp_lt": p < q, "i32_cmp_ge": p >= q, "i32_cmp_eq": p == q, "i32_cmp_ne": p != 1,
        "logical_and": torch.logical_and(m, n), "logical_or": torch.logical_or(m, n),
        "logical_not": torch.logical_not(p), "logical_xor": torch.logical_xor(m, q),
    }


def ref_i64(i, w):
    ids = d(i["ids"])
    return {"i64_ids": ids * 2 + 1}


def ref_tensor(i, w):
    x, y, idx = d(i["x"]), d(i["y"]), d(i["i"])
    p1, p2, p3 = torch.split(x, [1, 3, 2], 1)
    tv, ti = torch.topk(x, 3, 1)
    sv, si = torch.sort(y, dim=1, descending=True, stable=True)
    return {
        "arange": torch.arange(2, 8) * 3,
        "zeros_ones_full": x + torch.zeros(4, 6) * 2 + torch.ones(1, 6) + torch.full((4, 1), 0.25),
        "tril": torch.tril(x, 1), "triu": torch.triu(x, -1), "cumsum": torch.cumsum(y, 1),
        "expand": y.sum(2, keepdim=True).expand(2, 2, 3, 4), "broadcast_to": torch.broadcast_to(x.select(0, 1), (3, 6)),
        "repeat": x.repeat(2, 1, 3), "flip": torch.flip(y, (0, 2)),
        "split_sizes": p1 * 2 + p3.sum(1, keepdim=True) + p2.amax(1, keepdim=True),
        "select_neg": y.select(1, -1) + y.select(-1, -2).sum(1, keepdim=True),
        "torch_gather": torch.gather(x, 1, idx), "scatter": torch.scatter(x, 1, idx, y.reshape(4, 6)),
        "index_put": x.index_put((torch.tensor([3, 0]),), y.reshape(4, 6)[0:2]),
        "topk": tv + ti, "sort": sv, "sort_idx": si, "argmax": x.argmax(1), "argmin": y.argmin(2, keepdim=True),
        "amin": y.amin((0, 2)), "prod": (x + 1.5).prod(1),
        "var": y.var(2) * 2 + y.var(2, unbiased=False), "std": x.std(0),
        "einsum": torch.einsum("bij,jk->bik", y, x[:, 0:5]),
    }


def ref_modules(i, w):
    s, tgt, mem = d(i["s"]), d(i["tgt"]), d(i["mem"])
    W = {k: d(v) for k, v in w.items()}
    lstm = tnn.LSTM(5, 6, num_layers=2).double()
    gru = tnn.GRU(5, 4, batch_first=True, bidirectional=True).double()
    dec = tnn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True).double().eval()
    for m, p in ((lstm, "lstm"), (gru, "gru"), (dec, "dec")):
        load(m, W, p)
    out, (h, c) = lstm(s)
    gout, gh = gru(s)
    return {"nn_LSTM": out, "nn_LSTM_state": h + c, "nn_GRU": gout, "nn_GRU_state": gh,
            "nn_TransformerDecoderLayer": dec(tgt, mem)}


class Habits(tnn.Module):
    """The twin of tests/audit/habits.lua's Net."""

    def __init__(self):
        super().__init__()
        self.wte = tnn.Embedding(10, 8)
        self.bn = tnn.BatchNorm1d(8)
        self.seq = tnn.Sequential(tnn.ReLU(), tnn.Linear(8, 8), tnn.Tanh())

    def forward(self, ids, x):
        return F.linear(self.wte(ids) + self.seq(self.bn(x)), self.wte.weight)


def habits_twin():
    """The seeded twin, batchnorm statistics random and num_batches_tracked counted."""
    torch.manual_seed(12)
    m = Habits().double()
    with torch.no_grad():
        m.bn.running_mean.copy_(torch.randn(8) * 0.3)
        m.bn.running_var.copy_(torch.rand(8) + 0.5)
        m.bn.num_batches_tracked.fill_(17)
    return m.eval()


def write_habits_weights(path):
    """habits.safetensors: the twin's whole state_dict as PyTorch saves it (F32, and the I64
    num_batches_tracked no Kiln parameter uses)."""
    sd = habits_twin().state_dict()
    header, blob = {}, b""
    for k in sorted(sd):
        v = sd[k].numpy()
        raw = v.astype("<i8" if v.dtype.kind == "i" else "<f4").tobytes()
        header[k] = {"dtype": "I64" if v.dtype.kind == "i" else "F32", "shape": list(v.shape),
                     "data_offsets": [len(blob), len(blob) + len(raw)]}
        blob += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + blob)


def ref_habits(i, w):
    ids, x, idx = d(i["ids"]), d(i["x"]), d(i["idx"])
    m = habits_twin()
    mask = torch.tensor([True, False, False, True, True, False, True, False])
    return {"tied_and_sequential": m(ids, x), "bool_constant": torch.where(mask, x, -x),
            "gather_torch_order": torch.gather(x, 1, idx)}


def ref_tlimits(i, w):
    x, z, s, q = d(i["x"]), d(i["z"]), d(i["s"]), d(i["q"])
    parts = [x * k for k in range(1, 41)]
    r6 = torch.exp(z.reshape(2, 1, 2, 3, 2, 2) * 2 + 1) * z[0:1].reshape(1, 2, 3, 2, 2)
    return {"concat_40": torch.cat(parts, 1), "stack_33": torch.stack(parts[:33], 1),
            "rank6": r6.reshape(2, 6, 2, 2) - z,
            "dilated_conv_reshaped_w": F.conv1d(s, d(w["w"]).reshape(6, 4, 3), dilation=3, padding=3),
            "dilated_conv2d_reshaped_w": F.conv2d(q, d(w["w2"]).reshape(3, 4, 3, 3), dilation=2, padding=2)}


REFS = {"act": ref_act, "spatial": ref_spatial, "ints": ref_ints, "i64": ref_i64, "tensor": ref_tensor,
        "modules": ref_modules, "habits": ref_habits, "tlimits": ref_tlimits}


def load(module, W, prefix):
    """Copies Kiln's weights named prefix.<state_dict name> into module (buffers too);
    every state_dict entry but num_batches_tracked must be found."""
    sd = module.state_dict()
    for k in sd:
        if k.endswith("num_batches_tracked"):
            continue
        name = prefix + "." + k
        if name not in W:
            raise KeyError("no Kiln weight %s" % name)
        sd[k] = W[name].reshape(sd[k].shape)
    module.load_state_dict(sd)


# ---- running the targets ----

def first_error(text):
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]
    err = [ln for ln in lines if "error" in ln]
    return (err or lines or ["(no message)"])[0]


def make_inputs(meta):
    """numpy's draw of the Metal harness's kinds of inputs (used when Metal did not build)."""
    rng = np.random.default_rng(12)
    out = []
    for io in meta["inputs"]:
        shp = tuple(io["shape"])
        if io["dtype"] == "f32":
            out.append(rng.uniform(-1, 1, shp).astype(np.float32))
        elif io["dtype"] in ("i32", "i64"):
            out.append(rng.integers(0, 4, shp).astype(kt.NP_DTYPE[io["dtype"]]))
        else:
            out.append(rng.integers(0, 2, shp).astype(np.bool_))
    return out


def run_metal(fdir, model, meta):
    """Builds and runs the Metal emulator harness; returns (ok, reason, inputs, outputs)."""
    d_ = os.path.join(fdir, "metal")
    rc, out, err = kt.run(["sh", os.path.join(kt.ROOT, "tests/metal/mkemu.sh"), d_, model, os.path.join(d_, "emu")])
    if rc:
        return False, "emulator build: " + first_error(out + err), None, None
    save = os.path.join(d_, "save")
    os.makedirs(save, exist_ok=True)
    rc, out, err = kt.run([os.path.join(d_, "emu"), os.path.join(d_, model + ".weights"), "--seed", "12",
                           "--orders", "fwd,rand", "--save", save])
    if rc:
        return False, "emulator: " + first_error(out + err), None, None
    ins = [np.fromfile(os.path.join(save, "in%d.bin" % k), dtype=kt.NP_DTYPE[io["dtype"]]).reshape(io["shape"])
           for k, io in enumerate(meta["inputs"])]
    outs = {io["name"]: np.fromfile(os.path.join(save, "out%d.bin" % k), dtype=kt.NP_DTYPE[io["dtype"]])
            .reshape(io["shape"]) for k, io in enumerate(meta["outputs"])}
    return True, "", ins, outs


def run_coreml(fdir, model, meta, ins, milrun):
    """milrun on the package: returns (ok, reason, outputs)."""
    pkg = os.path.join(fdir, "coreml", model + ".mlpackage")
    cin, got = os.path.join(fdir, "cin"), os.path.join(fdir, "cgot")
    os.makedirs(cin, exist_ok=True)
    os.makedirs(got, exist_ok=True)
    for io, a in zip(meta["inputs"], ins):
        a = a.reshape(a.shape or (1,))
        if io["dtype"] == "i64":    # the package declares it int32: narrowed as kiln_coreml_call does
            if a.min(initial=0) < -2**31 or a.max(initial=0) >= 2**31:
                return False, "i64 input %s outside int32 (the wrapper's E_RANGE)" % io["name"], None
            a = a.astype(np.int32)
        np.save(os.path.join(cin, io["name"] + ".npy"), a.astype(np.int32) if io["dtype"] == "bool" else a)
    rc, out, err = kt.run([milrun, pkg, "run", cin, got])
    if rc:
        return False, "milrun: " + first_error(err + out), None
    outs = {}
    for io in meta["outputs"]:
        a = np.load(os.path.join(got, io["name"] + ".npy"))
        outs[io["name"]] = a.reshape(io["shape"]).astype(kt.NP_DTYPE[io["dtype"]])
    return True, "", outs


def check(got, ref, dtype):
    """'' when got matches the float64 reference, else why not."""
    ref = ref.detach().numpy() if isinstance(ref, torch.Tensor) else np.asarray(ref)
    if got.shape != ref.shape:
        return "shape %s, PyTorch %s" % (list(got.shape), list(ref.shape))
    if dtype != "f32":
        bad = got.astype(np.int64) != ref.astype(np.int64)
        return "" if not bad.any() else "%d of %d values differ" % (int(bad.sum()), bad.size)
    g, r = got.astype(np.float64), ref.astype(np.float64)
    scale = max(1.0, float(np.abs(r).max()))
    err = np.abs(g - r)
    bound = ATOL * scale + RTOL * np.abs(r)
    if not np.all(np.isfinite(g)) or (err > bound).any():
        return "max |error| %.3g (scale %.3g, bound %.0e x scale + %.0e |ref|)" % (float(np.nanmax(err)), scale, ATOL, RTOL)
    return ""


def check_selftest():
    """The comparison itself can fail: a result 3e-5 off in one element, one flipped bool,
    one wrong index and a wrong shape are each rejected; the exact values pass."""
    r = torch.linspace(-2, 2, 12, dtype=torch.float64).reshape(3, 4)
    off = r.numpy().astype(np.float32)
    off[1, 2] += 3e-5
    b = np.array([True, False, True])
    cases = [(check(r.numpy().astype(np.float32), r, "f32") == "", "exact f32 passes"),
             (check(off, r, "f32") != "", "an f32 3e-5 off is rejected"),
             (check(~b, torch.from_numpy(b), "bool") != "", "flipped bools are rejected"),
             (check(np.array([0, 2], np.int32), torch.tensor([0, 1]), "i32") != "", "a wrong index is rejected"),
             (check(r.numpy().astype(np.float32).reshape(4, 3), r, "f32") != "", "a wrong shape is rejected")]
    for ok, what in cases:
        kt.report(ok, "audit/selftest: " + what)


def family(fam, work, milrun):
    """{output: {target: '' | reason}} and {target: build error or None} for one family."""
    fdir = os.path.join(work, fam)
    os.makedirs(fdir, exist_ok=True)
    script = os.path.join(fdir, fam + ".lua")
    shutil.copy(os.path.join(kt.ROOT, "tests", "audit", fam + ".lua"), script)
    if fam == "habits":
        write_habits_weights(os.path.join(fdir, "habits.safetensors"))
    built = {}
    for t, extra in (("c", []), ("metal", ["--target", "metal"]), ("coreml", ["--target", "coreml"])):
        rc, out, err = kt.run([kt.KILN, "build", script, "-o", os.path.join(fdir, t)] + extra, cwd=fdir)
        built[t] = None if rc == 0 else first_error(err + out)
    res = {}
    if built["c"]:
        return {}, built, "C build: " + built["c"]
    meta = kt.load_meta(os.path.join(fdir, "c"), fam)
    outs = {t: None for t in TARGETS}
    why = {t: built.get(t) for t in TARGETS}
    ins = None
    if not built["metal"]:
        ok, r, ins, mo = run_metal(fdir, fam, meta)
        outs["metal"], why["metal"] = (mo, None) if ok else (None, r)
    if ins is None:
        ins = make_inputs(meta)
    ok, r = kt.compile_driver(os.path.join(fdir, "c"), fam, meta)
    if ok:
        ok, r, co = kt.run_driver(os.path.join(fdir, "c"), fam, meta, ins)
    outs["c"], why["c"] = ({io["name"]: a for io, a in zip(meta["outputs"], co)}, None) if ok else (None, r)
    ok, r, io_ = kt.kiln_run(script, [(io["name"], a) for io, a in zip(meta["inputs"], ins)],
                             os.path.join(fdir, "interp"), cwd=fdir)
    outs["interp"], why["interp"] = (io_, None) if ok else (None, r)
    if not built["coreml"]:
        ok, r, mo = run_coreml(fdir, fam, meta, ins, milrun)
        outs["coreml"], why["coreml"] = (mo, None) if ok else (None, r)
    _, weights = peers.load_kiln_weights(os.path.join(fdir, "c"), fam)
    ref = REFS[fam]({io["name"]: a for io, a in zip(meta["inputs"], ins)}, weights)
    dtypes = {io["name"]: io["dtype"] for io in meta["outputs"]}
    for name in dtypes:
        res[name] = {}
        for t in TARGETS:
            if outs[t] is None:
                res[name][t] = why[t]
            elif name not in outs[t]:
                res[name][t] = "no output %s" % name
            else:
                res[name][t] = check(outs[t][name], ref[name], dtypes[name])
    return res, built, None


def main():
    args = sys.argv[1:]
    work, milrun = args[0], args[1]
    table, fams = None, []
    rest = args[2:]
    while rest:
        if rest[0] == "--table":
            table, rest = rest[1], rest[2:]
        else:
            fams.append(rest.pop(0))
    if table and fams:
        sys.exit("run_audit.py: --table needs every family (the table has a row per item)")
    wanted = fams or sorted({f for _, f, _ in ITEMS})
    check_selftest()
    results = {}
    for fam in wanted:
        try:
            results[fam] = family(fam, work, milrun)
        except Exception as e:   # a broken twin fails its family, not the suite
            results[fam] = ({}, {}, "%s: %s" % (type(e).__name__, e))
    rows = []
    for item, fam, names in ITEMS:
        if fam not in results:
            continue
        res, built, broken = results[fam]
        cells = []
        for t in TARGETS:
            expect = EXPECTED_ERRORS.get(fam, {}).get(t)
            if broken:
                ok, cell = False, "FAIL (%s)" % broken
            elif expect:
                msg = built.get(t) or ""
                ok = bool(re.match(expect[1], msg))
                cell = "error (%s): `%s`" % (expect[0], msg) if ok else "FAIL (expected an error, got %s)" % (msg or "a build")
            else:
                bad = ["%s: %s" % (n, res.get(n, {}).get(t, "not run")) for n in names if res.get(n, {}).get(t, "x")]
                ok = not bad
                cell = "pass" if ok else "FAIL (%s)" % "; ".join(bad)
            kt.report(ok, "audit/%s/%s" % (re.sub(r"[^a-z0-9]+", "_", item.lower()).strip("_")[:60], t),
                      cell if (not ok or expect) else "")
            cells.append(cell)
        rows.append((item, cells))
    if table:
        write_table(table, rows)


BEGIN, END = "<!-- audit table: tests/t_audit.sh writes it (AUDIT_TABLE=docs/ops.md) -->", "<!-- end of audit table -->"


def write_table(path, rows):
    """The item x target table, between the BEGIN/END markers of path when it has them
    (docs/ops.md), else as the whole file."""
    text = "| issue 12 item | interpreter | C | Metal (emulator) | Core ML (milrun) |\n|---|---|---|---|---|\n"
    for item, cells in rows:
        text += "| %s | %s |\n" % (item, " | ".join(c.replace("|", "\\|") for c in cells))
    old = open(path).read() if os.path.exists(path) else ""
    if BEGIN in old and END in old:
        text = old[:old.index(BEGIN) + len(BEGIN)] + "\n" + text + old[old.index(END):]
    with open(path, "w") as f:
        f.write(text)


main()

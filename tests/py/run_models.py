"""run_models.py -- t_models: whole models, generated C against PyTorch and the interpreter.

Part 1, twins: each tests/models/tm_*.lua has a PyTorch twin built below. The twin's
weights (random, seeded; batchnorm running statistics random too) are written as
safetensors by hand beside a copy of the script, the script loads them with kiln.load under
the state_dict names, and the outputs of the generated C and of the interpreter are compared
with the twin run in float64 on the same inputs. A separate check per model verifies that
every weight Kiln used came from the file (a misnamed parameter would otherwise be silently
initialised) and that every state_dict tensor was used.

Part 2, every models/*.lua: generated C against the interpreter, and against its PyTorch
twin from bench/peers.py (TORCH: real torch.nn modules, shared with `make bench`) filled by
name with the weights of Kiln's own build (<m>.weights through <m>.json). The C runs on
REPO_SEEDED seeded inputs, plus real data where DATA has some (the bundled Fashion-MNIST
samples for mlp, whose predicted classes must equal the twin's); the twin runs in float64
(the bound) and in float32 (the yardstick of the .../rounding line). Weights the script
loads from a safetensors file must equal that file's values, read here with numpy. A
models/*.lua without a twin in peers.TORCH is a FAIL, never a skip. models/stories_fixed.lua,
the stateless fixed-length TinyStories, uses the stories twin.

A models/*.lua with state or entry points (models/stories.lua) has no single forward to
run on random inputs: here its weights are checked (names against the twin, values
against the file); its outputs against PyTorch are t_state's (state/stories/*), which a
NOTE line says. models/llm.lua (a family script over any checkpoint) is checked by t_llm
against its own PyTorch implementation; here it is only built.

usage: /usr/bin/python3 tests/py/run_models.py WORKDIR [SUBSTRING...]
"""
import copy
import glob
import json
import os
import re
import shutil
import struct
import sys
import zlib

import numpy as np
import torch
import torch.nn as tnn

sys.dont_write_bytecode = True             # no __pycache__ in the work tree (tests/py, bench)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kt  # noqa: E402
sys.path.insert(0, os.path.join(kt.ROOT, "bench"))
import peers  # noqa: E402  (the PyTorch twins of models/*.lua, shared with `make bench`)

torch.set_num_threads(1)
np.seterr(all="ignore")
MODEL_TOL = 1e-4          # docs/testing.md, "Whole models"
ROUNDING_RATIO = 16       # docs/testing.md, "models/*.lua against PyTorch": C's error at most
                          # 16x PyTorch float32's own, or 16 eps where PyTorch's is below eps


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


class Decoder(tnn.Module):
    """tm_decoder: a post-norm and a pre-norm TransformerDecoderLayer over the same memory."""
    def __init__(self):
        super().__init__()
        self.post = tnn.TransformerDecoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.pre = tnn.TransformerDecoderLayer(16, 4, 24, dropout=0.0, activation="gelu", batch_first=True,
                                               norm_first=True)

    def forward(self, tgt, mem, causal):
        h = self.post(tgt, mem, tgt_mask=causal)
        return self.pre(h, mem)


class Recurrent(tnn.Module):
    """tm_lstm / tm_gru: a recurrent layer's output and final states, as a tuple."""
    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x):
        out, state = self.rnn(x)
        return (out,) + (tuple(state) if isinstance(state, tuple) else (state,))


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
        "tm_decoder": (randomise(Decoder()), [("tgt", [2, 5, 16], "f32", "n"), ("mem", [2, 7, 16], "f32", "n"),
                                              ("causal", [5, 5], "bool", np.triu(np.ones((5, 5), bool), 1))], None, None),
        "tm_lstm": (randomise(Recurrent(tnn.LSTM(3, 5, num_layers=2, bidirectional=True))),
                    [("x", [6, 2, 3], "f32", "n")], None, None),
        "tm_gru": (randomise(Recurrent(tnn.GRU(4, 6, batch_first=True, bias=True))),
                   [("x", [2, 7, 4], "f32", "n")], None, None),
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


# ---------------------------------------------------------------- part 2: models/*.lua

def read_safetensors(path):
    """{name: float32 array} of a safetensors file's F32/F16/BF16 tensors, read with numpy
    alone (not with Kiln's parser, which is what this checks). Other dtypes are skipped."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        raw = data[8 + n + t["data_offsets"][0]:8 + n + t["data_offsets"][1]]
        if t["dtype"] == "F32":
            a = np.frombuffer(raw, "<f4").astype(np.float32)
        elif t["dtype"] == "F16":
            a = np.frombuffer(raw, "<f2").astype(np.float32)          # exact widening
        elif t["dtype"] == "BF16":
            a = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            continue
        out[name] = a.reshape(t["shape"])
    return out


def loaded_files(script):
    """The safetensors files a model script passes to kiln.load (relative to its directory)."""
    with open(script) as f:
        text = f.read()
    return [os.path.join(os.path.dirname(script), m) for m in re.findall(r'kiln\.load\s*\(?\s*"([^"]+)"', text)]


def fashion_samples(meta):
    """The first FASHION bundled Fashion-MNIST test images, scaled as mlp.lua documents
    (byte / 255, flattened to the input's shape): [(tag, [image], label)]."""
    d = os.path.join(kt.ROOT, "models", "data")
    images = np.load(os.path.join(d, "fashion_test_1000.images.npy"))[:FASHION]
    labels = np.load(os.path.join(d, "fashion_test_1000.labels.npy"))[:FASHION]
    shape = meta["inputs"][0]["shape"]
    return [("fashion%d" % k, [(im.astype(np.float32) / 255.0).reshape(shape)], int(lab))
            for k, (im, lab) in enumerate(zip(images, labels))]


REPO_SEEDED = 4             # seeded standard-normal input sets per models/*.lua
FASHION = 16                # bundled samples run through models/mlp.lua
DATA = {"mlp": fashion_samples}   # real inputs for a model, beside the seeded ones


TWIN_OF = {"stories_fixed": "stories"}   # scripts that share another model's twin


def check_names(name, meta):
    """The build's weights against the twin's state_dict, both ways; a list of problems."""
    used = {w["name"] for w in meta["weights"] if w.get("kind", "weight") == "weight"}
    sd = {k for k in peers.TORCH[TWIN_OF.get(name, name)]().state_dict() if not k.endswith("num_batches_tracked")}
    probs = []
    if sd - used:
        probs.append("the twin's %s not in the build" % " ".join(sorted(sd - used)))
    if used - sd:
        probs.append("the build's %s not in the twin" % " ".join(sorted(used - sd)))
    return probs


def check_file_weights(script, params):
    """Every weight the build took from a kiln.load'ed file holds exactly that file's values
    (f16/bf16 widened to f32 exactly), so the twin, filled from the build, runs the file's
    weights too. Returns (number compared, problems)."""
    files = [read_safetensors(p) for p in loaded_files(script)]
    n, probs = 0, []
    for name, a in params.items():
        src = next((f[name] for f in files if name in f), None)   # the first file that has it wins
        if src is None:
            continue
        n += 1
        if src.shape != a.shape or not np.array_equal(src.view(np.uint32), a.view(np.uint32)):
            probs.append("%s differs from the file" % name)
    return n, probs


def torch_outputs(net, arrays, dtype):
    """The twin's outputs, run in `dtype` (torch.float64 or float32) on the same inputs
    (float inputs converted to `dtype`, integer and bool ones passed as they are)."""
    with torch.no_grad():
        r = net(*[torch.from_numpy(a).to(dtype) if a.dtype == np.float32 else torch.from_numpy(a) for a in arrays])
    return [t.numpy() for t in (r if isinstance(r, tuple) else (r,))]


def rel_err(got, ref):
    """max |got - ref| over max(1, max |ref|): the error in the units of Tol.model."""
    return float(np.max(np.abs(got.astype(np.float64) - ref))) / max(1.0, float(np.max(np.abs(ref))))


def classes_agree(got, ref, bound):
    """The arg-max of the C logits names the twin's class, or one within 2 bounds of it (a
    near tie that rounding may legitimately flip). Returns (exact agreement, acceptable)."""
    c, t = int(np.argmax(got)), int(np.argmax(ref))
    return c == t, c == t or float(ref.reshape(-1)[t] - ref.reshape(-1)[c]) <= 2 * float(np.max(bound))


class Tally:
    """What versus_torch measures over the input sets of one model."""

    def __init__(self):
        self.errs, self.class_errs = [], []
        self.worst = self.absmax = self.c_rel = self.t32_rel = 0.0
        self.same = self.labelled = self.right = 0

    def output(self, who, stag, io, got, ref, bound):
        """One output of the C or the interpreter against the float64 twin under `bound`."""
        ok, ratio, msg = kt.compare(got, ref, io["dtype"], bound)
        self.worst = max(self.worst, ratio)
        self.absmax = max(self.absmax, float(np.max(np.abs(got.astype(np.float64) - ref))))
        if who == "C":
            self.c_rel = max(self.c_rel, rel_err(got, ref))
        if not ok:
            self.errs.append("%s vs torch, %s, output %s: %s" % (who, stag, io["name"], msg))

    def classes(self, stag, got, ref, bound, label):
        """The predicted class of one labelled sample."""
        exact, fine = classes_agree(got, ref, bound)
        self.same += exact
        self.labelled += 1
        self.right += int(np.argmax(got)) == label
        if not fine:
            self.class_errs.append("%s: C predicts class %d, torch %d" % (
                stag, int(np.argmax(got)), int(np.argmax(ref))))


def twins_of(name, params):
    """(float64 twin, float32 twin) of bench/peers.py filled with the build's weights, or
    (None, missing names)."""
    net, missing = peers.torch_twin(TWIN_OF.get(name, name), params)
    if net is None:
        return None, missing
    return copy.deepcopy(net).double(), net


def versus_torch(name, path, d, meta, sets, c_first, i_first):
    """C (every input set) and the interpreter (the first) against the PyTorch twin of
    bench/peers.py filled with the build's weights; prints the .../names, .../file-weights,
    .../torch, .../rounding and .../classes lines (docs/testing.md, "models/*.lua")."""
    tag = "models/repo/%s" % name
    if TWIN_OF.get(name, name) not in peers.TORCH:
        return kt.report(False, tag + "/torch", "models/%s.lua has no PyTorch twin: add one to TORCH in "
                         "bench/peers.py (torch.nn modules, state_dict names = the script's weight names)" % name)
    out = os.path.join(d, "out")
    _, params = peers.load_kiln_weights(out, name)
    probs = check_names(name, meta)
    kt.report(not probs, tag + "/names", "; ".join(probs))
    if loaded_files(path):
        n, fprobs = check_file_weights(path, params)
        fprobs += [] if n else ["no weight of the build came from %s" % " ".join(loaded_files(path))]
        kt.report(not fprobs, tag + "/file-weights", "; ".join(fprobs[:3]) if fprobs else "%d tensors bit-equal" % n)
    net64, net32 = twins_of(name, params)
    if net64 is None:
        return kt.report(False, tag + "/torch", "cannot fill the twin, the build lacks " + " ".join(net32))
    tol, t = kt.Tol.model(MODEL_TOL), Tally()
    for k, (stag, arrays, label) in enumerate(sets):
        refs = torch_outputs(net64, arrays, torch.float64)
        if len(refs) != len(meta["outputs"]):
            t.errs.append("%d outputs, the twin has %d" % (len(meta["outputs"]), len(refs)))
            break
        res = c_first
        if k > 0:
            ok, why, res = kt.run_driver(out, name, meta, arrays, tag=stag)
            if not ok:
                t.errs.append("%s: %s" % (stag, why))
                continue
        if res is None:
            t.errs.append("the generated C did not run (see %s)" % tag)
            break
        for o, (io, r, r32) in enumerate(zip(meta["outputs"], refs, torch_outputs(net32, arrays, torch.float32))):
            b = tol.bound(r, arrays)
            t.output("C", stag, io, res[o], r, b)
            if k == 0 and i_first is not None:
                t.output("interp", stag, io, i_first[o], r, b)
            t.t32_rel = max(t.t32_rel, rel_err(r32, r))
            if label is not None and o == 0:
                t.classes(stag, res[o], r, b, label)
    kt.report(not t.errs, tag + "/torch", " | ".join(t.errs[:3]) if t.errs else
              "%d input sets, max |err| %.2g, err/tol %.2g" % (len(sets), t.absmax, t.worst))
    if not t.errs:
        yard = ROUNDING_RATIO * max(t.t32_rel, kt.EPS)
        kt.report(t.c_rel <= yard, tag + "/rounding", "C's error %.2g, PyTorch float32's %.2g (relative to "
                  "max(1, max|ref|)); limit %.2g = %d x max(PyTorch's, eps)" % (
                      t.c_rel, t.t32_rel, yard, ROUNDING_RATIO))
    if t.labelled:
        kt.report(not t.class_errs, tag + "/classes", " | ".join(t.class_errs[:3]) if t.class_errs else
                  "C's class = torch's on %d/%d samples; %d/%d match the dataset labels" % (
                      t.same, t.labelled, t.right, t.labelled))


def run_repo_model(work, path):
    """One models/*.lua: built, its C against the interpreter (models/repo/<m>) and, on several
    input sets, against its PyTorch twin (models/repo/<m>/torch and friends)."""
    name = os.path.splitext(os.path.basename(path))[0]
    d = os.path.join(work, "repo_" + name)
    os.makedirs(d, exist_ok=True)
    out = os.path.join(d, "out")
    ok, why = kt.kiln_build(path, out)
    if not ok:
        kt.report(False, "models/repo/%s" % name, why)
        if name not in peers.TORCH:       # still say so: a missing twin is its own failure
            kt.report(False, "models/repo/%s/torch" % name,
                      "models/%s.lua has no PyTorch twin in bench/peers.py" % name)
        return
    meta = kt.load_meta(out, name)
    if "entries" in meta:
        return stateful_repo_model(name, path, out, meta)
    specs = [(io["name"], io["shape"], io["dtype"], "n") for io in meta["inputs"]]
    sets = [("seed%d" % k, draw("%s/%d" % (name, k), specs), None) for k in range(REPO_SEEDED)]
    sets += DATA[name](meta) if name in DATA else []
    inputs = sets[0][1]
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
    if meta:
        versus_torch(name, path, d, meta, sets, c_res, i_res)


# Models whose PyTorch reference lives with their own suite: the suite that checks them.
CHECKED_BY = {"llm": "t_llm (llm/*: every family on seeded checkpoints against tests/llm/torch_llm.py)"}


def stateful_repo_model(name, path, out, meta):
    """A models/*.lua with entries: its weights here, its outputs in t_state (see the top)."""
    tag = "models/repo/%s" % name
    if name in CHECKED_BY:
        kt.say("NOTE %s: built here; its outputs against PyTorch are %s" % (tag, CHECKED_BY[name]))
        return
    if name not in peers.TORCH:
        return kt.report(False, tag + "/torch", "models/%s.lua has no PyTorch twin in bench/peers.py" % name)
    probs = check_names(name, meta)
    kt.report(not probs, tag + "/names", "; ".join(probs))
    _, params = peers.load_kiln_weights(out, name)
    n, fprobs = check_file_weights(path, params)
    fprobs += [] if n or not loaded_files(path) else ["no weight of the build came from the file"]
    kt.report(not fprobs, tag + "/file-weights", "; ".join(fprobs[:3]) if fprobs else "%d tensors bit-equal" % n)
    kt.say("NOTE %s: entries %s over state: outputs checked against a float64 full forward by t_state "
           "(state/%s/*), not here" % (tag, ", ".join(e["name"] for e in meta["entries"]), name))


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

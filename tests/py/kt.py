"""kt.py -- the shared machinery of Kiln's numeric test suites (t_ops, t_models, t_compile).

A test case goes through the same four steps whatever it tests:
  1. `kiln build m.lua -o DIR` writes DIR/{m.h, m.c, m.weights, m.json};
  2. tests/ops/kt_driver.c (compiled once per compiler and flags) is linked with DIR/m.c into
     one executable (kt_cfg_<exe>.c, written here from m.json, tells it the model's function
     and buffer sizes by their header macros, so a disagreement between m.json and m.h fails
     the run);
  3. the executable runs on raw input files and writes raw outputs;
  4. `kiln run m.lua --input ... --save DIR` evaluates the same script in the reference
     interpreter.
Both results are then compared with an independent float64 reference (numpy/PyTorch) under
a tolerance (class Tol; the reasoning is in docs/testing.md) and with each other.

Everything runs through subprocesses, so a crashing kernel fails its case, not the suite.
Only /usr/bin/python3 (numpy 1.24; torch where a suite needs it) runs this file.
"""
import atexit
import concurrent.futures
import hashlib
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import threading

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KILN = os.environ.get("KILN") or os.path.join(ROOT, "build", "kiln")
DRIVER = os.path.join(ROOT, "tests", "ops", "kt_driver.c")
EPS = float(np.finfo(np.float32).eps)          # 2^-23, the f32 machine epsilon
NP_DTYPE = {"f32": np.float32, "i32": np.int32, "bool": np.bool_, "i64": np.int64}
JOBS = max(1, min(4, os.cpu_count() or 1))


# ---------------------------------------------------------------- small utilities

def run(cmd, cwd=None, timeout=300, env=None):
    """Runs cmd (a list); returns (exit status, stdout, stderr). A timeout is status -1."""
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return -1, "", "timed out after %ds: %s" % (timeout, " ".join(cmd))
    except OSError as e:
        return 127, "", "error: cannot run %s: %s" % (cmd[0], e)


def why(rc, err, out=""):
    """A one-line reason for a failed command: its first error line, or its status."""
    lines = [l for l in (err or out or "").splitlines() if l.strip()]
    pick = next((l for l in lines if "error" in l.lower()), lines[0] if lines else "")
    status = "killed by signal %d" % -rc if rc < -1 else "exit %d" % rc
    return ("%s (%s)" % (pick.strip(), status))[:400]


def pmap(fn, items, jobs=JOBS):
    """fn over items on `jobs` threads (the work is in subprocesses), results in order."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as ex:
        return list(ex.map(fn, items))


_SAY = threading.Lock()


def say(text):
    """Prints one line whole: pmap's threads report at once, and print() writes the text and
    its newline separately, so two lines could merge into one ("PASS aPASS b"), which
    tests/run.sh would count as one check (and a FAIL behind a PASS as none: seen in
    t_compile, 226 checks counted instead of 227)."""
    with _SAY:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


def report(ok, name, detail=""):
    """Prints the protocol line of tests/run.sh: PASS name [(note)] / FAIL name: why."""
    if ok:
        say("PASS %s%s" % (name, " (%s)" % detail if detail else ""))
    else:
        say("FAIL %s: %s" % (name, detail))
    return ok


# ---------------------------------------------------------------- files

def read_safetensors(path):
    """{name: f32 array} of a safetensors file whose tensors are all F32 (a test's reader,
    independent of Kiln's gen/frontend/safetensors.c)."""
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    out = {}
    for name, v in json.loads(raw[8:8 + n]).items():
        if name == "__metadata__":
            continue
        a, b = v["data_offsets"]
        if v["dtype"] != "F32":
            raise ValueError("%s: tensor %s is %s, not F32" % (path, name, v["dtype"]))
        out[name] = np.frombuffer(raw[8 + n + a:8 + n + b], "<f4").reshape(v["shape"]).copy()
    return out


def write_safetensors(path, tensors):
    """Writes a safetensors file by hand: u64 LE header length, JSON header, raw bytes.
    tensors: name -> numpy array (f32/f16/i32/i64/...) or ("BF16", uint16 array of bits)."""
    codes = {np.float32: "F32", np.float16: "F16", np.float64: "F64", np.int32: "I32",
             np.int64: "I64", np.uint8: "U8", np.bool_: "BOOL"}
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        if isinstance(a, tuple):
            code, a = a
        else:
            code = codes[np.asarray(a).dtype.type]
        a = np.ascontiguousarray(a)
        raw = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": code, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def lua_shape(shape):
    return "{" + ", ".join(str(int(d)) for d in shape) + "}"


# ---------------------------------------------------------------- kiln and the C driver

def kiln_build(script, outdir, extra=(), cwd=None):
    """`kiln build script -o outdir`; returns (ok, reason)."""
    rc, out, err = run([KILN, "build", script, "-o", outdir, *extra], cwd=cwd)
    return (rc == 0, "" if rc == 0 else "kiln build: " + why(rc, err, out))


def load_meta(outdir, model):
    with open(os.path.join(outdir, model + ".json")) as f:
        return json.load(f)


def check_meta(meta, model):
    """The JSON facts the driver relies on, as a list of problems (empty: fine)."""
    probs = []
    if meta.get("model") != model:
        probs.append("json model %r, want %r" % (meta.get("model"), model))
    for io in meta.get("inputs", []) + meta.get("outputs", []):
        want = int(np.prod(io["shape"], dtype=np.int64)) * np.dtype(NP_DTYPE[io["dtype"]]).itemsize
        if io.get("bytes") != want:
            probs.append("json %s bytes %r, want %d" % (io["name"], io.get("bytes"), want))
    return probs


def check_plan(meta):
    """The memory plan as <m>.json describes it, checked statically; a list of problems.
    Every arena/weights value lies inside its region and starts 64-byte aligned (views may
    start inside their base value: only kernel outputs and weights are checked for alignment);
    no kernel writes bytes of the arena that it also reads (kernels take restrict pointers,
    so an in-place kernel would be undefined behaviour even where it happens to work)."""
    probs = []
    size = {"arena": meta.get("arena_bytes", 0), "weights": meta.get("weights_bytes", 0)}
    for w in meta.get("weights", []):
        if w["offset"] % 64 or w["offset"] + w["bytes"] > size["weights"]:
            probs.append("weight %s at %d+%d (payload %d)" % (w["name"], w["offset"], w["bytes"], size["weights"]))
    for k in meta.get("kernels", []):
        for io in k.get("inputs", []) + k.get("outputs", []):
            reg = io.get("region")
            if reg in size and io["offset"] + io["bytes"] > size[reg]:
                probs.append("kernel %s: %s %s [%d, %d) outside %d bytes" % (
                    k["name"], reg, io["name"], io["offset"], io["offset"] + io["bytes"], size[reg]))
        for o in k.get("outputs", []):
            if o.get("region") == "arena" and o["offset"] % 64:
                probs.append("kernel %s: arena output %s at unaligned offset %d" % (k["name"], o["name"], o["offset"]))
            for i in k.get("inputs", []):
                if i.get("region") == o.get("region") and i.get("slot") == o.get("slot") \
                        and o.get("region") in ("arena", "output") \
                        and i["offset"] < o["offset"] + o["bytes"] and o["offset"] < i["offset"] + i["bytes"]:
                    probs.append("kernel %s writes %s [%d, %d) over its input %s [%d, %d) (restrict pointers alias)" % (
                        k["name"], o["region"], o["offset"], o["offset"] + o["bytes"], i["name"], i["offset"],
                        i["offset"] + i["bytes"]))
    return probs


def entry_of(meta, name=None):
    """The record of entry `name` of a build with entries (<m>.json "entries"), or of its
    only entry when name is None; None for a plain build."""
    ents = meta.get("entries")
    if ents is None:
        return None
    if name is None and len(ents) == 1:
        return ents[0]
    for e in ents:
        if e["name"] == name:
            return e
    raise KeyError("no entry %r in %s" % (name, [e["name"] for e in ents]))


def write_cfg(outdir, model, meta, entry=None, exe="kt_run"):
    """outdir/kt_cfg_<exe>.c for tests/ops/kt_driver.c: the record kt_model_under_test
    (tests/ops/kt_model.h) through the model's own header macros. With entry (a record of
    meta["entries"]): that entry's _v function and sizes, and the state block's size when the
    model has state. Returns the file's path."""
    up = model.upper()
    if entry is not None:
        m, fn, ios_in, ios_out = entry["macros"], entry["function"] + "_v", entry["inputs"], entry["outputs"]
        what = "%s.json (entry %s)" % (model, entry["name"])
    else:
        m, fn, ios_in, ios_out = up + "_", model + "_run_v", meta["inputs"], meta["outputs"]
        what = model + ".json"
    state = entry is not None and bool(meta.get("states"))
    # a plain run returns nothing; an entry of a model with state, or a run with i64 inputs,
    # returns <M>_OK or <M>_E_RANGE
    status = state or (entry is None and any(io["dtype"] == "i64" for io in ios_in))
    if state:
        call = "return %s(weights, state, arena, inputs, outputs);" % fn
    elif status:
        call = "(void)state;\n  return %s(weights, arena, inputs, outputs);" % fn
    else:
        call = "(void)state;\n  (void)%s(weights, arena, inputs, outputs);\n  return 0;" % fn
    sizes = lambda ios: ", ".join(["%s%s_SIZE" % (m, io["name"].upper()) for io in ios] or ["0"])
    text = ("/* Written by tests/py/kt.py from %s for tests/ops/kt_driver.c. */\n"
            "#include \"%s.h\"\n#include \"kt_model.h\"\n\n"
            "static int run(const void *weights, void *state, void *arena, const void *const *inputs, void *const *outputs) {\n"
            "  %s\n}\n\n"
            "static const size_t in_sizes[] = {%s}, out_sizes[] = {%s};\n\n"
            "const kt_model kt_model_under_test = {run, %s_WEIGHTS_SIZE, %s_ARENA_SIZE, %s, %sNUM_INPUTS, %sNUM_OUTPUTS,\n"
            "                                      in_sizes, out_sizes, %s, %s};\n") % (
                what, model, call, sizes(ios_in), sizes(ios_out), up, up, "%s_STATE_SIZE" % up if state else "0",
                m, m, "true" if state else "false", "true" if status else "false")
    path = os.path.join(outdir, "kt_cfg_%s.c" % exe)
    with open(path, "w") as f:
        f.write(text)
    return path


DRIVER_OBJS = {}                 # (cc, flags) -> kt_driver.c's object, compiled once per process
DRIVER_LOCK = threading.Lock()
DRIVER_DIR = []                  # the temporary directory holding them, removed at exit


def driver_object(cc, flags):
    """tests/ops/kt_driver.c compiled (-c) with cc -std=c11 flags, once per process and
    flags (it does not depend on the model); returns (object path, "") or (None, reason)."""
    key = (cc, tuple(flags))
    with DRIVER_LOCK:
        if key not in DRIVER_OBJS:
            if not DRIVER_DIR:
                DRIVER_DIR.append(tempfile.mkdtemp(prefix="kt-driver-"))
                atexit.register(shutil.rmtree, DRIVER_DIR[0], True)
            obj = os.path.join(DRIVER_DIR[0], "kt_driver_%d.o" % len(DRIVER_OBJS))
            rc, out, err = run([cc, "-std=c11", *flags, "-c", DRIVER, "-o", obj])
            DRIVER_OBJS[key] = (obj, "") if rc == 0 else (None, "%s kt_driver.c: %s" % (cc, why(rc, err, out)))
        return DRIVER_OBJS[key]


def model_object(outdir, model, cc, flags):
    """<model>.c compiled alone (-c) with cc -std=c11 flags, once per content of <model>.c,
    <model>.h and flags: the object is named by a hash of the three and reused while it
    exists, so the drivers of a model's several entries share one compile of a large model.
    Returns (object path, "") or (None, reason)."""
    src = os.path.join(outdir, model + ".c")
    h = hashlib.sha1(repr((cc, list(flags))).encode())
    for p in (src, os.path.join(outdir, model + ".h")):
        with open(p, "rb") as f:
            h.update(f.read())
    key = h.hexdigest()[:16]
    obj = os.path.join(outdir, "kt_%s_%s.o" % (model, key))
    if not os.path.exists(obj):
        rc, out, err = run([cc, "-std=c11", *flags, "-I", outdir, "-c", src, "-o", obj + ".tmp"])
        if rc != 0:
            return None, "%s: %s" % (cc, why(rc, err, out))
        os.replace(obj + ".tmp", obj)
    return obj, ""


def compile_driver(outdir, model, meta, cc="cc", flags=("-O2",), exe="kt_run", entry=None, model_obj=None):
    """Links tests/ops/kt_driver.c (compiled once per flags, driver_object) with <model>.c
    (or model_obj, the model already compiled with the same flags) and the model's record
    kt_cfg_<exe>.c into outdir/exe (for one entry's record of a model with entries);
    returns (ok, reason). For an entry of a model with several, the model is compiled once
    per flags (model_object) and shared by the entries' drivers."""
    cfg = write_cfg(outdir, model, meta, entry, exe)
    path = os.path.join(outdir, exe)
    drv, err = driver_object(cc, flags)
    if drv is None:
        return False, err
    if entry is not None and model_obj is None and len(meta.get("entries") or []) > 1:
        model_obj, err = model_object(outdir, model, cc, flags)
        if model_obj is None:
            return False, err
    rc, out, err = run([cc, "-std=c11", *flags, "-I", outdir, "-I", os.path.dirname(DRIVER), cfg,
                        model_obj or os.path.join(outdir, model + ".c"), drv, "-o", path, "-lm"])
    return (rc == 0, "" if rc == 0 else "%s: %s" % (cc, why(rc, err, out)))


def run_driver(outdir, model, meta, inputs, exe="kt_run", env=None, tag="c"):
    """Runs the compiled driver; inputs are arrays in meta['inputs'] order.
    Returns (ok, reason, list of output arrays)."""
    ins = []
    for i, (io, a) in enumerate(zip(meta["inputs"], inputs)):
        p = os.path.join(outdir, "%s_in%d.bin" % (tag, i))
        np.ascontiguousarray(a, dtype=NP_DTYPE[io["dtype"]]).tofile(p)
        ins.append(p)
    outs = [os.path.join(outdir, "%s_out%d.bin" % (tag, i)) for i in range(len(meta["outputs"]))]
    rc, out, err = run([os.path.join(outdir, exe), os.path.join(outdir, model + ".weights"), *ins, *outs],
                       env=env)
    if rc != 0:
        return False, "generated C: " + why(rc, err, out), None
    res = []
    for io, p in zip(meta["outputs"], outs):
        a = np.fromfile(p, dtype=NP_DTYPE[io["dtype"]])
        if io["dtype"] == "bool":
            raw = np.fromfile(p, dtype=np.uint8)
            if raw.size and raw.max() > 1:
                return False, "generated C: output %s has bool bytes other than 0/1" % io["name"], None
        res.append(a.reshape(io["shape"]))
    return True, "", res


def run_entry(outdir, model, entry, inputs, state_in=None, exe="kt_run", env=None, tag="c", has_state=True):
    """Runs a driver compiled for `entry` (a meta["entries"] record) once: inputs in its
    order, state_in the state block's bytes (None: fresh). Returns (status, reason,
    outputs, state bytes after; b"" for a model without state): status "ok"; "range" when
    the entry returned nonzero and touched nothing (the driver checked); "error" otherwise,
    with the reason."""
    ins = []
    for i, (io, a) in enumerate(zip(entry["inputs"], inputs)):
        p = os.path.join(outdir, "%s_in%d.bin" % (tag, i))
        np.ascontiguousarray(a, dtype=NP_DTYPE[io["dtype"]]).tofile(p)
        ins.append(p)
    sin, sout = "-", os.path.join(outdir, "%s_state_out.bin" % tag)
    if state_in is not None:
        sin = os.path.join(outdir, "%s_state_in.bin" % tag)
        with open(sin, "wb") as f:
            f.write(state_in)
    outs = [os.path.join(outdir, "%s_out%d.bin" % (tag, i)) for i in range(len(entry["outputs"]))]
    states = [sin, sout] if has_state else []
    rc, out, err = run([os.path.join(outdir, exe), os.path.join(outdir, model + ".weights"), *states, *ins, *outs],
                       env=env)
    if rc == 6:
        return "range", out.strip(), None, None
    if rc != 0:
        return "error", "generated C (%s): %s" % (entry["name"], why(rc, err, out)), None, None
    res = [np.fromfile(p, dtype=NP_DTYPE[io["dtype"]]).reshape(io["shape"]) for io, p in zip(entry["outputs"], outs)]
    if not has_state:
        return "ok", "", res, b""
    with open(sout, "rb") as f:
        return "ok", "", res, f.read()


def kiln_run_entry(script, entry, inputs, savedir, state_in=None, has_state=True, defines=()):
    """The interpreter on one entry: inputs a list of (name, array), state_in the state
    block's bytes (None: fresh), defines the build's -D arguments. Returns (ok, reason,
    {name: array}, state bytes after; b"" for a model without state)."""
    os.makedirs(savedir, exist_ok=True)
    sout = os.path.join(savedir, "state_out.bin")
    args = ["--entry", entry] + list(defines) + (["--state-out", sout] if has_state else [])
    if state_in is not None and has_state:
        sin = os.path.join(savedir, "state_in.bin")
        with open(sin, "wb") as f:
            f.write(state_in)
        args += ["--state-in", sin]
    for name, a in inputs:
        p = os.path.join(savedir, "in_%s.npy" % name)
        np.save(p, a)
        args += ["--input", "%s=%s" % (name, p)]
    rc, out, err = run([KILN, "run", script, *args, "--save", savedir, "--limit", "1"])
    if rc != 0:
        return False, "kiln run: " + why(rc, err, out), None, None
    res = {f[:-4]: np.load(os.path.join(savedir, f)) for f in os.listdir(savedir)
           if f.endswith(".npy") and not f.startswith("in_")}
    if not has_state:
        return True, "", res, b""
    with open(sout, "rb") as f:
        return True, "", res, f.read()


def kiln_run(script, inputs, savedir, cwd=None):
    """The reference interpreter: inputs is a list of (name, array). Returns (ok, reason, {name: array})."""
    os.makedirs(savedir, exist_ok=True)
    args = []
    for name, a in inputs:
        p = os.path.join(savedir, "in_%s.npy" % name)
        np.save(p, a)
        args += ["--input", "%s=%s" % (name, p)]
    rc, out, err = run([KILN, "run", script, *args, "--save", savedir, "--limit", "1"], cwd=cwd)
    if rc != 0:
        return False, "kiln run: " + why(rc, err, out), None
    res = {}
    for f in os.listdir(savedir):
        if f.endswith(".npy") and not f.startswith("in_"):
            res[f[:-4]] = np.load(os.path.join(savedir, f))
    return True, "", res


# ---------------------------------------------------------------- tolerances

class Tol:
    """How close a float32 result must be to a float64 reference; see docs/testing.md.

    exact          bit-for-bit equal to the reference rounded to the result dtype
    ew(mag)        8 eps (|ref| + mag): a few ulp of the result, plus a few ulp of the
                   operands' magnitude `mag` (a scalar or per-element array from the inputs)
                   for expressions that cancel (gelu's 1 + erf, silu ...); default mag 1
    red(K, A)      (2 sqrt(K) + 4) eps A: sums of K terms, A = the same reduction of
                   |terms| in float64 (so cancellation is accounted for)
    norm(K, S)     (2 sqrt(K) + 8) eps (|ref| + S): normalisations/softmax over K elements,
                   S a scale from the inputs (e.g. max|x|/std for layernorm)
    model(r)       r max(1, max|ref|): whole models, errors compounding over layers
    """

    def __init__(self, kind, fn=None, label=""):
        self.kind, self.fn, self.label = kind, fn, label

    def bound(self, ref, ins):
        return 0.0 if self.kind == "exact" else self.fn(ref, ins)

    @staticmethod
    def exact():
        return Tol("exact", label="exact")

    @staticmethod
    def ew(mag=None):
        def f(ref, ins):
            m = 1.0 if mag is None else mag(*ins)
            return 8 * EPS * (np.abs(ref) + m)
        return Tol("ew", f, "ew")

    @staticmethod
    def red(K, absref):
        def f(ref, ins):
            return (2 * math.sqrt(K) + 4) * EPS * np.abs(absref(*ins)) + 1e-37
        return Tol("red", f, "red K=%d" % K)

    @staticmethod
    def norm(K, scale=None):
        def f(ref, ins):
            s = 0.0 if scale is None else scale(*ins)
            return (2 * math.sqrt(K) + 8) * EPS * (np.abs(ref) + s) + 1e-37
        return Tol("norm", f, "norm K=%d" % K)

    @staticmethod
    def custom(kind, label, fn):
        return Tol(kind, fn, label)

    @staticmethod
    def model(r):
        def f(ref, ins):
            return r * max(1.0, float(np.max(np.abs(ref), initial=0.0)))
        return Tol("model", f, "model %g" % r)


def compare(got, ref, dtype, bound):
    """Checks one result against a float64 (or integer/bool) reference.
    bound: 0 for exact, else an absolute bound (scalar or per element) on |got - ref|.
    Non-finite references (after rounding to the result dtype) must be matched exactly.
    Returns (ok, worst |err|/bound, message)."""
    ref = np.asarray(ref)
    got = np.asarray(got)
    if tuple(got.shape) != tuple(ref.shape):
        return False, math.inf, "shape %s, want %s" % (list(got.shape), list(ref.shape))
    if got.dtype != np.dtype(NP_DTYPE[dtype]):
        return False, math.inf, "dtype %s, want %s" % (got.dtype, dtype)
    if got.size == 0:
        return True, 0.0, ""
    if dtype != "f32" or (np.ndim(bound) == 0 and bound == 0):
        with np.errstate(over="ignore", invalid="ignore"):
            want = ref.astype(NP_DTYPE[dtype])
        bad = (got != want) & ~(np.isnan(want) & np.isnan(got) if dtype == "f32" else False)
        if bad.any():
            i = np.unravel_index(np.argmax(bad), bad.shape)
            return False, math.inf, "%d of %d differ; at %s got %s, want %s" % (
                bad.sum(), bad.size, list(i), got[i].item(), want[i].item())
        return True, 0.0, ""
    with np.errstate(over="ignore", invalid="ignore"):
        r32 = ref.astype(np.float32)
        g = got.astype(np.float64)
        r = ref.astype(np.float64)
        b = np.broadcast_to(np.asarray(bound, dtype=np.float64), r.shape)
        special = ~np.isfinite(r32)
        err = np.where(special, 0.0, np.abs(g - r))
        bad_special = special & ~((np.isnan(r32) & np.isnan(got)) | (r32 == got))
        bad_finite = ~special & ~np.isfinite(got)
        if np.all(b == 0):
            ratio_arr = np.where(err > 0, np.inf, 0.0)
        else:
            ratio_arr = np.where(err > 0, err / np.maximum(b, 1e-300), 0.0)
        bad = bad_special | bad_finite | (err > b)
    worst = float(np.max(ratio_arr)) if ratio_arr.size else 0.0
    if bad.any():
        score = np.where(bad_special | bad_finite, np.inf, ratio_arr)
        i = np.unravel_index(np.argmax(np.where(bad, score, -1)), bad.shape)
        return False, worst, "%d of %d off; at %s got %.9g, want %.9g (|err| %.3g, tol %.3g)" % (
            bad.sum(), bad.size, list(i), got[i], r[i], abs(g[i] - r[i]), b[i])
    return True, worst, ""

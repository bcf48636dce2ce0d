"""compare.py — one model through the Core ML target, checked every way we can on Linux.

usage: compare.py KILN MILRUN MODEL.lua WORK [--args FILE] [--sizes] CONFIG...
       (CONFIG: iOS15:fp32, iOS17:fp16, ...; --args: build options, e.g. --quantize
       rules, read from FILE and given to every build, C and Core ML; --sizes: the
       package of tests/quant/qmix.lua holds each stored-format weight in exactly the
       bytes docs/coreml.md's table says, and milrun decodes exactly the values of the
       C build, tests/coreml/qsizes.py)

Prints PASS/FAIL lines (tests/run.sh protocol). For the model:
  1. builds the C target and its driver (tests/runtime/driver.c) and runs it on
     seeded random inputs: the reference outputs;
  2. for each CONFIG builds the .mlpackage and checks:
     decode   protoc --decode against gen/target/coreml.proto shows no unknown field;
     blobs    tests/coreml/wbcheck.py (manifest, weight.bin, offsets vs model);
     run      tests/coreml/milrun (validation + evaluation) matches the C target:
              fp32: max |coreml - c| <= 1e-4 * max(1, max |c|)
              fp16: max |coreml - c| <= 3e-2 * max(1, max |c|)
              (milrun rounds every fp16 value to fp16 after each op; the budget is
              what a few dozen fp16 ops in sequence cost; bool/int outputs exact).
Inputs: f32 ~ N(0, 1), i32 uniform in [0, 4), bool fair coin, numpy seed 0.
"""
import json
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import qsizes  # noqa: E402
import wbcheck  # noqa: E402

TOL = {"fp32": 1e-4, "fp16": 3e-2}
NP = {"f32": np.float32, "i32": np.int32, "i64": np.int64, "bool": np.bool_}


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def first_line(s):
    s = (s or "").strip().splitlines()
    return s[-1] if s else "(no message)"


def make_inputs(sig, work):
    """Writes the inputs twice: as Kiln takes them (kin/) and as Core ML does (cin/: bool ->
    int32; i64 -> int32, narrowed as kiln_coreml_call does, its first two values the int32
    limits)."""
    rng = np.random.RandomState(0)
    for d in ("kin", "cin"):
        os.makedirs(os.path.join(work, d), exist_ok=True)
    files = []
    for inp in sig["inputs"]:
        shape, dt = tuple(inp["shape"]), inp["dtype"]
        if dt == "f32":
            a = np.asarray(rng.randn(*shape), dtype=np.float32)
        elif dt == "i32":
            a = np.asarray(rng.randint(0, 4, size=shape), dtype=np.int32)
        elif dt == "i64":
            a = np.asarray(rng.randint(0, 4, size=shape), dtype=np.int64)
            a.reshape(-1)[:2] = [2**31 - 1, -2**31][:a.size]
        else:
            a = np.asarray(rng.randint(0, 2, size=shape), dtype=np.bool_)
        kp = os.path.join(work, "kin", inp["name"] + ".npy")
        np.save(kp, a)
        ca = a.reshape(a.shape or (1,))  # Core ML sees a rank-0 input as shape [1]
        np.save(os.path.join(work, "cin", inp["name"] + ".npy"), ca.astype(np.int32) if dt in ("bool", "i64") else ca)
        files.append(kp)
    return files


def c_reference(kiln, model, work, tag, args):
    """Builds the C target and its driver; returns ({output: array}, signature) or (None, reason)."""
    out = os.path.join(work, "c")
    r = sh([kiln, "build", model, "-o", out] + args)
    if r.returncode:
        return None, f"kiln build (C target) failed: {first_line(r.stderr)}"
    name = os.path.splitext(os.path.basename(model))[0]
    sig = json.load(open(os.path.join(out, name + ".json")))
    exe = os.path.join(work, "driver")
    r = sh(["cc", "-std=c11", "-O1", "-I", out, "-I", os.path.join(ROOT, "runtime"), f"-DKILN_MODEL={name}",
            f"-DKILN_MODEL_UPPER={name.upper()}", os.path.join(ROOT, "tests/runtime/driver.c"),
            os.path.join(out, name + ".c"), os.path.join(ROOT, "runtime/kiln_runtime.c"), "-lm", "-o", exe])
    if r.returncode:
        return None, f"C driver does not build: {first_line(r.stderr)}"
    files = make_inputs(sig, work)
    res = os.path.join(work, "cref")
    os.makedirs(res, exist_ok=True)
    r = sh([exe, "-w", os.path.join(out, name + ".weights"), "-o", res] + files)
    if r.returncode:
        return None, f"C driver failed: {first_line(r.stderr)}"
    outs = {}
    for o in sig["outputs"]:
        outs[o["name"]] = np.fromfile(os.path.join(res, o["name"] + ".bin"), dtype=NP[o["dtype"]]).reshape(o["shape"])
    return outs, sig


def check_config(kiln, milrun, model, work, cfg, ref, sig, tag, args, sizes):
    os_, prec = cfg.split(":")
    name = os.path.splitext(os.path.basename(model))[0]
    t = f"{tag}/{os_}/{prec}"
    out = os.path.join(work, f"{os_}-{prec}")
    r = sh([kiln, "build", model, "-o", out, "--target", "coreml", "--min-os", os_, "--precision", prec] + args)
    if r.returncode:
        print(f"FAIL {t}/build: {first_line(r.stderr)}")
        return
    note = "\n".join(ln for ln in r.stderr.splitlines() if ln.startswith("kiln: note: "))
    print(f"PASS {t}/build" + (f" ({note})" if note else ""))
    pkg = os.path.join(out, name + ".mlpackage")
    mlmodel = os.path.join(pkg, "Data/com.apple.CoreML/model.mlmodel")
    with open(mlmodel, "rb") as f:
        r = sh(["protoc", "--decode=CoreML.Specification.Model", f"--proto_path={ROOT}/gen/target",
                f"{ROOT}/gen/target/coreml.proto"], stdin=f)
    unknown = [ln for ln in r.stdout.splitlines() if re.match(r"^\s*\d+\s*[:{]", ln)]
    if r.returncode or unknown or not r.stdout:
        print(f"FAIL {t}/decode: {first_line(r.stderr) if r.returncode else unknown[:2]}")
    else:
        print(f"PASS {t}/decode (no unknown fields)")
    bad = wbcheck.check_package(pkg, r.stdout)
    print(f"FAIL {t}/blobs: {bad[0]}" if bad else f"PASS {t}/blobs")
    if sizes:
        wb = os.path.getsize(os.path.join(pkg, "Data/com.apple.CoreML/weights/weight.bin"))
        bad, report = qsizes.check(r.stdout, pkg, os_, prec, note)
        print(f"FAIL {t}/sizes: {'; '.join(bad[:3])}" if bad else f"PASS {t}/sizes: weight.bin {wb} bytes; {report}")
    if ref is None:
        return
    got = os.path.join(out, "got")
    os.makedirs(got, exist_ok=True)
    dump = os.path.join(out, "consts")
    os.makedirs(dump, exist_ok=True)
    r = sh([milrun, pkg, "run", os.path.join(work, "cin"), got] + (["-V", dump] if sizes else []))
    if r.returncode:
        print(f"FAIL {t}/run: {first_line(r.stderr)}")
        return
    if sizes:
        bad, report = qsizes.check_values(os.path.join(work, "c"), dump, os_, prec)
        print(f"FAIL {t}/values: {'; '.join(bad[:3])}" if bad else f"PASS {t}/values: {report}")
    worst, msg = 0.0, ""
    for o in sig["outputs"]:
        c = ref[o["name"]]
        m = np.load(os.path.join(got, o["name"] + ".npy"))
        if c.shape == () and m.shape == (1,):   # a rank-0 output is exposed as shape [1]
            m = m.reshape(())
        if m.shape != c.shape:
            print(f"FAIL {t}/run: output {o['name']} shape {m.shape} vs C {c.shape}")
            return
        if o["dtype"] != "f32":
            if not np.array_equal(m.astype(np.int64), c.astype(np.int64)):
                print(f"FAIL {t}/run: output {o['name']} differs from the C target")
                return
            continue
        fin = np.isfinite(c)   # non-finite C values must be matched exactly (NaN by NaN)
        if not np.all(fin | (np.isnan(c) & np.isnan(m)) | (c == m)):
            print(f"FAIL {t}/run: output {o['name']} differs from the C target in a non-finite value")
            return
        if not fin.any():
            continue
        c, m = c[fin], m[fin]
        scale = max(1.0, float(np.abs(c).max()))
        err = float(np.abs(m.astype(np.float64) - c.astype(np.float64)).max()) / scale
        if not np.isfinite(err) or err > TOL[prec]:
            print(f"FAIL {t}/run: output {o['name']} max error {err:.3g} x scale {scale:.3g} > {TOL[prec]}")
            return
        if err >= worst:
            worst, msg = err, f"max error {err:.2g} x {scale:.3g} (tolerance {TOL[prec]})"
    print(f"PASS {t}/run matches the C target: {msg or 'exact'}")


def main():
    kiln, milrun, model, work = sys.argv[1:5]
    rest, args, sizes = sys.argv[5:], [], False
    while rest and rest[0].startswith("--"):
        if rest[0] == "--args":
            args, rest = open(rest[1]).read().split(), rest[2:]
        elif rest[0] == "--sizes":
            sizes, rest = True, rest[1:]
        else:
            sys.exit(f"compare.py: unknown option {rest[0]}")
    tag = "coreml/" + os.path.splitext(os.path.basename(model))[0]
    os.makedirs(work, exist_ok=True)
    ref, sig = c_reference(kiln, model, work, tag, args)
    if ref is None:
        print(f"FAIL {tag}/reference: {sig}")
        sig = None
    for cfg in rest:
        check_config(kiln, milrun, model, work, cfg, ref, sig, tag, args, sizes)


main()

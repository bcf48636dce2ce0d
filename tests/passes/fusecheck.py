"""fusecheck.py — fusion changes how a model runs, never what it computes.

  /usr/bin/python3 tests/passes/fusecheck.py KILN WORKDIR SCRIPT...

For each model script: build the C target fused (the default) and with --no-fuse,
evaluate the same seeded random inputs with both builds (tests/runtime/driver.c)
and with the reference interpreter (`kiln run`), and print one line per check:
  PASS fuse_<m>_kernels       the --no-fuse build has one op per kernel, and the
                              fused kernels hold exactly those ops
  PASS fuse_<m>_same          fused and unfused outputs agree to rounding (they do
                              the same float operations in the same order)
  PASS fuse_<m>_interp        the fused outputs match the interpreter (which works
                              in double) within rtol 1e-4 + 1e-4 * max|ref|
"""
import json
import os
import subprocess
import sys

import numpy as np

NP = {"f32": np.float32, "i32": np.int32, "bool": np.bool_}


def report(ok, name, why):
    print("PASS %s" % name if ok else "FAIL %s: %s" % (name, why))


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode:
        raise RuntimeError("%s: %s" % (" ".join(cmd[:3]), p.stdout.strip().splitlines()[-1:] or "failed"))
    return p.stdout


def build(kiln, script, out, extra):
    run([kiln, "build", script, "-o", out] + extra)
    m = os.path.basename(script)[:-4]
    meta = json.load(open(os.path.join(out, m + ".json")))
    exe = os.path.join(out, "driver")
    run(["cc", "-std=c11", "-Wall", "-Wextra", "-Wpedantic", "-Werror", "-O1", "-I", out, "-I", "runtime", "-DKILN_MODEL=" + m, "-DKILN_MODEL_UPPER=" + m.upper(),
         "tests/runtime/driver.c", os.path.join(out, m + ".c"), "runtime/kiln_runtime.c", "-lm", "-o", exe])
    return meta, exe


def inputs(meta, work):
    """Seeded inputs: normal f32, i32 in [0, 5) (valid indices for the test models), bools."""
    rng = np.random.default_rng(11)
    files = []
    for io in meta["inputs"]:
        shape, dt = io["shape"], io["dtype"]
        if dt == "f32":
            a = rng.standard_normal(shape).astype(np.float32)
        elif dt == "i32":
            a = rng.integers(0, 5, size=shape).astype(np.int32)
        else:
            a = rng.integers(0, 2, size=shape).astype(np.bool_)
        path = os.path.join(work, io["name"] + ".npy")
        np.save(path, a)
        files.append((io["name"], path))
    return files


def outputs(exe, weights, files, meta, out):
    os.makedirs(out, exist_ok=True)
    run([exe, "-w", weights, "-o", out] + [f for _, f in files])
    return {io["name"]: np.fromfile(os.path.join(out, io["name"] + ".bin"), dtype=NP[io["dtype"]]).reshape(io["shape"])
            for io in meta["outputs"]}


def check(kiln, work, script):
    m = os.path.basename(script)[:-4]
    d = os.path.join(work, m)
    fused, fexe = build(kiln, script, os.path.join(d, "fused"), [])
    plain, pexe = build(kiln, script, os.path.join(d, "plain"), ["--no-fuse"])
    one_op = all(len(k["ops"]) == 1 for k in plain["kernels"])
    fused_ops = sorted(op for k in fused["kernels"] for op in k["ops"])
    same_ops = fused_ops == sorted(k["ops"][0] for k in plain["kernels"])
    report(one_op and same_ops, "fuse_%s_kernels" % m, "fused: %d kernels of %d ops, --no-fuse: %d kernels%s" % (
        len(fused["kernels"]), len(fused_ops), len(plain["kernels"]),
        "" if one_op else ", a --no-fuse kernel has several ops"))
    print("  %s: %d kernels, %d arena bytes fused; %d kernels, %d arena bytes with --no-fuse" % (
        m, len(fused["kernels"]), fused["arena_bytes"], len(plain["kernels"]), plain["arena_bytes"]))
    files = inputs(fused, d)
    fo = outputs(fexe, os.path.join(d, "fused", m + ".weights"), files, fused, os.path.join(d, "fo"))
    po = outputs(pexe, os.path.join(d, "plain", m + ".weights"), files, plain, os.path.join(d, "po"))
    ref_dir = os.path.join(d, "ref")
    run([kiln, "run", script, "--save", ref_dir, "--limit", "1"] + [a for f in files for a in ("--input", "%s=%s" % f)])
    same, near = [], []
    for name, got in fo.items():
        ref = np.load(os.path.join(ref_dir, name + ".npy"))
        if got.dtype == np.float32:
            if not np.allclose(got, po[name], rtol=1e-6, atol=1e-6, equal_nan=True):
                same.append("%s differs by %.3g" % (name, float(np.nanmax(np.abs(got - po[name])))))
            bound = 1e-4 * np.abs(ref) + 1e-4 * max(1.0, float(np.nanmax(np.abs(ref))))
            if not (np.all((np.abs(got - ref) <= bound) | (np.isnan(got) & np.isnan(ref)))):
                near.append("%s off by %.3g" % (name, float(np.nanmax(np.abs(got - ref)))))
        else:
            if not np.array_equal(got, po[name]):
                same.append("%s differs" % name)
            if not np.array_equal(got, ref.astype(got.dtype)):
                near.append("%s differs from the interpreter in %d of %d" % (name, int((got != ref).sum()), got.size))
    report(not same, "fuse_%s_same" % m, "; ".join(same))
    report(not near, "fuse_%s_interp" % m, "; ".join(near))


def main():
    kiln, work = sys.argv[1], sys.argv[2]
    for script in sys.argv[3:]:
        m = os.path.basename(script)[:-4]
        try:
            check(kiln, work, script)
        except Exception as e:  # a failed build or run is a failed check, with its message
            report(False, "fuse_%s" % m, str(e))


main()

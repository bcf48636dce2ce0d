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
A model with state or entry points (its <m>.json has "entries") is run as one call of
each entry in declaration order from a fresh state, the state chained from call to call
(tests/ops/kt_driver.c, one build per entry); the outputs and the state block after each
call are compared as above: fusion must not move a state read across a write either.
"""
import json
import os
import subprocess
import sys

import numpy as np

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
import kt  # noqa: E402  (the drivers of stateful entries)

NP = {"f32": np.float32, "i32": np.int32, "bool": np.bool_, "i64": np.int64}


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
    """Seeded inputs: normal f32, i32 and i64 in [0, 5) (valid indices for the test models), bools."""
    rng = np.random.default_rng(11)
    files = []
    for io in meta["inputs"]:
        shape, dt = io["shape"], io["dtype"]
        if dt == "f32":
            a = rng.standard_normal(shape).astype(np.float32)
        elif dt in ("i32", "i64"):
            a = rng.integers(0, 5, size=shape).astype(NP[dt])
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


def kernels_of(meta):
    """Every kernel of a build, over all its entries."""
    return [k for e in meta["entries"] for k in e["kernels"]] if "entries" in meta else meta["kernels"]


def check_kernels(m, fused, plain):
    """The fuse_<m>_kernels line: --no-fuse has one op per kernel, the fused kernels hold the same ops."""
    fk, pk = kernels_of(fused), kernels_of(plain)
    one_op = all(len(k["ops"]) == 1 for k in pk)
    fused_ops = sorted(op for k in fk for op in k["ops"])
    same_ops = fused_ops == sorted(k["ops"][0] for k in pk)
    report(one_op and same_ops, "fuse_%s_kernels" % m, "fused: %d kernels of %d ops, --no-fuse: %d kernels%s" % (
        len(fk), len(fused_ops), len(pk), "" if one_op else ", a --no-fuse kernel has several ops"))
    print("  %s: %d kernels, %d arena bytes fused; %d kernels, %d arena bytes with --no-fuse" % (
        m, len(fk), fused["arena_bytes"], len(pk), plain["arena_bytes"]))


def compare(got, other, ref, name, same, near):
    """One output (or state) of the fused build against the unfused one and the interpreter."""
    if got.dtype == np.float32:
        if not np.allclose(got, other, rtol=1e-6, atol=1e-6, equal_nan=True):
            same.append("%s differs by %.3g" % (name, float(np.nanmax(np.abs(got - other)))))
        bound = 1e-4 * np.abs(ref) + 1e-4 * max(1.0, float(np.nanmax(np.abs(ref)))) if ref.size else 0
        if not (np.all((np.abs(got - ref) <= bound) | (np.isnan(got) & np.isnan(ref)))):
            near.append("%s off by %.3g" % (name, float(np.nanmax(np.abs(got - ref)))))
    else:
        if not np.array_equal(got, other):
            same.append("%s differs" % name)
        if not np.array_equal(got, ref.astype(got.dtype)):
            near.append("%s differs from the interpreter in %d of %d" % (name, int((got != ref).sum()), got.size))


def state_values(meta, block):
    """{state name: array} of a state block's bytes."""
    return {s["name"]: np.frombuffer(block, dtype=NP[s["dtype"]], count=int(np.prod(s["shape"], dtype=np.int64)),
                                     offset=s["offset"]).reshape(s["shape"]) for s in meta["states"]}


def check_program(kiln, work, script, m, d):
    """check() for a build with entries: one call of each entry, state chained (see the top)."""
    kt.KILN = kiln
    out = {}
    for tag, extra in (("fused", []), ("plain", ["--no-fuse"])):
        run([kiln, "build", script, "-o", os.path.join(d, tag)] + extra)
        meta = json.load(open(os.path.join(d, tag, m + ".json")))
        for e in meta["entries"]:
            ok, why = kt.compile_driver(os.path.join(d, tag), m, meta, flags=("-O1",), exe="drv_" + e["name"], entry=e)
            if not ok:
                raise RuntimeError(why)
        out[tag] = meta
    check_kernels(m, out["fused"], out["plain"])
    rng = np.random.default_rng(11)
    states = {"fused": None, "plain": None, "ref": None}
    same, near = [], []
    for k, e in enumerate(out["fused"]["entries"]):
        ins = []
        for io in e["inputs"]:   # positions 0 or 1 (in range for the test models), ids in [0, 5)
            hi = 2 if io["dtype"] == "i32" and not io["shape"] else 5
            ins.append(rng.standard_normal(io["shape"]).astype(np.float32) if io["dtype"] == "f32"
                       else rng.integers(0, hi, size=io["shape"]).astype(NP[io["dtype"]]))
        res = {}
        for tag in ("fused", "plain"):
            st, why, o, states[tag] = kt.run_entry(os.path.join(d, tag), m, e, ins, states[tag], exe="drv_" + e["name"],
                                                   tag="c%d" % k, has_state=bool(out["fused"]["states"]))
            if st != "ok":
                raise RuntimeError("%s %s: %s" % (tag, e["name"], why or "returned nonzero"))
            res[tag] = o
        ok, why, ref, states["ref"] = kt.kiln_run_entry(script, e["name"], [(io["name"], a) for io, a in zip(e["inputs"], ins)],
                                                        os.path.join(d, "ref%d" % k), states["ref"],
                                                        has_state=bool(out["fused"]["states"]))
        if not ok:
            raise RuntimeError(why)
        for io, f, p in zip(e["outputs"], res["fused"], res["plain"]):
            compare(f, p, ref[io["name"]], "%s.%s" % (e["name"], io["name"]), same, near)
        if out["fused"]["states"]:
            fs, ps, rs = (state_values(out["fused"], states[t]) for t in ("fused", "plain", "ref"))
            for s in fs:
                compare(fs[s], ps[s], rs[s], "state %s after %s" % (s, e["name"]), same, near)
    report(not same, "fuse_%s_same" % m, "; ".join(same))
    report(not near, "fuse_%s_interp" % m, "; ".join(near))


def check(kiln, work, script):
    m = os.path.basename(script)[:-4]
    d = os.path.join(work, m)
    run([kiln, "build", script, "-o", os.path.join(d, "probe")])
    if "entries" in json.load(open(os.path.join(d, "probe", m + ".json"))):
        return check_program(kiln, work, script, m, d)
    fused, fexe = build(kiln, script, os.path.join(d, "fused"), [])
    plain, pexe = build(kiln, script, os.path.join(d, "plain"), ["--no-fuse"])
    check_kernels(m, fused, plain)
    files = inputs(fused, d)
    fo = outputs(fexe, os.path.join(d, "fused", m + ".weights"), files, fused, os.path.join(d, "fo"))
    po = outputs(pexe, os.path.join(d, "plain", m + ".weights"), files, plain, os.path.join(d, "po"))
    ref_dir = os.path.join(d, "ref")
    run([kiln, "run", script, "--save", ref_dir, "--limit", "1"] + [a for f in files for a in ("--input", "%s=%s" % f)])
    same, near = [], []
    for name, got in fo.items():
        compare(got, po[name], np.load(os.path.join(ref_dir, name + ".npy")), name, same, near)
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


if __name__ == "__main__":   # narrowcheck.py imports its builds and drivers
    main()

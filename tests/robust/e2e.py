"""e2e.py -- t_robust's end-to-end half: unusual but valid models work on the C target.

For each script given (tests/robust/ok/*.lua):
  robust/c/<m>        `kiln build` succeeds; tests/ops/kt_driver.c + <m>.c, built with
                      -fsanitize=address,undefined, runs clean on seeded random inputs
                      and every output equals `kiln run` on the same inputs (f32 within
                      a few ulp: the interpreter and the kernels may round differently
                      in transcendental functions; bool/i32 and non-finite values exact)
  robust/cwarn/<m>    <m>.c compiles with -std=c11 -Wall -Wextra -Wpedantic -Werror
  robust/stdout/<m>   `kiln graph` and `kiln run` print only their results on stdout
                      (whatever the script prints goes to stderr: print, io.write, io.stdout)

usage: /usr/bin/python3 tests/robust/e2e.py WORKDIR SCRIPT...
"""
import os
import re
import sys
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "py"))
import kt  # noqa: E402

WARN = ["-std=c11", "-Wall", "-Wextra", "-Wpedantic", "-Werror"]
SAN = ["-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
SAN_ENV = dict(os.environ, ASAN_OPTIONS="abort_on_error=0:detect_leaks=1", UBSAN_OPTIONS="halt_on_error=1")


def inputs_for(meta, name):
    """Seeded inputs: f32 normal (times 3, so casts truncate interesting values), i32 small, bool coin."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    res = []
    for io in meta["inputs"]:
        shape = io["shape"]
        if io["dtype"] == "f32":
            res.append(np.asarray(rng.standard_normal(shape) * 3, dtype=np.float32))
        elif io["dtype"] == "i32":
            res.append(np.asarray(rng.integers(0, 3, shape), dtype=np.int32))
        else:
            res.append(np.asarray(rng.random(shape) < 0.5))
    return res


def same(io, got, ref):
    """C result vs interpreter result: exact for i32/bool and non-finite f32, else 8 ulp."""
    got = np.asarray(got).reshape(io["shape"])
    ref = np.asarray(ref).reshape(io["shape"])
    if io["dtype"] != "f32":
        return bool(np.array_equal(got, ref)), "differ: got %s, want %s" % (got.ravel()[:6], ref.ravel()[:6])
    g, r = got.astype(np.float64), ref.astype(np.float64)
    fin = np.isfinite(r)
    special_ok = np.all((np.isnan(g) & np.isnan(r)) | (g == r) | fin)
    tol = 8 * kt.EPS * (np.abs(r) + 1e-30)
    with np.errstate(invalid="ignore"):
        close = np.all(~fin | (np.abs(g - r) <= tol))
    return bool(special_ok and close), "differ: got %s, want %s" % (got.ravel()[:6], ref.ravel()[:6])


def check_c(work, script):
    m = os.path.splitext(os.path.basename(script))[0]
    out = os.path.join(work, m)
    ok, why = kt.kiln_build(script, out)
    if not ok:
        return kt.report(False, "robust/c/" + m, why)
    meta = kt.load_meta(out, m)
    rc, o, e = kt.run(["cc", *WARN, "-O2", "-I", out, "-c", os.path.join(out, m + ".c"), "-o", os.devnull])
    kt.report(rc == 0, "robust/cwarn/" + m, "" if rc == 0 else kt.why(rc, e, o))
    ok, why = kt.compile_driver(out, m, meta, flags=SAN, exe="kt_san")
    if not ok:
        return kt.report(False, "robust/c/" + m, why)
    inputs = inputs_for(meta, m)
    ok, why, res = kt.run_driver(out, m, meta, inputs, exe="kt_san", env=SAN_ENV)
    if not ok:
        return kt.report(False, "robust/c/" + m, why)
    names = [io["name"] for io in meta["inputs"]]
    ok, why, ref = kt.kiln_run(script, list(zip(names, inputs)), os.path.join(out, "ref"))
    if not ok:
        return kt.report(False, "robust/c/" + m, why)
    for io, got in zip(meta["outputs"], res):
        if io["name"] not in ref:
            return kt.report(False, "robust/c/" + m, "kiln run saved no %s.npy" % io["name"])
        good, msg = same(io, got, ref[io["name"]])
        if not good:
            return kt.report(False, "robust/c/" + m, "output %s: %s" % (io["name"], msg))
    return kt.report(True, "robust/c/" + m, "%d outputs equal kiln run" % len(res))


def check_stdout(work, script):
    """Only results on stdout: the graph dump's lines all start with '%', 'output' or 'kernels';
    run prints one 'name: dtype [dims] = ...' line per output (inputs: those check_c saved)."""
    m = os.path.splitext(os.path.basename(script))[0]
    rc, o, e = kt.run([kt.KILN, "graph", script])
    bad = [l for l in o.splitlines() if not (l.startswith("%") or l.startswith("output ") or l.startswith("kernels "))]
    if rc != 0 or bad:
        return kt.report(False, "robust/stdout/" + m, "graph: exit %d, stray line %r" % (rc, bad[:1]))
    out = os.path.join(work, m)
    try:
        meta = kt.load_meta(out, m)
    except OSError:
        return kt.report(False, "robust/stdout/" + m, "no %s.json from check_c" % m)
    args = []
    for io in meta["inputs"]:
        args += ["--input", "%s=%s" % (io["name"], os.path.join(out, "ref", "in_%s.npy" % io["name"]))]
    rc, o, e = kt.run([kt.KILN, "run", script, *args])
    lines = o.splitlines()
    bad = [l for l in lines if not re.match(r"^\w+: (f32|i32|bool) \[[0-9, ]*\] =", l)]
    if rc != 0 or bad or len(lines) != len(meta["outputs"]):
        return kt.report(False, "robust/stdout/" + m, "run: exit %d, %d lines for %d outputs, stray %r" % (
            rc, len(lines), len(meta["outputs"]), bad[:1]))
    return kt.report(True, "robust/stdout/" + m)


def main():
    work = sys.argv[1]
    for script in sys.argv[2:]:
        check_c(work, script)
        check_stdout(work, script)


if __name__ == "__main__":
    main()

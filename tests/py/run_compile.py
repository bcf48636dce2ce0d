"""run_compile.py -- t_compile's generated-code half: every model's C under both compilers.

For each model script given (models/*.lua, tests/golden/*.lua):
  compile/<cc>/<m>      <m>.c and <m>_weights.c (--embed-weights) compile with gcc and clang
                        under -std=c11 -Wall -Wextra -Wpedantic -Werror (at -O2, where
                        more warnings fire), and so does a file that includes <m>.h twice
  compile/san-<cc>/<m>  tests/ops/kt_driver.c + <m>.c built with -fsanitize=address,undefined
                        -fno-sanitize-recover=all runs clean on one random input and agrees
                        with the interpreter (model tolerance)
  compile/runtime-<cc>/<m>  tests/runtime/driver.c + runtime/kiln_runtime.c + <m>.c under the
                        same sanitizers, once loading <m>.weights through the runtime and once
                        with the embedded array (<m>_weights.c): both agree with the interpreter
  compile/contract/<m>  <m>.c neither allocates nor does I/O, and has no mutable statics
A model with state or entry points (<m>.json has "entries"): the sanitizer run is one call
of every entry, in declaration order from a fresh state and chaining it, each against
`kiln run --entry` (outputs and the state block); so is the runtime run, with
tests/runtime/driver.c built once per entry (-DKILN_ENTRY, -DKILN_STATE).
And once: compile/runtime/<cc>: runtime/*.c alone under the warning flags.

usage: /usr/bin/python3 tests/py/run_compile.py WORKDIR SCRIPT...
"""
import glob
import os
import platform
import sys
import threading
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kt  # noqa: E402

WARN = ["-std=c11", "-Wall", "-Wextra", "-Wpedantic", "-Werror"]
# -O0: the sanitizers instrument every access at any level, and the sanitized runs are tiny;
# at -O1 (even with -fno-inline) gcc took 15-19 s and clang 9-16 s on stories.c's 390
# functions, five times -O0's, and that was a fifth of the suite. The optimised paths of the
# same C run at -O2/-O3 in t_ops, t_models and t_isa, and -O2's warnings are checked above.
SAN = ["-O0", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
COMPILERS = ["gcc", "clang"]
SAN_ENV = dict(os.environ, ASAN_OPTIONS="abort_on_error=0:detect_leaks=1",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")


def inputs_for(meta, name, ios=None):
    """Seeded inputs for meta's inputs (or the records ios): normal f32, i32 in [0, 2) (in
    range as indices and positions for every model here), random bools."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    res = []
    for io in meta["inputs"] if ios is None else ios:
        if io["dtype"] == "f32":
            res.append(rng.standard_normal(io["shape"]).astype(np.float32))
        elif io["dtype"] == "i32":
            res.append(rng.integers(0, 2, io["shape"]).astype(np.int32))
        else:
            res.append(rng.random(io["shape"]) < 0.5)
    return res


def warn_compile(cc, out, m):
    srcs = [os.path.join(out, m + ".c")]
    emb = os.path.join(out, m + "_weights.c")
    if os.path.exists(emb):
        srcs.append(emb)
    else:
        return False, "--embed-weights wrote no %s_weights.c" % m
    twice = os.path.join(out, "kt_twice_%s.c" % cc)
    with open(twice, "w") as f:       # the header is idempotent and self-contained
        f.write('#include "%s.h"\n#include "%s.h"\nint kt_twice(void);\nint kt_twice(void) { return 0; }\n' % (m, m))
    for src in srcs + [twice]:
        obj = os.path.join(out, "%s_weights_%s.o" % (m, cc)) if src == emb else os.devnull   # san_objects links it
        rc, o, e = kt.run([cc, *WARN, "-O2", "-I", out, "-c", src, "-o", obj])
        if rc != 0:
            return False, "%s %s: %s" % (cc, os.path.basename(src), kt.why(rc, e, o))
    # At the documented x86-64 flags too: immintrin.h brings stdlib.h (a kernel named `div`
    # clashed with it) and the ISA helpers (an unused kiln_avx512 in a file without a
    # product failed clang's -Werror); t_isa builds only models with products so.
    if platform.machine() in ("x86_64", "AMD64"):
        rc, o, e = kt.run([cc, *WARN, "-O2", "-march=x86-64-v3", "-I", out, "-c", srcs[0], "-o", os.devnull])
        if rc != 0:
            return False, "%s -march=x86-64-v3 %s: %s" % (cc, os.path.basename(srcs[0]), kt.why(rc, e, o))
    return True, ""


def san_run(cc, out, m, meta, inputs, ref, objs):
    ok, why = kt.compile_driver(out, m, meta, cc=cc, flags=WARN + SAN, exe="kt_san_" + cc, model_obj=objs[0])
    if not ok:
        return False, why
    ok, why, res = kt.run_driver(out, m, meta, inputs, exe="kt_san_" + cc, env=SAN_ENV, tag="san_" + cc)
    if not ok:
        return False, why
    return agree(meta, res, ref)


def agree(meta, res, ref):
    if ref is None:
        return True, "interpreter unavailable: ran clean, not compared"
    for io, got, r in zip(meta["outputs"], res, ref):
        dt = io["dtype"]
        rr = r.astype(np.float64) if dt == "f32" else r
        b = kt.Tol.model(1e-4).bound(rr, []) if dt == "f32" else 0
        ok, _, msg = kt.compare(got, rr, dt, b)
        if not ok:
            return False, "output %s vs interpreter: %s" % (io["name"], msg)
    return True, ""


def runtime_run(cc, work, out, m, meta, inputs, ref, objs):
    """tests/runtime/driver.c + runtime/kiln_runtime.c, once loading <m>.weights and once with
    the --embed-weights array (-DKILN_EMBED); both must run clean and agree with the interpreter.
    objs: <m>.c compiled with the sanitizer flags and <m>_weights.c's object (san_objects)."""
    drv = os.path.join(kt.ROOT, "tests", "runtime", "driver.c")
    rt, why = runtime_object(cc, work)
    if rt is None:
        return False, why
    files = []
    for i, a in enumerate(inputs):
        p = os.path.join(out, "rt_in%d.bin" % i)
        a.tofile(p)
        files.append(p)
    for variant in ("file", "embed"):
        exe = os.path.join(out, "rt_%s_%s" % (variant, cc))
        extra = ["-DKILN_EMBED", objs[1]] if variant == "embed" else []
        rc, o, e = kt.run([cc, *WARN, *SAN, "-I", out, "-I", os.path.join(kt.ROOT, "runtime"),
                           "-DKILN_MODEL=" + m, "-DKILN_MODEL_UPPER=" + m.upper(), drv,
                           objs[0], rt, *extra, "-o", exe, "-lm"])
        if rc != 0:
            return False, "%s (%s weights): %s" % (cc, variant, kt.why(rc, e, o))
        odir = os.path.join(out, "rt_out_%s_%s" % (variant, cc))
        os.makedirs(odir, exist_ok=True)
        args = [] if variant == "embed" else ["-w", os.path.join(out, m + ".weights")]
        rc, o, e = kt.run([exe, *args, "-o", odir, *files], env=SAN_ENV)
        if rc != 0:
            return False, "runtime driver (%s weights): %s" % (variant, kt.why(rc, e, o))
        res = []
        for io in meta["outputs"]:
            a = np.fromfile(os.path.join(odir, io["name"] + ".bin"), dtype=kt.NP_DTYPE[io["dtype"]])
            res.append(a.reshape(io["shape"]))
        ok, why = agree(meta, res, ref)
        if not ok:
            return False, "%s weights: %s" % (variant, why)
    return True, ""


CONTRACT = [  # (regex over <m>.c, what it means)
    (r"\b(malloc|calloc|realloc|free|aligned_alloc)\s*\(", "allocates"),
    (r"\b(fopen|printf|fprintf|puts|exit|abort)\s*\(", "does I/O or exits"),
    (r"#include\s*<stdio\.h>", "includes stdio.h"),
    (r"^\s*static\s+(?!const\b)(?!void\b)(?!inline\b)[\w\s\*]+\b\w+\s*(\[[^\]]*\])*\s*[;=]",
     "has mutable static state (unsafe with concurrent runs)"),
]


def contract(out, m):
    """<m>.c keeps the header's promises: no allocation, no I/O, no mutable statics."""
    import re
    with open(os.path.join(out, m + ".c")) as f:
        text = f.read()
    probs = []
    for pat, what in CONTRACT:
        hit = re.search(pat, text, re.M)
        if hit:
            line = text.count("\n", 0, hit.start()) + 1
            probs.append("%s (%s.c:%d: %s)" % (what, m, line, hit.group(0).strip()[:60]))
    return not probs, "; ".join(probs)


def contract_line(out, m):
    ok, why = contract(out, m)
    return ok, "compile/contract/%s" % m, why


def san_objects(cc, out, m):
    """<m>.c compiled once with the sanitizer flags, for the per-entry drivers (stories.c
    takes a while), and warn_compile's object of <m>_weights.c: a constant array, which the
    sanitizers would only fence (an overrun of the weights shows in the runs that read them
    from a heap buffer, the .weights file), at 4 s a compile for a 1 MB model. Returns
    ((model.o, weights.o), "") or (None, why)."""
    src, obj = m + ".c", os.path.join(out, "%s_san_%s.o" % (m, cc))
    rc, o, err = kt.run([cc, *WARN, *SAN, "-I", out, "-c", os.path.join(out, src), "-o", obj])
    if rc != 0:
        return None, "%s %s: %s" % (cc, src, kt.why(rc, err, o))
    weights = os.path.join(out, "%s_weights_%s.o" % (m, cc))
    if not os.path.exists(weights):
        return None, "%s %s_weights.c: did not compile" % (cc, m)
    return [obj, weights], ""


RT_OBJS = {}                     # cc -> (object path or None, why): kiln_runtime.c, compiled once
RT_LOCK = threading.Lock()


def runtime_object(cc, work):
    """runtime/kiln_runtime.c compiled once per compiler with the warning and sanitizer flags,
    shared by every model's runtime driver (it does not depend on the model); returns
    (object path, "") or (None, why). The first caller compiles, the others wait."""
    with RT_LOCK:
        if cc not in RT_OBJS:
            src = os.path.join(kt.ROOT, "runtime", "kiln_runtime.c")
            obj = os.path.join(work, "kiln_runtime_san_%s.o" % cc)
            if not os.path.exists(src) or not os.path.exists(os.path.join(kt.ROOT, "tests", "runtime", "driver.c")):
                RT_OBJS[cc] = (None, "tests/runtime/driver.c or runtime/kiln_runtime.c missing")
            else:
                rc, o, e = kt.run([cc, *WARN, *SAN, "-I", os.path.join(kt.ROOT, "runtime"), "-c", src, "-o", obj])
                RT_OBJS[cc] = (obj, "") if rc == 0 else (None, "%s kiln_runtime.c: %s" % (cc, kt.why(rc, e, o)))
        return RT_OBJS[cc]


def runtime_run_entries(cc, work, out, m, script, meta, objs):
    """runtime_run for a model with entries: tests/runtime/driver.c + runtime/kiln_runtime.c
    built per entry, file and embedded weights, every entry once with the state chained."""
    drv = os.path.join(kt.ROOT, "tests", "runtime", "driver.c")
    rt, why = runtime_object(cc, work)
    if rt is None:
        return False, why
    up, has_state = m.upper(), bool(meta["states"])
    for variant in ("file", "embed"):
        c_state = i_state = None
        for e in meta["entries"]:
            exe = os.path.join(out, "rt_%s_%s_%s" % (variant, cc, e["name"]))
            defs = ["-DKILN_MODEL=" + m, "-DKILN_MODEL_UPPER=" + up, "-DKILN_ENTRY=" + e["name"]]
            if e["macros"] != up + "_":
                defs.append("-DKILN_ENTRY_UPPER=" + e["macros"][len(up) + 1:-1])
            defs += ["-DKILN_STATE"] if has_state else []
            extra = ["-DKILN_EMBED", objs[1]] if variant == "embed" else []
            rc, o, err = kt.run([cc, *WARN, *SAN, "-I", out, "-I", os.path.join(kt.ROOT, "runtime"), *defs, drv,
                                 objs[0], rt, *extra, "-o", exe, "-lm"])
            if rc != 0:
                return False, "%s (%s weights, %s): %s" % (cc, variant, e["name"], kt.why(rc, err, o))
            ins = inputs_for(meta, m + "/" + e["name"], e["inputs"])
            files = []
            for i, a in enumerate(ins):
                files.append(os.path.join(out, "rt_%s_in%d.bin" % (e["name"], i)))
                a.tofile(files[-1])
            odir = os.path.join(out, "rt_out_%s_%s_%s" % (variant, cc, e["name"]))
            os.makedirs(odir, exist_ok=True)
            args = [] if variant == "embed" else ["-w", os.path.join(out, m + ".weights")]
            sin, sout = os.path.join(odir, "state_in.bin"), os.path.join(odir, "state_out.bin")
            if has_state:
                args += ["-S", sout]
                if c_state is not None:
                    with open(sin, "wb") as f:
                        f.write(c_state)
                    args += ["-s", sin]
            rc, o, err = kt.run([exe, *args, "-o", odir, *files], env=SAN_ENV)
            if rc != 0:
                return False, "runtime driver (%s weights, %s): %s" % (variant, e["name"], kt.why(rc, err, o))
            res = [np.fromfile(os.path.join(odir, io["name"] + ".bin"), dtype=kt.NP_DTYPE[io["dtype"]]).reshape(io["shape"])
                   for io in e["outputs"]]
            if has_state:
                with open(sout, "rb") as f:
                    c_state = f.read()
            ok, why, got, i_state = kt.kiln_run_entry(script, e["name"], [(io["name"], a) for io, a in zip(e["inputs"], ins)],
                                                      os.path.join(odir, "interp"), i_state, has_state)
            if not ok:
                return False, why
            ok, why = agree(e, res, [got[io["name"]] for io in e["outputs"]])
            if not ok:
                return False, "%s weights, %s: %s" % (variant, e["name"], why)
            ok, why = states_agree(meta, c_state, i_state, e["name"])
            if not ok:
                return False, "%s weights: %s" % (variant, why)
    return True, ""


def states_agree(meta, c_state, i_state, entry):
    """The C state block against the interpreter's after entry (model tolerance)."""
    for s in meta.get("states", []):
        dt, n = kt.NP_DTYPE[s["dtype"]], int(np.prod(s["shape"], dtype=np.int64))
        c, i = (np.frombuffer(b, dt, n, s["offset"]).astype(np.float64) for b in (c_state, i_state))
        if not np.allclose(c, i, rtol=1e-4, atol=1e-4 * max(1.0, float(np.max(np.abs(i), initial=0)))):
            return False, "state %s after %s differs from the interpreter's" % (s["name"], entry)
    return True, ""


def san_run_entries(cc, out, m, script, meta, objs):
    """san_run for a model with entries: every entry once, state chained, vs kiln run --entry."""
    c_state = i_state = None
    has_state = bool(meta["states"])
    for e in meta["entries"]:
        exe = "kt_san_%s_%s" % (cc, e["name"])
        ok, why = kt.compile_driver(out, m, meta, cc=cc, flags=WARN + SAN, exe=exe, entry=e, model_obj=objs[0])
        if not ok:
            return False, why
        ins = inputs_for(meta, m + "/" + e["name"], e["inputs"])
        st, why, res, c_state = kt.run_entry(out, m, e, ins, c_state, exe=exe, env=SAN_ENV, tag="san_" + cc,
                                             has_state=has_state)
        if st != "ok":
            return False, why or "%s returned nonzero" % e["name"]
        ok, why, got, i_state = kt.kiln_run_entry(script, e["name"], [(io["name"], a) for io, a in zip(e["inputs"], ins)],
                                                  os.path.join(out, "interp_%s_%s" % (cc, e["name"])), i_state, has_state)
        if not ok:
            return False, why
        ok, why = agree(e, res, [got[io["name"]] for io in e["outputs"]])
        if not ok:
            return False, "%s: %s" % (e["name"], why)
        if has_state:
            ok, why = states_agree(meta, c_state, i_state, e["name"])
            if not ok:
                return False, why
    return True, ""


def one_model(work, script):
    m = os.path.splitext(os.path.basename(script))[0]
    out = os.path.join(work, m)
    ok, why = kt.kiln_build(script, out, extra=["--embed-weights"])
    if not ok:
        for cc in COMPILERS:
            for what in ("", "san-", "runtime-"):
                kt.report(False, "compile/%s%s/%s" % (what, cc, m), why)
        return
    meta = kt.load_meta(out, m)
    if "entries" in meta:
        kt.report(*contract_line(out, m))
        for cc in COMPILERS:
            ok, why = warn_compile(cc, out, m)
            kt.report(ok, "compile/%s/%s" % (cc, m), why)
            objs, why = san_objects(cc, out, m)
            r = san_run_entries(cc, out, m, script, meta, objs) if objs else (False, why)
            kt.report(r[0], "compile/san-%s/%s" % (cc, m), r[1])
            r = runtime_run_entries(cc, work, out, m, script, meta, objs) if objs else (False, why)
            kt.report(r[0], "compile/runtime-%s/%s" % (cc, m), r[1])
        return
    inputs = inputs_for(meta, m)
    ok, why, got = kt.kiln_run(script, [(io["name"], a) for io, a in zip(meta["inputs"], inputs)],
                               os.path.join(out, "interp"))
    ref = [got[io["name"]] for io in meta["outputs"]] if ok else None
    kt.report(*contract_line(out, m))
    for cc in COMPILERS:
        ok, why = warn_compile(cc, out, m)
        kt.report(ok, "compile/%s/%s" % (cc, m), why)
        objs, why = san_objects(cc, out, m)
        r = san_run(cc, out, m, meta, inputs, ref, objs) if objs else (False, why)
        kt.report(r[0], "compile/san-%s/%s" % (cc, m), r[1])
        r = runtime_run(cc, work, out, m, meta, inputs, ref, objs) if objs else (False, why)
        kt.report(r[0], "compile/runtime-%s/%s" % (cc, m), r[1])


def runtime_alone():
    srcs = sorted(glob.glob(os.path.join(kt.ROOT, "runtime", "*.c")))
    for cc in COMPILERS:
        if not srcs:
            kt.report(False, "compile/runtime/%s" % cc, "no runtime/*.c")
            continue
        errs = []
        for s in srcs:
            rc, o, e = kt.run([cc, *WARN, "-O2", "-c", s, "-o", os.devnull])
            if rc != 0:
                errs.append("%s: %s" % (os.path.basename(s), kt.why(rc, e, o)))
        kt.report(not errs, "compile/runtime/%s" % cc, "; ".join(errs))


def main():
    work, scripts = sys.argv[1], sys.argv[2:]
    if not scripts:
        kt.report(False, "compile/models", "no model scripts given")
    kt.pmap(lambda s: one_model(work, s), scripts, jobs=2)
    runtime_alone()


if __name__ == "__main__":
    main()

"""run_ops.py -- t_ops: every op of `kiln ops` against an independent reference.

For each case of op_cases.py (one tiny Lua model) it builds the model, compiles the
generated C with tests/ops/kt_driver.c, runs it, runs the reference interpreter on the same
inputs, and compares generated C vs float64 reference, interpreter vs reference, and
generated C vs interpreter (exact for exact ops, else twice the tolerance). One line per
(op, case): `PASS ops/<op>/<case> (err/tol 0.12)` or `FAIL ops/<op>/<case>: why`.
Then one coverage line per op of `kiln ops` that has no case (FAIL).

usage: /usr/bin/python3 tests/py/run_ops.py WORKDIR [SUBSTRING...]
Cases run two at a time in threads; the work happens in subprocesses (kiln, cc, driver).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kt  # noqa: E402
import op_cases  # noqa: E402


def prepare(case, work):
    """Writes the case's directory: the Lua script, its safetensors file; returns inputs."""
    d = os.path.join(work, case.model)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, case.model + ".lua"), "w") as f:
        f.write(case.lua())
    if case.params:
        kt.write_safetensors(os.path.join(d, case.model + ".safetensors"), case.files or case.params)
    return d, case.draw()


def execute_state(case, d, inputs):
    """execute() for a case with state: one call of the script's entry (run) from the
    case's state, in the C (kt_driver with the state block) and the interpreter."""
    script = os.path.join(d, case.model + ".lua")
    out = os.path.join(d, "out")
    names = [n for (n, _, _, _) in case.inputs]
    ok, why = kt.kiln_build(script, out)
    if not ok:
        return [why], None, None
    meta = kt.load_meta(out, case.model)
    e = kt.entry_of(meta)
    s = meta["states"][0]
    block = bytearray(meta["state_bytes"])
    raw = np.ascontiguousarray(case.draw_state()).tobytes()
    block[s["offset"]:s["offset"] + len(raw)] = raw
    errs, c_res, i_res = [], None, None
    ok, why = kt.compile_driver(out, case.model, meta, entry=e)
    if ok:
        st, why, c_res, _ = kt.run_entry(out, case.model, e, inputs, bytes(block))
        ok = st == "ok"
    if not ok:
        errs.append(why or "the entry returned nonzero")
    ok, why, got, _ = kt.kiln_run_entry(script, e["name"], list(zip(names, inputs)), os.path.join(d, "interp"), bytes(block))
    if ok:
        i_res = [got.get(o) for o in case.outputs]
    else:
        errs.append(why)
    return errs, c_res, i_res


def execute(job):
    """Build, compile, run C, run the interpreter. Returns (reason or "", c outs, interp outs)."""
    case, d, inputs = job
    if case.state is not None:
        return execute_state(case, d, inputs)
    script = os.path.join(d, case.model + ".lua")
    out = os.path.join(d, "out")
    ok, why = kt.kiln_build(script, out)
    c_res, i_res, errs = None, None, []
    if ok:
        meta = kt.load_meta(out, case.model)
        probs = kt.check_meta(meta, case.model) + kt.check_plan(meta)
        if probs:
            errs.append("; ".join(probs))
        ok, why = kt.compile_driver(out, case.model, meta)
        if ok:
            ok, why, c_res = kt.run_driver(out, case.model, meta, inputs)
            if case.c_range:   # must return E_RANGE with nothing touched: the driver exits 6
                if ok:
                    errs.append("the C entry ran on an input it must refuse (E_RANGE)")
                elif "exit 6" not in why:
                    errs.append(why)
                ok, c_res = True, None
        if not ok:
            errs.append(why)
    else:
        errs.append(why)
    names = [n for (n, _, _, _) in case.inputs]
    ok, why, got = kt.kiln_run(script, list(zip(names, inputs)), os.path.join(d, "interp"))
    if case.interp_error:
        if ok:
            errs.append("kiln run accepted inputs it must refuse")
        elif "%s.lua:" % case.model not in why:
            errs.append("kiln run's error does not name the script line: " + why)
    elif ok:
        i_res = [got.get(o) for o in case.outputs]
        if any(r is None for r in i_res):
            errs.append("kiln run --save wrote no file for some output")
            i_res = None
    else:
        errs.append(why)
    return errs, c_res, i_res


def judge(case, inputs, errs, c_res, i_res):
    """Compares the results three ways; returns (ok, detail)."""
    ins = list(inputs) + [np.asarray(v) for v in case.params.values()]
    ins += [case.draw_state()] if case.state is not None else []
    ref = case.ref(*ins)
    refs = list(ref) if isinstance(ref, tuple) else [ref]
    worst = 0.0
    for k, (oname, dt, r) in enumerate(zip(case.outputs, case.dtypes, refs)):
        bound = case.tol.bound(np.asarray(r, dtype=np.float64) if dt == "f32" else r, ins)
        for tag, res in (("C", c_res), ("interp", i_res)):
            if res is None:
                continue
            ok, ratio, msg = kt.compare(res[k], r, dt, bound)
            worst = max(worst, ratio)
            if not ok:
                errs.append("%s vs reference, output %s: %s" % (tag, oname, msg))
        if c_res is not None and i_res is not None:
            ib = 0 if case.tol.kind == "exact" else 2 * np.asarray(bound)
            ok, _, msg = kt.compare(c_res[k], np.asarray(i_res[k], dtype=np.float64)
                                    if dt == "f32" else i_res[k], dt, ib)
            if not ok:
                errs.append("C vs interp, output %s: %s" % (oname, msg))
    if errs:
        return False, " | ".join(errs)
    return True, "%s, err/tol %.2g" % (case.tol.label, worst) if case.tol.kind != "exact" else "exact"


def main():
    work = sys.argv[1]
    pats = sys.argv[2:]
    cases = [c for c in op_cases.CASES if not pats or any(p in c.model for p in pats)]
    seen = set()
    for c in cases:
        if c.model in seen:
            raise SystemExit("duplicate case " + c.model)
        seen.add(c.model)
    jobs = [(c,) + prepare(c, work) for c in cases]
    results = kt.pmap(execute, jobs, jobs=2)
    for (c, d, inputs), (errs, c_res, i_res) in zip(jobs, results):
        try:
            ok, detail = judge(c, inputs, list(errs), c_res, i_res)
        except Exception as e:  # a reference or tolerance that cannot evaluate is a failure
            ok, detail = False, "harness: %s: %s" % (type(e).__name__, e)
        kt.report(ok, "ops/%s/%s" % (c.op, c.name), detail)
    if not pats:
        rc, out, err = kt.run([kt.KILN, "ops"])
        ops = [l.split()[0] for l in out.splitlines() if l.strip()]
        covered = {c.op for c in cases} | {a for c in cases for a in c.also} | {"input"}
        missing = [o for o in ops if o not in covered]
        kt.report(rc == 0 and ops and not missing, "ops/coverage",
                  "%d ops, all have cases" % len(ops) if not missing and ops
                  else "no cases for: %s" % " ".join(missing) if ops else "kiln ops: " + kt.why(rc, err))


if __name__ == "__main__":
    main()

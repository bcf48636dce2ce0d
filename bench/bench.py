#!/usr/bin/python3
"""bench.py — `make bench`: Kiln's generated C next to its peers, in one run.

For every model script in models/ (or those named in $BENCH_MODELS):
  1. `kiln build` it into out/bench/<m>/build;
  2. make seeded random inputs from the build's <m>.json (.npy for the peers and
     `kiln run`, raw bytes for the C driver);
  3. compile bench/bench_main.c with the generated C and the runtime, at -O2 and
     at -O3 -march=native, and time both (the -O2 run also saves its outputs);
  4. time the peers on the same inputs and weights (bench/peers.py): PyTorch CPU
     with 1 thread and with its default / per-core thread counts, NumPy;
  5. time Kiln's reference interpreter, `kiln run`, as a whole process (it traces
     the script and runs the passes too, so it is an upper bound; median of 3).
Then it prints one table: median µs per inference (batch 1) and, in brackets,
that time divided by the time of Kiln's C at -O2 (above 1: slower than Kiln's C),
plus the largest |difference| of each peer's output from the C output, so the
reader can see the rows compute the same thing. Timings are reported, never
judged: nothing here fails because something is slow. A model that does not
build or compile is reported as such and the rest carry on.

Environment: KILN (kiln binary, default build/kiln), CC (default cc),
BENCH_MODELS ("mlp lenet"), BENCH_BUDGET_MS (time budget per measurement, 1000).
"""
import glob
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.dont_write_bytecode = True   # no bench/__pycache__ in the work tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "out", "bench")


def sh(cmd, **kw):
    """Runs cmd (a list); returns (returncode, stdout, stderr) as text."""
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    return p.returncode, p.stdout, p.stderr


def first_line(s):
    s = s.strip()
    return s.splitlines()[0] if s else ""


def make_inputs(meta, in_dir, seed):
    """Seeded random inputs for each declared input: returns [(name, npy path, raw path, array)]."""
    os.makedirs(in_dir, exist_ok=True)
    rng = np.random.default_rng(seed)
    out = []
    for i in meta["inputs"]:
        shape = i["shape"]
        if i["dtype"] == "f32":
            a = rng.standard_normal(shape).astype(np.float32)
        elif i["dtype"] == "i32":
            a = rng.integers(0, 8, size=shape).astype(np.int32)
        else:
            a = rng.integers(0, 2, size=shape).astype(np.bool_)
        npy = os.path.join(in_dir, i["name"] + ".npy")
        raw = os.path.join(in_dir, i["name"] + ".bin")
        np.save(npy, a, allow_pickle=False)
        a.tofile(raw)
        out.append((i["name"], npy, raw, a))
    return out


def compile_driver(model, build_dir, exe, opt_flags):
    """Compiles bench_main.c + <m>.c + the runtime into exe; returns an error line or None."""
    cc = os.environ.get("CC", "cc")
    up = model.upper()
    defs = [f'-DBENCH_HEADER="{model}.h"', f"-DBENCH_RUN_V={model}_run_v",
            f"-DBENCH_WEIGHTS_SIZE={up}_WEIGHTS_SIZE", f"-DBENCH_WEIGHTS_CHECKSUM={up}_WEIGHTS_CHECKSUM",
            f"-DBENCH_ARENA_SIZE={up}_ARENA_SIZE", f"-DBENCH_NUM_INPUTS={up}_NUM_INPUTS",
            f"-DBENCH_NUM_OUTPUTS={up}_NUM_OUTPUTS"]
    cmd = [cc, "-std=c11", *opt_flags, "-D_POSIX_C_SOURCE=200809L", "-I", build_dir,
           "-I", os.path.join(ROOT, "runtime"), *defs, "-o", exe,
           os.path.join(ROOT, "bench", "bench_main.c"), os.path.join(build_dir, model + ".c"),
           os.path.join(ROOT, "runtime", "kiln_runtime.c"), "-lm"]
    rc, _, err = sh(cmd)
    return None if rc == 0 else f"{' '.join(opt_flags)}: {first_line(err)}"


def run_driver(exe, weights, inputs, outputs, budget_ms):
    """Runs a compiled driver; returns (median_us, min_us) or raises RuntimeError."""
    cmd = [exe, weights, str(budget_ms), *[raw for _, _, raw, _ in inputs],
           *[f"{nbytes}:{path}" for nbytes, path in outputs]]
    rc, out, err = sh(cmd)
    if rc != 0:
        raise RuntimeError(first_line(err) or f"exit status {rc}")
    med, mn, _ = out.split()
    return float(med), float(mn)


def time_kiln_run(kiln, lua, inputs, runs=3):
    """Median wall time in µs of `kiln run` as a whole process, or raises RuntimeError."""
    cmd = [kiln, "run", lua, "--limit", "1"]
    for name, npy, _, _ in inputs:
        cmd += ["--input", f"{name}={npy}"]
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        rc, _, err = sh(cmd)
        times.append((time.perf_counter() - t) * 1e6)
        if rc != 0:
            raise RuntimeError(first_line(err) or f"exit status {rc}")
    return sorted(times)[len(times) // 2]


def bench_model(kiln, lua, budget_ms, seed):
    """Everything for one model: returns {"model", "cols": {label: (median, min, diff)}, "notes": [...]}."""
    model = os.path.splitext(os.path.basename(lua))[0]
    res = {"model": model, "cols": {}, "notes": []}
    mdir = os.path.join(OUT, model)
    build_dir = os.path.join(mdir, "build")
    os.makedirs(mdir, exist_ok=True)
    rc, _, err = sh([kiln, "build", lua, "-o", build_dir])
    if rc != 0:
        res["notes"].append(f"kiln build failed: {first_line(err)}")
        return res
    with open(os.path.join(build_dir, model + ".json")) as f:
        meta = json.load(f)
    if "entries" in meta:   # no single forward to time: stories' prefill and decode rates are make demo's
        res["notes"].append("entry points %s over state: not timed here (make demo prints prefill and decode "
                            "tokens/s)" % ", ".join(e["name"] for e in meta["entries"]))
        return res
    inputs = make_inputs(meta, os.path.join(mdir, "in"), seed)
    c_dir = os.path.join(mdir, "c_out")
    os.makedirs(c_dir, exist_ok=True)
    outputs = [(o["bytes"], os.path.join(c_dir, o["name"] + ".bin")) for o in meta["outputs"]]
    weights = os.path.join(build_dir, model + ".weights")

    for label, flags in (("C -O2", ["-O2"]), ("C -O3 native", ["-O3", "-march=native"])):
        exe = os.path.join(mdir, "bench_" + label.replace(" ", "_").replace("-", ""))
        problem = compile_driver(model, build_dir, exe, flags)
        if problem:
            res["notes"].append(f"{label}: compile failed: {problem}")
            continue
        try:
            # only the -O2 run's outputs are kept for the comparison
            outs = outputs if label == "C -O2" else [(n, p + ".o3") for n, p in outputs]
            med, mn = run_driver(exe, weights, inputs, outs, budget_ms)
            res["cols"][label] = (med, mn, "-")
        except RuntimeError as e:
            res["notes"].append(f"{label}: run failed: {e}")

    c_outs = None
    if "C -O2" in res["cols"]:
        dt = {"f32": "<f4", "i32": "<i4", "bool": "u1"}
        c_outs = [np.fromfile(p, dtype=dt[o["dtype"]]).astype(np.float32)
                  for o, (_, p) in zip(meta["outputs"], outputs)]
    _, params = peers.load_kiln_weights(build_dir, model)
    for label, med, mn, diff in peers.run_peers(model, meta, params, [a for *_, a in inputs], c_outs, budget_ms):
        if med is None:
            res["notes"].append(f"{label}: not timed: {diff}")
        else:
            res["cols"][label] = (med, mn, diff)
    try:
        res["cols"]["kiln run"] = (time_kiln_run(kiln, lua, inputs), None, "-")
    except RuntimeError as e:
        res["notes"].append(f"kiln run failed: {e}")
    return res


def fmt_us(us):
    return f"{us:.1f}" if us < 1000 else f"{us:.0f}"


def report(results):
    """Prints the table: µs (ratio to C -O2), then max |diff| per peer, then notes."""
    labels = []
    for r in results:
        for k in r["cols"]:
            if k not in labels:
                labels.append(k)
    order = ["C -O2", "C -O3 native"] + sorted(l for l in labels if l.startswith("torch")) + ["numpy", "kiln run"]
    labels = [l for l in order if l in labels]
    w = 18
    print()
    print("Median µs per inference (batch 1); in brackets: that time / Kiln's C -O2 time")
    print("(above 1 means slower than Kiln's generated C).")
    print("model".ljust(12) + "".join(l.rjust(w) for l in labels))
    for r in results:
        base = r["cols"].get("C -O2", (None,))[0]
        line = r["model"].ljust(12)
        for l in labels:
            c = r["cols"].get(l)
            if c is None:
                cell = "-"
            elif base is None or l == "C -O2":
                cell = fmt_us(c[0])
            else:
                cell = f"{fmt_us(c[0])} ({c[0] / base:.2f})"
            line += cell.rjust(w)
        print(line)
    print()
    print("Largest |output - Kiln C output| (same inputs, Kiln's weights; rel: over the largest |C output|):")
    for r in results:
        diffs = [f"{l} {c[2]}" for l, c in r["cols"].items() if c[2] != "-"]
        print(f"  {r['model']}: " + (", ".join(diffs) if diffs else "-"))
    notes = [(r["model"], n) for r in results for n in r["notes"]]
    if notes:
        print()
        print("Notes:")
        for m, n in notes:
            print(f"  {m}: {n}")
    print()
    print("kiln run is the whole process (Lua trace, passes, reference interpreter, printing),")
    print("median of 3 runs: an upper bound on the interpreter's time per inference.")
    print(f"torch-Nt: PyTorch {peers.torch.__version__} with N threads (its default here: "
          f"{peers.TORCH_DEFAULT_THREADS}); Kiln's C and NumPy's Python code are single-threaded")
    print(f"(NumPy's BLAS may not be). {os.cpu_count()} cores; the machine's load affects every column,")
    print("and a multi-threaded column most when other work holds a core.")


def main():
    kiln = os.environ.get("KILN", os.path.join(ROOT, "build", "kiln"))
    budget = float(os.environ.get("BENCH_BUDGET_MS", "1000"))
    names = os.environ.get("BENCH_MODELS", "").split()
    luas = [os.path.join(ROOT, "models", n + ".lua") for n in names] if names else \
        sorted(glob.glob(os.path.join(ROOT, "models", "*.lua")))
    os.makedirs(OUT, exist_ok=True)
    results = []
    for lua in luas:
        print(f"bench: {os.path.relpath(lua, ROOT)} ...", flush=True)
        results.append(bench_model(kiln, lua, budget, seed=1234))
    report(results)


if __name__ == "__main__":
    main()

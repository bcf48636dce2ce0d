#!/usr/bin/python3
"""ab.py — one model's generated C before and after a change, timed in one process.

    python3 bench/ab.py MODEL.lua --base BASE_KILN [--kiln KILN] [--cc "gcc -O2 -march=x86-64-v3"]
                        [--pairs 40] [--threads 1] [--args=--unsafe-lua] [--b-args=--no-winograd]
                        [--b-cc "gcc -O3 -march=native"] [--keep DIR]

Builds MODEL.lua with BASE_KILN (A: say a `git worktree` of the commit before) and with KILN
(B, default build/kiln), compiles both into one executable (bench/ab/: each build's exported
functions renamed), and calls them in alternation on the same inputs (bench/ab/ab_main.c):
both sides see the same machine, a few milliseconds apart. Prints each side's minimum and
median time, the median over pairs of B's time / A's, and whether the outputs are the same
bytes. --keep DIR builds in DIR and leaves it there: DIR/ab, run again under `perf record`
(its command is the last line ab.py prints, after "kept: "), tells which kernels take the
time (the same kiln on both sides: twice the samples). --b-args gives B build options of
its own: the same kiln with and without --no-winograd times what Winograd's transforms buy; --b-cc compiles B with other flags (the
same kiln twice: what -march=native buys over the default flags). --threads N: both through
<m>_run_par on one kiln_pool of N threads (wall time), else the plain run function (the run function without a parallel-for). Inputs: standard normal f32
(seeded), zeros for integer inputs. A model with entry points is not supported.

The peer benchmark (`make bench`) compares Kiln with other runtimes; this compares Kiln with
itself, where a change of a few percent must be told from the machine's own swings
(docs/bench.md, "Before and after").
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit("ab: %s failed:\n%s%s" % (" ".join(cmd[:3]), p.stdout[-2000:], p.stderr[-2000:]))
    return p.stdout


def seeded_inputs(sig_path, d, who, entries=False):
    """The inputs of the model whose m.json is sig_path, written into d as in0.bin, in1.bin...:
    standard normal f32 (seeded), zeros for integer inputs; their paths. A model with entry
    points: with entries, every entry's inputs in declaration order (in<k>_<i>.bin), one list
    per entry; else an exit (who: the tool, for the message)."""
    sig = json.load(open(sig_path))
    if "entries" in sig and not entries:
        sys.exit("%s: the model has entry points; it times plain models" % who)
    rng = np.random.default_rng(1)
    lists = []
    for k, e in enumerate(sig["entries"] if "entries" in sig else [sig]):
        files = []
        for i, x in enumerate(e["inputs"]):
            v = rng.standard_normal(x["shape"]).astype("<f4") if x["dtype"] == "f32" else \
                np.zeros(x["shape"], {"i32": "<i4", "i64": "<i8"}.get(x["dtype"], "u1"))
            files.append(os.path.join(d, ("in%d_%d.bin" % (k, i)) if "entries" in sig else ("in%d.bin" % i)))
            v.tofile(files[-1])
        lists.append(files)
    return lists if "entries" in sig else lists[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--base", required=True, help="the kiln binary of the build before the change (A)")
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "kiln"), help="the kiln binary after it (B)")
    ap.add_argument("--cc", default="gcc -O2 -march=x86-64-v3", help="compiler and flags (for B too, unless --b-cc)")
    ap.add_argument("--pairs", type=int, default=40)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--args", default="", help="extra `kiln build` options for both")
    ap.add_argument("--b-args", default="", help="extra `kiln build` options for B alone")
    ap.add_argument("--b-cc", default="", help="compiler and flags for B (default: --cc)")
    ap.add_argument("--keep", default="", help="build in this directory and leave it (its `ab` for perf: add -g to --cc)")
    a = ap.parse_args()
    cc_of = {"a": shlex.split(a.cc), "b": shlex.split(a.b_cc or a.cc)}
    with tempfile.TemporaryDirectory(prefix="kiln-ab-") as tmp:
        d = os.path.abspath(a.keep) if a.keep else tmp
        os.makedirs(d, exist_ok=True)
        objs, weights = [], []
        for side, kiln, extra in (("a", a.base, ""), ("b", a.kiln, a.b_args)):
            out = os.path.join(d, side)
            run([kiln, "build", a.model, "-o", out, "--name", "m"] + shlex.split(a.args) + shlex.split(extra))
            ren = ["-Dm_run=ab_%s_run" % side, "-Dm_run_v=ab_%s_run_v" % side, "-Dm_run_par=ab_%s_run_par" % side]
            inc = ["-std=c11", "-D_POSIX_C_SOURCE=200809L", "-I" + out, "-I" + os.path.join(ROOT, "runtime")]
            for src, obj in ((os.path.join(out, "m.c"), "model"), (os.path.join(ROOT, "bench/ab/ab_side.c"), "side")):
                o = os.path.join(d, "%s_%s.o" % (side, obj))
                run(cc_of[side] + inc + ren + ["-DKILN_MODEL=m", "-DKILN_MODEL_UPPER=M", "-DAB_SIDE=ab_" + side, "-c", src, "-o", o])
                objs.append(o)
            weights.append(os.path.join(out, "m.weights"))
        files = seeded_inputs(os.path.join(d, "a", "m.json"), d, "ab")
        exe = os.path.join(d, "ab")
        san = [f for f in cc_of["b"] if f.startswith("-fsanitize") and f not in cc_of["a"]]   # B's runtimes too
        run(cc_of["a"] + san + ["-std=c11", "-I" + os.path.join(ROOT, "runtime"), "-I" + os.path.join(ROOT, "bench/ab")] + objs +
            [os.path.join(ROOT, "bench/ab/ab_main.c"), os.path.join(ROOT, "runtime/kiln_runtime.c"),
             os.path.join(ROOT, "runtime/kiln_pool.c"), "-pthread", "-lm", "-o", exe])
        print("%s, %d pairs, %d thread%s; A: %s, %s; B: %s, %s" % (a.model, a.pairs, a.threads, "s" if a.threads > 1 else "",
                                                                   a.base, a.cc, a.kiln, a.b_cc or a.cc))
        sys.stdout.write(run([exe] + weights + [str(a.pairs), str(a.threads)] + files))
        if a.keep:
            print("kept: " + " ".join(shlex.quote(x) for x in [exe] + weights + [str(a.pairs), str(a.threads)] + files))


if __name__ == "__main__":
    main()

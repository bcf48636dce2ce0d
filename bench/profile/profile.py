#!/usr/bin/python3
"""profile.py -- where a model's generated C spends its time, kernel by kernel.

    python3 bench/profile/profile.py MODEL.lua [--args="-D k=v ..."] [--cc "gcc -O2 -march=x86-64-v3"]
                                     [--calls 20] [--threads 1] [--top 25] [--json FILE] [--keep DIR]

Builds MODEL.lua with `kiln build --profile` (every kernel call of the run function timed
into the table <m>_profile; docs/output.md, "Profiling"), compiles it with
bench/profile/profile_main.c, runs one warm-up call and then --calls calls on seeded inputs
(standard normal f32, zeros for integer inputs; --threads N > 1: through <m>_run_par on a
kiln_pool), and prints each kernel's milliseconds a call, share, GFLOP/s (from the FLOPs the
compiler counted for products: matmul, convolution, attention), ops and Lua lines, the
slowest first, then the same summed by the kernel's first op. "driver" is the calls' wall
time as the driver saw it: the kernels' sum falls short of it by the clock reads. The
timings are one machine's at one moment (docs/bench.md, "Caveats"); nothing is asserted.
A model with entry points: a call is every entry once, in declaration order, on one state
block that starts zeroed and carries over (profile_main.c); each entry's kernels are its own
rows (a named entry's kernel names start with the entry's), summed again "by entry".

--ort [WORKLOAD]: a peer workload of `make bench` (bench/peerbench; the model's file name when
not given): ONNX Runtime's own profiler on its ONNX twin, same threads and calls, one warm-up
(bench/peerbench/ort_profile.js), printed the same way (by node, then by op type; ORT names
a node after its fused output), so the two can be read layer by layer. It needs what
`BENCH=peers make bench` installs and prepares (onnxruntime-node, the workload's ONNX and
inputs under .cache/bench); ORT runs on the workload's inputs, Kiln on seeded ones of the
same shapes.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import ab  # noqa: E402 (bench/ab.py: the same seeded inputs)


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("profile: %s failed:\n%s%s" % (" ".join(cmd[:3]), p.stdout[-2000:], p.stderr[-2000:]))
    return p.stdout


def measure(a, d):
    """Builds, compiles and runs in directory d; returns (driver ns, calls, kernel rows)."""
    kiln = a.kiln or os.path.join(ROOT, "build", "kiln")
    out = os.path.join(d, "m")
    run([kiln, "build", a.model, "--profile", "-o", out, "--name", "m"] + shlex.split(a.args))
    sig = json.load(open(os.path.join(out, "m.json")))
    files = ab.seeded_inputs(os.path.join(out, "m.json"), d, "profile", entries=True)   # bench/ab.py's inputs
    extra = []
    if "entries" in sig:   # one call: every entry once, in order (profile_main.c)
        with open(os.path.join(d, "prof_entries.h"), "w") as f:
            f.write(entries_header(sig, open(os.path.join(out, "m.h")).read()))
        files = [p for fs in files for p in fs]
        extra = ["-DKILN_PROF_ENTRIES", "-I" + d]
    exe = os.path.join(d, "prof")
    run(shlex.split(a.cc) + ["-std=c11", "-D_POSIX_C_SOURCE=200809L", "-I" + out, "-I" + os.path.join(ROOT, "runtime"),
                             "-DKILN_MODEL=m", "-DKILN_MODEL_UPPER=M"] + extra + [os.path.join(ROOT, "bench/profile/profile_main.c"),
                             os.path.join(out, "m.c"), os.path.join(ROOT, "runtime/kiln_runtime.c"),
                             os.path.join(ROOT, "runtime/kiln_pool.c"), "-pthread", "-lm", "-o", exe])
    lines = run([exe, os.path.join(out, "m.weights"), str(a.calls), str(a.threads)] + files).splitlines()
    _, total, calls = lines[0].split("\t")
    rows = []
    entry_of = {k["name"]: e["name"] for e in sig.get("entries", []) for k in e["kernels"]}
    for ln in lines[1:]:
        name, n, ns, flops, op, loc = ln.split("\t")
        rows.append({"kernel": name, "calls": int(n), "ns": int(ns), "flops": float(flops), "op": op, "loc": loc})
        if name in entry_of:
            rows[-1]["entry"] = entry_of[name]
    return int(total), int(calls), rows


def entries_header(sig, header):
    """prof_entries.h for profile_main.c: the entries of the model whose m.json is sig, in
    declaration order (header: its m.h, which says whether an entry returns a status)."""
    es = sig["entries"]
    ins = [x["bytes"] for e in es for x in e["inputs"]]
    outs = [x["bytes"] for e in es for x in e["outputs"]]
    state = bool(sig.get("states"))
    lines = ["/* prof_entries.h -- written by bench/profile/profile.py: %s's entries in declaration order. */" % sig["model"],
             "enum { PROF_ENTRIES = %d, PROF_INPUTS = %d, PROF_OUTPUTS = %d, PROF_STATE_SIZE = %d };" %
             (len(es), len(ins), len(outs), sig.get("state_bytes", 0)),
             "static const char *const prof_names[PROF_ENTRIES] = {%s};" % ", ".join('"%s"' % e["name"] for e in es),
             "static const int prof_nin[PROF_ENTRIES] = {%s};" % ", ".join(str(len(e["inputs"])) for e in es),
             "static const int prof_nout[PROF_ENTRIES] = {%s};" % ", ".join(str(len(e["outputs"])) for e in es),
             "static const size_t prof_in_size[PROF_INPUTS + 1] = {%s};" % ", ".join("%du" % b for b in ins + [0]),
             "static const size_t prof_out_size[PROF_OUTPUTS + 1] = {%s};" % ", ".join("%du" % b for b in outs + [0]),
             "static int prof_call(int e, kiln_pool *pool, const void *w, void *state, void *arena, const void *const *in,",
             "                     void *const *out) {",
             "  (void)state;",
             "  switch (e) {"]
    for k, e in enumerate(es):
        fn = "m_" + e["name"]   # built with --name m
        st = "state, " if state else ""
        status = ("int %s_v(" % fn) in header   # an entry that checks run-time offsets returns M_OK or an error
        lines.append("  case %d:" % k)
        if status:
            lines.append("    return pool ? %s_par(kiln_pool_for, pool, w, %sarena, in, out) : %s_v(w, %sarena, in, out);" %
                         (fn, st, fn, st))
        else:
            lines.append("    if (pool)")
            lines.append("      %s_par(kiln_pool_for, pool, w, %sarena, in, out);" % (fn, st))
            lines.append("    else")
            lines.append("      %s_v(w, %sarena, in, out);" % (fn, st))
            lines.append("    return 0;")
    lines += ["  }", "  return 0;", "}", ""]
    return "\n".join(lines)


def measure_ort(workload, threads, calls):
    """ORT's profile of a peer workload: (model_run ns, calls, node rows as measure's)."""
    sys.path.insert(0, os.path.join(ROOT, "bench", "peerbench"))
    from cache import CACHE   # noqa: E402 (bench/peerbench's own modules)
    import workers            # noqa: E402
    if not (CACHE / "data" / workload / "spec.json").exists():
        sys.exit("profile: no prepared workload %s under %s (run `BENCH=peers BENCH_WORKLOADS=%s make bench` once)" %
                 (workload, CACHE, workload))
    env = dict(workers.thread_env(threads), NODE_PATH=str(workers.node_modules()))
    p = subprocess.run(["node", os.path.join(ROOT, "bench/peerbench/ort_profile.js"), str(CACHE), workload, str(threads),
                        str(calls)], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit("profile: ort_profile.js failed:\n" + p.stderr[-2000:])
    lines = p.stdout.splitlines()
    _, total, n = lines[0].split("\t")
    rows = []
    for ln in lines[1:]:
        name, op, k, ns = ln.split("\t")
        rows.append({"kernel": name, "calls": int(k), "ns": int(ns), "flops": 0.0, "op": op, "loc": "ORT"})
    return int(total), int(n), rows


def sums(rows, key):
    """{key(row): [kernels, ns, flops]} over rows, in the order the keys first appear."""
    out = {}
    for r in rows:
        g = out.setdefault(key(r), [0, 0, 0.0])
        g[0] += 1
        g[1] += r["ns"]
        g[2] += r["flops"]
    return out


def table(rows, calls, total_ns, top):
    """The report's lines: kernels slowest first, then the sums by first op (and by entry)."""
    def line(label, ns, flops, what):
        ms = ns / calls / 1e6
        gf = "%8.1f" % (flops * calls / ns) if flops and ns else "%8s" % "-"
        label = label if len(label) <= 40 else ".." + label[-38:]   # ORT's names differ at their ends
        return "%-40s %9.3f %6.1f%% %s  %s" % (label, ms, 100.0 * ns / total_ns, gf, what)
    out = ["%-40s %9s %7s %8s  %s" % ("kernel", "ms/call", "share", "GFLOP/s", "ops (Lua lines)")]
    for r in sorted(rows, key=lambda r: -r["ns"])[:top]:
        out.append(line(r["kernel"], r["ns"], r["flops"], "%s (%s)" % (r["op"], r["loc"])))
    if len(rows) > top:
        rest = sorted(rows, key=lambda r: -r["ns"])[top:]
        out.append(line("(%d more)" % len(rest), sum(r["ns"] for r in rest), 0, ""))
    out.append("")
    out.append("%-40s %9s %7s %8s  %s" % ("by first op", "ms/call", "share", "GFLOP/s", "kernels"))
    for op, (n, ns, flops) in sorted(sums(rows, lambda r: r["op"].split(" + ")[0]).items(), key=lambda kv: -kv[1][1]):
        out.append(line(op, ns, flops, str(n)))
    entries = sums([r for r in rows if "entry" in r], lambda r: r["entry"])   # in declaration order
    if entries:
        out.append("")
        out.append("%-40s %9s %7s %8s  %s" % ("by entry", "ms/call", "share", "GFLOP/s", "kernels"))
        for name, (n, ns, flops) in entries.items():
            out.append(line(name, ns, flops, str(n)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--kiln", default="", help="the kiln binary (default build/kiln)")
    ap.add_argument("--args", default="", help="extra `kiln build` options")
    ap.add_argument("--cc", default="gcc -O2 -march=x86-64-v3", help="compiler and flags")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--top", type=int, default=25, help="kernels listed (the rest summed)")
    ap.add_argument("--json", default="", help="also write the rows here")
    ap.add_argument("--keep", default="", help="build in this directory and leave it")
    ap.add_argument("--ort", nargs="?", const="", default=None, metavar="WORKLOAD",
                    help="also ONNX Runtime's profile of this peer workload (default: the model's file name)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kiln-profile-") as tmp:
        d = os.path.abspath(a.keep) if a.keep else tmp
        os.makedirs(d, exist_ok=True)
        total, calls, rows = measure(a, d)
    ksum = sum(r["ns"] for r in rows)
    flops = sum(r["flops"] for r in rows)
    print("%s: %d call%s, %d thread%s, %s; load average %.2f" % (a.model, calls, "s" if calls > 1 else "", a.threads,
                                                                 "s" if a.threads > 1 else "", a.cc, os.getloadavg()[0]))
    print("driver %.3f ms a call; kernels %.3f ms (%d kernels, %.1f GFLOP/s over the %.3f GFLOP counted)" %
          (total / calls / 1e6, ksum / calls / 1e6, len(rows), flops * calls / ksum if ksum else 0, flops / 1e9))
    print("\n".join(table(rows, calls, ksum or 1, a.top)))
    report = {"model": a.model, "cc": a.cc, "threads": a.threads, "calls": calls, "driver_ns": total, "kernels": rows}
    if a.ort is not None:
        workload = a.ort or os.path.splitext(os.path.basename(a.model))[0]
        ototal, ocalls, orows = measure_ort(workload, a.threads, a.calls)
        osum = sum(r["ns"] for r in orows)
        print("\nONNX Runtime, %s: %d calls; model_run %.3f ms a call; nodes %.3f ms (%d nodes); Kiln's kernels / ORT's "
              "nodes %.2f" % (workload, ocalls, ototal / ocalls / 1e6, osum / ocalls / 1e6, len(orows),
                              (ksum / calls) / (osum / ocalls) if osum else 0))
        print("\n".join(table(orows, ocalls, osum or 1, a.top)).replace("by first op", "by op type").replace(
            "ops (Lua lines)", "op"))
        report["ort"] = {"workload": workload, "calls": ocalls, "model_run_ns": ototal, "nodes": orows}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()

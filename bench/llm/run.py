"""run.py -- make bench's LLM part (BENCH=llm): Kiln's KV-cache decode and prefill next to
a plain scalar C loop (bench/llm/plain_llama.c) and PyTorch eager with a KV cache, in one
run, interleaved rounds, outputs checked first, wall and process CPU time, ratios per round.

Workloads:
  stories decode@P   models/stories.lua (TinyStories 260K): one decode at position P =
                     1, 128, 511, after the cache was filled with positions 0..P-1
  stories prefill32  one prefill of 32 tokens at position 0 (the plain loop and PyTorch's
                     step function run the 32 positions one after another; Kiln's entry
                     runs the chunk at once)
  llama100m decode@P models/llm.lua on a seeded 100M-parameter Llama (bench/llm/prep.py):
                     P = 1, 64 (PyTorch not run: torch_stories implements the stories
                     layout only)
  llama100m prefill32  one prefill of 32 tokens at 0, as built by default (logits of
                     every row) and with -D prefill_logits=last ("kiln last": the row
                     generation samples from, the classifier on it alone; its logits
                     are the default build's last row)
Peers: Kiln's generated C at the documented default flags (-O2 -march=x86-64-v3 on x86-64,
-O2 elsewhere: docs/output.md "Which flags") and at -O3 -march=native; the plain loop at -O3
-march=native (and the default flags); PyTorch float32, 1 thread. Each timed call
is idempotent (the same token at the same position rewrites the same cache row), so a
process repeats it REPS times and reports the median; a round runs every peer once.
Before timing, every peer's logits of the timed call must be within 1e-3 of the largest
|logit| of Kiln's (default flags): same model, same weights, same tokens.

Environment: BENCH_QUICK=1 (2 rounds, few reps), BENCH_ROUNDS, KILN, CC.
The JSON's time_vs_kiln_default was time_vs_kiln_O2 before 2026-11-28, when the default was plain -O2.
Writes bench/results/llm-<date>.json.
"""
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

# 1 thread for PyTorch and the BLAS under it (Debian's torch calls the system OpenBLAS,
# which numpy loads first): set before either is imported.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "state"))
import prep  # noqa: E402
import torch_stories  # noqa: E402

CACHE = os.path.join(ROOT, ".cache", "bench", "llm")
KILN = os.environ.get("KILN", os.path.join(ROOT, "build", "kiln"))
CC = os.environ.get("CC", "cc")
QUICK = os.environ.get("BENCH_QUICK", "") not in ("", "0")
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "2" if QUICK else "5"))


def sh(cmd, cwd=None):
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("bench/llm: %s: %s" % (" ".join(cmd[:3]), (p.stderr or p.stdout)[-600:]))
    return p.stdout


# The documented default flags (docs/output.md, "Which flags"): on x86-64 the v3 level (AVX2 +
# FMA); a plain -O2 there has no FMA instruction, and every matrix product's fmaf is a libm call.
DEFAULT = ["-O2", "-march=x86-64-v3"] if platform.machine() in ("x86_64", "AMD64") else ["-O2"]
DEF = " ".join(DEFAULT)


def build_kiln(script, name, extra=()):
    out = os.path.join(CACHE, "kiln_" + name)
    sh([KILN, "build", script, "-o", out, "--name", name, *extra])
    exes = {}
    for tag, flags in [("default", DEFAULT), ("native", ["-O3", "-march=native"])]:
        exe = os.path.join(out, "run_" + tag)
        sh([CC, "-std=c11", *flags, "-D_POSIX_C_SOURCE=200809L", "-I" + out, "-I" + os.path.join(ROOT, "runtime"),
            "-DKM=" + name, "-DKMU=" + name.upper(), '-DMODEL_HEADER="%s.h"' % name, "-o", exe,
            os.path.join(HERE, "kiln_llm.c"), os.path.join(out, name + ".c"),
            os.path.join(ROOT, "runtime", "kiln_runtime.c"), "-lm"])
        exes[tag] = [exe, os.path.join(out, name + ".weights")]
    return exes


def build_plain(raw):
    exes = {}
    for tag, flags in [("default", DEFAULT), ("native", ["-O3", "-march=native"])]:
        exe = os.path.join(CACHE, "plain_" + "_".join(f.strip("-").replace("=", "_") for f in flags))
        if not os.path.exists(exe):
            sh([CC, "-std=c11", *flags, "-o", exe, os.path.join(HERE, "plain_llama.c"), "-lm"])
        exes[tag] = [exe, raw]
    return exes


def run_c(cmd, tokens_file, pos, reps, tag):
    out = os.path.join(CACHE, "logits_%s.bin" % tag)
    line = sh(cmd + [tokens_file, pos, str(reps), out]).split()
    return float(line[1]), float(line[2]), np.fromfile(out, np.float32)


class TorchPeer:
    """PyTorch eager, float32, 1 thread: torch_stories' step function with its KV cache."""
    def __init__(self, tokens):
        import torch
        torch.set_num_threads(1)
        torch.set_num_interop_threads(1)
        self.m = torch_stories.Stories(os.path.join(ROOT, "models", "weights", "stories260K.safetensors"),
                                       dtype=torch.float32)
        self.tokens = tokens

    def __call__(self, pos, reps):
        prefill = pos.startswith("p")
        n = int(pos[1:] if prefill else pos)
        self.m.reset()
        if not prefill:
            for p in range(n):
                self.m.step(int(self.tokens[p]), p)
        walls, cpus = [], []
        for _ in range(reps):
            t0, c0 = time.perf_counter(), time.process_time()
            if prefill:
                for p in range(n):
                    logits = self.m.step(int(self.tokens[p]), p)
            else:
                logits = self.m.step(int(self.tokens[n]), n)
            walls.append((time.perf_counter() - t0) * 1e6)
            cpus.append((time.process_time() - c0) * 1e6)
        return statistics.median(walls), statistics.median(cpus), logits.numpy()


def workload(name, peers, tokens_file, pos, reps):
    """Checks, then times, one workload: {peer: {"wall": [...], "cpu": [...]}}, ratios."""
    base = None
    res = {}
    for tag, fn in peers.items():                           # outputs first
        _, _, logits = fn(pos, 1)
        if base is None:
            base = logits
        err = float(np.max(np.abs(logits.astype(np.float64) - base)))
        bound = 1e-3 * float(np.max(np.abs(base)))
        if not err <= bound:
            sys.exit("bench/llm: %s: %s's logits differ from Kiln's by %.3g (bound %.3g)" % (name, tag, err, bound))
        res[tag] = {"wall": [], "cpu": []}
    for _ in range(ROUNDS):
        for tag, fn in peers.items():
            w, c, _ = fn(pos, reps)
            res[tag]["wall"].append(w)
            res[tag]["cpu"].append(c)
    return res


def main():
    os.makedirs(CACHE, exist_ok=True)
    rng = np.random.default_rng(42)
    rows = []
    # ---- stories
    vocab = prep.raw_stories(os.path.join(CACHE, "stories.raw"))
    tok = os.path.join(CACHE, "stories_tokens.bin")
    tokens = rng.integers(0, vocab, 512).astype(np.int32)
    tokens.tofile(tok)
    kiln = build_kiln(os.path.join(ROOT, "models", "stories.lua"), "stories")
    plain = build_plain(os.path.join(CACHE, "stories.raw"))
    tp = TorchPeer(tokens)
    peers = {
        "kiln " + DEF: lambda pos, reps: run_c(kiln["default"], tok, pos, reps, "k2"),
        "kiln -O3 native": lambda pos, reps: run_c(kiln["native"], tok, pos, reps, "kn"),
        "plain C -O3 native": lambda pos, reps: run_c(plain["native"], tok, pos, reps, "pn"),
        "plain C " + DEF: lambda pos, reps: run_c(plain["default"], tok, pos, reps, "p2"),
        "pytorch": tp,
    }
    reps = 20 if QUICK else 200
    for pos in ["1", "128", "511", "p32"]:
        name = "stories " + ("prefill32" if pos == "p32" else "decode@" + pos)
        rows.append((name, "32 tokens" if pos == "p32" else "1 token",
                     workload(name, peers, tok, pos, reps if pos != "p32" else max(3, reps // 10))))
    # ---- a seeded 100M Llama through models/llm.lua
    ck = os.path.join(CACHE, "seeded100m")
    prep.seeded_checkpoint(ck)
    prep.raw_hf(os.path.join(CACHE, "seeded100m.raw"), ck, 1024)
    tok100 = os.path.join(CACHE, "seeded100m_tokens.bin")
    rng.integers(0, 32000, 1024).astype(np.int32).tofile(tok100)
    k100 = build_kiln(os.path.join(ROOT, "models", "llm.lua"), "llama100m", ["-D", "checkpoint=" + ck])
    p100 = build_plain(os.path.join(CACHE, "seeded100m.raw"))
    peers100 = {
        "kiln " + DEF: lambda pos, reps: run_c(k100["default"], tok100, pos, reps, "k2"),
        "kiln -O3 native": lambda pos, reps: run_c(k100["native"], tok100, pos, reps, "kn"),
        "plain C -O3 native": lambda pos, reps: run_c(p100["native"], tok100, pos, reps, "pn"),
    }
    for pos in ["1", "64"]:
        rows.append(("llama100m decode@" + pos, "1 token", workload("llama100m", peers100, tok100, pos, 3 if QUICK else 9)))
    k100l = build_kiln(os.path.join(ROOT, "models", "llm.lua"), "llama100m_last",
                       ["-D", "checkpoint=" + ck, "-D", "prefill_logits=last"])
    peers100p = {
        "kiln " + DEF: peers100["kiln " + DEF],
        "kiln last " + DEF: lambda pos, reps: run_c(k100l["default"], tok100, pos, reps, "kl2"),
        "kiln last -O3 native": lambda pos, reps: run_c(k100l["native"], tok100, pos, reps, "kln"),
        "kiln -O3 native": peers100["kiln -O3 native"],
        "plain C -O3 native": peers100["plain C -O3 native"],
    }
    rows.append(("llama100m prefill32", "32 tokens", workload("llama100m prefill32", peers100p, tok100, "p32", 2 if QUICK else 5)))
    report(rows)


def report(rows):
    load = os.getloadavg()
    print("LLM decode/prefill (median of %d rounds; wall µs per call, process CPU µs in brackets; "
          "load average %.2f)" % (ROUNDS, load[0]))
    out = []
    for name, unit, res in rows:
        base = res["kiln " + DEF]
        print("\n%s (%s a call)" % (name, unit))
        for tag, r in res.items():
            w, c = statistics.median(r["wall"]), statistics.median(r["cpu"])
            ratio = statistics.median([x / y for x, y in zip(r["wall"], base["wall"])])
            tps = (32 if unit.startswith("32") else 1) / (w * 1e-6)
            print("  %-32s %12.1f µs [%10.1f]  %10.0f tok/s   %6.2fx Kiln's time at %s" % (tag, w, c, tps, ratio, DEF))
            out.append({"workload": name, "peer": tag, "wall_us": r["wall"], "cpu_us": r["cpu"], "tok_s": tps,
                        "time_vs_kiln_default": ratio})
    goal = [r for r in out if r["peer"] == "plain C -O3 native" and r["workload"].startswith("stories decode")]
    kn = {r["workload"]: r for r in out if r["peer"] == "kiln -O3 native"}
    print("\ngoal: Kiln's decode >= 2x the plain C loop at -O3 (time ratio plain / Kiln -O3 native):")
    for g in goal:
        k = kn[g["workload"]]
        speed = statistics.median(g["wall_us"]) / statistics.median(k["wall_us"])
        print("  %-22s %.2fx %s" % (g["workload"], speed, "met" if speed >= 2 else "NOT met"))
    path = os.path.join(ROOT, "bench", "results", "llm-%s.json" % datetime.date.today().isoformat())
    with open(path, "w") as f:
        json.dump({"load": load, "rounds": ROUNDS, "rows": out}, f, indent=1)
    print("written:", os.path.relpath(path, ROOT))


if __name__ == "__main__":
    main()

"""run.py -- llama.cpp as the third-party check and peer of Kiln's GGUF path (make bench,
BENCH=llamacpp; never make test).

Models and formats (bench/llamacpp/stories_gguf.py writes each as a GGUF file):
  stories260K  F32, Q8_0, Q4_0 (its matrices have rows of 64 and 172: no K-quant block of
               256 fits them, and Q8_0/Q4_0 leave the rows of 172 in F32)
  seeded3m     F32, Q4_K, Q6_K: a seeded random Llama of the same layout and vocabulary with
               dim 256, hidden 768, 4 layers, 8/4 heads (3.3M parameters), every matrix in
               whole 256-blocks
  seeded100m   F32, Q8_0, Q4_0, Q4_K, Q6_K, 64 tokens: bench/quant's 100.1M-parameter seeded
               Llama (dim 768, 12 layers, vocabulary 32000), the embedding and tied
               classifier quantized too: the memory-bound case
BENCH_LLAMACPP_MODELS picks some (default all three).
For each, at 1 and at 2 threads:
  - llama.cpp (npm node-llama-cpp 3.22.1: prebuilt CPU binaries, no download, no build)
    generates 256 (seeded100m: 64) tokens greedily after BOS (greedy.mjs), as it comes (an F16
    key/value cache, flash attention its choice: the tokens/s) and with an F32 cache and no
    flash attention (greedy.mjs f32: attention computed as Kiln computes it);
  - Kiln builds models/stories.lua resized to the model (stories_gguf.py --lua), loading the
    same GGUF (names = "meta"; the RoPE tables, which llama.cpp computes itself, from a second
    GGUF holding only them), by default and, for a quantized type, with --activations ggml
    (activations rounded to 8 bits as llama.cpp's products round them), and kiln_decode.c
    generates the tokens the same way from the generated C (-O2 -march=native, as llama.cpp's
    prebuilt binaries pick their AVX2 code at run time; 2 threads: the entry's _par function
    on runtime/kiln_pool.c).
It prints how many leading ids agree, Kiln's --activations ggml build (F32: its default one)
against llama.cpp's f32-cache run ("exact") and both defaults ("ids"); then, along llama.cpp's
own greedy path (path.mjs: each pick and its probability), at how many steps Kiln's argmax is
llama.cpp's pick and the largest difference of that pick's probability; and each side's decode
tokens/s by its own clock (llama.cpp's llama_perf_context_print eval time, not node's loop;
Kiln's over its decode calls). Then llama.cpp's other CPU builds (VARIANTS: its AVX2 and
AVX-512 libraries, where this CPU runs them) on the same file: how many leading ids each shares
with llama.cpp's default build, and with Kiln. Writes bench/results/llamacpp-<date>.json (with
the ids). Exit status 1 when an exact row of STRICT's models, or any F32 row, does not agree on
every id with llama.cpp's default build.
"""
import datetime
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CACHE = os.path.join(ROOT, ".cache", "bench", "llamacpp")
KILN = os.environ.get("KILN", os.path.join(ROOT, "build", "kiln"))
CC = os.environ.get("CC", "cc")
# model: GGUF types, greedy tokens, stories_gguf.py options
MODELS = {"stories260K": (["F32", "Q8_0", "Q4_0"], 256, []),
          "seeded3m": (["F32", "Q4_K", "Q6_K"], 256, []),
          "seeded100m": (["F32", "Q8_0", "Q4_0", "Q4_K", "Q6_K"], 64, ["--quant-embedding"])}
SELECTED = os.environ.get("BENCH_LLAMACPP_MODELS", " ".join(MODELS)).split()
# Models whose every type must give llama.cpp's ids (the exit status): the trained stories260K
# and the small seeded3m. seeded100m's quantized rows are reported: on a random 12-layer model
# a float-order difference of one unit somewhere moves an activation across half a step of its
# 8-bit rounding now and then, and its near-tied argmaxes follow (docs/quantization.md).
STRICT = ["stories260K", "seeded3m"]
THREADS = [1, 2]
# llama.cpp's own CPU builds beside the one ggml picks for this CPU (the "default"): ggml loads
# the best libggml-cpu-<variant>.so it finds, and each variant sums its blocks in its own
# order. Run on the same file, they show how far llama.cpp agrees with itself: the yardstick
# for Kiln's agreement on the random seeded100m. (variant, the /proc/cpuinfo flags it needs)
VARIANTS = [("haswell", ["avx2", "fma", "f16c", "bmi2"]),
            ("skylakex", ["avx512f", "avx512bw", "avx512dq", "avx512vl"])]


def sh(cmd, cwd=None, env=None, both=False):
    """cmd's stdout (both: stdout then stderr); exits the bench when it fails."""
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("bench/llamacpp: %s failed (exit %d): %s" % (" ".join(cmd), p.returncode, (p.stderr or p.stdout)[-800:]))
    return p.stdout + p.stderr if both else p.stdout


def install():
    """npm install (pinned by package-lock.json) of node-llama-cpp into CACHE (skipped when package-lock.json is unchanged)."""
    os.makedirs(CACHE, exist_ok=True)
    stamp = os.path.join(CACHE, "installed.lock")
    lock = open(os.path.join(HERE, "package-lock.json")).read()
    if os.path.exists(stamp) and open(stamp).read() == lock:
        return
    for f in ("package.json", "package-lock.json"):
        shutil.copy(os.path.join(HERE, f), CACHE)
    print("bench/llamacpp: npm install (node-llama-cpp) into .cache/bench/llamacpp ...", flush=True)
    # --ignore-scripts: its postinstall would try to download or build binaries; the
    # prebuilt CPU ones ship inside @node-llama-cpp/linux-x64. --omit=optional leaves out
    # the other platforms' and the GPU builds (700 MB).
    sh(["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts", "--omit=optional"], cwd=CACHE)
    open(stamp, "w").write(lock)


def variants():
    """[(name, directory)] of the VARIANTS this CPU runs, each a copy of CACHE's node_modules
    whose ggml holds only that variant's CPU library (made once, 70 MB each)."""
    flags = set(re.search(r"^flags\s*:(.*)$", open("/proc/cpuinfo").read(), re.M).group(1).split())
    lock = open(os.path.join(CACHE, "installed.lock")).read()   # a copy of this install
    out = []
    for v, need in VARIANTS:
        if not flags.issuperset(need):
            continue
        d = os.path.join(CACHE, "variant", v)
        stamp = os.path.join(d, "installed.lock")
        if not os.path.exists(stamp) or open(stamp).read() != lock:
            shutil.rmtree(d, ignore_errors=True)
            shutil.copytree(os.path.join(CACHE, "node_modules"), os.path.join(d, "node_modules"), symlinks=True)
            bins = os.path.join(d, "node_modules", "@node-llama-cpp", "linux-x64", "bins", "linux-x64")
            for f in os.listdir(bins):
                if f.startswith("libggml-cpu-") and f != "libggml-cpu-%s.so" % v:
                    os.remove(os.path.join(bins, f))
            open(stamp, "w").write(lock)
        out.append((v, d))
    return out


def llama_cpp(gguf, threads, n, exact=False, where=CACHE):
    """llama.cpp's n greedy ids after BOS, its own decode tokens/s and node's loop tokens/s;
    exact: with an F32 key/value cache and no flash attention (greedy.mjs); where: the
    directory whose node_modules it loads (a variant's)."""
    # An ES module resolves packages from its own directory: run a copy beside node_modules.
    shutil.copy(os.path.join(HERE, "greedy.mjs"), where)
    out = sh(["node", os.path.join(where, "greedy.mjs"), gguf, str(n), str(threads)] + (["f32"] if exact else []),
             cwd=where, both=True)
    ids = [int(t) for t in re.search(r"^([\d ]+)$", out, re.M).group(1).split()]
    loop = float(re.search(r"^llama.cpp decode: ([\d.]+) tokens/s", out, re.M).group(1))
    own = float(re.search(r" eval time = .*?([\d.]+) tokens per second", out).group(1))
    return ids, own, loop


def kiln_build(model, fmt, work, options):
    """Writes model as a GGUF of fmt, builds it with Kiln and compiles kiln_decode.c against
    the generated C: (directory, GGUF path, {mode: (decode executable, weights file)}); modes
    "f32" (the default build) and, for a quantized fmt, "ggml" (--activations ggml)."""
    d = os.path.join(work, "%s_%s" % (model, fmt))
    os.makedirs(d, exist_ok=True)
    gguf = os.path.join(d, "model.gguf")
    sh([sys.executable, os.path.join(HERE, "stories_gguf.py"), gguf, fmt, "--lua", os.path.join(d, "m.lua"), *options] +
       (["--seeded", model] if model != "stories260K" else []))
    exes = {}
    rt = os.path.join(ROOT, "runtime")
    for mode in ["f32"] + (["ggml"] if fmt != "F32" else []):
        out = "out" if mode == "f32" else "out_" + mode
        sh([KILN, "build", "m.lua", "-o", out, "--activations", mode], cwd=d)
        exes[mode] = (os.path.join(d, "kiln_decode" if mode == "f32" else "kiln_decode_" + mode),
                      os.path.join(d, out, "m.weights"))
        sh([CC, "-std=c11", "-O2", "-march=native", "-D_POSIX_C_SOURCE=200809L", "-DKILN_POOL", "-pthread", "-I" + out,
            "-I" + rt, "-DKM=m", "-DKMU=M", '-DMODEL_HEADER="m.h"', "-o", exes[mode][0], os.path.join(HERE, "kiln_decode.c"),
            out + "/m.c", os.path.join(rt, "kiln_runtime.c"), os.path.join(rt, "kiln_pool.c"), "-lm"], cwd=d)
    return d, gguf, exes


def llama_path(gguf, n):
    """llama.cpp's greedy path (exact config, 1 thread): [(token, its probability)] for n steps."""
    shutil.copy(os.path.join(HERE, "path.mjs"), CACHE)
    out = sh(["node", os.path.join(CACHE, "path.mjs"), gguf, str(n)], cwd=CACHE)
    return [(int(t), float(p)) for t, p in (line.split() for line in out.splitlines() if line.strip())]


def along_path(exe, weights, path, work):
    """Kiln (exe, 1 thread) fed llama.cpp's path: at how many steps its argmax is llama.cpp's
    pick, and the largest difference between the two probabilities of that pick."""
    toks, logits = os.path.join(work, "path_tokens.bin"), os.path.join(work, "path_logits.bin")
    np.array([1] + [t for t, _ in path[:-1]], dtype="<i4").tofile(toks)
    sh([exe, weights, "1", str(len(path)), toks, logits])
    x = np.fromfile(logits, "<f4").reshape(len(path), -1).astype(np.float64)
    p = np.exp(x - x.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    picks = np.array([t for t, _ in path])
    same = int(np.sum(np.argmax(x, axis=1) == picks))
    return same, float(np.max(np.abs(p[np.arange(len(path)), picks] - np.array([q for _, q in path]))))


def kiln(exe, weights, threads, n):
    """Kiln's n greedy ids after BOS and decode tokens/s (kiln_decode.c)."""
    out = sh([exe, weights, str(threads), str(n)])
    ids = [int(t) for t in re.search(r"^ids: (.*)$", out, re.M).group(1).split()]
    return ids, float(re.search(r"^decode: ([\d.]+) tokens/s", out, re.M).group(1))


def prefix(a, b):
    """How many leading ids of a and b agree."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def main():
    install()
    sh([sys.executable, os.path.join(HERE, "ggml_quant.py")])   # the quantizers' self-check first
    work = os.path.join(CACHE, "work")
    builds = variants()
    rows, ok = [], True
    for model in SELECTED:
        formats, n, options = MODELS[model]
        for fmt in formats:
            d, gguf, exes = kiln_build(model, fmt, work, options)
            r = {"model": model, "format": fmt, "gguf_bytes": os.path.getsize(gguf), "ids": n}
            ids = {}
            for t in THREADS:   # the sides alternate, so a change of load hits each
                ids["kiln", t], r["kiln_decode_tok_s_%dt" % t] = kiln(*exes["f32"], t, n)
                ids["llama", t], r["llamacpp_decode_tok_s_%dt" % t], r["llamacpp_node_loop_tok_s_%dt" % t] = llama_cpp(gguf, t, n)
                r["ids_equal_prefix_%dt" % t] = prefix(ids["kiln", t], ids["llama", t])
                # The check: llama.cpp with attention in f32 (as Kiln's) against Kiln's build that
                # rounds activations as ggml does (a quantized type; F32 has nothing to round).
                ids["exact", t] = llama_cpp(gguf, t, n, exact=True)[0]
                if "ggml" in exes:
                    ids["ggml", t], r["kiln_ggml_decode_tok_s_%dt" % t] = kiln(*exes["ggml"], t, n)
                r["exact_ids_equal_prefix_%dt" % t] = prefix(ids["ggml" if "ggml" in exes else "kiln", t], ids["exact", t])
                if r["exact_ids_equal_prefix_%dt" % t] < n and (model in STRICT or fmt == "F32"):
                    ok = False
            # llama.cpp's other CPU builds, exact config, 1 thread: their agreement with its
            # default build, and Kiln's with each of them. Reported, not required: the builds
            # part from each other on quantized files (docs/quantization.md).
            kiln_ids = ids["ggml" if "ggml" in exes else "kiln", 1]
            for v, where in builds:
                ids[v] = llama_cpp(gguf, 1, n, exact=True, where=where)[0]
                r["llamacpp_%s_equal_prefix" % v] = prefix(ids[v], ids["exact", 1])
                r["exact_%s_equal_prefix" % v] = prefix(kiln_ids, ids[v])
            # The ids themselves, one string each (1 thread; exact config, Kiln's exact build).
            for key, got in [("kiln", kiln_ids), ("llamacpp", ids["exact", 1])] + [("llamacpp_" + v, ids[v]) for v, _ in builds]:
                r["ids_" + key] = " ".join(map(str, got))
            # Along llama.cpp's own path (its exact config): where the ids part, how far apart
            # the two sides' probabilities are, and whether Kiln would still pick as llama.cpp did.
            path = llama_path(gguf, n)
            r["path_same_argmax"], r["path_max_dp"] = along_path(*exes["ggml" if "ggml" in exes else "f32"], path, d)
            r["kiln_threads_same_ids"] = ids["kiln", 1] == ids["kiln", 2]
            r["llamacpp_threads_same_ids"] = ids["llama", 1] == ids["llama", 2]
            rows.append(r)
            if os.path.getsize(gguf) > (64 << 20):   # measured: big files are not kept in .cache
                os.remove(gguf)
                for _, weights in exes.values():
                    os.remove(weights)
    print("Greedy tokens after BOS (256; seeded100m 64). Kiln: generated C -O2 -march=native, kiln_decode.c (its clock over the decode calls;")
    print("2 threads: _par on kiln_pool); llama.cpp: node-llama-cpp 3.22.1, its own eval time")
    print("(llama_perf_context_print; node's token loop around it, slower, is in the JSON). Load average: %.2f" % os.getloadavg()[0])
    print("%-12s %-5s %10s %11s %11s %11s %9s %11s %11s %9s %9s %9s %9s %9s" % (
        "model", "type", "GGUF bytes", "exact 1t", "exact 2t", "path", "path dp", "ids 1t", "ids 2t", "Kiln 1t", "Kiln 2t",
        "ggml 1t", "llama 1t", "llama 2t"))
    for r in rows:
        print("%-12s %-5s %10d %7d/%-3d %7d/%-3d %7d/%-3d %9.1e %7d/%-3d %7d/%-3d %9.0f %9.0f %9s %9.0f %9.0f" % (
            r["model"], r["format"], r["gguf_bytes"], r["exact_ids_equal_prefix_1t"], r["ids"], r["exact_ids_equal_prefix_2t"],
            r["ids"], r["path_same_argmax"], r["ids"], r["path_max_dp"], r["ids_equal_prefix_1t"], r["ids"],
            r["ids_equal_prefix_2t"], r["ids"], r["kiln_decode_tok_s_1t"], r["kiln_decode_tok_s_2t"],
            "%.0f" % r["kiln_ggml_decode_tok_s_1t"] if "kiln_ggml_decode_tok_s_1t" in r else "-",
            r["llamacpp_decode_tok_s_1t"], r["llamacpp_decode_tok_s_2t"]))
    print("(exact: leading ids equal at that thread count, llama.cpp with an F32 KV cache and no flash attention")
    print(" against Kiln's --activations ggml build (F32: its default build); path: steps of llama.cpp's own path")
    print(" (1 thread, that config) at which Kiln's argmax is llama.cpp's pick, path dp: the largest difference of")
    print(" that pick's probability; ids: both sides as they come by default, llama.cpp with its F16 cache, Kiln with")
    print(" f32 activations. tokens/s: the default builds (ggml: Kiln's --activations ggml build), llama.cpp's default)")
    if builds:
        print("\nllama.cpp's CPU builds (exact config, 1 thread), leading ids equal: that build against llama.cpp's default")
        print("build for this CPU, and Kiln's --activations ggml build (F32: default) against that build")
        print("%-12s %-5s" % ("model", "type") + "".join(" %13s %13s" % (v + "/llama", "Kiln/" + v) for v, _ in builds))
        for r in rows:
            print("%-12s %-5s" % (r["model"], r["format"]) + "".join(" %9d/%-3d %9d/%-3d" % (
                r["llamacpp_%s_equal_prefix" % v], r["ids"], r["exact_%s_equal_prefix" % v], r["ids"]) for v, _ in builds))
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    path = os.path.join(ROOT, "bench", "results", "llamacpp-%s.json" % datetime.date.today().isoformat())
    with open(path, "w") as f:
        json.dump({"load": os.getloadavg(), "rows": rows}, f, indent=1)
    print("written:", os.path.relpath(path, ROOT))
    if not ok:
        print("bench/llamacpp: the ids of an 'exact' row of %s, or of an F32 row, differ between llama.cpp and Kiln" %
              " or ".join(STRICT))
        sys.exit(1)


if __name__ == "__main__":
    main()

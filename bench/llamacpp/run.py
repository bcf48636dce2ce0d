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
    generates 256 (seeded100m: 64) tokens greedily after BOS (greedy.mjs);
  - Kiln builds models/stories.lua resized to the model (stories_gguf.py --lua), loading the
    same GGUF (names = "meta"; the RoPE tables, which llama.cpp computes itself, from a second
    GGUF holding only them), and kiln_decode.c generates 256 tokens the same way from the
    generated C (-O2 -march=native, as llama.cpp's prebuilt binaries pick their AVX2 code at
    run time; at plain -O2 on x86-64 the generated kernels call libm's fmaf, measured 12x
    slower on seeded3m; 2 threads: the entry's _par function on runtime/kiln_pool.c).
It prints how many leading ids agree and each side's decode tokens/s by its own clock
(llama.cpp's llama_perf_context_print eval time, not node's loop; Kiln's over its 256 decode
calls), and writes bench/results/llamacpp-<date>.json. stories260K F32 must agree on all 256
ids at 1 thread (exit status 1 otherwise): the same model on the same weights. The rest is
reported: llama.cpp also rounds the activations to 8 bits inside its quantized matmuls, while
Kiln (for now) expands the blocks to f32 when it loads them; and a random model's greedy
path meets near-ties that float summation order can flip.
"""
import datetime
import json
import os
import re
import shutil
import subprocess
import sys

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
THREADS = [1, 2]


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


def llama_cpp(gguf, threads, n):
    """llama.cpp's n greedy ids after BOS, its own decode tokens/s and node's loop tokens/s."""
    # An ES module resolves packages from its own directory: run a copy beside node_modules.
    shutil.copy(os.path.join(HERE, "greedy.mjs"), CACHE)
    out = sh(["node", os.path.join(CACHE, "greedy.mjs"), gguf, str(n), str(threads)], cwd=CACHE, both=True)
    ids = [int(t) for t in re.search(r"^([\d ]+)$", out, re.M).group(1).split()]
    loop = float(re.search(r"^llama.cpp decode: ([\d.]+) tokens/s", out, re.M).group(1))
    own = float(re.search(r" eval time = .*?([\d.]+) tokens per second", out).group(1))
    return ids, own, loop


def kiln_build(model, fmt, work, options):
    """Writes model as a GGUF of fmt, builds it with Kiln and compiles kiln_decode.c against
    the generated C: (directory, GGUF path, decode executable, weights file)."""
    d = os.path.join(work, "%s_%s" % (model, fmt))
    os.makedirs(d, exist_ok=True)
    gguf = os.path.join(d, "model.gguf")
    sh([sys.executable, os.path.join(HERE, "stories_gguf.py"), gguf, fmt, "--lua", os.path.join(d, "m.lua"), *options] +
       (["--seeded", model] if model != "stories260K" else []))
    sh([KILN, "build", "m.lua", "-o", "out"], cwd=d)
    exe = os.path.join(d, "kiln_decode")
    rt = os.path.join(ROOT, "runtime")
    sh([CC, "-std=c11", "-O2", "-march=native", "-D_POSIX_C_SOURCE=200809L", "-DKILN_POOL", "-pthread", "-Iout", "-I" + rt,
        "-DKM=m", "-DKMU=M", '-DMODEL_HEADER="m.h"', "-o", exe, os.path.join(HERE, "kiln_decode.c"), "out/m.c",
        os.path.join(rt, "kiln_runtime.c"), os.path.join(rt, "kiln_pool.c"), "-lm"], cwd=d)
    return d, gguf, exe, os.path.join(d, "out", "m.weights")


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
    rows, ok = [], True
    for model in SELECTED:
        formats, n, options = MODELS[model]
        for fmt in formats:
            d, gguf, exe, weights = kiln_build(model, fmt, work, options)
            r = {"model": model, "format": fmt, "gguf_bytes": os.path.getsize(gguf), "ids": n}
            ids = {}
            for t in THREADS:   # the two sides alternate, so a change of load hits both
                ids["kiln", t], r["kiln_decode_tok_s_%dt" % t] = kiln(exe, weights, t, n)
                ids["llama", t], r["llamacpp_decode_tok_s_%dt" % t], r["llamacpp_node_loop_tok_s_%dt" % t] = llama_cpp(gguf, t, n)
                r["ids_equal_prefix_%dt" % t] = prefix(ids["kiln", t], ids["llama", t])
            r["kiln_threads_same_ids"] = ids["kiln", 1] == ids["kiln", 2]
            r["llamacpp_threads_same_ids"] = ids["llama", 1] == ids["llama", 2]
            rows.append(r)
            if os.path.getsize(gguf) > (64 << 20):   # measured: big files are not kept in .cache
                os.remove(gguf)
                os.remove(weights)
            if model == "stories260K" and fmt == "F32" and r["ids_equal_prefix_1t"] < n:
                ok = False
    print("Greedy tokens after BOS (256; seeded100m 64). Kiln: generated C -O2 -march=native, kiln_decode.c (its clock over the decode calls;")
    print("2 threads: _par on kiln_pool); llama.cpp: node-llama-cpp 3.22.1, its own eval time")
    print("(llama_perf_context_print; node's token loop around it, slower, is in the JSON). Load average: %.2f" % os.getloadavg()[0])
    print("%-12s %-5s %10s %11s %11s %11s %11s %11s %11s" % ("model", "type", "GGUF bytes", "ids 1t", "ids 2t",
                                                             "Kiln 1t", "Kiln 2t", "llama 1t", "llama 2t"))
    for r in rows:
        print("%-12s %-5s %10d %7d/%-3d %7d/%-3d %11.0f %11.0f %11.0f %11.0f" % (
            r["model"], r["format"], r["gguf_bytes"], r["ids_equal_prefix_1t"], r["ids"], r["ids_equal_prefix_2t"], r["ids"],
            r["kiln_decode_tok_s_1t"], r["kiln_decode_tok_s_2t"], r["llamacpp_decode_tok_s_1t"], r["llamacpp_decode_tok_s_2t"]))
    print("(tokens/s; ids: leading ids equal between Kiln and llama.cpp at that thread count)")
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    path = os.path.join(ROOT, "bench", "results", "llamacpp-%s.json" % datetime.date.today().isoformat())
    with open(path, "w") as f:
        json.dump({"load": os.getloadavg(), "rows": rows}, f, indent=1)
    print("written:", os.path.relpath(path, ROOT))
    if not ok:
        print("bench/llamacpp: stories260K F32 ids differ between Kiln and llama.cpp")
        sys.exit(1)


if __name__ == "__main__":
    main()

"""run.py -- llama.cpp as the third-party check and peer of Kiln's GGUF path (make bench,
BENCH=llamacpp; never make test).

For each format (F32, Q8_0, Q4_0) it writes stories260K as a GGUF file
(bench/llamacpp/stories_gguf.py), then:
  - llama.cpp (npm node-llama-cpp 3.22.1: prebuilt CPU binaries, no download, no build,
    1 thread) generates 256 tokens greedily after BOS (greedy.mjs);
  - Kiln builds models/stories.lua loading the same GGUF (names = "meta"; the RoPE tables,
    which llama.cpp computes itself, from a second GGUF holding only them) and the demo
    driver scripts/stories_main.c generates 256 tokens the same way (-O2).
It prints both id sequences' agreement (F32 must agree on all 256: llama.cpp and Kiln
implement the same model on the same weights; quantized formats are reported, since
llama.cpp also quantizes activations to 8 bits inside its Q8_0/Q4_0 matmuls while Kiln
expands the blocks to f32 at build time) and each side's decode tokens/s by its own
clock (llama.cpp's llama_perf_context_print eval time, not node's loop), and writes bench/results/llamacpp-<date>.json. Exit status 1 when F32 disagrees.
"""
import datetime
import glob
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
N = 256
FORMATS = ["F32", "Q8_0", "Q4_0"]


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


def llama_cpp(gguf):
    # An ES module resolves packages from its own directory: run a copy beside node_modules.
    shutil.copy(os.path.join(HERE, "greedy.mjs"), CACHE)
    out = sh(["node", os.path.join(CACHE, "greedy.mjs"), gguf, str(N)], cwd=CACHE, both=True)
    ids = [int(t) for t in re.search(r"^([\d ]+)$", out, re.M).group(1).split()]
    loop = float(re.search(r"^llama.cpp decode: ([\d.]+) tokens/s", out, re.M).group(1))
    own = float(re.search(r" eval time = .*?([\d.]+) tokens per second", out).group(1))
    return ids, own, loop


def kiln(fmt, work):
    """Kiln's 256 greedy ids and decode tokens/s for stories.lua loading the GGUF of fmt."""
    d = os.path.join(work, "kiln_" + fmt)
    os.makedirs(d, exist_ok=True)
    sh([sys.executable, os.path.join(HERE, "stories_gguf.py"), os.path.join(d, "stories.gguf"), fmt])
    sys.path.insert(0, os.path.join(ROOT, "tests", "py"))
    import gguf_file as G
    import run_gguf
    w = run_gguf.load_safetensors(os.path.join(ROOT, "models", "weights", "stories260K.safetensors"))
    G.write(os.path.join(d, "rope.gguf"), [], [(k, "F32", v.shape, v.astype("<f4").tobytes())
                                               for k, v in w.items() if k.startswith("rope.")])
    src = open(os.path.join(ROOT, "models", "stories.lua")).read()
    old = 'kiln.load("weights/stories260K.safetensors", {strict = true})'
    new = 'kiln.load("stories.gguf", {strict = true, names = "meta"})\nkiln.load("rope.gguf", {strict = true})'
    open(os.path.join(d, "stories.lua"), "w").write(src.replace(old, new))
    sh([KILN, "build", "stories.lua", "-o", "out", "--tokenizer", os.path.join(ROOT, "models", "weights", "tok512.bin")], cwd=d)
    exe = os.path.join(d, "stories_demo")
    rt = os.path.join(ROOT, "runtime")
    sh([CC, "-std=c11", "-O2", "-D_POSIX_C_SOURCE=200809L", "-Iout", "-I" + rt, "-I" + os.path.join(rt, "llm"),
        "-DKM=stories", "-DKMU=STORIES", '-DMODEL_HEADER="stories.h"', "-o", exe,
        os.path.join(ROOT, "scripts", "llm_main.c"), "out/stories.c", os.path.join(rt, "kiln_runtime.c"),
        *sorted(glob.glob(os.path.join(rt, "llm", "kiln_tok*.c"))), os.path.join(rt, "llm", "kiln_sample.c"),
        os.path.join(rt, "llm", "kiln_chat.c"), os.path.join(rt, "llm", "kiln_generate.c"), "-lm"], cwd=d)
    out = sh([exe, "out/stories.weights", "out/stories.tok", "--max-tokens", str(N),
              "--ids", "--speed"], cwd=d)
    ids = [int(t) for t in re.search(r"^tokens: (.*)$", out, re.M).group(1).split()][1:]   # after BOS
    tps = float(re.search(r"^decode: ([\d.]+) tokens/s", out, re.M).group(1))
    return ids, tps, os.path.getsize(os.path.join(d, "stories.gguf"))


def main():
    install()
    work = os.path.join(CACHE, "work")
    rows, ok = [], True
    for fmt in FORMATS:
        k_ids, k_tps, size = kiln(fmt, work)
        l_ids, l_tps, l_loop = llama_cpp(os.path.join(work, "kiln_" + fmt, "stories.gguf"))
        agree = next((i for i, (a, b) in enumerate(zip(k_ids, l_ids)) if a != b), min(len(k_ids), len(l_ids)))
        rows.append({"format": fmt, "gguf_bytes": size, "ids_equal_prefix": agree, "ids": N,
                     "kiln_decode_tok_s": k_tps, "llamacpp_decode_tok_s": l_tps,
                     "llamacpp_node_loop_tok_s": l_loop})
        if fmt == "F32" and agree < N:
            ok = False
    print("stories260K, 256 greedy tokens after BOS; Kiln: generated C -O2 (decode from the KV cache, its own")
    print("clock); llama.cpp: node-llama-cpp 3.22.1, 1 thread, its own eval time (llama_perf_context_print;")
    print("through node's token loop it is ~2x slower, in the JSON). Load average: %.2f" % os.getloadavg()[0])
    print("%-6s %10s %16s %14s %16s %8s" % ("format", "GGUF bytes", "ids equal (of N)", "Kiln tok/s", "llama.cpp tok/s", "ratio"))
    for r in rows:
        print("%-6s %10d %11d/%-4d %14.0f %16.0f %7.2fx" % (r["format"], r["gguf_bytes"], r["ids_equal_prefix"], r["ids"],
                                                          r["kiln_decode_tok_s"], r["llamacpp_decode_tok_s"],
                                                          r["kiln_decode_tok_s"] / r["llamacpp_decode_tok_s"]))
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    path = os.path.join(ROOT, "bench", "results", "llamacpp-%s.json" % datetime.date.today().isoformat())
    with open(path, "w") as f:
        json.dump({"load": os.getloadavg(), "rows": rows}, f, indent=1)
    print("written:", os.path.relpath(path, ROOT))
    if not ok:
        print("bench/llamacpp: F32 ids differ between Kiln and llama.cpp")
        sys.exit(1)


if __name__ == "__main__":
    main()

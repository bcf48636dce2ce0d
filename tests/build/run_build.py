"""run_build.py -- t_build: what a build reports, and what it costs in memory.

  build/summary        a successful build ends with one line on stderr naming the output
                       directory, its files, the weights, arena (and state, entries) sizes;
                       stdout stays empty
  build/progress-quiet not on a terminal, a build prints nothing but that line (logs and
                       pipes stay clean)
  build/progress-tty   under a pseudo-terminal with KILN_PROGRESS=1 (the one-second delay
                       waived), progress is one line rewritten with \\r and cleared before
                       the summary: the terminal ends with the summary alone
  build/peak-memory    tests/build/seeded.lua (128 MiB of seeded f32 weights): the
                       compiler's peak resident memory stays under 1.25 x the weights + 32
                       MiB (the weights are streamed to the file, never assembled).
                       Measured when written: 134 MB, 1.02 x; before streaming, 4 x;
                       since lazy weights (below) 37 MB.
  build/peak-lazy      the same model's weights are never all resident (gen/ir/weight.c: a
                       weight is made, packed or quantized, written and freed one at a
                       time): peak < weights / 4 + 16 MiB for tests/build/seeded.lua (8
                       tensors of 16 MiB, seeded), for the same stack loaded from a 128 MiB
                       safetensors file (mapped; its pages dropped after each tensor), and
                       for that file built with --quantize q4_k. Measured when written:
                       36, 37 and 22 MB; before lazy weights 151 MB and twice the file.

  build/wide-offsets   models/stories.lua built with KILN_TEST_WIDE_OFFSETS=1 (the 64-bit
                       #define offsets a region past 2 GiB gets, forced for a small model):
                       compiles under gcc and clang -Werror, and scripts/llm_main.c's 256
                       greedy ids and timings line format equal the normal build's ids

  build/big-arena      tests/build/big_arena.lua needs a 4 GiB arena: it builds (the 2 GiB
                       cap is gone), its A_ offsets are 64-bit #defines and ARENA_SIZE is
                       4294967296, and the C compiles under gcc -Werror (not run)

usage: /usr/bin/python3 tests/build/run_build.py WORKDIR
"""
import glob
import os
import pty
import resource
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KILN = os.environ.get("KILN") or os.path.join(ROOT, "build", "kiln")


def report(ok, name, detail=""):
    print(("PASS %s%s" % (name, " (%s)" % detail if detail else "")) if ok else "FAIL %s: %s" % (name, detail), flush=True)


def main():
    work = sys.argv[1]
    env = dict(os.environ)
    env.pop("KILN_PROGRESS", None)
    out = os.path.join(work, "st")
    p = subprocess.run([KILN, "build", "models/stories.lua", "-o", out], cwd=ROOT, capture_output=True, text=True, env=env)
    want = ("kiln: built %s: stories.c stories.h stories.json stories.weights; weights 1.1 MiB, arena 61.6 KiB, "
            "state 640.0 KiB, 2 entries\n" % out)
    report(p.returncode == 0 and p.stderr == want and p.stdout == "", "build/summary",
           "" if p.stderr == want else "got %r, expected %r" % (p.stderr, want))
    report(p.stderr.count("\n") == 1 and "\r" not in p.stderr, "build/progress-quiet", repr(p.stderr[:200]))

    # Under a pty: progress lines, then a clear, then the summary.
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(ROOT)
        os.environ["KILN_PROGRESS"] = "1"
        os.execv(KILN, [KILN, "build", "models/mlp.lua", "-o", os.path.join(work, "mlp")])
    data = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    _, status = os.waitpid(pid, 0)
    text = data.decode("utf-8", "replace").replace("\r\n", "\n")   # the pty's output processing
    last = text.split("\r")[-1]
    ok = (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and "kiln: writing weights 100%" in text and
          "kiln: tracing" in text and last.startswith("\x1b[Kkiln: built ") and last.count("\n") == 1)
    report(ok, "build/progress-tty", "" if ok else repr(text[-300:]))

    # Peak memory of a build: the child's maximum RSS, from wait4's rusage.
    p = subprocess.Popen([KILN, "build", "tests/build/seeded.lua", "-o", os.path.join(work, "seeded")], cwd=ROOT,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, ru = os.wait4(p.pid, 0)
    weights = os.path.getsize(os.path.join(work, "seeded", "seeded.weights"))
    peak = ru.ru_maxrss * 1024
    limit = 1.25 * weights + 32 * 2 ** 20
    report(status == 0 and peak < limit, "build/peak-memory",
           "peak %.0f MB for %.0f MB of weights (%.2f x), limit %.0f MB" % (peak / 1e6, weights / 1e6, peak / weights, limit / 1e6))

    check_lazy(work, env)
    check_wide(work, env)
    check_big_arena(work, env)


def peak_build(args, cwd, env):
    """(exit status, peak RSS bytes, stderr) of `kiln build ARGS` run in cwd."""
    p = subprocess.Popen([KILN, "build"] + args, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    err = p.stderr.read().decode("utf-8", "replace")
    _, status, ru = os.wait4(p.pid, 0)
    return status, ru.ru_maxrss * 1024, err


# Writes DIR/w.safetensors: LAYERS f32 [D, D] tensors "0.weight".. of N(0, 0.02). Run as a
# child process: the build's ru_maxrss counts the RSS its parent had when it forked.
WRITE_FILE = """
import json, struct, sys
import numpy as np
d, D, L = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
h = {"%d.weight" % i: {"dtype": "F32", "shape": [D, D], "data_offsets": [i * D * D * 4, (i + 1) * D * D * 4]} for i in range(L)}
hj = json.dumps(h).encode()
hj += b" " * (-len(hj) % 8)
rng = np.random.default_rng(7)
with open(d + "/w.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(hj)) + hj)
    for _ in range(L):
        f.write((rng.standard_normal((D, D), dtype=np.float32) * 0.02).astype("<f4").tobytes())
"""


def check_lazy(work, env):
    d = os.path.join(work, "lazy")
    os.makedirs(d, exist_ok=True)
    D, LAYERS = 2048, 8
    subprocess.run([sys.executable, "-c", WRITE_FILE, d, str(D), str(LAYERS)], check=True)
    open(os.path.join(d, "file.lua"), "w").write(
        'local kiln = require "kiln"\nlocal nn = require "kiln.nn"\nkiln.load("w.safetensors", {strict = true})\n'
        "local layers = {}\nfor i = 1, %d do layers[i] = nn.Linear(%d, %d, {bias = false}) end\n"
        'kiln.output("y", nn.Sequential(layers)(kiln.input("x", {1, %d})))\n' % (LAYERS, D, D, D))
    runs = [("seeded", [os.path.join(ROOT, "tests", "build", "seeded.lua")]), ("file", ["file.lua"]),
            ("file-q4_k", ["file.lua", "--quantize", "q4_k"])]
    detail, ok = [], True
    for tag, args in runs:
        out = os.path.join(d, "out-" + tag)
        status, peak, err = peak_build(args + ["-o", out], d, env)
        if status != 0:
            return report(False, "build/peak-lazy", "%s: %s" % (tag, err.strip()[-300:]))
        weights = 4 * D * D * LAYERS   # the f32 values: what an eager build holds at least once
        limit = weights / 4 + 16 * 2 ** 20
        ok &= peak < limit
        detail.append("%s %.0f MB (limit %.0f)" % (tag, peak / 1e6, limit / 1e6))
    report(ok, "build/peak-lazy", ", ".join(detail))


def check_big_arena(work, env):
    d = os.path.join(work, "big")
    p = subprocess.run([KILN, "build", "tests/build/big_arena.lua", "-o", d], cwd=ROOT, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        return report(False, "build/big-arena", p.stderr.strip())
    src, hdr = open(os.path.join(d, "big_arena.c")).read(), open(os.path.join(d, "big_arena.h")).read()
    c = subprocess.run(["gcc", "-std=c11", "-Wall", "-Wextra", "-Wpedantic", "-Werror", "-c", "-o", os.path.join(d, "m.o"),
                        os.path.join(d, "big_arena.c")], capture_output=True, text=True)
    ok = "INT64_C(" in src and "4294967296" in hdr and c.returncode == 0
    report(ok, "build/big-arena", "" if ok else (c.stderr.strip()[:300] or "no 64-bit offsets or ARENA_SIZE"))


def check_wide(work, env):
    llm = (sorted(os.path.relpath(f, ROOT) for f in glob.glob(os.path.join(ROOT, "runtime", "llm", "kiln_tok*.c"))) +
           ["runtime/llm/kiln_sample.c", "runtime/llm/kiln_chat.c", "runtime/llm/kiln_generate.c"])
    ids = {}
    for tag, extra in [("narrow", {}), ("wide", {"KILN_TEST_WIDE_OFFSETS": "1"})]:
        d = os.path.join(work, tag)
        p = subprocess.run([KILN, "build", "models/stories.lua", "-o", d, "--tokenizer", "models/weights/tok512.bin"],
                           cwd=ROOT, capture_output=True, text=True, env=dict(env, **extra))
        if p.returncode != 0:
            return report(False, "build/wide-offsets", p.stderr.strip())
        src = open(os.path.join(d, "stories.c")).read()
        if (tag == "wide") != ("#define W_TOK_EMBEDDINGS_WEIGHT INT64_C(" in src):
            return report(False, "build/wide-offsets", "%s build: unexpected offset style" % tag)
        for cc in ["gcc", "clang"]:
            exe = os.path.join(d, "demo_" + cc)
            p = subprocess.run([cc, "-std=c11", "-O1", "-Wall", "-Wextra", "-Wpedantic", "-Werror", "-D_POSIX_C_SOURCE=200809L",
                                "-I" + d, "-Iruntime", "-Iruntime/llm", "-DKM=stories", "-DKMU=STORIES",
                                '-DMODEL_HEADER="stories.h"', "-o", exe, "scripts/llm_main.c", os.path.join(d, "stories.c"),
                                "runtime/kiln_runtime.c", "runtime/kiln_pool.c"] + llm + ["-pthread", "-lm"],
                               cwd=ROOT, capture_output=True, text=True)
            if p.returncode != 0:
                return report(False, "build/wide-offsets", "%s %s: %s" % (tag, cc, p.stderr.strip()[:300]))
        p = subprocess.run([exe, os.path.join(d, "stories.weights"), os.path.join(d, "stories.tok"), "--ids"], cwd=ROOT,
                           capture_output=True, text=True)
        line = [l for l in p.stdout.splitlines() if l.startswith("tokens: ")]
        ids[tag] = line[0] if line else p.stdout[-200:] + p.stderr[-200:]
    report(ids["narrow"] == ids["wide"] and ids["narrow"].startswith("tokens: 1 "), "build/wide-offsets",
           "" if ids["narrow"] == ids["wide"] else "ids differ: %r vs %r" % (ids["narrow"][:80], ids["wide"][:80]))


if __name__ == "__main__":
    main()

"""scaling.py KILN WORK — the compiler's cost grows about linearly with the model.

Builds two wide models at size n and 4n for every target and compares the child
process's own CPU time and peak memory (os.wait4, so the load of a shared machine
does not count): linear work gives ratios near 4, the quadratic naming and list
growth this guards against gave 16 and more (8,000 ops: 13 s and 670 MB for Core
ML; 4,000 outputs: 33 s). Asserted loosely: CPU ratio < 12 (times under 50 ms
count as 50 ms, process start-up), peak-memory ratio < 8.
  ops       n parameters added in a chain: n kernels, weights and MIL names
  outputs   n/2 outputs: I/O names, their case-insensitive checks, header macros
"""
import os
import subprocess
import sys

KILN, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
N = 2000
MODELS = {
    "ops": 'local kiln = require "kiln"\nlocal x = kiln.input("x", {4})\nlocal y = x\n'
           'for i = 1, %d do y = y + kiln.param("w" .. i, {4}) end\nkiln.output("y", y)\n',
    "outputs": 'local kiln = require "kiln"\nlocal x = kiln.input("x", {4})\n'
               'for i = 1, %d // 2 do kiln.output("o" .. i, x + i) end\n',
}


def cost(script, target, out):
    p = subprocess.Popen([KILN, "build", script, "-o", out, "--target", target],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    err = p.stderr.read().decode()
    p.stderr.close()
    if status != 0:
        raise RuntimeError(err.strip())
    return ru.ru_utime + ru.ru_stime, ru.ru_maxrss


for kind, text in MODELS.items():
    for target in ("c", "metal", "coreml"):
        name = "hardening/scaling/%s/%s" % (kind, target)
        try:
            got = []
            for n in (N, 4 * N):
                script = os.path.join(WORK, "%s%d.lua" % (kind, n))
                open(script, "w").write(text % n)
                got.append(cost(script, target, os.path.join(WORK, "%s%d-%s" % (kind, n, target))))
        except RuntimeError as e:
            print("FAIL %s: %s" % (name, e))
            continue
        (t1, m1), (t4, m4) = got
        rt, rm = max(t4, 0.05) / max(t1, 0.05), m4 / m1
        line = "n=%d: %.2f s %d MB, 4n: %.2f s %d MB (ratios %.1f, %.1f)" % (N, t1, m1 >> 10, t4, m4 >> 10, rt, rm)
        print(("PASS %s: %s" if rt < 12 and rm < 8 else "FAIL %s: superlinear: %s") % (name, line))

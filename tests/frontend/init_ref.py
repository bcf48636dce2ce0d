"""init_ref.py — an independent rendering of Kiln's deterministic initialiser
(docs/lua-api.md, "Deterministic initialiser") in plain Python integers and floats.

Python floats are IEEE doubles with correctly rounded + - * / and math.sqrt and no
fused multiply-add, so this must match gen/frontend/init.c bit for bit.
Usage: init_ref.py SEED NAME KIND A B N  -> prints N float32 bit patterns (hex)."""
import math
import struct
import sys

M64 = (1 << 64) - 1


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for c in data:
        h ^= c
        h = (h * 0x100000001B3) & M64
    return h


class SplitMix64:
    def __init__(self, state):
        self.state = state & M64

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & M64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)

    def u01(self):
        return (self.next() >> 40) * (1.0 / 16777216.0)


def det_log(x):
    e = 0
    while x < 0.70710678118654752:
        x *= 2.0
        e -= 1
    while x > 1.4142135623730951:
        x *= 0.5
        e += 1
    t = (x - 1.0) / (x + 1.0)
    t2 = t * t
    term = t
    s = 0.0
    for k in range(1, 42, 2):
        s += term / float(k)
        term *= t2
    return 2.0 * s + float(e) * float.fromhex("0x1.62e42fefa39efp-1")


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def values(seed, name, kind, a, b, n):
    state = fnv1a64(name.encode()) ^ SplitMix64(seed).next()
    rng = SplitMix64(state)
    out = []
    if kind in ("zeros", "ones", "const"):
        v = {"zeros": 0.0, "ones": 1.0}.get(kind, a)
        return [f32(v)] * n
    if kind == "uniform":
        return [f32(a + (b - a) * rng.u01()) for _ in range(n)]
    while len(out) < n:  # normal: Marsaglia polar
        while True:
            u = 2.0 * rng.u01() - 1.0
            v = 2.0 * rng.u01() - 1.0
            s = u * u + v * v
            if s < 1.0 and s != 0.0:
                break
        f = math.sqrt(-2.0 * det_log(s) / s)
        out.append(f32(a + b * (u * f)))
        if len(out) < n:
            out.append(f32(a + b * (v * f)))
    return out


if __name__ == "__main__":
    seed, name, kind, a, b, n = sys.argv[1:7]
    for x in values(int(seed), name, kind, float(a), float(b), int(n)):
        print(struct.pack("<f", x).hex())

"""math_sweep.py — inputs and checks of t_math: Kiln's own exp, tanh, erf and log
(templates/c/math_*.c.tmpl) and the ops built on them, against float64 references.

  math_sweep.py inputs FILE          the 2^18 inputs of tests/math/sweep.lua, raw <f4
  math_sweep.py check FILE DIR       DIR/<op>.bin (sweep.lua's outputs on FILE) vs float64
  math_sweep.py same DIR_A DIR_B     the outputs of two builds on different platforms:
                                     the same bits, or NaN in both (see same())

The references are numpy's float64 functions (erf: torch's float64 erf; numpy has none),
whose errors are far below a float's ulp. (All 2^32 floats: tests/math/exhaustive.c, the same
checks in C against glibc's double functions.) Each check prints the largest error in ulp of
the correctly rounded result (an ulp at a subnormal result is 2^-149) and fails when it
passes the function's documented bound (BOUND: the ulp claims of docs/output.md), when
the result leaves t_ops' elementwise tolerance 8 eps (|ref| + m) (m = 1, or |x| for the
ops that t_ops checks that way), or when a non-finite reference (rounded to float) is not
matched exactly (NaN for NaN, inf of the same sign). The tolerance gets an absolute floor of
2^-149, the spacing of the subnormals: silu(2^-149) = 2^-150 is exactly halfway and rounds to
0 in any float arithmetic, libm's included.
"""
import sys

import numpy as np
import torch

N = 262144
EPS = 2.0 ** -23

# The documented worst case in ulp of each function; None: only the tolerance is checked
# (compositions whose rounding steps are the op table's own expression).
BOUND = {"exp": 1.0, "tanh": 2.0, "erf": 2.0, "log": 1.0,
         "sigmoid": None, "silu": None, "gelu": None, "gelu_tanh": None}
MAG_X = {"silu", "gelu", "gelu_tanh"}   # t_ops: Tol.ew(mag_abs)


def erf64(d):
    return torch.erf(torch.from_numpy(d)).numpy()


def reference(op, d):
    """The float64 value of op at the float64 inputs d."""
    with np.errstate(all="ignore"):
        if op == "exp": return np.exp(d)
        if op == "tanh": return np.tanh(d)
        if op == "erf": return erf64(d)
        if op == "log": return np.log(d)
        if op == "sigmoid": return 1.0 / (1.0 + np.exp(-d))
        if op == "silu": return d / (1.0 + np.exp(-d))
        if op == "gelu": return 0.5 * d * (1.0 + erf64(d / np.sqrt(2.0)))
        if op == "gelu_tanh": return 0.5 * d * (1.0 + np.tanh(0.79788456080286535588 * (d + 0.044715 * d ** 3)))
    raise SystemExit("math_sweep: unknown op " + op)


def f32(u):
    return np.asarray(u, dtype=np.uint32).view(np.float32)


def bits(x):
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def sweep_inputs():
    """Special values first, then +-512 ulps around every point where a function changes
    method or its result changes range, random bit patterns, and uniform values in [-12, 12]."""
    sp = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 2.0, 3.4028235e38, -3.4028235e38,
          1.1754944e-38, -1.1754944e-38, 1e-45, -1e-45, 1e-40, -1e-40]
    spb = list(bits(sp)) + [0x7fc00001, 0xffc00000, 0x7f800001, 0xff812345, 0x7fbfffff]   # NaNs: payloads, signalling
    pivots = [0.625, 0.875, 4.0, 3.9, 9.0, 1.0, 0.70710677, 1.4142135, 88.72284, 88.7228394, 89.0,
              87.33655, 103.27893, 103.97208, 104.0, 1e-4, 2.0 ** -126, 0.0, 44.0, 16.0, 20.0]
    near = []
    for p in pivots:
        b = int(bits(p))
        for s in (0, 0x80000000):
            near += [(b + k) ^ s for k in range(-512, 513) if 0 <= b + k < 0x7f800000]
    rng = np.random.default_rng(20261126)
    head = np.concatenate([np.array(spb, dtype=np.uint32), np.array(near, dtype=np.uint32),
                           rng.integers(0, 2 ** 32, 60000, dtype=np.uint64).astype(np.uint32)])
    rest = rng.uniform(-12.0, 12.0, N - len(head)).astype(np.float32)
    return np.concatenate([f32(head), rest])


def ulp_of(r32):
    """The ulp of float32 values r32 (finite): 2^(e - 23) for |r| in [2^e, 2^(e + 1)), 2^-149 below 2^-126."""
    a = np.abs(r32.astype(np.float64))
    e = np.floor(np.log2(np.maximum(a, 2.0 ** -126)))
    return 2.0 ** (e - 23)


def measure(op, x, got):
    """(max ulp, worst x, count outside the tolerance, count of mismatched non-finite
    results, max error / tolerance) of got = op(x) in float32."""
    with np.errstate(all="ignore"):
        d = x.astype(np.float64)
        r = reference(op, d)
        r32 = r.astype(np.float32)
    fin = np.isfinite(r32)
    special = ~fin & ~((np.isnan(r32) & np.isnan(got)) | (r32 == got))
    err = np.abs(got[fin].astype(np.float64) - r[fin])
    err = np.where(np.isfinite(err), err, np.inf)
    ulps = err / ulp_of(r32[fin])
    m = np.abs(d[fin]) if op in MAG_X else 1.0
    tol = 8 * EPS * (np.abs(r[fin]) + m) + 2.0 ** -149
    i = int(np.argmax(ulps)) if ulps.size else 0
    worst = float(x[fin][i]) if ulps.size else 0.0
    ratio = float((err / tol).max(initial=0.0))
    return (float(ulps.max(initial=0.0)), worst, int((err > tol).sum()), int(special.sum()), ratio)


def check(inp, outdir):
    x = np.fromfile(inp, dtype="<f4")
    bad = 0
    for op, bound in BOUND.items():
        got = np.fromfile("%s/%s.bin" % (outdir, op), dtype="<f4")
        mu, wx, ntol, nspec, ratio = measure(op, x, got)
        # A composition's ulp error is unbounded where its expression cancels or underflows
        # (gelu(-7) = -1e-11 from 1 + erf = 0, sigmoid(-88) from e^88 = inf), as in libm or
        # PyTorch's float kernels: for those, the tolerance is the measure.
        head = "max %.3f ulp at x = %.9g, bound %g" % (mu, wx, bound) if bound is not None else "max err/tol %.3f" % ratio
        what = "%s; %d outside the ew tolerance, %d non-finite mismatches" % (head, ntol, nspec)
        ok = ntol == 0 and nspec == 0 and (bound is None or mu <= bound)
        print("%s math/ulp/%s: %s" % ("PASS" if ok else "FAIL", op, what))
        bad += not ok
    return bad


def same(dir_a, dir_b):
    """Compares two platforms' outputs: every value must have the same bits, except that a
    NaN may differ from a NaN in sign and payload. An invalid operation (inf - inf, 0 * inf:
    gelu and silu at -inf) creates the platform's default NaN, 0xffc00000 on x86-64 and
    0x7fc00000 on ARM64; a NaN passed through keeps its bits on both."""
    bad = 0
    for op in BOUND:
        a = np.fromfile("%s/%s.bin" % (dir_a, op), dtype="<u4")
        b = np.fromfile("%s/%s.bin" % (dir_b, op), dtype="<u4")
        nan = np.isnan(a.view(np.float32)) & np.isnan(b.view(np.float32))
        diff = (a != b) & ~nan
        ndiffnan = int(((a != b) & nan).sum())
        ok = a.size == b.size and not diff.any()
        print("%s math/platforms/%s: %s%s" % ("PASS" if ok else "FAIL", op,
              "the same bits" if ok else "%d values differ" % int(diff.sum()),
              " (%d NaNs of other sign or payload)" % ndiffnan if ndiffnan else ""))
        bad += not ok
    return bad


def main(argv):
    if len(argv) == 3 and argv[1] == "inputs":
        sweep_inputs().astype("<f4").tofile(argv[2])
        return 0
    if len(argv) == 4 and argv[1] == "check":
        return 1 if check(argv[2], argv[3]) else 0
    if len(argv) == 4 and argv[1] == "same":
        return 1 if same(argv[2], argv[3]) else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/python3
"""fit_math.py — derives the polynomial coefficients of Kiln's math functions
(templates/c/math_*.c.tmpl) and prints them as the C float literals the templates use.

Each polynomial is a near-minimax fit of the function's reduced form on its interval, the
error weighted as it reaches the final result (relative error of exp, tanh, log; for erf's
upper branch the error erfc contributes to erf), found by Lawson's iteration (weighted least
squares whose weights grow where the error peaks) on 3000-4000 points evaluated with mpmath
at 30 digits, then rounded to float. The float evaluation errors are not modelled here:
tests/t_math.sh measures the functions as compiled (MATH_EXHAUSTIVE=1: every float).

    /usr/bin/python3 scripts/fit_math.py     (~10 s)
"""
import mpmath as mp
import numpy as np

mp.mp.dps = 30


def lawson(xs, target, powers, var, weight, iters=200):
    """Coefficients c of sum c_k var(x)^k fitting target on xs, minimising max |weight *
    (fit - target)| (approximately), and that maximum."""
    a = np.stack([var(xs) ** k for k in powers], 1) * weight[:, None]
    t = target * weight
    w = np.ones(len(xs)) / len(xs)
    for _ in range(iters):
        sw = np.sqrt(w)
        c, *_ = np.linalg.lstsq(a * sw[:, None], t * sw, rcond=None)
        e = np.abs(a @ c - t)
        w = w * e
        w /= w.sum()
    return c, float(np.max(np.abs(a @ c - t)))


def mpv(f, xs):
    return np.array([float(f(mp.mpf(float(v)))) for v in xs])


def literal(v):
    """v rounded to float, as a C hex literal: 0x1.555488p-3f."""
    m, p = float(np.float32(v)).hex().split("p")
    m = m.rstrip("0").rstrip(".")
    return "%sp%sf" % (m, p)


def show(name, c, err):
    lits = ", ".join(literal(v) for v in c)
    print("%-5s max weighted error %.2e: %s" % (name, err, lits))


def main():
    # exp: e^r = 1 + r + r^2 P(r), |r| <= ln2/2 (a little wider: n is rounded from a rounded x/ln2)
    r = np.linspace(-0.3505, 0.3505, 4001)
    r = r[np.abs(r) > 1e-6]
    c, e = lawson(r, mpv(lambda v: (mp.exp(v) - 1 - v) / v ** 2, r), range(5), lambda v: v, r ** 2 / mpv(mp.exp, r))
    show("exp", c, e)
    ln2 = np.log(2.0)
    head = float.fromhex("0x1.62ep-1")
    print("      ln2: head %s (13 bits: n * head is exact for |n| <= 2^11), tail %s" % (literal(head), literal(ln2 - head)))

    # tanh: a + a^3 Q(a^2) on [0, 0.625]
    a = np.linspace(1e-4, 0.625, 3000)
    c, e = lawson(a, mpv(lambda v: (mp.tanh(v) - v) / v ** 3, a), range(5), lambda v: v * v, a ** 3 / mpv(mp.tanh, a))
    show("tanh", c, e)

    # erf below 0.875: a + a P(a^2), P ~ 2/sqrt(pi) - 1
    a = np.linspace(1e-4, 0.875, 3000)
    erf = mpv(mp.erf, a)
    c, e = lawson(a, mpv(lambda v: mp.erf(v) / v - 1, a), range(6), lambda v: v * v, a / erf)
    show("erf<", c, e)
    # erf above: log erfc(a) as a polynomial in a - 0.875 on [0.875, 4]
    a = np.linspace(0.875, 4.0, 3000)
    w = mpv(lambda v: mp.erfc(v) / mp.erf(v), a)
    c, e = lawson(a, mpv(lambda v: mp.log(mp.erfc(v)), a), range(8), lambda v: v - 0.875, w)
    show("erf>", c, e)

    # log: log m = f - s (f - s^2 R(s^2)), s = f / (2 + f) in [-0.1716, 0.1716]
    s = np.linspace(1e-4, 0.1716 * 1.01, 3000)
    c, e = lawson(s, mpv(lambda v: (2 * mp.atanh(v) - 2 * v) / v ** 3, s), range(3), lambda v: v * v,
                  s ** 3 / mpv(lambda v: 2 * mp.atanh(v), s))
    show("log", c, e)


if __name__ == "__main__":
    main()

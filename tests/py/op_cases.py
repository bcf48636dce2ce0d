"""op_cases.py -- the per-op test cases of t_ops: one tiny Lua model each, with its inputs
and an independent float64 reference written with numpy / torch.nn.functional.

A Case names the op it exercises (`op`, an op of `kiln ops`; `also` lists further ops it
covers), a Lua expression over its inputs (or a body of Lua lines plus output names), how
to draw each input, the reference, the expected output dtypes and a tolerance (kt.Tol;
docs/testing.md explains each). Cases are grouped by op family below; each group tries
broadcasting, size-1 and odd dims, rank 0/1 where legal, negative dims, methods and the
operator syntax where the Lua API has them.
"""
import math
import zlib

import numpy as np
import torch
import torch.nn.functional as F

from kt import EPS, Tol, lua_shape

torch.set_num_threads(1)
np.seterr(all="ignore")


class Case:
    def __init__(self, op, name, expr=None, inputs=(), ref=None, tol=None, dtypes=("f32",),
                 body=None, outputs=("out",), params=None, also=(), files=None, interp_error=False, state=None,
                 c_range=False):
        self.op, self.name, self.expr, self.ref = op, name, expr, ref
        self.inputs = list(inputs)          # (name, shape, dtype, gen)
        self.tol = tol or Tol.exact()
        self.dtypes = tuple(dtypes)
        self.body, self.outputs = body, tuple(outputs)
        self.params = params or {}          # name -> array written to <model>.safetensors
        self.files = files                  # raw safetensors entries, when they differ from params
        self.also = tuple(also)
        self.interp_error = interp_error    # the interpreter must refuse (data-dependent error)
        self.c_range = c_range              # the C entry must return E_RANGE, touching nothing
        self.state = state                  # (shape, dtype, gen): persistent state `s` and what it holds
        self.model = ("%s_%s" % (op, name)).lower()          # before the call; the ref gets it last

    def draw(self):
        """Deterministic inputs (seeded from the case's name), then params, in ref order."""
        rng = np.random.default_rng(zlib.crc32(self.model.encode()))
        arrs = [gen(g, rng, shape, dt) for (_, shape, dt, g) in self.inputs]
        return arrs

    def draw_state(self):
        """The value of state `s` the case's one call starts from (None: no state)."""
        if self.state is None:
            return None
        shape, dt, g = self.state
        return gen(g, np.random.default_rng(zlib.crc32(("state/" + self.model).encode())), shape, dt)

    def lua(self):
        lines = ["-- t_ops case %s/%s, written by tests/py/run_ops.py" % (self.op, self.name)]
        if self.params:
            lines.append('kiln.load("%s.safetensors")' % self.model)
        if self.state:
            lines.append('local s = kiln.state("s", %s, "%s")' % (lua_shape(self.state[0]), self.state[1]))
        for (n, shape, dt, _) in self.inputs:
            lines.append('local %s = kiln.input("%s", %s%s)' % (n, n, lua_shape(shape),
                                                             "" if dt == "f32" else ', "%s"' % dt))
        for n, a in self.params.items():
            if "." not in n:   # a dotted name belongs to an nn module the body creates
                lines.append('local %s = kiln.param("%s", %s)' % (n, n, lua_shape(np.shape(a))))
        if self.body:
            lines += self.body.strip().splitlines()
        else:
            lines.append('kiln.output("out", %s)' % self.expr)
        return "\n".join(lines) + "\n"


def gen(g, rng, shape, dt):
    """Draws one input. g: a spec string, or a function (rng, shape) -> array."""
    if callable(g):
        a = g(rng, shape)
    elif isinstance(g, (list, tuple, np.ndarray)):
        a = np.array(g).reshape(shape)
    elif g == "n":
        a = rng.standard_normal(shape)
    elif g == "pos":
        a = np.exp(rng.uniform(-3, 3, shape))
    elif g == "nz":
        a = rng.uniform(0.5, 3, shape) * rng.choice([-1, 1], shape)
    elif g == "small":
        a = rng.integers(-2, 3, shape)
    elif g == "bool":
        a = rng.random(shape) < 0.5
    elif g.startswith("u:"):
        lo, hi = map(float, g[2:].split(":"))
        a = rng.uniform(lo, hi, shape)
    elif g.startswith("int:"):
        lo, hi = map(int, g[4:].split(":"))
        a = rng.integers(lo, hi, shape)
    else:
        raise ValueError("unknown generator " + g)
    return np.asarray(a).astype({"f32": np.float32, "i32": np.int32, "bool": np.bool_, "i64": np.int64}[dt]).reshape(shape)


def T(a):
    return torch.from_numpy(np.array(a, dtype=np.float64))


def N(t):
    return t.numpy()


def amax(*arrs):
    return max([float(np.max(np.abs(np.asarray(a, dtype=np.float64)), initial=0.0)) for a in arrs] + [0.0])


CASES = []


def add(*a, **k):
    CASES.append(Case(*a, **k))


# ---------------------------------------------------------------- binary elementwise

BINARY = {  # op: (Lua operator or None, reference, generator of x, generator of y)
    "add": ("+", np.add, "n", "n"),
    "sub": ("-", np.subtract, "n", "n"),
    "mul": ("*", np.multiply, "n", "n"),
    "div": ("/", np.divide, "n", "nz"),
    "pow": ("^", np.power, "pos", "u:-2:2"),
    "max": (None, np.fmax, "n", "n"),
    "min": (None, np.fmin, "n", "n"),
}
BIN_SHAPES = [("same", [2, 3, 5], [2, 3, 5]), ("row", [4, 7], [7]), ("both", [3, 1, 5], [1, 4, 1]),
              ("ones", [1, 1], [1]), ("rank0", [], [3]), ("odd", [13], [13]),
              ("batch", [2, 3, 4, 5], [3, 1, 5])]

for op, (sym, f, gx, gy) in BINARY.items():
    for cname, sx, sy in BIN_SHAPES:
        add(op, cname, "kiln.%s(x, y)" % op, [("x", sx, "f32", gx), ("y", sy, "f32", gy)],
            ref=lambda x, y, f=f: f(x, y), tol=Tol.ew())
    if sym:
        add(op, "operator", "x %s y" % sym, [("x", [3, 4], "f32", gx), ("y", [4], "f32", gy)],
            ref=lambda x, y, f=f: f(x, y), tol=Tol.ew())
        left = {"pow": ("u:-3:3", 2.0)}.get(op, (gy, 1.5))
        add(op, "num_left", "%g %s x" % (left[1], sym), [("x", [2, 5], "f32", left[0])],
            ref=lambda x, f=f, c=left[1]: f(c, x), tol=Tol.ew())
        add(op, "num_right", "x %s 2" % sym, [("x", [2, 5], "f32", "n")],
            ref=lambda x, f=f: f(x, 2.0), tol=Tol.ew())
    else:
        add(op, "num", "kiln.%s(x, 0.25)" % op, [("x", [2, 5], "f32", "n")],
            ref=lambda x, f=f: f(x, 0.25), tol=Tol.ew())
        nanx = [np.nan, 1, np.nan, -2, 0, 3]
        nany = [3, np.nan, np.nan, -5, -0.0, 3]
        add(op, "nan", "kiln.%s(x, y)" % op, [("x", [6], "f32", nanx), ("y", [6], "f32", nany)],
            ref=lambda x, y, f=f: f(x, y), tol=Tol.ew())

add("div", "by_zero", "x / y", [("x", [6], "f32", [1, -1, 0, 2.5, -0.0, 3]),
                                ("y", [6], "f32", [0, 0, 0, -0.0, 0, np.inf])],
    ref=lambda x, y: np.divide(x, y), tol=Tol.ew())
add("sub", "neg_unary", "-x + y", [("x", [3, 2], "f32", "n"), ("y", [2], "f32", "n")],
    ref=lambda x, y: -x + y, tol=Tol.ew(), also=("neg",))
# Operands of a fused chain fixed along each row of the output's last dim, read at the row's
# part plus the column (emit_common.c operand_index): after a broadcast binary op (rows of 8,
# the operand repeated over the middle dim and along the rows), and after a concat along the
# last dim (RoPE's rotate_half times a table shared by the heads).
add("mul", "chain_rows", "x * y + z + w",
    [("x", [4, 3, 8], "f32", "n"), ("y", [4, 1, 8], "f32", "n"), ("z", [4, 1, 8], "f32", "n"),
     ("w", [4, 3, 1], "f32", "n")],
    ref=lambda x, y, z, w: N(T(x) * T(y) + T(z) + T(w)),
    tol=Tol.ew(lambda x, y, z, w: np.abs(x * y) + np.abs(z) + np.abs(w)), also=("add",))
add("concat", "chain_rope", "kiln.concat({-x2, x1}, 2) * s",
    [("x1", [8, 3, 4], "f32", "n"), ("x2", [8, 3, 4], "f32", "n"), ("s", [8, 1, 8], "f32", "n")],
    ref=lambda x1, x2, s: N(torch.cat([-T(x2), T(x1)], 2) * T(s)), tol=Tol.ew(), also=("neg", "mul"))

# ---------------------------------------------------------------- comparisons and where

CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
       "gt": np.greater, "ge": np.greater_equal}
for op, f in CMP.items():
    add(op, "same", "kiln.%s(x, y)" % op, [("x", [3, 4], "f32", "small"), ("y", [3, 4], "f32", "small")],
        ref=lambda x, y, f=f: f(x, y), dtypes=("bool",))
    add(op, "bcast", "kiln.%s(x, y)" % op, [("x", [2, 3, 1], "f32", "small"), ("y", [4], "f32", "small")],
        ref=lambda x, y, f=f: f(x, y), dtypes=("bool",))
    add(op, "num", "kiln.%s(x, 1)" % op, [("x", [7], "f32", "small")],
        ref=lambda x, f=f: f(x, 1.0), dtypes=("bool",))
    add(op, "method", "x:%s(y)" % op, [("x", [5], "f32", "small"), ("y", [1], "f32", "small")],
        ref=lambda x, y, f=f: f(x, y), dtypes=("bool",))
    add(op, "nan_inf", "kiln.%s(x, y)" % op,
        [("x", [6], "f32", [np.nan, 1, np.nan, np.inf, -np.inf, -0.0]),
         ("y", [6], "f32", [1, np.nan, np.nan, np.inf, 0, 0])],
        ref=lambda x, y, f=f: f(x, y), dtypes=("bool",))

add("where", "bool_input", "kiln.where(c, x, y)",
    [("c", [2, 3], "bool", "bool"), ("x", [2, 3], "f32", "n"), ("y", [2, 3], "f32", "n")],
    ref=lambda c, x, y: np.where(c, x, y))
add("where", "bcast3", "kiln.where(c, x, y)",
    [("c", [2, 1], "bool", "bool"), ("x", [1, 3], "f32", "n"), ("y", [2, 3], "f32", "n")],
    ref=lambda c, x, y: np.where(c, x, y))
add("where", "num", "kiln.where(c, x, 0)", [("c", [4], "bool", "bool"), ("x", [3, 4], "f32", "n")],
    ref=lambda c, x: np.where(c, x, 0.0))
add("where", "from_cmp", "kiln.where(kiln.gt(x, y), x, y)",
    [("x", [2, 5], "f32", "small"), ("y", [5], "f32", "small")],
    ref=lambda x, y: np.where(x > y, x, y), also=("gt",))
add("where", "i32", "kiln.where(c, a, b)",
    [("c", [4], "bool", "bool"), ("a", [4], "i32", "int:-9:9"), ("b", [2, 4], "i32", "int:-9:9")],
    ref=lambda c, a, b: np.where(c, a, b), dtypes=("i32",))

# ---------------------------------------------------------------- i32 arithmetic
# Two's-complement wrapping, as PyTorch's int32 tensors (and numpy's) do: the reference
# computes exactly in int64 and wraps; every target computes i32(i64(x) op y).

def wrap32(v):
    return ((np.asarray(v, dtype=np.int64) + 2**31) % 2**32 - 2**31).astype(np.int32)


I32 = {"add": ("+", lambda x, y: x + y), "sub": ("-", lambda x, y: x - y), "mul": ("*", lambda x, y: x * y),
       "max": (None, np.maximum), "min": (None, np.minimum)}
EDGE_X = [2147483647, -2147483648, 2147483647, -2147483648, 123456789, -5, 0, 65536]
EDGE_Y = [1, -1, 2147483647, 2147483647, 100000, 7, -2147483648, 65536]
for op, (sym, f) in I32.items():
    ref = lambda x, y, f=f: wrap32(f(x.astype(np.int64), y.astype(np.int64)))
    for cname, sx, sy in [("same", [2, 3, 5], [2, 3, 5]), ("row", [4, 7], [7]), ("rank0", [], [3])]:
        add(op, "i32_" + cname, "kiln.%s(x, y)" % op,
            [("x", sx, "i32", "int:-100000:100000"), ("y", sy, "i32", "int:-100000:100000")],
            ref=ref, dtypes=("i32",))
    add(op, "i32_wrap", "kiln.%s(x, y)" % op, [("x", [8], "i32", EDGE_X), ("y", [8], "i32", EDGE_Y)],
        ref=ref, dtypes=("i32",))
    if sym:
        add(op, "i32_int_literal", "x %s 3" % sym, [("x", [2, 5], "i32", "int:-9:9")],
            ref=lambda x, f=f: wrap32(f(x.astype(np.int64), 3)), dtypes=("i32",))
add("neg", "i32", "-x", [("x", [6], "i32", [0, 1, -7, 2147483647, -2147483648, 42])],
    ref=lambda x: wrap32(-x.astype(np.int64)), dtypes=("i32",))
add("abs", "i32", "kiln.abs(x)", [("x", [6], "i32", [0, 1, -7, 2147483647, -2147483648, -42])],
    ref=lambda x: wrap32(np.abs(x.astype(np.int64))), dtypes=("i32",))
add("add", "i32_chain", "(x * 2 + y):neg():abs() - 1",   # fused: an i32 epilogue chain
    [("x", [3, 4], "i32", "int:-1000:1000"), ("y", [4], "i32", "int:-1000:1000")],
    ref=lambda x, y: wrap32(np.abs(-(x.astype(np.int64) * 2 + y)) - 1), dtypes=("i32",),
    also=("mul", "neg", "abs", "sub"))
for op, f in CMP.items():
    add(op, "i32", "kiln.%s(x, y)" % op, [("x", [2, 6], "i32", "int:-3:3"), ("y", [6], "i32", "int:-3:3")],
        ref=lambda x, y, f=f: f(x, y), dtypes=("bool",))
add("lt", "i32_position", "kiln.lt(x, p + 1)", [("x", [8], "i32", "int:0:8"), ("p", [], "i32", [4])],
    ref=lambda x, p: x < p + 1, dtypes=("bool",), also=("add",))
# Promotion, as PyTorch: i32 with a non-integer number or an f32 tensor, and true division,
# compute in f32 (exact here: small integers and halves are exact in f32).
add("add", "i32_promote_number", "x + 0.5", [("x", [5], "i32", "int:-50:50")],
    ref=lambda x: x.astype(np.float32) + np.float32(0.5), also=("cast",))
add("mul", "i32_promote_tensor", "x * y", [("x", [5], "i32", "int:-50:50"), ("y", [5], "f32", "u:-2:2")],
    ref=lambda x, y: x.astype(np.float64) * y, tol=Tol.ew(), also=("cast",))
add("div", "i32_true_division", "x / 4", [("x", [6], "i32", "int:-50:50")],
    ref=lambda x: x.astype(np.float64) / 4, tol=Tol.ew(), also=("cast",))
add("exp", "i32_promote_unary", "kiln.exp(x)", [("x", [4], "i32", "int:-3:3")],
    ref=lambda x: np.exp(x.astype(np.float64)), tol=Tol.ew(), also=("cast",))

# ---------------------------------------------------------------- round_f16
# x.half().float(), bit for bit: numpy's float32 -> float16 conversion rounds to nearest
# even. Random bit patterns (every exponent, subnormal halves, inf and NaN), the ties of
# every binade of the half range, and the edges: 65504, 65520 (a tie to inf), 2^-14, the
# smallest half subnormal and half of it (a tie to 0), -0.

def f16_bits():
    rng = np.random.default_rng(16)
    a = rng.integers(0, 2**32, 512, dtype=np.uint64).astype(np.uint32).view(np.float32)
    ties = ((rng.integers(0x38800000, 0x477ff000, 256).astype(np.uint32) & np.uint32(0xffffe000))
            | np.uint32(0x1000)).view(np.float32)
    sub = rng.uniform(-2**-14, 2**-14, 128).astype(np.float32)
    edges = np.array([65504, 65519.996, 65520, -65520, 65536, 2**-14, 2**-24, 2**-25, 3 * 2**-26,
                      1.00048828125, 1.00146484375, -0.0, np.inf, -np.inf, np.nan, 1e-45], np.float32)
    return np.concatenate([edges, ties, sub, a])


F16X = f16_bits()
add("round_f16", "bits", "kiln.round_f16(x)", [("x", [len(F16X)], "f32", list(F16X))],
    ref=lambda x: x.astype(np.float32).astype(np.float16).astype(np.float32))
add("round_f16", "method", "(x * 3):round_f16()", [("x", [4, 7], "f32", "n")],
    ref=lambda x: (x.astype(np.float32) * np.float32(3)).astype(np.float16).astype(np.float32), also=("mul",))

# ---------------------------------------------------------------- fmod and remainder
# torch.fmod (the sign of x) and torch.remainder (the sign of y). Both are exact: the
# f32 results are representable (numpy computes the same in float32, bit for bit), the
# i32 ones are integer arithmetic; an i32 divisor of 0 gives 0 (Kiln's definition:
# PyTorch raises).

def i_mod(x, y, floor):
    x, y = x.astype(np.int64), y.astype(np.int64)
    safe = np.where(y == 0, 1, y)
    r = np.fmod(x, safe) if not floor else np.mod(x, safe)
    return np.where(y == 0, 0, r).astype(np.int32)


MODX = [5.5, -5.5, 5.5, -5.5, 1e10, -3e-7, 7, -0.0, np.inf, 2, np.nan, 3]
MODY = [2, 2, -2, -2, 3.3, 1e-7, 7, 3, 2, np.inf, 1, 0]
for op, f, floor in (("fmod", np.fmod, False), ("remainder", np.remainder, True)):
    add(op, "same", "kiln.%s(x, y)" % op, [("x", [2, 3, 5], "f32", "n"), ("y", [2, 3, 5], "f32", "nz")],
        ref=lambda x, y, f=f: f(x.astype(np.float32), y.astype(np.float32)))
    add(op, "bcast_method", "x:%s(y)" % op, [("x", [4, 7], "f32", "n"), ("y", [7], "f32", "nz")],
        ref=lambda x, y, f=f: f(x.astype(np.float32), y.astype(np.float32)))
    add(op, "num", "kiln.%s(x, 0.75)" % op, [("x", [9], "f32", "n")],
        ref=lambda x, f=f: f(x.astype(np.float32), np.float32(0.75)))
    add(op, "edges", "kiln.%s(x, y)" % op, [("x", [12], "f32", MODX), ("y", [12], "f32", MODY)],
        ref=lambda x, y, f=f: f(x.astype(np.float32), y.astype(np.float32)))
    add(op, "i32", "kiln.%s(x, y)" % op, [("x", [3, 6], "i32", "int:-100:100"), ("y", [6], "i32", [3, -3, 7, -7, 1, 100])],
        ref=lambda x, y, floor=floor: i_mod(x, y, floor), dtypes=("i32",))
    add(op, "i32_edges", "kiln.%s(x, y)" % op,
        [("x", [8], "i32", EDGE_X), ("y", [8], "i32", [1, -1, 2147483647, 2147483647, 100000, 0, -2147483648, -65536])],
        ref=lambda x, y, floor=floor: i_mod(x, y, floor), dtypes=("i32",))

# ---------------------------------------------------------------- attention (sdpa)
# Reference: plain float64 softmax attention in numpy with an explicit boolean mask (keys
# j < clamp(len, 0, S), and j <= pos + i when causal) and K/V repeated per query head group
# (Llama's repeat_interleave); a row that sees no key is 0. Debian's torch 1.13 has no
# scaled_dot_product_attention, so torch is not used here.

def sdpa_ref(q, k, v, L, P, causal=True, scale=None):
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    HQ, T, D = q.shape
    S = k.shape[1]
    g = HQ // k.shape[0]
    k, v = np.repeat(k, g, axis=0), np.repeat(v, g, axis=0)
    scale = 1 / math.sqrt(D) if scale is None else scale
    n = min(max(int(L), 0), S)
    mask = np.arange(S)[None, :] < n
    if causal:
        mask = mask & (np.arange(S)[None, :] <= int(P) + np.arange(T)[:, None])
    s = np.where(mask[None], scale * (q @ k.transpose(0, 2, 1)), -np.inf)
    m = np.max(s, axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0))
    tot = np.sum(e, axis=-1, keepdims=True)
    # the keys a row sees only: e @ v would take 0 * inf = NaN from the others
    ev = np.where(mask[None, :, :, None], e[..., None] * v[:, None, :, :], 0.0).sum(axis=2)
    out = ev / np.where(tot > 0, tot, 1)
    return np.where(np.any(mask, axis=-1)[None, :, None], out, 0.0)


def sdpa_tol(q, k, v, *rest, scale=None):
    """Scores: a D-term contraction, abs error (2 sqrt(D) + 4) eps A with A = scale max |q|.|k|;
    softmax: relative error of p about 2 (that + max|s| eps) + (2 sqrt(S) + 8) eps; the output,
    a weighted mean of v, inherits it times max|v| plus its own S-term sum."""
    D, S = q.shape[2], k.shape[1]
    sc = 1 / math.sqrt(D) if scale is None else scale
    g = q.shape[0] // k.shape[0]
    A = sc * float(np.max(np.abs(q).astype(np.float64) @ np.repeat(np.abs(k), g, axis=0).transpose(0, 2, 1)))
    rel = 2 * ((2 * math.sqrt(D) + 4) * A + A) + (2 * math.sqrt(S) + 8) + (2 * math.sqrt(S) + 4)
    vmax = float(np.max(np.abs(v[np.isfinite(v)]), initial=0.0))   # a non-finite v's outputs match exactly
    return EPS * rel * max(1.0, vmax)


def nonfinite_v(bad):
    """An input generator: standard normal values with v[h, slot, c] = x for each (h, slot, c, x) of bad."""
    def g(rng, shape):
        a = rng.standard_normal(shape)
        for h, slot, c, x in bad:
            a[h, slot, c] = x
        return a
    return g


def sdpa_case(name, hq, t, hkv, s, d, pos, ln, causal=True, scale=None, extra="", expr=None, vgen="n"):
    opts = ["len = %s" % ln, "pos = p"] + ([] if causal else ["causal = false"]) + (
        [] if scale is None else ["scale = %r" % scale])
    e = expr or "kiln.sdpa(q, k, v, {%s})%s" % (", ".join(opts), extra)
    lenv = (lambda p: eval(ln.replace("p", "int(p)"))) if "p" in ln else (lambda p: int(ln))
    post = {"": lambda o: o, " * 2 + 1": lambda o: o * 2 + 1}[extra]
    add("sdpa", name, e,
        [("q", [hq, t, d], "f32", "n"), ("k", [hkv, s, d], "f32", "n"), ("v", [hkv, s, d], "f32", vgen),
         ("p", [], "i32", [pos])],
        ref=lambda q, k, v, p: post(sdpa_ref(q, k, v, lenv(p), p, causal, scale)),
        tol=Tol.custom("softmax", "sdpa", lambda ref, ins: sdpa_tol(*ins, scale=scale) * (2 if extra else 1)),
        also=("add", "mul") if extra else ("add",))


add("add", "arange_runtime_start", "kiln.arange(5, {start = p})", [("p", [], "i32", [7])],
    ref=lambda p: np.arange(5, dtype=np.int64) + int(p), dtypes=("i32",))
add("gather", "arange_positions", "kiln.gather(t, kiln.arange(3, {start = p}), 0)",
    [("t", [16, 4], "f32", "n"), ("p", [], "i32", [5])],
    ref=lambda t, p: t[int(p):int(p) + 3])
add("add", "arange_const", "x + kiln.arange(4, {start = -2})", [("x", [4], "i32", "int:-9:9")],
    ref=lambda x: x + np.arange(-2, 2), dtypes=("i32",))
sdpa_case("decode", 8, 1, 4, 32, 8, 17, "p + 1")              # one token at position 17, GQA 2
sdpa_case("prefill_chunk", 8, 5, 4, 32, 8, 9, "p + 5")        # 5 tokens at positions 9..13
sdpa_case("mha", 4, 3, 4, 12, 8, 2, "p + 3")                  # no grouping
sdpa_case("gqa4_odd_d", 8, 4, 2, 20, 5, 6, "p + 4")           # 4 query heads per kv head, D = 5
sdpa_case("not_causal", 4, 3, 2, 16, 8, 0, "11", causal=False)
sdpa_case("len_zero", 4, 2, 2, 8, 8, 0, "0")                  # no valid key: rows are 0
sdpa_case("len_clamped_high", 2, 3, 1, 8, 8, 2, "100", causal=False)
sdpa_case("len_clamped_low", 2, 3, 1, 8, 8, 2, "-3")
# A prefill (KILN_ATTN_MIN_T = 8 query rows or more: templates/c/attn_lib.c.tmpl):
# blocks of 32 queries, keys 48 a chunk, head sizes off the tile's 12 rows.
sdpa_case("prefill_blocks", 6, 40, 2, 96, 16, 30, "p + 40")  # two query blocks (the second of 8), two chunks
sdpa_case("prefill_min_t", 4, 8, 4, 20, 24, 10, "p + 8")     # exactly 8 rows, D two whole tiles
sdpa_case("prefill_odd_d", 3, 33, 1, 50, 5, 0, "37", causal=False)   # D = 5; 37 keys of 50
sdpa_case("prefill_chunks", 2, 16, 1, 130, 12, 0, "130", causal=False)   # 3 chunks of keys
sdpa_case("prefill_len_zero", 2, 9, 1, 16, 8, 0, "0")         # no key: rows are 0
sdpa_case("prefill_late", 4, 12, 2, 40, 8, 30, "p + 12")      # positions 30..41 past S: clamped
sdpa_case("prefill_d256", 2, 8, 1, 20, 256, 4, "p + 8")       # the largest head size
sdpa_case("prefill_epilogue", 4, 20, 2, 32, 8, 5, "p + 20", extra=" * 2 + 1")
sdpa_case("prefill_three_blocks", 6, 70, 2, 80, 8, -5, "p + 70")   # 3 blocks, groups of 3, rows before position 0
sdpa_case("prefill_short_len", 3, 20, 1, 24, 8, 0, "6", causal=False)   # len < T: every row sees 6 keys
# An infinite or NaN value of V reaches only the rows that see its key (a component each):
# NaN at key 20 (rows 0..19 of the first block do not see it), inf at key 37, -inf past len.
sdpa_case("prefill_nonfinite_v", 4, 40, 2, 64, 8, 0, "p + 40",
          vgen=nonfinite_v([(0, 20, 3, np.nan), (1, 37, 5, np.inf), (1, 45, 2, -np.inf)]))
# Past the first chunk of 48 keys: positions 30..69, NaN at key 50 (rows 20..39), inf at 65.
sdpa_case("prefill_nonfinite_v_chunks", 2, 40, 1, 80, 8, 30, "p + 40",
          vgen=nonfinite_v([(0, 50, 1, np.nan), (0, 65, 4, np.inf)]))


def sdpa_window_ref(q, k, v, L, P, W):
    """sdpa with window W over a ring of S slots (docs/ops.md): row i, at position P + i, sees
    the positions p with P + i - W < p <= P + i, p < L and p >= L - S, the key of p in slot
    p mod S; a row with no key is 0."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    HQ, T, D = q.shape
    S = k.shape[1]
    g = HQ // k.shape[0]
    out = np.zeros(q.shape)
    for h in range(HQ):
        for i in range(T):
            lo, hi = max(P + i - W + 1, L - S, 0), min(P + i, L - 1)
            if lo > hi:
                continue
            slots = [p % S for p in range(lo, hi + 1)]
            s = (k[h // g][slots] @ q[h, i]) / math.sqrt(D)
            e = np.exp(s - s.max())
            out[h, i] = (e @ v[h // g][slots]) / e.sum()
    return out


def sdpa_window_case(name, hq, t, hkv, s, d, pos, ln, window, vgen="n"):
    add("sdpa", name, "kiln.sdpa(q, k, v, {len = %s, pos = p, window = %d})" % (ln, window),
        [("q", [hq, t, d], "f32", "n"), ("k", [hkv, s, d], "f32", "n"), ("v", [hkv, s, d], "f32", vgen),
         ("p", [], "i32", [pos])],
        ref=lambda q, k, v, p: sdpa_window_ref(q, k, v, int(eval(ln.replace("p", "int(p)"))), int(p), window),
        tol=Tol.custom("softmax", "sdpa", lambda ref, ins: sdpa_tol(*ins)),
        also=("add",))


# The prefill kernel over a window (Gemma's sliding layers): a plain cache (S >= len), and a
# ring whose slots wrap inside the block's keys (position p in slot p mod S).
sdpa_window_case("prefill_window", 4, 20, 2, 64, 8, 5, "p + 20", 7)
sdpa_window_case("prefill_window_ring", 4, 12, 2, 20, 8, 30, "p + 12", 9)   # positions 21..41 in 20 slots
# NaN at position 8: rows 3..9 (positions 8..14) see it; rows 0..2 come before it and rows
# 10..19 have moved their window past it.
sdpa_window_case("prefill_window_nonfinite_v", 4, 20, 2, 64, 8, 5, "p + 20", 7,
                 vgen=nonfinite_v([(0, 8, 1, np.nan), (1, 8, 6, np.inf)]))
# A ring that wraps inside the block: positions 100..131 in 128 slots, a window of 64; NaN
# at position 120 (rows 20..31), inf at position 129 (slot 1: rows 29..31).
sdpa_window_case("prefill_ring_nonfinite_v", 2, 32, 1, 128, 8, 100, "p + 32", 64,
                 vgen=nonfinite_v([(0, 120, 2, np.nan), (0, 1, 5, np.inf)]))
sdpa_case("pos_negative", 2, 4, 2, 8, 8, -2, "8")             # rows 0, 1 see nothing
sdpa_case("scale", 4, 2, 2, 8, 8, 3, "p + 2", scale=0.05)
sdpa_case("fused", 4, 2, 2, 8, 8, 3, "p + 2", extra=" * 2 + 1")

# ---------------------------------------------------------------- unary elementwise


def mag_abs(x, *_):
    return np.abs(x)


def mag_max(x, *_):
    return float(np.max(np.abs(x), initial=0.0))


def mag_abs_sum(x, *_):
    return np.sum(np.abs(x))


UNARY = {  # op: (reference on float64 torch, generator, tolerance)
    "neg": (lambda t: -t, "n", Tol.exact()),
    "abs": (torch.abs, "n", Tol.exact()),
    "exp": (torch.exp, "u:-10:10", Tol.ew()),
    "log": (torch.log, "pos", Tol.ew()),
    "sqrt": (torch.sqrt, "pos", Tol.ew()),
    "rsqrt": (torch.rsqrt, "pos", Tol.ew()),
    "tanh": (torch.tanh, "u:-10:10", Tol.ew()),
    "sigmoid": (torch.sigmoid, "u:-20:20", Tol.ew()),
    "relu": (torch.relu, "n", Tol.exact()),
    "gelu": (F.gelu, "u:-6:6", Tol.ew(mag_abs)),
    "gelu_tanh": (lambda t: F.gelu(t, approximate="tanh"), "u:-6:6", Tol.ew(mag_abs)),
    "silu": (F.silu, "u:-20:20", Tol.ew(mag_abs)),
    # sin/cos: libm's sinf is within an ulp of the value, but the argument reduction of a
    # large |x| magnifies its rounding: bounded by |x| ulps (8 eps (|ref| + |x|)).
    "sin": (torch.sin, "u:-10:10", Tol.ew(mag_abs)),
    "cos": (torch.cos, "u:-10:10", Tol.ew(mag_abs)),
    "erf": (torch.erf, "u:-4:4", Tol.ew()),
    "floor": (torch.floor, "u:-5:5", Tol.exact()),
    "ceil": (torch.ceil, "u:-5:5", Tol.exact()),
    "round": (torch.round, "u:-5:5", Tol.exact()),
}
UNARY_SPECIAL = {  # inputs with zeros, infinities, NaN (IEEE semantics of C's libm)
    "neg": [0.0, -0.0, np.inf, np.nan],
    "abs": [-0.0, -np.inf, np.nan, -3.5],
    "exp": [100.0, -100.0, np.inf, -np.inf, np.nan, 0.0],
    "log": [0.0, -1.0, np.inf, 1.0, np.nan, 1e-30],
    "sqrt": [0.0, -0.0, -1.0, np.inf, np.nan, 1e-30],
    "rsqrt": [0.0, np.inf, 1e-30, 4.0],
    "tanh": [np.inf, -np.inf, 0.0, 50.0, np.nan, -1e-30],
    "sigmoid": [np.inf, -np.inf, 100.0, -100.0, 0.0, np.nan],
    "relu": [-0.0, 0.0, np.inf, -np.inf, 1e-30, -1e-30],   # NaN: relu(NaN) is 0 by ops.h, NaN in torch
    "gelu": [np.inf, -np.inf, 0.0, 20.0, -20.0, np.nan],
    "gelu_tanh": [np.inf, -np.inf, 0.0, 20.0, -20.0, np.nan],
    "silu": [np.inf, 0.0, 100.0, -100.0, np.nan, 1e-30],
    "sin": [0.0, -0.0, 1e-30, 3.14159265, 100.0, np.nan],
    "cos": [0.0, -0.0, 1e-30, 3.14159265, 100.0, np.nan],
    "erf": [0.0, -0.0, 10.0, -10.0, np.inf, np.nan],
    "floor": [-0.5, 0.5, -0.0, 2.0, -2.5, 1e30, np.inf, np.nan],
    "ceil": [-0.5, 0.5, -0.0, 2.0, -2.5, 1e30, -np.inf, np.nan],
    "round": [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 8388609.0, np.inf, np.nan],   # halves to even
}
for op, (f, g, tol) in UNARY.items():
    fn = "gelu(x, {approximate = \"tanh\"})" if op == "gelu_tanh" else "%s(x)" % op
    for cname, shape in [("main", [2, 3, 4]), ("odd", [17]), ("one", [1]), ("rank0", [])]:
        add(op, cname, "kiln." + fn, [("x", shape, "f32", g)], ref=lambda x, f=f: N(f(T(x))), tol=tol)
    add(op, "method", "x:" + fn.replace("(x, ", "(").replace("(x)", "()"), [("x", [3, 1, 2], "f32", g)],
        ref=lambda x, f=f: N(f(T(x))), tol=tol)
    sp = UNARY_SPECIAL[op]
    add(op, "special", "kiln." + fn, [("x", [len(sp)], "f32", sp)],
        ref=lambda x, f=f: N(f(T(x))), tol=tol)
add("gelu", "nn_module", "kiln.nn.GELU()(x)", [("x", [4, 6], "f32", "u:-6:6")],
    ref=lambda x: N(F.gelu(T(x))), tol=Tol.ew(mag_abs))

# ---------------------------------------------------------------- cast

add("cast", "f32_i32", 'kiln.cast(x, "i32")',
    [("x", [12], "f32", [-2.5, -1.9, -0.5, -0.0, 0.4, 0.5, 1.5, 2.999, 100.2, -100.7, 16777216.0, -2147483520.0])],
    ref=lambda x: np.trunc(x), dtypes=("i32",))
add("cast", "f32_i32_rand", 'x:cast("i32")', [("x", [3, 7], "f32", "u:-50:50")],
    ref=lambda x: np.trunc(x), dtypes=("i32",))
add("cast", "f32_bool", 'kiln.cast(x, "bool")',
    [("x", [8], "f32", [0.0, -0.0, 1e-30, -2.0, np.nan, np.inf, 0.5, 0.0])],
    ref=lambda x: x != 0, dtypes=("bool",))
add("cast", "i32_f32", 'kiln.cast(x, "f32")',
    [("x", [6], "i32", [0, -7, 123456, 16777217, -16777219, 2147483647])],
    ref=lambda x: x.astype(np.float64), dtypes=("f32",))
add("cast", "i32_bool", 'kiln.cast(x, "bool")', [("x", [2, 5], "i32", "int:-2:3")],
    ref=lambda x: x != 0, dtypes=("bool",))
add("cast", "bool_f32", 'kiln.cast(x, "f32")', [("x", [2, 3], "bool", "bool")],
    ref=lambda x: x.astype(np.float64), dtypes=("f32",))
add("cast", "bool_i32", 'kiln.cast(x, "i32")', [("x", [9], "bool", "bool")],
    ref=lambda x: x.astype(np.int64), dtypes=("i32",))
add("cast", "cmp_to_f32", 'kiln.cast(kiln.lt(x, 0), "f32") * x', [("x", [2, 4], "f32", "n")],
    ref=lambda x: (x < 0) * x, also=("lt", "mul"), tol=Tol.ew())
add("cast", "roundtrip", 'kiln.cast(kiln.cast(x, "i32"), "f32")', [("x", [10], "f32", "u:-9:9")],
    ref=lambda x: np.trunc(x))

# ---------------------------------------------------------------- matmul / linear


def mm_case(name, sa, sb, expr="kiln.matmul(a, b)", ta=False, tb=False, K=None):
    def ref(a, b):
        A, B = T(a), T(b)
        if ta:
            A = A.transpose(-1, -2)
        if tb:
            B = B.transpose(-1, -2)
        return N(torch.matmul(A, B))

    def absref(a, b):
        return ref(np.abs(a), np.abs(b))
    k = K or (sa[-2] if ta else sa[-1])
    add("matmul", name, expr, [("a", sa, "f32", "n"), ("b", sb, "f32", "n")], ref=ref,
        tol=Tol.red(k, absref))


mm_case("mm", [3, 5], [5, 4])
mm_case("odd_k129", [8, 129], [129, 33])
mm_case("bcast_rhs", [2, 3, 5], [5, 4])
mm_case("bcast_batch", [2, 1, 3, 5], [4, 5, 6])
mm_case("trans_a", [5, 3], [5, 4], "kiln.matmul(a, b, {trans_a = true})", ta=True)
mm_case("trans_b", [3, 5], [4, 5], "kiln.matmul(a, b, {trans_b = true})", tb=True)
mm_case("trans_both", [2, 5, 3], [2, 4, 5], "kiln.matmul(a, b, {trans_a = true, trans_b = true})",
        ta=True, tb=True)
mm_case("vec_mat", [5], [5, 4], K=5)
mm_case("mat_vec", [3, 5], [5])
mm_case("batch_vec", [2, 3, 5], [5])
mm_case("vec_batch", [5], [2, 5, 3], K=5)
mm_case("dot", [7], [7], K=7)
mm_case("ones", [1, 1], [1, 1])
mm_case("n1", [6, 8], [8, 1])
mm_case("method", [4, 6], [6, 2], "a:matmul(b)")
mm_case("k1_outer", [4, 1], [1, 3])

_rng = np.random.default_rng(11)
_lw = _rng.standard_normal((8, 16)).astype(np.float32)
_lb = _rng.standard_normal((8,)).astype(np.float32)
add("matmul", "linear_params", "kiln.linear(x, w, b)", [("x", [2, 5, 16], "f32", "n")],
    params={"w": _lw, "b": _lb}, also=("weight", "add"),
    ref=lambda x, w, b: N(F.linear(T(x), T(w), T(b))),
    tol=Tol.red(17, lambda x, w, b: N(F.linear(T(np.abs(x)), T(np.abs(w)), T(np.abs(b))))))
add("matmul", "linear_nobias", "kiln.linear(x, w)", [("x", [3, 16], "f32", "n"), ("w", [8, 16], "f32", "n")],
    ref=lambda x, w: N(F.linear(T(x), T(w))),
    tol=Tol.red(16, lambda x, w: N(F.linear(T(np.abs(x)), T(np.abs(w))))))

# The C micro-kernel's tiling edges (templates/c/gemm_lib.c.tmpl; tests/matmul/edges.lua runs
# the same shapes on every ISA path in t_isa): weights packed at build time as panels of 32
# columns (N = 70: a partial panel; K = 300: one pass), row counts around each tile height
# (28 = 12 + 8 + 8 where AVX-512 runs 8-row tiles), the transposed matrix-vector product W x,
# a fused epilogue; K = 1100 (gemm_deep_*): with 13 rows, a packed weight under a whole tile
# of rows read in place goes in passes of 1024 values of k (a deep pass, then a short one
# whose tiles go on from stored sums; the row left over copied 512 values of k at a time);
# with 5 rows, in passes of 512.
_gw = _rng.standard_normal((70, 300)).astype(np.float32)
_gb = _rng.standard_normal((70,)).astype(np.float32)
_gu = _rng.standard_normal((300, 45)).astype(np.float32)
_gv = _rng.standard_normal((40, 300)).astype(np.float32)
for _m in (1, 5, 13, 28):
    add("matmul", "gemm_linear_m%d" % _m, "kiln.relu(kiln.linear(x, w, b))", [("x", [_m, 300], "f32", "n")],
        params={"w": _gw, "b": _gb}, also=("weight", "add", "relu"),
        ref=lambda x, w, b: N(F.relu(F.linear(T(x), T(w), T(b)))),
        tol=Tol.red(300, lambda x, w, b: N(F.linear(T(np.abs(x)), T(np.abs(w)), T(np.abs(b))))))
_gd = _rng.standard_normal((40, 1100)).astype(np.float32)
for _m in (5, 13):
    add("matmul", "gemm_deep_m%d" % _m, "kiln.relu(kiln.linear(x, w))", [("x", [_m, 1100], "f32", "n")],
        params={"w": _gd}, also=("weight", "relu"), ref=lambda x, w: N(F.relu(F.linear(T(x), T(w)))),
        tol=Tol.red(1100, lambda x, w: N(F.linear(T(np.abs(x)), T(np.abs(w))))))
add("matmul", "gemm_kn_batch", "kiln.matmul(x, u)", [("x", [2, 7, 300], "f32", "n")], params={"u": _gu},
    also=("weight",), ref=lambda x, u: N(T(x) @ T(u)),
    tol=Tol.red(300, lambda x, u: N(T(np.abs(x)) @ T(np.abs(u)))))
add("matmul", "gemm_wx", "kiln.matmul(v, x)", [("x", [300, 1], "f32", "n")], params={"v": _gv},
    also=("weight",), ref=lambda x, v: N(T(v) @ T(x)),
    tol=Tol.red(300, lambda x, v: N(T(np.abs(v)) @ T(np.abs(x)))))
# A weight too narrow to pack (N = 10) and a transposed activation: B copied a block of k at
# a time, whole tiles of rows read in place beside it (28 rows; partial last panels).
_gn = _rng.standard_normal((10, 300)).astype(np.float32)
add("matmul", "gemm_narrow_m28", "kiln.linear(x, w)", [("x", [28, 300], "f32", "n")], params={"w": _gn},
    also=("weight",), ref=lambda x, w: N(F.linear(T(x), T(w))),
    tol=Tol.red(300, lambda x, w: N(F.linear(T(np.abs(x)), T(np.abs(w))))))
add("matmul", "gemm_act_t_m28", "kiln.matmul(x, y, {trans_b = true})",
    [("x", [28, 300], "f32", "n"), ("y", [45, 300], "f32", "n")], ref=lambda x, y: N(T(x) @ T(y).T),
    tol=Tol.red(300, lambda x, y: N(T(np.abs(x)) @ T(np.abs(y)).T)))

# An operand every matrix of a batched product shares, fused into its store: an attention
# mask over heads (q k^T, scaled), and over a batch folded into rows (60 rows of 3 matrices of
# 20): read at the element's place in its matrix, not at the flat index modulo its size.
add("matmul", "gemm_mask_heads", "kiln.matmul(x, y, {trans_b = true}) * 0.25 + m",
    [("x", [2, 3, 20, 16], "f32", "n"), ("y", [2, 1, 24, 16], "f32", "n"), ("m", [20, 24], "f32", "n")],
    also=("mul", "add"), ref=lambda x, y, m: N(T(x) @ T(y).transpose(-1, -2) * 0.25 + T(m)),
    tol=Tol.red(16, lambda x, y, m: N(T(np.abs(x)) @ T(np.abs(y)).transpose(-1, -2) * 0.25 + T(np.abs(m)))))
add("matmul", "gemm_mask_rows", "kiln.matmul(x, y) + m",
    [("x", [3, 20, 16], "f32", "n"), ("y", [16, 24], "f32", "n"), ("m", [20, 24], "f32", "n")],
    also=("add",), ref=lambda x, y, m: N(T(x) @ T(y) + T(m)),
    tol=Tol.red(16, lambda x, y, m: N(T(np.abs(x)) @ T(np.abs(y)) + T(np.abs(m)))))

# ---------------------------------------------------------------- conv2d


def pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def conv_ref(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """torch conv2d in float64; padding (t, l, b, r) applied with F.pad first."""
    X = T(x)
    if isinstance(padding, (tuple, list)) and len(padding) == 4:
        t, l, bo, r = padding
        X = F.pad(X, (l, r, t, bo))
        padding = 0
    return N(F.conv2d(X, T(w), None if b is None else T(b), stride=stride, padding=padding,
                      dilation=dilation, groups=groups))


def lua_opt(v):
    return str(v) if isinstance(v, int) else lua_shape(v)


def conv_case(name, sx, sw, bias=True, stride=1, padding=0, dilation=1, groups=1, params=False):
    opts = []
    if stride != 1:
        opts.append("stride = %s" % lua_opt(stride))
    if padding != 0:
        opts.append("padding = %s" % lua_opt(padding))
    if dilation != 1:
        opts.append("dilation = %s" % lua_opt(dilation))
    if groups != 1:
        opts.append("groups = %d" % groups)
    args = "x, w" + (", b" if bias else "") + (", {%s}" % ", ".join(opts) if opts else "")
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    K = sw[1] * sw[2] * sw[3] + (1 if bias else 0)
    inputs = [("x", sx, "f32", "n")]
    pr = {}
    if params:
        rng = np.random.default_rng(zlib.crc32(name.encode()))
        pr = {"w": rng.standard_normal(sw).astype(np.float32)}
        if bias:
            pr["b"] = rng.standard_normal(sw[0]).astype(np.float32)
    else:
        inputs.append(("w", sw, "f32", "n"))
        if bias:
            inputs.append(("b", [sw[0]], "f32", "n"))

    def ref(x, w, b=None):
        return conv_ref(x, w, b, **kw)

    def absref(x, w, b=None):
        return conv_ref(np.abs(x), np.abs(w), None if b is None else np.abs(b), **kw)
    add("conv2d", name, "kiln.conv2d(%s)" % args, inputs, ref=ref, tol=Tol.red(K, absref),
        params=pr, also=("weight",) if params else ())


conv_case("basic", [1, 3, 8, 8], [4, 3, 3, 3])
conv_case("stride2_pad1", [2, 3, 9, 9], [5, 3, 3, 3], stride=2, padding=1)
conv_case("pad_tlbr", [1, 2, 6, 7], [3, 2, 3, 3], padding=(1, 0, 2, 1))
conv_case("pad_hw", [1, 2, 5, 6], [2, 2, 3, 3], padding=(0, 2))
conv_case("dilation2", [1, 2, 9, 9], [2, 2, 3, 3], dilation=2, padding=2)
conv_case("groups2", [2, 4, 7, 9], [6, 2, 3, 3], groups=2)
conv_case("depthwise", [1, 4, 6, 6], [4, 1, 3, 3], groups=4, padding=1)
conv_case("pointwise", [1, 8, 5, 5], [3, 8, 1, 1])
conv_case("rect_kernel", [1, 2, 7, 10], [3, 2, 3, 5], stride=(1, 2), padding=(1, 2))
conv_case("spatial1_nobias", [1, 2, 1, 1], [3, 2, 1, 1], bias=False)
conv_case("k288", [1, 32, 6, 6], [8, 32, 3, 3], padding=1)
conv_case("params", [1, 3, 5, 5], [2, 3, 3, 3], params=True)
conv_case("all_opts", [1, 6, 11, 11], [6, 2, 3, 3], stride=2, dilation=2, padding=1, groups=3)
conv_case("kernel_eq_input", [2, 3, 4, 4], [2, 3, 4, 4])
# the matrix-product path's patch copy and filter blocks: runs of one pixel, windows hanging
# off both sides at a stride, a long tap range over one panel (longer tap runs), filter
# counts around the tile heights (12 AVX-512, 3 AVX2, 2 NEON, 4 plain) and several panels
conv_case("gemm_ow1", [1, 2, 40, 1], [8, 2, 3, 1], padding=(1, 0))
conv_case("gemm_wide_pad", [1, 2, 5, 70], [9, 2, 3, 5], stride=(1, 3), padding=(2, 4), bias=False)
conv_case("gemm_dil_stride", [2, 3, 19, 23], [10, 3, 3, 3], stride=(2, 3), dilation=(3, 2), padding=(3, 1))
conv_case("gemm_long_k", [1, 64, 5, 5], [13, 64, 3, 3], padding=1)
conv_case("gemm_panels", [1, 4, 20, 21], [25, 4, 3, 3], padding=1)
# filters that are parameters are packed at build time in blocks of 12 (pass_pack): whole
# blocks, a last block of 1, 4 (rows four at a time) and 8 (whole, into a copy) filters, a
# partial last panel, and groups of whole blocks (packed) or not (read in place)
conv_case("packed_ow1", [1, 2, 40, 1], [8, 2, 3, 1], padding=(1, 0), params=True)
conv_case("packed_long_k", [1, 64, 5, 5], [13, 64, 3, 3], padding=1, params=True)
conv_case("packed_panels", [1, 4, 20, 21], [25, 4, 3, 3], padding=1, params=True)
conv_case("packed_16_stride", [2, 3, 19, 23], [16, 3, 3, 3], stride=(2, 3), dilation=(3, 2), padding=(3, 1),
          bias=False, params=True)
conv_case("packed_24", [1, 5, 9, 9], [24, 5, 3, 3], stride=2, padding=1, params=True)
conv_case("packed_groups12", [2, 4, 6, 7], [24, 2, 3, 3], groups=2, padding=1, params=True)
conv_case("packed_groups8_inplace", [1, 4, 6, 7], [16, 2, 3, 3], groups=2, params=True)
# packed filters run over the padded input's grid, split into stride phases (kiln_conv_grid):
# a 1x1 conv at stride 1 (one phase, no padding) and 2 (one phase of four), a stem-like 7x7
# at stride 2, padding (t, l, b, r) on rows wider than a panel, stride 3 past the kernel's reach
conv_case("grid_pointwise", [2, 16, 9, 11], [20, 16, 1, 1], params=True)
conv_case("grid_1x1_stride2", [1, 8, 11, 13], [16, 8, 1, 1], stride=2, bias=False, params=True)
conv_case("grid_stem", [1, 3, 37, 41], [12, 3, 7, 7], stride=2, padding=3, params=True)
conv_case("grid_pad_tlbr_wide", [2, 3, 6, 45], [9, 3, 3, 3], padding=(1, 0, 2, 3), params=True)
conv_case("grid_stride3", [1, 4, 17, 19], [8, 4, 2, 2], stride=3, padding=2, params=True)
# stride 2 across: a row's even and odd columns split by vector shuffles (kiln_split_row),
# rows of 43 phase columns (the 16- and 8-lane steps and an overlapping last one) and, for a
# padded 1x1, 37 even columns in two runs of 32
conv_case("grid_s2_wide", [1, 3, 9, 83], [8, 3, 3, 3], stride=2, padding=1, params=True)
conv_case("grid_1x1_stride2_pad", [1, 4, 7, 71], [8, 4, 1, 1], stride=2, padding=1, params=True)
# Winograd's F(2x2, 3x3) (3x3 at stride 1, 16 or more channels in and out, 64 or more output
# pixels, filters from the weights file): odd output sizes (tiles that hang over the edge),
# a partial block of filters, uneven padding, no padding, tile rows longer than a panel of
# tiles, two bands, tile rows of one tile (an output one or two pixels wide) of tiles (256 channels: bands of 64 tiles)
conv_case("wino_basic", [1, 16, 8, 8], [16, 16, 3, 3], padding=1, params=True)
conv_case("wino_odd", [2, 17, 9, 11], [20, 17, 3, 3], padding=1, params=True)
conv_case("wino_pad_tlbr", [1, 16, 9, 10], [16, 16, 3, 3], padding=(0, 2, 1, 1), bias=False, params=True)
conv_case("wino_nopad", [1, 24, 12, 13], [13, 24, 3, 3], params=True)
conv_case("wino_long_rows", [1, 16, 4, 140], [16, 16, 3, 3], padding=1, params=True)
conv_case("wino_bands", [1, 256, 16, 18], [28, 256, 3, 3], padding=1, params=True)
conv_case("wino_narrow", [1, 16, 40, 2], [16, 16, 3, 3], padding=1, params=True)   # one tile a row
conv_case("wino_width1", [2, 16, 66, 3], [16, 16, 3, 3], bias=False, params=True)  # one output column
# a small image's filters across the vector lanes (kiln_lanes_par; pass_pack's lanes_fit: 32
# or more filters of 512 or more taps, which fill more of their panels than the pixels
# would): ResNet-18's 7 x 7 stage, a partial last panel, a 1x1 at stride 2, rows of 14 (two
# runs on AVX-512, five of at most 3 on AVX2), a dilated rectangular kernel at strides
# (1, 2), several images (channel blocks of 14 at 3x3: sums carried from block to block);
# a larger image at stride 2 (525 pixels a panel: tasks of at most 12 rows, 9 + 9 + 7, on one
# thread too)
conv_case("lanes_7x7", [1, 64, 7, 7], [64, 64, 3, 3], padding=1, params=True)
conv_case("lanes_partial_panel", [1, 60, 5, 5], [40, 60, 3, 3], padding=1, params=True)
conv_case("lanes_1x1_stride2", [1, 520, 13, 13], [32, 520, 1, 1], stride=2, bias=False, params=True)
conv_case("lanes_row14", [1, 57, 3, 14], [32, 57, 3, 3], padding=1, params=True)
conv_case("lanes_dil_rect", [2, 90, 6, 13], [64, 90, 3, 2], stride=(1, 2), dilation=(2, 1), padding=(2, 0, 1, 1),
          params=True)
conv_case("lanes_batch3", [3, 64, 6, 6], [96, 64, 3, 3], padding=1, bias=False, params=True)
conv_case("lanes_rows_split", [2, 60, 49, 41], [64, 60, 3, 3], stride=2, padding=1, params=True)
# conv_direct's phase-split copy: strides 2 and 3 with dilation, depthwise at stride 2
conv_case("direct_stride3_dil2", [1, 2, 13, 17], [2, 2, 3, 3], stride=3, dilation=2, padding=(2, 1))
conv_case("depthwise_stride2", [2, 6, 11, 10], [6, 1, 3, 3], stride=2, padding=1, groups=6)
conv_case("direct_stride_gt_w", [1, 1, 5, 2], [3, 1, 2, 1], stride=(2, 4), padding=(0, 1))
conv_case("direct_large", [1, 2, 100, 101], [3, 2, 3, 3], padding=1)   # past conv_direct's buffer: conv
conv_case("direct_blocks", [2, 1, 23, 37], [6, 1, 5, 5], padding=2)   # rows and columns past whole blocks
add("conv2d", "gemm_nobias_chain", "kiln.relu(kiln.conv2d(x, w, {padding = 1}))",
    [("x", [1, 3, 6, 6], "f32", "n"), ("w", [8, 3, 3, 3], "f32", "n")],
    ref=lambda x, w: np.maximum(conv_ref(x, w, padding=1), 0.0),
    tol=Tol.red(27, lambda x, w: conv_ref(np.abs(x), np.abs(w), padding=1)), also=("relu",))
def convt_ref(x, w, b=None, stride=1, padding=0, output_padding=0, dilation=1, groups=1):
    """torch conv_transpose2d in float64. A 4-value padding (t, l, b, r), which torch
    lacks, is the unpadded result cropped (and zero-extended by output_padding), plus bias."""
    if not (isinstance(padding, (tuple, list)) and len(padding) == 4):
        return N(F.conv_transpose2d(T(x), T(w), None if b is None else T(b), stride=stride, padding=padding,
                                    output_padding=output_padding, groups=groups, dilation=dilation))
    t, l, bo, r = padding
    oh, ow = (output_padding, output_padding) if isinstance(output_padding, int) else output_padding
    full = F.conv_transpose2d(T(x), T(w), None, stride=stride, groups=groups, dilation=dilation)
    full = F.pad(full, (0, max(0, ow - r), 0, max(0, oh - bo)))
    H, W = full.shape[2], full.shape[3]
    out = full[:, :, t:H - max(0, bo - oh), l:W - max(0, r - ow)]
    if b is not None:
        out = out + T(b)[None, :, None, None]
    return N(out)


def convt_case(name, sx, sw, bias=True, stride=1, padding=0, output_padding=0, dilation=1, groups=1, expr=None):
    opts = []
    for k, v, d in (("stride", stride, 1), ("padding", padding, 0), ("output_padding", output_padding, 0),
                    ("dilation", dilation, 1)):
        if v != d:
            opts.append("%s = %s" % (k, lua_opt(v)))
    if groups != 1:
        opts.append("groups = %d" % groups)
    args = "x, w" + (", b" if bias else "") + (", {%s}" % ", ".join(opts) if opts else "")
    kw = dict(stride=stride, padding=padding, output_padding=output_padding, dilation=dilation, groups=groups)
    # each output sums at most (C/groups) KH KW products, plus the bias
    K = sx[1] // groups * sw[2] * sw[3] + (1 if bias else 0)
    inputs = [("x", sx, "f32", "n"), ("w", sw, "f32", "n")] + ([("b", [sw[1] * groups], "f32", "n")] if bias else [])
    add("conv_transpose2d", name, expr or "kiln.conv_transpose2d(%s)" % args, inputs,
        ref=lambda x, w, b=None: convt_ref(x, w, b, **kw),
        tol=Tol.red(K, lambda x, w, b=None: convt_ref(np.abs(x), np.abs(w), None if b is None else np.abs(b), **kw)))


convt_case("basic", [1, 3, 4, 4], [3, 2, 3, 3])
convt_case("stride2", [2, 3, 5, 4], [3, 4, 3, 3], stride=2)
convt_case("stride2_pad1_outpad1", [1, 2, 4, 5], [2, 3, 3, 3], stride=2, padding=1, output_padding=1)
convt_case("rect", [1, 2, 3, 6], [2, 2, 2, 4], stride=(3, 2), padding=(1, 0), output_padding=(2, 1), bias=False)
convt_case("dilation", [1, 2, 5, 5], [2, 3, 3, 3], dilation=2, padding=1)
convt_case("dil_outpad", [1, 2, 4, 4], [2, 2, 3, 2], stride=2, dilation=3, output_padding=2)
convt_case("groups", [2, 4, 3, 3], [4, 3, 3, 3], stride=2, groups=2, padding=1)
convt_case("depthwise", [1, 4, 5, 5], [4, 1, 3, 3], groups=4, padding=1)
convt_case("pointwise", [1, 5, 3, 3], [5, 4, 1, 1])
convt_case("pad_tlbr", [1, 2, 4, 5], [2, 3, 3, 3], stride=2, padding=(1, 0, 2, 1), output_padding=1)
convt_case("big", [1, 16, 8, 8], [16, 8, 4, 4], stride=2, padding=1)
add("conv_transpose2d", "nn_module", "",
    [("x", [1, 4, 3, 3], "f32", "n")],
    body='local m = kiln.nn.name(kiln.nn.ConvTranspose2d(4, 6, 3, {stride = 2, padding = 1, output_padding = 1, groups = 2}), "m")\n'
         'kiln.output("out", m(x))',
    params={"m.weight": np.random.default_rng(5).standard_normal((4, 3, 3, 3)).astype(np.float32),
            "m.bias": np.random.default_rng(6).standard_normal(6).astype(np.float32)},
    ref=lambda x, weight, bias: convt_ref(x, weight, bias, stride=2, padding=1, output_padding=1, groups=2),
    tol=Tol.red(19, lambda x, weight, bias: convt_ref(np.abs(x), np.abs(weight), np.abs(bias), stride=2, padding=1,
                                                      output_padding=1, groups=2)), also=("weight",))
add("conv_transpose2d", "conv_transpose1d", "kiln.conv_transpose1d(x, w, b, {stride = 3, padding = 2, output_padding = 1})",
    [("x", [2, 3, 7], "f32", "n"), ("w", [3, 2, 4], "f32", "n"), ("b", [2], "f32", "n")],
    ref=lambda x, w, b: N(F.conv_transpose1d(T(x), T(w), T(b), stride=3, padding=2, output_padding=1)),
    tol=Tol.red(13, lambda x, w, b: N(F.conv_transpose1d(T(np.abs(x)), T(np.abs(w)), T(np.abs(b)), stride=3, padding=2,
                                                         output_padding=1))), also=("reshape",))
add("conv2d", "nn_module", "kiln.nn.Conv2d(3, 4, 3, {padding = 1, bias = false})(x)",
    [("x", [1, 3, 5, 5], "f32", "n")],
    body='local conv = kiln.nn.Conv2d(3, 4, 3, {padding = 1, bias = false})\n'
         'kiln.output("out", kiln.sub(conv(x), conv(x)))',
    ref=lambda x: np.zeros((1, 4, 5, 5)), also=("sub",), tol=Tol.exact())

# ---------------------------------------------------------------- pooling


def pool_ref(kind, x, kernel, stride=None, padding=0, cip=True):
    X = T(x)
    if kind == "max":
        return N(F.max_pool2d(X, kernel, stride or kernel, padding))
    return N(F.avg_pool2d(X, kernel, stride or kernel, padding, count_include_pad=cip))


def pool_case(kind, name, sx, kernel, stride=None, padding=0, cip=True, g="n"):
    opts = ["kernel = %s" % lua_opt(kernel)]
    if stride is not None:
        opts.append("stride = %s" % lua_opt(stride))
    if padding != 0:
        opts.append("padding = %s" % lua_opt(padding))
    if kind == "avg" and not cip:
        opts.append("count_include_pad = false")
    op = kind + "pool2d"
    kw = dict(kernel=kernel, stride=stride, padding=padding, cip=cip)
    kh, kwd = pair(kernel)
    tol = Tol.exact() if kind == "max" else Tol.red(kh * kwd, lambda x: pool_ref(kind, np.abs(x), **kw))
    add(op, name, "kiln.%s(x, {%s})" % (op, ", ".join(opts)), [("x", sx, "f32", g)],
        ref=lambda x: pool_ref(kind, x, **kw), tol=tol)


for kind in ("max", "avg"):
    pool_case(kind, "k2", [1, 2, 6, 6], 2)
    pool_case(kind, "k3s2p1", [2, 3, 7, 7], 3, 2, 1)
    pool_case(kind, "rect", [1, 1, 5, 8], (2, 3), (1, 2))
    pool_case(kind, "odd_floor", [1, 1, 5, 5], 2)
    pool_case(kind, "k1", [1, 3, 2, 3], 1, 1)
    pool_case(kind, "global", [2, 4, 5, 5], 5)
    pool_case(kind, "pad_hw", [1, 2, 6, 5], (3, 2), (2, 1), (1, 1))
pool_case("max", "neg_pad", [1, 1, 4, 4], 3, 1, 1, g="u:-9:-1")
# rows of whole windows 8 at a time (maxpool_row): an overlapping last block, padded edges
pool_case("max", "wide_k2", [1, 2, 6, 42], 2)
pool_case("max", "wide_k3s2p1", [2, 3, 9, 45], 3, 2, 1)
pool_case("max", "wide_k3s1p1", [1, 2, 5, 21], 3, 1, 1)
pool_case("max", "wide_rect", [1, 1, 7, 50], (2, 3), (1, 3), (1, 1))
pool_case("avg", "no_count_pad", [2, 3, 7, 7], 3, 2, 1, cip=False)
pool_case("avg", "no_count_pad_rect", [1, 2, 5, 6], (3, 2), 1, (1, 1), cip=False)
add("maxpool2d", "nn_module", "kiln.nn.MaxPool2d(2)(x)", [("x", [1, 2, 4, 6], "f32", "n")],
    ref=lambda x: pool_ref("max", x, 2))

# ---------------------------------------------------------------- reductions

def _np_prod(t, dim, keepdim):
    """torch.prod takes one dim: the product over several, in float64 (numpy's)."""
    return torch.from_numpy(np.asarray(np.prod(t.numpy(), axis=dim, keepdims=keepdim)))


RED = {"sum": ("reduce_sum", torch.sum), "mean": ("reduce_mean", torch.mean),
       "amax": ("reduce_max", torch.amax), "amin": ("reduce_min", torch.amin), "prod": ("reduce_prod", _np_prod)}


def red_case(fn, name, shape, dims=None, keep=False, expr=None, g="n"):
    op, tf = RED[fn]
    nd = len(shape)
    dl = list(range(nd)) if dims is None else ([dims] if isinstance(dims, int) else list(dims))
    K = int(np.prod([shape[d % nd] for d in dl])) if shape else 1
    if expr is None:
        args = ["x"]
        if dims is not None or keep:
            args.append("nil" if dims is None else (str(dims) if isinstance(dims, int) else lua_shape(dims)))
        if keep:
            args.append("true")
        expr = "kiln.%s(%s)" % (fn, ", ".join(args))

    def ref(x):
        if fn in ("amax", "amin") and dims is None and not keep:
            return N(tf(T(x), dim=tuple(range(nd)))) if nd else x.astype(np.float64)
        return N(tf(T(x), dim=tuple(dl), keepdim=keep)) if nd else x.astype(np.float64)
    if fn in ("amax", "amin"):
        tol = Tol.exact()
    elif fn == "prod":
        # K - 1 f32 products, each rounding by at most eps/2 relative: (K - 1) eps / 2
        # relative in all; (K + 1) eps leaves room for the final rounding and the
        # interpreter's double product (compared against at twice this).
        tol = Tol.custom("prod", "prod K=%d" % K, lambda r, ins: (K + 1) * EPS * np.abs(r) + 1e-37)
    else:
        tol = Tol.red(K, lambda x: ref(np.abs(x)) if fn == "sum"
                      else N(torch.mean(T(np.abs(x)), dim=tuple(dl), keepdim=keep)))
    add(op, name, expr, [("x", shape, "f32", g)], ref=ref, tol=tol)


for fn in RED:
    if fn == "prod":   # factors of magnitude 0.5..1.5 keep 60 of them far from under/overflow
        for (nm, shp, dm, kp) in [("all", [3, 4, 5], None, False), ("d1", [3, 4, 5], 1, False),
                                  ("d02_keep", [3, 4, 5], (0, 2), True), ("neg", [3, 4, 5], -1, False),
                                  ("vec", [7], 0, False), ("long", [2, 40], 1, False)]:
            red_case(fn, nm, shp, dm, kp, g=lambda rng, shape: rng.uniform(0.5, 1.5, shape) * rng.choice([-1, 1], shape))
        continue
    red_case(fn, "all", [3, 4, 5])
    red_case(fn, "d1", [3, 4, 5], 1)
    red_case(fn, "d02", [3, 4, 5], (0, 2))
    red_case(fn, "d02_keep", [3, 4, 5], (0, 2), True)
    red_case(fn, "neg", [3, 4, 5], -1)
    red_case(fn, "neg2_keep", [2, 3, 4, 5], (-1, -3), True)
    red_case(fn, "all_keep", [2, 3], None, True)
    red_case(fn, "vec", [7], 0)
    red_case(fn, "size1", [3, 1, 4], 1)
    red_case(fn, "k1000", [4, 1000], 1, g="u:-1:3")
    red_case(fn, "method", [2, 6], 1, expr="x:%s(1)" % fn)
    red_case(fn, "all_dims_list", [2, 3, 4], (0, 1, 2), True)

# ---------------------------------------------------------------- softmax


def softmax_case(name, shape, dim, g="n", expr=None):
    K = shape[dim % len(shape)]

    def tolfn(ref, ins):
        (x,) = ins
        return (2 * math.sqrt(K) + 8 + 2 * amax(x)) * 1.1920929e-07 * np.abs(ref) + 1e-37
    add("softmax", name, expr or "kiln.softmax(x, %d)" % dim, [("x", shape, "f32", g)],
        ref=lambda x: N(torch.softmax(T(x), dim)), tol=Tol.custom("norm", "softmax K=%d" % K, tolfn))


softmax_case("last", [2, 5], -1)
softmax_case("mid", [3, 4, 5], 1)
softmax_case("first", [3, 4], 0)
softmax_case("one", [1, 1], 1)
softmax_case("wide", [2, 9], 1, g="u:-50:50")
softmax_case("long", [2, 513], 1)
softmax_case("method", [4, 3], -1, expr="x:softmax(-1)")
softmax_case("vec", [6], 0)

# ---------------------------------------------------------------- normalisations


def ln_ref(x, g, b, nd, eps):
    shape = x.shape[-nd:]
    return N(F.layer_norm(T(x), shape, None if g is None else T(g), None if b is None else T(b), eps))


def ln_case(name, sx, nd=1, gamma=True, beta=True, eps=1e-5, g="n", params=False):
    opts = []
    if eps != 1e-5:
        opts.append("eps = %g" % eps)
    if nd != 1:
        opts.append("dims = %d" % nd)
    sn = sx[-nd:]
    inputs = [("x", sx, "f32", g)]
    pr = {}
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    for n, on in (("g", gamma), ("b", beta)):
        if on and params:
            pr[n] = rng.standard_normal(sn).astype(np.float32)
        elif on:
            inputs.append((n, sn, "f32", "n"))
    expr = "kiln.layernorm(x, %s, %s%s)" % ("g" if gamma else "nil", "b" if beta else "nil",
                                           ", {%s}" % ", ".join(opts) if opts else "")
    K = int(np.prod(sn))

    def unpack(args):
        x, rest = args[0], list(args[1:])
        gg = rest.pop(0) if gamma else None
        bb = rest.pop(0) if beta else None
        return x, gg, bb

    def ref(*args):
        x, gg, bb = unpack(args)
        return ln_ref(x, gg, bb, nd, eps)

    def scale(*args):
        x, gg, bb = unpack(args)
        xs = x.astype(np.float64).reshape(-1, K)
        std = np.sqrt(xs.var(axis=1) + eps).min()
        return amax(xs) / std * (amax(gg) if gamma else 1.0) + (amax(bb) if beta else 0.0)
    add("layernorm", name, expr, inputs, ref=ref, tol=Tol.norm(K, scale), params=pr,
        also=("weight",) if params else ())


ln_case("last", [2, 5, 16])
ln_case("dims2", [2, 3, 8], nd=2)
ln_case("no_affine", [4, 7], gamma=False, beta=False)
ln_case("gamma_only", [3, 6], beta=False)
ln_case("eps", [3, 6], eps=1e-2)
ln_case("offset", [2, 32], g="u:9:11")
ln_case("params", [2, 3, 12], params=True)
ln_case("one", [3, 1])
add("layernorm", "nn_module", "kiln.nn.LayerNorm(6)(x)", [("x", [2, 6], "f32", "n")],
    ref=lambda x: ln_ref(x, np.ones(6), np.zeros(6), 1, 1e-5),
    tol=Tol.norm(6, lambda x: amax(x) / np.sqrt(x.astype(np.float64).var(axis=1) + 1e-5).min()))


def rms_ref(x, g, eps):
    X = T(x)
    y = X / torch.sqrt(torch.mean(X * X, dim=-1, keepdim=True) + eps)
    return N(y if g is None else y * T(g))


def rms_case(name, sx, gamma=True, eps=1e-5, g="n"):
    D = sx[-1]
    inputs = [("x", sx, "f32", g)] + ([("g", [D], "f32", "n")] if gamma else [])
    expr = "kiln.rmsnorm(x, %s%s)" % ("g" if gamma else "nil", ", {eps = %g}" % eps if eps != 1e-5 else "")

    def ref(x, gg=None):
        return rms_ref(x, gg, eps)

    def scale(x, gg=None):
        xs = x.astype(np.float64).reshape(-1, D)
        rms = np.sqrt((xs * xs).mean(axis=1) + eps).min()
        return amax(xs) / rms * (amax(gg) if gamma else 1.0)
    add("rmsnorm", name, expr, inputs, ref=ref, tol=Tol.norm(D, scale))


rms_case("main", [2, 3, 16])
rms_case("no_gamma", [4, 9], gamma=False)
rms_case("eps", [2, 5], eps=1e-2)
rms_case("odd", [3, 31])
rms_case("one", [5, 1])


def bn_ref(x, m, v, g, b, eps):
    return N(F.batch_norm(T(x), T(m), T(v), T(g), T(b), False, 0.0, eps))


def bn_case(name, sx, eps=1e-5):
    C = sx[1]
    inputs = [("x", sx, "f32", "n"), ("m", [C], "f32", "n"), ("v", [C], "f32", "pos"),
              ("g", [C], "f32", "n"), ("b", [C], "f32", "n")]
    expr = "kiln.batchnorm(x, m, v, g, b%s)" % (", {eps = %g}" % eps if eps != 1e-5 else "")

    def mag(x, m, v, g, b):
        shp = [1, C] + [1] * (len(sx) - 2)
        r = 1 / np.sqrt(v.astype(np.float64) + eps)
        return (np.abs(x) + np.abs(m).reshape(shp)) * (r * np.abs(g)).reshape(shp) + np.abs(b).reshape(shp)
    add("batchnorm", name, expr, inputs, ref=lambda x, m, v, g, b: bn_ref(x, m, v, g, b, eps),
        tol=Tol.ew(mag))


bn_case("nchw", [2, 3, 4, 5])
bn_case("spatial1", [1, 4, 1, 1])
bn_case("rank2", [5, 3])
bn_case("eps", [2, 2, 3, 3], eps=1e-3)


def conv_bn_case(name, sx, sw, bias=False, residual=False, relu=False, params=False, **kw):
    """conv2d -> batchnorm (-> + r) (-> relu): pass_group fuses the batchnorm into the conv
    kernel, which applies it per output channel as a scale and shift at its store (and the
    rest of the chain after it). Tolerance: the conv's sum of K terms (red) scaled by the
    batchnorm's |gamma| / sqrt(var + eps), plus a few eps of the scale-and-shift's operands.
    params: w (and b) come from the weights file (so packed, or Winograd's), after the inputs."""
    C = sw[0]
    opts = ", ".join("%s = %s" % (k, lua_opt(v)) for k, v in kw.items())
    conv = "kiln.conv2d(x, w%s%s)" % (", b" if bias else "", ", {%s}" % opts if opts else "")
    expr = "kiln.batchnorm(%s, m, v, g, be)" % conv
    if residual:
        expr = "kiln.add(%s, r)" % expr
    if relu:
        expr = "kiln.relu(%s)" % expr
    pr = {}
    if params:
        rng = np.random.default_rng(zlib.crc32(name.encode()))
        pr = {"w": (rng.standard_normal(sw) * 0.2).astype(np.float32)}
        if bias:
            pr["b"] = rng.standard_normal(C).astype(np.float32)
        inputs = [("x", sx, "f32", "n")]
    else:
        inputs = [("x", sx, "f32", "n"), ("w", sw, "f32", "n")] + ([("b", [C], "f32", "n")] if bias else [])
    inputs += [("m", [C], "f32", "n"), ("v", [C], "f32", "pos"), ("g", [C], "f32", "n"), ("be", [C], "f32", "n")]
    out_shape = conv_ref(np.zeros(sx), np.zeros(sw), **kw).shape
    if residual:
        inputs.append(("r", list(out_shape), "f32", "n"))
    K = sw[1] * sw[2] * sw[3] + (1 if bias else 0)
    ch = lambda a: np.asarray(a, dtype=np.float64).reshape(1, C, 1, 1)

    def split(args):
        a = list(args)
        if params:   # x, m, v, g, be, (r), then the params w, (b)
            x, (m, v, g, be) = a[0], a[1:5]
            r = a[5] if residual else 0.0
            w = a[5 + residual]
            b = a[6 + residual] if bias else None
            return x, w, b, m, v, g, be, r
        x, w = a[0], a[1]
        b = a[2] if bias else None
        m, v, g, be = a[2 + bias:6 + bias]
        r = a[6 + bias] if residual else 0.0
        return x, w, b, m, v, g, be, r

    def ref(*args):
        x, w, b, m, v, g, be, r = split(args)
        y = bn_ref(conv_ref(x, w, b, **kw), m, v, g, be, 1e-5) + r
        return np.maximum(y, 0.0) if relu else y

    def bound(out, ins):
        x, w, b, m, v, g, be, r = split(ins)
        A = conv_ref(np.abs(x), np.abs(w), None if b is None else np.abs(b), **kw)
        s = np.abs(ch(g)) / np.sqrt(ch(v) + 1e-5)
        return ((2 * math.sqrt(K) + 12) * EPS * (A + np.abs(ch(m))) * s + 8 * EPS * (np.abs(ch(be)) + np.abs(r))
                + 4 * EPS * np.abs(out) + 1e-37)
    also = ("batchnorm",) + (("add",) if residual else ()) + (("relu",) if relu else ())
    add("conv2d", "bn_" + name, expr, inputs, ref=ref, tol=Tol.custom("red", "conv+bn K=%d" % K, bound), also=also,
        params=pr)


# the three conv kernels: matrix product (8+ filters a group), gathered patch (4-7 filters,
# 64+ taps), direct loops (fewer); with a bias, a residual add and relu after the batchnorm
conv_bn_case("gemm", [1, 5, 9, 9], [12, 5, 3, 3], padding=1)
conv_bn_case("gemm_bias_relu", [2, 3, 7, 8], [16, 3, 3, 3], bias=True, relu=True, stride=2, padding=1)
conv_bn_case("gemm_residual", [1, 8, 6, 6], [8, 8, 3, 3], residual=True, relu=True, padding=1)
conv_bn_case("gemm_groups", [2, 6, 7, 7], [16, 3, 3, 3], groups=2, padding=(1, 0, 2, 1))
conv_bn_case("gemm_odd", [1, 3, 17, 13], [9, 3, 2, 3], stride=(3, 2), dilation=(2, 1), padding=(2, 3))
conv_bn_case("patch", [1, 8, 6, 6], [5, 8, 3, 3], bias=True, relu=True, padding=1)
conv_bn_case("direct", [2, 3, 6, 7], [2, 3, 3, 3], residual=True, padding=1)
conv_bn_case("depthwise", [1, 16, 9, 9], [16, 1, 3, 3], groups=16, relu=True, padding=1)
conv_bn_case("pointwise", [1, 24, 5, 5], [32, 24, 1, 1])
conv_bn_case("direct_large", [1, 2, 100, 101], [3, 2, 3, 3], bias=True, relu=True, padding=1)
# Winograd's (a ResNet block's second convolution: batchnorm, residual, relu; and with a bias)
conv_bn_case("wino_residual", [2, 16, 9, 10], [16, 16, 3, 3], residual=True, relu=True, padding=1, params=True)
conv_bn_case("wino_bias", [1, 20, 8, 12], [24, 20, 3, 3], bias=True, padding=1, params=True)
# the filters across the lanes (ResNet-18's last stage: batchnorm, residual, relu; a bias at stride 2)
conv_bn_case("lanes_residual", [1, 64, 7, 7], [32, 64, 3, 3], residual=True, relu=True, padding=1, params=True)
conv_bn_case("lanes_bias_stride2", [2, 64, 13, 14], [64, 64, 3, 3], bias=True, stride=2, padding=1, params=True)

# ---------------------------------------------------------------- data movement

add("reshape", "to2d", "kiln.reshape(x, {6, 4})", [("x", [2, 3, 4], "f32", "n")],
    ref=lambda x: x.reshape(6, 4), also=("copy",))
add("reshape", "infer", "kiln.reshape(x, {4, -1}) + 1", [("x", [2, 3, 4], "f32", "n")],
    ref=lambda x: x.reshape(4, -1) + 1, tol=Tol.ew())
add("reshape", "flat_then_add", "kiln.reshape(x, {-1}) + y", [("x", [2, 3], "f32", "n"), ("y", [6], "f32", "n")],
    ref=lambda x, y: x.reshape(-1) + y, tol=Tol.ew())
add("reshape", "ones", "x:reshape({1, 1, 24}) * 2", [("x", [2, 3, 4], "f32", "n")],
    ref=lambda x: x.reshape(1, 1, 24) * 2, tol=Tol.ew())
add("reshape", "to_rank0", "kiln.reshape(x + 1, {})", [("x", [1, 1], "f32", "n")],
    ref=lambda x: (x + 1).reshape(()), tol=Tol.ew())
add("reshape", "twice", "kiln.reshape(kiln.reshape(x * 3, {3, 8}), {2, 12})", [("x", [4, 6], "f32", "n")],
    ref=lambda x: (x * 3).reshape(2, 12), tol=Tol.ew())
add("reshape", "flatten", "kiln.flatten(kiln.exp(x))", [("x", [2, 3, 4], "f32", "n")],
    ref=lambda x: np.exp(x).reshape(2, 12), tol=Tol.ew(), also=("exp",))
add("reshape", "flatten0", "x:flatten(0) - 1", [("x", [2, 3, 4], "f32", "n")],
    ref=lambda x: x.reshape(-1) - 1, tol=Tol.ew())
add("reshape", "i32", "kiln.reshape(kiln.cast(x, \"i32\"), {3, 2})", [("x", [6], "f32", "u:-9:9")],
    ref=lambda x: np.trunc(x).reshape(3, 2), dtypes=("i32",))

add("transpose", "t01", "kiln.transpose(x, 0, 1)", [("x", [3, 5], "f32", "n")], ref=lambda x: x.T)
add("transpose", "neg", "kiln.transpose(x, -1, -3)", [("x", [2, 3, 4], "f32", "n")],
    ref=lambda x: np.swapaxes(x, -1, -3))
add("transpose", "permute", "kiln.permute(x, {2, 0, 3, 1})", [("x", [2, 3, 4, 5], "f32", "n")],
    ref=lambda x: np.transpose(x, (2, 0, 3, 1)))
add("transpose", "permute_ones", "x:permute({3, 2, 1, 0})", [("x", [1, 3, 1, 2], "f32", "n")],
    ref=lambda x: np.transpose(x, (3, 2, 1, 0)))
add("transpose", "method", "x:transpose(0, 1)", [("x", [4, 1, 3], "f32", "n")],
    ref=lambda x: np.swapaxes(x, 0, 1))
add("transpose", "odd", "kiln.transpose(x, 1, 2)", [("x", [3, 7, 5], "f32", "n")],
    ref=lambda x: np.swapaxes(x, 1, 2))
add("transpose", "back_and_forth", "kiln.transpose(kiln.transpose(x, 0, 1) + 1, 0, 1)",
    [("x", [3, 4], "f32", "n")], ref=lambda x: x + 1, tol=Tol.ew())
add("transpose", "bool", "kiln.transpose(x, 0, 1)", [("x", [2, 3], "bool", "bool")],
    ref=lambda x: x.T, dtypes=("bool",))

add("concat", "three_d0", "kiln.concat({a, b, c}, 0)",
    [("a", [2, 3], "f32", "n"), ("b", [1, 3], "f32", "n"), ("c", [4, 3], "f32", "n")],
    ref=lambda a, b, c: np.concatenate([a, b, c], 0))
add("concat", "three_neg1", "kiln.concat({a, b, c}, -1)",
    [("a", [2, 1], "f32", "n"), ("b", [2, 4], "f32", "n"), ("c", [2, 2], "f32", "n")],
    ref=lambda a, b, c: np.concatenate([a, b, c], -1))
add("concat", "three_mid", "kiln.concat({a, b, c}, 1)",
    [("a", [2, 1, 3], "f32", "n"), ("b", [2, 2, 3], "f32", "n"), ("c", [2, 3, 3], "f32", "n")],
    ref=lambda a, b, c: np.concatenate([a, b, c], 1))
add("concat", "single", "kiln.concat({a * 2}, 0)", [("a", [3], "f32", "n")], ref=lambda a: a * 2, tol=Tol.ew())
add("concat", "same_twice", "kiln.concat({a, a, a}, 1)", [("a", [2, 2], "f32", "n")],
    ref=lambda a: np.concatenate([a, a, a], 1))
add("concat", "i32", "kiln.concat({a, b}, 0)", [("a", [2], "i32", "int:-5:5"), ("b", [3], "i32", "int:-5:5")],
    ref=lambda a, b: np.concatenate([a, b]), dtypes=("i32",))
add("concat", "bool", "kiln.concat({a, b, a}, 0)", [("a", [1, 2], "bool", "bool"), ("b", [2, 2], "bool", "bool")],
    ref=lambda a, b: np.concatenate([a, b, a]), dtypes=("bool",))
add("concat", "computed", "kiln.concat({a + 1, kiln.relu(b)}, 2)",
    [("a", [2, 2, 1], "f32", "n"), ("b", [2, 2, 3], "f32", "n")],
    ref=lambda a, b: np.concatenate([a + 1, np.maximum(b, 0)], 2), tol=Tol.ew(), also=("relu",))

add("slice", "basic", "kiln.slice(x, 0, 1, 3)", [("x", [5, 4], "f32", "n")], ref=lambda x: x[1:3])
add("slice", "step2", "kiln.slice(x, 1, 0, 7, 2)", [("x", [3, 7], "f32", "n")], ref=lambda x: x[:, 0:7:2])
add("slice", "neg_start", "kiln.slice(x, -1, -3, nil)", [("x", [2, 6], "f32", "n")], ref=lambda x: x[:, -3:])
add("slice", "neg_stop", "kiln.slice(x, 0, 0, -1)", [("x", [4, 2], "f32", "n")], ref=lambda x: x[0:-1])
add("slice", "step3_odd", "kiln.slice(x, 0, 1, nil, 3)", [("x", [10], "f32", "n")], ref=lambda x: x[1::3])
# A slice of a value only it reads moves up (pass_narrow, tests/passes/narrow.lua): the ops
# compute the sliced rows only, each element as before. Tolerance: a 5-term product, then
# silu, mul, softmax: a few ulp each; 1e-5 of the largest output is about 80 ulp.
add("slice", "narrow_rows", "kiln.slice(kiln.silu(kiln.matmul(x, y)) * z, 0, 4, 6)",
    [("x", [6, 5], "f32", "n"), ("y", [5, 7], "f32", "n"), ("z", [6, 7], "f32", "n")],
    ref=lambda x, y, z: (lambda m: m / (1 + np.exp(-m)))(x.astype(np.float64) @ y)[4:6] * z[4:6],
    tol=Tol.model(1e-5), also=("matmul", "silu", "mul"))
add("slice", "narrow_transposed", "kiln.slice(kiln.softmax(kiln.concat({kiln.transpose(x, 0, 1), y}, 1), 1), 0, 1, 3)",
    [("x", [4, 3], "f32", "n"), ("y", [3, 2], "f32", "n")],
    ref=lambda x, y: (lambda c: np.exp(c - c.max(1, keepdims=True)) / np.exp(c - c.max(1, keepdims=True)).sum(1, keepdims=True))(
        np.concatenate([x.T, y], 1).astype(np.float64))[1:3],
    tol=Tol.model(1e-5), also=("softmax", "concat", "transpose"))
add("slice", "narrow_halves",
    "kiln.slice(kiln.matmul(a, b) * 2 + kiln.concat({-kiln.slice(kiln.matmul(a, b), 1, 3, 6), kiln.slice(kiln.matmul(a, b), 1, 0, 3)}, 1), 0, 2, 3)",
    [("a", [4, 5], "f32", "n"), ("b", [5, 6], "f32", "n")],
    ref=lambda a, b: (lambda m: m * 2 + np.concatenate([-m[:, 3:6], m[:, 0:3]], 1))(a.astype(np.float64) @ b)[2:3],
    tol=Tol.model(1e-5), also=("matmul", "concat", "neg"))
add("slice", "narrow_reshaped", "kiln.slice(kiln.reshape(kiln.matmul(x, y), {6, 7, 1}) * 2, 0, 5, 6)",
    [("x", [6, 5], "f32", "n"), ("y", [5, 7], "f32", "n")],
    ref=lambda x, y: (2 * (x.astype(np.float64) @ y)).reshape(6, 7, 1)[5:6],
    tol=Tol.model(1e-5), also=("matmul", "reshape", "mul"))
add("slice", "clamp", "kiln.slice(x, 0, 2, 100)", [("x", [5, 3], "f32", "n")], ref=lambda x: x[2:100])
add("slice", "two_dims", "kiln.slice(kiln.slice(x, 1, 1, 4), 2, 0, 5, 2)", [("x", [2, 5, 6], "f32", "n")],
    ref=lambda x: x[:, 1:4, 0:5:2])
add("slice", "method", "x:slice(1, -2, nil) * 2", [("x", [3, 5], "f32", "n")], ref=lambda x: x[:, -2:] * 2,
    tol=Tol.ew())
add("slice", "one", "kiln.slice(x, 0, 2, 3)", [("x", [4], "f32", "n")], ref=lambda x: x[2:3])
add("slice", "i32", "kiln.slice(x, 0, 1, nil, 2)", [("x", [7], "i32", "int:-9:9")], ref=lambda x: x[1::2],
    dtypes=("i32",))

add("gather", "axis0", "kiln.gather(x, i, 0)", [("x", [5, 4], "f32", "n"), ("i", [3], "i32", [4, 0, 2])],
    ref=lambda x, i: np.take(x, i, 0))
add("gather", "axis1_repeat", "kiln.gather(x, i, 1)", [("x", [3, 6], "f32", "n"), ("i", [4], "i32", [5, 5, 0, 3])],
    ref=lambda x, i: np.take(x, i, 1))
add("gather", "neg_axis", "kiln.gather(x, i, -1)", [("x", [2, 3, 5], "f32", "n"), ("i", [2, 2], "i32", "int:0:5")],
    ref=lambda x, i: np.take(x, i, -1))
add("gather", "idx2d", "kiln.gather(x, i, 0)", [("x", [6, 3], "f32", "n"), ("i", [2, 4], "i32", "int:0:6")],
    ref=lambda x, i: np.take(x, i, 0))
add("gather", "embedding", "kiln.embedding(t, ids)", [("t", [10, 4], "f32", "n"), ("ids", [2, 3], "i32", "int:0:10")],
    ref=lambda t, ids: np.take(t, ids, 0))
add("gather", "i32_table", "kiln.gather(x, i, 0)", [("x", [4], "i32", "int:-99:99"), ("i", [5], "i32", "int:0:4")],
    ref=lambda x, i: np.take(x, i, 0), dtypes=("i32",))
add("gather", "nn_embedding", "kiln.nn.Embedding(7, 3)(ids) * 0", [("ids", [4], "i32", "int:0:7")],
    ref=lambda ids: np.zeros((4, 3)), tol=Tol.exact())

# ---------------------------------------------------------------- leaves, constants, copies

add("const", "literal", "x + kiln.constant({1, 2, 3}, {3})", [("x", [2, 3], "f32", "n")],
    ref=lambda x: x + np.array([1, 2, 3]), tol=Tol.ew())
add("const", "filled", "kiln.constant(0.5, {2, 3}) * x", [("x", [2, 3], "f32", "n")],
    ref=lambda x: 0.5 * x, tol=Tol.ew())
add("const", "i32_indices", "kiln.gather(x, kiln.constant({2, 0}, {2}, \"i32\"), 1)", [("x", [3, 4], "f32", "n")],
    ref=lambda x: x[:, [2, 0]], also=("gather",))
add("const", "folded", "kiln.constant(2, {3}) * kiln.constant(3, {3}) + x", [("x", [3], "f32", "n")],
    ref=lambda x: 6 + x, tol=Tol.ew())
add("const", "folded_only", "kiln.exp(kiln.constant({0, 1}, {2})) + 0",
    [], ref=lambda: np.exp(np.array([0.0, 1.0])), tol=Tol.ew())
add("const", "cse", "(x + 1) * (x + 1)", [("x", [4], "f32", "n")], ref=lambda x: (x + 1) * (x + 1), tol=Tol.ew())
add("const", "scalar_rank0", "kiln.constant(4, {}) - x", [("x", [2], "f32", "n")], ref=lambda x: 4 - x, tol=Tol.ew())

_w = np.random.default_rng(5).standard_normal((2, 3)).astype(np.float32)
add("weight", "loaded", "x + w", [("x", [2, 3], "f32", "n")], params={"w": _w}, ref=lambda x, w: x + w, tol=Tol.ew())
add("weight", "init_const", 'x * kiln.param("c", {3}, {"const", 0.5})', [("x", [2, 3], "f32", "n")],
    ref=lambda x: x * 0.5, tol=Tol.ew())
add("weight", "init_ones_zeros", 'x * kiln.param("o", {3}, {"ones"}) + kiln.param("z", {2, 3}, {"zeros"})',
    [("x", [2, 3], "f32", "n")], ref=lambda x: x * 1.0, tol=Tol.ew())
_h = np.random.default_rng(6).standard_normal((4,)).astype(np.float16)
add("weight", "loaded_f16", "x + w", [("x", [4], "f32", "n")], params={"w": _h.astype(np.float32)},
    files={"w": _h}, ref=lambda x, w: x + w, tol=Tol.ew())
_bf = np.random.default_rng(7).standard_normal((5,)).astype(np.float32)
_bf_bits = (_bf.view(np.uint32) >> 16).astype(np.uint16)               # truncate to bf16
add("weight", "loaded_bf16", "x - w", [("x", [5], "f32", "n")],
    params={"w": (_bf_bits.astype(np.uint32) << 16).view(np.float32)}, files={"w": ("BF16", _bf_bits)},
    ref=lambda x, w: x - w, tol=Tol.ew())

add("copy", "out_is_input", "x", [("x", [2, 3], "f32", "n")], ref=lambda x: x)
add("copy", "two_outputs_same", None, [("x", [3], "f32", "n")], outputs=("a", "b"), dtypes=("f32", "f32"),
    body='local y = x + 1\nkiln.output("a", y)\nkiln.output("b", y)', ref=lambda x: (x + 1, x + 1), tol=Tol.ew())
add("copy", "out_is_reshaped_input", "kiln.reshape(x, {3, 2})", [("x", [2, 3], "f32", "n")],
    ref=lambda x: x.reshape(3, 2))
add("copy", "out_is_weight", "w", [], params={"w": _w}, ref=lambda w: w, also=("weight",))
add("copy", "out_is_const", 'kiln.constant({1, 2, 3}, {3}, "i32")', [], ref=lambda: np.array([1, 2, 3]),
    dtypes=("i32",), also=("const",))
add("copy", "input_and_result", None, [("x", [2, 2], "f32", "n")], outputs=("same", "twice"),
    dtypes=("f32", "f32"), body='kiln.output("same", x)\nkiln.output("twice", x * 2)',
    ref=lambda x: (x, x * 2), tol=Tol.ew())
add("copy", "out_is_view_of_result", None, [("x", [2, 3], "f32", "n")], outputs=("y", "flat"),
    dtypes=("f32", "f32"), body='local y = kiln.exp(x)\nkiln.output("y", y)\nkiln.output("flat", kiln.reshape(y, {6}))',
    ref=lambda x: (np.exp(x), np.exp(x).reshape(6)), tol=Tol.ew(), also=("exp", "reshape"))

# ---------------------------------------------------------------- state: kiln.state and kiln.write

def written(s, x, axis, at):
    """s with x stored from index at along axis (the write op's semantics)."""
    out = np.array(s, copy=True)
    idx = [slice(None)] * out.ndim
    idx[axis] = slice(at, at + x.shape[axis])
    out[tuple(idx)] = x
    return out


# One call of a script without kiln.entry whose state s starts from the drawn value: the
# outputs show the state after the write (and, where named, as the call found it).
add("write", "rows_at_input", body='kiln.write(s, x, {axis = 0, at = pos})\nkiln.output("out", s * 1)',
    inputs=[("x", [2, 3], "f32", "n"), ("pos", [], "i32", [2])], state=([5, 3], "f32", "n"),
    ref=lambda x, pos, s: written(s, x, 0, int(pos)), also=("state", "mul"))
add("write", "last_rows", body='kiln.write(s, x, {axis = 1, at = pos})\nkiln.output("out", s)',
    inputs=[("x", [2, 3, 2], "i32", "int:-50:50"), ("pos", [], "i32", [3])], state=([2, 6, 2], "i32", "int:-9:9"),
    ref=lambda x, pos, s: written(s, x, 1, int(pos)), dtypes=("i32",), also=("state", "copy"))
add("write", "const_offset_neg_axis", body='kiln.write(s, x, {axis = -1, at = 1})\nkiln.output("out", s + 0)',
    inputs=[("x", [3, 2], "f32", "n")], state=([3, 4], "f32", "n"),
    ref=lambda x, s: written(s, x, 1, 1), also=("state", "add"))
add("write", "whole_state", body='kiln.write(s, x, {at = 0})\nkiln.output("out", s * 1)',
    inputs=[("x", [4], "f32", "n")], state=([4], "f32", "n"),
    ref=lambda x, s: written(s, x, 0, 0), also=("state", "mul"))
add("write", "read_before_and_after",
    body='local old = kiln.sum(s, {1})\nkiln.write(s, x, {axis = 1, at = pos})\n'
         'kiln.output("before", old)\nkiln.output("after", kiln.sum(s, {1}))',
    inputs=[("x", [3, 1], "f32", "n"), ("pos", [], "i32", [0])], state=([3, 5], "f32", "n"),
    ref=lambda x, pos, s: (s.sum(1), written(s, x, 1, int(pos)).sum(1)), outputs=("before", "after"),
    dtypes=("f32", "f32"), also=("state", "reduce_sum"),
    tol=Tol.red(5, lambda x, pos, s: np.maximum(np.abs(s).sum(1), np.abs(written(s, x, 1, int(pos))).sum(1))))
add("write", "bool_state", body='kiln.write(s, x, {axis = 0, at = pos})\nkiln.output("out", s)',
    inputs=[("x", [1, 3], "bool", "bool"), ("pos", [], "i32", [1])], state=([2, 3], "bool", "bool"),
    ref=lambda x, pos, s: written(s, x, 0, int(pos)), dtypes=("bool",), also=("state", "copy"))


# ---------------------------------------------------------------- larger shapes, rank 6, memory reuse
# Sizes past the small cases' loops (a kernel may take other code paths), the rank limit,
# and graphs whose intermediates stay live across others (the arena plan must not overlap them).

mm_case("big", [33, 70], [70, 65])
mm_case("big_batch_trans", [3, 40, 17], [1, 33, 40], "kiln.matmul(a, b, {trans_a = true, trans_b = true})",
        ta=True, tb=True)
conv_case("big", [2, 16, 15, 15], [32, 16, 3, 3], padding=1)
conv_case("stride_gt_kernel", [1, 3, 11, 10], [4, 3, 2, 2], stride=3, padding=3)
pool_case("max", "stride_gt_kernel", [1, 2, 9, 9], 2, 3)
pool_case("avg", "stride_gt_kernel", [1, 2, 9, 9], 2, 3)
softmax_case("k1000", [3, 1000], -1)
ln_case("d768", [4, 768])
red_case("sum", "big_d02", [8, 16, 32], (0, 2))
red_case("mean", "rank5", [2, 3, 2, 4, 3], (1, 3, 4), True)
red_case("amax", "rank6", [2, 1, 3, 2, 2, 3], (0, 2, 5))
add("add", "rank6_bcast", "x + y", [("x", [2, 1, 3, 1, 2, 2], "f32", "n"), ("y", [1, 2, 1, 4, 1, 2], "f32", "n")],
    ref=lambda x, y: x + y, tol=Tol.ew())
add("transpose", "rank6", "kiln.permute(x, {5, 3, 1, 0, 2, 4})", [("x", [2, 3, 1, 2, 3, 2], "f32", "n")],
    ref=lambda x: np.transpose(x, (5, 3, 1, 0, 2, 4)))
add("slice", "of_transpose", "kiln.slice(kiln.transpose(x, 0, 1), 0, 1, nil, 2)", [("x", [3, 6], "f32", "n")],
    ref=lambda x: x.T[1::2])
add("gather", "computed_idx", 'kiln.gather(x, kiln.cast(y, "i32"), 0)',
    [("x", [5, 3], "f32", "n"), ("y", [4], "f32", [4.7, 0.2, 3.9, 1.0])],
    ref=lambda x, y: x[np.trunc(y).astype(int)], also=("cast",))
add("concat", "of_views", "kiln.concat({kiln.reshape(a, {2, 3}), kiln.transpose(b, 0, 1)}, 0)",
    [("a", [6], "f32", "n"), ("b", [3, 2], "f32", "n")],
    ref=lambda a, b: np.concatenate([a.reshape(2, 3), b.T], 0))
add("add", "memplan_diamond", None, [("x", [4, 16], "f32", "n")], body="""
local a = kiln.exp(x * 0.1)
local b = a * 2
local c = b + a
local d = kiln.tanh(c - b)
local e = kiln.relu(d) + a
kiln.output("out", e * c)
""", ref=lambda x: (np.maximum(np.tanh(np.exp(x * 0.1) * 3 - np.exp(x * 0.1) * 2), 0) + np.exp(x * 0.1))
    * np.exp(x * 0.1) * 3, tol=Tol.ew(), also=("exp", "mul", "tanh", "sub", "relu"))
add("add", "memplan_chain_skip", None, [("x", [3, 40], "f32", "n")], outputs=("out", "mid"),
    dtypes=("f32", "f32"), body="""
local h = x
local skips = {}
for i = 1, 8 do
  h = kiln.sigmoid(h * 1.5) - 0.25
  skips[i] = h
end
local acc = skips[1]
for i = 2, 8 do acc = acc + skips[i] end
kiln.output("out", acc)
kiln.output("mid", skips[4])
""", ref=lambda x: _chain_ref(x), tol=Tol.ew(lambda x: 16.0), also=("sigmoid",))


def _chain_ref(x):
    h = x.astype(np.float64)
    skips = []
    for _ in range(8):
        h = 1 / (1 + np.exp(-h * 1.5)) - 0.25
        skips.append(h)
    return sum(skips), skips[3]


# ---------------------------------------------------------------- special values through reductions
# Semantics where ops.h says it: gather clamps out-of-range indices in kernels and the
# interpreter reports them as an error naming the script line. NaN and -inf through
# max-like reductions follow PyTorch (NaN propagates; -inf entries get probability 0).

add("gather", "clamp_out_of_range", "kiln.gather(x, i, 0)",
    [("x", [5, 3], "f32", "n"), ("i", [4], "i32", [-3, 0, 5, 100])],
    ref=lambda x, i: x[np.clip(i, 0, 4)], interp_error=True)
add("reduce_max", "nan", "kiln.amax(x, 1)", [("x", [3, 4], "f32", [1, np.nan, 3, 2, -1, -2, -3, -4, 5, 6, 7, np.nan])],
    ref=lambda x: N(torch.amax(T(x), 1)))
add("reduce_min", "nan", "kiln.amin(x, 1)", [("x", [3, 4], "f32", [1, np.nan, 3, 2, -1, -2, -3, -4, 5, 6, 7, np.nan])],
    ref=lambda x: N(torch.amin(T(x), 1)))
add("reduce_prod", "special", "kiln.prod(x, 1)", [("x", [3, 3], "f32", [2, np.inf, 0, 3, -4, 0.5, 1, np.nan, 2])],
    ref=lambda x: N(torch.prod(T(x), 1)))
add("maxpool2d", "nan", "kiln.maxpool2d(x, {kernel = 2})",
    [("x", [1, 1, 2, 4], "f32", [1, 2, np.nan, 0, 3, 4, 5, 6])], ref=lambda x: pool_ref("max", x, 2))
add("maxpool2d", "nan_wide", "kiln.maxpool2d(x, {kernel = 2})",   # the 8-at-a-time rows: NaN, inf, -0
    [("x", [1, 1, 2, 20], "f32", [1, 2, np.nan, 0, 3, np.inf, -np.inf, 6, -0.0, 0.0, 1, 1, 7, 8, 9, np.nan] +
      [5, 4, 3, 2, 1, 0, -1, -2, -3, -4, np.nan, 2, 3, 4, 5, 6, -np.inf, -np.inf, 1, 1, 2, 2, 3, 3])],
    ref=lambda x: pool_ref("max", x, 2))
_pool_vals = np.random.default_rng(5).integers(-9, 10, 2 * 6 * 37).astype(np.float64)
_pool_vals[[3, 40, 41, 77, 150, 222, 300, 301, 400]] = [np.nan, np.inf, -np.inf, np.nan, -0.0, np.nan, np.inf, np.nan, -np.inf]
add("maxpool2d", "nan_s2_3x3", "kiln.maxpool2d(x, {kernel = 3, stride = 2, padding = 1})",   # ResNet's: taps as vectors
    [("x", [1, 2, 6, 37], "f32", list(_pool_vals))], ref=lambda x: pool_ref("max", x, 3, 2, 1))
add("softmax", "neg_inf", "kiln.softmax(x, -1)",
    [("x", [2, 4], "f32", [1, -np.inf, 2, 0.5, -np.inf, -np.inf, -np.inf, 3])],
    ref=lambda x: N(torch.softmax(T(x), -1)), tol=Tol.norm(4))
add("where", "nan_unselected", "kiln.where(c, x, y)",
    [("c", [4], "bool", [True, False, True, False]), ("x", [4], "f32", [1, np.nan, 3, np.inf]),
     ("y", [4], "f32", [np.nan, 2, np.nan, 4])], ref=lambda c, x, y: np.where(c, x, y))

# f16 / bf16 widening of special values: subnormals, the largest finite value, -0, +-inf, NaN.
_h_special = np.array([6e-8, -6.1e-5, 65504, -0.0, np.inf, -np.inf, np.nan, 1 / 3, 2.98e-8, 1e-6],
                      dtype=np.float16)
add("weight", "f16_special", "w", [], params={"w": _h_special.astype(np.float32)}, files={"w": _h_special},
    ref=lambda w: w, also=("copy",))
_bf_special = np.array([1e-40, -1e-39, 3.3e38, -0.0, np.inf, -np.inf, np.nan, 1 / 3], dtype=np.float32)
_bf_special_bits = (_bf_special.view(np.uint32) >> 16).astype(np.uint16)
_bf_special_bits[6] = 0x7fc1                                                    # a quiet NaN
add("weight", "bf16_special", "w", [],
    params={"w": (_bf_special_bits.astype(np.uint32) << 16).view(np.float32)},
    files={"w": ("BF16", _bf_special_bits)}, ref=lambda w: w, also=("copy",))

# ---------------------------------------------------------------- composites (gen/frontend/ops.lua)
# PyTorch functions Kiln writes as compositions of its ops: each case names the op its
# result comes from last (where, div, mul, add, sub, reduce_sum, matmul, gather, concat,
# slice), and is checked against torch in float64 like the primitives.

def comp(op, name, expr, ref, g="n", shape=(3, 5), tol=None, also=()):
    add(op, "composite_" + name, expr, [("x", list(shape), "f32", g)], ref=lambda x: N(ref(T(x))),
        tol=tol or Tol.ew(mag_abs), also=also)


_SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, -3.0, 3.0, 6.5, -1.0, 0.5, 20.5, -20.5]
comp("where", "clamp", "kiln.clamp(x, -0.5, 0.5)", lambda t: t.clamp(-0.5, 0.5), tol=Tol.exact())
comp("where", "clamp_nan", "x:clamp(-1, 2)", lambda t: t.clamp(-1, 2), g=_SPECIAL, shape=(12,), tol=Tol.exact())
comp("where", "clamp_min_only", "kiln.clip(x, 0)", lambda t: t.clamp(min=0), tol=Tol.exact())
comp("where", "relu6", "kiln.relu6(x * 4)", lambda t: F.relu6(t * 4), tol=Tol.exact(), also=("mul",))
comp("where", "hardtanh", "kiln.hardtanh(x, -0.25, 0.75)", lambda t: F.hardtanh(t, -0.25, 0.75), tol=Tol.exact())
comp("div", "hardsigmoid", "kiln.hardsigmoid(x * 4)", lambda t: F.hardsigmoid(t * 4), tol=Tol.ew())
comp("div", "hardswish", "x:hardswish()", lambda t: F.hardswish(t), g="u:-5:5", tol=Tol.ew(mag_abs))
comp("where", "leaky_relu", "kiln.leaky_relu(x, 0.2)", lambda t: F.leaky_relu(t, 0.2), tol=Tol.ew())
comp("where", "leaky_relu_special", "x:leaky_relu()", lambda t: F.leaky_relu(t), g=_SPECIAL, shape=(12,), tol=Tol.ew())
# elu: exp(x) - 1 near 0 loses what expm1 keeps; the bound is absolute (ulps of 1).
comp("where", "elu", "kiln.elu(x, 1.5)", lambda t: F.elu(t, 1.5), g="u:-4:4", tol=Tol.ew(lambda x: 1.5 + np.abs(x)))
comp("where", "softplus", "kiln.softplus(x)", lambda t: F.softplus(t), g="u:-30:30", tol=Tol.ew(lambda x: 1 + np.abs(x)))
comp("where", "softplus_beta", "kiln.softplus(x, 2, 10)", lambda t: F.softplus(t, 2, 10), g="u:-10:10",
     tol=Tol.ew(lambda x: 1 + np.abs(x)))
comp("mul", "mish", "kiln.mish(x)", lambda t: F.mish(t), g="u:-8:8", tol=Tol.ew(lambda x: 1 + np.abs(x)))
comp("div", "reciprocal", "x:reciprocal()", lambda t: t.reciprocal(), g="nz", tol=Tol.ew())
comp("where", "sign", "kiln.sign(x)", lambda t: t.sign(), g=_SPECIAL, shape=(12,), tol=Tol.exact())
comp("add", "logsumexp", "x:logsumexp(1)", lambda t: torch.logsumexp(t, 1), shape=(3, 7), tol=Tol.norm(7, mag_max))
comp("add", "logsumexp_keep", "kiln.logsumexp(x, -2, true)", lambda t: torch.logsumexp(t, -2, keepdim=True),
     shape=(4, 3), tol=Tol.norm(4, mag_max))
comp("sub", "log_softmax", "x:log_softmax(-1)", lambda t: F.log_softmax(t, -1), shape=(2, 9), tol=Tol.norm(9, mag_max))
comp("sub", "log_softmax_dim0", "kiln.log_softmax(x * 30, 0)", lambda t: F.log_softmax(t * 30, 0), shape=(5, 2),
     tol=Tol.norm(5, lambda x: 30 * mag_max(x)))
comp("reduce_min", "amin", "x:amin(1, true)", lambda t: torch.amin(t, 1, keepdim=True), tol=Tol.exact())
comp("div", "var", "x:var(1)", lambda t: t.var(1), shape=(3, 8), tol=Tol.norm(8, lambda x: np.max(x * x)))
comp("div", "var_biased_keep", "kiln.var(x, 0, {unbiased = false, keepdim = true})",
     lambda t: t.var(0, unbiased=False, keepdim=True), shape=(6, 2), tol=Tol.norm(6, lambda x: np.max(x * x)))
comp("sqrt", "std", "x:std(-1)", lambda t: t.std(-1), shape=(2, 10), tol=Tol.norm(10, lambda x: np.max(np.abs(x))))
comp("matmul", "cumsum", "x:cumsum(1)", lambda t: t.cumsum(1), shape=(3, 6), tol=Tol.red(6, mag_abs_sum))
comp("matmul", "cumsum_dim0", "kiln.cumsum(x, 0)", lambda t: t.cumsum(0), shape=(5, 3), tol=Tol.red(5, mag_abs_sum),
     also=("transpose",))
comp("where", "tril", "x:tril()", lambda t: t.tril(), shape=(4, 5), tol=Tol.exact())
comp("where", "triu_diag", "kiln.triu(x, 1)", lambda t: t.triu(1), shape=(2, 3, 4), tol=Tol.exact())
comp("where", "tril_neg", "x:tril(-1)", lambda t: t.tril(-1), shape=(5, 3), tol=Tol.exact())
comp("gather", "flip", "x:flip({0, 1})", lambda t: t.flip([0, 1]), tol=Tol.exact())
comp("gather", "flip_neg", "kiln.flip(x, -1)", lambda t: t.flip(-1), shape=(2, 3, 4), tol=Tol.exact())
comp("concat", "tile", "x:tile({2, 3})", lambda t: t.repeat(2, 3), shape=(2, 3), tol=Tol.exact())
comp("concat", "repeat_lead", "kiln.repeat_(x, {2, 1, 2})", lambda t: t.repeat(2, 1, 2), shape=(3, 2), tol=Tol.exact())
add("where", "composite_nn_modules", "kiln.nn.Sequential{kiln.nn.Hardtanh(-2, 2), kiln.nn.LeakyReLU(0.3), kiln.nn.ELU(0.5), "
    "kiln.nn.Softplus(2), kiln.nn.Mish(), kiln.nn.Hardswish(), kiln.nn.Hardsigmoid(), kiln.nn.ReLU6(), kiln.nn.LogSoftmax(1)}(x)",
    [("x", [3, 6], "f32", "u:-4:4")], tol=Tol.norm(6, lambda x: 8.0),
    ref=lambda x: N(torch.nn.Sequential(torch.nn.Hardtanh(-2, 2), torch.nn.LeakyReLU(0.3), torch.nn.ELU(0.5),
                                        torch.nn.Softplus(2), torch.nn.Mish(), torch.nn.Hardswish(), torch.nn.Hardsigmoid(),
                                        torch.nn.ReLU6(), torch.nn.LogSoftmax(1))(T(x))))
comp("gather", "interp_nearest", 'kiln.interpolate(x, {scale_factor = 2})', lambda t: F.interpolate(t, scale_factor=2),
     shape=(1, 2, 3, 4), tol=Tol.exact())
comp("gather", "interp_nearest_size", 'kiln.interpolate(x, {size = {5, 3}})', lambda t: F.interpolate(t, size=(5, 3)),
     shape=(2, 1, 4, 6), tol=Tol.exact())
comp("matmul", "interp_bilinear", 'kiln.interpolate(x, {scale_factor = 2, mode = "bilinear"})',
     lambda t: F.interpolate(t, scale_factor=2, mode="bilinear", align_corners=False), shape=(1, 2, 3, 5),
     tol=Tol.red(4, lambda x: np.max(np.abs(x))))
comp("matmul", "interp_bilinear_ac", 'x:interpolate({size = {7, 4}, mode = "bilinear", align_corners = true})',
     lambda t: F.interpolate(t, size=(7, 4), mode="bilinear", align_corners=True), shape=(1, 3, 4, 6),
     tol=Tol.red(4, lambda x: np.max(np.abs(x))))
comp("matmul", "adaptive_avg_pool", "kiln.adaptive_avg_pool2d(x, {2, 3})", lambda t: F.adaptive_avg_pool2d(t, (2, 3)),
     shape=(2, 3, 4, 6), tol=Tol.red(8, lambda x: np.max(np.abs(x))))
comp("matmul", "adaptive_avg_pool_uneven", "kiln.adaptive_avg_pool2d(x, 3)", lambda t: F.adaptive_avg_pool2d(t, 3),
     shape=(1, 2, 5, 7), tol=Tol.red(12, lambda x: np.max(np.abs(x))))
comp("concat", "pad_constant", "kiln.pad(x, {1, 2, 0, 1}, \"constant\", 0.5)", lambda t: F.pad(t, (1, 2, 0, 1), value=0.5),
     shape=(2, 3, 4), tol=Tol.exact())
comp("concat", "pad_reflect", 'x:pad({2, 1, 1, 2}, "reflect")', lambda t: F.pad(t, (2, 1, 1, 2), mode="reflect"),
     shape=(1, 2, 4, 5), tol=Tol.exact())
comp("concat", "pad_replicate", 'kiln.pad(x, {3, 0}, "replicate")', lambda t: F.pad(t, (3, 0), mode="replicate"),
     shape=(1, 2, 4), tol=Tol.exact())
comp("where", "expand", "x:expand({2, 3, 4})", lambda t: t.expand(2, 3, 4), shape=(3, 1), tol=Tol.exact())
comp("where", "broadcast_keep", "kiln.broadcast_to(x, {-1, 5})", lambda t: torch.broadcast_to(t, (4, 5)), shape=(4, 1),
     tol=Tol.exact())
comp("div", "group_norm", "kiln.group_norm(x, 2)", lambda t: F.group_norm(t, 2), shape=(2, 4, 3, 3),
     tol=Tol.norm(18, lambda x: 1.0))
comp("mul", "instance_norm_as_groups", "kiln.group_norm(x, 3, nil, nil, 1e-3)", lambda t: F.instance_norm(t, eps=1e-3),
     shape=(2, 3, 5), tol=Tol.norm(5, lambda x: 1.0))
add("conv2d", "composite_conv1d", "kiln.conv1d(x, w, b, {stride = 2, padding = 1, dilation = 2})",
    [("x", [2, 4, 11], "f32", "n")], params={"w": np.random.default_rng(5).standard_normal((6, 4, 3)).astype(np.float32),
                                             "b": np.random.default_rng(6).standard_normal(6).astype(np.float32)},
    ref=lambda x, w, b: N(F.conv1d(T(x), T(w), T(b), stride=2, padding=1, dilation=2)),
    tol=Tol.red(12, lambda x, w, b: 16.0), also=("reshape",))
add("conv2d", "composite_conv1d_groups_same", 'kiln.conv1d(x, w, {padding = "same", groups = 2})',
    [("x", [1, 4, 9], "f32", "n")], params={"w": np.random.default_rng(7).standard_normal((6, 2, 5)).astype(np.float32)},
    ref=lambda x, w: N(F.conv1d(T(x), T(w), padding="same", groups=2)), tol=Tol.red(10, lambda x, w: 16.0))
add("batchnorm", "composite_batchnorm1d", "kiln.batchnorm(x, m, v, g, b)", [("x", [3, 4, 5], "f32", "n")],
    params={"m": np.arange(4, dtype=np.float32) / 4, "v": np.arange(1, 5, dtype=np.float32),
            "g": np.full(4, 1.5, np.float32), "b": np.full(4, -0.25, np.float32)},
    ref=lambda x, m, v, g, b: N(F.batch_norm(T(x), T(m), T(v), T(g), T(b), eps=1e-5)), tol=Tol.ew(mag_abs))
add("gather_elements", "composite_take_along_dim", "kiln.take_along_dim(x, i, 1)",
    [("x", [3, 5, 2], "f32", "n"), ("i", [3, 4, 2], "i32", lambda rng, s: rng.integers(0, 5, s))],
    ref=lambda x, i: N(torch.gather(T(x), 1, torch.from_numpy(np.asarray(i, dtype=np.int64)))), tol=Tol.exact())
add("const", "composite_full", "kiln.full({2, 3}, 1.5) + kiln.ones({3}) - kiln.zeros({2, 1})", [],
    ref=lambda: np.full((2, 3), 2.5), tol=Tol.exact())
add("const", "bool_constant", "kiln.constant({true, false, true})", [], ref=lambda: np.array([True, False, True]),
    dtypes=("bool",), tol=Tol.exact())
def _einsum_case(name, spec, shapes):
    ins = [(chr(ord("a") + i), list(sh), "f32", "n") for i, sh in enumerate(shapes)]
    args = ", ".join(n for n, *_ in ins)
    add("reduce_sum", "composite_einsum_" + name, 'kiln.einsum("%s", %s)' % (spec, args), ins,
        ref=lambda *xs: N(torch.einsum(spec, *[T(x) for x in xs])),
        tol=Tol.red(16, lambda *xs: float(np.prod([np.max(np.abs(x)) for x in xs])) * 16), also=("mul", "permute"))


_einsum_case("bmm", "bij,bjk->bik", [(2, 3, 4), (2, 4, 5)])
_einsum_case("implicit", "ij,jk", [(3, 4), (4, 2)])
_einsum_case("outer", "i,j->ij", [(3,), (4,)])
_einsum_case("trace_free", "ijk->kj", [(2, 3, 4)])
_einsum_case("attn", "bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)])
_einsum_case("three", "ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)])

# ---------------------------------------------------------------- argmax / argmin
# Reference: torch.argmax/argmin in float64 (first index on a tie; a NaN counts as the
# extreme, the first NaN wins). Indices are exact, so the tolerance is exact.


def arg_case(fn, name, shape, dim=None, keep=False, g="n", expr=None):
    if expr is None:
        args = ["x"] + ([] if dim is None else [str(dim)]) + (["true"] if keep else [])
        expr = "kiln.%s(%s)" % (fn, ", ".join(args))
    tf = torch.argmax if fn == "argmax" else torch.argmin

    def ref(x):
        r = tf(T(x)) if dim is None else tf(T(x), dim, keepdim=keep)
        return N(r).astype(np.int32)
    add(fn, name, expr, [("x", shape, "f32", g)], ref=ref, dtypes=("i32",))


for fn in ("argmax", "argmin"):
    arg_case(fn, "d1", [3, 7], 1)
    arg_case(fn, "d0_keep", [4, 3], 0, True)
    arg_case(fn, "neg_mid", [2, 5, 3], -2)
    arg_case(fn, "ties", [4, 6], 1, g="small")
    arg_case(fn, "ties_d0", [6, 5], 0, g="small")
    arg_case(fn, "flat", [3, 4])
    arg_case(fn, "vec", [9], 0)
    arg_case(fn, "long", [2, 1000], 1)
    arg_case(fn, "method", [3, 5], 1, expr="x:%s(1)" % fn)
    arg_case(fn, "nan", [3, 4], 1, g=[1, np.nan, 3, np.nan, -1, -2, -3, -4, np.nan, 6, 7, 8])
    arg_case(fn, "inf", [2, 3], 1, g=[-np.inf, -np.inf, -np.inf, np.inf, 1, np.inf])
# ---------------------------------------------------------------- topk / sort / gather_elements
# Reference: torch.sort(stable=True) in float64 (equal values keep their order; a NaN is
# larger than every number: last ascending, first descending), its first k for topk
# (torch.topk's own order of equal values is unspecified). Values are copies of x and
# indices integers: exact.


def _sorted(x, dim, desc):
    v, i = torch.sort(T(x), dim=dim, descending=desc, stable=True)
    return N(v), N(i).astype(np.int32)


def topk_case(name, shape, k, dim=-1, largest=True, g="n", expr=None):
    expr = expr or "kiln.topk(x, %d, %d, %s)" % (k, dim, "true" if largest else "false")

    def ref(x):
        v, i = _sorted(x, dim, largest)
        return np.take(v, range(k), axis=dim), np.take(i, range(k), axis=dim)
    add("topk", name, "", [("x", shape, "f32", g)], body="local v, i = %s\nkiln.output(\"v\", v)\nkiln.output(\"i\", i)" % expr,
        outputs=("v", "i"), dtypes=("f32", "i32"), ref=ref, also=("gather_elements",))


def sort_case(name, shape, dim=-1, desc=False, g="n", expr=None):
    expr = expr or "kiln.sort(x, %d, %s)" % (dim, "true" if desc else "false")
    add("topk", "sort_" + name, "", [("x", shape, "f32", g)],
        body="local v, i = %s\nkiln.output(\"v\", v)\nkiln.output(\"i\", i)" % expr,
        outputs=("v", "i"), dtypes=("f32", "i32"), ref=lambda x: _sorted(x, dim, desc), also=("gather_elements",))


_TIES = [3, 1, 3, np.nan, 1, 2, np.nan, 3, -0.0, 0.0, np.inf, -np.inf]
topk_case("k3", [4, 9], 3)
topk_case("k1", [5, 6], 1)
topk_case("smallest", [4, 9], 4, largest=False)
topk_case("dim0", [7, 3], 2, dim=0)
topk_case("mid_dim", [2, 6, 3], 4, dim=1, largest=False)
topk_case("all_k", [3, 5], 5)
topk_case("ties_nan", [12], 7, dim=0, g=_TIES)
topk_case("ties_nan_smallest", [12], 7, dim=0, largest=False, g=_TIES)
topk_case("small_ints", [3, 10], 6, g="small")
topk_case("long", [2, 300], 10)
topk_case("method_defaults", [3, 8], 2, expr="x:topk(2)")
# the same x, k and dim both ways: two topk nodes that differ only in `largest` (CSE
# must not merge them)
add("topk", "both_ways", "", [("x", [3, 8], "f32", "n")],
    body='local a, i = kiln.topk(x, 3, 1, true)\nlocal b, j = kiln.topk(x, 3, 1, false)\n'
         'kiln.output("hi", i)\nkiln.output("lo", j)',
    outputs=("hi", "lo"), dtypes=("i32", "i32"),
    ref=lambda x: (_sorted(x, 1, True)[1][:, :3], _sorted(x, 1, False)[1][:, :3]))
sort_case("asc", [3, 7])
sort_case("desc_dim0", [6, 4], 0, True)
sort_case("ties_nan", [12], 0, g=_TIES)
sort_case("ties_nan_desc", [12], 0, True, g=_TIES)
sort_case("small_ints_mid", [2, 9, 2], 1, g="small")
sort_case("long", [1, 257], -1, True)
add("topk", "argsort", "kiln.argsort(x, 1, true)", [("x", [3, 6], "f32", "small")],
    ref=lambda x: _sorted(x, 1, True)[1], dtypes=("i32",))
add("topk", "fused_cast", 'kiln.cast(kiln.argsort(x), "f32") + 1', [("x", [2, 5], "f32", "n")],
    ref=lambda x: _sorted(x, -1, False)[1].astype(np.float64) + 1, also=("cast", "add"))


def _tgather(x, i, d):
    return N(torch.gather(T(x), d, torch.from_numpy(np.asarray(i, dtype=np.int64))))


add("gather_elements", "d1", "kiln.gather_elements(x, i, 1)",
    [("x", [3, 5], "f32", "n"), ("i", [3, 4], "i32", "int:0:5")], ref=lambda x, i: _tgather(x, i, 1))
add("gather_elements", "d0_rank3", "kiln.gather_elements(x, i, 0)",
    [("x", [4, 2, 3], "f32", "n"), ("i", [6, 2, 3], "i32", "int:0:4")], ref=lambda x, i: _tgather(x, i, 0))
add("gather_elements", "neg_dim_i32", "kiln.gather_elements(x, i, -1)",
    [("x", [2, 3, 4], "i32", "int:-50:50"), ("i", [2, 3, 2], "i32", "int:0:4")], ref=lambda x, i: _tgather(x, i, -1).astype(np.int32),
    dtypes=("i32",))
add("gather_elements", "bool", "kiln.gather_elements(x, i, 1)",
    [("x", [2, 5], "bool", "bool"), ("i", [2, 3], "i32", "int:0:5")],
    ref=lambda x, i: np.take_along_axis(x, i.astype(np.int64), 1), dtypes=("bool",))
add("gather_elements", "take_along_dim_bcast", "kiln.take_along_dim(x, i, 1)",
    [("x", [3, 5, 1], "f32", "n"), ("i", [1, 4, 2], "i32", "int:0:5")],
    ref=lambda x, i: N(torch.take_along_dim(T(x), torch.from_numpy(np.asarray(i, dtype=np.int64)), 1)), also=("where",))
add("gather_elements", "clamp_out_of_range", "kiln.gather_elements(x, i, 0)",
    [("x", [4, 2], "f32", "n"), ("i", [3, 2], "i32", [-3, 0, 4, 100, 1, 3])],
    ref=lambda x, i: np.take_along_axis(x, np.clip(i, 0, 3).astype(np.int64), 0), interp_error=True)

# ---------------------------------------------------------------- scatter / index_copy
# Reference: torch.scatter / torch.index_copy / Tensor.index_put_ in float64 on indices
# without duplicates (torch leaves the winner of duplicates open); the duplicate cases
# follow Kiln's documented rule (the last in row-major order wins) with a plain loop.


def _perm_idx(axis, n):
    """Distinct indices along `axis` per line: a generator of i32 arrays for gen()."""
    def g(rng, shape):
        k = shape[axis]
        moved = np.moveaxis(np.zeros(shape, np.int64), axis, -1)
        flat = moved.reshape(-1, k)
        for r in range(flat.shape[0]):
            flat[r] = rng.permutation(n)[:k]
        return np.moveaxis(flat.reshape(moved.shape), -1, axis)
    return g


def _tscatter(x, d, i, src):
    return N(torch.scatter(T(x), d, torch.from_numpy(np.asarray(i, dtype=np.int64)), T(src)))


def _last_wins(x, d, i, src, per_element=True):
    out = np.array(x, dtype=np.float64 if x.dtype != np.bool_ else np.bool_, copy=True)
    for pos in np.ndindex(*src.shape):
        t = list(pos)
        t[d] = i[pos] if per_element else i[pos[d]]
        out[tuple(t)] = src[pos]
    return out


add("scatter", "d1", "kiln.scatter(x, 1, i, s)",
    [("x", [3, 6], "f32", "n"), ("i", [3, 4], "i32", _perm_idx(1, 6)), ("s", [3, 4], "f32", "n")],
    ref=lambda x, i, s: _tscatter(x, 1, i, s))
add("scatter", "d0_rank3_method", "x:scatter(0, i, s)",
    [("x", [5, 2, 3], "f32", "n"), ("i", [3, 2, 3], "i32", _perm_idx(0, 5)), ("s", [3, 2, 3], "f32", "n")],
    ref=lambda x, i, s: _tscatter(x, 0, i, s))
add("scatter", "neg_dim_larger_src", "kiln.scatter(x, -1, i, s)",
    [("x", [2, 3, 5], "f32", "n"), ("i", [2, 3, 2], "i32", _perm_idx(2, 5)), ("s", [2, 4, 4], "f32", "n")],
    ref=lambda x, i, s: _tscatter(x, -1, i, s[:, :3, :2]), also=("slice",))
add("scatter", "value", "kiln.scatter(x, 1, i, 2.5)",
    [("x", [2, 5], "f32", "n"), ("i", [2, 2], "i32", _perm_idx(1, 5))],
    ref=lambda x, i: N(torch.scatter(T(x), 1, torch.from_numpy(np.asarray(i, dtype=np.int64)), 2.5)), also=("const",))
add("scatter", "i32", "kiln.scatter(x, 0, i, s)",
    [("x", [4, 3], "i32", "int:-9:9"), ("i", [2, 3], "i32", _perm_idx(0, 4)), ("s", [2, 3], "i32", "int:100:200")],
    ref=lambda x, i, s: _tscatter(x, 0, i, s).astype(np.int32), dtypes=("i32",))
add("scatter", "bool", "kiln.scatter(x, 1, i, s)",
    [("x", [2, 4], "bool", "bool"), ("i", [2, 2], "i32", _perm_idx(1, 4)), ("s", [2, 2], "bool", "bool")],
    ref=lambda x, i, s: _last_wins(x, 1, i, s), dtypes=("bool",))
add("scatter", "duplicates_last_wins", "kiln.scatter(x, 1, i, s)",
    [("x", [2, 4], "f32", "n"), ("i", [2, 5], "i32", [1, 3, 1, 1, 0, 2, 2, 3, 2, 0]), ("s", [2, 5], "f32", "n")],
    ref=lambda x, i, s: _last_wins(x, 1, i, s))
add("scatter", "fused_relu", "kiln.relu(kiln.scatter(x, 1, i, s))",
    [("x", [3, 6], "f32", "n"), ("i", [3, 2], "i32", _perm_idx(1, 6)), ("s", [3, 2], "f32", "n")],
    ref=lambda x, i, s: np.maximum(_tscatter(x, 1, i, s), 0), also=("relu",))
add("scatter", "out_of_range_skipped", "kiln.scatter(x, 0, i, s)",
    [("x", [3, 2], "f32", "n"), ("i", [2, 2], "i32", [5, 0, -1, 2]), ("s", [2, 2], "f32", "n")],
    ref=lambda x, i, s: _last_wins(x, 0, np.where((i >= 0) & (i < 3), i, 0), np.where((i >= 0) & (i < 3), s, x[0, :])),
    interp_error=True)


def _tindex_copy(x, d, i, src):
    return N(torch.index_copy(T(x), d, torch.from_numpy(np.asarray(i, dtype=np.int64)), T(src)))


add("index_copy", "rows", "kiln.index_copy(x, 0, i, s)",
    [("x", [6, 3], "f32", "n"), ("i", [2], "i32", [4, 1]), ("s", [2, 3], "f32", "n")],
    ref=lambda x, i, s: _tindex_copy(x, 0, i, s))
add("index_copy", "mid_dim_method", "x:index_copy(1, i, s)",
    [("x", [2, 5, 3], "f32", "n"), ("i", [3], "i32", [0, 4, 2]), ("s", [2, 3, 3], "f32", "n")],
    ref=lambda x, i, s: _tindex_copy(x, 1, i, s))
add("index_copy", "duplicates_last_wins", "kiln.index_copy(x, 1, i, s)",
    [("x", [2, 4], "f32", "n"), ("i", [3], "i32", [2, 0, 2]), ("s", [2, 3], "f32", "n")],
    ref=lambda x, i, s: _last_wins(x, 1, i, s, per_element=False))
add("index_copy", "index_put", "kiln.index_put(x, {i}, v)",
    [("x", [5, 4], "f32", "n"), ("i", [2], "i32", [3, 0]), ("v", [4], "f32", "n")],
    ref=lambda x, i, v: N(T(x).index_put_((torch.from_numpy(np.asarray(i, dtype=np.int64)),), T(v))), also=("where",))
add("index_copy", "index_put_value_i32", "kiln.index_put(x, {i}, 7)",
    [("x", [4, 2], "i32", "int:-5:5"), ("i", [2], "i32", [1, 2])],
    ref=lambda x, i: np.where(np.isin(np.arange(4), i)[:, None], 7, x).astype(np.int32), dtypes=("i32",), also=("const",))
add("index_copy", "out_of_range_skipped", "kiln.index_copy(x, 0, i, s)",
    [("x", [3, 2], "f32", "n"), ("i", [2], "i32", [7, 1]), ("s", [2, 2], "f32", "n")],
    ref=lambda x, i, s: np.concatenate([x[:1], s[1:], x[2:]]), interp_error=True)

# ---------------------------------------------------------------- i64 inputs
# kiln.input(name, shape, "i64"): the C entry takes int64_t, checks every value fits i32
# (else E_RANGE, nothing touched; the interpreter names the line) and casts. numpy's
# int64 -> int32 of in-range values is the reference.
_I64_LIMITS = [0, 1, -1, 2**31 - 1, -2**31, 12345678, -7, 31999]
add("cast", "i64_input", "ids", [("ids", [2, 4], "i64", _I64_LIMITS)], ref=lambda ids: ids.astype(np.int32),
    dtypes=("i32",), also=("input",))
add("gather", "i64_token_ids", "kiln.embedding(t, ids) + (ids + 1):cast(\"f32\"):unsqueeze(-1)",
    [("t", [10, 3], "f32", "n"), ("ids", [2, 3], "i64", "int:0:10")],
    ref=lambda t, ids: t[ids] + (ids + 1)[..., None], tol=Tol.ew(), also=("cast", "add"))
for _name, _bad in (("above", 2**31), ("below", -2**31 - 1), ("far", 2**62)):
    add("cast", "i64_out_of_range_" + _name, "ids + 1", [("ids", [3], "i64", [5, _bad, 7])],
        ref=lambda ids: ids.astype(np.int32) + 1, dtypes=("i32",), interp_error=True, c_range=True)

add("argmax", "fused_cast", 'kiln.cast(kiln.argmax(x, 1), "f32") * 2', [("x", [3, 5], "f32", "n")],
    ref=lambda x: np.argmax(x, 1).astype(np.float64) * 2, also=("cast", "mul"))
add("slice", "composite_split", "", [("x", [7, 3], "f32", "n")], tol=Tol.exact(),
    body="local a, b, c = x:split({2, 4, 1}, 0)\nkiln.output(\"a\", a)\nkiln.output(\"b\", b)\nkiln.output(\"c\", c)",
    outputs=("a", "b", "c"), dtypes=("f32", "f32", "f32"), ref=lambda x: (x[:2], x[2:6], x[6:]))
add("slice", "composite_split_size", "", [("x", [2, 5], "f32", "n")], tol=Tol.exact(),
    body="local a, b, c = kiln.split(x, 2, 1)\nkiln.output(\"a\", a)\nkiln.output(\"b\", b)\nkiln.output(\"c\", c)",
    outputs=("a", "b", "c"), dtypes=("f32", "f32", "f32"), ref=lambda x: tuple(N(p) for p in T(x).split(2, 1)))
comp("slice", "select_neg", "x:select(1, -2)", lambda t: t.select(1, -2), shape=(3, 4, 2), tol=Tol.exact(),
     also=("reshape",))

# ---------------------------------------------------------------- random programs (random_graphs.py)
import random_graphs  # noqa: E402

CASES += random_graphs.make_cases(Case)

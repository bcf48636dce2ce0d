"""random_graphs.py -- t_ops' random programs: seeded random DAGs of 12-24 ops over 2-D tensors.

The per-op cases test each kernel alone; these test the passes between them: common
subexpressions, folding, views, outputs that alias, and above all the memory plan (many
intermediates live at once, reused arena slots, outputs written in place). Each program is
written twice from the same choices: as Lua for Kiln and as a float64 numpy function for
the reference. Values stay bounded (exp and matmul are scaled, pow has a positive base), so
the whole-model tolerance applies. The programs are fixed by their seeds: the same cases
run every time, and a failure names the seed to reproduce it.
"""
import numpy as np

from kt import Tol

SIZES = [1, 3, 4, 5]


def _softmax(x, d):
    e = np.exp(x - x.max(axis=d, keepdims=True))
    return e / e.sum(axis=d, keepdims=True)


def _layernorm(x):
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5)


class Program:
    """Builds the Lua body and the numpy steps side by side."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.lua, self.steps, self.pool, self.n = [], [], [], 0

    def new(self, shape, lua, fn):
        name = "t%d" % self.n
        self.n += 1
        self.lua.append("local %s = %s" % (name, lua))
        self.steps.append((name, fn))
        self.pool.append((name, tuple(shape)))
        return name

    def pick(self, pred=lambda s: True):
        cands = [p for p in self.pool if pred(p[1])]
        if len(cands) > 4 and self.rng.random() < 0.5:
            cands = cands[-4:]                     # favour recent values: deeper chains
        return cands[self.rng.integers(len(cands))] if cands else None

    def step(self):
        r = self.rng
        kind = r.choice(["unary", "unary", "binary", "binary", "binary", "matmul", "reduce", "transpose",
                         "reshape", "concat", "slice", "softmax", "layernorm", "where", "const"])
        a, sa = self.pick()
        if kind == "unary":
            op = r.choice(["tanh", "sigmoid", "relu", "neg", "abs", "exp", "gelu", "silu", "sqrt"])
            lua = {"exp": "kiln.exp(%s * 0.25)" % a, "sqrt": "kiln.sqrt(kiln.abs(%s) + 0.5)" % a}.get(
                op, "kiln.%s(%s)" % (op, a))
            f = {"tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "relu": lambda x: np.maximum(x, 0),
                 "neg": np.negative, "abs": np.abs, "exp": lambda x: np.exp(x * 0.25),
                 "gelu": lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2))), "silu": lambda x: x / (1 + np.exp(-x)),
                 "sqrt": lambda x: np.sqrt(np.abs(x) + 0.5)}[op]
            return self.new(sa, lua, lambda e, a=a, f=f: f(e[a]))
        if kind == "binary":
            b = self.pick(lambda s: _bcast(sa, s) is not None)
            bn, sb = b
            op = r.choice(["+", "-", "*", "max", "min", "div"])
            shape = _bcast(sa, sb)
            if op in "+-*":
                return self.new(shape, "%s %s %s" % (a, op, bn),
                                lambda e, a=a, b=bn, op=op: {"+": np.add, "-": np.subtract, "*": np.multiply}[op](e[a], e[b]))
            if op == "div":
                return self.new(shape, "%s / (kiln.abs(%s) + 1)" % (a, bn), lambda e, a=a, b=bn: e[a] / (np.abs(e[b]) + 1))
            f = np.fmax if op == "max" else np.fmin
            return self.new(shape, "kiln.%s(%s, %s)" % (op, a, bn), lambda e, a=a, b=bn, f=f: f(e[a], e[b]))
        if kind == "matmul":
            b = self.pick(lambda s: s[0] == sa[1])
            if b is None:
                return None
            bn, sb = b
            k = sa[1]
            return self.new((sa[0], sb[1]), "kiln.matmul(%s, %s) * %r" % (a, bn, 1 / np.sqrt(k)),
                            lambda e, a=a, b=bn, k=k: (e[a] @ e[b]) * np.float32(1 / np.sqrt(k)).item())
        if kind == "reduce":
            d = int(r.integers(2))
            op = r.choice(["sum", "mean", "amax"])
            f = {"sum": np.sum, "mean": np.mean, "amax": np.max}[op]
            shape = (1, sa[1]) if d == 0 else (sa[0], 1)
            return self.new(shape, "kiln.%s(%s, %d, true)" % (op, a, d), lambda e, a=a, d=d, f=f: f(e[a], axis=d, keepdims=True))
        if kind == "transpose":
            return self.new((sa[1], sa[0]), "kiln.transpose(%s, 0, 1)" % a, lambda e, a=a: e[a].T)
        if kind == "reshape":
            return self.new((sa[1], sa[0]), "kiln.reshape(%s, {%d, %d})" % (a, sa[1], sa[0]),
                            lambda e, a=a, s=(sa[1], sa[0]): e[a].reshape(s))
        if kind == "concat":
            d = int(r.integers(2))
            b = self.pick(lambda s: s[1 - d] == sa[1 - d])
            c = self.pick(lambda s: s[1 - d] == sa[1 - d])
            shape = list(sa)
            shape[d] = sa[d] + b[1][d] + c[1][d]
            if shape[d] > 12:
                return None
            return self.new(shape, "kiln.concat({%s, %s, %s}, %d)" % (a, b[0], c[0], d - 2),
                            lambda e, a=a, b=b[0], c=c[0], d=d: np.concatenate([e[a], e[b], e[c]], d))
        if kind == "slice":
            d = int(r.integers(2))
            n = sa[d]
            start, step = int(r.integers(n)), int(r.integers(1, 3))
            m = len(range(start, n, step))
            shape = list(sa)
            shape[d] = m
            sl = (slice(None), slice(start, None, step)) if d else (slice(start, None, step),)
            return self.new(shape, "kiln.slice(%s, %d, %d, nil, %d)" % (a, d, start, step),
                            lambda e, a=a, sl=sl: e[a][sl])
        if kind == "softmax":
            d = int(r.integers(2))
            return self.new(sa, "kiln.softmax(%s, %d)" % (a, d), lambda e, a=a, d=d: _softmax(e[a], d))
        if kind == "layernorm":
            return self.new(sa, "kiln.layernorm(%s, nil, nil)" % a, lambda e, a=a: _layernorm(e[a]))
        if kind == "where":
            b = self.pick(lambda s: s == sa)
            return self.new(sa, "kiln.where(kiln.gt(%s, %s), %s, %s * 0.5)" % (a, b[0], b[0], a),
                            lambda e, a=a, b=b[0]: np.where(e[a] > e[b], e[b], e[a] * 0.5))
        vals = [round(float(v), 3) for v in self.rng.uniform(-1, 1, int(np.prod(sa)))]
        return self.new(sa, "%s + kiln.constant({%s}, {%d, %d})" % (a, ", ".join(map(repr, vals)), sa[0], sa[1]),
                        lambda e, a=a, v=vals, s=sa: e[a] + np.array(v, dtype=np.float32).astype(np.float64).reshape(s))


def _bcast(a, b):
    try:
        s = np.broadcast_shapes(a, b)
    except ValueError:
        return None
    return s if max(s) <= 12 else None


def _erf(x):
    import math
    return np.vectorize(math.erf)(x)


def make_cases(Case, count=24):
    cases = []
    for seed in range(count):
        p = Program(1000 + seed)
        r = p.rng
        inputs = []
        for i in range(int(r.integers(1, 4))):
            shape = [int(r.choice(SIZES)), int(r.choice(SIZES))]
            inputs.append(("x%d" % i, shape, "f32", "n"))
            p.pool.append(("x%d" % i, tuple(shape)))
        target = int(r.integers(12, 25))
        while len(p.steps) < target:
            p.step()
        names = [n for n, _ in p.pool]
        outs = sorted({names[-1]} | {names[int(i)] for i in r.integers(len(names), size=int(r.integers(1, 5)))},
                      key=names.index)
        body = "\n".join(p.lua) + "\n" + "\n".join('kiln.output("o_%s", %s)' % (o, o) for o in outs)
        shapes = dict(p.pool)

        def ref(*xs, steps=p.steps, inputs=inputs, outs=outs, shapes=shapes):
            env = {n: np.asarray(x, dtype=np.float64) for (n, _, _, _), x in zip(inputs, xs)}
            for name, f in steps:
                env[name] = np.asarray(f(env), dtype=np.float64).reshape(shapes[name])
            return tuple(env[o] for o in outs)
        cases.append(Case("random", "seed%d" % (1000 + seed), None, inputs, ref=ref, body=body,
                          outputs=["o_" + o for o in outs], dtypes=["f32"] * len(outs), tol=Tol.model(1e-5)))
    return cases

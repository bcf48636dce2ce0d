"""ggml_quant.py -- numpy quantizers from f32 to ggml's block formats, vectorised over all
blocks of a tensor (a 100M-parameter model quantizes in seconds), for the benchmarks'
GGUF files (bench/llamacpp, bench/quant). Deterministic: the same array gives the same bytes.

Block layouts are ggml's (the dequantizers of tests/py/gguf_file.py read them back):
  F16   IEEE half per element
  Q8_0  32 values: f16 d, 32 int8 q;            x = d * q
  Q4_0  32 values: f16 d, 16 bytes of nibbles;  x = d * (q - 8), q in 0..15; byte j holds
        element j (low nibble) and j + 16 (high)
  Q4_K  256 values: f16 d, f16 dmin, 12 bytes of 6-bit scales/mins of 8 sub-blocks of 32,
        128 bytes of nibbles; x = d*sc*q - dmin*m, q in 0..15
  Q6_K  256 values: 128 bytes low nibbles, 64 bytes high 2-bit pairs, 16 int8 scales of
        sub-blocks of 16, f16 d; x = d * sc * (q - 32), q in 0..63
The algorithms are plain ones (not llama.cpp's searches for the best scale): Q8_0 and Q4_0
as tests/py/gguf_file.py's (the same bytes, checked by `python3 ggml_quant.py`); Q4_K: per
sub-block the range [min(0, lo), hi] over 15 steps, refined by four rounds of rounding then a
least-squares fit of step and offset (offset kept <= 0; the best round kept), the 8 scales and
8 mins each quantized to 6 bits against the super-block's largest, then every value rounded
against the scale and min the block really stores; Q6_K: per sub-block the largest magnitude
over 31 steps, twice replaced by the least-squares step of its rounding when that is better,
scales to int8 against the super-block's largest, values rounded against the stored scale.

  /usr/bin/python3 bench/llamacpp/ggml_quant.py   self-check: round trips through
      gguf_file.dequant within each format's error bound, Q8_0/Q4_0 bytes equal gguf_file's
"""
import os
import sys

import numpy as np

BLOCK = {"F32": 1, "F16": 1, "Q8_0": 32, "Q4_0": 32, "Q4_K": 256, "Q6_K": 256}


def _f16(a):
    """a (float32) rounded to f16 and back: the value a block really stores."""
    return a.astype(np.float16).astype(np.float32)


def _div(a, b):
    """a / b, 0 where b is 0."""
    out = np.zeros(np.broadcast(a, b).shape, np.float32)
    np.divide(a, b, out=out, where=np.broadcast_to(b != 0, out.shape))
    return out


def q8_0(x):
    b = x.reshape(-1, 32).astype(np.float32)
    d = (np.abs(b).max(axis=1) / np.float32(127.0)).astype(np.float32)
    q = np.clip(np.rint(_div(b, d[:, None])), -127, 127).astype(np.int8)
    out = np.zeros((len(b), 34), np.uint8)
    out[:, 0:2] = d.astype("<f2").view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes()


def q4_0(x):
    b = x.reshape(-1, 32).astype(np.float32)
    m = b[np.arange(len(b)), np.argmax(np.abs(b), axis=1)]
    d = (m / np.float32(-8.0)).astype(np.float32)
    q = np.clip(np.rint(_div(b, d[:, None]) + 8), 0, 15).astype(np.uint8)
    q[d == 0] = 0
    out = np.zeros((len(b), 18), np.uint8)
    out[:, 0:2] = d.astype("<f2").view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q[:, :16] | (q[:, 16:] << 4)
    return out.tobytes()


def _fit_affine(b, levels, rounds=4):
    """Per row of b [..., k]: step a >= 0 and offset o <= 0 with b ~ a*q + o, q in
    0..levels: from the range [min(0, lo), hi], then `rounds` alternations of rounding q and
    a least-squares fit of (a, o) to it (o clamped to <= 0), keeping the best by squared error."""
    lo = np.minimum(b.min(axis=-1), 0)
    a = (b.max(axis=-1) - lo) / np.float32(levels)
    o = lo
    k = b.shape[-1]

    def err(a, o):
        q = np.clip(np.rint(_div(b - o[..., None], a[..., None])), 0, levels)
        return ((a[..., None] * q + o[..., None] - b) ** 2).sum(axis=-1), q
    best_e, q = err(a, o)
    best_a, best_o = a, o
    for _ in range(rounds):
        sq, sx, sqq, sxq = q.sum(-1), b.sum(-1), (q * q).sum(-1), (b * q).sum(-1)
        det = k * sqq - sq * sq
        na = _div(k * sxq - sx * sq, det)
        no = _div(sx - na * sq, np.float32(k))
        pos = no > 0                                        # offset must stay <= 0: refit the step alone
        na = np.where(pos, _div(sxq, sqq), na)
        no = np.where(pos, 0, no)
        na = np.maximum(na, 0).astype(np.float32)
        no = no.astype(np.float32)
        e, q = err(na, no)
        better = e < best_e
        best_e = np.where(better, e, best_e)
        best_a = np.where(better, na, best_a)
        best_o = np.where(better, no, best_o)
    return best_a, best_o


def q4_k(x):
    b = x.reshape(-1, 8, 32).astype(np.float32)
    n = len(b)
    scale, lo = _fit_affine(b, 15)                          # per sub-block step and offset (<= 0)
    mins = -lo                                              # >= 0
    d = _f16(scale.max(axis=1) / np.float32(63))            # [n]
    dmin = _f16(mins.max(axis=1) / np.float32(63))
    sc = np.clip(np.rint(_div(scale, d[:, None])), 0, 63).astype(np.uint8)
    mn = np.clip(np.rint(_div(mins, dmin[:, None])), 0, 63).astype(np.uint8)
    step = (d[:, None] * sc.astype(np.float32))[:, :, None]             # what dequantization uses
    off = (dmin[:, None] * mn.astype(np.float32))[:, :, None]
    q = np.clip(np.rint(_div(b + off, step)), 0, 15).astype(np.uint8)   # [n, 8, 32]
    out = np.zeros((n, 144), np.uint8)
    out[:, 0:2] = d.astype("<f2").view(np.uint8).reshape(-1, 2)
    out[:, 2:4] = dmin.astype("<f2").view(np.uint8).reshape(-1, 2)
    s = out[:, 4:16]
    s[:, 0:4] = sc[:, 0:4] | ((sc[:, 4:8] >> 4) << 6)
    s[:, 4:8] = mn[:, 0:4] | ((mn[:, 4:8] >> 4) << 6)
    s[:, 8:12] = (sc[:, 4:8] & 15) | ((mn[:, 4:8] & 15) << 4)
    out[:, 16:] = (q[:, 0::2, :] | (q[:, 1::2, :] << 4)).reshape(n, 128)   # pair s: sub-blocks 2s, 2s+1
    return out.tobytes()


def q6_k(x):
    b = x.reshape(-1, 16, 16).astype(np.float32)
    n = len(b)
    scale = np.abs(b).max(axis=2) / np.float32(31)          # [n, 16]
    for _ in range(2):   # least-squares step for the rounded q (kept where it lowers the error)
        q = np.clip(np.rint(_div(b, scale[:, :, None])), -32, 31)
        ls = _div((b * q).sum(axis=2), (q * q).sum(axis=2))
        e_old = ((scale[:, :, None] * q - b) ** 2).sum(axis=2)
        q2 = np.clip(np.rint(_div(b, ls[:, :, None])), -32, 31)
        e_new = ((ls[:, :, None] * q2 - b) ** 2).sum(axis=2)
        scale = np.where((e_new < e_old) & (ls > 0), ls, scale).astype(np.float32)
    d = _f16(scale.max(axis=1) / np.float32(127))
    sc = np.clip(np.rint(_div(scale, d[:, None])), 0, 127).astype(np.int8)
    step = (d[:, None] * sc.astype(np.float32))[:, :, None]
    q = (np.clip(np.rint(_div(b, step)), -32, 31) + 32).astype(np.uint8).reshape(n, 2, 4, 32)
    out = np.zeros((n, 210), np.uint8)
    for h in range(2):                                      # each half of 128: 4 rows of 32
        q0, q1, q2, q3 = q[:, h, 0], q[:, h, 1], q[:, h, 2], q[:, h, 3]
        out[:, 64 * h:64 * h + 32] = (q0 & 15) | ((q2 & 15) << 4)
        out[:, 64 * h + 32:64 * h + 64] = (q1 & 15) | ((q3 & 15) << 4)
        out[:, 128 + 32 * h:128 + 32 * h + 32] = (q0 >> 4) | ((q1 >> 4) << 2) | ((q2 >> 4) << 4) | ((q3 >> 4) << 6)
    out[:, 192:208] = sc.view(np.uint8)
    out[:, 208:210] = d.astype("<f2").view(np.uint8).reshape(-1, 2)
    return out.tobytes()


def quantize(tname, x):
    """The bytes of x (float32, size a multiple of the type's block) as ggml type tname."""
    x = np.ascontiguousarray(x, dtype=np.float32).ravel()
    if tname == "F32":
        return x.astype("<f4").tobytes()
    if tname == "F16":
        return x.astype("<f2").tobytes()
    return {"Q8_0": q8_0, "Q4_0": q4_0, "Q4_K": q4_k, "Q6_K": q6_k}[tname](x)


def main():
    """Self-check against tests/py/gguf_file.py (its dequantizers are ggml's, bit for bit)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "py"))
    import gguf_file as G
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(256 * 64) * rng.uniform(0.01, 2, 256 * 64 // 32).repeat(32)).astype(np.float32)
    x[:32] = 0                                               # an all-zero block
    x[32:64] = np.abs(x[32:64])                              # a block with no negative value
    ok = True
    # bound: RMS error relative to the RMS of x
    for t, bound in [("F16", 1e-3), ("Q8_0", 0.01), ("Q4_0", 0.15), ("Q4_K", 0.12), ("Q6_K", 0.03)]:
        y = G.dequant(t, quantize(t, x), x.size)
        rel = float(np.sqrt(np.mean((y - x) ** 2)) / np.sqrt(np.mean(x ** 2)))
        good = np.isfinite(y).all() and rel < bound and np.all(y[:32] == 0)
        ok &= bool(good)
        print("%s %s: relative RMS error %.4f (bound %g)" % ("PASS" if good else "FAIL", t, rel, bound))
    for t, ref in [("Q8_0", G.q8_0), ("Q4_0", G.q4_0)]:
        same = quantize(t, x) == ref(x)
        ok &= same
        print("%s %s-bytes: equal to tests/py/gguf_file.py's" % ("PASS" if same else "FAIL", t))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

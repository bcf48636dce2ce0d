"""ref.py -- an independent numpy reading of Kiln's stored weight formats (docs/quantization.md).

Written from the spec, not from gen/ir/quant.c: it splits a panel-laid matrix into its
fields (scales, quants, per row), evaluates the spec's value expressions in float32 (numpy
rounds every operation separately, like the spec), and, for the formats whose quantizer
the spec fixes (f16, bf16, i8, q8_0, q4_0, g8, g4), quantizes from the spec's rules and
lays the fields out again. tests/t_quant.sh runs it:

  ref.py cases DIR        checks what `qtest cases DIR` wrote (see tests/quant/qtest.c)
  ref.py ggml-write DIR   random valid ggml blocks: DIR/blocks.gguf and DIR/NAME.raw
  ref.py ggml-check DIR   the panels `qtest ggml` made of them, decoded here, against
                          ggml's dequantization (tests/py/gguf_file.py)

Output: "PASS quant/..." and "FAIL quant/...: why" lines.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
import gguf_file  # noqa: E402  (tests/py: the GGUF writer and ggml's dequantizers)

F32 = np.float32
LANES = 32
# format: (elements per block (0: the whole row), bytes per block (i8: the fixed part))
FORMATS = {"f32": (1, 128), "f16": (1, 64), "bf16": (1, 64), "i8": (0, 128), "q8_0": (32, 1088),
           "q4_0": (32, 576), "q4_k": (256, 4608), "q6_k": (256, 6720), "g8": (64, 2176), "g4": (64, 1152)}
EXACT = ["f32", "f16", "bf16", "i8", "q8_0", "q4_0", "g8", "g4"]   # quantizer fixed by the spec
GGML = {"f32": "F32", "f16": "F16", "bf16": "BF16", "q8_0": "Q8_0", "q4_0": "Q4_0", "q4_k": "Q4_K",
        "q6_k": "Q6_K"}

failures = 0


def result(ok, name, why=""):
    global failures
    if ok:
        print("PASS quant/" + name)
    else:
        failures += 1
        print("FAIL quant/%s: %s" % (name, why))


# ---------------------------------------------------------------- numbers

def half(u16):
    """f16 bits -> float32 (exact)."""
    return np.asarray(u16, np.uint16).view(np.float16).astype(F32)


def bf16(u16):
    return (np.asarray(u16, np.uint16).astype(np.uint32) << 16).view(F32)


def to_half(x):
    """float32 -> f16 bits, round to nearest even (numpy's cast)."""
    with np.errstate(over="ignore"):
        return np.asarray(x, F32).astype(np.float16).view(np.uint16)


def to_half_sat(x):
    """As to_half, but a finite value that rounds to inf gives +-65504 (the spec's scales)."""
    h = to_half(x)
    inf = (h & 0x7c00) == 0x7c00
    return np.where(inf, (h & 0x8000) | 0x7bff, h).astype(np.uint16)


def to_bf16(x):
    u = np.asarray(x, F32).view(np.uint32).astype(np.uint64)
    nan = (u & 0x7fffffff) > 0x7f800000
    r = (u + 0x7fff + ((u >> 16) & 1)) >> 16
    return np.where(nan, (u >> 16) | 0x40, r).astype(np.uint16)


def round_away(v):
    """Round half away from zero (C's roundf), exactly: the fraction v - trunc(v) is exact."""
    v = np.asarray(v, F32)
    t = np.trunc(v)
    f = v - t
    return t + (f >= 0.5).astype(F32) - (f <= -0.5).astype(F32)


# ---------------------------------------------------------------- layout

def panel_bytes(fmt, k):
    B, bb = FORMATS[fmt]
    return 128 + 32 * k if fmt == "i8" else k // B * bb


def to_rows(a):
    """(P, nb, X, 32 lanes) -> (P*32 rows, nb*X): the values of each row in order."""
    P, nb, X, L = a.shape
    return a.transpose(0, 3, 1, 2).reshape(P * L, nb * X)


def from_rows(r, nb):
    """Inverse of to_rows."""
    R, K = r.shape
    return r.reshape(R // LANES, LANES, nb, K // nb).transpose(0, 2, 3, 1)


def lane_fields(a):
    """(P, nb, 32 lanes, X) bytes of per-lane runs -> (P*32 rows, nb, X)."""
    P, nb, L, X = a.shape
    return a.transpose(0, 2, 1, 3).reshape(P * L, nb, X)


def lane_fields_back(r):
    R, nb, X = r.shape
    return r.reshape(R // LANES, LANES, nb, X).transpose(0, 2, 1, 3)


def nib_get(area, K):
    """nib(k, j): (..., K*16 bytes) -> (..., K, 32) values; byte t: lane t low, lane t+16 high."""
    b = area.reshape(area.shape[:-1] + (K, 16))
    return np.concatenate([b & 15, b >> 4], axis=-1)


def nib_put(q):
    """(..., K, 32) values 0..15 -> (..., K*16) bytes."""
    q = q.astype(np.uint8)
    b = q[..., :16] | (q[..., 16:] << 4)
    return b.reshape(b.shape[:-2] + (-1,))


def halves(blk, off):
    """32 lanes' f16 (or u16) words at off of each block: (P, nb, 32) uint16."""
    return np.ascontiguousarray(blk[..., off:off + 64]).view("<u2")


def fields(fmt, buf, n, k):
    """The stored fields of every row (P*32 rows, padding included), as integers/bits."""
    B, bb = FORMATS[fmt]
    P = (n + LANES - 1) // LANES
    buf = np.frombuffer(buf, np.uint8)
    assert buf.size == P * panel_bytes(fmt, k), (fmt, buf.size, P * panel_bytes(fmt, k))
    if fmt == "i8":
        pan = buf.reshape(P, 1, 128 + 32 * k)
        return {"s": lane_fields(np.ascontiguousarray(pan[..., :128]).view("<u4").reshape(P, 1, 32, 1))[:, 0, 0],
                "q": to_rows(pan[..., 128:].view(np.int8).reshape(P, 1, k, 32))}
    nb = k // B
    blk = buf.reshape(P, nb, bb)
    if fmt in ("f16", "bf16"):
        return {"h": to_rows(halves(blk, 0).reshape(P, nb, 1, 32))}
    per_block = lambda a: lane_fields(a.reshape(P, nb, 32, 1))[..., 0]   # (P, nb, 32) -> (R, nb)
    if fmt == "q8_0":
        return {"d": per_block(halves(blk, 0)), "q": to_rows(blk[..., 64:].view(np.int8).reshape(P, nb, 32, 32))}
    if fmt == "q4_0":
        return {"d": per_block(halves(blk, 0)), "q": to_rows(nib_get(blk[..., 64:], 32))}
    if fmt in ("g8", "g4"):
        q = blk[..., 128:].reshape(P, nb, 64, 32) if fmt == "g8" else nib_get(blk[..., 128:], 64)
        return {"s": per_block(halves(blk, 0)), "b": per_block(halves(blk, 64)), "q": to_rows(q)}
    if fmt == "q4_k":
        sb = lane_fields(blk[..., 128:512].reshape(P, nb, 32, 12)).astype(np.int32)   # (R, nb, 12)
        sc = np.zeros(sb.shape[:2] + (8,), np.int32)
        m = np.zeros_like(sc)
        for s in range(4):
            sc[..., s] = sb[..., s] & 63
            m[..., s] = sb[..., s + 4] & 63
        for s in range(4, 8):
            sc[..., s] = (sb[..., s + 4] & 15) | ((sb[..., s - 4] >> 6) << 4)
            m[..., s] = (sb[..., s + 4] >> 4) | ((sb[..., s] >> 6) << 4)
        return {"d": per_block(halves(blk, 0)), "dmin": per_block(halves(blk, 64)), "sc": sc, "m": m,
                "q": to_rows(nib_get(blk[..., 512:], 256))}
    if fmt == "q6_k":
        kb = blk[..., 576:].reshape(P, nb, 256, 24)
        lo = nib_get(np.ascontiguousarray(kb[..., :16]).reshape(P, nb, 256 * 16), 256)
        words = np.ascontiguousarray(kb[..., 16:]).view("<u4")                 # (P, nb, 256, 2)
        j = np.arange(32)
        hi = (words[..., j // 16] >> (2 * (j % 16)).astype(np.uint32)) & 3
        return {"d": per_block(halves(blk, 0)),
                "sc": lane_fields(blk[..., 64:576].view(np.int8).reshape(P, nb, 32, 16)),
                "q": to_rows(lo.astype(np.int32) | (hi.astype(np.int32) << 4))}
    raise ValueError(fmt)


def u8(a, dtype):
    """a as dtype, its bytes (little-endian dtypes), same leading shape."""
    return np.ascontiguousarray(np.asarray(a).astype(dtype)).view(np.uint8)


def assemble(fmt, fl, n, k):
    """Inverse of fields: the bytes of the panels."""
    B, bb = FORMATS[fmt]
    P = (n + LANES - 1) // LANES
    if fmt == "i8":
        pan = np.zeros((P, 128 + 32 * k), np.uint8)
        pan[:, :128] = u8(fl["s"].reshape(P, 32), "<u4")
        pan[:, 128:] = u8(from_rows(fl["q"], 1), np.int8).reshape(P, 32 * k)
        return pan.tobytes()
    nb = k // B
    blk = np.zeros((P, nb, bb), np.uint8)

    def put_halves(off, r):                                   # (R, nb) words -> 32 lanes at off
        blk[..., off:off + 64] = u8(lane_fields_back(r[..., None])[..., 0], "<u2")
    if fmt in ("f16", "bf16"):
        blk[...] = u8(from_rows(fl["h"], nb).reshape(P, nb, 32), "<u2")
    elif fmt == "q8_0":
        put_halves(0, fl["d"])
        blk[..., 64:] = u8(from_rows(fl["q"], nb), np.int8).reshape(P, nb, 1024)
    elif fmt == "q4_0":
        put_halves(0, fl["d"])
        blk[..., 64:] = nib_put(from_rows(fl["q"], nb))
    elif fmt in ("g8", "g4"):
        put_halves(0, fl["s"])
        put_halves(64, fl["b"])
        q = from_rows(fl["q"], nb)
        blk[..., 128:] = q.astype(np.uint8).reshape(P, nb, 2048) if fmt == "g8" else nib_put(q)
    elif fmt == "q4_k":
        put_halves(0, fl["d"])
        put_halves(64, fl["dmin"])
        sc, m = fl["sc"], fl["m"]
        sb = np.zeros(sc.shape[:2] + (12,), np.int32)
        for s in range(4):
            sb[..., s] |= sc[..., s]
            sb[..., s + 4] |= m[..., s]
        for s in range(4, 8):
            sb[..., s + 4] |= (sc[..., s] & 15) | ((m[..., s] & 15) << 4)
            sb[..., s - 4] |= (sc[..., s] >> 4) << 6
            sb[..., s] |= (m[..., s] >> 4) << 6
        blk[..., 128:512] = u8(lane_fields_back(sb), np.uint8).reshape(P, nb, 384)
        blk[..., 512:] = nib_put(from_rows(fl["q"], nb))
    elif fmt == "q6_k":
        put_halves(0, fl["d"])
        blk[..., 64:576] = u8(lane_fields_back(fl["sc"]), np.int8).reshape(P, nb, 512)
        q = from_rows(fl["q"], nb).astype(np.uint32)                         # (P, nb, 256, 32)
        kb = np.zeros((P, nb, 256, 24), np.uint8)
        kb[..., :16] = ((q[..., :16] & 15) | ((q[..., 16:] & 15) << 4)).astype(np.uint8)   # nib, per k
        j = np.arange(32)
        hi = (q >> 4) << (2 * (j % 16)).astype(np.uint32)
        words = np.stack([np.bitwise_or.reduce(hi[..., :16], axis=-1), np.bitwise_or.reduce(hi[..., 16:], axis=-1)], -1)
        kb[..., 16:] = u8(words, "<u4").reshape(P, nb, 256, 8)
        blk[..., 576:] = kb.reshape(P, nb, 256 * 24)
    else:
        raise ValueError(fmt)
    return blk.tobytes()


def values(fmt, fl, k):
    """The spec's value of every element, float32, (rows, k), from the fields."""
    B = FORMATS[fmt][0]
    rep = lambda a, times: np.repeat(a, times, axis=1)   # per-block (R, nb) -> per-value (R, k)
    if fmt == "f16":
        return half(fl["h"])
    if fmt == "bf16":
        return bf16(fl["h"])
    if fmt == "i8":
        return fl["s"].view(F32)[:, None] * fl["q"].astype(F32)
    if fmt == "q8_0":
        return rep(half(fl["d"]), B) * fl["q"].astype(F32)
    if fmt == "q4_0":
        return rep(half(fl["d"]), B) * (fl["q"].astype(np.int32) - 8).astype(F32)
    if fmt in ("g8", "g4"):
        return rep(half(fl["s"]), B) * fl["q"].astype(F32) + rep(half(fl["b"]), B)
    if fmt == "q4_k":
        R = fl["q"].shape[0]
        D = (half(fl["d"])[..., None] * fl["sc"].astype(F32)).reshape(R, -1)   # per sub-block of 32
        M = (half(fl["dmin"])[..., None] * fl["m"].astype(F32)).reshape(R, -1)
        return rep(D, 32) * fl["q"].astype(F32) - rep(M, 32)
    if fmt == "q6_k":
        R = fl["q"].shape[0]
        D = (half(fl["d"])[..., None] * fl["sc"].astype(F32)).reshape(R, -1)   # per sub-block of 16
        return rep(D, 16) * (fl["q"].astype(np.int32) - 32).astype(F32)
    raise ValueError(fmt)


def decode(fmt, buf, n, k):
    """The n x k values of a matrix stored in fmt (the spec's decoder)."""
    if fmt == "f32":
        return np.frombuffer(buf, "<f4").reshape(n, k).astype(F32)
    return values(fmt, fields(fmt, buf, n, k), k)[:n]


# ---------------------------------------------------------------- the spec's fixed quantizers

def quantize(fmt, w):
    """The bytes the spec's quantizer gives for w (n x k float32), for fmt in EXACT."""
    n, k = w.shape
    if fmt == "f32":
        return w.astype("<f4").tobytes()
    P = (n + LANES - 1) // LANES
    x = np.zeros((P * LANES, k), F32)
    x[:n] = w
    real = (np.arange(P * LANES) < n)                       # padding rows: all fields 0
    B = FORMATS[fmt][0] or k
    xb = x.reshape(P * LANES, k // B, B)
    fl = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        if fmt == "f16":
            fl["h"] = to_half(x)
        elif fmt == "bf16":
            fl["h"] = to_bf16(x)
        elif fmt == "i8":
            s = np.abs(x).max(axis=1) / F32(127)
            q = np.where(s[:, None] == 0, 0, np.clip(round_away(x / s[:, None]), -127, 127))
            fl = {"s": s.astype(F32).view(np.uint32), "q": q.astype(np.int8)}
        elif fmt == "q8_0":
            d = to_half_sat(np.abs(xb).max(axis=2) / F32(127))
            df = np.repeat(half(d), B, axis=1)
            fl = {"d": d, "q": np.where(df == 0, 0, np.clip(round_away(x / df), -127, 127)).astype(np.int8)}
        elif fmt == "q4_0":
            idx = np.argmax(np.abs(xb), axis=2)               # the first of equal magnitudes
            m = np.take_along_axis(xb, idx[..., None], axis=2)[..., 0]
            d = np.where(m != 0, to_half_sat(m / F32(-8)), 0).astype(np.uint16)
            df = np.repeat(half(d), B, axis=1)
            q = np.where(df == 0, 8, np.clip(round_away(x / df), -8, 7) + 8)
            fl = {"d": d, "q": q.astype(np.uint8)}
        elif fmt in ("g8", "g4"):
            qmax = 255 if fmt == "g8" else 15
            lo, hi = xb.min(axis=2), xb.max(axis=2)
            s, b = to_half_sat((hi - lo) / F32(qmax)), to_half_sat(lo)
            sf, bf = np.repeat(half(s), B, axis=1), np.repeat(half(b), B, axis=1)
            q = np.where(sf == 0, 0, np.clip(round_away((x - bf) / sf), 0, qmax))
            fl = {"s": s, "b": b, "q": q.astype(np.uint8)}
    for key, a in fl.items():                                 # padding rows: zero bytes
        a[~real] = 0
    return assemble(fmt, fl, n, k)


# ---------------------------------------------------------------- checks

def first_diff_bits(a, b):
    a, b = np.ascontiguousarray(a, F32), np.ascontiguousarray(b, F32)
    d = np.nonzero(a.view(np.uint32).ravel() != b.view(np.uint32).ravel())[0]
    return None if d.size == 0 else int(d[0])


def check_cases(dir_):
    by_fmt = {}
    for line in open(os.path.join(dir_, "cases.txt")):
        i, fmt, n, k = line.split()
        by_fmt.setdefault(fmt, []).append((i, int(n), int(k)))
    for fmt in FORMATS:
        why = {"decode": "", "deq": "", "bytes": "", "padding": ""}
        for i, n, k in by_fmt.get(fmt, []):
            rd = lambda ext: open(os.path.join(dir_, "%s.%s" % (i, ext)), "rb").read()
            w = np.frombuffer(rd("w"), F32).reshape(n, k)
            q = rd("q")
            unp = np.frombuffer(rd("unp"), F32).reshape(n, k)
            deq = np.frombuffer(rd("deq"), F32).reshape(n, k)
            tag = "case %s (%d x %d)" % (i, n, k)
            mine = decode(fmt, q, n, k)
            at = first_diff_bits(mine, unp)
            if at is not None and not why["decode"]:
                why["decode"] = "%s element %d: numpy %r, quant_unpack %r" % (tag, at, mine.ravel()[at], unp.ravel()[at])
            at = first_diff_bits(mine, deq)
            if at is not None and not why["deq"]:
                why["deq"] = "%s element %d: numpy %r, deq %r" % (tag, at, mine.ravel()[at], deq.ravel()[at])
            if fmt in EXACT:
                ref = quantize(fmt, w)
                if ref != q and not why["bytes"]:
                    at = next(j for j in range(len(q)) if q[j] != ref[j])
                    why["bytes"] = "%s: byte %d is %d, the spec's quantizer gives %d" % (tag, at, q[at], ref[at])
            if fmt != "f32":                                  # fields round-trip, padding zeroed
                fl = {key: a.copy() for key, a in fields(fmt, q, n, k).items()}
                for a in fl.values():
                    a[n:] = 0
                if assemble(fmt, fl, n, k) != q and not why["padding"]:
                    why["padding"] = "%s: re-laid fields with rows past n zeroed differ from the bytes" % tag
        if not by_fmt.get(fmt):
            result(False, fmt + "/cases", "qtest wrote no case")
            continue
        result(not why["decode"], fmt + "/numpy-decode-equals-unpack", why["decode"])
        result(not why["deq"], fmt + "/numpy-decode-equals-deq", why["deq"])
        if fmt in EXACT:
            result(not why["bytes"], fmt + "/numpy-quantizer-same-bytes", why["bytes"])
        if fmt != "f32":
            result(not why["padding"], fmt + "/layout-roundtrip-and-zero-padding", why["padding"])


GGML_SHAPES = [(1, 256), (33, 256), (70, 512)]


def random_half(rng, size):
    """Random finite f16 bit patterns (subnormals, both signs, up to 65504 included)."""
    h = rng.integers(0, 1 << 16, size=size, dtype=np.uint32)
    h = np.where((h & 0x7c00) == 0x7c00, h ^ 0x4000, h)
    return h.astype("<u2")


def random_blocks(rng, tname, nvals):
    """Random valid ggml data of nvals values: any quant bits, finite f16 scales."""
    _, blk, size = gguf_file.TYPES[tname]
    nb = nvals // blk
    if tname == "F32":
        u = rng.integers(0, 1 << 32, size=nvals, dtype=np.uint64).astype(np.uint32)
        return np.where((u & 0x7f800000) == 0x7f800000, u ^ 0x40000000, u).astype("<u4").tobytes()
    if tname == "F16":
        return random_half(rng, nvals).tobytes()
    if tname == "BF16":
        u = rng.integers(0, 1 << 16, size=nvals, dtype=np.uint32)
        return np.where((u & 0x7f80) == 0x7f80, u ^ 0x4000, u).astype("<u2").tobytes()
    raw = rng.integers(0, 256, size=(nb, size), dtype=np.uint8)
    off = {"Q8_0": [0], "Q4_0": [0], "Q4_K": [0, 2], "Q6_K": [208]}[tname]
    for o in off:
        raw[:, o:o + 2] = random_half(rng, nb).view(np.uint8).reshape(nb, 2)
    return raw.tobytes()


def ggml_write(dir_):
    rng = np.random.default_rng(20261126)
    tensors = []
    for fmt, tname in GGML.items():
        for n, k in GGML_SHAPES:
            raw = random_blocks(rng, tname, n * k)
            name = "%s.%dx%d" % (fmt, n, k)
            open(os.path.join(dir_, name + ".raw"), "wb").write(raw)
            tensors.append((name, tname, (n, k), raw))
    gguf_file.write(os.path.join(dir_, "blocks.gguf"), [], tensors)


def ggml_check(dir_):
    for fmt, tname in GGML.items():
        for n, k in GGML_SHAPES:
            name = "%s.%dx%d" % (fmt, n, k)
            raw = open(os.path.join(dir_, name + ".raw"), "rb").read()
            panels = open(os.path.join(dir_, name + ".panels"), "rb").read()
            want = gguf_file.dequant(tname, raw, n * k).reshape(n, k)
            got = decode(fmt, panels, n, k)
            at = first_diff_bits(got, want)
            result(at is None, "ggml-numpy/" + name,
                   "" if at is None else "element %d: panels decode to %r, ggml's dequantization %r"
                   % (at, got.ravel()[at], want.ravel()[at]))


def main():
    cmd, dir_ = sys.argv[1], sys.argv[2]
    {"cases": check_cases, "ggml-write": ggml_write, "ggml-check": ggml_check}[cmd](dir_)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

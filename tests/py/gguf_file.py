"""gguf_file.py -- a GGUF v3 writer and numpy quantizers/dequantizers for Kiln's tests.

Written here from the GGUF specification (ggml's docs/gguf.md) and ggml's block layouts,
independently of Kiln's reader (gen/frontend/gguf.c): the tests write files with this
module and compare what Kiln loads with what numpy computes here.

Dequantizers keep ggml's order of float32 operations (each product and difference
rounded to float32 separately), so their results are the exact values llama.cpp's
reference dequantize_row_* gives. Quantizers here only need to produce valid blocks.
"""
import struct

import numpy as np

GGUF_MAGIC = b"GGUF"
ALIGN = 32

# metadata value types
U8, I8, U16, I16, U32, I32, F32V, BOOL, STR, ARR, U64, I64, F64V = range(13)
# ggml tensor types: id, elements per block, bytes per block
TYPES = {"F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q8_0": (8, 32, 34),
         "Q4_K": (12, 256, 144), "Q6_K": (14, 256, 210), "BF16": (30, 1, 2), "I32": (26, 1, 4)}


def _str(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def _value(t, v):
    if t == STR:
        return _str(v)
    if t == ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(_value(et, x) for x in items)
    fmt = {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32V: "f", BOOL: "?", U64: "Q",
           I64: "q", F64V: "d"}[t]
    return struct.pack("<" + fmt, v)


def write(path, meta, tensors, align=ALIGN, version=3):
    """meta: [(key, type, value)]; tensors: [(name, ggml type name, numpy shape, raw bytes)]."""
    head = GGUF_MAGIC + struct.pack("<IQQ", version, len(tensors), len(meta))
    for k, t, v in meta:
        head += _str(k) + struct.pack("<I", t) + _value(t, v)
    offset, blobs = 0, []
    for name, tname, shape, raw in tensors:
        ne = list(reversed(shape))
        head += _str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        head += struct.pack("<IQ", TYPES[tname][0], offset)
        pad = (-len(raw)) % align
        blobs.append(raw + b"\0" * pad)
        offset += len(raw) + pad
    head += b"\0" * ((-len(head)) % align)
    with open(path, "wb") as f:
        f.write(head + b"".join(blobs))


# ---------------------------------------------------------------- quantizers (valid blocks)

def f16_bytes(x):
    return np.asarray(x, dtype="<f2").tobytes()


def q8_0(x):
    b = x.reshape(-1, 32).astype(np.float32)
    out = bytearray()
    for blk in b:
        d = np.float32(np.abs(blk).max() / 127.0)
        q = np.zeros(32, np.int8) if d == 0 else np.clip(np.rint(blk / d), -127, 127).astype(np.int8)
        out += f16_bytes(d) + q.tobytes()
    return bytes(out)


def q4_0(x):
    b = x.reshape(-1, 32).astype(np.float32)
    out = bytearray()
    for blk in b:
        m = blk[np.argmax(np.abs(blk))]
        d = np.float32(m / -8.0)
        q = np.zeros(32, np.int64) if d == 0 else np.clip(np.rint(blk / d + 8), 0, 15).astype(np.int64)
        out += f16_bytes(d) + bytes(int(q[j]) | int(q[j + 16]) << 4 for j in range(16))
    return bytes(out)


def random_k_blocks(rng, tname, nblocks):
    """Random but valid K-quant super-blocks: random quants and scales, small finite f16 d/dmin."""
    size = TYPES[tname][2]
    raw = bytearray(rng.integers(0, 256, size=nblocks * size, dtype=np.uint8).tobytes())
    for i in range(nblocks):
        o = i * size
        if tname == "Q4_K":
            raw[o:o + 4] = f16_bytes([rng.uniform(1e-3, 2e-2), rng.uniform(1e-3, 2e-2)])
        else:
            raw[o + 208:o + 210] = f16_bytes(rng.uniform(1e-3, 2e-2))
    return bytes(raw)


# ---------------------------------------------------------------- dequantizers (ggml's order)

def _f16(raw, off):
    return np.frombuffer(raw, dtype="<f2", count=1, offset=off).astype(np.float32)[0]


def dequant(tname, raw, n):
    f = np.float32
    if tname == "F32":
        return np.frombuffer(raw, dtype="<f4", count=n).copy()
    if tname == "F16":
        return np.frombuffer(raw, dtype="<f2", count=n).astype(np.float32)
    if tname == "BF16":
        u = np.frombuffer(raw, dtype="<u2", count=n).astype(np.uint32) << 16
        return u.view(np.float32)
    _, blk, size = TYPES[tname]
    out = np.zeros(n, np.float32)
    for i in range(n // blk):
        b = raw[i * size:(i + 1) * size]
        y = out[i * blk:(i + 1) * blk]
        if tname == "Q8_0":
            d = _f16(b, 0)
            y[:] = np.frombuffer(b, np.int8, 32, 2).astype(np.float32) * d
        elif tname == "Q4_0":
            d = _f16(b, 0)
            qs = np.frombuffer(b, np.uint8, 16, 2).astype(np.int32)
            y[:16] = ((qs & 15) - 8).astype(np.float32) * d
            y[16:] = ((qs >> 4) - 8).astype(np.float32) * d
        elif tname == "Q4_K":
            d, dmin = _f16(b, 0), _f16(b, 2)
            sc = b[4:16]
            q = np.frombuffer(b, np.uint8, 128, 16).astype(np.int32)

            def scale_min(j):
                if j < 4:
                    return sc[j] & 63, sc[j + 4] & 63
                return (sc[j + 4] & 15) | ((sc[j - 4] >> 6) << 4), (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4)
            for s in range(4):
                s1, m1 = scale_min(2 * s)
                s2, m2 = scale_min(2 * s + 1)
                d1, mm1 = f(d * f(s1)), f(dmin * f(m1))
                d2, mm2 = f(d * f(s2)), f(dmin * f(m2))
                qq = q[32 * s:32 * s + 32]
                y[64 * s:64 * s + 32] = (d1 * (qq & 15).astype(np.float32)).astype(np.float32) - mm1
                y[64 * s + 32:64 * s + 64] = (d2 * (qq >> 4).astype(np.float32)).astype(np.float32) - mm2
        elif tname == "Q6_K":
            ql = np.frombuffer(b, np.uint8, 128, 0).astype(np.int32)
            qh = np.frombuffer(b, np.uint8, 64, 128).astype(np.int32)
            sc = np.frombuffer(b, np.int8, 16, 192).astype(np.float32)
            d = _f16(b, 208)
            for h in range(2):
                L, H, S = ql[64 * h:64 * h + 64], qh[32 * h:32 * h + 32], sc[8 * h:8 * h + 8]
                l = np.arange(32)
                isx = l // 16
                qs = [((L[l] & 15) | ((H >> 0 & 3) << 4)) - 32, ((L[l + 32] & 15) | ((H >> 2 & 3) << 4)) - 32,
                      ((L[l] >> 4) | ((H >> 4 & 3) << 4)) - 32, ((L[l + 32] >> 4) | ((H >> 6 & 3) << 4)) - 32]
                for k in range(4):
                    y[128 * h + 32 * k:128 * h + 32 * k + 32] = (d * S[isx + 2 * k]).astype(np.float32) * qs[k].astype(np.float32)
        else:
            raise ValueError(tname)
    return out

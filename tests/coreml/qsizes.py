"""qsizes.py — how many weight.bin bytes each stored-format weight of a package takes,
and which values the program decodes from them.

check(decoded, pkg, os_, prec, note) -> (problems, report): the bytes (below)
check_values(cdir, dump, prec) -> (problems, report): each weight's values as milrun
    computed them (its -V dump of compile-time constants: the constexpr op's result, or
    the plain const) against the C build's weights file decoded by numpy
    (tests/quant/ref.py, written from the layout spec): bit for bit in fp32 programs,
    equal to those values rounded to fp16 (nearest even) in fp16 programs, except i8
    and q6_k at iOS18, whose scales are not fp16s: their constexpr result is fp32, the
    C build's values bit for bit (docs/coreml.md).

For a package built from tests/quant/qmix.lua (weights w_F [70, 512] and v_F [40, 512], F
the stored format), the payload bytes of the blobs that every const named after a weight
(`w_q4_0`, `w_q4_0_q`, `w_q4_0_scale`, `w_q4_0_lut`, `w_f16_f16`...) points at must be
exactly what docs/coreml.md's table says the package holds for that format at that OS and
precision. A weight the build's note names as held uncompressed is a plain tensor: 4
bytes a value in fp32 programs (2 when fp16). The expected sizes are written from the
table here, not computed by the emitter's code.
"""
import json
import os
import re
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "quant"))
import ref  # noqa: E402

K = 512
ROWS = {"w": 70, "v": 40}


def blob_sizes(pkg):
    """{metadata offset: payload bytes} of weight.bin."""
    data = open(pkg + "/Data/com.apple.CoreML/weights/weight.bin", "rb").read()
    count = struct.unpack_from("<I", data, 0)[0]
    out, pos = {}, 64
    for _ in range(count):
        meta = (pos + 63) // 64 * 64
        size, off = struct.unpack_from("<QQ", data, meta + 8)
        out[meta] = size
        pos = off + size
    return out


def const_blobs(decoded):
    """{const op name: blob offset} from protoc --decode text of model.mlmodel."""
    out = {}
    for chunk in decoded.split("operations {")[1:]:
        if 'type: "const"' not in chunk.split("outputs {")[0]:
            continue
        name = re.search(r'outputs \{\s*name: "([^"]+)"', chunk)
        off = re.search(r"blobFileValue \{\s*fileName: \"[^\"]*\"\s*offset: (\d+)", chunk)
        if name and off:
            out[name.group(1)] = int(off.group(1))
    return out


def expected(fmt, n, os_, prec, plain):
    """Payload bytes the table promises for an n x 512 weight of format fmt."""
    nk = n * K
    half = prec == "fp16"
    s = 2 if half else 4                # scale / table entry bytes in the program's type
    if fmt == "f16":
        return 2 * nk
    if plain or os_ != "iOS18":
        return 2 * nk if half or not plain else 4 * nk
    return {
        "bf16": 2 * nk,                  # bf16 values that are all fp16 (else: plain, noted)
        "i8": nk + 4 * n,                # int8, one fp32 scale a row (f32 scales are not fp16)
        "q8_0": nk + s * nk // 32,       # int8, a scale per 32 (the f16 d)
        "q4_0": nk // 2 + s * nk // 32,  # int4 (q - 8), a scale per 32
        "q6_k": nk + 4 * nk // 16,       # int8 (q - 32), fp32 d * sc per 16
        "g4": nk // 2 + 16 * s * nk // 64,     # uint4, a table of 16 per 64
        "q4_k": nk // 2 + 16 * s * nk // 32,   # uint4, a table of 16 per 32
    }.get(fmt, -1)                       # g8 is always plain (and noted)


def check(decoded, pkg, os_, prec, note):
    consts, sizes = const_blobs(decoded), blob_sizes(pkg)
    noted = set(re.findall(r"\b[wv]_[a-z0-9_]+", note.split(": ", 2)[-1])) if "held uncompressed" in note else set()
    bad, report = [], []
    for fmt in ("f16", "bf16", "i8", "q8_0", "q4_0", "q4_k", "q6_k", "g8", "g4"):
        for p, n in ROWS.items():
            name = f"{p}_{fmt}"
            offs = {off for c, off in consts.items() if c == name or c.startswith(name + "_")}
            got = sum(sizes[o] for o in offs)
            want = expected(fmt, n, os_, prec, name in noted)
            if got != want:
                bad.append(f"{name}: {got} bytes in weight.bin, want {want}")
            if p == "w":
                report.append(f"{fmt} {8 * got / (n * K):.3g}")
    return bad, "bits/weight " + ", ".join(report)


FORMATS = ("f16", "bf16", "i8", "q8_0", "q4_0", "q4_k", "q6_k", "g8", "g4")


def c_values(cdir, name):
    """The values the C build computes with for weight name: its stored bytes decoded."""
    sig = json.load(open(os.path.join(cdir, "qmix.json")))
    payload = open(os.path.join(cdir, "qmix.weights"), "rb").read()[64:]
    rec = next(w for w in sig["weights"] if w["name"] == name)
    f = rec["format"]
    raw = payload[rec["offset"]:rec["offset"] + rec["bytes"]]
    return ref.decode(f["name"], raw, f["rows"], f["k"]).astype(np.float32).reshape(f["rows"], f["k"])


def check_values(cdir, dump, os_, prec):
    bad, n = [], 0
    for fmt in FORMATS:
        for p in ROWS:
            name = f"{p}_{fmt}"
            path = os.path.join(dump, name + ".npy")
            if not os.path.exists(path):
                bad.append(f"{name}: milrun computed no constant of that name")
                continue
            got = np.load(path).astype(np.float32)
            want = c_values(cdir, name)
            if prec == "fp16" and not (os_ == "iOS18" and fmt in ("i8", "q6_k")):
                want = want.astype(np.float16).astype(np.float32)
            if got.shape != want.shape or not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
                diff = int(np.sum(got.view(np.uint32) != want.view(np.uint32))) if got.shape == want.shape else -1
                bad.append(f"{name}: {diff} of {want.size} values differ from the C build's")
            n += want.size
    return bad, f"{n} weight values equal the C build's" + (
        " (rounded to fp16 but i8's and q6_k's)" if prec == "fp16" and os_ == "iOS18" else
        " rounded to fp16" if prec == "fp16" else ", bit for bit")

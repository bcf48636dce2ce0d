"""st_make.py DIR — writes safetensors test files for tests/t_safetensors.sh.

The format is written by hand (8-byte little-endian header length, JSON, data),
so the test does not depend on the safetensors library and can build files that
are wrong in exactly one way. For every case NAME it writes:
  DIR/NAME.safetensors   the file
  DIR/NAME.lua           a script loading it (and, for some, asking for a tensor)
  DIR/NAME.expect        the exact one-line error kiln must print
and for the valid file, DIR/valid.lua (outputs every loadable tensor) and
DIR/ref_<tensor>.npy, the f32 values numpy/torch compute independently.
"""
import json
import os
import struct
import sys

import numpy as np
import torch

OUT = sys.argv[1]


def header_bytes(header):
    """JSON header padded with spaces to a multiple of 8, as writers do."""
    h = json.dumps(header, separators=(",", ":")).encode()
    return h + b" " * (-len(h) % 8)


def write(name, raw_header, data):
    """raw_header: bytes of the JSON (unpadded, written as given)."""
    with open(os.path.join(OUT, name + ".safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(raw_header)) + raw_header + data)


def case(name, expect, lua=None, header=None, data=b"", raw=None, file_bytes=None):
    """One error case. expect is the message after "NAME.lua:LINE: error: "; the line is
    1 (the kiln.load call) unless lua has more lines."""
    path = os.path.join(OUT, name + ".safetensors")
    if file_bytes is not None:
        with open(path, "wb") as f:
            f.write(file_bytes)
    elif raw is not None:
        write(name, raw, data)
    else:
        write(name, header_bytes(header), data)
    lua = lua or 'kiln.load("%s.safetensors")\nkiln.output("y", kiln.input("x", {1}))\n' % name
    with open(os.path.join(OUT, name + ".lua"), "w") as f:
        f.write(lua)
    line = 1
    if "@LINE" in expect:
        line, expect = expect.split("@LINE ", 1)[1].split(" ", 1)
    with open(os.path.join(OUT, name + ".expect"), "w") as f:
        f.write("%s.lua:%s: error: %s\n" % (name, line, expect))


def f32_entry(shape, begin):
    n = int(np.prod(shape)) * 4
    return {"dtype": "F32", "shape": shape, "data_offsets": [begin, begin + n]}, begin + n


# ---- the valid file: F32, F16, BF16 (with subnormals, infinities, NaN), an I64, metadata ----

rng = np.random.default_rng(3)
a = rng.standard_normal((2, 3)).astype(np.float32)
a[0, 1] = -0.0
a[1, 0] = np.float32(1e-40)          # f32 subnormal
a[1, 2] = np.inf
h = np.array([0.0, -0.0, 1.0, -2.5, 65504.0, 2.0 ** -24, 2.0 ** -14, 3.0e-5, np.inf, -np.inf, np.nan, 0.1],
             dtype=np.float16)
h_bits = h.view(np.uint16).copy()
h_bits[10] = 0x7E01 | 0x8000            # a negative NaN with a payload
h = h_bits.view(np.float16)
b = torch.tensor([1.0, -3.140625, 1e-40, float("inf"), float("nan"), 3e38, -7.5e-39], dtype=torch.bfloat16)
b_bytes = b.view(torch.int16).numpy().astype("<i2").tobytes()
steps = np.array([100], dtype="<i8")

chunks = [("b", b_bytes), ("a", a.astype("<f4").tobytes()), ("steps", steps.tobytes()), ("h", h.astype("<f2").tobytes())]
offsets, pos = {}, 0
for name, raw in chunks:
    offsets[name] = [pos, pos + len(raw)]
    pos += len(raw)
hdr = {
    "__metadata__": {"format": "pt", "note": "\u00e9t\u00e9 \"quoted\""},
    "h": {"dtype": "F16", "shape": [3, 4], "data_offsets": offsets["h"]},
    "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": offsets["a"]},
    "b": {"dtype": "BF16", "shape": [7], "data_offsets": offsets["b"]},
    "steps": {"dtype": "I64", "shape": [1], "data_offsets": offsets["steps"]},
}
write("valid", header_bytes(hdr), b"".join(raw for _, raw in chunks))
np.save(os.path.join(OUT, "ref_a.npy"), a)
np.save(os.path.join(OUT, "ref_h.npy"), h.astype(np.float32).reshape(3, 4))
np.save(os.path.join(OUT, "ref_b.npy"), b.float().numpy())
with open(os.path.join(OUT, "valid.lua"), "w") as f:
    f.write('local names = kiln.load("valid.safetensors")\n'
            'assert(table.concat(names, ",") == "h,a,b,steps", table.concat(names, ","))\n'
            'kiln.output("a", kiln.param("a", {2, 3}))\n'
            'kiln.output("h", kiln.param("h", {3, 4}))\n'
            'kiln.output("b", kiln.param("b", {7}))\n')

# ---- error cases ----

good_hdr = {"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}
good_data = bytes(16)

case("short", "short.safetensors: header: the file has 5 bytes, fewer than the 8-byte header length",
     file_bytes=b"\x01\x02\x03\x04\x05")
hb = header_bytes(good_hdr)
case("hlen_big", "hlen_big.safetensors: header: header length 100000 exceeds the %d bytes after it "
     "(truncated, or not a safetensors file)" % (len(hb) + 16),
     file_bytes=struct.pack("<Q", 100000) + hb + good_data)
case("trunc_header", "trunc_header.safetensors: header: header length %d exceeds the 10 bytes after it "
     "(truncated, or not a safetensors file)" % len(hb),
     file_bytes=(struct.pack("<Q", len(hb)) + hb + good_data)[:18])
case("trunc_data", "trunc_data.safetensors: tensor 'w': data_offsets [0, 16] run past the data section (12 bytes)",
     file_bytes=(struct.pack("<Q", len(hb)) + hb + good_data)[:-4])
raw = b'{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},}'
case("json_comma", "json_comma.safetensors: header: bad JSON at byte %d: expected a string key" % (raw.index(b",}") + 1),
     raw=raw, data=bytes(4))
raw = b'{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}} x'
case("json_trailing", "json_trailing.safetensors: header: bad JSON at byte %d: trailing characters after the JSON object"
     % raw.index(b"x"), raw=raw, data=bytes(4))
raw = b'{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}'
case("json_unclosed", "json_unclosed.safetensors: header: bad JSON at byte %d: expected ',' or '}'" % len(raw),
     raw=raw, data=bytes(4))
raw = b'{"w\\x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
case("json_escape", "json_escape.safetensors: header: bad JSON at byte %d: bad escape in string" % (raw.index(b"x") + 1),
     raw=raw, data=bytes(4))
raw = b'{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}'
case("json_dupkey", "json_dupkey.safetensors: header: bad JSON at byte %d: duplicate key \"w\"" % (raw.index(b',"w":') + 4),
     raw=raw, data=bytes(8))
case("not_object", "not_object.safetensors: header: the JSON must be an object", raw=b"[1, 2]  ")
case("offsets_range", "offsets_range.safetensors: tensor 'w': data_offsets [0, 32] run past the data section (16 bytes)",
     header={"w": {"dtype": "F32", "shape": [2, 4], "data_offsets": [0, 32]}}, data=good_data)
case("offsets_order", "offsets_order.safetensors: tensor 'w': data_offsets [16, 0] end before they begin",
     header={"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [16, 0]}}, data=good_data)
case("size_mismatch", "size_mismatch.safetensors: tensor 'w': data_offsets [0, 12] hold 12 bytes; F32 [4] needs 16",
     header={"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 12]}}, data=bytes(12))
case("dtype_unknown", "dtype_unknown.safetensors: tensor 'w': unknown dtype 'F33' (Kiln reads F32, F16, BF16)",
     header={"w": {"dtype": "F33", "shape": [4], "data_offsets": [0, 16]}}, data=good_data)
case("overlap", "overlap.safetensors: tensor 'v': bytes [4, 12) overlap tensor 'u' [0, 8)",
     header={"u": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
             "v": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, data=bytes(12))
case("hole", "hole.safetensors: header: hole: bytes [4, 8) of the data section belong to no tensor",
     header={"u": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
             "v": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}}, data=bytes(12))
case("hole_end", "hole_end.safetensors: header: hole: bytes [4, 8) of the data section belong to no tensor",
     header={"u": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, data=bytes(8))
case("shape_bad", "shape_bad.safetensors: tensor 'w': shape entries must be non-negative integers",
     header={"w": {"dtype": "F32", "shape": [2, -2], "data_offsets": [0, 16]}}, data=good_data)
case("shape_float", "shape_float.safetensors: tensor 'w': shape entries must be non-negative integers",
     header={"w": {"dtype": "F32", "shape": [2.0, 2], "data_offsets": [0, 16]}}, data=good_data)
case("field_unknown", "field_unknown.safetensors: tensor 'w': unknown field \"offsets\"",
     header={"w": {"dtype": "F32", "shape": [4], "offsets": [0, 16]}}, data=good_data)
case("field_missing", "field_missing.safetensors: tensor 'w': missing \"data_offsets\"",
     header={"w": {"dtype": "F32", "shape": [4]}}, data=good_data)
case("metadata_bad", "metadata_bad.safetensors: header: __metadata__ must map strings to strings",
     header={"__metadata__": {"epoch": 3}, "w": good_hdr["w"]}, data=good_data)
case("unsupported_used", "@LINE 2 param steps: dtype I64 in unsupported_used.safetensors is not supported "
     "(Kiln reads F32, F16 and BF16; from GGUF also Q8_0, Q4_0, Q4_K and Q6_K)",
     header={"steps": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}}, data=bytes(8),
     lua='kiln.load("unsupported_used.safetensors")\nlocal s = kiln.param("steps", {1})\n'
         'kiln.output("y", s * 1)\n')
case("shape_mismatch", "@LINE 3 param fc1.weight: shape [5, 7] in shape_mismatch.safetensors, script says [7, 5]",
     header={"fc1.weight": {"dtype": "F32", "shape": [5, 7], "data_offsets": [0, 140]}}, data=bytes(140),
     lua='kiln.load("shape_mismatch.safetensors")\nlocal x = kiln.input("x", {1, 7})\n'
         'local w = kiln.param("fc1.weight", {7, 5})\nkiln.output("y", x)\n')
case("missing", "missing.safetensors: cannot open: No such file or directory", file_bytes=b"")
os.remove(os.path.join(OUT, "missing.safetensors"))

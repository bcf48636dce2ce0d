"""cache.py — where the peer benchmark keeps what it builds, and the file formats it uses.

Everything lives under <repo>/.cache/bench/ (git-ignored, never committed; delete it to
start over), or under $KILN_BENCH_CACHE when that is set (tests/t_bench.sh):
  weights/<set>.safetensors   a twin's state_dict, for Kiln (models/*.lua load it)
  onnx/<workload>.onnx        the twin exported for ONNX Runtime (opset 17, static shapes)
  data/<workload>/            spec.json; input_<name>.bin (raw little-endian); reference.bin
                              (PyTorch's output); blas.txt + blas_w.bin for OpenBLAS
  kiln/<workload>/            `kiln build` output and the Kiln workers built from it
  node/                       the npm install of onnxruntime-node
  bin/                        the OpenBLAS worker and bench/fma_peak.c (-march=native)
  out/<workload>/<peer>.bin   each peer's output, compared with reference.bin
  log/<workload>/<peer>.log   each worker's stderr
"""
import hashlib
import json
import os
import struct
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CACHE = Path(os.environ.get("KILN_BENCH_CACHE") or ROOT / ".cache" / "bench").resolve()

# safetensors dtype names of the numpy dtypes written here
_ST_DTYPE = {np.dtype("<f4"): "F32", np.dtype("<i4"): "I32"}
_NP_DTYPE = {v: k for k, v in _ST_DTYPE.items()}


def data_dir(workload):
    return CACHE / "data" / workload


def write_safetensors(path, tensors):
    """Writes {name: numpy array} (f32 / i32) as a safetensors file, tensors in the given order."""
    header, offset, blobs = {}, 0, []
    for name, a in tensors.items():
        a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
        if a.dtype not in _ST_DTYPE:
            raise ValueError(f"{name}: dtype {a.dtype} is not written here")
        b = a.tobytes()
        header[name] = {"dtype": _ST_DTYPE[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)          # the data section starts 8-byte aligned
    tmp = Path(str(path) + ".tmp")
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def read_safetensors(path):
    """{name: numpy array} of a file written by write_safetensors."""
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        lo, hi = e["data_offsets"]
        out[name] = np.frombuffer(raw, dtype=_NP_DTYPE[e["dtype"]], count=(hi - lo) // 4,
                                  offset=8 + n + lo).reshape(e["shape"])
    return out


def read_raw(path, dtype, shape):
    return np.fromfile(path, dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape)


def spec(workload):
    """data/<workload>/spec.json: inputs, output, files (see prepare.py; paths relative to CACHE)."""
    with open(data_dir(workload) / "spec.json") as f:
        return json.load(f)


def sha256_of(paths, extra=""):
    """Hex digest over the bytes of paths (in order) and the string extra."""
    h = hashlib.sha256(extra.encode())
    for p in paths:
        h.update(str(p).encode())
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()

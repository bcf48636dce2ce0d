#!/usr/bin/python3
"""prepare.py — writes what every peer loads, from the PyTorch twins (workloads.py).

    /usr/bin/python3 bench/peerbench/prepare.py [WORKLOAD ...] [--no-onnx]

For each workload (all by default): its weights as safetensors (Kiln), the twin exported
to ONNX opset 17 (ONNX Runtime), its seeded inputs, PyTorch's output on them (the
reference every peer is checked against) and, for the single products, the operands as
raw files (OpenBLAS). Files go under .cache/bench/ (cache.py). A workload whose files
were written by the same sources and torch version is skipped, so a second run costs
about a second. --no-onnx skips the ONNX export (for the Kiln-only smoke test).
"""
import argparse
import json
import os
import sys
import time
import warnings

import numpy as np
import torch

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cache  # noqa: E402
import workloads as wl  # noqa: E402

OPSET = 17


def stamp_of(w, onnx):
    """What the files of w depend on: this directory's Python sources, torch, the options."""
    here = cache.HERE
    srcs = [here / "workloads.py", here / "prepare.py", here / "cache.py"]
    return cache.sha256_of(srcs, f"{w.name} {torch.__version__} onnx={onnx}")


def state_dict_arrays(model):
    """The twin's state_dict as float32 numpy arrays, without BatchNorm's unused int64 counter."""
    return {k: v.detach().contiguous().numpy().astype(np.float32)
            for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")}


def export_onnx(w, model, inputs, path):
    """Exports model to ONNX with static shapes and checks the file."""
    import onnx
    tmp = str(path) + ".tmp"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, tuple(inputs.values()), tmp, input_names=list(inputs), output_names=["y"],
                          opset_version=OPSET, do_constant_folding=True)
    onnx.checker.check_model(tmp)
    os.replace(tmp, path)


def prepare(w, onnx, done_sets):
    """Writes the files of workload w (see the module comment); returns what it did, for the log."""
    ddir = cache.data_dir(w.name)
    stamp = stamp_of(w, onnx)
    stamp_file = ddir / "stamp"
    weights_path = cache.CACHE / "weights" / f"{w.weights}.safetensors"
    if stamp_file.exists() and stamp_file.read_text() == stamp and weights_path.exists():
        return "up to date"
    t0 = time.time()
    ddir.mkdir(parents=True, exist_ok=True)
    model = wl.build(w)
    if w.weights not in done_sets:
        weights_path.parent.mkdir(parents=True, exist_ok=True)
        cache.write_safetensors(weights_path, state_dict_arrays(model))
        done_sets.add(w.weights)
    inputs = wl.make_inputs(w)
    with torch.inference_mode():
        ref = model(*inputs.values()).contiguous().numpy()
    spec = {"workload": w.name, "about": w.about, "flops": w.flops, "blas": w.blas,
            "weights": os.path.relpath(weights_path, cache.CACHE),
            "inputs": [], "output": {"dtype": "float32", "shape": list(ref.shape), "file": "reference.bin"}}
    for name, t in inputs.items():
        a = t.contiguous().numpy()
        a.tofile(ddir / f"input_{name}.bin")
        spec["inputs"].append({"name": name, "dtype": str(a.dtype), "shape": list(a.shape),
                               "file": f"input_{name}.bin"})
    ref.astype("<f4").tofile(ddir / "reference.bin")
    if w.blas:
        wmat = model.w.detach().contiguous().numpy()
        wmat.tofile(ddir / "blas_w.bin")
        n = wmat.shape[0]
        # kind, M, N, K of y = op(w or x): gemm x[M, K] @ w[K, N]; gemv on the n x n w
        dims = {"gemm": (n, n, n), "gemv_n": (n, 1, n), "gemv_t": (1, n, n)}[w.blas]
        (ddir / "blas.txt").write_text(f"{w.blas} {dims[0]} {dims[1]} {dims[2]}\n")
    if onnx:
        onnx_path = cache.CACHE / "onnx" / f"{w.name}.onnx"
        onnx_path.parent.mkdir(parents=True, exist_ok=True)
        export_onnx(w, model, {k: v for k, v in inputs.items()}, onnx_path)
        spec["onnx"] = os.path.relpath(onnx_path, cache.CACHE)
    (ddir / "spec.json").write_text(json.dumps(spec, indent=1) + "\n")
    stamp_file.write_text(stamp)
    return f"written in {time.time() - t0:.1f} s"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workloads", nargs="*", help="names from workloads.py (default: all)")
    ap.add_argument("--no-onnx", action="store_true", help="skip the ONNX export")
    a = ap.parse_args()
    unknown = [n for n in a.workloads if n not in wl.BY_NAME]
    if unknown:
        sys.exit(f"prepare: unknown workload {unknown[0]} (known: {' '.join(wl.BY_NAME)})")
    torch.set_num_threads(os.cpu_count() or 1)
    done_sets = set()
    for w in [wl.BY_NAME[n] for n in a.workloads] if a.workloads else wl.WORKLOADS:
        print(f"prepare: {w.name}: {prepare(w, not a.no_onnx, done_sets)}", flush=True)


if __name__ == "__main__":
    main()

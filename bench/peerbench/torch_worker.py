#!/usr/bin/python3
"""torch_worker.py — PyTorch eager (CPU) as a peer-benchmark worker (protocol: worker.h).

    /usr/bin/python3 bench/peerbench/torch_worker.py CACHE_DIR THREADS

`load W` builds W's twin (workloads.py) and fills it with the weights prepare.py wrote
(data/W/spec.json names the safetensors file), reads the inputs and runs it once under
torch.inference_mode(). Timing: time.perf_counter_ns() for wall-clock time and
time.process_time_ns() (CLOCK_PROCESS_CPUTIME_ID) for the process's CPU time.

Threads: torch.set_num_threads(THREADS) sizes PyTorch's OpenMP pool, but Debian's
PyTorch calls the system BLAS (OpenBLAS once libopenblas0 is installed) for matmuls,
whose own pool ignores that, so the worker also calls openblas_set_num_threads(THREADS)
(run.py sets OMP_NUM_THREADS and OPENBLAS_NUM_THREADS too).
"""
import ctypes
import json
import os
import sys
import time

import torch

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cache  # noqa: E402
import workloads as wl  # noqa: E402


def set_threads(n):
    """Sizes torch's and OpenBLAS's pools; returns OpenBLAS's config string or None."""
    torch.set_num_threads(n)
    torch.set_num_interop_threads(1)
    try:
        ob = ctypes.CDLL("libopenblas.so.0")
    except OSError:
        return None
    ob.openblas_set_num_threads(n)
    ob.openblas_get_config.restype = ctypes.c_char_p
    return ob.openblas_get_config().decode()


class Worker:
    def __init__(self, cache_dir):
        self.cache_dir = cache_dir
        self.model = None
        self.inputs = None
        self.out = None

    def load(self, name):
        if name not in wl.BY_NAME:
            raise ValueError(f"unknown workload {name}")
        t0 = time.perf_counter_ns()
        ddir = os.path.join(self.cache_dir, "data", name)
        with open(os.path.join(ddir, "spec.json")) as f:
            spec = json.load(f)
        model = wl.build(wl.BY_NAME[name])
        weights = cache.read_safetensors(os.path.join(self.cache_dir, spec["weights"]))
        sd = model.state_dict()
        missing = [k for k in sd if k not in weights and not k.endswith("num_batches_tracked")]
        if missing:
            raise ValueError(f"{spec['weights']} lacks {missing[0]}")
        model.load_state_dict({k: torch.from_numpy(weights[k].copy()) if k in weights else v for k, v in sd.items()})
        self.model = model.eval()
        self.inputs = [torch.from_numpy(cache.read_raw(os.path.join(ddir, i["file"]), i["dtype"], i["shape"]).copy())
                       for i in spec["inputs"]]
        t1 = time.perf_counter_ns()
        self.call()
        t2 = time.perf_counter_ns()
        return {"ok": True, "load_ms": (t1 - t0) / 1e6, "first_us": (t2 - t1) / 1e3}

    def call(self):
        self.out = self.model(*self.inputs)

    def save(self, path):
        self.out.contiguous().numpy().astype("<f4").tofile(path)
        return {"ok": True}

    def run(self, warm, k):
        for _ in range(warm):
            self.call()
        wall, cpu = [], []
        for _ in range(k):
            w0, c0 = time.perf_counter_ns(), time.process_time_ns()
            self.call()
            c1, w1 = time.process_time_ns(), time.perf_counter_ns()
            wall.append((w1 - w0) / 1e3)
            cpu.append((c1 - c0) / 1e3)
        return {"wall_us": wall, "cpu_us": cpu}

    def handle(self, words):
        """One command (split into words) -> its reply object."""
        cmd, args = words[0], words[1:]
        if cmd == "load" and len(args) == 1:
            self.model = None
            return self.load(args[0])
        if cmd in ("save", "run") and self.model is None:
            return {"error": f"{cmd}: nothing loaded"}
        if cmd == "save" and len(args) == 1:
            return self.save(args[0])
        if cmd == "run" and len(args) == 2:
            return self.run(int(args[0]), int(args[1]))
        return {"error": "bad command: expected load W | save PATH | run WARM K | quit"}


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: torch_worker.py CACHE_DIR THREADS")
    threads = int(sys.argv[2])
    blas = set_threads(threads)
    print(json.dumps({"ready": True, "runtime": "torch", "version": torch.__version__,
                      "threads": torch.get_num_threads(), "blas": blas}), flush=True)
    worker = Worker(sys.argv[1])
    with torch.inference_mode():
        for line in sys.stdin:
            words = line.split()
            if not words:
                continue
            if words[0] == "quit":
                print(json.dumps({"ok": True}), flush=True)
                break
            try:
                reply = worker.handle(words)
            except Exception as e:  # a failed command is reported; the worker keeps serving
                reply = {"error": f"{type(e).__name__}: {e}"}
            print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()

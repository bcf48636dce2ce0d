"""workers.py — setting up and talking to the peer benchmark's workers (one process each).

A peer is a runtime at a thread count: Kiln's generated C at one set of compiler flags,
ONNX Runtime, PyTorch or OpenBLAS. Each runs as its own long-lived process speaking the
line protocol of worker.h, so per-call costs (an interpreter, a binding) are paid the way
an application would pay them, and no peer's allocations or threads disturb another's.
This module builds what the workers need (Kiln's builds and workers, the OpenBLAS
worker, the npm install of onnxruntime-node) and wraps a worker process (Worker).
"""
import json
import os
import select
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from typing import List, Optional

import cache

HERE = cache.HERE
ROOT = cache.ROOT
CACHE = cache.CACHE
PYTHON = "/usr/bin/python3"

# Kiln's generated C at the flags docs/output.md documents for x86-64 (-O2 -march=x86-64-v3:
# AVX2 + FMA), and tuned for this CPU.
KILN_FLAVOURS = [("kiln -O2 v3", ["-O2", "-march=x86-64-v3"]), ("kiln -O3 native", ["-O3", "-march=native"])]


class SetupError(Exception):
    """A peer that cannot be set up on this machine (the message says why, on one line)."""


def run_quiet(cmd, what, env=None, cwd=None):
    """Runs cmd; raises SetupError with the last line of its output when it fails."""
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    if p.returncode != 0:
        lines = (p.stderr.strip() or p.stdout.strip() or f"exit status {p.returncode}").splitlines()
        raise SetupError(f"{what}: {lines[-1]}")
    return p.stdout


def compiler():
    return os.environ.get("CC", "cc")


# ---- Kiln ----

def kiln_build(kiln, workload, sub="kiln"):
    """`kiln build` of models/<workload>.lua into CACHE/<sub>/<workload>/; returns that directory
    (sub "kiln-base": the KILN_BASE binary's build, for a before/after in one run).

    Skipped when the kiln binary, the Lua sources and the weights file are those of the
    last build (a stamp file records their digest; the weights by size and mtime).
    """
    out = CACHE / sub / workload
    lua = HERE / "models" / f"{workload}.lua"
    spec = cache.spec(workload)
    weights = CACHE / spec["weights"]
    st = weights.stat()
    stamp = cache.sha256_of([kiln, lua, HERE / "models" / "nets.lua"], f"{st.st_size} {st.st_mtime_ns}")
    stamp_file = out / "build.stamp"
    if stamp_file.exists() and stamp_file.read_text() == stamp:
        return out
    # --unsafe-lua: these scripts are ours and read their weights from the bench cache,
    # outside their directory and through os.getenv, which the sandbox refuses.
    run_quiet([kiln, "build", "--unsafe-lua", str(lua), "-o", str(out), "--name", workload],
              f"kiln build {workload}")
    stamp_file.write_text(stamp)
    return out


def kiln_worker(build_dir, workload, label, flags):
    """Compiles kiln_worker.c with the generated model at flags; returns the executable.

    Skipped when the generated sources, the worker, the runtime, the flags and the
    compiler are those of the last compile.
    """
    exe = build_dir / ("worker" + "".join(f.replace("-", "_").replace("=", "_") for f in flags))
    srcs = [HERE / "kiln_worker.c", HERE / "worker.h", build_dir / f"{workload}.c", build_dir / f"{workload}.h",
            ROOT / "runtime" / "kiln_runtime.c", ROOT / "runtime" / "kiln_runtime.h", ROOT / "runtime" / "kiln_pool.c",
            ROOT / "runtime" / "kiln_pool.h"]
    stamp = cache.sha256_of(srcs, f"{compiler()} {' '.join(flags)}")
    stamp_file = exe.with_suffix(".stamp")
    if exe.exists() and stamp_file.exists() and stamp_file.read_text() == stamp:
        return exe
    cmd = [compiler(), "-std=c11", *flags, "-D_POSIX_C_SOURCE=200809L", "-I", str(build_dir),
           "-I", str(ROOT / "runtime"), f"-DKILN_MODEL={workload}", f"-DKILN_MODEL_UPPER={workload.upper()}",
           "-pthread", "-o", str(exe), str(HERE / "kiln_worker.c"), str(build_dir / f"{workload}.c"),
           str(ROOT / "runtime" / "kiln_runtime.c"), str(ROOT / "runtime" / "kiln_pool.c"), "-lm"]
    run_quiet(cmd, f"{label}: compile")
    stamp_file.write_text(stamp)
    return exe


# ---- OpenBLAS ----

def blas_worker():
    """Compiles blas_worker.c against Debian's OpenBLAS into CACHE/bin/; returns the executable."""
    try:
        flags = run_quiet(["pkg-config", "--cflags", "--libs", "openblas"], "pkg-config openblas").split()
    except (SetupError, FileNotFoundError) as e:
        raise SetupError(f"OpenBLAS not found ({e}); install libopenblas-dev (scripts/install-deps.sh --bench)")
    exe = CACHE / "bin" / "blas_worker"
    exe.parent.mkdir(parents=True, exist_ok=True)
    stamp = cache.sha256_of([HERE / "blas_worker.c", HERE / "worker.h"], f"{compiler()} {' '.join(flags)}")
    stamp_file = exe.with_suffix(".stamp")
    if exe.exists() and stamp_file.exists() and stamp_file.read_text() == stamp:
        return exe
    run_quiet([compiler(), "-std=c11", "-O2", "-D_POSIX_C_SOURCE=200809L", "-o", str(exe),
               str(HERE / "blas_worker.c"), *flags], "compile blas_worker.c")
    stamp_file.write_text(stamp)
    return exe


# ---- The machine's ceiling ----

def fma_peak():
    """One core's rate of fused multiply-adds and nothing else (bench/fma_peak.c, compiled
    into CACHE/bin/ at -O2 -march=native: AVX-512 or AVX2 + FMA); returns {"isa": its first
    line, "rounds": GFLOP/s of each round, "gflops": the best round}. Takes about a second."""
    src = HERE.parent / "fma_peak.c"
    exe = CACHE / "bin" / "fma_peak"
    exe.parent.mkdir(parents=True, exist_ok=True)
    stamp = cache.sha256_of([src], compiler())
    stamp_file = exe.with_suffix(".stamp")
    if not (exe.exists() and stamp_file.exists() and stamp_file.read_text() == stamp):
        run_quiet([compiler(), "-std=c11", "-O2", "-march=native", "-o", str(exe), str(src)], "compile fma_peak.c")
        stamp_file.write_text(stamp)
    lines = run_quiet([str(exe)], "fma_peak").splitlines()
    rounds = [float(ln.split()[0]) for ln in lines[1:] if ln.endswith("GFLOP/s")]
    if not rounds:
        raise SetupError(f"fma_peak: no GFLOP/s in its output {lines!r}")
    return {"isa": lines[0], "rounds": rounds, "gflops": max(rounds)}


# ---- ONNX Runtime ----

def node_modules():
    """Installs onnxruntime-node (package.json + package-lock.json of this directory) under
    CACHE/node with `npm ci`, unless that install is current; returns its node_modules.

    ONNXRUNTIME_NODE_INSTALL=skip: the package's install script would otherwise try to
    download extra (GPU) binaries; the CPU binaries ship inside the npm package.
    """
    if not shutil.which("node") or not shutil.which("npm"):
        raise SetupError("node/npm not found (scripts/install-deps.sh --bench installs them)")
    dest = CACHE / "node"
    dest.mkdir(parents=True, exist_ok=True)
    current = True
    for name in ("package.json", "package-lock.json"):
        src = (HERE / name).read_bytes()
        if not (dest / name).exists() or (dest / name).read_bytes() != src:
            (dest / name).write_bytes(src)
            current = False
    modules = dest / "node_modules"
    if not current or not (modules / "onnxruntime-node").exists():
        env = dict(os.environ, ONNXRUNTIME_NODE_INSTALL="skip")
        print("bench: npm ci (onnxruntime-node) into .cache/bench/node ...", flush=True)
        run_quiet(["npm", "ci", "--no-audit", "--no-fund"], "npm ci onnxruntime-node", env=env, cwd=dest)
    return modules


# ---- workers ----

class PeerError(Exception):
    """A worker that failed a command, died or did not answer in time."""


@dataclass
class Worker:
    """A running worker process: label (for tables), runtime, threads, and what it measured."""
    label: str
    runtime: str
    threads: int
    cmd: List[str]
    env: dict
    proc: Optional[subprocess.Popen] = None
    log: Optional[object] = None  # the worker's stderr, a file under CACHE/log
    ready: dict = field(default_factory=dict)
    one_us: float = 0.0          # the time of one call (the slowest seen so far): sizes turns, time-outs
    k: int = 1                   # calls per turn
    warm: int = 0                # untimed calls before each turn
    wall: List[float] = field(default_factory=list)
    cpu: List[float] = field(default_factory=list)
    round_wall: List[float] = field(default_factory=list)   # per-round medians
    round_cpu: List[float] = field(default_factory=list)

    def start(self, log_path, timeout):
        """Starts the process (stderr to log_path: a pipe nobody reads could fill and block
        it) and reads its ready line."""
        self.log = open(log_path, "w+")
        self.proc = subprocess.Popen(self.cmd, cwd=ROOT, env=self.env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True, bufsize=1)
        self.ready = self._read(timeout, "start")

    def _read(self, timeout, what):
        """The next reply line as an object; PeerError on an error reply, exit or time-out."""
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else None
        if line is None:
            raise PeerError(f"{self.label}: {what}: no answer in {timeout:.0f} s")
        if not line:
            self.proc.wait()
            self.log.seek(0)
            err = self.log.read().strip().splitlines()
            raise PeerError(f"{self.label}: {what}: worker exited ({err[-1] if err else self.proc.poll()})")
        reply = json.loads(line)
        if "error" in reply:
            raise PeerError(f"{self.label}: {what}: {reply['error']}")
        return reply

    def ask(self, command, timeout):
        """Sends one command line; returns the reply object (see _read)."""
        try:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise PeerError(f"{self.label}: {command.split()[0]}: worker exited")
        return self._read(timeout, command.split()[0])

    def close(self):
        """Asks the worker to quit; kills it (by its own handle) if it does not."""
        if self.proc is not None:
            if self.proc.poll() is None:
                try:
                    self.ask("quit", 10)
                    self.proc.wait(timeout=10)
                except (PeerError, OSError, ValueError, subprocess.TimeoutExpired):
                    self.proc.kill()
                    self.proc.wait()
            for f in (self.proc.stdin, self.proc.stdout):
                try:
                    f.close()
                except OSError:      # a pipe to a worker that died with unread input
                    pass
            self.proc = None
        if self.log is not None:
            self.log.close()
            self.log = None


def thread_env(threads):
    """The environment of a worker limited to `threads` threads by every pool that reads one."""
    n = str(threads)
    return dict(os.environ, OMP_NUM_THREADS=n, OPENBLAS_NUM_THREADS=n, MKL_NUM_THREADS=n)


def kiln_peer(label, exe, weights, threads=1):
    return Worker(label, "kiln", threads, [str(exe), str(CACHE), str(weights), str(threads)], dict(os.environ))


def torch_peer(threads):
    return Worker("torch", "torch", threads, [PYTHON, str(HERE / "torch_worker.py"), str(CACHE), str(threads)],
                  thread_env(threads))


def ort_peer(threads, modules):
    env = dict(thread_env(threads), NODE_PATH=str(modules))
    return Worker("ort", "ort", threads, ["node", str(HERE / "ort_worker.js"), str(CACHE), str(threads)], env)


def blas_peer(threads, exe):
    return Worker("openblas", "openblas", threads, [str(exe), str(CACHE), str(threads)], thread_env(threads))


def python_version():
    return sys.version.split()[0]

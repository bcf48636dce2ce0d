#!/usr/bin/python3
"""run.py — the peer benchmark: Kiln's generated C next to ONNX Runtime, PyTorch and OpenBLAS.

    /usr/bin/python3 bench/peerbench/run.py          (what `make bench` runs; docs/bench.md)

Environment: KILN (the kiln binary, default build/kiln), KILN_BASE (a second kiln binary,
say main's: its builds run as the peers "base -O2 v3" and "base -O3 native", and the report
adds Kiln ÷ base, a before/after under the same load), CC, BENCH_QUICK=1 (a smoke run:
a few small workloads, 3 short rounds), BENCH_WORKLOADS="mlp_b1 gemm1024" (a subset, see
workloads.py), BENCH_ROUNDS (rounds per workload, default 7), BENCH_NAME (the results
file's name, default peers-<date>-<time>).

For every workload (workloads.py), in one run:
  1. prepare.py writes the PyTorch twin's weights, ONNX export, inputs and reference
     output under .cache/bench/ (skipped when current);
  2. Kiln builds the workload's Lua script (models/<w>.lua) and the worker (kiln_worker.c)
     is compiled with it twice: at -O2, the flags docs/output.md documents, and at
     -O3 -march=native;
  3. one worker process per peer is started and kept alive: Kiln at both flag sets (one
     thread: the generated C has none), ONNX Runtime and PyTorch at 1 and 2 threads, and
     OpenBLAS at 1 and 2 threads where the workload is a single BLAS call;
  4. each peer runs the workload once and its output is compared with PyTorch's: a peer
     that disagrees by more than TOLERANCE is refused, not timed;
  5. rounds: in each, every peer takes one turn, in an order that rotates from round to
     round, so the drift of this shared machine hits all alike; a turn is WARM untimed
     calls and K timed ones (K chosen so a turn lasts about TURN_S), each call timed alone
     in wall-clock and process CPU time;
  6. per peer: the median over all its calls; per pair: the median over rounds of the
     ratio of the two peers' medians in that round (paired, so a slow round cancels).
Before the first workload and after the last, bench/fma_peak.c measures one core's rate of
fused multiply-adds alone; the report gives what the goal asks of each workload as a share
of it. Then it prints the tables and writes bench/results/<name>.json (bench/results/README.md).
Timings are reported, never judged: nothing here fails because something is slow.
"""
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cache  # noqa: E402
import report  # noqa: E402
import workers as wk  # noqa: E402
import workloads as wl  # noqa: E402

# A peer's output passes when max|out - ref| <= TOLERANCE * max|ref|, ref being PyTorch's
# output in float32. Every peer computes in float32 with its own summation order (blocked
# matmuls, FMA contraction, other exp/erf/tanh), which moves results by a few ulps per op:
# measured on every workload here, 1e-7 to 1e-5 of the output's scale. A wrong weight, a
# transposed operand or a wrong op moves them by O(1) of it. 1e-3 sits between the two.
TOLERANCE = 1e-3
GOAL = 0.77             # the goal for Kiln's time / ONNX Runtime's
THREADS = (1, 2)


class Config:
    """How long to measure (BENCH_QUICK=1 makes a smoke run of it)."""

    def __init__(self, env):
        quick = env.get("BENCH_QUICK", "") not in ("", "0")
        self.quick = quick
        self.rounds = int(env.get("BENCH_ROUNDS", "3" if quick else "7"))
        self.min_rounds = min(3, self.rounds)
        self.turn_s = 0.05 if quick else 0.25      # target length of a turn of a fast peer
        self.budget_s = 10 if quick else 30        # target time of a workload's rounds
        self.gap_s = 0.05 if quick else 0.1        # pause before a turn: spinning pools go idle
        self.max_k = 2000
        names = env.get("BENCH_WORKLOADS", "").split() or (wl.QUICK if quick else [w.name for w in wl.WORKLOADS])
        unknown = [n for n in names if n not in wl.BY_NAME]
        if unknown:
            sys.exit(f"bench: unknown workload {unknown[0]} (known: {' '.join(wl.BY_NAME)})")
        self.workloads = names


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


# ---- set-up ----

def setup(cfg, kiln):
    """Builds what every peer needs; returns {"kiln": {w: [(label, worker, weights)] or
    error}, "ort": node_modules or error, "blas": worker or error} (errors as strings)."""
    p = subprocess.run([wk.PYTHON, str(wk.HERE / "prepare.py"), *cfg.workloads])
    if p.returncode != 0:
        sys.exit("bench: prepare.py failed")
    out = {"kiln": {}}
    for name, fn in (("ort", wk.node_modules), ("blas", wk.blas_worker)):
        try:
            out[name] = fn()
        except wk.SetupError as e:
            out[name] = str(e)
            print(f"bench: {e}", flush=True)
    base = os.environ.get("KILN_BASE")
    for w in cfg.workloads:
        t0 = time.time()
        try:
            bdir = wk.kiln_build(kiln, w)
            out["kiln"][w] = [(label, wk.kiln_worker(bdir, w, label, flags), bdir / f"{w}.weights")
                              for label, flags in wk.KILN_FLAVOURS]
            if base:
                bdir = wk.kiln_build(base, w, "kiln-base")
                out["kiln"][w] += [(label.replace("kiln", "base", 1), wk.kiln_worker(bdir, w, label, flags),
                                    bdir / f"{w}.weights") for label, flags in wk.KILN_FLAVOURS]
        except wk.SetupError as e:
            out["kiln"][w] = str(e)
            print(f"bench: {e}", flush=True)
        if time.time() - t0 > 2:
            print(f"bench: built Kiln's {w} in {time.time() - t0:.0f} s", flush=True)
    return out


def make_peers(w, built):
    """The workers of workload w (not started), and {label@threads: error} of peers that
    could not be set up."""
    peers, missing = [], {}
    kiln = built["kiln"][w.name]
    if isinstance(kiln, str):
        missing["kiln@1"] = kiln
    else:
        peers += [wk.kiln_peer(label, exe, weights, t) for t in THREADS for label, exe, weights in kiln]
    for t in THREADS:
        if isinstance(built["ort"], str):
            missing[f"ort@{t}"] = built["ort"]
        else:
            peers.append(wk.ort_peer(t, built["ort"]))
        peers.append(wk.torch_peer(t))
        if w.blas:
            if isinstance(built["blas"], str):
                missing[f"openblas@{t}"] = built["blas"]
            else:
                peers.append(wk.blas_peer(t, built["blas"]))
    return peers, missing


# ---- one workload ----

def key(p):
    return f"{p.label}@{p.threads}"


def peer_file(w, p, kind):
    """CACHE/out/<w>/<peer>.bin (kind "out": its output) or CACHE/log/<w>/<peer>.log."""
    ext = "bin" if kind == "out" else "log"
    path = cache.CACHE / kind / w.name / f"{key(p).replace(' ', '_')}.{ext}"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def check_output(w, p):
    """Compares p's saved output with PyTorch's; returns (relative difference, problem or None)."""
    spec = cache.spec(w.name)
    ref = np.fromfile(cache.data_dir(w.name) / "reference.bin", dtype="<f4")
    out = np.fromfile(peer_file(w, p, "out"), dtype="<f4")
    if out.size != ref.size:
        return None, f"output has {out.size} values, PyTorch's {ref.size} ({spec['output']['shape']})"
    if not np.all(np.isfinite(out)):
        return None, "output has NaN or infinite values"
    scale = float(np.max(np.abs(ref))) or 1.0
    rel = float(np.max(np.abs(out - ref))) / scale
    if rel > TOLERANCE:
        return rel, f"output differs from PyTorch's: max|diff| = {rel:.2e} x max|ref| > {TOLERANCE:g}"
    return rel, None


def start_peer(w, p, cfg, status):
    """Starts p, loads w, checks its output, estimates its call time and sets its turn
    (k, warm); records a problem in status[key] and returns False if any step fails."""
    try:
        p.start(peer_file(w, p, "log"), 120)
        loaded = p.ask(f"load {w.name}", 1800)
        p.ask(f"save {peer_file(w, p, 'out')}", 120)
        rel, problem = check_output(w, p)
        status[key(p)] = {"rel_diff": rel, "load_ms": loaded["load_ms"], "first_us": loaded["first_us"],
                          "ready": p.ready}
        if problem:
            status[key(p)]["refused"] = problem
            return False
        p.one_us = loaded["first_us"]
        if p.one_us < 1e6:     # the first call may be cold: time three more
            p.one_us = statistics.median(p.ask("run 1 3", 600)["wall_us"])
    except wk.PeerError as e:
        status.setdefault(key(p), {})["failed"] = str(e)
        return False
    set_turn(p, p.one_us, cfg)
    return True


def set_turn(p, call_us, cfg):
    """Calls per turn (k) and untimed calls before it (warm), for calls of call_us."""
    p.k = max(1, min(cfg.max_k, round(cfg.turn_s * 1e6 / max(call_us, 1e-3))))
    p.warm = 1 if p.k > 1 else 0


def measure(peers, cfg, status):
    """The rounds; returns the number run. A peer failing mid-way is dropped (status says why).

    Up to cfg.rounds rounds, but after cfg.min_rounds no round starts that would end past
    cfg.budget_s. A peer's turn is resized after each turn from its latest median, so a
    peer whose calls turn out slower than its first ones (a thread pool on a busy
    machine) keeps its turns short.
    """
    t0 = time.time()
    for r in range(cfg.rounds):
        elapsed = time.time() - t0
        if r >= cfg.min_rounds and elapsed + elapsed / r > cfg.budget_s:
            return r
        order = peers[r % len(peers):] + peers[:r % len(peers)]
        for p in order:
            if "failed" in status[key(p)]:
                continue
            time.sleep(cfg.gap_s)
            timeout = max(120.0, 20 * (p.k + p.warm) * p.one_us / 1e6)
            try:
                t = p.ask(f"run {p.warm} {p.k}", timeout)
            except wk.PeerError as e:
                status[key(p)]["failed"] = str(e)
                continue
            p.wall += t["wall_us"]
            p.cpu += t["cpu_us"]
            p.round_wall.append(statistics.median(t["wall_us"]))
            p.round_cpu.append(statistics.median(t["cpu_us"]))
            p.one_us = max(p.one_us, p.round_wall[-1])
            set_turn(p, p.round_wall[-1], cfg)
    return cfg.rounds


def bench_workload(w, built, cfg):
    """Everything for one workload; returns its results record (see report.py)."""
    t0, load0 = time.time(), loadavg()
    peers, missing = make_peers(w, built)
    status = {k: {"failed": v} for k, v in missing.items()}
    live = []
    try:
        for p in peers:
            if start_peer(w, p, cfg, status):
                live.append(p)
            else:
                p.close()
        rounds = measure(live, cfg, status) if live else 0
    finally:
        for p in peers:
            p.close()
    rec = {"workload": w.name, "about": w.about, "flops": w.flops, "blas": w.blas, "rounds": rounds,
           "loadavg_start": load0, "loadavg_end": loadavg(), "seconds": round(time.time() - t0, 1), "peers": {}}
    for p in peers:
        s = status[key(p)]
        entry = {"label": p.label, "runtime": p.runtime, "threads": p.threads, **s}
        if "failed" not in s and "refused" not in s:
            entry.update(n=len(p.wall), k=p.k, warm=p.warm,
                         wall_us=statistics.median(p.wall), cpu_us=statistics.median(p.cpu),
                         wall_min_us=min(p.wall), round_wall_us=p.round_wall, round_cpu_us=p.round_cpu)
        rec["peers"][key(p)] = entry
    for k, v in missing.items():
        label, t = k.split("@")
        rec["peers"][k] = {"label": label, "runtime": label.split()[0], "threads": int(t), "failed": v}
    rec["ratios"] = report.ratios(rec)
    print(report.progress_line(rec), flush=True)
    return rec


# ---- the run ----

def versions():
    """What ran: Kiln's commit, the compiler, Python, Node, the OpenBLAS package (the
    runtimes' own versions come from their workers, report.fill_versions)."""
    def out(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, cwd=wk.ROOT).stdout.strip()
        except OSError:
            return ""
    dirty = out(["git", "status", "--porcelain", "--untracked-files=no"])
    cc = out([wk.compiler(), "--version"]).splitlines()
    return {"kiln_commit": out(["git", "rev-parse", "--short", "HEAD"]) + ("-dirty" if dirty else ""),
            "cc": cc[0] if cc else "",
            "python": wk.python_version(), "node": out(["node", "--version"]),
            "openblas_deb": out(["dpkg-query", "-W", "-f", "${Version}", "libopenblas0-pthread"])}


def machine():
    cpu = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {"cpu": cpu, "cpus": os.cpu_count(), "kernel": platform.release()}


def measure_peak():
    """fma_peak's measure of one core (workers.fma_peak), or {"error": why}: before and after
    the workloads, since this machine's speed drifts."""
    try:
        return wk.fma_peak()
    except wk.SetupError as e:
        print(f"bench: {e}", flush=True)
        return {"error": str(e)}


def main():
    cfg = Config(os.environ)
    kiln = os.environ.get("KILN", str(wk.ROOT / "build" / "kiln"))
    if not os.access(kiln, os.X_OK):
        sys.exit(f"bench: {kiln} not found (run make first)")
    started = datetime.datetime.now()
    res = {"name": os.environ.get("BENCH_NAME") or started.strftime("peers-%Y%m%d-%H%M%S"),
           "started": started.isoformat(timespec="seconds"), "quick": cfg.quick, "tolerance": TOLERANCE,
           "goal": GOAL, "machine": machine(), "loadavg_start": loadavg()}
    print(f"bench: peers: {' '.join(cfg.workloads)} (load average {res['loadavg_start'][0]:.2f})", flush=True)
    built = setup(cfg, kiln)
    res["versions"] = versions()
    res["fma_peak"] = {"start": measure_peak()}
    res["workloads"] = []
    for name in cfg.workloads:
        res["workloads"].append(bench_workload(wl.BY_NAME[name], built, cfg))
    res["fma_peak"]["end"] = measure_peak()
    res["loadavg_end"] = loadavg()
    res["seconds"] = round((datetime.datetime.now() - started).total_seconds())
    report.fill_versions(res)
    out = wk.ROOT / "bench" / "results" / f"{res['name']}.json"
    out.write_text(json.dumps(res, indent=1) + "\n")
    print(report.tables(res))
    print(f"bench: wrote {os.path.relpath(out, wk.ROOT)} ({res['seconds']} s)")


if __name__ == "__main__":
    main()

"""report.py — the peer benchmark's ratios and tables, from the results record run.py builds.

    /usr/bin/python3 bench/peerbench/report.py bench/results/<name>.json [--markdown]
prints a saved run's tables again (--markdown: as Markdown tables, as docs/bench.md quotes).

A workload's record (also what bench/results/<name>.json holds, one per workload) has
"peers": {"<label>@<threads>": entry}, where a timed entry has the medians wall_us and
cpu_us over all its calls and the per-round medians round_wall_us / round_cpu_us; an
entry that was not timed has "failed" or "refused" (why) instead.
"""
import statistics

KILN_LABELS = ("kiln -O2 v3", "kiln -O3 native")
OTHERS = ("ort", "torch", "openblas")
NAMES = {"ort": "ONNX Runtime", "torch": "PyTorch", "openblas": "OpenBLAS"}
BASE = {"kiln -O2 v3": "base -O2 v3", "kiln -O3 native": "base -O3 native"}   # KILN_BASE's builds


def timed(entry):
    return entry is not None and "wall_us" in entry


def paired(a, b, what):
    """Median over rounds of a's round median / b's (what: "wall" or "cpu")."""
    xs, ys = a[f"round_{what}_us"], b[f"round_{what}_us"]
    return statistics.median(x / y for x, y in zip(xs, ys))


def ratios(rec):
    """Kiln's time / each other peer's, per Kiln flavour and thread count of the other peer.

    Kiln on t threads against the peer on t threads. Returns [{"kiln", "peer", "threads",
    "wall", "cpu"}].
    """
    out = []
    for t in (1, 2):
        for kl in KILN_LABELS:
            a = rec["peers"].get(f"{kl}@{t}")
            for other in OTHERS + (BASE[kl],):
                b = rec["peers"].get(f"{other}@{t}")
                if timed(a) and timed(b):
                    out.append({"kiln": kl, "peer": other, "threads": t,
                                "wall": paired(a, b, "wall"), "cpu": paired(a, b, "cpu")})
    return out


def ratio(rec, kiln, peer, threads, what):
    for r in rec["ratios"]:
        if (r["kiln"], r["peer"], r["threads"]) == (kiln, peer, threads):
            return r[what]
    return None


def peak(res):
    """One core's FMA peak in GFLOP/s: the best round of bench/fma_peak.c before and after the
    workloads (run.py), or None when it was not measured (another ISA; an older results file)."""
    got = [m["gflops"] for m in (res.get("fma_peak") or {}).values() if m and "gflops" in m]
    return max(got) if got else None


def demand(rec, goal, core):
    """What the goal asks of a workload against the FMA peak: {"goal": (1t, 2t), "kiln":
    (1t, 2t)} as shares of the peak of as many cores as threads (1t: CPU time, 2t: wall, as
    the ratios): the GFLOP/s of a Kiln <= goal x ONNX Runtime's time, and Kiln -O2 v3's own.
    None without FLOPs or a peak; a share is None where its peer was not timed."""
    if not rec["flops"] or not core:
        return None

    def share(label, t, k=1.0):
        e = rec["peers"].get(f"{label}@{t}")
        if not e or not timed(e):
            return None
        return rec["flops"] / (k * e["cpu_us" if t == 1 else "wall_us"] * 1e3) / (t * core)
    return {"goal": (share("ort", 1, goal), share("ort", 2, goal)),
            "kiln": (share("kiln -O2 v3", 1), share("kiln -O2 v3", 2))}


def pct(x):
    return "-" if x is None else f"{100 * x:.0f} %"


def us(x):
    """A time in µs, to about 4 significant digits."""
    if x is None:
        return "-"
    if x < 10:
        return f"{x:.2f}"
    if x < 1000:
        return f"{x:.1f}"
    return f"{x:,.0f}"


def fr(x):
    return "-" if x is None else f"{x:.2f}"


def progress_line(rec):
    """One line while the benchmark runs: the wall medians of every timed peer."""
    cells = [f"{k} {us(e['wall_us'])}" for k, e in rec["peers"].items() if timed(e)]
    bad = [f"{k} {'refused' if 'refused' in e else 'failed'}" for k, e in rec["peers"].items() if not timed(e)]
    return f"[{rec['workload']}] {rec['seconds']:.0f} s, {rec['rounds']} rounds: " + ", ".join(cells + bad) + " (µs wall)"


def fill_versions(res):
    """Adds the runtimes' versions from their workers' ready lines to res["versions"]."""
    v = res["versions"]
    for rec in res["workloads"]:
        for e in rec["peers"].values():
            ready = e.get("ready") or {}
            if e["runtime"] == "ort" and ready.get("version"):
                v["onnxruntime_node"] = ready["version"]
            if e["runtime"] == "torch" and ready.get("version"):
                v["torch"] = ready["version"]
                v["torch_blas"] = ready.get("blas")
            if e["runtime"] == "openblas" and ready.get("version"):
                v["openblas"] = ready["version"]


def header(res):
    v, m = res["versions"], res["machine"]
    la0, la1 = res["loadavg_start"], res["loadavg_end"]
    lines = [
        f"Peer benchmark {res['name']}: {res['started'].replace('T', ' ')}, {res['seconds'] / 60:.0f} min"
        f"{' (BENCH_QUICK)' if res['quick'] else ''}",
        f"Machine: {m['cpu']}, {m['cpus']} CPUs, Linux {m['kernel']}; load average (1/5/15 min) "
        f"{la0[0]:.2f}/{la0[1]:.2f}/{la0[2]:.2f} at start, {la1[0]:.2f}/{la1[1]:.2f}/{la1[2]:.2f} at end",
        f"Kiln {v.get('kiln_commit', '?')} generated C ({v.get('cc', '?')}), at -O2 (docs/output.md) and at "
        f"-O3 -march=native; ONNX Runtime {v.get('onnxruntime_node', '-')} (npm onnxruntime-node, CPU);",
        f"PyTorch {v.get('torch', '-')} eager (its BLAS: {v.get('torch_blas') or 'not OpenBLAS'});",
        f"OpenBLAS peer: {v.get('openblas', 'not run')}.",
        "Median µs per call: wall-clock, and CPU time of the whole process (all its threads).",
        f"Every output checked against PyTorch's: max|diff| / max|PyTorch| <= {res['tolerance']:g}, else not timed.",
    ]
    for when, m in (res.get("fma_peak") or {}).items():
        m = m or {}
        lines.append(f"FMA peak at the {when} (bench/fma_peak.c, one core): " +
                     (f"{m['isa']}: " + ", ".join(f"{g:.0f}" for g in m["rounds"]) + " GFLOP/s" if "gflops" in m
                      else m.get("error", "not measured")))
    return lines


def workload_table(rec, goal, core=None):
    """The per-peer rows of one workload: 1-thread peers, then 2-thread ones."""
    la0, la1 = rec["loadavg_start"][0], rec["loadavg_end"][0]
    gf = f"; {rec['flops'] / 1e9:.3g} GFLOP" if rec["flops"] else ""
    lines = [f"{rec['workload']}: {rec['about']}{gf}; {rec['rounds']} rounds, {rec['seconds']:.0f} s, "
             f"load {la0:.2f} -> {la1:.2f}",
             f"  {'peer':<18}{'threads':>8}{'wall µs':>14}{'cpu µs':>14}{'calls':>7}{'GFLOP/s':>9}  vs PyTorch"]
    for t in (1, 2):
        rows = [(k, e) for k, e in rec["peers"].items() if e["threads"] == t]
        for k, e in rows:
            if not timed(e):
                why = e.get("refused") or e.get("failed")
                lines.append(f"  {e['label']:<18}{e['threads']:>8}  {'refused' if 'refused' in e else 'not run'}: {why}")
                continue
            g = f"{rec['flops'] / (e['wall_us'] * 1e3):.1f}" if rec["flops"] else "-"
            lines.append(f"  {e['label']:<18}{e['threads']:>8}{us(e['wall_us']):>14}{us(e['cpu_us']):>14}"
                         f"{e['n']:>7}{g:>9}  {e['rel_diff']:.1e}")
    lines.append("  " + ratio_line(rec, goal))
    d = demand(rec, goal, core)
    if d:
        lines.append(f"  Against the FMA peak ({core:.0f} GFLOP/s a core, bench/fma_peak.c): Kiln at {goal} x ORT's "
                     f"time would run at {pct(d['goal'][0])} of one core's peak at 1 thread and "
                     f"{pct(d['goal'][1])} of two cores' at 2; Kiln -O2 v3 runs at {pct(d['kiln'][0])} and "
                     f"{pct(d['kiln'][1])}")
    return lines


def ratio_line(rec, goal):
    """Kiln ÷ ONNX Runtime (and ÷ OpenBLAS) for one workload, at 1 thread (CPU) and 2 (wall)."""
    def pair(kl, other):
        return f"{fr(ratio(rec, kl, other, 1, 'cpu'))} / {fr(ratio(rec, kl, other, 2, 'wall'))}"
    text = f"Kiln ÷ ORT, 1t CPU / 2t wall: v3 {pair('kiln -O2 v3', 'ort')}, native {pair('kiln -O3 native', 'ort')}"
    if rec["blas"]:
        text += f"; ÷ OpenBLAS: v3 {pair('kiln -O2 v3', 'openblas')}, native {pair('kiln -O3 native', 'openblas')}"
    if any(r["peer"].startswith("base") for r in rec["ratios"]):
        text += (f"; ÷ base (KILN_BASE), 1t CPU / 2t wall: v3 {pair('kiln -O2 v3', BASE['kiln -O2 v3'])}, "
                 f"native {pair('kiln -O3 native', BASE['kiln -O3 native'])}")
    return text + f"  (goal: <= {goal} against ORT)"


SUMMARY_COLUMNS = [  # (title, kiln flavour, other peer, threads, what)
    ("v3/ORT 1t", "kiln -O2 v3", "ort", 1, "both"),
    ("native/ORT 1t", "kiln -O3 native", "ort", 1, "both"),
    ("v3/ORT 2t", "kiln -O2 v3", "ort", 2, "wall"),
    ("native/ORT 2t", "kiln -O3 native", "ort", 2, "wall"),
    ("native/BLAS 1t", "kiln -O3 native", "openblas", 1, "both"),
    ("native/BLAS 2t", "kiln -O3 native", "openblas", 2, "wall"),
]


def summary(res):
    """Kiln's time / ONNX Runtime's and / OpenBLAS's, one row per workload."""
    w = 16
    lines = [f"Kiln's time / its peer's (paired per round, median over rounds; below 1: Kiln is faster; "
             f"the goal: <= {res['goal']} against ORT).",
             "1t: CPU time (wall-clock in brackets); 2t: wall-clock, both on 2 threads.",
             f"{'workload':<18}" + "".join(f"{c[0]:>{w}}" for c in SUMMARY_COLUMNS)]
    for rec in res["workloads"]:
        cells = []
        for _, kl, other, t, what in SUMMARY_COLUMNS:
            if what == "both":
                c, wl = ratio(rec, kl, other, t, "cpu"), ratio(rec, kl, other, t, "wall")
                cells.append("-" if c is None else f"{c:.2f} ({wl:.2f})")
            else:
                cells.append(fr(ratio(rec, kl, other, t, "wall")))
        lines.append(f"{rec['workload']:<18}" + "".join(f"{c:>{w}}" for c in cells))
    return lines


DEMAND_NOTE = ("FLOPs as each workload counts them: a convolution's are its direct products, "
               "which Winograd's transforms reduce, so a share above 100 % is possible there; "
               "a causal attention's are its whole t x t scores.")


def demand_rows(res):
    """(workload, demand) for every workload with FLOPs, when the run measured a peak."""
    core = peak(res)
    rows = [(rec["workload"], demand(rec, res["goal"], core)) for rec in res["workloads"]]
    return core, [(n, d) for n, d in rows if d]


def demand_table(res):
    """Per workload with FLOPs: what the goal asks as a share of the FMA peak, and Kiln's."""
    core, rows = demand_rows(res)
    if not rows:
        return []
    cols = ("goal 1t", "goal 2t", "v3 1t", "v3 2t")
    lines = [f"Shares of the FMA peak ({core:.0f} GFLOP/s a core; 2t: of two cores): the goal's "
             f"(Kiln at {res['goal']} x ORT's time) and Kiln -O2 v3's. " + DEMAND_NOTE,
             f"{'workload':<18}" + "".join(f"{c:>10}" for c in cols)]
    for n, d in rows:
        lines.append(f"{n:<18}" + "".join(f"{pct(x):>10}" for x in d["goal"] + d["kiln"]))
    return lines


def tables(res):
    """The whole printed report."""
    lines = [""] + header(res) + [""]
    for rec in res["workloads"]:
        lines += workload_table(rec, res["goal"], peak(res)) + [""]
    lines += summary(res)
    demand_lines = demand_table(res)
    if demand_lines:
        lines += [""] + demand_lines
    return "\n".join(lines)


def markdown(res):
    """The same numbers as Markdown tables (docs/bench.md quotes one run this way)."""
    lines = ["| workload | peer | threads | wall µs | CPU µs | calls | GFLOP/s | vs PyTorch | load (1 min) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for rec in res["workloads"]:
        load = f"{rec['loadavg_start'][0]:.1f} → {rec['loadavg_end'][0]:.1f}"
        for t in (1, 2):
            for k, e in rec["peers"].items():
                if e["threads"] != t or (t == 2 and e["runtime"] == "kiln"):
                    continue
                if not timed(e):
                    lines.append(f"| {rec['workload']} | {e['label']} | {t} | "
                                 f"{'refused' if 'refused' in e else 'not run'} | | | | | {load} |")
                    continue
                g = f"{rec['flops'] / (e['wall_us'] * 1e3):.1f}" if rec["flops"] else "-"
                lines.append(f"| {rec['workload']} | {e['label']} | {t} | {us(e['wall_us'])} | {us(e['cpu_us'])} | "
                             f"{e['n']} | {g} | {e['rel_diff']:.0e} | {load} |")
    lines += ["", "| workload | " + " | ".join(c[0] for c in SUMMARY_COLUMNS) + " |",
              "|---|" + "---|" * len(SUMMARY_COLUMNS)]
    for rec in res["workloads"]:
        cells = []
        for _, kl, other, t, what in SUMMARY_COLUMNS:
            if what == "both":
                c, w = ratio(rec, kl, other, t, "cpu"), ratio(rec, kl, other, t, "wall")
                cells.append("-" if c is None else f"{c:.2f} ({w:.2f})")
            else:
                cells.append(fr(ratio(rec, kl, other, t, "wall")))
        lines.append(f"| {rec['workload']} | " + " | ".join(cells) + " |")
    core, rows = demand_rows(res)
    if rows:
        lines += ["", f"Shares of the FMA peak ({core:.0f} GFLOP/s a core; 2t: of two cores). " + DEMAND_NOTE, "",
                  "| workload | goal 1t | goal 2t | v3 1t | v3 2t |", "|---|---|---|---|---|"]
        lines += [f"| {n} | " + " | ".join(pct(x) for x in d["goal"] + d["kiln"]) + " |" for n, d in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    # report.py RESULTS.json [--markdown]: prints a saved run again.
    import json
    import sys
    with open(sys.argv[1]) as f:
        saved = json.load(f)
    print(markdown(saved) if "--markdown" in sys.argv[2:] else tables(saved))

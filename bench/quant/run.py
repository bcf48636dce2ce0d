"""run.py -- make bench's weight-format part (BENCH=quant): what issue 13's "Measured"
section asks, measured, never asserted. Writes bench/results/quant-<date>.json and .md.

1. Formats. For stories260K (the real model) and seeded100m (a seeded random Llama in the
   same layout: dim 768, hidden 2048, 12 layers, 12/4 heads, vocabulary 32000, 1024
   positions, tied classifier; 100.1M parameters; bench/llamacpp/stories_gguf.py), each
   format is one Kiln build of models/stories.lua resized to the model:
     f32 f16 q8_0 q4_0 q4_k q6_k  a GGUF file of that type (every matrix, the embedding and
                                  tied classifier included, whose rows are whole blocks;
                                  norms F32), loaded by Kiln (kiln.load names = "meta")
     i8 g8 g4                     `kiln build --quantize FORMAT` of the f32 GGUF, when
                                  `kiln --help` lists --quantize (else skipped, with a note)
   and for each: the file's bytes (the GGUF, or the weights file for --quantize) and the
   weights file Kiln ships; the logits of a teacher-forced run of POSITIONS tokens
   (stories260K: the f32 build's greedy text after BOS; seeded100m: seeded random ids)
   against the f32 build's: largest |difference|, mean KL(f32 || format) over the
   positions, and the share of positions whose arg-max agrees; decode tokens/s at 1 thread
   over those calls (bench/llamacpp/kiln_decode.c, -O2 -march=native) and the GB/s that
   means (Kiln's weights bytes x tokens/s: each decode reads every weight once).
   A format whose blocks fit no matrix of the model (K-quants need rows of 256:
   stories260K's are 64 and 172) is skipped with a note.
2. Bandwidth to compare with: bench/quant/membw.c (one thread summing 256 MiB of 32-bit
   integers, best of 10) measured now, and the matvec4096 rows (64 MiB of f32) of the
   latest bench/results/peers-*.json, if any (Kiln -O2 and OpenBLAS sgemv, 1 thread).
3. Builds: `kiln build models/llm.lua` of seeded Hugging Face checkpoints (f32 safetensors,
   written here once into .cache/bench/quant) of 125M (hidden 768, 12 layers, 12 heads,
   intermediate 2560, vocabulary 32000) and 1B (hidden 2048, 16 layers, 32/8 heads,
   intermediate 8192, vocabulary 32000) parameters: wall seconds, peak RSS of the kiln
   process (os.wait4's ru_maxrss), exit status and its first error line. The build runs
   under an address-space limit (BENCH_QUANT_MEM_GIB, default 12) so that a build needing
   several times the model's size stops with an error instead of exhausting the shared
   machine; such a build is reported as failed at that limit.

Environment: KILN, CC; BENCH_QUICK=1 (64 positions, stories260K and the 125M build only);
BENCH_QUANT_POSITIONS (default 256); BENCH_QUANT_MODELS ("stories260K seeded100m");
BENCH_QUANT_BUILDS ("125m 1b"); BENCH_QUANT_MEM_GIB.
"""
import datetime
import glob
import json
import os
import re
import resource
import struct
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "llamacpp"))
import stories_gguf as SG  # noqa: E402

CACHE = os.path.join(ROOT, ".cache", "bench", "quant")
KILN = os.environ.get("KILN", os.path.join(ROOT, "build", "kiln"))
CC = os.environ.get("CC", "cc")
QUICK = os.environ.get("BENCH_QUICK", "") not in ("", "0")
POSITIONS = int(os.environ.get("BENCH_QUANT_POSITIONS", "64" if QUICK else "256"))
MODELS = os.environ.get("BENCH_QUANT_MODELS", "stories260K" if QUICK else "stories260K seeded100m").split()
BUILDS = os.environ.get("BENCH_QUANT_BUILDS", "125m" if QUICK else "125m 1b").split()
MEM_GIB = float(os.environ.get("BENCH_QUANT_MEM_GIB", "12"))
GGUF_FORMATS = ["f32", "f16", "q8_0", "q4_0", "q4_k", "q6_k"]
KILN_FORMATS = ["i8", "g8", "g4"]
# name: hidden, intermediate, layers, heads, kv heads, vocabulary
BUILD_CONFIGS = {"125m": (768, 2560, 12, 12, 12, 32000), "1b": (2048, 8192, 16, 32, 8, 32000)}


def sh(cmd, cwd=None):
    """cmd's stdout; exits the bench when it fails."""
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("bench/quant: %s failed (exit %d): %s" % (" ".join(cmd[:4]), p.returncode, (p.stderr or p.stdout)[-800:]))
    return p.stdout


def timed(cmd, cwd=None, mem_gib=None):
    """Runs cmd: (exit status, wall seconds, peak RSS bytes of that process, stderr)."""
    def limit():
        if mem_gib:
            b = int(mem_gib * (1 << 30))
            resource.setrlimit(resource.RLIMIT_AS, (b, b))
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=limit)
    err = p.stderr.read().decode("utf-8", "replace")
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, wall, ru.ru_maxrss * 1024, err


def has_quantize():
    return "--quantize" in subprocess.run([KILN, "--help"], capture_output=True, text=True).stdout


def kiln_weights_bytes(out, name="m"):
    return json.load(open(os.path.join(out, name + ".json")))["weights_bytes"]


def build(model, fmt, w, d):
    """Builds model in fmt under d: {dir, file_bytes, weights, exe, build_s, rss} or {skip: why}."""
    os.makedirs(d, exist_ok=True)
    lua = os.path.join(d, "m.lua")
    if fmt in KILN_FORMATS:   # the f32 build's file, linked in (kiln.load reads beside the script)
        gguf = os.path.join(d, "model.gguf")
        if os.path.exists(gguf):
            os.remove(gguf)
        os.link(os.path.join(CACHE, "work", model + "_f32", "model.gguf"), gguf)
        extra = ["--quantize", fmt]
    else:
        gguf = os.path.join(d, "model.gguf")
        written = SG.write(gguf, model, fmt.upper(), quant_embedding=True, w=w)
        if fmt != "f32" and all(t == "F32" for t in written.values()):
            return {"skip": "no matrix of %s has rows of whole %s blocks" % (model, fmt)}
        extra = []
    SG.write_rope(os.path.join(d, "rope.gguf"), model, w)
    open(lua, "w").write(SG.lua(model, os.path.relpath(gguf, d), "rope.gguf"))
    rc, secs, rss, err = timed([KILN, "build", "m.lua", "-o", "out", *extra], cwd=d)
    if rc != 0:
        return {"skip": "kiln build failed: " + (err.strip().splitlines() or ["exit %d" % rc])[-1][:300]}
    out = os.path.join(d, "out")
    exe = os.path.join(d, "kiln_decode")
    rt = os.path.join(ROOT, "runtime")
    sh([CC, "-std=c11", "-O2", "-march=native", "-D_POSIX_C_SOURCE=200809L", "-I" + out, "-I" + rt,
        "-DKM=m", "-DKMU=M", '-DMODEL_HEADER="m.h"', "-o", exe, os.path.join(ROOT, "bench", "llamacpp", "kiln_decode.c"),
        os.path.join(out, "m.c"), os.path.join(rt, "kiln_runtime.c"), "-lm"])
    return {"file_bytes": os.path.getsize(gguf) if not extra else os.path.getsize(os.path.join(out, "m.weights")),
            "weights_bytes": kiln_weights_bytes(out), "weights": os.path.join(out, "m.weights"), "exe": exe,
            "build_s": secs, "build_rss": rss}


def forced(b, tokens_file, vocab):
    """Teacher-forced logits [POSITIONS, vocab] and decode tokens/s of build b."""
    out = os.path.join(os.path.dirname(b["exe"]), "logits.bin")
    text = sh([b["exe"], b["weights"], "1", str(POSITIONS), tokens_file, out])
    tps = float(re.search(r"^decode: ([\d.]+) tokens/s", text, re.M).group(1))
    return np.fromfile(out, dtype="<f4").reshape(POSITIONS, vocab), tps


def compare(ref, got):
    """max |diff|, mean KL(softmax(ref) || softmax(got)) in float64, top-1 agreement."""
    r, g = ref.astype(np.float64), got.astype(np.float64)
    lr = r - r.max(axis=1, keepdims=True)
    lr -= np.log(np.exp(lr).sum(axis=1, keepdims=True))
    lg = g - g.max(axis=1, keepdims=True)
    lg -= np.log(np.exp(lg).sum(axis=1, keepdims=True))
    kl = (np.exp(lr) * (lr - lg)).sum(axis=1)
    return float(np.abs(r - g).max()), float(kl.mean()), float((r.argmax(axis=1) == g.argmax(axis=1)).mean())


def formats_part(quantize_ok):
    rows, notes = [], []
    if not quantize_ok:
        notes.append("i8, g8, g4 skipped: `%s --help` does not list --quantize (yet)" % os.path.relpath(KILN, ROOT))
    for model in MODELS:
        vocab = SG.SHAPES[model][5]
        print("bench/quant: %s: weights ..." % model, flush=True)
        w = SG.weights(model)
        ref = None
        tokens_file = os.path.join(CACHE, model + "_tokens.bin")
        for fmt in GGUF_FORMATS + (KILN_FORMATS if quantize_ok else []):
            print("bench/quant: %s %s: build and %d decodes ..." % (model, fmt, POSITIONS), flush=True)
            b = build(model, fmt, w, os.path.join(CACHE, "work", "%s_%s" % (model, fmt)))
            row = {"model": model, "format": fmt}
            if "skip" in b:
                row["skipped"] = b["skip"]
                notes.append("%s %s skipped: %s" % (model, fmt, b["skip"]))
                rows.append(row)
                continue
            if fmt == "f32":   # the reference run also fixes the tokens
                if model == "stories260K":
                    text = sh([b["exe"], b["weights"], "1", str(POSITIONS - 1)])
                    ids = [1] + [int(t) for t in re.search(r"^ids: (.*)$", text, re.M).group(1).split()]
                else:
                    ids = np.random.default_rng(99).integers(3, vocab, POSITIONS).tolist()
                np.asarray(ids, dtype="<i4").tofile(tokens_file)
            logits, tps = forced(b, tokens_file, vocab)
            if fmt == "f32":
                ref = logits
            mx, kl, top1 = compare(ref, logits)
            for f in [b["weights"]] + ([] if fmt == "f32" else [os.path.join(os.path.dirname(b["exe"]), "model.gguf")]):
                os.remove(f)   # measured: keep .cache small (the f32 GGUF stays for --quantize)
            row.update({"file_bytes": b["file_bytes"], "kiln_weights_bytes": b["weights_bytes"],
                        "max_abs": mx, "mean_kl": kl, "top1": top1, "positions": POSITIONS,
                        "decode_tok_s_1t": tps, "achieved_gb_s": b["weights_bytes"] * tps / 1e9,
                        "build_s": b["build_s"], "build_peak_rss": b["build_rss"]})
            rows.append(row)
    return rows, notes


def bandwidth():
    """membw.c now, and the matvec4096 rows of the latest peers JSON."""
    exe = os.path.join(CACHE, "membw")
    sh([CC, "-std=c11", "-O3", "-march=native", "-o", exe, os.path.join(HERE, "membw.c")])
    best, median = map(float, re.search(r"read GB/s: ([\d.]+) ([\d.]+)", sh([exe, "256", "10"])).groups())
    bw = {"membw_best_gb_s": best, "membw_median_gb_s": median}
    peers = sorted(glob.glob(os.path.join(ROOT, "bench", "results", "peers-*.json")))
    if peers:
        d = json.load(open(peers[-1]))
        for wl in d.get("workloads", []):
            if wl.get("workload") == "matvec4096":
                for key, p in wl.get("peers", {}).items():
                    if p.get("threads") == 1 and p.get("wall_us"):
                        bw["matvec4096 %s (%s)" % (p.get("label", key), os.path.basename(peers[-1]))] = 4096 * 4096 * 4 / p["wall_us"] / 1e3
    return bw


def seeded_checkpoint(d, cfg):
    """A seeded Hugging Face Llama checkpoint (config.json, f32 model.safetensors written
    tensor by tensor, never the whole model in memory); skipped when present."""
    hidden, inter, layers, heads, kv, vocab = cfg
    st = os.path.join(d, "model.safetensors")
    if os.path.exists(st):
        return sum(np.prod(s) for _, s in _tensors(cfg))
    os.makedirs(d, exist_ok=True)
    json.dump(dict(model_type="llama", hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
                   num_attention_heads=heads, num_key_value_heads=kv, vocab_size=vocab, rms_norm_eps=1e-5,
                   rope_theta=10000.0, tie_word_embeddings=True, max_position_embeddings=1024, hidden_act="silu"),
              open(os.path.join(d, "config.json"), "w"), indent=1)
    ts = _tensors(cfg)
    header, off = {}, 0
    for name, shape in ts:
        n = int(np.prod(shape)) * 4
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((-len(h)) % 8)
    rng = np.random.default_rng(5)
    tmp = st + ".part"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for name, shape in ts:
            if name.endswith("norm.weight"):
                x = np.ones(shape, np.float32)
            else:
                x = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
            f.write(x.astype("<f4").tobytes())
    os.rename(tmp, st)
    return sum(np.prod(s) for _, s in ts)


def _tensors(cfg):
    hidden, inter, layers, heads, kv, vocab = cfg
    hd = hidden // heads
    ts = [("model.embed_tokens.weight", (vocab, hidden))]
    for i in range(layers):
        p = "model.layers.%d." % i
        ts += [(p + "input_layernorm.weight", (hidden,)), (p + "self_attn.q_proj.weight", (heads * hd, hidden)),
               (p + "self_attn.k_proj.weight", (kv * hd, hidden)), (p + "self_attn.v_proj.weight", (kv * hd, hidden)),
               (p + "self_attn.o_proj.weight", (hidden, heads * hd)), (p + "post_attention_layernorm.weight", (hidden,)),
               (p + "mlp.gate_proj.weight", (inter, hidden)), (p + "mlp.up_proj.weight", (inter, hidden)),
               (p + "mlp.down_proj.weight", (hidden, inter))]
    return ts + [("model.norm.weight", (hidden,))]


def builds_part():
    rows = []
    for name in BUILDS:
        d = os.path.join(CACHE, "ckpt_" + name)
        print("bench/quant: %s checkpoint ..." % name, flush=True)
        params = int(seeded_checkpoint(d, BUILD_CONFIGS[name]))
        print("bench/quant: kiln build of %s (%.0fM parameters) ..." % (name, params / 1e6), flush=True)
        out = os.path.join(CACHE, "work", "build_" + name)
        rc, secs, rss, err = timed([KILN, "build", os.path.join(ROOT, "models", "llm.lua"), "-o", out,
                                    "-D", "checkpoint=" + d, "-D", "max_context=1024"], mem_gib=MEM_GIB)
        row = {"model": name, "params": params, "safetensors_bytes": os.path.getsize(os.path.join(d, "model.safetensors")),
               "exit": rc, "build_s": secs, "peak_rss": rss, "mem_limit_gib": MEM_GIB}
        if rc != 0:
            row["error"] = (err.strip().splitlines() or [""])[-1][:300]
        else:
            row["weights_bytes"] = kiln_weights_bytes(out, "llm")
            os.remove(os.path.join(out, "llm.weights"))   # 4 GB for 1B: measured, not kept
        rows.append(row)
    return rows


def markdown(res):
    """The results as markdown tables (also printed)."""
    L = ["# bench/quant %s" % res["date"], "",
         "Load average at start %.2f, at end %.2f (2 cores shared; timings move with it). "
         "Positions: %d. Kiln commit %s." % (res["load_start"], res["load_end"], POSITIONS, res["commit"]), "",
         "| model | format | file bytes | Kiln weights bytes | max abs | mean KL | top-1 | decode tok/s (1t) | GB/s |",
         "|---|---|---|---|---|---|---|---|---|"]
    for r in res["formats"]:
        if "skipped" in r:
            L.append("| %s | %s | skipped: %s | | | | | | |" % (r["model"], r["format"], r["skipped"]))
            continue
        L.append("| %s | %s | %s | %s | %.3g | %.3g | %.1f %% | %.1f | %.2f |" % (
            r["model"], r["format"], "{:,}".format(r["file_bytes"]), "{:,}".format(r["kiln_weights_bytes"]),
            r["max_abs"], r["mean_kl"], 100 * r["top1"], r["decode_tok_s_1t"], r["achieved_gb_s"]))
    L += ["", "Bandwidth to compare with (GB/s, 1 thread): " +
          "; ".join("%s %.1f" % (k, v) for k, v in res["bandwidth"].items()), ""]
    L += ["| build | parameters | safetensors bytes | exit | seconds | peak RSS | note |", "|---|---|---|---|---|---|---|"]
    for r in res["builds"]:
        L.append("| %s | %.1fM | %s | %d | %.1f | %.2f GiB | %s |" % (
            r["model"], r["params"] / 1e6, "{:,}".format(r["safetensors_bytes"]), r["exit"], r["build_s"],
            r["peak_rss"] / (1 << 30), r.get("error", "weights %s bytes" % "{:,}".format(r.get("weights_bytes", 0)))))
    if res["notes"]:
        L += [""] + ["- " + n for n in res["notes"]]
    return "\n".join(L) + "\n"


def main():
    os.makedirs(os.path.join(CACHE, "work"), exist_ok=True)
    sh([sys.executable, os.path.join(ROOT, "bench", "llamacpp", "ggml_quant.py")])   # the quantizers' self-check first
    load_start = os.getloadavg()[0]
    quantize_ok = has_quantize()
    fmt_rows, notes = formats_part(quantize_ok)
    bw = bandwidth()
    build_rows = builds_part()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    res = {"date": datetime.date.today().isoformat(), "commit": commit, "load_start": load_start,
           "load_end": os.getloadavg()[0], "positions": POSITIONS, "formats": fmt_rows, "bandwidth": bw,
           "builds": build_rows, "notes": notes, "quantize_listed": quantize_ok}
    md = markdown(res)
    print(md)
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    base = os.path.join(ROOT, "bench", "results", "quant-%s" % res["date"])
    with open(base + ".json", "w") as f:
        json.dump(res, f, indent=1)
    open(base + ".md", "w").write(md)
    print("written:", os.path.relpath(base + ".json", ROOT), os.path.relpath(base + ".md", ROOT))


if __name__ == "__main__":
    main()

"""run_qmodels.py WORK -- weights kept in a stored format, end to end (tests/t_qkernels.sh).

1. tests/quant/qmix.lua built with the --quantize rules of qmix.args (every format, each as
   a Linear weight at 1 and 13 rows, as the W of W x and as an embedding table): the JSON
   names each weight's format and the weights file holds exactly that many bytes; numpy
   decodes each weight from the weights file (tests/quant/ref.py, written from the layout
   spec) and computes every output in float64; the generated C and `kiln run --quantize`
   (the interpreter on the values the build stores) must both agree with it -- embeddings
   exactly (a row is copied), products within the reduction tolerance of tests/py/kt.py
   ((2 sqrt K + 4) eps |x| |W|: the C's one fmaf chain per output, the interpreter's double
   sum rounded once).
1b. qmix.lua again with --activations ggml (pass_actq): numpy rounds the activations as
   ggml does (ggml_round, written from ggml's quantizers) and multiplies in float64; the C
   and `kiln run --activations ggml` must agree with it within the same tolerance; numpy's
   product of the unrounded activations must miss it, so the check sees whether the
   rounding happened.
2. A GGUF file whose matrices are F16, BF16, Q8_0, Q4_0, Q4_K and Q6_K blocks
   (tests/py/gguf_file.py) used as Linear weights and an embedding: the build keeps each
   in its file's format (the JSON says so, the weights file is as small as the GGUF's
   tensors plus panel padding) and the C agrees with numpy's decoding of the ggml blocks
   (gguf_file.dequant, ggml's reference order): a second, independent decoder.
3. Rules that reach nothing or cannot apply: a Linear weight whose rows are not a whole
   number of blocks stays f32, a weight also read another way (here added to itself)
   stays f32, `--quantize keep` keeps a GGUF's format, and bad --quantize values (and
   --activations values, or ggml activations for Core ML) give one-line errors with
   nothing written. --quantize with the Metal target builds (its
   kernels read the same panels: tests/t_metal.sh runs them).
"""
import json
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "py"))
sys.path.insert(0, HERE)
import gguf_file as G  # noqa: E402
import kt  # noqa: E402
import ref  # noqa: E402

S = "qkernels"
EPS = 1.1920929e-07


def build_and_run(work, tag, script, args, inputs, cwd=None):
    """Builds script (kiln build ARGS), compiles the C with the driver and runs it on inputs
    ({name: array}, in declaration order). Returns (json, weights bytes, {output: array}) or
    raises RuntimeError with a one-line reason."""
    out = os.path.join(work, tag)
    rc, o, e = kt.run([kt.KILN, "build", script, "-o", out] + args, cwd=cwd)
    if rc != 0:
        raise RuntimeError("build: " + kt.why(rc, e, o))
    model = os.path.splitext(os.path.basename(script))[0]
    sig = json.load(open(os.path.join(out, model + ".json")))
    exe = os.path.join(out, "drv")
    rc, o, e = kt.run(["cc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Wpedantic", "-Werror", "-D_POSIX_C_SOURCE=200809L",
                       "-I" + out, "-I" + os.path.join(ROOT, "runtime"), "-DKILN_MODEL=" + model,
                       "-DKILN_MODEL_UPPER=" + model.upper(), os.path.join(ROOT, "tests/runtime/driver.c"),
                       os.path.join(out, model + ".c"), os.path.join(ROOT, "runtime/kiln_runtime.c"), "-lm", "-o", exe])
    if rc != 0:
        raise RuntimeError("cc: " + kt.why(rc, e, o))
    files = []
    for name, a in inputs.items():
        p = os.path.join(out, "in_%s.bin" % name)
        a.tofile(p)
        files.append(p)
    res = os.path.join(out, "res")
    os.makedirs(res)
    rc, o, e = kt.run([exe, "-w", os.path.join(out, model + ".weights"), "-o", res] + files)
    if rc != 0:
        raise RuntimeError("run: " + kt.why(rc, e, o))
    got = {x["name"]: np.fromfile(os.path.join(res, x["name"] + ".bin"), dtype="<f4").reshape(x["shape"])
           for x in sig["outputs"]}
    blob = open(os.path.join(out, model + ".weights"), "rb").read()
    return sig, blob[64:], got   # the payload follows the 64-byte header


def weight(sig, payload, name):
    """(format name or 'f32', the weight's values as float32 [rows, k]) from the build's payload."""
    rec = next(w for w in sig["weights"] if w["name"] == name)
    raw = payload[rec["offset"]:rec["offset"] + rec["bytes"]]
    shape = rec["shape"]
    if "format" not in rec:
        return "f32", np.frombuffer(raw, "<f4").reshape(shape).copy()
    f = rec["format"]
    n, k = f["rows"], f["k"]
    want = ref.panel_bytes(f["name"], k) * ((n + 31) // 32)
    if rec["bytes"] != want:
        raise RuntimeError("%s: %d bytes stored, the %s layout takes %d" % (name, rec["bytes"], f["name"], want))
    return f["name"], ref.decode(f["name"], raw, n, k).astype(np.float32).reshape(n, k)


def close(got, want, absref, K):
    """max |got - want| / ((2 sqrt K + 4) eps absref), and whether it is <= 1."""
    bound = (2 * math.sqrt(K) + 4) * EPS * absref + 1e-30
    r = float(np.max(np.abs(got.astype(np.float64) - want) / bound))
    return r <= 1.0, r


def check_products(got, save, want, K, bad):
    """The C's and the interpreter's outputs o (want: {o: (float64 result, |x| |W| bound, ...)})
    within close()'s tolerance; appends a reason to bad for each that is not. The worst ratio."""
    worst = 0.0
    for o, (r, a, *_) in want.items():
        interp = np.load(os.path.join(save, o + ".npy"))
        for who, g in (("C", got[o]), ("interpreter", interp)):
            ok, ratio = close(g, r, a, K)
            worst = max(worst, ratio)
            if not ok:
                bad.append("%s %s err/tol %.3g" % (who, o, ratio))
    return worst


def qmix_both(work, tag, args, ins):
    """qmix.lua built with args and run as C and as `kiln run` on ins: (json, payload, C
    outputs, the directory of the interpreter's .npy outputs), or None once a FAIL line
    (tag/build or tag/interpreter) is reported."""
    try:
        sig, payload, got = build_and_run(work, tag, os.path.join(HERE, "qmix.lua"), args, ins)
    except RuntimeError as e:
        kt.report(False, "%s/%s/build" % (S, tag), str(e))
        return None
    npys = []
    for name, a in ins.items():
        p = os.path.join(work, "%s_%s.npy" % (tag, name))
        np.save(p, a)
        npys += ["--input", "%s=%s" % (name, p)]
    save = os.path.join(work, tag + "_interp")
    rc, o, e = kt.run([kt.KILN, "run", os.path.join(HERE, "qmix.lua"), "--save", save, "--limit", "1"] + args + npys)
    if rc != 0:
        kt.report(False, "%s/%s/interpreter" % (S, tag), kt.why(rc, e, o))
        return None
    return sig, payload, got, save


def qmix(work):
    rng = np.random.default_rng(5)
    K = 512
    ins = {"x1": rng.standard_normal((1, K)).astype("<f4"), "x13": rng.standard_normal((13, K)).astype("<f4"),
           "col": rng.standard_normal((K, 1)).astype("<f4"), "ids": np.array([0, 39, 5, 33, 17], "<i4")}
    both = qmix_both(work, "qmix", open(os.path.join(HERE, "qmix.args")).read().split(), ins)
    if not both:
        return
    sig, payload, got, save = both
    kt.report(True, S + "/qmix/build")
    x1, x13, col = (ins[k].astype(np.float64) for k in ("x1", "x13", "col"))
    for f in ["f16", "bf16", "i8", "q8_0", "q4_0", "q4_k", "q6_k", "g8", "g4"]:
        try:
            fw, w = weight(sig, payload, "w_" + f)
            fv, v = weight(sig, payload, "v_" + f)
            _, b = weight(sig, payload, "b_" + f)
        except RuntimeError as e:
            kt.report(False, "%s/qmix/%s" % (S, f), str(e))
            continue
        if (fw, fv) != (f, f):
            kt.report(False, "%s/qmix/%s" % (S, f), "stored as %s and %s, the rules ask %s" % (fw, fv, f))
            continue
        w64, v64 = w.astype(np.float64), v.astype(np.float64)
        want = {"lin1_" + f: (x1 @ w64.T + b, np.abs(x1) @ np.abs(w64.T) + np.abs(b)),
                "lin13_" + f: (np.maximum(x13 @ w64.T, 0), np.abs(x13) @ np.abs(w64.T)),
                "wx_" + f: (v64 @ col, np.abs(v64) @ np.abs(col))}
        bad = []
        worst = check_products(got, save, want, K, bad)
        # The one-row kernel (decode) and the many-row one (prefill) give the same bits: the
        # same fmaf chain per output (docs/quantization.md); lin13 is relu'd, so its positive part.
        row0, pre = got["row0_" + f][0], got["lin13_" + f][0]
        if not np.array_equal(row0[pre > 0], pre[pre > 0]) or not (pre > 0).any():
            bad.append("C row0_%s differs from lin13_%s's first row" % (f, f))
        emb = v[ins["ids"]]
        for who, g in (("C", got["emb_" + f]), ("interpreter", np.load(os.path.join(save, "emb_" + f + ".npy")))):
            if g.tobytes() != emb.tobytes():
                bad.append("%s emb_%s is not the decoded rows" % (who, f))
        kt.report(not bad, "%s/qmix/%s" % (S, f), "; ".join(bad) if bad else "err/tol %.2g" % worst)
    # The tied f32 table: packed (both uses read it by rows; panel p holds K values of rows
    # 32p..32p+31, value k of row i at k * 32 + i % 32), the C gather's and the interpreter's
    # rows the packed rows bit for bit, the product within tolerance of numpy's.
    rec = next(w for w in sig["weights"] if w["name"] == "tied")
    bad = []
    if "packed" not in rec or not rec["packed"]["transposed"]:
        bad.append("the tied table is not packed as B^T")
    else:
        n, k = rec["shape"]
        pan = np.frombuffer(payload[rec["offset"]:rec["offset"] + rec["bytes"]], "<f4").reshape(-1, k, 32)
        table = pan.transpose(0, 2, 1).reshape(-1, k)[:n]
        for who, g in (("C", got["tied_emb"]), ("interpreter", np.load(os.path.join(save, "tied_emb.npy")))):
            if g.tobytes() != table[ins["ids"]].tobytes():
                bad.append("%s tied_emb is not the packed rows" % who)
        t64 = table.astype(np.float64)
        ok, ratio = close(got["tied_lin"], x1 @ t64.T, np.abs(x1) @ np.abs(t64.T), K)
        if not ok:
            bad.append("C tied_lin err/tol %.3g" % ratio)
    kt.report(not bad, S + "/qmix/tied", "; ".join(bad) if bad else "panels and rows agree")


GGUF_TYPES = ["F16", "BF16", "Q8_0", "Q4_0", "Q4_K", "Q6_K"]


def gguf_tensor(rng, tname, rows, k):
    n = rows * k
    x = rng.standard_normal(n).astype(np.float32)
    if tname == "F16":
        return x.astype("<f2").tobytes()
    if tname == "BF16":
        return (x.view(np.uint32) >> 16).astype("<u2").tobytes()
    if tname == "Q8_0":
        return G.q8_0(x)
    if tname == "Q4_0":
        return G.q4_0(x)
    return G.random_k_blocks(rng, tname, n // 256)


def gguf_kept(work):
    """Each GGUF format kept as stored: JSON formats, payload size, C vs numpy's ggml decoding."""
    rng = np.random.default_rng(9)
    d = os.path.join(work, "gguf")
    os.makedirs(d)
    K, N, V = 256, 48, 40
    tensors, lua = [], ['local kiln = require "kiln"', 'kiln.load("w.gguf", {strict = true})',
                        'local x = kiln.input("x", {3, %d})' % K, 'local ids = kiln.input("ids", {4}, "i32")']
    dec = {}
    for t in GGUF_TYPES:
        for name, rows in (("lin_%s.weight" % t, N), ("emb_%s.weight" % t, V)):
            raw = gguf_tensor(rng, t, rows, K)
            tensors.append((name, t, (rows, K), raw))
            dec[name] = G.dequant(t, raw, rows * K).reshape(rows, K)
        lua.append('kiln.output("lin_%s", kiln.linear(x, kiln.param("lin_%s.weight", {%d, %d})))' % (t, t, N, K))
        lua.append('kiln.output("emb_%s", kiln.embedding(kiln.param("emb_%s.weight", {%d, %d}), ids))' % (t, t, V, K))
    G.write(os.path.join(d, "w.gguf"), [("general.architecture", G.STR, "test")], tensors)
    open(os.path.join(d, "g.lua"), "w").write("\n".join(lua) + "\n")
    ins = {"x": rng.standard_normal((3, K)).astype("<f4"), "ids": np.array([39, 0, 7, 32], "<i4")}
    try:
        sig, payload, got = build_and_run(d, "out", "g.lua", [], ins, cwd=d)
    except RuntimeError as e:
        kt.report(False, S + "/gguf/build", str(e))
        return
    fmts = {w["name"]: w.get("format", {}).get("name", "f32") for w in sig["weights"]}
    # Each tensor takes its GGUF bytes, rows padded to whole 32-row panels (48 and 40 -> 64).
    want = {n: len(raw) * 64 // shape[0] for n, _, shape, raw in tensors}
    stored = {w["name"]: w["bytes"] for w in sig["weights"]}
    kt.report(stored == want, S + "/gguf/size", "" if stored == want else "bytes %s, expected %s" % (stored, want))
    x = ins["x"].astype(np.float64)
    for t in GGUF_TYPES:
        bad = []
        for name in ("lin_%s.weight" % t, "emb_%s.weight" % t):
            if fmts.get(name) != t.lower():
                bad.append("%s stored as %s" % (name, fmts.get(name)))
        w = dec["lin_%s.weight" % t].astype(np.float64)
        ok, ratio = close(got["lin_" + t], x @ w.T, np.abs(x) @ np.abs(w.T), K)
        if not ok:
            bad.append("lin_%s err/tol %.3g" % (t, ratio))
        if got["emb_" + t].tobytes() != dec["emb_%s.weight" % t][ins["ids"]].astype("<f4").tobytes():
            bad.append("emb_%s differs from the ggml rows" % t)
        kt.report(not bad, "%s/gguf/%s" % (S, t), "; ".join(bad) if bad else "err/tol %.2g" % ratio)
    # --quantize keep and a rule without a pattern leave a quantized file's tensors alone.
    rc, o, e = kt.run([kt.KILN, "build", "g.lua", "-o", os.path.join(d, "keep"), "--quantize", "q8_0"], cwd=d)
    if rc != 0:
        kt.report(False, S + "/gguf/rule_skips_quantized", kt.why(rc, e, o))
    else:
        k = json.load(open(os.path.join(d, "keep", "g.json")))
        f2 = {w["name"]: w.get("format", {}).get("name", "f32") for w in k["weights"]}
        want = {n: ("q8_0" if t in ("F16", "BF16") else t.lower()) for n, t, _, _ in tensors}
        diff = [n for n in want if f2.get(n) != want[n]]
        kt.report(not diff, S + "/gguf/rule_skips_quantized",
                  "formats %s" % {n: f2.get(n) for n in diff} if diff else "")


def rules(work):
    d = os.path.join(work, "rules")
    os.makedirs(d)
    open(os.path.join(d, "r.lua"), "w").write("\n".join([
        'local kiln = require "kiln"',
        'local x = kiln.input("x", {2, 48})',
        'local a = kiln.param("odd", {16, 48})    -- 48 values a row: not whole q4_k blocks',
        'local s = kiln.param("shared", {16, 64})',
        'kiln.output("y", kiln.linear(x, a))',
        'kiln.output("z", kiln.linear(kiln.input("u", {2, 64}), s))',
        'kiln.output("s2", s + s)                 -- also read elementwise: stays f32',
    ]) + "\n")
    rc, o, e = kt.run([kt.KILN, "build", "r.lua", "-o", os.path.join(d, "o"), "--quantize", "q4_k",
                       "--quantize", "shared=q8_0"], cwd=d)
    if rc != 0:
        kt.report(False, S + "/rules/not_applicable", kt.why(rc, e, o))
    else:
        sig = json.load(open(os.path.join(d, "o", "r.json")))
        f = {w["name"]: w.get("format", {}).get("name", "f32") for w in sig["weights"]}
        ok = f == {"odd": "f32", "shared": "f32"}
        kt.report(ok, S + "/rules/not_applicable", "" if ok else "formats %s" % f)
        # A rule with a pattern says when it changes nothing: here the global q4_k, first,
        # takes "shared" (and is silent about what does not fit it: every matrix that fits
        # is what it asks for).
        notes = [x for x in e.splitlines() if x.startswith("kiln: note:")]
        want = ["kiln: note: --quantize shared=q8_0 reaches no weight (no name matches it, or an earlier rule takes them)"]
        kt.report(notes == want, S + "/rules/note_unfit", "" if notes == want else "notes %r" % notes)
    rc, o, e = kt.run([kt.KILN, "build", "r.lua", "-o", os.path.join(d, "o2"), "--quantize", "od=q8_0",
                       "--quantize", "s*=q4_0", "--quantize", "*=q4_k", "--quantize", "shared=f16"], cwd=d)
    notes = [x for x in e.splitlines() if x.startswith("kiln: note:")]
    want = ["kiln: note: --quantize od=q8_0 reaches no weight (no name matches it, or an earlier rule takes them)",
            "kiln: note: --quantize s*=q4_0: the weight it reaches stays f32: shared (read other than by rows)",
            "kiln: note: --quantize *=q4_k: the weight it reaches stays f32: odd (rows of 48 values, not whole q4_k "
            "blocks of 256)",
            "kiln: note: --quantize shared=f16 reaches no weight (no name matches it, or an earlier rule takes them)"]
    ok = rc == 0 and notes == want
    kt.report(ok, S + "/rules/note_no_match", "" if ok else "status %d, notes %r" % (rc, notes))
    for tag, args, want in (
            ("bad_format", ["--quantize", "q3_x"], "no format 'q3_x'"),
            ("empty_glob", ["--quantize", "=q8_0"], "pattern before '=' is empty"),
            ("bad_activations", ["--activations", "int8"], "--activations: f32 or ggml, not 'int8'"),
            ("ggml_coreml", ["--quantize", "q8_0", "--activations", "ggml", "--target", "coreml"],
             "--activations ggml: not for the Core ML target")):
        out = os.path.join(d, tag)
        rc, o, e = kt.run([kt.KILN, "build", "r.lua", "-o", out] + args, cwd=d)
        lines = [x for x in e.splitlines() if x.strip()]
        ok = rc != 0 and len(lines) == 1 and want in lines[0] and not os.path.exists(out)
        kt.report(ok, "%s/rules/%s" % (S, tag), "" if ok else "status %d, stderr %r, output %s" % (
            rc, e[-300:], "written" if os.path.exists(out) else "absent"))
    out = os.path.join(d, "metal")
    rc, o, e = kt.run([kt.KILN, "build", "r.lua", "-o", out, "--quantize", "shared=q8_0", "--quantize", "q4_0",
                       "--target", "metal"], cwd=d)
    ok = rc == 0 and os.path.exists(os.path.join(out, "r.metal"))
    kt.report(ok, S + "/rules/metal", "" if ok else kt.why(rc, e, o))


def lookup_only(work):
    """A model whose stored weights are only looked up (embeddings, no product): its C
    compiles with gcc and clang -Werror (no unused one-row kernels, its own includes) and
    gives the decoded rows."""
    src = os.path.join(work, "lookup.lua")
    with open(src, "w") as f:
        f.write('local kiln = require "kiln"\nkiln.seed(2)\nlocal ids = kiln.input("ids", {3}, "i32")\n'
                'for _, t in ipairs {"q8_0", "q4_0", "g4", "i8", "f16"} do\n'
                '  kiln.output("e_" .. t, kiln.embedding(kiln.param("t_" .. t, {40, 64}, {"normal", 0, 1}), ids))\nend\n')
    args = sum((["--quantize", "t_%s=%s" % (t, t)] for t in ("q8_0", "q4_0", "g4", "i8", "f16")), [])
    ids = np.array([3, 39, 0], "<i4")
    try:
        sig, payload, got = build_and_run(work, "lookup", src, args, {"ids": ids})
        bad = []
        for t in ("q8_0", "q4_0", "g4", "i8", "f16"):
            fmt, table = weight(sig, payload, "t_" + t)
            if fmt != t or got["e_" + t].tobytes() != table[ids].tobytes():
                bad.append("e_%s (stored as %s) is not the decoded rows" % (t, fmt))
        rc, o, e = kt.run(["clang", "-std=c11", "-O2", "-march=native", "-Wall", "-Wextra", "-Wpedantic", "-Werror", "-c",
                           os.path.join(work, "lookup", "lookup.c"), "-o", os.devnull])
        if rc != 0:
            bad.append("clang: " + kt.why(rc, e, o))
    except RuntimeError as e:
        bad = [str(e)]
    kt.report(not bad, S + "/lookup_only", "; ".join(bad))


def ggml_round(f, x):
    """x (float32 [rows, K]) with each row rounded as ggml rounds the activations of a product
    with weights in format f, written from ggml's quantize_row_q8_0 (AVX path: id = 127/amax,
    round half to even, scale stored as float16) and quantize_row_q8_K_ref (iscale = -127/max,
    the first value of largest magnitude, scale 1/iscale as float), in float32 arithmetic;
    formats ggml has no such rounding for come back unchanged."""
    f32 = np.float32
    x = x.astype(f32)
    if f == "f16":
        return x.astype(np.float16).astype(f32)
    if f in ("q8_0", "q4_0"):
        b = x.reshape(-1, 32)
        amax = np.abs(b).max(axis=1, keepdims=True)
        d = (amax / f32(127)).astype(np.float16).astype(f32)
        with np.errstate(divide="ignore"):
            iden = np.where(amax != 0, f32(127) / amax, f32(0)).astype(f32)
        return (np.rint(b * iden) * d).astype(f32).reshape(x.shape)
    if f in ("q4_k", "q6_k"):
        b = x.reshape(-1, 256)
        mx = np.take_along_axis(b, np.argmax(np.abs(b), axis=1)[:, None], axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            iscale = (f32(-127) / mx).astype(f32)
            q = np.minimum(np.rint(iscale * b), f32(127))
            y = (q * (f32(1) / iscale)).astype(f32)
        return np.where(mx == 0, f32(0), y).reshape(x.shape)
    return x


def qmix_ggml(work):
    """qmix.lua again with --activations ggml: each product's activations rounded as ggml's
    (ggml_round, per format), then multiplied by the stored weights; the C and the
    interpreter within the same reduction tolerance of numpy's float64 product of those.
    The rounding must matter: numpy's product of the unrounded activations has to miss the
    tolerance for the formats ggml rounds for, or this check could not tell the mode ran."""
    rng = np.random.default_rng(6)
    K = 512
    ins = {"x1": rng.standard_normal((1, K)).astype("<f4"), "x13": rng.standard_normal((13, K)).astype("<f4"),
           "col": rng.standard_normal((K, 1)).astype("<f4"), "ids": np.array([1, 2, 3, 4, 5], "<i4")}
    both = qmix_both(work, "ggml-acts", open(os.path.join(HERE, "qmix.args")).read().split() + ["--activations", "ggml"], ins)
    if not both:
        return
    sig, payload, got, save = both
    for f in ["f16", "bf16", "i8", "q8_0", "q4_0", "q4_k", "q6_k", "g8", "g4"]:
        bad, missed = [], 0.0
        _, w = weight(sig, payload, "w_" + f)
        _, v = weight(sig, payload, "v_" + f)
        _, b = weight(sig, payload, "b_" + f)
        w64, v64 = w.astype(np.float64), v.astype(np.float64)
        x1, x13 = (ggml_round(f, ins[k]).astype(np.float64) for k in ("x1", "x13"))
        col = ggml_round(f, ins["col"].T).T.astype(np.float64)
        want = {"lin1_" + f: (x1 @ w64.T + b, np.abs(x1) @ np.abs(w64.T) + np.abs(b), ins["x1"] @ w64.T + b),
                "lin13_" + f: (np.maximum(x13 @ w64.T, 0), np.abs(x13) @ np.abs(w64.T),
                               np.maximum(ins["x13"] @ w64.T, 0)),
                "wx_" + f: (v64 @ col, np.abs(v64) @ np.abs(col), v64 @ ins["col"])}
        worst = check_products(got, save, want, K, bad)
        for o, (r, a, plain) in want.items():
            missed = max(missed, close(plain, r, a, K)[1])
        rounds = f in ("f16", "q8_0", "q4_0", "q4_k", "q6_k")
        if rounds and missed <= 1:
            bad.append("the unrounded product is within tolerance too (%.3g): the check cannot see the mode" % missed)
        if not rounds and missed > 1:
            bad.append("%s has no ggml rounding, yet the unrounded product misses (%.3g)" % (f, missed))
        kt.report(not bad, "%s/ggml-acts/%s" % (S, f),
                  "; ".join(bad) if bad else "err/tol %.2g (unrounded: %.3g)" % (worst, missed))


def main():
    work = sys.argv[1]
    qmix(work)
    qmix_ggml(work)
    lookup_only(work)
    gguf_kept(work)
    rules(work)


if __name__ == "__main__":
    main()

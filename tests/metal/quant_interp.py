"""quant_interp.py DIR SAVE SCRIPT [kiln build args...] -- the Metal kernels of weights kept
in a stored format (tests/t_metal.sh) against the interpreter.

DIR holds a `kiln build SCRIPT --target metal` of tests/quant/qmix.lua (one pair of weights
per format, each read as a Linear weight at 1 and 13 rows, as the W of W x and as an
embedding table); SAVE the emulator harness's --save files: the random inputs (in<i>.bin)
and the Metal outputs of its last thread order (out<i>.bin), in declaration order.

1. The build really stored the weights: every w_F and v_F has format F in the JSON (so the
   emulated kernels read panels, not f32).
2. `kiln run SCRIPT` with the same --quantize rules on the same inputs (the interpreter on
   the exact values the build stores, summing in double): the Metal embeddings must be its
   rows bit for bit (a row is expanded, not computed), every product within the Metal
   target's tolerance |metal - ref| <= 2e-6 max(1, max|ref|) + 1e-5 |ref| (the harness's
   bound against C, docs/metal.md). One PASS/FAIL line per format.
3. With `--activations ggml` among the args (the checks are then metal_quant_ggml/*): the
   interpreter without it must miss the Metal products of the formats ggml rounds for
   (q8_0, q4_0, q4_k, q6_k, f16) by more than the bound, so the rounding was really run.
"""
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "py"))
import kt  # noqa: E402

S = "metal_quant"
DT = {"f32": "<f4", "i32": "<i4"}


def interpret(script, args, ins, out):
    """`kiln run script args` on the inputs ins, its outputs saved in out: (ok, why)."""
    os.makedirs(out, exist_ok=True)
    cmd = [kt.KILN, "run", script, "--save", out, "--limit", "1"] + args
    for name, a in ins:
        p = os.path.join(out, "in_%s.npy" % name)
        np.save(p, a)
        cmd += ["--input", "%s=%s" % (name, p)]
    rc, o, e = kt.run(cmd)
    return rc == 0, kt.why(rc, e, o)


def ratio(got, ref):
    """The largest |got - ref| over the Metal target's bound (2e-6 max(1, max|ref|) + 1e-5 |ref|)."""
    bound = 2e-6 * max(1.0, float(np.max(np.abs(ref)))) + 1e-5 * np.abs(ref)
    return float(np.max(np.abs(got.astype(np.float64) - ref) / bound))


def main():
    global S
    d, save, script, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    ggml = "ggml" in args and "--activations" in args
    if ggml:
        S = "metal_quant_ggml"
    model = os.path.splitext(os.path.basename(script))[0]
    sig = json.load(open(os.path.join(d, model + ".json")))
    fmts = {w["name"]: w.get("format", {}).get("name", "f32") for w in sig["weights"]}
    formats = sorted({n.split("_", 1)[1] for n in fmts if n.startswith("w_")})
    wrong = ["%s is %s" % (n, f) for n, f in sorted(fmts.items()) if n[:2] in ("w_", "v_") and f != n[2:]]
    kt.report(not wrong and len(formats) == 9, S + "/stored", "; ".join(wrong) or "%d formats" % len(formats))

    ins = []
    for i, x in enumerate(sig["inputs"]):
        a = np.fromfile(os.path.join(save, "in%d.bin" % i), dtype=DT[x["dtype"]]).reshape(x["shape"])
        ins.append((x["name"], a))
    interp = os.path.join(save, "interp")
    ok, why = interpret(script, args, ins, interp)
    if not ok:
        kt.report(False, S + "/interpreter", why)
        return
    metal = {x["name"]: np.fromfile(os.path.join(save, "out%d.bin" % i), dtype="<f4").reshape(x["shape"])
             for i, x in enumerate(sig["outputs"])}
    for f in formats:
        bad, worst = [], 0.0
        for o in ("lin1_", "lin13_", "wx_", "emb_"):
            name = o + f
            ref = np.load(os.path.join(interp, name + ".npy")).astype(np.float64)
            got = metal[name].astype(np.float64)
            if o == "emb_":
                if got.astype("<f4").tobytes() != ref.astype("<f4").tobytes():
                    bad.append("%s differs from the interpreter's rows" % name)
                continue
            r = ratio(got, ref)
            worst = max(worst, r)
            if r > 1:
                bad.append("%s |metal - interpreter| is %.3g of the bound" % (name, r))
        kt.report(not bad, "%s/interpreter_%s" % (S, f), "; ".join(bad) if bad else "diff/bound %.2g" % worst)
    if ggml:   # the control: without the rounding the interpreter must miss every rounded format
        plain = os.path.join(save, "interp_f32")
        i = args.index("--activations")
        ok, why = interpret(script, args[:i] + args[i + 2:], ins, plain)
        if not ok:
            kt.report(False, S + "/control", why)
            return
        least = min(max(ratio(metal[o + f], np.load(os.path.join(plain, o + f + ".npy")).astype(np.float64))
                        for o in ("lin1_", "lin13_", "wx_")) for f in ("q8_0", "q4_0", "q4_k", "q6_k", "f16"))
        kt.report(least > 1, S + "/control", "unrounded activations: diff/bound at least %.3g per format" % least)


if __name__ == "__main__":
    main()

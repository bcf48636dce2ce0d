"""run_metal_i64.py DIR [SDIR] -- i64 inputs on the Metal target, at and past the int32 limits.

DIR holds tests/metal/models/mtl_i64.lua built for Metal (mtl_i64.*, and the emulator
harness DIR/emu from tests/metal/mkemu.sh), as tests/t_metal.sh leaves it. The random
in-range run of every model (t_metal.sh) checks that the kernels read what the host
narrowed; this adds what random small ids cannot reach:
  - in range: every int32 limit (INT32_MIN, INT32_MAX, -1, 0, a product that wraps)
    through one call of the table on the emulator (harness --entry run, which makes
    kiln_metal_call's checks and narrowing), compared with the generated C (kt_driver)
    exactly and with numpy (the embedding rows from the weights file, int32 arithmetic
    wrapping as numpy's does): every output must be the same bits;
  - out of range: one value just above INT32_MAX, just below INT32_MIN, 2^62 and
    INT64_MIN, in either input, first or last element. The Metal call must return
    KILN_MTL_E_RANGE (harness exit 6) with its message naming the input, the element
    and the value and the device buffers, arena and outputs verified untouched; the C
    entry must return <M>_E_RANGE for the same inputs with nothing touched (driver
    exit 6): the same semantics on both targets.
SDIR holds tests/metal/i64/tokstate.lua built for Metal with its harness (an entry with
state taking i64 token ids): two calls chained through the state block, Metal against
the generated C entry after each (outputs within the harness's bound, the state block
the same bytes) and against numpy; then a call with an id past INT32_MAX, and one with
both a bad id and an out-of-range position: Metal returns E_RANGE naming the i64 input
(its check comes first, as in the C entry) with nothing touched, C returns E_RANGE.
One PASS/FAIL line per case.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kt  # noqa: E402
sys.path.insert(0, os.path.join(kt.ROOT, "bench"))
import peers  # noqa: E402

MODEL = "mtl_i64"
I32_MIN, I32_MAX = -2 ** 31, 2 ** 31 - 1


def reference(ins, weights):
    """numpy's outputs of mtl_i64.lua for in-range inputs (ids, k, x)."""
    ids, k, x = ins
    k32 = k.astype(np.int32)
    with np.errstate(over="ignore"):
        k2 = k32 * np.int32(3) - np.int32(1)   # int32 arithmetic wraps, as Kiln's
    return [weights["weight"][ids] + x, k2, k32.astype(np.float32) * np.float32(0.5)]


def metal_call(d, meta, ins, tag):
    """One call on the emulator: (exit status, stdout, outputs or None)."""
    paths = []
    for i, (io, a) in enumerate(zip(meta["inputs"], ins)):
        p = os.path.join(d, "%s_min%d.bin" % (tag, i))
        np.ascontiguousarray(a, dtype=kt.NP_DTYPE[io["dtype"]]).tofile(p)
        paths += ["--in", p]
    outs = [os.path.join(d, "%s_mout%d.bin" % (tag, i)) for i in range(len(meta["outputs"]))]
    rc, out, err = kt.run([os.path.join(d, "emu"), os.path.join(d, MODEL + ".weights"), "--entry", "run",
                           "--state-in", "-", *paths, *sum((["--out", p] for p in outs), [])])
    if rc != 0:
        return rc, (out + err).strip(), None
    return rc, out.strip(), [np.fromfile(p, dtype=kt.NP_DTYPE[io["dtype"]]).reshape(io["shape"])
                             for io, p in zip(meta["outputs"], outs)]


def same_bits(a, b):
    return a.shape == b.shape and a.tobytes() == b.tobytes()


def main():
    d = sys.argv[1]
    meta = kt.load_meta(d, MODEL)
    ok, why = kt.compile_driver(d, MODEL, meta)
    if not kt.report(ok, "metal_i64/c_driver", why):
        return
    _, weights = peers.load_kiln_weights(d, MODEL)
    rng = np.random.default_rng(5)
    ids = rng.integers(0, 10, (2, 3)).astype(np.int64)
    k = np.array([I32_MIN, I32_MAX, -1, 0, 715827883], np.int64)   # 715827883 * 3 wraps
    x = rng.uniform(-1, 1, (2, 3, 4)).astype(np.float32)
    ins = [ids, k, x]

    rc, out, got = metal_call(d, meta, ins, "lim")
    ok_c, why_c, cres = kt.run_driver(d, MODEL, meta, ins)
    ref = reference(ins, weights)
    if got is None or not ok_c:
        kt.report(False, "metal_i64/int32_limits", out if got is None else why_c)
    else:
        bad = [io["name"] for io, g, c, r in zip(meta["outputs"], got, cres, ref)
               if not (same_bits(g, c) and same_bits(g, r.astype(g.dtype)))]
        kt.report(not bad, "metal_i64/int32_limits",
                  "Metal, C and numpy the same bits for every output" if not bad else
                  "outputs differ from C or numpy: %s" % ", ".join(bad))

    cases = [("k", 0, 2 ** 31, "above"), ("k", 4, I32_MIN - 1, "below"), ("ids", 5, 2 ** 62, "far"),
             ("ids", 0, -2 ** 63, "int64_min")]
    for name, at, value, label in cases:
        bad_ins = [a.copy() for a in ins]
        slot = [io["name"] for io in meta["inputs"]].index(name)
        bad_ins[slot].reshape(-1)[at] = value
        rc, out, _ = metal_call(d, meta, bad_ins, "bad")
        want = "range: %s_run: i64 input %s[%d] = %d is outside the int32 range; nothing was touched" % (
            MODEL, name, at, value)
        for i, (io, a) in enumerate(zip(meta["inputs"], bad_ins)):
            a.astype(kt.NP_DTYPE[io["dtype"]]).tofile(os.path.join(d, "bad_cin%d.bin" % i))
        crc, cout, cerr = kt.run([os.path.join(d, "kt_run"), os.path.join(d, MODEL + ".weights")] +
                                 [os.path.join(d, "bad_cin%d.bin" % i) for i in range(len(ins))] +
                                 [os.path.join(d, "bad_cout%d.bin" % i) for i in range(len(meta["outputs"]))])
        problems = []
        if rc != 6 or out != want:
            problems.append("Metal: exit %d, %r (expected 6, %r)" % (rc, out, want))
        if crc != 6 or "nothing touched" not in cout:
            problems.append("C: exit %d, %r (expected 6: E_RANGE, nothing touched)" % (crc, (cout + cerr).strip()))
        kt.report(not problems, "metal_i64/out_of_range_%s_%s" % (name, label),
                  "; ".join(problems) if problems else "Metal E_RANGE naming %s[%d], C E_RANGE" % (name, at))


def state_call(d, e, ins, state_in, tag):
    """One Metal call of tokstate's `step` on the emulator: (exit status, stdout, outputs,
    state bytes after)."""
    paths = []
    for i, (io, a) in enumerate(zip(e["inputs"], ins)):
        p = os.path.join(d, "%s_in%d.bin" % (tag, i))
        np.ascontiguousarray(a, dtype=kt.NP_DTYPE[io["dtype"]]).tofile(p)
        paths += ["--in", p]
    sin, sout = os.path.join(d, tag + "_sin.bin"), os.path.join(d, tag + "_sout.bin")
    with open(sin, "wb") as f:
        f.write(state_in)
    outs = [os.path.join(d, "%s_out%d.bin" % (tag, i)) for i in range(len(e["outputs"]))]
    rc, out, err = kt.run([os.path.join(d, "emu"), os.path.join(d, "tokstate.weights"), "--entry", "step",
                           "--state-in", sin, "--state-out", sout, *paths, *sum((["--out", p] for p in outs), [])])
    if rc != 0:
        return rc, (out + err).strip(), None, None
    with open(sout, "rb") as f:
        st = f.read()
    return rc, out.strip(), [np.fromfile(p, dtype=kt.NP_DTYPE[io["dtype"]]).reshape(io["shape"])
                             for io, p in zip(e["outputs"], outs)], st


def close(got, ref):
    """The harness's bound: |metal - c| <= 2e-6 max(1, max|c|) + 1e-5 |c|."""
    scale = max(1.0, float(np.abs(ref).max()))
    return got.shape == ref.shape and bool(np.all(np.abs(got - ref) <= 2e-6 * scale + 1e-5 * np.abs(ref)))


def stateful(d):
    """The SDIR checks (see the file comment)."""
    meta = kt.load_meta(d, "tokstate")
    e = kt.entry_of(meta, "step")
    ok, why = kt.compile_driver(d, "tokstate", meta, exe="drv_step", entry=e)
    if not kt.report(ok, "metal_i64/state_c_driver", why):
        return
    _, weights = peers.load_kiln_weights(d, "tokstate")
    table = weights["emb.weight"]
    state = bytes(meta["state_bytes"])
    calls = [(np.array([3, 7], np.int64), 0), (np.array([9, 0], np.int64), 2)]
    for n, (tokens, pos) in enumerate(calls):
        ins = [tokens, np.array(pos, np.int32)]
        rc, out, got, mstate = state_call(d, e, ins, state, "s%d" % n)
        st, why, cres, cstate = kt.run_entry(d, "tokstate", e, ins, state, exe="drv_step")
        name = "metal_i64/state_call%d" % n
        if got is None or st != "ok":
            kt.report(False, name, out if got is None else why)
            return
        cache = np.frombuffer(mstate, np.float32, 24).reshape(6, 4)
        ref = table[tokens] @ cache.T.astype(np.float64)
        probs = []
        if not close(got[0], cres[0]):
            probs.append("scores differ from C")
        if mstate != cstate:
            probs.append("the state block differs from C's")
        if not np.array_equal(cache[pos:pos + 2], table[tokens]) or not close(got[0], ref.astype(np.float32)):
            probs.append("rows or scores differ from numpy")
        kt.report(not probs, name, "; ".join(probs) if probs else
                  "tokens %s at %d: scores and state as C and numpy" % (list(tokens), pos))
        state = mstate
    for label, tokens, pos, bad_at, bad in (("id", [2 ** 31, 1], 4, 0, 2 ** 31),
                                            ("id_and_pos", [1, -2 ** 31 - 1], 5, 1, -2 ** 31 - 1)):
        ins = [np.array(tokens, np.int64), np.array(pos, np.int32)]
        rc, out, _, _ = state_call(d, e, ins, state, "r" + label)
        st, why, _, _ = kt.run_entry(d, "tokstate", e, ins, state, exe="drv_step")
        want = "range: tokstate_step: i64 input tokens[%d] = %d is outside the int32 range; nothing was touched" % (
            bad_at, bad)
        probs = []
        if rc != 6 or out != want:
            probs.append("Metal: exit %d, %r (expected 6, %r)" % (rc, out, want))
        if st != "range":
            probs.append("C: %s %s (expected E_RANGE, nothing touched)" % (st, why))
        kt.report(not probs, "metal_i64/state_out_of_range_" + label,
                  "; ".join(probs) if probs else "Metal E_RANGE naming tokens[%d], C E_RANGE" % bad_at)


if __name__ == "__main__":
    main()
    if len(sys.argv) > 2:
        stateful(sys.argv[2])

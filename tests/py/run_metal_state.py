"""run_metal_state.py -- t_metal's checks of models with state or entry points.

t_metal.sh builds each such model with `kiln build --target metal` (twice, byte-identical)
and its emulator harness (tests/metal/mkemu.sh: lint, shim compile, threadgroup memory),
then runs this on them. The harness makes one call of one entry per run (`--entry`), on
raw input files and a state block file, under three thread orders that must give the same
bytes. Here the calls are chained: three copies of the state block travel through the same
sequence of calls, one through the Metal table on the emulator, one through the generated C
(tests/ops/kt_driver.c, one build per entry) and one through the reference interpreter
(`kiln run --entry --state-in --state-out`):

  metal_state/<m>/sequence  after every call, the Metal outputs and every state of the
                            Metal block match the C target's within the harness's
                            tolerance, |metal - c| <= 2e-6 max(1, max|c|) + 1e-5 |c| (the
                            emulator runs the same libm as C; only summation order differs),
                            and the interpreter's within 1e-5 max(1, max|ref|) (small models)
                            or 1e-4 (stories, as C vs the interpreter in t_state); integer
                            states and outputs exactly; the block's bytes outside its states
                            stay zero. The small models are also checked against the numpy
                            references of tests/py/run_state.py (1e-5).
  metal_state/<m>/portable  one call of the sequence re-run on Metal from the interpreter's
                            state block (written by `kiln run --state-out`, not by Metal)
                            gives the interpreter's outputs and state: the block is the
                            same layout on both sides
  metal_state/<stories>/valid_rows_only  the last decode again, with every cache row past
                            its position set to NaN in the state block it starts from: the
                            logits are the same bytes, so attention (kiln.sdpa) never lets
                            a row past the valid length into its arithmetic: its loop ends
                            at the current length (decode costs O(position), not O(512))
  metal_state/<m>/range     calls whose offset is out of range: the harness's call (the
                            runtime's order: kiln_mtl_check_inputs, then dispatches) returns
                            KILN_MTL_E_RANGE with a message naming the kiln.write's line, and
                            the state block, arena, device buffers and outputs are byte for
                            byte what they were (harness exit 6)

Sequences: models/llm.lua over tests/llm/run_llm.py's gemma3 checkpoint (model `gemma`:
sliding-window layers on a ring of 11 slots, window 4) a prefill of 8 at 0, one at 8 (the
ring wraps inside it), 4 decodes at 16..19, and decode at 24 and -1 out of range; model
`gemma_last` the same built with -D prefill_logits=last (its prefills return rows 7 and 2).
tests/golden/tinystate.lua and tests/state/*.lua run run_state.py's sequences
and out-of-range calls; models/stories.lua a prefill of 32 tokens at 0, 16 greedy decodes
(positions 32..47, each token the C target's arg-max of the previous logits), then a second
prefill at 48 over a cache in use, and decode at 512 and -3, prefill at 481 out of range;
`stories_q8` is the same with its matrix weights kept as q8_0 (t_metal builds it with
--quantize q8_0, written to its defines file, which the interpreter calls get too).

usage: /usr/bin/python3 tests/py/run_metal_state.py BUILDS MODEL...
  (BUILDS/<m>/ holds the build and BUILDS/<m>/emu, the model's harness)
"""
import os
import sys

import numpy as np

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kt  # noqa: E402
import run_state  # noqa: E402

ATOL, RTOL = 2e-6, 1e-5          # Metal vs C: the harness's bound (tests/metal/harness.c)
SMALL_TOL, MODEL_TOL = 1e-5, 1e-4  # vs the interpreter (and numpy): run_state.py's
SCRIPTS = {"tinystate": "tests/golden/tinystate.lua", "stories": "models/stories.lua", "llm": "models/llm.lua",
           "gemma": "models/llm.lua", "gemma_last": "models/llm.lua", "stories_q8": "models/stories.lua"}
STORIES = ("stories", "stories_q8")
STORIES_DECODES = 16


def script_of(m):
    return os.path.join(kt.ROOT, SCRIPTS.get(m, "tests/state/%s.lua" % m))


def near_c(got, ref):
    """Metal vs C: (ok, worst |d| / bound). Integers and bools exactly."""
    got, ref = np.asarray(got), np.asarray(ref)
    if got.dtype.kind != "f":
        return bool(np.array_equal(got, ref)), 0.0
    g, r = got.astype(np.float64).ravel(), ref.astype(np.float64).ravel()
    bound = ATOL * max(1.0, float(np.max(np.abs(r), initial=0.0))) + RTOL * np.abs(r)
    d = np.abs(g - r)
    return bool(np.all(d <= bound)), float(np.max(d / bound, initial=0.0))


def near_ref(got, ref, tol):
    """Metal vs a float64 reference or the interpreter: tol max(1, max|ref|)."""
    return run_state.close(got, ref, tol)


class Harness:
    """The model's emulator harness: one call per run, on files in the build directory."""

    def __init__(self, d, m, meta):
        self.d, self.m, self.meta = d, m, meta

    def call(self, entry, ins, state_in, tag):
        """Returns (status, reason or message, outputs, state bytes after): status "ok",
        "range" (exit 6: E_RANGE, nothing touched) or "error"."""
        e = kt.entry_of(self.meta, entry)
        args = [os.path.join(self.d, "emu"), os.path.join(self.d, self.m + ".weights"), "--entry", entry]
        sin, sout = "-", os.path.join(self.d, "%s_mstate_out.bin" % tag)
        if state_in is not None and self.meta["states"]:
            sin = os.path.join(self.d, "%s_mstate_in.bin" % tag)
            with open(sin, "wb") as f:
                f.write(state_in)
        args += ["--state-in", sin] + (["--state-out", sout] if self.meta["states"] else [])
        for i, io in enumerate(e["inputs"]):
            p = os.path.join(self.d, "%s_min%d.bin" % (tag, i))
            np.ascontiguousarray(ins[io["name"]], dtype=kt.NP_DTYPE[io["dtype"]]).tofile(p)
            args += ["--in", p]
        outs = [os.path.join(self.d, "%s_mout%d.bin" % (tag, i)) for i in range(len(e["outputs"]))]
        for p in outs:
            args += ["--out", p]
        rc, out, err = kt.run(args)
        if rc == 6:
            return "range", out.strip(), None, None
        if rc != 0:
            return "error", "Metal harness (%s): %s" % (entry, kt.why(rc, err, out)), None, None
        res = [np.fromfile(p, dtype=kt.NP_DTYPE[io["dtype"]]).reshape(io["shape"]) for io, p in zip(e["outputs"], outs)]
        if not self.meta["states"]:
            return "ok", out, res, b""
        with open(sout, "rb") as f:
            return "ok", out, res, f.read()


def c_call(d, m, meta, entry, ins, state_in, tag):
    e = kt.entry_of(meta, entry)
    st, why, out, state = kt.run_entry(d, m, e, [ins[io["name"]] for io in e["inputs"]], state_in, exe="drv_" + entry,
                                       tag=tag, has_state=bool(meta["states"]))
    if st != "ok":
        raise RuntimeError("C call %s (%s): %s" % (tag, entry, why or st))
    return out, state


def defines_of(d):
    """The -D arguments the model in d was built with (BUILDS/<m>/defines, written by
    t_metal for models/llm.lua over a generated checkpoint), or none."""
    p = os.path.join(d, "defines")
    if not os.path.exists(p):
        return []
    with open(p) as f:
        return f.read().split()


def i_call(script, d, meta, entry, ins, state_in, tag):
    e = kt.entry_of(meta, entry)
    ok, why, out, state = kt.kiln_run_entry(script, entry, list(ins.items()), os.path.join(d, "i" + tag), state_in,
                                            bool(meta["states"]), defines_of(d))
    if not ok:
        raise RuntimeError("interpreter call %s (%s): %s" % (tag, entry, why))
    return [out[io["name"]] for io in e["outputs"]], state


def compare_call(meta, k, entry, m_out, m_state, c_out, c_state, i_out, i_state, tol, probs, worst):
    """Appends to probs what differs after call k; worst[0] tracks Metal vs C (|d| / bound)."""
    e = kt.entry_of(meta, entry)
    for io, mo, co, io_ in zip(e["outputs"], m_out, c_out, i_out):
        ok, w = near_c(mo, co)
        worst[0] = max(worst[0], w)
        if not ok:
            probs.append("call %d (%s) output %s: Metal vs C |d|/bound %.3g" % (k, entry, io["name"], w))
        if not near_ref(mo, io_, tol):
            probs.append("call %d (%s) output %s: Metal vs interpreter beyond %g" % (k, entry, io["name"], tol))
    if not meta["states"]:
        return
    ms, cs, ist = (run_state.state_arrays(meta, b) for b in (m_state, c_state, i_state))
    for s in meta["states"]:
        ok, w = near_c(ms[s["name"]], cs[s["name"]])
        worst[0] = max(worst[0], w)
        if not ok:
            probs.append("call %d (%s): state %s, Metal vs C |d|/bound %.3g" % (k, entry, s["name"], w))
        if not near_ref(ms[s["name"]], ist[s["name"]], tol):
            probs.append("call %d (%s): state %s, Metal vs interpreter beyond %g" % (k, entry, s["name"], tol))
    if m_state != run_state.state_block(meta, ms):
        probs.append("call %d (%s): Metal wrote state bytes outside the states" % (k, entry))


def stories_calls(d, meta, rng, vocab=512):
    """The stories sequence (also models/llm.lua's, with its default tiny checkpoint's
    vocabulary) as a generator of (entry, inputs); sends back the C outputs so each
    decode's token is the C target's arg-max of the previous logits."""
    c_out = yield ("prefill", {"tokens": rng.integers(0, vocab, 32).astype(np.int32), "pos": run_state.i32(0)})
    token = int(np.argmax(c_out[0][-1]))
    for p in range(32, 32 + STORIES_DECODES):
        c_out = yield ("decode", {"token": np.array([token], np.int32), "pos": run_state.i32(p)})
        token = int(np.argmax(c_out[0][-1]))
    yield ("prefill", {"tokens": rng.integers(0, vocab, 32).astype(np.int32), "pos": run_state.i32(32 + STORIES_DECODES)})


def valid_rows_only(h, m, meta, last):
    """metal_state/<m>/valid_rows_only (m a build of stories.lua): see the file comment."""
    if last is None:
        return kt.report(False, "metal_state/%s/valid_rows_only" % m, "the sequence made no decode")
    entry, ins, before, out = last
    p = int(ins["pos"])
    st = run_state.state_arrays(meta, before)
    for s in meta["states"]:
        st[s["name"]][:, p + 1:, :] = np.nan           # [kv heads, positions, head dim]
    status, why, got, _ = h.call(entry, ins, run_state.state_block(meta, st), "nan")
    ok = status == "ok" and all(np.array_equal(g.view(np.uint32), o.view(np.uint32)) for g, o in zip(got, out))
    kt.report(ok, "metal_state/%s/valid_rows_only" % m, "decode at %d with cache rows %d..511 NaN: the same logits, "
              "bit for bit" % (p, p + 1) if ok else
              "the logits changed" if status == "ok" else "%s: %s" % (status, why))


def sequence(builds, m):
    """The three checks of one model (see the file comment)."""
    d = os.path.join(builds, m)
    script = script_of(m)
    meta = kt.load_meta(d, m)
    for e in meta["entries"]:
        ok, why = kt.compile_driver(d, m, meta, flags=run_state.WARN + ["-O1"], exe="drv_" + e["name"], entry=e)
        if not ok:
            for check in ("sequence", "portable", "range"):
                kt.report(False, "metal_state/%s/%s" % (m, check), why)
            return
    h = Harness(d, m, meta)
    if m in STORIES:
        calls, ref, bad, tol = stories_calls(d, meta, np.random.default_rng(5)), None, [
            ("decode", {"token": run_state.i32([7]), "pos": run_state.i32(512)}),
            ("prefill", {"tokens": np.zeros(32, np.int32), "pos": run_state.i32(481)}),
            ("decode", {"token": run_state.i32([7]), "pos": run_state.i32(-3)})], MODEL_TOL
    elif m == "llm":   # models/llm.lua on its default tiny-llm checkpoint (vocabulary 64, 256 positions)
        calls, ref, bad, tol = stories_calls(d, meta, np.random.default_rng(5), vocab=64), None, [
            ("decode", {"token": run_state.i32([7]), "pos": run_state.i32(256)}),
            ("prefill", {"tokens": np.zeros(32, np.int32), "pos": run_state.i32(225)})], MODEL_TOL
    elif m in ("gemma", "gemma_last"):  # models/llm.lua on run_llm.py's gemma3 checkpoint: window 4 in a ring of 11,
        r = np.random.default_rng(5)       # 24 positions; gemma_last: -D prefill_logits=last, rows 7 and 2
        last = [{"last": run_state.i32(7)}, {"last": run_state.i32(2)}] if m == "gemma_last" else [{}, {}]
        calls, ref, bad, tol = (c for c in [
            ("prefill", dict({"tokens": r.integers(0, 128, 8).astype(np.int32), "pos": run_state.i32(0)}, **last[0])),
            ("prefill", dict({"tokens": r.integers(0, 128, 8).astype(np.int32), "pos": run_state.i32(8)}, **last[1]))] +
            [("decode", {"token": r.integers(0, 128, 1).astype(np.int32), "pos": run_state.i32(p)}) for p in range(16, 20)]), \
            None, [("decode", {"token": run_state.i32([7]), "pos": run_state.i32(24)}),
                   ("decode", {"token": run_state.i32([7]), "pos": run_state.i32(-1)})], MODEL_TOL
    else:
        _, ref, seq, bad = run_state.cases()[m]
        calls, tol = (c for c in seq), SMALL_TOL   # a generator: send() is ignored
    w = None
    if ref:
        _, w = run_state.peers.load_kiln_weights(d, m)
    r_state = run_state.state_arrays(meta, bytes(meta["state_bytes"])) if meta["states"] else {}
    m_state = c_state = i_state = None
    probs, worst, done, portable, last_decode = [], [0.0], [], None, None
    c_out = None
    try:
        k = 0
        while True:
            try:
                entry, ins = calls.send(c_out) if k else next(calls)
            except StopIteration:
                break
            st, why, m_out, m_next = h.call(entry, ins, m_state, "k%d" % k)
            if st != "ok":
                raise RuntimeError("call %d (%s): %s" % (k, entry, why))
            c_out, c_next = c_call(d, m, meta, entry, ins, c_state, "k%d" % k)
            i_out, i_next = i_call(script, d, meta, entry, ins, i_state, "k%d" % k)
            compare_call(meta, k, entry, m_out, m_next, c_out, c_next, i_out, i_next, tol, probs, worst)
            if ref:
                want = ref(w, r_state, entry, ins)
                for io, mo in zip(kt.entry_of(meta, entry)["outputs"], m_out):
                    if not near_ref(mo, want[io["name"]], SMALL_TOL):
                        probs.append("call %d (%s) output %s: Metal vs numpy" % (k, entry, io["name"]))
            if portable is None and k >= 1 and meta["states"]:
                portable = (k, entry, ins, i_state, i_out, i_next)
            if entry == "decode":
                last_decode = (entry, ins, m_state, m_out)
            done.append(entry)
            m_state, c_state, i_state = m_next, c_next, i_next
            k += 1
    except RuntimeError as e:
        probs.append(str(e))
    kt.report(not probs, "metal_state/%s/sequence" % m, "; ".join(probs[:3]) if probs else
              "%d calls (%s): Metal = C (worst |d|/bound %.2g), = interpreter%s, outputs and state after every call" % (
                  len(done), ", ".join("%s %d" % (e, done.count(e)) for e in dict.fromkeys(done)), worst[0],
                  ", = numpy" if ref else ""))
    if not meta["states"]:
        kt.say("NOTE metal_state/%s: no state: nothing to carry between targets or to range-check" % m)
        return
    port_probs = []
    if portable is None:
        port_probs.append("the sequence did not reach a second call")
    else:
        k, entry, ins, before, i_out, i_next = portable
        st, why, m_out, m_next = h.call(entry, ins, before, "p")
        if st != "ok":
            port_probs.append(why)
        else:
            for io, mo, io_ in zip(kt.entry_of(meta, entry)["outputs"], m_out, i_out):
                if not near_ref(mo, io_, tol):
                    port_probs.append("output %s differs from the interpreter's" % io["name"])
            ms, ist = run_state.state_arrays(meta, m_next), run_state.state_arrays(meta, i_next)
            for s in meta["states"]:
                if not near_ref(ms[s["name"]], ist[s["name"]], tol):
                    port_probs.append("state %s differs from the interpreter's" % s["name"])
    kt.report(not port_probs, "metal_state/%s/portable" % m, "; ".join(port_probs[:3]) if port_probs else
              "call %d (%s) on Metal from the interpreter's state block = the interpreter's call" % (
                  portable[0], portable[1]))
    if m in STORIES:
        valid_rows_only(h, m, meta, last_decode)
    range_probs = []
    base = os.path.basename(script)
    for j, (entry, ins) in enumerate(bad):
        st, msg, _, _ = h.call(entry, ins, m_state, "r%d" % j)
        if st != "range" or "nothing was touched" not in msg or "%s:" % base not in msg:
            range_probs.append("%s at pos %d: %s %s" % (entry, int(ins["pos"]), st, msg[:160]))
    kt.report(not range_probs, "metal_state/%s/range" % m, "; ".join(range_probs[:3]) if range_probs else
              "%d out-of-range calls: KILN_MTL_E_RANGE before any dispatch, nothing touched, the message names %s's line" % (
                  len(bad), base))


def main():
    builds, models = sys.argv[1], sys.argv[2:]
    kt.pmap(lambda m: sequence(builds, m), models, jobs=2)


if __name__ == "__main__":
    main()

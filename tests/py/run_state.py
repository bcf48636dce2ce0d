"""run_state.py -- t_state: models with persistent state and several entry points.

Part 1, small models (tests/golden/tinystate.lua, tests/state/*.lua), each with a numpy
reference of every entry written here from the script's comments:
  state/<m>/sequence  a fixed sequence of calls from a fresh state, chaining the state
                      from call to call: after every call the generated C's outputs and
                      state block (tests/ops/kt_driver.c, one build per entry, under ASan
                      and UBSan) equal the reference interpreter's (`kiln run --entry
                      --state-in --state-out`) and the numpy reference's (tolerance:
                      Tol.model(1e-5), these are a few sums deep; the state bytes that
                      no call wrote stay exactly zero)
  state/<m>/range     calls whose offset is out of range: the C entry returns <M>_E_RANGE
                      and the driver verifies that the state, the arena and the outputs
                      are untouched (ASan/UBSan build); the interpreter refuses the same
                      call with a one-line error naming the kiln.write's line

Part 2, models/stories.lua (the TinyStories 260K Llama with a KV cache):
  state/stories/greedy    tests/state/lm_gen.c generates STORIES_N tokens greedily from
                          BOS (one prefill, then a decode per token) with the generated C
                          (-O2); an independent float64 full forward (no cache: every
                          position recomputed, peers.np_stories) over the same tokens gives
                          the logits of every position. Every row of C logits matches its
                          full-forward row (Tol.model(1e-4): the whole-model tolerance of
                          docs/testing.md), and every token is the reference's arg-max after
                          the same prefix, which makes the two greedy sequences equal
  state/stories/torch-kv  the same greedy ids (after BOS) from tests/state/torch_stories.py,
                          an independent PyTorch implementation with its own KV cache
                          (float64, one token at a time), loading the checkpoint itself
  state/stories/interp    prefill then decodes, and a second prefill chunk at position 8,
                          C (ASan/UBSan build) vs the interpreter, outputs and state block
  state/stories/range     decode at 512 and -3, prefill at 481 return STORIES_E_RANGE
                          having touched nothing (the same ASan/UBSan build)

usage: /usr/bin/python3 tests/py/run_state.py WORKDIR
"""
import os
import sys

import numpy as np

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kt  # noqa: E402
sys.path.insert(0, os.path.join(kt.ROOT, "tests", "state"))
sys.path.insert(0, os.path.join(kt.ROOT, "bench"))
import peers  # noqa: E402

WARN = ["-std=c11", "-Wall", "-Wextra", "-Wpedantic", "-Werror"]
# -O0: as in run_compile.py (sanitized builds of stories.c in seconds, not a quarter minute).
SAN = ["-O0", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
SAN_ENV = dict(os.environ, ASAN_OPTIONS="detect_leaks=1", UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
SMALL_TOL = 1e-5
MODEL_TOL = 1e-4
STORIES_N = 256


# ---------------------------------------------------------------- numpy references

def state_arrays(meta, block):
    """{state name: array view} of a state block's bytes, in the JSON's layout."""
    out = {}
    for s in meta["states"]:
        dt = kt.NP_DTYPE[s["dtype"]]
        n = int(np.prod(s["shape"], dtype=np.int64))
        out[s["name"]] = np.frombuffer(block, dtype=dt, count=n, offset=s["offset"]).reshape(s["shape"]).copy()
    return out


def state_block(meta, arrays):
    """The state block's bytes holding arrays, zero elsewhere."""
    b = bytearray(meta["state_bytes"])
    for s in meta["states"]:
        raw = np.ascontiguousarray(arrays[s["name"]], dtype=kt.NP_DTYPE[s["dtype"]]).tobytes()
        b[s["offset"]:s["offset"] + len(raw)] = raw
    return bytes(b)


def ref_tinystate(w, st, entry, ins):
    k = ins["x"].astype(np.float64) @ w["proj.weight"].astype(np.float64).T
    old_total = st["cache"].astype(np.float64).sum()
    p = int(ins["pos"])
    st["cache"][p:p + k.shape[0]] = k
    out = {"scores": k @ st["cache"].astype(np.float64).T}
    if entry == "decode":
        out["old_total"] = np.array(old_total)
    return out


def ref_order(w, st, entry, ins):
    old = st["st"].astype(np.float64).reshape(12).copy()
    p = int(ins["pos"])
    st["st"][p] = ins["x"][0] * 2
    return {"new": st["st"] + 1.0, "old_sum": np.array(old.sum()), "old": old}


def ref_chain(w, st, entry, ins):
    g = st["grid"]
    if entry == "peek":
        return {"total": np.array(g.astype(np.float64).sum())}
    p = int(ins["pos"])
    g[:, p:p + 2] = ins["x"]
    mid = g.astype(np.float64).sum(1)
    g[:, 0:1] = ins["y"]
    return {"mid": mid, "out": g.astype(np.float64)}


def ref_fusion(w, st, entry, ins):
    old = st["s"].astype(np.float64).reshape(2, 2).copy()
    p = int(ins["pos"])
    st["s"][p:p + 2] = ins["x"]
    return {"y": np.exp(old) + st["s"].astype(np.float64).reshape(2, 2) * 2}


def ref_nostate(w, st, entry, ins):
    y = ins["x"].astype(np.float64) @ w["w"].astype(np.float64)
    return {"y": y if entry == "one" else np.maximum(y, 0)}


def ref_implicit(w, st, entry, ins):
    st["hist"][int(ins["pos"])] = ins["tok"][0]
    return {"seen": st["hist"].astype(np.float64)}


def ref_ring(w, st, entry, ins):
    """tests/state/ring.lua: rows stored at slots (pos + i) mod 4; row i attends to the
    positions pos + i - 3 < p <= pos + i (p >= 0), each read from slot p mod 4."""
    K, V, slots = st["k"], st["v"], st["k"].shape[1]
    q, p0 = ins["q"].astype(np.float64), int(ins["pos"])
    T = q.shape[1]
    for i in range(T):
        K[:, (p0 + i) % slots] = ins["kn"][:, i]
        V[:, (p0 + i) % slots] = ins["vn"][:, i]
    out = np.zeros(q.shape)
    for h in range(q.shape[0]):
        for i in range(T):
            seen = [p % slots for p in range(max(0, p0 + i - 2), p0 + i + 1)]
            s = K[0, seen].astype(np.float64) @ q[h, i] / np.sqrt(q.shape[2])
            e = np.exp(s - s.max())
            out[h, i] = e @ V[0, seen].astype(np.float64) / e.sum()
    return {"out": out}


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def i32(v):
    return np.array(v, np.int32)


def cases():
    """name -> (script, reference, [(entry, inputs)] from a fresh state, [(entry, inputs)]
    each out of range from the state the sequence leaves)."""
    r = np.random.default_rng(7)
    return {
        "tinystate": ("tests/golden/tinystate.lua", ref_tinystate,
                      [("prefill", {"x": f32(r, 2, 3), "pos": i32(0)}), ("decode", {"x": f32(r, 1, 3), "pos": i32(2)}),
                       ("decode", {"x": f32(r, 1, 3), "pos": i32(3)}), ("prefill", {"x": f32(r, 2, 3), "pos": i32(4)}),
                       ("decode", {"x": f32(r, 1, 3), "pos": i32(1)})],
                      [("decode", {"x": f32(r, 1, 3), "pos": i32(6)}), ("prefill", {"x": f32(r, 2, 3), "pos": i32(5)}),
                       ("decode", {"x": f32(r, 1, 3), "pos": i32(-1)})]),
        "order": ("tests/state/order.lua", ref_order,
                  [("step", {"x": f32(r, 1, 4), "pos": i32(1)}), ("step", {"x": f32(r, 1, 4), "pos": i32(0)}),
                   ("step", {"x": f32(r, 1, 4), "pos": i32(1)}), ("step", {"x": f32(r, 1, 4), "pos": i32(2)})],
                  [("step", {"x": f32(r, 1, 4), "pos": i32(3)})]),
        "chain": ("tests/state/chain.lua", ref_chain,
                  [("two", {"x": f32(r, 2, 2), "y": f32(r, 2, 1), "pos": i32(3)}), ("peek", {}),
                   ("two", {"x": f32(r, 2, 2), "y": f32(r, 2, 1), "pos": i32(1)}), ("peek", {})],
                  [("two", {"x": f32(r, 2, 2), "y": f32(r, 2, 1), "pos": i32(4)})]),
        "fusion": ("tests/state/fusion.lua", ref_fusion,
                   [("f", {"x": f32(r, 2), "pos": i32(0)}), ("f", {"x": f32(r, 2), "pos": i32(2)}),
                    ("f", {"x": f32(r, 2), "pos": i32(1)})],
                   [("f", {"x": f32(r, 2), "pos": i32(3)})]),
        "nostate": ("tests/state/nostate.lua", ref_nostate,
                    [("one", {"x": f32(r, 1, 3)}), ("many", {"x": f32(r, 4, 3)}), ("one", {"x": f32(r, 1, 3)})], []),
        "ring": ("tests/state/ring.lua", ref_ring,
                 [(e, {"q": f32(r, 2, n, 4), "kn": f32(r, 1, n, 4), "vn": f32(r, 1, n, 4), "pos": i32(p)})
                  for e, n, p in [("prefill", 2, 0), ("decode", 1, 2), ("decode", 1, 3), ("prefill", 2, 4),
                                  ("decode", 1, 6), ("prefill", 2, 7), ("decode", 1, 9)]],
                 [("decode", {"q": f32(r, 2, 1, 4), "kn": f32(r, 1, 1, 4), "vn": f32(r, 1, 1, 4), "pos": i32(-1)})]),
        "implicit": ("tests/state/implicit.lua", ref_implicit,
                     [("run", {"tok": i32([5]), "pos": i32(0)}), ("run", {"tok": i32([-9]), "pos": i32(7)}),
                      ("run", {"tok": i32([3]), "pos": i32(0)})],
                     [("run", {"tok": i32([1]), "pos": i32(8)})]),
    }


# ---------------------------------------------------------------- part 1

def close(got, ref, tol):
    """Whether got matches the float64 reference within tol * max(1, max|ref|)."""
    ref = np.asarray(ref, np.float64)
    got = np.asarray(got, np.float64).reshape(ref.shape)
    return float(np.max(np.abs(got - ref), initial=0.0)) <= tol * max(1.0, float(np.max(np.abs(ref), initial=0.0)))


def build_entries(d, script, name):
    """kiln build + one ASan/UBSan driver per entry; returns (meta, error)."""
    ok, why = kt.kiln_build(script, d)
    if not ok:
        return None, why
    meta = kt.load_meta(d, name)
    for e in meta["entries"]:
        ok, why = kt.compile_driver(d, name, meta, flags=WARN + SAN, exe="drv_" + e["name"], entry=e)
        if not ok:
            return None, why
    return meta, ""


def one_call(d, script, name, meta, k, entry, ins, c_state, i_state):
    """Call k of a sequence in the C and in the interpreter; returns (C outputs, C state,
    interp outputs, interp state) or raises RuntimeError with the reason."""
    e = kt.entry_of(meta, entry)
    arrays = [ins[io["name"]] for io in e["inputs"]]
    has_state = bool(meta["states"])
    st, why, c_out, c_state = kt.run_entry(d, name, e, arrays, c_state, exe="drv_" + entry, env=SAN_ENV, tag="k%d" % k,
                                           has_state=has_state)
    if st != "ok":
        raise RuntimeError("call %d (%s): %s" % (k, entry, why))
    ok, why, i_out, i_state = kt.kiln_run_entry(script, entry, list(ins.items()), os.path.join(d, "i%d" % k), i_state,
                                                has_state)
    if not ok:
        raise RuntimeError("call %d (%s): %s" % (k, entry, why))
    return c_out, c_state, [i_out[io["name"]] for io in e["outputs"]], i_state


def run_sequence(work, name, script, ref, calls):
    """The state/<m>/sequence check; returns (meta, build dir, final C state) for the range check."""
    d = os.path.join(work, name)
    meta, why = build_entries(d, script, name)
    if meta is None:
        kt.report(False, "state/%s/sequence" % name, why)
        return None, d, None
    _, w = peers.load_kiln_weights(d, name)
    r_state = state_arrays(meta, bytes(meta["state_bytes"]))
    c_state = i_state = None
    probs = []
    try:
        for k, (entry, ins) in enumerate(calls):
            c_out, c_state, i_out, i_state = one_call(d, script, name, meta, k, entry, ins, c_state, i_state)
            want = ref(w, r_state, entry, ins)
            for io, c, i in zip(kt.entry_of(meta, entry)["outputs"], c_out, i_out):
                for who, got in (("C", c), ("interp", i)):
                    if not close(got, want[io["name"]], SMALL_TOL):
                        probs.append("call %d (%s) output %s: %s %s, numpy %s" % (k, entry, io["name"], who, got.ravel()[:6],
                                                                                  np.ravel(want[io["name"]])[:6]))
            for who, blk in (("C", c_state), ("interp", i_state)):
                got = state_arrays(meta, blk)
                for s in meta["states"]:
                    if not close(got[s["name"]], r_state[s["name"]], SMALL_TOL):
                        probs.append("call %d (%s): %s state %s differs from numpy's" % (k, entry, who, s["name"]))
                if blk != state_block(meta, got):
                    probs.append("call %d (%s): %s wrote state bytes outside the states" % (k, entry, who))
    except RuntimeError as e:
        probs.append(str(e))
    kt.report(not probs, "state/%s/sequence" % name, "; ".join(probs[:3]) if probs else
              "%d calls of %s, C and interpreter = numpy" % (len(calls), ", ".join(sorted({c[0] for c in calls}))))
    return meta, d, c_state


def run_range(name, script, d, meta, state, calls):
    """The state/<m>/range check, from the state the sequence left."""
    probs = []
    for k, (entry, ins) in enumerate(calls):
        e = kt.entry_of(meta, entry)
        arrays = [ins[io["name"]] for io in e["inputs"]]
        st, why, _, _ = kt.run_entry(d, name, e, arrays, state, exe="drv_" + entry, env=SAN_ENV, tag="r%d" % k)
        if st != "range":
            probs.append("%s at pos %d: C %s" % (entry, int(ins["pos"]), why or "returned OK"))
        ok, why, _, _ = kt.kiln_run_entry(script, entry, list(ins.items()), os.path.join(d, "ri%d" % k), state)
        base = os.path.basename(script)
        if ok or "%s:" % base not in why or "outside" not in why:
            probs.append("%s at pos %d: interpreter %s" % (entry, int(ins["pos"]), "accepted it" if ok else why))
    kt.report(not probs, "state/%s/range" % name, "; ".join(probs[:3]) if probs else
              "%d out-of-range calls: E_RANGE, nothing touched; the interpreter names the line" % len(calls))


# ---------------------------------------------------------------- part 2: stories

def stories_greedy(work):
    """state/stories/greedy: see the file comment."""
    d = os.path.join(work, "stories")
    ok, why = kt.kiln_build(os.path.join(kt.ROOT, "models", "stories.lua"), d)
    if not ok:
        return kt.report(False, "state/stories/greedy", why), None
    exe = os.path.join(d, "lm_gen")
    rc, out, err = kt.run(["cc", *WARN, "-O2", "-I", d, os.path.join(kt.ROOT, "tests", "state", "lm_gen.c"),
                           os.path.join(d, "stories.c"), "-o", exe, "-lm"])
    if rc != 0:
        return kt.report(False, "state/stories/greedy", "cc: " + kt.why(rc, err, out)), d
    lp, tp = os.path.join(d, "logits.bin"), os.path.join(d, "tokens.bin")
    rc, out, err = kt.run([exe, os.path.join(d, "stories.weights"), str(STORIES_N), lp, tp])
    if rc != 0:
        return kt.report(False, "state/stories/greedy", "lm_gen: " + kt.why(rc, err, out)), d
    c_logits = np.fromfile(lp, np.float32).reshape(STORIES_N, -1)
    tokens = np.fromfile(tp, np.int32)
    _, w = peers.load_kiln_weights(d, "stories")
    ref = peers.np_stories({k: v.astype(np.float64) for k, v in w.items()}, tokens[:STORIES_N])
    probs, worst = [], 0.0
    for p in range(STORIES_N):
        bound = MODEL_TOL * max(1.0, float(np.max(np.abs(ref[p]))))
        err = float(np.max(np.abs(c_logits[p] - ref[p])))
        worst = max(worst, err / bound)
        if err > bound:
            probs.append("position %d: logits differ by %.3g (bound %.3g)" % (p, err, bound))
        best = int(np.argmax(ref[p]))
        if best != tokens[p + 1]:
            top = np.sort(ref[p])[-2:]
            probs.append("position %d: C chose %d, the reference's arg-max is %d (its top-2 gap %.3g)" % (
                p, tokens[p + 1], best, top[1] - top[0]))
    kt.report(not probs, "state/stories/greedy", "; ".join(probs[:3]) if probs else
              "%d tokens: every C token is the float64 full forward's arg-max; logits err/tol %.2g" % (STORIES_N, worst))
    # The same 256 ids from tests/state/torch_stories.py, PyTorch with its own KV cache,
    # decoding one token at a time from BOS in float64 from the checkpoint itself.
    import torch_stories
    ref_ids = torch_stories.Stories(os.path.join(kt.ROOT, "models", "weights", "stories260K.safetensors")).greedy(len(tokens) - 1)
    got = [int(t) for t in tokens[1:]]
    first = next((i for i, (a, b) in enumerate(zip(got, ref_ids)) if a != b), None)
    kt.report(first is None and len(got) == len(ref_ids), "state/stories/torch-kv",
              "%d greedy ids after BOS equal PyTorch's KV-cache decode (tests/state/torch_stories.py)" % len(got)
              if first is None else "id %d differs: C %d, PyTorch %d" % (first, got[first], ref_ids[first]))
    return True, d


def stories_interp(d, meta):
    """state/stories/interp: C and interpreter on one sequence of calls, outputs and state."""
    script = os.path.join(kt.ROOT, "models", "stories.lua")
    probs = []
    rng = np.random.default_rng(11)
    chunk = rng.integers(0, 512, 32).astype(np.int32)
    calls = [("prefill", {"tokens": chunk, "pos": i32(0)})]
    calls += [("decode", {"token": rng.integers(0, 512, 1).astype(np.int32), "pos": i32(p)}) for p in (5, 6, 7)]
    calls += [("prefill", {"tokens": rng.integers(0, 512, 32).astype(np.int32), "pos": i32(8)})]
    c_state = i_state = None
    try:
        for k, (entry, ins) in enumerate(calls):
            c_out, c_state, i_out, i_state = one_call(d, script, "stories", meta, k, entry, ins, c_state, i_state)
            for c, i in zip(c_out, i_out):
                if not close(c, i, MODEL_TOL):
                    probs.append("call %d (%s at %d): logits C vs interpreter differ by %.3g" % (
                        k, entry, int(ins["pos"]), float(np.max(np.abs(c - i)))))
            cs, its = state_arrays(meta, c_state), state_arrays(meta, i_state)
            for s in meta["states"]:
                if not close(cs[s["name"]], its[s["name"]], MODEL_TOL):
                    probs.append("call %d (%s): state %s, C vs interpreter" % (k, entry, s["name"]))
    except RuntimeError as e:
        probs.append(str(e))
    kt.report(not probs, "state/stories/interp", "; ".join(probs[:3]) if probs else
              "%d calls (prefill at 0, decodes at 5..7, prefill at 8): C = interpreter, outputs and state" % len(calls))


def stories_range(d, meta):
    """state/stories/range: positions past the cache under ASan/UBSan."""
    probs = []
    state = bytes(np.random.default_rng(3).integers(0, 256, meta["state_bytes"], dtype=np.uint8))
    for entry, ins in (("decode", {"token": i32([7]), "pos": i32(512)}),
                       ("prefill", {"tokens": np.zeros(32, np.int32), "pos": i32(481)}),
                       ("decode", {"token": i32([7]), "pos": i32(-3)})):
        e = kt.entry_of(meta, entry)
        st, why, _, _ = kt.run_entry(d, "stories", e, [ins[io["name"]] for io in e["inputs"]], state,
                                     exe="drv_" + entry, env=SAN_ENV, tag="range")
        if st != "range":
            probs.append("%s at %d: %s" % (entry, int(ins["pos"]), why or "returned STORIES_OK"))
    kt.report(not probs, "state/stories/range", "; ".join(probs) if probs else
              "decode at 512 and -3, prefill at 481: STORIES_E_RANGE, state, arena and logits untouched")


def cli(work):
    """state/cli: kiln run's entry and state options refuse misuse with one-line errors."""
    d = os.path.join(work, "cli")
    os.makedirs(d, exist_ok=True)
    script = os.path.join(kt.ROOT, "tests", "golden", "tinystate.lua")
    x, pos, short = os.path.join(d, "x.npy"), os.path.join(d, "pos.npy"), os.path.join(d, "short.bin")
    np.save(x, np.zeros((1, 3), np.float32))
    np.save(pos, i32(0))
    with open(short, "wb") as f:
        f.write(bytes(10))
    tiny = os.path.join(kt.ROOT, "tests", "golden", "tiny.lua")
    cases = [  # (args, the one line of stderr)
        ([script, "--input", "x=" + x, "--input", "pos=" + pos],
         "kiln: error: run: the model has 2 entries (prefill, decode): choose one with --entry NAME"),
        ([script, "--entry", "step"], "kiln: error: run: --entry step: the model has no such entry (it has: prefill, decode)"),
        ([script, "--entry", "decode", "--input", "x=" + x, "--input", "pos=" + pos, "--state-in", short],
         "kiln: error: --state-in: %s has 10 bytes; the state block of tinystate is 128 bytes" % short),
        ([tiny, "--state-out", short], "kiln: error: run: --state-out: the model declares no state (kiln.state)"),
    ]
    probs = []
    for args, want in cases:
        rc, out, err = kt.run([kt.KILN, "run", *args])
        if rc != 1 or err.strip() != want:
            probs.append("kiln run %s: exit %d, %r" % (" ".join(os.path.basename(a) for a in args), rc, err.strip()))
    rc, out, err = kt.run([kt.KILN, "--help"])
    if not all(w in out for w in ("--entry NAME", "--state-in FILE", "--state-out FILE")):
        probs.append("kiln --help does not document --entry, --state-in and --state-out")
    rc, out, err = kt.run([kt.KILN, "graph", script, "--dot"])
    if rc != 0 or "subgraph cluster_1" not in out or 'label="entry decode"' not in out or out.count("{") != out.count("}"):
        probs.append("kiln graph --dot does not draw one cluster per entry: %s" % kt.why(rc, err, out[:80]))
    rc, out, err = kt.run([kt.KILN, "graph", script, "--after", "memplan"])
    if rc != 0 or not out.startswith("state cache : f32[6, 4]") or "entry prefill\n" not in out or "writes cache = " not in out:
        probs.append("kiln graph does not show the states and every entry: %s" % out[:80])
    kt.report(not probs, "state/cli", "; ".join(probs) if probs else
              "%d misuses refused in one line; --help documents them; graph shows states and entries" % len(cases))


def main():
    work = sys.argv[1]
    cli(work)
    jobs = list(cases().items())

    def one(job):
        name, (script, ref, calls, bad) = job
        meta, d, state = run_sequence(work, name, os.path.join(kt.ROOT, script), ref, calls)
        if not bad:   # nostate: no offsets, nothing out of range
            return
        if meta is None:
            return kt.report(False, "state/%s/range" % name, "no build")
        run_range(name, os.path.join(kt.ROOT, script), d, meta, state, bad)

    kt.pmap(one, jobs, jobs=2)
    ok, d = stories_greedy(work)
    meta, why = (None, "no build") if not d else build_entries(d, os.path.join(kt.ROOT, "models", "stories.lua"), "stories")
    if meta:
        stories_interp(d, meta)
        stories_range(d, meta)
    else:
        kt.report(False, "state/stories/interp", why)
        kt.report(False, "state/stories/range", why)


if __name__ == "__main__":
    main()

"""state_compare.py — models with state or entry points through the Core ML target (iOS18).

usage: state_compare.py KILN MILRUN WORK CONFIG...      (CONFIG: iOS18:fp32, iOS18:fp16)

Prints PASS/FAIL/NOTE lines (tests/run.sh protocol). For each model of CASES:
  1. builds the C target and one driver per entry (tests/ops/kt_driver.c through
     tests/py/kt.py) and runs the model's call sequence from a fresh state, carrying
     the state block from call to call: the reference outputs and states;
  2. for each CONFIG builds the multifunction .mlpackage and checks
     decode  protoc --decode against gen/target/coreml.proto shows no unknown field;
     blobs   tests/coreml/wbcheck.py (one weight.bin that every function shares);
     calls   tests/coreml/milrun runs the same sequence, function by function, carrying
             its own state store (milrun -s/-S): after every call each output and each
             state match the C target's (tolerances below), and every state element the
             C target holds at exactly 0 (never written) is exactly 0;
     range   calls with an offset out of range (for stories and llm.lua also past the
             RoPE tables, which Kiln's gathers clamp on every target), from the state the
             sequence left: the C entry returns <M>_E_RANGE,
             and the Core ML function leaves every state exactly as it was.

Tolerances: max |coreml - c| <= tol * max(1, max |c|) per output and per state.
  fp32 programs, 2e-3: Core ML keeps states in fp16 whatever the program's precision,
    so every value the program stores is rounded to fp16 (relative error <= 2^-11 =
    4.9e-4) and read back as such by every later call; the budget is a few of those
    roundings accumulated over the calls of a sequence. Everything else is fp32
    (milrun rounds every op's result to fp32).
  fp16 programs, 3e-2: as tests/coreml/compare.py (milrun rounds every value to fp16
    after each op; a few dozen fp16 ops in sequence).
  sdpa: Core ML has no loop that stops at the run-time length, so Kiln lowers kiln.sdpa
    to a masked composition (scores of keys past the length or the causal limit are
    replaced by a large negative value before the softmax, whose exp is exactly 0); the
    masked keys contribute exact zeros, so it costs no tolerance beyond the softmax's
    own rounding in a different order (~1 ulp in fp32).
Inputs: f32 ~ N(0, 1), token ids uniform in [0, 512), numpy seed 0; positions as listed.
"""
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "py"))
import kt  # noqa: E402
import wbcheck  # noqa: E402

TOL = {"fp32": 2e-3, "fp16": 3e-2}


def i32(v):
    return np.array(v, np.int32)


# name -> (script, [(entry, {input: value})] from a fresh state, [(entry, inputs)] out of range
# (empty: not checked; why in the note)). Inputs not listed are random.
CASES = {
    "tinystate": ("tests/golden/tinystate.lua",
                  [("prefill", {"pos": i32(0)}), ("decode", {"pos": i32(2)}), ("decode", {"pos": i32(3)}),
                   ("prefill", {"pos": i32(4)}), ("decode", {"pos": i32(1)})],
                  [("decode", {"pos": i32(6)}), ("prefill", {"pos": i32(5)}), ("decode", {"pos": i32(-1)})]),
    "order": ("tests/state/order.lua",
              [("step", {"pos": i32(1)}), ("step", {"pos": i32(0)}), ("step", {"pos": i32(2)})],
              [("step", {"pos": i32(3)})]),
    "chain": ("tests/state/chain.lua",
              [("two", {"pos": i32(3)}), ("peek", {}), ("two", {"pos": i32(1)}), ("peek", {})],
              [("two", {"pos": i32(4)})]),
    "fusion": ("tests/state/fusion.lua",
               [("f", {"pos": i32(0)}), ("f", {"pos": i32(2)}), ("f", {"pos": i32(1)})],
               [("f", {"pos": i32(3)}), ("f", {"pos": i32(-2)})]),
    "nostate": ("tests/state/nostate.lua", [("one", {}), ("many", {}), ("one", {})], []),
    "flags": ("tests/coreml/models/flags.lua",
              [("mark", {"pos": i32(0)}), ("count", {}), ("mark", {"pos": i32(3)}), ("mark", {"pos": i32(4)}),
               ("count", {})],
              [("mark", {"pos": i32(5)}), ("mark", {"pos": i32(-1)})]),
    # A sliding-window cache as a ring (4 slots, window 3): prefills at 4 and 7 wrap it,
    # the latter inside its own rows.
    "ring": ("tests/state/ring.lua",
             [(e, {"pos": i32(p)}) for e, p in [("prefill", 0), ("decode", 2), ("decode", 3), ("prefill", 4),
                                                 ("decode", 6), ("prefill", 7), ("decode", 9)]],
             [("decode", {"pos": i32(-1)}), ("prefill", {"pos": i32(-2)})]),
    # i64 token ids into an entry with state: the package takes them as int32 (write_cin
    # narrows them as kiln_coreml_call does); ids index a 10-row table.
    "tokstate": ("tests/metal/i64/tokstate.lua",
                 [("step", {"pos": i32(0), "tokens": np.array([3, 9], np.int64)}),
                  ("step", {"pos": i32(4), "tokens": np.array([0, 7], np.int64)}),
                  ("step", {"pos": i32(2), "tokens": np.array([9, 1], np.int64)})],
                 [("step", {"pos": i32(5), "tokens": np.array([2, 2], np.int64)})]),
    "stories": ("models/stories.lua",
                [("prefill", {"pos": i32(0)}), ("decode", {"pos": i32(32)}), ("decode", {"pos": i32(33)}),
                 ("decode", {"pos": i32(34)})],
                [("decode", {"pos": i32(512)}), ("prefill", {"pos": i32(481)}), ("decode", {"pos": i32(-3)})]),
    # models/llm.lua on its default checkpoint (models/weights/tiny-llm: Llama, GQA 4/2,
    # vocab 64): token ids drawn below the vocabulary size.
    "llm": ("models/llm.lua",
            [("prefill", {"pos": i32(0), "tokens": np.arange(32, dtype=np.int32) * 7 % 64}),
             ("decode", {"pos": i32(32), "token": np.array([5], np.int32)}),
             ("decode", {"pos": i32(33), "token": np.array([63], np.int32)}),
             ("prefill", {"pos": i32(34), "tokens": np.arange(32, dtype=np.int32) * 3 % 64})],
            [("decode", {"pos": i32(256), "token": np.array([5], np.int32)}),
             ("prefill", {"pos": i32(225), "tokens": np.arange(32, dtype=np.int32) % 64})]),
    # the same built with -D prefill_logits=last: each prefill returns one row's logits
    # (the gather of that row moved up through the last layer by pass_narrow)
    "llm_last": ("models/llm.lua",
                 [("prefill", {"pos": i32(0), "tokens": np.arange(32, dtype=np.int32) * 7 % 64, "last": i32(31)}),
                  ("decode", {"pos": i32(32), "token": np.array([5], np.int32)}),
                  ("prefill", {"pos": i32(33), "tokens": np.arange(32, dtype=np.int32) * 3 % 64, "last": i32(5)})],
                 [("prefill", {"pos": i32(-1), "tokens": np.arange(32, dtype=np.int32) % 64, "last": i32(31)})]),
    # models/llm.lua on a Gemma 3 checkpoint (SETUP below: vocabulary 128, prefill 8,
    # sliding layers on a ring of 11): the second prefill wraps the ring, the decodes go
    # on past it.
    "gemma": ("models/llm.lua",
              [("prefill", {"pos": i32(0), "tokens": np.arange(8, dtype=np.int32) * 7 % 128}),
               ("prefill", {"pos": i32(8), "tokens": np.arange(8, dtype=np.int32) * 5 % 128})] +
              [("decode", {"pos": i32(p), "token": np.array([p * 11 % 128], np.int32)}) for p in range(16, 22)],
              [("decode", {"pos": i32(24), "token": np.array([7], np.int32)}),
               ("decode", {"pos": i32(-1), "token": np.array([7], np.int32)})]),
}


def gemma_setup(work):
    """models/llm.lua's Gemma 3 path: tests/llm/run_llm.py's seeded gemma3 checkpoint
    (window 4 in a ring of 11 slots, 24 positions) written into work; the build's -D
    arguments."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "llm"))
    import run_llm  # noqa: E402
    return run_llm.write_case("gemma3", os.path.join(work, "ckpt"))


# Cases built with -D arguments: name -> setup(work) returning them (after writing what
# they name).
SETUP = {"gemma": gemma_setup, "llm_last": lambda work: ["-D", "prefill_logits=last"]}
NOTES = {}
# Where scripts with state or entry points live; each must be a case above (or an error
# case of t_coreml), so a new stateful model cannot go unchecked.
SCRIPT_DIRS = ["models", "tests/state", "tests/golden", "tests/coreml/models"]
ERROR_CASES = {"tests/state/implicit.lua"}


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def last_line(s):
    s = (s or "").strip().splitlines()
    return s[-1] if s else "(no message)"


def make_inputs(rng, entry, given):
    """The entry's inputs in declaration order: given values, else random ones."""
    out = []
    for io in entry["inputs"]:
        if io["name"] in given:
            out.append(given[io["name"]])
        elif io["dtype"] == "f32":
            out.append(rng.standard_normal(io["shape"]).astype(np.float32))
        elif io["dtype"] == "i32":
            out.append(rng.randint(0, 512, size=io["shape"]).astype(np.int32))
        else:
            out.append(rng.randint(0, 2, size=io["shape"]).astype(np.bool_))
    return out


def state_arrays(meta, block):
    """{state name: array} of a C state block, in the JSON's layout."""
    res = {}
    for s in meta["states"]:
        n = int(np.prod(s["shape"], dtype=np.int64))
        res[s["name"]] = np.frombuffer(block, dtype=kt.NP_DTYPE[s["dtype"]], count=n,
                                       offset=s["offset"]).reshape(s["shape"])
    return res


def mil_name(name):
    """A state's Core ML name, as the emitter makes it (docs/coreml.md)."""
    s = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return "v_" + s if not s or s[0].isdigit() else s


class Reference:
    """The C target on a model's sequence: outputs and state arrays after every call."""

    def __init__(self, work, name, script, extra=()):
        self.d = os.path.join(work, "c")
        self.name, self.meta, self.calls = name, None, []
        ok, why = kt.kiln_build(os.path.join(ROOT, script), self.d, extra)
        if not ok:
            raise RuntimeError(why)
        self.meta = kt.load_meta(self.d, name)
        for e in self.meta["entries"]:
            ok, why = kt.compile_driver(self.d, name, self.meta, flags=("-O1",), exe="drv_" + e["name"], entry=e)
            if not ok:
                raise RuntimeError(why)

    def call(self, k, entry, inputs, state):
        e = kt.entry_of(self.meta, entry)
        st, why, outs, block = kt.run_entry(self.d, self.name, e, inputs, state, exe="drv_" + entry, tag="k%d" % k,
                                            has_state=bool(self.meta["states"]))
        return st, why, outs, block


def write_cin(d, entry, inputs):
    """The inputs as Core ML takes them: bool as int32, i64 narrowed to int32 (the values
    fit: kiln_coreml_call would refuse them otherwise), a rank-0 input as shape [1]."""
    os.makedirs(d, exist_ok=True)
    for io, a in zip(entry["inputs"], inputs):
        a = np.asarray(a)
        a = a.reshape(a.shape or (1,))
        if io["dtype"] == "i64":
            assert a.min(initial=0) >= -2**31 and a.max(initial=0) < 2**31, "an i64 input outside int32"
            a = a.astype(np.int32)
        np.save(os.path.join(d, io["name"] + ".npy"), a.astype(np.int32) if io["dtype"] == "bool" else a)


def milrun_call(milrun, pkg, d, k, entry, inputs, sin):
    """One call of function `entry`; returns (outputs dir, state dir) or raises RuntimeError."""
    cin, out, sout = (os.path.join(d, "%s%d" % (w, k)) for w in ("cin", "out", "st"))
    os.makedirs(out, exist_ok=True)
    os.makedirs(sout, exist_ok=True)
    write_cin(cin, entry, inputs)
    cmd = [milrun, pkg, "run", cin, out, "-f", entry["name"], "-S", sout] + (["-s", sin] if sin else [])
    r = run(cmd)
    if r.returncode:
        raise RuntimeError("call %d (%s): milrun: %s" % (k, entry["name"], last_line(r.stderr)))
    return out, sout


def scaled_err(got, ref):
    """max |got - ref| / max(1, max |ref|), both as float64."""
    ref = np.asarray(ref, np.float64)
    got = np.asarray(got, np.float64).reshape(ref.shape)
    return float(np.max(np.abs(got - ref), initial=0.0)) / max(1.0, float(np.max(np.abs(ref), initial=0.0)))


def compare_call(meta, entry, k, c_outs, c_state, out, sout, tol, worst):
    """Problems of one call (a list); worst[0] and worst[1] track the largest output/state errors."""
    probs = []
    for io, c in zip(entry["outputs"], c_outs):
        m = np.load(os.path.join(out, io["name"] + ".npy"))
        m = m.reshape(c.shape) if m.size == c.size else m
        if m.shape != c.shape:
            probs.append("call %d (%s) output %s: shape %s vs C %s" % (k, entry["name"], io["name"], m.shape, c.shape))
            continue
        if io["dtype"] != "f32":
            if not np.array_equal(m.astype(np.int64), c.astype(np.int64)):
                probs.append("call %d (%s) output %s differs from the C target" % (k, entry["name"], io["name"]))
            continue
        err = scaled_err(m, c)
        worst[0] = max(worst[0], err)
        if not np.isfinite(err) or err > tol:
            probs.append("call %d (%s) output %s: error %.3g > %g" % (k, entry["name"], io["name"], err, tol))
    if c_state is None:
        return probs
    for s in meta["states"]:
        c = state_arrays(meta, c_state)[s["name"]]
        m = np.load(os.path.join(sout, mil_name(s["name"]) + ".npy"))
        if m.shape != c.shape:
            probs.append("call %d: state %s shape %s vs C %s" % (k, s["name"], m.shape, c.shape))
            continue
        if np.any(m[c == 0] != 0):
            probs.append("call %d (%s): state %s has values where the C state is untouched (0)" % (k, entry["name"], s["name"]))
        err = scaled_err(m, c.astype(np.float64))
        worst[1] = max(worst[1], err)
        if not np.isfinite(err) or err > tol:
            probs.append("call %d (%s): state %s error %.3g > %g" % (k, entry["name"], s["name"], err, tol))
    return probs


def check_package(kiln, milrun, name, script, work, cfg, meta, ref, bad_calls, tag, extra=()):
    os_, prec = cfg.split(":")
    t = "%s/%s/%s" % (tag, os_, prec)
    d = os.path.join(work, "%s-%s" % (os_, prec))
    r = run([kiln, "build", os.path.join(ROOT, script), "-o", d, "--target", "coreml", "--min-os", os_, "--precision", prec,
             *extra])
    if r.returncode:
        print("FAIL %s/build: %s" % (t, last_line(r.stderr)))
        return
    pkg = os.path.join(d, name + ".mlpackage")
    with open(os.path.join(pkg, "Data/com.apple.CoreML/model.mlmodel"), "rb") as f:
        r = run(["protoc", "--decode=CoreML.Specification.Model", "--proto_path=%s/gen/target" % ROOT,
                 "%s/gen/target/coreml.proto" % ROOT], stdin=f)
    unknown = [ln for ln in r.stdout.splitlines() if re.match(r"^\s*\d+\s*[:{]", ln)]
    nfun = len(re.findall(r"^  functions \{", r.stdout.split("\nmlProgram {")[0], re.M))
    if r.returncode or unknown or not r.stdout:
        print("FAIL %s/decode: %s" % (t, last_line(r.stderr) if r.returncode else unknown[:2]))
    else:
        print("PASS %s/decode (no unknown fields; %s)" % (t, "%d function descriptions" % nfun if nfun else "one function, main"))
    bad = wbcheck.check_package(pkg, r.stdout)
    print("FAIL %s/blobs: %s" % (t, bad[0]) if bad else "PASS %s/blobs (one weight.bin for every function)" % t)
    tol = TOL[prec]
    worst, probs, sin = [0.0, 0.0], [], None
    try:
        for k, (entry, inputs, c_outs, c_state) in enumerate(ref):
            out, sout = milrun_call(milrun, pkg, d, k, entry, inputs, sin)
            probs += compare_call(meta, entry, k, c_outs, c_state, out, sout, tol, worst)
            sin = sout if meta["states"] else None
    except RuntimeError as e:
        probs.append(str(e))
    if probs:
        print("FAIL %s/calls: %s" % (t, "; ".join(probs[:3])))
    else:
        print("PASS %s/calls: %d calls (%s) match the C target after every call: outputs max error %.2g, states %.2g "
              "(x max(1, |ref|); tolerance %g)" % (t, len(ref), ", ".join(e["name"] for e, _, _, _ in ref), worst[0],
                                                    worst[1], tol))
    if not bad_calls or probs:
        return
    probs = []
    for k, (entry, inputs, st) in enumerate(bad_calls):
        if st != "range":
            probs.append("%s: the C entry did not return E_RANGE (%s)" % (entry["name"], st))
        try:
            _, sout = milrun_call(milrun, pkg, d, 100 + k, entry, inputs, sin)
        except RuntimeError as e:
            probs.append(str(e))
            continue
        for s in meta["states"]:
            f = mil_name(s["name"]) + ".npy"
            if not np.array_equal(np.load(os.path.join(sin, f)), np.load(os.path.join(sout, f))):
                probs.append("%s at pos %s changed state %s" % (entry["name"], inputs[-1], s["name"]))
    if probs:
        print("FAIL %s/range: %s" % (t, "; ".join(probs[:3])))
    else:
        print("PASS %s/range: %d out-of-range calls leave every state as it was (C: E_RANGE)" % (t, len(bad_calls)))


def main():
    kiln, milrun, work = sys.argv[1:4]
    cfgs = sys.argv[4:]
    os.environ["KILN"] = kiln
    kt.KILN = kiln
    covered = {script for script, _, _ in CASES.values()} | ERROR_CASES
    for d in SCRIPT_DIRS:
        for f in sorted(os.listdir(os.path.join(ROOT, d))):
            script = "%s/%s" % (d, f)
            if not f.endswith(".lua") or script in covered:
                continue
            r = run([kiln, "graph", script], cwd=ROOT)
            if re.search(r"^entry ", r.stdout, re.M):
                print("FAIL coreml/state/coverage: %s has state or entry points but no case in state_compare.py" % script)
    for name, (script, seq, bad) in CASES.items():
        tag = "coreml/state/%s" % name
        w = os.path.join(work, name)
        os.makedirs(w, exist_ok=True)
        extra = SETUP[name](w) + ["--name", name] if name in SETUP else []
        try:
            c = Reference(w, name, script, extra)
        except RuntimeError as e:
            print("FAIL %s/reference: %s" % (tag, e))
            continue
        rng = np.random.RandomState(0)
        ref, state = [], None
        try:
            for k, (ename, given) in enumerate(seq):
                e = kt.entry_of(c.meta, ename)
                inputs = make_inputs(rng, e, given)
                st, why, outs, block = c.call(k, ename, inputs, state)
                if st != "ok":
                    raise RuntimeError("C call %d (%s): %s" % (k, ename, why or st))
                state = block if c.meta["states"] else None
                ref.append((e, inputs, outs, state))
            bad_calls = []
            for k, (ename, given) in enumerate(bad):
                e = kt.entry_of(c.meta, ename)
                inputs = make_inputs(rng, e, given)
                st, _, _, _ = c.call(100 + k, ename, inputs, state)
                bad_calls.append((e, inputs, st))
        except RuntimeError as e:
            print("FAIL %s/reference: %s" % (tag, e))
            continue
        for cfg in cfgs:
            check_package(kiln, milrun, name, script, w, cfg, c.meta, ref, bad_calls, tag, extra)
        if name in NOTES:
            print("NOTE %s: %s" % (tag, NOTES[name]))


main()

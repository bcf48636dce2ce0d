"""run_node.py — ONNX conformance: the node tests of Debian's libonnx-testdata through
`kiln import`, the interpreter (`kiln run`) and the generated C.

Usage: run_node.py KILN DATA_DIR WORK_DIR [--results FILE] [--only SUBSTRING] [--label NAME]
                   [--timeout SECONDS]

(--label names the set in the PASS/FAIL lines, onnx/NAME/<case>; "node" unless given.
--timeout: how long one kiln command may take before the case fails, 60 s unless given. The
same layout serves libonnx-testdata's pytorch-converted, pytorch-operator and simple sets
and tests/onnx/real/textdir.py's case.)

Each case directory holds model.onnx and test_data_set_*/input_N.pb, output_N.pb (ONNX
TensorProto files; the expected outputs come from ONNX's own numpy reference, not from
Kiln). Per case:
  1. `kiln import` the model. An input that Kiln needs at import time (a Reshape's shape,
     a Slice's bounds...) is named by the importer's error; the runner then freezes it to
     the test's value (--freeze NAME=input_N.pb) and imports again. Every other input stays
     a run-time input. An import refused with a "not supported"-style message is
     UNSUPPORTED (printed, never counted as a pass); any other import error is a FAIL.
  2. `kiln run` on every data set: the interpreter's outputs against the expected ones.
  3. `kiln build`, and the generated C of many cases linked into one driver program per
     batch (one compiler run for the batch, not one per case; -std=c11 -Wall -Wextra
     -Wpedantic -Werror, so a warning in generated code fails the batch), run on the
     same inputs.
A case listed in DATA_ERRORS (its expected data contradict its own model) that fails is
DATAERR, not FAIL: counted apart, and never a pass. float16/bfloat16 data are widened to
float32 exactly (widen; ONNX 1.12 stores bfloat16 as uint16 bits), narrow and unsigned
integers passed as int32 when every value fits (to_kiln).
Prints PASS / FAIL / UNSUPPORTED / DATAERR lines, one per case, and with --results writes a TSV
(case, ops, status, reason) for tests/onnx/table.py.

Tolerances (|got - ref| <= bound, element by element; NaN where NaN is due): the reference
is ONNX's float32 numpy computation, itself rounded, so a bound covers both sides.
  exact     data movement, comparisons, selection, integer ops, max-pool, relu, abs, neg,
            floor/ceil/round, sign, casts: bit-equal (no arithmetic, or exact arithmetic).
  ew        other elementwise float ops: 8 eps (|ref| + 1), eps = 2^-23. Correctly rounded
            IEEE ops are within 1/2 ulp, libm's exp/log/tanh/erf within 1-2 ulp, on each side;
            composite formulas (softplus, selu, hardsigmoid) chain a few roundings.
  reduce    matmul, conv, reductions, softmax, normalisations, pools: 1e-5 * max(1, max|ref|).
            A K-term float32 sum errs by ~sqrt(K) eps of the magnitude of its terms; the node
            tests have K <= 1000 (about 4e-6 relative), the reference errs likewise, and
            normalisation divides by a standard deviation of about 1 for these inputs.
  model     graphs of more than 12 nodes (tests/onnx/torch_cnn.py's exported CNN): 1e-4 *
            max(1, max|ref|), the whole-model bound of docs/testing.md — layer errors of the
            size above compound over a few layers (the reference is float64 PyTorch).
"""
import os
import re
import subprocess
import sys

import numpy as np
from onnx import TensorProto, load_model, numpy_helper

EPS = 2.0 ** -23
EXACT_OPS = set("""Identity Reshape Flatten Squeeze Unsqueeze Transpose Concat Split Slice Gather GatherElements
Expand Tile Where Cast CastLike Equal Less LessOrEqual Greater GreaterOrEqual And Or Xor Not Relu Abs Neg Floor Ceil
Round Sign MaxPool GlobalMaxPool ReduceMax ReduceMin ArgMax ArgMin Shape Size Constant ConstantOfShape Range Max Min
Clip Dropout IsNaN IsInf Trilu DepthToSpace SpaceToDepth Pad OneHot PRelu LeakyRelu ThresholdedRelu GatherND TopK""".split())
REDUCE_OPS = set("""MatMul Gemm Conv AveragePool GlobalAveragePool ReduceSum ReduceMean ReduceL1 ReduceL2 ReduceSumSquare
ReduceLogSum ReduceLogSumExp Softmax LogSoftmax BatchNormalization InstanceNormalization LayerNormalization
LpNormalization MeanVarianceNormalization Einsum CumSum Sum Mean ReduceProd Resize Upsample ConvTranspose LRN RNN GRU LSTM DFT STFT Det GridSample""".split())
# Exact by construction but computed through a float product (a constant 0/1 routing
# matrix): exact as long as the data are finite, which the tests' are.
EXACT_OPS |= {"ScatterElements", "Scatter", "ScatterND", "Compress", "ReverseSequence"}
# Messages of a deliberate refusal: an op, attribute, dtype or construct Kiln does not have.
UNSUPPORTED = re.compile(r"unsupported|not supported|Kiln has no|does not fit int32|must be known at import time|"
                         r"too large to import|Kiln compiles|Kiln's integers")
BATCH = 64
# Cases whose expected data contradict their own model, checked by hand: no correct
# implementation passes them. They still run; a failure is reported as DATAERR (counted
# apart, never as a pass), and a pass as a pass — then this entry is stale.
DATA_ERRORS = {
    "test_adam_multiple": "its expected outputs use epsilon 0.01 (ONNX's adam.py passes 1e-2 to its reference but not "
                          "to the node), the node's default is 1e-6",
    "test_castlike_BFLOAT16_to_FLOAT": "the model declares input 'like' [3, 4]; the test data give it shape [1]",
    "test_castlike_BFLOAT16_to_FLOAT_expanded": "the model declares input 'like' [3, 4]; the test data give it shape [1]",
}


def tol_kind(ops):
    """The loosest tolerance class of a model's ops (see the module comment)."""
    if len(ops) > 12:
        return "model"
    if any(o in REDUCE_OPS for o in ops):
        return "reduce"
    if all(o in EXACT_OPS for o in ops):
        return "exact"
    return "ew"


def compare(got, ref, kind):
    """None when got matches ref under the tolerance class, else why not."""
    if got.shape != ref.shape:
        return f"shape {list(got.shape)}, expected {list(ref.shape)}"
    if ref.dtype.kind in "iub":
        bad = np.flatnonzero(got.astype(np.int64).ravel() != ref.astype(np.int64).ravel())
        return None if bad.size == 0 else f"element {bad[0]}: {got.ravel()[bad[0]]} != {ref.ravel()[bad[0]]}"
    g, r = got.astype(np.float64).ravel(), ref.astype(np.float64).ravel()
    nan = np.isnan(r)
    if np.any(np.isnan(g) != nan):
        i = np.flatnonzero(np.isnan(g) != nan)[0]
        return f"element {i}: {g[i]} where {r[i]} is due"
    fin = np.isfinite(r)
    if np.any(g[~fin & ~nan] != r[~fin & ~nan]):
        i = np.flatnonzero((g != r) & ~fin & ~nan)[0]
        return f"element {i}: {g[i]}, expected {r[i]}"
    g, r = g[fin], r[fin]
    if kind == "exact":
        bound = np.zeros_like(r)
    elif kind == "ew":
        bound = 8 * EPS * (np.abs(r) + 1)
    else:
        scale = 1e-4 if kind == "model" else 1e-5
        bound = scale * max(1.0, float(np.max(np.abs(r), initial=0.0))) * np.ones_like(r)
    err = np.abs(g - r)
    if kind != "exact" and err.size:
        compare.worst = max(compare.worst, float(np.max(err / bound)))
    if np.any(err > bound):
        i = int(np.argmax(err - bound))
        return f"element {i}: {g[i]!r}, expected {r[i]!r} (|err| {err[i]:.3g} > {kind} bound {bound[i]:.3g})"
    return None


compare.worst = 0.0          # the largest err/bound of the current case's comparisons


def read_pb(path):
    t = TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def widen(a, elem_type):
    """An array of the model's dtype elem_type as numpy gives it, widened exactly: ONNX
    1.12's test data store bfloat16 as the uint16 of its bits; float16 -> float32."""
    if elem_type == TensorProto.BFLOAT16 and a.dtype == np.uint16:
        return (a.astype(np.uint32) << 16).view(np.float32)
    if a.dtype == np.float16:
        return a.astype(np.float32)
    return a


def to_kiln(a):
    """An ONNX test array as Kiln takes it, or None: int64 and the narrow and unsigned
    integers as int32 when every value fits (the importer's note on the input says so),
    float16/bfloat16 as float32 (widen)."""
    if a.dtype == np.float32 or a.dtype == np.bool_ or a.dtype == np.int32:
        return a
    if a.dtype.kind in "iu" and (a.size == 0 or (int(a.min()) >= -2**31 and int(a.max()) < 2**31)):
        return a.astype(np.int32)
    return None


TIMEOUT = float(sys.argv[sys.argv.index("--timeout") + 1]) if "--timeout" in sys.argv else 60.0


def kiln(args, timeout=None):
    """One kiln command: (exit status, stderr); subprocess.TimeoutExpired after TIMEOUT s."""
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout or TIMEOUT)
    return p.returncode, p.stderr.strip()


class Case:
    def __init__(self, name, path, index):
        self.name, self.path, self.cname = name, path, f"o{index}"
        self.status, self.why, self.ops, self.worst = None, "", [], 0.0
        self.sets = []                    # [(inputs {idx: array}, outputs [array])]

    def done(self, status, why=""):
        if self.status is None:
            self.status, self.why = status, why


def load_case(c):
    """Reads the model's ops and graph inputs and the test data sets."""
    m = load_model(os.path.join(c.path, "model.onnx"), load_external_data=False)
    c.ops = [n.op_type for n in m.graph.node]
    inits = {t.name for t in m.graph.initializer}
    c.inputs = [i.name for i in m.graph.input if i.name not in inits]
    c.in_types = [i.type.tensor_type.elem_type for i in m.graph.input if i.name not in inits]
    c.outputs = [o.name for o in m.graph.output]
    c.out_types = [o.type.tensor_type.elem_type for o in m.graph.output]
    for d in sorted(os.listdir(c.path)):
        if not d.startswith("test_data_set_"):
            continue
        dd = os.path.join(c.path, d)
        ins = {i: os.path.join(dd, f"input_{i}.pb") for i in range(len(c.inputs))}
        outs = [os.path.join(dd, f"output_{i}.pb") for i in range(len(c.outputs))]
        if all(os.path.exists(p) for p in list(ins.values()) + outs):
            c.sets.append((ins, outs))
    if not c.sets:
        c.done("UNSUPPORTED", "no complete test data set")


def import_case(c, kbin, work):
    """Imports (freezing inputs the importer asks for); sets c.script and c.live."""
    frozen, dims = {}, {}
    d = os.path.join(work, c.cname)
    while True:
        args = [kbin, "import", os.path.join(c.path, "model.onnx"), "-o", d, "--name", c.cname]
        for name, i in frozen.items():
            args += ["--freeze", f"{name}={c.sets[0][0][i]}"]
        for name, n in dims.items():
            args += ["-D", f"{name}={n}"]
        rc, err = kiln(args)
        if rc == 0:
            break
        m = re.search(r"input '(.+?)': dim (\d+) is the dynamic dim '(.+?)'", err)
        if rc == 1 and m and m.group(1) in c.inputs and m.group(3) not in dims:
            shape = read_pb(c.sets[0][0][c.inputs.index(m.group(1))]).shape
            if shape[int(m.group(2))] == 0:   # -D takes sizes >= 1: Kiln has no empty run-time inputs
                return c.done("UNSUPPORTED", f"input '{m.group(1)}': the test data give dynamic dim "
                                             f"'{m.group(3)}' the size 0 (Kiln has no empty run-time inputs)")
            dims[m.group(3)] = shape[int(m.group(2))]
            continue
        m = re.search(r"use --freeze (.+?)=FILE\.pb", err)
        if rc == 1 and m and m.group(1) in c.inputs and m.group(1) not in frozen and len(c.sets) == 1:
            frozen[m.group(1)] = c.inputs.index(m.group(1))
            continue
        if rc == 1 and UNSUPPORTED.search(err) and err.count("\n") == 0:
            return c.done("UNSUPPORTED", err.split("model.onnx: ", 1)[-1])
        return c.done("FAIL", f"import exited {rc}: {err[-300:]}")
    c.dir = d
    c.script = os.path.join(d, c.cname + ".lua")
    text = open(c.script).read()
    c.in_names = re.findall(r'kiln\.input\("([^"]+)"', text)
    c.out_names = re.findall(r'kiln\.output\("([^"]+)"', text)
    # inputs the model declares empty (a dim of 0) are constants of the script, not inputs
    c.live = [i for i in range(len(c.inputs)) if c.inputs[i] not in frozen and read_pb(c.sets[0][0][i]).size > 0]
    if len(c.in_names) != len(c.live) or len(c.out_names) != len(c.outputs):
        c.done("FAIL", "the script's inputs/outputs do not match the model's")


def run_interp(c, kbin):
    """The interpreter on every data set; writes the raw inputs the C driver reads."""
    for s, (ins, outs) in enumerate(c.sets):
        args = [kbin, "run", c.script, "--limit", "1", "--save", os.path.join(c.dir, f"interp{s}")]
        for k, i in enumerate(c.live):
            a = to_kiln(widen(read_pb(ins[i]), c.in_types[i]))
            if a is None:
                return c.done("UNSUPPORTED", f"input {c.inputs[i]}: dtype {read_pb(ins[i]).dtype} or values outside int32")
            np.save(os.path.join(c.dir, f"in{s}_{k}.npy"), a)
            a.tofile(os.path.join(c.dir, f"in{s}_{k}.bin"))
            args += ["--input", f"{c.in_names[k]}={os.path.join(c.dir, f'in{s}_{k}.npy')}"]
        rc, err = kiln(args)
        if rc != 0:
            return c.done("FAIL", f"kiln run exited {rc}: {err[-300:]}")
        kind = tol_kind(c.ops)
        for k, o in enumerate(outs):
            ref = widen(read_pb(o), c.out_types[k])
            got = np.load(os.path.join(c.dir, f"interp{s}", c.out_names[k] + ".npy"))
            compare.worst = c.worst
            why = compare(got, ref, kind)
            c.worst = compare.worst
            if why:
                return c.done("FAIL", f"interpreter, set {s}, output {c.outputs[k]}: {why}")


DRIVER_HEAD = r"""/* Generated by tests/onnx/run_node.py: runs several imported models' generated C. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef void (*RunV)(const void *, void *, const void *const *, void *const *);
typedef struct { const char *name; RunV run; size_t wfile, arena; int nin, nout; const size_t *isz, *osz; } Model;
"""

DRIVER_MAIN = r"""
/* C11's aligned_alloc wants a size that is a multiple of the alignment. */
static void *alloc64(size_t n) { return aligned_alloc(64, (n + 64 + 63) / 64 * 64); }
static void *slurp(const char *path, size_t n) {
  void *p = alloc64(n);
  FILE *f = fopen(path, "rb");
  if (!f || fread(p, 1, n, f) != n) { fprintf(stderr, "cannot read %s\n", path); exit(2); }
  fclose(f);
  return p;
}
/* argv: DIR SET per model, in table order ("-" skips a model). */
int main(int argc, char **argv) {
  for (int m = 0; m < (int)(sizeof models / sizeof *models) && 2 * m + 2 < argc; m++) {
    const Model *md = &models[m];
    const char *dir = argv[1 + 2 * m], *set = argv[2 + 2 * m];
    if (strcmp(dir, "-") == 0) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/c/%s.weights", dir, md->name);
    unsigned char *w = slurp(path, md->wfile);
    void *arena = alloc64(md->arena);
    const void *in[64]; void *out[64];
    for (int i = 0; i < md->nin; i++) {
      snprintf(path, sizeof path, "%s/in%s_%d.bin", dir, set, i);
      in[i] = slurp(path, md->isz[i]);
    }
    for (int i = 0; i < md->nout; i++) out[i] = alloc64(md->osz[i]);
    md->run(w + 64, arena, in, out);
    for (int i = 0; i < md->nout; i++) {
      snprintf(path, sizeof path, "%s/c%s_%d.bin", dir, set, i);
      FILE *f = fopen(path, "wb");
      if (!f || fwrite(out[i], 1, md->osz[i], f) != md->osz[i]) { fprintf(stderr, "cannot write %s\n", path); return 2; }
      fclose(f);
      free(out[i]);
    }
    for (int i = 0; i < md->nin; i++) free((void *)in[i]);
    free(w);
    free(arena);
  }
  return 0;
}
"""


def run_c_batch(batch, work, cc, bi):
    """Builds one driver for the batch's generated C, runs every case's data sets, compares."""
    src = [DRIVER_HEAD]
    for c in batch:
        src.append(f'#include "{c.dir}/c/{c.cname}.h"\n')
        u = c.cname.upper()
        src.append(f"static const size_t {c.cname}_isz[] = {u}_INPUT_SIZES, {c.cname}_osz[] = {u}_OUTPUT_SIZES;\n"
                   if len(c.live) else f"static const size_t {c.cname}_isz[] = {{0}}, {c.cname}_osz[] = {u}_OUTPUT_SIZES;\n")
    src.append("static const Model models[] = {\n")
    for c in batch:
        u = c.cname.upper()
        src.append(f'  {{"{c.cname}", {c.cname}_run_v, {u}_WEIGHTS_FILE_SIZE, {u}_ARENA_SIZE, {u}_NUM_INPUTS, '
                   f"{u}_NUM_OUTPUTS, {c.cname}_isz, {c.cname}_osz}},\n")
    src.append("};\n" + DRIVER_MAIN)
    drv = os.path.join(work, f"driver{bi}.c")
    with open(drv, "w") as f:
        f.write("".join(src))
    exe = os.path.join(work, f"driver{bi}")
    flags = [cc, "-std=c11", "-O1", "-Wall", "-Wextra", "-Wpedantic", "-Werror"]
    # Two compilers at a time, each on half the batch (gcc runs one cc1 per file, ~60 ms each):
    # t_onnx is the suite's longest, often running alone at the end of make test.
    srcs = [f"{c.dir}/c/{c.cname}.c" for c in batch]
    halves = [srcs[:len(srcs) // 2], srcs[len(srcs) // 2:]]
    objdir = os.path.join(work, f"obj{bi}")
    os.makedirs(objdir, exist_ok=True)
    procs = [subprocess.Popen(flags + ["-c"] + h, cwd=objdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for h in halves if h]
    errs = [pr.communicate()[1] for pr in procs]   # waits for both
    p = None
    if all(pr.returncode == 0 for pr in procs):
        objs = [os.path.join(objdir, os.path.basename(f)[:-2] + ".o") for f in srcs]
        p = subprocess.run(flags + ["-o", exe, drv] + objs + ["-lm"], capture_output=True, text=True)
    if p is None or p.returncode != 0:
        why = "".join(errs) if p is None else p.stderr
        for c in batch:
            c.done("FAIL", f"generated C of the batch does not compile: {why[:300]}")
        return
    nsets = max(len(c.sets) for c in batch)
    for s in range(nsets):
        args = [exe]
        for c in batch:
            args += [c.dir, str(s)] if s < len(c.sets) and c.status is None else ["-", "0"]
        p = subprocess.run(args, capture_output=True, text=True)
        if p.returncode != 0:
            for c in batch:
                c.done("FAIL", f"C driver exited {p.returncode}: {p.stderr[:200]}")
            return
        for c in batch:
            if s >= len(c.sets) or c.status is not None:
                continue
            kind = tol_kind(c.ops)
            for k, o in enumerate(c.sets[s][1]):
                ref = widen(read_pb(o), c.out_types[k])
                interp = np.load(os.path.join(c.dir, f"interp{s}", c.out_names[k] + ".npy"))
                got = np.fromfile(os.path.join(c.dir, f"c{s}_{k}.bin"), dtype=interp.dtype).reshape(interp.shape)
                compare.worst = c.worst
                why = compare(got, ref, kind)
                c.worst = compare.worst
                if why:
                    c.done("FAIL", f"generated C, set {s}, output {c.outputs[k]}: {why}")
                    break


def main():
    kbin, data, work = sys.argv[1:4]
    results = sys.argv[sys.argv.index("--results") + 1] if "--results" in sys.argv else None
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    label = sys.argv[sys.argv.index("--label") + 1] if "--label" in sys.argv else "node"
    cc = os.environ.get("CC", "cc")
    names = sorted(n for n in os.listdir(data) if os.path.isfile(os.path.join(data, n, "model.onnx")))
    if only:
        names = [n for n in names if only in n]
    cases = [Case(n, os.path.join(data, n), i) for i, n in enumerate(names)]
    built = []
    for c in cases:
        try:
            load_case(c)
            if c.status is None:
                import_case(c, kbin, work)
            if c.status is None:
                run_interp(c, kbin)
            if c.status is None:
                rc, err = kiln([kbin, "build", c.script, "-o", os.path.join(c.dir, "c")])
                if rc != 0:
                    c.done("FAIL", f"kiln build exited {rc}: {err[-300:]}")
                else:
                    built.append(c)
        except subprocess.TimeoutExpired:
            c.done("FAIL", "timed out")
        except Exception as e:  # a reader error in the test data itself
            c.done("FAIL", f"runner: {type(e).__name__}: {e}")
    for bi in range(0, len(built), BATCH):
        run_c_batch(built[bi:bi + BATCH], work, cc, bi // BATCH)
    rows = []
    for c in cases:
        if c.status is None and tol_kind(c.ops) == "model":
            c.why = f"max err/tol {c.worst:.3f}"
        if c.status == "FAIL" and c.name in DATA_ERRORS:
            c.status, c.why = "DATAERR", f"test data error: {DATA_ERRORS[c.name]}"   # Kiln's failure says the same
        c.done("PASS", c.why)
        sep = " " if c.status == "PASS" else ": "
        line = f"{c.status} onnx/{label}/{c.name}" + (f"{sep}({c.why})" if c.why and c.status == "PASS" else
                                                   f"{sep}{c.why}" if c.why else "")
        print(line.replace("\n", " "))
        rows.append(f"{c.name}\t{' '.join(c.ops)}\t{c.status}\t{c.why}".replace("\n", " "))
    n = {s: sum(c.status == s for c in cases) for s in ("PASS", "FAIL", "UNSUPPORTED", "DATAERR")}
    print(f"onnx node tests: {len(cases)} cases: {n['PASS']} pass, {n['FAIL']} fail, {n['UNSUPPORTED']} unsupported"
          + (f", {n['DATAERR']} test-data errors" if n["DATAERR"] else "")
          + f" ({100.0 * n['PASS'] / max(1, len(cases)):.1f}% pass)")
    if results:
        with open(results, "w") as f:
            f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()

"""ctcheck.py — optional: Apple's coremltools reads Kiln's packages back (when installed).

usage: ctcheck.py PKG.mlpackage...     (prints PASS/FAIL lines; exit 0)

For each package: model.mlmodel parses with coremltools' own generated protobuf classes
(the full schema, not Kiln's subset), and coremltools' MIL-proto loader
(converters/mil/frontend/milproto) turns the program into its Python MIL, which builds
every op through its registered definition: the op exists in the opset of the spec
version, every input has an allowed type and, where required, is a constant, and the
output type it infers equals the declared one. Stateful programs go through the
loader's write_state -> coreml_update_state path. The description must name the
program's functions (multifunction) or describe "main".

This runs nothing on Core ML. t_coreml runs it only where `import coremltools` works
(not on this project's Linux machines, where coremltools is not installable; the
packages in docs/coreml.md were checked once by hand with coremltools' source, see
there).
"""
import os
import sys


def check(pkg):
    from coremltools import proto
    from coremltools.converters.mil.frontend.milproto import load as milproto

    spec = proto.Model_pb2.Model()
    with open(os.path.join(pkg, "Data/com.apple.CoreML/model.mlmodel"), "rb") as f:
        spec.ParseFromString(f.read())
    prog = milproto.load(spec, spec.specificationVersion, os.path.join(pkg, "Data/com.apple.CoreML/weights"))
    desc = spec.description
    funcs = list(prog.functions.keys())
    if desc.functions:
        named = [f.name for f in desc.functions]
        if sorted(named) != sorted(funcs) or desc.defaultFunctionName not in funcs:
            return "description functions %s (default %r) vs program %s" % (named, desc.defaultFunctionName, funcs)
        fdescs = {f.name: f for f in desc.functions}
    else:
        if funcs != ["main"]:
            return "a single-function description, program functions %s" % funcs
        fdescs = {"main": desc}
    nops = 0
    for name, fn in prog.functions.items():
        fd = fdescs[name]
        states = [i.name for i in fd.state]
        inputs = [i.name for i in fd.input]
        got = list(fn.inputs.keys())
        if sorted(got) != sorted(inputs + states):
            return "function %s inputs %s vs description %s + states %s" % (name, got, inputs, states)
        outs = [v.name for v in fn.outputs]
        if outs != [o.name for o in fd.output]:
            return "function %s outputs %s vs description %s" % (name, outs, [o.name for o in fd.output])
        nops += len(fn.operations)
    return "ok: %d function(s) %s, %d ops in coremltools' MIL" % (len(funcs), ", ".join(funcs), nops)


def main():
    for pkg in sys.argv[1:]:
        name = os.path.basename(pkg.rstrip("/"))
        try:
            res = check(pkg)
        except Exception as e:  # noqa: BLE001 -- any loader error is the finding
            res = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        if res.startswith("ok: "):
            print("PASS coreml/coremltools/%s: %s" % (name, res[4:]))
        else:
            print("FAIL coreml/coremltools/%s: %s" % (name, res))


main()

"""narrow_int.py OUT_DIR — ONNX graphs of 8- and 16-bit integer arithmetic whose results
overflow their type, in the layout of ONNX's node tests (OUT_DIR/narrow_<dtype>/...), for
run_node.py. Kiln carries these integers as int32 and wraps each result to the narrow
width (onnx.lua, onnx_wrap); ONNX's own tests barely overflow, so these do, over the
whole range of each type: Add, Sub, Mul (uint16 products reach 2^32, past int32), Neg,
Abs (-128 stays -128), Div (-128 / -1 wraps), Mod in both modes, BitShift and Cast down
from int32; and float16, which Kiln carries as float32 and rounds to (half_case). The
expected outputs are numpy's, whose integer arithmetic wraps; seeded."""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

TYPES = {"uint8": (np.uint8, TensorProto.UINT8), "int8": (np.int8, TensorProto.INT8),
         "uint16": (np.uint16, TensorProto.UINT16), "int16": (np.int16, TensorProto.INT16)}
N = 64


def case(out, name, dtype):
    np_t, onnx_t = TYPES[dtype]
    info = np.iinfo(np_t)
    rng = np.random.default_rng(len(name))
    x = rng.integers(info.min, info.max, N, endpoint=True).astype(np_t)
    y = rng.integers(info.min, info.max, N, endpoint=True).astype(np_t)
    x[:4] = [info.min, info.max, info.min, 0]
    y[:4] = [-1 if info.min < 0 else 1, info.max, info.min if info.min < 0 else 1, info.min or 1]
    y[y == 0] = 1                              # no division by zero
    s = rng.integers(0, info.bits + 3, N).astype(np_t)   # shifts past the width too
    w = rng.integers(-2**31, 2**31 - 1, N, endpoint=True).astype(np.int32)
    with np.errstate(over="ignore"):
        want = {
            "add": x + y, "sub": x - y, "mul": x * y, "neg": -x, "abs": np.abs(x),
            "div": np.array([np.trunc(a / b) for a, b in zip(x.astype(np.int64), y.astype(np.int64))]).astype(np.int64).astype(np_t),
            "fmod": np.fmod(x, y), "mod": np.mod(x, y), "cast": w.astype(np_t),
        }
        if info.min == 0:
            sh = s.astype(np.int64)
            want["shl"] = np.where(sh >= info.bits, 0, x.astype(np.int64) << np.minimum(sh, info.bits)).astype(np_t)
            want["shr"] = (x.astype(np.int64) >> sh).astype(np_t)
    nodes = [helper.make_node("Add", ["x", "y"], ["add"]), helper.make_node("Sub", ["x", "y"], ["sub"]),
             helper.make_node("Mul", ["x", "y"], ["mul"]), helper.make_node("Neg", ["x"], ["neg"]),
             helper.make_node("Abs", ["x"], ["abs"]), helper.make_node("Div", ["x", "y"], ["div"]),
             helper.make_node("Mod", ["x", "y"], ["fmod"], fmod=1), helper.make_node("Mod", ["x", "y"], ["mod"]),
             helper.make_node("Cast", ["w"], ["cast"], to=onnx_t)]
    if "shl" in want:
        nodes += [helper.make_node("BitShift", ["x", "s"], ["shl"], direction="LEFT"),
                  helper.make_node("BitShift", ["x", "s"], ["shr"], direction="RIGHT")]
    ins = [("x", x, onnx_t), ("y", y, onnx_t), ("s", s, onnx_t), ("w", w, TensorProto.INT32)]
    if "shl" not in want:
        ins = [i for i in ins if i[0] != "s"]
    outs = [n.output[0] for n in nodes]
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info(n, t, [N]) for n, _, t in ins],
                          [helper.make_tensor_value_info(o, onnx_t, [N]) for o in outs])
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), os.path.join(d, "model.onnx"))
    for i, (n, a, _) in enumerate(ins):
        with open(os.path.join(d, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(a, n).SerializeToString())
    for i, o in enumerate(outs):
        with open(os.path.join(d, "test_data_set_0", f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(np.asarray(want[o], dtype=np_t), o).SerializeToString())


def half_case(out):
    """narrow_float16: Cast float32 -> float16 of a run-time input (kiln.round_f16), of a
    constant (folded by the importer), and of int32 values past 2^24 and 65504, ties of
    every binade and half subnormals included; then float16 Max and Mod (fmod, exact)."""
    np.seterr(all="ignore")    # inf and NaN are among the expected values
    rng = np.random.default_rng(10)
    ties = ((rng.integers(0x38800000, 0x477ff000, 40).astype(np.uint32) & np.uint32(0xffffe000))
            | np.uint32(0x1000)).view(np.float32)
    x = np.concatenate([ties, rng.standard_normal(20).astype(np.float32) * 1000,
                        np.array([65519.996, 65520, -7e-8, 3 * 2**-26, 2**-25], np.float32)])
    c = np.concatenate([rng.standard_normal(60).astype(np.float32) * 100, np.float32([2**-25, 3 * 2**-26, 1e-3, -0.5, 65520])])
    w = rng.integers(-2**31, 2**31 - 1, len(x), endpoint=True).astype(np.int32)
    n = len(x)
    h = lambda a: a.astype(np.float16)
    want = {"xh": h(x), "ch": h(c), "wh": h(w.astype(np.float32)), "mx": np.fmax(h(x), h(c)),
            "md": np.fmod(h(c), np.where(h(x) == 0, np.float16(1), h(x)))}
    nodes = [helper.make_node("Cast", ["x"], ["xh"], to=TensorProto.FLOAT16),
             helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(c, "c")),
             helper.make_node("Cast", ["c"], ["ch"], to=TensorProto.FLOAT16),
             helper.make_node("Cast", ["w"], ["wh"], to=TensorProto.FLOAT16),
             helper.make_node("Max", ["xh", "ch"], ["mx"]),
             helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(np.float16([1]), "one")),
             helper.make_node("Constant", [], ["zero"], value=numpy_helper.from_array(np.float16([0]), "zero")),
             helper.make_node("Equal", ["xh", "zero"], ["z"]),
             helper.make_node("Where", ["z", "one", "xh"], ["nz"]),
             helper.make_node("Mod", ["ch", "nz"], ["md"], fmod=1)]
    outs = ["xh", "ch", "wh", "mx", "md"]
    g = helper.make_graph(nodes, "narrow_float16", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n]),
                                                    helper.make_tensor_value_info("w", TensorProto.INT32, [n])],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT16, [n]) for o in outs])
    d = os.path.join(out, "narrow_float16")
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), os.path.join(d, "model.onnx"))
    for i, (nm, a) in enumerate((("x", x), ("w", w))):
        with open(os.path.join(d, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(a, nm).SerializeToString())
    for i, o in enumerate(outs):
        with open(os.path.join(d, "test_data_set_0", f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(np.asarray(want[o], dtype=np.float16), o).SerializeToString())


def shift_case(out):
    """narrow_uint32_shift: BitShift right of uint32 values below 2^31 (what Kiln carries
    in int32) by 0..40, and Mod of them, against Python's integers."""
    rng = np.random.default_rng(32)
    x = rng.integers(0, 2**31, 64).astype(np.uint32)
    x[:4] = [2**31 - 1, 2**24 + 1, 65535, 65536]
    s = rng.integers(0, 41, 64).astype(np.uint32)
    s[:4] = [0, 1, 16, 17]
    y = rng.integers(1, 2**31, 64).astype(np.uint32)
    want = {"shr": np.array([int(a) >> int(b) for a, b in zip(x, s)], np.uint32),
            "mod": np.array([int(a) % int(b) for a, b in zip(x, y)], np.uint32)}
    nodes = [helper.make_node("BitShift", ["x", "s"], ["shr"], direction="RIGHT"), helper.make_node("Mod", ["x", "y"], ["mod"])]
    ins = [("x", x), ("s", s), ("y", y)]
    g = helper.make_graph(nodes, "narrow_uint32_shift", [helper.make_tensor_value_info(n, TensorProto.UINT32, [64]) for n, _ in ins],
                          [helper.make_tensor_value_info(o, TensorProto.UINT32, [64]) for o in want])
    d = os.path.join(out, "narrow_uint32_shift")
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), os.path.join(d, "model.onnx"))
    for i, (n, a) in enumerate(ins):
        with open(os.path.join(d, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(a, n).SerializeToString())
    for i, o in enumerate(want):
        with open(os.path.join(d, "test_data_set_0", f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(want[o], o).SerializeToString())


def main():
    for dtype in TYPES:
        case(sys.argv[1], f"narrow_{dtype}", dtype)
    half_case(sys.argv[1])
    shift_case(sys.argv[1])


if __name__ == "__main__":
    main()

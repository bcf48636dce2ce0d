"""narrow_int.py OUT_DIR — ONNX graphs of 8- and 16-bit integer arithmetic whose results
overflow their type, in the layout of ONNX's node tests (OUT_DIR/narrow_<dtype>/...), for
run_node.py. Kiln carries these integers as int32 and wraps each result to the narrow
width (onnx.lua, onnx_wrap); ONNX's own tests barely overflow, so these do, over the
whole range of each type: Add, Sub, Mul (uint16 products reach 2^32, past int32), Neg,
Abs (-128 stays -128), Div (-128 / -1 wraps), Mod in both modes, BitShift and Cast down
from int32. The expected outputs are numpy's, whose integer arithmetic wraps; seeded."""
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


def main():
    for dtype in TYPES:
        case(sys.argv[1], f"narrow_{dtype}", dtype)


if __name__ == "__main__":
    main()

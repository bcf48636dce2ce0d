"""long_chain.py OUT_DIR — a 220-node ONNX graph (Tanh and Add alternating) in the layout of
ONNX's node tests (OUT_DIR/long_chain/...), for run_node.py: more values than Lua's 200
locals, so the imported script keeps them in a table (onnx.lua, use_table). The expected
output is numpy in float64 from the same float32 input; seeded."""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save


def main():
    out = os.path.join(sys.argv[1], "long_chain")
    os.makedirs(os.path.join(out, "test_data_set_0"), exist_ok=True)
    nodes, prev = [], "x"
    for i in range(220):
        op = "Add" if i % 2 else "Tanh"
        nodes.append(helper.make_node(op, [prev, prev] if op == "Add" else [prev], [f"v{i}"], name=f"n{i}"))
        prev = f"v{i}"
    g = helper.make_graph(nodes, "long_chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [4, 3])])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), os.path.join(out, "model.onnx"))
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    y = x.astype(np.float64)
    for i in range(220):
        y = y + y if i % 2 else np.tanh(y)
    d = os.path.join(out, "test_data_set_0")
    with open(os.path.join(d, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x, "x").SerializeToString())
    with open(os.path.join(d, "output_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(y.astype(np.float32), prev).SerializeToString())


if __name__ == "__main__":
    main()
